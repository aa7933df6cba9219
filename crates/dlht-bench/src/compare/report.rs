//! The results of a run: every round of every measurement, their medians
//! and ranges, the per-round ratios (to the memory limit and to the best
//! peer), the cache-resident twin check, latency percentiles; a table on
//! stdout, CSV and JSON files.

use crate::compare::params::{Latency, Params, Sample};
use crate::compare::table::KEY_STREAM;
use crate::harness::machine::Machine;
use crate::harness::Spread;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// A "memory-resident" figure at least this share of its cache-resident
/// twin is flagged: a table many times the L3 cannot be served that fast.
pub const TWIN_FLAG: f64 = 0.75;

/// True where a cache-resident twin bounds its memory-resident figure from
/// above: reads, or writes on one thread. When several threads write a
/// small twin, each core keeps taking lines the other has just written,
/// and the twin can be slower than the memory-resident table, whose lines
/// arrive from memory owned by no other core. Measured: batched
/// put-heavy on 2 threads ran at 1.26–1.32× its twin, papaya's insert+remove
/// at 0.87–1.05×.
pub fn twin_bounds(workload: &str, threads: usize) -> bool {
    threads == 1 || matches!(workload, "get" | "getmiss" | "skew" | "zipf")
}

/// The system name of the memory-limit probes.
pub const LIMIT_PLAIN: &str = "limit-plain";
/// The prefetched probe (batches of 8 to 64, the best). The limit ratios
/// are taken against the better of the two probes in each round.
pub const LIMIT_PREFETCHED: &str = "limit-prefetched";

/// One measurement, every round.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub system: String,
    pub workload: String,
    pub threads: usize,
    /// The group it ran in: the dlht systems and the limit run in every
    /// group, each peer in one (the groups' tables fit in memory).
    pub group: usize,
    /// Million operations per second in each round; None where the result
    /// check failed (or an earlier one of the system did).
    pub rounds: Vec<Option<f64>>,
    /// The same measurement on a cache-resident twin (a table of
    /// `TWIN_KEYS` keys, or an L2-sized probe array), once.
    pub twin: Option<f64>,
}

/// The summary of one measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub system: String,
    pub workload: String,
    pub threads: usize,
    /// Absolute throughput over the rounds (million ops/s).
    pub mops: Spread,
    /// Per-round throughput ÷ the line-read limit (the better of the plain
    /// and prefetched probes) of the same round and thread count.
    pub of_limit: Option<Spread>,
    /// Per-round throughput ÷ the best peer (non-dlht system) of the same
    /// round, workload and thread count.
    pub vs_best_peer: Option<Spread>,
    /// The per-round ratios to the limit (groups one after another).
    pub of_limit_rounds: Vec<f64>,
    /// The per-round ratios to the best peer.
    pub vs_best_peer_rounds: Vec<f64>,
    /// Median ÷ cache-resident twin.
    pub of_twin: Option<f64>,
    /// The twin check tripped: this "memory-resident" figure is within 25%
    /// of its cache-resident twin.
    pub twin_flag: bool,
}

/// A resize time series for one system.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub system: String,
    pub samples: Vec<Sample>,
}

/// Latency percentiles of one system.
#[derive(Clone, Debug, Serialize)]
pub struct SystemLatency {
    pub system: String,
    #[serde(flatten)]
    pub latency: Latency,
}

/// Everything a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub machine: Machine,
    pub params: Params,
    /// Bytes of the limit probe's array (the size of dlht's index).
    pub limit_bytes: usize,
    /// Whether the table is big enough (4× the L3 or more) for the twin
    /// check to apply.
    pub memory_resident: bool,
    pub measurements: Vec<Measurement>,
    pub summary: Vec<Summary>,
    pub latency: Vec<SystemLatency>,
    pub resize: Vec<Series>,
    pub notes: Vec<(String, String)>,
}

fn is_peer(system: &str) -> bool {
    !system.starts_with("dlht") && !system.starts_with("limit") && system != KEY_STREAM
}

/// a[r] / b[r] for every round where both are there.
/// Per round, the higher of two limit probes' rates: the limit is the
/// highest rate the machine shows, plain or prefetched.
fn best_of_rounds(a: Option<&Measurement>, b: Option<&Measurement>) -> Option<Vec<Option<f64>>> {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (&a.rounds, &b.rounds),
        (Some(one), None) | (None, Some(one)) => return Some(one.rounds.clone()),
        (None, None) => return None,
    };
    Some(a.iter().zip(b).map(|(x, y)| (*x).into_iter().chain(*y).reduce(f64::max)).collect())
}

fn per_round(a: &[Option<f64>], b: &[Option<f64>]) -> Vec<f64> {
    a.iter().zip(b).filter_map(|(x, y)| Some(x.as_ref()? / y.filter(|v| *v > 0.0)?)).collect()
}

impl Run {
    /// Summarise every measurement: medians, ranges, per-round ratios, the
    /// twin check. A system measured in several groups (the dlht systems)
    /// pools its rounds; each ratio pairs measurements of one group and
    /// round where it can.
    pub fn summarise(&mut self) {
        let mut keys: Vec<(&str, &str, usize)> = Vec::new();
        for m in &self.measurements {
            let k = (m.system.as_str(), m.workload.as_str(), m.threads);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let mut summary = Vec::new();
        for (system, workload, threads) in keys {
            let ms: Vec<&Measurement> = self
                .measurements
                .iter()
                .filter(|m| m.system == system && m.workload == workload && m.threads == threads)
                .collect();
            let done: Vec<f64> = ms.iter().flat_map(|m| m.rounds.iter().flatten().copied()).collect();
            let Some(mops) = Spread::of(&done) else { continue };
            let in_group = |g: usize| ms.iter().find(|m| m.group == g).copied().unwrap_or(ms[0]);
            let of_limit_rounds: Vec<f64> = if workload == "population" || system.starts_with("limit") {
                Vec::new()
            } else {
                ms.iter()
                    .filter_map(|m| {
                        let probe = |name: &str| {
                            self.measurements
                                .iter()
                                .find(|l| l.system == name && l.threads == threads && l.group == m.group)
                        };
                        let limit = best_of_rounds(probe(LIMIT_PLAIN), probe(LIMIT_PREFETCHED))?;
                        Some(per_round(&m.rounds, &limit))
                    })
                    .flatten()
                    .collect()
            };
            let peers: Vec<&Measurement> = self
                .measurements
                .iter()
                .filter(|q| q.workload == workload && q.threads == threads && is_peer(&q.system))
                // The key stream is no table: a ratio to a peer means nothing.
                .filter(|_| system != KEY_STREAM)
                .collect();
            let rounds = ms.iter().map(|m| m.rounds.len()).max().unwrap_or(0);
            // Per round: the lowest ratio to any peer, each taken against
            // this system's figure in the peer's group.
            let vs_best_peer_rounds: Vec<f64> = (0..rounds)
                .filter_map(|r| {
                    peers
                        .iter()
                        .filter_map(|q| {
                            let x = in_group(q.group).rounds.get(r).copied().flatten()?;
                            let y = q.rounds.get(r).copied().flatten().filter(|y| *y > 0.0)?;
                            Some(x / y)
                        })
                        .reduce(f64::min)
                })
                .collect();
            let of_twin = ms.iter().find_map(|m| m.twin).filter(|t| *t > 0.0).map(|t| mops.median / t);
            summary.push(Summary {
                system: system.into(),
                workload: workload.into(),
                threads,
                mops,
                of_limit: Spread::of(&of_limit_rounds),
                vs_best_peer: Spread::of(&vs_best_peer_rounds),
                of_limit_rounds,
                vs_best_peer_rounds,
                of_twin,
                twin_flag: self.memory_resident
                    && twin_bounds(workload, threads)
                    && of_twin.is_some_and(|r| r >= TWIN_FLAG),
            });
        }
        self.summary = summary;
    }

    /// Whether a result check of a dlht system failed (the notes say
    /// where). A peer that fails its checks is reported in the notes and
    /// left out of the figures, but does not fail the run: a bug in a peer
    /// (leapfrog's puts on two threads once lost a present key in a CI
    /// smoke run) must not stop dlht's own checks from passing.
    pub fn failed(&self) -> bool {
        self.notes.iter().any(|(system, n)| system.starts_with("dlht") && n.starts_with("FAILED"))
    }

    /// The flagged summaries (see [`TWIN_FLAG`]).
    pub fn flagged(&self) -> Vec<&Summary> {
        self.summary.iter().filter(|s| s.twin_flag).collect()
    }

    /// The table printed at the end of a run: one group per workload and
    /// thread count, best first.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<10} {:>3}  {:<20} {:>22} {:>20} {:>20} {:>8}",
            "workload",
            "thr",
            "system",
            "M ops/s med (range)",
            "÷ limit med (range)",
            "÷ best peer",
            "÷ twin"
        );
        let mut cells: Vec<(String, usize)> = Vec::new();
        for r in &self.summary {
            if !cells.contains(&(r.workload.clone(), r.threads)) {
                cells.push((r.workload.clone(), r.threads));
            }
        }
        for (workload, threads) in cells {
            let mut rows: Vec<&Summary> =
                self.summary.iter().filter(|r| r.workload == workload && r.threads == threads).collect();
            rows.sort_by(|a, b| b.mops.median.total_cmp(&a.mops.median));
            for r in rows {
                let opt = |o: Option<Spread>| o.map(|v| v.show(2)).unwrap_or_else(|| "-".into());
                let twin = match (r.of_twin, r.twin_flag) {
                    (Some(t), true) => format!("{t:.2} !!"),
                    (Some(t), false) => format!("{t:.2}"),
                    (None, _) => "-".into(),
                };
                let _ = writeln!(
                    s,
                    "{:<10} {:>3}  {:<20} {:>22} {:>20} {:>20} {:>8}",
                    r.workload,
                    r.threads,
                    r.system,
                    r.mops.show(1),
                    opt(r.of_limit),
                    opt(r.vs_best_peer),
                    twin
                );
            }
            let _ = writeln!(s);
        }
        s
    }

    /// The latency table.
    pub fn latency_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<17} {:<7} {:<9} {:>10} {:>9} {:>9} {:>9} {:>11}",
            "system", "op", "phase", "count", "p50 ns", "p99 ns", "p99.9 ns", "max ns"
        );
        for l in &self.latency {
            let x = &l.latency;
            let _ = writeln!(
                s,
                "{:<17} {:<7} {:<9} {:>10} {:>9} {:>9} {:>9} {:>11}",
                l.system, x.op, x.phase, x.count, x.p50_ns, x.p99_ns, x.p999_ns, x.max_ns
            );
        }
        s
    }

    /// The table, the per-round ratios of the dlht systems, the twin check,
    /// latency, notes.
    pub fn print(&self) {
        let run = self;
        println!("\n{}", run.table());
        println!(
            "# Medians over the rounds, with (min–max). ÷ limit: per-round throughput over the random-line-read"
        );
        println!("# limit (the better probe) of the same round and thread count; ÷ best peer: over the best non-dlht");
        println!(
            "# system of the same round; ÷ twin: median over the same measurement on a cache-resident twin."
        );
        println!("# per-round ratios of the dlht systems (÷ limit | ÷ best peer):");
        let show = |v: &[f64]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" ")
            }
        };
        for m in run.summary.iter().filter(|m| m.system.starts_with("dlht")) {
            println!(
                "#   {:<17} {:<10} {:>2}t  {} | {}",
                m.system,
                m.workload,
                m.threads,
                show(&m.of_limit_rounds),
                show(&m.vs_best_peer_rounds)
            );
        }
        let flagged = run.flagged();
        if !run.memory_resident {
            println!(
                "# cache-resident check: not applicable (the {} MiB table is not 4x the L3; a smoke run)",
                run.limit_bytes >> 20
            );
        } else if flagged.is_empty() {
            println!(
                "# cache-resident check: passed (every memory-resident figure its twin bounds — reads, and writes on one thread — is below {:.0}% of its cache-resident twin)",
                crate::compare::report::TWIN_FLAG * 100.0
            );
        } else {
            for f in &flagged {
                println!(
                    "# cache-resident check: FLAGGED {} {} on {} threads: {:.1} M/s is {:.0}% of its cache-resident twin (a memory-resident table cannot be that fast: suspect the key stream)",
                    f.system,
                    f.workload,
                    f.threads,
                    f.mops.median,
                    100.0 * f.of_twin.unwrap_or(0.0)
                );
            }
        }
        if !run.latency.is_empty() {
            println!("\n# latency of single calls (hdrhistogram; steady: 1 thread on the prepopulated table; resizing: during the resize series)");
            print!("{}", run.latency_table());
        }
        for (sys, note) in &run.notes {
            println!("# note, {sys}: {note}");
        }
        for s in &run.resize {
            if let Some(min) = s.samples.iter().skip(1).map(|p| p.get_mops).reduce(f64::min) {
                let mean = s.samples.iter().map(|p| p.get_mops).sum::<f64>() / s.samples.len() as f64;
                println!(
                    "# resizing under load, {}: gets {mean:.1} M/s on average, {min:.1} at the lowest sample, over {} samples",
                    s.system,
                    s.samples.len()
                );
            }
        }
    }

    /// results.csv (every round), summary.csv, resize.csv, latency.csv and
    /// results.json (everything) in `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let opt = |o: Option<f64>| o.map(|v| format!("{v:.4}")).unwrap_or_default();
        let mut csv = String::from("system,workload,threads,round,mops,twin_mops\n");
        for m in &self.measurements {
            for (r, v) in m.rounds.iter().enumerate() {
                let _ = writeln!(
                    csv,
                    "{},{},{},{},{},{}",
                    m.system,
                    m.workload,
                    m.threads,
                    r,
                    opt(*v),
                    opt(m.twin)
                );
            }
        }
        std::fs::write(dir.join("results.csv"), csv)?;
        let mut sum = String::from(
            "system,workload,threads,mops_median,mops_min,mops_max,of_limit_median,of_limit_min,of_limit_max,vs_best_peer_median,vs_best_peer_min,vs_best_peer_max,of_twin,twin_flag\n",
        );
        let spread = |o: Option<Spread>| match o {
            Some(v) => format!("{:.4},{:.4},{:.4}", v.median, v.min, v.max),
            None => ",,".into(),
        };
        for r in &self.summary {
            let _ = writeln!(
                sum,
                "{},{},{},{},{},{},{},{}",
                r.system,
                r.workload,
                r.threads,
                spread(Some(r.mops)),
                spread(r.of_limit),
                spread(r.vs_best_peer),
                opt(r.of_twin),
                r.twin_flag
            );
        }
        std::fs::write(dir.join("summary.csv"), sum)?;
        let mut rcsv = String::from("system,ms,get_mops,insert_mops\n");
        for s in &self.resize {
            for p in &s.samples {
                let _ = writeln!(rcsv, "{},{},{:.4},{:.4}", s.system, p.ms, p.get_mops, p.insert_mops);
            }
        }
        std::fs::write(dir.join("resize.csv"), rcsv)?;
        let mut lcsv = String::from("system,op,phase,count,p50_ns,p99_ns,p999_ns,max_ns\n");
        for l in &self.latency {
            let x = &l.latency;
            let _ = writeln!(
                lcsv,
                "{},{},{},{},{},{},{},{}",
                l.system, x.op, x.phase, x.count, x.p50_ns, x.p99_ns, x.p999_ns, x.max_ns
            );
        }
        std::fs::write(dir.join("latency.csv"), lcsv)?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(self).map_err(std::io::Error::other)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(system: &str, workload: &str, rounds: &[f64], twin: Option<f64>) -> Measurement {
        Measurement {
            system: system.into(),
            workload: workload.into(),
            threads: 1,
            group: 0,
            rounds: rounds.iter().map(|&v| Some(v)).collect(),
            twin,
        }
    }

    fn run(measurements: Vec<Measurement>) -> Run {
        let mut r = Run {
            machine: Machine::describe(),
            params: crate::compare::params::Params {
                keys: 1 << 25,
                batch: 16,
                seconds: 1.0,
                seed: 1,
                hot_share: 0.9,
                hot_keys: 1000,
                zipf_theta: 0.99,
                rounds: 3,
                peer_hasher: false,
            },
            limit_bytes: 1 << 31,
            memory_resident: true,
            measurements,
            summary: Vec::new(),
            latency: Vec::new(),
            resize: Vec::new(),
            notes: Vec::new(),
        };
        r.summarise();
        r
    }

    #[test]
    fn ratios_are_taken_per_round() {
        // dlht is half the limit in every round, although both swing 4×:
        // per-round ratios say 0.5 exactly, a ratio of medians would not.
        let r = run(vec![
            m(LIMIT_PREFETCHED, "lines", &[40.0, 10.0, 20.0], Some(400.0)),
            m("dlht", "get", &[20.0, 5.0, 10.0], Some(100.0)),
            m("papaya", "get", &[10.0, 10.0, 10.0], Some(100.0)),
            m("scc", "get", &[5.0, 2.5, 20.0], Some(100.0)),
        ]);
        let d = r.summary.iter().find(|s| s.system == "dlht").unwrap();
        let l = d.of_limit.unwrap();
        assert_eq!((l.median, l.min, l.max), (0.5, 0.5, 0.5));
        // Best peer per round: 10, 10, 20 (scc wins the last round).
        let p = d.vs_best_peer.unwrap();
        assert_eq!((p.min, p.median, p.max), (0.5, 0.5, 2.0));
        assert!(r.flagged().is_empty());
    }

    #[test]
    fn the_limit_is_the_better_probe_of_each_round() {
        // Plain reads win round 0, prefetched ones round 1: dlht is taken
        // against 40 and 50, never against the lower probe.
        let r = run(vec![
            m(LIMIT_PLAIN, "lines", &[40.0, 30.0], None),
            m(LIMIT_PREFETCHED, "lines", &[20.0, 50.0], None),
            m("dlht", "get", &[20.0, 25.0], None),
        ]);
        let d = r.summary.iter().find(|s| s.system == "dlht").unwrap();
        assert_eq!(d.of_limit_rounds, vec![0.5, 0.5]);
    }

    #[test]
    fn a_memory_figure_close_to_its_cache_twin_is_flagged() {
        let r = run(vec![
            m(LIMIT_PREFETCHED, "lines", &[40.0, 40.0, 40.0], Some(400.0)),
            m("dlht", "get", &[80.0, 85.0, 90.0], Some(100.0)),
            m("papaya", "get", &[10.0, 10.0, 10.0], Some(100.0)),
        ]);
        let flagged: Vec<&str> = r.flagged().iter().map(|s| s.system.as_str()).collect();
        assert_eq!(flagged, vec!["dlht"]);
        assert!(r.table().contains("!!"));
    }

    #[test]
    fn writes_on_several_threads_are_not_held_to_their_twin() {
        // Two writers on a small twin fight over its lines: the twin bounds
        // reads and one-thread writes only.
        let on = |mut x: Measurement, t: usize| {
            x.threads = t;
            x
        };
        let r = run(vec![
            on(m(LIMIT_PREFETCHED, "lines", &[80.0, 80.0, 80.0], Some(800.0)), 2),
            on(m("dlht", "putheavy", &[60.0, 60.0, 60.0], Some(50.0)), 2),
            on(m("dlht", "get", &[90.0, 90.0, 90.0], Some(100.0)), 2),
            m(LIMIT_PREFETCHED, "lines", &[40.0, 40.0, 40.0], Some(400.0)),
            m("dlht", "putheavy", &[30.0, 30.0, 30.0], Some(35.0)),
        ]);
        let flagged: Vec<(&str, usize)> =
            r.flagged().iter().map(|s| (s.workload.as_str(), s.threads)).collect();
        assert_eq!(flagged, vec![("get", 2), ("putheavy", 1)]);
    }

    #[test]
    fn each_peer_is_compared_with_dlht_of_its_own_group() {
        // Group 0 ran on a fast minute, group 1 on a slow one: dlht is twice
        // papaya (group 0) and twice scc (group 1) in every round, though
        // scc's absolute figures are lower than papaya's.
        let mut g1 = vec![
            m(LIMIT_PREFETCHED, "lines", &[20.0, 20.0], None),
            m("dlht", "get", &[10.0, 10.0], None),
            m("scc", "get", &[5.0, 5.0], None),
        ];
        for x in &mut g1 {
            x.group = 1;
        }
        let mut all = vec![
            m(LIMIT_PREFETCHED, "lines", &[40.0, 40.0], None),
            m("dlht", "get", &[20.0, 20.0], None),
            m("papaya", "get", &[10.0, 10.0], None),
        ];
        all.extend(g1);
        let r = run(all);
        let d = r.summary.iter().find(|s| s.system == "dlht").unwrap();
        assert_eq!(d.vs_best_peer_rounds, vec![2.0, 2.0]);
        assert_eq!(d.of_limit_rounds, vec![0.5, 0.5, 0.5, 0.5]);
        assert_eq!(d.mops.median, 15.0);
        assert_eq!(r.summary.iter().filter(|s| s.system == "dlht").count(), 1);
    }

    #[test]
    fn only_a_dlht_system_failing_a_check_fails_the_run() {
        let mut r = run(vec![m(LIMIT_PREFETCHED, "lines", &[40.0], None), m("dlht", "get", &[20.0], None)]);
        assert!(!r.failed());
        r.notes.push(("leapfrog".into(), "FAILED its result check in get on 2 threads: x".into()));
        assert!(!r.failed(), "a peer's failure is reported, not fatal");
        r.notes.push(("dlht-batch".into(), "FAILED its result check in get on 2 threads: x".into()));
        assert!(r.failed());
    }

    #[test]
    fn failed_rounds_are_left_out_not_counted() {
        let mut bad = m("dlht", "get", &[20.0, 0.0, 20.0], None);
        bad.rounds[1] = None;
        let r = run(vec![m(LIMIT_PREFETCHED, "lines", &[40.0, 40.0, 40.0], None), bad]);
        let d = r.summary.iter().find(|s| s.system == "dlht").unwrap();
        assert_eq!(d.mops.median, 20.0);
        assert_eq!(d.of_limit.unwrap().max, 0.5);
    }
}
