//! The limits the parsers enforce, as memcached 1.6.18 does: the longest
//! key, the longest command line, and the largest item (`-I`).

/// memcached's `KEY_MAX_LENGTH`: longer keys get "CLIENT_ERROR bad command
/// line format".
pub const KEY_MAX_LENGTH: usize = 250;

/// memcached's fixed line limit: a line without "\n" in its first 2048 bytes
/// closes the connection, unless it is a `get`/`gets` (see [`Limits`]).
pub const DEFAULT_MAX_LINE: usize = 2048;

/// memcached's default `-I`: 1 MiB per item, header and key included.
pub const DEFAULT_MAX_ITEM_SIZE: usize = 1024 * 1024;

/// `sizeof(item)` in memcached 1.6.18 on x86_64 (found at the boundary with
/// the binary: see [`Limits::item_fits`]).
const ITEM_HEADER_SIZE: usize = 48;
/// The CAS value memcached stores in each item (unless started with `-C`).
const ITEM_CAS_SIZE: usize = 8;

/// The limits the parser enforces, as memcached does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// memcached's `-I` (default [`DEFAULT_MAX_ITEM_SIZE`]): values whose item
    /// would be larger are refused with "SERVER_ERROR object too large for
    /// cache" and their data swallowed (see [`Limits::item_fits`]).
    pub max_item_size: usize,
    /// The longest line, without its "\n" (default [`DEFAULT_MAX_LINE`]).
    ///
    /// memcached closes a connection whose read buffer holds more than 2048
    /// bytes and no "\n", without a reply, unless the buffer starts with at
    /// most 100 spaces and then "get " or "gets ": multi-gets are unbounded.
    /// What memcached does thus depends on how the line was split into reads
    /// (a 3000-byte `set` line arriving in one read is processed, the same
    /// line arriving as 2100 + 900 bytes closes the connection). This parser
    /// makes it deterministic: a line (other than a get/gets) with no "\n" in
    /// its first `max_line + 1` bytes closes the connection, whatever the
    /// reads. Lines of memcached's own commands never need that much (keys
    /// are at most 250 bytes). `get`/`gets` lines are unbounded here too: a
    /// server that wants to bound its buffer must do so itself.
    pub max_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_item_size: DEFAULT_MAX_ITEM_SIZE, max_line: DEFAULT_MAX_LINE }
    }
}

impl Limits {
    /// Whether memcached would accept an item with this key length, client
    /// flags and data length (without "\r\n") under `max_item_size`.
    ///
    /// memcached's `item_size_ok`: the item's total size is its 48-byte
    /// header, the key and a NUL, 4 bytes of client flags unless they are 0,
    /// the data and its "\r\n", and an 8-byte CAS. Checked against the binary
    /// (default `-I 1m`): key "k", flags 0 accepts 1048516 data bytes and
    /// refuses 1048517; flags 1 refuses 1048513; a 250-byte key accepts
    /// 1048267.
    pub fn item_fits(&self, key_len: usize, client_flags: u32, data_len: usize) -> bool {
        let flags_size = if client_flags == 0 { 0 } else { 4 };
        let total = ITEM_HEADER_SIZE
            .saturating_add(key_len)
            .saturating_add(1 + flags_size + 2 + ITEM_CAS_SIZE)
            .saturating_add(data_len);
        total <= self.max_item_size
    }
}
