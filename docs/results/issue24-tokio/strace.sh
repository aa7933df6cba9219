#!/usr/bin/env bash
# Issue 24: syscalls per operation of each server under the c16 load (strace -c -f, 3 s
# window inside an 8 s memcaslap run; strace slows the server, counts stay).
T=/tmp/tokioC-target/release; PORT=11412
ops() { exec 3<>/dev/tcp/127.0.0.1/$PORT; printf 'stats\r\nquit\r\n' >&3; awk '/cmd_get|cmd_set/{s+=$3} END{print s}' RS='\r\n' <&3; exec 3<&-; }
for srv in mio tokio tokio-ct; do
  case $srv in
    mio) taskset -c 0 $T/dlht-server -p $PORT -t 1 -m 1024 & ;;
    tokio) taskset -c 0 $T/examples/tokio_server -p $PORT -t 1 -m 1024 & ;;
    tokio-ct) taskset -c 0 $T/examples/tokio_server -p $PORT -t 1 -m 1024 --current-thread-per-core & ;;
  esac
  S=$!; sleep 0.5
  taskset -c 1 memcaslap -s 127.0.0.1:$PORT -T 1 -c 16 -X 32 -t 8s > /dev/null 2>&1 & M=$!
  sleep 2; o0=$(ops)
  timeout -s INT 3 strace -c -f -p $S -o /tmp/tokioC-strace-$srv.txt 2>/dev/null
  o1=$(ops)
  wait $M; kill $S; wait $S 2>/dev/null
  echo "=== $srv: ops in window $((o1 - o0))"
  awk -v ops=$((o1 - o0)) 'NR>2 && $4+0>0 {e = (NF==6) ? $5 : 0; printf "  %-14s calls %8d (errors %7d)  per op %.3f\n", $NF, $4, e, $4/ops}' /tmp/tokioC-strace-$srv.txt
done
