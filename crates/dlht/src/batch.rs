//! Batched requests with software prefetching (paper §3.3).
//!
//! A batch runs in the order given — request i takes effect before request
//! i+1 — while the memory accesses of later requests are already under way:
//! a sliding window hashes request i+[`WINDOW`] and prefetches its primary
//! bucket, and at distance `WINDOW/2` reads the (by then arriving) link
//! metadata and prefetches any chained link buckets, before request i runs
//! (the requests that distance never reaches get theirs up front).
//! Hashes live in a fixed ring on the stack: no heap allocation per batch.
//! The map is entered once per batch, so the reclamation cost is paid once.

use crate::arch::prefetch;
use crate::driver::{self, Front, Runner};
use crate::error::Error;
use crate::protocol::put::Change;
use crate::raw::bucket::PrimaryBucket;
use crate::raw::index::Index;
use crate::word::Inline;
use core::mem::MaybeUninit;

/// How many requests ahead the primary bucket is prefetched. Measured, not
/// derived: under load a miss on the development VM takes 300 ns or more,
/// several times an idle miss, so a window of 16 (about 100 ns of requests)
/// left gets of large batches at 48 M/s on one thread; 32 gave 55, 64 gave
/// 66–69, 128 no more (batches of 64–256 on a 2^25-key map). A batch no
/// longer than the window is hashed and prefetched whole before its first
/// request runs.
pub const WINDOW: usize = 64;

/// The ring of hashes a window keeps: request i's hash at `i % WINDOW`.
/// Left uninitialized: zeroing it per batch would be 512 bytes of stores
/// that cannot retire behind outstanding misses.
struct Ring([MaybeUninit<u64>; WINDOW]);

impl Ring {
    #[inline(always)]
    fn new() -> Self {
        Ring([MaybeUninit::uninit(); WINDOW])
    }

    #[inline(always)]
    fn set(&mut self, i: usize, hash: u64) {
        self.0[i % WINDOW] = MaybeUninit::new(hash);
    }

    /// The hash of request `i`.
    ///
    /// # Safety
    /// `set(i, _)` was called before, and `set(i + k * WINDOW, _)` for no
    /// k ≥ 1 since (it would have replaced the entry; an entry never set is
    /// uninitialized).
    #[inline(always)]
    unsafe fn get(&self, i: usize) -> u64 {
        // SAFETY: the caller's contract: the entry was set.
        unsafe { self.0[i % WINDOW].assume_init() }
    }
}

/// One request of a batch. (Not `PartialEq`: the read-modify-write
/// requests hold function pointers, whose comparison Rust does not make
/// meaningful.)
#[derive(Clone, Copy, Debug)]
pub enum Request<K, V> {
    /// Look the key up.
    Get(K),
    /// Insert if absent.
    Insert(K, V),
    /// Update if present.
    Put(K, V),
    /// Remove.
    Remove(K),
    /// Insert or overwrite.
    Upsert(K, V),
    /// Replace the value with the third if it is the second (see
    /// [`Map::compare_exchange`](crate::Map::compare_exchange)).
    CompareExchange(K, V, V),
    /// Replace a present value `v` with `f(v)`, atomically (see
    /// [`Map::update`](crate::Map::update); `f` may run more than once).
    Update(K, fn(V) -> V),
    /// Replace a present value `v` with `f(v, x)`, or insert `x` if the key
    /// is absent: [`fetch_add`](Self::fetch_add) is `Merge(k, delta,
    /// wrapping_add)`; max, min or bit-or merges work the same way.
    Merge(K, V, fn(V, V) -> V),
    /// The value of the key, inserting the given one first if absent.
    GetOrInsert(K, V),
    /// Remove the key if `f` accepts its value (see
    /// [`Map::remove_if`](crate::Map::remove_if)).
    RemoveIf(K, fn(V) -> bool),
}

impl<K: Copy, V> Request<K, V> {
    /// The request's key.
    #[inline]
    pub fn key(&self) -> K {
        match *self {
            Request::Get(k) | Request::Remove(k) | Request::Update(k, _) | Request::RemoveIf(k, _) => k,
            Request::Insert(k, _)
            | Request::Put(k, _)
            | Request::Upsert(k, _)
            | Request::GetOrInsert(k, _) => k,
            Request::CompareExchange(k, ..) | Request::Merge(k, ..) => k,
        }
    }
}

impl<K, V: crate::Counter> Request<K, V> {
    /// Add `delta` to the key's value, inserting `delta` if it is absent
    /// (see [`Map::fetch_add`](crate::Map::fetch_add)); the response is a
    /// [`Response::Merge`] with the value before.
    ///
    /// ```
    /// use dlht::{Request, Response, StopOn};
    /// let m = dlht::Map::<u64, u64>::new();
    /// let reqs = [Request::fetch_add(7, 1), Request::fetch_add(7, 1), Request::Get(7)];
    /// let mut out = [Response::NotExecuted; 3];
    /// m.batch(&reqs, &mut out, StopOn::Never).unwrap();
    /// assert_eq!(out, [Response::Merge(None), Response::Merge(Some(1)), Response::Get(Some(2))]);
    /// ```
    pub fn fetch_add(key: K, delta: V) -> Self {
        Request::Merge(key, delta, crate::Counter::wrapping_add)
    }
}

/// The result of one request, in the order of the requests.
#[derive(Copy, Debug, PartialEq, Eq, Default)]
pub enum Response<V> {
    /// Not run: an earlier request failed under [`StopOn::Failure`], or an
    /// error ended the batch.
    #[default]
    NotExecuted,
    /// Result of a get.
    Get(Option<V>),
    /// Result of an insert: `Err` carries the value already present.
    Insert(Result<(), V>),
    /// Result of a put: the old value, or None if absent (nothing inserted).
    Put(Option<V>),
    /// Result of a remove.
    Remove(Option<V>),
    /// Result of an upsert: the old value if the key was present.
    Upsert(Option<V>),
    /// Result of a compare-exchange: `Ok(expected)` if replaced, else the
    /// value there (None: absent).
    CompareExchange(Result<V, Option<V>>),
    /// Result of an update: the new value, or None if absent.
    Update(Option<V>),
    /// Result of a merge: the value before, or None if it was absent (and
    /// the given one was inserted).
    Merge(Option<V>),
    /// Result of a get-or-insert: the value now.
    GetOrInsert(V),
    /// Result of a conditional remove: the value removed, or None.
    RemoveIf(Option<V>),
}

/// A bitwise copy. (The derived `Clone` matches on the variant and copies
/// each payload; compiled with the variants' differing payload layouts it
/// evaluates payload tags speculatively, reading bytes a `NotExecuted`
/// never wrote — harmless, but memcheck reports every
/// `vec![Response::NotExecuted; n]` then.)
impl<V: Copy> Clone for Response<V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Response<V> {
    /// False for a get, put, update or remove that found no key (or a
    /// conditional remove declined), an insert that found one, a
    /// compare-exchange that found another value, and a request not
    /// executed.
    pub fn succeeded(&self) -> bool {
        match self {
            Response::NotExecuted => false,
            Response::Get(r) | Response::Put(r) | Response::Remove(r) => r.is_some(),
            Response::Update(r) | Response::RemoveIf(r) => r.is_some(),
            Response::Insert(r) => r.is_ok(),
            Response::CompareExchange(r) => r.is_ok(),
            Response::Upsert(_) | Response::Merge(_) | Response::GetOrInsert(_) => true,
        }
    }
}

/// When a batch stops early.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StopOn {
    /// Run every request.
    #[default]
    Never,
    /// Stop after the first request that does not succeed (see
    /// [`Response::succeeded`]); later ones are reported `NotExecuted`.
    Failure,
}

/// Run `n` requests through the prefetch window. `index()` is the index to
/// prefetch from, asked afresh at every step because a single-thread map
/// replaces (and frees) its index when it grows, and never held across a
/// call of `hash_of` or `exec`; `hash_of(i)` hashes request
/// i's key; `exec(i, hash)` runs it and says whether to go on. Returns the
/// number of requests executed.
#[inline(always)]
pub(crate) fn pipeline<'i>(
    index: impl Fn() -> &'i Index,
    n: usize,
    hash_of: impl Fn(usize) -> u64,
    mut exec: impl FnMut(usize, u64) -> Result<bool, Error>,
) -> Result<usize, Error> {
    let mut ring = Ring::new();
    let bin_ptr = |idx: &Index, h: u64| idx.bin_ptr(idx.bin_of(h));
    // `index()` is asked again after every hash: a hasher that calls back
    // into a single-thread map may grow it and free the index (see `local`).
    let ahead = |i: usize, ring: &mut Ring| {
        let h = hash_of(i);
        ring.set(i, h);
        prefetch(bin_ptr(index(), h));
    };
    for i in 0..n.min(WINDOW) {
        ahead(i, &mut ring);
    }
    // The requests the sliding step below never reaches (all of a batch
    // that fits the window, else the first half window) have their links
    // prefetched now: their primaries were all just requested, so reading
    // their link words waits about one miss for all of them together. (A
    // batch of 32 once got no link prefetch at all, and at two keys per
    // bin a third of its inserts need a link bucket.)
    // One index for all of them: no user code runs between these reads.
    let up_front = if n <= WINDOW { n } else { WINDOW / 2 };
    let idx = index();
    for j in 0..up_front {
        // SAFETY: requests 0..min(n, WINDOW) were set above.
        prefetch_links(idx, bin_ptr(idx, unsafe { ring.get(j) }));
    }
    for i in 0..n {
        // SAFETY: requests 0..min(n, WINDOW) were set above, and request i
        // + WINDOW is set below only after request i is read here.
        let h = unsafe { ring.get(i) };
        if i + WINDOW < n {
            ahead(i + WINDOW, &mut ring);
        }
        if n > WINDOW && i + WINDOW / 2 < n {
            let idx = index();
            // SAFETY: request i + WINDOW/2 was set up front if it is below
            // WINDOW, else at step i - WINDOW/2; request i + 3·WINDOW/2,
            // the next to take its entry, is set only at step i + WINDOW/2.
            prefetch_links(idx, bin_ptr(idx, unsafe { ring.get(i + WINDOW / 2) }));
        }
        // `exec` may free the index (single-thread growth): none is held.
        if !exec(i, h)? {
            return Ok(i + 1);
        }
    }
    Ok(n)
}

/// Prefetch the link buckets chained to a bin whose primary bucket should
/// be arriving in the cache.
#[inline(always)]
fn prefetch_links(index: &Index, primary: *const PrimaryBucket) {
    // SAFETY: `primary` points into `index`, which the caller keeps alive.
    let lm = unsafe { &*primary }.link_meta.load();
    if let Some(l) = lm.single() {
        prefetch(index.link_ptr(l));
    }
    if let Some(l) = lm.pair() {
        prefetch(index.link_ptr(l));
        prefetch(index.link_ptr(l + 1));
    }
}

/// `batch` on a map: the map is entered once for the whole batch. (The
/// batch pipeline sits above the driver: it calls the driver's word
/// operations, never the other way round.)
pub(crate) fn run<F: Front>(
    f: &F,
    requests: &[Request<F::K, F::V>],
    responses: &mut [Response<F::V>],
    stop: StopOn,
) -> Result<usize, Error> {
    f.enter(|r| execute(r, |w| f.hash_word(w), requests, responses, stop))
}

/// `get_many` on a map: the map is entered once for all the keys.
pub(crate) fn get_many_of<F: Front>(f: &F, keys: &[F::K], out: &mut [Option<F::V>]) -> Result<(), Error> {
    f.enter(|r| get_many(r, |w| f.hash_word(w), keys, out))
}

/// Run a mixed batch on `r`, which gives the index at every step (`Runner::current`).
pub(crate) fn execute<K: Inline, V: Inline, R: Runner>(
    r: &R,
    hash: impl Fn(u64) -> u64,
    requests: &[Request<K, V>],
    responses: &mut [Response<V>],
    stop: StopOn,
) -> Result<usize, Error> {
    if requests.len() != responses.len() {
        return Err(Error::LengthMismatch { requests: requests.len(), responses: responses.len() });
    }
    // Responses are written as requests finish, and only the ones not run
    // are set to NotExecuted afterwards: filling them all up front would put
    // a store per request into the store buffer before the first miss.
    let mut ran = 0;
    let keys = |i: usize| requests[i].key().into_word();
    let result = pipeline(
        || r.current(),
        requests.len(),
        |i| hash(keys(i)),
        |i, h| {
            let k = keys(i);
            let v = V::from_word;
            let resp = match requests[i] {
                Request::Get(_) => Response::Get(probe_or_get(r, h, k).map(v)),
                Request::Insert(_, val) => {
                    Response::Insert(driver::inserted(driver::insert_word(r, h, k, val.into_word())?))
                }
                Request::Put(_, val) => Response::Put(driver::put_word(r, h, k, val.into_word()).map(v)),
                Request::Remove(_) => Response::Remove(driver::remove_word(r, h, k).map(v)),
                Request::Upsert(_, val) => {
                    Response::Upsert(driver::upsert_word(r, h, k, val.into_word())?.map(v))
                }
                Request::CompareExchange(_, expected, new) => {
                    let (e, n) = (expected.into_word(), new.into_word());
                    Response::CompareExchange(match driver::update_word(r, h, k, |w| (w == e).then_some(n)) {
                        Change::Changed(_) => Ok(expected),
                        Change::Kept(cur) => Err(Some(v(cur))),
                        Change::Absent => Err(None),
                    })
                }
                // The requests that run user code (their fn) while they
                // hold a bin go through `user_code` (see `Runner`).
                Request::Update(_, f) => {
                    let mut new = 0;
                    Response::Update(
                        match driver::update_word(&r.user_code(), h, k, |w| {
                            new = f(v(w)).into_word();
                            Some(new)
                        }) {
                            Change::Changed(_) => Some(v(new)),
                            _ => None,
                        },
                    )
                }
                Request::Merge(_, x, f) => Response::Merge(
                    driver::merge_word(&r.user_code(), h, k, x.into_word(), |w| f(v(w), x).into_word())?
                        .map(v),
                ),
                Request::GetOrInsert(_, val) => Response::GetOrInsert(
                    driver::inserted(driver::insert_word(r, h, k, val.into_word())?)
                        .map_or_else(|there| there, |()| val),
                ),
                Request::RemoveIf(_, f) => {
                    Response::RemoveIf(match driver::remove_if_word(&r.user_code(), h, k, |w| f(v(w))) {
                        Change::Changed(old) => Some(v(old)),
                        _ => None,
                    })
                }
            };
            let go_on = stop == StopOn::Never || resp.succeeded();
            responses[i] = resp;
            ran = i + 1;
            Ok(go_on)
        },
    );
    responses[ran..].fill(Response::NotExecuted);
    result
}

/// A get in a batch: decided from the primary bucket when it can be
/// ([`probe_primary`](crate::protocol::get::probe_primary)), else the full
/// get.
#[inline(always)]
fn probe_or_get<R: Runner>(r: &R, h: u64, k: u64) -> Option<u64> {
    let idx = r.current();
    match crate::protocol::get::probe_primary(&idx.bin_as::<R::T>(idx.bin_of(h)), k) {
        Some(found) => found,
        None => driver::get_word(r, h, k),
    }
}

/// Gets of many keys through the prefetch window, each decided by
/// [`probe_or_get`].
pub(crate) fn get_many<K: Inline, V: Inline, R: Runner>(
    r: &R,
    hash: impl Fn(u64) -> u64,
    keys: &[K],
    out: &mut [Option<V>],
) -> Result<(), Error> {
    if keys.len() != out.len() {
        return Err(Error::LengthMismatch { requests: keys.len(), responses: out.len() });
    }
    pipeline(
        || r.current(),
        keys.len(),
        |i| hash(keys[i].into_word()),
        |i, h| {
            out[i] = probe_or_get(r, h, keys[i].into_word()).map(V::from_word);
            Ok(true)
        },
    )?;
    Ok(())
}
