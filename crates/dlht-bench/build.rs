//! Builds the optional C++ peers (see `src/compare/cpp.rs`): with
//! `DLHT_GROWT_DIR` set to a GrowT checkout, our adapter `cpp/growt.cpp`
//! and the cfg `dlht_growt`; with `DLHT_BOOST_UNORDERED_DIR` set to a
//! Boost.Unordered checkout (or a whole Boost tree), `cpp/boost_cfm.cpp` and
//! the cfg `dlht_boost_cfm`. With neither set it compiles nothing.
//!
//! `DLHT_BOOST_INCLUDE`: further include folders for Boost (a path list,
//! searched after Boost.Unordered and before the system's headers), such as
//! a boostorg/core checkout. `DLHT_CPP_NATIVE=1`: compile the adapters with
//! `-march=native`.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dlht_growt)");
    println!("cargo::rustc-check-cfg=cfg(dlht_boost_cfm)");
    for var in ["DLHT_GROWT_DIR", "DLHT_BOOST_UNORDERED_DIR", "DLHT_BOOST_INCLUDE", "DLHT_CPP_NATIVE"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=cpp");

    if let Some(dir) = env_dir("DLHT_GROWT_DIR") {
        growt(&dir);
    }
    if let Some(dir) = env_dir("DLHT_BOOST_UNORDERED_DIR") {
        boost_cfm(&dir);
    }
}

/// The folder an environment variable names, if it is set and not empty.
fn env_dir(var: &str) -> Option<PathBuf> {
    env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Stop the build with a message: the user named a tree that does not work.
fn fail(msg: String) -> ! {
    panic!("{msg}");
}

/// A C++20 build of one adapter; `system` folders are searched with
/// `-isystem` (their warnings are theirs, not ours).
fn adapter(file: &str, system: &[PathBuf]) -> cc::Build {
    let mut b = cc::Build::new();
    b.cpp(true).std("c++20").opt_level(3).file(file).include("cpp");
    for dir in system {
        b.flag("-isystem").flag(dir.as_os_str().to_str().expect("include folder is not UTF-8"));
    }
    if env::var("DLHT_CPP_NATIVE").is_ok_and(|v| v == "1") {
        b.flag("-march=native");
    }
    b
}

fn growt(dir: &Path) {
    let need = |rel: &str, hint: &str| {
        if !dir.join(rel).is_file() {
            fail(format!("DLHT_GROWT_DIR={}: no {rel}; {hint}", dir.display()));
        }
    };
    need("data-structures/table_config.hpp", "it should name a checkout of github.com/TooBiased/growt");
    need(
        "utils/debug.hpp",
        "its utils submodule (github.com/TooBiased/utils_tm) is empty: `git submodule update --init utils` in it",
    );
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        fail("GrowT needs x86-64 (16-byte compare-and-swap, SSE loads)".into());
    }
    let mut b = adapter("cpp/growt.cpp", &[dir.to_path_buf()]);
    // cmpxchg16b for the 16-byte cells; as GrowT's own CMake build.
    b.flag("-mcx16").flag("-msse4.2");
    if let Err(e) = b.try_compile("dlht_peer_growt") {
        fail(format!("compiling cpp/growt.cpp against DLHT_GROWT_DIR={}: {e}", dir.display()));
    }
    println!("cargo::rustc-cfg=dlht_growt");
}

fn boost_cfm(dir: &Path) {
    const HEADER: &str = "boost/unordered/concurrent_flat_map.hpp";
    // A boostorg/unordered checkout keeps its headers in include/; a whole
    // Boost tree has boost/ at its root.
    let root = [dir.join("include"), dir.to_path_buf()].into_iter().find(|r| r.join(HEADER).is_file());
    let Some(root) = root else {
        fail(format!(
            "DLHT_BOOST_UNORDERED_DIR={}: no {HEADER} in it or in its include/ (Boost.Unordered 1.83 or later)",
            dir.display()
        ));
    };
    let mut system = vec![root];
    if let Some(extra) = env::var_os("DLHT_BOOST_INCLUDE") {
        for p in env::split_paths(&extra).filter(|p| !p.as_os_str().is_empty()) {
            let inc = p.join("include");
            system.push(if inc.is_dir() { inc } else { p });
        }
    }
    if let Err(e) = adapter("cpp/boost_cfm.cpp", &system).try_compile("dlht_peer_boost_cfm") {
        fail(format!(
            "compiling cpp/boost_cfm.cpp against {}: {e}\nBoost.Unordered needs other Boost libraries' headers \
             of a release near its own: put a boostorg/core checkout of the same tag (and, from \
             boost-1.89.0 on, boostorg/container_hash) in DLHT_BOOST_INCLUDE, the rest from Debian's \
             libboost-dev (see src/compare/cpp.rs)",
            system.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    println!("cargo::rustc-cfg=dlht_boost_cfm");
}
