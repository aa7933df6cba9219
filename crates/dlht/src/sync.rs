//! The one place atomics come from, so the loom models run the real protocol.
//!
//! Under `--cfg loom` every atomic, fence and spin hint is loom's; otherwise
//! std's. Code elsewhere must never import `std::sync::atomic` directly.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;

/// A compiler-only fence: it orders nothing between threads, so loom has
/// nothing to model (the asymmetric protocol's hardware side is a
/// membarrier, which loom cannot model either; see `reclaim`).
pub(crate) use core::sync::atomic::compiler_fence;

/// Atomics kept outside loom's model on purpose: process-wide statistics
/// that order nothing, and that a static must hold (loom's atomics cannot
/// be built in a const); an index's link soft limit, a policy that guards
/// no data.
/// Also the atomics of a persistent map's files: memory shared with the
/// page cache, which loom cannot model (the persistent map is not built
/// under loom).
pub(crate) mod unmodelled {
    #[cfg_attr(loom, allow(unused_imports))]
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
}

/// The mutex of the retired-index list: loom's under loom, so that a model
/// thread waiting for it lets the holder run (and its synchronization is
/// modelled, as the real mutex's is).
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

/// Back off while another thread finishes a short critical step (a bin
/// transfer, a pending insert). Spins first, then yields the CPU so a
/// preempted owner can run.
#[inline]
pub(crate) fn backoff(spins: &mut u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        if *spins < 64 {
            std::hint::spin_loop();
            *spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}
