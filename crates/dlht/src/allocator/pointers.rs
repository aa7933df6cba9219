//! The index of an allocator-mode map: an inlined [`Map`] from key words
//! (inline keys or signatures, see [`entry`](super::entry)) to value
//! words, and the operations both allocator-mode maps share. Every change
//! to a key swaps the value word of its key word with one conditional
//! index operation — insert-if-absent, a compare-and-swap of the word, or
//! a remove of that exact word — so the index protocols and their proofs
//! carry over: a change linearizes at its index operation.
//!
//! Which element of a key word is a given key's is the caller's question,
//! answered by an `is_mine` predicate on element words; the index calls
//! it only on words it read under the caller's [`Guard`], so a predicate
//! may read the element.
//!
//! No ABA: a word is compared only while the comparing thread is pinned,
//! and an element it read cannot be freed, hence not reused, until it
//! unpins; two equal words therefore point to the same unchanged element.

use super::entry::{
    retire, retire_addr, trusted, trusted_in_list, verifying, Element, HeapRef, List, Shape, ValueWord,
};
use super::Guard;
use crate::driver::{self, or_panic};
use crate::error::Error;
use crate::hash::SignatureMix;
use crate::map::Map;
use crate::protocol::put::Change;
use core::hash::BuildHasher;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Key words → value words of elements of type `E`, with collision lists;
/// key words are hashed into bins by `H`.
pub(crate) struct PointerIndex<E: Element, H: BuildHasher = SignatureMix> {
    index: Map<u64, u64, H>,
    /// Keys beyond the first of each key word (they live in lists).
    collided: AtomicIsize,
    /// Where elements and lists are allocated: a persistent map's heap, or
    /// (None) the global allocator.
    pub heap: HeapRef,
    /// Owns the elements (for drop check and auto traits).
    _owns: PhantomData<Box<E>>,
}

impl<E: Element, H: BuildHasher> PointerIndex<E, H> {
    /// An empty index for `n` keys.
    pub fn try_with_capacity(n: usize, hasher: H) -> Result<Self, Error> {
        let index = Map::try_with_capacity_and_hasher(n, hasher)?;
        // Every reader of its bins holds one of the allocator's guards,
        // which a link given back waits out (`give_back_links`).
        index.return_links();
        Ok(PointerIndex { index, collided: AtomicIsize::new(0), heap: None, _owns: PhantomData })
    }

    /// Remove `kw`'s slot if it still holds `w`; the links its bin then
    /// emptied go back to the index's pool once every thread that may read
    /// them through the bin has let go (`guard`'s reclamation: pins and
    /// owned guards alike; `protocol::links`, U4).
    fn remove_word(&self, kw: u64, w: u64, guard: &Guard) -> bool {
        /// A link on its way back to its pool.
        struct Given(std::sync::Arc<crate::raw::index::LinkPool>, crate::raw::link_meta::LinkKind, u32);
        /// # Safety
        /// `addr` is a `Box<Given>`'s, retired once.
        unsafe fn give(addr: usize) {
            // SAFETY: the caller's contract.
            let g = unsafe { Box::from_raw(addr as *mut Given) };
            g.0.give(g.1, g.2);
        }
        let removed = driver::remove_if_giving_back_links(
            &self.index,
            &kw,
            |cur| cur == w,
            |pool, kind, first| {
                let addr = Box::into_raw(Box::new(Given(pool.clone(), kind, first))) as usize;
                // SAFETY: a fresh box nothing else reaches, retired once;
                // `give` touches only the pool it holds a count of.
                unsafe { guard.retire(addr, super::entry::Free::Plain(give)) };
            },
        );
        matches!(removed, Change::Changed(_))
    }

    /// An index over `index` (a persistent map's, opened), allocating in
    /// `heap`.
    #[cfg_attr(loom, allow(dead_code))]
    pub fn over(index: Map<u64, u64, H>, heap: HeapRef) -> Self {
        PointerIndex { index, collided: AtomicIsize::new(0), heap, _owns: PhantomData }
    }

    /// In a persistent map, this thread pinned from before an unlink to
    /// after the retirement that marks the element retired in the heap,
    /// whatever guard the caller holds (an owned guard pins no thread): the
    /// heap's reclamation waits out such pins before it frees blocks the
    /// index did not reach (`persist::heap`).
    #[inline(always)]
    fn pin_for_heap(&self) -> Option<crossbeam_epoch::Guard> {
        self.heap.map(|_| crossbeam_epoch::pin())
    }

    /// Hand an element that left the index to epoch reclamation. In a
    /// reopened persistent map, an element the heap's reclamation walk had
    /// not reached yet is not in the value bytes (the walk counts those it
    /// reaches): its removal's subtraction is given back.
    ///
    /// # Safety
    /// As for [`retire`]; `bytes` is `old`'s size (`E::bytes`), which its removal subtracted.
    unsafe fn retire_element(&self, old: ValueWord, bytes: i64, guard: &Guard) {
        // SAFETY: the caller's contract.
        if unsafe { retire::<E>(old, self.heap, guard) } {
            self.index.add_value_bytes(bytes);
        }
    }

    /// Hand a list container (not its elements) that left the index to
    /// epoch reclamation; as above, a list the walk had not reached gives
    /// back its keys beyond the first to the collided count.
    ///
    /// # Safety
    /// No slot reachable from now on holds `w`, the list's word; retired once.
    unsafe fn retire_list(&self, w: u64, guard: &Guard) {
        let addr = ValueWord::from_bits(w).addr();
        // SAFETY: a list read under `guard`, not freed before it unpins.
        let extra = unsafe { &*(addr as *const List) }.words().len() as isize - 1;
        // SAFETY: the caller's contract (`List::free`'s, once reclaimed).
        if unsafe { retire_addr(addr, List::free, self.heap, guard) } {
            // Relaxed: a count.
            self.collided.fetch_add(extra, Ordering::Relaxed);
        }
    }

    /// Count what a reopened persistent map's reclamation walk found
    /// (`allocator::persistent`): value bytes and keys beyond the first of
    /// each list, which the counts start without.
    #[cfg_attr(loom, allow(dead_code))]
    pub fn count_recovered(&self, value_bytes: i64, collided: isize) {
        self.index.add_value_bytes(value_bytes);
        // Relaxed: a count.
        self.collided.fetch_add(collided, Ordering::Relaxed);
    }

    /// The index's map of key words to value words.
    #[cfg_attr(loom, allow(dead_code))]
    pub fn words(&self) -> &Map<u64, u64, H> {
        &self.index
    }

    /// Bytes in use: the index's, and the elements' (see `Memory`).
    pub fn memory(&self) -> crate::Memory {
        crate::Memory { value_bytes: self.index.value_bytes().max(0) as usize, ..self.index.memory() }
    }

    /// Whether words loaded from the index from now on must have their
    /// checksums verified (`entry::verifying`): asked before a word is
    /// loaded, and passed to [`find`](Self::find) with it.
    #[inline(always)]
    pub fn verifying(&self) -> bool {
        verifying(self.heap)
    }

    /// The element of `w` (the value word of key word `kw`'s slot, loaded
    /// after [`verifying`](Self::verifying) said `verify`) that `is_mine`.
    /// In a persistent map, words that fail their heap's checks
    /// (`entry::trusted`: damage in the files) are skipped.
    #[inline(always)]
    pub fn find(
        &self,
        kw: u64,
        w: u64,
        verify: bool,
        is_mine: &impl Fn(ValueWord) -> bool,
        _guard: &Guard,
    ) -> Option<ValueWord> {
        let w = ValueWord::from_bits(w);
        if !trusted::<E>(self.heap, kw, w, verify) {
            return None;
        }
        if w.shape() != Shape::List {
            return is_mine(w).then_some(w);
        }
        // SAFETY: a published list, retired only after its word left the
        // index, and freed only after the caller's guard unpins.
        let l = unsafe { &*(w.addr() as *const List) };
        l.words()
            .iter()
            .map(|&e| ValueWord::from_bits(e))
            .find(|&e| trusted_in_list::<E>(self.heap, kw, e) && is_mine(e))
    }

    /// The element of key word `kw` that `is_mine`.
    #[inline(always)]
    pub fn get(&self, kw: u64, is_mine: &impl Fn(ValueWord) -> bool, guard: &Guard) -> Option<ValueWord> {
        let verify = self.verifying();
        let w = self.index.get(&kw)?;
        self.find(kw, w, verify, is_mine, guard)
    }

    /// The slot value words of `kws` (lists not opened), through the
    /// index's prefetching pipeline.
    pub fn get_many(&self, kws: &[u64], out: &mut [Option<u64>]) -> Result<(), Error> {
        self.index.get_many(kws, out)
    }

    /// Put the fresh element `fresh` in for key word `kw`: into the index,
    /// or beside the elements already there; None when done (the caller
    /// publishes it). If a key that `is_mine` is there, `present(w, e)` is
    /// asked (`w` the slot's word, `e` the key's element): `Some(r)` ends
    /// with `r` (the caller publishes or frees `fresh`), None tries again.
    /// One index operation in the common case: the insert that fails hands
    /// back the word it found.
    pub fn insert<R>(
        &self,
        kw: u64,
        fresh: ValueWord,
        is_mine: &impl Fn(ValueWord) -> bool,
        guard: &Guard,
        mut present: impl FnMut(u64, ValueWord) -> Result<Option<R>, Error>,
    ) -> Result<Option<R>, Error> {
        // SAFETY: the caller's fresh element, not freed before it returns.
        let published = || self.index.add_value_bytes(unsafe { E::bytes(fresh.addr()) } as i64);
        loop {
            let verify = self.verifying();
            let Err(w) = self.index.try_insert(kw, fresh.bits())? else {
                published();
                return Ok(None);
            };
            match self.find(kw, w, verify, is_mine, guard) {
                Some(cur) => {
                    if let Some(r) = present(w, cur)? {
                        return Ok(Some(r));
                    }
                }
                // A damaged word (a persistent map's file) is not followed:
                // the fresh element takes its place (the walk would take it
                // out; its block is left to the heap's sweep).
                None if !trusted::<E>(self.heap, kw, ValueWord::from_bits(w), verify) => {
                    if self.swap(kw, w, fresh.bits(), None) {
                        published();
                        return Ok(None);
                    }
                }
                None => {
                    if self.add_collided(kw, w, fresh, guard)? {
                        published();
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Replace the element that `is_mine` with one from `make` (called at
    /// most once) if `accept` accepts the element there: `Ok(old)` — the
    /// caller publishes the new element — or `Err` with the element there,
    /// if any (the caller frees what `make` made).
    pub fn replace_if(
        &self,
        kw: u64,
        is_mine: &impl Fn(ValueWord) -> bool,
        accept: impl Fn(ValueWord) -> bool,
        mut make: impl FnMut() -> Result<ValueWord, Error>,
        guard: &Guard,
    ) -> Result<Result<ValueWord, Option<ValueWord>>, Error> {
        let mut fresh = None;
        loop {
            let verify = self.verifying();
            let found =
                self.index.get(&kw).and_then(|w| self.find(kw, w, verify, is_mine, guard).map(|e| (w, e)));
            let Some((w, old)) = found.filter(|&(_, e)| accept(e)) else {
                return Ok(Err(found.map(|(_, e)| e)));
            };
            let new = match fresh {
                Some(n) => n,
                None => *fresh.insert(make()?),
            };
            if self.replace(kw, w, old, new, guard)? {
                return Ok(Ok(old));
            }
        }
    }

    /// Remove the element that `is_mine`: the element, retired (readable
    /// while `guard` lives).
    pub fn remove(&self, kw: u64, is_mine: &impl Fn(ValueWord) -> bool, guard: &Guard) -> Option<ValueWord> {
        let _pinned = self.pin_for_heap();
        loop {
            let verify = self.verifying();
            let w = self.index.get(&kw)?;
            let old = self.find(kw, w, verify, is_mine, guard)?;
            let in_list = ValueWord::from_bits(w).shape() == Shape::List;
            let done = if in_list {
                // Removing from a list allocates the shorter list; if memory
                // is refused the key stays (reported as a panic, like any
                // allocation failure of a non-`try` method).
                let (new, list) = or_panic(self.list_without(kw, w, old));
                self.swap(kw, w, new, list)
            } else {
                self.remove_word(kw, w, guard)
            };
            if done {
                if in_list {
                    // Relaxed: a count.
                    self.collided.fetch_sub(1, Ordering::Relaxed);
                    // SAFETY: the list left the index by the swap above.
                    unsafe { self.retire_list(w, guard) };
                }
                // SAFETY: the element left the index by the operation above
                // (read before it is retired; freed only after `guard`).
                unsafe {
                    let bytes = E::bytes(old.addr()) as i64;
                    self.index.add_value_bytes(-bytes);
                    self.retire_element(old, bytes, guard);
                }
                return Some(old);
            }
        }
    }

    /// Replace `old` (found in the slot word `w`) by `new`; true if done,
    /// and `old` and any replaced list are retired.
    pub fn replace(
        &self,
        kw: u64,
        w: u64,
        old: ValueWord,
        new: ValueWord,
        guard: &Guard,
    ) -> Result<bool, Error> {
        let _pinned = self.pin_for_heap();
        let (word, list) = if ValueWord::from_bits(w).shape() == Shape::List {
            // SAFETY: read under `guard`.
            let l = unsafe { &*(ValueWord::from_bits(w).addr() as *const List) };
            list_word(
                try_vec(l.words().iter().map(|&e| if e == old.bits() { new.bits() } else { e }))?,
                self.heap,
                kw,
            )?
        } else {
            (new.bits(), None)
        };
        if !self.swap(kw, w, word, list) {
            return Ok(false);
        }
        #[cfg(not(loom))]
        if self.heap.is_some() {
            crate::persist::crash::at(crate::persist::crash::CrashPoint::BytesReplaced);
        }
        if list.is_some() {
            // SAFETY: the old list left the index by the swap.
            unsafe { self.retire_list(w, guard) };
        }
        // SAFETY: `old` left the index by the swap (read before it is
        // retired; freed only after `guard`); `new` is in the index, read
        // under `guard`.
        unsafe {
            let bytes = E::bytes(old.addr()) as i64;
            self.index.add_value_bytes(E::bytes(new.addr()) as i64 - bytes);
            self.retire_element(old, bytes, guard);
        }
        Ok(true)
    }

    /// Swap the word of `kw` from `w` to `new`; true if done. A list made
    /// for `new` is freed if the swap fails (it was never published).
    fn swap(&self, kw: u64, w: u64, new: u64, list: Option<NonNull<List>>) -> bool {
        let done =
            matches!(driver::update(&self.index, &kw, |cur| (cur == w).then_some(new)), Change::Changed(_));
        if !done {
            if let Some(l) = list {
                // SAFETY: made by `List::try_new` in our heap and never published.
                unsafe { List::free_in(l.as_ptr() as usize, self.heap) };
            }
        }
        done
    }

    /// Add `fresh` beside the elements of the slot word `w`, whose key word
    /// it shares; true if done.
    fn add_collided(&self, kw: u64, w: u64, fresh: ValueWord, guard: &Guard) -> Result<bool, Error> {
        let _pinned = self.pin_for_heap();
        let in_list = ValueWord::from_bits(w).shape() == Shape::List;
        let words = if in_list {
            // SAFETY: read under `guard`.
            let l = unsafe { &*(ValueWord::from_bits(w).addr() as *const List) };
            try_vec(l.words().iter().copied().chain([fresh.bits()]))?
        } else {
            try_vec([w, fresh.bits()].into_iter())?
        };
        let (new, list) = list_word(words, self.heap, kw)?;
        if !self.swap(kw, w, new, list) {
            return Ok(false);
        }
        // Relaxed: a count.
        self.collided.fetch_add(1, Ordering::Relaxed);
        if in_list {
            // SAFETY: the old list left the index by the swap.
            unsafe { self.retire_list(w, guard) };
        }
        Ok(true)
    }

    /// The word for list `w` less `old`: a shorter list, or the one element
    /// left.
    fn list_without(&self, kw: u64, w: u64, old: ValueWord) -> Result<NewWord, Error> {
        // SAFETY: the caller read `w` under its guard.
        let l = unsafe { &*(ValueWord::from_bits(w).addr() as *const List) };
        let words = try_vec(l.words().iter().copied().filter(|&e| e != old.bits()))?;
        if let [one] = words[..] {
            return Ok((one, None));
        }
        list_word(words, self.heap, kw)
    }

    /// Number of keys (as exact as [`Map::len`](crate::Map::len)).
    pub fn len(&self) -> usize {
        // Relaxed: a count.
        (self.index.len() as isize + self.collided.load(Ordering::Relaxed)).max(0) as usize
    }

    /// Key words the index holds before it must grow.
    pub fn capacity(&self) -> usize {
        self.index.capacity()
    }

    /// Grow so that `additional` more key words fit without a resize (see
    /// [`Map::try_reserve`]).
    pub fn try_reserve(&self, additional: usize) -> Result<(), Error> {
        self.index.try_reserve(additional)
    }

    /// Shrink the index, keeping room for `min_capacity` key words (see
    /// [`Map::shrink_to`]).
    pub fn shrink_to(&self, min_capacity: usize) {
        self.index.shrink_to(min_capacity)
    }

    /// The index's shape and occupancy, with the memory of the elements
    /// counted in (see [`Map::stats`]).
    pub fn stats(&self) -> crate::Stats {
        let stats = self.index.stats();
        crate::Stats { memory: self.memory(), ..stats }
    }

    /// Start loading the bin of key word `kw` into the cache.
    #[inline]
    pub fn prefetch(&self, kw: u64) {
        self.index.prefetch(&kw)
    }

    /// A weakly consistent walk over every element, as (key word, element).
    pub fn iter<'g>(&'g self, _guard: &'g Guard) -> PointerIter<'g, E, H> {
        self.walk(Source::Walk(self.index.iter()), self.verifying())
    }

    /// [`iter`](Self::iter) over `count` bins from bin `start` (modulo the
    /// bins, wrapping).
    pub fn iter_bins<'g>(&'g self, start: usize, count: usize, _guard: &'g Guard) -> PointerIter<'g, E, H> {
        self.walk(Source::Walk(crate::map::Iter::bins(&self.index, start, count)), self.verifying())
    }

    /// Every element at one instant (the index's strong snapshot), as
    /// (key word, element). The elements stay readable while `guard` lives:
    /// it was pinned before the snapshot, so nothing retired since is freed.
    pub fn snapshot<'g>(&'g self, _guard: &'g Guard) -> PointerIter<'g, E, H> {
        let verify = self.verifying(); // before the words are loaded
        self.walk(Source::Snapshot(self.index.snapshot().into_iter()), verify)
    }

    /// A walk over `inner`'s words, all loaded after [`verifying`](Self::verifying) said `verify`.
    fn walk<'g>(&'g self, inner: Source<'g, H>, verify: bool) -> PointerIter<'g, E, H> {
        PointerIter { verify, inner, list: None, heap: self.heap, _e: PhantomData }
    }
}

#[cfg(all(feature = "rayon", not(loom)))]
impl<E: Element, H: BuildHasher + Sync> PointerIndex<E, H> {
    /// [`iter`](Self::iter) run by rayon's workers: the index's parallel
    /// walk ([`Map::par_iter`]), each collision list expanded by the worker
    /// that meets it. The elements and lists stay allocated for every
    /// worker: `guard`'s pin (the driving thread's, held across the whole
    /// run since the iterator borrows it) keeps anything retired since from
    /// being freed, whichever thread reads it.
    pub fn par_iter<'g>(
        &'g self,
        _guard: &'g Guard,
    ) -> impl rayon::iter::ParallelIterator<Item = (u64, ValueWord)> + 'g {
        use rayon::iter::ParallelIterator;
        let (heap, verify) = (self.heap, self.verifying());
        self.index.par_iter().flat_map_iter(move |(kw, w)| {
            let vw = ValueWord::from_bits(w);
            let ok = trusted::<E>(heap, kw, vw, verify);
            let (one, list) = if !ok {
                (None, &[][..])
            } else if vw.shape() == Shape::List {
                // SAFETY: read under `guard` (see above); checked whole.
                (None, unsafe { &*(vw.addr() as *const List) }.words())
            } else {
                (Some((kw, vw)), &[][..])
            };
            let in_list = list.iter().map(move |&e| (kw, ValueWord::from_bits(e)));
            one.into_iter().chain(in_list.filter(move |&(kw, e)| trusted_in_list::<E>(heap, kw, e)))
        })
    }
}

/// A word to swap in, and the fresh list it points to, if it is one.
type NewWord = (u64, Option<NonNull<List>>);

/// Collect into a vector, reporting allocation failure.
fn try_vec<T>(items: impl Iterator<Item = T>) -> Result<Vec<T>, Error> {
    let mut v = Vec::new();
    let n = items.size_hint().1.expect("dlht invariant: a bounded iterator");
    v.try_reserve_exact(n).map_err(|_| Error::AllocFailed { bytes: n * size_of::<T>() })?;
    v.extend(items);
    Ok(v)
}

/// A fresh list of `words` of key word `kw` (in `heap`, if any) and its word.
fn list_word(words: Vec<u64>, heap: HeapRef, kw: u64) -> Result<NewWord, Error> {
    let list = List::try_new(&words, heap, kw)?;
    match ValueWord::new(Shape::List, 0, list.as_ptr() as usize) {
        Some(w) => Ok((w.bits(), Some(list))),
        None => {
            // SAFETY: just made in `heap`, never published.
            unsafe { List::free_in(list.as_ptr() as usize, heap) };
            Err(Error::Unsupported)
        }
    }
}

impl<E: Element, H: BuildHasher> Drop for PointerIndex<E, H> {
    fn drop(&mut self) {
        // &mut self: no thread is inside, no reference to an element
        // remains (each borrowed the map), and retired elements are
        // reclamation's. A persistent map's elements stay in its heap's
        // file: dropping the map closes it.
        if self.heap.is_some() {
            return;
        }
        for (_, w) in self.index.iter() {
            let vw = ValueWord::from_bits(w);
            if vw.shape() != Shape::List {
                // SAFETY: live in the index, so owned by the map alone now.
                unsafe { E::free(vw.addr()) };
                continue;
            }
            // SAFETY: as above, the list and each of its elements.
            let l = unsafe { &*(vw.addr() as *const List) };
            for &e in l.words() {
                // SAFETY: as above.
                unsafe { E::free(ValueWord::from_bits(e).addr()) };
            }
            // SAFETY: as above; its words were read before.
            unsafe { List::free(vw.addr()) };
        }
    }
}

/// A weakly consistent walk over a [`PointerIndex`]: (key word, element).
pub(crate) struct PointerIter<'g, E, H> {
    inner: Source<'g, H>,
    /// The rest of a collision list being walked, with its key word.
    list: Option<(u64, &'g List, usize)>,
    /// A persistent map's heap, whose words are checked before they are
    /// followed (`entry::trusted`).
    heap: HeapRef,
    /// Whether they are verified: as the heap said before the walk began.
    verify: bool,
    /// (The element type, for the checks: no `E` is owned or borrowed.)
    _e: PhantomData<fn() -> E>,
}

/// Where a [`PointerIter`] gets the index's (key word, slot word) pairs.
enum Source<'g, H> {
    /// A weakly consistent walk.
    Walk(crate::map::Iter<'g, u64, u64, H>),
    /// A strong snapshot, taken whole.
    Snapshot(std::vec::IntoIter<(u64, u64)>),
}

impl<H: BuildHasher> Iterator for Source<'_, H> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        match self {
            Source::Walk(w) => w.next(),
            Source::Snapshot(s) => s.next(),
        }
    }
}

impl<E: Element, H: BuildHasher> Iterator for PointerIter<'_, E, H> {
    type Item = (u64, ValueWord);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((kw, l, i)) = self.list {
                if let Some(&e) = l.words().get(i) {
                    self.list = Some((kw, l, i + 1));
                    let e = ValueWord::from_bits(e);
                    if trusted_in_list::<E>(self.heap, kw, e) {
                        return Some((kw, e));
                    }
                    continue;
                }
                self.list = None;
            }
            let (kw, w) = self.inner.next()?;
            let vw = ValueWord::from_bits(w);
            if !trusted::<E>(self.heap, kw, vw, self.verify) {
                continue; // damage in a file: not served
            }
            if vw.shape() != Shape::List {
                return Some((kw, vw));
            }
            // SAFETY: read under the guard `iter` was given.
            self.list = Some((kw, unsafe { &*(vw.addr() as *const List) }, 0));
        }
    }
}
