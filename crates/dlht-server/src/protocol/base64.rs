//! memcached 1.6.18's base64 decoder (`base64.c`), for the binary keys of
//! meta commands (the `b` flag).

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
pub(crate) fn base64_decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
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
