//! The physical limit: random cache-line reads over a huge-page array the
//! size of the table, plain and software-prefetched, in the same run.

use crate::keys::KeyStream;
use dlht::raw::alloc::ZeroedArray;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// One cache line.
#[repr(C, align(64))]
pub struct Line([u64; 8]);

/// Cache lines per second, in millions.
pub struct Limit {
    /// Independent random reads, one thread.
    pub plain: f64,
    /// Reads prefetched 16 at a time, one thread.
    pub prefetched: f64,
    /// The same on two threads (summed).
    pub prefetched_2t: f64,
}

/// Prefetched random line reads per second (millions) over `arr`, summed
/// over `threads` threads: the limit batched lookups are judged against.
pub fn prefetched_on_threads(arr: &ZeroedArray<Line>, threads: usize, dur: Duration) -> f64 {
    crate::batching::on_threads(threads, dur, arr.len() as u64, |_, keys| prefetched_pass(arr, keys))
}

fn prefetched_pass(arr: &ZeroedArray<Line>, keys: &mut KeyStream) -> u64 {
    let mut sum = 0u64;
    let mut idx = [0usize; 16];
    for _ in 0..16 {
        for slot in idx.iter_mut() {
            *slot = keys.next_index() as usize;
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

/// A huge-page array of at least `bytes`, every page touched.
pub fn line_array(bytes: usize) -> ZeroedArray<Line> {
    let lines = (bytes / 64).next_power_of_two();
    // SAFETY: Line is plain integers: all-zero is valid.
    let arr = unsafe { ZeroedArray::<Line>::new_zeroed(lines, false) }.expect("allocating the limit array");
    for i in (0..lines).step_by(64) {
        let p = arr.ptr_at(i) as *mut u64;
        // SAFETY: in bounds; no other thread uses the array yet.
        unsafe { p.write_volatile(i as u64) };
    }
    arr
}

/// Measure the limit over `bytes` of memory: plain reads on one thread,
/// prefetched reads on 1 and 2 threads.
pub fn measure(bytes: usize, dur: Duration) -> Limit {
    let arr = line_array(bytes);
    let plain = measure_plain(&arr, dur);
    let prefetched = prefetched_on_threads(&arr, 1, dur);
    let prefetched_2t = prefetched_on_threads(&arr, 2, dur);
    Limit { plain, prefetched, prefetched_2t }
}

/// Independent random line reads per second (millions) on one thread.
pub fn measure_plain(arr: &ZeroedArray<Line>, dur: Duration) -> f64 {
    let mut keys = KeyStream::new(arr.len() as u64, 1);
    run(dur, || {
        let mut sum = 0u64;
        for _ in 0..1024 {
            let i = keys.next_index() as usize;
            // SAFETY: the stream's indexes are below arr.len().
            sum = sum.wrapping_add(unsafe { arr.get_unchecked(i) }.0[0]);
        }
        black_box(sum);
        1024
    })
}

/// Run `f` (which returns the operations it did) repeatedly for `dur`;
/// millions of operations per second: the median of three runs of a third
/// of `dur` each, which resists the bursts of interference of shared VMs.
/// `f` draws its keys from a [`KeyStream`] it owns (no seed is handed in:
/// re-seeding per call is the bug `keys` describes).
pub fn run(dur: Duration, mut f: impl FnMut() -> u64) -> f64 {
    median3(|| {
        let start = Instant::now();
        let mut ops = 0u64;
        while start.elapsed() < dur / 3 {
            ops += f();
        }
        ops as f64 / start.elapsed().as_secs_f64() / 1e6
    })
}

/// The median of three measurements.
pub fn median3(mut measure: impl FnMut() -> f64) -> f64 {
    let mut v = [measure(), measure(), measure()];
    v.sort_by(f64::total_cmp);
    v[1]
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

/// CPU model, cores, memory, THP mode, kernel.
pub fn machine_line() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown cpu".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<u64>().unwrap_or(0) / 1024 / 1024)
        })
        .unwrap_or(0);
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {cores} cores, {mem} GiB, THP {}, kernel {}", thp.trim(), kernel.trim())
}
