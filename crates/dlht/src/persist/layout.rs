//! The file layouts of a persistent map, as types: the map file's header
//! and its per-thread cells, and each index file's header. Every field a
//! reopen trusts is checked by [`MapHeader::check`] or
//! [`IndexHeader::check`] before any bin is read.
//!
//! ```text
//! DIR/map.dlht        | MapHeader (page 0) | ThreadCell × THREAD_CELLS | ShadowCell × SHADOW_CELLS |
//! DIR/index.<G>.dlht  | IndexHeader (page 0) | hole to 2 MiB | bins × 64 B | link buckets × 64 B (sparse) |
//! DIR/lock            | empty: flock(2) held by the process that has the map open |
//! ```
//!
//! All integers are native-endian (a file moves only between machines of
//! one byte order: the header's `endian` word refuses the other).

use crate::error::Error;
use crate::plant::{planted, Plant};
use crate::sync::unmodelled::AtomicU64;
use crate::sync::Ordering;

/// The unit of every file region: regions start on page boundaries so that
/// each can be mapped on its own.
pub const PAGE: usize = 4096;

/// The alignment of an index file's arrays (a huge page): a shared mapping
/// can be backed by 2 MiB pages only where the file offset and the address
/// are both multiples of it (the gap after the header is a hole: sparse).
pub const ARRAY_ALIGN: usize = 2 << 20;

/// First bytes of a map file.
pub const MAP_MAGIC: [u8; 8] = *b"DLHT-MAP";
/// First bytes of an index file.
pub const INDEX_MAGIC: [u8; 8] = *b"DLHT-IDX";
/// Version of these layouts and of the protocols' states in them; a file of
/// another version is refused ([`Error::Incompatible`]). Version 2: every
/// file names its map and the map's stamp, headers are checksummed.
pub const LAYOUT_VERSION: u32 = 2;
/// Written as a native integer; reads back otherwise on another byte order.
pub const ENDIAN_CHECK: u32 = 0x0102_0304;

/// Threads that may write one persistent map at once (each holds a cell
/// while its thread record lives; records are reused when threads exit).
pub const THREAD_CELLS: usize = 1024;

/// Shadow inserts a persistent map holds at once, at most (each has a cell
/// naming its key until it commits or aborts).
pub const SHADOW_CELLS: usize = 4096;

/// Offset of the shadow cells in the map file.
pub const SHADOW_CELLS_OFFSET: usize = PAGE + THREAD_CELLS * size_of::<ThreadCell>();

/// Bytes of the map file.
pub const MAP_FILE_BYTES: usize = SHADOW_CELLS_OFFSET + SHADOW_CELLS * size_of::<ShadowCell>();

/// A shadow insert held (paper §3.2.2): its key's word and hash, from before
/// the key is claimed until its commit or abort has returned, so that
/// recovery can abort it (its transaction died with the process) wherever
/// resizes have moved it. All zero when free; `hash` is stored last and
/// cleared first, so a cell with a hash is whole.
#[repr(C, align(16))]
#[derive(Default)]
pub struct ShadowCell {
    /// The key's word.
    pub key: AtomicU64,
    /// The key's hash, with bit 0 forced to 1 ([`ShadowCell::tag`]) so that
    /// a held cell is never zero.
    pub hash: AtomicU64,
}

impl ShadowCell {
    /// The stored form of a hash: shifted left by one with bit 0 set, so
    /// that a held cell is never zero. The top bit is lost: bins are chosen
    /// by a hash's low bits (29 at most), which [`ShadowCell::untag`] gives
    /// back.
    pub fn tag(hash: u64) -> u64 {
        hash << 1 | 1
    }

    /// The hash's low 63 bits, which select its bin in any index.
    pub fn untag(w: u64) -> u64 {
        w >> 1
    }
}

/// What kind of map a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum MapKind {
    /// [`Map`](crate::Map): keys and values inline, of the sizes recorded.
    Inlined = 1,
    /// [`ByteMap`](crate::ByteMap): an index of key words to value words,
    /// and the value heap `heap.dlht` (`persist::heap`).
    Bytes = 2,
}

/// Page 0 of the map file.
#[repr(C)]
pub struct MapHeader {
    /// [`MAP_MAGIC`].
    pub magic: [u8; 8],
    /// [`LAYOUT_VERSION`].
    pub layout_version: u32,
    /// [`ENDIAN_CHECK`].
    pub endian: u32,
    /// [`MapKind`] as its number.
    pub kind: u32,
    /// `size_of::<K>()` of the map that created the file.
    pub key_bytes: u32,
    /// `size_of::<V>()`.
    pub value_bytes: u32,
    /// Reserved, zero.
    pub _pad: u32,
    /// The hasher's seed and secrets (keyed hashing survives a restart).
    pub seed: u64,
    /// See `seed`.
    pub secrets: [u64; 7],
    /// The hash of `HASH_CHECK_WORDS` under this seed when the file was
    /// made: a build whose hash function differs is refused rather than
    /// looking every key up in the wrong bin.
    pub hash_check: [u64; 4],
    /// The map's identity, drawn when it was made: every other file of the
    /// map names it, so a file of another map is refused.
    pub map_id: u64,
    /// CRC-32C of the header's bytes before this field (all of them set
    /// once, when the file is made): [`HeaderCrc`].
    pub header_crc: u32,
    /// Reserved, zero.
    pub _pad2: u32,
    /// Generation of the current index (its file is `index.<G>.dlht`).
    pub generation: AtomicU64,
    /// [`CLEAN`] after a close that finished every operation, [`OPEN`]
    /// while a process has the map open.
    pub state: AtomicU64,
    /// Times the map was opened, and of those, recovered after a crash.
    pub opens: AtomicU64,
    /// See `opens`.
    pub recoveries: AtomicU64,
    /// The map's stamp: advanced at every open and clean close, and
    /// written into every other file of the map first, so a file copied
    /// from an older state of the map is refused ([`Stamp`]).
    pub stamp: AtomicU64,
    /// The stamp being written: `stamp + 1` from before the first file is
    /// stamped until `stamp` is advanced, `stamp` otherwise.
    pub stamping: AtomicU64,
    /// The seed of the pending and shadow markers of the open that last
    /// ran operations (`Markers::for_session`; zero in files made before
    /// it existed): recovery frees what that open's dead threads left by
    /// its markers, then the open draws a seed of its own, here before
    /// any operation runs.
    pub marker_seed: AtomicU64,
    /// The newest generation of an index a recovery after a crash found
    /// (zero if none did since this field exists): an index of this
    /// generation or older may hold stray pairs (`Index::may_hold_strays`);
    /// a resize's new index holds none.
    pub stray_generation: AtomicU64,
}

/// A file header whose fields written once, when the file is made, are
/// checksummed: those before `CRC_BYTES` (the checksum's own field).
pub trait HeaderCrc: Sized {
    /// Bytes of the header the checksum covers: the offset of its field.
    const CRC_BYTES: usize;

    /// CRC-32C of the header's first `CRC_BYTES` bytes, as they are now.
    fn crc(&self) -> u32 {
        const { assert!(Self::CRC_BYTES <= size_of::<Self>()) };
        // SAFETY: `CRC_BYTES` bytes of a live header, read as bytes: plain
        // integers of a `repr(C)` header, set before the file is shared
        // (its atomics lie after them and are not read).
        crc32c::crc32c(unsafe {
            core::slice::from_raw_parts(self as *const Self as *const u8, Self::CRC_BYTES)
        })
    }
}

/// A map's identity and stamp as its map file gives them, which every
/// other file of the map must match (see [`MapHeader::stamp`]).
///
/// Advancing the stamp from `s` to `s + 1`: `stamping = s + 1`, then every
/// other file's stamp `= s + 1`, then `stamp = s + 1`. A crash between
/// leaves files of either stamp, all accepted while `stamping` says a
/// stamp was being written; otherwise only files of `stamp` are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Stamp {
    /// [`MapHeader::map_id`].
    pub map_id: u64,
    /// [`MapHeader::stamp`].
    pub stamp: u64,
    /// [`MapHeader::stamping`].
    pub stamping: u64,
}

impl Stamp {
    /// Check a file's identity and stamp (`what` names the file in the
    /// errors).
    pub fn check(&self, map_id: u64, stamp: u64, what: FileWhat) -> Result<(), Error> {
        // Planted bug (scripts/planted-bugs.sh): accept any file.
        if planted(Plant::StampUnchecked) {
            return Ok(());
        }
        if map_id != self.map_id {
            return Err(Error::Incompatible { what: what.foreign });
        }
        let mid_advance = self.stamping == self.stamp.wrapping_add(1) && stamp == self.stamping;
        if stamp != self.stamp && !mid_advance {
            return Err(Error::Corrupt { what: what.stale });
        }
        Ok(())
    }
}

/// The errors naming one kind of file, for [`Stamp::check`].
#[derive(Clone, Copy, Debug)]
pub struct FileWhat {
    /// A file of another map.
    pub foreign: &'static str,
    /// A file from another state of this map (a copy restored from a backup).
    pub stale: &'static str,
}

/// `Stamp::check`'s words for an index file.
pub const INDEX_FILE_ERRORS: FileWhat = FileWhat {
    foreign: "an index file belongs to another map (its map id differs from map.dlht's)",
    stale: "an index file is from another state of this map (its stamp differs from map.dlht's: a copy restored from a backup?)",
};

/// `Stamp::check`'s words for the heap file.
pub const HEAP_FILE_ERRORS: FileWhat = FileWhat {
    foreign: "the heap file heap.dlht belongs to another map (its map id differs from map.dlht's)",
    stale: "the heap file heap.dlht is from another state of this map (its stamp differs from map.dlht's: a copy restored from a backup?)",
};

/// `Stamp::check`'s words for a snapshot log.
pub const SNAPSHOT_FILE_ERRORS: FileWhat = FileWhat {
    foreign: "the snapshot log snapshot.dlht belongs to another map",
    stale: "the snapshot log snapshot.dlht is from another state of this map",
};

/// `MapHeader::state` of a map closed cleanly.
pub const CLEAN: u64 = 0x434c_4541_4e00_0001;
/// `MapHeader::state` of a map open (or of a process that died with it).
pub const OPEN: u64 = 0x4f50_454e_0000_0001;

/// Words whose hashes `MapHeader::hash_check` records.
pub const HASH_CHECK_WORDS: [u64; 4] = [0, 1, 0x9e37_79b9_7f4a_7c15, u64::MAX];

impl HeaderCrc for MapHeader {
    const CRC_BYTES: usize = core::mem::offset_of!(MapHeader, header_crc);
}

impl MapHeader {
    /// The map's identity and stamp.
    pub fn stamp(&self) -> Stamp {
        // Relaxed: read at open, before any thread of this process runs in
        // the map.
        Stamp {
            map_id: self.map_id,
            stamp: self.stamp.load(Ordering::Relaxed),
            stamping: self.stamping.load(Ordering::Relaxed),
        }
    }

    /// Check the fields set once, when the file was made: magic, byte
    /// order, layout version and their checksum (whatever the map holds).
    pub fn check_fixed(&self) -> Result<(), Error> {
        if self.magic != MAP_MAGIC {
            return Err(Error::Corrupt { what: "the map file does not start with dlht's magic" });
        }
        if self.endian != ENDIAN_CHECK {
            return Err(Error::Incompatible {
                what: "the map file was written on a machine of another byte order",
            });
        }
        if self.layout_version != LAYOUT_VERSION {
            return Err(Error::Incompatible { what: "the map file has another layout version" });
        }
        if self.header_crc != self.crc() {
            return Err(Error::Corrupt { what: "the map file's header is damaged (its checksum differs)" });
        }
        Ok(())
    }

    /// Check a header read from a file, for a map of `kind` with these key
    /// and value sizes. The hash check is the caller's (it needs the
    /// hasher).
    pub fn check(&self, kind: MapKind, key_bytes: usize, value_bytes: usize) -> Result<(), Error> {
        self.check_fixed()?;
        if self.kind != kind as u32 {
            return Err(Error::Incompatible { what: "the map file holds another kind of map" });
        }
        if self.key_bytes as usize != key_bytes || self.value_bytes as usize != value_bytes {
            return Err(Error::Incompatible { what: "the map file holds keys or values of another size" });
        }
        let state = self.state.load(Ordering::Relaxed); // read before any thread runs
        if state != CLEAN && state != OPEN {
            return Err(Error::Corrupt { what: "the map file's state word is neither clean nor open" });
        }
        let g = self.generation.load(Ordering::Relaxed);
        if g == 0 || g >= GENERATION_LIMIT {
            return Err(Error::Corrupt { what: "the map file names no valid index generation" });
        }
        let s = self.stamp();
        if s.stamping != s.stamp && s.stamping != s.stamp.wrapping_add(1) {
            return Err(Error::Corrupt { what: "the map file's stamps are damaged" });
        }
        Ok(())
    }
}

/// Generations a valid map file names are below this (a damaged word is
/// refused): 2^48 resizes, nine years at a million a second. Intents keep
/// a generation's low 24 bits, which tell apart the (at most three)
/// indexes open at once.
pub const GENERATION_LIMIT: u64 = 1 << 48;

/// Page 0 of an index file.
#[repr(C)]
pub struct IndexHeader {
    /// [`INDEX_MAGIC`].
    pub magic: [u8; 8],
    /// [`LAYOUT_VERSION`].
    pub layout_version: u32,
    /// [`ENDIAN_CHECK`].
    pub endian: u32,
    /// This index's generation (as in its file's name).
    pub generation: u64,
    /// Bins (a power of two).
    pub bins: u64,
    /// Link buckets reserved after the bins.
    pub links: u64,
    /// The map's identity ([`MapHeader::map_id`]).
    pub map_id: u64,
    /// CRC-32C of the header's bytes before this field ([`HeaderCrc`]).
    pub header_crc: u32,
    /// Reserved, zero.
    pub _pad: u32,
    /// Link buckets that may have been handed out: at least every link
    /// chained to a bin (raised before the chaining CAS), so a reopened
    /// index hands out only fresh ones.
    pub link_floor: AtomicU64,
    /// The link limit for inserts, as raised (`Index::raise_link_soft`).
    pub link_soft: AtomicU64,
    /// 1 once the file is fully set up (zeroed and sized): an index file
    /// without it is an allocation a crash interrupted, and is deleted.
    pub complete: AtomicU64,
    /// 1 once a shrink into this index sent some target's sources to the
    /// fallback (`Index::attach_fallback`): reopened, the fallback is this
    /// index's next again.
    pub fell_back: AtomicU64,
    /// The map's stamp when this file was made or last stamped ([`Stamp`]).
    pub stamp: AtomicU64,
}

impl HeaderCrc for IndexHeader {
    const CRC_BYTES: usize = core::mem::offset_of!(IndexHeader, header_crc);
}

impl IndexHeader {
    /// Bytes of a bucket (a bin's primary bucket or a link bucket).
    pub const BUCKET_BYTES: usize = 64;

    /// Bytes of an index file of `bins` bins and `links` link buckets.
    pub fn file_bytes(bins: usize, links: usize) -> Option<usize> {
        Self::links_offset(bins)?.checked_add(links.checked_mul(Self::BUCKET_BYTES)?)
    }

    /// Offset of the bins: the page after the header.
    pub const fn bins_offset() -> usize {
        ARRAY_ALIGN
    }

    /// Offset of the link buckets: after the bins, on a huge-page boundary.
    pub fn links_offset(bins: usize) -> Option<usize> {
        ARRAY_ALIGN.checked_add(bins.checked_mul(Self::BUCKET_BYTES)?.checked_next_multiple_of(ARRAY_ALIGN)?)
    }

    /// Check a header read from a file of `file_bytes` bytes, expected to
    /// be generation `generation` of the map `stamp` gives: its checksum,
    /// map and stamp, its sizes, and that the file holds them. `bin_range`
    /// is what an index may have (`raw::index`'s bounds).
    pub fn check(
        &self,
        generation: u64,
        stamp: &Stamp,
        file_bytes: u64,
        bin_range: core::ops::RangeInclusive<usize>,
    ) -> Result<(usize, usize), Error> {
        if self.magic != INDEX_MAGIC {
            return Err(Error::Corrupt { what: "an index file does not start with dlht's magic" });
        }
        if self.endian != ENDIAN_CHECK || self.layout_version != LAYOUT_VERSION {
            return Err(Error::Incompatible {
                what: "an index file has another layout version or byte order",
            });
        }
        if self.header_crc != self.crc() {
            return Err(Error::Corrupt { what: "an index file's header is damaged (its checksum differs)" });
        }
        stamp.check(self.map_id, self.stamp.load(Ordering::Relaxed), INDEX_FILE_ERRORS)?;
        if self.generation != generation {
            return Err(Error::Corrupt { what: "an index file's generation differs from its name" });
        }
        let bins = self.bins;
        if !bins.is_power_of_two() || !bin_range.contains(&(bins as usize)) {
            return Err(Error::Corrupt { what: "an index file's bin count is not a valid index size" });
        }
        let links = self.links;
        if links > 8 * bins + (1 << 20) {
            return Err(Error::Corrupt {
                what: "an index file reserves more link buckets than any index has",
            });
        }
        let (bins, links) = (bins as usize, links as usize);
        match Self::file_bytes(bins, links) {
            Some(n) if n as u64 <= file_bytes => {}
            _ => {
                return Err(Error::Corrupt {
                    what: "an index file is shorter than its header says (truncated)",
                })
            }
        }
        let floor = self.link_floor.load(Ordering::Relaxed);
        let soft = self.link_soft.load(Ordering::Relaxed);
        if floor > links as u64 + (1 << 20) || soft > links as u64 {
            return Err(Error::Corrupt { what: "an index file's link counters exceed its links" });
        }
        Ok((bins, links))
    }
}

/// One thread's cell in the map file: what its operation in flight is
/// touching, for recovery after a crash, and its share of the map's length.
/// Written only by the thread holding it; read by recovery, when no thread
/// of the dead process runs.
#[repr(C, align(64))]
#[derive(Default)]
pub struct ThreadCell {
    /// The bin an operation or a transfer is working on ([`Intent`]), or 0.
    pub intent: AtomicU64,
    /// Inserts minus removes counted by this cell's threads.
    pub len_share: AtomicU64,
    /// A transfer's slot about to be killed: its bin, logical slot and
    /// state ([`Moving::pack`]).
    pub moving_slot: AtomicU64,
    /// The pair the slot held when its kill was tried.
    pub moving_key: AtomicU64,
    /// See `moving_key`.
    pub moving_value: AtomicU64,
    /// An operation's count about to land ([`Counting::pack`]): the slot
    /// of the intent's bin whose marker pair the operation is about to
    /// publish or free, and what `len_share` is once the count is stored;
    /// 0 for none. Files from before it read 0.
    pub counting: AtomicU64,
    /// The second word of that marker pair (the key of `(pending, key)` or
    /// `(shadow, key)`, the value of `(dead, value)`), which tells the
    /// operation's slot from a later one's.
    pub counting_word: AtomicU64,
    _pad: [u64; 1],
}

/// What an intent says a thread was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntentKind {
    /// An operation (insert, remove, put, a per-key atomic) on the bin.
    Operation = 1,
    /// A transfer of the bin into the next index.
    Transfer = 2,
}

/// An intent word: `kind:2 | generation mod 2^24 : 24 | bin : 38`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intent {
    /// What the thread was doing.
    pub kind: IntentKind,
    /// The index's generation, modulo 2^24.
    pub generation: u32,
    /// The bin.
    pub bin: u64,
}

impl Intent {
    const BIN_BITS: u32 = 38;
    const GEN_BITS: u32 = 24;

    /// The word for `kind` on `bin` of the index of `generation`.
    #[inline(always)]
    pub fn pack(kind: IntentKind, generation: u64, bin: usize) -> u64 {
        ((kind as u64) << (Self::BIN_BITS + Self::GEN_BITS))
            | ((generation & ((1 << Self::GEN_BITS) - 1)) << Self::BIN_BITS)
            | (bin as u64 & ((1 << Self::BIN_BITS) - 1))
    }

    /// The intent of a word; None for 0 or a word no `pack` makes.
    pub fn unpack(w: u64) -> Option<Intent> {
        let kind = match w >> (Self::BIN_BITS + Self::GEN_BITS) {
            1 => IntentKind::Operation,
            2 => IntentKind::Transfer,
            _ => return None,
        };
        Some(Intent {
            kind,
            generation: ((w >> Self::BIN_BITS) & ((1 << Self::GEN_BITS) - 1)) as u32,
            bin: w & ((1 << Self::BIN_BITS) - 1),
        })
    }

    /// True if this intent names the index of `generation`.
    pub fn is_of(&self, generation: u64) -> bool {
        self.generation as u64 == generation & ((1 << Self::GEN_BITS) - 1)
    }
}

/// A transfer's slot about to be killed: `valid:1 | bin:38 | state:2 |
/// slot:4` (the bin: a shrink merges several sources into one target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moving {
    /// The source bin.
    pub bin: usize,
    /// Logical slot (0..15) in the source bin.
    pub slot: usize,
    /// Its header state when claimed (Valid or Shadow), as the bits.
    pub state: u8,
}

impl Moving {
    const SLOT_BITS: u32 = 4;
    const STATE_SHIFT: u32 = Self::SLOT_BITS;
    const BIN_SHIFT: u32 = Self::STATE_SHIFT + 2;
    const BIN_BITS: u32 = 38;
    const VALID_SHIFT: u32 = Self::BIN_SHIFT + Self::BIN_BITS;

    /// The word for slot `slot` of `bin` in state bits `state`.
    #[inline(always)]
    pub fn pack(bin: usize, slot: usize, state: u8) -> u64 {
        1 << Self::VALID_SHIFT
            | (bin as u64 & ((1 << Self::BIN_BITS) - 1)) << Self::BIN_SHIFT
            | (state as u64 & 0b11) << Self::STATE_SHIFT
            | (slot as u64 & ((1 << Self::SLOT_BITS) - 1))
    }

    /// The record of a word, None for "nothing moving".
    pub fn unpack(w: u64) -> Option<Moving> {
        (w >> Self::VALID_SHIFT == 1).then_some(Moving {
            bin: ((w >> Self::BIN_SHIFT) & ((1 << Self::BIN_BITS) - 1)) as usize,
            slot: (w & ((1 << Self::SLOT_BITS) - 1)) as usize,
            state: ((w >> Self::STATE_SHIFT) & 0b11) as u8,
        })
    }
}

/// An operation's count about to land: `slot + 1 : 4 | adds : 1 |
/// len_share after the count, mod 2^59 : 59`. A write counts itself in its
/// cell's `len_share` between the step that makes its marker pair and the
/// step that publishes (an insert, a shadow commit: `adds`) or frees (a
/// remove) it, so that recovery, finding the pair, knows from the record
/// whether the count landed: it takes back the count of an insert that
/// never took effect, and counts a remove that did (`persist::recover`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counting {
    /// Logical slot (0..15) of the intent's bin.
    pub slot: usize,
    /// An insert or a shadow commit (+1); else a remove (-1).
    pub adds: bool,
    /// `len_share` once the count is stored, mod 2^59.
    pub share_after: u64,
}

impl Counting {
    const SLOT_BITS: u32 = 4;
    const ADDS_SHIFT: u32 = Self::SLOT_BITS;
    const SHARE_SHIFT: u32 = Self::ADDS_SHIFT + 1;
    const SHARE_MASK: u64 = (1 << (64 - Self::SHARE_SHIFT)) - 1;

    /// The word for a count of `delta` (1 or -1) landing in `slot`,
    /// `len_share` then `share_after`.
    #[inline(always)]
    pub fn pack(slot: usize, delta: i64, share_after: u64) -> u64 {
        (share_after & Self::SHARE_MASK) << Self::SHARE_SHIFT
            | u64::from(delta > 0) << Self::ADDS_SHIFT
            | (slot as u64 + 1) & ((1 << Self::SLOT_BITS) - 1)
    }

    /// The record of a word; None for "no count landing".
    pub fn unpack(w: u64) -> Option<Counting> {
        let slot = (w & ((1 << Self::SLOT_BITS) - 1)) as usize;
        (slot != 0).then(|| Counting {
            slot: slot - 1,
            adds: w >> Self::ADDS_SHIFT & 1 == 1,
            share_after: w >> Self::SHARE_SHIFT,
        })
    }

    /// True if a cell whose share is `share` holds this count.
    pub fn landed(&self, share: u64) -> bool {
        share & Self::SHARE_MASK == self.share_after
    }
}

/// First bytes of a snapshot log.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"DLHT-SNP";

/// Page 0 of a snapshot log (`DIR/snapshot.dlht`), which a persistent map's
/// snapshot writes while it holds bins frozen, so that recovery can thaw
/// them if the process dies (see `Map::snapshot`).
#[repr(C)]
pub struct SnapshotHeader {
    /// [`SNAPSHOT_MAGIC`].
    pub magic: [u8; 8],
    /// [`LAYOUT_VERSION`].
    pub layout_version: u32,
    /// [`ENDIAN_CHECK`].
    pub endian: u32,
    /// The generation of the index the snapshot holds.
    pub generation: u64,
    /// Entries the log has room for.
    pub capacity: u64,
    /// The map's identity ([`MapHeader::map_id`]).
    pub map_id: u64,
    /// The map's stamp when the log was made.
    pub stamp: u64,
    /// CRC-32C of the header's bytes before this field.
    pub header_crc: u32,
    /// Reserved, zero.
    pub _pad: u32,
    /// Bins `0..frozen` may be frozen (raised before each bin's freeze).
    pub frozen: AtomicU64,
    /// Entries written (raised after an entry is whole, before its kill).
    pub entries: AtomicU64,
}

impl HeaderCrc for SnapshotHeader {
    const CRC_BYTES: usize = core::mem::offset_of!(SnapshotHeader, header_crc);
}

/// A pair a snapshot is killing: recovery writes it back if its slot holds
/// `(moved, key)`.
#[repr(C, align(32))]
#[derive(Default)]
pub struct SnapshotEntry {
    /// The slot: [`SnapshotEntry::place_of`].
    pub place: AtomicU64,
    /// The key's word.
    pub key: AtomicU64,
    /// The value's word.
    pub value: AtomicU64,
    _pad: u64,
}

impl SnapshotEntry {
    const SLOT_BITS: u32 = 8;

    /// The `place` word of slot `slot` of bin `bin`.
    pub fn place_of(bin: u32, slot: u8) -> u64 {
        (bin as u64) << Self::SLOT_BITS | slot as u64
    }

    /// The bin and slot of a `place` word.
    pub fn bin_and_slot(place: u64) -> (usize, usize) {
        ((place >> Self::SLOT_BITS) as usize, (place & ((1 << Self::SLOT_BITS) - 1)) as usize)
    }
}

const _: () = assert!(size_of::<MapHeader>() <= PAGE);
const _: () = assert!(size_of::<IndexHeader>() <= PAGE);
const _: () = assert!(size_of::<SnapshotHeader>() <= PAGE && size_of::<SnapshotEntry>() == 32);
const _: () = assert!(size_of::<ThreadCell>() == 64 && align_of::<ThreadCell>() == 64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_offsets() {
        assert_eq!(size_of::<ThreadCell>(), 64);
        assert_eq!(MAP_FILE_BYTES, 4096 + 64 * 1024 + 16 * 4096);
        assert_eq!(SHADOW_CELLS_OFFSET % 16, 0);
        for h in [0u64, 1, u64::MAX, 0x8000_0000_0000_0001] {
            let w = ShadowCell::tag(h);
            assert!(w != 0 && ShadowCell::untag(w) & ((1 << 29) - 1) == h & ((1 << 29) - 1));
        }
        const M2: usize = 2 << 20;
        assert_eq!(IndexHeader::links_offset(2), Some(2 * M2));
        assert_eq!(IndexHeader::links_offset(M2 / 64), Some(2 * M2));
        assert_eq!(IndexHeader::links_offset(M2 / 64 + 1), Some(3 * M2));
        assert_eq!(IndexHeader::file_bytes(64, 10), Some(2 * M2 + 640));
        assert_eq!(IndexHeader::file_bytes(usize::MAX / 8, 1), None);
    }

    #[test]
    fn counting_records_round_trip() {
        assert_eq!(Counting::unpack(0), None);
        for (slot, share) in [(0, 0u64), (14, 1), (7, u64::MAX), (3, 1 << 59), (0, (1 << 59) - 1)] {
            for delta in [1, -1] {
                let c = Counting::unpack(Counting::pack(slot, delta, share)).unwrap();
                assert_eq!((c.slot, c.adds), (slot, delta > 0));
                assert!(
                    c.landed(share) && !c.landed(share.wrapping_add(1)) && !c.landed(share.wrapping_sub(1))
                );
            }
        }
    }

    #[test]
    fn stamps_accept_only_this_map_at_this_state() {
        let at = |stamp, stamping| Stamp { map_id: 7, stamp, stamping };
        let ok = |s: Stamp, id, file| s.check(id, file, INDEX_FILE_ERRORS).is_ok();
        // Settled: only the map's stamp, only the map's id.
        assert!(ok(at(5, 5), 7, 5));
        assert!(!ok(at(5, 5), 7, 4) && !ok(at(5, 5), 7, 6));
        assert!(matches!(at(5, 5).check(8, 5, INDEX_FILE_ERRORS), Err(Error::Incompatible { .. })));
        assert!(matches!(at(5, 5).check(7, 4, INDEX_FILE_ERRORS), Err(Error::Corrupt { .. })));
        // An advance a crash cut short: either stamp, nothing older.
        assert!(ok(at(5, 6), 7, 5) && ok(at(5, 6), 7, 6));
        assert!(!ok(at(5, 6), 7, 4) && !ok(at(5, 6), 7, 7));
        assert!(ok(at(u64::MAX, 0), 7, 0), "the stamp wraps");
    }

    #[test]
    fn header_checksums_cover_the_fixed_fields_only() {
        let mut b = vec![0u64; PAGE / 8];
        // SAFETY: a zeroed, 8-aligned page: every header field is valid as zero.
        let h = unsafe { &mut *(b.as_mut_ptr() as *mut IndexHeader) };
        h.bins = 64;
        let crc = h.crc();
        h.link_floor.store(3, Ordering::Relaxed);
        h.stamp.store(9, Ordering::Relaxed);
        h.header_crc = crc;
        assert_eq!(h.crc(), crc, "fields after the checksum are not covered");
        h.map_id ^= 1 << 40;
        assert_ne!(h.crc(), crc);
        assert_eq!(IndexHeader::CRC_BYTES, 48);
        assert_eq!(MapHeader::CRC_BYTES, 136);
        assert_eq!(SnapshotHeader::CRC_BYTES, 48);
    }

    #[test]
    fn intents_round_trip() {
        for kind in [IntentKind::Operation, IntentKind::Transfer] {
            for g in [1u64, 2, (1 << 24) - 1, 1 << 24, (1 << 40) + 5] {
                for bin in [0usize, 1, (1 << 29) - 1] {
                    let i = Intent::unpack(Intent::pack(kind, g, bin)).unwrap();
                    assert_eq!((i.kind, i.bin as usize), (kind, bin));
                    assert!(i.is_of(g) && !i.is_of(g + 1));
                }
            }
        }
        assert_eq!(Intent::unpack(0), None);
        assert_eq!(Intent::unpack(u64::MAX), None);
    }

    #[test]
    fn moving_round_trips() {
        for bin in [0usize, 1, (1 << 29) - 1] {
            for slot in 0..15 {
                for state in [1u8, 2, 3] {
                    assert_eq!(
                        Moving::unpack(Moving::pack(bin, slot, state)),
                        Some(Moving { bin, slot, state })
                    );
                }
            }
        }
        assert_eq!(Moving::unpack(0), None);
    }
}
