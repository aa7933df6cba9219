//! Regression check for the fat-LTO miscompile dlht once had: with a
//! hand-written `cmpxchg16b`, `lto = "fat"` + `codegen-units = 1` let LLVM
//! put the slot pointer in rbx, which the asm swapped out for the new key,
//! so the first resize CASed at a key-valued address (SIGSEGV).
//!
//! Run through `scripts/test.sh` as
//! `cargo run --profile release-lto -p dlht-downstream --bin lto-check`: the `release-lto`
//! profile (workspace Cargo.toml) is fat LTO, one codegen unit and
//! `panic = "abort"`. Exits non-zero (or dies) on any mismatch.

use dlht::{LocalMap, Map};

/// splitmix64: distinct, well-spread keys without a dependency.
fn key(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const KEYS: u64 = 1 << 16;

fn check(what: &str, ok: bool) {
    if !ok {
        eprintln!("lto-check: FAILED: {what}");
        std::process::exit(1);
    }
}

fn main() {
    // One thread grows a map from empty: every resize runs transfer_bin,
    // whose slot CAS was the miscompiled one.
    let m = Map::<u64, u64>::with_capacity(0);
    for i in 0..KEYS {
        check("fresh insert", m.insert(key(i), i).is_ok());
    }
    check("len after one-thread growth", m.len() == KEYS as usize);
    check("every key after one-thread growth", (0..KEYS).all(|i| m.get(&key(i)) == Some(i)));
    let one = m.stats().resizes;

    // Two threads grow another from empty, helping each other's transfers,
    // with puts and removes racing the resizes.
    let m = Map::<u64, u64>::with_capacity(0);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let m = &m;
            s.spawn(move || {
                for i in (t..KEYS).step_by(2) {
                    check("fresh insert (2 threads)", m.insert(key(i), i).is_ok());
                    check("put of own key", m.put(key(i), i + 1) == Some(i));
                    if i % 3 == 0 {
                        check("remove of own key", m.remove(&key(i)) == Some(i + 1));
                    }
                }
            });
        }
    });
    let live = |i: u64| i % 3 != 0;
    check("len after two-thread growth", m.len() == (0..KEYS).filter(|&i| live(i)).count());
    check(
        "every key after two-thread growth",
        (0..KEYS).all(|i| m.get(&key(i)) == if live(i) { Some(i + 1) } else { None }),
    );

    // The single-thread map shares the transfer code.
    let l = LocalMap::<u64, u64>::with_capacity(0);
    for i in 0..KEYS {
        check("fresh insert (LocalMap)", l.insert(key(i), i).is_ok());
    }
    check("every key (LocalMap)", (0..KEYS).all(|i| l.get(&key(i)) == Some(i)));
    println!("lto-check: ok ({KEYS} keys grown from empty on 1 and 2 threads, {one} resizes; LocalMap too)");
}
