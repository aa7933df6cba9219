//! The 8-byte bin header (paper §3.1): the single synchronization word of a bin.
//!
//! ```text
//!  63                       32 31 30 29 28 27 26         1  0
//! +---------------------------+-----+-----+-----+- ... -+-----+
//! |       version (32 bits)   | bin |s14  |s13  |       | s0  |
//! +---------------------------+-----+-----+-----+- ... -+-----+
//!                              state  2-bit slot states, slot 0 lowest
//! ```
//!
//! Every transition built here bumps the version, so a header CAS succeeds
//! only against the exact header it read (ABA-safe up to version wrap-around;
//! see docs/DESIGN.md, hazard 7) and a reader can validate a snapshot by
//! re-reading the word.

use super::threading::{cas_word, Threading};
use crate::sync::{AtomicU64, Ordering};

/// Number of slots per bin: 3 in the primary bucket, 4 in each of 3 links.
pub const SLOTS_PER_BIN: usize = 15;

/// State of one slot, two bits in the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SlotState {
    /// Free: an insert may claim it.
    Invalid = 0b00,
    /// Claimed by an insert that has not committed yet; invisible to lookups.
    TryInsert = 0b01,
    /// Holds a key (or a marker: see `raw::markers`).
    Valid = 0b10,
    /// Holds a shadow insert (paper §3.2.2): hidden from get, put and
    /// remove until committed (→ Valid) or aborted (→ Invalid).
    Shadow = 0b11,
}

/// Transfer state of a bin during a resize (paper §3.2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
#[allow(clippy::enum_variant_names)] // the paper's names
pub enum BinState {
    /// Operations run in this index.
    NoTransfer = 0b00,
    /// A resizer is copying the bin; operations wait.
    InTransfer = 0b01,
    /// Copied: operations go to the next index.
    DoneTransfer = 0b10,
}

/// A snapshot of a bin header. Pure value logic; atomics live in
/// [`AtomicHeader`].
#[derive(Clone, Copy, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct Header(u64);

impl Header {
    /// Bits per slot state.
    pub const SLOT_BITS: u32 = 2;
    /// Mask of all slot-state bits (bits 0..30).
    pub const SLOTS_MASK: u64 = (1 << (SLOTS_PER_BIN as u32 * Self::SLOT_BITS)) - 1;
    /// The low bit of every slot-state field.
    pub const LOW_BITS: u64 = Self::SLOTS_MASK / 0b11;
    /// Shift of the 2-bit bin state.
    pub const BIN_STATE_SHIFT: u32 = SLOTS_PER_BIN as u32 * Self::SLOT_BITS;
    /// Shift of the 32-bit version.
    pub const VERSION_SHIFT: u32 = 32;
    /// One version step.
    pub const VERSION_ONE: u64 = 1 << Self::VERSION_SHIFT;

    /// The 32-bit version.
    #[inline]
    pub const fn version(self) -> u32 {
        (self.0 >> Self::VERSION_SHIFT) as u32
    }

    /// True if the bin is not (being) transferred: the common case, tested
    /// with one mask instead of decoding the state.
    #[inline(always)]
    pub const fn is_no_transfer(self) -> bool {
        self.0 & (0b11 << Self::BIN_STATE_SHIFT) == 0
    }

    /// The bin's transfer state.
    #[inline]
    pub const fn bin_state(self) -> BinState {
        match (self.0 >> Self::BIN_STATE_SHIFT) & 0b11 {
            0b00 => BinState::NoTransfer,
            0b01 => BinState::InTransfer,
            0b10 => BinState::DoneTransfer,
            // No transition writes it: a damaged map file's, which
            // `protocol::settle` repairs (until then, a bin to keep out of).
            _ => BinState::InTransfer,
        }
    }

    /// True if the bin state is the one no transition writes (only a
    /// damaged map file holds it).
    #[inline]
    pub const fn is_damaged_state(self) -> bool {
        (self.0 >> Self::BIN_STATE_SHIFT) & 0b11 == 0b11
    }

    /// State of slot `i` (0..15).
    #[inline]
    pub const fn slot(self, i: usize) -> SlotState {
        match (self.0 >> (i as u32 * Self::SLOT_BITS)) & 0b11 {
            0b00 => SlotState::Invalid,
            0b01 => SlotState::TryInsert,
            0b10 => SlotState::Valid,
            _ => SlotState::Shadow,
        }
    }

    /// The same header with slot `i` set to `s` and the version bumped.
    #[inline]
    #[must_use]
    pub const fn with_slot(self, i: usize, s: SlotState) -> Header {
        let shift = i as u32 * Self::SLOT_BITS;
        let cleared = self.0 & !(0b11 << shift);
        Header((cleared | ((s as u64) << shift)).wrapping_add(Self::VERSION_ONE))
    }

    /// True if every slot is Invalid.
    #[inline]
    pub const fn has_no_slots(self) -> bool {
        self.0 & Self::SLOTS_MASK == 0
    }

    /// The same header with every slot Invalid and the version bumped.
    #[inline]
    #[must_use]
    pub const fn with_no_slots(self) -> Header {
        Header((self.0 & !Self::SLOTS_MASK).wrapping_add(Self::VERSION_ONE))
    }

    /// The same header with the bin state set to `s` and the version bumped.
    #[inline]
    #[must_use]
    pub const fn with_bin_state(self, s: BinState) -> Header {
        let cleared = self.0 & !(0b11 << Self::BIN_STATE_SHIFT);
        Header((cleared | ((s as u64) << Self::BIN_STATE_SHIFT)).wrapping_add(Self::VERSION_ONE))
    }

    /// Bit set (one bit per slot, at the field's low bit) of slots in state `s`.
    #[inline]
    const fn fields_equal(self, s: SlotState) -> u64 {
        let want = (s as u64) * Self::LOW_BITS; // s replicated in every field
        let diff = (self.0 ^ want) & Self::SLOTS_MASK;
        // A field matches iff both its bits are zero in `diff`.
        !(diff | (diff >> 1)) & Self::LOW_BITS
    }

    /// Slots in state `s`, lowest first.
    #[inline]
    pub const fn slots_in(self, s: SlotState) -> SlotMask {
        SlotMask(self.fields_equal(s))
    }

    /// The lowest Invalid slot, if any.
    #[inline]
    pub fn first_invalid(self) -> Option<usize> {
        self.slots_in(SlotState::Invalid).next_slot()
    }
}

impl core::fmt::Debug for Header {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut states = [' '; SLOTS_PER_BIN];
        for (i, c) in states.iter_mut().enumerate() {
            *c = match self.slot(i) {
                SlotState::Invalid => '.',
                SlotState::TryInsert => 't',
                SlotState::Valid => 'V',
                SlotState::Shadow => 's',
            };
        }
        f.debug_struct("Header")
            .field("version", &self.version())
            .field("bin", &self.bin_state())
            .field("slots", &states.iter().collect::<String>())
            .finish()
    }
}

const _: () = assert!(32 + 2 + SLOTS_PER_BIN * 2 == 64, "header bits must add up to 64");
const _: () = assert!(Header::BIN_STATE_SHIFT + 2 == Header::VERSION_SHIFT);

/// A set of slot indexes taken from a header: one bit per 2-bit field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SlotMask(u64);

impl SlotMask {
    /// True if no slot is in the set.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The lowest slot in the set.
    #[inline]
    pub const fn next_slot(self) -> Option<usize> {
        if self.0 == 0 {
            None
        } else {
            Some(self.0.trailing_zeros() as usize / Header::SLOT_BITS as usize)
        }
    }

    /// The set of primary-bucket slots (0, 1, 2) whose flag is true: built
    /// without branches, for matching the three key words at once.
    #[inline(always)]
    pub const fn primary(s0: bool, s1: bool, s2: bool) -> SlotMask {
        SlotMask(s0 as u64 | (s1 as u64) << Header::SLOT_BITS | (s2 as u64) << (2 * Header::SLOT_BITS))
    }

    /// Slots in both sets.
    #[inline(always)]
    #[must_use]
    pub const fn and(self, other: SlotMask) -> SlotMask {
        SlotMask(self.0 & other.0)
    }

    /// Slots in either set.
    #[inline(always)]
    #[must_use]
    pub const fn or(self, other: SlotMask) -> SlotMask {
        SlotMask(self.0 | other.0)
    }

    /// Keep only slots `lo..hi`.
    #[inline]
    pub const fn range(self, lo: usize, hi: usize) -> SlotMask {
        let lo_bit = lo as u32 * Header::SLOT_BITS;
        let hi_bit = hi as u32 * Header::SLOT_BITS;
        let m = ((1u64 << hi_bit) - 1) & !((1u64 << lo_bit) - 1);
        SlotMask(self.0 & m)
    }
}

impl Iterator for SlotMask {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        let i = self.next_slot()?;
        self.0 &= self.0 - 1;
        Some(i)
    }
}

/// The header word in a primary bucket.
#[repr(transparent)]
pub struct AtomicHeader(AtomicU64);

impl AtomicHeader {
    /// A header with every slot Invalid, NoTransfer, version 0.
    pub fn new() -> Self {
        AtomicHeader(AtomicU64::new(0))
    }

    /// Read the header. Acquire: pairs with the Release half of every header
    /// CAS, so slot contents written before a transition are visible after it.
    #[inline]
    pub fn load(&self) -> Header {
        Header(self.0.load(Ordering::Acquire))
    }

    /// Re-read the header at the end of a seqlock-style read. The caller
    /// issues `fence(Acquire)` first, which orders the slot reads before this
    /// load, so Relaxed suffices.
    #[inline]
    pub fn load_validate(&self) -> Header {
        Header(self.0.load(Ordering::Relaxed))
    }

    /// CAS from `cur` to `new`. AcqRel: Release publishes the slot words
    /// written before it (insert's fill), Acquire makes the winner see the
    /// slot words published by earlier transitions. On failure returns the
    /// header found (Acquire, for the same reason as [`load`](Self::load)).
    #[inline(always)]
    pub fn cas<T: Threading>(&self, cur: Header, new: Header) -> Result<(), Header> {
        cas_word::<T>(&self.0, cur.0, new.0).map_err(Header)
    }

    /// Store by the sole owner of a bin (a transfer writing a new-index bin
    /// no other thread can reach yet, or finishing a bin it holds InTransfer).
    /// Release publishes the slot words written before.
    #[inline]
    pub fn store_owned(&self, new: Header) {
        self.0.store(new.0, Ordering::Release);
    }
}

impl Default for AtomicHeader {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_constants() {
        assert_eq!(core::mem::size_of::<Header>(), 8);
        assert_eq!(core::mem::size_of::<AtomicHeader>(), 8);
        assert_eq!(Header::SLOTS_MASK, (1 << 30) - 1);
        assert_eq!(Header::LOW_BITS, 0x1555_5555);
    }

    #[test]
    fn slot_round_trip_and_version_bump() {
        let states = [SlotState::Invalid, SlotState::TryInsert, SlotState::Valid, SlotState::Shadow];
        let mut h = Header::default();
        for i in 0..SLOTS_PER_BIN {
            let s = states[i % 4];
            let v = h.version();
            h = h.with_slot(i, s);
            assert_eq!(h.version(), v + 1);
            assert_eq!(h.slot(i), s);
        }
        for i in 0..SLOTS_PER_BIN {
            assert_eq!(h.slot(i), states[i % 4], "slot {i}");
        }
        assert_eq!(h.bin_state(), BinState::NoTransfer);
        for b in [BinState::InTransfer, BinState::DoneTransfer, BinState::NoTransfer] {
            let h2 = h.with_bin_state(b);
            assert_eq!(h2.bin_state(), b);
            assert_eq!(h2.version(), h.version() + 1);
            assert_eq!(h2.0 & Header::SLOTS_MASK, h.0 & Header::SLOTS_MASK);
        }
    }

    #[test]
    fn masks_select_exact_states() {
        let h = Header::default()
            .with_slot(0, SlotState::Valid)
            .with_slot(3, SlotState::TryInsert)
            .with_slot(7, SlotState::Valid)
            .with_slot(14, SlotState::Shadow);
        assert_eq!(h.slots_in(SlotState::Valid).collect::<Vec<_>>(), vec![0, 7]);
        assert_eq!(h.slots_in(SlotState::TryInsert).collect::<Vec<_>>(), vec![3]);
        assert_eq!(h.slots_in(SlotState::Shadow).collect::<Vec<_>>(), vec![14]);
        assert_eq!(h.slots_in(SlotState::Invalid).count(), 11);
        assert_eq!(h.first_invalid(), Some(1));
        assert_eq!(h.slots_in(SlotState::Valid).range(3, 15).collect::<Vec<_>>(), vec![7]);
        assert_eq!(h.slots_in(SlotState::Valid).range(0, 3).count(), 1);
    }

    #[test]
    fn version_wraps_without_touching_state() {
        let h = Header(!(0b11 << Header::BIN_STATE_SHIFT) & !Header::SLOTS_MASK);
        assert_eq!(h.version(), u32::MAX);
        let h2 = h.with_slot(0, SlotState::Valid);
        assert_eq!(h2.version(), 0);
        assert_eq!(h2.slot(0), SlotState::Valid);
        assert_eq!(h2.bin_state(), BinState::NoTransfer);
    }

    #[test]
    fn primary_masks_line_up_with_header_masks() {
        let h = Header::default().with_slot(0, SlotState::Valid).with_slot(2, SlotState::Valid);
        let valid = h.slots_in(SlotState::Valid);
        assert_eq!(SlotMask::primary(true, true, true).and(valid).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(SlotMask::primary(false, true, false).and(valid).next_slot(), None);
        assert_eq!(SlotMask::primary(false, false, true).next_slot(), Some(2));
    }

    #[test]
    fn full_header_has_no_invalid_slot() {
        let mut h = Header::default();
        for i in 0..SLOTS_PER_BIN {
            h = h.with_slot(i, SlotState::Valid);
        }
        assert_eq!(h.first_invalid(), None);
        assert_eq!(h.slots_in(SlotState::Valid).count(), 15);
    }
}
