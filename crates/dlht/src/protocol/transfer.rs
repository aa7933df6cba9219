//! Transfer of one bin into the next index (paper §3.2.5).
//!
//! T1 CAS the header NoTransfer → InTransfer. From here no other header CAS
//!    can succeed: every operation's CAS expects a NoTransfer header.
//! T2 for each Valid or Shadow slot: CAS the slot from (k, v) to (dead, v).
//!    A live key is then copied into the next index; a pending insert is
//!    killed (its publication CAS fails and it retries in the next index); a
//!    shadow insert is copied as it was, state and words (`protocol::shadow`);
//!    a dead slot is skipped. The CAS loses only to a racing put (retry with
//!    the value it wrote) or a racing publication (retry with the published
//!    pair), so once it succeeds no put can succeed here any more: the copy
//!    is final.
//! T3 store DoneTransfer: operations now go to the next index.

use super::link_needed;
use crate::raw::header::{BinState, SlotState};
use crate::raw::index::{Claimant, Index};
use crate::raw::threading::Threading;

/// Transfer bin `b` of `old` into `new`. Returns the number of keys copied.
/// The caller owns bin `b` for transfer (it claimed its chunk).
///
/// A panic in `hash` here (the user's hasher) would leave the bin
/// InTransfer for good: every later operation on it would wait forever, and
/// the resize could never be published. A half-transferred bin cannot be
/// finished without the hasher, so the process aborts with a message
/// instead (see [`AbortOnUnwind`]).
pub fn transfer_bin<T: Threading>(old: &Index, b: usize, new: &Index, hash: &dyn Fn(u64) -> u64) -> usize {
    let unwinding = AbortOnUnwind;
    let copied = transfer_bin_inner::<T>(old, b, new, hash);
    core::mem::forget(unwinding);
    copied
}

/// Aborts the process if dropped, which only happens when a panic unwinds
/// through a transfer (normal exits `forget` it).
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    #[cold]
    fn drop(&mut self) {
        eprintln!(
            "dlht: the hasher panicked while a bin was being transferred to a larger index; \
             the bin can be neither finished nor rolled back, so the process aborts"
        );
        std::process::abort();
    }
}

#[inline(always)]
fn transfer_bin_inner<T: Threading>(old: &Index, b: usize, new: &Index, hash: &dyn Fn(u64) -> u64) -> usize {
    let bin = old.bin_as::<T>(b);
    let mut h = bin.header();
    loop {
        debug_assert_eq!(h.bin_state(), BinState::NoTransfer, "dlht invariant: bin transferred twice");
        let claimed = h.with_bin_state(BinState::InTransfer);
        match bin.cas_header(h, claimed) {
            Ok(()) => {
                h = claimed; // T1
                break;
            }
            Err(found) => h = found,
        }
    }
    let (dead, pending, shadow) = (bin.dead(), bin.pending(), bin.shadow());
    let mut lm = None;
    let mut copied = 0;
    // Copy a killed slot's words `w`, which were in state `state`: a live
    // key, or a shadow insert (keyed by its value word); not a pending one.
    let mut copy = |w: (u64, u64), state: SlotState| {
        // Planted bug (scripts/planted-bugs.sh): drop a shadow insert caught
        // between its commit's header flip and its publication, as a plain
        // pending insert is dropped.
        if cfg!(dlht_plant = "shadow_dropped") && w.0 == shadow && state == SlotState::Valid {
            return;
        }
        if w.0 == shadow {
            place::<T>(new, hash(w.1), w, state);
            copied += 1;
        } else if w.0 != pending {
            place::<T>(new, hash(w.0), w, SlotState::Valid); // T2
            copied += 1;
        }
    };
    for i in h.slots_in(SlotState::Valid).or(h.slots_in(SlotState::Shadow)) {
        let slot = bin.slot(&mut lm, i);
        let mut cur = (slot.load_key(), slot.load_value());
        loop {
            if cur.0 == dead {
                break;
            }
            // Planted bug (scripts/planted-bugs.sh): copy without a transfer
            // key, so a racing put can still succeed in the old bin.
            #[cfg(dlht_plant = "transfer_keeps_key")]
            if cur.0 != pending && cur.0 != shadow {
                copy(cur, h.slot(i));
                break;
            }
            match bin.dwcas(slot, cur, (dead, cur.1)) {
                Ok(()) => {
                    copy(cur, h.slot(i));
                    break;
                }
                Err(found) => cur = found,
            }
        }
    }
    bin.bucket.header.store_owned(h.with_bin_state(BinState::DoneTransfer)); // T3
    copied
}

/// Put a transferred pair into its bin of `new`. The bin is reachable by no
/// other thread yet (its source bin is InTransfer, and distinct source bins
/// feed distinct target bins because the new mask extends the old one), so
/// plain owner stores suffice. It holds at most the 15 keys of one source
/// bin, and link buckets for transfers are reserved for the worst case.
fn place<T: Threading>(new: &Index, hash: u64, (key, value): (u64, u64), state: SlotState) {
    let bin = new.bin_as::<T>(new.bin_of(hash));
    let h = bin.header();
    let i = h.first_invalid().expect("dlht invariant: a transfer target bin overflowed");
    if let Some(kind) = link_needed(&bin, i) {
        let chained = new.chain(&bin, kind, Claimant::Transfer);
        assert!(chained, "dlht invariant: transfer link reserve exhausted");
    }
    bin.slot(&mut None, i).fill_owned(key, value);
    bin.bucket.header.store_owned(h.with_slot(i, state));
}
