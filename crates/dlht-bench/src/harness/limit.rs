//! The physical limit: random cache-line reads over a huge-page array the
//! size of the table, plain and software-prefetched, at any thread count,
//! measured through the same harness as every system.

use crate::harness;
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
    /// Reads prefetched in batches of 8, 16, 32 and 64, a quarter of the
    /// time each; the best batch size's rate is reported.
    Prefetched,
}

/// Batch sizes the prefetched probe tries (the best one counts).
pub const PREFETCH_BATCHES: [usize; 4] = [8, 16, 32, 64];

/// Reads per call of a probe's timed closure.
const READS_PER_CALL: usize = 512;

/// Random line reads per second (millions) over `arr`, summed over
/// `threads` threads: the highest rate the memory system shows, so the
/// probe draws line indexes as cheaply as a generator can (a counter, one
/// bijective mix, a mask; no per-read checks) rather than from the bench's
/// [`KeyStream`](crate::harness::KeyStream).
pub fn measure(arr: &ZeroedArray<Line>, probe: Probe, threads: usize, dur: Duration, seed: u64) -> f64 {
    match probe {
        Probe::Plain => {
            harness::timed(threads, dur, 1, seed, lines(arr, seed), |w| plain_pass(arr, &mut w.state))
        }
        Probe::Prefetched => {
            let part = dur / PREFETCH_BATCHES.len() as u32;
            let sizes: [Measure; 4] = [prefetched::<8>, prefetched::<16>, prefetched::<32>, prefetched::<64>];
            sizes.iter().map(|f| f(arr, threads, part, seed)).fold(0.0, f64::max)
        }
    }
}

type Measure = fn(&ZeroedArray<Line>, usize, Duration, u64) -> f64;

/// Thread `t`'s line stream over `arr`.
fn lines(arr: &ZeroedArray<Line>, seed: u64) -> impl Fn(usize) -> LineStream + Sync {
    let n = arr.len() as u64;
    move |t| LineStream::new(n, splitmix(seed ^ t as u64))
}

/// The prefetched probe with batches of `B`.
fn prefetched<const B: usize>(arr: &ZeroedArray<Line>, threads: usize, dur: Duration, seed: u64) -> f64 {
    harness::timed(threads, dur, 1, seed, lines(arr, seed), |w| prefetched_pass::<B>(arr, &mut w.state))
}

/// The probe's line indexes: a counter through one bijective mix (xor-shift,
/// odd multiply, xor-shift) and a mask over a power-of-two line count.
/// Uniform enough for a bound on random reads, and three cheap operations a
/// read, so the reads, not the generator, set the rate.
pub struct LineStream {
    counter: u64,
    mask: u64,
}

impl LineStream {
    /// A stream over `n` lines (a power of two) from a point set by `seed`.
    pub fn new(n: u64, seed: u64) -> LineStream {
        assert!(n.is_power_of_two(), "the probe's array is a power of two of lines");
        LineStream { counter: seed, mask: n - 1 }
    }

    /// The next line index.
    #[inline(always)]
    pub fn next_line(&mut self) -> usize {
        self.counter = self.counter.wrapping_add(1);
        let mut x = self.counter;
        x ^= x >> 31;
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
        (x & self.mask) as usize
    }
}

fn plain_pass(arr: &ZeroedArray<Line>, lines: &mut LineStream) -> u64 {
    let mut sum = 0u64;
    for _ in 0..READS_PER_CALL {
        let i = lines.next_line();
        // SAFETY: the stream's indexes are below arr.len().
        sum = sum.wrapping_add(unsafe { arr.get_unchecked(i) }.0[0]);
    }
    black_box(sum);
    READS_PER_CALL as u64
}

fn prefetched_pass<const B: usize>(arr: &ZeroedArray<Line>, lines: &mut LineStream) -> u64 {
    let mut sum = 0u64;
    let mut idx = [0usize; B];
    for _ in 0..READS_PER_CALL / B {
        for slot in idx.iter_mut() {
            *slot = lines.next_line();
            prefetch(arr.ptr_at(*slot));
        }
        for &i in &idx {
            // SAFETY: the stream's indexes are below arr.len().
            sum = sum.wrapping_add(unsafe { arr.get_unchecked(i) }.0[0]);
        }
    }
    black_box(sum);
    READS_PER_CALL as u64
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
