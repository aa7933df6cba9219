//! Batches: a batch gives exactly the results of running its requests one by
//! one, in order (model tests against std's HashMap, with resizes inside
//! batches and duplicate keys); stop-on-failure; bad buffers; and batched
//! clients racing resizes under the linearizability checker.
#![cfg(not(loom))]

mod common;

use common::lin::{check, Call, Clock, Event, Verdict};
use common::{with_maps, with_shared_maps, MapUnderTest, Rng};
use dlht::{Error, LocalMap, Map, Request, Response, StopOn};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Mutex;

type Req = Request<u64, u64>;
type Resp = Response<u64>;

/// The sequential meaning of a request.
fn apply(model: &mut HashMap<u64, u64>, r: Req) -> Resp {
    match r {
        Request::Get(k) => Response::Get(model.get(&k).copied()),
        Request::Insert(k, v) => Response::Insert(common::model_insert(model, k, v)),
        Request::Put(k, v) => Response::Put(model.get_mut(&k).map(|s| std::mem::replace(s, v))),
        Request::Remove(k) => Response::Remove(model.remove(&k)),
        Request::Upsert(k, v) => Response::Upsert(model.insert(k, v)),
        Request::CompareExchange(k, e, n) => Response::CompareExchange(match model.get_mut(&k) {
            Some(cur) if *cur == e => {
                *cur = n;
                Ok(e)
            }
            cur => Err(cur.copied()),
        }),
        Request::Update(k, f) => Response::Update(model.get_mut(&k).map(|cur| {
            *cur = f(*cur);
            *cur
        })),
        Request::Merge(k, x, f) => Response::Merge(match model.get_mut(&k) {
            Some(cur) => Some(std::mem::replace(cur, f(*cur, x))),
            None => {
                model.insert(k, x);
                None
            }
        }),
        Request::GetOrInsert(k, v) => Response::GetOrInsert(*model.entry(k).or_insert(v)),
        Request::RemoveIf(k, f) => Response::RemoveIf(match model.get(&k) {
            Some(&cur) if f(cur) => model.remove(&k),
            _ => None,
        }),
    }
}

fn double(v: u64) -> u64 {
    v.wrapping_mul(2)
}

fn is_even(v: u64) -> bool {
    v % 2 == 0
}

/// What a batch should return, and how many requests should run.
fn expected(model: &mut HashMap<u64, u64>, reqs: &[Req], stop: StopOn) -> (Vec<Resp>, usize) {
    let mut out = vec![Response::NotExecuted; reqs.len()];
    for (i, r) in reqs.iter().enumerate() {
        out[i] = apply(model, *r);
        if stop == StopOn::Failure && !out[i].succeeded() {
            return (out, i + 1);
        }
    }
    (out, reqs.len())
}

fn request() -> impl Strategy<Value = Req> {
    // A small key domain: duplicates inside one batch are common.
    let k = prop_oneof![0u64..24, Just(u64::MAX), 1_000u64..1_400];
    let v = 0u64..4;
    prop_oneof![
        3 => k.clone().prop_map(Request::Get),
        3 => (k.clone(), v.clone()).prop_map(|(k, v)| Request::Insert(k, v)),
        2 => (k.clone(), v.clone()).prop_map(|(k, v)| Request::Put(k, v)),
        2 => k.clone().prop_map(Request::Remove),
        1 => (k.clone(), v.clone()).prop_map(|(k, v)| Request::Upsert(k, v)),
        1 => (k.clone(), v.clone(), v.clone()).prop_map(|(k, e, n)| Request::CompareExchange(k, e, n)),
        1 => k.clone().prop_map(|k| Request::Update(k, double)),
        1 => (k.clone(), v.clone()).prop_map(|(k, d)| Request::fetch_add(k, d)),
        1 => (k.clone(), v.clone()).prop_map(|(k, x)| Request::Merge(k, x, u64::max)),
        1 => (k.clone(), v).prop_map(|(k, v)| Request::GetOrInsert(k, v)),
        1 => k.prop_map(|k| Request::RemoveIf(k, is_even)),
    ]
}

fn check_batches(name: &str, map: &dyn MapUnderTest, batches: &[(Vec<Req>, bool)]) {
    let mut model = HashMap::new();
    for (n, (reqs, stop)) in batches.iter().enumerate() {
        let stop = if *stop { StopOn::Failure } else { StopOn::Never };
        let (want, ran) = expected(&mut model, reqs, stop);
        let mut out = vec![Response::Get(Some(99)); reqs.len()]; // garbage in
        assert_eq!(map.batch(reqs, &mut out, stop), Ok(ran), "{name}, batch {n}");
        assert_eq!(out, want, "{name}, batch {n}: {reqs:?}");
    }
    let keys: Vec<u64> = (0..24).chain(1_000..1_400).chain([u64::MAX]).collect();
    let mut got = vec![None; keys.len()];
    map.get_many(&keys, &mut got).unwrap();
    for (k, g) in keys.iter().zip(got) {
        assert_eq!(g, model.get(k).copied(), "{name}, key {k}");
    }
}

fn batches() -> impl Strategy<Value = Vec<(Vec<Req>, bool)>> {
    proptest::collection::vec((proptest::collection::vec(request(), 0..80), any::<bool>()), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every configuration of the matrix (`common::with_maps`).
    #[test]
    fn batches_equal_one_by_one(b in batches()) {
        with_maps(|name, build| check_batches(name, &*build(1), &b));
    }
}

#[test]
fn order_inside_a_batch_is_kept() {
    let m = Map::<u64, u64>::new();
    let reqs = [
        Request::Insert(7, 1),
        Request::Get(7),
        Request::Remove(7),
        Request::Get(7),
        Request::Insert(7, 2),
        Request::Insert(7, 3),
        Request::Put(7, 4),
        Request::Upsert(7, 5),
        Request::Remove(7),
    ];
    let mut out = [Response::NotExecuted; 9];
    assert_eq!(m.batch(&reqs, &mut out, StopOn::Never), Ok(9));
    assert_eq!(
        out,
        [
            Response::Insert(Ok(())),
            Response::Get(Some(1)),
            Response::Remove(Some(1)),
            Response::Get(None),
            Response::Insert(Ok(())),
            Response::Insert(Err(2)),
            Response::Put(Some(2)),
            Response::Upsert(Some(4)),
            Response::Remove(Some(5)),
        ]
    );
    assert!(m.is_empty());
}

#[test]
fn stop_on_failure_leaves_the_rest_unexecuted() {
    let m = LocalMap::<u64, u64>::new();
    m.insert(1, 10).unwrap();
    // The third request (insert of a present key) fails: the fourth must not run.
    let reqs = [Request::Get(1), Request::Put(1, 11), Request::Insert(1, 12), Request::Remove(1)];
    let mut out = [Response::NotExecuted; 4];
    assert_eq!(m.batch(&reqs, &mut out, StopOn::Failure), Ok(3));
    assert_eq!(out[2], Response::Insert(Err(11)));
    assert_eq!(out[3], Response::NotExecuted);
    assert_eq!(m.get(&1), Some(11), "the remove did not run");
    // Without the option everything runs.
    assert_eq!(m.batch(&reqs, &mut out, StopOn::Never), Ok(4));
    assert_eq!(m.get(&1), None);
}

#[test]
fn mismatched_buffers_are_a_clear_error_and_change_nothing() {
    let m = Map::<u64, u64>::new();
    let mut out = [Response::NotExecuted; 1];
    let err = m.batch(&[Request::Insert(1, 1), Request::Insert(2, 2)], &mut out, StopOn::Never);
    assert_eq!(err, Err(Error::LengthMismatch { requests: 2, responses: 1 }));
    assert!(m.is_empty());
    assert!(m.get_many(&[1, 2], &mut [None]).is_err());
}

#[test]
fn large_batches_with_resizes_inside() {
    // Batches far longer than the prefetch window, growing the index as they go.
    with_maps(|name, build| {
        let map = build(1);
        let reqs: Vec<Req> = (0..50_000u64).map(|k| Request::Insert(k, k * 3)).collect();
        let mut out = vec![Response::NotExecuted; reqs.len()];
        assert_eq!(map.batch(&reqs, &mut out, StopOn::Failure), Ok(reqs.len()), "{name}");
        let keys: Vec<u64> = (0..50_001).collect();
        let mut got = vec![None; keys.len()];
        map.get_many(&keys, &mut got).unwrap();
        assert!(got[..50_000].iter().enumerate().all(|(k, g)| *g == Some(k as u64 * 3)), "{name}");
        assert_eq!(got[50_000], None, "{name}");
    });
}

#[test]
fn batched_clients_are_linearizable_under_resizes() {
    // Each request of a batch is given the batch's interval: weaker than the
    // in-order guarantee (checked by the model tests above) but sound.
    with_shared_maps(|name, build| {
        for round in 0..2u64 {
            let map = build(1);
            let map = &*map;
            let clock = Clock::default();
            let events = Mutex::new(Vec::new());
            std::thread::scope(|s| {
                for t in 0..3u64 {
                    let (map, clock, events) = (&map, &clock, &events);
                    s.spawn(move || {
                        let mut rng = Rng(0x5EED ^ ((t + 1) * 0x9E37_79B9) ^ round);
                        let mut mine = Vec::new();
                        for _ in 0..600 {
                            let len = 1 + rng.below(8) as usize;
                            let mut reqs: Vec<Req> = (0..len)
                                .map(|_| {
                                    let (k, v) = (rng.below(6), 1 + rng.below(2));
                                    match rng.below(5) {
                                        0 => Request::Get(k),
                                        1 => Request::Insert(k, v),
                                        2 => Request::Put(k, v),
                                        3 => Request::Remove(k),
                                        _ => Request::Upsert(k, v),
                                    }
                                })
                                .collect();
                            let mut out = vec![Response::NotExecuted; len];
                            let invoked = clock.tick();
                            if rng.below(3) == 0 {
                                // Gets only, through get_many's own pipeline.
                                let keys: Vec<u64> = reqs.iter().map(|r| r.key()).collect();
                                let mut got = vec![None; len];
                                map.get_many(&keys, &mut got).unwrap();
                                reqs = keys.into_iter().map(Request::Get).collect();
                                out = got.into_iter().map(Response::Get).collect();
                            } else {
                                map.batch(&reqs, &mut out, StopOn::Never).unwrap();
                            }
                            let returned = clock.tick();
                            for (r, o) in reqs.iter().zip(&out) {
                                let call = match (*r, *o) {
                                    (Request::Get(_), Response::Get(x)) => Call::Get(x),
                                    (Request::Insert(_, v), Response::Insert(x)) => Call::Insert(v, x),
                                    (Request::Put(_, v), Response::Put(x)) => Call::Put(v, x),
                                    (Request::Remove(_), Response::Remove(x)) => Call::Remove(x),
                                    (Request::Upsert(_, v), Response::Upsert(x)) => Call::Upsert(v, x),
                                    other => panic!("response does not match request: {other:?}"),
                                };
                                mine.push(Event { key: r.key(), call, invoked, returned });
                            }
                        }
                        events.lock().unwrap().extend(mine);
                    });
                }
                s.spawn(move || {
                    for k in 0..30_000u64 {
                        map.insert(1_000_000 + k, k).unwrap();
                    }
                });
            });
            assert!(map.stats().resizes >= 3, "{name}");
            let events = events.into_inner().unwrap();
            if let Verdict::Violation { key, history } = check(&events, &HashMap::new()) {
                panic!("{name}: key {key} not linearizable: {history:?}");
            }
        }
    });
}
