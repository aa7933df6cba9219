//! Iteration over a [`Map`] and the standard traits built on it.

use super::Map;
use crate::driver::Front;
use crate::hash::DefaultHashBuilder;
use crate::iter::ClassWalk;
use crate::raw::threading::Shared;
use crate::reclaim::Guard;
use crate::word::Inline;
use core::fmt;
use core::hash::BuildHasher;

/// A weakly consistent iterator over a [`Map`]'s entries, from
/// [`Map::iter`]: it never blocks other threads and never fails.
///
/// Every key present for the whole iteration is yielded exactly once, with
/// a value it had during the iteration, even across concurrent resizes;
/// a key inserted or removed meanwhile may or may not be yielded. Entries
/// come in bin order, one bin (a snapshot of it) at a time.
///
/// While it lives, the iterator keeps the index it started in allocated
/// (a resize meanwhile frees it only after the iterator is dropped). It is
/// not `Send`: it holds this thread's entry into the map.
pub struct Iter<'m, K, V, S = DefaultHashBuilder> {
    map: &'m Map<K, V, S>,
    walk: ClassWalk<'m>,
    // Declared last: dropped after `walk`, whose index it keeps allocated.
    _guard: Guard<'m>,
}

impl<'m, K: Inline, V: Inline, S: BuildHasher> Iter<'m, K, V, S> {
    pub(super) fn new(map: &'m Map<K, V, S>) -> Self {
        Self::bins(map, 0, usize::MAX)
    }

    /// A walk over `count` bins from bin `start` (see [`ClassWalk::bins`]).
    pub(crate) fn bins(map: &'m Map<K, V, S>, start: usize, count: usize) -> Self {
        let guard = map.core.pin();
        let index: *const crate::raw::index::Index = map.core.current(&guard);
        // SAFETY: the index stays allocated while `guard` lives (see
        // `Core::current`), and the guard moves into the iterator with the
        // walk, outliving it (fields drop in order).
        let walk = ClassWalk::bins(unsafe { &*index }, start, count);
        Iter { map, walk, _guard: guard }
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Iterator for Iter<'_, K, V, S> {
    type Item = (K, V);

    #[inline]
    fn next(&mut self) -> Option<(K, V)> {
        let map = self.map;
        let (k, v) = self.walk.next::<Shared>(&|w| map.hash_word(w))?;
        Some((K::from_word(k), V::from_word(v)))
    }
}

impl<'m, K: Inline, V: Inline, S: BuildHasher> IntoIterator for &'m Map<K, V, S> {
    type Item = (K, V);
    type IntoIter = Iter<'m, K, V, S>;

    fn into_iter(self) -> Iter<'m, K, V, S> {
        self.iter()
    }
}

/// Insert or overwrite each pair (later pairs win), as `HashMap` does.
///
/// ```
/// let mut m: dlht::Map<u64, u64> = [(1, 10), (2, 20)].into_iter().collect();
/// m.extend([(2, 21), (3, 30)]);
/// assert_eq!(m.get(&2), Some(21));
/// assert_eq!(m.len(), 3);
/// ```
impl<K: Inline, V: Inline, S: BuildHasher> Extend<(K, V)> for Map<K, V, S> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.upsert(k, v);
        }
    }
}

impl<K: Inline, V: Inline, S: BuildHasher + Default> FromIterator<(K, V)> for Map<K, V, S> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut m = Map::with_capacity_and_hasher(iter.size_hint().0, S::default());
        m.extend(iter);
        m
    }
}

/// The entries, as `HashMap` prints them (a weakly consistent read).
///
/// ```
/// let m = dlht::Map::<u64, u64>::new();
/// m.insert(1, 10).unwrap();
/// assert_eq!(format!("{m:?}"), "{1: 10}");
/// ```
impl<K: Inline + fmt::Debug, V: Inline + fmt::Debug, S: BuildHasher> fmt::Debug for Map<K, V, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// A new map with the same entries and a clone of the hasher. Under
/// concurrent updates it copies a weakly consistent view (see [`Iter`]):
/// each key present throughout is copied once, with a value it had. Panics
/// if memory is refused, as `HashMap::clone` does.
///
/// ```
/// let m: dlht::Map<u64, u64> = (0..100).map(|k| (k, k * 2)).collect();
/// let c = m.clone();
/// m.put(1, 0);
/// assert_eq!((c.get(&1), c.len()), (Some(2), 100));
/// ```
impl<K: Inline, V: Inline, S: BuildHasher + Clone> Clone for Map<K, V, S> {
    fn clone(&self) -> Self {
        let copy = Map::with_capacity_and_hasher(self.len(), self.hasher().clone());
        for (k, v) in self.iter() {
            copy.upsert(k, v);
        }
        copy
    }
}

/// Equal when both hold the same keys with equal values, whatever their
/// hashers. Exact when neither map changes during the comparison; under
/// concurrent updates it compares weakly consistent views.
///
/// ```
/// let a: dlht::Map<u64, u64> = [(1, 10), (2, 20)].into_iter().collect();
/// let b: dlht::Map<u64, u64> = [(2, 20), (1, 10)].into_iter().collect();
/// assert_eq!(a, b);
/// b.put(1, 11);
/// assert_ne!(a, b);
/// ```
impl<K: Inline, V: Inline + PartialEq, S: BuildHasher, S2: BuildHasher> PartialEq<Map<K, V, S2>>
    for Map<K, V, S>
{
    fn eq(&self, other: &Map<K, V, S2>) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(&k) == Some(v))
    }
}

impl<K: Inline, V: Inline + Eq, S: BuildHasher> Eq for Map<K, V, S> {}
