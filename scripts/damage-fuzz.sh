#!/usr/bin/env bash
# The long run of the mutation fuzzer (tests/persist_damage.rs): CASES
# mutated map directories per map type (FileByteMap and FileMap; default
# 100000), bins included, split into chunks run JOBS at a time (default:
# the CPU count). Each chunk is one test process, whose children open the
# mutated directories (a crash, panic or hang there is reported with its
# case, replayable with DLHT_DAMAGE_FROM=N DLHT_DAMAGE_CASES=N+1). Opt-in:
#   bash scripts/damage-fuzz.sh [cases] [jobs]
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-100000}
jobs=${2:-$(nproc)}
chunk=5000
bin=$(cargo test -p dlht --release --test persist_damage --no-run --message-format=json 2>/dev/null |
  sed -n 's/.*"executable":"\([^"]*persist_damage[^"]*\)".*/\1/p' | tail -1)
[ -x "$bin" ] || { echo "could not build the persist_damage test binary"; exit 1; }
logs=$(mktemp -d)
started=$(date +%s)
seq 0 "$chunk" $((cases - 1)) | xargs -P "$jobs" -I{} sh -c \
  'end=$(( {} + '"$chunk"' )); [ $end -gt '"$cases"' ] && end='"$cases"';
   DLHT_DAMAGE_FROM={} DLHT_DAMAGE_CASES=$end "'"$bin"'" --exact mutated_directories_never_crash_or_serve_wrong_bytes \
     >"'"$logs"'/chunk-{}.log" 2>&1 && echo "cases {}..$end: ok" || echo "cases {}..$end: FAILED (see '"$logs"'/chunk-{}.log)"' |
  sort -n -t' ' -k2 | tee "$logs/summary"
echo "$cases cases per map type in $(( $(date +%s) - started )) s, logs in $logs"
! grep -q FAILED "$logs/summary"
