//! Recovery after a crash: finish or undo, bin by bin, what the dead
//! process's threads were doing, as their cells say (`layout::ThreadCell`).
//! Runs in `open`, alone in the map, before any operation.
//!
//! | left in a bin by a thread that died                  | recovery            |
//! |------------------------------------------------------|---------------------|
//! | slot TryInsert (insert between its two header CASes) | freed               |
//! | Valid `(pending, k)` (insert committed, unpublished) | freed: not inserted |
//! | Valid `(dead, v)` (remove between kill and free)     | freed: removed      |
//! | Shadow, or Valid `(shadow, k)` (shadow insert or its commit) | freed: aborted |
//! | bin InTransfer (a transfer's T1..T3)                 | transfer finished   |
//! | `(moved, k)` whose pair is not in the next index     | pair placed there   |
//!
//! A put, and a per-key atomic's update, is one 16-byte CAS: it happened or
//! not, and leaves nothing to do. A link bucket claimed but not chained is
//! lost to the index (as a lost chaining race's is).

use super::cell::CellScope;
use super::layout::{Intent, IntentKind, Moving, ThreadCell};
use crate::protocol::transfer::{place_moving, resume_bin};
use crate::raw::header::{BinState, SlotState, SLOTS_PER_BIN};
use crate::raw::index::Index;
use crate::raw::threading::Shared;
use crate::sync::Ordering;

/// What recovery did.
#[derive(Default)]
pub struct Report {
    /// Bins visited.
    pub bins_visited: usize,
    /// Slots freed.
    pub slots_freed: usize,
    /// Transfers finished.
    pub transfers_finished: usize,
}

/// Recover the bins the threads of `cells` were working on in `current`
/// and in `next`, the index a grow of it was filling.
pub fn run(cells: &[ThreadCell], current: &Index, next: Option<&Index>, hash: &dyn Fn(u64) -> u64) -> Report {
    let mut r = Report::default();
    // Relaxed loads throughout: the dead process's stores are all in the
    // page cache, and no other thread runs.
    let intents =
        || cells.iter().filter_map(|c| Some((c, Intent::unpack(c.intent.load(Ordering::Relaxed))?)));
    // Transfers first: an operation's bin may be one of them, and is then
    // cleaned where its keys went. Every moving record is placed before any
    // bin is finished (finishing skips moved slots, whose records may be in
    // another cell than the first that names the bin).
    let transfers = || {
        intents().filter(|(_, i)| {
            i.kind == IntentKind::Transfer && i.is_of(current.generation) && (i.bin as usize) < current.bins()
        })
    };
    if let Some(next) = next {
        // Planted bug (scripts/planted-bugs.sh): forget the pairs whose
        // kill landed before the dead thread placed them.
        #[cfg(not(dlht_plant = "recover_no_moving"))]
        for (cell, i) in transfers() {
            let Some(m) = Moving::unpack(cell.moving_slot.load(Ordering::Relaxed)) else { continue };
            let pair = (cell.moving_key.load(Ordering::Relaxed), cell.moving_value.load(Ordering::Relaxed));
            place_moving::<Shared>(
                current,
                i.bin as usize,
                next,
                hash,
                (m.slot.min(SLOTS_PER_BIN - 1), m.state, pair),
            );
        }
        for (cell, i) in transfers() {
            // A crash during recovery is recovered the same way: the slot
            // being moved is recorded in the dead thread's cell, as it was.
            let _scope = CellScope::enter(cell);
            r.bins_visited += 1;
            if resume_bin::<Shared>(current, i.bin as usize, next, hash) > 0
                || current.bin(i.bin as usize).header().bin_state() == BinState::DoneTransfer
            {
                r.transfers_finished += 1;
            }
        }
    }
    for (_, i) in intents() {
        if i.kind != IntentKind::Operation {
            continue;
        }
        let idx = if i.is_of(current.generation) {
            current
        } else if let Some(n) = next.filter(|n| i.is_of(n.generation)) {
            n
        } else {
            continue;
        };
        if i.bin as usize >= idx.bins() {
            continue;
        }
        r.bins_visited += 1;
        // Planted bug (scripts/planted-bugs.sh): leave what dead operations
        // left in their bins.
        if cfg!(dlht_plant = "recover_no_clean") {
            continue;
        }
        r.slots_freed += clean(idx, i.bin as usize);
        // Its contents moved on: clean where they went.
        if !idx.bin(i.bin as usize).header().is_no_transfer() {
            if let Some(n) = next.filter(|n| n.generation == idx.generation + 1 && n.bins() > idx.bins()) {
                for j in 0..n.bins() / idx.bins() {
                    r.slots_freed += clean(n, i.bin as usize + j * idx.bins());
                }
            }
        }
    }
    r
}

/// Free the slots of bin `b` that only a thread in flight could have left
/// as they are (see the module's table); the number freed. Bins in
/// transfer are left alone (their garbage is never copied).
fn clean(idx: &Index, b: usize) -> usize {
    let bin = idx.bin(b);
    let h = bin.header();
    if !h.is_no_transfer() {
        return 0;
    }
    let (dead, pending, shadow, moved) = (bin.dead(), bin.pending(), bin.shadow(), bin.moved());
    let mut lm = None;
    let mut fixed = h;
    let mut freed = 0;
    for i in 0..SLOTS_PER_BIN {
        let free = match h.slot(i) {
            SlotState::Invalid => false,
            SlotState::TryInsert | SlotState::Shadow => true,
            SlotState::Valid => {
                let k = bin.slot(&mut lm, i).load_key();
                k == dead || k == pending || k == shadow || k == moved
            }
        };
        if free {
            fixed = fixed.with_slot(i, SlotState::Invalid);
            freed += 1;
        }
    }
    if freed > 0 {
        bin.bucket.header.store_owned(fixed);
    }
    freed
}
