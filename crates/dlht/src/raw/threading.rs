//! Who may touch an index: many threads ([`Shared`]) or one ([`Local`],
//! the paper's single-thread mode, §3.4.5).
//!
//! The per-bin protocols are written once, generic over this parameter, and
//! every read-modify-write they issue goes through the functions here. For
//! `Local` each CAS becomes load, compare, store and each fetch-add a load
//! and a store: the same algorithm, without locked instructions. `Local` is
//! only reachable through [`LocalMap`](crate::LocalMap), which is not `Sync`,
//! so no other thread can observe the non-atomic read-modify-writes.

use crate::arch::Slot;
use crate::sync::{AtomicU64, Ordering};

/// How an index is shared. Sealed: [`Shared`] or [`Local`].
pub trait Threading: Copy + Default + Send + Sync + 'static + private::Sealed {
    /// True when other threads may access the index concurrently.
    const SHARED: bool;
}

/// Many threads: real atomic read-modify-writes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shared;

/// One thread: read-modify-writes as plain loads and stores.
#[derive(Clone, Copy, Debug, Default)]
pub struct Local;

impl Threading for Shared {
    const SHARED: bool = true;
}

impl Threading for Local {
    const SHARED: bool = false;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::Shared {}
    impl Sealed for super::Local {}
}

/// CAS a word. Shared: AcqRel on success (publish what was written before,
/// see what the previous writer published), Acquire on failure (the word
/// returned is then as readable as a plain Acquire load). Local: Relaxed,
/// since only this thread ever touches the index.
#[inline(always)]
pub fn cas_word<T: Threading>(word: &AtomicU64, cur: u64, new: u64) -> Result<(), u64> {
    if T::SHARED {
        word.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire).map(|_| ())
    } else {
        let found = word.load(Ordering::Relaxed);
        if found == cur {
            word.store(new, Ordering::Relaxed);
            Ok(())
        } else {
            Err(found)
        }
    }
}

/// Fetch-add on a counter that only hands out distinct numbers (Relaxed:
/// what the numbers name is published by a later CAS).
#[inline(always)]
pub fn fetch_add<T: Threading>(word: &AtomicU64, n: u64) -> u64 {
    if T::SHARED {
        word.fetch_add(n, Ordering::Relaxed)
    } else {
        let v = word.load(Ordering::Relaxed);
        word.store(v + n, Ordering::Relaxed);
        v
    }
}

/// 16-byte CAS on a slot (see `arch::dwcas`); for `Local`, compare and store.
#[inline(always)]
pub fn dwcas<T: Threading>(slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
    if T::SHARED {
        crate::arch::dwcas(slot, old, new)
    } else {
        let found = (slot.key.load(Ordering::Relaxed), slot.value.load(Ordering::Relaxed));
        if found != old {
            return Err(found);
        }
        slot.value.store(new.1, Ordering::Relaxed);
        slot.key.store(new.0, Ordering::Relaxed);
        Ok(())
    }
}
