//! Weakly consistent iteration (paper §3.4.4's weak iterator), across
//! concurrent updates and resizes, without blocking anyone.
//!
//! The iterator walks the bins of the index it started in. Each bin stands
//! for a *hash class* — the hashes that select it — and a key never leaves
//! its class: a resize moves it into a bin of the next index that the same
//! hash selects. So the class of bin `b` is read as one validated snapshot
//! of `b` (the seqlock re-read of its header, as a get does), or, if `b`
//! was transferred, as the classes' share of the next index's bins, each
//! read the same way (recursively, if they moved again). A bin in transfer
//! is waited out, as every operation waits it out.
//!
//! Hence: a key present for the whole iteration is in exactly one place
//! whenever its class is read, and its class is read once, so it is yielded
//! exactly once; a key added or removed meanwhile may or may not be.

use crate::protocol::{settle, validate};
use crate::raw::header::SlotState;
use crate::raw::index::Index;
use crate::raw::threading::Threading;

/// Append to `out` the live `(key, value)` words of the class of bin `b`
/// of `idx`: the hashes `h` with `h & (idx.bins() - 1) == b`. `hash` is
/// the map's hash of a key word, needed only where the class shares a bin
/// of a later index with other classes.
///
/// The caller keeps `idx` allocated (a guard, or exclusive access), which
/// also keeps every later index allocated (see `Index::next_index`).
pub(crate) fn collect_class<T: Threading>(
    idx: &Index,
    b: usize,
    hash: &dyn Fn(u64) -> u64,
    out: &mut Vec<(u64, u64)>,
) {
    collect_filtered::<T>(idx, b, None, hash, out)
}

/// [`collect_class`] for bin `b` of `idx`, keeping only keys whose hash
/// satisfies `class` (when this bin also holds other classes).
fn collect_filtered<T: Threading>(
    idx: &Index,
    b: usize,
    class: Option<(u64, u64)>,
    hash: &dyn Fn(u64) -> u64,
    out: &mut Vec<(u64, u64)>,
) {
    let bin = idx.bin_as::<T>(b);
    let (dead, pending, shadow) = (bin.dead(), bin.pending(), bin.shadow());
    let start = out.len();
    loop {
        let mut h = bin.header();
        if settle(&bin, &mut h) {
            break; // transferred: read the class in the next index
        }
        let mut lm = None;
        for i in h.slots_in(SlotState::Valid) {
            let slot = bin.slot(&mut lm, i);
            let k = slot.load_key();
            if k != dead && k != pending && k != shadow {
                out.push((k, slot.load_value()));
            }
        }
        if validate(&bin, h) {
            if let Some((mask, want)) = class {
                let mut keep = start;
                for j in start..out.len() {
                    if hash(out[j].0) & mask == want {
                        out[keep] = out[j];
                        keep += 1;
                    }
                }
                out.truncate(keep);
            }
            return;
        }
        out.truncate(start); // changed under us: read it again
    }
    let next = idx.next_index().expect("dlht invariant: a transferred bin has a next index");
    let (old_bins, new_bins) = (idx.bins(), next.bins());
    // The class of `b` here (after any filter already applied) is the hashes
    // with these low bits.
    let (mask, want) = class.unwrap_or(((old_bins - 1) as u64, b as u64));
    if new_bins >= old_bins {
        // Growth: the class is split over bins b, b + old, b + 2·old, …;
        // a filter from an earlier, smaller index still applies there.
        for j in 0..new_bins / old_bins {
            let nb = b + j * old_bins;
            collect_filtered::<T>(next, nb, class, hash, out);
        }
    } else {
        // A smaller index: the class shares its bin with others.
        collect_filtered::<T>(next, b & (new_bins - 1), Some((mask, want)), hash, out);
    }
}

/// Walks the bins of one index, class by class, buffering one class at a
/// time; shared by the iterators of every map kind.
pub(crate) struct ClassWalk<'i> {
    index: &'i Index,
    next_bin: usize,
    buf: Vec<(u64, u64)>,
    pos: usize,
}

impl<'i> ClassWalk<'i> {
    /// A walk over `index`, which the caller keeps allocated for `'i`.
    pub(crate) fn new(index: &'i Index) -> Self {
        ClassWalk { index, next_bin: 0, buf: Vec::new(), pos: 0 }
    }

    /// The next live `(key, value)` words, or None at the end.
    #[inline]
    pub(crate) fn next<T: Threading>(&mut self, hash: &dyn Fn(u64) -> u64) -> Option<(u64, u64)> {
        while self.pos == self.buf.len() {
            if self.next_bin == self.index.bins() {
                return None;
            }
            self.buf.clear();
            self.pos = 0;
            collect_class::<T>(self.index, self.next_bin, hash, &mut self.buf);
            self.next_bin += 1;
        }
        self.pos += 1;
        Some(self.buf[self.pos - 1])
    }
}
