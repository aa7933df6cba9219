//! Freezing a bin for a strongly consistent snapshot (paper §3.4.4).
//!
//! F1 CAS the header NoTransfer → InTransfer, as a transfer's T1: from here
//!    no header CAS succeeds and every operation that reads the header waits
//!    (`settle`). F2 for each Valid slot: wait until a pending insert (or a
//!    commit under way) has published — it needs nothing from us — then CAS
//!    the slot from `(k, v)` to `(moved, k)`, retrying with what a racing put
//!    or remove left; a put or remove that read the slot earlier now fails
//!    its CAS and restarts into the wait. The pairs killed are the bin's
//!    contents, recorded.
//!
//! Thaw: T1 write each killed pair back (only the freezer writes a killed
//! slot: every other writer's CAS expects a live key), T2 store the header
//! back as NoTransfer with a new version (so a reader that read the bin
//! before the freeze fails its validation).
//!
//! The header's slot states are left as they were: an insert that had
//! claimed a slot keeps it (its CAS2 retries after the thaw), a remove that
//! had killed its key frees the slot after the thaw (`release_slot` waits).

use crate::plant::{planted, Plant};
use crate::raw::header::{BinState, SlotState};
use crate::raw::index::BinRef;
use crate::raw::threading::Threading;
use crate::sync::backoff;

/// A pair a freeze killed: its bin, its slot, its key and value words.
pub type Killed = (u32, u8, u64, u64);

/// Freeze `bin`; append its live pairs as `(bin, slot, key, value)` to
/// `out`. No resize may run on the bin's index (the caller holds it, see
/// `resize::hold_for_snapshot`).
pub fn freeze<T: Threading>(bin: &BinRef<'_, T>, out: &mut Vec<Killed>) {
    freeze_noting(bin, out, &mut |_| {})
}

/// [`freeze`], calling `note` with each pair before the CAS that kills it
/// (again, with the pair found, before each retry of the same slot): a
/// persistent map logs it, so that recovery can thaw a bin whose snapshot
/// died with the process. A slot is killed as `(moved, key)`, which only a
/// freeze or a transfer writes, so recovery tells it from a remove's kill.
pub fn freeze_noting<T: Threading>(bin: &BinRef<'_, T>, out: &mut Vec<Killed>, note: &mut dyn FnMut(Killed)) {
    let mut h = bin.header();
    let frozen = loop {
        // (A persistent index's damaged transfer states were repaired when
        // the snapshot took it: see `Index::repair_transfer_states`.)
        assert!(
            h.is_no_transfer() || bin.index.is_persistent(),
            "dlht invariant: a held index is not resizing"
        );
        let f = h.with_bin_state(BinState::InTransfer);
        match bin.cas_header(h, f) {
            Ok(()) => break f, // F1
            Err(found) => h = found,
        }
    };
    let (dead, pending, shadow, moved) = (bin.dead(), bin.pending(), bin.shadow(), bin.moved());
    let mut lm = None;
    for i in frozen.slots_in(SlotState::Valid) {
        let slot = bin.slot(&mut lm, i);
        let mut spins = 0;
        let mut cur = (slot.load_key(), slot.load_value());
        loop {
            if cur.0 == dead {
                break; // removed before the freeze
            }
            if cur.0 == pending || cur.0 == shadow {
                backoff(&mut spins); // publishing: a few instructions away
                cur = (slot.load_key(), slot.load_value());
                continue;
            }
            // Planted bug (scripts/planted-bugs.sh): record without killing,
            // so a put that read the slot before the freeze still lands.
            if planted(Plant::FreezeNoKill) {
                out.push((bin.bin as u32, i as u8, cur.0, cur.1));
                break;
            }
            note((bin.bin as u32, i as u8, cur.0, cur.1));
            // Planted bug (scripts/planted-bugs.sh): kill as a remove does,
            // so a persistent map's recovery cannot tell the freeze's kill.
            let killed = if planted(Plant::FreezeKillsDead) { (dead, cur.1) } else { (moved, cur.0) };
            match bin.dwcas(slot, cur, killed) {
                Ok(()) => {
                    out.push((bin.bin as u32, i as u8, cur.0, cur.1)); // F2
                    break;
                }
                Err(found) => cur = found,
            }
        }
    }
}

/// Thaw a frozen bin, writing back its killed pairs.
pub fn thaw<T: Threading>(bin: &BinRef<'_, T>, killed: &[Killed]) {
    let frozen = bin.header(); // no one else changes a frozen header
    debug_assert_eq!(frozen.bin_state(), BinState::InTransfer, "dlht invariant: thawing a bin not frozen");
    let mut lm = None;
    for &(b, i, k, v) in killed {
        debug_assert_eq!(b as usize, bin.bin);
        bin.slot(&mut lm, i as usize).fill_owned(k, v);
    }
    bin.bucket.header.store_owned(frozen.with_bin_state(BinState::NoTransfer));
}
