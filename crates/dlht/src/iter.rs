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

use crate::plant::{planted, Plant};
use crate::protocol::{settle, validate};
use crate::raw::header::SlotState;
use crate::raw::index::Index;
use crate::raw::threading::Threading;

/// A hash class: the hashes `h` with `h & mask == want` (`mask` is some
/// index's bins − 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    mask: u64,
    want: u64,
}

impl Class {
    /// The class of bin `b` of `idx`.
    fn of(idx: &Index, b: usize) -> Class {
        Class { mask: (idx.bins() - 1) as u64, want: b as u64 }
    }

    /// The hashes in both classes, or None if no hash is. Masks are all
    /// ones below some bit, so the finer class decides, if it agrees with
    /// the coarser.
    fn and(self, other: Class) -> Option<Class> {
        let (fine, coarse) = if self.mask >= other.mask { (self, other) } else { (other, self) };
        (fine.want & coarse.mask == coarse.want).then_some(fine)
    }
}

/// Append to `out` the live `(key, value)` words of the class of bin `b`
/// of `idx`: the hashes `h` with `h & (idx.bins() - 1) == b`. `hash` is
/// the map's hash of a key word, needed only where the class shares a bin
/// of a later index with other classes.
///
/// A key never leaves its class, so where bin `b` was transferred the
/// class is read in the next index: a grow splits it over several bins, a
/// shrink merges it into one bin with other classes (whose keys are
/// filtered out by hash), and a later grow of that bin splits it again —
/// into bins of which only those that agree with the class are read, so
/// no key is read twice. Each bin is read as one validated snapshot.
///
/// The caller keeps `idx` allocated (a guard, or exclusive access), which
/// also keeps every later index allocated (see `Index::next_index`).
pub(crate) fn collect_class<T: Threading>(
    idx: &Index,
    b: usize,
    hash: &dyn Fn(u64) -> u64,
    out: &mut Vec<(u64, u64)>,
) {
    let class = Class::of(idx, b);
    if read_bin::<T>(idx, b, class, hash, out) {
        return; // the common case: no transfer, no allocation
    }
    // The bin moved: follow the class through later indexes with a work
    // list (however many resizes ran meanwhile, no recursion).
    let mut work = Vec::new();
    push_next(idx, b, class, &mut work);
    while let Some((idx, b, class)) = work.pop() {
        if !read_bin::<T>(idx, b, class, hash, out) {
            push_next(idx, b, class, &mut work);
        }
    }
}

/// Read the keys of `class` in bin `b` of `idx` into `out`: true if done,
/// false if the bin was transferred (nothing added; read the next index).
fn read_bin<T: Threading>(
    idx: &Index,
    b: usize,
    class: Class,
    hash: &dyn Fn(u64) -> u64,
    out: &mut Vec<(u64, u64)>,
) -> bool {
    let bin = idx.bin_as::<T>(b);
    let (dead, pending, shadow, moved) = (bin.dead(), bin.pending(), bin.shadow(), bin.moved());
    // The bin holds other classes too when the class is finer than it.
    let filter = class.mask > (idx.bins() - 1) as u64;
    // A bin may hold a pair no get can find, whose key is not this bin's:
    // an earlier open's pending or shadow pair that a power loss left where
    // no intent names it (`Index::may_hold_strays`). Not yielded.
    let own = |k: u64| !idx.may_hold_strays() || idx.bin_of(hash(k)) == b;
    let start = out.len();
    loop {
        let mut h = bin.header();
        if settle(&bin, &mut h) {
            return false; // transferred: read the class in the next index
        }
        let mut lm = None;
        for i in h.slots_in(SlotState::Valid) {
            let slot = bin.slot(&mut lm, i);
            let k = slot.load_key();
            if k != dead && k != pending && k != shadow && k != moved && own(k) {
                out.push((k, slot.load_value()));
            }
        }
        if validate(&bin, h) {
            if filter {
                let mut keep = start;
                for j in start..out.len() {
                    if hash(out[j].0) & class.mask == class.want {
                        out[keep] = out[j];
                        keep += 1;
                    }
                }
                out.truncate(keep);
            }
            return true;
        }
        out.truncate(start); // changed under us: read it again
    }
}

/// Queue the bins of the next index that hold keys of `class`, which bin
/// `b` of `idx` held before its transfer.
fn push_next<'i>(idx: &'i Index, b: usize, class: Class, work: &mut Vec<(&'i Index, usize, Class)>) {
    let next = idx.next_index().expect("dlht invariant: a transferred bin has a next index");
    let (old_bins, new_bins) = (idx.bins(), next.bins());
    if new_bins >= old_bins {
        // Growth (or a shrink's fallback): bins b, b + old, b + 2·old, …,
        // of which only those agreeing with the class can hold its keys.
        for j in 0..new_bins / old_bins {
            let nb = b + j * old_bins;
            // Planted bug (scripts/planted-bugs.sh): follow every child with
            // the class unchanged, so a class merged by a shrink and split
            // by a grow is read once per path.
            let c = if planted(Plant::IterClassReuse) { Some(class) } else { class.and(Class::of(next, nb)) };
            if let Some(c) = c {
                work.push((next, nb, c));
            }
        }
    } else {
        // A smaller index: the class shares its bin with others.
        work.push((next, b & (new_bins - 1), class));
    }
}

/// Walks the bins of one index, class by class, buffering one class at a
/// time; shared by the iterators of every map kind.
pub(crate) struct ClassWalk<'i> {
    index: &'i Index,
    next_bin: usize,
    /// Bins still to read.
    bins_left: usize,
    buf: Vec<(u64, u64)>,
    pos: usize,
}

impl<'i> ClassWalk<'i> {
    /// A walk over `index`, which the caller keeps allocated for `'i`.
    pub(crate) fn new(index: &'i Index) -> Self {
        Self::bins(index, 0, index.bins())
    }

    /// A walk over `count` bins of `index` (at most all of them) from bin
    /// `start` modulo the number of bins, wrapping past the last: a
    /// cache's CLOCK hand, or a sample from a random bin.
    pub(crate) fn bins(index: &'i Index, start: usize, count: usize) -> Self {
        let bins = index.bins();
        ClassWalk { index, next_bin: start & (bins - 1), bins_left: count.min(bins), buf: Vec::new(), pos: 0 }
    }

    /// The next live `(key, value)` words, or None at the end.
    #[inline]
    pub(crate) fn next<T: Threading>(&mut self, hash: &dyn Fn(u64) -> u64) -> Option<(u64, u64)> {
        while self.pos == self.buf.len() {
            if self.bins_left == 0 {
                return None;
            }
            self.buf.clear();
            self.pos = 0;
            collect_class::<T>(self.index, self.next_bin, hash, &mut self.buf);
            // Bins are a power of two (the class masks rely on it).
            self.next_bin = (self.next_bin + 1) & (self.index.bins() - 1);
            self.bins_left -= 1;
        }
        self.pos += 1;
        Some(self.buf[self.pos - 1])
    }
}
