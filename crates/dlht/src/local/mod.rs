//! The single-thread mode (paper §3.4.5): the same index and the same
//! per-bin protocols, for one thread.
//!
//! The paper lists three costs of thread safety: lock-free algorithms,
//! checking for concurrent resizes, and announcing entry and exit. Here every
//! CAS is a load-compare-store (`raw::threading::Local`), there are no
//! announcements, and a resize runs to completion inside the insert that
//! triggers it (no chunk claiming, no helpers), freeing the old index at
//! once. `LocalMap` is `Send` but not `Sync`: it can move to another thread
//! but never be shared, which is what makes the plain stores sound.
//!
//! Re-entry: user code — the closure of `update`, `remove_if` or a batch
//! request, a `Counter`, the hasher — may call back into the map, and a
//! nested insert may grow the map, or a nested remove shrink it, while the
//! outer call holds a bin of the index it replaces. So the map counts the
//! protocols under way that run user code while holding a bin (`depth`,
//! raised while a `WithUserCode` runner lives: the per-key atomics and a
//! batch's requests with a fn), and a resize frees the index it replaces
//! at once only when none is; otherwise the index waits in `retired` until
//! the outermost one is done (on unwind too). Plain calls (get, insert,
//! put, remove, upsert) run no user code inside and count nothing: on a
//! memory-resident map, an unbatched `LocalMap` get ran 11% slower when
//! every call counted itself. The outer protocol then finds its bin moved
//! (its slot's key killed by the transfer, so no CAS into the old index
//! can succeed) and `WithUserCode` retries it in the new index, as a
//! concurrent map's operations go on in the next one. A nested call
//! *during* a resize — from the hasher rehashing keys into the new index
//! — cannot be served, since the bins are half-moved; it panics with a
//! message, and since that panic unwinds through a transfer the process
//! aborts (see `resize::transfer`). Hashers must not call into the map.

mod traits;

pub use traits::LocalIter;

use crate::driver::{self, Front, KeyValue, Runner, DEFAULT_BINS};
use crate::error::Error;
use crate::hash::DefaultHashBuilder;
use crate::plant::{planted, Plant};
use crate::protocol::transfer::{transfer_bin, transfer_target, MAX_SHRINK_FACTOR};
use crate::protocol::Step;
use crate::raw::index::{BinRef, Index, MIN_BINS};
use crate::raw::markers::Markers;
use crate::raw::threading::Local;
use crate::resize::{next_index, ShrinkPolicy};
use crate::stats::Stats;
use crate::word::Inline;
use core::cell::{Cell, RefCell};
use core::hash::BuildHasher;
use core::marker::PhantomData;

/// A hash map for one thread: [`Map`](crate::Map)'s layout and algorithms
/// without synchronization cost. Same API; not `Sync`.
///
/// ```
/// let m = dlht::LocalMap::<u64, u64>::new();
/// m.insert(1, 10).unwrap();
/// assert_eq!(m.upsert(1, 11), Some(10));
/// assert_eq!(m.get(&1), Some(11));
/// ```
///
/// Sharing it between threads does not compile:
///
/// ```compile_fail
/// let m = dlht::LocalMap::<u64, u64>::new();
/// std::thread::scope(|s| {
///     s.spawn(|| m.get(&1));
/// });
/// ```
pub struct LocalMap<K, V, S = DefaultHashBuilder> {
    index: Cell<*mut Index>,
    hasher: S,
    len: Cell<usize>,
    resizes: Cell<usize>,
    /// Shrinks, and those that fell back.
    shrinks: Cell<(usize, usize)>,
    shrink_policy: ShrinkPolicy,
    occupancy_at_resize: RefCell<Vec<f64>>,
    /// True while `grow` transfers bins (see the module docs on re-entry).
    growing: Cell<bool>,
    /// Calls of this map under way that run user code while holding a bin
    /// (see the module docs on re-entry).
    depth: Cell<usize>,
    /// Indexes replaced while an outer call was suspended in user code,
    /// freed when the outermost call returns. Boxed: the suspended call
    /// holds references to them, which a move into the Vec would break.
    #[allow(clippy::vec_box)]
    retired: RefCell<Vec<Box<Index>>>,
    _kv: PhantomData<KeyValue<K, V>>,
}

// SAFETY: the map owns its index (no other thread holds a pointer into it)
// and holds only words (see `Inline`); moving it to another thread moves
// all of it. It stays !Sync through its Cells.
unsafe impl<K: Inline, V: Inline, S: Send> Send for LocalMap<K, V, S> {}

impl<K: Inline, V: Inline> LocalMap<K, V, DefaultHashBuilder> {
    /// An empty map with a small index and the default hasher.
    pub fn new() -> Self {
        Self::with_hasher(DefaultHashBuilder::default())
    }

    /// An empty map sized for `n` keys. Panics if memory is refused.
    pub fn with_capacity(n: usize) -> Self {
        Self::with_capacity_and_hasher(n, DefaultHashBuilder::default())
    }

    /// An empty map sized for `n` keys, or why it cannot be made.
    pub fn try_with_capacity(n: usize) -> Result<Self, Error> {
        Self::try_with_capacity_and_hasher(n, DefaultHashBuilder::default())
    }
}

impl<K: Inline, V: Inline> Default for LocalMap<K, V, DefaultHashBuilder> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> LocalMap<K, V, S> {
    /// An empty map using `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        driver::or_panic(Self::build(DEFAULT_BINS, hasher))
    }

    /// An empty map for `n` keys using `hasher`. Panics if memory is refused.
    pub fn with_capacity_and_hasher(n: usize, hasher: S) -> Self {
        driver::or_panic(Self::try_with_capacity_and_hasher(n, hasher))
    }

    /// An empty map for `n` keys using `hasher`, or why it cannot be made.
    pub fn try_with_capacity_and_hasher(n: usize, hasher: S) -> Result<Self, Error> {
        Self::build(driver::bins_for(n)?, hasher)
    }

    fn build(bins: usize, hasher: S) -> Result<Self, Error> {
        let markers = Markers::for_hash(|w| hasher.hash_one(w));
        let index = Box::into_raw(Box::new(Index::new(bins, markers, 1)?));
        Ok(LocalMap {
            index: Cell::new(index),
            hasher,
            len: Cell::new(0),
            resizes: Cell::new(0),
            shrinks: Cell::new((0, 0)),
            shrink_policy: ShrinkPolicy::new(bins),
            occupancy_at_resize: RefCell::new(Vec::new()),
            growing: Cell::new(false),
            depth: Cell::new(0),
            retired: RefCell::new(Vec::new()),
            _kv: PhantomData,
        })
    }

    /// The current index.
    ///
    /// A caller may hold the reference across user code only inside a
    /// [`call`](Self::call): an index replaced while such a call is
    /// suspended waits for it (see the module docs). Outside user code, a
    /// call must not hold it across its own `grow` or `shrink`. `grow`
    /// itself holds the old index across its hasher calls, and refuses
    /// nested calls.
    #[inline(always)]
    fn index(&self) -> &Index {
        // SAFETY: the pointer is always a live index owned by this map; it
        // is replaced only by `replace_index`, under the rules above.
        unsafe { &*self.index.get() }
    }

    /// Count a call of the map that runs user code while holding a bin,
    /// until the returned guard drops (on unwind too): while it lives, an
    /// index replaced (by a nested call, or by the call itself) is kept.
    #[inline(always)]
    fn call(&self) -> Call<'_, K, V, S> {
        self.depth.set(self.depth.get() + 1);
        Call { map: self }
    }

    /// Make `new` the current index. The old one is freed at once unless a
    /// call that runs user code is under way (the replacing call may be
    /// nested in it): then it waits until the outermost such call returns.
    fn replace_index(&self, new: Box<Index>) {
        let old_ptr = self.index.replace(Box::into_raw(new));
        // SAFETY: `old_ptr` came from Box::into_raw (in `build` or here) and
        // is no longer the current index, so this is its only owner.
        let old = unsafe { Box::from_raw(old_ptr) };
        if self.depth.get() > 0 && !planted(Plant::LocalFreeNested) {
            self.retired.borrow_mut().push(old);
            return;
        }
        // Planted bug (scripts/planted-bugs.sh): free the old index even
        // under a suspended outer call.
        drop(old);
    }

    /// Replace the index by one `grown_bins` times larger (at least
    /// `min_bins`), transferring every bin with the same protocol as the
    /// concurrent map, then free the old.
    fn grow(&self, min_bins: usize) -> Result<(), Error> {
        let old = self.index();
        let next = next_index(old, min_bins)?;
        self.growing.set(true);
        let mut copied = 0;
        for b in 0..old.bins() {
            copied += transfer_bin::<Local>(old, b, &next, &|w| self.hash_word(w));
        }
        self.growing.set(false);
        self.occupancy_at_resize.borrow_mut().push(copied as f64 / old.slot_capacity() as f64);
        self.resizes.set(self.resizes.get() + 1);
        self.shrink_policy.resized(None);
        self.replace_index(Box::new(next));
        Ok(())
    }

    /// Replace the index by a smaller one of `target_bins` bins (at most
    /// `MAX_SHRINK_FACTOR` times smaller), with the concurrent map's shrink
    /// protocol: a target whose sources do not fit one bin sends them to a
    /// fallback as large as the old index, and the smaller index is then
    /// grown into it (see `resize`).
    fn shrink(&self, target_bins: usize) -> Result<(), Error> {
        let old = self.index();
        let target = target_bins.max(old.bins() / MAX_SHRINK_FACTOR).max(MIN_BINS);
        if target >= old.bins() {
            return Ok(());
        }
        let next = Index::new(target, old.markers, old.generation + 1)?;
        let fallback = Box::new(Index::new(old.bins(), old.markers, old.generation + 2)?);
        self.growing.set(true);
        let hash = |w| self.hash_word(w);
        for t in 0..target {
            transfer_target::<Local>(old, t, &next, &fallback, &hash);
        }
        let fell_back = next.next_index().is_some();
        if fell_back {
            for b in 0..next.bins() {
                transfer_bin::<Local>(&next, b, &fallback, &hash);
            }
        }
        self.growing.set(false);
        let (shrinks, fallbacks) = self.shrinks.get();
        self.shrinks.set((shrinks + 1, fallbacks + fell_back as usize));
        self.resizes.set(self.resizes.get() + 1 + fell_back as usize);
        self.shrink_policy.resized(fell_back.then(|| (self.len(), old.bins())));
        let new = if fell_back { fallback } else { Box::new(next) };
        // (`next`, if unused, is dropped here; its successor pointer to the
        // fallback is never followed again.)
        self.replace_index(new);
        Ok(())
    }

    /// Automatic shrinking after removes (see `resize::ShrinkPolicy`), for
    /// an index of `bins` bins.
    fn maybe_shrink(&self, bins: usize) {
        if let Some(target) = self.shrink_policy.target(bins, self.len.get(), 1) {
            // An index that cannot be allocated only means no shrink.
            let _ = self.shrink(target);
        }
    }

    /// After `n` keys were removed outside `run` (by `retain`, which
    /// counted them), shrink as far as the map should: each shrink is at
    /// most 16× smaller, so an emptied map may take several.
    fn shrink_after_removes(&self, n: usize) {
        if n > 0 {
            loop {
                let before = self.index().bins();
                self.maybe_shrink(before);
                if self.index().bins() >= before {
                    return;
                }
            }
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len.get()
    }

    /// True if the map holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots inserts may use before the index must grow.
    pub fn capacity(&self) -> usize {
        self.index().slot_capacity()
    }

    /// Grow ahead of a known load, so that `additional` more keys than the
    /// map holds now fit without a resize (unless keys crowd one bin).
    /// Panics if the index cannot grow; see [`try_reserve`](Self::try_reserve).
    ///
    /// ```
    /// let m = dlht::LocalMap::<u64, u64>::new();
    /// m.reserve(100_000);
    /// assert!(m.capacity() >= 100_000);
    /// ```
    pub fn reserve(&self, additional: usize) {
        crate::driver::or_panic(self.try_reserve(additional))
    }

    /// Like [`reserve`](Self::reserve), with a failure to grow as an error
    /// (the map unchanged).
    pub fn try_reserve(&self, additional: usize) -> Result<(), Error> {
        let want = crate::driver::bins_for(self.len().saturating_add(additional))?;
        while self.index().bins() < want {
            self.grow(want)?;
        }
        Ok(())
    }

    /// Shrink the index to the smallest that holds the map's keys with the
    /// headroom [`with_capacity`](Self::with_capacity) leaves; see
    /// [`Map::shrink_to_fit`](crate::Map::shrink_to_fit). A `LocalMap` also
    /// shrinks on its own, under the same rule as `Map`.
    ///
    /// ```
    /// let m = dlht::LocalMap::<u64, u64>::with_capacity(1 << 20);
    /// m.insert(7, 7).unwrap();
    /// m.shrink_to_fit();
    /// assert!(m.capacity() < 100);
    /// assert_eq!(m.get(&7), Some(7));
    /// ```
    pub fn shrink_to_fit(&self) {
        self.shrink_to(0)
    }

    /// Shrink the index, keeping room for at least `min_capacity` keys (and
    /// for every key present).
    pub fn shrink_to(&self, min_capacity: usize) {
        let Ok(want) = driver::bins_for(self.len().max(min_capacity)) else { return };
        while self.index().bins() > want {
            let before = self.index().bins();
            // An index that cannot be allocated only means no shrink.
            if self.shrink(want).is_err() || self.index().bins() >= before {
                return;
            }
        }
    }

    /// Bytes in use, without a scan (see [`Memory`](crate::Memory)).
    pub fn memory(&self) -> crate::Memory {
        crate::Memory::of(self.index(), 0)
    }

    /// A snapshot of the index's shape and occupancy (scans the index).
    pub fn stats(&self) -> Stats {
        let awaiting_free = self.retired.borrow().len();
        Stats::of(
            self.index(),
            self.resizes.get(),
            self.shrinks.get(),
            self.occupancy_at_resize.borrow().clone(),
            awaiting_free,
        )
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Front for LocalMap<K, V, S> {
    type K = K;
    type V = V;
    type Inside<'a>
        = Self
    where
        Self: 'a;

    #[inline(always)]
    fn hash_word(&self, w: u64) -> u64 {
        self.hasher.hash_one(w)
    }

    /// Nothing to announce: one thread owns the map.
    #[inline(always)]
    fn enter<X>(&self, f: impl FnOnce(&Self) -> X) -> X {
        f(self)
    }
}

/// A [`LocalMap`] running a protocol that calls user code while it holds a
/// bin (`Runner::user_code`): that code may resize the map, so the
/// protocol may find its bin moved. Counted as a call (see
/// [`LocalMap::call`]) while it lives.
pub(crate) struct WithUserCode<'m, K, V, S> {
    map: &'m LocalMap<K, V, S>,
    _call: Call<'m, K, V, S>,
}

impl<K: Inline, V: Inline, S: BuildHasher> Runner for WithUserCode<'_, K, V, S> {
    type T = Local;
    type UserCode<'a>
        = Self
    where
        Self: 'a;

    #[inline(always)]
    fn current(&self) -> &Index {
        self.map.index()
    }

    #[inline(always)]
    fn user_code(&self) -> Self {
        WithUserCode { map: self.map, _call: self.map.call() }
    }

    #[inline(always)]
    fn calls_suspended(&self) -> bool {
        true
    }

    /// The plain `run`, with `Step::Moved` turned into a retry: the bin
    /// moved because user code resized the map, and the index it was in is
    /// kept until the outermost counted call returns (`replace_index`).
    /// The plain loop is left as it was: a branch back to it on `Moved`
    /// there, or one runner for every protocol of a counted call, changed
    /// what the compiler inlines into a caller's loop of plain puts (7–9%
    /// slower, cache- and memory-resident).
    #[inline(always)]
    fn run<X>(
        &self,
        hash: u64,
        mut op: impl FnMut(&BinRef<'_, Local>) -> Step<X>,
        len_delta: impl Fn(&X) -> i64,
    ) -> Result<X, Error> {
        loop {
            let done = self.map.run(
                hash,
                |bin| match op(bin) {
                    Step::Done(x) => Step::Done(Some(x)),
                    Step::Moved => Step::Done(None),
                    Step::Full => Step::Full,
                },
                |x| x.as_ref().map_or(0, &len_delta),
            )?;
            if let Some(x) = done {
                return Ok(x);
            }
        }
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Runner for LocalMap<K, V, S> {
    type T = Local;
    type UserCode<'a>
        = WithUserCode<'a, K, V, S>
    where
        Self: 'a;

    #[inline(always)]
    fn current(&self) -> &Index {
        self.index()
    }

    #[inline(always)]
    fn user_code(&self) -> WithUserCode<'_, K, V, S> {
        WithUserCode { map: self, _call: self.call() }
    }

    #[inline(always)]
    fn calls_suspended(&self) -> bool {
        self.depth.get() > 0
    }

    #[inline(always)]
    fn run<X>(
        &self,
        hash: u64,
        mut op: impl FnMut(&BinRef<'_, Local>) -> Step<X>,
        len_delta: impl Fn(&X) -> i64,
    ) -> Result<X, Error> {
        if self.growing.get() {
            panic!("dlht: a LocalMap was called from its own hasher during a resize; hashers must not call into the map");
        }
        loop {
            let idx = self.index();
            let bin = idx.bin_as::<Local>(idx.bin_of(hash));
            match op(&bin) {
                Step::Done(r) => {
                    let d = len_delta(&r);
                    self.len.set(self.len.get().wrapping_add_signed(d as isize));
                    if d < 0 {
                        // The index again: `op` may have run user code that
                        // resized the map.
                        self.maybe_shrink(self.index().bins());
                    }
                    return Ok(r);
                }
                // Only user code (a closure that called back in) can move a
                // bin under a local call; `WithUserCode::run` turns that
                // into a retry before it gets here.
                Step::Moved => unreachable!("dlht invariant: a local bin moved under a plain call"),
                Step::Full => {
                    // Before `check_separable`, which runs the hasher (user
                    // code that may free `idx`): reads the bin, runs none.
                    if driver::links_instead_of_growing(&bin, idx, || self.len()) {
                        continue;
                    }
                    driver::check_separable(&bin, hash, |w| self.hash_word(w))?;
                    self.grow(0)?;
                }
            }
        }
    }
}

/// One call of a [`LocalMap`] under way (see [`LocalMap::call`]).
struct Call<'m, K, V, S> {
    map: &'m LocalMap<K, V, S>,
}

impl<K, V, S> Drop for Call<'_, K, V, S> {
    #[inline(always)]
    fn drop(&mut self) {
        let depth = self.map.depth.get() - 1;
        self.map.depth.set(depth);
        if depth == 0 {
            // The indexes replaced meanwhile (freeing one runs no user
            // code, so nothing borrows `retired` again here).
            self.map.retired.borrow_mut().clear();
        }
    }
}

impl<K, V, S> Drop for LocalMap<K, V, S> {
    fn drop(&mut self) {
        // SAFETY: the index is owned by this map and freed once, here
        // (retired ones drop with `retired`).
        drop(unsafe { Box::from_raw(self.index.get()) });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::raw::index::MAX_BINS;
    use crate::{Error, LocalMap, Map, Modulo};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Insert distinct keys until an insert fails (within a time limit: a
    /// map that cannot tell it is at its size cap grows forever).
    fn fill_until_error(insert: impl FnOnce() -> Result<u64, Error> + Send + 'static) -> Result<u64, Error> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(insert()));
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the map kept growing at its size cap instead of failing")
    }

    #[test]
    fn local_map_reports_capacity_overflow_at_the_size_cap() {
        // Unit tests cap indexes at 2^14 bins (see MAX_BINS). Modulo hashing
        // spreads consecutive keys evenly, so the cap is reached by filling.
        let err = fill_until_error(|| {
            let m = LocalMap::<u64, u64, Modulo>::with_hasher(Modulo);
            for k in 0.. {
                match m.try_insert(k, !k) {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => panic!("key {k} reported present"),
                    Err(e) => {
                        // Nothing was lost on the way.
                        assert_eq!(m.len() as u64, k);
                        assert!((0..k).all(|j| m.get(&j) == Some(!j)));
                        assert_eq!(m.stats().bins, MAX_BINS);
                        return Err(e);
                    }
                }
            }
            unreachable!()
        });
        assert_eq!(err, Err(Error::CapacityOverflow));
    }

    #[test]
    fn map_reports_capacity_overflow_at_the_size_cap() {
        let err = fill_until_error(|| {
            let m = Map::<u64, u64, Modulo>::with_hasher(Modulo);
            for k in 0.. {
                if let Err(e) = m.try_insert(k, !k) {
                    assert_eq!(m.len() as u64, k);
                    assert!((0..k).all(|j| m.get(&j) == Some(!j)));
                    return Err(e);
                }
            }
            unreachable!()
        });
        assert_eq!(err, Err(Error::CapacityOverflow));
    }
}
