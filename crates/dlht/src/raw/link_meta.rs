//! The 8-byte link metadata of a primary bucket (paper §3.1).
//!
//! ```text
//!  63                32 31                 0
//! +--------------------+--------------------+
//! |  pair link + 1     |  single link + 1   |
//! +--------------------+--------------------+
//! ```
//!
//! The single link chains one link bucket (slots 3..7); the pair link chains
//! two consecutive ones (slots 7..11 and 11..15). Indexes are stored plus one
//! so that zeroed memory means "not chained". Each half is written by a CAS
//! from zero; in a map whose bins give emptied links back
//! (`protocol::links`), it returns to zero only while the bin holds every
//! slot of that link itself.

use super::header::SLOTS_PER_BIN;
use super::threading::{cas_word, Threading};
use crate::sync::{AtomicU64, Ordering};

/// Slots in the primary bucket.
pub const PRIMARY_SLOTS: usize = 3;
/// Slots in a link bucket.
pub const LINK_SLOTS: usize = 4;
/// First slot held by the single link bucket.
pub const SINGLE_FIRST: usize = PRIMARY_SLOTS;
/// First slot held by the pair of link buckets.
pub const PAIR_FIRST: usize = PRIMARY_SLOTS + LINK_SLOTS;

const _: () = assert!(PAIR_FIRST + 2 * LINK_SLOTS == SLOTS_PER_BIN);

/// Where a logical slot of a bin lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotHome {
    /// In the primary bucket, at this position.
    Primary(usize),
    /// In the single link bucket, at this position.
    Single(usize),
    /// In the pair, bucket 0 or 1, at this position.
    Pair(usize, usize),
}

impl SlotHome {
    /// Locate logical slot `i` (0..15).
    #[inline]
    pub const fn of(i: usize) -> SlotHome {
        if i < SINGLE_FIRST {
            SlotHome::Primary(i)
        } else if i < PAIR_FIRST {
            SlotHome::Single(i - SINGLE_FIRST)
        } else {
            let j = i - PAIR_FIRST;
            SlotHome::Pair(j / LINK_SLOTS, j % LINK_SLOTS)
        }
    }
}

/// Which link the bucket of a slot needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// One bucket, for slots 3..7.
    Single,
    /// Two consecutive buckets, for slots 7..15.
    Pair,
}

impl LinkKind {
    /// Link buckets the link is made of.
    #[inline]
    pub const fn buckets(self) -> usize {
        match self {
            LinkKind::Single => 1,
            LinkKind::Pair => 2,
        }
    }

    /// The bin's logical slots the link holds.
    #[inline]
    pub const fn slots(self) -> core::ops::Range<usize> {
        match self {
            LinkKind::Single => SINGLE_FIRST..PAIR_FIRST,
            LinkKind::Pair => PAIR_FIRST..SLOTS_PER_BIN,
        }
    }
}

/// A snapshot of the link metadata.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
#[repr(transparent)]
pub struct LinkMeta(pub u64);

impl LinkMeta {
    const HALF: u32 = 32;

    /// Index of the single link bucket, if chained.
    #[inline]
    pub const fn single(self) -> Option<u32> {
        match self.0 as u32 {
            0 => None,
            n => Some(n - 1),
        }
    }

    /// Index of the first bucket of the pair, if chained.
    #[inline]
    pub const fn pair(self) -> Option<u32> {
        match (self.0 >> Self::HALF) as u32 {
            0 => None,
            n => Some(n - 1),
        }
    }

    /// The link of `kind`, if chained.
    #[inline]
    pub const fn get(self, kind: LinkKind) -> Option<u32> {
        match kind {
            LinkKind::Single => self.single(),
            LinkKind::Pair => self.pair(),
        }
    }

    /// The same metadata with `kind` chained to link bucket `idx`.
    #[inline]
    #[must_use]
    pub const fn with(self, kind: LinkKind, idx: u32) -> LinkMeta {
        let stored = idx as u64 + 1;
        match kind {
            LinkKind::Single => LinkMeta((self.0 & !0xFFFF_FFFF) | stored),
            LinkKind::Pair => LinkMeta((self.0 & 0xFFFF_FFFF) | (stored << Self::HALF)),
        }
    }
}

impl LinkMeta {
    /// The same metadata with `kind` no longer chained (a bin giving its
    /// emptied link back: `protocol::links`).
    #[inline]
    #[must_use]
    pub const fn without(self, kind: LinkKind) -> LinkMeta {
        match kind {
            LinkKind::Single => LinkMeta(self.0 & !0xFFFF_FFFF),
            LinkKind::Pair => LinkMeta(self.0 & 0xFFFF_FFFF),
        }
    }
}

/// The link metadata word in a primary bucket.
#[repr(transparent)]
pub struct AtomicLinkMeta(AtomicU64);

impl AtomicLinkMeta {
    /// Nothing chained.
    pub fn new() -> Self {
        AtomicLinkMeta(AtomicU64::new(0))
    }

    /// Acquire: pairs with the Release of [`cas`](Self::cas); a reader that
    /// sees a link also sees the zeroed bucket it names.
    #[inline]
    pub fn load(&self) -> LinkMeta {
        LinkMeta(self.0.load(Ordering::Acquire))
    }

    /// Chain a link (CAS from `cur`). AcqRel for the reason given at `load`
    /// (see `threading::cas_word`).
    #[inline]
    pub fn cas<T: Threading>(&self, cur: LinkMeta, new: LinkMeta) -> Result<(), LinkMeta> {
        cas_word::<T>(&self.0, cur.0, new.0).map_err(LinkMeta)
    }
}

impl Default for AtomicLinkMeta {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = LinkMeta::default();
        assert_eq!((m.single(), m.pair()), (None, None));
        let m = m.with(LinkKind::Single, 0);
        assert_eq!((m.single(), m.pair()), (Some(0), None));
        let m = m.with(LinkKind::Pair, u32::MAX - 1);
        assert_eq!((m.single(), m.pair()), (Some(0), Some(u32::MAX - 1)));
        assert_eq!(m.get(LinkKind::Pair), Some(u32::MAX - 1));
    }

    #[test]
    fn slot_homes_cover_the_bin() {
        assert_eq!(SlotHome::of(0), SlotHome::Primary(0));
        assert_eq!(SlotHome::of(2), SlotHome::Primary(2));
        assert_eq!(SlotHome::of(3), SlotHome::Single(0));
        assert_eq!(SlotHome::of(6), SlotHome::Single(3));
        assert_eq!(SlotHome::of(7), SlotHome::Pair(0, 0));
        assert_eq!(SlotHome::of(10), SlotHome::Pair(0, 3));
        assert_eq!(SlotHome::of(11), SlotHome::Pair(1, 0));
        assert_eq!(SlotHome::of(14), SlotHome::Pair(1, 3));
    }
}
