#!/usr/bin/env bash
# Instructions and simulated cache misses per get, for each access mode, on
# a memory-resident table: callgrind with its cache simulator (a 32 MiB,
# 16-way last-level cache like this VM's L3), dumping its counts before and
# after each mode's function of `dlht-bench profile`, so the part dumped on
# leaving a mode holds that mode's cost alone. Deterministic, so it is the
# noise-free half of the batching analysis (the timed half is
# `dlht-bench batching`). callgrind does not simulate prefetches, so a
# prefetched line still counts as a miss where it is read. Opt-in (about
# 3 minutes):
#   bash scripts/profile-gets.sh [ops per mode] [log2 keys]
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-200000}
keys_log2=${2:-21}
cargo build --release -q -p dlht-bench
out=$(mktemp -d)
modes="profile_lines profile_map_get profile_map_batch profile_local_get profile_local_batch profile_alloc_find profile_bytes_find"
toggles=()  # dump points
for m in $modes; do toggles+=("--dump-before=*profile::$m" "--dump-after=*profile::$m"); done
valgrind --tool=callgrind --cache-sim=yes --LL=33554432,16,64 "${toggles[@]}" \
  --callgrind-out-file="$out/cg.out" \
  target/release/dlht-bench profile --ops "$ops" --keys-log2 "$keys_log2" >"$out/stdout" 2>"$out/log"
cat "$out/stdout"
printf '%-22s %10s %10s %10s %10s\n' mode "instr/get" "reads/get" "L1miss/get" "LLmiss/get"
for m in $modes; do
  part=$(grep -l "^desc: Trigger: --dump-after=.*profile::$m\$" "$out"/cg.out.* | head -1)
  [ -n "$part" ] || { echo "no part dumped after $m (callgrind wrote: $(ls "$out"))"; exit 1; }
  awk -v m="$m" -v ops="$ops" '
    /^events:/ { for (j = 2; j <= NF; j++) idx[$j] = j - 1 }
    /^(summary|totals):/ { for (j = 2; j <= NF; j++) v[j - 1] = $j }
    END { printf "%-22s %10.1f %10.1f %10.2f %10.2f\n", m, v[idx["Ir"]]/ops, v[idx["Dr"]]/ops, v[idx["D1mr"]]/ops, v[idx["DLmr"]]/ops }
  ' "$part"
done
echo "# per get (profile_lines: per random line read, its key generation included); $ops per mode, 2^$keys_log2 keys; files in $out"
