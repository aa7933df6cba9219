//! Smallbank (Cahill, Röhm and Fekete, SIGMOD '08; the transaction mix and
//! amounts of OLTPBench; DLHT paper §5.3.5): each customer has a savings and
//! a checking balance (in cents), and six transactions move money between
//! them: Amalgamate 15% (one customer's savings and checking into another's
//! checking), Balance 15% (read both), DepositChecking 15% (+1.30),
//! SendPayment 25% (5.00 from one checking to another; aborts if short),
//! TransactSavings 15% (−20.20 from savings; aborts below zero) and
//! WriteCheck 15% (−5.00 from checking, −6.00 if savings plus checking are
//! short: Cahill's penalty of 1.00, where OLTPBench's code debits 4.00).
//! Every transaction first looks its customers up in their account rows
//! (OLTPBench's ACCOUNTS). Balances start at 10,000–50,000 dollars
//! (OLTPBench's, so that accounts do not run dry within a run), and are set
//! back to them before every measurement, so that each system's runs start
//! from the same bank. Amalgamate moves c0's savings and checking into
//! c1's checking (OLTPBench's code takes the total from c1's savings, which
//! does not conserve money). Customers are drawn uniformly, or Zipf with
//! `--zipf θ`.
//!
//! - `dlht`: balances in a [`Map<u64, i64>`](dlht::Map); a transaction
//!   locks its customers with the lock manager of the `locks` study (one
//!   order-preserving [`Map::batch`](dlht::Map::batch) of inserts into a
//!   lock table, sorted, stopping at the first conflict and releasing what
//!   it took, then retrying), reads and writes the balances with plain
//!   `get` and `put`, and unlocks with a batch of removes: serializable.
//! - `dlht-atomics`: no locks; every step is one of the map's per-key
//!   atomics (`fetch_add`, `compare_exchange`, `put` as a swap). Money is
//!   conserved and no balance check is lost, but a transaction is not
//!   isolated (a Balance may see an Amalgamate half done).
//! - `dashmap`: the same lock manager and plain reads and writes over
//!   `DashMap`s (insert-if-absent one key at a time, in sorted order).
//!
//! Checks (always on): after each measurement the sum of all balances must
//! equal the sum before plus the money the committed transactions brought
//! in and took out (each thread adds up its own), the lock table must be
//! empty, and every unlock must have found its locks held by their owner.
//! With locks, reads and writes are plain, so two transactions holding one
//! customer at once would lose an update and break the sum.
//!
//! Reported per system and thread count: committed transactions per second,
//! the rate of business aborts (insufficient funds) and of lock conflicts
//! (attempts retried), and the anonymous resident bytes each bank's tables
//! added at population, per customer.

use crate::harness::keys::{ZipfCursor, ZipfTrace};
use crate::harness::limit::splitmix;
use crate::harness::{self, Spread};
use crate::progress::Progress;
use crate::studies::locks::{self, Attempt, LockTable, Scratch};
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The systems, in the order they run.
pub const SYSTEMS: [&str; 3] = ["dlht", "dlht-atomics", "dashmap"];

/// Options of the Smallbank study.
#[derive(clap::Args, Clone, Debug)]
pub struct SmallbankArgs {
    #[command(flatten)]
    pub run: super::RunArgs,
    /// Customers (each a savings and a checking balance).
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(2..=1 << 31))]
    pub accounts: u64,
    /// Zipf exponent of customer popularity (uniform when absent).
    #[arg(long)]
    pub zipf: Option<f64>,
    /// Systems, comma-separated (dlht, dlht-atomics, dashmap).
    #[arg(long, value_delimiter = ',', default_value = "dlht,dlht-atomics,dashmap")]
    pub systems: Vec<String>,
}

/// Amounts, in cents (OLTPBench's).
const DEPOSIT: i64 = 130;
const SAVINGS_WITHDRAWAL: i64 = 2020;
const CHECK: i64 = 500;
const PAYMENT: i64 = 500;
/// WriteCheck's overdraft penalty.
const PENALTY: i64 = 100;

/// The six transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Amalgamate,
    Balance,
    DepositChecking,
    SendPayment,
    TransactSavings,
    WriteCheck,
}

/// OLTPBench's mix, in percent.
const MIX: [(Kind, u64); 6] = [
    (Kind::Amalgamate, 15),
    (Kind::Balance, 15),
    (Kind::DepositChecking, 15),
    (Kind::SendPayment, 25),
    (Kind::TransactSavings, 15),
    (Kind::WriteCheck, 15),
];

/// A transaction: its kind and customers (`c1` differs from `c0`, and is
/// used by Amalgamate and SendPayment only).
#[derive(Clone, Copy, Debug)]
struct Txn {
    kind: Kind,
    c0: u64,
    c1: u64,
}

impl Txn {
    /// The customers it locks, sorted.
    fn customers(&self) -> ([u64; 2], usize) {
        match self.kind {
            Kind::Amalgamate | Kind::SendPayment => ([self.c0.min(self.c1), self.c0.max(self.c1)], 2),
            _ => ([self.c0, 0], 1),
        }
    }
}

/// The key of a customer's savings balance.
fn savings(c: u64) -> u64 {
    2 * c
}

/// The key of a customer's checking balance.
fn checking(c: u64) -> u64 {
    2 * c + 1
}

/// The key of a customer's account row (OLTPBench's ACCOUNTS, keyed by
/// name: every transaction looks its customers up there first), whose value
/// is the customer's id; apart from the balances' keys.
fn account(c: u64) -> u64 {
    1 << 63 | c
}

/// True for a balance's key.
fn is_balance(key: u64) -> bool {
    key >> 63 == 0
}

/// The balance a key starts with: 10,000.00 to 50,000.00 (OLTPBench's, in
/// dollars: "so that they never run out of money" within a run).
fn initial_balance(key: u64) -> i64 {
    1_000_000 + (splitmix(key ^ 0x005b_a24b) % 4_000_000) as i64
}

/// `t` with its customers looked up by account (each customer's id read
/// from its account row).
fn looked_up(b: &dyn Balances, t: &Txn) -> Txn {
    let id = |c: u64| b.get(account(c)) as u64;
    let c0 = id(t.c0);
    let c1 = if t.customers().1 == 2 { id(t.c1) } else { t.c1 };
    Txn { c0, c1, ..*t }
}

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Committed, bringing in (positive) or taking out this many cents.
    Committed(i64),
    /// Aborted by its own logic (insufficient funds): nothing changed.
    UserAbort,
    /// A customer was locked by another: nothing held now; retry.
    Conflict,
    /// An unlock found a lock not held by its owner.
    Broken,
}

/// Balances read and written under locks (plain reads and writes).
trait Balances: Sync {
    fn get(&self, key: u64) -> i64;
    fn set(&self, key: u64, v: i64);
    /// The sum of every balance (when no thread runs).
    fn total(&self) -> i64;
}

impl Balances for dlht::Map<u64, i64> {
    fn get(&self, key: u64) -> i64 {
        dlht::Map::get(self, &key).expect("every balance is present")
    }
    fn set(&self, key: u64, v: i64) {
        self.put(key, v).expect("every balance is present");
    }
    fn total(&self) -> i64 {
        self.iter().filter(|&(k, _)| is_balance(k)).fold(0i64, |s, (_, v)| s.wrapping_add(v))
    }
}

impl Balances for dashmap::DashMap<u64, i64> {
    fn get(&self, key: u64) -> i64 {
        *dashmap::DashMap::get(self, &key).expect("every balance is present")
    }
    fn set(&self, key: u64, v: i64) {
        *self.get_mut(&key).expect("every balance is present") = v;
    }
    fn total(&self) -> i64 {
        self.iter().filter(|e| is_balance(*e.key())).fold(0i64, |s, e| s.wrapping_add(*e.value()))
    }
}

/// A bank: its transactions, and what the checks read when no thread runs.
trait Bank: Sync {
    fn name(&self) -> &'static str;
    fn run(&self, t: &Txn, owner: u64, s: &mut Scratch) -> Outcome;
    /// The balances, read and written (for the checks and resets, when no
    /// thread runs).
    fn balances(&self) -> &dyn Balances;
    /// Locks held.
    fn held(&self) -> usize;
}

/// Set every balance of `b`'s `accounts` customers back to its initial
/// value, on `threads` threads (before each measurement: every system's
/// runs start from the same bank).
fn reset(b: &dyn Bank, accounts: u64, threads: usize) {
    let balances = b.balances();
    super::in_shares(2 * accounts, threads, &|from, to| {
        (from..to).for_each(|k| balances.set(k, initial_balance(k)))
    });
}

/// Balances serialized by the lock manager of the `locks` study (dlht's:
/// one order-preserving batch of inserts per transaction).
struct LockedBank<B> {
    name: &'static str,
    balances: B,
    locks: Box<dyn LockTable>,
}

impl<B: Balances> Bank for LockedBank<B> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn run(&self, t: &Txn, owner: u64, s: &mut Scratch) -> Outcome {
        let t = &looked_up(&self.balances, t);
        let (cs, n) = t.customers();
        let cs = &cs[..n];
        match self.locks.lock(cs, owner, s) {
            Attempt::Locked => {}
            Attempt::Aborted => return Outcome::Conflict,
            Attempt::Broken => return Outcome::Broken,
        }
        let out = transact(&self.balances, t);
        if self.locks.unlock(cs, owner, s) {
            out
        } else {
            Outcome::Broken
        }
    }
    fn balances(&self) -> &dyn Balances {
        &self.balances
    }
    fn held(&self) -> usize {
        self.locks.held()
    }
}

/// Transaction `t` on `b`, whose customers it holds.
fn transact(b: &dyn Balances, t: &Txn) -> Outcome {
    let (sav, chk) = (savings(t.c0), checking(t.c0));
    match t.kind {
        Kind::Balance => {
            let _ = std::hint::black_box(b.get(sav) + b.get(chk));
            Outcome::Committed(0)
        }
        Kind::DepositChecking => {
            b.set(chk, b.get(chk) + DEPOSIT);
            Outcome::Committed(DEPOSIT)
        }
        Kind::TransactSavings => {
            let v = b.get(sav) - SAVINGS_WITHDRAWAL;
            if v < 0 {
                Outcome::UserAbort
            } else {
                b.set(sav, v);
                Outcome::Committed(-SAVINGS_WITHDRAWAL)
            }
        }
        Kind::WriteCheck => {
            let c = b.get(chk);
            let debit = if b.get(sav) + c < CHECK { CHECK + PENALTY } else { CHECK };
            b.set(chk, c - debit);
            Outcome::Committed(-debit)
        }
        Kind::Amalgamate => {
            let total = b.get(sav) + b.get(chk);
            b.set(sav, 0);
            b.set(chk, 0);
            let to = checking(t.c1);
            b.set(to, b.get(to) + total);
            Outcome::Committed(0)
        }
        Kind::SendPayment => {
            let c = b.get(chk);
            if c < PAYMENT {
                Outcome::UserAbort
            } else {
                b.set(chk, c - PAYMENT);
                let to = checking(t.c1);
                b.set(to, b.get(to) + PAYMENT);
                Outcome::Committed(0)
            }
        }
    }
}

/// dlht with per-key atomics and no locks.
struct DlhtAtomics(dlht::Map<u64, i64>);

impl DlhtAtomics {
    /// Subtract from `key` what `debit` asks of its balance (None: abort),
    /// atomically; the amount taken.
    fn take(&self, key: u64, mut debit: impl FnMut(i64) -> Option<i64>) -> Option<i64> {
        let m = &self.0;
        let mut cur = m.get(&key).expect("every balance is present");
        loop {
            let d = debit(cur)?;
            match m.compare_exchange(&key, cur, cur - d) {
                Ok(_) => return Some(d),
                Err(Some(now)) => cur = now,
                Err(None) => unreachable!("every balance is present"),
            }
        }
    }
}

impl Bank for DlhtAtomics {
    fn name(&self) -> &'static str {
        "dlht-atomics"
    }
    fn run(&self, t: &Txn, _owner: u64, _: &mut Scratch) -> Outcome {
        let m = &self.0;
        let t = &looked_up(m, t);
        let (sav, chk) = (savings(t.c0), checking(t.c0));
        let present = "every balance is present";
        match t.kind {
            Kind::Balance => {
                let _ = std::hint::black_box(m.get(&sav).expect(present) + m.get(&chk).expect(present));
                Outcome::Committed(0)
            }
            Kind::DepositChecking => {
                m.fetch_add(chk, DEPOSIT).expect(present);
                Outcome::Committed(DEPOSIT)
            }
            Kind::TransactSavings => {
                match self.take(sav, |b| (b >= SAVINGS_WITHDRAWAL).then_some(SAVINGS_WITHDRAWAL)) {
                    Some(d) => Outcome::Committed(-d),
                    None => Outcome::UserAbort,
                }
            }
            Kind::WriteCheck => {
                let s = m.get(&sav).expect(present);
                let d = self.take(chk, |c| Some(if s + c < CHECK { CHECK + PENALTY } else { CHECK }));
                Outcome::Committed(-d.expect("never refused"))
            }
            Kind::Amalgamate => {
                // Swaps: the money is out of c0 and in flight, then in c1.
                let total = m.put(sav, 0).expect(present) + m.put(chk, 0).expect(present);
                m.fetch_add(checking(t.c1), total).expect(present);
                Outcome::Committed(0)
            }
            Kind::SendPayment => match self.take(chk, |c| (c >= PAYMENT).then_some(PAYMENT)) {
                Some(d) => {
                    m.fetch_add(checking(t.c1), d).expect(present);
                    Outcome::Committed(0)
                }
                None => Outcome::UserAbort,
            },
        }
    }
    fn balances(&self) -> &dyn Balances {
        &self.0
    }
    fn held(&self) -> usize {
        0
    }
}

/// A bank of system `name` over `accounts` customers, every balance at its
/// initial value (filled by `threads` threads).
fn bank(name: &str, accounts: u64, threads: usize) -> Box<dyn Bank> {
    // The balances, then the account rows.
    let keys = 3 * accounts;
    let fill = |put: &(dyn Fn(u64, i64) + Sync)| {
        super::in_shares(keys, threads, &|from, to| {
            (from..to).for_each(|k| match k.checked_sub(2 * accounts) {
                Some(c) => put(account(c), c as i64),
                None => put(k, initial_balance(k)),
            })
        })
    };
    // A transaction holds at most two customers.
    let locks = |system| locks::table(system, threads, 2);
    match name {
        "dlht" | "dlht-atomics" => {
            let m = dlht::Map::<u64, i64>::with_capacity(keys as usize);
            fill(&|k, v| m.insert(k, v).expect("a fresh key"));
            if name == "dlht" {
                Box::new(LockedBank { name: "dlht", balances: m, locks: locks("dlht") })
            } else {
                Box::new(DlhtAtomics(m))
            }
        }
        "dashmap" => {
            let m = dashmap::DashMap::with_capacity(keys as usize);
            fill(&|k, v| assert!(m.insert(k, v).is_none(), "a fresh key"));
            Box::new(LockedBank { name: "dashmap", balances: m, locks: locks("dashmap") })
        }
        other => unreachable!("unknown system {other} (checked before)"),
    }
}

/// What a thread counts: commits, business aborts, conflicts, broken
/// locks, and the money its commits brought in (minus what they took).
#[derive(Default)]
struct Totals {
    commits: AtomicU64,
    user_aborts: AtomicU64,
    conflicts: AtomicU64,
    broken: AtomicU64,
    flow: AtomicI64,
}

/// A thread's state in a measurement; its tallies go to the totals when it
/// ends.
struct Teller<'a> {
    zipf: Option<ZipfCursor<'a>>,
    scratch: Scratch,
    me: u64,
    tally: [u64; 4],
    flow: i64,
    totals: &'a Totals,
}

impl Drop for Teller<'_> {
    fn drop(&mut self) {
        // Relaxed: read after the measurement's threads are joined.
        let t = self.totals;
        for (a, &n) in [&t.commits, &t.user_aborts, &t.conflicts, &t.broken].into_iter().zip(&self.tally) {
            a.fetch_add(n, Ordering::Relaxed);
        }
        t.flow.fetch_add(self.flow, Ordering::Relaxed);
    }
}

impl Teller<'_> {
    /// The next transaction: its kind by the mix, its customers uniform
    /// (from `word`s) or from the Zipf trace.
    fn draw(&mut self, accounts: u64, mut word: impl FnMut() -> u64) -> Txn {
        let kind = super::pick_from_mix(&MIX, word());
        let mut customer = || match &mut self.zipf {
            Some(z) => z.next_index() % accounts,
            None => word() % accounts,
        };
        let c0 = customer();
        let mut c1 = customer();
        while c1 == c0 {
            c1 = (c1 + 1) % accounts;
        }
        Txn { kind, c0, c1 }
    }

    /// Run `t` on `b` until it commits or aborts by its own logic (lock
    /// conflicts are retried): transactions done (0 if it gave up stuck
    /// past `stuck_after`, or found its locks broken).
    fn run(&mut self, b: &dyn Bank, t: &Txn, stuck_after: Duration) -> u64 {
        let mut since: Option<Instant> = None;
        let mut tries = 0u64;
        loop {
            match b.run(t, self.me, &mut self.scratch) {
                Outcome::Committed(flow) => {
                    self.tally[0] += 1;
                    self.flow += flow;
                    return 1;
                }
                Outcome::UserAbort => {
                    self.tally[1] += 1;
                    return 0;
                }
                Outcome::Broken => {
                    self.tally[3] += 1;
                    return 0;
                }
                Outcome::Conflict => {
                    self.tally[2] += 1;
                    tries += 1;
                    if tries % 64 == 0 {
                        std::thread::yield_now();
                        let start = *since.get_or_insert_with(Instant::now);
                        if start.elapsed() > stuck_after {
                            self.tally[3] += 1;
                            return 0;
                        }
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
    }
}

/// One measurement's figures.
#[derive(Clone, Copy, Debug)]
struct Measured {
    mtxn: f64,
    commits: u64,
    user_aborts: u64,
    conflicts: u64,
}

/// Run transactions on `b` (whose balances sum to `expected`) for `dur`
/// on `threads` threads; Err if a check failed. `expected` becomes the
/// sum the checks found.
fn measure(
    b: &dyn Bank,
    expected: &mut i64,
    accounts: u64,
    zipf: Option<&ZipfTrace>,
    threads: usize,
    dur: Duration,
) -> Result<Measured, String> {
    let totals = Totals::default();
    let mtxn = harness::timed(
        threads,
        dur,
        accounts,
        0x5ba2,
        |i| Teller {
            zipf: zipf.map(|z| z.cursor(i, threads)),
            scratch: Scratch::default(),
            me: i as u64 + 1,
            tally: [0; 4],
            flow: 0,
            totals: &totals,
        },
        |w| {
            let keys = &mut w.keys;
            let t = w.state.draw(accounts, || keys.next_word());
            w.state.run(b, &t, Duration::from_secs(1))
        },
    );
    // Relaxed: the threads are joined.
    let [commits, user_aborts, conflicts, broken] =
        [&totals.commits, &totals.user_aborts, &totals.conflicts, &totals.broken]
            .map(|a| a.load(Ordering::Relaxed));
    let flow = totals.flow.load(Ordering::Relaxed);
    let mut problems = Vec::new();
    if broken > 0 {
        problems.push(format!("{broken} transactions found a lock not theirs or were stuck"));
    }
    if b.held() != 0 {
        problems.push(format!("{} locks still held at the end", b.held()));
    }
    let total = b.balances().total();
    if total != expected.wrapping_add(flow) {
        problems.push(format!(
            "the balances sum to {total}, not {} ({} before, {flow:+} by the commits): money made or lost",
            expected.wrapping_add(flow),
            expected
        ));
    }
    *expected = total;
    if problems.is_empty() {
        Ok(Measured { mtxn, commits, user_aborts, conflicts })
    } else {
        Err(format!("{}: {}", b.name(), problems.join("; ")))
    }
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    system: &'static str,
    threads: usize,
    /// Millions of committed transactions per second.
    mtxn: Spread,
    commits: u64,
    /// Business aborts ÷ transactions (committed or so aborted).
    user_abort_rate: f64,
    /// Lock conflicts (attempts retried) ÷ transactions.
    conflicts_per_txn: f64,
    /// Anonymous resident bytes the bank's tables added at population, per
    /// customer (two balances).
    bytes_per_account: f64,
}

/// The Smallbank study. True if a check failed.
pub fn run(a: SmallbankArgs) -> bool {
    let Some(machine) = super::open_app("smallbank", &a.systems, &SYSTEMS) else { return true };
    let accounts = a.run.keys(a.accounts);
    let super::Scale { threads: counts, max_threads, dur, rounds } = a.run.scale();
    let trace = match a.zipf.map(|theta| ZipfTrace::new(accounts, theta, 1 << 22, 0x5ba2)).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return true;
        }
    };
    let initial = (0..2 * accounts).fold(0i64, |t, k| t.wrapping_add(initial_balance(k)));
    let what = format!("{} balances", 2 * accounts);
    let Some(built) = super::populate(&a.systems, accounts, &what, |s| {
        let b = bank(s, accounts, max_threads);
        match b.balances().total() {
            total if total == initial => Ok(b),
            total => Err(format!("the balances sum to {total}, not {initial}")),
        }
    }) else {
        return true;
    };
    let mut banks: Vec<(Box<dyn Bank>, i64, f64)> =
        built.into_iter().map(|(b, bytes)| (b, initial, bytes)).collect();
    let bar = Progress::new("Banking", (counts.len() * rounds * banks.len()) as u64, "steps");
    let mut rows = Vec::new();
    let mut failed = false;
    for &threads in &counts {
        let names: Vec<String> = banks.iter().map(|(b, _, _)| b.name().to_string()).collect();
        let (got, bad) = super::measure_interleaved(
            &bar,
            rounds,
            threads,
            banks.len(),
            |i| names[i].clone(),
            |i| {
                let (b, expected, _) = &mut banks[i];
                reset(&**b, accounts, max_threads);
                *expected = initial;
                measure(&**b, expected, accounts, trace.as_ref(), threads, dur)
            },
        );
        failed |= bad;
        for ((b, _, bytes), ms) in banks.iter().zip(&got) {
            let Some(mtxn) = Spread::of(&ms.iter().map(|m| m.mtxn).collect::<Vec<_>>()) else { continue };
            let (commits, user_aborts, conflicts) =
                ms.iter().fold((0, 0, 0), |(c, u, x), m| (c + m.commits, u + m.user_aborts, x + m.conflicts));
            let done = (commits + user_aborts).max(1) as f64;
            let row = Row {
                system: b.name(),
                threads,
                mtxn,
                commits,
                user_abort_rate: user_aborts as f64 / done,
                conflicts_per_txn: conflicts as f64 / done,
                bytes_per_account: *bytes,
            };
            bar.println(format!(
                "{:<12} {:>2} threads: {} M txn/s, business aborts {:.2}%, conflicts {:.4} per txn, checks {}",
                row.system,
                threads,
                row.mtxn.show(3),
                100.0 * row.user_abort_rate,
                row.conflicts_per_txn,
                if ms.len() == rounds { "ok" } else { "FAILED" }
            ));
            rows.push(row);
        }
    }
    drop(bar);

    println!(
        "{:<12} {:>7} {:>26} {:>9} {:>10} {:>10}",
        "system", "threads", "M txn/s", "aborts", "conflicts", "B/account"
    );
    let mut csv = String::from(
        "system,threads,mtxn,mtxn_min,mtxn_max,commits,user_abort_rate,conflicts_per_txn,bytes_per_account\n",
    );
    for r in &rows {
        println!(
            "{:<12} {:>7} {:>26} {:>8.2}% {:>10.4} {:>10.1}",
            r.system,
            r.threads,
            r.mtxn.show(3),
            100.0 * r.user_abort_rate,
            r.conflicts_per_txn,
            r.bytes_per_account
        );
        let _ = writeln!(
            csv,
            "{},{},{:.5},{:.5},{:.5},{},{:.6},{:.6},{:.1}",
            r.system,
            r.threads,
            r.mtxn.median,
            r.mtxn.min,
            r.mtxn.max,
            r.commits,
            r.user_abort_rate,
            r.conflicts_per_txn,
            r.bytes_per_account
        );
    }
    println!(
        "# {accounts} customers ({}), OLTPBench's mix; medians (min–max) over {rounds} interleaved rounds of {} s; counts over all rounds; money conserved, locks released and owned, checked after every measurement; dlht and dashmap serialize by the lock manager, dlht-atomics makes each step atomic but does not isolate a transaction",
        a.zipf.map(|t| format!("Zipf θ = {t}")).unwrap_or_else(|| "uniform".into()),
        dur.as_secs_f64()
    );
    let json = serde_json::to_string_pretty(&rows).unwrap_or_default();
    super::save_app(a.run.out, "smallbank", &machine, &[("smallbank.csv", csv), ("smallbank.json", json)]);
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(b: &dyn Bank, accounts: u64, zipf: Option<&ZipfTrace>) -> Measured {
        let mut expected = b.balances().total();
        let m = measure(b, &mut expected, accounts, zipf, 2, Duration::from_millis(100));
        m.unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn every_bank_conserves_money_on_two_threads() {
        // Eight customers under Zipf: the threads meet on the same ones.
        let trace = ZipfTrace::new(8, 0.99, 1 << 12, 1).unwrap();
        for name in SYSTEMS {
            for (accounts, zipf) in [(8, Some(&trace)), (1 << 10, None)] {
                let b = bank(name, accounts, 2);
                let m = check(&*b, accounts, zipf);
                assert!(m.commits > 0, "{name}: {m:?}");
            }
        }
    }

    #[test]
    fn the_mix_is_oltpbench_s() {
        assert_eq!(MIX.iter().map(|&(_, p)| p).sum::<u64>(), 100);
        let totals = Totals::default();
        let mut t = Teller {
            zipf: None,
            scratch: Scratch::default(),
            me: 1,
            tally: [0; 4],
            flow: 0,
            totals: &totals,
        };
        let mut n = 0u64;
        let mut seen = std::collections::HashMap::new();
        for _ in 0..100_000 {
            let txn = t.draw(16, || {
                n += 1;
                splitmix(n)
            });
            assert_ne!(txn.c0, txn.c1);
            *seen.entry(format!("{:?}", txn.kind)).or_insert(0u64) += 1;
        }
        for (k, p) in MIX {
            let got = seen[&format!("{k:?}")] as f64 / 1000.0;
            assert!((got - p as f64).abs() < 1.0, "{k:?}: {got}% drawn, {p}% asked");
        }
    }

    /// A bank whose lock table lets two transactions hold one customer
    /// (every lock succeeds): its plain reads and writes lose updates, which
    /// the sum catches.
    #[test]
    fn a_bank_without_mutual_exclusion_is_caught() {
        struct NoLocks;
        impl LockTable for NoLocks {
            fn name(&self) -> &'static str {
                "no-locks"
            }
            fn lock(&self, _: &[u64], _: u64, _: &mut Scratch) -> Attempt {
                // Widen the window between a read and its write.
                for _ in 0..50 {
                    std::hint::spin_loop();
                }
                Attempt::Locked
            }
            fn unlock(&self, _: &[u64], _: u64, _: &mut Scratch) -> bool {
                true
            }
            fn held(&self) -> usize {
                0
            }
        }
        let trace = ZipfTrace::new(4, 0.99, 1 << 12, 1).unwrap();
        let caught = (0..5).any(|_| {
            let balances = dlht::Map::new();
            for k in 0..8 {
                balances.insert(k, initial_balance(k)).unwrap();
            }
            for c in 0..4 {
                balances.insert(account(c), c as i64).unwrap();
            }
            let b = LockedBank { name: "no-locks", balances, locks: Box::new(NoLocks) };
            let mut expected = b.balances().total();
            measure(&b, &mut expected, 4, Some(&trace), 2, Duration::from_millis(200)).is_err()
        });
        assert!(caught, "two holders of one customer went unnoticed");
    }
}
