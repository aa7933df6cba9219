//! The issue-2 baseline: single-thread Get, InsDel, Put and Population on dlht alone.

use crate::keys::KeyStream;
use crate::limit::{run, splitmix};
use dlht::{Map, Stats};
use std::hash::BuildHasher;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Bytes of the index `Map::with_capacity(keys)` allocates (bins only).
pub fn index_bytes(keys: usize) -> usize {
    let m = Map::<u64, u64>::with_capacity(keys.min(1 << 10));
    drop(m);
    // Same sizing rule as the map: keys / 1.5 rounded up to a power of two.
    ((keys as f64 / 1.5).ceil() as usize).next_power_of_two() * 64
}

/// Millions of operations per second for one table size.
pub struct SingleThread {
    pub get: f64,
    pub get_miss: f64,
    pub insdel_pairs: f64,
    pub put: f64,
    pub stats: Stats,
}

/// A map sized for and holding `keys` keys: splitmix(i) → i.
pub fn populated<S: BuildHasher + Default>(keys: usize) -> Map<u64, u64, S> {
    let m = Map::<u64, u64, S>::with_capacity_and_hasher(keys, S::default());
    for i in 0..keys as u64 {
        m.insert(splitmix(i), i).expect("populating distinct keys");
    }
    m
}

/// Single-thread throughput on a map from [`populated`].
pub fn single_thread<S: BuildHasher>(m: &Map<u64, u64, S>, dur: Duration) -> SingleThread {
    let keys = m.len();
    let stats = m.stats();
    let n = keys as u64;
    // One continuing stream per measurement (see `keys`).
    let mut ks = KeyStream::new(n, 1);
    let mut hits = 0u64;
    let get = run(dur, || {
        for _ in 0..1024 {
            let i = ks.next_index();
            // Every get must hit, with the right value.
            if m.get(&splitmix(i)) == Some(i) {
                hits += 1;
            }
        }
        1024
    });
    let get_miss = run(dur, || {
        for _ in 0..1024 {
            black_box(m.get(&splitmix(n + ks.next_index())));
        }
        1024
    });
    let mut fresh = n;
    let insdel_pairs = run(dur, || {
        for _ in 0..1024 {
            let k = splitmix(fresh);
            fresh += 1;
            m.insert(k, fresh).expect("fresh key");
            m.remove(&k).expect("just inserted");
        }
        1024
    });
    let put = run(dur, || {
        for _ in 0..1024 {
            let i = ks.next_index();
            black_box(m.put(splitmix(i), i));
        }
        1024
    });
    assert!(hits > 0 && m.len() == keys, "every get must hit and the table keep its keys");
    SingleThread { get, get_miss, insdel_pairs, put, stats }
}

/// Result of a growing population.
pub struct Population {
    pub keys: usize,
    pub mops: f64,
    pub resizes: usize,
    pub occupancy: Vec<f64>,
}

/// Insert `keys` fresh keys into a tiny table (it grows many times).
pub fn population<S: BuildHasher + Default>(keys: usize) -> Population {
    let m = Map::<u64, u64, S>::with_hasher(S::default());
    let start = Instant::now();
    for i in 0..keys as u64 {
        m.insert(splitmix(i), i).expect("distinct keys");
    }
    let secs = start.elapsed().as_secs_f64();
    let s = m.stats();
    Population { keys, mops: keys as f64 / secs / 1e6, resizes: s.resizes, occupancy: s.occupancy_at_resize }
}

/// Nanoseconds for one enter+leave of the map (reclamation cost per op).
pub fn enter_leave_ns(dur: Duration) -> f64 {
    let m = Map::<u64, u64>::new();
    let mops = run(dur, || {
        for _ in 0..1024 {
            m.enter_leave();
        }
        1024
    });
    1e3 / mops
}
