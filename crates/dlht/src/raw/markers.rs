//! Marker keys: the paper's transfer keys, generalized (paper §3.2.4–3.2.5).
//!
//! A marker is a key word that can never belong to the bin it is written in,
//! because its hash selects a bin of the other parity. The bin index is
//! `hash & mask` with at least two bins, so a bin's parity is the hash's low
//! bit whatever the index size: a key whose hash is odd can never live in an
//! even bin, in this index or any later one. A user key equal to a marker is
//! therefore an ordinary key in the bins of the other parity, and is never
//! refused or confused.
//!
//! Each parity has two markers:
//! - **dead** replaces the key of a slot that was removed or transferred; a
//!   put whose 16-byte CAS expects the old key then fails (hazards 1, 5).
//! - **pending** marks a committed-but-unpublished insert: the slot is Valid,
//!   the key word is the pending marker and the value word holds the key
//!   being inserted, until the insert swaps in `(key, value)` (hazard 2).
//! - **moved** replaces the key of a slot a transfer copied into the next
//!   index: `(moved, key)`. Like dead for every operation, but a transfer's
//!   own mark, so that recovery after a crash can tell a key the dead
//!   transfer moved (and must still place) from one a remove took.
//! - **shadow** marks a shadow insert's slot (paper §3.2.2): the value word
//!   holds the key; the slot is Shadow until the commit makes it Valid and
//!   then swaps in `(key, value)`, as an insert publishes.

/// The markers for one map, chosen once from its hasher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Markers {
    /// `dead[p]` is used in bins of parity `p`.
    dead: [u64; 2],
    /// `pending[p]` is used in bins of parity `p`.
    pending: [u64; 2],
    /// `shadow[p]` is used in bins of parity `p`.
    shadow: [u64; 2],
    /// `moved[p]` is used in bins of parity `p`.
    moved: [u64; 2],
}

impl Markers {
    /// Pick markers for a hash function: the first four candidate words
    /// whose hash is odd serve even bins, the first four whose hash is even
    /// serve odd bins (dead, pending, shadow, moved in that order, so the
    /// first three are what they were before moved existed).
    pub fn for_hash(hash: impl Fn(u64) -> u64) -> Markers {
        let mut found: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        // Candidates spread over the word so that a hash with poor low bits
        // on small integers still yields both parities quickly.
        let mut candidate: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..100_000 {
            let bin_parity_served = 1 - (hash(candidate) & 1) as usize;
            if found[bin_parity_served].len() < 4 {
                found[bin_parity_served].push(candidate);
            }
            if found[0].len() == 4 && found[1].len() == 4 {
                return Markers {
                    dead: [found[0][0], found[1][0]],
                    pending: [found[0][1], found[1][1]],
                    shadow: [found[0][2], found[1][2]],
                    moved: [found[0][3], found[1][3]],
                };
            }
            candidate = candidate.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(0x1405_7B7E_F767_814F);
        }
        panic!("dlht: the hash function never produced both parities; it cannot index bins");
    }

    /// The markers of one open of a persistent map: dead and moved as
    /// [`for_hash`](Self::for_hash) gives them (recovery reads them in
    /// files any earlier open wrote), pending and shadow drawn anew from
    /// `seed` (zero: `for_hash`'s, as maps written before seeds did).
    ///
    /// Pending and shadow markers are never meant to outlive their open:
    /// recovery frees those a crash left where the dead threads' cells say.
    /// One left anywhere else (a free slot's leftover words that damage
    /// revived) would be waited on forever, for a publication no thread of
    /// this open will make; under a fresh seed it is an ordinary word
    /// instead, whose hash selects a bin of the other parity.
    #[cfg_attr(loom, allow(dead_code))] // persistent maps only
    pub fn for_session(hash: impl Fn(u64) -> u64, seed: u64) -> Markers {
        let fixed = Markers::for_hash(&hash);
        if seed == 0 {
            return fixed;
        }
        let taken = [fixed.dead, fixed.moved, fixed.pending, fixed.shadow];
        let mut found: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        // A different walk from `for_hash`'s, started from the seed.
        let mut candidate = seed ^ 0x2545_F491_4F6C_DD1D;
        for _ in 0..100_000 {
            candidate = candidate.wrapping_mul(0xD134_2543_DE82_EF95).wrapping_add(0x9E37_79B9_7F4A_7C15);
            let served = 1 - (hash(candidate) & 1) as usize;
            let fresh = taken.iter().all(|m| !m.contains(&candidate)) && !found[served].contains(&candidate);
            if fresh && found[served].len() < 2 {
                found[served].push(candidate);
            }
            if found[0].len() == 2 && found[1].len() == 2 {
                return Markers {
                    pending: [found[0][0], found[1][0]],
                    shadow: [found[0][1], found[1][1]],
                    ..fixed
                };
            }
        }
        panic!("dlht: the hash function never produced both parities; it cannot index bins");
    }

    /// The dead marker for the bin with index `bin`.
    #[inline]
    pub const fn dead(&self, bin: usize) -> u64 {
        self.dead[bin & 1]
    }

    /// The pending marker for the bin with index `bin`.
    #[inline]
    pub const fn pending(&self, bin: usize) -> u64 {
        self.pending[bin & 1]
    }

    /// The shadow marker for the bin with index `bin`.
    #[inline]
    pub const fn shadow(&self, bin: usize) -> u64 {
        self.shadow[bin & 1]
    }

    /// The moved marker for the bin with index `bin`.
    #[inline]
    pub const fn moved(&self, bin: usize) -> u64 {
        self.moved[bin & 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(hash: impl Fn(u64) -> u64 + Copy) {
        for seed in [0, 1, 2, u64::MAX, 0x1234_5678_9abc_def0] {
            check_markers(hash, Markers::for_session(hash, seed));
        }
        let (a, b) = (Markers::for_session(hash, 1), Markers::for_session(hash, 2));
        let zero = Markers::for_hash(hash);
        for bin in 0..2 {
            // Recovery reads dead and moved in any open's files: fixed.
            assert_eq!((a.dead(bin), a.moved(bin)), (zero.dead(bin), zero.moved(bin)));
            // Pending and shadow are the open's own.
            assert_ne!(a.pending(bin), b.pending(bin));
            assert_ne!(a.shadow(bin), b.shadow(bin));
            assert_ne!(a.pending(bin), zero.pending(bin));
        }
        assert_eq!(Markers::for_session(hash, 0), zero);
    }

    fn check_markers(hash: impl Fn(u64) -> u64 + Copy, m: Markers) {
        for bin in 0..4usize {
            let all = [m.dead(bin), m.pending(bin), m.shadow(bin), m.moved(bin)];
            for (i, a) in all.iter().enumerate() {
                assert!(all[i + 1..].iter().all(|b| a != b), "two markers of bin {bin} are equal");
            }
            for mk in all {
                assert_ne!(hash(mk) as usize & 1, bin & 1, "marker {mk:#x} could live in bin {bin}");
            }
            assert_ne!(m.dead(bin), m.pending(bin));
            assert_ne!(m.dead(bin), m.shadow(bin));
            assert_ne!(m.pending(bin), m.shadow(bin));
        }
    }

    #[test]
    fn markers_never_hash_into_their_bins() {
        check(|k| k); // modulo
        check(|k| k.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17));
        check(|k| k << 1 | ((k >> 7) & 1));
    }
}
