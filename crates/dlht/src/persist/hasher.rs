//! The hasher of a persistent map: rapidhash with its avalanche step (the
//! default hasher's function), keyed by a seed and secrets drawn when the
//! map is made and kept in its file, so keys hash alike after a restart.

use core::hash::BuildHasher;
use std::sync::Mutex;

/// The hash builder of a persistent map ([`Map::open`](crate::Map::open)):
/// the default hasher's function with the keys kept in the map's file.
#[derive(Clone, Copy)]
pub struct FileHasher {
    state: rapidhash::quality::SeedableState<'static>,
}

impl core::fmt::Debug for FileHasher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FileHasher { .. }") // keys are secret
    }
}

/// Secrets of the maps opened in this process, each leaked once: the
/// hasher borrows its secrets for `'static`, and a process reopening one
/// map (or a few) keeps one copy each, not one per open.
static INTERNED: Mutex<Vec<&'static [u64; 7]>> = Mutex::new(Vec::new());

impl FileHasher {
    /// The hasher of `seed` and `secrets`.
    pub fn new(seed: u64, secrets: [u64; 7]) -> FileHasher {
        let mut interned = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
        let s = match interned.iter().find(|s| ***s == secrets) {
            Some(s) => *s,
            None => {
                let s: &'static [u64; 7] = Box::leak(Box::new(secrets));
                interned.push(s);
                s
            }
        };
        FileHasher { state: rapidhash::quality::SeedableState::custom(seed, s) }
    }
}

impl FileHasher {
    /// A hasher with a fresh seed and this process's secrets (drawn once):
    /// an in-memory map's, keyed like a persistent one's.
    pub fn random() -> FileHasher {
        static SECRETS: std::sync::OnceLock<[u64; 7]> = std::sync::OnceLock::new();
        let (seed, secrets) = fresh_keys();
        FileHasher::new(seed, *SECRETS.get_or_init(|| secrets))
    }

    /// The hasher of signatures of a persistent byte map keyed by `seed`
    /// and `secrets` (a seed of its own, derived).
    pub fn for_signatures(seed: u64, secrets: [u64; 7]) -> FileHasher {
        FileHasher::new(seed.rotate_left(32) ^ 0x5349_474e_4154_5552, secrets)
    }
}

impl BuildHasher for FileHasher {
    type Hasher = <rapidhash::quality::SeedableState<'static> as BuildHasher>::Hasher;

    #[inline(always)]
    fn build_hasher(&self) -> Self::Hasher {
        self.state.build_hasher()
    }
}

/// A fresh seed and secrets: drawn from the default hasher, which is seeded
/// from the operating system's randomness; each word odd and with enough
/// bits set (rapidhash asks for secrets that are not near zero).
pub fn fresh_keys() -> (u64, [u64; 7]) {
    let r = crate::hash::DefaultHashBuilder::default();
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut draw = 0u64;
    let mut word = || loop {
        draw += 1;
        let w = r.hash_one((t, draw, std::process::id())) | 1;
        if (16..=48).contains(&w.count_ones()) {
            return w;
        }
    };
    let seed = word();
    let secrets = [(); 7].map(|_| word());
    (seed, secrets)
}
