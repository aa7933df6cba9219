//! Allocator mode (paper §3.4.1–3.4.2): keys and values of any type and
//! size, each entry in its own allocation, reached through the index;
//! namespaces; references to values that stay valid under a guard.
//!
//! Two maps share the machinery: [`AllocMap`] for any `K: Hash + Eq` and
//! `V`, and [`ByteMap`] for byte strings, which keeps keys of at most 8
//! bytes in the slot itself as the paper does. The index
//! ([`pointers::PointerIndex`]) maps a key word to a tagged pointer
//! ([`entry::ValueWord`]); each change is one conditional operation on the
//! index, so it linearizes there. Entries are immutable once published; a
//! replaced or removed entry is retired to epoch-based reclamation
//! (crossbeam-epoch), and freed once every thread that could have read its
//! pointer has unpinned.
//!
//! Why crossbeam-epoch: the index hands out pointer words from its own
//! slot reads, not through a reclamation crate's protected loads; in
//! classic epoch reclamation a pin protects everything read while pinned,
//! which is exactly that case (seize's `protect` loads would not cover
//! words read inside the index). Its global collector also means one pin
//! serves every map.

mod background;
mod batch;
mod bytes;
mod entry;
mod owned;
#[cfg(all(feature = "rayon", not(loom)))]
mod par;
mod persistent;
mod pointers;

pub use batch::{AllocRequest, AllocResponse, ByteRequest, ByteResponse};
pub use bytes::{ByteIter, ByteMap, ByteNamespace, KeyBytes, ValueRef};
pub use entry::NAMESPACES;

use crate::compute::{self, Computed, Op};
use crate::driver::or_panic;
use crate::error::Error;
use crate::hash::{DefaultHashBuilder, SignatureMix};
use crate::plant::{planted, Plant};
use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use entry::{try_box, Element, Fresh, Shape, ValueWord};
use owned::Held;
use pointers::{PointerIndex, PointerIter};

/// A concurrent map for keys and values of any type and size (the paper's
/// *allocator mode*): each entry is one allocation holding key and value;
/// [`get`](Self::get) returns a reference to the value, valid while the
/// [`Guard`] it was read under lives — even if the key is removed
/// meanwhile.
///
/// Values are immutable once inserted: replace a whole value with
/// [`upsert`](Self::upsert), [`put`](Self::put) or
/// [`compare_and_replace`](Self::compare_and_replace). A caller who wants
/// to change a value in place puts its own synchronization inside the
/// value (atomics, a `Mutex`): the map hands out only shared references.
///
/// Keys live in up to [`NAMESPACES`] namespaces ([`namespace`](Self::namespace));
/// the map's own methods use namespace 0.
///
/// ```
/// use dlht::AllocMap;
///
/// let m: AllocMap<String, Vec<u8>> = AllocMap::new();
/// let g = m.guard();
/// m.insert("greeting".to_string(), b"hello".to_vec(), &g).unwrap();
/// let v = m.get("greeting", &g).unwrap();
/// assert_eq!(m.remove("greeting", &g).map(|v| v.as_slice()), Some(&b"hello"[..]));
/// assert_eq!(v, b"hello"); // still readable: `g` holds it
/// assert!(m.get("greeting", &g).is_none());
/// ```
pub struct AllocMap<K, V, S = DefaultHashBuilder> {
    /// Signature → node.
    index: PointerIndex<Node<K, V>>,
    hasher: S,
}

/// One entry of an [`AllocMap`]: allocated before it is published, never
/// changed after, freed by epoch reclamation once no slot or list points
/// to it. The key comes first, so a key comparison usually reads one line.
#[repr(C)]
pub(crate) struct Node<K, V> {
    key: K,
    value: V,
}

impl<K, V> Element for Node<K, V> {
    unsafe fn free(addr: usize) {
        // SAFETY: made by `try_box` (the caller's contract: unreachable,
        // freed once).
        drop(unsafe { Box::from_raw(addr as *mut Self) });
    }

    unsafe fn bytes(_: usize) -> usize {
        core::mem::size_of::<Self>()
    }
}

/// The node an element word of an [`AllocMap`] points to.
///
/// # Safety
/// `e` was read from the map's index under a guard that lives for `'g`.
#[inline(always)]
unsafe fn node<'g, K, V>(e: ValueWord) -> &'g Node<K, V> {
    // SAFETY: a published node, retired only after its word left the
    // index, and freed only after the guard unpins.
    unsafe { &*(e.addr() as *const Node<K, V>) }
}

/// A fresh node for `key → value` in namespace `ns`.
fn fresh_node<K, V>(ns: u16, key: K, value: V) -> Result<Fresh<Node<K, V>>, Error> {
    let p = try_box(Node { key, value })?;
    // SAFETY: just made, ours.
    unsafe { Fresh::new(Shape::Entry, ns, p.as_ptr() as usize) }
}

/// Free a fresh node, giving its key and value back.
fn into_parts<K, V>(f: Fresh<Node<K, V>>) -> (K, V) {
    // SAFETY: never published, so ours alone; made by `try_box`.
    let n = unsafe { Box::from_raw(f.into_word().addr() as *mut Node<K, V>) };
    (n.key, n.value)
}

/// Pins the current thread for epoch-based reclamation: values read under
/// it stay allocated until it is dropped. Cheap to take (a thread-local
/// counter and a fence); holding one for long delays the freeing of every
/// value removed meanwhile, in every [`AllocMap`] and [`ByteMap`]. Not
/// `Send`: for a guard that moves between threads (async code) see
/// [`OwnedGuard`], which dereferences to one.
pub struct Guard {
    kind: GuardKind,
}

enum GuardKind {
    /// The current thread's crossbeam-epoch pin.
    Pinned(crossbeam_epoch::Guard),
    /// An owned guard's registration (`owned`): pins no thread.
    Owned(u64),
}

impl Guard {
    /// Pin the current thread (what both maps' `guard` does).
    #[inline]
    pub(crate) fn pin() -> Guard {
        Guard { kind: GuardKind::Pinned(crossbeam_epoch::pin()) }
    }

    /// Hand the values this thread retired to the global collector and
    /// free what no thread can still read. Reclamation does this by itself
    /// now and then; call it when memory should come back now (after
    /// removing many values, before measuring memory).
    pub fn flush(&self) {
        match &self.kind {
            GuardKind::Pinned(g) => g.flush(),
            GuardKind::Owned(_) => crossbeam_epoch::pin().flush(),
        }
    }

    /// Hand an element that left an index to reclamation: held back while
    /// owned guards that may have read it live (`owned`), then deferred
    /// until every thread pinned now has unpinned.
    ///
    /// # Safety
    /// No slot or list reachable from now on holds `addr`; it is retired
    /// once; `free(addr)` may run on any thread, after the map is gone.
    #[inline]
    pub(crate) unsafe fn retire(&self, addr: usize, free: entry::Free) {
        let h = Held { addr, free };
        let h = match owned::registry() {
            Some(r) => match r.retire(h) {
                Some(h) => h,
                None => return, // held for owned guards
            },
            None => h,
        };
        // SAFETY: the caller's contract, and no owned guard can read it.
        unsafe { self.defer(h) }
    }

    /// Defer freeing `h` until every thread pinned now has unpinned.
    ///
    /// # Safety
    /// No new reference to `h` can be made, and no owned guard holds one.
    #[inline]
    unsafe fn defer(&self, h: Held) {
        let free = move || {
            // SAFETY: the caller's contract; a reference read under a pin is
            // dropped before the pin, so once every thread pinned now has
            // unpinned none remains.
            unsafe { h.free.run(h.addr) }
        };
        match &self.kind {
            // SAFETY: as above.
            GuardKind::Pinned(g) => unsafe { g.defer_unchecked(free) },
            // SAFETY: as above.
            GuardKind::Owned(_) => unsafe { crossbeam_epoch::pin().defer_unchecked(free) },
        }
    }

    /// An owned guard, or why none can be had.
    pub(crate) fn owned() -> Result<OwnedGuard, Error> {
        let reg = owned::registry().ok_or(Error::Unsupported)?;
        let (id, barrier) = reg.register();
        let g = OwnedGuard { guard: Guard { kind: GuardKind::Owned(id) } };
        if barrier {
            Ok(g)
        } else {
            drop(g); // unregistered unused
            Err(Error::Unsupported)
        }
    }
}

/// A guard that may move between threads (`Send`) and be shared (`Sync`),
/// for async code that holds values read from an [`AllocMap`] or a
/// [`ByteMap`] across `.await` points. It dereferences to a [`Guard`], so
/// every method takes `&owned` where it takes `&guard`.
///
/// It pins no thread: while any owned guard lives, values removed from any
/// map are held back in a process-wide list until the owned guards that
/// existed at their removal are gone (see `docs/DESIGN.md`). Taking one
/// costs a lock and, on Linux, a `membarrier` system call (microseconds):
/// take one per task, not per read; and as with [`Guard`], holding one
/// for long delays the freeing of removed values.
///
/// ```
/// let m = dlht::AllocMap::<u64, String>::new();
/// m.insert(1, "one".to_string(), &m.guard()).unwrap();
/// let g = m.owned_guard();
/// let v = m.get(&1, &g).unwrap();
/// std::thread::scope(|s| {
///     // A value read under it, and the guard itself, move to other threads.
///     s.spawn(move || assert_eq!(v, "one"));
/// });
/// std::thread::scope(|s| {
///     s.spawn(move || {
///         let g = g;
///         assert_eq!(m.get(&1, &g).map(String::as_str), Some("one"));
///     });
/// });
/// ```
///
/// A thread-bound [`Guard`] cannot move:
///
/// ```compile_fail
/// let m = dlht::AllocMap::<u64, u64>::new();
/// let g = m.guard();
/// std::thread::spawn(move || drop(g));
/// ```
pub struct OwnedGuard {
    /// Always `GuardKind::Owned`.
    guard: Guard,
}

// SAFETY: an owned guard holds only its registration id; every method of
// `Guard` on that kind uses the process-wide registry (a mutex and
// atomics) or pins the calling thread afresh, so it may be used from, and
// dropped on, any thread, by several at once.
unsafe impl Send for OwnedGuard {}
// SAFETY: as above.
unsafe impl Sync for OwnedGuard {}

impl core::ops::Deref for OwnedGuard {
    type Target = Guard;
    fn deref(&self) -> &Guard {
        &self.guard
    }
}

impl Drop for OwnedGuard {
    fn drop(&mut self) {
        let GuardKind::Owned(id) = self.guard.kind else {
            unreachable!("dlht invariant: an owned guard pins")
        };
        let reg = owned::registry().expect("dlht invariant: an owned guard without a registry");
        for h in reg.unregister(id) {
            // SAFETY: retired elements no owned guard can read any more.
            unsafe { self.guard.defer(h) };
        }
    }
}

/// An [`AllocMap::insert`] that found its key present: the value there,
/// and the key and value given back.
#[derive(Debug)]
pub struct Occupied<'g, K, V> {
    /// The value already in the map.
    pub current: &'g V,
    /// The key of the rejected insert.
    pub key: K,
    /// The value of the rejected insert.
    pub value: V,
}

/// The keys of one namespace of an [`AllocMap`] (from
/// [`AllocMap::namespace`]). Equal keys in different namespaces are
/// different keys. Its methods take a guard that lives as long as the
/// view's borrow of the map, which the values they return borrow too (so
/// the map cannot be dropped under them).
///
/// ```compile_fail
/// let m = dlht::AllocMap::<u64, u64>::new();
/// let g = m.guard();
/// let v = m.namespace(1).unwrap().get(&1, &g);
/// drop(m); // a value read from the map still borrows it
/// let _ = v;
/// ```
///
/// ```
/// let m = dlht::AllocMap::<u64, &str>::new();
/// let (users, groups) = (m.namespace(1).unwrap(), m.namespace(2).unwrap());
/// let g = m.guard();
/// users.insert(7, "ada", &g).unwrap();
/// groups.insert(7, "admins", &g).unwrap();
/// assert_eq!(users.get(&7, &g), Some(&"ada"));
/// assert_eq!(groups.get(&7, &g), Some(&"admins"));
/// assert_eq!(m.get(&7, &g), None); // namespace 0
/// assert!(m.namespace(4096).is_err());
/// ```
pub struct Namespace<'m, K, V, S = DefaultHashBuilder> {
    map: &'m AllocMap<K, V, S>,
    ns: u16,
}

impl<K, V, S> Clone for Namespace<'_, K, V, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V, S> Copy for Namespace<'_, K, V, S> {}

// SAFETY: the map owns its nodes; moving it moves their ownership (K, V:
// Send), and sharing it shares &K and &V with every thread (K, V: Sync)
// and lets any thread drop a retired node (K, V: Send). The index holds
// only words.
unsafe impl<K: Send + Sync, V: Send + Sync, S: Send> Send for AllocMap<K, V, S> {}
// SAFETY: as above.
unsafe impl<K: Send + Sync, V: Send + Sync, S: Sync> Sync for AllocMap<K, V, S> {}

/// How much of the values a batch's caller will read (paper §3.3: the
/// batch then prefetches the values, not only what finding them needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// None: only what finding the values needs is prefetched (an
    /// [`AllocMap`] entry's first line, to compare its key; nothing for a
    /// [`ByteMap`] key of at most 8 bytes, which its slot decides).
    Locate,
    /// The entries' first lines (key comparison, the start of the value).
    Key,
    /// Every line of each value (up to 4 KiB).
    Read,
}

/// Keys per pass of [`AllocMap::get_many`]: the index pipeline's window,
/// so one pass has as many entry misses in flight as the window has bins.
const PASS: usize = crate::batch::WINDOW;

/// Prefetch the lines from `start` to `start + len` (up to 4 KiB), the
/// first included.
#[inline(always)]
fn prefetch_lines(start: usize, len: usize) {
    // Addresses only: prefetching never dereferences.
    let end = start + len.min(4096);
    let mut line = start & !63;
    crate::arch::prefetch(line as *const u8);
    line += 64;
    while line < end {
        crate::arch::prefetch(line as *const u8);
        line += 64;
    }
}

/// Prefetch what the slot word `w` of an [`AllocMap`] points to: its
/// node's first line, and with [`Access::Read`] the lines of the value (a
/// list: its vector only).
#[inline(always)]
fn prefetch_node<K, V>(w: u64, access: Access) {
    let vw = ValueWord::from_bits(w);
    let len = match (access, vw.shape()) {
        (Access::Read, Shape::Entry) => core::mem::offset_of!(Node<K, V>, value) + size_of::<V>(),
        _ => 1,
    };
    prefetch_lines(vw.addr(), len);
}

/// Namespace `ns` as stored in a value word, or the error for an id out of
/// range.
fn namespace_id(ns: usize) -> Result<u16, Error> {
    if ns >= NAMESPACES {
        return Err(Error::NamespaceOutOfRange { namespace: ns });
    }
    Ok(ns as u16)
}

/// Mixed into a key's hash to make its signature in namespace `ns`; zero
/// for namespace 0.
#[inline(always)]
fn namespace_mix(ns: u16) -> u64 {
    (ns as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl<K, V> AllocMap<K, V, DefaultHashBuilder>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
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
    ///
    /// ```
    /// assert!(dlht::AllocMap::<String, String>::try_with_capacity(usize::MAX).is_err());
    /// ```
    pub fn try_with_capacity(n: usize) -> Result<Self, Error> {
        Self::try_with_capacity_and_hasher(n, DefaultHashBuilder::default())
    }
}

impl<K, V> Default for AllocMap<K, V, DefaultHashBuilder>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V, S> AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher,
{
    /// An empty map using `hasher` for keys.
    pub fn with_hasher(hasher: S) -> Self {
        or_panic(Self::try_with_capacity_and_hasher(0, hasher))
    }

    /// An empty map for `n` keys using `hasher`, or why it cannot be made.
    pub fn try_with_capacity_and_hasher(n: usize, hasher: S) -> Result<Self, Error> {
        Ok(AllocMap { index: PointerIndex::try_with_capacity(n, SignatureMix)?, hasher })
    }

    /// Pin this thread: values read under the guard stay valid while it
    /// lives. One guard may serve many operations and many maps.
    #[inline]
    pub fn guard(&self) -> Guard {
        Guard::pin()
    }

    /// A guard that may move between threads and be shared: for async code
    /// that holds values across `.await` (see [`OwnedGuard`]). Panics if
    /// the process barrier it needs is refused; see
    /// [`try_owned_guard`](Self::try_owned_guard).
    pub fn owned_guard(&self) -> OwnedGuard {
        or_panic(Guard::owned())
    }

    /// Like [`owned_guard`](Self::owned_guard): `Error::Unsupported` if the
    /// kernel refused the `membarrier` the protocol needs.
    pub fn try_owned_guard(&self) -> Result<OwnedGuard, Error> {
        Guard::owned()
    }

    /// The keys of namespace `ns` (`0..NAMESPACES`); namespace 0 is the
    /// map's own methods'.
    pub fn namespace(&self, ns: usize) -> Result<Namespace<'_, K, V, S>, Error> {
        Ok(Namespace { map: self, ns: namespace_id(ns)? })
    }

    // The map's own methods are namespace 0's, forwarded by hand, one line
    // each (as hashbrown's `HashSet` forwards to `HashMap`). Unlike `Map` and
    // `LocalMap`, whose requests share one definition (`map::requests`),
    // this map and ByteMap differ in every signature (borrowed typed keys
    // and `&V` here, byte slices and `ValueRef` there) and in every example,
    // so a shared macro would take each signature and doc as arguments and
    // only hide them from the source's reader.
    #[inline(always)]
    fn ns0(&self) -> Namespace<'_, K, V, S> {
        Namespace { map: self, ns: 0 }
    }

    /// The value of `key`, valid while `guard` lives.
    #[inline]
    pub fn get<'g, Q>(&'g self, key: &Q, guard: &'g Guard) -> Option<&'g V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ns0().get(key, guard)
    }

    /// True if `key` is present.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ns0().contains_key(key)
    }

    /// Get many keys at once (paper §3.3): `out[i]` receives the value of
    /// `keys[i]`. The index lookups go through the prefetching pipeline of
    /// [`Map::get_many`](crate::Map::get_many), then the entries are prefetched together before
    /// their keys are compared; with [`Access::Read`] every line of each
    /// value is prefetched too, for a caller that will read the values.
    /// Errors only if the lengths differ.
    ///
    /// ```
    /// use dlht::{Access, AllocMap};
    /// let m = AllocMap::<u64, [u64; 16]>::new();
    /// let g = m.guard();
    /// m.insert(1, [1; 16], &g).unwrap();
    /// let mut out = [None; 2];
    /// m.get_many(&[&1, &2], &mut out, Access::Read, &g).unwrap();
    /// assert_eq!(out.map(|v| v.map(|v| v.iter().sum::<u64>())), [Some(16), None]);
    /// ```
    pub fn get_many<'g, Q>(
        &'g self,
        keys: &[&Q],
        out: &mut [Option<&'g V>],
        access: Access,
        guard: &'g Guard,
    ) -> Result<(), Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ns0().get_many(keys, out, access, guard)
    }

    /// Insert `key → value` if `key` is absent; otherwise nothing changes
    /// and [`Occupied`] gives the pair back with the value present. Panics
    /// if memory is refused; see [`try_insert`](Self::try_insert).
    pub fn insert<'g>(&'g self, key: K, value: V, guard: &'g Guard) -> Result<(), Occupied<'g, K, V>> {
        self.ns0().insert(key, value, guard)
    }

    /// Like [`insert`](Self::insert), with allocation failure as an error
    /// (the map unchanged, nothing leaked).
    pub fn try_insert<'g>(
        &'g self,
        key: K,
        value: V,
        guard: &'g Guard,
    ) -> Result<Result<(), Occupied<'g, K, V>>, Error> {
        self.ns0().try_insert(key, value, guard)
    }

    /// Insert or replace: the value replaced, if any.
    pub fn upsert<'g>(&'g self, key: K, value: V, guard: &'g Guard) -> Option<&'g V> {
        self.ns0().upsert(key, value, guard)
    }

    /// Like [`upsert`](Self::upsert), with allocation failure as an error.
    pub fn try_upsert<'g>(&'g self, key: K, value: V, guard: &'g Guard) -> Result<Option<&'g V>, Error> {
        self.ns0().try_upsert(key, value, guard)
    }

    /// Replace the value of a present `key`: the old value; `Err` gives
    /// `value` back if `key` is absent (nothing is inserted).
    pub fn put<'g>(&'g self, key: &K, value: V, guard: &'g Guard) -> Result<&'g V, V>
    where
        K: Clone,
    {
        self.ns0().put(key, value, guard)
    }

    /// Replace the value of `key` with `new` only if it is still `current`
    /// — the very value a get returned (compared by address, so an equal
    /// value inserted meanwhile does not match). `Err` gives `new` back,
    /// with the value there now, if any.
    ///
    /// ```
    /// let m = dlht::AllocMap::<u32, u64>::new();
    /// let g = m.guard();
    /// m.insert(1, 10, &g).unwrap();
    /// let cur = m.get(&1, &g).unwrap();
    /// assert_eq!(m.compare_and_replace(&1, cur, *cur + 1, &g).map(|old| *old), Ok(10));
    /// let (back, now) = m.compare_and_replace(&1, cur, 99, &g).unwrap_err();
    /// assert_eq!((back, now.copied()), (99, Some(11)));
    /// ```
    pub fn compare_and_replace<'g>(
        &'g self,
        key: &K,
        current: &V,
        new: V,
        guard: &'g Guard,
    ) -> Result<&'g V, (V, Option<&'g V>)>
    where
        K: Clone,
    {
        self.ns0().compare_and_replace(key, current, new, guard)
    }

    /// Remove `key`: its value, valid while `guard` lives.
    pub fn remove<'g, Q>(&'g self, key: &Q, guard: &'g Guard) -> Option<&'g V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ns0().remove(key, guard)
    }

    /// Remove `key` if `accept` accepts its value: the value removed, valid
    /// while `guard` lives, or None (absent, or declined). Lock-free: the
    /// entry is removed only if it is still the one `accept` judged, and a
    /// value replaced meanwhile is judged again (`accept` may run more than
    /// once).
    ///
    /// ```
    /// let m = dlht::AllocMap::<u64, String>::new();
    /// let g = m.guard();
    /// m.insert(1, "keep".into(), &g).unwrap();
    /// m.insert(2, "drop".into(), &g).unwrap();
    /// assert_eq!(m.remove_if(&1, |v| v == "drop", &g), None);
    /// assert_eq!(m.remove_if(&2, |v| v == "drop", &g).map(String::as_str), Some("drop"));
    /// assert_eq!(m.len(), 1);
    /// ```
    pub fn remove_if<'g, Q>(
        &'g self,
        key: &Q,
        accept: impl FnMut(&V) -> bool,
        guard: &'g Guard,
    ) -> Option<&'g V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ns0().remove_if(key, accept, guard)
    }

    /// The value of `key`, inserting `make()` first if it is absent; valid
    /// while `guard` lives. `make` runs at most once, and only if the key
    /// was absent when looked up; if another thread's insert wins the race,
    /// the value made here is dropped (never leaked) and the winner's is
    /// returned. Panics on allocation failure; see
    /// [`try_get_or_insert_with`](Self::try_get_or_insert_with).
    ///
    /// Counting words with string keys, one counter per key:
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// let counts = dlht::AllocMap::<String, AtomicU64>::new();
    /// std::thread::scope(|s| {
    ///     for _ in 0..4 {
    ///         s.spawn(|| {
    ///             let g = counts.guard();
    ///             for w in "the cat and the hat and the bat".split(' ') {
    ///                 counts.get_or_insert_with(w.to_string(), || AtomicU64::new(0), &g).fetch_add(1, Ordering::Relaxed);
    ///             }
    ///         });
    ///     }
    /// });
    /// let g = counts.guard();
    /// assert_eq!(counts.get("the", &g).unwrap().load(Ordering::Relaxed), 12);
    /// assert_eq!(counts.get("bat", &g).unwrap().load(Ordering::Relaxed), 4);
    /// ```
    pub fn get_or_insert_with<'g>(&'g self, key: K, make: impl FnOnce() -> V, guard: &'g Guard) -> &'g V {
        self.ns0().get_or_insert_with(key, make, guard)
    }

    /// Like [`get_or_insert_with`](Self::get_or_insert_with), with
    /// allocation failure as an error.
    pub fn try_get_or_insert_with<'g>(
        &'g self,
        key: K,
        make: impl FnOnce() -> V,
        guard: &'g Guard,
    ) -> Result<&'g V, Error> {
        self.ns0().try_get_or_insert_with(key, make, guard)
    }

    /// Replace the value `v` of a present `key` with `f(v)`, atomically: the
    /// new value, valid while `guard` lives, or None if the key is absent.
    /// Lock-free: the new entry replaces the one `f` read only if no other
    /// thread changed the key meanwhile, else `f` runs again on the value
    /// there (its result for the old one is dropped). Panics on allocation
    /// failure.
    ///
    /// Counting with plain values:
    ///
    /// ```
    /// let counts = dlht::AllocMap::<String, u64>::new();
    /// let g = counts.guard();
    /// for w in "a b a c a".split(' ') {
    ///     if counts.update(&w.to_string(), |n| n + 1, &g).is_none() {
    ///         // Absent: insert 1, or add to a count another thread inserted first.
    ///         if let Err(lost) = counts.insert(w.to_string(), 1, &g) {
    ///             counts.update(&lost.key, |n| n + 1, &g);
    ///         }
    ///     }
    /// }
    /// assert_eq!(counts.get("a", &g), Some(&3));
    /// assert_eq!(counts.update(&"z".to_string(), |n| n + 1, &g), None);
    /// ```
    pub fn update<'g>(&'g self, key: &K, f: impl FnMut(&V) -> V, guard: &'g Guard) -> Option<&'g V>
    where
        K: Clone,
    {
        self.ns0().update(key, f, guard)
    }

    /// [`update`](Self::update), with allocation failure as an error (the
    /// map unchanged).
    pub fn try_update<'g>(
        &'g self,
        key: &K,
        f: impl FnMut(&V) -> V,
        guard: &'g Guard,
    ) -> Result<Option<&'g V>, Error>
    where
        K: Clone,
    {
        self.ns0().try_update(key, f, guard)
    }

    /// Read-modify-write `key` whatever its state, as papaya's `compute`:
    /// `f` sees the value there (None if absent) and answers with an
    /// [`Op`] — store a value (insert or replace), remove the key, or keep
    /// things as they are. The answer is applied only to the state `f`
    /// judged (a compare-and-replace of that very entry); if another
    /// thread changed the key meanwhile, `f` runs again on what is there
    /// now, and a value it made for the old state is dropped. Returns
    /// what was done ([`Computed`]); the references are valid while
    /// `guard` lives. Panics on allocation failure; see
    /// [`try_compute`](Self::try_compute).
    ///
    /// ```
    /// use dlht::{AllocMap, Computed, Op};
    /// let m = AllocMap::<String, u64>::new();
    /// let g = m.guard();
    /// // Count, inserting 1 for a new key.
    /// let bump = |n: Option<&u64>| Op::Upsert(n.map_or(1, |n| n + 1));
    /// assert_eq!(m.compute("a".into(), bump, &g), Computed::Inserted(&1));
    /// assert_eq!(m.compute("a".into(), bump, &g), Computed::Replaced { old: &1, new: &2 });
    /// // Remove once a count reaches 2; keep otherwise.
    /// let drop_at_2 = |n: Option<&u64>| if n == Some(&2) { Op::Remove } else { Op::Keep };
    /// assert_eq!(m.compute("a".into(), drop_at_2, &g), Computed::Removed(&2));
    /// assert_eq!(m.compute("a".into(), drop_at_2, &g), Computed::Unchanged(None));
    /// ```
    pub fn compute<'g>(
        &'g self,
        key: K,
        f: impl FnMut(Option<&V>) -> Op<V>,
        guard: &'g Guard,
    ) -> Computed<&'g V>
    where
        K: Clone,
    {
        self.ns0().compute(key, f, guard)
    }

    /// [`compute`](Self::compute), with allocation failure as an error
    /// (the map unchanged by the step that failed).
    pub fn try_compute<'g>(
        &'g self,
        key: K,
        f: impl FnMut(Option<&V>) -> Op<V>,
        guard: &'g Guard,
    ) -> Result<Computed<&'g V>, Error>
    where
        K: Clone,
    {
        self.ns0().try_compute(key, f, guard)
    }

    /// Keep only the entries (of every namespace) that `keep(namespace,
    /// key, value)` accepts, removing the others. Concurrent-safe and
    /// non-blocking, like [`Map::retain`](crate::Map::retain): it walks the
    /// map weakly consistently and removes each rejected entry with
    /// [`remove_if`](Self::remove_if) on the value it judged, so a value
    /// changed meanwhile is judged again. The values removed are freed
    /// once no guard can read them (see [`Guard::flush`]). Returns how many
    /// entries it removed.
    ///
    /// ```
    /// let m: dlht::AllocMap<u64, String> = (0..10).map(|k| (k, k.to_string())).collect();
    /// let g = m.guard();
    /// assert_eq!(m.retain(|_, k, _| k % 2 == 0, &g), 5);
    /// assert_eq!(m.len(), 5);
    /// ```
    pub fn retain(&self, mut keep: impl FnMut(usize, &K, &V) -> bool, guard: &Guard) -> usize {
        let mut removed = 0;
        for (ns, k, v) in self.iter(guard) {
            if !keep(ns, k, v) {
                let view = Namespace { map: self, ns: ns as u16 };
                if view.remove_if(k, |now| !keep(ns, k, now), guard).is_some() {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Remove every entry of every namespace: [`retain`](Self::retain)
    /// keeping nothing, with its guarantees (every key present for the
    /// whole call is gone afterwards). Returns how many it removed; their
    /// memory leaves [`memory`](Self::memory) at once and is freed once no
    /// guard can read it.
    ///
    /// ```
    /// let m: dlht::AllocMap<u64, String> = (0..10).map(|k| (k, "x".repeat(100))).collect();
    /// let g = m.guard();
    /// assert!(m.memory().value_bytes > 0);
    /// assert_eq!(m.clear(&g), 10);
    /// assert!(m.is_empty());
    /// assert_eq!(m.memory().value_bytes, 0);
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

    /// Keys the index holds before it must grow (see [`Map::capacity`](crate::Map::capacity)).
    pub fn capacity(&self) -> usize {
        self.index.capacity()
    }

    /// Grow ahead of a known load so that `additional` more keys fit
    /// without a resize (see [`Map::reserve`](crate::Map::reserve)). Panics
    /// if the index cannot grow; see [`try_reserve`](Self::try_reserve).
    ///
    /// ```
    /// let m = dlht::AllocMap::<String, u64>::new();
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
    /// let m = dlht::AllocMap::<String, u64>::new();
    /// assert!(m.try_reserve(usize::MAX).is_err());
    /// ```
    pub fn try_reserve(&self, additional: usize) -> Result<(), Error> {
        self.index.try_reserve(additional)
    }

    /// Shrink the index to the smallest that holds the map's keys (see
    /// [`Map::shrink_to_fit`](crate::Map::shrink_to_fit)); non-blocking
    /// like any resize. The entries stay where they are: only the index
    /// moves.
    ///
    /// ```
    /// let m = dlht::AllocMap::<u64, String>::new();
    /// let g = m.guard();
    /// for k in 0..100_000 {
    ///     m.insert(k, k.to_string(), &g).unwrap();
    /// }
    /// let big = m.capacity();
    /// for k in 10..100_000 {
    ///     m.remove(&k, &g);
    /// }
    /// m.shrink_to_fit();
    /// assert!(m.capacity() < big / 100);
    /// assert_eq!(m.get(&3, &g).map(String::as_str), Some("3"));
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
    /// [`Map::stats`](crate::Map::stats)); its memory counts the entries.
    ///
    /// ```
    /// let m = dlht::AllocMap::<u64, [u8; 100]>::new();
    /// m.insert(1, [0; 100], &m.guard()).unwrap();
    /// let s = m.stats();
    /// assert_eq!(s.occupied_slots, 1);
    /// assert!(s.memory.value_bytes >= 100);
    /// ```
    pub fn stats(&self) -> crate::Stats {
        self.index.stats()
    }

    /// Start loading `key`'s bin into the cache (see
    /// [`Map::prefetch`](crate::Map::prefetch)).
    #[inline]
    pub fn prefetch<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.ns0().prefetch(key)
    }

    /// A weakly consistent iterator over every namespace's entries, as
    /// `(namespace, &key, &value)`, valid while `guard` lives (see
    /// [`Iter`](crate::Iter) for what it guarantees).
    ///
    /// ```
    /// let m = dlht::AllocMap::<u64, String>::new();
    /// let g = m.guard();
    /// m.insert(1, "one".into(), &g).unwrap();
    /// m.namespace(3).unwrap().insert(1, "uno".into(), &g).unwrap();
    /// let mut all: Vec<_> = m.iter(&g).map(|(ns, k, v)| (ns, *k, v.as_str())).collect();
    /// all.sort();
    /// assert_eq!(all, [(0, 1, "one"), (3, 1, "uno")]);
    /// ```
    pub fn iter<'g>(&'g self, guard: &'g Guard) -> AllocIter<'g, K, V, S> {
        AllocIter { inner: self.index.iter(guard), _kv: PhantomData }
    }

    /// The entries at one instant, even under concurrent updates (the
    /// index's [`Map::snapshot`](crate::Map::snapshot): updates and gets
    /// wait for one pass over the index), as `(namespace, key, value)`,
    /// readable while `guard` lives.
    ///
    /// ```
    /// let m = dlht::AllocMap::<String, u32>::new();
    /// let g = m.guard();
    /// m.insert("a".to_string(), 1, &g).unwrap();
    /// m.namespace(7).unwrap().insert("a".to_string(), 2, &g).unwrap();
    /// let mut all: Vec<_> = m.snapshot(&g).collect();
    /// all.sort();
    /// assert_eq!(all, [(0, &"a".to_string(), &1), (7, &"a".to_string(), &2)]);
    /// ```
    pub fn snapshot<'g>(&'g self, guard: &'g Guard) -> AllocIter<'g, K, V, S> {
        AllocIter { inner: self.index.snapshot(guard), _kv: PhantomData }
    }
}

impl<'m, K, V, S> Namespace<'m, K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher,
{
    /// The namespace's id.
    pub fn id(&self) -> usize {
        self.ns as usize
    }

    #[inline(always)]
    fn signature<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.map.hasher.hash_one(key) ^ namespace_mix(self.ns)
    }

    /// Whether an element of the index is this namespace's `key`. The
    /// index calls it only on elements read under the caller's guard.
    #[inline(always)]
    fn is_mine<'k, Q>(&self, key: &'k Q) -> impl Fn(ValueWord) -> bool + 'k
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let ns = self.ns;
        move |e| {
            // Planted bug (scripts/planted-bugs.sh): trust the signature.
            let trust = planted(Plant::TrustSignature);
            // SAFETY: read under a guard (the index's contract).
            e.namespace() == ns && (trust || unsafe { node::<K, V>(e) }.key.borrow() == key)
        }
    }

    /// See [`AllocMap::prefetch`].
    ///
    /// ```
    /// let m = dlht::AllocMap::<u64, u64>::new();
    /// let ns = m.namespace(2).unwrap();
    /// ns.prefetch(&7);
    /// assert!(!ns.contains_key(&7));
    /// ```
    #[inline]
    pub fn prefetch<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.index.prefetch(self.signature(key))
    }

    /// See [`AllocMap::get`].
    #[inline]
    pub fn get<Q>(&self, key: &Q, guard: &'m Guard) -> Option<&'m V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let e = self.map.index.get(self.signature(key), &self.is_mine(key), guard)?;
        // SAFETY: read just now, under `guard`.
        Some(&unsafe { node::<K, V>(e) }.value)
    }

    /// See [`AllocMap::get_many`].
    pub fn get_many<Q>(
        &self,
        keys: &[&Q],
        out: &mut [Option<&'m V>],
        access: Access,
        guard: &'m Guard,
    ) -> Result<(), Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if keys.len() != out.len() {
            return Err(Error::LengthMismatch { requests: keys.len(), responses: out.len() });
        }
        let mut sigs = [0u64; PASS];
        let mut words = [None; PASS];
        for (keys, out) in keys.chunks(PASS).zip(out.chunks_mut(PASS)) {
            let n = keys.len();
            for (s, k) in sigs.iter_mut().zip(keys) {
                *s = self.signature(*k);
            }
            let verify = self.map.index.verifying();
            self.map.index.get_many(&sigs[..n], &mut words[..n])?;
            for w in words[..n].iter().flatten() {
                prefetch_node::<K, V>(*w, access);
            }
            for (((o, w), k), &sig) in out.iter_mut().zip(&words[..n]).zip(keys).zip(&sigs[..n]) {
                let e = w.and_then(|w| self.map.index.find(sig, w, verify, &self.is_mine(*k), guard));
                // SAFETY: read just now, under `guard`.
                *o = e.map(|e| &unsafe { node::<K, V>(e) }.value);
            }
        }
        Ok(())
    }

    /// See [`AllocMap::contains_key`].
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(key, &self.map.guard()).is_some()
    }

    /// See [`AllocMap::insert`].
    pub fn insert(&self, key: K, value: V, guard: &'m Guard) -> Result<(), Occupied<'m, K, V>> {
        or_panic(self.try_insert(key, value, guard))
    }

    /// See [`AllocMap::try_insert`].
    pub fn try_insert(
        &self,
        key: K,
        value: V,
        guard: &'m Guard,
    ) -> Result<Result<(), Occupied<'m, K, V>>, Error> {
        Ok(self.insert_node(key, value, guard)?.map(|_| ()))
    }

    /// Insert `key → value` if `key` is absent: the value stored (kept by
    /// `guard`), or the key and value back with the value there.
    fn insert_node(
        &self,
        key: K,
        value: V,
        guard: &'m Guard,
    ) -> Result<Result<&'m V, Occupied<'m, K, V>>, Error> {
        let sig = self.signature(&key);
        let fresh = fresh_node(self.ns, key, value)?;
        // SAFETY: ours until published, then kept by `guard` (a remove
        // retires it; it is freed only after `guard`).
        let mine = unsafe { node::<K, V>(fresh.word) };
        Ok(
            match self
                .map
                .index
                .insert(sig, fresh.word, &self.is_mine(&mine.key), guard, |_, cur| Ok(Some(cur)))?
            {
                None => {
                    fresh.publish();
                    Ok(&mine.value)
                }
                Some(cur) => {
                    let (key, value) = into_parts(fresh);
                    // SAFETY: read under `guard`.
                    Err(Occupied { current: &unsafe { node::<K, V>(cur) }.value, key, value })
                }
            },
        )
    }

    /// See [`AllocMap::upsert`].
    pub fn upsert(&self, key: K, value: V, guard: &'m Guard) -> Option<&'m V> {
        or_panic(self.try_upsert(key, value, guard))
    }

    /// See [`AllocMap::try_upsert`].
    pub fn try_upsert(&self, key: K, value: V, guard: &'m Guard) -> Result<Option<&'m V>, Error> {
        let sig = self.signature(&key);
        let fresh = fresh_node(self.ns, key, value)?;
        // SAFETY: ours until published.
        let key = &unsafe { node::<K, V>(fresh.word) }.key;
        let index = &self.map.index;
        let old = index.insert(sig, fresh.word, &self.is_mine(key), guard, |w, old| {
            Ok(index.replace(sig, w, old, fresh.word, guard)?.then_some(old))
        })?;
        fresh.publish();
        // SAFETY: read under `guard`.
        Ok(old.map(|e| &unsafe { node::<K, V>(e) }.value))
    }

    /// See [`AllocMap::put`].
    pub fn put(&self, key: &K, value: V, guard: &'m Guard) -> Result<&'m V, V>
    where
        K: Clone,
    {
        or_panic(self.try_put(key, value, guard))
    }

    /// [`put`](Self::put), with allocation failure as an error.
    pub fn try_put(&self, key: &K, value: V, guard: &'m Guard) -> Result<Result<&'m V, V>, Error>
    where
        K: Clone,
    {
        self.replace_if(key, value, guard, |_| true).map(|r| r.map(|(old, _)| old).map_err(|(v, _)| v))
    }

    /// See [`AllocMap::compare_and_replace`].
    pub fn compare_and_replace(
        &self,
        key: &K,
        current: &V,
        new: V,
        guard: &'m Guard,
    ) -> Result<&'m V, (V, Option<&'m V>)>
    where
        K: Clone,
    {
        or_panic(self.replace_if(key, new, guard, |old| core::ptr::eq(old, current))).map(|(old, _)| old)
    }

    /// Replace the value of a present `key` with `value` if `accept`
    /// accepts the value there; `Err` gives `value` back with the value
    /// there, if any.
    fn replace_if(
        &self,
        key: &K,
        value: V,
        guard: &'m Guard,
        accept: impl Fn(&V) -> bool,
    ) -> Result<Replaced<'m, V>, Error>
    where
        K: Clone,
    {
        let mut fresh = None;
        let mut value = Some(value);
        let r = self.map.index.replace_if(
            self.signature(key),
            &self.is_mine(key),
            // SAFETY: the index passes elements read under `guard`.
            |e| accept(&unsafe { node::<K, V>(e) }.value),
            || {
                let v = value.take().expect("dlht invariant: made once");
                Ok(fresh.insert(fresh_node(self.ns, key.clone(), v)?).word)
            },
            guard,
        )?;
        Ok(match r {
            Ok(old) => {
                let fresh = fresh.expect("dlht invariant: made to replace");
                // SAFETY: published below and then kept by `guard` (a later
                // replace or remove retires it; freed only after `guard`).
                let new = &unsafe { node::<K, V>(fresh.word) }.value;
                fresh.publish();
                // SAFETY: read under `guard`.
                Ok((&unsafe { node::<K, V>(old) }.value, new))
            }
            Err(found) => {
                let value = match fresh {
                    Some(f) => into_parts(f).1,
                    None => value.take().expect("dlht invariant: the value is in the node or here"),
                };
                // SAFETY: read under `guard`.
                Err((value, found.map(|e| &unsafe { node::<K, V>(e) }.value)))
            }
        })
    }

    /// See [`AllocMap::remove`].
    pub fn remove<Q>(&self, key: &Q, guard: &'m Guard) -> Option<&'m V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let e = self.map.index.remove(self.signature(key), &self.is_mine(key), guard)?;
        // SAFETY: retired just now, under `guard`.
        Some(&unsafe { node::<K, V>(e) }.value)
    }

    /// See [`AllocMap::remove_if`].
    pub fn remove_if<Q>(&self, key: &Q, mut accept: impl FnMut(&V) -> bool, guard: &'m Guard) -> Option<&'m V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mine = self.is_mine(key);
        // The index removes the element it found only if the word is
        // unchanged since, and asks again otherwise: `accept` judges the
        // value it removes. (A `RefCell` lets the index's `Fn` call it.)
        let accept = core::cell::RefCell::new(&mut accept);
        let mine_and_accepted = |e: ValueWord| {
            // SAFETY: the index calls this on elements read under `guard`.
            mine(e) && (accept.borrow_mut())(&unsafe { node::<K, V>(e) }.value)
        };
        let e = self.map.index.remove(self.signature(key), &mine_and_accepted, guard)?;
        // SAFETY: retired just now, under `guard`.
        Some(&unsafe { node::<K, V>(e) }.value)
    }

    /// See [`AllocMap::get_or_insert_with`].
    pub fn get_or_insert_with(&self, key: K, make: impl FnOnce() -> V, guard: &'m Guard) -> &'m V {
        or_panic(self.try_get_or_insert_with(key, make, guard))
    }

    /// See [`AllocMap::try_get_or_insert_with`].
    pub fn try_get_or_insert_with(
        &self,
        key: K,
        make: impl FnOnce() -> V,
        guard: &'m Guard,
    ) -> Result<&'m V, Error> {
        if let Some(v) = self.get(&key, guard) {
            return Ok(v);
        }
        // Lost to another insert: ours was never seen; it is dropped here.
        Ok(self.insert_node(key, make(), guard)?.unwrap_or_else(|lost| lost.current))
    }

    /// See [`AllocMap::update`].
    pub fn update(&self, key: &K, f: impl FnMut(&V) -> V, guard: &'m Guard) -> Option<&'m V>
    where
        K: Clone,
    {
        or_panic(self.try_update(key, f, guard))
    }

    /// See [`AllocMap::try_update`].
    pub fn try_update(
        &self,
        key: &K,
        mut f: impl FnMut(&V) -> V,
        guard: &'m Guard,
    ) -> Result<Option<&'m V>, Error>
    where
        K: Clone,
    {
        let Some(mut cur) = self.get(key, guard) else { return Ok(None) };
        loop {
            // Planted bug (scripts/planted-bugs.sh): replace whatever is
            // there, not only the value `f` read (lost updates).
            let unchanged = |there: &V| planted(Plant::UpdateBlind) || core::ptr::eq(there, cur);
            match self.replace_if(key, f(cur), guard, unchanged)? {
                Ok((_, new)) => return Ok(Some(new)),
                // Changed by another thread since `cur` was read: our value
                // (made from the old one) is dropped, the new one judged.
                Err((_, Some(there))) => cur = there,
                Err((_, None)) => return Ok(None),
            }
        }
    }

    /// Keep only the entries of this namespace that `keep` accepts (see
    /// [`AllocMap::retain`]). Returns how many it removed.
    pub fn retain(&self, mut keep: impl FnMut(&K, &V) -> bool, guard: &'m Guard) -> usize {
        let id = self.id();
        self.map.retain(|ns, k, v| ns != id || keep(k, v), guard)
    }

    /// See [`AllocMap::compute`].
    pub fn compute(&self, key: K, f: impl FnMut(Option<&V>) -> Op<V>, guard: &'m Guard) -> Computed<&'m V>
    where
        K: Clone,
    {
        or_panic(self.try_compute(key, f, guard))
    }

    /// See [`AllocMap::try_compute`].
    pub fn try_compute(
        &self,
        key: K,
        f: impl FnMut(Option<&V>) -> Op<V>,
        guard: &'m Guard,
    ) -> Result<Computed<&'m V>, Error>
    where
        K: Clone,
    {
        let mut entries = KeyEntries { ns: *self, key: Some(key), guard };
        compute::compute(&mut entries, f)
    }
}

/// One key of an [`AllocMap`] namespace, for [`compute`](compute::compute).
struct KeyEntries<'m, K, V, S> {
    ns: Namespace<'m, K, V, S>,
    /// Always there but while an insert holds it.
    key: Option<K>,
    guard: &'m Guard,
}

impl<K, V, S> KeyEntries<'_, K, V, S> {
    fn key(&self) -> &K {
        self.key.as_ref().expect("dlht invariant: the key is back after each insert")
    }
}

impl<'m, K, V, S> compute::Entries for KeyEntries<'m, K, V, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher,
{
    type Ref = &'m V;
    type Value = V;

    fn get(&mut self) -> Option<&'m V> {
        self.ns.get(self.key(), self.guard)
    }

    fn insert(&mut self, value: V) -> Result<Result<&'m V, &'m V>, Error> {
        let key = self.key.take().expect("dlht invariant: the key is back after each insert");
        match self.ns.insert_node(key, value, self.guard) {
            Ok(Ok(new)) => Ok(Ok(new)),
            Ok(Err(lost)) => {
                self.key = Some(lost.key);
                Ok(Err(lost.current))
            }
            // The key went into the node that failed and was freed with
            // it; this call ends here.
            Err(e) => Err(e),
        }
    }

    fn replace(&mut self, current: &'m V, value: V) -> Result<Result<(&'m V, &'m V), Option<&'m V>>, Error> {
        // Planted bug (scripts/planted-bugs.sh): replace whatever is there,
        // not only the value the closure judged (lost updates).
        let judged = |there: &V| planted(Plant::ComputeBlind) || core::ptr::eq(there, current);
        let r = self.ns.replace_if(self.key(), value, self.guard, judged)?;
        Ok(r.map_err(|(_, now)| now))
    }

    fn remove(&mut self, current: &'m V) -> bool {
        self.ns.remove_if(self.key(), |there| core::ptr::eq(there, current), self.guard).is_some()
    }
}

/// What a conditional replace did: the old and the new value, or the value
/// offered back with the one there (None: the key is absent).
type Replaced<'m, V> = Result<(&'m V, &'m V), (V, Option<&'m V>)>;

/// A weakly consistent iterator over an [`AllocMap`]'s entries: see
/// [`AllocMap::iter`].
pub struct AllocIter<'g, K, V, S> {
    inner: PointerIter<'g, Node<K, V>, SignatureMix>,
    _kv: PhantomData<(&'g K, &'g V, S)>,
}

impl<'g, K: 'g, V: 'g, S> Iterator for AllocIter<'g, K, V, S> {
    type Item = (usize, &'g K, &'g V);

    fn next(&mut self) -> Option<Self::Item> {
        let (_, e) = self.inner.next()?;
        // SAFETY: read under the guard the iterator borrows.
        let n = unsafe { node::<K, V>(e) };
        Some((e.namespace() as usize, &n.key, &n.value))
    }
}

/// Insert or replace each pair (later pairs win), as `HashMap` does.
///
/// ```
/// let mut m: dlht::AllocMap<String, u32> = [("a".to_string(), 1)].into_iter().collect();
/// m.extend([("a".to_string(), 2), ("b".to_string(), 3)]);
/// assert_eq!(m.get("a", &m.guard()), Some(&2));
/// assert_eq!(m.len(), 2);
/// ```
impl<K, V, S> Extend<(K, V)> for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher,
{
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        let g = self.guard();
        for (k, v) in iter {
            self.upsert(k, v, &g);
        }
    }
}

impl<K, V, S> FromIterator<(K, V)> for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher + Default,
{
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut m = or_panic(Self::try_with_capacity_and_hasher(iter.size_hint().0, S::default()));
        m.extend(iter);
        m
    }
}

/// A new map with the same entries (namespaces kept), cloned keys and
/// values and a clone of the hasher: a weakly consistent copy under
/// concurrent updates (see [`AllocMap::iter`]); [`AllocMap::snapshot`]
/// gives one instant. Panics if memory is refused.
///
/// ```
/// let m: dlht::AllocMap<String, u32> = [("a".to_string(), 1)].into_iter().collect();
/// let c = m.clone();
/// assert_eq!(c, m);
/// m.upsert("a".to_string(), 2, &m.guard());
/// assert_ne!(c, m);
/// ```
impl<K, V, S> Clone for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static + Clone,
    V: Send + Sync + 'static + Clone,
    S: BuildHasher + Clone,
{
    fn clone(&self) -> Self {
        let copy = or_panic(Self::try_with_capacity_and_hasher(self.len(), self.hasher.clone()));
        let (g, cg) = (self.guard(), copy.guard());
        for (ns, k, v) in self.iter(&g) {
            let space = or_panic(copy.namespace(ns));
            or_panic(space.try_upsert(k.clone(), v.clone(), &cg));
        }
        drop(cg);
        copy
    }
}

/// Equal when both hold the same keys, namespace by namespace, with equal
/// values, whatever their hashers (exact when neither changes meanwhile).
impl<K, V, S, S2> PartialEq<AllocMap<K, V, S2>> for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static + PartialEq,
    S: BuildHasher,
    S2: BuildHasher,
{
    fn eq(&self, other: &AllocMap<K, V, S2>) -> bool {
        let (g, og) = (self.guard(), other.guard());
        self.len() == other.len()
            && self
                .iter(&g)
                .all(|(ns, k, v)| other.namespace(ns).is_ok_and(|space| space.get(k, &og) == Some(v)))
    }
}

impl<K, V, S> Eq for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Send + Sync + 'static + Eq,
    S: BuildHasher,
{
}

impl<K, V, S> fmt::Debug for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static + fmt::Debug,
    V: Send + Sync + 'static + fmt::Debug,
    S: BuildHasher,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.guard();
        f.debug_map().entries(self.iter(&g).map(|(ns, k, v)| ((ns, k), v))).finish()
    }
}
