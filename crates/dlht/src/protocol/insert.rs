//! Insert-if-absent (paper §3.2.2, CLHT's two-CAS algorithm), with a
//! publication step that keeps puts off unpublished slots.
//!
//! I1 read the header, settle transfers.
//! I2 scan: the key is live → return its value (validated); an insert of
//!    the same key is pending → wait for it, restart.
//! I3 pick the lowest Invalid slot; none → `Full`. If its bucket is not
//!    chained, chain link bucket(s) (no link left → `Full`) and restart.
//! I4 CAS1 the header: slot Invalid → TryInsert (fails → restart). The
//!    CAS doubles as validation of I2: the header, hence the set of live and
//!    pending keys of the bin, did not change since the scan.
//! I5 fill the slot with (pending, key): not a pair any put can expect.
//! I6 CAS2 the header: TryInsert → Valid. On failure (hazard 3): if the bin
//!    is transferring, abandon the slot (a transfer ignores TryInsert) and
//!    move on; else rescan — the key live or pending elsewhere → release our
//!    slot (TryInsert → Invalid) and report / wait; otherwise retry I6 against
//!    the new header (steps I3–I5 are not repeated).
//! I7 publish: CAS the slot from (pending, key) to (key, value) — the
//!    linearization point. It fails only if a transfer killed the pending
//!    slot, and then the insert retries in the next index.
//!
//! Uniqueness: after I6 the bin holds the key live, pending or shadowed in
//! exactly one slot, and every insert of the same key either saw it at I2
//! or fails its own I6 and finds it on rescan.
//!
//! A *shadow* insert (paper §3.2.2, [`Mode::Shadow`]) runs the same steps
//! with the shadow marker at I5 and Shadow instead of Valid at I6, and
//! stops there: the key is held but hidden (`protocol::shadow` commits or
//! aborts it). An insert that finds a key shadowed waits, as for a pending
//! insert; a shadow insert that finds one reports it instead.

use super::{link_needed, release_slot, scan, settle, validate, wait_pending, Scan, Step};
use crate::persist::cell;
use crate::persist::crash::{self, CrashPoint};
use crate::plant::{planted, Plant};
use crate::raw::header::SlotState;
use crate::raw::index::{BinRef, Claimant};
use crate::raw::threading::Threading;

/// Result of a finished insert.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Inserted {
    /// The key was absent and is now present with the given value (or, for
    /// a shadow insert, held hidden).
    New,
    /// The key was present with this value; nothing changed.
    Exists(u64),
    /// (shadow inserts only) Another shadow insert holds the key.
    Shadowed,
}

/// What an insert leaves in its slot.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Mode {
    /// A present key (after publication).
    Plain,
    /// A shadow insert: the key held in a Shadow slot, hidden.
    Shadow,
}

/// Insert `key → value` if `key` is absent.
#[inline(always)]
pub fn insert<T: Threading>(bin: &BinRef<'_, T>, key: u64, value: u64) -> Step<Inserted> {
    insert_as(bin, key, value, Mode::Plain)
}

/// Insert `key` if absent, as `mode` says (a shadow insert ignores `value`:
/// its commit supplies it).
#[inline(always)]
pub fn insert_as<T: Threading>(bin: &BinRef<'_, T>, key: u64, value: u64, mode: Mode) -> Step<Inserted> {
    let marker = match mode {
        Mode::Plain => bin.pending(),
        Mode::Shadow => bin.shadow(),
    };
    let done_state = match mode {
        Mode::Plain => SlotState::Valid,
        Mode::Shadow => SlotState::Shadow,
    };
    'restart: loop {
        let mut h = bin.header(); // I1
        if settle(bin, &mut h) {
            return Step::Moved;
        }
        match scan(bin, h, key) {
            // I2
            Scan::Found { value, .. } => {
                if validate(bin, h) {
                    return Step::Done(Inserted::Exists(value));
                }
                continue 'restart;
            }
            Scan::Shadowed if mode == Mode::Shadow => {
                if validate(bin, h) {
                    return Step::Done(Inserted::Shadowed);
                }
                continue 'restart;
            }
            Scan::Pending | Scan::Shadowed => {
                wait_pending();
                continue 'restart;
            }
            Scan::Absent => {}
        }
        let Some(slot_i) = h.first_invalid() else {
            // A bin whose emptied link is being given back holds the
            // link's slots for a moment (`protocol::links`, U1–U3): not
            // full, so wait for them rather than grow the index (which two
            // threads' churn once doubled to the whole of a cache's memory
            // limit). Other claimed slots finish as soon (inserts between
            // I4 and I6).
            // Planted bug (scripts/planted-bugs.sh): report the bin full.
            if bin.index.link_pool().is_some()
                && !h.slots_in(SlotState::TryInsert).is_empty()
                && !planted(Plant::FullWhileLinkHeld)
            {
                wait_pending();
                continue 'restart;
            }
            return Step::Full; // I3
        };
        if let Some(kind) = link_needed(bin, slot_i) {
            if !bin.index.chain(bin, kind, Claimant::Insert) {
                return Step::Full;
            }
            continue 'restart;
        }
        let claimed = h.with_slot(slot_i, SlotState::TryInsert);
        if bin.cas_header(h, claimed).is_err() {
            continue 'restart; // I4
        }
        crash::at(CrashPoint::InsertClaimed);
        let slot = bin.slot(&mut None, slot_i);
        if !T::SHARED && mode == Mode::Plain {
            // Single-thread mode: no put can race, so no pending step.
            slot.fill_owned(key, value);
            bin.cas_header(claimed, claimed.with_slot(slot_i, SlotState::Valid))
                .expect("dlht invariant: a local bin changed under its only thread");
            return Step::Done(Inserted::New);
        }
        slot.fill_owned(marker, key); // I5
        let mut cur = claimed;
        loop {
            match bin.cas_header(cur, cur.with_slot(slot_i, done_state)) {
                Ok(()) => break, // I6
                Err(found) => cur = found,
            }
            // Planted bug (scripts/planted-bugs.sh): retry CAS2 blindly,
            // without searching for the same key inserted meanwhile (hazard 3).
            if planted(Plant::InsertNoRescan) && cur.is_no_transfer() {
                continue;
            }
            if settle(bin, &mut cur) {
                // The transfer ignores our TryInsert slot; the key was never
                // visible here.
                return Step::Moved;
            }
            // NoTransfer (perhaps after a snapshot's freeze, which keeps
            // our claim): rescan, then retry CAS2 against `cur`.
            match scan(bin, cur, key) {
                Scan::Absent => {}
                // Lost to an insert of the same key (or waiting on one):
                // give our slot back; the restart reports or waits for it.
                Scan::Found { .. } | Scan::Pending | Scan::Shadowed => {
                    release_slot(bin, slot_i, SlotState::TryInsert);
                    continue 'restart;
                }
            }
        }
        crash::at(CrashPoint::InsertCommitted);
        if mode == Mode::Shadow {
            return Step::Done(Inserted::New); // held, hidden: the commit publishes
        }
        // A persistent map's thread counts the key now, while the pair
        // still tells recovery whether it was published (`persist::cell`).
        let counted = cell::note_count(bin.index, slot_i, key, 1);
        crash::at(CrashPoint::InsertCounted);
        return match bin.dwcas(slot, (marker, key), (key, value)) {
            Ok(()) => {
                crash::at(CrashPoint::InsertPublished);
                if counted {
                    cell::count_settled();
                }
                Step::Done(Inserted::New) // I7
            }
            Err(_) => {
                // Killed by a transfer: nothing was published here.
                if counted {
                    cell::count_undone(1);
                }
                let mut h = bin.header();
                settle(bin, &mut h);
                Step::Moved
            }
        };
    }
}
