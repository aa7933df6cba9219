#!/usr/bin/env bash
# Device run: dlht against GrowT, Boost cfm and the Rust peers at 1-16 threads.
D=target/device
mkdir -p "$OUT"
{ date -u; nproc; lscpu | grep -E "Model name|Socket|Core|Thread|NUMA|L3|MHz"; free -g; cat /sys/kernel/mm/transparent_hugepage/enabled; uname -r; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
T0=$(date +%s)
timeout ${STEADY_S:-300} $D/dlht-bench --threads 1,2,4,8,16 --rounds 3 --seconds 0.25 --keys-log2 25 \
  --systems dlht,dlht-batch,growt,boost-cfm,dashmap,scc --workloads get,insdel,putheavy \
  --population-log2 23 --out "$OUT/steady" > "$OUT/steady.txt" 2>&1
echo "steady rc=$? in $(( $(date +%s) - T0 )) s"
tail -60 "$OUT/steady.txt"
