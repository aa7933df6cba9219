//! Remove (paper §3.2.3): free the slot at once for reuse.
//!
//! D1 read the header, settle transfers; D2 find the key (validated read);
//! D3 absent: done; D4 CAS the slot from (key, v) to (dead, v) — the
//! linearization point — retrying with the value found if a put raced;
//! D5 CAS the header's slot state Valid → Invalid (retried across unrelated
//! header changes; skipped if a transfer took the bin, since a transfer
//! never copies a dead slot).
//!
//! The paper's remove is only D5. Killing the key first (D4) is what stops a
//! put that read the slot earlier from CASing into a removed entry
//! (hazard 1): after D4 the slot no longer holds (key, v).

use super::{find, settle, validate, Step};
use crate::raw::header::SlotState;
use crate::raw::index::BinRef;
use crate::raw::threading::Threading;

/// Remove `key`; its value, or None if absent.
#[inline]
pub fn remove<T: Threading>(bin: &BinRef<'_, T>, key: u64) -> Step<Option<u64>> {
    'restart: loop {
        let mut h = bin.header(); // D1
        if settle(bin, &mut h) {
            return Step::Moved;
        }
        let (slot_i, mut old) = match find(bin, h, key) {
            Some(found) => found,
            None => {
                if validate(bin, h) {
                    return Step::Done(None); // D3
                }
                continue 'restart;
            }
        };
        if !validate(bin, h) {
            continue 'restart; // D2
        }
        // Planted bug (scripts/planted-bugs.sh): the paper's literal remove,
        // a header CAS only, which hazard 1 shows a put can race.
        #[cfg(dlht_plant = "remove_header_only")]
        {
            if bin.cas_header(h, h.with_slot(slot_i, SlotState::Invalid)).is_ok() {
                return Step::Done(Some(old));
            }
            continue 'restart;
        }
        if !T::SHARED {
            // Single-thread mode: no put can race, so freeing the slot in
            // the header suffices (the paper's remove).
            release_slot(bin, slot_i, SlotState::Valid);
            return Step::Done(Some(old));
        }
        let slot = bin.slot(&mut None, slot_i);
        let dead = bin.dead();
        loop {
            match bin.dwcas(slot, (key, old), (dead, old)) {
                Ok(()) => break, // D4
                Err((k, v)) if k == key => old = v,
                Err(_) => continue 'restart,
            }
        }
        release_slot(bin, slot_i, SlotState::Valid);
        return Step::Done(Some(old));
    }
}

/// D5 (and insert's release): move slot `i` from `from` to Invalid. Only the
/// caller can change this slot's state now, so this retries only across
/// other slots' changes; it gives up if a transfer took the bin.
pub(crate) fn release_slot<T: Threading>(bin: &BinRef<'_, T>, i: usize, from: SlotState) {
    let mut h = bin.header();
    loop {
        if !h.is_no_transfer() {
            return;
        }
        debug_assert_eq!(h.slot(i), from, "dlht invariant: releasing a slot we do not own");
        match bin.cas_header(h, h.with_slot(i, SlotState::Invalid)) {
            Ok(()) => return,
            Err(found) => h = found,
        }
    }
}
