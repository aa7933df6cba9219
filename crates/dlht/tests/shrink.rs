//! Shrinking, explicit (`shrink_to_fit`) and automatic: contents checked
//! after every shrink, an uneven hash that forces a shrink to fall back,
//! and linearizable histories while another thread fills and drains the
//! map (shrinks and grows racing every operation).
#![cfg(not(loom))]

mod common;

use common::lin::{assert_linearizable, record, Clock};
use common::{with_maps, with_shared_maps, MapUnderTest, Rng};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Keys spread over the bins under both hashers (the identity-like
/// `Modulo` included).
fn spread(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[test]
fn drained_maps_shrink_on_their_own_and_keep_their_keys() {
    with_maps(|name, build| {
        let m = build(1);
        let n = 1u64 << 16;
        for i in 0..n {
            m.insert(spread(i), i).unwrap();
        }
        let full = m.stats().bins;
        for i in 100..n {
            assert_eq!(m.remove(spread(i)), Some(i), "{name}");
        }
        let s = m.stats();
        // A thread of a `Map` checks every 1024 removes, so the last shrink
        // came with about a thousand keys left (a `LocalMap` checks always).
        assert!(s.shrinks >= 1 && s.bins * 4 <= full, "{name}: {s:?}, from {full} bins");
        assert_eq!((m.len(), s.occupied_slots), (100, 100), "{name}");
        for i in 0..100 {
            assert_eq!(m.get(spread(i)), Some(i), "{name}");
        }
        m.shrink_to_fit();
        let s = m.stats();
        assert!(s.bins <= 128, "{name}: shrink_to_fit: {s:?}");
        assert_eq!(s.indexes_awaiting_free, 0, "{name}: replaced indexes are freed");
        for i in 0..100 {
            assert_eq!(m.get(spread(i)), Some(i), "{name}");
        }
        // And it grows again.
        for i in 100..n {
            m.insert(spread(i), i).unwrap();
        }
        assert_eq!(m.len(), n as usize, "{name}");
    });
}

/// Under `Modulo` a key's bin is its low bits: 8 keys in bin 0 and 8 in
/// bin 4096 of an 8192-bin index, which every shrink below 4096 bins would
/// merge into one bin of 16.
fn heavy_keys() -> Vec<u64> {
    (1..=8u64).flat_map(|j| [j << 13, (j << 13) | 1 << 12]).collect()
}

/// Light keys `1..LIGHT_END`: below the bin count any shrink here reaches
/// (64 bins for these 75 keys), so none lands in a heavy key's bin.
const LIGHT_END: u64 = 60;

fn uneven_check(name: &str, m: &dyn MapUnderTest) {
    let heavy = heavy_keys();
    for (i, &k) in heavy.iter().enumerate() {
        m.insert(k, i as u64).unwrap();
    }
    for k in 1..LIGHT_END {
        m.insert(k, k).unwrap();
    }
    let before = m.stats();
    assert_eq!(before.bins, 8192, "{name}");
    m.shrink_to_fit();
    let s = m.stats();
    assert_eq!((s.shrinks, s.shrinks_fell_back, s.bins), (1, 1, 8192), "{name}: {s:?}");
    let check = |m: &dyn MapUnderTest, heavy: &[u64]| {
        for (i, &k) in heavy.iter().enumerate() {
            assert_eq!(m.get(k), Some(i as u64), "{name}: heavy key {k}");
        }
        for k in 1..LIGHT_END {
            assert_eq!(m.get(k), Some(k), "{name}");
        }
        assert_eq!(m.len(), heavy.len() + LIGHT_END as usize - 1, "{name}");
        assert_eq!(m.stats().occupied_slots, heavy.len() + LIGHT_END as usize - 1, "{name}");
    };
    check(m, &heavy);
    // One key fewer and the merge fits.
    assert_eq!(m.remove(heavy[15]), Some(15));
    m.shrink_to_fit();
    let s = m.stats();
    assert!(s.shrinks >= 2 && s.shrinks_fell_back == 1 && s.bins <= 128, "{name}: {s:?}");
    check(m, &heavy[..15]);
}

#[test]
fn a_shrink_that_cannot_merge_falls_back_and_loses_nothing() {
    let m = dlht::Map::<u64, u64, dlht::Modulo>::with_capacity_and_hasher(12_000, dlht::Modulo);
    uneven_check("Map", &m);
    let m = dlht::Map::<u64, u64, dlht::Modulo>::with_capacity_and_hasher(12_000, dlht::Modulo)
        .with_transfer_chunk(common::SMALL_CHUNK);
    uneven_check("Map, 1-bin chunks", &m);
    let m = dlht::LocalMap::<u64, u64, dlht::Modulo>::with_capacity_and_hasher(12_000, dlht::Modulo);
    uneven_check("LocalMap", &m);
}

#[test]
fn automatic_shrinking_backs_off_after_a_fallback() {
    // Heavy keys that cannot merge: an automatic shrink falls back, and
    // later checks wait for half as many keys instead of retrying at every
    // remove (a `LocalMap` checks at every remove): a few attempts, not
    // thousands.
    let m = dlht::LocalMap::<u64, u64, dlht::Modulo>::with_hasher(dlht::Modulo);
    for &k in &heavy_keys() {
        m.insert(k, k).unwrap();
    }
    for i in 0..8000 {
        m.insert((1 << 40) | i, i).unwrap();
    }
    assert_eq!(m.stats().bins, 8192);
    for i in 0..8000 {
        m.remove(&((1 << 40) | i));
    }
    let s = m.stats();
    assert!((1..=12).contains(&s.shrinks_fell_back), "{s:?}");
    assert_eq!(s.shrinks, s.shrinks_fell_back, "{s:?}");
    assert_eq!(m.len(), 16);
    for &k in &heavy_keys() {
        assert_eq!(m.get(&k), Some(k));
    }
}

#[test]
fn automatic_shrinking_resumes_once_the_keys_that_crowded_a_bin_are_gone() {
    // A fallback once made automatic shrinking wait for half as many keys
    // for good: a map whose uneven keys left, but whose count stayed put,
    // kept its large index. Now it tries again after as many removes as it
    // had keys (and an eighth of its bins).
    fn check(name: &str, m: &dyn MapUnderTest) {
        for &k in &heavy_keys() {
            m.insert(k, k).unwrap();
        }
        for i in 0..8000 {
            m.insert((1 << 40) | i, i).unwrap();
        }
        assert_eq!(m.stats().bins, 8192, "{name}");
        for i in 100..8000 {
            m.remove((1 << 40) | i);
        }
        m.shrink_to_fit(); // falls back: the heavy keys cannot merge
        let s = m.stats();
        assert!(s.shrinks_fell_back >= 1 && s.bins == 8192, "{name}: {s:?}");
        for &k in &heavy_keys() {
            assert_eq!(m.remove(k), Some(k), "{name}");
        }
        // Churn: as many keys as before, different ones.
        for i in 0..5000u64 {
            assert_eq!(m.remove((1 << 40) | i), Some(i), "{name}");
            m.insert((1 << 40) | (i + 100), i + 100).unwrap();
        }
        let s = m.stats();
        assert_eq!(m.len(), 100, "{name}");
        assert!(s.bins <= 1024, "{name}: still {} bins for 100 keys: {s:?}", s.bins);
        for i in 5000..5100u64 {
            assert_eq!(m.get((1 << 40) | i), Some(i), "{name}");
        }
    }
    check("Map", &dlht::Map::<u64, u64, dlht::Modulo>::with_hasher(dlht::Modulo));
    check("LocalMap", &dlht::LocalMap::<u64, u64, dlht::Modulo>::with_hasher(dlht::Modulo));
}

#[test]
fn a_cleared_local_map_shrinks_all_the_way() {
    // `clear` and `retain` remove without `run`, then shrink: once by at
    // most 16x, which left an emptied map of 2^16 keys at 4096 bins.
    for emptied in ["clear", "retain"] {
        let mut m = dlht::LocalMap::<u64, u64>::new();
        for k in 0..1 << 16 {
            m.insert(k, k).unwrap();
        }
        let full = m.stats().bins;
        match emptied {
            "clear" => assert_eq!(m.clear(), 1 << 16),
            _ => assert_eq!(m.retain(|k, _| k < 3), (1 << 16) - 3),
        }
        let s = m.stats();
        assert!(s.bins <= 16 && s.shrinks >= 2, "{emptied}: {} bins left of {full}: {s:?}", s.bins);
        assert_eq!(m.len(), s.occupied_slots);
        m.insert(1 << 20, 0).unwrap();
    }
}

/// Recorded threads run random operations on a few hot keys while a filler
/// thread cycles: insert the heavy keys and 8000 others (growing), remove
/// the others (automatic shrinks), `shrink_to_fit` (under `Modulo` it falls
/// back: the heavy keys share bin 0 with hot key 0), remove the heavy keys,
/// `shrink_to_fit` again. The filler runs at least two cycles; recorded
/// threads pace their operations (a short spin between them) so that they
/// overlap the filler's, and stop after two cycles or `MAX_OPS`.
fn fill_drain_history(map: &(dyn MapUnderTest + Sync), threads: usize, seed: u64) -> Vec<common::lin::Event> {
    const MIN_OPS: usize = 2000;
    const MAX_OPS: usize = 6000;
    let clock = Clock::default();
    let events = Mutex::new(Vec::new());
    let (done, cycles) = (AtomicUsize::new(0), AtomicUsize::new(0));
    /// Counts a recorded thread as done even if it panics, so the filler
    /// stops and the panic is reported instead of a hang.
    struct Done<'a>(&'a AtomicUsize);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            let (clock, events, done, cycles) = (&clock, &events, &done, &cycles);
            s.spawn(move || {
                let _done = Done(done);
                let mut rng = Rng(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                let mut mine = Vec::new();
                while mine.len() < MIN_OPS || (cycles.load(Ordering::SeqCst) < 2 && mine.len() < MAX_OPS) {
                    let key = rng.below(6);
                    mine.push(record(map, clock, &mut rng, key, 2));
                    for _ in 0..rng.below(2000) {
                        std::hint::spin_loop();
                    }
                }
                events.lock().unwrap().extend(mine);
            });
        }
        s.spawn(|| {
            let heavy = heavy_keys();
            while done.load(Ordering::SeqCst) < threads || cycles.load(Ordering::SeqCst) < 2 {
                for &k in &heavy {
                    map.insert(k, k).unwrap();
                }
                for i in 0..8000 {
                    map.insert((1 << 40) | i, i).unwrap();
                }
                for i in 0..8000 {
                    assert_eq!(map.remove((1 << 40) | i), Some(i));
                }
                map.shrink_to_fit();
                for &k in &heavy {
                    assert_eq!(map.remove(k), Some(k));
                }
                map.shrink_to_fit();
                cycles.fetch_add(1, Ordering::SeqCst);
            }
        });
    });
    events.into_inner().unwrap()
}

#[test]
fn histories_are_linearizable_while_a_thread_fills_and_drains() {
    with_shared_maps(|name, build| {
        for round in 0..2u64 {
            let map = build(1);
            let events = fill_drain_history(&*map, 3, 0x5412 + round);
            let s = map.stats();
            assert!(s.shrinks >= 2, "{name}: shrinks were forced: {s:?}");
            if name.contains("modulo") {
                assert!(s.shrinks_fell_back >= 1, "{name}: fallbacks were forced: {s:?}");
            }
            assert_linearizable(name, &events);
        }
    });
}
