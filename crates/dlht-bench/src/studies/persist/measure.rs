//! The timed operations on either map: batched gets, insert+remove pairs,
//! fills, the check of every key, and population, each with the page
//! faults and CPU time it took.

use super::footprint::faults;
use super::maps::{checked, Kind, Sys};
use crate::compare::params::Params;
use crate::compare::workloads::{self, key, Draw, Workload};
use crate::harness::keys::ZipfTrace;
use crate::harness::{self};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One measurement: throughput and the page faults it took.
#[derive(Clone, Copy, Debug, Serialize)]
pub(super) struct Sample {
    /// Millions of operations per second (pairs for insdel, inserts for
    /// population, gets for get).
    pub(super) mops: f64,
    /// Minor page faults per thousand operations.
    pub(super) minflt_per_kop: f64,
    /// Millions of operations per second of this process's CPU time (user
    /// and system, every thread): what the work cost, whatever else ran on
    /// the machine meanwhile (the kernel's writeback threads are not in it).
    pub(super) cpu_mops: f64,
}

/// CPU seconds this process has used so far (user + system, all threads:
/// /proc/self/stat's utime and stime, in the kernel's 100 Hz ticks — 10 ms
/// steps, fine for measurements of seconds).
pub(super) fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // After the command's closing parenthesis: utime is the 14th field of
    // the line, stime the 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|w| w.parse().unwrap_or(0)).collect();
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

/// Run `f` (which returns Mops/s), noting the page faults and CPU time it
/// takes; `ops(mops)` gives the operations it did.
pub(super) fn with_faults(ops: impl FnOnce(f64) -> f64, f: impl FnOnce() -> f64) -> Sample {
    let (before, _) = faults();
    let cpu = cpu_secs();
    let mops = f();
    let cpu = (cpu_secs() - cpu).max(1e-9);
    let (after, _) = faults();
    let n = ops(mops).max(1.0);
    Sample { mops, minflt_per_kop: (after - before) as f64 * 1e3 / n, cpu_mops: n / cpu / 1e6 }
}

/// Batched gets of present keys on `threads` threads for `dur`: Mops/s.
/// Every value is checked (a value is its key); a miss or a wrong value
/// fails the measurement.
pub(super) fn gets<S: Kind>(
    m: &dlht::Map<u64, u64, S>,
    threads: usize,
    dur: Duration,
    keys: u64,
    batch: usize,
    seed: u64,
) -> Result<Sample, String> {
    let wrong = AtomicU64::new(0);
    let s = with_faults(
        |mops| mops * 1e6 * dur.as_secs_f64(),
        || {
            harness::timed(
                threads,
                dur,
                keys,
                seed,
                |_| (vec![0u64; batch], vec![None; batch]),
                |w| {
                    let (ks, out) = &mut w.state;
                    for k in ks.iter_mut() {
                        *k = key(w.keys.next_index());
                    }
                    m.get_many(ks, out).expect("buffers of equal length");
                    let bad = ks.iter().zip(out.iter()).filter(|(k, o)| **o != Some(**k)).count();
                    if bad > 0 {
                        // Relaxed: a count read after the threads are joined.
                        wrong.fetch_add(bad as u64, Ordering::Relaxed);
                    }
                    batch as u64
                },
            )
        },
    );
    match wrong.load(Ordering::Relaxed) {
        0 => Ok(s),
        n => Err(format!("{}: {n} gets of present keys missed or returned a wrong value", S::BATCHED)),
    }
}

/// Insert of a fresh key then its remove, on `threads` threads for the
/// plan's seconds, one call each or batched: M pairs/s. The workload is
/// the comparison's InsDel (fresh keys per thread and round, every insert
/// and remove checked).
pub(super) fn insdel<S: Kind, const B: bool>(
    t: &Sys<S, B>,
    threads: usize,
    p: &Params,
    round: u64,
) -> Result<Sample, String> {
    let zipf = ZipfTrace::new(1, 0.99, 1, 0)?; // unused by InsDel
    let dur = p.seconds;
    let s = checked(|| {
        with_faults(
            |mops| mops * 1e6 * dur,
            || {
                workloads::measure(
                    t,
                    Workload::Insdel,
                    threads,
                    p,
                    &Draw { keys: p.keys, round, zipf: &zipf },
                )
            },
        )
    })?;
    // The workload counts an insert and a remove as two operations.
    Ok(Sample { mops: s.mops / 2.0, minflt_per_kop: s.minflt_per_kop * 2.0, cpu_mops: s.cpu_mops / 2.0 })
}

/// Insert keys `0..n` (by index; value = key) into `t` on `threads`
/// threads, batched as the table batches; M keys/s.
pub(super) fn fill<S: Kind, const B: bool>(
    t: &Sys<S, B>,
    n: u64,
    threads: usize,
    batch: usize,
) -> Result<Sample, String> {
    checked(|| {
        with_faults(
            |_| n as f64,
            || {
                let start = Instant::now();
                workloads::populate(t, n, threads, batch, &crate::progress::Progress::hidden());
                n as f64 / start.elapsed().as_secs_f64() / 1e6
            },
        )
    })
}

/// Keys of `0..n` (by index) missing from `m` or with a wrong value
/// (`value(i)` expected), checked with `get_many` on `threads` threads.
pub(super) fn verify<S: Kind>(
    m: &dlht::Map<u64, u64, S>,
    n: u64,
    threads: usize,
    value: fn(u64) -> u64,
) -> u64 {
    let bad = AtomicU64::new(0);
    std::thread::scope(|s| {
        for th in 0..threads as u64 {
            let bad = &bad;
            s.spawn(move || {
                let (mut ks, mut out) = (Vec::with_capacity(64), vec![None; 64]);
                let per = n.div_ceil(threads as u64);
                let (lo, hi) = (th * per, ((th + 1) * per).min(n));
                let mut i = lo;
                while i < hi {
                    ks.clear();
                    let first = i;
                    while ks.len() < 64 && i < hi {
                        ks.push(key(i));
                        i += 1;
                    }
                    m.get_many(&ks, &mut out[..ks.len()]).expect("buffers of equal length");
                    let wrong =
                        (0..ks.len()).filter(|&j| out[j] != Some(value(first + j as u64))).count() as u64;
                    // Relaxed: read after the scope's join.
                    bad.fetch_add(wrong, Ordering::Relaxed);
                }
            });
        }
    });
    bad.into_inner()
}

/// Population: insert `n` fresh keys into `m` (made small, so it grows) on
/// `threads` threads in batches, then check every key and the length.
pub(super) fn population<S: Kind>(
    m: dlht::Map<u64, u64, S>,
    n: u64,
    threads: usize,
    batch: usize,
) -> Result<Sample, String> {
    let t = Sys::<S, true>(Arc::new(m));
    let s = fill(&t, n, threads, batch)?;
    let bad = verify(&t.0, n, threads, key);
    if bad > 0 || t.0.len() != n as usize {
        return Err(format!("{}: population lost {bad} keys (len {} of {n})", S::BATCHED, t.0.len()));
    }
    Ok(s)
}

/// An optional figure with `digits` decimals, "-" where there is none.
pub(super) fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::studies::persist::maps::{open_file, remove_dir, Mem};

    #[test]
    fn both_maps_pass_the_workloads() {
        let dir = std::env::temp_dir().join(format!("dlht-bench-persist-test-{}", std::process::id()));
        remove_dir(&dir);
        let n = 1 << 12;
        let mem = Sys::<_, true>(Arc::new(Mem::with_capacity(n as usize)));
        let file = Sys::<_, true>(Arc::new(open_file(&dir, n as usize).unwrap()));
        fill(&mem, n, 2, 16).unwrap();
        fill(&file, n, 2, 16).unwrap();
        let d = Duration::from_millis(20);
        assert!(gets(&mem.0, 2, d, n, 16, 1).unwrap().mops > 0.0);
        assert!(gets(&file.0, 2, d, n, 16, 1).unwrap().mops > 0.0);
        let p = Params {
            keys: n,
            batch: 16,
            seconds: 0.02,
            seed: 1,
            hot_share: 0.0,
            hot_keys: 1,
            zipf_theta: 0.99,
            rounds: 1,
            peer_hasher: false,
        };
        assert!(insdel(&Sys::<_, false>(file.0.clone()), 2, &p, 0).unwrap().mops > 0.0);
        assert!(insdel(&file, 2, &p, 1).unwrap().mops > 0.0);
        assert_eq!(verify(&file.0, n, 2, key), 0);
        assert_eq!(file.0.len(), n as usize);
        // A missing key is seen.
        file.0.remove(&key(7));
        assert_eq!(verify(&file.0, n, 2, key), 1);
        assert!(gets(&file.0, 1, d, n, 16, 1).is_err());
        drop(file);
        remove_dir(&dir);
    }
}
