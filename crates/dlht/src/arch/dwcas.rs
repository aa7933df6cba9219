//! The double-word (16-byte) compare-and-swap on a slot, and the slot-word
//! accesses that must agree with it.
//!
//! The CAS is `portable_atomic::AtomicU128::compare_exchange` on the slot's
//! 16 aligned bytes: `lock cmpxchg16b` on x86-64 (inlined when the build
//! enables the `cmpxchg16b` target feature, otherwise behind the crate's
//! one-time CPUID dispatch), `casp` or `ldxp`/`stxp` on aarch64, and the
//! native instruction on the other targets the crate supports. dlht used to
//! issue `cmpxchg16b` through its own inline asm; fat LTO let LLVM allocate
//! the slot pointer to rbx, which the asm swapped for the new key word
//! (reproduced by `crates/downstream` in the `release-lto` profile). Writing that asm correctly is the
//! crate's job, and portable-atomic is the well-kept crate that does it.
//!
//! How the other accesses are made depends on the target (see
//! `docs/DESIGN.md`, "The slot CAS and the 8-byte loads"):
//!
//! - **x86-64**: key and value words are read with plain 8-byte Acquire
//!   loads and filled with 8-byte Release stores, as the paper's C code
//!   does. Mixing them with a 16-byte CAS is outside Rust's memory model;
//!   it is sound on x86-64 because portable-atomic's CAS there is always
//!   `lock cmpxchg16b` (we require the CPU to have it, so its lock-based
//!   fallback is never used), a locked instruction on an aligned 16-byte
//!   location within one cache line is a single atomic write, an aligned
//!   8-byte load is single-copy atomic, and TSO keeps loads in order.
//! - **everywhere else**, and on x86-64 with `--cfg dlht_slot128` (which the
//!   test script uses to run the suite on this path): every access to a
//!   slot is a 16-byte atomic of the same `AtomicU128`, so all of it is
//!   inside the memory model and nothing relies on hardware folklore.
//! - **loom**: a lock per slot (loom has no 16-byte atomics). It gives the
//!   one property the protocol needs from the hardware — each word load sees
//!   a CAS entirely or not at all — and adds synchronization, so the models
//!   check the protocol's logic, not the orderings of slot-word loads.

use super::slot::Slot;

/// The slot's atomics (here, with the CAS, so that `slot.rs` needs
/// nothing from this file).
impl Slot {
    /// Read the key word. Acquire: pairs with the Release stores/CAS that
    /// wrote it, so the value word written before is visible too.
    #[inline(always)]
    pub fn load_key(&self) -> u64 {
        load_key(self)
    }

    /// Read the value word (after the key word; see `load_key`).
    #[inline(always)]
    pub fn load_value(&self) -> u64 {
        load_value(self)
    }

    /// Fill the slot while the caller owns it exclusively (TryInsert, or a
    /// new-index bin during transfer). Value, then key, both Release: a
    /// reader whose Acquire slot load (`load_key`/`load_value`) sees either
    /// word synchronizes with that store, so it also sees the header CAS that
    /// gave us ownership (sequenced before), and its validating header
    /// re-load fails. The pairing is the Acquire load's, not a fence's.
    #[inline]
    pub fn fill_owned(&self, key: u64, value: u64) {
        fill(self, key, value)
    }
}

/// Atomically: if `slot == (old_key, old_value)` set it to
/// `(new_key, new_value)` and return `Ok(())`; otherwise return the pair
/// found, `Err((key, value))`.
#[inline(always)]
pub(crate) fn dwcas(slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
    imp::dwcas(slot, old, new)
}

/// Load the key word of `slot`. Acquire: pairs with the Release stores and
/// the CAS that wrote it.
#[inline(always)]
pub(crate) fn load_key(slot: &Slot) -> u64 {
    imp::load_key(slot)
}

/// Load the value word of `slot` (Acquire, as [`load_key`]).
#[inline(always)]
pub(crate) fn load_value(slot: &Slot) -> u64 {
    imp::load_value(slot)
}

/// Fill a slot its caller owns (see `Slot::fill_owned`): value, then key,
/// both Release.
#[inline(always)]
pub(crate) fn fill(slot: &Slot, key: u64, value: u64) {
    imp::fill(slot, key, value)
}

/// True if this CPU runs the 16-byte CAS natively (not through a lock). On
/// x86-64 that is the CX16 feature, which the 8-byte loads depend on.
pub(crate) fn native() -> bool {
    #[cfg(not(loom))]
    {
        portable_atomic::AtomicU128::is_lock_free()
    }
    #[cfg(loom)]
    {
        true
    }
}

/// The slot as one 16-byte atomic.
#[cfg(not(loom))]
#[inline(always)]
fn as_u128(slot: &Slot) -> &portable_atomic::AtomicU128 {
    // SAFETY: `Slot` is `repr(C, align(16))`, 16 bytes of two `AtomicU64`
    // (interior mutability), so its address is valid for 16-byte atomic
    // reads and writes for as long as the borrow. The mixed-size accesses
    // this allows are confined as the module docs say: on x86-64 to the
    // hardware-backed case, elsewhere none (every access is 16 bytes).
    unsafe { portable_atomic::AtomicU128::from_ptr(slot as *const Slot as *mut u128) }
}

/// The two words of a slot packed as the `u128` with the same bytes: the
/// key lies at the lower address.
#[cfg(not(loom))]
#[inline(always)]
fn pack((key, value): (u64, u64)) -> u128 {
    if cfg!(target_endian = "little") {
        (value as u128) << 64 | key as u128
    } else {
        (key as u128) << 64 | value as u128
    }
}

/// Inverse of [`pack`].
#[cfg(not(loom))]
#[inline(always)]
fn unpack(w: u128) -> (u64, u64) {
    let (lo, hi) = (w as u64, (w >> 64) as u64);
    if cfg!(target_endian = "little") {
        (lo, hi)
    } else {
        (hi, lo)
    }
}

#[cfg(not(loom))]
#[inline(always)]
fn cas128(slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
    // AcqRel on success: publishes what the writer did before (a filled
    // value, for instance) and sees what the previous writer published.
    // Acquire on failure: the pair returned is as readable as an Acquire
    // load. (cmpxchg16b is SeqCst on x86-64 whatever is asked.)
    as_u128(slot)
        .compare_exchange(
            pack(old),
            pack(new),
            portable_atomic::Ordering::AcqRel,
            portable_atomic::Ordering::Acquire,
        )
        .map(|_| ())
        .map_err(unpack)
}

#[cfg(all(target_arch = "x86_64", not(loom), not(dlht_slot128)))]
mod imp {
    use super::Slot;
    use crate::sync::Ordering;

    pub(super) use super::cas128 as dwcas;

    #[inline(always)]
    pub(super) fn load_key(slot: &Slot) -> u64 {
        slot.key.load(Ordering::Acquire)
    }

    #[inline(always)]
    pub(super) fn load_value(slot: &Slot) -> u64 {
        slot.value.load(Ordering::Acquire)
    }

    #[inline(always)]
    pub(super) fn fill(slot: &Slot, key: u64, value: u64) {
        slot.value.store(value, Ordering::Release);
        slot.key.store(key, Ordering::Release);
    }
}

#[cfg(all(any(not(target_arch = "x86_64"), dlht_slot128), not(loom)))]
mod imp {
    use super::{as_u128, pack, unpack, Slot};
    use portable_atomic::Ordering;

    pub(super) use super::cas128 as dwcas;

    #[inline(always)]
    pub(super) fn load_key(slot: &Slot) -> u64 {
        // Acquire: see `super::load_key`.
        unpack(as_u128(slot).load(Ordering::Acquire)).0
    }

    #[inline(always)]
    pub(super) fn load_value(slot: &Slot) -> u64 {
        unpack(as_u128(slot).load(Ordering::Acquire)).1
    }

    #[inline(always)]
    pub(super) fn fill(slot: &Slot, key: u64, value: u64) {
        // One Release store of both words: readers see all of it or none.
        as_u128(slot).store(pack((key, value)), Ordering::Release);
    }
}

#[cfg(loom)]
mod imp {
    use super::Slot;
    use crate::sync::Ordering;

    fn lock_for(_slot: &Slot) -> loom::sync::MutexGuard<'static, ()> {
        loom::lazy_static! {
            static ref LOCK: loom::sync::Mutex<()> = loom::sync::Mutex::new(());
        }
        LOCK.lock().unwrap()
    }

    pub(super) fn load_key(slot: &Slot) -> u64 {
        let _guard = lock_for(slot);
        slot.key.load(Ordering::SeqCst)
    }

    pub(super) fn load_value(slot: &Slot) -> u64 {
        let _guard = lock_for(slot);
        slot.value.load(Ordering::SeqCst)
    }

    pub(super) fn fill(slot: &Slot, key: u64, value: u64) {
        let _guard = lock_for(slot);
        slot.value.store(value, Ordering::SeqCst);
        slot.key.store(key, Ordering::SeqCst);
    }

    pub(super) fn dwcas(slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
        let _guard = lock_for(slot);
        // SeqCst: the model must be at least as strong as a locked RMW.
        let cur = (slot.key.load(Ordering::SeqCst), slot.value.load(Ordering::SeqCst));
        if cur != old {
            return Err(cur);
        }
        slot.value.store(new.1, Ordering::SeqCst);
        slot.key.store(new.0, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pack_puts_the_key_at_the_lower_address() {
        let s = Slot::new();
        fill(&s, 7, 9);
        assert_eq!((load_key(&s), load_value(&s)), (7, 9));
        assert_eq!(unpack(pack((7, 9))), (7, 9));
        assert_eq!(as_u128(&s).load(portable_atomic::Ordering::SeqCst), pack((7, 9)));
        assert_eq!(s.key.load(crate::sync::Ordering::SeqCst), 7);
    }

    #[test]
    fn cas_swaps_both_words_or_reports_them() {
        let s = Slot::new();
        fill(&s, 1, 2);
        assert_eq!(dwcas(&s, (1, 3), (4, 5)), Err((1, 2)));
        assert_eq!(dwcas(&s, (0, 2), (4, 5)), Err((1, 2)));
        assert_eq!(dwcas(&s, (1, 2), (u64::MAX, 0)), Ok(()));
        assert_eq!((load_key(&s), load_value(&s)), (u64::MAX, 0));
    }

    #[test]
    fn this_cpu_has_a_native_16_byte_cas() {
        assert!(native(), "the test machine's CPU lacks a lock-free 16-byte CAS");
    }
}
