//! What a downstream crate can reach of dlht: its public API only. The raw
//! index and the per-bin protocols would let safe code set any link index
//! and mark any slot Valid, after which a get reads out of bounds, so they
//! are private to the crate; the benchmark's and tests' hooks sit behind
//! the `internals` feature. Checked by the doctests below, run on their own
//! (`cargo test -p dlht-downstream --doc`, as `scripts/test.sh` does) so
//! that no other workspace member turns the feature on.
//!
//! The public API compiles:
//!
//! ```
//! let m = dlht::Map::<u64, u64>::new();
//! m.insert(1, 2).unwrap();
//! assert_eq!(m.get(&1), Some(2));
//! ```
//!
//! The raw index does not:
//!
//! ```compile_fail,E0603
//! let _ = dlht::raw::index::MAX_BINS;
//! ```
//!
//! ```compile_fail,E0603
//! use dlht::raw::header::Header;
//! ```
//!
//! Nor do the per-bin protocols:
//!
//! ```compile_fail,E0603
//! use dlht::protocol::get::get;
//! ```
//!
//! Nor the hooks of the `internals` feature:
//!
//! ```compile_fail,E0599
//! dlht::Map::<u64, u64>::new().enter_leave();
//! ```
//!
//! ```compile_fail,E0433
//! let _ = dlht::internals::live_indexes();
//! ```
