//! Batches of mixed requests for the allocator modes (paper §3.3), as
//! [`Map::batch`](crate::Map::batch) runs them for inline maps: requests
//! take effect in the order given, while the memory of later ones is
//! already on its way. Each pass of up to [`PASS`] requests first finds
//! the slot words of all its keys through the index's prefetching pipeline
//! and prefetches the entries they point to (and with [`Access::Read`] the
//! values of the gets, by their lengths), then runs the requests one by one
//! on warm lines.

use super::bytes::{ByteNamespace, ValueRef};
use super::entry::{Shape, ValueWord};
use super::{prefetch_lines, prefetch_node, Access, AllocMap, Guard, Namespace, Occupied, PASS};
use crate::batch::StopOn;
use crate::compute::{Computed, Op};
use crate::error::Error;
use core::hash::{BuildHasher, Hash};

/// One request of an [`AllocMap`] batch. Keys of reads are borrowed;
/// requests that may store take their key and value.
#[derive(Debug)]
pub enum AllocRequest<'r, K, V> {
    /// Look the key up.
    Get(&'r K),
    /// Insert if absent.
    Insert(K, V),
    /// Insert or replace.
    Upsert(K, V),
    /// Replace if present.
    Put(&'r K, V),
    /// Remove.
    Remove(&'r K),
    /// The value, inserting the given one first if absent.
    GetOrInsert(K, V),
    /// Replace a present value `v` with `f(v)` (see [`AllocMap::update`]).
    Update(&'r K, fn(&V) -> V),
    /// Remove if `f` accepts the value (see [`AllocMap::remove_if`]).
    RemoveIf(&'r K, fn(&V) -> bool),
    /// Read-modify-write whatever the state (see [`AllocMap::compute`]).
    Compute(K, fn(Option<&V>) -> Op<V>),
}

impl<K, V> AllocRequest<'_, K, V> {
    /// The request's key.
    pub fn key(&self) -> &K {
        match self {
            AllocRequest::Get(k) | AllocRequest::Put(k, _) | AllocRequest::Remove(k) => k,
            AllocRequest::Update(k, _) | AllocRequest::RemoveIf(k, _) => k,
            AllocRequest::Insert(k, _) | AllocRequest::Upsert(k, _) | AllocRequest::GetOrInsert(k, _) => k,
            AllocRequest::Compute(k, _) => k,
        }
    }
}

/// The result of one [`AllocRequest`], in the order of the requests;
/// references are valid while the batch's guard lives.
#[derive(Debug)]
pub enum AllocResponse<'g, 'r, K, V> {
    /// Not run (the batch stopped before it): the request, handed back.
    NotExecuted(AllocRequest<'r, K, V>),
    /// A get's value.
    Get(Option<&'g V>),
    /// An insert: `Err` hands back the key and value with the value there.
    Insert(Result<(), Occupied<'g, K, V>>),
    /// An upsert: the value replaced, if any.
    Upsert(Option<&'g V>),
    /// A put: the old value, or the value handed back if absent.
    Put(Result<&'g V, V>),
    /// A remove: the value removed.
    Remove(Option<&'g V>),
    /// A get-or-insert: the value there now.
    GetOrInsert(&'g V),
    /// An update: the new value, or None if absent.
    Update(Option<&'g V>),
    /// A conditional remove: the value removed, or None.
    RemoveIf(Option<&'g V>),
    /// What a compute did.
    Compute(Computed<&'g V>),
}

impl<K, V> AllocResponse<'_, '_, K, V> {
    /// As [`Response::succeeded`](crate::Response::succeeded): false for a
    /// request not run, a read, put, update or remove that found no key (or
    /// was declined), an insert that found one, and a compute that changed
    /// nothing.
    pub fn succeeded(&self) -> bool {
        match self {
            AllocResponse::NotExecuted(_) => false,
            AllocResponse::Get(r) | AllocResponse::Remove(r) => r.is_some(),
            AllocResponse::Update(r) | AllocResponse::RemoveIf(r) => r.is_some(),
            AllocResponse::Insert(r) => r.is_ok(),
            AllocResponse::Put(r) => r.is_ok(),
            AllocResponse::Upsert(_) | AllocResponse::GetOrInsert(_) => true,
            AllocResponse::Compute(c) => !matches!(c, Computed::Unchanged(_)),
        }
    }
}

/// One request of a [`ByteMap`](super::ByteMap) batch: keys and values
/// borrowed (stored requests copy them into the map).
#[derive(Clone, Copy, Debug)]
pub enum ByteRequest<'r> {
    /// Look the key up.
    Get(&'r [u8]),
    /// Insert if absent.
    Insert(&'r [u8], &'r [u8]),
    /// Insert or replace.
    Upsert(&'r [u8], &'r [u8]),
    /// Replace if present.
    Put(&'r [u8], &'r [u8]),
    /// Remove.
    Remove(&'r [u8]),
    /// The value, inserting the given one first if absent.
    GetOrInsert(&'r [u8], &'r [u8]),
    /// Replace a present value `v` with `f(v)` (see
    /// [`ByteMap::update`](super::ByteMap::update)).
    Update(&'r [u8], fn(&[u8]) -> Vec<u8>),
    /// Remove if `f` accepts the value.
    RemoveIf(&'r [u8], fn(&[u8]) -> bool),
    /// Read-modify-write whatever the state (see
    /// [`ByteMap::compute`](super::ByteMap::compute)).
    Compute(&'r [u8], fn(Option<&[u8]>) -> Op<Vec<u8>>),
}

impl<'r> ByteRequest<'r> {
    /// The request's key.
    pub fn key(&self) -> &'r [u8] {
        match *self {
            ByteRequest::Get(k) | ByteRequest::Remove(k) | ByteRequest::Update(k, _) => k,
            ByteRequest::RemoveIf(k, _) | ByteRequest::Compute(k, _) => k,
            ByteRequest::Insert(k, _) | ByteRequest::Upsert(k, _) | ByteRequest::Put(k, _) => k,
            ByteRequest::GetOrInsert(k, _) => k,
        }
    }
}

/// The result of one [`ByteRequest`], in the order of the requests; valid
/// while the batch's guard lives.
#[derive(Clone, Copy, Debug, Default)]
pub enum ByteResponse<'g> {
    /// Not run: the batch stopped before it.
    #[default]
    NotExecuted,
    /// A get's value.
    Get(Option<ValueRef<'g>>),
    /// An insert: `Err` with the value there.
    Insert(Result<(), ValueRef<'g>>),
    /// An upsert: the value replaced, if any.
    Upsert(Option<ValueRef<'g>>),
    /// A put: the old value, None if absent (nothing stored).
    Put(Option<ValueRef<'g>>),
    /// A remove: the value removed.
    Remove(Option<ValueRef<'g>>),
    /// A get-or-insert: the value there now.
    GetOrInsert(ValueRef<'g>),
    /// An update: the new value, or None if absent.
    Update(Option<ValueRef<'g>>),
    /// A conditional remove: the value removed, or None.
    RemoveIf(Option<ValueRef<'g>>),
    /// What a compute did.
    Compute(Computed<ValueRef<'g>>),
}

impl ByteResponse<'_> {
    /// As [`AllocResponse::succeeded`].
    pub fn succeeded(&self) -> bool {
        match self {
            ByteResponse::NotExecuted => false,
            ByteResponse::Get(r) | ByteResponse::Put(r) | ByteResponse::Remove(r) => r.is_some(),
            ByteResponse::Update(r) | ByteResponse::RemoveIf(r) => r.is_some(),
            ByteResponse::Insert(r) => r.is_ok(),
            ByteResponse::Upsert(_) | ByteResponse::GetOrInsert(_) => true,
            ByteResponse::Compute(c) => !matches!(c, Computed::Unchanged(_)),
        }
    }
}

impl<'m, K, V, S> Namespace<'m, K, V, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher,
{
    /// See [`AllocMap::batch`].
    pub fn batch<'r>(
        &self,
        requests: impl IntoIterator<Item = AllocRequest<'r, K, V>>,
        responses: &mut Vec<AllocResponse<'m, 'r, K, V>>,
        stop: StopOn,
        access: Access,
        guard: &'m Guard,
    ) -> Result<usize, Error> {
        let mut requests = requests.into_iter();
        let mut pass: Vec<AllocRequest<'r, K, V>> = Vec::with_capacity(PASS);
        let mut sigs = [0u64; PASS];
        let mut words = [None; PASS];
        let mut ran = 0;
        loop {
            pass.extend(requests.by_ref().take(PASS));
            let n = pass.len();
            if n == 0 {
                return Ok(ran);
            }
            for (s, r) in sigs.iter_mut().zip(&pass) {
                *s = self.signature(r.key());
            }
            self.map.index.get_many(&sigs[..n], &mut words[..n])?;
            for (w, r) in words[..n].iter().zip(&pass) {
                if let Some(w) = *w {
                    let reads = matches!(r, AllocRequest::Get(_) | AllocRequest::GetOrInsert(..));
                    prefetch_node::<K, V>(w, if reads { access } else { Access::Key });
                }
            }
            let mut pass_requests = pass.drain(..);
            for r in pass_requests.by_ref() {
                let response = self.run(r, guard);
                let go_on = stop == StopOn::Never || response.as_ref().is_ok_and(|r| r.succeeded());
                match response {
                    Ok(r) => responses.push(r),
                    Err(e) => {
                        responses.extend(pass_requests.map(AllocResponse::NotExecuted));
                        responses.extend(requests.map(AllocResponse::NotExecuted));
                        return Err(e);
                    }
                }
                ran += 1;
                if !go_on {
                    responses.extend(pass_requests.map(AllocResponse::NotExecuted));
                    responses.extend(requests.map(AllocResponse::NotExecuted));
                    return Ok(ran);
                }
            }
        }
    }

    /// Run one request.
    fn run<'r>(
        &self,
        r: AllocRequest<'r, K, V>,
        guard: &'m Guard,
    ) -> Result<AllocResponse<'m, 'r, K, V>, Error> {
        Ok(match r {
            AllocRequest::Get(k) => AllocResponse::Get(self.get(k, guard)),
            AllocRequest::Insert(k, v) => AllocResponse::Insert(self.try_insert(k, v, guard)?),
            AllocRequest::Upsert(k, v) => AllocResponse::Upsert(self.try_upsert(k, v, guard)?),
            AllocRequest::Put(k, v) => AllocResponse::Put(self.try_put(k, v, guard)?),
            AllocRequest::Remove(k) => AllocResponse::Remove(self.remove(k, guard)),
            AllocRequest::GetOrInsert(k, v) => {
                AllocResponse::GetOrInsert(self.try_get_or_insert_with(k, || v, guard)?)
            }
            AllocRequest::Update(k, f) => AllocResponse::Update(self.try_update(k, f, guard)?),
            AllocRequest::RemoveIf(k, f) => AllocResponse::RemoveIf(self.remove_if(k, f, guard)),
            AllocRequest::Compute(k, f) => AllocResponse::Compute(self.try_compute(k, f, guard)?),
        })
    }
}

impl<K, V, S> AllocMap<K, V, S>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Send + Sync + 'static,
    S: BuildHasher,
{
    /// Run a batch of mixed requests in order, with the index lookups of a
    /// pass of requests pipelined and the entries they find prefetched
    /// before the first of them runs (the values too for gets and
    /// get-or-inserts under [`Access::Read`]). Pushes one response per
    /// request to `responses`, in order; returns how many requests ran.
    /// With [`StopOn::Failure`] the batch stops after the first request
    /// that does not succeed ([`AllocResponse::succeeded`]); the requests
    /// not run come back in [`AllocResponse::NotExecuted`]. An allocation
    /// failure ends the batch with the error (the failing request's key and
    /// value are dropped, the rest come back not executed).
    ///
    /// ```
    /// use dlht::{Access, AllocMap, AllocRequest, AllocResponse, StopOn};
    /// let m = AllocMap::<String, u64>::new();
    /// let g = m.guard();
    /// let k = "k".to_string();
    /// let reqs = vec![
    ///     AllocRequest::Insert(k.clone(), 1),
    ///     AllocRequest::Update(&k, |n| n + 1),
    ///     AllocRequest::Get(&k),
    /// ];
    /// let mut out = Vec::new();
    /// assert_eq!(m.batch(reqs, &mut out, StopOn::Never, Access::Key, &g), Ok(3));
    /// assert!(matches!(out[2], AllocResponse::Get(Some(&2))));
    /// ```
    pub fn batch<'g, 'r>(
        &'g self,
        requests: impl IntoIterator<Item = AllocRequest<'r, K, V>>,
        responses: &mut Vec<AllocResponse<'g, 'r, K, V>>,
        stop: StopOn,
        access: Access,
        guard: &'g Guard,
    ) -> Result<usize, Error> {
        self.ns0().batch(requests, responses, stop, access, guard)
    }
}

impl<'m, S: BuildHasher> ByteNamespace<'m, S> {
    /// See [`ByteMap::batch`](super::ByteMap::batch).
    pub fn batch(
        &self,
        requests: &[ByteRequest<'_>],
        responses: &mut [ByteResponse<'m>],
        stop: StopOn,
        access: Access,
        guard: &'m Guard,
    ) -> Result<usize, Error> {
        if requests.len() != responses.len() {
            return Err(Error::LengthMismatch { requests: requests.len(), responses: responses.len() });
        }
        let mut kws = [0u64; PASS];
        let mut words = [None; PASS];
        let mut ran = 0;
        for (requests, responses) in requests.chunks(PASS).zip(responses.chunks_mut(PASS)) {
            let n = requests.len();
            for (kw, r) in kws.iter_mut().zip(requests) {
                *kw = self.key_word(r.key());
            }
            self.map.index.get_many(&kws[..n], &mut words[..n])?;
            // The entries' first lines (a stored key, the value's length and
            // start), for every request that found one.
            for &w in words[..n].iter().flatten() {
                prefetch_lines(ValueWord::from_bits(w).addr(), 1);
            }
            // Under `Access::Read`, the rest of each value a read will copy:
            // its length is in the first line, which the loop above has on
            // its way for the whole pass. (A list's entries are found only
            // when the request runs.)
            if access == Access::Read {
                for (w, r) in words[..n].iter().zip(requests) {
                    let reads = matches!(r, ByteRequest::Get(_) | ByteRequest::GetOrInsert(..));
                    if let (true, Some(w)) = (reads, *w) {
                        let w = ValueWord::from_bits(w);
                        // A persistent map's word is checked only when the
                        // request runs: its value is not read before then.
                        if self.map.index.heap.is_none() && w.shape() != Shape::List {
                            // SAFETY: read from the index just now under
                            // `guard`, which keeps it allocated; not a list,
                            // so a blob.
                            unsafe { ValueRef::of(w) }.prefetch();
                        }
                    }
                }
            }
            for (r, out) in requests.iter().zip(responses.iter_mut()) {
                *out = self.run(*r, guard)?;
                ran += 1;
                if stop == StopOn::Failure && !out.succeeded() {
                    return Ok(ran);
                }
            }
        }
        Ok(ran)
    }

    /// Run one request.
    fn run(&self, r: ByteRequest<'_>, guard: &'m Guard) -> Result<ByteResponse<'m>, Error> {
        Ok(match r {
            ByteRequest::Get(k) => ByteResponse::Get(self.get(k, guard)),
            ByteRequest::Insert(k, v) => ByteResponse::Insert(self.insert(k, v, guard)?),
            ByteRequest::Upsert(k, v) => ByteResponse::Upsert(self.upsert(k, v, guard)?),
            ByteRequest::Put(k, v) => ByteResponse::Put(self.put(k, v, guard)?),
            ByteRequest::Remove(k) => ByteResponse::Remove(self.remove(k, guard)),
            ByteRequest::GetOrInsert(k, v) => {
                ByteResponse::GetOrInsert(self.get_or_insert_with(k, || v, guard)?)
            }
            ByteRequest::Update(k, f) => ByteResponse::Update(self.update(k, f, guard)?),
            ByteRequest::RemoveIf(k, f) => ByteResponse::RemoveIf(self.remove_if(k, f, guard)),
            ByteRequest::Compute(k, f) => ByteResponse::Compute(self.compute(k, f, guard)?),
        })
    }
}

impl<S: BuildHasher> super::ByteMap<S> {
    /// Run a batch of mixed requests in order, as
    /// [`AllocMap::batch`] does: the index lookups of each pass pipelined,
    /// the entries found prefetched (whole values, up to 4 KiB, for gets
    /// under [`Access::Read`]) before the pass runs. `responses[i]`
    /// receives the result of `requests[i]`; returns how many ran. With
    /// [`StopOn::Failure`] it stops after the first request that does not
    /// succeed; an error (a key or value too long, memory refused, buffers
    /// of different lengths) ends it. Requests not run stay
    /// [`ByteResponse::NotExecuted`]. Memcached's multi-key `get` is a
    /// batch of gets.
    ///
    /// ```
    /// use dlht::{Access, ByteMap, ByteRequest, ByteResponse, StopOn};
    /// let m = ByteMap::new();
    /// let g = m.guard();
    /// let reqs = [ByteRequest::Insert(b"a", b"1"), ByteRequest::Get(b"a"), ByteRequest::Get(b"b")];
    /// let mut out = [ByteResponse::NotExecuted; 3];
    /// assert_eq!(m.batch(&reqs, &mut out, StopOn::Never, Access::Read, &g), Ok(3));
    /// assert!(matches!(out[1], ByteResponse::Get(Some(v)) if &*v == b"1"));
    /// assert!(matches!(out[2], ByteResponse::Get(None)));
    /// ```
    pub fn batch<'g>(
        &'g self,
        requests: &[ByteRequest<'_>],
        responses: &mut [ByteResponse<'g>],
        stop: StopOn,
        access: Access,
        guard: &'g Guard,
    ) -> Result<usize, Error> {
        self.namespace(0)
            .expect("dlht invariant: namespace 0 exists")
            .batch(requests, responses, stop, access, guard)
    }
}
