//! Per-key atomic read-modify-write on a [`Map`] (and a
//! [`LocalMap`](crate::LocalMap)): each call is one
//! conditional 16-byte CAS on the key's slot (`protocol::put::update`,
//! `protocol::remove::remove_if`), retried only when another thread changed
//! that slot meanwhile — lock-free, no allocation.

use super::Map;
use crate::compute::{self, Computed, Op};
use crate::driver::{self, or_panic};
use crate::error::Error;
use crate::local::LocalMap;
use crate::protocol::put::Change;
use crate::word::Inline;
use core::hash::BuildHasher;

/// A value type that [`Map::fetch_add`] can add to: the integers, with
/// wrapping arithmetic.
pub trait Counter: Inline {
    /// `self + delta`, wrapping on overflow.
    fn wrapping_add(self, delta: Self) -> Self;
}

macro_rules! counter {
    ($($t:ty),*) => {$(
        impl Counter for $t {
            #[inline(always)]
            fn wrapping_add(self, delta: Self) -> Self {
                <$t>::wrapping_add(self, delta)
            }
        }
    )*};
}
counter!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// The per-key atomics, for [`Map`] and [`LocalMap`](crate::LocalMap)
/// alike (the same driver calls; in the single-thread mode every CAS is a
/// load-compare-store).
macro_rules! atomics {
    ($map:ident) => {
        impl<K: Inline, V: Inline, S: BuildHasher> $map<K, V, S> {
            /// Replace the value of `key` with `new` if it is `expected` (the same
            /// word). `Ok(expected)` if replaced; `Err(Some(current))` if the key
            /// holds another value; `Err(None)` if it is absent (nothing is
            /// inserted).
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// m.insert(1, 10).unwrap();
            /// assert_eq!(m.compare_exchange(&1, 10, 11), Ok(10));
            /// assert_eq!(m.compare_exchange(&1, 10, 12), Err(Some(11)));
            /// assert_eq!(m.compare_exchange(&2, 0, 1), Err(None));
            /// ```
            #[inline]
            pub fn compare_exchange(&self, key: &K, expected: V, new: V) -> Result<V, Option<V>> {
                let e = expected.into_word();
                match driver::update(self, key, |v| (v.into_word() == e).then_some(new)) {
                    Change::Changed(_) => Ok(expected),
                    Change::Kept(cur) => Err(Some(V::from_word(cur))),
                    Change::Absent => Err(None),
                }
            }

            /// Replace the value `v` of a present `key` with `f(v)`, atomically: if
            /// another thread changes the value first, `f` runs again on the new
            /// one (so it may run more than once, and should have no other
            /// effect). The new value, or None if `key` is absent (nothing is
            /// inserted).
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// m.insert(1, 10).unwrap();
            /// assert_eq!(m.update(&1, |v| v * 2), Some(20));
            /// assert_eq!(m.update(&2, |v| v * 2), None);
            /// ```
            #[inline]
            pub fn update(&self, key: &K, mut f: impl FnMut(V) -> V) -> Option<V> {
                let mut new = None;
                match driver::update(self, key, |v| {
                    let n = f(v);
                    new = Some(n);
                    Some(n)
                }) {
                    Change::Changed(_) => new,
                    _ => None,
                }
            }

            /// Add `delta` to the value of `key`, inserting `delta` if the key is
            /// absent: the value before, or None if it was absent. Each call takes
            /// effect exactly once, at one instant (the CAS or the insert that
            /// succeeds), so concurrent counts add up exactly.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// assert_eq!(m.fetch_add(7, 1), None);
            /// assert_eq!(m.fetch_add(7, 5), Some(1));
            /// assert_eq!(m.get(&7), Some(6));
            /// ```
            #[inline]
            pub fn fetch_add(&self, key: K, delta: V) -> Option<V>
            where
                V: Counter,
            {
                or_panic(self.try_fetch_add(key, delta))
            }

            /// Like [`fetch_add`](Self::fetch_add), returning a failure to grow the
            /// index (for the insert) as an error.
            pub fn try_fetch_add(&self, key: K, delta: V) -> Result<Option<V>, Error>
            where
                V: Counter,
            {
                driver::merge(self, key, delta, |v| v.wrapping_add(delta))
            }

            /// The value of `key`, inserting `f()` first if the key is absent.
            /// `f` runs at most once, only if the key was absent when looked up;
            /// if another thread inserts the key meanwhile, its value is returned
            /// and `f`'s is dropped.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// assert_eq!(m.get_or_insert_with(1, || 10), 10);
            /// assert_eq!(m.get_or_insert_with(1, || unreachable!()), 10);
            /// ```
            #[inline]
            pub fn get_or_insert_with(&self, key: K, f: impl FnOnce() -> V) -> V {
                or_panic(self.try_get_or_insert_with(key, f))
            }

            /// Like [`get_or_insert_with`](Self::get_or_insert_with), returning a
            /// failure to grow the index as an error.
            pub fn try_get_or_insert_with(&self, key: K, f: impl FnOnce() -> V) -> Result<V, Error> {
                if let Some(v) = self.get(&key) {
                    return Ok(v);
                }
                let v = f();
                Ok(match self.try_insert(key, v)? {
                    Ok(()) => v,
                    Err(there) => there,
                })
            }

            /// Remove `key` if `f` accepts its value (`f` may run more than once,
            /// if a put races): the value removed, or None if the key is absent or
            /// `f` declined.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// m.insert(1, 0).unwrap();
            /// m.insert(2, 5).unwrap();
            /// assert_eq!(m.remove_if(&1, |v| v == 0), Some(0));
            /// assert_eq!(m.remove_if(&2, |v| v == 0), None);
            /// assert_eq!(m.len(), 1);
            /// ```
            #[inline]
            pub fn remove_if(&self, key: &K, f: impl FnMut(V) -> bool) -> Option<V> {
                match driver::remove_if(self, key, f) {
                    Change::Changed(old) => Some(V::from_word(old)),
                    _ => None,
                }
            }

            /// Read-modify-write `key` whatever its state, as papaya's
            /// `compute`: `f` sees the value (None if absent) and answers with an
            /// [`Op`] — store a value (insert or replace), remove the key, or
            /// keep things as they are. The answer is applied only to the state
            /// `f` judged (an insert-if-absent, or a compare-and-exchange or
            /// conditional remove of that value); if another thread changed the
            /// key meanwhile, `f` runs again on what is there now. Returns what
            /// was done. Panics if the index cannot grow; see
            /// [`try_compute`](Self::try_compute).
            /// ```
            /// use dlht::{Computed, Op};
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// let bump = |n: Option<u64>| Op::Upsert(n.map_or(1, |n| n + 1));
            /// assert_eq!(m.compute(7, bump), Computed::Inserted(1));
            /// assert_eq!(m.compute(7, bump), Computed::Replaced { old: 1, new: 2 });
            /// assert_eq!(m.compute(7, |_| Op::Remove), Computed::Removed(2));
            /// assert_eq!(m.compute(7, |_| Op::Remove), Computed::Unchanged(None));
            /// ```
            pub fn compute(&self, key: K, f: impl FnMut(Option<V>) -> Op<V>) -> Computed<V> {
                or_panic(self.try_compute(key, f))
            }

            /// Like [`compute`](Self::compute), returning a failure to grow the
            /// index (for an insert) as an error.
            pub fn try_compute(
                &self,
                key: K,
                f: impl FnMut(Option<V>) -> Op<V>,
            ) -> Result<Computed<V>, Error> {
                compute::compute(&mut InlineKey { map: self, key }, f)
            }
        }

        impl<K: Inline, V: Inline, S: BuildHasher> compute::Entries for InlineKey<'_, $map<K, V, S>, K> {
            type Ref = V;
            type Value = V;

            fn get(&mut self) -> Option<V> {
                self.map.get(&self.key)
            }

            fn insert(&mut self, value: V) -> Result<Result<V, V>, Error> {
                Ok(self.map.try_insert(self.key, value)?.map(|()| value))
            }

            fn replace(&mut self, current: V, value: V) -> Result<Result<(V, V), Option<V>>, Error> {
                Ok(self.map.compare_exchange(&self.key, current, value).map(|old| (old, value)))
            }

            fn remove(&mut self, current: V) -> bool {
                let w = current.into_word();
                self.map.remove_if(&self.key, |v| v.into_word() == w).is_some()
            }
        }
    };
}

/// One key of an inline map, for [`compute`](compute::compute): values are
/// compared by their word, which is the whole value.
struct InlineKey<'m, M, K> {
    map: &'m M,
    key: K,
}
atomics!(Map);
atomics!(LocalMap);

impl<K: Inline, V: Inline, S: BuildHasher> Map<K, V, S> {
    /// Keep only the entries for which `keep(key, value)` is true.
    ///
    /// Concurrent-safe and non-blocking: it walks the map with the weakly
    /// consistent [`iter`](Self::iter) and removes each rejected entry with
    /// [`remove_if`](Self::remove_if) on the value it judged, so a value
    /// changed meanwhile is judged again (`keep` may run more than once for
    /// a key). A key present for the whole call is kept or removed as
    /// `keep` says; keys inserted, changed or removed meanwhile may be
    /// judged or not. Returns how many entries it removed.
    ///
    /// ```
    /// let m: dlht::Map<u64, u64> = (0..10).map(|k| (k, k)).collect();
    /// assert_eq!(m.retain(|k, _| k % 2 == 0), 5);
    /// assert_eq!(m.len(), 5);
    /// ```
    pub fn retain(&self, mut keep: impl FnMut(K, V) -> bool) -> usize {
        let mut removed = 0;
        for (k, v) in self.iter() {
            if !keep(k, v) && self.remove_if(&k, |now| !keep(k, now)).is_some() {
                removed += 1;
            }
        }
        removed
    }

    /// Remove every entry: [`retain`](Self::retain) keeping nothing, with
    /// its guarantees — every key present for the whole call is gone
    /// afterwards; keys inserted meanwhile may remain. Its removes count
    /// towards automatic shrinking like any others. Returns how many entries
    /// it removed.
    ///
    /// ```
    /// let m: dlht::Map<u64, u64> = (0..10).map(|k| (k, k)).collect();
    /// assert_eq!(m.clear(), 10);
    /// assert!(m.is_empty());
    /// ```
    pub fn clear(&self) -> usize {
        self.retain(|_, _| false)
    }
}
