//! The numbers a map's state reads from resizing: the transfer chunk and
//! when to shrink. A leaf, so that `map::state` can hold them while
//! `resize` works on the state.

use crate::raw::index::MIN_BINS;
use crate::sync::{AtomicUsize, Ordering};

/// Bins per transfer chunk (a map's default; tests set smaller chunks so
/// that small indexes transfer in many chunks, with helpers). A chunk is
/// the unit of bounded help, so its transfer (64 KiB read, up to twice
/// that written, much of it first-touch) must stay far below a millisecond.
pub const CHUNK_BINS: usize = 1024;

/// When a map shrinks on its own (see the module docs).
pub struct ShrinkPolicy {
    /// Never below this many bins: the capacity the map was built with.
    floor_bins: usize,
    /// After a shrink fell back (keys hashed too unevenly to merge), wait
    /// until fewer keys than this remain — half the count then — so that
    /// an uneven hash cannot make every check retry; `usize::MAX`: no wait.
    below_keys: AtomicUsize,
    /// ... or until this many more removes have happened (as many as there
    /// were keys, and an eighth of the bins: a retry costs two transfers of
    /// the index, so at most 16 bins per remove): by then the keys that
    /// crowded a bin may be gone, though the count has not halved.
    removes_left: AtomicUsize,
}

impl ShrinkPolicy {
    /// A policy for a map built with `floor_bins` bins.
    pub fn new(floor_bins: usize) -> Self {
        ShrinkPolicy {
            floor_bins,
            below_keys: AtomicUsize::new(usize::MAX),
            removes_left: AtomicUsize::new(0),
        }
    }

    /// The bins an index of `bins` bins holding `keys` keys should shrink
    /// to: `None` while at least one key per eight bins remains, else about
    /// two bins per key, never below the floor. `removes` is how many
    /// removes this check stands for (checks are paced by removes).
    pub fn target(&self, bins: usize, keys: usize, removes: usize) -> Option<usize> {
        if keys.saturating_mul(8) >= bins {
            return None;
        }
        // Relaxed, and a load and a store rather than an RMW: heuristic
        // thresholds, where a racing check may only retry a little early
        // or late.
        if keys >= self.below_keys.load(Ordering::Relaxed) {
            let left = self.removes_left.load(Ordering::Relaxed);
            if left > removes {
                self.removes_left.store(left - removes, Ordering::Relaxed);
                return None;
            }
            self.below_keys.store(usize::MAX, Ordering::Relaxed);
        }
        let target = keys.saturating_mul(2).max(self.floor_bins).max(MIN_BINS).next_power_of_two();
        (target < bins).then_some(target)
    }

    /// A resize was published. `fell_back`: it was a shrink of an index of
    /// `bins` bins holding `keys` keys that fell back — wait before the
    /// next automatic one. Otherwise the map grew, or shrank: the keys have
    /// changed since any fallback, so the next check may shrink again.
    pub fn resized(&self, fell_back: Option<(usize, usize)>) {
        // Relaxed: heuristic thresholds.
        if let Some((keys, bins)) = fell_back {
            self.removes_left.store(keys.max(bins / 8).max(1), Ordering::Relaxed);
            self.below_keys.store(keys / 2, Ordering::Relaxed);
        } else if self.below_keys.load(Ordering::Relaxed) != usize::MAX {
            // (A load first: the common case writes nothing to a shared
            // line.)
            self.below_keys.store(usize::MAX, Ordering::Relaxed);
        }
    }
}
