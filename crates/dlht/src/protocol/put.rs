//! Put (paper §3.2.4): update the value of a present key by a 16-byte CAS.
//!
//! P1 read the header, settle transfers; P2 find the key (validated read);
//! P3 absent: done, nothing inserted; P4 CAS the slot from (key, old) to
//! (key, new); P5 on failure, if the slot still holds the key retry P4 with
//! the value found, otherwise restart at P1.
//!
//! Why P4 can only succeed on a live entry (hazards 1 and 2): the pair
//! (key, v) is in a slot's words only between the insert that published it
//! (a CAS from (pending, key)) and the remove or transfer that replaced the
//! key with the dead marker — exactly while the key is present. A put that
//! read an older incarnation and CASes into a newer one with equal contents
//! updates the key while it is present with the value it expected: a
//! correct put of the newer incarnation. Linearization: the successful CAS.

use super::{locate, Located, Step};
use crate::raw::index::BinRef;
use crate::raw::threading::Threading;

/// Replace the value of `key` with `value`; the old value, or None if absent.
#[inline]
pub fn put<T: Threading>(bin: &BinRef<'_, T>, key: u64, value: u64) -> Step<Option<u64>> {
    'restart: loop {
        let (slot_i, mut old) = match locate(bin, key) {
            Located::Moved => return Step::Moved,                // P1
            Located::Absent => return Step::Done(None),          // P3
            Located::Found { slot, value, .. } => (slot, value), // P2
        };
        let slot = bin.slot(&mut None, slot_i);
        loop {
            match bin.dwcas(slot, (key, old), (key, value)) {
                Ok(()) => return Step::Done(Some(old)), // P4
                Err((k, v)) if k == key => old = v,     // P5: a racing put won
                Err(_) => continue 'restart,            // removed or transferred
            }
        }
    }
}
