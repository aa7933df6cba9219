#!/usr/bin/env bash
# Before/after of the padded counters on the device: two alternating runs each, same command.
D=target/device
mkdir -p "$OUT"
args="--threads 1,4,16 --rounds 2 --seconds 0.25 --keys-log2 25 --systems dlht,dlht-batch,growt --workloads get,insdel --population-log2 23"
for r in 1 2; do for b in before after; do
  T0=$(date +%s)
  timeout 95 $D/dlht-bench-$b $args --out "$OUT/$b-$r" > "$OUT/$b-$r.txt" 2>&1
  echo "$b-$r rc=$? $(( $(date +%s) - T0 )) s"
  grep -E "^(get|insdel|population|insdel-empty) +(1|4|16) +(dlht|dlht-batch|growt) " "$OUT/$b-$r.txt" | awk '{print "   ", $1, $2, $3, $4}' | tr '\n' ';'; echo
  grep "resizing under load" "$OUT/$b-$r.txt"
done; done
