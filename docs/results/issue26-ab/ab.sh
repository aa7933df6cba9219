#!/bin/bash
# Before/after the import-loop refactor (issue 26): dlht and dlht-batch, get and insdel,
# 2^25 keys, 1 and 8 threads, A B A B (before = 140bdf8, after = 0f53482).
B=$(cd "$(dirname "$0")" && pwd)
lscpu | grep -E "Model name|^CPU\(s\)"
for round in 1 2; do
  for v in before after; do
    echo "### round $round $v"
    "$B/dlht-bench-$v" baseline --systems dlht,dlht-batch --workloads get,insdel --threads 1,8 \
      --keys-log2 25 --rounds 1 --seconds 0.5 --out "$OUT/$v-$round" 2>&1 | grep -E "^(get|insdel|lines) "
  done
done
