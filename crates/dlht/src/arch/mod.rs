//! Machine-level primitives: the 16-byte slot CAS and software prefetch.

mod dwcas;
mod slot;

pub use slot::Slot;

pub(crate) use dwcas::{dwcas, native as native_dwcas};

/// Hint the CPU to bring the cache line at `p` into all cache levels.
///
/// A pure hint: it never faults and has no architectural effect.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetcht0 is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
