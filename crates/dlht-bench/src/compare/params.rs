//! What every measurement of a run shares and what it gives beside the
//! throughput figures: the run's parameters ([`Params`]), the resize time
//! series' samples and latency percentiles. Its own room, below the
//! workloads that fill them and the report that prints them.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Parameters shared by all measurements of a run.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    /// Prepopulated keys (a power of two).
    pub keys: u64,
    /// Requests per batch handed to the system (1 = one call at a time for
    /// systems without batching; batched dlht always batches).
    pub batch: usize,
    /// Time per measurement.
    pub seconds: f64,
    /// Seed of the key streams.
    pub seed: u64,
    /// Share of Skew accesses that go to the hot keys.
    pub hot_share: f64,
    /// Number of hot keys in Skew.
    pub hot_keys: u64,
    /// Exponent of the Zipf workload.
    pub zipf_theta: f64,
    /// Interleaved rounds.
    pub rounds: usize,
    /// Peers use dlht's hasher.
    pub peer_hasher: bool,
}

/// One sample of the resize time series.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Milliseconds since the start.
    pub ms: u64,
    /// Gets per second over the last interval (millions).
    pub get_mops: f64,
    /// Inserts per second over the last interval (millions).
    pub insert_mops: f64,
}

/// Latency percentiles of one operation, in nanoseconds (hdrhistogram,
/// 3 significant digits), each operation timed on its own.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// "get" or "insert".
    pub op: &'static str,
    /// "steady" (memory-resident table, one thread) or "resizing" (during
    /// the resize time series, readers and writers at once).
    pub phase: &'static str,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// An empty latency histogram: 1 ns to an hour, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

impl Latency {
    /// The percentiles of `h`.
    pub fn of(op: &'static str, phase: &'static str, h: &Histogram<u64>) -> Latency {
        Latency {
            op,
            phase,
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}
