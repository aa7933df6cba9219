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
//!
//! The length: a write counts itself in its cell's share while its marker
//! pair stands (`persist::cell::note_count`), recording the slot, the
//! pair's second word and the share after the count (`layout::Counting`).
//! A pair recovery frees is then judged by that record: an insert's or a
//! shadow commit's count that landed is taken back (it never took effect);
//! a remove's kill whose count did not land is counted (it took effect).

use super::cell::CellScope;
use super::layout::{Counting, Intent, IntentKind, Moving, ShadowCell, ThreadCell};
use crate::plant::{planted, Plant};
use crate::protocol::transfer::{place_moving, resume_bin, resume_target};
use crate::raw::header::{SlotState, SLOTS_PER_BIN};
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
    /// Of the slots freed, killed keys (`(dead, v)`): removes that took
    /// effect before their threads died, and had not counted themselves in
    /// the length yet.
    pub removes_uncounted: usize,
    /// Of the slots freed, inserts (and shadow commits) that had counted
    /// themselves in the length but never took effect.
    pub inserts_taken_back: usize,
    /// Of those, judged in a retired index.
    pub judged_in_retired: usize,
}

/// The indexes recovery works in: the map's current one; the one a resize
/// of it was filling (larger for a grow; smaller for a shrink, whose
/// `fallback`, as large as `current`, took the sources of targets too full
/// to merge); and indexes resizes had retired while dead threads' counted
/// writes were in them (`a_count_names`), only read.
pub struct Indexes<'a> {
    /// The map's index.
    pub current: &'a Index,
    /// A resize's next index.
    pub next: Option<&'a Index>,
    /// A shrink's fallback.
    pub fallback: Option<&'a Index>,
    /// Retired indexes whose files were still there.
    pub retired: &'a [Index],
}

/// True if a dead thread of `cells` was counting a write in the index of
/// `generation` (its intent names it and its count record is set).
pub fn a_count_names(cells: &[ThreadCell], generation: u64) -> bool {
    // Relaxed: as in `run`.
    cells.iter().any(|c| {
        c.counting.load(Ordering::Relaxed) != 0
            && Intent::unpack(c.intent.load(Ordering::Relaxed))
                .is_some_and(|i| i.kind == IntentKind::Operation && i.is_of(generation))
    })
}

/// A dead thread's count that was about to land (or did) on a slot of its
/// intent's bin: see `layout::Counting`.
#[derive(Clone, Copy)]
struct Count {
    intent: Intent,
    record: Counting,
    word: u64,
    landed: bool,
}

impl Count {
    /// True if `other` is a count of the same kind for the same pair in the
    /// same slot (removes racing on one pair both record).
    fn same_pair(&self, other: &Count) -> bool {
        self.intent == other.intent
            && self.record.slot == other.record.slot
            && self.word == other.word
            && self.record.adds == other.record.adds
    }

    /// True if this count is for the pair `(_, word)` in slot `i` of bin
    /// `b` of `idx`, by an insert (`adds`) or a remove.
    fn is_for(&self, idx: &Index, b: usize, i: usize, word: u64, adds: bool) -> bool {
        self.intent.is_of(idx.generation)
            && self.intent.bin == b as u64
            && self.record.slot == i
            && self.word == word
            && self.record.adds == adds
    }
}

/// What a freed pair does to the length, by the counts of `counts`: -1 for
/// an insert's pending pair or a shadow commit's whose count landed, and for
/// a remove's kill whose count did not; else 0.
fn judge(counts: &[Count], idx: &Index, b: usize, i: usize, pair: (u64, u64), r: &mut Report) {
    let bin = idx.bin(b);
    let (k, w) = pair;
    if k == bin.dead() {
        if !counts.iter().any(|c| c.landed && c.is_for(idx, b, i, w, false)) {
            r.removes_uncounted += 1;
        }
    } else if (k == bin.pending() || k == bin.shadow())
        && counts.iter().any(|c| c.landed && c.is_for(idx, b, i, w, true))
    {
        r.inserts_taken_back += 1;
    }
}

/// Recover the bins the threads of `cells` were working on in `indexes`.
pub fn run(
    cells: &[ThreadCell],
    shadows: &[ShadowCell],
    indexes: Indexes<'_>,
    hash: &dyn Fn(u64) -> u64,
) -> Report {
    let Indexes { current, next, fallback, retired } = indexes;
    // Planted bug (scripts/planted-bugs.sh): judge no count in a retired
    // index (the thread's bin, transferred, then gone with its index).
    let retired = if planted(Plant::RecoverSkipsRetired) { &[] } else { retired };
    let mut r = Report::default();
    // Relaxed loads throughout: the dead process's stores are all in the
    // page cache, and no other thread runs.
    let intents =
        || cells.iter().filter_map(|c| Some((c, Intent::unpack(c.intent.load(Ordering::Relaxed))?)));
    // Planted bug (scripts/planted-bugs.sh): judge freed pairs without
    // the counts' records, as before writes counted inside the protocol.
    let counts: Vec<Count> = intents()
        .filter(|(_, i)| i.kind == IntentKind::Operation && !planted(Plant::RecoverIgnoresCounts))
        .filter_map(|(c, intent)| {
            let record = Counting::unpack(c.counting.load(Ordering::Relaxed))?;
            Some(Count {
                intent,
                record,
                word: c.counting_word.load(Ordering::Relaxed),
                landed: record.landed(c.len_share.load(Ordering::Relaxed)),
            })
        })
        .collect();
    // A count whose bin went into transfer, which recovery leaves as it is
    // (`clean`): an insert that counted itself whose pending pair a
    // transfer killed as dead (its publication failed, the count not yet
    // taken back) or will kill when recovery resumes it (`resume_bin`), or
    // a shadow commit's pair the transfer will copy for the shadow cell's
    // abort; a remove's kill not yet counted, which the transfer does not
    // copy. The bin's index may be one a resize finished meanwhile and
    // retired (every bin of it transferred). Removes racing on one pair
    // both record before their kills: its dead pair is counted once, and
    // not if a record of it landed.
    for (n, c) in counts.iter().enumerate() {
        let live = [Some(current), next, fallback].into_iter().flatten();
        let Some(idx) = live.chain(retired).find(|x| c.intent.is_of(x.generation)) else {
            continue;
        };
        let in_retired = retired.iter().any(|x| core::ptr::eq(x, idx));
        let b = c.intent.bin as usize;
        if b >= idx.bins() || idx.bin(b).header().is_no_transfer() || c.record.adds != c.landed {
            continue;
        }
        let bin = idx.bin(b);
        let slot = bin.slot(&mut None, c.record.slot);
        let (k, w) = (slot.load_key(), slot.load_value());
        if w != c.word {
            continue;
        }
        if c.record.adds && (k == bin.dead() || k == bin.pending() || k == bin.shadow()) {
            r.inserts_taken_back += 1;
            r.judged_in_retired += in_retired as usize;
        } else if !c.record.adds && k == bin.dead() {
            let counted_before = counts[..n].iter().any(|o| o.same_pair(c));
            if !counted_before && !counts.iter().any(|o| o.landed && o.same_pair(c)) {
                r.removes_uncounted += 1;
                r.judged_in_retired += in_retired as usize;
            }
        }
    }
    let moving = |cell: &ThreadCell| {
        let m = Moving::unpack(cell.moving_slot.load(Ordering::Relaxed))?;
        let pair = (cell.moving_key.load(Ordering::Relaxed), cell.moving_value.load(Ordering::Relaxed));
        Some((m.bin, m.slot.min(SLOTS_PER_BIN - 1), m.state, pair))
    };
    // Transfers first: an operation's bin may be one of them, and is then
    // cleaned where its keys went. Every moving record is placed before any
    // bin is finished (finishing skips moved slots, whose records may be in
    // another cell than the first that names the bin).
    if let Some(next) = next {
        let shrinking = next.bins() < current.bins();
        // A transfer's intent names a grow's source bin, or a shrink's target.
        let units = next.bins().min(current.bins());
        let transfers = || {
            intents().filter(|(_, i)| {
                i.kind == IntentKind::Transfer && i.is_of(current.generation) && (i.bin as usize) < units
            })
        };
        if shrinking {
            let fallback = fallback.expect("dlht invariant: a shrink reopened without its fallback");
            let mut targets: Vec<usize> = transfers().map(|(_, i)| i.bin as usize).collect();
            targets.sort_unstable();
            targets.dedup();
            for t in targets {
                let records: Vec<_> =
                    transfers().filter(|(_, i)| i.bin as usize == t).filter_map(|(c, _)| moving(c)).collect();
                let cell = transfers().find(|(_, i)| i.bin as usize == t).map(|(c, _)| c).expect("named");
                let _scope = CellScope::enter(cell);
                r.bins_visited += 1;
                // Planted bug (scripts/planted-bugs.sh): see below.
                let records = if planted(Plant::RecoverNoMoving) { Vec::new() } else { records };
                resume_target::<Shared>(current, t, next, fallback, hash, &records);
                r.transfers_finished += 1;
            }
        } else {
            // Planted bug (scripts/planted-bugs.sh): forget the pairs whose
            // kill landed before the dead thread placed them.
            for (cell, _) in transfers().filter(|_| !planted(Plant::RecoverNoMoving)) {
                if let Some((b, i, state, pair)) = moving(cell) {
                    place_moving::<Shared>(current, b, next, hash, (i, state, pair));
                }
            }
            for (cell, i) in transfers() {
                // A crash during recovery is recovered the same way: the
                // slot being moved is recorded in the dead thread's cell.
                let _scope = CellScope::enter(cell);
                r.bins_visited += 1;
                resume_bin::<Shared>(current, i.bin as usize, next, hash);
                r.transfers_finished += 1;
            }
        }
    }
    // Shadow inserts held when the process died: their transactions died
    // with it, so they are aborted, wherever resizes moved them (their bin
    // in each index, from the key's hash). A commit that had published
    // left a live key, which cleaning keeps.
    for c in shadows {
        let w = c.hash.load(Ordering::Relaxed);
        // Planted bug (scripts/planted-bugs.sh): forget the shadow inserts
        // held when the process died.
        if w == 0 || planted(Plant::RecoverNoShadows) {
            continue;
        }
        let hash = ShadowCell::untag(w);
        for idx in [Some(current), next, fallback].into_iter().flatten() {
            r.bins_visited += 1;
            clean(idx, idx.bin_of(hash), &counts, &mut r);
        }
    }
    for (_, i) in intents() {
        if i.kind != IntentKind::Operation {
            continue;
        }
        let idx = [Some(current), next, fallback].into_iter().flatten().find(|x| i.is_of(x.generation));
        let Some(idx) = idx else { continue };
        let b = i.bin as usize;
        if b >= idx.bins() {
            continue;
        }
        r.bins_visited += 1;
        // Planted bug (scripts/planted-bugs.sh): leave what dead operations
        // left in their bins.
        if planted(Plant::RecoverNoClean) {
            continue;
        }
        clean(idx, b, &counts, &mut r);
        // Its contents moved on: clean where they went.
        if !idx.bin(b).header().is_no_transfer() {
            for to in [next, fallback].into_iter().flatten().filter(|n| n.generation > idx.generation) {
                if to.bins() >= idx.bins() {
                    for j in 0..to.bins() / idx.bins() {
                        clean(to, b + j * idx.bins(), &counts, &mut r);
                    }
                } else {
                    clean(to, b & (to.bins() - 1), &counts, &mut r);
                }
            }
        }
    }
    r
}

/// Free the slots of bin `b` that only a thread in flight could have left
/// as they are (see the module's table), counted in `r` (the length's
/// share by `counts`). Bins in transfer are left alone (their garbage is
/// never copied).
fn clean(idx: &Index, b: usize, counts: &[Count], r: &mut Report) {
    let bin = idx.bin(b);
    let h = bin.header();
    if !h.is_no_transfer() {
        return;
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
                let slot = bin.slot(&mut lm, i);
                let k = slot.load_key();
                let garbage = k == dead || k == pending || k == shadow || k == moved;
                if garbage {
                    judge(counts, idx, b, i, (k, slot.load_value()), r);
                }
                garbage
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
    r.slots_freed += freed;
}
