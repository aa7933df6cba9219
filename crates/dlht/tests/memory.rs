//! `memory()`: the bytes each map reports, exactly where they can be
//! computed (index and link arrays, allocator-mode entries), through
//! inserts, replacements, removes, resizes and shrinks, and across threads.
#![cfg(not(loom))]

use dlht::{AllocMap, ByteMap, LocalMap, Map, Set};

#[test]
fn inlined_maps_report_their_index_and_links() {
    let m = Map::<u64, u64>::new();
    let mem = m.memory();
    assert_eq!(mem.index_bytes, m.stats().bins * 64);
    assert_eq!((mem.link_bytes, mem.resize_bytes, mem.value_bytes), (0, 0, 0));
    for k in 0..200_000u64 {
        m.insert(k, k).unwrap();
    }
    let (mem, s) = (m.memory(), m.stats());
    assert_eq!(mem.index_bytes, s.bins * 64);
    assert!(mem.link_bytes >= s.link_buckets_in_use * 64 && mem.link_bytes > 0, "{mem:?} {s:?}");
    assert_eq!(s.memory, mem);
    assert_eq!(mem.total(), mem.index_bytes + mem.link_bytes);
    for k in 0..200_000u64 {
        m.remove(&k);
    }
    m.shrink_to_fit();
    assert!(m.memory().index_bytes * 100 < mem.index_bytes, "the index shrank");
    let l = LocalMap::<u64, u64>::with_capacity(10_000);
    assert_eq!(l.memory().index_bytes, l.stats().bins * 64);
    let set = Set::<u64>::with_capacity(10_000);
    assert_eq!(set.memory().index_bytes, 8192 * 64);
}

#[test]
fn alloc_map_counts_its_entries() {
    let m = AllocMap::<u64, [u8; 100]>::new();
    let g = m.guard();
    for k in 0..1000u64 {
        m.insert(k, [k as u8; 100], &g).unwrap();
    }
    let per_entry = m.memory().value_bytes / 1000;
    assert!(per_entry >= 108 && m.memory().value_bytes == per_entry * 1000, "{:?}", m.memory());
    for k in 0..1000u64 {
        m.upsert(k, [1; 100], &g); // replaced: same count
    }
    assert_eq!(m.memory().value_bytes, per_entry * 1000);
    for k in 0..500u64 {
        m.remove(&k, &g);
    }
    assert_eq!(m.memory().value_bytes, per_entry * 500);
    assert!(m.memory().index_bytes > 0);
}

#[test]
fn byte_map_counts_header_key_and_value_bytes() {
    let m = ByteMap::new();
    let g = m.guard();
    // A blob's header: two lengths and the stamp.
    const H: usize = 12;
    // Short keys live in the slot: only the header and the value count.
    m.insert(b"short", &[0; 40], &g).unwrap().unwrap();
    assert_eq!(m.memory().value_bytes, H + 40);
    // Long keys are stored with the value.
    m.insert(b"a key longer than eight bytes", &[0; 10], &g).unwrap().unwrap();
    assert_eq!(m.memory().value_bytes, H + 40 + H + 29 + 10);
    m.upsert(b"short", &[0; 1000], &g).unwrap();
    assert_eq!(m.memory().value_bytes, H + 1000 + H + 29 + 10);
    m.remove(b"a key longer than eight bytes", &g);
    m.remove(b"short", &g);
    assert_eq!(m.memory().value_bytes, 0);
}

#[test]
fn entry_bytes_balance_across_threads() {
    let m = ByteMap::new();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let m = &m;
            s.spawn(move || {
                let g = m.guard();
                for round in 0..20u64 {
                    for i in 0..500u64 {
                        let k = (t << 40 | round << 20 | i).to_le_bytes();
                        m.insert(&k, &[0; 24], &g).unwrap().unwrap();
                    }
                    for i in 0..500u64 {
                        let k = (t << 40 | round << 20 | i).to_le_bytes();
                        assert!(m.remove(&k, &g).is_some());
                    }
                }
                for i in 0..100u64 {
                    m.insert(&(t << 40 | i).to_le_bytes(), &[0; 24], &g).unwrap().unwrap();
                }
            });
        }
    });
    assert_eq!(m.memory().value_bytes, 400 * (12 + 24)); // header (lengths, stamp) + value
}
