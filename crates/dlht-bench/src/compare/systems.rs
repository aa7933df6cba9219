//! The systems under test, each behind the [`Table`] trait (in `table`) so
//! every workload runs the same code on each. Each peer is used through its own public API with
//! dlht's hasher (or, with `--peer-default-hashers`, its own default),
//! pre-sized where it allows. Where a peer cannot
//! express an operation, [`Table::NOTE`] says what it does instead, and the
//! report prints it.

pub use crate::compare::cpp::{BoostCfm, Growt};
use crate::compare::hashing::{BenchHash, PeerHash};
use crate::compare::table::{Concurrent, DlhtMap, OneThread, Table, MAX_BATCH};
use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::{Arc, RwLock};

/// Maps that a dlht system can share with another (see [`Table::dlht_map`]).
pub trait Shareable: Sized {
    /// The map as a shareable [`DlhtMap`], if it is one.
    fn share(this: &Arc<Self>) -> Option<Arc<DlhtMap>>;
    /// `map` as this type, if it is one.
    fn from_shared(map: &Arc<DlhtMap>) -> Option<Arc<Self>>;
}

impl Shareable for DlhtMap {
    fn share(this: &Arc<Self>) -> Option<Arc<DlhtMap>> {
        Some(Arc::clone(this))
    }
    fn from_shared(map: &Arc<DlhtMap>) -> Option<Arc<Self>> {
        Some(Arc::clone(map))
    }
}

impl Shareable for dlht::LocalMap<u64, u64, BenchHash> {
    fn share(_: &Arc<Self>) -> Option<Arc<DlhtMap>> {
        None
    }
    fn from_shared(_: &Arc<DlhtMap>) -> Option<Arc<Self>> {
        None
    }
}

/// The dlht systems: `Map` or `LocalMap` behind an `Arc` (so the unbatched
/// and batched systems of one map type can share one table), one call per
/// request; the batched ones add the overrides given, which send requests
/// through `get_many` and `batch` with prefetching.
macro_rules! dlht_system {
    ($(#[$doc:meta])* $name:ident, $label:literal, $map:ty, $sharing:ty $(, { $($batched:tt)* })?) => {
        $(#[$doc])*
        pub struct $name(pub Arc<$map>);

        impl Table for $name {
            const NAME: &'static str = $label;
            type Sharing = $sharing;
            fn with_capacity(n: usize) -> Self {
                $name(Arc::new(<$map>::with_capacity_and_hasher(n, BenchHash::default())))
            }
            fn dlht_map(&self) -> Option<Arc<DlhtMap>> {
                <$map as Shareable>::share(&self.0)
            }
            fn view_of(map: &Arc<DlhtMap>) -> Option<Self> {
                <$map as Shareable>::from_shared(map).map($name)
            }
            #[inline]
            fn get(&self, k: u64) -> Option<u64> {
                self.0.get(&k)
            }
            #[inline]
            fn insert(&self, k: u64, v: u64) -> bool {
                self.0.insert(k, v).is_ok()
            }
            #[inline]
            fn remove(&self, k: u64) -> bool {
                self.0.remove(&k).is_some()
            }
            #[inline]
            fn put(&self, k: u64, v: u64) -> bool {
                self.0.put(k, v).is_some()
            }
            $($($batched)*)?
        }
    };
}

/// The batched systems' overrides of [`Table`]'s one-by-one defaults.
macro_rules! dlht_batched {
    ($(#[$doc:meta])* $name:ident, $label:literal, $map:ty, $sharing:ty) => {
        dlht_system!($(#[$doc])* $name, $label, $map, $sharing, {
            #[inline]
            fn get_batch(&self, keys: &[u64], out: &mut [Option<u64>]) {
                self.0.get_many(keys, out).expect("buffers of equal length");
            }
            fn insdel_batch(&self, keys: &[u64]) -> usize {
                batch_of(
                    keys.len() * 2,
                    |reqs| {
                        for (i, &k) in keys.iter().enumerate() {
                            reqs[2 * i] = dlht::Request::Insert(k, k);
                            reqs[2 * i + 1] = dlht::Request::Remove(k);
                        }
                    },
                    |reqs, out| self.0.batch(reqs, out, dlht::StopOn::Never).expect("batch"),
                )
            }
            fn mixed_batch(&self, reqs: &[(bool, u64, u64)]) -> usize {
                batch_of(
                    reqs.len(),
                    |r| {
                        for (i, &(is_put, k, v)) in reqs.iter().enumerate() {
                            r[i] = if is_put { dlht::Request::Put(k, v) } else { dlht::Request::Get(k) };
                        }
                    },
                    |r, out| self.0.batch(r, out, dlht::StopOn::Never).expect("batch"),
                )
            }
            fn insert_batch(&self, keys: &[u64]) -> usize {
                batch_of(
                    keys.len(),
                    |r| {
                        for (i, &k) in keys.iter().enumerate() {
                            r[i] = dlht::Request::Insert(k, k);
                        }
                    },
                    |r, out| self.0.batch(r, out, dlht::StopOn::Never).expect("batch"),
                )
            }
        });
    };
}

dlht_system!(
    /// dlht, one call per request.
    Dlht, "dlht", DlhtMap, Concurrent
);
dlht_system!(
    /// dlht's single-thread map (`LocalMap`), one call per request.
    DlhtLocalUnbatched, "dlht-local", dlht::LocalMap<u64, u64, BenchHash>, OneThread
);
dlht_batched!(
    /// dlht with batched requests and prefetching (`get_many`, `batch`).
    DlhtBatched, "dlht-batch", DlhtMap, Concurrent
);
dlht_batched!(
    /// dlht's single-thread map with batched requests and prefetching.
    DlhtLocal, "dlht-local-batch", dlht::LocalMap<u64, u64, BenchHash>, OneThread
);

/// One thread's request and response buffers.
type BatchBuffers = (Vec<dlht::Request<u64, u64>>, Vec<dlht::Response<u64>>);

thread_local! {
    /// Request and response buffers of this thread's batches, allocated
    /// once: zeroing stack arrays per batch stalls the core (see
    /// `workloads::Scratch`).
    static BATCH: RefCell<BatchBuffers> =
        RefCell::new((vec![dlht::Request::Get(0); MAX_BATCH], vec![dlht::Response::NotExecuted; MAX_BATCH]));
}

/// Fill this thread's request buffer and run it; the number of successes.
#[inline(always)]
pub fn batch_of(
    n: usize,
    fill: impl FnOnce(&mut [dlht::Request<u64, u64>]),
    run: impl FnOnce(&[dlht::Request<u64, u64>], &mut [dlht::Response<u64>]) -> usize,
) -> usize {
    assert!(n <= MAX_BATCH, "batch larger than {MAX_BATCH}");
    BATCH.with_borrow_mut(|(reqs, out)| {
        fill(&mut reqs[..n]);
        run(&reqs[..n], &mut out[..n]);
        out[..n].iter().filter(|r| r.succeeded()).count()
    })
}

/// papaya (seize-based, lock-free reads), pinned per operation.
pub struct Papaya<S = std::hash::RandomState>(papaya::HashMap<u64, u64, S>);

impl<S: PeerHash> Table for Papaya<S> {
    const NAME: &'static str = "papaya";
    type Sharing = Concurrent;
    fn with_capacity(n: usize) -> Self {
        Papaya(papaya::HashMap::with_capacity_and_hasher(n, S::default()))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.pin().get(&k).copied()
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        self.0.pin().try_insert(k, v).is_ok()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.pin().remove(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.pin().update(k, |_| v).is_some()
    }
}

/// dashmap (sharded RwLocks).
pub struct Dash<S = std::hash::RandomState>(dashmap::DashMap<u64, u64, S>);

impl<S: PeerHash> Table for Dash<S> {
    const NAME: &'static str = "dashmap";
    type Sharing = Concurrent;
    fn with_capacity(n: usize) -> Self {
        Dash(dashmap::DashMap::with_capacity_and_hasher(n, S::default()))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.get(&k).map(|r| *r)
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        match self.0.entry(k) {
            dashmap::Entry::Vacant(e) => {
                e.insert(v);
                true
            }
            dashmap::Entry::Occupied(_) => false,
        }
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.remove(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.get_mut(&k).map(|mut r| *r = v).is_some()
    }
}

/// scc::HashMap (bucket locks, optimistic reads).
pub struct Scc<S: BuildHasher = std::hash::RandomState>(scc::HashMap<u64, u64, S>);

impl<S: PeerHash> Table for Scc<S> {
    const NAME: &'static str = "scc";
    type Sharing = Concurrent;
    fn with_capacity(n: usize) -> Self {
        Scc(scc::HashMap::with_capacity_and_hasher(n, S::default()))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.read_sync(&k, |_, v| *v)
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        self.0.insert_sync(k, v).is_ok()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.remove_sync(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.update_sync(&k, |_, old| *old = v).is_some()
    }
}

/// flurry (a port of Java's ConcurrentHashMap), guard per operation.
pub struct Flurry<S = flurry::DefaultHashBuilder>(flurry::HashMap<u64, u64, S>);

impl<S: PeerHash> Table for Flurry<S> {
    const NAME: &'static str = "flurry";
    type Sharing = Concurrent;
    fn with_capacity(n: usize) -> Self {
        Flurry(flurry::HashMap::with_capacity_and_hasher(n, S::default()))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.get(&k, &self.0.guard()).copied()
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        self.0.try_insert(k, v, &self.0.guard()).is_ok()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.remove(&k, &self.0.guard()).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.compute_if_present(&k, |_, _| Some(v), &self.0.guard()).is_some()
    }
}

/// leapfrog::LeapMap (the Rust port of Junction's Leapfrog).
pub struct Leapfrog<S = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>>(
    leapfrog::LeapMap<u64, u64, S>,
);

impl<S: PeerHash> Table for Leapfrog<S> {
    const NAME: &'static str = "leapfrog";
    type Sharing = Concurrent;
    const NOTE: &'static str =
        "no insert-if-absent: inserts use its overwriting insert (same effect on the fresh keys of InsDel and Population); values u64::MAX and u64::MAX-1 are reserved";
    fn with_capacity(n: usize) -> Self {
        Leapfrog(leapfrog::LeapMap::with_capacity_and_hasher(n, S::default()))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.get(&k).and_then(|mut r| r.value())
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        self.0.insert(k, v).is_none()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.remove(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.update(&k, v).is_some()
    }
}

/// std's HashMap behind one RwLock: the baseline every design must beat.
pub struct StdRwLock<S = std::hash::RandomState>(RwLock<std::collections::HashMap<u64, u64, S>>);

impl<S: PeerHash> Table for StdRwLock<S> {
    const NAME: &'static str = "std-rwlock";
    type Sharing = Concurrent;
    fn with_capacity(n: usize) -> Self {
        StdRwLock(RwLock::new(std::collections::HashMap::with_capacity_and_hasher(n, S::default())))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.read().unwrap().get(&k).copied()
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        let mut m = self.0.write().unwrap();
        match m.entry(k) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(v);
                true
            }
            std::collections::hash_map::Entry::Occupied(_) => false,
        }
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.write().unwrap().remove(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.write().unwrap().get_mut(&k).map(|s| *s = v).is_some()
    }
}

/// hashbrown on one thread: the single-thread bound (SwissTable, foldhash).
pub struct Hashbrown<S = hashbrown::DefaultHashBuilder>(RefCell<hashbrown::HashMap<u64, u64, S>>);

impl<S: PeerHash> Table for Hashbrown<S> {
    const NAME: &'static str = "hashbrown-1t";
    type Sharing = OneThread;
    fn with_capacity(n: usize) -> Self {
        Hashbrown(RefCell::new(hashbrown::HashMap::with_capacity_and_hasher(n, S::default())))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.borrow().get(&k).copied()
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        match self.0.borrow_mut().entry(k) {
            hashbrown::hash_map::Entry::Vacant(e) => {
                e.insert(v);
                true
            }
            hashbrown::hash_map::Entry::Occupied(_) => false,
        }
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.borrow_mut().remove(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.borrow_mut().get_mut(&k).map(|s| *s = v).is_some()
    }
}

/// Every system, by name, for the CLI and the dispatch macro. The C++
/// peers (growt, boost-cfm) are accepted in every build; one that this
/// build lacks is skipped with a note (see [`cpp`](crate::compare::cpp)).
pub const ALL: [&str; 13] = [
    "dlht",
    "dlht-batch",
    "dlht-local",
    "dlht-local-batch",
    "papaya",
    "dashmap",
    "scc",
    "flurry",
    "leapfrog",
    "std-rwlock",
    "hashbrown-1t",
    "growt",
    "boost-cfm",
];

/// The systems the comparison runs by default: all but the unbatched
/// `LocalMap` (the batching study covers it) and leapfrog, which is
/// opt-in (`--systems …,leapfrog`): in the CI smoke runs on two threads
/// its puts once lost a present key, and once its migration spun forever
/// in the empty-table InsDel (leapfrog 0.3.3, in
/// `Migrator::cleanup_stale_table`), hanging the run. The C++ peers are
/// in it when this build has them.
pub const DEFAULT: &[&str] = &[
    "dlht",
    "dlht-batch",
    "dlht-local-batch",
    "papaya",
    "dashmap",
    "scc",
    "flurry",
    "std-rwlock",
    "hashbrown-1t",
    #[cfg(dlht_growt)]
    "growt",
    #[cfg(dlht_boost_cfm)]
    "boost-cfm",
];

/// Whether `system` batches its requests (it is measured at every
/// `--batch` size; the others make one call per request).
pub fn batches(system: &str) -> bool {
    system.ends_with("-batch")
}

/// Run `$body` with `$t` bound to the type of system `$name`.
#[macro_export]
macro_rules! with_system {
    // A peer: dlht's hasher, or its own default under --peer-default-hashers.
    (@peer $peer:ident, $t:ident => $body:expr) => {
        if peer_hasher() {
            type $t = $peer<BenchHash>;
            $body
        } else {
            type $t = $peer;
            $body
        }
    };
    ($name:expr, $t:ident => $body:expr) => {{
        use $crate::compare::hashing::{peer_hasher, BenchHash};
        use $crate::compare::systems::*;
        #[allow(unused_imports)]
        use $crate::compare::table::Table;
        match $name {
            "dlht" => {
                type $t = Dlht;
                $body
            }
            "dlht-batch" => {
                type $t = DlhtBatched;
                $body
            }
            "dlht-local" => {
                type $t = DlhtLocalUnbatched;
                $body
            }
            "dlht-local-batch" => {
                type $t = DlhtLocal;
                $body
            }
            "papaya" => with_system!(@peer Papaya, $t => $body),
            "dashmap" => with_system!(@peer Dash, $t => $body),
            "scc" => with_system!(@peer Scc, $t => $body),
            "flurry" => with_system!(@peer Flurry, $t => $body),
            "leapfrog" => with_system!(@peer Leapfrog, $t => $body),
            "std-rwlock" => with_system!(@peer StdRwLock, $t => $body),
            "hashbrown-1t" => with_system!(@peer Hashbrown, $t => $body),
            "growt" => with_system!(@peer Growt, $t => $body),
            "boost-cfm" => with_system!(@peer BoostCfm, $t => $body),
            other => panic!("unknown system {other}"),
        }
    }};
}
