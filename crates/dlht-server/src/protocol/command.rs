//! What the parsers produce: [`Parsed`], holding a text-protocol
//! [`Command`] or a [`MetaCommand`], and the constructors of [`Parsed`] that
//! the text and meta parsers share (`error`, `swallow`, `data_block`).

use std::fmt;

use super::base64::base64_decode;
use super::limits::KEY_MAX_LENGTH;
use super::tokens::{Keys, Tokens};

/// Result of parsing the front of a connection's input buffer.
#[derive(Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// Not a complete command yet: wait for more bytes. (A line over
    /// [`Limits::max_line`] is not this: it is an [`Parsed::Error`] that
    /// closes the connection.)
    ///
    /// [`Limits::max_line`]: super::limits::Limits::max_line
    Incomplete,
    /// One command, and how many bytes of the buffer it used: its line and,
    /// for storage commands, its data block and "\r\n".
    Command { command: Command<'a>, consumed: usize },
    /// Bad input: the exact bytes memcached replies (possibly none: errors of
    /// `noreply` commands are suppressed, and memcached closes without a
    /// word), how many input bytes to drop, and whether memcached then closes
    /// the connection. When memcached swallows a data block it refused,
    /// `consumed` includes the block (it is already in the buffer).
    Error { reply: &'static [u8], consumed: usize, close: bool },
    /// Like `Error` where memcached swallows a data block that has not fully
    /// arrived yet: drop `line` bytes now, send `reply`, and discard the next
    /// `remaining` bytes (the data block and its two trailing bytes, whatever
    /// they are; those already in the buffer count) as they arrive.
    ///
    /// memcached itself sends the reply only once the block is swallowed; the
    /// bytes on the wire are the same either way.
    Swallow { reply: &'static [u8], line: usize, remaining: usize },
    /// A storage command refused as too large (counted in
    /// `store_too_large`). For a `set` or an `ms` (`unlink`), memcached
    /// first unlinks the key's item ("Avoid stale data persisting in cache
    /// because we failed alloc", so that a client never reads the value the
    /// set meant to replace). Then it answers and swallows as `Swallow`
    /// does, whether the block has arrived or not.
    Refused { unlink: Option<MetaKey<'a>>, reply: &'static [u8], line: usize, remaining: usize },
    /// A storage command (text or `ms`) whose data block did not end in
    /// "\r\n": as `Error` (`reply` may be none, for `noreply`), and memcached
    /// counts it in `cmd_set` (its `complete_nread` counts before it checks).
    BadDataChunk { reply: &'static [u8], consumed: usize },
}

impl fmt::Debug for Parsed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Parsed::Incomplete => f.write_str("Incomplete"),
            Parsed::Command { command, consumed } => {
                f.debug_struct("Command").field("command", command).field("consumed", consumed).finish()
            }
            Parsed::Error { reply, consumed, close } => f
                .debug_struct("Error")
                .field("reply", &reply.escape_ascii().to_string())
                .field("consumed", consumed)
                .field("close", close)
                .finish(),
            Parsed::Swallow { reply, line, remaining } => f
                .debug_struct("Swallow")
                .field("reply", &reply.escape_ascii().to_string())
                .field("line", line)
                .field("remaining", remaining)
                .finish(),
            Parsed::BadDataChunk { reply, consumed } => f
                .debug_struct("BadDataChunk")
                .field("reply", &reply.escape_ascii().to_string())
                .field("consumed", consumed)
                .finish(),
            Parsed::Refused { unlink, reply, line, remaining } => f
                .debug_struct("Refused")
                .field("unlink", unlink)
                .field("reply", &reply.escape_ascii().to_string())
                .field("line", line)
                .field("remaining", remaining)
                .finish(),
        }
    }
}

/// An error reply after which the connection stays open.
pub(crate) fn error(reply: &'static [u8], consumed: usize) -> Parsed<'static> {
    Parsed::Error { reply, consumed, close: false }
}

/// memcached's `conn_swallow` of a refused data block of `total` bytes
/// (data and "\r\n") after a line of `line_len` bytes.
pub(crate) fn swallow(buf: &[u8], reply: &'static [u8], line_len: usize, total: usize) -> Parsed<'static> {
    match line_len.checked_add(total) {
        Some(end) if end <= buf.len() => error(reply, end),
        _ => Parsed::Swallow { reply, line: line_len, remaining: total },
    }
}

/// The data block of `len` bytes and its "\r\n" after the command line, as
/// memcached's `complete_nread_ascii` checks it: the `len + 2` bytes are
/// consumed whatever they are, and must end with "\r\n".
pub(crate) fn data_block<'a>(
    buf: &'a [u8],
    line_len: usize,
    len: usize,
    bad_chunk_reply: &'static [u8],
    command: impl FnOnce(&'a [u8]) -> Command<'a>,
) -> Parsed<'a> {
    let Some(end) = line_len.checked_add(len).and_then(|e| e.checked_add(2)) else {
        return Parsed::Incomplete;
    };
    let Some(block) = buf.get(line_len..end) else {
        return Parsed::Incomplete;
    };
    match (block.get(..len), block.get(len..)) {
        (Some(data), Some(b"\r\n")) => Parsed::Command { command: command(data), consumed: end },
        _ => Parsed::BadDataChunk { reply: bad_chunk_reply, consumed: end },
    }
}

/// A command of the text protocol (or a meta command), borrowing from the
/// input buffer. Names follow memcached's `protocol.txt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// `get <key>*` (`cas: false`; also the ancient `bget`) and
    /// `gets <key>*` (`cas: true`). There is at least one key, each at most
    /// [`KEY_MAX_LENGTH`] bytes.
    Get { keys: Keys<'a>, cas: bool },
    /// `gat <exptime> <key>*` and `gats` (`cas: true`). memcached accepts no
    /// key at all (and then replies just "END\r\n").
    Gat { exptime: i64, keys: Keys<'a>, cas: bool },
    /// A get, gets, gat or gats (`exptime` given) with a key over
    /// [`KEY_MAX_LENGTH`] bytes: memcached has already looked up (and
    /// counted, and for a gat touched) the `keys` before it when it meets
    /// it, then drops their replies and answers only "CLIENT_ERROR bad
    /// command line format".
    LongKeyAfter { keys: Keys<'a>, exptime: Option<i64> },
    /// `set`/`add`/`replace`/`append`/`prepend <key> <flags> <exptime>
    /// <bytes> [noreply]` and `cas <key> <flags> <exptime> <bytes> <cas
    /// unique> [noreply]`, with the data block (without its "\r\n").
    ///
    /// As in memcached, flags are truncated to 32 bits and exptime to a
    /// signed 32-bit value (`"4294967297"` is 1); a negative exptime means
    /// "already expired". `cas_unique` is 0 except for `cas`.
    Store {
        op: StoreOp,
        key: &'a [u8],
        flags: u32,
        exptime: i64,
        data: &'a [u8],
        cas_unique: u64,
        noreply: bool,
    },
    /// `delete <key> [0] [noreply]` (the `0` is a legacy hold time; any
    /// other value is refused).
    Delete { key: &'a [u8], noreply: bool },
    /// `incr <key> <delta> [noreply]`.
    Incr { key: &'a [u8], delta: u64, noreply: bool },
    /// `decr <key> <delta> [noreply]`.
    Decr { key: &'a [u8], delta: u64, noreply: bool },
    /// `touch <key> <exptime> [noreply]`.
    Touch { key: &'a [u8], exptime: i64, noreply: bool },
    /// `flush_all [delay] [noreply]`. memcached treats a delay <= 0 as "now".
    /// `delay` None: not a number, which memcached answers "CLIENT_ERROR
    /// invalid exptime argument" after it counted the command in
    /// `cmd_flush`. (memcached started with `-F` replies "CLIENT_ERROR
    /// flush_all not allowed" to any well-formed `flush_all` line, bad delay
    /// included; that setting is the server's to check.)
    FlushAll { delay: Option<i64>, noreply: bool },
    /// `version` (arguments ignored).
    Version,
    /// `verbosity <level> [noreply]` (memcached clamps the level).
    Verbosity { level: u32, noreply: bool },
    /// `quit` (arguments ignored): close once earlier replies are sent;
    /// memcached reads nothing after it.
    Quit,
    /// `stats [<arg> ...]`: `arg` is the first argument (`items`, `slabs`,
    /// `settings`, `detail`, ...), `args` all of them, `arg` included.
    /// memcached replies "ERROR\r\n" to an unknown `arg`.
    Stats { arg: Option<&'a [u8]>, args: Tokens<'a> },
    /// `shutdown [graceful]`. Disabled in memcached by default (`-A` enables
    /// it): then the reply is [`reply::SHUTDOWN_NOT_ENABLED`] whatever the
    /// arguments.
    ///
    /// [`reply::SHUTDOWN_NOT_ENABLED`]: super::reply::SHUTDOWN_NOT_ENABLED
    Shutdown { mode: ShutdownMode },
    /// memcached's administration commands that this parser recognises but
    /// does not parse further: `slabs`, `lru`, `lru_crawler`, `watch`,
    /// `cache_memlimit`, `extstore`, `refresh_certs` (their token-count
    /// checks, which reply "ERROR", are done). `args` follow `name`.
    Admin { name: &'a [u8], args: Tokens<'a> },
    /// A meta command: `mg`, `ms`, `md`, `ma`, `mn`, `me`.
    Meta(MetaCommand<'a>),
}

impl Command<'_> {
    /// True if the command may change an item or the cache's state (what
    /// `--durable` makes wait for the disk before its reply): storage
    /// commands, deletes, arithmetic, touches (`gat` too), `flush_all`,
    /// `ms`, `md`, `ma`, and an `mg` that touches (`T`), vivifies (`N`) or
    /// may win a recache token (`R`). Reads, `stats` and the rest do not.
    pub fn changes(&self) -> bool {
        match self {
            Command::Store { .. }
            | Command::Delete { .. }
            | Command::Incr { .. }
            | Command::Decr { .. }
            | Command::Touch { .. }
            | Command::Gat { .. }
            | Command::LongKeyAfter { exptime: Some(_), .. }
            | Command::FlushAll { .. } => true,
            Command::Meta(MetaCommand::Get { flags, .. }) => {
                flags.iter().any(|f| matches!(f.flag, b'T' | b'N' | b'R'))
            }
            Command::Meta(
                MetaCommand::Set { .. } | MetaCommand::Delete { .. } | MetaCommand::Arithmetic { .. },
            ) => true,
            Command::Meta(MetaCommand::Debug { .. } | MetaCommand::Noop) => false,
            Command::Get { .. }
            | Command::LongKeyAfter { exptime: None, .. }
            | Command::Version
            | Command::Verbosity { .. }
            | Command::Quit
            | Command::Stats { .. }
            | Command::Shutdown { .. }
            | Command::Admin { .. } => false,
        }
    }
}

/// The storage commands of the text protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreOp {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

/// What `shutdown` asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShutdownMode {
    /// `shutdown`.
    Immediate,
    /// `shutdown graceful`.
    Graceful,
    /// Anything else: memcached (with `-A`) replies
    /// [`reply::CLIENT_ERROR_INVALID_SHUTDOWN_MODE`].
    ///
    /// [`reply::CLIENT_ERROR_INVALID_SHUTDOWN_MODE`]: super::reply::CLIENT_ERROR_INVALID_SHUTDOWN_MODE
    Invalid,
}

/// A meta command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaCommand<'a> {
    /// `mg <key> <flags>*`.
    Get { key: MetaKey<'a>, flags: MetaFlags<'a> },
    /// `ms <key> <datalen> <flags>*` and its data block (without "\r\n").
    /// In 1.6.18 the data length is the token after the key (not an `S`
    /// flag, which 1.6.18 refuses as an invalid flag).
    Set { key: MetaKey<'a>, flags: MetaFlags<'a>, mode: SetMode, data: &'a [u8] },
    /// `md <key> <flags>*`.
    Delete { key: MetaKey<'a>, flags: MetaFlags<'a> },
    /// `ma <key> <flags>*`.
    Arithmetic { key: MetaKey<'a>, flags: MetaFlags<'a>, mode: ArithMode },
    /// `me <key> [b]`: memcached's debug dump of an item.
    Debug { key: MetaKey<'a> },
    /// `mn` (arguments ignored): replies "MN\r\n".
    Noop,
}

/// `ms`'s `M` flag. memcached upgrades `Set` and `Replace` to a CAS store
/// when a `C` flag is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SetMode {
    /// No `M`, or `MS`.
    Set,
    /// `ME`.
    Add,
    /// `MA`.
    Append,
    /// `MP`.
    Prepend,
    /// `MR`.
    Replace,
}

/// `ma`'s `M` flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithMode {
    /// No `M`, `MI` or `M+`.
    Incr,
    /// `MD` or `M-`.
    Decr,
}

/// A meta command's key, as sent. With the `b` flag (or `me <key> b`) it is
/// base64, already checked to decode as memcached decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaKey<'a> {
    /// The key token as sent (at most [`KEY_MAX_LENGTH`] bytes).
    pub raw: &'a [u8],
    /// Whether `raw` is base64 for a binary key.
    pub base64: bool,
}

impl<'a> MetaKey<'a> {
    /// The key's bytes: `raw`, or `raw` decoded into `scratch` (a decoded key
    /// is at most 187 bytes). No allocation.
    pub fn bytes<'s>(&'s self, scratch: &'s mut [u8; KEY_MAX_LENGTH]) -> &'s [u8] {
        if !self.base64 {
            return self.raw;
        }
        let len = base64_decode(self.raw, scratch).unwrap_or(0);
        scratch.get(..len).unwrap_or_default()
    }

    /// Length of the key's bytes (decoded, for a base64 key).
    pub fn len(&self) -> usize {
        let mut scratch = [0; KEY_MAX_LENGTH];
        self.bytes(&mut scratch).len()
    }

    /// Whether the key is empty (never, for a parsed command).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The flags of a meta command, validated as memcached does (no flag twice,
/// numbers in range), with the values of those that carry one.
///
/// Every flag memcached's parser knows is accepted on every meta command;
/// each command then ignores those it does not use. Replies echo `O` and `k`
/// (and list `c`, `f`, `s`, `t`, ...) in request order: use [`MetaFlags::iter`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MetaFlags<'a> {
    pub(super) raw: &'a [u8],
    /// `q`: suppress the nominal reply (HD, EN for mg, ...). Errors are still sent.
    pub quiet: bool,
    /// `O<opaque>`: the opaque token to echo (without the `O`; may be empty).
    pub opaque: Option<&'a [u8]>,
    /// `k`: return the key.
    pub return_key: bool,
    /// `c`: return the CAS value.
    pub return_cas: bool,
    /// `f`: return the client flags.
    pub return_flags: bool,
    /// `h`: return whether the item was fetched before.
    pub return_hit: bool,
    /// `l`: return the seconds since the last access.
    pub return_last_access: bool,
    /// `s`: return the value's size.
    pub return_size: bool,
    /// `t`: return the remaining TTL.
    pub return_ttl: bool,
    /// `v`: return the value.
    pub return_value: bool,
    /// `u`: don't bump the item in the LRU.
    pub no_lru_bump: bool,
    /// `I`: invalidate (mark stale) instead of delete/when CAS is older.
    pub invalidate: bool,
    /// `N<ttl>`: vivify on miss with this TTL (32-bit, like all exptimes).
    pub vivify_ttl: Option<i64>,
    /// `T<ttl>`: update the TTL.
    pub ttl: Option<i64>,
    /// `R<ttl>`: win the recache token if the TTL is below this.
    pub recache_ttl: Option<i64>,
    /// `F<flags>`: client flags for ms (truncated to 32 bits, as memcached does).
    pub client_flags: Option<u32>,
    /// `C<cas>`: compare CAS.
    pub compare_cas: Option<u64>,
    /// `M<mode>`: the mode byte (see [`SetMode`], [`ArithMode`]).
    pub mode: Option<u8>,
    /// `J<initial>`: ma's initial value on vivify.
    pub initial: Option<u64>,
    /// `D<delta>`: ma's delta.
    pub delta: Option<u64>,
}

/// One flag of a meta command: its byte and the token after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaFlag<'a> {
    pub flag: u8,
    pub token: &'a [u8],
}

impl<'a> MetaFlags<'a> {
    /// The flags in request order (`b`, and the proxy hints `P` and `L`,
    /// which memcached accepts and ignores, included).
    pub fn iter(&self) -> impl Iterator<Item = MetaFlag<'a>> + Clone {
        Tokens::new(self.raw).filter_map(|t| t.split_first().map(|(&flag, token)| MetaFlag { flag, token }))
    }
}
