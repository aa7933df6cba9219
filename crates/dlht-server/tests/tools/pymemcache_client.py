"""Drives dlht-server with pymemcache, the Python memcached client.

Usage: python3 pymemcache_client.py HOST PORT [PORT...]

The first server gets every command pymemcache's Client has (and gat/gats
over a raw socket where this pymemcache lacks them); then a HashClient
spreads 1000 keys over all the servers. Exits non-zero, naming the
mismatch, on any wrong reply.
"""

import socket
import sys

import pymemcache
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient

TIMEOUT = 5


def check(what, got, expected):
    if got != expected:
        sys.exit(f"FAIL {what}: got {got!r}, expected {expected!r}")
    print(f"ok   {what}: {got!r}")


def raw(host, port, request):
    """Sends one request and returns the reply up to its terminator."""
    with socket.create_connection((host, port), timeout=TIMEOUT) as s:
        s.sendall(request + b"version\r\n")
        reply = b""
        while not reply.endswith(b"\r\n") or b"VERSION " not in reply:
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
        return reply[: reply.rfind(b"VERSION ")]


def single(host, port):
    c = Client((host, port), connect_timeout=TIMEOUT, timeout=TIMEOUT, default_noreply=False)
    check("flush_all", c.flush_all(), True)
    check("version", c.version().startswith(b"1."), True)

    # Storage and retrieval.
    check("set", c.set("k", b"v1"), True)
    check("set with flags", c.set("f", b"x", flags=42), True)
    check("get", c.get("k"), b"v1")
    check("get missing", c.get("missing"), None)
    check("get_many", c.get_many(["k", "f", "missing"]), {"k": b"v1", "f": b"x"})
    check("raw flags", raw(host, port, b"get f\r\n"), b"VALUE f 42 1\r\nx\r\nEND\r\n")
    value, cas = c.gets("k")
    check("gets value", value, b"v1")
    check("gets cas is a number", isinstance(cas, bytes) and cas.isdigit(), True)
    check("gets missing", c.gets("missing"), (None, None))
    many = c.gets_many(["k", "missing"])
    check("gets_many", (list(many), many["k"]), (["k"], (b"v1", cas)))

    # cas: success, EXISTS, NOT_FOUND.
    check("cas ok", c.cas("k", b"v2", cas), True)
    check("get after cas", c.get("k"), b"v2")
    check("cas stale (EXISTS)", c.cas("k", b"v3", cas), False)
    check("get after stale cas", c.get("k"), b"v2")
    check("cas missing (NOT_FOUND)", c.cas("missing", b"x", b"1"), None)

    # add / replace / append / prepend.
    check("add existing", c.add("k", b"no"), False)
    check("add new", c.add("a", b"added"), True)
    check("get added", c.get("a"), b"added")
    check("replace existing", c.replace("a", b"replaced"), True)
    check("replace missing", c.replace("missing", b"x"), False)
    check("get replaced", c.get("a"), b"replaced")
    check("append", c.append("a", b"-tail"), True)
    check("prepend", c.prepend("a", b"head-"), True)
    check("get appended", c.get("a"), b"head-replaced-tail")
    check("append missing", c.append("missing", b"x"), False)
    check("prepend missing", c.prepend("missing", b"x"), False)

    # delete.
    check("delete", c.delete("a"), True)
    check("delete again", c.delete("a"), False)
    check("get deleted", c.get("a"), None)
    c.set_many({"d1": b"1", "d2": b"2"})
    check("delete_many", c.delete_many(["d1", "d2", "missing"]), True)
    check("get_many deleted", c.get_many(["d1", "d2"]), {})

    # incr / decr.
    check("set number", c.set("n", b"10"), True)
    check("incr", c.incr("n", 5), 15)
    check("decr", c.decr("n", 3), 12)
    check("decr below zero", c.decr("n", 100), 0)
    check("incr missing", c.incr("missing", 1), None)
    check("decr missing", c.decr("missing", 1), None)
    c.set("big", b"18446744073709551615")
    check("incr wraps", c.incr("big", 1), 0)
    try:
        c.incr("k", 1)
        sys.exit("FAIL incr non-number: no error")
    except pymemcache.exceptions.MemcacheClientError as e:
        print(f"ok   incr non-number: {e}")

    # touch, gat, gats.
    check("touch", c.touch("k", 100), True)
    check("touch missing", c.touch("missing", 100), False)
    if hasattr(c, "gat"):
        check("gat", c.gat("k", 100), b"v2")
        check("gats", c.gats("k", 100)[0], b"v2")
    else:
        print(f"note pymemcache {pymemcache.__version__} has no gat/gats: raw socket")
        check("gat", raw(host, port, b"gat 100 k missing\r\n"), b"VALUE k 0 2\r\nv2\r\nEND\r\n")
        reply = raw(host, port, b"gats 100 k\r\n")
        words = reply.split(b"\r\n")[0].split(b" ")
        check("gats", (words[:4], reply.split(b"\r\n")[1:]), ([b"VALUE", b"k", b"0", b"2"], [b"v2", b"END", b""]))
        check("gats cas is a number", words[4].isdigit(), True)
    check("touch expired", (c.touch("k", -1), c.get("k")), (True, None))

    # noreply variants: no reply is read, so the effects are checked after
    # a command with a reply on the same connection.
    n = Client((host, port), connect_timeout=TIMEOUT, timeout=TIMEOUT, default_noreply=True)
    n.set("q", b"1")
    n.add("q", b"no")
    n.add("q2", b"2")
    n.replace("q2", b"22")
    n.append("q2", b"a")
    n.prepend("q2", b"p")
    n.set("qn", b"5")
    check("incr noreply", n.incr("qn", 2, noreply=True), None)
    check("decr noreply", n.decr("qn", 1, noreply=True), None)
    n.delete("q")
    n.touch("q2", 100)
    n.set_many({"m1": b"1", "m2": b"2"})
    n.version()  # A reply on the same connection: the noreply commands ran.
    check("after noreply", c.get_many(["q", "q2", "qn", "m1", "m2"]),
          {"q2": b"p22a", "qn": b"6", "m1": b"1", "m2": b"2"})
    n.flush_all()
    n.version()
    check("flush_all noreply", c.get_many(["q2", "qn", "m1"]), {})

    # stats.
    c.set("s", b"stat")
    c.get("s")
    stats = c.stats()
    for name in ("pid", "uptime", "curr_items", "total_items", "get_hits", "get_misses",
                 "cmd_get", "cmd_set", "curr_connections", "total_connections"):
        check(f"stats has {name}", name.encode() in stats, True)
    check("stats curr_items", stats[b"curr_items"] >= 1, True)
    check("stats get_hits", stats[b"get_hits"] >= 1, True)
    check("stats settings", b"maxconns" in c.stats("settings"), True)
    check("flush_all", c.flush_all(), True)
    check("get after flush_all", c.get("s"), None)
    c.close()
    n.close()


def hashed(host, ports):
    servers = [(host, p) for p in ports]
    plain = [Client(s, connect_timeout=TIMEOUT, timeout=TIMEOUT, default_noreply=False) for s in servers]
    for c in plain:
        c.flush_all()
    h = HashClient(servers, connect_timeout=TIMEOUT, timeout=TIMEOUT, default_noreply=False,
                   retry_attempts=1, dead_timeout=60)
    keys = [f"hash-{i}" for i in range(1000)]
    for k in keys:
        check_quiet = h.set(k, f"value-of-{k}".encode())
        if check_quiet is not True:
            sys.exit(f"FAIL HashClient set {k}: {check_quiet!r}")
    got = h.get_many(keys)
    check("HashClient get_many count", len(got), 1000)
    for k in keys:
        if got.get(k) != f"value-of-{k}".encode():
            sys.exit(f"FAIL HashClient get_many {k}: {got.get(k)!r}")
    for k in keys[::10]:
        if h.get(k) != f"value-of-{k}".encode():
            sys.exit(f"FAIL HashClient get {k}")
    held = []
    for (_, port), c in zip(servers, plain):
        here = c.get_many(keys)
        items = c.stats()[b"curr_items"]
        print(f"     server :{port} holds {len(here)} keys, curr_items {items}")
        if len(here) == 0 or items < len(here):
            sys.exit(f"FAIL server :{port} holds {len(here)} keys, curr_items {items}")
        held.append(len(here))
    check("keys over all servers", sum(held), 1000)
    for c in plain:
        c.close()
    h.close()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    host, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
    print(f"pymemcache {pymemcache.__version__}")
    single(host, ports[0])
    if len(ports) > 1:
        hashed(host, ports)
    print("all pymemcache checks passed")


if __name__ == "__main__":
    main()
