//! Planted bugs for the project's own checks (scripts/planted-bugs.sh): with
//! the `internals` feature on, `DLHT_PLANT=name` builds the library with
//! `--cfg dlht_plant="name"`, one reverted fix. An environment variable
//! instead of RUSTFLAGS so that only this crate rebuilds per plant (RUSTFLAGS
//! would rebuild every dependency each time). Without `internals` (every
//! user's build) the variable is ignored.
fn main() {
    println!("cargo:rerun-if-env-changed=DLHT_PLANT");
    let internals = std::env::var_os("CARGO_FEATURE_INTERNALS").is_some();
    match std::env::var("DLHT_PLANT") {
        Ok(plant) if internals && !plant.is_empty() => {
            println!("cargo:rustc-cfg=dlht_plant=\"{plant}\"");
        }
        _ => {}
    }
}
