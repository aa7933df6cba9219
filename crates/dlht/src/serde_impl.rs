//! serde support (feature `serde`): a [`Map`] serializes as a map of its
//! entries taken by [`Map::snapshot`] — the contents at one instant, even
//! under concurrent updates — and deserializes into a new map (a key
//! given twice keeps its last value, as `HashMap` does). A [`Set`]
//! serializes as a sequence of its keys (a weakly consistent walk).
//! [`AllocMap`] and [`ByteMap`] serialize their snapshots as
//! `(namespace, key, value)` triples.
//!
//! ```
//! let m: dlht::Map<u64, u64> = [(1, 10), (2, 20)].into_iter().collect();
//! let json = serde_json::to_string(&m).unwrap();
//! let back: dlht::Map<u64, u64> = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, m);
//! ```

use crate::allocator::{AllocMap, ByteMap};
use crate::local::LocalMap;
use crate::map::Map;
use crate::set::Set;
use crate::word::Inline;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

impl<K, V, S> Serialize for Map<K, V, S>
where
    K: Inline + Serialize,
    V: Inline + Serialize,
    S: BuildHasher,
{
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let entries = self.snapshot();
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (k, v) in &entries {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// A [`LocalMap`] serializes its entries as a map, as [`Map`] does, and
/// deserializes into a new one.
///
/// ```
/// let m: dlht::LocalMap<u64, u64> = [(1, 10), (2, 20)].into_iter().collect();
/// let back: dlht::LocalMap<u64, u64> = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
/// assert_eq!(back, m);
/// ```
impl<K, V, S> Serialize for LocalMap<K, V, S>
where
    K: Inline + Serialize,
    V: Inline + Serialize,
    S: BuildHasher,
{
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let words = self.words();
        let mut map = serializer.serialize_map(Some(words.len()))?;
        for (k, v) in words {
            map.serialize_entry(&K::from_word(k), &V::from_word(v))?;
        }
        map.end()
    }
}

/// Deserialize a map of entries into a new inlined map (`Map` or
/// `LocalMap`; a key given twice keeps its last value).
macro_rules! deserialize_entries {
    ($map:ident) => {
        impl<'de, K, V, S> Deserialize<'de> for $map<K, V, S>
        where
            K: Inline + Deserialize<'de>,
            V: Inline + Deserialize<'de>,
            S: BuildHasher + Default,
        {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Entries<K, V, S>(PhantomData<(K, V, S)>);

                impl<'de, K, V, S> Visitor<'de> for Entries<K, V, S>
                where
                    K: Inline + Deserialize<'de>,
                    V: Inline + Deserialize<'de>,
                    S: BuildHasher + Default,
                {
                    type Value = $map<K, V, S>;

                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a map")
                    }

                    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                        let n = access.size_hint().unwrap_or(0);
                        let map =
                            $map::try_with_capacity_and_hasher(n, S::default()).map_err(de::Error::custom)?;
                        while let Some((k, v)) = access.next_entry()? {
                            map.try_upsert(k, v).map_err(de::Error::custom)?;
                        }
                        Ok(map)
                    }
                }

                deserializer.deserialize_map(Entries(PhantomData))
            }
        }
    };
}
deserialize_entries!(Map);
deserialize_entries!(LocalMap);

impl<K, S> Serialize for Set<K, S>
where
    K: Inline + Serialize,
    S: BuildHasher,
{
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for k in self.iter() {
            seq.serialize_element(&k)?;
        }
        seq.end()
    }
}

impl<'de, K, S> Deserialize<'de> for Set<K, S>
where
    K: Inline + Deserialize<'de>,
    S: BuildHasher + Default,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys<K, S>(PhantomData<(K, S)>);

        impl<'de, K, S> Visitor<'de> for Keys<K, S>
        where
            K: Inline + Deserialize<'de>,
            S: BuildHasher + Default,
        {
            type Value = Set<K, S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of keys")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let n = access.size_hint().unwrap_or(0);
                let set =
                    Set::try_with_capacity_and_hasher(n, S::default()).map_err(serde::de::Error::custom)?;
                while let Some(k) = access.next_element()? {
                    set.try_insert(k).map_err(serde::de::Error::custom)?;
                }
                Ok(set)
            }
        }

        deserializer.deserialize_seq(Keys(PhantomData))
    }
}

/// Allocator mode: an [`AllocMap`] serializes as a sequence of
/// `(namespace, key, value)` triples taken by [`AllocMap::snapshot`] (one
/// instant), so namespaces survive a round trip; it deserializes into a new
/// map (a key given twice in one namespace keeps its last value).
///
/// ```
/// let m = dlht::AllocMap::<String, Vec<u32>>::new();
/// let g = m.guard();
/// m.insert("a".into(), vec![1, 2], &g).unwrap();
/// m.namespace(5).unwrap().insert("a".into(), vec![3], &g).unwrap();
/// let json = serde_json::to_string(&m).unwrap();
/// let back: dlht::AllocMap<String, Vec<u32>> = serde_json::from_str(&json).unwrap();
/// let g = back.guard();
/// assert_eq!(back.get("a", &g), Some(&vec![1, 2]));
/// assert_eq!(back.namespace(5).unwrap().get("a", &g), Some(&vec![3]));
/// ```
impl<K, V, S> Serialize for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static + Serialize,
    V: Send + Sync + 'static + Serialize,
    S: BuildHasher,
{
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let g = self.guard();
        let entries: Vec<_> = self.snapshot(&g).collect();
        let mut seq = serializer.serialize_seq(Some(entries.len()))?;
        for e in &entries {
            seq.serialize_element(e)?;
        }
        seq.end()
    }
}

impl<'de, K, V, S> Deserialize<'de> for AllocMap<K, V, S>
where
    K: Hash + Eq + Send + Sync + 'static + Deserialize<'de>,
    V: Send + Sync + 'static + Deserialize<'de>,
    S: BuildHasher + Default,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Triples<K, V, S>(PhantomData<(K, V, S)>);

        impl<'de, K, V, S> Visitor<'de> for Triples<K, V, S>
        where
            K: Hash + Eq + Send + Sync + 'static + Deserialize<'de>,
            V: Send + Sync + 'static + Deserialize<'de>,
            S: BuildHasher + Default,
        {
            type Value = AllocMap<K, V, S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of (namespace, key, value)")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let n = access.size_hint().unwrap_or(0);
                let map =
                    AllocMap::try_with_capacity_and_hasher(n, S::default()).map_err(de::Error::custom)?;
                let g = map.guard();
                while let Some((ns, k, v)) = access.next_element::<(usize, K, V)>()? {
                    let space = map.namespace(ns).map_err(de::Error::custom)?;
                    space.try_upsert(k, v, &g).map_err(de::Error::custom)?;
                }
                drop(g);
                Ok(map)
            }
        }

        deserializer.deserialize_seq(Triples(PhantomData))
    }
}

/// A byte string serialized as bytes (formats without a bytes type, such as
/// JSON, write a sequence of numbers).
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// A byte string read back from bytes, a sequence of numbers or a string.
struct ByteBuf(Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BufVisitor;

        impl<'de> Visitor<'de> for BufVisitor {
            type Value = ByteBuf;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte string")
            }

            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.to_vec()))
            }

            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.as_bytes().to_vec()))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<ByteBuf, A::Error> {
                let mut v = Vec::with_capacity(access.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(b) = access.next_element::<u8>()? {
                    v.push(b);
                }
                Ok(ByteBuf(v))
            }
        }

        deserializer.deserialize_byte_buf(BufVisitor)
    }
}

/// A [`ByteMap`] serializes as a sequence of `(namespace, key, value)`
/// triples taken by [`ByteMap::snapshot`] (one instant), keys and values
/// as byte strings; it deserializes into a new map (keys and values given
/// as bytes, sequences of numbers or strings).
///
/// ```
/// let m = dlht::ByteMap::new();
/// let g = m.guard();
/// m.insert(b"key", b"value", &g).unwrap().unwrap();
/// let json = serde_json::to_string(&m).unwrap();
/// let back: dlht::ByteMap = serde_json::from_str(&json).unwrap();
/// assert_eq!(back.get(b"key", &back.guard()).as_deref(), Some(&b"value"[..]));
/// ```
impl<S: BuildHasher> Serialize for ByteMap<S> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        let g = self.guard();
        let entries: Vec<_> = self.snapshot(&g).collect();
        let mut seq = serializer.serialize_seq(Some(entries.len()))?;
        for (ns, k, v) in &entries {
            seq.serialize_element(&(ns, Bytes(k), Bytes(v)))?;
        }
        seq.end()
    }
}

impl<'de, S: BuildHasher + Default> Deserialize<'de> for ByteMap<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Triples<S>(PhantomData<S>);

        impl<'de, S: BuildHasher + Default> Visitor<'de> for Triples<S> {
            type Value = ByteMap<S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of (namespace, key, value)")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let n = access.size_hint().unwrap_or(0);
                let map =
                    ByteMap::try_with_capacity_and_hasher(n, S::default()).map_err(de::Error::custom)?;
                let g = map.guard();
                while let Some((ns, k, v)) = access.next_element::<(usize, ByteBuf, ByteBuf)>()? {
                    let space = map.namespace(ns).map_err(de::Error::custom)?;
                    space.upsert(&k.0, &v.0, &g).map_err(de::Error::custom)?;
                }
                drop(g);
                Ok(map)
            }
        }

        deserializer.deserialize_seq(Triples(PhantomData))
    }
}
