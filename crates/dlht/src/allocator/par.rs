//! Parallel iteration and parallel extension with rayon (feature `rayon`)
//! for [`AllocMap`] and [`ByteMap`]: the index's parallel walk
//! ([`PointerIndex::par_iter`](super::pointers::PointerIndex::par_iter)),
//! with the sequential iterator's guarantee — every key present for the
//! whole iteration is yielded exactly once. The entries handed out are
//! readable while the caller's guard lives, on any thread.

use super::bytes::{entry_of, KeyBytes, ValueRef};
use super::{node, AllocMap, ByteMap, Guard};
use crate::driver::or_panic;
use core::hash::{BuildHasher, Hash};
use rayon::iter::{FromParallelIterator, IntoParallelIterator, ParallelExtend, ParallelIterator};

impl<K, V, S> AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher + Sync,
{
    /// A parallel iterator over the entries of every namespace, as
    /// `(namespace, key, value)`, with [`iter`](Self::iter)'s guarantee;
    /// the references are valid while `guard` lives. Feature `rayon`.
    ///
    /// ```
    /// use rayon::prelude::*;
    /// let m: dlht::AllocMap<String, u64> = (0..1000u64).map(|k| (k.to_string(), k)).collect();
    /// let g = m.guard();
    /// assert_eq!(m.par_iter(&g).map(|(_, _, v)| v).sum::<u64>(), (0..1000).sum());
    /// ```
    pub fn par_iter<'g>(
        &'g self,
        guard: &'g Guard,
    ) -> impl ParallelIterator<Item = (usize, &'g K, &'g V)> + 'g {
        self.index.par_iter(guard).map(|(_, e)| {
            // SAFETY: read under `guard`, which outlives the items.
            let n = unsafe { node::<K, V>(e) };
            (e.namespace() as usize, &n.key, &n.value)
        })
    }
}

/// Insert or replace each pair from rayon's workers (namespace 0), through
/// a shared reference: other threads may use the map meanwhile. Of two
/// pairs with one key, which is left is unspecified. Panics where
/// [`upsert`](AllocMap::upsert) does.
///
/// ```
/// use rayon::prelude::*;
/// let m = dlht::AllocMap::<String, u64>::new();
/// (&m).par_extend((0..1000u64).into_par_iter().map(|k| (k.to_string(), k)));
/// assert_eq!(m.get("999", &m.guard()), Some(&999));
/// ```
impl<K, V, S> ParallelExtend<(K, V)> for &AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher + Sync,
{
    fn par_extend<I: IntoParallelIterator<Item = (K, V)>>(&mut self, par_iter: I) {
        let map: &AllocMap<K, V, S> = self;
        par_iter.into_par_iter().for_each_init(
            || map.guard(),
            |g, (k, v)| {
                map.upsert(k, v, g);
            },
        );
    }
}

/// As for `&AllocMap`.
impl<K, V, S> ParallelExtend<(K, V)> for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher + Sync,
{
    fn par_extend<I: IntoParallelIterator<Item = (K, V)>>(&mut self, par_iter: I) {
        (&*self).par_extend(par_iter)
    }
}

/// A map filled by rayon's workers.
///
/// ```
/// use rayon::prelude::*;
/// let m: dlht::AllocMap<u64, String> = (0..1000u64).into_par_iter().map(|k| (k, k.to_string())).collect();
/// assert_eq!(m.len(), 1000);
/// ```
impl<K, V, S> FromParallelIterator<(K, V)> for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher + Sync + Default,
{
    fn from_par_iter<I: IntoParallelIterator<Item = (K, V)>>(par_iter: I) -> Self {
        let mut m = or_panic(AllocMap::try_with_capacity_and_hasher(0, S::default()));
        m.par_extend(par_iter);
        m
    }
}

impl<S: BuildHasher + Sync> ByteMap<S> {
    /// A parallel iterator over the entries of every namespace, as
    /// `(namespace, key, value)`, with [`iter`](Self::iter)'s guarantee;
    /// readable while `guard` lives. Feature `rayon`.
    ///
    /// ```
    /// use rayon::prelude::*;
    /// let m: dlht::ByteMap = (0..1000u32).map(|k| (k.to_string(), "v")).collect();
    /// let g = m.guard();
    /// assert_eq!(m.par_iter(&g).filter(|(_, k, _)| k.len() == 3).count(), 900);
    /// ```
    pub fn par_iter<'g>(
        &'g self,
        guard: &'g Guard,
    ) -> impl ParallelIterator<Item = (usize, KeyBytes<'g>, ValueRef<'g>)> + 'g {
        // SAFETY: read under `guard`, which outlives the items.
        self.index.par_iter(guard).map(|(kw, e)| unsafe { entry_of(kw, e) })
    }
}

/// Insert or replace each pair from rayon's workers (namespace 0), through
/// a shared reference. Panics where `Extend` does (a key or value longer
/// than `u32::MAX` bytes, memory refused).
///
/// ```
/// use rayon::prelude::*;
/// let m = dlht::ByteMap::new();
/// (&m).par_extend((0..1000u32).into_par_iter().map(|k| (k.to_string(), "v")));
/// assert_eq!(m.len(), 1000);
/// ```
impl<K: AsRef<[u8]> + Send, V: AsRef<[u8]> + Send, S: BuildHasher + Sync> ParallelExtend<(K, V)>
    for &ByteMap<S>
{
    fn par_extend<I: IntoParallelIterator<Item = (K, V)>>(&mut self, par_iter: I) {
        let map: &ByteMap<S> = self;
        par_iter.into_par_iter().for_each_init(
            || map.guard(),
            |g, (k, v)| {
                or_panic(map.upsert(k.as_ref(), v.as_ref(), g));
            },
        );
    }
}

/// As for `&ByteMap`.
impl<K: AsRef<[u8]> + Send, V: AsRef<[u8]> + Send, S: BuildHasher + Sync> ParallelExtend<(K, V)>
    for ByteMap<S>
{
    fn par_extend<I: IntoParallelIterator<Item = (K, V)>>(&mut self, par_iter: I) {
        (&*self).par_extend(par_iter)
    }
}

/// A byte map filled by rayon's workers.
///
/// ```
/// use rayon::prelude::*;
/// let m: dlht::ByteMap = (0..1000u32).into_par_iter().map(|k| (k.to_be_bytes(), [1u8; 20])).collect();
/// assert_eq!(m.len(), 1000);
/// ```
impl<K: AsRef<[u8]> + Send, V: AsRef<[u8]> + Send, S: BuildHasher + Sync + Default>
    FromParallelIterator<(K, V)> for ByteMap<S>
{
    fn from_par_iter<I: IntoParallelIterator<Item = (K, V)>>(par_iter: I) -> Self {
        let mut m = or_panic(ByteMap::try_with_capacity_and_hasher(0, S::default()));
        m.par_extend(par_iter);
        m
    }
}
