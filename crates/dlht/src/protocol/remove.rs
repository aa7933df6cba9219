//! Remove (paper §3.2.3): free the slot at once for reuse; here also
//! conditional, on the value found.
//!
//! D1 read the header, settle transfers; D2 find the key (validated read);
//! D3 absent: done; D4 if `take` declines the value found, done; else CAS
//! the slot from (key, v) to (dead, v) — the linearization point — going
//! back to the `take` test with the value found if a put raced;
//! D5 CAS the header's slot state Valid → Invalid (retried across unrelated
//! header changes; skipped if a transfer took the bin, since a transfer
//! never copies a dead slot).
//!
//! The paper's remove is only D5. Killing the key first (D4) is what stops a
//! put that read the slot earlier from CASing into a removed entry
//! (hazard 1): after D4 the slot no longer holds (key, v).

use super::put::Change;
use super::{locate, release_slot, Located, Step};
use crate::persist::cell;
use crate::persist::crash::{self, CrashPoint};
use crate::plant::{planted, Plant};
use crate::raw::header::SlotState;
use crate::raw::index::BinRef;
use crate::raw::threading::Threading;

/// Remove `key`; its value, or None if absent. `kill`: see [`remove_if`].
#[inline]
pub fn remove<T: Threading>(bin: &BinRef<'_, T>, key: u64, kill: bool) -> Step<Option<u64>> {
    match remove_if(bin, key, |_| true, kill) {
        Step::Done(Change::Changed(old)) => Step::Done(Some(old)),
        Step::Done(_) => Step::Done(None),
        Step::Moved => Step::Moved,
        Step::Full => Step::Full,
    }
}

/// Remove `key` if `take` accepts its value (it may run once per value
/// seen).
///
/// `kill` matters in single-thread mode only (a shared map always kills
/// the key): write the dead marker before freeing the slot (D4), because
/// a call of the same thread may be suspended in user code holding this
/// slot, or `take` is such code. Otherwise no put can race, and freeing
/// the slot in the header suffices (the paper's remove).
#[inline(always)]
pub fn remove_if<T: Threading>(
    bin: &BinRef<'_, T>,
    key: u64,
    mut take: impl FnMut(u64) -> bool,
    kill: bool,
) -> Step<Change> {
    'restart: loop {
        let found = locate(bin, key);
        let (slot_i, mut old) = match found {
            Located::Moved => return Step::Moved,                 // D1
            Located::Absent => return Step::Done(Change::Absent), // D3
            Located::Found { slot, value, .. } => (slot, value),  // D2
        };
        if !take(old) {
            return Step::Done(Change::Kept(old)); // D4: declined
        }
        // `take` may be user code that ran operations of this map.
        // Planted bug (scripts/planted-bugs.sh): leave their intents.
        if !planted(Plant::IntentLeftToUserCode) {
            cell::note_operation_again(bin.index, bin.bin);
        }
        // Planted bug (scripts/planted-bugs.sh): the paper's literal remove,
        // a header CAS only, which hazard 1 shows a put can race.
        if planted(Plant::RemoveHeaderOnly) {
            let Located::Found { h, .. } = found else { unreachable!() };
            if bin.cas_header(h, h.with_slot(slot_i, SlotState::Invalid)).is_ok() {
                return Step::Done(Change::Changed(old));
            }
            continue 'restart;
        }
        if !T::SHARED && !kill {
            release_slot(bin, slot_i, SlotState::Valid);
            return Step::Done(Change::Changed(old));
        }
        // In single-thread mode the CAS is a load-compare-store. There it
        // validates what user code may have changed (`take` may have
        // called back into the map and removed or moved the key), and the
        // dead marker stops a suspended put of the same thread from
        // succeeding on the freed slot (docs/DESIGN.md, "User code inside
        // the map").
        let slot = bin.slot(&mut None, slot_i);
        let dead = bin.dead();
        let counted = loop {
            // A persistent map's thread records the remove's count before
            // the kill and lands it after, while the dead pair still tells
            // recovery that it took effect (`persist::cell`).
            let recorded = cell::record_kill(bin.index, slot_i, old);
            // Planted bug (scripts/planted-bugs.sh): record after the kill
            // (a transfer of the bin, then a crash, between the two left
            // the kill uncounted).
            let late = recorded && planted(Plant::RemoveRecordedAfterKill);
            if late {
                cell::count_settled();
            }
            let killed = bin.dwcas(slot, (key, old), (dead, old));
            if killed.is_ok() {
                crash::at(CrashPoint::RemoveKilled);
                if late {
                    cell::record_kill(bin.index, slot_i, old);
                }
                break recorded; // D4
            }
            if recorded {
                cell::count_settled(); // not landed: withdrawn
            }
            match killed {
                Err((k, v)) if k == key => old = v,
                _ => continue 'restart,
            }
            if !take(old) {
                return Step::Done(Change::Kept(old));
            }
            cell::note_operation_again(bin.index, bin.bin);
        };
        if counted {
            cell::land_kill();
        }
        crash::at(CrashPoint::RemoveCounted);
        release_slot(bin, slot_i, SlotState::Valid);
        if counted {
            cell::count_settled();
        }
        return Step::Done(Change::Changed(old));
    }
}
