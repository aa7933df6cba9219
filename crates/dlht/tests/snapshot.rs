//! `Map::snapshot` is the contents at one instant: equal to the contents
//! when the map is quiet; under concurrent writers (and the resizes they
//! force), it never shows what no single instant held — a gap in a stream
//! of inserts done in order, a gap in a stream of removes done in order, or
//! counters that were never all current together.
#![cfg(not(loom))]

use dlht::Map;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn stress_scale() -> f64 {
    std::env::var("DLHT_STRESS_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0)
}

#[test]
fn a_quiet_snapshot_is_the_contents() {
    let m = Map::<u64, u64>::with_capacity(4);
    let mut model = HashMap::new();
    for k in 0..10_000u64 {
        m.insert(k * 7, k).unwrap();
        model.insert(k * 7, k);
        if k % 4 == 0 {
            m.remove(&(k * 7));
            model.remove(&(k * 7));
        }
    }
    let shadow = m.shadow_insert(1, 1).unwrap(); // hidden: not in a snapshot
    let snap: HashMap<u64, u64> = m.snapshot().into_iter().collect();
    assert_eq!(snap, model);
    shadow.abort();
    // The map works on after a snapshot: every bin was thawed.
    for (k, v) in &model {
        assert_eq!(m.put(*k, v + 1), Some(*v));
    }
    assert_eq!(m.insert(3, 3), Ok(()));
}

const INSERTED: u64 = 1 << 40; // keys INSERTED + i, inserted in order of i
const REMOVED: u64 = 2 << 40; // keys REMOVED + i, present at first, removed in order
const COUNTERS: u64 = 4; // keys 0..4: update j writes j into counter j % 4
const CHUNK: u64 = 2048; // writer steps per snapshot, at least

#[test]
fn a_snapshot_is_one_instant_under_writers_and_resizes() {
    let n = (40_000.0 * stress_scale()) as u64;
    for round in 0..2 {
        // A small start: the inserting writer forces resizes meanwhile.
        let m =
            Map::<u64, u64>::with_capacity(16).with_transfer_chunk(if round == 0 { 16 * 1024 } else { 4 });
        for i in 0..n {
            m.insert(REMOVED + i, i).unwrap();
        }
        for c in 0..COUNTERS {
            m.insert(c, c).unwrap();
        }
        let done = AtomicBool::new(false);
        let (taken, failed) = (AtomicU64::new(0), AtomicBool::new(false));
        let mut checked = 0;
        std::thread::scope(|s| {
            let (m, done, taken, failed) = (&m, &done, &taken, &failed);
            // If a check fails, the writer must not wait for more snapshots.
            let _release = SetOnDrop(failed);
            s.spawn(move || {
                for i in 0..n {
                    // A snapshot per chunk of steps, whatever the machine's
                    // load: wait until the checker has taken one per chunk
                    // so far (it takes the next while this chunk runs).
                    while taken.load(Ordering::SeqCst) < i / CHUNK && !failed.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                    m.insert(INSERTED + i, i).unwrap();
                    m.remove(&(REMOVED + i));
                    let j = COUNTERS + i;
                    m.put(j % COUNTERS, j);
                }
                done.store(true, Ordering::SeqCst);
            });
            while !done.load(Ordering::SeqCst) {
                let snap = m.snapshot();
                let ins: BTreeSet<u64> =
                    snap.iter().filter(|e| e.0 >> 40 == 1).map(|e| e.0 - INSERTED).collect();
                let rem: BTreeSet<u64> =
                    snap.iter().filter(|e| e.0 >> 40 == 2).map(|e| e.0 - REMOVED).collect();
                let mut counters: Vec<u64> = snap.iter().filter(|e| e.0 < COUNTERS).map(|e| e.1).collect();
                counters.sort();
                // Inserts in order: a prefix; removes in order: a suffix.
                assert!(ins.iter().copied().eq(0..ins.len() as u64), "inserted keys with a gap");
                assert!(rem.iter().copied().eq(n - rem.len() as u64..n), "removed keys with a gap");
                // Counters: the last four updates, all current at once.
                assert_eq!(counters.len(), COUNTERS as usize);
                assert!(
                    counters.windows(2).all(|w| w[1] == w[0] + 1),
                    "counters from different instants: {counters:?}"
                );
                // The step (insert i, remove i, update) in progress: the
                // three streams are at most one step apart.
                let (a, b) = (ins.len() as i64, (n - rem.len() as u64) as i64);
                assert!((a - b).abs() <= 1, "{a} inserted vs {b} removed");
                checked += 1;
                taken.store(checked, Ordering::SeqCst);
            }
        });
        assert!(checked >= n / CHUNK, "{checked} snapshots for {n} steps");
        assert!(m.stats().resizes > 0);
        assert_eq!(m.snapshot().len(), n as usize + COUNTERS as usize);
    }
}

/// Sets the flag when dropped, also when the checking thread panics.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}
