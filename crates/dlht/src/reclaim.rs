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
//! Hazard 4 is a store→load race on both sides (Dekker):
//!
//! - enter: `generation` (load) → announce `g` (store) → `current` (load)
//! - publish: `current` (store, SeqCst) → `generation` (store) → scan the
//!   announcements (loads)
//!
//! Either the scan sees the announcement (and keeps the index), or the
//! entering thread's load of `current` sees the publish (and never touches
//! the old index) — provided neither side lets its load pass its store.
//! Two ways to provide that, chosen once per process:
//!
//! - **Asymmetric (Linux, the default where the kernel offers it).** The
//!   process registers for `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`.
//!   The announcement is a plain store followed by a compiler fence — no
//!   locked instruction on the operation's path — and the publisher, before
//!   each scan, calls membarrier, which makes every running thread of the
//!   process execute a full memory barrier. This is the paper's "two atomic
//!   stores per request", made sound.
//! - **Symmetric (fallback).** The announcement is a SeqCst store (an `xchg`
//!   on x86-64) and the scan uses SeqCst loads after a SeqCst fence.
//!
//! The record also carries the thread's share of the map's length, written
//! only by its owner (no read-modify-write needed).

use crate::raw::index::Index;
use crate::sync::{fence, AtomicU64, AtomicUsize, Ordering};
use core::sync::atomic::compiler_fence;
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

/// `membarrier` commands (linux/membarrier.h); libc exports the syscall
/// number but not these.
#[cfg(all(target_os = "linux", not(loom)))]
mod membarrier {
    pub const CMD_QUERY: libc::c_int = 0;
    pub const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    pub const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn call(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: membarrier takes two integers and touches no user memory.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint) }
    }

    /// Register this process for expedited private barriers; false if the
    /// kernel does not offer them (then the symmetric protocol is used).
    pub fn register() -> bool {
        let cmds = call(CMD_QUERY);
        cmds >= 0
            && cmds & CMD_PRIVATE_EXPEDITED as libc::c_long != 0
            && call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    /// A full barrier on every running thread of this process.
    pub fn barrier() {
        let r = call(CMD_PRIVATE_EXPEDITED);
        assert_eq!(r, 0, "dlht: membarrier failed after registering");
    }
}

/// True if this process uses the asymmetric protocol (decided once).
fn asymmetric() -> bool {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *REGISTERED.get_or_init(membarrier::register)
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    {
        false
    }
}

/// The per-map reclamation state.
pub struct Reclaim {
    threads: ThreadLocal<CachePadded<ThreadRecord>>,
    /// Replaced indexes not yet freed, oldest first.
    retired: Mutex<Vec<RetiredIndex>>,
    /// Indexes freed so far.
    pub freed: AtomicUsize,
    /// Which Dekker protocol this map uses (see the module docs).
    asymmetric: bool,
}

struct RetiredIndex(*mut Index);
// SAFETY: the pointer is an owned Box<Index> handed over to the retired list;
// Index is Send + Sync.
unsafe impl Send for RetiredIndex {}

impl Reclaim {
    /// Empty state.
    pub fn new() -> Self {
        Reclaim {
            threads: ThreadLocal::new(),
            retired: Mutex::new(Vec::new()),
            freed: AtomicUsize::new(0),
            asymmetric: asymmetric(),
        }
    }

    /// This thread's record.
    #[inline]
    pub fn record(&self) -> &ThreadRecord {
        self.threads.get_or(Default::default)
    }

    /// Announce generation `g` for this thread (see the module docs). The
    /// caller loads `current` next.
    #[inline(always)]
    pub fn announce(&self, record: &ThreadRecord, g: u64) {
        if self.asymmetric {
            // Relaxed + compiler fence: the publisher's membarrier supplies
            // the hardware StoreLoad barrier on this thread when it matters.
            record.announced.store(g, Ordering::Relaxed);
            compiler_fence(Ordering::SeqCst);
        } else {
            record.announced.store(g, Ordering::SeqCst);
        }
    }

    /// Leave the map. Release: every read of the index made inside happens
    /// before a scanner that sees 0 frees it.
    #[inline(always)]
    pub fn leave(&self, record: &ThreadRecord) {
        record.announced.store(0, Ordering::Release);
    }

    /// Sum of all threads' length deltas.
    pub fn len(&self) -> i64 {
        // Relaxed: see `add_len`; a sum of counters publishes nothing.
        self.threads.iter().map(|r| r.len_delta.load(Ordering::Relaxed) as i64).fold(0i64, i64::wrapping_add)
    }

    /// The publisher's half of the Dekker pair, before scanning.
    fn scan_barrier(&self) {
        #[cfg(all(target_os = "linux", not(loom)))]
        if self.asymmetric {
            membarrier::barrier();
            return;
        }
        fence(Ordering::SeqCst);
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
        if retired.is_empty() {
            return;
        }
        self.scan_barrier();
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
