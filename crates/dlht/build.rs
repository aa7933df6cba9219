//! Planted bugs for the project's own checks (scripts/planted-bugs.sh): with
//! the `internals` feature on, `DLHT_PLANTS=1` builds the library with
//! `--cfg dlht_plants`, which carries every planted bug (src/plant.rs) and
//! turns on at run time the one that `DLHT_PLANT` names: one build serves
//! every plant. An environment variable instead of RUSTFLAGS so that only
//! this crate rebuilds (RUSTFLAGS would rebuild every dependency). Without
//! `internals` (every user's build) the variable is ignored.
fn main() {
    println!("cargo:rerun-if-env-changed=DLHT_PLANTS");
    let internals = std::env::var_os("CARGO_FEATURE_INTERNALS").is_some();
    if internals && std::env::var("DLHT_PLANTS").is_ok_and(|v| v == "1") {
        println!("cargo:rustc-cfg=dlht_plants");
    }
}
