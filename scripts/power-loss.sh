#!/usr/bin/env bash
# Power-loss study under LazyFS (opt-in; not part of scripts/test.sh).
#
# LazyFS (github.com/dsrhaslab/lazyfs, the FUSE file system Jepsen uses)
# keeps every write in its own cache until an fsync of that file, and drops
# the cache on `lazyfs::clear-cache` (or dies with it on `lazyfs::crash`):
# what is on its backing directory afterwards is what a disk that honours
# flushes holds after a power loss. The maps' files are mapped MAP_SHARED
# from the LazyFS mount; a preflight checks that fdatasync and msync of a
# shared mapping reach LazyFS and that the fault drops the rest.
#
# Each round (per kind: filemap, bytemap, server):
#   the writer (crates/dlht/examples/power_loss.rs, 2 threads) runs 0.5-3 s
#   from its open in Durability::Sync (even rounds every=0, odd rounds a
#   periodic 1-20 ms), recording each batch durable() acknowledged in an
#   ack file outside the mount; every third round LazyFS also writes what it
#   holds to disk partway (cache-checkpoint: the kernel's writeback);
#   kill -9; LazyFS clear-cache; unmount (which drops the kernel's page
#   cache of the mount: it still holds the unsynced pages) and mount again;
#   the checker opens the map and checks every acknowledged write.
# A fresh map every POWER_LOSS_FRESH_EVERY rounds (and after a failure).
# Then targeted rounds, where LazyFS itself is killed at a protocol point:
# right after the fsync of the first file a group commit syncs (at the first
# commit after an open, and in steady state), and right after a grow deletes
# its old index file.
# The server runs `dlht-server -e DIR --durable` on the mount: a client sets
# keys in pipelined batches of 16, each acknowledged once all 16 are
# STORED (sent only after the changes are on disk); after the fault the
# server is restarted and every acknowledged write checked.
#
# Environment:
#   POWER_LOSS_ROUNDS=30        random-time rounds per kind
#   POWER_LOSS_TARGETED=3       rounds per targeted crash point (0: none)
#   POWER_LOSS_KINDS="filemap bytemap server"
#   POWER_LOSS_FRESH_EVERY=5    a fresh map every N rounds
#   POWER_LOSS_SEED=<n>         base seed (default: random; recorded)
#   POWER_LOSS_OUT=docs/results/power-loss   logs: run.txt, rounds.tsv, <kind>.log
#   POWER_LOSS_KEEP=3           failing rounds' directories kept per kind (in
#                               /tmp/dlht-power-loss-failures.*, for `check`)
#   POWER_LOSS_ACCEPT_DOCUMENTED=1  byte map: a lost write whose key a later
#                               unacknowledged write changed (DESIGN,
#                               "Persistent byte maps") does not fail the run
#   POWER_LOSS_GIT_REV          the commit, when run from a tree without .git
#   LAZYFS_DIR=/work/lazyfs-src LazyFS's source (git clone outside the repo);
#                               built there if lazyfs/build/lazyfs is missing
#   LAZYFS_CACHE=768mb          LazyFS's cache (no eviction)
#   CARGO_TARGET_DIR            as for cargo
# Every process started is killed and the mount undone on exit, however the
# script ends. Exit status: 0 if no acknowledged write was lost, no value
# was torn or wrong and every map and server came back in every round, 1
# otherwise, 2 if the harness itself could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

ROUNDS=${POWER_LOSS_ROUNDS:-30}
TARGETED=${POWER_LOSS_TARGETED:-3}
KINDS=${POWER_LOSS_KINDS:-"filemap bytemap server"}
FRESH_EVERY=${POWER_LOSS_FRESH_EVERY:-5}
SEED_BASE=${POWER_LOSS_SEED:-$(( (RANDOM * 32768 + RANDOM) % 900000 + 1000 ))}
OUT=${POWER_LOSS_OUT:-docs/results/power-loss}
ACCEPT_DOCUMENTED=${POWER_LOSS_ACCEPT_DOCUMENTED:-0}
LAZYFS_DIR=${LAZYFS_DIR:-/work/lazyfs-src}
LAZYFS_CACHE=${LAZYFS_CACHE:-768mb}
RANDOM=$SEED_BASE

die() { echo "power-loss: $*" >&2; exit 2; }
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/run.txt"; }

# ---- LazyFS: locate or build (outside the repo) -----------------------------
LAZYFS_BIN=$LAZYFS_DIR/lazyfs/build/lazyfs
build_lazyfs() {
  [ -d "$LAZYFS_DIR/lazyfs" ] && [ -d "$LAZYFS_DIR/libs/libpcache" ] ||
    die "no LazyFS source in $LAZYFS_DIR (git clone https://github.com/dsrhaslab/lazyfs $LAZYFS_DIR)"
  local pkgs=(fuse3 libfuse3-dev cmake g++ pkg-config libspdlog-dev libtoml11-dev) need=() p
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  if [ "${#need[@]}" -gt 0 ]; then
    echo "installing ${need[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null ||
      die "could not install ${need[*]}"
  fi
  # LazyFS's CMake files fetch toml11 and spdlog from GitHub at configure
  # time; use Debian's (the same versions: toml11 3.7.1, spdlog 1.10.0), so
  # the build needs no network.
  perl -0pi -e 's/include\(FetchContent\).*?set_target_properties\(spdlog PROPERTIES POSITION_INDEPENDENT_CODE ON\)/find_package(toml11 REQUIRED)\nfind_package(spdlog REQUIRED)/s; s/target_link_libraries\(pcache toml11::toml11 spdlog\)/target_link_libraries(pcache toml11::toml11 spdlog::spdlog)/' \
    "$LAZYFS_DIR/libs/libpcache/CMakeLists.txt"
  grep -q 'find_package(spdlog REQUIRED)' "$LAZYFS_DIR/lazyfs/CMakeLists.txt" ||
    perl -0pi -e 's/find_package\(Threads REQUIRED\)/find_package(Threads REQUIRED)\nfind_package(spdlog REQUIRED)/; s/Threads::Threads libpcache.so\)/Threads::Threads libpcache.so spdlog::spdlog)/' \
      "$LAZYFS_DIR/lazyfs/CMakeLists.txt"
  (cd "$LAZYFS_DIR/libs/libpcache" && ./build.sh) >"$LAZYFS_DIR/build-pcache.log" 2>&1 ||
    die "libpcache build failed: $LAZYFS_DIR/build-pcache.log"
  (cd "$LAZYFS_DIR/lazyfs" && ./build.sh) >"$LAZYFS_DIR/build-lazyfs.log" 2>&1 ||
    die "lazyfs build failed: $LAZYFS_DIR/build-lazyfs.log"
}
[ -x "$LAZYFS_BIN" ] || build_lazyfs
[ -x "$LAZYFS_BIN" ] || die "no $LAZYFS_BIN after the build"
command -v fusermount3 >/dev/null || die "fusermount3 missing (Debian: fuse3)"
[ -e /dev/fuse ] || die "/dev/fuse missing: FUSE cannot mount here"

# ---- the writer/checker and the server --------------------------------------
export CARGO_PROFILE_RELEASE_LTO=${CARGO_PROFILE_RELEASE_LTO:-off}
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-16}
BUILD_LOG=$(mktemp /tmp/dlht-power-loss-build.XXXXXX)
cargo build --release -p dlht --example power_loss >"$BUILD_LOG" 2>&1 ||
  { cat "$BUILD_LOG" >&2; die "building the power_loss example failed"; }
case " $KINDS " in *" server "*)
  cargo build --release -p dlht-server >>"$BUILD_LOG" 2>&1 || { cat "$BUILD_LOG" >&2; die "building dlht-server failed"; } ;;
esac
rm -f "$BUILD_LOG"
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
PL=$TARGET/release/examples/power_loss
SERVER=$TARGET/release/dlht-server
[ -x "$PL" ] || die "no $PL"

# ---- work area, and cleaning up whatever happens -----------------------------
WORK=$(mktemp -d /tmp/dlht-power-loss.XXXXXX) || die "mktemp"
MNT=$WORK/mnt ROOT=$WORK/root ACKS=$WORK/acks
case $OUT in /*) ;; *) OUT=$REPO/$OUT ;; esac
mkdir -p "$MNT" "$ROOT" "$ACKS" "$OUT"
FAILED_DIRS=/tmp/dlht-power-loss-failures.$(basename "$WORK" | cut -d. -f2)
LAZY_PID="" DONE_PID="" WRITER_PID="" SERVER_PID="" MOUNTS=0
: >"$OUT/run.txt"
: >"$OUT/rounds.tsv"

cleanup() {
  local p
  for p in $WRITER_PID $SERVER_PID; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  WRITER_PID="" SERVER_PID=""
  if [ -n "${MNT:-}" ] && awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; then
    fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null
  fi
  for p in $LAZY_PID $DONE_PID; do kill -9 "$p" 2>/dev/null; { wait "$p"; } 2>/dev/null; done
  LAZY_PID="" DONE_PID=""
  [ -n "${WORK:-}" ] && [ -d "$WORK" ] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "power-loss: interrupted" >&2; exit 2' INT TERM

# ---- mounting, faults ---------------------------------------------------------
mount_lazyfs() {
  MOUNTS=$((MOUNTS + 1))
  CFG=$WORK/lazyfs.$MOUNTS.toml FIFO=$WORK/faults.$MOUNTS.fifo DONE=$WORK/done.$MOUNTS.fifo
  cat >"$CFG" <<EOF
[faults]
fifo_path="$FIFO"
fifo_path_completed="$DONE"
[cache]
apply_eviction=false
[cache.simple]
custom_size="$LAZYFS_CACHE"
blocks_per_page=1
[filesystem]
log_all_operations=false
logfile=""
EOF
  "$LAZYFS_BIN" "$MNT" --config-path "$CFG" -o allow_other -o modules=subdir -o subdir="$ROOT" -f \
    >"$WORK/lazyfs.$MOUNTS.out" 2>&1 &
  LAZY_PID=$!
  local i
  for i in $(seq 300); do
    if is_mounted && [ -p "$FIFO" ] && [ -p "$DONE" ]; then
      # LazyFS's fault thread opens the completion fifo before it reads a
      # command, and writes to it after each clear-cache: keep it read.
      cat "$DONE" >"$WORK/done.$MOUNTS.txt" &
      DONE_PID=$!
      return 0
    fi
    alive "$LAZY_PID" || break
    sleep 0.1
  done
  cat "$WORK/lazyfs.$MOUNTS.out" >&2
  die "LazyFS did not mount on $MNT"
}

# In /proc/mounts (a mount whose LazyFS died is, though stat fails on it).
is_mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

umount_lazyfs() {
  local i
  if is_mounted; then
    for i in 1 2 3 4 5; do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.3; done
    is_mounted && fusermount3 -u -z "$MNT"
  fi
  for i in $(seq 50); do alive "$LAZY_PID" || break; sleep 0.1; done
  kill -9 "$LAZY_PID" 2>/dev/null
  { wait "$LAZY_PID"; } 2>/dev/null # LazyFS aborts at exit ("terminate called ...")
  LAZY_PID=""
  [ -n "$DONE_PID" ] && { kill "$DONE_PID" 2>/dev/null; wait "$DONE_PID" 2>/dev/null; }
  DONE_PID=""
}

# A process is running (not gone, not a zombie).
alive() {
  local st
  st=$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ]
}

# Send a command to LazyFS's fault fifo; for clear-cache, wait until LazyFS
# reports it done (on the completion fifo).
lazyfs_cmd() {
  local before i
  before=$(grep -c "finished::clear-cache" "$WORK/done.$MOUNTS.txt")
  timeout 10 bash -c 'echo "$1" >"$2"' _ "$1" "$FIFO" || return 1
  # One command per read of the fifo (LazyFS reads it in chunks).
  sleep 0.2
  [ "$1" = "lazyfs::clear-cache" ] || return 0
  for i in $(seq 200); do
    [ "$(grep -c "finished::clear-cache" "$WORK/done.$MOUNTS.txt")" -gt "$before" ] && return 0
    sleep 0.1
  done
  return 1
}

# The power loss: the process is dead (its dirty mapped pages written to
# LazyFS at exit), LazyFS drops everything not fsynced, and the unmount
# drops the kernel's page cache for the mount (which still holds them).
power_loss() {
  lazyfs_cmd "lazyfs::clear-cache" || die "clear-cache was not acknowledged by LazyFS"
  umount_lazyfs
  mount_lazyfs
}

stop_writer() {
  [ -n "$WRITER_PID" ] || return 0
  kill -9 "$WRITER_PID" 2>/dev/null
  wait "$WRITER_PID" 2>/dev/null
  WRITER_PID=""
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -"${1:-9}" "$SERVER_PID" 2>/dev/null
  local i
  for i in $(seq 50); do alive "$SERVER_PID" || break; sleep 0.1; done
  kill -9 "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""
}

# Start dlht-server -e on $1; sets PORT. Fails if it does not listen.
start_server() {
  local dir=$1 logf=$2 try i
  for try in 1 2 3 4 5; do
    PORT=$((20000 + RANDOM % 30000))
    "$SERVER" -p "$PORT" -l 127.0.0.1 -t 2 -m 32 -e "$dir" --durable >>"$logf" 2>&1 &
    SERVER_PID=$!
    for i in $(seq 100); do
      # Serving (it listens before it opens the cache, then may refuse it).
      if (exec 3<>"/dev/tcp/127.0.0.1/$PORT" && printf 'version\r\n' >&3 && read -r -t 5 l <&3 &&
        [[ $l == VERSION* ]]) 2>/dev/null; then
        return 0
      fi
      alive "$SERVER_PID" || break
      sleep 0.1
    done
    wait "$SERVER_PID" 2>/dev/null
    SERVER_PID=""
    grep -qi "address\|in use\|port" <(tail -2 "$logf") || return 1
  done
  return 1
}

# ---- rounds -------------------------------------------------------------------
FAIL=0
declare -A EPOCH_DIR EPOCH_ACK KEPT LAST_DIR

# Keep a failing round's backing directory and ack file for reproduction
# (at most POWER_LOSS_KEEP per kind; they are what the check found, after
# its own open, which syncs nothing).
keep_failure() {
  local kind=$1 round=$2 dir=$3 ack=$4
  [ "${KEPT[$kind]:-0}" -le "${POWER_LOSS_KEEP:-3}" ] || { echo "(not kept: POWER_LOSS_KEEP reached)"; return; }
  mkdir -p "$FAILED_DIRS"
  local dest=$FAILED_DIRS/$kind-round$round
  cp -a --sparse=always "$ROOT/$dir" "$dest.dir" 2>/dev/null
  cp "$ack" "$dest.ack" 2>/dev/null
  cp "$ack.seen" "$dest.ack.seen" 2>/dev/null
  echo "$dest.dir, $dest.ack"
}

sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

# One round.
#   $1 kind, $2 round number
#   $3 fault: random (kill -9 at a random time, then clear-cache) or
#      crash:<op>:<from|to>=<regex>[::<from|to>=<regex>]:<first|running>
#      (LazyFS kills itself right after that operation: armed before the
#      writer starts, or once it has run)
#   $4 map: auto (a fresh one every POWER_LOSS_FRESH_EVERY rounds) | fresh | keep
#   $5 every_ms (default: 0 on even rounds, 1-20 on odd ones)
round() {
  local kind=$1 r=$2 fault=$3 policy=${4:-auto} seed=$((SEED_BASE + $2)) every=0 run_ms rc=0
  local logf=$OUT/$kind.log fresh=0 note="" checkpoint=0 i
  [ $((r % 2)) -eq 1 ] && every=$((1 + RANDOM % 20))
  [ -n "${5:-}" ] && every=$5
  run_ms=$((500 + RANDOM % 2501))
  # Writeback: LazyFS writes what the kernel has sent it so far to its
  # backing files (no fsync) partway through the run — odd server rounds
  # (the server never syncs: without it nothing would reach the disk), every
  # third random round of the maps. The clear-cache at the end then drops
  # only what came after.
  if { [ "$kind" = server ] && [ $((r % 2)) -eq 1 ]; } || { [ "$fault" = random ] && [ $((r % 3)) -eq 0 ]; }; then
    checkpoint=$((run_ms * (30 + RANDOM % 41) / 100))
  fi
  local prep=0
  if [ -z "${EPOCH_DIR[$kind]:-}" ] || [ "$policy" = fresh ] ||
    { [ "$policy" = auto ] && [ $(((r - 1) % FRESH_EVERY)) -eq 0 ]; }; then
    # The last map of this kind is done with (a failed one was kept).
    [ -n "${LAST_DIR[$kind]:-}" ] && { rm -rf "$MNT/${LAST_DIR[$kind]}" 2>/dev/null || rm -rf "${ROOT:?}/${LAST_DIR[$kind]}"; }
    LAST_DIR[$kind]=$kind.$r
    EPOCH_DIR[$kind]=$kind.$r
    EPOCH_ACK[$kind]=$ACKS/$kind.$r.ack
    fresh=1
    # A fault that needs a map already there gets one: written for 1 s,
    # killed, and all of it written to LazyFS's backing files (checkpoint).
    [ "$policy" = keep ] && prep=1
  fi
  local dir=${EPOCH_DIR[$kind]} ack=${EPOCH_ACK[$kind]} acked_before
  acked_before=$(grep -c '^A ' "$ack" 2>/dev/null)
  {
    echo
    echo "=== $kind round $r fault=$fault seed=$seed every_ms=$every run_ms=$run_ms checkpoint_ms=$checkpoint map=$dir fresh=$fresh"
  } >>"$logf"
  # LazyFS alive and mounted (a crash fault, or LazyFS's own crash, may
  # have taken it down).
  if ! alive "${LAZY_PID:-0}" || ! is_mounted; then
    echo "LazyFS was down before the round: mounted again" >>"$logf"
    umount_lazyfs
    mount_lazyfs
  fi
  if [ "$prep" = 1 ]; then
    "$PL" write "$MNT/${EPOCH_DIR[$kind]}" "$kind" "$((seed - 1))" --ack "${EPOCH_ACK[$kind]}" --max-secs 60 \
      >>"$logf" 2>&1 &
    WRITER_PID=$!
    for i in $(seq 300); do grep -q "^O " "${EPOCH_ACK[$kind]}" 2>/dev/null && break; sleep 0.1; done
    sleep 1
    stop_writer
    lazyfs_cmd "lazyfs::cache-checkpoint" || die "checkpoint command"
    sleep 1
    echo "prepared the map: 1 s of writes (seed $((seed - 1))), killed, checkpointed" >>"$logf"
  fi
  local crash_cmd="" when=""
  if [ "${fault%%:*}" = crash ]; then
    local op rgx
    op=$(cut -d: -f2 <<<"$fault")
    when=${fault##*:}
    rgx=${fault#crash:"$op":}
    rgx=${rgx%:"$when"}
    crash_cmd="lazyfs::crash::timing=after::op=$op::$(sed 's/\(from\|to\)=/\1_rgx=/g' <<<"$rgx")"
  fi
  if [ -n "$crash_cmd" ] && [ "$when" != running ]; then lazyfs_cmd "$crash_cmd" || die "crash command"; fi
  if [ "$kind" = server ]; then
    start_server "$MNT/$dir" "$logf" || {
      echo "SERVER-START-FAILED before the round" >>"$logf"
      FAIL=1
      printf '%s\t%s\t%s\t\t\t\t\t\t\t\t\t\t\t\tSTART-FAILED\t\n' "$kind" "$r" "$fault" >>"$OUT/rounds.tsv"
      log "$kind round $r: START-FAILED"
      EPOCH_DIR[$kind]=""
      return
    }
    "$PL" server-write "127.0.0.1:$PORT" "$seed" --ack "$ack" --max-secs 60 >>"$logf" 2>&1 &
  else
    "$PL" write "$MNT/$dir" "$kind" "$seed" --ack "$ack" --every-ms "$every" --threads 2 --max-secs 60 \
      >>"$logf" 2>&1 &
  fi
  WRITER_PID=$!
  local early=""
  # The run time counts from the open (a fresh byte map's takes about a
  # second under LazyFS: its heap file's length is written as zeros).
  for i in $(seq 300); do
    grep -q "^O $seed\$" "$ack" 2>/dev/null && break
    alive "$WRITER_PID" || break
    sleep 0.1
  done
  if [ "$checkpoint" -gt 0 ]; then
    sleep_ms "$checkpoint"
    lazyfs_cmd "lazyfs::cache-checkpoint" || die "checkpoint command"
    echo "checkpoint at ${checkpoint} ms" >>"$logf"
    sleep_ms $((run_ms - checkpoint))
  else
    sleep_ms "$run_ms"
  fi
  if [ -n "$crash_cmd" ]; then
    [ "$when" = running ] && { lazyfs_cmd "$crash_cmd" || die "crash command"; }
    # Wait (at most 15 s) for LazyFS to crash itself at the point.
    for i in $(seq 150); do alive "$LAZY_PID" || break; sleep 0.1; done
    if alive "$LAZY_PID"; then
      note="crash point not reached in 15 s; clear-cache instead"
    else
      note="LazyFS crashed at the point"
    fi
  fi
  alive "$WRITER_PID" || early="writer exited before the fault"
  local meta=$WORK/meta.saved
  rm -f "$meta"
  if [ "$kind" = server ]; then
    # The server's meta file as it was (read through LazyFS), for the
    # second start below.
    cp "$MNT/$dir/dlht-server.meta" "$meta" 2>/dev/null
    stop_server 9
  fi
  stop_writer
  # Acknowledged: this round's, and all this map's (what the check checks).
  local acked
  acked=$(grep -c '^A ' "$ack" 2>/dev/null)
  if [ -n "$crash_cmd" ] && ! alive "$LAZY_PID"; then
    umount_lazyfs
    mount_lazyfs
  else
    power_loss
  fi
  [ -n "$note" ] && echo "fault: $note" >>"$logf"
  if [ -n "$early" ] && [ -z "$crash_cmd" ]; then
    echo "ERROR: $early" >>"$logf"
    note="${note:+$note; }$early"
    FAIL=1
  fi
  local out restart=""
  if [ "$kind" = server ]; then
    if start_server "$MNT/$dir" "$logf"; then
      out=$("$PL" server-check "127.0.0.1:$PORT" "$ack" 2>&1)
      rc=$?
      stop_server 15
    else
      restart="restart refused: $(grep 'dlht-server:' "$logf" | tail -1)"
      out="SERVER-RESTART-FAILED: $restart"
      rc=2
      # A meta file the power loss emptied (it is written without fsync):
      # put back the one the server had written, to check its items anyway.
      if grep -q "dlht-server.meta" <<<"$restart" && [ -s "$meta" ]; then
        cp "$meta" "$MNT/$dir/dlht-server.meta"
        if start_server "$MNT/$dir" "$logf"; then
          out="$out"$'\n'"meta file put back by the harness; items checked:"$'\n'"$("$PL" server-check "127.0.0.1:$PORT" "$ack" 2>&1)"
          stop_server 15
        else
          out="$out"$'\n'"meta file put back by the harness; still refused: $(grep 'dlht-server:' "$logf" | tail -1)"
        fi
      fi
      note="${note:+$note; }$restart"
    fi
  else
    out=$(timeout 120 "$PL" check "$MNT/$dir" "$kind" "$ack" 2>&1)
    rc=$?
  fi
  echo "$out" >>"$logf"
  local res
  res=$(grep '^RESULT' <<<"$out" | tail -1)
  local lost changed torn wrong damaged keys
  keys=$(sed -n 's/.* acked_keys=\([0-9]*\).*/\1/p' <<<"$res")
  lost=$(sed -n 's/.* lost=\([0-9]*\).*/\1/p' <<<"$res")
  changed=$(sed -n 's/.* lost_changed=\([0-9]*\).*/\1/p' <<<"$res")
  torn=$(sed -n 's/.* torn=\([0-9]*\).*/\1/p' <<<"$res")
  wrong=$(sed -n 's/.* wrong=\([0-9]*\).*/\1/p' <<<"$res")
  damaged=$(sed -n 's/.* damaged=\([0-9]*\).*/\1/p' <<<"$res")
  local verdict=ok
  if [ "$rc" -eq 2 ]; then
    verdict=OPEN-FAILED
    [ "$kind" = server ] && verdict=RESTART-FAILED
    # What the map would not open with (or the server's refusal).
    local why
    why=$(grep -m1 -o 'OPEN-FAILED.*(Corrupt\|OPEN-FAILED.*(Io\|OPEN-FAILED[^(]*' <<<"$out" | head -1)
    [ -n "$why" ] && note="${note:+$note; }$why"
  elif [ "$rc" -ne 0 ]; then
    if [ "${lost:-0}" -eq 0 ] && [ "${torn:-0}" -eq 0 ] && [ "${wrong:-0}" -eq 0 ] &&
      [ "$ACCEPT_DOCUMENTED" = 1 ] && [ "$kind" != filemap ]; then
      verdict=documented
    else
      verdict=FAILED
    fi
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$r" "$fault" "$every" \
    "$run_ms" "$checkpoint" "$((${acked:-0} - ${acked_before:-0}))" "${acked:-0}" "${keys:--}" "${lost:--}" \
    "${changed:--}" "${torn:--}" "${wrong:--}" "${damaged:--}" "$verdict" "$note" >>"$OUT/rounds.tsv"
  log "$kind round $r ($fault, every ${every} ms, ${run_ms} ms$([ "$checkpoint" -gt 0 ] && echo ", checkpoint at $checkpoint ms")): $verdict acked=$((${acked:-0} - ${acked_before:-0})) (map: ${acked:-0}) lost=${lost:--} lost_changed=${changed:--} torn=${torn:--} wrong=${wrong:--} damaged=${damaged:--}${note:+ [$note]}"
  if [ "$verdict" != ok ] && [ "$verdict" != documented ]; then
    FAIL=1
    KEPT[$kind]=$((${KEPT[$kind]:-0} + 1))
    log "  kept: $(keep_failure "$kind" "$r" "$dir" "$ack")"
    # Go on with a fresh map: a broken one would fail every later round.
    EPOCH_DIR[$kind]=""
  fi
}

T0=$SECONDS
{
  echo "# power-loss run"
  echo "command: POWER_LOSS_ROUNDS=$ROUNDS POWER_LOSS_TARGETED=$TARGETED POWER_LOSS_KINDS=\"$KINDS\" POWER_LOSS_FRESH_EVERY=$FRESH_EVERY POWER_LOSS_SEED=$SEED_BASE LAZYFS_CACHE=$LAZYFS_CACHE bash scripts/power-loss.sh"
  # (From a `git archive` of a commit, name it in POWER_LOSS_GIT_REV.)
  if git rev-parse HEAD >/dev/null 2>&1; then
    echo "git: $(git rev-parse HEAD)$(git diff --quiet HEAD -- crates scripts/power-loss.sh || echo ' (with uncommitted changes)')"
  else
    echo "git: ${POWER_LOSS_GIT_REV:-unknown} (a source tree without .git)"
  fi
  lazyfs_rev=$(git -C "$LAZYFS_DIR" rev-parse HEAD 2>/dev/null || cat "$LAZYFS_DIR/REVISION" 2>/dev/null || echo unknown)
  echo "lazyfs: $LAZYFS_DIR (revision $lazyfs_rev; CMake files use Debian's toml11 and spdlog), cache $LAZYFS_CACHE"
  echo "kernel: $(uname -r); $(nproc) cpus"
  echo "date: $(date -u +%FT%TZ)"
} >>"$OUT/run.txt"
cat "$OUT/run.txt"
# acked_new: batches durable() acknowledged in the round; acked_checked: all
# of the map's acknowledged batches (the check checks every one), and the
# keys whose last acknowledged value it checked.
printf 'kind\tround\tfault\tevery_ms\trun_ms\tcheckpoint_ms\tacked_new\tacked_checked\tacked_keys_checked\tlost\tlost_changed\ttorn\twrong\tdamaged\tverdict\tnote\n' >"$OUT/rounds.tsv"

mount_lazyfs

# ---- preflight: is LazyFS a power loss for shared mappings? -------------------
# A file mapped MAP_SHARED on the mount: page 0 written and fdatasync'ed,
# page 1 written and msync'ed, page 2 written and never synced, then page 0
# written again; the process is killed. After the fault (clear-cache,
# unmount, mount) pages 0 and 1 must hold what was synced, page 2 zeros.
cat >"$WORK/probe.c" <<'EOF_C'
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    if (!strcmp(argv[1], "write")) {
        int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
        if (fd < 0 || ftruncate(fd, 4 * 4096) || fsync(fd)) { perror("setup"); return 1; }
        char *m = mmap(0, 4 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) { perror("mmap"); return 1; }
        memset(m, 'A', 4096);
        if (fdatasync(fd)) { perror("fdatasync"); return 1; }
        memset(m + 4096, 'B', 4096);
        if (msync(m + 4096, 4096, MS_SYNC)) { perror("msync"); return 1; }
        memset(m + 2 * 4096, 'C', 4096);
        memset(m, 'D', 16);
        kill(getpid(), SIGKILL);
    }
    int fd = open(argv[2], O_RDONLY);
    char b[4 * 4096];
    if (fd < 0 || pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b) { perror("read"); return 1; }
    printf("page0=%c%c page1=%c page2=%d page3=%d\n", b[0], b[100], b[4096], b[2 * 4096], b[3 * 4096]);
    return !(b[0] == 'A' && b[100] == 'A' && b[4096] == 'B' && b[2 * 4096] == 0 && b[3 * 4096] == 0);
}
EOF_C
if command -v cc >/dev/null && cc -O1 -o "$WORK/probe" "$WORK/probe.c"; then
  "$WORK/probe" write "$MNT/probe" 2>/dev/null &
  { wait $!; } 2>/dev/null
  before=$("$WORK/probe" check "$MNT/probe")
  power_loss
  if after=$("$WORK/probe" check "$MNT/probe"); then
    log "preflight: mmap on LazyFS, process killed: $before; after clear-cache + remount: $after (fdatasync'ed and msync'ed pages kept, the rest gone): OK"
  else
    log "preflight FAILED: before the fault $before, after it $after (expected page0=AA page1=B page2=0 page3=0)"
    exit 2
  fi
  rm -f "$MNT/probe"
else
  log "preflight skipped: no C compiler"
fi

for kind in $KINDS; do
  : >"$OUT/$kind.log"
  EPOCH_DIR[$kind]=""
  for r in $(seq "$ROUNDS"); do round "$kind" "$r" random; done
  if [ "$TARGETED" -gt 0 ] && [ "$kind" != server ]; then
    first=map.dlht
    [ "$kind" = bytemap ] && first=heap.dlht
    n=$ROUNDS
    for t in $(seq "$TARGETED"); do
      # An existing map (a round first if the last failed): LazyFS dies
      # right after the first file of the first group commit after the open
      # is synced (the others are not).
      if [ -z "${EPOCH_DIR[$kind]}" ]; then n=$((n + 1)); round "$kind" "$n" random fresh; fi
      # (every 0: a periodic syncer may run its first sync before the heap
      # is registered, syncing the index's files before the heap's.)
      n=$((n + 1)); round "$kind" "$n" "crash:fsync:from=/$first:first" keep 0
      # The same while the writer runs (a group commit in steady state).
      if [ -z "${EPOCH_DIR[$kind]}" ]; then n=$((n + 1)); round "$kind" "$n" random fresh; fi
      n=$((n + 1)); round "$kind" "$n" "crash:fsync:from=/$first:running" keep
      # A fresh map: LazyFS dies right after a grow deletes its old index
      # file (FUSE turns the unlink of a file still open into a rename to
      # .fuse_hidden*, which LazyFS passes through at once).
      # (LazyFS checks a rename's to_rgx only when from_rgx is given too.)
      # Periodic group commits (20 ms), so that a sync may or may not have
      # followed the grow's switch to the new index when its old file goes.
      n=$((n + 1)); round "$kind" "$n" "crash:rename:from=index::to=fuse_hidden:first" fresh 20
    done
  fi
done
umount_lazyfs

{
  echo
  echo "## totals (random rounds and targeted ones; rounds.tsv has each)"
  awk -F'\t' 'NR > 1 {
      f = $3; sub(/:from=index::to=/, ":to=", f)
      k = $1 " " f; n[k]++; a[k] += $7; ck[k] += $8; ks[k] += $9
      l[k] += $10; c[k] += $11; t[k] += $12; w[k] += $13; d[k] += $14
      v[k] = v[k] (v[k] == "" ? "" : " ") $15
    }
    END {
      for (k in n) {
        split(v[k], vs, " "); delete cnt; s = ""
        for (i in vs) cnt[vs[i]]++
        for (x in cnt) s = s x "=" cnt[x] " "
        printf "%s: rounds=%d acked_new=%d acked_checked=%d acked_keys_checked=%d lost=%d lost_changed=%d torn=%d wrong=%d damaged_detected=%d verdicts: %s\n", k, n[k], a[k], ck[k], ks[k], l[k], c[k], t[k], w[k], d[k], s
      }
    }' "$OUT/rounds.tsv" | sort
  echo "elapsed: $((SECONDS - T0)) s; result: $([ "$FAIL" -eq 0 ] && echo PASS || echo FAIL)"
} | tee -a "$OUT/run.txt"
exit "$FAIL"
