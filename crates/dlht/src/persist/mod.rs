//! Persistent maps: a [`Map`](crate::Map) whose index lives in files, so
//! that it comes back — warm, and after `kill -9` with every write whose
//! call returned — when it is opened again (see `docs/DESIGN.md`,
//! "Persistent maps").
//!
//! The bins and link buckets are shared mappings of index files, so every
//! store of the protocols is a store to the page cache, which outlives the
//! process; a crash stops every thread between two instructions, leaving
//! each bin in one of the states its protocols pass through. What a
//! reopen must finish or undo is only what threads were doing when they
//! died, and each thread says that in its cell of the map file before it
//! touches a bin (`layout::ThreadCell`): recovery visits those bins only,
//! so it costs the same for a map of a thousand keys and of a billion.
//!
//! Pointers: none in the files. Bins name their link buckets by number in
//! the index's own link array, and indexes are found by generation (their
//! file names), so the files map at any address.

// The loom build models the protocols, not files: it keeps only what the
// protocols call (the cell and crash-point hooks, both inert there).
#![cfg_attr(loom, allow(dead_code, unused_imports))]

pub mod cell;
pub mod crash;
pub mod files;
#[cfg(not(loom))]
pub mod heap;
#[cfg(not(loom))]
pub mod index_file;
pub mod layout;
pub mod mirror;
#[cfg(not(loom))]
mod recover;
#[cfg(not(loom))]
pub mod snapshot_log;

#[cfg(not(loom))]
pub use imp::*;

#[cfg(not(loom))]
mod imp {
    use super::files::{self, DirLock, Mapping};
    use super::index_file::FileSet;
    use super::layout::{
        HeaderCrc, IndexHeader, MapHeader, MapKind, ShadowCell, Stamp, ThreadCell, CLEAN, ENDIAN_CHECK,
        HASH_CHECK_WORDS, LAYOUT_VERSION, MAP_FILE_BYTES, MAP_MAGIC, OPEN, PAGE, SHADOW_CELLS,
        SHADOW_CELLS_OFFSET, THREAD_CELLS,
    };
    use crate::error::Error;
    use crate::plant::{planted, Plant};
    use crate::raw::index::Index;
    use crate::raw::markers::Markers;
    use crate::sync::unmodelled::{AtomicBool, AtomicU64, AtomicUsize};
    use crate::sync::Ordering;
    use std::path::Path;
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::{Duration, Instant};

    /// What a persistent map guarantees about writes that returned.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    #[non_exhaustive]
    pub enum Durability {
        /// Every write whose call returned survives a crash of the process
        /// (SIGKILL, an abort, the OOM killer): the page cache holds it.
        /// A crash of the machine may lose writes the kernel has not yet
        /// written back (within about 30 s by default); call
        /// [`Map::durable`](crate::Map::durable) (or `sync`) to wait for that.
        #[default]
        Process,
        /// As `Process`, and a background thread writes the map's files to
        /// disk (`fdatasync`) every `every` — a group commit: a write
        /// survives a crash of the machine once the sync after it has
        /// finished, which [`Map::durable`](crate::Map::durable) waits for
        /// (every caller waiting shares one sync). `every` zero: no periodic
        /// sync, one per `durable` call (callers waiting together share it),
        /// for syncing per batch.
        Sync {
            /// The interval between group syncs.
            every: Duration,
        },
    }

    /// Sync mode's background syncer (see [`Durability::Sync`]).
    struct GroupCommit {
        shared: Arc<(Mutex<CommitState>, Condvar)>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    #[derive(Default)]
    struct CommitState {
        /// Syncs asked for (by `durable` callers), and finished: a sync that
        /// starts when `asked` is n covers every write returned before the
        /// n-th ask.
        asked: u64,
        done: u64,
        /// The first sync's failure: reported to every caller from then on.
        /// Sticky, as PostgreSQL learned (fsyncgate): after a failed
        /// `fdatasync` the kernel may have dropped the dirty pages it could
        /// not write, so a later sync that succeeds proves nothing about
        /// them (and a waiter must never read a later sync's success for
        /// its own failed one).
        failed: Option<Error>,
        stop: bool,
    }

    impl GroupCommit {
        fn start(files: Arc<FileSet>, every: Duration) -> GroupCommit {
            let shared = Arc::new((Mutex::new(CommitState::default()), Condvar::new()));
            let s = shared.clone();
            let thread = std::thread::Builder::new()
                .name("dlht-sync".into())
                .spawn(move || {
                    let (lock, cv) = &*s;
                    let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
                    let mut tick = Instant::now() + every;
                    loop {
                        if st.stop {
                            return;
                        }
                        if every.is_zero() {
                            // Per batch: a sync when asked, for all askers.
                            if st.asked == st.done {
                                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
                                continue;
                            }
                        } else {
                            // Periodic: askers wait for the next tick.
                            let now = Instant::now();
                            if now < tick {
                                st = cv.wait_timeout(st, tick - now).unwrap_or_else(|e| e.into_inner()).0;
                                continue;
                            }
                            tick = now + every;
                        }
                        let covers = st.asked;
                        drop(st);
                        let r = files.sync_all();
                        st = lock.lock().unwrap_or_else(|e| e.into_inner());
                        st.done = st.done.max(covers);
                        st.failed = st.failed.or(r.err());
                        cv.notify_all();
                    }
                })
                .ok();
            GroupCommit { shared, thread }
        }

        fn wait(&self) -> Result<(), Error> {
            let (lock, cv) = &*self.shared;
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            if self.thread.is_none() {
                return Err(Error::Io { what: "starting the sync thread", kind: std::io::ErrorKind::Other });
            }
            st.asked += 1;
            let mine = st.asked;
            cv.notify_all();
            while st.done < mine {
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            match st.failed {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
    }

    impl Drop for GroupCommit {
        fn drop(&mut self) {
            let (lock, cv) = &*self.shared;
            lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
            cv.notify_all();
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    /// How to open a persistent map.
    #[derive(Clone, Debug)]
    pub struct OpenOptions {
        pub(crate) capacity: usize,
        pub(crate) durability: Durability,
        pub(crate) heap_bytes: u64,
    }

    impl Default for OpenOptions {
        fn default() -> Self {
            OpenOptions {
                capacity: 0,
                durability: Durability::Process,
                heap_bytes: super::heap::DEFAULT_HEAP_BYTES,
            }
        }
    }

    impl OpenOptions {
        /// Options for a map created with room for a few keys, in
        /// [`Durability::Process`] mode.
        pub fn new() -> Self {
            Self::default()
        }

        /// Size a map that does not exist yet for `keys` keys (an existing
        /// map keeps its size).
        pub fn capacity(mut self, keys: usize) -> Self {
            self.capacity = keys;
            self
        }

        /// The durability mode (see [`Durability`]).
        pub fn durability(mut self, d: Durability) -> Self {
            self.durability = d;
            self
        }

        /// The most bytes a [`ByteMap`](crate::ByteMap) made anew may keep
        /// in its value heap (default 64 GiB; an existing map keeps its
        /// size). The heap file has this length from the start, sparse:
        /// disk is taken only as values are stored.
        pub fn heap_bytes(mut self, bytes: u64) -> Self {
            self.heap_bytes = bytes;
            self
        }
    }

    /// What opening a persistent map found and did.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Recovery {
        /// False if the map was closed cleanly (or just created).
        pub crashed: bool,
        /// Bins recovery visited (those threads were working on).
        pub bins_visited: usize,
        /// Claimed, pending, removed-but-not-freed or shadow slots freed.
        pub slots_freed: usize,
        /// Transfers (a grow's bins, a shrink's targets) dead threads had
        /// under way that recovery resumed; one already finished counts too.
        pub transfers_finished: usize,
        /// Removes that had taken effect (their keys killed) but were not
        /// yet counted in the length when their threads died: recovery
        /// freed their slots and counted them, so [`len`](crate::Map::len)
        /// is exact for them.
        pub removes_counted: usize,
        /// Inserts (and shadow commits) that had counted themselves in the
        /// length but not taken effect when their threads died: recovery
        /// freed their slots and took their counts back, so
        /// [`len`](crate::Map::len) is exact for them too.
        pub inserts_taken_back: usize,
        /// Of those counted or taken back, the writes judged in an index a
        /// resize had retired while their threads were working in it (its
        /// file, kept by their pins, read once more and then deleted).
        pub counts_judged_in_retired_indexes: usize,
        /// A resize was under way, and goes on now.
        pub resize_resumed: bool,
        /// That resize is a shrink.
        pub shrink_resumed: bool,
        /// Bins a snapshot under way had frozen, thawed.
        pub snapshot_thawed: usize,
        /// Time from the start of `open` to a map ready to serve.
        pub open_time: Duration,
    }

    /// A persistent map's directory, open: its lock, its map file's mapping.
    pub struct MapFile {
        dir: Arc<FileSet>,
        map: Mapping,
        /// The map file, open for syncing.
        root_file: Arc<std::fs::File>,
        /// Sync mode's group commit (None in process mode).
        commit: Option<GroupCommit>,
        /// The free shadow cells.
        free_shadows: Mutex<Vec<usize>>,
        pub(crate) next_cell: AtomicUsize,
        recovery: Recovery,
        /// The thread finishing a grow the open resumed, while it runs.
        pub(crate) finisher: Mutex<Option<Finisher>>,
        /// True from the finisher's start until it is done.
        pub(crate) finishing: AtomicBool,
        /// The generation of an index whose grow the finisher completed,
        /// left to the first thread with the map in hand to publish in
        /// memory (`resize::help`); 0 when none.
        pub(crate) publication: AtomicU64,
        /// Keys the finisher's transfers copied (the occupancy statistic of
        /// the publication that follows).
        pub(crate) background_copied: AtomicUsize,
        _lock: DirLock,
    }

    /// A background finisher: its stop flag and thread.
    pub(crate) struct Finisher {
        pub(crate) stop: Arc<AtomicBool>,
        pub(crate) thread: std::thread::JoinHandle<()>,
    }

    /// An index of the map, for the finisher's thread: see
    /// `MapFile::finish_resumed_grow` (`resize::finisher`) for why it stays allocated.
    pub(crate) struct IndexPtr(pub(crate) *const Index);
    // SAFETY: an index is Send + Sync (atomics and mappings); the pointer is
    // only read while the index is alive (see `finish_resumed_grow`).
    unsafe impl Send for IndexPtr {}

    /// A map file opened (or made) and checked, before its indexes are.
    pub struct Opened {
        /// The directory, locked, and its map file.
        pub file: MapFile,
        /// The hasher's seed and secrets.
        pub seed: u64,
        /// See `seed`.
        pub secrets: [u64; 7],
    }

    /// The current index, and the one a grow was filling, of a map opened.
    pub struct Indexes {
        /// The current index.
        pub current: Index,
        /// The index a resize under way is filling, attached to `current` by
        /// the caller (the resize then goes on as any other).
        pub next: Option<Index>,
        /// A shrink's fallback (see `resize`), if a shrink is under way:
        /// boxed before recovery ran, which may have attached it as the
        /// smaller index's next (`Index::attach_fallback`), by address.
        pub fallback: Option<Box<Index>>,
        /// Keys in the map (the cells' shares).
        pub len: u64,
    }

    impl MapFile {
        /// Lock `dir` (made if absent) and open its map file, or make one
        /// with fresh hasher keys if there is none. Nothing in the directory
        /// is changed unless the file checks out (or is new).
        /// A new map's first index has `bins` bins.
        pub fn open(
            dir: &Path,
            kind: MapKind,
            key_bytes: usize,
            value_bytes: usize,
            bins: usize,
            heap_bytes: u64,
        ) -> Result<Opened, Error> {
            let started = Instant::now();
            let lock = DirLock::take(dir)?;
            let dir = FileSet::new(dir);
            let path = dir.dir().join(files::MAP_FILE);
            let fresh = !path.exists();
            if fresh {
                Self::make(&dir, kind, key_bytes, value_bytes, bins, heap_bytes)?;
            }
            let (file, len) = files::open_rw(&path, "opening the map file")?;
            if len < MAP_FILE_BYTES as u64 {
                return Err(Error::Corrupt { what: "the map file is shorter than its layout (truncated)" });
            }
            let map = Mapping::new(&file, 0, MAP_FILE_BYTES)?;
            let file = Arc::new(file);
            dir.register_root(&file);
            let mf = MapFile {
                dir,
                map,
                root_file: file,
                commit: None,
                free_shadows: Mutex::new((0..SHADOW_CELLS).rev().collect()),
                next_cell: AtomicUsize::new(0),
                recovery: Recovery {
                    crashed: false,
                    bins_visited: 0,
                    slots_freed: 0,
                    transfers_finished: 0,
                    removes_counted: 0,
                    inserts_taken_back: 0,
                    counts_judged_in_retired_indexes: 0,
                    resize_resumed: false,
                    shrink_resumed: false,
                    snapshot_thawed: 0,
                    open_time: started.elapsed(),
                },
                finisher: Mutex::new(None),
                finishing: AtomicBool::new(false),
                publication: AtomicU64::new(0),
                background_copied: AtomicUsize::new(0),
                _lock: lock,
            };
            let h = mf.header();
            h.check(kind, key_bytes, value_bytes)?;
            mf.dir.set_stamp(h.stamp());
            if kind == MapKind::Bytes {
                // Before the index is opened or recovered: a map whose heap
                // is refused is left as it was.
                super::heap::Heap::check_file(mf.dir.dir(), &h.stamp())?;
            }
            super::snapshot_log::check(&mf.dir)?;
            Ok(Opened { seed: h.seed, secrets: h.secrets, file: mf })
        }

        /// Write a new map file and its first index: the map file into a
        /// temporary name, renamed into place once whole and once its index
        /// is (a crash before leaves no map file, and the next open starts
        /// afresh, deleting what a half-made map left).
        fn make(
            dir: &Arc<FileSet>,
            kind: MapKind,
            key_bytes: usize,
            value_bytes: usize,
            bins: usize,
            heap_bytes: u64,
        ) -> Result<(), Error> {
            for old in files::index_generations(dir.dir())? {
                files::remove(&dir.dir().join(files::index_file_name(old)));
            }
            files::remove(&dir.dir().join(super::heap::HEAP_FILE));
            let keys = super::hasher::fresh_keys();
            let map_id = super::hasher::fresh_keys().0;
            // Every file made from here names the map (stamp 0).
            dir.set_stamp(Stamp { map_id, stamp: 0, stamping: 0 });
            if kind == MapKind::Bytes {
                super::heap::Heap::create(dir.dir(), heap_bytes, map_id)?;
            }
            let tmp = dir.dir().join("map.dlht.tmp");
            let file = files::create_zeroed(&tmp, MAP_FILE_BYTES)?;
            {
                let m = Mapping::new(&file, 0, PAGE)?;
                // SAFETY: a fresh zeroed page of our own file; every field
                // of the header is valid as zero.
                let h = unsafe { &mut *(m.ptr() as *mut MapHeader) };
                h.magic = MAP_MAGIC;
                h.layout_version = LAYOUT_VERSION;
                h.endian = ENDIAN_CHECK;
                h.kind = kind as u32;
                h.key_bytes = key_bytes as u32;
                h.value_bytes = value_bytes as u32;
                h.seed = keys.0;
                h.secrets = keys.1;
                let hasher = super::hasher::FileHasher::new(h.seed, h.secrets);
                let hash = |w| core::hash::BuildHasher::hash_one(&hasher, w);
                h.hash_check = HASH_CHECK_WORDS.map(hash);
                h.map_id = map_id;
                h.header_crc = h.crc();
                let first = Index::create_in(dir, bins, Markers::for_hash(hash), 1)?;
                first.sync()?;
                h.generation.store(1, Ordering::Relaxed);
                h.state.store(CLEAN, Ordering::Relaxed);
                m.sync()?;
            }
            std::fs::rename(&tmp, dir.dir().join(files::MAP_FILE))
                .map_err(files::io("naming the new map file"))?;
            files::sync_dir(dir.dir())
        }

        /// The map file's header.
        pub fn header(&self) -> &MapHeader {
            // SAFETY: the mapping starts with a page the header fits in;
            // every field is an integer or an atomic, valid for any bytes
            // (`MapHeader::check` judges the values).
            unsafe { &*(self.map.ptr() as *const MapHeader) }
        }

        /// The threads' cells.
        pub fn cells(&self) -> &[ThreadCell] {
            // SAFETY: the mapping holds THREAD_CELLS cells after the header
            // page (MAP_FILE_BYTES), page-aligned; cells are atomics only.
            unsafe {
                core::slice::from_raw_parts(self.map.ptr().add(PAGE) as *const ThreadCell, THREAD_CELLS)
            }
        }

        /// The shadow cells.
        pub fn shadow_cells(&self) -> &[ShadowCell] {
            // SAFETY: the mapping holds SHADOW_CELLS cells at their offset
            // (MAP_FILE_BYTES), 16-aligned; cells are atomics only.
            unsafe {
                core::slice::from_raw_parts(
                    self.map.ptr().add(SHADOW_CELLS_OFFSET) as *const ShadowCell,
                    SHADOW_CELLS,
                )
            }
        }

        /// Record a shadow insert of the key with word `key` and hash `hash`
        /// before it claims its slot: the cell's number, for
        /// [`release_shadow`](Self::release_shadow).
        pub fn hold_shadow(&self, key: u64, hash: u64) -> Result<usize, Error> {
            let i = self.free_shadows.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let i = i.ok_or(Error::ShadowLimit { limit: SHADOW_CELLS })?;
            let c = &self.shadow_cells()[i];
            // Relaxed: the shadow insert's CASes that follow are releases,
            // and a crash keeps every store before them.
            c.key.store(key, Ordering::Relaxed);
            c.hash.store(ShadowCell::tag(hash), Ordering::Relaxed);
            Ok(i)
        }

        /// The shadow insert of cell `i` has committed or aborted.
        pub fn release_shadow(&self, i: usize) {
            // Relaxed: the commit's or abort's CAS came first.
            self.shadow_cells()[i].hash.store(0, Ordering::Relaxed);
            self.free_shadows.lock().unwrap_or_else(|e| e.into_inner()).push(i);
        }

        /// The cell of the thread whose record keeps its number in `slot`
        /// (0: none yet; a number is handed out once per record, and records
        /// outlive their threads, so at most as many cells are used as
        /// threads ran at once).
        #[inline]
        pub fn cell(&self, slot: &AtomicUsize) -> &ThreadCell {
            // Relaxed: only the record's owner thread reads or writes it.
            let n = slot.load(Ordering::Relaxed);
            if n != 0 {
                return &self.cells()[n - 1];
            }
            self.new_cell(slot)
        }

        #[cold]
        fn new_cell(&self, slot: &AtomicUsize) -> &ThreadCell {
            let n = self.next_cell.fetch_add(1, Ordering::Relaxed); // distinct numbers
            assert!(
                n < THREAD_CELLS,
                "dlht: more than {THREAD_CELLS} threads have written one persistent map at once"
            );
            slot.store(n + 1, Ordering::Relaxed);
            &self.cells()[n]
        }

        /// Open (or make) the map's indexes: the current one, and a grow's
        /// next one if a grow was under way; after a crash, finish or undo
        /// what the dead threads were doing in them, first.
        pub fn open_indexes(&mut self, hash: &dyn Fn(u64) -> u64) -> Result<Indexes, Error> {
            // Relaxed accesses to the files below: no other thread of this
            // process runs in the map yet, the directory lock keeps other
            // processes out, and a crash keeps stores in program order.
            let this = &*self;
            let h = this.header();
            // Recovery sees what the last open's threads left by that open's
            // markers; this open's operations use markers of their own.
            let markers = Markers::for_session(hash, h.marker_seed.load(Ordering::Relaxed));
            let g = h.generation.load(Ordering::Relaxed);
            let gens = files::index_generations(this.dir.dir())?;
            if !gens.contains(&g) {
                return Err(Error::Corrupt { what: "the current index file is missing" });
            }
            let mut current = Index::open_in(&this.dir, markers, g)?;
            // An index file a crash left half made is not one: the resize
            // that made it had not attached it (its keys are all still in
            // the older indexes).
            let open = |gen: u64| -> Result<Option<Index>, Error> {
                if !gens.contains(&gen) {
                    return Ok(None);
                }
                if super::index_file::IndexFile::half_made(&this.dir, gen)? {
                    return Ok(None);
                }
                Index::open_in(&this.dir, markers, gen).map(Some)
            };
            // A grow under way: a larger next index. A shrink: a smaller one
            // and its fallback, as large as the current one (made before the
            // shrink was attached: without it, it never began).
            // (The fallback is boxed at once: recovery may attach it to the
            // smaller index by its address, which must stay the one the map
            // then owns. A local moved into the map later left the smaller
            // index pointing into this frame.)
            let (mut next, mut fallback) = match open(g + 1)? {
                Some(n) if n.bins() > current.bins() => (Some(n), None),
                Some(n) if n.bins() < current.bins() => match open(g + 2)? {
                    Some(f) if f.bins() == current.bins() => (Some(n), Some(Box::new(f))),
                    _ => (None, None),
                },
                _ => (None, None),
            };
            // The generations the map keeps; the others' files go after
            // recovery.
            let keep = [Some(&current), next.as_ref(), fallback.as_deref()].map(|i| i.map(|i| i.generation));
            // Everything checks out: from here the directory is changed.
            let crashed = h.state.load(Ordering::Relaxed) == OPEN;
            let mut report = super::recover::Report::default();
            let mut thawed = 0;
            if crashed {
                // A snapshot first: it held the index (no resize), and the
                // bins it thaws may hold what dead operations left.
                thawed = super::snapshot_log::recover(&this.dir, &current);
                // Indexes a resize retired while a dead thread's write was
                // in one, counted and unsettled: the pin it held kept the
                // file (deleted below), whose slot tells whether the write
                // took effect. (One that fails to open judges nothing.)
                let retired: Vec<Index> = gens
                    .iter()
                    .filter(|&&old| {
                        !keep.contains(&Some(old)) && super::recover::a_count_names(this.cells(), old)
                    })
                    .filter_map(|&old| open(old).ok().flatten())
                    .collect();
                report = super::recover::run(
                    this.cells(),
                    this.shadow_cells(),
                    super::recover::Indexes {
                        current: &current,
                        next: next.as_ref(),
                        fallback: fallback.as_deref(),
                        retired: &retired,
                    },
                    hash,
                );
                h.recoveries.fetch_add(1, Ordering::Relaxed);
            }
            if fallback.is_some() {
                // A resumed shrink: its chunks must not wait on a bin that
                // only a damaged file left in transfer. (A resumed grow's
                // walk is its background finisher's first step, off the
                // open: `resize::finisher`.)
                current.repair_transfer_states(false);
            }
            for c in this.cells() {
                c.intent.store(0, Ordering::Relaxed);
                c.moving_slot.store(0, Ordering::Relaxed);
                c.counting.store(0, Ordering::Relaxed);
            }
            for c in this.shadow_cells() {
                c.hash.store(0, Ordering::Relaxed);
            }
            for old in files::index_generations(this.dir.dir())? {
                if !keep.contains(&Some(old)) {
                    files::remove(&this.dir.dir().join(files::index_file_name(old)));
                }
            }
            // A remove that killed its key and died before counting it took
            // effect; an insert that counted itself and died before
            // publishing did not (recovery freed both slots): the counts go
            // in the first cell's share (the shares' sum is the length).
            // Relaxed: as above, no other thread runs in the map yet. (A
            // crash between recovery's free and this store leaves the
            // length off by these, as before recovery counted them.)
            let uncounted = report.removes_uncounted + report.inserts_taken_back;
            if uncounted > 0 {
                let c = &this.cells()[0].len_share;
                c.store(c.load(Ordering::Relaxed).wrapping_sub(uncounted as u64), Ordering::Relaxed);
            }
            let len =
                this.cells().iter().fold(0u64, |s, c| s.wrapping_add(c.len_share.load(Ordering::Relaxed)));
            // This open's markers: the seed goes in the map file before
            // any operation runs (the stamp's advance syncs its page in
            // every mode), so that a recovery after this open sees the
            // markers its threads wrote.
            let seed = loop {
                // Planted bug (scripts/planted-bugs.sh): keep the last
                // open's markers, whose leftovers damage can revive.
                if planted(Plant::MarkersOutliveTheirOpen) {
                    break h.marker_seed.load(Ordering::Relaxed);
                }
                let s = super::hasher::fresh_keys().0;
                if s != 0 && s != h.marker_seed.load(Ordering::Relaxed) {
                    break s;
                }
            };
            h.marker_seed.store(seed, Ordering::Relaxed);
            // Stray pairs (`Index::may_hold_strays`): after a crash, in every
            // index recovery found; in a file from before the field, in any
            // index of a map that ever recovered. Stored, as the seed, before
            // the stamp's advance syncs the page.
            let newest = [Some(&current), next.as_ref(), fallback.as_deref()]
                .into_iter()
                .flatten()
                .map(|i| i.generation)
                .max()
                .unwrap_or(0);
            let mut strays = h.stray_generation.load(Ordering::Relaxed);
            if crashed || strays == 0 && h.recoveries.load(Ordering::Relaxed) > 0 {
                strays = strays.max(newest);
                h.stray_generation.store(strays, Ordering::Relaxed);
            }
            let session = Markers::for_session(hash, seed);
            current.markers = session;
            current.set_may_hold_strays(current.generation <= strays);
            for idx in [next.as_mut(), fallback.as_deref_mut()].into_iter().flatten() {
                idx.markers = session;
                idx.set_may_hold_strays(idx.generation <= strays);
            }
            this.advance_stamp()?;
            h.opens.fetch_add(1, Ordering::Relaxed);
            h.state.store(OPEN, Ordering::Relaxed);
            let r = &mut self.recovery;
            r.crashed = crashed;
            r.resize_resumed = next.is_some();
            r.shrink_resumed = fallback.is_some();
            r.snapshot_thawed = thawed;
            r.bins_visited = report.bins_visited;
            r.slots_freed = report.slots_freed;
            r.transfers_finished = report.transfers_finished;
            r.removes_counted = report.removes_uncounted;
            r.inserts_taken_back = report.inserts_taken_back;
            r.counts_judged_in_retired_indexes = report.judged_in_retired;
            Ok(Indexes { current, next, fallback, len: (len as i64).max(0) as u64 })
        }

        /// Advance the map's stamp (at open and at a clean close): every
        /// other file of the map takes the new one before the map file does
        /// (see [`Stamp`]), so a copy of any of them from before is refused.
        fn advance_stamp(&self) -> Result<(), Error> {
            // Relaxed: no other thread of this process runs in the map (an
            // open, or a close with no operation under way), the directory
            // lock keeps other processes out, and a crash keeps stores in
            // program order on the page cache.
            // A power loss keeps no order of its own, so in every mode each
            // step's header page is on disk before the next step begins (a
            // ranged sync of one page each, a few in all): the map file's
            // stamping first, so that any file found with the new stamp is
            // accepted. (Left to the page cache in process mode, a power
            // loss after a later sync-mode open's first sync left files
            // stamped apart, and the map refused: finding F1.)
            let h = self.header();
            let sync_header = || self.map.sync_prefix(PAGE);
            let old = h.stamp();
            let new = Stamp { stamping: old.stamp.wrapping_add(1), ..old };
            let stamped = self.stamped_files()?;
            if self.dir.ordered() {
                // Sync mode: first every file as the page cache has it (an
                // earlier process-mode open or a killed process may have
                // left writes there only), the map file last, as a group
                // commit does.
                for path in &stamped {
                    super::sync_path(path)?;
                }
                self.root_file.sync_data().map_err(files::io("syncing the map file"))?;
                super::mirror::file_synced(&self.root_file);
            }
            h.stamping.store(new.stamping, Ordering::Relaxed);
            sync_header()?;
            self.dir.set_stamp(new);
            for path in &stamped {
                let offset = if path.ends_with(super::heap::HEAP_FILE) {
                    super::heap::HeapHeader::STAMP_OFFSET
                } else {
                    core::mem::offset_of!(IndexHeader, stamp)
                };
                super::stamp_file(path, offset, new.stamping)?;
            }
            h.stamp.store(new.stamping, Ordering::Relaxed);
            sync_header()?;
            self.dir.set_stamp(Stamp { stamp: new.stamping, ..new });
            Ok(())
        }

        /// The files that carry the map file's stamp: every index file,
        /// and a byte map's heap.
        fn stamped_files(&self) -> Result<Vec<std::path::PathBuf>, Error> {
            let dir = self.dir.dir();
            let mut paths: Vec<_> = files::index_generations(dir)?
                .into_iter()
                .map(|g| dir.join(files::index_file_name(g)))
                .collect();
            if MapKind::Bytes as u32 == self.header().kind {
                paths.push(dir.join(super::heap::HEAP_FILE));
            }
            Ok(paths)
        }

        /// Note the open finished (for [`Recovery::open_time`]).
        pub fn opened(&mut self, started: Instant) {
            self.recovery.open_time = started.elapsed();
        }

        /// What the open found and did.
        pub fn recovery(&self) -> Recovery {
            self.recovery
        }

        /// The index of `generation` is now the map's. In sync mode its
        /// file is synced first: a group sync that took its list of files
        /// before the index was made would otherwise sync the map file, and
        /// with it this generation, without the index's bins, and a power
        /// loss then left the map naming an empty index (every key gone,
        /// seen once in 50 LazyFS rounds). A sync that fails here is left
        /// to the next group sync to report (it syncs the file too).
        pub fn set_generation(&self, generation: u64) {
            if self.dir.ordered() {
                let path = self.dir.dir().join(files::index_file_name(generation));
                let _ = super::sync_path(&path);
            }
            // Relaxed: the page cache keeps it; the old index's file is
            // deleted only after this (its bins are all DoneTransfer, so a
            // crash before this store finds a grow with nothing left to do).
            self.header().generation.store(generation, Ordering::Relaxed);
        }

        /// The map's files.
        pub fn files(&self) -> &Arc<FileSet> {
            &self.dir
        }

        /// Write every dirty page of the map's files to disk, and wait.
        pub fn sync(&self) -> Result<(), Error> {
            self.dir.sync_all()
        }

        /// Note the durability mode before the indexes are opened: in sync
        /// mode the open's stamp advance syncs step by step; synced per
        /// call, the files are mapped with 4 KiB pages (a sync of 2 MiB
        /// folios wrote up to 64 MiB for 16 random writes).
        pub fn set_durability(&self, durability: Durability) {
            self.dir.set_ordered(matches!(durability, Durability::Sync { .. }));
            self.dir.set_small_pages(matches!(durability, Durability::Sync { every } if every.is_zero()));
        }

        /// Start sync mode's group commit for `durability` (nothing for
        /// process mode).
        pub fn start(&mut self, durability: Durability) {
            if let Durability::Sync { every } = durability {
                self.commit = Some(GroupCommit::start(self.dir.clone(), every));
            }
        }

        /// Wait until every write that returned before this call is on disk:
        /// in sync mode, until the group sync that follows it (one sync for
        /// every caller waiting); in process mode, sync now.
        pub fn durable(&self) -> Result<(), Error> {
            match &self.commit {
                Some(c) => c.wait(),
                None => self.sync(),
            }
        }

        /// True while a background thread finishes the grow the open
        /// resumed (`finish_resumed_grow`, in `resize::finisher`).
        pub fn finishing(&self) -> bool {
            // Acquire: see the finisher's last store.
            self.finishing.load(Ordering::Acquire)
        }

        /// True if the grow of the index of `generation` awaits its
        /// publication in memory (its finisher completed it).
        #[inline]
        pub fn publication_waits(&self, generation: u64) -> bool {
            // Relaxed: a hint; `take_publication` decides.
            self.publication.load(Ordering::Relaxed) == generation
        }

        /// Take the publication of the grow of the index of `generation`
        /// that the finisher completed, if it waits: the caller must
        /// publish it (once: only one caller gets it); the keys the
        /// finisher copied, for the statistic.
        pub fn take_publication(&self, generation: u64) -> Option<usize> {
            // AcqRel: the Acquire half sees the finisher's work (its
            // Release store); Release orders nothing more, but a failed
            // CAS needs no order (Relaxed).
            self.publication.compare_exchange(generation, 0, Ordering::AcqRel, Ordering::Relaxed).ok()?;
            // Relaxed: a statistic, ordered by the CAS above.
            Some(self.background_copied.swap(0, Ordering::Relaxed))
        }

        /// Keys the finisher copied not yet counted by a publication.
        pub fn take_background_copied(&self) -> usize {
            // Relaxed: a statistic.
            self.background_copied.swap(0, Ordering::Relaxed)
        }

        /// Stop the background finisher, if it runs, and wait for it (it
        /// ends the bin it is transferring: every bin is then whole, and
        /// the next open resumes what is left).
        fn stop_finisher(&self) {
            let f = self.finisher.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(f) = f {
                // Relaxed: polled; the join orders everything after.
                f.stop.store(true, Ordering::Relaxed);
                let _ = f.thread.join();
            }
        }

        /// The map is being closed with no operation under way: mark it
        /// clean (a resize left under way is found from its index file).
        /// A background finisher is stopped first.
        pub fn close_clean(&self) {
            self.stop_finisher();
            for c in self.cells() {
                c.intent.store(0, Ordering::Relaxed);
            }
            // A close that cannot stamp leaves the files as an open did:
            // still this map's, and accepted.
            let _ = self.advance_stamp();
            // Release: the cells' clearing first (a crash orders stores in
            // program order on the page cache anyway).
            self.header().state.store(CLEAN, Ordering::Release);
        }

        /// The map id of the map kept in `dir`, read without opening or
        /// changing anything (no lock, no recovery): None if `dir` holds no
        /// map file; an error if its header is not a valid one.
        pub fn read_map_id(dir: &Path) -> Result<Option<u64>, Error> {
            use std::os::unix::fs::FileExt;
            let file = match std::fs::File::open(dir.join(files::MAP_FILE)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                r => r.map_err(files::io("opening the map file"))?,
            };
            // A page, 8-aligned, read whole (a header is integers and
            // atomics: any bytes are one).
            let mut page = vec![0u64; PAGE / 8];
            // SAFETY: the vector's bytes, as bytes.
            let bytes = unsafe { core::slice::from_raw_parts_mut(page.as_mut_ptr().cast::<u8>(), PAGE) };
            file.read_exact_at(bytes, 0).map_err(|_| Error::Corrupt {
                what: "the map file is shorter than its layout (truncated)",
            })?;
            // SAFETY: a page, aligned for the header, which fits in it.
            let h = unsafe { &*(page.as_ptr() as *const MapHeader) };
            h.check_fixed()?;
            Ok(Some(h.map_id))
        }

        /// Check the map file's hash check against `hash`.
        pub fn check_hash(&self, hash: impl Fn(u64) -> u64) -> Result<(), Error> {
            if HASH_CHECK_WORDS.map(hash) != self.header().hash_check {
                return Err(Error::Incompatible {
                    what: "this build hashes keys differently from the one that wrote the map",
                });
            }
            Ok(())
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::os::fd::FromRawFd;

        /// A failed group sync fails every later wait, even once syncs
        /// succeed again (see `CommitState::failed`).
        #[test]
        fn a_failed_group_sync_sticks() {
            let dir = std::env::temp_dir().join(format!("dlht-sticky-sync-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let files = FileSet::new(&dir);
            let mut fds = [0; 2];
            // SAFETY: a fresh pipe; each end owned once below.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            // SAFETY: the pipe's read end, owned by this File alone.
            let pipe = Arc::new(unsafe { std::fs::File::from_raw_fd(fds[0]) });
            // SAFETY: the write end, likewise.
            let other_end = unsafe { std::fs::File::from_raw_fd(fds[1]) };
            files.register(&pipe, 1); // fdatasync on a pipe fails (EINVAL)
            let commit = GroupCommit::start(files.clone(), Duration::ZERO);
            assert!(commit.wait().is_err());
            drop((pipe, other_end));
            assert!(files.sync_all().is_ok(), "syncs succeed again");
            assert!(commit.wait().is_err(), "the failure sticks");
            drop(commit);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

/// Write the file at `path` (a file of the map) to disk, and wait.
#[cfg(not(loom))]
fn sync_path(path: &std::path::Path) -> Result<(), crate::error::Error> {
    let (file, _) = files::open_rw(path, "opening a map file to sync it")?;
    file.sync_data().map_err(files::io("syncing a map file"))?;
    mirror::file_synced(&file);
    Ok(())
}

/// Store `stamp` in the 8-byte field at `offset` of page 0 of the file at
/// `path` (a file of the map, checked before), on disk before this
/// returns (that page alone: a ranged sync).
#[cfg(not(loom))]
fn stamp_file(path: &std::path::Path, offset: usize, stamp: u64) -> Result<(), crate::error::Error> {
    let (file, len) = files::open_rw(path, "opening a map file to stamp it")?;
    if len < layout::PAGE as u64 {
        return Ok(()); // a half-made index file, deleted by the next open
    }
    let m = files::Mapping::new(&file, 0, layout::PAGE)?;
    // SAFETY: an 8-aligned offset inside page 0 of a live mapping, a u64
    // field of the file's header (no other thread maps it now).
    let field = unsafe { &*(m.ptr().add(offset) as *const crate::sync::unmodelled::AtomicU64) };
    // Relaxed: see `advance_stamp`.
    field.store(stamp, crate::sync::Ordering::Relaxed);
    m.sync()
}

pub mod hasher;
