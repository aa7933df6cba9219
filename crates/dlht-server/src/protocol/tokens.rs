//! Splitting a command line into space-separated tokens, as memcached's
//! `tokenize_command` does: [`Tokens`] iterates a line's tokens without
//! allocating, `Line` records the first 23 for the parsers.

use std::fmt;

use memchr::memchr;

/// memcached's `MAX_TOKENS`: the tokenizer fills at most 23 tokens plus a
/// terminal one; commands count the terminal one in their token limits.
pub(crate) const MAX_TOKENS: usize = 24;

/// Space-separated tokens of a line, iterated without allocating.
///
/// Two `Tokens` are equal when they hold the same bytes.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Tokens<'a> {
    rest: &'a [u8],
}

/// The keys of a `get`-family command.
pub type Keys<'a> = Tokens<'a>;

impl<'a> Tokens<'a> {
    /// Tokens of `bytes`, split at spaces (only spaces, as memcached does).
    pub fn new(bytes: &'a [u8]) -> Self {
        Tokens { rest: bytes }
    }

    /// The bytes not yet iterated, spaces included.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.rest
    }

    /// Whether no token is left.
    pub fn is_empty(&self) -> bool {
        self.rest.iter().all(|&b| b == b' ')
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&b| b != b' ')?;
        let rest = self.rest.get(start..).unwrap_or_default();
        let end = memchr(b' ', rest).unwrap_or(rest.len());
        let (token, after) = rest.split_at(end);
        self.rest = after;
        Some(token)
    }
}

impl fmt::Debug for Tokens<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone().map(|t| t.escape_ascii().to_string())).finish()
    }
}

/// A line split into tokens the way memcached's `tokenize_command` does:
/// at most 23 tokens are recorded (the rest of the line stays reachable
/// through [`Line::rest_after`]).
pub(crate) struct Line<'a> {
    bytes: &'a [u8],
    spans: [(usize, usize); MAX_TOKENS - 1],
    /// Number of tokens recorded (memcached's `ntokens` is this plus one).
    pub(crate) n: usize,
}

impl<'a> Line<'a> {
    pub(crate) fn tokenize(bytes: &'a [u8]) -> Self {
        let mut spans = [(0, 0); MAX_TOKENS - 1];
        let mut n = 0;
        let mut i = 0;
        while let Some(span) = spans.get_mut(n) {
            while bytes.get(i) == Some(&b' ') {
                i += 1;
            }
            if i >= bytes.len() {
                break;
            }
            let end = bytes.get(i..).and_then(|rest| memchr(b' ', rest)).map_or(bytes.len(), |j| i + j);
            *span = (i, end);
            n += 1;
            i = end;
        }
        Line { bytes, spans, n }
    }

    /// memcached's `ntokens`: the tokens plus the terminal (empty) one.
    pub(crate) fn ntokens(&self) -> usize {
        self.n + 1
    }

    /// Token `i`, or empty past the last one (memcached's terminal token).
    pub(crate) fn token(&self, i: usize) -> &'a [u8] {
        match self.spans.get(i) {
            Some(&(start, end)) if i < self.n => self.bytes.get(start..end).unwrap_or_default(),
            _ => &[],
        }
    }

    /// The last recorded token: where memcached looks for `noreply`.
    pub(crate) fn last(&self) -> &'a [u8] {
        self.n.checked_sub(1).map_or(&[], |i| self.token(i))
    }

    /// The rest of the line after token `i` (all of it, past 23 tokens too).
    pub(crate) fn rest_after(&self, i: usize) -> &'a [u8] {
        let from = match self.spans.get(i) {
            Some(&(_, end)) if i < self.n => end,
            _ => self.bytes.len(),
        };
        self.bytes.get(from..).unwrap_or_default()
    }

    /// The rest of the line from token `i` on (empty if there is none).
    pub(crate) fn rest_from(&self, i: usize) -> &'a [u8] {
        match self.spans.get(i) {
            Some(&(start, _)) if i < self.n => self.bytes.get(start..).unwrap_or_default(),
            _ => &[],
        }
    }
}
