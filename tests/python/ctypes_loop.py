#!/usr/bin/env python3
"""An upload loop that needs only Python's standard library: the CUDA
driver reached with ctypes (libcuda.so.1: the real driver, or the emulated
device under LD_LIBRARY_PATH=build/fakecuda). The wheel's test
(tests/e2e/wheel.sh) runs it through the installed `vrampool` command in a
virtual environment that holds nothing but the wheel.

A dataset of --samples rows of --row random bytes (seeded), reshuffled
every epoch; each batch of --batch rows is gathered into one host buffer,
uploaded with cuMemcpyHtoD_v2 from pageable memory, read back with
cuMemcpyDtoH_v2 and compared, every batch, every byte. Prints
  preload REAL-PATH-OF-LD_PRELOAD'S-FIRST-ENTRY (or -)
  epoch E batches N bytes B
then "verified OK", or MISMATCH lines and exit status 1; exit status 3
(one line saying why) when the driver cannot be loaded or a call fails.
"""
import argparse
import ctypes
import os
import random
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--row", type=int, default=3072)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    if min(a.samples, a.row, a.batch, a.epochs) < 1 or a.batch > a.samples:
        p.error("sizes must be positive and --batch at most --samples")
    return a


class Driver:
    """The few driver calls of the loop, each CUresult checked."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.call("cuInit", ctypes.c_uint(0))
        dev = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(0))
        self.ctx = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.ctx), dev)
        self.call("cuCtxSetCurrent", self.ctx)

    def call(self, name, *args):
        err = getattr(self.lib, name)(*args)
        if err != 0:
            raise RuntimeError("%s returned CUresult %d" % (name, err))

    def alloc(self, n):
        p = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(n))
        return p

    def upload(self, dev, data):
        self.call("cuMemcpyHtoD_v2", dev, ctypes.c_char_p(data), ctypes.c_size_t(len(data)))

    def readback(self, out, dev):
        self.call("cuMemcpyDtoH_v2", out, dev, ctypes.c_size_t(len(out)))


def main(argv):
    a = parse_args(argv)
    first = (os.environ.get("LD_PRELOAD") or "").split(":")[0]
    print("preload", os.path.realpath(first) if first else "-", flush=True)
    try:
        drv = Driver()
        n = a.batch * a.row
        dev = drv.alloc(n)
    except (OSError, RuntimeError) as e:
        print("cannot start the driver: %s" % e)
        return 3
    rng = random.Random(a.seed)
    data = rng.randbytes(a.samples * a.row)          # Python 3.9+
    rows = [data[i * a.row:(i + 1) * a.row] for i in range(a.samples)]
    out = ctypes.create_string_buffer(n)
    bad = 0
    for epoch in range(1, a.epochs + 1):
        order = list(range(a.samples))
        rng.shuffle(order)
        batches = 0
        for b in range(0, a.samples - a.batch + 1, a.batch):
            batch = b"".join(rows[i] for i in order[b:b + a.batch])
            try:
                drv.upload(dev, batch)
                drv.readback(out, dev)
            except RuntimeError as e:
                print("driver call failed: %s" % e)
                return 3
            if out.raw != batch:
                print("MISMATCH epoch %d batch %d" % (epoch, batches))
                bad += 1
            batches += 1
        print("epoch %d batches %d bytes %d" % (epoch, batches, batches * n), flush=True)
    if bad:
        return 1
    print("verified OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
