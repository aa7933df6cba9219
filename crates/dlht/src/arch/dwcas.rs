//! The double-word (16-byte) compare-and-swap on a slot.
//!
//! On x86-64 this is `lock cmpxchg16b`, issued through inline asm on the two
//! `AtomicU64` words of a 16-byte-aligned [`Slot`]. Other threads read those
//! words with ordinary 8-byte atomic loads. Mixing access sizes is outside
//! Rust's abstract memory model, but the asm block is opaque to the compiler
//! and on x86-64 a locked 16-byte RMW is a single coherent write of the whole
//! line-resident pair, ordered like a SeqCst RMW; 8-byte loads see either
//! all of it or none of it per word (Intel SDM vol. 3, 8.1.1). This is the
//! same reasoning crossbeam's `AtomicCell` and the C++ DLHT rely on.
//!
//! Elsewhere (and under loom) a lock-striped fallback is used: a writer takes
//! a lock, compares both words and stores both; every load of a slot word
//! ([`load`]) takes the same lock. That reproduces exactly what the
//! protocol relies on from the hardware: each 8-byte load sees a 16-byte CAS
//! entirely or not at all, so a reader that saw the new value word and then
//! re-reads the key word sees the new key (`ops::scan` depends on this for
//! publications). A writer-only lock is not enough — loom showed a reader
//! seeing (new key, old value) or (old key, new value) break insert
//! uniqueness. The locks make non-x86-64 targets correct but slow; native
//! 128-bit atomics there (aarch64 LSE `casp`) are future work. Under loom the
//! locks also add synchronization the x86 path does not have, so the models
//! check the protocol's logic, not the orderings of slot-word loads (those
//! are acquire loads on a TSO machine).
//!
//! [`Slot`]: crate::raw::bucket::Slot

use crate::raw::bucket::Slot;
use crate::sync::AtomicU64;

/// Atomically: if `slot == (old_key, old_value)` set it to
/// `(new_key, new_value)` and return `Ok(())`; otherwise return the pair
/// found, `Err((key, value))`.
#[inline]
pub(crate) fn dwcas(slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
    imp::dwcas(slot, old, new)
}

/// Load one word of `slot` (its `key` or `value`). Acquire: pairs with the
/// Release stores and the CAS that wrote it.
#[inline(always)]
pub(crate) fn load(slot: &Slot, word: &AtomicU64) -> u64 {
    imp::load(slot, word)
}

#[cfg(all(target_arch = "x86_64", not(loom)))]
mod imp {
    use super::Slot;
    use crate::sync::{AtomicU64, Ordering};
    use core::arch::asm;

    #[inline(always)]
    pub(super) fn load(_slot: &Slot, word: &AtomicU64) -> u64 {
        word.load(Ordering::Acquire)
    }

    #[inline(always)]
    pub(super) fn dwcas(slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
        let ptr = slot as *const Slot as *mut u64;
        let (mut lo, mut hi) = old;
        let ok: u8;
        // SAFETY: `ptr` points to a live `Slot`, which is `repr(C, align(16))`
        // with the key at offset 0 and the value at offset 8, as cmpxchg16b
        // requires. Both words are `AtomicU64`, so shared mutation through a
        // `&Slot` is allowed (interior mutability). rbx is reserved by LLVM,
        // so the new low word is swapped in and out of it around the
        // instruction. Every x86-64 CPU that runs this crate's tests has
        // CX16 (checked once in `Index::new` via `is_x86_feature_detected!`).
        unsafe {
            asm!(
                "xchg {nlo}, rbx",
                "lock cmpxchg16b xmmword ptr [{p}]",
                "sete {ok}",
                "mov rbx, {nlo}",
                p = in(reg) ptr,
                nlo = inout(reg) new.0 => _,
                ok = out(reg_byte) ok,
                in("rcx") new.1,
                inout("rax") lo,
                inout("rdx") hi,
                options(nostack),
            );
        }
        if ok != 0 {
            Ok(())
        } else {
            Err((lo, hi))
        }
    }
}

#[cfg(any(not(target_arch = "x86_64"), loom))]
mod imp {
    use super::Slot;
    use crate::sync::Ordering;

    #[cfg(not(loom))]
    fn lock_for(slot: &Slot) -> std::sync::MutexGuard<'static, ()> {
        use std::sync::Mutex;
        static STRIPES: [Mutex<()>; 64] = [const { Mutex::new(()) }; 64];
        let i = (slot as *const Slot as usize >> 4) % STRIPES.len();
        STRIPES[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(loom)]
    fn lock_for(_slot: &Slot) -> loom::sync::MutexGuard<'static, ()> {
        loom::lazy_static! {
            static ref LOCK: loom::sync::Mutex<()> = loom::sync::Mutex::new(());
        }
        LOCK.lock().unwrap()
    }

    pub(super) fn load(slot: &Slot, word: &crate::sync::AtomicU64) -> u64 {
        let _guard = lock_for(slot);
        word.load(Ordering::SeqCst)
    }

    pub(super) fn dwcas(slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
        let _guard = lock_for(slot);
        // SeqCst: the fallback must be at least as strong as a locked RMW.
        let cur = (slot.key.load(Ordering::SeqCst), slot.value.load(Ordering::SeqCst));
        if cur != old {
            return Err(cur);
        }
        slot.value.store(new.1, Ordering::SeqCst);
        slot.key.store(new.0, Ordering::SeqCst);
        Ok(())
    }
}
