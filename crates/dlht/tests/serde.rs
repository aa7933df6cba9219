//! serde (feature `serde`): maps and sets (allocator-mode maps with their
//! namespaces) round-trip through JSON; bad input is an error, not a
//! panic; a key given twice keeps its last value; serialization is one
//! instant under concurrent updates.
#![cfg(all(not(loom), feature = "serde"))]

mod common;

use dlht::{AllocMap, ByteMap, Map, Set};

#[test]
fn maps_and_sets_round_trip() {
    let m: Map<u64, i32> = (0..1000u64).map(|k| (k, -(k as i32))).collect();
    let json = serde_json::to_string(&m).unwrap();
    let back: Map<u64, i32> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, m);
    assert_eq!(back.len(), 1000);
    let s: Set<u32> = (0..500u32).collect();
    let back: Set<u32> = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back.len(), 500);
    assert!((0..500).all(|k| back.contains(&k)));
}

#[test]
fn a_key_given_twice_keeps_its_last_value() {
    let m: Map<u64, u64> = serde_json::from_str(r#"{"1": 10, "2": 20, "1": 11}"#).unwrap();
    assert_eq!((m.get(&1), m.get(&2), m.len()), (Some(11), Some(20), 2));
}

#[test]
fn malformed_input_is_an_error() {
    assert!(serde_json::from_str::<Map<u64, u64>>(r#"{"1": "ten"}"#).is_err());
    assert!(serde_json::from_str::<Map<u64, u64>>(r#"[1, 2]"#).is_err());
    assert!(serde_json::from_str::<Map<u8, u8>>(r#"{"300": 1}"#).is_err());
    assert!(serde_json::from_str::<Set<u64>>(r#"{"1": 1}"#).is_err());
}

#[test]
fn serializing_under_concurrent_updates_gives_one_instant() {
    // A writer keeps the two keys' values equal at every instant (it moves
    // a token between them with one upsert each, so the sum is 1 or 2);
    // every serialized snapshot must show a state some instant had.
    // Filler keys make a walk long enough for the writer to move the token
    // many times between reading one key and the other: a serialization
    // that walked the map instead of taking a snapshot would show (0, 0).
    let m: Map<u64, u64> = (2..20_000u64).map(|k| (k, k)).collect();
    m.insert(0, 1).unwrap();
    m.insert(1, 0).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false); // Relaxed: ends the loop only
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // The token moves: (1, 0) → (1, 1) → (0, 1) → (1, 1) → (1, 0).
                m.upsert(1, 1);
                m.upsert(0, 0);
                m.upsert(0, 1);
                m.upsert(1, 0);
            }
        });
        let _stop = common::SetOnDrop(&stop);
        for _ in 0..200 {
            let snap: std::collections::HashMap<u64, u64> =
                serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
            let (a, b) = (snap[&0], snap[&1]);
            assert!(a + b == 1 || a + b == 2, "({a}, {b}) was never the contents");
        }
    });
}

#[test]
fn allocator_maps_round_trip_with_their_namespaces() {
    let m = AllocMap::<String, Vec<u8>>::new();
    let g = m.guard();
    for k in 0..300u32 {
        m.insert(format!("k{k}"), vec![k as u8; k as usize % 7], &g).unwrap();
        m.namespace(k as usize % 5).unwrap().upsert(format!("n{k}"), vec![1], &g);
    }
    let back: AllocMap<String, Vec<u8>> = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
    let bg = back.guard();
    assert_eq!(back.len(), m.len());
    let mut a: Vec<_> = m.iter(&g).map(|(ns, k, v)| (ns, k.clone(), v.clone())).collect();
    let mut b: Vec<_> = back.iter(&bg).map(|(ns, k, v)| (ns, k.clone(), v.clone())).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(back, m);
    assert_eq!(back.clone(), m);
    back.namespace(3).unwrap().upsert("n3".into(), vec![9], &bg);
    assert_ne!(back, m, "a value differs in one namespace");

    let bm = ByteMap::new();
    let g = bm.guard();
    for k in 0..300u32 {
        let key = vec![b'x'; k as usize % 20]; // empty, short (inline) and stored keys
        bm.namespace(k as usize % 3).unwrap().upsert(&key, &k.to_le_bytes(), &g).unwrap();
    }
    let back: ByteMap = serde_json::from_str(&serde_json::to_string(&bm).unwrap()).unwrap();
    let bg = back.guard();
    let mut a: Vec<_> = bm.iter(&g).map(|(ns, k, v)| (ns, k.to_vec(), v.to_vec())).collect();
    let mut b: Vec<_> = back.iter(&bg).map(|(ns, k, v)| (ns, k.to_vec(), v.to_vec())).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(a.len(), 60, "20 key lengths in 3 namespaces");
    assert_eq!(back, bm);
    assert_eq!(bm.clone(), bm);
    back.namespace(1).unwrap().remove(&[b'x'; 1], &bg);
    assert_ne!(back, bm);
    // Keys and values may also be given as strings.
    let s: ByteMap = serde_json::from_str(r#"[[0, "key", "value"], [2, [1, 2], []]]"#).unwrap();
    let g = s.guard();
    assert_eq!(s.get(b"key", &g).as_deref(), Some(&b"value"[..]));
    assert_eq!(s.namespace(2).unwrap().get(&[1, 2], &g).as_deref(), Some(&[][..]));
}

#[test]
fn malformed_allocator_input_is_an_error() {
    assert!(serde_json::from_str::<AllocMap<String, u32>>(r#"[[0, "a"]]"#).is_err());
    assert!(
        serde_json::from_str::<AllocMap<String, u32>>(r#"[[4096, "a", 1]]"#).is_err(),
        "namespace out of range"
    );
    assert!(serde_json::from_str::<AllocMap<String, u32>>(r#"{"a": 1}"#).is_err());
    assert!(serde_json::from_str::<ByteMap>(r#"[[0, [300], []]]"#).is_err(), "not a byte");
    assert!(serde_json::from_str::<ByteMap>(r#"[[9999, "k", "v"]]"#).is_err());
}

#[test]
fn allocator_serialization_is_one_instant() {
    // As for `Map` above: a writer moves a token between two keys, and a
    // walk over many filler keys would see it in neither.
    let m = ByteMap::new();
    let g = m.guard();
    for k in 2..20_000u64 {
        m.insert(&k.to_le_bytes(), b"f", &g).unwrap().unwrap();
    }
    m.insert(b"\x00", b"1", &g).unwrap().unwrap();
    m.insert(b"\x01", b"0", &g).unwrap().unwrap();
    drop(g);
    let stop = std::sync::atomic::AtomicBool::new(false); // Relaxed: ends the loop only
    std::thread::scope(|s| {
        s.spawn(|| {
            let g = m.guard();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                m.upsert(b"\x01", b"1", &g).unwrap();
                m.upsert(b"\x00", b"0", &g).unwrap();
                m.upsert(b"\x00", b"1", &g).unwrap();
                m.upsert(b"\x01", b"0", &g).unwrap();
            }
        });
        let _stop = common::SetOnDrop(&stop);
        for _ in 0..100 {
            let back: ByteMap = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
            let g = back.guard();
            let (a, b) = (back.get(b"\x00", &g).unwrap(), back.get(b"\x01", &g).unwrap());
            let ones = (*a == *b"1") as u32 + (*b == *b"1") as u32;
            assert!(ones >= 1, "({a:?}, {b:?}) was never the contents");
        }
    });
}
