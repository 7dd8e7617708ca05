#!/usr/bin/env python3
"""PyTorch on one GPU, the peer for mirrored's GPU training throughput
(bench/training/gpu_train.sh): the same model (bench/compute/torch_bench.py),
batch, Adam 1e-3, loss scaled by the batch, FP32 (TF32 off, as mirrored's
cuBLAS/cuDNN kernels), each batch gathered on the host and copied to the GPU
per step (as mirrored-worker does). Prints `samples_per_sec <x>` measured
after warm-up steps.

  python3 bench/training/torch_gpu_train.py --model cnn --batch 256 --steps 300 --warmup 50 --data DIR
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compute"))
from torch_bench import make, read_idx  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(1)
    x = torch.from_numpy(read_idx(a.data + "/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(read_idx(a.data + "/train-labels-idx1-ubyte.gz").astype(np.int64))
    model = make(a.model).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(1))
    start = None
    for step in range(a.steps):
        if step == a.warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        lo = (step * a.batch) % (x.shape[0] - a.batch)
        idx = order[lo:lo + a.batch]
        xb, yb = x[idx].to(dev), y[idx].to(dev)
        loss = F.cross_entropy(model(xb), yb, reduction="sum") / a.batch
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # a host sync per step, as mirrored-worker's loss/accuracy download
    torch.cuda.synchronize()
    print("samples_per_sec %.1f" % ((a.steps - a.warmup) * a.batch / (time.perf_counter() - start)), flush=True)


if __name__ == "__main__":
    main()
