#!/usr/bin/env bash
# Runs memcached 1.6.18's own perl tests t/getset.t and t/strtol-testing.t
# against dlht-server, and exits with prove's status. Opt-in: nothing
# else calls it.
#   MEMCACHED_SRC=<dir> [DLHT_SERVER=<binary>] bash scripts/memcached-t.sh [prove flags, e.g. -v]
# MEMCACHED_SRC is a memcached source tree (only its t/ is used), e.g.
#   git clone --branch 1.6.18 https://github.com/memcached/memcached
# (or the project's fetch tool, or Debian's memcached_1.6.18.orig.tar.xz).
# Without DLHT_SERVER it runs `cargo build --release -p dlht-server`.
#
# t/lib/MemcachedTest.pm starts `$PWD/timedrun 600 $PWD/memcached-debug ARGS`,
# so this runs prove in a temporary directory holding t (a link to
# $MEMCACHED_SRC/t), a timedrun that uses timeout(1), and a memcached-debug
# that keeps the flags dlht-server knows (-p -m -I -c -t -l -v -h) and
# drops the rest (-U, -u, -o ...). dlht-server's -h does not mention
# "unix-socket", so the tests connect over TCP.
# Needs perl with Test::More and prove.
set -euo pipefail
cd "$(dirname "$0")/.."

src=${MEMCACHED_SRC:?set MEMCACHED_SRC to a memcached 1.6.18 source tree}
src=$(cd "$src" && pwd)
for f in t/getset.t t/strtol-testing.t t/lib/MemcachedTest.pm; do
  [ -f "$src/$f" ] || { echo "no $f under $src" >&2; exit 2; }
done

if [ -n "${DLHT_SERVER:-}" ]; then
  server=$DLHT_SERVER
else
  cargo build --release -p dlht-server
  server=${CARGO_TARGET_DIR:-target}/release/dlht-server
fi
server=$(cd "$(dirname "$server")" && pwd)/$(basename "$server")
[ -x "$server" ] || { echo "not an executable: $server" >&2; exit 2; }
export DLHT_T_SERVER=$server

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ln -s "$src/t" "$dir/t"

cat > "$dir/timedrun" <<'EOF'
#!/bin/sh
secs=$1; shift
exec timeout "$secs" "$@"
EOF

cat > "$dir/memcached-debug" <<'EOF'
#!/usr/bin/env bash
keep=()
while [ $# -gt 0 ]; do
  case $1 in
    -p|-m|-I|-c|-t|-l) keep+=("$1" "${2-}"); shift 2 || break ;;
    -v|-vv|-vvv|-h|-V) keep+=("$1"); shift ;;
    -a|-s|-U|-u|-P|-f|-n|-D|-R|-b|-B|-Y|-e|-o|-N) shift 2 || break ;;
    *) shift ;;
  esac
done
exec "$DLHT_T_SERVER" "${keep[@]}"
EOF
chmod +x "$dir/timedrun" "$dir/memcached-debug"

cd "$dir"
status=0
prove "$@" t/getset.t t/strtol-testing.t || status=$?
exit "$status"
