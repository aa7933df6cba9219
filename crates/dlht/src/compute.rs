//! `compute`: one read-modify-write of a key whatever its state (absent or
//! present), as papaya's `compute` — the closure sees the value there (or
//! none) and says what to do ([`Op`]); the change is a compare-and-replace
//! of the very entry the closure judged, and the closure runs again on the
//! new state when another thread changed the key meanwhile. Shared by every
//! map ([`Map`](crate::Map), [`LocalMap`](crate::LocalMap),
//! [`AllocMap`](crate::AllocMap), [`ByteMap`](crate::ByteMap)) through
//! [`Entries`], which each implements over its own entries.

use crate::error::Error;

/// What a [`compute`](crate::AllocMap::compute) closure asks for, given
/// the value of the key (or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op<V> {
    /// Store this value: inserted if the key is absent, replacing the
    /// value there if present (dlht's *upsert*).
    Upsert(V),
    /// Remove the key (nothing happens if it is absent).
    Remove,
    /// Change nothing.
    Keep,
}

/// What a [`compute`](crate::AllocMap::compute) did. `R` is how the map
/// returns a value: the value itself for [`Map`](crate::Map), a reference
/// valid while the call's guard lives for [`AllocMap`](crate::AllocMap)
/// (`&V`) and [`ByteMap`](crate::ByteMap) ([`ValueRef`](crate::ValueRef)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Computed<R> {
    /// The key was absent; this value is now there.
    Inserted(R),
    /// `old` was replaced by `new`.
    Replaced {
        /// The value the closure judged, no longer in the map.
        old: R,
        /// The value now there.
        new: R,
    },
    /// The key, with this value, was removed.
    Removed(R),
    /// Nothing changed ([`Op::Keep`], or [`Op::Remove`] of an absent
    /// key): the value the closure saw, if any.
    Unchanged(Option<R>),
}

impl<R> Computed<R> {
    /// The value there after the call, if any (`Inserted`, `Replaced`'s
    /// `new`, `Unchanged`).
    pub fn value(self) -> Option<R> {
        match self {
            Computed::Inserted(v) | Computed::Replaced { new: v, .. } => Some(v),
            Computed::Removed(_) => None,
            Computed::Unchanged(v) => v,
        }
    }
}

/// One key of a map, as `compute` changes it: each change succeeds only on
/// the exact entry given (in allocator mode compared by identity: the entry
/// is kept alive by the caller's guard, so its address cannot be reused
/// meanwhile; inline values by their word, which is the whole value).
pub(crate) trait Entries {
    /// A reference to a value, valid while the guard lives.
    type Ref: Copy;
    /// What a closure offers to store.
    type Value;
    /// The value there now.
    fn get(&mut self) -> Option<Self::Ref>;
    /// Insert `value` if the key is absent: the value stored, or the one
    /// there (`value` dropped).
    fn insert(&mut self, value: Self::Value) -> Result<Result<Self::Ref, Self::Ref>, Error>;
    /// Replace `current` with `value` if it is still there: `(old, new)`,
    /// or the value there now (`value` dropped).
    #[allow(clippy::type_complexity)]
    fn replace(
        &mut self,
        current: Self::Ref,
        value: Self::Value,
    ) -> Result<Result<(Self::Ref, Self::Ref), Option<Self::Ref>>, Error>;
    /// Remove `current` if it is still there: true if removed.
    fn remove(&mut self, current: Self::Ref) -> bool;
}

/// Run `op` on the key until its answer is applied to the state it judged.
pub(crate) fn compute<E: Entries>(
    entries: &mut E,
    mut op: impl FnMut(Option<E::Ref>) -> Op<E::Value>,
) -> Result<Computed<E::Ref>, Error> {
    let mut current = entries.get();
    loop {
        match (op(current), current) {
            (Op::Keep, _) | (Op::Remove, None) => return Ok(Computed::Unchanged(current)),
            (Op::Remove, Some(c)) => {
                if entries.remove(c) {
                    return Ok(Computed::Removed(c));
                }
                current = entries.get();
            }
            (Op::Upsert(v), None) => match entries.insert(v)? {
                Ok(new) => return Ok(Computed::Inserted(new)),
                Err(there) => current = Some(there),
            },
            (Op::Upsert(v), Some(c)) => match entries.replace(c, v)? {
                Ok((old, new)) => return Ok(Computed::Replaced { old, new }),
                Err(now) => current = now,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A single-threaded key whose state another "thread" changes once,
    /// right after the closure's first look: `compute` must judge again.
    struct Racy {
        there: Option<u32>,
        raced: bool,
    }

    impl Racy {
        fn race(&mut self) {
            if !self.raced {
                self.raced = true;
                self.there = Some(self.there.map_or(100, |v| v + 100));
            }
        }
    }

    impl Entries for Racy {
        type Ref = u32;
        type Value = u32;
        fn get(&mut self) -> Option<u32> {
            self.there
        }
        fn insert(&mut self, value: u32) -> Result<Result<u32, u32>, Error> {
            self.race();
            Ok(match self.there {
                Some(t) => Err(t),
                None => Ok(*self.there.insert(value)),
            })
        }
        fn replace(&mut self, current: u32, value: u32) -> Result<Result<(u32, u32), Option<u32>>, Error> {
            self.race();
            Ok(match self.there {
                Some(t) if t == current => Ok((t, *self.there.insert(value))),
                now => Err(now),
            })
        }
        fn remove(&mut self, current: u32) -> bool {
            self.race();
            let hit = self.there == Some(current);
            if hit {
                self.there = None;
            }
            hit
        }
    }

    #[test]
    fn a_change_between_look_and_apply_is_judged_again() {
        // Absent when looked at, inserted by another before ours.
        let mut k = Racy { there: None, raced: false };
        let mut seen = vec![];
        let r = compute(&mut k, |v| {
            seen.push(v);
            Op::Upsert(v.unwrap_or(0) + 1)
        });
        assert_eq!(r.unwrap(), Computed::Replaced { old: 100, new: 101 });
        assert_eq!(seen, [None, Some(100)]);

        // Present, replaced by another before our remove.
        let mut k = Racy { there: Some(1), raced: false };
        let r = compute(&mut k, |v| if v == Some(1) { Op::Remove } else { Op::Keep });
        assert_eq!(r.unwrap(), Computed::Unchanged(Some(101)));

        // Remove of an absent key and Keep change nothing.
        let mut k = Racy { there: None, raced: true };
        assert_eq!(compute(&mut k, |_| Op::<u32>::Remove).unwrap(), Computed::Unchanged(None));
        assert_eq!(Computed::Removed(3).value(), None);
        assert_eq!(Computed::Inserted(3).value(), Some(3));
    }
}
