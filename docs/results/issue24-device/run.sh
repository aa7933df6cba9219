#!/bin/bash
# Device run of the server study: memcached 1.6.18 vs dlht-server at -t 4 and -t 8.
B=$(cd "$(dirname "$0")" && pwd)
export PATH=$B/bin:$PATH LD_LIBRARY_PATH=$B/lib
nproc; lscpu | grep -E "Model name|^CPU\(s\)|L3|NUMA node"; uname -r
memcached -V; memcaslap -V 2>&1 | head -1
for t in 4 8; do
  last=$((t - 1))
  dlht-bench server --threads $t --server-cores 0-$last --load-cores $t-15 --conns 16 --depth 4 \
    --rounds 2 --seconds 3 --workloads get90-32,multiget16,set \
    --server-bin $B/bin/dlht-server --out $OUT/t$t 2>&1 | grep -v "^round .*…" | tail -40
done
