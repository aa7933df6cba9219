//! memcached 1.6.18's meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`),
//! parsed as `proto_text.c` does: the key, then flags, each a flag byte and
//! an optional token (`T30`, `O<opaque>`, `q`), validated by memcached's
//! `_meta_flag_preparse` with its exact error lines.
//!
//! What the parser checks and memcached checks only after touching the item
//! (an `O` token over 32 bytes in `mg` and `ma`) is reported here, before any
//! side effect; memcached would e.g. already have applied `ma`'s delta.

use super::num::{safe_strtol, safe_strtoul, safe_strtoull};
use super::reply;
use super::text::{data_block, error, swallow, Command, Limits, Line, Parsed, Tokens, KEY_MAX_LENGTH};

/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta line may have at most 19
/// tokens (the terminal one makes 20): 17 flags for mg/md/ma, 16 for ms.
const MAX_META_TOKENS: usize = 20;
/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`: an `O` token, `O` included.
const MAX_OPAQUE_TOKEN: usize = 32;

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
    raw: &'a [u8],
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

/// memcached's `process_*_command` for the two-byte `m?` commands.
pub(crate) fn process<'a>(buf: &'a [u8], line_len: usize, t: &Line<'a>, limits: &Limits) -> Parsed<'a> {
    let ntokens = t.ntokens();
    let key = t.token(1);
    let done = |command| Parsed::Command { command: Command::Meta(command), consumed: line_len };
    let fail = |reply| error(reply, line_len);
    match t.token(0) {
        b"mn" => done(MetaCommand::Noop),
        b"me" => {
            if ntokens < 3 || key.len() > KEY_MAX_LENGTH {
                return fail(reply::CLIENT_ERROR_BAD_FORMAT);
            }
            let base64 = ntokens >= 4 && t.token(2) == b"b";
            if base64 && base64_decode(key, &mut [0; KEY_MAX_LENGTH]).is_none() {
                return fail(reply::CLIENT_ERROR_BAD_FORMAT);
            }
            done(MetaCommand::Debug { key: MetaKey { raw: key, base64 } })
        }
        b"mg" | b"md" | b"ma" => {
            let name = t.token(0);
            if ntokens < 3 {
                return fail(reply::ERROR);
            }
            if key.len() > KEY_MAX_LENGTH {
                return fail(reply::CLIENT_ERROR_BAD_FORMAT);
            }
            if ntokens > MAX_META_TOKENS {
                return fail(if name == b"mg" {
                    reply::CLIENT_ERROR_MG_FLAGS_TOO_LONG
                } else {
                    reply::CLIENT_ERROR_FLAGS_TOO_LONG
                });
            }
            let flags = match preparse(t, 2) {
                Ok(flags) => flags,
                // md and ma ignore the preparse's message.
                Err(_) if name != b"mg" => return fail(reply::CLIENT_ERROR_INVALID_OR_DUPLICATE_FLAG),
                Err(message) => return fail(message),
            };
            let key = MetaKey { raw: key, base64: flags.has_base64_key() };
            let command = match name {
                b"mg" => MetaCommand::Get { key, flags },
                b"md" => MetaCommand::Delete { key, flags },
                _ => {
                    let mode = match flags.mode {
                        None | Some(b'I' | b'+') => ArithMode::Incr,
                        Some(b'D' | b'-') => ArithMode::Decr,
                        Some(_) => return fail(reply::CLIENT_ERROR_INVALID_MA_MODE),
                    };
                    MetaCommand::Arithmetic { key, flags, mode }
                }
            };
            if opaque_too_long(&command) {
                return fail(reply::CLIENT_ERROR_OPAQUE_TOO_LONG);
            }
            done(command)
        }
        b"ms" => meta_set(buf, line_len, t, limits),
        _ => fail(reply::ERROR),
    }
}

/// memcached's `process_mset_command`. Errors found before the data length
/// is known leave the data block to be read as commands; later ones swallow it.
fn meta_set<'a>(buf: &'a [u8], line_len: usize, t: &Line<'a>, limits: &Limits) -> Parsed<'a> {
    let ntokens = t.ntokens();
    let raw_key = t.token(1);
    let fail = |reply| error(reply, line_len);
    if ntokens < 3 {
        return fail(reply::ERROR);
    }
    if raw_key.len() > KEY_MAX_LENGTH || ntokens == 3 {
        return fail(reply::CLIENT_ERROR_BAD_FORMAT);
    }
    if ntokens > MAX_META_TOKENS {
        return fail(reply::CLIENT_ERROR_FLAGS_TOO_LONG);
    }
    let Some(vlen) = safe_strtol(t.token(2)).and_then(|v| usize::try_from(v).ok()) else {
        return fail(reply::CLIENT_ERROR_BAD_FORMAT);
    };
    if vlen > (i32::MAX - 2) as usize {
        return fail(reply::CLIENT_ERROR_BAD_FORMAT);
    }
    let total = vlen + 2;
    let flags = match preparse(t, 3) {
        Ok(flags) => flags,
        Err(message) => return swallow(buf, message, line_len, total),
    };
    // memcached checks the mode before acting on a long opaque.
    let mode = match flags.mode {
        None | Some(b'S') => SetMode::Set,
        Some(b'E') => SetMode::Add,
        Some(b'A') => SetMode::Append,
        Some(b'P') => SetMode::Prepend,
        Some(b'R') => SetMode::Replace,
        Some(_) => return swallow(buf, reply::CLIENT_ERROR_INVALID_MS_MODE, line_len, total),
    };
    if flags.opaque.is_some_and(|o| o.len() + 1 > MAX_OPAQUE_TOKEN) {
        return swallow(buf, reply::CLIENT_ERROR_OPAQUE_TOO_LONG, line_len, total);
    }
    let key = MetaKey { raw: raw_key, base64: flags.has_base64_key() };
    if !limits.item_fits(key.len(), flags.client_flags.unwrap_or(0), vlen) {
        return swallow(buf, reply::SERVER_ERROR_OBJECT_TOO_LARGE, line_len, total);
    }
    // ms always reports a bad data chunk, `q` or not.
    data_block(buf, line_len, vlen, reply::CLIENT_ERROR_BAD_DATA_CHUNK, |data| {
        Command::Meta(MetaCommand::Set { key, flags, mode, data })
    })
}

fn opaque_too_long(command: &MetaCommand<'_>) -> bool {
    let flags = match command {
        MetaCommand::Get { flags, .. }
        | MetaCommand::Delete { flags, .. }
        | MetaCommand::Arithmetic { flags, .. }
        | MetaCommand::Set { flags, .. } => flags,
        MetaCommand::Debug { .. } | MetaCommand::Noop => return false,
    };
    flags.opaque.is_some_and(|o| o.len() + 1 > MAX_OPAQUE_TOKEN)
}

impl MetaFlags<'_> {
    fn has_base64_key(&self) -> bool {
        self.iter().any(|f| f.flag == b'b')
    }
}

/// memcached's `_meta_flag_preparse` over the tokens from `start`: a flag
/// byte >= 127 or seen before, or an unknown flag, stops at once with its
/// message; other errors are noted and parsing goes on, the last message
/// winning (`F` has none of its own: it leaves the previous one, by default
/// "bad command line format").
fn preparse<'a>(t: &Line<'a>, start: usize) -> Result<MetaFlags<'a>, &'static [u8]> {
    let mut flags = MetaFlags { raw: t.rest_from(start), ..MetaFlags::default() };
    let mut seen = [false; 127];
    let mut message = None;
    let mut failed = false;
    let mut fail = |m: Option<&'static [u8]>| {
        failed = true;
        if m.is_some() {
            message = m;
        }
    };
    for i in start..t.n {
        let token = t.token(i);
        let Some((&flag, arg)) = token.split_first() else {
            continue;
        };
        match seen.get_mut(usize::from(flag)) {
            Some(seen @ false) => *seen = true,
            _ => return Err(reply::CLIENT_ERROR_DUPLICATE_FLAG),
        }
        match flag {
            b'b' => {
                if base64_decode(t.token(1), &mut [0; KEY_MAX_LENGTH]).is_none() {
                    fail(Some(reply::CLIENT_ERROR_DECODING_KEY));
                }
            }
            b'N' | b'T' | b'R' => match safe_strtol(arg) {
                Some(v) => {
                    let v = Some(i64::from(v));
                    match flag {
                        b'N' => flags.vivify_ttl = v,
                        b'T' => flags.ttl = v,
                        _ => flags.recache_ttl = v,
                    }
                }
                None => fail(Some(reply::CLIENT_ERROR_BAD_TOKEN)),
            },
            b'l' => flags.return_last_access = true,
            b'O' => flags.opaque = Some(arg),
            b'P' | b'L' => {}
            b'k' => flags.return_key = true,
            b's' => flags.return_size = true,
            b't' => flags.return_ttl = true,
            b'c' => flags.return_cas = true,
            b'f' => flags.return_flags = true,
            b'v' => flags.return_value = true,
            b'h' => flags.return_hit = true,
            b'u' => flags.no_lru_bump = true,
            b'q' => flags.quiet = true,
            b'I' => flags.invalidate = true,
            b'F' => match safe_strtoul(arg) {
                Some(v) => flags.client_flags = Some(v),
                None => fail(None),
            },
            b'C' => match safe_strtoull(arg) {
                Some(v) => flags.compare_cas = Some(v),
                None => fail(Some(reply::CLIENT_ERROR_BAD_TOKEN)),
            },
            b'M' => match arg {
                &[mode] => flags.mode = Some(mode),
                _ => fail(Some(reply::CLIENT_ERROR_M_TOKEN_LENGTH)),
            },
            b'J' => match safe_strtoull(arg) {
                Some(v) => flags.initial = Some(v),
                None => fail(Some(reply::CLIENT_ERROR_INVALID_INITIAL)),
            },
            b'D' => match safe_strtoull(arg) {
                Some(v) => flags.delta = Some(v),
                None => fail(Some(reply::CLIENT_ERROR_INVALID_DELTA_VALUE)),
            },
            _ => return Err(reply::CLIENT_ERROR_INVALID_FLAG),
        }
    }
    if failed {
        Err(message.unwrap_or(reply::CLIENT_ERROR_BAD_FORMAT))
    } else {
        Ok(flags)
    }
}

/// memcached's base64 value of a byte (`=` is 0), `None` for bytes its
/// decoder skips.
fn base64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// memcached's `base64_decode` (1.6.18 `base64.c`), quirks included: bytes
/// outside the alphabet are skipped, the rest must be a non-empty multiple of
/// 4, and decoding stops after the first block with padding (at most two
/// `=`, wherever they are in the block). Returns the decoded length, `None`
/// where memcached's returns 0 (failure). `out` must hold 3/4 of `src`.
fn base64_decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let count = src.iter().filter(|&&c| base64_value(c).is_some()).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return None;
    }
    let mut pos = 0;
    let mut block = [0u8; 4];
    let mut filled = 0;
    let mut pad = 0;
    for &c in src {
        let Some(v) = base64_value(c) else {
            continue;
        };
        if c == b'=' {
            pad += 1;
        }
        if let Some(slot) = block.get_mut(filled) {
            *slot = v;
        }
        filled += 1;
        if filled == 4 {
            let bytes = [
                (block[0] << 2) | (block[1] >> 4),
                (block[1] << 4) | (block[2] >> 2),
                (block[2] << 6) | block[3],
            ];
            for b in bytes {
                if let Some(slot) = out.get_mut(pos) {
                    *slot = b;
                }
                pos += 1;
            }
            filled = 0;
            if pad > 0 {
                match pad {
                    1 => pos -= 1,
                    2 => pos -= 2,
                    _ => return None,
                }
                break;
            }
        }
    }
    Some(pos)
}

// Expected replies are memcached 1.6.18's, observed as described in
// text.rs's tests (python3 sockets, fresh connection per input, the cache
// flushed before each); OBSERVED.md has the table.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::reply::*;
    use crate::protocol::text::testing::{cmd, err, trace};

    fn meta(input: &[u8]) -> MetaCommand<'_> {
        match &trace(input)[..] {
            [Parsed::Command { command: Command::Meta(m), consumed }] => {
                assert_eq!(*consumed, input.len());
                m.clone()
            }
            other => panic!("{other:?}"),
        }
    }

    fn flags_of<'a>(m: &MetaCommand<'a>) -> MetaFlags<'a> {
        match m {
            MetaCommand::Get { flags, .. }
            | MetaCommand::Set { flags, .. }
            | MetaCommand::Delete { flags, .. }
            | MetaCommand::Arithmetic { flags, .. } => flags.clone(),
            _ => panic!("{m:?}"),
        }
    }

    fn one_error(input: &[u8], reply: &'static [u8]) {
        assert_eq!(trace(input), [err(reply, input.len())], "{}", input.escape_ascii());
    }

    fn line(head: &[u8], tail: &[u8]) -> Vec<u8> {
        [head, tail].concat()
    }

    const FLAGS17: &[u8] = b" k v s c t f h l O q u N1 T1 R1 F1 C1 D1";

    #[test]
    fn mn_and_me() {
        // "mn", "mn x y" → MN.
        assert_eq!(meta(b"mn\r\n"), MetaCommand::Noop);
        assert_eq!(meta(b"mn x y\r\n"), MetaCommand::Noop);
        // "me" → bad command line format; "me k" → EN; "me k x b" → EN (b
        // only counts as the second token); "me Zm9v b" → EN.
        one_error(b"me\r\n", CLIENT_ERROR_BAD_FORMAT);
        assert_eq!(meta(b"me k\r\n"), MetaCommand::Debug { key: MetaKey { raw: b"k", base64: false } });
        assert_eq!(meta(b"me k x b\r\n"), MetaCommand::Debug { key: MetaKey { raw: b"k", base64: false } });
        assert_eq!(
            meta(b"me Zm9v b\r\n"),
            MetaCommand::Debug { key: MetaKey { raw: b"Zm9v", base64: true } }
        );
        // "me ab! b" → bad command line format; "me <251 k>" → same.
        one_error(b"me ab! b\r\n", CLIENT_ERROR_BAD_FORMAT);
        one_error(&line(b"me ", &[[b'k'; 251].as_slice(), b"\r\n"].concat()), CLIENT_ERROR_BAD_FORMAT);
    }

    #[test]
    fn mg_parses_flags_in_order() {
        // 17 flags, memcached's most for mg.
        let m = meta(b"mg foo s v t c f k O123 q u h l T30 N-1 R+5 C7 F4294967297\r\n");
        let MetaCommand::Get { key, flags } = &m else { panic!() };
        assert_eq!(*key, MetaKey { raw: b"foo", base64: false });
        assert!(flags.return_size && flags.return_value && flags.return_ttl && flags.return_cas);
        assert!(flags.return_flags && flags.return_key && flags.quiet && flags.no_lru_bump);
        assert!(flags.return_hit && flags.return_last_access && !flags.invalidate);
        assert_eq!(flags.opaque, Some(&b"123"[..]));
        assert_eq!((flags.ttl, flags.vivify_ttl, flags.recache_ttl), (Some(30), Some(-1), Some(5)));
        assert_eq!((flags.compare_cas, flags.client_flags), (Some(7), Some(1)));
        let order: Vec<u8> = flags.iter().map(|f| f.flag).collect();
        assert_eq!(order, b"svtcfkOquhlTNRCF");
        assert_eq!(flags.iter().nth(6), Some(MetaFlag { flag: b'O', token: b"123" }));
        let flags = flags_of(&meta(b"mg foo D2 J3 MI I P L\r\n"));
        assert_eq!((flags.delta, flags.initial, flags.mode), (Some(2), Some(3), Some(b'I')));
        assert!(flags.invalidate);
        // "mg k O" → "EN O": an empty opaque.
        assert_eq!(flags_of(&meta(b"mg k O\r\n")).opaque, Some(&b""[..]));
        // "mg k v" → EN; "mg k Mz" → EN (mg ignores the mode); "mg k P L" → EN.
        assert_eq!(flags_of(&meta(b"mg k Mz\r\n")).mode, Some(b'z'));
        meta(b"mg k P L\r\n");
        // "mg k T4294967296" → EN (T0); "mg k T\t5 v" → EN.
        assert_eq!(flags_of(&meta(b"mg k T4294967296\r\n")).ttl, Some(0));
        assert_eq!(flags_of(&meta(b"mg k T\t5 v\r\n")).ttl, Some(5));
    }

    #[test]
    fn mg_errors() {
        // "mg" → ERROR.
        one_error(b"mg\r\n", ERROR);
        // 250-byte key → EN; 251 → bad command line format.
        meta(&line(b"mg ", &[[b'k'; 250].as_slice(), b" v\r\n"].concat()));
        one_error(&line(b"mg ", &[[b'k'; 251].as_slice(), b" v\r\n"].concat()), CLIENT_ERROR_BAD_FORMAT);
        // 17 flags → a reply; 18 → "options flags are too long".
        meta(&[b"mg k", FLAGS17, b"\r\n"].concat());
        one_error(&[b"mg k", FLAGS17, b" J1\r\n"].concat(), CLIENT_ERROR_MG_FLAGS_TOO_LONG);
        one_error(b"mg k k v s c t f h l O q u N T R F C D J I b P L\r\n", CLIENT_ERROR_MG_FLAGS_TOO_LONG);
        for (input, reply) in [
            (&b"mg k v v\r\n"[..], CLIENT_ERROR_DUPLICATE_FLAG),
            (b"mg k \x7f\r\n", CLIENT_ERROR_DUPLICATE_FLAG),
            (b"mg k \x80\r\n", CLIENT_ERROR_DUPLICATE_FLAG),
            (b"mg k x\r\n", CLIENT_ERROR_INVALID_FLAG),
            (b"mg k S10\r\n", CLIENT_ERROR_INVALID_FLAG),
            (b"mg k N\r\n", CLIENT_ERROR_BAD_TOKEN),
            (b"mg k Nx\r\n", CLIENT_ERROR_BAD_TOKEN),
            (b"mg k Tx\r\n", CLIENT_ERROR_BAD_TOKEN),
            (b"mg k Rx\r\n", CLIENT_ERROR_BAD_TOKEN),
            (b"mg k Cx\r\n", CLIENT_ERROR_BAD_TOKEN),
            (b"mg k C-1\r\n", CLIENT_ERROR_BAD_TOKEN),
            (b"mg k Fx\r\n", CLIENT_ERROR_BAD_FORMAT),
            (b"mg k Jx\r\n", CLIENT_ERROR_INVALID_INITIAL),
            (b"mg k Dx\r\n", CLIENT_ERROR_INVALID_DELTA_VALUE),
            (b"mg k MSS\r\n", CLIENT_ERROR_M_TOKEN_LENGTH),
            (b"mg k M\r\n", CLIENT_ERROR_M_TOKEN_LENGTH),
            // Later messages win; F leaves the earlier one; invalid and
            // duplicate flags stop at once.
            (b"mg k Nx Jx\r\n", CLIENT_ERROR_INVALID_INITIAL),
            (b"mg k Nx Fx\r\n", CLIENT_ERROR_BAD_TOKEN),
            (b"mg k Nx z\r\n", CLIENT_ERROR_INVALID_FLAG),
            (b"mg k Nx v v\r\n", CLIENT_ERROR_DUPLICATE_FLAG),
            (b"mg k z Nx\r\n", CLIENT_ERROR_INVALID_FLAG),
            // Errors are sent despite q.
            (b"mg k q z\r\n", CLIENT_ERROR_INVALID_FLAG),
            // Base64 keys.
            (b"mg ab! b\r\n", CLIENT_ERROR_DECODING_KEY),
            (b"mg k b\r\n", CLIENT_ERROR_DECODING_KEY),
            (b"mg Zm9 b\r\n", CLIENT_ERROR_DECODING_KEY),
            (b"mg Z=== b\r\n", CLIENT_ERROR_DECODING_KEY),
        ] {
            one_error(input, reply);
        }
        // "O" + 31 bytes → "EN O..."; + 32 → "opaque token too long".
        let opaque = [b'x'; 32];
        meta(&[b"mg k O", &opaque[..31], b"\r\n"].concat());
        one_error(&[b"mg k O", &opaque[..], b"\r\n"].concat(), CLIENT_ERROR_OPAQUE_TOO_LONG);
    }

    #[test]
    fn base64_keys() {
        // "mg Zm9v b k v" → "EN kZm9v b"; "mg Zm!9v b k" → "EN kZm9v b"
        // (bytes outside the alphabet are skipped); "mg Z=9v b k" →
        // "EN kZA8= b" (a pad inside a block cuts the block's last byte).
        let m = meta(b"mg Zm9v b k v\r\n");
        let MetaCommand::Get { key, .. } = &m else { panic!() };
        assert_eq!(*key, MetaKey { raw: b"Zm9v", base64: true });
        let mut scratch = [0; KEY_MAX_LENGTH];
        assert_eq!(key.bytes(&mut scratch), b"foo");
        assert_eq!(key.len(), 3);
        let MetaCommand::Get { key, .. } = meta(b"mg Zm!9v b k\r\n") else { panic!() };
        assert_eq!(key.bytes(&mut scratch), b"foo");
        let MetaCommand::Get { key, .. } = meta(b"mg Z=9v b k\r\n") else { panic!() };
        assert_eq!(key.bytes(&mut scratch), [0x64, 0x0f]);
        let plain = MetaKey { raw: b"abc", base64: false };
        assert_eq!(plain.bytes(&mut scratch), b"abc");
        assert!(!plain.is_empty());

        let mut out = [0; 8];
        assert_eq!(base64_decode(b"YQ==", &mut out), Some(1));
        assert_eq!(out[0], b'a');
        assert_eq!(base64_decode(b"YWI=", &mut out), Some(2));
        assert_eq!(base64_decode(b"YWJj", &mut out), Some(3));
        assert_eq!(base64_decode(b"YQ==YWJj", &mut out), Some(1));
        assert_eq!(base64_decode(b"", &mut out), None);
        assert_eq!(base64_decode(b"!!!!", &mut out), None);
        assert_eq!(base64_decode(b"Y===", &mut out), None);
        assert_eq!(base64_decode(b"YWJjYWJjYWJj", &mut out), None);
        // A 250-byte key decodes into 187 bytes.
        let mut out = [0; KEY_MAX_LENGTH];
        assert_eq!(base64_decode(&[b'A'; 248], &mut out), Some(186));
    }

    #[test]
    fn ms_parses() {
        let m = meta(b"ms k 2 T10 F5 C9 q MA I k O1\r\nhi\r\n");
        let MetaCommand::Set { key, flags, mode, data } = &m else { panic!() };
        assert_eq!((key.raw, *mode, *data), (&b"k"[..], SetMode::Append, &b"hi"[..]));
        assert_eq!((flags.ttl, flags.client_flags, flags.compare_cas), (Some(10), Some(5), Some(9)));
        assert!(flags.quiet && flags.invalidate && flags.return_key);
        for (m, mode) in [
            (&b""[..], SetMode::Set),
            (b" MS", SetMode::Set),
            (b" ME", SetMode::Add),
            (b" MA", SetMode::Append),
            (b" MP", SetMode::Prepend),
            (b" MR", SetMode::Replace),
        ] {
            let MetaCommand::Set { mode: got, .. } = meta(&[b"ms k 1", m, b"\r\nx\r\n"].concat()) else {
                panic!()
            };
            assert_eq!(got, mode);
        }
        // "ms k 4294967297\r\nx\r\n" → HD (length truncated to 1);
        // "ms k 1 F4294967297" stores flags 1.
        let MetaCommand::Set { data, .. } = meta(b"ms k 4294967297\r\nx\r\n") else { panic!() };
        assert_eq!(data, b"x");
        assert_eq!(flags_of(&meta(b"ms k 1 F4294967297\r\nx\r\n")).client_flags, Some(1));
        // 16 flags fit.
        meta(b"ms k 1 k v s c t f h l O q u N1 T1 R1 F1 C1\r\nx\r\n");
    }

    #[test]
    fn ms_errors_before_the_length_leave_the_data() {
        // Each: the error, then the data line "x" → ERROR.
        let k251 = [b'k'; 251];
        for (input, reply) in [
            (line(b"ms k", b"\r\n"), CLIENT_ERROR_BAD_FORMAT),
            (line(b"ms k S1", b"\r\n"), CLIENT_ERROR_BAD_FORMAT),
            (line(b"ms k x", b"\r\n"), CLIENT_ERROR_BAD_FORMAT),
            (line(b"ms k -1", b"\r\n"), CLIENT_ERROR_BAD_FORMAT),
            (line(b"ms k 2147483646", b"\r\n"), CLIENT_ERROR_BAD_FORMAT),
            ([b"ms ", &k251[..], b" 1\r\n"].concat(), CLIENT_ERROR_BAD_FORMAT),
            ([b"ms k 1", FLAGS17, b"\r\n"].concat(), CLIENT_ERROR_FLAGS_TOO_LONG),
        ] {
            let full = [&input[..], b"x\r\n"].concat();
            assert_eq!(trace(&full), [err(reply, input.len()), err(ERROR, 3)], "{}", input.escape_ascii());
        }
        // "ms" → ERROR.
        one_error(b"ms\r\n", ERROR);
    }

    #[test]
    fn ms_errors_after_the_length_swallow_the_data() {
        // Each: the error only, the block ("x\r\n") swallowed.
        let opaque33 = [&b"O"[..], &[b'x'; 32]].concat();
        for (flags, reply) in [
            (&b" z"[..], CLIENT_ERROR_INVALID_FLAG),
            (b" T1 T2", CLIENT_ERROR_DUPLICATE_FLAG),
            (b" Tx", CLIENT_ERROR_BAD_TOKEN),
            (b" F-1", CLIENT_ERROR_BAD_FORMAT),
            (b" MEE", CLIENT_ERROR_M_TOKEN_LENGTH),
            (b" MX", CLIENT_ERROR_INVALID_MS_MODE),
            (b" Ms", CLIENT_ERROR_INVALID_MS_MODE),
            (&[b" ", &opaque33[..]].concat(), CLIENT_ERROR_OPAQUE_TOO_LONG),
            // The mode is checked before the opaque, a bad token before both.
            (&[b" ", &opaque33[..], b" MX"].concat(), CLIENT_ERROR_INVALID_MS_MODE),
            (&[b" ", &opaque33[..], b" Tx"].concat(), CLIENT_ERROR_BAD_TOKEN),
            (b" q z", CLIENT_ERROR_INVALID_FLAG),
        ] {
            let head = [b"ms k 1", flags, b"\r\n"].concat();
            let input = [&head[..], b"x\r\nversion\r\n"].concat();
            assert_eq!(
                trace(&input),
                [err(reply, head.len() + 3), cmd(Command::Version, 9)],
                "{}",
                head.escape_ascii()
            );
        }
        // "ms ab! 1 b" → error decoding key, block swallowed.
        assert_eq!(trace(b"ms ab! 1 b\r\nx\r\n"), [err(CLIENT_ERROR_DECODING_KEY, 15)]);
        // Not yet arrived: "ms k 2 z\r\n" gets no reply from memcached until
        // the 4 bytes are swallowed.
        assert_eq!(
            trace(b"ms k 2 z\r\nx"),
            [Parsed::Swallow { reply: CLIENT_ERROR_INVALID_FLAG, line: 10, remaining: 4 }]
        );
    }

    #[test]
    fn ms_data_block_and_size() {
        // "ms k 1\r\nxy\r\n" → bad data chunk, then "\n" → ERROR; q or not.
        assert_eq!(trace(b"ms k 1\r\nxy\r\n"), [err(CLIENT_ERROR_BAD_DATA_CHUNK, 11), err(ERROR, 1)]);
        assert_eq!(trace(b"ms k 1 q\r\nxy\r\n"), [err(CLIENT_ERROR_BAD_DATA_CHUNK, 13), err(ERROR, 1)]);
        // 1048516 bytes → HD; 1048517 → too large (also with q); F1 costs 4
        // bytes; a base64 key counts decoded: "ms Zm9v 1048514 b" → HD.
        let limits = Limits::default();
        let head = |s: &str| s.as_bytes().to_vec();
        assert_eq!(super::super::text::parse(&head("ms k 1048516\r\n"), &limits), Parsed::Incomplete);
        for (line, remaining) in [("ms k 1048517\r\n", 1048519), ("ms k 1048517 q\r\n", 1048519)] {
            assert_eq!(
                super::super::text::parse(&head(line), &limits),
                Parsed::Swallow { reply: SERVER_ERROR_OBJECT_TOO_LARGE, line: line.len(), remaining }
            );
        }
        assert!(matches!(
            super::super::text::parse(&head("ms k 1048513 F1\r\n"), &limits),
            Parsed::Swallow { reply: SERVER_ERROR_OBJECT_TOO_LARGE, .. }
        ));
        assert_eq!(super::super::text::parse(&head("ms Zm9v 1048514 b\r\n"), &limits), Parsed::Incomplete);
        assert!(matches!(
            super::super::text::parse(&head("ms Zm9v 1048515 b\r\n"), &limits),
            Parsed::Swallow { reply: SERVER_ERROR_OBJECT_TOO_LARGE, .. }
        ));
        // "ms k 2000000 MX\r\n<block>version\r\n" → invalid mode (before
        // the size check), VERSION.
        let mut input = head("ms k 2000000 MX\r\n");
        input.extend_from_slice(&vec![b'a'; 2000002]);
        input.extend_from_slice(b"version\r\n");
        assert_eq!(
            trace(&input),
            [err(CLIENT_ERROR_INVALID_MS_MODE, 17 + 2000002), cmd(Command::Version, 9)]
        );
    }

    #[test]
    fn md() {
        // "md k" → NF; "md k q" → NF (memcached hides only HD).
        let m = meta(b"md k q I T30 C5 k O1\r\n");
        let MetaCommand::Delete { key, flags } = &m else { panic!() };
        assert_eq!(key.raw, b"k");
        assert!(flags.quiet && flags.invalidate && flags.return_key);
        assert_eq!((flags.ttl, flags.compare_cas, flags.opaque), (Some(30), Some(5), Some(&b"1"[..])));
        one_error(b"md\r\n", ERROR);
        one_error(&line(b"md ", &[[b'k'; 251].as_slice(), b"\r\n"].concat()), CLIENT_ERROR_BAD_FORMAT);
        one_error(&[b"md k", FLAGS17, b" J1\r\n"].concat(), CLIENT_ERROR_FLAGS_TOO_LONG);
        // Every flag error is "invalid or duplicate flag".
        for input in [&b"md k z\r\n"[..], b"md k q q\r\n", b"md k Tx\r\n", b"md ab! b\r\n"] {
            one_error(input, CLIENT_ERROR_INVALID_OR_DUPLICATE_FLAG);
        }
        one_error(&[b"md k O", &[b'x'; 32][..], b"\r\n"].concat(), CLIENT_ERROR_OPAQUE_TOO_LONG);
    }

    #[test]
    fn ma() {
        let m = meta(b"ma k N0 J5 D3 v t c T9 q\r\n");
        let MetaCommand::Arithmetic { key, flags, mode } = &m else { panic!() };
        assert_eq!((key.raw, *mode), (&b"k"[..], ArithMode::Incr));
        assert_eq!(
            (flags.vivify_ttl, flags.initial, flags.delta, flags.ttl),
            (Some(0), Some(5), Some(3), Some(9))
        );
        // "ma k M+", "MI" → incr; "M-", "MD" → decr (NF when missing);
        // "Mi", "MX" → invalid mode.
        for (m, mode) in [("", ArithMode::Incr), (" MI", ArithMode::Incr), (" M+", ArithMode::Incr)]
            .into_iter()
            .chain([(" MD", ArithMode::Decr), (" M-", ArithMode::Decr)])
        {
            let input = format!("ma k{m}\r\n");
            let MetaCommand::Arithmetic { mode: got, .. } = meta(input.as_bytes()) else { panic!() };
            assert_eq!(got, mode, "{m}");
        }
        one_error(b"ma k Mi\r\n", CLIENT_ERROR_INVALID_MA_MODE);
        one_error(b"ma k MX\r\n", CLIENT_ERROR_INVALID_MA_MODE);
        one_error(b"ma\r\n", ERROR);
        one_error(&line(b"ma ", &[[b'k'; 251].as_slice(), b"\r\n"].concat()), CLIENT_ERROR_BAD_FORMAT);
        one_error(&[b"ma k", FLAGS17, b" J1\r\n"].concat(), CLIENT_ERROR_FLAGS_TOO_LONG);
        for input in [
            &b"ma k z\r\n"[..],
            b"ma k Dx\r\n",
            b"ma k D-1\r\n",
            b"ma k Jx\r\n",
            b"ma ab! b\r\n",
            b"ma k Tx MX\r\n",
        ] {
            one_error(input, CLIENT_ERROR_INVALID_OR_DUPLICATE_FLAG);
        }
        let opaque33 = [&b"O"[..], &[b'x'; 32]].concat();
        one_error(&[b"ma k ", &opaque33[..], b"\r\n"].concat(), CLIENT_ERROR_OPAQUE_TOO_LONG);
        // The mode is checked first.
        one_error(&[b"ma k ", &opaque33[..], b" MX\r\n"].concat(), CLIENT_ERROR_INVALID_MA_MODE);
    }
}
