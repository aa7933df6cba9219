//! What an allocator-mode slot holds (paper §3.4.1–3.4.2): in the key word
//! the key itself when it is at most 8 bytes (xor its namespace's mix),
//! otherwise a 64-bit signature of (namespace, key); in the value word a
//! pointer whose 16 spare high bits carry the namespace and the *shape* —
//! the paper's 4-bit key size, plus two codes of our own.
//!
//! ```text
//! value word:  | shape 4 | namespace 12 | address 48 |
//! shape:       1 + key length (1..=9)  the key is the slot's key word; the
//!                                      address holds the value only
//!              ENTRY (10)              the key word is a signature; the
//!                                      address holds key and value
//!              LIST (11)               a list of such value words whose
//!                                      keys share the slot's key word
//! ```
//!
//! An inline key is known from its slot alone: two keys of at most 8
//! bytes with equal key words, namespaces and lengths are equal (the key's
//! bytes are the key word xor the namespace's mix, cut to the length), so
//! a lookup decides without reading the allocation. Key words shared by
//! different keys — signatures that collide, an inline key equal to
//! another namespace's, a signature equal to an inline key — hold a
//! copy-on-write list of the keys' value words, so correctness never
//! depends on the hasher. [`AllocMap`](crate::AllocMap)'s keys are any
//! `K: Hash + Eq`, with no byte form to inline: all of them are entries.

use super::Guard;
use crate::error::Error;
#[cfg(not(loom))]
use crate::persist::heap::Heap;
#[cfg(not(loom))]
use crate::plant::{planted, Plant};
#[cfg(loom)]
pub(crate) enum Heap {}
#[cfg(loom)]
impl Heap {
    pub fn alloc(&self, _: usize) -> Result<usize, Error> {
        match *self {}
    }
    pub fn free_unpublished(&self, _: usize) {
        match *self {}
    }
    pub fn retiring(&self, _: usize) -> (u64, bool) {
        match *self {}
    }
    pub fn close(&self) {
        match *self {}
    }
    pub fn free_tagged(_: usize, _: u64) {
        unreachable!("loom builds open no heap")
    }
    pub fn seal(&self, _: usize, _: u64, _: u32) {
        match *self {}
    }
    pub fn note_damaged(&self) {
        match *self {}
    }
    pub fn verifies_reads(&self) -> bool {
        match *self {}
    }
}
use core::alloc::Layout;
use core::ptr::NonNull;

/// Namespaces a map has: ids `0..NAMESPACES` (12 bits).
pub const NAMESPACES: usize = 1 << ValueWord::NAMESPACE_BITS;

/// What a value word points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A value; its key, of this many bytes (0..=8), is the slot's key
    /// word xor the namespace's mix.
    Inline(u8),
    /// An allocation holding key and value; the key word is a signature.
    Entry,
    /// A [`List`] of value words whose keys share the slot's key word.
    List,
}

impl Shape {
    /// The longest key kept in the key word.
    pub const INLINE_MAX: usize = 8;
    const ENTRY: u64 = 10;
    const LIST: u64 = 11;

    /// The 4-bit code.
    const fn code(self) -> u64 {
        match self {
            Shape::Inline(len) => 1 + len as u64,
            Shape::Entry => Self::ENTRY,
            Shape::List => Self::LIST,
        }
    }
}

/// The value word of an allocator-mode slot, or an element of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ValueWord(u64);

impl ValueWord {
    /// Bits of the address (x86-64 and AArch64 user space: 47–48).
    pub const ADDRESS_BITS: u32 = 48;
    const ADDRESS_MASK: u64 = (1 << Self::ADDRESS_BITS) - 1;
    /// Where the namespace starts.
    pub const NAMESPACE_SHIFT: u32 = Self::ADDRESS_BITS;
    /// Bits of the namespace.
    pub const NAMESPACE_BITS: u32 = 12;
    /// Where the shape starts.
    pub const SHAPE_SHIFT: u32 = Self::NAMESPACE_SHIFT + Self::NAMESPACE_BITS;

    /// The word for `addr`, or None if the address needs more than 48 bits.
    pub fn new(shape: Shape, ns: u16, addr: usize) -> Option<ValueWord> {
        debug_assert!((ns as usize) < NAMESPACES, "dlht invariant: namespace checked before");
        debug_assert!(
            !matches!(shape, Shape::Inline(l) if l as usize > Shape::INLINE_MAX),
            "dlht invariant: inline keys are short"
        );
        let a = addr as u64;
        (a & !Self::ADDRESS_MASK == 0).then_some(ValueWord(Self::tag(shape, ns) | a))
    }

    /// The bits above the address: shape and namespace.
    const fn tag(shape: Shape, ns: u16) -> u64 {
        shape.code() << Self::SHAPE_SHIFT | (ns as u64) << Self::NAMESPACE_SHIFT
    }

    /// A word read from a slot.
    #[inline(always)]
    pub const fn from_bits(w: u64) -> ValueWord {
        ValueWord(w)
    }

    /// The word to store.
    #[inline(always)]
    pub const fn bits(self) -> u64 {
        self.0
    }

    /// What the address points to, or None for a code no word of ours
    /// has (a damaged file's).
    #[cfg_attr(loom, allow(dead_code))]
    pub fn try_shape(self) -> Option<Shape> {
        match self.0 >> Self::SHAPE_SHIFT {
            c @ 1..=9 => Some(Shape::Inline(c as u8 - 1)),
            Shape::ENTRY => Some(Shape::Entry),
            Shape::LIST => Some(Shape::List),
            _ => None,
        }
    }

    /// What the address points to.
    #[inline(always)]
    pub fn shape(self) -> Shape {
        match self.0 >> Self::SHAPE_SHIFT {
            c @ 1..=9 => Shape::Inline(c as u8 - 1),
            Shape::ENTRY => Shape::Entry,
            Shape::LIST => Shape::List,
            c => panic!("dlht invariant: value word of shape {c}"),
        }
    }

    /// The namespace of the key (0 for a list).
    #[inline(always)]
    pub const fn namespace(self) -> u16 {
        ((self.0 >> Self::NAMESPACE_SHIFT) & (NAMESPACES as u64 - 1)) as u16
    }

    /// The address.
    #[inline(always)]
    pub const fn addr(self) -> usize {
        (self.0 & Self::ADDRESS_MASK) as usize
    }

    /// What a heap block holding this word's element is sealed for, under
    /// key word `kw`: the key word and this word's shape and namespace (a
    /// flipped bit in any of them fails the seal: `persist::heap::Seal`).
    #[inline(always)]
    #[cfg_attr(loom, allow(dead_code))]
    pub const fn sealed_key(self, kw: u64) -> u64 {
        kw ^ (self.0 & !Self::ADDRESS_MASK)
    }

    /// [`sealed_key`](Self::sealed_key) of the word an element of `shape`
    /// in namespace `ns` will have, before its address is known.
    pub const fn sealed_key_of(shape: Shape, ns: u16, kw: u64) -> u64 {
        kw ^ Self::tag(shape, ns)
    }
}

/// An allocation a value word of one map type can point to (everything
/// but a list): how to free it.
pub(crate) trait Element {
    /// Free the allocation at `addr` (dropping what it holds).
    ///
    /// # Safety
    /// `addr` is an element of this type that nothing can reach any more,
    /// freed once.
    unsafe fn free(addr: usize);

    /// The bytes allocated for the element at `addr`.
    ///
    /// # Safety
    /// `addr` is an element of this type that is not freed yet.
    unsafe fn bytes(addr: usize) -> usize;

    /// The checksum a persistent map's heap seals the element at `addr`
    /// with, for key word `kw` (`persist::heap::Seal`): a CRC-32C of the
    /// key word and the element's bytes that never change.
    ///
    /// # Safety
    /// As for [`bytes`](Self::bytes), and the element lies whole in
    /// readable memory.
    #[cfg_attr(loom, allow(dead_code))]
    unsafe fn checksum(kw: u64, addr: usize) -> u32 {
        // SAFETY: the caller's contract: the element's bytes are readable.
        checksum_of(kw, &[unsafe { core::slice::from_raw_parts(addr as *const u8, Self::bytes(addr)) }])
    }
}

/// A seal's checksum: CRC-32C of the key word (little-endian) and `parts`.
pub(crate) fn checksum_of(kw: u64, parts: &[&[u8]]) -> u32 {
    parts.iter().fold(crc32c::crc32c(&kw.to_le_bytes()), |c, p| crc32c::crc32c_append(c, p))
}

/// True if reads of words loaded from the index from now on must verify
/// checksums ([`trusted`]'s `verify`): until the open's walk has verified
/// every block the index reaches, and taken the damaged words out. Asked
/// before the word is loaded: a word loaded before the walk ended may be
/// one it took out.
#[inline(always)]
pub(crate) fn verifying(heap: HeapRef) -> bool {
    heap.is_some_and(|h| h.verifies_reads())
}

/// True if the element word `vw` of key word `kw`, read from a slot of
/// the index, may be followed: always in memory; in a persistent map's
/// heap, if it names a block sealed for `kw` that holds the whole element
/// (a list's words too), with the checksum verified if `verify` (what
/// [`verifying`] said before `vw` was loaded). A word that fails is
/// counted and not served: damage in a file never reads out of bounds or
/// hands out another key's bytes.
#[inline(always)]
pub(crate) fn trusted<E: Element>(heap: HeapRef, kw: u64, vw: ValueWord, verify: bool) -> bool {
    match heap {
        None => true,
        Some(h) => counted(h, sealed::<E>(h, kw, vw, verify)),
    }
}

/// [`trusted`] for `e`, a word of a collision list of key word `kw`: an
/// element (not a list), its checksum always verified (the walk takes
/// damaged slot words out of the index, not damaged elements out of
/// lists; lists are rare).
#[inline]
pub(crate) fn trusted_in_list<E: Element>(heap: HeapRef, kw: u64, e: ValueWord) -> bool {
    match heap {
        None => true,
        Some(h) => counted(h, e.try_shape() != Some(Shape::List) && sealed::<E>(h, kw, e, true)),
    }
}

/// `ok`, after counting a damaged element if it is false.
fn counted(h: &Heap, ok: bool) -> bool {
    if !ok {
        h.note_damaged();
    }
    ok
}

#[cfg(not(loom))]
#[inline]
fn sealed<E: Element>(h: &Heap, kw: u64, vw: ValueWord, verify: bool) -> bool {
    let Some(shape) = vw.try_shape() else { return false };
    // Planted bug (scripts/planted-bugs.sh): check the block's bounds and
    // state, not its seal.
    if planted(Plant::SealUnchecked) {
        return h.block_bytes(vw.addr()).is_some();
    }
    let addr = vw.addr();
    let kw = vw.sealed_key(kw);
    let Some((room, crc)) = h.sealed_for(kw, addr) else { return false };
    // SAFETY: `addr` is an allocated block of the heap with `room` payload
    // bytes (at least 16), mapped: its header is readable, and once the
    // length it gives fits the block, the whole element is.
    unsafe {
        if shape == Shape::List {
            (*(addr as *const List)).fits(room) && (!verify || List::checksum(kw, addr) == crc)
        } else {
            E::bytes(addr) <= room && (!verify || E::checksum(kw, addr) == crc)
        }
    }
}

#[cfg(loom)]
fn sealed<E: Element>(h: &Heap, _: u64, _: ValueWord, _: bool) -> bool {
    match *h {}
}

/// Value words whose keys share one key word: replaced whole (copy on
/// write), never changed once published. One allocation: the length, then
/// the words (so a persistent map's list is a heap block like a value's).
#[repr(C)]
pub(crate) struct List {
    len: usize,
}

/// The heap a persistent map allocates its elements in (None: the global
/// allocator).
pub(crate) type HeapRef = Option<&'static Heap>;

impl List {
    /// The value words.
    #[inline(always)]
    pub fn words(&self) -> &[u64] {
        // SAFETY: `len` words follow the header in the list's allocation
        // (made by `try_new`), immutable once published.
        unsafe { core::slice::from_raw_parts((self as *const List).add(1).cast::<u64>(), self.len) }
    }

    /// True if the list's words fit in `bytes` (a check of a list read
    /// from a file before its words are).
    #[cfg_attr(loom, allow(dead_code))]
    pub fn fits(&self, bytes: usize) -> bool {
        // (A damaged length may be any number: no `len + 1` overflow.)
        self.len < bytes / size_of::<u64>() && Self::layout(self.len).is_ok_and(|l| l.size() <= bytes)
    }

    /// The checksum a heap seals the list at `addr` with, for key word
    /// `kw` (see [`Element::checksum`]): its length and words.
    ///
    /// # Safety
    /// `addr` is a list that is not freed, lying whole in readable memory.
    #[cfg_attr(loom, allow(dead_code))]
    pub unsafe fn checksum(kw: u64, addr: usize) -> u32 {
        // SAFETY: the caller's contract.
        let bytes = unsafe { (*(addr as *const List)).len + 1 } * size_of::<u64>();
        // SAFETY: as above: the header and its words.
        checksum_of(kw, &[unsafe { core::slice::from_raw_parts(addr as *const u8, bytes) }])
    }

    fn layout(len: usize) -> Result<Layout, Error> {
        Layout::array::<u64>(len + 1).map_err(|_| Error::AllocFailed { bytes: usize::MAX })
    }

    /// A fresh list of `words` of key word `kw`, in `heap` (sealed) or the
    /// global allocator.
    pub fn try_new(words: &[u64], heap: HeapRef, kw: u64) -> Result<NonNull<List>, Error> {
        let layout = Self::layout(words.len())?;
        let p = match heap {
            Some(h) => h.alloc(layout.size())? as *mut u8,
            // SAFETY: at least one word, so not zero-sized.
            None => unsafe { std::alloc::alloc(layout) },
        };
        let p = NonNull::new(p.cast::<List>()).ok_or(Error::AllocFailed { bytes: layout.size() })?;
        // SAFETY: fresh memory of `layout`: the header, then the words.
        unsafe {
            p.as_ptr().write(List { len: words.len() });
            p.as_ptr().add(1).cast::<u64>().copy_from_nonoverlapping(words.as_ptr(), words.len());
        }
        if let Some(h) = heap {
            let (addr, kw) = (p.as_ptr() as usize, ValueWord::sealed_key_of(Shape::List, 0, kw));
            // SAFETY: just written whole.
            h.seal(addr, kw, unsafe { Self::checksum(kw, addr) });
        }
        Ok(p)
    }

    /// Free a list container (not its elements) of the global allocator.
    ///
    /// # Safety
    /// `addr` is a list made by `try_new` without a heap that nothing can
    /// reach, never published or out of the index and past reclamation;
    /// freed once.
    pub unsafe fn free(addr: usize) {
        // SAFETY: the caller's contract; the header gives the layout back.
        unsafe {
            let layout = Self::layout((*(addr as *const List)).len).expect("dlht invariant: its own layout");
            std::alloc::dealloc(addr as *mut u8, layout);
        }
    }

    /// Free a list never published, made by `try_new` in `heap`.
    ///
    /// # Safety
    /// As for [`free`](Self::free), with the heap it was made in.
    pub unsafe fn free_in(addr: usize, heap: HeapRef) {
        match heap {
            Some(h) => h.free_unpublished(addr),
            // SAFETY: the caller's contract.
            None => unsafe { Self::free(addr) },
        }
    }
}

/// Move `v` into a fresh allocation of the global allocator, or report the
/// allocator's refusal (where `Box::new` would abort the process). Free it
/// with `Box::from_raw`.
pub(crate) fn try_box<T>(v: T) -> Result<NonNull<T>, Error> {
    let layout = Layout::new::<T>();
    assert!(layout.size() > 0, "dlht invariant: entries are never zero-sized");
    // SAFETY: the layout is not zero-sized.
    let p = unsafe { std::alloc::alloc(layout) } as *mut T;
    let p = NonNull::new(p).ok_or(Error::AllocFailed { bytes: layout.size() })?;
    // SAFETY: fresh memory of T's layout.
    unsafe { p.as_ptr().write(v) };
    Ok(p)
}

/// An element allocated but not yet published: freed if the operation
/// ends without publishing it.
pub(crate) struct Fresh<E: Element> {
    pub word: ValueWord,
    /// The heap it was allocated in (None: the global allocator).
    heap: HeapRef,
    _e: core::marker::PhantomData<E>,
}

impl<E: Element> Fresh<E> {
    /// Take ownership of the element `addr`, or free it and fail if its
    /// address cannot be tagged (above 2^48: 5-level paging with a high
    /// mapping).
    ///
    /// # Safety
    /// `addr` is an unpublished element of type `E`, owned by the caller.
    pub unsafe fn new(shape: Shape, ns: u16, addr: usize) -> Result<Self, Error> {
        // SAFETY: the caller's contract.
        unsafe { Self::new_in(shape, ns, addr, None) }
    }

    /// As [`new`](Self::new), for an element allocated in `heap`.
    ///
    /// # Safety
    /// As for [`new`](Self::new); `addr` was allocated in `heap`.
    pub unsafe fn new_in(shape: Shape, ns: u16, addr: usize, heap: HeapRef) -> Result<Self, Error> {
        match ValueWord::new(shape, ns, addr) {
            Some(word) => Ok(Fresh { word, heap, _e: core::marker::PhantomData }),
            None => {
                // SAFETY: the caller's, never published.
                unsafe { free_unpublished::<E>(addr, heap) };
                Err(Error::Unsupported)
            }
        }
    }

    /// The element is in the index now: the map owns it.
    pub fn publish(self) {
        core::mem::forget(self);
    }

    /// The element, no longer owned by this guard (the caller frees it).
    pub fn into_word(self) -> ValueWord {
        let w = self.word;
        core::mem::forget(self);
        w
    }
}

impl<E: Element> Drop for Fresh<E> {
    fn drop(&mut self) {
        // SAFETY: never published, so ours alone; allocated in `heap`.
        unsafe { free_unpublished::<E>(self.word.addr(), self.heap) };
    }
}

/// Free an element never published, allocated in `heap` (or, None, by
/// `E`'s own allocation).
///
/// # Safety
/// `addr` is such an element, owned by the caller, freed once.
unsafe fn free_unpublished<E: Element>(addr: usize, heap: HeapRef) {
    match heap {
        Some(h) => h.free_unpublished(addr),
        // SAFETY: the caller's contract.
        None => unsafe { E::free(addr) },
    }
}

/// Hand an element that left the index to epoch reclamation.
///
/// # Safety
/// No slot or list reachable from now on holds `w`, and it is retired
/// once; `E`'s contents may be dropped on any thread, after the map is
/// gone (the maps' `Send + 'static` bounds).
#[inline]
pub(crate) unsafe fn retire<E: Element>(w: ValueWord, heap: HeapRef, guard: &Guard) -> bool {
    // SAFETY: the caller's contract.
    unsafe { retire_addr(w.addr(), E::free, heap, guard) }
}

/// Hand the allocation at `addr` that left the index to epoch
/// reclamation, to be freed with `free` — or, allocated in `heap` (a
/// persistent map's), marked retired now and freed there with this open's
/// tag.
///
/// True if it was a persistent heap's block of an earlier incarnation
/// that its reclamation's walk had not reached (and so not counted).
///
/// # Safety
/// As for [`retire`].
#[inline]
pub(crate) unsafe fn retire_addr(addr: usize, free: unsafe fn(usize), heap: HeapRef, guard: &Guard) -> bool {
    // Retired by the bare address, not the tagged word: a leak checker
    // scanning pending garbage at exit then sees it reachable.
    let (free, uncounted) = match heap {
        Some(h) => {
            let (tag, uncounted) = h.retiring(addr);
            (Free::Heap(tag), uncounted)
        }
        None => (Free::Plain(free), false),
    };
    // SAFETY: the caller's contract.
    unsafe { guard.retire(addr, free) };
    uncounted
}

/// How a retired allocation is freed.
#[derive(Clone, Copy)]
pub(crate) enum Free {
    /// By this function.
    Plain(unsafe fn(usize)),
    /// In its persistent heap, if that heap is still in the open this tag
    /// names (`persist::heap::Heap::free_tagged`).
    Heap(u64),
}

impl Free {
    /// Free `addr`.
    ///
    /// # Safety
    /// `addr` was retired with this `Free`, and nothing can read it now.
    pub unsafe fn run(self, addr: usize) {
        match self {
            // SAFETY: the caller's contract.
            Free::Plain(f) => unsafe { f(addr) },
            Free::Heap(tag) => Heap::free_tagged(addr, tag),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_words_round_trip() {
        for (shape, ns, addr) in [
            (Shape::Entry, 0, 8),
            (Shape::List, 4095, (1 << 48) - 8),
            (Shape::Inline(0), 77, 0x7f12_3456_7890),
            (Shape::Inline(8), 4095, 16),
        ] {
            let w = ValueWord::new(shape, ns, addr).unwrap();
            assert_eq!((w.shape(), w.namespace(), w.addr()), (shape, ns, addr));
            assert_eq!(ValueWord::from_bits(w.bits()), w);
            assert_ne!(w.bits(), 0);
        }
        assert_eq!(ValueWord::new(Shape::Entry, 0, 1 << 48), None);
        assert_eq!(ValueWord::SHAPE_SHIFT + 4, 64);
    }

    #[test]
    fn shape_codes_are_distinct_and_fit_four_bits() {
        let mut codes: Vec<u64> = (0..=8).map(|l| Shape::Inline(l).code()).collect();
        codes.extend([Shape::Entry.code(), Shape::List.code()]);
        let n = codes.len();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), n);
        assert!(codes.iter().all(|&c| (1..16).contains(&c)));
    }
}
