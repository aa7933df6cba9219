//! The focused studies: `baseline` and `batching` are presets of the
//! comparison (same harness, rounds, limit ratios, twin check and files);
//! `baseline` adds what only dlht has (occupancy at resize, the cost of
//! the reclamation announcement); `hashers` compares hash functions;
//! `profile` runs exact operation counts for callgrind; `sizes`,
//! `counters`, `drain` and `memory` are their own harnesses over the
//! allocator mode, the per-key atomics, memory coming back, and resident
//! bytes per key over table sizes; `ycsb`, `join`, `locks`, `smallbank` and
//! `tatp` are the paper's applications (YCSB in process, a hash join, a
//! lock manager, Smallbank's and TATP's transactions), and `kmer`
//! DRAMHiT's skewed writes (k-mer counting); `server` runs
//! memcached against dlht-server over loopback; `persist` sets the
//! persistent map against the in-memory one and times recovery after
//! kill -9; `persist-bytes` does the same for the byte map.

pub mod baseline;
pub mod counters;
pub mod drain;
pub mod join;
pub mod kmer;
pub mod locks;
pub mod memory;
pub mod persist;
pub mod persist_bytes;
pub mod profile;
pub mod server;
pub mod sizes;
pub mod smallbank;
pub mod tatp;
pub mod ycsb;

use crate::compare::workloads::Workload;
use crate::compare::{self, CompareArgs};
use crate::harness::machine::Machine;
use crate::harness::{self, median3, Spread};
use crate::progress::Progress;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// Batch sizes the batching study sweeps (requests per batch).
pub const BATCH_SIZES: [u32; 8] = [1, 2, 4, 8, 16, 24, 32, 64];

fn or_default<T: Clone>(v: &mut Option<Vec<T>>, default: &[T]) {
    if v.is_none() {
        *v = Some(default.to_vec());
    }
}

/// dlht alone: get, get of absent keys, insert+remove, put against the
/// limit at each thread count; population; then occupancy at each resize
/// and the enter+leave cost. True if a result check failed.
pub fn baseline(mut a: CompareArgs) -> bool {
    or_default(&mut a.systems, &["dlht".to_string()]);
    or_default(&mut a.workloads, &[Workload::Get, Workload::Getmiss, Workload::Insdel, Workload::Put]);
    let smoke = a.smoke;
    let (run, dir) = compare::run(a);
    let keys = if smoke { 1 << 14 } else { 1 << 22 };
    let extras = Progress::phase("Measuring", "occupancy at each resize, then the reclamation announcement");
    let grow = baseline::population::<dlht::DefaultHashBuilder>(keys);
    let dur = Duration::from_secs_f64(if smoke { 0.03 } else { run.params.seconds.max(0.5) });
    let enter_leave = baseline::enter_leave_ns(dur);
    drop(extras);
    println!(
        "# population of {} keys from empty on 1 thread: {:.2} M/s, {} resizes; occupancy of all slots when each index was replaced: {}",
        grow.keys,
        grow.mops,
        grow.resizes,
        grow.occupancy.iter().map(|o| format!("{:.0}%", o * 100.0)).collect::<Vec<_>>().join(" ")
    );
    println!("# reclamation: enter+leave costs {enter_leave:.2} ns per operation (announce + leave)");
    #[derive(Serialize)]
    struct Extras {
        population_keys: usize,
        population_mops_1t: f64,
        resizes: usize,
        occupancy_at_resize: Vec<f64>,
        enter_leave_ns: f64,
    }
    let extras = Extras {
        population_keys: grow.keys,
        population_mops_1t: grow.mops,
        resizes: grow.resizes,
        occupancy_at_resize: grow.occupancy,
        enter_leave_ns: enter_leave,
    };
    write(&dir, "baseline-extras.json", &serde_json::to_string_pretty(&extras).unwrap_or_default());
    run.failed()
}

/// Gets and insert+remove pairs: unbatched, and in batches of 1..64, for
/// the concurrent map and the single-thread `LocalMap`, against the limit.
/// True if a result check failed.
pub fn batching(mut a: CompareArgs) -> bool {
    let names = ["dlht", "dlht-batch", "dlht-local", "dlht-local-batch"].map(String::from);
    or_default(&mut a.systems, &names);
    or_default(&mut a.workloads, &[Workload::Get, Workload::Insdel]);
    or_default(&mut a.batch, &BATCH_SIZES);
    a.no_growth = true;
    compare::run(a).0.failed()
}

/// Options of the hash-function study.
#[derive(clap::Args, Clone, Debug)]
pub struct HasherArgs {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 1.0, value_parser = compare::positive_seconds)]
    pub seconds: f64,
    /// Rounds (the hashers alternate, round after round).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Folder for hashers.csv and hashers.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny sizes, a few seconds.
    #[arg(long)]
    pub smoke: bool,
}

/// One hasher's figures.
#[derive(Serialize)]
struct HasherRow {
    hasher: &'static str,
    ns_per_hash: Spread,
    cached_get_mops: Spread,
    occupancy_at_resize: f64,
}

/// Hash functions: raw cost of hashing one word (stable), gets on a
/// cache-resident table (where hashing is visible), and spread (mean
/// occupancy when the index grows).
pub fn hashers(a: HasherArgs) {
    let machine = Machine::describe();
    println!("# dlht-bench hashers: {}", machine.line());
    let dur = Duration::from_secs_f64(if a.smoke { 0.03 } else { a.seconds });
    let (small, grow) = if a.smoke { (1 << 10, 1 << 14) } else { (1 << 14, 1 << 20) };
    type Measure = fn(Duration, usize, usize) -> (f64, f64, f64);
    fn one<S: std::hash::BuildHasher + Default + Sync>(
        dur: Duration,
        small: usize,
        grow: usize,
    ) -> (f64, f64, f64) {
        let s = S::default();
        let mhash = median3(|| {
            harness::timed(
                1,
                dur / 3,
                u64::MAX,
                3,
                |_| 0u64,
                |w| {
                    for _ in 0..1024 {
                        let h = s.hash_one(std::hint::black_box(w.keys.next_word()));
                        w.state = w.state.wrapping_add(h);
                    }
                    std::hint::black_box(w.state);
                    1024
                },
            )
        });
        let gets = baseline::gets(&baseline::populated::<S>(small), small as u64, dur);
        let g = baseline::population::<S>(grow);
        let occ = g.occupancy.iter().skip(2).sum::<f64>() / g.occupancy.len().saturating_sub(2).max(1) as f64;
        (1e3 / mhash, gets, occ)
    }
    let hashers: [(&str, Measure); 4] = [
        ("rapidhash (default)", one::<dlht::DefaultHashBuilder>),
        ("siphash-1-3 (std)", one::<std::hash::RandomState>),
        ("wyhash (final3)", one::<wyhash::final3::WyHasherBuilder>),
        ("modulo (keys are random)", one::<dlht::Modulo>),
    ];
    let mut got: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); hashers.len()];
    let bar = Progress::new("Hashing", (a.rounds as usize * hashers.len()) as u64, "steps");
    for r in 0..a.rounds {
        for (i, (name, f)) in hashers.iter().enumerate() {
            bar.set_message(format!("round {}/{}: {name}", r + 1, a.rounds));
            got[i].push(f(dur, small, grow));
            bar.inc(1);
        }
    }
    drop(bar);
    let rows: Vec<HasherRow> = hashers
        .iter()
        .zip(&got)
        .map(|((name, _), v)| {
            let col = |f: fn(&(f64, f64, f64)) -> f64| v.iter().map(f).collect::<Vec<_>>();
            HasherRow {
                hasher: name,
                ns_per_hash: Spread::of(&col(|x| x.0)).expect("at least one round"),
                cached_get_mops: Spread::of(&col(|x| x.1)).expect("at least one round"),
                occupancy_at_resize: Spread::of(&col(|x| x.2)).expect("at least one round").median,
            }
        })
        .collect();
    println!("{:<26} {:>20} {:>24} {:>10}", "hasher", "ns/hash", "cached get M/s", "occupancy");
    let mut csv = String::from("hasher,ns_per_hash,cached_get_mops,occupancy_at_resize\n");
    for r in &rows {
        println!(
            "{:<26} {:>20} {:>24} {:>9.0}%",
            r.hasher,
            r.ns_per_hash.show(2),
            r.cached_get_mops.show(1),
            100.0 * r.occupancy_at_resize
        );
        let _ = writeln!(
            csv,
            "{},{:.4},{:.4},{:.4}",
            r.hasher, r.ns_per_hash.median, r.cached_get_mops.median, r.occupancy_at_resize
        );
    }
    println!("# medians (min–max) over {} alternating rounds; occupancy: mean over the resizes of a growth to {grow} keys", a.rounds);
    let dir = a.out.unwrap_or_else(|| PathBuf::from(format!("dlht-results/hashers-{}", machine.date_unix)));
    write(&dir, "hashers.csv", &csv);
    write(&dir, "hashers.json", &serde_json::to_string_pretty(&rows).unwrap_or_default());
    println!("# results: {}", dir.display());
}

/// Write `name` in `dir`, or say why not.
pub(crate) fn write(dir: &std::path::Path, name: &str, text: &str) {
    if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(dir.join(name), text)) {
        eprintln!("could not write {}: {e}", dir.join(name).display());
    }
}

/// An application study's opening: its header line, and its `--systems`
/// checked against the `known` ones (None, with an error printed, for an
/// unknown one).
pub(crate) fn open_app(name: &str, systems: &[String], known: &[&str]) -> Option<Machine> {
    let machine = Machine::describe();
    println!("# dlht-bench {name}: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    if let Some(bad) = systems.iter().find(|s| !known.contains(&s.as_str())) {
        eprintln!("error: unknown system {bad} (known: {})", known.join(", "));
        return None;
    }
    if let Some((i, twice)) = systems.iter().enumerate().find(|(i, s)| systems[..*i].contains(s)) {
        eprintln!("error: system {twice} named twice (at {i})");
        return None;
    }
    Some(machine)
}

/// The order `systems` run in, in round `round` of interleaved rounds:
/// forward, then backward, so that no system always runs first.
pub(crate) fn round_order(systems: usize, round: usize) -> Vec<usize> {
    if round % 2 == 0 {
        (0..systems).collect()
    } else {
        (0..systems).rev().collect()
    }
}

/// Write an application study's `files` (name, text) into `out`, or into
/// `dlht-results/<name>-<date>`, and say where.
pub(crate) fn save_app(out: Option<PathBuf>, name: &str, machine: &Machine, files: &[(&str, String)]) {
    let dir = out.unwrap_or_else(|| PathBuf::from(format!("dlht-results/{name}-{}", machine.date_unix)));
    for (file, text) in files {
        write(&dir, file, text);
        println!("# results: {}", dir.join(file).display());
    }
}

/// An application study's measurements at `threads` threads: `measure(i)`
/// for each of `systems` (named by `name(i)`) in `rounds` interleaved
/// rounds, shown on `bar`; Err if a check failed (said on `bar`). The
/// measurements of each system, and whether a check failed.
pub(crate) fn measure_interleaved<M>(
    bar: &crate::progress::Progress,
    rounds: usize,
    threads: usize,
    systems: usize,
    name: impl Fn(usize) -> String,
    mut measure: impl FnMut(usize) -> Result<M, String>,
) -> (Vec<Vec<M>>, bool) {
    let mut got: Vec<Vec<M>> = (0..systems).map(|_| Vec::new()).collect();
    let mut failed = false;
    for r in 0..rounds {
        for i in round_order(systems, r) {
            bar.set_message(format!("round {}/{rounds}: {} on {threads} threads", r + 1, name(i)));
            match measure(i) {
                Ok(m) => got[i].push(m),
                Err(e) => {
                    bar.println(format!("check failed on {threads} threads: {e}"));
                    failed = true;
                }
            }
            bar.inc(1);
        }
    }
    (got, failed)
}

/// Options every transaction study shares (`locks`, `smallbank`, `tatp`).
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 1.0, value_parser = compare::positive_seconds)]
    pub seconds: f64,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Most threads: runs at 1, 2, 4, … and this many.
    #[arg(long, default_value_t = join::default_threads())]
    pub threads: usize,
    /// Folder for the study's CSV and JSON files.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// At most 2^10 keys (customers, subscribers), 0.05 s per measurement,
    /// one round, at most 2 threads.
    #[arg(long)]
    pub smoke: bool,
}

/// How long and how wide a transaction study runs.
pub(crate) struct Scale {
    /// Thread counts, doubling up to the most.
    pub threads: Vec<usize>,
    /// The most threads.
    pub max_threads: usize,
    /// Per measurement.
    pub dur: std::time::Duration,
    /// Interleaved rounds.
    pub rounds: usize,
}

impl RunArgs {
    /// The study's scale, smoke runs' smaller.
    pub(crate) fn scale(&self) -> Scale {
        let max_threads = if self.smoke { self.threads.clamp(1, 2) } else { self.threads.max(1) };
        Scale {
            threads: join::thread_counts(max_threads),
            max_threads,
            dur: std::time::Duration::from_secs_f64(if self.smoke { 0.05 } else { self.seconds }),
            rounds: if self.smoke { 1 } else { self.rounds as usize },
        }
    }

    /// `n` keys, or at most 2^10 in a smoke run.
    pub(crate) fn keys(&self, n: u64) -> u64 {
        if self.smoke {
            n.min(1 << 10)
        } else {
            n
        }
    }
}

/// Build each of `systems` with `make` (Err: the fresh tables failed a
/// check), shown on a bar as `what`, with the anonymous resident bytes each
/// added ÷ `per` (NaN below 2^16 `per`: the allocator's pages already held
/// are most of it). None, said, if one failed.
pub(crate) fn populate<T>(
    systems: &[String],
    per: u64,
    what: &str,
    mut make: impl FnMut(&str) -> Result<T, String>,
) -> Option<Vec<(T, f64)>> {
    let rss = || compare::proc_bytes("/proc/self/status", "RssAnon:").unwrap_or(0) as f64;
    let bar = crate::progress::Progress::new("Populating", systems.len() as u64, "systems");
    let mut built = Vec::new();
    for s in systems {
        bar.set_message(format!("{s}: {what}"));
        let before = rss();
        match make(s) {
            Ok(t) if per < 1 << 16 => built.push((t, f64::NAN)),
            Ok(t) => built.push((t, (rss() - before) / per as f64)),
            Err(e) => {
                bar.println(format!("error: {s} after population: {e}"));
                return None;
            }
        }
        bar.inc(1);
    }
    Some(built)
}

/// The transaction kind a roll of 0..100 selects in `mix` (kinds with
/// their shares in percent, summing to 100).
pub(crate) fn pick_from_mix<K: Copy>(mix: &[(K, u64)], roll: u64) -> K {
    let mut left = roll % 100;
    for &(kind, share) in mix {
        if left < share {
            return kind;
        }
        left -= share;
    }
    mix[mix.len() - 1].0
}

/// `f(from, to)` for each of `threads` contiguous shares of `0..n`, each
/// on a thread of its own (a study's population, or its work split by
/// position).
pub(crate) fn in_shares(n: u64, threads: usize, f: &(dyn Fn(u64, u64) + Sync)) {
    let threads = threads.max(1) as u64;
    let per = n.div_ceil(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || f((t * per).min(n), ((t + 1) * per).min(n)));
        }
    });
}
