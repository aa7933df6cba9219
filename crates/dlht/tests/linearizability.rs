//! Linearizability of recorded concurrent histories, per key, with resizes
//! forced; and proof that the checker rejects a deliberately broken map.
#![cfg(not(loom))]

mod common;

use common::lin::{assert_linearizable, check, check_key, record, run_history, Call, Clock, Event, Verdict};
use common::{with_shared_maps, Ops, Rng};
use std::collections::HashMap;
use std::sync::{Barrier, Mutex};

#[test]
fn dlht_histories_are_linearizable_under_resizes() {
    with_shared_maps(|name, build| {
        for round in 0..3u64 {
            let map = build(1);
            let events = run_history(&*map, 3, 1, 4000, 6, 2, 0xD1 + round);
            assert!(map.stats().resizes >= 3, "{name}: resizes were forced");
            assert_linearizable(name, &events);
        }
    });
}

#[test]
fn dlht_histories_are_linearizable_one_bin_hot_spot() {
    // Eight hot keys and four threads: maximal header contention and slot
    // reuse (under Modulo hashing the keys 0..8 share at most eight bins,
    // two before the first resize).
    with_shared_maps(|name, build| {
        for round in 0..3u64 {
            let map = build(1);
            let events = run_history(&*map, 4, 1, 3000, 8, 2, 0xBEEF + round);
            assert_linearizable(name, &events);
        }
    });
}

/// A map that is wrong under concurrency: insert checks and then inserts in
/// two critical sections, so two inserts of one key can both succeed.
#[derive(Default)]
struct CheckThenActMap {
    inner: Mutex<HashMap<u64, u64>>,
    gap: Option<Barrier>,
}

impl Ops for CheckThenActMap {
    fn get(&self, k: u64) -> Option<u64> {
        self.inner.lock().unwrap().get(&k).copied()
    }
    fn insert(&self, k: u64, v: u64) -> Result<(), u64> {
        if let Some(&old) = self.inner.lock().unwrap().get(&k) {
            return Err(old);
        }
        if let Some(b) = &self.gap {
            b.wait(); // both inserters have checked before either writes
        } else {
            std::thread::yield_now();
        }
        self.inner.lock().unwrap().insert(k, v);
        Ok(())
    }
    fn put(&self, k: u64, v: u64) -> Option<u64> {
        self.inner.lock().unwrap().get_mut(&k).map(|s| std::mem::replace(s, v))
    }
    fn remove(&self, k: u64) -> Option<u64> {
        self.inner.lock().unwrap().remove(&k)
    }
    fn upsert(&self, k: u64, v: u64) -> Option<u64> {
        self.inner.lock().unwrap().insert(k, v)
    }
}

#[test]
fn checker_rejects_a_broken_map_deterministically() {
    let map = CheckThenActMap { gap: Some(Barrier::new(2)), ..Default::default() };
    let clock = Clock::default();
    let events = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for v in [1u64, 2] {
            let (map, clock, events) = (&map, &clock, &events);
            s.spawn(move || {
                let invoked = clock.tick();
                let r = map.insert(7, v);
                let returned = clock.tick();
                events.lock().unwrap().push(Event { key: 7, call: Call::Insert(v, r), invoked, returned });
            });
        }
    });
    let events = events.into_inner().unwrap();
    assert!(matches!(check(&events, &HashMap::new()), Verdict::Violation { key: 7, .. }));
}

#[test]
fn checker_rejects_a_broken_map_under_the_random_harness() {
    // The same harness as the dlht tests, on the broken map: the checker
    // must find a violation within a few rounds.
    let mut caught = false;
    for round in 0..20 {
        let map = CheckThenActMap::default();
        let events = run_history(&map, 3, 0, 3000, 2, 2, 0xBAD + round);
        if matches!(check(&events, &HashMap::new()), Verdict::Violation { .. }) {
            caught = true;
            break;
        }
    }
    assert!(caught, "the checker never caught the check-then-act race");
}

#[test]
fn checker_accepts_a_mutex_map() {
    let map = CheckThenActMap::default();
    // Sequential use of the broken map is linearizable: no false alarms.
    let clock = Clock::default();
    let mut rng = Rng(99);
    let events: Vec<Event> = (0..2000)
        .map(|_| {
            let key = rng.below(3);
            record(&map, &clock, &mut rng, key, 2)
        })
        .collect();
    assert!(check_key(&events.iter().filter(|e| e.key == events[0].key).copied().collect::<Vec<_>>(), None));
    assert!(matches!(check(&events, &HashMap::new()), Verdict::Linearizable));
}
