#!/bin/bash
# A B A B: memcached 1.6.18 vs dlht-server, both -t 1 on core 0, memcaslap on core 1.
run() { # name cmd...
  local name=$1; shift
  taskset -c 0 "$@" > /dev/null 2>&1 &
  local pid=$!
  sleep 0.5
  local r=$(taskset -c 1 memcaslap -s 127.0.0.1:22400 -T 1 -c 16 -t 8s -X 32 $EXTRA 2>&1 | grep -E "^Run time" | tail -1)
  kill $pid; wait $pid 2>/dev/null
  echo "$name: $r"
}
for round in 1 2; do
  run memcached memcached -u root -p 22400 -l 127.0.0.1 -U 0 -t 1 -m 1024
  run dlht-server /work/main/target/release/dlht-server -p 22400 -t 1 -m 1024
done
