//! Tests of the meta commands through the parser's entry point,
//! [`text::parse`](super::text::parse): what memcached replies to a meta line
//! depends on the whole parser (line ends, a refused data block read as
//! commands).
//!
//! Expected replies are memcached 1.6.18's, observed as described in
//! text.rs's tests (python3 sockets, fresh connection per input, the cache
//! flushed before each); OBSERVED.md has the table.

use super::base64::base64_decode;
use super::command::{Command, Parsed};
use super::limits::{Limits, KEY_MAX_LENGTH};
use super::meta::{ArithMode, MetaCommand, MetaFlag, MetaFlags, MetaKey, SetMode};
use super::reply::*;
use super::text::parse;
use super::text::testing::{bad_chunk, cmd, err, trace};

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
    assert_eq!(meta(b"me Zm9v b\r\n"), MetaCommand::Debug { key: MetaKey { raw: b"Zm9v", base64: true } });
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
    // "O" + 31 bytes → "EN O..."; + 32 → "opaque token too long", which
    // memcached finds while it writes the reply, after a vivify or a touch:
    // parsed here, answered by the store.
    let opaque = [b'x'; 32];
    meta(&[b"mg k O", &opaque[..31], b"\r\n"].concat());
    assert_eq!(flags_of(&meta(&[b"mg k O", &opaque[..], b"\r\n"].concat())).opaque, Some(&opaque[..]));
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
    assert_eq!(trace(b"ms k 1\r\nxy\r\n"), [bad_chunk(CLIENT_ERROR_BAD_DATA_CHUNK, 11), err(ERROR, 1)]);
    assert_eq!(trace(b"ms k 1 q\r\nxy\r\n"), [bad_chunk(CLIENT_ERROR_BAD_DATA_CHUNK, 13), err(ERROR, 1)]);
    // 1048516 bytes → HD; 1048517 → too large (also with q); F1 costs 4
    // bytes; a base64 key counts decoded: "ms Zm9v 1048514 b" → HD.
    let limits = Limits::default();
    let head = |s: &str| s.as_bytes().to_vec();
    assert_eq!(parse(&head("ms k 1048516\r\n"), &limits), Parsed::Incomplete);
    for (line, remaining) in [("ms k 1048517\r\n", 1048519), ("ms k 1048517 q\r\n", 1048519)] {
        assert_eq!(
            parse(&head(line), &limits),
            Parsed::Refused {
                unlink: Some(MetaKey { raw: b"k", base64: false }),
                reply: SERVER_ERROR_OBJECT_TOO_LARGE,
                line: line.len(),
                remaining
            }
        );
    }
    assert!(matches!(
        parse(&head("ms k 1048513 F1\r\n"), &limits),
        Parsed::Refused { reply: SERVER_ERROR_OBJECT_TOO_LARGE, .. }
    ));
    assert_eq!(parse(&head("ms Zm9v 1048514 b\r\n"), &limits), Parsed::Incomplete);
    assert!(matches!(
        parse(&head("ms Zm9v 1048515 b\r\n"), &limits),
        Parsed::Refused { reply: SERVER_ERROR_OBJECT_TOO_LARGE, .. }
    ));
    // "ms k 2000000 MX\r\n<block>version\r\n" → invalid mode (before
    // the size check), VERSION.
    let mut input = head("ms k 2000000 MX\r\n");
    input.extend_from_slice(&vec![b'a'; 2000002]);
    input.extend_from_slice(b"version\r\n");
    assert_eq!(trace(&input), [err(CLIENT_ERROR_INVALID_MS_MODE, 17 + 2000002), cmd(Command::Version, 9)]);
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
    // Answered by the store, after the delta (as for mg).
    assert_eq!(flags_of(&meta(&[b"ma k ", &opaque33[..], b"\r\n"].concat())).opaque, Some(&opaque33[1..]));
    // The mode is checked first.
    one_error(&[b"ma k ", &opaque33[..], b" MX\r\n"].concat(), CLIENT_ERROR_INVALID_MA_MODE);
}
