//! In-crate tests that need the crate's internals: the loom models of the
//! per-bin protocols.

mod models;
