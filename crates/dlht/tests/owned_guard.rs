//! Owned guards (allocator mode): `Send + Sync`, and a value read under one
//! is not freed while it lives, even after the value is removed, the guard
//! moves to another thread, and every thread keeps unpinning and flushing;
//! once it is dropped, the value is freed.
#![cfg(not(loom))]

use dlht::{AllocMap, ByteMap, OwnedGuard};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The registry of owned guards is process-wide: an owned guard of one
/// test holds back what another retires. The tests here run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Flags set by the values' drops.
static DROPPED: [AtomicBool; 4] = [const { AtomicBool::new(false) }; 4];

#[derive(Debug)]
struct Tracked(usize);

impl Drop for Tracked {
    fn drop(&mut self) {
        DROPPED[self.0].store(true, Ordering::SeqCst);
    }
}

fn churn(m: &AllocMap<u64, Tracked>) {
    // Other removes and many pins and flushes: the epoch collector would
    // free anything retired before them that no pinned thread can reach.
    for i in 0..2000u64 {
        let g = m.guard();
        m.insert(1000 + i, Tracked(3), &g).ok();
        m.remove(&(1000 + i), &g);
        g.flush();
    }
}

#[test]
fn owned_guards_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<OwnedGuard>();
}

#[test]
fn a_value_read_under_an_owned_guard_outlives_its_remove() {
    let _serial = serial();
    let m = AllocMap::<u64, Tracked>::new();
    m.insert(1, Tracked(0), &m.guard()).unwrap();
    let g = m.owned_guard();
    let v = m.get(&1, &g).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(m.remove(&1, &m.guard()).is_some());
            churn(&m);
        });
    });
    churn(&m);
    assert!(!DROPPED[0].load(Ordering::SeqCst), "freed under an owned guard");
    assert_eq!(v.0, 0);
    // The guard moves to another thread, is used there, and dropped there.
    let mr = &m;
    std::thread::scope(|s| {
        s.spawn(move || {
            let g = g;
            churn(mr);
            assert!(!DROPPED[0].load(Ordering::SeqCst), "freed under an owned guard");
            assert!(mr.get(&1, &g).is_none());
        });
    });
    // Now nothing protects it: the collector frees it.
    for _ in 0..1000 {
        if DROPPED[0].load(Ordering::SeqCst) {
            return;
        }
        churn(&m);
    }
    panic!("the value was never freed after the owned guard went");
}

#[test]
fn owned_guards_work_with_byte_maps_and_across_threads() {
    let _serial = serial();
    let m = ByteMap::new();
    let g = m.owned_guard();
    m.insert(b"a key longer than eight bytes", b"value", &g).unwrap().unwrap();
    let v = m.get(b"a key longer than eight bytes", &g).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let h = m.guard();
            m.remove(b"a key longer than eight bytes", &h);
            for i in 0..2000u64 {
                m.insert(&i.to_le_bytes(), b"x", &h).unwrap().unwrap();
                m.remove(&i.to_le_bytes(), &h);
                h.flush();
            }
        });
        // Shared by reference (Sync) with a thread that reads through it,
        // before or after the remove.
        s.spawn(|| {
            if let Some(v) = m.get(b"a key longer than eight bytes", &g) {
                assert_eq!(&*v, b"value");
            }
        });
    });
    assert_eq!(&*v, b"value");
}
