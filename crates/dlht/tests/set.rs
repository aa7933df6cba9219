//! Hash-set mode: model tests against std's HashSet (single calls and
//! batches), and concurrent inserts of one key: exactly one succeeds.
#![cfg(not(loom))]

use dlht::{Set, SetRequest};
use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

fn req_strategy() -> impl Strategy<Value = SetRequest<u64>> {
    let key = prop_oneof![4 => 0u64..64, 1 => any::<u64>(), 1 => Just(u64::MAX)];
    prop_oneof![
        key.clone().prop_map(SetRequest::Contains),
        key.clone().prop_map(SetRequest::Insert),
        key.prop_map(SetRequest::Remove),
    ]
}

fn model_step(model: &mut HashSet<u64>, r: SetRequest<u64>) -> bool {
    match r {
        SetRequest::Contains(k) => model.contains(&k),
        SetRequest::Insert(k) => model.insert(k),
        SetRequest::Remove(k) => model.remove(&k),
    }
}

proptest! {
    #[test]
    fn set_matches_hashset(reqs in proptest::collection::vec(req_strategy(), 1..2000)) {
        let s = Set::<u64>::with_capacity(4);
        let mut model = HashSet::new();
        for (i, &r) in reqs.iter().enumerate() {
            let got = match r {
                SetRequest::Contains(k) => s.contains(&k),
                SetRequest::Insert(k) => s.insert(k),
                SetRequest::Remove(k) => s.remove(&k),
            };
            prop_assert_eq!(got, model_step(&mut model, r), "request {}: {:?}", i, r);
        }
        prop_assert_eq!(s.len(), model.len());
        prop_assert_eq!(s.iter().collect::<HashSet<_>>(), model);
    }

    #[test]
    fn set_batches_match_hashset(reqs in proptest::collection::vec(req_strategy(), 1..2000)) {
        let s = Set::<u64>::with_capacity(4);
        let mut out = vec![false; reqs.len()];
        prop_assert_eq!(s.batch(&reqs, &mut out), Ok(reqs.len()));
        let mut model = HashSet::new();
        let want: Vec<bool> = reqs.iter().map(|&r| model_step(&mut model, r)).collect();
        prop_assert_eq!(out, want);
        let keys: Vec<u64> = (0..64).collect();
        let mut present = vec![false; 64];
        s.contains_many(&keys, &mut present).unwrap();
        prop_assert_eq!(present, keys.iter().map(|k| model.contains(k)).collect::<Vec<_>>());
    }
}

#[test]
fn one_insert_of_a_key_wins() {
    let s = Set::<u64>::with_capacity(16);
    let wins = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                for k in 0..20_000u64 {
                    wins.fetch_add(s.insert(k) as usize, Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(wins.load(Ordering::Relaxed), 20_000);
    assert_eq!(s.len(), 20_000);
    let mut out = vec![false; 3];
    assert!(s.contains_many(&[1, 2], &mut out).is_err(), "lengths must agree");
}

/// A step of the whole-set model test: single calls and the operations
/// over the whole set.
#[derive(Clone, Copy, Debug)]
enum Whole {
    One(SetRequest<u64>),
    /// Keep the keys divisible by this.
    Retain(u64),
    Clear,
    ShrinkToFit,
    ShrinkTo(usize),
    Reserve(usize),
}

fn whole_strategy() -> impl Strategy<Value = Whole> {
    prop_oneof![
        40 => req_strategy().prop_map(Whole::One),
        1 => (1u64..5).prop_map(Whole::Retain),
        1 => Just(Whole::Clear),
        1 => Just(Whole::ShrinkToFit),
        1 => (0usize..5000).prop_map(Whole::ShrinkTo),
        1 => (0usize..5000).prop_map(Whole::Reserve),
    ]
}

proptest! {
    /// retain, clear, shrinking and reserve agree with std's HashSet, and
    /// leave every other call agreeing with it too.
    #[test]
    fn whole_set_operations_match_hashset(steps in proptest::collection::vec(whole_strategy(), 1..1500)) {
        let s = Set::<u64>::new();
        let mut model = HashSet::new();
        for (i, &step) in steps.iter().enumerate() {
            match step {
                Whole::One(r) => {
                    let got = match r {
                        SetRequest::Contains(k) => s.contains(&k),
                        SetRequest::Insert(k) => s.insert(k),
                        SetRequest::Remove(k) => s.remove(&k),
                    };
                    prop_assert_eq!(got, model_step(&mut model, r), "step {}: {:?}", i, step);
                }
                Whole::Retain(m) => {
                    let before = model.len();
                    model.retain(|k| k % m == 0);
                    prop_assert_eq!(s.retain(|k| k % m == 0), before - model.len(), "step {}", i);
                }
                Whole::Clear => {
                    prop_assert_eq!(s.clear(), model.len(), "step {}", i);
                    model.clear();
                }
                Whole::ShrinkToFit => s.shrink_to_fit(),
                Whole::ShrinkTo(n) => s.shrink_to(n),
                Whole::Reserve(n) => {
                    s.reserve(n);
                    prop_assert!(s.capacity() >= model.len() + n, "step {}: capacity {} after reserve({})", i, s.capacity(), n);
                }
            }
            prop_assert_eq!(s.len(), model.len(), "step {}", i);
        }
        let mut keys: Vec<u64> = s.iter().collect();
        keys.sort_unstable();
        let mut want: Vec<u64> = model.into_iter().collect();
        want.sort_unstable();
        prop_assert_eq!(keys, want);
    }
}

/// retain under concurrent writers of other keys: every key present for
/// the whole call is kept or removed as `keep` says, whatever the writers
/// (which also make the set grow and shrink) do meanwhile.
#[test]
fn retain_judges_stable_keys_under_writers() {
    const STABLE: u64 = 20_000;
    for _ in 0..4 {
        let s: Set<u64> = (0..STABLE).collect();
        let removed = std::thread::scope(|sc| {
            let writer = sc.spawn(|| {
                for round in 0..4u64 {
                    let base = STABLE + round * 50_000;
                    for k in base..base + 50_000 {
                        s.insert(k);
                    }
                    for k in base..base + 50_000 {
                        assert!(s.remove(&k));
                    }
                }
            });
            let removed = s.retain(|k| k >= STABLE || k % 3 != 0);
            writer.join().unwrap();
            removed
        });
        assert_eq!(removed, (0..STABLE).filter(|k| k % 3 == 0).count());
        for k in 0..STABLE {
            assert_eq!(s.contains(&k), k % 3 != 0, "key {k}");
        }
        assert_eq!(s.len() as u64, STABLE - STABLE.div_ceil(3));
    }
}
