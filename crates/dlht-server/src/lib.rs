//! dlht-server: a memcached-compatible cache on dlht's `ByteMap`. It speaks
//! memcached 1.6.18's text and meta protocols over TCP, with memcached's
//! replies byte for byte where the item layout allows, and takes memcached's
//! command line (see [`config`]): a memory limit with approximate-LRU
//! eviction (`-m`), text-protocol authentication (`-Y`), and warm restart
//! from a directory (`-e`, with `--durable` to reply to a change only once
//! it is on disk). It does not speak memcached's binary protocol or UDP.
//!
//! Layers, lowest first: [`protocol`] parses memcached's text and meta
//! protocols into commands (no I/O, no storage); [`item`] lays out a stored
//! value; [`clock`] is memcached's server clock; [`store`] runs the text and
//! meta commands on the map; [`auth`] checks `-Y` logins; [`conn`] and
//! [`server`] are the network side (mio event loops); [`config`] is the
//! command line.

pub mod auth;
pub mod clock;
pub mod config;
pub mod conn;
pub mod item;
pub mod protocol;
pub mod server;
pub mod store;
