//! memcached's number parsing (`safe_strtoull`, `safe_strtoul`, `safe_strtol`
//! in memcached 1.6.18's `util.c`), reproduced quirk for quirk.
//!
//! memcached parses every numeric argument with C's `strtoull`/`strtol`
//! (base 10, LP64: `long` is 64 bits) and then narrows the result, so:
//! - leading C whitespace (`\t \v \f \r`) and one `+` or `-` sign are accepted;
//! - the number may be followed by C whitespace and then anything
//!   (`"5\rjunk"` parses as 5), but not by other bytes (`"5x"` fails);
//! - `strtoull` negates negative input modulo 2^64, and `safe_strtoull` only
//!   rejects the result when it looks negative as an `i64` *and* the token
//!   holds a `-` (`"-1"` fails, `"-18446744073709551615"` is 1);
//! - `safe_strtoul` stores into a `uint32_t` and `safe_strtol` into an
//!   `int32_t`: values are truncated to 32 bits (`"4294967297"` is 1),
//!   only overflow of the 64-bit C type is an error.

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The scan `strtoull`/`strtol` do: whitespace, sign, decimal digits.
/// Returns the sign, the magnitude (`None` if it exceeds `u64::MAX`, i.e.
/// `ERANGE`) and whether the byte after the digits is acceptable to
/// memcached (end of token or whitespace); `None` if there are no digits.
fn scan(tok: &[u8]) -> Option<(bool, Option<u64>, bool)> {
    let mut i = 0;
    while tok.get(i).is_some_and(|&b| is_c_space(b)) {
        i += 1;
    }
    let mut negative = false;
    if let Some(&sign @ (b'+' | b'-')) = tok.get(i) {
        negative = sign == b'-';
        i += 1;
    }
    let start = i;
    let mut magnitude = Some(0u64);
    while let Some(&d) = tok.get(i) {
        if !d.is_ascii_digit() {
            break;
        }
        magnitude =
            magnitude.and_then(|m| m.checked_mul(10)).and_then(|m| m.checked_add(u64::from(d - b'0')));
        i += 1;
    }
    if i == start {
        return None;
    }
    let tail_ok = tok.get(i).map_or(true, |&b| is_c_space(b));
    Some((negative, magnitude, tail_ok))
}

/// memcached's `safe_strtoull`: an unsigned 64-bit number.
pub(crate) fn safe_strtoull(tok: &[u8]) -> Option<u64> {
    let (negative, magnitude, tail_ok) = scan(tok)?;
    let magnitude = magnitude?;
    if !tail_ok {
        return None;
    }
    let value = if negative { magnitude.wrapping_neg() } else { magnitude };
    if (value as i64) < 0 && tok.contains(&b'-') {
        return None;
    }
    Some(value)
}

/// memcached's `safe_strtoul` into a `uint32_t`: `safe_strtoull`, truncated.
pub(crate) fn safe_strtoul(tok: &[u8]) -> Option<u32> {
    safe_strtoull(tok).map(|v| v as u32)
}

/// memcached's `safe_strtol` into an `int32_t`: a signed 64-bit number,
/// truncated to 32 bits (two's complement, as gcc does).
pub(crate) fn safe_strtol(tok: &[u8]) -> Option<i32> {
    let (negative, magnitude, tail_ok) = scan(tok)?;
    let magnitude = magnitude?;
    let value = if negative {
        if magnitude > 1 << 63 {
            return None;
        }
        (magnitude as i64).wrapping_neg()
    } else {
        i64::try_from(magnitude).ok()?
    };
    if !tail_ok {
        return None;
    }
    Some(value as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtoull_matches_memcached() {
        // Cases observed with memcached 1.6.18 through `incr` deltas and `cas`
        // uniques (see OBSERVED.md): +5 ok, -1 rejected, 2^64 rejected,
        // -18446744073709551615 is 1, -0 is 0, 5x rejected.
        assert_eq!(safe_strtoull(b"5"), Some(5));
        // What an item holds for incr/decr: leading space and trailing
        // junk after a space are fine, digits run into letters are not.
        assert_eq!(safe_strtoull(b"42"), Some(42));
        assert_eq!(safe_strtoull(b"\t 42 junk"), Some(42));
        assert_eq!(safe_strtoull(b"42x"), None);
        assert_eq!(safe_strtoull(b"99999999999999999999"), None);
        assert_eq!(safe_strtoull(b"+5"), Some(5));
        assert_eq!(safe_strtoull(b"-1"), None);
        assert_eq!(safe_strtoull(b"-0"), Some(0));
        assert_eq!(safe_strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(safe_strtoull(b"18446744073709551616"), None);
        assert_eq!(safe_strtoull(b"-18446744073709551615"), Some(1));
        assert_eq!(safe_strtoull(b"-18446744073709551616"), None);
        assert_eq!(safe_strtoull(b"-9223372036854775809"), Some(9223372036854775807));
        assert_eq!(safe_strtoull(b"-9223372036854775808"), None);
        assert_eq!(safe_strtoull(b"5x"), None);
        assert_eq!(safe_strtoull(b"5\rjunk"), Some(5));
        assert_eq!(safe_strtoull(b"\t5"), Some(5));
        assert_eq!(safe_strtoull(b"+\t5"), None);
        assert_eq!(safe_strtoull(b""), None);
        assert_eq!(safe_strtoull(b"+"), None);
        assert_eq!(safe_strtoull(b"-"), None);
        assert_eq!(safe_strtoull(b"x"), None);
    }

    #[test]
    fn strtoul_truncates_to_32_bits() {
        // `set k 4294967297 0 1` stores flags 1; `set k 18446744073709551615 ...`
        // stores 4294967295; `set k -9223372036854775809 ...` stores 4294967295.
        assert_eq!(safe_strtoul(b"4294967297"), Some(1));
        assert_eq!(safe_strtoul(b"18446744073709551615"), Some(u32::MAX));
        assert_eq!(safe_strtoul(b"-9223372036854775809"), Some(u32::MAX));
        assert_eq!(safe_strtoul(b"-1"), None);
        assert_eq!(safe_strtoul(b"-0"), Some(0));
    }

    #[test]
    fn strtol_truncates_to_32_bits() {
        // `set k 0 4294967296 1` stores exptime 0; `set k 0 0 4294967297` reads
        // 1 data byte; `set k 0 9223372036854775808 1` is a format error.
        assert_eq!(safe_strtol(b"4294967296"), Some(0));
        assert_eq!(safe_strtol(b"4294967297"), Some(1));
        assert_eq!(safe_strtol(b"-1"), Some(-1));
        assert_eq!(safe_strtol(b"2147483648"), Some(i32::MIN));
        assert_eq!(safe_strtol(b"9223372036854775807"), Some(-1));
        assert_eq!(safe_strtol(b"9223372036854775808"), None);
        assert_eq!(safe_strtol(b"-9223372036854775808"), Some(0));
        assert_eq!(safe_strtol(b"-9223372036854775809"), None);
        assert_eq!(safe_strtol(b"1x"), None);
        assert_eq!(safe_strtol(b"1\r"), Some(1));
    }
}
