//! Giving back a link bucket a bin has emptied (not in the paper, whose
//! links stay chained until the next resize).
//!
//! Why: a bin chains a link bucket when it passes three keys (a pair past
//! seven) and, in the paper, keeps it. Under insert/remove churn every bin
//! that ever held four keys keeps a link: a cache that evicts to stay under
//! its memory limit (`dlht-server -m`) saw its index grow by a link per bin
//! and its items fall from 366,000 to 160,000 over six rounds of tiny sets.
//!
//! After a remove freed a slot of a bin whose link of some kind holds no
//! key, with the bin down to [`KEEP`] fewer keys than the link's first slot
//! (so a bin hovering at four keys does not chain and give back by turns):
//!
//! U1 CAS the header: every slot of the link Invalid → TryInsert, in a bin
//!    not in transfer. Inserts skip TryInsert slots, and the CAS fails if
//!    any slot or the bin's state changed.
//! U2 CAS the link-meta half of the link to zero. No insert can claim a
//!    slot of it now, so nothing is written into the bucket.
//! U3 CAS the held slots back to Invalid (after any transfer or freeze of
//!    the bin settles; a bin transferred meanwhile is left as it is, its
//!    index on its way out). An insert that picks one now finds the link
//!    unchained and chains one (from the pool first) before it claims.
//! U4 the caller hands the bucket to the index's pool once every thread
//!    that may have read the old link-meta word has let go of it (the
//!    allocator's guards: `allocator::pointers`), so no reader ever reads
//!    a bucket chained to another bin as its own.
//!
//! A reader whose header snapshot predates U1 may still load the link
//! meta after U2: the slot reads as the quarantine slot (dead), and its
//! validation fails, since U1 and U3 moved the header's version. An insert
//! that checked the link before U2 claims with a header from before U1,
//! and its CAS fails for the same reason; after its claim no giving back
//! can start (a slot of the link is no longer Invalid).

use super::settle;
use crate::plant::{planted, Plant};
use crate::raw::header::{SlotState, SLOTS_PER_BIN};
use crate::raw::index::BinRef;
use crate::raw::link_meta::LinkKind;
use crate::raw::threading::Threading;

/// Keys below a link's first slot a bin must be down to before it gives
/// the link back: hysteresis against chaining and giving back by turns.
pub const KEEP: usize = 2;

/// After a remove freed a slot of `bin`: unchain every link of the bin that
/// is empty (U1–U3), for an index whose bins give links back. `given`
/// receives each link unchained (its kind and first bucket), which the
/// caller hands to the pool once no thread can read it (U4).
pub fn give_back<T: Threading>(bin: &BinRef<'_, T>, given: impl FnMut(LinkKind, u32)) {
    give_back_keeping(bin, KEEP, given)
}

/// [`give_back`], for a bin down to `keep` fewer keys than a link's first
/// slot (a loom model races an insert that needs the link: `keep` 0).
pub fn give_back_keeping<T: Threading>(
    bin: &BinRef<'_, T>,
    keep: usize,
    mut given: impl FnMut(LinkKind, u32),
) {
    if !T::SHARED || bin.index.link_pool().is_none() {
        return;
    }
    for kind in [LinkKind::Pair, LinkKind::Single] {
        let slots = kind.slots();
        let meta = &bin.bucket.link_meta;
        if meta.load().get(kind).is_none() {
            continue;
        }
        let h = bin.header();
        if !h.is_no_transfer() {
            return;
        }
        let used = (0..SLOTS_PER_BIN).filter(|&i| h.slot(i) != SlotState::Invalid).count();
        if slots.clone().any(|i| h.slot(i) != SlotState::Invalid) || used + keep > slots.start {
            continue;
        }
        // U1. Planted bug (scripts/planted-bugs.sh): unchain without
        // holding the link's slots, so an insert may claim one meanwhile.
        let held = if planted(Plant::LinkGivenUnheld) {
            h
        } else {
            slots.clone().fold(h, |h, i| h.with_slot(i, SlotState::TryInsert))
        };
        if held != h && bin.cas_header(h, held).is_err() {
            return; // the bin changed: a later remove tries again
        }
        // U2. The link is read only now that its slots are held: no other
        // thread can unchain it or chain another in its place until U3 (a
        // giving back needs the slots Invalid; a chaining CAS is from
        // zero). Gone already: another remover gave it back before U1.
        let mut cur = meta.load();
        let first = cur.get(kind);
        if first.is_some() {
            while let Err(found) = meta.cas::<T>(cur, cur.without(kind)) {
                cur = found; // the other half chained meanwhile
            }
        }
        // U3 (nothing held under the plant)
        let mut h = held;
        while !planted(Plant::LinkGivenUnheld) {
            if settle(bin, &mut h) {
                break; // transferred (it skips TryInsert slots): the index goes whole
            }
            let freed = slots.clone().fold(h, |h, i| h.with_slot(i, SlotState::Invalid));
            match bin.cas_header(h, freed) {
                Ok(()) => break,
                Err(found) => h = found,
            }
        }
        if let Some(first) = first {
            given(kind, first); // U4, by the caller
        }
    }
}
