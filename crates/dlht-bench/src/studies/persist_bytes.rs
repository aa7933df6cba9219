//! The persistent byte map against the in-memory one:
//! `FileByteMap` (index in files, values in the heap file) ÷ `ByteMap` on
//! batched gets, insert+remove and population, in interleaved rounds, with
//! resident bytes per key and the files' size on disk beside them.
//!
//! Each round builds both maps anew, presized for `--keys` and populated
//! (untimed) with 8-byte keys (found in the slot: a get touches the value
//! only to check it) and `--value-bytes` values; then, at each thread
//! count, each workload runs on one and then the other, the order
//! alternating from round to round: batched gets (`get_many` of 16 keys,
//! every value checked), insert of a fresh key then its remove, and
//! population (`--keys`/4 fresh keys into a map made small, so that it
//! grows). Ratios are taken within a round; the median is reported.
//!
//! `--recovery`: this binary runs itself as a child that fills a
//! FileByteMap with `--keys` keys, says "growing" and grows it; the parent
//! kills it (SIGKILL) 50–500 ms later, reopens the map, times the open and
//! the first get, checks every key, and times the background reclamation.

use crate::harness::limit::splitmix;
use crate::harness::machine::Machine;
use crate::progress::Progress;
use dlht::{Access, ByteMap, FileByteMap, FileHasher, OpenOptions};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Options of the persistent byte map study.
#[derive(clap::Args, Clone, Debug)]
pub struct PersistBytesArgs {
    /// Keys in each map (a power of two; 2^N accepted).
    #[arg(long, default_value = "2^22", value_parser = super::persist::keys_arg)]
    keys: u64,
    /// Thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 1.0)]
    secs: f64,
    /// Bytes of each value.
    #[arg(long, default_value_t = 32)]
    value_bytes: usize,
    /// Directory for the persistent maps (default: the system's temporary
    /// directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// A short run (2^14 keys, one round, 0.1 s) that checks the harness.
    #[arg(long)]
    smoke: bool,
    /// Instead: recovery after kill -9 in the middle of a grow (rounds of
    /// a child filling `--keys` keys).
    #[arg(long)]
    recovery: bool,
    /// The --recovery child's job (internal).
    #[arg(long, hide = true)]
    child: Option<PathBuf>,
    /// Where the report goes.
    #[arg(long, default_value = "docs/results/persist-bytes")]
    out: PathBuf,
}

/// A workload at a thread count: (ByteMap, FileByteMap) Mops/s per round.
type Row = (String, usize, Vec<(f64, f64)>);

/// Either map, behind the calls the workloads make.
enum Any {
    Memory(ByteMap<FileHasher>),
    File(FileByteMap, PathBuf),
}

impl Any {
    fn map(&self) -> &ByteMap<FileHasher> {
        match self {
            Any::Memory(m) | Any::File(m, _) => m,
        }
    }
}

impl Drop for Any {
    fn drop(&mut self) {
        if let Any::File(_, dir) = self {
            let _ = std::fs::remove_dir_all(&*dir);
        }
    }
}

fn value_of(k: u64, bytes: usize) -> Vec<u8> {
    let mut v = k.to_le_bytes().repeat(bytes.div_ceil(8).max(1));
    v.truncate(bytes.max(8));
    v
}

fn make(file: bool, dir: &Path, capacity: u64, a: &PersistBytesArgs, tag: &str) -> Any {
    if !file {
        return Any::Memory(
            ByteMap::try_with_capacity_and_hasher(capacity as usize, FileHasher::random()).unwrap(),
        );
    }
    let d = dir.join(format!("dlht-persist-bytes-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    Any::File(open_sized(&d, capacity, a), d)
}

/// Insert keys `from..to` on `threads` threads: Mops/s.
fn fill(m: &ByteMap<FileHasher>, from: u64, to: u64, threads: usize, vb: usize) -> f64 {
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            s.spawn(move || {
                let g = m.guard();
                let mut k = from + t;
                while k < to {
                    m.insert(&k.to_le_bytes(), &value_of(k, vb), &g).unwrap().unwrap();
                    k += threads as u64;
                }
            });
        }
    });
    (to - from) as f64 / started.elapsed().as_secs_f64() / 1e6
}

/// Batched gets of present keys (16 per `get_many`, every value checked)
/// on `threads` threads for `dur`: Mops/s.
fn gets(m: &ByteMap<FileHasher>, n: u64, threads: usize, dur: Duration, seed: u64) -> f64 {
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            let done = &done;
            s.spawn(move || {
                let mut r = seed ^ (t << 40);
                let start = Instant::now();
                let mut ops = 0u64;
                let g = m.guard();
                while start.elapsed() < dur {
                    for _ in 0..64 {
                        let ks: [u64; 16] = core::array::from_fn(|_| {
                            r += 1;
                            splitmix(r) % n
                        });
                        let kb: [[u8; 8]; 16] = ks.map(u64::to_le_bytes);
                        let keys: [&[u8]; 16] = core::array::from_fn(|i| &kb[i][..]);
                        let mut out = [None; 16];
                        m.get_many(&keys, &mut out, Access::Key, &g).unwrap();
                        for (k, v) in ks.iter().zip(out) {
                            let v = v.expect("a present key is missing");
                            assert_eq!(v[..8], k.to_le_bytes(), "a wrong value");
                        }
                        ops += 16;
                    }
                }
                done.fetch_add(ops, Ordering::Relaxed);
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / dur.as_secs_f64() / 1e6
}

/// Insert a fresh key then remove it, one call each, on `threads` threads
/// for `dur`: million pairs per second.
fn insdel(m: &ByteMap<FileHasher>, n: u64, threads: usize, dur: Duration, vb: usize) -> f64 {
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads as u64 {
            let done = &done;
            s.spawn(move || {
                let start = Instant::now();
                let mut k = n + (t << 40);
                let v = value_of(k, vb);
                while start.elapsed() < dur {
                    for _ in 0..256 {
                        let g = m.guard();
                        let kb = k.to_le_bytes();
                        m.insert(&kb, &v, &g).unwrap().unwrap();
                        assert!(m.remove(&kb, &g).is_some());
                        k += 1;
                    }
                }
                done.fetch_add(k - n - (t << 40), Ordering::Relaxed);
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / dur.as_secs_f64() / 1e6
}

fn rss() -> (u64, u64) {
    let f = |k| crate::compare::proc_bytes("/proc/self/status", k).unwrap_or(0);
    (f("RssAnon:"), f("RssFile:"))
}

fn disk(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .map(|es| es.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.blocks() * 512).sum())
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Run the study. False: no result check failed (a failed check — a
/// missing key, a wrong value — panics; the ratios are reported, not
/// judged).
pub fn run(mut a: PersistBytesArgs) -> bool {
    if a.smoke {
        (a.keys, a.rounds, a.secs) = (1 << 14, 1, 0.1);
    }
    if let Some(dir) = a.child.clone() {
        child(&a, &dir);
    }
    if a.recovery {
        return recovery(&a);
    }
    let machine = Machine::describe();
    let dir = a.dir.clone().unwrap_or_else(std::env::temp_dir);
    let dur = Duration::from_secs_f64(a.secs);
    let n = a.keys;
    // (workload, threads) → per-round (memory, file) Mops.
    let mut rows: Vec<Row> = Vec::new();
    let mut row =
        |name: &str, t: usize, pair: (f64, f64)| match rows.iter_mut().find(|r| r.0 == name && r.1 == t) {
            Some(r) => r.2.push(pair),
            None => rows.push((name.to_string(), t, vec![pair])),
        };
    let mut footprint = Vec::new();
    // Per round: building both maps, then three workloads per thread count.
    let steps = a.rounds as usize * (1 + 3 * a.threads.len());
    let bar = Progress::new("Measuring", steps as u64, "steps");
    for round in 0..a.rounds {
        let file_first = round % 2 == 1;
        let mut built: [Option<Any>; 2] = [None, None];
        let at = format!("round {}/{}", round + 1, a.rounds);
        bar.set_message(format!("{at}: building and populating both maps with {n} keys (untimed)"));
        bar.inc(1);
        for file in if file_first { [true, false] } else { [false, true] } {
            let before = rss();
            let m = make(file, &dir, n, &a, &format!("r{round}"));
            fill(m.map(), 0, n, 2, a.value_bytes);
            let after = rss();
            let resident = after.0.saturating_sub(before.0) + after.1.saturating_sub(before.1);
            let on_disk = match &m {
                Any::File(_, d) => disk(d),
                Any::Memory(_) => 0,
            };
            footprint.push((file, resident as f64 / n as f64, on_disk as f64 / n as f64));
            built[file as usize] = Some(m);
        }
        let (mem, fil) = (built[0].as_ref().unwrap().map(), built[1].as_ref().unwrap().map());
        for &t in &a.threads {
            let seed = 0x5eed ^ round as u64;
            let both = |f: &dyn Fn(&ByteMap<FileHasher>) -> f64| {
                if file_first {
                    let b = f(fil);
                    (f(mem), b)
                } else {
                    let x = f(mem);
                    (x, f(fil))
                }
            };
            let on = format!("on {t} thread(s), ByteMap and FileByteMap");
            bar.set_message(format!("{at}: batched get {on}"));
            bar.inc(1);
            row("batched get", t, both(&|m| gets(m, n, t, dur, seed)));
            bar.set_message(format!("{at}: insert+remove {on}"));
            bar.inc(1);
            row("insert+remove", t, both(&|m| insdel(m, n, t, dur, a.value_bytes)));
            bar.set_message(format!("{at}: population of {} keys {on}", n / 4));
            bar.inc(1);
            let pop = |file: bool| {
                let m = make(file, &dir, 0, &a, &format!("pop{round}"));
                fill(m.map(), 0, n / 4, t, a.value_bytes)
            };
            let p = if file_first {
                let b = pop(true);
                (pop(false), b)
            } else {
                let x = pop(false);
                (x, pop(true))
            };
            row("population", t, p);
        }
    }
    drop(bar);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "FileByteMap ÷ ByteMap, {} keys of 8 bytes, {}-byte values, {} rounds × {:.1} s, dir {} ({})\n",
        n,
        a.value_bytes,
        a.rounds,
        a.secs,
        dir.display(),
        machine.line()
    );
    let _ = writeln!(
        md,
        "| workload | threads | ByteMap Mops/s | FileByteMap Mops/s | ratio per round | median |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for (name, t, pairs) in &rows {
        let ratios: Vec<f64> = pairs.iter().map(|(m, f)| f / m).collect();
        let _ = writeln!(
            md,
            "| {name} | {t} | {:.2} | {:.2} | {} | **{:.2}** |",
            median(pairs.iter().map(|p| p.0).collect()),
            median(pairs.iter().map(|p| p.1).collect()),
            ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(" "),
            median(ratios.clone())
        );
    }
    // The first round's: a later round's in-memory map reuses what the
    // allocator kept of the maps dropped before it (no new resident pages).
    let per = |file: bool, i: usize| {
        footprint.iter().find(|f| f.0 == file).map_or(0.0, |f| if i == 0 { f.1 } else { f.2 })
    };
    let _ = writeln!(
        md,
        "\nResident bytes per key after population, first round (anonymous + file pages): ByteMap {:.1}, FileByteMap {:.1}; FileByteMap's files on disk {:.1} bytes per key.",
        per(false, 0),
        per(true, 0),
        per(true, 1)
    );
    print!("{md}");
    let _ = std::fs::create_dir_all(&a.out);
    let _ = std::fs::write(a.out.join("persist-bytes.md"), &md);
    false
}

/// A FileByteMap in `dir` presized for `capacity` keys, its heap room for
/// `--keys` values three times over.
fn open_sized(dir: &Path, capacity: u64, a: &PersistBytesArgs) -> FileByteMap {
    let heap = (a.keys * (a.value_bytes as u64 + 64) * 3).max(64 << 20);
    FileByteMap::open_with(dir, OpenOptions::new().capacity(capacity as usize).heap_bytes(heap))
        .unwrap_or_else(|e| panic!("opening a FileByteMap in {}: {e}", dir.display()))
}

/// The --recovery child: fill, say "growing", grow, say "grown", wait to
/// be killed.
fn child(a: &PersistBytesArgs, dir: &Path) -> ! {
    use std::io::Write as _;
    let m = open_sized(dir, a.keys, a);
    fill(&m, 0, a.keys, 2, a.value_bytes);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "growing");
    let _ = out.flush();
    m.reserve(2 * a.keys as usize);
    let _ = writeln!(out, "grown");
    let _ = out.flush();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Kill a child mid-grow and recover, `--rounds` times: the report.
fn recovery(a: &PersistBytesArgs) -> bool {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};
    let dir = a
        .dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("dlht-bytes-recovery-{}", std::process::id()));
    let mut md = format!(
        "FileByteMap recovery after kill -9 mid-grow: {} keys of 8 bytes, {}-byte values, dir {} ({})\n\n\
         | round | killed after | open ms | first get ms | crashed | resize resumed | keys checked | reclaim s | blocks reclaimed |\n|---|---|---|---|---|---|---|---|---|\n",
        a.keys,
        a.value_bytes,
        dir.display(),
        Machine::describe().line()
    );
    let mut failed = false;
    let bar = Progress::new("Recovering", a.rounds as u64, "rounds");
    for round in 0..a.rounds {
        bar.set_message(format!(
            "round {}/{}: a child fills {} keys, is killed mid-grow, the map reopened and checked",
            round + 1,
            a.rounds,
            a.keys
        ));
        bar.inc(1);
        let _ = std::fs::remove_dir_all(&dir);
        let exe = std::env::current_exe().expect("this binary");
        let mut c = Command::new(exe)
            .args([
                "persist-bytes",
                "--keys",
                &a.keys.to_string(),
                "--value-bytes",
                &a.value_bytes.to_string(),
            ])
            .arg("--child")
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the child starts");
        let mut lines = std::io::BufReader::new(c.stdout.take().expect("piped")).lines();
        if !lines.any(|l| l.is_ok_and(|l| l == "growing")) {
            let _ = c.kill();
            let _ = c.wait();
            eprintln!("check failed: the child ended before it grew the map");
            return true;
        }
        let delay = 50 + splitmix(round as u64 + 0xd1e) % 450;
        std::thread::sleep(Duration::from_millis(delay));
        let _ = c.kill(); // SIGKILL
        let _ = c.wait();
        let t0 = Instant::now();
        let m = FileByteMap::open(&dir).expect("reopening after the kill");
        let probe = a.keys / 2;
        let first = m.get(&probe.to_le_bytes(), &m.guard()).map(|v| v[..8] == probe.to_le_bytes());
        let first_get = t0.elapsed();
        let r = m.recovery();
        let mut bad = (first != Some(true)) as u64;
        {
            let g = m.guard();
            for k in 0..a.keys {
                if m.get(&k.to_le_bytes(), &g).is_none_or_wrong(k) {
                    bad += 1;
                }
            }
        }
        let rec = m.wait_heap_reclaimed();
        let reclaim = t0.elapsed();
        failed |= bad > 0;
        md += &format!(
            "| {round} | {delay} ms | {:.2} | {:.2} | {} | {} | {} ({bad} bad) | {:.2} | {} |\n",
            r.open_time.as_secs_f64() * 1e3,
            first_get.as_secs_f64() * 1e3,
            r.crashed,
            r.resize_resumed,
            a.keys,
            reclaim.as_secs_f64(),
            rec.blocks_freed
        );
        drop(m);
        let _ = std::fs::remove_dir_all(&dir);
    }
    drop(bar);
    print!("{md}");
    let _ = std::fs::create_dir_all(&a.out);
    let _ = std::fs::write(a.out.join("recovery-bytes.md"), &md);
    if failed {
        eprintln!("check failed: keys missing or wrong after recovery");
    }
    failed
}

/// A value that is absent or not its key's.
trait Checked {
    fn is_none_or_wrong(&self, k: u64) -> bool;
}

impl Checked for Option<dlht::ValueRef<'_>> {
    fn is_none_or_wrong(&self, k: u64) -> bool {
        self.as_ref().map_or(true, |v| v.len() < 8 || v[..8] != k.to_le_bytes())
    }
}
