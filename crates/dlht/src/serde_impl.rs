//! serde support (feature `serde`): a [`Map`] serializes as a map of its
//! entries taken by [`Map::snapshot`] — the contents at one instant, even
//! under concurrent updates — and deserializes into a new map (a key
//! given twice keeps its last value, as `HashMap` does). A [`Set`]
//! serializes as a sequence of its keys (a weakly consistent walk).
//!
//! ```
//! let m: dlht::Map<u64, u64> = [(1, 10), (2, 20)].into_iter().collect();
//! let json = serde_json::to_string(&m).unwrap();
//! let back: dlht::Map<u64, u64> = serde_json::from_str(&json).unwrap();
//! assert_eq!(back, m);
//! ```

use crate::map::Map;
use crate::set::Set;
use crate::word::Inline;
use core::fmt;
use core::hash::BuildHasher;
use core::marker::PhantomData;
use serde::de::{MapAccess, SeqAccess, Visitor};
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

impl<'de, K, V, S> Deserialize<'de> for Map<K, V, S>
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
            type Value = Map<K, V, S>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let n = access.size_hint().unwrap_or(0);
                let map =
                    Map::try_with_capacity_and_hasher(n, S::default()).map_err(serde::de::Error::custom)?;
                while let Some((k, v)) = access.next_entry()? {
                    map.try_upsert(k, v).map_err(serde::de::Error::custom)?;
                }
                Ok(map)
            }
        }

        deserializer.deserialize_map(Entries(PhantomData))
    }
}

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
