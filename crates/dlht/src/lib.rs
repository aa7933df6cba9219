//! # dlht — the Dandelion Hashtable
//!
//! A concurrent in-memory hash map after *DLHT: A Non-blocking Resizable
//! Hashtable with Fast Deletes and Memory-awareness* (HPDC '24). Most
//! requests touch one 64-byte cache line, deletes free their slot at once,
//! and the index grows without stopping the world.
//!
//! ## Usage
//!
//! ```
//! use dlht::Map;
//!
//! let m: Map<u64, u64> = Map::with_capacity(1 << 10);
//! assert_eq!(m.insert(1, 100), Ok(()));      // insert-if-absent
//! assert_eq!(m.insert(1, 200), Err(100));    // already there: nothing changes
//! assert_eq!(m.put(1, 101), Some(100));      // update-if-present
//! assert_eq!(m.put(2, 5), None);             // absent: nothing inserted
//! assert_eq!(m.upsert(2, 5), None);          // insert or overwrite
//! assert_eq!(m.get(&1), Some(101));
//! assert_eq!(m.remove(&1), Some(101));
//! assert_eq!(m.len(), 1);
//! ```
//!
//! Keys and values are any type of at most 8 bytes implementing [`Inline`]
//! (integers, floats by bits, `bool`, `char`, raw pointers); every value of
//! such a type is storable, `0` and `u64::MAX` included.
//!
//! ## Atomic read-modify-write
//!
//! Each is one conditional 16-byte CAS on the key's slot, retried only if
//! another thread changed that slot: [`Map::compare_exchange`],
//! [`Map::update`], [`Map::fetch_add`] (inserts the delta when absent),
//! [`Map::get_or_insert_with`], [`Map::remove_if`].
//!
//! ```
//! let counts = dlht::Map::<u64, u64>::new();
//! std::thread::scope(|s| {
//!     for _ in 0..4 {
//!         s.spawn(|| {
//!             for k in 0..100 {
//!                 counts.fetch_add(k % 10, 1);
//!             }
//!         });
//!     }
//! });
//! assert_eq!(counts.get(&3), Some(40));
//! ```
//!
//! ## Coming from std, dashmap, papaya or scc
//!
//! dlht's `insert` is insert-if-absent (like scc's); std, dashmap and
//! papaya overwrite. The calls that do the same thing:
//!
//! | you want | std `HashMap` | dashmap | papaya (`m.pin()`) | dlht [`Map`] |
//! |---|---|---|---|---|
//! | insert or overwrite, old value back | `insert(k, v)` | `insert(k, v)` | `insert(k, v)` | [`upsert(k, v)`](Map::upsert) |
//! | insert only if absent | `entry(k).or_insert(v)` / `try_insert` | `entry(k).or_insert(v)` | `try_insert(k, v)` | [`insert(k, v)`](Map::insert) (`Err(existing)`) |
//! | overwrite only if present | `get_mut(&k)` | `get_mut(&k)` | `update(k, \|_\| v)` | [`put(k, v)`](Map::put) |
//! | read | `get(&k)` (a reference) | `get(&k)` (a lock guard) | `get(&k)` (a reference) | [`get(&k)`](Map::get) (a copy; [`AllocMap::get`] gives a reference) |
//! | read-modify-write | `get_mut` | `get_mut` / `entry` | `update` / `compute` | [`update`](Map::update), [`compare_exchange`](Map::compare_exchange), [`fetch_add`](Map::fetch_add) |
//! | insert computed value if absent | `entry(k).or_insert_with(f)` | `entry(k).or_insert_with(f)` | `get_or_insert_with(k, f)` | [`get_or_insert_with(k, f)`](Map::get_or_insert_with) |
//! | remove | `remove(&k)` | `remove(&k)` | `remove(&k)` | [`remove(&k)`](Map::remove) |
//! | remove if | `entry` + `remove` | `remove_if(&k, f)` | `remove_if(&k, f)` | [`remove_if(&k, f)`](Map::remove_if) |
//! | iterate | `iter()` | `iter()` (locks shards) | `iter()` (weak) | [`iter()`](Map::iter) (weak, never blocks), [`snapshot()`](Map::snapshot) (one instant) |
//!
//! ## Batches and prefetching (paper §3.3)
//!
//! A lookup on a large table waits about 100 ns for its cache line. A
//! batch hands the map many requests at once: it prefetches the bins of
//! the next requests while earlier ones run, so their misses overlap, and
//! still executes the requests in order (a later request sees an earlier
//! one's effect). On a memory-resident table, batches of 32 gave about
//! 4.5× the gets per second of one call per key in the project's benchmark
//! (0.85 against 0.18 of the machine's random-line-read limit; see
//! `BENCHMARKS.md`). A get in a batch is usually decided from its one
//! prefetched line.
//!
//! ```
//! use dlht::{Map, Request, Response, StopOn};
//!
//! let m: Map<u64, u64> = Map::with_capacity(1 << 10);
//! let reqs = [Request::Insert(1, 10), Request::Upsert(2, 20), Request::Get(1), Request::Remove(2)];
//! let mut out = [Response::NotExecuted; 4];
//! assert_eq!(m.batch(&reqs, &mut out, StopOn::Never), Ok(4));
//! assert_eq!(out[2], Response::Get(Some(10)));
//! assert_eq!(out[3], Response::Remove(Some(20)));
//!
//! // Gets only: one value (or None) per key, in order.
//! let mut values = [None; 3];
//! m.get_many(&[1, 2, 3], &mut values).unwrap();
//! assert_eq!(values, [Some(10), None, None]);
//!
//! // Or prefetch a key's bin yourself, do other work, then ask.
//! m.prefetch(&1);
//! assert_eq!(m.get(&1), Some(10));
//! ```
//!
//! ## Single-thread mode (paper §3.4.5)
//!
//! [`LocalMap`] is the same table for one thread: it is not `Sync`, so it
//! replaces every compare-and-swap by a plain store and skips the
//! reclamation announcements. It has the same operations, batches, the
//! per-key atomics, shrinking and serde included; its `iter`, `retain`
//! and `clear` take `&mut self` (any call through `&self` may resize the
//! index and free the bins a walk is reading).
//!
//! ```
//! use dlht::LocalMap;
//!
//! let m: LocalMap<u64, u64> = LocalMap::with_capacity(1 << 10);
//! assert_eq!(m.insert(7, 70), Ok(()));
//! assert_eq!(m.put(7, 71), Some(70));
//! assert_eq!(m.remove(&7), Some(71));
//! assert!(m.is_empty());
//! ```
//!
//! ## Any keys and values: allocator mode (paper §3.4.1)
//!
//! [`AllocMap`] holds keys and values of any type and size, each entry in
//! its own allocation; [`AllocMap::get`] returns a reference to the value,
//! valid while the [`Guard`] it was read under lives, even if the key is
//! removed meanwhile (epoch-based reclamation frees it later). Keys live in
//! up to [`NAMESPACES`] namespaces. A [`Guard`] belongs to its thread; async
//! code that holds values across `.await` takes an [`OwnedGuard`]
//! ([`AllocMap::owned_guard`]), which is `Send + Sync`.
//!
//! ```
//! use dlht::AllocMap;
//!
//! let m: AllocMap<Vec<u8>, String> = AllocMap::new();
//! let g = m.guard();
//! m.insert(b"k".to_vec(), "v".to_string(), &g).unwrap();
//! assert_eq!(m.get(&b"k"[..], &g).map(String::as_str), Some("v"));
//! let old = m.upsert(b"k".to_vec(), "w".to_string(), &g);
//! assert_eq!(old.map(String::as_str), Some("v")); // still readable under `g`
//! ```
//!
//! [`ByteMap`] is the same for byte strings with the paper's slot layout:
//! a key of at most 8 bytes lives in the slot itself, so a get of one is a
//! single memory access that returns the value's address ([`ValueRef`])
//! without reading it; longer keys share one allocation with their value.
//!
//! ```
//! let m = dlht::ByteMap::new();
//! let g = m.guard();
//! m.insert(b"k", b"v", &g)?.unwrap();
//! assert_eq!(m.get(b"k", &g).as_deref(), Some(&b"v"[..]));
//! # Ok::<(), dlht::Error>(())
//! ```
//!
//! ## Sets and iteration
//!
//! [`Set`] is the hash-set mode (paper §3.4.3). Every map and set has a
//! weakly consistent iterator that never blocks: keys present for the whole
//! iteration are yielded exactly once, even across resizes.
//! [`Map::snapshot`] is strongly consistent instead: the contents at one
//! instant, for which operations wait briefly.
//!
//! ```
//! let s: dlht::Set<u64> = (0..10).collect();
//! assert!(s.contains(&3));
//! assert_eq!(s.iter().count(), 10);
//! ```
//!
//! ## Transactions: shadow inserts (paper §3.2.2)
//!
//! [`Map::shadow_insert`] inserts a key hidden from gets, puts and removes
//! and holds it (inserts of it wait) until the returned [`ShadowInsert`] is
//! committed or aborted: the lock phase of a two-phase transaction.
//!
//! ```
//! let m = dlht::Map::<u64, u64>::new();
//! let held = m.shadow_insert(1, 100).unwrap();
//! assert_eq!(m.get(&1), None);
//! held.commit();
//! assert_eq!(m.get(&1), Some(100));
//! ```
//!
//! ## Layout (paper §3.1)
//!
//! The index is an array of bins. A bin is a 64-byte primary bucket — an
//! 8-byte header, 8 bytes of link metadata and three 16-byte key/value
//! slots — plus up to three link buckets of four slots each, chained from a
//! shared array holding one link bucket per eight bins: at most 15 slots.
//! The header packs a 32-bit version, a 2-bit bin state and a 2-bit state per
//! slot, so every insert and remove synchronizes on one word.
//!
//! ## Consistency
//!
//! - Every single-key call — `get`, `insert`, `put`, `remove`, `upsert`,
//!   the atomics (`compare_exchange`, `update`, `fetch_add`,
//!   `get_or_insert_with`, `remove_if`), and their [`AllocMap`] and
//!   [`ByteMap`] forms — is linearizable: it takes effect at one instant
//!   between its call and its return (checked per key against recorded
//!   concurrent histories in the tests). `update` and `remove_if` may run
//!   their closure more than once; only the run whose result is installed
//!   counts.
//! - A batch runs its requests in order, each linearizable on its own; the
//!   batch as a whole is not atomic (other threads may act between two of
//!   its requests).
//! - [`Map::len`]: exact when no operation is in flight; under
//!   concurrency, within the inserts and removes that complete during the
//!   call (see its docs).
//! - Iterators ([`Map::iter`], `retain`, `clear`, `Debug`, `Clone`,
//!   `PartialEq`) are weakly consistent: every key present for the whole
//!   walk is seen exactly once, with a value it had; keys inserted or
//!   removed meanwhile may or may not be. [`Map::snapshot`] (and serde's
//!   serialization, feature `serde`) is strongly consistent: the contents
//!   at one instant.
//! - A value read from an [`AllocMap`] or [`ByteMap`] stays valid, and
//!   unchanged, while the [`Guard`] it was read under lives, even if the
//!   key is removed or replaced meanwhile.
//! - A shadow insert is invisible to every other call until committed.
//!
//! ## Progress
//!
//! - `get` writes nothing and is lock-free; `put`, `remove` and the atomics
//!   are lock-free (one 16-byte CAS on the key's slot, retried only when
//!   another thread changed that slot).
//! - `insert` is lock-free except that it waits for a concurrent insert *of
//!   the same key* to publish its value (two instructions, unless that
//!   thread is preempted between them), and for a shadow insert of the same
//!   key to be committed or aborted.
//! - A resize never stops the map: while a bin is being transferred,
//!   operations on that one bin wait for its transfer (at most 15 slot
//!   copies by one thread — a wait only if that thread is preempted); all
//!   other bins stay available, and every thread that finds the index full
//!   helps transfer it. [`Map::reserve`] starts or helps such a resize.
//!   A shrink is the same transfer into a smaller index, one *target* bin
//!   at a time: operations on the two to sixteen bins that merge into it
//!   wait until all of them are copied (at most 15 keys in all).
//! - [`Map::snapshot`] freezes every bin for the time it takes to read
//!   them: updates and gets on the map wait meanwhile (one pass over the
//!   index), and resizes wait for it.
//! - Index reclamation never blocks: a replaced index is freed by the last
//!   thread to leave it. Allocator-mode values are freed by epoch
//!   reclamation; a thread holding a [`Guard`] (or an [`OwnedGuard`]) for
//!   long delays the freeing of every value removed meanwhile, never
//!   another thread's progress. Taking an [`OwnedGuard`] takes a lock and
//!   a `membarrier`; while one lives, a remove takes the lock too.
//!
//! See `docs/DESIGN.md` for the protocols, the hazards they close and the
//! memory-ordering argument.
//!
//! ## Hashing and security
//!
//! [`DefaultHashBuilder`] (rapidhash with its avalanche step) suits
//! arbitrary keys; [`Modulo`] is the paper's identity hash for uniformly
//! random keys, and **unsafe for keys a client chooses**: keys equal in
//! their low bits share a bin.
//!
//! Hash flooding: a bin holds at most 15 keys, so keys crafted to share a
//! bin would force resize after resize and finally [`Error::BinOverflow`]
//! (which [`Map::insert`] reports by panicking and [`Map::try_insert`]
//! returns; the map is unchanged either way). The default hasher is keyed:
//! each map draws a fresh seed (rapidhash mixes a per-thread counter, seeded
//! from the process's random seed, with stack-address entropy), and the
//! process draws random secrets once from the standard library's secure
//! random source. An attacker who cannot observe the map's bins cannot
//! aim keys at them (`tests/flood.rs` floods with keys that share a bin
//! under the identity and under an unkeyed mix: the map grows as for
//! ordinary keys). What it does not promise: rapidhash is not a
//! cryptographic PRF, and its seeds are meant to be unpredictable, not
//! secret against an attacker who can time many probes of one long-lived
//! map. For keys from untrusted clients where that matters, use SipHash-1-3
//! with 128-bit random keys — std's `RandomState` — as the hasher:
//! `Map::with_hasher(std::hash::RandomState::new())`; `dlht-bench hashers`
//! measures its cost beside rapidhash's. [`ByteMap`] hashes its slots'
//! key words with a keyed hash of its own, whatever its hasher for long
//! keys is, since short keys are their own key words.
//!
//! The hasher runs inside the map, also while a resize moves keys, and
//! **must not call into the map** it hashes for. Such re-entry is served
//! where it safely can be (it never frees memory in use), but during a
//! resize it can deadlock a [`Map`] and makes a [`LocalMap`] panic. A
//! hasher that panics outside a resize leaves the map unchanged; one that
//! panics while a resize moves its bin aborts the process with a message,
//! since the half-moved bin can be neither finished nor rolled back.
//!
//! ## Memory
//!
//! Large indexes are mmapped and advised `MADV_HUGEPAGE`. When the
//! operating system refuses the memory, that surfaces as [`Error`] from
//! [`Map::try_with_capacity`], [`Map::try_insert`] and [`Map::try_upsert`],
//! and the map is unchanged. That covers refusals at mapping time only:
//! index pages are committed lazily, on first touch, so under memory
//! overcommit (Linux's default) a system that runs out of memory later may
//! kill the process (the OOM killer) instead of failing an allocation.
//!
//! [`AllocMap`] and [`ByteMap`] allocate each entry from the global
//! allocator and free removed ones through epoch reclamation; glibc's
//! malloc may keep freed memory resident until `malloc_trim` (mimalloc or
//! jemalloc return it sooner).
//!
//! Indexes shrink. Every 1024 removes a thread checks the key count (a sum
//! over threads); below one key per eight bins the map moves to an index
//! of about two bins per key (at most 16× smaller per step), never below
//! the capacity it was built with, so `with_capacity(n)` keeps room for
//! `n`. [`Map::shrink_to_fit`] and [`Map::shrink_to`] shrink on demand,
//! down to the headroom `with_capacity` leaves. A grow happens near 2.3
//! keys per bin and lands near one key per bin, so the key count must
//! change at least fourfold before the other resize follows: a map near one
//! size never alternates. A replaced index is unmapped once no thread is
//! inside it, so resident memory comes back (`dlht-bench drain`: 515 MiB
//! for 2^22 keys, 2 MiB after the drain). Bins that cannot merge (a hash
//! that crowds a few bins, such as `Modulo` on strided keys) make the
//! shrink fall back: the map returns to its former size
//! ([`Stats::shrinks_fell_back`]) and waits for half as many keys, or
//! for as many removes as it had keys, before trying again.
//!
//! ## Platforms
//!
//! dlht needs a lock-free 16-byte compare-and-swap: x86-64 (`cmpxchg16b`,
//! every x86-64 CPU since about 2008) and AArch64 (through
//! `portable-atomic`; `casp` with LSE, a load/store-exclusive loop
//! without). A CPU without one gets [`Error::Unsupported`] when a map is
//! created. Software prefetching (batches, [`Map::prefetch`]) is issued on
//! x86-64 only; elsewhere batches still run in order, without the hint.
//! Huge pages are asked for on Linux (`MADV_HUGEPAGE`); elsewhere indexes
//! are plain allocations. Measured, and tested in CI, on x86-64 Linux.
//!
//! ## Features
//!
//! - `serde`: `Serialize` for [`Map`] (a snapshot) and [`Set`],
//!   `Deserialize` into a new one.
//! - `rayon`: `par_iter` for [`Map`] and [`Set`] (weakly consistent, like
//!   `iter`, with the index's bins split among rayon's workers),
//!   `ParallelExtend` (also through `&Map` / `&Set`, while others use the
//!   map) and `FromParallelIterator`.
//! - `internals`: the raw index and protocols, for the project's own tests
//!   and benchmarks; not a stable or safe API.

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
// docs.rs (`--cfg docsrs`, nightly): mark what a feature gates, as
// "Available on crate feature rayon only"; loom is a test cfg, not shown.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(docsrs, doc(auto_cfg(hide(loom))))]
#![warn(clippy::undocumented_unsafe_blocks)]

mod allocator;
mod arch;
mod batch;
mod compute;
mod count;
mod driver;
mod error;
mod hash;
mod iter;
mod local;
mod map;
mod persist;
mod plant;
mod protocol;
mod raw;
mod reclaim;
mod resize;
#[cfg(feature = "serde")]
mod serde_impl;
mod set;
mod stats;
mod sync;
mod word;

/// Loom models of the bin protocols (`RUSTFLAGS="--cfg loom" cargo test
/// -p dlht --lib`); reclamation's models live in `reclaim`.
#[cfg(all(test, loom))]
mod tests;

pub use allocator::{
    Access, AllocIter, AllocMap, AllocRequest, AllocResponse, ByteIter, ByteMap, ByteNamespace, ByteRequest,
    ByteResponse, Guard, KeyBytes, Namespace, Occupied, OwnedGuard, ValueRef, NAMESPACES,
};
pub use batch::{Request, Response, StopOn, WINDOW as BATCH_WINDOW};
pub use compute::{Computed, Op};
pub use error::Error;
pub use hash::{DefaultHashBuilder, Modulo, ModuloHasher};
pub use local::{LocalIter, LocalMap};
#[cfg(not(loom))]
pub use map::FileMap;
#[cfg(all(feature = "rayon", not(loom)))]
pub use map::ParIter;
pub use map::{Counter, Iter, Map, ShadowInsert, ShadowRefused, Shadowing};
#[cfg(not(loom))]
pub use persist::{hasher::FileHasher, heap::HeapReclaim, Durability, OpenOptions, Recovery};
/// A [`ByteMap`] kept in files: see [`ByteMap::open`].
#[cfg(not(loom))]
pub type FileByteMap = ByteMap<FileHasher>;
pub use set::{Set, SetRequest};
pub use stats::{Memory, Stats};
pub use word::Inline;

/// Hooks for the project's own tests and benchmark (feature `internals`):
/// not a stable API, and not meant for users.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    #[cfg(not(loom))]
    pub use crate::persist::crash::CrashPoint;
    /// A power loss simulated in process (feature `crash-points`).
    #[cfg(feature = "crash-points")]
    pub use crate::persist::mirror;
    pub use crate::raw::alloc::ZeroedArray;
    pub use crate::raw::index::live_indexes;

    /// Where `map.dlht` keeps its state word, and the word an open leaves
    /// there until its clean close: a test makes a map look crashed with
    /// them.
    #[cfg(not(loom))]
    pub const MAP_STATE_AT: usize = core::mem::offset_of!(crate::persist::layout::MapHeader, state);
    #[cfg(not(loom))]
    pub const MAP_STATE_OPEN: u64 = crate::persist::layout::OPEN;

    /// Bytes of the bins of the index `Map::with_capacity(keys)` allocates
    /// (the link array aside): the benchmark sizes its limit probe by it.
    pub fn index_bytes(keys: usize) -> Result<usize, crate::Error> {
        Ok(crate::driver::bins_for(keys)? * core::mem::size_of::<crate::raw::bucket::PrimaryBucket>())
    }

    /// Where `map.dlht` keeps the seed of the pending and shadow markers
    /// of the open that last ran operations: a test plants the leftovers
    /// that open could have left.
    #[cfg(not(loom))]
    pub const MAP_MARKER_SEED_AT: usize =
        core::mem::offset_of!(crate::persist::layout::MapHeader, marker_seed);

    /// The markers of an open whose seed is `seed` (zero: a map's before
    /// seeds existed), for bins of parity 0 and 1: `[dead, pending,
    /// shadow, moved]` each.
    pub fn session_marker_words(hash: impl Fn(u64) -> u64, seed: u64) -> [[u64; 4]; 2] {
        let m = crate::raw::markers::Markers::for_session(hash, seed);
        [0, 1].map(|b| [m.dead(b), m.pending(b), m.shadow(b), m.moved(b)])
    }

    /// The marker words `hash` gives bins 0 and 1 (dead, pending and
    /// shadow of each): words the map reserves internally, which users must
    /// still be able to store as ordinary keys.
    pub fn marker_words(hash: fn(u64) -> u64) -> [u64; 6] {
        let m = crate::raw::markers::Markers::for_hash(hash);
        [m.dead(0), m.dead(1), m.pending(0), m.pending(1), m.shadow(0), m.shadow(1)]
    }
}

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The persistent maps' guide, whose examples run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/PERSISTENCE.md")]
pub struct PersistenceDoctests;
