//! The index and its layout types (paper §3.1).

pub mod alloc;
pub mod bucket;
pub mod header;
pub mod index;
pub mod link_meta;
pub mod markers;
pub mod threading;
