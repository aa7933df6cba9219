//! Hash functions (paper §3.4.3), selected through the `S: BuildHasher`
//! parameter of [`Map`](crate::Map).
//!
//! A key is hashed through its 8-byte word (`Inline::into_word`), and the
//! bin is the hash's low bits. Two choices ship:
//! - [`DefaultHashBuilder`]: rapidhash (the successor of wyhash, by the same
//!   author), randomly seeded per map: good for arbitrary keys. Measured
//!   against wyhash (final3, the `wyhash` crate) on one 8-byte word: 0.5–0.8
//!   ns per hash against 1.07 ns, and the same spread (54% occupancy when
//!   the index grows); `dlht-bench` prints the comparison.
//! - [`Modulo`]: the identity, so the bin is the key modulo the (power of
//!   two) number of bins — the paper's default for uniformly random keys.
//!   Keys that agree in their low bits collide; see `Error::BinOverflow`.

use core::hash::{BuildHasher, Hasher};

/// The default hasher: rapidhash, randomly seeded per map.
pub type DefaultHashBuilder = rapidhash::fast::RandomState;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modulo_is_identity_on_words() {
        for w in [0u64, 1, 12345, u64::MAX] {
            assert_eq!(Modulo.hash_one(w), w);
        }
    }
}
