//! The `rayon` feature: parallel iteration yields what sequential iteration
//! does, each stable key once even across concurrent resizes (grows and
//! shrinks), and parallel extension equals sequential extension.
#![cfg(not(loom))]

mod common;

use dlht::{Map, Set};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[test]
fn par_iter_yields_the_contents() {
    let m = Map::<u64, u64>::new();
    for k in 0..100_000u64 {
        m.insert(k, k * 3).unwrap();
    }
    let mut seq: Vec<_> = m.iter().collect();
    let mut par: Vec<_> = m.par_iter().collect();
    seq.sort_unstable();
    par.sort_unstable();
    assert_eq!(par, seq);
    assert_eq!(par.len(), 100_000);
    let empty = Map::<u64, u64>::new();
    assert_eq!(empty.par_iter().count(), 0);
}

#[test]
fn par_iter_yields_each_stable_key_once_across_resizes() {
    // Stable keys stay; a writer grows the map with others and drains them
    // again (automatic shrinks) while parallel iterations run.
    let m = Map::<u64, u64>::new();
    let stable = 20_000u64;
    for k in 0..stable {
        m.insert(k, k).unwrap();
    }
    let stop = AtomicBool::new(false);
    let rounds = AtomicUsize::new(0);
    let resizes_before = m.stats().resizes;
    std::thread::scope(|s| {
        s.spawn(|| loop {
            // At least one round, whatever the other thread does.
            let round = rounds.load(Ordering::SeqCst) as u64;
            let base = (round + 1) << 32;
            for i in 0..60_000 {
                m.insert(base | i, i).unwrap();
            }
            for i in 0..60_000 {
                assert_eq!(m.remove(&(base | i)), Some(i));
            }
            m.shrink_to_fit();
            rounds.fetch_add(1, Ordering::SeqCst);
            if stop.load(Ordering::SeqCst) {
                break;
            }
        });
        let _stop = common::SetOnDrop(&stop);
        // Iterate until the writer finished two rounds (and at least 20
        // times), so that iterations overlap its grows and shrinks.
        let mut iterations = 0;
        while iterations < 20 || rounds.load(Ordering::SeqCst) < 2 {
            let mut seen: Vec<u64> = m.par_iter().map(|(k, _)| k).filter(|&k| k < stable).collect();
            seen.sort_unstable();
            assert_eq!(seen.len() as u64, stable, "a stable key was missed or yielded twice");
            assert!(seen.iter().enumerate().all(|(i, &k)| i as u64 == k));
            iterations += 1;
        }
    });
    assert!(m.stats().resizes > resizes_before, "resizes ran meanwhile");
}

#[test]
fn par_extend_matches_sequential_extend() {
    let pairs: Vec<(u64, u64)> = (0..50_000u64).map(|k| (k.wrapping_mul(0x9E37_79B9_7F4A_7C15), k)).collect();
    let par: Map<u64, u64> = pairs.par_iter().copied().collect();
    let seq: Map<u64, u64> = pairs.iter().copied().collect();
    assert_eq!(par, seq);
    // Through a shared reference, while another thread reads.
    let shared = Map::<u64, u64>::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Reads race the extension: each key is absent or has its value.
            for &(k, v) in pairs.iter().rev().take(1000) {
                if let Some(got) = shared.get(&k) {
                    assert_eq!(got, v);
                }
            }
        });
        (&shared).par_extend(pairs.par_iter().copied());
    });
    assert_eq!(shared, seq);
}

#[test]
fn sets_iterate_and_extend_in_parallel() {
    let s: Set<u64> = (0..30_000u64).into_par_iter().collect();
    assert_eq!(s.len(), 30_000);
    let mut keys: Vec<u64> = s.par_iter().collect();
    keys.sort_unstable();
    assert!(keys.iter().copied().eq(0..30_000));
    (&s).par_extend((30_000..40_000u64).into_par_iter());
    assert_eq!(s.par_iter().count(), 40_000);
}

/// `AllocMap` and `ByteMap` (every namespace, collision lists, inline and
/// stored keys): the parallel iterator yields what the sequential one
/// does, each stable entry once while a writer grows and shrinks the map
/// and replaces values (the old ones retired while the workers read);
/// parallel extension and collection equal sequential insertion.
#[test]
fn allocator_modes_par_iter_each_stable_entry_once_under_resizes() {
    use dlht::{AllocMap, ByteMap};
    let m: AllocMap<u64, String, common::FewBits<12>> = AllocMap::with_hasher(Default::default());
    let b: ByteMap = ByteMap::new();
    let stable = 20_000u64;
    {
        let g = m.guard();
        for k in 0..stable {
            m.namespace((k % 3) as usize).unwrap().insert(k, k.to_string(), &g).unwrap();
            let key =
                if k % 2 == 0 { k.to_le_bytes().to_vec() } else { format!("stored key {k}").into_bytes() };
            b.insert(&key, &k.to_le_bytes(), &g).unwrap().unwrap();
        }
    }
    let stop = AtomicBool::new(false);
    let rounds = AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| loop {
            let g = m.guard();
            let base = 1 << 40;
            for i in 0..30_000 {
                m.insert(base | i, String::new(), &g).unwrap();
                b.insert(&(base | i).to_le_bytes(), b"", &g).unwrap().unwrap();
                // Replace a stable entry with an equal value: old ones retire.
                let k = i % stable;
                m.namespace((k % 3) as usize).unwrap().upsert(k, k.to_string(), &g);
            }
            for i in 0..30_000 {
                assert!(m.remove(&(base | i), &g).is_some());
                assert!(b.remove(&(base | i).to_le_bytes(), &g).is_some());
            }
            m.shrink_to_fit();
            b.shrink_to_fit();
            rounds.fetch_add(1, Ordering::SeqCst);
            if stop.load(Ordering::SeqCst) {
                break;
            }
        });
        let _stop = common::SetOnDrop(&stop);
        let mut iterations = 0;
        while iterations < 10 || rounds.load(Ordering::SeqCst) < 2 {
            let g = m.guard();
            let seen: Vec<(usize, u64)> = m
                .par_iter(&g)
                .filter(|(_, k, _)| **k < stable)
                .map(|(ns, k, v)| {
                    assert_eq!(*v, k.to_string());
                    (ns, *k)
                })
                .collect();
            let want: Vec<(usize, u64)> = (0..stable).map(|k| ((k % 3) as usize, k)).collect();
            assert_each_once("AllocMap", seen, want);
            let values: Vec<u64> = b
                .par_iter(&g)
                .filter(|(_, _, v)| v.len() == 8)
                .map(|(_, k, v)| {
                    let v = u64::from_le_bytes(v.as_bytes().try_into().unwrap());
                    let want = if v % 2 == 0 {
                        v.to_le_bytes().to_vec()
                    } else {
                        format!("stored key {v}").into_bytes()
                    };
                    assert_eq!(&*k, &want[..]);
                    v
                })
                .collect();
            assert_each_once("ByteMap", values, (0..stable).collect());
            iterations += 1;
        }
    });
    assert!(m.stats().resizes >= 2 && b.stats().resizes >= 2);

    let par: AllocMap<u64, String> = (0..5000u64).into_par_iter().map(|k| (k, k.to_string())).collect();
    let seq: AllocMap<u64, String> = (0..5000u64).map(|k| (k, k.to_string())).collect();
    assert!(par == seq);
    let par: ByteMap = (0..5000u64).into_par_iter().map(|k| (k.to_string(), k.to_le_bytes())).collect();
    let seq: ByteMap = (0..5000u64).map(|k| (k.to_string(), k.to_le_bytes())).collect();
    assert!(par == seq);
}

/// `seen` holds each of `want` exactly once; a failure names a few missing
/// and repeated items (not the whole lists).
fn assert_each_once<T: Ord + Copy + std::fmt::Debug>(name: &str, mut seen: Vec<T>, mut want: Vec<T>) {
    seen.sort_unstable();
    want.sort_unstable();
    if seen != want {
        let repeated: Vec<T> = seen.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).take(5).collect();
        let missing: Vec<T> =
            want.iter().filter(|w| seen.binary_search(w).is_err()).copied().take(5).collect();
        panic!("{name}: {} items for {}; repeated {repeated:?}, missing {missing:?}", seen.len(), want.len());
    }
}
