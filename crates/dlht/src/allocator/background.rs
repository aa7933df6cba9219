//! A background thread a map owns: told to stop and joined when the map
//! is dropped (a persistent byte map's heap reclamation).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A persistent byte map's background reclamation: stopped and joined
/// when the map is dropped.
pub(crate) struct Reclaimer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Reclaimer {
    /// The thread has ended (done, stopped, or panicked).
    #[cfg_attr(loom, allow(dead_code))]
    pub fn finished(&self) -> bool {
        self.thread.as_ref().map_or(true, |t| t.is_finished())
    }

    /// Own `thread`, which polls `stop`.
    #[cfg_attr(loom, allow(dead_code))]
    pub fn new(stop: Arc<AtomicBool>, thread: std::thread::JoinHandle<()>) -> Reclaimer {
        Reclaimer { stop, thread: Some(thread) }
    }
}
