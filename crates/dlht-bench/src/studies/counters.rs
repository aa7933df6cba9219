//! Counters: threads add 1 to counters of Zipf-distributed keys (θ = 0.99
//! by default), inserting a counter the first time its key comes up — the
//! k-mer counting and rate-limiter idiom — in interleaved rounds.
//!
//! - `dlht`: [`Map::fetch_add`](dlht::Map::fetch_add), a 16-byte CAS on the
//!   key's slot (an insert when absent);
//! - `dlht-batch`: the same through batches of 32
//!   [`Request::fetch_add`](dlht::Request::fetch_add), prefetched;
//! - `dashmap`: `entry(k).or_insert(0) += 1` under its shard lock;
//! - `papaya`: `update_or_insert(k, |v| v + 1, 1)`, which allocates a new
//!   entry per update;
//! - `scc`: `entry_sync(k).and_modify(+1).or_insert(1)`.
//!
//! Every count is checked: after each measurement a system's counters must
//! sum to exactly the increments made into it so far (a lost or doubled
//! update fails the run, for dlht, or is reported, for a peer).

use crate::compare;
use crate::harness::keys::ZipfTrace;
use crate::harness::{self, Spread};
use crate::studies::write;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Options of the counter study.
#[derive(clap::Args, Clone, Debug)]
pub struct CounterArgs {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 0.5, value_parser = compare::positive_seconds)]
    pub seconds: f64,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Distinct keys: 2^N.
    #[arg(long, default_value_t = 22, value_parser = clap::value_parser!(u32).range(10..=30))]
    pub keys_log2: u32,
    /// Zipf exponent of the key popularity.
    #[arg(long, default_value_t = 0.99)]
    pub zipf_theta: f64,
    /// Folder for counters.csv and counters.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny tables, a few seconds.
    #[arg(long)]
    pub smoke: bool,
}

/// A table of counters.
trait Counters: Sync {
    fn name(&self) -> &'static str;
    fn is_dlht(&self) -> bool {
        self.name().starts_with("dlht")
    }
    /// Add 1 to the counter of each key.
    fn add_ones(&self, keys: &[u64]);
    /// The sum of every counter.
    fn total(&self) -> u64;
}

/// Keys per call of [`Counters::add_ones`] (and per dlht batch).
const BATCH: usize = 32;

/// The sum of a dlht map's counters.
fn sum(m: &dlht::Map<u64, u64>) -> u64 {
    m.iter().map(|(_, v)| v).sum()
}

struct Dlht(dlht::Map<u64, u64>);

impl Counters for Dlht {
    fn name(&self) -> &'static str {
        "dlht"
    }
    fn add_ones(&self, keys: &[u64]) {
        for &k in keys {
            self.0.fetch_add(k, 1);
        }
    }
    fn total(&self) -> u64 {
        sum(&self.0)
    }
}

struct DlhtBatch(dlht::Map<u64, u64>);

impl Counters for DlhtBatch {
    fn name(&self) -> &'static str {
        "dlht-batch"
    }
    fn add_ones(&self, keys: &[u64]) {
        let mut reqs = [dlht::Request::Get(0); BATCH];
        let mut out = [dlht::Response::NotExecuted; BATCH];
        for (r, &k) in reqs.iter_mut().zip(keys) {
            *r = dlht::Request::fetch_add(k, 1);
        }
        let n = keys.len();
        let ran = self.0.batch(&reqs[..n], &mut out[..n], dlht::StopOn::Never).expect("the index grows");
        assert_eq!(ran, n, "dlht-batch: a batch stopped early");
    }
    fn total(&self) -> u64 {
        sum(&self.0)
    }
}

struct Dash(dashmap::DashMap<u64, u64>);

impl Counters for Dash {
    fn name(&self) -> &'static str {
        "dashmap"
    }
    fn add_ones(&self, keys: &[u64]) {
        for &k in keys {
            *self.0.entry(k).or_insert(0) += 1;
        }
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|e| *e.value()).sum()
    }
}

struct Papaya(papaya::HashMap<u64, u64>);

impl Counters for Papaya {
    fn name(&self) -> &'static str {
        "papaya"
    }
    fn add_ones(&self, keys: &[u64]) {
        let m = self.0.pin();
        for &k in keys {
            m.update_or_insert(k, |v| v + 1, 1);
        }
    }
    fn total(&self) -> u64 {
        self.0.pin().iter().map(|(_, v)| *v).sum()
    }
}

struct Scc(scc::HashMap<u64, u64>);

impl Counters for Scc {
    fn name(&self) -> &'static str {
        "scc"
    }
    fn add_ones(&self, keys: &[u64]) {
        for &k in keys {
            self.0.entry_sync(k).and_modify(|v| *v += 1).or_insert(1);
        }
    }
    fn total(&self) -> u64 {
        let mut sum = 0;
        self.0.iter_sync(|_, v| {
            sum += *v;
            true
        });
        sum
    }
}

/// A thread's state in a measurement: its place in the trace, and the
/// increments it made, added to the shared tally when the thread ends.
struct Tally<'a> {
    cursor: crate::harness::keys::ZipfCursor<'a>,
    done: u64,
    into: &'a AtomicU64,
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        // Relaxed: read after the measurement's threads are joined.
        self.into.fetch_add(self.done, Ordering::Relaxed);
    }
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    threads: usize,
    system: &'static str,
    mops: Spread,
    /// Per-round ratio dlht ÷ this system.
    dlht_over: Spread,
}

/// One timed measurement on `s`; Err if its counters do not add up.
fn measure(
    s: &dyn Counters,
    trace: &ZipfTrace,
    mask: u64,
    threads: usize,
    dur: Duration,
    made: &AtomicU64,
) -> Result<f64, String> {
    let tally = AtomicU64::new(0);
    let mops = harness::timed(
        threads,
        dur,
        1,
        0,
        |t| Tally { cursor: trace.cursor(t, threads), done: 0, into: &tally },
        |w| {
            let mut keys = [0u64; BATCH];
            for k in keys.iter_mut() {
                *k = crate::compare::workloads::key(w.state.cursor.next_index() & mask);
            }
            s.add_ones(&keys);
            w.state.done += BATCH as u64;
            BATCH as u64
        },
    );
    // Relaxed: the threads are joined.
    let t = tally.load(Ordering::Relaxed);
    let want = made.fetch_add(t, Ordering::Relaxed) + t;
    match s.total() {
        got if got == want => Ok(mops),
        got => Err(format!("{}: counters sum to {got}, {want} increments were made", s.name())),
    }
}

/// The counter study. True if a dlht result check failed.
pub fn run(a: CounterArgs) -> bool {
    let machine = crate::harness::machine::Machine::describe();
    println!("# dlht-bench counters: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    let n = 1u64 << if a.smoke { 12 } else { a.keys_log2 };
    let dur = Duration::from_secs_f64(if a.smoke { 0.02 } else { a.seconds });
    let trace = match ZipfTrace::new(n, a.zipf_theta, 1 << 22, 0xC0FFEE) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return true;
        }
    };
    let dlht = Dlht(dlht::Map::with_capacity(n as usize));
    let batch = DlhtBatch(dlht::Map::with_capacity(n as usize));
    let dash = Dash(dashmap::DashMap::with_capacity(n as usize));
    let papaya = Papaya(papaya::HashMap::with_capacity(n as usize));
    let scc = Scc(scc::HashMap::with_capacity(n as usize));
    let systems: Vec<&dyn Counters> = vec![&dlht, &batch, &dash, &papaya, &scc];
    let made: Vec<AtomicU64> = systems.iter().map(|_| AtomicU64::new(0)).collect();
    let mut rows = Vec::new();
    let mut failed = false;
    for &threads in &a.threads {
        let threads = threads.max(1);
        let mut steps: Vec<harness::Step<'_>> = systems
            .iter()
            .zip(&made)
            .map(|(&s, made)| {
                let trace = &trace;
                let step: harness::Step<'_> = Box::new(move |_| measure(s, trace, n - 1, threads, dur, made));
                step
            })
            .collect();
        let got = harness::rounds(&mut steps, a.rounds as usize, |_, _| {});
        drop(steps);
        let per_system: Vec<Vec<f64>> =
            got.iter().map(|r| r.iter().filter_map(|x| x.as_ref().ok().copied()).collect()).collect();
        for (s, r) in systems.iter().zip(&got) {
            if let Some(e) = r.iter().find_map(|x| x.as_ref().err()) {
                eprintln!("check failed{}: {e}", if s.is_dlht() { "" } else { " (a peer; left out)" });
                failed |= s.is_dlht();
            }
        }
        for (s, mine) in systems.iter().zip(&per_system) {
            let ratios: Vec<f64> = per_system[0].iter().zip(mine).map(|(d, m)| d / m).collect();
            if let (Some(mops), Some(dlht_over)) = (Spread::of(mine), Spread::of(&ratios)) {
                rows.push(Row { threads, system: s.name(), mops, dlht_over });
            }
        }
    }
    println!("{:>7} {:<11} {:>24} {:>20}", "threads", "system", "M increments/s", "dlht ÷ system");
    let mut csv = String::from("threads,system,mops,mops_min,mops_max,dlht_over\n");
    for r in &rows {
        println!("{:>7} {:<11} {:>24} {:>20}", r.threads, r.system, r.mops.show(2), r.dlht_over.show(2));
        let _ = writeln!(
            csv,
            "{},{},{:.4},{:.4},{:.4},{:.4}",
            r.threads, r.system, r.mops.median, r.mops.min, r.mops.max, r.dlht_over.median
        );
    }
    println!(
        "# 2^{} keys, Zipf θ = {}; medians (min–max) over {} interleaved rounds; ratios per round; every total checked",
        n.trailing_zeros(),
        a.zipf_theta,
        a.rounds
    );
    let dir = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("dlht-results/counters-{}", machine.date_unix)));
    write(&dir, "counters.csv", &csv);
    write(&dir, "counters.json", &serde_json::to_string_pretty(&rows).unwrap_or_default());
    println!("# results: {}", dir.display());
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_counts_exactly_on_two_threads() {
        let trace = ZipfTrace::new(1 << 10, 0.99, 1 << 12, 1).unwrap();
        let systems: Vec<Box<dyn Counters>> = vec![
            Box::new(Dlht(dlht::Map::new())),
            Box::new(DlhtBatch(dlht::Map::new())),
            Box::new(Dash(dashmap::DashMap::new())),
            Box::new(Papaya(papaya::HashMap::new())),
            Box::new(Scc(scc::HashMap::new())),
        ];
        for s in &systems {
            let made = AtomicU64::new(0);
            for _ in 0..2 {
                let r = measure(&**s, &trace, (1 << 10) - 1, 2, Duration::from_millis(20), &made);
                assert!(r.is_ok(), "{r:?}");
            }
            assert!(made.load(Ordering::Relaxed) > 0);
        }
    }

    #[test]
    fn a_lost_increment_is_caught() {
        /// Drops every 100th increment.
        struct Lossy(dlht::Map<u64, u64>, AtomicU64);
        impl Counters for Lossy {
            fn name(&self) -> &'static str {
                "lossy"
            }
            fn add_ones(&self, keys: &[u64]) {
                for &k in keys {
                    if self.1.fetch_add(1, Ordering::Relaxed) % 100 != 99 {
                        self.0.fetch_add(k, 1);
                    }
                }
            }
            fn total(&self) -> u64 {
                self.0.iter().map(|(_, v)| v).sum()
            }
        }
        let trace = ZipfTrace::new(1 << 10, 0.99, 1 << 12, 1).unwrap();
        let s = Lossy(dlht::Map::new(), AtomicU64::new(0));
        let r = measure(&s, &trace, (1 << 10) - 1, 1, Duration::from_millis(20), &AtomicU64::new(0));
        assert!(r.is_err());
    }
}
