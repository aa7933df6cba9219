//! dlht-bench: the DLHT evaluation as one command.
//!
//! `cargo run --release -p dlht-bench` compares dlht (unbatched, batched,
//! single-thread) with papaya, dashmap, scc, flurry, leapfrog, std's
//! RwLock<HashMap> and (one thread) hashbrown on the paper's workloads, next
//! to the machine's memory limit, and writes CSV, JSON and plots.
//! `dlht-bench baseline|batching|hashers` run the focused studies.

mod baseline;
mod batching;
mod compare;
mod keys;
mod limit;
mod machine;
mod plot;
mod report;
mod runner;
mod studies;
mod systems;
mod workloads;

use clap::{Parser, Subcommand};
use std::time::Duration;

/// The DLHT evaluation: dlht against real peers and the machine's memory limit.
///
/// With no subcommand: the comparison. Every system runs the same workloads
/// on the same key streams (seeded by --seed) on a prepopulated,
/// memory-resident table, at each thread count; every result is checked
/// (a get of a present key that misses aborts the run). Then Population
/// (insert 2^population-log2 fresh keys into a table sized for 1024) and
/// the resize time series (gets sampled every 50 ms while another thread
/// grows the table, as in the paper's Fig. 8). A random cache-line read
/// loop over a huge-page array the size of dlht's index gives the memory
/// limit, plain and prefetched, in the same run. Results: a table on
/// stdout; results.csv, resize.csv, results.json (with the machine's
/// description) and PNG/SVG plots in the folder named at the end.
#[derive(Parser, Debug)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    study: Option<StudyCmd>,
    #[command(flatten)]
    compare: compare::CompareArgs,
}

#[derive(Subcommand, Debug)]
enum StudyCmd {
    /// Single-thread get / get-miss / insert+remove / put of dlht on a
    /// memory-resident (2^keys-log2) and a cache-resident (2^14) table, as a
    /// share of the memory limit; population occupancy; reclamation cost.
    Baseline(StudyArgs),
    /// Gets and insert+remove pairs in batches of 1..64 vs unbatched, at 1
    /// and 2 threads; the single-thread LocalMap vs Map.
    Batching(StudyArgs),
    /// Hash functions: ns per word, in-map gets, occupancy at resize.
    Hashers(StudyArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct StudyArgs {
    /// Memory-resident table of 2^N keys.
    #[arg(long, default_value_t = 25)]
    keys_log2: u32,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Tiny sizes, a few seconds.
    #[arg(long)]
    smoke: bool,
}

fn main() {
    let cli = Cli::parse();
    let Some(cmd) = cli.study else {
        compare::run(cli.compare);
        return;
    };
    let (study, args) = match cmd {
        StudyCmd::Baseline(a) => (studies::Study::Baseline, a),
        StudyCmd::Batching(a) => (studies::Study::Batching, a),
        StudyCmd::Hashers(a) => (studies::Study::Hashers, a),
    };
    let cfg = studies::Config {
        big_log2: if args.smoke { args.keys_log2.min(18) } else { args.keys_log2 },
        small_log2: 14,
        duration: Duration::from_secs_f64(if args.smoke { args.seconds.min(0.2) } else { args.seconds }),
    };
    studies::run(study, &cfg);
}
