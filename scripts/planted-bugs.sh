#!/usr/bin/env bash
# Shows that the loom models catch each hazard (H1–H12) of docs/DESIGN.md and of
# issue 7: every planted bug (a `--cfg dlht_plant=...` build that reverts
# one fix) must make a loom model fail — the bin-protocol models in
# `tests/loom.rs` or the reclamation models in `src/reclaim.rs`.
set -u
cd "$(dirname "$0")/.."
status=0
for plant in remove_header_only transfer_keeps_key scan_no_reread insert_no_rescan get_no_validate \
             generation_relaxed leave_relaxed; do
  out=$(RUSTFLAGS="--cfg loom --cfg dlht_plant=\"$plant\"" CARGO_TARGET_DIR=target/planted \
        cargo test -q -p dlht --release --lib --test loom --no-fail-fast 2>&1)
  if echo "$out" | grep -q "test result: FAILED"; then
    failed=$(echo "$out" | grep -E "^    [a-z_:]+$" | tr -d ' ' | paste -sd, -)
    echo "planted bug $plant: caught by $failed"
  else
    echo "planted bug $plant: NOT caught"
    echo "$out" | tail -5
    status=1
  fi
done
exit $status
