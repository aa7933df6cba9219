//! Shadow inserts (paper §3.2.2, "Transactions") on a [`Map`]: insert a key
//! hidden from everyone, then commit or abort it.

use super::Map;
use crate::driver;
use crate::error::Error;
use crate::protocol::insert::Inserted;
use crate::word::Inline;
use core::hash::BuildHasher;

/// What [`Map::shadow_insert`] did: the key held, or why not.
pub type Shadowing<'m, K, V, S> = Result<ShadowInsert<'m, K, V, S>, ShadowRefused<V>>;

/// Why [`Map::shadow_insert`] did not take its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShadowRefused<V> {
    /// The key is present, with this value.
    Present(V),
    /// Another shadow insert holds the key (a transaction that has not
    /// committed or aborted yet).
    Shadowed,
}

/// A key held by [`Map::shadow_insert`]: hidden until [`commit`](Self::commit)
/// makes it present or [`abort`](Self::abort) (or dropping it) frees it.
///
/// While it is held, get, put and remove see the key absent; a plain insert
/// (or upsert) of the key **waits** until it is committed or aborted — the
/// shadow is a lock on the key — and then sees the outcome (the committed
/// value, or an absent key it inserts); a shadow insert of the key does not
/// wait but is refused with [`ShadowRefused::Shadowed`]. So a thread must
/// not insert a key it holds itself: it would wait for itself.
#[must_use = "dropping a shadow insert aborts it"]
pub struct ShadowInsert<'m, K: Inline, V: Inline, S: BuildHasher> {
    map: &'m Map<K, V, S>,
    key: u64,
    value: u64,
    hash: u64,
    /// False once committed or aborted.
    held: bool,
    /// Its cell in a persistent map's file (`persist`).
    cell: Option<usize>,
}

impl<'m, K: Inline, V: Inline, S: BuildHasher> ShadowInsert<'m, K, V, S> {
    /// The key held.
    pub fn key(&self) -> K {
        K::from_word(self.key)
    }

    /// Make the key present with the value given to the shadow insert.
    pub fn commit(mut self) {
        self.held = false;
        driver::commit(self.map, self.hash, self.key, self.value);
        self.map.release_shadow_cell(self.cell);
    }

    /// Give the key up: nothing was ever visible.
    pub fn abort(mut self) {
        self.held = false;
        self.release();
    }

    fn release(&self) {
        driver::abort(self.map, self.hash, self.key);
        self.map.release_shadow_cell(self.cell);
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Drop for ShadowInsert<'_, K, V, S> {
    fn drop(&mut self) {
        if self.held {
            self.release();
        }
    }
}

impl<K: Inline, V: Inline, S: BuildHasher> Map<K, V, S> {
    /// Insert `key` hidden (paper §3.2.2, for transactions): on success the
    /// key is held — get, put and remove see it absent, inserts of it wait
    /// (see [`ShadowInsert`]) — until the returned handle commits it with
    /// `value` or aborts it. Refused if the key is present or held by
    /// another shadow insert. Panics only if the index must grow and
    /// cannot; see [`try_shadow_insert`](Self::try_shadow_insert).
    ///
    /// ```
    /// use dlht::{Map, ShadowRefused};
    /// let m = Map::<u64, u64>::new();
    /// let held = m.shadow_insert(1, 10).unwrap();
    /// assert_eq!(m.get(&1), None); // hidden
    /// assert_eq!(m.shadow_insert(1, 11).err(), Some(ShadowRefused::Shadowed));
    /// held.commit();
    /// assert_eq!(m.get(&1), Some(10));
    /// assert_eq!(m.shadow_insert(1, 12).err(), Some(ShadowRefused::Present(10)));
    ///
    /// m.shadow_insert(2, 20).unwrap().abort();
    /// assert_eq!(m.get(&2), None);
    /// assert_eq!(m.len(), 1);
    /// ```
    pub fn shadow_insert(&self, key: K, value: V) -> Shadowing<'_, K, V, S> {
        driver::or_panic(self.try_shadow_insert(key, value))
    }

    /// Like [`shadow_insert`](Self::shadow_insert), with a failure to grow
    /// the index as an error (the map unchanged).
    pub fn try_shadow_insert(&self, key: K, value: V) -> Result<Shadowing<'_, K, V, S>, Error> {
        // A persistent map records the key before it is claimed, so that
        // recovery aborts it if the process dies holding it.
        #[cfg(not(loom))]
        let cell = match self.core.persist() {
            Some(p) => {
                let k = key.into_word();
                Some(p.hold_shadow(k, crate::driver::Front::hash_word(self, k))?)
            }
            None => None,
        };
        #[cfg(loom)]
        let cell = None;
        let (k, hash, inserted) = match driver::shadow_insert(self, &key) {
            Ok(r) => r,
            Err(e) => {
                self.release_shadow_cell(cell);
                return Err(e);
            }
        };
        Ok(match inserted {
            Inserted::New => {
                Ok(ShadowInsert { map: self, key: k, value: value.into_word(), hash, held: true, cell })
            }
            Inserted::Exists(v) => {
                self.release_shadow_cell(cell);
                Err(ShadowRefused::Present(V::from_word(v)))
            }
            Inserted::Shadowed => {
                self.release_shadow_cell(cell);
                Err(ShadowRefused::Shadowed)
            }
        })
    }

    /// A shadow insert of this (persistent) map that held file cell `cell`
    /// has committed or aborted, or never took its key.
    fn release_shadow_cell(&self, cell: Option<usize>) {
        #[cfg(not(loom))]
        if let (Some(i), Some(p)) = (cell, self.core.persist()) {
            p.release_shadow(i);
        }
        #[cfg(loom)]
        let _ = cell;
    }
}
