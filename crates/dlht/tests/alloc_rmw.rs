//! Read-modify-write on `AllocMap`: get_or_insert_with, update, compute,
//! remove_if, retain and clear against std's HashMap, exact counters under
//! threads, compute under races, and every value dropped exactly once
//! whoever wins.
#![cfg(not(loom))]

use dlht::AllocMap;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[derive(Clone, Copy, Debug)]
enum Op {
    Get(u8),
    Insert(u8, u32),
    Remove(u8),
    GetOrInsertWith(u8, u32),
    Update(u8, u32),
    RemoveIfEven(u8),
    RetainBelow(u32),
    Clear,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u8..48;
    prop_oneof![
        4 => k.clone().prop_map(Op::Get),
        4 => (k.clone(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => k.clone().prop_map(Op::Remove),
        4 => (k.clone(), any::<u32>()).prop_map(|(k, v)| Op::GetOrInsertWith(k, v)),
        4 => (k.clone(), any::<u32>()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => k.prop_map(Op::RemoveIfEven),
        1 => any::<u32>().prop_map(Op::RetainBelow),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    /// Every operation, the new ones among them, agrees with a HashMap.
    #[test]
    fn rmw_matches_hashmap(ops in proptest::collection::vec(op_strategy(), 1..600)) {
        let m = AllocMap::<String, u32>::new();
        let mut model: HashMap<String, u32> = HashMap::new();
        let g = m.guard();
        for (i, &op) in ops.iter().enumerate() {
            let key = |k: u8| format!("key {k}");
            match op {
                Op::Get(k) => prop_assert_eq!(m.get(&key(k), &g).copied(), model.get(&key(k)).copied(), "op {}", i),
                Op::Insert(k, v) => {
                    let got = m.insert(key(k), v, &g).map_err(|o| *o.current);
                    let want = match model.get(&key(k)) { Some(&c) => Err(c), None => { model.insert(key(k), v); Ok(()) } };
                    prop_assert_eq!(got, want, "op {}", i);
                }
                Op::Remove(k) => prop_assert_eq!(m.remove(&key(k), &g).copied(), model.remove(&key(k)), "op {}", i),
                Op::GetOrInsertWith(k, v) => {
                    let mut made = 0;
                    let got = *m.get_or_insert_with(key(k), || { made += 1; v }, &g);
                    let present = model.contains_key(&key(k));
                    let want = *model.entry(key(k)).or_insert(v);
                    prop_assert_eq!((got, made), (want, !present as i32), "op {}", i);
                }
                Op::Update(k, v) => {
                    let got = m.update(&key(k), |old| old ^ v, &g).copied();
                    let want = model.get_mut(&key(k)).map(|old| { *old ^= v; *old });
                    prop_assert_eq!(got, want, "op {}", i);
                }
                Op::RemoveIfEven(k) => {
                    let got = m.remove_if(&key(k), |v| v % 2 == 0, &g).copied();
                    let want = match model.get(&key(k)) { Some(&v) if v % 2 == 0 => model.remove(&key(k)), _ => None };
                    prop_assert_eq!(got, want, "op {}", i);
                }
                Op::RetainBelow(x) => {
                    let before = model.len();
                    model.retain(|_, v| *v < x);
                    prop_assert_eq!(m.retain(|_, _, v| *v < x, &g), before - model.len(), "op {}", i);
                }
                Op::Clear => {
                    prop_assert_eq!(m.clear(&g), model.len(), "op {}", i);
                    model.clear();
                }
            }
            prop_assert_eq!(m.len(), model.len(), "op {}", i);
        }
        let mut all: Vec<(String, u32)> = m.iter(&g).map(|(_, k, v)| (k.clone(), *v)).collect();
        all.sort();
        let mut want: Vec<(String, u32)> = model.into_iter().collect();
        want.sort();
        prop_assert_eq!(all, want);
    }
}

/// Concurrent `update`s of shared keys lose no increment.
#[test]
fn concurrent_updates_count_exactly() {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 20_000;
    let m = AllocMap::<String, u64>::new();
    for k in 0..8 {
        m.insert(format!("w{k}"), 0, &m.guard()).unwrap();
    }
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let m = &m;
            s.spawn(move || {
                let g = m.guard();
                for i in 0..ROUNDS {
                    let k = format!("w{}", (i + t) % 8);
                    assert!(m.update(&k, |n| n + 1, &g).is_some());
                }
            });
        }
    });
    let g = m.guard();
    let total: u64 = (0..8).map(|k| *m.get(&format!("w{k}"), &g).unwrap()).sum();
    assert_eq!(total, THREADS * ROUNDS);
}

/// A value whose drops are counted against its makings.
struct Counted {
    n: u64,
    live: &'static AtomicI64,
}

impl Counted {
    fn new(n: u64, live: &'static AtomicI64) -> Self {
        live.fetch_add(1, Ordering::Relaxed);
        Counted { n, live }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Racing `get_or_insert_with` on the same keys: one value per key wins and
/// every thread sees it; every value made is dropped exactly once (losers
/// at once, the rest when the map goes), none leaked.
#[test]
fn get_or_insert_with_races_drop_every_value_once() {
    static LIVE: AtomicI64 = AtomicI64::new(0);
    static MADE: AtomicU64 = AtomicU64::new(0);
    {
        let m = AllocMap::<u64, Counted>::new();
        let seen: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4u64)
                .map(|t| {
                    let m = &m;
                    s.spawn(move || {
                        let g = m.guard();
                        (0..5000u64)
                            .map(|k| {
                                m.get_or_insert_with(
                                    k,
                                    || {
                                        MADE.fetch_add(1, Ordering::Relaxed);
                                        Counted::new(k * 10 + t, &LIVE)
                                    },
                                    &g,
                                )
                                .n
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for k in 0..5000usize {
            let winner = seen[0][k];
            assert!(seen.iter().all(|s| s[k] == winner), "key {k}: threads saw different winners");
            assert_eq!(winner / 10, k as u64);
        }
        assert_eq!(m.len(), 5000);
        assert!(MADE.load(Ordering::Relaxed) >= 5000);
        // Removes and updates retire values through the guard's epoch.
        let g = m.guard();
        assert_eq!(m.retain(|_, k, _| k % 2 == 0, &g), 2500);
    }
    assert_all_freed(&LIVE);
}

/// Removed values are freed once no pinned thread can read them; each pin
/// advances the epoch and collects a little: flush until every value
/// counted by `live` is dropped (30 s at most), then check none is left.
fn assert_all_freed(live: &AtomicI64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while live.load(Ordering::Relaxed) > 0 && std::time::Instant::now() < deadline {
        for _ in 0..1024 {
            flush();
        }
        std::thread::yield_now();
    }
    assert_eq!(live.load(Ordering::Relaxed), 0, "values leaked or dropped twice");
}

/// Flush this thread's retired values (a throwaway map's guard pins the
/// same epoch collector as every allocator-mode map).
fn flush() {
    AllocMap::<u64, u64>::new().guard().flush();
}

/// `remove_if` judges the value it removes, even under concurrent updates:
/// an updater counts up while a remover waits for a value ≡ 3 (mod 7).
/// The updater stops at a value the remover accepts, so every run ends
/// with a removal, however the two threads are scheduled (on a loaded
/// machine the updater may run alone); what must hold is that no removed
/// value was one the predicate rejected.
#[test]
fn remove_if_judges_the_value_it_removes() {
    const LAST: u64 = 7 * 2000 + 3;
    let m = AllocMap::<u64, u64>::new();
    let g = m.guard();
    for _ in 0..50 {
        m.insert(1, 0, &g).unwrap();
        let start = std::sync::Barrier::new(2);
        let removed = std::thread::scope(|s| {
            s.spawn(|| {
                let g = m.guard();
                start.wait();
                for _ in 0..LAST {
                    if m.update(&1, |n| n + 1, &g).is_none() {
                        break;
                    }
                }
            });
            start.wait();
            loop {
                if let Some(v) = m.remove_if(&1, |n| n % 7 == 3, &g) {
                    break *v;
                }
            }
        });
        assert_eq!(removed % 7, 3, "removed a value the predicate rejected");
        assert!(m.get(&1, &g).is_none());
    }
}

/// Racing `compute`s add to shared counters made of drop-counted values:
/// the totals are exact, every value a losing closure made is dropped at
/// once, and replaced or removed ones once no guard can read them.
#[test]
fn compute_races_count_exactly_and_drop_every_value_once() {
    static LIVE: AtomicI64 = AtomicI64::new(0);
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 5000;
    {
        let m = AllocMap::<u64, Counted>::new();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let m = &m;
                s.spawn(move || {
                    let g = m.guard();
                    for i in 0..ROUNDS {
                        let add = |v: Option<&Counted>| {
                            dlht::Op::Upsert(Counted::new(v.map_or(1, |v| v.n + 1), &LIVE))
                        };
                        m.compute((i * 7 + t) % 64, add, &g);
                    }
                });
            }
        });
        let g = m.guard();
        let total: u64 = m.iter(&g).map(|(_, _, v)| v.n).sum();
        assert_eq!(total, THREADS * ROUNDS);
        // Remove half through compute too: the values go to reclamation.
        for k in 0..32 {
            assert!(matches!(m.compute(k, |_| dlht::Op::Remove, &g), dlht::Computed::Removed(_)));
        }
        assert_eq!(m.len(), 32);
    }
    assert_all_freed(&LIVE);
}
