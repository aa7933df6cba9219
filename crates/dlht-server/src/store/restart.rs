//! Warm restart (`-e DIR`, memcached's restartable memory flag): the items
//! live in a persistent `ByteMap` in `DIR`, and what the store keeps beside
//! them — the clock's origin, a bound on the cas uniques handed out, the
//! `flush_all` state — lives in `DIR/dlht-server.meta`, rewritten whole
//! (a temporary file renamed over it) when one of them moves on.
//!
//! Items store times on the server clock (memcached's relative times), so
//! the clock keeps its origin across restarts — as memcached's restart
//! does with `process_started` — and expiry stays absolute. A cas unique
//! is never handed out twice: the file names a bound above every cas
//! handed out, raised by [`CAS_STEP`] before the counter passes it, and a
//! restart counts on from the bound.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// The metadata file in the map's directory.
pub const META_FILE: &str = "dlht-server.meta";
/// How far the cas bound is raised at a time (one file write per this
/// many cas uniques).
pub const CAS_STEP: u64 = 1 << 20;

/// What the meta file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Unix time at which the server clock reads 0.
    pub origin: i64,
    /// Every cas unique handed out is at most this.
    pub cas_bound: u64,
    /// `flush_all`'s state (see `Store::dead`).
    pub oldest_live: u32,
    /// As above.
    pub oldest_cas: u64,
}

impl Meta {
    fn encode(&self) -> String {
        format!(
            "dlht-server 1\norigin {}\ncas_bound {}\noldest_live {}\noldest_cas {}\n",
            self.origin, self.cas_bound, self.oldest_live, self.oldest_cas
        )
    }

    fn decode(s: &str) -> Option<Meta> {
        let mut lines = s.lines();
        if lines.next()? != "dlht-server 1" {
            return None;
        }
        let mut field = |name: &str| -> Option<String> {
            let l = lines.next()?;
            Some(l.strip_prefix(name)?.strip_prefix(' ')?.to_string())
        };
        Some(Meta {
            origin: field("origin")?.parse().ok()?,
            cas_bound: field("cas_bound")?.parse().ok()?,
            oldest_live: field("oldest_live")?.parse().ok()?,
            oldest_cas: field("oldest_cas")?.parse().ok()?,
        })
    }
}

/// A store's restart state: its directory, the cas bound written, and what
/// the open recovered.
pub struct Restart {
    path: PathBuf,
    /// The bound in the file (read without the lock; raised under it).
    cas_bound: AtomicU64,
    /// Serializes rewrites of the file; holds what was written last.
    written: Mutex<Meta>,
    /// Items in the map when it was opened.
    pub recovered_items: u64,
    /// Time the map's open took (recovery included).
    pub recovery_time: Duration,
}

impl Restart {
    /// Read `dir`'s meta file (None if the directory has none yet: a new
    /// cache), refusing a damaged one.
    pub fn read(dir: &Path) -> io::Result<Option<Meta>> {
        match std::fs::read_to_string(dir.join(META_FILE)) {
            Ok(s) => Meta::decode(&s)
                .map(Some)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{META_FILE} is damaged"))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The restart state of `dir`, writing `meta` (the file then holds a
    /// bound above every cas the store will hand out before raising it).
    pub fn start(
        dir: &Path,
        meta: Meta,
        recovered_items: u64,
        recovery_time: Duration,
    ) -> io::Result<Restart> {
        let r = Restart {
            path: dir.join(META_FILE),
            cas_bound: AtomicU64::new(meta.cas_bound),
            written: Mutex::new(meta),
            recovered_items,
            recovery_time,
        };
        r.write(&meta)?;
        Ok(r)
    }

    fn write(&self, meta: &Meta) -> io::Result<()> {
        let tmp = self.path.with_extension("meta.tmp");
        std::fs::write(&tmp, meta.encode())?;
        std::fs::rename(&tmp, &self.path)
    }

    /// Make sure the file's bound covers cas unique `cas` before it is
    /// handed out.
    pub fn cover_cas(&self, cas: u64) -> io::Result<()> {
        if cas <= self.cas_bound.load(Relaxed) {
            return Ok(());
        }
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if cas > w.cas_bound {
            let mut next = *w;
            next.cas_bound = cas.saturating_add(CAS_STEP);
            self.write(&next)?;
            *w = next;
            // Relaxed: the file is written; a thread reading the old bound
            // takes the lock and finds it raised.
            self.cas_bound.store(next.cas_bound, Relaxed);
        }
        Ok(())
    }

    /// Run `flush` (which sets `flush_all`'s state and returns it) and
    /// record what it set, under one lock: concurrent flushes write the
    /// file in the order they set the state, so the file ends with the
    /// state memory ends with.
    pub fn flushed(&self, flush: impl FnOnce() -> (u32, u64)) -> io::Result<()> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let (oldest_live, oldest_cas) = flush();
        let mut next = *w;
        next.oldest_live = oldest_live;
        next.oldest_cas = oldest_cas;
        self.write(&next)?;
        *w = next;
        Ok(())
    }

    /// Report a failed write of the meta file once (the cache keeps
    /// serving; a restart after it may hand out a cas unique again or
    /// bring back what a `flush_all` invalidated).
    pub fn report(&self, r: io::Result<()>) {
        static REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if let Err(e) = r {
            if !REPORTED.swap(true, Relaxed) {
                eprintln!("dlht-server: cannot write {}: {e}", self.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_refuses_damage() {
        let m = Meta { origin: -5, cas_bound: u64::MAX, oldest_live: 7, oldest_cas: 9 };
        assert_eq!(Meta::decode(&m.encode()), Some(m));
        assert_eq!(Meta::decode("dlht-server 2\norigin 1\n"), None);
        assert_eq!(Meta::decode(&m.encode()[..30]), None);
    }

    #[test]
    fn the_cas_bound_is_raised_before_it_is_passed() {
        let dir = std::env::temp_dir().join(format!("dlht-server-meta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let r = Restart::start(&dir, Meta { cas_bound: 10, ..Meta::default() }, 0, Duration::ZERO).unwrap();
        r.cover_cas(10).unwrap();
        assert_eq!(Restart::read(&dir).unwrap().unwrap().cas_bound, 10);
        r.cover_cas(11).unwrap();
        assert_eq!(Restart::read(&dir).unwrap().unwrap().cas_bound, 11 + CAS_STEP);
        r.flushed(|| (3, 4)).unwrap();
        let m = Restart::read(&dir).unwrap().unwrap();
        assert_eq!((m.oldest_live, m.oldest_cas, m.cas_bound), (3, 4, 11 + CAS_STEP));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
