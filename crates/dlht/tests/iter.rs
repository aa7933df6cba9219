//! `Map::iter`: every key present for the whole iteration is yielded once,
//! across concurrent resizes, removes and reinserts; the standard traits.
#![cfg(not(loom))]

mod common;

use common::stress_scale;
use dlht::{Map, Modulo};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

fn iterate_during_resizes<S: std::hash::BuildHasher + Default + Sync>(chunk: usize) {
    let mut overlapped = 0;
    for round in 0..3u64 {
        let map = Map::<u64, u64, S>::with_capacity_and_hasher(64, S::default()).with_transfer_chunk(chunk);
        let stable: Vec<u64> = (0..3000u64).map(|i| i * 3 + round).collect();
        for &k in &stable {
            map.insert(k, !k).unwrap();
        }
        let resizes = map.stats().resizes;
        let done = AtomicBool::new(false); // Relaxed: only ends the writer's loop
        std::thread::scope(|s| {
            let (map, done) = (&map, &done);
            s.spawn(move || {
                let mut i = 0u64;
                // At least `n` operations, and on until the iterations end
                // (bounded, for slow runs such as memcheck's).
                let n = (30_000.0 * stress_scale()) as u64;
                while i < 40 * n && (!done.load(Ordering::Relaxed) || i < n) {
                    map.insert(1 << 40 | i, i).unwrap();
                    let churn = 1 << 50 | (i % 512);
                    if i % 2 == 0 {
                        map.upsert(churn, i);
                    } else {
                        map.remove(&churn);
                    }
                    i += 1;
                }
            });
            let _stop = SetOnDrop(done); // also when an assertion fails
            let mut filler = 0u64;
            for pass in 0..4 {
                let mut seen = HashSet::new();
                let before = map.capacity();
                for (k, v) in map {
                    if seen.len() % 64 == 0 {
                        std::thread::yield_now(); // let the writer's resizes overlap too
                    }
                    if pass == 0 && seen.len() == stable.len() / 2 {
                        // Halfway through the first pass: grow the index
                        // from here, so a pass surely crosses a resize
                        // (later passes cross the writer's, if they do).
                        let cap = map.capacity();
                        while map.capacity() == cap {
                            map.insert(3 << 40 | round << 32 | filler, 0).unwrap();
                            filler += 1;
                        }
                    }
                    assert!(seen.insert(k), "key {k:#x} yielded twice");
                    if k >> 40 == 0 {
                        assert_eq!(v, !k, "stable key {k} with a value it never had");
                    }
                }
                for k in &stable {
                    assert!(seen.contains(k), "stable key {k} missed");
                }
                overlapped += (map.capacity() > before) as usize;
            }
        });
        assert!(map.stats().resizes > resizes, "the index grew during the iterations");
    }
    assert!(overlapped > 0, "no iteration overlapped a resize");
}

#[test]
fn iteration_yields_each_stable_key_once_across_resizes() {
    iterate_during_resizes::<dlht::DefaultHashBuilder>(16 * 1024);
    iterate_during_resizes::<dlht::DefaultHashBuilder>(1);
    iterate_during_resizes::<Modulo>(1);
}

#[test]
fn iteration_matches_the_contents_when_quiet() {
    let m = Map::<u64, u64>::with_capacity(8);
    let mut model = HashMap::new();
    for k in 0..20_000u64 {
        m.insert(k * 11, k).unwrap();
        model.insert(k * 11, k);
        if k % 3 == 0 {
            m.remove(&(k * 11));
            model.remove(&(k * 11));
        }
    }
    let got: HashMap<u64, u64> = m.iter().collect();
    assert_eq!(got, model);
    assert_eq!(m.iter().count(), m.len());
}

#[test]
fn standard_traits() {
    let mut m: Map<u32, u32> = (0..100).map(|k| (k, k + 1)).collect();
    m.extend([(5, 0), (200, 1)]);
    assert_eq!(m.len(), 101);
    assert_eq!(m.get(&5), Some(0));
    let small: Map<u8, u8> = [(1, 2)].into_iter().collect();
    assert_eq!(format!("{small:?}"), "{1: 2}");
    let d: Map<u64, u64> = Map::default();
    assert!(d.iter().next().is_none());
}

/// Sets the flag (Relaxed: it only ends loops) when dropped: stops the writer threads even when the
/// checking thread panics (they would otherwise run forever).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// An iterator held across grows and shrinks of the index it started in:
/// a class split by a grow, merged back by a shrink and split again must
/// still be read once. (Each bin of the shrunk index is reached from four
/// bins of the grown one; reading it once per path yielded keys up to
/// four times per cycle.) Deterministic: one thread iterates and resizes.
fn held_iterator_across_cycles<S: std::hash::BuildHasher + Default>() {
    let m = Map::<u64, u64, S>::with_hasher(S::default());
    let stable = 20_000u64;
    for k in 0..stable {
        m.insert(k.wrapping_mul(0x9E37_79B9_7F4A_7C15), k).unwrap();
    }
    let mut it = m.iter();
    let mut seen: Vec<u64> = it.next().into_iter().map(|(_, v)| v).collect();
    for cycle in 0..3u64 {
        let base = (cycle + 1) << 40;
        for i in 0..60_000 {
            m.insert(base | i, u64::MAX).unwrap(); // grows
        }
        for i in 0..60_000 {
            m.remove(&(base | i));
        }
        m.shrink_to_fit(); // shrinks
    }
    assert!(m.stats().shrinks >= 3, "{:?}", m.stats());
    seen.extend(it.filter(|&(_, v)| v != u64::MAX).map(|(_, v)| v));
    seen.sort_unstable();
    let n = seen.len();
    seen.dedup();
    assert_eq!((n, seen.len()), (stable as usize, stable as usize), "each stable key once");
}

#[test]
fn a_held_iterator_reads_each_key_once_across_grows_and_shrinks() {
    held_iterator_across_cycles::<dlht::DefaultHashBuilder>();
    held_iterator_across_cycles::<Modulo>();
}
