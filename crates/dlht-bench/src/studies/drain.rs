//! Fill, then drain, repeated: each system's table is filled with 2^N keys
//! and emptied again, `--cycles` times, on `--threads` threads; the rate of
//! each phase and the process's resident memory after it (less what it was
//! before the table was made) show whether memory comes back when a table
//! empties. dlht runs twice: built empty (`Map::new`, which shrinks on its
//! own as it drains) and built for the fill (`with_capacity`, which never
//! shrinks below what it was built for). Systems run one after another
//! (resident memory is per process), each on a fresh table; every insert
//! of a fresh key and every remove of a present one must succeed.

use crate::compare::workloads::key;
use crate::progress::Progress;
use crate::studies::write;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// Options of the fill-then-drain study.
#[derive(clap::Args, Clone, Debug)]
pub struct DrainArgs {
    /// Keys per fill: 2^N.
    #[arg(long, default_value_t = 22, value_parser = clap::value_parser!(u32).range(10..=28))]
    pub keys_log2: u32,
    /// Fill-and-drain cycles per system.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub cycles: u32,
    /// Threads filling and draining.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Folder for drain.csv and drain.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny tables, a few seconds.
    #[arg(long)]
    pub smoke: bool,
}

/// Insert and remove, as the study uses them: true if it did what it
/// should (a fresh key inserted, a present key removed).
trait Drainable: Sync {
    fn insert(&self, k: u64) -> bool;
    fn remove(&self, k: u64) -> bool;
}

impl Drainable for dlht::Map<u64, u64> {
    fn insert(&self, k: u64) -> bool {
        dlht::Map::insert(self, k, k).is_ok()
    }
    fn remove(&self, k: u64) -> bool {
        dlht::Map::remove(self, &k).is_some()
    }
}

impl Drainable for dashmap::DashMap<u64, u64> {
    fn insert(&self, k: u64) -> bool {
        dashmap::DashMap::insert(self, k, k).is_none()
    }
    fn remove(&self, k: u64) -> bool {
        dashmap::DashMap::remove(self, &k).is_some()
    }
}

impl Drainable for papaya::HashMap<u64, u64> {
    fn insert(&self, k: u64) -> bool {
        self.pin().try_insert(k, k).is_ok()
    }
    fn remove(&self, k: u64) -> bool {
        self.pin().remove(&k).is_some()
    }
}

impl Drainable for scc::HashMap<u64, u64> {
    fn insert(&self, k: u64) -> bool {
        self.insert_sync(k, k).is_ok()
    }
    fn remove(&self, k: u64) -> bool {
        self.remove_sync(&k).is_some()
    }
}

/// One cycle of one system.
#[derive(Serialize)]
struct Row {
    system: &'static str,
    cycle: u32,
    fill_mops: f64,
    drain_mops: f64,
    /// Resident MiB above the start, after the fill.
    full_mib: f64,
    /// Resident MiB above the start, after the drain.
    drained_mib: f64,
}

/// Resident bytes of this process.
fn rss() -> f64 {
    crate::compare::rss_gib() * (1u64 << 30) as f64
}

/// Run `op` on keys `0..n` (by index) over `threads` threads; millions of
/// operations per second, or the first key whose operation failed.
fn phase(t: &dyn Drainable, n: u64, threads: usize, op: fn(&dyn Drainable, u64) -> bool) -> Result<f64, u64> {
    let start = Instant::now();
    let failed: Vec<Option<u64>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads as u64)
            .map(|th| s.spawn(move || (th..n).step_by(threads).map(key).find(|&k| !op(t, k))))
            .collect();
        workers.into_iter().map(|w| w.join().expect("a worker panicked")).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    match failed.into_iter().flatten().next() {
        Some(k) => Err(k),
        None => Ok(n as f64 / secs / 1e6),
    }
}

/// Fill and drain `t` `cycles` times; the rows, or what failed.
fn cycles(
    name: &'static str,
    t: &dyn Drainable,
    n: u64,
    threads: usize,
    cycles: u32,
    base: f64,
    bar: &Progress,
) -> Result<Vec<Row>, String> {
    let mib = |b: f64| (b - base) / (1u64 << 20) as f64;
    (0..cycles)
        .map(|cycle| {
            bar.set_message(format!("{name}: cycle {}/{cycles}, fill then drain of {n} keys", cycle + 1));
            bar.inc(1);
            let fill = phase(t, n, threads, |t, k| t.insert(k))
                .map_err(|k| format!("{name}: the insert of fresh key {k:#x} failed"))?;
            let full = rss();
            let drain = phase(t, n, threads, |t, k| t.remove(k))
                .map_err(|k| format!("{name}: the remove of present key {k:#x} failed"))?;
            Ok(Row {
                system: name,
                cycle,
                fill_mops: fill,
                drain_mops: drain,
                full_mib: mib(full),
                drained_mib: mib(rss()),
            })
        })
        .collect()
}

/// The fill-then-drain study. True if a dlht result check failed.
pub fn run(a: DrainArgs) -> bool {
    let machine = crate::harness::machine::Machine::describe();
    println!("# dlht-bench drain: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    let n = 1u64 << if a.smoke { 12 } else { a.keys_log2 };
    let threads = a.threads.max(1);
    let mut rows = Vec::new();
    let mut failed = false;
    // Each table is made, cycled and dropped before the next is made.
    type Make = fn(u64) -> Box<dyn Drainable>;
    let systems: [(&'static str, Make); 5] = [
        ("dlht", |_| Box::new(dlht::Map::<u64, u64>::new())),
        ("dlht-sized", |n| Box::new(dlht::Map::<u64, u64>::with_capacity(n as usize))),
        ("dashmap", |_| Box::new(dashmap::DashMap::<u64, u64>::new())),
        ("papaya", |_| Box::new(papaya::HashMap::<u64, u64>::new())),
        ("scc", |_| Box::new(scc::HashMap::<u64, u64>::new())),
    ];
    let per_system = if a.smoke { 2 } else { a.cycles };
    let bar = Progress::new("Draining", (systems.len() as u32 * per_system) as u64, "cycles");
    for (name, make) in systems {
        let base = rss();
        let t = make(n);
        match cycles(name, &*t, n, threads, per_system, base, &bar) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!(
                    "check failed{}: {e}",
                    if name.starts_with("dlht") { "" } else { " (a peer; left out)" }
                );
                failed |= name.starts_with("dlht");
            }
        }
    }
    drop(bar);
    println!(
        "{:<10} {:>5} {:>12} {:>12} {:>14} {:>16}",
        "system", "cycle", "fill M/s", "drain M/s", "full MiB", "drained MiB"
    );
    let mut csv = String::from("system,cycle,fill_mops,drain_mops,full_mib,drained_mib\n");
    for r in &rows {
        println!(
            "{:<10} {:>5} {:>12.2} {:>12.2} {:>14.0} {:>16.0}",
            r.system, r.cycle, r.fill_mops, r.drain_mops, r.full_mib, r.drained_mib
        );
        let _ = writeln!(
            csv,
            "{},{},{:.4},{:.4},{:.1},{:.1}",
            r.system, r.cycle, r.fill_mops, r.drain_mops, r.full_mib, r.drained_mib
        );
    }
    println!(
        "# 2^{} keys per fill, {threads} thread(s); resident memory above what the process held before each table was made",
        n.trailing_zeros()
    );
    let dir =
        a.out.clone().unwrap_or_else(|| PathBuf::from(format!("dlht-results/drain-{}", machine.date_unix)));
    write(&dir, "drain.csv", &csv);
    write(&dir, "drain.json", &serde_json::to_string_pretty(&rows).unwrap_or_default());
    println!("# results: {}", dir.display());
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_fills_and_drains() {
        for t in [
            Box::new(dlht::Map::<u64, u64>::new()) as Box<dyn Drainable>,
            Box::new(dashmap::DashMap::<u64, u64>::new()),
            Box::new(papaya::HashMap::<u64, u64>::new()),
            Box::new(scc::HashMap::<u64, u64>::new()),
        ] {
            let rows = cycles("t", &*t, 1 << 12, 2, 2, rss(), &Progress::hidden()).unwrap();
            assert_eq!(rows.len(), 2);
            assert!(rows.iter().all(|r| r.fill_mops > 0.0 && r.drain_mops > 0.0));
        }
    }

    #[test]
    fn a_failed_remove_is_reported() {
        /// Forgets every insert.
        struct Forgetful;
        impl Drainable for Forgetful {
            fn insert(&self, _: u64) -> bool {
                true
            }
            fn remove(&self, _: u64) -> bool {
                false
            }
        }
        assert!(cycles("forgetful", &Forgetful, 16, 1, 1, 0.0, &Progress::hidden()).is_err());
    }
}
