#!/usr/bin/env python3
"""The real-GPU check of CuPy under the shim, run by tests/gpu/check.sh
when cupy imports: tests/python/cupy_loop.py with CuPy (whose embedded
CUDA runtime reaches the driver through dlsym and cuGetProcAddress_v2, the
route the shim hooks) three times with the same --seed: without the shim,
under it with VRAMPOOL=off, and with the pool. Every run must verify every
byte, read back the same bytes batch by batch, and the shim must have seen
each of CuPy's uploads once: bytes.requested equal to the loop's bytes in
both shim runs, and the pool serving repeats. Prints the epoch and upload
times side by side and a last line starting "cupy:".

usage: cupy_loop.py OUTDIR SHIM [LOOP ARGS...]
(default loop args: --samples 4096 --row 150528 --batch 64 --epochs 4)
CUPY_LOOP_BACKEND=standin runs the loop's stand-in instead of CuPy: how
tests/e2e/cupy.sh proves this script on the emulated device.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "..", "python", "cupy_loop.py")


def arg(args, name, default):
    return int(args[args.index(name) + 1]) if name in args else default


def run(out, name, env, args):
    """One loop run; returns its JSON figures (None if it failed)."""
    e = dict(os.environ)
    e.update(env)
    path = os.path.join(out, "cupy-%s" % name)
    with open(path + ".out", "w") as so, open(path + ".err", "w") as se:
        rc = subprocess.call([sys.executable, LOOP, "--backend", os.environ.get("CUPY_LOOP_BACKEND", "cupy"), "--json", path + ".loop.json"] + args,
                             env=e, stdout=so, stderr=se)
    print("%-6s exit %d (%s.out, .err)" % (name, rc, path))
    if rc != 0:
        print(open(path + ".err").read()[-2000:])
        return None
    return json.load(open(path + ".loop.json"))


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    out, shim, args = argv[0], argv[1], argv[2:]
    if not args:
        args = ["--samples", "4096", "--row", "150528", "--batch", "64", "--epochs", "4"]
    os.makedirs(out, exist_ok=True)
    row = arg(args, "--row", 3072)
    stats = {n: os.path.join(out, "cupy-%s.stats.json" % n) for n in ("off", "pool")}
    runs = {
        "plain": run(out, "plain", {}, args),
        "off": run(out, "off", {"LD_PRELOAD": shim, "VRAMPOOL": "off", "VRAMPOOL_LAYOUT": str(row),
                                "VRAMPOOL_STATS": stats["off"]}, args),
        "pool": run(out, "pool", {"LD_PRELOAD": shim, "VRAMPOOL_LAYOUT": str(row), "VRAMPOOL_VERBOSE": "1",
                                  "VRAMPOOL_STATS": stats["pool"]}, args),
    }
    ok = all(r is not None and r.get("verified") for r in runs.values())
    if not ok:
        print("cupy: FAILED (a run did not verify; see above)")
        return 1
    total = sum(e["bytes"] for e in runs["plain"]["epochs"])
    same = runs["plain"]["checksums"] == runs["off"]["checksums"] == runs["pool"]["checksums"]
    print("cupy %s: %d batches read back: %s" % (runs["plain"]["cupy"], len(runs["plain"]["checksums"]),
                                                 "identical in the three runs" if same else "DIFFERENT"))
    ok = same
    for name in ("plain", "off", "pool"):
        print("%-6s epoch s:   %s" % (name, " ".join("%.3f" % e["seconds"] for e in runs[name]["epochs"])))
        print("%-6s upload ms: %s" % (name, " ".join("%.2f" % e["upload_ms"] for e in runs[name]["epochs"])))
    served = "-"
    for name in ("off", "pool"):
        try:
            s = json.load(open(stats[name]))
        except (OSError, ValueError) as e:
            print("%s: no stats from the shim (%s): it saw none of CuPy's copies" % (name, e))
            ok = False
            continue
        b = s["bytes"]
        print("%-6s shim: requested %d (loop %d), h2d %d, served %d, copies %d, pool %s"
              % (name, b["requested"], total, b["h2d"], b["served_from_pool"], s["copies"]["h2d_calls"],
                 s["pool"]["state"]))
        if b["requested"] != total or b["requested"] != b["h2d"] + b["served_from_pool"]:
            print("%s: the shim's byte counts do not match the loop's" % name)
            ok = False
        if name == "pool":
            served = "%.1f%%" % (100.0 * b["served_from_pool"] / max(1, b["requested"]))
            if b["served_from_pool"] == 0:
                print("pool: nothing served from the pool")
                ok = False
    up = [sum(e["upload_ms"] for e in runs[n]["epochs"][2:]) for n in ("off", "pool")]
    print("cupy: %s; served %s; upload ms from epoch 3: off %.1f, pool %.1f"
          % ("verified, A/B identical" if ok else "FAILED", served, up[0], up[1]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
