//! Opening a [`ByteMap`] kept in files: its index is a persistent
//! [`Map`](crate::Map) of key words to value words, its blobs and lists
//! live in the value heap (`persist::heap`), mapped at a fixed base so a
//! value word's address is the same in every process that opens the map.
//!
//! After each open a background thread gives back the heap blocks no
//! index entry reaches ([`Reclaimer`]): a crash leaks the blocks threads
//! had allocated but not linked, and those unlinked but still waiting for
//! epoch reclamation.

#[cfg(not(loom))]
mod imp {
    use crate::allocator::background::Reclaimer;
    use crate::allocator::bytes::Blob;
    use crate::allocator::bytes::ByteMap;
    use crate::allocator::entry::{trusted, trusted_in_list, List, Shape, ValueWord};
    use crate::allocator::pointers::PointerIndex;
    use crate::allocator::Guard;
    use crate::error::Error;
    use crate::map::Map;
    use crate::persist::hasher::FileHasher;
    use crate::persist::heap::{Heap, HeapReclaim};
    use crate::persist::layout::MapKind;
    use crate::persist::{OpenOptions, Recovery};
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// The index of a boxed `PointerIndex`, sent to the reclaiming thread:
    /// the box outlives the thread (the map joins it before dropping it).
    struct IndexPtr(*const PointerIndex<Blob, FileHasher>);
    // SAFETY: a PointerIndex is Sync; the pointer is read-only and the
    // pointee outlives the thread (see above).
    unsafe impl Send for IndexPtr {}

    impl ByteMap<FileHasher> {
        /// Open the byte map kept in directory `dir`, or make one there (the
        /// directory too): index, value heap and all. As for
        /// [`Map::open`](crate::Map::open), every write whose call returned
        /// is there after the process dies, however it dies, and the map
        /// serves as soon as the threads' unfinished work is finished or
        /// undone; heap blocks a crash left unreachable are given back by a
        /// background thread while the map serves
        /// ([`heap_reclaim`](Self::heap_reclaim)).
        ///
        /// The heap is mapped at the address it had when it was made (see
        /// `docs/DESIGN.md`, "Persistent byte maps"): if that range is taken
        /// in this process, the open fails with [`Error::Io`].
        ///
        /// ```
        /// let dir = std::env::temp_dir().join(format!("dlht-doc-bytes-{}", std::process::id()));
        /// # let _ = std::fs::remove_dir_all(&dir);
        /// {
        ///     let m = dlht::FileByteMap::open(&dir).unwrap();
        ///     let g = m.guard();
        ///     m.insert(b"user:1", b"ada", &g).unwrap().unwrap();
        /// } // closed
        /// let m = dlht::FileByteMap::open(&dir).unwrap();
        /// assert_eq!(m.get(b"user:1", &m.guard()).as_deref(), Some(&b"ada"[..]));
        /// # drop(m);
        /// # std::fs::remove_dir_all(&dir).unwrap();
        /// ```
        pub fn open(dir: impl AsRef<Path>) -> Result<Self, Error> {
            Self::open_with(dir, OpenOptions::new())
        }

        /// [`open`](Self::open) with options: capacity, durability and heap
        /// size of a map made anew ([`OpenOptions`]).
        pub fn open_with(dir: impl AsRef<Path>, options: OpenOptions) -> Result<Self, Error> {
            let dir = dir.as_ref();
            let index = Map::<u64, u64, FileHasher>::open_kind(dir, options, MapKind::Bytes)?;
            let pages = if index.file().files().small_pages() {
                crate::persist::files::Pages::Small
            } else {
                crate::persist::files::Pages::Default
            };
            let heap = Heap::open(dir, index.recovery().crashed, pages)?;
            if let Some(f) = heap.file() {
                // Synced before the index's files (sync mode's group
                // commits, `sync`, `durable`): a value reaches the disk
                // before the index entry naming it.
                index.file().files().register_first(&f);
            }
            let h = index.file().header();
            let hasher = FileHasher::for_signatures(h.seed, h.secrets);
            let index = Box::new(PointerIndex::over(index, Some(heap)));
            let stop = Arc::new(AtomicBool::new(false));
            let (ptr, s) = (IndexPtr(&*index), stop.clone());
            let thread = std::thread::Builder::new()
                .name("dlht-reclaim".into())
                .spawn(move || {
                    let ptr = ptr;
                    // SAFETY: see `IndexPtr`.
                    reclaim(unsafe { &*ptr.0 }, heap, &s)
                })
                .map_err(crate::persist::files::io("starting the heap's reclaiming thread"));
            let thread = match thread {
                Ok(t) => t,
                Err(e) => {
                    heap.close();
                    return Err(e);
                }
            };
            Ok(ByteMap { index, hasher, reclaimer: Some(Reclaimer::new(stop, thread)) })
        }

        /// Write every change so far to disk and wait (index and heap): see
        /// [`Map::sync`](crate::Map::sync).
        pub fn sync(&self) -> Result<(), Error> {
            self.index.words().sync()
        }

        /// Wait until every write that returned before this call survives
        /// a crash of the machine: see [`Map::durable`](crate::Map::durable).
        /// Each sync writes the heap first, then the index (a value is on
        /// disk before the index entry naming it).
        pub fn durable(&self) -> Result<(), Error> {
            self.index.words().durable()
        }

        /// What the open found and what recovery of the index did.
        pub fn recovery(&self) -> Recovery {
            self.index.words().recovery()
        }

        /// The map's identity: see [`Map::map_id`](crate::Map::map_id).
        ///
        /// ```
        /// let dir = std::env::temp_dir().join(format!("dlht-doc-bytes-id-{}", std::process::id()));
        /// # let _ = std::fs::remove_dir_all(&dir);
        /// let id = dlht::FileByteMap::open(&dir).unwrap().map_id();
        /// assert_eq!(dlht::FileByteMap::open(&dir).unwrap().map_id(), id);
        /// # std::fs::remove_dir_all(&dir).unwrap();
        /// ```
        pub fn map_id(&self) -> u64 {
            self.index.words().map_id()
        }

        /// The [`map_id`](Self::map_id) of the map kept in `dir`, read
        /// without opening it (nothing is locked, recovered or changed):
        /// None if `dir` holds no map; [`Error::Corrupt`] or
        /// [`Error::Incompatible`] if its map file's header is not a valid
        /// one. For tools that keep files beside a map's and must check
        /// them before the open changes anything.
        ///
        /// ```
        /// let dir = std::env::temp_dir().join(format!("dlht-doc-id-of-{}", std::process::id()));
        /// # let _ = std::fs::remove_dir_all(&dir);
        /// assert_eq!(dlht::FileByteMap::map_id_of(&dir).unwrap(), None);
        /// let id = dlht::FileByteMap::open(&dir).unwrap().map_id();
        /// assert_eq!(dlht::FileByteMap::map_id_of(&dir).unwrap(), Some(id));
        /// # std::fs::remove_dir_all(&dir).unwrap();
        /// ```
        pub fn map_id_of(dir: impl AsRef<Path>) -> Result<Option<u64>, Error> {
            crate::persist::MapFile::read_map_id(dir.as_ref())
        }

        /// What the background reclamation of the heap has done so far.
        pub fn heap_reclaim(&self) -> HeapReclaim {
            self.heap().reclaim_state()
        }

        /// Wait until the background reclamation has finished, the disk
        /// it gives back to the file system included (for tests and tools;
        /// the map serves meanwhile). Not while this thread holds a
        /// [`Guard`](crate::Guard): the reclamation waits for every thread
        /// pinned during its walk to unpin.
        pub fn wait_heap_reclaimed(&self) -> HeapReclaim {
            let running = || self.reclaimer.as_ref().is_some_and(|r| !r.finished());
            while running() {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.heap_reclaim()
        }

        fn heap(&self) -> &'static Heap {
            self.index.heap.expect("dlht invariant: a persistent byte map has a heap")
        }
    }

    /// The reclamation pass: free at once what earlier opens freed or
    /// retired (the heap's pre-pass, run to its end: allocations run steps
    /// of it too, so a short open reuses that space before it takes new
    /// slabs), mark every block the index reaches as this incarnation's,
    /// wait until every thread pinned during the walk has unpinned (each
    /// removal of a block the walk missed has marked it retired by then:
    /// removals of a persistent map run pinned), then sweep the slabs the
    /// pre-pass found live blocks of earlier incarnations in.
    fn reclaim(index: &PointerIndex<Blob, FileHasher>, heap: &'static Heap, stop: &AtomicBool) {
        use crate::allocator::entry::Element;
        /// However the pass ends — at a close too — it finishes the
        /// pre-pass and gives the disk of the slabs it gave back to the file
        /// system (`Heap::trim`), for at most `CLOSE_BUDGET`: so opens
        /// shorter than their pre-pass still give back what the opens
        /// before them freed (past it, the next open's pre-pass goes on).
        struct AtEnd(&'static Heap);
        impl Drop for AtEnd {
            fn drop(&mut self) {
                const CLOSE_BUDGET: Duration = Duration::from_millis(100);
                let t = std::time::Instant::now();
                while t.elapsed() < CLOSE_BUDGET && self.0.prepass_step() {}
                self.0.trim(&|| t.elapsed() > CLOSE_BUDGET);
            }
        }
        let _at_end = AtEnd(heap);
        while heap.prepass_step() {
            // Relaxed (here and below): `stop` is a request, polled; it
            // publishes nothing (the close joins this thread).
            if stop.load(Ordering::Relaxed) {
                return; // closing: `AtEnd` goes on
            }
        }
        heap.trim(&|| stop.load(Ordering::Relaxed));
        {
            let _g = Guard::pin();
            // What the walk marks is counted (the counts start at zero at
            // an open); a block removed before the walk reached it is
            // given back by its removal (`PointerIndex::retire_element`).
            let (mut bytes, mut collided) = (0i64, 0isize);
            // Words that fail their checks (`entry::trusted`, which counts
            // them; the checksums too, until `set_verified` below): taken
            // out of the index after the walk, their blocks left to the
            // sweep (a damaged word may name another key's live block).
            let mut damaged = Vec::new();
            for (kw, w) in index.words().iter() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let vw = ValueWord::from_bits(w);
                if !trusted::<Blob>(Some(heap), kw, vw, true) {
                    damaged.push((kw, w));
                    continue;
                }
                if vw.shape() != Shape::List {
                    if heap.mark(vw.addr()) {
                        // SAFETY: a live blob read under `_g`, checked whole.
                        bytes += unsafe { Blob::bytes(vw.addr()) } as i64;
                    }
                    continue;
                }
                // SAFETY: read from the index under `_g`: a published list
                // in the heap, not freed while pinned, checked whole.
                let words = unsafe { &*(vw.addr() as *const List) }.words();
                // A damaged element of a list stays in it, never served
                // (`trusted_in_list` verifies list elements on every read)
                // and not counted.
                let mut keys = 0;
                for &e in words {
                    let e = ValueWord::from_bits(e);
                    if !trusted_in_list::<Blob>(Some(heap), kw, e) {
                        continue;
                    }
                    keys += 1;
                    if heap.mark(e.addr()) {
                        // SAFETY: as above.
                        bytes += unsafe { Blob::bytes(e.addr()) } as i64;
                    }
                }
                if heap.mark(vw.addr()) {
                    collided += keys - 1;
                }
            }
            if !stop.load(Ordering::Relaxed) {
                for (kw, w) in damaged {
                    // Only if unchanged since the walk read it.
                    crate::driver::remove_if(index.words(), &kw, |cur| cur == w);
                }
                heap.set_verified();
            }
            index.count_recovered(bytes, collided);
            if stop.load(Ordering::Relaxed) {
                return;
            }
        }
        let passed = Arc::new(AtomicBool::new(false));
        {
            let g = crossbeam_epoch::pin();
            let p = passed.clone();
            g.defer(move || p.store(true, Ordering::Release));
            g.flush();
        }
        while !passed.load(Ordering::Acquire) {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            crossbeam_epoch::pin().flush();
            std::thread::sleep(Duration::from_micros(200));
        }
        heap.sweep(stop);
    }
}
