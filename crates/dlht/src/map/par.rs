//! Parallel iteration and parallel extension with rayon (feature `rayon`).
//!
//! A parallel iterator reads the index it started in as the sequential
//! iterator does (`iter.rs`: each bin a hash class, read as one validated
//! snapshot or followed into later indexes), with bins split into tasks
//! for rayon's workers. The thread that drives the iterator holds the map's
//! guard for the whole run, which keeps the starting index (and every later
//! one) allocated for the workers too: rayon's drive returns only once
//! every task is done. The guarantee is the sequential iterator's: every
//! key present for the whole iteration is yielded exactly once.

use super::Map;
use crate::driver::Front;
use crate::iter::collect_class;
use crate::raw::threading::Shared;
use crate::set::Set;
use crate::word::Inline;
use core::hash::BuildHasher;
use rayon::iter::plumbing::UnindexedConsumer;
use rayon::iter::{FromParallelIterator, IntoParallelIterator, ParallelExtend, ParallelIterator};

/// Bins one rayon task reads.
const BINS_PER_TASK: usize = 2048;

/// A parallel, weakly consistent iterator over a [`Map`]'s entries (see
/// [`Map::par_iter`]).
pub struct ParIter<'m, K, V, S> {
    map: &'m Map<K, V, S>,
}

impl<K: Inline + Send, V: Inline + Send, S: BuildHasher + Sync> Map<K, V, S> {
    /// A parallel iterator over the entries, with the guarantee of
    /// [`iter`](Self::iter): every key present for the whole iteration is
    /// yielded exactly once, even across resizes; keys inserted or removed
    /// meanwhile may or may not be. Feature `rayon`.
    ///
    /// ```
    /// use rayon::prelude::*;
    /// let m = dlht::Map::<u64, u64>::new();
    /// for k in 0..10_000 {
    ///     m.insert(k, k).unwrap();
    /// }
    /// let sum: u64 = m.par_iter().map(|(_, v)| v).sum();
    /// assert_eq!(sum, (0..10_000).sum());
    /// ```
    pub fn par_iter(&self) -> ParIter<'_, K, V, S> {
        ParIter { map: self }
    }
}

impl<K: Inline + Send, V: Inline + Send, S: BuildHasher + Sync> ParallelIterator for ParIter<'_, K, V, S> {
    type Item = (K, V);

    fn drive_unindexed<C: UnindexedConsumer<(K, V)>>(self, consumer: C) -> C::Result {
        let map = self.map;
        let guard = map.core.pin();
        let idx = map.core.current(&guard);
        let bins = idx.bins();
        (0..bins.div_ceil(BINS_PER_TASK))
            .into_par_iter()
            .flat_map_iter(|task| {
                let mut words = Vec::new();
                let first = task * BINS_PER_TASK;
                for b in first..(first + BINS_PER_TASK).min(bins) {
                    collect_class::<Shared>(idx, b, &|w| map.hash_word(w), &mut words);
                }
                words.into_iter().map(|(k, v)| (K::from_word(k), V::from_word(v)))
            })
            .drive_unindexed(consumer)
        // `guard` drops here, after every task is done.
    }
}

impl<'m, K: Inline + Send, V: Inline + Send, S: BuildHasher + Sync> IntoParallelIterator
    for &'m Map<K, V, S>
{
    type Item = (K, V);
    type Iter = ParIter<'m, K, V, S>;

    fn into_par_iter(self) -> ParIter<'m, K, V, S> {
        self.par_iter()
    }
}

/// Insert or overwrite each pair from rayon's workers, through a shared
/// reference: other threads may use the map meanwhile. Of two pairs with
/// one key, which is left is unspecified (they run in parallel). Panics
/// where [`upsert`](Map::upsert) does.
///
/// ```
/// use rayon::prelude::*;
/// let m = dlht::Map::<u64, u64>::new();
/// (&m).par_extend((0..10_000u64).into_par_iter().map(|k| (k, k * 2)));
/// assert_eq!(m.len(), 10_000);
/// assert_eq!(m.get(&21), Some(42));
/// ```
impl<K: Inline + Send, V: Inline + Send, S: BuildHasher + Sync> ParallelExtend<(K, V)> for &Map<K, V, S> {
    fn par_extend<I: IntoParallelIterator<Item = (K, V)>>(&mut self, par_iter: I) {
        let map: &Map<K, V, S> = self;
        par_iter.into_par_iter().for_each(|(k, v)| {
            map.upsert(k, v);
        });
    }
}

/// As for `&Map`.
impl<K: Inline + Send, V: Inline + Send, S: BuildHasher + Sync> ParallelExtend<(K, V)> for Map<K, V, S> {
    fn par_extend<I: IntoParallelIterator<Item = (K, V)>>(&mut self, par_iter: I) {
        (&*self).par_extend(par_iter)
    }
}

/// A map filled by rayon's workers (see `ParallelExtend`).
///
/// ```
/// use rayon::prelude::*;
/// let m: dlht::Map<u64, u64> = (0..1000u64).into_par_iter().map(|k| (k, k)).collect();
/// assert_eq!(m.len(), 1000);
/// ```
impl<K: Inline + Send, V: Inline + Send, S: BuildHasher + Sync + Default> FromParallelIterator<(K, V)>
    for Map<K, V, S>
{
    fn from_par_iter<I: IntoParallelIterator<Item = (K, V)>>(par_iter: I) -> Self {
        let mut m = Map::with_hasher(S::default());
        m.par_extend(par_iter);
        m
    }
}

impl<K: Inline + Send, S: BuildHasher + Sync> Set<K, S> {
    /// A parallel iterator over the keys, with [`Map::par_iter`]'s
    /// guarantee. Feature `rayon`.
    ///
    /// ```
    /// use rayon::prelude::*;
    /// let s: dlht::Set<u64> = (0..1000u64).into_par_iter().collect();
    /// assert_eq!(s.par_iter().filter(|k| k % 2 == 0).count(), 500);
    /// ```
    pub fn par_iter(&self) -> impl ParallelIterator<Item = K> + '_ {
        self.map.par_iter().map(|(k, ())| k)
    }
}

/// Insert each key from rayon's workers, through a shared reference.
impl<K: Inline + Send, S: BuildHasher + Sync> ParallelExtend<K> for &Set<K, S> {
    fn par_extend<I: IntoParallelIterator<Item = K>>(&mut self, par_iter: I) {
        let set: &Set<K, S> = self;
        par_iter.into_par_iter().for_each(|k| {
            set.insert(k);
        });
    }
}

/// As for `&Set`.
impl<K: Inline + Send, S: BuildHasher + Sync> ParallelExtend<K> for Set<K, S> {
    fn par_extend<I: IntoParallelIterator<Item = K>>(&mut self, par_iter: I) {
        (&*self).par_extend(par_iter)
    }
}

/// A set filled by rayon's workers.
impl<K: Inline + Send, S: BuildHasher + Sync + Default> FromParallelIterator<K> for Set<K, S> {
    fn from_par_iter<I: IntoParallelIterator<Item = K>>(par_iter: I) -> Self {
        let mut s = crate::driver::or_panic(Set::try_with_capacity_and_hasher(0, S::default()));
        s.par_extend(par_iter);
        s
    }
}
