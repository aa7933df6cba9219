//! Shadow inserts: hidden from get, put, remove and iteration until
//! committed; a plain insert of a held key waits for the outcome; commits
//! and aborts racing plain operations and resizes keep every key's history
//! linearizable (a commit counts as an insert that succeeds).
#![cfg(not(loom))]

mod common;

use common::lin::{check, Call, Clock, Event, Verdict};
use common::Rng;
use dlht::{Map, Modulo, ShadowRefused};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

#[test]
fn a_shadowed_key_is_hidden_until_committed() {
    let m = Map::<u64, u64>::with_capacity(16);
    let held = m.shadow_insert(5, 50).unwrap();
    assert_eq!(held.key(), 5);
    assert_eq!(m.get(&5), None);
    assert_eq!(m.put(5, 1), None);
    assert_eq!(m.remove(&5), None);
    assert_eq!(m.len(), 0);
    assert_eq!(m.iter().count(), 0);
    assert_eq!(m.shadow_insert(5, 51).err(), Some(ShadowRefused::Shadowed));
    held.commit();
    assert_eq!(m.get(&5), Some(50));
    assert_eq!(m.len(), 1);
    assert_eq!(m.iter().collect::<Vec<_>>(), [(5, 50)]);
    // Dropping the handle aborts.
    drop(m.shadow_insert(6, 60).unwrap());
    assert_eq!(m.get(&6), None);
    assert_eq!(m.insert(6, 61), Ok(()));
}

#[test]
fn an_insert_of_a_held_key_waits_for_the_outcome() {
    let m = Map::<u64, u64>::new();
    for commit in [true, false] {
        let held = m.shadow_insert(7, 70).unwrap();
        let inserted = AtomicBool::new(false);
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                let r = m.insert(7, 71);
                inserted.store(true, Ordering::SeqCst);
                r
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(!inserted.load(Ordering::SeqCst), "the insert waits while the key is held");
            if commit {
                held.commit();
                assert_eq!(t.join().unwrap(), Err(70));
            } else {
                held.abort();
                assert_eq!(t.join().unwrap(), Ok(()));
            }
        });
        assert_eq!(m.remove(&7), Some(if commit { 70 } else { 71 }));
    }
}

#[test]
fn shadows_survive_resizes() {
    let m = Map::<u64, u64, Modulo>::with_capacity_and_hasher(2, Modulo);
    let held: Vec<_> = (0..200u64).map(|k| m.shadow_insert(k * 2, k).unwrap()).collect();
    for k in 0..5000u64 {
        m.insert(1_000_000 + k, k).unwrap(); // grows the index many times
    }
    assert!(m.stats().resizes > 3);
    assert_eq!(m.len(), 5000);
    for (i, h) in held.into_iter().enumerate() {
        if i % 2 == 0 {
            h.commit();
        } else {
            h.abort();
        }
    }
    for k in 0..200u64 {
        assert_eq!(m.get(&(k * 2)), (k % 2 == 0).then_some(k), "key {}", k * 2);
    }
    assert_eq!(m.len(), 5100);
}

#[test]
fn shadow_histories_are_linearizable_under_resizes() {
    for round in 0..3u64 {
        let map = Map::<u64, u64>::with_capacity(1).with_transfer_chunk(1);
        let clock = Clock::default();
        let events = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..3u64 {
                let (map, clock, events) = (&map, &clock, &events);
                s.spawn(move || {
                    let mut rng = Rng(((round << 8) | (t + 1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                    let mut mine = Vec::new();
                    for _ in 0..3000 {
                        let key = rng.below(4);
                        let v = 1 + rng.below(2);
                        let invoked = clock.tick();
                        let call = match rng.below(8) {
                            0 => Call::Get(map.get(&key)),
                            1 => Call::Remove(map.remove(&key)),
                            2 => Call::Put(v, map.put(key, v)),
                            3 => Call::Insert(v, map.insert(key, v)),
                            _ => match map.shadow_insert(key, v) {
                                // Refused because present: an insert that
                                // found the value.
                                Err(ShadowRefused::Present(cur)) => Call::Insert(v, Err(cur)),
                                Err(ShadowRefused::Shadowed) => continue,
                                Ok(held) => {
                                    // Hidden meanwhile: check, then commit
                                    // (an insert, invoked at the commit) or
                                    // abort (nothing happened).
                                    assert_eq!(map.get(&key), None, "a held key is hidden");
                                    if rng.below(3) == 0 {
                                        held.abort();
                                        continue;
                                    }
                                    let invoked = clock.tick();
                                    held.commit();
                                    let returned = clock.tick();
                                    mine.push(Event {
                                        key,
                                        call: Call::Insert(v, Ok(())),
                                        invoked,
                                        returned,
                                    });
                                    continue;
                                }
                            },
                        };
                        let returned = clock.tick();
                        mine.push(Event { key, call, invoked, returned });
                    }
                    events.lock().unwrap().extend(mine);
                });
            }
            let map = &map;
            s.spawn(move || {
                for i in 0..12_000u64 {
                    map.insert(1 << 40 | i, i).unwrap(); // forces resizes
                }
            });
        });
        assert!(map.stats().resizes >= 3);
        if let Verdict::Violation { key, history } = check(&events.into_inner().unwrap(), &HashMap::new()) {
            panic!("history of key {key} is not linearizable: {history:?}");
        }
    }
}
