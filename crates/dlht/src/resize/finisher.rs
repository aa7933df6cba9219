//! The background finisher of a grow a persistent map's open resumed
//! (`dlht-finish`): here, above `persist`, since it runs the resize's
//! transfers (the map file only records what it did).

use crate::persist::layout::THREAD_CELLS;
use crate::persist::{Finisher, IndexPtr, MapFile};
use crate::raw::index::Index;
use crate::sync::unmodelled::AtomicBool;
use crate::sync::Ordering;
use std::sync::Arc;

impl MapFile {
    /// Finish the grow of `idx` into `next` that the open resumed, on a
    /// thread of its own (`dlht-finish`), so that it ends without
    /// waiting for writes (which help with a chunk each, as before);
    /// `hash` is the map's, `chunk_bins` its chunk size. When its last
    /// chunk is done, the map file names `next` and `idx`'s file is
    /// deleted at once; the index in memory is switched by the next
    /// thread that helps a resize (any insert or remove, `reserve`,
    /// `stats`, a snapshot): until then gets on `idx` find each bin
    /// forwarded. [`close_clean`](Self::close_clean) stops and joins the
    /// thread first.
    ///
    /// `idx` and `next` must be the map's current index and the grow's,
    /// owned by the map until it drops (after `close_clean`): the
    /// finisher is not pinned, and relies on holding a chunk of the grow
    /// uncounted until its end, so that no thread can publish `next`
    /// and retire `idx` while it uses them
    /// (`resize::finish_in_background`).
    pub fn finish_resumed_grow(
        self: &Arc<Self>,
        idx: &Index,
        next: &Index,
        hash: impl Fn(u64) -> u64 + Clone + Send + 'static,
        chunk_bins: usize,
    ) {
        // Its own cell, for its transfers' records (a crash while it
        // works is recovered as any thread's).
        // Relaxed: distinct numbers, as in `new_cell`.
        let n = self.next_cell.fetch_add(1, Ordering::Relaxed);
        if n >= THREAD_CELLS {
            return; // every cell taken: writes finish the grow (and walk it)
        }
        // Claimed here, before the map is shared: from now on no thread
        // can publish the grow before the finisher is done with both
        // indexes.
        let Some(anchor) = super::claim_anchor(idx, next, chunk_bins) else { return };
        // The walk for damaged transfer states is the finisher's first
        // step, off the open (helpers keep out until it is done:
        // `Index::states_unchecked`). Claimed here, before the map is
        // shared, so that no write pays for it.
        let walk = idx.claim_state_walk();
        let stop = Arc::new(AtomicBool::new(false));
        let (old, new) = (IndexPtr(idx), IndexPtr(next));
        // Relaxed: read by `finishing`, a status; the finisher's end
        // stores it with Release.
        self.finishing.store(true, Ordering::Relaxed);
        let (file, halt, h) = (self.clone(), stop.clone(), hash.clone());
        let spawned = std::thread::Builder::new().name("dlht-finish".into()).spawn(move || {
            // Whole: the wrappers are Send.
            let (old, new) = (old, new);
            // SAFETY: see above: both stay allocated until this thread
            // counts its anchor (and, on `Last`, until it hands the
            // publication over, its last step) or is joined by
            // `close_clean`, before the map frees them.
            let (idx, next) = unsafe { (&*old.0, &*new.0) };
            file.finish(idx, next, &h, chunk_bins, anchor, n, walk, &halt);
        });
        match spawned {
            Ok(thread) => {
                *self.finisher.lock().unwrap_or_else(|e| e.into_inner()) = Some(Finisher { stop, thread })
            }
            // No thread: the anchor is claimed, so the grow is
            // finished here, now.
            Err(_) => self.finish(idx, next, &hash, chunk_bins, anchor, n, walk, &stop),
        }
    }

    /// The finisher's work (see `finish_resumed_grow`), with cell `n`;
    /// `walk`: it claimed the walk of `idx`'s transfer states.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        idx: &Index,
        next: &Index,
        hash: &dyn Fn(u64) -> u64,
        chunk_bins: usize,
        anchor: usize,
        n: usize,
        walk: bool,
        stop: &AtomicBool,
    ) {
        if walk {
            idx.walk_claimed_states(false);
        } else {
            idx.repair_transfer_states(false); // (done: returns at once)
        }
        let cell = &self.cells()[n];
        let scope = crate::persist::cell::CellScope::enter(cell);
        // Relaxed: a stop request, polled between bins.
        let end = super::finish_in_background(idx, next, hash, chunk_bins, anchor, &|| {
            stop.load(Ordering::Relaxed)
        });
        drop(scope);
        // Relaxed: its transfers are all whole (a crash from here finds
        // nothing of its in flight).
        cell.intent.store(0, Ordering::Relaxed);
        cell.moving_slot.store(0, Ordering::Relaxed);
        match end {
            super::Finished::Last { copied } => {
                // Every bin is transferred: the files say so now (as
                // `Core::publish` does, in its order: a crash between
                // finds `next` current with every key).
                self.set_generation(next.generation);
                if let Some(f) = idx.file() {
                    f.remove_now();
                }
                // Relaxed: published by the Release below.
                self.background_copied.fetch_add(copied, Ordering::Relaxed);
                // Release: the taker (`take_publication`, AcqRel) sees
                // every transfer (this thread's last chunk count saw
                // the others') and the stores above. Neither index is
                // touched after this.
                self.publication.store(idx.generation, Ordering::Release);
            }
            super::Finished::Elsewhere { copied } => {
                // Relaxed: a statistic.
                self.background_copied.fetch_add(copied, Ordering::Relaxed);
            }
            super::Finished::Stopped => {}
        }
        // Release: pairs with `finishing`'s Acquire (a status that then
        // finds the files as the finisher left them).
        self.finishing.store(false, Ordering::Release);
    }
}
