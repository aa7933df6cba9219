#!/usr/bin/env python3
"""Items a memcached-protocol server holds under its memory limit as tiny
items keep arriving: ROUNDS rounds of N `set kNNN 0 0 1 noreply` of fresh
keys, then `stats` (curr_items, bytes, evictions) and the server's RSS.

  python3 scripts/tiny-items.py PORT ROUNDS [N [PID]]

Start the server first, e.g. `target/release/dlht-server -p 22311 -m 64 -t 1`
or `memcached -u root -p 22312 -l 127.0.0.1 -U 0 -m 64 -t 1`; PID gives RSS.
"""
import socket, sys, random, time, re
port=int(sys.argv[1]); rounds=int(sys.argv[2]); n=int(sys.argv[3]) if len(sys.argv)>3 else 5_240_000
s=socket.create_connection(("127.0.0.1",port))
def stats():
    s.sendall(b"stats\r\n"); buf=b""
    while not buf.endswith(b"END\r\n"): buf+=s.recv(65536)
    d={}
    for l in buf.decode().split("\r\n"):
        p=l.split()
        if len(p)==3: d[p[1]]=p[2]
    return d
def rss(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])//1024
pid=int(sys.argv[4]) if len(sys.argv)>4 else None
rng=random.Random(1); base=0
for r in range(rounds):
    t=time.time(); B=20000
    for i in range(0,n,B):
        lines=b"".join(b"set k%d 0 0 1 noreply\r\nx\r\n"%(base+j) for j in range(i,i+B))
        s.sendall(lines)
    base+=n
    d=stats()
    print(f"round {r}: curr_items {d['curr_items']} bytes {int(d['bytes'])/2**20:.1f} MiB evictions {d['evictions']} rss {rss(pid) if pid else '?'} MiB  {time.time()-t:.0f}s", flush=True)
