#!/usr/bin/env python3
"""The house rules of shim/ (docs/architecture.md), checked on the tree.

Usage: house.py CHECK [ROOT]   (ROOT: the repository, default ../..)
  includes   every #include "L/x.h" in shim/ names its layer, L at or below
             the file's own (intercept > report > pool > device > core)
  calls      the same by which object calls which: every undefined symbol
             of build/shim/L/x.o that another shim object defines comes from
             L or below; and no circle between files: the objects' call
             graph (x.o uses a symbol y.o defines) has no cycle
  sizes      no file in shim/ over 600 lines, none in analysis/ over 700,
             unless one of its first 10 lines says "size limit:" and why
  nointercept  unit and bench binaries define nothing the interception
             layer defines (they link none of it)
  doc        every file (a path, or a bare name found somewhere in the
             tree) and every name() that docs/architecture.md puts in
             backquotes exists
Circles between files are judged by calls, not by includes: a header may
be shared by several files of a room (pool/pool.h is implemented by
pool.c and registry.c), so an include says less than a call about which
file depends on which. Only objects whose source is in the tree count (a
stale object of a removed file does not). Prints what is wrong, one line each; exits 1 if anything
is, 2 on bad usage.
"""
import os
import re
import subprocess
import sys

LAYERS = ["intercept", "report", "pool", "device", "core"]
RANK = {name: i for i, name in enumerate(LAYERS)}
LIMITS = [("shim", 600, (".c", ".h", ".S", ".cu", ".ptx", ".map")),
          ("analysis", 700, (".c", ".h", ".awk"))]


def module_of(path):
    """'shim/pool/pool.c' -> 'pool/pool'."""
    return os.path.splitext(os.path.relpath(path, "shim"))[0]


def layer_of(module):
    return module.split("/", 1)[0]


def find_cycle(graph):
    """A list of nodes forming a circle in graph (dict: node -> set), or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def shim_sources():
    out = []
    for layer in LAYERS:
        d = os.path.join("shim", layer)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith((".c", ".h", ".cu", ".S")):
                out.append(os.path.join(d, name))
    return out


def check_includes():
    bad = []
    for path in shim_sources():
        lay = layer_of(module_of(path))
        with open(path, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                inc = m.group(1)
                parts = inc.split("/")
                if path.endswith(".S"):
                    continue        # the assembler's .incbin of build output
                if len(parts) != 2 or parts[0] not in RANK:
                    bad.append(f"{path}:{no}: #include \"{inc}\" does not name a layer (\"pool/x.h\")")
                    continue
                if RANK[parts[0]] < RANK[lay]:
                    bad.append(f"{path}:{no}: {lay} includes from {parts[0]}, a layer above it")
    return bad


def nm(path, *flags):
    res = subprocess.run(["nm", *flags, path], capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"nm {path}: {res.stderr.strip()}")
    return res.stdout.splitlines()


def shim_objects():
    objs = {}
    for layer in LAYERS:
        d = os.path.join("build", "shim", layer)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(".o") and os.path.exists(os.path.join("shim", layer, name[:-2] + ".c")):
                objs[f"{layer}/{name[:-2]}"] = os.path.join(d, name)
    gather = os.path.join("build", "shim", "gather_ptx.o")
    if os.path.exists(gather):
        objs["device/gather_ptx"] = gather
    return objs


def check_calls():
    objs = shim_objects()
    if not objs:
        return ["no objects under build/shim/: build first (make)"]
    defined = {}
    for mod, path in objs.items():
        for line in nm(path, "--defined-only", "-g"):
            sym = line.split()[-1]
            defined[sym] = mod
    bad, graph = [], {mod: set() for mod in objs}
    for mod, path in objs.items():
        for line in nm(path, "-u"):
            sym = line.split()[-1]
            owner = defined.get(sym)
            if owner is None or owner == mod:
                continue
            if RANK[layer_of(owner)] < RANK[layer_of(mod)]:
                bad.append(f"{mod}.o calls {sym} of {owner}.o, a layer above it")
            graph[mod].add(owner)
    cycle = find_cycle(graph)
    if cycle:
        bad.append("call circle: " + " -> ".join(cycle))
    return bad


def exempt(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        head = [next(f, "") for _ in range(10)]
    return any("size limit:" in line for line in head)


def check_sizes():
    bad = []
    for top, limit, exts in LIMITS:
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                if not name.endswith(exts):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    n = sum(1 for _ in f)
                if n > limit and not exempt(path):
                    bad.append(f"{path}: {n} lines, over {limit} (split it, or say "
                               f"\"size limit: <why>\" in its opening comment)")
    return bad


def check_nointercept():
    objs = [p for m, p in shim_objects().items() if layer_of(m) == "intercept"]
    if not objs:
        return ["no objects under build/shim/intercept/: build first (make)"]
    ours = set()
    for path in objs:
        ours.update(line.split()[-1] for line in nm(path, "--defined-only", "-g"))
    bins = []
    for d, prefix in (("build/unit", "test_"), ("build/bench", "")):
        if os.path.isdir(d):
            bins += [os.path.join(d, n) for n in sorted(os.listdir(d))
                     if n.startswith(prefix) and os.path.isfile(os.path.join(d, n))
                     and os.access(os.path.join(d, n), os.X_OK)]
    if not bins:
        return ["no unit or bench binaries under build/: build first (make)"]
    bad = []
    for path in bins:
        have = {line.split()[-1] for line in nm(path, "--defined-only")}
        leak = sorted(have & ours)
        if leak:
            bad.append(f"{path} links the interception layer ({', '.join(leak[:4])})")
    return bad


def defined_functions():
    """Names defined as functions or macros anywhere in shim/, analysis/, tests/, scripts/."""
    names = set()
    pat = re.compile(r"([A-Za-z_]\w*)\s*\(")
    mac = re.compile(r"^\s*#\s*define\s+([A-Za-z_]\w*)")
    for top in ("shim", "analysis", "tests", "scripts"):
        for dirpath, _, files in os.walk(top):
            for name in files:
                if not name.endswith((".c", ".h", ".cu", ".S", ".sh", ".py")):
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                    for line in f:
                        if line[:1].isalpha() or line[:1] == "_":
                            names.update(pat.findall(line))    # a definition starts a line
                        m = mac.match(line)
                        if m:
                            names.add(m.group(1))
                        for g in re.finditer(r"\bVP_\w+\((\w+)\s*,", line):
                            names.add(g.group(1))      # X-macro rows: X(name, ...)
                        for g in re.finditer(r'"(\w+)"', line):
                            names.add(g.group(1))      # names in tables of strings
                        m = re.match(r"^\s*(?:def|function)?\s*([A-Za-z_]\w*)\s*\(\)", line)
                        if m:
                            names.add(m.group(1))       # shell and python functions
    return names


def check_doc():
    path = os.path.join("docs", "architecture.md")
    if not os.path.exists(path):
        return [f"{path} is missing"]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    funcs = defined_functions()
    files = set()
    for top in ("shim", "analysis", "tests", "scripts", "docs"):
        for dirpath, _, names in os.walk(top):
            files.update(names)
    bad = []
    for tok in sorted(set(re.findall(r"`([^`\n]+)`", text))):
        m = re.fullmatch(r"([A-Za-z_]\w*)\(\)", tok)
        if m:
            if m.group(1) not in funcs:
                bad.append(f"{path}: `{tok}` is not a function of the code")
            continue
        if re.fullmatch(r"[\w.\-/]+\.(c|h|cu|S|ptx|sh|py|md|map|in)|[\w.\-/]+/", tok):
            # a path names itself; a bare file name, any file of that name in the tree
            found = os.path.exists(tok) if "/" in tok else tok in files
            if not found:
                bad.append(f"{path}: `{tok}` names no file or folder of the tree")
    return bad


CHECKS = {"includes": check_includes, "calls": check_calls, "sizes": check_sizes,
          "nointercept": check_nointercept, "doc": check_doc}


def main(argv):
    if len(argv) not in (2, 3) or argv[1] not in CHECKS:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = argv[2] if len(argv) == 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    os.chdir(root)
    bad = CHECKS[argv[1]]()
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
