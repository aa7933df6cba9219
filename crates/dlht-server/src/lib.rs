//! dlht-server: a memcached-compatible cache on dlht's `ByteMap` (issue 24,
//! in progress). Layers, lowest first: [`protocol`] parses memcached's text
//! and meta protocols into commands (no I/O, no storage); [`item`] lays out
//! a stored value; [`clock`] is memcached's server clock; [`store`] runs the
//! text and meta commands on the map; [`conn`] and [`server`] are the
//! network side (mio event loops); [`config`] is the command line.

pub mod auth;
pub mod clock;
pub mod config;
pub mod conn;
pub mod item;
pub mod protocol;
pub mod server;
pub mod store;
