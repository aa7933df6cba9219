//! The layout of a stored item in a `ByteMap` value: memcached's item
//! metadata ahead of the data, so that the metadata changes only with a new
//! version of the value (values are immutable in the map).
//!
//! Layout, little-endian: `client_flags: u32`, `exptime: u32` (server clock
//! seconds, 0 = never), the time word ([`TimeWord`]: the server clock second
//! of the last modification, for `flush_all`'s "oldest live" rule, in its
//! low 29 bits, and memcached's `ITEM_KEY_BINARY`, `ITEM_TOKEN_SENT` and
//! `ITEM_STALE` item flags in its top three), `cas: u64`, then the data
//! (without its "\r\n"). An item written before the flags existed reads
//! as none of them.

/// Bytes of metadata ahead of an item's data.
pub const HEADER: usize = 20;

/// The third word of the header: the time of the last modification and
/// the meta protocol's stale-while-revalidate flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeWord(u32);

impl TimeWord {
    /// The bits of the time (17 years of server clock).
    pub const TIME_MASK: u32 = (1 << 29) - 1;
    /// memcached's `ITEM_KEY_BINARY`: stored by an `ms` whose key came in
    /// base64 (`b`), so `k` and `me` give it back in base64.
    pub const KEY_BINARY: u32 = 1 << 29;
    /// memcached's `ITEM_TOKEN_SENT`: an `mg` has handed out the win token.
    pub const TOKEN_SENT: u32 = 1 << 30;
    /// memcached's `ITEM_STALE`: invalidated (`md I`, `ms I`).
    pub const STALE: u32 = 1 << 31;

    /// The word of `meta`.
    pub const fn of(meta: &Meta) -> TimeWord {
        TimeWord(
            meta.time & Self::TIME_MASK
                | if meta.key_binary { Self::KEY_BINARY } else { 0 }
                | if meta.token_sent { Self::TOKEN_SENT } else { 0 }
                | if meta.stale { Self::STALE } else { 0 },
        )
    }
    /// A word read from an item.
    pub const fn from_bits(w: u32) -> TimeWord {
        TimeWord(w)
    }
    /// The word to store.
    pub const fn bits(self) -> u32 {
        self.0
    }
    /// The time of the last modification.
    pub const fn time(self) -> u32 {
        self.0 & Self::TIME_MASK
    }
    /// True if the key came in base64.
    pub const fn key_binary(self) -> bool {
        self.0 & Self::KEY_BINARY != 0
    }
    /// True once an `mg` handed out the win token.
    pub const fn token_sent(self) -> bool {
        self.0 & Self::TOKEN_SENT != 0
    }
    /// True if invalidated.
    pub const fn stale(self) -> bool {
        self.0 & Self::STALE != 0
    }
}

/// An item's metadata, as stored ahead of its data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The client's opaque 32-bit flags.
    pub flags: u32,
    /// Expiry on the server clock (seconds); 0 = never.
    pub exptime: u32,
    /// Server clock second of the last modification (memcached's
    /// `it->time`), judged by `flush_all`.
    pub time: u32,
    /// The cas unique of this version.
    pub cas: u64,
    /// Invalidated by `md I` or `ms I` (memcached's `ITEM_STALE`): `mg`
    /// answers `X`, and hands the first fetcher the win token (`W`).
    pub stale: bool,
    /// The win token was handed out (memcached's `ITEM_TOKEN_SENT`): later
    /// `mg`s answer `Z`.
    pub token_sent: bool,
    /// The key came in base64 (`ms ... b`; memcached's `ITEM_KEY_BINARY`):
    /// `mg ... k` and `me` give it back in base64.
    pub key_binary: bool,
}

impl Meta {
    /// The item of this metadata and `data`.
    pub fn with_data(self, data: &[u8]) -> ItemRef<'_> {
        let Meta { flags, exptime, time, cas, stale, token_sent, key_binary } = self;
        ItemRef { flags, exptime, time, cas, stale, token_sent, key_binary, data }
    }

    /// The same metadata without memcached's item flags (stale, token
    /// sent, binary key): what a new item (memcached allocates one for a
    /// store, an append, a number that grew) starts with.
    pub fn fresh(self) -> Meta {
        Meta { stale: false, token_sent: false, key_binary: false, ..self }
    }
}

/// A decoded item borrowing its data from the stored bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemRef<'a> {
    /// The client's opaque 32-bit flags.
    pub flags: u32,
    /// Expiry on the server clock (seconds); 0 = never.
    pub exptime: u32,
    /// Server clock second of the last modification.
    pub time: u32,
    /// The cas unique of this version.
    pub cas: u64,
    /// See [`Meta::stale`].
    pub stale: bool,
    /// See [`Meta::token_sent`].
    pub token_sent: bool,
    /// See [`Meta::key_binary`].
    pub key_binary: bool,
    /// The data, without "\r\n".
    pub data: &'a [u8],
}

impl ItemRef<'_> {
    /// The metadata alone.
    pub fn meta(&self) -> Meta {
        Meta {
            flags: self.flags,
            exptime: self.exptime,
            time: self.time,
            cas: self.cas,
            stale: self.stale,
            token_sent: self.token_sent,
            key_binary: self.key_binary,
        }
    }
}

/// Append the header of `meta` to `buf` (the data is to follow).
pub fn push_header(buf: &mut Vec<u8>, meta: &Meta) {
    buf.extend_from_slice(&meta.flags.to_le_bytes());
    buf.extend_from_slice(&meta.exptime.to_le_bytes());
    buf.extend_from_slice(&TimeWord::of(meta).bits().to_le_bytes());
    buf.extend_from_slice(&meta.cas.to_le_bytes());
}

/// Append an item (header then the concatenation of `parts`) to `buf`.
/// Allocates nothing when `buf` has the capacity.
pub fn push(buf: &mut Vec<u8>, meta: &Meta, parts: &[&[u8]]) {
    let len = HEADER + parts.iter().map(|p| p.len()).sum::<usize>();
    buf.reserve(len);
    push_header(buf, meta);
    for part in parts {
        buf.extend_from_slice(part);
    }
}

/// Encode an item into `buf`, replacing its contents (reuse one `Vec` for
/// many items: no allocation once its capacity suffices).
pub fn encode(buf: &mut Vec<u8>, meta: &Meta, data: &[u8]) {
    buf.clear();
    push(buf, meta, &[data]);
}

/// Decode stored bytes; None if they are shorter than the header (never
/// the case for values this crate stored).
pub fn decode(bytes: &[u8]) -> Option<ItemRef<'_>> {
    let (head, data) = bytes.split_at_checked(HEADER)?;
    let u32_at = |i: usize| head.get(i..i + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    let cas = head.get(12..20).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)?;
    let word = TimeWord::from_bits(u32_at(8)?);
    let meta = Meta {
        flags: u32_at(0)?,
        exptime: u32_at(4)?,
        time: word.time(),
        cas,
        stale: word.stale(),
        token_sent: word.token_sent(),
        key_binary: word.key_binary(),
    };
    Some(meta.with_data(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        for bits in 0..8 {
            let (stale, token_sent, key_binary) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
            let meta = Meta {
                flags: 0xdead_beef,
                exptime: 7,
                time: 62,
                cas: u64::MAX - 1,
                stale,
                token_sent,
                key_binary,
            };
            encode(&mut buf, &meta, b"hello");
            assert_eq!(buf.len(), HEADER + 5);
            let item = decode(&buf).unwrap();
            assert_eq!(item.meta(), meta);
            assert_eq!(item.data, b"hello");
            assert_eq!(
                item.meta().fresh(),
                Meta { stale: false, token_sent: false, key_binary: false, ..meta }
            );
        }
    }

    #[test]
    fn time_word_keeps_the_time_apart_from_the_flags() {
        // An item of an older layout (the time alone) reads as neither flag.
        let old = TimeWord::from_bits(123_456);
        assert_eq!((old.time(), old.stale(), old.token_sent()), (123_456, false, false));
        let full = Meta {
            time: TimeWord::TIME_MASK,
            stale: true,
            token_sent: true,
            key_binary: true,
            ..Meta::default()
        };
        let w = TimeWord::of(&full);
        assert_eq!(
            (w.time(), w.stale(), w.token_sent(), w.key_binary()),
            (TimeWord::TIME_MASK, true, true, true)
        );
        assert_eq!(w.bits(), u32::MAX);
        // A time past 29 bits keeps its low bits and never sets a flag.
        let w = TimeWord::of(&Meta { time: u32::MAX, ..Meta::default() });
        assert_eq!(
            (w.time(), w.stale(), w.token_sent(), w.key_binary()),
            (TimeWord::TIME_MASK, false, false, false)
        );
    }

    #[test]
    fn empty_data_and_short_input() {
        let mut buf = Vec::new();
        encode(&mut buf, &Meta::default(), b"");
        assert_eq!(buf.len(), HEADER);
        assert_eq!(decode(&buf).unwrap().data, b"");
        assert!(decode(&buf[..HEADER - 1]).is_none());
        assert!(decode(b"").is_none());
    }

    #[test]
    fn encode_reuses_the_buffer() {
        let mut buf = Vec::with_capacity(64);
        let ptr = buf.as_ptr();
        for i in 0..10u32 {
            encode(&mut buf, &Meta { flags: i, ..Meta::default() }, b"abc");
            assert_eq!(decode(&buf).unwrap().flags, i);
        }
        assert_eq!(buf.as_ptr(), ptr);
    }

    #[test]
    fn push_appends_parts() {
        let mut buf = b"prefix".to_vec();
        push(&mut buf, &Meta { cas: 3, ..Meta::default() }, &[b"ab", b"", b"cd"]);
        let item = decode(&buf[6..]).unwrap();
        assert_eq!((item.cas, item.data), (3, &b"abcd"[..]));
    }
}
