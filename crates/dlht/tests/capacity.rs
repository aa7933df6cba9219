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

/// A map built for `n` keys and holding them keeps its index under
/// insert/remove churn: links stay chained when they empty, so churn
/// chains one to every bin that ever holds four keys, and at two keys per
/// bin that once ran the inserts' link limit out and doubled the index
/// within a few million pairs. The limit is raised instead while the map
/// holds fewer keys than a grow is for; a map that really fills still
/// grows.
#[test]
fn churn_at_capacity_does_not_grow_a_presized_map() {
    const N: u64 = 1 << 16;
    let fresh = |i: u64| (1u64 << 63) | i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 1;
    let m = Map::<u64, u64>::with_capacity(N as usize);
    let l = LocalMap::<u64, u64>::with_capacity(N as usize);
    for k in 0..N {
        m.insert(k, k).unwrap();
        l.insert(k, k).unwrap();
    }
    let (bins, lbins) = (m.stats().bins, l.stats().bins);
    assert_eq!(bins as u64, N / 2, "two keys per bin");
    for i in 0..8 * N {
        m.insert(fresh(i), i).unwrap();
        l.insert(fresh(i), i).unwrap();
        assert_eq!(m.remove(&fresh(i)), Some(i));
        assert_eq!(l.remove(&fresh(i)), Some(i));
    }
    let (s, ls) = (m.stats(), l.stats());
    assert_eq!((s.resizes, s.bins), (0, bins), "Map grew under churn: {s:?}");
    assert_eq!((ls.resizes, ls.bins), (0, lbins), "LocalMap grew under churn: {ls:?}");
    assert!(s.link_buckets_in_use <= bins + 8 + 4096, "{s:?}");
    assert_eq!((m.len(), l.len()), (N as usize, N as usize));
    assert!((0..N).all(|k| m.get(&k) == Some(k) && l.get(&k) == Some(k)));
    // Filling on does grow it.
    for k in N..3 * N {
        m.insert(k, k).unwrap();
        l.insert(k, k).unwrap();
    }
    assert!(m.stats().bins > bins && l.stats().bins > lbins);
}
