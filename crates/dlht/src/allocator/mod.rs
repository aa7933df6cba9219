//! Allocator mode (paper §3.4.1–3.4.2): keys and values of any type and
//! size, each entry in its own allocation, reached through the index;
//! namespaces; references to values that stay valid under a guard.
//!
//! The index is an inlined [`Map`] from a key's 64-bit signature to a
//! tagged pointer (`entry::ValueWord`). Every change to a key swaps the
//! pointer word of its signature with one conditional operation on the
//! index — insert-if-absent, a value compare-and-swap, or a remove of that
//! exact word — so the index protocols and their proofs carry over: a
//! change linearizes at its index operation. Entries are immutable once
//! published; a replaced or removed entry is retired to epoch-based
//! reclamation (crossbeam-epoch), and freed once every thread that could
//! have read its pointer has unpinned.
//!
//! Why crossbeam-epoch: the index hands out pointer words from its own
//! slot reads, not through a reclamation crate's protected loads; in
//! classic epoch reclamation a pin protects everything read while pinned,
//! which is exactly that case (seize's `protect` loads would not cover
//! words read inside the index). Its global collector also means one pin
//! serves every map.
//!
//! No ABA: a word is compared only while the comparing thread is pinned,
//! and a pointer it read cannot be freed, hence not reused, until it
//! unpins; two equal words therefore point to the same unchanged entry.

mod entry;

pub use entry::NAMESPACES;

use crate::driver::{self, or_panic};
use crate::error::Error;
use crate::hash::{DefaultHashBuilder, SignatureMix};
use crate::map::Map;
use crate::protocol::put::Change;
use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use core::ptr::NonNull;
use entry::{try_box, Kind, List, Node, ValueWord};
use std::sync::atomic::{AtomicIsize, Ordering};

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
    /// Signature → value word.
    index: Map<u64, u64, SignatureMix>,
    hasher: S,
    /// Keys beyond the first of each signature (they live in lists).
    collided: AtomicIsize,
    /// Owns nodes of K and V (for drop check and auto traits).
    _owns: PhantomData<Box<Node<K, V>>>,
}

/// Pins the current thread for epoch-based reclamation: values read under
/// it stay allocated until it is dropped. Cheap to take (a thread-local
/// counter and a fence); holding one for long delays the freeing of every
/// value removed meanwhile, in every [`AllocMap`]. Not `Send`.
pub struct Guard {
    epoch: crossbeam_epoch::Guard,
}

impl Guard {
    /// Hand the values this thread retired to the global collector and
    /// free what no thread can still read. Reclamation does this by itself
    /// now and then; call it when memory should come back now (after
    /// removing many values, before measuring memory).
    pub fn flush(&self) {
        self.epoch.flush();
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

/// Whether a batch's caller will read the values it gets (paper §3.3: the
/// batch then prefetches the values, not only the entries' keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Only the entries' first lines (key comparison, small values).
    Key,
    /// Every line of each value (up to 4 KiB).
    Read,
}

/// Keys per pass of [`AllocMap::get_many`]: the index pipeline's window,
/// so one pass has as many entry misses in flight as the window has bins.
const PASS: usize = crate::batch::WINDOW;

/// Prefetch what the word `w` points to: its node's first line, and with
/// [`Access::Read`] the lines of the value (a list: its vector only).
#[inline(always)]
fn prefetch_entry<K, V>(w: u64, access: Access) {
    let vw = ValueWord::from_bits(w);
    let node = vw.addr() as *const Node<K, V>;
    crate::arch::prefetch(node);
    if access == Access::Read && vw.kind() == Kind::Node {
        // Addresses only: prefetching never dereferences.
        let start = node.wrapping_byte_add(core::mem::offset_of!(Node<K, V>, value)) as usize;
        let end = start + size_of::<V>().min(4096);
        let mut line = (start & !63) + 64;
        while line < end {
            crate::arch::prefetch(line as *const u8);
            line += 64;
        }
    }
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
        Ok(AllocMap {
            index: Map::try_with_capacity_and_hasher(n, SignatureMix)?,
            hasher,
            collided: AtomicIsize::new(0),
            _owns: PhantomData,
        })
    }

    /// Pin this thread: values read under the guard stay valid while it
    /// lives. One guard may serve many operations and many maps.
    #[inline]
    pub fn guard(&self) -> Guard {
        Guard { epoch: crossbeam_epoch::pin() }
    }

    /// The keys of namespace `ns` (`0..NAMESPACES`); namespace 0 is the
    /// map's own methods'.
    pub fn namespace(&self, ns: usize) -> Result<Namespace<'_, K, V, S>, Error> {
        if ns >= NAMESPACES {
            return Err(Error::NamespaceOutOfRange { namespace: ns });
        }
        Ok(Namespace { map: self, ns: ns as u16 })
    }

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
    /// [`Map::get_many`], then the entries are prefetched together before
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

    /// Number of keys, in all namespaces (as exact as [`Map::len`]).
    pub fn len(&self) -> usize {
        (self.index.len() as isize + self.collided.load(Ordering::Relaxed)).max(0) as usize
        // a count
    }

    /// True if the map holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys the index holds before it must grow (see [`Map::capacity`]).
    pub fn capacity(&self) -> usize {
        self.index.capacity()
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
        AllocIter { inner: self.index.iter(), list: None, _guard: guard, _kv: PhantomData }
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

    /// The node of this namespace's `key` among what `w` points to.
    ///
    /// # Safety
    /// `w` was read from the index while `guard` was pinned.
    #[inline(always)]
    unsafe fn find<Q>(&self, w: u64, key: &Q, _guard: &'m Guard) -> Option<&'m Node<K, V>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let w = ValueWord::from_bits(w);
        match w.kind() {
            Kind::Node => {
                if w.namespace() != self.ns {
                    return None;
                }
                // SAFETY: a published node, retired only after its word left
                // the index, and freed only after `guard` unpins.
                let n = unsafe { &*(w.addr() as *const Node<K, V>) };
                // Planted bug (scripts/planted-bugs.sh): trust the signature.
                if cfg!(dlht_plant = "trust_signature") {
                    return Some(n);
                }
                (n.key.borrow() == key).then_some(n)
            }
            Kind::List => {
                // SAFETY: as for a node: the list and its nodes.
                let l = unsafe { &*(w.addr() as *const List<K, V>) };
                // SAFETY: as above.
                l.nodes
                    .iter()
                    .map(|p| unsafe { &*p.as_ptr() })
                    .find(|n| n.ns == self.ns && n.key.borrow() == key)
            }
        }
    }

    /// See [`AllocMap::get`].
    #[inline]
    pub fn get<Q>(&self, key: &Q, guard: &'m Guard) -> Option<&'m V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let w = self.map.index.get(&self.signature(key))?;
        // SAFETY: read just now, under `guard`.
        unsafe { self.find(w, key, guard) }.map(|n| &n.value)
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
            self.map.index.get_many(&sigs[..n], &mut words[..n])?;
            for w in words[..n].iter().flatten() {
                prefetch_entry::<K, V>(*w, access);
            }
            for ((o, w), k) in out.iter_mut().zip(&words[..n]).zip(keys) {
                // SAFETY: read just now, under `guard`.
                *o = w.and_then(|w| unsafe { self.find(w, *k, guard) }).map(|n| &n.value);
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
        let sig = self.signature(&key);
        let node = Fresh::new(self.ns, key, value)?;
        Ok(match self.insert_node(sig, &node, guard, |_, cur| Ok(Some(cur)))? {
            None => {
                node.publish();
                Ok(())
            }
            Some(cur) => {
                let (key, value) = node.into_parts();
                Err(Occupied { current: &cur.value, key, value })
            }
        })
    }

    /// Put the fresh `node` in for its key `sig`: into the index, or beside
    /// the entries of a shared signature; None when done (the caller
    /// publishes the node). If the namespace's key is there, `present(w,
    /// entry)` is asked: `Some(r)` ends with `r` (the caller publishes or
    /// frees the node), None tries again. One index operation in the common
    /// case: the insert that fails hands back the word it found.
    fn insert_node<R>(
        &self,
        sig: u64,
        node: &Fresh<K, V>,
        guard: &'m Guard,
        mut present: impl FnMut(u64, &'m Node<K, V>) -> Result<Option<R>, Error>,
    ) -> Result<Option<R>, Error> {
        loop {
            let Err(w) = self.map.index.try_insert(sig, node.word)? else {
                return Ok(None);
            };
            // SAFETY: read under `guard`.
            match unsafe { self.find(w, node.key(), guard) } {
                Some(cur) => {
                    if let Some(r) = present(w, cur)? {
                        return Ok(Some(r));
                    }
                }
                None => {
                    if self.add_collided(sig, w, node, guard)? {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// See [`AllocMap::upsert`].
    pub fn upsert(&self, key: K, value: V, guard: &'m Guard) -> Option<&'m V> {
        or_panic(self.try_upsert(key, value, guard))
    }

    /// See [`AllocMap::try_upsert`].
    pub fn try_upsert(&self, key: K, value: V, guard: &'m Guard) -> Result<Option<&'m V>, Error> {
        let sig = self.signature(&key);
        let node = Fresh::new(self.ns, key, value)?;
        let old = self.insert_node(sig, &node, guard, |w, old| {
            Ok(self.replace(sig, w, old, &node, guard)?.then_some(old))
        })?;
        node.publish();
        Ok(old.map(|old| &old.value))
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
        self.replace_if(key, value, guard, |_| true).map(|r| r.map_err(|(v, _)| v))
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
        or_panic(self.replace_if(key, new, guard, |old| core::ptr::eq(old, current)))
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
    ) -> Result<Result<&'m V, (V, Option<&'m V>)>, Error>
    where
        K: Clone,
    {
        let sig = self.signature(key);
        let mut node: Option<Fresh<K, V>> = None;
        let mut value = Some(value);
        loop {
            let found = self.map.index.get(&sig).and_then(|w| {
                // SAFETY: read under `guard`.
                unsafe { self.find(w, key, guard) }.map(|n| (w, n))
            });
            let Some((w, old)) = found.filter(|(_, n)| accept(&n.value)) else {
                let value = match node {
                    Some(n) => n.into_parts().1,
                    None => value.take().expect("dlht invariant: the value is in the node or here"),
                };
                return Ok(Err((value, found.map(|(_, n)| &n.value))));
            };
            if node.is_none() {
                let v = value.take().expect("dlht invariant: the value is in the node or here");
                node = Some(Fresh::new(self.ns, key.clone(), v)?);
            }
            let n = node.as_ref().expect("dlht invariant: made above");
            if self.replace(sig, w, old, n, guard)? {
                node.expect("dlht invariant: made above").publish();
                return Ok(Ok(&old.value));
            }
        }
    }

    /// See [`AllocMap::remove`].
    pub fn remove<Q>(&self, key: &Q, guard: &'m Guard) -> Option<&'m V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let sig = self.signature(key);
        loop {
            let w = self.map.index.get(&sig)?;
            // SAFETY: read under `guard`.
            let old = unsafe { self.find(w, key, guard) }?;
            let done = match ValueWord::from_bits(w).kind() {
                Kind::Node => {
                    matches!(driver::remove_if(&self.map.index, &sig, |cur| cur == w), Change::Changed(_))
                }
                Kind::List => {
                    // Removing from a list allocates the shorter list; if
                    // memory is refused the key stays (reported as a panic,
                    // like any allocation failure of a non-`try` method).
                    let (new, list) = or_panic(self.list_without(w, old));
                    self.swap(sig, w, new, list)
                }
            };
            if done {
                if ValueWord::from_bits(w).kind() == Kind::List {
                    self.map.collided.fetch_sub(1, Ordering::Relaxed); // a count
                                                                       // SAFETY: the list left the index by the swap above.
                    unsafe { retire_list::<K, V>(w, guard) };
                }
                // SAFETY: the node left the index by the operation above.
                unsafe { retire_node(old, guard) };
                return Some(&old.value);
            }
        }
    }

    /// Swap the word of `sig` from `w` to `new`; true if done. A list made
    /// for `new` is freed if the swap fails (it was never published).
    fn swap(&self, sig: u64, w: u64, new: u64, list: Option<NonNull<List<K, V>>>) -> bool {
        let done = matches!(
            driver::update(&self.map.index, &sig, |cur| (cur == w).then_some(new)),
            Change::Changed(_)
        );
        if !done {
            if let Some(l) = list {
                // SAFETY: made by `try_box` and never published.
                drop(unsafe { Box::from_raw(l.as_ptr()) });
            }
        }
        done
    }

    /// Replace `old` (found in `w`) by `node`; true if done, and `old` and
    /// any replaced list are retired.
    fn replace(
        &self,
        sig: u64,
        w: u64,
        old: &Node<K, V>,
        node: &Fresh<K, V>,
        guard: &Guard,
    ) -> Result<bool, Error> {
        let (new, list) = match ValueWord::from_bits(w).kind() {
            Kind::Node => (node.word, None),
            Kind::List => {
                // SAFETY: read under `guard`.
                let l = unsafe { &*(ValueWord::from_bits(w).addr() as *const List<K, V>) };
                let nodes =
                    try_vec(
                        l.nodes.iter().map(|&p| if core::ptr::eq(p.as_ptr(), old) { node.ptr } else { p }),
                    )?;
                list_word(nodes)?
            }
        };
        if !self.swap(sig, w, new, list) {
            return Ok(false);
        }
        if list.is_some() {
            // SAFETY: the old list left the index by the swap.
            unsafe { retire_list::<K, V>(w, guard) };
        }
        // SAFETY: `old` left the index by the swap.
        unsafe { retire_node(old, guard) };
        Ok(true)
    }

    /// Add `node` beside the entries of `w`, whose signature it shares;
    /// true if done.
    fn add_collided(&self, sig: u64, w: u64, node: &Fresh<K, V>, guard: &Guard) -> Result<bool, Error> {
        let vw = ValueWord::from_bits(w);
        let nodes = match vw.kind() {
            Kind::Node => {
                try_vec([NonNull::new(vw.addr() as *mut Node<K, V>), Some(node.ptr)].into_iter().flatten())?
            }
            Kind::List => {
                // SAFETY: read under `guard`.
                let l = unsafe { &*(vw.addr() as *const List<K, V>) };
                try_vec(l.nodes.iter().copied().chain([node.ptr]))?
            }
        };
        let (new, list) = list_word(nodes)?;
        if !self.swap(sig, w, new, list) {
            return Ok(false);
        }
        self.map.collided.fetch_add(1, Ordering::Relaxed); // a count
        if vw.kind() == Kind::List {
            // SAFETY: the old list left the index by the swap.
            unsafe { retire_list::<K, V>(w, guard) };
        }
        Ok(true)
    }

    /// The word for list `w` less `old`: a shorter list, or the one node left.
    fn list_without(&self, w: u64, old: &Node<K, V>) -> Result<NewWord<K, V>, Error> {
        // SAFETY: the caller read `w` under its guard.
        let l = unsafe { &*(ValueWord::from_bits(w).addr() as *const List<K, V>) };
        let nodes = try_vec(l.nodes.iter().copied().filter(|p| !core::ptr::eq(p.as_ptr(), old)))?;
        if let [one] = nodes[..] {
            // SAFETY: a published node of the list.
            let ns = unsafe { one.as_ref() }.ns;
            let word = ValueWord::new(Kind::Node, ns, one.as_ptr() as usize)
                .expect("dlht invariant: checked at insert");
            return Ok((word.bits(), None));
        }
        list_word(nodes)
    }
}

/// A word to swap in, and the fresh list it points to, if it is one.
type NewWord<K, V> = (u64, Option<NonNull<List<K, V>>>);

/// Collect into a vector, reporting allocation failure.
fn try_vec<T>(items: impl Iterator<Item = T>) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    let n = items.size_hint().1.expect("dlht invariant: a bounded iterator");
    v.try_reserve_exact(n).map_err(|_| Error::AllocFailed { bytes: n * size_of::<T>() })?;
    v.extend(items);
    Ok(v)
}

/// A fresh list of `nodes` and its word.
fn list_word<K, V>(nodes: Vec<NonNull<Node<K, V>>>) -> Result<NewWord<K, V>, Error> {
    let list = try_box(List { nodes })?;
    match ValueWord::new(Kind::List, 0, list.as_ptr() as usize) {
        Some(w) => Ok((w.bits(), Some(list))),
        None => {
            // SAFETY: just made, never published.
            drop(unsafe { Box::from_raw(list.as_ptr()) });
            Err(Error::Unsupported)
        }
    }
}

/// Hand a node that left the index to epoch reclamation.
///
/// # Safety
/// No slot or list reachable from now on points to `node`, and it is
/// retired once.
unsafe fn retire_node<K, V>(node: &Node<K, V>, guard: &Guard) {
    let p = node as *const Node<K, V> as *mut Node<K, V>;
    // SAFETY: freed after every thread pinned now has unpinned, when no
    // reference to it can remain (the caller's contract); K and V are Send
    // + 'static (the map's bounds), so dropping them on the collecting
    // thread, possibly after the map is gone, is sound.
    unsafe { guard.epoch.defer_unchecked(move || drop(Box::from_raw(p))) };
}

/// Hand a list container (not its nodes) that left the index to epoch
/// reclamation.
///
/// # Safety
/// As for [`retire_node`]; `w` is the list's word.
unsafe fn retire_list<K, V>(w: u64, guard: &Guard) {
    let p = ValueWord::from_bits(w).addr() as *mut List<K, V>;
    // SAFETY: as in `retire_node`; dropping a list frees its vector only.
    unsafe { guard.epoch.defer_unchecked(move || drop(Box::from_raw(p))) };
}

/// A node allocated but not yet published: freed (key and value dropped)
/// if the operation ends without publishing it.
struct Fresh<K, V> {
    ptr: NonNull<Node<K, V>>,
    word: u64,
}

impl<K, V> Fresh<K, V> {
    fn new(ns: u16, key: K, value: V) -> Result<Self, Error> {
        let ptr = try_box(Node { ns, key, value })?;
        let word = ValueWord::new(Kind::Node, ns, ptr.as_ptr() as usize);
        let fresh = Fresh { ptr, word: word.map_or(0, ValueWord::bits) };
        // An address above 2^48 (5-level paging with a high mapping) cannot
        // be tagged; dropping `fresh` frees the node.
        word.map(|_| fresh).ok_or(Error::Unsupported)
    }

    fn key(&self) -> &K {
        // SAFETY: ours until published.
        unsafe { &self.ptr.as_ref().key }
    }

    /// The node is in the index now: the map owns it.
    fn publish(self) {
        core::mem::forget(self);
    }

    /// Free the node, giving its key and value back.
    fn into_parts(self) -> (K, V) {
        let p = self.ptr.as_ptr();
        core::mem::forget(self);
        // SAFETY: never published, so ours alone.
        let node = unsafe { Box::from_raw(p) };
        (node.key, node.value)
    }
}

impl<K, V> Drop for Fresh<K, V> {
    fn drop(&mut self) {
        // SAFETY: never published, so ours alone.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}

impl<K, V, S> Drop for AllocMap<K, V, S> {
    fn drop(&mut self) {
        // &mut self: no thread is inside, no reference to a value remains
        // (each borrowed the map), and retired nodes are reclamation's.
        for (_, w) in self.index.iter() {
            let vw = ValueWord::from_bits(w);
            match vw.kind() {
                // SAFETY: live in the index, so owned by the map alone now.
                Kind::Node => drop(unsafe { Box::from_raw(vw.addr() as *mut Node<K, V>) }),
                Kind::List => {
                    // SAFETY: as above, the list and each of its nodes.
                    let l = unsafe { Box::from_raw(vw.addr() as *mut List<K, V>) };
                    for p in l.nodes.iter() {
                        // SAFETY: as above.
                        drop(unsafe { Box::from_raw(p.as_ptr()) });
                    }
                }
            }
        }
    }
}

/// A weakly consistent iterator over an [`AllocMap`]'s entries: see
/// [`AllocMap::iter`].
pub struct AllocIter<'g, K, V, S> {
    inner: crate::map::Iter<'g, u64, u64, SignatureMix>,
    /// The rest of a collision list being yielded.
    list: Option<(&'g List<K, V>, usize)>,
    _guard: &'g Guard,
    _kv: PhantomData<S>,
}

impl<'g, K: 'g, V: 'g, S> Iterator for AllocIter<'g, K, V, S> {
    type Item = (usize, &'g K, &'g V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((l, i)) = self.list {
                if let Some(p) = l.nodes.get(i) {
                    self.list = Some((l, i + 1));
                    // SAFETY: a node of a list read under the guard.
                    let n = unsafe { &*p.as_ptr() };
                    return Some((n.ns as usize, &n.key, &n.value));
                }
                self.list = None;
            }
            let (_, w) = self.inner.next()?;
            let vw = ValueWord::from_bits(w);
            match vw.kind() {
                Kind::Node => {
                    // SAFETY: read under the guard.
                    let n = unsafe { &*(vw.addr() as *const Node<K, V>) };
                    return Some((n.ns as usize, &n.key, &n.value));
                }
                // SAFETY: read under the guard.
                Kind::List => self.list = Some((unsafe { &*(vw.addr() as *const List<K, V>) }, 0)),
            }
        }
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
