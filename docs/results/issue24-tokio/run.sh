#!/usr/bin/env bash
# Issue 24: dlht-server's mio event loop against the same cache on tokio
# (crates/dlht-server/examples/tokio_server.rs), on a 2-core machine:
# server on core 0 with -t 1, memcaslap on core 1. Each run starts a fresh
# server. Servers interleave within every round: mio, tokio (multi-thread
# runtime, 1 worker), tokio-ct (--current-thread-per-core, 1 runtime).
#
#   CARGO_TARGET_DIR=/tmp/tokioC-target cargo build --release -p dlht-server --example tokio_server
#   CARGO_TARGET_DIR=/tmp/tokioC-target cargo build --release -p dlht-server
#   bash docs/results/issue24-tokio/run.sh > raw.log
set -u
T=${CARGO_TARGET_DIR:-/tmp/tokioC-target}/release
PORT=${PORT:-11411}
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-8s}
# name|memcaslap arguments (default get:set 9:1, 32-byte values; -d: keys per multi-get)
LOADS=("c16|-T 1 -c 16 -X 32" "c64|-T 1 -c 64 -X 32" "c16-mget16|-T 1 -c 16 -X 32 -d 16"
       "c16-fixed40k|-T 1 -c 16 -X 32 -P 40k") # meant as a fixed offered load, but this memcaslap ignores -P: it ran unthrottled
SERVERS=(mio tokio tokio-ct)

WAIT_LEFT=${WAIT_LEFT:-1200} # seconds of waiting allowed, all rounds together
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
others() { pgrep -fa 'memcaslap|dlht-bench|memcached -u' | tr '\n' ';'; }
idle_enough() { # under 10% of the machine busy over 2 s (no builds running)
  local b0 b1
  b0=$(busy); sleep 2; b1=$(busy)
  [ $((b1 - b0)) -lt $((2 * 2 * $(getconf CLK_TCK) / 10)) ]
}
wait_clear() { # another benchmark (or build) on this machine: poll every 10 s
  while pgrep -f 'memcaslap|dlht-bench|memcached -u' > /dev/null || ! idle_enough; do
    if [ "$WAIT_LEFT" -le 0 ]; then
      echo "WARNING: machine still busy ($(others)); measuring anyway"
      return
    fi
    sleep 10; WAIT_LEFT=$((WAIT_LEFT - 12))
  done
  echo "machine clear at $(date +%T)"
}

start_server() {
  case $1 in
    mio) taskset -c 0 "$T/dlht-server" -p "$PORT" -t 1 -m 1024 & ;;
    tokio) taskset -c 0 "$T/examples/tokio_server" -p "$PORT" -t 1 -m 1024 & ;;
    tokio-ct) taskset -c 0 "$T/examples/tokio_server" -p "$PORT" -t 1 -m 1024 --current-thread-per-core & ;;
  esac
  SERVER=$!
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2> /dev/null && return 0
    sleep 0.1
  done
  echo "server $1 did not start"; exit 1
}

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# A measurement round is one load on the three servers back to back; the
# machine is checked (and waited for) before each, and again after each run.
for round in $(seq "${FIRST_ROUND:-1}" "$ROUNDS"); do
  for load in "${LOADS[@]}"; do
    name=${load%%|*}; args=${load#*|}
    wait_clear
    for srv in "${SERVERS[@]}"; do
      start_server "$srv"
      echo "=== round=$round load=$name server=$srv date=$(date +%T)"
      echo "+ taskset -c 1 memcaslap -s 127.0.0.1:$PORT $args -t $DUR -S $DUR"
      s0=$(ticks "$SERVER"); b0=$(busy)
      # shellcheck disable=SC2086
      TIMEFORMAT="client_cpu real=%R user=%U sys=%S"
      time taskset -c 1 memcaslap -s "127.0.0.1:$PORT" $args -t "$DUR" -S "$DUR" 2>&1
      s1=$(ticks "$SERVER"); b1=$(busy)
      # Server CPU during the run, and all busy CPU on the machine (both
      # cores; less the server and memcaslap, it is what else ran).
      echo "server_run_ticks=$((s1 - s0)) machine_busy_ticks=$((b1 - b0)) clk_tck=$(getconf CLK_TCK)"
      echo "others_after_run=[$(others)]"
      kill "$SERVER"; wait "$SERVER" 2> /dev/null
    done
  done
done
