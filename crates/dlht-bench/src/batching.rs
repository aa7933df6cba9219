//! Batching (paper §3.3, §5.2.3) and the single-thread mode (§3.4.5, §5.3.1):
//! gets and insert+remove pairs in batches of 1..64 against the unbatched
//! calls, at 1 and 2 threads, on a memory-resident table, next to the
//! prefetched random-read limit measured at the same thread counts.

use crate::keys::KeyStream;
use crate::limit::{self, splitmix};
use crate::runner;
use dlht::{LocalMap, Map, Request, Response, StopOn};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Batch sizes swept (requests per batch).
pub const BATCH_SIZES: [usize; 8] = [1, 2, 4, 8, 16, 24, 32, 64];

/// Millions of operations per second summed over `threads` threads, each
/// running `work(thread, keys)` (which returns operations done) with its own
/// continuing [`KeyStream`] over `n` keys: the median of three runs of a
/// third of `dur` each.
pub fn on_threads(
    threads: usize,
    dur: Duration,
    n: u64,
    work: impl Fn(usize, &mut KeyStream) -> u64 + Sync,
) -> f64 {
    limit::median3(|| {
        runner::timed(
            threads,
            dur / 3,
            |t| (t, KeyStream::new(n, 0xB47C + t as u64)),
            |(t, keys)| work(*t, keys),
        )
    })
}

/// One row of the sweep.
pub struct Row {
    pub batch: Option<usize>,
    pub get: f64,
    pub insdel: f64,
}

/// Gets and insert+remove pairs, unbatched and per batch size.
pub fn sweep(map: &Map<u64, u64>, keys: u64, threads: usize, dur: Duration) -> Vec<Row> {
    // A power of two: the key streams then scramble a counter instead of
    // dividing (a 64-bit division per get would dominate the loop).
    assert!(keys.is_power_of_two());
    let fresh = AtomicU64::new(keys);
    let mut rows = Vec::new();
    let get_unbatched = on_threads(threads, dur, keys, |_, ks| {
        let mut hits = 0u64;
        for _ in 0..256 {
            let i = ks.next_index();
            hits += (map.get(&splitmix(i)) == Some(i)) as u64;
        }
        assert_eq!(hits, 256, "every get must hit");
        256
    });
    let insdel_unbatched = on_threads(threads, dur, keys, |_, _| {
        // Relaxed: the counter only hands out distinct fresh keys.
        let base = fresh.fetch_add(128, Ordering::Relaxed);
        for j in base..base + 128 {
            let k = splitmix(j);
            map.insert(k, j).expect("fresh key");
            map.remove(&k).expect("just inserted");
        }
        256
    });
    rows.push(Row { batch: None, get: get_unbatched, insdel: insdel_unbatched });
    for b in BATCH_SIZES {
        let get = on_threads(threads, dur, keys, |_, stream| {
            let mut ks = [0u64; 64];
            let mut out = [None; 64];
            for _ in 0..(256 / b).max(1) {
                for k in ks[..b].iter_mut() {
                    *k = splitmix(stream.next_index());
                }
                map.get_many(&ks[..b], &mut out[..b]).unwrap();
                assert!(out[..b].iter().all(|o| o.is_some()), "every get must hit");
            }
            ((256 / b).max(1) * b) as u64
        });
        let insdel = on_threads(threads, dur, keys, |_, _| {
            let mut reqs = [Request::Get(0); 64];
            let mut out = [Response::NotExecuted; 64];
            let pairs = (b / 2).max(1);
            let n = pairs * 2;
            let mut done = 0;
            while done < 256 {
                // Relaxed: distinct fresh keys only.
                let base = fresh.fetch_add(pairs as u64, Ordering::Relaxed);
                for p in 0..pairs {
                    let k = splitmix(base + p as u64);
                    reqs[2 * p] = Request::Insert(k, base);
                    reqs[2 * p + 1] = Request::Remove(k);
                }
                let ran = map.batch(&reqs[..n], &mut out[..n], StopOn::Failure).unwrap();
                assert_eq!(ran, n, "fresh inserts and their removes all succeed");
                done += n;
            }
            done as u64
        });
        rows.push(Row { batch: Some(b), get, insdel: insdel / 2.0 });
    }
    // insdel is reported in pairs per second.
    rows[0].insdel /= 2.0;
    rows
}

/// Runs one batch on some map.
type BatchFn<'a> = dyn FnMut(&[Request<u64, u64>], &mut [Response<u64>]) + 'a;

/// Insert+remove pairs per second on one thread: concurrent map vs the
/// single-thread map, unbatched and in batches of 16 requests.
pub struct SingleThreadMode {
    pub map: f64,
    pub local: f64,
    pub map_batched: f64,
    pub local_batched: f64,
}

/// Compare `Map` and `LocalMap` on tables of `keys` keys (`map` holds them).
pub fn single_thread_mode(map: &Map<u64, u64>, keys: u64, dur: Duration) -> SingleThreadMode {
    let local = LocalMap::<u64, u64>::with_capacity(keys as usize);
    for i in 0..keys {
        local.insert(splitmix(i), i).unwrap();
    }
    let mut fresh = keys << 1;
    let mut pairs = |insdel: &mut dyn FnMut(u64)| {
        limit::run(dur, || {
            for _ in 0..128 {
                fresh += 1;
                insdel(fresh);
            }
            128
        })
    };
    let m = pairs(&mut |j| {
        let k = splitmix(j);
        map.insert(k, j).unwrap();
        map.remove(&k).unwrap();
    });
    let l = pairs(&mut |j| {
        let k = splitmix(j);
        local.insert(k, j).unwrap();
        local.remove(&k).unwrap();
    });
    let batched = |run: &mut BatchFn<'_>| {
        let mut fresh = keys << 2;
        limit::run(dur, || {
            let mut reqs = [Request::Get(0); 16];
            let mut out = [Response::NotExecuted; 16];
            for p in 0..8 {
                fresh += 1;
                let k = splitmix(fresh);
                reqs[2 * p] = Request::Insert(k, fresh);
                reqs[2 * p + 1] = Request::Remove(k);
            }
            run(&reqs, &mut out);
            black_box(&out);
            8
        })
    };
    let mb = batched(&mut |r, o| {
        map.batch(r, o, StopOn::Never).unwrap();
    });
    let lb = batched(&mut |r, o| {
        local.batch(r, o, StopOn::Never).unwrap();
    });
    SingleThreadMode { map: m, local: l, map_batched: mb, local_batched: lb }
}
