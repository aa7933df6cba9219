//! TATP (the Telecom Application Transaction Processing benchmark, v1.0;
//! DLHT paper §5.3.5): a mobile operator's home-location register with
//! four tables and seven transactions in its standard mix — reads
//! GET_SUBSCRIBER_DATA 35%, GET_NEW_DESTINATION 10%, GET_ACCESS_DATA 35%,
//! and writes UPDATE_SUBSCRIBER_DATA 2%, UPDATE_LOCATION 14%,
//! INSERT_CALL_FORWARDING 2%, DELETE_CALL_FORWARDING 2%. Subscriber ids are
//! drawn uniformly; each subscriber has 1–4 access-info and 1–4
//! special-facility rows, and each of those 0–3 call-forwarding rows
//! (start times 0, 8, 16), as the specification populates them. A
//! transaction that finds no row (a missing access-info type, an inactive
//! facility, a call-forwarding key present or absent) fails as the
//! specification expects (about 24%, 62.5%, 62.5%, 31% and 31% succeed
//! where they can fail).
//!
//! - `dlht`: subscribers in an [`AllocMap`](dlht::AllocMap) (a 48-byte
//!   row, replaced whole by `update`); access info, special facilities,
//!   call forwarding and the `sub_nbr` index in [`Map<u64, u64>`](dlht::Map)s
//!   (composite keys and packed rows); a call-forwarding row is inserted
//!   with a shadow insert, committed once its facility is found;
//! - `dashmap`: the same tables as `DashMap`s (rows updated under the
//!   shard's lock, inserts through `entry`).
//!
//! Checks (always on): after each measurement every call-forwarding row has
//! its special facility (referential integrity), their number is the
//! number before plus the inserts and minus the deletes that succeeded,
//! every subscriber row is whole (a checksum over its fields that each
//! update keeps) and every `sub_nbr` leads to its subscriber.
//!
//! Reported per system and thread count: transactions per second (all, as
//! attempted) and the share that succeeded, with the anonymous resident
//! bytes the tables added at population, per subscriber.

use crate::harness::limit::splitmix;
use crate::harness::{self, Spread};
use crate::progress::Progress;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The systems, in the order they run.
pub const SYSTEMS: [&str; 2] = ["dlht", "dashmap"];

/// Options of the TATP study.
#[derive(clap::Args, Clone, Debug)]
pub struct TatpArgs {
    #[command(flatten)]
    pub run: super::RunArgs,
    /// Subscribers.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    pub subscribers: u64,
    /// Systems, comma-separated (dlht, dashmap).
    #[arg(long, value_delimiter = ',', default_value = "dlht,dashmap")]
    pub systems: Vec<String>,
}

/// The seven transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    GetSubscriberData,
    GetNewDestination,
    GetAccessData,
    UpdateSubscriberData,
    UpdateLocation,
    InsertCallForwarding,
    DeleteCallForwarding,
}

/// The standard mix, in percent.
const MIX: [(Kind, u64); 7] = [
    (Kind::GetSubscriberData, 35),
    (Kind::GetNewDestination, 10),
    (Kind::GetAccessData, 35),
    (Kind::UpdateSubscriberData, 2),
    (Kind::UpdateLocation, 14),
    (Kind::InsertCallForwarding, 2),
    (Kind::DeleteCallForwarding, 2),
];

/// A subscriber's row: the specification's bit, hex and byte fields (30
/// bytes), its locations, its number, and a checksum of the rest that every
/// update keeps (a torn row fails it).
#[derive(Clone, Copy, Debug, Default)]
struct Subscriber {
    fields: [u8; 30],
    msc_location: u32,
    vlr_location: u32,
    sub_nbr: u64,
    check: u64,
}

impl Subscriber {
    fn sum(&self) -> u64 {
        let mut h = splitmix(self.sub_nbr ^ (self.msc_location as u64) << 32 ^ self.vlr_location as u64);
        for c in self.fields.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            h = splitmix(h ^ u64::from_le_bytes(w));
        }
        h
    }

    fn sealed(mut self) -> Subscriber {
        self.check = self.sum();
        self
    }

    fn whole(&self) -> bool {
        self.check == self.sum()
    }
}

/// A subscriber's number (the specification's `sub_nbr`, a 15-digit string
/// of its id): here a bijection of the id, so that the index is a lookup.
fn sub_nbr(s: u64) -> u64 {
    splitmix(s)
}

/// The keys of the narrow tables: `s_id`, a type 1–4 (access info, special
/// facility) and a start-time slot 0–2 (call forwarding).
fn ai_key(s: u64, ai_type: u64) -> u64 {
    s << 2 | (ai_type - 1)
}
fn sf_key(s: u64, sf_type: u64) -> u64 {
    s << 2 | (sf_type - 1)
}
fn cf_key(s: u64, sf_type: u64, slot: u64) -> u64 {
    (s << 2 | (sf_type - 1)) << 2 | slot
}

/// A special facility's packed row: `is_active` (bit 0), `error_cntrl`
/// (bits 8–15), `data_a` (16–23), `data_b` (24–63).
fn sf_active(row: u64) -> bool {
    row & 1 == 1
}
fn sf_with_data_a(row: u64, data_a: u8) -> u64 {
    row & !(0xff << 16) | (data_a as u64) << 16
}
/// A call forwarding's packed row: `end_time` (bits 0–7), `numberx` (8–63).
fn cf_end_time(row: u64) -> u64 {
    row & 0xff
}

/// The population's random choices for subscriber `s`, from `r`: how many
/// rows of each table, and their fields.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = splitmix(self.0);
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// `k` distinct values of 1..=4.
    fn types(&mut self, k: u64) -> Vec<u64> {
        let mut t: Vec<u64> = (1..=4).collect();
        for i in (1..4).rev() {
            t.swap(i, self.below(i as u64 + 1) as usize);
        }
        t.truncate(k as usize);
        t
    }
}

/// A subscriber's rows: its own, its access infos, its facilities and their
/// forwardings (keys and packed rows).
type Rows = (Subscriber, Vec<(u64, u64)>, Vec<(u64, u64)>, Vec<(u64, u64)>);

/// The rows of subscriber `s` (id 1..=n), as the specification populates
/// them.
fn rows_of(s: u64) -> Rows {
    let mut d = Draw(s ^ 0x7a7e);
    let mut sub = Subscriber { sub_nbr: sub_nbr(s), ..Default::default() };
    for f in &mut sub.fields {
        *f = d.below(256) as u8;
    }
    sub.fields[0] &= 1; // bit_1
    sub.msc_location = d.next() as u32;
    sub.vlr_location = d.next() as u32;
    let n = 1 + d.below(4);
    let ai = d.types(n).into_iter().map(|t| (ai_key(s, t), d.next())).collect();
    let n = 1 + d.below(4);
    let mut sf = Vec::new();
    let mut cf = Vec::new();
    for t in d.types(n) {
        // is_active: 85% of facilities.
        let active = u64::from(d.below(100) < 85);
        sf.push((sf_key(s, t), active | d.next() << 8));
        let slots = d.below(4);
        let mut starts = [0u64, 1, 2];
        for i in (1..3).rev() {
            starts.swap(i, d.below(i as u64 + 1) as usize);
        }
        for &slot in &starts[..slots as usize] {
            let end = 8 * slot + 1 + d.below(8);
            cf.push((cf_key(s, t, slot), end | d.next() << 8));
        }
    }
    (sub.sealed(), ai, sf, cf)
}

/// What a transaction did: succeeded, and how it changed the number of
/// call-forwarding rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Done {
    ok: bool,
    forwardings: i64,
}

const FAILED: Done = Done { ok: false, forwardings: 0 };
const OK: Done = Done { ok: true, forwardings: 0 };

/// A transaction's parameters, drawn per the specification.
#[derive(Clone, Copy, Debug)]
struct Txn {
    kind: Kind,
    s: u64,
    /// ai_type or sf_type, 1–4.
    t: u64,
    /// A start-time slot 0–2 (0, 8, 16 h).
    slot: u64,
    /// GET_NEW_DESTINATION's end time, 1–24.
    end_time: u64,
    /// A random byte or location.
    data: u64,
}

/// A TATP database.
trait Db: Sync {
    fn name(&self) -> &'static str;
    fn run(&self, t: &Txn) -> Done;
    /// Call-forwarding rows, every one checked against its facility: Err
    /// names the first problem found (when no thread runs).
    fn check(&self, subscribers: u64) -> Result<u64, String>;
}

/// dlht's tables.
struct Dlht {
    subscribers: dlht::AllocMap<u64, Subscriber>,
    access_info: dlht::Map<u64, u64>,
    facilities: dlht::Map<u64, u64>,
    forwarding: dlht::Map<u64, u64>,
    numbers: dlht::Map<u64, u64>,
}

impl Db for Dlht {
    fn name(&self) -> &'static str {
        "dlht"
    }
    fn run(&self, t: &Txn) -> Done {
        match t.kind {
            Kind::GetSubscriberData => {
                let g = self.subscribers.guard();
                let row = self.subscribers.get(&t.s, &g).expect("every subscriber is present");
                std::hint::black_box(row);
                OK
            }
            Kind::GetNewDestination => {
                let active = self.facilities.get(&sf_key(t.s, t.t)).is_some_and(sf_active);
                // Forwardings starting at or before the start time (slot)
                // and ending after the end time.
                let hit = active
                    && (0..=t.slot).any(|slot| {
                        self.forwarding
                            .get(&cf_key(t.s, t.t, slot))
                            .is_some_and(|r| cf_end_time(r) > t.end_time)
                    });
                Done { ok: hit, forwardings: 0 }
            }
            Kind::GetAccessData => {
                Done { ok: self.access_info.get(&ai_key(t.s, t.t)).is_some(), forwardings: 0 }
            }
            Kind::UpdateSubscriberData => {
                let g = self.subscribers.guard();
                self.subscribers.update(
                    &t.s,
                    |r| {
                        let mut r = *r;
                        r.fields[0] = t.data as u8 & 1;
                        r.sealed()
                    },
                    &g,
                );
                let ok = self
                    .facilities
                    .update(&sf_key(t.s, t.t), |row| sf_with_data_a(row, t.data as u8))
                    .is_some();
                Done { ok, forwardings: 0 }
            }
            Kind::UpdateLocation => {
                let s = self.numbers.get(&sub_nbr(t.s)).expect("every number is indexed");
                let g = self.subscribers.guard();
                self.subscribers.update(
                    &s,
                    |r| {
                        let mut r = *r;
                        r.vlr_location = t.data as u32;
                        r.sealed()
                    },
                    &g,
                );
                OK
            }
            Kind::InsertCallForwarding => {
                let s = self.numbers.get(&sub_nbr(t.s)).expect("every number is indexed");
                // The forwarding's key is held (hidden, others' inserts of
                // it wait) while the transaction reads the facilities; it
                // commits once its facility is found.
                let row = (8 * t.slot + 1 + t.data % 8) | (t.data >> 8) << 8;
                let Ok(held) = self.forwarding.shadow_insert(cf_key(s, t.t, t.slot), row) else {
                    return FAILED; // present, or held by another transaction
                };
                let types = (1..=4).filter(|&ty| self.facilities.get(&sf_key(s, ty)).is_some()).count();
                if types > 0 && self.facilities.get(&sf_key(s, t.t)).is_some() {
                    held.commit();
                    Done { ok: true, forwardings: 1 }
                } else {
                    held.abort();
                    FAILED
                }
            }
            Kind::DeleteCallForwarding => {
                let s = self.numbers.get(&sub_nbr(t.s)).expect("every number is indexed");
                let ok = self.forwarding.remove(&cf_key(s, t.t, t.slot)).is_some();
                Done { ok, forwardings: -i64::from(ok) }
            }
        }
    }
    fn check(&self, subscribers: u64) -> Result<u64, String> {
        for (k, _) in self.forwarding.iter() {
            if self.facilities.get(&(k >> 2)).is_none() {
                return Err(format!("forwarding {k:#x} has no special facility"));
            }
        }
        let g = self.subscribers.guard();
        for s in 1..=subscribers {
            let whole = self.subscribers.get(&s, &g).is_some_and(|r| r.whole() && r.sub_nbr == sub_nbr(s));
            if !whole || self.numbers.get(&sub_nbr(s)) != Some(s) {
                return Err(format!("subscriber {s}: its row is torn or its number not indexed"));
            }
        }
        Ok(self.forwarding.len() as u64)
    }
}

/// dashmap's tables.
struct Dash {
    subscribers: dashmap::DashMap<u64, Subscriber>,
    access_info: dashmap::DashMap<u64, u64>,
    facilities: dashmap::DashMap<u64, u64>,
    forwarding: dashmap::DashMap<u64, u64>,
    numbers: dashmap::DashMap<u64, u64>,
}

impl Db for Dash {
    fn name(&self) -> &'static str {
        "dashmap"
    }
    fn run(&self, t: &Txn) -> Done {
        let number = || *self.numbers.get(&sub_nbr(t.s)).expect("every number is indexed");
        match t.kind {
            Kind::GetSubscriberData => {
                std::hint::black_box(*self.subscribers.get(&t.s).expect("every subscriber is present"));
                OK
            }
            Kind::GetNewDestination => {
                let active = self.facilities.get(&sf_key(t.s, t.t)).is_some_and(|r| sf_active(*r));
                let hit = active
                    && (0..=t.slot).any(|slot| {
                        self.forwarding
                            .get(&cf_key(t.s, t.t, slot))
                            .is_some_and(|r| cf_end_time(*r) > t.end_time)
                    });
                Done { ok: hit, forwardings: 0 }
            }
            Kind::GetAccessData => {
                Done { ok: self.access_info.get(&ai_key(t.s, t.t)).is_some(), forwardings: 0 }
            }
            Kind::UpdateSubscriberData => {
                if let Some(mut r) = self.subscribers.get_mut(&t.s) {
                    r.fields[0] = t.data as u8 & 1;
                    *r = r.sealed();
                }
                let ok = match self.facilities.get_mut(&sf_key(t.s, t.t)) {
                    Some(mut row) => {
                        *row = sf_with_data_a(*row, t.data as u8);
                        true
                    }
                    None => false,
                };
                Done { ok, forwardings: 0 }
            }
            Kind::UpdateLocation => {
                let s = number();
                if let Some(mut r) = self.subscribers.get_mut(&s) {
                    r.vlr_location = t.data as u32;
                    *r = r.sealed();
                }
                OK
            }
            Kind::InsertCallForwarding => {
                let s = number();
                let types = (1..=4).filter(|&ty| self.facilities.contains_key(&sf_key(s, ty))).count();
                if types == 0 || !self.facilities.contains_key(&sf_key(s, t.t)) {
                    return FAILED;
                }
                let row = (8 * t.slot + 1 + t.data % 8) | (t.data >> 8) << 8;
                match self.forwarding.entry(cf_key(s, t.t, t.slot)) {
                    dashmap::mapref::entry::Entry::Vacant(v) => {
                        v.insert(row);
                        Done { ok: true, forwardings: 1 }
                    }
                    dashmap::mapref::entry::Entry::Occupied(_) => FAILED,
                }
            }
            Kind::DeleteCallForwarding => {
                let s = number();
                let ok = self.forwarding.remove(&cf_key(s, t.t, t.slot)).is_some();
                Done { ok, forwardings: -i64::from(ok) }
            }
        }
    }
    fn check(&self, subscribers: u64) -> Result<u64, String> {
        for e in self.forwarding.iter() {
            if !self.facilities.contains_key(&(e.key() >> 2)) {
                return Err(format!("forwarding {:#x} has no special facility", e.key()));
            }
        }
        for s in 1..=subscribers {
            let whole = self.subscribers.get(&s).is_some_and(|r| r.whole() && r.sub_nbr == sub_nbr(s));
            if !whole || self.numbers.get(&sub_nbr(s)).map(|v| *v) != Some(s) {
                return Err(format!("subscriber {s}: its row is torn or its number not indexed"));
            }
        }
        Ok(self.forwarding.len() as u64)
    }
}

/// A database of system `name` with `n` subscribers, populated by
/// `threads` threads.
fn database(name: &str, n: u64, threads: usize) -> Box<dyn Db> {
    // Expected rows: 2.5 access infos, 2.5 facilities, 3.75 forwardings.
    let cap = |per: f64| (n as f64 * per) as usize + 1024;
    let fill = |put: &(dyn Fn(u64, Rows) + Sync)| {
        let per = n.div_ceil(threads as u64);
        std::thread::scope(|sc| {
            for t in 0..threads as u64 {
                sc.spawn(move || {
                    for s in (1 + t * per)..=((t + 1) * per).min(n) {
                        put(s, rows_of(s));
                    }
                });
            }
        });
    };
    match name {
        "dlht" => {
            let db = Dlht {
                subscribers: dlht::AllocMap::with_capacity(n as usize),
                access_info: dlht::Map::with_capacity(cap(2.5)),
                facilities: dlht::Map::with_capacity(cap(2.5)),
                forwarding: dlht::Map::with_capacity(cap(4.0)),
                numbers: dlht::Map::with_capacity(n as usize),
            };
            fill(&|s, (sub, ai, sf, cf)| {
                let g = db.subscribers.guard();
                assert!(db.subscribers.insert(s, sub, &g).is_ok(), "a fresh subscriber");
                db.numbers.insert(sub.sub_nbr, s).expect("a fresh number");
                for (k, v) in ai {
                    db.access_info.insert(k, v).expect("a fresh key");
                }
                for (k, v) in sf {
                    db.facilities.insert(k, v).expect("a fresh key");
                }
                for (k, v) in cf {
                    db.forwarding.insert(k, v).expect("a fresh key");
                }
            });
            Box::new(db)
        }
        "dashmap" => {
            let db = Dash {
                subscribers: dashmap::DashMap::with_capacity(n as usize),
                access_info: dashmap::DashMap::with_capacity(cap(2.5)),
                facilities: dashmap::DashMap::with_capacity(cap(2.5)),
                forwarding: dashmap::DashMap::with_capacity(cap(4.0)),
                numbers: dashmap::DashMap::with_capacity(n as usize),
            };
            fill(&|s, (sub, ai, sf, cf)| {
                assert!(db.subscribers.insert(s, sub).is_none(), "a fresh subscriber");
                db.numbers.insert(sub.sub_nbr, s);
                for (k, v) in ai {
                    db.access_info.insert(k, v);
                }
                for (k, v) in sf {
                    db.facilities.insert(k, v);
                }
                for (k, v) in cf {
                    db.forwarding.insert(k, v);
                }
            });
            Box::new(db)
        }
        other => unreachable!("unknown system {other} (checked before)"),
    }
}

/// The next transaction, from random words.
fn draw(subscribers: u64, mut word: impl FnMut() -> u64) -> Txn {
    let kind = super::pick_from_mix(&MIX, word());
    let w = word();
    Txn {
        kind,
        s: 1 + word() % subscribers,
        t: 1 + (w & 3),
        slot: (w >> 2) % 3,
        end_time: 1 + (w >> 8) % 24,
        data: w >> 16,
    }
}

/// What the threads count: transactions, those that succeeded, and the
/// call-forwarding rows their inserts and deletes added.
#[derive(Default)]
struct Totals {
    txns: AtomicU64,
    ok: AtomicU64,
    forwardings: AtomicU64,
}

/// A thread's tallies, added to the totals when it ends.
struct Tally<'a> {
    txns: u64,
    ok: u64,
    forwardings: i64,
    totals: &'a Totals,
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        // Relaxed: read after the measurement's threads are joined.
        self.totals.txns.fetch_add(self.txns, Ordering::Relaxed);
        self.totals.ok.fetch_add(self.ok, Ordering::Relaxed);
        self.totals.forwardings.fetch_add(self.forwardings as u64, Ordering::Relaxed);
    }
}

/// One measurement's figures.
#[derive(Clone, Copy, Debug)]
struct Measured {
    mtxn: f64,
    txns: u64,
    ok: u64,
}

/// Run transactions on `db` (holding `forwardings` call-forwarding rows)
/// for `dur` on `threads` threads; Err if a check failed. `forwardings`
/// becomes the number the checks found.
fn measure(
    db: &dyn Db,
    forwardings: &mut u64,
    subscribers: u64,
    threads: usize,
    dur: Duration,
) -> Result<Measured, String> {
    let totals = Totals::default();
    let mtxn = harness::timed(
        threads,
        dur,
        subscribers,
        0x7a7e,
        |_| Tally { txns: 0, ok: 0, forwardings: 0, totals: &totals },
        |w| {
            let keys = &mut w.keys;
            let t = draw(subscribers, || keys.next_word());
            let d = db.run(&t);
            w.state.txns += 1;
            w.state.ok += u64::from(d.ok);
            w.state.forwardings += d.forwardings;
            1
        },
    );
    // Relaxed: the threads are joined.
    let (txns, ok) = (totals.txns.load(Ordering::Relaxed), totals.ok.load(Ordering::Relaxed));
    let expected = forwardings.wrapping_add(totals.forwardings.load(Ordering::Relaxed));
    let found = db.check(subscribers).map_err(|e| format!("{}: {e}", db.name()))?;
    *forwardings = found;
    if found != expected {
        return Err(format!(
            "{}: {found} call-forwarding rows, not the {expected} that the inserts and deletes leave",
            db.name()
        ));
    }
    Ok(Measured { mtxn, txns, ok })
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    system: &'static str,
    threads: usize,
    /// Millions of transactions per second (all, as attempted).
    mtxn: Spread,
    txns: u64,
    /// Transactions that succeeded ÷ all.
    success_rate: f64,
    /// Anonymous resident bytes the tables added at population, per
    /// subscriber (with its 2.5 access infos, 2.5 facilities, 3.75
    /// forwardings).
    bytes_per_subscriber: f64,
}

/// The TATP study. True if a check failed.
pub fn run(a: TatpArgs) -> bool {
    let Some(machine) = super::open_app("tatp", &a.systems, &SYSTEMS) else { return true };
    let n = a.run.keys(a.subscribers);
    let super::Scale { threads: counts, max_threads, dur, rounds } = a.run.scale();
    let what = format!("{n} subscribers");
    let Some(built) = super::populate(&a.systems, n, &what, |s| {
        let db = database(s, n, max_threads);
        db.check(n).map(|forwardings| (db, forwardings))
    }) else {
        return true;
    };
    let mut dbs: Vec<(Box<dyn Db>, u64, f64)> =
        built.into_iter().map(|((db, f), bytes)| (db, f, bytes)).collect();
    let bar = Progress::new("Transacting", (counts.len() * rounds * dbs.len()) as u64, "steps");
    let mut rows = Vec::new();
    let mut failed = false;
    for &threads in &counts {
        let names: Vec<String> = dbs.iter().map(|(d, _, _)| d.name().to_string()).collect();
        let (got, bad) = super::measure_interleaved(
            &bar,
            rounds,
            threads,
            dbs.len(),
            |i| names[i].clone(),
            |i| {
                let (db, forwardings, _) = &mut dbs[i];
                measure(&**db, forwardings, n, threads, dur)
            },
        );
        failed |= bad;
        for ((db, _, bytes), ms) in dbs.iter().zip(&got) {
            let Some(mtxn) = Spread::of(&ms.iter().map(|m| m.mtxn).collect::<Vec<_>>()) else { continue };
            let (txns, ok) = ms.iter().fold((0, 0), |(t, o), m| (t + m.txns, o + m.ok));
            let row = Row {
                system: db.name(),
                threads,
                mtxn,
                txns,
                success_rate: ok as f64 / txns.max(1) as f64,
                bytes_per_subscriber: *bytes,
            };
            bar.println(format!(
                "{:<8} {:>2} threads: {} M txn/s, {:.1}% succeeded, checks {}",
                row.system,
                threads,
                row.mtxn.show(3),
                100.0 * row.success_rate,
                if ms.len() == rounds { "ok" } else { "FAILED" }
            ));
            rows.push(row);
        }
    }
    drop(bar);

    println!("{:<8} {:>7} {:>26} {:>10} {:>13}", "system", "threads", "M txn/s", "succeeded", "B/subscriber");
    let mut csv =
        String::from("system,threads,mtxn,mtxn_min,mtxn_max,txns,success_rate,bytes_per_subscriber\n");
    for r in &rows {
        println!(
            "{:<8} {:>7} {:>26} {:>9.1}% {:>13.1}",
            r.system,
            r.threads,
            r.mtxn.show(3),
            100.0 * r.success_rate,
            r.bytes_per_subscriber
        );
        let _ = writeln!(
            csv,
            "{},{},{:.5},{:.5},{:.5},{},{:.6},{:.1}",
            r.system,
            r.threads,
            r.mtxn.median,
            r.mtxn.min,
            r.mtxn.max,
            r.txns,
            r.success_rate,
            r.bytes_per_subscriber
        );
    }
    println!(
        "# {n} subscribers (uniform), the standard mix; medians (min–max) over {rounds} interleaved rounds of {} s; counts over all rounds; referential integrity, the forwardings' count, whole subscriber rows and the number index checked after every measurement",
        dur.as_secs_f64()
    );
    let json = serde_json::to_string_pretty(&rows).unwrap_or_default();
    super::save_app(a.run.out, "tatp", &machine, &[("tatp.csv", csv), ("tatp.json", json)]);
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_database_keeps_its_invariants_on_two_threads() {
        for name in SYSTEMS {
            // 16 subscribers: the threads meet on the same rows.
            for n in [16, 1 << 10] {
                let db = database(name, n, 2);
                let mut f = db.check(n).unwrap();
                for _ in 0..3 {
                    let m = measure(&*db, &mut f, n, 2, Duration::from_millis(50))
                        .unwrap_or_else(|e| panic!("{e}"));
                    assert!(m.ok > 0 && m.ok < m.txns, "{name}: {m:?}");
                }
            }
        }
    }

    #[test]
    fn the_population_and_mix_are_the_specification_s() {
        assert_eq!(MIX.iter().map(|&(_, p)| p).sum::<u64>(), 100);
        let n = 20_000;
        let (mut ai, mut sf, mut cf) = (0, 0, 0);
        for s in 1..=n {
            let (sub, a, f, c) = rows_of(s);
            assert!(sub.whole());
            ai += a.len();
            sf += f.len();
            cf += c.len();
        }
        let per = |x: usize| x as f64 / n as f64;
        // 2.5 access infos and facilities, 3.75 forwardings per subscriber.
        assert!((per(ai) - 2.5).abs() < 0.05 && (per(sf) - 2.5).abs() < 0.05, "{ai} {sf}");
        assert!((per(cf) - 3.75).abs() < 0.1, "{cf}");
        // GET_ACCESS_DATA succeeds for 62.5% of types.
        let db = database("dlht", 4096, 2);
        let mut w = 0u64;
        let (mut tries, mut hits) = (0, 0);
        for _ in 0..20_000 {
            let mut t = draw(4096, || {
                w += 1;
                splitmix(w)
            });
            t.kind = Kind::GetAccessData;
            tries += 1;
            hits += u64::from(db.run(&t).ok);
        }
        let rate = hits as f64 / tries as f64;
        assert!((rate - 0.625).abs() < 0.02, "GET_ACCESS_DATA succeeded {rate}");
    }

    /// A torn subscriber row (a field changed without its checksum, as an
    /// update that was not atomic would leave it) is caught.
    #[test]
    fn a_torn_row_is_caught() {
        let db = Dlht {
            subscribers: dlht::AllocMap::new(),
            access_info: dlht::Map::new(),
            facilities: dlht::Map::new(),
            forwarding: dlht::Map::new(),
            numbers: dlht::Map::new(),
        };
        let g = db.subscribers.guard();
        let (mut sub, ..) = rows_of(1);
        db.numbers.insert(sub.sub_nbr, 1).unwrap();
        sub.vlr_location ^= 1;
        assert!(db.subscribers.insert(1, sub, &g).is_ok());
        assert!(db.check(1).is_err());
    }
}
