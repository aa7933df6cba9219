//! The paper's workloads (§4–5), generic over [`Table`]: every system runs
//! the same code on the same key stream (per-thread generators seeded from
//! `--seed`), and every result is checked (a Get that misses, an insert of a
//! fresh key that fails, aborts the run rather than being counted).

use crate::limit::splitmix;
use crate::runner;
use crate::systems::{Table, MAX_BATCH};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Workloads on a prepopulated table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum Workload {
    /// Uniform random gets of prepopulated keys; every get must hit.
    Get,
    /// Insert of a key not in the table, then remove of the same key.
    Insdel,
    /// 50% gets, 50% puts of prepopulated keys.
    Putheavy,
    /// Gets where `--hot-share` of accesses go to `--hot-keys` hot keys.
    Skew,
}

/// Parameters shared by all measurements of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    /// Prepopulated keys (a power of two).
    pub keys: u64,
    /// Requests per batch handed to the system (1 = one call at a time for
    /// systems without batching; batched dlht always batches).
    pub batch: usize,
    /// Time per measurement.
    pub seconds: f64,
    /// Seed of the key streams.
    pub seed: u64,
    /// Share of Skew accesses that go to the hot keys.
    pub hot_share: f64,
    /// Number of hot keys in Skew.
    pub hot_keys: u64,
}

/// The key of index `i` (values are the index): random-looking, distinct.
#[inline(always)]
pub fn key(i: u64) -> u64 {
    splitmix(i)
}

/// Per-thread buffers, allocated once per measurement. Zeroing arrays per
/// batch inside the timed loop costs more than it seems: the stores cannot
/// retire behind outstanding cache misses, fill the store buffer and stop
/// the core from issuing further lookups (a 128-entry buffer zeroed per 16
/// gets cut memory-resident gets 8-fold).
pub struct Scratch {
    keys: Vec<u64>,
    out: Vec<Option<u64>>,
    reqs: Vec<(bool, u64, u64)>,
}

impl Scratch {
    fn new() -> Self {
        Scratch { keys: vec![0; MAX_BATCH], out: vec![None; MAX_BATCH], reqs: vec![(false, 0, 0); MAX_BATCH] }
    }
}

/// Run `work(thread, rng, scratch)` on `threads` threads for `secs` (see
/// `runner::timed`), each thread with its own generator, seeded from `seed`
/// and its number so every system sees the same key streams, and its own
/// scratch buffers.
pub fn on_threads<T: Table>(
    threads: usize,
    secs: f64,
    seed: u64,
    work: impl Fn(usize, &mut u64, &mut Scratch) -> u64 + Sync,
) -> f64 {
    assert!(T::CONCURRENT || threads == 1, "{} is single-threaded", T::NAME);
    runner::timed(
        threads,
        Duration::from_secs_f64(secs),
        |t| (t, seed ^ 0x5EED ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15), Scratch::new()),
        |(t, rng, scratch)| work(*t, rng, scratch),
    )
}

/// Insert keys `0..n` (by index) using `threads` threads, in batches.
pub fn populate<T: Table>(t: &T, n: u64, threads: usize, batch: usize, progress: &indicatif::ProgressBar) {
    let threads = if T::CONCURRENT { threads } else { 1 };
    let fill = |first: u64, step: u64| {
        let mut buf = vec![0u64; MAX_BATCH];
        let mut i = first;
        while i < n {
            let mut b = 0;
            while b < batch && i < n {
                buf[b] = key(i);
                b += 1;
                i += step;
            }
            let done = t.insert_batch(&buf[..b]);
            assert_eq!(done, b, "{}: inserting distinct keys failed", T::NAME);
            progress.inc(b as u64);
        }
    };
    if threads == 1 {
        fill(0, 1);
    } else {
        std::thread::scope(|s| {
            for th in 0..threads {
                let fill = &fill;
                s.spawn(move || fill(th as u64, threads as u64));
            }
        });
    }
}

/// One workload on a table holding keys `0..p.keys`. Each workload is its
/// own closure, so the compiler can inline the system's operations into a
/// small loop: folding all of them into one closure kept `get` out of line,
/// doubled the instructions per lookup and, with them, the reorder-window
/// cost that stops a core from overlapping lookups' cache misses.
pub fn measure<T: Table>(t: &T, w: Workload, threads: usize, p: &Params) -> f64 {
    let mask = p.keys - 1;
    let b = p.batch.clamp(1, MAX_BATCH / 2);
    let fresh = AtomicU64::new(0);
    let (secs, seed) = (p.seconds, p.seed);
    match w {
        Workload::Get => on_threads::<T>(threads, secs, seed, |_, rng, s| {
            for k in s.keys[..b].iter_mut() {
                *rng = splitmix(*rng);
                *k = key(*rng & mask);
            }
            get_checked(t, &s.keys[..b], &mut s.out[..b]);
            b as u64
        }),
        Workload::Skew => on_threads::<T>(threads, secs, seed, |_, rng, s| {
            let hot_keys = p.hot_keys.clamp(1, p.keys);
            for k in s.keys[..b].iter_mut() {
                *rng = splitmix(*rng);
                let hot = (*rng >> 11) as f64 / (1u64 << 53) as f64 <= p.hot_share;
                *rng = splitmix(*rng);
                *k = key(if hot { *rng % hot_keys } else { *rng & mask });
            }
            get_checked(t, &s.keys[..b], &mut s.out[..b]);
            b as u64
        }),
        Workload::Insdel => on_threads::<T>(threads, secs, seed, |_, _, s| {
            // Fresh keys: indices above the table's, never reused (Relaxed:
            // the counter only hands out distinct numbers).
            let base = p.keys + fresh.fetch_add(b as u64, Ordering::Relaxed);
            for (j, k) in s.keys[..b].iter_mut().enumerate() {
                *k = key(base + j as u64);
            }
            let ok = t.insdel_batch(&s.keys[..b]);
            assert_eq!(ok, 2 * b, "{}: an insert of a fresh key or its remove failed", T::NAME);
            2 * b as u64
        }),
        Workload::Putheavy => on_threads::<T>(threads, secs, seed, |_, rng, s| {
            for r in s.reqs[..b].iter_mut() {
                *rng = splitmix(*rng);
                let i = *rng & mask;
                *r = (*rng >> 63 == 1, key(i), i);
            }
            let ok = t.mixed_batch(&s.reqs[..b]);
            assert_eq!(ok, b, "{}: a get or put of a present key failed", T::NAME);
            b as u64
        }),
    }
}

/// Gets of `keys`, each of which must hit.
#[inline(always)]
fn get_checked<T: Table>(t: &T, keys: &[u64], out: &mut [Option<u64>]) {
    t.get_batch(keys, out);
    assert!(out.iter().all(Option::is_some), "{}: a get of a present key missed", T::NAME);
}

/// Population: insert `n` fresh keys into a table sized for 1024 keys (so it
/// grows many times), on `threads` threads. Million inserts per second.
pub fn population<T: Table>(n: u64, threads: usize, batch: usize) -> f64 {
    let t = T::with_capacity(1024);
    let bar = indicatif::ProgressBar::hidden();
    let start = Instant::now();
    populate(&t, n, threads, batch, &bar);
    let mops = n as f64 / start.elapsed().as_secs_f64() / 1e6;
    assert_eq!(t.get(key(n - 1)), Some(key(n - 1)), "{}: population lost a key", T::NAME);
    mops
}

/// One sample of the resize time series.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Milliseconds since the start.
    pub ms: u64,
    /// Gets per second over the last interval (millions).
    pub get_mops: f64,
    /// Inserts per second over the last interval (millions).
    pub insert_mops: f64,
}

/// Resizing under load (paper Fig. 8): the table holds `prepop` keys and is
/// sized for them; `writers` threads insert `grow` more fresh keys (it grows
/// several times) while `readers` threads get prepopulated keys. Samples
/// both rates every `every`.
pub fn resize_series<T: Table>(
    prepop: u64,
    grow: u64,
    readers: usize,
    writers: usize,
    every: Duration,
) -> Vec<Sample> {
    let t = T::with_capacity(prepop as usize);
    populate(&t, prepop, readers + writers, 16, &indicatif::ProgressBar::hidden());
    // Relaxed counters below: rates sampled for a plot, and a flag that only
    // ends the readers' loops; the scope's join orders the rest.
    let gets = AtomicU64::new(0);
    let inserts = AtomicU64::new(0);
    let writers_left = AtomicU64::new(writers as u64);
    assert!(prepop.is_power_of_two());
    let mask = prepop - 1;
    let mut samples = Vec::new();
    std::thread::scope(|s| {
        for r in 0..readers {
            let (t, gets, writers_left) = (&t, &gets, &writers_left);
            s.spawn(move || {
                let mut rng = 0xF1 + r as u64;
                while writers_left.load(Ordering::Relaxed) > 0 {
                    for _ in 0..64 {
                        rng = splitmix(rng);
                        let i = rng & mask;
                        assert_eq!(t.get(key(i)), Some(key(i)), "{}: a get missed during a resize", T::NAME);
                    }
                    gets.fetch_add(64, Ordering::Relaxed);
                }
            });
        }
        for w in 0..writers {
            let (t, inserts, writers_left) = (&t, &inserts, &writers_left);
            s.spawn(move || {
                let mut i = prepop + w as u64;
                let mut unflushed = 0;
                while i < prepop + grow {
                    assert!(t.insert(key(i), i), "{}: a fresh insert failed", T::NAME);
                    i += writers as u64;
                    unflushed += 1;
                    if unflushed == 64 {
                        inserts.fetch_add(64, Ordering::Relaxed);
                        unflushed = 0;
                    }
                }
                writers_left.fetch_sub(1, Ordering::Relaxed);
            });
        }
        let start = Instant::now();
        let (mut last_g, mut last_i, mut last_t) = (0, 0, start);
        while writers_left.load(Ordering::Relaxed) > 0 {
            std::thread::sleep(every);
            let now = Instant::now();
            let (g, i) = (gets.load(Ordering::Relaxed), inserts.load(Ordering::Relaxed));
            let dt = (now - last_t).as_secs_f64() * 1e6;
            samples.push(Sample {
                ms: (now - start).as_millis() as u64,
                get_mops: (g - last_g) as f64 / dt,
                insert_mops: (i - last_i) as f64 / dt,
            });
            (last_g, last_i, last_t) = (g, i, now);
        }
    });
    samples
}
