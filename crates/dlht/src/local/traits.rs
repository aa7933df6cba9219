//! Iteration, `retain` / `clear` and the std traits for [`LocalMap`].
//!
//! A `LocalMap`'s calls take `&self`, and one of them may grow or shrink
//! the index and free the bins an iterator walks. So whatever walks the
//! bins either borrows the map mutably ([`LocalMap::iter`],
//! [`LocalMap::retain`]: nothing else can run meanwhile, and `retain`
//! removes through the bin protocol without hashing, so not even the
//! hasher runs), or copies the entries out before any user code runs
//! (`Debug`, `Clone`, `PartialEq`, serialization).

use super::LocalMap;
use crate::iter::{collect_class, ClassWalk};
use crate::protocol::{remove::remove, Step};
use crate::raw::threading::Local;
use crate::word::Inline;
use core::fmt;
use core::hash::BuildHasher;
use core::marker::PhantomData;

/// Keys removed by `retain` so far, taken off the length when dropped (on
/// unwind too).
struct RemovedKeys<'m, K, V, S> {
    map: &'m LocalMap<K, V, S>,
    n: usize,
}

impl<K, V, S> Drop for RemovedKeys<'_, K, V, S> {
    fn drop(&mut self) {
        self.map.len.set(self.map.len.get() - self.n);
    }
}

/// An iterator over a [`LocalMap`]'s entries (from [`LocalMap::iter`]).
pub struct LocalIter<'m, K, V> {
    walk: ClassWalk<'m>,
    _kv: PhantomData<fn() -> (K, V)>,
}

impl<K: Inline, V: Inline, S: BuildHasher> LocalMap<K, V, S> {
    /// The entries, in no particular order. Borrows the map mutably: no
    /// other call can change it (and free the bins walked) meanwhile.
    ///
    /// ```
    /// let mut m: dlht::LocalMap<u64, u64> = (0..100).map(|k| (k, k * 2)).collect();
    /// let mut all: Vec<_> = m.iter().collect();
    /// all.sort();
    /// assert_eq!(all, (0..100).map(|k| (k, k * 2)).collect::<Vec<_>>());
    /// ```
    pub fn iter(&mut self) -> LocalIter<'_, K, V> {
        LocalIter { walk: ClassWalk::new(self.index()), _kv: PhantomData }
    }

    /// The entries' words, copied out (no user code runs while the bins
    /// are read).
    pub(crate) fn words(&self) -> Vec<(u64, u64)> {
        let idx = self.index();
        let mut out = Vec::with_capacity(self.len());
        for b in 0..idx.bins() {
            // No resize is under way in a local map, so the class of each
            // bin is the bin: the hash is never asked for.
            collect_class::<Local>(
                idx,
                b,
                &|_| unreachable!("dlht invariant: a local map mid-resize"),
                &mut out,
            );
        }
        out
    }

    /// Keep only the entries for which `keep(key, value)` is true; the
    /// number removed. Removes go through the bin protocol directly (no
    /// hashing), then the map shrinks if it should (see
    /// [`shrink_to_fit`](Self::shrink_to_fit)).
    ///
    /// ```
    /// let mut m: dlht::LocalMap<u64, u64> = (0..10).map(|k| (k, k)).collect();
    /// assert_eq!(m.retain(|k, _| k % 2 == 0), 5);
    /// assert_eq!(m.len(), 5);
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(K, V) -> bool) -> usize {
        let idx = self.index();
        // Counts each remove as it happens, so that a `keep` that panics
        // leaves the length right.
        let mut removed = RemovedKeys { map: self, n: 0 };
        let mut class = Vec::new();
        for b in 0..idx.bins() {
            class.clear();
            collect_class::<Local>(
                idx,
                b,
                &|_| unreachable!("dlht invariant: a local map mid-resize"),
                &mut class,
            );
            for &(k, v) in &class {
                if keep(K::from_word(k), V::from_word(v)) {
                    continue;
                }
                // No call can be suspended: `retain` borrows the map mutably.
                match remove(&idx.bin_as::<Local>(b), k, false) {
                    Step::Done(Some(_)) => removed.n += 1,
                    _ => unreachable!("dlht invariant: a local bin changed under its only thread"),
                }
            }
        }
        let n = removed.n;
        drop(removed);
        self.shrink_after_removes(n);
        n
    }

    /// Remove every entry; the number removed. The index then shrinks as
    /// after any removes (never below the capacity the map was built with).
    ///
    /// ```
    /// let mut m: dlht::LocalMap<u64, u64> = (0..10).map(|k| (k, k)).collect();
    /// assert_eq!(m.clear(), 10);
    /// assert!(m.is_empty());
    /// ```
    pub fn clear(&mut self) -> usize {
        self.retain(|_, _| false)
    }
}

impl<K: Inline, V: Inline> Iterator for LocalIter<'_, K, V> {
    type Item = (K, V);

    #[inline]
    fn next(&mut self) -> Option<(K, V)> {
        let (k, v) = self.walk.next::<Local>(&|_| unreachable!("dlht invariant: a local map mid-resize"))?;
        Some((K::from_word(k), V::from_word(v)))
    }
}

/// Insert or overwrite each pair (later pairs win), as `HashMap` does.
impl<K: Inline, V: Inline, S: BuildHasher> Extend<(K, V)> for LocalMap<K, V, S> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.upsert(k, v);
        }
    }
}

impl<K: Inline, V: Inline, S: BuildHasher + Default> FromIterator<(K, V)> for LocalMap<K, V, S> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut m = LocalMap::with_capacity_and_hasher(iter.size_hint().0, S::default());
        m.extend(iter);
        m
    }
}

/// The entries, as `HashMap` prints them.
///
/// ```
/// let m = dlht::LocalMap::<u64, u64>::new();
/// m.insert(1, 10).unwrap();
/// assert_eq!(format!("{m:?}"), "{1: 10}");
/// ```
impl<K: Inline + fmt::Debug, V: Inline + fmt::Debug, S: BuildHasher> fmt::Debug for LocalMap<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.words().into_iter().map(|(k, v)| (K::from_word(k), V::from_word(v))))
            .finish()
    }
}

/// A new map with the same entries and a clone of the hasher.
///
/// ```
/// let m: dlht::LocalMap<u64, u64> = (0..100).map(|k| (k, k * 2)).collect();
/// let c = m.clone();
/// m.put(1, 0);
/// assert_eq!((c.get(&1), c.len()), (Some(2), 100));
/// ```
impl<K: Inline, V: Inline, S: BuildHasher + Clone> Clone for LocalMap<K, V, S> {
    fn clone(&self) -> Self {
        let copy = LocalMap::with_capacity_and_hasher(self.len(), self.hasher.clone());
        for (k, v) in self.words() {
            copy.upsert(K::from_word(k), V::from_word(v));
        }
        copy
    }
}

/// Equal when both hold the same keys with equal values, whatever their
/// hashers.
///
/// ```
/// let a: dlht::LocalMap<u64, u64> = [(1, 10), (2, 20)].into_iter().collect();
/// let b: dlht::LocalMap<u64, u64> = [(2, 20), (1, 10)].into_iter().collect();
/// assert_eq!(a, b);
/// b.put(1, 11);
/// assert_ne!(a, b);
/// ```
impl<K: Inline, V: Inline + PartialEq, S: BuildHasher, S2: BuildHasher> PartialEq<LocalMap<K, V, S2>>
    for LocalMap<K, V, S>
{
    fn eq(&self, other: &LocalMap<K, V, S2>) -> bool {
        self.len() == other.len()
            && self.words().into_iter().all(|(k, v)| other.get(&K::from_word(k)) == Some(V::from_word(v)))
    }
}

impl<K: Inline, V: Inline + Eq, S: BuildHasher> Eq for LocalMap<K, V, S> {}
