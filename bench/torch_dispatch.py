"""Baseline for bench/trace.c: PyTorch eager dispatch cost of `x = x + 1` on
a 1-element tensor, in ns/op (median of 5 runs of 100k ops). Prints one
number. Run by bench/run.sh only when the interpreter has torch."""
import time

import torch

torch.set_num_threads(1)
x = torch.zeros(1)
runs = []
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(100_000):
        x = x + 1
    runs.append((time.perf_counter() - t0) / 100_000 * 1e9)
runs.sort()
print(f"{runs[len(runs) // 2]:.1f}")
