//! Slots and buckets: the 64-byte, cache-line-aligned units of the index.
//!
//! ```text
//! PrimaryBucket (64 B):  | header 8 | link meta 8 | slot 0 16 | slot 1 16 | slot 2 16 |
//! LinkBucket    (64 B):  | slot 0 16 | slot 1 16 | slot 2 16 | slot 3 16 |
//! Slot          (16 B):  | key word 8 | value word 8 |
//! ```

use super::header::AtomicHeader;
use super::link_meta::{AtomicLinkMeta, LINK_SLOTS, PRIMARY_SLOTS};

pub use crate::arch::Slot;

/// The first bucket of every bin.
#[repr(C, align(64))]
pub struct PrimaryBucket {
    /// The bin header.
    pub header: AtomicHeader,
    /// Chained link buckets.
    pub link_meta: AtomicLinkMeta,
    /// Slots 0..3 of the bin.
    pub slots: [Slot; PRIMARY_SLOTS],
}

impl PrimaryBucket {
    /// An empty bin.
    pub fn new() -> Self {
        PrimaryBucket {
            header: AtomicHeader::new(),
            link_meta: AtomicLinkMeta::new(),
            slots: [Slot::new(), Slot::new(), Slot::new()],
        }
    }
}

impl Default for PrimaryBucket {
    fn default() -> Self {
        Self::new()
    }
}

/// A bucket of the shared link array.
#[repr(C, align(64))]
pub struct LinkBucket {
    /// Four more slots of whichever bin chained this bucket.
    pub slots: [Slot; LINK_SLOTS],
}

impl LinkBucket {
    /// An empty link bucket.
    pub fn new() -> Self {
        LinkBucket { slots: [Slot::new(), Slot::new(), Slot::new(), Slot::new()] }
    }
}

impl Default for LinkBucket {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::size_of::<Slot>() == 16);
    assert!(core::mem::align_of::<Slot>() == 16);
    assert!(core::mem::size_of::<PrimaryBucket>() == 64);
    assert!(core::mem::align_of::<PrimaryBucket>() == 64);
    assert!(core::mem::size_of::<LinkBucket>() == 64);
    assert!(core::mem::align_of::<LinkBucket>() == 64);
};

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn layout_matches_the_paper() {
        assert_eq!(size_of::<Slot>(), 16);
        assert_eq!(offset_of!(Slot, key), 0);
        assert_eq!(offset_of!(Slot, value), 8);
        assert_eq!(size_of::<PrimaryBucket>(), 64);
        assert_eq!(align_of::<PrimaryBucket>(), 64);
        assert_eq!(offset_of!(PrimaryBucket, header), 0);
        assert_eq!(offset_of!(PrimaryBucket, link_meta), 8);
        assert_eq!(offset_of!(PrimaryBucket, slots), 16);
        assert_eq!(size_of::<LinkBucket>(), 64);
        assert_eq!(align_of::<LinkBucket>(), 64);
        assert_eq!(offset_of!(LinkBucket, slots), 0);
    }

    #[test]
    fn zeroed_bucket_is_an_empty_bin() {
        // The index is allocated as zeroed memory; it must read as empty.
        // SAFETY: PrimaryBucket is atomics only, for which all-zero is valid.
        let b: PrimaryBucket = unsafe { core::mem::zeroed() };
        assert_eq!(b.header.load(), super::super::header::Header::default());
        assert_eq!(b.link_meta.load().single(), None);
    }
}
