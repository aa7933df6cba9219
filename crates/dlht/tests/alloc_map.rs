//! Allocator mode (`AllocMap`): model tests against std's HashMap over
//! namespaces, with hashers that force signature collisions; linearizable
//! concurrent histories; readers holding references while the keys are
//! removed and replaced (run under memcheck too); iteration under
//! concurrent updates and resizes.
#![cfg(not(loom))]

mod common;

use common::lin::{assert_linearizable, run_history};
use common::stress_scale;
use common::{FewBits, Rng};
use dlht::{AllocMap, DefaultHashBuilder, Modulo};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[derive(Clone, Debug)]
enum Op {
    Get(usize, u16),
    Insert(usize, u16, u32),
    Upsert(usize, u16, u32),
    Put(usize, u16, u32),
    /// Compare-and-replace against the value a get returns now, or (false)
    /// against a value not in the map.
    Cas(usize, u16, u32, bool),
    Remove(usize, u16),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let ns = prop_oneof![3 => Just(0usize), 1 => 1usize..4, 1 => Just(4095usize)];
    let key = 0u16..48;
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

/// String keys (heap-owning, compared through `Borrow<str>`) and values.
fn run_model<S: BuildHasher + Default>(ops: &[Op]) {
    let m: AllocMap<String, String, S> = AllocMap::with_hasher(S::default());
    let mut model: HashMap<(usize, String), String> = HashMap::new();
    let g = m.guard();
    let outside = "not in the map".to_string();
    for (i, op) in ops.iter().enumerate() {
        let (ns, k) = match *op {
            Op::Get(n, k) | Op::Insert(n, k, _) | Op::Upsert(n, k, _) | Op::Put(n, k, _) => (n, k),
            Op::Cas(n, k, _, _) | Op::Remove(n, k) => (n, k),
        };
        let space = m.namespace(ns).unwrap();
        let key = format!("key-{k}");
        let mk = (ns, key.clone());
        match *op {
            Op::Get(..) => assert_eq!(space.get(key.as_str(), &g), model.get(&mk), "op {i}: {op:?}"),
            Op::Insert(_, _, v) => {
                let got = space
                    .insert(key.clone(), v.to_string(), &g)
                    .map_err(|o| (o.current.clone(), o.key, o.value));
                let want = match model.get(&mk) {
                    Some(cur) => Err((cur.clone(), key, v.to_string())),
                    None => {
                        model.insert(mk, v.to_string());
                        Ok(())
                    }
                };
                assert_eq!(got, want, "op {i}: {op:?}");
            }
            Op::Upsert(_, _, v) => {
                let got = space.upsert(key, v.to_string(), &g).cloned();
                assert_eq!(got, model.insert(mk, v.to_string()), "op {i}: {op:?}");
            }
            Op::Put(_, _, v) => {
                let got = space.put(&key, v.to_string(), &g).cloned();
                let want = match model.get_mut(&mk) {
                    Some(cur) => Ok(std::mem::replace(cur, v.to_string())),
                    None => Err(v.to_string()),
                };
                assert_eq!(got, want, "op {i}: {op:?}");
            }
            Op::Cas(_, _, v, current) => {
                let expect = if current { space.get(key.as_str(), &g) } else { None };
                let got = space
                    .compare_and_replace(&key, expect.unwrap_or(&outside), v.to_string(), &g)
                    .cloned()
                    .map_err(|(back, now)| (back, now.cloned()));
                let want = match (model.get_mut(&mk), expect.is_some()) {
                    (Some(cur), true) => Ok(std::mem::replace(cur, v.to_string())),
                    (cur, _) => Err((v.to_string(), cur.cloned())),
                };
                assert_eq!(got, want, "op {i}: {op:?}");
            }
            Op::Remove(..) => {
                assert_eq!(space.remove(key.as_str(), &g), model.remove(&mk).as_ref(), "op {i}: {op:?}")
            }
        }
        assert_eq!(m.len(), model.len(), "op {i}: {op:?}");
    }
    let mut all: Vec<(usize, String, String)> =
        m.iter(&g).map(|(n, k, v)| (n, k.clone(), v.clone())).collect();
    all.sort();
    let mut want: Vec<_> = model.into_iter().map(|((n, k), v)| (n, k, v)).collect();
    want.sort();
    assert_eq!(all, want, "iteration");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn alloc_map_matches_hashmap(ops in proptest::collection::vec(op_strategy(), 1..600)) {
        run_model::<DefaultHashBuilder>(&ops);
    }

    #[test]
    fn alloc_map_matches_hashmap_with_colliding_signatures(ops in proptest::collection::vec(op_strategy(), 1..600)) {
        run_model::<FewBits<2>>(&ops); // four signatures per namespace: lists everywhere
        run_model::<FewBits<0>>(&ops); // one signature per namespace
    }
}

#[test]
fn a_hasher_with_constant_low_bits_still_spreads_keys() {
    // Modulo hashes "key-N" to words whose low 29 bits are the same for
    // every N: the index must still spread the signatures over bins.
    let ops: Vec<Op> = (0..48).flat_map(|k| [Op::Insert(0, k, k as u32), Op::Get(0, k)]).collect();
    run_model::<Modulo>(&ops);
}

#[test]
fn namespaces_keep_equal_keys_apart() {
    let m: AllocMap<u64, usize> = AllocMap::with_capacity(1 << 14);
    let g = m.guard();
    for ns in 0..dlht::NAMESPACES {
        m.namespace(ns).unwrap().insert(1, ns, &g).unwrap();
    }
    assert_eq!(m.len(), dlht::NAMESPACES);
    for ns in 0..dlht::NAMESPACES {
        assert_eq!(m.namespace(ns).unwrap().get(&1, &g), Some(&ns));
    }
    assert_eq!(
        m.namespace(dlht::NAMESPACES).err(),
        Some(dlht::Error::NamespaceOutOfRange { namespace: 4096 })
    );
    assert_eq!(m.namespace(7).unwrap().remove(&1, &g), Some(&7));
    assert_eq!(m.namespace(7).unwrap().get(&1, &g), None);
    assert_eq!(m.namespace(8).unwrap().get(&1, &g), Some(&8));
}

/// u64 → u64 through `AllocMap`, for the linearizability harness: one
/// guard per call, the returned references read at once.
struct Ops(AllocMap<u64, u64>);

impl common::Ops for Ops {
    fn get(&self, k: u64) -> Option<u64> {
        self.0.get(&k, &self.0.guard()).copied()
    }
    fn insert(&self, k: u64, v: u64) -> Result<(), u64> {
        self.0.insert(k, v, &self.0.guard()).map_err(|o| *o.current)
    }
    fn put(&self, k: u64, v: u64) -> Option<u64> {
        self.0.put(&k, v, &self.0.guard()).ok().copied()
    }
    fn remove(&self, k: u64) -> Option<u64> {
        self.0.remove(&k, &self.0.guard()).copied()
    }
    fn upsert(&self, k: u64, v: u64) -> Option<u64> {
        self.0.upsert(k, v, &self.0.guard()).copied()
    }
}

#[test]
fn alloc_map_histories_are_linearizable_under_resizes() {
    for round in 0..3u64 {
        // Three threads on six hot keys with two values, one filler forcing
        // resizes (the dlht maps' harness).
        let events = run_history(&Ops(AllocMap::new()), 3, 1, 4000, 6, 2, 0xA1 + round);
        assert_linearizable("AllocMap", &events);
    }
}

/// A value that knows what it should contain: a reader that sees a freed
/// or half-written one fails the check (and memcheck flags the read).
struct Checked {
    key: u64,
    body: Vec<u64>,
}

impl Checked {
    fn new(key: u64, gen: u64) -> Checked {
        Checked { key, body: (0..8).map(|i| key ^ gen ^ i).collect() }
    }
    fn check(&self, key: u64) {
        assert_eq!(self.key, key);
        let gen = self.body[0] ^ key;
        assert!(self.body.iter().enumerate().all(|(i, &w)| w == key ^ gen ^ i as u64), "torn value");
    }
}

#[test]
fn references_outlive_removes_and_replacements() {
    let ops = (20_000.0 * stress_scale()) as u64;
    let map: AllocMap<u64, Checked, FewBits<6>> = AllocMap::with_hasher(FewBits::default());
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
                    // Hold references across many writer operations.
                    let held: Vec<(u64, &Checked)> = (0..16)
                        .filter_map(|_| {
                            let k = rng.below(256);
                            map.get(&k, &g).map(|v| (k, v))
                        })
                        .collect();
                    std::thread::yield_now();
                    for (k, v) in held {
                        v.check(k);
                    }
                    for (_, k, v) in map.iter(&g).take(64) {
                        v.check(*k);
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
                let k = rng.below(256);
                match rng.below(4) {
                    0 => drop(map.insert(k, Checked::new(k, i), &g)),
                    1 => drop(map.upsert(k, Checked::new(k, i), &g)),
                    2 => drop(map.put(&k, Checked::new(k, i), &g)),
                    _ => drop(map.remove(&k, &g)),
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    assert!(reads.load(Ordering::Relaxed) > 0);
}

#[test]
fn iteration_yields_each_stable_key_once_across_resizes() {
    let scale = stress_scale();
    let mut overlapped = 0;
    for round in 0..3u64 {
        // A small start: the fillers force several resizes mid-iteration.
        let map: AllocMap<u64, u64> = AllocMap::with_capacity(64);
        let stable: Vec<u64> = (0..2000u64).map(|i| i * 7 + round).collect();
        let g = map.guard();
        for &k in &stable {
            map.insert(k, k, &g).unwrap();
        }
        drop(g);
        let resizes_before = map.capacity();
        let done = AtomicBool::new(false); // Relaxed: only ends the writer's loop
        std::thread::scope(|s| {
            let (map, done) = (&map, &done);
            s.spawn(move || {
                let g = map.guard();
                let mut i = 0u64;
                // At least `n` operations, and on until the iterations end
                // (bounded, for slow runs such as memcheck's).
                let n = (20_000.0 * scale) as u64;
                while i < 40 * n && (!done.load(Ordering::Relaxed) || i < n) {
                    map.insert(1 << 40 | i, i, &g).unwrap();
                    let churn = 1 << 50 | (i % 512);
                    if i % 2 == 0 {
                        map.upsert(churn, i, &g);
                    } else {
                        map.remove(&churn, &g);
                    }
                    i += 1;
                }
            });
            let _stop = SetOnDrop(done); // also when an assertion fails
            let mut filler = 0u64;
            for pass in 0..4 {
                let g = map.guard();
                let mut seen = HashSet::new();
                let before = map.capacity();
                for (_, &k, &v) in map.iter(&g) {
                    if seen.len() % 64 == 0 {
                        std::thread::yield_now(); // let the writer's resizes overlap too
                    }
                    if pass == 0 && seen.len() == stable.len() / 2 {
                        // Halfway through the first pass: grow the index
                        // from here, so a pass surely crosses a resize
                        // (later passes cross the writer's, if they do).
                        let cap = map.capacity();
                        while map.capacity() == cap {
                            map.insert(3 << 40 | round << 32 | filler, 0, &g).unwrap();
                            filler += 1;
                        }
                    }
                    assert!(seen.insert(k), "key {k:#x} yielded twice");
                    if k >> 40 == 0 {
                        assert_eq!(v, k);
                    }
                }
                for k in &stable {
                    assert!(seen.contains(k), "stable key {k} missed");
                }
                overlapped += (map.capacity() > before) as usize;
            }
        });
        assert!(map.capacity() > resizes_before, "the index grew during the iterations");
    }
    assert!(overlapped > 0, "no iteration overlapped a resize");
}

/// Sets the flag (Relaxed: it only ends loops) when dropped: stops the writer threads even when the
/// checking thread panics (they would otherwise run forever).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn get_many_matches_get() {
    fn check<S: BuildHasher + Default>() {
        let m: AllocMap<String, u64, S> = AllocMap::with_hasher(S::default());
        let g = m.guard();
        for k in (0..600u64).step_by(3) {
            m.insert(format!("k{k}"), k, &g).unwrap();
        }
        m.namespace(2).unwrap().insert("k1".into(), 77, &g).unwrap();
        let names: Vec<String> = (0..600u64).map(|k| format!("k{k}")).collect();
        let keys: Vec<&str> = names.iter().map(String::as_str).collect();
        for access in [dlht::Access::Locate, dlht::Access::Key, dlht::Access::Read] {
            let mut out = vec![None; keys.len()];
            m.get_many(&keys, &mut out, access, &g).unwrap();
            for (k, o) in keys.iter().zip(&out) {
                assert_eq!(*o, m.get(*k, &g), "key {k}");
            }
            let mut two = [None; 2];
            m.namespace(2).unwrap().get_many(&["k1", "k3"], &mut two, access, &g).unwrap();
            assert_eq!(two, [Some(&77), None]);
        }
        let mut short = vec![None; 3];
        assert!(m.get_many(&keys, &mut short, dlht::Access::Key, &g).is_err());
    }
    check::<DefaultHashBuilder>();
    check::<FewBits<3>>(); // collision lists
}
