//! What [`Map`](crate::Map) and [`LocalMap`](crate::LocalMap) share, in two
//! layers:
//! - the typed operations every public method forwards to (word encoding,
//!   hashing before the map is entered, result mapping), written once over
//!   a [`Front`];
//! - the word-level operations, written once over a [`Runner`], which knows
//!   how to run a per-bin protocol on its kind of index (following
//!   transfers, growing when full).
//!
//! Adding an operation touches its protocol file, this driver, the batch
//! enums and the public methods.

use crate::error::Error;
use crate::plant::{planted, Plant};
use crate::protocol::insert::Inserted;
use crate::protocol::put::Change;
use crate::protocol::{self, Step};
use crate::raw::header::{SlotState, SLOTS_PER_BIN};
use crate::raw::index::{BinRef, Index, MAX_BINS, MIN_BINS};
use crate::raw::threading::Threading;
use crate::word::Inline;

/// Keys per bin a table is sized for by `with_capacity(n)` (at most; bins
/// are a power of two): with uniform hashing about 14% of bins then need a
/// link bucket, well under the one-in-five that exist, so `n` inserts
/// rarely resize, and 2^25 keys take 2^24 bins (1 GiB) where 1.5 keys per
/// bin took twice that. About 11% of keys then sit in a link bucket (a
/// second cache line); at 1.5 keys per bin it was about 5%.
const KEYS_PER_BIN_AT_CAPACITY: f64 = 2.0;

/// Keys per bin from which an insert that runs out of link buckets grows
/// the index; below it the index's link limit is raised instead
/// ([`links_instead_of_growing`]). Above `KEYS_PER_BIN_AT_CAPACITY`, so a
/// map holding what it was sized for never grows under churn; near where
/// bins / 5 links run out for keys spread evenly (about 2.3 per bin), so a
/// growing map grows where it did.
const KEYS_PER_BIN_TO_GROW: f64 = 2.25;

/// Bins of a map from `new()`.
pub(crate) const DEFAULT_BINS: usize = 16;

/// Marker for a map's key and value types: invariant in both (they appear
/// as argument and as result), and no auto-trait inference from K and V
/// (Send and Sync are decided by hand).
pub(crate) type KeyValue<K, V> = fn(K, V) -> (K, V);

/// A map as its public methods see it: its key and value types, how a
/// key's word is hashed, and how to enter it to run word-level operations.
pub(crate) trait Front {
    /// Key type.
    type K: Inline;
    /// Value type.
    type V: Inline;
    /// What runs the protocols once inside the map.
    type Inside<'a>: Runner
    where
        Self: 'a;

    /// Hash a key's word. User code: the typed operations call it before
    /// entering the map, so a hasher that calls back in holds no index.
    fn hash_word(&self, w: u64) -> u64;

    /// Enter the map for `f` (a `Map` announces this thread until `f`
    /// returns; see `reclaim`).
    fn enter<X>(&self, f: impl FnOnce(&Self::Inside<'_>) -> X) -> X;
}

/// A key's word and its hash.
#[inline(always)]
fn word_and_hash<F: Front>(f: &F, key: &F::K) -> (u64, u64) {
    let k = key.into_word();
    (k, f.hash_word(k))
}

/// The public form of an insert's outcome: `Err` carries the value there.
#[inline(always)]
pub(crate) fn inserted<V: Inline>(i: Inserted) -> Result<(), V> {
    match i {
        Inserted::New => Ok(()),
        Inserted::Exists(old) => Err(V::from_word(old)),
        Inserted::Shadowed => unreachable!("dlht invariant: a plain insert waits out shadow inserts"),
    }
}

/// The panicking forms of the fallible operations (`insert`, `upsert`, the
/// constructors): the error becomes a panic with its message.
#[inline(always)]
pub(crate) fn or_panic<T>(r: Result<T, Error>) -> T {
    r.unwrap_or_else(|e| panic!("dlht: {e}"))
}

/// `get`.
#[inline(always)]
pub(crate) fn get<F: Front>(f: &F, key: &F::K) -> Option<F::V> {
    let (k, h) = word_and_hash(f, key);
    f.enter(|r| get_word(r, h, k)).map(F::V::from_word)
}

/// `try_insert`.
#[inline(always)]
pub(crate) fn try_insert<F: Front>(f: &F, key: F::K, value: F::V) -> Result<Result<(), F::V>, Error> {
    let ((k, h), v) = (word_and_hash(f, &key), value.into_word());
    f.enter(|r| insert_word(r, h, k, v)).map(inserted)
}

/// `put`.
#[inline(always)]
pub(crate) fn put<F: Front>(f: &F, key: F::K, value: F::V) -> Option<F::V> {
    let ((k, h), v) = (word_and_hash(f, &key), value.into_word());
    f.enter(|r| put_word(r, h, k, v)).map(F::V::from_word)
}

/// `remove`.
#[inline(always)]
pub(crate) fn remove<F: Front>(f: &F, key: &F::K) -> Option<F::V> {
    let (k, h) = word_and_hash(f, key);
    f.enter(|r| remove_word(r, h, k)).map(F::V::from_word)
}

/// `try_upsert`.
#[inline(always)]
pub(crate) fn try_upsert<F: Front>(f: &F, key: F::K, value: F::V) -> Result<Option<F::V>, Error> {
    let ((k, h), v) = (word_and_hash(f, &key), value.into_word());
    Ok(f.enter(|r| upsert_word(r, h, k, v))?.map(F::V::from_word))
}

/// A conditional update of a present key: `decide` maps the value found to
/// the new one, or declines with None (it may run once per value seen).
#[inline(always)]
pub(crate) fn update<F: Front>(f: &F, key: &F::K, mut decide: impl FnMut(F::V) -> Option<F::V>) -> Change {
    let (k, h) = word_and_hash(f, key);
    f.enter(|r| update_word(&r.user_code(), h, k, |w| decide(F::V::from_word(w)).map(Inline::into_word)))
}

/// A merge (see [`merge_word`]).
#[inline(always)]
pub(crate) fn merge<F: Front>(
    f: &F,
    key: F::K,
    absent: F::V,
    mut merge: impl FnMut(F::V) -> F::V,
) -> Result<Option<F::V>, Error> {
    let (k, h) = word_and_hash(f, &key);
    let absent = absent.into_word();
    let old =
        f.enter(|r| merge_word(&r.user_code(), h, k, absent, |w| merge(F::V::from_word(w)).into_word()))?;
    Ok(old.map(F::V::from_word))
}

/// A conditional remove: `take` says whether the value found goes (it may
/// run once per value seen).
#[inline(always)]
pub(crate) fn remove_if<F: Front>(f: &F, key: &F::K, mut take: impl FnMut(F::V) -> bool) -> Change {
    let (k, h) = word_and_hash(f, key);
    f.enter(|r| remove_if_word(&r.user_code(), h, k, |w| take(F::V::from_word(w))))
}

/// `try_shadow_insert`: the key's word and hash, and what the insert did.
#[inline]
pub(crate) fn shadow_insert<F: Front>(f: &F, key: &F::K) -> Result<(u64, u64, Inserted), Error> {
    let (k, h) = word_and_hash(f, key);
    Ok((k, h, f.enter(|r| shadow_insert_word(r, h, k))?))
}

/// Commit the shadow insert of the key with word `k` and hash `h`.
#[inline]
pub(crate) fn commit<F: Front>(f: &F, h: u64, k: u64, v: u64) {
    f.enter(|r| commit_word(r, h, k, v))
}

/// Abort the shadow insert of the key with word `k` and hash `h`.
#[inline]
pub(crate) fn abort<F: Front>(f: &F, h: u64, k: u64) {
    f.enter(|r| abort_word(r, h, k))
}

/// `prefetch`: start loading the primary bucket of `key`'s bin.
#[inline(always)]
pub(crate) fn prefetch<F: Front>(f: &F, key: &F::K) {
    let (_, h) = word_and_hash(f, key);
    f.enter(|r| {
        let idx = r.current();
        crate::arch::prefetch(idx.bin_ptr(idx.bin_of(h)));
    })
}

/// Runs per-bin protocols for one map, from the index it currently uses.
pub(crate) trait Runner {
    /// How the index is shared.
    type T: Threading;

    /// Run `op` on the bin of `hash` until it is done; `len_delta` says how
    /// its result changes the number of keys.
    fn run<X>(
        &self,
        hash: u64,
        op: impl FnMut(&BinRef<'_, Self::T>) -> Step<X>,
        len_delta: impl Fn(&X) -> i64,
    ) -> Result<X, Error>;

    /// The index the next operation starts from (asked again at every step
    /// of a batch: a single-thread map may have grown meanwhile).
    fn current(&self) -> &Index;

    /// What runs a protocol that calls user code (a closure, a batch
    /// request's fn) while it holds a bin: that code may call back in and
    /// resize the map (docs/DESIGN.md, "User code inside the map"). A
    /// `Map`'s announcement already keeps every index the protocol may
    /// hold, and its runner follows transfers; a `LocalMap`'s counts
    /// itself while it lives, so that a nested resize keeps the index it
    /// replaces until the outermost such runner is gone, and follows the
    /// resize.
    type UserCode<'a>: Runner
    where
        Self: 'a;

    /// See [`UserCode`](Self::UserCode).
    fn user_code(&self) -> Self::UserCode<'_>;

    /// True if a protocol that runs user code may be suspended on this
    /// thread holding a bin, or this runner is one
    /// ([`UserCode`](Self::UserCode)): a single-thread map's removes must
    /// then kill the key (`protocol::remove::remove_if`).
    fn calls_suspended(&self) -> bool;
}

/// Get on words.
#[inline(always)]
pub(crate) fn get_word<R: Runner>(r: &R, hash: u64, k: u64) -> Option<u64> {
    r.run(hash, |bin| protocol::get::get(bin, k), |_| 0).expect("dlht invariant: get never grows")
}

/// Insert-if-absent on words.
#[inline(always)]
pub(crate) fn insert_word<R: Runner>(r: &R, hash: u64, k: u64, v: u64) -> Result<Inserted, Error> {
    r.run(hash, |bin| protocol::insert::insert(bin, k, v), |r| (*r == Inserted::New) as i64)
}

/// Put on words.
#[inline(always)]
pub(crate) fn put_word<R: Runner>(r: &R, hash: u64, k: u64, v: u64) -> Option<u64> {
    r.run(hash, |bin| protocol::put::put(bin, k, v), |_| 0).expect("dlht invariant: put never grows")
}

/// Remove on words.
#[inline(always)]
pub(crate) fn remove_word<R: Runner>(r: &R, hash: u64, k: u64) -> Option<u64> {
    let kill = r.calls_suspended();
    r.run(hash, |bin| protocol::remove::remove(bin, k, kill), |r| -(r.is_some() as i64))
        .expect("dlht invariant: remove never grows")
}

/// Conditional update on words.
#[inline(always)]
pub(crate) fn update_word<R: Runner>(
    r: &R,
    hash: u64,
    k: u64,
    mut decide: impl FnMut(u64) -> Option<u64>,
) -> Change {
    r.run(hash, |bin| protocol::put::update(bin, k, &mut decide), |_| 0)
        .expect("dlht invariant: update never grows")
}

/// Conditional remove on words.
#[inline(always)]
pub(crate) fn remove_if_word<R: Runner>(
    r: &R,
    hash: u64,
    k: u64,
    mut take: impl FnMut(u64) -> bool,
) -> Change {
    let kill = r.calls_suspended();
    r.run(
        hash,
        |bin| protocol::remove::remove_if(bin, k, &mut take, kill),
        |c| -(matches!(c, Change::Changed(_)) as i64),
    )
    .expect("dlht invariant: remove never grows")
}

/// [`remove_if`], then, in the bin it freed a slot of, unchain the links
/// that bin emptied (`protocol::links`): each is passed to `given` with
/// the pool it goes back to once no thread can read it.
pub(crate) fn remove_if_giving_back_links<F: Front>(
    f: &F,
    key: &F::K,
    mut take: impl FnMut(F::V) -> bool,
    mut given: impl FnMut(&std::sync::Arc<crate::raw::index::LinkPool>, crate::raw::link_meta::LinkKind, u32),
) -> Change {
    let (k, h) = word_and_hash(f, key);
    f.enter(|r| {
        let r = r.user_code();
        let kill = r.calls_suspended();
        r.run(
            h,
            |bin| {
                let step = protocol::remove::remove_if(bin, k, |w| take(F::V::from_word(w)), kill);
                if let (Step::Done(Change::Changed(_)), Some(pool)) = (&step, bin.index.link_pool()) {
                    protocol::links::give_back(bin, |kind, first| given(pool, kind, first));
                }
                step
            },
            |c| -(matches!(c, Change::Changed(_)) as i64),
        )
        .expect("dlht invariant: remove never grows")
    })
}

/// Shadow insert on words: the key held hidden (no change to the count).
#[inline]
pub(crate) fn shadow_insert_word<R: Runner>(r: &R, hash: u64, k: u64) -> Result<Inserted, Error> {
    r.run(hash, |bin| protocol::insert::insert_as(bin, k, 0, protocol::insert::Mode::Shadow), |_| 0)
}

/// Commit a shadow insert on words: the key becomes present with `v`.
#[inline]
pub(crate) fn commit_word<R: Runner>(r: &R, hash: u64, k: u64, v: u64) {
    r.run(hash, |bin| protocol::shadow::commit(bin, k, v), |_| 1)
        .expect("dlht invariant: a commit never grows")
}

/// Abort a shadow insert on words: its slot is freed.
#[inline]
pub(crate) fn abort_word<R: Runner>(r: &R, hash: u64, k: u64) {
    r.run(hash, |bin| protocol::shadow::abort(bin, k), |_| 0).expect("dlht invariant: an abort never grows")
}

/// Upsert on words: put, else insert, until one succeeds. Each attempt
/// linearizes at the put or insert that succeeds.
#[inline]
pub(crate) fn upsert_word<R: Runner>(r: &R, hash: u64, k: u64, v: u64) -> Result<Option<u64>, Error> {
    loop {
        if let Some(old) = put_word(r, hash, k, v) {
            return Ok(Some(old));
        }
        if insert_word(r, hash, k, v)? == Inserted::New {
            return Ok(None);
        }
        // Inserted by another thread meanwhile: put again.
    }
}

/// Merge on words: replace a present value `w` with `merge(w)`, or insert
/// `absent` if the key is absent, until one succeeds: the value before, or
/// None if it was absent. Each call linearizes at the CAS or insert that
/// succeeds, so concurrent merges (counters) all count.
#[inline]
pub(crate) fn merge_word<R: Runner>(
    r: &R,
    hash: u64,
    k: u64,
    absent: u64,
    mut merge: impl FnMut(u64) -> u64,
) -> Result<Option<u64>, Error> {
    loop {
        if let Change::Changed(old) = update_word(r, hash, k, |w| Some(merge(w))) {
            return Ok(Some(old));
        }
        if insert_word(r, hash, k, absent)? == Inserted::New {
            return Ok(None);
        }
        // Inserted by another thread meanwhile: merge into it.
    }
}

/// Bins for a map sized for `n` keys.
pub(crate) fn bins_for(n: usize) -> Result<usize, Error> {
    let want = (n as f64 / KEYS_PER_BIN_AT_CAPACITY).ceil();
    if want > MAX_BINS as f64 {
        return Err(Error::CapacityOverflow);
    }
    Ok((want as usize).max(MIN_BINS).next_power_of_two())
}

/// Before growing because an insert found `bin` full: if what ran out was
/// link buckets (the bin has slots left to chain) while the map holds
/// fewer than [`KEYS_PER_BIN_TO_GROW`] keys per bin, raise the index's
/// link limit and say so (the insert then retries), rather than double an
/// index that is not full. `len` counts the map's keys (called only here,
/// on this rare path).
pub(crate) fn links_instead_of_growing<T: Threading>(
    bin: &BinRef<'_, T>,
    idx: &Index,
    len: impl FnOnce() -> usize,
) -> bool {
    // Planted bug (scripts/planted-bugs.sh): always grow, as before.
    !planted(Plant::LinksNeverRaised)
        && bin.header().first_invalid().is_some()
        && (len() as f64) < KEYS_PER_BIN_TO_GROW * idx.bins() as f64
        && idx.raise_link_soft()
}

/// Before growing because `bin` is full: a bin full of live keys that all
/// agree with `hash` in every bit an index can use will never be split by
/// growing, so report it instead of growing forever.
///
/// The keys are copied out before the hasher runs: it is user code and may
/// call back into the map, and a nested insert that grows a `LocalMap`
/// frees the index this bin lies in.
pub(crate) fn check_separable<T: Threading>(
    bin: &BinRef<'_, T>,
    hash: u64,
    hash_word: impl Fn(u64) -> u64,
) -> Result<(), Error> {
    let h = bin.header();
    if h.first_invalid().is_some() {
        return Ok(()); // link buckets ran out: growing helps
    }
    // Keys of Valid and Shadow slots; a pending or shadow slot's key is its
    // value word.
    let (pending, shadow) = (bin.pending(), bin.shadow());
    let mut lm = None;
    let mut keys = [0u64; SLOTS_PER_BIN];
    let mut n = 0;
    for i in h.slots_in(SlotState::Valid).or(h.slots_in(SlotState::Shadow)) {
        let slot = bin.slot(&mut lm, i);
        let k = slot.load_key();
        keys[n] = if k == pending || k == shadow { slot.load_value() } else { k };
        n += 1;
    }
    if n < SLOTS_PER_BIN {
        return Ok(()); // a slot is being claimed: the bin will change
    }
    let bits = (MAX_BINS - 1) as u64;
    let all_same = keys[..n].iter().all(|&k| hash_word(k) & bits == hash & bits);
    if all_same {
        Err(Error::BinOverflow)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_for_sizes() {
        assert_eq!(bins_for(0).unwrap(), 2);
        assert_eq!(bins_for(1).unwrap(), 2);
        assert_eq!(bins_for(2048).unwrap(), 1024);
        assert_eq!(bins_for(2049).unwrap(), 2048);
        assert!(bins_for(usize::MAX).is_err());
    }
}
