#!/usr/bin/env python3
"""Checks a vrampool stats dump against the emulated device's ground truth.

usage: check_stats.py STATS.json FAKE.json [--calls] [--expect KEY=VALUE ...]
                      [--min KEY=VALUE ...]

Always: the dump parses, has every key of DESIGN.md and of format 2
(issue 19: format, version, host, rank, mode, command, started, ended,
final, device, pace), validates against docs/schema/ (where
python3-jsonschema is installed; schema.py), and
  bytes.requested == bytes.h2d + bytes.served_from_pool
  bytes.h2d       == the device's h2d_bytes
  pace.copies     == copies.h2d_calls, pace.bytes == bytes.requested
                     (the pace counts every program copy once; in a dump
                     a signal ended, at most those: a copy is noted last)
--calls also checks copies.h2d_calls == the device's h2d_calls (pass-through).
--expect/--min check dotted keys of the dump (numbers, true/false, strings).
Exit status 0 when all hold; each failure is printed on its own line.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # schema.py, also when loaded by path (soak.py)
import schema  # noqa: E402

KEYS = {
    "copies": ["h2d_calls", "matched_calls", "passthrough_calls"],
    "bytes": ["requested", "h2d", "served_from_pool", "captured"],
    "rows": ["seen", "hits", "misses", "captured", "pooled"],
    "pool": ["state", "budget", "bytes", "slabs", "evictions", "evicted_bytes", "oom_retries"],
    "probe": ["decided", "free", "total", "reserve", "margin"],
    "time_ns": ["fingerprint", "shim"],
    "pace": ["window_copies", "copies", "bytes", "ns", "windows", "steady"],
}
# Issue 19: who wrote the dump, for what, when (COMMON's fixed names).
FORMAT2 = ("format", "version", "host", "rank", "mode", "command", "started", "started_unix_ms", "ended",
           "ended_unix_ms", "final", "device", "pace")


def get(d, path):
    for k in path.split("."):
        d = d[k]
    return d


def parse(v):
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v)
    except ValueError:
        return v


def main(argv):
    stats = json.load(open(argv[1]))
    fake = json.load(open(argv[2]))
    errors = []
    for top in ("vrampool", "pid", "enabled", "layout") + FORMAT2:
        if top not in stats:
            errors.append("missing key %s" % top)
    for group, keys in KEYS.items():
        for k in keys:
            if k not in stats.get(group, {}):
                errors.append("missing key %s.%s" % (group, k))
    errors += schema.errors("dump", stats, argv[1])
    if errors:
        print("\n".join(errors))
        return 1
    b = stats["bytes"]
    p = stats["pace"]
    # a copy is noted last (calls_count): a dump a signal took mid-copy may lag by it, never lead
    exact = stats.get("ended_by") == "exit"
    pc, pb, hc = p["copies"], p["bytes"], stats["copies"]["h2d_calls"]
    if (pc != hc or pb != b["requested"]) if exact else (pc > hc or pb > b["requested"]):
        errors.append("pace counts %d copies of %d bytes, the dump %d of %d" % (pc, pb, hc, b["requested"]))
    if b["requested"] != b["h2d"] + b["served_from_pool"]:
        errors.append("requested %d != h2d %d + served %d" % (b["requested"], b["h2d"], b["served_from_pool"]))
    if b["h2d"] != fake["h2d_bytes"]:
        errors.append("shim h2d %d != device h2d_bytes %d" % (b["h2d"], fake["h2d_bytes"]))
    args = argv[3:]
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--calls":
            if stats["copies"]["h2d_calls"] != fake["h2d_calls"]:
                errors.append("shim h2d_calls %d != device h2d_calls %d"
                              % (stats["copies"]["h2d_calls"], fake["h2d_calls"]))
        elif a in ("--expect", "--min"):
            key, val = args[i + 1].split("=", 1)
            got = get(stats, key)
            want = parse(val)
            if a == "--expect" and got != want:
                errors.append("%s is %r, expected %r" % (key, got, want))
            if a == "--min" and not got >= want:
                errors.append("%s is %r, expected at least %r" % (key, got, want))
            i += 1
        else:
            errors.append("unknown argument %s" % a)
        i += 1
    if errors:
        print("\n".join(errors))
        print("stats:", json.dumps(stats))
        print("device:", json.dumps(fake))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
