//! The throughput study: the FileMap against the Map in interleaved
//! rounds (both tables built anew each round, the order alternating), on
//! the same key streams; per-round ratios FileMap ÷ Map, footprints,
//! cache-resident twins and the verdict against "within 10%".

use super::args::{PersistArgs, WORKLOADS};
use super::footprint::{disk, Resident};
use super::maps::{open_file, remove_dir, Dirs, Kind, Mem, Persistent, Shared, Sys};
use super::measure::{fill, gets, insdel, opt, population, Sample};
use crate::compare::params::Params;
use crate::harness::machine::Machine;
use crate::harness::Spread;
use crate::progress::Progress;
use crate::studies::write;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Keys of the cache-resident twin tables (a few hundred KiB).
const TWIN_KEYS: u64 = 1 << 14;
/// The target: FileMap at least this share of Map's throughput.
const TARGET: f64 = 0.9;

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
pub(super) fn throughput(a: &PersistArgs, machine: &Machine) -> bool {
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
    // Per round: building the shared tables, then each workload on each map.
    let steps = rounds as usize * (shared_tables as usize + p.threads.len() * workloads.len() * 2);
    let bar = Progress::new("Measuring", steps as u64, "steps");
    for round in 0..rounds {
        let order = if round % 2 == 0 { [Which::Map, Which::FileMap] } else { [Which::FileMap, Which::Map] };
        let file_dir = dirs.fresh(&format!("round-{round}"));
        let (mut mem, mut file) = (None, None);
        if shared_tables {
            let what = format!("round {}/{rounds}: building and populating both tables (untimed)", round + 1);
            bar.println(format!("# {what}"));
            bar.set_message(what);
            bar.inc(1);
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
                    let what =
                        format!("round {}/{rounds}: {workload} on {t} thread(s): {}", round + 1, w.name());
                    bar.println(format!("# {what}"));
                    bar.set_message(what);
                    bar.inc(1);
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
    drop(bar);
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
