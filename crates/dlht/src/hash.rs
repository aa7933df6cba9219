//! Hash functions (paper §3.4.3), selected through the `S: BuildHasher`
//! parameter of [`Map`](crate::Map).
//!
//! A key is hashed through its 8-byte word (`Inline::into_word`), and the
//! bin is the hash's low bits. Two choices ship:
//! - [`DefaultHashBuilder`]: rapidhash (the successor of wyhash, by the same
//!   author) with its avalanche step, randomly seeded per map: good for
//!   arbitrary keys. `dlht-bench hashers` compares it with wyhash and
//!   modulo (cost per hash and occupancy when the index grows).
//!
//!   Not `rapidhash::fast`: it hashes a word with one folded multiply by a
//!   per-process random secret, and some secrets (11 of the 500 sets in the
//!   test below) crowd regular keys into a few bins: up to 32 of 10^4
//!   sequential keys in one of 2^14 bins, where the avalanche step's worst
//!   over 2000 secret sets is 9. Such a map grows far too early, and in the
//!   unit-test build (indexes capped at 2^14 bins) it reported
//!   `BinOverflow` in about one test process in ten.
//! - [`Modulo`]: the identity, so the bin is the key modulo the (power of
//!   two) number of bins — the paper's default for uniformly random keys.
//!   Keys that agree in their low bits collide; see `Error::BinOverflow`.

use core::hash::{BuildHasher, Hasher};

/// The default hasher: rapidhash with its avalanche step, randomly seeded
/// per map (per-process secrets, per-map seed).
pub type DefaultHashBuilder = rapidhash::quality::RandomState;

/// [`DefaultHashBuilder`]'s hash with secrets a test chooses (the default
/// draws them once per process, so one test process sees one set).
#[cfg(test)]
type DefaultWithSecrets<'s> = rapidhash::quality::SeedableState<'s>;

// The two must build the same hasher, or the spread test checks another hash.
#[cfg(test)]
const _: fn(
    <DefaultHashBuilder as BuildHasher>::Hasher,
) -> <DefaultWithSecrets<'static> as BuildHasher>::Hasher = |h| h;

/// Identity hashing: the bin of a key is `key mod bins`.
///
/// ```
/// use dlht::{Map, Modulo};
/// let m: Map<u64, u64, Modulo> = Map::with_hasher(Modulo);
/// m.insert(7, 70).unwrap();
/// assert_eq!(m.get(&7), Some(70));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modulo;

/// The [`Hasher`] of [`Modulo`]: returns the last word written.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModuloHasher(u64);

impl Hasher for ModuloHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write_u64(&mut self, w: u64) {
        self.0 = w;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by the map (it hashes words); folds bytes for other users.
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(buf);
        }
    }
}

impl BuildHasher for Modulo {
    type Hasher = ModuloHasher;
    #[inline]
    fn build_hasher(&self) -> ModuloHasher {
        ModuloHasher(0)
    }
}

/// The index hash of an allocator-mode map, whose key words are already
/// signatures (user hashes): a bijective mix (murmur3's 64-bit finalizer),
/// so that signatures that differ only in high bits — a poor user hasher's
/// — still spread over bins, and distinct signatures never share a hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SignatureMix;

/// [`SignatureMix`]'s hasher.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SignatureMixHasher(u64);

impl Hasher for SignatureMixHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    #[inline(always)]
    fn write_u64(&mut self, w: u64) {
        self.0 = w;
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("dlht invariant: signatures are hashed as words")
    }
}

impl BuildHasher for SignatureMix {
    type Hasher = SignatureMixHasher;
    #[inline(always)]
    fn build_hasher(&self) -> SignatureMixHasher {
        SignatureMixHasher(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most keys in one of `2^bits` bins when `keys` are hashed.
    fn fullest_bin(s: &impl BuildHasher, keys: impl Iterator<Item = u64>, bits: u32) -> usize {
        let mut count = vec![0usize; 1 << bits];
        for k in keys {
            count[(s.hash_one(k) & ((1 << bits) - 1)) as usize] += 1;
        }
        count.into_iter().max().unwrap_or(0)
    }

    /// How many of `trials` secret sets let some key pattern (10^4
    /// sequential keys, or keys that differ only above bit 14 or 32) put
    /// more than 12 keys in one of 2^14 bins. A good hash puts about 0.6
    /// keys in a bin and more than 12 in one with odds near 1e-11.
    fn crowding_secret_sets<S: BuildHasher>(
        trials: usize,
        build: impl Fn(u64, &'static [u64; 7]) -> S,
    ) -> usize {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x ^ (x >> 29)
        };
        (0..trials)
            .filter(|_| {
                // rapidhash forces a high, a middle and a low bit into each secret.
                let secrets: &'static [u64; 7] =
                    Box::leak(Box::new([(); 7].map(|_| next() | 1 << 63 | 1 << 31 | 1)));
                let s = build(next(), secrets);
                let patterns: [&dyn Fn(u64) -> u64; 3] = [&|k| k, &|k| k << 14, &|k| k << 32];
                patterns.iter().any(|p| fullest_bin(&s, (0..10_000).map(p), 14) > 12)
            })
            .count()
    }

    #[test]
    fn default_hash_spreads_key_patterns_under_any_secrets() {
        assert_eq!(crowding_secret_sets(500, DefaultWithSecrets::custom), 0);
    }

    /// The check above can fail: the non-avalanching `rapidhash::fast` (the
    /// default until it failed a CI run) crowds keys under some secrets.
    #[test]
    fn the_spread_check_catches_unavalanched_rapidhash() {
        assert!(crowding_secret_sets(500, rapidhash::fast::SeedableState::custom) > 0);
    }

    #[test]
    fn modulo_is_identity_on_words() {
        for w in [0u64, 1, 12345, u64::MAX] {
            assert_eq!(Modulo.hash_one(w), w);
        }
    }
}
