"""A small PyTorch DataLoader loop for tests/gpu/check.sh.

A synthetic uint8 image dataset (seeded), DataLoader with shuffle (seeded
per epoch), pin_memory=True and non_blocking=True copies to the GPU. For
every batch it computes a checksum on the device (sum of bytes and a
position-weighted sum, int64) and it records each epoch's wall time.
Prints one JSON object: {"checksums": [...], "epoch_s": [...]}.
Run it with and without the shim: the checksums must be identical.
"""
import json
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
EPOCHS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
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


def main():
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)  # context and allocator up before timing
    ds = Images()
    weights = torch.arange(1, 3 * 64 * 64 + 1, device=dev, dtype=torch.int64)
    sums, times = [], []
    for epoch in range(EPOCHS):
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
    print(json.dumps({"checksums": sums, "epoch_s": times}))


if __name__ == "__main__":
    main()
