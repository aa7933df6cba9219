//! memcached 1.6.18's meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`),
//! parsed as `proto_text.c` does: the key, then flags, each a flag byte and
//! an optional token (`T30`, `O<opaque>`, `q`), validated by memcached's
//! `_meta_flag_preparse` with its exact error lines.
//!
//! What the parser checks and memcached checks only after touching the item
//! (an `O` token over 32 bytes in `mg` and `ma`) is reported here, before any
//! side effect; memcached would e.g. already have applied `ma`'s delta.

use super::base64::base64_decode;
use super::command::{data_block, error, swallow, Command, Parsed};
use super::limits::{Limits, KEY_MAX_LENGTH};
use super::num::{safe_strtol, safe_strtoul, safe_strtoull};
use super::reply;
use super::tokens::Line;

// The meta commands' types live with the text protocol's in `command.rs`
// (a text `Command` holds a `MetaCommand`); these paths stay valid.
pub use super::command::{ArithMode, MetaCommand, MetaFlag, MetaFlags, MetaKey, SetMode};

/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta line may have at most 19
/// tokens (the terminal one makes 20): 17 flags for mg/md/ma, 16 for ms.
const MAX_META_TOKENS: usize = 20;
/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`: an `O` token, `O` included.
const MAX_OPAQUE_TOKEN: usize = 32;

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
    if flags.opaque_too_long() {
        return swallow(buf, reply::CLIENT_ERROR_OPAQUE_TOO_LONG, line_len, total);
    }
    let key = MetaKey { raw: raw_key, base64: flags.has_base64_key() };
    if !limits.item_fits(key.len(), flags.client_flags.unwrap_or(0), vlen) {
        // In every mode, as memcached 1.6.18 does.
        let reply = reply::SERVER_ERROR_OBJECT_TOO_LARGE;
        return Parsed::Refused { unlink: Some(key), reply, line: line_len, remaining: total };
    }
    // ms always reports a bad data chunk, `q` or not.
    data_block(buf, line_len, vlen, reply::CLIENT_ERROR_BAD_DATA_CHUNK, |data| {
        Command::Meta(MetaCommand::Set { key, flags, mode, data })
    })
}

fn opaque_too_long(command: &MetaCommand<'_>) -> bool {
    // mg and ma find it while writing their reply, after they acted (a
    // vivify, a touch, a delta): the store answers it for them.
    let flags = match command {
        MetaCommand::Delete { flags, .. } | MetaCommand::Set { flags, .. } => flags,
        MetaCommand::Get { .. }
        | MetaCommand::Arithmetic { .. }
        | MetaCommand::Debug { .. }
        | MetaCommand::Noop => return false,
    };
    flags.opaque_too_long()
}

impl MetaFlags<'_> {
    fn has_base64_key(&self) -> bool {
        self.iter().any(|f| f.flag == b'b')
    }

    /// memcached's "opaque token too long": an `O` token over 32 bytes,
    /// flag included.
    pub(crate) fn opaque_too_long(&self) -> bool {
        self.opaque.is_some_and(|o| o.len() + 1 > MAX_OPAQUE_TOKEN)
    }

    /// Where among the flags the opaque too long is, if there is one (a
    /// flag appears once at most): memcached's mg and ma find it while they
    /// write their reply, after the flags before it took effect. Walks the
    /// flags only when there is one.
    pub(crate) fn opaque_too_long_at(&self) -> Option<usize> {
        if self.opaque_too_long() {
            self.iter().position(|f| f.flag == b'O')
        } else {
            None
        }
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
