#!/usr/bin/env python3
"""Import loops between the files of a crate's source tree.

The layout rule (STYLE): a lower room never imports a higher one. This
builds the graph of which file names which (`crate::a::b` paths, and
`super::` resolved against the file's module, or against the file itself
inside an inline `mod x { }`), and prints every strongly connected group
of more than one file. Exit status 1 if there is one.

    python3 scripts/import-loops.py crates/dlht/src
"""
import os
import re
import sys


def files_of(root):
    files = {}
    for d, _, names in os.walk(root):
        for f in names:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                parts = os.path.relpath(p, root)[:-3].split(os.sep)
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                files[tuple(parts)] = p
    return files


def edges_of(files):
    def resolve(path):
        for n in range(len(path), -1, -1):
            if tuple(path[:n]) in files:
                return tuple(path[:n])
        return ()

    edges = {k: set() for k in files}
    for mod, p in files.items():
        src = re.sub(r"//[^\n]*", "", open(p, encoding="utf-8").read())
        for m in re.finditer(r"crate::([A-Za-z0-9_:]+)(::\{([^}]*)\})?", src):
            base = [x for x in m.group(1).split("::") if x]
            targets = [base]
            if m.group(3):
                targets = [
                    base + [x.strip().split("::")[0].split(" ")[0]]
                    for x in m.group(3).split(",")
                    if x.strip() and x.strip() != "self"
                ]
            for t in targets:
                r = resolve(t)
                if r not in (mod, ()):
                    edges[mod].add(r)
        inline = []
        for mm in re.finditer(r"\bmod\s+\w+\s*\{", src):
            depth, j = 1, mm.end()
            while depth and j < len(src):
                depth += {"{": 1, "}": -1}.get(src[j], 0)
                j += 1
            inline.append((mm.start(), j))
        for m in re.finditer(r"\bsuper::([A-Za-z0-9_]+)", src):
            nested = any(a <= m.start() < b for a, b in inline)
            r = resolve(list(mod if nested else mod[:-1]) + [m.group(1)])
            if r not in (mod, ()):
                edges[mod].add(r)
    return edges


def loops(edges):
    """Tarjan's strongly connected components, those of two or more."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted("/".join(x) or "lib" for x in comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    found = loops(edges_of(files_of(sys.argv[1])))
    for group in found:
        print("import loop:", " <-> ".join(group))
    print(f"{sys.argv[1]}: {len(found)} import loop(s)")
    sys.exit(1 if found else 0)
