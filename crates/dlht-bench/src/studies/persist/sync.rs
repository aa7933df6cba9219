//! `--sync-ms`: the cost of sync mode. Insert+remove pairs on a FileMap
//! with `Durability::Sync { every }` at each interval against process
//! mode, in interleaved rounds, and the latency of `durable()` when it
//! syncs after every batch.

use super::args::PersistArgs;
use super::maps::{remove_dir, Dirs};
use crate::harness::machine::Machine;
use crate::harness::Spread;
use crate::progress::Progress;
use std::time::{Duration, Instant};

/// `--sync-ms` (returns true if something failed): insert+remove pairs per second on a FileMap in process mode
/// and in sync mode at each interval, interleaved rounds, each mode on a
/// fresh map in a fresh directory, prepopulated (untimed) with `keys` keys;
/// for interval 0, `durable()` after every batch and its latency.
pub(super) fn sync_cost(a: &PersistArgs, machine: &Machine) -> bool {
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
    let bar = Progress::new("Measuring", (rounds as usize * modes.len() * a.threads.len()) as u64, "steps");
    for round in 0..rounds {
        for (mi, mode) in modes.iter().enumerate() {
            bar.set_message(format!("round {}/{rounds}: {}, populating {keys} keys", round + 1, name(mode)));
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
                bar.set_message(format!("round {}/{rounds}: {} on {t} thread(s)", round + 1, name(mode)));
                bar.inc(1);
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
    drop(bar);
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
