use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
fn splitmix(mut z: u64) -> u64 { z = z.wrapping_add(0x9E37_79B9_7F4A_7C15); z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9); z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB); z ^ (z >> 31) }
fn insdel(m: &dlht::Map<u64,u64>, threads: usize, secs: f64, base: u64) -> f64 {
    let stop = AtomicBool::new(false); let total = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads { let (stop, total) = (&stop, &total); s.spawn(move || {
            let mut i = base + ((th as u64) << 36); let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) { for _ in 0..64 { let k = splitmix(i); i += 1; assert!(m.insert(k, k).is_ok()); assert!(m.remove(&k).is_some()); } n += 128; }
            total.fetch_add(n, Ordering::Relaxed); }); }
        std::thread::sleep(Duration::from_secs_f64(secs)); stop.store(true, Ordering::Relaxed);
    });
    total.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64() / 1e6
}
fn show(m: &dlht::Map<u64,u64>, what: &str) { let s = m.stats(); println!("  [{what}] bins {} link cap {} in use {} leaked {} resizes {} len {}", s.bins, s.link_buckets, s.link_buckets_in_use, s.link_buckets_leaked, s.resizes, m.len()); }
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let log2: u32 = args.get(1).map(|s| s.parse().unwrap()).unwrap_or(25);
    let plan: Vec<usize> = args.get(2).map(|s| s.split(',').map(|x| x.parse().unwrap()).collect()).unwrap_or(vec![16,1,4,16,16]);
    let n = 1u64 << log2;
    for (label, prefill) in [("full", true), ("empty", false)] {
        let m = dlht::Map::<u64,u64>::with_capacity(n as usize);
        if prefill { let t0 = Instant::now(); std::thread::scope(|s| { for th in 0..16u64 { let m = &m; s.spawn(move || { let mut i = th; while i < n { m.insert(splitmix(i), i).unwrap(); i += 16; } }); } }); println!("{label}: populated 2^{log2} in {:.2} s", t0.elapsed().as_secs_f64()); }
        show(&m, "start");
        for (r, &t) in plan.iter().enumerate() { let secs = if t == 99 { 4.0 } else { 0.5 }; let t = if t == 99 { 16 } else { t }; let rate = insdel(&m, t, secs, n * 4 + ((r as u64) << 44)); println!("{label} insdel {t:2} threads: {rate:7.1} M ops/s"); show(&m, "after"); }
    }
}
