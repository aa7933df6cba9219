#!/usr/bin/env bash
# The project's test command (README). Runs the whole suite — unit, model,
# linearizability, stress, reclamation, batch, hasher and doc tests — in each
# build a user makes, then the loom models with their planted bugs, valgrind
# memcheck over the concurrency tests, the downstream checks and the
# benchmark's smoke runs.
#
#   DLHT_STRESS_SCALE=N   longer (N > 1) or shorter (N < 1) stress runs
#   DLHT_PLANTED=0        skip the planted-bug checks (about 5 minutes)
#   DLHT_VALGRIND=0       skip memcheck
#   DLHT_QUICK=1          only the release suite and the loom models
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }
t0=$SECONDS
timed() { printf '   (%ds so far)\n' $((SECONDS - t0)); }

# What the server's tests run beside it, from Debian: the real memcached
# (differential tests), libmemcached's tools, twemproxy and pymemcache.
need=()
command -v memcached >/dev/null || need+=(memcached)
command -v memccapable >/dev/null || need+=(libmemcached-tools)
command -v nutcracker >/dev/null || need+=(nutcracker)
{ /usr/bin/python3 -c 'import pymemcache' || python3 -c 'import pymemcache'; } 2>/dev/null || need+=(python3-pymemcache)
if [ "${#need[@]}" -gt 0 ]; then
  step "installing Debian packages the server tests need: ${need[*]}"
  if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null; then
    echo "could not install ${need[*]} (the test command needs root and Debian's package mirror)" >&2
    exit 1
  fi
fi

# Each crate's layout: a lower room never imports a higher one.
step "import loops between the files of each crate"
for src in crates/*/src; do python3 scripts/import-loops.py "$src"; done

# The release builds below use cargo's own release settings (no LTO, 16
# codegen units): the build a crate that depends on dlht gets, since a
# dependency is built with its user's profile, not this workspace's. The
# workspace's thin LTO (for the benchmark binary) sits between these and the
# fat-LTO build, which has a step of its own. Thin LTO over 27 test binaries
# took 5.4 min to build here, this 1.5 min.
export CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16

# The downstream crate is built on its own below (it must not see the
# `internals` feature that the benchmark turns on). The doctests (API
# examples, compiled one by one) run in the debug build, where they compile
# fastest.
step "release (cargo's release settings: no LTO): the whole workspace's unit and integration tests"
cargo test --workspace --exclude dlht-downstream --release --lib --bins --tests
timed

step "loom models of the bin protocol and of reclamation"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p dlht --release --lib
timed

if [ "${DLHT_QUICK:-0}" = "1" ]; then exit 0; fi

step "debug (overflow checks, debug assertions, poisoned freed indexes): the whole suite and the doctests"
cargo test -p dlht -p dlht-server
timed

# The builds below change how the protocols compile (fat LTO inlining
# across crates, cmpxchg16b inlined, 16-byte slot accesses): they run the
# unit tests (with the protocol models) and the integration tests of the
# concurrent protocols. The rest of the suite tests API behaviour, which
# the release and debug builds cover. (Fat LTO optimizes each test binary
# as a whole program: 4 minutes for all 30 binaries here.)
protocol_tests=(--lib --test stress --test linearizability --test every_mode --test batch --test shrink
  --test reclaim --test alloc_map --test byte_map --test byte_map_churn --test snapshot)
step "release-lto (fat LTO, one codegen unit, panic = abort): unit tests and the protocol tests"
cargo test -p dlht --profile release-lto "${protocol_tests[@]}"
timed

step "release-lto: a downstream binary grows maps from empty on 1 and 2 threads"
cargo run --profile release-lto -p dlht-downstream --bin lto-check
timed

step "release with -C target-cpu=native (cmpxchg16b inlined): unit tests and the protocol tests"
RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/native cargo test -p dlht --release "${protocol_tests[@]}"
RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/native \
  cargo run --release -p dlht-downstream --bin lto-check
timed

step "release with --cfg dlht_slot128 (every slot access 16 bytes, as on non-x86 targets): unit tests and the protocol tests"
RUSTFLAGS="--cfg dlht_slot128" CARGO_TARGET_DIR=target/slot128 cargo test -p dlht --release "${protocol_tests[@]}"
timed

step "downstream: the internals are out of reach without the feature"
cargo test -p dlht-downstream --doc
timed

if [ "${DLHT_VALGRIND:-1}" = "1" ]; then
  step "valgrind memcheck: stress, reclamation, batch, hasher, allocator-mode, allocator read-modify-write, byte-map, iteration, shrink, owned-guard, re-entry, thread-teardown and persistent-file tests (small scale)"
  if ! command -v valgrind >/dev/null; then
    if [ "${CI:-}" = "true" ]; then
      echo "valgrind is missing: installing Debian's package"
      (apt-get update -qq && apt-get install -y -qq valgrind) >/dev/null
    else
      echo "valgrind is missing: install it (apt-get install valgrind) or set DLHT_VALGRIND=0" >&2
      exit 1
    fi
  fi
  bash scripts/memcheck.sh
  timed
fi

if [ "${DLHT_PLANTED:-1}" = "1" ]; then
  step "planted bugs: each reverted fix must fail a loom model"
  bash scripts/planted-bugs.sh
  timed
fi

step "benchmark smoke runs (the comparison and each study)"
cargo run --release -p dlht-bench -- --smoke --out target/dlht-bench-smoke
for study in baseline batching hashers sizes counters drain memory ycsb join locks smallbank tatp kmer; do
  cargo run --release -p dlht-bench -- "$study" --smoke --out "target/dlht-bench-smoke-$study"
done
cargo run --release -p dlht-bench -- join --smoke --match-fraction 0.5 --out target/dlht-bench-smoke-join-half
cargo run --release -p dlht-bench -- locks --smoke --zipf 0.99 --out target/dlht-bench-smoke-locks-zipf
cargo run --release -p dlht-bench -- smallbank --smoke --zipf 0.99 --out target/dlht-bench-smoke-smallbank-zipf
cargo run --release -p dlht-bench -- profile --ops 1000 --keys-log2 12
cargo run --release -p dlht-bench -- persist --smoke --out target/dlht-bench-smoke-persist; cargo run --release -p dlht-bench -- persist --smoke --recovery --out target/dlht-bench-smoke-persist; cargo run --release -p dlht-bench -- persist --smoke --sync-ms 0,10; cargo run --release -p dlht-bench -- persist-bytes --smoke --out target/dlht-bench-smoke-persist; cargo run --release -p dlht-bench -- persist-bytes --smoke --recovery --out target/dlht-bench-smoke-persist
# The server study starts memcached and dlht-server (loopback, pinned
# apart), checks every reply of its own client, and stops both.
cargo build --release -p dlht-server
cargo run --release -p dlht-bench -- server --smoke --eviction-policies clock,sampled --out target/dlht-bench-smoke-server
timed
