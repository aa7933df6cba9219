//! Hash flooding: keys an attacker chooses to collide under an unkeyed
//! hash must not make a map with its default hasher grow beyond what the
//! key count needs (nor end in `BinOverflow`).
//!
//! - `Map<u64, u64>`: keys equal in their low 40 bits, which all share a
//!   bin under the identity (`Modulo`, the paper's hash);
//! - `ByteMap`: 8-byte keys (kept in the slot, so hashed by the index
//!   itself) made by inverting the murmur3 finalizer so that its outputs
//!   share their low 24 bits — what an unkeyed mix of the key word would
//!   put in one bin.
#![cfg(not(loom))]

use dlht::{ByteMap, Error, Map, Modulo};

/// The murmur3 64-bit finalizer (an unkeyed bijective mix).
fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Its inverse: undo each step in reverse (the multipliers' inverses mod
/// 2^64; `x ^ x >> 33` is its own inverse since 2 × 33 ≥ 64).
fn unfmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0x9cb4_b2f8_1293_37db);
    h ^= h >> 33;
    h = h.wrapping_mul(0x4f74_430c_22a5_4005);
    h ^ (h >> 33)
}

const KEYS: u64 = 50_000;

/// The capacity a map reaches holding `KEYS` ordinary keys.
fn fair_capacity() -> usize {
    let m = Map::<u64, u64>::new();
    for k in 0..KEYS {
        m.insert(k, k).unwrap();
    }
    m.capacity()
}

#[test]
fn the_inverse_mix_inverts() {
    for x in [0, 1, 0xdead_beef, u64::MAX, 1 << 63] {
        assert_eq!(fmix(unfmix(x)), x);
        assert_eq!(unfmix(fmix(x)), x);
    }
}

#[test]
fn keys_colliding_under_the_identity_do_not_grow_the_default_map() {
    let fair = fair_capacity();
    let m = Map::<u64, u64>::new();
    for i in 0..KEYS {
        m.insert(i << 40, i).unwrap();
    }
    assert_eq!(m.len(), KEYS as usize);
    assert!(m.capacity() <= 2 * fair, "flooded to {} (fair: {fair})", m.capacity());
    // The same keys under the identity hash do crowd one bin: the check
    // above is a real one.
    let weak = Map::<u64, u64, Modulo>::with_hasher(Modulo);
    let refused = (0..KEYS).map(|i| weak.try_insert(i << 40, i)).find_map(Result::err);
    assert_eq!(refused, Some(Error::BinOverflow));
}

#[test]
fn short_keys_crafted_against_an_unkeyed_mix_do_not_grow_a_byte_map() {
    let fair = fair_capacity();
    let m = ByteMap::new();
    let g = m.guard();
    for i in 0..KEYS {
        let key = unfmix(i << 24).to_le_bytes();
        m.insert(&key, b"v", &g).unwrap().unwrap();
    }
    assert_eq!(m.len(), KEYS as usize);
    assert!(m.capacity() <= 2 * fair, "flooded to {} (fair: {fair})", m.capacity());
}
