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
