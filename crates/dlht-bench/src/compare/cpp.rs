//! Optional C++ peers: GrowT's uaGrow (`growt`) and Boost's
//! `boost::concurrent_flat_map` (`boost-cfm`), each through a small adapter
//! of ours (`cpp/growt.cpp`, `cpp/boost_cfm.cpp`) that `build.rs` compiles
//! with the `cc` crate against source trees the user names. Nothing of
//! theirs is in this repository. Without the trees the build compiles no
//! C++, and asking for these systems prints a note and skips them.
//!
//! # Building them
//!
//! ```text
//! # GrowT, with its utils submodule (utils_tm)
//! git clone https://github.com/TooBiased/growt ~/peers/growt
//! git -C ~/peers/growt submodule update --init utils
//!
//! # Boost.Unordered 1.83 or later and Boost.Core of the same release; the
//! # other Boost headers it needs from Debian's libboost-dev (1.74)
//! apt-get install -y libboost-dev
//! git clone -b boost-1.88.0 https://github.com/boostorg/unordered ~/peers/boost-unordered
//! git clone -b boost-1.88.0 https://github.com/boostorg/core ~/peers/boost-core
//!
//! export DLHT_GROWT_DIR=~/peers/growt
//! export DLHT_BOOST_UNORDERED_DIR=~/peers/boost-unordered
//! export DLHT_BOOST_INCLUDE=~/peers/boost-core   # a path list; each folder or its include/
//! cargo run --release -p dlht-bench -- --systems dlht,growt,boost-cfm
//! ```
//!
//! Either variable alone builds that peer alone; a built peer joins the
//! comparison's default system set (the memory study runs it when named:
//! `dlht-bench memory --systems dlht,growt,boost-cfm`).
//! `DLHT_BOOST_UNORDERED_DIR` may also name a whole Boost release tree
//! (`boost/` at its root; then `DLHT_BOOST_INCLUDE` is not needed), and
//! `DLHT_CPP_NATIVE=1` adds `-march=native`. The adapters are C++20 (g++ 12
//! here). Boost.Unordered and Boost.Core at the tags boost-1.83.0 …
//! boost-1.88.0 build against Debian 12's Boost 1.74 headers; from
//! boost-1.89.0 on they also need a newer Boost.ContainerHash (its checkout
//! in `DLHT_BOOST_INCLUDE`; not tried). The Boost.Unordered of 1.74 itself
//! has no `concurrent_flat_map`, and 1.74's Boost.Core is too old for any
//! release that has it.
//!
//! # What they run
//!
//! - Hash: with dlht's hasher (the comparison's default) both run the
//!   formula of dlht's default hasher on the key word (rapidhash's
//!   `quality` hasher on one u64: two folded 64×64→128 multiplies with
//!   rapidhash's secrets), seeded once per process, in C++ so that it
//!   inlines; also under `--hash modulo`. With `--peer-default-hashers`:
//!   GrowT's murmur2 (its fallback default: its CMake default, XXH3, needs
//!   the xxHash submodule) and Boost's `boost::hash` (the identity on
//!   integers, post-mixed by the table).
//! - Each request is one call into C++ (not inlined into the bench's loop).
//! - GrowT's uaGrow holds keys 1 ..= 2^63 − 2 (0 is empty, 2^63 − 1 a
//!   tombstone, the top bit marks migrated cells), so the adapter stores
//!   `splitmix64⁻¹(k) + 1`, a bijection that costs two multiplies per
//!   request and fits every bench key (`splitmix64(i)` for small `i`);
//!   a key outside it panics on insert (a failed result check). GrowT
//!   reaches its table through per-thread handles: the adapter keeps one
//!   per table and thread slot (reused by later threads), see growt.cpp.
//!   GrowT never makes a table for fewer than 2^15 keys (its constructor's
//!   floor), so small tables cost it about 1 MiB each.
//! - Boost's map is pre-sized with `reserve`; gets copy the value in
//!   `cvisit`, puts assign it in `visit`.

use crate::compare::hashing::BenchHash;
use crate::compare::table::{Concurrent, Table};
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::ptr::NonNull;

/// A C++ peer system.
pub trait System: 'static {
    /// Name in reports.
    const NAME: &'static str;
    /// Whether this build has it.
    const BUILT: bool;
    /// What the report says when it is asked for and not built.
    const SKIP: &'static str;
}

/// GrowT's uaGrow.
pub enum GrowtSys {}
/// Boost's `concurrent_flat_map`.
pub enum BoostCfmSys {}

impl System for GrowtSys {
    const NAME: &'static str = "growt";
    const BUILT: bool = cfg!(dlht_growt);
    const SKIP: &'static str =
        "skipped, set DLHT_GROWT_DIR to a GrowT checkout and rebuild (see src/compare/cpp.rs)";
}

impl System for BoostCfmSys {
    const NAME: &'static str = "boost-cfm";
    const BUILT: bool = cfg!(dlht_boost_cfm);
    const SKIP: &'static str = "skipped, set DLHT_BOOST_UNORDERED_DIR to a Boost.Unordered (>= 1.83) checkout and rebuild (see src/compare/cpp.rs)";
}

/// One adapter instantiation's C API (a system with one hash).
pub trait Api: 'static {
    /// The report's note on how it runs.
    const NOTE: &'static str;
    /// A table pre-sized for `capacity` keys.
    fn create(capacity: usize) -> NonNull<c_void>;
    /// # Safety
    /// `t` came from `create` and is not used again.
    unsafe fn destroy(t: *mut c_void);
    /// 1 inserted, 0 present, -1 a key it cannot hold.
    /// # Safety
    /// `t` came from `create` and is live.
    unsafe fn insert(t: *mut c_void, k: u64, v: u64) -> c_int;
    /// # Safety
    /// As for `insert`.
    unsafe fn get(t: *mut c_void, k: u64, out: &mut u64) -> bool;
    /// # Safety
    /// As for `insert`.
    unsafe fn remove(t: *mut c_void, k: u64) -> bool;
    /// # Safety
    /// As for `insert`.
    unsafe fn put(t: *mut c_void, k: u64, v: u64) -> bool;
}

/// The hash a C++ peer gets: [`BenchHash`] (dlht's formula) or
/// [`OwnHash`] (the peer's own default).
pub trait HashFor<Sys> {
    /// The adapter instantiation with that hash.
    type Api: Api;
}

/// The peer's own default hash (`--peer-default-hashers`).
pub enum OwnHash {}

/// A C++ peer's table, owned.
pub struct Peer<Sys: System, S: HashFor<Sys>> {
    table: NonNull<c_void>,
    _m: PhantomData<fn() -> (Sys, S)>,
}

/// GrowT's uaGrow through `cpp/growt.cpp`.
pub type Growt<S = OwnHash> = Peer<GrowtSys, S>;
/// `boost::concurrent_flat_map` through `cpp/boost_cfm.cpp`.
pub type BoostCfm<S = OwnHash> = Peer<BoostCfmSys, S>;

// SAFETY: the adapters' tables take requests from any number of threads at
// once (GrowT through a handle per thread, which the adapter keeps), and
// the table is destroyed only through `drop`, which has it alone.
unsafe impl<Sys: System, S: HashFor<Sys>> Send for Peer<Sys, S> {}
// SAFETY: as for Send.
unsafe impl<Sys: System, S: HashFor<Sys>> Sync for Peer<Sys, S> {}

impl<Sys: System, S: HashFor<Sys>> Drop for Peer<Sys, S> {
    fn drop(&mut self) {
        // SAFETY: made by `create`, not used after this.
        unsafe { S::Api::destroy(self.table.as_ptr()) }
    }
}

impl<Sys: System, S: HashFor<Sys>> Table for Peer<Sys, S> {
    const NAME: &'static str = Sys::NAME;
    type Sharing = Concurrent;
    const NOTE: &'static str = S::Api::NOTE;
    fn with_capacity(n: usize) -> Self {
        Peer { table: S::Api::create(n), _m: PhantomData }
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        let mut v = 0;
        // SAFETY: the table is live while `self` is.
        unsafe { S::Api::get(self.table.as_ptr(), k, &mut v) }.then_some(v)
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        // SAFETY: as in `get`.
        match unsafe { S::Api::insert(self.table.as_ptr(), k, v) } {
            1 => true,
            0 => false,
            _ => panic!("{}: key {k:#x} is outside the keys it can hold", Sys::NAME),
        }
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        // SAFETY: as in `get`.
        unsafe { S::Api::remove(self.table.as_ptr(), k) }
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        // SAFETY: as in `get`.
        unsafe { S::Api::put(self.table.as_ptr(), k, v) }
    }
}

/// A peer this build lacks: making its table panics with the skip note
/// (the comparison and the memory study leave such systems out before).
#[cfg(not(all(dlht_growt, dlht_boost_cfm)))]
pub struct Missing<Sys>(PhantomData<Sys>);

#[cfg(not(all(dlht_growt, dlht_boost_cfm)))]
impl<Sys: System> Api for Missing<Sys> {
    const NOTE: &'static str = "";
    fn create(_: usize) -> NonNull<c_void> {
        panic!("{}: {}", Sys::NAME, Sys::SKIP)
    }
    unsafe fn destroy(_: *mut c_void) {}
    unsafe fn insert(_: *mut c_void, _: u64, _: u64) -> c_int {
        unreachable!("{} is not built", Sys::NAME)
    }
    unsafe fn get(_: *mut c_void, _: u64, _: &mut u64) -> bool {
        unreachable!("{} is not built", Sys::NAME)
    }
    unsafe fn remove(_: *mut c_void, _: u64) -> bool {
        unreachable!("{} is not built", Sys::NAME)
    }
    unsafe fn put(_: *mut c_void, _: u64, _: u64) -> bool {
        unreachable!("{} is not built", Sys::NAME)
    }
}

/// Declares one adapter instantiation's C functions and its [`Api`].
#[allow(unused_macros)]
macro_rules! ffi_api {
    ($name:ident, $note:expr, $create:ident, $destroy:ident, $insert:ident, $get:ident, $remove:ident, $put:ident) => {
        /// One adapter instantiation (see [`Api`]).
        pub enum $name {}

        extern "C" {
            fn $create(capacity: usize) -> *mut c_void;
            fn $destroy(t: *mut c_void);
            fn $insert(t: *mut c_void, k: u64, v: u64) -> c_int;
            fn $get(t: *mut c_void, k: u64, out: *mut u64) -> bool;
            fn $remove(t: *mut c_void, k: u64) -> bool;
            fn $put(t: *mut c_void, k: u64, v: u64) -> bool;
        }

        impl Api for $name {
            const NOTE: &'static str = $note;
            fn create(capacity: usize) -> NonNull<c_void> {
                // SAFETY: no preconditions; it allocates or ends the process.
                NonNull::new(unsafe { $create(capacity) }).expect("the C++ adapter returned no table")
            }
            unsafe fn destroy(t: *mut c_void) {
                // SAFETY: the caller's.
                unsafe { $destroy(t) }
            }
            #[inline]
            unsafe fn insert(t: *mut c_void, k: u64, v: u64) -> c_int {
                // SAFETY: the caller's.
                unsafe { $insert(t, k, v) }
            }
            #[inline]
            unsafe fn get(t: *mut c_void, k: u64, out: &mut u64) -> bool {
                // SAFETY: the caller's; `out` is a valid u64.
                unsafe { $get(t, k, out) }
            }
            #[inline]
            unsafe fn remove(t: *mut c_void, k: u64) -> bool {
                // SAFETY: the caller's.
                unsafe { $remove(t, k) }
            }
            #[inline]
            unsafe fn put(t: *mut c_void, k: u64, v: u64) -> bool {
                // SAFETY: the caller's.
                unsafe { $put(t, k, v) }
            }
        }
    };
}

#[cfg(dlht_growt)]
ffi_api!(
    GrowtRapid,
    "C++ via our adapter, one FFI call per request; stores splitmix64^-1(k)+1 (uaGrow holds keys 1..2^63-2); hash: dlht's rapidhash formula in C++ (also under --hash modulo)",
    dlht_growt_rapid_create,
    dlht_growt_rapid_destroy,
    dlht_growt_rapid_insert,
    dlht_growt_rapid_get,
    dlht_growt_rapid_remove,
    dlht_growt_rapid_put
);
#[cfg(dlht_growt)]
ffi_api!(
    GrowtOwn,
    "C++ via our adapter, one FFI call per request; stores splitmix64^-1(k)+1 (uaGrow holds keys 1..2^63-2); hash: GrowT's murmur2",
    dlht_growt_own_create,
    dlht_growt_own_destroy,
    dlht_growt_own_insert,
    dlht_growt_own_get,
    dlht_growt_own_remove,
    dlht_growt_own_put
);
#[cfg(not(dlht_growt))]
type GrowtRapid = Missing<GrowtSys>;
#[cfg(not(dlht_growt))]
type GrowtOwn = Missing<GrowtSys>;

#[cfg(dlht_boost_cfm)]
ffi_api!(
    BoostCfmRapid,
    "C++ via our adapter, one FFI call per request; hash: dlht's rapidhash formula in C++ (also under --hash modulo)",
    dlht_boost_cfm_rapid_create,
    dlht_boost_cfm_rapid_destroy,
    dlht_boost_cfm_rapid_insert,
    dlht_boost_cfm_rapid_get,
    dlht_boost_cfm_rapid_remove,
    dlht_boost_cfm_rapid_put
);
#[cfg(dlht_boost_cfm)]
ffi_api!(
    BoostCfmOwn,
    "C++ via our adapter, one FFI call per request; hash: boost::hash, post-mixed by the table",
    dlht_boost_cfm_own_create,
    dlht_boost_cfm_own_destroy,
    dlht_boost_cfm_own_insert,
    dlht_boost_cfm_own_get,
    dlht_boost_cfm_own_remove,
    dlht_boost_cfm_own_put
);
#[cfg(not(dlht_boost_cfm))]
type BoostCfmRapid = Missing<BoostCfmSys>;
#[cfg(not(dlht_boost_cfm))]
type BoostCfmOwn = Missing<BoostCfmSys>;

impl HashFor<GrowtSys> for BenchHash {
    type Api = GrowtRapid;
}
impl HashFor<GrowtSys> for OwnHash {
    type Api = GrowtOwn;
}
impl HashFor<BoostCfmSys> for BenchHash {
    type Api = BoostCfmRapid;
}
impl HashFor<BoostCfmSys> for OwnHash {
    type Api = BoostCfmOwn;
}

/// The C++ peers, whether built or not.
const PEERS: [(&str, bool, &str); 2] = [
    (GrowtSys::NAME, GrowtSys::BUILT, GrowtSys::SKIP),
    (BoostCfmSys::NAME, BoostCfmSys::BUILT, BoostCfmSys::SKIP),
];

/// Take the C++ peers this build lacks out of `names`; each one taken,
/// with its note.
pub fn take_unbuilt(names: &mut Vec<String>) -> Vec<(String, String)> {
    let mut skipped = Vec::new();
    names.retain(|n| match PEERS.iter().find(|(name, built, _)| n == name && !built) {
        Some((name, _, skip)) => {
            skipped.push((name.to_string(), skip.to_string()));
            false
        }
        None => true,
    });
    skipped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbuilt_peers_are_taken_out_with_a_note() {
        let mut names: Vec<String> = ["dlht", "growt", "boost-cfm", "papaya"].map(String::from).to_vec();
        let skipped = take_unbuilt(&mut names);
        let mut expect: Vec<&str> = vec!["dlht"];
        if cfg!(dlht_growt) {
            expect.push("growt");
        } else {
            assert!(skipped.iter().any(|(s, n)| s == "growt" && n.contains("DLHT_GROWT_DIR")));
        }
        if cfg!(dlht_boost_cfm) {
            expect.push("boost-cfm");
        } else {
            assert!(skipped.iter().any(|(s, n)| s == "boost-cfm" && n.contains("DLHT_BOOST_UNORDERED_DIR")));
        }
        expect.push("papaya");
        assert_eq!(names, expect);
        assert_eq!(skipped.len(), 4 - expect.len());
    }

    #[cfg(not(dlht_growt))]
    #[test]
    fn an_unbuilt_peer_panics_with_its_note() {
        let e = std::panic::catch_unwind(|| Growt::<BenchHash>::with_capacity(16)).err().unwrap();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(msg.contains("set DLHT_GROWT_DIR"), "{msg}");
    }

    /// Two threads, each inserting, reading, updating and removing its own
    /// keys (bench keys) while the other does, from a table sized for
    /// `cap` keys (GrowT grows past its smallest table, 2^15 keys, here).
    #[allow(dead_code)]
    fn two_threads<T: Table + Sync>(cap: usize) {
        use crate::compare::workloads::key;
        const PER: u64 = 1 << 15;
        let t = T::with_capacity(cap);
        std::thread::scope(|s| {
            for th in 0..2u64 {
                let t = &t;
                s.spawn(move || {
                    let mine = th * PER..(th + 1) * PER;
                    for i in mine.clone() {
                        assert!(t.insert(key(i), i), "{}: fresh insert {i}", T::NAME);
                    }
                    for i in mine.clone() {
                        assert!(!t.insert(key(i), 0), "{}: insert of present {i}", T::NAME);
                        assert_eq!(t.get(key(i)), Some(i), "{}: get {i}", T::NAME);
                        assert!(t.put(key(i), i + 1), "{}: put {i}", T::NAME);
                        assert_eq!(t.get(key(i)), Some(i + 1), "{}: get after put {i}", T::NAME);
                    }
                    for i in mine.clone().step_by(2) {
                        assert!(t.remove(key(i)), "{}: remove {i}", T::NAME);
                    }
                    for i in mine.clone() {
                        let present = i % 2 == 1;
                        assert_eq!(t.get(key(i)).is_some(), present, "{}: get after removes {i}", T::NAME);
                        assert_eq!(t.remove(key(i)), present, "{}: second remove {i}", T::NAME);
                        assert!(!t.put(key(i), 7), "{}: put of absent {i}", T::NAME);
                    }
                    // Absent keys: never inserted.
                    for i in 0..1000 {
                        assert_eq!(t.get(key(1 << 40 | i)), None, "{}: absent {i}", T::NAME);
                    }
                });
            }
        });
        // Many short-lived threads after each other: GrowT's handle slots
        // are given back and reused.
        for i in 0..64 {
            std::thread::scope(|s| {
                s.spawn(|| {
                    assert!(t.insert(key(1 << 41 | i), i));
                    assert_eq!(t.get(key(1 << 41 | i)), Some(i));
                });
            });
        }
    }

    #[cfg(dlht_growt)]
    #[test]
    fn growt_on_two_threads() {
        two_threads::<Growt<BenchHash>>(0);
        two_threads::<Growt<BenchHash>>(1 << 16);
        two_threads::<Growt<OwnHash>>(0);
    }

    #[cfg(dlht_growt)]
    #[test]
    fn growt_refuses_keys_outside_its_space() {
        use crate::harness::limit::splitmix;
        let t = Growt::<BenchHash>::with_capacity(16);
        // Stored as splitmix^-1(k) + 1: the largest that fits is 2^63 - 2.
        let top = (1u64 << 63) - 3;
        assert!(t.insert(splitmix(top), 5));
        assert_eq!(t.get(splitmix(top)), Some(5));
        for bad in [splitmix(top + 1), splitmix(top + 2), splitmix(u64::MAX)] {
            assert!(std::panic::catch_unwind(|| t.insert(bad, 1)).is_err(), "{bad:#x}");
            assert_eq!(t.get(bad), None);
            assert!(!t.remove(bad));
            assert!(!t.put(bad, 1));
        }
        // Key 0 is an ordinary key here (its preimage, 0x61c8864680b583eb, fits).
        assert!(t.insert(0, 9));
        assert_eq!(t.get(0), Some(9));
    }

    #[cfg(dlht_boost_cfm)]
    #[test]
    fn boost_cfm_on_two_threads() {
        two_threads::<BoostCfm<BenchHash>>(0);
        two_threads::<BoostCfm<BenchHash>>(1 << 16);
        two_threads::<BoostCfm<OwnHash>>(0);
        let t = BoostCfm::<BenchHash>::with_capacity(4);
        for k in [0, u64::MAX, 1 << 63] {
            assert!(t.insert(k, k ^ 1));
            assert_eq!(t.get(k), Some(k ^ 1));
        }
    }
}
