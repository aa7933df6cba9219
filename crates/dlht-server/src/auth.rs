//! memcached's text-protocol authentication (`-Y <file>`, memcached 1.6's
//! `authfile.c` and `try_read_command_asciiauth`).
//!
//! The file holds `user:password` lines. Until a connection has logged in,
//! all it may send is `set <any> <any> <any> <bytes>` whose data block is
//! `user password`; anything else gets "CLIENT_ERROR unauthenticated". The
//! exact replies, and where this differs from memcached, are in
//! `protocol/OBSERVED.md` ("Authentication (-Y)").

use std::fmt;
use std::path::{Path, PathBuf};

use memchr::memchr;

use crate::protocol::num::safe_strtoul;

/// The reply to a good login (memcached pretends the `set` was stored).
pub const STORED: &[u8] = b"STORED\r\n";
/// The reply to any command but a login before logging in.
pub const UNAUTHENTICATED: &[u8] = b"CLIENT_ERROR unauthenticated\r\n";
/// The reply to a login whose user and password match no line of the file.
pub const AUTHENTICATION_FAILURE: &[u8] = b"CLIENT_ERROR authentication failure\r\n";
/// The reply to a login whose data block has fewer than two tokens.
pub const BAD_TOKEN_FORMAT: &[u8] = b"CLIENT_ERROR bad authentication token format\r\n";
/// The reply to a login whose data block does not end with "\r\n".
pub const BAD_TERMINATION: &[u8] = b"CLIENT_ERROR bad command line termination\r\n";

/// Before logging in, a line with no "\n" in more than this many bytes
/// closes the connection (memcached's check on its read buffer).
pub const MAX_LINE: usize = 2048;
/// The largest login data block (with its "\r\n"): memcached closes the
/// connection when the block does not fit its 16 KiB read buffer.
pub const MAX_DATA: usize = 16 * 1024;

/// The users of an auth file: (user, password) pairs.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthFile {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for AuthFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the passwords.
        f.debug_struct("AuthFile").field("entries", &self.entries.len()).finish()
    }
}

/// Why an auth file was not loaded, with memcached's wording.
#[derive(Debug)]
pub enum LoadError {
    /// The file could not be opened or read.
    Open(PathBuf, std::io::Error),
    /// A line has no `:` before its end.
    Malformed(PathBuf),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Open(path, e) => {
                let text = e.to_string();
                let text = text.find(" (os error").map_or(text.as_str(), |i| &text[..i]);
                write!(f, "Could not open authfile [{}] for reading: {text}", path.display())
            }
            LoadError::Malformed(path) => {
                write!(f, "Authfile [{}] has a malformed entry. Should be 'user:password'", path.display())
            }
        }
    }
}

impl std::error::Error for LoadError {}

impl AuthFile {
    /// Reads and parses the file at `path` (see [`AuthFile::parse`]).
    pub fn load(path: &Path) -> Result<AuthFile, LoadError> {
        let bytes = std::fs::read(path).map_err(|e| LoadError::Open(path.to_owned(), e))?;
        AuthFile::parse(&bytes).ok_or_else(|| LoadError::Malformed(path.to_owned()))
    }

    /// Parses an auth file as memcached does: one `user:password` per line
    /// (split at the first `:`; the password ends at "\r", "\n" or NUL, so
    /// CRLF files work), a missing final newline is fine, an empty file
    /// has no users. A line without `:` (a blank line, a `#` comment) makes
    /// the whole file malformed (`None`). Unlike memcached, all lines count
    /// (memcached silently keeps only the first 8 and splits lines longer
    /// than 255 bytes).
    pub fn parse(bytes: &[u8]) -> Option<AuthFile> {
        let mut entries = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let (line, next) = match memchr(b'\n', rest) {
                Some(i) => (&rest[..=i], &rest[i + 1..]),
                None => (rest, &[][..]),
            };
            rest = next;
            // The user ends at the first ':'; a NUL or the line's end
            // before it is a malformed line.
            let colon = line.iter().position(|&b| matches!(b, b':' | b'\0' | b'\n'))?;
            if line[colon] != b':' {
                return None;
            }
            let pass = &line[colon + 1..];
            let end = pass.iter().position(|&b| matches!(b, b'\r' | b'\n' | b'\0')).unwrap_or(pass.len());
            entries.push((line[..colon].to_vec(), pass[..end].to_vec()));
        }
        Some(AuthFile { entries })
    }

    /// The number of users.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file has no users (then nobody can log in).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `user` and `password` match a line of the file. Every entry
    /// is compared, each without an early exit, so the time taken does not
    /// tell how much of a user or password matched.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        let mut found = 0u8;
        for (u, p) in &self.entries {
            found |= ct_eq(u, user) & ct_eq(p, password);
        }
        found == 1
    }
}

/// 1 if `a == b`, else 0, in time that depends only on the lengths.
fn ct_eq(a: &[u8], b: &[u8]) -> u8 {
    let mut diff = u8::from(a.len() != b.len());
    for (i, &x) in a.iter().enumerate() {
        diff |= x ^ b.get(i).copied().unwrap_or(!x);
    }
    // `diff == 0` without a data-dependent branch.
    u8::from(std::hint::black_box(diff) == 0)
}

/// What the front of an unauthenticated connection's input holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Login<'a> {
    /// Not complete yet: wait for more bytes.
    Incomplete,
    /// Close the connection without a reply (a line with no "\n" in more
    /// than [`MAX_LINE`] bytes, or a data block over [`MAX_DATA`]).
    Close,
    /// Not a login: reply this and drop `consumed` bytes.
    Reply { reply: &'static [u8], consumed: usize },
    /// A login attempt: check these and drop `consumed` bytes.
    Credentials { user: &'a [u8], password: &'a [u8], consumed: usize },
}

/// The tokens of `bytes` as memcached's `tokenize_command` sees them: the
/// bytes up to the first NUL, split at spaces.
fn tokens(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let end = memchr(0, bytes).unwrap_or(bytes.len());
    bytes[..end].split(|&b| b == b' ').filter(|t| !t.is_empty())
}

/// Parses the front of an unauthenticated connection's input as memcached's
/// `try_read_command_asciiauth` does. The header line is tokenized with
/// its "\r" (numbers stop at it); key, flags and exptime are ignored, and so
/// is `noreply` (a login always gets its reply).
pub fn parse_login(buf: &[u8]) -> Login<'_> {
    if buf.len() < 2 {
        return Login::Incomplete;
    }
    let Some(nl) = memchr(b'\n', buf) else {
        return if buf.len() > MAX_LINE { Login::Close } else { Login::Incomplete };
    };
    let line_len = nl + 1;
    let mut words = tokens(&buf[..nl]);
    let (first, size) = (words.next(), words.nth(3));
    let size = match (first, size.and_then(safe_strtoul)) {
        (Some(b"set"), Some(size)) => size,
        _ => return Login::Reply { reply: UNAUTHENTICATED, consumed: line_len },
    };
    // memcached's `rlbytes = size + 2` in 32-bit arithmetic.
    let block = size.wrapping_add(2) as usize;
    if block > MAX_DATA {
        return Login::Close;
    }
    let Some(data) = buf.get(line_len..line_len + block) else {
        return Login::Incomplete;
    };
    let consumed = line_len + block;
    // A block shorter than 2 (size wrapped) is compared with the bytes
    // before it, which end in the line's NUL in memcached: never "\r\n".
    let Some(data) = data.strip_suffix(b"\r\n") else {
        return Login::Reply { reply: BAD_TERMINATION, consumed };
    };
    let mut words = tokens(data);
    match (words.next(), words.next()) {
        (Some(user), Some(password)) => Login::Credentials { user, password, consumed },
        _ => Login::Reply { reply: BAD_TOKEN_FORMAT, consumed },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &[u8]) -> AuthFile {
        AuthFile::parse(text).expect("well-formed")
    }

    #[test]
    fn file_format() {
        let f = file(b"alice:secret\nbob:pw2\n");
        assert_eq!(f.len(), 2);
        assert!(f.check(b"alice", b"secret") && f.check(b"bob", b"pw2"));
        assert!(!f.check(b"alice", b"pw2") && !f.check(b"BOB", b"pw2") && !f.check(b"bob", b"pw"));
        assert!(!f.check(b"bob", b"pw22") && !f.check(b"", b""));
        // CRLF, no final newline, ':' in the password, empty user/password.
        let f = file(b"alice:secret\r\nbob:a:b\r\n:x\ny:\nlast:one");
        assert!(f.check(b"alice", b"secret") && f.check(b"bob", b"a:b"));
        assert!(f.check(b"last", b"one") && f.check(b"", b"x") && f.check(b"y", b""));
        assert!(!f.check(b"alice", b"secret\r"));
        // A line with ':' is an entry, '#' or not; spaces are kept.
        let f = file(b"#c:x\n alice : secret \n");
        assert!(f.check(b"#c", b"x") && f.check(b" alice ", b" secret "));
        assert!(!f.check(b"alice", b"secret"));
        // Empty file: no users.
        assert!(file(b"").is_empty());
        // Lines without ':' make it malformed.
        for bad in [&b"alice:secret\n\nbob:pw\n"[..], b"\n", b"# comment\na:b\n", b"a\0:b\n", b"abc"] {
            assert_eq!(AuthFile::parse(bad), None, "{:?}", bad.escape_ascii().to_string());
        }
        // More than memcached's 8 entries all count.
        let many: String = (0..20).map(|i| format!("u{i}:p{i}\n")).collect();
        assert!(file(many.as_bytes()).check(b"u19", b"p19"));
        assert!(!format!("{:?}", file(b"a:hidden")).contains("hidden"));
    }

    #[test]
    fn constant_time_eq() {
        assert_eq!(ct_eq(b"abc", b"abc"), 1);
        assert_eq!(ct_eq(b"abc", b"abd"), 0);
        assert_eq!(ct_eq(b"abc", b"ab"), 0);
        assert_eq!(ct_eq(b"ab", b"abc"), 0);
        assert_eq!(ct_eq(b"", b""), 1);
        assert_eq!(ct_eq(b"", b"a"), 0);
        assert_eq!(ct_eq(b"\xff", b""), 0);
    }

    fn creds<'a>(user: &'a [u8], password: &'a [u8], consumed: usize) -> Login<'a> {
        Login::Credentials { user, password, consumed }
    }

    fn reply(reply: &'static [u8], consumed: usize) -> Login<'static> {
        Login::Reply { reply, consumed }
    }

    #[test]
    fn logins() {
        let ok = b"set x 0 0 12\r\nalice secret\r\n";
        assert_eq!(parse_login(ok), creds(b"alice", b"secret", ok.len()));
        // Anything may follow; each prefix is incomplete.
        assert_eq!(parse_login(b"set x 0 0 7\r\nbob pw2\r\nget x\r\n"), creds(b"bob", b"pw2", 22));
        for i in 0..ok.len() {
            assert_eq!(parse_login(&ok[..i]), Login::Incomplete, "{i}");
        }
        // Key, flags, exptime, noreply and extra tokens are ignored; bare
        // "\n" and leading spaces are fine; so are extra tokens and spaces
        // in the data block.
        for input in [
            &b"set x abc 0 7\r\nbob pw2\r\n"[..],
            b"  set x 0 0 7 a b c\nbob pw2\r\n",
            b"set x 0 0 7 noreply\r\nbob pw2\r\n",
            b"set x 0 0 10\r\n bob  pw2 \r\n",
            b"set x 0 0 9\r\nbob pw2 z\r\n",
            b"set a-key-of-any-length 0 0 7\r\nbob pw2\r\n",
        ] {
            assert_eq!(parse_login(input), creds(b"bob", b"pw2", input.len()));
        }
    }

    #[test]
    fn refusals() {
        for line in [
            &b"get x\r\n"[..],
            b"version\r\n",
            b"\r\n",
            b"x\n",
            b"set x 0 0\r\n",
            b"set\r\n",
            b"add x 0 0 7\r\n",
            b"set x 0 0 abc\r\n",
            b"set x 0 0 -1\r\n",
            b"set\tx 0 0 7\r\n",
            b"ms x 7\r\n",
            b"set x 0 0 \r\n",
            b"\x80\r\n",
        ] {
            assert_eq!(
                parse_login(line),
                reply(UNAUTHENTICATED, line.len()),
                "{:?}",
                line.escape_ascii().to_string()
            );
        }
        assert_eq!(parse_login(b"get x\r\nversion\r\n"), reply(UNAUTHENTICATED, 7));
        for data in [&b"alicesecret"[..], b"", b"bob\0pw2", b"  bob  "] {
            let input = [format!("set x 0 0 {}\r\n", data.len()).as_bytes(), data, b"\r\n"].concat();
            assert_eq!(parse_login(&input), reply(BAD_TOKEN_FORMAT, input.len()));
        }
        assert_eq!(parse_login(b"set x 0 0 7\r\nbob pw2XX"), reply(BAD_TERMINATION, 22));
        // 4294967295 + 2 is 1 in 32 bits; 4294967294 + 2 is 0.
        assert_eq!(parse_login(b"set x 0 0 4294967295\r\nv"), reply(BAD_TERMINATION, 23));
        assert_eq!(parse_login(b"set x 0 0 4294967294\r\n"), reply(BAD_TERMINATION, 22));
        // 4294967296 is 0: the block is just "\r\n".
        assert_eq!(parse_login(b"set x 0 0 4294967296\r\n\r\n"), reply(BAD_TOKEN_FORMAT, 24));
    }

    #[test]
    fn limits_close() {
        assert_eq!(parse_login(b"\n"), Login::Incomplete);
        // A NUL ends the header line: this one waits for its data block.
        assert_eq!(parse_login(b"set x 0 0 7\0junk\r\n"), Login::Incomplete);
        assert_eq!(parse_login(&[b'k'; MAX_LINE]), Login::Incomplete);
        assert_eq!(parse_login(&[b'k'; MAX_LINE + 1]), Login::Close);
        assert_eq!(parse_login(b"set x 0 0 16382\r\n"), Login::Incomplete);
        assert_eq!(parse_login(b"set x 0 0 16383\r\n"), Login::Close);
        assert_eq!(parse_login(b"set x 0 0 4294967290\r\n"), Login::Close);
    }
}
