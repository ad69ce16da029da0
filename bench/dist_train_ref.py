"""PyTorch DDP baseline for bench/dist_train.c: the same data-parallel
training steps, timed the same way (rank 0's median of 50 steps after 10
warm-up steps, the ranks starting together after a barrier).

Model and step as dist_train.c: Linear 784-1024-1024-10 with ReLU, a fixed
random batch [B, 784] per rank (B = per-rank batch, default 128: the global
batch 256 over 2 ranks), cross-entropy, plain SGD lr 0.01, the model wrapped
in DistributedDataParallel (gloo backend, default 25 MiB buckets: the
all-reduces overlap the backward pass). torch on the CPU is synchronous, so
a step's wall time is its work and its communication.

Usage: dist_train_ref.py [WORLD [BATCH_PER_RANK]]   (default 2 128)
Starts WORLD processes (torch.multiprocessing), one thread each, rendezvous
on a free local TCP port. Prints one line: "<rank 0's median step ms>".
Run by bench/run.sh with /usr/bin/python3 (Debian's python3-torch, gloo).
"""
import os
import queue
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world, batch, port, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    rng = np.random.default_rng(42 + rank)
    model = DDP(nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                              nn.Linear(1024, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    xh = rng.random((batch, 784), dtype=np.float32)
    yh = rng.integers(0, 10, batch)
    times = []
    for s in range(60):
        if s == 10:
            dist.barrier()
        t0 = time.perf_counter()
        x, y = torch.from_numpy(xh), torch.from_numpy(yh)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        out.put(float(np.median(times[10:])) * 1e3)
    dist.barrier()
    dist.destroy_process_group()


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, batch, port, out)) for r in range(world)]
    for p in procs:
        p.start()
    # wait for rank 0's result, but stop waiting when a rank has died: a rank
    # that crashed (seen once in a gloo rendezvous) left the parent waiting
    # its whole timeout, 10 minutes of make bench
    ms, deadline = None, time.time() + 600
    while ms is None:
        try:
            ms = out.get(timeout=1)
        except queue.Empty:
            dead = [q.exitcode for q in procs if q.exitcode not in (None, 0)]
            if dead or time.time() > deadline or all(q.exitcode is not None for q in procs):
                for q in procs:
                    q.kill()
                raise SystemExit(f"dist_train_ref.py: no result (rank exit codes {[q.exitcode for q in procs]})")
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"dist_train_ref.py: a rank exited with {p.exitcode}")
    print(f"{ms:.4f}")


if __name__ == "__main__":
    main()
