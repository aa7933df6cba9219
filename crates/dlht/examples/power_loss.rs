//! Power-loss study: a writer that acknowledges `durable()` and a checker
//! for what a power loss left. Opt-in, driven by `scripts/power-loss.sh`
//! under LazyFS (results: `docs/results/power-loss/`); not part of the
//! test suite.
//!
//! ```text
//! power_loss write <dir> <filemap|bytemap> <seed> --ack FILE [--every-ms N] [--threads T] [--max-secs S]
//! power_loss check <dir> <filemap|bytemap> <ackfile>
//! power_loss server-write <host:port> <seed> --ack FILE [--max-secs S]
//! power_loss server-check <host:port> <ackfile>
//! ```
//!
//! The writer runs in `Durability::Sync { every }` (`--every-ms 0`: one
//! sync per `durable()` call; otherwise periodic group commits) with
//! `--threads` threads, each writing batches of 16 upserts forever and
//! calling `durable()` after each. The ack file (kept OUTSIDE the file
//! system under test) gets `R <seed> <kind> <every_ms> <threads>` at the
//! start, `O <seed>` once the map is open, `W <batch>` before a batch's first write (not synced: the writer
//! is only killed, the ack file's own file system does not lose power) and
//! `A <batch>` once `durable()` has returned (synced before the next batch).
//!
//! Batch ids are `(seed << 32) | (thread << 28) | i`: unique across rounds and
//! increasing per thread. Every thread owns its keys (no two threads write
//! the same key), so per key the writes are ordered by batch id. The keys a
//! batch writes and every value are functions of the batch id and key
//! alone, so the checker recomputes them: a value found is valid if it is
//! the one the last acknowledged batch of that key wrote, or one a later
//! started batch wrote (unacknowledged, so it may or may not be there).
//! Anything else is classified:
//!
//! - `lost`: an acknowledged write is gone (key absent, or an older value
//!   back) and no batch of the last round (the one the fault stopped)
//!   changed the key;
//! - `lost_changed`: the same, but a later (unacknowledged) batch of the
//!   last round had written the key before the fault (DESIGN, "Persistent
//!   byte maps": documented as possible for a byte map);
//! - `torn`: a value that names a batch which wrote this key, but whose
//!   bytes or length differ from what that batch wrote;
//! - `wrong`: a value no started batch wrote for this key, or a key no
//!   batch wrote.
//!
//! A loss an earlier check already reported (the key found without a
//! value since its last acknowledged write: `<ackfile>.seen`) counts as
//! `lost_earlier`, not again (for runs that go on after a documented loss).
//!
//! `check` prints `recovery()` and, for a byte map, the heap's damage
//! counters after the reclamation walk, then one `RESULT` line; it exits 0
//! if nothing was lost, torn or wrong, 1 otherwise, 2 if the map would not
//! open.
//!
//! The server variant drives `dlht-server -e DIR --durable` over its text
//! protocol: each batch's 16 sets go in one write (a pipeline), and once
//! all 16 are answered `STORED` — which `--durable` sends only after the
//! changes are on disk — an `A <batch>` line acknowledges the batch, as
//! for the maps. (`--stored-only`: for a server without `--durable`, `S`
//! lines instead, nothing acknowledged: the checker then fails only on
//! torn or wrong values, or keys it cannot read.)

use dlht::{Durability, FileByteMap, FileMap, OpenOptions};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions as FsOpen};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::exit;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Writes per batch (one `durable()` per batch).
const BATCH: usize = 16;
/// Hot keys per thread, overwritten again and again.
const HOT_WORDS: u64 = 4096;
const HOT_BYTES: u64 = 256;
/// Of a batch's writes, the first `HOT_PER_BATCH` go to hot keys; the rest
/// insert keys no batch wrote before (so the index keeps growing).
const HOT_PER_BATCH: usize = 12;
/// The heap of a byte map made by the writer (LazyFS fills a file's new
/// length with cached zeros, so a small one; 64 MiB ran out within a round).
const HEAP_BYTES: u64 = 128 << 20;

fn mix(mut x: u64) -> u64 {
    // splitmix64's finalizer.
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn thread_of(batch: u64) -> u64 {
    (batch >> 28) & 0xF
}

fn batch_id(seed: u64, thread: u64, i: u64) -> u64 {
    assert!(seed < 1 << 20 && thread < 16 && i < 1 << 28);
    (seed << 32) | (thread << 28) | i
}

// ---- FileMap<u64, u64>: keys and values -------------------------------

fn word_keys(batch: u64) -> [u64; BATCH] {
    let t = thread_of(batch);
    let mut keys = [0u64; BATCH];
    for (j, k) in keys.iter_mut().enumerate() {
        *k = if j < HOT_PER_BATCH {
            // Hot: owned by thread t.
            (t << 40) | (mix(batch ^ ((j as u64) << 56)) % HOT_WORDS)
        } else {
            // New: unique to this batch (batch < 2^52).
            (1 << 63) | (batch << 4) | j as u64
        };
    }
    keys
}

fn word_value(key: u64, batch: u64) -> u64 {
    batch ^ mix(key)
}

// ---- FileByteMap and the server: keys and values ----------------------

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn byte_keys(batch: u64) -> Vec<Vec<u8>> {
    let t = thread_of(batch);
    (0..BATCH)
        .map(|j| {
            if j < HOT_PER_BATCH {
                let h = mix(batch ^ ((j as u64) << 56)) % HOT_BYTES;
                // Half the hot keys fit in a word (found without a block),
                // half are longer (stored in the block).
                if h % 2 == 0 {
                    format!("h{t}.{h}").into_bytes()
                } else {
                    format!("hot-long-key/t{t}/{h}").into_bytes()
                }
            } else {
                format!("new/{batch:x}/{j}").into_bytes()
            }
        })
        .collect()
}

/// The value `batch` writes to `key`: 10 B to 30 KB (new keys: up to
/// 100 B; hot keys: four in five log-uniform, one in five uniform over
/// 4-30 KB, so values span pages), the batch id in its first 8 bytes, then
/// bytes drawn from the key and batch.
fn byte_value(key: &[u8], batch: u64) -> Vec<u8> {
    let r = mix(fnv(key) ^ batch);
    let len = if key.starts_with(b"new/") {
        10 + (r % 91) as usize
    } else if r % 5 != 0 {
        // Log-uniform over 10 B .. 30 KB.
        let f = ((r >> 8) % 10_000) as f64 / 10_000.0;
        (10.0 * (3072.0f64).powf(f)) as usize
    } else {
        4096 + ((r >> 8) % (30 * 1024 - 4096)) as usize
    };
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&batch.to_le_bytes());
    let mut x = r | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

fn server_flags(key: &[u8], batch: u64) -> u32 {
    (mix(fnv(key) ^ batch ^ 0xF1A6) & 0xFFFF) as u32
}

// ---- the ack file ------------------------------------------------------

struct AckLog(Mutex<File>);

impl AckLog {
    fn open(path: &str) -> AckLog {
        let f = FsOpen::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap_or_else(|e| die(3, &format!("{path}: {e}")));
        AckLog(Mutex::new(f))
    }

    fn line(&self, s: &str, sync: bool) {
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let r = f.write_all(s.as_bytes()).and_then(|()| if sync { f.sync_data() } else { Ok(()) });
        if let Err(e) = r {
            die(3, &format!("writing the ack file: {e}"));
        }
    }
}

#[derive(Default)]
struct Acks {
    /// Every batch started (`W`), in id order.
    started: Vec<u64>,
    /// Batches `durable()` acknowledged (`A`).
    acked: HashSet<u64>,
    /// Server batches answered STORED (`S`): not durable acknowledgements.
    stored: HashSet<u64>,
    rounds: usize,
    /// The seed of the last round (the last `R` line): the writer the
    /// fault under check stopped.
    last_seed: Option<u64>,
}

fn read_acks(path: &str) -> Acks {
    let f = File::open(path).unwrap_or_else(|e| die(3, &format!("{path}: {e}")));
    let mut a = Acks::default();
    for line in BufReader::new(f).lines() {
        let line = line.unwrap_or_else(|e| die(3, &format!("{path}: {e}")));
        let mut it = line.split_whitespace();
        let tag = it.next();
        let n = it.next().and_then(|s| s.parse::<u64>().ok());
        match (tag, n) {
            (Some("R"), seed) => {
                a.rounds += 1;
                a.last_seed = seed;
            }
            (Some("W"), Some(b)) => a.started.push(b),
            (Some("A"), Some(b)) => {
                a.acked.insert(b);
            }
            (Some("S"), Some(b)) => {
                a.stored.insert(b);
            }
            // A line cut short by the kill (the ack file is appended to
            // without a lock between processes; only the last can be).
            _ => {}
        }
    }
    a.started.sort_unstable();
    a.started.dedup();
    a
}

// ---- classification ----------------------------------------------------

#[derive(Default, Debug)]
struct Counts {
    keys: usize,
    acked_keys: usize,
    ok_acked: usize,
    ok_newer: usize,
    ok_unacked: usize,
    absent_unacked: usize,
    /// Lost as reported by an earlier check (a run that goes on after a
    /// documented loss: `POWER_LOSS_ACCEPT_DOCUMENTED=1`).
    lost_earlier: usize,
    lost: usize,
    lost_changed: usize,
    torn: usize,
    wrong: usize,
    stored_lost: usize,
}

enum Found {
    Absent,
    /// A value naming a batch that wrote this key, with that batch's bytes.
    Batch(u64),
    /// A value naming a batch that wrote this key, but other bytes.
    Torn(u64),
    Wrong,
}

/// What a check reports, and what earlier checks of the same map saw of
/// keys an unacknowledged write had changed (`<ackfile>.seen`: one line per
/// such key and check, `<round seed> <key> <batch found, or absent>`), so a
/// loss found later names what the key held before.
#[derive(Default)]
struct Notes {
    report: Vec<String>,
    history: HashMap<String, Vec<(u64, String)>>,
    seen: Vec<String>,
}

impl Notes {
    fn load(ack: &str) -> Notes {
        let mut n = Notes::default();
        if let Ok(text) = std::fs::read_to_string(format!("{ack}.seen")) {
            for line in text.lines() {
                let f: Vec<&str> = line.split(' ').collect();
                if let [round, key, found] = f[..] {
                    let round = round.parse().unwrap_or(0);
                    n.history.entry(key.to_string()).or_default().push((round, found.to_string()));
                }
            }
        }
        n
    }

    fn save(&self, ack: &str) {
        let mut f = FsOpen::new()
            .create(true)
            .append(true)
            .open(format!("{ack}.seen"))
            .unwrap_or_else(|e| die(3, &format!("{ack}.seen: {e}")));
        let text: String = self.seen.iter().map(|l| format!("{l}\n")).collect();
        if let Err(e) = f.write_all(text.as_bytes()) {
            die(3, &format!("{ack}.seen: {e}"));
        }
    }

    fn before(&self, key: &str) -> String {
        match self.history.get(key) {
            Some(h) => {
                let h: Vec<String> = h.iter().map(|(r, f)| format!("round {r}: {f}")).collect();
                format!("; earlier checks found: {}", h.join(", "))
            }
            None => String::new(),
        }
    }

    /// An earlier check (of a round at or after `since`) already found the
    /// key without a value: a loss reported then, not again.
    fn lost_before(&self, key: &str, since: u64) -> bool {
        self.history
            .get(key)
            .is_some_and(|h| h.iter().any(|(r, f)| *r >= since && (f == "absent" || f == "damaged")))
    }
}

/// Judge one key: `batches` are the started batches that wrote it (in
/// order), `found` what the map holds.
fn judge(
    c: &mut Counts,
    acks: &Acks,
    batches: &[u64],
    found: Found,
    notes: &mut Notes,
    key: &dyn Fn() -> String,
) {
    c.keys += 1;
    let last_acked = batches.iter().rposition(|b| acks.acked.contains(b));
    let later = last_acked.map_or(batches, |i| &batches[i + 1..]);
    // Of those, the ones the last round started: a write in flight (or not
    // yet synced) when the fault struck. An unacknowledged write of an
    // earlier round was settled by that round's fault and check.
    let in_last_round = later.iter().any(|&b| Some(b >> 32) == acks.last_seed);
    if last_acked.is_some() {
        c.acked_keys += 1;
    }
    if let Some(&s) = batches.iter().rev().find(|b| acks.stored.contains(b)) {
        // Server: the last batch whose set was answered STORED.
        if !matches!(found, Found::Batch(f) if f >= s) {
            c.stored_lost += 1;
        }
    }
    let describe = |f: &Found| match f {
        Found::Absent => "absent".to_string(),
        Found::Batch(b) => format!("value of batch {b}"),
        Found::Torn(b) => format!("TORN value naming batch {b}"),
        Found::Wrong => "a value no batch wrote for it".to_string(),
    };
    let expected = last_acked.map_or("nothing acknowledged".to_string(), |i| {
        format!("acknowledged batch {} (later started: {:?})", batches[i], later)
    });
    if !later.is_empty() {
        let f = match found {
            Found::Absent => "absent".to_string(),
            Found::Batch(b) if last_acked.is_some_and(|i| batches[i] == b) => format!("{b}(acknowledged)"),
            Found::Batch(b) => format!("{b}(unacknowledged)"),
            Found::Torn(_) | Found::Wrong => "damaged".to_string(),
        };
        notes.seen.push(format!("{} {} {f}", acks.last_seed.unwrap_or(0), key()));
    }
    let before = notes.before(&key());
    let settled = last_acked.is_some_and(|i| notes.lost_before(&key(), batches[i] >> 32));
    let report = &mut notes.report;
    match (&found, last_acked) {
        (Found::Batch(f), Some(i)) if *f == batches[i] => c.ok_acked += 1,
        (Found::Batch(f), _) if later.contains(f) => {
            if last_acked.is_some() {
                c.ok_newer += 1
            } else {
                c.ok_unacked += 1
            }
        }
        (Found::Absent, None) => c.absent_unacked += 1,
        (Found::Absent, Some(_)) if settled => c.lost_earlier += 1,
        (Found::Absent | Found::Batch(_), Some(_)) => {
            if !in_last_round {
                c.lost += 1;
                report.push(format!(
                    "LOST key {}: expected {expected}, found {}{before}",
                    key(),
                    describe(&found)
                ));
            } else {
                c.lost_changed += 1;
                report.push(format!(
                    "LOST(changed since) key {}: expected {expected}, found {}{before}",
                    key(),
                    describe(&found)
                ));
            }
        }
        (Found::Torn(_), _) => {
            c.torn += 1;
            report.push(format!("TORN key {}: expected {expected}, found {}", key(), describe(&found)));
        }
        _ => {
            c.wrong += 1;
            report.push(format!("WRONG key {}: expected {expected}, found {}", key(), describe(&found)));
        }
    }
}

fn print_result(kind: &str, acks: &Acks, c: &Counts, extra: &str, report: &[String]) -> i32 {
    for r in report.iter().take(50) {
        println!("{r}");
    }
    if report.len() > 50 {
        println!("... {} more", report.len() - 50);
    }
    let bad = c.lost + c.lost_changed + c.torn + c.wrong;
    println!(
        "RESULT kind={kind} rounds={} started_batches={} acked_batches={} stored_batches={} keys={} \
         acked_keys={} ok_acked={} ok_newer={} ok_unacked={} absent_unacked={} lost={} lost_changed={} \
         lost_earlier={} torn={} wrong={} stored_lost={} {extra}",
        acks.rounds,
        acks.started.len(),
        acks.acked.len(),
        acks.stored.len(),
        c.keys,
        c.acked_keys,
        c.ok_acked,
        c.ok_newer,
        c.ok_unacked,
        c.absent_unacked,
        c.lost,
        c.lost_changed,
        c.lost_earlier,
        c.torn,
        c.wrong,
        c.stored_lost,
    );
    i32::from(bad > 0)
}

// ---- commands ----------------------------------------------------------

fn die(code: i32, msg: &str) -> ! {
    eprintln!("power_loss: {msg}");
    exit(code)
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn num(args: &[String], name: &str, default: u64) -> u64 {
    flag(args, name).map_or(default, |s| s.parse().unwrap_or_else(|_| die(3, &format!("{name}: {s}"))))
}

/// Exit after `secs` whatever happens (the harness kills the writer long
/// before; this bounds a writer it failed to kill).
fn watchdog(secs: u64) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(secs));
        eprintln!("power_loss: --max-secs {secs} reached");
        exit(0)
    });
}

fn write(args: &[String]) {
    let [dir, kind, seed] = [&args[2], &args[3], &args[4]];
    let seed: u64 = seed.parse().unwrap_or_else(|_| die(3, "seed: a number below 2^20"));
    let ack = flag(args, "--ack").unwrap_or_else(|| die(3, "write needs --ack FILE"));
    let every_ms = num(args, "--every-ms", 0);
    let threads = num(args, "--threads", 2).clamp(1, 16);
    watchdog(num(args, "--max-secs", 60));
    let log = AckLog::open(&ack);
    log.line(&format!("R {seed} {kind} {every_ms} {threads}\n"), true);
    let options = OpenOptions::new()
        .durability(Durability::Sync { every: Duration::from_millis(every_ms) })
        .heap_bytes(HEAP_BYTES);
    let started = Instant::now();
    match kind.as_str() {
        "filemap" => {
            let m = FileMap::<u64, u64>::open_with(dir, options)
                .unwrap_or_else(|e| die(2, &format!("open: {e}")));
            eprintln!("opened in {:?}: {:?}", started.elapsed(), m.recovery());
            log.line(&format!("O {seed}\n"), true);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (m, log) = (&m, &log);
                    s.spawn(move || {
                        for i in 0.. {
                            let b = batch_id(seed, t, i);
                            log.line(&format!("W {b}\n"), false);
                            for k in word_keys(b) {
                                if let Err(e) = m.try_upsert(k, word_value(k, b)) {
                                    die(3, &format!("upsert: {e}"));
                                }
                            }
                            if let Err(e) = m.durable() {
                                die(3, &format!("durable: {e}"));
                            }
                            log.line(&format!("A {b}\n"), true);
                        }
                    });
                }
            });
        }
        "bytemap" => {
            let m = FileByteMap::open_with(dir, options).unwrap_or_else(|e| die(2, &format!("open: {e}")));
            eprintln!("opened in {:?}: {:?}", started.elapsed(), m.recovery());
            log.line(&format!("O {seed}\n"), true);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (m, log) = (&m, &log);
                    s.spawn(move || {
                        for i in 0.. {
                            let b = batch_id(seed, t, i);
                            log.line(&format!("W {b}\n"), false);
                            {
                                let g = m.guard();
                                for k in byte_keys(b) {
                                    if let Err(e) = m.upsert(&k, &byte_value(&k, b), &g) {
                                        die(3, &format!("upsert: {e}"));
                                    }
                                }
                            }
                            if let Err(e) = m.durable() {
                                die(3, &format!("durable: {e}"));
                            }
                            log.line(&format!("A {b}\n"), true);
                        }
                    });
                }
            });
        }
        _ => die(3, "kind: filemap or bytemap"),
    }
}

fn classify_word(acks_started: &HashSet<u64>, key: u64, v: Option<u64>) -> Found {
    match v {
        None => Found::Absent,
        Some(v) => {
            let b = v ^ mix(key);
            if acks_started.contains(&b) && word_keys(b).contains(&key) {
                Found::Batch(b)
            } else {
                Found::Wrong
            }
        }
    }
}

fn classify_bytes(acks_started: &HashSet<u64>, key: &[u8], v: Option<&[u8]>) -> Found {
    let Some(v) = v else { return Found::Absent };
    let Some(head) = v.get(..8) else { return Found::Wrong };
    let b = u64::from_le_bytes(head.try_into().expect("8 bytes"));
    if !acks_started.contains(&b) || !byte_keys(b).iter().any(|k| k == key) {
        return Found::Wrong;
    }
    if byte_value(key, b) == v {
        Found::Batch(b)
    } else {
        Found::Torn(b)
    }
}

fn check(args: &[String]) {
    let [dir, kind, ack] = [&args[2], &args[3], &args[4]];
    let acks = read_acks(ack);
    let started: HashSet<u64> = acks.started.iter().copied().collect();
    let mut c = Counts::default();
    let mut notes = Notes::load(ack);
    let code = match kind.as_str() {
        "filemap" => {
            let mut universe: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
            for &b in &acks.started {
                for k in word_keys(b) {
                    let v = universe.entry(k).or_default();
                    if v.last() != Some(&b) {
                        v.push(b);
                    }
                }
            }
            let m = match FileMap::<u64, u64>::open(dir) {
                Ok(m) => m,
                Err(e) => {
                    println!("OPEN-FAILED kind={kind}: {e} ({e:?})");
                    exit(2)
                }
            };
            println!("recovery: {:?}", m.recovery());
            for (k, batches) in &universe {
                let found = classify_word(&started, *k, m.get(k));
                judge(&mut c, &acks, batches, found, &mut notes, &|| format!("{k:#x}"));
            }
            let mut phantoms = 0;
            for (k, v) in m.iter() {
                if !universe.contains_key(&k) {
                    phantoms += 1;
                    c.wrong += 1;
                    notes.report.push(format!("WRONG key {k:#x} no batch wrote, value {v:#x}"));
                }
            }
            print_result(kind, &acks, &c, &format!("phantoms={phantoms} len={}", m.len()), &notes.report)
        }
        "bytemap" => {
            let mut universe: BTreeMap<Vec<u8>, Vec<u64>> = BTreeMap::new();
            for &b in &acks.started {
                for k in byte_keys(b) {
                    let v = universe.entry(k).or_default();
                    if v.last() != Some(&b) {
                        v.push(b);
                    }
                }
            }
            let m = match FileByteMap::open(dir) {
                Ok(m) => m,
                Err(e) => {
                    println!("OPEN-FAILED kind={kind}: {e} ({e:?})");
                    exit(2)
                }
            };
            println!("recovery: {:?}", m.recovery());
            // Reads first, while gets still verify every checksum (until
            // the reclamation walk is done), then the walk's counters.
            {
                let g = m.guard();
                for (k, batches) in &universe {
                    let v = m.get(k, &g);
                    let found = classify_bytes(&started, k, v.as_deref());
                    judge(&mut c, &acks, batches, found, &mut notes, &|| {
                        String::from_utf8_lossy(k).into_owned()
                    });
                }
            }
            let r = m.wait_heap_reclaimed();
            println!("heap_reclaim: {r:?}");
            let mut phantoms = 0;
            {
                let g = m.guard();
                for (ns, k, _) in m.iter(&g) {
                    if ns != 0 || !universe.contains_key(&k[..]) {
                        phantoms += 1;
                        c.wrong += 1;
                        notes.report.push(format!(
                            "WRONG key {:?} (ns {ns}) no batch wrote",
                            String::from_utf8_lossy(&k)
                        ));
                    }
                }
            }
            let extra = format!(
                "phantoms={phantoms} len={} damaged={} blocks_freed={}",
                m.len(),
                r.damaged,
                r.blocks_freed
            );
            print_result(kind, &acks, &c, &extra, &notes.report)
        }
        _ => die(3, "kind: filemap or bytemap"),
    };
    notes.save(ack);
    exit(code)
}

// ---- the server ----------------------------------------------------------

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn new(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).unwrap_or_else(|e| die(2, &format!("connect {addr}: {e}")));
        let _ = s.set_nodelay(true);
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        let w = s.try_clone().unwrap_or_else(|e| die(3, &format!("{e}")));
        Conn { r: BufReader::new(s), w }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(0) => die(3, "server closed the connection"),
            Ok(_) => l,
            Err(e) => die(3, &format!("reading a reply: {e}")),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        if let Err(e) = self.w.write_all(bytes) {
            die(3, &format!("sending: {e}"));
        }
    }

    /// `get`: the flags and data, or None.
    fn get(&mut self, key: &[u8]) -> Option<(u32, Vec<u8>)> {
        let mut req = b"get ".to_vec();
        req.extend_from_slice(key);
        req.extend_from_slice(b"\r\n");
        self.send(&req);
        let l = self.line();
        if l == "END\r\n" {
            return None;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 4 || f[0] != "VALUE" || f[1].as_bytes() != key {
            die(3, &format!("bad get reply {l:?}"));
        }
        let flags: u32 = f[2].parse().unwrap_or_else(|_| die(3, &format!("bad flags {l:?}")));
        let len: usize = f[3].parse().unwrap_or_else(|_| die(3, &format!("bad length {l:?}")));
        let mut data = vec![0u8; len + 2];
        if let Err(e) = self.r.read_exact(&mut data) {
            die(3, &format!("reading a value: {e}"));
        }
        data.truncate(len);
        let end = self.line();
        if end != "END\r\n" {
            die(3, &format!("bad get end {end:?}"));
        }
        Some((flags, data))
    }
}

fn server_write(args: &[String]) {
    let [addr, seed] = [&args[2], &args[3]];
    let seed: u64 = seed.parse().unwrap_or_else(|_| die(3, "seed: a number below 2^20"));
    let ack = flag(args, "--ack").unwrap_or_else(|| die(3, "server-write needs --ack FILE"));
    watchdog(num(args, "--max-secs", 60));
    let log = AckLog::open(&ack);
    log.line(&format!("R {seed} server 0 1\n"), true);
    let stored_only = args.iter().any(|a| a == "--stored-only");
    let mut c = Conn::new(addr);
    log.line(&format!("O {seed}\n"), true);
    for i in 0.. {
        let b = batch_id(seed, 0, i);
        log.line(&format!("W {b}\n"), false);
        let mut req = Vec::new();
        let keys = byte_keys(b);
        for k in &keys {
            let v = byte_value(k, b);
            req.extend_from_slice(b"set ");
            req.extend_from_slice(k);
            req.extend_from_slice(format!(" {} 0 {}\r\n", server_flags(k, b), v.len()).as_bytes());
            req.extend_from_slice(&v);
            req.extend_from_slice(b"\r\n");
        }
        c.send(&req);
        for _ in &keys {
            let l = c.line();
            if l != "STORED\r\n" {
                die(3, &format!("set reply {l:?}"));
            }
        }
        if stored_only {
            // Stored, not durable: a server without `--durable` promises
            // nothing past a crash of the process.
            log.line(&format!("S {b}\n"), false);
        } else {
            // `--durable`: every STORED came after its change was on disk.
            log.line(&format!("A {b}\n"), true);
        }
    }
}

fn server_check(args: &[String]) {
    let [addr, ack] = [&args[2], &args[3]];
    let acks = read_acks(ack);
    let started: HashSet<u64> = acks.started.iter().copied().collect();
    let mut universe: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for &b in &acks.started {
        for k in byte_keys(b) {
            let v = universe.entry(k).or_default();
            if v.last() != Some(&b) {
                v.push(b);
            }
        }
    }
    let mut keys: Vec<_> = universe.keys().cloned().collect();
    keys.sort();
    let mut conn = Conn::new(addr);
    let mut c = Counts::default();
    let mut notes = Notes::load(ack);
    for k in &keys {
        let got = conn.get(k);
        let found = match &got {
            None => Found::Absent,
            Some((flags, v)) => match classify_bytes(&started, k, Some(v)) {
                Found::Batch(b) if *flags != server_flags(k, b) => Found::Torn(b),
                f => f,
            },
        };
        judge(&mut c, &acks, &universe[k], found, &mut notes, &|| String::from_utf8_lossy(k).into_owned());
    }
    conn.send(b"stats\r\n");
    let mut stats = String::new();
    loop {
        let l = conn.line();
        if l == "END\r\n" {
            break;
        }
        for name in ["curr_items", "restart_items_recovered", "restart_recovery_us"] {
            if let Some(v) = l.strip_prefix(&format!("STAT {name} ")) {
                stats.push_str(&format!("{name}={} ", v.trim()));
            }
        }
    }
    notes.save(ack);
    exit(print_result("server", &acks, &c, stats.trim_end(), &notes.report))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: power_loss write <dir> <filemap|bytemap> <seed> --ack FILE [--every-ms N] [--threads T] \
                 [--max-secs S] | check <dir> <filemap|bytemap> <ackfile> | server-write <host:port> <seed> \
                 --ack FILE [--max-secs S] | server-check <host:port> <ackfile>";
    match (args.get(1).map(String::as_str), args.len()) {
        (Some("write"), n) if n >= 5 => write(&args),
        (Some("check"), 5) => check(&args),
        (Some("server-write"), n) if n >= 4 => server_write(&args),
        (Some("server-check"), 4) => server_check(&args),
        _ => die(3, usage),
    }
}
