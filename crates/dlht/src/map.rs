//! The public concurrent map (Inlined mode).

use crate::error::Error;
use crate::hash::DefaultHashBuilder;
use crate::inline::Inline;
use crate::map_core::Core;
use crate::ops::insert::Inserted;
use crate::ops::{self, Step};
use crate::raw::header::SlotState;
use crate::raw::index::{BinRef, MAX_BINS, MIN_BINS};
use crate::raw::markers::Markers;
use crate::resize;
use crate::stats::Stats;
use crate::sync::backoff;
use core::fmt;
use core::hash::BuildHasher;
use core::marker::PhantomData;

/// Keys per bin a table is sized for by [`Map::with_capacity`]: with
/// uniform hashing about 7% of bins then need a link bucket, well under the
/// one-in-eight that exist, so `n` inserts rarely resize.
const KEYS_PER_BIN_AT_CAPACITY: f64 = 1.5;

/// Bins of a new map from [`Map::new`].
const DEFAULT_BINS: usize = 16;

/// Marker for the key and value types: covariant, and no auto-trait
/// inference from K and V (Send and Sync are implemented by hand).
type KeyValue<K, V> = fn(K, V) -> (K, V);

/// A concurrent hash map storing keys and values of at most 8 bytes inline
/// in 16-byte slots of 64-byte buckets (the DLHT design).
///
/// All operations take `&self` and are linearizable; share the map between
/// threads by reference (`std::thread::scope`) or in an `Arc`. Gets, puts
/// and removes are lock-free; see the crate docs for the progress of
/// inserts and resizes.
///
/// ```
/// let m = dlht::Map::<u64, u64>::with_capacity(1000);
/// std::thread::scope(|s| {
///     for t in 0..4u64 {
///         let m = &m;
///         s.spawn(move || {
///             for i in 0..100 {
///                 m.insert(t * 1000 + i, i).unwrap();
///             }
///         });
///     }
/// });
/// assert_eq!(m.len(), 400);
/// assert_eq!(m.get(&3042), Some(42));
/// ```
pub struct Map<K, V, S = DefaultHashBuilder> {
    core: Core,
    hasher: S,
    _kv: PhantomData<KeyValue<K, V>>,
}

// SAFETY: the map holds only words; `Inline` (an unsafe trait) guarantees
// keys and values may be rebuilt from their words on any thread. The hasher
// is used from every thread through &self, hence the S bounds.
unsafe impl<K: Inline, V: Inline, S: Send> Send for Map<K, V, S> {}
// SAFETY: as above; all shared state is atomics or behind a Mutex.
unsafe impl<K: Inline, V: Inline, S: Sync> Sync for Map<K, V, S> {}

impl<K: Inline, V: Inline> Map<K, V, DefaultHashBuilder> {
    /// An empty map with a small index and the default hasher.
    ///
    /// ```
    /// let m = dlht::Map::<u32, u32>::new();
    /// assert!(m.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_hasher(DefaultHashBuilder::default())
    }

    /// An empty map sized to take `n` keys without resizing (with high
    /// probability, for well-spread keys).
    ///
    /// Panics if the index cannot be allocated; see
    /// [`try_with_capacity`](Self::try_with_capacity).
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::with_capacity(1 << 16);
    /// assert!(m.capacity() >= 1 << 16);
    /// ```
    pub fn with_capacity(n: usize) -> Self {
        Self::with_capacity_and_hasher(n, DefaultHashBuilder::default())
    }

    /// Like [`with_capacity`](Self::with_capacity), returning an error
    /// instead of panicking when `n` is absurd or memory is refused.
    ///
    /// ```
    /// assert!(dlht::Map::<u64, u64>::try_with_capacity(usize::MAX).is_err());
    /// assert!(dlht::Map::<u64, u64>::try_with_capacity(100).is_ok());
    /// ```
    pub fn try_with_capacity(n: usize) -> Result<Self, Error> {
        Self::try_with_capacity_and_hasher(n, DefaultHashBuilder::default())
    }
}

impl<K: Inline, V: Inline> Default for Map<K, V, DefaultHashBuilder> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Map<K, V, S> {
    /// An empty map using `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        Self::build(DEFAULT_BINS, hasher).unwrap_or_else(|e| panic!("dlht: {e}"))
    }

    /// An empty map for `n` keys using `hasher`. Panics on allocation failure.
    pub fn with_capacity_and_hasher(n: usize, hasher: S) -> Self {
        Self::try_with_capacity_and_hasher(n, hasher).unwrap_or_else(|e| panic!("dlht: {e}"))
    }

    /// An empty map for `n` keys using `hasher`, or why it cannot be made.
    pub fn try_with_capacity_and_hasher(n: usize, hasher: S) -> Result<Self, Error> {
        Self::build(bins_for(n)?, hasher)
    }

    fn build(bins: usize, hasher: S) -> Result<Self, Error> {
        let markers = Markers::for_hash(|w| hasher.hash_one(w));
        Ok(Map { core: Core::new(bins, markers)?, hasher, _kv: PhantomData })
    }

    /// The map's hasher.
    pub fn hasher(&self) -> &S {
        &self.hasher
    }

    #[inline(always)]
    fn hash_word(&self, w: u64) -> u64 {
        self.hasher.hash_one(w)
    }

    /// Run a per-bin protocol from the current index, following transferred
    /// bins and growing the index when an insert finds it full. `len_delta`
    /// says how a result changes the number of keys.
    #[inline(always)]
    fn run<T>(
        &self,
        hash: u64,
        mut op: impl FnMut(&BinRef<'_>) -> Step<T>,
        len_delta: impl Fn(&T) -> i64,
    ) -> Result<T, Error> {
        self.core.enter(|idx, record| {
            let mut idx = idx;
            let mut spins = 0;
            loop {
                let bin = idx.bin(idx.bin_of(hash));
                match op(&bin) {
                    Step::Done(r) => {
                        record.add_len(len_delta(&r));
                        return Ok(r);
                    }
                    Step::Moved => {
                        idx = idx.next_index().expect("dlht invariant: a transferred bin has a next index");
                    }
                    Step::Full => {
                        self.check_overflow(&bin, hash)?;
                        resize::grow(&self.core, idx, &|w| self.hash_word(w))?;
                        // Other helpers may still hold our bin's chunk.
                        backoff(&mut spins);
                    }
                }
            }
        })
    }

    /// A bin full of live keys that all agree with `hash` in every bit an
    /// index can use will never be split by growing.
    fn check_overflow(&self, bin: &BinRef<'_>, hash: u64) -> Result<(), Error> {
        let h = bin.header();
        if h.first_invalid().is_some() {
            return Ok(()); // link buckets ran out: growing helps
        }
        let mut lm = None;
        let bits = (MAX_BINS - 1) as u64;
        let all_same = h.slots_in(SlotState::Valid).all(|i| {
            let k = bin.slot(&mut lm, i).load_key();
            self.hash_word(k) & bits == hash & bits
        });
        if all_same {
            Err(Error::BinOverflow)
        } else {
            Ok(())
        }
    }

    /// The value of `key`, if present.
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// m.insert(0, 1).unwrap();
    /// assert_eq!(m.get(&0), Some(1));
    /// assert_eq!(m.get(&u64::MAX), None);
    /// ```
    #[inline]
    pub fn get(&self, key: &K) -> Option<V> {
        let k = key.into_word();
        let found = self.run(self.hash_word(k), |bin| ops::get::get(bin, k), |_| 0);
        found.expect("dlht invariant: get never grows").map(V::from_word)
    }

    /// True if `key` is present.
    #[inline]
    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Insert `key → value` if `key` is absent. `Err` carries the value
    /// already there (and nothing changes).
    ///
    /// Panics only if the index must grow and cannot; see
    /// [`try_insert`](Self::try_insert).
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// assert_eq!(m.insert(1, 10), Ok(()));
    /// assert_eq!(m.insert(1, 20), Err(10));
    /// ```
    #[inline]
    pub fn insert(&self, key: K, value: V) -> Result<(), V> {
        self.try_insert(key, value).unwrap_or_else(|e| panic!("dlht: {e}"))
    }

    /// Like [`insert`](Self::insert), but a failure to grow the index is
    /// returned as an error; the map is then unchanged.
    pub fn try_insert(&self, key: K, value: V) -> Result<Result<(), V>, Error> {
        let (k, v) = (key.into_word(), value.into_word());
        let new = |r: &Inserted| (*r == Inserted::New) as i64;
        match self.run(self.hash_word(k), |bin| ops::insert::insert(bin, k, v), new)? {
            Inserted::New => Ok(Ok(())),
            Inserted::Exists(old) => Ok(Err(V::from_word(old))),
        }
    }

    /// Replace the value of a present `key`, returning the old value; if
    /// `key` is absent, return None and insert nothing.
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// assert_eq!(m.put(1, 10), None);
    /// assert_eq!(m.get(&1), None);
    /// m.insert(1, 10).unwrap();
    /// assert_eq!(m.put(1, 11), Some(10));
    /// ```
    #[inline]
    pub fn put(&self, key: K, value: V) -> Option<V> {
        let (k, v) = (key.into_word(), value.into_word());
        let old = self.run(self.hash_word(k), |bin| ops::put::put(bin, k, v), |_| 0);
        old.expect("dlht invariant: put never grows").map(V::from_word)
    }

    /// Remove `key`, returning its value. The slot is reusable at once.
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// m.insert(5, 50).unwrap();
    /// assert_eq!(m.remove(&5), Some(50));
    /// assert_eq!(m.remove(&5), None);
    /// ```
    #[inline]
    pub fn remove(&self, key: &K) -> Option<V> {
        let k = key.into_word();
        let removed = |r: &Option<u64>| -(r.is_some() as i64);
        let old = self.run(self.hash_word(k), |bin| ops::remove::remove(bin, k), removed);
        old.expect("dlht invariant: remove never grows").map(V::from_word)
    }

    /// Insert or overwrite: the old value if `key` was present.
    ///
    /// Built from put and insert: each attempt linearizes at the put or
    /// insert that succeeds.
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// assert_eq!(m.upsert(1, 10), None);
    /// assert_eq!(m.upsert(1, 11), Some(10));
    /// ```
    #[inline]
    pub fn upsert(&self, key: K, value: V) -> Option<V> {
        self.try_upsert(key, value).unwrap_or_else(|e| panic!("dlht: {e}"))
    }

    /// Like [`upsert`](Self::upsert), returning growth failure as an error.
    pub fn try_upsert(&self, key: K, value: V) -> Result<Option<V>, Error> {
        loop {
            if let Some(old) = self.put(key, value) {
                return Ok(Some(old));
            }
            match self.try_insert(key, value)? {
                Ok(()) => return Ok(None),
                Err(_) => continue, // inserted by another thread meanwhile: put again
            }
        }
    }

    /// Prefetch the bin of `key` into the cache, for callers that interleave
    /// independent work (coroutines, async) before the real request.
    #[inline]
    pub fn prefetch(&self, key: &K) {
        let hash = self.hash_word(key.into_word());
        self.core.enter(|idx, _| crate::arch::prefetch(idx.bin_ptr(idx.bin_of(hash))));
    }

    /// Enter and leave the map without doing anything: the per-operation
    /// cost of index reclamation, for benchmarks.
    #[doc(hidden)]
    #[inline(never)]
    pub fn enter_leave(&self) {
        self.core.enter(|idx, _| core::hint::black_box(idx.bins()));
    }

    /// Number of keys. Exact when no operation is in flight; otherwise some
    /// value the count passed through recently.
    pub fn len(&self) -> usize {
        self.core.reclaim.len().max(0) as usize
    }

    /// True if the map holds no key (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots inserts may use before the index must grow: three per bin plus
    /// four per link bucket. A map usually grows at 60–75% of it.
    pub fn capacity(&self) -> usize {
        self.core.enter(|idx, _| idx.slot_capacity())
    }

    /// A snapshot of the index's shape and occupancy (scans the index).
    pub fn stats(&self) -> Stats {
        self.core.reclaim.collect();
        self.core.enter(|idx, _| Stats::of(idx, &self.core))
    }
}

/// Bins for `n` keys.
fn bins_for(n: usize) -> Result<usize, Error> {
    let want = (n as f64 / KEYS_PER_BIN_AT_CAPACITY).ceil();
    if want > MAX_BINS as f64 {
        return Err(Error::CapacityOverflow);
    }
    Ok((want as usize).max(MIN_BINS).next_power_of_two())
}

impl<K, V, S> fmt::Debug for Map<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Map").field("len", &self.core.reclaim.len()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_for_sizes() {
        assert_eq!(bins_for(0).unwrap(), 2);
        assert_eq!(bins_for(1).unwrap(), 2);
        assert_eq!(bins_for(1536).unwrap(), 1024);
        assert_eq!(bins_for(1537).unwrap(), 2048);
        assert!(bins_for(usize::MAX).is_err());
    }
}
