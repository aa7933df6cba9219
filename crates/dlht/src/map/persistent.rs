//! Opening a [`Map`] kept in files (see `persist`).

use super::state::Core;
use super::Map;
use crate::driver::{self, DEFAULT_BINS};
use crate::error::Error;
use crate::persist::hasher::FileHasher;
use crate::persist::layout::MapKind;
use crate::persist::{MapFile, OpenOptions, Recovery};
use crate::word::Inline;
use core::hash::BuildHasher;
use core::marker::PhantomData;
use std::path::Path;
use std::time::Instant;

impl<K: Inline, V: Inline> Map<K, V, FileHasher> {
    /// Open the map kept in directory `dir`, or make one there if there is
    /// none (the directory too). Every write whose call returned is in the
    /// files when the process dies, however it dies; the next open finds
    /// it, after finishing or undoing what the dead threads were doing
    /// (work proportional to the threads, not to the map). See
    /// [`OpenOptions`] and [`Durability`](crate::Durability).
    ///
    /// Errors: [`Error::Locked`] if another map has the directory open (in
    /// this or another process); [`Error::Corrupt`] or
    /// [`Error::Incompatible`] for files that are not this map's (nothing
    /// in the directory is changed then); [`Error::Io`].
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("dlht-doc-open-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// {
    ///     let m = dlht::FileMap::<u64, u64>::open(&dir).unwrap();
    ///     m.insert(1, 10).unwrap();
    /// } // closed
    /// let m = dlht::FileMap::<u64, u64>::open(&dir).unwrap();
    /// assert_eq!(m.get(&1), Some(10));
    /// assert!(matches!(dlht::FileMap::<u64, u64>::open(&dir), Err(dlht::Error::Locked)));
    /// # drop(m);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(dir, OpenOptions::new())
    }

    /// [`open`](Self::open) with options: the capacity of a map made anew,
    /// the durability mode.
    pub fn open_with(dir: impl AsRef<Path>, options: OpenOptions) -> Result<Self, Error> {
        Self::open_kind(dir.as_ref(), options, MapKind::Inlined)
    }

    /// Open a map of `kind` (the index of a byte map is one of words).
    pub(crate) fn open_kind(dir: &Path, options: OpenOptions, kind: MapKind) -> Result<Self, Error> {
        let started = Instant::now();
        let bins = driver::bins_for(options.capacity)?.max(DEFAULT_BINS);
        let opened = MapFile::open(dir, kind, size_of::<K>(), size_of::<V>(), bins, options.heap_bytes)?;
        let hasher = FileHasher::new(opened.seed, opened.secrets);
        let hash = |w: u64| hasher.hash_one(w);
        opened.file.check_hash(hash)?;
        let mut file = opened.file;
        file.set_durability(options.durability);
        let indexes = file.open_indexes(&hash)?;
        file.start(options.durability);
        file.opened(started);
        let core =
            Core::persistent(indexes.current, indexes.next, indexes.fallback, std::sync::Arc::new(file));
        // The keys already there count in this thread's share of the length
        // (in memory only: the file's shares already hold them).
        core.reclaim.with_record(|r| r.len.0.add(indexes.len as i64));
        // A grow the open resumed is finished by a thread of its own, not
        // only by the writes that help it (a shrink is left to them).
        if let Some(p) = core.persist() {
            let guard = core.pin();
            let idx = core.current(&guard);
            if let Some(next) = idx.next_index().filter(|n| n.bins() > idx.bins()) {
                let h = hasher;
                p.finish_resumed_grow(idx, next, move |w| h.hash_one(w), core.chunk_bins());
            }
        }
        Ok(Map { core, hasher, _kv: PhantomData })
    }

    /// Write every change so far to disk and wait: after it returns, the
    /// map survives a crash of the machine as it is now, not just one of
    /// the process. One `fdatasync` per file of the map, now, for this
    /// caller (see [`durable`](Self::durable) for syncs shared by callers).
    pub fn sync(&self) -> Result<(), Error> {
        self.file().sync()
    }

    /// Wait until every write that returned before this call survives a
    /// crash of the machine. In [`Durability::Sync`](crate::Durability)
    /// mode, that is the group sync after this call (one sync for all the
    /// callers waiting: a group commit); in process mode, a
    /// [`sync`](Self::sync) now. Once a group sync has failed, every later
    /// call fails too (the kernel may have dropped what it could not
    /// write: reopen the map, which finds what reached the disk).
    ///
    /// ```
    /// use dlht::{Durability, FileMap, OpenOptions};
    /// use std::time::Duration;
    /// let dir = std::env::temp_dir().join(format!("dlht-doc-durable-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let every = Duration::from_millis(2);
    /// let m = FileMap::<u64, u64>::open_with(&dir, OpenOptions::new().durability(Durability::Sync { every })).unwrap();
    /// m.insert(1, 10).unwrap();
    /// m.durable().unwrap(); // on disk from here: survives a power loss
    /// # drop(m);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn durable(&self) -> Result<(), Error> {
        self.file().durable()
    }

    /// What the open found (a crash or a clean close) and what recovery
    /// did, with the time the open took.
    pub fn recovery(&self) -> Recovery {
        self.file().recovery()
    }

    /// The map's identity: a number drawn when its files were made, which
    /// every file of the map names (a file of another map is refused at
    /// open). Tools that keep files of their own beside a map's (as
    /// `dlht-server -e` does) record it to refuse another map's directory.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("dlht-doc-id-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let id = dlht::FileMap::<u64, u64>::open(&dir).unwrap().map_id();
    /// assert_eq!(dlht::FileMap::<u64, u64>::open(&dir).unwrap().map_id(), id);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn map_id(&self) -> u64 {
        self.file().header().map_id
    }

    /// True while a thread of the map finishes, in the background, the grow
    /// this open resumed ([`Recovery::resize_resumed`]: a process died
    /// during it). Writes help as well, as with any grow; once every bin is
    /// transferred the files name the larger index (a crash from then on
    /// reopens it with nothing to resume), and the next insert, remove,
    /// `reserve` or `stats` switches to it in memory. A drop meanwhile
    /// stops the thread after the bin it is moving: the next open resumes
    /// the rest.
    pub fn finishing_in_background(&self) -> bool {
        self.file().finishing()
    }

    pub(crate) fn file(&self) -> &MapFile {
        self.core.persist().expect("dlht invariant: a FileMap has files")
    }
}

/// A [`Map`] kept in files: see [`Map::open`].
pub type FileMap<K, V> = Map<K, V, FileHasher>;
