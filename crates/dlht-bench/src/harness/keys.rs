//! Key streams for timed loops.
//!
//! The studies once re-seeded each call of a timed closure from the chain
//! the closure itself drew from (`seed = splitmix(seed)`, then `x = seed`
//! and 1024 steps of `x = splitmix(x)`), so consecutive calls read 1023 of
//! the same 1024 addresses: the "memory-resident" working set was about
//! 1024 lines and stayed in L2. A [`KeyStream`] is the one way a timed loop
//! draws keys: one per thread, created before the loop, continuing across
//! calls, never re-seeded.

use crate::harness::limit::splitmix;

/// A continuing stream of indexes into a key space of `n` keys (keys are
/// `splitmix(index)` elsewhere in the bench), one per thread.
///
/// For a power-of-two `n` the indexes are a bijective scramble of a
/// counter, so a stream visits every index once per `n` draws in a
/// random-looking order: no index repeats within a cycle, whatever the
/// call pattern of the loop. For other `n`, uniform draws (`word % n`).
pub struct KeyStream {
    counter: u64,
    n: u64,
    bits: u32,
}

impl KeyStream {
    /// A stream over `n` keys (`n > 0`), starting at a point derived from
    /// `seed` (use the thread number, or a study's seed).
    pub fn new(n: u64, seed: u64) -> KeyStream {
        assert!(n > 0, "a key stream over no keys");
        KeyStream { counter: splitmix(seed ^ 0x6b65_7973), n, bits: n.trailing_zeros() }
    }

    /// The next index in `0..n`.
    #[inline(always)]
    pub fn next_index(&mut self) -> u64 {
        self.counter = self.counter.wrapping_add(1);
        if self.n.is_power_of_two() {
            scramble(self.counter & (self.n - 1), self.bits)
        } else {
            splitmix(self.counter) % self.n
        }
    }

    /// The next random 64-bit word (for decisions such as hot or cold).
    #[inline(always)]
    pub fn next_word(&mut self) -> u64 {
        self.counter = self.counter.wrapping_add(1);
        splitmix(self.counter ^ 0x776f_7264 << 32)
    }
}

/// Zipf-distributed key indexes (YCSB's skew: θ = 0.99 by default), as a
/// trace drawn once per run and shared by every thread.
///
/// Drawing from `rand_distr::Zipf` costs tens of nanoseconds (logarithms
/// and powers), as much as a cached lookup, so it cannot run inside a timed
/// loop. The trace holds `len` draws (2^22 by default: about 1.3 million
/// distinct keys at θ = 0.99 over 2^25, far more lines than the L3 holds),
/// and each thread reads it cyclically from its own starting point. Rank 1
/// (the hottest key) is index 0; keys are hashed, so hot keys land in
/// random bins.
pub struct ZipfTrace {
    indexes: Vec<u32>,
}

impl ZipfTrace {
    /// `len` draws over `n` keys (`1 <= n <= 2^32`) with exponent `theta`.
    pub fn new(n: u64, theta: f64, len: usize, seed: u64) -> Result<ZipfTrace, String> {
        use rand::{Rng, SeedableRng};
        if n == 0 || n > 1 << 32 {
            return Err(format!("a Zipf trace over {n} keys (1 to 2^32 supported)"));
        }
        let zipf = rand_distr::Zipf::new(n as f64, theta)
            .map_err(|e| format!("Zipf(n = {n}, theta = {theta}): {e}"))?;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let indexes = (0..len.max(1)).map(|_| (rng.sample(zipf) as u64 - 1) as u32).collect();
        Ok(ZipfTrace { indexes })
    }

    /// The draws, in order.
    pub fn indexes(&self) -> &[u32] {
        &self.indexes
    }

    /// A cursor for thread `t` of `threads`, starting at its own share.
    pub fn cursor(&self, t: usize, threads: usize) -> ZipfCursor<'_> {
        ZipfCursor { trace: &self.indexes, pos: t * self.indexes.len() / threads.max(1) }
    }
}

/// One thread's position in a [`ZipfTrace`].
pub struct ZipfCursor<'a> {
    trace: &'a [u32],
    pos: usize,
}

impl ZipfCursor<'_> {
    /// The next index (the rank minus one).
    #[inline(always)]
    pub fn next_index(&mut self) -> u64 {
        let i = self.trace[self.pos];
        self.next_position();
        i as u64
    }

    /// The position of the next draw in the trace (for data laid out in
    /// trace order), moving past it.
    #[inline(always)]
    pub fn next_position(&mut self) -> usize {
        let p = self.pos;
        self.pos += 1;
        if self.pos == self.trace.len() {
            self.pos = 0;
        }
        p
    }
}

/// A bijection on `bits`-bit integers that looks random: multiplications by
/// odd constants (invertible modulo 2^bits) and xor-shifts to the right
/// (invertible), all truncated to `bits` bits.
#[inline(always)]
fn scramble(x: u64, bits: u32) -> u64 {
    if bits == 0 {
        return 0;
    }
    let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let shift = bits.div_ceil(2);
    let mut x = x & mask;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask;
    x ^= x >> shift;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9) & mask;
    x ^= x >> shift;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB) & mask;
    x ^ (x >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    const SPACE: u64 = 1 << 25;
    const DRAWS: usize = 1_000_000;

    /// Share of distinct keys among `DRAWS` drawn as a timed loop would:
    /// calls of 1024 draws each.
    fn distinct_share(mut call: impl FnMut(&mut Vec<u64>)) -> f64 {
        let mut seen = HashSet::new();
        let mut batch = Vec::new();
        let mut drawn = 0;
        while drawn < DRAWS {
            batch.clear();
            call(&mut batch);
            for &k in batch.iter().take(DRAWS - drawn) {
                seen.insert(k);
                drawn += 1;
            }
        }
        seen.len() as f64 / DRAWS as f64
    }

    #[test]
    fn consecutive_calls_do_not_repeat_keys() {
        let mut ks = KeyStream::new(SPACE, 7);
        let share = distinct_share(|b| b.extend((0..1024).map(|_| ks.next_index())));
        assert!(share >= 0.999, "only {:.2}% of the keys are distinct", share * 100.0);
    }

    #[test]
    fn the_re_seeded_chain_this_replaces_repeats_nearly_everything() {
        // The check above must be able to fail: the old pattern, re-seeded
        // from its own chain at every call, gives about 0.1% distinct keys.
        let mut seed = 0x1234_5678u64;
        let share = distinct_share(|b| {
            seed = splitmix(seed);
            let mut x = seed;
            b.extend((0..1024).map(|_| {
                x = splitmix(x);
                x & (SPACE - 1)
            }));
        });
        assert!(share < 0.01, "{:.2}% distinct", share * 100.0);
    }

    #[test]
    fn a_power_of_two_stream_visits_every_index_once_per_cycle() {
        for bits in [0u32, 1, 2, 5, 10, 16] {
            let n = 1u64 << bits;
            let mut ks = KeyStream::new(n, bits as u64);
            let seen: HashSet<u64> = (0..n).map(|_| ks.next_index()).collect();
            assert_eq!(seen.len() as u64, n, "{bits} bits");
            assert!(seen.iter().all(|&i| i < n));
        }
    }

    #[test]
    fn a_zipf_trace_is_skewed_like_ycsb() {
        // θ = 0.99 over 2^20 keys: the hottest key takes about 1/H(n, θ) ≈
        // 7% of draws, the top 1000 about half, and many keys appear.
        let t = ZipfTrace::new(1 << 20, 0.99, 200_000, 1).unwrap();
        let mut c = t.cursor(0, 1);
        let draws: Vec<u64> = (0..200_000).map(|_| c.next_index()).collect();
        let share =
            |f: &dyn Fn(u64) -> bool| draws.iter().filter(|&&i| f(i)).count() as f64 / draws.len() as f64;
        let top1 = share(&|i| i == 0);
        let top1000 = share(&|i| i < 1000);
        assert!((0.05..0.10).contains(&top1), "hottest key: {top1}");
        assert!((0.40..0.65).contains(&top1000), "top 1000: {top1000}");
        assert!(draws.iter().all(|&i| i < 1 << 20));
        let distinct: HashSet<_> = draws.iter().collect();
        assert!(distinct.len() > 30_000, "{} distinct", distinct.len());
        assert!(ZipfTrace::new(0, 0.99, 10, 1).is_err());
        assert!(ZipfTrace::new(10, -1.0, 10, 1).is_err());
    }

    #[test]
    fn other_sizes_stay_in_range() {
        let mut ks = KeyStream::new(1000, 1);
        assert!((0..10_000).all(|_| ks.next_index() < 1000));
    }
}
