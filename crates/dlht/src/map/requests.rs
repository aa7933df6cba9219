//! The requests of the paper's API — get, insert, put, remove, upsert,
//! batches and prefetch — for [`Map`] and [`LocalMap`] alike: one
//! definition, since both forward to the same driver calls (the modes differ
//! in their `Front`, not in these methods), so each mode's docs and examples
//! come from here.

use super::Map;
use crate::batch::{Request, Response, StopOn};
use crate::driver;
use crate::error::Error;
use crate::local::LocalMap;
use crate::word::Inline;
use core::hash::BuildHasher;

macro_rules! requests {
    ($map:ident) => {
        impl<K: Inline, V: Inline, S: BuildHasher> $map<K, V, S> {
            /// The value of `key`, if present.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// m.insert(0, 1).unwrap();
            /// assert_eq!(m.get(&0), Some(1));
            /// assert_eq!(m.get(&u64::MAX), None);
            /// ```
            #[inline]
            pub fn get(&self, key: &K) -> Option<V> {
                driver::get(self, key)
            }

            /// True if `key` is present.
            #[inline]
            pub fn contains_key(&self, key: &K) -> bool {
                self.get(key).is_some()
            }

            /// Insert `key → value` if `key` is absent. `Err` carries the value
            /// already there (and nothing changes).
            ///
            /// Panics only if the index must grow and cannot; see
            /// [`try_insert`](Self::try_insert).
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// assert_eq!(m.insert(1, 10), Ok(()));
            /// assert_eq!(m.insert(1, 20), Err(10));
            /// ```
            #[inline]
            pub fn insert(&self, key: K, value: V) -> Result<(), V> {
                driver::or_panic(driver::try_insert(self, key, value))
            }

            /// Like [`insert`](Self::insert), but a failure to grow the index is
            /// returned as an error; the map is then unchanged.
            pub fn try_insert(&self, key: K, value: V) -> Result<Result<(), V>, Error> {
                driver::try_insert(self, key, value)
            }

            /// Replace the value of a present `key`, returning the old value; if
            /// `key` is absent, return None and insert nothing.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// assert_eq!(m.put(1, 10), None);
            /// assert_eq!(m.get(&1), None);
            /// m.insert(1, 10).unwrap();
            /// assert_eq!(m.put(1, 11), Some(10));
            /// ```
            #[inline]
            pub fn put(&self, key: K, value: V) -> Option<V> {
                driver::put(self, key, value)
            }

            /// Remove `key`, returning its value. The slot is reusable at once.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// m.insert(5, 50).unwrap();
            /// assert_eq!(m.remove(&5), Some(50));
            /// assert_eq!(m.remove(&5), None);
            /// ```
            #[inline]
            pub fn remove(&self, key: &K) -> Option<V> {
                driver::remove(self, key)
            }

            /// Insert or overwrite: the old value if `key` was present.
            ///
            /// Built from put and insert: each attempt linearizes at the put or
            /// insert that succeeds.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// assert_eq!(m.upsert(1, 10), None);
            /// assert_eq!(m.upsert(1, 11), Some(10));
            /// ```
            #[inline]
            pub fn upsert(&self, key: K, value: V) -> Option<V> {
                driver::or_panic(driver::try_upsert(self, key, value))
            }

            /// Like [`upsert`](Self::upsert), returning growth failure as an error.
            pub fn try_upsert(&self, key: K, value: V) -> Result<Option<V>, Error> {
                driver::try_upsert(self, key, value)
            }

            /// Run a batch of mixed requests in order, with the memory accesses of
            /// later requests prefetched while earlier ones run (paper §3.3).
            /// `responses[i]` receives the result of `requests[i]`. Returns how many
            /// requests ran; with [`StopOn::Failure`](crate::StopOn::Failure) the batch stops after the
            /// first request that does not succeed, and the rest stay
            /// [`Response::NotExecuted`](crate::Response::NotExecuted). An error (the index could not grow, or the
            /// buffers differ in length) also leaves the remaining requests not
            /// executed.
            ///
            /// ```
            #[doc = concat!("use dlht::{", stringify!($map), ", Request, Response, StopOn};")]
            #[doc = concat!("let m = ", stringify!($map), "::<u64, u64>::new();")]
            /// let reqs = [Request::Insert(1, 10), Request::Get(1), Request::Remove(2), Request::Put(1, 11)];
            /// let mut out = [Response::NotExecuted; 4];
            /// assert_eq!(m.batch(&reqs, &mut out, StopOn::Failure), Ok(3));
            /// assert_eq!(out, [Response::Insert(Ok(())), Response::Get(Some(10)), Response::Remove(None), Response::NotExecuted]);
            /// ```
            pub fn batch(
                &self,
                requests: &[Request<K, V>],
                responses: &mut [Response<V>],
                stop: StopOn,
            ) -> Result<usize, Error> {
                // In a LocalMap a resize inside the batch replaces and frees
                // the index: the pipeline asks for the current one at every step.
                crate::batch::run(self, requests, responses, stop)
            }

            /// Get many keys at once, prefetching ahead: `out[i]` receives the value
            /// of `keys[i]`. Errors only if the lengths differ.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// m.insert(3, 30).unwrap();
            /// let mut out = [None; 2];
            /// m.get_many(&[3, 4], &mut out).unwrap();
            /// assert_eq!(out, [Some(30), None]);
            /// ```
            pub fn get_many(&self, keys: &[K], out: &mut [Option<V>]) -> Result<(), Error> {
                crate::batch::get_many_of(self, keys, out)
            }

            /// Prefetch the bin of `key` into the cache, for callers that interleave
            /// independent work (coroutines, async) before the real request.
            ///
            /// ```
            #[doc = concat!("let m = dlht::", stringify!($map), "::<u64, u64>::new();")]
            /// m.prefetch(&7);
            /// assert_eq!(m.get(&7), None);
            /// ```
            #[inline]
            pub fn prefetch(&self, key: &K) {
                driver::prefetch(self, key)
            }
        }
    };
}
requests!(Map);
requests!(LocalMap);
