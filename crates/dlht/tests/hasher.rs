//! Hashers that misbehave: ones that call back into the map, and ones that
//! panic. The map must neither read a freed
//! index nor wedge: re-entry outside a resize works, re-entry or a panic
//! during a transfer aborts the process with a clear message, and a panic
//! anywhere else leaves the map usable.
//!
//! Tests that expect an abort run their body in a child process (this test
//! binary, re-run with `DLHT_CHILD` set) under a time limit, since the bug
//! they guard against is a hang.
#![cfg(not(loom))]

use dlht::{LocalMap, Map, Request, Response, StopOn};
use std::cell::{Cell, RefCell};
use std::hash::{BuildHasher, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Keys with this bit make the hook call back into the map.
const NEST: u64 = 1 << 63;

/// What the hasher runs before hashing a word.
type Hook = Rc<dyn Fn(u64)>;

std::thread_local! {
    /// Called with each word hashed on this thread (not recursively).
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// A well-spreading hasher (splitmix64 of the word) that runs this thread's
/// hook first.
#[derive(Clone, Copy, Default)]
struct Hooked;

struct HookedHasher(u64);

impl BuildHasher for Hooked {
    type Hasher = HookedHasher;
    fn build_hasher(&self) -> HookedHasher {
        HookedHasher(0)
    }
}

impl Hasher for HookedHasher {
    fn finish(&self) -> u64 {
        let w = self.0;
        if !IN_HOOK.with(|f| f.replace(true)) {
            struct Reset;
            impl Drop for Reset {
                fn drop(&mut self) {
                    IN_HOOK.with(|f| f.set(false));
                }
            }
            let _reset = Reset;
            if let Some(hook) = HOOK.with(|h| h.borrow().clone()) {
                hook(w);
            }
        }
        let mut z = w.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("dlht hashes words")
    }
    fn write_u64(&mut self, w: u64) {
        self.0 = w;
    }
}

fn set_hook(f: impl Fn(u64) + 'static) {
    HOOK.with(|h| *h.borrow_mut() = Some(Rc::new(f)));
}

fn clear_hook() {
    HOOK.with(|h| *h.borrow_mut() = None);
}

/// A batch of inserts of `keys`, with a get of a NEST key before every
/// fourth (whose hashing calls back into the map).
fn nesting_batch(keys: std::ops::Range<u64>) -> Vec<Request<u64, u64>> {
    let mut reqs = Vec::new();
    for k in keys {
        if k % 4 == 0 {
            reqs.push(Request::Get(k | NEST));
        }
        reqs.push(Request::Insert(k, !k));
    }
    reqs
}

fn check_batch(reqs: &[Request<u64, u64>], out: &[Response<u64>]) {
    for (r, o) in reqs.iter().zip(out) {
        match r {
            Request::Get(_) => assert_eq!(*o, Response::Get(None)),
            _ => assert_eq!(*o, Response::Insert(Ok(()))),
        }
    }
}

#[test]
fn map_hasher_calling_back_inside_a_batch() {
    // A batch enters the map once; the nested get used to clear that
    // announcement on leaving, so the resizes the batch's inserts cause
    // freed the index the batch was still running in.
    type M = Map<u64, u64, Hooked>;
    let m = M::with_hasher(Hooked);
    let p = &m as *const M as usize;
    set_hook(move |w| {
        if w & NEST != 0 {
            // SAFETY: the map outlives the hook (cleared below).
            let m = unsafe { &*(p as *const M) };
            assert_eq!(m.get(&(w & !NEST)), None);
        }
    });
    for start in (0..40_000u64).step_by(2_000) {
        let reqs = nesting_batch(start..start + 2_000);
        let mut out = vec![Response::NotExecuted; reqs.len()];
        assert_eq!(m.batch(&reqs, &mut out, StopOn::Never), Ok(reqs.len()));
        check_batch(&reqs, &out);
    }
    clear_hook();
    let s = m.stats();
    assert!(s.resizes >= 4, "only {} resizes", s.resizes);
    assert_eq!(s.indexes_awaiting_free, 0);
    assert!((0..40_000u64).all(|k| m.get(&k) == Some(!k)));
}

#[test]
fn local_map_hasher_calling_back_inside_a_batch() {
    // The nested calls insert (and so grow the map) while the outer batch
    // is between requests: the pipeline must not hold the index across the
    // hasher call.
    type M = LocalMap<u64, u64, Hooked>;
    let m = M::with_hasher(Hooked);
    let p = &m as *const M as usize;
    let next = Rc::new(Cell::new(1u64 << 40));
    let n = next.clone();
    set_hook(move |w| {
        if w & NEST != 0 {
            // SAFETY: the map outlives the hook (cleared below).
            let m = unsafe { &*(p as *const M) };
            for _ in 0..8 {
                let k = n.get();
                n.set(k + 1);
                m.insert(k, k).unwrap();
            }
        }
    });
    for start in (0..20_000u64).step_by(1_000) {
        let reqs = nesting_batch(start..start + 1_000);
        let mut out = vec![Response::NotExecuted; reqs.len()];
        assert_eq!(m.batch(&reqs, &mut out, StopOn::Never), Ok(reqs.len()));
        check_batch(&reqs, &out);
    }
    clear_hook();
    assert!(m.stats().resizes >= 4);
    assert!((0..20_000u64).all(|k| m.get(&k) == Some(!k)));
    assert!(((1 << 40)..next.get()).all(|k| m.get(&k) == Some(k)));
    assert_eq!(m.len() as u64, 20_000 + next.get() - (1 << 40));
}

#[test]
fn a_panicking_hasher_outside_transfers_leaves_the_map_usable() {
    // The panic unwinds out of a batch, which had entered the map: the
    // announcement must be withdrawn, or no replaced index is ever freed.
    let m = Map::<u64, u64, Hooked>::with_hasher(Hooked);
    set_hook(|w| assert!(w != 13 | NEST, "hasher refuses this key"));
    for k in 0..100u64 {
        m.insert(k, k).unwrap();
    }
    let reqs = [Request::Get(1), Request::Get(13 | NEST), Request::Get(2)];
    let mut out = [Response::NotExecuted; 3];
    assert!(catch_unwind(AssertUnwindSafe(|| m.batch(&reqs, &mut out, StopOn::Never))).is_err());
    clear_hook();
    // Another thread grows the map many times; then nothing may be pending.
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 100..20_000u64 {
                m.insert(k, k).unwrap();
            }
        });
    });
    let st = m.stats();
    assert!(st.resizes >= 3);
    assert_eq!(st.indexes_awaiting_free, 0, "the panicked thread still blocks reclamation");
    assert!((0..20_000u64).all(|k| m.get(&k) == Some(k)));
}

/// Run test `name`'s child body in a fresh process; return its exit status
/// and stderr, or fail if it runs past the limit (the map wedged).
fn run_child(name: &str) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("DLHT_CHILD", name)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status, err);
        }
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().ok();
            panic!("{name}: the child ran for a minute: the map wedged");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Test `name`: run `body` in a child process (this binary, re-run for that
/// test alone) and require the child to abort (SIGABRT), saying `why`.
fn expect_abort_in_child(name: &str, why: &str, body: impl FnOnce()) {
    if std::env::var("DLHT_CHILD").as_deref() == Ok(name) {
        body();
        return;
    }
    let (status, err) = run_child(name);
    assert!(!status.success(), "{name}: the child exited cleanly; stderr:\n{err}");
    #[cfg(unix)]
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc_sigabrt()),
        "{name}: not an abort ({status}); stderr:\n{err}"
    );
    assert!(err.contains(why), "{name}: stderr lacks {why:?}:\n{err}");
}

const fn libc_sigabrt() -> i32 {
    6 // SIGABRT on Linux and the BSDs
}

/// Insert `keys` after arming a hasher that panics on key 13, which is in
/// the map: the next resize rehashes it inside a transfer.
fn panic_in_transfer(insert: impl Fn(u64)) {
    insert(13);
    set_hook(|w| assert!(w != 13, "hasher refuses key 13"));
    for k in 14..1_000_000u64 {
        // Before the fix the panic surfaced here, and the map then wedged.
        let _ = catch_unwind(AssertUnwindSafe(|| insert(k)));
    }
}

const TRANSFER_PANIC: &str = "the hasher panicked while a bin was being transferred";

#[test]
fn map_hasher_panicking_in_a_transfer_aborts_with_a_message() {
    expect_abort_in_child("map_hasher_panicking_in_a_transfer_aborts_with_a_message", TRANSFER_PANIC, || {
        let m = Map::<u64, u64, Hooked>::with_hasher(Hooked);
        panic_in_transfer(|k| m.insert(k, k).unwrap());
    });
}

#[test]
fn local_map_hasher_panicking_in_a_transfer_aborts_with_a_message() {
    expect_abort_in_child(
        "local_map_hasher_panicking_in_a_transfer_aborts_with_a_message",
        TRANSFER_PANIC,
        || {
            let m = LocalMap::<u64, u64, Hooked>::with_hasher(Hooked);
            panic_in_transfer(|k| m.insert(k, k).unwrap());
        },
    );
}

#[test]
fn local_map_hasher_calling_back_during_a_resize_aborts_with_a_message() {
    // The bins are half-moved, so the nested call cannot be served; before
    // the fix a nested insert grew the map and freed the index the outer
    // transfer was reading.
    expect_abort_in_child(
        "local_map_hasher_calling_back_during_a_resize_aborts_with_a_message",
        "called from its own hasher during a resize",
        || {
            type M = LocalMap<u64, u64, Hooked>;
            let m = M::with_hasher(Hooked);
            let p = &m as *const M as usize;
            set_hook(move |w| {
                // SAFETY: the map outlives the process (it aborts).
                let m = unsafe { &*(p as *const M) };
                m.insert(w | NEST, 0).ok();
            });
            for k in 0..1_000_000u64 {
                m.insert(k, k).ok();
            }
        },
    );
}
