"""PyTorch eager baseline of bench/varlen.c (issue 15 §4): the same encoder
layer (nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True): ReLU,
post-norm, dropout 0.1 in training mode) trained with plain SGD (lr 0.01,
loss = mean of the output) on the same unpadded batches: 16 sequences of one
length per step, the lengths drawn as bench/varlen.c draws them (splitmix64,
seed 2026, uniform over 16..256). PyTorch has no compile: two warm-up steps
(lengths 256 and 16, not timed) start its thread pool and allocator.

Usage: varlen_ref.py THREADS [STEPS]   (default 40)
Prints "seconds tokens_per_s": the time of the STEPS steps and the real tokens
per second.
"""
import sys
import time

import torch

MASK = (1 << 64) - 1


def splitmix(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def lengths(n):
    s, out = 2026, []
    for _ in range(n):
        s, z = splitmix(s)
        out.append(16 + z % 241)
    return out


def main():
    threads = int(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)
    layer.train()
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)
    pool = torch.rand(16, 256, 256) * 2 - 1

    def step(length):
        opt.zero_grad(set_to_none=True)
        loss = layer(pool[:, :length].contiguous()).mean()
        loss.backward()
        opt.step()
        return loss.item()

    for length in (256, 16):
        step(length)
    lens = lengths(steps)
    t0 = time.perf_counter()
    for length in lens:
        loss = step(length)
    dt = time.perf_counter() - t0
    if loss != loss:
        sys.exit("varlen_ref.py: the loss is NaN")
    print(f"{dt:.6f} {16 * sum(lens) / dt:.1f}")


if __name__ == "__main__":
    main()
