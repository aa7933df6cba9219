//! The exact error lines memcached 1.6.18 sends for bad input, "\r\n"
//! included, so that the parser (and the server) can reply byte for byte as
//! memcached does. Each was observed from the real binary (see OBSERVED.md).

/// Unknown command, wrong number of tokens, empty line.
pub const ERROR: &[u8] = b"ERROR\r\n";
/// No reply: memcached suppresses the error of a text command carrying
/// `noreply` (its `out_string` honours `noreply` for errors too).
pub const NONE: &[u8] = b"";

/// Bad key length or bad number in most commands.
pub const CLIENT_ERROR_BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
/// The data block of a storage command does not end with "\r\n" where its
/// declared length says it should.
pub const CLIENT_ERROR_BAD_DATA_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";
/// `gat`/`gats`/`touch`/`flush_all` with a bad time argument.
pub const CLIENT_ERROR_INVALID_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
/// `incr`/`decr` with a bad delta.
pub const CLIENT_ERROR_INVALID_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
/// `delete` with an argument other than the legacy `0` and `noreply`.
pub const CLIENT_ERROR_DELETE_USAGE: &[u8] =
    b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
/// A value whose item would exceed the item size limit (`-I`).
pub const SERVER_ERROR_OBJECT_TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
/// `shutdown` while it is disabled (memcached's default; `-A` enables it).
pub const SHUTDOWN_NOT_ENABLED: &[u8] = b"ERROR: shutdown not enabled\r\n";
/// `shutdown` with an argument other than `graceful`, when enabled.
pub const CLIENT_ERROR_INVALID_SHUTDOWN_MODE: &[u8] = b"CLIENT_ERROR invalid shutdown mode\r\n";

// Meta commands. memcached always sends these, `q` or not.

/// A meta flag given twice, or a flag byte >= 127 (mg, ms).
pub const CLIENT_ERROR_DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
/// An unknown meta flag (mg, ms).
pub const CLIENT_ERROR_INVALID_FLAG: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
/// md and ma report every flag error with this one line.
pub const CLIENT_ERROR_INVALID_OR_DUPLICATE_FLAG: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
/// Bad number after N, T, R or C (mg, ms).
pub const CLIENT_ERROR_BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
/// The `b` flag on a key that is not base64 (mg, ms).
pub const CLIENT_ERROR_DECODING_KEY: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
/// `M` not followed by exactly one byte (mg, ms).
pub const CLIENT_ERROR_M_TOKEN_LENGTH: &[u8] = b"CLIENT_ERROR incorrect length for M token\r\n";
/// Bad number after J (mg, ms).
pub const CLIENT_ERROR_INVALID_INITIAL: &[u8] = b"CLIENT_ERROR invalid numeric initial value\r\n";
/// Bad number after D (mg, ms).
pub const CLIENT_ERROR_INVALID_DELTA_VALUE: &[u8] = b"CLIENT_ERROR invalid numeric delta value\r\n";
/// mg with more than 17 flags (its wording differs from the other commands').
pub const CLIENT_ERROR_MG_FLAGS_TOO_LONG: &[u8] = b"CLIENT_ERROR options flags are too long\r\n";
/// ms with more than 16 flags, md/ma with more than 17.
pub const CLIENT_ERROR_FLAGS_TOO_LONG: &[u8] = b"CLIENT_ERROR options flags too long\r\n";
/// An `O` token longer than 32 bytes, the `O` included.
pub const CLIENT_ERROR_OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long\r\n";
/// ms with `M` other than E, A, P, R, S.
pub const CLIENT_ERROR_INVALID_MS_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ms M token\r\n";
/// ma with `M` other than I, D, +, -.
pub const CLIENT_ERROR_INVALID_MA_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ma M token\r\n";
