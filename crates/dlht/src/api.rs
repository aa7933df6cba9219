//! What [`Map`](crate::Map) and [`LocalMap`](crate::LocalMap) share: the
//! word-level operations, written once over a [`Runner`], which knows how to
//! run a per-bin protocol on its kind of index (following transfers,
//! growing when full).

use crate::error::Error;
use crate::ops::insert::Inserted;
use crate::ops::{self, Step};
use crate::raw::header::{SlotState, SLOTS_PER_BIN};
use crate::raw::index::{BinRef, MAX_BINS, MIN_BINS};
use crate::raw::threading::Threading;

/// Keys per bin a table is sized for by `with_capacity(n)`: with uniform
/// hashing about 7% of bins then need a link bucket, well under the
/// one-in-eight that exist, so `n` inserts rarely resize.
const KEYS_PER_BIN_AT_CAPACITY: f64 = 1.5;

/// Bins of a map from `new()`.
pub(crate) const DEFAULT_BINS: usize = 16;

/// Marker for a map's key and value types: invariant in both (they appear
/// as argument and as result), and no auto-trait inference from K and V
/// (Send and Sync are decided by hand).
pub(crate) type KeyValue<K, V> = fn(K, V) -> (K, V);

/// Runs per-bin protocols for one map, from the index it currently uses.
pub(crate) trait Runner {
    /// How the index is shared.
    type T: Threading;

    /// Run `op` on the bin of `hash` until it is done; `len_delta` says how
    /// its result changes the number of keys.
    fn run<X>(
        &self,
        hash: u64,
        op: impl FnMut(&BinRef<'_, Self::T>) -> Step<X>,
        len_delta: impl Fn(&X) -> i64,
    ) -> Result<X, Error>;
}

/// Get on words.
#[inline(always)]
pub(crate) fn get<R: Runner>(r: &R, hash: u64, k: u64) -> Option<u64> {
    r.run(hash, |bin| ops::get::get(bin, k), |_| 0).expect("dlht invariant: get never grows")
}

/// Insert-if-absent on words.
#[inline(always)]
pub(crate) fn insert<R: Runner>(r: &R, hash: u64, k: u64, v: u64) -> Result<Inserted, Error> {
    r.run(hash, |bin| ops::insert::insert(bin, k, v), |r| (*r == Inserted::New) as i64)
}

/// Put on words.
#[inline(always)]
pub(crate) fn put<R: Runner>(r: &R, hash: u64, k: u64, v: u64) -> Option<u64> {
    r.run(hash, |bin| ops::put::put(bin, k, v), |_| 0).expect("dlht invariant: put never grows")
}

/// Remove on words.
#[inline(always)]
pub(crate) fn remove<R: Runner>(r: &R, hash: u64, k: u64) -> Option<u64> {
    r.run(hash, |bin| ops::remove::remove(bin, k), |r| -(r.is_some() as i64))
        .expect("dlht invariant: remove never grows")
}

/// Upsert on words: put, else insert, until one succeeds. Each attempt
/// linearizes at the put or insert that succeeds.
#[inline]
pub(crate) fn upsert<R: Runner>(r: &R, hash: u64, k: u64, v: u64) -> Result<Option<u64>, Error> {
    loop {
        if let Some(old) = put(r, hash, k, v) {
            return Ok(Some(old));
        }
        if insert(r, hash, k, v)? == Inserted::New {
            return Ok(None);
        }
        // Inserted by another thread meanwhile: put again.
    }
}

/// Bins for a map sized for `n` keys.
pub(crate) fn bins_for(n: usize) -> Result<usize, Error> {
    let want = (n as f64 / KEYS_PER_BIN_AT_CAPACITY).ceil();
    if want > MAX_BINS as f64 {
        return Err(Error::CapacityOverflow);
    }
    Ok((want as usize).max(MIN_BINS).next_power_of_two())
}

/// Before growing because `bin` is full: a bin full of live keys that all
/// agree with `hash` in every bit an index can use will never be split by
/// growing, so report it instead of growing forever.
///
/// The keys are copied out before the hasher runs: it is user code and may
/// call back into the map, and a nested insert that grows a `LocalMap`
/// frees the index this bin lies in.
pub(crate) fn check_separable<T: Threading>(
    bin: &BinRef<'_, T>,
    hash: u64,
    hash_word: impl Fn(u64) -> u64,
) -> Result<(), Error> {
    let h = bin.header();
    if h.first_invalid().is_some() {
        return Ok(()); // link buckets ran out: growing helps
    }
    let mut lm = None;
    let mut keys = [0u64; SLOTS_PER_BIN];
    let mut n = 0;
    for i in h.slots_in(SlotState::Valid) {
        keys[n] = bin.slot(&mut lm, i).load_key();
        n += 1;
    }
    let bits = (MAX_BINS - 1) as u64;
    let all_same = keys[..n].iter().all(|&k| hash_word(k) & bits == hash & bits);
    if all_same {
        Err(Error::BinOverflow)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_for_sizes() {
        assert_eq!(bins_for(0).unwrap(), 2);
        assert_eq!(bins_for(1).unwrap(), 2);
        assert_eq!(bins_for(1536).unwrap(), 1024);
        assert_eq!(bins_for(1537).unwrap(), 2048);
        assert!(bins_for(usize::MAX).is_err());
    }
}
