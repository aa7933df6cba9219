//! Owned guards: a [`Guard`](super::Guard) that is `Send` and `Sync`, for
//! async code that holds values across `.await` points (a task may resume
//! on another thread).
//!
//! crossbeam-epoch pins a *thread*, so its guards cannot move (its
//! maintainers call a sendable handle a bug). An owned guard pins nothing:
//! it registers in a process-wide [`Registry`], and while any owned guard
//! is registered an element that leaves an index is held back in the
//! registry instead of going to the epoch collector. It goes there once
//! every owned guard that existed when it was retired has been dropped;
//! the collector then also waits for threads pinned the ordinary way.
//!
//! Why nothing an owned guard can read is freed (a Dekker pair): a guard
//! registers (the count of live guards raised) and only then reads the
//! index; a retiring thread has unlinked the element (its index CAS) and
//! only then reads the count. Either the retirer sees the guard, and holds
//! the element until that guard is gone, or the guard's reads come after
//! the unlink and cannot find the element. The barrier on each side is
//! asymmetric, as in the index reclamation (`reclaim`): retiring is
//! frequent and gets a compiler fence, registering is rare and issues
//! `membarrier`; without membarrier both sides fence.
//!
//! Written here rather than taken from a crate: crossbeam-epoch has no
//! sendable guard, and seize's owned guards protect only pointers loaded
//! through `Guard::protect`, which the index's validated slot reads are
//! not (docs/DESIGN.md, "Allocator mode").

use crate::plant::{planted, Plant};
use crate::sync::{compiler_fence, fence, AtomicUsize, Mutex, Ordering};
use std::collections::BTreeSet;

/// An element that left an index, with how to free it.
pub(crate) struct Held {
    pub addr: usize,
    /// Frees `addr` (run once, when no thread can read `addr` any more).
    pub free: super::entry::Free,
}

/// Owned guards alive, and elements retired while some were.
pub(crate) struct Registry {
    /// Owned guards alive: the count a retiring thread reads.
    live: AtomicUsize,
    state: Mutex<State>,
    /// Whether the barriers are asymmetric (see the module docs).
    asymmetric: bool,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// Ids of the owned guards alive.
    alive: BTreeSet<u64>,
    /// Elements held back, each with the newest guard alive at its retire:
    /// it may be freed once no guard with that id or an older one lives.
    held: Vec<(u64, Held)>,
}

impl Registry {
    /// An empty registry; `asymmetric` as `reclaim` decides it.
    #[cfg_attr(all(loom, not(test)), allow(dead_code))] // loom: models only
    pub(crate) fn new(asymmetric: bool) -> Self {
        Registry { live: AtomicUsize::new(0), state: Mutex::new(State::default()), asymmetric }
    }

    /// Register an owned guard: its id, and false if the barrier that makes
    /// it safe could not be had (membarrier refused): the caller must then
    /// unregister it without having read anything under it.
    pub(crate) fn register(&self) -> (u64, bool) {
        let id = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let id = s.next_id;
            s.next_id += 1;
            s.alive.insert(id);
            // SeqCst: the store half of the guard's side of the Dekker pair.
            self.live.fetch_add(1, Ordering::SeqCst);
            id
        };
        // The guard's barrier, before any of its reads of an index.
        (id, self.heavy_barrier())
    }

    /// Unregister the guard `id`: the elements no owned guard can read any
    /// more, for the caller to hand to the epoch collector.
    pub(crate) fn unregister(&self, id: u64) -> Vec<Held> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.alive.remove(&id);
        // Release (and the mutex): the guard's reads happen before the
        // elements this returns are handed on. A retirer that still sees
        // the old count only holds an element back needlessly.
        self.live.fetch_sub(1, Ordering::Release);
        let oldest = s.alive.first().copied().unwrap_or(u64::MAX);
        if s.held.iter().all(|&(newest, _)| newest >= oldest) {
            return Vec::new();
        }
        let (free, keep): (Vec<_>, Vec<_>) = s.held.drain(..).partition(|&(newest, _)| newest < oldest);
        s.held = keep;
        free.into_iter().map(|(_, h)| h).collect()
    }

    /// A retiring thread's check, after the element left the index:
    /// `Some` gives it back to hand to the epoch collector now, `None`
    /// means it is held until the owned guards alive now are gone.
    #[inline]
    pub(crate) fn retire(&self, h: Held) -> Option<Held> {
        // Planted bug (scripts/planted-bugs.sh): ignore owned guards.
        if planted(Plant::OwnedNoHold) {
            return Some(h);
        }
        self.light_barrier();
        // SeqCst: the load half of the retirer's side of the Dekker pair.
        if self.live.load(Ordering::SeqCst) == 0 {
            return Some(h);
        }
        self.hold(h)
    }

    /// Hold `h` back for the owned guards alive now; if the last one
    /// unregistered since `retire` read the count, there is none, and `h`
    /// goes back to the caller (no later unregister would free it).
    #[cold]
    fn hold(&self, h: Held) -> Option<Held> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Planted bug (scripts/planted-bugs.sh): read "no guard alive" as
        // "held", and keep the element forever.
        let Some(&newest) = s.alive.last() else {
            return if planted(Plant::OwnedHoldNone) { None } else { Some(h) };
        };
        s.held.push((newest, h));
        None
    }

    /// The retirer's barrier between its unlink and its read of the count.
    #[inline(always)]
    fn light_barrier(&self) {
        if self.asymmetric {
            // The registering thread's membarrier supplies the hardware
            // barrier on this thread when it matters.
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    /// The registering thread's barrier between raising the count and its
    /// first read; false if membarrier was refused.
    fn heavy_barrier(&self) -> bool {
        if self.asymmetric {
            return crate::reclaim::process_barrier();
        }
        fence(Ordering::SeqCst);
        true
    }
}

/// The process's registry (owned guards protect elements of every map, as
/// epoch pins do). None under loom, whose models build their own (a
/// static cannot hold loom's atomics): maps there have no owned guards.
pub(crate) fn registry() -> Option<&'static Registry> {
    #[cfg(not(loom))]
    {
        static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
        Some(REGISTRY.get_or_init(|| Registry::new(crate::reclaim::asymmetric())))
    }
    #[cfg(loom)]
    {
        None
    }
}

#[cfg(all(test, loom))]
mod models {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    /// A reader with an owned guard loads an element's address and reads
    /// it; a writer unlinks the element and retires it through the
    /// registry, freeing it at once when the registry gives it back (as if
    /// no thread were pinned). Loom reports a free that races the read.
    #[test]
    fn an_owned_guard_never_reads_a_freed_element() {
        loom::model(|| {
            let reg = Arc::new(Registry::new(false));
            let cell = Arc::new(UnsafeCell::new(7u64));
            let slot = Arc::new(AtomicUsize::new(1)); // 1: linked, 0: unlinked
            fn free(cell: &UnsafeCell<u64>) {
                // SAFETY: loom checks that no read races this write.
                cell.with_mut(|p| unsafe { *p = 0 });
            }
            let (r2, c2, s2) = (reg.clone(), cell.clone(), slot.clone());
            let reader = loom::thread::spawn(move || {
                let (id, barrier) = r2.register();
                assert!(barrier);
                if s2.load(Ordering::Acquire) == 1 {
                    // SAFETY: loom checks that no write races this read.
                    let v = c2.with(|p| unsafe { *p });
                    assert_eq!(v, 7, "read a freed element");
                }
                for _ in r2.unregister(id) {
                    free(&c2);
                }
            });
            slot.store(0, Ordering::SeqCst); // the unlink
            let h = Held { addr: 0, free: crate::allocator::entry::Free::Plain(|_| {}) };
            if reg.retire(h).is_some() {
                free(&cell);
            }
            reader.join().unwrap();
        });
    }

    /// An element retired while the last owned guard unregisters is freed
    /// exactly once: by the retirer, or by the guard's unregister — never
    /// held with no guard left to let it go (it would leak, its `Drop`
    /// never run).
    #[test]
    fn an_element_retired_as_the_last_owned_guard_leaves_is_freed_once() {
        loom::model(|| {
            let reg = Arc::new(Registry::new(false));
            let frees = Arc::new(AtomicUsize::new(0));
            let (r2, f2) = (reg.clone(), frees.clone());
            let guard = loom::thread::spawn(move || {
                let (id, barrier) = r2.register();
                assert!(barrier);
                let given_back = r2.unregister(id).len();
                f2.fetch_add(given_back, Ordering::Relaxed);
            });
            let h = Held { addr: 0, free: crate::allocator::entry::Free::Plain(|_| {}) };
            if reg.retire(h).is_some() {
                frees.fetch_add(1, Ordering::Relaxed);
            }
            guard.join().unwrap();
            let s = reg.state.lock().unwrap();
            assert_eq!(frees.load(Ordering::Relaxed) + s.held.len(), 1, "an element freed twice or lost");
            assert!(s.held.is_empty(), "an element held with no owned guard alive: leaked");
        });
    }
}
