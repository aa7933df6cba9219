//! The hashers of the comparison: dlht's (rapidhash or the identity,
//! chosen with `--hash`) and whether the peers share it. Its own room, so
//! that the C++ peers and the Rust ones can both name [`BenchHash`]
//! without importing each other.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};

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

/// What a peer's hasher must be: its own default, or [`BenchHash`].
pub trait PeerHash: BuildHasher + Default + Clone + Send + Sync + 'static {}
impl<S: BuildHasher + Default + Clone + Send + Sync + 'static> PeerHash for S {}
