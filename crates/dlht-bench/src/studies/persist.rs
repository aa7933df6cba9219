//! The persistent map against the in-memory one (issue 25): "process mode
//! within 10% of the in-memory map on batched get, insdel and population,
//! measured in interleaved rounds", and the time to the first get after
//! `kill -9` in the middle of a grow.
//!
//! Throughput: each round builds both tables anew, presized for `--keys`
//! and populated (untimed): a `Map<u64, u64>` and a `FileMap<u64, u64>`
//! made in a fresh, empty directory (deleted after the round). Then, at
//! each thread count, each workload runs on one and then the other, the
//! order alternating from round to round (A B, then B A), on the same key
//! streams: batched gets (`get_many`, every value checked), insert of a
//! fresh key then its remove (one call each, and in batches through
//! `batch`), and population (insert `--keys` fresh keys into a table made
//! small, so that it grows; a FileMap in a fresh directory each time).
//! Ratios FileMap ÷ Map are taken within a round; their median decides
//! the verdict. Beside them: resident bytes per key (and, for the
//! FileMap, its files' size on disk), the share of the table on 2 MiB
//! pages, and page faults per operation, which show where a gap comes
//! from.
//!
//! `--recovery`: this binary runs itself as a child that fills a FileMap,
//! says "growing" and grows it; the parent kills it (SIGKILL) 50–500 ms
//! later, reopens the map, times the open and the first get, and checks
//! every key (untimed).

use crate::compare::systems::{self, Concurrent, Table};
use crate::compare::workloads::{self, key, Draw, Params, Workload};
use crate::harness::keys::ZipfTrace;
use crate::harness::machine::Machine;
use crate::harness::{self, Spread};
use crate::studies::write;
use core::hash::BuildHasher;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{BufRead, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keys of the cache-resident twin tables (a few hundred KiB).
const TWIN_KEYS: u64 = 1 << 14;
/// The target: FileMap at least this share of Map's throughput.
const TARGET: f64 = 0.9;

/// Parses a power of two of keys: `2^N` or the number itself.
pub(super) fn keys_arg(s: &str) -> Result<u64, String> {
    let n = match s.trim().strip_prefix("2^") {
        Some(e) => e.parse::<u32>().ok().filter(|&e| e < 40).map(|e| 1u64 << e),
        None => s.trim().parse::<u64>().ok(),
    };
    match n {
        Some(n) if n.is_power_of_two() && (1 << 10..=1 << 32).contains(&n) => Ok(n),
        _ => Err(format!("'{s}' is not a power of two of keys from 2^10 to 2^32 (write 2^N or the number)")),
    }
}

/// Options of the persistence study.
#[derive(clap::Args, Clone, Debug)]
pub struct PersistArgs {
    /// Keys in the tables, a power of two: 2^N or the number (default 2^25,
    /// a 2 GiB index, far beyond the L3 cache; both tables are held at
    /// once, about 5 GiB at 2^25). With --recovery: keys the child inserts
    /// before it grows the map (default 2^25 too).
    #[arg(long, value_parser = keys_arg)]
    pub keys: Option<u64>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Vec<u16>,
    /// Interleaved rounds (each builds both tables anew; with --recovery,
    /// each kills and recovers a freshly filled map).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0, value_parser = crate::compare::positive_seconds)]
    pub secs: f64,
    /// Requests per batch: keys per get_many, insert+remove pairs per batch.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batch: u32,
    /// Folder the FileMaps' directories go in (default: a new folder under
    /// the system's temp dir). Each map's directory is deleted when the map
    /// is done with; the folder too, if the study made it.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the key streams (the same for both maps).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Folder for persist.csv and persist.json (recovery.csv and
    /// recovery.json with --recovery).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny tables (2^14 keys; 2^16 with --recovery), one round, short
    /// measurements.
    #[arg(long)]
    pub smoke: bool,
    /// Workloads to run, comma-separated (default: all): get-batch,
    /// insdel, insdel-batch, population. With population alone, the
    /// presized tables the others share are not built.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(WORKLOADS))]
    pub workloads: Vec<String>,
    /// Instead: recovery time after kill -9 in the middle of a grow.
    #[arg(long)]
    pub recovery: bool,
    /// With --recovery: rounds alternate a cold open — after the kill,
    /// `sync`, then `3` written to /proc/sys/vm/drop_caches (root only), so
    /// the map's files are read from disk — and a warm one (the killed
    /// process's pages still cached), cold first. Use an even --rounds.
    #[arg(long, requires = "recovery")]
    pub drop_caches: bool,
    /// With --recovery: kill the child 50–500 ms after its grow has
    /// finished, not during it (an open then resumes nothing).
    #[arg(long, requires = "recovery")]
    pub after_grow: bool,
    /// Instead: the cost of sync mode. Insert+remove pairs on a FileMap
    /// with `Durability::Sync { every }` for each interval given (ms;
    /// 0 = a sync per `durable()` call, here one after every batch of
    /// --batch pairs, whose latency is reported), against process mode, in
    /// interleaved rounds. E.g. `--sync-ms 0,1,10,100`.
    #[arg(long, value_delimiter = ',')]
    pub sync_ms: Vec<u64>,
    /// The --recovery child's job: fill the map in --dir, print "growing",
    /// grow it, wait to be killed.
    #[arg(long, hide = true)]
    pub child: bool,
}

// ---------------------------------------------------------------------
// The two maps as the workloads use them.

/// What tells the two maps apart: their hasher type.
trait Kind: BuildHasher + Sized + Send + Sync + 'static {
    /// Name in reports, one call per request.
    const NAME: &'static str;
    /// Name in reports, batched.
    const BATCHED: &'static str;
    /// An in-memory map presized for `n` keys (the FileMap is opened in a
    /// directory instead: see [`open_file`]).
    fn with_capacity(n: usize) -> dlht::Map<u64, u64, Self>;
}

impl Kind for dlht::DefaultHashBuilder {
    const NAME: &'static str = "map";
    const BATCHED: &'static str = "map-batch";
    fn with_capacity(n: usize) -> dlht::Map<u64, u64, Self> {
        dlht::Map::with_capacity(n)
    }
}

impl Kind for dlht::FileHasher {
    const NAME: &'static str = "filemap";
    const BATCHED: &'static str = "filemap-batch";
    fn with_capacity(_: usize) -> dlht::Map<u64, u64, Self> {
        unreachable!(
            "a FileMap is opened in a directory (persist::open_file); this study never asks otherwise"
        )
    }
}

/// A map of either kind as a workload [`Table`]: one call per request, or
/// (`BATCHED`) gets through `get_many` and inserts and removes through
/// `batch`. Views of one map share it.
struct Sys<S: Kind, const BATCHED: bool>(Shared<S>);

/// Run the `n` requests `fill` writes through `m.batch` (the comparison's
/// per-thread buffers, [`systems::batch_of`]); the successes.
#[inline(always)]
fn batch_of<S: Kind>(
    m: &dlht::Map<u64, u64, S>,
    n: usize,
    fill: impl FnOnce(&mut [dlht::Request<u64, u64>]),
) -> usize {
    systems::batch_of(n, fill, |reqs, out| {
        m.batch(reqs, out, dlht::StopOn::Never).unwrap_or_else(|e| panic!("a batch failed: {e}"))
    })
}

impl<S: Kind, const BATCHED: bool> Table for Sys<S, BATCHED> {
    const NAME: &'static str = if BATCHED { S::BATCHED } else { S::NAME };
    type Sharing = Concurrent;
    fn with_capacity(n: usize) -> Self {
        Sys(Arc::new(S::with_capacity(n)))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.get(&k)
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        self.0.insert(k, v).is_ok()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.remove(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.put(k, v).is_some()
    }
    #[inline]
    fn get_batch(&self, keys: &[u64], out: &mut [Option<u64>]) {
        if BATCHED {
            self.0.get_many(keys, out).expect("buffers of equal length");
        } else {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.0.get(k);
            }
        }
    }
    #[inline]
    fn insdel_batch(&self, keys: &[u64]) -> usize {
        if !BATCHED {
            return keys.iter().map(|&k| self.insert(k, k) as usize + self.remove(k) as usize).sum();
        }
        batch_of(&self.0, 2 * keys.len(), |reqs| {
            for (i, &k) in keys.iter().enumerate() {
                reqs[2 * i] = dlht::Request::Insert(k, k);
                reqs[2 * i + 1] = dlht::Request::Remove(k);
            }
        })
    }
    #[inline]
    fn insert_batch(&self, keys: &[u64]) -> usize {
        if !BATCHED {
            return keys.iter().map(|&k| self.insert(k, k) as usize).sum();
        }
        batch_of(&self.0, keys.len(), |reqs| {
            for (i, &k) in keys.iter().enumerate() {
                reqs[i] = dlht::Request::Insert(k, k);
            }
        })
    }
}

/// A map of either kind, shared by its views.
type Shared<S> = Arc<dlht::Map<u64, u64, S>>;

/// The in-memory map.
type Mem = dlht::Map<u64, u64>;
/// The persistent map.
type Persistent = dlht::FileMap<u64, u64>;

/// Open (or make) the FileMap in `dir` with room for `capacity` keys.
fn open_file(dir: &Path, capacity: usize) -> Result<Persistent, String> {
    Persistent::open_with(dir, dlht::OpenOptions::new().capacity(capacity))
        .map_err(|e| format!("opening a FileMap in {}: {e:?}", dir.display()))
}

/// Delete a map's directory (it may not exist).
fn remove_dir(dir: &Path) {
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            eprintln!("could not remove {}: {e}", dir.display());
        }
    }
}

/// Run `f`, turning a failed result check (a panic) into an error.
fn checked<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a result check failed".into())
    })
}

// ---------------------------------------------------------------------
// What the process holds, what the files take.

/// Resident memory of this process, in bytes, by kind.
#[derive(Clone, Copy, Default)]
struct Resident {
    /// VmRSS: all of it.
    all: u64,
    anon: u64,
    /// Pages of mapped files (a FileMap's index).
    file: u64,
    /// Anonymous memory on 2 MiB pages plus file pages mapped by 2 MiB
    /// entries (smaps_rollup).
    huge: u64,
}

impl Resident {
    fn now() -> Resident {
        let status = |f| crate::compare::proc_bytes("/proc/self/status", f).unwrap_or(0);
        let rollup = |f| crate::compare::proc_bytes("/proc/self/smaps_rollup", f).unwrap_or(0);
        Resident {
            all: status("VmRSS:"),
            anon: status("RssAnon:"),
            file: status("RssFile:"),
            huge: rollup("AnonHugePages:") + rollup("FilePmdMapped:"),
        }
    }
}

/// Minor and major page faults of this process so far (/proc/self/stat).
fn faults() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: state is the 3rd
    // field of the line, minflt the 10th, majflt the 12th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|w| w.parse().unwrap_or(0)).collect();
    (f.get(7).copied().unwrap_or(0), f.get(9).copied().unwrap_or(0))
}

/// The files of a map's directory: bytes allocated on disk (st_blocks ×
/// 512) and apparent size (st_size); the index files are sparse.
fn disk(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return (0, 0) };
    entries
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .fold((0, 0), |(a, s), m| (a + m.blocks() * 512, s + m.len()))
}

// ---------------------------------------------------------------------
// Measurements.

/// One measurement: throughput and the page faults it took.
#[derive(Clone, Copy, Debug, Serialize)]
struct Sample {
    /// Millions of operations per second (pairs for insdel, inserts for
    /// population, gets for get).
    mops: f64,
    /// Minor page faults per thousand operations.
    minflt_per_kop: f64,
    /// Millions of operations per second of this process's CPU time (user
    /// and system, every thread): what the work cost, whatever else ran on
    /// the machine meanwhile (the kernel's writeback threads are not in it).
    cpu_mops: f64,
}

/// CPU seconds this process has used so far (user + system, all threads:
/// /proc/self/stat's utime and stime, in the kernel's 100 Hz ticks — 10 ms
/// steps, fine for measurements of seconds).
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // After the command's closing parenthesis: utime is the 14th field of
    // the line, stime the 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|w| w.parse().unwrap_or(0)).collect();
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

/// Run `f` (which returns Mops/s), noting the page faults and CPU time it
/// takes; `ops(mops)` gives the operations it did.
fn with_faults(ops: impl FnOnce(f64) -> f64, f: impl FnOnce() -> f64) -> Sample {
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
fn gets<S: Kind>(
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
fn insdel<S: Kind, const B: bool>(
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
fn fill<S: Kind, const B: bool>(
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
                workloads::populate(t, n, threads, batch, &indicatif::ProgressBar::hidden());
                n as f64 / start.elapsed().as_secs_f64() / 1e6
            },
        )
    })
}

/// Keys of `0..n` (by index) missing from `m` or with a wrong value
/// (`value(i)` expected), checked with `get_many` on `threads` threads.
fn verify<S: Kind>(m: &dlht::Map<u64, u64, S>, n: u64, threads: usize, value: fn(u64) -> u64) -> u64 {
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
fn population<S: Kind>(
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

// ---------------------------------------------------------------------
// The throughput study.

/// The two maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Which {
    Map,
    FileMap,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Map => "map",
            Which::FileMap => "filemap",
        }
    }
}

/// The workloads, in the order they run.
const WORKLOADS: [&str; 4] = ["get-batch", "insdel", "insdel-batch", "population"];

/// One measurement of one round.
#[derive(Clone, Debug, Serialize)]
struct Measured {
    workload: &'static str,
    system: Which,
    threads: usize,
    round: u32,
    /// Ran first of the pair in its round.
    first: bool,
    /// None: its result check failed (see `error`).
    mops: Option<f64>,
    minflt_per_kop: Option<f64>,
    /// Millions of operations per CPU-second of the process.
    cpu_mops: Option<f64>,
    error: Option<String>,
}

/// A table's footprint after prepopulation, one per system and round.
#[derive(Clone, Debug, Serialize)]
struct Footprint {
    system: Which,
    round: u32,
    /// Prepopulation (untimed for the study): M keys/s on the most threads.
    prepopulate_mops: f64,
    prepopulate_minflt_per_key: f64,
    /// Resident bytes (VmRSS) the table added, per key.
    rss_per_key: f64,
    anon_per_key: f64,
    file_per_key: f64,
    /// Share of the added resident memory on 2 MiB pages.
    huge_share: f64,
    /// What the map says its index takes (`memory().total()`), per key.
    index_per_key: f64,
    /// FileMap: its files' allocated bytes on disk, per key.
    disk_allocated_per_key: Option<f64>,
    /// FileMap: its files' apparent size, per key.
    disk_apparent_per_key: Option<f64>,
}

/// Median figures and ratios of one workload and thread count.
#[derive(Clone, Debug, Serialize)]
struct Summary {
    workload: &'static str,
    threads: usize,
    map: Option<Spread>,
    filemap: Option<Spread>,
    /// FileMap ÷ Map, per round (rounds where both passed).
    ratios: Vec<f64>,
    median_ratio: Option<f64>,
    /// FileMap ÷ Map in operations per CPU-second, per round.
    cpu_ratios: Vec<f64>,
    median_cpu_ratio: Option<f64>,
    map_minflt_per_kop: Option<f64>,
    filemap_minflt_per_kop: Option<f64>,
}

/// Cache-resident twin gets (2^14 keys), once per system and thread count.
#[derive(Clone, Debug, Serialize)]
struct Twin {
    system: Which,
    threads: usize,
    twin_mops: f64,
    /// Memory-resident median ÷ twin: near 1 means the big table was not
    /// memory-bound (or the twin was not cache-resident).
    resident_over_twin: Option<f64>,
}

/// What the throughput study writes to persist.json.
#[derive(Serialize)]
struct Report<'a> {
    machine: &'a Machine,
    allocator: &'static str,
    keys: u64,
    threads: &'a [usize],
    rounds: u32,
    seconds: f64,
    batch: usize,
    filemap_setup: &'static str,
    target_ratio: f64,
    measured: &'a [Measured],
    footprint: &'a [Footprint],
    summary: &'a [Summary],
    twins: &'a [Twin],
    verdicts: &'a [String],
}

/// How the FileMap of the get and insdel workloads is set up (said in the
/// output).
const FILEMAP_SETUP: &str = "FileMap for get/insdel: made once per round with capacity(keys) in a fresh, empty \
     directory, deleted after the round (not reopened); population: a fresh directory per measurement, default \
     capacity; Durability::Process";

/// Where the study's map directories go, and whether it made the folder.
struct Dirs {
    base: PathBuf,
    made: bool,
}

impl Dirs {
    fn new(dir: Option<&PathBuf>) -> Result<Dirs, String> {
        let base = dir.cloned().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("dlht-bench-persist-{}", std::process::id()))
        });
        let made = !base.exists();
        std::fs::create_dir_all(&base).map_err(|e| format!("creating {}: {e}", base.display()))?;
        Ok(Dirs { base, made })
    }

    /// A map directory `name`, emptied.
    fn fresh(&self, name: &str) -> PathBuf {
        let d = self.base.join(name);
        remove_dir(&d);
        d
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        if self.made {
            remove_dir(&self.base);
        }
    }
}

/// The tables of one round, populated.
struct Round {
    mem: Arc<Mem>,
    file: Arc<Persistent>,
    file_dir: PathBuf,
}

/// Build and prepopulate one system's table; its footprint.
fn build<S: Kind>(
    which: Which,
    make: impl FnOnce() -> Result<dlht::Map<u64, u64, S>, String>,
    p: &Plan,
    round: u32,
    dir: Option<&Path>,
) -> Result<(Shared<S>, Footprint), String> {
    let before = Resident::now();
    let t = Sys::<S, true>(Arc::new(make()?));
    let f = fill(&t, p.keys, p.max_threads, p.batch)?;
    let after = Resident::now();
    let per_key = |a: u64, b: u64| a.saturating_sub(b) as f64 / p.keys as f64;
    let added = after.all.saturating_sub(before.all).max(1);
    let (alloc, apparent) = dir.map(disk).unzip();
    Ok((
        t.0.clone(),
        Footprint {
            system: which,
            round,
            prepopulate_mops: f.mops,
            prepopulate_minflt_per_key: f.minflt_per_kop / 1e3,
            rss_per_key: per_key(after.all, before.all),
            anon_per_key: per_key(after.anon, before.anon),
            file_per_key: per_key(after.file, before.file),
            huge_share: after.huge.saturating_sub(before.huge) as f64 / added as f64,
            index_per_key: t.0.memory().total() as f64 / p.keys as f64,
            disk_allocated_per_key: alloc.map(|a| a as f64 / p.keys as f64),
            disk_apparent_per_key: apparent.map(|a| a as f64 / p.keys as f64),
        },
    ))
}

/// What the throughput rounds need.
struct Plan {
    keys: u64,
    threads: Vec<usize>,
    max_threads: usize,
    dur: Duration,
    batch: usize,
    seed: u64,
}

impl Plan {
    /// InsDel's parameters (the comparison's type).
    fn params(&self) -> Params {
        Params {
            keys: self.keys,
            batch: self.batch,
            seconds: self.dur.as_secs_f64(),
            seed: self.seed,
            hot_share: 0.0,
            hot_keys: 1,
            zipf_theta: 0.99,
            rounds: 1,
            peer_hasher: false,
        }
    }

    /// Seed of a round's key streams (the same for both systems).
    fn seed(&self, round: u32) -> u64 {
        self.seed ^ (round as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F)
    }
}

/// One measurement of `workload` on `which` (population builds its own).
fn measure(
    workload: &str,
    which: Which,
    r: &Round,
    p: &Plan,
    dirs: &Dirs,
    threads: usize,
    round: u32,
) -> Result<Sample, String> {
    let seed = p.seed(round);
    let params = p.params();
    match (workload, which) {
        ("get-batch", Which::Map) => gets(&r.mem, threads, p.dur, p.keys, p.batch, seed),
        ("get-batch", Which::FileMap) => gets(&r.file, threads, p.dur, p.keys, p.batch, seed),
        ("insdel", Which::Map) => insdel(&Sys::<_, false>(r.mem.clone()), threads, &params, round as u64),
        ("insdel", Which::FileMap) => {
            insdel(&Sys::<_, false>(r.file.clone()), threads, &params, round as u64)
        }
        ("insdel-batch", Which::Map) => {
            insdel(&Sys::<_, true>(r.mem.clone()), threads, &params, round as u64)
        }
        ("insdel-batch", Which::FileMap) => {
            insdel(&Sys::<_, true>(r.file.clone()), threads, &params, round as u64)
        }
        ("population", Which::Map) => population(Mem::new(), p.keys, threads, p.batch),
        ("population", Which::FileMap) => {
            let d = dirs.fresh("population");
            let m = Persistent::open(&d).map_err(|e| format!("opening a FileMap in {}: {e:?}", d.display()));
            let s = m.and_then(|m| population(m, p.keys, threads, p.batch));
            remove_dir(&d);
            s
        }
        _ => unreachable!("workload {workload}"),
    }
}

/// The throughput study. True if a result check failed.
fn throughput(a: &PersistArgs, machine: &Machine) -> bool {
    let keys = if a.smoke { 1 << 14 } else { a.keys.unwrap_or(1 << 25) };
    let mut threads: Vec<usize> = a.threads.iter().map(|&t| t as usize).collect();
    threads.dedup();
    let p = Plan {
        keys,
        max_threads: threads.iter().copied().max().unwrap_or(1),
        threads,
        dur: Duration::from_secs_f64(if a.smoke { a.secs.min(0.05) } else { a.secs }),
        batch: a.batch as usize,
        seed: a.seed,
    };
    let rounds = if a.smoke { 1 } else { a.rounds };
    let workloads: Vec<&'static str> = WORKLOADS
        .into_iter()
        .filter(|w| a.workloads.is_empty() || a.workloads.iter().any(|a| a == w))
        .collect();
    // Population builds its own tables: the shared ones only for the others.
    let shared_tables = workloads.iter().any(|&w| w != "population");
    let dirs = match Dirs::new(a.dir.as_ref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return true;
        }
    };
    println!(
        "# 2^{} keys, threads {:?}, {rounds} round(s) of {:.2} s per measurement, batch {}, workloads {}; map \
         directories under {}",
        keys.trailing_zeros(),
        p.threads,
        p.dur.as_secs_f64(),
        p.batch,
        workloads.join(","),
        dirs.base.display()
    );
    println!("# {FILEMAP_SETUP}");
    let mut measured: Vec<Measured> = Vec::new();
    let mut footprint: Vec<Footprint> = Vec::new();
    let mut failed = false;
    for round in 0..rounds {
        let order = if round % 2 == 0 { [Which::Map, Which::FileMap] } else { [Which::FileMap, Which::Map] };
        let file_dir = dirs.fresh(&format!("round-{round}"));
        let (mut mem, mut file) = (None, None);
        if shared_tables {
            eprintln!("# round {}/{rounds}: building and populating both tables (untimed)", round + 1);
        } else {
            // Stand-ins the population workload never touches.
            mem = Some(Arc::new(Mem::new()));
            file = open_file(&file_dir, 0).ok().map(Arc::new);
        }
        for w in order.into_iter().filter(|_| shared_tables) {
            let built = match w {
                Which::Map => {
                    build(w, || Ok(Mem::with_capacity(keys as usize)), &p, round, None).map(|(m, f)| {
                        mem = Some(m);
                        f
                    })
                }
                Which::FileMap => {
                    build(w, || open_file(&file_dir, keys as usize), &p, round, Some(&file_dir)).map(
                        |(m, f)| {
                            file = Some(m);
                            f
                        },
                    )
                }
            };
            match built {
                Ok(f) => footprint.push(f),
                Err(e) => {
                    eprintln!("check failed: {} round {}: prepopulation: {e}", w.name(), round + 1);
                    failed = true;
                }
            }
        }
        let (Some(mem), Some(file)) = (mem, file) else {
            remove_dir(&file_dir);
            continue;
        };
        let r = Round { mem, file, file_dir };
        for &t in &p.threads {
            for &workload in &workloads {
                for (i, w) in order.into_iter().enumerate() {
                    eprintln!("# round {}/{rounds}: {workload} on {t} thread(s): {}", round + 1, w.name());
                    let got = measure(workload, w, &r, &p, &dirs, t, round);
                    if let Err(e) = &got {
                        eprintln!(
                            "check failed: {} {workload} on {t} thread(s), round {}: {e}",
                            w.name(),
                            round + 1
                        );
                        failed = true;
                    }
                    measured.push(Measured {
                        workload,
                        system: w,
                        threads: t,
                        round,
                        first: i == 0,
                        mops: got.as_ref().ok().map(|s| s.mops),
                        minflt_per_kop: got.as_ref().ok().map(|s| s.minflt_per_kop),
                        cpu_mops: got.as_ref().ok().map(|s| s.cpu_mops),
                        error: got.err(),
                    });
                }
            }
        }
        let Round { mem, file, file_dir } = r;
        drop((mem, file));
        remove_dir(&file_dir);
    }
    let summary = summarise(&measured, &p.threads, &workloads);
    let twins = if workloads.contains(&"get-batch") { twins(&p, &dirs, &summary) } else { Vec::new() };
    drop(dirs);
    let verdicts = verdicts(&summary, &workloads);
    print_tables(&summary, &footprint, &twins, &verdicts, keys);
    let report = Report {
        machine,
        allocator: crate::ALLOCATOR,
        keys,
        threads: &p.threads,
        rounds,
        seconds: p.dur.as_secs_f64(),
        batch: p.batch,
        filemap_setup: FILEMAP_SETUP,
        target_ratio: TARGET,
        measured: &measured,
        footprint: &footprint,
        summary: &summary,
        twins: &twins,
        verdicts: &verdicts,
    };
    let dir =
        a.out.clone().unwrap_or_else(|| PathBuf::from(format!("dlht-results/persist-{}", machine.date_unix)));
    write(&dir, "persist.csv", &csv(&measured, &summary));
    write(&dir, "persist.json", &serde_json::to_string_pretty(&report).unwrap_or_default());
    println!("# results: {}", dir.display());
    failed
}

/// Medians and per-round ratios.
fn summarise(measured: &[Measured], threads: &[usize], workloads: &[&'static str]) -> Vec<Summary> {
    let mut out = Vec::new();
    for &workload in workloads {
        for &t in threads {
            let of = |w: Which| -> Vec<&Measured> {
                measured
                    .iter()
                    .filter(|m| m.workload == workload && m.threads == t && m.system == w)
                    .collect()
            };
            let (map, file) = (of(Which::Map), of(Which::FileMap));
            let spread = |v: &[&Measured]| Spread::of(&v.iter().filter_map(|m| m.mops).collect::<Vec<_>>());
            let faults = |v: &[&Measured]| {
                Spread::of(&v.iter().filter_map(|m| m.minflt_per_kop).collect::<Vec<_>>()).map(|s| s.median)
            };
            let ratios_of = |v: fn(&Measured) -> Option<f64>| -> Vec<f64> {
                map.iter()
                    .filter_map(|m| {
                        let f = file.iter().find(|f| f.round == m.round)?;
                        Some(v(f)? / v(m)?)
                    })
                    .collect()
            };
            let ratios = ratios_of(|m| m.mops);
            let cpu_ratios = ratios_of(|m| m.cpu_mops);
            out.push(Summary {
                workload,
                threads: t,
                map: spread(&map),
                filemap: spread(&file),
                median_ratio: Spread::of(&ratios).map(|s| s.median),
                ratios,
                median_cpu_ratio: Spread::of(&cpu_ratios).map(|s| s.median),
                cpu_ratios,
                map_minflt_per_kop: faults(&map),
                filemap_minflt_per_kop: faults(&file),
            });
        }
    }
    out
}

/// Cache-resident twin gets: a 2^14-key table of each kind, once per
/// thread count, against the memory-resident medians.
fn twins(p: &Plan, dirs: &Dirs, summary: &[Summary]) -> Vec<Twin> {
    if p.keys <= TWIN_KEYS {
        return Vec::new(); // the tables are the twins' size already
    }
    let d = dirs.fresh("twin");
    let out = (|| -> Result<Vec<Twin>, String> {
        let mem = Sys::<_, true>(Arc::new(Mem::with_capacity(TWIN_KEYS as usize)));
        let file = Sys::<_, true>(Arc::new(open_file(&d, TWIN_KEYS as usize)?));
        fill(&mem, TWIN_KEYS, 1, p.batch)?;
        fill(&file, TWIN_KEYS, 1, p.batch)?;
        let seed = p.seed ^ 0x7717;
        let mut out = Vec::new();
        for &t in &p.threads {
            for w in [Which::Map, Which::FileMap] {
                let s = match w {
                    Which::Map => gets(&mem.0, t, p.dur, TWIN_KEYS, p.batch, seed)?,
                    Which::FileMap => gets(&file.0, t, p.dur, TWIN_KEYS, p.batch, seed)?,
                };
                let resident = summary
                    .iter()
                    .find(|s| s.workload == "get-batch" && s.threads == t)
                    .and_then(|s| if w == Which::Map { s.map } else { s.filemap });
                out.push(Twin {
                    system: w,
                    threads: t,
                    twin_mops: s.mops,
                    resident_over_twin: resident.map(|r| r.median / s.mops),
                });
            }
        }
        Ok(out)
    })();
    remove_dir(&d);
    out.unwrap_or_else(|e| {
        eprintln!("the cache-resident twins: {e}");
        Vec::new()
    })
}

/// One line per workload: the worst thread count's median ratio against
/// the target.
fn verdicts(summary: &[Summary], workloads: &[&'static str]) -> Vec<String> {
    workloads
        .iter()
        .map(|&w| {
            let rows: Vec<&Summary> = summary.iter().filter(|s| s.workload == w).collect();
            let per: Vec<String> = rows
                .iter()
                .map(|s| match s.median_ratio {
                    Some(r) => format!("{}t {:.3}", s.threads, r),
                    None => format!("{}t -", s.threads),
                })
                .collect();
            let worst =
                rows.iter().map(|s| s.median_ratio).try_fold(f64::INFINITY, |m, r| r.map(|r| m.min(r)));
            let verdict = match worst {
                Some(r) if r.is_finite() && r >= TARGET => "within 10%".to_string(),
                Some(r) if r.is_finite() => format!(
                    "missed by {:.1}% (FileMap {:.1}% slower than Map, 10% allowed)",
                    (TARGET - r) * 100.0,
                    (1.0 - r) * 100.0
                ),
                _ => "no verdict (a measurement failed)".to_string(),
            };
            format!("{w}: {verdict} (median FileMap ÷ Map: {})", per.join(", "))
        })
        .collect()
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

fn print_tables(
    summary: &[Summary],
    footprint: &[Footprint],
    twins: &[Twin],
    verdicts: &[String],
    keys: u64,
) {
    println!(
        "\n{:<13} {:>3} {:>22} {:>22} {:>22} {:>7} {:>22} {:>7} {:>12}",
        "workload",
        "thr",
        "map M/s",
        "filemap M/s",
        "ratio per round",
        "median",
        "CPU ratio per round",
        "median",
        "minflt/kop"
    );
    for s in summary {
        let show = |v: Option<Spread>| v.map_or_else(|| "FAILED".into(), |v| v.show(2));
        let join = |v: &[f64]| v.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>().join(" ");
        println!(
            "{:<13} {:>3} {:>22} {:>22} {:>22} {:>7} {:>22} {:>7} {:>12}",
            s.workload,
            s.threads,
            show(s.map),
            show(s.filemap),
            join(&s.ratios),
            opt(s.median_ratio, 3),
            join(&s.cpu_ratios),
            opt(s.median_cpu_ratio, 3),
            format!("{}/{}", opt(s.map_minflt_per_kop, 1), opt(s.filemap_minflt_per_kop, 1))
        );
    }
    println!(
        "# M/s: median (min–max) over rounds; get-batch: gets, insdel: insert+remove pairs, population: inserts \
         (2^{} keys into a table made small, batched); ratio: FileMap ÷ Map within a round; CPU ratio: the same in \
         operations per CPU-second of this process (user + system: robust to other load on the machine, blind to \
         the kernel's writeback threads); minflt/kop: minor page faults per thousand operations, map/filemap",
        keys.trailing_zeros()
    );
    println!(
        "\n{:<8} {:>5} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10} {:>11} {:>11} {:>12}",
        "system",
        "round",
        "rss B/key",
        "anon",
        "file",
        "on 2 MiB",
        "index",
        "disk alloc",
        "disk appar.",
        "prepop M/s",
        "minflt/key"
    );
    for f in footprint {
        println!(
            "{:<8} {:>5} {:>9.1} {:>9.1} {:>9.1} {:>7.0}% {:>9.1} {:>10} {:>11} {:>11.2} {:>12.4}",
            f.system.name(),
            f.round + 1,
            f.rss_per_key,
            f.anon_per_key,
            f.file_per_key,
            f.huge_share * 100.0,
            f.index_per_key,
            opt(f.disk_allocated_per_key, 1),
            opt(f.disk_apparent_per_key, 1),
            f.prepopulate_mops,
            f.prepopulate_minflt_per_key
        );
    }
    println!(
        "# bytes per key after prepopulation: resident (VmRSS) the table added, of it anonymous and file-backed, the \
         share on 2 MiB pages (AnonHugePages + FilePmdMapped), the index as the map counts it, the FileMap's files \
         allocated on disk (st_blocks × 512) and apparent (st_size)"
    );
    if !twins.is_empty() {
        println!();
        for t in twins {
            let flag = match t.resident_over_twin {
                Some(r) if r >= 0.8 => "  <- within 20% of its cache-resident twin: suspicious",
                _ => "",
            };
            println!(
                "# twin: {} get-batch on {} thread(s), 2^{} keys: {:.2} M/s; memory-resident ÷ twin {}{flag}",
                t.system.name(),
                t.threads,
                TWIN_KEYS.trailing_zeros(),
                t.twin_mops,
                opt(t.resident_over_twin, 2)
            );
        }
    }
    println!();
    for v in verdicts {
        println!("verdict: {v}");
    }
}

fn csv(measured: &[Measured], summary: &[Summary]) -> String {
    let mut csv =
        String::from("workload,system,threads,round,first,mops,minflt_per_kop,ratio_filemap_over_map\n");
    for m in measured {
        let ratio = if m.system == Which::FileMap {
            measured
                .iter()
                .find(|o| {
                    o.system == Which::Map
                        && o.workload == m.workload
                        && o.threads == m.threads
                        && o.round == m.round
                })
                .and_then(|o| Some(m.mops? / o.mops?))
        } else {
            None
        };
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{}",
            m.workload,
            m.system.name(),
            m.threads,
            m.round,
            m.first,
            m.mops.map(|v| format!("{v:.4}")).unwrap_or_default(),
            m.minflt_per_kop.map(|v| format!("{v:.3}")).unwrap_or_default(),
            ratio.map(|v| format!("{v:.4}")).unwrap_or_default()
        );
    }
    for s in summary {
        let _ = writeln!(
            csv,
            "{},median,{},,,,,{}",
            s.workload,
            s.threads,
            s.median_ratio.map(|v| format!("{v:.4}")).unwrap_or_default()
        );
    }
    csv
}

// ---------------------------------------------------------------------
// Recovery after kill -9 in the middle of a grow.

/// One kill and recovery.
#[derive(Clone, Debug, Serialize)]
struct Recovered {
    round: u32,
    keys: u64,
    /// Seconds the child took to insert the keys.
    child_fill_secs: Option<f64>,
    /// From "growing" to SIGKILL.
    delay_ms: u64,
    /// The child said its grow had finished before it was killed.
    grow_finished_before_kill: bool,
    /// The page cache was dropped after the kill (a cold open).
    cold: bool,
    /// Seconds the `sync` before the drop took.
    sync_secs: Option<f64>,
    /// /proc/meminfo's Cached before and after the drop (or the same
    /// moment of a warm round), GiB: whether the drop took.
    cached_before_gib: f64,
    cached_after_gib: f64,
    /// From before the open to the first get's answer.
    first_get_ms: f64,
    /// Major page faults (reads from disk) of the open and the first get.
    first_get_majflt: u64,
    /// From before the open until every key was read and checked (2
    /// threads, batched gets): touching the whole map.
    all_keys_ms: f64,
    /// Major page faults of that.
    all_keys_majflt: u64,
    /// The background finisher was still at work after every key was read.
    finishing_after: bool,
    /// From before the open until the background finisher ended (the
    /// grow the open resumed done in the files, with no write to help);
    /// None if no grow was resumed.
    finished_ms: Option<f64>,
    open_ms: f64,
    crashed: bool,
    bins_visited: usize,
    slots_freed: usize,
    transfers_finished: usize,
    resize_resumed: bool,
    /// Keys of `0..keys` missing or with a wrong value (untimed check).
    bad_keys: u64,
    len: usize,
    verify_secs: f64,
    /// `capacity()` after the check (the grow done: about 3 × keys or more).
    capacity_after: usize,
    /// Index files in the directory after the check and close (2 while a
    /// grow is unfinished).
    index_files_after: usize,
    disk_allocated_bytes: u64,
    disk_apparent_bytes: u64,
}

/// The child: fill the map in `dir` on 2 threads (key(i) → i), print
/// "growing", grow it to twice as many more keys, print "grown", wait.
fn child(a: &PersistArgs) -> bool {
    let keys = if a.smoke { 1 << 16 } else { a.keys.unwrap_or(1 << 25) };
    let Some(dir) = &a.dir else {
        eprintln!("persist --child needs --dir");
        return true;
    };
    let m = match open_file(dir, keys as usize) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return true;
        }
    };
    let start = Instant::now();
    std::thread::scope(|s| {
        for th in 0..2u64 {
            let m = &m;
            s.spawn(move || {
                for i in (th..keys).step_by(2) {
                    assert!(m.insert(key(i), i).is_ok(), "the insert of fresh key {i} failed");
                }
            });
        }
    });
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "filled {:.3}", start.elapsed().as_secs_f64());
    let _ = writeln!(out, "growing");
    let _ = out.flush();
    m.reserve(2 * keys as usize);
    let _ = writeln!(out, "grown");
    let _ = out.flush();
    drop(out);
    // Wait for the SIGKILL (never close: the parent kills a live map).
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// One round: run the child, kill it mid-grow, recover, check.
/// Check, before any round, that --drop-caches can drop the page cache.
fn can_drop_caches() -> Result<(), String> {
    std::fs::OpenOptions::new().write(true).open("/proc/sys/vm/drop_caches").map(drop).map_err(|e| {
        format!(
            "--drop-caches: cannot open /proc/sys/vm/drop_caches for writing ({e}): it needs root, and a /proc/sys \
             that is writable (not an unprivileged container)"
        )
    })
}

/// Write every dirty page to disk (`sync`), then drop the clean ones
/// (`echo 3 > /proc/sys/vm/drop_caches`); the seconds the sync took.
fn drop_page_cache() -> Result<f64, String> {
    let t = Instant::now();
    let s = std::process::Command::new("sync")
        .status()
        .map_err(|e| format!("--drop-caches: running sync: {e}"))?;
    if !s.success() {
        return Err(format!("--drop-caches: sync failed ({s})"));
    }
    let secs = t.elapsed().as_secs_f64();
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        format!("--drop-caches: writing 3 to /proc/sys/vm/drop_caches failed ({e}): it needs root")
    })?;
    Ok(secs)
}

/// /proc/meminfo's Cached, GiB.
fn cached_gib() -> f64 {
    crate::compare::proc_bytes("/proc/meminfo", "Cached:").unwrap_or(0) as f64 / (1u64 << 30) as f64
}

fn recover_once(
    round: u32,
    keys: u64,
    dir: &Path,
    smoke: bool,
    cold: bool,
    after_grow: bool,
) -> Result<Recovered, String> {
    use std::process::{Command, Stdio};
    remove_dir(dir);
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let mut args = vec!["persist".to_string(), "--recovery".into(), "--child".into()];
    args.extend(["--keys".into(), keys.to_string(), "--dir".into(), dir.display().to_string()]);
    if smoke {
        args.push("--smoke".into());
    }
    let mut c = Command::new(exe)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("starting the child: {e}"))?;
    let mut lines = std::io::BufReader::new(c.stdout.take().expect("piped")).lines();
    let mut fill_secs = None;
    loop {
        match lines.next() {
            Some(Ok(l)) if l == "growing" && !after_grow => break,
            Some(Ok(l)) if l == "grown" => break,
            Some(Ok(l)) => fill_secs = l.strip_prefix("filled ").and_then(|s| s.parse().ok()).or(fill_secs),
            _ => {
                let _ = c.kill();
                let status = c.wait();
                return Err(format!("the child ended before it grew the map: {status:?}"));
            }
        }
    }
    let delay_ms = rand::random_range(50..=500u64);
    std::thread::sleep(Duration::from_millis(delay_ms));
    // Child::kill sends SIGKILL on Unix.
    c.kill().map_err(|e| format!("killing the child: {e}"))?;
    c.wait().map_err(|e| format!("waiting for the child: {e}"))?;
    // What it said before it died (the pipe is closed now).
    let grow_finished = after_grow || lines.any(|l| l.is_ok_and(|l| l == "grown"));
    let cached_before_gib = cached_gib();
    let sync_secs = if cold { Some(drop_page_cache()?) } else { None };
    let cached_after_gib = cached_gib();
    let (_, majflt0) = faults();
    let t0 = Instant::now();
    let m = Persistent::open(dir).map_err(|e| format!("reopening the map after the kill: {e:?}"))?;
    let probe = keys / 2;
    let first = m.get(&key(probe));
    let first_get = t0.elapsed();
    let (_, majflt1) = faults();
    if first != Some(probe) {
        return Err(format!("the first get after recovery found {first:?}, not {probe}"));
    }
    let rec = m.recovery();
    let v = Instant::now();
    let bad = verify(&m, keys, 2, |i| i);
    let verify_secs = v.elapsed().as_secs_f64();
    let all_keys = t0.elapsed();
    let (_, majflt2) = faults();
    let finishing_after = m.finishing_in_background();
    // No write: the finisher alone ends the grow (bounded wait).
    while m.finishing_in_background() && t0.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let finished_ms =
        (rec.resize_resumed && !m.finishing_in_background()).then(|| t0.elapsed().as_secs_f64() * 1e3);
    let len = m.len();
    let capacity_after = m.capacity();
    drop(m);
    let (alloc, apparent) = disk(dir);
    let index_files_after = std::fs::read_dir(dir)
        .map_or(0, |d| d.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("index.")).count());
    remove_dir(dir);
    Ok(Recovered {
        round,
        keys,
        child_fill_secs: fill_secs,
        delay_ms,
        grow_finished_before_kill: grow_finished,
        cold,
        sync_secs,
        cached_before_gib,
        cached_after_gib,
        first_get_ms: first_get.as_secs_f64() * 1e3,
        first_get_majflt: majflt1 - majflt0,
        all_keys_ms: all_keys.as_secs_f64() * 1e3,
        all_keys_majflt: majflt2 - majflt0,
        finishing_after,
        finished_ms,
        open_ms: rec.open_time.as_secs_f64() * 1e3,
        crashed: rec.crashed,
        bins_visited: rec.bins_visited,
        slots_freed: rec.slots_freed,
        transfers_finished: rec.transfers_finished,
        resize_resumed: rec.resize_resumed,
        bad_keys: bad,
        len,
        verify_secs,
        capacity_after,
        index_files_after,
        disk_allocated_bytes: alloc,
        disk_apparent_bytes: apparent,
    })
}

/// The recovery study. True if a check failed.
fn recovery(a: &PersistArgs, machine: &Machine) -> bool {
    let keys = if a.smoke { 1 << 16 } else { a.keys.unwrap_or(1 << 25) };
    let rounds = if a.smoke { 1 } else { a.rounds };
    if a.drop_caches {
        if let Err(e) = can_drop_caches() {
            eprintln!("{e}");
            return true;
        }
    }
    let dirs = match Dirs::new(a.dir.as_ref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return true;
        }
    };
    let dir = dirs.base.join("recovery");
    println!(
        "# recovery: 2^{} keys (a child fills a FileMap presized for them on 2 threads, then reserve(2 × keys) grows \
         it; SIGKILL 50–500 ms after it says {}), {rounds} round(s), map in {}{}",
        keys.trailing_zeros(),
        if a.after_grow { "the grow finished" } else { "it starts the grow" },
        dir.display(),
        if a.drop_caches { "; odd rounds cold (sync + drop_caches after the kill), even rounds warm" } else { "" }
    );
    let mut rows = Vec::new();
    let mut failed = false;
    for round in 0..rounds {
        let cold = a.drop_caches && round % 2 == 0;
        eprintln!(
            "# recovery round {}/{rounds} ({}): the child fills 2^{} keys",
            round + 1,
            if cold { "cold" } else { "warm" },
            keys.trailing_zeros()
        );
        match recover_once(round, keys, &dir, a.smoke, cold, a.after_grow) {
            Ok(r) => {
                if r.bad_keys > 0 || r.len != keys as usize || !r.crashed {
                    eprintln!(
                        "check failed: round {}: {} keys missing or wrong, len {} of {keys}, crashed {}",
                        round + 1,
                        r.bad_keys,
                        r.len,
                        r.crashed
                    );
                    failed = true;
                }
                rows.push(r);
            }
            Err(e) => {
                eprintln!("check failed: recovery round {}: {e}", round + 1);
                failed = true;
                remove_dir(&dir);
                if e.starts_with("--drop-caches") {
                    break;
                }
            }
        }
    }
    drop(dirs);
    println!(
        "\n{:>5} {:>5} {:>8} {:>7} {:>11} {:>7} {:>9} {:>11} {:>7} {:>9} {:>8} {:>11} {:>6} {:>6} {:>8} {:>7} {:>10} {:>6} {:>9}",
        "round",
        "cache",
        "fill s",
        "kill ms",
        "Cached GiB",
        "sync s",
        "first get",
        "all keys ms",
        "majflt",
        "open ms",
        "resumed",
        "finisher ms",
        "bins",
        "freed",
        "finished",
        "bad",
        "len",
        "files",
        "disk GiB"
    );
    let mut csv = String::from(
        "round,keys,cold,child_fill_secs,delay_ms,grow_finished_before_kill,cached_before_gib,cached_after_gib,\
         sync_secs,first_get_ms,first_get_majflt,all_keys_ms,all_keys_majflt,finishing_after,finished_ms,open_ms,crashed,\
         resize_resumed,bins_visited,slots_freed,transfers_finished,bad_keys,len,verify_secs,capacity_after,\
         index_files_after,disk_allocated_bytes,disk_apparent_bytes\n",
    );
    for r in &rows {
        println!(
            "{:>5} {:>5} {:>8} {:>7} {:>11} {:>7} {:>9.3} {:>11.1} {:>7} {:>9.3} {:>8} {:>11} {:>6} {:>6} {:>8} {:>7} {:>10} {:>6} {:>9.2}",
            r.round + 1,
            if r.cold { "cold" } else { "warm" },
            opt(r.child_fill_secs, 2),
            r.delay_ms,
            format!("{:.1}→{:.1}", r.cached_before_gib, r.cached_after_gib),
            opt(r.sync_secs, 1),
            r.first_get_ms,
            r.all_keys_ms,
            format!("{}/{}", r.first_get_majflt, r.all_keys_majflt),
            r.open_ms,
            r.resize_resumed,
            opt(r.finished_ms, 0),
            r.bins_visited,
            r.slots_freed,
            r.transfers_finished,
            r.bad_keys,
            r.len,
            r.index_files_after,
            r.disk_allocated_bytes as f64 / (1u64 << 30) as f64
        );
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{:.3},{:.3},{},{:.4},{},{:.3},{},{},{},{:.4},{},{},{},{},{},{},{},{:.3},{},{},{},{}",
            r.round,
            r.keys,
            r.cold,
            r.child_fill_secs.map(|v| format!("{v:.3}")).unwrap_or_default(),
            r.delay_ms,
            r.grow_finished_before_kill,
            r.cached_before_gib,
            r.cached_after_gib,
            r.sync_secs.map(|v| format!("{v:.3}")).unwrap_or_default(),
            r.first_get_ms,
            r.first_get_majflt,
            r.all_keys_ms,
            r.all_keys_majflt,
            r.finishing_after,
            r.finished_ms.map(|v| format!("{v:.1}")).unwrap_or_default(),
            r.open_ms,
            r.crashed,
            r.resize_resumed,
            r.bins_visited,
            r.slots_freed,
            r.transfers_finished,
            r.bad_keys,
            r.len,
            r.verify_secs,
            r.capacity_after,
            r.index_files_after,
            r.disk_allocated_bytes,
            r.disk_apparent_bytes
        );
    }
    println!(
        "# cache: warm (the killed process's pages stay cached) or cold (after the kill: sync, then \
         drop_caches); Cached GiB: /proc/meminfo's Cached before → after the drop (the same moment, warm); sync s: \
         the sync before the drop; first get: ms from before the open to the first get's answer; all keys ms: from \
         before the open until every key was read and checked (2 threads, get_many); majflt: major faults (reads \
         from disk) to the first get / to all keys; open ms: Recovery::open_time; resumed: a grow was under way \
         (finished by the background finisher, alongside the reads); finisher ms: from before the open until the \
         finisher ended, with no write (it runs alongside the check of every key, then alone); bins: bins recovery visited; freed: slots it \
         freed; finished: transfers it finished; bad: keys missing or wrong; files: index files left after the \
         check, the finisher's end and the close (2: a grow unfinished); disk: the files' allocated size then"
    );
    for cold in [false, true] {
        let of = |f: fn(&Recovered) -> f64| {
            Spread::of(&rows.iter().filter(|r| r.cold == cold).map(f).collect::<Vec<_>>())
        };
        if let (Some(first), Some(all)) = (of(|r| r.first_get_ms), of(|r| r.all_keys_ms)) {
            println!(
                "# {}: time to first get {} ms, to every key {} ms (median, min–max); the issue's target for the \
                 first get is 50 ms at 2^25 keys",
                if cold { "cold" } else { "warm" },
                first.show(2),
                all.show(0)
            );
        }
    }
    #[derive(Serialize)]
    struct Out<'a> {
        machine: &'a Machine,
        keys: u64,
        rounds: &'a [Recovered],
    }
    let out =
        a.out.clone().unwrap_or_else(|| PathBuf::from(format!("dlht-results/persist-{}", machine.date_unix)));
    write(&out, "recovery.csv", &csv);
    write(
        &out,
        "recovery.json",
        &serde_json::to_string_pretty(&Out { machine, keys, rounds: &rows }).unwrap_or_default(),
    );
    println!("# results: {}", out.display());
    failed
}

/// The persistence study. True if a result check failed.
pub fn run(a: PersistArgs) -> bool {
    if a.child {
        return child(&a);
    }
    let machine = Machine::describe();
    println!("# dlht-bench persist: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    if a.recovery {
        recovery(&a, &machine)
    } else if !a.sync_ms.is_empty() {
        sync_cost(&a, &machine)
    } else {
        throughput(&a, &machine)
    }
}

/// `--sync-ms` (returns true if something failed): insert+remove pairs per second on a FileMap in process mode
/// and in sync mode at each interval, interleaved rounds, each mode on a
/// fresh map in a fresh directory, prepopulated (untimed) with `keys` keys;
/// for interval 0, `durable()` after every batch and its latency.
fn sync_cost(a: &PersistArgs, machine: &Machine) -> bool {
    let keys = a.keys.unwrap_or(if a.smoke { 1 << 14 } else { 1 << 22 }) as usize;
    let (rounds, secs) = if a.smoke { (1, 0.2) } else { (a.rounds, a.secs) };
    let dirs = match Dirs::new(a.dir.as_ref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return false;
        }
    };
    let modes: Vec<Option<u64>> = std::iter::once(None).chain(a.sync_ms.iter().map(|&m| Some(m))).collect();
    let name = |m: &Option<u64>| match m {
        None => "process".to_string(),
        Some(0) => "sync per batch".to_string(),
        Some(ms) => format!("sync every {ms} ms"),
    };
    println!(
        "# sync cost: {keys} keys presized, insert+remove pairs in batches of {}, {rounds} round(s) of {secs} s, threads {:?}, maps under {}",
        a.batch,
        a.threads,
        dirs.base.display()
    );
    // (mode, threads) -> pairs/s per round; durable() latencies in µs.
    let mut rates: std::collections::BTreeMap<(usize, u16), Vec<f64>> = Default::default();
    let mut waits: Vec<f64> = Vec::new();
    let mut ok = true;
    for round in 0..rounds {
        for (mi, mode) in modes.iter().enumerate() {
            let dir = dirs.base.join(format!("sync-{mi}"));
            remove_dir(&dir);
            let durability = match mode {
                None => dlht::Durability::Process,
                Some(ms) => dlht::Durability::Sync { every: Duration::from_millis(*ms) },
            };
            let m = match dlht::FileMap::<u64, u64>::open_with(
                &dir,
                dlht::OpenOptions::new().capacity(keys).durability(durability),
            ) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("opening {}: {e}", dir.display());
                    ok = false;
                    continue;
                }
            };
            for k in 0..keys as u64 {
                let _ = m.insert(k, k);
            }
            // The population's pages on disk first (untimed): the syncs
            // measured write what the pairs change.
            if m.durable().is_err() {
                eprintln!("syncing {}", dir.display());
                ok = false;
            }
            for &t in &a.threads {
                let stop = std::sync::atomic::AtomicBool::new(false);
                let pairs = std::sync::atomic::AtomicU64::new(0);
                let lat = std::sync::Mutex::new(Vec::new());
                let start = Instant::now();
                std::thread::scope(|s| {
                    for th in 0..t as u64 {
                        let (m, stop, pairs, lat) = (&m, &stop, &pairs, &lat);
                        s.spawn(move || {
                            let mut k = (1u64 << 40) + (th << 32) + ((round as u64) << 24);
                            let mut n = 0u64;
                            let mut mine = Vec::new();
                            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                                for _ in 0..a.batch {
                                    k += 1;
                                    let _ = m.insert(k, k);
                                    m.remove(&k);
                                }
                                n += a.batch as u64;
                                if *mode == Some(0) {
                                    let w = Instant::now();
                                    if m.durable().is_err() {
                                        break;
                                    }
                                    mine.push(w.elapsed().as_secs_f64() * 1e6);
                                }
                            }
                            pairs.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                            lat.lock().unwrap().extend(mine);
                        });
                    }
                    std::thread::sleep(Duration::from_secs_f64(secs));
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                });
                let rate =
                    pairs.load(std::sync::atomic::Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
                rates.entry((mi, t)).or_default().push(rate);
                waits.extend(lat.into_inner().unwrap());
            }
            drop(m);
            remove_dir(&dir);
        }
    }
    let median = |v: &[f64]| Spread::of(v).map_or(f64::NAN, |s| s.median);
    println!("\n{:<20} {:>4} {:>14} {:>10}", "mode", "thr", "pairs M/s", "÷ process");
    for &t in &a.threads {
        let base = median(rates.get(&(0, t)).map_or(&[][..], |v| v));
        for (mi, mode) in modes.iter().enumerate() {
            let r = median(rates.get(&(mi, t)).map_or(&[][..], |v| v));
            println!("{:<20} {:>4} {:>14.4} {:>10.4}", name(mode), t, r / 1e6, r / base);
        }
    }
    if !waits.is_empty() {
        waits.sort_by(f64::total_cmp);
        let p = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize];
        println!(
            "# durable() after each batch: {} calls, p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
            waits.len(),
            p(0.5),
            p(0.99),
            p(1.0)
        );
    }
    println!("# {}", machine.line());
    drop(dirs);
    !ok // true: failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_powers_of_two() {
        assert_eq!(keys_arg("2^25"), Ok(1 << 25));
        assert_eq!(keys_arg("16384"), Ok(1 << 14));
        assert!(keys_arg("1000").is_err());
        assert!(keys_arg("2^4").is_err());
        assert!(keys_arg("x").is_err());
    }

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
