//! Whole-map operations of the allocator-mode maps: reserve,
//! shrinking, stats and prefetch on `AllocMap` and `ByteMap`, alone and
//! under concurrent readers.
#![cfg(not(loom))]

use dlht::{AllocMap, ByteMap};

const KEPT: u64 = 1000;
const FILL: u64 = 200_000;

#[test]
fn alloc_map_shrinks_under_readers_and_keeps_every_entry() {
    let m = AllocMap::<u64, String>::new();
    let g = m.guard();
    for k in 0..FILL {
        m.insert(k, k.to_string(), &g).unwrap();
    }
    // Removes shrink the index on their own too: measure before them.
    let big = m.capacity();
    for k in KEPT..FILL {
        assert_eq!(m.remove(&k, &g).map(String::as_str), Some(k.to_string().as_str()));
    }
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            for _ in 0..20 {
                let g = m.guard();
                for k in 0..KEPT {
                    m.prefetch(&k);
                    assert_eq!(m.get(&k, &g).map(String::as_str), Some(k.to_string().as_str()), "key {k}");
                }
            }
        });
        m.shrink_to_fit();
        reader.join().unwrap();
    });
    assert!(m.capacity() < big / 20, "capacity {} after shrinking from {big}", m.capacity());
    let stats = m.stats();
    assert_eq!((stats.occupied_slots, m.len()), (KEPT as usize, KEPT as usize));
    assert!(stats.shrinks >= 1, "{stats:?}");
    let mut keys: Vec<u64> = m.iter(&g).map(|(_, k, _)| *k).collect();
    keys.sort_unstable();
    assert_eq!(keys, (0..KEPT).collect::<Vec<_>>());
}

#[test]
fn alloc_map_reserve_makes_room_and_a_refused_one_changes_nothing() {
    let m = AllocMap::<String, u64>::new();
    let g = m.guard();
    m.insert("a".into(), 1, &g).unwrap();
    assert!(m.try_reserve(usize::MAX).is_err());
    assert!(m.try_reserve(usize::MAX / 2).is_err());
    assert_eq!((m.len(), m.get("a", &g).copied()), (1, Some(1)));
    m.reserve(50_000);
    assert!(m.capacity() >= 50_001, "capacity {}", m.capacity());
    let resizes = m.stats().resizes;
    for k in 0..50_000u64 {
        m.insert(k.to_string(), k, &g).unwrap();
    }
    assert_eq!(m.stats().resizes, resizes, "inserts within the reserve resized");
    m.shrink_to(60_000);
    assert!(m.capacity() >= 60_000);
    assert_eq!(m.len(), 50_001);
}

#[test]
fn byte_map_shrinks_under_readers_and_keeps_every_entry() {
    let m = ByteMap::new();
    let g = m.guard();
    // Short keys live in the slot, long ones in the entry: both kinds.
    let key = |k: u64| {
        if k % 2 == 0 {
            k.to_le_bytes().to_vec()
        } else {
            format!("a long key {k:020}").into_bytes()
        }
    };
    for k in 0..FILL {
        assert!(m.insert(&key(k), &k.to_le_bytes(), &g).unwrap().is_ok());
    }
    let big = m.capacity();
    for k in KEPT..FILL {
        assert!(m.remove(&key(k), &g).is_some());
    }
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            for _ in 0..20 {
                let g = m.guard();
                for k in 0..KEPT {
                    m.prefetch(&key(k));
                    assert_eq!(m.get(&key(k), &g).as_deref(), Some(&k.to_le_bytes()[..]), "key {k}");
                }
            }
        });
        m.shrink_to_fit();
        reader.join().unwrap();
    });
    assert!(m.capacity() < big / 20, "capacity {} after shrinking from {big}", m.capacity());
    assert_eq!((m.stats().occupied_slots, m.len()), (KEPT as usize, KEPT as usize));
    m.reserve(10_000);
    assert!(m.capacity() >= KEPT as usize + 10_000);
    assert!(m.try_reserve(usize::MAX).is_err());
    assert_eq!(m.len(), KEPT as usize);
}
