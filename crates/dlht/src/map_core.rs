//! The untyped heart of a map: the current index, the markers, reclamation
//! and counters. `Map<K, V, S>` wraps it with key/value encoding and hashing.

use crate::error::Error;
use crate::raw::index::Index;
use crate::raw::markers::Markers;
use crate::reclaim::{Reclaim, ThreadRecord};
use crate::sync::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Shared state behind a map.
pub struct Core {
    current: AtomicPtr<Index>,
    /// Generation of `current`, stored after it (see `reclaim`).
    generation: AtomicU64,
    pub(crate) reclaim: Reclaim,
    resizes: AtomicUsize,
    transferred: AtomicUsize,
    /// Occupancy (keys / insert-usable slots) of each index when it was replaced.
    occupancy_at_resize: Mutex<Vec<f64>>,
}

impl Core {
    /// A core with one index of `bins` bins.
    pub fn new(bins: usize, markers: Markers) -> Result<Core, Error> {
        let index = Box::new(Index::new(bins, markers, 1)?);
        Ok(Core {
            current: AtomicPtr::new(Box::into_raw(index)),
            generation: AtomicU64::new(1),
            reclaim: Reclaim::new(),
            resizes: AtomicUsize::new(0),
            transferred: AtomicUsize::new(0),
            occupancy_at_resize: Mutex::new(Vec::new()),
        })
    }

    /// The current index. Only meaningful inside [`enter`](Self::enter), or
    /// while no resize can free it.
    #[inline]
    pub fn current(&self) -> &Index {
        // SAFETY: current is never null and stays allocated while the caller
        // is announced (see `reclaim`), or while the caller holds &mut Map.
        // Acquire: pairs with the SeqCst store in `publish`, so the index's
        // contents are visible.
        unsafe { &*self.current.load(Ordering::Acquire) }
    }

    /// Enter the map: announce, load the current index, run `f`, leave.
    #[inline]
    pub fn enter<R>(&self, f: impl FnOnce(&Index, &ThreadRecord) -> R) -> R {
        let record = self.reclaim.record();
        // Relaxed load: any value ≤ the generation of the index loaded below
        // is a safe announcement, and generations only grow.
        self.reclaim.announce(record, self.generation.load(Ordering::Relaxed));
        // SeqCst: the load half of hazard 4's Dekker pair (see `reclaim`).
        // SAFETY: announced above; the index stays allocated until we leave.
        let index = unsafe { &*self.current.load(Ordering::SeqCst) };
        let r = f(index, record);
        self.reclaim.leave(record);
        r
    }

    /// R4: make `next` current after `old` was fully transferred.
    pub fn publish(&self, old: &Index, next: &Index) {
        // Relaxed counters below: statistics; the chunk counter's AcqRel
        // already ordered every transfer before this point.
        let occupancy = self.transferred.swap(0, Ordering::Relaxed) as f64 / old.slot_capacity() as f64;
        self.occupancy_at_resize.lock().unwrap_or_else(|e| e.into_inner()).push(occupancy);
        let old_ptr = old as *const Index as *mut Index;
        self.current.store(next as *const Index as *mut Index, Ordering::SeqCst);
        self.generation.store(next.generation, Ordering::SeqCst);
        self.resizes.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `old` was created by Box::into_raw (Core::new or grow),
        // is no longer current, and only the last chunk finisher retires it.
        unsafe { self.reclaim.retire(old_ptr) };
    }

    /// Count keys copied by a transfer (for the occupancy statistic).
    pub fn note_transferred(&self, n: usize) {
        self.transferred.fetch_add(n, Ordering::Relaxed); // a statistic
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
        let cur = self.current.load(Ordering::Relaxed);
        // SAFETY: &mut self: no thread is inside. The current index is owned
        // here; retired ones are freed by Reclaim's Drop; `next` of the
        // current index is null (a resize completes within an operation).
        unsafe {
            let next = (*cur).next.load(Ordering::Relaxed);
            debug_assert!(next.is_null(), "dlht invariant: map dropped mid-resize");
            drop(Box::from_raw(cur));
        }
    }
}
