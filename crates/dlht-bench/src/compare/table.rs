//! The [`Table`] trait every system runs the workloads through, and how a
//! measurement's threads share a table ([`Sharing`]). Its own room below
//! the systems, the workloads and the report: each of them names it, and
//! none of them need import another for it.

use crate::compare::hashing::BenchHash;
use crate::harness::{self, Worker};
use std::sync::Arc;
use std::time::Duration;

/// Most requests a batch in the bench holds (stack buffers, no allocation).
pub const MAX_BATCH: usize = 128;

/// The system name of [`KeyStreamOnly`]: the bench's key stream and result
/// checks alone, with no table.
pub const KEY_STREAM: &str = "key-stream";

/// How the threads of a measurement may share a table: [`Concurrent`]
/// tables are `Sync` and go to every thread; [`OneThread`] tables run only
/// on the thread that built them. The workloads reach threads only through
/// this, so a single-thread table never needs to be `Sync`.
pub trait Sharing<T: ?Sized> {
    /// False for single-thread systems.
    const CONCURRENT: bool;

    /// `work(t, worker)` timed on `threads` threads (see
    /// [`harness::timed`](crate::harness::timed)).
    fn timed<S>(
        t: &T,
        threads: usize,
        dur: Duration,
        keys: u64,
        seed: u64,
        init: impl Fn(usize) -> S + Sync,
        work: impl Fn(&T, &mut Worker<S>) -> u64 + Sync,
    ) -> f64;

    /// `f(t, thread)` on `threads` threads at once (inline for one).
    fn on_threads(t: &T, threads: usize, f: impl Fn(&T, usize) + Sync);
}

/// Threads share the table.
pub struct Concurrent;

/// The table stays on the thread that built it; one thread only.
pub struct OneThread;

impl<T: Sync + ?Sized> Sharing<T> for Concurrent {
    const CONCURRENT: bool = true;

    #[inline(always)]
    fn timed<S>(
        t: &T,
        threads: usize,
        dur: Duration,
        keys: u64,
        seed: u64,
        init: impl Fn(usize) -> S + Sync,
        work: impl Fn(&T, &mut Worker<S>) -> u64 + Sync,
    ) -> f64 {
        harness::timed(threads, dur, keys, seed, init, |w| work(t, w))
    }

    fn on_threads(t: &T, threads: usize, f: impl Fn(&T, usize) + Sync) {
        if threads == 1 {
            return f(t, 0);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|th| {
                    let f = &f;
                    s.spawn(move || f(t, th))
                })
                .collect();
            // A failed result check panics: pass its message on (the scope
            // alone would only say that a thread panicked).
            for h in handles {
                if let Err(e) = h.join() {
                    std::panic::resume_unwind(e);
                }
            }
        });
    }
}

impl<T: ?Sized> Sharing<T> for OneThread {
    const CONCURRENT: bool = false;

    #[inline(always)]
    fn timed<S>(
        t: &T,
        threads: usize,
        dur: Duration,
        keys: u64,
        seed: u64,
        init: impl Fn(usize) -> S + Sync,
        work: impl Fn(&T, &mut Worker<S>) -> u64 + Sync,
    ) -> f64 {
        assert_eq!(threads, 1, "a single-thread system runs on one thread");
        harness::timed_inline(dur, keys, seed, init(0), |w| work(t, w))
    }

    fn on_threads(t: &T, threads: usize, f: impl Fn(&T, usize) + Sync) {
        assert_eq!(threads, 1, "a single-thread system runs on one thread");
        f(t, 0)
    }
}

/// A concurrent (or single-thread) map of u64 → u64, as the workloads use it.
pub trait Table: Sized {
    /// Name in reports.
    const NAME: &'static str;
    /// How threads may share it.
    type Sharing: Sharing<Self>;
    /// False for single-thread systems: they run only with one thread, on
    /// the thread that built them.
    const CONCURRENT: bool = <Self::Sharing as Sharing<Self>>::CONCURRENT;
    /// How an operation is substituted, if one is.
    const NOTE: &'static str = "";
    /// Pre-sized for `n` keys.
    fn with_capacity(n: usize) -> Self;
    /// The dlht map this system runs on, if it is one: the unbatched and
    /// the batched dlht systems then share one table (same data, half the
    /// memory).
    fn dlht_map(&self) -> Option<Arc<DlhtMap>> {
        None
    }
    /// This system as a view of an already populated dlht map, if it can be.
    fn view_of(_map: &Arc<DlhtMap>) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Value of `k`.
    fn get(&self, k: u64) -> Option<u64>;
    /// Insert if absent; true if inserted.
    fn insert(&self, k: u64, v: u64) -> bool;
    /// Remove; true if it was there.
    fn remove(&self, k: u64) -> bool;
    /// Update if present; true if it was there.
    fn put(&self, k: u64, v: u64) -> bool;

    /// Gets of `keys` into `out` (batched systems override this).
    #[inline]
    fn get_batch(&self, keys: &[u64], out: &mut [Option<u64>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.get(*k);
        }
    }

    /// For each key: insert it (must be fresh), then remove it.
    /// Returns how many inserts and removes succeeded.
    #[inline]
    fn insdel_batch(&self, keys: &[u64]) -> usize {
        keys.iter().map(|&k| self.insert(k, k) as usize + self.remove(k) as usize).sum()
    }

    /// Requests (put?, key, value): a put or a get. Returns successes.
    #[inline]
    fn mixed_batch(&self, reqs: &[(bool, u64, u64)]) -> usize {
        reqs.iter()
            .map(|&(is_put, k, v)| if is_put { self.put(k, v) } else { self.get(k).is_some() } as usize)
            .sum()
    }

    /// Inserts of fresh keys. Returns successes.
    #[inline]
    fn insert_batch(&self, keys: &[u64]) -> usize {
        keys.iter().map(|&k| self.insert(k, k) as usize).sum()
    }
}

/// No table at all: a get returns its key. Run through the same workload
/// loop as every system, it measures what the bench's key stream, batching
/// and result check cost by themselves, which must be far below what any
/// table costs (the report sets it against the memory limit).
pub struct KeyStreamOnly;

impl Table for KeyStreamOnly {
    const NAME: &'static str = KEY_STREAM;
    type Sharing = Concurrent;
    fn with_capacity(_: usize) -> Self {
        KeyStreamOnly
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        Some(std::hint::black_box(k))
    }
    fn insert(&self, _: u64, _: u64) -> bool {
        true
    }
    fn remove(&self, _: u64) -> bool {
        true
    }
    fn put(&self, _: u64, _: u64) -> bool {
        true
    }
}

/// dlht's concurrent map as the bench builds it.
pub type DlhtMap = dlht::Map<u64, u64, BenchHash>;
