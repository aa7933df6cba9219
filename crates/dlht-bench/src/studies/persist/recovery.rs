//! `--recovery`: the time to the first get after kill -9 in the middle of
//! a grow. This binary runs itself as a child that fills a FileMap, says
//! "growing" and grows it; the parent kills it, reopens the map, times the
//! open and the first get, and checks every key (untimed).

use super::args::PersistArgs;
use super::footprint::{disk, faults};
use super::maps::{open_file, remove_dir, Dirs, Persistent};
use super::measure::{opt, verify};
use crate::compare::workloads::key;
use crate::harness::machine::Machine;
use crate::harness::Spread;
use crate::progress::Progress;
use crate::studies::write;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
pub(super) fn child(a: &PersistArgs) -> bool {
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
pub(super) fn recovery(a: &PersistArgs, machine: &Machine) -> bool {
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
    let bar = Progress::new("Recovering", rounds as u64, "rounds");
    for round in 0..rounds {
        let cold = a.drop_caches && round % 2 == 0;
        let what = format!(
            "recovery round {}/{rounds} ({}): the child fills 2^{} keys, is killed, the map reopened and checked",
            round + 1,
            if cold { "cold" } else { "warm" },
            keys.trailing_zeros()
        );
        bar.println(format!("# {what}"));
        bar.set_message(what);
        bar.inc(1);
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
    drop(bar);
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
                "# {}: time to first get {} ms, to every key {} ms (median, min–max); the target for the first \
                 get is 50 ms at 2^25 keys",
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
