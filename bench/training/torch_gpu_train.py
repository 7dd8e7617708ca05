#!/usr/bin/env python3
"""PyTorch on one GPU, the peer for mirrored's GPU training throughput
(bench/training/gpu_train.sh): the same model (bench/compute/torch_bench.py),
batch, Adam 1e-3, loss scaled by the batch, each batch gathered on the host
and copied to the GPU per step (as mirrored-worker does). Prints
`samples_per_sec <x> precision <p> final_loss <l>` measured after warm-up
steps (fp16 adds `loss_scale <s>`).

--precision, as mirrored-worker's flag of the same name:
  fp32  FP32 products, TF32 off in cuBLAS and cuDNN (the default; mirrored's
        fp32 kernels use no TF32 either)
  tf32  FP32 tensors, TF32 tensor cores for matmuls and convolutions
  bf16  torch.autocast bfloat16 around forward and loss; FP32 weights and
        Adam state; no loss scaling
  fp16  torch.autocast float16 and a GradScaler (dynamic loss scaling)

  python3 bench/training/torch_gpu_train.py --model cnn --batch 256 --steps 300 --warmup 50 --precision bf16 --data DIR
"""
import argparse
import contextlib
import os
import sys
import time

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="cnn")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = p.parse_args(argv)
    if not 0 <= a.warmup < a.steps:
        p.error("--warmup %d must be at least 0 and below --steps %d" % (a.warmup, a.steps))
    return a


def main():
    a = parse_args()
    # Imported after parsing: --help and a bad flag answer without torch's
    # start-up (seconds on the GPU machine).
    import torch
    import torch.nn.functional as F
    import numpy as np
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compute"))
    from torch_bench import make, read_idx

    # Set for every precision, never left to PyTorch's defaults (its
    # cudnn.allow_tf32 is True). Before --precision this script set both to
    # False as well, so fp32 rows compare with the figures recorded then.
    # bf16 and fp16 keep TF32 off: whatever autocast leaves in FP32 stays FP32.
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler("cuda") if a.precision == "fp16" else None

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=amp_dtype)

    dev = torch.device("cuda")
    torch.manual_seed(1)
    x = torch.from_numpy(read_idx(a.data + "/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(read_idx(a.data + "/train-labels-idx1-ubyte.gz").astype(np.int64))
    model = make(a.model).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(1))
    start = None
    last_loss = float("nan")
    for step in range(a.steps):
        if step == a.warmup:
            torch.cuda.synchronize()
            start = time.perf_counter()
        lo = (step * a.batch) % (x.shape[0] - a.batch)
        idx = order[lo:lo + a.batch]
        xb, yb = x[idx].to(dev), y[idx].to(dev)
        with autocast():
            loss = F.cross_entropy(model(xb), yb, reduction="sum") / a.batch
        opt.zero_grad(set_to_none=True)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)  # skips the step when a gradient is inf/NaN
            scaler.update()
        last_loss = loss.item()  # a host sync per step, as mirrored-worker's loss/accuracy download
    torch.cuda.synchronize()
    sps = (a.steps - a.warmup) * a.batch / (time.perf_counter() - start)
    line = "samples_per_sec %.1f precision %s final_loss %.4f" % (sps, a.precision, last_loss)
    if scaler is not None:
        line += " loss_scale %g" % scaler.get_scale()
    print(line, flush=True)


if __name__ == "__main__":
    main()
