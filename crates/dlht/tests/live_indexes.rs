//! Replaced indexes are freed promptly, watched through
//! the process-wide count of live indexes rather than through a map (whose
//! `stats()` once collected before reporting, hiding that the publisher of
//! a resize never freed the index it retired: with one thread, 36 MiB of
//! old index stayed resident after 1.5 M inserts). One test in this binary,
//! so no other map's indexes are counted.
#![cfg(not(loom))]

use dlht::internals::live_indexes;
use dlht::{LocalMap, Map};

#[test]
fn one_thread_growing_a_map_keeps_one_index_alive() {
    assert_eq!(live_indexes(), 0);
    let m = Map::<u64, u64>::with_capacity(0);
    let mut grew = 0;
    let mut last = m.capacity();
    let mut freed_at_once = 0;
    for k in 0..1_500_000u64 {
        let before = m.capacity();
        m.insert(k, k).unwrap();
        // Checked before anything else enters the map. A grow runs over
        // many operations (each helps a little), so at most the old index
        // and the new one are alive; once an insert publishes the new
        // index, nobody else is inside the old one, and its own leave must
        // have freed it.
        let live = live_indexes();
        assert!(live <= 2, "{live} indexes after inserting key {k}");
        if m.capacity() != before {
            assert_eq!(live, 1, "the index replaced by key {k}'s insert was not freed");
            freed_at_once += 1;
        }
        if m.capacity() != last {
            last = m.capacity();
            grew += 1;
        }
    }
    assert!(grew >= 5, "only {grew} resizes");
    assert_eq!(freed_at_once, grew);
    // `stats()` finishes a grow the writes left under way.
    let _ = m.stats();
    assert_eq!(live_indexes(), 1, "a grow left under way was not finished");
    assert!((0..1_500_000u64).all(|k| m.get(&k) == Some(k)));
    drop(m);
    assert_eq!(live_indexes(), 0);

    let l = LocalMap::<u64, u64>::with_capacity(0);
    for k in 0..200_000u64 {
        l.insert(k, k).unwrap();
        assert_eq!(live_indexes(), 1);
    }
    drop(l);
    assert_eq!(live_indexes(), 0);
}
