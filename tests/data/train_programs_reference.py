#!/usr/bin/env python3
"""PyTorch reference for whole training programs run over many steps
(tests/e2e/test_train_programs.c).

Each program is written twice, here in PyTorch (float64, from the same
float32-rounded initial values) and in C against kiln's public API. Weights,
inputs and labels are not stored: both sides derive them from an integer hash
(splitmix64 of seed<<32|i, as tests/unit/test_torch_match.c). The file holds,
per program, the loss of every step (and of every evaluation) and the final
parameters and buffers:

    <name> <count> <values...>

Programs: tied (embedding reused as the output projection, AdamW + weight
decay, global-norm clipping, warm-up/cosine schedule, ignore_index, a smaller
last batch), freeze (AdamW with a layer frozen, then unfrozen, another layer
given no gradient for two steps), accum (gradient accumulation over
micro-batches in separate steps, one weight used twice per graph, SGD
nesterov), sgdsched (SGD momentum + dampening + weight decay, step schedule,
clipping, label smoothing), bncnn (grouped/strided convs + batchnorm +
maxpool + linear, eval under no-grad interleaved with training), heads (two
heads, one on a detached trunk), encoder (encoder layer with causal and
padding masks trained with SGD).

Every zero_grad is zero_grad(set_to_none=True), torch 2's default and
kiln's meaning (kiln_optim_zero_grad releases the gradients): with 1.13's
default the zeroed gradient of a parameter a step does not reach would still
be stepped with (momentum, weight decay), where kiln skips it.

Run (PyTorch 1.13, NumPy):  /usr/bin/python3 tests/data/train_programs_reference.py [out_path]
The committed .txt is what the test reads; rerun only to regenerate it.
"""
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
M64 = (1 << 64) - 1
LINES = []


def mix(seed, i):
    z = (((seed << 32) | i) + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fill(seed, shape, scale, off=0.0, grad=False):
    n = int(np.prod(shape)) if len(shape) else 1
    v = [float(np.float32(off + scale * ((mix(seed, i) >> 11) * 2.0 ** -52 - 1.0))) for i in range(n)]
    t = torch.tensor(v, dtype=torch.float64).reshape(shape)
    return t.requires_grad_(grad)


def ints(seed, n, mod):
    return torch.tensor([(mix(seed, i) >> 11) % mod for i in range(n)], dtype=torch.int64)


def labels(seed, n, mod, ignore_every):
    """labels in [0, mod); every one whose hash is 0 mod ignore_every is -100"""
    y = ints(seed, n, mod)
    if ignore_every:
        y[ints(seed + 7, n, ignore_every) == 0] = -100
    return y


def W(name, t):
    v = t.detach().reshape(-1).double().tolist() if torch.is_tensor(t) else [float(a) for a in t]
    LINES.append("%s %d %s" % (name, len(v), " ".join(repr(a) for a in v)))


def warmup_cosine(step, warmup, total, base, lo):
    if warmup > 0 and step < warmup:
        return base * (step + 1) / warmup
    t = (step - warmup) / (total - warmup) if total > warmup else 1.0
    t = min(max(t, 0.0), 1.0)
    return lo + (base - lo) * 0.5 * (1.0 + math.cos(math.pi * t))


# ───────────── tied: embedding reused as the output projection ─────────────
def tied():
    V, D, T = 11, 8, 5
    E = fill(1, [V, D], 0.5, grad=True)
    W1 = fill(2, [D, D], 0.35, grad=True)
    b1 = fill(3, [D], 0.1, grad=True)
    ps = [E, W1, b1]
    opt = torch.optim.AdamW(ps, lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    losses, norms = [], []
    for s in range(8):
        B = 2 + (s * 5) % 4  # a new batch size most steps (dynamic shapes)
        ids = ints(100 + s, B * T, V).reshape(B, T)
        y = labels(200 + s, B * T, V, 5).reshape(B, T)
        h = torch.tanh(E[ids] @ W1.t() + b1)
        logits = h @ E.t()
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), ignore_index=-100)
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(ps, 0.22).item())
        for g in opt.param_groups:
            g["lr"] = warmup_cosine(s, 2, 8, 0.05, 0.005)
        opt.step()
    W("tied.loss", losses)
    W("tied.norm", norms)
    for n, p in zip(["E", "W1", "b1"], ps):
        W("tied.p." + n, p)


# ───────────── freeze: frozen, unfrozen, and gradient-less steps ─────────────
def freeze():
    """layer 1 (SGD with momentum and dampening) frozen for 4 steps, then
    unfrozen; layer 2 (AdamW) gets no gradient in steps 6 and 7; clipping
    over all four parameters skips the missing gradients"""
    w1, b1 = fill(11, [10, 6], 0.4, grad=False), fill(12, [10], 0.2, grad=False)
    w2, b2 = fill(13, [3, 10], 0.3, grad=True), fill(14, [3], 0.2, grad=True)
    ps = [w1, b1, w2, b2]
    opt1 = torch.optim.SGD([w1, b1], lr=0.05, momentum=0.8, dampening=0.5, weight_decay=0.02)
    opt2 = torch.optim.AdamW([w2, b2], lr=0.02, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05)
    losses, norms = [], []
    for s in range(10):
        if s == 4:
            w1.requires_grad_(True)
            b1.requires_grad_(True)
        x = fill(500 + s, [5, 6], 1.0)
        t = fill(600 + s, [5, 3], 1.0)
        loss = F.mse_loss(torch.relu(x @ w1.t() + b1) @ w2.t() + b2, t)
        losses.append(loss.item())
        opt1.zero_grad(set_to_none=True)
        opt2.zero_grad(set_to_none=True)
        loss.backward()
        if s in (6, 7):  # layer 2 gets no gradient in these steps
            w2.grad = None
            b2.grad = None
        norms.append(torch.nn.utils.clip_grad_norm_(ps, 0.3).item())
        opt1.step()
        opt2.step()
    W("freeze.loss", losses)
    W("freeze.norm", norms)
    for n, p in zip(["w1", "b1", "w2", "b2"], ps):
        W("freeze.p." + n, p)


# ───────────── accum: micro-batches, a weight used twice ─────────────
def accum():
    Wsq = fill(21, [6, 6], 0.4, grad=True)
    wo, bo = fill(22, [2, 6], 0.4, grad=True), fill(23, [2], 0.1, grad=True)
    ps = [Wsq, wo, bo]
    opt = torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)
    losses = []
    for s in range(6):
        opt.zero_grad(set_to_none=True)
        for m in range(3):
            B = 2 + (3 * s + m) % 3
            x = fill(700 + 3 * s + m, [B, 6], 1.0)
            t = fill(800 + 3 * s + m, [B, 2], 1.0)
            h = torch.tanh(x @ Wsq.t()) @ Wsq.t()
            loss = F.mse_loss(h @ wo.t() + bo, t) / 3
            losses.append(loss.item())
            loss.backward()
        opt.step()
    W("accum.loss", losses)
    for n, p in zip(["W", "wo", "bo"], ps):
        W("accum.p." + n, p)


# ───────────── sgdsched: SGD momentum/dampening/wd, step lr, clipping ─────────────
def sgdsched():
    w1, b1 = fill(31, [8, 5], 0.45, grad=True), fill(32, [8], 0.2, grad=True)
    w2, b2 = fill(33, [4, 8], 0.35, grad=True), fill(34, [4], 0.2, grad=True)
    ps = [w1, b1, w2, b2]
    opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.05)
    losses, norms = [], []
    for s in range(20):
        B = 3 + (s * 7) % 5
        x = fill(900 + s, [B, 5], 1.5)
        y = labels(1000 + s, B, 4, 4)
        loss = F.cross_entropy(torch.relu(x @ w1.t() + b1) @ w2.t() + b2, y, ignore_index=-100, label_smoothing=0.1)
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(ps, 0.45 + 0.1 * (s % 3)).item())  # a new max_norm most steps
        for g in opt.param_groups:
            g["lr"] = 0.1 * 0.5 ** (s // 5)
        opt.step()
    W("sgdsched.loss", losses)
    W("sgdsched.norm", norms)
    for n, p in zip(["w1", "b1", "w2", "b2"], ps):
        W("sgdsched.p." + n, p)


# ───────────── bncnn: convs + batchnorm + maxpool + linear, eval interleaved ─────────────
def bncnn():
    c1w, c1b = fill(41, [4, 1, 3, 3], 0.5, grad=True), fill(42, [4], 0.1, grad=True)
    c2w = fill(43, [6, 2, 3, 3], 0.4, grad=True)
    bn1w, bn1b = fill(44, [4], 0.2, 1.0, grad=True), fill(45, [4], 0.1, grad=True)
    bn2w, bn2b = fill(46, [6], 0.2, 1.0, grad=True), fill(47, [6], 0.1, grad=True)
    fw, fb = fill(48, [3, 24], 0.3, grad=True), fill(49, [3], 0.1, grad=True)
    ps = [c1w, c1b, c2w, bn1w, bn1b, bn2w, bn2b, fw, fb]
    rm1, rv1, rm2, rv2 = torch.zeros(4), torch.ones(4), torch.zeros(6), torch.ones(6)
    opt = torch.optim.SGD(ps, lr=0.05, momentum=0.9)

    def fwd(x, train):
        h = F.conv2d(x, c1w, c1b, stride=1, padding=1, groups=2)
        h = F.batch_norm(h, rm1, rv1, bn1w, bn1b, training=train, momentum=0.1, eps=1e-5)
        h = F.max_pool2d(torch.relu(h), 2)
        h = F.conv2d(h, c2w, None, stride=2, padding=1, groups=2)
        h = F.batch_norm(h, rm2, rv2, bn2w, bn2b, training=train, momentum=0.3, eps=1e-3)
        return torch.relu(h).reshape(x.shape[0], -1) @ fw.t() + fb

    losses, evals = [], []
    for s in range(6):
        N = 2 + (s * 3) % 4
        x = fill(1100 + s, [N, 2, 8, 8], 1.0)
        y = ints(1200 + s, N, 3)
        loss = F.cross_entropy(fwd(x, True), y)
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if s in (1, 3):
            with torch.no_grad():
                ex = fill(1300 + s, [4, 2, 8, 8], 1.0)
                evals.append(F.cross_entropy(fwd(ex, False), ints(1400 + s, 4, 3)).item())
    W("bncnn.loss", losses)
    W("bncnn.eval", evals)
    for n, p in zip(["c1w", "c1b", "c2w", "bn1w", "bn1b", "bn2w", "bn2b", "fw", "fb", "rm1", "rv1", "rm2", "rv2"],
                    ps + [rm1, rv1, rm2, rv2]):
        W("bncnn.p." + n, p)


# ───────────── heads: a shared trunk, one head on the detached trunk ─────────────
def heads():
    tw, tb = fill(51, [8, 5], 0.45, grad=True), fill(52, [8], 0.2, grad=True)
    aw, ab = fill(53, [2, 8], 0.35, grad=True), fill(54, [2], 0.1, grad=True)
    cw, cb = fill(55, [3, 8], 0.35, grad=True), fill(56, [3], 0.1, grad=True)
    ps = [tw, tb, aw, ab, cw, cb]
    opt = torch.optim.AdamW(ps, lr=0.03, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.02)
    losses = []
    for s in range(8):
        x = fill(1500 + s, [6, 5], 1.0)
        t = fill(1600 + s, [6, 2], 1.0)
        y = ints(1700 + s, 6, 3)
        h = torch.tanh(x @ tw.t() + tb)
        la = F.mse_loss(h @ aw.t() + ab, t)
        if s % 3 == 2:  # head C unused: no gradient, AdamW skips it
            loss = la
            losses += [la.item(), 0.0]
        else:
            lc = F.cross_entropy(h.detach() @ cw.t() + cb, y)
            loss = la + 0.5 * lc
            losses += [la.item(), lc.item()]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    W("heads.loss", losses)
    for n, p in zip(["tw", "tb", "aw", "ab", "cw", "cb"], ps):
        W("heads.p." + n, p)


# ───────────── encoder: TransformerEncoderLayer with masks, trained ─────────────
def encoder(amp=False):
    """amp: the same in float32 with the forward under torch.autocast("cpu",
    bfloat16), the loss on f32 logits"""
    D, H, FF, B, T, C = 16, 2, 32, 3, 6, 4
    tag = "encamp" if amp else "encoder"
    layer = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation="gelu", batch_first=True,
                                             norm_first=True)
    names = [n for n, _ in layer.named_parameters()]
    with torch.no_grad():
        for i, (n, p) in enumerate(layer.named_parameters()):
            if n.endswith("bias"):
                p.copy_(fill(60 + i, list(p.shape), 0.1))
            elif "norm" in n:
                p.copy_(fill(60 + i, list(p.shape), 0.2, 1.0))
            else:
                p.copy_(fill(60 + i, list(p.shape), 0.3))
    hw, hb = fill(80, [C, D], 0.3, grad=True), fill(81, [C], 0.1, grad=True)
    if amp:
        layer.float()
        hw, hb = hw.detach().float().requires_grad_(True), hb.detach().float().requires_grad_(True)
    ps = list(layer.parameters()) + [hw, hb]
    # SGD, not AdamW: the key bias's gradient is zero in exact arithmetic (a
    # softmax ignores a constant per row), so AdamW would turn each side's
    # rounding noise into full-size updates of it
    opt = torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01)
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, 4:] = True
    pad[2, 2:] = True
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    losses = []
    for s in range(5):
        x = fill(1800 + s, [B, T, D], 1.0)
        y = labels(1900 + s, B * T, C, 0).reshape(B, T)
        y[pad] = -100
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = F.linear(layer(x.to(hw.dtype), src_mask=causal, src_key_padding_mask=pad), hw, hb)
        loss = F.cross_entropy(logits.to(hw.dtype).reshape(-1, C), y.reshape(-1), ignore_index=-100)
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    W(tag + ".loss", losses)
    for n, p in zip(names + ["head.weight", "head.bias"], ps):
        W(tag + ".p." + n, p)


# ───────────── amp: an MLP trained under bf16 autocast ─────────────
def amp():
    """torch.autocast("cpu", bfloat16) over the forward, f32 master weights
    (autocast leaves float64 alone, so this one runs in float32); the loss
    on f32 logits, as kiln's losses take them under autocast"""
    ps = [fill(91, [16, 8], 0.35), fill(92, [16], 0.1), fill(93, [4, 16], 0.25), fill(94, [4], 0.1)]
    ps = [p.float().requires_grad_(True) for p in ps]
    w1, b1, w2, b2 = ps
    opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9)
    losses = []
    for s in range(6):
        B = 3 + (s * 3) % 4
        x = fill(2000 + s, [B, 8], 1.0).float()
        y = labels(2100 + s, B, 4, 5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
        loss = F.cross_entropy(logits.float(), y, ignore_index=-100)
        losses.append(loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    W("amp.loss", losses)
    for n, p in zip(["w1", "b1", "w2", "b2"], ps):
        W("amp.p." + n, p)


# ───────────── loader: kiln's loader, a padded last batch, 2 epochs ─────────────
def loader():
    """22 examples in batches of 8 in dataset order (no shuffle): 8, 8, 6;
    kiln pads the last batch to 8 with mask 0 and the program ignores those
    rows (label -100), torch's DataLoader gives a batch of 6"""
    X, Y = fill(2200, [22, 6], 1.0), ints(2201, 22, 3)
    w1, b1 = fill(2202, [8, 6], 0.4, grad=True), fill(2203, [8], 0.1, grad=True)
    w2, b2 = fill(2204, [3, 8], 0.4, grad=True), fill(2205, [3], 0.1, grad=True)
    ps = [w1, b1, w2, b2]
    opt = torch.optim.SGD(ps, lr=0.2, momentum=0.5)
    losses = []
    for epoch in range(2):
        for i in range(0, 22, 8):
            x, y = X[i:i + 8], Y[i:i + 8]
            loss = F.cross_entropy(torch.tanh(x @ w1.t() + b1) @ w2.t() + b2, y)
            losses.append(loss.item())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    W("loader.loss", losses)
    for n, p in zip(["w1", "b1", "w2", "b2"], ps):
        W("loader.p." + n, p)


def main():
    for prog in (tied, freeze, accum, sgdsched, bncnn, heads, encoder, amp, lambda: encoder(amp=True), loader):
        prog()
    out = sys.argv[1] if len(sys.argv) > 1 else __file__.replace(".py", ".txt")
    with open(out, "w") as f:
        f.write("\n".join(LINES) + "\n")


if __name__ == "__main__":
    main()
