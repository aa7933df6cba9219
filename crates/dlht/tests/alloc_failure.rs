//! Allocation failure in allocator mode: an insert or replacement whose
//! entry (or collision list) cannot be allocated returns `Error::AllocFailed`
//! (or panics with that message, for the non-`try` methods), leaves the map
//! as it was, and leaks nothing. A global allocator refuses the next
//! allocation of a chosen size, once.
#![cfg(not(loom))]

mod common;

use dlht::{AllocMap, ByteMap, Error};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

struct RefuseOnce;

/// Size of the next allocation to refuse (0: none). Relaxed throughout: set
/// and taken by the one test thread running (the tests take turns), it
/// publishes nothing.
static REFUSE: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// Bytes this thread allocated less bytes it freed (per thread: the
    /// test harness allocates on its own thread meanwhile). Exact here
    /// because these tests retire nothing, so no thread frees another's
    /// memory through epoch reclamation.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator, or returns null (a refusal).
unsafe impl GlobalAlloc for RefuseOnce {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let size = layout.size();
        if size == REFUSE.load(Ordering::Relaxed)
            && REFUSE.compare_exchange(size, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            return std::ptr::null_mut();
        }
        LIVE.with(|l| l.set(l.get() + size as isize));
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.with(|l| l.set(l.get() - layout.size() as isize));
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: RefuseOnce = RefuseOnce;

/// The tests run one at a time: the refusal and the byte count are global.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Every key one signature: the second key of a namespace needs a list.
type OneSignature = common::FewBits<0>;

type Big = [u8; 1000];
/// A node: key, value.
const NODE: usize = 8 + 1000;

/// Run `f` with the next allocation of `size` bytes refused; check that it
/// leaked nothing and that the map's contents (as `contents` lists them)
/// did not change.
fn refusing<C: PartialEq + std::fmt::Debug, R>(
    size: usize,
    contents: impl Fn() -> C,
    f: impl FnOnce() -> R,
) -> R {
    let before = contents();
    let live = LIVE.with(Cell::get);
    REFUSE.store(size, Ordering::Relaxed);
    let r = f();
    assert_eq!(REFUSE.load(Ordering::Relaxed), 0, "the refused allocation happened");
    assert_eq!(LIVE.with(Cell::get), live, "nothing leaked");
    assert_eq!(contents(), before, "the map is unchanged");
    r
}

/// An allocator-mode map's contents, sorted.
fn contents<M: BuildHasher>(map: &AllocMap<u64, Big, M>) -> impl Fn() -> Vec<(usize, u64, u8)> + '_ {
    move || {
        let g = map.guard();
        let mut v: Vec<_> = map.iter(&g).map(|(ns, k, v)| (ns, *k, v[0])).collect();
        v.sort();
        v
    }
}

/// Check that `f` panics with a message containing `says`, with the panic
/// hook silenced (the default hook allocates to print, and may capture a
/// backtrace); the payload is freed before returning.
fn quiet_panic(says: &str, f: impl FnOnce()) {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    let payload = r.expect_err("the operation panics");
    let msg = payload.downcast_ref::<String>().expect("a formatted message");
    assert!(msg.contains(says), "{msg}");
}

#[test]
fn refused_allocations_are_errors_and_change_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let map: AllocMap<u64, Big> = AllocMap::with_capacity(100);
    let g = map.guard();
    map.insert(1, [1; 1000], &g).unwrap();
    let e = refusing(NODE, contents(&map), || map.try_insert(2, [2; 1000], &g).map(|r| r.is_ok()));
    assert_eq!(e, Err(Error::AllocFailed { bytes: NODE }));
    let e = refusing(NODE, contents(&map), || map.try_upsert(1, [3; 1000], &g).map(|r| r.map(|v| v[0])));
    assert_eq!(e, Err(Error::AllocFailed { bytes: NODE }));
    let e = refusing(NODE, contents(&map), || map.try_upsert(5, [3; 1000], &g).map(|r| r.map(|v| v[0])));
    assert_eq!(e, Err(Error::AllocFailed { bytes: NODE }));
    assert_eq!(map.get(&1, &g).map(|v| v[0]), Some(1));
    // The panicking form says why.
    refusing(NODE, contents(&map), || {
        quiet_panic("could not allocate 1008 bytes", || drop(map.insert(2, [2; 1000], &g)))
    });
    // And the map still works.
    map.insert(2, [2; 1000], &g).unwrap();
    assert_eq!(map.len(), 2);
}

#[test]
fn refused_collision_lists_change_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let map: AllocMap<u64, Big, OneSignature> = AllocMap::with_hasher(OneSignature::default());
    let g = map.guard();
    map.insert(1, [1; 1000], &g).unwrap();
    // The second key shares the signature: a list of two node pointers.
    let e = refusing(16, contents(&map), || map.try_insert(2, [2; 1000], &g).map(|r| r.is_ok()));
    assert_eq!(e, Err(Error::AllocFailed { bytes: 16 }));
    map.insert(2, [2; 1000], &g).unwrap();
    map.insert(3, [3; 1000], &g).unwrap();
    assert_eq!(map.len(), 3);
    // Replacing in a list of three makes a new list of three.
    let e = refusing(24, contents(&map), || map.try_upsert(2, [9; 1000], &g).map(|r| r.map(|v| v[0])));
    assert_eq!(e, Err(Error::AllocFailed { bytes: 24 }));
    // Removing from a list makes a shorter one (its vector reserved for
    // three): the panic keeps the key.
    refusing(24, contents(&map), || {
        quiet_panic("could not allocate 24 bytes", || {
            let _ = map.remove(&2, &g);
        })
    });
    assert_eq!(map.get(&2, &g).map(|v| v[0]), Some(2));
    assert_eq!(map.len(), 3);
}

#[test]
fn a_byte_map_refused_memory_or_given_too_long_a_value_changes_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let map = ByteMap::with_capacity(100);
    let contents = || {
        let g = map.guard();
        let mut v: Vec<_> = map.iter(&g).map(|(ns, k, v)| (ns, k.to_vec(), v.to_vec())).collect();
        v.sort();
        v
    };
    let g = map.guard();
    let long_key = [7u8; 40];
    map.insert(b"short", &[1; 100], &g).unwrap().unwrap();
    map.insert(&long_key, &[1; 100], &g).unwrap().unwrap();
    let cur = map.get(b"short", &g).unwrap();
    const BLOB: usize = 12 + 100;
    // A blob: 12-byte header (two lengths and the stamp), the key if longer than 8 bytes, the value.
    for (key, blob) in [(&b"short"[..], BLOB), (&long_key[..], 12 + 40 + 100), (b"new", BLOB)] {
        let e = refusing(blob, contents, || map.upsert(key, &[2; 100], &g).map(|_| ()));
        assert_eq!(e, Err(Error::AllocFailed { bytes: blob }));
    }
    let e = refusing(BLOB, contents, || map.insert(b"new", &[2; 100], &g).map(|r| r.is_ok()));
    assert_eq!(e, Err(Error::AllocFailed { bytes: BLOB }));
    let e = refusing(BLOB, contents, || map.put(b"short", &[2; 100], &g).map(|r| r.is_some()));
    assert_eq!(e, Err(Error::AllocFailed { bytes: BLOB }));
    let e =
        refusing(BLOB, contents, || map.compare_and_replace(b"short", cur, &[2; 100], &g).map(|r| r.is_ok()));
    assert_eq!(e, Err(Error::AllocFailed { bytes: BLOB }));
    // A value longer than the length field: refused before any allocation
    // (`vec!` of zeros maps untouched pages, so this costs no memory).
    let huge = vec![0u8; u32::MAX as usize + 1];
    let before = contents();
    assert_eq!(map.insert(b"huge", &huge, &g).map(|r| r.is_ok()), Err(Error::TooLong { bytes: huge.len() }));
    assert_eq!(
        map.upsert(b"short", &huge, &g).map(|r| r.is_some()),
        Err(Error::TooLong { bytes: huge.len() })
    );
    assert_eq!(contents(), before);
    drop(huge);
    // And the map still works.
    map.insert(b"new", &[3; 100], &g).unwrap().unwrap();
    assert_eq!(map.len(), 3);
}
