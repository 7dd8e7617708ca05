#!/usr/bin/python3
"""PyTorch reference for compute_bench: the same models, batch, optimizer
(Adam 1e-3) and thread count, Fashion-MNIST from the same IDX files.
Prints the same row format as compute_bench.

--precision bf16 is PyTorch's automatic mixed precision as its users run it:
torch.autocast(dtype=torch.bfloat16) around forward and loss, FP32 master
weights and optimizer state, no GradScaler (bf16 has FP32's exponent range).

  /usr/bin/python3 bench/compute/torch_bench.py --model cnn --batch 64 --seconds 10 --threads 2
  /usr/bin/python3 bench/compute/torch_bench.py --model cnn --precision bf16
"""
import argparse
import contextlib
import gzip
import resource
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False),
                                       nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01))

    def forward(self, x):
        h = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(h + (x if self.short is None else self.short(x)))


def make(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "resnet":
        return nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32, eps=1e-3, momentum=0.01),
                             nn.ReLU(), Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    raise SystemExit("unknown model " + name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: torch.autocast bfloat16 around forward and loss, FP32 weights")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=0, help="train this many epochs and print test accuracy")
    p.add_argument("--header", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device("cuda" if a.device == "gpu" else "cpu")
    x = torch.from_numpy(read_idx(a.data + "/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(read_idx(a.data + "/train-labels-idx1-ubyte.gz").astype(np.int64))
    model = make(a.model).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    n = x.shape[0]
    g = torch.Generator().manual_seed(1)
    order = torch.randperm(n, generator=g)
    pos = [0]

    def autocast():
        if a.precision == "bf16":
            return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        if pos[0] + a.batch > n:
            pos[0] = 0
        idx = order[pos[0]:pos[0] + a.batch]
        pos[0] += a.batch
        xb, yb = x[idx].to(dev), y[idx].to(dev)
        with autocast():
            loss = F.cross_entropy(model(xb), yb, reduction="none").sum() / a.batch
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    if a.epochs:
        for _ in range(a.epochs):
            for _ in range(n // a.batch):
                step()
        model.eval()
        tx = torch.from_numpy(read_idx(a.data + "/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
        ty = torch.from_numpy(read_idx(a.data + "/t10k-labels-idx1-ubyte.gz").astype(np.int64))
        with torch.no_grad(), autocast():
            acc = (model(tx.to(dev)).argmax(1).cpu() == ty).float().mean().item()
        print(f"{a.model} epochs={a.epochs} batch={a.batch} precision={a.precision} test_accuracy={acc:.4f}")
        return
    for _ in range(a.warmup):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    steps = 0
    while time.perf_counter() - start < a.seconds:
        step()
        steps += 1
        if dev.type == "cuda":
            torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if a.header:
        print("# %-8s %6s %-6s %7s %12s %12s" % ("model", "batch", "device", "steps", "samples/s", "peak_MiB"))
    print("  %-8s %6d %-6s %7d %12.1f %12.1f" % (a.model, a.batch, a.device, steps, steps * a.batch / elapsed, peak))


if __name__ == "__main__":
    main()
