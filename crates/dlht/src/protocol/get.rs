//! Get (paper §3.2.1): lock-free, read-only, usually one cache line.
//!
//! G1 read the header; G2 if the bin is transferring, wait / move on;
//! G3 scan the Valid slots (key word, then value word of a match);
//! G4 re-read the header: unchanged means the pair read belongs to one
//! live incarnation of the slot (hazard 8), otherwise retry.
//!
//! Linearization: a hit at the key-word read (the key word of a live slot
//! can only change to the dead marker, and a value word only to another value
//! of the same key, without a header change); a miss at the last slot read.

use super::{find, match_primary, settle, validate, Step};
use crate::plant::{planted, Plant};
use crate::raw::header::{SlotState, SLOTS_PER_BIN};
use crate::raw::index::BinRef;
use crate::raw::link_meta::SINGLE_FIRST;
use crate::raw::threading::Threading;

/// Look `key` up in `bin`.
#[inline]
pub fn get<T: Threading>(bin: &BinRef<'_, T>, key: u64) -> Step<Option<u64>> {
    loop {
        let mut h = bin.header(); // G1
        if settle(bin, &mut h) {
            return Step::Moved; // G2
        }
        let found = find(bin, h, key).map(|(_, value)| value); // G3
                                                               // Planted bug (scripts/planted-bugs.sh): skip the seqlock re-check.
        if planted(Plant::GetNoValidate) || validate(bin, h) {
            return Step::Done(found); // G4
        }
    }
}

/// A get decided from the primary bucket alone, for the batch pipeline:
/// `Some(result)` when the header shows no transfer and the key either
/// matched a Valid primary slot or cannot be anywhere else (no Valid link
/// slot), and the header validated; `None` sends the request down the full
/// path ([`get`] through the map's runner). The same steps as [`get`]
/// (G1, G3, G4) without its loops, so the common case is one header test,
/// three key compares and one re-read.
#[inline(always)]
pub fn probe_primary<T: Threading>(bin: &BinRef<'_, T>, key: u64) -> Option<Option<u64>> {
    let h = bin.header(); // G1
    if !h.is_no_transfer() {
        return None;
    }
    let valid = h.slots_in(SlotState::Valid);
    let found = match match_primary(bin, valid, key) {
        Some(i) => Some(bin.bucket.slots[i].load_value()), // G3
        None if valid.range(SINGLE_FIRST, SLOTS_PER_BIN).is_empty() => None,
        None => return None, // the key may be in a link bucket
    };
    // Planted bug (scripts/planted-bugs.sh): as in `get`.
    (planted(Plant::GetNoValidate) || validate(bin, h)).then_some(found) // G4
}
