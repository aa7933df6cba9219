//! The systems under test, behind one small trait so every workload runs
//! the same code on each. Each peer is used through its own public API with
//! dlht's hasher (or, with `--peer-default-hashers`, its own default),
//! pre-sized where it allows. Where a peer cannot
//! express an operation, [`Table::NOTE`] says what it does instead, and the
//! report prints it.

pub use crate::compare::cpp::{BoostCfm, Growt};
use crate::harness::{self, Worker};
use std::cell::RefCell;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Hash function of the dlht systems.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
pub enum HashChoice {
    /// rapidhash, seeded per map (dlht's default).
    Rapidhash,
    /// The identity: bin = key mod bins (the paper's default, for random keys).
    Modulo,
}

static MODULO: AtomicBool = AtomicBool::new(false);

/// Choose the hash of the dlht systems built from now on. Relaxed: set once,
/// by the main thread, before any map is built.
pub fn set_hash(h: HashChoice) {
    MODULO.store(h == HashChoice::Modulo, Ordering::Relaxed);
}

static PEER_HASHER: AtomicBool = AtomicBool::new(false);

/// Give the peers built from now on dlht's hasher ([`BenchHash`]) instead
/// of their own defaults (the comparison's default; studies that do not
/// call this keep the peers' defaults). Relaxed: set once, before any map is built.
pub fn set_peer_hasher(on: bool) {
    PEER_HASHER.store(on, Ordering::Relaxed);
}

/// Whether peers use dlht's hasher (see [`set_peer_hasher`]).
pub fn peer_hasher() -> bool {
    PEER_HASHER.load(Ordering::Relaxed)
}

/// The dlht systems' hasher: the choice made with [`set_hash`].
#[derive(Clone, Copy, Debug)]
pub enum BenchHash {
    /// rapidhash.
    Rapid(dlht::DefaultHashBuilder),
    /// Identity.
    Modulo,
}

impl Default for BenchHash {
    fn default() -> Self {
        if MODULO.load(Ordering::Relaxed) {
            BenchHash::Modulo
        } else {
            BenchHash::Rapid(dlht::DefaultHashBuilder::default())
        }
    }
}

/// The hasher of [`BenchHash`].
pub enum BenchHasher {
    /// rapidhash.
    Rapid(<dlht::DefaultHashBuilder as BuildHasher>::Hasher),
    /// Identity.
    Modulo(dlht::ModuloHasher),
}

impl Hasher for BenchHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        match self {
            BenchHasher::Rapid(h) => h.finish(),
            BenchHasher::Modulo(h) => h.finish(),
        }
    }
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        match self {
            BenchHasher::Rapid(h) => h.write(bytes),
            BenchHasher::Modulo(h) => h.write(bytes),
        }
    }
    #[inline(always)]
    fn write_u64(&mut self, w: u64) {
        match self {
            BenchHasher::Rapid(h) => h.write_u64(w),
            BenchHasher::Modulo(h) => h.write_u64(w),
        }
    }
}

impl BuildHasher for BenchHash {
    type Hasher = BenchHasher;
    #[inline(always)]
    fn build_hasher(&self) -> BenchHasher {
        match self {
            BenchHash::Rapid(b) => BenchHasher::Rapid(b.build_hasher()),
            BenchHash::Modulo => BenchHasher::Modulo(dlht::Modulo.build_hasher()),
        }
    }
}

/// How the threads of a measurement may share a table: [`Concurrent`]
/// tables are `Sync` and go to every thread; [`OneThread`] tables run only
/// on the thread that built them. The workloads reach threads only through
/// this, so a single-thread table never needs to be `Sync`.
pub trait Sharing<T: ?Sized> {
    /// False for single-thread systems.
    const CONCURRENT: bool;

    /// `work(t, worker)` timed on `threads` threads (see
    /// [`harness::timed`](crate::harness::timed)).
    fn timed<S>(
        t: &T,
        threads: usize,
        dur: Duration,
        keys: u64,
        seed: u64,
        init: impl Fn(usize) -> S + Sync,
        work: impl Fn(&T, &mut Worker<S>) -> u64 + Sync,
    ) -> f64;

    /// `f(t, thread)` on `threads` threads at once (inline for one).
    fn on_threads(t: &T, threads: usize, f: impl Fn(&T, usize) + Sync);
}

/// Threads share the table.
pub struct Concurrent;

/// The table stays on the thread that built it; one thread only.
pub struct OneThread;

impl<T: Sync + ?Sized> Sharing<T> for Concurrent {
    const CONCURRENT: bool = true;

    #[inline(always)]
    fn timed<S>(
        t: &T,
        threads: usize,
        dur: Duration,
        keys: u64,
        seed: u64,
        init: impl Fn(usize) -> S + Sync,
        work: impl Fn(&T, &mut Worker<S>) -> u64 + Sync,
    ) -> f64 {
        harness::timed(threads, dur, keys, seed, init, |w| work(t, w))
    }

    fn on_threads(t: &T, threads: usize, f: impl Fn(&T, usize) + Sync) {
        if threads == 1 {
            return f(t, 0);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|th| {
                    let f = &f;
                    s.spawn(move || f(t, th))
                })
                .collect();
            // A failed result check panics: pass its message on (the scope
            // alone would only say that a thread panicked).
            for h in handles {
                if let Err(e) = h.join() {
                    std::panic::resume_unwind(e);
                }
            }
        });
    }
}

impl<T: ?Sized> Sharing<T> for OneThread {
    const CONCURRENT: bool = false;

    #[inline(always)]
    fn timed<S>(
        t: &T,
        threads: usize,
        dur: Duration,
        keys: u64,
        seed: u64,
        init: impl Fn(usize) -> S + Sync,
        work: impl Fn(&T, &mut Worker<S>) -> u64 + Sync,
    ) -> f64 {
        assert_eq!(threads, 1, "a single-thread system runs on one thread");
        harness::timed_inline(dur, keys, seed, init(0), |w| work(t, w))
    }

    fn on_threads(t: &T, threads: usize, f: impl Fn(&T, usize) + Sync) {
        assert_eq!(threads, 1, "a single-thread system runs on one thread");
        f(t, 0)
    }
}

/// A concurrent (or single-thread) map of u64 → u64, as the workloads use it.
pub trait Table: Sized {
    /// Name in reports.
    const NAME: &'static str;
    /// How threads may share it.
    type Sharing: Sharing<Self>;
    /// False for single-thread systems: they run only with one thread, on
    /// the thread that built them.
    const CONCURRENT: bool = <Self::Sharing as Sharing<Self>>::CONCURRENT;
    /// How an operation is substituted, if one is.
    const NOTE: &'static str = "";
    /// Pre-sized for `n` keys.
    fn with_capacity(n: usize) -> Self;
    /// The dlht map this system runs on, if it is one: the unbatched and
    /// the batched dlht systems then share one table (same data, half the
    /// memory).
    fn dlht_map(&self) -> Option<Arc<DlhtMap>> {
        None
    }
    /// This system as a view of an already populated dlht map, if it can be.
    fn view_of(_map: &Arc<DlhtMap>) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Value of `k`.
    fn get(&self, k: u64) -> Option<u64>;
    /// Insert if absent; true if inserted.
    fn insert(&self, k: u64, v: u64) -> bool;
    /// Remove; true if it was there.
    fn remove(&self, k: u64) -> bool;
    /// Update if present; true if it was there.
    fn put(&self, k: u64, v: u64) -> bool;

    /// Gets of `keys` into `out` (batched systems override this).
    #[inline]
    fn get_batch(&self, keys: &[u64], out: &mut [Option<u64>]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.get(*k);
        }
    }

    /// For each key: insert it (must be fresh), then remove it.
    /// Returns how many inserts and removes succeeded.
    #[inline]
    fn insdel_batch(&self, keys: &[u64]) -> usize {
        keys.iter().map(|&k| self.insert(k, k) as usize + self.remove(k) as usize).sum()
    }

    /// Requests (put?, key, value): a put or a get. Returns successes.
    #[inline]
    fn mixed_batch(&self, reqs: &[(bool, u64, u64)]) -> usize {
        reqs.iter()
            .map(|&(is_put, k, v)| if is_put { self.put(k, v) } else { self.get(k).is_some() } as usize)
            .sum()
    }

    /// Inserts of fresh keys. Returns successes.
    #[inline]
    fn insert_batch(&self, keys: &[u64]) -> usize {
        keys.iter().map(|&k| self.insert(k, k) as usize).sum()
    }
}

/// No table at all: a get returns its key. Run through the same workload
/// loop as every system, it measures what the bench's key stream, batching
/// and result check cost by themselves, which must be far below what any
/// table costs (the report sets it against the memory limit).
pub struct KeyStreamOnly;

impl Table for KeyStreamOnly {
    const NAME: &'static str = crate::compare::report::KEY_STREAM;
    type Sharing = Concurrent;
    fn with_capacity(_: usize) -> Self {
        KeyStreamOnly
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        Some(std::hint::black_box(k))
    }
    fn insert(&self, _: u64, _: u64) -> bool {
        true
    }
    fn remove(&self, _: u64) -> bool {
        true
    }
    fn put(&self, _: u64, _: u64) -> bool {
        true
    }
}

/// dlht's concurrent map as the bench builds it.
pub type DlhtMap = dlht::Map<u64, u64, BenchHash>;

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

/// Most requests a batch in the bench holds (stack buffers, no allocation).
pub const MAX_BATCH: usize = 128;

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

/// What a peer's hasher must be: its own default, or [`BenchHash`].
pub trait PeerHash: BuildHasher + Default + Clone + Send + Sync + 'static {}
impl<S: BuildHasher + Default + Clone + Send + Sync + 'static> PeerHash for S {}

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
        use $crate::compare::systems::*;
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
