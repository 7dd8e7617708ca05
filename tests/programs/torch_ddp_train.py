"""A small MLP trained with PyTorch DistributedDataParallel on a slice of
Fashion-MNIST: the program a user hands to torchrun, or to
`mirrored-launch local --workers 2 -- python3 THIS.py`.

Both launchers give each process MASTER_ADDR, MASTER_PORT, RANK and
WORLD_SIZE, which init_process_group(init_method="env://") reads. With
--checkpoint-dir, rank 0 saves the model after every epoch and a restarted
job resumes from the last one.
"""
import argparse
import gzip
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

try:  # writes TORCHELASTIC_ERROR_FILE when main() raises
    from torch.distributed.elastic.multiprocessing.errors import record
except ImportError:
    def record(fn):
        return fn


def parse_flags():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST IDX .gz files")
    p.add_argument("--train-examples", type=int, default=4096, help="first N training images")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-per-rank", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint-dir", help="save after every epoch and resume from there")
    flags = p.parse_args()
    if flags.epochs < 1 or flags.batch_per_rank < 1 or flags.train_examples < 1:
        p.error("--epochs, --batch-per-rank and --train-examples must be at least 1")
    return flags


def read_idx(data_dir, count):
    with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)[:count]
    with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:count]
    return torch.from_numpy(images.astype("float32") / 255), torch.from_numpy(labels.astype("int64"))


@record
def main():
    flags = parse_flags()
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(flags.seed)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=flags.lr)
    start_epoch, last_loss = 0, float("nan")
    path = flags.checkpoint_dir and os.path.join(flags.checkpoint_dir, "checkpoint.pt")
    if path and os.path.exists(path):
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"]
        print(f"rank {rank}: resuming after epoch {start_epoch} from {path}", flush=True)

    images, labels = read_idx(flags.data, flags.train_examples)
    global_batch = flags.batch_per_rank * world
    for epoch in range(start_epoch, flags.epochs):
        for begin in range(0, len(images) - global_batch + 1, global_batch):
            mine = slice(begin + rank * flags.batch_per_rank, begin + (rank + 1) * flags.batch_per_rank)
            loss = torch.nn.functional.cross_entropy(model(images[mine]), labels[mine])
            optimizer.zero_grad()
            loss.backward()  # DDP averages the gradients across ranks here
            optimizer.step()
            if rank == 0 and epoch == start_epoch and begin == 0:
                print("first step done", flush=True)
        last_loss = loss.item()  # rank 0's last batch; DDP keeps every rank's weights equal
        if rank == 0:
            print(f"epoch {epoch + 1}/{flags.epochs}: last batch loss {last_loss:.9f}", flush=True)
            if path:
                os.makedirs(flags.checkpoint_dir, exist_ok=True)
                torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch + 1}, path + ".tmp")
                os.replace(path + ".tmp", path)  # never a half-written checkpoint
    if rank == 0:
        print(f"final loss {last_loss!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
