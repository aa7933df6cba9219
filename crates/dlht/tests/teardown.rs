//! A map used from a thread-local destructor, while the thread exits (its
//! own binary: the first test relies on which threads start when).
//!
//! Thread A enters the map from a TLS destructor that runs after A's other
//! thread-locals were torn down, and holds an iterator there; thread B then
//! starts and holds an iterator of its own; A leaves; the map grows. B's
//! iterator must keep the index it reads allocated. When records were
//! found through the `thread_local` crate with a cache in front, A's
//! destructor still found A's record through the cache after the crate had
//! given A's thread id to B: B shared A's record, saw A's announcement,
//! took itself for nested and announced nothing, and when A left, the
//! index was freed under B.
#![cfg(not(loom))]

use dlht::Map;
use std::cell::RefCell;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

struct EntersOnExit {
    map: Arc<Map<u64, u64>>,
    inside: Sender<()>,
    leave: Receiver<()>,
}

impl Drop for EntersOnExit {
    fn drop(&mut self) {
        let it = self.map.iter();
        self.inside.send(()).unwrap();
        self.leave.recv().unwrap();
        drop(it);
    }
}

std::thread_local! {
    static ON_EXIT: RefCell<Option<EntersOnExit>> = const { RefCell::new(None) };
}

#[test]
fn a_map_entered_from_a_tls_destructor_keeps_its_index_for_other_threads() {
    let m = Arc::new(Map::<u64, u64>::with_capacity(0));
    for k in 0..100 {
        m.insert(k, k).unwrap();
    }
    let (inside_tx, inside_rx) = channel();
    let (leave_tx, leave_rx) = channel();
    let a = {
        let m = m.clone();
        std::thread::spawn(move || {
            // The destructor is registered before the thread first enters
            // the map, so it runs after whatever the map registered then
            // (destructors run in reverse order of registration).
            ON_EXIT.with(|e| {
                *e.borrow_mut() = Some(EntersOnExit { map: m.clone(), inside: inside_tx, leave: leave_rx })
            });
            assert_eq!(m.get(&1), Some(1));
        })
    };
    inside_rx.recv().unwrap(); // A is inside, from its destructor

    let (b_in_tx, b_in_rx) = channel();
    let (b_go_tx, b_go_rx) = channel::<()>();
    let b = {
        let m = m.clone();
        std::thread::spawn(move || {
            let mut it = m.iter();
            b_in_tx.send(()).unwrap();
            b_go_rx.recv().unwrap();
            // Reads the index it started in, after the map grew.
            let mut n = 0;
            for (k, v) in it.by_ref() {
                assert_eq!(k, v);
                n += 1;
            }
            assert!(n >= 100);
        })
    };
    b_in_rx.recv().unwrap();
    leave_tx.send(()).unwrap();
    a.join().unwrap();

    // Grow the map: the index B's iterator reads is replaced and must wait
    // for B.
    let before = m.stats().resizes;
    for k in 100..20_000 {
        m.insert(k, k).unwrap();
    }
    let s = m.stats();
    assert!(s.resizes > before, "{s:?}");
    assert!(s.indexes_awaiting_free >= 1, "an index B is reading was freed: {s:?}");
    b_go_tx.send(()).unwrap();
    b.join().unwrap();
    assert_eq!(m.get(&7), Some(7)); // leaves, freeing what B held
    assert_eq!(m.stats().indexes_awaiting_free, 0);
}

/// An iterator kept in a thread-local, and dropped by the thread's exit
/// after the thread's claims on records were released.
struct HeldUntilExit {
    it: Option<dlht::Iter<'static, u64, u64>>,
    inside: Sender<()>,
    leave: Receiver<()>,
}

impl Drop for HeldUntilExit {
    fn drop(&mut self) {
        self.inside.send(()).unwrap();
        self.leave.recv().unwrap();
        drop(self.it.take());
    }
}

std::thread_local! {
    static HELD: RefCell<Option<HeldUntilExit>> = const { RefCell::new(None) };
}

#[test]
fn a_record_still_announced_at_thread_exit_is_not_handed_to_another_thread() {
    // A thread's claims are released by a destructor; a guard kept in a
    // thread-local destroyed after it is still inside. Its record must not
    // go to a thread that starts meanwhile (which would take itself for
    // nested, announce nothing, and have its index freed when the first
    // thread's guard left).
    // In a static, not leaked: memcheck counts a leaked box as lost.
    static MAP: std::sync::OnceLock<Map<u64, u64>> = std::sync::OnceLock::new();
    let m: &'static Map<u64, u64> = MAP.get_or_init(|| Map::with_capacity(0));
    for k in 0..100 {
        m.insert(k, k).unwrap();
    }
    let (inside_tx, inside_rx) = channel();
    let (leave_tx, leave_rx) = channel();
    let a = std::thread::spawn(move || {
        // Registered before the thread's claims, so destroyed after them.
        HELD.with(|h| *h.borrow_mut() = Some(HeldUntilExit { it: None, inside: inside_tx, leave: leave_rx }));
        let it = m.iter();
        HELD.with(|h| h.borrow_mut().as_mut().unwrap().it = Some(it));
    });
    inside_rx.recv().unwrap(); // A's claims are gone; its iterator is not

    let (b_in_tx, b_in_rx) = channel();
    let (b_go_tx, b_go_rx) = channel::<()>();
    let b = std::thread::spawn(move || {
        let it = m.iter();
        b_in_tx.send(()).unwrap();
        b_go_rx.recv().unwrap();
        assert!(it.count() >= 100);
    });
    b_in_rx.recv().unwrap();
    leave_tx.send(()).unwrap();
    a.join().unwrap();
    for k in 100..20_000 {
        m.insert(k, k).unwrap();
    }
    let s = m.stats();
    assert!(s.indexes_awaiting_free >= 1, "an index B is reading was freed: {s:?}");
    b_go_tx.send(()).unwrap();
    b.join().unwrap();
}

struct WritesOnExit(Arc<dlht::AllocMap<u64, String>>);

impl Drop for WritesOnExit {
    fn drop(&mut self) {
        let guard = self.0.guard();
        self.0.insert(2, "written during thread exit".to_string(), &guard).unwrap();
        assert!(self.0.remove(&1, &guard).is_some());
    }
}

std::thread_local! {
    static WRITES: RefCell<Option<WritesOnExit>> = const { RefCell::new(None) };
}

#[test]
fn an_alloc_map_written_from_a_tls_destructor_counts_its_bytes() {
    // Allocator mode counts the bytes of its values in per-thread shares;
    // a write from a destructor that runs after the thread's claims were
    // released (registered before them) counts through a temporary record.
    let m = Arc::new(dlht::AllocMap::<u64, String>::new());
    let m2 = m.clone();
    std::thread::spawn(move || {
        WRITES.with(|w| *w.borrow_mut() = Some(WritesOnExit(m2.clone())));
        let guard = m2.guard();
        m2.insert(1, "written before".to_string(), &guard).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(m.len(), 1);
    let guard = m.guard();
    assert_eq!(m.get(&2, &guard).map(String::as_str), Some("written during thread exit"));
    let fresh = dlht::AllocMap::<u64, String>::new();
    fresh.insert(2, "written during thread exit".to_string(), &fresh.guard()).unwrap();
    assert_eq!(m.memory().value_bytes, fresh.memory().value_bytes);
}
