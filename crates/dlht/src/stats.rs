//! Index statistics: shape, occupancy, resizes; memory in use.

use crate::raw::bucket::{LinkBucket, PrimaryBucket};
use crate::raw::header::SlotState;
use crate::raw::index::Index;

/// Bytes a map holds, read without scanning it: cheap enough to poll (a
/// few loads; in allocator mode also a sum over one counter per thread). Taken by
/// `memory()` on every map type, and part of [`Stats`].
///
/// ```
/// let m = dlht::Map::<u64, u64>::with_capacity(1000);
/// let mem = m.memory();
/// assert_eq!(mem.index_bytes, m.stats().bins * 64);
/// assert_eq!(mem.value_bytes, 0); // inlined: values live in the slots
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// The current index's bins (64 bytes each; the pages are mapped on
    /// first touch, so a fresh index is resident only where written).
    pub index_bytes: usize,
    /// Link buckets the current index has handed out (64 bytes each).
    pub link_bytes: usize,
    /// Indexes a resize under way is filling (0 when none): its bins and
    /// links, and a shrink's fallback once used.
    pub resize_bytes: usize,
    /// Allocator mode: the allocations of the entries the map holds (for
    /// `AllocMap` a node with key and value, for `ByteMap` a header with
    /// the key and value bytes), not memory that keys or values own
    /// elsewhere, not collision lists, and not entries removed but not yet
    /// reclaimed. 0 for inlined maps and sets.
    pub value_bytes: usize,
}

impl Memory {
    /// All of it.
    pub fn total(&self) -> usize {
        self.index_bytes + self.link_bytes + self.resize_bytes + self.value_bytes
    }

    /// The memory of index `idx` (and of a resize under way from it).
    pub(crate) fn of(idx: &Index, value_bytes: usize) -> Memory {
        let own = |i: &Index| {
            (
                i.bins() * core::mem::size_of::<PrimaryBucket>(),
                i.links_claimed() * core::mem::size_of::<LinkBucket>(),
            )
        };
        let (index_bytes, link_bytes) = own(idx);
        let mut resize_bytes = 0;
        let mut next = idx.next_index();
        while let Some(n) = next {
            let (b, l) = own(n);
            resize_bytes += b + l;
            next = n.next_index();
        }
        Memory { index_bytes, link_bytes, resize_bytes, value_bytes }
    }
}

/// A snapshot of a map's index (taken by [`Map::stats`](crate::Map::stats)).
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Bins in the current index.
    pub bins: usize,
    /// Link buckets inserts may chain (bins / 5, and a few more in a small index).
    pub link_buckets: usize,
    /// Link buckets chained to a bin.
    pub link_buckets_in_use: usize,
    /// Link buckets lost to chaining races (hazard 6), reclaimed at the
    /// next resize.
    pub link_buckets_leaked: usize,
    /// Bins of the current index a damaged map file left in a transfer
    /// state no resize or snapshot explains, repaired when found (always 0
    /// for a map in memory).
    pub bins_repaired: usize,
    /// Slots inserts may use: 3 per bin + 4 per link bucket.
    pub slots: usize,
    /// Slots holding a key.
    pub occupied_slots: usize,
    /// `occupied_slots / slots`.
    pub load_factor: f64,
    /// Resizes completed (grows and shrinks).
    pub resizes: usize,
    /// Of those, shrinks (a shrink that fell back counts here, and its
    /// grow back into the fallback counts as a resize).
    pub shrinks: usize,
    /// Shrinks that fell back: some bin's keys could not be merged (an
    /// uneven hash), so the map returned to its former size.
    pub shrinks_fell_back: usize,
    /// Load factor of each index replaced by a grow, when its resize finished.
    pub occupancy_at_resize: Vec<f64>,
    /// Bytes in use (see [`Memory`]).
    pub memory: Memory,
    /// Replaced indexes not yet freed: a thread was inside them at its last
    /// leave. Reported as found (`stats` frees nothing itself); 0 whenever
    /// no operation is in flight, since every operation's exit frees what it
    /// no longer blocks.
    pub indexes_awaiting_free: usize,
}

impl Stats {
    pub(crate) fn of(
        idx: &Index,
        resizes: usize,
        (shrinks, shrinks_fell_back): (usize, usize),
        occupancy_at_resize: Vec<f64>,
        awaiting_free: usize,
    ) -> Stats {
        let mut occupied = 0;
        let mut links_in_use = 0;
        for b in 0..idx.bins() {
            let bin = idx.bin(b);
            // The header before the link meta: a link chained since is read
            // past (a slot it holds is not in `h`), one given back since
            // reads as the quarantine slot (`protocol::links`).
            let h = bin.header();
            let lm = bin.bucket.link_meta.load();
            links_in_use += lm.single().is_some() as usize + 2 * lm.pair().is_some() as usize;
            let mut lm = Some(lm);
            for i in h.slots_in(SlotState::Valid) {
                let k = bin.slot(&mut lm, i).load_key();
                if k != bin.dead() && k != bin.pending() && k != bin.shadow() && k != bin.moved() {
                    occupied += 1;
                }
            }
        }
        let slots = idx.slot_capacity();
        Stats {
            bins: idx.bins(),
            link_buckets: idx.link_capacity(),
            link_buckets_in_use: links_in_use,
            // Relaxed: a statistic; no memory is published through it.
            link_buckets_leaked: idx.leaked_links.load(crate::sync::Ordering::Relaxed),
            bins_repaired: idx.bins_repaired(),
            slots,
            occupied_slots: occupied,
            load_factor: occupied as f64 / slots as f64,
            resizes,
            shrinks,
            shrinks_fell_back,
            occupancy_at_resize,
            memory: Memory::of(idx, 0),
            indexes_awaiting_free: awaiting_free,
        }
    }
}
