#!/usr/bin/env python3
"""Reference outputs of PyTorch for kiln's nn layers (tests/unit/test_nn.c).

Writes tests/data/nn_torch_ref.txt: one tensor per line, "name numel v0 v1 ...",
with torch.nn.TransformerEncoderLayer(batch_first=True) weights, an input, a
causal + key-padding mask and the outputs, for post-norm/relu and
pre-norm/gelu; plus a cross-entropy with ignore_index and label smoothing.
The C test loads the weights into kiln's layer with kiln_assign and compares.

Run (needs PyTorch, e.g. Debian's python3-torch):
    python3 tests/interop/torch_reference.py [out_path]
The committed file is what the test uses; rerun only to regenerate it.
"""
import sys

import torch

B, T, D, H, F = 2, 5, 8, 2, 16


def dump(f, name, t):
    v = t.detach().reshape(-1).double().tolist()
    f.write("%s %d %s\n" % (name, len(v), " ".join("%.9g" % x for x in v)))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/nn_torch_ref.txt"
    torch.manual_seed(1234)
    with open(out, "w") as f:
        x = torch.randn(B, T, D)
        dump(f, "x", x)
        # batch 1 pads its last two keys; key 0 stays visible for every query
        kpm = torch.zeros(B, T, dtype=torch.bool)
        kpm[1, 3:] = True
        dump(f, "kpm", kpm)
        causal = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
        for variant, (act, norm_first) in enumerate([("relu", False), ("gelu", True)]):
            layer = torch.nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation=act,
                                                     layer_norm_eps=1e-5, batch_first=True,
                                                     norm_first=norm_first)
            with torch.no_grad():  # non-trivial biases and norms
                for name, p in layer.named_parameters():
                    if "bias" in name or "norm" in name:
                        p.copy_(torch.randn_like(p) * 0.5 + (1.0 if "norm" in name and "weight" in name else 0.0))
            layer.eval()
            # grad enabled: keeps torch off its nested-tensor fast path, which
            # zeroes padded positions instead of computing them
            y = layer(x, src_mask=causal, src_key_padding_mask=kpm)
            for name, p in layer.state_dict().items():
                dump(f, "enc%d.%s" % (variant, name), p)
            dump(f, "enc%d.y" % variant, y)
        logits = torch.randn(7, 4) * 2
        target = torch.tensor([0, 3, -100, 1, 2, -100, 3])
        dump(f, "ce.logits", logits)
        dump(f, "ce.target", target)
        loss = torch.nn.functional.cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.15)
        dump(f, "ce.loss", loss)


if __name__ == "__main__":
    main()
