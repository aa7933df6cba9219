//! An index's file (`index.<G>.dlht`): created zeroed and sparse for a new
//! index, checked when reopened, deleted once its index is replaced.

use super::files::{self, Mapping};
use super::layout::{HeaderCrc, IndexHeader, Stamp, ENDIAN_CHECK, INDEX_MAGIC, LAYOUT_VERSION, PAGE};
use crate::error::Error;
use crate::plant::{planted, Plant};
use crate::sync::unmodelled::AtomicBool;
use crate::sync::Ordering;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, Weak};

/// The rank of a heap among the open files (an index's is its generation).
const HEAP_RANK: u64 = u64::MAX;

/// A transfer of a bin under way (see [`FileSet::transfer_gate`]).
pub type TransferGuard<'a> = RwLockReadGuard<'a, ()>;

/// A persistent map's directory and the files of it that are open, for
/// syncing them all (`fdatasync`, which on Linux also writes the pages
/// dirtied through the shared mappings).
pub struct FileSet {
    dir: PathBuf,
    /// The open files, each with its rank in a sync: a heap first, then
    /// indexes newest first (see [`Self::sync_all`]).
    open: Mutex<Vec<(u64, Weak<File>)>>,
    /// The map file, synced after every other file and the directory: it
    /// names the rest (the current generation, the stamp), so what it names
    /// is on disk before it is.
    root: Mutex<Weak<File>>,
    /// Set once a file was made or deleted since the directory was synced.
    dir_changed: AtomicBool,
    /// Sync mode (`Durability::Sync`): the steps a power loss could tear
    /// apart (a stamp advance, a retired index's deletion) sync in order.
    ordered: AtomicBool,
    /// Synced per call (`Durability::Sync` with a zero interval): the files
    /// are mapped with 4 KiB pages (`files::Pages::Small`).
    small_pages: AtomicBool,
    /// The map's identity and stamp, which every file must name (set once
    /// the map file is checked, and as the stamp advances).
    stamp: Mutex<Stamp>,
    /// Read by each bin transfer, written by each sync (see
    /// [`Self::transfer_gate`]).
    transfers: RwLock<()>,
}

impl FileSet {
    /// The files of `dir`.
    pub fn new(dir: &Path) -> Arc<FileSet> {
        Arc::new(FileSet {
            dir: dir.to_path_buf(),
            open: Mutex::new(Vec::new()),
            root: Mutex::new(Weak::new()),
            dir_changed: AtomicBool::new(false),
            ordered: AtomicBool::new(false),
            small_pages: AtomicBool::new(false),
            stamp: Mutex::default(),
            transfers: RwLock::new(()),
        })
    }

    /// Held while a bin is transferred from one of this map's indexes to
    /// the next: [`Self::sync_all`] waits for the transfers under way and
    /// holds new ones off while it writes the files. A transfer marks the
    /// old bin's slots moved and copies their pairs into the next index;
    /// a sync that wrote the old index's page after a transfer and the
    /// next index's page before it (or not at all: a new index made after
    /// the sync listed its files) left on disk keys in neither index, and
    /// a power loss lost them (finding F7: thousands of keys acknowledged
    /// by `durable()`). The kernel's own writeback, which keeps no order,
    /// can still do the same between syncs (DESIGN).
    pub fn transfer_gate(&self) -> TransferGuard<'_> {
        // A poisoned gate guards nothing (`()`): go on.
        self.transfers.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The map's identity and stamp, as its map file gives them.
    pub fn stamp(&self) -> Stamp {
        *self.stamp.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Note the map file's identity and stamp (at open, and as the stamp
    /// advances).
    pub fn set_stamp(&self, s: Stamp) {
        *self.stamp.lock().unwrap_or_else(|e| e.into_inner()) = s;
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sync `file`, the file of the index of `generation`, with the others
    /// from now on, while it is open.
    pub fn register(&self, file: &Arc<File>, generation: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|(_, w)| w.strong_count() > 0);
        open.push((generation, Arc::downgrade(file)));
    }

    /// Register the map file: synced last (see [`Self::sync_all`]).
    pub fn register_root(&self, file: &Arc<File>) {
        *self.root.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(file);
    }

    /// Sync mode on or off (see the field).
    pub fn set_ordered(&self, on: bool) {
        // Relaxed: set at open, before any thread uses the map.
        self.ordered.store(on, Ordering::Relaxed);
    }

    /// Per-call syncs on or off (see the field).
    pub fn set_small_pages(&self, on: bool) {
        // Relaxed: set at open, before any file is mapped.
        self.small_pages.store(on, Ordering::Relaxed);
    }

    /// True if the map's files are mapped with 4 KiB pages (see the field).
    pub fn small_pages(&self) -> bool {
        // Relaxed: see `set_small_pages`.
        self.small_pages.load(Ordering::Relaxed)
    }

    /// True in sync mode: the steps a power loss could tear apart sync in
    /// order.
    pub fn ordered(&self) -> bool {
        // Relaxed: see `set_ordered`.
        self.ordered.load(Ordering::Relaxed)
    }

    /// Note a file made or deleted: the next [`Self::sync_all`] syncs the
    /// directory too.
    pub fn note_dir_changed(&self) {
        // Relaxed: read by a later sync of this process; the file system
        // orders the change itself.
        self.dir_changed.store(true, Ordering::Relaxed);
    }

    /// Register `file` to be synced before every other: a byte map's heap,
    /// so that a value is on disk before the index entry naming it.
    pub fn register_first(&self, file: &Arc<File>) {
        self.register(file, HEAP_RANK);
    }

    /// Write every open file's dirty pages and wait: a heap first, then the
    /// indexes newest first with no transfer under way (`transfer_gate`),
    /// then the directory, if a file was made or deleted, and the map file
    /// last.
    ///
    /// The map file last: a power loss between two of these syncs leaves
    /// on disk a map file that names only what is already there (an index
    /// file made for a grow, its contents, the heap's blocks). The indexes
    /// newest first, transfers held off: a grow's transfers since the last
    /// sync marked the old index's bins moved and copied their pairs into
    /// the new one; written in that order, a power loss between the two
    /// leaves the copies on disk and the old bins untransferred, which the
    /// open's resumed grow transfers again (into target bins it first
    /// empties: `Index::empties_targets`). The other order, or a transfer
    /// between the two, left the marks without the copies: the keys in
    /// neither index (finding F7). The price: transfers wait while the
    /// indexes are written (a grow under `durable()` back to back ran at
    /// about half speed).
    pub fn sync_all(&self) -> Result<(), Error> {
        let sync = |f: &File| {
            f.sync_data().map_err(files::io("syncing a map file"))?;
            super::mirror::file_synced(f);
            Ok::<(), Error>(())
        };
        let listed = || -> Vec<(u64, Arc<File>)> {
            let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            open.iter().filter_map(|(g, w)| Some((*g, w.upgrade()?))).collect()
        };
        // The heap, which transfers do not touch.
        for (_, f) in listed().iter().filter(|(g, _)| *g == HEAP_RANK) {
            sync(f)?;
        }
        {
            // Listed under the gate: an index made since, into which no
            // transfer can run until the gate opens, is in the list.
            let _no_transfers = self.transfers.write().unwrap_or_else(|e| e.into_inner());
            let mut indexes: Vec<_> = listed().into_iter().filter(|(g, _)| *g != HEAP_RANK).collect();
            indexes.sort_by_key(|(g, _)| core::cmp::Reverse(*g));
            // Planted bug (scripts/planted-bugs.sh): the indexes oldest first.
            if planted(Plant::SyncOldestFirst) {
                indexes.reverse();
            }
            for (_, f) in &indexes {
                sync(f)?;
            }
        }
        // Relaxed: see `note_dir_changed`.
        if self.dir_changed.swap(false, Ordering::Relaxed) {
            if let Err(e) = files::sync_dir(&self.dir) {
                // Asked again by the next sync (which a failed one's
                // callers never count on: the group commit's failure sticks).
                self.dir_changed.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        if let Some(root) = self.root.lock().unwrap_or_else(|e| e.into_inner()).upgrade() {
            sync(&root)?;
        }
        Ok(())
    }
}

/// The header of an index's file, and what deletes the file once the index
/// is no longer the map's.
pub struct IndexFile {
    header: Mapping,
    /// Kept open for syncing (see [`FileSet`]).
    file: Arc<File>,
    set: Arc<FileSet>,
    generation: u64,
    /// Set when a newer index replaced this one: its file goes with it.
    retired: AtomicBool,
    /// Set once the file was deleted ahead of the index ([`Self::remove_now`]).
    removed: AtomicBool,
}

impl IndexFile {
    fn of(header: Mapping, file: &Arc<File>, set: &Arc<FileSet>, generation: u64) -> IndexFile {
        IndexFile {
            header,
            file: file.clone(),
            set: set.clone(),
            generation,
            retired: AtomicBool::new(false),
            removed: AtomicBool::new(false),
        }
    }

    /// Create the file of a new, empty index of `bins` bins and `links`
    /// link buckets in `dir`, replacing a leftover of the same name. The
    /// file's header says `complete` only once it is sized, so a crash
    /// half-way leaves a file the next open deletes.
    pub fn create(
        set: &Arc<FileSet>,
        generation: u64,
        bins: usize,
        links: usize,
    ) -> Result<(IndexFile, Arc<File>), Error> {
        let bytes = IndexHeader::file_bytes(bins, links).ok_or(Error::CapacityOverflow)?;
        let path = set.dir().join(files::index_file_name(generation));
        let file = Arc::new(files::create_zeroed(&path, bytes)?);
        set.note_dir_changed();
        let header = Mapping::new(&file, 0, PAGE)?;
        set.register(&file, generation);
        let f = IndexFile::of(header, &file, set, generation);
        // SAFETY: the mapping is a zeroed page, at least as large and as
        // aligned as the header (a page), whose fields are all valid zero;
        // no other thread or process can see the new file yet (the
        // directory is locked).
        let h = unsafe { &mut *(f.header.ptr() as *mut IndexHeader) };
        h.magic = INDEX_MAGIC;
        h.layout_version = LAYOUT_VERSION;
        h.endian = ENDIAN_CHECK;
        h.generation = generation;
        h.bins = bins as u64;
        h.links = links as u64;
        let stamp = set.stamp();
        h.map_id = stamp.map_id;
        h.header_crc = h.crc();
        // Relaxed: published by the Release below. A file made while the
        // stamp advances takes the new one (both are accepted until then).
        h.stamp.store(stamp.stamping, Ordering::Relaxed);
        // Release: a header read after the flag (by a reopen, in another
        // process: the page cache orders nothing, but a crash stops every
        // store after this one) has every field above.
        h.complete.store(1, Ordering::Release);
        Ok((f, file))
    }

    /// Open the file of the index of `generation` in `dir` and check its
    /// header: its bins and link buckets.
    pub fn open(
        set: &Arc<FileSet>,
        generation: u64,
        bin_range: core::ops::RangeInclusive<usize>,
    ) -> Result<(IndexFile, Arc<File>, usize, usize), Error> {
        let path = set.dir().join(files::index_file_name(generation));
        let (file, len) = files::open_rw(&path, "opening an index file")?;
        if len < PAGE as u64 {
            return Err(Error::Corrupt { what: "an index file is shorter than its header (truncated)" });
        }
        let file = Arc::new(file);
        let header = Mapping::new(&file, 0, PAGE)?;
        let f = IndexFile::of(header, &file, set, generation);
        if f.header().complete.load(Ordering::Acquire) != 1 {
            return Err(Error::Corrupt { what: "an index file was never completed" });
        }
        let (bins, links) = f.header().check(generation, &set.stamp(), len, bin_range)?;
        set.register(&file, generation);
        Ok((f, file, bins, links))
    }

    /// True if the file of the index of `generation` is one a crash left
    /// half made — shorter than its header, or never marked complete — so
    /// not an index yet (what [`open`](Self::open) refuses as such).
    pub fn half_made(set: &FileSet, generation: u64) -> Result<bool, Error> {
        let path = set.dir().join(files::index_file_name(generation));
        let (file, len) = files::open_rw(&path, "opening an index file")?;
        if len < PAGE as u64 {
            return Ok(true);
        }
        let header = Mapping::new(&file, 0, PAGE)?;
        // SAFETY: as in `header`: one page, any bytes a valid header.
        let h = unsafe { &*(header.ptr() as *const IndexHeader) };
        // Acquire: as in `open`.
        Ok(h.complete.load(Ordering::Acquire) != 1)
    }

    /// The file's header.
    pub fn header(&self) -> &IndexHeader {
        // SAFETY: the mapping is one page, page-aligned, and every field of
        // the header is an integer or an atomic: any bytes are a valid
        // header (a reopen checks the values before trusting them).
        unsafe { &*(self.header.ptr() as *const IndexHeader) }
    }

    /// Give the bins of this index's file (`bins` of them) their disk
    /// blocks now (see [`files::preallocate`]): false where the file system
    /// cannot; an error if it is full.
    pub fn preallocate_bins(&self, bins: usize) -> Result<bool, Error> {
        let len = bins.checked_mul(IndexHeader::BUCKET_BYTES).ok_or(Error::CapacityOverflow)?;
        files::preallocate(&self.file, IndexHeader::bins_offset(), len, "preallocating a grown index's file")
    }

    /// The map's files.
    pub fn set(&self) -> &Arc<FileSet> {
        &self.set
    }

    /// Delete the file now, and not again when the index goes (a file of
    /// the same name may be made meanwhile).
    pub fn remove_now(&self) {
        self.before_removal();
        files::remove(&self.set.dir().join(files::index_file_name(self.generation)));
        // Relaxed: read by the drop, on this thread or after the index's
        // reclamation.
        self.removed.store(true, Ordering::Relaxed);
    }

    /// In sync mode, put the map's switch away from this file on disk before
    /// the file goes (a power loss must not find the map file naming a
    /// deleted index, nor the new index unsynced). Best effort: a failed
    /// sync is reported by the next `durable`.
    fn before_removal(&self) {
        if self.set.ordered() {
            let _ = self.set.sync_all();
        }
        self.set.note_dir_changed();
    }

    /// Delete the file when the index goes: a newer index replaced it.
    pub fn retire(&self) {
        // Relaxed: read by the drop, after the index's reclamation.
        self.retired.store(true, Ordering::Relaxed);
    }
}

impl Drop for IndexFile {
    fn drop(&mut self) {
        if self.retired.load(Ordering::Relaxed) && !self.removed.load(Ordering::Relaxed) {
            // Best effort: a file left behind is deleted by the next open,
            // which keeps only the generations the map file names.
            self.before_removal();
            files::remove(&self.set.dir().join(files::index_file_name(self.generation)));
        }
    }
}
