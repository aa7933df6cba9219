//! Put (paper §3.2.4): update the value of a present key by a 16-byte CAS,
//! here generalized to a conditional update: the new value is decided from
//! the value found, and the update may decline.
//!
//! P1 read the header, settle transfers; P2 find the key (validated read);
//! P3 absent: done, nothing inserted; P4 ask `decide` for the new value —
//! none: done, the value found is the answer — and CAS the slot from
//! (key, old) to (key, new); P5 on failure, if the slot still holds the
//! key go back to P4 with the value found, otherwise restart at P1.
//!
//! Why P4 can only succeed on a live entry (hazards 1 and 2): the pair
//! (key, v) is in a slot's words only between the insert that published it
//! (a CAS from (pending, key)) and the remove or transfer that replaced the
//! key with the dead marker — exactly while the key is present. A put that
//! read an older incarnation and CASes into a newer one with equal contents
//! updates the key while it is present with the value it expected: a
//! correct put of the newer incarnation. Linearization: the successful CAS;
//! a declined update at the validated read (P2) or at the failed CAS whose
//! returned pair showed the key with the value declined (one atomic read).

use super::{locate, Located, Step};
use crate::persist::crash::{self, CrashPoint};
use crate::raw::index::BinRef;
use crate::raw::threading::Threading;

/// The result of a conditional change to a present key's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key is absent; nothing changed.
    Absent,
    /// The key is present with this value, which the caller declined to
    /// change.
    Kept(u64),
    /// The key was present with this value and is now changed.
    Changed(u64),
}

/// Replace the value of `key` with `value`; the old value, or None if absent.
#[inline]
pub fn put<T: Threading>(bin: &BinRef<'_, T>, key: u64, value: u64) -> Step<Option<u64>> {
    match update(bin, key, |_| Some(value)) {
        Step::Done(Change::Changed(old)) => Step::Done(Some(old)),
        Step::Done(_) => Step::Done(None),
        Step::Moved => Step::Moved,
        Step::Full => Step::Full,
    }
}

/// Replace the value `old` of a present `key` with `decide(old)`, unless
/// that is None. `decide` may run more than once (once per value seen).
#[inline(always)]
pub fn update<T: Threading>(
    bin: &BinRef<'_, T>,
    key: u64,
    mut decide: impl FnMut(u64) -> Option<u64>,
) -> Step<Change> {
    'restart: loop {
        let (slot_i, mut old) = match locate(bin, key) {
            Located::Moved => return Step::Moved,                 // P1
            Located::Absent => return Step::Done(Change::Absent), // P3
            Located::Found { slot, value, .. } => (slot, value),  // P2
        };
        let slot = bin.slot(&mut None, slot_i);
        loop {
            let Some(value) = decide(old) else {
                return Step::Done(Change::Kept(old)); // P4: declined
            };
            match bin.dwcas(slot, (key, old), (key, value)) {
                Ok(()) => {
                    crash::at(CrashPoint::PutSwapped);
                    return Step::Done(Change::Changed(old)); // P4
                }
                Err((k, v)) if k == key => old = v, // P5: a racing put won
                Err(_) => continue 'restart,        // removed or transferred
            }
        }
    }
}
