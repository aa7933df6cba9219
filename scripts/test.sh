#!/usr/bin/env bash
# The project's test command (README): unit, model, linearizability, stress,
# reclamation and doc tests in release and debug, the loom models, and the
# benchmark's smoke mode. Set DLHT_STRESS_SCALE=N for longer stress runs.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test (release: the concurrency tests need real speed)"
cargo test --workspace --release

echo "== cargo test (debug: overflow checks, poisoned freed indexes)"
cargo test -p dlht --lib --test model --test reclaim --test batch

echo "== loom models of the bin protocol"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p dlht --release --test loom

if [ "${DLHT_PLANTED:-1}" = "1" ]; then
  echo "== planted bugs: each reverted hazard fix must fail a loom model"
  bash scripts/planted-bugs.sh
fi

echo "== benchmark smoke runs (the comparison and each study)"
cargo run --release -p dlht-bench -- --smoke --out target/dlht-bench-smoke
for study in baseline batching hashers; do
  cargo run --release -p dlht-bench -- "$study" --smoke
done
