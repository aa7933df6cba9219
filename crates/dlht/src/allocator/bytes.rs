//! A map from byte strings to byte strings with the paper's allocator-mode
//! slot layout (§3.4.1): a key of at most 8 bytes is the slot's key word
//! (xor its namespace's mix) and its length is the value word's 4-bit
//! shape, so a lookup decides from the slot alone and hands back the
//! value's address without reading it; a longer key is an 8-byte
//! signature in the slot, and key and value share one allocation.
//!
//! An allocation (a *blob*) is a 12-byte header with the two lengths and
//! the entry's stamp, then the key's bytes (longer keys only), then the
//! value's.

use super::entry::{Element, Fresh, HeapRef, Shape, ValueWord};
use super::pointers::{PointerIndex, PointerIter};
use super::{namespace_id, namespace_mix, prefetch_lines, Access, Guard, PASS};
use crate::compute::{self, Computed, Op};
use crate::driver::or_panic;
use crate::error::Error;
use crate::hash::DefaultHashBuilder;
use crate::persist::hasher::FileHasher;
use crate::plant::{planted, Plant};
use core::alloc::Layout;
use core::fmt;
use core::hash::BuildHasher;
use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU32;

/// A concurrent map from byte strings to byte strings (the paper's
/// allocator mode with its slot layout): keys of at most 8 bytes live in
/// the index's slots, so a [`get`](Self::get) of one costs one memory
/// access and returns a [`ValueRef`] — the value's address — without
/// reading the value; longer keys are found by an 8-byte signature and
/// compared in their allocation. Values are immutable once inserted and
/// stay readable while the [`Guard`] they were read under lives, even if
/// removed meanwhile.
///
/// Keys and values up to `u32::MAX` bytes; longer ones are refused with
/// [`Error::TooLong`], as allocation failure is with
/// [`Error::AllocFailed`] — the map unchanged either way. Keys live in up
/// to [`NAMESPACES`](crate::NAMESPACES) namespaces ([`namespace`](Self::namespace)).
///
/// ```
/// use dlht::ByteMap;
///
/// let m = ByteMap::new();
/// let g = m.guard();
/// m.insert(b"user:1", b"ada", &g).unwrap().unwrap();
/// m.insert(b"a key longer than eight bytes", b"", &g).unwrap().unwrap();
/// let v = m.get(b"user:1", &g).unwrap();
/// assert_eq!(m.remove(b"user:1", &g).as_deref(), Some(&b"ada"[..]));
/// assert_eq!(&*v, b"ada"); // still readable: `g` holds it
/// assert!(m.get(b"user:1", &g).is_none());
/// assert_eq!(m.len(), 1);
/// ```
pub struct ByteMap<S = DefaultHashBuilder> {
    /// Inline key or signature → blob. Hashed with a keyed hash of its own
    /// (a fresh seed per map), whatever `S` is: an inline key's word is
    /// its bytes, which a client chooses, and an unkeyed mix of them (the
    /// allocator map's, whose key words are already keyed hashes) can be
    /// inverted to crowd keys into one bin (`tests/flood.rs`).
    pub(super) index: Box<PointerIndex<Blob, FileHasher>>,
    pub(super) hasher: S,
    /// A persistent map's background reclamation of its heap (None in
    /// memory): stopped and joined on drop, before the index goes.
    pub(super) reclaimer: Option<super::background::Reclaimer>,
}

/// The keys of one namespace of a [`ByteMap`] (from
/// [`ByteMap::namespace`]); equal keys in different namespaces are
/// different keys.
///
/// ```
/// let m = dlht::ByteMap::new();
/// let (users, groups) = (m.namespace(1).unwrap(), m.namespace(2).unwrap());
/// let g = m.guard();
/// users.insert(b"7", b"ada", &g).unwrap().unwrap();
/// groups.insert(b"7", b"admins", &g).unwrap().unwrap();
/// assert_eq!(users.get(b"7", &g).as_deref(), Some(&b"ada"[..]));
/// assert_eq!(groups.get(b"7", &g).as_deref(), Some(&b"admins"[..]));
/// assert!(m.get(b"7", &g).is_none()); // namespace 0
/// ```
pub struct ByteNamespace<'m, S = DefaultHashBuilder> {
    pub(super) map: &'m ByteMap<S>,
    ns: u16,
}

impl<S> Clone for ByteNamespace<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for ByteNamespace<'_, S> {}

/// A value of a [`ByteMap`]: its address, valid while the guard it was
/// read under lives. Dereferences to the value's bytes (reading them is
/// the first touch of the allocation for a key of at most 8 bytes).
#[derive(Clone, Copy)]
pub struct ValueRef<'g> {
    blob: NonNull<Blob>,
    _g: PhantomData<&'g [u8]>,
}

// SAFETY: a shared view of immutable bytes, like `&'g [u8]`, which is Send
// and Sync; the guard keeping them allocated outlives 'g.
unsafe impl Send for ValueRef<'_> {}
// SAFETY: as above.
unsafe impl Sync for ValueRef<'_> {}

impl<'g> ValueRef<'g> {
    /// The value's bytes.
    #[inline]
    pub fn as_bytes(&self) -> &'g [u8] {
        // SAFETY: a published blob, freed only after the guard of 'g.
        unsafe { Blob::value(self.blob.as_ptr()) }
    }

    /// The entry's stamp: a word of this stored value's own that the map
    /// never reads and starts at 0, which any thread may change through a
    /// shared reference — where a cache keeps recency without a new
    /// version of the value (dlht-server's CLOCK reference bit). A value
    /// that replaces this one has a stamp of its own, at 0.
    ///
    /// ```
    /// use std::sync::atomic::Ordering;
    ///
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// m.insert(b"k", b"v", &g).unwrap().unwrap();
    /// let v = m.get(b"k", &g).unwrap();
    /// assert_eq!(v.stamp().load(Ordering::Relaxed), 0);
    /// v.stamp().store(7, Ordering::Relaxed); // "used lately"
    /// assert_eq!(m.get(b"k", &g).unwrap().stamp().load(Ordering::Relaxed), 7);
    /// ```
    #[inline]
    pub fn stamp(&self) -> &'g AtomicU32 {
        // SAFETY: a published blob, freed only after the guard of 'g; the
        // stamp is the header's one mutable field, an atomic.
        unsafe { &(*self.blob.as_ptr()).stamp }
    }

    /// True if both refer to the same stored value (not merely equal
    /// bytes): what [`ByteMap::compare_and_replace`] compares.
    pub fn ptr_eq(a: ValueRef<'_>, b: ValueRef<'_>) -> bool {
        a.blob == b.blob
    }
}

impl Deref for ValueRef<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for ValueRef<'_> {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_bytes(), f)
    }
}

/// A key yielded by [`ByteMap::iter`]: rebuilt from the slot (at most 8
/// bytes) or borrowed from its allocation. Dereferences to the bytes.
#[derive(Clone, Copy)]
pub struct KeyBytes<'g> {
    inline: [u8; Shape::INLINE_MAX],
    len: u8,
    stored: Option<&'g [u8]>,
}

impl Deref for KeyBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.stored.unwrap_or(&self.inline[..self.len as usize])
    }
}

impl fmt::Debug for KeyBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// The header of a blob; the key's bytes (entries only) and the value's
/// follow it. The lengths never change; the stamp is the user's
/// ([`ValueRef::stamp`]). 12 bytes: with the allocator's 16-byte rounding
/// the stamp costs an entry 4 bytes or nothing.
#[repr(C)]
pub(crate) struct Blob {
    key_len: u32,
    value_len: u32,
    stamp: AtomicU32,
}

impl Blob {
    const HEADER: usize = size_of::<Blob>();

    /// The layout of a blob of these lengths (each at most `u32::MAX`, so
    /// the sum cannot overflow on 64-bit targets).
    fn layout(key_len: usize, value_len: usize) -> Result<Layout, Error> {
        let size = Self::HEADER
            .checked_add(key_len)
            .and_then(|s| s.checked_add(value_len))
            .ok_or(Error::TooLong { bytes: key_len.max(value_len) })?;
        Layout::from_size_align(size, align_of::<Blob>()).map_err(|_| Error::AllocFailed { bytes: size })
    }

    /// A fresh blob of `key` (empty for an inline key) and `value`, in
    /// `heap` (a persistent map's: sealed for `kw`, see
    /// `ValueWord::sealed_key`) or the global allocator.
    #[cfg_attr(loom, allow(unused_variables))] // (loom builds open no heap)
    fn try_new(key: &[u8], value: &[u8], heap: HeapRef, kw: u64) -> Result<NonNull<Blob>, Error> {
        let len = |b: &[u8]| u32::try_from(b.len()).map_err(|_| Error::TooLong { bytes: b.len() });
        let header = Blob { key_len: len(key)?, value_len: len(value)?, stamp: AtomicU32::new(0) };
        let layout = Self::layout(key.len(), value.len())?;
        let p = match heap {
            Some(h) => h.alloc(layout.size())? as *mut u8,
            // SAFETY: the layout holds at least the header, so is not zero-sized.
            None => unsafe { std::alloc::alloc(layout) },
        };
        let p = NonNull::new(p).ok_or(Error::AllocFailed { bytes: layout.size() })?;
        // SAFETY: fresh memory of `layout`: the header, then exactly the
        // key's and the value's bytes.
        unsafe {
            p.as_ptr().cast::<Blob>().write(header);
            let k = p.as_ptr().add(Self::HEADER);
            k.copy_from_nonoverlapping(key.as_ptr(), key.len());
            k.add(key.len()).copy_from_nonoverlapping(value.as_ptr(), value.len());
        }
        #[cfg(not(loom))]
        if let Some(h) = heap {
            let addr = p.as_ptr() as usize;
            // SAFETY: just written whole.
            h.seal(addr, kw, unsafe { Blob::checksum(kw, addr) });
            crate::persist::crash::at(crate::persist::crash::CrashPoint::HeapFilled);
        }
        Ok(p.cast())
    }

    /// The stored key's bytes (empty for an inline key).
    ///
    /// # Safety
    /// `p` is a published blob, not freed during `'g`.
    #[inline(always)]
    unsafe fn key<'g>(p: *const Blob) -> &'g [u8] {
        // SAFETY: the caller's contract; the header says how many bytes.
        unsafe { core::slice::from_raw_parts(p.cast::<u8>().add(Self::HEADER), (*p).key_len as usize) }
    }

    /// The value's bytes.
    ///
    /// # Safety
    /// As for [`key`](Self::key).
    #[inline(always)]
    unsafe fn value<'g>(p: *const Blob) -> &'g [u8] {
        // SAFETY: the caller's contract; the header says where and how many.
        unsafe {
            let (key_len, value_len) = ((*p).key_len, (*p).value_len);
            core::slice::from_raw_parts(
                p.cast::<u8>().add(Self::HEADER + key_len as usize),
                value_len as usize,
            )
        }
    }
}

impl Element for Blob {
    unsafe fn free(addr: usize) {
        let p = addr as *mut Blob;
        // SAFETY: a blob made by `try_new` (the caller's contract), whose
        // header gives back the layout it was allocated with.
        unsafe {
            let (key_len, value_len) = ((*p).key_len, (*p).value_len);
            let layout = Blob::layout(key_len as usize, value_len as usize)
                .expect("dlht invariant: the layout it was made with");
            std::alloc::dealloc(p.cast(), layout);
        }
    }

    unsafe fn bytes(addr: usize) -> usize {
        // SAFETY: a live blob (the caller's contract); its header is
        // immutable.
        let b = unsafe { &*(addr as *const Blob) };
        Blob::layout(b.key_len as usize, b.value_len as usize).map_or(0, |l| l.size())
    }

    unsafe fn checksum(kw: u64, addr: usize) -> u32 {
        // SAFETY: the caller's contract: a blob lying whole in readable
        // memory. Its lengths, key and value, not the stamp (the user's,
        // changed in place).
        unsafe {
            let (b, h) = (addr as *const u8, &*(addr as *const Blob));
            let rest = h.key_len as usize + h.value_len as usize;
            super::entry::checksum_of(
                kw,
                &[
                    core::slice::from_raw_parts(b, core::mem::offset_of!(Blob, stamp)),
                    core::slice::from_raw_parts(b.add(Self::HEADER), rest),
                ],
            )
        }
    }
}

/// How to recognise a key among the elements of its key word.
#[derive(Clone, Copy)]
enum Probe<'k> {
    /// At most 8 bytes: the key word, the namespace and this length say it.
    Inline(u8),
    /// Longer: compared with the stored key.
    Stored(&'k [u8]),
}

/// The key word of an inline key, before the namespace mix: its bytes,
/// little-endian, zero-padded (the length tells "a" from "a\0").
#[inline(always)]
fn inline_word(key: &[u8]) -> u64 {
    let mut b = [0u8; Shape::INLINE_MAX];
    b[..key.len()].copy_from_slice(key);
    u64::from_le_bytes(b)
}

impl<'g> ValueRef<'g> {
    /// The value of element `e`.
    ///
    /// # Safety
    /// `e` was read from a byte map's index under a guard that lives for `'g`.
    #[inline(always)]
    pub(super) unsafe fn of(e: ValueWord) -> ValueRef<'g> {
        let blob = NonNull::new(e.addr() as *mut Blob).expect("dlht invariant: elements are allocations");
        ValueRef { blob, _g: PhantomData }
    }

    /// Prefetch every line of the value (up to 4 KiB). Reading its length
    /// waits for the blob's first line: call it once that is on its way.
    #[inline(always)]
    pub(super) fn prefetch(&self) {
        let b = self.as_bytes();
        prefetch_lines(b.as_ptr() as usize, b.len());
    }
}

/// The value of each element, if any.
///
/// # Safety
/// As for [`ValueRef::of`].
#[inline(always)]
unsafe fn value_of<'g>(e: Option<ValueWord>) -> Option<ValueRef<'g>> {
    // SAFETY: the caller's contract.
    e.map(|e| unsafe { ValueRef::of(e) })
}

impl ByteMap<DefaultHashBuilder> {
    /// An empty map.
    pub fn new() -> Self {
        Self::with_hasher(DefaultHashBuilder::default())
    }

    /// An empty map sized for `n` keys. Panics if the index cannot be
    /// allocated; see [`try_with_capacity`](Self::try_with_capacity).
    pub fn with_capacity(n: usize) -> Self {
        or_panic(Self::try_with_capacity(n))
    }

    /// An empty map sized for `n` keys, or why it cannot be made.
    pub fn try_with_capacity(n: usize) -> Result<Self, Error> {
        Self::try_with_capacity_and_hasher(n, DefaultHashBuilder::default())
    }
}

impl Default for ByteMap<DefaultHashBuilder> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Drop for ByteMap<S> {
    fn drop(&mut self) {
        // A persistent map: reclamation stopped, then the heap closed while
        // the directory is still locked (the index closes after this).
        self.reclaimer.take();
        if let Some(h) = self.index.heap {
            h.close();
        }
    }
}

impl<S: BuildHasher> ByteMap<S> {
    /// An empty map hashing keys longer than 8 bytes with `hasher`.
    pub fn with_hasher(hasher: S) -> Self {
        or_panic(Self::try_with_capacity_and_hasher(0, hasher))
    }

    /// An empty map for `n` keys using `hasher`, or why it cannot be made.
    pub fn try_with_capacity_and_hasher(n: usize, hasher: S) -> Result<Self, Error> {
        let index = Box::new(PointerIndex::try_with_capacity(n, FileHasher::random())?);
        Ok(ByteMap { index, hasher, reclaimer: None })
    }

    /// Pin this thread: values read under the guard stay valid while it
    /// lives. One guard may serve many operations and many maps.
    #[inline]
    pub fn guard(&self) -> Guard {
        Guard::pin()
    }

    /// A guard that may move between threads (see
    /// [`AllocMap::owned_guard`](crate::AllocMap::owned_guard)).
    pub fn owned_guard(&self) -> crate::OwnedGuard {
        or_panic(Guard::owned())
    }

    /// Like [`owned_guard`](Self::owned_guard), with a refused barrier as
    /// an error.
    pub fn try_owned_guard(&self) -> Result<crate::OwnedGuard, Error> {
        Guard::owned()
    }

    /// The keys of namespace `ns` (`0..NAMESPACES`); namespace 0 is the
    /// map's own methods'.
    pub fn namespace(&self, ns: usize) -> Result<ByteNamespace<'_, S>, Error> {
        Ok(ByteNamespace { map: self, ns: namespace_id(ns)? })
    }

    // The map's own methods are namespace 0's, forwarded by hand, one line
    // each (as hashbrown's `HashSet` forwards to `HashMap`). Unlike `Map` and
    // `LocalMap`, whose requests share one definition (`map::requests`),
    // this map and AllocMap differ in every signature (byte slices and
    // `ValueRef` here, borrowed typed keys and `&V` there) and in every example,
    // so a shared macro would take each signature and doc as arguments and
    // only hide them from the source's reader.
    #[inline(always)]
    fn ns0(&self) -> ByteNamespace<'_, S> {
        ByteNamespace { map: self, ns: 0 }
    }

    /// The value of `key`, valid while `guard` lives. For a key of at
    /// most 8 bytes, found without touching the value's allocation.
    #[inline]
    pub fn get<'g>(&'g self, key: &[u8], guard: &'g Guard) -> Option<ValueRef<'g>> {
        self.ns0().get(key, guard)
    }

    /// True if `key` is present.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.ns0().contains_key(key)
    }

    /// Get many keys at once (paper §3.3): `out[i]` receives the value of
    /// `keys[i]`. The index lookups go through the prefetching pipeline;
    /// then what `access` says is prefetched together: the stored keys of
    /// longer keys, and each value's first line ([`Access::Key`]) or all
    /// its lines up to 4 KiB ([`Access::Read`]). Errors only if the lengths
    /// differ.
    ///
    /// ```
    /// use dlht::{Access, ByteMap};
    /// let m = ByteMap::new();
    /// let g = m.guard();
    /// m.insert(b"k", b"v", &g).unwrap().unwrap();
    /// let mut out = [None; 2];
    /// m.get_many(&[b"k", b"absent key"], &mut out, Access::Read, &g).unwrap();
    /// assert_eq!(out.map(|v| v.map(|v| v.to_vec())), [Some(b"v".to_vec()), None]);
    /// ```
    pub fn get_many<'g>(
        &'g self,
        keys: &[&[u8]],
        out: &mut [Option<ValueRef<'g>>],
        access: Access,
        guard: &'g Guard,
    ) -> Result<(), Error> {
        self.ns0().get_many(keys, out, access, guard)
    }

    /// Insert `key → value` if `key` is absent: `Ok(Ok(()))`; if present,
    /// nothing changes and `Ok(Err(current))` gives the value there.
    /// `Err` if the key or value is too long or memory is refused (the map
    /// unchanged).
    pub fn insert<'g>(
        &'g self,
        key: &[u8],
        value: &[u8],
        guard: &'g Guard,
    ) -> Result<Result<(), ValueRef<'g>>, Error> {
        self.ns0().insert(key, value, guard)
    }

    /// Insert or replace: the value replaced, if any.
    pub fn upsert<'g>(
        &'g self,
        key: &[u8],
        value: &[u8],
        guard: &'g Guard,
    ) -> Result<Option<ValueRef<'g>>, Error> {
        self.ns0().upsert(key, value, guard)
    }

    /// Replace the value of a present `key`: the old value; None if `key`
    /// is absent (nothing is inserted).
    pub fn put<'g>(
        &'g self,
        key: &[u8],
        value: &[u8],
        guard: &'g Guard,
    ) -> Result<Option<ValueRef<'g>>, Error> {
        self.ns0().put(key, value, guard)
    }

    /// Replace the value of `key` with `new` only if it is still `current`
    /// — the very value a get returned (compared by address, so an equal
    /// value stored meanwhile does not match): `Ok(Ok(old))`, or
    /// `Ok(Err(now))` with the value there now, if any.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// m.insert(b"n", b"1", &g).unwrap().unwrap();
    /// let cur = m.get(b"n", &g).unwrap();
    /// assert!(m.compare_and_replace(b"n", cur, b"2", &g).unwrap().is_ok());
    /// let now = m.compare_and_replace(b"n", cur, b"3", &g).unwrap().unwrap_err();
    /// assert_eq!(now.as_deref(), Some(&b"2"[..]));
    /// ```
    pub fn compare_and_replace<'g>(
        &'g self,
        key: &[u8],
        current: ValueRef<'_>,
        new: &[u8],
        guard: &'g Guard,
    ) -> Result<Result<ValueRef<'g>, Option<ValueRef<'g>>>, Error> {
        self.ns0().compare_and_replace(key, current, new, guard)
    }

    /// Remove `key`: its value, valid while `guard` lives.
    pub fn remove<'g>(&'g self, key: &[u8], guard: &'g Guard) -> Option<ValueRef<'g>> {
        self.ns0().remove(key, guard)
    }

    /// Remove `key` if `accept` accepts its value: the value removed, valid
    /// while `guard` lives, or None (absent, or declined). Lock-free: the
    /// entry is removed only if it is still the one `accept` judged; a
    /// value replaced meanwhile is judged again.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// m.insert(b"session", b"expired", &g).unwrap().unwrap();
    /// assert!(m.remove_if(b"session", |v| v == b"live", &g).is_none());
    /// assert_eq!(m.remove_if(b"session", |v| v == b"expired", &g).as_deref(), Some(&b"expired"[..]));
    /// ```
    pub fn remove_if<'g>(
        &'g self,
        key: &[u8],
        accept: impl FnMut(&[u8]) -> bool,
        guard: &'g Guard,
    ) -> Option<ValueRef<'g>> {
        self.ns0().remove_if(key, accept, guard)
    }

    /// Read-modify-write `key` whatever its state, as
    /// [`AllocMap::compute`](crate::AllocMap::compute): `f` sees the value
    /// (None if absent) and answers insert-or-replace with bytes
    /// ([`Op::Upsert`]), remove or keep; the answer is applied only to the
    /// state `f` judged, and `f` runs again if another thread changed the
    /// key meanwhile. `Err` if a key or value is too long or memory is
    /// refused (the map unchanged by the step that failed).
    ///
    /// Memcached's `append`, which stores nothing for an absent key:
    ///
    /// ```
    /// use dlht::{ByteMap, Op};
    /// let m = ByteMap::new();
    /// let g = m.guard();
    /// let append = |v: Option<&[u8]>| match v {
    ///     Some(v) => Op::Upsert([v, b" world"].concat()),
    ///     None => Op::Keep,
    /// };
    /// assert!(m.compute(b"k", append, &g).unwrap().value().is_none());
    /// m.insert(b"k", b"hello", &g).unwrap().unwrap();
    /// let now = m.compute(b"k", append, &g).unwrap().value().unwrap();
    /// assert_eq!(&*now, b"hello world");
    /// ```
    pub fn compute<'g, B: AsRef<[u8]>>(
        &'g self,
        key: &[u8],
        f: impl FnMut(Option<&[u8]>) -> Op<B>,
        guard: &'g Guard,
    ) -> Result<Computed<ValueRef<'g>>, Error> {
        self.ns0().compute(key, f, guard)
    }

    /// Replace the value `v` of a present `key` with `f(v)`, atomically:
    /// the new value, or None if `key` is absent. `f` runs again on the
    /// value there if another thread changed the key meanwhile.
    ///
    /// Memcached's `incr`, on a decimal counter:
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// m.insert(b"hits", b"41", &g).unwrap().unwrap();
    /// let incr = |v: &[u8]| {
    ///     let n: u64 = std::str::from_utf8(v).unwrap().parse().unwrap();
    ///     (n + 1).to_string()
    /// };
    /// assert_eq!(m.update(b"hits", incr, &g).unwrap().as_deref(), Some(&b"42"[..]));
    /// assert!(m.update(b"misses", incr, &g).unwrap().is_none());
    /// ```
    pub fn update<'g, B: AsRef<[u8]>>(
        &'g self,
        key: &[u8],
        f: impl FnMut(&[u8]) -> B,
        guard: &'g Guard,
    ) -> Result<Option<ValueRef<'g>>, Error> {
        self.ns0().update(key, f, guard)
    }

    /// The value of `key`, inserting `make()` first if it is absent. `make`
    /// runs at most once, only if the key was absent when looked up; if
    /// another thread's insert wins, its value is returned.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// assert_eq!(&*m.get_or_insert_with(b"k", || b"first".to_vec(), &g).unwrap(), b"first");
    /// assert_eq!(&*m.get_or_insert_with(b"k", || b"second", &g).unwrap(), b"first");
    /// ```
    pub fn get_or_insert_with<'g, B: AsRef<[u8]>>(
        &'g self,
        key: &[u8],
        make: impl FnOnce() -> B,
        guard: &'g Guard,
    ) -> Result<ValueRef<'g>, Error> {
        self.ns0().get_or_insert_with(key, make, guard)
    }

    /// Keep only the entries (of every namespace) that `keep(namespace,
    /// key, value)` accepts, as [`AllocMap::retain`](crate::AllocMap::retain)
    /// does: weakly consistent, each rejected entry removed only if it is
    /// still the value judged. Returns how many it removed.
    ///
    /// ```
    /// let m: dlht::ByteMap = [("a", "1"), ("b", "22"), ("c", "333")].into_iter().collect();
    /// let g = m.guard();
    /// assert_eq!(m.retain(|_, _, v| v.len() > 1, &g), 1);
    /// assert!(m.get(b"a", &g).is_none());
    /// ```
    pub fn retain(&self, mut keep: impl FnMut(usize, &[u8], &[u8]) -> bool, guard: &Guard) -> usize {
        let mut removed = 0;
        for (ns, k, v) in self.iter(guard) {
            if !keep(ns, &k, &v) {
                let view = ByteNamespace { map: self, ns: ns as u16 };
                if view.remove_if(&k, |now| !keep(ns, &k, now), guard).is_some() {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Remove every entry of every namespace (memcached's `flush_all`):
    /// [`retain`](Self::retain) keeping nothing. Returns how many it
    /// removed; their memory leaves [`memory`](Self::memory) at once.
    ///
    /// ```
    /// let m: dlht::ByteMap = [("a", "1"), ("b", "2")].into_iter().collect();
    /// assert_eq!(m.clear(&m.guard()), 2);
    /// assert!(m.is_empty());
    /// ```
    pub fn clear(&self, guard: &Guard) -> usize {
        self.retain(|_, _, _| false, guard)
    }

    /// Bytes in use, without a scan: the index's and the entries'
    /// allocations (see [`Memory`](crate::Memory)).
    pub fn memory(&self) -> crate::Memory {
        self.index.memory()
    }

    /// Number of keys, in all namespaces (as exact as [`Map::len`](crate::Map::len)).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True if the map holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys the index holds before it must grow.
    pub fn capacity(&self) -> usize {
        self.index.capacity()
    }

    /// Grow ahead of a known load so that `additional` more keys fit
    /// without a resize (see [`Map::reserve`](crate::Map::reserve)). Panics
    /// if the index cannot grow; see [`try_reserve`](Self::try_reserve).
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// m.reserve(100_000);
    /// assert!(m.capacity() >= 100_000);
    /// ```
    pub fn reserve(&self, additional: usize) {
        or_panic(self.try_reserve(additional))
    }

    /// Like [`reserve`](Self::reserve), with a failure to grow as an error;
    /// the map is unchanged then.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// assert!(m.try_reserve(usize::MAX).is_err());
    /// ```
    pub fn try_reserve(&self, additional: usize) -> Result<(), Error> {
        self.index.try_reserve(additional)
    }

    /// Shrink the index to the smallest that holds the map's keys (see
    /// [`Map::shrink_to_fit`](crate::Map::shrink_to_fit)); non-blocking
    /// like any resize. Keys and values stay where they are: only the index
    /// moves.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// for k in 0..100_000u64 {
    ///     m.insert(&k.to_le_bytes(), b"v", &g).unwrap();
    /// }
    /// let big = m.capacity();
    /// for k in 10..100_000u64 {
    ///     m.remove(&k.to_le_bytes(), &g);
    /// }
    /// m.shrink_to_fit();
    /// assert!(m.capacity() < big / 100);
    /// assert_eq!(m.get(&3u64.to_le_bytes(), &g).as_deref(), Some(&b"v"[..]));
    /// ```
    pub fn shrink_to_fit(&self) {
        self.shrink_to(0)
    }

    /// Shrink the index, keeping room for at least `min_capacity` keys (see
    /// [`Map::shrink_to`](crate::Map::shrink_to)).
    pub fn shrink_to(&self, min_capacity: usize) {
        self.index.shrink_to(min_capacity)
    }

    /// A snapshot of the index's shape and occupancy (scans the index; see
    /// [`Map::stats`](crate::Map::stats)); its memory counts the keys and
    /// values stored outside the index.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// m.insert(b"key", &[7; 100], &m.guard()).unwrap();
    /// let s = m.stats();
    /// assert_eq!(s.occupied_slots, 1);
    /// assert!(s.memory.value_bytes >= 100);
    /// ```
    pub fn stats(&self) -> crate::Stats {
        self.index.stats()
    }

    /// Start loading `key`'s bin into the cache (see
    /// [`Map::prefetch`](crate::Map::prefetch)).
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// m.prefetch(b"k");
    /// assert!(!m.contains_key(b"k"));
    /// ```
    #[inline]
    pub fn prefetch(&self, key: &[u8]) {
        self.ns0().prefetch(key)
    }

    /// A weakly consistent iterator over every namespace's entries, as
    /// `(namespace, key, value)`, valid while `guard` lives (see
    /// [`Iter`](crate::Iter) for what it guarantees).
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// m.insert(b"k", b"v", &g).unwrap().unwrap();
    /// m.namespace(3).unwrap().insert(b"a longer key", b"w", &g).unwrap().unwrap();
    /// let mut all: Vec<_> = m.iter(&g).map(|(ns, k, v)| (ns, k.to_vec(), v.to_vec())).collect();
    /// all.sort();
    /// assert_eq!(all, [(0, b"k".to_vec(), b"v".to_vec()), (3, b"a longer key".to_vec(), b"w".to_vec())]);
    /// ```
    pub fn iter<'g>(&'g self, guard: &'g Guard) -> ByteIter<'g> {
        ByteIter { inner: self.index.iter(guard) }
    }

    /// [`iter`](Self::iter) over part of the index: `count` of its bins
    /// from bin `start`, both taken modulo the number of bins (a power of
    /// two), wrapping past the last. A cache walks its CLOCK hand this way
    /// (`start` a counter it advances by `count`), or samples entries
    /// from a random bin. Every entry is in exactly one bin; a resize
    /// meanwhile can make consecutive calls skip or repeat some.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// for i in 0..100u32 {
    ///     m.insert(&i.to_le_bytes(), b"v", &g).unwrap().unwrap();
    /// }
    /// // A hand going once around: every entry once.
    /// let (mut hand, mut seen) = (12345usize, 0);
    /// while seen < 100 {
    ///     seen += m.iter_bins(hand, 4, &g).count();
    ///     hand = hand.wrapping_add(4);
    /// }
    /// assert_eq!(seen, 100);
    /// ```
    pub fn iter_bins<'g>(&'g self, start: usize, count: usize, guard: &'g Guard) -> ByteIter<'g> {
        ByteIter { inner: self.index.iter_bins(start, count, guard) }
    }

    /// The entries at one instant, even under concurrent updates (see
    /// [`AllocMap::snapshot`](crate::AllocMap::snapshot)), as
    /// `(namespace, key, value)`, readable while `guard` lives.
    ///
    /// ```
    /// let m = dlht::ByteMap::new();
    /// let g = m.guard();
    /// m.insert(b"k", b"v", &g).unwrap().unwrap();
    /// let all: Vec<_> = m.snapshot(&g).map(|(ns, k, v)| (ns, k.to_vec(), v.to_vec())).collect();
    /// assert_eq!(all, [(0, b"k".to_vec(), b"v".to_vec())]);
    /// ```
    pub fn snapshot<'g>(&'g self, guard: &'g Guard) -> ByteIter<'g> {
        ByteIter { inner: self.index.snapshot(guard) }
    }
}

impl<'m, S: BuildHasher> ByteNamespace<'m, S> {
    /// The namespace's id.
    pub fn id(&self) -> usize {
        self.ns as usize
    }

    /// The key word of `key` in this namespace, and how to recognise it.
    #[inline(always)]
    fn locate<'k>(&self, key: &'k [u8]) -> (u64, Probe<'k>) {
        let mix = namespace_mix(self.ns);
        if key.len() <= Shape::INLINE_MAX {
            (inline_word(key) ^ mix, Probe::Inline(key.len() as u8))
        } else {
            (self.map.hasher.hash_one(key) ^ mix, Probe::Stored(key))
        }
    }

    /// Whether an element of the index is the key `probe` describes, in
    /// this namespace (its key word already matched). The index calls it
    /// only on elements read under the caller's guard.
    #[inline(always)]
    fn is_mine<'k>(&self, probe: Probe<'k>) -> impl Fn(ValueWord) -> bool + 'k {
        let ns = self.ns;
        move |e| {
            e.namespace() == ns
                && match probe {
                    // Planted bug (scripts/planted-bugs.sh): ignore the length.
                    Probe::Inline(_) if planted(Plant::InlineAnyLength) => {
                        matches!(e.shape(), Shape::Inline(_))
                    }
                    Probe::Inline(len) => e.shape() == Shape::Inline(len),
                    Probe::Stored(key) => {
                        // SAFETY: read under a guard (the index's contract).
                        e.shape() == Shape::Entry && unsafe { Blob::key(e.addr() as *const Blob) } == key
                    }
                }
        }
    }

    /// The key word `key` is found under in the index.
    #[inline(always)]
    pub(super) fn key_word(&self, key: &[u8]) -> u64 {
        self.locate(key).0
    }

    /// A fresh blob for `key → value` in this namespace (key word `kw`).
    fn fresh(&self, kw: u64, probe: Probe<'_>, value: &[u8]) -> Result<Fresh<Blob>, Error> {
        let (shape, stored) = match probe {
            Probe::Inline(len) => (Shape::Inline(len), &[][..]),
            Probe::Stored(key) => (Shape::Entry, key),
        };
        let sealed = ValueWord::sealed_key_of(shape, self.ns, kw);
        let p = Blob::try_new(stored, value, self.map.index.heap, sealed)?;
        // SAFETY: just made, ours.
        unsafe { Fresh::new_in(shape, self.ns, p.as_ptr() as usize, self.map.index.heap) }
    }

    /// See [`ByteMap::prefetch`].
    #[inline]
    pub fn prefetch(&self, key: &[u8]) {
        self.map.index.prefetch(self.locate(key).0)
    }

    /// See [`ByteMap::get`].
    #[inline]
    pub fn get(&self, key: &[u8], guard: &'m Guard) -> Option<ValueRef<'m>> {
        let (kw, probe) = self.locate(key);
        // SAFETY: read under `guard`.
        unsafe { value_of(self.map.index.get(kw, &self.is_mine(probe), guard)) }
    }

    /// See [`ByteMap::contains_key`].
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key, &self.map.guard()).is_some()
    }

    /// See [`ByteMap::get_many`].
    pub fn get_many(
        &self,
        keys: &[&[u8]],
        out: &mut [Option<ValueRef<'m>>],
        access: Access,
        guard: &'m Guard,
    ) -> Result<(), Error> {
        if keys.len() != out.len() {
            return Err(Error::LengthMismatch { requests: keys.len(), responses: out.len() });
        }
        let mut kws = [0u64; PASS];
        let mut probes = [Probe::Inline(0); PASS];
        let mut words = [None; PASS];
        for (keys, out) in keys.chunks(PASS).zip(out.chunks_mut(PASS)) {
            let n = keys.len();
            for ((kw, p), k) in kws.iter_mut().zip(probes.iter_mut()).zip(keys) {
                (*kw, *p) = self.locate(k);
            }
            let verify = self.map.index.verifying();
            self.map.index.get_many(&kws[..n], &mut words[..n])?;
            // What the key comparison needs (a stored key, a list), and the
            // values' first lines if they will be read.
            for &w in words[..n].iter().flatten() {
                let w = ValueWord::from_bits(w);
                // (`try_shape`: a persistent map's word is checked only by
                // `find`, below; a prefetch of any address is harmless.)
                if access != Access::Locate || !matches!(w.try_shape(), Some(Shape::Inline(_))) {
                    prefetch_lines(w.addr(), 1);
                }
            }
            for (((o, w), &p), &kw) in out.iter_mut().zip(&words[..n]).zip(&probes[..n]).zip(&kws[..n]) {
                let e = w.and_then(|w| self.map.index.find(kw, w, verify, &self.is_mine(p), guard));
                // SAFETY: read under `guard`.
                *o = unsafe { value_of(e) };
                if let (Access::Read, Some(v)) = (access, o) {
                    // The header is in cache now: the rest of the value.
                    v.prefetch();
                }
            }
        }
        Ok(())
    }

    /// See [`ByteMap::insert`].
    pub fn insert(
        &self,
        key: &[u8],
        value: &[u8],
        guard: &'m Guard,
    ) -> Result<Result<(), ValueRef<'m>>, Error> {
        Ok(self.insert_blob(key, value, guard)?.map(|_| ()))
    }

    /// Insert `key → value` if `key` is absent: the value stored, or the
    /// one there.
    fn insert_blob(
        &self,
        key: &[u8],
        value: &[u8],
        guard: &'m Guard,
    ) -> Result<Result<ValueRef<'m>, ValueRef<'m>>, Error> {
        let (kw, probe) = self.locate(key);
        let fresh = self.fresh(kw, probe, value)?;
        // SAFETY: ours until published, then kept by `guard` (a remove
        // retires it; it is freed only after `guard`).
        let mine = unsafe { ValueRef::of(fresh.word) };
        Ok(
            match self
                .map
                .index
                .insert(kw, fresh.word, &self.is_mine(probe), guard, |_, cur| Ok(Some(cur)))?
            {
                None => {
                    fresh.publish();
                    Ok(mine)
                }
                // SAFETY: read under `guard`.
                Some(cur) => Err(unsafe { ValueRef::of(cur) }),
            },
        )
    }

    /// See [`ByteMap::upsert`].
    pub fn upsert(&self, key: &[u8], value: &[u8], guard: &'m Guard) -> Result<Option<ValueRef<'m>>, Error> {
        let (kw, probe) = self.locate(key);
        let fresh = self.fresh(kw, probe, value)?;
        let index = &self.map.index;
        let old = index.insert(kw, fresh.word, &self.is_mine(probe), guard, |w, old| {
            Ok(index.replace(kw, w, old, fresh.word, guard)?.then_some(old))
        })?;
        fresh.publish();
        // SAFETY: read under `guard`.
        Ok(unsafe { value_of(old) })
    }

    /// See [`ByteMap::put`].
    pub fn put(&self, key: &[u8], value: &[u8], guard: &'m Guard) -> Result<Option<ValueRef<'m>>, Error> {
        Ok(self.replace_if(key, value, guard, |_| true)?.ok().map(|(old, _)| old))
    }

    /// See [`ByteMap::compare_and_replace`].
    pub fn compare_and_replace(
        &self,
        key: &[u8],
        current: ValueRef<'_>,
        new: &[u8],
        guard: &'m Guard,
    ) -> Result<Result<ValueRef<'m>, Option<ValueRef<'m>>>, Error> {
        Ok(self.replace_if(key, new, guard, is(current))?.map(|(old, _)| old))
    }

    /// Replace the value of a present `key` with `value` if `accept`
    /// accepts the element there: the old value and the new, or the one
    /// there if any.
    #[allow(clippy::type_complexity)]
    fn replace_if(
        &self,
        key: &[u8],
        value: &[u8],
        guard: &'m Guard,
        accept: impl Fn(ValueWord) -> bool,
    ) -> Result<Result<(ValueRef<'m>, ValueRef<'m>), Option<ValueRef<'m>>>, Error> {
        let (kw, probe) = self.locate(key);
        let mut fresh = None;
        let r = self.map.index.replace_if(
            kw,
            &self.is_mine(probe),
            accept,
            || Ok(fresh.insert(self.fresh(kw, probe, value)?).word),
            guard,
        )?;
        Ok(match r {
            Ok(old) => {
                let fresh = fresh.expect("dlht invariant: made to replace");
                // SAFETY: published below, then kept by `guard`; `old` read
                // under `guard`.
                let new = unsafe { ValueRef::of(fresh.word) };
                fresh.publish();
                // SAFETY: read under `guard`.
                Ok((unsafe { ValueRef::of(old) }, new))
            }
            // SAFETY: read under `guard`.
            Err(now) => Err(unsafe { value_of(now) }),
        })
    }

    /// See [`ByteMap::remove`].
    pub fn remove(&self, key: &[u8], guard: &'m Guard) -> Option<ValueRef<'m>> {
        let (kw, probe) = self.locate(key);
        // SAFETY: retired just now, under `guard`.
        unsafe { value_of(self.map.index.remove(kw, &self.is_mine(probe), guard)) }
    }

    /// See [`ByteMap::remove_if`].
    pub fn remove_if(
        &self,
        key: &[u8],
        mut accept: impl FnMut(&[u8]) -> bool,
        guard: &'m Guard,
    ) -> Option<ValueRef<'m>> {
        let (kw, probe) = self.locate(key);
        let mine = self.is_mine(probe);
        // The index removes the element it found only if the word is
        // unchanged since, and asks again otherwise: `accept` judges the
        // value it removes. (A `RefCell` lets the index's `Fn` call it.)
        let accept = core::cell::RefCell::new(&mut accept);
        let mine_and_accepted = |e: ValueWord| {
            // SAFETY: the index calls this on elements read under `guard`.
            mine(e) && (accept.borrow_mut())(unsafe { ValueRef::of(e) }.as_bytes())
        };
        // SAFETY: retired just now, under `guard`.
        unsafe { value_of(self.map.index.remove(kw, &mine_and_accepted, guard)) }
    }

    /// See [`ByteMap::compute`].
    pub fn compute<B: AsRef<[u8]>>(
        &self,
        key: &[u8],
        mut f: impl FnMut(Option<&[u8]>) -> Op<B>,
        guard: &'m Guard,
    ) -> Result<Computed<ValueRef<'m>>, Error> {
        let mut entries = KeyEntries { ns: *self, key, guard, offered: PhantomData };
        compute::compute(&mut entries, |v| f(v.as_deref()))
    }

    /// See [`ByteMap::update`].
    pub fn update<B: AsRef<[u8]>>(
        &self,
        key: &[u8],
        mut f: impl FnMut(&[u8]) -> B,
        guard: &'m Guard,
    ) -> Result<Option<ValueRef<'m>>, Error> {
        let r = self.compute(key, |v| v.map_or(Op::Keep, |v| Op::Upsert(f(v))), guard)?;
        Ok(match r {
            Computed::Replaced { new, .. } => Some(new),
            _ => None,
        })
    }

    /// See [`ByteMap::get_or_insert_with`].
    pub fn get_or_insert_with<B: AsRef<[u8]>>(
        &self,
        key: &[u8],
        make: impl FnOnce() -> B,
        guard: &'m Guard,
    ) -> Result<ValueRef<'m>, Error> {
        if let Some(v) = self.get(key, guard) {
            return Ok(v);
        }
        let value = make();
        Ok(self.insert_blob(key, value.as_ref(), guard)?.unwrap_or_else(|there| there))
    }

    /// Keep only the entries of this namespace that `keep` accepts (see
    /// [`ByteMap::retain`]). Returns how many it removed.
    pub fn retain(&self, mut keep: impl FnMut(&[u8], &[u8]) -> bool, guard: &'m Guard) -> usize {
        let id = self.id();
        self.map.retain(|ns, k, v| ns != id || keep(k, v), guard)
    }
}

/// The test `compare_and_replace` and `compute` apply: the element is the
/// very value `current` (kept alive by the caller's guard, so its address
/// is not reused meanwhile).
fn is(current: ValueRef<'_>) -> impl Fn(ValueWord) -> bool {
    let addr = current.blob.as_ptr() as usize;
    move |e| e.addr() == addr
}

/// One key of a [`ByteMap`] namespace, for [`compute`](compute::compute).
struct KeyEntries<'k, 'm, S, B> {
    ns: ByteNamespace<'m, S>,
    key: &'k [u8],
    guard: &'m Guard,
    offered: PhantomData<B>,
}

impl<'m, S: BuildHasher, B: AsRef<[u8]>> compute::Entries for KeyEntries<'_, 'm, S, B> {
    type Ref = ValueRef<'m>;
    type Value = B;

    fn get(&mut self) -> Option<ValueRef<'m>> {
        self.ns.get(self.key, self.guard)
    }

    fn insert(&mut self, value: B) -> Result<Result<ValueRef<'m>, ValueRef<'m>>, Error> {
        self.ns.insert_blob(self.key, value.as_ref(), self.guard)
    }

    #[allow(clippy::type_complexity)]
    fn replace(
        &mut self,
        current: ValueRef<'m>,
        value: B,
    ) -> Result<Result<(ValueRef<'m>, ValueRef<'m>), Option<ValueRef<'m>>>, Error> {
        self.ns.replace_if(self.key, value.as_ref(), self.guard, is(current))
    }

    fn remove(&mut self, current: ValueRef<'m>) -> bool {
        let (kw, probe) = self.ns.locate(self.key);
        let mine = self.ns.is_mine(probe);
        let exact = is(current);
        self.ns.map.index.remove(kw, &|e| mine(e) && exact(e), self.guard).is_some()
    }
}

/// A weakly consistent iterator over a [`ByteMap`]'s entries: see
/// [`ByteMap::iter`].
pub struct ByteIter<'g> {
    inner: PointerIter<'g, Blob, FileHasher>,
}

impl<'g> Iterator for ByteIter<'g> {
    type Item = (usize, KeyBytes<'g>, ValueRef<'g>);

    fn next(&mut self) -> Option<Self::Item> {
        let (kw, e) = self.inner.next()?;
        // SAFETY: read under the guard the iterator borrows.
        Some(unsafe { entry_of(kw, e) })
    }
}

/// The entry `(namespace, key, value)` of element `e` found at key word
/// `kw`.
///
/// # Safety
/// As for [`ValueRef::of`].
pub(super) unsafe fn entry_of<'g>(kw: u64, e: ValueWord) -> (usize, KeyBytes<'g>, ValueRef<'g>) {
    let mut key = KeyBytes { inline: [0; Shape::INLINE_MAX], len: 0, stored: None };
    match e.shape() {
        Shape::Inline(len) => {
            key.inline = (kw ^ namespace_mix(e.namespace())).to_le_bytes();
            key.len = len;
        }
        // SAFETY: the caller's contract.
        _ => key.stored = Some(unsafe { Blob::key(e.addr() as *const Blob) }),
    }
    // SAFETY: as above.
    (e.namespace() as usize, key, unsafe { ValueRef::of(e) })
}

/// Insert or replace each pair (later pairs win). Panics on a key or value
/// longer than `u32::MAX` bytes or if memory is refused.
impl<K: AsRef<[u8]>, V: AsRef<[u8]>, S: BuildHasher> Extend<(K, V)> for ByteMap<S> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        let g = self.guard();
        for (k, v) in iter {
            or_panic(self.upsert(k.as_ref(), v.as_ref(), &g));
        }
    }
}

/// ```
/// let m: dlht::ByteMap = [("a", "1"), ("a", "2"), ("b", "3")].into_iter().collect();
/// assert_eq!(m.get(b"a", &m.guard()).as_deref(), Some(&b"2"[..]));
/// assert_eq!(m.len(), 2);
/// ```
impl<K: AsRef<[u8]>, V: AsRef<[u8]>, S: BuildHasher + Default> FromIterator<(K, V)> for ByteMap<S> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut m = or_panic(Self::try_with_capacity_and_hasher(iter.size_hint().0, S::default()));
        m.extend(iter);
        m
    }
}

/// A new map with the same entries (namespaces kept) and a clone of the
/// hasher: a weakly consistent copy under concurrent updates. Panics if
/// memory is refused.
///
/// ```
/// let m: dlht::ByteMap = [("k", "v"), ("a longer key", "w")].into_iter().collect();
/// let c = m.clone();
/// assert_eq!(c, m);
/// m.remove(b"k", &m.guard());
/// assert_ne!(c, m);
/// ```
impl<S: BuildHasher + Clone> Clone for ByteMap<S> {
    fn clone(&self) -> Self {
        let copy = or_panic(Self::try_with_capacity_and_hasher(self.len(), self.hasher.clone()));
        let (g, cg) = (self.guard(), copy.guard());
        for (ns, k, v) in self.iter(&g) {
            or_panic(or_panic(copy.namespace(ns)).upsert(&k, &v, &cg));
        }
        drop(cg);
        copy
    }
}

/// Equal when both hold the same keys, namespace by namespace, with equal
/// values, whatever their hashers.
impl<S: BuildHasher, S2: BuildHasher> PartialEq<ByteMap<S2>> for ByteMap<S> {
    fn eq(&self, other: &ByteMap<S2>) -> bool {
        let (g, og) = (self.guard(), other.guard());
        self.len() == other.len()
            && self.iter(&g).all(|(ns, k, v)| {
                other.namespace(ns).is_ok_and(|space| space.get(&k, &og).as_deref() == Some(&*v))
            })
    }
}

impl<S: BuildHasher> Eq for ByteMap<S> {}

impl<S: BuildHasher> fmt::Debug for ByteMap<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.guard();
        f.debug_map().entries(self.iter(&g).map(|(ns, k, v)| ((ns, k), v))).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_layout_and_contents() {
        let p = Blob::try_new(b"key", b"value!", None, 0).unwrap();
        // SAFETY: ours, freed below.
        unsafe {
            assert_eq!(Blob::key(p.as_ptr()), b"key");
            assert_eq!(Blob::value(p.as_ptr()), b"value!");
            Blob::free(p.as_ptr() as usize);
        }
        assert_eq!(Blob::HEADER, 12);
        assert_eq!(Blob::layout(3, 6).unwrap().size(), 21);
        assert_eq!(align_of::<Blob>(), 4);
    }

    #[test]
    fn inline_words_tell_lengths_apart_only_by_the_length() {
        assert_eq!(inline_word(b"a"), inline_word(b"a\0"));
        assert_eq!(inline_word(b""), 0);
        assert_eq!(inline_word(b"\x01\x02"), 0x0201);
    }
}
