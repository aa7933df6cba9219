//! The untyped heart of a map: the current index, the markers, reclamation
//! and counters. `Map<K, V, S>` wraps it with key/value encoding and hashing.

use crate::error::Error;
#[cfg(not(loom))]
use crate::persist::{cell::CellScope, layout::ThreadCell, MapFile};
#[cfg(not(loom))]
use crate::plant::{planted, Plant};
use crate::raw::index::Index;
use crate::raw::markers::Markers;
use crate::reclaim::{Guard, Reclaim};
use crate::resize::policy::{ShrinkPolicy, CHUNK_BINS};
use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Mutex, Ordering};
use crossbeam_utils::CachePadded;
#[cfg(not(loom))]
use std::sync::Arc;

/// Shared state behind a map.
pub struct Core {
    current: AtomicPtr<Index>,
    /// Generation of `current`, stored after it (see `reclaim`).
    generation: AtomicU64,
    pub(crate) reclaim: Reclaim,
    resizes: AtomicUsize,
    /// Keys moved by the resize under way (a statistic). This and `chunks`
    /// are written by every helper's chunk, each alone in its cache line:
    /// beside `current` and `generation`, which every operation reads, they
    /// made each chunk a miss for every other thread.
    transferred: CachePadded<AtomicUsize>,
    /// Transfer chunks completed, over all resizes (a statistic).
    chunks: CachePadded<AtomicUsize>,
    /// Occupancy (keys / insert-usable slots) of each index when it was replaced.
    occupancy_at_resize: Mutex<Vec<f64>>,
    /// Bins per transfer chunk (`resize`).
    chunk_bins: usize,
    /// Shrinks published, and those that fell back (statistics).
    shrinks: AtomicUsize,
    shrinks_fell_back: AtomicUsize,
    /// When to shrink on its own.
    pub shrink_policy: ShrinkPolicy,
    /// The files of a persistent map (`persist`); None in memory.
    #[cfg(not(loom))]
    persist: Option<Arc<MapFile>>,
}

impl Core {
    /// A core with one index of `bins` bins.
    pub fn new(bins: usize, markers: Markers) -> Result<Core, Error> {
        Self::with_reclaim(bins, markers, Reclaim::new())
    }

    /// A core whose reclamation uses the protocol given (loom models).
    #[cfg(all(test, loom))]
    pub fn with_protocol(bins: usize, markers: Markers, asymmetric: bool) -> Result<Core, Error> {
        Self::with_reclaim(bins, markers, Reclaim::with_protocol(asymmetric))
    }

    fn with_reclaim(bins: usize, markers: Markers, reclaim: Reclaim) -> Result<Core, Error> {
        Ok(Self::assemble(Index::new(bins, markers, 1)?, reclaim))
    }

    /// A persistent map's core: its current index, the next one a grow was
    /// filling when the map was last open (the grow goes on), its files.
    #[cfg(not(loom))]
    pub fn persistent(
        current: Index,
        next: Option<Index>,
        fallback: Option<Box<Index>>,
        file: Arc<MapFile>,
    ) -> Core {
        if let Some(n) = next {
            let fell_back = n.file().is_some_and(|f| f.header().fell_back.load(Ordering::Relaxed) == 1);
            let n = current.attach_next(Box::new(n));
            if let Some(f) = fallback {
                // The box recovery may already have attached to `n` (by its
                // address): the same one.
                let f = Box::into_raw(f);
                // Relaxed: published by the phase store below, as in `attach`.
                current.resize.fallback.store(f, Ordering::Relaxed);
                if fell_back {
                    // SAFETY: both were just boxed here and are owned by
                    // `current` (next, fallback) from now on, as a shrink's.
                    unsafe { (*n).attach_fallback(&*f) };
                }
            }
            // Release: as `resize::attach` publishes a next index.
            current.resize.phase.store(crate::raw::index::ResizeState::PUBLISHED, Ordering::Release);
        }
        let mut core = Self::assemble(current, Reclaim::new());
        core.persist = Some(file);
        core
    }

    fn assemble(index: Index, reclaim: Reclaim) -> Core {
        let bins = index.bins();
        let generation = index.generation;
        let index = Box::new(index);
        Core {
            current: AtomicPtr::new(Box::into_raw(index)),
            generation: AtomicU64::new(generation),
            reclaim,
            resizes: AtomicUsize::new(0),
            transferred: CachePadded::new(AtomicUsize::new(0)),
            chunks: CachePadded::new(AtomicUsize::new(0)),
            occupancy_at_resize: Mutex::new(Vec::new()),
            chunk_bins: CHUNK_BINS,
            shrinks: AtomicUsize::new(0),
            shrinks_fell_back: AtomicUsize::new(0),
            shrink_policy: ShrinkPolicy::new(bins),
            #[cfg(not(loom))]
            persist: None,
        }
    }

    /// The files of a persistent map.
    #[cfg(not(loom))]
    #[inline(always)]
    pub fn persist(&self) -> Option<&Arc<MapFile>> {
        self.persist.as_ref()
    }

    /// The calling thread's cell in a persistent map's file (None in memory).
    #[cfg(not(loom))]
    #[inline(always)]
    pub fn cell<'g>(&'g self, guard: &'g Guard<'_>) -> Option<&'g ThreadCell> {
        match &self.persist {
            None => None,
            Some(p) => Some(p.cell(&guard.record().persist_cell)),
        }
    }

    /// While the returned scope lives, this thread's transfers record what
    /// they move in its cell (persistent maps only).
    #[cfg(not(loom))]
    pub fn cell_scope(&self) -> Option<CellScope> {
        let p = self.persist.as_ref()?;
        Some(self.reclaim.with_record(|r| CellScope::enter(p.cell(&r.persist_cell))))
    }

    /// Enter the map: announce this thread (if it is not inside already)
    /// until the guard drops, on unwind too. See `reclaim`.
    #[inline(always)]
    pub fn pin(&self) -> Guard<'_> {
        self.reclaim.pin(&self.generation)
    }

    /// The current index, which stays allocated while `guard` lives.
    #[inline(always)]
    pub fn current<'g>(&'g self, guard: &'g Guard<'_>) -> &'g Index {
        debug_assert!(guard.is_of(&self.reclaim), "dlht invariant: a guard of another map");
        // SeqCst: the load half of hazard 4's Dekker pair (see `reclaim`);
        // also Acquire, pairing with the store in `publish`, so the index's
        // contents are visible.
        // SAFETY: current is never null. The guard announced a generation
        // no greater than that of any index loaded from here while it lives
        // (generations only grow, and `pin` loads the generation with
        // Acquire before this load), and an index is freed only once no
        // announcement is at or below its generation.
        unsafe { &*self.current.load(Ordering::SeqCst) }
    }

    /// R4: make `next` current after `old` was fully transferred. True if
    /// this was a shrink that fell back (`next` must then be grown into its
    /// fallback at once). Judged here, before `next` is current: after that
    /// any insert may attach an ordinary grow to it.
    ///
    /// `fallback`: a shrink's, which goes unused unless it fell back. A
    /// persistent map deletes an unused fallback's file before `next`
    /// becomes current, since a grow of `next` may start at once and makes
    /// a file of that very generation (`old`'s + 2), which deleting the
    /// fallback's file later would take from the directory.
    pub fn publish(&self, old: &Index, next: &Index, fallback: Option<&Index>) -> bool {
        #[cfg(loom)]
        let _ = fallback;
        let fell_back = next.bins() < old.bins() && next.next_index().is_some();
        // Relaxed counters below: statistics; the chunk counter's AcqRel
        // already ordered every transfer before this point.
        let keys = self.transferred.swap(0, Ordering::Relaxed);
        if next.bins() > old.bins() {
            let occupancy = keys as f64 / old.slot_capacity() as f64;
            self.occupancy_at_resize.lock().unwrap_or_else(|e| e.into_inner()).push(occupancy);
        } else {
            self.shrinks.fetch_add(1, Ordering::Relaxed);
            if fell_back {
                self.shrinks_fell_back.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.shrink_policy.resized(fell_back.then(|| (keys, old.bins())));
        let old_ptr = old as *const Index as *mut Index;
        #[cfg(not(loom))]
        if let Some(p) = &self.persist {
            // The file names the new index before any thread can use it as
            // current (and start growing it), and the old one's file is
            // deleted once the index is freed. A crash between the two
            // finds the new index current with everything in it.
            p.set_generation(next.generation);
            if let Some(f) = old.file() {
                f.retire();
            }
            // (A crash before this finds the unused fallback as a grow of
            // `next` under way, which goes on: correct, if wasted.)
            // Planted bug (scripts/planted-bugs.sh): delete it when it is
            // dropped, after publication, as before.
            if let Some(f) =
                fallback.filter(|_| !fell_back && !planted(Plant::FallbackFileLate)).and_then(Index::file)
            {
                f.remove_now();
            }
            crate::persist::crash::at(crate::persist::crash::CrashPoint::ResizePublished);
        }
        self.current.store(next as *const Index as *mut Index, Ordering::SeqCst);
        self.generation.store(next.generation, Ordering::SeqCst);
        self.resizes.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `old` was created by Box::into_raw (Core::new or grow),
        // is no longer current, and only the last chunk finisher retires it.
        // It is freed when the last thread inside it leaves, the publisher
        // (inside the map now) included.
        unsafe { self.reclaim.retire(old_ptr) };
        fell_back
    }

    /// Shrinks published, and how many of them fell back.
    pub fn shrinks(&self) -> (usize, usize) {
        // Relaxed: statistics.
        (self.shrinks.load(Ordering::Relaxed), self.shrinks_fell_back.load(Ordering::Relaxed))
    }

    /// Count keys transferred outside a chunk (an insert's own bin).
    pub fn note_transferred(&self, keys: usize) {
        self.transferred.fetch_add(keys, Ordering::Relaxed); // a statistic
    }

    /// Count a finished transfer chunk and the keys it copied (for the
    /// occupancy statistic).
    pub fn note_chunk(&self, keys: usize) {
        self.transferred.fetch_add(keys, Ordering::Relaxed); // a statistic
        self.chunks.fetch_add(1, Ordering::Relaxed); // a statistic
    }

    /// Transfer chunks completed, over all resizes.
    #[cfg(feature = "internals")]
    pub fn chunks(&self) -> usize {
        self.chunks.load(Ordering::Relaxed) // a statistic
    }

    /// Bins per transfer chunk.
    #[inline]
    pub fn chunk_bins(&self) -> usize {
        self.chunk_bins
    }

    /// Set the bins per transfer chunk (at least 1), before the map is shared.
    #[cfg(feature = "internals")]
    pub fn set_chunk_bins(&mut self, bins: usize) {
        self.chunk_bins = bins.max(1);
    }

    /// Resizes completed.
    pub fn resizes(&self) -> usize {
        self.resizes.load(Ordering::Relaxed) // a statistic
    }

    /// Occupancy of each replaced index at its resize.
    pub fn occupancy_at_resize(&self) -> Vec<f64> {
        self.occupancy_at_resize.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        // Relaxed: &mut self, no other thread can access the map.
        let mut cur = self.current.load(Ordering::Relaxed);
        // A persistent map being dropped has no operation in flight: it is
        // clean (a grow left under way by bounded helping is found by the
        // next open from its index file, and goes on).
        #[cfg(not(loom))]
        if let Some(p) = &self.persist {
            p.close_clean();
        }
        // A grow may be under way (helping is bounded, so writes can stop
        // before it ends): the indexes it is filling are owned here too.
        // A shrink left under way (a persistent map's, resumed on reopen and
        // not yet finished) owns its fallback too, unless it is already the
        // smaller index's next (then the walk below frees it).
        // SAFETY: as below, the current index is live and owned here.
        let first = unsafe { &*cur };
        let fallback = first.resize.fallback.swap(core::ptr::null_mut(), Ordering::Relaxed);
        let chained = first.next_index().and_then(|n| n.next_index()).map(|f| f as *const Index);
        if !fallback.is_null() && chained != Some(fallback as *const Index) {
            // SAFETY: from Box::into_raw in `resize::attach` or
            // `Core::persistent`, owned by the resize under way, reachable
            // from nothing else.
            drop(unsafe { Box::from_raw(fallback) });
        }
        while !cur.is_null() {
            // SAFETY: &mut self: no thread is inside. The current index and
            // the unpublished ones after it (from Box::into_raw in
            // `attach_next`) are owned here and by nothing else; retired
            // ones are freed by Reclaim's Drop.
            let idx = unsafe { Box::from_raw(cur) };
            cur = idx.next_index().map_or(core::ptr::null_mut(), |n| n as *const Index as *mut Index);
            drop(idx);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::map::state::{AtomicUsize, CachePadded, Core};
    use core::mem::{offset_of, size_of};

    /// `current`, `generation` and the reclamation state (read by every
    /// operation) share no line with the counters every transfer chunk
    /// writes.
    #[test]
    fn chunk_counters_have_lines_of_their_own() {
        use crate::raw::index::tests::lines;
        let read = [
            lines(offset_of!(Core, current), 8),
            lines(offset_of!(Core, generation), 8),
            lines(offset_of!(Core, reclaim), size_of::<crate::reclaim::Reclaim>()),
        ];
        for w in [offset_of!(Core, transferred), offset_of!(Core, chunks)] {
            let w = lines(w, size_of::<CachePadded<AtomicUsize>>());
            for r in &read {
                assert!(w.end <= r.start || r.end <= w.start, "written lines {w:?} overlap read lines {r:?}");
            }
        }
    }
}
