//! dlht-only measurements the comparison does not make: occupancy when
//! the index grows, cached gets per hasher, and the cost of the
//! reclamation announcement per operation.

use crate::harness::limit::splitmix;
use crate::harness::{self, median3};
use dlht::Map;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

/// A map sized for and holding `keys` keys: splitmix(i) → i.
pub fn populated<S: BuildHasher + Default>(keys: usize) -> Map<u64, u64, S> {
    let m = Map::<u64, u64, S>::with_capacity_and_hasher(keys, S::default());
    for i in 0..keys as u64 {
        m.insert(splitmix(i), i).expect("populating distinct keys");
    }
    m
}

/// Result of a growing population.
pub struct Population {
    pub keys: usize,
    pub mops: f64,
    pub resizes: usize,
    pub occupancy: Vec<f64>,
}

/// Insert `keys` fresh keys into a tiny table on one thread (it grows many
/// times).
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

/// Million gets per second on one thread on `m` (holding keys `0..n` by
/// index), median of three.
pub fn gets<S: BuildHasher + Sync>(m: &Map<u64, u64, S>, n: u64, dur: Duration) -> f64 {
    median3(|| {
        harness::timed(
            1,
            dur / 3,
            n,
            1,
            |_| (),
            |w| {
                for _ in 0..256 {
                    let i = w.keys.next_index();
                    assert_eq!(m.get(&splitmix(i)), Some(i), "every get must hit");
                }
                256
            },
        )
    })
}

/// Nanoseconds for one enter+leave of the map (reclamation cost per op).
pub fn enter_leave_ns(dur: Duration) -> f64 {
    let m = Map::<u64, u64>::new();
    let mops = median3(|| {
        harness::timed(
            1,
            dur / 3,
            1,
            1,
            |_| (),
            |_| {
                for _ in 0..1024 {
                    m.enter_leave();
                }
                1024
            },
        )
    });
    1e3 / mops
}
