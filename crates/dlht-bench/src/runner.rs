//! The timed loop every multi-thread measurement uses.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Run `work` on `threads` threads until `dur` has passed and return million
/// operations per second. Each thread builds its own state with
/// `init(thread)` (a generator seed, scratch buffers) and calls
/// `work(&mut state)`, which returns the operations it did. One thread runs
/// inline on the caller's thread, so a single-thread system never leaves
/// the thread that built it; it reads the clock every 64 calls only.
pub fn timed<S>(
    threads: usize,
    dur: Duration,
    init: impl Fn(usize) -> S + Sync,
    work: impl Fn(&mut S) -> u64 + Sync,
) -> f64 {
    let start = Instant::now();
    if threads == 1 {
        let mut state = init(0);
        let mut ops = 0;
        while start.elapsed() < dur {
            for _ in 0..64 {
                ops += work(&mut state);
            }
        }
        return ops as f64 / start.elapsed().as_secs_f64() / 1e6;
    }
    // Relaxed throughout: `stop` only ends the loops (no data rides on it),
    // and the scope's join orders every `total` update before the final load.
    let stop = AtomicBool::new(false);
    let total = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, total, init, work) = (&stop, &total, &init, &work);
            s.spawn(move || {
                let mut state = init(t);
                let mut ops = 0;
                while !stop.load(Ordering::Relaxed) {
                    ops += work(&mut state);
                }
                total.fetch_add(ops, Ordering::Relaxed);
            });
        }
        std::thread::sleep(dur);
        stop.store(true, Ordering::Relaxed);
    });
    total.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64() / 1e6
}
