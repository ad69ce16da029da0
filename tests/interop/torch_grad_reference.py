#!/usr/bin/env python3
"""PyTorch forward AND backward references for tests/unit/test_torch_match.c.

Writes tests/data/torch_grad_ref_enc{0,1,2,3}.txt (one Transformer encoder
layer each) and tests/data/torch_grad_ref_cnn.txt (two small CNNs), one tensor
per line: "name numel v0 v1 ...". Each file holds the forward output, the
loss and the gradient of the loss w.r.t. the input and every parameter (in
PyTorch state_dict names, which kiln's modules use too).

Weights and inputs are NOT stored: they are a deterministic formula of
(name, element index), implemented identically here (fill/value) and in the C
test (tp_fill/tp_value), rounded to float32. torch then computes in float64
from those float32 values, so the references are exact up to ~1e-15 and the
C test's tolerance only has to absorb kiln's own float32 rounding.

Run with the Python that has PyTorch (Debian's python3-torch; torch 1.13):
    /usr/bin/python3 tests/interop/torch_grad_reference.py [out_dir]
The committed files are what the test uses; rerun only to regenerate them
(the output is deterministic: no RNG is involved).
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

# Encoder: d_model, heads, feed-forward width, batch, sequence.
D, H, FF, B, T = 32, 4, 64, 2, 5
# Variants: (norm_first, activation, masked). Masked: causal attn_mask plus a
# key padding mask hiding the last two keys of batch element 1.
ENC_VARIANTS = [(False, "relu", False), (False, "gelu", True), (True, "relu", True), (True, "gelu", False)]
# CNN: input [3, 1, 8, 8], 5 classes, targets below.
CNN_N, CNN_CLASSES = 3, 5
CNN_TARGETS = [2, 0, 4]


def name_seed(name):
    """A small integer from a name (same as tp_name_seed in the C test)."""
    h = 0
    for c in name:
        h = (h * 31 + ord(c)) % 100003
    return h % 997


M64 = (1 << 64) - 1


def value(seed, i):
    """Deterministic pseudo-random value in [-1, 1) (tp_value in C).

    splitmix64 of (seed << 32 | i), top 53 bits scaled: integer arithmetic
    and one exact scaling, so Python and C get bit-identical doubles (a libm
    formula such as sin() would tie the data to one libm).
    """
    z = ((seed << 32 | i) + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return (z >> 11) * 2.0 ** -52 - 1.0


def fill(name, shape, seed=None):
    """The float32-rounded tensor for parameter/input `name` (tp_fill in C).

    Scale by name: norm weights 1 + 0.3u, biases 0.2u, other weights
    u * sqrt(3 / fan_in) (fan_in = numel / shape[0]), inputs (explicit seed) u.
    """
    n = 1
    for s in shape:
        n *= s
    sd = name_seed(name) if seed is None else seed
    if seed is not None:
        a, off = 1.0, 0.0
    elif name.endswith("bias"):
        a, off = 0.2, 0.0
    elif "norm" in name:
        a, off = 0.3, 1.0
    else:
        a, off = math.sqrt(3.0 * shape[0] / n), 0.0
    vals = [off + a * value(sd, i) for i in range(n)]
    return torch.tensor(vals, dtype=torch.float32).reshape(shape).double()


def dump(f, name, t):
    v = t.detach().reshape(-1).double().tolist()
    f.write("%s %d %s\n" % (name, len(v), " ".join("%.9g" % x for x in v)))


def set_params(module):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(fill(name, tuple(p.shape)))


def encoder(out_dir, k, norm_first, act, masked):
    layer = torch.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=act, layer_norm_eps=1e-5,
                                             batch_first=True, norm_first=norm_first).double()
    set_params(layer)
    layer.train()  # dropout is 0; training keeps torch off its inference fast path
    x = fill("x", (B, T, D), seed=1).requires_grad_(True)
    wl = fill("loss_weight", (B, T, D), seed=2)
    kwargs = {}
    if masked:
        kwargs["src_mask"] = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), diagonal=1)
        kpm = torch.zeros(B, T, dtype=torch.bool)
        kpm[1, 3:] = True
        kwargs["src_key_padding_mask"] = kpm
    y = layer(x, **kwargs)
    loss = (y * wl).sum()
    loss.backward()
    with open(os.path.join(out_dir, "torch_grad_ref_enc%d.txt" % k), "w") as f:
        dump(f, "y", y)
        dump(f, "loss", loss)
        dump(f, "grad.x", x.grad)
        for name, p in layer.named_parameters():
            dump(f, "grad." + name, p.grad)


class CNN(torch.nn.Module):
    """conv1 -> relu -> maxpool(2) -> conv2 -> relu -> flatten -> fc."""

    def __init__(self, variant):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        if variant == 0:  # plain 3x3, stride 1, pad 1: [4,4,4] -> [8,4,4]
            self.conv2 = torch.nn.Conv2d(4, 8, 3, stride=1, padding=1)
            feat = 8 * 4 * 4
        else:  # grouped, strided, dilated: [4,4,4] -> [8,2,2]
            self.conv2 = torch.nn.Conv2d(4, 8, 3, stride=2, padding=2, dilation=2, groups=2)
            feat = 8 * 2 * 2
        self.fc = torch.nn.Linear(feat, CNN_CLASSES)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.relu(self.conv2(h))
        return self.fc(h.flatten(1))


def cnn(f, variant, label_smoothing):
    net = CNN(variant).double()
    set_params(net)
    x = fill("x", (CNN_N, 1, 8, 8), seed=3).requires_grad_(True)
    logits = net(x)
    loss = F.cross_entropy(logits, torch.tensor(CNN_TARGETS), label_smoothing=label_smoothing)
    loss.backward()
    p = "cnn%d." % variant
    dump(f, p + "logits", logits)
    dump(f, p + "loss", loss)
    dump(f, p + "grad.x", x.grad)
    for name, t in net.named_parameters():
        dump(f, p + "grad." + name, t.grad)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data")
    torch.use_deterministic_algorithms(True)
    for k, (norm_first, act, masked) in enumerate(ENC_VARIANTS):
        encoder(out_dir, k, norm_first, act, masked)
    with open(os.path.join(out_dir, "torch_grad_ref_cnn.txt"), "w") as f:
        cnn(f, 0, 0.0)
        cnn(f, 1, 0.1)


if __name__ == "__main__":
    main()
