//! memcached's text and meta protocols (memcached 1.6's `protocol.txt`):
//! parsing a connection's input buffer into commands, and the exact error
//! replies memcached 1.6.18 sends for bad input.
//!
//! [`text::parse`] is the entry point; meta commands come out of it as
//! [`text::Command::Meta`]. `OBSERVED.md` (next to this file) lists the
//! replies of the real memcached 1.6.18 that the parser reproduces.

pub mod meta;
pub(crate) mod num;
pub mod reply;
pub mod text;
