//! User code that calls back into the map it runs inside: the closures of
//! `update`, `remove_if` and a batch's `Update` / `RemoveIf` / `Merge`
//! requests insert enough keys to grow the map, or remove enough to shrink
//! it, while the outer call holds a bin of the index being replaced. Each
//! outer call must still take effect exactly once, on the key's entry in
//! the new index, and the index it held must stay allocated until it
//! returns (a `LocalMap` once freed it at once: the outer CAS then wrote
//! into freed memory). memcheck runs this file (scripts/memcheck.sh).
#![cfg(not(loom))]

use dlht::{LocalMap, Map, Request, Response, StopOn};
use std::cell::Cell;

/// Keys the closures insert: enough to grow a map made by `new()` several
/// times over.
const MANY: u64 = 5_000;

macro_rules! reentry_tests {
    ($modname:ident, $map:ident) => {
        mod $modname {
            use super::*;

            /// The map, filled with `MANY` keys by the first closure call
            /// only (a closure may run more than once).
            fn grow_inside(m: &$map<u64, u64>, ran: &Cell<u32>) {
                ran.set(ran.get() + 1);
                if ran.get() == 1 {
                    let bins = m.stats().bins;
                    for k in 1_000..1_000 + MANY {
                        m.insert(k, k).unwrap();
                    }
                    assert!(m.stats().bins > bins, "the closure grew the map");
                }
            }

            #[test]
            fn an_update_whose_closure_grows_the_map_updates_the_key_once() {
                let m = $map::<u64, u64>::new();
                m.insert(1, 1).unwrap();
                let ran = Cell::new(0);
                let out = m.update(&1, |v| {
                    grow_inside(&m, &ran);
                    // The index the outer call holds is still allocated.
                    if stringify!($map) == "LocalMap" && ran.get() == 1 {
                        assert!(m.stats().indexes_awaiting_free >= 1, "{:?}", m.stats());
                    }
                    v + 100
                });
                assert_eq!(out, Some(101));
                assert_eq!(m.get(&1), Some(101));
                assert_eq!(m.len() as u64, 1 + MANY);
                assert!((1_000..1_000 + MANY).all(|k| m.get(&k) == Some(k)));
                assert_eq!(m.stats().indexes_awaiting_free, 0, "freed once the outer call returned");
            }

            #[test]
            fn a_remove_if_whose_closure_grows_the_map_removes_the_key() {
                let m = $map::<u64, u64>::new();
                m.insert(1, 1).unwrap();
                let ran = Cell::new(0);
                let out = m.remove_if(&1, |_| {
                    grow_inside(&m, &ran);
                    true
                });
                assert_eq!(out, Some(1));
                assert_eq!(m.get(&1), None);
                assert_eq!(m.len() as u64, MANY);
                let stats = m.stats();
                assert_eq!(stats.occupied_slots as u64, MANY, "{stats:?}");
                assert!((1_000..1_000 + MANY).all(|k| m.get(&k) == Some(k)));
            }

            #[test]
            fn a_declining_remove_if_whose_closure_grows_the_map_keeps_the_key() {
                let m = $map::<u64, u64>::new();
                m.insert(1, 1).unwrap();
                let ran = Cell::new(0);
                assert_eq!(
                    m.remove_if(&1, |_| {
                        grow_inside(&m, &ran);
                        false
                    }),
                    None
                );
                assert_eq!(m.get(&1), Some(1));
                assert_eq!(m.len() as u64, 1 + MANY);
            }

            #[test]
            fn an_update_whose_closure_shrinks_the_map_updates_the_key_once() {
                let m = $map::<u64, u64>::new();
                for k in 0..20_000 {
                    m.insert(k, k).unwrap();
                }
                let big = m.stats().bins;
                let ran = Cell::new(0);
                let out = m.update(&7, |v| {
                    ran.set(ran.get() + 1);
                    if ran.get() == 1 {
                        for k in 100..20_000 {
                            m.remove(&k);
                        }
                        m.shrink_to_fit();
                        assert!(m.stats().bins < big, "the closure shrank the map");
                    }
                    v + 1
                });
                assert_eq!(out, Some(8));
                assert_eq!(m.get(&7), Some(8));
                assert_eq!(m.len(), 100);
                assert!((0..100).filter(|&k| k != 7).all(|k| m.get(&k) == Some(k)));
            }

            #[test]
            fn an_update_whose_closure_removes_its_own_key_does_not_bring_it_back() {
                let m = $map::<u64, u64>::new();
                m.insert(1, 1).unwrap();
                let out = m.update(&1, |v| {
                    m.remove(&1);
                    v + 1
                });
                // The key was removed under the update: absent when it
                // looked again, so nothing changed.
                assert_eq!(out, None);
                assert_eq!(m.get(&1), None);
                assert_eq!(m.len(), 0);
                assert_eq!(m.stats().occupied_slots, 0);
                m.insert(1, 5).unwrap();
                assert_eq!(m.get(&1), Some(5));
            }

            #[test]
            fn a_remove_if_whose_closure_removes_and_reinserts_its_key_removes_it_once() {
                let m = $map::<u64, u64>::new();
                m.insert(1, 1).unwrap();
                let ran = Cell::new(0);
                let out = m.remove_if(&1, |v| {
                    ran.set(ran.get() + 1);
                    if ran.get() == 1 {
                        m.remove(&1);
                        m.insert(1, 2).unwrap();
                        m.insert(2, 2).unwrap();
                    }
                    let _ = v;
                    true
                });
                // The closure saw the new value (the slot changed under the
                // outer call) and removed it.
                assert_eq!((out, ran.get()), (Some(2), 2));
                assert_eq!((m.get(&1), m.get(&2)), (None, Some(2)));
                assert_eq!((m.len(), m.stats().occupied_slots), (1, 1));
            }

            #[test]
            fn a_closure_that_panics_inside_a_nested_grow_leaves_the_map_usable() {
                let m = $map::<u64, u64>::new();
                m.insert(1, 1).unwrap();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    m.update(&1, |_| {
                        for k in 1_000..1_000 + MANY {
                            m.insert(k, k).unwrap();
                        }
                        panic!("user code failed");
                    })
                }));
                assert!(r.is_err());
                assert_eq!(m.stats().indexes_awaiting_free, 0, "freed on unwind");
                assert_eq!(m.get(&1), Some(1));
                assert_eq!(m.len() as u64, 1 + MANY);
                assert_eq!(m.update(&1, |v| v + 1), Some(2));
            }
        }
    };
}

reentry_tests!(map, Map);
reentry_tests!(local_map, LocalMap);

// A batch's requests carry fn pointers, which reach a map through a
// thread-local.
std::thread_local! {
    static LOCAL: LocalMap<u64, u64> = LocalMap::new();
    static SHARED: Map<u64, u64> = Map::new();
}

fn grow_local(v: u64) -> u64 {
    LOCAL.with(|m| {
        (1_000..1_000 + MANY).for_each(|k| {
            let _ = m.insert(k, k); // runs again if the outer call retries
        })
    });
    v + 100
}

fn grow_local_and_take(_: u64) -> bool {
    LOCAL.with(|m| {
        (20_000..20_000 + MANY).for_each(|k| {
            let _ = m.insert(k, k); // runs again if the outer call retries
        })
    });
    true
}

fn grow_local_and_merge(v: u64, d: u64) -> u64 {
    LOCAL.with(|m| {
        (40_000..40_000 + MANY).for_each(|k| {
            let _ = m.insert(k, k); // runs again if the outer call retries
        })
    });
    v + d
}

fn grow_shared(v: u64) -> u64 {
    SHARED.with(|m| {
        (1_000..1_000 + MANY).for_each(|k| {
            let _ = m.insert(k, k); // runs again if the outer call retries
        })
    });
    v + 100
}

#[test]
fn batch_requests_whose_functions_grow_the_map_take_effect_once() {
    LOCAL.with(|m| {
        for k in 0..3 {
            m.insert(k, k).unwrap();
        }
        let reqs = [
            Request::Update(0, grow_local as fn(u64) -> u64),
            Request::Get(0),
            Request::RemoveIf(1, grow_local_and_take as fn(u64) -> bool),
            Request::Get(1),
            Request::Merge(2, 5, grow_local_and_merge as fn(u64, u64) -> u64),
            Request::Get(2),
        ];
        let mut out = vec![Response::Get(None); reqs.len()];
        assert_eq!(m.batch(&reqs, &mut out, StopOn::Never).unwrap(), reqs.len());
        assert_eq!(
            out,
            [
                Response::Update(Some(100)),
                Response::Get(Some(100)),
                Response::RemoveIf(Some(1)),
                Response::Get(None),
                Response::Merge(Some(2)),
                Response::Get(Some(7)),
            ]
        );
        assert_eq!(m.len() as u64, 2 + 3 * MANY);
        assert_eq!(m.stats().indexes_awaiting_free, 0);
    });
    SHARED.with(|m| {
        m.insert(0, 0).unwrap();
        let reqs = [Request::Update(0, grow_shared as fn(u64) -> u64), Request::Get(0)];
        let mut out = vec![Response::Get(None); reqs.len()];
        m.batch(&reqs, &mut out, StopOn::Never).unwrap();
        assert_eq!(out, [Response::Update(Some(100)), Response::Get(Some(100))]);
        assert_eq!(m.len() as u64, 1 + MANY);
    });
}

#[test]
fn a_panicking_retain_predicate_leaves_the_length_right() {
    let mut m: LocalMap<u64, u64> = (0..100).map(|k| (k, k)).collect();
    let mut seen = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        m.retain(|_, _| {
            seen += 1;
            assert!(seen <= 50, "user code failed");
            false
        })
    }));
    assert!(r.is_err());
    let present = m.iter().count();
    assert_eq!(present, 50);
    assert_eq!((m.len(), m.stats().occupied_slots), (50, 50));
    assert_eq!(m.clear(), 50);
    assert!(m.is_empty());
}
