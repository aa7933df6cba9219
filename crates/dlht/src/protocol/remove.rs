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
use crate::raw::header::SlotState;
use crate::raw::index::BinRef;
use crate::raw::threading::Threading;

/// Remove `key`; its value, or None if absent.
#[inline]
pub fn remove<T: Threading>(bin: &BinRef<'_, T>, key: u64) -> Step<Option<u64>> {
    match remove_if(bin, key, |_| true) {
        Step::Done(Change::Changed(old)) => Step::Done(Some(old)),
        Step::Done(_) => Step::Done(None),
        Step::Moved => Step::Moved,
        Step::Full => Step::Full,
    }
}

/// Remove `key` if `take` accepts its value (it may run once per value
/// seen).
#[inline(always)]
pub fn remove_if<T: Threading>(
    bin: &BinRef<'_, T>,
    key: u64,
    mut take: impl FnMut(u64) -> bool,
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
        // Planted bug (scripts/planted-bugs.sh): the paper's literal remove,
        // a header CAS only, which hazard 1 shows a put can race.
        #[cfg(dlht_plant = "remove_header_only")]
        {
            let Located::Found { h, .. } = found else { unreachable!() };
            if bin.cas_header(h, h.with_slot(slot_i, SlotState::Invalid)).is_ok() {
                return Step::Done(Change::Changed(old));
            }
            continue 'restart;
        }
        // Single-thread mode too kills the key before freeing the slot
        // (its CAS is a load-compare-store): `take` is user code, which may
        // have called back into the map and removed or moved the key, and a
        // freed slot that still held (key, v) would let a suspended put of
        // the same thread succeed on a removed key (docs/DESIGN.md, "User
        // code inside the map").
        let slot = bin.slot(&mut None, slot_i);
        let dead = bin.dead();
        loop {
            match bin.dwcas(slot, (key, old), (dead, old)) {
                Ok(()) => break, // D4
                Err((k, v)) if k == key => old = v,
                Err(_) => continue 'restart,
            }
            if !take(old) {
                return Step::Done(Change::Kept(old));
            }
        }
        release_slot(bin, slot_i, SlotState::Valid);
        return Step::Done(Change::Changed(old));
    }
}
