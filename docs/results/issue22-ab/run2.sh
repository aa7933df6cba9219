#!/bin/bash
cd /tmp/ab22c
for i in 5 6; do
 for v in before final; do
  /tmp/bench-$v --systems dlht-local,dlht-local-batch --workloads get,getmiss,insdel,putheavy --threads 1 --no-growth --keys-log2 26 --rounds 2 --seconds 0.4 --out /tmp/ab22c/L$v-$i > /tmp/ab22c/L$v-$i.log 2>&1
 done
done
echo done > /tmp/ab22c/DONE2
