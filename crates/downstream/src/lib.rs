//! What a downstream crate can reach of dlht without its `internals`
//! feature (issue 7, item 3.5): the raw index and the per-bin protocols let
//! safe code set any link index and mark any slot Valid, after which a get
//! reads out of bounds, so they must be out of reach. Checked by the
//! doctests below, run on their own (`cargo test -p dlht-downstream --doc`,
//! as `scripts/test.sh` does) so that no other workspace member turns the
//! feature on.
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
//! ```compile_fail,E0433
//! let _ = dlht::raw::index::MAX_BINS;
//! ```
//!
//! ```compile_fail,E0432
//! use dlht::raw::header::Header;
//! ```
//!
//! Nor do the per-bin protocols:
//!
//! ```compile_fail,E0432
//! use dlht::protocol::get;
//! ```
//!
//! Nor the benchmark hook:
//!
//! ```compile_fail,E0599
//! dlht::Map::<u64, u64>::new().enter_leave();
//! ```
