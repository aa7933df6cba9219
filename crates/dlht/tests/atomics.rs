//! Per-key atomics (`compare_exchange`, `update`, `fetch_add`,
//! `get_or_insert_with`, `remove_if`) and `retain` / `clear` / `iter`, on
//! `Map` and `LocalMap`: against std's HashMap in random sequences, and counters incremented from several threads, across
//! resizes, that end exact.
#![cfg(not(loom))]

mod common;

use common::Rng;
use dlht::{Map, Modulo, Request, Response, StopOn};
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Clone, Debug)]
enum Op {
    Cas(u64, u64, u64),
    Update(u64, u64),
    FetchAdd(u64, u64),
    GetOrInsert(u64, u64),
    RemoveIf(u64, u64),
    Insert(u64, u64),
    Remove(u64),
    Retain(u64),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u64..32;
    let v = prop_oneof![0u64..4, Just(u64::MAX)];
    prop_oneof![
        (k.clone(), v.clone(), v.clone()).prop_map(|(k, e, n)| Op::Cas(k, e, n)),
        (k.clone(), v.clone()).prop_map(|(k, d)| Op::Update(k, d)),
        (k.clone(), v.clone()).prop_map(|(k, d)| Op::FetchAdd(k, d)),
        (k.clone(), v.clone()).prop_map(|(k, d)| Op::GetOrInsert(k, d)),
        (k.clone(), v.clone()).prop_map(|(k, d)| Op::RemoveIf(k, d)),
        (k.clone(), v).prop_map(|(k, d)| Op::Insert(k, d)),
        k.prop_map(Op::Remove),
        // Rare: a retain removes a quarter of the keys.
        proptest::bool::weighted(0.05).prop_map(|r| if r { Op::Retain(1) } else { Op::Remove(0) }),
    ]
}

/// The model run, for `Map` and `LocalMap` alike (the same calls; `retain`,
/// `clear` and `iter` take `&mut self` on a `LocalMap`).
macro_rules! model_run {
    ($name:ident, $ty:ident) => {
        fn $name<S: std::hash::BuildHasher>(m: &mut dlht::$ty<u64, u64, S>, ops: &[Op]) {
            let mut model: HashMap<u64, u64> = HashMap::new();
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    Op::Cas(k, e, n) => {
                        let want = match model.get_mut(&k) {
                            Some(v) if *v == e => {
                                *v = n;
                                Ok(e)
                            }
                            Some(v) => Err(Some(*v)),
                            None => Err(None),
                        };
                        assert_eq!(m.compare_exchange(&k, e, n), want, "op {i}: {op:?}");
                    }
                    Op::Update(k, d) => {
                        let want = model.get_mut(&k).map(|v| {
                            *v = v.wrapping_mul(3).wrapping_add(d);
                            *v
                        });
                        assert_eq!(
                            m.update(&k, |v| v.wrapping_mul(3).wrapping_add(d)),
                            want,
                            "op {i}: {op:?}"
                        );
                    }
                    Op::FetchAdd(k, d) => {
                        let want = model.get(&k).copied();
                        model.insert(k, want.map_or(d, |w| w.wrapping_add(d)));
                        assert_eq!(m.fetch_add(k, d), want, "op {i}: {op:?}");
                    }
                    Op::GetOrInsert(k, d) => {
                        let want = *model.entry(k).or_insert(d);
                        let mut ran = false;
                        let got = m.get_or_insert_with(k, || {
                            ran = true;
                            d
                        });
                        assert_eq!(got, want, "op {i}: {op:?}");
                        assert_eq!(ran, got == d && ran, "f runs only for an absent key");
                    }
                    Op::RemoveIf(k, d) => {
                        let want = match model.get(&k) {
                            Some(&v) if v % 4 == d % 4 => model.remove(&k),
                            _ => None,
                        };
                        assert_eq!(m.remove_if(&k, |v| v % 4 == d % 4), want, "op {i}: {op:?}");
                    }
                    Op::Insert(k, v) => {
                        let want = common::model_insert(&mut model, k, v);
                        assert_eq!(m.insert(k, v), want, "op {i}: {op:?}");
                    }
                    Op::Remove(k) => assert_eq!(m.remove(&k), model.remove(&k), "op {i}: {op:?}"),
                    Op::Retain(d) => {
                        let before = model.len();
                        model.retain(|_, v| *v % 4 != d % 4);
                        assert_eq!(m.retain(|_, v| v % 4 != d % 4), before - model.len(), "op {i}: {op:?}");
                    }
                }
                assert_eq!(m.len(), model.len(), "op {i}: {op:?}");
            }
            let mut all: Vec<(u64, u64)> = m.iter().collect();
            all.sort_unstable();
            let mut want: Vec<(u64, u64)> = model.into_iter().collect();
            want.sort_unstable();
            assert_eq!(all, want, "contents at the end");
            assert_eq!(m.clear(), want.len());
            assert_eq!(m.len(), 0);
        }
    };
}
model_run!(run_map, Map);
model_run!(run_local, LocalMap);

proptest! {
    #[test]
    fn atomics_match_hashmap(ops in proptest::collection::vec(op_strategy(), 1..800)) {
        run_map(&mut Map::<u64, u64>::with_capacity(2), &ops);
        run_map(&mut Map::<u64, u64, Modulo>::with_capacity_and_hasher(2, Modulo), &ops);
        run_local(&mut dlht::LocalMap::<u64, u64>::with_capacity(2), &ops);
        run_local(&mut dlht::LocalMap::<u64, u64, Modulo>::with_capacity_and_hasher(2, Modulo), &ops);
    }
}

#[test]
fn concurrent_counters_end_exact() {
    // Four threads count the same skewed keys with each atomic (the fourth
    // in batches of fetch-add requests) while a fifth grows the table:
    // every increment must land exactly once.
    for (name, chunk) in [("default chunks", 16 * 1024), ("1-bin chunks", 1)] {
        let m = Map::<u64, u64>::with_capacity(8).with_transfer_chunk(chunk);
        let per_thread = 20_000u64;
        std::thread::scope(|s| {
            let m = &m;
            s.spawn(move || {
                let mut rng = Rng(4);
                let mut out = [Response::NotExecuted; 16];
                for _ in 0..per_thread / 16 {
                    let reqs: [Request<u64, u64>; 16] = std::array::from_fn(|_| {
                        let k = if rng.below(2) == 0 { rng.below(4) } else { rng.below(256) };
                        Request::fetch_add(k, 1)
                    });
                    assert_eq!(m.batch(&reqs, &mut out, StopOn::Never), Ok(16));
                }
            });
            for t in 0..3u64 {
                s.spawn(move || {
                    let mut rng = Rng(t * 7919 + 1);
                    for _ in 0..per_thread {
                        // Skewed: half the increments on key 0..4.
                        let k = if rng.below(2) == 0 { rng.below(4) } else { rng.below(256) };
                        match t {
                            0 => drop(m.fetch_add(k, 1)),
                            1 => loop {
                                let cur = m.get_or_insert_with(k, || 0);
                                if m.compare_exchange(&k, cur, cur + 1).is_ok() {
                                    break;
                                }
                            },
                            _ => {
                                if m.update(&k, |v| v + 1).is_none() {
                                    m.fetch_add(k, 1); // absent: insert 1, or add to a racing insert
                                }
                            }
                        }
                    }
                });
            }
            s.spawn(move || {
                for i in 0..20_000u64 {
                    m.insert(1 << 40 | i, 0).unwrap(); // forces resizes
                }
            });
        });
        let total: u64 = (0..256).filter_map(|k| m.get(&k)).sum();
        assert_eq!(total, 4 * per_thread, "{name}: increments lost or doubled");
        assert!(m.stats().resizes > 0);
    }
}

#[test]
fn retain_and_clear_racing_inserts() {
    for round in 0..3u64 {
        let m = Map::<u64, u64>::with_capacity(16).with_transfer_chunk(4);
        for k in 0..20_000u64 {
            m.insert(k, k).unwrap();
        }
        std::thread::scope(|s| {
            let m = &m;
            // Fresh keys inserted meanwhile (forcing resizes); each may
            // or may not be judged.
            s.spawn(move || {
                for i in 0..20_000u64 {
                    m.insert(1 << 40 | round << 32 | i, 1).unwrap();
                }
            });
            // Every old key present throughout: the odd ones must go.
            let removed = m.retain(|k, _| k >> 40 == 1 || k % 2 == 0);
            assert!(removed >= 10_000, "{removed}");
        });
        for k in 0..20_000u64 {
            assert_eq!(m.get(&k), (k % 2 == 0).then_some(k), "key {k}");
        }
        for i in 0..20_000u64 {
            assert_eq!(m.get(&(1 << 40 | round << 32 | i)), Some(1), "a kept fresh key");
        }
        assert_eq!(m.clear(), 30_000);
        assert!(m.is_empty());
        assert_eq!(m.iter().count(), 0);
    }
}
