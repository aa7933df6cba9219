//! A key/value slot: the 16-byte unit the slot CAS works on. It lives in
//! `arch`, whose `dwcas` gives it its atomics, so that `arch` needs nothing
//! from `raw` (whose buckets are built of slots).

use crate::sync::AtomicU64;

/// A key/value slot. 16-byte aligned so the pair can be swapped by one
/// `cmpxchg16b` (see `arch::dwcas`).
#[repr(C, align(16))]
pub struct Slot {
    /// The key word (a user key's bits, or a marker: see `raw::markers`).
    pub key: AtomicU64,
    /// The value word.
    pub value: AtomicU64,
}

impl Slot {
    /// A zeroed slot.
    pub fn new() -> Self {
        Slot { key: AtomicU64::new(0), value: AtomicU64::new(0) }
    }
}

impl Default for Slot {
    fn default() -> Self {
        Self::new()
    }
}
