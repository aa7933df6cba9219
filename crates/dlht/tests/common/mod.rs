//! Shared test support: one adapter for every map under test, the matrix of
//! maps the tests run over, and a tiny PRNG.
#![allow(dead_code)]

pub mod file_layout;
pub mod lin;
pub mod modes;

use dlht::{DefaultHashBuilder, Error, LocalMap, Map, Modulo, Request, Response, Stats, StopOn};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// `DLHT_STRESS_SCALE` (default 1): longer (> 1) or shorter (< 1) stress
/// runs; scripts/memcheck.sh runs at 0.1.
pub fn stress_scale() -> f64 {
    std::env::var("DLHT_STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

/// Tiny xorshift PRNG: deterministic per seed, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A hasher keeping only `BITS` bits of the default hash: with few bits,
/// distinct keys share hashes all the time (collision lists in allocator
/// mode); `FewBits<0>` hashes everything to 0.
#[derive(Clone, Default)]
pub struct FewBits<const BITS: u32>(DefaultHashBuilder);

pub struct FewBitsHasher<const BITS: u32>(<DefaultHashBuilder as BuildHasher>::Hasher);

impl<const BITS: u32> Hasher for FewBitsHasher<BITS> {
    fn finish(&self) -> u64 {
        self.0.finish() & ((1u64 << BITS) - 1)
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes)
    }
}

impl<const BITS: u32> BuildHasher for FewBits<BITS> {
    type Hasher = FewBitsHasher<BITS>;
    fn build_hasher(&self) -> Self::Hasher {
        FewBitsHasher(self.0.build_hasher())
    }
}

/// The sequential meaning of insert-if-absent on a model map: `Err` with
/// the value present, else the pair is inserted.
pub fn model_insert(model: &mut HashMap<u64, u64>, k: u64, v: u64) -> Result<(), u64> {
    match model.get(&k) {
        Some(&old) => Err(old),
        None => {
            model.insert(k, v);
            Ok(())
        }
    }
}

/// The five operations of a map of u64 → u64: what the linearizability
/// harness records (a deliberately broken map implements it too).
pub trait Ops {
    fn get(&self, k: u64) -> Option<u64>;
    fn insert(&self, k: u64, v: u64) -> Result<(), u64>;
    fn put(&self, k: u64, v: u64) -> Option<u64>;
    fn remove(&self, k: u64) -> Option<u64>;
    fn upsert(&self, k: u64, v: u64) -> Option<u64>;
}

/// Every dlht map the tests run, behind one interface.
#[allow(clippy::len_without_is_empty)]
pub trait MapUnderTest: Ops {
    fn len(&self) -> usize;
    fn stats(&self) -> Stats;
    fn batch(
        &self,
        reqs: &[Request<u64, u64>],
        out: &mut [Response<u64>],
        stop: StopOn,
    ) -> Result<usize, Error>;
    fn get_many(&self, keys: &[u64], out: &mut [Option<u64>]) -> Result<(), Error>;
    fn shrink_to_fit(&self);
}

macro_rules! under_test {
    ($t:ident) => {
        impl<S: BuildHasher> Ops for $t<u64, u64, S> {
            fn get(&self, k: u64) -> Option<u64> {
                $t::get(self, &k)
            }
            fn insert(&self, k: u64, v: u64) -> Result<(), u64> {
                $t::insert(self, k, v)
            }
            fn put(&self, k: u64, v: u64) -> Option<u64> {
                $t::put(self, k, v)
            }
            fn remove(&self, k: u64) -> Option<u64> {
                $t::remove(self, &k)
            }
            fn upsert(&self, k: u64, v: u64) -> Option<u64> {
                $t::upsert(self, k, v)
            }
        }

        impl<S: BuildHasher> MapUnderTest for $t<u64, u64, S> {
            fn len(&self) -> usize {
                $t::len(self)
            }
            fn stats(&self) -> Stats {
                $t::stats(self)
            }
            fn batch(
                &self,
                reqs: &[Request<u64, u64>],
                out: &mut [Response<u64>],
                stop: StopOn,
            ) -> Result<usize, Error> {
                $t::batch(self, reqs, out, stop)
            }
            fn get_many(&self, keys: &[u64], out: &mut [Option<u64>]) -> Result<(), Error> {
                $t::get_many(self, keys, out)
            }
            fn shrink_to_fit(&self) {
                $t::shrink_to_fit(self)
            }
        }
    };
}
under_test!(Map);
under_test!(LocalMap);

/// Builds one configuration of the matrix, sized for `n` keys.
pub type Build<'a, M> = dyn Fn(usize) -> Box<M> + 'a;

/// Bins per transfer chunk in the small-chunk configurations: indexes of a
/// few hundred bins and up then transfer in many chunks, with helpers.
pub const SMALL_CHUNK: usize = 1;

/// Run `test` over every concurrent configuration: `Map` with each hasher,
/// with the default transfer chunk and with chunks of [`SMALL_CHUNK`] bins.
/// `test` gets the configuration's name (for messages) and a builder.
pub fn with_shared_maps(mut test: impl FnMut(&str, &Build<'_, dyn MapUnderTest + Sync>)) {
    fn shared<S: BuildHasher + Sync + Send + Default + 'static>(
        chunk: Option<usize>,
    ) -> impl Fn(usize) -> Box<dyn MapUnderTest + Sync> {
        move |n| {
            let m = Map::<u64, u64, S>::with_capacity_and_hasher(n, S::default());
            Box::new(match chunk {
                Some(c) => m.with_transfer_chunk(c),
                None => m,
            })
        }
    }
    test("Map, default hasher", &shared::<dlht::DefaultHashBuilder>(None));
    test("Map, default hasher, 1-bin chunks", &shared::<dlht::DefaultHashBuilder>(Some(SMALL_CHUNK)));
    test("Map, modulo", &shared::<Modulo>(None));
    test("Map, modulo, 1-bin chunks", &shared::<Modulo>(Some(SMALL_CHUNK)));
}

/// Run `test` over every configuration: those of [`with_shared_maps`] and
/// the single-thread `LocalMap` with each hasher.
pub fn with_maps(mut test: impl FnMut(&str, &Build<'_, dyn MapUnderTest>)) {
    with_shared_maps(|name, build| test(name, &|n| build(n)));
    test("LocalMap, default hasher", &|n| Box::new(LocalMap::<u64, u64>::with_capacity(n)));
    test("LocalMap, modulo", &|n| {
        Box::new(LocalMap::<u64, u64, Modulo>::with_capacity_and_hasher(n, Modulo))
    });
}

/// Sets its flag when dropped, also on unwind: a test thread that fails
/// still stops the helper threads that wait for the flag (a scope joins
/// them before the failure is reported).
pub struct SetOnDrop<'a>(pub &'a std::sync::atomic::AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A byte map test's key for `k`: short little-endian bytes for even `k`,
/// a longer string for odd.
pub fn key_bytes(k: u64) -> Vec<u8> {
    if k % 2 == 0 {
        let n = (8 - k.leading_zeros() as usize / 8).max(1);
        k.to_le_bytes()[..n].to_vec()
    } else {
        format!("odd-key-{k:016}").into_bytes()
    }
}

/// An 8-byte value's word.
pub fn word(v: dlht::ValueRef<'_>) -> u64 {
    u64::from_le_bytes(v.as_bytes().try_into().expect("8-byte values"))
}
