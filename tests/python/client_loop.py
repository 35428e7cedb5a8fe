#!/usr/bin/env python3
"""The upload loop of a training job, written with one real CUDA client
library's own API (--client): NVIDIA's cuda-bindings (`bindings`),
numba-cuda (`numba`) or PyCUDA (`pycuda`). A dataset of --samples rows of
--row bytes in host memory, reshuffled every epoch; each batch of --batch
rows is gathered on the host and uploaded by one of the client's upload
routes, in turn (the routes below), then read back with the client's
download call and compared with numpy, every batch, every byte.

  bindings: cuMemcpyHtoD from pageable memory; cuMemcpyHtoDAsync from
            cuMemHostAlloc memory on a stream of its own; cuMemcpy from
            page-locked memory (unified addressing); cuMemcpy2D (row pitch)
  numba:    cuda.to_device (a new device array each time); copy_to_device
            from cuda.pinned_array on a cuda.stream(); copy_to_device from
            pageable memory
  pycuda:   memcpy_htod; memcpy_htod_async from pagelocked_empty on a
            Stream; gpuarray.to_gpu (a new array each time)

PyCUDA works in the device's primary context (pycuda.autoprimaryctx).

Prints one line per epoch:
  epoch E batches N bytes B device_h2d D seconds S
B: the bytes the epoch asked to upload; D: the host-to-device bytes the
emulated device counted during the epoch (fakecuda_counter through
ctypes; "-" on a real driver). Then "verified OK" and a total line, or
MISMATCH lines and exit status 1. --alloc-mid E: at the start of epoch E
the client allocates, with its own API, in 64 KiB pieces, half a MiB
more than the device says is free (memory pressure: it fits only if the
shim's pool gives memory back), writes it, frees it. --json PATH writes the figures and a CRC-32
of every batch read back (A/B comparison of runs with the same --seed).
Exit status 3 (one line saying why) when the client cannot start, 4 when
the mid-run allocation fails, 2 for bad arguments.
"""
import argparse
import ctypes
import sys
import time
import zlib

import numpy as np

# The device's counter and the result file, as the CuPy loop has them
# (this directory is on sys.path when a script of it runs).
from cupy_loop import device_h2d_counter, write_result

MIB = 1 << 20
CHUNK = 64 << 10


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--client", choices=("bindings", "numba", "pycuda"), required=True)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--row", type=int, default=3072)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--alloc-mid", type=int, default=0, metavar="EPOCH")
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args(argv)
    if min(a.samples, a.row, a.batch, a.epochs) < 1 or a.batch > a.samples:
        p.error("sizes must be positive and --batch at most --samples")
    return a


class Bindings:
    """cuda-bindings' driver module, CUresult checked on every call."""

    def __init__(self, batch_bytes):
        from cuda.bindings import driver
        import cuda.bindings
        self.d = driver
        self.version = "cuda-bindings " + cuda.bindings.__version__
        self.ok(driver.cuInit(0))
        dev = self.ok(driver.cuDeviceGet(0))
        self.ctx = self.ok(driver.cuDevicePrimaryCtxRetain(dev))
        self.ok(driver.cuCtxSetCurrent(self.ctx))
        self.stream = self.ok(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))
        self.n = batch_bytes
        self.dev = self.ok(driver.cuMemAlloc(batch_bytes))
        hp = self.ok(driver.cuMemHostAlloc(batch_bytes, 0))
        self.pinned = np.ctypeslib.as_array((ctypes.c_uint8 * batch_bytes).from_address(int(hp)))
        self.routes = ["cuMemcpyHtoD", "cuMemcpyHtoDAsync", "cuMemcpy", "cuMemcpy2D"]

    def ok(self, ret):
        err, rest = ret[0], ret[1:]
        if err != self.d.CUresult.CUDA_SUCCESS:
            raise RuntimeError("%s" % err)
        return rest[0] if len(rest) == 1 else rest

    def upload(self, route, rows):
        d, n = self.d, self.n
        if route == "cuMemcpyHtoD":
            self.ok(d.cuMemcpyHtoD(self.dev, rows.ctypes.data, n))
            return
        self.pinned.reshape(rows.shape)[:] = rows
        src = self.pinned.ctypes.data
        if route == "cuMemcpyHtoDAsync":
            self.ok(d.cuMemcpyHtoDAsync(self.dev, src, n, self.stream))
            self.ok(d.cuStreamSynchronize(self.stream))
        elif route == "cuMemcpy":
            self.ok(d.cuMemcpy(self.dev, src, n))
        else:
            c = d.CUDA_MEMCPY2D()
            c.srcMemoryType = d.CUmemorytype.CU_MEMORYTYPE_HOST
            c.srcHost = src
            c.srcPitch = rows.shape[1]
            c.dstMemoryType = d.CUmemorytype.CU_MEMORYTYPE_DEVICE
            c.dstDevice = self.dev
            c.dstPitch = rows.shape[1]
            c.WidthInBytes = rows.shape[1]
            c.Height = rows.shape[0]
            self.ok(d.cuMemcpy2D(c))

    def readback(self, out):
        self.ok(self.d.cuMemcpyDtoH(out.ctypes.data, self.dev, self.n))

    def mem_free(self):
        return int(self.ok(self.d.cuMemGetInfo())[0])

    def alloc(self, n):
        p = self.ok(self.d.cuMemAlloc(n))
        self.ok(self.d.cuMemsetD8(p, 7, n))
        return p

    def free(self, p):
        self.ok(self.d.cuMemFree(p))


class Numba:
    """numba-cuda's array API."""

    def __init__(self, batch_bytes):
        from numba import cuda
        import numba_cuda
        self.cuda = cuda
        self.version = "numba-cuda " + numba_cuda.__version__
        self.stream = cuda.stream()
        self.pinned = cuda.pinned_array(batch_bytes, dtype=np.uint8)
        self.dev = cuda.device_array(batch_bytes, dtype=np.uint8)
        self.routes = ["to_device", "copy_to_device(pinned, stream)", "copy_to_device(pageable)"]

    def upload(self, route, rows):
        flat = rows.reshape(-1)
        if route == "to_device":
            self.dev = self.cuda.to_device(flat)
        elif route == "copy_to_device(pageable)":
            self.dev.copy_to_device(flat)
        else:
            self.pinned[:] = flat
            self.dev.copy_to_device(self.pinned, stream=self.stream)
            self.stream.synchronize()

    def readback(self, out):
        self.dev.copy_to_host(out.reshape(-1))

    def mem_free(self):
        ctx = self.cuda.current_context()
        ctx.deallocations.clear()       # numba defers frees: measure after them
        return int(ctx.get_memory_info().free)

    def alloc(self, n):
        a = self.cuda.device_array(n, dtype=np.uint8)
        self.cuda.driver.device_memset(a, 7, n)
        return a

    def free(self, a):
        pass                            # dropped with the list; freed by numba


class PyCUDA:
    """PyCUDA in the primary context."""

    def __init__(self, batch_bytes):
        import pycuda
        import pycuda.autoprimaryctx  # noqa: F401 (makes the primary context current)
        import pycuda.driver as drv
        import pycuda.gpuarray as gpuarray
        self.drv, self.gpuarray = drv, gpuarray
        self.version = "pycuda " + pycuda.VERSION_TEXT
        self.stream = drv.Stream()
        self.pinned = drv.pagelocked_empty(batch_bytes, dtype=np.uint8)
        self.dev = drv.mem_alloc(batch_bytes)
        self.arr = None
        self.routes = ["memcpy_htod", "memcpy_htod_async", "gpuarray.to_gpu"]

    def upload(self, route, rows):
        flat = rows.reshape(-1)
        self.arr = None
        if route == "memcpy_htod":
            self.drv.memcpy_htod(self.dev, flat)
        elif route == "memcpy_htod_async":
            self.pinned[:] = flat
            self.drv.memcpy_htod_async(self.dev, self.pinned, self.stream)
            self.stream.synchronize()
        else:
            self.arr = self.gpuarray.to_gpu(flat)

    def readback(self, out):
        if self.arr is not None:
            self.arr.get(ary=out.reshape(-1))
        else:
            self.drv.memcpy_dtoh(out.reshape(-1), self.dev)

    def mem_free(self):
        return int(self.drv.mem_get_info()[0])

    def alloc(self, n):
        a = self.drv.mem_alloc(n)
        self.drv.memset_d8(a, 7, n)
        return a

    def free(self, a):
        a.free()


CLIENTS = {"bindings": Bindings, "numba": Numba, "pycuda": PyCUDA}


def alloc_over_free(c):
    """Allocates, in CHUNK pieces (the emulated device's arena is flat:
    pieces fit the holes the program's own frees leave), half a MiB more
    than the device says is free, writes each piece, frees them all.
    Returns the bytes allocated."""
    want = c.mem_free() + MIB // 2
    held = []
    try:
        while len(held) * CHUNK < want:
            held.append(c.alloc(CHUNK))
    finally:
        for h in held:
            c.free(h)
        del held[:]
    return want


def run(c, a, out):
    rng = np.random.default_rng(a.seed)
    data = rng.integers(0, 256, size=(a.samples, a.row), dtype=np.uint8)
    nbatches = a.samples // a.batch
    back = np.empty((a.batch, a.row), dtype=np.uint8)
    counter = device_h2d_counter()
    bad = batches = total_bytes = 0
    total_h2d = 0 if counter else None
    for epoch in range(1, a.epochs + 1):
        if epoch == a.alloc_mid:
            try:
                n = alloc_over_free(c)
            except Exception as e:
                print("client_loop: the mid-run allocation failed: %s: %s" % (type(e).__name__, e),
                      file=sys.stderr)
                return 4
            print("alloc-mid %d bytes ok" % n, flush=True)
        perm = rng.permutation(a.samples)
        h0 = counter() if counter else None
        t0 = time.perf_counter()
        for b in range(nbatches):
            idx = perm[b * a.batch:(b + 1) * a.batch]
            rows = np.take(data, idx, axis=0)
            c.upload(c.routes[batches % len(c.routes)], rows)
            back[:] = 0
            c.readback(back)
            out["checksums"].append(zlib.crc32(back))
            if not np.array_equal(back, rows):
                diff = np.nonzero((back != rows).any(axis=1))[0]
                print("MISMATCH batch %d (%s): %d of %d rows differ, first row %d (sample %d)"
                      % (batches, c.routes[batches % len(c.routes)], len(diff), a.batch, diff[0],
                         idx[diff[0]]), flush=True)
                bad += 1
            batches += 1
        nbytes = nbatches * a.batch * a.row
        h2d = counter() - h0 if counter else None
        total_bytes += nbytes
        if counter:
            total_h2d += h2d
        seconds = time.perf_counter() - t0
        print("epoch %d batches %d bytes %d device_h2d %s seconds %.3f"
              % (epoch, nbatches, nbytes, "-" if h2d is None else h2d, seconds), flush=True)
        out["epochs"].append({"bytes": nbytes, "device_h2d": h2d, "seconds": seconds})
    if bad:
        print("%d of %d batches differ" % (bad, batches))
        return 1
    print("verified OK")
    print("total batches %d bytes %d device_h2d %s"
          % (batches, total_bytes, "-" if total_h2d is None else total_h2d))
    return 0


def main(argv):
    a = parse_args(argv)
    out = {"client": a.client, "samples": a.samples, "row": a.row, "batch": a.batch,
           "seed": a.seed, "epochs": [], "checksums": []}
    try:
        c = CLIENTS[a.client](a.batch * a.row)
    except Exception as e:
        print("client_loop: %s cannot start here: %s: %s" % (a.client, type(e).__name__, e),
              file=sys.stderr)
        return 3
    out["version"] = c.version
    out["routes"] = c.routes
    print("client %s routes %s" % (c.version, ", ".join(c.routes)), flush=True)
    return write_result(a.json, out, run(c, a, out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
