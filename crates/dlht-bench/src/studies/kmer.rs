//! k-mer counting (DRAMHiT, EuroSys '23, §5: its skewed-write workload):
//! count every k-mer (k = 32, two bits a base, packed in a `u64`) of a DNA
//! sequence, each thread one contiguous share of the sequence's k-mer
//! positions. The sequence is generated genome-like — random bases with a
//! fraction of it copies of a small pool of repeat elements, each copy
//! slightly mutated — so that the k-mers of the repeats occur thousands of
//! times while most occur once (the skew that makes every thread hammer the
//! same lines); or read from a FASTA file (`--fasta`; bases other than
//! ACGT break k-mers).
//!
//! - `dlht`: [`Map::fetch_add`](dlht::Map::fetch_add), one k-mer at a time;
//! - `dlht-batch`: [`Map::batch`](dlht::Map::batch) of `Merge` requests
//!   (add 1, or insert 1), 32 k-mers a batch, prefetched;
//! - `dashmap`: `entry(k).or_insert(0) += 1` under the shard's lock.
//!
//! Each round counts into a fresh table (grown from 2^16 keys: the number
//! of distinct k-mers is not known in advance). Check (always on): every
//! system's counts equal a single-threaded `HashMap`'s, k-mer by k-mer.
//!
//! Not here yet: the partitioned delegation mode (DRAMHiT-P: each
//! partition's updates sent to its owner thread), against which this study
//! is the shared-table baseline.

use crate::harness::limit::splitmix;
use crate::harness::Spread;
use crate::progress::Progress;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// The systems, in the order they run.
pub const SYSTEMS: [&str; 3] = ["dlht", "dlht-batch", "dashmap"];

/// k, the k-mer length: 32 bases fill a `u64`.
const K: usize = 32;

/// Options of the k-mer study.
#[derive(clap::Args, Clone, Debug)]
pub struct KmerArgs {
    #[command(flatten)]
    pub run: super::RunArgs,
    /// Bases of the generated sequence.
    #[arg(long, default_value_t = 1 << 24, value_parser = clap::value_parser!(u64).range(64..=1 << 32))]
    pub bases: u64,
    /// Share of the generated sequence made of repeat copies (0 to 1).
    #[arg(long, default_value_t = 0.3)]
    pub repeats: f64,
    /// Count the k-mers of this FASTA file instead.
    #[arg(long)]
    pub fasta: Option<PathBuf>,
    /// Systems, comma-separated (dlht, dlht-batch, dashmap).
    #[arg(long, value_delimiter = ',', default_value = "dlht,dlht-batch,dashmap")]
    pub systems: Vec<String>,
}

/// A genome-like sequence of `n` bases (0–3 each): random, with `repeats`
/// of it copies of 64 repeat elements of 300 bases, each copy with 1% of
/// its bases changed.
fn genome(n: usize, repeats: f64, seed: u64) -> Vec<u8> {
    let mut r = seed;
    let mut next = move || {
        r = splitmix(r);
        r
    };
    let pool: Vec<Vec<u8>> = (0..64).map(|_| (0..300).map(|_| (next() & 3) as u8).collect()).collect();
    let mut s = Vec::with_capacity(n);
    while s.len() < n {
        if (next() % 1000) as f64 / 1000.0 < repeats {
            let e = &pool[(next() % 64) as usize];
            s.extend(e.iter().map(|&b| if next() % 100 == 0 { (next() & 3) as u8 } else { b }));
        } else {
            s.extend((0..300).map(|_| (next() & 3) as u8));
        }
    }
    s.truncate(n);
    s
}

/// The bases of a FASTA file (header lines skipped); any other letter is
/// 4, which no k-mer spans.
fn fasta(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut s = Vec::with_capacity(text.len());
    for line in text.split(|&b| b == b'\n') {
        if line.first() == Some(&b'>') {
            continue;
        }
        s.extend(line.iter().filter(|b| !b.is_ascii_whitespace()).map(|b| match b.to_ascii_uppercase() {
            b'A' => 0,
            b'C' => 1,
            b'G' => 2,
            b'T' => 3,
            _ => 4,
        }));
    }
    Ok(s)
}

/// The k-mers whose first base is in `from..to`, in order: `f(kmer)`.
fn for_kmers(seq: &[u8], from: usize, to: usize, mut f: impl FnMut(u64)) {
    let (mut w, mut valid) = (0u64, 0usize);
    // Start K - 1 bases early to fill the window.
    for (i, &b) in seq.iter().enumerate().take(to + K - 1).skip(from) {
        if b > 3 {
            valid = 0;
            continue;
        }
        w = w << 2 | b as u64;
        valid += 1;
        if valid >= K && i + 1 >= from + K {
            f(w);
        }
    }
}

/// Run `count(share)` for each thread's share of the k-mer positions of
/// `seq`: seconds taken.
fn timed_shares(seq: &[u8], threads: usize, count: impl Fn(usize, usize) + Sync) -> f64 {
    let starts = seq.len().saturating_sub(K - 1) as u64;
    let t0 = Instant::now();
    super::in_shares(starts, threads, &|from, to| count(from as usize, to as usize));
    t0.elapsed().as_secs_f64()
}

/// Count the k-mers of `seq` on `threads` threads with system `name`:
/// seconds, and the counts.
fn count(name: &str, seq: &[u8], threads: usize) -> (f64, HashMap<u64, u64>) {
    const START: usize = 1 << 16;
    match name {
        "dlht" => {
            let m = dlht::Map::<u64, u64>::with_capacity(START);
            let secs = timed_shares(seq, threads, |from, to| {
                for_kmers(seq, from, to, |k| {
                    m.fetch_add(k, 1);
                })
            });
            (secs, m.iter().collect())
        }
        "dlht-batch" => {
            let m = dlht::Map::<u64, u64>::with_capacity(START);
            let secs = timed_shares(seq, threads, |from, to| {
                const BATCH: usize = 32;
                let mut reqs = Vec::with_capacity(BATCH);
                let mut out = vec![dlht::Response::NotExecuted; BATCH];
                let add = |a: u64, b: u64| a.wrapping_add(b);
                let mut flush = |reqs: &mut Vec<dlht::Request<u64, u64>>| {
                    out.resize(reqs.len(), dlht::Response::NotExecuted);
                    m.batch(reqs, &mut out, dlht::StopOn::Never).expect("the table grows");
                    reqs.clear();
                };
                for_kmers(seq, from, to, |k| {
                    reqs.push(dlht::Request::Merge(k, 1, add));
                    if reqs.len() == BATCH {
                        flush(&mut reqs);
                    }
                });
                if !reqs.is_empty() {
                    flush(&mut reqs);
                }
            });
            (secs, m.iter().collect())
        }
        "dashmap" => {
            let m = dashmap::DashMap::<u64, u64>::with_capacity(START);
            let secs = timed_shares(seq, threads, |from, to| {
                for_kmers(seq, from, to, |k| *m.entry(k).or_insert(0) += 1)
            });
            (secs, m.into_iter().collect())
        }
        other => unreachable!("unknown system {other} (checked before)"),
    }
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    system: String,
    threads: usize,
    /// Millions of k-mers counted per second.
    mkmers: Spread,
}

/// The k-mer study. True if a check failed.
pub fn run(a: KmerArgs) -> bool {
    let Some(machine) = super::open_app("kmer", &a.systems, &SYSTEMS) else { return true };
    let super::Scale { threads: counts, rounds, .. } = a.run.scale();
    let seq = match &a.fasta {
        Some(p) => match fasta(p) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return true;
            }
        },
        None => genome(a.run.keys(a.bases).max(64) as usize, a.repeats.clamp(0.0, 1.0), 0x6e0e),
    };
    // The reference, single-threaded.
    let mut reference: HashMap<u64, u64> = HashMap::new();
    for_kmers(&seq, 0, seq.len().saturating_sub(K - 1), |k| *reference.entry(k).or_insert(0) += 1);
    let kmers: u64 = reference.values().sum();
    let mut top: Vec<u64> = reference.values().copied().collect();
    top.sort_unstable_by(|a, b| b.cmp(a));
    let hot: u64 = top.iter().take(top.len().div_ceil(100)).sum();
    println!(
        "# {} bases, {kmers} k-mers (k = {K}), {} distinct; the most frequent occurs {} times; the top 1% of distinct k-mers are {:.1}% of all",
        seq.len(),
        reference.len(),
        top.first().copied().unwrap_or(0),
        100.0 * hot as f64 / kmers.max(1) as f64
    );
    let bar = Progress::new("Counting", (counts.len() * rounds * a.systems.len()) as u64, "steps");
    let mut rows = Vec::new();
    let mut failed = false;
    for &threads in &counts {
        let (got, bad) = super::measure_interleaved(
            &bar,
            rounds,
            threads,
            a.systems.len(),
            |i| a.systems[i].clone(),
            |i| {
                let (secs, counted) = count(&a.systems[i], &seq, threads);
                if counted != reference {
                    let wrong = reference.iter().filter(|(k, n)| counted.get(k) != Some(n)).count();
                    return Err(format!(
                        "{}: {wrong} k-mers counted wrong, {} distinct for {}",
                        a.systems[i],
                        counted.len(),
                        reference.len()
                    ));
                }
                Ok(kmers as f64 / secs / 1e6)
            },
        );
        failed |= bad;
        for (name, ms) in a.systems.iter().zip(&got) {
            let Some(mkmers) = Spread::of(ms) else { continue };
            bar.println(format!("{name:<10} {threads:>2} threads: {} M k-mers/s", mkmers.show(2)));
            rows.push(Row { system: name.clone(), threads, mkmers });
        }
    }
    drop(bar);
    println!("{:<10} {:>7} {:>26}", "system", "threads", "M k-mers/s");
    let mut csv = String::from("system,threads,mkmers,mkmers_min,mkmers_max\n");
    for r in &rows {
        println!("{:<10} {:>7} {:>26}", r.system, r.threads, r.mkmers.show(2));
        let _ = writeln!(
            csv,
            "{},{},{:.4},{:.4},{:.4}",
            r.system, r.threads, r.mkmers.median, r.mkmers.min, r.mkmers.max
        );
    }
    println!(
        "# medians (min–max) over {rounds} interleaved rounds, each a fresh table grown from 2^16 keys; every count checked against a single-threaded HashMap's"
    );
    let json = serde_json::to_string_pretty(&rows).unwrap_or_default();
    super::save_app(a.run.out, "kmer", &machine, &[("kmer.csv", csv), ("kmer.json", json)]);
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmers_are_packed_windows_and_n_breaks_them() {
        // 33 bases: two k-mers; an N at 32 leaves one.
        let seq: Vec<u8> = (0..33).map(|i| (i % 4) as u8).collect();
        let mut got = Vec::new();
        for_kmers(&seq, 0, 2, |k| got.push(k));
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], got[0] << 2 | (32 % 4) as u64);
        let mut broken = seq.clone();
        broken[32] = 4;
        let mut n = 0;
        for_kmers(&broken, 0, 2, |_| n += 1);
        assert_eq!(n, 1);
        // Shares cover each start once.
        let seq = genome(1000, 0.3, 1);
        let mut all = 0;
        for (from, to) in [(0, 300), (300, 969)] {
            for_kmers(&seq, from, to, |_| all += 1);
        }
        assert_eq!(all, 969);
    }

    #[test]
    fn every_system_counts_exactly_on_two_threads() {
        let seq = genome(200_000, 0.5, 7);
        let mut reference: HashMap<u64, u64> = HashMap::new();
        for_kmers(&seq, 0, seq.len() - (K - 1), |k| *reference.entry(k).or_insert(0) += 1);
        // Skewed: the repeats' k-mers occur many times.
        assert!(reference.values().max().copied().unwrap_or(0) > 3);
        for name in SYSTEMS {
            let (_, got) = count(name, &seq, 2);
            assert!(got == reference, "{name}");
        }
    }

    #[test]
    fn a_fasta_file_is_read_base_by_base() {
        let dir = std::env::temp_dir().join(format!("dlht-kmer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.fa");
        std::fs::write(&p, ">chr1 test\nACGT\nnacg\n>chr2\nT\n").unwrap();
        assert_eq!(fasta(&p).unwrap(), [0, 1, 2, 3, 4, 0, 1, 2, 3]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
