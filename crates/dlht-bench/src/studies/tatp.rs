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
//! specification's rules make it: 62.5% of GET_ACCESS_DATA and
//! UPDATE_SUBSCRIBER_DATA succeed, about 31% of the call-forwarding
//! inserts and deletes, and 14.8% of GET_NEW_DESTINATION (the
//! specification quotes 23.9%, which its population and parameters, as
//! read here, do not give); 74–75% of all.
//!
//! - `dlht`: subscribers in an [`AllocMap`](dlht::AllocMap) (a 64-byte
//!   row, replaced whole by `update`); access info, special facilities,
//!   call forwarding and the `sub_nbr` index in [`Map<u64, u64>`](dlht::Map)s
//!   (composite keys and packed rows); a call-forwarding row is inserted
//!   with a shadow insert, committed at the transaction's end;
//! - `dashmap`: the same tables as `DashMap`s (rows updated under the
//!   shard's lock, inserts through `entry`).
//!
//! Checks (always on): after each measurement every call-forwarding row has
//! its special facility (referential integrity), their number (counted,
//! and as the table says) is the number before plus the inserts and minus
//! the deletes that succeeded, every subscriber row is whole (a checksum
//! over its fields that each update keeps), the updates the rows count add
//! up to the updates that committed (a lost update falls short), and every
//! `sub_nbr` leads to its subscriber.
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
/// bytes), its locations, its number, the updates it took (their sum over
/// the rows must be the updates that committed: a lost update falls
/// short), and a checksum of the rest that every update keeps (a torn row
/// fails it).
#[derive(Clone, Copy, Debug, Default)]
struct Subscriber {
    fields: [u8; 30],
    updates: u32,
    msc_location: u32,
    vlr_location: u32,
    sub_nbr: u64,
    check: u64,
}

impl Subscriber {
    fn sum(&self) -> u64 {
        let mut h = splitmix(self.sub_nbr ^ (self.msc_location as u64) << 32 ^ self.vlr_location as u64);
        h = splitmix(h ^ self.updates as u64);
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

    /// This row updated by `f`, counted and sealed.
    fn updated(mut self, f: impl FnOnce(&mut Subscriber)) -> Subscriber {
        f(&mut self);
        self.updates = self.updates.wrapping_add(1);
        self.sealed()
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
fn sf_row(active: bool, rest: u64) -> u64 {
    u64::from(active) | rest << 8
}
fn sf_active(row: u64) -> bool {
    row & 1 == 1
}
fn sf_with_data_a(row: u64, data_a: u8) -> u64 {
    row & !(0xff << 16) | (data_a as u64) << 16
}
/// A call forwarding's packed row: `end_time` (bits 0–7), `numberx` (8–63).
fn cf_row(end_time: u64, numberx: u64) -> u64 {
    end_time | numberx << 8
}
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
        let active = d.below(100) < 85;
        sf.push((sf_key(s, t), sf_row(active, d.next())));
        let slots = d.below(4);
        let mut starts = [0u64, 1, 2];
        for i in (1..3).rev() {
            starts.swap(i, d.below(i as u64 + 1) as usize);
        }
        for &slot in &starts[..slots as usize] {
            let end = 8 * slot + 1 + d.below(8);
            cf.push((cf_key(s, t, slot), cf_row(end, d.next())));
        }
    }
    (sub.sealed(), ai, sf, cf)
}

/// What a transaction did: succeeded, how it changed the number of
/// call-forwarding rows, and the subscriber rows it updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Done {
    ok: bool,
    forwardings: i64,
    updates: u64,
}

const FAILED: Done = Done { ok: false, forwardings: 0, updates: 0 };
const OK: Done = Done { ok: true, forwardings: 0, updates: 0 };

impl Done {
    fn ok_if(ok: bool) -> Done {
        Done { ok, ..FAILED }
    }
}

/// What the checks count in the tables: call-forwarding rows, and the
/// updates the subscriber rows took (mod 2^32 each, summed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct Counted {
    forwardings: u64,
    updates: u64,
}

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
    /// The tables checked (every call forwarding against its facility,
    /// every subscriber row whole and indexed by its number) and counted:
    /// Err names the first problem found (when no thread runs).
    fn check(&self, subscribers: u64) -> Result<Counted, String>;
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
                std::hint::black_box(*row);
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
                Done::ok_if(hit)
            }
            Kind::GetAccessData => Done::ok_if(self.access_info.get(&ai_key(t.s, t.t)).is_some()),
            Kind::UpdateSubscriberData => {
                let g = self.subscribers.guard();
                let bit = t.data as u8 & 1;
                self.subscribers.update(&t.s, |r| r.updated(|r| r.fields[0] = bit), &g).expect("present");
                let ok = self
                    .facilities
                    .update(&sf_key(t.s, t.t), |row| sf_with_data_a(row, t.data as u8))
                    .is_some();
                Done { updates: 1, ..Done::ok_if(ok) }
            }
            Kind::UpdateLocation => {
                let s = self.numbers.get(&sub_nbr(t.s)).expect("every number is indexed");
                let g = self.subscribers.guard();
                let vlr = t.data as u32;
                self.subscribers.update(&s, |r| r.updated(|r| r.vlr_location = vlr), &g).expect("present");
                Done { updates: 1, ..OK }
            }
            Kind::InsertCallForwarding => {
                let s = self.numbers.get(&sub_nbr(t.s)).expect("every number is indexed");
                // The specification's order: the subscriber's facilities,
                // then the insert, which fails without the facility (the
                // foreign key) or over a present row (the primary key). The
                // insert is a shadow insert, committed at the transaction's
                // end, as inserts inside a transaction are.
                let types = (1..=4).filter(|&ty| self.facilities.get(&sf_key(s, ty)).is_some()).count();
                if types == 0 || self.facilities.get(&sf_key(s, t.t)).is_none() {
                    return FAILED;
                }
                let row = cf_row(8 * t.slot + 1 + t.data % 8, t.data >> 8);
                match self.forwarding.shadow_insert(cf_key(s, t.t, t.slot), row) {
                    Ok(held) => {
                        held.commit();
                        Done { forwardings: 1, ..OK }
                    }
                    Err(_) => FAILED, // present, or held by another transaction
                }
            }
            Kind::DeleteCallForwarding => {
                let s = self.numbers.get(&sub_nbr(t.s)).expect("every number is indexed");
                let ok = self.forwarding.remove(&cf_key(s, t.t, t.slot)).is_some();
                Done { forwardings: -i64::from(ok), ..Done::ok_if(ok) }
            }
        }
    }
    fn check(&self, subscribers: u64) -> Result<Counted, String> {
        let mut c = Counted::default();
        for (k, _) in self.forwarding.iter() {
            if self.facilities.get(&(k >> 2)).is_none() {
                return Err(format!("forwarding {k:#x} has no special facility"));
            }
            c.forwardings += 1;
        }
        let g = self.subscribers.guard();
        for s in 1..=subscribers {
            let row = self.subscribers.get(&s, &g).filter(|r| r.whole() && r.sub_nbr == sub_nbr(s));
            match row {
                Some(r) if self.numbers.get(&sub_nbr(s)) == Some(s) => c.updates += r.updates as u64,
                _ => return Err(format!("subscriber {s}: its row is torn or its number not indexed")),
            }
        }
        lengths_agree(c.forwardings, self.forwarding.len())?;
        Ok(c)
    }
}

/// Err if the forwardings counted and the table's length differ.
fn lengths_agree(counted: u64, len: usize) -> Result<(), String> {
    if counted == len as u64 {
        Ok(())
    } else {
        Err(format!("{counted} call forwardings iterated, the table says {len}"))
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
                Done::ok_if(hit)
            }
            Kind::GetAccessData => Done::ok_if(self.access_info.get(&ai_key(t.s, t.t)).is_some()),
            Kind::UpdateSubscriberData => {
                let mut r = self.subscribers.get_mut(&t.s).expect("present");
                *r = r.updated(|r| r.fields[0] = t.data as u8 & 1);
                drop(r);
                let ok = match self.facilities.get_mut(&sf_key(t.s, t.t)) {
                    Some(mut row) => {
                        *row = sf_with_data_a(*row, t.data as u8);
                        true
                    }
                    None => false,
                };
                Done { updates: 1, ..Done::ok_if(ok) }
            }
            Kind::UpdateLocation => {
                let s = number();
                let mut r = self.subscribers.get_mut(&s).expect("present");
                *r = r.updated(|r| r.vlr_location = t.data as u32);
                Done { updates: 1, ..OK }
            }
            Kind::InsertCallForwarding => {
                let s = number();
                let types = (1..=4).filter(|&ty| self.facilities.contains_key(&sf_key(s, ty))).count();
                if types == 0 || !self.facilities.contains_key(&sf_key(s, t.t)) {
                    return FAILED;
                }
                let row = cf_row(8 * t.slot + 1 + t.data % 8, t.data >> 8);
                match self.forwarding.entry(cf_key(s, t.t, t.slot)) {
                    dashmap::mapref::entry::Entry::Vacant(v) => {
                        v.insert(row);
                        Done { forwardings: 1, ..OK }
                    }
                    dashmap::mapref::entry::Entry::Occupied(_) => FAILED,
                }
            }
            Kind::DeleteCallForwarding => {
                let s = number();
                let ok = self.forwarding.remove(&cf_key(s, t.t, t.slot)).is_some();
                Done { forwardings: -i64::from(ok), ..Done::ok_if(ok) }
            }
        }
    }
    fn check(&self, subscribers: u64) -> Result<Counted, String> {
        let mut c = Counted::default();
        for e in self.forwarding.iter() {
            if !self.facilities.contains_key(&(e.key() >> 2)) {
                return Err(format!("forwarding {:#x} has no special facility", e.key()));
            }
            c.forwardings += 1;
        }
        for s in 1..=subscribers {
            let row =
                self.subscribers.get(&s).filter(|r| r.whole() && r.sub_nbr == sub_nbr(s)).map(|r| r.updates);
            match row {
                Some(u) if self.numbers.get(&sub_nbr(s)).map(|v| *v) == Some(s) => c.updates += u as u64,
                _ => return Err(format!("subscriber {s}: its row is torn or its number not indexed")),
            }
        }
        lengths_agree(c.forwardings, self.forwarding.len())?;
        Ok(c)
    }
}

/// Room for `per` rows a subscriber of `n`.
fn capacity(n: u64, per: f64) -> usize {
    (n as f64 * per) as usize + 1024
}

/// `put` every subscriber's rows (ids 1..=n), on `threads` threads.
fn fill(n: u64, threads: usize, put: &(dyn Fn(u64, Rows) + Sync)) {
    super::in_shares(n, threads, &|from, to| (from + 1..=to).for_each(|s| put(s, rows_of(s))));
}

/// dlht's tables with `n` subscribers, populated by `threads` threads.
/// (Expected rows: 2.5 access infos, 2.5 facilities, 3.75 forwardings a
/// subscriber.)
fn dlht_database(n: u64, threads: usize) -> Dlht {
    let db = Dlht {
        subscribers: dlht::AllocMap::with_capacity(n as usize),
        access_info: dlht::Map::with_capacity(capacity(n, 2.5)),
        facilities: dlht::Map::with_capacity(capacity(n, 2.5)),
        forwarding: dlht::Map::with_capacity(capacity(n, 4.0)),
        numbers: dlht::Map::with_capacity(n as usize),
    };
    fill(n, threads, &|s, (sub, ai, sf, cf)| {
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
    db
}

/// A database of system `name` with `n` subscribers, populated by
/// `threads` threads.
fn database(name: &str, n: u64, threads: usize) -> Box<dyn Db> {
    match name {
        "dlht" => Box::new(dlht_database(n, threads)),
        "dashmap" => {
            let db = Dash {
                subscribers: dashmap::DashMap::with_capacity(n as usize),
                access_info: dashmap::DashMap::with_capacity(capacity(n, 2.5)),
                facilities: dashmap::DashMap::with_capacity(capacity(n, 2.5)),
                forwarding: dashmap::DashMap::with_capacity(capacity(n, 4.0)),
                numbers: dashmap::DashMap::with_capacity(n as usize),
            };
            fill(n, threads, &|s, (sub, ai, sf, cf)| {
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

/// What the threads count: transactions, those that succeeded, and what
/// they did to the tables (call forwardings added, subscriber rows
/// updated).
#[derive(Default)]
struct Totals {
    txns: AtomicU64,
    ok: AtomicU64,
    forwardings: AtomicU64,
    updates: AtomicU64,
}

/// A thread's tallies, added to the totals when it ends.
struct Tally<'a> {
    txns: u64,
    ok: u64,
    forwardings: i64,
    updates: u64,
    totals: &'a Totals,
}

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        // Relaxed: read after the measurement's threads are joined.
        let t = self.totals;
        t.txns.fetch_add(self.txns, Ordering::Relaxed);
        t.ok.fetch_add(self.ok, Ordering::Relaxed);
        t.forwardings.fetch_add(self.forwardings as u64, Ordering::Relaxed);
        t.updates.fetch_add(self.updates, Ordering::Relaxed);
    }
}

/// One measurement's figures.
#[derive(Clone, Copy, Debug)]
struct Measured {
    mtxn: f64,
    txns: u64,
    ok: u64,
}

/// Run transactions on `db` (whose tables count `counted`) for `dur` on
/// `threads` threads; Err if a check failed. `counted` becomes what the
/// checks counted.
fn measure(
    db: &dyn Db,
    counted: &mut Counted,
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
        |_| Tally { txns: 0, ok: 0, forwardings: 0, updates: 0, totals: &totals },
        |w| {
            let keys = &mut w.keys;
            let t = draw(subscribers, || keys.next_word());
            let d = db.run(&t);
            let tally = &mut w.state;
            tally.txns += 1;
            tally.ok += u64::from(d.ok);
            tally.forwardings += d.forwardings;
            tally.updates += d.updates;
            1
        },
    );
    // Relaxed: the threads are joined.
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let expected = Counted {
        forwardings: counted.forwardings.wrapping_add(load(&totals.forwardings)),
        updates: counted.updates + load(&totals.updates),
    };
    let found = db.check(subscribers).map_err(|e| format!("{}: {e}", db.name()))?;
    *counted = found;
    if found != expected {
        return Err(format!(
            "{}: the tables hold {found:?}, not the {expected:?} that the committed transactions leave",
            db.name()
        ));
    }
    Ok(Measured { mtxn, txns: load(&totals.txns), ok: load(&totals.ok) })
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
        db.check(n).map(|counted| (db, counted))
    }) else {
        return true;
    };
    let mut dbs: Vec<(Box<dyn Db>, Counted, f64)> =
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
                let (db, counted, _) = &mut dbs[i];
                measure(&**db, counted, n, threads, dur)
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
        // Each kind's success on a fresh population, read only (the
        // writes' by their own rows: a write here would change the next).
        // GET_NEW_DESTINATION: 0.625 facilities × 0.85 active × 0.278 for a
        // forwarding covering the times drawn = 0.148 (the specification
        // quotes 23.9%, not reached by its population and parameters as
        // read here).
        let db = database("dlht", 4096, 2);
        let mut w = 0u64;
        for (kind, want) in [
            (Kind::GetSubscriberData, 1.0),
            (Kind::GetNewDestination, 0.148),
            (Kind::GetAccessData, 0.625),
            (Kind::UpdateSubscriberData, 0.625),
        ] {
            let hits = (0..40_000)
                .filter(|_| {
                    let mut t = draw(4096, || {
                        w += 1;
                        splitmix(w)
                    });
                    t.kind = kind;
                    db.run(&t).ok
                })
                .count();
            let rate = hits as f64 / 40_000.0;
            assert!((rate - want).abs() < 0.015, "{kind:?} succeeded {rate}, {want} expected");
        }
    }

    /// An update lost (a row written back from a copy read before another
    /// update committed) is caught by the rows' update counts.
    #[test]
    fn a_lost_update_is_caught() {
        let db = dlht_database(64, 1);
        let before = db.check(64).unwrap();
        let g = db.subscribers.guard();
        let stale = *db.subscribers.get(&1, &g).unwrap();
        let t = Txn { kind: Kind::UpdateLocation, s: 1, t: 1, slot: 0, end_time: 1, data: 7 };
        let committed = db.run(&t).updates;
        // A second writer's update, computed from the row it read before.
        assert!(db.subscribers.put(&1, stale.updated(|r| r.vlr_location = 9), &g).is_ok());
        let after = db.check(64).unwrap();
        assert_eq!(committed, 1);
        assert_eq!(after.updates, before.updates + 1, "two updates committed, one counted");
        assert_ne!(after.updates, before.updates + committed + 1);
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
