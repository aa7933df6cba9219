//! The index (paper §3.1): an array of bins plus a shared link-bucket array.

use super::alloc::ZeroedArray;
use super::bucket::{LinkBucket, PrimaryBucket, Slot};
use super::header::{BinState, Header};
use super::link_meta::{LinkKind, LinkMeta, SlotHome};
use super::markers::Markers;
use super::threading::{fetch_add, Shared, Threading};
use crate::error::Error;
#[cfg(not(loom))]
use crate::persist::index_file::{FileSet, IndexFile};
#[cfg(not(loom))]
use crate::persist::layout::IndexHeader;
use crate::sync::{unmodelled, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use core::marker::PhantomData;
use crossbeam_utils::CachePadded;
use std::sync::Arc;

/// Fewest bins an index has: two, so both bin parities exist (see markers).
pub const MIN_BINS: usize = 2;
/// Most bins an index may have (a 32 GiB index), so link indexes fit 32 bits.
/// The crate's unit tests use 2^14, so that growing into the cap is testable.
pub const MAX_BINS: usize = if cfg!(test) { 1 << 14 } else { 1 << 29 };
/// One link bucket per this many bins is available to inserts (the paper
/// has 8 in its design section and bins/5 in its evaluation). Five lets an
/// index fill to about 2.3 keys per bin (60% of its slots, the occupancy
/// the paper keeps before a resize) before its links run out; link buckets
/// are reserved, not touched, so the unused ones cost no memory.
pub const BINS_PER_LINK: usize = 5;

/// Link buckets every index has beyond bins / [`BINS_PER_LINK`]: a small
/// index sees too few keys for the average to hold (eight bins at two keys
/// each need two links one time in three), and a few spare links in a
/// small index cost nothing.
const LINK_FLOOR: usize = if cfg!(loom) { 0 } else { 8 };

/// The link buckets inserts may claim in a new index of `bins` bins: its
/// soft limit as built, and what its capacity counts.
fn nominal_links(bins: usize) -> usize {
    (bins / BINS_PER_LINK + LINK_FLOOR).max(1)
}

/// The most link buckets inserts may claim in an index of `bins` bins
/// however often the soft limit is raised: one per bin. (A map with a link
/// on every bin is past the keys per bin that grow it.)
fn link_soft_cap(bins: usize) -> usize {
    bins + LINK_FLOOR
}

/// A raise of the soft limit adds bins / this many links (at least
/// [`LINK_FLOOR`]): sixteen raises reach the cap from nothing, so the
/// rare path that raises it runs a few times per index, not per insert.
const BINS_PER_LINK_RAISE: usize = 16;

/// Spare link buckets beyond the worst case, for claims lost to races.
const LINK_SLACK: usize = if cfg!(loom) { 2 } else { 4096 };

/// Who is claiming link buckets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Claimant {
    /// A user insert: bounded by the soft limit (about bins / 5); running out
    /// triggers a resize (bounded chaining).
    Insert,
    /// A transfer into this index: may go past the soft limit up to the hard
    /// capacity, which is reserved (not committed) for the worst case, so a
    /// transfer can never run out.
    Transfer,
}

/// Per-index resize coordination (used by `resize`).
pub struct ResizeState {
    /// [`IDLE`](Self::IDLE), [`ALLOCATING`](Self::ALLOCATING),
    /// [`PUBLISHED`](Self::PUBLISHED) or [`SNAPSHOT`](Self::SNAPSHOT).
    pub phase: AtomicUsize,
    /// Next chunk of bins to hand out for transfer.
    pub next_chunk: AtomicUsize,
    /// Chunks fully transferred.
    pub chunks_done: AtomicUsize,
    /// A shrink's fallback: an index as large as this one, which targets
    /// too full to merge are copied into (see `transfer_target`). Null for a
    /// grow, and once the shrink's publisher took it.
    pub fallback: AtomicPtr<Index>,
}

impl ResizeState {
    /// No resize under way.
    pub const IDLE: usize = 0;
    /// A thread is allocating the next index.
    pub const ALLOCATING: usize = 1;
    /// The next index is attached: transfer chunks may be claimed.
    pub const PUBLISHED: usize = 2;
    /// A snapshot holds the index: no resize can start (growers wait).
    pub const SNAPSHOT: usize = 3;
}

/// An array of bins and its link buckets.
pub struct Index {
    bins: ZeroedArray<PrimaryBucket>,
    mask: usize,
    links: ZeroedArray<LinkBucket>,
    /// Link buckets inserts may use: bins / 5 + a floor, raised (up to
    /// [`link_soft_cap`]) when inserts run out of links while the map holds
    /// fewer keys than a grow is for (see [`Index::raise_link_soft`]).
    link_soft: unmodelled::AtomicU64,
    /// Link buckets handed out so far (may exceed the limits after failed
    /// claims). Alone in its cache line: every claim writes it, and every
    /// operation reads the fields beside it (`mask`, the arrays, `next`).
    link_next: CachePadded<AtomicU64>,
    /// Link buckets claimed but lost to a concurrent chaining (hazard 6):
    /// leaked until the index is freed.
    pub leaked_links: AtomicUsize,
    /// Markers of the owning map.
    pub markers: Markers,
    /// Position in the map's sequence of indexes (first is 1).
    pub generation: u64,
    /// The index this one is being transferred into (null before a resize).
    next: AtomicPtr<Index>,
    /// Resize coordination, alone in its cache line: helpers claim chunks
    /// through it while every operation reads the fields above.
    pub resize: CachePadded<ResizeState>,
    /// Under loom: a cell every model reader touches and the index's drop
    /// writes, so a free that is not ordered after a read is reported.
    #[cfg(loom)]
    liveness: loom::cell::UnsafeCell<u8>,
    /// The file the arrays are mapped from, for a persistent map.
    #[cfg(not(loom))]
    file: Option<IndexFile>,
    /// What a header's claimed slot in a link bucket its bin never chained
    /// reads as (only a damaged file holds one): a dead slot of the bin's
    /// parity, which no operation matches or writes. One per parity.
    quarantine: [Slot; 2],
    /// Bin headers found in a state no live thread left and repaired (only
    /// a damaged file holds one; see `protocol::settle`).
    bins_repaired: unmodelled::AtomicUsize,
    /// For an index opened from a file, whether its bins' transfer states
    /// are checked (`STATES_*`, see [`Index::repair_transfer_states`]).
    states: unmodelled::AtomicUsize,
    /// Opened from a file (not made by this process): after a power loss
    /// its bins may hold what was written ahead of the index before it
    /// (see [`Self::empties_targets`]).
    opened: bool,
    /// May hold stray pairs: an index of a map file that a recovery after
    /// a crash found (see [`Self::may_hold_strays`]).
    strays: bool,
    /// Link buckets that bins gave back when they emptied them, chained
    /// again before any new one is claimed (`protocol::links`). Unset: the
    /// index keeps every link chained for its life (a persistent index,
    /// and a map whose readers are not all held off reclamation by the
    /// allocator's guards: see [`Index::return_links`]).
    link_pool: std::sync::OnceLock<Arc<LinkPool>>,
}

/// Link buckets given back by bins that emptied them
/// (`protocol::links`), for chaining again: one list per kind (a pair is
/// two consecutive buckets, named by its first). A bucket is put here only
/// once no thread can still read it through the bin it left.
#[derive(Default)]
pub struct LinkPool {
    /// Singles, then pairs. A lock: bins chain and give back links on a
    /// rare path (a bin passing four or eight keys), never on every
    /// operation, and outside loom's model (it orders no bin's data:
    /// chaining publishes a bucket through its link-meta CAS).
    free: std::sync::Mutex<[Vec<u32>; 2]>,
    /// Buckets in `free` (a statistic: the memory the index counts).
    held: unmodelled::AtomicUsize,
}

impl LinkPool {
    const fn list(kind: LinkKind) -> usize {
        match kind {
            LinkKind::Single => 0,
            LinkKind::Pair => 1,
        }
    }

    /// A given-back link of `kind`, if any.
    fn take(&self, kind: LinkKind) -> Option<u32> {
        let first = self.free.lock().unwrap_or_else(|e| e.into_inner())[Self::list(kind)].pop()?;
        // Relaxed: a statistic.
        self.held.fetch_sub(kind.buckets(), Ordering::Relaxed);
        Some(first)
    }

    /// Give back the link of `kind` starting at bucket `first`: no bin
    /// chains it, and no thread can still read it as one's.
    pub fn give(&self, kind: LinkKind, first: u32) {
        self.free.lock().unwrap_or_else(|e| e.into_inner())[Self::list(kind)].push(first);
        // Relaxed: a statistic.
        self.held.fetch_add(kind.buckets(), Ordering::Relaxed);
    }

    /// Buckets waiting here.
    fn held(&self) -> usize {
        // Relaxed: a statistic.
        self.held.load(Ordering::Relaxed)
    }
}

/// `Index::states`: checked (or never from a file), not yet, or being
/// walked by the thread that claimed the walk.
const STATES_CHECKED: usize = 0;
const STATES_UNCHECKED: usize = 1;
const STATES_WALKING: usize = 2;

#[cfg(all(test, loom))]
impl Index {
    /// Read the liveness cell: a loom model's stand-in for reading the index.
    pub fn touch(&self) {
        self.liveness.with(|p| {
            // SAFETY: loom checks that no write (the drop) races this read.
            let _ = unsafe { *p };
        });
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        #[cfg(loom)]
        // SAFETY: loom checks that no read races this write.
        self.liveness.with_mut(|p| unsafe { *p = 1 });
        // Relaxed: a statistic.
        LIVE_INDEXES.fetch_sub(1, Ordering::Relaxed);
        #[cfg(all(test, not(loom)))]
        LIVE_HERE.with(|n| n.set(n.get() - 1));
    }
}

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// Indexes allocated minus freed by this thread: unit tests that run
    /// alongside others count their own indexes through it.
    pub(crate) static LIVE_HERE: core::cell::Cell<isize> = const { core::cell::Cell::new(0) };
}

/// Indexes allocated and not yet freed in this process, all maps together.
/// Outside loom's model on purpose: a statistic.
static LIVE_INDEXES: unmodelled::AtomicUsize = unmodelled::AtomicUsize::new(0);

/// Indexes allocated and not yet freed in this process (for tests that
/// check reclamation without asking a map, which might collect).
#[cfg(feature = "internals")]
pub fn live_indexes() -> usize {
    LIVE_INDEXES.load(Ordering::Relaxed) // a statistic
}

impl Index {
    /// A zeroed index of `bins` bins (a power of two in MIN_BINS..=MAX_BINS).
    pub fn new(bins: usize, markers: Markers, generation: u64) -> Result<Index, Error> {
        let link_hard = Self::check_size(bins)?;
        // SAFETY: both bucket types are atomics only: all-zero is valid.
        let bins_arr = unsafe { ZeroedArray::new_zeroed(bins, false)? };
        // SAFETY: as above.
        let links = unsafe { ZeroedArray::new_zeroed(link_hard, true)? };
        Ok(Self::assemble(bins_arr, links, nominal_links(bins), 0, markers, generation))
    }

    /// The link buckets an index of `bins` bins reserves, if `bins` is a
    /// valid size and this CPU can run the map.
    fn check_size(bins: usize) -> Result<usize, Error> {
        if !bins.is_power_of_two() || !(MIN_BINS..=MAX_BINS).contains(&bins) {
            return Err(Error::CapacityOverflow);
        }
        if !crate::arch::native_dwcas() {
            return Err(Error::Unsupported);
        }
        // Worst case: every bin chains three buckets in a transfer, inserts
        // claim up to the raised soft limit, plus buckets leaked by chaining
        // races and overshoot of failed claims. Reserved, not touched: only
        // claimed buckets take memory.
        Ok(3 * bins + link_soft_cap(bins) + LINK_SLACK)
    }

    fn assemble(
        bins: ZeroedArray<PrimaryBucket>,
        links: ZeroedArray<LinkBucket>,
        link_soft: usize,
        link_next: u64,
        markers: Markers,
        generation: u64,
    ) -> Index {
        let mask = bins.len() - 1;
        LIVE_INDEXES.fetch_add(1, Ordering::Relaxed); // a statistic
        #[cfg(all(test, not(loom)))]
        LIVE_HERE.with(|n| n.set(n.get() + 1));
        let quarantine = [Slot::new(), Slot::new()];
        for (parity, slot) in quarantine.iter().enumerate() {
            slot.fill_owned(markers.dead(parity), 0);
        }
        Index {
            bins,
            mask,
            links,
            link_soft: unmodelled::AtomicU64::new(link_soft as u64),
            link_next: CachePadded::new(AtomicU64::new(link_next)),
            leaked_links: AtomicUsize::new(0),
            markers,
            generation,
            next: AtomicPtr::new(core::ptr::null_mut()),
            resize: CachePadded::new(ResizeState {
                phase: AtomicUsize::new(0),
                next_chunk: AtomicUsize::new(0),
                chunks_done: AtomicUsize::new(0),
                fallback: AtomicPtr::new(core::ptr::null_mut()),
            }),
            #[cfg(loom)]
            liveness: loom::cell::UnsafeCell::new(0),
            #[cfg(not(loom))]
            file: None,
            quarantine,
            bins_repaired: unmodelled::AtomicUsize::new(0),
            states: unmodelled::AtomicUsize::new(STATES_CHECKED),
            opened: false,
            strays: false,
            link_pool: std::sync::OnceLock::new(),
        }
    }

    /// A zeroed index of `bins` bins in a new file of `dir` (a persistent
    /// map's; see `persist`).
    #[cfg(not(loom))]
    pub fn create_in(
        dir: &Arc<FileSet>,
        bins: usize,
        markers: Markers,
        generation: u64,
    ) -> Result<Index, Error> {
        let link_hard = Self::check_size(bins)?;
        let (f, file) = IndexFile::create(dir, generation, bins, link_hard)?;
        Self::map(f, &file, bins, link_hard, markers, false, dir.small_pages())
    }

    /// The index of `generation` from its file in `dir`, as it was left.
    #[cfg(not(loom))]
    pub fn open_in(dir: &Arc<FileSet>, markers: Markers, generation: u64) -> Result<Index, Error> {
        let (f, file, bins, links) = IndexFile::open(dir, generation, MIN_BINS..=MAX_BINS)?;
        if links != Self::check_size(bins)? {
            return Err(Error::Corrupt { what: "an index file reserves another number of link buckets" });
        }
        Self::map(f, &file, bins, links, markers, true, dir.small_pages())
    }

    #[cfg(not(loom))]
    fn map(
        f: IndexFile,
        file: &std::fs::File,
        bins: usize,
        links: usize,
        markers: Markers,
        opened: bool,
        small_pages: bool,
    ) -> Result<Index, Error> {
        let links_at = IndexHeader::links_offset(bins).ok_or(Error::CapacityOverflow)?;
        // SAFETY: buckets are atomics only (any bytes are valid), and
        // `IndexFile` made or checked the file at least this long.
        let bins_arr =
            unsafe { ZeroedArray::map_file(file, IndexHeader::bins_offset(), bins, false, small_pages)? };
        // SAFETY: as above.
        let links_arr = unsafe { ZeroedArray::map_file(file, links_at, links, true, small_pages)? };
        let h = f.header();
        // Relaxed: read before any thread uses the index.
        let soft =
            (h.link_soft.load(Ordering::Relaxed) as usize).clamp(nominal_links(bins), link_soft_cap(bins));
        let next = h.link_floor.load(Ordering::Relaxed).min(links as u64);
        let generation = h.generation;
        let mut idx = Self::assemble(bins_arr, links_arr, soft, next, markers, generation);
        // Relaxed: before any thread uses the index.
        idx.states.store(if opened { STATES_UNCHECKED } else { STATES_CHECKED }, Ordering::Relaxed);
        idx.opened = opened;
        idx.file = Some(f);
        Ok(idx)
    }

    /// A zeroed index of `bins` bins stored as this one is (in memory, or
    /// in a new file beside this one's), for a resize.
    pub fn new_like(&self, bins: usize, generation: u64) -> Result<Index, Error> {
        #[cfg(not(loom))]
        if let Some(f) = &self.file {
            return Self::create_in(f.set(), bins, self.markers, generation);
        }
        let next = Self::new(bins, self.markers, generation)?;
        if self.link_pool.get().is_some() {
            next.return_links();
        }
        Ok(next)
    }

    /// Let bins give back link buckets they emptied, to be chained again
    /// (`protocol::links`; inherited by the indexes that replace this
    /// one). Only for a map whose every reader of a bin is held off
    /// reclamation by the allocator's guards (a pinned or owned
    /// [`Guard`](crate::Guard)), which the giving back waits out: a byte
    /// map's. Not for a persistent index (recovery never sees a link given
    /// back): ignored there.
    pub fn return_links(&self) {
        #[cfg(not(loom))]
        if self.file.is_some() {
            return;
        }
        let _ = self.link_pool.set(Arc::new(LinkPool::default()));
    }

    /// True while both quarantine slots hold only what they were made with
    /// (no operation ever writes one: a loom model's check).
    #[cfg(all(test, loom))]
    pub fn quarantine_is_clean(&self) -> bool {
        (0..2).all(|p| {
            let q = &self.quarantine[p];
            q.load_key() == self.markers.dead(p) && q.load_value() == 0
        })
    }

    /// Where this index's bins give back link buckets, if they do.
    #[inline]
    pub fn link_pool(&self) -> Option<&Arc<LinkPool>> {
        self.link_pool.get()
    }

    /// Write a file-backed index's dirty pages to disk and wait.
    #[cfg(not(loom))]
    pub fn sync(&self) -> Result<(), Error> {
        self.bins.sync()?;
        self.links.sync()
    }

    /// True if a transfer into this index must first empty the target
    /// bins of the source bin it claimed: the index of a grow an open
    /// resumed. A power loss can leave on disk a grow's copies of a bin
    /// whose transfer marks in the older index it lost (the syncs write
    /// the newer index first: `FileSet::sync_all`); the bin, untransferred
    /// again, is what operations used since, so its old copies go. (A
    /// process crash never leaves a target bin filled before its source is
    /// claimed: for it, this empties empty bins.)
    #[inline]
    pub fn empties_targets(&self) -> bool {
        self.opened
    }

    /// This index's file, for a persistent map's.
    #[cfg(not(loom))]
    pub fn file(&self) -> Option<&IndexFile> {
        self.file.as_ref()
    }

    /// Held while a bin of this index is transferred out of it: a
    /// persistent map's syncs wait for the transfers under way and hold
    /// new ones off while they write the map's files
    /// ([`FileSet::sync_all`](crate::persist::index_file::FileSet::sync_all)),
    /// so that no sync writes a bin's transfer marks without the next
    /// index's copies (finding F7). Nothing for an index in memory, or a
    /// persistent one in process mode (which promises nothing across a
    /// power loss).
    #[cfg(not(loom))]
    #[inline]
    pub fn transfer_gate(&self) -> Option<crate::persist::index_file::TransferGuard<'_>> {
        self.file.as_ref().filter(|f| f.set().ordered()).map(|f| f.set().transfer_gate())
    }

    /// Loom build: no files.
    #[cfg(loom)]
    #[inline]
    pub fn transfer_gate(&self) -> Option<()> {
        None
    }

    /// Number of bins.
    #[inline]
    pub fn bins(&self) -> usize {
        self.mask + 1
    }

    /// Link buckets available to inserts.
    #[inline]
    pub fn link_capacity(&self) -> usize {
        // Relaxed: a limit, read afresh at every claim; see `raise_link_soft`.
        self.link_soft.load(Ordering::Relaxed) as usize
    }

    /// Let inserts claim more link buckets, up to [`link_soft_cap`]; false
    /// when the cap is reached. For a map that ran out of links while it
    /// holds fewer keys than a grow is for: insert/remove churn chains a
    /// link to every bin that ever held four keys (links stay chained when
    /// they empty), so at two keys per bin a presized map once grew, and
    /// doubled its memory, after a few million insert+remove pairs.
    pub fn raise_link_soft(&self) -> bool {
        let cap = link_soft_cap(self.bins()) as u64;
        let step = (self.bins() / BINS_PER_LINK_RAISE).max(LINK_FLOOR).max(1) as u64;
        // Relaxed: the limit guards no data (claims are published through
        // the link-meta CAS), so loom need not model it (`unmodelled`); two
        // raisers at once raise it twice, still within the cap that
        // `link_hard` reserves for.
        let raised = self
            .link_soft
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |s| (s < cap).then(|| (s + step).min(cap)));
        #[cfg(not(loom))]
        if let (Ok(s), Some(f)) = (raised, &self.file) {
            // Relaxed: a policy word, read back when the file is reopened.
            f.header().link_soft.fetch_max((s + step).min(cap), Ordering::Relaxed);
        }
        raised.is_ok()
    }

    /// Link buckets handed out so far (chained, or lost to a race).
    pub fn links_claimed(&self) -> usize {
        // Relaxed: a statistic; the counter may have run past the array
        // after failed claims.
        let claimed = (self.link_next.load(Ordering::Relaxed) as usize).min(self.links.len());
        claimed.saturating_sub(self.link_pool().map_or(0, |p| p.held()))
    }

    /// Slots available to inserts: three per bin plus four per link bucket
    /// of the soft limit the index was built with (a raised limit is
    /// tolerance for churn, not room for more keys: the map's capacity
    /// changes only when its index is replaced).
    pub fn slot_capacity(&self) -> usize {
        self.bins() * 3 + nominal_links(self.bins()) * 4
    }

    /// The bin a hash selects.
    #[inline(always)]
    pub fn bin_of(&self, hash: u64) -> usize {
        hash as usize & self.mask
    }

    /// The bin at `bin`, accessed by many threads.
    #[inline(always)]
    pub fn bin(&self, bin: usize) -> BinRef<'_> {
        self.bin_as::<Shared>(bin)
    }

    /// The bin at `bin`, accessed as `T` says.
    #[inline(always)]
    pub fn bin_as<T: Threading>(&self, bin: usize) -> BinRef<'_, T> {
        // SAFETY: the mask keeps the position in bounds.
        let bucket = unsafe { self.bins.get_unchecked(bin & self.mask) };
        BinRef { index: self, bin: bin & self.mask, bucket, _threading: PhantomData }
    }

    /// Fault in the pages of bins `range` before a transfer writes them
    /// (see [`ZeroedArray::prefault`]).
    pub fn prefault_bins(&self, range: core::ops::Range<usize>) {
        self.bins.prefault(range);
    }

    /// Fault in the next `n` link buckets to be handed out (they go in
    /// order), before a transfer may chain them.
    pub fn prefault_links_ahead(&self, n: usize) {
        // Relaxed: a hint; a stale position only faults pages already in.
        let next = (self.link_next.load(Ordering::Relaxed) as usize).min(self.links.len());
        self.links.prefault(next..(next + n).min(self.links.len()));
    }

    /// Address of a bin's primary bucket, for prefetching.
    #[inline(always)]
    pub fn bin_ptr(&self, bin: usize) -> *const PrimaryBucket {
        self.bins.ptr_at(bin & self.mask)
    }

    /// Address of link bucket `l`, for prefetching (never dereferenced).
    #[inline(always)]
    pub fn link_ptr(&self, l: u32) -> *const LinkBucket {
        self.links.ptr_at(l as usize)
    }

    /// R2: attach the index this one will be transferred into. The box is
    /// leaked: whoever makes it current owns it from then on (the last
    /// chunk's finisher, or a test). Release: its zeroed contents are
    /// visible to whoever finds it through [`next_index`](Self::next_index).
    pub fn attach_next(&self, next: Box<Index>) -> *mut Index {
        let p = Box::into_raw(next);
        self.next.store(p, Ordering::Release);
        p
    }

    /// A shrink into this index fell back for some target: `fallback`
    /// becomes the next index (if no other target did so first), and the
    /// resize phase says so, so that once this index is current it is grown
    /// into `fallback` rather than into a new allocation. Called before
    /// any operation can reach this index's forwarded bin. AcqRel/Acquire:
    /// the winner publishes the zeroed fallback as `attach_next` does; a
    /// loser only needs to see that it is there.
    pub fn attach_fallback(&self, fallback: &Index) {
        // A persistent index says so in its file first, so that a reopen
        // finds the fallback this index's next again. Relaxed: the forward
        // of the target, a store after this one, is what a crash can keep.
        #[cfg(not(loom))]
        if let Some(f) = &self.file {
            f.header().fell_back.store(1, Ordering::Relaxed);
        }
        let p = fallback as *const Index as *mut Index;
        match self.next.compare_exchange(core::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            Err(found) => debug_assert_eq!(found, p, "dlht invariant: a shrink target has another successor"),
        }
        // Release: pairs with the Acquire of a later phase CAS, which then
        // finds the successor attached.
        self.resize.phase.store(ResizeState::PUBLISHED, Ordering::Release);
    }

    /// True if a bin may hold a pair whose key is not the bin's: a map
    /// file's index that a recovery after a crash found, where a power loss
    /// can leave an earlier open's pending or shadow pair that no intent
    /// names (its marker reads as a key of the other parity). Iteration
    /// skips such pairs, and transfers drop them (`iter::read_bin`,
    /// `protocol::transfer::copy_out`); an index a resize makes holds none.
    #[inline]
    pub fn may_hold_strays(&self) -> bool {
        self.strays
    }

    /// See [`Self::may_hold_strays`] (set at open, before any operation).
    #[cfg_attr(loom, allow(dead_code))]
    pub fn set_may_hold_strays(&mut self, strays: bool) {
        self.strays = strays;
    }

    /// True if this index's arrays are a map file's, whose bins hold
    /// whatever the file held: a damaged one is repaired where found
    /// (`protocol::settle`, [`BinRef::slot`]) instead of trusted.
    pub fn is_persistent(&self) -> bool {
        #[cfg(not(loom))]
        return self.file.is_some();
        #[cfg(loom)]
        false
    }

    /// True if a bin of this index may be InTransfer now: a resize has
    /// attached its next index, or a snapshot holds it (DoneTransfer needs
    /// the next index). Acquire (both loads): a bin put in transfer after
    /// either, and read so, shows it.
    pub fn transfer_explained(&self) -> bool {
        self.next_index().is_some() || self.resize.phase.load(Ordering::Acquire) == ResizeState::SNAPSHOT
    }

    /// Count a bin header repaired (see [`Self::bins_repaired`]).
    fn note_repair(&self) {
        // Relaxed: a statistic.
        self.bins_repaired.fetch_add(1, Ordering::Relaxed);
    }

    /// Bin headers of this index found in a state no live thread left (a
    /// damaged map file's) and repaired.
    pub fn bins_repaired(&self) -> usize {
        // Relaxed: a statistic.
        self.bins_repaired.load(Ordering::Relaxed)
    }

    /// Repair every bin of an index opened from a file that its file left
    /// in a transfer state (a damaged file's: see `protocol::settle`), once,
    /// before any thread transfers the index's bins in this open: the
    /// thread that won the index's allocator role for a resize, or the
    /// snapshot role (no bin can then be in transfer but by damage), with
    /// `done_too`; for a resize recovery resumed, without (its DoneTransfer
    /// bins are ones it moved; recovery finished every transfer a thread
    /// had under way): the open (a shrink's), the background finisher (a
    /// grow's, claimed at open: [`Self::claim_state_walk`]) or the first
    /// helper. Helpers keep out meanwhile ([`Self::states_unchecked`]); a
    /// caller that finds another thread walking waits for it. Runs over
    /// every bin once, as the resize it precedes does.
    pub fn repair_transfer_states(&self, done_too: bool) {
        if self.claim_state_walk() {
            self.walk_claimed_states(done_too);
        } else {
            // (A walk takes as long as a resize's pass over the bins: the
            // waiter is a resize's or snapshot's role holder, or a finisher.)
            while self.states_unchecked() {
                std::thread::yield_now();
            }
        }
    }

    /// Claim the walk of [`Self::repair_transfer_states`] (true: this
    /// thread must run it, with [`Self::walk_claimed_states`]); false if it
    /// is done or another thread's.
    pub fn claim_state_walk(&self) -> bool {
        // Relaxed: a claim among walkers; what the walk repairs is
        // published by its Release at the end.
        self.states.load(Ordering::Relaxed) == STATES_UNCHECKED
            && self
                .states
                .compare_exchange(STATES_UNCHECKED, STATES_WALKING, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// The walk of [`Self::repair_transfer_states`], claimed by this thread.
    pub fn walk_claimed_states(&self, done_too: bool) {
        for b in 0..self.bins() {
            let bin = self.bin(b);
            let mut h = bin.header();
            // (The state no transition writes reads as InTransfer.)
            while h.bin_state() == BinState::InTransfer || done_too && !h.is_no_transfer() {
                match bin.repair_state(h) {
                    Ok(_) => break,
                    Err(found) => h = found,
                }
            }
        }
        // Release: a helper that sees it checked (`states_unchecked`) sees
        // the repaired headers.
        self.states.store(STATES_CHECKED, Ordering::Release);
    }

    /// True until [`Self::repair_transfer_states`] has run on an index
    /// opened from a file: no helper may transfer its bins before (a bin a
    /// damaged file left InTransfer would stall it, and the walk must not
    /// take a live transfer for damage).
    #[inline]
    pub fn states_unchecked(&self) -> bool {
        // Acquire: see the walk's Release.
        self.states.load(Ordering::Acquire) != STATES_CHECKED
    }

    /// The next index, if a resize has allocated one. Acquire: pairs with the
    /// Release publishing it, so its zeroed contents are visible.
    #[inline]
    pub fn next_index(&self) -> Option<&Index> {
        let p = self.next.load(Ordering::Acquire);
        // SAFETY: a thread that reached this index announced a generation
        // no greater than this one's, which is less than the next index's;
        // an index is freed only once no announcement is at or below its
        // generation, so the next index outlives this reference. (Indexes
        // are not freed in order: a newer one may go first once nobody is
        // inside it, but never one a thread here could reach.)
        unsafe { p.as_ref() }
    }

    /// Claim link buckets for `kind` and chain them to `bin`. Returns false
    /// when the claimant's limit is reached (for an insert: resize).
    /// If another thread chained the same link first, our buckets are leaked
    /// and counted (hazard 6); the bin is chained either way.
    pub fn chain<T: Threading>(&self, bin: &BinRef<'_, T>, kind: LinkKind, who: Claimant) -> bool {
        if let Some(pool) = self.link_pool() {
            if let Some(first) = pool.take(kind) {
                if !Self::link(bin, kind, first) {
                    pool.give(kind, first); // never chained: no thread saw it
                }
                return true;
            }
        }
        let n = kind.buckets() as u64;
        let limit = match who {
            Claimant::Insert => self.link_capacity() as u64,
            Claimant::Transfer => self.links.len() as u64,
        };
        // Relaxed: the counter only hands out distinct numbers; the buckets'
        // contents are published through the link-meta CAS.
        if who == Claimant::Insert && self.link_next.load(Ordering::Relaxed) + n > limit {
            return false;
        }
        let first = fetch_add::<T>(&self.link_next, n);
        if first + n > limit {
            return false;
        }
        // A persistent index records the links handed out before any is
        // chained (Relaxed: the chaining CAS below is a release, and a
        // crash keeps every store before it), so a reopened index never
        // hands out a chained link again.
        #[cfg(not(loom))]
        if let Some(f) = &self.file {
            f.header().link_floor.fetch_max(first + n, Ordering::Relaxed);
        }
        crate::persist::crash::at(crate::persist::crash::CrashPoint::LinkClaimed);
        if !Self::link(bin, kind, first as u32) {
            match self.link_pool() {
                // Never chained: no thread saw it, so back at once.
                Some(pool) => pool.give(kind, first as u32),
                None => drop(self.leaked_links.fetch_add(n as usize, Ordering::Relaxed)), // a statistic
            }
        }
        true
    }

    /// Chain the link of `kind` starting at bucket `first` to `bin`: false
    /// if another thread chained one of that kind first (the bin is
    /// chained either way).
    fn link<T: Threading>(bin: &BinRef<'_, T>, kind: LinkKind, first: u32) -> bool {
        let meta = &bin.bucket.link_meta;
        let mut cur = meta.load();
        loop {
            if cur.get(kind).is_some() {
                return false;
            }
            match meta.cas::<T>(cur, cur.with(kind, first)) {
                Ok(()) => return true,
                Err(found) => cur = found,
            }
        }
    }
}

/// One bin of an index, and how it is shared (see `threading`).
pub struct BinRef<'a, T: Threading = Shared> {
    /// Its index.
    pub index: &'a Index,
    /// Its position.
    pub bin: usize,
    /// Its primary bucket.
    pub bucket: &'a PrimaryBucket,
    _threading: PhantomData<T>,
}

impl<T: Threading> Clone for BinRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Threading> Copy for BinRef<'_, T> {}

impl<'a, T: Threading> BinRef<'a, T> {
    /// CAS the header (see `threading::cas_word`).
    #[inline(always)]
    pub fn cas_header(&self, cur: Header, new: Header) -> Result<(), Header> {
        self.bucket.header.cas::<T>(cur, new)
    }

    /// 16-byte CAS on a slot of this bin (see `threading::dwcas`).
    #[inline(always)]
    pub fn dwcas(&self, slot: &Slot, old: (u64, u64), new: (u64, u64)) -> Result<(), (u64, u64)> {
        super::threading::dwcas::<T>(slot, old, new)
    }

    /// The header.
    #[inline(always)]
    pub fn header(&self) -> Header {
        self.bucket.header.load()
    }

    /// The dead marker of this bin.
    #[inline(always)]
    pub fn dead(&self) -> u64 {
        self.index.markers.dead(self.bin)
    }

    /// The pending marker of this bin.
    #[inline(always)]
    pub fn pending(&self) -> u64 {
        self.index.markers.pending(self.bin)
    }

    /// The shadow marker of this bin.
    #[inline(always)]
    pub fn shadow(&self) -> u64 {
        self.index.markers.shadow(self.bin)
    }

    /// This bin's moved marker.
    #[inline(always)]
    pub fn moved(&self) -> u64 {
        self.index.markers.moved(self.bin)
    }

    /// Logical slot `i`, or None if it lies in a link bucket not chained in `lm`.
    #[inline(always)]
    pub fn slot_in(&self, lm: LinkMeta, i: usize) -> Option<&'a Slot> {
        let link = |l: u32, pos: usize| {
            // Chained link numbers were claimed below links.len(); the clamp
            // (a compare on the link path only) keeps a damaged file's bogus
            // number in bounds: garbage, never a wild read.
            let l = (l as usize).min(self.index.links.len() - 1);
            // SAFETY: l < links.len() (which is never 0: LINK_SLACK).
            unsafe { &self.index.links.get_unchecked(l).slots[pos] }
        };
        match SlotHome::of(i) {
            SlotHome::Primary(p) => Some(&self.bucket.slots[p]),
            SlotHome::Single(p) => lm.single().map(|l| link(l, p)),
            SlotHome::Pair(b, p) => lm.pair().map(|l| link(l + b as u32, p)),
        }
    }

    /// Logical slot `i` of a slot the header shows as non-Invalid, whose
    /// bucket must therefore be chained. Link meta is loaded only for link
    /// slots, and cached in `lm` across calls.
    #[inline(always)]
    pub fn slot(&self, lm: &mut Option<LinkMeta>, i: usize) -> &'a Slot {
        if let SlotHome::Primary(p) = SlotHome::of(i) {
            return &self.bucket.slots[p];
        }
        let meta = *lm.get_or_insert_with(|| self.bucket.link_meta.load());
        match self.slot_in(meta, i) {
            Some(slot) => slot,
            None => self.unchained(),
        }
    }

    /// Repair header `h`, whose transfer state only a damaged map file
    /// leaves (see `protocol::settle`), to NoTransfer, counted in
    /// [`Index::bins_repaired`]: the header now, or the one found instead.
    pub fn repair_state(&self, h: Header) -> Result<Header, Header> {
        let repaired = h.with_bin_state(BinState::NoTransfer);
        self.cas_header(h, repaired)?;
        self.index.note_repair();
        Ok(repaired)
    }

    /// A claimed slot of a link bucket the bin does not chain: a damaged
    /// map file holds one (a live bin chains a bucket before claiming its
    /// slots), and a reader whose header predates a link's giving back
    /// meets one (`protocol::links`: its validation then fails, as the
    /// header changed). It reads as dead, which every operation skips and
    /// recovery frees, instead of trusting the header.
    #[cold]
    #[inline(never)]
    fn unchained(&self) -> &'a Slot {
        assert!(
            self.index.is_persistent() || self.index.link_pool().is_some(),
            "dlht invariant: a claimed slot's link bucket is chained"
        );
        &self.index.quarantine[self.bin & 1]
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use super::Index;
    use core::mem::{offset_of, size_of};
    use core::ops::Range;

    /// The 64-byte lines a field of `size` bytes at `offset` spans (also
    /// for the map core's layout test).
    pub(crate) fn lines(offset: usize, size: usize) -> Range<usize> {
        offset / 64..(offset + size).div_ceil(64)
    }

    /// The words every operation reads (bin address, links, markers, the
    /// next index) share no line with the words claims write: a link claim
    /// or a helper's chunk once cost every other thread a miss on its next
    /// operation (insert+remove at 16 threads: 28 -> 84 M/s when padded).
    #[test]
    fn written_counters_have_lines_of_their_own() {
        let read = [
            lines(offset_of!(Index, bins), size_of::<super::ZeroedArray<super::PrimaryBucket>>()),
            lines(offset_of!(Index, mask), 8),
            lines(offset_of!(Index, links), size_of::<super::ZeroedArray<super::LinkBucket>>()),
            lines(offset_of!(Index, markers), size_of::<super::Markers>()),
            lines(offset_of!(Index, generation), 8),
            lines(offset_of!(Index, next), 8),
        ];
        let written = [
            lines(offset_of!(Index, link_next), size_of::<super::CachePadded<super::AtomicU64>>()),
            lines(offset_of!(Index, resize), size_of::<super::CachePadded<super::ResizeState>>()),
        ];
        for w in &written {
            for r in &read {
                assert!(w.end <= r.start || r.end <= w.start, "written lines {w:?} overlap read lines {r:?}");
            }
        }
    }
}
