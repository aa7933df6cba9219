//! Index statistics: shape, occupancy, resizes.

use crate::raw::header::SlotState;
use crate::raw::index::Index;

/// A snapshot of a map's index (taken by [`Map::stats`](crate::Map::stats)).
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Bins in the current index.
    pub bins: usize,
    /// Link buckets inserts may chain (bins / 8).
    pub link_buckets: usize,
    /// Link buckets chained to a bin.
    pub link_buckets_in_use: usize,
    /// Link buckets lost to chaining races (hazard 6), reclaimed at the
    /// next resize.
    pub link_buckets_leaked: usize,
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
            let h = bin.header(); // before the link meta: links only grow
            let lm = bin.bucket.link_meta.load();
            links_in_use += lm.single().is_some() as usize + 2 * lm.pair().is_some() as usize;
            let mut lm = Some(lm);
            for i in h.slots_in(SlotState::Valid) {
                let k = bin.slot(&mut lm, i).load_key();
                if k != bin.dead() && k != bin.pending() && k != bin.shadow() {
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
            slots,
            occupied_slots: occupied,
            load_factor: occupied as f64 / slots as f64,
            resizes,
            shrinks,
            shrinks_fell_back,
            occupancy_at_resize,
            indexes_awaiting_free: awaiting_free,
        }
    }
}
