//! Commit and abort of a shadow insert (paper §3.2.2, "Transactions").
//!
//! A shadow insert (`insert::insert_as` with `Mode::Shadow`) leaves its key
//! in a slot whose header state is Shadow and whose words are
//! `(shadow, key)`: get, put and remove scan Valid slots only, so they see
//! the key absent; inserts see it held (see `insert`). Only its owner — the
//! thread holding the shadow — changes that slot's state, and a transfer
//! copies it into the next index as it is (Shadow, `(shadow, key)`).
//!
//! Commit: S1 find the slot (Shadow, or Valid with `(shadow, key)` if an
//! earlier attempt got that far); S2 CAS the header Shadow → Valid — the
//! slot is now exactly a committed insert whose value is not yet
//! published; S3 publish: CAS the slot from `(shadow, key)` to
//! `(key, value)`, the linearization point. A transfer between S2 and S3
//! kills the slot and copies `(shadow, key)` into the next index as Valid
//! (unlike a plain pending insert, which it drops: a commit cannot fail),
//! and the commit publishes it there.
//!
//! Why S2 comes before S3 (not publish-then-flip): a put that read an
//! earlier incarnation `(key, value)` of this slot could otherwise CAS into
//! the hidden slot while the key is absent (hazard 2's equal-contents
//! reuse); after S2 the key is, as far as every operation can tell, being
//! inserted, so a put that lands after S3 updates a present key.
//!
//! Abort: find the Shadow slot (never a Valid one: see `find_shadow`) and
//! CAS the header Shadow → Invalid.

use super::{settle, validate, Step};
use crate::plant::{planted, Plant};
use crate::raw::header::{Header, SlotState};
use crate::raw::index::BinRef;
use crate::raw::threading::Threading;

/// Which slots may hold the shadow insert a commit or an abort looks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seek {
    /// A commit: the Shadow slot, or the Valid one its S2 made.
    Commit,
    /// An abort: the Shadow slot only (an abort never follows an S2).
    Abort,
}

/// The slot of the shadow insert of `key` under header `h`, and its state.
///
/// The two words are read one at a time, so a match can be torn: the
/// shadow marker of another key's commit caught before its S3 and, after
/// it, a value word equal to `key`. Each caller's next step rejects a torn
/// match: a Shadow slot's words cannot change while the header still reads
/// `h` (only its owner's header CAS frees it), so S2's and the abort's CAS
/// from `h` succeed only on a true match; S3 compares both words at once.
/// That is why an abort must not look at Valid slots: its header CAS
/// would succeed on another key's publication (S3 leaves the header
/// alone), free that key's live slot, and leave the shadow held for good.
fn find_shadow<T: Threading>(
    bin: &BinRef<'_, T>,
    h: Header,
    key: u64,
    seek: Seek,
) -> Option<(usize, SlotState)> {
    let shadow = bin.shadow();
    let mut lm = None;
    let slots = match seek {
        Seek::Commit => h.slots_in(SlotState::Shadow).or(h.slots_in(SlotState::Valid)),
        // Planted bug (scripts/planted-bugs.sh): an abort that also takes
        // a Valid slot, so a torn match frees another key's slot.
        Seek::Abort if planted(Plant::AbortTakesValid) => {
            h.slots_in(SlotState::Shadow).or(h.slots_in(SlotState::Valid))
        }
        Seek::Abort => h.slots_in(SlotState::Shadow),
    };
    for i in slots {
        let slot = bin.slot(&mut lm, i);
        if slot.load_key() == shadow && slot.load_value() == key {
            return Some((i, h.slot(i)));
        }
    }
    None
}

/// The header of a bin not in transfer, with the slot of the shadow insert
/// of `key` and its state; None if the bin was transferred (go on in the
/// next index).
fn locate_shadow<T: Threading>(
    bin: &BinRef<'_, T>,
    key: u64,
    seek: Seek,
) -> Option<(Header, usize, SlotState)> {
    loop {
        let mut h = bin.header();
        if settle(bin, &mut h) {
            return None;
        }
        match find_shadow(bin, h, key, seek) {
            Some((i, state)) => return Some((h, i, state)),
            // A transfer began after the header was read (it killed the
            // slot): the re-read sees it. Otherwise the slot must be here.
            None => assert!(!validate(bin, h), "dlht invariant: a shadow insert's slot is missing"),
        }
    }
}

/// Make the shadow insert of `key` present with `value`.
pub fn commit<T: Threading>(bin: &BinRef<'_, T>, key: u64, value: u64) -> Step<()> {
    loop {
        let Some((h, i, state)) = locate_shadow(bin, key, Seek::Commit) else {
            return Step::Moved;
        };
        if state == SlotState::Shadow {
            if bin.cas_header(h, h.with_slot(i, SlotState::Valid)).is_ok() {
                crate::persist::crash::at(crate::persist::crash::CrashPoint::ShadowCommitting);
            } // S2 (else retry)
        } else {
            // Counted before the publication, as an insert's I7.
            let counted = crate::persist::cell::note_count(bin.index, i, key, 1);
            if bin.dwcas(bin.slot(&mut None, i), (bin.shadow(), key), (key, value)).is_ok() {
                if counted {
                    crate::persist::cell::count_settled();
                }
                return Step::Done(()); // S3
            }
            if counted {
                crate::persist::cell::count_undone(1);
            }
        }
        // Else killed by a transfer: the next attempt follows it.
    }
}

/// Give up the shadow insert of `key`: its slot becomes free.
pub fn abort<T: Threading>(bin: &BinRef<'_, T>, key: u64) -> Step<()> {
    loop {
        let Some((h, i, state)) = locate_shadow(bin, key, Seek::Abort) else {
            return Step::Moved;
        };
        debug_assert!(
            state == SlotState::Shadow || planted(Plant::AbortTakesValid),
            "dlht invariant: aborting a committed shadow insert"
        );
        if bin.cas_header(h, h.with_slot(i, SlotState::Invalid)).is_ok() {
            return Step::Done(());
        }
    }
}
