//! Batches of mixed requests on `AllocMap` and `ByteMap`: a
//! batch does what the same requests do one by one (against std's HashMap,
//! with passes longer than the prefetch window and stops on failure), and
//! concurrent batches of read-modify-writes lose no update.
#![cfg(not(loom))]

use dlht::{
    Access, AllocMap, AllocRequest, AllocResponse, ByteMap, ByteRequest, ByteResponse, Computed, Op, StopOn,
};
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug)]
enum Req {
    Get(u8),
    Insert(u8, u8),
    Upsert(u8, u8),
    Put(u8, u8),
    Remove(u8),
    GetOrInsert(u8, u8),
    Double(u8),
    RemoveIfOdd(u8),
    Toggle(u8),
}

fn req_strategy() -> impl Strategy<Value = Req> {
    let k = 0u8..24;
    let v = 1u8..200;
    prop_oneof![
        (k.clone()).prop_map(Req::Get),
        (k.clone(), v.clone()).prop_map(|(k, v)| Req::Insert(k, v)),
        (k.clone(), v.clone()).prop_map(|(k, v)| Req::Upsert(k, v)),
        (k.clone(), v.clone()).prop_map(|(k, v)| Req::Put(k, v)),
        (k.clone()).prop_map(Req::Remove),
        (k.clone(), v).prop_map(|(k, v)| Req::GetOrInsert(k, v)),
        (k.clone()).prop_map(Req::Double),
        (k.clone()).prop_map(Req::RemoveIfOdd),
        k.prop_map(Req::Toggle),
    ]
}

/// What each request returns, mode-independent: the value seen (or
/// stored), and whether it succeeded.
type Outcome = (Option<u64>, bool);

fn toggle(v: Option<&u64>) -> Op<u64> {
    match v {
        None => Op::Upsert(7),
        Some(_) => Op::Remove,
    }
}

/// The sequential meaning, on a HashMap.
fn model(m: &mut HashMap<u64, u64>, r: Req) -> Outcome {
    match r {
        Req::Get(k) => (m.get(&(k as u64)).copied(), m.contains_key(&(k as u64))),
        Req::Insert(k, v) => match m.get(&(k as u64)) {
            Some(&c) => (Some(c), false),
            None => {
                m.insert(k as u64, v as u64);
                (None, true)
            }
        },
        Req::Upsert(k, v) => (m.insert(k as u64, v as u64), true),
        Req::Put(k, v) => match m.get_mut(&(k as u64)) {
            Some(c) => (Some(std::mem::replace(c, v as u64)), true),
            None => (None, false),
        },
        Req::Remove(k) => {
            let r = m.remove(&(k as u64));
            (r, r.is_some())
        }
        Req::GetOrInsert(k, v) => (Some(*m.entry(k as u64).or_insert(v as u64)), true),
        Req::Double(k) => match m.get_mut(&(k as u64)) {
            Some(c) => {
                *c *= 2;
                (Some(*c), true)
            }
            None => (None, false),
        },
        Req::RemoveIfOdd(k) => match m.get(&(k as u64)) {
            Some(&c) if c % 2 == 1 => (m.remove(&(k as u64)), true),
            _ => (None, false),
        },
        Req::Toggle(k) => match m.remove(&(k as u64)) {
            None => {
                m.insert(k as u64, 7);
                (Some(7), true)
            }
            Some(old) => (Some(old), true),
        },
    }
}

fn alloc_outcome(r: &AllocResponse<'_, '_, u64, u64>) -> Outcome {
    let seen = match r {
        AllocResponse::NotExecuted(_) => None,
        AllocResponse::Get(v) | AllocResponse::Upsert(v) | AllocResponse::Remove(v) => v.copied(),
        AllocResponse::Update(v) | AllocResponse::RemoveIf(v) => v.copied(),
        AllocResponse::Insert(r) => r.as_ref().err().map(|o| *o.current),
        AllocResponse::Put(r) => r.as_ref().ok().map(|v| **v),
        AllocResponse::GetOrInsert(v) => Some(**v),
        AllocResponse::Compute(c) => match c {
            Computed::Inserted(v) | Computed::Removed(v) => Some(**v),
            Computed::Replaced { new, .. } => Some(**new),
            Computed::Unchanged(v) => v.copied(),
        },
    };
    (seen, r.succeeded())
}

fn byte_outcome(r: &ByteResponse<'_>) -> Outcome {
    let n = |v: &dlht::ValueRef<'_>| u64::from_le_bytes(v.as_bytes().try_into().unwrap());
    let seen = match r {
        ByteResponse::NotExecuted => None,
        ByteResponse::Get(v) | ByteResponse::Upsert(v) | ByteResponse::Put(v) | ByteResponse::Remove(v) => {
            v.as_ref().map(n)
        }
        ByteResponse::Update(v) | ByteResponse::RemoveIf(v) => v.as_ref().map(n),
        ByteResponse::Insert(r) => r.err().as_ref().map(n),
        ByteResponse::GetOrInsert(v) => Some(n(v)),
        ByteResponse::Compute(c) => match c {
            Computed::Inserted(v) | Computed::Removed(v) => Some(n(v)),
            Computed::Replaced { new, .. } => Some(n(new)),
            Computed::Unchanged(v) => v.as_ref().map(n),
        },
    };
    (seen, r.succeeded())
}

/// Byte keys: short ones (inline) for even k, stored ones for odd.
fn byte_key(k: u8) -> Vec<u8> {
    if k % 2 == 0 {
        vec![k; 3]
    } else {
        format!("a stored key number {k}").into_bytes()
    }
}

proptest! {
    #[test]
    fn batches_do_what_the_requests_do_one_by_one(
        reqs in proptest::collection::vec(req_strategy(), 1..400),
        stop_on_failure in any::<bool>(),
    ) {
        let stop = if stop_on_failure { StopOn::Failure } else { StopOn::Never };
        let mut want = Vec::new();
        let mut model_map = HashMap::new();
        for &r in &reqs {
            let o = model(&mut model_map, r);
            want.push(o);
            if stop == StopOn::Failure && !o.1 {
                break;
            }
        }
        // The model stopped where a batch must.
        let ran = want.len();

        // AllocMap.
        let m = AllocMap::<u64, u64>::new();
        let g = m.guard();
        let keys: Vec<u64> = (0..24).collect();
        let batch: Vec<AllocRequest<'_, u64, u64>> = reqs.iter().map(|&r| match r {
            Req::Get(k) => AllocRequest::Get(&keys[k as usize]),
            Req::Insert(k, v) => AllocRequest::Insert(k as u64, v as u64),
            Req::Upsert(k, v) => AllocRequest::Upsert(k as u64, v as u64),
            Req::Put(k, v) => AllocRequest::Put(&keys[k as usize], v as u64),
            Req::Remove(k) => AllocRequest::Remove(&keys[k as usize]),
            Req::GetOrInsert(k, v) => AllocRequest::GetOrInsert(k as u64, v as u64),
            Req::Double(k) => AllocRequest::Update(&keys[k as usize], |v| v * 2),
            Req::RemoveIfOdd(k) => AllocRequest::RemoveIf(&keys[k as usize], |v| v % 2 == 1),
            Req::Toggle(k) => AllocRequest::Compute(k as u64, toggle),
        }).collect();
        let mut out = Vec::new();
        prop_assert_eq!(m.batch(batch, &mut out, stop, Access::Read, &g), Ok(ran));
        prop_assert_eq!(out.len(), reqs.len());
        let got: Vec<Outcome> = out[..ran].iter().map(alloc_outcome).collect();
        prop_assert_eq!(&got, &want);
        prop_assert!(out[ran..].iter().all(|r| matches!(r, AllocResponse::NotExecuted(_))));
        let mut all: Vec<(u64, u64)> = m.iter(&g).map(|(_, k, v)| (*k, *v)).collect();
        all.sort_unstable();
        let mut expect: Vec<(u64, u64)> = model_map.iter().map(|(k, v)| (*k, *v)).collect();
        expect.sort_unstable();
        prop_assert_eq!(&all, &expect);

        // ByteMap.
        let b = ByteMap::new();
        let bkeys: Vec<Vec<u8>> = (0..24).map(byte_key).collect();
        let vals: Vec<[u8; 8]> = (0..256u64).map(|v| v.to_le_bytes()).collect();
        let batch: Vec<ByteRequest<'_>> = reqs.iter().map(|&r| match r {
            Req::Get(k) => ByteRequest::Get(&bkeys[k as usize]),
            Req::Insert(k, v) => ByteRequest::Insert(&bkeys[k as usize], &vals[v as usize]),
            Req::Upsert(k, v) => ByteRequest::Upsert(&bkeys[k as usize], &vals[v as usize]),
            Req::Put(k, v) => ByteRequest::Put(&bkeys[k as usize], &vals[v as usize]),
            Req::Remove(k) => ByteRequest::Remove(&bkeys[k as usize]),
            Req::GetOrInsert(k, v) => ByteRequest::GetOrInsert(&bkeys[k as usize], &vals[v as usize]),
            Req::Double(k) => ByteRequest::Update(&bkeys[k as usize], |v| (u64::from_le_bytes(v.try_into().unwrap()) * 2).to_le_bytes().to_vec()),
            Req::RemoveIfOdd(k) => ByteRequest::RemoveIf(&bkeys[k as usize], |v| u64::from_le_bytes(v.try_into().unwrap()) % 2 == 1),
            Req::Toggle(k) => ByteRequest::Compute(&bkeys[k as usize], |v| match v {
                None => Op::Upsert(7u64.to_le_bytes().to_vec()),
                Some(_) => Op::Remove,
            }),
        }).collect();
        let mut out = vec![ByteResponse::NotExecuted; batch.len()];
        prop_assert_eq!(b.batch(&batch, &mut out, stop, Access::Key, &g), Ok(ran));
        let got: Vec<Outcome> = out[..ran].iter().map(byte_outcome).collect();
        prop_assert_eq!(&got, &want);
        prop_assert!(out[ran..].iter().all(|r| matches!(r, ByteResponse::NotExecuted)));
        prop_assert_eq!(b.len(), model_map.len());
        for (k, v) in &model_map {
            let got = b.get(&byte_key(*k as u8), &g).map(|v| v.to_vec());
            prop_assert_eq!(got, Some(v.to_le_bytes().to_vec()));
        }
    }
}

/// Two threads run batches of increments (through update, and through
/// compute) over the same keys while a third grows the maps: every
/// increment counts.
#[test]
fn concurrent_batches_count_exactly() {
    let rounds =
        (200.0 * std::env::var("DLHT_STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)) as u64;
    let m = AllocMap::<u64, u64>::new();
    let b = ByteMap::new();
    let keys: Vec<u64> = (0..16).collect();
    let bkeys: Vec<Vec<u8>> = (0..16u8).map(byte_key).collect();
    {
        let g = m.guard();
        for &k in &keys {
            m.insert(k, 0, &g).unwrap();
            b.insert(&bkeys[k as usize], &0u64.to_le_bytes(), &g).unwrap().unwrap();
        }
    }
    std::thread::scope(|s| {
        for t in 0..2 {
            let (m, b, keys, bkeys) = (&m, &b, &keys, &bkeys);
            s.spawn(move || {
                let g = m.guard();
                let mut out = Vec::new();
                let mut bout = vec![ByteResponse::NotExecuted; 100];
                for _ in 0..rounds {
                    let reqs = (0..100).map(|i| {
                        let k = &keys[i % 16];
                        if (i + t) % 2 == 0 {
                            AllocRequest::Update(k, |v| v + 1)
                        } else {
                            AllocRequest::Compute(*k, |v| Op::Upsert(v.map_or(1, |v| v + 1)))
                        }
                    });
                    out.clear();
                    assert_eq!(m.batch(reqs, &mut out, StopOn::Never, Access::Key, &g), Ok(100));
                    let breqs: Vec<ByteRequest<'_>> = (0..100)
                        .map(|i| {
                            ByteRequest::Update(&bkeys[i % 16], |v| {
                                (u64::from_le_bytes(v.try_into().unwrap()) + 1).to_le_bytes().to_vec()
                            })
                        })
                        .collect();
                    assert_eq!(b.batch(&breqs, &mut bout, StopOn::Failure, Access::Key, &g), Ok(100));
                }
            });
        }
        s.spawn(|| {
            let g = m.guard();
            for k in 0..rounds * 200 {
                m.insert(1 << 40 | k, k, &g).unwrap();
                b.insert(&(1u64 << 40 | k).to_le_bytes(), b"", &g).unwrap().unwrap();
            }
        });
    });
    let g = m.guard();
    let total: u64 = keys.iter().map(|k| *m.get(k, &g).unwrap()).sum();
    assert_eq!(total, 2 * 100 * rounds);
    let btotal: u64 =
        bkeys.iter().map(|k| u64::from_le_bytes(b.get(k, &g).unwrap().as_bytes().try_into().unwrap())).sum();
    assert_eq!(btotal, 2 * 100 * rounds);
    assert!(m.stats().resizes > 0 && b.stats().resizes > 0);
}
