//! Every mode through one adapter (`tests/common/modes.rs`):
//! `Map`, `AllocMap` and `ByteMap`, through their own methods and through
//! namespace views, with default and colliding hashers — a model test
//! against std's HashMap with every operation (the read-modify-writes,
//! retain, clear, reserve, shrink) and bulk loads that force grows and
//! shrinks; per-key linearizability of concurrent histories with the
//! read-modify-writes in the mix while fillers grow and shrink the map;
//! and exact concurrent counts through `update` and `compute`.
#![cfg(not(loom))]

mod common;

use common::lin::{assert_linearizable, run_history_with, Call};
use common::modes::{record_rmw, with_modes, Rmw};
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug)]
enum Step {
    Get(u64),
    Insert(u64, u64),
    Put(u64, u64),
    Remove(u64),
    Upsert(u64, u64),
    Update(u64, u64),
    GetOrInsert(u64, u64),
    RemoveIfEq(u64, u64),
    Compute(u64, u64),
    /// Insert keys `BULK..BULK + n`, then remove them: a grow, then (with
    /// shrink_to_fit) a shrink.
    Bulk(u64),
    RetainEven,
    Clear,
    Reserve(usize),
    ShrinkToFit,
}

const BULK: u64 = 1 << 40;

/// `DLHT_STRESS_SCALE`, and a quarter of it in unoptimized builds (each
/// history costs the checker far more there).
fn scale() -> f64 {
    common::stress_scale() * if cfg!(debug_assertions) { 0.25 } else { 1.0 }
}

/// Property cases: 48 at scale 1, at least 4.
fn cases() -> u32 {
    ((48.0 * scale()) as u32).max(4)
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let k = 0u64..40;
    let v = 1u64..5;
    prop_oneof![
        3 => k.clone().prop_map(Step::Get),
        3 => (k.clone(), v.clone()).prop_map(|(k, v)| Step::Insert(k, v)),
        2 => (k.clone(), v.clone()).prop_map(|(k, v)| Step::Put(k, v)),
        2 => k.clone().prop_map(Step::Remove),
        2 => (k.clone(), v.clone()).prop_map(|(k, v)| Step::Upsert(k, v)),
        3 => (k.clone(), v.clone()).prop_map(|(k, v)| Step::Update(k, v)),
        3 => (k.clone(), v.clone()).prop_map(|(k, v)| Step::GetOrInsert(k, v)),
        2 => (k.clone(), v.clone()).prop_map(|(k, v)| Step::RemoveIfEq(k, v)),
        4 => (k, v).prop_map(|(k, v)| Step::Compute(k, v)),
        1 => (100u64..3000).prop_map(Step::Bulk),
        1 => Just(Step::RetainEven),
        1 => Just(Step::Clear),
        1 => (0usize..5000).prop_map(Step::Reserve),
        1 => Just(Step::ShrinkToFit),
    ]
}

/// Apply `steps` to `map` and to a HashMap; each single-key result must be
/// what the sequential register of the linearizability checker allows
/// (one meaning of each operation for both tests).
fn run_model(name: &str, map: &dyn Rmw, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut model: HashMap<u64, u64> = HashMap::new();
    for (i, &step) in steps.iter().enumerate() {
        let keyed = match step {
            Step::Get(k) => Some((k, Call::Get(map.get(k)))),
            Step::Insert(k, v) => Some((k, Call::Insert(v, map.insert(k, v)))),
            Step::Put(k, v) => Some((k, Call::Put(v, map.put(k, v)))),
            Step::Remove(k) => Some((k, Call::Remove(map.remove(k)))),
            Step::Upsert(k, v) => Some((k, Call::Upsert(v, map.upsert(k, v)))),
            Step::Update(k, v) => Some((k, Call::Update(v, map.update_add(k, v)))),
            Step::GetOrInsert(k, v) => Some((k, Call::GetOrInsert(v, map.get_or_insert(k, v)))),
            Step::RemoveIfEq(k, v) => Some((k, Call::RemoveIfEq(v, map.remove_if_eq(k, v)))),
            Step::Compute(k, v) => Some((k, Call::Compute(v, map.compute(k, v)))),
            Step::Bulk(n) => {
                for k in BULK..BULK + n {
                    prop_assert_eq!(map.insert(k, k), Ok(()), "{}: step {}", name, i);
                }
                for k in BULK..BULK + n {
                    prop_assert_eq!(map.remove(k), Some(k), "{}: step {}", name, i);
                }
                map.shrink_to_fit();
                None
            }
            Step::RetainEven => {
                let before = model.len();
                model.retain(|_, v| *v % 2 == 0);
                prop_assert_eq!(map.retain(&|_, v| v % 2 == 0), before - model.len(), "{}: step {}", name, i);
                None
            }
            Step::Clear => {
                prop_assert_eq!(map.clear(), model.len(), "{}: step {}", name, i);
                model.clear();
                None
            }
            Step::Reserve(n) => {
                map.reserve(n);
                None
            }
            Step::ShrinkToFit => {
                map.shrink_to_fit();
                None
            }
        };
        if let Some((k, call)) = keyed {
            let next = call.step(model.get(&k).copied());
            prop_assert!(next.is_some(), "{}: step {}: {:?} from {:?}", name, i, call, model.get(&k));
            match next.unwrap() {
                Some(v) => model.insert(k, v),
                None => model.remove(&k),
            };
        }
        prop_assert_eq!(map.len(), model.len(), "{}: step {}", name, i);
    }
    for k in 0..40 {
        prop_assert_eq!(map.get(k), model.get(&k).copied(), "{}: key {} at the end", name, k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_mode_matches_hashmap(steps in proptest::collection::vec(step_strategy(), 1..300)) {
        let mut result = Ok(());
        with_modes(|name, build| {
            if result.is_ok() {
                result = run_model(name, &*build(0), &steps);
            }
        });
        result?;
    }
}

/// Histories of three workers on six hot keys, every operation in the mix,
/// with tiny value domains (equal values reused all the time), while a
/// filler grows the map and, every other round, removes what it inserted
/// and shrinks it again.
#[test]
fn every_mode_is_linearizable_under_grows_and_shrinks() {
    let ops = ((2500.0 * scale()) as usize).max(500);
    with_modes(|name, build| {
        for round in 0..2u64 {
            let map = build(0);
            let parity = std::sync::atomic::AtomicU64::new(0);
            let events = run_history_with(&*map, 3, 1, ops, 6, 3, 0x23 + round, record_rmw, |m, keys| {
                if parity.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 2 == 1 {
                    for &k in keys {
                        m.remove(k);
                    }
                    m.shrink_to_fit();
                }
            });
            // One signature: every key in one list, nothing to resize.
            if !name.contains("1 signature") {
                assert!(map.resizes() >= 2, "{name}: the filler forced resizes ({})", map.resizes());
            }
            assert_linearizable(name, &events);
        }
    });
}

/// Four threads count into eight keys, half through `update` (inserting
/// on a miss) and half through `compute`: no increment lost or doubled,
/// under a filler that forces resizes.
#[test]
fn every_mode_counts_exactly_through_update_and_compute() {
    const THREADS: u64 = 4;
    let rounds = (20_000.0 * scale()) as u64;
    with_modes(|name, build| {
        let map = build(0);
        let map = &*map;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for i in 0..rounds {
                        let k = (i + t) % 8;
                        if (i + t) % 2 == 0 {
                            if map.update_add(k, 1).is_none() && map.insert(k, 1).is_err() {
                                assert!(map.update_add(k, 1).is_some(), "{name}: key {k} went away");
                            }
                        } else {
                            map.compute_add(k, 1);
                        }
                    }
                });
            }
            s.spawn(move || {
                for k in 0..(rounds * 2) {
                    map.insert(1 << 40 | k, k).unwrap();
                }
            });
        });
        let total: u64 = (0..8).map(|k| map.get(k).unwrap()).sum();
        assert_eq!(total, THREADS * rounds, "{name}: counts");
    });
}
