//! Counts many threads change, one share per thread: the map's length and
//! allocator mode's bytes of values. Each thread's shares live in its
//! reclamation record (`crate::reclaim`), which carries them but never
//! reads them; `map::len` sums them. A leaf, so that both can name it.

use crate::sync::{AtomicU64, Ordering};

/// A count many threads change, one share per thread written only by its
/// thread (a load and a store, no read-modify-write), summed on demand
/// ([`sum_of`]): the length below, and allocator mode's bytes of values.
#[derive(Default)]
pub struct CountShare(pub(crate) AtomicU64);

impl CountShare {
    /// Add `delta` (wrapping), from the owning thread.
    #[inline(always)]
    pub fn add(&self, delta: i64) {
        // Relaxed load+store: only the owning thread writes the word;
        // readers sum the shares and tolerate staleness (exact when
        // quiescent).
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(delta as u64), Ordering::Relaxed);
    }
}

/// Inserts minus removes by one thread, and the thread's removes, which
/// pace the checks for automatic shrinking.
#[derive(Default)]
pub struct LenShare(pub(crate) CountShare, AtomicU64);

/// A thread checks whether the map should shrink once per this many
/// removes: the check sums every thread's share.
pub const REMOVES_PER_SHRINK_CHECK: u64 = 1024;

impl LenShare {
    /// Count a key inserted (+1) or removed (-1) by the owning thread.
    /// Returns true when the caller should check for shrinking.
    #[inline]
    pub fn add(&self, delta: i64) -> bool {
        self.0.add(delta);
        if delta >= 0 {
            return false;
        }
        // Relaxed load+store: only the owning thread reads or writes it.
        let r = self.1.load(Ordering::Relaxed).wrapping_add(1);
        self.1.store(r, Ordering::Relaxed);
        r % REMOVES_PER_SHRINK_CHECK == 0
    }
}
