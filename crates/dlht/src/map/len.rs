//! The length of a [`Map`](crate::Map): one counter per thread, summed on
//! demand. Each thread's share lives in its reclamation record, which
//! every operation holds already, so counting an insert or a remove costs
//! one store to a line in this thread's cache and no shared write.
//! Reclamation carries the share but never reads it.

pub use crate::count::{CountShare, REMOVES_PER_SHRINK_CHECK};
use crate::reclaim::{Reclaim, ThreadRecord};
use crate::sync::Ordering;

/// The sum of one share over every thread's record. Exact when no
/// operation is in flight; otherwise some value the count passed through
/// recently (each share is read once, at some point of the sum).
pub fn sum_of(reclaim: &Reclaim, share: impl Fn(&ThreadRecord) -> &CountShare) -> i64 {
    let mut sum = 0i64;
    // Relaxed: a sum of counters publishes nothing.
    reclaim.for_each_record(|r| sum = sum.wrapping_add(share(r).0.load(Ordering::Relaxed) as i64));
    sum
}

/// The number of keys: the sum of every thread's length share.
pub fn sum(reclaim: &Reclaim) -> usize {
    sum_of(reclaim, |r| &r.len.0).max(0) as usize
}
