#![cfg(not(loom))]
mod common;
use common::Rng;
use dlht::{Access, ByteMap, Guard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

fn secs() -> u64 {
    std::env::var("REVIEW_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(15)
}

// Key bytes of id: even ids inline (1..8 bytes), odd ids long (stored entries).
fn key(id: u64) -> Vec<u8> {
    if id % 4 == 0 {
        let n = 1 + (id / 4 % 8) as usize;
        let mut b = (id | 1 << 63).to_le_bytes().to_vec();
        b.truncate(n.max(1));
        // make it unique: use id's low bytes; n bytes must encode id
        let n = n.max(((64 - id.leading_zeros() as usize) + 7) / 8);
        id.to_le_bytes()[..n.max(1)].to_vec()
    } else if id % 4 == 2 {
        id.to_le_bytes().to_vec() // 8 bytes inline
    } else {
        format!("a longer stored key number {id}").into_bytes()
    }
}

fn val(id: u64, ver: u64) -> Vec<u8> {
    let mut v = id.to_le_bytes().to_vec();
    v.extend_from_slice(&ver.to_le_bytes());
    v
}

fn dec(v: &[u8]) -> (u64, u64) {
    assert_eq!(v.len(), 16, "value length {}", v.len());
    (u64::from_le_bytes(v[..8].try_into().unwrap()), u64::from_le_bytes(v[8..].try_into().unwrap()))
}

fn id_of_key(k: &[u8]) -> u64 {
    if k.len() > 8 {
        std::str::from_utf8(k).unwrap().rsplit(' ').next().unwrap().parse().unwrap()
    } else {
        let mut b = [0u8; 8];
        b[..k.len()].copy_from_slice(k);
        u64::from_le_bytes(b)
    }
}

const FIXED: u64 = 48; // ids 0..FIXED*? fixed keys: id = 4096 + i
const FIX_BASE: u64 = 1 << 20;

fn run_churn(cap: usize, space: u64, resize: bool, secs: u64) {
    let m = ByteMap::with_capacity(cap);
    for i in 0..FIXED {
        let id = FIX_BASE + i;
        m.insert(&key(id), &val(id, 7), &m.guard()).unwrap().unwrap();
    }
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(secs);
    std::thread::scope(|s| {
        // Two owners churning their own keys.
        for t in 0..2u64 {
            let (m, stop, ops) = (&m, &stop, &ops);
            s.spawn(move || {
                let mut rng = Rng(0x9E37 + t * 77);
                let mut model: HashMap<u64, u64> = HashMap::new();
                let mut n = 0u64;
                while !stop.load(Relaxed) {
                let owned = m.owned_guard();
                let mut held: Vec<(u64, u64, dlht::ValueRef<'_>)> = Vec::new();
                while !stop.load(Relaxed) {
                    n += 1;
                    let id = 2 * rng.below(space) + t; // disjoint by parity
                    let id = id * 1; 
                    let k = key(id);
                    let pinned;
                    let g: &Guard = if rng.below(4) == 0 {
                        &owned
                    } else {
                        pinned = m.guard();
                        &pinned
                    };
                    match rng.below(8) {
                        0 | 1 | 2 => {
                            let ver = n;
                            match m.insert(&k, &val(id, ver), g).unwrap() {
                                Ok(()) => {
                                    assert!(model.insert(id, ver).is_none(), "insert of present key {id} succeeded");
                                }
                                Err(cur) => {
                                    let (i, v) = dec(&cur);
                                    assert_eq!((i, Some(v)), (id, model.get(&id).copied()), "insert of {id} found wrong");
                                }
                            }
                        }
                        3 | 4 | 5 => {
                            let r = m.remove(&k, g).map(|v| dec(&v));
                            let e = model.remove(&id).map(|v| (id, v));
                            assert_eq!(r, e, "remove of {id}");
                        }
                        6 => {
                            let ver = n;
                            let r = m.put(&k, &val(id, ver), g).unwrap().map(|v| dec(&v));
                            let e = model.get(&id).map(|v| (id, *v));
                            assert_eq!(r, e, "put of {id}");
                            if e.is_some() {
                                model.insert(id, ver);
                            }
                        }
                        _ => {
                            let r = m.get(&k, g).map(|v| dec(&v));
                            let e = model.get(&id).map(|v| (id, *v));
                            assert_eq!(r, e, "get of {id}");
                        }
                    }
                    // Values held under the owned guard stay intact.
                    if n % 64 == 0 {
                        if let Some(v) = m.get(&k, &owned) {
                            let (i, ver) = dec(&v);
                            held.push((i, ver, v));
                        }
                    }
                    if n % 4096 == 0 {
                        break;
                    }
                }
                for (i, ver, v) in held.drain(..) {
                    assert_eq!(dec(&v), (i, ver), "held value changed");
                }
                }
                // Final check
                let g = m.guard();
                for (id, ver) in &model {
                    assert_eq!(m.get(&key(*id), &g).map(|v| dec(&v)), Some((*id, *ver)), "final {id}");
                }
                ops.fetch_add(n, Relaxed);
                model
            });
        }
        // A reader of the fixed keys and of others' keys, gets and get_many.
        {
            let (m, stop, ops) = (&m, &stop, &ops);
            s.spawn(move || {
                let mut rng = Rng(0x5151);
                let mut n = 0;
                let keys: Vec<Vec<u8>> = (0..FIXED).map(|i| key(FIX_BASE + i)).collect();
                while !stop.load(Relaxed) {
                    n += 1;
                    let g = m.guard();
                    let i = rng.below(FIXED);
                    assert_eq!(m.get(&keys[i as usize], &g).map(|v| dec(&v)), Some((FIX_BASE + i, 7)), "fixed {i}");
                    let id = rng.below(2 * space);
                    if let Some(v) = m.get(&key(id), &g) {
                        assert_eq!(dec(&v).0, id, "get of {id} returned another key's value");
                    }
                    if n % 16 == 0 {
                        let mut ks: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
                        let others: Vec<Vec<u8>> = (0..16).map(|_| key(rng.below(2 * space))).collect();
                        ks.extend(others.iter().map(|k| k.as_slice()));
                        let mut out = vec![None; ks.len()];
                        m.get_many(&ks, &mut out, Access::Read, &g).unwrap();
                        for (j, o) in out.iter().enumerate() {
                            if j < FIXED as usize {
                                assert_eq!(o.map(|v| dec(&v)), Some((FIX_BASE + j as u64, 7)), "get_many fixed {j}");
                            } else if let Some(v) = o {
                                assert_eq!(dec(v).0, id_of_key(ks[j]) , "get_many other");
                            }
                        }
                    }
                    if m.contains_key(&keys[0]) == false {
                        panic!("contains_key fixed 0 false");
                    }
                }
                ops.fetch_add(n, Relaxed);
            });
        }
        // Iterators and snapshots.
        {
            let (m, stop, ops) = (&m, &stop, &ops);
            s.spawn(move || {
                let mut n = 0;
                let mut rng = Rng(0x777);
                while !stop.load(Relaxed) {
                    n += 1;
                    let g = m.guard();
                    let mut seen = vec![0u32; FIXED as usize];
                    let snap = n % 3 == 0;
                    let it: Box<dyn Iterator<Item = _>> = if snap {
                        Box::new(m.snapshot(&g))
                    } else if n % 3 == 1 {
                        Box::new(m.iter(&g))
                    } else {
                        let bins = m.stats().bins;
                        let start = rng.below(bins as u64) as usize;
                        Box::new(m.iter_bins(start, bins, &g))
                    };
                    for (ns, k, v) in it {
                        assert_eq!(ns, 0);
                        let id = id_of_key(&k);
                        let (vi, _) = dec(&v);
                        assert_eq!(vi, id, "iter yielded key {id} with value of {vi}");
                        if id >= FIX_BASE && id < FIX_BASE + FIXED {
                            seen[(id - FIX_BASE) as usize] += 1;
                        }
                    }
                    for (i, c) in seen.iter().enumerate() {
                        if snap {
                            assert_eq!(*c, 1, "snapshot saw fixed {i} {c} times");
                        } else {
                            assert!(*c >= 1, "iter missed fixed {i} (n={n})");
                        }
                    }
                }
                ops.fetch_add(n, Relaxed);
            });
        }
        // Resizer / stats.
        {
            let (m, stop) = (&m, &stop);
            s.spawn(move || {
                let mut rng = Rng(0x31337);
                let mut resizes = 0;
                while Instant::now() < deadline {
                    if resize {
                        match rng.below(3) {
                            0 => m.reserve(rng.below(600) as usize),
                            1 => m.shrink_to_fit(),
                            _ => m.shrink_to(rng.below(200) as usize),
                        }
                        resizes += 1;
                    }
                    let st = m.stats();
                    assert!(st.memory.link_bytes < 1 << 30, "link_bytes {st:?}");
                    assert!(st.link_buckets_in_use <= st.link_buckets + 1_000_000, "{st:?}");
                    assert!(st.occupied_slots <= st.slots, "{st:?}");
                    std::thread::sleep(Duration::from_millis(if resize { 2 } else { 20 }));
                }
                stop.store(true, Relaxed);
                eprintln!("resize calls {resizes}");
            });
        }
    });
    let st = m.stats();
    eprintln!("ops {} stats {:?}", ops.load(Relaxed), st);
    let g = m.guard();
    for i in 0..FIXED {
        assert_eq!(m.get(&key(FIX_BASE + i), &g).map(|v| dec(&v)), Some((FIX_BASE + i, 7)));
    }
    let n = m.iter(&g).count();
    assert_eq!(n, m.len());
}

#[test]
fn churn_small_no_resize() {
    run_churn(64, 64, false, secs());
}

#[test]
fn churn_small_with_resizes() {
    run_churn(64, 96, true, secs());
}

#[test]
fn churn_1024_with_resizes() {
    run_churn(1024, 700, true, secs());
}
