//! Hash-set mode (paper §3.4.3): a concurrent set of keys of at most 8
//! bytes, on the inlined map with an empty value.
//!
//! The paper's set packs keys into 8-byte slots. Here a set's slot keeps
//! its 16 bytes: the value word carries the key of a committed but
//! unpublished insert (the pending state that keeps two inserts of one key
//! apart, hazard 2), so a set holds as many keys per bin as a map. What a
//! set saves is the API's: no value to store, pass or return.

use crate::batch::{Request, Response, StopOn};
use crate::driver::or_panic;
use crate::error::Error;
use crate::hash::DefaultHashBuilder;
use crate::map::{Iter, Map};
use crate::word::Inline;
use core::fmt;
use core::hash::BuildHasher;

/// Requests per pass when a batch of set requests is turned into map
/// requests on the stack (several prefetch windows, so the pipeline runs
/// full between passes).
const PASS: usize = 256;

/// A concurrent set of keys of at most 8 bytes ([`Inline`]), lock-free like
/// [`Map`], with the same batches and prefetching.
///
/// ```
/// let s = dlht::Set::<u64>::new();
/// assert!(s.insert(7));
/// assert!(!s.insert(7)); // already there
/// assert!(s.contains(&7));
/// assert!(s.remove(&7));
/// assert!(!s.contains(&7));
/// ```
pub struct Set<K, S = DefaultHashBuilder> {
    pub(crate) map: Map<K, (), S>,
}

/// One request of a [`Set::batch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetRequest<K> {
    /// Is the key present?
    Contains(K),
    /// Insert the key; true if it was absent.
    Insert(K),
    /// Remove the key; true if it was present.
    Remove(K),
}

impl<K: Inline> Set<K, DefaultHashBuilder> {
    /// An empty set.
    pub fn new() -> Self {
        Set { map: Map::new() }
    }

    /// An empty set sized for `n` keys. Panics if the index cannot be
    /// allocated; see [`try_with_capacity`](Self::try_with_capacity).
    pub fn with_capacity(n: usize) -> Self {
        Set { map: Map::with_capacity(n) }
    }

    /// An empty set sized for `n` keys, or why it cannot be made.
    pub fn try_with_capacity(n: usize) -> Result<Self, Error> {
        Ok(Set { map: Map::try_with_capacity(n)? })
    }
}

impl<K: Inline> Default for Set<K, DefaultHashBuilder> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Inline, S: BuildHasher> Set<K, S> {
    /// An empty set using `hasher`.
    ///
    /// ```
    /// use std::collections::hash_map::RandomState;
    /// let s = dlht::Set::<u64, RandomState>::with_hasher(RandomState::new());
    /// assert!(s.insert(3));
    /// ```
    pub fn with_hasher(hasher: S) -> Self {
        Set { map: Map::with_hasher(hasher) }
    }

    /// An empty set for `n` keys using `hasher`. Panics on allocation
    /// failure; see [`try_with_capacity_and_hasher`](Self::try_with_capacity_and_hasher).
    pub fn with_capacity_and_hasher(n: usize, hasher: S) -> Self {
        Set { map: Map::with_capacity_and_hasher(n, hasher) }
    }

    /// An empty set for `n` keys using `hasher`, or why it cannot be made.
    pub fn try_with_capacity_and_hasher(n: usize, hasher: S) -> Result<Self, Error> {
        Ok(Set { map: Map::try_with_capacity_and_hasher(n, hasher)? })
    }

    /// The set's hasher.
    pub fn hasher(&self) -> &S {
        self.map.hasher()
    }

    /// Insert `key`: true if it was absent. Panics only if the index must
    /// grow and cannot; see [`try_insert`](Self::try_insert).
    #[inline]
    pub fn insert(&self, key: K) -> bool {
        or_panic(self.try_insert(key))
    }

    /// Like [`insert`](Self::insert), with a failure to grow as an error.
    #[inline]
    pub fn try_insert(&self, key: K) -> Result<bool, Error> {
        Ok(self.map.try_insert(key, ())?.is_ok())
    }

    /// True if `key` is present.
    #[inline]
    pub fn contains(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    /// Remove `key`: true if it was present.
    #[inline]
    pub fn remove(&self, key: &K) -> bool {
        self.map.remove(key).is_some()
    }

    /// Number of keys (see [`Map::len`]).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if the set holds no key.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keys the index holds before it must grow.
    pub fn capacity(&self) -> usize {
        self.map.capacity()
    }

    /// Bytes in use, without a scan (see [`Memory`](crate::Memory)).
    pub fn memory(&self) -> crate::Memory {
        self.map.memory()
    }

    /// A snapshot of the index's shape and occupancy (see [`Map::stats`]).
    pub fn stats(&self) -> crate::Stats {
        self.map.stats()
    }

    /// Start loading `key`'s bin into the cache (see [`Map::prefetch`]).
    ///
    /// ```
    /// let s = dlht::Set::<u64>::new();
    /// s.prefetch(&7);
    /// assert!(!s.contains(&7));
    /// ```
    #[inline]
    pub fn prefetch(&self, key: &K) {
        self.map.prefetch(key)
    }

    /// Keep only the keys `keep` accepts, removing the others; concurrent-safe
    /// and non-blocking, with [`Map::retain`]'s guarantees (a key present for
    /// the whole call is kept or removed as `keep` says; `keep` may run more
    /// than once for a key). Returns how many keys it removed.
    ///
    /// ```
    /// let s: dlht::Set<u64> = (0..10).collect();
    /// assert_eq!(s.retain(|k| k % 2 == 0), 5);
    /// assert_eq!(s.len(), 5);
    /// assert!(s.contains(&4) && !s.contains(&5));
    /// ```
    pub fn retain(&self, mut keep: impl FnMut(K) -> bool) -> usize {
        self.map.retain(|k, ()| keep(k))
    }

    /// Remove every key (see [`Map::clear`]): every key present for the
    /// whole call is gone afterwards. Returns how many keys it removed.
    ///
    /// ```
    /// let s: dlht::Set<u64> = (0..10).collect();
    /// assert_eq!(s.clear(), 10);
    /// assert!(s.is_empty());
    /// ```
    pub fn clear(&self) -> usize {
        self.map.clear()
    }

    /// Grow ahead of a known load so that `additional` more keys fit
    /// without a resize (see [`Map::reserve`]). Panics if the index cannot
    /// grow; see [`try_reserve`](Self::try_reserve).
    ///
    /// ```
    /// let s = dlht::Set::<u64>::new();
    /// s.reserve(100_000);
    /// assert!(s.capacity() >= 100_000);
    /// ```
    pub fn reserve(&self, additional: usize) {
        self.map.reserve(additional)
    }

    /// Like [`reserve`](Self::reserve), with a failure to grow as an error;
    /// the set is unchanged then.
    ///
    /// ```
    /// let s = dlht::Set::<u64>::new();
    /// assert!(s.try_reserve(usize::MAX).is_err());
    /// assert!(s.try_reserve(1000).is_ok());
    /// ```
    pub fn try_reserve(&self, additional: usize) -> Result<(), Error> {
        self.map.try_reserve(additional)
    }

    /// Shrink the index to the smallest that holds the set's keys (see
    /// [`Map::shrink_to_fit`]); non-blocking like any resize.
    ///
    /// ```
    /// let s: dlht::Set<u64> = (0..100_000).collect();
    /// let big = s.capacity();
    /// s.retain(|k| k < 10);
    /// s.shrink_to_fit();
    /// assert!(s.capacity() < big / 100);
    /// assert_eq!(s.len(), 10);
    /// assert!(s.contains(&3));
    /// ```
    pub fn shrink_to_fit(&self) {
        self.map.shrink_to_fit()
    }

    /// Shrink the index, keeping room for at least `min_capacity` keys (see
    /// [`Map::shrink_to`]).
    ///
    /// ```
    /// let s = dlht::Set::<u64>::with_capacity(1 << 20);
    /// s.insert(1);
    /// s.shrink_to(1000);
    /// assert!(s.capacity() >= 1000 && s.capacity() < 1 << 16);
    /// ```
    pub fn shrink_to(&self, min_capacity: usize) {
        self.map.shrink_to(min_capacity)
    }

    /// A weakly consistent iterator over the keys (see [`Iter`]).
    pub fn iter(&self) -> impl Iterator<Item = K> + '_ {
        let keys: Iter<'_, K, (), S> = self.map.iter();
        keys.map(|(k, ())| k)
    }

    /// Membership of many keys at once, prefetching ahead (as
    /// [`Map::get_many`]): `out[i]` says whether `keys[i]` is present.
    ///
    /// ```
    /// let s = dlht::Set::<u32>::new();
    /// s.insert(3);
    /// let mut out = [false; 2];
    /// s.contains_many(&[3, 4], &mut out).unwrap();
    /// assert_eq!(out, [true, false]);
    /// ```
    pub fn contains_many(&self, keys: &[K], out: &mut [bool]) -> Result<(), Error> {
        if keys.len() != out.len() {
            return Err(Error::LengthMismatch { requests: keys.len(), responses: out.len() });
        }
        let mut found = [None; PASS];
        for (keys, out) in keys.chunks(PASS).zip(out.chunks_mut(PASS)) {
            self.map.get_many(keys, &mut found[..keys.len()])?;
            for (o, f) in out.iter_mut().zip(&found) {
                *o = f.is_some();
            }
        }
        Ok(())
    }

    /// Run a batch of requests in order, prefetching ahead (as
    /// [`Map::batch`]): `out[i]` is the result of `requests[i]`. Returns
    /// how many ran (all, or up to an error growing the index, after which
    /// the rest are false).
    ///
    /// ```
    /// use dlht::{Set, SetRequest};
    /// let s = Set::<u64>::new();
    /// let reqs = [SetRequest::Insert(1), SetRequest::Contains(1), SetRequest::Remove(2)];
    /// let mut out = [false; 3];
    /// assert_eq!(s.batch(&reqs, &mut out), Ok(3));
    /// assert_eq!(out, [true, true, false]);
    /// ```
    pub fn batch(&self, requests: &[SetRequest<K>], out: &mut [bool]) -> Result<usize, Error> {
        self.batch_with(requests, out, StopOn::Never)
    }

    /// [`batch`](Self::batch), stopping as `stop` says: with
    /// [`StopOn::Failure`], after the first request that does not succeed
    /// (an insert of a present key, a remove or contains of an absent one);
    /// the requests after it do not run and read false. Returns how many
    /// ran. Requests run in order, so a batch of inserts of sorted keys is
    /// the paper's order-preserving lock acquisition (§5.3.3): it takes
    /// the keys up to the first one held by another, and the caller gives
    /// back the ones it took.
    ///
    /// ```
    /// use dlht::{Set, SetRequest, StopOn};
    /// let locks = Set::<u64>::new();
    /// locks.insert(3);
    /// let reqs = [SetRequest::Insert(1), SetRequest::Insert(3), SetRequest::Insert(5)];
    /// let mut out = [false; 3];
    /// assert_eq!(locks.batch_with(&reqs, &mut out, StopOn::Failure), Ok(2));
    /// assert_eq!(out, [true, false, false]);
    /// assert!(locks.contains(&1) && !locks.contains(&5));
    /// ```
    pub fn batch_with(
        &self,
        requests: &[SetRequest<K>],
        out: &mut [bool],
        stop: StopOn,
    ) -> Result<usize, Error> {
        if requests.len() != out.len() {
            return Err(Error::LengthMismatch { requests: requests.len(), responses: out.len() });
        }
        out.fill(false);
        let mut reqs = [Request::Get(K::from_word(0)); PASS];
        let mut resps = [Response::NotExecuted; PASS];
        let mut ran = 0;
        for (chunk, out) in requests.chunks(PASS).zip(out.chunks_mut(PASS)) {
            for (r, q) in reqs.iter_mut().zip(chunk) {
                *r = match *q {
                    SetRequest::Contains(k) => Request::Get(k),
                    SetRequest::Insert(k) => Request::Insert(k, ()),
                    SetRequest::Remove(k) => Request::Remove(k),
                };
            }
            let n = chunk.len();
            let done = self.map.batch(&reqs[..n], &mut resps[..n], stop);
            for (o, r) in out.iter_mut().zip(&resps[..n]) {
                *o = r.succeeded();
            }
            let done = done?;
            ran += done;
            if stop == StopOn::Failure && resps[..done].iter().any(|r| !r.succeeded()) {
                break;
            }
        }
        Ok(ran)
    }
}

impl<K: Inline, S: BuildHasher> Extend<K> for Set<K, S> {
    fn extend<I: IntoIterator<Item = K>>(&mut self, iter: I) {
        for k in iter {
            self.insert(k);
        }
    }
}

impl<K: Inline, S: BuildHasher + Default> FromIterator<K> for Set<K, S> {
    fn from_iter<I: IntoIterator<Item = K>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut s = or_panic(Set::try_with_capacity_and_hasher(iter.size_hint().0, S::default()));
        s.extend(iter);
        s
    }
}

impl<K: Inline + fmt::Debug, S: BuildHasher> fmt::Debug for Set<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// A new set with the same keys and a clone of the hasher (a weakly
/// consistent copy under concurrent updates, as for `Map`).
///
/// ```
/// let s: dlht::Set<u64> = (0..10).collect();
/// let c = s.clone();
/// s.remove(&1);
/// assert!(c.contains(&1) && c.len() == 10);
/// ```
impl<K: Inline, S: BuildHasher + Clone> Clone for Set<K, S> {
    fn clone(&self) -> Self {
        Set { map: self.map.clone() }
    }
}

/// Equal when both hold the same keys, whatever their hashers.
///
/// ```
/// let a: dlht::Set<u64> = [1, 2].into_iter().collect();
/// let b: dlht::Set<u64> = [2, 1].into_iter().collect();
/// assert_eq!(a, b);
/// ```
impl<K: Inline, S: BuildHasher, S2: BuildHasher> PartialEq<Set<K, S2>> for Set<K, S> {
    fn eq(&self, other: &Set<K, S2>) -> bool {
        self.len() == other.len() && self.iter().all(|k| other.contains(&k))
    }
}

impl<K: Inline, S: BuildHasher> Eq for Set<K, S> {}
