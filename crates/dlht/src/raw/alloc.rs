//! Zeroed, cache-line-aligned arrays for the index, on huge pages when large.
//!
//! Large arrays are mapped with `mmap` and advised `MADV_HUGEPAGE`
//! (transparent huge pages in `madvise` mode back them with 2 MiB pages,
//! which halves TLB misses on random access). Small arrays come from the
//! global allocator. Zeroed memory is a valid empty bin / link bucket: every
//! field is an atomic integer for which all-zero is a valid value.
//! Under loom the arrays are built element by element, as loom requires.

use crate::error::Error;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// Arrays at least this large are mmapped on huge pages.
#[cfg(not(loom))]
const HUGE_THRESHOLD: usize = 2 << 20;
/// Arrays at least this large are mmapped (below the huge-page sizes, on
/// 4 KiB pages): the kernel hands out zero pages on first touch, where the
/// heap would zero a reserve up front (a `memset` that dominated small
/// resizes), and an unmapped index gives its memory back, where the heap
/// kept the indexes a growing map left behind (a map grown to 4096 keys
/// held 69 bytes per key, 38 once they were unmapped).
#[cfg(not(loom))]
const MMAP_THRESHOLD: usize = 64 << 10;
/// Reserve-only arrays (link buckets) get huge pages only from this size
/// on. A map uses about a twentieth of its link reserve (one bucket per
/// seven bins at two keys per bin, of a reserve of three per bin), so a
/// smaller reserve would fault a 2 MiB page for a few hundred KiB of links
/// (a 2^16-key map took 4 MiB for a 2 MiB index).
#[cfg(not(loom))]
const RESERVE_HUGE_THRESHOLD: usize = 64 << 20;
#[cfg(not(loom))]
const HUGE_PAGE: usize = 2 << 20;
/// A base page.
#[cfg(not(loom))]
const SMALL_PAGE: usize = 4096;

/// A fixed-size zero-initialized array of `T`, owned.
pub struct ZeroedArray<T> {
    ptr: NonNull<T>,
    len: usize,
    /// The whole mapping `(base, bytes)`, or `(0, 0)` for a heap allocation.
    #[cfg_attr(loom, allow(dead_code))]
    mapping: (usize, usize),
    _owns: PhantomData<T>,
}

// SAFETY: ZeroedArray owns its elements like a Box<[T]>; T's own Send/Sync
// decide (the index only stores atomics).
unsafe impl<T: Send> Send for ZeroedArray<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for ZeroedArray<T> {}

impl<T> ZeroedArray<T> {
    /// Allocate `len` zeroed elements. `reserve_only` maps the range without
    /// reserving swap (MAP_NORESERVE): for arrays sized for the worst case
    /// that are touched only as far as they are used.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T`.
    #[cfg(not(loom))]
    pub unsafe fn new_zeroed(len: usize, reserve_only: bool) -> Result<Self, Error> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or(Error::CapacityOverflow)?;
        let align = align_of::<T>().max(64);
        if bytes < MMAP_THRESHOLD || cfg!(not(target_os = "linux")) {
            let layout = std::alloc::Layout::from_size_align(bytes.max(align), align)
                .map_err(|_| Error::CapacityOverflow)?;
            // SAFETY: the layout has non-zero size.
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            let ptr = NonNull::new(p as *mut T).ok_or(Error::AllocFailed { bytes })?;
            return Ok(ZeroedArray { ptr, len, mapping: (0, 0), _owns: PhantomData });
        }
        // Huge pages only pay off for large arrays; a smaller array, and a
        // reserve below 64 MiB, gets 4 KiB pages (a first touch then zeroes
        // 4 KiB, not 2 MiB).
        let huge = bytes >= if reserve_only { RESERVE_HUGE_THRESHOLD } else { HUGE_THRESHOLD };
        let page = if huge { HUGE_PAGE } else { SMALL_PAGE };
        let spare = if huge { 1 } else { 0 };
        let mapped = bytes.div_ceil(page).checked_add(spare).ok_or(Error::CapacityOverflow)? * page;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if reserve_only {
            flags |= libc::MAP_NORESERVE;
        }
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; failure is reported as MAP_FAILED.
        let base = unsafe {
            libc::mmap(core::ptr::null_mut(), mapped, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0)
        };
        if base == libc::MAP_FAILED {
            return Err(Error::AllocFailed { bytes });
        }
        // Align the start to a huge page so the kernel can back it with 2 MiB
        // pages; the spare page mapped above makes room for that.
        let start = (base as usize).next_multiple_of(page);
        #[cfg(target_os = "linux")]
        if huge {
            // SAFETY: [start, start + bytes) lies inside the fresh mapping.
            // madvise is advice: failure (THP off) is harmless, so ignored.
            unsafe {
                libc::madvise(
                    start as *mut libc::c_void,
                    mapped - (start - base as usize),
                    libc::MADV_HUGEPAGE,
                );
            }
        }
        Ok(ZeroedArray {
            // SAFETY: start is non-null, inside the mapping.
            ptr: unsafe { NonNull::new_unchecked(start as *mut T) },
            len,
            mapping: (base as usize, mapped),
            _owns: PhantomData,
        })
    }

    /// `len` elements in `bytes` of `file` from `offset` (page-aligned),
    /// mapped shared: the array is the file's contents, and what is stored
    /// in it outlives the process. Unmapped on drop.
    ///
    /// # Safety
    /// Any bytes the file holds must be a valid `T` (the index's buckets
    /// are atomics only), and the file must be at least `offset + len ·
    /// size_of::<T>()` bytes long (a shorter file faults on access).
    #[cfg(not(loom))]
    pub unsafe fn map_file(
        file: &std::fs::File,
        offset: usize,
        len: usize,
        reserve_only: bool,
        small_pages: bool,
    ) -> Result<Self, Error> {
        use crate::persist::files::Pages;
        let bytes = len.checked_mul(size_of::<T>()).ok_or(Error::CapacityOverflow)?;
        // Huge pages as for an anonymous array (see `new_zeroed`), where
        // the file system can give them: the offset is 2 MiB-aligned.
        // Unless the map syncs per call (`small_pages`: see `Pages`).
        let huge = bytes >= if reserve_only { RESERVE_HUGE_THRESHOLD } else { HUGE_THRESHOLD };
        let pages = match (small_pages, huge) {
            (true, _) => Pages::Small,
            (false, true) => Pages::Huge,
            (false, false) => Pages::Default,
        };
        let align = if offset % HUGE_PAGE == 0 { HUGE_PAGE } else { SMALL_PAGE };
        let m = crate::persist::files::Mapping::new_aligned(file, offset, bytes.max(1), align, pages)?;
        let (base, mapped) = m.into_raw();
        Ok(ZeroedArray {
            // SAFETY: mmap returned a non-null, page-aligned address (at
            // least T's alignment: the buckets ask for 64).
            ptr: unsafe { NonNull::new_unchecked(base as *mut T) },
            len,
            mapping: (base as usize, mapped),
            _owns: PhantomData,
        })
    }

    /// Write a file-mapped array's dirty pages to its file and wait
    /// (msync); nothing for other arrays.
    #[cfg(not(loom))]
    pub fn sync(&self) -> Result<(), Error> {
        let (base, mapped) = self.mapping;
        if mapped == 0 {
            return Ok(());
        }
        // SAFETY: exactly this array's live mapping.
        if unsafe { libc::msync(base as *mut libc::c_void, mapped, libc::MS_SYNC) } != 0 {
            return Err(Error::Io {
                what: "syncing an index file",
                kind: std::io::Error::last_os_error().kind(),
            });
        }
        crate::persist::mirror::msynced(base as *const u8, mapped);
        Ok(())
    }

    /// Loom build: every element constructed by `Default`.
    ///
    /// # Safety
    /// As for the real build: all-zero must be a valid `T`.
    #[cfg(loom)]
    pub unsafe fn new_zeroed(len: usize, _reserve_only: bool) -> Result<Self, Error>
    where
        T: Default,
    {
        let v: Vec<T> = (0..len).map(|_| T::default()).collect();
        let b = Box::into_raw(v.into_boxed_slice());
        Ok(ZeroedArray {
            // SAFETY: Box pointers are non-null.
            ptr: unsafe { NonNull::new_unchecked(b as *mut T) },
            len,
            mapping: (0, 0),
            _owns: PhantomData,
        })
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the array has no element (for users of `internals`).
    #[cfg(feature = "internals")]
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element at `i`, without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        // SAFETY: the caller keeps i in bounds; the memory is initialized.
        unsafe { &*self.ptr.as_ptr().add(i) }
    }

    /// Raw pointer to element `i` (for prefetching).
    #[inline(always)]
    pub fn ptr_at(&self, i: usize) -> *const T {
        self.ptr.as_ptr().wrapping_add(i)
    }

    /// Fault in, writable, the pages holding elements `range` of a mapped
    /// array (`MADV_POPULATE_WRITE`, Linux 5.14+), without changing their
    /// contents: other threads may use them meanwhile. A first touch can
    /// take milliseconds (a 2 MiB page the hypervisor has never backed took
    /// 4.5 ms on the development VM), so a resize faults the pages a
    /// transfer is about to write before it claims any bin there, and
    /// operations waiting on a bin in transfer never wait for a fault.
    /// Advice: nothing on other systems, on older kernels (EINVAL, the
    /// transfer then faults as before) or for heap arrays.
    pub fn prefault(&self, range: core::ops::Range<usize>) {
        #[cfg(all(target_os = "linux", not(loom)))]
        if self.mapping.1 != 0 && range.start < range.end && range.end <= self.len {
            let start = (self.ptr_at(range.start) as usize) & !(SMALL_PAGE - 1);
            let end = self.ptr_at(range.end) as usize;
            // SAFETY: [start, end) lies inside this array's live mapping
            // (the start rounded down to its page, which the mapping holds);
            // MADV_POPULATE_WRITE only faults pages in, as a write would,
            // and changes no byte.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE);
            }
        }
        #[cfg(not(all(target_os = "linux", not(loom))))]
        let _ = range;
    }
}

impl<T> Drop for ZeroedArray<T> {
    fn drop(&mut self) {
        #[cfg(loom)]
        {
            // SAFETY: built from a boxed slice of exactly len elements.
            drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
        }
        #[cfg(not(loom))]
        {
            // Elements are atomics: no drop glue to run.
            let bytes = self.len * size_of::<T>();
            // Debug builds poison freed heap arrays so that a thread still
            // reading a freed index (hazard 4) sees garbage headers (every
            // bin state 0b11, every slot Shadow) and trips an assertion,
            // instead of reading plausible stale data. Mapped arrays are
            // unmapped below, so a late reader faults anyway.
            #[cfg(debug_assertions)]
            if self.mapping.1 == 0 {
                // SAFETY: we own `bytes` initialized bytes at ptr; nobody may
                // read them any more (that is what the poison checks).
                unsafe { core::ptr::write_bytes(self.ptr.as_ptr() as *mut u8, 0xFF, bytes) };
            }
            let (base, mapped) = self.mapping;
            if mapped == 0 {
                let align = align_of::<T>().max(64);
                // SAFETY: allocated in new_zeroed with exactly this layout.
                unsafe {
                    std::alloc::dealloc(
                        self.ptr.as_ptr() as *mut u8,
                        std::alloc::Layout::from_size_align_unchecked(bytes.max(align), align),
                    )
                };
            } else {
                // SAFETY: (base, mapped) is exactly the mapping made in
                // new_zeroed, unmapped once.
                unsafe {
                    libc::munmap(base as *mut libc::c_void, mapped);
                }
            }
        }
    }
}
