"""A small PyTorch DataLoader loop for tests/gpu/check.sh.

A synthetic uint8 image dataset (seeded), DataLoader with shuffle (seeded
per epoch), pin_memory=True and non_blocking=True copies to the GPU. For
every batch it computes a checksum on the device (sum of bytes and a
position-weighted sum, int64) and it records each epoch's wall time.
Prints one JSON object: {"checksums": [...], "epoch_s": [...]}.
Run it with and without the shim: the checksums must be identical.

Usage: torch_loop.py [N [EPOCHS]] [--alloc-mid EXTRA_MIB@EPOCH]
With --alloc-mid, at the start of EPOCH (1-based; after the first epoch
filled the pool) the loop empties PyTorch's cache, reads the free device
memory and allocates that much plus EXTRA_MIB MiB as one tensor, fills it
and checks it, then frees it: an allocation that fits only if the shim
gives the pool's memory back (evict + retry; under
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, through cuMemCreate).
The JSON then also holds "alloc_mid": {"epoch", "free", "bytes", "ok",
"error"}; exit status 1 when it failed. Without the shim the allocation
cannot fit: use it only with the pool.
"""
import argparse
import json
import time

import torch
from torch.utils.data import DataLoader, Dataset

ARGS = argparse.ArgumentParser(description="PyTorch DataLoader loop for tests/gpu/check.sh")
ARGS.add_argument("n", nargs="?", type=int, default=2048)
ARGS.add_argument("epochs", nargs="?", type=int, default=4)
ARGS.add_argument("--alloc-mid", default="", help="EXTRA_MIB@EPOCH")
OPTS = ARGS.parse_args()
N = OPTS.n
EPOCHS = OPTS.epochs
SHAPE = (3, 64, 64)


class Images(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1234)
        self.x = torch.randint(0, 256, (N,) + SHAPE, dtype=torch.uint8, generator=g)
        self.y = torch.randint(0, 1000, (N,), dtype=torch.int64, generator=g)

    def __len__(self):
        return N

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def alloc_mid(dev, epoch, extra_mib):
    """Allocates the free device memory plus extra_mib MiB, fills and checks it."""
    rec = {"epoch": epoch, "free": 0, "bytes": 0, "ok": False, "error": ""}
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info()
        n = free + extra_mib * (1 << 20)
        rec["free"], rec["bytes"] = free, n
        big = torch.empty(n, dtype=torch.uint8, device=dev)
        big.fill_(0x5A)
        # Read back single bytes (no further device allocation: the device is full).
        rec["ok"] = all(int(big[i].item()) == 0x5A for i in (0, n // 3, n // 2, n - 1))
        del big
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except RuntimeError as e:          # torch.cuda.OutOfMemoryError is one
        rec["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        torch.cuda.empty_cache()
    return rec


def main():
    dev = torch.device("cuda")
    mid = None
    if OPTS.alloc_mid:
        extra, _, at = OPTS.alloc_mid.partition("@")
        mid = (int(extra), int(at or 2))
    torch.zeros(1, device=dev)  # context and allocator up before timing
    ds = Images()
    weights = torch.arange(1, 3 * 64 * 64 + 1, device=dev, dtype=torch.int64)
    sums, times = [], []
    mid_rec = None
    for epoch in range(EPOCHS):
        if mid and epoch + 1 == mid[1]:
            mid_rec = alloc_mid(dev, epoch + 1, mid[0])
        g = torch.Generator().manual_seed(epoch)
        dl = DataLoader(ds, batch_size=64, shuffle=True, generator=g, pin_memory=True, num_workers=0)
        t0 = time.time()
        for x, y in dl:
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            flat = x.view(x.shape[0], -1).to(torch.int64)
            s = (flat.sum() * 1000003 + (flat * weights).sum() + y.sum()).item()
            sums.append(s)
        torch.cuda.synchronize()
        times.append(time.time() - t0)
    out = {"checksums": sums, "epoch_s": times}
    if mid:
        out["alloc_mid"] = mid_rec
    print(json.dumps(out))
    return 0 if not mid or (mid_rec and mid_rec["ok"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
