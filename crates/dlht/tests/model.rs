//! Single-threaded model tests: random operation sequences checked against
//! std's HashMap, from a tiny initial capacity through many resizes, with
//! both hashers, over key domains that include 0, u64::MAX and the map's
//! own marker words (which must behave as ordinary keys).
#![cfg(not(loom))]

mod common;

use common::{with_maps, MapUnderTest};
use dlht::internals::marker_words;
use dlht::{Map, Modulo};
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Clone, Debug)]
enum Op {
    Get(u64),
    Insert(u64, u64),
    Put(u64, u64),
    Remove(u64),
    Upsert(u64, u64),
    ShrinkToFit,
}

/// Keys: a small dense range (many collisions and reuse), the extremes, the
/// markers of the Modulo hasher, and wide random words.
fn key_strategy() -> impl Strategy<Value = u64> {
    let mut special = vec![0, 1, u64::MAX, u64::MAX - 1];
    special.extend(marker_words(|w| w));
    prop_oneof![
        4 => 0u64..64,
        2 => proptest::sample::select(special),
        2 => any::<u64>(),
        1 => 0u64..4096,
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let v = prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()];
    prop_oneof![
        3 => key_strategy().prop_map(Op::Get),
        3 => (key_strategy(), v.clone()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (key_strategy(), v.clone()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => key_strategy().prop_map(Op::Remove),
        1 => (key_strategy(), v).prop_map(|(k, v)| Op::Upsert(k, v)),
        // Rare: a shrink moves every key, and a sequence needs keys to move.
        1 => proptest::bool::weighted(0.05).prop_map(|s| if s { Op::ShrinkToFit } else { Op::Get(0) }),
    ]
}

fn run_model(name: &str, map: &dyn MapUnderTest, ops: &[Op]) {
    let mut model: HashMap<u64, u64> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Get(k) => assert_eq!(map.get(k), model.get(&k).copied(), "{name}, op {i}: {op:?}"),
            Op::Insert(k, v) => {
                let want = common::model_insert(&mut model, k, v);
                assert_eq!(map.insert(k, v), want, "{name}, op {i}: {op:?}");
            }
            Op::Put(k, v) => {
                let want = model.get_mut(&k).map(|slot| std::mem::replace(slot, v));
                assert_eq!(map.put(k, v), want, "{name}, op {i}: {op:?}");
            }
            Op::Remove(k) => assert_eq!(map.remove(k), model.remove(&k), "{name}, op {i}: {op:?}"),
            Op::Upsert(k, v) => assert_eq!(map.upsert(k, v), model.insert(k, v), "{name}, op {i}: {op:?}"),
            Op::ShrinkToFit => map.shrink_to_fit(),
        }
        assert_eq!(map.len(), model.len(), "{name}, len after op {i}");
    }
    for (k, v) in &model {
        assert_eq!(map.get(*k), Some(*v), "{name}, final content of {k}");
    }
    assert_eq!(map.stats().occupied_slots, model.len(), "{name}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every configuration of the matrix (`common::with_maps`): Map and
    /// LocalMap, both hashers, default and one-bin transfer chunks.
    #[test]
    fn every_map_matches_hashmap(ops in proptest::collection::vec(op_strategy(), 1..3000)) {
        with_maps(|name, build| run_model(name, &*build(1), &ops));
    }
}

#[test]
fn grows_through_many_resizes_and_keeps_everything() {
    with_maps(|name, build| {
        eprintln!("{name}");
        grow_check(&*build(1));
    });
}

fn grow_check(m: &dyn MapUnderTest) {
    let n = 300_000u64;
    for i in 0..n {
        assert_eq!(m.insert(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), i), Ok(()));
    }
    let s = m.stats();
    assert!(s.resizes >= 5, "{s:?}");
    assert_eq!(s.occupied_slots, n as usize);
    for i in 0..n {
        assert_eq!(m.get(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)), Some(i));
    }
    assert_eq!(s.indexes_awaiting_free, 0, "old indexes are freed");
}

#[test]
fn marker_words_are_ordinary_keys() {
    let [d0, d1, p0, p1, s0, s1] = marker_words(|w| w);
    let m = Map::<u64, u64, Modulo>::with_capacity_and_hasher(1, Modulo);
    let keys = [d0, d1, p0, p1, s0, s1, 0, u64::MAX];
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(m.insert(k, i as u64), Ok(()), "key {k:#x}");
    }
    // Force resizes with filler keys; markers must survive transfer.
    for f in 0..10_000u64 {
        m.insert(f * 2 + 1_000_000, f).unwrap();
    }
    for (i, &k) in keys.iter().enumerate() {
        assert_eq!(m.get(&k), Some(i as u64), "key {k:#x}");
        assert_eq!(m.put(k, 7), Some(i as u64));
        assert_eq!(m.remove(&k), Some(7));
        assert_eq!(m.get(&k), None);
    }
    assert!(m.stats().resizes > 0);
}

#[test]
fn other_key_and_value_types() {
    let m = Map::<i32, f64>::new();
    m.insert(-1, -0.5).unwrap();
    m.insert(i32::MIN, f64::INFINITY).unwrap();
    assert_eq!(m.get(&-1), Some(-0.5));
    assert_eq!(m.get(&i32::MIN), Some(f64::INFINITY));
    let p = Box::into_raw(Box::new(5u8));
    let pm = Map::<*mut u8, char>::new();
    pm.insert(p, 'x').unwrap();
    assert_eq!(pm.get(&p), Some('x'));
    // SAFETY: p came from Box::into_raw above and is freed once.
    drop(unsafe { Box::from_raw(p) });
    let bm = Map::<bool, u8>::new();
    bm.insert(false, 1).unwrap();
    bm.insert(true, 2).unwrap();
    assert_eq!((bm.get(&false), bm.get(&true)), (Some(1), Some(2)));
}

#[test]
fn absurd_capacities_are_errors_not_aborts() {
    assert_eq!(Map::<u64, u64>::try_with_capacity(usize::MAX).unwrap_err(), dlht::Error::CapacityOverflow);
    assert!(Map::<u64, u64>::try_with_capacity(1 << 40).is_err());
}

#[test]
fn degenerate_hash_reports_bin_overflow_and_loses_nothing() {
    let m = Map::<u64, u64, Modulo>::with_hasher(Modulo);
    let mut inserted = Vec::new();
    let mut err = None;
    for i in 0..64u64 {
        match m.try_insert(i << 40, i) {
            Ok(Ok(())) => inserted.push(i),
            Ok(Err(_)) => unreachable!(),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert_eq!(err, Some(dlht::Error::BinOverflow));
    assert_eq!(inserted.len(), 15);
    for i in inserted {
        assert_eq!(m.get(&(i << 40)), Some(i));
    }
}

#[test]
fn maps_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Map<u64, u64>>();
    check::<Map<*const u8, usize, Modulo>>();
}

/// The matrix's small-chunk configurations really transfer in many chunks:
/// one per bin of every replaced index, where the default chunk moves an
/// index in one chunk per 1024 bins.
#[test]
fn small_transfer_chunks_split_every_resize() {
    let chunked = Map::<u64, u64>::with_capacity(1).with_transfer_chunk(common::SMALL_CHUNK);
    let plain = Map::<u64, u64>::with_capacity(1);
    // Bins from the memory report, not `stats()`: that finishes a grow
    // under way, which this count must see happen.
    let bins_of = |m: &Map<u64, u64>| m.memory().index_bytes / 64;
    let (mut bins_replaced, mut bins, mut capacity) = (0, bins_of(&chunked), chunked.capacity());
    let (mut plain_chunks, mut plain_bins, mut plain_capacity) = (0, bins_of(&plain), plain.capacity());
    for k in 0..20_000u64 {
        chunked.insert(k, k).unwrap();
        if chunked.capacity() != capacity {
            bins_replaced += bins;
            (bins, capacity) = (bins_of(&chunked), chunked.capacity());
        }
        plain.insert(k, k).unwrap();
        if plain.capacity() != plain_capacity {
            plain_chunks += plain_bins.div_ceil(1024);
            (plain_bins, plain_capacity) = (bins_of(&plain), plain.capacity());
        }
    }
    // `stats()` finishes a grow the inserts left under way: count it.
    assert!(chunked.stats().resizes >= 3);
    if chunked.capacity() != capacity {
        bins_replaced += bins;
    }
    assert!(plain.stats().resizes >= 3);
    if plain.capacity() != plain_capacity {
        plain_chunks += plain_bins.div_ceil(1024);
    }
    assert_eq!(chunked.transfer_chunks(), bins_replaced);
    assert_eq!(plain.transfer_chunks(), plain_chunks);
    assert!(plain_chunks > plain.stats().resizes, "no index took more than one chunk");
}

/// The benchmark sizes its memory-limit probe by `internals::index_bytes`:
/// it must be what a map of that capacity really allocates.
#[test]
fn index_bytes_is_what_the_map_allocates() {
    for n in [0, 1, 1000, 1536, 1537, 100_000] {
        let bins = Map::<u64, u64>::with_capacity(n).stats().bins;
        assert_eq!(dlht::internals::index_bytes(n), Ok(bins * 64), "capacity {n}");
    }
    assert!(dlht::internals::index_bytes(usize::MAX).is_err());
}
