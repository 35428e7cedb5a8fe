#!/usr/bin/env python3
"""The upload loop of a training job written with CuPy: a dataset of
--samples rows of --row bytes in host memory, reshuffled every epoch,
assembled batch by batch in page-locked buffers (cupyx.empty_pinned) and
uploaded without blocking on a non-blocking stream, alternately with
ndarray.set(pinned, stream) and cupy.asarray(pinned) under `with stream:`
(--upload), each batch read back without blocking into page-locked memory
(ndarray.get(stream, out, blocking=False)) and compared with numpy once
its event has completed. A ring of --ring buffers lets the host assemble the next batches
while the device works; a buffer is reused only after its batch's readback
has completed.

Prints one line per epoch:
  epoch E batches N bytes B device_h2d D upload_ms U seconds S
B: the bytes the epoch asked to upload; D: the host-to-device bytes the
device itself counted during the epoch (the emulated device's
fakecuda_counter, through ctypes; "-" elsewhere); U: the uploads' device
time between events. Then "verified OK" and a total line, or MISMATCH lines
and exit status 1. --json PATH also writes the figures and a CRC-32 of
every batch read back (for A/B comparison of runs with the same --seed).

--backend cupy (the default) is CuPy; --backend standin is
tests/python/cupy_standin.py, CuPy's driver route without CuPy, for the
emulated device where CuPy cannot start. Exit status 3 (one line saying
why) when CUDA cannot start, 2 for bad arguments.
"""
import argparse
import ctypes
import json
import os
import sys
import time
import zlib

import numpy as np


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--row", type=int, default=3072)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--ring", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--upload", choices=("set", "asarray", "mixed"), default="mixed")
    p.add_argument("--backend", choices=("cupy", "standin"), default="cupy")
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args(argv)
    if min(a.samples, a.row, a.batch, a.epochs, a.ring) < 1 or a.batch > a.samples:
        p.error("sizes must be positive and --batch at most --samples")
    return a


def load_backend(name):
    """Returns (module with CuPy's API, empty_pinned)."""
    if name == "standin":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import cupy_standin as cp
        return cp, cp.empty_pinned
    import cupy as cp
    import cupyx
    return cp, cupyx.empty_pinned


def device_h2d_counter():
    """The emulated device's host-to-device byte counter, or None on a real
    driver. Asked of the libcuda.so.1 already loaded (by CuPy's runtime or
    the stand-in), through its handle."""
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        fn = lib.fakecuda_counter
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_ulonglong
    fn.argtypes = [ctypes.c_char_p]
    return lambda: fn(b"h2d_bytes")


def write_result(path, out, rc):
    """Writes the run's figures (out, "verified" added) to path when given;
    returns rc, the run's exit status (tests/python/client_loop.py too)."""
    out["verified"] = rc == 0
    if path:
        with open(path, "w") as f:
            json.dump(out, f)
    return rc


def emulated_device():
    try:
        ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOW).fakecuda_counter
        return True
    except (OSError, AttributeError):
        return False


class Slot:
    """One ring buffer: page-locked source and readback, device array,
    events around the upload and after the readback."""

    def __init__(self, cp, empty_pinned, batch, row):
        self.pinned = empty_pinned((batch, row), np.uint8)
        self.back = empty_pinned((batch, row), np.uint8)
        self.dev = cp.empty((batch, row), dtype=np.uint8)
        self.start = cp.cuda.Event()
        self.end = cp.cuda.Event()
        self.done = cp.cuda.Event()
        self.idx = None
        self.number = 0


def run(cp, empty_pinned, a, out):
    rng = np.random.default_rng(a.seed)
    data = rng.integers(0, 256, size=(a.samples, a.row), dtype=np.uint8)
    nbatches = a.samples // a.batch          # full batches only
    stream = cp.cuda.Stream(non_blocking=True)
    slots = [Slot(cp, empty_pinned, a.batch, a.row) for _ in range(a.ring)]
    counter = device_h2d_counter()
    state = {"batches": 0, "bad": 0, "upload_ms": 0.0}
    crcs = out["checksums"]

    def finish(s):
        s.done.synchronize()
        state["upload_ms"] += cp.cuda.get_elapsed_time(s.start, s.end)
        crcs.append(zlib.crc32(s.back))
        if not np.array_equal(s.back, data[s.idx]):
            rows = np.nonzero((s.back != data[s.idx]).any(axis=1))[0]
            print("MISMATCH batch %d: %d of %d rows differ, first row %d (sample %d)"
                  % (s.number, len(rows), a.batch, rows[0], s.idx[rows[0]]), flush=True)
            state["bad"] += 1
        state["batches"] += 1
        s.idx = None

    total_bytes = total_h2d = seq = 0
    for epoch in range(1, a.epochs + 1):
        perm = rng.permutation(a.samples)
        h0 = counter() if counter else None
        t0 = time.perf_counter()
        state["upload_ms"] = 0.0
        for b in range(nbatches):
            s = slots[b % a.ring]
            if s.idx is not None:
                finish(s)
            idx = perm[b * a.batch:(b + 1) * a.batch]
            np.take(data, idx, axis=0, out=s.pinned)
            s.start.record(stream)
            if a.upload == "asarray" or (a.upload == "mixed" and b % 2):
                with stream:
                    s.dev = cp.asarray(s.pinned)
            else:
                s.dev.set(s.pinned, stream=stream)
            s.end.record(stream)
            s.dev.get(stream=stream, out=s.back, blocking=False)
            s.done.record(stream)
            s.idx, s.number = idx, seq
            seq += 1
        for s in sorted((x for x in slots if x.idx is not None), key=lambda x: x.number):
            finish(s)
        stream.synchronize()
        seconds = time.perf_counter() - t0
        nbytes = nbatches * a.batch * a.row
        h2d = counter() - h0 if counter else None
        total_bytes += nbytes
        total_h2d = total_h2d + h2d if h2d is not None else None
        print("epoch %d batches %d bytes %d device_h2d %s upload_ms %.3f seconds %.3f"
              % (epoch, nbatches, nbytes, "-" if h2d is None else h2d, state["upload_ms"], seconds),
              flush=True)
        out["epochs"].append({"bytes": nbytes, "device_h2d": h2d, "upload_ms": state["upload_ms"],
                              "seconds": seconds})
    if state["bad"]:
        print("%d of %d batches differ" % (state["bad"], state["batches"]))
        return 1
    print("verified OK")
    print("total batches %d bytes %d device_h2d %s"
          % (state["batches"], total_bytes, "-" if total_h2d is None else total_h2d))
    return 0


def main(argv):
    a = parse_args(argv)
    out = {"backend": a.backend, "samples": a.samples, "row": a.row, "batch": a.batch,
           "seed": a.seed, "epochs": [], "checksums": []}
    try:
        cp, empty_pinned = load_backend(a.backend)
        out["cupy"] = getattr(cp, "__version__", "standin")
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:
        print("cupy_loop: CUDA cannot start here (%s backend): %s: %s" % (a.backend, type(e).__name__, e),
              file=sys.stderr)
        if a.backend == "cupy" and emulated_device():
            print("cupy_loop: this is the emulated device, which hands out none of the driver's private "
                  "export tables (cuGetExportTable) that CuPy's embedded CUDA runtime needs: use "
                  "--backend standin here, CuPy on a GPU", file=sys.stderr)
        return 3
    return write_result(a.json, out, run(cp, empty_pinned, a, out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
