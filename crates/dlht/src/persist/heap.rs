//! The value heap of a persistent [`ByteMap`](crate::ByteMap): an allocator
//! inside a shared mapping of `heap.dlht`, so that the blobs (and collision
//! lists) the index's value words point to outlive the process with it.
//!
//! ```text
//! DIR/heap.dlht  | HeapHeader (slab 0) | slab 1 | slab 2 | … (64 KiB each, sparse) |
//! slab           | SlabHeader (16 B) | block | block | … |      (one size class)
//!                | SlabHeader (16 B) | one block over `slabs` slabs |   (a large run)
//! block          | BlockState (8 B) | payload: a blob or a list |
//! ```
//!
//! **Pointers: a fixed base.** The file is mapped at the address recorded
//! in its header (chosen at the first open, in a range the kernel leaves
//! to programs that ask: 16–64 TiB), so a value word holds a plain address
//! and reading a value costs what it costs in memory — no base to add on
//! the hot path, the in-memory map's code unchanged. The price: a process
//! where that range is already taken cannot open the map
//! ([`Error::Io`] "mapping the heap at its address"); LMDB's
//! `MDB_FIXEDMAP` makes the same trade.
//!
//! **What survives a crash.** The bump pointer (`next_slab`) and each
//! slab's class are in the file; free lists are not (rebuilt at open). A
//! block's [`BlockState`] says free, live or retired, with the
//! *incarnation* (opens of the heap) that last set it. Blocks a crash
//! leaks — allocated but never linked, or unlinked but not yet freed (epoch
//! reclamation's pending garbage dies with the process) — are found by a
//! background pass after each open ([`Heap::reclaim`]): it marks every
//! block the index reaches with the new incarnation, waits until every
//! thread pinned during the walk has unpinned (so each removal of an old
//! block has marked it retired), then frees each block of an earlier
//! incarnation that is not free: none of them is reachable. Every change
//! of a state is a compare-and-swap, so the pass and the ordinary free
//! path never free one block twice.
//!
//! Why our own allocator: no crate allocates inside a caller's mapping
//! with crash-recoverable metadata (the general-purpose ones keep theirs
//! in process memory).

use super::files::{self, io};
use super::layout::{ENDIAN_CHECK, PAGE};
use crate::error::Error;
use crossbeam_utils::CachePadded;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The heap's file in a map's directory.
pub const HEAP_FILE: &str = "heap.dlht";
/// First bytes of a heap file.
pub const HEAP_MAGIC: [u8; 8] = *b"DLHT-HEP";
/// Version of the heap file's layout.
pub const HEAP_LAYOUT_VERSION: u32 = 1;
/// The unit the heap grows by, and of a size class's blocks.
pub const SLAB: usize = 64 << 10;
/// A heap's default size (the file is sparse: only used slabs take disk).
pub const DEFAULT_HEAP_BYTES: u64 = 64 << 30;
/// Where fixed bases are drawn: 16 TiB …
const BASE_LOW: usize = 0x1000_0000_0000;
/// … to 64 TiB, above a program's heap and below the kernel's mmap area.
const BASE_HIGH: usize = 0x4000_0000_0000;

/// Slab 0 of the heap file.
#[repr(C)]
pub struct HeapHeader {
    /// [`HEAP_MAGIC`].
    pub magic: [u8; 8],
    /// [`HEAP_LAYOUT_VERSION`].
    pub layout_version: u32,
    /// [`ENDIAN_CHECK`].
    pub endian: u32,
    /// Bytes of the file (a multiple of [`SLAB`]).
    pub bytes: u64,
    /// The address the file is mapped at; 0 until the first open picks one.
    pub base: AtomicU64,
    /// Slabs handed out (slab 0 is this header): the bump pointer.
    pub next_slab: AtomicU64,
    /// Opens of the heap so far: blocks set in an earlier one than the
    /// current are reclaimed unless the index reaches them.
    pub incarnation: AtomicU64,
    /// The seed of the map file this heap belongs to (`MapHeader::seed`).
    pub map_seed: u64,
}

impl HeapHeader {
    /// Refuse a header that is not a heap's of this layout.
    pub fn check(&self, file_len: u64) -> Result<(), Error> {
        if self.magic != HEAP_MAGIC {
            return Err(Error::Corrupt { what: "the heap file's magic" });
        }
        if self.endian != ENDIAN_CHECK {
            return Err(Error::Incompatible { what: "the heap file's byte order" });
        }
        if self.layout_version != HEAP_LAYOUT_VERSION {
            return Err(Error::Incompatible { what: "the heap file's layout version" });
        }
        let slabs = self.bytes / SLAB as u64;
        if self.bytes % SLAB as u64 != 0 || slabs < 2 || self.bytes != file_len || self.bytes > MAX_HEAP_BYTES
        {
            return Err(Error::Corrupt { what: "the heap file's length" });
        }
        let base = self.base.load(Ordering::Relaxed) as usize;
        if base != 0 && (base % SLAB != 0 || base < BASE_LOW || base > BASE_HIGH - self.bytes as usize) {
            return Err(Error::Corrupt { what: "the heap's base address" });
        }
        if self.incarnation.load(Ordering::Relaxed) >= INCARNATION_LIMIT {
            return Err(Error::Corrupt { what: "the heap's incarnation" });
        }
        let next = self.next_slab.load(Ordering::Relaxed);
        if next == 0 || next > slabs {
            return Err(Error::Corrupt { what: "the heap's bump pointer" });
        }
        Ok(())
    }
}

/// The first 16 bytes of a slab: what its blocks are. All zero: a slab
/// the bump pointer passed but no block was ever carved from (free).
#[repr(C)]
pub struct SlabHeader {
    /// 0: unused; `1 + c`: blocks of class `c`; [`SlabHeader::LARGE`]: a run.
    pub class: AtomicU32,
    /// Slabs of a large run (1 for a class slab).
    pub slabs: AtomicU32,
    _reserved: u64,
}

impl SlabHeader {
    /// The class code of a large run: one block over whole slabs.
    pub const LARGE: u32 = u32::MAX;
    /// Bytes before the first block.
    pub const BYTES: usize = 16;
}

/// A block's state word: `incarnation << 2 | state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockState(u64);

impl BlockState {
    /// On no free list yet, or on one (the incarnation says which open).
    pub const FREE: u64 = 0;
    /// Allocated: being filled, or reachable from the index.
    pub const LIVE: u64 = 1;
    /// Unlinked from the index, waiting for epoch reclamation to free it.
    pub const RETIRED: u64 = 2;
    const STATE_BITS: u32 = 2;
    /// Bytes before the payload.
    pub const BYTES: usize = 8;

    /// The word of `state` in `incarnation`.
    pub const fn new(incarnation: u64, state: u64) -> BlockState {
        BlockState(incarnation << Self::STATE_BITS | state)
    }
    /// A word read from a block.
    pub const fn from_bits(w: u64) -> BlockState {
        BlockState(w)
    }
    /// The word to store.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// The open that set it.
    pub const fn incarnation(self) -> u64 {
        self.0 >> Self::STATE_BITS
    }
    /// FREE, LIVE or RETIRED.
    pub const fn state(self) -> u64 {
        self.0 & ((1 << Self::STATE_BITS) - 1)
    }
}

/// Block sizes (state word included) of the size classes: 16-byte steps to
/// 128, then four classes per doubling, to 16 KiB; larger payloads get a
/// run of whole slabs.
pub const CLASS_BYTES: [usize; 35] = [
    32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536,
    1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
];
const CLASSES: usize = CLASS_BYTES.len();
/// Free lists per class: a thread pushes and pops its own, and takes from
/// the others before carving a new slab.
const SHARDS: usize = 8;

/// The class of a block holding `payload` bytes, or None for a large run.
fn class_of(payload: usize) -> Option<usize> {
    let need = payload.checked_add(BlockState::BYTES)?;
    CLASS_BYTES.iter().position(|&b| b >= need)
}

/// Slabs of a large run holding `payload` bytes.
fn run_slabs(payload: usize) -> Option<usize> {
    Some(payload.checked_add(SlabHeader::BYTES + BlockState::BYTES)?.div_ceil(SLAB))
}

/// The heaps of this process (open, or closed and waiting to be reused):
/// a value word's address finds its open heap here (`lookup`). The
/// structs are leaked, never freed, so a late free holding one is never a
/// use after free; a closed heap's range is unmapped and no longer found.
const MAX_HEAPS: usize = 64;
static HEAPS: [AtomicPtr<Heap>; MAX_HEAPS] = [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_HEAPS];
static HEAP_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Serializes opens and closes of heaps (registration, mapping).
static OPENING: Mutex<()> = Mutex::new(());
/// Serials of opens: unique in the process (below 2^56: a tag keeps the
/// slot in its top byte).
static SERIAL: AtomicU64 = AtomicU64::new(1);
/// Where a retirement's tag keeps its heap's slot.
const TAG_SLOT_SHIFT: u32 = 56;

/// A heap file mapped at its base, while open; reused for the next heap
/// opened once closed.
pub struct Heap {
    /// Its index in `HEAPS` (a retirement's tag names it).
    slot: usize,
    /// Where the file is mapped, and its bytes (set before `open`).
    lo: AtomicUsize,
    bytes: AtomicUsize,
    /// This open's serial, unique in the process: the tag of retirements,
    /// so a free deferred before a close never touches the next open's
    /// blocks (which may be another file's, at the same address).
    serial: AtomicU64,
    /// False once closed: frees and retirements then do nothing (the
    /// next open's reclamation finds those blocks).
    open: AtomicBool,
    /// Deferred frees running, per shard: `close` waits for none before it
    /// unmaps (a Dekker pair with `open`, see `free_retired`).
    active: [CachePadded<AtomicUsize>; SHARDS],
    /// The current incarnation (a copy of the header's).
    incarnation: AtomicU64,
    /// Free blocks (payload addresses) per class and shard.
    free: [[Mutex<Vec<usize>>; SHARDS]; CLASSES],
    /// Free large runs (payload addresses) by their slabs.
    large: Mutex<BTreeMap<usize, Vec<usize>>>,
    /// Slabs never carved (found by reclamation below the bump pointer).
    free_slabs: Mutex<Vec<usize>>,
    /// Blocks freed by reclamation in this incarnation, and whether the
    /// pass has finished.
    reclaimed: AtomicUsize,
    reclaim_done: AtomicBool,
    file: Mutex<Option<Arc<File>>>,
}

/// What the background reclamation of a heap has done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HeapReclaim {
    /// Blocks freed that no index entry reached (leaked by a crash, or
    /// waiting for epoch reclamation when the map was closed).
    pub blocks_freed: usize,
    /// The pass has finished.
    pub done: bool,
}

/// The most bytes a heap may have (a quarter of the range bases are drawn
/// from).
const MAX_HEAP_BYTES: u64 = (BASE_HIGH - BASE_LOW) as u64 / 4;
/// Incarnations a valid heap header names are below this (a damaged word
/// is refused; the state word keeps 62 bits of it).
const INCARNATION_LIMIT: u64 = 1 << 48;

impl Heap {
    /// Create `dir/heap.dlht` of `bytes` (rounded up to slabs; sparse).
    pub fn create(dir: &Path, bytes: u64, map_seed: u64) -> Result<(), Error> {
        if bytes > MAX_HEAP_BYTES {
            return Err(Error::CapacityOverflow);
        }
        let bytes = bytes.max(2 * SLAB as u64).next_multiple_of(SLAB as u64);
        let file = files::create_zeroed(&dir.join(HEAP_FILE), bytes as usize)?;
        let m = files::Mapping::new(&file, 0, PAGE)?;
        // SAFETY: a fresh zeroed page of our file; every field is valid as zero.
        let h = unsafe { &mut *(m.ptr() as *mut HeapHeader) };
        h.magic = HEAP_MAGIC;
        h.layout_version = HEAP_LAYOUT_VERSION;
        h.endian = ENDIAN_CHECK;
        h.bytes = bytes;
        h.map_seed = map_seed;
        h.next_slab.store(1, Ordering::Relaxed);
        m.sync()?;
        file.sync_all().map_err(io("syncing the heap file"))
    }

    /// Check `dir/heap.dlht`'s header without changing anything (before
    /// the index is opened and recovered, so a map whose heap is refused is
    /// left as it was). Nothing to check where the map is not made yet.
    /// A map of another kind is left to the map file's own check (which
    /// refuses it as `Incompatible`).
    pub fn check_file(dir: &Path) -> Result<(), Error> {
        let Ok((map, len)) = files::open_rw(&dir.join(files::MAP_FILE), "opening the map file") else {
            return Ok(()); // no map yet (or unreadable: the map's open says why)
        };
        if len < PAGE as u64 {
            return Ok(());
        }
        let m = files::Mapping::new(&map, 0, PAGE)?;
        // SAFETY: a page of the map file; the header's fields are integers
        // and atomics, valid for any bytes.
        let map_header = unsafe { &*(m.ptr() as *const super::layout::MapHeader) };
        if map_header.kind != super::layout::MapKind::Bytes as u32 {
            return Ok(());
        }
        let (file, _, _) = Self::header_of(dir)?;
        let h = files::Mapping::new(&file, 0, PAGE)?;
        // SAFETY: as in `header_of`.
        if unsafe { &*(h.ptr() as *const HeapHeader) }.map_seed != map_header.seed {
            return Err(Error::Corrupt { what: "the heap file belongs to another map" });
        }
        Ok(())
    }

    /// The heap file, open, and its base and bytes, checked.
    fn header_of(dir: &Path) -> Result<(File, usize, usize), Error> {
        let (file, len) = match files::open_rw(&dir.join(HEAP_FILE), "opening the heap file") {
            Err(Error::Io { kind: std::io::ErrorKind::NotFound, .. }) => {
                return Err(Error::Corrupt { what: "the byte map's heap file is missing" })
            }
            r => r?,
        };
        if len < 2 * SLAB as u64 {
            return Err(Error::Corrupt { what: "the heap file is shorter than its layout (truncated)" });
        }
        let m = files::Mapping::new(&file, 0, PAGE)?;
        // SAFETY: a page of the file; integers and atomics are valid for
        // any bytes.
        let h = unsafe { &*(m.ptr() as *const HeapHeader) };
        h.check(len)?;
        let (base, bytes) = (h.base.load(Ordering::Relaxed) as usize, h.bytes as usize);
        Ok((file, base, bytes))
    }

    /// Map `dir/heap.dlht` at its base (picking one at the first open),
    /// start a new incarnation, and register it.
    pub fn open(dir: &Path) -> Result<&'static Heap, Error> {
        let (file, base, bytes) = Self::header_of(dir)?;
        let _g = OPENING.lock().unwrap_or_else(|e| e.into_inner());
        let lo = match base {
            0 => Self::map_new(&file, bytes)?,
            b => Self::map_at(&file, b, bytes)?,
        };
        let heap = match Self::vacant() {
            Some(h) => h,
            None => {
                // SAFETY: the mapping just made, unmapped once.
                unsafe { libc::munmap(lo as *mut libc::c_void, bytes) };
                return Err(Error::Io {
                    what: "opening more persistent byte maps at once than a process may (64)",
                    kind: std::io::ErrorKind::Other,
                });
            }
        };
        heap.lo.store(lo, Ordering::Relaxed);
        heap.bytes.store(bytes, Ordering::Relaxed);
        heap.clear_lists();
        let h = heap.header();
        if base == 0 {
            h.base.store(lo as u64, Ordering::Relaxed);
        }
        // Planted bug (scripts/planted-bugs.sh): forget the bump pointer, as
        // if it were kept in memory only; new slabs then overwrite old ones.
        if cfg!(dlht_plant = "heap_bump_reset") {
            h.next_slab.store(1, Ordering::Relaxed);
        }
        // Relaxed: only this thread touches the heap until it is published
        // open below.
        let inc = h.incarnation.load(Ordering::Relaxed) + 1;
        h.incarnation.store(inc, Ordering::Relaxed);
        heap.incarnation.store(inc, Ordering::Relaxed);
        heap.serial.store(SERIAL.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        heap.reclaimed.store(0, Ordering::Relaxed);
        heap.reclaim_done.store(false, Ordering::Relaxed);
        *heap.file.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(file));
        // Release: the fields above before any thread finds the heap open.
        heap.open.store(true, Ordering::Release);
        Ok(heap)
    }

    /// A closed heap struct to reuse, or a new one registered; None if
    /// every slot holds an open heap. Called under `OPENING`.
    fn vacant() -> Option<&'static Heap> {
        let n = HEAP_COUNT.load(Ordering::Acquire);
        for slot in &HEAPS[..n] {
            // SAFETY: registered heaps are leaked: never freed.
            let h = unsafe { &*slot.load(Ordering::Acquire) };
            if !h.open.load(Ordering::Acquire) {
                return Some(h);
            }
        }
        if n == MAX_HEAPS {
            return None;
        }
        let h: &'static Heap = Box::leak(Box::new(Heap {
            slot: n,
            lo: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            serial: AtomicU64::new(0),
            open: AtomicBool::new(false),
            active: core::array::from_fn(|_| CachePadded::new(AtomicUsize::new(0))),
            incarnation: AtomicU64::new(0),
            free: core::array::from_fn(|_| core::array::from_fn(|_| Mutex::new(Vec::new()))),
            large: Mutex::new(BTreeMap::new()),
            free_slabs: Mutex::new(Vec::new()),
            reclaimed: AtomicUsize::new(0),
            reclaim_done: AtomicBool::new(false),
            file: Mutex::new(None),
        }));
        HEAPS[n].store(h as *const Heap as *mut Heap, Ordering::Release);
        // Release: the entry before the count that makes lookups read it.
        HEAP_COUNT.store(n + 1, Ordering::Release);
        Some(h)
    }

    /// Map a heap that has no base yet at a random free one: its address.
    fn map_new(file: &File, bytes: usize) -> Result<usize, Error> {
        let span = (BASE_HIGH - BASE_LOW - bytes) / SLAB;
        let seed = {
            use std::hash::{BuildHasher, RandomState};
            RandomState::new().hash_one((std::process::id(), std::time::SystemTime::now())) as usize
        };
        for attempt in 0..64usize {
            let base = BASE_LOW + (seed.wrapping_add(attempt.wrapping_mul(0x9e37_79b9)) % span) * SLAB;
            match Self::map_at(file, base, bytes) {
                Err(Error::Io { kind: std::io::ErrorKind::AlreadyExists, .. }) => continue,
                r => return r,
            }
        }
        Err(Error::Io {
            what: "finding a free address range for the heap",
            kind: std::io::ErrorKind::AlreadyExists,
        })
    }

    /// Map the file at `base`, only if that range is free in this process.
    fn map_at(file: &File, base: usize, bytes: usize) -> Result<usize, Error> {
        // SAFETY: a shared mapping of our descriptor at a fixed address the
        // kernel checks is free (MAP_FIXED_NOREPLACE fails otherwise).
        let p = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            let kind = if e.raw_os_error() == Some(libc::EEXIST) {
                std::io::ErrorKind::AlreadyExists
            } else {
                e.kind()
            };
            return Err(Error::Io {
                what: "mapping the heap at its address (the range is taken in this process)",
                kind,
            });
        }
        if p as usize != base {
            // An old kernel that ignores MAP_FIXED_NOREPLACE: not ours to keep.
            // SAFETY: the mapping just made, unmapped once.
            unsafe { libc::munmap(p, bytes) };
            return Err(Error::Io {
                what: "mapping the heap at its address (the range is taken in this process)",
                kind: std::io::ErrorKind::AlreadyExists,
            });
        }
        Ok(base)
    }

    fn clear_lists(&self) {
        for shards in &self.free {
            for s in shards {
                s.lock().unwrap_or_else(|e| e.into_inner()).clear();
            }
        }
        self.large.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.free_slabs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Close: no thread may free into the heap from now on (a deferred free
    /// running now is waited for), then the file is unmapped and the struct
    /// is free for the next heap opened.
    pub fn close(&'static self) {
        let _g = OPENING.lock().unwrap_or_else(|e| e.into_inner());
        // SeqCst: a Dekker pair with `free_retired`'s increment and load.
        self.open.store(false, Ordering::SeqCst);
        for a in &self.active {
            while a.load(Ordering::SeqCst) != 0 {
                std::thread::yield_now();
            }
        }
        // SAFETY: our own mapping; nothing reads or writes it any more
        // (the map is gone, late frees see the heap closed).
        unsafe { libc::munmap(self.lo() as *mut libc::c_void, self.bytes()) };
        self.clear_lists();
        *self.file.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn lo(&self) -> usize {
        // Relaxed: set before the heap was published open.
        self.lo.load(Ordering::Relaxed)
    }

    fn bytes(&self) -> usize {
        // Relaxed: as `lo`.
        self.bytes.load(Ordering::Relaxed)
    }

    /// The heap's file, for syncing with the map's (see `FileSet`).
    pub fn file(&self) -> Option<Arc<File>> {
        self.file.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn header(&self) -> &HeapHeader {
        // SAFETY: slab 0 of the mapping is the header; fields are integers
        // and atomics.
        unsafe { &*(self.lo() as *const HeapHeader) }
    }

    fn slab(&self, i: usize) -> &SlabHeader {
        // SAFETY: slab i lies inside the mapping (i below the file's slabs).
        unsafe { &*((self.lo() + i * SLAB) as *const SlabHeader) }
    }

    fn state_of(&self, payload: usize) -> &AtomicU64 {
        debug_assert!((self.lo() + SLAB..self.lo() + self.bytes()).contains(&payload));
        // SAFETY: every payload follows its block's state word, in the mapping.
        unsafe { &*((payload - BlockState::BYTES) as *const AtomicU64) }
    }

    fn current(&self) -> u64 {
        // Relaxed: set before the heap was published open (Release/Acquire).
        self.incarnation.load(Ordering::Relaxed)
    }

    /// A block for `payload` bytes, live, 8-byte aligned.
    pub fn alloc(&self, payload: usize) -> Result<usize, Error> {
        let p = match class_of(payload) {
            Some(c) => self.alloc_small(c)?,
            None => self.alloc_large(payload)?,
        };
        super::crash::at(super::crash::CrashPoint::HeapAllocated);
        self.state_of(p).store(BlockState::new(self.current(), BlockState::LIVE).bits(), Ordering::Relaxed);
        Ok(p)
    }

    fn shard() -> usize {
        thread_local!(static SHARD: usize = {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
        });
        SHARD.with(|s| *s)
    }

    fn alloc_small(&self, c: usize) -> Result<usize, Error> {
        let me = Self::shard();
        if let Some(p) = self.free[c][me].lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(p);
        }
        for k in 1..SHARDS {
            let mut other = self.free[c][(me + k) % SHARDS].lock().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = other.pop() {
                let half = other.len() / 2;
                let moved: Vec<usize> = other.drain(..half).collect();
                drop(other);
                self.free[c][me].lock().unwrap_or_else(|e| e.into_inner()).extend(moved);
                return Ok(p);
            }
        }
        // Carve a slab: its class first (a crash after leaves free blocks).
        let slab = self.take_slabs(1)?;
        let h = self.slab(slab);
        h.slabs.store(1, Ordering::Relaxed);
        h.class.store(1 + c as u32, Ordering::Relaxed);
        let first = self.lo() + slab * SLAB + SlabHeader::BYTES + BlockState::BYTES;
        let size = CLASS_BYTES[c];
        let n = (SLAB - SlabHeader::BYTES) / size;
        let mut list = self.free[c][me].lock().unwrap_or_else(|e| e.into_inner());
        list.extend((1..n).rev().map(|i| first + i * size));
        Ok(first)
    }

    fn alloc_large(&self, payload: usize) -> Result<usize, Error> {
        let slabs = run_slabs(payload).ok_or(Error::AllocFailed { bytes: payload })?;
        if let Some(p) =
            self.large.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&slabs).and_then(Vec::pop)
        {
            return Ok(p);
        }
        let first = self.take_slabs(slabs)?;
        let h = self.slab(first);
        h.slabs.store(slabs as u32, Ordering::Relaxed);
        h.class.store(SlabHeader::LARGE, Ordering::Relaxed);
        Ok(self.lo() + first * SLAB + SlabHeader::BYTES + BlockState::BYTES)
    }

    /// `n` fresh slabs: a free one found by reclamation, or the bump's.
    fn take_slabs(&self, n: usize) -> Result<usize, Error> {
        if n == 1 {
            if let Some(s) = self.free_slabs.lock().unwrap_or_else(|e| e.into_inner()).pop() {
                return Ok(s);
            }
        }
        let total = (self.bytes.load(Ordering::Relaxed) / SLAB) as u64;
        let next = &self.header().next_slab;
        // Relaxed: the counter alone orders slabs; a crash after the add
        // leaves zeroed slabs, which reclamation finds free.
        let mut cur = next.load(Ordering::Relaxed);
        loop {
            if cur + n as u64 > total {
                return Err(Error::AllocFailed { bytes: n * SLAB });
            }
            match next.compare_exchange_weak(cur, cur + n as u64, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(cur as usize),
                Err(now) => cur = now,
            }
        }
    }

    /// Free a block never published (a failed or abandoned insert).
    pub fn free_unpublished(&self, payload: usize) {
        let inc = self.current();
        let live = BlockState::new(inc, BlockState::LIVE).bits();
        self.release(payload, live);
    }

    /// A published block left the index: mark it retired (so reclamation
    /// leaves it to epoch reclamation). Returns the tag its deferred free
    /// passes to [`free_retired`](Self::free_retired), and whether the
    /// block was an earlier incarnation's that reclamation's walk had not
    /// marked (so the walk did not count it: see `allocator::persistent`).
    pub fn retiring(&self, payload: usize) -> (u64, bool) {
        let inc = self.current();
        let st = self.state_of(payload);
        let mut cur = st.load(Ordering::Relaxed);
        loop {
            let b = BlockState::from_bits(cur);
            if b.state() != BlockState::LIVE {
                return (0, false); // not live: nothing of ours to free
            }
            let retired = BlockState::new(inc, BlockState::RETIRED).bits();
            // Relaxed: the state word alone is contended (by reclamation).
            match st.compare_exchange_weak(cur, retired, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return (self.tag(), b.incarnation() < inc),
                Err(now) => cur = now,
            }
        }
    }

    /// The tag of this open's retirements: slot and serial.
    fn tag(&self) -> u64 {
        (self.slot as u64) << TAG_SLOT_SHIFT | self.serial.load(Ordering::Relaxed)
    }

    /// Epoch reclamation frees the block at `payload` retired with `tag`
    /// (see `free_retired`): the heap is found by the tag's slot, never by
    /// the address (a range may hold another heap by now).
    pub fn free_tagged(payload: usize, tag: u64) {
        let slot = (tag >> TAG_SLOT_SHIFT) as usize;
        let p = HEAPS.get(slot).map_or(core::ptr::null_mut(), |p| p.load(Ordering::Acquire));
        // SAFETY: registered heaps are leaked: never freed.
        if let Some(h) = unsafe { p.as_ref() } {
            h.free_retired(payload, tag);
        }
    }

    /// Epoch reclamation frees a block retired in the open of `tag`.
    /// A free deferred past the heap's close does nothing (the next open's
    /// reclamation finds the block), even when it runs while the close
    /// does: it announces itself in `active` before it reads `open`, and
    /// the close clears `open` before it waits for `active` to drain
    /// (both SeqCst: one of the two sees the other).
    fn free_retired(&self, payload: usize, tag: u64) {
        /// Leaves `active` however the free ends (a panic too: a count left
        /// raised would make every later close of the slot wait forever).
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                // Release: this free's accesses before the close that waits
                // on it.
                self.0.fetch_sub(1, Ordering::Release);
            }
        }
        let active = &self.active[Self::shard()];
        active.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave(active);
        if self.open.load(Ordering::SeqCst) && tag != 0 && tag == self.tag() {
            self.release(payload, BlockState::new(self.current(), BlockState::RETIRED).bits());
        }
    }

    /// Move a block from state `from` to free and onto a free list.
    fn release(&self, payload: usize, from: u64) {
        if !self.open.load(Ordering::Acquire) {
            return;
        }
        let inc = self.current();
        let free = BlockState::new(inc, BlockState::FREE).bits();
        if self.state_of(payload).compare_exchange(from, free, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.push_free(payload);
        }
    }

    fn push_free(&self, payload: usize) {
        let slab = (payload - self.lo()) / SLAB;
        let h = self.slab(slab);
        match h.class.load(Ordering::Relaxed) {
            SlabHeader::LARGE => {
                let n = h.slabs.load(Ordering::Relaxed) as usize;
                self.large.lock().unwrap_or_else(|e| e.into_inner()).entry(n).or_default().push(payload);
            }
            c if (1..=CLASSES as u32).contains(&c) => {
                let c = c as usize - 1;
                self.free[c][Self::shard()].lock().unwrap_or_else(|e| e.into_inner()).push(payload);
            }
            _ => {} // a damaged slab header: the block is left out
        }
    }

    /// True if `payload` may be a block of this heap (in its slabs): a
    /// check before trusting a word read from the index's files.
    /// The block's start as its slab's header places blocks is checked.
    pub fn holds(&self, payload: usize) -> bool {
        self.block_bytes(payload).is_some()
    }

    /// The payload bytes of the block at `payload`, if it is one: inside
    /// the file, where its slab's class (or large run) puts a block.
    pub fn block_bytes(&self, payload: usize) -> Option<usize> {
        let lo = self.lo();
        if !(lo + SLAB + SlabHeader::BYTES + BlockState::BYTES..lo + self.bytes()).contains(&payload) {
            return None;
        }
        let slab = (payload - lo) / SLAB;
        let first = lo + slab * SLAB + SlabHeader::BYTES + BlockState::BYTES;
        let h = self.slab(slab);
        match h.class.load(Ordering::Relaxed) {
            SlabHeader::LARGE => {
                let slabs = h.slabs.load(Ordering::Relaxed) as usize;
                let fits = slabs >= 1 && slab + slabs <= self.bytes() / SLAB;
                (payload == first && fits).then(|| slabs * SLAB - SlabHeader::BYTES - BlockState::BYTES)
            }
            c if (1..=CLASSES as u32).contains(&c) => {
                let size = CLASS_BYTES[c as usize - 1];
                let at = payload - first;
                (at % size == 0 && at / size < (SLAB - SlabHeader::BYTES) / size)
                    .then(|| size - BlockState::BYTES)
            }
            _ => None,
        }
    }

    /// Mark a block the index reaches as this incarnation's (reclamation's
    /// walk).
    /// True if this call marked it (an earlier incarnation's live block).
    pub fn mark(&self, payload: usize) -> bool {
        // Planted bug (scripts/planted-bugs.sh): mark nothing, so the sweep
        // frees blocks the index still reaches.
        if cfg!(dlht_plant = "heap_no_mark") {
            return false;
        }
        if !self.holds(payload) {
            return false; // not a block of this heap (a damaged index): never freed
        }
        let inc = self.current();
        let st = self.state_of(payload);
        let cur = BlockState::from_bits(st.load(Ordering::Relaxed));
        if cur.state() == BlockState::LIVE && cur.incarnation() < inc {
            let now = BlockState::new(inc, BlockState::LIVE).bits();
            return st.compare_exchange(cur.bits(), now, Ordering::Relaxed, Ordering::Relaxed).is_ok();
        }
        false
    }

    /// Reclamation's sweep, after every block the index reaches is marked
    /// and every thread pinned during the walk has unpinned: free every
    /// block of an earlier incarnation below the bump pointer of the open
    /// (nothing reaches it), and put those already free on free lists.
    pub fn sweep(&self, slabs_at_open: usize, stop: &AtomicBool) {
        let inc = self.current();
        let free = BlockState::new(inc, BlockState::FREE).bits();
        let mut freed = 0;
        let mut s = 1;
        while s < slabs_at_open {
            if !self.open.load(Ordering::Acquire) || stop.load(Ordering::Relaxed) {
                return; // closing: the next open's reclamation does it all
            }
            let h = self.slab(s);
            let class = h.class.load(Ordering::Relaxed);
            let (blocks, size, step) = match class {
                0 => {
                    self.free_slabs.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                    s += 1;
                    continue;
                }
                SlabHeader::LARGE => {
                    let n = (h.slabs.load(Ordering::Relaxed) as usize).max(1);
                    if s + n > slabs_at_open {
                        break; // a damaged header: leave the rest
                    }
                    (1, 0, n)
                }
                c if (c as usize) <= CLASSES => {
                    let size = CLASS_BYTES[c as usize - 1];
                    ((SLAB - SlabHeader::BYTES) / size, size, 1)
                }
                _ => {
                    s += 1; // a damaged header: leave the slab
                    continue;
                }
            };
            let first = self.lo() + s * SLAB + SlabHeader::BYTES + BlockState::BYTES;
            for i in 0..blocks {
                let p = first + i * size;
                let st = self.state_of(p);
                let cur = BlockState::from_bits(st.load(Ordering::Relaxed));
                if cur.incarnation() >= inc {
                    continue; // this open's: marked, or on a list already
                }
                if st.compare_exchange(cur.bits(), free, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                    if cur.state() != BlockState::FREE {
                        freed += 1;
                    }
                    self.push_free(p);
                }
            }
            s += step;
        }
        self.reclaimed.store(freed, Ordering::Relaxed);
        self.reclaim_done.store(true, Ordering::Release);
    }

    /// Slabs handed out so far (the bump pointer).
    pub fn slabs_used(&self) -> usize {
        self.header().next_slab.load(Ordering::Relaxed) as usize
    }

    /// What reclamation has done in this incarnation.
    pub fn reclaim_state(&self) -> HeapReclaim {
        HeapReclaim {
            blocks_freed: self.reclaimed.load(Ordering::Relaxed),
            done: self.reclaim_done.load(Ordering::Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_their_sizes() {
        assert_eq!(size_of::<SlabHeader>(), SlabHeader::BYTES);
        assert!(size_of::<HeapHeader>() <= PAGE);
        assert_eq!(core::mem::offset_of!(HeapHeader, base), 24);
    }

    #[test]
    fn block_states_round_trip() {
        for (inc, st) in
            [(0, BlockState::FREE), (1, BlockState::LIVE), (u32::MAX as u64, BlockState::RETIRED)]
        {
            let b = BlockState::new(inc, st);
            assert_eq!((b.incarnation(), b.state()), (inc, st));
            assert_eq!(BlockState::from_bits(b.bits()), b);
        }
    }

    #[test]
    fn classes_grow_and_fit_payloads() {
        assert!(CLASS_BYTES.windows(2).all(|w| w[0] < w[1] && w[1] % 16 == 0));
        assert_eq!(class_of(0), Some(0));
        assert_eq!(class_of(24), Some(0));
        assert_eq!(class_of(25), Some(1));
        assert_eq!(class_of(16384 - 8), Some(CLASSES - 1));
        assert_eq!(class_of(16384 - 7), None);
        assert_eq!(run_slabs(SLAB - 24), Some(1));
        assert_eq!(run_slabs(SLAB - 23), Some(2));
    }
}
