"""A JAX upload loop for tests/gpu/check.sh.

JAX (XLA's PJRT runtime) copies host-to-device through the CUDA driver API
(cuMemcpyHtoDAsync_v2, its entry points taken with cuGetProcAddress), never
through the runtime's cudaMemcpy*: this loop is how check.sh proves that the
shim sees, counts and pools such copies on a real GPU.

A seeded uint8 image dataset (N samples of 3x64x64) in host memory; every
epoch a seeded reshuffle, batches of B samples gathered on the host (a new
contiguous array each time, as a data loader collates) and uploaded with
jax.device_put. Each batch is read back (np.asarray) and compared byte for
byte with what was uploaded, and a checksum of it is computed on the device
(uint32 arithmetic, wrapping: the sum of its bytes times 1000003 plus a
position-weighted sum). Prints one JSON object:
  {"platform": ..., "checksums": [...], "epoch_s": [...],
   "mismatched_batches": M, "bytes": uploaded bytes}
Run it without the shim, with VRAMPOOL=off and with the pool: the checksums
must be identical and M must be 0. Exit status 1 when M > 0.

Usage: jax_loop.py [N [EPOCHS [BATCH [PLATFORM]]]]  (2048 4 64 gpu; PLATFORM
cpu runs the same loop on JAX's CPU backend, to test the script itself).
XLA_PYTHON_CLIENT_PREALLOCATE defaults to false here, so that JAX does not
take 75% of the device's memory before the pool's budget probe.
"""
import json
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
EPOCHS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 64
PLATFORM = sys.argv[4] if len(sys.argv) > 4 else "gpu"
SHAPE = (3, 64, 64)
ROW = 3 * 64 * 64


def main():
    dev = jax.devices(PLATFORM)[0]
    data = np.random.default_rng(1234).integers(0, 256, (N,) + SHAPE, dtype=np.uint8)
    weights = jax.device_put(np.arange(1, ROW + 1, dtype=np.uint32), dev)

    @jax.jit
    def checksum(b, w):
        flat = b.reshape(b.shape[0], ROW).astype(jnp.uint32)
        return jnp.sum(flat, dtype=jnp.uint32) * jnp.uint32(1000003) + jnp.sum(flat * w, dtype=jnp.uint32)

    sums, times = [], []
    mismatched = 0
    uploaded = 0
    for epoch in range(EPOCHS):
        order = np.random.default_rng(epoch).permutation(N)
        t0 = time.time()
        for first in range(0, N, BATCH):
            host = data[order[first:first + BATCH]]     # a fresh contiguous batch
            d = jax.device_put(host, dev)
            uploaded += host.nbytes
            sums.append(int(checksum(d, weights)))
            if not np.array_equal(np.asarray(d), host):
                mismatched += 1
        times.append(time.time() - t0)
    print(json.dumps({"platform": dev.platform, "checksums": sums, "epoch_s": times,
                      "mismatched_batches": mismatched, "bytes": uploaded}))
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
