"""Baseline for bench/vmath.c: PyTorch eager time of one elementwise
transcendental op on a [2048, 1536] f32 tensor, written into a preallocated
output (out=, as kiln writes into its parameter), median of 30 runs after 3
warm-up runs, on the given number of threads. Prints `name=ms` pairs on one
line, comma-separated. Run by bench/run.sh only when the interpreter has
torch. Inputs as in bench/vmath.c: [-4, 4) (log: [0.25, 4.25))."""
import sys
import time

import torch

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(threads)
n = 2048 * 1536
i = torch.arange(n, dtype=torch.float32).reshape(2048, 1536)
x = (i % 1000) / 125.0 - 4.0
xp = (i % 1000) / 250.0 + 0.25
y = torch.empty_like(x)
gelu = torch._C._nn.gelu
ops = {
    "exp": lambda: torch.exp(x, out=y),
    "log": lambda: torch.log(xp, out=y),
    "tanh": lambda: torch.tanh(x, out=y),
    "erf": lambda: torch.erf(x, out=y),
    "gelu": lambda: gelu(x, out=y),
    "gelu_tanh": lambda: gelu(x, approximate="tanh", out=y),
    "sin": lambda: torch.sin(x, out=y),
    "cos": lambda: torch.cos(x, out=y),
}
res = []
for name, fn in ops.items():
    for _ in range(3):
        fn()
    t = []
    for _ in range(30):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    t.sort()
    res.append(f"{name}={t[len(t) // 2]:.4f}")
print(",".join(res))
