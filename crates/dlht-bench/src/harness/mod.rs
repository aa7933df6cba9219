//! The one timed-loop harness of dlht-bench: the comparison, the studies and
//! the limit probe all measure through [`timed`], draw keys from a
//! per-thread [`KeyStream`] (`keys`), and beat host noise with interleaved
//! [`rounds`] summarised as a [`Spread`]. `limit` is the memory-limit probe,
//! `machine` what the figures were measured on.
//!
//! Why one place: a timed loop once re-seeded its key generator from the
//! chain it drew from, so its "memory-resident" working set was about 1024
//! lines and stayed in L2 (see `keys`). Every timed loop now gets its
//! stream from here, created once per thread before the clock starts.

pub mod keys;
pub mod limit;
pub mod machine;

pub use keys::KeyStream;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What a timed closure gets on its thread: its continuing key stream and
/// the state `init` built for it (scratch buffers, a trace cursor).
pub struct Worker<S> {
    /// This thread's keys: indexes into `0..keys` (see [`KeyStream`]).
    pub keys: KeyStream,
    /// Whatever `init` returned for this thread.
    pub state: S,
}

/// The seed of thread `t`'s key stream in a measurement seeded `seed`.
fn thread_seed(seed: u64, t: usize) -> u64 {
    seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Run `work` on `threads` threads for `dur`; millions of operations per
/// second, summed over the threads. Each thread builds its [`Worker`]
/// (a [`KeyStream`] over `keys` indexes seeded from `seed` and its number,
/// and `init(thread)`) before the clock starts, then calls `work` until
/// the time is up; `work` returns the operations it did. One thread runs
/// inline ([`timed_inline`]).
pub fn timed<S>(
    threads: usize,
    dur: Duration,
    keys: u64,
    seed: u64,
    init: impl Fn(usize) -> S + Sync,
    work: impl Fn(&mut Worker<S>) -> u64 + Sync,
) -> f64 {
    assert!(threads > 0, "timed: no threads");
    let worker = |t| Worker { keys: KeyStream::new(keys, thread_seed(seed, t)), state: init(t) };
    if threads == 1 {
        return timed_inline(dur, keys, seed, init(0), work);
    }
    // Relaxed throughout: `stop` only ends the loops (no data rides on it),
    // and the scope's join orders every `total` update before the final
    // load. The barrier starts the clock once every thread is built.
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    let ready = Barrier::new(threads + 1);
    let mut elapsed = Duration::ZERO;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, total, work, ready, worker) = (&stop, &total, &work, &ready, &worker);
            s.spawn(move || {
                let mut w = worker(t);
                ready.wait();
                let mut ops = 0;
                while !stop.load(Ordering::Relaxed) {
                    ops += work(&mut w);
                }
                total.fetch_add(ops, Ordering::Relaxed);
            });
        }
        ready.wait();
        let start = Instant::now();
        std::thread::sleep(dur);
        stop.store(true, Ordering::Relaxed);
        elapsed = start.elapsed();
    });
    total.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64() / 1e6
}

/// [`timed`] on one thread, the caller's, with `state` as thread 0's: a
/// single-thread system never leaves the thread that built it, so neither
/// it nor `work` need be `Sync`. Reads the clock every 64 calls only.
pub fn timed_inline<S>(
    dur: Duration,
    keys: u64,
    seed: u64,
    state: S,
    mut work: impl FnMut(&mut Worker<S>) -> u64,
) -> f64 {
    let mut w = Worker { keys: KeyStream::new(keys, thread_seed(seed, 0)), state };
    let start = Instant::now();
    let mut ops = 0;
    while start.elapsed() < dur {
        for _ in 0..64 {
            ops += work(&mut w);
        }
    }
    ops as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// The median of three measurements (the studies' defence against bursts
/// of interference, where they measure one thing at a time).
pub fn median3(mut measure: impl FnMut() -> f64) -> f64 {
    let mut v = [measure(), measure(), measure()];
    v.sort_by(f64::total_cmp);
    v[1]
}

/// Median and range of a set of per-round values.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (None if empty). The median of an even count
    /// is the mean of the middle two.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { median, min: v[0], max: v[n - 1] })
    }

    /// "median (min–max)" with `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        format!("{:.d$} ({:.d$}–{:.d$})", self.median, self.min, self.max, d = digits)
    }
}

/// One measurement of an interleaved plan: run once per round, given the
/// round's number; `Err` is a failed result check (reported, not counted).
pub type Step<'a> = Box<dyn FnMut(u64) -> Result<f64, String> + 'a>;

/// Run every step once per round, `rounds` times: forward in even rounds
/// and backward in odd ones (ABBA), so slow drift of the host hits every
/// step alike and no step always follows the same neighbour. Returns
/// `results[step][round]`. `progress(step, round)` runs before each step.
pub fn rounds(
    steps: &mut [Step<'_>],
    rounds: usize,
    mut progress: impl FnMut(usize, usize),
) -> Vec<Vec<Result<f64, String>>> {
    let mut results: Vec<Vec<Result<f64, String>>> = (0..steps.len()).map(|_| Vec::new()).collect();
    for r in 0..rounds {
        let order: Vec<usize> =
            if r % 2 == 0 { (0..steps.len()).collect() } else { (0..steps.len()).rev().collect() };
        for i in order {
            progress(i, r);
            let v = steps[i](r as u64);
            results[i].push(v);
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn spread_is_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn rounds_alternate_direction_and_keep_every_round() {
        let log = RefCell::new(Vec::new());
        let mut steps: Vec<Step<'_>> = (0..3)
            .map(|i| {
                let log = &log;
                Box::new(move |r: u64| {
                    log.borrow_mut().push(i);
                    Ok((10 * i) as f64 + r as f64)
                }) as Step<'_>
            })
            .collect();
        let out = rounds(&mut steps, 3, |_, _| {});
        assert_eq!(*log.borrow(), vec![0, 1, 2, 2, 1, 0, 0, 1, 2]);
        assert_eq!(out[2].iter().map(|v| *v.as_ref().unwrap()).collect::<Vec<_>>(), vec![20.0, 21.0, 22.0]);
    }

    #[test]
    fn each_thread_gets_its_own_continuing_stream() {
        // Two threads over a small key space: the union of what they draw
        // covers far more keys than either would if both drew the same
        // sequence, and each thread's own draws do not repeat early.
        let seen = std::sync::Mutex::new(Vec::new());
        timed(
            2,
            Duration::from_millis(20),
            1 << 20,
            5,
            |_| Vec::new(),
            |w| {
                if w.state.len() < 1000 {
                    let i = w.keys.next_index();
                    w.state.push(i);
                    if w.state.len() == 1000 {
                        seen.lock().unwrap().push(w.state.clone());
                    }
                }
                1
            },
        );
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 2);
        let a: std::collections::HashSet<_> = seen[0].iter().collect();
        let b: std::collections::HashSet<_> = seen[1].iter().collect();
        assert_eq!(a.len(), 1000);
        assert!(a.intersection(&b).count() < 10, "the threads drew the same keys");
    }
}
