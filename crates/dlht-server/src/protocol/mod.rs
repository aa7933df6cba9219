//! memcached's text and meta protocols (memcached 1.6's `protocol.txt`):
//! parsing a connection's input buffer into commands, and the exact error
//! replies memcached 1.6.18 sends for bad input.
//!
//! [`text::parse`] is the entry point; meta commands come out of it as
//! [`command::Command::Meta`]. `OBSERVED.md` (next to this file) lists the
//! replies of the real memcached 1.6.18 that the parser reproduces.
//!
//! Modules, lowest first: [`reply`] (error lines), `num` (C's number
//! parsing), `base64` (memcached's decoder), [`limits`] (key, line and item
//! limits), [`tokens`] (splitting a line), [`command`] (what the parsers
//! produce, and the constructors of [`command::Parsed`] both share), then
//! the parsers: [`meta`] for the `m?` commands, and [`text`], which holds
//! the entry point and hands meta lines to [`meta`].

pub(crate) mod base64;
pub mod command;
pub mod limits;
pub mod meta;
#[cfg(test)]
mod meta_tests;
pub(crate) mod num;
pub mod reply;
pub mod text;
pub mod tokens;
