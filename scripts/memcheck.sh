#!/usr/bin/env bash
# Runs the concurrency tests under valgrind memcheck at a small scale: any
# invalid read or write (an index read after it was freed, a slot out of
# bounds) or uninitialised use fails the run, and so does memory lost
# for good (a "definitely lost" block: a value allocation-mode dropped
# without freeing). Uses the release test
# binaries (debug info is on in the release profile, so reports have lines).
# The test summaries it prints are the ones cargo test prints.
#
# valgrind runs one thread at a time, so races are explored less than on
# hardware; what it adds is exact detection of every access to freed or
# unallocated memory in the interleavings it does run.
set -euo pipefail
cd "$(dirname "$0")/.."

tests=(stress reclaim batch hasher alloc_map alloc_rmw byte_map iter shrink owned_guard reentry teardown persist persist_bytes)
# Tests of a binary to run, where not all: the persistent map's file checks
# (foreign, truncated and damaged files refused), not its kill -9 harness
# (whose children run outside valgrind, and whose checks would take minutes
# under it).
declare -A only=([persist]="foreign_and_damaged a_closed_map a_directory_is_opened sync_mode" [persist_bytes]="damaged_heap_files a_closed_byte_map")
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
# Build, and list the test executables cargo made.
mapfile -t exes < <(cargo test -p dlht --release "${args[@]}" --no-run --message-format=json 2>/dev/null \
  | grep '"executable":"' | sed -E 's/.*"executable":"([^"]+)".*/\1/')
if [ "${#exes[@]}" -ne "${#tests[@]}" ]; then
  echo "memcheck: expected ${#tests[@]} test binaries, found ${#exes[@]}" >&2
  exit 1
fi

# One valgrind per core (valgrind runs a process's threads one at a time,
# on one core), two at once on the 2-core CI machine: the step took 400 s
# run one binary after another.
jobs=${DLHT_MEMCHECK_JOBS:-$(nproc)}
[ "$jobs" -ge 1 ] || jobs=1
work=$(mktemp -d)

# memcheck_one I EXE: run EXE under memcheck; its report line in $work/I.
memcheck_one() {
  local i=$1 exe=$2 name filter=() start=$SECONDS
  name=$(basename "$exe")
  for t in "${!only[@]}"; do
    if [[ $name == "$t"-* ]]; then read -ra filter <<<"${only[$t]}"; fi
  done
  # A tenth of the CI stress scale, and 64 cases per property test
  # (proptest's default is 256; the release and debug builds run those). --fair-sched: valgrind runs one thread
  # at a time, and its default lock lets a thread that spins (a reader
  # polling a stop flag) take it again and again, starving the writer it
  # waits for: the reclamation test then ran for minutes or hours instead
  # of seconds, depending on luck.
  if DLHT_STRESS_SCALE=0.1 PROPTEST_CASES=64 valgrind -q --fair-sched=yes --error-exitcode=99 --tool=memcheck \
      --leak-check=full --errors-for-leak-kinds=definite \
      "$exe" --test-threads=1 "${filter[@]}" >"$work/$i.log" 2>&1; then
    echo "memcheck $name: clean ($(grep -h "test result" "$work/$i.log")) in $((SECONDS - start))s" >"$work/$i"
  else
    { echo "memcheck $name: FAILED"; tail -n 40 "$work/$i.log"; } >"$work/$i"
  fi
}

running=()
for i in "${!exes[@]}"; do
  memcheck_one "$i" "${exes[$i]}" &
  running+=($!)
  if [ "${#running[@]}" -ge "$jobs" ]; then
    wait "${running[0]}"
    running=("${running[@]:1}")
  fi
done
wait

status=0
for i in "${!exes[@]}"; do
  cat "$work/$i"
  grep -q "^memcheck [^ ]*: clean" "$work/$i" || status=1
done
rm -rf "$work"
exit $status
