"""PyTorch eager baseline for bench/train_step.c: the same training steps,
timed the same way (median of 50 steps after 10 warm-up steps; each step:
tensor from a fixed host batch, forward, loss, backward, SGD step; torch on
the CPU is synchronous, so a step's wall time is its work).

Usage: torch_train.py MODEL THREADS [bf16]   (MODEL: mlp, encoder, demo, demo_momentum)
bf16: forward and loss inside torch.autocast("cpu", dtype=torch.bfloat16), the
baseline of train_step.c's KILN_BENCH_TRAIN_AMP=bf16 rows.
Prints one line: "<median step ms> <peak RSS MiB>". Run by bench/run.sh
with /usr/bin/python3 (Debian's python3-torch), once per OPENBLAS_CORETYPE
setting; run.sh keeps the faster. One model per process so the peak RSS
(VmHWM) is the model's own.

Models (the same as train_step.c):
  mlp      Linear 784-1024-1024-10 with ReLU, x [128, 784], cross-entropy, SGD
  encoder  nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
           (dropout 0.1, train mode), x [16, 128, 256], loss = mean, SGD
  demo     the MLP on [128, 28, 28] (flatten first), cross-entropy, AdamW
           lr 1e-3, weight decay 0.01 (what `kiln train` / make demo uses),
           foreach=True: torch 1.13's multi-tensor AdamW, 8-10 ms a step here
           against 12 ms for its default per-parameter loop
  demo_momentum  the same model with SGD momentum 0.9 (informational)
"""
import sys
import time

import numpy as np
from bench_rss import peak_rss_mib
import torch
from torch import nn


def main():
    which = sys.argv[1]
    amp = len(sys.argv) > 3 and sys.argv[3] == "bf16"
    torch.set_num_threads(int(sys.argv[2]))
    torch.manual_seed(1)
    rng = np.random.default_rng(42)
    mlp = lambda: nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                nn.Linear(1024, 10))
    if which == "mlp":
        model, xh, momentum = mlp(), rng.random((128, 784), dtype=np.float32), 0.0
    elif which in ("demo", "demo_momentum"):
        model = nn.Sequential(nn.Flatten(), *mlp())
        xh, momentum = rng.random((128, 28, 28), dtype=np.float32), 0.9
    elif which == "encoder":
        model = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
        xh, momentum = rng.random((16, 128, 256), dtype=np.float32) * 2 - 1, 0.0
    else:
        raise SystemExit(f"torch_train.py: unknown model {which}")
    yh = rng.integers(0, 10, 128)
    model.train()
    if which == "demo":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                                foreach=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for s in range(60):
        t0 = time.perf_counter()
        x = torch.from_numpy(xh.copy())  # a new tensor per step, like kiln_from_host
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out = model(x)
            loss = out.mean() if which == "encoder" else loss_fn(out, torch.from_numpy(yh.copy()))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if s >= 10:
            times.append(time.perf_counter() - t0)
    times.sort()
    print(f"{(times[24] + times[25]) / 2 * 1e3:.4f} {peak_rss_mib():.1f}")


if __name__ == "__main__":
    main()
