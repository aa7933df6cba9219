//! Index lifetime: when an old index may be freed (paper §3.2.5, "GC old
//! index"; hazard 4).
//!
//! Each thread owns a cache-padded record (via the `thread_local` crate,
//! one per map) holding the *generation* it announced on entering the map,
//! 0 when outside. Indexes are numbered by generation. A thread that
//! announced `g` may reach any index of generation ≥ `g` (it follows `next`
//! pointers from the one it loaded), so an index of generation `r` may be
//! freed once every announcement is 0 or > `r`.
//!
//! Hazard 4 is a store→load race on both sides, closed by SeqCst on both:
//!
//! - enter: `generation` (load) → announce `g` (store, SeqCst) → `current`
//!   (load, SeqCst)
//! - publish: `current` (store, SeqCst) → `generation` (store) → scan the
//!   announcements (loads, SeqCst)
//!
//! In the single total order of SeqCst operations either the announcement
//! precedes the scan (the scanner sees it and keeps the index), or the scan
//! precedes it and then the entering thread's load of `current` follows the
//! publish and returns the new index, so it never touches the old one. The
//! announcement store is an `xchg` on x86-64 (about 20 cycles, paid once per
//! operation or batch); see the README for the measured per-operation cost.
//!
//! The record also carries the thread's share of the map's length, written
//! only by its owner (no read-modify-write needed).

use crate::raw::index::Index;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use std::sync::Mutex;
use thread_local::ThreadLocal;

/// One thread's record.
#[derive(Default)]
pub struct ThreadRecord {
    /// Generation announced on entry; 0 outside the map.
    announced: AtomicU64,
    /// Inserts minus removes by this thread (wrapping, as i64 bits).
    len_delta: AtomicU64,
}

impl ThreadRecord {
    /// Count a key inserted (+1) or removed (-1) by this thread.
    #[inline]
    pub fn add_len(&self, delta: i64) {
        // Relaxed load+store: only the owning thread writes this word;
        // readers sum it and tolerate staleness (len is exact when quiescent).
        let v = self.len_delta.load(Ordering::Relaxed);
        self.len_delta.store(v.wrapping_add(delta as u64), Ordering::Relaxed);
    }
}

/// The per-map reclamation state.
pub struct Reclaim {
    threads: ThreadLocal<CachePadded<ThreadRecord>>,
    /// Replaced indexes not yet freed, oldest first.
    retired: Mutex<Vec<RetiredIndex>>,
    /// Indexes freed so far.
    pub freed: AtomicUsize,
}

struct RetiredIndex(*mut Index);
// SAFETY: the pointer is an owned Box<Index> handed over to the retired list;
// Index is Send + Sync.
unsafe impl Send for RetiredIndex {}

impl Reclaim {
    /// Empty state.
    pub fn new() -> Self {
        Reclaim { threads: ThreadLocal::new(), retired: Mutex::new(Vec::new()), freed: AtomicUsize::new(0) }
    }

    /// This thread's record.
    #[inline]
    pub fn record(&self) -> &ThreadRecord {
        self.threads.get_or(Default::default)
    }

    /// Announce generation `g` for this thread (see the module docs).
    #[inline]
    pub fn announce(record: &ThreadRecord, g: u64) {
        record.announced.store(g, Ordering::SeqCst);
    }

    /// Leave the map. Release: every read of the index made inside happens
    /// before a scanner that sees 0 frees it.
    #[inline]
    pub fn leave(record: &ThreadRecord) {
        record.announced.store(0, Ordering::Release);
    }

    /// Sum of all threads' length deltas.
    pub fn len(&self) -> i64 {
        // Relaxed: see `add_len`; a sum of counters publishes nothing.
        self.threads.iter().map(|r| r.len_delta.load(Ordering::Relaxed) as i64).fold(0i64, i64::wrapping_add)
    }

    /// True if no thread is inside with an announced generation ≤ `g`.
    fn quiescent_up_to(&self, g: u64) -> bool {
        self.threads.iter().all(|r| {
            let a = r.announced.load(Ordering::SeqCst);
            a == 0 || a > g
        })
    }

    /// Hand over `old` (already replaced as current) to be freed once safe.
    /// Checks a few times, briefly, since in-flight operations take well
    /// under a microsecond; otherwise leaves it (and earlier ones) to the
    /// next resize, `Map::stats` or drop. Never yields or blocks: the
    /// publisher is an inserter that should get on with its insert.
    ///
    /// # Safety
    /// `old` came from `Box::into_raw`, is no longer reachable from the map's
    /// current pointer, and is handed over once.
    pub unsafe fn retire(&self, old: *mut Index) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired.push(RetiredIndex(old));
        for _ in 0..4 {
            self.free_quiescent(&mut retired);
            if retired.is_empty() {
                return;
            }
            for _ in 0..64 {
                core::hint::spin_loop();
            }
        }
    }

    /// Free every retired index no thread can still reach.
    pub fn collect(&self) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        self.free_quiescent(&mut retired);
    }

    fn free_quiescent(&self, retired: &mut Vec<RetiredIndex>) {
        retired.retain(|r| {
            // SAFETY: retired indexes stay allocated until freed right here.
            let g = unsafe { (*r.0).generation };
            if self.quiescent_up_to(g) {
                // SAFETY: no thread announced a generation ≤ g, and new
                // entrants load the current index (generation > g), so none
                // can reach this one; it was handed over once.
                drop(unsafe { Box::from_raw(r.0) });
                self.freed.fetch_add(1, Ordering::Relaxed); // a statistic
                false
            } else {
                true
            }
        });
    }

    /// Number of indexes waiting to be freed.
    pub fn pending(&self) -> usize {
        self.retired.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Default for Reclaim {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Reclaim {
    fn drop(&mut self) {
        for r in self.retired.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            // SAFETY: the map is being dropped: no thread is inside it.
            drop(unsafe { Box::from_raw(r.0) });
        }
    }
}
