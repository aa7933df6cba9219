//! Index lifetime (hazard 4) and link accounting (hazard 6).
//!
//! Readers hammer a map that grows hundreds of times (many small maps in a
//! row), so an old index freed while a reader is inside is read after free.
//! Debug builds poison freed indexes (bin state 0b11 panics), and mapped
//! ones are unmapped, so such a read fails loudly.
#![cfg(not(loom))]

mod common;

use dlht::Map;
use std::sync::atomic::{AtomicBool, Ordering};

/// `n` times `DLHT_STRESS_SCALE`, at least 2.
fn scaled(n: u64) -> u64 {
    ((n as f64 * common::stress_scale()) as u64).max(2)
}

#[test]
fn readers_survive_hundreds_of_resizes() {
    let mut total_resizes = 0;
    let rounds = scaled(24);
    for round in 0..rounds {
        let map = Map::<u64, u64>::with_capacity(1);
        for k in 0..64 {
            map.insert(k, k + round).unwrap();
        }
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for r in 0..2u64 {
                let (map, stop) = (&map, &stop);
                s.spawn(move || {
                    let mut i = r;
                    while !stop.load(Ordering::Relaxed) {
                        // Keys 0..64 are inserted first and never removed.
                        assert_eq!(map.get(&(i % 64)), Some(i % 64 + round), "a stable key vanished");
                        i = i.wrapping_add(7);
                    }
                });
            }
            for k in 64..20_000u64 {
                map.insert(k, k).unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        let s = map.stats();
        assert_eq!(s.indexes_awaiting_free, 0, "old indexes are eventually freed");
        total_resizes += s.resizes;
    }
    // 20 000 keys cannot fit 1024 bins (3584 slots), so every round grows
    // 2 → 16 → 128 → 1024 → 8192 bins at least; a fifth resize depends on
    // the seed (100 was flaky: a valgrind run saw 96).
    assert!(total_resizes >= rounds as usize * 4, "only {total_resizes} resizes");
}

#[test]
fn dropping_a_grown_map_frees_everything() {
    // Indexes retired while a reader was inside are freed by stats() or drop;
    // under Miri or ASan this would flag a leak; here we check the counters.
    let map = Map::<u64, u64>::with_capacity(1);
    for k in 0..100_000u64 {
        map.insert(k, k).unwrap();
    }
    let s = map.stats();
    assert!(s.resizes >= 5);
    assert_eq!(s.indexes_awaiting_free, 0);
}

#[test]
fn link_chaining_races_are_counted() {
    // Many threads insert distinct keys into a table whose bins must chain
    // link buckets concurrently. Every claimed link bucket is either chained
    // or counted as leaked; nothing is lost.
    for _ in 0..scaled(20) {
        let map = Map::<u64, u64>::with_capacity(3000);
        let before = map.stats();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let map = &map;
                s.spawn(move || {
                    for i in 0..700u64 {
                        map.insert(t << 32 | i, i).unwrap();
                    }
                });
            }
        });
        let s = map.stats();
        assert_eq!(s.occupied_slots, 2800);
        if s.resizes == before.resizes {
            assert!(s.link_buckets_in_use + s.link_buckets_leaked <= s.link_buckets + 8);
        }
    }
}
