#!/usr/bin/env bash
# Interleaved: DRAMHiT async / sync finds and dlht-bench get (dlht, dlht-batch, limit) on 2^26 keys, 1 and 2 threads.
out=/tmp/dramhit-ab; mkdir -p $out
C="--ht-type 3 --numa-split 2 --mode 11 --skew 0.01 --seed 12345 --ht-size 134217728 --ht-fill 50 --drop-caches 0"
for r in 1 2; do
  for t in 1 2; do
    for p in 0 1; do
      (cd /work/peers/dramhit && timeout 120 ./build/kvstore $C --num-threads $t --no-prefetch $p > $out/dramhit-r$r-t$t-nopf$p.txt 2>&1)
      awk -v T=$t -v P=$p -v R=$r '/cycles for .* finds/{printf "dramhit round %s threads %s %s: %.2f M finds/s\n", R, T, (P==0?"async-batch16":"sync"), T*$6*2445.406/$3}' $out/dramhit-r$r-t$t-nopf$p.txt
    done
  done
  timeout 300 /work/main/target/release/dlht-bench --systems dlht,dlht-batch --workloads get --threads 1,2 --rounds 2 --seconds 0.5 --keys-log2 26 --batch 16,32 --no-growth --out $out/dlht-r$r > $out/dlht-r$r.txt 2>&1
  grep -E "^(get|lines) " $out/dlht-r$r.txt | sed "s/^/dlht-bench round $r: /"
done
