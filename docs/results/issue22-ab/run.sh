#!/bin/bash
cd /tmp/ab22c
for i in 1 2; do
 for v in before final; do
  /tmp/bench-$v --systems dlht,dlht-batch --workloads get,getmiss,insdel,putheavy --threads 1,2 --no-growth --keys-log2 27 --rounds 2 --seconds 0.4 --out /tmp/ab22c/$v-$i > /tmp/ab22c/$v-$i.log 2>&1
  /tmp/bench-$v --systems dlht-local,dlht-local-batch --workloads get,getmiss,insdel,putheavy --threads 1 --no-growth --keys-log2 27 --rounds 2 --seconds 0.4 --out /tmp/ab22c/$v-$((i+2)) > /tmp/ab22c/$v-$((i+2)).log 2>&1
  /tmp/bench-$v --systems dlht,dlht-batch,dlht-local-batch --workloads get --threads 1,2 --keys-log2 20 --population-log2 24 --rounds 1 --seconds 0.2 --out /tmp/ab22c/pop-$v-$i > /tmp/ab22c/pop-$v-$i.log 2>&1
 done
done
echo done > /tmp/ab22c/DONE
