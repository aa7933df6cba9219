//! dlht-server: a memcached-compatible cache on dlht's `ByteMap` (issue 24,
//! in progress). Layers, lowest first: [`protocol`] parses memcached's text
//! and meta protocols into commands (no I/O, no storage).

pub mod protocol;
