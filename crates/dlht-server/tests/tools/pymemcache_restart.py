"""Warm restart through pymemcache: sets that survive kill -9.

Usage:
  python3 pymemcache_restart.py write HOST PORT ACKS N
      Sets keys 0..N (flags, expiry and sizes vary with the key), each
      followed by a `gets` for its cas unique, and appends `i cas` to ACKS
      (flushed) once both replies are in; also sets `short` with a 2 s
      expiry first. Stops at N, or quietly when the server goes away (it is
      killed under it).
  python3 pymemcache_restart.py check HOST PORT ACKS
      Every key ACKS names is there with its value, flags, cas unique and
      expiry (`mg KEY t`: a key set to expire in an hour still has at most
      that left, one set with none has none); a cas unique handed out now is
      above every acknowledged one; `short` has
      expired once 3 s have passed since it was set. Exits non-zero, naming
      the mismatch.
"""

import socket
import sys
import time

from pymemcache.client.base import Client

TIMEOUT = 5


def value(i):
    return (b"value-%d-" % i) * (i % 40 + 1)


def flags(i):
    return (i * 7919) % 65536


def expire(i):
    return 3600 if i % 2 else 0


def raw(host, port, request, end):
    """Sends one request on a fresh connection; the reply up to `end`."""
    with socket.create_connection((host, port), timeout=TIMEOUT) as s:
        s.sendall(request)
        buf = b""
        while not buf.endswith(end):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return buf


def raw_gets(host, port, key):
    """(flags, data, cas) from a raw `gets`, or None: pymemcache hides flags."""
    buf = raw(host, port, b"gets " + key + b"\r\n", b"END\r\n")
    if buf == b"END\r\n":
        return None
    head, rest = buf.split(b"\r\n", 1)
    _, _, f, n, cas = head.split(b" ")
    return int(f), rest[: int(n)], int(cas)


def raw_ttl(host, port, key):
    """The remaining TTL `mg KEY t` reports (-1: none)."""
    words = raw(host, port, b"mg " + key + b" t\r\n", b"\r\n").split()
    if not words or words[0] != b"HD":
        return None
    return int([w for w in words if w.startswith(b"t")][0][1:])


def write(host, port, acks, n):
    c = Client((host, port), timeout=TIMEOUT, connect_timeout=TIMEOUT)
    started = time.time()
    with open(acks, "w") as out:
        try:
            c.set("short", b"soon gone", expire=2, noreply=False)
            out.write("short %f\n" % started)
            out.flush()
            for i in range(n):
                key = "key%d" % i
                c.set(key, value(i), expire=expire(i), noreply=False, flags=flags(i))
                _, cas = c.gets(key)
                out.write("%d %d\n" % (i, int(cas)))
                out.flush()
        except (OSError, Exception) as e:  # the server was killed
            print("writer stopped: %r" % (e,))
    print("writer done")


def check(host, port, acks):
    c = Client((host, port), timeout=TIMEOUT, connect_timeout=TIMEOUT)
    n = 0
    max_cas = 0
    short_at = None
    for line in open(acks):
        a, b = line.split()
        if a == "short":
            short_at = float(b)
            continue
        i, cas = int(a), int(b)
        max_cas = max(max_cas, cas)
        got = raw_gets(host, port, b"key%d" % i)
        want = (flags(i), value(i), cas)
        if got != want:
            sys.exit("FAIL key%d: got %r, expected %r" % (i, got, want))
        ttl = raw_ttl(host, port, b"key%d" % i)
        if expire(i) == 0 and ttl != -1 or expire(i) and not (0 < ttl <= expire(i)):
            sys.exit("FAIL key%d: ttl %r after the restart, set with %d" % (i, ttl, expire(i)))
        n += 1
    # A cas unique handed out after the restart is new: above every one
    # handed out before it.
    c.set("after-restart", b"x", noreply=False)
    _, cas = c.gets("after-restart")
    if int(cas) <= max_cas:
        sys.exit("FAIL a cas unique after the restart (%s) is not above those before (%d)" % (cas, max_cas))
    c.delete("after-restart", noreply=False)
    # The 2 s expiry has passed (the clock went on across the restart).
    if short_at is not None:
        while time.time() < short_at + 3.5:
            time.sleep(0.2)
        if c.get("short") is not None:
            sys.exit("FAIL short: still there after its expiry")
    stats = c.stats()
    print("stats: %r" % {k: v for k, v in stats.items() if k.startswith(b"restart") or k == b"curr_items"})
    if int(stats[b"restart_items_recovered"]) < n:
        sys.exit("FAIL restart_items_recovered below the %d keys acknowledged" % n)
    print("all %d acknowledged sets came back" % n)


if __name__ == "__main__":
    mode, host, port, acks = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if mode == "write":
        write(host, port, acks, int(sys.argv[5]))
    else:
        check(host, port, acks)
