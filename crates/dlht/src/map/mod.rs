//! The public concurrent map (Inlined mode).

mod atomics;
pub(crate) mod len;
#[cfg(all(feature = "rayon", not(loom)))]
mod par;
#[cfg(not(loom))]
mod persistent;
#[cfg(test)]
mod reclaim_tests;
mod requests;
mod shadow;
mod snapshot;
pub(crate) mod state;
mod traits;

pub use atomics::Counter;
#[cfg(all(feature = "rayon", not(loom)))]
pub use par::ParIter;
#[cfg(not(loom))]
pub use persistent::FileMap;
pub use shadow::{ShadowInsert, ShadowRefused, Shadowing};
pub use traits::Iter;

use crate::driver::{self, Front, KeyValue, Runner, DEFAULT_BINS};
use crate::error::Error;
use crate::hash::DefaultHashBuilder;
use crate::map::state::Core;
#[cfg(not(loom))]
use crate::persist::layout::{Intent, IntentKind, ThreadCell};
use crate::protocol::Step;
use crate::raw::index::{BinRef, Index, ResizeState};
use crate::raw::markers::Markers;
use crate::raw::threading::Shared;
use crate::reclaim::Guard;
use crate::resize::{self, Budget, HELP_CHUNKS};
use crate::stats::{Memory, Stats};
use crate::sync::{backoff, Ordering};
use crate::word::Inline;
use core::hash::BuildHasher;
use core::marker::PhantomData;

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
    pub(crate) core: Core,
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
        driver::or_panic(Self::build(DEFAULT_BINS, hasher))
    }

    /// An empty map for `n` keys using `hasher`. Panics on allocation failure.
    pub fn with_capacity_and_hasher(n: usize, hasher: S) -> Self {
        driver::or_panic(Self::try_with_capacity_and_hasher(n, hasher))
    }

    /// An empty map for `n` keys using `hasher`, or why it cannot be made.
    pub fn try_with_capacity_and_hasher(n: usize, hasher: S) -> Result<Self, Error> {
        Self::build(driver::bins_for(n)?, hasher)
    }

    fn build(bins: usize, hasher: S) -> Result<Self, Error> {
        let markers = Markers::for_hash(|w| hasher.hash_one(w));
        Ok(Map { core: Core::new(bins, markers)?, hasher, _kv: PhantomData })
    }

    /// The map's hasher.
    pub fn hasher(&self) -> &S {
        &self.hasher
    }

    /// This map with resizes transferred in chunks of `bins` bins (at least
    /// 1) instead of the default, so tests can make small indexes transfer
    /// in many chunks, with helpers (feature `internals`).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn with_transfer_chunk(mut self, bins: usize) -> Self {
        self.core.set_chunk_bins(bins);
        self
    }

    /// Transfer chunks completed over all resizes (feature `internals`).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    pub fn transfer_chunks(&self) -> usize {
        self.core.chunks()
    }

    /// Enter and leave the map without doing anything: the per-operation
    /// cost of index reclamation, for benchmarks (feature `internals`).
    #[cfg(feature = "internals")]
    #[doc(hidden)]
    #[inline(never)]
    pub fn enter_leave(&self) {
        let guard = self.core.pin();
        core::hint::black_box(self.core.current(&guard).bins());
    }

    /// Number of keys.
    ///
    /// Exact when no operation is in flight. Under concurrency it is the
    /// sum of per-thread counts (inserts minus removes), each read once at
    /// some moment during the call, so it can differ from the number of
    /// keys at any single instant by the inserts and removes that complete
    /// during the call (never below 0). Cost: one load per thread that has
    /// used the map, no shared write; the operations that change the count
    /// pay one store to their own thread's line. Shadow inserts count once
    /// committed.
    pub fn len(&self) -> usize {
        len::sum(&self.core.reclaim)
    }

    /// Count `delta` bytes of values into this thread's share (allocator
    /// mode: see `allocator::pointers`).
    #[inline]
    pub(crate) fn add_value_bytes(&self, delta: i64) {
        self.core.reclaim.with_record(|r| r.value_bytes.add(delta))
    }

    /// The bytes of values counted by [`add_value_bytes`](Self::add_value_bytes).
    pub(crate) fn value_bytes(&self) -> i64 {
        len::sum_of(&self.core.reclaim, |r| &r.value_bytes)
    }

    /// True if the map holds no key (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots inserts may use before the index must grow: three per bin plus
    /// four per link bucket. A map usually grows at 55–75% of it.
    pub fn capacity(&self) -> usize {
        let guard = self.core.pin();
        self.core.current(&guard).slot_capacity()
    }

    /// Grow ahead of a known load, so that `additional` more keys than the
    /// map holds now fit without a resize (unless keys crowd one bin).
    /// Non-blocking like any resize: other threads keep working and help
    /// move bins. Panics if the index cannot grow; see
    /// [`try_reserve`](Self::try_reserve).
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// m.reserve(100_000);
    /// assert!(m.capacity() >= 100_000);
    /// ```
    pub fn reserve(&self, additional: usize) {
        driver::or_panic(self.try_reserve(additional))
    }

    /// Like [`reserve`](Self::reserve), with a failure to grow (too large,
    /// memory refused) as an error; the map is unchanged then.
    pub fn try_reserve(&self, additional: usize) -> Result<(), Error> {
        let want = driver::bins_for(self.len().saturating_add(additional))?;
        loop {
            let guard = self.core.pin();
            let idx = self.core.current(&guard);
            if idx.bins() >= want {
                return Ok(());
            }
            resize::grow(&self.core, &guard, idx, &|w| self.hash_word(w), want, Budget::All)?;
        }
    }

    /// Shrink the index to the smallest that holds the map's keys with the
    /// headroom [`with_capacity`](Self::with_capacity) leaves (about 1.5
    /// keys per bin), if that is smaller than the index now. Non-blocking
    /// like any resize: other threads keep working; an operation on a bin
    /// being moved waits for that bin, and inserts that find the smaller
    /// index full grow it again. Memory of the old index is returned once
    /// no thread is inside it.
    ///
    /// Maps also shrink on their own once fewer than one key per eight
    /// bins remains (checked every 1024 removes of a thread), never below
    /// the capacity they were built with; see the crate docs on Memory.
    /// An index that cannot be allocated, a snapshot holding the index, or
    /// keys too unevenly hashed to merge (see [`Stats::shrinks_fell_back`])
    /// only mean no shrink: the map is unchanged.
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// for k in 0..100_000 {
    ///     m.insert(k, k).unwrap();
    /// }
    /// let big = m.capacity();
    /// for k in 10..100_000 {
    ///     m.remove(&k);
    /// }
    /// m.shrink_to_fit();
    /// assert!(m.capacity() < big / 100);
    /// assert_eq!(m.len(), 10);
    /// assert_eq!(m.get(&3), Some(3));
    /// ```
    pub fn shrink_to_fit(&self) {
        self.shrink_to(0)
    }

    /// Let this in-memory map's bins give back emptied links, for a map
    /// whose readers all hold the allocator's guards (see
    /// [`Index::return_links`](crate::raw::index::Index::return_links)).
    pub(crate) fn return_links(&self) {
        let guard = self.core.pin();
        self.core.current(&guard).return_links();
    }

    /// Shrink the index, keeping room for at least `min_capacity` keys (and
    /// for every key present); see [`shrink_to_fit`](Self::shrink_to_fit).
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::with_capacity(1 << 20);
    /// m.insert(1, 1).unwrap();
    /// m.shrink_to(1000);
    /// assert!(m.capacity() >= 1000 && m.capacity() < 1 << 16);
    /// ```
    pub fn shrink_to(&self, min_capacity: usize) {
        let Ok(want) = driver::bins_for(self.len().max(min_capacity)) else { return };
        let mut spins = 0;
        loop {
            let guard = self.core.pin();
            let idx = self.core.current(&guard);
            if idx.bins() <= want {
                return;
            }
            if let Some(next) = idx.next_index() {
                if next.bins() > idx.bins() {
                    return; // a grow (or a shrink's fallback) is under way: it wins
                }
            } else if idx.resize.phase.load(Ordering::Relaxed) != ResizeState::IDLE {
                // Relaxed: a hint; `shrink` decides with a CAS.
                return; // held by a snapshot, or another thread is allocating
            }
            // Starts a shrink, or helps the one under way; then waits for
            // its publication (other helpers may hold the last chunks).
            let fallbacks = self.core.shrinks().1;
            if resize::shrink(&self.core, &guard, idx, &|w| self.hash_word(w), want).is_err()
                || self.core.shrinks().1 != fallbacks
            {
                return; // no memory for it, or keys too uneven to merge
            }
            backoff(&mut spins);
        }
    }

    /// Automatic shrinking (see [`shrink_to_fit`](Self::shrink_to_fit)),
    /// checked by a thread every `REMOVES_PER_SHRINK_CHECK` removes.
    #[cold]
    fn maybe_shrink(&self, guard: &Guard<'_>) {
        let idx = self.core.current(guard);
        if idx.next_index().is_some() {
            return; // a resize is under way
        }
        let keys = len::sum(&self.core.reclaim);
        if let Some(target) =
            self.core.shrink_policy.target(idx.bins(), keys, len::REMOVES_PER_SHRINK_CHECK as usize)
        {
            // An index that cannot be allocated only means no shrink now.
            let _ = resize::shrink(&self.core, guard, idx, &|w| self.hash_word(w), target);
        }
    }

    /// A weakly consistent iterator over the entries: every key present for
    /// the whole iteration is yielded exactly once, even across resizes;
    /// keys inserted or removed meanwhile may or may not be (see [`Iter`]).
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// for k in 0..100 {
    ///     m.insert(k, k * 2).unwrap();
    /// }
    /// let mut all: Vec<_> = m.iter().collect();
    /// all.sort();
    /// assert_eq!(all, (0..100).map(|k| (k, k * 2)).collect::<Vec<_>>());
    /// ```
    pub fn iter(&self) -> Iter<'_, K, V, S> {
        Iter::new(self)
    }

    /// Bytes in use, without a scan: cheap enough to poll (see [`Memory`]).
    pub fn memory(&self) -> Memory {
        let guard = self.core.pin();
        Memory::of(self.core.current(&guard), 0)
    }

    /// A snapshot of the index's shape and occupancy (scans the index).
    pub fn stats(&self) -> Stats {
        // A scan of one index: finish a resize under way first (and leave,
        // so that the index it replaced can be freed before the count).
        resize::finish_under_way(&self.core, &self.core.pin(), &|w| self.hash_word(w));
        let guard = self.core.pin();
        let idx = self.core.current(&guard);
        Stats::of(
            idx,
            self.core.resizes(),
            self.core.shrinks(),
            self.core.occupancy_at_resize(),
            self.core.reclaim.pending(),
        )
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Front for Map<K, V, S> {
    type K = K;
    type V = V;
    type Inside<'a>
        = Session<'a, K, V, S>
    where
        Self: 'a;

    #[inline(always)]
    fn hash_word(&self, w: u64) -> u64 {
        self.hasher.hash_one(w)
    }

    /// Enter the map once (announcing this thread, see `reclaim`) for `f`.
    #[inline(always)]
    fn enter<X>(&self, f: impl FnOnce(&Session<'_, K, V, S>) -> X) -> X {
        let guard = self.core.pin();
        #[cfg(not(loom))]
        let cell = self.core.cell(&guard);
        // A persistent map's writes count themselves in the thread's cell
        // from inside the protocol (`persist::cell::note_count`).
        #[cfg(not(loom))]
        let _scope = cell.map(crate::persist::cell::CellScope::enter);
        f(&Session {
            map: self,
            index: self.core.current(&guard),
            guard: &guard,
            #[cfg(not(loom))]
            cell,
        })
    }
}

/// A thread inside a map: the index it entered with, and its record.
pub(crate) struct Session<'m, K, V, S> {
    map: &'m Map<K, V, S>,
    index: &'m Index,
    guard: &'m Guard<'m>,
    /// This thread's cell in a persistent map's file (None in memory).
    #[cfg(not(loom))]
    cell: Option<&'m ThreadCell>,
}

/// The cold paths of [`Runner::run`], out of line so that the hot path (a
/// get, an insert into a bin with room) stays small enough to inline.
impl<K: Inline, V: Inline, S: BuildHasher> Session<'_, K, V, S> {
    /// Help a grow of `idx`, which a write started in.
    #[cold]
    #[inline(never)]
    fn help_grow(&self, idx: &Index) {
        let map = self.map;
        resize::help_on_the_way(&map.core, idx, &|w| map.hash_word(w));
    }

    /// An insert found `bin` of `idx` full: raise the link limit (true: retry
    /// at once) or grow the index, helping with a bounded amount of work
    /// (false: back off, then retry).
    #[cold]
    #[inline(never)]
    fn full(&self, bin: &BinRef<'_>, idx: &Index, hash: u64) -> Result<bool, Error> {
        let map = self.map;
        if driver::links_instead_of_growing(bin, idx, || map.len()) {
            return Ok(true);
        }
        driver::check_separable(bin, hash, |w| map.hash_word(w))?;
        let budget = Budget::Bounded { own: Some(idx.bin_of(hash)), chunks: HELP_CHUNKS };
        resize::grow(&map.core, self.guard, idx, &|w| map.hash_word(w), 0, budget)?;
        Ok(false)
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Runner for Session<'_, K, V, S> {
    type T = Shared;
    type UserCode<'a>
        = Session<'a, K, V, S>
    where
        Self: 'a;

    /// The session itself: its guard keeps every index user code may
    /// replace, and `run` follows transfers anyway.
    #[inline(always)]
    fn user_code(&self) -> Session<'_, K, V, S> {
        Session {
            map: self.map,
            index: self.index,
            guard: self.guard,
            #[cfg(not(loom))]
            cell: self.cell,
        }
    }

    /// Shared removes always kill the key.
    #[inline(always)]
    fn calls_suspended(&self) -> bool {
        true
    }

    /// The index this thread entered with: it stays allocated while the
    /// session's guard lives, and a batch follows transfers from it.
    #[inline(always)]
    fn current(&self) -> &Index {
        self.index
    }

    /// Follow transferred bins to the next index; grow the index (helping
    /// any resize under way) when an insert finds it full.
    #[inline(always)]
    fn run<X>(
        &self,
        hash: u64,
        mut op: impl FnMut(&BinRef<'_>) -> Step<X>,
        len_delta: impl Fn(&X) -> i64,
    ) -> Result<X, Error> {
        let mut idx = self.index;
        let mut spins = 0;
        loop {
            let bin = idx.bin(idx.bin_of(hash));
            // A persistent map's thread names the bin before touching it,
            // for recovery (`persist`). Relaxed: the protocol's first write
            // is a CAS, which orders this store before it.
            #[cfg(not(loom))]
            if let Some(c) = self.cell {
                c.intent
                    .store(Intent::pack(IntentKind::Operation, idx.generation, bin.bin), Ordering::Relaxed);
            }
            match op(&bin) {
                Step::Done(r) => {
                    let d = len_delta(&r);
                    // Gets and puts skip these stores.
                    if d != 0 {
                        // (A persistent map's cell counted it already, in
                        // the protocol: `persist::cell::note_count`.)
                        if self.guard.record().len.add(d) {
                            self.map.maybe_shrink(self.guard);
                        }
                        // Inserts and removes drive a grow of the index they
                        // started in (one load of a line every operation
                        // reads): it ends within bins / chunk writes.
                        if self.index.next_index().is_some() {
                            self.help_grow(self.index);
                        }
                    }
                    return Ok(r);
                }
                // Nothing else here: a call on this path, even one never
                // taken, cost every get 28 instructions of spills.
                Step::Moved => {
                    idx = idx.next_index().expect("dlht invariant: a transferred bin has a next index")
                }
                Step::Full => {
                    if self.full(&bin, idx, hash)? {
                        continue;
                    }
                    // Our bin may still be in another helper's hands.
                    backoff(&mut spins);
                }
            }
        }
    }
}
