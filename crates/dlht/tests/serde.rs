//! serde (feature `serde`): maps and sets round-trip through JSON; bad
//! input is an error, not a panic; a key given twice keeps its last value.
#![cfg(all(not(loom), feature = "serde"))]

use dlht::{Map, Set};

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
        // Stops the writer however this thread leaves (a failed check
        // unwinds through the scope, which joins the writer).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        for _ in 0..200 {
            let snap: std::collections::HashMap<u64, u64> =
                serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
            let (a, b) = (snap[&0], snap[&1]);
            assert!(a + b == 1 || a + b == 2, "({a}, {b}) was never the contents");
        }
    });
}
