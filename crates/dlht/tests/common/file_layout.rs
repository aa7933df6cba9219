//! The on-disk layout of a persistent map's index and heap files, as the
//! damage tests write them byte by byte (the library's `persist::layout` and
//! `raw::header` are private: these mirror them, and the tests that use
//! them fail if they drift).

/// Where an index file's header keeps its number of bins
/// (`IndexHeader::bins`).
pub const BINS_FIELD_AT: u64 = 24;
/// Where an index file's bins start (`IndexHeader::bins_offset`: 2 MiB).
pub const BINS_AT: u64 = 2 << 20;
/// Bytes of a bin's primary bucket (and of a link bucket).
pub const BUCKET_BYTES: u64 = 64;
/// Where a bin header's 2-bit transfer state lies (`Header::BIN_STATE_SHIFT`).
pub const BIN_STATE_SHIFT: u32 = 30;
/// The high bit of each of a header's fifteen 2-bit slot states (a slot
/// Valid, 0b10, or Shadow, 0b11, has it).
pub const SLOT_HIGH_BITS: u64 = 0x2aaa_aaaa;

/// The file offset of word `word` of bin `b` (0: the header, 1: the link
/// meta, 2..: the slots' words).
pub fn bin_word_at(b: u64, word: u64) -> u64 {
    BINS_AT + b * BUCKET_BYTES + word * 8
}

/// `h` with its transfer state set to `state` (two bits).
pub fn with_bin_state(h: u64, state: u64) -> u64 {
    h & !(0b11 << BIN_STATE_SHIFT) | state << BIN_STATE_SHIFT
}

/// Where a heap file's bump pointer lies (`HeapHeader::next_slab`): the
/// slabs handed out, the header's slab 0 among them.
pub const HEAP_NEXT_SLAB_AT: u64 = 48;
/// Bytes of a heap slab (`heap::SLAB`).
pub const HEAP_SLAB_BYTES: u64 = 64 << 10;
/// Bytes of a blob's header before its key (`Blob`: key and value
/// lengths, stamp).
pub const BLOB_HEADER_BYTES: usize = 12;
/// Bytes of a block's state word, just before its payload (`BlockState`).
pub const BLOCK_STATE_BYTES: usize = 8;
/// A block state word's states (`BlockState`: `incarnation << 2 | state`).
pub const BLOCK_FREE: u64 = 0;
pub const BLOCK_LIVE: u64 = 1;
pub const BLOCK_RETIRED: u64 = 2;

/// `w`, a block's state word, with its state set to `state`.
pub fn with_block_state(w: u64, state: u64) -> u64 {
    w & !0b11 | state
}

/// A block state word's state.
pub fn block_state(w: u64) -> u64 {
    w & 0b11
}
