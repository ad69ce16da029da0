#!/usr/bin/env python3
"""PyTorch reference values for the edge cases of kiln's nn layers, losses,
composite ops and optimizers (tests/unit/test_nn_edges.c).

Writes tests/data/nn_edge_reference.txt: one array per line,

    <name> <count> <values...>

("nan", "inf", "-inf" as C's strtod reads them). Each case writes its
configuration (<case>.cfg), its inputs and PyTorch's outputs, gradients or
parameters, so the C test computes the same thing with kiln on the ref
backend and on the backend under test. Gradients are of L = sum(y * r) with
a fixed random r (<case>.r). f64 cases are computed in float64 by torch;
f32 cases (layers whose parameters are f32) in float32.

Run (PyTorch 1.13, NumPy):  /usr/bin/python3 tests/data/nn_edge_reference.py [out_path]
The committed file is what the test reads; rerun only to regenerate it.
"""
import math
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(20261127)
LINES = []


def W(name, t):
    if isinstance(t, (list, tuple)):
        v = [float(a) for a in t]
    else:
        t = torch.as_tensor(t)
        v = t.detach().reshape(-1).double().tolist()
    LINES.append("%s %d %s" % (name, len(v), " ".join(repr(a) if math.isfinite(a) else
                                                       ("nan" if math.isnan(a) else ("inf" if a > 0 else "-inf"))
                                                       for a in v)))


def rnd(*shape, dtype=torch.float64, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale).to(dtype)


def grads(case, y, r, named):
    """backward of sum(y * r); writes <case>.g.<name> for each tensor"""
    (y * r).sum().backward()
    for name, t in named:
        W("%s.g.%s" % (case, name), t.grad)


# ───────────── conv2d (F.conv2d, f64) ─────────────
CONV = [  # name, N, C, H, W, O, kh, kw, stride, padding, dilation, groups, bias
    ("conv_basic", 2, 3, 5, 6, 4, 3, 3, 1, 1, 1, 1, 1),
    ("conv_s2_nonsq", 2, 3, 7, 6, 4, 3, 2, 2, 1, 1, 1, 0),
    ("conv_dil", 1, 2, 7, 7, 3, 3, 3, 1, 2, 2, 1, 1),
    ("conv_groups", 2, 4, 6, 5, 6, 2, 3, 2, 0, 1, 2, 1),
    ("conv_depthwise", 1, 3, 5, 5, 6, 3, 3, 1, 1, 1, 3, 0),
    ("conv_small_in", 1, 2, 2, 2, 3, 3, 3, 1, 1, 1, 1, 1),
    ("conv_1x1_s3", 2, 3, 7, 8, 2, 1, 1, 3, 0, 1, 1, 1),
    ("conv_all", 1, 4, 9, 8, 4, 3, 2, 2, 2, 2, 2, 1),
]
for (name, N, C, H, Wd, O, kh, kw, s, p, d, g, b) in CONV:
    W(name + ".cfg", [N, C, H, Wd, O, kh, kw, s, p, d, g, b])
    x = rnd(N, C, H, Wd).requires_grad_()
    w = rnd(O, C // g, kh, kw, scale=0.5).requires_grad_()
    bias = rnd(O).requires_grad_() if b else None
    y = F.conv2d(x, w, bias, stride=s, padding=p, dilation=d, groups=g)
    r = rnd(*y.shape)
    W(name + ".x", x)
    W(name + ".weight", w)
    if b:
        W(name + ".bias", bias)
    W(name + ".r", r)
    W(name + ".y", y)
    grads(name, y, r, [("x", x), ("weight", w)] + ([("bias", bias)] if b else []))

# ───────────── pooling (F.max_pool2d / F.avg_pool2d, f64) ─────────────
POOL = [  # name, N, C, H, W, kind (0 avg, 1 max), k, stride, padding, specials
    ("max_k3s2p1", 2, 2, 7, 6, 1, 3, 2, 1, 0),
    ("max_k2", 1, 2, 5, 7, 1, 2, 0, 0, 0),      # non-overlapping, odd sizes cropped
    ("max_k3s1p1", 1, 1, 4, 5, 1, 3, 1, 1, 0),
    ("max_special", 1, 2, 6, 6, 1, 3, 2, 1, 1),  # -inf, NaN in the input
    ("max_k2_special", 1, 1, 4, 4, 1, 2, 0, 0, 1),
    ("avg_k3s2p1", 2, 2, 7, 6, 0, 3, 2, 1, 0),   # count_include_pad=True
    ("avg_k2s1", 1, 2, 4, 5, 0, 2, 1, 0, 0),
    ("avg_k3", 1, 1, 7, 8, 0, 3, 0, 0, 0),       # non-overlapping, cropped
    ("avg_k2s3p1", 1, 2, 7, 7, 0, 2, 3, 1, 0),   # stride > kernel
    ("max_small_in", 1, 2, 2, 3, 1, 3, 1, 1, 0),  # input smaller than the window
    ("avg_small_in", 1, 2, 3, 2, 0, 3, 2, 1, 0),
]
for (name, N, C, H, Wd, kind, k, s, p, spec) in POOL:
    W(name + ".cfg", [N, C, H, Wd, kind, k, s, p, spec])
    x = rnd(N, C, H, Wd)
    if spec:
        x.view(-1)[3] = -math.inf
        x.view(-1)[5] = math.nan
        x[0, 0, 2:4, 2:4] = -math.inf  # a whole window of -inf
    x.requires_grad_()
    st = s if s else k
    y = F.max_pool2d(x, k, st, p) if kind else F.avg_pool2d(x, k, st, p, count_include_pad=True)
    W(name + ".x", x)
    W(name + ".y", y)
    if not spec:
        r = rnd(*y.shape)
        W(name + ".r", r)
        grads(name, y, r, [("x", x)])

# ───────────── linear, layernorm, batchnorm, embedding (f32 layers) ─────────────
x = rnd(2, 3, 5, dtype=torch.float32).requires_grad_()
lin = torch.nn.Linear(5, 4)
y = lin(x)
r = rnd(*y.shape, dtype=torch.float32)
W("linear.x", x)
W("linear.weight", lin.weight)
W("linear.bias", lin.bias)
W("linear.r", r)
W("linear.y", y)
grads("linear", y, r, [("x", x), ("weight", lin.weight), ("bias", lin.bias)])

for name, eps, affine in [("ln_eps5", 1e-5, 1), ("ln_eps2", 1e-2, 1), ("ln_noaffine", 1e-5, 0)]:
    D = 6
    x = rnd(4, D, dtype=torch.float32)
    x[1] = 0.75          # a constant row: variance 0
    x[2] = x[2] * 1e-2   # small variance: eps matters
    x.requires_grad_()
    ln = torch.nn.LayerNorm(D, eps=eps, elementwise_affine=bool(affine))
    if affine:
        with torch.no_grad():
            ln.weight.copy_(rnd(D, dtype=torch.float32) * 0.5 + 1)
            ln.bias.copy_(rnd(D, dtype=torch.float32) * 0.5)
        W(name + ".weight", ln.weight)
        W(name + ".bias", ln.bias)
    W(name + ".cfg", [4, D, eps, affine])
    y = ln(x)
    r = rnd(*y.shape, dtype=torch.float32)
    W(name + ".x", x)
    W(name + ".r", r)
    W(name + ".y", y)
    grads(name, y, r, [("x", x)] + ([("weight", ln.weight), ("bias", ln.bias)] if affine else []))

# nn.BatchNorm2d: two training steps (batch statistics, running stats with the
# unbiased variance and momentum), then eval with the running statistics.
for name, N, C, H, Wd, eps, mom in [("bn", 3, 2, 3, 2, 1e-5, 0.1), ("bn_small", 2, 3, 1, 1, 1e-3, 0.3)]:
    bn = torch.nn.BatchNorm2d(C, eps=eps, momentum=mom)
    with torch.no_grad():
        bn.weight.copy_(rnd(C, dtype=torch.float32) * 0.5 + 1)
        bn.bias.copy_(rnd(C, dtype=torch.float32) * 0.5)
    W(name + ".cfg", [N, C, H, Wd, eps, mom])
    W(name + ".weight", bn.weight)
    W(name + ".bias", bn.bias)
    W(name + ".running_mean", bn.running_mean)  # the initial buffers: zeros, ones
    W(name + ".running_var", bn.running_var)
    bn.train()
    x1 = (rnd(N, C, H, Wd, dtype=torch.float32) * 2 + 1).requires_grad_()
    y1 = bn(x1)
    r = rnd(*y1.shape, dtype=torch.float32)
    W(name + ".x1", x1)
    W(name + ".r", r)
    W(name + ".y1", y1)
    grads(name, y1, r, [("x", x1), ("weight", bn.weight), ("bias", bn.bias)])
    W(name + ".rm1", bn.running_mean)
    W(name + ".rv1", bn.running_var)
    x2 = rnd(N, C, H, Wd, dtype=torch.float32) - 0.5
    W(name + ".x2", x2)
    W(name + ".y2", bn(x2))
    W(name + ".rm2", bn.running_mean)
    W(name + ".rv2", bn.running_var)
    bn.eval()
    x3 = rnd(N, C, H, Wd, dtype=torch.float32)
    W(name + ".x3", x3)
    W(name + ".y3", bn(x3))

emb = torch.nn.Embedding(6, 3)
ids = torch.tensor([[1, 5, 1], [0, 5, 5]])
y = emb(ids)
r = rnd(*y.shape, dtype=torch.float32)
W("emb.weight", emb.weight)
W("emb.ids", ids)
W("emb.r", r)
W("emb.y", y)
grads("emb", y, r, [("weight", emb.weight)])

# ───────────── attention ─────────────
# F.scaled_dot_product_attention is PyTorch 2; in 1.13 the same formula:
# softmax(q kᵀ / sqrt(hd) + mask) v, a bool mask as masked_fill(~mask, -inf).
def sdpa(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


B, Hh, T, hd = 2, 2, 4, 3
causal = torch.ones(T, T, dtype=torch.bool).tril()
nanrow = causal.clone()
nanrow[2] = False
cross = torch.tensor([[1, 0, 1, 1, 0], [0, 0, 0, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
for name, kind, mask, Tk in [("sdpa_none", 0, None, T), ("sdpa_causal", 1, causal, T),
                             ("sdpa_float", 2, rnd(B, 1, T, T), T), ("sdpa_nanrow", 1, nanrow, T),
                             ("sdpa_cross", 1, cross, 5)]:
    Tq = 3 if name == "sdpa_cross" else T  # cross-attention: 3 queries, 5 keys
    q = rnd(B, Hh, Tq, hd).requires_grad_()
    k, v = (rnd(B, Hh, Tk, hd).requires_grad_() for _ in range(2))
    W(name + ".cfg", [B, Hh, Tq, hd, kind, Tk])
    W(name + ".q", q)
    W(name + ".k", k)
    W(name + ".v", v)
    if mask is not None:
        W(name + ".mask", mask)
    y = sdpa(q, k, v, mask)
    W(name + ".y", y)
    if name != "sdpa_nanrow":
        r = rnd(*y.shape)
        W(name + ".r", r)
        grads(name, y, r, [("q", q), ("k", k), ("v", v)])

# nn.MultiheadAttention(batch_first=True) with the bool key_padding_mask
# (True = ignore) and a causal attn_mask; no fully masked row.
B, T, D, Hh = 2, 4, 8, 2
kpm = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 1]], dtype=torch.bool)
cmask = torch.ones(T, T, dtype=torch.bool).triu(1)
for name, use_causal, use_kpm in [("mha_plain", 0, 0), ("mha_causal", 1, 0), ("mha_kpm", 0, 1), ("mha_both", 1, 1)]:
    mha = torch.nn.MultiheadAttention(D, Hh, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.copy_(rnd(3 * D, dtype=torch.float32) * 0.3)
        mha.out_proj.bias.copy_(rnd(D, dtype=torch.float32) * 0.3)
    x = rnd(B, T, D, dtype=torch.float32).requires_grad_()
    W(name + ".cfg", [B, T, D, Hh, use_causal, use_kpm])
    for pn, pv in mha.state_dict().items():
        W(name + "." + pn, pv)
    W(name + ".x", x)
    W(name + ".kpm", kpm)
    y = mha(x, x, x, key_padding_mask=kpm if use_kpm else None, attn_mask=cmask if use_causal else None,
            need_weights=False)[0]
    r = rnd(*y.shape, dtype=torch.float32)
    W(name + ".r", r)
    W(name + ".y", y)
    grads(name, y, r, [("x", x)] + list(mha.named_parameters()))

# nn.TransformerEncoderLayer(batch_first=True), dropout 0, gradients of the
# input and of every parameter (the forward alone is in test_nn.c).
B, T, D, Hh, FF = 2, 3, 8, 2, 16
for name, act, nf, use_kpm in [("enc_post_relu", "relu", False, 1), ("enc_pre_gelu", "gelu", True, 0)]:
    layer = torch.nn.TransformerEncoderLayer(D, Hh, FF, dropout=0.0, activation=act, layer_norm_eps=1e-5,
                                             batch_first=True, norm_first=nf)
    with torch.no_grad():
        for pn, p in layer.named_parameters():
            if "bias" in pn or "norm" in pn:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if "norm" in pn and "weight" in pn else 0.0))
    kp = torch.tensor([[0, 0, 1], [0, 0, 0]], dtype=torch.bool)
    x = rnd(B, T, D, dtype=torch.float32).requires_grad_()
    W(name + ".cfg", [B, T, D, Hh, FF, 1 if act == "gelu" else 0, 1 if nf else 0, use_kpm])
    for pn, pv in layer.state_dict().items():
        W(name + "." + pn, pv)
    W(name + ".x", x)
    W(name + ".kpm", kp)
    y = layer(x, src_key_padding_mask=kp if use_kpm else None)
    r = rnd(*y.shape, dtype=torch.float32)
    W(name + ".r", r)
    W(name + ".y", y)
    grads(name, y, r, [("x", x)] + list(layer.named_parameters()))

# ───────────── losses (f64) ─────────────
# F.cross_entropy(logits, target, ignore_index, label_smoothing), reduction mean;
# rank-3 cases pass torch the logits permuted to [B, C, T] (kiln's class axis is last).
CE = [  # name, shape, ignore_index, label_smoothing, targets
    ("ce_plain", [4, 5], -100, 0.0, [0, 4, 2, 2]),
    ("ce_ignore", [5, 5], -100, 0.0, [1, -100, 3, -100, 0]),
    ("ce_ls", [5, 5], -100, 0.1, [1, -100, 3, 4, 0]),
    ("ce_ls_ignore2", [5, 4], 2, 0.25, [2, 0, 2, 3, 1]),
    ("ce_rank3", [2, 3, 4], -100, 0.2, [1, 3, -100, 0, 2, 2]),
    ("ce_big", [3, 4], -100, 0.1, [0, 1, 3]),
    ("ce_neginf", [3, 4], -100, 0.0, [0, 2, -100]),
]
for name, shape, ii, ls, tg in CE:
    logits = rnd(*shape, scale=2.0)
    if name == "ce_big":
        logits = logits * 1e4
    if name == "ce_neginf":
        logits[0, 3] = -math.inf  # not the target
        logits[2, 0] = -math.inf  # an ignored row, class 0
    logits.requires_grad_()
    target = torch.tensor(tg).reshape(shape[:-1])
    lt = logits if len(shape) == 2 else logits.permute(0, 2, 1)
    loss = F.cross_entropy(lt, target, ignore_index=ii, label_smoothing=ls)
    W(name + ".cfg", shape + [ii, ls])
    W(name + ".logits", logits)
    W(name + ".target", target)
    W(name + ".loss", loss)
    loss.backward()
    W(name + ".g.logits", logits.grad)

a = rnd(3, 4).requires_grad_()
b = rnd(3, 4)
loss = F.mse_loss(a, b)
W("mse.a", a)
W("mse.b", b)
W("mse.loss", loss)
loss.backward()
W("mse.g.a", a.grad)

# ───────────── softmax / log_softmax ─────────────
inf, nan = math.inf, math.nan
SM = torch.tensor([[0.5, -1.0, 2.0, 0.25],
                   [-inf, 1.0, -inf, 3.0],     # some -inf
                   [-inf, -inf, -inf, -inf],   # all -inf: NaN
                   [inf, 1.0, 2.0, -inf],      # +inf: NaN
                   [nan, 1.0, 2.0, 3.0],       # NaN
                   [1e4, -1e4, 9999.5, 0.0]], dtype=torch.float64)
for dt, tag in [(torch.float64, "f64"), (torch.float32, "f32")]:
    x = SM.to(dt)
    W("softmax_%s.x" % tag, x)
    W("softmax_%s.y1" % tag, torch.softmax(x, 1))
    W("softmax_%s.y0" % tag, torch.softmax(x, 0))
    W("log_softmax_%s.y1" % tag, torch.log_softmax(x, 1))
    W("log_softmax_%s.y0" % tag, torch.log_softmax(x, 0))
xf = SM[[0, 1, 5]].clone().requires_grad_()  # finite-result rows: gradients
r = rnd(3, 4)
W("softmax_grad.x", xf)
W("softmax_grad.r", r)
(torch.softmax(xf, 1) * r).sum().backward()
W("softmax_grad.g", xf.grad)
xf.grad = None
(torch.log_softmax(xf, 1) * r).sum().backward()
W("log_softmax_grad.g", xf.grad)

# ───────────── F.pad reflect / replicate (f64) ─────────────
PADS = [  # name, mode, shape, lo/hi per axis (kiln's order: axis 0 first)
    ("pad_reflect_max", "reflect", [2, 3, 4], [0, 0, 2, 1, 3, 3]),   # pad = size - 1
    ("pad_reflect_4d", "reflect", [1, 2, 3, 5], [0, 0, 0, 0, 1, 2, 4, 2]),
    ("pad_replicate_big", "replicate", [2, 3, 4], [0, 0, 5, 1, 7, 6]),  # pad > size
    ("pad_replicate_1", "replicate", [1, 1, 1, 2], [0, 0, 0, 0, 3, 2, 0, 4]),
]
for name, mode, shape, lh in PADS:
    x = rnd(*shape).requires_grad_()
    tp = []  # F.pad lists the last axis first; every case pads the last two axes only
    for ax in (len(shape) - 1, len(shape) - 2):
        tp += [lh[2 * ax], lh[2 * ax + 1]]
    y = F.pad(x, tuple(tp), mode=mode)
    r = rnd(*y.shape)
    W(name + ".cfg", [len(shape)] + shape + lh)
    W(name + ".x", x)
    W(name + ".y", y)
    W(name + ".r", r)
    grads(name, y, r, [("x", x)])

ids = torch.tensor([[0, 4, 2], [4, 4, 1]])
W("one_hot.ids", ids)
W("one_hot.y", F.one_hot(ids, 5))

# ───────────── clip_grad_norm_ (max_norm, norm 2, eps 1e-6) ─────────────
CLIP = [  # name, dtype, max_norm, kind
    ("clip_scaled", torch.float32, 1.0, 0),
    ("clip_unscaled", torch.float32, 100.0, 0),
    ("clip_zero", torch.float32, 1.0, 1),
    ("clip_inf", torch.float32, 1.0, 2),
    ("clip_nan", torch.float32, 1.0, 3),
    ("clip_f64", torch.float64, 0.5, 0),
    ("clip_tiny", torch.float32, 1e-3, 4),
]
for name, dt, mx, kind in CLIP:
    g1, g2 = rnd(3, 4, dtype=dt), rnd(5, dtype=dt)
    if kind == 1:
        g1.zero_()
        g2.zero_()
    if kind == 2:
        g2[1] = math.inf
    if kind == 3:
        g1[0, 2] = math.nan
    if kind == 4:
        g1 = g1 * 1e-7
        g2 = g2 * 1e-7
    p1 = torch.zeros(3, 4, dtype=dt, requires_grad=True)
    p2 = torch.zeros(5, dtype=dt, requires_grad=True)
    p1.grad, p2.grad = g1.clone(), g2.clone()
    total = torch.nn.utils.clip_grad_norm_([p1, p2], mx)
    W(name + ".cfg", [1 if dt == torch.float64 else 0, mx])
    W(name + ".g1", g1)
    W(name + ".g2", g2)
    W(name + ".total", total)
    W(name + ".out1", p1.grad)
    W(name + ".out2", p2.grad)

# ───────────── optimizers (f64 parameters, 6 steps) ─────────────
# Parameter p2 has no gradient (None) at step 1; the learning rate is halved
# before step 4 (kiln_optim_set_lr / param_group["lr"]).
STEPS = 6
P1, P2 = rnd(3, 4), rnd(5)
G1 = [rnd(3, 4) for _ in range(STEPS)]
G2 = [rnd(5) for _ in range(STEPS)]
W("optim.p1", P1)
W("optim.p2", P2)
for t in range(STEPS):
    W("optim.g1.%d" % t, G1[t])
    W("optim.g2.%d" % t, G2[t])


def run_optim(name, make, cfg, dt=torch.float64, gscale=None):
    p1, p2 = P1.clone().to(dt).requires_grad_(), P2.clone().to(dt).requires_grad_()
    opt = make([p1, p2])
    W(name + ".cfg", cfg)
    for t in range(STEPS):
        if t == 3:
            for grp in opt.param_groups:
                grp["lr"] *= 0.5
        p1.grad = G1[t].to(dt) if gscale is None else G1[t].to(dt) * gscale
        p2.grad = None if t == 0 else G2[t].to(dt) if gscale is None else G2[t].to(dt) * gscale
        opt.step()
        W("%s.p1.%d" % (name, t), p1)
        W("%s.p2.%d" % (name, t), p2)


SGD = [  # lr, momentum, dampening, weight_decay, nesterov
    (0.1, 0.0, 0.0, 0.0, 0), (0.1, 0.0, 0.0, 0.05, 0), (0.05, 0.9, 0.0, 0.0, 0), (0.05, 0.9, 0.5, 0.1, 0),
    (0.05, 0.9, 0.0, 0.1, 1), (0.2, 0.5, 0.3, 0.0, 0),
]
for i, (lr, mo, da, wd, ne) in enumerate(SGD):
    run_optim("sgd%d" % i, lambda ps: torch.optim.SGD(ps, lr=lr, momentum=mo, dampening=da, weight_decay=wd,
                                                       nesterov=bool(ne)), [lr, mo, da, wd, ne])
ADAMW = [  # lr, beta1, beta2, eps, weight_decay
    (1e-2, 0.9, 0.999, 1e-8, 0.01), (1e-2, 0.9, 0.999, 1e-8, 0.0), (5e-2, 0.5, 0.9, 1e-3, 0.1),
    (1e-1, 0.0, 0.99, 1e-6, 0.2),
]
for i, (lr, b1, b2, eps, wd) in enumerate(ADAMW):
    run_optim("adamw%d" % i, lambda ps: torch.optim.AdamW(ps, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd),
              [lr, b1, b2, eps, wd])
# f32 parameters and gradients (the usual case): the same updates in float32
for i in (3, 4):
    lr, mo, da, wd, ne = SGD[i]
    run_optim("sgd%d_f32" % i, lambda ps: torch.optim.SGD(ps, lr=lr, momentum=mo, dampening=da, weight_decay=wd,
                                                           nesterov=bool(ne)), [lr, mo, da, wd, ne], torch.float32)
for i in (0, 2):
    lr, b1, b2, eps, wd = ADAMW[i]
    run_optim("adamw%d_f32" % i, lambda ps: torch.optim.AdamW(ps, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd),
              [lr, b1, b2, eps, wd], torch.float32)
# f32 gradients near 1e20: g * g overflows f32, (1 - beta2) * g * g (torch's order) does not
lr, b1, b2, eps, wd = ADAMW[0]
run_optim("adamw0_big_f32", lambda ps: torch.optim.AdamW(ps, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd),
          [lr, b1, b2, eps, wd], torch.float32, 1e20)

# ───────────── default initialisation bounds (torch.nn.init) ─────────────
def kaiming_bound(t):  # kaiming_uniform_(a=sqrt(5)): gain sqrt(2/(1+5)), bound gain*sqrt(3/fan_in)
    fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(t)
    return math.sqrt(2.0 / 6.0) * math.sqrt(3.0 / fan_in), 1.0 / math.sqrt(fan_in)


lin = torch.nn.Linear(300, 200)
W("init_linear.cfg", [300, 200] + list(kaiming_bound(lin.weight)))
conv = torch.nn.Conv2d(8, 16, (3, 5), groups=4)
W("init_conv.cfg", [8, 16, 3, 5, 4] + list(kaiming_bound(conv.weight)))
mha = torch.nn.MultiheadAttention(16, 4)
fi, fo = torch.nn.init._calculate_fan_in_and_fan_out(mha.in_proj_weight)
W("init_mha.cfg", [16, 4, math.sqrt(6.0 / (fi + fo)), kaiming_bound(mha.out_proj.weight)[0]])

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/nn_edge_reference.txt"
with open(out, "w") as f:
    f.write("# kiln nn edge-case reference values: generated by tests/data/nn_edge_reference.py (PyTorch %s)\n"
            % torch.__version__)
    f.write("\n".join(LINES) + "\n")
