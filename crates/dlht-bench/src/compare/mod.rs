//! The default run: every system on every workload at every thread count,
//! on the same key streams, in interleaved rounds with the memory limit
//! (limit, dlht, each peer, then again, `--rounds` times); each figure next
//! to a cache-resident twin; then latency percentiles, the resize time
//! series; then the table, CSV, JSON and plots. `systems` are the maps
//! under test, `workloads` what they run, `report` and `plot` what comes
//! out.

pub mod cpp;
pub mod hashing;
pub mod params;
pub mod plot;
pub mod report;
pub mod systems;
pub mod table;
pub mod workloads;

use crate::harness::keys::ZipfTrace;
use crate::harness::limit::{self, Line, Probe};
use crate::harness::machine::Machine;
use crate::harness::{self, Step};
use crate::progress::Progress;
use crate::with_system;
use dlht::internals::ZeroedArray;
use params::{Latency, Params};
use report::{Measurement, Run, Series, SystemLatency, LIMIT_PLAIN, LIMIT_PREFETCHED};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use table::{DlhtMap, KeyStreamOnly, Table, KEY_STREAM};
use workloads::{Draw, Workload};

/// Keys of every system's cache-resident twin table (a few hundred KiB).
pub const TWIN_KEYS: u64 = 1 << 14;
/// Bytes of the limit probe's cache-resident twin array (fits in L2).
const TWIN_LIMIT_BYTES: usize = 256 << 10;

/// Parses a positive number of seconds (at most an hour).
pub fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds in (0, 3600]")),
    }
}

fn share(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a share in [0, 1]")),
    }
}

fn theta(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 10.0 => Ok(v),
        _ => Err(format!("'{s}' is not a Zipf exponent in (0, 10]")),
    }
}

/// Options of the comparison (see `--help`).
#[derive(clap::Args, Clone, Debug)]
pub struct CompareArgs {
    /// Thread counts to run, comma-separated (default: 1, 2, 4, … up to the
    /// number of cores, and the number of cores).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<Vec<u16>>,
    /// Prepopulated keys: 2^N (default 25; --quick: 24). Memory-resident
    /// by default: 2^25 keys are a 1 GiB dlht index, far beyond the L3
    /// cache. All systems' tables are held at once, so the rounds can
    /// interleave them: 2^25 needs about 16 GiB. The paper uses 100M keys
    /// (`--keys-log2 27`, about 64 GiB).
    #[arg(long, value_parser = clap::value_parser!(u32).range(10..=32))]
    pub keys_log2: Option<u32>,
    /// Seconds per measurement, each round (default 0.5; --quick: 0.25).
    #[arg(long, value_parser = positive_seconds)]
    pub seconds: Option<f64>,
    /// Interleaved rounds: limit, dlht, each peer, then again (ABBA order;
    /// default 5; --quick: 2).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: Option<u32>,
    /// Requests per batch for the batched dlht systems, comma-separated
    /// (default 32, the paper's default); with several sizes each is its own row, named
    /// system/size.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batch: Option<Vec<u32>>,
    /// Systems to run, comma-separated (default: all but dlht-local).
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(systems::ALL))]
    pub systems: Option<Vec<String>>,
    /// Workloads on the prepopulated table (default: all). get: uniform
    /// gets, all hits; insdel: insert a fresh key, then remove it; putheavy:
    /// 50% gets, 50% puts of present keys; skew: gets with --hot-share of
    /// accesses on --hot-keys keys; zipf: gets of Zipf-distributed keys
    /// (--zipf-theta). Population and the resize time series always run
    /// (unless --no-growth).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub workloads: Option<Vec<Workload>>,
    /// Hash function of the dlht systems: rapidhash (seeded) or modulo (the
    /// identity: the bin is the key's low bits; fine for random keys).
    #[arg(long, value_enum, default_value_t = hashing::HashChoice::Rapidhash)]
    pub hash: hashing::HashChoice,
    /// Give each peer its own default hasher (SipHash for dashmap, scc,
    /// papaya, flurry and std) instead of dlht's (--hash). By default every
    /// system hashes with dlht's hasher, so the hash function cannot make
    /// the difference; this is the second, labelled comparison.
    #[arg(long)]
    pub peer_default_hashers: bool,
    /// Peers use dlht's hasher: the default now (kept so that older command
    /// lines still run).
    #[arg(long, hide = true, conflicts_with = "peer_default_hashers")]
    pub peer_hasher: bool,
    /// Start the prepopulated tables small, so that they resize while being
    /// populated (default: pre-sized, as the paper's runs with resizing off).
    #[arg(long)]
    pub resizing: bool,
    /// Seed of the key streams (the same for every system).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Skew: share of accesses that go to the hot keys.
    #[arg(long, default_value_t = 0.9, value_parser = share)]
    pub hot_share: f64,
    /// Skew: number of hot keys.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub hot_keys: u64,
    /// Zipf: the exponent (YCSB uses 0.99).
    #[arg(long, default_value_t = 0.99, value_parser = theta)]
    pub zipf_theta: f64,
    /// Population: insert 2^N fresh keys into a table sized for 1024
    /// (default 22; --quick: 20).
    #[arg(long, value_parser = clap::value_parser!(u32).range(10..=32))]
    pub population_log2: Option<u32>,
    /// Skip Population and the resize time series.
    #[arg(long)]
    pub no_growth: bool,
    /// Folder for the CSV, JSON and plot files (default:
    /// dlht-results/run-<unix time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny sizes and short measurements (about 20 s): what CI runs.
    #[arg(long)]
    pub smoke: bool,
    /// A first look in about two minutes on two cores: dlht, dlht-batch,
    /// papaya and scc against the memory limit, on 1 thread and all cores,
    /// gets, insert+remove and put-heavy, 2 rounds of 0.25 s, a
    /// memory-resident table of 2^24 keys; no resize time series and short
    /// latency histograms. Any option given as well wins over the preset.
    #[arg(long, conflicts_with = "smoke")]
    pub quick: bool,
}

/// The systems of `--quick`: the dlht systems and the two strongest peers
/// that build without C++.
const QUICK_SYSTEMS: [&str; 4] = ["dlht", "dlht-batch", "papaya", "scc"];
/// The workloads of `--quick`.
const QUICK_WORKLOADS: [Workload; 3] = [Workload::Get, Workload::Insdel, Workload::Putheavy];
/// The workloads of the full run.
const FULL_WORKLOADS: [Workload; 5] =
    [Workload::Get, Workload::Insdel, Workload::Putheavy, Workload::Skew, Workload::Zipf];

/// What a run measures once the presets are applied: the full run's
/// defaults, `--quick`'s or `--smoke`'s, each overridden by an option
/// given on the command line (`--smoke` also caps the sizes it is given).
struct Settings {
    keys_log2: u32,
    seconds: f64,
    rounds: u32,
    population_log2: u32,
    threads: Vec<usize>,
    systems: Vec<String>,
    workloads: Vec<Workload>,
    /// Time per latency histogram.
    latency: Duration,
    /// Accesses in the shared Zipf trace.
    trace_len: usize,
    /// The resize time series runs (it needs Population: not --no-growth).
    resize_series: bool,
}

impl Settings {
    fn of(a: &CompareArgs) -> Settings {
        let quick = a.quick;
        let pick = |given: Option<u32>, full: u32, q: u32| given.unwrap_or(if quick { q } else { full });
        let mut s = Settings {
            keys_log2: pick(a.keys_log2, 25, 24),
            seconds: a.seconds.unwrap_or(if quick { 0.25 } else { 0.5 }),
            rounds: pick(a.rounds, 5, 2),
            population_log2: pick(a.population_log2, 22, 20),
            threads: match &a.threads {
                Some(t) => t.iter().map(|&t| t as usize).collect(),
                None if quick => {
                    let all = *default_threads().last().expect("at least one thread count");
                    if all == 1 {
                        vec![1]
                    } else {
                        vec![1, all]
                    }
                }
                None => default_threads(),
            },
            systems: a.systems.clone().unwrap_or_else(|| {
                let names: &[&str] = if quick { &QUICK_SYSTEMS } else { systems::DEFAULT };
                names.iter().map(|s| s.to_string()).collect()
            }),
            workloads: a.workloads.clone().unwrap_or_else(|| {
                if quick {
                    QUICK_WORKLOADS.to_vec()
                } else {
                    FULL_WORKLOADS.to_vec()
                }
            }),
            latency: Duration::from_secs_f64(if quick { 0.05 } else { 0.25 }),
            trace_len: if quick { 1 << 20 } else { 1 << 22 },
            resize_series: !a.no_growth && !quick,
        };
        if a.smoke {
            s.keys_log2 = s.keys_log2.min(16);
            s.seconds = s.seconds.min(0.03);
            s.population_log2 = s.population_log2.min(14);
            s.rounds = s.rounds.min(2);
            s.latency = Duration::from_secs_f64(0.01);
            s.trace_len = 1 << 16;
        }
        s
    }

    /// What `--quick` leaves out of the full run, given what it runs.
    fn left_out(&self) -> String {
        let mut out = Vec::new();
        let systems: Vec<&str> =
            systems::DEFAULT.iter().copied().filter(|d| !self.systems.iter().any(|s| s == d)).collect();
        if !systems.is_empty() {
            out.push(format!("the systems {}", systems.join(", ")));
        }
        let workloads: Vec<String> =
            FULL_WORKLOADS.iter().filter(|w| !self.workloads.contains(w)).map(|w| w.name()).collect();
        if !workloads.is_empty() {
            out.push(format!("the workloads {}", workloads.join(", ")));
        }
        let threads: Vec<String> =
            default_threads().iter().filter(|t| !self.threads.contains(t)).map(|t| t.to_string()).collect();
        if !threads.is_empty() {
            out.push(format!("{} thread(s)", threads.join(", ")));
        }
        if !self.resize_series {
            out.push("the resize time series".into());
        }
        out.push(format!(
            "the long latency histograms ({} s each here, 0.25 s in the full run)",
            self.latency.as_secs_f64()
        ));
        out.join("; ")
    }
}

/// 1, 2, 4, … up to the core count, and the core count.
pub fn default_threads() -> Vec<usize> {
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut t: Vec<usize> = (0..).map(|i| 1 << i).take_while(|&x| x <= n).collect();
    if *t.last().unwrap() != n {
        t.push(n);
    }
    t
}

/// A system under test, its tables populated, behind an object so that
/// every system can be held at once and the rounds interleave them.
trait Contender {
    fn name(&self) -> &'static str;
    fn concurrent(&self) -> bool;
    fn note(&self) -> &'static str;
    /// One measurement on the memory-resident table, or on the twin.
    fn measure(
        &self,
        w: Workload,
        threads: usize,
        p: &Params,
        d: &Draw<'_>,
        twin: bool,
    ) -> Result<f64, String>;
    fn population(&self, n: u64, threads: usize, batch: usize) -> Result<f64, String>;
    /// The paper's InsDel on an empty table sized for `n` keys.
    fn insdel_empty(&self, n: u64, threads: usize, p: &Params, d: &Draw<'_>) -> Result<f64, String>;
    fn latency(&self, keys: u64, dur: Duration, seed: u64) -> Result<Vec<Latency>, String>;
    /// Keys per second (millions) of the prepopulation that filled the
    /// memory-resident table, if this system filled its own (one timed
    /// pass, not interleaved with the others).
    fn prepopulated(&self) -> Option<f64>;
}

/// A system's memory-resident table and its cache-resident twin.
struct Held<T: Table> {
    big: T,
    twin: T,
    /// A result check failed: the table is suspect, later steps are skipped.
    failed: Cell<bool>,
    /// Prepopulation rate, M keys/s (None for a view of a shared table).
    prepopulated: Option<f64>,
}

/// A dlht map and its twin, shared by the unbatched and batched systems.
type SharedDlht = Option<(Arc<DlhtMap>, Arc<DlhtMap>)>;

impl<T: Table> Held<T> {
    fn new(
        cap: usize,
        keys: u64,
        threads: usize,
        batch: usize,
        shared: &mut SharedDlht,
        bar: &Progress,
    ) -> Self {
        if let Some((big, twin)) = shared {
            if let (Some(big), Some(twin)) = (T::view_of(big), T::view_of(twin)) {
                bar.inc(keys);
                return Held { big, twin, failed: Cell::new(false), prepopulated: None };
            }
        }
        let start = std::time::Instant::now();
        let big = T::with_capacity(cap);
        workloads::populate(&big, keys, threads, batch, bar);
        let prepopulated = Some(keys as f64 / start.elapsed().as_secs_f64() / 1e6);
        let twin = T::with_capacity(TWIN_KEYS as usize);
        workloads::populate(&twin, TWIN_KEYS, 1, batch, &Progress::hidden());
        if let (None, Some(b), Some(t)) = (shared.as_ref(), big.dlht_map(), twin.dlht_map()) {
            *shared = Some((b, t));
        }
        Held { big, twin, failed: Cell::new(false), prepopulated }
    }

    fn checked<R>(&self, f: impl FnOnce() -> R) -> Result<R, String> {
        checked(&self.failed, f)
    }
}

/// Run `f`, turning a failed result check (a panic) into an error that
/// also sets `failed`; once it is set, skip.
fn checked<R>(failed: &Cell<bool>, f: impl FnOnce() -> R) -> Result<R, String> {
    if failed.get() {
        return Err("skipped after a failed check".into());
    }
    catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        failed.set(true);
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a result check failed".into())
    })
}

impl<T: Table> Contender for Held<T> {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn concurrent(&self) -> bool {
        T::CONCURRENT
    }
    fn note(&self) -> &'static str {
        T::NOTE
    }
    fn measure(
        &self,
        w: Workload,
        threads: usize,
        p: &Params,
        d: &Draw<'_>,
        twin: bool,
    ) -> Result<f64, String> {
        let table = if twin { &self.twin } else { &self.big };
        self.checked(|| workloads::measure(table, w, threads, p, d))
    }
    fn population(&self, n: u64, threads: usize, batch: usize) -> Result<f64, String> {
        self.checked(|| workloads::population::<T>(n, threads, batch))
    }
    fn insdel_empty(&self, n: u64, threads: usize, p: &Params, d: &Draw<'_>) -> Result<f64, String> {
        self.checked(|| workloads::insdel_empty::<T>(n, threads, p, d.round, d.zipf))
    }
    fn latency(&self, keys: u64, dur: Duration, seed: u64) -> Result<Vec<Latency>, String> {
        self.checked(|| workloads::latency(&self.big, keys, dur, seed))
    }
    fn prepopulated(&self) -> Option<f64> {
        self.prepopulated
    }
}

/// Memory kept free beside a group's tables (the population step's table,
/// freed memory the allocator keeps, the kernel's own needs): a fifth of
/// the machine, at least 4 GiB. A first version kept 2 GiB and a 1.25x
/// margin and was killed for memory on a 23 GiB VM.
fn group_reserve() -> u64 {
    (meminfo("MemTotal:").unwrap_or(0) / 5).max(4 << 30)
}

/// Rough bytes a system's prepopulated table of `keys` keys takes
/// (measured at 2^25 keys on x86-64, with a margin): only to pack the
/// peers into groups that fit in memory.
fn estimated_bytes(system: &str, keys: u64) -> u64 {
    let per_key: u64 = match system {
        "papaya" => 52,
        "dashmap" | "std-rwlock" | "hashbrown-1t" => 38,
        "scc" => 40,
        "flurry" => 160,
        "leapfrog" => 80,
        _ => 70,
    };
    keys * per_key * 3 / 2
}

/// A "Name:  N kB" field of a /proc file in bytes, if there is one.
pub(crate) fn proc_bytes(file: &str, field: &str) -> Option<u64> {
    let info = std::fs::read_to_string(file).ok()?;
    let line = info.lines().find(|l| l.starts_with(field))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? << 10)
}

/// A field of /proc/meminfo in bytes (e.g. "MemAvailable:"), if there is one.
fn meminfo(field: &str) -> Option<u64> {
    proc_bytes("/proc/meminfo", field)
}

/// This process's resident memory in GiB (for the report).
pub(crate) fn rss_gib() -> f64 {
    proc_bytes("/proc/self/status", "VmRSS:").unwrap_or(0) as f64 / (1u64 << 30) as f64
}

/// "1 thread", "2 threads": for the progress lines.
fn threads_of(n: usize) -> String {
    format!("{n} thread{}", if n == 1 { "" } else { "s" })
}

/// What a comparison measures, shared by its groups.
struct Plan<'a> {
    threads: &'a [usize],
    workloads: &'a [Workload],
    batch_sizes: &'a [usize],
    params: &'a Params,
    zipf: &'a ZipfTrace,
    arr: &'a ZeroedArray<Line>,
    twin_arr: &'a ZeroedArray<Line>,
    /// Keys of the Population step, if it runs.
    population: Option<u64>,
    /// Time per latency histogram.
    latency: Duration,
}

/// What a measurement's cache-resident twin runs.
enum Twin {
    /// The limit probe over the L2-sized array.
    Probe(Probe),
    /// Member `.0` on its twin table, with this workload and parameters.
    Table(usize, Workload, Params),
}

/// What the groups produce.
#[derive(Default)]
struct Outcome {
    measurements: Vec<Measurement>,
    latency: Vec<SystemLatency>,
    notes: Vec<(String, String)>,
}

impl Plan<'_> {
    /// Measure one group: per thread count, the two limit probes, then
    /// every member on every workload; then Population; all in ABBA rounds.
    /// Then each figure's cache-resident twin and the latency histograms,
    /// once per system (`anchors_too`: also for the dlht systems, which
    /// every group holds). `grouped`: the peers are in several groups.
    fn run_group(
        &self,
        group: usize,
        grouped: bool,
        members: &[&dyn Contender],
        anchors_too: bool,
        out: &mut Outcome,
    ) {
        let p = self.params;
        let dur = Duration::from_secs_f64(p.seconds);
        let draw = |round, keys| Draw { keys, round, zipf: self.zipf };
        let first = out.measurements.len();
        // What each measurement's cache-resident twin runs.
        let mut twins: Vec<Option<Twin>> = Vec::new();
        let mut steps: Vec<Step<'_>> = Vec::new();
        let mut record = |system: String, workload: String, threads: usize, twin, step| {
            out.measurements.push(Measurement {
                system,
                workload,
                threads,
                group,
                rounds: Vec::new(),
                twin: None,
            });
            twins.push(twin);
            steps.push(step);
        };
        for &t in self.threads {
            for (name, probe) in [(LIMIT_PLAIN, Probe::Plain), (LIMIT_PREFETCHED, Probe::Prefetched)] {
                let arr = self.arr;
                let step = Box::new(move |r| Ok(limit::measure(arr, probe, t, dur, 0x11 + r)));
                record(name.into(), "lines".into(), t, Some(Twin::Probe(probe)), step);
            }
            {
                // The key stream alone, as an unbatched system's get loop draws it.
                let (draw, pb) = (&draw, Params { batch: self.batch_sizes[0], ..p.clone() });
                let step = Box::new(move |r| {
                    Ok(workloads::measure(&KeyStreamOnly, Workload::Get, t, &pb, &draw(r, pb.keys)))
                });
                record(KEY_STREAM.into(), "get".into(), t, None, step);
            }
            for &w in self.workloads {
                for (ci, &c) in members.iter().enumerate().filter(|(_, c)| c.concurrent() || t == 1) {
                    let sizes =
                        if systems::batches(c.name()) { self.batch_sizes } else { &self.batch_sizes[..1] };
                    for &b in sizes {
                        let pb = Params { batch: b, ..p.clone() };
                        let name = match sizes.len() {
                            1 => c.name().to_string(),
                            _ => format!("{}/{b}", c.name()),
                        };
                        let draw = &draw;
                        let twin = Some(Twin::Table(ci, w, pb.clone()));
                        let step = Box::new(move |r| c.measure(w, t, &pb, &draw(r, pb.keys), false));
                        record(name, w.name(), t, twin, step);
                    }
                }
            }
        }
        // The steps that build their own table, of the Population size (its
        // memory is kept free beside the group's tables): Population, and
        // the paper's InsDel on an empty table. Every thread count.
        if let Some(n) = self.population {
            for &t in self.threads {
                for &c in members.iter().filter(|c| c.concurrent() || t == 1) {
                    let b = p.batch;
                    let step = Box::new(move |_| c.population(n, t, b));
                    record(c.name().into(), "population".into(), t, None, step);
                }
            }
            for &t in self.threads {
                for &c in members.iter().filter(|c| c.concurrent() || t == 1) {
                    let draw = &draw;
                    let step = Box::new(move |r| c.insdel_empty(n, t, p, &draw(r, n)));
                    record(c.name().into(), "insdel-empty".into(), t, None, step);
                }
            }
        }
        let overall = Progress::new("Measuring", (steps.len() * p.rounds) as u64, "steps")
            .with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}");
        let in_group = if grouped { format!("group {}, ", group + 1) } else { String::new() };
        let results = harness::rounds(&mut steps, p.rounds, |i, r| {
            let m = &out.measurements[first + i];
            overall.set_message(format!(
                "{in_group}round {}/{}: {} {} on {}",
                r + 1,
                p.rounds,
                m.system,
                m.workload,
                threads_of(m.threads)
            ));
            overall.inc(1);
        });
        drop(steps);
        overall.finish_and_clear();
        for (m, rs) in out.measurements[first..].iter_mut().zip(results) {
            for r in rs {
                if let Err(e) = &r {
                    let note =
                        format!("FAILED its result check in {} on {} threads: {e}", m.workload, m.threads);
                    if !out.notes.iter().any(|(s, n)| s == &m.system && n == &note) {
                        out.notes.push((m.system.clone(), note));
                    }
                }
                m.rounds.push(r.ok());
            }
        }
        // The cache-resident twins, once per system.
        let is_anchor = |m: &Measurement| m.system.starts_with("dlht") || m.system.starts_with("limit");
        let due = out.measurements[first..]
            .iter()
            .zip(&twins)
            .filter(|(m, t)| t.is_some() && (anchors_too || !is_anchor(m)));
        let bar = Progress::new("Twins", due.count() as u64, "measurements")
            .with_template("  cache-resident twins [{bar:30}] {pos}/{len} {msg}");
        for (m, twin) in out.measurements[first..].iter_mut().zip(&twins) {
            if is_anchor(m) && !anchors_too {
                continue;
            }
            if twin.is_some() {
                bar.set_message(format!("{} {} on {}", m.system, m.workload, threads_of(m.threads)));
                bar.inc(1);
            }
            m.twin = match twin {
                Some(Twin::Probe(probe)) => {
                    Some(limit::measure(self.twin_arr, *probe, m.threads, dur, 0x7717))
                }
                Some(Twin::Table(ci, w, pb)) => {
                    members[*ci].measure(*w, m.threads, pb, &draw(99, TWIN_KEYS), true).ok()
                }
                None => None,
            };
        }
        drop(bar);
        let latency: Vec<&&dyn Contender> =
            members.iter().filter(|c| anchors_too || !c.name().starts_with("dlht")).collect();
        let bar = Progress::new("Latency", latency.len() as u64, "systems")
            .with_template("  latency [{bar:30}] {pos}/{len} {msg}");
        for &c in latency {
            bar.set_message(format!(
                "{}: one thread, gets then inserts, {} s each",
                c.name(),
                self.latency.as_secs_f64()
            ));
            bar.inc(1);
            match c.latency(p.keys, self.latency, p.seed) {
                Ok(ls) => out
                    .latency
                    .extend(ls.into_iter().map(|l| SystemLatency { system: c.name().into(), latency: l })),
                Err(e) => out.notes.push((c.name().into(), format!("FAILED its latency run: {e}"))),
            }
        }
    }
}

/// Drop `tables` as a phase of its own: freeing tables of 2^25 keys entry
/// by entry (flurry, papaya) takes a minute, and a piped run still talks.
fn free_tables(tables: Vec<Box<dyn Contender>>) {
    let freeing = Progress::new("Freeing", tables.len() as u64, "tables");
    for c in tables {
        freeing.set_message(format!("the table of {}", c.name()));
        drop(c);
        freeing.inc(1);
    }
}

/// Run the comparison; the run and the folder its files went to.
pub fn run(a: CompareArgs) -> (Run, PathBuf) {
    let set = Settings::of(&a);
    hashing::set_hash(a.hash);
    hashing::set_peer_hasher(!a.peer_default_hashers);
    let threads = set.threads.clone();
    let max_t = *threads.iter().max().expect("clap requires at least one thread count");
    let mut names = set.systems.clone();
    names.dedup();
    // C++ peers this build lacks: a note instead of a table.
    let skipped = cpp::take_unbuilt(&mut names);
    let batch_sizes: Vec<usize> =
        a.batch.clone().unwrap_or_else(|| vec![32]).iter().map(|&b| b as usize).collect();
    let workloads = set.workloads.clone();
    let params = Params {
        keys: 1 << set.keys_log2,
        batch: batch_sizes[0],
        seconds: set.seconds,
        seed: a.seed,
        hot_share: a.hot_share,
        hot_keys: a.hot_keys,
        zipf_theta: a.zipf_theta,
        rounds: set.rounds as usize,
        peer_hasher: !a.peer_default_hashers,
    };
    let machine = Machine::describe();
    let limit_bytes = limit::index_bytes(params.keys as usize);
    let memory_resident = limit_bytes >= 4 * machine.l3_bytes().unwrap_or(32 << 20);
    if a.quick {
        println!("# dlht-bench compare, quick preset (--quick, a first look): {}", machine.line());
        println!(
            "# quick preset: systems {}; workloads {}; leaves out {}",
            names.join(", "),
            workloads.iter().map(|w| w.name()).collect::<Vec<_>>().join(", "),
            set.left_out()
        );
    } else {
        println!("# dlht-bench compare: {}", machine.line());
    }
    println!(
        "# 2^{} keys (dlht index {} MiB), {} s per measurement, {} interleaved rounds, batch {:?}, threads {:?}, dlht hash {:?}{}, seed {}",
        set.keys_log2,
        limit_bytes >> 20,
        params.seconds,
        params.rounds,
        batch_sizes,
        threads,
        a.hash,
        if a.peer_default_hashers { " (peers: their own default hashers)" } else { " (peers too)" },
        params.seed
    );
    for (system, note) in &skipped {
        println!("# {system}: {note}");
    }
    let preparing = Progress::phase(
        "Preparing",
        format!("the Zipf trace and the limit probe's array of {} MiB", limit_bytes >> 20),
    );
    let zipf =
        ZipfTrace::new(params.keys, params.zipf_theta, set.trace_len, params.seed).unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(2)
        });

    // The limit probe's array first: every group measures against it.
    let arr = limit::line_array(limit_bytes);
    let twin_arr = limit::line_array(TWIN_LIMIT_BYTES);
    drop(preparing);
    let plan = Plan {
        threads: &threads,
        workloads: &workloads,
        batch_sizes: &batch_sizes,
        params: &params,
        zipf: &zipf,
        arr: &arr,
        twin_arr: &twin_arr,
        population: (!a.no_growth).then_some(1u64 << set.population_log2),
        latency: set.latency,
    };

    // The dlht systems are in every group; the peers are packed into
    // groups whose tables fit in memory together, built, measured in
    // interleaved rounds with the dlht systems and the limit, and dropped.
    let populate_t = if a.resizing { 1024 } else { params.keys as usize };
    let build = |name: &str, shared: &mut SharedDlht| -> Box<dyn Contender> {
        let pop = Progress::new("Populating", params.keys, "keys")
            .with_template("  populating {msg} [{bar:30}] {pos}/{len} keys");
        pop.set_message(format!("{name} on {}", threads_of(max_t)));
        let c = with_system!(name, T => Box::new(Held::<T>::new(
            populate_t, params.keys, max_t, 16, shared, &pop
        )) as Box<dyn Contender>);
        pop.finish_and_clear();
        c
    };
    let mut shared: SharedDlht = None;
    let (anchor_names, peer_names): (Vec<&String>, Vec<&String>) =
        names.iter().partition(|n| n.starts_with("dlht"));
    let anchors: Vec<Box<dyn Contender>> = anchor_names.iter().map(|n| build(n, &mut shared)).collect();
    let mut out = Outcome { notes: skipped, ..Outcome::default() };
    out.notes
        .extend(anchors.iter().filter(|c| !c.note().is_empty()).map(|c| (c.name().into(), c.note().into())));
    // The prepopulation, timed once per table (the paper's presized
    // prepopulation), as a note: one pass, not interleaved.
    let prepopulation = |c: &dyn Contender| {
        let mops = c.prepopulated()?;
        let how = if a.resizing { "from a table sized for 1024" } else { "presized" };
        let note = format!(
            "prepopulation {how}: 2^{} keys at {mops:.1} M keys/s on {max_t} threads (one pass, not interleaved)",
            set.keys_log2
        );
        Some((c.name().to_string(), note))
    };
    out.notes.extend(anchors.iter().filter_map(|c| prepopulation(c.as_ref())));
    let mut pending = peer_names.into_iter().peekable();
    let mut group = 0;
    loop {
        let mut peers: Vec<Box<dyn Contender>> = Vec::new();
        while let Some(name) = pending.peek() {
            let need = estimated_bytes(name, params.keys) + group_reserve();
            if !peers.is_empty() && meminfo("MemAvailable:").is_some_and(|avail| avail < need) {
                break;
            }
            peers.push(build(name, &mut shared));
            pending.next();
        }
        let more = pending.peek().is_some();
        if group > 0 || more {
            println!(
                "# group {}: dlht systems with {} (tables that fit in memory together; {:.1} GiB resident)",
                group + 1,
                peers.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
                rss_gib()
            );
        }
        out.notes.extend(
            peers.iter().filter(|c| !c.note().is_empty()).map(|c| (c.name().into(), c.note().into())),
        );
        out.notes.extend(peers.iter().filter_map(|c| prepopulation(c.as_ref())));
        let members: Vec<&dyn Contender> = anchors.iter().chain(&peers).map(|c| c.as_ref()).collect();
        plan.run_group(group, group > 0 || more, &members, group == 0, &mut out);
        drop(members);
        free_tables(peers);
        group += 1;
        if !more {
            break;
        }
    }
    free_tables(anchors);
    drop((arr, twin_arr));
    let Outcome { measurements, mut latency, mut notes } = out;

    // The resize time series, one system at a time.
    let mut resize = Vec::new();
    if set.resize_series {
        let bar = Progress::new("Resizing", names.len() as u64, "systems")
            .with_template("  resize time series [{bar:30}] {pos}/{len} {msg}");
        for name in &names {
            bar.set_message(format!("{name}: gets sampled while the table grows"));
            bar.inc(1);
            with_system!(name.as_str(), T => {
                if T::CONCURRENT {
                    let half = (max_t / 2).max(1);
                    let (prepop, grow) = if a.smoke { (1 << 12, 1 << 15) } else { (1 << 18, 1 << 22) };
                    let every = Duration::from_millis(if a.smoke { 5 } else { 50 });
                    let series = || workloads::resize_series::<T>(prepop, grow, half, half, every);
                    match checked(&Cell::new(false), series) {
                        Ok(r) => {
                            latency.extend(r.latency.into_iter().map(|l| SystemLatency { system: T::NAME.into(), latency: l }));
                            resize.push(Series { system: T::NAME.into(), samples: r.samples });
                        }
                        Err(e) => notes.push((T::NAME.into(), format!("FAILED its resize series: {e}"))),
                    }
                }
            });
        }
    }

    let mut run = Run {
        machine,
        params,
        limit_bytes,
        memory_resident,
        measurements,
        summary: Vec::new(),
        latency,
        resize,
        notes,
    };
    run.summarise();
    run.print();
    let dir =
        a.out.clone().unwrap_or_else(|| PathBuf::from(format!("dlht-results/run-{}", run.machine.date_unix)));
    if let Err(e) = run.write(&dir) {
        eprintln!("could not write results to {}: {e}", dir.display());
    }
    let drawing = Progress::phase("Writing", format!("results and plots to {}", dir.display()));
    let plots = crate::compare::plot::all(&run, &dir).unwrap_or_else(|e| {
        eprintln!("could not draw plots: {e}");
        Vec::new()
    });
    drop(drawing);
    println!(
        "# results: {} (results.csv with every round, summary.csv, latency.csv, resize.csv, results.json, {} plot files)",
        dir.display(),
        plots.len()
    );
    (run, dir)
}
