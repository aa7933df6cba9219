//! The paper's workloads (§4–5), generic over [`Table`]: every system runs
//! the same code on the same key streams (the harness's per-thread
//! [`KeyStream`](crate::harness::keys::KeyStream)s, seeded from `--seed` and the
//! round), and every result is checked (a Get that misses, an insert of a
//! fresh key that fails, aborts the measurement rather than being counted).

use crate::compare::params::{histogram, Latency, Params, Sample};
use crate::compare::table::{Sharing, Table, MAX_BATCH};
use crate::harness::keys::ZipfTrace;
use crate::harness::limit::splitmix;
use crate::harness::Worker;
use crate::progress::Progress;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
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
    /// Gets of Zipf-distributed keys (YCSB's θ = 0.99, `--zipf-theta`).
    Zipf,
    /// Gets of keys not in the table; every get must miss.
    Getmiss,
    /// Puts (update if present) of prepopulated keys; every put must hit.
    Put,
}

impl Workload {
    /// Its name in reports and on the command line.
    pub fn name(self) -> String {
        format!("{self:?}").to_lowercase()
    }
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

/// Insert keys `0..n` (by index) using `threads` threads, in batches.
pub fn populate<T: Table>(t: &T, n: u64, threads: usize, batch: usize, progress: &Progress) {
    let threads = if T::CONCURRENT { threads } else { 1 };
    let fill = |t: &T, first: u64, step: u64| {
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
    T::Sharing::on_threads(t, threads, |t, th| fill(t, th as u64, threads as u64));
}

/// Where a measurement draws its keys and fresh keys from.
pub struct Draw<'a> {
    /// The table holds keys `0..keys` (by index; a power of two).
    pub keys: u64,
    /// The round (fresh keys and stream seeds differ per round).
    pub round: u64,
    /// The shared Zipf trace (indexes over the memory-resident key count;
    /// a smaller table folds them onto its own keys).
    pub zipf: &'a ZipfTrace,
}

/// One workload on a table holding keys `0..d.keys`: millions of requests
/// per second over `threads` threads. Each workload is its own closure, so
/// the compiler can inline the system's operations into a small loop:
/// folding all of them into one closure kept `get` out of line, doubled
/// the instructions per lookup and, with them, the reorder-window cost
/// that stops a core from overlapping lookups' cache misses.
pub fn measure<T: Table>(t: &T, w: Workload, threads: usize, p: &Params, d: &Draw<'_>) -> f64 {
    assert!(T::CONCURRENT || threads == 1, "{} is single-threaded", T::NAME);
    assert!(d.keys.is_power_of_two());
    let mask = d.keys - 1;
    let b = p.batch.clamp(1, MAX_BATCH / 2);
    // Fresh keys: indexes above every prepopulated one, never reused within
    // the run. Thread `th` counts up from `fresh + th << 36` (a thread draws
    // far fewer than 2^36 keys in a measurement): a counter shared between
    // threads would add a contended locked instruction to every pair.
    let fresh = p.keys.max(d.keys) + (d.round << 44);
    let dur = Duration::from_secs_f64(p.seconds);
    let seed = p.seed ^ d.round.wrapping_mul(0xA076_1D64_78BD_642F);
    match w {
        Workload::Get => with_scratch(t, threads, dur, d.keys, seed, |t, w| {
            for k in w.state.keys[..b].iter_mut() {
                *k = key(w.keys.next_index());
            }
            get_checked(t, &w.state.keys[..b], &mut w.state.out[..b]);
            b as u64
        }),
        Workload::Skew => with_scratch(t, threads, dur, d.keys, seed, |t, w| {
            let hot_keys = p.hot_keys.clamp(1, d.keys);
            for k in w.state.keys[..b].iter_mut() {
                let hot = (w.keys.next_word() >> 11) as f64 / (1u64 << 53) as f64 <= p.hot_share;
                let i = w.keys.next_index();
                *k = key(if hot { i % hot_keys } else { i });
            }
            get_checked(t, &w.state.keys[..b], &mut w.state.out[..b]);
            b as u64
        }),
        Workload::Zipf => T::Sharing::timed(
            t,
            threads,
            dur,
            d.keys,
            seed,
            |th| (Scratch::new(), d.zipf.cursor(th, threads)),
            |t, w| {
                let (s, zipf) = &mut w.state;
                for k in s.keys[..b].iter_mut() {
                    *k = key(zipf.next_index() & mask);
                }
                get_checked(t, &s.keys[..b], &mut s.out[..b]);
                b as u64
            },
        ),
        Workload::Getmiss => with_scratch(t, threads, dur, d.keys, seed, |t, w| {
            // Indexes above the table's: splitmix is a bijection, so these
            // keys are not in it.
            for k in w.state.keys[..b].iter_mut() {
                *k = key(d.keys + w.keys.next_index());
            }
            t.get_batch(&w.state.keys[..b], &mut w.state.out[..b]);
            assert!(w.state.out[..b].iter().all(Option::is_none), "{}: a get of an absent key hit", T::NAME);
            b as u64
        }),
        Workload::Put => with_scratch(t, threads, dur, d.keys, seed, |t, w| {
            for r in w.state.reqs[..b].iter_mut() {
                let i = w.keys.next_index();
                *r = (true, key(i), i);
            }
            let ok = t.mixed_batch(&w.state.reqs[..b]);
            assert_eq!(ok, b, "{}: a put of a present key failed", T::NAME);
            b as u64
        }),
        Workload::Insdel => T::Sharing::timed(
            t,
            threads,
            dur,
            d.keys,
            seed,
            |th| (Scratch::new(), fresh + ((th as u64) << 36)),
            |t, w| {
                let (s, next) = &mut w.state;
                for (j, k) in s.keys[..b].iter_mut().enumerate() {
                    *k = key(*next + j as u64);
                }
                *next += b as u64;
                let ok = t.insdel_batch(&s.keys[..b]);
                assert_eq!(ok, 2 * b, "{}: an insert of a fresh key or its remove failed", T::NAME);
                2 * b as u64
            },
        ),
        Workload::Putheavy => with_scratch(t, threads, dur, d.keys, seed, |t, w| {
            for r in w.state.reqs[..b].iter_mut() {
                let i = w.keys.next_index();
                *r = (w.keys.next_word() >> 63 == 1, key(i), i);
            }
            let ok = t.mixed_batch(&w.state.reqs[..b]);
            assert_eq!(ok, b, "{}: a get or put of a present key failed", T::NAME);
            b as u64
        }),
    }
}

/// A timed measurement ([`Sharing::timed`]) with a [`Scratch`] per thread.
#[inline(always)]
fn with_scratch<T: Table>(
    t: &T,
    threads: usize,
    dur: Duration,
    keys: u64,
    seed: u64,
    work: impl Fn(&T, &mut Worker<Scratch>) -> u64 + Sync,
) -> f64 {
    T::Sharing::timed(t, threads, dur, keys, seed, |_| Scratch::new(), work)
}

/// Gets of `keys`, each of which must hit.
#[inline(always)]
fn get_checked<T: Table>(t: &T, keys: &[u64], out: &mut [Option<u64>]) {
    t.get_batch(keys, out);
    assert!(out.iter().all(Option::is_some), "{}: a get of a present key missed", T::NAME);
}

/// The paper's InsDel (§4.2): a table sized for `n` keys (a power of two)
/// and empty; each thread inserts a fresh key, then removes it, so at most
/// one key per thread is ever live. Million operations per second (an
/// insert and a remove count as two). Designs that delete by tombstone fill
/// such a table and must rebuild it; dlht frees each slot at once. An
/// untimed warm-up of the same loop first faults the table's pages in.
pub fn insdel_empty<T: Table>(n: u64, threads: usize, p: &Params, round: u64, zipf: &ZipfTrace) -> f64 {
    let t = T::with_capacity(n as usize);
    let warm = Params { seconds: p.seconds.min(0.25), ..p.clone() };
    // Rounds are below 128: the warm-up's fresh keys never meet a timed loop's.
    measure(&t, Workload::Insdel, threads, &warm, &Draw { keys: n, round: round | 128, zipf });
    measure(&t, Workload::Insdel, threads, p, &Draw { keys: n, round, zipf })
}

/// Population: insert `n` fresh keys into a table sized for 1024 keys (so it
/// grows many times), on `threads` threads. Million inserts per second.
pub fn population<T: Table>(n: u64, threads: usize, batch: usize) -> f64 {
    let t = T::with_capacity(1024);
    let bar = Progress::hidden();
    let start = Instant::now();
    populate(&t, n, threads, batch, &bar);
    let mops = n as f64 / start.elapsed().as_secs_f64() / 1e6;
    assert_eq!(t.get(key(n - 1)), Some(key(n - 1)), "{}: population lost a key", T::NAME);
    mops
}

/// Time one call, in nanoseconds, into `h`.
#[inline(always)]
fn timed_op<R>(h: &mut Histogram<u64>, op: impl FnOnce() -> R) -> R {
    let start = Instant::now();
    let r = op();
    // Saturating: an op slower than the histogram's hour is recorded as one.
    h.saturating_record(start.elapsed().as_nanos() as u64);
    r
}

/// Steady-state latency on one thread, on a table holding keys `0..keys`:
/// gets of present keys, and inserts of fresh keys (each removed again,
/// untimed, so the table keeps its size), `dur` each.
pub fn latency<T: Table>(t: &T, keys: u64, dur: Duration, seed: u64) -> Vec<Latency> {
    let mut ks = crate::harness::keys::KeyStream::new(keys, seed);
    let (mut gets, mut inserts) = (histogram(), histogram());
    let start = Instant::now();
    while start.elapsed() < dur {
        for _ in 0..64 {
            let i = ks.next_index();
            // Values are the key, or its index after a put: hits are checked.
            let v = timed_op(&mut gets, || t.get(key(i)));
            assert!(v.is_some(), "{}: a get of a present key missed", T::NAME);
        }
    }
    let mut fresh = keys + (1 << 50) + (seed << 32);
    let start = Instant::now();
    while start.elapsed() < dur {
        for _ in 0..64 {
            let k = key(fresh);
            fresh += 1;
            assert!(timed_op(&mut inserts, || t.insert(k, k)), "{}: a fresh insert failed", T::NAME);
            assert!(t.remove(k), "{}: a remove of a present key failed", T::NAME);
        }
    }
    vec![Latency::of("get", "steady", &gets), Latency::of("insert", "steady", &inserts)]
}

/// Decrements a count when dropped.
struct CountOut<'a>(&'a AtomicU64);

impl Drop for CountOut<'_> {
    fn drop(&mut self) {
        // Relaxed: see resize_series.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the resize time series gives.
pub struct Resizing {
    pub samples: Vec<Sample>,
    pub latency: Vec<Latency>,
}

/// Resizing under load (paper Fig. 8): the table holds `prepop` keys and is
/// sized for them; `writers` threads insert `grow` more fresh keys (it grows
/// several times) while `readers` threads get prepopulated keys. Samples
/// both rates every `every`, and times every get and insert.
pub fn resize_series<T: Table>(
    prepop: u64,
    grow: u64,
    readers: usize,
    writers: usize,
    every: Duration,
) -> Resizing {
    let t = T::with_capacity(prepop as usize);
    populate(&t, prepop, readers + writers, 16, &Progress::hidden());
    // Relaxed counters below: rates sampled for a plot, and a flag that only
    // ends the readers' loops; the scope's join orders the rest.
    let gets = AtomicU64::new(0);
    let inserts = AtomicU64::new(0);
    let writers_left = AtomicU64::new(writers as u64);
    assert!(prepop.is_power_of_two());
    let samples = Mutex::new(Vec::new());
    let (get_lat, insert_lat) = (Mutex::new(histogram()), Mutex::new(histogram()));
    let add = |into: &Mutex<Histogram<u64>>, h: &Histogram<u64>| {
        into.lock().unwrap().add(h).expect("histograms of equal bounds");
    };
    // Threads 0..readers read, the next `writers` write, the last samples.
    T::Sharing::on_threads(&t, readers + writers + 1, |t, th| {
        if th < readers {
            let mut ks = crate::harness::keys::KeyStream::new(prepop, 0xF1 + th as u64);
            let mut h = histogram();
            while writers_left.load(Ordering::Relaxed) > 0 {
                for _ in 0..64 {
                    let i = ks.next_index();
                    let v = timed_op(&mut h, || t.get(key(i)));
                    assert_eq!(v, Some(key(i)), "{}: a get missed during a resize", T::NAME);
                }
                gets.fetch_add(64, Ordering::Relaxed);
            }
            add(&get_lat, &h);
        } else if th < readers + writers {
            // Counts this writer out even if a failed check unwinds it, so
            // the readers and the sampler stop.
            let leaving = CountOut(&writers_left);
            let mut h = histogram();
            let mut i = prepop + (th - readers) as u64;
            let mut unflushed = 0;
            while i < prepop + grow {
                let k = key(i);
                assert!(timed_op(&mut h, || t.insert(k, i)), "{}: a fresh insert failed", T::NAME);
                i += writers as u64;
                unflushed += 1;
                if unflushed == 64 {
                    inserts.fetch_add(64, Ordering::Relaxed);
                    unflushed = 0;
                }
            }
            drop(leaving);
            add(&insert_lat, &h);
        } else {
            let start = Instant::now();
            let (mut last_g, mut last_i, mut last_t) = (0, 0, start);
            while writers_left.load(Ordering::Relaxed) > 0 {
                std::thread::sleep(every);
                let now = Instant::now();
                let (g, i) = (gets.load(Ordering::Relaxed), inserts.load(Ordering::Relaxed));
                let dt = (now - last_t).as_secs_f64() * 1e6;
                samples.lock().unwrap().push(Sample {
                    ms: (now - start).as_millis() as u64,
                    get_mops: (g - last_g) as f64 / dt,
                    insert_mops: (i - last_i) as f64 / dt,
                });
                (last_g, last_i, last_t) = (g, i, now);
            }
        }
    });
    let samples = samples.into_inner().unwrap();
    let (get_lat, insert_lat) = (get_lat.into_inner().unwrap(), insert_lat.into_inner().unwrap());
    Resizing {
        samples,
        latency: vec![
            Latency::of("get", "resizing", &get_lat),
            Latency::of("insert", "resizing", &insert_lat),
        ],
    }
}
