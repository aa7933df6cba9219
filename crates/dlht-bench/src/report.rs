//! The results of a comparison run: a table on stdout, CSV and JSON files.

use crate::machine::Machine;
use crate::workloads::{Params, Sample};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub system: String,
    pub workload: String,
    pub threads: usize,
    pub mops: f64,
    /// For gets: the share of the plain random-read limit at one thread,
    /// scaled by threads (the limit measured in the same run).
    pub pct_of_limit: Option<f64>,
    /// Throughput over the best peer (non-dlht system) in the same cell.
    pub vs_best_peer: Option<f64>,
}

/// The memory limit measured in the run.
#[derive(Clone, Debug, Serialize)]
pub struct LimitRecord {
    pub bytes: usize,
    pub plain_mlines_1t: f64,
    pub prefetched_mlines_1t: f64,
    pub prefetched_mlines_2t: f64,
}

/// A resize time series for one system.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub system: String,
    pub samples: Vec<Sample>,
}

/// Everything a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    pub machine: Machine,
    pub params: Params,
    pub limit: LimitRecord,
    pub rows: Vec<Row>,
    pub resize: Vec<Series>,
    pub notes: Vec<(String, String)>,
}

fn is_peer(system: &str) -> bool {
    !system.starts_with("dlht")
}

impl Run {
    /// Fill in the ratio to the best peer of each (workload, threads) cell.
    pub fn rank(&mut self) {
        let rows = self.rows.clone();
        for r in &mut self.rows {
            let best = rows
                .iter()
                .filter(|o| o.workload == r.workload && o.threads == r.threads && is_peer(&o.system))
                .map(|o| o.mops)
                .fold(0.0, f64::max);
            r.vs_best_peer = (best > 0.0).then(|| r.mops / best);
        }
    }

    /// The table printed at the end of a run.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<11} {:>3}  {:<18} {:>10} {:>10} {:>11}",
            "workload", "thr", "system", "M ops/s", "% limit", "vs best peer"
        );
        let mut cells: Vec<(String, usize)> =
            self.rows.iter().map(|r| (r.workload.clone(), r.threads)).collect();
        cells.dedup();
        let mut seen = Vec::new();
        for cell in cells {
            if seen.contains(&cell) {
                continue;
            }
            seen.push(cell.clone());
            let mut rows: Vec<&Row> =
                self.rows.iter().filter(|r| r.workload == cell.0 && r.threads == cell.1).collect();
            rows.sort_by(|a, b| b.mops.total_cmp(&a.mops));
            for r in rows {
                let pct = r.pct_of_limit.map(|p| format!("{p:.0}%")).unwrap_or_else(|| "-".into());
                let vs = r.vs_best_peer.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "-".into());
                let _ = writeln!(
                    s,
                    "{:<11} {:>3}  {:<18} {:>10.2} {:>10} {:>11}",
                    r.workload, r.threads, r.system, r.mops, pct, vs
                );
            }
            let _ = writeln!(s);
        }
        s
    }

    /// results.csv, resize.csv and results.json in `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut csv = String::from("system,workload,threads,mops,pct_of_limit,vs_best_peer\n");
        for r in &self.rows {
            let opt = |o: Option<f64>| o.map(|v| format!("{v:.4}")).unwrap_or_default();
            let _ = writeln!(
                csv,
                "{},{},{},{:.4},{},{}",
                r.system,
                r.workload,
                r.threads,
                r.mops,
                opt(r.pct_of_limit),
                opt(r.vs_best_peer)
            );
        }
        std::fs::write(dir.join("results.csv"), csv)?;
        let mut rcsv = String::from("system,ms,get_mops,insert_mops\n");
        for s in &self.resize {
            for p in &s.samples {
                let _ = writeln!(rcsv, "{},{},{:.4},{:.4}", s.system, p.ms, p.get_mops, p.insert_mops);
            }
        }
        std::fs::write(dir.join("resize.csv"), rcsv)?;
        std::fs::write(
            dir.join("results.json"),
            serde_json::to_string_pretty(self).map_err(std::io::Error::other)?,
        )
    }
}
