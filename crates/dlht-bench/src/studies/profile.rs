//! `dlht-bench profile`: exactly `--ops` gets per access mode on a
//! memory-resident table, untimed, for valgrind. Each mode runs in its own
//! non-inlined function, so `callgrind --toggle-collect` can count the
//! instructions and simulated cache misses of one mode alone:
//! `scripts/profile-gets.sh` does that and prints them per get.

use crate::harness::keys::KeyStream;
use crate::harness::limit::{self, splitmix, Line};
use crate::studies::baseline;
use dlht::internals::ZeroedArray;
use dlht::{AllocMap, ByteMap, LocalMap, Map};
use std::hint::black_box;

/// Options of the profile run.
#[derive(clap::Args, Clone, Debug)]
pub struct ProfileArgs {
    /// Keys in each table: 2^N (2^21 keys make a 128 MiB index, 4x the L3).
    #[arg(long, default_value_t = 21, value_parser = clap::value_parser!(u32).range(10..=32))]
    pub keys_log2: u32,
    /// Gets per mode.
    #[arg(long, default_value_t = 200_000)]
    pub ops: u64,
    /// Requests per batch in the batched modes.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batch: u32,
}

/// Run every mode once, in order: random line reads (the probe), Map get,
/// Map get_many, LocalMap get, LocalMap get_many, and finding values
/// (their address, not their bytes) in `AllocMap<u64, u64>` and in a
/// `ByteMap` with 8-byte keys — the paper's allocator-mode layout keeps
/// such keys in the slot, so a find there should take one miss, where
/// `AllocMap` reads the entry to compare the key.
pub fn run(a: ProfileArgs) {
    let n = 1u64 << a.keys_log2;
    let map: Map<u64, u64> = baseline::populated(n as usize);
    let local = LocalMap::<u64, u64>::with_capacity(n as usize);
    for i in 0..n {
        local.insert(splitmix(i), i).expect("distinct keys");
    }
    let alloc = AllocMap::<u64, u64>::with_capacity(n as usize);
    let bytes = ByteMap::with_capacity(n as usize);
    let g = alloc.guard();
    for i in 0..n {
        alloc.insert(splitmix(i), i, &g).expect("distinct keys");
        bytes
            .insert(&splitmix(i).to_le_bytes(), &i.to_le_bytes(), &g)
            .expect("short")
            .expect("distinct keys");
    }
    drop(g);
    let arr = limit::line_array(limit::index_bytes(n as usize));
    let b = a.batch as usize;
    let mut sums = [0u64; 7];
    // Each mode draws its own keys (seeds 1..5): a mode must not find the
    // lines of the mode before it in the simulated cache.
    sums[0] = profile_lines(&arr, a.ops);
    sums[1] = profile_map_get(&map, n, a.ops);
    sums[2] = profile_map_batch(&map, n, a.ops, b);
    sums[3] = profile_local_get(&local, n, a.ops);
    sums[4] = profile_local_batch(&local, n, a.ops, b);
    sums[5] = profile_alloc_find(&alloc, n, a.ops);
    sums[6] = profile_bytes_find(&bytes, n, a.ops);
    println!("# profile: {} ops per mode on 2^{} keys, batch {b}; checksums {sums:?}", a.ops, a.keys_log2);
}

#[inline(never)]
fn profile_lines(arr: &ZeroedArray<Line>, ops: u64) -> u64 {
    let mut ks = KeyStream::new(arr.len() as u64, 1);
    let mut sum = 0u64;
    for _ in 0..ops {
        let i = ks.next_index() as usize;
        // SAFETY: the stream's indexes are below arr.len().
        sum = sum.wrapping_add(unsafe { arr.get_unchecked(i) }.0[0]);
    }
    black_box(sum)
}

/// The two map types, as the profile uses them.
trait Gets {
    fn get1(&self, k: u64) -> Option<u64>;
    fn get_batch(&self, keys: &[u64], out: &mut [Option<u64>]);
}

/// Both maps have the same get and get_many.
macro_rules! gets_for {
    ($($map:ty),*) => {$(
        impl Gets for $map {
            #[inline(always)]
            fn get1(&self, k: u64) -> Option<u64> {
                self.get(&k)
            }
            #[inline(always)]
            fn get_batch(&self, keys: &[u64], out: &mut [Option<u64>]) {
                self.get_many(keys, out).expect("equal lengths");
            }
        }
    )*};
}

gets_for!(Map<u64, u64>, LocalMap<u64, u64>);

/// `ops` gets, one call each, of keys `0..n` (by index).
#[inline(always)]
fn gets<M: Gets>(m: &M, n: u64, ops: u64, seed: u64) -> u64 {
    let mut ks = KeyStream::new(n, seed);
    let mut sum = 0u64;
    for _ in 0..ops {
        let i = ks.next_index();
        sum = sum.wrapping_add(m.get1(splitmix(i)).expect("present key"));
    }
    sum
}

/// `ops` gets in batches of `b`.
#[inline(always)]
fn batches<M: Gets>(m: &M, n: u64, ops: u64, b: usize, seed: u64) -> u64 {
    let mut ks = KeyStream::new(n, seed);
    let (mut keys, mut out) = (vec![0u64; b], vec![None; b]);
    let mut sum = 0u64;
    for _ in 0..ops / b as u64 {
        for k in keys.iter_mut() {
            *k = splitmix(ks.next_index());
        }
        m.get_batch(&keys, &mut out);
        sum = out.iter().fold(sum, |s, v| s.wrapping_add(v.expect("present key")));
    }
    sum
}

// One named function per mode, for callgrind's --toggle-collect.

#[inline(never)]
fn profile_map_get(map: &Map<u64, u64>, n: u64, ops: u64) -> u64 {
    gets(map, n, ops, 2)
}

#[inline(never)]
fn profile_map_batch(map: &Map<u64, u64>, n: u64, ops: u64, b: usize) -> u64 {
    batches(map, n, ops, b, 3)
}

#[inline(never)]
fn profile_local_get(map: &LocalMap<u64, u64>, n: u64, ops: u64) -> u64 {
    gets(map, n, ops, 4)
}

#[inline(never)]
fn profile_local_batch(map: &LocalMap<u64, u64>, n: u64, ops: u64, b: usize) -> u64 {
    batches(map, n, ops, b, 5)
}

/// Find `ops` values of `AllocMap<u64, u64>`, one guard each, without
/// reading them (the entry is read to compare the key).
#[inline(never)]
fn profile_alloc_find(map: &AllocMap<u64, u64>, n: u64, ops: u64) -> u64 {
    let mut ks = KeyStream::new(n, 6);
    let mut found = 0u64;
    for _ in 0..ops {
        let g = map.guard();
        found += black_box(map.get(&splitmix(ks.next_index()), &g)).is_some() as u64;
    }
    found
}

/// Find `ops` values of a `ByteMap` with 8-byte keys, one guard each,
/// without reading them (the key is in the slot).
#[inline(never)]
fn profile_bytes_find(map: &ByteMap, n: u64, ops: u64) -> u64 {
    let mut ks = KeyStream::new(n, 7);
    let mut found = 0u64;
    for _ in 0..ops {
        let g = map.guard();
        found += black_box(map.get(&splitmix(ks.next_index()).to_le_bytes(), &g)).is_some() as u64;
    }
    found
}
