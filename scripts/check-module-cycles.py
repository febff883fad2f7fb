#!/usr/bin/env python3
"""No import circle among a crate's modules.

Usage: check-module-cycles.py CRATE_SRC_DIR...

Each file is a module; an edge A -> B is a `crate::B...` or `super::...`
path in A's code (tests and comments left out) naming module B. Edges
between a module and its own submodules are the normal shape of a Rust
module tree and are not counted. Any strongly connected set of two or more
modules is a circle: the script names its modules and exits 1.
"""
import os
import re
import sys
from collections import defaultdict


def modules(root):
    found = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            module = os.path.relpath(path, root)[:-3].replace(os.sep, "::")
            if module.endswith("::mod"):
                module = module[: -len("::mod")]
            if module in ("lib", "main"):
                module = ""
            with open(path, encoding="utf-8") as f:
                found[module] = f.read()
    return found


def related(a, b):
    return a == b or a.startswith(b + "::") or b.startswith(a + "::") or a == "" or b == ""


def edges_of(found):
    known = set(found)

    def resolve(path):
        parts = path.split("::")
        for end in range(len(parts), 0, -1):
            candidate = "::".join(parts[:end])
            if candidate in known:
                return candidate
        return None

    edges = defaultdict(set)
    for module, text in found.items():
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
        text = re.sub(r"//.*", "", text)
        parent = module.rsplit("::", 1)[0] if "::" in module else ""
        paths = [m.group(1) for m in re.finditer(r"\bcrate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)", text)]
        paths += [
            (parent + "::" if parent else "") + m.group(1)
            for m in re.finditer(r"\bsuper::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)", text)
        ]
        for path in paths:
            target = resolve(path)
            if target is not None and not related(module, target):
                edges[module].add(target)
    return edges


def circles(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(100000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(roots):
    bad = False
    for root in roots:
        found = modules(root)
        for circle in circles(found, edges_of(found)):
            bad = True
            print(f"module circle in {root}: {' <-> '.join(circle)}", file=sys.stderr)
    if not bad:
        print(f"no module circles in {', '.join(roots)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
