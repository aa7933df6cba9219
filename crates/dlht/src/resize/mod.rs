//! Non-blocking parallel resize (paper §3.2.5).
//!
//! R1 An insert that finds its bin full, or no link bucket left, calls
//!    [`grow`] on the index it used. If that index is not the current one
//!    but its successor (a transfer into it is running), it first helps
//!    finish that transfer.
//! R2 One thread wins the index's `phase` (idle → allocating) and allocates
//!    the next index (growth ×8 below 4K bins, ×4 below 64M, then ×2), then
//!    publishes it in `next` (phase → published). Others wait for that.
//!    An allocation failure resets the phase and is returned as an error.
//! R3 The resizer and every helper claim chunks of 16K bins with a
//!    fetch-add and transfer them bin by bin (`transfer`). Operations on
//!    other bins run on; an operation on a bin in transfer waits for it.
//! R4 The thread finishing the last chunk makes the next index current and
//!    retires the old one (`reclaim`), freed once no thread can read it.

use crate::error::Error;
use crate::map::state::Core;
use crate::raw::index::{Index, MAX_BINS};
use crate::raw::threading::Shared;
use crate::reclaim::Guard;
use crate::sync::{backoff, Ordering};

/// Bins per transfer chunk (a map's default; tests set smaller chunks so
/// that small indexes transfer in many chunks, with helpers).
pub const CHUNK_BINS: usize = 16 * 1024;

const IDLE: usize = 0;
const ALLOCATING: usize = 1;
const PUBLISHED: usize = 2;
/// A snapshot holds the index: it cannot start a resize (growers wait).
const SNAPSHOT: usize = 3;

/// Number of bins of the index that replaces one of `bins` bins.
pub fn grown_bins(bins: usize) -> usize {
    let factor = if bins < 4 * 1024 {
        8
    } else if bins < 64 * 1024 * 1024 {
        4
    } else {
        2
    };
    (bins * factor).min(MAX_BINS)
}

/// The index that replaces `idx` (zeroed), of at least `min_bins` bins, or
/// why there can be none: at `MAX_BINS` an index cannot grow, and growing
/// to the same size would transfer forever.
pub fn next_index(idx: &Index, min_bins: usize) -> Result<Index, Error> {
    let bins = idx.bins();
    if bins >= MAX_BINS {
        return Err(Error::CapacityOverflow);
    }
    Index::new(grown_bins(bins).max(min_bins).min(MAX_BINS), idx.markers, idx.generation + 1)
}

/// R1–R3: grow `idx` (or help the resize already under way), transferring
/// chunks until none is left; a new index has at least `min_bins` bins (a
/// resize already under way keeps its own size). On return the caller
/// retries its operation in `idx`, which leads it (via DoneTransfer bins)
/// to the next index.
pub fn grow(
    core: &Core,
    guard: &Guard<'_>,
    idx: &Index,
    hash: &dyn Fn(u64) -> u64,
    min_bins: usize,
) -> Result<(), Error> {
    // R1: an index can only grow once it is current.
    let mut spins = 0;
    loop {
        let cur = core.current(guard);
        if cur.generation >= idx.generation {
            if cur.generation > idx.generation {
                return Ok(()); // already replaced: the retry moves on
            }
            break;
        }
        // `idx` is being filled from `cur`: finish that first.
        help(core, cur, hash);
        backoff(&mut spins);
    }
    // R2
    loop {
        // AcqRel/Acquire: `phase` hands the allocator role over; the Acquire
        // side pairs with the Release stores below that end each phase.
        match idx.resize.phase.compare_exchange(IDLE, ALLOCATING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => match next_index(idx, min_bins) {
                Ok(next) => {
                    idx.attach_next(Box::new(next));
                    idx.resize.phase.store(PUBLISHED, Ordering::Release);
                    break;
                }
                Err(e) => {
                    idx.resize.phase.store(IDLE, Ordering::Release);
                    return Err(e);
                }
            },
            Err(PUBLISHED) => break,
            Err(_) => backoff(&mut spins), // another thread is allocating
        }
    }
    help(core, idx, hash);
    Ok(())
}

/// Take the current index for a snapshot: no resize of it can start until
/// [`release_snapshot`]; a resize already under way is helped to its end
/// first, and another snapshot is waited for.
pub fn hold_for_snapshot<'g>(core: &'g Core, guard: &'g Guard<'_>, hash: &dyn Fn(u64) -> u64) -> &'g Index {
    let mut spins = 0;
    loop {
        let idx = core.current(guard);
        // AcqRel/Acquire: as in `grow`, the phase hands roles over.
        match idx.resize.phase.compare_exchange(IDLE, SNAPSHOT, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return idx,
            Err(PUBLISHED) => help(core, idx, hash),
            Err(_) => backoff(&mut spins),
        }
    }
}

/// Let resizes of `idx` start again.
pub fn release_snapshot(idx: &Index) {
    // Release: pairs with the Acquire of the next phase CAS.
    idx.resize.phase.store(IDLE, Ordering::Release);
}

/// R3–R4: transfer chunks of `idx` into its next index until none is left.
fn help(core: &Core, idx: &Index, hash: &dyn Fn(u64) -> u64) {
    let Some(next) = idx.next_index() else { return };
    let chunk_bins = core.chunk_bins();
    let chunks = idx.bins().div_ceil(chunk_bins);
    loop {
        // Relaxed: chunk numbers only need to be distinct.
        let c = idx.resize.next_chunk.fetch_add(1, Ordering::Relaxed);
        if c >= chunks {
            return;
        }
        let first = c * chunk_bins;
        let last = (first + chunk_bins).min(idx.bins());
        let mut copied = 0;
        for b in first..last {
            copied += crate::protocol::transfer::transfer_bin::<Shared>(idx, b, next, hash);
        }
        core.note_chunk(copied);
        // AcqRel: the last finisher must see every other chunk's transfer
        // before it publishes the next index.
        if idx.resize.chunks_done.fetch_add(1, Ordering::AcqRel) + 1 == chunks {
            core.publish(idx, next); // R4
        }
    }
}
