#!/usr/bin/env python3
"""The soak's scenarios and verdicts (scripts/soak.sh runs them).

Usage:
  soak.py plan SEED N DIR       scenario N of the soak seeded SEED: DIR/plan.sh
                                (bash: the program, its arguments, the
                                device's and the shim's environment, a
                                signal, whether faults and memory pressure
                                follow) and DIR/scenario.json
  soak.py pressure SEED N DIR   after the probe run (DIR/probe: the program
                                without its mid-run allocation): the device's
                                size, the mid-run allocation and the pool's
                                budget, appended to DIR/plan.sh
  soak.py faults SEED N DIR CALL...
                                after the reference run (DIR/ref) and the
                                run under the shim without faults
                                (DIR/nofault): the FAKECUDA_FAIL items, from
                                the driver calls CALL... of the pool's drv
                                table that it made, less those the program
                                makes itself
  soak.py check DIR NAME [--faultfree NAME2]
                                the verdict on run NAME (under the shim)
                                against the reference run (DIR/ref, the same
                                program and device without the shim): shell
                                assignments on stdout, one problem a line in
                                DIR/NAME.problems

Files of a run NAME in DIR: NAME.out, NAME.err, NAME.rc (exit status as the
shell gives it: 128 + N for signal N), NAME.pid, NAME.sig (the signal, when
sent while the program ran), NAME.timeout (killed at the time limit),
NAME.spec (FAKECUDA_FAIL), NAME/stats-PID.json (the shim's dumps),
NAME/fake-PID.json (the device's reports), NAME/tel.jsonl (telemetry).

The same SEED and N give the same scenario: every choice is drawn from
random.Random("SEED:N:STEP"). The faults' call numbers depend also on how
many calls the fault-free run made, which timing can change: each run's
exact command line is kept in DIR/NAME.cmd.
"""
import glob
import importlib.util
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MIB = 1 << 20

# Row sizes and their weights: tiny, odd, the trainer's default, image rows.
ROWS = [(64, 2), (256, 2), (1000, 3), (3072, 8), (4097, 3), (12288, 5), (65536, 2), (150528, 2)]
APPS = [("trainer", 55), ("trainer_ptsz", 5), ("drvloader", 15), ("reload", 10),
        ("forker", 7), ("dltest", 8)]
DLTEST_CASES = ["", "next", "needed-ctor", "dlopen-ctor", "deepbind", "libc", "foreign-cu",
                "getproc", "dlvsym", "threads"]
# Values the shim must refuse with one line, then run as a counting pass-through.
MALFORMED = [("VRAMPOOL_SLAB", "12Q"), ("VRAMPOOL_BUDGET", "lots"), ("VRAMPOOL_THREADS", "0"),
             ("VRAMPOOL_LAYOUT", "u9:3"), ("VRAMPOOL", "maybe"), ("VRAMPOOL_MARGIN", "1Gb")]
# stdout of a run, less what differs between runs that moved the same bytes.
NORMALISE = [(r" seconds [0-9.]+", ""), (r" device_h2d [0-9]+", ""),
             (r"runtime (unloaded|kept)", "runtime -"), (r"parent \d+ child \d+", "parent - child -")]
OOM = re.compile(r"MemoryAllocation|OUT_OF_MEMORY")


def pick(r, weighted):
    """One value of [(value, weight), ...]."""
    values, weights = zip(*weighted)
    return r.choices(values, weights)[0]


def rng(seed, n, step):
    return random.Random("%s:%s:%s" % (seed, n, step))


def mib(n):
    return "%dM" % -(-n // MIB)


# ---- plan -------------------------------------------------------------------

def plan_layout(r, row, mask, batch):
    """VRAMPOOL_LAYOUT for rows of row bytes (None: unset)."""
    kind = pick(r, [("exact", 35), ("dtype", 10), ("auto", 15), ("none", 8), ("other", 5),
                    ("whole", 7), ("two", 10 if mask else 0), ("prio", 10)])
    if kind == "dtype":
        if row == 150528:
            return "u8:3x224x224"
        return "f32:%d" % (row // 4) if row % 4 == 0 else "u8:%d" % row
    if kind == "whole":
        return "whole:%d" % r.choice([row, max(row, batch * row // 2), MIB])
    if kind == "two":
        return "%d,%d" % (row, mask)
    if kind == "prio":
        return "%d@%d" % (row, r.randint(0, 9)) + (",%d@%d" % (mask, r.randint(0, 9)) if mask else "")
    return {"exact": str(row), "auto": "auto", "none": None, "other": str(row + 8)}[kind]


def plan_shim_env(r, sc, layout):
    """The VRAMPOOL_* variables of the run (STATS and TELEMETRY paths: soak.sh)."""
    e = {}
    if layout:
        e["VRAMPOOL_LAYOUT"] = layout
    mode = pick(r, [(None, 86), ("off", 7), ("dry", 7)])
    if mode:
        e["VRAMPOOL"] = mode
    budget = pick(r, [(None, 40), ("small", 25), ("size", 20), ("share", 15)])
    if budget == "small":
        e["VRAMPOOL_BUDGET"] = r.choice(["256K", "1M", "2M", "4M"])
    elif budget == "size":
        e["VRAMPOOL_BUDGET"] = r.choice(["16M", "64M", "256M"])
    elif budget == "share":
        e["VRAMPOOL_BUDGET"] = r.choice(["5%", "25%", "50%"])
    if r.random() < 0.6:
        e["VRAMPOOL_SLAB"] = r.choice(["1M", "2M", "4M", "16M"])
    if r.random() < 0.5:
        e["VRAMPOOL_THREADS"] = str(r.randint(1, 4))
    if r.random() < 0.3:
        e["VRAMPOOL_PROBE_AFTER"] = str(r.randint(0, 8))
    if r.random() < 0.2:
        e["VRAMPOOL_RESERVE_BATCHES"] = str(r.choice([0, 1, 4, 32]))
    if r.random() < 0.2:
        e["VRAMPOOL_MARGIN"] = r.choice(["0", "1M", "64M"])
    if r.random() < 0.15:
        e["VRAMPOOL_WHATIF_MEM"] = r.choice(["16K", "64K", "4M"])
    if r.random() < 0.35:
        # the ledger of issue 16 decides by the host's speed; force pools anyway
        # (a library without the ledger ignores the variable)
        e["VRAMPOOL_LEDGER"] = "force"
    if r.random() < 0.3:
        e["VRAMPOOL_TELEMETRY_S"] = "1"
    sc["telemetry"] = r.random() < 0.2
    if r.random() < 0.1:
        e["VRAMPOOL_VERBOSE"] = "1"
    elif r.random() < 0.5:
        e["VRAMPOOL_QUIET"] = "1"
    if r.random() < 0.03:
        name, value = r.choice(MALFORMED)
        e[name] = value
        sc["malformed"] = name
    return e


def plan_dev_env(r, sc):
    """The FAKECUDA_* variables shared by the reference run and the shim's."""
    e = {}
    jitter = pick(r, [(None, 40), (5, 20), (20, 25), (100, 15)])
    if jitter:
        e["FAKECUDA_JITTER_US"] = str(jitter)
    if r.random() < 0.15:
        e["FAKECUDA_RT_VIA_DRIVER"] = "1"
    kernel = pick(r, [(None, 86), ("none", 7), ("broken", 7)])
    if kernel:
        e["FAKECUDA_KERNEL"] = kernel
    if r.random() < 0.08:
        e["FAKECUDA_H2D_GBPS"] = str(r.choice([8, 16, 32, 64]))
        e["FAKECUDA_D2D_GBPS"] = "400"
    return e


def shape(r, sc, cap, long_run):
    """Rows, samples, batch and epochs of a loader: sc's fields, the arguments.

    A long run (a signal comes part-way) has many epochs; one under memory
    pressure holds more data than the slack its device is given (8 to 16
    MiB, at most 20000 rows), so that the pool must give slabs back.
    """
    row = pick(r, ROWS)
    if sc["pressure"]:
        samples = max(8, min(r.randint(8 * MIB, 16 * MIB) // row, 20000))
    else:
        samples = max(8, min(r.randint(16, 4000), cap // row))
    batch = r.randint(1, min(256, samples))
    if long_run:
        epochs = r.randint(40, 120)
    else:
        epochs = pick(r, [(1, 0 if sc["pressure"] else 10), (2, 30), (3, 30), (4, 30)])
    sc.update(row=row, samples=samples, batch=batch, epochs=epochs)
    return ["--samples", str(samples), "--row", str(row), "--batch", str(batch),
            "--epochs", str(epochs), "--seed", str(r.randint(1, 1 << 30))]


def plan_trainer(r, sc):
    sc["signal"] = pick(r, [(None, 88), ("TERM", 7), ("INT", 5)])
    sc["pressure"] = not sc["signal"] and r.random() < 0.2
    args = shape(r, sc, (4 if sc["signal"] else 8) * MIB, bool(sc["signal"]))
    mode = pick(r, [("legacy", 30), ("ptds", 15), ("nonblocking", 15), ("multi", 15), ("threads", 25)])
    args += ["--stream", mode]
    if mode == "multi":
        args += ["--streams", str(r.randint(2, 4))]
    if mode == "threads":
        args += ["--threads", str(r.randint(2, 6))]
    sync_ok = mode in ("legacy", "ptds", "threads")
    api = pick(r, [("explicit", 50), ("memcpy-default", 10), ("memcpy2d", 10), ("driver", 10),
                   ("driver-sync", 5 if sync_ok else 0), ("driver-getproc", 8), ("driver-entrypoint", 7)])
    args += ["--copy-api", api]
    if sync_ok and api in ("explicit", "memcpy-default", "memcpy2d") and r.random() < 0.2:
        args.append("--sync")
    if r.random() < 0.3:
        args.append("--pageable")
    if r.random() < 0.3:
        args += ["--dup", str(r.randint(5, 50))]
    mask = 0
    if r.random() < 0.15:
        mask = r.choice([64, 512, 1000, 4096])
        args += ["--mask-row", str(mask)]
    augment = pick(r, [(0, 75), (-1, 10), (1, 15 if sc["epochs"] > 2 else 0)])
    if augment:
        args += ["--augment", str(augment)]
    if r.random() < 0.2:
        args.append(r.choice(["--partial", "--drop-last"]))
    if r.random() < 0.4:
        args += ["--ring", str(r.randint(1, 6))]
    if r.random() < 0.1:
        args += ["--buffers", "vmm"]
    if sc["pressure"]:
        sc["alloc_api"] = pick(r, [("malloc", 40), ("async", 12), ("managed", 12), ("pitch", 12),
                                   ("driver", 12), ("vmm", 12)])
        sc["alloc_epoch"] = r.randint(2, sc["epochs"])
    elif r.random() < 0.05:
        args += ["--alloc-mid", "%dK@%d" % (r.randint(1, 4096), sc["epochs"])]
    if not sc["signal"] and r.random() < 0.05:
        sc["dev_env"]["FAKECUDA_DEVICES"] = "2"
        args += ["--device", "1"]
    if not sc["signal"] and r.random() < 0.7:
        args.append("--quiet")
    sc["mask"] = mask
    sc["layout"] = plan_layout(r, sc["row"], mask, sc["batch"])
    return args


def plan_drvloader(r, sc):
    sc["signal"] = pick(r, [(None, 88), ("TERM", 7), ("INT", 5)])
    sc["pressure"] = False
    args = shape(r, sc, (4 if sc["signal"] else 8) * MIB, bool(sc["signal"]))
    if r.random() < 0.5:
        args += ["--threads", str(r.randint(2, 4))]
    if r.random() < 0.3:
        args.append("--pageable")
    if r.random() < 0.3:
        args.append("--per-thread")
    if r.random() < 0.15:
        args.append("--legacy-getproc")
    if r.random() < 0.15:
        args.append("--resolve-before-init")
    if r.random() < 0.3:
        args += ["--stream", "default"]
    if r.random() < 0.4:
        args += ["--ring", str(r.randint(1, 6))]
    sc["layout"] = plan_layout(r, sc["row"], 0, sc["batch"])
    return args


def plan_reload(r, sc):
    sc["signal"], sc["pressure"] = None, False
    row = pick(r, ROWS[:6])
    sc["row"] = row
    args = ["--rounds", str(r.randint(2, 5)), "--row", str(row),
            "--samples", str(max(8, min(r.randint(16, 2000), 4 * MIB // row))),
            "--batch", str(r.randint(1, 64)), "--seed", str(r.randint(1, 1 << 30))]
    if r.random() < 0.4:
        args.append("--direct")
    sc["layout"] = plan_layout(r, row, 0, 1)
    return args


def plan_forker(r, sc):
    sc["signal"], sc["pressure"] = None, False
    sc["layout"] = pick(r, [("4096", 60), ("1024", 15), ("auto", 10), (None, 15)])
    return ["--child-cuda"] if r.random() < 0.5 else []


def plan_dltest(r, sc):
    sc["signal"], sc["pressure"] = None, False
    sc["layout"] = pick(r, [("4096", 70), ("auto", 15), (None, 15)])
    case = r.choice(DLTEST_CASES)
    return [case] if case else []


PLANS = {"trainer": plan_trainer, "trainer_ptsz": plan_trainer, "drvloader": plan_drvloader,
         "reload": plan_reload, "forker": plan_forker, "dltest": plan_dltest}


def bash_array(name, items):
    return "%s=(%s)\n" % (name, " ".join(shlex.quote(x) for x in items))


def write_plan(d, sc):
    with open(os.path.join(d, "scenario.json"), "w") as f:
        json.dump(sc, f, indent=1, sort_keys=True)
    with open(os.path.join(d, "plan.sh"), "w") as f:
        f.write("APP=%s\n" % shlex.quote(sc["app"]))
        f.write(bash_array("ARGS", sc["args"]))
        f.write(bash_array("DEV_ENV", ["%s=%s" % kv for kv in sorted(sc["dev_env"].items())]))
        f.write(bash_array("SHIM_ENV", ["%s=%s" % kv for kv in sorted(sc["shim_env"].items())]))
        f.write("SIGNAL=%s\nSIGNAL_AT=%s\n" % (sc["signal"] or "", sc.get("signal_at", "")))
        f.write("PRESSURE=%d\nFAULTS=%d\nTELEMETRY=%d\n"
                % (sc["pressure"], sc["faults"], sc.get("telemetry", False)))


def cmd_plan(seed, n, d):
    r = rng(seed, n, "plan")
    app = pick(r, APPS)
    sc = {"seed": seed, "n": int(n), "app": app, "dev_env": plan_dev_env(r, {})}
    sc["args"] = PLANS[app](r, sc)
    sc["shim_env"] = plan_shim_env(r, sc, sc.pop("layout"))
    sc["faults"] = r.random() < 0.4
    if sc["signal"]:
        sc["signal_at"] = round(r.uniform(0.1, 0.9), 3)  # of the reference run's time
    write_plan(d, sc)


def reports(path_glob):
    """{pid: report} of the JSON files matching path_glob that parse."""
    out = {}
    for p in sorted(glob.glob(path_glob)):
        try:
            with open(p) as f:
                v = json.load(f)
            out[v.get("pid", p)] = v
        except (OSError, ValueError):
            out[p] = None
    return out


def cmd_pressure(seed, n, d):
    """Device memory that fits the program and its mid-run allocation only if the pool gives back."""
    r = rng(seed, n, "pressure")
    with open(os.path.join(d, "scenario.json")) as f:
        sc = json.load(f)
    peak = max([v["peak_alloc"] for v in reports(os.path.join(d, "probe", "fake-*.json")).values()
                if v] or [64 * MIB])
    data = sc["samples"] * (sc["row"] + sc["mask"])
    alloc = -(-max(4 * MIB, int(data * r.uniform(0.5, 1.5))) // 65536) * 65536
    vmm = sc["alloc_api"] == "vmm" or "vmm" in sc["args"]
    # the room left beside the program and its allocation: less than the
    # data the pool holds (VMM maps whole 2 MiB granules: more room)
    slack = (6 if vmm else 2) * MIB + r.randint(0, 2) * MIB
    sc["dev_env"]["FAKECUDA_MEM"] = mib(peak + alloc + slack)
    sc["args"] += ["--alloc-mid", "%d@%d" % (alloc, sc["alloc_epoch"]), "--alloc-api", sc["alloc_api"]]
    e = sc["shim_env"]
    e["VRAMPOOL_SLAB"] = r.choice(["1M", "2M", "4M"])
    how = pick(r, [("bytes", 50), ("margin", 30), ("share", 20)])
    e.pop("VRAMPOOL_BUDGET", None)
    if how == "bytes":
        e["VRAMPOOL_BUDGET"] = mib(max(MIB, int(data * r.uniform(1.0, 2.0))))
    elif how == "margin":
        e["VRAMPOOL_MARGIN"] = r.choice(["0", "1M"])
        e["VRAMPOOL_RESERVE_BATCHES"] = r.choice(["0", "1", "2"])
    else:
        e["VRAMPOOL_BUDGET"] = "90%"
    sc["pressure_figures"] = {"probe_peak": peak, "alloc": alloc, "mem": sc["dev_env"]["FAKECUDA_MEM"]}
    write_plan(d, sc)


def cmd_faults(seed, n, d, calls):
    """FAKECUDA_FAIL: 1 to 3 driver calls of the pool, at call #N or from call N on.

    The calls are those the pool made in the same run without faults
    (DIR/nofault), less those the program makes itself (DIR/ref); N is
    drawn up to the number of times the pool made the call, so that the
    fault fires (unless the count depends on timing).
    """
    r = rng(seed, n, "faults")
    with open(os.path.join(d, "scenario.json")) as f:
        sc = json.load(f)
    own, made = set(), {}
    for v in reports(os.path.join(d, "ref", "fake-*.json")).values():
        own.update(v["calls"] if v else [])
    for v in reports(os.path.join(d, "nofault", "fake-*.json")).values():
        for k, c in (v["calls"] if v else {}).items():
            made[k] = made.get(k, 0) + c
    # cuInit only fails transiently here: a driver that never starts is no
    # CUDA at all on a real machine (the emulated runtime works without it).
    # The calls are taken in an order drawn over the whole table, and each
    # takes the same number of draws, so that a call the fault-free run made
    # or not by timing changes little else.
    order = sorted(set(calls) - {"cuInit"})
    r.shuffle(order)
    cand = [k for k in order if k not in own and made.get(k)]
    items = []

    def at(name):
        small, one_shot, pos, first = r.random() < 0.5, r.random() < 0.65, r.random(), r.choice([1, 2, 3])
        count = made.get(name, 1)
        k = first if small else 1 + int(pos * count)
        return "%s%s%d" % (name, "#" if one_shot else "@", min(k, count))

    for name in cand[:pick(r, [(1, 6), (2, 3), (3, 1)])]:
        items.append(at(name))
    # the two calls of known bug A, where they bite: at the program's out-of-memory
    bug_a, name = r.random() < 0.35, r.choice(["cuCtxGetDevice", "cuCtxGetCurrent"])
    extra = at(name)
    if sc["pressure"] and bug_a and name in cand and not any(i.startswith(name) for i in items):
        items.append(extra)
    # a transient start-up failure (known bug C)
    if r.random() < 0.08 and made.get("cuInit") and "cuInit" not in own:
        items.append("cuInit#1")
    print(",".join(items))


# ---- check ------------------------------------------------------------------

def load_check_stats():
    spec = importlib.util.spec_from_file_location("check_stats", os.path.join(ROOT, "tests", "e2e", "check_stats.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def norm_lines(text):
    out = []
    for line in text.splitlines():
        for pat, rep in NORMALISE:
            line = re.sub(pat, rep, line)
        out.append(line)
    return out


def compare_stats(cs, dump, dev):
    """check_stats.py's verdict on one dump and its device report: the first problem, or None."""
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        a, b = os.path.join(t, "s.json"), os.path.join(t, "f.json")
        for path, v in ((a, dump), (b, dev)):
            with open(path, "w") as f:
                json.dump(v, f)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = cs.main(["check_stats.py", a, b])
    return buf.getvalue().splitlines()[0] if rc else None


def read_back(path):
    """vrampool report reads the dump: None, or why not."""
    try:
        res = subprocess.run([os.path.join(ROOT, "build", "vrampool"), "report", path],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if res.returncode:
        return "exit %d: %s" % (res.returncode, res.stderr.strip().splitlines()[:1])
    return None


def check_dumps(d, name, sc, final_by, problems):
    """The dumps of run NAME: each final, ended as final_by says, read back, equal to the device."""
    cs = load_check_stats()
    dumps = reports(os.path.join(d, name, "stats-*.json"))
    devs = reports(os.path.join(d, name, "fake-*.json"))
    mode = sc["shim_env"].get("VRAMPOOL")
    for pid, s in dumps.items():
        path = os.path.join(d, name, "stats-%s.json" % pid)
        if s is None:
            problems.append("a dump does not parse: %s" % pid)
            continue
        if s.get("final") is not True or s.get("ended_by") != final_by(pid):
            problems.append("dump of %s: final %s, ended_by %s, expected true, %s"
                            % (pid, s.get("final"), s.get("ended_by"), final_by(pid)))
        b = s["bytes"]
        if b["requested"] != b["h2d"] + b["served_from_pool"]:
            problems.append("dump of %s: requested %d != h2d %d + served %d"
                            % (pid, b["requested"], b["h2d"], b["served_from_pool"]))
        if mode in ("off", "dry") and b["served_from_pool"] and not sc.get("malformed"):
            problems.append("dump of %s: VRAMPOOL=%s served %d bytes" % (pid, mode, b["served_from_pool"]))
        why = read_back(path)
        if why:
            problems.append("vrampool report cannot read the dump of %s: %s" % (pid, why))
        if devs.get(pid):
            why = compare_stats(cs, s, devs[pid])
            if why:
                problems.append("dump of %s against the device: %s" % (pid, why))
    for pid, v in devs.items():
        if v is None:
            problems.append("a device report does not parse: %s" % pid)
        elif pid not in dumps and v["h2d_calls"]:
            problems.append("process %s made copies to the device and left no dump" % pid)
    for line in read(os.path.join(d, name, "tel.jsonl")).splitlines():
        try:
            json.loads(line)
        except ValueError:
            problems.append("a telemetry line does not parse: %r" % line[:80])
            break
    return dumps, devs


def totals(reps, keys):
    return [sum(v[k] if isinstance(k, str) else v[k[0]][k[1]] for v in reps.values() if v) for k in keys]


def fired(devs):
    """Faults the device injected, over its reports."""
    return sum(v.get("injected_faults", 0) for v in devs.values() if v)


def cmd_check(d, name, faultfree=None):
    with open(os.path.join(d, "scenario.json")) as f:
        sc = json.load(f)
    p = lambda ext: os.path.join(d, name + ext)
    problems = []
    ref_rc, rc = int(read(os.path.join(d, "ref.rc"), "-1")), int(read(p(".rc"), "-1"))
    err = read(p(".err"))
    sig = read(p(".sig")).strip()
    spec = read(p(".spec")).strip()
    pid = read(p(".pid")).strip()
    ref_out, out = norm_lines(read(os.path.join(d, "ref.out"))), norm_lines(read(p(".out")))
    kind, signaled = "other", ""
    wrong = "MISMATCH" in err or (rc == 1 and ref_rc == 0)
    dumps, devs = {}, {}
    if ref_rc != 0:
        problems.append("the program exits %d without the shim: not a valid scenario" % ref_rc)
        kind = "invalid"
    elif os.path.exists(p(".timeout")):
        problems.append("still running at its time limit (killed): a hang?")
    elif sig and rc == 128 + getattr(signal, "SIG" + sig):
        signaled = "died"
        dumps, devs = check_dumps(d, name, sc, lambda _: "SIG" + sig, problems)
        if int(pid) not in dumps:
            problems.append("killed by SIG%s, no dump of process %s" % (sig, pid))
        extra = [x for x in out if x not in ref_out]
        if extra:
            problems.append("stdout has lines the run without the shim has not: %s" % extra[:2])
    else:
        signaled = "missed" if sig else ""
        if rc != ref_rc:
            problems.append("exit status %d, without the shim %d%s" % (rc, ref_rc, " (SIG%s sent)" % sig if sig else ""))
            if OOM.search(err):
                kind = "oom"
        if out != ref_out:
            diff = [x for x in out if x not in ref_out][:2] + ["missing: " + x for x in ref_out if x not in out][:2]
            problems.append("stdout differs from the run without the shim: %s" % diff)
        dumps, devs = check_dumps(d, name, sc, lambda _: "exit", problems)
        if rc == ref_rc == 0:
            refs = reports(os.path.join(d, "ref", "fake-*.json"))
            want = totals(refs, ["h2d_bytes", "h2d_calls"])
            got = totals(dumps, [("bytes", "requested"), ("copies", "h2d_calls")])
            if want != got:
                problems.append("requested %d bytes in %d copies, the program made %d in %d"
                                % (got[0], got[1], want[0], want[1]))
        # one-shot faults after which the pool never took a row in for the
        # whole run, where the run without them serves: the pool was
        # switched off, not held back for a while
        pooled, matched = totals(dumps, [("rows", "captured"), ("copies", "matched_calls")])
        # (a failed probe or slab allocation is retried after 4, 8, 16, ...
        # matched copies: fewer than 32 may end before the retry)
        transient = spec and "@" not in spec and fired(devs) and matched >= 32
        layout = sc["shim_env"].get("VRAMPOOL_LAYOUT")
        if (faultfree is not None and transient and not problems and pooled == 0 and layout and
                not sc["shim_env"].get("VRAMPOOL") and not sc.get("malformed")):
            ff = totals(reports(os.path.join(d, faultfree, "stats-*.json")), [("rows", "hits")])[0]
            if ff > 0:
                problems.append("no row pooled after one-shot faults (FAKECUDA_FAIL=%s); "
                                "without them %d hits" % (spec, ff))
                kind = "noserve"
    if wrong:
        kind = "wrong"
    n_fired = fired(devs)
    fired_names = sorted({k for v in devs.values() if v for k in v.get("injected", {})})
    with open(p(".problems"), "w") as f:
        f.write("".join(x + "\n" for x in problems))
    # the failure's cause in short, to group failures: the first problem
    # without its figures, and the calls that were failed
    cause = re.sub(r"\b\d+\b", "N", re.sub(r"FAKECUDA_FAIL=\S+", "", problems[0]))[:100] if problems else ""
    cause += " [%s]" % " ".join(fired_names) if cause and fired_names else ""
    hits, evicted = totals(dumps, [("rows", "hits"), ("pool", "evictions")])
    print("VERDICT=%s KIND=%s FIRED=%d WRONG=%d SIGNALED=%s HITS=%d EVICTED=%d FIRED_NAMES=%s CAUSE=%s"
          % ("fail" if problems else "ok", kind, n_fired, wrong, signaled, hits, evicted,
             shlex.quote(" ".join(fired_names)), shlex.quote(cause)))


def main(argv):
    try:
        if argv[1] == "plan" and len(argv) == 5:
            return cmd_plan(*argv[2:5])
        if argv[1] == "pressure" and len(argv) == 5:
            return cmd_pressure(*argv[2:5])
        if argv[1] == "faults" and len(argv) >= 5:
            return cmd_faults(argv[2], argv[3], argv[4], argv[5:])
        if argv[1] == "check" and len(argv) in (4, 6):
            return cmd_check(argv[2], argv[3], argv[5] if len(argv) == 6 else None)
    except IndexError:
        pass
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)
