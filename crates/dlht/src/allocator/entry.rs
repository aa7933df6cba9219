//! What an allocator-mode slot holds (paper §3.4.1–3.4.2): the key's
//! signature in the key word, and in the value word a pointer to the entry
//! whose 16 spare high bits carry the namespace and what the pointer is.
//!
//! ```text
//! value word:  | kind 4 | namespace 12 | address 48 |
//! ```
//!
//! The paper stores keys of at most 8 bytes in the key word itself and uses
//! the 4 high bits for the key's size. Here keys are any `K: Hash + Eq`,
//! which has no byte form, so every key lives in its entry next to its
//! value, the key word is a 64-bit signature of (namespace, key), and the
//! 4 bits say whether the pointer is one entry or a list of entries whose
//! signatures collided (rare: about n²/2^65 pairs among n keys with a good
//! hasher, but a poor hasher makes them common, and correctness must not
//! depend on the hasher).

use crate::error::Error;
use core::alloc::Layout;
use core::ptr::NonNull;

/// Namespaces a map has: ids `0..NAMESPACES` (12 bits).
pub const NAMESPACES: usize = 1 << ValueWord::NAMESPACE_BITS;

/// What a value word points to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One [`Node`].
    Node = 1,
    /// A [`List`] of nodes whose keys share the slot's signature.
    List = 2,
}

/// The value word of an allocator-mode slot.
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
    /// Where the kind starts.
    pub const KIND_SHIFT: u32 = Self::NAMESPACE_SHIFT + Self::NAMESPACE_BITS;

    /// The word for `addr`, or None if the address needs more than 48 bits.
    pub fn new(kind: Kind, ns: u16, addr: usize) -> Option<ValueWord> {
        debug_assert!((ns as usize) < NAMESPACES, "dlht invariant: namespace checked before");
        let a = addr as u64;
        (a & !Self::ADDRESS_MASK == 0).then_some(ValueWord(
            (kind as u64) << Self::KIND_SHIFT | (ns as u64) << Self::NAMESPACE_SHIFT | a,
        ))
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

    /// What the address points to.
    #[inline(always)]
    pub fn kind(self) -> Kind {
        match self.0 >> Self::KIND_SHIFT {
            1 => Kind::Node,
            2 => Kind::List,
            k => panic!("dlht invariant: value word of kind {k}"),
        }
    }

    /// The namespace of a node's key (0 for a list).
    #[inline(always)]
    pub const fn namespace(self) -> u16 {
        ((self.0 >> Self::NAMESPACE_SHIFT) & (NAMESPACES as u64 - 1)) as u16
    }

    /// The address.
    #[inline(always)]
    pub const fn addr(self) -> usize {
        (self.0 & Self::ADDRESS_MASK) as usize
    }
}

/// One entry: allocated before it is published, never changed after, freed
/// by epoch reclamation once no slot or list points to it. The namespace
/// comes first, then the key, so a key comparison usually reads one line.
#[repr(C)]
pub(crate) struct Node<K, V> {
    pub ns: u16,
    pub key: K,
    pub value: V,
}

/// Nodes whose keys share one signature: replaced whole (copy on write).
pub(crate) struct List<K, V> {
    pub nodes: Vec<NonNull<Node<K, V>>>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_words_round_trip() {
        for (kind, ns, addr) in
            [(Kind::Node, 0, 8), (Kind::List, 4095, (1 << 48) - 8), (Kind::Node, 77, 0x7f12_3456_7890)]
        {
            let w = ValueWord::new(kind, ns, addr).unwrap();
            assert_eq!((w.kind(), w.namespace(), w.addr()), (kind, ns, addr));
            assert_eq!(ValueWord::from_bits(w.bits()), w);
        }
        assert_eq!(ValueWord::new(Kind::Node, 0, 1 << 48), None);
        assert_eq!(ValueWord::KIND_SHIFT + 4, 64);
    }

    #[test]
    fn node_layout_puts_the_key_first() {
        assert_eq!(core::mem::offset_of!(Node<u64, [u8; 100]>, key), 8);
        assert_eq!(core::mem::offset_of!(Node<u64, [u8; 100]>, value), 16);
    }
}
