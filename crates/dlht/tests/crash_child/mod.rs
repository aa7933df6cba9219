//! A child process told to crash at a named point (`DLHT_CRASH_AT`),
//! waited for: shared by `tests/persist.rs` and `tests/persist_bytes.rs`.

use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::time::{Duration, Instant};

/// Wait for `child`, told to crash at `spec` (`point:nth`), and require
/// that it aborted there (SIGABRT). Bounded: a point never reached is a
/// failure, not a hang — the child is killed and reaped, and the test
/// fails (the bound is generous: a debug build's child on a loaded 2-core
/// machine took over 30 s to fill and drain its way to a merge).
pub fn wait_for_abort(child: &mut Child, spec: &str) {
    let bound = Duration::from_secs(if cfg!(debug_assertions) { 180 } else { 60 });
    let deadline = Instant::now() + bound;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{spec}: never reached in {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "{spec}: the child did not stop at the point ({status:?})"
    );
}
