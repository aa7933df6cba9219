//! The layout of a stored item in a `ByteMap` value: memcached's item
//! metadata ahead of the data, so that the metadata changes only with a new
//! version of the value (values are immutable in the map).
//!
//! Layout, little-endian: `client_flags: u32`, `exptime: u32` (server clock
//! seconds, 0 = never), `time: u32` (server clock second of the last
//! modification, for `flush_all`'s "oldest live" rule), `cas: u64`, then the
//! data (without its "\r\n").

/// Bytes of metadata ahead of an item's data.
pub const HEADER: usize = 20;

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
    /// The data, without "\r\n".
    pub data: &'a [u8],
}

impl ItemRef<'_> {
    /// The metadata alone.
    pub fn meta(&self) -> Meta {
        Meta { flags: self.flags, exptime: self.exptime, time: self.time, cas: self.cas }
    }
}

/// Append the header of `meta` to `buf` (the data is to follow).
pub fn push_header(buf: &mut Vec<u8>, meta: &Meta) {
    buf.extend_from_slice(&meta.flags.to_le_bytes());
    buf.extend_from_slice(&meta.exptime.to_le_bytes());
    buf.extend_from_slice(&meta.time.to_le_bytes());
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
    Some(ItemRef { flags: u32_at(0)?, exptime: u32_at(4)?, time: u32_at(8)?, cas, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let meta = Meta { flags: 0xdead_beef, exptime: 7, time: 62, cas: u64::MAX - 1 };
        let mut buf = Vec::new();
        encode(&mut buf, &meta, b"hello");
        assert_eq!(buf.len(), HEADER + 5);
        let item = decode(&buf).unwrap();
        assert_eq!(item.meta(), meta);
        assert_eq!(item.data, b"hello");
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
