//! The per-bin protocols (paper §3.2), one per file, on a single index.
//!
//! Each returns a [`Step`]: done, or "this bin was transferred: go to the
//! next index", or (insert only) "this index must grow". The map-level
//! driver (`driver.rs`, with `map/` and `local.rs`) follows `next`
//! pointers and runs resizes; `transfer.rs` moves one bin into the next
//! index for the resize protocol (`resize/`).
//!
//! Slot contents while the header says Valid (markers: `raw::markers`):
//!
//! | key word | value word | meaning                                   |
//! |----------|------------|-------------------------------------------|
//! | user key | value      | live entry                                |
//! | dead     | anything   | removed or transferred; header not yet cleared |
//! | pending  | user key   | insert committed, value not yet published |
//! | shadow   | user key   | shadow insert being committed, value not yet published |
//!
//! and while the header says Shadow: `(shadow, key)`, a shadow insert.

pub mod freeze;
pub mod get;
pub mod insert;
pub mod links;
pub mod put;
pub mod remove;
pub mod shadow;
pub mod transfer;

use crate::plant::{planted, Plant};
use crate::raw::header::SLOTS_PER_BIN;
use crate::raw::header::{BinState, Header, SlotMask, SlotState};
use crate::raw::index::BinRef;
use crate::raw::link_meta::{LinkKind, LinkMeta, SlotHome, SINGLE_FIRST};
use crate::raw::threading::Threading;
use crate::sync::{backoff, fence, Ordering};

/// Outcome of one protocol step on one index.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// Finished, with this result.
    Done(T),
    /// The bin has been transferred: retry in the next index.
    Moved,
    /// (insert) No free slot or link bucket: grow the index, then retry.
    Full,
}

/// What a scan of a bin's Valid slots found for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// Live in slot `slot` with this value word.
    Found {
        /// Logical slot.
        slot: usize,
        /// Value word read.
        value: u64,
    },
    /// An insert of this key has committed but not yet published its value.
    Pending,
    /// A shadow insert holds this key (hidden, or being committed).
    Shadowed,
    /// Not in the bin (as of the header snapshot).
    Absent,
}

/// Scan the slots `h` shows Valid or Shadow for `key`.
///
/// Reads the key word, then the value word of a match. The caller validates
/// the snapshot with [`validate`] where its linearization needs it.
///
/// A pending or shadow slot is read key → value → key again: its
/// publication swaps both words at once, and a scan that read the marker
/// before the swap and the value word after it would see neither "pending"
/// nor the key, and a second insert of the key would go ahead. If the key
/// word changed in between, the slot is judged on its new key word.
#[inline(always)]
pub fn scan<T: Threading>(bin: &BinRef<'_, T>, h: Header, key: u64) -> Scan {
    let mut lm: Option<LinkMeta> = None;
    let (pending, shadow) = (bin.pending(), bin.shadow());
    let mut result = Scan::Absent;
    for i in h.slots_in(SlotState::Valid).or(h.slots_in(SlotState::Shadow)) {
        let slot = bin.slot(&mut lm, i);
        let mut k = slot.load_key();
        if k == pending || k == shadow {
            let marker = k;
            let inserting = slot.load_value();
            // Planted bug (scripts/planted-bugs.sh): no key re-read.
            if !planted(Plant::ScanNoReread) {
                k = slot.load_key();
            }
            if k == marker {
                if inserting == key {
                    // Keep looking: a live match elsewhere wins (see
                    // `arch::dwcas` on torn publications).
                    result = if marker == shadow { Scan::Shadowed } else { Scan::Pending };
                }
                continue;
            }
        }
        // A Shadow slot holds a marker until its commit makes it Valid: one
        // holding a key is a damaged file's, skipped as `find` skips it.
        if k == key && h.slot(i) == SlotState::Valid {
            return Scan::Found { slot: i, value: slot.load_value() };
        }
    }
    result
}

/// Find a live `key` among the slots `h` shows Valid: its slot and value
/// word. For get, put and remove, which treat a pending insert of the key as
/// absent (it has not linearized), so unlike [`scan`] this ignores pending
/// slots. The primary bucket is matched without a loop ([`match_primary`]).
#[inline(always)]
pub fn find<T: Threading>(bin: &BinRef<'_, T>, h: Header, key: u64) -> Option<(usize, u64)> {
    let valid = h.slots_in(SlotState::Valid);
    if let Some(i) = match_primary(bin, valid, key) {
        return Some((i, bin.bucket.slots[i].load_value()));
    }
    let links = valid.range(SINGLE_FIRST, SLOTS_PER_BIN);
    if links.is_empty() {
        return None;
    }
    let mut lm: Option<LinkMeta> = None;
    for i in links {
        let slot = bin.slot(&mut lm, i);
        if slot.load_key() == key {
            return Some((i, slot.load_value()));
        }
    }
    None
}

/// The primary-bucket slot among `valid` whose key word is `key`: the three
/// key words compared at once and masked with the Valid bits, so a hit in
/// the primary bucket costs one well-predicted branch.
#[inline(always)]
pub fn match_primary<T: Threading>(bin: &BinRef<'_, T>, valid: SlotMask, key: u64) -> Option<usize> {
    let p = &bin.bucket.slots;
    let eq = SlotMask::primary(p[0].load_key() == key, p[1].load_key() == key, p[2].load_key() == key);
    eq.and(valid).next_slot()
}

/// Seqlock validation: true if the header is still exactly `h`, so every
/// slot word read since `h` was loaded belongs to the incarnations `h`
/// describes. `fence(Acquire)` orders those relaxed-or-acquire slot reads
/// before the re-read (crossbeam's `validate_read` shape).
#[inline(always)]
pub fn validate<T: Threading>(bin: &BinRef<'_, T>, h: Header) -> bool {
    fence(Ordering::Acquire);
    bin.bucket.header.load_validate() == h
}

/// Where [`locate`] found a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Located {
    /// The bin was transferred: retry in the next index.
    Moved,
    /// Not live in the bin (validated).
    Absent,
    /// Live in logical slot `slot` with `value`, under header `h`
    /// (validated: the pair was read from one live incarnation).
    Found {
        /// The header the read was validated against.
        h: Header,
        /// Logical slot.
        slot: usize,
        /// Value word read.
        value: u64,
    },
}

/// The opening that put and remove share (P1–P3, D1–D3): read the header,
/// settle a transfer, find the key, and validate the read, retrying until
/// a validated answer.
#[inline(always)]
pub fn locate<T: Threading>(bin: &BinRef<'_, T>, key: u64) -> Located {
    loop {
        let mut h = bin.header();
        if settle(bin, &mut h) {
            return Located::Moved;
        }
        let found = find(bin, h, key);
        if validate(bin, h) {
            return match found {
                Some((slot, value)) => Located::Found { h, slot, value },
                None => Located::Absent,
            };
        }
    }
}

/// D5 (and insert's release): move slot `i` from `from` to Invalid. Only the
/// caller can change this slot's state now, so this retries only across
/// other slots' changes; it gives up if a transfer took the bin (which
/// copies neither dead nor TryInsert slots), and waits out a snapshot's
/// freeze (after which the slot is still the caller's).
pub(crate) fn release_slot<T: Threading>(bin: &BinRef<'_, T>, i: usize, from: SlotState) {
    let mut h = bin.header();
    loop {
        if settle(bin, &mut h) {
            return;
        }
        debug_assert_eq!(h.slot(i), from, "dlht invariant: releasing a slot we do not own");
        match bin.cas_header(h, h.with_slot(i, SlotState::Invalid)) {
            Ok(()) => return,
            Err(found) => h = found,
        }
    }
}

/// The link a slot's bucket needs before it can be claimed, if not chained.
#[inline]
pub(crate) fn link_needed<T: Threading>(bin: &BinRef<'_, T>, slot: usize) -> Option<LinkKind> {
    let kind = match SlotHome::of(slot) {
        SlotHome::Primary(_) => return None,
        SlotHome::Single(_) => LinkKind::Single,
        SlotHome::Pair(..) => LinkKind::Pair,
    };
    bin.bucket.link_meta.load().get(kind).is_none().then_some(kind)
}

/// Wait while the bin is InTransfer (a resize moving it, or a snapshot
/// freezing it). Returns true if the bin is (now) DoneTransfer — the caller
/// moves to the next index — or false, with the header re-read into `h`, if
/// it is NoTransfer.
#[inline]
pub fn settle<T: Threading>(bin: &BinRef<'_, T>, h: &mut Header) -> bool {
    if h.is_no_transfer() {
        return false;
    }
    settle_transfer(bin, h)
}

/// [`settle`] for a bin in transfer. In an index of a map file, a transfer
/// state that no resize or snapshot of the index explains (or the state no
/// transition writes) is one a damaged file held: it is repaired to
/// NoTransfer (the bin's slots are judged as they are) rather than waited
/// on forever or followed to a next index that does not exist.
#[cold]
#[inline(never)]
fn settle_transfer<T: Threading>(bin: &BinRef<'_, T>, h: &mut Header) -> bool {
    let mut spins = 0;
    loop {
        if h.is_no_transfer() {
            return false;
        }
        // Acquire: orders the header read before the reads of the next
        // index and the resize phase (a resize attaches its next index, and
        // a snapshot takes the index, before any bin goes into transfer).
        fence(Ordering::Acquire);
        // A map in memory trusts its bins (a local map's index may have
        // dropped its next one while a re-entrant call still holds a bin).
        let damaged = h.is_damaged_state();
        let trusted = !bin.index.is_persistent();
        assert!(!(damaged && trusted), "dlht invariant: bin state 0b11 (freed or corrupt index)");
        match h.bin_state() {
            BinState::DoneTransfer if trusted || !damaged && bin.index.next_index().is_some() => return true,
            BinState::InTransfer if trusted || !damaged && bin.index.transfer_explained() => {
                backoff(&mut spins);
                *h = bin.header();
            }
            _ => {
                // Planted bug (scripts/planted-bugs.sh): trust the state.
                if planted(Plant::SettleTrustsDamage) {
                    backoff(&mut spins);
                    *h = bin.header();
                    if h.bin_state() == BinState::DoneTransfer {
                        return true;
                    }
                    continue;
                }
                match bin.repair_state(*h) {
                    Ok(repaired) => {
                        *h = repaired;
                        return false;
                    }
                    Err(found) => *h = found,
                }
            }
        }
    }
}

/// Wait for a pending insert in the bin to publish (a few instructions
/// unless its thread was preempted).
#[inline]
pub fn wait_pending() {
    let mut spins = 0;
    for _ in 0..4 {
        backoff(&mut spins);
    }
}
