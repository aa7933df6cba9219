//! Lock manager (DLHT paper §5.3.3): a lock is a key present in the table.
//! A transaction picks `--locks-per-txn` distinct keys out of `--keys`
//! (uniform, or Zipf with `--zipf θ`), sorts them, and locks them all with
//! ONE order-preserving batch of inserts that stops at the first conflict;
//! on a conflict it releases what it took (a batch of removes) and retries
//! (an abort); once it holds them all it runs its critical section and
//! unlocks with a batch of removes. Sorted, all-or-nothing acquisition
//! never waits while holding a lock, so it cannot deadlock.
//!
//! - `dlht`: [`Map<u64, u64>`](dlht::Map) (the value: the owner),
//!   [`Map::batch`](dlht::Map::batch) of inserts with
//!   [`StopOn::Failure`](dlht::StopOn::Failure), removes checked to return
//!   the owner;
//! - `dlht-set`: [`Set<u64>`](dlht::Set) and
//!   [`Set::batch_with`](dlht::Set::batch_with) of inserts with
//!   [`StopOn::Failure`](dlht::StopOn::Failure): the keys taken before the
//!   first conflict are released;
//! - `dashmap`, `papaya`: insert-if-absent one key at a time in the same
//!   sorted order, stopping at the first conflict and removing what was
//!   taken.
//!
//! Checks (always on): while it holds its locks a transaction writes its
//! id into each key's owner slot and adds 1 to the key's counter with a
//! plain load and store (a lost update if two held the same lock), and
//! counts the commit per key atomically; before unlocking it checks that
//! every owner slot is still its own. After each measurement every
//! counter must equal the commits that locked its key, the table must be
//! empty, and every unlock must have found its lock held by its owner.
//!
//! Reported per system and thread count: locks + unlocks per second (of
//! committed transactions) and the abort rate (aborted attempts ÷ all
//! attempts).

use crate::harness::keys::{KeyStream, ZipfCursor, ZipfTrace};
use crate::harness::{self, Spread};
use crate::progress::Progress;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The systems, in the order they run.
pub const SYSTEMS: [&str; 4] = ["dlht", "dlht-set", "dashmap", "papaya"];

/// Options of the lock-manager study.
#[derive(clap::Args, Clone, Debug)]
pub struct LockArgs {
    #[command(flatten)]
    pub run: super::RunArgs,
    /// Lockable keys.
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(2..=1 << 32))]
    pub keys: u64,
    /// Locks per transaction (distinct keys, at most half of --keys).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub locks_per_txn: u32,
    /// Zipf exponent of key popularity (uniform when absent).
    #[arg(long)]
    pub zipf: Option<f64>,
    /// Systems, comma-separated (dlht, dlht-set, dashmap, papaya).
    #[arg(long, value_delimiter = ',', default_value = "dlht,dlht-set,dashmap,papaya")]
    pub systems: Vec<String>,
}

/// How an attempt to lock a transaction's keys ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// Every key is held.
    Locked,
    /// A key was held by another: none are held now.
    Aborted,
    /// Releasing after a conflict found a key not held by this owner.
    Broken,
}

/// A thread's reusable request buffers.
#[derive(Default)]
pub(crate) struct Scratch {
    reqs: Vec<dlht::Request<u64, u64>>,
    resps: Vec<dlht::Response<u64>>,
    set_reqs: Vec<dlht::SetRequest<u64>>,
    set_out: Vec<bool>,
}

/// A lock table: a key is locked while present.
pub(crate) trait LockTable: Sync {
    fn name(&self) -> &'static str;
    /// Lock every key of `keys` (sorted, distinct) for `owner`, or none.
    fn lock(&self, keys: &[u64], owner: u64, s: &mut Scratch) -> Attempt;
    /// Unlock `keys`, held by `owner`: false if one was not held by it.
    fn unlock(&self, keys: &[u64], owner: u64, s: &mut Scratch) -> bool;
    /// Locks held now (when no thread runs).
    fn held(&self) -> usize;
}

/// Remove `keys` from a dlht lock table in one batch: true if each was
/// held by `owner`.
fn dlht_release(m: &dlht::Map<u64, u64>, keys: &[u64], owner: u64, s: &mut Scratch) -> bool {
    s.reqs.clear();
    s.reqs.extend(keys.iter().map(|&k| dlht::Request::Remove(k)));
    s.resps.clear();
    s.resps.resize(keys.len(), dlht::Response::NotExecuted);
    m.batch(&s.reqs, &mut s.resps, dlht::StopOn::Never).expect("buffers of equal length");
    s.resps.iter().all(|r| *r == dlht::Response::Remove(Some(owner)))
}

struct Dlht(dlht::Map<u64, u64>);

impl LockTable for Dlht {
    fn name(&self) -> &'static str {
        "dlht"
    }
    fn lock(&self, keys: &[u64], owner: u64, s: &mut Scratch) -> Attempt {
        s.reqs.clear();
        s.reqs.extend(keys.iter().map(|&k| dlht::Request::Insert(k, owner)));
        s.resps.clear();
        s.resps.resize(keys.len(), dlht::Response::NotExecuted);
        self.0.batch(&s.reqs, &mut s.resps, dlht::StopOn::Failure).expect("the lock table grows");
        // In order, stopping at the first failure: what was taken is the
        // prefix that succeeded.
        let taken = s.resps.iter().take_while(|r| r.succeeded()).count();
        if taken == keys.len() {
            Attempt::Locked
        } else if dlht_release(&self.0, &keys[..taken], owner, s) {
            Attempt::Aborted
        } else {
            Attempt::Broken
        }
    }
    fn unlock(&self, keys: &[u64], owner: u64, s: &mut Scratch) -> bool {
        dlht_release(&self.0, keys, owner, s)
    }
    fn held(&self) -> usize {
        self.0.len()
    }
}

struct DlhtSet(dlht::Set<u64>);

impl DlhtSet {
    /// Remove `keys` in one batch: true if each was present.
    fn release(&self, keys: impl Iterator<Item = u64>, s: &mut Scratch) -> bool {
        s.set_reqs.clear();
        s.set_reqs.extend(keys.map(dlht::SetRequest::Remove));
        s.set_out.clear();
        s.set_out.resize(s.set_reqs.len(), false);
        self.0.batch(&s.set_reqs, &mut s.set_out).expect("buffers of equal length");
        s.set_out.iter().all(|&b| b)
    }
}

impl LockTable for DlhtSet {
    fn name(&self) -> &'static str {
        "dlht-set"
    }
    fn lock(&self, keys: &[u64], _owner: u64, s: &mut Scratch) -> Attempt {
        s.set_reqs.clear();
        s.set_reqs.extend(keys.iter().map(|&k| dlht::SetRequest::Insert(k)));
        s.set_out.clear();
        s.set_out.resize(keys.len(), false);
        self.0.batch_with(&s.set_reqs, &mut s.set_out, dlht::StopOn::Failure).expect("the lock table grows");
        if s.set_out.iter().all(|&b| b) {
            return Attempt::Locked;
        }
        let out = std::mem::take(&mut s.set_out);
        let taken = keys.iter().zip(&out).filter(|(_, &t)| t).map(|(&k, _)| k);
        let released = self.release(taken, s);
        if released {
            Attempt::Aborted
        } else {
            Attempt::Broken
        }
    }
    fn unlock(&self, keys: &[u64], _owner: u64, s: &mut Scratch) -> bool {
        self.release(keys.iter().copied(), s)
    }
    fn held(&self) -> usize {
        self.0.len()
    }
}

struct Dash(dashmap::DashMap<u64, u64>);

impl Dash {
    fn release(&self, keys: &[u64], owner: u64) -> bool {
        // Every key is removed, even after a mismatch.
        keys.iter().filter(|&&k| self.0.remove(&k) != Some((k, owner))).count() == 0
    }
}

impl LockTable for Dash {
    fn name(&self) -> &'static str {
        "dashmap"
    }
    fn lock(&self, keys: &[u64], owner: u64, _: &mut Scratch) -> Attempt {
        for (i, &k) in keys.iter().enumerate() {
            // The entry (and its shard's lock) is dropped at the end of
            // this statement, before any release.
            let taken = match self.0.entry(k) {
                dashmap::mapref::entry::Entry::Vacant(v) => {
                    v.insert(owner);
                    true
                }
                dashmap::mapref::entry::Entry::Occupied(_) => false,
            };
            if !taken {
                return if self.release(&keys[..i], owner) { Attempt::Aborted } else { Attempt::Broken };
            }
        }
        Attempt::Locked
    }
    fn unlock(&self, keys: &[u64], owner: u64, _: &mut Scratch) -> bool {
        self.release(keys, owner)
    }
    fn held(&self) -> usize {
        self.0.len()
    }
}

struct Papaya(papaya::HashMap<u64, u64>);

impl Papaya {
    fn release(&self, keys: &[u64], owner: u64) -> bool {
        let m = self.0.pin();
        // Every key is removed, even after a mismatch.
        keys.iter().filter(|&&k| m.remove(&k) != Some(&owner)).count() == 0
    }
}

impl LockTable for Papaya {
    fn name(&self) -> &'static str {
        "papaya"
    }
    fn lock(&self, keys: &[u64], owner: u64, _: &mut Scratch) -> Attempt {
        let m = self.0.pin();
        for (i, &k) in keys.iter().enumerate() {
            if m.try_insert(k, owner).is_err() {
                return if self.release(&keys[..i], owner) { Attempt::Aborted } else { Attempt::Broken };
            }
        }
        Attempt::Locked
    }
    fn unlock(&self, keys: &[u64], owner: u64, _: &mut Scratch) -> bool {
        self.release(keys, owner)
    }
    fn held(&self) -> usize {
        self.0.len()
    }
}

/// A fresh lock table of system `name`, sized for the locks `threads`
/// transactions of `locks` keys can hold at once.
pub(crate) fn table(name: &str, threads: usize, locks: usize) -> Box<dyn LockTable> {
    let n = (4 * threads * locks).max(1024);
    match name {
        "dlht" => Box::new(Dlht(dlht::Map::with_capacity(n))),
        "dlht-set" => Box::new(DlhtSet(dlht::Set::with_capacity(n))),
        "dashmap" => Box::new(Dash(dashmap::DashMap::with_capacity(n))),
        "papaya" => Box::new(Papaya(papaya::HashMap::with_capacity(n))),
        other => unreachable!("unknown system {other} (checked before)"),
    }
}

/// What the critical sections write for one key, in one cache line (one
/// miss per key, not three, so that the checks cost little beside the
/// locks).
#[derive(Default)]
#[repr(align(32))]
struct Slot {
    /// The id of the transaction's thread that last held the key.
    owner: AtomicU64,
    /// Incremented with a plain load and store under the lock.
    count: AtomicU64,
    /// Committed transactions that locked the key (atomic).
    commits: AtomicU64,
}

/// What the critical sections write, per key, and what they count.
struct Ledger {
    slots: Vec<Slot>,
    /// Totals over the threads: commits, aborts, violations.
    totals: [AtomicU64; 3],
}

impl Ledger {
    fn new(keys: u64) -> Ledger {
        Ledger { slots: (0..keys).map(|_| Slot::default()).collect(), totals: Default::default() }
    }

    /// The critical section of `me` holding `keys`: false if another
    /// wrote an owner slot meanwhile. Relaxed: the lock table's insert
    /// and remove order these accesses between holders (if they do not,
    /// the counters show it).
    fn critical(&self, keys: &[u64], me: u64) -> bool {
        for &k in keys {
            let s = &self.slots[k as usize];
            s.owner.store(me, Ordering::Relaxed);
            let c = s.count.load(Ordering::Relaxed);
            s.count.store(c + 1, Ordering::Relaxed);
            s.commits.fetch_add(1, Ordering::Relaxed);
        }
        keys.iter().all(|&k| self.slots[k as usize].owner.load(Ordering::Relaxed) == me)
    }
}

/// A thread's state in a measurement; its tallies go to the ledger's
/// totals when it ends.
struct Txn<'a> {
    zipf: Option<ZipfCursor<'a>>,
    keys: Vec<u64>,
    scratch: Scratch,
    me: u64,
    tally: [u64; 3],
    ledger: &'a Ledger,
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        for (t, &n) in self.ledger.totals.iter().zip(&self.tally) {
            // Relaxed: read after the measurement's threads are joined.
            t.fetch_add(n, Ordering::Relaxed);
        }
    }
}

impl Txn<'_> {
    /// Draw `locks` distinct keys of `0..n`, sorted.
    fn draw(&mut self, stream: &mut KeyStream, n: u64, locks: usize) {
        self.keys.clear();
        while self.keys.len() < locks {
            let k = match &mut self.zipf {
                Some(c) => c.next_index() % n,
                None => stream.next_index(),
            };
            if !self.keys.contains(&k) {
                self.keys.push(k);
            }
        }
        self.keys.sort_unstable();
    }

    /// Lock, run the critical section, unlock: locks + unlocks done (0 if
    /// the transaction gave up: broken, or stuck past `stuck_after`).
    fn run(&mut self, t: &dyn LockTable, stuck_after: Duration) -> u64 {
        let mut since: Option<Instant> = None;
        let mut tries = 0u64;
        loop {
            match t.lock(&self.keys, self.me, &mut self.scratch) {
                Attempt::Locked => break,
                Attempt::Aborted => {
                    self.tally[1] += 1;
                    tries += 1;
                    if tries % 64 == 0 {
                        std::thread::yield_now();
                        let start = *since.get_or_insert_with(Instant::now);
                        if start.elapsed() > stuck_after {
                            self.tally[2] += 1;
                            return 0;
                        }
                    } else {
                        std::hint::spin_loop();
                    }
                }
                Attempt::Broken => {
                    self.tally[2] += 1;
                    return 0;
                }
            }
        }
        let exclusive = self.ledger.critical(&self.keys, self.me);
        let unlocked = t.unlock(&self.keys, self.me, &mut self.scratch);
        self.tally[2] += u64::from(!exclusive) + u64::from(!unlocked);
        self.tally[0] += 1;
        2 * self.keys.len() as u64
    }
}

/// A measurement's parameters.
#[derive(Clone, Copy)]
struct Params<'a> {
    keys: u64,
    locks: usize,
    zipf: Option<&'a ZipfTrace>,
    threads: usize,
    dur: Duration,
    /// A transaction aborting for this long gives up (a violation).
    stuck_after: Duration,
}

/// One measurement's figures.
#[derive(Clone, Copy, Debug)]
struct Measured {
    mops: f64,
    commits: u64,
    aborts: u64,
}

/// Run transactions on `t` for `p.dur`; Err if a check failed.
fn measure(t: &dyn LockTable, p: Params<'_>) -> Result<Measured, String> {
    let ledger = Ledger::new(p.keys);
    let mops = harness::timed(
        p.threads,
        p.dur,
        p.keys,
        0x10C5,
        |i| Txn {
            zipf: p.zipf.map(|z| z.cursor(i, p.threads)),
            keys: Vec::with_capacity(p.locks),
            scratch: Scratch::default(),
            me: i as u64 + 1,
            tally: [0; 3],
            ledger: &ledger,
        },
        |w| {
            w.state.draw(&mut w.keys, p.keys, p.locks);
            w.state.run(t, p.stuck_after)
        },
    );
    // Relaxed: the threads are joined.
    let [commits, aborts, violations] = ledger.totals.each_ref().map(|a| a.load(Ordering::Relaxed));
    let mut problems = Vec::new();
    if violations > 0 {
        problems.push(format!(
            "{violations} transactions saw another holder, found a lock not theirs, or were stuck"
        ));
    }
    if t.held() != 0 {
        problems.push(format!("{} locks still held at the end", t.held()));
    }
    let bad = ledger
        .slots
        .iter()
        .filter(|s| s.count.load(Ordering::Relaxed) != s.commits.load(Ordering::Relaxed))
        .count();
    if bad > 0 {
        problems.push(format!("{bad} keys' counters differ from their commits (lost updates)"));
    }
    let locked: u64 = ledger.slots.iter().map(|s| s.commits.load(Ordering::Relaxed)).sum();
    if locked != commits * p.locks as u64 {
        problems.push(format!("{locked} keys locked by {commits} commits of {} keys", p.locks));
    }
    if problems.is_empty() {
        Ok(Measured { mops, commits, aborts })
    } else {
        Err(format!("{}: {}", t.name(), problems.join("; ")))
    }
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    system: &'static str,
    threads: usize,
    /// Millions of locks + unlocks per second.
    mops: Spread,
    /// Committed transactions per second, millions (median round).
    mtxn: f64,
    commits: u64,
    aborts: u64,
    abort_rate: f64,
}

/// The lock-manager study. True if a check failed.
pub fn run(a: LockArgs) -> bool {
    let Some(machine) = super::open_app("locks", &a.systems, &SYSTEMS) else { return true };
    let keys = a.run.keys(a.keys);
    let locks = a.locks_per_txn as usize;
    if locks as u64 * 2 > keys {
        eprintln!("error: {locks} locks per transaction need at least {} keys", 2 * locks);
        return true;
    }
    let super::Scale { threads: counts, max_threads, dur, rounds } = a.run.scale();
    let trace = match a.zipf.map(|theta| ZipfTrace::new(keys, theta, 1 << 22, 0x10C5)).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return true;
        }
    };
    let tables: Vec<Box<dyn LockTable>> = a.systems.iter().map(|s| table(s, max_threads, locks)).collect();
    let bar = Progress::new("Locking", (counts.len() * rounds * tables.len()) as u64, "steps");
    let mut rows = Vec::new();
    let mut failed = false;
    for &threads in &counts {
        let p =
            Params { keys, locks, zipf: trace.as_ref(), threads, dur, stuck_after: Duration::from_secs(1) };
        let name = |i: usize| tables[i].name().to_string();
        let (got, bad) = super::measure_interleaved(&bar, rounds, threads, tables.len(), name, |i| {
            measure(&*tables[i], p)
        });
        failed |= bad;
        for (t, ms) in tables.iter().zip(&got) {
            let Some(mops) = Spread::of(&ms.iter().map(|m| m.mops).collect::<Vec<_>>()) else { continue };
            let (commits, aborts) = ms.iter().fold((0, 0), |(c, a), m| (c + m.commits, a + m.aborts));
            let abort_rate = aborts as f64 / (commits + aborts).max(1) as f64;
            let row = Row {
                system: t.name(),
                threads,
                mtxn: mops.median / (2 * locks) as f64,
                mops,
                commits,
                aborts,
                abort_rate,
            };
            bar.println(format!(
                "{:<9} {:>2} threads: {} M locks+unlocks/s, {:.3} M txn/s, abort rate {:.2}% ({aborts} aborts, {commits} commits), checks {}",
                row.system,
                threads,
                row.mops.show(2),
                row.mtxn,
                100.0 * abort_rate,
                if ms.len() == rounds { "ok" } else { "FAILED" }
            ));
            rows.push(row);
        }
    }
    drop(bar);

    println!(
        "{:<9} {:>7} {:>26} {:>10} {:>8}",
        "system", "threads", "M locks+unlocks/s", "M txn/s", "aborts"
    );
    let mut csv = String::from("system,threads,mops,mops_min,mops_max,mtxn,commits,aborts,abort_rate\n");
    for r in &rows {
        println!(
            "{:<9} {:>7} {:>26} {:>10.3} {:>7.2}%",
            r.system,
            r.threads,
            r.mops.show(2),
            r.mtxn,
            100.0 * r.abort_rate
        );
        let _ = writeln!(
            csv,
            "{},{},{:.4},{:.4},{:.4},{:.4},{},{},{:.6}",
            r.system,
            r.threads,
            r.mops.median,
            r.mops.min,
            r.mops.max,
            r.mtxn,
            r.commits,
            r.aborts,
            r.abort_rate
        );
    }
    println!(
        "# {keys} keys ({}), {locks} locks per transaction; medians (min–max) over {rounds} interleaved rounds of {} s; aborts over all rounds; mutual exclusion, counters and an empty table checked after every measurement",
        a.zipf.map(|t| format!("Zipf θ = {t}")).unwrap_or_else(|| "uniform".into()),
        dur.as_secs_f64()
    );
    let json = serde_json::to_string_pretty(&rows).unwrap_or_default();
    super::save_app(a.run.out, "locks", &machine, &[("locks.csv", csv), ("locks.json", json)]);
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    fn params(keys: u64, locks: usize, zipf: Option<&ZipfTrace>) -> Params<'_> {
        Params {
            keys,
            locks,
            zipf,
            threads: 2,
            dur: Duration::from_millis(50),
            stuck_after: Duration::from_secs(2),
        }
    }

    #[test]
    fn every_lock_table_keeps_mutual_exclusion_on_two_threads() {
        let trace = ZipfTrace::new(64, 0.99, 1 << 12, 1).unwrap();
        for name in SYSTEMS {
            let t = table(name, 2, 4);
            for p in [params(16, 4, None), params(64, 4, Some(&trace))] {
                let m = measure(&*t, p);
                assert!(m.as_ref().is_ok_and(|m| m.commits > 0), "{name}: {m:?}");
            }
        }
    }

    #[test]
    fn a_leaked_lock_is_caught() {
        /// Forgets to unlock once.
        struct Leaky(Dlht, AtomicBool);
        impl LockTable for Leaky {
            fn name(&self) -> &'static str {
                "leaky"
            }
            fn lock(&self, keys: &[u64], owner: u64, s: &mut Scratch) -> Attempt {
                self.0.lock(keys, owner, s)
            }
            fn unlock(&self, keys: &[u64], owner: u64, s: &mut Scratch) -> bool {
                let n = keys.len() - usize::from(!self.1.swap(true, Ordering::Relaxed));
                self.0.unlock(&keys[..n], owner, s)
            }
            fn held(&self) -> usize {
                self.0.held()
            }
        }
        let t = Leaky(Dlht(dlht::Map::new()), AtomicBool::new(false));
        let p = Params { threads: 1, stuck_after: Duration::from_millis(20), ..params(16, 4, None) };
        assert!(measure(&t, p).is_err());
    }

    /// Stop-aware rendezvous of `parties` threads: the `gen`-th (from 1)
    /// returns when all have arrived, or false when `stop` is raised.
    fn rendezvous(arrived: &AtomicUsize, parties: usize, gen: usize, stop: &AtomicBool) -> bool {
        arrived.fetch_add(1, Ordering::SeqCst);
        while arrived.load(Ordering::SeqCst) < parties * gen {
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    /// Run `txn(thread, stop)` on two threads; true if both returned by
    /// `deadline`. Otherwise raises `stop` (which the threads check while
    /// they wait) and joins them: false, a deadlock.
    fn completes(deadline: Duration, txn: impl Fn(u64, &AtomicBool) + Sync) -> bool {
        let stop = AtomicBool::new(false);
        let done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for me in 1..=2 {
                let (txn, stop, done) = (&txn, &stop, &done);
                s.spawn(move || {
                    txn(me, stop);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
            let start = Instant::now();
            while done.load(Ordering::SeqCst) < 2 && start.elapsed() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            let all = done.load(Ordering::SeqCst) == 2;
            stop.store(true, Ordering::SeqCst);
            all
        })
    }

    /// Thread 1 wants keys {1, 2} as (1, 2), thread 2 as (2, 1).
    fn wanted(me: u64) -> [u64; 2] {
        if me == 1 {
            [1, 2]
        } else {
            [2, 1]
        }
    }

    #[test]
    fn sorted_batches_make_progress_where_a_shuffled_blocking_executor_deadlocks() {
        const TXNS: usize = 200;
        // Order-preserving sorted batches (the lock manager): each
        // transaction sorts its keys, both threads start each transaction
        // together, and each retries after a conflict until it commits.
        let t = Dlht(dlht::Map::new());
        let ledger = Ledger::new(4);
        let arrived = AtomicUsize::new(0);
        let committed = AtomicUsize::new(0);
        let progress = completes(Duration::from_secs(2), |me, stop| {
            let mut s = Scratch::default();
            let mut keys = wanted(me);
            keys.sort_unstable();
            for i in 1..=TXNS {
                if !rendezvous(&arrived, 2, i, stop) {
                    return;
                }
                loop {
                    match t.lock(&keys, me, &mut s) {
                        Attempt::Locked => break,
                        Attempt::Aborted if !stop.load(Ordering::SeqCst) => std::thread::yield_now(),
                        _ => return,
                    }
                }
                assert!(ledger.critical(&keys, me), "two holders of one lock");
                assert!(t.unlock(&keys, me, &mut s));
                committed.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert!(progress, "sorted batches stalled: {} of {} committed", committed.into_inner(), 2 * TXNS);
        assert_eq!(t.held(), 0);
        for k in [1, 2] {
            assert_eq!(ledger.slots[k].count.load(Ordering::SeqCst), 2 * TXNS as u64);
        }

        // An out-of-order blocking executor: each thread takes its keys in
        // its own order, one at a time, spinning on a held key without
        // releasing what it holds, both having taken their first key before
        // either asks for its second. Each waits for the other: a deadlock,
        // seen as no completion within the deadline.
        let mut deadlocks = 0;
        for _ in 0..3 {
            let m = dlht::Map::<u64, u64>::new();
            let arrived = AtomicUsize::new(0);
            let finished = completes(Duration::from_millis(500), |me, stop| {
                let mut held = Vec::new();
                for (i, &k) in wanted(me).iter().enumerate() {
                    let got = loop {
                        if m.insert(k, me).is_ok() {
                            break true;
                        }
                        if stop.load(Ordering::SeqCst) {
                            break false;
                        }
                        std::thread::yield_now();
                    };
                    if !got {
                        break;
                    }
                    held.push(k);
                    if i == 0 && !rendezvous(&arrived, 2, 1, stop) {
                        break;
                    }
                }
                for k in held {
                    assert_eq!(m.remove(&k), Some(me));
                }
            });
            deadlocks += usize::from(!finished);
            assert!(m.is_empty(), "the stopped executor released its locks");
        }
        assert!(deadlocks >= 1, "the shuffled blocking executor never deadlocked");
    }
}
