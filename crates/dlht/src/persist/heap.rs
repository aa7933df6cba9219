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
//! slab's class are in the file; free lists and free slabs are not
//! (rebuilt at open). A block's [`BlockState`] says free, live or retired,
//! with the *incarnation* (opens of the heap) that last set it. After each
//! open a pre-pass ([`Heap::prepass_step`], also run by allocations that
//! find no free block) frees at once every block an earlier incarnation
//! left free or retired (unreachable; after a crash, not those of the
//! incarnations before it, which a power loss can leave marked free while
//! the index still names them: see [`Heap::open`]), and gives back whole the slabs it
//! empties (they change class; their disk goes back to the file system:
//! [`Heap::trim`]). Blocks a crash leaked live — allocated but never
//! linked, or replaced but not yet retired — are found by the background
//! pass that follows (`allocator::persistent`'s `reclaim`): it marks every
//! block the index reaches with the new incarnation, waits until every
//! thread pinned during the walk has unpinned (so each removal of an old
//! block has marked it retired), then frees each block of an earlier
//! incarnation still live ([`Heap::sweep`]): none of them is reachable.
//! Every change of a state is a compare-and-swap, so the passes and the
//! ordinary free path never free one block twice.
//!
//! Why our own allocator: no crate allocates inside a caller's mapping
//! with crash-recoverable metadata (the general-purpose ones keep theirs
//! in process memory).

use super::files::{self, io, Pages};
use super::layout::{HeaderCrc, ENDIAN_CHECK, PAGE};
use crate::error::Error;
use crate::plant::{planted, Plant};
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
/// Version of the heap file's layout (2: the header names its map and
/// stamp and is checksummed; blocks are sealed; 3: slab headers are
/// checked).
pub const HEAP_LAYOUT_VERSION: u32 = 3;
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
    /// The map this heap belongs to (`MapHeader::map_id`).
    pub map_id: u64,
    /// CRC-32C of the header's bytes before this field.
    pub header_crc: u32,
    /// Reserved, zero.
    pub _pad: u32,
    /// The address the file is mapped at; 0 until the first open picks one.
    pub base: AtomicU64,
    /// Slabs handed out (slab 0 is this header): the bump pointer.
    pub next_slab: AtomicU64,
    /// Opens of the heap so far: blocks set in an earlier one than the
    /// current are reclaimed unless the index reaches them.
    pub incarnation: AtomicU64,
    /// The map's stamp when the heap was last stamped
    /// (`persist::layout::Stamp`).
    pub stamp: AtomicU64,
    /// Free and retired marks of incarnations below this one are suspect:
    /// set to the new incarnation by an open after a crash (see
    /// [`Heap::open`]). Zero in files from before it was kept: nothing
    /// suspect, as then.
    pub suspect_below: AtomicU64,
}

impl HeaderCrc for HeapHeader {
    const CRC_BYTES: usize = core::mem::offset_of!(HeapHeader, header_crc);
}

impl HeapHeader {
    /// Where the stamp is, for the map's stamping.
    pub const STAMP_OFFSET: usize = core::mem::offset_of!(HeapHeader, stamp);

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
        if self.header_crc != self.crc() {
            return Err(Error::Corrupt { what: "the heap file's header is damaged (its checksum differs)" });
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

/// The first 16 bytes of a slab: what its blocks are, and a check of
/// that. Class 0, whatever the rest holds: a free slab (the bump pointer
/// passed it but no block was carved from it, or it was given back).
#[repr(C)]
pub struct SlabHeader {
    /// 0: free; `1 + c`: blocks of class `c`; [`SlabHeader::LARGE`]: a run.
    class: AtomicU32,
    /// Slabs of a large run (1 for a class slab).
    slabs: AtomicU32,
    /// `!(class | slabs << 32)`: a header whose check differs is damaged,
    /// and its blocks are neither served nor reused (a damaged run length
    /// would hand out, or give back, the live slabs after the run).
    check: AtomicU64,
}

/// What a slab's header says, checked ([`SlabHeader::kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlabKind {
    /// A free slab.
    Free,
    /// Blocks of size class `c`.
    Class(usize),
    /// A large run: one block over that many slabs (not checked to fit).
    Run(usize),
    /// No header a slab has: an unknown class, or a check that differs.
    Damaged,
}

impl SlabHeader {
    /// The class code of a large run: one block over whole slabs.
    pub const LARGE: u32 = u32::MAX;
    /// Bytes before the first block.
    pub const BYTES: usize = 16;

    fn check_of(class: u32, slabs: u32) -> u64 {
        !(u64::from(class) | u64::from(slabs) << 32)
    }

    /// What the header says; `order` is the class's load's (Acquire: with
    /// the block states written before it, see [`set`](Self::set)).
    fn kind(&self, order: Ordering) -> SlabKind {
        let class = self.class.load(order);
        if class == 0 {
            return SlabKind::Free;
        }
        // Relaxed: written before the class (see `set`).
        let slabs = self.slabs.load(Ordering::Relaxed);
        if self.check.load(Ordering::Relaxed) != Self::check_of(class, slabs) {
            return SlabKind::Damaged;
        }
        match class {
            Self::LARGE => SlabKind::Run(slabs as usize),
            c if c as usize <= CLASSES => SlabKind::Class(c as usize - 1),
            _ => SlabKind::Damaged,
        }
    }

    /// Write the header of a slab this thread carved as `kind` (a class's
    /// slab or a run), its class last.
    fn set(&self, kind: SlabKind) {
        let (class, slabs) = match kind {
            SlabKind::Class(c) => (1 + c as u32, 1),
            SlabKind::Run(n) => (Self::LARGE, n as u32),
            SlabKind::Free | SlabKind::Damaged => unreachable!("dlht invariant: a carve writes blocks"),
        };
        // Relaxed: the slab is this thread's alone; published with the
        // class below.
        self.slabs.store(slabs, Ordering::Relaxed);
        self.check.store(Self::check_of(class, slabs), Ordering::Relaxed);
        // Release: a scan that reads the class (Acquire) reads the rest,
        // and the block states the carve wrote before.
        self.class.store(class, Ordering::Release);
    }

    /// Zero the header of a slab given back (its class first: a crash
    /// after it leaves a free slab, whatever the rest holds).
    fn clear(&self) {
        // Relaxed: the slab is this thread's alone until the free set (a
        // mutex) hands it out.
        self.class.store(0, Ordering::Relaxed);
        self.slabs.store(0, Ordering::Relaxed);
        self.check.store(0, Ordering::Relaxed);
    }
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
    /// Bytes of the state word, just before the payload.
    pub const BYTES: usize = 8;
    /// Bytes before the payload: the [`Seal`], then the state word.
    pub const PREFIX: usize = Seal::BYTES + Self::BYTES;

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

/// A block's seal, the word before its state word: what the element was
/// written for — `checksum << 32 | fold(key word)`, the checksum a CRC-32C
/// of the key word and the element's fixed bytes. A read checks the fold
/// (an index word that points at another key's block, or a key word
/// damaged in the index, is not served) and, until the open's walk has
/// verified every block the index reaches, the checksum (damaged bytes are
/// not served either).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seal(u64);

impl Seal {
    /// Bytes of the seal.
    pub const BYTES: usize = 8;

    /// The seal of an element for key word `kw` whose checksum is `crc`.
    pub const fn new(kw: u64, crc: u32) -> Seal {
        Seal((crc as u64) << 32 | Self::fold(kw) as u64)
    }
    /// The 32 bits of a key word a seal keeps.
    pub const fn fold(kw: u64) -> u32 {
        (kw ^ kw >> 32) as u32
    }
    /// A word read from a block.
    pub const fn from_bits(w: u64) -> Seal {
        Seal(w)
    }
    /// The word to store.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// True if written for key word `kw`.
    pub const fn is_for(self, kw: u64) -> bool {
        self.0 as u32 == Self::fold(kw)
    }
    /// The element's checksum.
    pub const fn checksum(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// Block sizes (seal and state word included) of the size classes: 16-byte steps to
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
/// Steps of the open's pre-pass an allocation runs, at most, looking for
/// free blocks before it takes new space (see `Heap::prepass_step`).
const PREPASS_STEPS: usize = 16;

/// The class of a block holding `payload` bytes, or None for a large run.
fn class_of(payload: usize) -> Option<usize> {
    let need = payload.checked_add(BlockState::PREFIX)?;
    CLASS_BYTES.iter().position(|&b| b >= need)
}

/// Slabs of a large run holding `payload` bytes.
fn run_slabs(payload: usize) -> Option<usize> {
    Some(payload.checked_add(SlabHeader::BYTES + BlockState::PREFIX)?.div_ceil(SLAB))
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
    /// The header's `suspect_below`, as this open set it.
    suspect_below: AtomicU64,
    /// Free blocks (payload addresses) per class and shard.
    free: [[Mutex<Vec<usize>>; SHARDS]; CLASSES],
    /// Free large runs (payload addresses) by their slabs.
    large: Mutex<BTreeMap<usize, Vec<usize>>>,
    /// Free slabs below the bump pointer (never carved, or emptied and
    /// given back to the disk: see `give_slabs`), as runs: first slab →
    /// slabs, adjacent runs merged, so a large run finds contiguous slabs.
    free_slabs: Mutex<BTreeMap<usize, usize>>,
    /// The open's pre-pass over the slabs below the bump pointer at the
    /// open (see `prepass_step`), and whether it has finished.
    prepass: Mutex<Prepass>,
    prepass_done: AtomicBool,
    /// Free slabs given back in this open whose disk is not yet given to
    /// the file system (see `trim`), as runs.
    untrimmed: Mutex<BTreeMap<usize, usize>>,
    /// Punching holes failed (a file system without it): free slabs keep
    /// their disk, and holes are not looked for, for the rest of the open.
    no_punch: AtomicBool,
    /// Blocks freed by reclamation in this incarnation, and whether the
    /// pass has finished.
    reclaimed: AtomicUsize,
    reclaim_done: AtomicBool,
    /// The walk of this open has verified every block the index reaches.
    verified: AtomicBool,
    /// Damaged elements found (by reads and by the walk) in this open.
    damaged: AtomicUsize,
    file: Mutex<Option<Arc<File>>>,
}

/// The pre-pass of an open (see [`Heap::prepass_step`]): a cursor over the
/// slabs below the bump pointer at the open, and the slabs it found with
/// live blocks of an earlier incarnation, for the sweep.
#[derive(Default)]
struct Prepass {
    /// The next slab to scan (1 at the open).
    next: usize,
    /// The bump pointer at the open: the scan's end.
    end: usize,
    /// First slabs of the slabs and runs left to the sweep.
    sweep: Vec<usize>,
}

/// Add slabs `s..s + n` to a set of runs (first slab → slabs), merged
/// with the runs it touches.
fn add_run(runs: &mut BTreeMap<usize, usize>, s: usize, n: usize) {
    let (mut first, mut len) = (s, n);
    if let Some((&ps, &pl)) = runs.range(..s).next_back() {
        if ps + pl == s {
            runs.remove(&ps);
            (first, len) = (ps, pl + len);
        }
    }
    if let Some(nl) = runs.remove(&(s + n)) {
        len += nl;
    }
    runs.insert(first, len);
}

/// Take the part of slabs `s..s + n` that a set of runs holds out of it:
/// those pieces, as runs.
fn take_runs(runs: &mut BTreeMap<usize, usize>, s: usize, n: usize) -> Vec<(usize, usize)> {
    let end = s + n;
    let from = match runs.range(..s).next_back() {
        Some((&a, &l)) if a + l > s => a,
        _ => s,
    };
    let hit: Vec<(usize, usize)> = runs.range(from..end).map(|(&a, &l)| (a, l)).collect();
    let mut pieces = Vec::with_capacity(hit.len());
    for (a, l) in hit {
        runs.remove(&a);
        let (lo, hi) = (a.max(s), (a + l).min(end));
        if a < lo {
            runs.insert(a, lo - a);
        }
        if hi < a + l {
            runs.insert(hi, a + l - hi);
        }
        pieces.push((lo, hi - lo));
    }
    pieces
}

/// What [`Heap::reuse_or_take`] found.
enum Space {
    /// A free block, off its list.
    Block(usize),
    /// Fresh slabs, the first's index: to carve.
    Slabs(usize),
}

/// Where a slab's blocks are, by its header.
enum SlabLayout {
    /// Class 0: a free slab.
    Free,
    /// A class's slab, or a large run.
    Blocks(Blocks),
    /// A header no slab has: skip that many slabs, or (None) stop there.
    Damaged { skip: Option<usize> },
}

/// The blocks of a slab: `count` blocks `size` bytes apart (one, for a
/// run), over `slabs` slabs.
#[derive(Clone, Copy)]
struct Blocks {
    count: usize,
    size: usize,
    slabs: usize,
}

/// What the background reclamation of a heap has done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HeapReclaim {
    /// Blocks freed that no index entry reached (leaked by a crash, or
    /// waiting for epoch reclamation when the map was closed).
    pub blocks_freed: usize,
    /// The pass has finished.
    pub done: bool,
    /// Damaged elements found since the open, by reads and by the walk
    /// (each counted where it was met: a damaged element read twice
    /// before the walk removed it counts twice). None is served: a read
    /// finds no value there, and the walk takes the index entry out.
    pub damaged: usize,
}

/// The most bytes a heap may have (a quarter of the range bases are drawn
/// from).
const MAX_HEAP_BYTES: u64 = (BASE_HIGH - BASE_LOW) as u64 / 4;
/// Incarnations a valid heap header names are below this (a damaged word
/// is refused; the state word keeps 62 bits of it).
const INCARNATION_LIMIT: u64 = 1 << 48;

impl Heap {
    /// Create `dir/heap.dlht` of `bytes` (rounded up to slabs; sparse).
    pub fn create(dir: &Path, bytes: u64, map_id: u64) -> Result<(), Error> {
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
        h.map_id = map_id;
        h.header_crc = h.crc();
        h.next_slab.store(1, Ordering::Relaxed);
        m.sync()?;
        file.sync_all().map_err(io("syncing the heap file"))?;
        super::mirror::file_synced(&file);
        Ok(())
    }

    /// Check `dir/heap.dlht`'s header without changing anything (before
    /// the index is opened and recovered, so a map whose heap is refused is
    /// left as it was): a heap of this layout, of the map and stamp `stamp`
    /// gives (a heap of another map, or an older copy of this map's, is
    /// refused).
    pub fn check_file(dir: &Path, stamp: &super::layout::Stamp) -> Result<(), Error> {
        let (file, _, _) = Self::header_of(dir)?;
        let h = files::Mapping::new(&file, 0, PAGE)?;
        // SAFETY: as in `header_of`.
        let h = unsafe { &*(h.ptr() as *const HeapHeader) };
        // Relaxed: read before the heap is opened in this process.
        stamp.check(h.map_id, h.stamp.load(Ordering::Relaxed), super::layout::HEAP_FILE_ERRORS)
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
    /// start a new incarnation, and register it. `crashed`: the map was not
    /// closed cleanly (its recovery ran).
    ///
    /// After a crash, no FREE or RETIRED mark of an earlier incarnation is
    /// trusted to mean "unreachable": a block is marked so only after the
    /// index's CAS that unlinked it, an order a process crash keeps but a
    /// power loss need not (a sync of the heap between the CAS and the
    /// index's sync makes the mark durable and not the CAS). Such blocks
    /// are left to the walk, which marks those the index still reaches
    /// live again, and to the sweep, which frees the rest; reads serve
    /// them meanwhile. The bound persists until opens after it have swept
    /// them: a later clean open must not trust them either.
    ///
    /// `pages`: the mapping's advice ([`Pages::Small`] for a map synced per
    /// call).
    pub fn open(dir: &Path, crashed: bool, pages: Pages) -> Result<&'static Heap, Error> {
        let (file, base, bytes) = Self::header_of(dir)?;
        let _g = OPENING.lock().unwrap_or_else(|e| e.into_inner());
        let lo = match base {
            0 => Self::map_new(&file, bytes)?,
            b => Self::map_at(&file, b, bytes)?,
        };
        files::advise(lo, bytes, pages);
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
        // Relaxed: these and the fields below reach other threads with the
        // open flag (Release, at the end).
        heap.lo.store(lo, Ordering::Relaxed);
        heap.bytes.store(bytes, Ordering::Relaxed);
        heap.clear_lists();
        let h = heap.header();
        if base == 0 {
            h.base.store(lo as u64, Ordering::Relaxed);
        }
        // Planted bug (scripts/planted-bugs.sh): forget the bump pointer, as
        // if it were kept in memory only; new slabs then overwrite old ones.
        if planted(Plant::HeapBumpReset) {
            h.next_slab.store(1, Ordering::Relaxed);
        }
        // The pre-pass scans the slabs handed out before this open (it and
        // the fields above reach other threads with the open flag below).
        let end = h.next_slab.load(Ordering::Relaxed) as usize;
        *heap.prepass.lock().unwrap_or_else(|e| e.into_inner()) = Prepass { next: 1, end, sweep: Vec::new() };
        heap.prepass_done.store(end <= 1, Ordering::Relaxed);
        // Relaxed: only this thread touches the heap until it is published
        // open below.
        let inc = h.incarnation.load(Ordering::Relaxed) + 1;
        h.incarnation.store(inc, Ordering::Relaxed);
        heap.incarnation.store(inc, Ordering::Relaxed);
        // Planted bug (scripts/planted-bugs.sh): trust every mark after a
        // crash, as before the bound was kept.
        let crashed = crashed && !planted(Plant::HeapTrustsMarksAfterCrash);
        // (Clamped: a damaged bound above the incarnation would only leave
        // later marks to the sweep, but never needs to.)
        let suspect = h.suspect_below.load(Ordering::Relaxed).max(if crashed { inc } else { 0 }).min(inc);
        h.suspect_below.store(suspect, Ordering::Relaxed);
        heap.suspect_below.store(suspect, Ordering::Relaxed);
        heap.serial.store(SERIAL.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        heap.reclaimed.store(0, Ordering::Relaxed);
        heap.reclaim_done.store(false, Ordering::Relaxed);
        heap.verified.store(false, Ordering::Relaxed);
        heap.damaged.store(0, Ordering::Relaxed);
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
            suspect_below: AtomicU64::new(0),
            free: core::array::from_fn(|_| core::array::from_fn(|_| Mutex::new(Vec::new()))),
            large: Mutex::new(BTreeMap::new()),
            free_slabs: Mutex::new(BTreeMap::new()),
            prepass: Mutex::new(Prepass::default()),
            prepass_done: AtomicBool::new(true),
            untrimmed: Mutex::new(BTreeMap::new()),
            no_punch: AtomicBool::new(false),
            reclaimed: AtomicUsize::new(0),
            reclaim_done: AtomicBool::new(false),
            verified: AtomicBool::new(false),
            damaged: AtomicUsize::new(0),
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
        self.untrimmed.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.no_punch.store(false, Ordering::Relaxed); // a hint, per open
        *self.prepass.lock().unwrap_or_else(|e| e.into_inner()) = Prepass::default();
        self.prepass_done.store(true, Ordering::Relaxed); // a hint: see `prepass_step`
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

    fn seal_of(&self, payload: usize) -> &AtomicU64 {
        debug_assert!((self.lo() + SLAB..self.lo() + self.bytes()).contains(&payload));
        // SAFETY: every payload follows its block's seal and state word, in
        // the mapping.
        unsafe { &*((payload - BlockState::PREFIX) as *const AtomicU64) }
    }

    /// Seal the block at `payload`, filled, for key word `kw` (before it
    /// is published).
    pub fn seal(&self, payload: usize, kw: u64, crc: u32) {
        // Relaxed: published with the element by the index's release CAS.
        self.seal_of(payload).store(Seal::new(kw, crc).bits(), Ordering::Relaxed);
    }

    /// If `payload` is a block of this heap, allocated (live or retired),
    /// sealed for key word `kw`: its payload bytes and its seal's checksum.
    /// What a read checks before it trusts an index word (see [`Seal`]).
    #[inline]
    pub fn sealed_for(&self, kw: u64, payload: usize) -> Option<(usize, u32)> {
        let room = self.block_bytes(payload)?;
        let state = BlockState::from_bits(self.state_of(payload).load(Ordering::Relaxed));
        if state.state() == BlockState::FREE && !self.suspect(state) || state.incarnation() > self.current() {
            return None;
        }
        // Relaxed: the element was published to this thread by the index
        // word it came from (an acquire), after its seal.
        let seal = Seal::from_bits(self.seal_of(payload).load(Ordering::Relaxed));
        seal.is_for(kw).then_some((room, seal.checksum()))
    }

    /// True while reads must verify checksums: until the open's walk has
    /// verified every block the index reaches (blocks written since were
    /// sealed by this process).
    #[inline]
    pub fn verifies_reads(&self) -> bool {
        // Acquire: a read that sees the walk done, and then loads a word,
        // sees the walk's removal of every damaged word (pairs with
        // `set_verified`'s Release): it loads a word the walk verified, or
        // one sealed since; both are whole.
        !self.verified.load(Ordering::Acquire)
    }

    /// The open's walk has verified every block the index reaches.
    pub fn set_verified(&self) {
        self.verified.store(true, Ordering::Release); // see `verifies_reads`
    }

    /// Count a damaged element found by a read or by the walk.
    pub fn note_damaged(&self) {
        self.damaged.fetch_add(1, Ordering::Relaxed); // a count
    }

    /// The payload of slab `s`'s first block (a run's only one).
    fn first_block(&self, s: usize) -> usize {
        self.lo() + s * SLAB + SlabHeader::BYTES + BlockState::PREFIX
    }

    fn current(&self) -> u64 {
        // Relaxed: set before the heap was published open (Release/Acquire).
        self.incarnation.load(Ordering::Relaxed)
    }

    /// True for a FREE or RETIRED mark of an incarnation before a crash
    /// (see [`Heap::open`]): the block may still be reachable, and nothing
    /// hands it out before the sweep.
    fn suspect(&self, b: BlockState) -> bool {
        // Relaxed: as `current`.
        matches!(b.state(), BlockState::FREE | BlockState::RETIRED)
            && b.incarnation() < self.suspect_below.load(Ordering::Relaxed)
    }

    /// A block for `payload` bytes, live, 8-byte aligned.
    pub fn alloc(&self, payload: usize) -> Result<usize, Error> {
        let p = match class_of(payload) {
            Some(c) => self.alloc_small(c)?,
            None => self.alloc_large(payload)?,
        };
        super::crash::at(super::crash::CrashPoint::HeapAllocated);
        // Relaxed: the block is this thread's until it is published with
        // its element (the index's release CAS).
        self.state_of(p).store(BlockState::new(self.current(), BlockState::LIVE).bits(), Ordering::Relaxed);
        Ok(p)
    }

    fn shard() -> usize {
        thread_local!(static SHARD: usize = {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS // any spread will do
        });
        SHARD.with(|s| *s)
    }

    /// A free block of class `c` from this thread's list, or half of
    /// another shard's.
    fn pop_small(&self, c: usize) -> Option<usize> {
        let me = Self::shard();
        if let Some(p) = self.free[c][me].lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Some(p);
        }
        for k in 1..SHARDS {
            let mut other = self.free[c][(me + k) % SHARDS].lock().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = other.pop() {
                let half = other.len() / 2;
                let moved: Vec<usize> = other.drain(..half).collect();
                drop(other);
                self.free[c][me].lock().unwrap_or_else(|e| e.into_inner()).extend(moved);
                return Some(p);
            }
        }
        None
    }

    fn alloc_small(&self, c: usize) -> Result<usize, Error> {
        if let Some(p) = self.pop_small(c) {
            return Ok(p);
        }
        let slab = match self.reuse_or_take(1, || self.pop_small(c))? {
            Space::Block(p) => return Ok(p),
            Space::Slabs(s) => s,
        };
        // Carve the slab: every block's state first, FREE in this open (no
        // byte of an earlier use of the slab is taken for a state), then
        // its class. A crash before the class leaves a free slab (class 0,
        // whatever its blocks hold); after it, free blocks of this open,
        // which the next open's pre-pass frees.
        let size = CLASS_BYTES[c];
        let n = (SLAB - SlabHeader::BYTES) / size;
        let first = self.first_block(slab);
        let free = BlockState::new(self.current(), BlockState::FREE).bits();
        for i in 0..n {
            // Relaxed: the slab is this thread's alone; published to scans
            // with its class (`SlabHeader::set`).
            self.state_of(first + i * size).store(free, Ordering::Relaxed);
        }
        super::crash::at(super::crash::CrashPoint::HeapCarving);
        self.slab(slab).set(SlabKind::Class(c));
        let mut list = self.free[c][Self::shard()].lock().unwrap_or_else(|e| e.into_inner());
        list.extend((1..n).rev().map(|i| first + i * size));
        Ok(first)
    }

    /// A free large run of `slabs` slabs.
    fn pop_large(&self, slabs: usize) -> Option<usize> {
        self.large.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&slabs).and_then(Vec::pop)
    }

    fn alloc_large(&self, payload: usize) -> Result<usize, Error> {
        let slabs = run_slabs(payload).ok_or(Error::AllocFailed { bytes: payload })?;
        if let Some(p) = self.pop_large(slabs) {
            return Ok(p);
        }
        let first = match self.reuse_or_take(slabs, || self.pop_large(slabs))? {
            Space::Block(p) => return Ok(p),
            Space::Slabs(s) => s,
        };
        // As a carve: the block's state first, then the run's header (a
        // crash before it leaves free slabs; after it, a free run).
        let p = self.first_block(first);
        // Relaxed: as in `alloc_small`.
        self.state_of(p).store(BlockState::new(self.current(), BlockState::FREE).bits(), Ordering::Relaxed);
        super::crash::at(super::crash::CrashPoint::HeapCarving);
        self.slab(first).set(SlabKind::Run(slabs));
        Ok(p)
    }

    /// Space for a block when its free list has none: before new space,
    /// what the last opens freed or left retired, so a short open reuses
    /// it whether or not the background pass has reached it yet — up to
    /// [`PREPASS_STEPS`] steps of the open's pre-pass, each followed by
    /// `pop` (the block's free list), stopping at `n` contiguous free
    /// slabs; else `n` slabs from the bump pointer.
    fn reuse_or_take(&self, n: usize, pop: impl Fn() -> Option<usize>) -> Result<Space, Error> {
        for _ in 0..PREPASS_STEPS {
            if let Some(s) = self.take_free_slabs(n) {
                return Ok(Space::Slabs(s));
            }
            if !self.prepass_step() {
                break;
            }
            if let Some(p) = pop() {
                return Ok(Space::Block(p));
            }
        }
        self.take_slabs(n).map(Space::Slabs)
    }

    /// `n` contiguous fresh slabs: the lowest free run below the bump
    /// pointer long enough, or the bump's.
    fn take_slabs(&self, n: usize) -> Result<usize, Error> {
        if let Some(s) = self.take_free_slabs(n) {
            return Ok(s);
        }
        let total = (self.bytes() / SLAB) as u64;
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

    /// The first of `n` contiguous free slabs, taken off the free set.
    fn take_free_slabs(&self, n: usize) -> Option<usize> {
        let mut f = self.free_slabs.lock().unwrap_or_else(|e| e.into_inner());
        let (&s, &len) = f.iter().find(|&(_, &len)| len >= n)?;
        f.remove(&s);
        if len > n {
            f.insert(s + n, len - n);
        }
        Some(s)
    }

    /// Add slabs `s..s + n` to the free set.
    fn add_free_slabs(&self, s: usize, n: usize) {
        add_run(&mut self.free_slabs.lock().unwrap_or_else(|e| e.into_inner()), s, n);
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
            if b.state() != BlockState::LIVE && !self.suspect(b) {
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
        // Relaxed: the state word alone decides who frees the block.
        if self.state_of(payload).compare_exchange(from, free, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.push_free(&[payload]);
        }
    }

    /// Put free blocks of one slab (or run) on their free list.
    fn push_free(&self, blocks: &[usize]) {
        let Some(&payload) = blocks.first() else { return };
        let slab = (payload - self.lo()) / SLAB;
        // Relaxed: the slab's header was written before its blocks were
        // handed out, and this thread owns them now (it won their states).
        match self.slab(slab).kind(Ordering::Relaxed) {
            SlabKind::Run(n) => {
                self.large.lock().unwrap_or_else(|e| e.into_inner()).entry(n).or_default().extend(blocks);
            }
            SlabKind::Class(c) => {
                self.free[c][Self::shard()].lock().unwrap_or_else(|e| e.into_inner()).extend(blocks);
            }
            SlabKind::Free | SlabKind::Damaged => {} // a damaged slab header: the blocks are left out
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
        if !(self.first_block(1)..lo + self.bytes()).contains(&payload) {
            return None;
        }
        let slab = (payload - lo) / SLAB;
        let first = self.first_block(slab);
        // Relaxed: a block reached through an index word (an acquire) was
        // published after its slab's header was written.
        match self.slab(slab).kind(Ordering::Relaxed) {
            SlabKind::Run(slabs) => {
                let fits = slabs >= 1 && slab + slabs <= self.bytes() / SLAB;
                (payload == first && fits).then(|| slabs * SLAB - SlabHeader::BYTES - BlockState::PREFIX)
            }
            SlabKind::Class(c) => {
                let size = CLASS_BYTES[c];
                let at = payload - first;
                (at % size == 0 && at / size < (SLAB - SlabHeader::BYTES) / size)
                    .then(|| size - BlockState::PREFIX)
            }
            SlabKind::Free | SlabKind::Damaged => None,
        }
    }

    /// Mark a block the index reaches as this incarnation's (reclamation's
    /// walk), live (a suspect mark of a crashed incarnation's too: see
    /// [`Heap::open`]).
    /// True if this call marked it (an earlier incarnation's block).
    pub fn mark(&self, payload: usize) -> bool {
        // Planted bug (scripts/planted-bugs.sh): mark nothing, so the sweep
        // frees blocks the index still reaches.
        if planted(Plant::HeapNoMark) {
            return false;
        }
        if !self.holds(payload) {
            return false; // not a block of this heap (a damaged index): never freed
        }
        let inc = self.current();
        let st = self.state_of(payload);
        // Relaxed: the state word alone is contended (a CAS decides).
        let cur = BlockState::from_bits(st.load(Ordering::Relaxed));
        if (cur.state() == BlockState::LIVE || self.suspect(cur)) && cur.incarnation() < inc {
            let now = BlockState::new(inc, BlockState::LIVE).bits();
            return st.compare_exchange(cur.bits(), now, Ordering::Relaxed, Ordering::Relaxed).is_ok();
        }
        false
    }

    /// Where the blocks of slab `s` are, by its header (`end`: the bump
    /// pointer at the open).
    fn layout_of(&self, s: usize, end: usize) -> SlabLayout {
        // Acquire: a slab carved or made a run in this open is read with
        // the states written before its class (see `SlabHeader::set`).
        // Scans meet none (free slabs are behind the pre-pass's cursor,
        // and the sweep visits only slabs holding live blocks); this keeps
        // one sound if they did.
        match self.slab(s).kind(Ordering::Acquire) {
            SlabKind::Free => SlabLayout::Free,
            SlabKind::Run(n) if n == 0 || s + n > end => SlabLayout::Damaged { skip: None },
            SlabKind::Run(n) => SlabLayout::Blocks(Blocks { count: 1, size: 0, slabs: n }),
            SlabKind::Class(c) => {
                let size = CLASS_BYTES[c];
                SlabLayout::Blocks(Blocks { count: (SLAB - SlabHeader::BYTES) / size, size, slabs: 1 })
            }
            SlabKind::Damaged => SlabLayout::Damaged { skip: Some(1) },
        }
    }

    /// One step of the open's pre-pass over the slabs below the bump
    /// pointer at the open: the slab (or large run, or run of holes) at its
    /// cursor. False once the pre-pass is over; each step runs whole under
    /// the cursor's lock, so none runs after any thread has seen it over.
    /// The reclaiming thread runs it to its end before the walk; an
    /// allocation that finds no free block runs a few steps first.
    ///
    /// A block FREE or RETIRED in an earlier incarnation is unreachable
    /// (one is marked RETIRED only after the index's CAS that unlinked it;
    /// a FREE one is on no list of this open), so it is freed at once,
    /// without waiting for the walk: a CAS to FREE in this incarnation,
    /// which alone grants the right to put it on a free list, so no block
    /// is handed out twice (the sweep and the ordinary frees CAS too).
    /// Slabs never carved (class 0, holes among them) are free slabs; a
    /// slab (or run) whose every block this step freed goes back whole
    /// (`settle`). Live blocks of an earlier incarnation are left to the
    /// sweep, which visits only the slabs they are in.
    ///
    /// A crash at any point of a step leaves states FREE in this
    /// incarnation, or as they were, or a slab given back (its header
    /// zero): the next open, a later incarnation, finds each of them free
    /// again.
    pub fn prepass_step(&self) -> bool {
        // Acquire: a thread that sees the pre-pass over sees what its last
        // step did (the Release below).
        if self.prepass_done.load(Ordering::Acquire) {
            return false;
        }
        let mut pp = self.prepass.lock().unwrap_or_else(|e| e.into_inner());
        let (s, end) = (pp.next, pp.end);
        if s >= end {
            return false;
        }
        let holes = self.holes_from(s, end);
        pp.next = if holes > 0 {
            // Never written, or given back: free slabs, read no further.
            self.add_free_slabs(s, holes);
            s + holes
        } else {
            match self.layout_of(s, end) {
                SlabLayout::Free => {
                    // Free, but holding disk (given back by an open that
                    // ended before its trim, or a carve a crash cut short
                    // before its class): trimmed later.
                    self.add_free_slabs(s, 1);
                    self.add_untrimmed(s, 1);
                    s + 1
                }
                SlabLayout::Damaged { skip: Some(k) } => s + k,
                // A run that does not fit: the rest is left alone (as the
                // walk leaves a damaged index's words).
                SlabLayout::Damaged { skip: None } => end,
                SlabLayout::Blocks(b) => {
                    // A damaged state word (neither state) is left out, as
                    // are suspect marks (left to the walk and the sweep).
                    let unreachable = |b: BlockState| {
                        matches!(b.state(), BlockState::FREE | BlockState::RETIRED) && !self.suspect(b)
                    };
                    if self.free_earlier(s, b, &unreachable) {
                        pp.sweep.push(s);
                    }
                    s + b.slabs
                }
            }
        };
        if pp.next >= end {
            // Release: see the Acquire above.
            self.prepass_done.store(true, Ordering::Release);
        }
        true
    }

    /// Free the blocks `b` of slab `s` that an earlier incarnation left in
    /// a state `frees` takes: each CASed to FREE in this incarnation, which alone
    /// grants the right to put it on a free list, then settled (`settle`).
    /// The pre-pass frees those FREE or RETIRED (unless suspect), the sweep
    /// every one left. True if it left a block of an earlier incarnation
    /// live or suspect (the pre-pass leaves those to the sweep).
    fn free_earlier(&self, s: usize, b: Blocks, frees: &dyn Fn(BlockState) -> bool) -> bool {
        let inc = self.current();
        let free = BlockState::new(inc, BlockState::FREE).bits();
        let first = self.first_block(s);
        let (mut won, mut freed, mut left_live) = (Vec::new(), 0, false);
        for i in 0..b.count {
            let p = first + i * b.size;
            let st = self.state_of(p);
            // Relaxed: the state word alone decides who frees the block
            // (the CAS below).
            let cur = BlockState::from_bits(st.load(Ordering::Relaxed));
            if cur.incarnation() >= inc {
                continue; // this open's: marked, or on a list already
            }
            if !frees(cur) {
                left_live |= cur.state() == BlockState::LIVE || self.suspect(cur);
                continue;
            }
            if st.compare_exchange(cur.bits(), free, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                freed += usize::from(cur.state() != BlockState::FREE);
                won.push(p);
            }
        }
        if !won.is_empty() {
            super::crash::at(super::crash::CrashPoint::HeapReclaiming);
        }
        self.settle(s, b, won);
        self.reclaimed.fetch_add(freed, Ordering::Relaxed); // a count
        left_live
    }

    /// Slabs from `s` (below `end`) that are holes in the file (never
    /// written, or given back): free slabs whose headers need no reading.
    /// 0 where the file system cannot say (then the headers are read).
    fn holes_from(&self, s: usize, end: usize) -> usize {
        if self.no_punch.load(Ordering::Relaxed) {
            return 0; // a hint: holes are not made here, nor looked for
        }
        let Some(f) = self.file() else { return 0 };
        #[cfg(target_os = "linux")]
        {
            // SAFETY: our own descriptor; SEEK_DATA only moves its offset,
            // which nothing of the heap uses (it is mapped, and synced).
            let d = unsafe { libc::lseek(f.as_raw_fd(), (s * SLAB) as libc::off_t, libc::SEEK_DATA) };
            if d >= 0 {
                // Clamped: an answer before `s` (which no file system should
                // give: a FUSE one might) is data at `s`, never slabs
                // outside the file.
                return (d as usize / SLAB).clamp(s, end) - s;
            }
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                return end - s; // no data up to the file's end
            }
        }
        let _ = f;
        0
    }

    /// Blocks `won` of the slab (or run) at `s`, whose blocks are `b`:
    /// this thread set each FREE in this incarnation with a CAS and put
    /// none on a list. If that is every block, the slab is nobody's but
    /// this thread's: it goes back whole (`give_slabs`), so a slab changes
    /// class once emptied; otherwise the blocks go on free lists.
    fn settle(&self, s: usize, b: Blocks, won: Vec<usize>) {
        if won.len() == b.count {
            self.give_slabs(s, b.slabs);
        } else if !won.is_empty() {
            self.push_free(&won);
        }
    }

    /// Give slabs `s..s + n` — a slab or a run, every block free and this
    /// thread's alone — back as free slabs: each slab's header is zeroed
    /// (class 0: a free slab; carving writes every block's state before
    /// the class, so no other byte needs clearing), a run's later slabs
    /// first (their headers were payload) and its first slab, whose header
    /// says what they are, last: a crash in between leaves the run whole
    /// and free, for the next open. Only then are they handed out; their
    /// disk is given back later, if they are still free then (`trim`).
    fn give_slabs(&self, s: usize, n: usize) {
        (s + 1..s + n).for_each(|i| self.slab(i).clear());
        super::crash::at(super::crash::CrashPoint::HeapGivingBack);
        self.slab(s).clear();
        self.add_free_slabs(s, n);
        self.add_untrimmed(s, n);
    }

    /// Note slabs `s..s + n`, free, as holding disk to give back.
    fn add_untrimmed(&self, s: usize, n: usize) {
        if !self.no_punch.load(Ordering::Relaxed) {
            // (a hint: see `punch`)
            add_run(&mut self.untrimmed.lock().unwrap_or_else(|e| e.into_inner()), s, n);
        }
    }

    /// Give the disk of the free slabs given back in this open to the file
    /// system: each run still free is taken off the free set (so no one
    /// carves it meanwhile), a hole is punched over it (it reads as zeros:
    /// still free slabs), and it goes back. A punch costs about as much
    /// for one slab as for many (a file system's transaction, the
    /// mapping's TLB shootdown), so this runs in the background, after the
    /// pre-pass and the sweep, and at a close, not on the allocation path;
    /// a crash before it leaves free slabs holding disk, which the next
    /// open's pre-pass finds (class 0, not holes) and trims.
    /// `stop`: asked before each run (true: the rest is left).
    pub fn trim(&self, stop: &dyn Fn() -> bool) {
        loop {
            // (Relaxed: a hint, see `punch`.)
            if stop() || self.no_punch.load(Ordering::Relaxed) {
                return;
            }
            let Some((s, n)) = self.untrimmed.lock().unwrap_or_else(|e| e.into_inner()).pop_first() else {
                return;
            };
            let pieces = take_runs(&mut self.free_slabs.lock().unwrap_or_else(|e| e.into_inner()), s, n);
            if !pieces.is_empty() {
                super::crash::at(super::crash::CrashPoint::HeapTrimming);
            }
            for &(a, k) in &pieces {
                self.punch(a, k);
            }
            let mut f = self.free_slabs.lock().unwrap_or_else(|e| e.into_inner());
            for (a, k) in pieces {
                add_run(&mut f, a, k);
            }
        }
    }

    /// Punch a hole over slabs `s..s + n` of the heap file, keeping its
    /// size. If that fails they stay free slabs with their disk; a file
    /// system without holes is not asked again in this open.
    fn punch(&self, s: usize, n: usize) {
        if self.no_punch.load(Ordering::Relaxed) {
            return; // a hint: trying again is harmless
        }
        let Some(f) = self.file() else { return };
        #[cfg(target_os = "linux")]
        loop {
            let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
            let (at, len) = ((s * SLAB) as libc::off_t, (n * SLAB) as libc::off_t);
            // SAFETY: our own descriptor, a range inside the file (its size
            // kept, so the mapping stays whole) of free slabs no thread
            // reads or writes (see `trim`); the mapping reads zeros there.
            if unsafe { libc::fallocate(f.as_raw_fd(), mode, at, len) } == 0 {
                return;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP | libc::ENOSYS) => break,
                _ => return,
            }
        }
        let _ = f;
        self.no_punch.store(true, Ordering::Relaxed); // see above
    }

    /// Reclamation's sweep, after the pre-pass, after every block the index
    /// reaches is marked and every thread pinned during the walk has
    /// unpinned: free every block of an earlier incarnation left in the
    /// slabs the pre-pass found live blocks in (nothing reaches it: a live
    /// block the walk did not mark was allocated but never linked, or
    /// replaced, before a crash). Free slabs and blocks already free or
    /// retired were the pre-pass's. Run by the reclaiming thread, which a
    /// close stops (`stop`) and joins before the heap is closed.
    pub fn sweep(&self, stop: &AtomicBool) {
        let (slabs, end) = {
            let mut pp = self.prepass.lock().unwrap_or_else(|e| e.into_inner());
            if pp.next < pp.end {
                return; // not after the pre-pass (stopped): nothing to do
            }
            (std::mem::take(&mut pp.sweep), pp.end)
        };
        for s in slabs {
            // Relaxed: a request, polled (it publishes nothing).
            if stop.load(Ordering::Relaxed) {
                return; // closing: the next open's reclamation does it all
            }
            // A slab with a live block is not given back or carved by
            // anyone but this sweep: its layout is the pre-pass's.
            if let SlabLayout::Blocks(b) = self.layout_of(s, end) {
                self.free_earlier(s, b, &|_| true);
            }
        }
        // Release: the counts before `done` (`reclaim_state`'s Acquire).
        self.reclaim_done.store(true, Ordering::Release);
    }

    /// What reclamation has done in this incarnation.
    pub fn reclaim_state(&self) -> HeapReclaim {
        // Relaxed counts; Acquire: once done, its counts are whole.
        HeapReclaim {
            blocks_freed: self.reclaimed.load(Ordering::Relaxed),
            done: self.reclaim_done.load(Ordering::Acquire),
            damaged: self.damaged.load(Ordering::Relaxed),
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
        assert_eq!(core::mem::offset_of!(HeapHeader, base), 40);
        // Kept after the stamp: zero (nothing suspect) in older files.
        assert_eq!(core::mem::offset_of!(HeapHeader, suspect_below), 72);
        assert_eq!(HeapHeader::CRC_BYTES, 32);
    }

    #[test]
    fn seals_round_trip() {
        for (kw, crc) in [(0u64, 0u32), (1, u32::MAX), (u64::MAX, 7), (0xdead_beef_0000_0001, 0x1234_5678)] {
            let s = Seal::from_bits(Seal::new(kw, crc).bits());
            assert!(s.is_for(kw) && !s.is_for(kw ^ 1) && !s.is_for(kw ^ 1 << 40));
            assert_eq!(s.checksum(), crc);
        }
        assert_eq!(BlockState::PREFIX, 16);
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
    fn slab_headers_are_checked() {
        let h = SlabHeader { class: AtomicU32::new(0), slabs: AtomicU32::new(0), check: AtomicU64::new(0) };
        assert_eq!(h.kind(Ordering::Relaxed), SlabKind::Free);
        for kind in [SlabKind::Class(0), SlabKind::Class(CLASSES - 1), SlabKind::Run(1), SlabKind::Run(300)] {
            h.set(kind);
            assert_eq!(h.kind(Ordering::Relaxed), kind);
            // Any one bit flipped: damaged, or free where the class is gone.
            for bit in 0..128 {
                let flip = |h: &SlabHeader| match bit {
                    0..32 => drop(h.class.fetch_xor(1 << bit, Ordering::Relaxed)),
                    32..64 => drop(h.slabs.fetch_xor(1 << (bit - 32), Ordering::Relaxed)),
                    _ => drop(h.check.fetch_xor(1 << (bit - 64), Ordering::Relaxed)),
                };
                flip(&h);
                let got = h.kind(Ordering::Relaxed);
                let free = h.class.load(Ordering::Relaxed) == 0;
                assert!(
                    got == SlabKind::Damaged || free && got == SlabKind::Free,
                    "{kind:?}, bit {bit}: {got:?}"
                );
                flip(&h);
            }
            h.clear();
            assert_eq!(h.kind(Ordering::Relaxed), SlabKind::Free);
        }
    }

    #[test]
    fn free_runs_merge_and_split() {
        let mut runs = BTreeMap::new();
        for (s, n) in [(10, 2), (14, 1), (12, 2), (20, 3), (9, 1)] {
            add_run(&mut runs, s, n);
        }
        assert_eq!(runs.iter().map(|(&a, &l)| (a, l)).collect::<Vec<_>>(), [(9, 6), (20, 3)]);
        // Taken: the part of the range the runs hold, split off them.
        assert_eq!(take_runs(&mut runs, 11, 11), [(11, 4), (20, 2)]);
        assert_eq!(runs.iter().map(|(&a, &l)| (a, l)).collect::<Vec<_>>(), [(9, 2), (22, 1)]);
        assert_eq!(take_runs(&mut runs, 0, 9), []);
        assert_eq!(take_runs(&mut runs, 0, 100), [(9, 2), (22, 1)]);
        assert!(runs.is_empty());
    }

    #[test]
    fn classes_grow_and_fit_payloads() {
        assert!(CLASS_BYTES.windows(2).all(|w| w[0] < w[1] && w[1] % 16 == 0));
        assert_eq!(class_of(0), Some(0));
        assert_eq!(class_of(16), Some(0));
        assert_eq!(class_of(17), Some(1));
        assert_eq!(class_of(16384 - 16), Some(CLASSES - 1));
        assert_eq!(class_of(16384 - 15), None);
        assert_eq!(run_slabs(SLAB - 32), Some(1));
        assert_eq!(run_slabs(SLAB - 31), Some(2));
    }
}
