//! Resident bytes per key over table sizes: every system holds 2^N u64
//! pairs (N from `--from` to `--to`), grown from empty (`with_capacity(0)`)
//! and presized (`with_capacity(2^N)`), and the process's anonymous
//! resident memory above what it held before the table was made is divided
//! by the keys. Below 2^18 keys a point holds several tables of the size
//! (2^18 keys in all), so that the heap a process starts with cannot hide
//! a small table.
//!
//! Each point runs in a fresh child process (this binary, `memory
//! --point`): resident memory is per process, and an allocator keeps what
//! one table freed for the next, so points measured in one process would
//! bleed into each other. One thread inserts (no thread stacks or
//! per-thread caches in the figure), and every key is read back before the
//! child answers.

use crate::compare::workloads::key;
use crate::progress::Progress;
use crate::studies::write;
use crate::with_system;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Systems the sweep measures by default.
pub const DEFAULT_SYSTEMS: [&str; 7] =
    ["dlht", "dashmap", "papaya", "scc", "flurry", "leapfrog", "hashbrown-1t"];

/// Options of the memory sweep.
#[derive(clap::Args, Clone, Debug)]
pub struct MemoryArgs {
    /// Smallest table: 2^N keys.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(4..=28))]
    pub from: u32,
    /// Largest table: 2^N keys.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(4..=28))]
    pub to: u32,
    /// Systems, comma-separated (default: dlht and every Rust peer).
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(crate::compare::systems::ALL))]
    pub systems: Option<Vec<String>>,
    /// Folder for memory.csv, memory.json and the plots.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// 2^10 … 2^12 keys, a few seconds.
    #[arg(long)]
    pub smoke: bool,
    /// Measure one point and print its bytes per key (the child's job):
    /// `SYSTEM,grown|presized,LOG2`.
    #[arg(long, hide = true)]
    pub point: Option<String>,
}

/// How a table starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Start {
    /// `with_capacity(0)`: grows as keys arrive.
    Grown,
    /// `with_capacity(n)`.
    Presized,
}

impl Start {
    fn name(self) -> &'static str {
        match self {
            Start::Grown => "grown",
            Start::Presized => "presized",
        }
    }
}

/// One point of the sweep.
#[derive(Clone, Debug, Serialize)]
struct Point {
    system: String,
    start: Start,
    keys_log2: u32,
    /// Resident bytes above the process's start, per key.
    bytes_per_key: f64,
}

/// Anonymous resident bytes of this process: the heap and mappings a table
/// makes, without the pages of this binary's code that its first calls
/// fault in (file-backed, and 100–200 KiB: more than a 2^10-key table).
fn rss_bytes() -> f64 {
    crate::compare::proc_bytes("/proc/self/status", "RssAnon:").unwrap_or(0) as f64
}

/// Tables a point holds at once: enough of them that a small table's
/// figure is not lost in the heap the process already had (one table of
/// 2^10 keys is 16 KiB of payload, less than the slack a fresh heap keeps:
/// peers measured 4 bytes per key there), at least 2^18 keys in all.
fn copies(log2: u32) -> usize {
    1 << 18u32.saturating_sub(log2)
}

/// The child's job: build `copies(log2)` tables of 2^log2 keys, fill them,
/// read them back; bytes per key over all of them.
fn measure_point(system: &str, start: Start, log2: u32) -> Result<f64, String> {
    let n = 1u64 << log2;
    with_system!(system, T => {
        let base = rss_bytes();
        let mut tables = Vec::with_capacity(copies(log2));
        for _ in 0..copies(log2) {
            let t = T::with_capacity(if start == Start::Presized { n as usize } else { 0 });
            for i in 0..n {
                if !t.insert(key(i), i) {
                    return Err(format!("{system}: the insert of fresh key {i} failed"));
                }
            }
            tables.push(t);
        }
        let bytes = rss_bytes() - base;
        for t in &tables {
            if let Some(i) = (0..n).find(|&i| t.get(key(i)) != Some(i)) {
                return Err(format!("{system}: key {i} was lost"));
            }
        }
        Ok(bytes / (n as f64 * tables.len() as f64))
    })
}

/// A figure below the 16 bytes a pair takes is a broken measurement, not
/// a lean table (every point holds at least 4 MiB of pairs: see `copies`).
fn plausible(system: &str, log2: u32, bytes_per_key: f64) -> Result<f64, String> {
    if bytes_per_key < 16.0 {
        return Err(format!("{system} at 2^{log2}: {bytes_per_key:.1} bytes per key, below the payload"));
    }
    Ok(bytes_per_key)
}

/// Run one point in a child process.
fn child(system: &str, start: Start, log2: u32) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this binary: {e}"))?;
    let out = Command::new(exe)
        .args(["memory", "--point", &format!("{system},{},{log2}", start.name())])
        .output()
        .map_err(|e| format!("starting a child: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{system} {} 2^{log2}: {}",
            start.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("bytes_per_key ")?.trim().parse().ok())
        .ok_or_else(|| format!("{system} {} 2^{log2}: no answer in {stdout:?}", start.name()))
}

/// The memory sweep. True if a dlht point failed.
pub fn run(a: MemoryArgs) -> bool {
    if let Some(p) = &a.point {
        return point(p);
    }
    let machine = crate::harness::machine::Machine::describe();
    println!("# dlht-bench memory: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    let (from, to) = if a.smoke { (10, 12) } else { (a.from, a.to.max(a.from)) };
    let mut systems: Vec<String> =
        a.systems.clone().unwrap_or_else(|| DEFAULT_SYSTEMS.iter().map(|s| s.to_string()).collect());
    for (system, note) in crate::compare::cpp::take_unbuilt(&mut systems) {
        println!("# {system}: {note}");
    }
    let mut points = Vec::new();
    let mut failed = false;
    let len = (to - from + 1) as usize * 2 * systems.len();
    let bar = Progress::new("Measuring", len as u64, "points");
    for log2 in from..=to {
        for start in [Start::Grown, Start::Presized] {
            for s in &systems {
                bar.set_message(format!("{s}, 2^{log2} keys {}, in a child process", start.name()));
                bar.inc(1);
                match child(s, start, log2).and_then(|b| plausible(s, log2, b)) {
                    Ok(b) => {
                        points.push(Point { system: s.clone(), start, keys_log2: log2, bytes_per_key: b })
                    }
                    Err(e) => {
                        let peer = !s.starts_with("dlht");
                        eprintln!("check failed{}: {e}", if peer { " (a peer; left out)" } else { "" });
                        failed |= !peer;
                    }
                }
            }
        }
    }
    drop(bar);
    print_table(&points, &systems, from, to);
    let dir =
        a.out.clone().unwrap_or_else(|| PathBuf::from(format!("dlht-results/memory-{}", machine.date_unix)));
    write(&dir, "memory.csv", &csv(&points));
    write(&dir, "memory.json", &serde_json::to_string_pretty(&points).unwrap_or_default());
    for start in [Start::Grown, Start::Presized] {
        if let Err(e) = plot(&points, start, &dir) {
            eprintln!("plotting {}: {e}", start.name());
        }
    }
    println!("# results: {}", dir.display());
    failed
}

/// The child's side of `--point`: prints `bytes_per_key X`; true if it failed.
fn point(spec: &str) -> bool {
    let parts: Vec<&str> = spec.split(',').collect();
    let parsed = match parts.as_slice() {
        [s, "grown", l] => l.parse().ok().map(|l| (*s, Start::Grown, l)),
        [s, "presized", l] => l.parse().ok().map(|l| (*s, Start::Presized, l)),
        _ => None,
    };
    let Some((system, start, log2)) = parsed else {
        eprintln!("--point wants SYSTEM,grown|presized,LOG2, not {spec:?}");
        return true;
    };
    match measure_point(system, start, log2) {
        Ok(b) => {
            println!("bytes_per_key {b:.3}");
            false
        }
        Err(e) => {
            eprintln!("{e}");
            true
        }
    }
}

/// dlht's bytes per key over the smallest peer's at one point.
fn dlht_over_smallest_peer(points: &[Point], start: Start, log2: u32) -> Option<f64> {
    let at = |p: &&Point| p.start == start && p.keys_log2 == log2;
    let dlht = points.iter().filter(at).find(|p| p.system == "dlht")?.bytes_per_key;
    let peer = points
        .iter()
        .filter(at)
        .filter(|p| !p.system.starts_with("dlht"))
        .map(|p| p.bytes_per_key)
        .fold(f64::INFINITY, f64::min);
    peer.is_finite().then(|| dlht / peer)
}

fn print_table(points: &[Point], systems: &[String], from: u32, to: u32) {
    for start in [Start::Grown, Start::Presized] {
        print!("\n{:<10}", format!("{} keys", start.name()));
        for s in systems {
            print!(" {s:>12}");
        }
        println!(" {:>16}", "dlht ÷ smallest");
        for log2 in from..=to {
            print!("{:<10}", format!("2^{log2}"));
            for s in systems {
                let b = points.iter().find(|p| &p.system == s && p.start == start && p.keys_log2 == log2);
                match b {
                    Some(p) => print!(" {:>12.1}", p.bytes_per_key),
                    None => print!(" {:>12}", "-"),
                }
            }
            match dlht_over_smallest_peer(points, start, log2) {
                Some(r) => println!(" {r:>16.2}"),
                None => println!(" {:>16}", "-"),
            }
        }
    }
    println!(
        "\n# resident bytes per key (u64 keys and values), each point a fresh process, one thread inserting"
    );
}

fn csv(points: &[Point]) -> String {
    let mut csv = String::from("system,start,keys_log2,bytes_per_key,dlht_over_smallest_peer\n");
    for p in points {
        let ratio = dlht_over_smallest_peer(points, p.start, p.keys_log2).map(|r| format!("{r:.3}"));
        let _ = writeln!(
            csv,
            "{},{},{},{:.2},{}",
            p.system,
            p.start.name(),
            p.keys_log2,
            p.bytes_per_key,
            ratio.unwrap_or_default()
        );
    }
    csv
}

/// Bytes per key against table size, one line per system, to
/// `memory-<start>.png` and `.svg`.
fn plot(points: &[Point], start: Start, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let mine: Vec<&Point> = points.iter().filter(|p| p.start == start).collect();
    if mine.is_empty() {
        return Ok(());
    }
    crate::compare::plot::register_font();
    let stem = format!("memory-{}", start.name());
    draw(BitMapBackend::new(&dir.join(format!("{stem}.png")), (900, 560)).into_drawing_area(), start, &mine)?;
    draw(SVGBackend::new(&dir.join(format!("{stem}.svg")), (900, 560)).into_drawing_area(), start, &mine)?;
    Ok(())
}

fn draw<DB: plotters::prelude::DrawingBackend>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    start: Start,
    mine: &[&Point],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    use plotters::prelude::*;
    let (lo, hi) = mine.iter().fold((u32::MAX, 0), |(lo, hi), p| (lo.min(p.keys_log2), hi.max(p.keys_log2)));
    let top = mine.iter().map(|p| p.bytes_per_key).fold(0.0, f64::max).min(400.0) * 1.1;
    let mut systems: Vec<&str> = Vec::new();
    for p in mine {
        if !systems.contains(&p.system.as_str()) {
            systems.push(&p.system);
        }
    }
    root.fill(&WHITE)?;
    let title = format!("resident bytes per key, {} (u64 pairs)", start.name());
    let mut chart = ChartBuilder::on(&root)
        .caption(&title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(lo as f64..hi.max(lo + 1) as f64, 0.0..top)?;
    chart.configure_mesh().x_desc("keys (log2)").y_desc("bytes per key").draw()?;
    for (i, s) in systems.iter().enumerate() {
        let color = crate::compare::plot::PALETTE[i % crate::compare::plot::PALETTE.len()];
        let line: Vec<(f64, f64)> = mine
            .iter()
            .filter(|p| p.system == *s)
            .map(|p| (p.keys_log2 as f64, p.bytes_per_key.min(top)))
            .collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))?
            .label(*s)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_reads_every_key_back() {
        // The figure itself is checked where it is measured alone, in a
        // child process (`plausible`); here other tests allocate beside it.
        for s in ["dlht", "dashmap", "hashbrown-1t"] {
            for start in [Start::Grown, Start::Presized] {
                assert!(measure_point(s, start, 16).unwrap().is_finite(), "{s} {start:?}");
            }
        }
        assert!(plausible("dlht", 20, 15.9).is_err());
        assert!(plausible("dlht", 20, 16.0).is_ok());
    }

    #[test]
    fn the_ratio_is_taken_against_the_smallest_peer() {
        let p = |system: &str, b: f64| Point {
            system: system.into(),
            start: Start::Grown,
            keys_log2: 20,
            bytes_per_key: b,
        };
        let points = [p("dlht", 40.0), p("dashmap", 34.0), p("scc", 20.0), p("dlht-local", 10.0)];
        assert_eq!(dlht_over_smallest_peer(&points, Start::Grown, 20), Some(2.0));
        assert_eq!(dlht_over_smallest_peer(&points, Start::Presized, 20), None);
    }
}
