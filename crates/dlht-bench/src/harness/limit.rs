//! The physical limit: random cache-line reads over a huge-page array the
//! size of the table, plain and software-prefetched, at any thread count,
//! measured through the same harness as every system.

use crate::harness::{self, Worker};
use dlht::internals::ZeroedArray;
use std::hint::black_box;
use std::time::Duration;

/// Bytes of the index `Map::with_capacity(keys)` allocates (bins only), as
/// the map itself sizes it.
pub fn index_bytes(keys: usize) -> usize {
    dlht::internals::index_bytes(keys).expect("a key count the bench accepts fits a map")
}

/// One cache line.
#[repr(C, align(64))]
pub struct Line(pub [u64; 8]);

/// A huge-page array of at least `bytes` (a power of two of lines), every
/// page touched.
pub fn line_array(bytes: usize) -> ZeroedArray<Line> {
    let lines = (bytes / 64).max(1).next_power_of_two();
    // SAFETY: Line is plain integers: all-zero is valid.
    let arr = unsafe { ZeroedArray::<Line>::new_zeroed(lines, false) }.expect("allocating the limit array");
    for i in (0..lines).step_by(64) {
        let p = arr.ptr_at(i) as *mut u64;
        // SAFETY: in bounds; no other thread uses the array yet.
        unsafe { p.write_volatile(i as u64) };
    }
    arr
}

/// How the probe reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Independent random reads: the core overlaps as many misses as its
    /// reorder window allows.
    Plain,
    /// Reads prefetched 16 at a time: the bound batched lookups are judged
    /// against.
    Prefetched,
}

/// Random line reads per second (millions) over `arr`, summed over
/// `threads` threads.
pub fn measure(arr: &ZeroedArray<Line>, probe: Probe, threads: usize, dur: Duration, seed: u64) -> f64 {
    let n = arr.len() as u64;
    match probe {
        Probe::Plain => harness::timed(threads, dur, n, seed, |_| (), |w| plain_pass(arr, w)),
        Probe::Prefetched => harness::timed(threads, dur, n, seed, |_| (), |w| prefetched_pass(arr, w)),
    }
}

fn plain_pass(arr: &ZeroedArray<Line>, w: &mut Worker<()>) -> u64 {
    let mut sum = 0u64;
    for _ in 0..256 {
        let i = w.keys.next_index() as usize;
        // SAFETY: the stream's indexes are below arr.len().
        sum = sum.wrapping_add(unsafe { arr.get_unchecked(i) }.0[0]);
    }
    black_box(sum);
    256
}

fn prefetched_pass(arr: &ZeroedArray<Line>, w: &mut Worker<()>) -> u64 {
    let mut sum = 0u64;
    let mut idx = [0usize; 16];
    for _ in 0..16 {
        for slot in idx.iter_mut() {
            *slot = w.keys.next_index() as usize;
            prefetch(arr.ptr_at(*slot));
        }
        for &i in &idx {
            // SAFETY: the stream's indexes are below arr.len().
            sum = sum.wrapping_add(unsafe { arr.get_unchecked(i) }.0[0]);
        }
    }
    black_box(sum);
    256
}

/// splitmix64: a bijective mixer, so `splitmix(i)` are distinct random-looking keys.
#[inline(always)]
pub fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint and never faults.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0)
    };
}
