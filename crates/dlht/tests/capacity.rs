//! `reserve`: growing ahead of a load keeps every key, never blocks readers
//! or writers racing it, and refuses absurd sizes with an error.
#![cfg(not(loom))]

use dlht::{Error, LocalMap, Map};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn reserve_makes_room_and_keeps_the_contents() {
    let m = Map::<u64, u64>::new();
    let l = LocalMap::<u64, u64>::new();
    for k in 0..1000 {
        m.insert(k, k).unwrap();
        l.insert(k, k).unwrap();
    }
    m.reserve(200_000);
    l.reserve(200_000);
    assert!(m.capacity() >= 201_000, "{}", m.capacity());
    assert!(l.capacity() >= 201_000, "{}", l.capacity());
    for k in 0..1000 {
        assert_eq!(m.get(&k), Some(k));
        assert_eq!(l.get(&k), Some(k));
    }
    // Enough room already: nothing happens.
    let (cap, resizes) = (m.capacity(), m.stats().resizes);
    m.reserve(10);
    assert_eq!((m.capacity(), m.stats().resizes), (cap, resizes));
}

#[test]
fn absurd_reservations_are_errors_and_change_nothing() {
    let m = Map::<u64, u64>::new();
    m.insert(1, 1).unwrap();
    let cap = m.capacity();
    assert_eq!(m.try_reserve(usize::MAX), Err(Error::CapacityOverflow));
    assert_eq!(m.try_reserve(1 << 62), Err(Error::CapacityOverflow));
    assert_eq!((m.capacity(), m.get(&1)), (cap, Some(1)));
    let l = LocalMap::<u64, u64>::new();
    assert_eq!(l.try_reserve(usize::MAX), Err(Error::CapacityOverflow));
}

#[test]
fn reserve_races_inserts_and_gets_without_losing_a_key() {
    for round in 0..3u64 {
        let m = Map::<u64, u64>::with_capacity(64);
        for k in 0..500 {
            m.insert(k, k).unwrap();
        }
        // Relaxed: only ends the readers' loop.
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    for k in 0..500 {
                        assert_eq!(m.get(&k), Some(k), "round {round}: a present key missed");
                    }
                }
            });
            let writer = s.spawn(|| {
                for k in 0..20_000u64 {
                    m.insert(1_000 + k, k).unwrap();
                }
            });
            for step in 1..=8usize {
                m.reserve(step * 10_000);
            }
            writer.join().unwrap();
            done.store(true, Ordering::Relaxed);
        });
        assert_eq!(m.len(), 20_500);
        for k in 0..20_000u64 {
            assert_eq!(m.get(&(1_000 + k)), Some(k));
        }
    }
}
