//! The byte-string map (`ByteMap`): model tests against std's HashMap over
//! namespaces, with keys of every length from 0 to past 8 bytes (inline
//! keys and signatures in one index), keys that differ only by trailing
//! zero bytes, key words shared across namespaces and between an inline
//! key and signatures; linearizable concurrent histories; readers holding
//! values while the keys are removed and replaced (run under memcheck too).
#![cfg(not(loom))]

mod common;

use common::lin::{assert_linearizable, run_history};
use common::stress_scale;
use common::Rng;
use common::{key_bytes, word};
use dlht::{Access, ByteMap, DefaultHashBuilder};
use proptest::prelude::*;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Every hash 0: every key longer than 8 bytes in one namespace shares one
/// signature, and in namespace 0 that signature is also the key word of
/// the empty key.
type Zero = common::FewBits<0>;

/// What the map mixes into namespace `ns`'s key words (a copy of its
/// internal constant: if that changes, the cross-namespace collision below
/// stops being one, and this test only loses that case).
fn namespace_mix(ns: u64) -> u64 {
    ns.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The keys the model draws from.
fn key_pool() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"a\0\0\0\0\0\0\0".to_vec(),
        b"\0".to_vec(),
        b"\0\0\0\0\0\0\0\0".to_vec(),
        b"abcdefgh".to_vec(),
        b"abcdefg".to_vec(),
        b"abcdefghi".to_vec(),
        b"abcdefgh\0".to_vec(),
        vec![0xff; 8],
        vec![0xff; 9],
        vec![7; 100],
    ];
    // In namespace 0, this key's word equals that of "x" in namespace 1.
    let mut x = [0u8; 8];
    x[0] = b'x';
    keys.push((u64::from_le_bytes(x) ^ namespace_mix(1)).to_le_bytes().to_vec());
    keys.push(b"x".to_vec());
    for i in 0..12u32 {
        keys.push(format!("k{i}").into_bytes());
        keys.push(format!("a longer key {i}").into_bytes());
    }
    keys
}

#[derive(Clone, Debug)]
enum Op {
    Get(usize, usize),
    Insert(usize, usize, u32),
    Upsert(usize, usize, u32),
    Put(usize, usize, u32),
    /// Compare-and-replace against the value a get returns now, or (false)
    /// against a value of another key.
    Cas(usize, usize, u32, bool),
    Remove(usize, usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let ns = prop_oneof![3 => Just(0usize), 2 => Just(1usize), 1 => Just(4095usize)];
    let key = 0usize..key_pool().len();
    let v = any::<u32>();
    prop_oneof![
        3 => (ns.clone(), key.clone()).prop_map(|(n, k)| Op::Get(n, k)),
        3 => (ns.clone(), key.clone(), v).prop_map(|(n, k, v)| Op::Insert(n, k, v)),
        2 => (ns.clone(), key.clone(), v).prop_map(|(n, k, v)| Op::Upsert(n, k, v)),
        2 => (ns.clone(), key.clone(), v).prop_map(|(n, k, v)| Op::Put(n, k, v)),
        1 => (ns.clone(), key.clone(), v, any::<bool>()).prop_map(|(n, k, v, c)| Op::Cas(n, k, v, c)),
        2 => (ns, key).prop_map(|(n, k)| Op::Remove(n, k)),
    ]
}

/// A value of `v % 40` bytes (empty ones too) that encodes `v`.
fn value(v: u32) -> Vec<u8> {
    let mut b: Vec<u8> = v.to_le_bytes().iter().copied().cycle().take(v as usize % 40).collect();
    if let Some(last) = b.last_mut() {
        *last ^= 0x80;
    }
    b
}

fn run_model<S: BuildHasher + Default>(ops: &[Op]) {
    let pool = key_pool();
    let m: ByteMap<S> = ByteMap::with_hasher(S::default());
    let mut model: HashMap<(usize, Vec<u8>), Vec<u8>> = HashMap::new();
    let g = m.guard();
    let bytes = |v: Option<dlht::ValueRef<'_>>| v.map(|v| v.to_vec());
    for (i, op) in ops.iter().enumerate() {
        let (ns, k) = match *op {
            Op::Get(n, k) | Op::Insert(n, k, _) | Op::Upsert(n, k, _) | Op::Put(n, k, _) => (n, k),
            Op::Cas(n, k, _, _) | Op::Remove(n, k) => (n, k),
        };
        let space = m.namespace(ns).unwrap();
        let key = &pool[k][..];
        let mk = (ns, key.to_vec());
        match *op {
            Op::Get(..) => assert_eq!(bytes(space.get(key, &g)), model.get(&mk).cloned(), "op {i}: {op:?}"),
            Op::Insert(_, _, v) => {
                let got = space.insert(key, &value(v), &g).unwrap().map_err(|cur| cur.to_vec());
                let want = match model.get(&mk) {
                    Some(cur) => Err(cur.clone()),
                    None => {
                        model.insert(mk, value(v));
                        Ok(())
                    }
                };
                assert_eq!(got, want, "op {i}: {op:?}");
            }
            Op::Upsert(_, _, v) => {
                let got = bytes(space.upsert(key, &value(v), &g).unwrap());
                assert_eq!(got, model.insert(mk, value(v)), "op {i}: {op:?}");
            }
            Op::Put(_, _, v) => {
                let got = bytes(space.put(key, &value(v), &g).unwrap());
                let want = model.get_mut(&mk).map(|cur| std::mem::replace(cur, value(v)));
                assert_eq!(got, want, "op {i}: {op:?}");
            }
            Op::Cas(_, _, v, current) => {
                // Against the value there now, or against some other value
                // of the map (equal bytes do not make it the same value).
                let now = space.get(key, &g);
                let expect = if current { now } else { None };
                let other = m
                    .iter(&g)
                    .map(|(_, _, v)| v)
                    .find(|o| !now.is_some_and(|n| dlht::ValueRef::ptr_eq(*o, n)));
                let Some(against) = expect.or(other) else { continue };
                let got = space
                    .compare_and_replace(key, against, &value(v), &g)
                    .unwrap()
                    .map(|old| old.to_vec())
                    .map_err(bytes);
                let want = match (model.get_mut(&mk), expect.is_some()) {
                    (Some(cur), true) => Ok(std::mem::replace(cur, value(v))),
                    (cur, _) => Err(cur.cloned()),
                };
                assert_eq!(got, want, "op {i}: {op:?}");
            }
            Op::Remove(..) => assert_eq!(bytes(space.remove(key, &g)), model.remove(&mk), "op {i}: {op:?}"),
        }
        assert_eq!(m.len(), model.len(), "op {i}: {op:?}");
    }
    let mut all: Vec<(usize, Vec<u8>, Vec<u8>)> =
        m.iter(&g).map(|(n, k, v)| (n, k.to_vec(), v.to_vec())).collect();
    all.sort();
    let mut want: Vec<_> = model.into_iter().map(|((n, k), v)| (n, k, v)).collect();
    want.sort();
    assert_eq!(all, want, "iteration");
    // get_many agrees with get, for every key of the pool.
    let keys: Vec<&[u8]> = pool.iter().map(|k| &k[..]).collect();
    for access in [Access::Locate, Access::Key, Access::Read] {
        let mut out = vec![None; keys.len()];
        m.get_many(&keys, &mut out, access, &g).unwrap();
        for (k, o) in keys.iter().zip(&out) {
            assert_eq!(bytes(*o), bytes(m.get(k, &g)), "get_many of {k:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn byte_map_matches_hashmap(ops in proptest::collection::vec(op_strategy(), 1..600)) {
        run_model::<DefaultHashBuilder>(&ops);
    }

    #[test]
    fn byte_map_matches_hashmap_when_every_signature_collides(ops in proptest::collection::vec(op_strategy(), 1..600)) {
        run_model::<Zero>(&ops);
    }
}

#[test]
fn keys_differing_only_in_trailing_zeros_or_namespace_are_distinct() {
    let m = ByteMap::with_hasher(Zero::default());
    let g = m.guard();
    let keys: [&[u8]; 5] = [b"", b"\0", b"a", b"a\0", b"a\0\0\0\0\0\0\0"];
    for (i, k) in keys.iter().enumerate() {
        for ns in [0, 1, 4095] {
            m.namespace(ns).unwrap().insert(k, &[i as u8, ns as u8], &g).unwrap().unwrap();
        }
    }
    // Long keys all share signature 0 with the empty key of namespace 0.
    m.insert(b"a longer key", b"L", &g).unwrap().unwrap();
    m.insert(b"another longer key", b"M", &g).unwrap().unwrap();
    assert_eq!(m.len(), 17);
    for (i, k) in keys.iter().enumerate() {
        for ns in [0, 1, 4095] {
            let v = m.namespace(ns).unwrap().get(k, &g).map(|v| v.to_vec());
            assert_eq!(v, Some(vec![i as u8, ns as u8]), "{k:?} in {ns}");
        }
    }
    assert_eq!(m.remove(b"", &g).as_deref(), Some(&[0u8, 0][..]));
    assert_eq!(m.get(b"a longer key", &g).as_deref(), Some(&b"L"[..]));
    assert_eq!(m.get(b"another longer key", &g).as_deref(), Some(&b"M"[..]));
    assert!(m.get(b"a third longer key", &g).is_none());
}

/// u64 → u64 through a `ByteMap`: even keys as their shortest little-endian
/// bytes (inline), odd keys as 24-byte strings (signatures); values as 8
/// bytes. One guard per call, the returned values read at once.
struct Ops(ByteMap);

impl common::Ops for Ops {
    fn get(&self, k: u64) -> Option<u64> {
        self.0.get(&key_bytes(k), &self.0.guard()).map(word)
    }
    fn insert(&self, k: u64, v: u64) -> Result<(), u64> {
        self.0.insert(&key_bytes(k), &v.to_le_bytes(), &self.0.guard()).unwrap().map_err(word)
    }
    fn put(&self, k: u64, v: u64) -> Option<u64> {
        self.0.put(&key_bytes(k), &v.to_le_bytes(), &self.0.guard()).unwrap().map(word)
    }
    fn remove(&self, k: u64) -> Option<u64> {
        self.0.remove(&key_bytes(k), &self.0.guard()).map(word)
    }
    fn upsert(&self, k: u64, v: u64) -> Option<u64> {
        self.0.upsert(&key_bytes(k), &v.to_le_bytes(), &self.0.guard()).unwrap().map(word)
    }
}

#[test]
fn byte_map_histories_are_linearizable_under_resizes() {
    for round in 0..3u64 {
        // Three threads on six hot keys (three inline, three stored) with
        // two values, one filler forcing resizes.
        let events = run_history(&Ops(ByteMap::new()), 3, 1, 4000, 6, 2, 0xB1 + round);
        assert_linearizable("ByteMap", &events);
    }
}

/// A value that says which key and generation it is, in every byte: a
/// reader that sees a freed or half-written value fails the check (and
/// memcheck flags the read).
fn checked_value(key: u64, generation: u64) -> Vec<u8> {
    let len = 8 + (generation % 120) as usize;
    let mut v = vec![(key ^ generation) as u8; len];
    v[..8].copy_from_slice(&generation.to_le_bytes());
    v
}

fn check(key: u64, v: &[u8]) {
    let generation = u64::from_le_bytes(v[..8].try_into().unwrap());
    assert_eq!(v, checked_value(key, generation), "torn or freed value of key {key}");
}

#[test]
fn values_outlive_removes_and_replacements() {
    let ops = (20_000.0 * stress_scale()) as u64;
    // Every long key on one signature: lists replaced all the time.
    let map: ByteMap<Zero> = ByteMap::with_hasher(Zero::default());
    // Relaxed: `stop` only ends the readers' loops, `reads` is a count.
    let stop = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (map, stop, reads) = (&map, &stop, &reads);
            s.spawn(move || {
                let mut rng = Rng(t + 11);
                loop {
                    let g = map.guard();
                    // Hold values across many writer operations.
                    let held: Vec<(u64, dlht::ValueRef<'_>)> = (0..16)
                        .filter_map(|_| {
                            let k = rng.below(64);
                            map.get(&key_bytes(k), &g).map(|v| (k, v))
                        })
                        .collect();
                    std::thread::yield_now();
                    for (k, v) in held {
                        check(k, &v);
                    }
                    for (_, k, v) in map.iter(&g).take(64) {
                        let k = (0..64).find(|&i| key_bytes(i) == *k).expect("a key of the test");
                        check(k, &v);
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
            });
        }
        let (map, stop) = (&map, &stop);
        s.spawn(move || {
            let mut rng = Rng(99);
            for i in 0..ops {
                let g = map.guard();
                let k = rng.below(64);
                let (key, v) = (key_bytes(k), checked_value(k, i));
                match rng.below(5) {
                    0 => drop(map.insert(&key, &v, &g).unwrap()),
                    1 => drop(map.upsert(&key, &v, &g).unwrap()),
                    2 => drop(map.put(&key, &v, &g).unwrap()),
                    3 => {
                        if let Some(cur) = map.get(&key, &g) {
                            let _ = map.compare_and_replace(&key, cur, &v, &g).unwrap();
                        }
                    }
                    _ => drop(map.remove(&key, &g)),
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    assert!(reads.load(Ordering::Relaxed) > 0);
}

/// Memcached's `append` through `compute` and `incr` through `update`,
/// from four threads at once on keys of both kinds (inline and stored):
/// every append lands exactly once (each thread's marker counted), every
/// increment counts, and `clear` (flush_all) empties the map.
#[test]
fn concurrent_appends_and_increments_land_exactly_once() {
    const THREADS: u8 = 4;
    let rounds = (2000.0 * stress_scale()) as usize;
    let m = ByteMap::new();
    let g = m.guard();
    for key in [&b"log"[..], b"a log with a long key"] {
        m.insert(key, b"", &g).unwrap().unwrap();
    }
    m.insert(b"hits", b"0", &g).unwrap().unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let m = &m;
            s.spawn(move || {
                let g = m.guard();
                for i in 0..rounds {
                    let key: &[u8] = if i % 2 == 0 { b"log" } else { b"a log with a long key" };
                    let append = |v: Option<&[u8]>| match v {
                        Some(v) => dlht::Op::Upsert([v, &[b'a' + t]].concat()),
                        None => dlht::Op::Keep,
                    };
                    assert!(m.compute(key, append, &g).unwrap().value().is_some());
                    let incr =
                        |v: &[u8]| (std::str::from_utf8(v).unwrap().parse::<u64>().unwrap() + 1).to_string();
                    assert!(m.update(b"hits", incr, &g).unwrap().is_some());
                }
            });
        }
    });
    let mut per_thread = [0usize; THREADS as usize];
    for key in [&b"log"[..], b"a log with a long key"] {
        for &b in m.get(key, &g).unwrap().as_bytes() {
            per_thread[(b - b'a') as usize] += 1;
        }
    }
    assert_eq!(per_thread, [rounds; THREADS as usize]);
    assert_eq!(&*m.get(b"hits", &g).unwrap(), (THREADS as usize * rounds).to_string().as_bytes());
    assert_eq!(m.clear(&g), 3);
    assert!(m.is_empty());
}

/// `iter_bins` in chunks from any start covers each entry exactly once per
/// turn of the hand (no resize meanwhile), in every namespace and key
/// length; and stamps are per stored value: set through one `get`, seen
/// through the next, fresh (0) on a replacement.
#[test]
fn hand_covers_every_entry_once_per_turn_and_stamps_stick() {
    use std::sync::atomic::Ordering::Relaxed;
    let m = ByteMap::new();
    let g = m.guard();
    let ns = m.namespace(2).unwrap();
    let n = 3000u32;
    for i in 0..n {
        let key = if i % 3 == 0 { format!("a longer key {i}") } else { i.to_string() };
        if i % 2 == 0 { m.insert(key.as_bytes(), b"v", &g) } else { ns.insert(key.as_bytes(), b"v", &g) }
            .unwrap()
            .unwrap();
    }
    let bins = m.stats().bins;
    for (start, chunk) in [(0usize, 1usize), (7, 3), (usize::MAX - 5, 64), (bins * 3 + 1, bins + 5)] {
        let mut seen = std::collections::HashMap::new();
        let mut hand = start;
        let mut walked = 0;
        while walked < bins {
            for (ns, k, _) in m.iter_bins(hand, chunk, &g) {
                *seen.entry((ns, k.to_vec())).or_insert(0) += 1;
            }
            hand = hand.wrapping_add(chunk);
            walked += chunk;
        }
        assert_eq!(seen.len(), n as usize, "start {start} chunk {chunk}");
        let extra = seen.values().filter(|&&c| c != 1).count();
        // The last chunk may pass the start again: only then are there repeats.
        assert!(walked == bins || chunk > 1 || extra == 0, "start {start} chunk {chunk}: {extra} repeats");
        if walked == bins {
            assert_eq!(extra, 0, "start {start} chunk {chunk}");
        }
    }
    let v = m.get(b"4", &g).unwrap();
    v.stamp().store(9, Relaxed);
    assert_eq!(m.get(b"4", &g).unwrap().stamp().load(Relaxed), 9);
    assert_eq!(ns.get(b"5", &g).unwrap().stamp().load(Relaxed), 0);
    m.upsert(b"4", b"w", &g).unwrap();
    assert_eq!(m.get(b"4", &g).unwrap().stamp().load(Relaxed), 0);
    assert_eq!(v.stamp().load(Relaxed), 9, "the replaced value keeps its own");
}

/// Four threads churn keys of their own through a small byte map whose
/// bins chain and give back links all the time (each thread keeps a
/// window of its keys present: insert the newest, remove the oldest),
/// while a fixed set of keys is read throughout: no read of a fixed key
/// misses or sees another value, no churned key is lost or changed while
/// present, and every fixed key is there at the end.
#[test]
fn links_given_back_under_concurrent_churn_lose_nothing() {
    const FIXED: u64 = 100;
    const WINDOW: u64 = 32;
    let rounds = (40_000.0 * stress_scale()) as u64;
    let m = ByteMap::with_capacity(256);
    {
        let g = m.guard();
        for k in 0..FIXED {
            m.insert(&key_bytes(k), &k.to_le_bytes(), &g).unwrap().unwrap();
        }
    }
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let m = &m;
            s.spawn(move || {
                let mut rng = Rng(0x11 + t);
                // Key i of this thread, and its value.
                let key = |i: u64| FIXED + 1 + t + 4 * (i % 4096);
                let val = |i: u64| (key(i) << 16) | (i & 0xFFFF);
                for i in 0..rounds {
                    let g = m.guard();
                    let k = key(i);
                    if let Err(old) = m.insert(&key_bytes(k), &val(i).to_le_bytes(), &g).unwrap() {
                        panic!("key {k} of thread {t} present before its insert: {:#x}", word(old));
                    }
                    let f = rng.below(FIXED);
                    assert_eq!(m.get(&key_bytes(f), &g).map(word), Some(f), "fixed key {f}");
                    let j = i.saturating_sub(rng.below(WINDOW));
                    assert_eq!(
                        m.get(&key_bytes(key(j)), &g).map(word),
                        Some(val(j)),
                        "churned key {}",
                        key(j)
                    );
                    if i >= WINDOW {
                        let o = i - WINDOW;
                        assert_eq!(
                            m.remove(&key_bytes(key(o)), &g).map(word),
                            Some(val(o)),
                            "churned key {}",
                            key(o)
                        );
                    }
                }
            });
        }
    });
    let g = m.guard();
    assert_eq!(m.len(), (FIXED + 4 * WINDOW) as usize);
    assert!((0..FIXED).all(|k| m.get(&key_bytes(k), &g).map(word) == Some(k)));
}
