//! Key and value sizes (paper Figs. 9 and 10): dlht's allocator mode
//! (`AllocMap`) against the peers that hold keys and values of any size,
//! on memory-resident tables, in interleaved rounds.
//!
//! - value sweep: 8-byte keys, values of 8 B … 1.5 KB; Find (the value is
//!   located, not read: the paper's Get, which returns a pointer), Get (its
//!   first byte read), Get-Access (every byte of the value read), InsDel
//!   (insert a fresh key with a value, remove it);
//! - key sweep: keys of 8 … 256 B, 8-byte values; Find, Get and InsDel.
//!
//! Keys and values are byte arrays (`[u8; N]`): each system stores them as
//! it stores any value type (dlht-alloc: one allocation per entry, the key
//! in it; papaya: one per entry; dashmap and scc: inline in their buckets).
//! `dlht-bytes` is dlht's byte-string map with the paper's slot layout: a
//! key of at most 8 bytes lives in the slot, so Find takes one memory
//! access and Get two; longer keys are compared in their allocation. The
//! `-batch` systems are the same dlht tables read through `get_many` in
//! batches of 32. Each system uses its own default hasher. Every get is
//! checked (a miss of a present key is a failure, not a count).

use crate::compare;
use crate::harness::{self, Spread};
use crate::progress::Progress;
use crate::studies::write;
use serde::Serialize;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

/// Options of the size study.
#[derive(clap::Args, Clone, Debug)]
pub struct SizeArgs {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 0.5, value_parser = compare::positive_seconds)]
    pub seconds: f64,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Memory for all systems' tables of one size together, in GiB: the
    /// key count is the largest power of two that fits (at most 2^22).
    #[arg(long, default_value_t = 8.0)]
    pub memory_gib: f64,
    /// Folder for sizes.csv and sizes.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny tables, a few seconds.
    #[arg(long)]
    pub smoke: bool,
}

/// A key or value of N bytes, derived from a number (the first 8 bytes are
/// its little-endian bytes, so distinct numbers give distinct keys).
fn bytes<const N: usize>(i: u64) -> [u8; N] {
    let mut b = [0x5a; N];
    let le = i.to_le_bytes();
    let n = N.min(8);
    b[..n].copy_from_slice(&le[..n]);
    b
}

/// What a get reads of the value it finds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Touch {
    /// Nothing: the value is only located (its address kept).
    Nothing,
    /// Its first byte.
    First,
    /// Every byte.
    All,
}

/// Sum of a value's 8-byte words: reads every byte (Get-Access).
#[inline]
fn touch_all(v: &[u8]) -> u64 {
    v.chunks(8).map(|c| c.iter().fold(0u64, |a, &b| a.wrapping_mul(31).wrapping_add(b as u64))).sum()
}

/// What a get of `v` returns, per `t`; `v` is only dereferenced if `t`
/// reads it.
#[inline]
fn read_value<V: AsRef<[u8]> + ?Sized>(v: &V, t: Touch) -> u64 {
    match t {
        Touch::Nothing => {
            black_box(v as *const V);
            1
        }
        Touch::First => v.as_ref()[0] as u64,
        Touch::All => touch_all(v.as_ref()),
    }
}

/// The operations the sweep needs, on one table of `[u8; KB]` → `[u8; VB]`.
trait SizedTable<const KB: usize, const VB: usize>: Sync {
    fn name(&self) -> &'static str;
    /// False for a view of another system's table (not populated again).
    fn owns_table(&self) -> bool {
        true
    }
    /// Gets of `keys` as one batch, if the system has batches: the sum of
    /// what [`get`](Self::get) would return, and the misses.
    fn get_batch(&self, _keys: &[[u8; KB]], _touch: Touch) -> Option<(u64, u64)> {
        None
    }
    /// What a get of `k` reads of its value ([`read_value`]); None if
    /// absent.
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64>;
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool;
    fn remove(&self, k: &[u8; KB]) -> bool;
}

struct Dlht<const KB: usize, const VB: usize>(dlht::AllocMap<[u8; KB], [u8; VB]>);

impl<const KB: usize, const VB: usize> SizedTable<KB, VB> for Dlht<KB, VB> {
    fn name(&self) -> &'static str {
        "dlht-alloc"
    }
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64> {
        let g = self.0.guard();
        self.0.get(k, &g).map(|v| read_value(v, touch))
    }
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool {
        self.0.insert(k, v, &self.0.guard()).is_ok()
    }
    fn remove(&self, k: &[u8; KB]) -> bool {
        self.0.remove(k, &self.0.guard()).is_some()
    }
}

/// dlht's allocator mode through `get_many` (batches of `BATCH`, entries
/// prefetched; with access, values too), on the `dlht-alloc` table.
struct DlhtBatch<'a, const KB: usize, const VB: usize>(&'a Dlht<KB, VB>);

/// Requests per batch (the paper's default).
const BATCH: usize = 32;

impl<const KB: usize, const VB: usize> SizedTable<KB, VB> for DlhtBatch<'_, KB, VB> {
    fn name(&self) -> &'static str {
        "dlht-alloc-batch"
    }
    fn owns_table(&self) -> bool {
        false
    }
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64> {
        self.0.get(k, touch)
    }
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool {
        self.0.insert(k, v)
    }
    fn remove(&self, k: &[u8; KB]) -> bool {
        self.0.remove(k)
    }
    fn get_batch(&self, keys: &[[u8; KB]], touch: Touch) -> Option<(u64, u64)> {
        let g = self.0 .0.guard();
        let refs: [&[u8; KB]; BATCH] = core::array::from_fn(|i| &keys[i]);
        let mut out = [None; BATCH];
        self.0 .0.get_many(&refs, &mut out, access_of(touch), &g).expect("lengths agree");
        Some(sum_values(out.iter().map(|v| v.map(|v| read_value(v, touch)))))
    }
}

/// What a batch prefetches for a get that reads `touch` of its values.
fn access_of(touch: Touch) -> dlht::Access {
    match touch {
        Touch::Nothing => dlht::Access::Locate,
        Touch::First => dlht::Access::Key,
        Touch::All => dlht::Access::Read,
    }
}

/// The sum of a batch's results, and its misses.
fn sum_values(got: impl Iterator<Item = Option<u64>>) -> (u64, u64) {
    let (mut sum, mut miss) = (0u64, 0u64);
    for v in got {
        match v {
            Some(v) => sum = sum.wrapping_add(v),
            None => miss += 1,
        }
    }
    (sum, miss)
}

/// dlht's byte-string map: keys of at most 8 bytes in the slots.
struct Bytes(dlht::ByteMap);

impl<const KB: usize, const VB: usize> SizedTable<KB, VB> for Bytes {
    fn name(&self) -> &'static str {
        "dlht-bytes"
    }
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64> {
        let g = self.0.guard();
        self.0.get(k, &g).map(|v| read_value(&v, touch))
    }
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool {
        self.0.insert(&k, &v, &self.0.guard()).expect("lengths fit, memory given").is_ok()
    }
    fn remove(&self, k: &[u8; KB]) -> bool {
        self.0.remove(k, &self.0.guard()).is_some()
    }
}

/// `dlht-bytes` through `get_many`.
struct BytesBatch<'a>(&'a Bytes);

impl<const KB: usize, const VB: usize> SizedTable<KB, VB> for BytesBatch<'_> {
    fn name(&self) -> &'static str {
        "dlht-bytes-batch"
    }
    fn owns_table(&self) -> bool {
        false
    }
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64> {
        SizedTable::<KB, VB>::get(self.0, k, touch)
    }
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool {
        SizedTable::<KB, VB>::insert(self.0, k, v)
    }
    fn remove(&self, k: &[u8; KB]) -> bool {
        SizedTable::<KB, VB>::remove(self.0, k)
    }
    fn get_batch(&self, keys: &[[u8; KB]], touch: Touch) -> Option<(u64, u64)> {
        let g = self.0 .0.guard();
        let refs: [&[u8]; BATCH] = core::array::from_fn(|i| &keys[i][..]);
        let mut out = [None; BATCH];
        self.0 .0.get_many(&refs, &mut out, access_of(touch), &g).expect("lengths agree");
        Some(sum_values(out.iter().map(|v| v.map(|v| read_value(&v, touch)))))
    }
}

struct Papaya<const KB: usize, const VB: usize>(papaya::HashMap<[u8; KB], [u8; VB]>);

impl<const KB: usize, const VB: usize> SizedTable<KB, VB> for Papaya<KB, VB> {
    fn name(&self) -> &'static str {
        "papaya"
    }
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64> {
        let m = self.0.pin();
        m.get(k).map(|v| read_value(v, touch))
    }
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool {
        self.0.pin().try_insert(k, v).is_ok()
    }
    fn remove(&self, k: &[u8; KB]) -> bool {
        self.0.pin().remove(k).is_some()
    }
}

struct Dash<const KB: usize, const VB: usize>(dashmap::DashMap<[u8; KB], [u8; VB]>);

impl<const KB: usize, const VB: usize> SizedTable<KB, VB> for Dash<KB, VB> {
    fn name(&self) -> &'static str {
        "dashmap"
    }
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64> {
        self.0.get(k).map(|v| read_value(&*v, touch))
    }
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool {
        match self.0.entry(k) {
            dashmap::Entry::Occupied(_) => false,
            dashmap::Entry::Vacant(e) => {
                e.insert(v);
                true
            }
        }
    }
    fn remove(&self, k: &[u8; KB]) -> bool {
        self.0.remove(k).is_some()
    }
}

struct Scc<const KB: usize, const VB: usize>(scc::HashMap<[u8; KB], [u8; VB]>);

impl<const KB: usize, const VB: usize> SizedTable<KB, VB> for Scc<KB, VB> {
    fn name(&self) -> &'static str {
        "scc"
    }
    fn get(&self, k: &[u8; KB], touch: Touch) -> Option<u64> {
        self.0.read_sync(k, |_, v| read_value(v, touch))
    }
    fn insert(&self, k: [u8; KB], v: [u8; VB]) -> bool {
        self.0.insert_sync(k, v).is_ok()
    }
    fn remove(&self, k: &[u8; KB]) -> bool {
        self.0.remove_sync(k).is_some()
    }
}

/// One row of results.
#[derive(Serialize)]
struct Row {
    sweep: &'static str,
    key_bytes: usize,
    value_bytes: usize,
    keys: u64,
    workload: &'static str,
    system: &'static str,
    mops: Spread,
    /// Per-round ratio dlht-alloc ÷ this system (1 for dlht-alloc).
    dlht_over: Spread,
}

/// The workloads of one sweep point.
#[derive(Clone, Copy)]
enum Work {
    Find,
    Get,
    GetAccess,
    InsDel,
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Work::Find => "find",
            Work::Get => "get",
            Work::GetAccess => "get-access",
            Work::InsDel => "insdel",
        }
    }
}

/// Measure every system at one (key size, value size) point.
fn point<const KB: usize, const VB: usize>(
    a: &SizeArgs,
    sweep: &'static str,
    works: &[Work],
    rows: &mut Vec<Row>,
    bar: &Progress,
) -> Result<(), String> {
    let per_entry = (KB + VB + 64) as f64;
    let budget = a.memory_gib * (1u64 << 30) as f64 / 5.0;
    let keys: u64 = if a.smoke { 1 << 12 } else { ((budget / per_entry) as u64).clamp(1 << 12, 1 << 22) };
    let keys = 1u64 << (63 - keys.leading_zeros());
    let n = keys as usize;
    let dlht = Dlht(dlht::AllocMap::with_capacity(n));
    let batch = DlhtBatch(&dlht);
    let bytes_map = Bytes(dlht::ByteMap::with_capacity(n));
    let bytes_batch = BytesBatch(&bytes_map);
    let papaya = Papaya(papaya::HashMap::with_capacity(n));
    let dash = Dash(dashmap::DashMap::with_capacity(n));
    let scc = Scc(scc::HashMap::with_capacity(n));
    let systems: Vec<&dyn SizedTable<KB, VB>> =
        vec![&dlht, &batch, &bytes_map, &bytes_batch, &papaya, &dash, &scc];
    let at = format!("key {KB} B, value {VB} B");
    for &s in systems.iter().filter(|s| s.owns_table()) {
        bar.set_message(format!("{at}: populating {} with {keys} keys", s.name()));
        std::thread::scope(|sc| {
            for t in 0..2u64 {
                sc.spawn(move || {
                    for i in (t..keys).step_by(2) {
                        assert!(s.insert(bytes(i), bytes(i)), "{}: populating", s.name());
                    }
                });
            }
        });
    }
    let dur = Duration::from_secs_f64(if a.smoke { 0.02 } else { a.seconds });
    let threads = a.threads.max(1);
    for &w in works {
        let mut steps: Vec<harness::Step<'_>> = systems
            .iter()
            .map(|&s| {
                let step: harness::Step<'_> = Box::new(move |round| measure(s, w, keys, threads, dur, round));
                step
            })
            .collect();
        let got = harness::rounds(&mut steps, a.rounds as usize, |i, r| {
            bar.set_message(format!(
                "{at}: round {}/{}: {} {}",
                r + 1,
                a.rounds,
                systems[i].name(),
                w.name()
            ));
            bar.inc(1);
        });
        drop(steps);
        let mut per_system = Vec::new();
        for (s, r) in systems.iter().zip(&got) {
            let ok: Vec<f64> = r.iter().filter_map(|x| x.as_ref().ok().copied()).collect();
            if let Some(e) = r.iter().find_map(|x| x.as_ref().err()) {
                return Err(format!("{} {} at key {KB} B, value {VB} B: {e}", s.name(), w.name()));
            }
            per_system.push(ok);
        }
        for (s, mine) in systems.iter().zip(&per_system) {
            let ratios: Vec<f64> = per_system[0].iter().zip(mine).map(|(d, m)| d / m).collect();
            rows.push(Row {
                sweep,
                key_bytes: KB,
                value_bytes: VB,
                keys,
                workload: w.name(),
                system: s.name(),
                mops: Spread::of(mine).expect("at least one round"),
                dlht_over: Spread::of(&ratios).expect("at least one round"),
            });
        }
    }
    Ok(())
}

/// One timed measurement of `w` on `s`; Err if a check failed.
fn measure<const KB: usize, const VB: usize>(
    s: &dyn SizedTable<KB, VB>,
    w: Work,
    keys: u64,
    threads: usize,
    dur: Duration,
    round: u64,
) -> Result<f64, String> {
    let misses = std::sync::atomic::AtomicU64::new(0);
    let seed = 0x51e5 ^ round;
    let mops = harness::timed(
        threads,
        dur,
        keys,
        seed,
        |t| (1u64 << 40) | ((t as u64) << 32) | round << 24,
        |wk| match w {
            Work::Find | Work::Get | Work::GetAccess => {
                let touch = match w {
                    Work::Find => Touch::Nothing,
                    Work::Get => Touch::First,
                    _ => Touch::All,
                };
                let mut sum = 0u64;
                let mut miss = 0;
                let mut batch = [[0u8; KB]; BATCH];
                for _ in 0..64 / BATCH {
                    for k in batch.iter_mut() {
                        *k = bytes(wk.keys.next_index());
                    }
                    match s.get_batch(&batch, touch) {
                        Some((s, m)) => {
                            sum = sum.wrapping_add(s);
                            miss += m;
                        }
                        None => {
                            for k in &batch {
                                match s.get(k, touch) {
                                    Some(v) => sum = sum.wrapping_add(v),
                                    None => miss += 1,
                                }
                            }
                        }
                    }
                }
                black_box(sum);
                if miss > 0 {
                    misses.fetch_add(miss, std::sync::atomic::Ordering::Relaxed);
                }
                64
            }
            Work::InsDel => {
                for _ in 0..32 {
                    let k = bytes(wk.state);
                    wk.state += 1;
                    if !s.insert(k, bytes(wk.state)) || !s.remove(&k) {
                        misses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                64
            }
        },
    );
    match misses.into_inner() {
        0 => Ok(mops),
        m => Err(format!("{m} gets of present keys missed, or fresh inserts failed")),
    }
}

/// The size study. True if a result check failed.
pub fn run(a: SizeArgs) -> bool {
    let machine = crate::harness::machine::Machine::describe();
    println!("# dlht-bench sizes: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    let mut rows = Vec::new();
    let value_works = [Work::Find, Work::Get, Work::GetAccess, Work::InsDel];
    let key_works = [Work::Find, Work::Get, Work::InsDel];
    // Seven systems per point, five points per sweep.
    let steps = (value_works.len() + key_works.len()) * 5 * 7 * a.rounds as usize;
    let bar = Progress::new("Measuring", steps as u64, "steps");
    let results = [
        point::<8, 8>(&a, "value", &value_works, &mut rows, &bar),
        point::<8, 64>(&a, "value", &value_works, &mut rows, &bar),
        point::<8, 256>(&a, "value", &value_works, &mut rows, &bar),
        point::<8, 1024>(&a, "value", &value_works, &mut rows, &bar),
        point::<8, 1536>(&a, "value", &value_works, &mut rows, &bar),
        point::<16, 8>(&a, "key", &key_works, &mut rows, &bar),
        point::<32, 8>(&a, "key", &key_works, &mut rows, &bar),
        point::<64, 8>(&a, "key", &key_works, &mut rows, &bar),
        point::<128, 8>(&a, "key", &key_works, &mut rows, &bar),
        point::<256, 8>(&a, "key", &key_works, &mut rows, &bar),
    ];
    drop(bar);
    let mut failed = false;
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        eprintln!("check failed: {e}");
        failed = true;
    }
    println!(
        "{:<6} {:>5} {:>6} {:>8} {:<11} {:<11} {:>24} {:>22}",
        "sweep", "key", "value", "keys", "workload", "system", "M ops/s", "dlht-alloc ÷ system"
    );
    let mut csv = String::from("sweep,key_bytes,value_bytes,keys,workload,system,mops,dlht_over\n");
    for r in &rows {
        println!(
            "{:<6} {:>5} {:>6} {:>8} {:<11} {:<11} {:>24} {:>22}",
            r.sweep,
            r.key_bytes,
            r.value_bytes,
            r.keys,
            r.workload,
            r.system,
            r.mops.show(2),
            r.dlht_over.show(2)
        );
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{:.4},{:.4}",
            r.sweep,
            r.key_bytes,
            r.value_bytes,
            r.keys,
            r.workload,
            r.system,
            r.mops.median,
            r.dlht_over.median
        );
    }
    println!(
        "# medians (min–max) over {} interleaved rounds, {} thread(s); ratios per round",
        a.rounds, a.threads
    );
    let dir =
        a.out.clone().unwrap_or_else(|| PathBuf::from(format!("dlht-results/sizes-{}", machine.date_unix)));
    write(&dir, "sizes.csv", &csv);
    write(&dir, "sizes.json", &serde_json::to_string_pretty(&rows).unwrap_or_default());
    println!("# results: {}", dir.display());
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_keys_are_distinct_and_touch_reads_everything() {
        assert_ne!(bytes::<8>(1), bytes::<8>(2));
        assert_ne!(bytes::<256>(1), bytes::<256>(2));
        let mut v = bytes::<64>(7);
        let t = read_value(&v, Touch::All);
        v[63] ^= 1;
        assert_ne!(read_value(&v, Touch::All), t, "the last byte counts");
        assert_eq!(read_value(&v, Touch::First), 7);
    }

    #[test]
    fn smoke_point_runs_and_checks() {
        let a = SizeArgs { seconds: 0.01, rounds: 1, threads: 1, memory_gib: 0.1, out: None, smoke: true };
        let mut rows = Vec::new();
        let bar = Progress::hidden();
        let all = [Work::Find, Work::Get, Work::GetAccess, Work::InsDel];
        point::<8, 64>(&a, "value", &all, &mut rows, &bar).unwrap();
        point::<16, 8>(&a, "key", &[Work::Find], &mut rows, &bar).unwrap();
        assert_eq!(rows.len(), 7 * 5);
        assert!(rows.iter().all(|r| r.mops.median > 0.0));
    }
}
