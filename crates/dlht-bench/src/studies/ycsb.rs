//! YCSB's core workloads, in process: A (50% read, 50% update), B (95/5),
//! C (read only), D (95% read of the latest records, 5% insert) and F (50%
//! read, 50% read-modify-write), with YCSB's scrambled Zipfian (θ = 0.99)
//! or uniform requests, on two record shapes:
//!
//! - `word`: 8-byte values, `dlht` ([`Map<u64, u64>`](dlht::Map): `get`,
//!   `put`, an RMW is [`Map::update`](dlht::Map::update), one CAS);
//! - `fields`: YCSB's ten 100-byte fields (1000-byte records), `dlht-alloc`
//!   ([`AllocMap<u64, [u8; 1000]>`](dlht::AllocMap)) and `dlht-bytes`
//!   ([`ByteMap`](dlht::ByteMap), 8-byte keys): an update rewrites one field
//!   through the map's atomic `update` (copy the record, change the field,
//!   replace the record if it is still the one copied);
//!
//! against papaya (`u64 → u64`, `u64 → [u8; 1000]`: papaya allocates every
//! entry anyway), dashmap and scc (`u64 → Box<[u8; 1000]>`, updated in place
//! under their locks), all with dlht's hasher. GrowT and Boost (the opt-in
//! C++ peers of the comparison) are not run here: their adapters hold `u64`
//! pairs only and have no atomic update.
//!
//! Workload E (scans of the next N keys in key order) is not supported: dlht
//! is a hash table (iteration is in bin order, not key order), and so are
//! papaya, dashmap and scc.
//!
//! Procedure: for each shape, each system is built (presized for the
//! records) and loaded by the threads (load throughput, and resident bytes
//! per record from `RssAnon` before and after, the allocator's free pages
//! handed back first: an estimate, as the process holds every table of the
//! shape at once); then each workload ×
//! distribution × thread count (1..=--threads) is measured on every system
//! in --rounds interleaved rounds (forward, then backward), so drift of the
//! host hits every system alike. Figures: the median over rounds, the ratio
//! dlht ÷ best peer (of the medians), and p50/p99 latency from an
//! HdrHistogram of 1 op in 64 (timing every op would dominate).
//!
//! Checks (always; never on throughput): every read, update and RMW of a
//! loaded key must find it; a value carries its key (a tag in the high half
//! of a word value; the key and a checksum of the whole record in a
//! 1000-byte record, verified on every read, so a torn or wrong record is
//! caught); F's RMWs increment a counter in the value (the low half of a
//! word value; a counter word of the record) and the counters must grow by
//! exactly the RMWs done; D's inserted keys must all be readable after each
//! measurement and the table must hold exactly the records loaded and
//! inserted. A failed check of a dlht system fails the run; a peer's is
//! reported.
//!
//! D grows the tables (5% of its operations insert), so it runs after the
//! other workloads of a shape.

use crate::compare;
use crate::harness::keys::KeyStream;
use crate::harness::limit::splitmix;
use crate::harness::Spread;
use crate::progress::Progress;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::cell::Cell;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The hasher every peer gets: dlht's.
type H = dlht::DefaultHashBuilder;

/// Options of the YCSB study.
#[derive(clap::Args, Clone, Debug)]
pub struct YcsbArgs {
    /// Workloads, comma-separated (E, ordered scans, is not supported: the
    /// maps are hash tables).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,d,f")]
    pub workloads: Vec<Workload>,
    /// Request distributions, comma-separated (D's Zipfian is YCSB's
    /// "latest").
    #[arg(long, value_delimiter = ',', default_value = "zipfian,uniform")]
    pub distribution: Vec<Distribution>,
    /// Record shapes: `word` (8-byte values) and `fields` (ten 100-byte
    /// fields).
    #[arg(long, value_delimiter = ',', default_value = "word,fields")]
    pub shapes: Vec<Shape>,
    /// Systems, comma-separated, of dlht, dlht-alloc, dlht-bytes, papaya,
    /// dashmap, scc (default: all; --smoke: the dlht ones and dashmap).
    #[arg(long, value_delimiter = ',')]
    pub systems: Option<Vec<String>>,
    /// Records loaded (default 2^22 for `word`, 2^20 for `fields`; 2^12
    /// with --smoke).
    #[arg(long, value_parser = clap::value_parser!(u64).range(16..=1 << 32))]
    pub records: Option<u64>,
    /// Measure at 1..=N threads (default: the available cores; at most 2
    /// with --smoke).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: Option<u64>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 0.5, value_parser = compare::positive_seconds)]
    pub seconds: f64,
    /// Operations per thread per measurement, instead of --seconds.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: Option<u64>,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Seed of the request streams.
    #[arg(long, default_value_t = 0x5EED_1C5B)]
    pub seed: u64,
    /// Folder for ycsb.csv, ycsb-load.csv and ycsb.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny tables and short measurements: a few seconds, every check.
    #[arg(long)]
    pub smoke: bool,
}

/// A YCSB core workload.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Workload {
    A,
    B,
    C,
    D,
    F,
}

/// What a workload does besides reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Other {
    Update,
    Insert,
    Rmw,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::A => "A",
            Workload::B => "B",
            Workload::C => "C",
            Workload::D => "D",
            Workload::F => "F",
        }
    }
    /// Reads per thousand operations.
    fn read_permille(self) -> u64 {
        match self {
            Workload::A | Workload::F => 500,
            Workload::B | Workload::D => 950,
            Workload::C => 1000,
        }
    }
    fn other(self) -> Other {
        match self {
            Workload::A | Workload::B | Workload::C => Other::Update,
            Workload::D => Other::Insert,
            Workload::F => Other::Rmw,
        }
    }
    fn mix(self) -> &'static str {
        match self {
            Workload::A => "50% read, 50% update",
            Workload::B => "95% read, 5% update",
            Workload::C => "100% read",
            Workload::D => "95% read latest, 5% insert",
            Workload::F => "50% read, 50% read-modify-write",
        }
    }
}

/// A request distribution.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Distribution {
    Zipfian,
    Uniform,
}

impl Distribution {
    /// Its name in workload `w` (D's Zipfian is YCSB's "latest").
    fn name(self, w: Workload) -> &'static str {
        match (self, w) {
            (Distribution::Zipfian, Workload::D) => "latest",
            (Distribution::Zipfian, _) => "zipfian",
            (Distribution::Uniform, _) => "uniform",
        }
    }
}

/// A record shape.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Shape {
    /// 8-byte values.
    Word,
    /// Ten 100-byte fields: 1000-byte records.
    Fields,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Word => "word",
            Shape::Fields => "fields",
        }
    }
    fn systems(self) -> &'static [&'static str] {
        match self {
            Shape::Word => &["dlht", "papaya", "dashmap", "scc"],
            Shape::Fields => &["dlht-alloc", "dlht-bytes", "papaya", "dashmap", "scc"],
        }
    }
    fn default_records(self) -> u64 {
        match self {
            Shape::Word => 1 << 22,
            Shape::Fields => 1 << 20,
        }
    }
}

// ---------------------------------------------------------------------------
// YCSB's generators.
//
// Why not `rand_distr::Zipf` (as the counters study's trace does): YCSB's
// figures come from its own generator, Gray et al.'s closed-form
// approximation ("Quickly generating billion-record synthetic databases",
// SIGMOD '94) over 10^10 items, scrambled by FNV-1a onto the records, so
// the hot keys are spread over the key space and the popularity of the
// hottest records differs from an exact Zipf over the records (FNV folds
// several ranks onto one record). rand_distr's Zipf is an exact
// rejection sampler with no scrambling: its rank 1 is a single record
// with a different share. To be comparable with published YCSB numbers
// the generator must be YCSB's, reproduced here from its
// ZipfianGenerator, ScrambledZipfianGenerator and Utils.fnvhash64.

/// YCSB's Zipfian constant; its scrambled generator's precomputed zeta is
/// for this θ only.
const THETA: f64 = 0.99;
/// Items of YCSB's scrambled generator (ScrambledZipfianGenerator.ITEM_COUNT).
const ITEM_COUNT: u64 = 10_000_000_000;
/// zeta(ITEM_COUNT + 1, 0.99) as YCSB precomputes it (ScrambledZipfianGenerator.ZETAN).
const ZETAN: f64 = 26.46902820178302;

/// Σ_{i = st}^{n-1} 1 / (i + 1)^θ, added to `initial` (YCSB's zetastatic).
fn zeta(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    (st..n).fold(initial, |s, i| s + 1.0 / ((i + 1) as f64).powf(theta))
}

/// YCSB's ZipfianGenerator over `0..items` (base 0), for a fixed item
/// count.
#[derive(Clone, Debug)]
struct Zipfian {
    items: u64,
    theta: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
}

impl Zipfian {
    fn new(items: u64, theta: f64) -> Zipfian {
        Zipfian::with_zetan(items, theta, zeta(0, items, theta, 0.0))
    }

    fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2 = zeta(0, 2, theta, 0.0);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian { items, theta, zetan, alpha: 1.0 / (1.0 - theta), eta }
    }

    /// The value for a uniform `u` in [0, 1) (YCSB's nextLong(items)).
    fn value(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// YCSB's Utils.fnvhash64: FNV-1a over the 8 little-end bytes, then the
/// absolute value as a Java long (the one value it leaves negative,
/// i64::MIN, is taken as its bits here).
fn fnv64(mut v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        v >>= 8;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).wrapping_abs() as u64
}

/// YCSB's ScrambledZipfianGenerator over `0..records` (θ = 0.99).
struct ScrambledZipfian {
    gen: Zipfian,
    records: u64,
}

impl ScrambledZipfian {
    fn new(records: u64) -> ScrambledZipfian {
        // YCSB: new ZipfianGenerator(0, ITEM_COUNT, 0.99, ZETAN): ITEM_COUNT + 1 items.
        ScrambledZipfian { gen: Zipfian::with_zetan(ITEM_COUNT + 1, THETA, ZETAN), records }
    }

    fn value(&self, u: f64) -> u64 {
        fnv64(self.gen.value(u)) % self.records
    }
}

/// `len` draws of `f(u)` for uniform `u`s, as record indexes. Drawing costs
/// a power (tens of ns, as much as a cached lookup), so the draws are made
/// before the clock starts and each thread reads the trace cyclically from
/// its own place (the counters study's reasoning).
fn trace(len: usize, seed: u64, f: impl Fn(f64) -> u64) -> Vec<u32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..len).map(|_| f(rng.random::<f64>()) as u32).collect()
}

// ---------------------------------------------------------------------------
// Records.

/// Bytes of a `fields` record: ten 100-byte fields.
const REC: usize = 1000;
const FIELDS: usize = 10;
const FIELD: usize = REC / FIELDS;
/// Word 0 holds the key, word 1 the RMW counter, the last word the checksum.
const CHECK_AT: usize = REC - 8;

type Record = [u8; REC];

fn word_at(r: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(r[8 * i..8 * i + 8].try_into().expect("8 bytes"))
}

fn set_word(r: &mut [u8], i: usize, v: u64) {
    r[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
}

/// A checksum of everything before the checksum word (a sum and a xor of
/// the words: cheap enough to verify on every read, and any field from
/// another version or record changes it).
fn checksum(r: &[u8]) -> u64 {
    let (mut sum, mut xor) = (0u64, 0u64);
    for c in r[..CHECK_AT].chunks_exact(8) {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        sum = sum.wrapping_add(w);
        xor ^= w;
    }
    sum ^ xor.rotate_left(32) ^ 0x5943_5342_5245_4321
}

fn seal(r: &mut [u8]) {
    let c = checksum(r);
    set_word(r, CHECK_AT / 8, c);
}

/// True if `r` is an intact record of key `k`.
fn intact(r: &[u8], k: u64) -> bool {
    r.len() == REC && word_at(r, 0) == k && word_at(r, CHECK_AT / 8) == checksum(r)
}

/// The record a load or an insert stores for key `k`: counter 0.
fn fresh(k: u64) -> Record {
    let mut r = [0u8; REC];
    set_word(&mut r, 0, k);
    for i in 2..CHECK_AT / 8 {
        set_word(&mut r, i, splitmix(k ^ (i as u64) << 56));
    }
    seal(&mut r);
    r
}

/// Rewrite one field of `r` (chosen by `w`) with bytes drawn from `w`,
/// keeping the key and counter words and resealing; `bump`: add 1 to the
/// counter too (an RMW).
fn rewrite(r: &mut [u8], w: u64, bump: bool) {
    let f = ((w >> 40) % FIELDS as u64) as usize;
    let (lo, hi) = ((f * FIELD).max(16), ((f + 1) * FIELD).min(CHECK_AT));
    for (j, chunk) in r[lo..hi].chunks_mut(8).enumerate() {
        let bytes = splitmix(w ^ j as u64).to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    if bump {
        set_word(r, 1, word_at(r, 1).wrapping_add(1));
    }
    seal(r);
}

/// `r` with one field rewritten (see [`rewrite`]).
fn rewritten(r: &[u8], w: u64, bump: bool) -> Record {
    let mut n = [0u8; REC];
    n.copy_from_slice(r);
    rewrite(&mut n, w, bump);
    n
}

/// The tag of key `k` in the high half of a word value (never 0).
fn tag(k: u64) -> u64 {
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) | 1
}

/// A word value of key `k`: its tag, and `low` (the RMW counter) below.
fn tagged(k: u64, low: u32) -> u64 {
    tag(k) << 32 | low as u64
}

fn tag_ok(k: u64, v: u64) -> bool {
    v >> 32 == tag(k)
}

/// An update's new low half: small, so RMW increments never carry into the tag.
fn low_of(w: u64) -> u32 {
    (w & 0xFFFF) as u32
}

// ---------------------------------------------------------------------------
// Systems.

/// What one operation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Got {
    /// The key, with a correct value.
    Hit,
    /// The key was absent.
    Miss,
    /// The key, with a value of another key or a torn record.
    Bad,
}

fn got_word(k: u64, v: Option<u64>) -> Got {
    match v {
        Some(v) if tag_ok(k, v) => Got::Hit,
        Some(_) => Got::Bad,
        None => Got::Miss,
    }
}

fn got_record(k: u64, r: Option<&[u8]>) -> Got {
    match r {
        Some(r) if intact(r, k) => Got::Hit,
        Some(_) => Got::Bad,
        None => Got::Miss,
    }
}

/// A table under YCSB: its operations, each on one record, between
/// [`pin`](Store::pin)s (a reclamation guard, held for a chunk of
/// operations).
trait Store: Sync {
    type Pin<'a>
    where
        Self: 'a;
    fn pin(&self) -> Self::Pin<'_>;
    /// Insert key `k`'s fresh record: false if `k` was present.
    fn insert(&self, p: &Self::Pin<'_>, k: u64) -> bool;
    /// Read `k`'s record (all of it, verified).
    fn read(&self, p: &Self::Pin<'_>, k: u64) -> Got;
    /// Write a new value (word) or one new field (record) of a present `k`.
    fn update(&self, p: &Self::Pin<'_>, k: u64, w: u64) -> Got;
    /// Read `k`'s record and write it back with its counter plus 1 (and,
    /// for a record, one new field), atomically.
    fn rmw(&self, p: &Self::Pin<'_>, k: u64, w: u64) -> Got;
    /// The sum of the RMW counters of every record.
    fn counters(&self) -> u64;
    fn len(&self) -> usize;
}

struct DlhtWord(dlht::Map<u64, u64>);

impl Store for DlhtWord {
    type Pin<'a> = ();
    fn pin(&self) {}
    fn insert(&self, _: &(), k: u64) -> bool {
        self.0.insert(k, tagged(k, 0)).is_ok()
    }
    fn read(&self, _: &(), k: u64) -> Got {
        got_word(k, self.0.get(&k))
    }
    fn update(&self, _: &(), k: u64, w: u64) -> Got {
        got_word(k, self.0.put(k, tagged(k, low_of(w))))
    }
    fn rmw(&self, _: &(), k: u64, _: u64) -> Got {
        got_word(k, self.0.update(&k, |v| v.wrapping_add(1)))
    }
    fn counters(&self) -> u64 {
        self.0.iter().fold(0, |s, (_, v)| s.wrapping_add(v & 0xFFFF_FFFF))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct PapayaWord(papaya::HashMap<u64, u64, H>);

impl Store for PapayaWord {
    type Pin<'a> = papaya::HashMapRef<'a, u64, u64, H, papaya::LocalGuard<'a>>;
    fn pin(&self) -> Self::Pin<'_> {
        self.0.pin()
    }
    fn insert(&self, p: &Self::Pin<'_>, k: u64) -> bool {
        p.try_insert(k, tagged(k, 0)).is_ok()
    }
    fn read(&self, p: &Self::Pin<'_>, k: u64) -> Got {
        got_word(k, p.get(&k).copied())
    }
    fn update(&self, p: &Self::Pin<'_>, k: u64, w: u64) -> Got {
        // papaya's insert replaces; YCSB's update of a present key.
        got_word(k, p.insert(k, tagged(k, low_of(w))).copied())
    }
    fn rmw(&self, p: &Self::Pin<'_>, k: u64, _: u64) -> Got {
        got_word(k, p.update(k, |v| v.wrapping_add(1)).copied())
    }
    fn counters(&self) -> u64 {
        self.0.pin().iter().fold(0, |s, (_, v)| s.wrapping_add(v & 0xFFFF_FFFF))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct DashWord(dashmap::DashMap<u64, u64, H>);

impl Store for DashWord {
    type Pin<'a> = ();
    fn pin(&self) {}
    fn insert(&self, _: &(), k: u64) -> bool {
        match self.0.entry(k) {
            dashmap::Entry::Occupied(_) => false,
            dashmap::Entry::Vacant(e) => {
                e.insert(tagged(k, 0));
                true
            }
        }
    }
    fn read(&self, _: &(), k: u64) -> Got {
        got_word(k, self.0.get(&k).map(|v| *v))
    }
    fn update(&self, _: &(), k: u64, w: u64) -> Got {
        got_word(k, self.0.get_mut(&k).map(|mut v| std::mem::replace(&mut *v, tagged(k, low_of(w)))))
    }
    fn rmw(&self, _: &(), k: u64, _: u64) -> Got {
        got_word(
            k,
            self.0.get_mut(&k).map(|mut v| {
                *v = v.wrapping_add(1);
                *v
            }),
        )
    }
    fn counters(&self) -> u64 {
        self.0.iter().fold(0, |s, e| s.wrapping_add(*e.value() & 0xFFFF_FFFF))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct SccWord(scc::HashMap<u64, u64, H>);

impl Store for SccWord {
    type Pin<'a> = ();
    fn pin(&self) {}
    fn insert(&self, _: &(), k: u64) -> bool {
        self.0.insert_sync(k, tagged(k, 0)).is_ok()
    }
    fn read(&self, _: &(), k: u64) -> Got {
        got_word(k, self.0.read_sync(&k, |_, v| *v))
    }
    fn update(&self, _: &(), k: u64, w: u64) -> Got {
        got_word(k, self.0.update_sync(&k, |_, v| std::mem::replace(v, tagged(k, low_of(w)))))
    }
    fn rmw(&self, _: &(), k: u64, _: u64) -> Got {
        got_word(
            k,
            self.0.update_sync(&k, |_, v| {
                *v = v.wrapping_add(1);
                *v
            }),
        )
    }
    fn counters(&self) -> u64 {
        let mut s = 0u64;
        self.0.iter_sync(|_, v| {
            s = s.wrapping_add(v & 0xFFFF_FFFF);
            true
        });
        s
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct DlhtAlloc(dlht::AllocMap<u64, Record>);

impl DlhtAlloc {
    /// One new field, and the counter plus 1 if `bump`: a new record
    /// replaces the old (values are immutable in allocator mode).
    fn change(&self, g: &dlht::Guard, k: u64, w: u64, bump: bool) -> Got {
        let bad = Cell::new(false);
        let new = self.0.update(
            &k,
            |r| {
                bad.set(!intact(r, k));
                rewritten(r, w, bump)
            },
            g,
        );
        if bad.get() {
            Got::Bad
        } else {
            got_record(k, new.map(|r| &r[..]))
        }
    }
}

impl Store for DlhtAlloc {
    type Pin<'a> = dlht::Guard;
    fn pin(&self) -> dlht::Guard {
        self.0.guard()
    }
    fn insert(&self, g: &dlht::Guard, k: u64) -> bool {
        self.0.insert(k, fresh(k), g).is_ok()
    }
    fn read(&self, g: &dlht::Guard, k: u64) -> Got {
        got_record(k, self.0.get(&k, g).map(|r| &r[..]))
    }
    fn update(&self, g: &dlht::Guard, k: u64, w: u64) -> Got {
        self.change(g, k, w, false)
    }
    fn rmw(&self, g: &dlht::Guard, k: u64, w: u64) -> Got {
        self.change(g, k, w, true)
    }
    fn counters(&self) -> u64 {
        let g = self.0.guard();
        self.0.iter(&g).fold(0, |s, (_, _, r)| s.wrapping_add(word_at(r, 1)))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct DlhtBytes(dlht::ByteMap);

impl DlhtBytes {
    fn change(&self, g: &dlht::Guard, k: u64, w: u64, bump: bool) -> Got {
        let bad = Cell::new(false);
        let new = self.0.update(
            &k.to_le_bytes(),
            |r| {
                bad.set(!intact(r, k));
                if r.len() == REC {
                    rewritten(r, w, bump)
                } else {
                    [0; REC]
                }
            },
            g,
        );
        match new {
            Err(e) => panic!("dlht-bytes: update failed: {e}"),
            Ok(_) if bad.get() => Got::Bad,
            Ok(new) => got_record(k, new.as_ref().map(|r| r.as_bytes())),
        }
    }
}

impl Store for DlhtBytes {
    type Pin<'a> = dlht::Guard;
    fn pin(&self) -> dlht::Guard {
        self.0.guard()
    }
    fn insert(&self, g: &dlht::Guard, k: u64) -> bool {
        matches!(self.0.insert(&k.to_le_bytes(), &fresh(k), g).expect("memory"), Ok(()))
    }
    fn read(&self, g: &dlht::Guard, k: u64) -> Got {
        got_record(k, self.0.get(&k.to_le_bytes(), g).as_ref().map(|r| r.as_bytes()))
    }
    fn update(&self, g: &dlht::Guard, k: u64, w: u64) -> Got {
        self.change(g, k, w, false)
    }
    fn rmw(&self, g: &dlht::Guard, k: u64, w: u64) -> Got {
        self.change(g, k, w, true)
    }
    fn counters(&self) -> u64 {
        let g = self.0.guard();
        self.0.iter(&g).fold(0, |s, (_, _, r)| {
            s.wrapping_add(if r.as_bytes().len() == REC { word_at(r.as_bytes(), 1) } else { 0 })
        })
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct PapayaRec(papaya::HashMap<u64, Record, H>);

impl PapayaRec {
    fn change(&self, p: &<Self as Store>::Pin<'_>, k: u64, w: u64, bump: bool) -> Got {
        let bad = Cell::new(false);
        let new = p.update(k, |r| {
            bad.set(!intact(r, k));
            rewritten(r, w, bump)
        });
        if bad.get() {
            Got::Bad
        } else {
            got_record(k, new.map(|r| &r[..]))
        }
    }
}

impl Store for PapayaRec {
    type Pin<'a> = papaya::HashMapRef<'a, u64, Record, H, papaya::LocalGuard<'a>>;
    fn pin(&self) -> Self::Pin<'_> {
        self.0.pin()
    }
    fn insert(&self, p: &Self::Pin<'_>, k: u64) -> bool {
        p.try_insert(k, fresh(k)).is_ok()
    }
    fn read(&self, p: &Self::Pin<'_>, k: u64) -> Got {
        got_record(k, p.get(&k).map(|r| &r[..]))
    }
    fn update(&self, p: &Self::Pin<'_>, k: u64, w: u64) -> Got {
        self.change(p, k, w, false)
    }
    fn rmw(&self, p: &Self::Pin<'_>, k: u64, w: u64) -> Got {
        self.change(p, k, w, true)
    }
    fn counters(&self) -> u64 {
        self.0.pin().iter().fold(0, |s, (_, r)| s.wrapping_add(word_at(r, 1)))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// A record changed in place under a peer's lock.
fn in_place(k: u64, r: &mut [u8], w: u64, bump: bool) -> Got {
    if !intact(r, k) {
        return Got::Bad;
    }
    rewrite(r, w, bump);
    Got::Hit
}

struct DashRec(dashmap::DashMap<u64, Box<Record>, H>);

impl Store for DashRec {
    type Pin<'a> = ();
    fn pin(&self) {}
    fn insert(&self, _: &(), k: u64) -> bool {
        match self.0.entry(k) {
            dashmap::Entry::Occupied(_) => false,
            dashmap::Entry::Vacant(e) => {
                e.insert(Box::new(fresh(k)));
                true
            }
        }
    }
    fn read(&self, _: &(), k: u64) -> Got {
        got_record(k, self.0.get(&k).as_deref().map(|r| &r[..]))
    }
    fn update(&self, _: &(), k: u64, w: u64) -> Got {
        self.0.get_mut(&k).map_or(Got::Miss, |mut r| in_place(k, &mut r[..], w, false))
    }
    fn rmw(&self, _: &(), k: u64, w: u64) -> Got {
        self.0.get_mut(&k).map_or(Got::Miss, |mut r| in_place(k, &mut r[..], w, true))
    }
    fn counters(&self) -> u64 {
        self.0.iter().fold(0, |s, e| s.wrapping_add(word_at(&e.value()[..], 1)))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct SccRec(scc::HashMap<u64, Box<Record>, H>);

impl Store for SccRec {
    type Pin<'a> = ();
    fn pin(&self) {}
    fn insert(&self, _: &(), k: u64) -> bool {
        self.0.insert_sync(k, Box::new(fresh(k))).is_ok()
    }
    fn read(&self, _: &(), k: u64) -> Got {
        self.0.read_sync(&k, |_, r| got_record(k, Some(&r[..]))).unwrap_or(Got::Miss)
    }
    fn update(&self, _: &(), k: u64, w: u64) -> Got {
        self.0.update_sync(&k, |_, r| in_place(k, &mut r[..], w, false)).unwrap_or(Got::Miss)
    }
    fn rmw(&self, _: &(), k: u64, w: u64) -> Got {
        self.0.update_sync(&k, |_, r| in_place(k, &mut r[..], w, true)).unwrap_or(Got::Miss)
    }
    fn counters(&self) -> u64 {
        let mut s = 0u64;
        self.0.iter_sync(|_, r| {
            s = s.wrapping_add(word_at(&r[..], 1));
            true
        });
        s
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

// ---------------------------------------------------------------------------
// Inserts of workload D, and its "latest" records.

/// Slots of the acknowledgement window (YCSB's AcknowledgedCounterGenerator
/// uses 2^20 too).
const WINDOW: usize = 1 << 20;

/// The records of a table and D's inserts into it, as YCSB's
/// AcknowledgedCounterGenerator: an insert claims the next index, inserts
/// it, then acknowledges it; `limit` is the count of indexes all of whose
/// predecessors are acknowledged, so every index below it is in the table
/// (the "latest" reads draw below it, and must all hit).
struct Grow {
    next: AtomicU64,
    limit: AtomicU64,
    window: Box<[AtomicBool]>,
    lock: AtomicBool,
}

impl Grow {
    fn new(records: u64) -> Grow {
        Grow {
            next: AtomicU64::new(records),
            limit: AtomicU64::new(records),
            window: (0..WINDOW).map(|_| AtomicBool::new(false)).collect(),
            lock: AtomicBool::new(false),
        }
    }

    /// The next index to insert (waits while the window is full).
    fn claim(&self) -> u64 {
        // Relaxed: the claim only hands out distinct numbers.
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        while i - self.limit.load(Ordering::Acquire) >= WINDOW as u64 {
            self.advance();
            std::hint::spin_loop();
        }
        i
    }

    /// Index `i` is in the table.
    fn ack(&self, i: u64) {
        // Release: the insert of `i` before whoever sees the flag.
        self.window[i as usize % WINDOW].store(true, Ordering::Release);
        self.advance();
    }

    /// Move `limit` over the acknowledged indexes, if no one else is.
    fn advance(&self) {
        if self.lock.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return;
        }
        let mut l = self.limit.load(Ordering::Relaxed);
        // Acquire: the inserts acknowledged, before the limit that covers them.
        while self.window[l as usize % WINDOW].load(Ordering::Acquire) {
            self.window[l as usize % WINDOW].store(false, Ordering::Relaxed);
            l += 1;
        }
        // Release: every insert below `l`, to whoever reads the limit.
        self.limit.store(l, Ordering::Release);
        self.lock.store(false, Ordering::Release);
    }

    /// Indexes below this are in the table.
    fn latest(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }
}

// ---------------------------------------------------------------------------
// Measurement.

/// Operations per [`Store::pin`], and 1 in this many is timed.
const CHUNK: usize = 64;

/// What a measurement's threads did, and what went wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tally {
    reads: u64,
    updates: u64,
    rmws: u64,
    inserts: u64,
    /// Reads, updates and RMWs of a key that must be present, absent.
    misses: u64,
    /// Values of another key, or torn records.
    bad: u64,
    /// Inserts of a fresh key that found it present.
    dup_inserts: u64,
}

impl Tally {
    fn count(&mut self, got: Got) {
        match got {
            Got::Hit => {}
            Got::Miss => self.misses += 1,
            Got::Bad => self.bad += 1,
        }
    }
    fn add(&mut self, o: &Tally) {
        self.reads += o.reads;
        self.updates += o.updates;
        self.rmws += o.rmws;
        self.inserts += o.inserts;
        self.misses += o.misses;
        self.bad += o.bad;
        self.dup_inserts += o.dup_inserts;
    }
    /// What failed, if anything.
    fn problems(&self) -> Option<String> {
        let mut v = Vec::new();
        if self.misses > 0 {
            v.push(format!("{} operations missed a key that must be present", self.misses));
        }
        if self.bad > 0 {
            v.push(format!("{} values were another key's or torn", self.bad));
        }
        if self.dup_inserts > 0 {
            v.push(format!("{} inserts of fresh keys found them present", self.dup_inserts));
        }
        (!v.is_empty()).then(|| v.join("; "))
    }
}

/// How long a measurement runs.
#[derive(Clone, Copy, Debug)]
enum Budget {
    Time(Duration),
    /// Operations per thread (rounded up to a chunk).
    Ops(u64),
}

/// Run `work` on `threads` threads (each with the state `init` built for
/// it before the clock starts) until the budget is spent: operations per
/// second over all threads, and each thread's final state.
fn drive<T: Send>(
    threads: usize,
    budget: Budget,
    init: impl Fn(usize) -> T + Sync,
    work: impl Fn(&mut T) -> u64 + Sync,
) -> (f64, Vec<T>) {
    // Relaxed: `stop` only ends the loops; the joins order the rest.
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(threads + 1);
    let (init, work) = (&init, &work);
    let (elapsed, done) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, ready) = (&stop, &ready);
                s.spawn(move || {
                    let mut state = init(t);
                    ready.wait();
                    let mut ops = 0;
                    match budget {
                        Budget::Time(_) => {
                            while !stop.load(Ordering::Relaxed) {
                                ops += work(&mut state);
                            }
                        }
                        Budget::Ops(n) => {
                            while ops < n {
                                ops += work(&mut state);
                            }
                        }
                    }
                    (ops, state)
                })
            })
            .collect();
        ready.wait();
        let start = Instant::now();
        if let Budget::Time(d) = budget {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        }
        let done: Vec<(u64, T)> = handles.into_iter().map(|h| h.join().expect("a worker panicked")).collect();
        (start.elapsed(), done)
    });
    let ops: u64 = done.iter().map(|(n, _)| n).sum();
    (ops as f64 / elapsed.as_secs_f64(), done.into_iter().map(|(_, s)| s).collect())
}

/// The key of record index `i` (the bench's keys: a bijection, so every
/// index has its own key).
fn key(i: u64) -> u64 {
    crate::compare::workloads::key(i)
}

/// The requests of one measurement.
#[derive(Clone, Copy)]
struct Plan<'a> {
    workload: Workload,
    dist: Distribution,
    records: u64,
    /// Scrambled Zipfian record indexes (A, B, C, F).
    scrambled: &'a [u32],
    /// Zipfian distances back from the latest record (D).
    latest: &'a [u32],
    threads: usize,
    budget: Budget,
    seed: u64,
}

/// A thread's place in the request streams.
struct Worker {
    /// Uniform record indexes.
    uniform: KeyStream,
    /// Operation choices and values.
    words: KeyStream,
    /// Its place in the traces.
    pos: usize,
    tally: Tally,
    hist: Histogram<u64>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 2).expect("valid bounds")
}

impl Plan<'_> {
    /// The record index of a read or update.
    #[inline(always)]
    fn index(&self, w: &mut Worker, grow: &Grow) -> u64 {
        match (self.workload, self.dist) {
            (Workload::D, Distribution::Zipfian) => {
                // YCSB's SkewedLatestGenerator: the latest minus a Zipfian
                // distance. The distances are drawn over the loaded records
                // (the trace), not over all records so far, which differ by
                // D's inserts (a few per cent).
                let last = grow.latest() - 1;
                let z = self.latest[w.pos % self.latest.len()] as u64;
                w.pos += 1;
                last - z.min(last)
            }
            (_, Distribution::Zipfian) => {
                let i = self.scrambled[w.pos % self.scrambled.len()] as u64;
                w.pos += 1;
                i
            }
            // Uniform over the loaded records, in D too (YCSB's uniform key
            // chooser covers insertstart..insertstart + insertcount).
            (_, Distribution::Uniform) => w.uniform.next_index(),
        }
    }

    /// One chunk of operations on `s`.
    fn chunk<S: Store>(&self, s: &S, grow: &Grow, w: &mut Worker) -> u64 {
        let p = s.pin();
        let timed = (w.words.next_word() % CHUNK as u64) as usize;
        let reads = self.workload.read_permille();
        let other = self.workload.other();
        for i in 0..CHUNK {
            let choice = w.words.next_word();
            let start = (i == timed).then(Instant::now);
            if choice % 1000 < reads {
                let k = key(self.index(w, grow));
                w.tally.reads += 1;
                w.tally.count(s.read(&p, k));
            } else {
                match other {
                    Other::Update => {
                        let k = key(self.index(w, grow));
                        w.tally.updates += 1;
                        w.tally.count(s.update(&p, k, w.words.next_word()));
                    }
                    Other::Rmw => {
                        let k = key(self.index(w, grow));
                        w.tally.rmws += 1;
                        w.tally.count(s.rmw(&p, k, w.words.next_word()));
                    }
                    Other::Insert => {
                        let i = grow.claim();
                        w.tally.inserts += 1;
                        if !s.insert(&p, key(i)) {
                            w.tally.dup_inserts += 1;
                        }
                        grow.ack(i);
                    }
                }
            }
            if let Some(start) = start {
                w.hist.saturating_record(start.elapsed().as_nanos() as u64);
            }
        }
        CHUNK as u64
    }
}

/// One measurement's figures.
struct Point {
    mops: f64,
    hist: Histogram<u64>,
    tally: Tally,
}

/// A table and its growth, measured as one system.
struct Sys<S> {
    name: &'static str,
    store: S,
    grow: Grow,
}

/// A system of either shape, for the interleaved plan.
trait Bench: Sync {
    fn name(&self) -> &'static str;
    /// Load `records` records on `threads` threads: M records/s.
    fn load(&self, records: u64, threads: usize) -> Result<f64, String>;
    /// One measurement, checked.
    fn measure(&self, plan: &Plan<'_>) -> Result<Point, String>;
}

impl<S: Store> Bench for Sys<S> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn load(&self, records: u64, threads: usize) -> Result<f64, String> {
        let threads = threads.max(1);
        let (rate, dups) = drive(
            threads,
            Budget::Ops(1),
            |t| (t as u64, 0u64),
            |(t, dups)| {
                let p = self.store.pin();
                let mut i = *t;
                let mut done = 0;
                while i < records {
                    if !self.store.insert(&p, key(i)) {
                        *dups += 1;
                    }
                    i += threads as u64;
                    done += 1;
                }
                done.max(1)
            },
        );
        let dups: u64 = dups.iter().map(|(_, d)| d).sum();
        let len = self.store.len() as u64;
        if dups > 0 || len != records {
            return Err(format!("{}: load: {dups} duplicate inserts, {len} records of {records}", self.name));
        }
        Ok(rate / 1e6)
    }

    fn measure(&self, plan: &Plan<'_>) -> Result<Point, String> {
        let rmw = plan.workload == Workload::F;
        let before = if rmw { self.store.counters() } else { 0 };
        // Relaxed: no measurement runs.
        let from = self.grow.next.load(Ordering::Relaxed);
        let (rate, workers) = drive(
            plan.threads,
            plan.budget,
            |t| {
                let seed = plan.seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let uniform = KeyStream::new(plan.records, seed);
                let mut words = KeyStream::new(1, seed ^ 0x776f_7264);
                let pos = (words.next_word() % plan.scrambled.len().max(1) as u64) as usize;
                Worker { uniform, words, pos, tally: Tally::default(), hist: histogram() }
            },
            |w| plan.chunk(&self.store, &self.grow, w),
        );
        let mut tally = Tally::default();
        let mut hist = histogram();
        for w in &workers {
            tally.add(&w.tally);
            hist.add(&w.hist).expect("same bounds");
        }
        let mut problems: Vec<String> = tally.problems().into_iter().collect();
        if rmw {
            let grew = self.store.counters().wrapping_sub(before);
            if grew != tally.rmws {
                problems.push(format!("the counters grew by {grew} for {} RMWs", tally.rmws));
            }
        }
        // Every insert is acknowledged now the threads are done.
        self.grow.advance();
        let (next, limit) = (self.grow.next.load(Ordering::Relaxed), self.grow.latest());
        if next != limit {
            problems.push(format!("{next} records claimed, {limit} acknowledged"));
        }
        if next > from {
            let p = self.store.pin();
            let lost = (from..next).filter(|&i| self.store.read(&p, key(i)) != Got::Hit).count();
            if lost > 0 {
                problems.push(format!("{lost} of the {} records inserted are not readable", next - from));
            }
        }
        let len = self.store.len() as u64;
        if len != next {
            problems.push(format!("the table holds {len} records, {next} were loaded or inserted"));
        }
        if problems.is_empty() {
            Ok(Point { mops: rate / 1e6, hist, tally })
        } else {
            Err(format!(
                "{} ({} {} on {} threads): {}",
                self.name,
                plan.workload.name(),
                plan.dist.name(plan.workload),
                plan.threads,
                problems.join("; ")
            ))
        }
    }
}

fn sys<S: Store + 'static>(name: &'static str, store: S, records: u64) -> Box<dyn Bench> {
    Box::new(Sys { name, store, grow: Grow::new(records) })
}

/// A fresh, presized table of `system` in `shape`.
fn build(shape: Shape, system: &str, n: u64) -> Option<Box<dyn Bench>> {
    let c = n as usize;
    Some(match (shape, system) {
        (Shape::Word, "dlht") => sys("dlht", DlhtWord(dlht::Map::with_capacity(c)), n),
        (Shape::Word, "papaya") => {
            sys("papaya", PapayaWord(papaya::HashMap::with_capacity_and_hasher(c, H::default())), n)
        }
        (Shape::Word, "dashmap") => {
            sys("dashmap", DashWord(dashmap::DashMap::with_capacity_and_hasher(c, H::default())), n)
        }
        (Shape::Word, "scc") => {
            sys("scc", SccWord(scc::HashMap::with_capacity_and_hasher(c, H::default())), n)
        }
        (Shape::Fields, "dlht-alloc") => sys("dlht-alloc", DlhtAlloc(dlht::AllocMap::with_capacity(c)), n),
        (Shape::Fields, "dlht-bytes") => sys("dlht-bytes", DlhtBytes(dlht::ByteMap::with_capacity(c)), n),
        (Shape::Fields, "papaya") => {
            sys("papaya", PapayaRec(papaya::HashMap::with_capacity_and_hasher(c, H::default())), n)
        }
        (Shape::Fields, "dashmap") => {
            sys("dashmap", DashRec(dashmap::DashMap::with_capacity_and_hasher(c, H::default())), n)
        }
        (Shape::Fields, "scc") => {
            sys("scc", SccRec(scc::HashMap::with_capacity_and_hasher(c, H::default())), n)
        }
        _ => return None,
    })
}

fn is_dlht(name: &str) -> bool {
    name.starts_with("dlht")
}

/// Anonymous resident bytes of this process.
fn rss_bytes() -> f64 {
    compare::proc_bytes("/proc/self/status", "RssAnon:").unwrap_or(0) as f64
}

/// Hand the allocator's free pages back to the system (glibc's
/// `malloc_trim`), so that a table's resident delta counts the pages it
/// touches, not fewer: without it, pages an earlier table freed stay
/// resident and are reused uncounted (a 1000-byte record measured 926
/// bytes).
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only releases free heap memory back to the
        // system; it touches no allocation in use.
        unsafe { malloc_trim(0) };
    }
}

// ---------------------------------------------------------------------------
// The study.

/// One row of results: a system at one point.
#[derive(Serialize)]
struct Row {
    shape: &'static str,
    workload: &'static str,
    distribution: &'static str,
    threads: usize,
    system: &'static str,
    mops: Spread,
    p50_ns: u64,
    p99_ns: u64,
    /// For a dlht system: its median ÷ the best peer's median.
    dlht_over_best_peer: Option<f64>,
    best_peer: Option<&'static str>,
    /// Operations of each kind over the rounds.
    reads: u64,
    updates: u64,
    rmws: u64,
    inserts: u64,
}

/// A system's load.
#[derive(Serialize)]
struct LoadRow {
    shape: &'static str,
    system: &'static str,
    records: u64,
    threads: usize,
    load_mops: f64,
    resident_bytes_per_record: f64,
}

#[derive(Serialize)]
struct Report<'a> {
    seconds: Option<f64>,
    ops_per_thread: Option<u64>,
    rounds: u32,
    zipf_theta: f64,
    workload_e: &'a str,
    loads: &'a [LoadRow],
    rows: &'a [Row],
}

const NO_E: &str = "not supported: E scans the next N keys in key order, and dlht's maps (like papaya, dashmap and scc) are hash tables with no key order";

/// Per-round results of every system at one point.
type Rounds = Vec<Vec<Result<Point, String>>>;

/// Run every system once per round, forward in even rounds and backward in
/// odd ones; `results[system][round]`.
fn interleave(systems: &[Box<dyn Bench>], plan: &Plan<'_>, rounds: u32, bar: &Progress) -> Rounds {
    let mut out: Rounds = systems.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for i in super::round_order(systems.len(), r as usize) {
            bar.set_message(format!(
                "{} {} on {} thread(s), round {}/{rounds}: {}",
                plan.workload.name(),
                plan.dist.name(plan.workload),
                plan.threads,
                r + 1,
                systems[i].name()
            ));
            let seeded = Plan { seed: plan.seed ^ (r as u64) << 48, ..*plan };
            out[i].push(systems[i].measure(&seeded));
            bar.inc(1);
        }
    }
    out
}

/// The YCSB study. True if a check of a dlht system failed.
pub fn run(a: YcsbArgs) -> bool {
    let machine = crate::harness::machine::Machine::describe();
    println!("# dlht-bench ycsb: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    println!("# workload E: {NO_E}");
    println!("# requests: YCSB's scrambled Zipfian (θ = {THETA}, Gray et al. over 10^10 items, FNV-hashed onto the records), D's latest (Zipfian distance back from the newest acknowledged insert), or uniform; GrowT and Boost are not run (u64-pair adapters, no atomic update)");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let max_threads = match (a.threads, a.smoke) {
        (Some(t), true) => (t as usize).min(2),
        (Some(t), false) => t as usize,
        (None, true) => 2.min(cores.max(1)),
        (None, false) => cores,
    };
    let budget = match a.ops {
        Some(n) => Budget::Ops(n),
        None => Budget::Time(Duration::from_secs_f64(if a.smoke { 0.01 } else { a.seconds })),
    };
    let rounds = if a.smoke { a.rounds.min(2) } else { a.rounds };
    let wanted: Vec<String> = match (&a.systems, a.smoke) {
        (Some(s), _) => s.clone(),
        (None, true) => ["dlht", "dlht-alloc", "dlht-bytes", "dashmap"].map(String::from).to_vec(),
        (None, false) => {
            ["dlht", "dlht-alloc", "dlht-bytes", "papaya", "dashmap", "scc"].map(String::from).to_vec()
        }
    };
    for w in &wanted {
        if !Shape::Word.systems().contains(&w.as_str()) && !Shape::Fields.systems().contains(&w.as_str()) {
            eprintln!("error: unknown system {w:?} (dlht, dlht-alloc, dlht-bytes, papaya, dashmap, scc)");
            return true;
        }
    }
    // D last: it grows the tables.
    let mut workloads = a.workloads.clone();
    workloads.sort_by_key(|w| *w == Workload::D);
    workloads.dedup();
    let mixes: Vec<String> = workloads.iter().map(|w| format!("{} ({})", w.name(), w.mix())).collect();
    println!("# workloads: {}", mixes.join(", "));
    let mut failed = false;
    let mut loads = Vec::new();
    let mut rows = Vec::new();
    for &shape in &a.shapes {
        let names: Vec<&'static str> =
            shape.systems().iter().copied().filter(|s| wanted.iter().any(|w| w == s)).collect();
        if names.is_empty() {
            continue;
        }
        let records = if a.smoke { 1 << 12 } else { a.records.unwrap_or(shape.default_records()) };
        let len = if a.smoke { 1 << 14 } else { 1 << 22 };
        let loading =
            Progress::phase("Loading", format!("{} records: drawing the request traces", shape.name()));
        let scrambler = ScrambledZipfian::new(records);
        let scrambled = trace(len, a.seed, |u| scrambler.value(u));
        let distances = Zipfian::new(records, THETA);
        let latest = trace(len, a.seed ^ 1, |u| distances.value(u));
        let mut systems: Vec<Box<dyn Bench>> = Vec::new();
        for name in &names {
            loading.set_message(format!("{} records into {name}", records));
            trim();
            let before = rss_bytes();
            let s = build(shape, name, records).expect("a known system");
            match s.load(records, max_threads) {
                Ok(mops) => {
                    let per = (rss_bytes() - before) / records as f64;
                    loading.println(format!(
                        "load {} {name}: {records} records on {max_threads} thread(s), {mops:.2} M/s, {per:.0} resident bytes per record",
                        shape.name()
                    ));
                    loads.push(LoadRow {
                        shape: shape.name(),
                        system: name,
                        records,
                        threads: max_threads,
                        load_mops: mops,
                        resident_bytes_per_record: per,
                    });
                    systems.push(s);
                }
                Err(e) => {
                    eprintln!("check failed{}: {e}", if is_dlht(name) { "" } else { " (a peer; left out)" });
                    failed |= is_dlht(name);
                }
            }
        }
        drop(loading);
        let steps = workloads.len() * a.distribution.len() * max_threads * rounds as usize * systems.len();
        let bar = Progress::new("Running", steps as u64, "steps");
        for &workload in &workloads {
            for &dist in &a.distribution {
                for threads in 1..=max_threads {
                    let plan = Plan {
                        workload,
                        dist,
                        records,
                        scrambled: &scrambled,
                        latest: &latest,
                        threads,
                        budget,
                        seed: a.seed,
                    };
                    let got = interleave(&systems, &plan, rounds, &bar);
                    let (line, new_rows, bad) = summarize(shape, &plan, &systems, got);
                    bar.println(line);
                    rows.extend(new_rows);
                    failed |= bad;
                }
            }
        }
        drop(bar);
    }
    print_table(&rows, &loads);
    let (seconds, ops) = match budget {
        Budget::Time(d) => (Some(d.as_secs_f64()), None),
        Budget::Ops(n) => (None, Some(n)),
    };
    println!(
        "# medians (min–max) over {rounds} interleaved rounds of {}; dlht ÷ best peer: of the medians; latency: 1 op in {CHUNK} timed; every read, update and RMW checked, F's counters and D's inserts verified after each measurement",
        match budget {
            Budget::Time(d) => format!("{:.2} s", d.as_secs_f64()),
            Budget::Ops(n) => format!("{n} ops per thread"),
        }
    );
    let report = Report {
        seconds,
        ops_per_thread: ops,
        rounds,
        zipf_theta: THETA,
        workload_e: NO_E,
        loads: &loads,
        rows: &rows,
    };
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    let files = [("ycsb.csv", csv(&rows)), ("ycsb-load.csv", load_csv(&loads)), ("ycsb.json", json)];
    super::save_app(a.out, "ycsb", &machine, &files);
    failed
}

/// The rows of one point, its summary line, and whether a dlht check failed.
fn summarize(
    shape: Shape,
    plan: &Plan<'_>,
    systems: &[Box<dyn Bench>],
    got: Rounds,
) -> (String, Vec<Row>, bool) {
    let mut failed = false;
    let mut notes = Vec::new();
    let mut rows = Vec::new();
    for (s, results) in systems.iter().zip(got) {
        let mut mops = Vec::new();
        let mut hist = histogram();
        let mut tally = Tally::default();
        for r in results {
            match r {
                Ok(p) => {
                    mops.push(p.mops);
                    hist.add(&p.hist).expect("same bounds");
                    tally.add(&p.tally);
                }
                Err(e) => {
                    let dlht = is_dlht(s.name());
                    notes.push(format!("check failed{}: {e}", if dlht { "" } else { " (a peer; left out)" }));
                    failed |= dlht;
                }
            }
        }
        if let Some(spread) = Spread::of(&mops) {
            rows.push(Row {
                shape: shape.name(),
                workload: plan.workload.name(),
                distribution: plan.dist.name(plan.workload),
                threads: plan.threads,
                system: s.name(),
                mops: spread,
                p50_ns: hist.value_at_quantile(0.5),
                p99_ns: hist.value_at_quantile(0.99),
                dlht_over_best_peer: None,
                best_peer: None,
                reads: tally.reads,
                updates: tally.updates,
                rmws: tally.rmws,
                inserts: tally.inserts,
            });
        }
    }
    let best = rows
        .iter()
        .filter(|r| !is_dlht(r.system))
        .max_by(|a, b| a.mops.median.total_cmp(&b.mops.median))
        .map(|r| (r.system, r.mops.median));
    if let Some((peer, m)) = best {
        for r in rows.iter_mut().filter(|r| is_dlht(r.system)) {
            r.dlht_over_best_peer = Some(r.mops.median / m);
            r.best_peer = Some(peer);
        }
    }
    let mut line = format!(
        "{} {} {} {}t:",
        shape.name(),
        plan.workload.name(),
        plan.dist.name(plan.workload),
        plan.threads
    );
    for r in &rows {
        let _ = write!(line, " {} {:.2} M/s (p50 {} p99 {} ns)", r.system, r.mops.median, r.p50_ns, r.p99_ns);
        if let (Some(x), Some(p)) = (r.dlht_over_best_peer, r.best_peer) {
            let _ = write!(line, " ×{x:.2} vs {p}");
        }
        line.push(';');
    }
    line.push_str(if notes.is_empty() { " checks ok" } else { " CHECK FAILED" });
    for n in notes {
        eprintln!("{n}");
    }
    (line, rows, failed)
}

fn print_table(rows: &[Row], loads: &[LoadRow]) {
    println!(
        "\n{:<7} {:>5} {:>10} {:>10} {:<6} {:<12} {:>22} {:>8} {:>8} {:>16}",
        "shape", "threads", "system", "M rec/s", "", "", "", "", "", "bytes/record"
    );
    for l in loads {
        println!(
            "{:<7} {:>5} {:>10} {:>10.2} {:<6} {:<12} {:>22} {:>8} {:>8} {:>16.0}",
            l.shape, l.threads, l.system, l.load_mops, "load", "", "", "", "", l.resident_bytes_per_record
        );
    }
    println!(
        "\n{:<7} {:>3} {:<8} {:>7} {:<11} {:>22} {:>8} {:>8} {:>16}",
        "shape", "wl", "dist", "threads", "system", "M ops/s", "p50 ns", "p99 ns", "dlht ÷ best peer"
    );
    for r in rows {
        println!(
            "{:<7} {:>3} {:<8} {:>7} {:<11} {:>22} {:>8} {:>8} {:>16}",
            r.shape,
            r.workload,
            r.distribution,
            r.threads,
            r.system,
            r.mops.show(2),
            r.p50_ns,
            r.p99_ns,
            match (r.dlht_over_best_peer, r.best_peer) {
                (Some(x), Some(p)) => format!("{x:.2} ({p})"),
                _ => String::new(),
            }
        );
    }
}

fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "shape,workload,distribution,threads,system,mops,mops_min,mops_max,p50_ns,p99_ns,dlht_over_best_peer,best_peer,reads,updates,rmws,inserts\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.4},{:.4},{:.4},{},{},{},{},{},{},{},{}",
            r.shape,
            r.workload,
            r.distribution,
            r.threads,
            r.system,
            r.mops.median,
            r.mops.min,
            r.mops.max,
            r.p50_ns,
            r.p99_ns,
            r.dlht_over_best_peer.map_or(String::new(), |x| format!("{x:.4}")),
            r.best_peer.unwrap_or(""),
            r.reads,
            r.updates,
            r.rmws,
            r.inserts
        );
    }
    s
}

fn load_csv(loads: &[LoadRow]) -> String {
    let mut s = String::from("shape,system,records,threads,load_mops,resident_bytes_per_record\n");
    for l in loads {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.4},{:.1}",
            l.shape, l.system, l.records, l.threads, l.load_mops, l.resident_bytes_per_record
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_ycsb() {
        // FNV-1a of eight zero bytes, as YCSB's fnvhash64(0) computes it.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnv64(0), (h as i64).wrapping_abs() as u64);
        assert!(fnv64(12345) < 1 << 63);
    }

    #[test]
    fn zipfian_follows_its_law() {
        // Over 1000 items the hottest item's share is 1 / zeta(1000).
        let z = Zipfian::new(1000, THETA);
        let n = 200_000;
        let t = trace(n, 3, |u| z.value(u));
        assert!(t.iter().all(|&v| v < 1000));
        let share0 = t.iter().filter(|&&v| v == 0).count() as f64 / n as f64;
        let want = 1.0 / zeta(0, 1000, THETA, 0.0);
        assert!((share0 - want).abs() < 0.01, "share of item 0: {share0}, want {want}");
        // The scrambled generator spreads the hot items over the records.
        let s = ScrambledZipfian::new(1 << 12);
        let t = trace(n, 4, |u| s.value(u));
        assert!(t.iter().all(|&v| v < 1 << 12));
        let mut counts = vec![0u32; 1 << 12];
        t.iter().for_each(|&v| counts[v as usize] += 1);
        let hottest = counts.iter().enumerate().max_by_key(|(_, c)| **c).map(|(i, _)| i as u64);
        assert_eq!(hottest, Some(fnv64(0) % (1 << 12)));
    }

    #[test]
    fn records_detect_tearing() {
        let mut r = fresh(7);
        assert!(intact(&r, 7));
        assert!(!intact(&r, 8));
        let old = r;
        rewrite(&mut r, 99, true);
        assert!(intact(&r, 7));
        assert_eq!(word_at(&r, 1), 1);
        // Half of the new record over the old one.
        let mut torn = old;
        torn[..500].copy_from_slice(&r[..500]);
        assert!(old != r && !intact(&torn, 7));
    }

    fn check_all(shape: Shape) {
        let records = 1 << 10;
        let scrambler = ScrambledZipfian::new(records);
        let scrambled = trace(1 << 12, 1, |u| scrambler.value(u));
        let z = Zipfian::new(records, THETA);
        let latest = trace(1 << 12, 2, |u| z.value(u));
        for name in shape.systems() {
            let s = build(shape, name, records).unwrap();
            s.load(records, 2).unwrap();
            for workload in [Workload::A, Workload::B, Workload::C, Workload::F, Workload::D] {
                for dist in [Distribution::Zipfian, Distribution::Uniform] {
                    let plan = Plan {
                        workload,
                        dist,
                        records,
                        scrambled: &scrambled,
                        latest: &latest,
                        threads: 2,
                        budget: Budget::Ops(2000),
                        seed: 5,
                    };
                    let p = s.measure(&plan).unwrap_or_else(|e| panic!("{e}"));
                    assert!(p.tally.reads > 0 && p.mops > 0.0);
                    if workload == Workload::F {
                        assert!(p.tally.rmws > 0);
                    }
                    if workload == Workload::D {
                        assert!(p.tally.inserts > 0);
                    }
                }
            }
        }
    }

    #[test]
    fn every_word_system_passes_every_workload() {
        check_all(Shape::Word);
    }

    #[test]
    fn every_record_system_passes_every_workload() {
        check_all(Shape::Fields);
    }

    #[test]
    fn a_lost_increment_and_a_wrong_value_are_caught() {
        /// dlht, dropping every 100th RMW and answering one read with another key's value.
        struct Faulty(DlhtWord, AtomicU64);
        impl Store for Faulty {
            type Pin<'a> = ();
            fn pin(&self) {}
            fn insert(&self, p: &(), k: u64) -> bool {
                self.0.insert(p, k)
            }
            fn read(&self, p: &(), k: u64) -> Got {
                if self.1.fetch_add(1, Ordering::Relaxed) == 10 {
                    return got_word(k, self.0 .0.get(&k).map(|v| v ^ 1 << 40));
                }
                self.0.read(p, k)
            }
            fn update(&self, p: &(), k: u64, w: u64) -> Got {
                self.0.update(p, k, w)
            }
            fn rmw(&self, p: &(), k: u64, w: u64) -> Got {
                if self.1.fetch_add(1, Ordering::Relaxed) % 100 == 99 {
                    return Got::Hit;
                }
                self.0.rmw(p, k, w)
            }
            fn counters(&self) -> u64 {
                self.0.counters()
            }
            fn len(&self) -> usize {
                self.0.len()
            }
        }
        let records = 1 << 10;
        let s = Sys {
            name: "faulty",
            store: Faulty(DlhtWord(dlht::Map::new()), AtomicU64::new(0)),
            grow: Grow::new(records),
        };
        s.load(records, 1).unwrap();
        let scrambler = ScrambledZipfian::new(records);
        let scrambled = trace(1 << 12, 1, |u| scrambler.value(u));
        let plan = Plan {
            workload: Workload::F,
            dist: Distribution::Uniform,
            records,
            scrambled: &scrambled,
            latest: &scrambled,
            threads: 1,
            budget: Budget::Ops(4096),
            seed: 1,
        };
        let e = s.measure(&plan).err().expect("caught");
        assert!(e.contains("counters grew") && e.contains("another key"), "{e}");
    }
}
