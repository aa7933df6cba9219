#!/usr/bin/env python3
"""Items a memcached-protocol server holds under its memory limit as items
keep arriving: ROUNDS rounds of N `set kNNN 0 0 SIZE noreply` of fresh keys,
then `stats` (curr_items, bytes, evictions) and the server's RSS.

  python3 scripts/tiny-items.py PORT ROUNDS [N [PID [SIZE]]]

SIZE is the value's bytes (default 1), or `mixed`: log-uniform from 1 B to
200 KB. Start the server first, e.g. `target/release/dlht-server -p 22311 -m
64 -t 1` or `memcached -u root -p 22312 -l 127.0.0.1 -U 0 -m 64 -t 1`; PID
gives RSS.
"""
import random
import socket
import sys
import time

port = int(sys.argv[1])
rounds = int(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 5_240_000
pid = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-" else None
size = sys.argv[5] if len(sys.argv) > 5 else "1"
s = socket.create_connection(("127.0.0.1", port))
rng = random.Random(1)
big = b"v" * 200_000


def stats():
    s.sendall(b"stats\r\n")
    buf = b""
    while not buf.endswith(b"END\r\n"):
        buf += s.recv(65536)
    d = {}
    for line in buf.decode().split("\r\n"):
        p = line.split()
        if len(p) == 3:
            d[p[1]] = p[2]
    return d


def rss():
    if pid is None:
        return "?"
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024


def value():
    if size == "mixed":
        return big[: int(10 ** rng.uniform(0, 5.3))]
    return big[: int(size)]


base = 0
for r in range(rounds):
    t = time.time()
    batch = 20000 if size != "mixed" else 200
    for i in range(0, n, batch):
        parts = []
        for j in range(i, min(i + batch, n)):
            v = value()
            parts.append(b"set k%d 0 0 %d noreply\r\n%s\r\n" % (base + j, len(v), v))
        s.sendall(b"".join(parts))
    base += n
    d = stats()
    print(
        f"round {r}: curr_items {d['curr_items']} bytes {int(d['bytes'])/2**20:.1f} MiB "
        f"evictions {d['evictions']} rss {rss()} MiB  {time.time()-t:.0f}s",
        flush=True,
    )
