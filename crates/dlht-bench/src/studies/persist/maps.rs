//! The two maps as the workloads use them: the in-memory `Map` and the
//! persistent `FileMap` behind one workload [`Table`], the directories the
//! FileMaps live in, and the result check that turns a panic into an error.

use crate::compare::systems;
use crate::compare::table::{Concurrent, Table};
use core::hash::BuildHasher;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What tells the two maps apart: their hasher type.
pub(super) trait Kind: BuildHasher + Sized + Send + Sync + 'static {
    /// Name in reports, one call per request.
    const NAME: &'static str;
    /// Name in reports, batched.
    const BATCHED: &'static str;
    /// An in-memory map presized for `n` keys (the FileMap is opened in a
    /// directory instead: see [`open_file`]).
    fn with_capacity(n: usize) -> dlht::Map<u64, u64, Self>;
}

impl Kind for dlht::DefaultHashBuilder {
    const NAME: &'static str = "map";
    const BATCHED: &'static str = "map-batch";
    fn with_capacity(n: usize) -> dlht::Map<u64, u64, Self> {
        dlht::Map::with_capacity(n)
    }
}

impl Kind for dlht::FileHasher {
    const NAME: &'static str = "filemap";
    const BATCHED: &'static str = "filemap-batch";
    fn with_capacity(_: usize) -> dlht::Map<u64, u64, Self> {
        unreachable!(
            "a FileMap is opened in a directory (persist::open_file); this study never asks otherwise"
        )
    }
}

/// A map of either kind as a workload [`Table`]: one call per request, or
/// (`BATCHED`) gets through `get_many` and inserts and removes through
/// `batch`. Views of one map share it.
pub(super) struct Sys<S: Kind, const BATCHED: bool>(pub(super) Shared<S>);

/// Run the `n` requests `fill` writes through `m.batch` (the comparison's
/// per-thread buffers, [`systems::batch_of`]); the successes.
#[inline(always)]
pub(super) fn batch_of<S: Kind>(
    m: &dlht::Map<u64, u64, S>,
    n: usize,
    fill: impl FnOnce(&mut [dlht::Request<u64, u64>]),
) -> usize {
    systems::batch_of(n, fill, |reqs, out| {
        m.batch(reqs, out, dlht::StopOn::Never).unwrap_or_else(|e| panic!("a batch failed: {e}"))
    })
}

impl<S: Kind, const BATCHED: bool> Table for Sys<S, BATCHED> {
    const NAME: &'static str = if BATCHED { S::BATCHED } else { S::NAME };
    type Sharing = Concurrent;
    fn with_capacity(n: usize) -> Self {
        Sys(Arc::new(S::with_capacity(n)))
    }
    #[inline]
    fn get(&self, k: u64) -> Option<u64> {
        self.0.get(&k)
    }
    #[inline]
    fn insert(&self, k: u64, v: u64) -> bool {
        self.0.insert(k, v).is_ok()
    }
    #[inline]
    fn remove(&self, k: u64) -> bool {
        self.0.remove(&k).is_some()
    }
    #[inline]
    fn put(&self, k: u64, v: u64) -> bool {
        self.0.put(k, v).is_some()
    }
    #[inline]
    fn get_batch(&self, keys: &[u64], out: &mut [Option<u64>]) {
        if BATCHED {
            self.0.get_many(keys, out).expect("buffers of equal length");
        } else {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.0.get(k);
            }
        }
    }
    #[inline]
    fn insdel_batch(&self, keys: &[u64]) -> usize {
        if !BATCHED {
            return keys.iter().map(|&k| self.insert(k, k) as usize + self.remove(k) as usize).sum();
        }
        batch_of(&self.0, 2 * keys.len(), |reqs| {
            for (i, &k) in keys.iter().enumerate() {
                reqs[2 * i] = dlht::Request::Insert(k, k);
                reqs[2 * i + 1] = dlht::Request::Remove(k);
            }
        })
    }
    #[inline]
    fn insert_batch(&self, keys: &[u64]) -> usize {
        if !BATCHED {
            return keys.iter().map(|&k| self.insert(k, k) as usize).sum();
        }
        batch_of(&self.0, keys.len(), |reqs| {
            for (i, &k) in keys.iter().enumerate() {
                reqs[i] = dlht::Request::Insert(k, k);
            }
        })
    }
}

/// A map of either kind, shared by its views.
pub(super) type Shared<S> = Arc<dlht::Map<u64, u64, S>>;

/// The in-memory map.
pub(super) type Mem = dlht::Map<u64, u64>;
/// The persistent map.
pub(super) type Persistent = dlht::FileMap<u64, u64>;

/// Open (or make) the FileMap in `dir` with room for `capacity` keys.
pub(super) fn open_file(dir: &Path, capacity: usize) -> Result<Persistent, String> {
    Persistent::open_with(dir, dlht::OpenOptions::new().capacity(capacity))
        .map_err(|e| format!("opening a FileMap in {}: {e:?}", dir.display()))
}

/// Delete a map's directory (it may not exist).
pub(super) fn remove_dir(dir: &Path) {
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            eprintln!("could not remove {}: {e}", dir.display());
        }
    }
}

/// Run `f`, turning a failed result check (a panic) into an error.
pub(super) fn checked<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a result check failed".into())
    })
}

/// Where the study's map directories go, and whether it made the folder.
pub(super) struct Dirs {
    pub(super) base: PathBuf,
    pub(super) made: bool,
}

impl Dirs {
    pub(super) fn new(dir: Option<&PathBuf>) -> Result<Dirs, String> {
        let base = dir.cloned().unwrap_or_else(|| {
            std::env::temp_dir().join(format!("dlht-bench-persist-{}", std::process::id()))
        });
        let made = !base.exists();
        std::fs::create_dir_all(&base).map_err(|e| format!("creating {}: {e}", base.display()))?;
        Ok(Dirs { base, made })
    }

    /// A map directory `name`, emptied.
    pub(super) fn fresh(&self, name: &str) -> PathBuf {
        let d = self.base.join(name);
        remove_dir(&d);
        d
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        if self.made {
            remove_dir(&self.base);
        }
    }
}
