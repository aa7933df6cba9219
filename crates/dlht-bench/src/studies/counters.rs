//! Counters: threads add 1 to counters of Zipf-distributed keys (θ = 0.99
//! by default), inserting a counter the first time its key comes up — the
//! k-mer counting and rate-limiter idiom — in interleaved rounds.
//!
//! - `dlht`: [`Map::fetch_add`](dlht::Map::fetch_add), a 16-byte CAS on the
//!   key's slot (an insert when absent);
//! - `dlht-batch`: the same through batches of 32
//!   [`Request::fetch_add`](dlht::Request::fetch_add), prefetched;
//! - `dashmap`: `entry(k).or_insert(0) += 1` under its shard lock;
//! - `papaya`: `update_or_insert(k, |v| v + 1, 1)`, which allocates a new
//!   entry per update;
//! - `scc`: `entry_sync(k).and_modify(+1).or_insert(1)`.
//!
//! A second table counts **words**: string keys from a
//! vocabulary of 2^N distinct words of 3–12 letters, drawn with the same
//! Zipf popularity, each system with its fastest idiom for a counter per
//! word (`AtomicU64` values where the map hands out references):
//!
//! - `dlht-alloc`: [`AllocMap<String, AtomicU64>`](dlht::AllocMap): `get`
//!   by `&str` and `fetch_add`, `get_or_insert_with` the first time;
//! - `dlht-bytes`: [`ByteMap`](dlht::ByteMap) with 8-byte counters:
//!   `update` (a new value per increment, as papaya's `update`), `insert`
//!   the first time (words of up to 8 bytes live in the slot itself);
//! - `dlht-alloc-batch`: `dlht-alloc` through batches of 32 gets
//!   ([`AllocMap::get_many`](dlht::AllocMap::get_many), prefetched);
//! - `dashmap`, `papaya`, `scc`: `get` / `read` by `&str` and `fetch_add`,
//!   `entry(word.to_owned())` / `get_or_insert` the first time.
//!
//! Every count is checked: after each measurement a system's counters must
//! sum to exactly the increments made into it so far (a lost or doubled
//! update fails the run, for dlht, or is reported, for a peer).

use crate::compare;
use crate::harness::keys::{ZipfCursor, ZipfTrace};
use crate::harness::{self, Spread};
use crate::progress::Progress;
use crate::studies::write;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Options of the counter study.
#[derive(clap::Args, Clone, Debug)]
pub struct CounterArgs {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 0.5, value_parser = compare::positive_seconds)]
    pub seconds: f64,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub threads: Vec<usize>,
    /// Distinct keys: 2^N.
    #[arg(long, default_value_t = 22, value_parser = clap::value_parser!(u32).range(10..=30))]
    pub keys_log2: u32,
    /// Zipf exponent of the key popularity.
    #[arg(long, default_value_t = 0.99)]
    pub zipf_theta: f64,
    /// Folder for counters.csv and counters.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny tables, a few seconds.
    #[arg(long)]
    pub smoke: bool,
}

/// A table of counters, with keys of type `Key` (u64, or words).
trait Counters<Key = u64>: Sync {
    fn name(&self) -> &'static str;
    fn is_dlht(&self) -> bool {
        self.name().starts_with("dlht")
    }
    /// Add 1 to the counter of each key.
    fn add_ones(&self, keys: &[Key]);
    /// The sum of every counter.
    fn total(&self) -> u64;
}

/// Keys per call of [`Counters::add_ones`] (and per dlht batch).
const BATCH: usize = 32;

/// The sum of a dlht map's counters.
fn sum(m: &dlht::Map<u64, u64>) -> u64 {
    m.iter().map(|(_, v)| v).sum()
}

struct Dlht(dlht::Map<u64, u64>);

impl Counters for Dlht {
    fn name(&self) -> &'static str {
        "dlht"
    }
    fn add_ones(&self, keys: &[u64]) {
        for &k in keys {
            self.0.fetch_add(k, 1);
        }
    }
    fn total(&self) -> u64 {
        sum(&self.0)
    }
}

struct DlhtBatch(dlht::Map<u64, u64>);

impl Counters for DlhtBatch {
    fn name(&self) -> &'static str {
        "dlht-batch"
    }
    fn add_ones(&self, keys: &[u64]) {
        let mut reqs = [dlht::Request::Get(0); BATCH];
        let mut out = [dlht::Response::NotExecuted; BATCH];
        for (r, &k) in reqs.iter_mut().zip(keys) {
            *r = dlht::Request::fetch_add(k, 1);
        }
        let n = keys.len();
        let ran = self.0.batch(&reqs[..n], &mut out[..n], dlht::StopOn::Never).expect("the index grows");
        assert_eq!(ran, n, "dlht-batch: a batch stopped early");
    }
    fn total(&self) -> u64 {
        sum(&self.0)
    }
}

struct Dash(dashmap::DashMap<u64, u64>);

impl Counters for Dash {
    fn name(&self) -> &'static str {
        "dashmap"
    }
    fn add_ones(&self, keys: &[u64]) {
        for &k in keys {
            *self.0.entry(k).or_insert(0) += 1;
        }
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|e| *e.value()).sum()
    }
}

struct Papaya(papaya::HashMap<u64, u64>);

impl Counters for Papaya {
    fn name(&self) -> &'static str {
        "papaya"
    }
    fn add_ones(&self, keys: &[u64]) {
        let m = self.0.pin();
        for &k in keys {
            m.update_or_insert(k, |v| v + 1, 1);
        }
    }
    fn total(&self) -> u64 {
        self.0.pin().iter().map(|(_, v)| *v).sum()
    }
}

struct Scc(scc::HashMap<u64, u64>);

impl Counters for Scc {
    fn name(&self) -> &'static str {
        "scc"
    }
    fn add_ones(&self, keys: &[u64]) {
        for &k in keys {
            self.0.entry_sync(k).and_modify(|v| *v += 1).or_insert(1);
        }
    }
    fn total(&self) -> u64 {
        let mut sum = 0;
        self.0.iter_sync(|_, v| {
            sum += *v;
            true
        });
        sum
    }
}

/// The words counted by the second table: 2^N distinct words of 3–12
/// lowercase letters, in one arena (reading a word is one miss, as in a
/// parser's buffer), in random order: Zipf rank i is word i.
struct Vocabulary {
    arena: String,
    /// Where each word ends in `arena`.
    ends: Vec<u32>,
}

impl Vocabulary {
    fn new(n: usize, seed: u64) -> Vocabulary {
        let mut seen = std::collections::HashSet::with_capacity(n);
        let mut arena = String::new();
        let mut ends = Vec::with_capacity(n);
        let mut x = seed | 1;
        while ends.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = 3 + (x % 10) as usize;
            let mut y = x >> 4;
            let word: String = (0..len)
                .map(|_| {
                    let c = (b'a' + (y % 26) as u8) as char;
                    y /= 26;
                    c
                })
                .collect();
            if !seen.contains(&word) {
                arena.push_str(&word);
                ends.push(arena.len() as u32);
                seen.insert(word);
            }
        }
        Vocabulary { arena, ends }
    }

    fn word(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.arena[start..self.ends[i] as usize]
    }
}

/// The words of the trace in trace order, one after the other: what a
/// word counter reads from its input. A thread reads its share
/// sequentially, so the harness costs a few cached reads per word, not
/// the misses of looking a word up in the vocabulary.
struct Text {
    bytes: String,
    /// Where the word at each trace position ends in `bytes`.
    ends: Vec<u32>,
}

impl Text {
    fn new(vocabulary: &Vocabulary, trace: &ZipfTrace) -> Text {
        let mut bytes = String::new();
        let ends = trace
            .indexes()
            .iter()
            .map(|&i| {
                bytes.push_str(vocabulary.word(i as usize % vocabulary.ends.len()));
                bytes.len() as u32
            })
            .collect();
        Text { bytes, ends }
    }

    /// The word at trace position `p`.
    #[inline(always)]
    fn word(&self, p: usize) -> &str {
        let start = if p == 0 { 0 } else { self.ends[p - 1] as usize };
        &self.bytes[start..self.ends[p] as usize]
    }
}

struct WordsAlloc(dlht::AllocMap<String, AtomicU64>);

impl<'w> Counters<&'w str> for WordsAlloc {
    fn name(&self) -> &'static str {
        "dlht-alloc"
    }
    fn add_ones(&self, words: &[&'w str]) {
        let g = self.0.guard();
        for &w in words {
            add_one(&self.0, w, self.0.get(w, &g), &g);
        }
    }
    fn total(&self) -> u64 {
        alloc_total(&self.0)
    }
}

/// Add 1 to `w`'s counter, `found` by a get (inserting it if absent).
fn add_one(m: &dlht::AllocMap<String, AtomicU64>, w: &str, found: Option<&AtomicU64>, g: &dlht::Guard) {
    // Relaxed: a count; totals are read after the threads join.
    match found {
        Some(c) => c.fetch_add(1, Ordering::Relaxed),
        None => m.get_or_insert_with(w.to_owned(), || AtomicU64::new(0), g).fetch_add(1, Ordering::Relaxed),
    };
}

fn alloc_total(m: &dlht::AllocMap<String, AtomicU64>) -> u64 {
    m.iter(&m.guard()).map(|(_, _, c)| c.load(Ordering::Relaxed)).sum()
}

struct WordsAllocBatch(dlht::AllocMap<String, AtomicU64>);

impl<'w> Counters<&'w str> for WordsAllocBatch {
    fn name(&self) -> &'static str {
        "dlht-alloc-batch"
    }
    fn add_ones(&self, words: &[&'w str]) {
        let g = self.0.guard();
        let mut found = [None; BATCH];
        let found = &mut found[..words.len()];
        self.0.get_many(words, found, dlht::Access::Key, &g).expect("lengths match");
        for (&w, &mut c) in words.iter().zip(found) {
            add_one(&self.0, w, c, &g);
        }
    }
    fn total(&self) -> u64 {
        alloc_total(&self.0)
    }
}

struct WordsBytes(dlht::ByteMap);

/// The 8-byte counter after `v`.
fn plus_one(v: &[u8]) -> [u8; 8] {
    (u64::from_le_bytes(v.try_into().expect("counters are 8 bytes")) + 1).to_le_bytes()
}

impl<'w> Counters<&'w str> for WordsBytes {
    fn name(&self) -> &'static str {
        "dlht-bytes"
    }
    fn add_ones(&self, words: &[&'w str]) {
        let g = self.0.guard();
        for &w in words {
            let w = w.as_bytes();
            if self.0.update(w, plus_one, &g).expect("memory").is_none()
                && self.0.insert(w, &1u64.to_le_bytes(), &g).expect("memory").is_err()
            {
                self.0.update(w, plus_one, &g).expect("memory").expect("counters are never removed");
            }
        }
    }
    fn total(&self) -> u64 {
        let g = self.0.guard();
        self.0.iter(&g).map(|(_, _, v)| u64::from_le_bytes(v.as_bytes().try_into().unwrap_or_default())).sum()
    }
}

struct WordsDash(dashmap::DashMap<String, AtomicU64>);

impl<'w> Counters<&'w str> for WordsDash {
    fn name(&self) -> &'static str {
        "dashmap"
    }
    fn add_ones(&self, words: &[&'w str]) {
        for &w in words {
            match self.0.get(w) {
                // Relaxed: as above.
                Some(c) => c.fetch_add(1, Ordering::Relaxed),
                None => self
                    .0
                    .entry(w.to_owned())
                    .or_insert_with(|| AtomicU64::new(0))
                    .fetch_add(1, Ordering::Relaxed),
            };
        }
    }
    fn total(&self) -> u64 {
        self.0.iter().map(|e| e.value().load(Ordering::Relaxed)).sum()
    }
}

struct WordsPapaya(papaya::HashMap<String, AtomicU64>);

impl<'w> Counters<&'w str> for WordsPapaya {
    fn name(&self) -> &'static str {
        "papaya"
    }
    fn add_ones(&self, words: &[&'w str]) {
        let m = self.0.pin();
        for &w in words {
            match m.get(w) {
                // Relaxed: as above.
                Some(c) => c.fetch_add(1, Ordering::Relaxed),
                None => m.get_or_insert(w.to_owned(), AtomicU64::new(0)).fetch_add(1, Ordering::Relaxed),
            };
        }
    }
    fn total(&self) -> u64 {
        self.0.pin().iter().map(|(_, c)| c.load(Ordering::Relaxed)).sum()
    }
}

struct WordsScc(scc::HashMap<String, AtomicU64>);

impl<'w> Counters<&'w str> for WordsScc {
    fn name(&self) -> &'static str {
        "scc"
    }
    fn add_ones(&self, words: &[&'w str]) {
        for &w in words {
            // Relaxed: as above.
            if self.0.read_sync(w, |_, c| c.fetch_add(1, Ordering::Relaxed)).is_none() {
                self.0
                    .entry_sync(w.to_owned())
                    .or_insert(AtomicU64::new(0))
                    .get()
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    fn total(&self) -> u64 {
        let mut sum = 0;
        self.0.iter_sync(|_, c| {
            sum += c.load(Ordering::Relaxed);
            true
        });
        sum
    }
}

/// A thread's state in a measurement: its place in the trace, and the
/// increments it made, added to the shared tally when the thread ends.
struct Tally<'a> {
    cursor: crate::harness::keys::ZipfCursor<'a>,
    done: u64,
    into: &'a AtomicU64,
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        // Relaxed: read after the measurement's threads are joined.
        self.into.fetch_add(self.done, Ordering::Relaxed);
    }
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    /// "u64" or "words".
    keys: &'static str,
    threads: usize,
    system: &'static str,
    mops: Spread,
    /// Per-round ratio dlht ÷ this system.
    dlht_over: Spread,
}

/// One timed measurement on `s`, each key drawn by `next_key` from a
/// thread's cursor over the trace; Err if its counters do not add up.
fn measure_keys<Key: Copy + Default>(
    s: &dyn Counters<Key>,
    trace: &ZipfTrace,
    next_key: impl Fn(&mut ZipfCursor<'_>) -> Key + Sync,
    threads: usize,
    dur: Duration,
    made: &AtomicU64,
) -> Result<f64, String> {
    let tally = AtomicU64::new(0);
    let mops = harness::timed(
        threads,
        dur,
        1,
        0,
        |t| Tally { cursor: trace.cursor(t, threads), done: 0, into: &tally },
        |w| {
            let mut keys = [Key::default(); BATCH];
            for k in keys.iter_mut() {
                *k = next_key(&mut w.state.cursor);
            }
            s.add_ones(&keys);
            w.state.done += BATCH as u64;
            BATCH as u64
        },
    );
    // Relaxed: the threads are joined.
    let t = tally.load(Ordering::Relaxed);
    let want = made.fetch_add(t, Ordering::Relaxed) + t;
    match s.total() {
        got if got == want => Ok(mops),
        got => Err(format!("{}: counters sum to {got}, {want} increments were made", s.name())),
    }
}

/// Measure `systems` (the first one the reference of the ratios) at each
/// thread count in interleaved rounds, keys from `next_key`; adds the
/// rows. True if a dlht result check failed.
fn table<Key: Copy + Default>(
    keys: &'static str,
    systems: &[&dyn Counters<Key>],
    trace: &ZipfTrace,
    next_key: impl Fn(&mut ZipfCursor<'_>) -> Key + Sync + Copy,
    a: &CounterArgs,
    rows: &mut Vec<Row>,
    bar: &Progress,
) -> bool {
    let dur = Duration::from_secs_f64(if a.smoke { 0.02 } else { a.seconds });
    let made: Vec<AtomicU64> = systems.iter().map(|_| AtomicU64::new(0)).collect();
    let mut failed = false;
    for &threads in &a.threads {
        let threads = threads.max(1);
        let mut steps: Vec<harness::Step<'_>> = systems
            .iter()
            .zip(&made)
            .map(|(&s, made)| {
                let step: harness::Step<'_> =
                    Box::new(move |_| measure_keys(s, trace, next_key, threads, dur, made));
                step
            })
            .collect();
        let got = harness::rounds(&mut steps, a.rounds as usize, |i, r| {
            let on = format!("{threads} thread{}", if threads == 1 { "" } else { "s" });
            bar.set_message(format!(
                "{keys} keys, round {}/{}: {} on {on}",
                r + 1,
                a.rounds,
                systems[i].name()
            ));
            bar.inc(1);
        });
        drop(steps);
        let per_system: Vec<Vec<f64>> =
            got.iter().map(|r| r.iter().filter_map(|x| x.as_ref().ok().copied()).collect()).collect();
        for (s, r) in systems.iter().zip(&got) {
            if let Some(e) = r.iter().find_map(|x| x.as_ref().err()) {
                eprintln!("check failed{}: {e}", if s.is_dlht() { "" } else { " (a peer; left out)" });
                failed |= s.is_dlht();
            }
        }
        for (s, mine) in systems.iter().zip(&per_system) {
            let ratios: Vec<f64> = per_system[0].iter().zip(mine).map(|(d, m)| d / m).collect();
            if let (Some(mops), Some(dlht_over)) = (Spread::of(mine), Spread::of(&ratios)) {
                rows.push(Row { keys, threads, system: s.name(), mops, dlht_over });
            }
        }
    }
    failed
}

/// The counter study. True if a dlht result check failed.
pub fn run(a: CounterArgs) -> bool {
    let machine = crate::harness::machine::Machine::describe();
    println!("# dlht-bench counters: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    let n = 1u64 << if a.smoke { 12 } else { a.keys_log2 };
    let trace = match ZipfTrace::new(n, a.zipf_theta, 1 << 22, 0xC0FFEE) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return true;
        }
    };
    let dlht = Dlht(dlht::Map::with_capacity(n as usize));
    let batch = DlhtBatch(dlht::Map::with_capacity(n as usize));
    let dash = Dash(dashmap::DashMap::with_capacity(n as usize));
    let papaya = Papaya(papaya::HashMap::with_capacity(n as usize));
    let scc = Scc(scc::HashMap::with_capacity(n as usize));
    let mut rows = Vec::new();
    let mask = n - 1;
    let ints: Vec<&dyn Counters> = vec![&dlht, &batch, &dash, &papaya, &scc];
    let int_of = |c: &mut ZipfCursor<'_>| crate::compare::workloads::key(c.next_index() & mask);
    // Five systems count u64 keys, six count words.
    let bar = Progress::new("Counting", (a.threads.len() * a.rounds as usize * 11) as u64, "steps");
    let mut failed = table("u64", &ints, &trace, int_of, &a, &mut rows, &bar);
    drop(ints);
    drop((dlht, batch, dash, papaya, scc));

    // Words: each table starts empty and grows, as a word count does.
    bar.set_message(format!("words: drawing a text from a vocabulary of {n} words"));
    let text = Text::new(&Vocabulary::new(n as usize, 0x5EED), &trace);
    let alloc = WordsAlloc(dlht::AllocMap::new());
    let alloc_batch = WordsAllocBatch(dlht::AllocMap::new());
    let bytes = WordsBytes(dlht::ByteMap::new());
    let dash = WordsDash(dashmap::DashMap::new());
    let papaya = WordsPapaya(papaya::HashMap::new());
    let scc = WordsScc(scc::HashMap::new());
    let words: Vec<&dyn Counters<&str>> = vec![&alloc, &alloc_batch, &bytes, &dash, &papaya, &scc];
    let word_of = |c: &mut ZipfCursor<'_>| text.word(c.next_position());
    failed |= table("words", &words, &trace, word_of, &a, &mut rows, &bar);
    drop(bar);

    println!(
        "{:>5} {:>7} {:<16} {:>24} {:>20}",
        "keys", "threads", "system", "M increments/s", "dlht ÷ system"
    );
    let mut csv = String::from("keys,threads,system,mops,mops_min,mops_max,dlht_over\n");
    for r in &rows {
        println!(
            "{:>5} {:>7} {:<16} {:>24} {:>20}",
            r.keys,
            r.threads,
            r.system,
            r.mops.show(2),
            r.dlht_over.show(2)
        );
        let _ = writeln!(
            csv,
            "{},{},{},{:.4},{:.4},{:.4},{:.4}",
            r.keys, r.threads, r.system, r.mops.median, r.mops.min, r.mops.max, r.dlht_over.median
        );
    }
    println!(
        "# 2^{} keys (u64 keys presized; words from empty), Zipf θ = {}; medians (min–max) over {} interleaved rounds; ratios per round (÷ the first system of the table); every total checked",
        n.trailing_zeros(),
        a.zipf_theta,
        a.rounds
    );
    let dir = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("dlht-results/counters-{}", machine.date_unix)));
    write(&dir, "counters.csv", &csv);
    write(&dir, "counters.json", &serde_json::to_string_pretty(&rows).unwrap_or_default());
    println!("# results: {}", dir.display());
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_system_counts_exactly_on_two_threads() {
        let trace = ZipfTrace::new(1 << 10, 0.99, 1 << 12, 1).unwrap();
        let systems: Vec<Box<dyn Counters>> = vec![
            Box::new(Dlht(dlht::Map::new())),
            Box::new(DlhtBatch(dlht::Map::new())),
            Box::new(Dash(dashmap::DashMap::new())),
            Box::new(Papaya(papaya::HashMap::new())),
            Box::new(Scc(scc::HashMap::new())),
        ];
        for s in &systems {
            let made = AtomicU64::new(0);
            for _ in 0..2 {
                let r = measure_keys(&**s, &trace, |c| c.next_index(), 2, Duration::from_millis(20), &made);
                assert!(r.is_ok(), "{r:?}");
            }
            assert!(made.load(Ordering::Relaxed) > 0);
        }
    }

    #[test]
    fn every_word_system_counts_exactly_on_two_threads() {
        let vocabulary = Vocabulary::new(1 << 10, 7);
        let distinct: std::collections::HashSet<&str> = (0..1 << 10).map(|i| vocabulary.word(i)).collect();
        assert_eq!(distinct.len(), 1 << 10);
        assert!(distinct.iter().all(|w| (3..=12).contains(&w.len())));
        let trace = ZipfTrace::new(1 << 10, 0.99, 1 << 12, 1).unwrap();
        let text = Text::new(&vocabulary, &trace);
        assert_eq!(text.word(5), vocabulary.word(trace.indexes()[5] as usize));
        let systems: Vec<Box<dyn Counters<&str>>> = vec![
            Box::new(WordsAlloc(dlht::AllocMap::new())),
            Box::new(WordsAllocBatch(dlht::AllocMap::new())),
            Box::new(WordsBytes(dlht::ByteMap::new())),
            Box::new(WordsDash(dashmap::DashMap::new())),
            Box::new(WordsPapaya(papaya::HashMap::new())),
            Box::new(WordsScc(scc::HashMap::new())),
        ];
        for s in &systems {
            let made = AtomicU64::new(0);
            for _ in 0..2 {
                let word_of = |c: &mut ZipfCursor<'_>| text.word(c.next_position());
                let r = measure_keys(&**s, &trace, word_of, 2, Duration::from_millis(20), &made);
                assert!(r.is_ok(), "{r:?}");
            }
            assert!(made.load(Ordering::Relaxed) > 0);
        }
    }

    #[test]
    fn a_lost_increment_is_caught() {
        /// Drops every 100th increment.
        struct Lossy(dlht::Map<u64, u64>, AtomicU64);
        impl Counters for Lossy {
            fn name(&self) -> &'static str {
                "lossy"
            }
            fn add_ones(&self, keys: &[u64]) {
                for &k in keys {
                    if self.1.fetch_add(1, Ordering::Relaxed) % 100 != 99 {
                        self.0.fetch_add(k, 1);
                    }
                }
            }
            fn total(&self) -> u64 {
                self.0.iter().map(|(_, v)| v).sum()
            }
        }
        let trace = ZipfTrace::new(1 << 10, 0.99, 1 << 12, 1).unwrap();
        let s = Lossy(dlht::Map::new(), AtomicU64::new(0));
        let r =
            measure_keys(&s, &trace, |c| c.next_index(), 1, Duration::from_millis(20), &AtomicU64::new(0));
        assert!(r.is_err());
    }
}
