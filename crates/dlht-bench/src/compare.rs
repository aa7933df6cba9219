//! The default run: every system on every workload at every thread count,
//! on the same key streams, next to the memory limit measured in the same
//! run; then Population and the resize time series; then the table, CSV,
//! JSON and plots.

use crate::limit;
use crate::machine::Machine;
use crate::report::{LimitRecord, Row, Run, Series};
use crate::systems;
use crate::with_system;
use crate::workloads::{self, Params, Workload};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Duration;

/// Options of the comparison (see `--help`).
#[derive(clap::Args, Clone, Debug)]
pub struct CompareArgs {
    /// Thread counts to run, comma-separated (default: 1, 2, 4, … up to the
    /// number of cores, and the number of cores).
    #[arg(long, value_delimiter = ',')]
    pub threads: Option<Vec<usize>>,
    /// Prepopulated keys: 2^N (memory-resident by default: 2^25 keys are
    /// 0.5 GiB of pairs, far beyond the L3 cache). The paper uses 100M
    /// keys: `--keys-log2 27` comes close (needs about 24 GiB for the peers).
    #[arg(long, default_value_t = 25)]
    pub keys_log2: u32,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Requests per batch for the batched dlht systems (at most 64).
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Systems to run, comma-separated (default: all). Known: dlht,
    /// dlht-batch, dlht-local-batch (one thread), papaya, dashmap, scc,
    /// flurry, leapfrog, std-rwlock, hashbrown-1t (one thread).
    #[arg(long, value_delimiter = ',')]
    pub systems: Option<Vec<String>>,
    /// Workloads on the prepopulated table (default: all). get: uniform
    /// gets, all hits; insdel: insert a fresh key, then remove it; putheavy:
    /// 50% gets, 50% puts of present keys; skew: gets with --hot-share of
    /// accesses on --hot-keys keys. Population and the resize time series
    /// always run (unless --no-growth).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub workloads: Option<Vec<Workload>>,
    /// Hash function of the dlht systems: rapidhash (seeded) or modulo (the
    /// identity: the bin is the key's low bits; fine for random keys).
    #[arg(long, value_enum, default_value_t = systems::HashChoice::Rapidhash)]
    pub hash: systems::HashChoice,
    /// Start the prepopulated tables small, so that they resize while being
    /// populated (default: pre-sized, as the paper's runs with resizing off).
    #[arg(long)]
    pub resizing: bool,
    /// Seed of the key streams (the same for every system).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Skew: share of accesses that go to the hot keys.
    #[arg(long, default_value_t = 0.9)]
    pub hot_share: f64,
    /// Skew: number of hot keys.
    #[arg(long, default_value_t = 1000)]
    pub hot_keys: u64,
    /// Population: insert 2^N fresh keys into a table sized for 1024.
    #[arg(long, default_value_t = 22)]
    pub population_log2: u32,
    /// Skip Population and the resize time series.
    #[arg(long)]
    pub no_growth: bool,
    /// Folder for results.csv, resize.csv, results.json and the plots
    /// (default: dlht-results/run-<unix time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny sizes and short measurements (about 10 s): what CI runs.
    #[arg(long)]
    pub smoke: bool,
}

fn default_threads() -> Vec<usize> {
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut t: Vec<usize> = (0..).map(|i| 1 << i).take_while(|&x| x <= n).collect();
    if *t.last().unwrap() != n {
        t.push(n);
    }
    t
}

/// Run the comparison.
pub fn run(mut a: CompareArgs) {
    if a.smoke {
        a.keys_log2 = a.keys_log2.min(16);
        a.seconds = a.seconds.min(0.05);
        a.population_log2 = a.population_log2.min(14);
    }
    systems::set_hash(a.hash);
    let threads = a.threads.clone().unwrap_or_else(default_threads);
    let systems: Vec<String> =
        a.systems.clone().unwrap_or_else(|| systems::ALL.iter().map(|s| s.to_string()).collect());
    for s in &systems {
        assert!(systems::ALL.contains(&s.as_str()), "unknown system {s}; known: {:?}", systems::ALL);
    }
    let workloads = a
        .workloads
        .clone()
        .unwrap_or_else(|| vec![Workload::Get, Workload::Insdel, Workload::Putheavy, Workload::Skew]);
    let params = Params {
        keys: 1 << a.keys_log2,
        batch: a.batch.clamp(1, 64),
        seconds: a.seconds,
        seed: a.seed,
        hot_share: a.hot_share,
        hot_keys: a.hot_keys,
    };
    let machine = Machine::describe();
    println!("# dlht-bench compare: {}", machine.line());
    println!(
        "# {} keys, {} s per measurement, batch {}, threads {:?}, dlht hash {:?}, seed {}",
        params.keys, params.seconds, params.batch, threads, a.hash, params.seed
    );

    // The physical limit, over an array the size of dlht's index.
    let bytes = crate::baseline::index_bytes(params.keys as usize);
    let arr = limit::line_array(bytes);
    let limit_dur = Duration::from_secs_f64(params.seconds);
    let plain = limit::measure_plain(&arr, limit_dur);
    let mut per_threads = std::collections::BTreeMap::new();
    for &t in &threads {
        per_threads.insert(t, limit::prefetched_on_threads(&arr, t, limit_dur));
    }
    drop(arr);
    println!(
        "# memory limit over {} MiB: {plain:.1} M random line reads/s (1 thread, plain); prefetched: {}",
        bytes >> 20,
        per_threads.iter().map(|(t, m)| format!("{m:.1} on {t}")).collect::<Vec<_>>().join(", ")
    );

    let steps = systems.len() as u64 * (workloads.len() as u64 * threads.len() as u64 + 2);
    let overall = ProgressBar::new(steps).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap()
            .progress_chars("=> "),
    );
    let mut rows = Vec::new();
    let mut resize = Vec::new();
    let mut notes = Vec::new();
    for s in &systems {
        with_system!(s.as_str(), T => {
            if !T::NOTE.is_empty() {
                notes.push((T::NAME.to_string(), T::NOTE.to_string()));
            }
            overall.set_message(format!("{}: populating", T::NAME));
            let cap = if a.resizing { 1024 } else { params.keys as usize };
            let table = T::with_capacity(cap);
            let pop = ProgressBar::new(params.keys).with_style(
                ProgressStyle::with_template("  populating {msg} [{bar:30}] {pos}/{len} keys").unwrap().progress_chars("=> "),
            );
            pop.set_message(T::NAME);
            workloads::populate(&table, params.keys, *threads.iter().max().unwrap(), 16, &pop);
            pop.finish_and_clear();
            let mut failed = false;
            for &w in &workloads {
                for &t in &threads {
                    overall.set_message(format!("{}: {w:?} on {t} threads", T::NAME));
                    if !failed && (T::CONCURRENT || t == 1) {
                        // A failed result check (a present key not found, a
                        // fresh insert refused) is reported, not counted;
                        // the table is then suspect, so its remaining
                        // workloads are skipped.
                        let measured = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            workloads::measure(&table, w, t, &params)
                        }));
                        match measured {
                            Ok(mops) => {
                                let pct = matches!(w, Workload::Get | Workload::Skew).then(|| 100.0 * mops / per_threads[&t]);
                                rows.push(Row { system: T::NAME.into(), workload: format!("{w:?}").to_lowercase(), threads: t, mops, pct_of_limit: pct, vs_best_peer: None });
                            }
                            Err(_) => {
                                failed = true;
                                notes.push((T::NAME.to_string(), format!(
                                    "FAILED its result check in {w:?} on {t} threads (message above); its later workloads were skipped"
                                )));
                            }
                        }
                    }
                    overall.inc(1);
                }
            }
            drop(table);
            if !a.no_growth {
                let max_t = if T::CONCURRENT { *threads.iter().max().unwrap() } else { 1 };
                overall.set_message(format!("{}: population", T::NAME));
                let mops = workloads::population::<T>(1 << a.population_log2, max_t, params.batch);
                rows.push(Row { system: T::NAME.into(), workload: "population".into(), threads: max_t, mops, pct_of_limit: None, vs_best_peer: None });
                overall.inc(1);
                if T::CONCURRENT {
                    overall.set_message(format!("{}: resize time series", T::NAME));
                    let half = (max_t / 2).max(1);
                    let (prepop, grow) = if a.smoke { (1 << 12, 1 << 15) } else { (1 << 18, 1 << 22) };
                    let samples = workloads::resize_series::<T>(prepop, grow, half, half, Duration::from_millis(if a.smoke { 5 } else { 50 }));
                    resize.push(Series { system: T::NAME.into(), samples });
                }
            } else {
                overall.inc(1);
            }
            overall.inc(1);
        });
    }
    overall.finish_and_clear();

    let mut run = Run {
        machine,
        params,
        limit: LimitRecord {
            bytes,
            plain_mlines_1t: plain,
            prefetched_mlines_1t: per_threads.get(&1).copied().unwrap_or(0.0),
            prefetched_mlines_2t: per_threads.get(&2).copied().unwrap_or(0.0),
        },
        rows,
        resize,
        notes,
    };
    run.rank();
    println!("\n{}", run.table());
    println!("# % limit: gets as a share of the prefetched random-read limit at the same thread count.");
    println!("# vs best peer: throughput over the best non-dlht system in the same row group.");
    for (sys, note) in &run.notes {
        println!("# note, {sys}: {note}");
    }
    for s in &run.resize {
        if let Some(min) = s.samples.iter().skip(1).map(|p| p.get_mops).reduce(f64::min) {
            let mean = s.samples.iter().map(|p| p.get_mops).sum::<f64>() / s.samples.len() as f64;
            println!("# resizing under load, {}: gets {mean:.1} M/s on average, {min:.1} at the lowest sample, over {} samples", s.system, s.samples.len());
        }
    }
    let dir =
        a.out.clone().unwrap_or_else(|| PathBuf::from(format!("dlht-results/run-{}", run.machine.date_unix)));
    match run.write(&dir) {
        Ok(()) => {}
        Err(e) => eprintln!("could not write results to {}: {e}", dir.display()),
    }
    let plots = crate::plot::all(&run, &dir).unwrap_or_else(|e| {
        eprintln!("could not draw plots: {e}");
        Vec::new()
    });
    println!(
        "# results: {} (results.csv, resize.csv, results.json, {} plot files)",
        dir.display(),
        plots.len()
    );
}
