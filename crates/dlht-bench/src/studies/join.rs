//! Non-partitioned hash join (DLHT paper §5.3.6): build a table on R, probe
//! it with S, 16-byte tuples (a u64 key and a u64 payload).
//!
//! R holds 2^`--r-log2` distinct keys; each S tuple's key is drawn from
//! R's keys (a foreign-key join), or, with `--match-fraction` below 1, a
//! key that is in no R tuple for the rest. The join counts the matches and
//! sums a checksum of every matched pair of payloads.
//!
//! - `dlht`: threads insert their share of R into one presized
//!   [`Map<u64, u64>`](dlht::Map) one call at a time, then probe their
//!   share of S with `get`;
//! - `dlht-batch`: the same through batches ([`Map::batch`](dlht::Map::batch)
//!   of inserts, [`Map::get_many`](dlht::Map::get_many) of probes),
//!   prefetched, `--batch` requests each;
//! - `hashbrown-part`: the partitioned join the paper measures against:
//!   R and S are radix-partitioned by a hash of the key (one parallel
//!   scatter pass, partitions of about 2^13 R tuples), threads take
//!   partitions, one single-thread hashbrown table per partition; the
//!   partitioning is counted in the build (R) and probe (S) phases;
//! - `papaya`, `dashmap`: the non-partitioned join on one presized shared
//!   table, as for dlht.
//!
//! Checks (always): every system's match count and checksum equal the ones
//! computed from how S was generated; when |R| and |S| are at most 2^22
//! they are also computed by a plain one-thread join on std's HashMap.
//! A duplicate key refused in the build fails the run too.
//!
//! Reported per system and thread count: build, probe and total tuples per
//! second, and resident bytes per R tuple (the growth of the process's
//! anonymous resident memory over the build: the table, and for
//! `hashbrown-part` the partitioned copy of R; approximate, process-wide).

use crate::harness::limit::splitmix;
use crate::harness::Spread;
use crate::progress::Progress;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// A tuple: `[key, payload]`.
type Tuple = [u64; 2];

/// The systems, in the order they run.
pub const SYSTEMS: [&str; 5] = ["dlht", "dlht-batch", "hashbrown-part", "papaya", "dashmap"];

/// Options of the join study.
#[derive(clap::Args, Clone, Debug)]
pub struct JoinArgs {
    /// |R| = 2^N build tuples.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(4..=30))]
    pub r_log2: u32,
    /// |S| = 2^N probe tuples.
    #[arg(long, default_value_t = 27, value_parser = clap::value_parser!(u32).range(4..=32))]
    pub s_log2: u32,
    /// Fraction of S tuples whose key is in R (1: a foreign-key join).
    #[arg(long, default_value_t = 1.0, value_parser = fraction)]
    pub match_fraction: f64,
    /// Most threads: runs at 1, 2, 4, … and this many.
    #[arg(long, default_value_t = default_threads())]
    pub threads: usize,
    /// Systems, comma-separated (dlht, dlht-batch, hashbrown-part, papaya, dashmap).
    #[arg(long, value_delimiter = ',', default_value = "dlht,dlht-batch,hashbrown-part,papaya,dashmap")]
    pub systems: Vec<String>,
    /// Rounds (systems alternate, round after round; medians reported).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Requests per dlht batch.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub batch: u32,
    /// Seed of R and S.
    #[arg(long, default_value_t = 0x101A)]
    pub seed: u64,
    /// Folder for join.csv and join.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// |R| = 2^12, |S| = 2^14, at most 2 threads: a few seconds.
    #[arg(long)]
    pub smoke: bool,
}

/// The machine's hardware threads (the default of `--threads`).
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

fn fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!("{s}: a fraction from 0 to 1")),
    }
}

/// Thread counts up to `max`: 1, 2, 4, … and `max`.
pub(crate) fn thread_counts(max: usize) -> Vec<usize> {
    let max = max.max(1);
    let mut v: Vec<usize> =
        std::iter::successors(Some(1usize), |t| t.checked_mul(2)).take_while(|&t| t < max).collect();
    v.push(max);
    v
}

/// The key of R's tuple `i`; `splitmix` is a bijection, so the keys of
/// `0..|R|` are distinct, and those of `|R|..` are in no R tuple.
fn r_key(i: u64, seed: u64) -> u64 {
    splitmix(i ^ seed)
}

fn r_payload(i: u64) -> u64 {
    splitmix(i ^ 0x7061_796c_6f61_6400)
}

/// What a matched pair adds to the checksum.
#[inline(always)]
fn combine(r_payload: u64, s_payload: u64) -> u64 {
    r_payload ^ s_payload.rotate_left(32)
}

/// How S's tuple `j` is made: the R tuple it matches, if it does.
fn s_match(j: u64, r_len: u64, fraction: f64, seed: u64) -> Option<u64> {
    let h = splitmix(j ^ seed ^ 0x5353_5353);
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    (u < fraction).then(|| splitmix(h) & (r_len - 1))
}

fn s_tuple(j: u64, r_len: u64, fraction: f64, seed: u64) -> Tuple {
    let key = match s_match(j, r_len, fraction, seed) {
        Some(i) => r_key(i, seed),
        None => r_key(r_len + j, seed),
    };
    [key, j]
}

/// `n` tuples made by `f` on `threads` threads.
fn par_fill(n: usize, threads: usize, f: impl Fn(u64) -> Tuple + Sync) -> Vec<Tuple> {
    let mut v = vec![[0u64; 2]; n];
    let chunk = n.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (c, part) in v.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (k, t) in part.iter_mut().enumerate() {
                    *t = f((c * chunk + k) as u64);
                }
            });
        }
    });
    v
}

/// Run `f` on `threads` contiguous shares of `data`, each on its own
/// thread; the results in share order.
fn par_each<T: Send>(data: &[Tuple], threads: usize, f: impl Fn(&[Tuple]) -> T + Sync) -> Vec<T> {
    let chunk = data.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = data
            .chunks(chunk)
            .map(|c| {
                let f = &f;
                s.spawn(move || f(c))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a join thread panicked")).collect()
    })
}

/// Matches and checksum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    matches: u64,
    checksum: u64,
}

impl Outcome {
    fn add(self, o: Outcome) -> Outcome {
        Outcome { matches: self.matches + o.matches, checksum: self.checksum.wrapping_add(o.checksum) }
    }
}

/// The join's result from how S was generated (no table).
fn expected(s_len: u64, r_len: u64, fraction: f64, seed: u64, threads: usize) -> Outcome {
    let per = s_len.div_ceil(threads as u64).max(1);
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..s_len)
            .step_by(per as usize)
            .map(|from| {
                sc.spawn(move || {
                    let mut o = Outcome::default();
                    for j in from..(from + per).min(s_len) {
                        if let Some(i) = s_match(j, r_len, fraction, seed) {
                            o.matches += 1;
                            o.checksum = o.checksum.wrapping_add(combine(r_payload(i), j));
                        }
                    }
                    o
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a thread panicked"))
            .fold(Outcome::default(), Outcome::add)
    })
}

/// A plain one-thread join on std's HashMap.
fn std_join(r: &[Tuple], s: &[Tuple]) -> Outcome {
    let table: std::collections::HashMap<u64, u64> = r.iter().map(|t| (t[0], t[1])).collect();
    let mut o = Outcome::default();
    for t in s {
        if let Some(&p) = table.get(&t[0]) {
            o.matches += 1;
            o.checksum = o.checksum.wrapping_add(combine(p, t[1]));
        }
    }
    o
}

/// One join's figures.
struct Measured {
    build_s: f64,
    probe_s: f64,
    outcome: Outcome,
    /// Build tuples the table refused as duplicates (none expected).
    refused: u64,
    table_bytes: f64,
}

/// Anonymous resident bytes of this process.
fn rss() -> f64 {
    crate::compare::proc_bytes("/proc/self/status", "RssAnon:").unwrap_or(0) as f64
}

/// The join on one shared table: `make` it, `insert` shares of R (returns
/// the refused), `probe` shares of S, each phase on `threads` threads.
fn shared<T: Sync>(
    r: &[Tuple],
    s: &[Tuple],
    threads: usize,
    make: impl FnOnce() -> T,
    insert: impl Fn(&T, &[Tuple]) -> u64 + Sync,
    probe: impl Fn(&T, &[Tuple]) -> Outcome + Sync,
) -> Measured {
    let before = rss();
    let start = Instant::now();
    let table = make();
    let refused: u64 = par_each(r, threads, |c| insert(&table, c)).into_iter().sum();
    let build_s = start.elapsed().as_secs_f64();
    let table_bytes = rss() - before;
    let start = Instant::now();
    let outcome =
        par_each(s, threads, |c| probe(&table, c)).into_iter().fold(Outcome::default(), Outcome::add);
    let probe_s = start.elapsed().as_secs_f64();
    drop(table);
    Measured { build_s, probe_s, outcome, refused, table_bytes }
}

/// The partition of a key among 2^bits.
#[inline(always)]
fn part(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// Where the scatter threads write: disjoint ranges of one buffer.
struct Scatter(*mut Tuple);

// SAFETY: each thread writes only the slots of its own (partition, share)
// ranges, which are disjoint, and the buffer outlives the scope.
unsafe impl Sync for Scatter {}

impl Scatter {
    /// # Safety
    /// `i` is in the buffer and no other thread writes it.
    unsafe fn put(&self, i: usize, t: Tuple) {
        // SAFETY: the caller's.
        unsafe { self.0.add(i).write(t) }
    }
}

/// Radix-partition `input` by [`part`] in one parallel scatter pass:
/// the tuples grouped by partition, and where each partition starts
/// (2^bits + 1 bounds).
fn partition(input: &[Tuple], bits: u32, threads: usize) -> (Vec<Tuple>, Vec<usize>) {
    let p = 1usize << bits;
    let chunk = input.len().div_ceil(threads.max(1)).max(1);
    let shares: Vec<&[Tuple]> = input.chunks(chunk).collect();
    let hists: Vec<Vec<usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .iter()
            .map(|&c| {
                s.spawn(move || {
                    let mut h = vec![0usize; p];
                    for t in c {
                        h[part(t[0], bits)] += 1;
                    }
                    h
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a partition thread panicked")).collect()
    });
    let mut starts = vec![vec![0usize; p]; shares.len()];
    let mut bounds = Vec::with_capacity(p + 1);
    let mut at = 0;
    for q in 0..p {
        bounds.push(at);
        for (c, h) in hists.iter().enumerate() {
            starts[c][q] = at;
            at += h[q];
        }
    }
    bounds.push(at);
    let mut out = vec![[0u64; 2]; input.len()];
    let dst = Scatter(out.as_mut_ptr());
    std::thread::scope(|s| {
        for (&c, mut start) in shares.iter().zip(starts) {
            let dst = &dst;
            s.spawn(move || {
                for &t in c {
                    let q = part(t[0], bits);
                    // SAFETY: share c's range of partition q is
                    // starts[c][q] .. + hists[c][q], inside `out` and
                    // written by this thread alone.
                    unsafe { dst.put(start[q], t) };
                    start[q] += 1;
                }
            });
        }
    });
    (out, bounds)
}

/// Partition bits for |R| = 2^r_log2: partitions of about 2^13 R tuples
/// (a hashbrown table of those stays in L2), 16 to 4096 of them.
fn partition_bits(r_log2: u32) -> u32 {
    r_log2.saturating_sub(13).clamp(4, 12)
}

/// The partitioned join: one hashbrown table per partition.
fn hashbrown_part(r: &[Tuple], s: &[Tuple], threads: usize, bits: u32) -> Measured {
    type Table = hashbrown::HashMap<u64, u64>;
    let p = 1usize << bits;
    let before = rss();
    let start = Instant::now();
    let (rp, rb) = partition(r, bits, threads);
    let tables: Vec<OnceLock<Table>> = (0..p).map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    // Relaxed: `next` only hands out partition numbers; the scope's join
    // publishes the tables.
    let refused: u64 = par_threads(threads, || {
        let mut refused = 0;
        loop {
            let q = next.fetch_add(1, Ordering::Relaxed);
            if q >= p {
                return refused;
            }
            let part = &rp[rb[q]..rb[q + 1]];
            let mut t = Table::with_capacity(part.len());
            for x in part {
                refused += u64::from(t.insert(x[0], x[1]).is_some());
            }
            let _ = tables[q].set(t);
        }
    })
    .into_iter()
    .sum();
    let build_s = start.elapsed().as_secs_f64();
    let table_bytes = rss() - before;
    let start = Instant::now();
    let (sp, sb) = partition(s, bits, threads);
    let next = AtomicUsize::new(0);
    let outcome = par_threads(threads, || {
        let mut o = Outcome::default();
        loop {
            let q = next.fetch_add(1, Ordering::Relaxed);
            if q >= p {
                return o;
            }
            let t = tables[q].get().expect("every partition was built");
            for x in &sp[sb[q]..sb[q + 1]] {
                if let Some(&pay) = t.get(&x[0]) {
                    o.matches += 1;
                    o.checksum = o.checksum.wrapping_add(combine(pay, x[1]));
                }
            }
        }
    })
    .into_iter()
    .fold(Outcome::default(), Outcome::add);
    let probe_s = start.elapsed().as_secs_f64();
    drop((tables, rp, sp));
    Measured { build_s, probe_s, outcome, refused, table_bytes }
}

/// Run `f` on `threads` threads; their results.
fn par_threads<T: Send>(threads: usize, f: impl Fn() -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1)).map(|_| s.spawn(&f)).collect();
        handles.into_iter().map(|h| h.join().expect("a join thread panicked")).collect()
    })
}

/// Run system `name`'s join of `r` and `s` on `threads` threads.
fn join_with(name: &str, r: &[Tuple], s: &[Tuple], threads: usize, batch: usize, r_log2: u32) -> Measured {
    let n = r.len();
    match name {
        "dlht" => shared(
            r,
            s,
            threads,
            || dlht::Map::<u64, u64>::with_capacity(n),
            |m, c| c.iter().map(|t| u64::from(m.insert(t[0], t[1]).is_err())).sum(),
            |m, c| {
                let mut o = Outcome::default();
                for t in c {
                    if let Some(p) = m.get(&t[0]) {
                        o.matches += 1;
                        o.checksum = o.checksum.wrapping_add(combine(p, t[1]));
                    }
                }
                o
            },
        ),
        "dlht-batch" => shared(
            r,
            s,
            threads,
            || dlht::Map::<u64, u64>::with_capacity(n),
            |m, c| {
                let mut reqs = vec![dlht::Request::Get(0); batch];
                let mut out = vec![dlht::Response::NotExecuted; batch];
                let mut refused = 0;
                for part in c.chunks(batch) {
                    let k = part.len();
                    for (q, t) in reqs.iter_mut().zip(part) {
                        *q = dlht::Request::Insert(t[0], t[1]);
                    }
                    m.batch(&reqs[..k], &mut out[..k], dlht::StopOn::Never).expect("the index grows");
                    refused += out[..k].iter().filter(|r| !r.succeeded()).count() as u64;
                }
                refused
            },
            |m, c| {
                let mut keys = vec![0u64; batch];
                let mut got = vec![None; batch];
                let mut o = Outcome::default();
                for part in c.chunks(batch) {
                    let k = part.len();
                    for (key, t) in keys.iter_mut().zip(part) {
                        *key = t[0];
                    }
                    m.get_many(&keys[..k], &mut got[..k]).expect("buffers of equal length");
                    for (g, t) in got[..k].iter().zip(part) {
                        if let Some(p) = *g {
                            o.matches += 1;
                            o.checksum = o.checksum.wrapping_add(combine(p, t[1]));
                        }
                    }
                }
                o
            },
        ),
        "papaya" => shared(
            r,
            s,
            threads,
            || papaya::HashMap::<u64, u64>::with_capacity(n),
            |m, c| {
                let m = m.pin();
                c.iter().map(|t| u64::from(m.insert(t[0], t[1]).is_some())).sum()
            },
            |m, c| {
                let m = m.pin();
                let mut o = Outcome::default();
                for t in c {
                    if let Some(&p) = m.get(&t[0]) {
                        o.matches += 1;
                        o.checksum = o.checksum.wrapping_add(combine(p, t[1]));
                    }
                }
                o
            },
        ),
        "dashmap" => shared(
            r,
            s,
            threads,
            || dashmap::DashMap::<u64, u64>::with_capacity(n),
            |m, c| c.iter().map(|t| u64::from(m.insert(t[0], t[1]).is_some())).sum(),
            |m, c| {
                let mut o = Outcome::default();
                for t in c {
                    if let Some(p) = m.get(&t[0]) {
                        o.matches += 1;
                        o.checksum = o.checksum.wrapping_add(combine(*p, t[1]));
                    }
                }
                o
            },
        ),
        "hashbrown-part" => hashbrown_part(r, s, threads, partition_bits(r_log2)),
        other => unreachable!("unknown system {other} (checked before)"),
    }
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    system: String,
    threads: usize,
    r_tuples: u64,
    s_tuples: u64,
    build_mtps: f64,
    probe_mtps: f64,
    total_mtps: f64,
    build_s: f64,
    probe_s: f64,
    matches: u64,
    checksum: u64,
    bytes_per_r_tuple: f64,
    ok: bool,
}

/// The join study. True if a result check failed.
pub fn run(a: JoinArgs) -> bool {
    let Some(machine) = super::open_app("join", &a.systems, &SYSTEMS) else { return true };
    let (r_log2, s_log2) = if a.smoke { (12, 14) } else { (a.r_log2, a.s_log2) };
    let max_threads = if a.smoke { a.threads.clamp(1, 2) } else { a.threads.max(1) };
    let (r_len, s_len) = (1u64 << r_log2, 1u64 << s_log2);
    let gen_threads = default_threads();
    let (seed, fraction, batch) = (a.seed, a.match_fraction, a.batch as usize);

    let phase = Progress::phase("Generating", format!("R (2^{r_log2} tuples) and S (2^{s_log2} tuples)"));
    let r = par_fill(r_len as usize, gen_threads, |i| [r_key(i, seed), r_payload(i)]);
    let s = par_fill(s_len as usize, gen_threads, |j| s_tuple(j, r_len, fraction, seed));
    let want = expected(s_len, r_len, fraction, seed, gen_threads);
    drop(phase);
    let mut failed = false;
    if r_log2 <= 22 && s_log2 <= 22 {
        let phase = Progress::phase("Checking", "the expected result with a one-thread std HashMap join");
        let plain = std_join(&r, &s);
        drop(phase);
        if plain != want {
            eprintln!("check failed: the std HashMap join gives {plain:?}, S was generated for {want:?}");
            failed = true;
        }
    }
    println!(
        "# |R| = 2^{r_log2}, |S| = 2^{s_log2}, match fraction {fraction}: expecting {} matches, checksum {:#018x}",
        want.matches, want.checksum
    );

    let counts = thread_counts(max_threads);
    let rounds = a.rounds as usize;
    let bar = Progress::new("Joining", (counts.len() * a.systems.len() * rounds) as u64, "joins");
    let mut rows = Vec::new();
    for &threads in &counts {
        let mut got: Vec<Vec<Measured>> = a.systems.iter().map(|_| Vec::new()).collect();
        let mut ok = vec![true; a.systems.len()];
        for round in 0..rounds {
            for i in super::round_order(a.systems.len(), round) {
                let name = &a.systems[i];
                bar.set_message(format!(
                    "round {}/{rounds}: {name} on {threads} thread{}",
                    round + 1,
                    if threads == 1 { "" } else { "s" }
                ));
                let m = join_with(name, &r, &s, threads, batch, r_log2);
                if m.outcome != want || m.refused != 0 {
                    bar.println(format!(
                        "check failed: {name} on {threads} threads: {:?}, {} build tuples refused; expected {want:?}",
                        m.outcome, m.refused
                    ));
                    ok[i] = false;
                    failed = true;
                }
                got[i].push(m);
                bar.inc(1);
            }
        }
        for ((name, ms), ok) in a.systems.iter().zip(&got).zip(ok) {
            let median = |f: fn(&Measured) -> f64| {
                Spread::of(&ms.iter().map(f).collect::<Vec<_>>()).map_or(f64::NAN, |s| s.median)
            };
            let (build_s, probe_s) = (median(|m| m.build_s), median(|m| m.probe_s));
            let last = ms.last().map(|m| m.outcome).unwrap_or_default();
            let row = Row {
                system: name.clone(),
                threads,
                r_tuples: r_len,
                s_tuples: s_len,
                build_mtps: r_len as f64 / build_s / 1e6,
                probe_mtps: s_len as f64 / probe_s / 1e6,
                total_mtps: (r_len + s_len) as f64 / (build_s + probe_s) / 1e6,
                build_s,
                probe_s,
                matches: last.matches,
                checksum: last.checksum,
                bytes_per_r_tuple: median(|m| m.table_bytes) / r_len as f64,
                ok,
            };
            bar.println(format!(
                "{:<15} {:>2} threads: build {:>8.2} M tuples/s, probe {:>8.2} M tuples/s, total {:>8.2} M tuples/s, {:>6.1} B per R tuple, {} matches {}",
                row.system,
                threads,
                row.build_mtps,
                row.probe_mtps,
                row.total_mtps,
                row.bytes_per_r_tuple,
                row.matches,
                if ok { "ok" } else { "WRONG" }
            ));
            rows.push(row);
        }
    }
    drop(bar);

    println!(
        "{:<15} {:>7} {:>14} {:>14} {:>14} {:>12} {:>6}",
        "system", "threads", "build M/s", "probe M/s", "total M/s", "B per R", "check"
    );
    let mut csv = String::from(
        "system,threads,r_tuples,s_tuples,build_mtps,probe_mtps,total_mtps,build_s,probe_s,matches,checksum,bytes_per_r_tuple,ok\n",
    );
    for r in &rows {
        println!(
            "{:<15} {:>7} {:>14.2} {:>14.2} {:>14.2} {:>12.1} {:>6}",
            r.system,
            r.threads,
            r.build_mtps,
            r.probe_mtps,
            r.total_mtps,
            r.bytes_per_r_tuple,
            if r.ok { "ok" } else { "WRONG" }
        );
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.4},{:.4},{:.4},{:.6},{:.6},{},{},{:.2},{}",
            r.system,
            r.threads,
            r.r_tuples,
            r.s_tuples,
            r.build_mtps,
            r.probe_mtps,
            r.total_mtps,
            r.build_s,
            r.probe_s,
            r.matches,
            r.checksum,
            r.bytes_per_r_tuple,
            r.ok
        );
    }
    println!(
        "# tuples of 16 B; build M/s = |R| / build time (table allocation included; hashbrown-part: partitioning R included), probe M/s = |S| / probe time (hashbrown-part: partitioning S included); dlht-batch in batches of {batch}; hashbrown-part with 2^{} partitions; medians of {rounds} round(s); B per R = growth of anonymous resident memory over the build ÷ |R|; every result checked",
        partition_bits(r_log2)
    );
    let json = serde_json::to_string_pretty(&rows).unwrap_or_default();
    super::save_app(a.out, "join", &machine, &[("join.csv", csv), ("join.json", json)]);
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_double_up_to_the_most() {
        assert_eq!(thread_counts(1), [1]);
        assert_eq!(thread_counts(2), [1, 2]);
        assert_eq!(thread_counts(6), [1, 2, 4, 6]);
        assert_eq!(thread_counts(8), [1, 2, 4, 8]);
    }

    #[test]
    fn partitioning_groups_every_tuple_by_its_partition() {
        let input = par_fill(5000, 3, |i| [splitmix(i), i]);
        let (out, bounds) = partition(&input, 4, 3);
        assert_eq!(bounds.len(), 17);
        assert_eq!(*bounds.last().unwrap(), input.len());
        for q in 0..16 {
            assert!(out[bounds[q]..bounds[q + 1]].iter().all(|t| part(t[0], 4) == q));
        }
        let mut a: Vec<u64> = input.iter().map(|t| t[1]).collect();
        let mut b: Vec<u64> = out.iter().map(|t| t[1]).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b);
    }

    #[test]
    fn every_system_joins_exactly_on_two_threads() {
        let (r_log2, r_len, s_len, seed) = (10, 1u64 << 10, 1u64 << 12, 3);
        for fraction in [1.0, 0.5] {
            let r = par_fill(r_len as usize, 2, |i| [r_key(i, seed), r_payload(i)]);
            let s = par_fill(s_len as usize, 2, |j| s_tuple(j, r_len, fraction, seed));
            let want = expected(s_len, r_len, fraction, seed, 2);
            assert_eq!(std_join(&r, &s), want);
            if fraction == 1.0 {
                assert_eq!(want.matches, s_len);
            } else {
                assert!(want.matches > s_len / 4 && want.matches < s_len * 3 / 4, "{want:?}");
            }
            for name in SYSTEMS {
                let m = join_with(name, &r, &s, 2, 32, r_log2);
                assert_eq!((m.outcome, m.refused), (want, 0), "{name}, fraction {fraction}");
            }
        }
    }
}
