//! Non-blocking parallel resize (paper §3.2.5).
//!
//! R1 An insert that finds its bin full, or no link bucket left, calls
//!    [`grow`] on the index it used. If that index is not the current one
//!    but its successor (a transfer into it is running), it first helps
//!    with that transfer.
//! R2 One thread wins the index's `phase` (idle → allocating) and allocates
//!    the next index (growth ×8 below 64 bins, then ×2), then
//!    publishes it in `next` (phase → published). Others wait for that.
//!    An allocation failure resets the phase and is returned as an error.
//! R3 The resizer and every helper claim chunks of 1K bins with a
//!    fetch-add and transfer them bin by bin (`transfer`). Operations on
//!    other bins run on; an operation on a bin in transfer waits for it.
//!    Helping is bounded ([`Budget`], after papaya's incremental resize): an
//!    insert that found its bin full transfers that bin first, then
//!    [`HELP_CHUNKS`] chunks, and retries; every other insert or remove
//!    that starts while a grow is under way helps with one chunk
//!    ([`help_on_the_way`]): an index of N bins is transferred within
//!    N / 1024 writes, a thousandth of those that fill it. Reads never
//!    help (a call on the get path costs every get). No single call copies
//!    more than a few chunks. `stats()`, `reserve`, snapshots and shrinks
//!    help to the end.
//! R4 The thread finishing the last chunk makes the next index current and
//!    retires the old one (`reclaim`), freed once no thread can read it.
//!
//! Shrinking ([`shrink`]) runs the same steps into a smaller index, after
//! "Resizable, Scalable, Concurrent Hash Tables via Relativistic
//! Programming" (USENIX ATC 2011), which shrinks by merging the buckets
//! that share low hash bits while readers go on. Here a chunk is a range of
//! *target* bins, each filled from all its sources at once
//! (`transfer_target`), so a target is complete before any operation can
//! reach it. A target whose sources hold more than a bin's 15 slots is not
//! merged: its sources go into a fallback index as large as the old one,
//! the smaller index is grown into that fallback right after it is
//! published, and the map ends where it began (two transfers spent).
//! Operations on other bins never wait, as for a grow.
//!
//! When: [`ShrinkPolicy`] shrinks once fewer than one key per eight bins
//! remains, to about two bins per key (at most 16× smaller per step, never
//! below the capacity the map was built with). A grow happens near 2.3 keys
//! per bin and lands near one key per bin, so after either resize the key
//! count must change at least fourfold before the other can follow: the
//! two cannot alternate.

#[cfg(not(loom))]
mod finisher;

use crate::error::Error;
use crate::map::state::Core;
use crate::plant::{planted, Plant};
use crate::protocol::transfer::{transfer_bin, transfer_own_bin, transfer_target, MAX_SHRINK_FACTOR};
use crate::raw::index::{Index, ResizeState, MAX_BINS, MIN_BINS};
use crate::raw::threading::Shared;
use crate::reclaim::Guard;
use crate::sync::{backoff, Ordering};

pub(crate) mod policy;
pub use policy::ShrinkPolicy;

/// Chunks an insert that found its bin full transfers, after its own bin,
/// before it retries.
pub const HELP_CHUNKS: usize = 2;

/// How much of a resize one call helps with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// Until no chunk is left to claim (`reserve`, snapshots, shrinks).
    All,
    /// An operation that met a resize: transfer bin `own` (a source bin of
    /// the index, if a grow), then up to `chunks` chunks, then return.
    Bounded {
        /// The caller's bin, transferred first.
        own: Option<usize>,
        /// Chunks to claim after it.
        chunks: usize,
    },
}

impl Budget {
    fn chunks(self) -> usize {
        match self {
            Budget::All => usize::MAX,
            Budget::Bounded { chunks, .. } => chunks,
        }
    }
}

const IDLE: usize = ResizeState::IDLE;
const ALLOCATING: usize = ResizeState::ALLOCATING;
const PUBLISHED: usize = ResizeState::PUBLISHED;
const SNAPSHOT: usize = ResizeState::SNAPSHOT;

/// Number of bins of the index that replaces one of `bins` bins.
pub fn grown_bins(bins: usize) -> usize {
    // ×8 while an index is tiny (a map from `new()` passes those sizes
    // quickly), then ×2: a grow near 2.3 keys per bin lands near 1.15,
    // where ×4 landed near 0.6 and left the index a sixth full (and ×8 up
    // to 4K bins left 4096 keys in 8192 bins).
    let factor = if bins < 64 { 8 } else { 2 };
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
    let next = idx.new_like(grown_bins(bins).max(min_bins).min(MAX_BINS), idx.generation + 1)?;
    #[cfg(not(loom))]
    prepare(&next)?;
    Ok(next)
}

/// Ready a persistent grow's new index before it is attached: its bins get
/// their disk blocks now (`fallocate`, unwritten extents: nothing is
/// written), so a full file system fails the grow here, as an error the
/// insert returns, instead of killing the process with SIGBUS at a later
/// page fault into a hole; a file system without `fallocate` goes on as
/// before. The index is not prefaulted here: faulting it all in before it
/// is attached (`MADV_POPULATE_WRITE` over every bin) made the growing
/// thread do alone what the helpers do in parallel, a chunk's targets each
/// (`prefault_targets`), and cut 2-thread population to 0.70 of the
/// in-memory map's from 0.95 (BENCHMARKS, 2026-11-27). On error the new
/// file is deleted at once (the index, never attached, is dropped).
#[cfg(not(loom))]
fn prepare(next: &Index) -> Result<(), Error> {
    if let Some(f) = next.file() {
        if let Err(e) = f.preallocate_bins(next.bins()) {
            f.remove_now();
            return Err(e);
        }
    }
    Ok(())
}

/// Shrink `idx` towards `target_bins` bins (one step: at most
/// `MAX_SHRINK_FACTOR` times smaller), or help the resize already under
/// way. Does nothing if `idx` is no longer current, is held by a snapshot,
/// or is already that small. Fails only if the smaller index (or its
/// fallback) cannot be allocated; the map is unchanged then.
pub fn shrink(
    core: &Core,
    guard: &Guard<'_>,
    idx: &Index,
    hash: &dyn Fn(u64) -> u64,
    target_bins: usize,
) -> Result<(), Error> {
    let target = target_bins.max(idx.bins() / MAX_SHRINK_FACTOR).max(MIN_BINS);
    if target >= idx.bins() || core.current(guard).generation != idx.generation {
        return Ok(());
    }
    let make = || {
        Ok((idx.new_like(target, idx.generation + 1)?, Some(idx.new_like(idx.bins(), idx.generation + 2)?)))
    };
    if !attach(idx, make)? {
        return Ok(()); // another thread is allocating, or a snapshot holds it
    }
    help(core, idx, hash, Budget::All);
    Ok(())
}

/// R1–R3: grow `idx` (or help the resize already under way) with the work
/// `budget` allows; a new index has at least `min_bins` bins (a resize
/// already under way keeps its own size). On return the caller retries its
/// operation in `idx`, which leads it (via DoneTransfer bins) to the next
/// index — or, if its bin is not transferred yet, back here.
pub fn grow(
    core: &Core,
    guard: &Guard<'_>,
    idx: &Index,
    hash: &dyn Fn(u64) -> u64,
    min_bins: usize,
    budget: Budget,
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
        // `idx` is being filled from `cur`: help with that first.
        help(core, cur, hash, Budget::Bounded { own: None, chunks: budget.chunks() });
        if budget != Budget::All {
            return Ok(()); // the retry comes back while `cur` is not done
        }
        backoff(&mut spins);
    }
    // R2
    while !attach(idx, || Ok((next_index(idx, min_bins)?, None)))? {
        backoff(&mut spins); // another thread is allocating
    }
    help(core, idx, hash, budget);
    Ok(())
}

/// R3 for an insert or remove that started in `idx` while it grows: help
/// with one chunk, if any is left to claim. `idx` is the index the
/// operation entered with, so it was current (R1): an index a shrink is
/// still filling, which may already have its fallback as its next, is never
/// helped from here.
/// Shrinks are left to their starter (a shrink's chunk merges up to 16
/// source bins per target, too much for one call).
#[inline]
pub fn help_on_the_way(core: &Core, idx: &Index, hash: &dyn Fn(u64) -> u64) {
    let Some(next) = idx.next_index() else { return };
    // Relaxed: a hint; `help` claims with a fetch-add.
    // (A persistent map's writes also help a shrink: one its process left
    // under way when it died has no starter any more.)
    if (next.bins() > idx.bins() || persistent(core))
        && idx.resize.next_chunk.load(Ordering::Relaxed) < chunk_count(core, idx, next)
    {
        help(core, idx, hash, Budget::Bounded { own: None, chunks: 1 });
        return;
    }
    // Every chunk claimed: a background finisher may have left the
    // publication to the next writer (`finish_in_background`).
    #[cfg(not(loom))]
    if core.persist().is_some_and(|p| p.publication_waits(idx.generation)) {
        help(core, idx, hash, Budget::Bounded { own: None, chunks: 0 });
    }
}

/// How [`finish_in_background`] ended.
#[cfg(not(loom))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// Asked to stop (the map is closing): bins it transferred are done,
    /// its chunks not counted; the next open resumes the rest.
    Stopped,
    /// Its chunks are done and counted; a thread with a chunk still in
    /// hand counts the last one and publishes the next index, as always.
    Elsewhere {
        /// Keys its transfers copied.
        copied: usize,
    },
    /// It counted the last chunk: every bin is transferred, and the next
    /// index is to be published — by a thread that has the map in hand
    /// (the finisher has only the indexes), the first to [`help`].
    Last {
        /// Keys its transfers copied.
        copied: usize,
    },
}

/// The first step of [`finish_in_background`], taken by the opening
/// thread before the map is shared: claim a chunk of the grow of `idx`
/// into `next` (chunks of `chunk_bins` bins), to be held uncounted until
/// the finisher's end. None if no chunk is left.
#[cfg(not(loom))]
pub fn claim_anchor(idx: &Index, next: &Index, chunk_bins: usize) -> Option<usize> {
    let chunks = chunks(idx, next, chunk_bins);
    // Relaxed: chunk numbers only need to be distinct (as in `help`).
    let anchor = idx.resize.next_chunk.fetch_add(1, Ordering::Relaxed);
    (anchor < chunks).then_some(anchor)
}

/// R3 for a grow a persistent map's open resumed, run by a thread of its
/// own (`persist::MapFile::finish_resumed_grow`) rather than only by
/// writes: transfer chunk `anchor` (from [`claim_anchor`]) and every chunk
/// left of `idx` into `next`, alongside any helpers, until none is left or
/// `stop` says so (checked between bins).
///
/// The finisher has the two indexes but not the map: it is not pinned
/// (the map may move), and cannot publish. Both indexes stay allocated
/// while it runs because it holds the anchor claimed and uncounted until
/// its very end: no thread can count the last chunk, so none publishes and
/// retires `idx` (nor can `next` be replaced before it is current). The
/// anchor must have been claimed before any other thread could reach the
/// map, and `chunk_bins` must stay the map's chunk size. If its own count
/// of the anchor is the last, it returns [`Finished::Last`] and nobody
/// else publishes: the indexes stay allocated until the caller hands the
/// publication over.
#[cfg(not(loom))]
pub fn finish_in_background(
    idx: &Index,
    next: &Index,
    hash: &dyn Fn(u64) -> u64,
    chunk_bins: usize,
    anchor: usize,
    stop: &dyn Fn() -> bool,
) -> Finished {
    let chunks = chunks(idx, next, chunk_bins);
    let mut copied = 0;
    let mut transfer =
        |c: usize| grow_chunk(idx, next, c, chunk_bins, hash, stop).map(|n| copied += n).is_some();
    if !transfer(anchor) {
        return Finished::Stopped;
    }
    loop {
        // Relaxed: as in `claim_anchor`.
        let c = idx.resize.next_chunk.fetch_add(1, Ordering::Relaxed);
        if c >= chunks {
            break;
        }
        if !transfer(c) {
            return Finished::Stopped;
        }
        // AcqRel: as in `help`. Never the last count: the anchor's is not
        // in yet.
        idx.resize.chunks_done.fetch_add(1, Ordering::AcqRel);
    }
    // AcqRel: as in `help`; the last count sees every other chunk's work.
    if idx.resize.chunks_done.fetch_add(1, Ordering::AcqRel) + 1 == chunks {
        Finished::Last { copied }
    } else {
        Finished::Elsewhere { copied }
    }
}

/// True for a persistent map's core.
#[inline(always)]
fn persistent(core: &Core) -> bool {
    #[cfg(not(loom))]
    return core.persist().is_some();
    #[cfg(loom)]
    {
        let _ = core;
        false
    }
}

/// R2, for a grow and a shrink alike: win the allocator role (idle →
/// allocating), attach the index `make` builds (with a shrink's fallback)
/// and publish it. True once a next index is attached (here or by another
/// thread: help it); false while another thread holds the role (allocating,
/// or a snapshot); `make`'s error resets the phase.
fn attach(idx: &Index, make: impl FnOnce() -> Result<(Index, Option<Index>), Error>) -> Result<bool, Error> {
    // AcqRel/Acquire: `phase` hands the allocator role over; the Acquire
    // side pairs with the Release stores below that end each phase.
    match idx.resize.phase.compare_exchange(IDLE, ALLOCATING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // A damaged file's bin left in transfer would stall its chunk.
            idx.repair_transfer_states(true);
            match make() {
                Ok((next, fallback)) => {
                    if let Some(f) = fallback {
                        // Relaxed: `attach_next`'s Release publishes it with
                        // the next index, before any helper can look for it.
                        idx.resize.fallback.store(Box::into_raw(Box::new(f)), Ordering::Relaxed);
                    }
                    idx.attach_next(Box::new(next));
                    idx.resize.phase.store(PUBLISHED, Ordering::Release);
                    crate::persist::crash::at(crate::persist::crash::CrashPoint::ResizeAttached);
                    Ok(true)
                }
                Err(e) => {
                    idx.resize.phase.store(IDLE, Ordering::Release);
                    Err(e)
                }
            }
        }
        Err(PUBLISHED) => Ok(true),
        Err(_) => Ok(false),
    }
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
            Ok(_) => {
                // A damaged file's bin left in transfer would fail the freeze.
                idx.repair_transfer_states(true);
                return idx;
            }
            Err(PUBLISHED) => {
                // Other helpers may hold the last chunks: help, then wait
                // for the publication without spinning hot.
                help(core, idx, hash, Budget::All);
                backoff(&mut spins);
            }
            Err(_) => backoff(&mut spins),
        }
    }
}

/// Help a resize under way to its end and wait for its publication; the
/// index then current (for scans that must see a single index).
pub fn finish_under_way<'g>(core: &'g Core, guard: &'g Guard<'_>, hash: &dyn Fn(u64) -> u64) -> &'g Index {
    let mut spins = 0;
    loop {
        let idx = core.current(guard);
        if idx.next_index().is_none() {
            return idx;
        }
        // Other helpers may hold the last chunks: help, then wait.
        help(core, idx, hash, Budget::All);
        backoff(&mut spins);
    }
}

/// Let resizes of `idx` start again.
pub fn release_snapshot(idx: &Index) {
    // Release: pairs with the Acquire of the next phase CAS.
    idx.resize.phase.store(IDLE, Ordering::Release);
}

/// Chunks of a resize from `idx` into `next`: ranges of source bins when
/// growing, of target bins when shrinking.
fn chunk_count(core: &Core, idx: &Index, next: &Index) -> usize {
    chunks(idx, next, core.chunk_bins())
}

/// [`chunk_count`] for chunks of `chunk_bins` bins.
fn chunks(idx: &Index, next: &Index, chunk_bins: usize) -> usize {
    next.bins().min(idx.bins()).div_ceil(chunk_bins)
}

/// Transfer chunk `c` (of `chunk_bins` source bins) of a grow of `idx`
/// into `next`: the keys copied; None if `stop` said so (asked before each
/// bin), with the bins before it done.
fn grow_chunk(
    idx: &Index,
    next: &Index,
    c: usize,
    chunk_bins: usize,
    hash: &dyn Fn(u64) -> u64,
    stop: &dyn Fn() -> bool,
) -> Option<usize> {
    let first = c * chunk_bins;
    let last = (first + chunk_bins).min(next.bins().min(idx.bins()));
    prefault_targets(idx, next, first..last);
    let mut copied = 0;
    for b in first..last {
        if stop() {
            return None;
        }
        copied += transfer_bin::<Shared>(idx, b, next, hash);
    }
    Some(copied)
}

/// R3–R4: transfer chunks of `idx` into its next index, as many as
/// `budget` allows or until none is left. A chunk is a range of source bins
/// when growing, of target bins when shrinking. A bounded call of a grow
/// first transfers its caller's own bin, whichever chunk holds it: the
/// chunk's claimant then finds it done (or waits out its transfer).
fn help(core: &Core, idx: &Index, hash: &dyn Fn(u64) -> u64, budget: Budget) {
    let Some(next) = idx.next_index() else { return };
    // An index opened from a file, not yet walked for damaged transfer
    // states: the first helper walks it (a resumed grow's finisher claimed
    // the walk at open); others keep out meanwhile (callers back off and
    // come again).
    if idx.states_unchecked() {
        if !idx.claim_state_walk() {
            return;
        }
        idx.walk_claimed_states(false);
    }
    // A resumed grow a background finisher completed: its last chunk is
    // done, and the first thread here with the map in hand publishes it.
    #[cfg(not(loom))]
    if let Some(copied) = core.persist().and_then(|p| p.take_publication(idx.generation)) {
        core.note_transferred(copied);
        core.publish(idx, next, None); // R4 (a grow: no fallback)
        return;
    }
    #[cfg(not(loom))]
    let _cell = core.cell_scope();
    let shrinking = next.bins() < idx.bins();
    let chunk_bins = core.chunk_bins();
    let units = next.bins().min(idx.bins());
    let chunks = chunk_count(core, idx, next);
    if let Budget::Bounded { own: Some(b), .. } = budget {
        if !shrinking {
            prefault_targets(idx, next, b..b + 1);
            core.note_transferred(transfer_own_bin::<Shared>(idx, b, next, hash));
        }
    }
    for _ in 0..budget.chunks() {
        // Relaxed: chunk numbers only need to be distinct.
        let c = idx.resize.next_chunk.fetch_add(1, Ordering::Relaxed);
        if c >= chunks {
            return;
        }
        let copied = if shrinking {
            // Acquire (with the `next` load above): the fallback was stored
            // before the next index was attached.
            let fallback = idx.resize.fallback.load(Ordering::Acquire);
            // SAFETY: set before the shrink's next index was attached, and
            // freed by the publisher only after every chunk, this one
            // included, is done.
            let fallback = unsafe { &*fallback };
            let first = c * chunk_bins;
            (first..(first + chunk_bins).min(units))
                .map(|t| transfer_target::<Shared>(idx, t, next, fallback, hash))
                .sum()
        } else {
            grow_chunk(idx, next, c, chunk_bins, hash, &|| false).unwrap_or_default()
        };
        core.note_chunk(copied);
        // AcqRel: the last finisher must see every other chunk's transfer
        // before it publishes the next index.
        if idx.resize.chunks_done.fetch_add(1, Ordering::AcqRel) + 1 == chunks {
            // Relaxed: only this thread touches it from here on.
            let fallback = idx.resize.fallback.swap(core::ptr::null_mut(), Ordering::Relaxed);
            // Keys a background finisher copied count in the statistic.
            #[cfg(not(loom))]
            if let Some(p) = core.persist() {
                core.note_transferred(p.take_background_copied());
            }
            // SAFETY: the fallback (if any) is alive until dropped below.
            let fell_back = core.publish(idx, next, unsafe { fallback.as_ref() }); // R4
            #[cfg(all(test, not(loom)))]
            tests::after_publish();
            // Planted bug (scripts/planted-bugs.sh): judge the fallback
            // after publishing, when an ordinary grow may have been attached.
            let fell_back =
                if planted(Plant::FallbackJudgedLate) { next.next_index().is_some() } else { fell_back };
            if fell_back {
                // A shrink fell back: grow into the fallback now, so no
                // operation ends with a resize half done.
                help(core, next, hash, Budget::All);
            } else if !fallback.is_null() {
                // SAFETY: the unused fallback, from Box::into_raw in
                // `shrink`; no transfer can reach it any more.
                // (A persistent map's file of it was deleted at publication.)
                let fallback = unsafe { Box::from_raw(fallback) };
                #[cfg(not(loom))]
                if let Some(f) = fallback.file().filter(|_| planted(Plant::FallbackFileLate)) {
                    f.retire();
                }
                drop(fallback);
            }
        }
    }
}

/// Fault in the bins of `next` that a grow's transfer of source bins
/// `sources` of `idx` writes (source bin `b` feeds `b + j·idx.bins()`),
/// and the link buckets it may chain, before any source is claimed: an
/// operation on a bin in transfer waits for it, and must not wait out a
/// first touch of the page it is copied to.
fn prefault_targets(idx: &Index, next: &Index, sources: core::ops::Range<usize>) {
    for j in 0..next.bins() / idx.bins() {
        let base = j * idx.bins();
        next.prefault_bins(base + sources.start..base + sources.end);
    }
    // Half a link bucket per source bin: more than a grow's transfer chains
    // (a bin of the larger index rarely holds more than three keys).
    next.prefault_links_ahead(sources.len().div_ceil(2));
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use crate::raw::index::LIVE_HERE;
    use crate::Map;
    use std::cell::RefCell;
    use std::sync::Arc;

    std::thread_local! {
        /// Run once right after this thread publishes an index (a test hook
        /// for the window between publication and what follows it).
        static AFTER_PUBLISH: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    pub(crate) fn after_publish() {
        if let Some(f) = AFTER_PUBLISH.with(|h| h.borrow_mut().take()) {
            f()
        }
    }

    /// A chunk whose bin an insert is transferring ahead of it (bounded
    /// help: its own bin first) is done only once that bin is: a thread
    /// finishing the resize meanwhile must wait for it, not publish the
    /// next index while the bin's keys are still being copied there.
    #[test]
    fn a_resize_is_not_published_while_an_insert_copies_its_own_bin() {
        use crate::protocol::transfer::hooks::WHILE_TRANSFERRING;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::mpsc;
        use std::time::Duration;
        let m = Arc::new(Map::<u64, u64>::with_capacity(4_000));
        let published_early = Arc::new(AtomicBool::new(false));
        let finisher = Arc::new(std::sync::Mutex::new(None));
        let (m2, early, fin) = (m.clone(), published_early.clone(), finisher.clone());
        WHILE_TRANSFERRING.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                // This thread holds its own bin InTransfer: another thread
                // finishes the grow (every other chunk) meanwhile.
                let (done, wait) = mpsc::channel();
                let t = std::thread::spawn(move || {
                    let _ = m2.stats();
                    let _ = done.send(());
                });
                if wait.recv_timeout(Duration::from_millis(300)).is_ok() {
                    early.store(true, Ordering::Relaxed);
                }
                *fin.lock().unwrap() = Some(t);
            }))
        });
        let mut k = 0u64;
        while WHILE_TRANSFERRING.with(|h| h.borrow().is_some()) {
            m.insert(k, k).unwrap();
            k += 1;
            assert!(k < 10_000_000, "no insert ever transferred a bin");
        }
        finisher.lock().unwrap().take().unwrap().join().unwrap();
        assert!(
            !published_early.load(Ordering::Relaxed),
            "the grow was finished while a bin was in transfer"
        );
        assert_eq!(m.len(), k as usize);
        assert!((0..k).all(|i| m.get(&i) == Some(i)), "a key was lost");
    }

    /// A persistent map's shrink that did not fall back, followed at once by
    /// a grow of the new index (from the hook, before the publisher drops
    /// the fallback): the grow's index file has the fallback's generation,
    /// and deleting the fallback's file after publication deleted the grow's
    /// (the map could not be reopened). Its file now goes before
    /// publication.
    #[test]
    fn a_grow_right_after_a_persistent_shrink_keeps_its_file() {
        let dir = std::env::temp_dir().join(format!("dlht-unit-shrink-grow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let m = Arc::new(crate::FileMap::<u64, u64>::open(&dir).unwrap());
            for k in 0..5_000 {
                m.insert(k, k).unwrap();
            }
            for k in 100..5_000 {
                m.remove(&k);
            }
            // At the first publication, grow; at the next (the shrink that
            // follows), see whether the grow's index file is still there.
            let (m2, dir2) = (m.clone(), dir.clone());
            let kept = Arc::new(std::sync::Mutex::new(None));
            let kept2 = kept.clone();
            let files = move || -> Vec<String> {
                let mut v: Vec<String> = std::fs::read_dir(&dir2)
                    .unwrap()
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with("index."))
                    .collect();
                v.sort();
                v
            };
            AFTER_PUBLISH.with(|h| {
                *h.borrow_mut() = Some(Box::new(move || {
                    m2.reserve(20_000);
                    // The grow's index: the newest file (older ones go as
                    // their indexes are freed).
                    let grown = files().into_iter().max_by_key(|f| {
                        f.trim_start_matches("index.").trim_end_matches(".dlht").parse::<u64>().unwrap_or(0)
                    });
                    AFTER_PUBLISH.with(|h| {
                        *h.borrow_mut() = Some(Box::new(move || {
                            let now = files();
                            *kept2.lock().unwrap() = Some(grown.iter().all(|f| now.contains(f)));
                        }))
                    });
                }))
            });
            m.shrink_to_fit();
            AFTER_PUBLISH.with(|h| h.borrow_mut().take());
            assert_eq!(
                *kept.lock().unwrap(),
                Some(true),
                "an index file was deleted while its index was current"
            );
            assert_eq!(m.len(), 100);
        }
        let m = crate::FileMap::<u64, u64>::open(&dir).expect("the map reopens");
        assert_eq!(m.len(), 100);
        assert!((0..100).all(|k| m.get(&k) == Some(k)));
        drop(m);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A shrink that did not fall back frees its fallback even when an
    /// insert attaches an ordinary grow to the new index the moment it is
    /// published (here: this thread, from the hook, before the publisher
    /// looks at it). Judged after publication, that grow read as a
    /// fallback, and an index as large as the old one leaked.
    #[test]
    fn an_unused_shrink_fallback_is_freed_when_a_grow_follows_at_once() {
        let live = || LIVE_HERE.with(|n| n.get());
        let before = live();
        {
            let m = Arc::new(Map::<u64, u64>::with_capacity(0));
            for k in 0..5_000 {
                m.insert(k, k).unwrap();
            }
            for k in 100..5_000 {
                m.remove(&k);
            }
            let m2 = m.clone();
            AFTER_PUBLISH.with(|h| *h.borrow_mut() = Some(Box::new(move || m2.reserve(2_000))));
            let shrinks = m.stats().shrinks;
            m.shrink_to_fit();
            assert!(AFTER_PUBLISH.with(|h| h.borrow().is_none()), "no shrink published");
            // (shrink_to_fit shrinks again after the grow.)
            let s = m.stats();
            assert!(s.shrinks > shrinks && s.shrinks_fell_back == 0, "{s:?}");
            assert_eq!(m.len(), 100);
            assert!((0..100).all(|k| m.get(&k) == Some(k)));
            assert_eq!(live(), before + 1, "one index in use");
        }
        assert_eq!(live(), before, "an index leaked");
    }
}
