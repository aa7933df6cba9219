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

use super::{find, settle, validate, Step};
use crate::raw::index::BinRef;
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
        if cfg!(dlht_plant = "get_no_validate") || validate(bin, h) {
            return Step::Done(found); // G4
        }
    }
}
