//! Every mode behind one adapter: `Map`, `AllocMap` and
//! `ByteMap`, each also through a namespace view, with the default hasher
//! and with colliding ones, as maps of u64 → u64 with the read-modify-write
//! operations. The model test and the linearizability check of
//! `tests/every_mode.rs` run over all of them.

use super::lin::{Call, Clock, Event};
use super::{FewBits, Ops, Rng};
use dlht::{AllocMap, ByteMap, Computed, Map, Modulo, Op, ValueRef};
use std::hash::BuildHasher;

/// What `compute` does in these tests, a function of the value there: an
/// absent key gets `v`; an odd value is removed; an even one gets `v`
/// added. The checker replays it on the sequential state.
pub fn compute_rule(v: u64) -> impl Fn(Option<u64>) -> Op<u64> + Copy {
    move |there| match there {
        None => Op::Upsert(v),
        Some(x) if x % 2 == 1 => Op::Remove,
        Some(x) => Op::Upsert(x.wrapping_add(v)),
    }
}

/// The read-modify-write operations and whole-map operations, on top of
/// [`Ops`].
#[allow(clippy::len_without_is_empty)]
pub trait Rmw: Ops {
    /// `update` adding `d`: the new value, None if absent.
    fn update_add(&self, k: u64, d: u64) -> Option<u64>;
    /// `get_or_insert_with(k, || v)`: the value there after.
    fn get_or_insert(&self, k: u64, v: u64) -> u64;
    /// `remove_if(k, |x| x == v)`: the value removed.
    fn remove_if_eq(&self, k: u64, v: u64) -> Option<u64>;
    /// `compute(k, compute_rule(v))`.
    fn compute(&self, k: u64, v: u64) -> Computed<u64>;
    /// `compute` adding `d` (inserting `d` if absent): the new value.
    fn compute_add(&self, k: u64, d: u64) -> u64;
    /// `retain(|k, v| keep(k, v))`: how many were removed.
    fn retain(&self, keep: &dyn Fn(u64, u64) -> bool) -> usize;
    fn clear(&self) -> usize;
    fn len(&self) -> usize;
    fn reserve(&self, n: usize);
    fn shrink_to_fit(&self);
    fn resizes(&self) -> usize;
}

fn copied(c: Computed<&u64>) -> Computed<u64> {
    match c {
        Computed::Inserted(v) => Computed::Inserted(*v),
        Computed::Replaced { old, new } => Computed::Replaced { old: *old, new: *new },
        Computed::Removed(v) => Computed::Removed(*v),
        Computed::Unchanged(v) => Computed::Unchanged(v.copied()),
    }
}

// ---- Map (inline mode) ----

impl<S: BuildHasher> Rmw for Map<u64, u64, S> {
    fn update_add(&self, k: u64, d: u64) -> Option<u64> {
        Map::update(self, &k, |x| x.wrapping_add(d))
    }
    fn get_or_insert(&self, k: u64, v: u64) -> u64 {
        Map::get_or_insert_with(self, k, || v)
    }
    fn remove_if_eq(&self, k: u64, v: u64) -> Option<u64> {
        Map::remove_if(self, &k, |x| x == v)
    }
    fn compute(&self, k: u64, v: u64) -> Computed<u64> {
        Map::compute(self, k, compute_rule(v))
    }
    fn compute_add(&self, k: u64, d: u64) -> u64 {
        Map::compute(self, k, |x| Op::Upsert(x.unwrap_or(0).wrapping_add(d))).value().unwrap()
    }
    fn retain(&self, keep: &dyn Fn(u64, u64) -> bool) -> usize {
        Map::retain(self, keep)
    }
    fn clear(&self) -> usize {
        Map::clear(self)
    }
    fn len(&self) -> usize {
        Map::len(self)
    }
    fn reserve(&self, n: usize) {
        Map::reserve(self, n)
    }
    fn shrink_to_fit(&self) {
        Map::shrink_to_fit(self)
    }
    fn resizes(&self) -> usize {
        Map::stats(self).resizes
    }
}

// ---- AllocMap (allocator mode), namespace `NS` ----

/// An `AllocMap` used through namespace `NS` (0: the map's own methods'
/// namespace; the views' methods are the same code either way).
pub struct Alloc<S, const NS: usize>(pub AllocMap<u64, u64, S>);

impl<S: BuildHasher + Default, const NS: usize> Alloc<S, NS> {
    pub fn with_capacity(n: usize) -> Self {
        Alloc(AllocMap::try_with_capacity_and_hasher(n, S::default()).unwrap())
    }
}

macro_rules! alloc_call {
    ($self:ident, |$ns:ident, $g:ident| $body:expr) => {{
        let $g = $self.0.guard();
        let $ns = $self.0.namespace(NS).unwrap();
        $body
    }};
}

impl<S: BuildHasher, const NS: usize> Ops for Alloc<S, NS> {
    fn get(&self, k: u64) -> Option<u64> {
        alloc_call!(self, |ns, g| ns.get(&k, &g).copied())
    }
    fn insert(&self, k: u64, v: u64) -> Result<(), u64> {
        alloc_call!(self, |ns, g| ns.insert(k, v, &g).map_err(|o| *o.current))
    }
    fn put(&self, k: u64, v: u64) -> Option<u64> {
        alloc_call!(self, |ns, g| ns.put(&k, v, &g).ok().copied())
    }
    fn remove(&self, k: u64) -> Option<u64> {
        alloc_call!(self, |ns, g| ns.remove(&k, &g).copied())
    }
    fn upsert(&self, k: u64, v: u64) -> Option<u64> {
        alloc_call!(self, |ns, g| ns.upsert(k, v, &g).copied())
    }
}

impl<S: BuildHasher, const NS: usize> Rmw for Alloc<S, NS> {
    fn update_add(&self, k: u64, d: u64) -> Option<u64> {
        alloc_call!(self, |ns, g| ns.update(&k, |x| x.wrapping_add(d), &g).copied())
    }
    fn get_or_insert(&self, k: u64, v: u64) -> u64 {
        alloc_call!(self, |ns, g| *ns.get_or_insert_with(k, || v, &g))
    }
    fn remove_if_eq(&self, k: u64, v: u64) -> Option<u64> {
        alloc_call!(self, |ns, g| ns.remove_if(&k, |x| *x == v, &g).copied())
    }
    fn compute(&self, k: u64, v: u64) -> Computed<u64> {
        let rule = compute_rule(v);
        alloc_call!(self, |ns, g| copied(ns.compute(k, |x| rule(x.copied()), &g)))
    }
    fn compute_add(&self, k: u64, d: u64) -> u64 {
        let add = |x: Option<&u64>| Op::Upsert(x.map_or(d, |x| x.wrapping_add(d)));
        alloc_call!(self, |ns, g| *ns.compute(k, add, &g).value().unwrap())
    }
    fn retain(&self, keep: &dyn Fn(u64, u64) -> bool) -> usize {
        alloc_call!(self, |ns, g| ns.retain(|k, v| keep(*k, *v), &g))
    }
    fn clear(&self) -> usize {
        self.retain(&|_, _| false)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn reserve(&self, n: usize) {
        self.0.reserve(n)
    }
    fn shrink_to_fit(&self) {
        self.0.shrink_to_fit()
    }
    fn resizes(&self) -> usize {
        self.0.stats().resizes
    }
}

// ---- ByteMap, namespace `NS`, keys of `KEY_LEN` bytes ----

/// A `ByteMap` used through namespace `NS`, with u64 keys written as
/// `KEY_LEN` bytes (8: kept inline in the slot; 16: stored in the
/// allocation, compared there) and values as 8 little-endian bytes.
pub struct Bytes<S, const NS: usize, const KEY_LEN: usize>(pub ByteMap<S>);

impl<S: BuildHasher + Default, const NS: usize, const KEY_LEN: usize> Bytes<S, NS, KEY_LEN> {
    pub fn with_capacity(n: usize) -> Self {
        Bytes(ByteMap::try_with_capacity_and_hasher(n, S::default()).unwrap())
    }
}

fn key_bytes<const KEY_LEN: usize>(k: u64) -> [u8; KEY_LEN] {
    let mut b = [0xA5u8; KEY_LEN];
    b[..8].copy_from_slice(&k.to_le_bytes());
    b
}

fn num(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().expect("values are 8 bytes"))
}

fn val(v: ValueRef<'_>) -> u64 {
    num(&v)
}

macro_rules! byte_call {
    ($self:ident, $k:ident, |$ns:ident, $key:ident, $g:ident| $body:expr) => {{
        let $g = $self.0.guard();
        let $ns = $self.0.namespace(NS).unwrap();
        let $key = key_bytes::<KEY_LEN>($k);
        $body
    }};
}

impl<S: BuildHasher, const NS: usize, const KEY_LEN: usize> Ops for Bytes<S, NS, KEY_LEN> {
    fn get(&self, k: u64) -> Option<u64> {
        byte_call!(self, k, |ns, key, g| ns.get(&key, &g).map(val))
    }
    fn insert(&self, k: u64, v: u64) -> Result<(), u64> {
        byte_call!(self, k, |ns, key, g| ns.insert(&key, &v.to_le_bytes(), &g).unwrap().map_err(val))
    }
    fn put(&self, k: u64, v: u64) -> Option<u64> {
        byte_call!(self, k, |ns, key, g| ns.put(&key, &v.to_le_bytes(), &g).unwrap().map(val))
    }
    fn remove(&self, k: u64) -> Option<u64> {
        byte_call!(self, k, |ns, key, g| ns.remove(&key, &g).map(val))
    }
    fn upsert(&self, k: u64, v: u64) -> Option<u64> {
        byte_call!(self, k, |ns, key, g| ns.upsert(&key, &v.to_le_bytes(), &g).unwrap().map(val))
    }
}

impl<S: BuildHasher, const NS: usize, const KEY_LEN: usize> Rmw for Bytes<S, NS, KEY_LEN> {
    fn update_add(&self, k: u64, d: u64) -> Option<u64> {
        byte_call!(self, k, |ns, key, g| ns
            .update(&key, |x| num(x).wrapping_add(d).to_le_bytes(), &g)
            .unwrap()
            .map(val))
    }
    fn get_or_insert(&self, k: u64, v: u64) -> u64 {
        byte_call!(self, k, |ns, key, g| val(ns.get_or_insert_with(&key, || v.to_le_bytes(), &g).unwrap()))
    }
    fn remove_if_eq(&self, k: u64, v: u64) -> Option<u64> {
        byte_call!(self, k, |ns, key, g| ns.remove_if(&key, |x| num(x) == v, &g).map(val))
    }
    fn compute(&self, k: u64, v: u64) -> Computed<u64> {
        let rule = compute_rule(v);
        let as_bytes = |x: Option<&[u8]>| match rule(x.map(num)) {
            Op::Upsert(n) => Op::Upsert(n.to_le_bytes()),
            Op::Remove => Op::Remove,
            Op::Keep => Op::Keep,
        };
        byte_call!(self, k, |ns, key, g| match ns.compute(&key, as_bytes, &g).unwrap() {
            Computed::Inserted(v) => Computed::Inserted(val(v)),
            Computed::Replaced { old, new } => Computed::Replaced { old: val(old), new: val(new) },
            Computed::Removed(v) => Computed::Removed(val(v)),
            Computed::Unchanged(v) => Computed::Unchanged(v.map(val)),
        })
    }
    fn compute_add(&self, k: u64, d: u64) -> u64 {
        let add = |x: Option<&[u8]>| Op::Upsert(x.map_or(d, |x| num(x).wrapping_add(d)).to_le_bytes());
        byte_call!(self, k, |ns, key, g| val(ns.compute(&key, add, &g).unwrap().value().unwrap()))
    }
    fn retain(&self, keep: &dyn Fn(u64, u64) -> bool) -> usize {
        let g = self.0.guard();
        let ns = self.0.namespace(NS).unwrap();
        ns.retain(|k, v| keep(u64::from_le_bytes(k[..8].try_into().unwrap()), num(v)), &g)
    }
    fn clear(&self) -> usize {
        self.retain(&|_, _| false)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn reserve(&self, n: usize) {
        self.0.reserve(n)
    }
    fn shrink_to_fit(&self) {
        self.0.shrink_to_fit()
    }
    fn resizes(&self) -> usize {
        self.0.stats().resizes
    }
}

/// Builds one mode, sized for `n` keys.
pub type BuildMode<'a> = dyn Fn(usize) -> Box<dyn Rmw + Sync> + 'a;

/// Run `test` over every mode: each map type, through its own methods and
/// through a namespace view, with the default hasher and with hashers that
/// collide (`FewBits<10>`: 1024 signatures, so the keys a filler adds share
/// them in lists and still grow the index; `FewBits<0>`: one signature, one
/// list, an index that never grows; `Modulo` for `Map`, whose keys are their
/// own hashes). `test` gets the mode's name.
pub fn with_modes(mut test: impl FnMut(&str, &BuildMode<'_>)) {
    fn map<S: BuildHasher + Default + Send + Sync + 'static>(n: usize) -> Box<dyn Rmw + Sync> {
        Box::new(Map::<u64, u64, S>::with_capacity_and_hasher(n, S::default()))
    }
    fn alloc<S: BuildHasher + Default + Send + Sync + 'static, const NS: usize>(
        n: usize,
    ) -> Box<dyn Rmw + Sync> {
        Box::new(Alloc::<S, NS>::with_capacity(n))
    }
    fn bytes<S: BuildHasher + Default + Send + Sync + 'static, const NS: usize, const KEY_LEN: usize>(
        n: usize,
    ) -> Box<dyn Rmw + Sync> {
        Box::new(Bytes::<S, NS, KEY_LEN>::with_capacity(n))
    }
    use dlht::DefaultHashBuilder as D;
    test("Map", &map::<D>);
    test("Map, modulo", &map::<Modulo>);
    test("AllocMap", &alloc::<D, 0>);
    test("AllocMap, 1024 signatures", &alloc::<FewBits<10>, 0>);
    test("AllocMap namespace 5, 1 signature", &alloc::<FewBits<0>, 5>);
    test("ByteMap, 8-byte keys (inline)", &bytes::<D, 0, 8>);
    test("ByteMap, 16-byte keys", &bytes::<D, 0, 16>);
    test("ByteMap namespace 3, 16-byte keys, 1 signature", &bytes::<FewBits<0>, 3, 16>);
}

/// One recorded operation of any kind on `map`: the five of [`Ops`] and
/// the read-modify-writes.
pub fn record_rmw<M: Rmw + ?Sized>(map: &M, clock: &Clock, rng: &mut Rng, key: u64, values: u64) -> Event {
    let v = 1 + rng.below(values);
    let op = rng.below(18);
    let invoked = clock.tick();
    let call = match op {
        0..=2 => Call::Get(map.get(key)),
        3..=4 => Call::Insert(v, map.insert(key, v)),
        5 => Call::Put(v, map.put(key, v)),
        6..=7 => Call::Remove(map.remove(key)),
        8 => Call::Upsert(v, map.upsert(key, v)),
        9..=10 => Call::Update(v, map.update_add(key, v)),
        11..=12 => Call::GetOrInsert(v, map.get_or_insert(key, v)),
        13..=14 => Call::RemoveIfEq(v, map.remove_if_eq(key, v)),
        _ => Call::Compute(v, map.compute(key, v)),
    };
    let returned = clock.tick();
    Event { key, call, invoked, returned }
}
