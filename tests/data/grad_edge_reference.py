#!/usr/bin/env python3
"""Gradients at edge values, from PyTorch (1.13), for tests/backend/test_grad_edges.c.

Writes grad_edge_reference.txt next to this script. Each case is an op applied
to inputs with edge values (zeros of both signs, ties, +-inf, NaN, duplicates,
fully masked rows); torch.autograd gives the output and the gradient of every
floating-point input for a given seed (the gradient of the output, passed to
y.backward(seed)). Seeds hold small integers or powers of two, so that the
products and sums of exact rules stay exact, and +-inf / NaN where PyTorch
masks a gradient (it must stay 0 there, not become inf * 0 = NaN).

One line per tensor, as tests/backend/ref_cases.h reads them:
    <case>.<part> <dtype> <rank> <shape...> <values...>
with part in0, in1, ... (the inputs, in order), out, seed, g0, g1, ... (the
gradient of input k; only for floating-point inputs). "nan" is NaN.

Where kiln deliberately differs from PyTorch (docs/semantics.md), the case
says so and the expected values are PyTorch's with the documented rule
applied on top of them (never values taken from kiln).

Run: /usr/bin/python3 tests/data/grad_edge_reference.py
"""
import math
import os

import torch
import torch.nn.functional as F

inf, nan = math.inf, math.nan
F32, F64, BF16, F16, I64 = torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64
DT = {F32: "f32", F64: "f64", BF16: "bf16", F16: "f16", I64: "i64", torch.bool: "bool"}

CASES = []


def case(name, inputs, fn, seed=None, post=None, post_out=None, wide=False):
    """inputs: list of (values, dtype); fn(*tensors) -> output tensor; seed:
    values of the output's shape (default ones, in the output's dtype);
    post(grads, tensors) -> grads and post_out(out, tensors) -> out apply a
    documented kiln rule. wide: 16-bit inputs are computed in float32 and
    the output and gradients rounded once to their dtype (the correctly
    rounded result, where PyTorch's 16-bit kernel rounds in between)."""
    ts = []
    for v, dt in inputs:
        t = torch.tensor(v, dtype=dt)
        if t.is_floating_point():
            t.requires_grad_(True)
        ts.append(t)
    run = [t.detach().float().requires_grad_(True) if wide and t.is_floating_point() else t for t in ts]
    y = fn(*run)
    s = torch.ones_like(y) if seed is None else torch.tensor(seed, dtype=y.dtype).reshape(y.shape)
    if wide:
        s = s.to(ts[0].dtype).float()
    y.backward(s)
    if wide:
        y, s = y.to(ts[0].dtype), s.to(ts[0].dtype)
        for t, r in zip(ts, run):
            if t.is_floating_point():
                t.grad = r.grad.to(t.dtype)
    grads = [t.grad if t.is_floating_point() else None for t in ts]
    for k, t in enumerate(ts):
        if t.is_floating_point() and grads[k] is None:
            grads[k] = torch.zeros_like(t)
    if post:
        grads = post(grads, ts)
    y = y.detach()
    if post_out:
        y = post_out(y, ts)
    CASES.append((name, ts, y, s, grads))


def fmt(v):
    if math.isnan(v):
        return "nan"
    return repr(float(v))


def line(name, t):
    t = t.detach()
    vals = t.reshape(-1).tolist() if t.dtype in (I64, torch.bool) else t.double().reshape(-1).tolist()
    if t.dtype == torch.bool:
        vals = [int(v) for v in vals]
    shape = " ".join(str(d) for d in t.shape)
    body = " ".join(str(v) if t.dtype in (I64, torch.bool) else fmt(v) for v in vals)
    return f"{name} {DT[t.dtype]} {t.dim()} {shape} {body}".replace("  ", " ")


# ───────────── unary ops at extreme inputs ─────────────
X = [-inf, -100.0, -20.0, -1.0, -0.0, 0.0, 1e-30, 1e-40, -1e-45, 0.5, 1.0, 20.0, 100.0, inf, nan]
SX = [1.0, -2.0, 0.5, 4.0, 1.0, -1.0, 2.0, 4.0, 1.0, 0.25, -1.0, 8.0, 1.0, 2.0, 1.0]
UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "expm1": torch.expm1, "log": torch.log,
    "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "erf": torch.erf, "sin": torch.sin,
    "cos": torch.cos, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
    "trunc": torch.trunc, "sign": torch.sign,
}
for n, f in UNARY.items():
    if n != "sign":
        case("u_" + n, [(X, F32)], f, SX)  # torch.<op>(x)


def nan_sign(y, ts):
    # kiln's documented sign(NaN) = NaN (docs/semantics.md; PyTorch gives 0)
    return torch.where(torch.isnan(ts[0].detach()), ts[0].detach(), y)


case("u_sign", [(X, F32)], torch.sign, SX, post_out=nan_sign)  # torch.sign(x)
# exp of large inputs: exp(88) is finite, exp(89) is inf
case("u_exp_big", [([80.0, 88.0, 88.7, 89.0, -87.0, -103.0], F32)], torch.exp)
# log1p just above -1, log and rsqrt of denormals
case("u_log_tiny", [([1e-45, 1e-38, -1e-45, 1e-20], F32)], torch.log)
case("u_log1p_m1", [([-1.0, -0.9999999, -1.0000001, -2.0], F32)], torch.log1p)

# ───────────── maximum / minimum / clamp ─────────────
MA = [nan, 1.0, 2.0, 1.0, -1.0, 3.0, -0.0, 5.0]
MB = [1.0, nan, 2.0, nan, 0.0, 3.0, 0.0, 4.0]
MS = [1.0, 2.0, 1.0, 4.0, inf, inf, 2.0, nan]
case("b_maximum", [(MA, F32), (MB, F32)], torch.maximum, MS)  # torch.maximum(a, b)
case("b_minimum", [(MA, F32), (MB, F32)], torch.minimum, MS)  # torch.minimum(a, b)
CX = [nan, -1.0, 0.0, 1.0, 2.0, 3.0, -inf, inf]
CS = [1.0, inf, 2.0, 4.0, 2.0, inf, nan, nan]
# torch.maximum(x, torch.tensor(0.0)): the tie splits (torch.maximum's rule)
case("b_maximum_c", [(CX, F32)], lambda x: torch.maximum(x, torch.tensor(0.0)), CS)
case("b_minimum_c", [(CX, F32)], lambda x: torch.minimum(x, torch.tensor(2.0)), CS)
case("c_clamp", [(CX, F32)], lambda x: torch.clamp(x, 0.0, 2.0), CS)  # torch.clamp(x, 0.0, 2.0)
case("c_clamp_min", [(CX, F32)], lambda x: torch.clamp(x, min=0.0), CS)  # torch.clamp(x, min=0.0)
case("c_clamp_max", [(CX, F32)], lambda x: torch.clamp(x, max=2.0), CS)  # torch.clamp(x, max=2.0)
case("c_clamp_eq", [(CX, F32)], lambda x: torch.clamp(x, 1.0, 1.0), CS)  # torch.clamp(x, 1.0, 1.0)
case("c_clamp_f64", [(CX, F64)], lambda x: torch.clamp(x, -1.0, 1.0), CS)  # torch.clamp(x, -1.0, 1.0)

# ───────────── div, pow, remainder, fmod ─────────────
# torch.div(a, b): b's gradient is -g * ((a / b) / b); the last element's
# g * (a / b) overflows f32 when computed as (g * out) / b
case("b_div", [([1.0, -1.0, 0.0, 1.0, 0.0, 6.0, 1e30], F32), ([0.0, -0.0, 0.0, 3.0, -0.0, -2.0, 1e15], F32)],
     torch.div, [1.0, 1.0, 1.0, 1.0, 1.0, -2.0, 2.0 ** 120])
# torch.pow(a, b): 0 ** negative, negative bases with integral exponents
PA = [0.0, 0.0, 0.0, -2.0, -2.0, 2.0, -0.5, 0.0, -0.0, 0.0, 3.0]
PB = [0.0, -1.0, 2.0, 2.0, 3.0, 0.5, 0.5, 0.5, -1.0, -2.5, 0.0]
case("b_pow", [(PA, F32), (PB, F32)], torch.pow)
PX = [0.0, -2.0, -0.0, -3.0, 2.0, inf, -inf, nan]
case("b_pow_c2", [(PX, F32)], lambda x: torch.pow(x, 2.0))  # torch.pow(x, 2.0)
case("b_pow_c0", [(PX, F32)], lambda x: torch.pow(x, 0.0))  # torch.pow(x, 0.0)
case("b_pow_cm1", [(PX, F32)], lambda x: torch.pow(x, -1.0))  # torch.pow(x, -1.0)
case("b_pow_c3", [(PX, F32)], lambda x: torch.pow(x, 3.0))  # torch.pow(x, 3.0)
RA = [1.0, -1.0, 5.5, -5.5, 1.0, 0.0, 3.0, 7.0, 0.3, -0.0]
RB = [0.1, 0.1, 2.0, 2.0, -0.3, 2.0, 0.0, -7.0, 0.1, 3.0]
# torch.remainder(a, b): b's gradient is -g * torch.div(a, b, rounding_mode="floor")
case("b_remainder", [(RA, F32), (RB, F32)], torch.remainder)
# torch.fmod(a, b): b's gradient is -g * torch.div(a, b, rounding_mode="trunc")
case("b_fmod", [(RA, F32), (RB, F32)], torch.fmod)
case("b_remainder_f64", [(RA, F64), (RB, F64)], torch.remainder)

# ───────────── where with inf / NaN in the branch not taken ─────────────
WX = [-1.0, 0.0, 4.0, nan, inf, -inf]
# torch.where(x > 0, torch.sqrt(x), 0.0): sqrt's gradient 0 / (2 * sqrt(-1)) is NaN
case("w_sqrt", [(WX, F32)], lambda x: torch.where(x > 0, torch.sqrt(x), torch.tensor(0.0)))
# torch.where(x > 0, x, 1 / x): 1 / 0 in the branch not taken
case("w_recip", [(WX, F32)], lambda x: torch.where(x > 0, x, 1.0 / x))
# torch.where(c, a, b) with inf and NaN in a and b: the branch not taken gets 0
case("w_plain", [([1.0, inf, nan, -inf], F32), ([nan, 2.0, inf, 3.0], F32)],
     lambda a, b: torch.where(torch.tensor([True, False, True, False]), a, b), [inf, nan, 2.0, 1.0])

# ───────────── reductions ─────────────
RX = [[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0], [-inf, -inf, -inf, -inf], [0.0, -0.0, -1.0, 0.0]]
case("r_amax", [(RX, F32)], lambda x: torch.amax(x, 1), [1.0, 2.0, 4.0, 8.0])  # torch.amax(x, 1)
case("r_amin", [(RX, F32)], lambda x: torch.amin(x, 1), [1.0, 2.0, 4.0, 8.0])  # torch.amin(x, 1)
NX = [[nan, 1.0, 1.0], [2.0, 2.0, 1.0], [1.0, nan, nan]]
case("r_amax_nan", [(NX, F32)], lambda x: torch.amax(x, 1), [1.0, 2.0, 4.0])  # torch.amax(x, 1)
case("r_amin_nan", [(NX, F32)], lambda x: torch.amin(x, 1), [1.0, 2.0, 4.0])  # torch.amin(x, 1)
case("r_amax_all", [(RX, F32)], lambda x: torch.amax(x, (0, 1)), [4.0])  # torch.amax(x, (0, 1))
case("r_amax_inf_g", [(RX, F32)], lambda x: torch.amax(x, 1), [inf, 1.0, 1.0, 1.0])  # torch.amax(x, 1)
PRX = [[0.0, 2.0, 0.0, -3.0, 0.0], [-1.0, -2.0, 0.0, 4.0, 0.5], [2.0, -0.0, 3.0, -1.0, 1.0]]
case("r_prod", [(PRX, F32)], lambda x: torch.prod(x, 1), [1.0, -2.0, 4.0])  # torch.prod(x, 1)
# torch.prod(x, 1) without zeros: g * (out / x); g * out overflows f32 in the first row
case("r_prod_big", [([[1e20, 1e10, 10.0], [2.0, 3.0, 4.0]], F32)], lambda x: torch.prod(x, 1), [1e8, 1.0])
# torch.sqrt((x * x).sum(1)): a norm at 0 has a NaN gradient (0 * inf)
case("r_norm", [([[0.0, 0.0], [3.0, -4.0]], F32)], lambda x: torch.sqrt((x * x).sum(1)), [1.0, 2.0])
case("r_sum_1", [([[1.0], [-2.0], [inf]], F32)], lambda x: torch.sum(x, 1), [1.0, nan, 2.0])  # x.sum(1)
case("r_mean_1", [([[1.0], [-2.0], [inf]], F32)], lambda x: torch.mean(x, 1), [1.0, nan, 2.0])  # x.mean(1)
CSX = [[0.0, 2.0, 0.0, -3.0, 0.0], [-1.0, -2.0, 0.0, 4.0, 0.5], [2.0, 0.0, 0.0, -1.0, 1.0]]
CSS = [[1.0, 2.0, -1.0, 4.0, 3.0], [2.0, 1.0, 1.0, -2.0, 1.0], [1.0, 1.0, 1.0, 1.0, 8.0]]
case("r_cumsum", [(CSX, F32)], lambda x: torch.cumsum(x, 1), CSS)  # torch.cumsum(x, 1)
case("r_cumprod", [(CSX, F32)], lambda x: torch.cumprod(x, 1), CSS)  # torch.cumprod(x, 1)
case("r_cumprod_0", [(CSX, F32)], lambda x: torch.cumprod(x, 0), CSS)  # torch.cumprod(x, 0)

# ───────────── softmax, log_softmax ─────────────
SMX = [[0.0, -inf, 1.0, -inf], [-inf, -inf, -inf, -inf], [1.0, 1.0, 1.0, 1.0], [-inf, 3.0, -inf, -inf]]
SMS = [[1.0, 2.0, -1.0, 0.5], [1.0, 1.0, 1.0, 1.0], [4.0, -2.0, 1.0, 0.0], [1.0, 2.0, 4.0, 8.0]]
case("s_softmax", [(SMX, F32)], lambda x: torch.softmax(x, -1), SMS)  # torch.softmax(x, -1)
case("s_log_softmax", [(SMX, F32)], lambda x: torch.log_softmax(x, -1), SMS)  # torch.log_softmax(x, -1)

# ───────────── losses and layers ─────────────
CEL = [[0.0, -inf, 1.0], [2.0, 0.5, -inf], [-inf, 1.0, 0.0], [1.0, 2.0, 3.0]]
CET = [2, 0, 1, -1]
# F.cross_entropy(logits, target, ignore_index=-1): -inf logits off the target
case("l_ce", [(CEL, F32), (CET, I64)], lambda x, t: F.cross_entropy(x, t, ignore_index=-1))
# F.cross_entropy(..., ignore_index=-1, label_smoothing=0.1): the loss is inf, its gradient finite
case("l_ce_smooth", [(CEL, F32), (CET, I64)], lambda x, t: F.cross_entropy(x, t, ignore_index=-1, label_smoothing=0.1))
CEL2 = [[0.0, 2.0, 1.0], [2.0, 0.5, -1.0], [-inf, 1.0, 0.0], [1.0, 2.0, 3.0]]
case("l_ce_smooth2", [(CEL2, F32), ([2, 0, -1, 1], I64)],
     lambda x, t: F.cross_entropy(x, t, ignore_index=-1, label_smoothing=0.25))
# F.mse_loss(a, b)
case("l_mse", [([1.0, -2.0, 0.0, 3.0], F32), ([1.0, 2.0, -0.0, 0.5], F32)], F.mse_loss)
LNX = [[2.0, 2.0, 2.0, 2.0], [0.1, 0.1, 0.1, 0.1], [1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 1e-3]]
LNS = [[1.0, 2.0, -1.0, 0.5], [1.0, -1.0, 2.0, 4.0], [1.0, 1.0, 1.0, 1.0], [0.5, 1.0, -2.0, 1.0]]
# F.layer_norm(x, (4,), w, b, eps=1e-5): constant rows
case("n_layernorm", [(LNX, F32), ([1.0, 0.5, 2.0, -1.0], F32), ([0.0, 1.0, 0.0, -1.0], F32)],
     lambda x, w, b: F.layer_norm(x, (4,), w, b, 1e-5), LNS)
# F.embedding(ids, w) with repeated ids; inf and NaN in the seed of some rows
case("n_embedding", [([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], F32), ([3, 0, 3, 1], I64)],
     lambda w, i: F.embedding(i, w), [[1.0, 2.0], [inf, 1.0], [4.0, 8.0], [nan, 1.0]])
# mean pooling + F.normalize(m, dim=-1) (kiln_mean_pool_normalize): a zero mean (an all-padding row) has a finite
# gradient, torch.norm's is 0 at 0
NH = [[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[1.0, 2.0, 2.0], [3.0, -2.0, 0.0]]]
NS = [[1.0, 2.0, 4.0], [1.0, -1.0, 2.0]]
case("n_normalize", [(NH, F32)], lambda h: F.normalize(h.sum(1) / 2.0, dim=-1), NS)


def pool_masked(h, m):
    w = m.to(h.dtype).unsqueeze(-1)
    return F.normalize((h * w).sum(1) / w.sum(1).clamp(min=1e-9), dim=-1)


NH2 = [[[1.0, 0.5, 0.0], [2.0, 0.0, 0.0]], [[1.0, 2.0, 2.0], [3.0, -2.0, 0.0]]]
case("n_normalize_mask", [(NH2, F32), ([[0, 0], [1, 1]], I64)], pool_masked, NS)
# F.dropout(x, 0.0, training=True)
case("n_dropout0", [([1.0, -inf, nan, 0.0], F32)], lambda x: F.dropout(x, 0.0, True), [1.0, 2.0, 4.0, inf])


# scaled dot-product attention, PyTorch's math: softmax(q k^T / sqrt(d) masked with -inf) v;
# the second query attends no key (a NaN row)
def sdpa(q, k, v, m):
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    s = s.masked_fill(~m, -inf)
    return torch.softmax(s, -1) @ v


SQ = [[[0.5, 1.0], [1.0, -1.0], [2.0, 0.0]]]
SK = [[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]]
SV = [[[1.0, 2.0], [3.0, 4.0], [-1.0, 0.5]]]
SM = [[True, False, True], [False, False, False], [True, True, True]]
case("a_sdpa", [(SQ, F32), (SK, F32), (SV, F32), (SM, torch.bool)], sdpa)
SM2 = [[True, False, True], [False, True, False], [True, True, True]]
case("a_sdpa_ok", [(SQ, F32), (SK, F32), (SV, F32), (SM2, torch.bool)], sdpa,
     [[[1.0, 2.0], [inf, 1.0], [0.5, -1.0]]])

# ───────────── indexing and scattering with duplicate indices ─────────────
IX = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]
# torch.index_select(x, 0, idx): x's gradient is index_add of the seed; row 2 is never picked
case("i_index_select", [(IX, F32), ([3, 0, 3, 1], I64)], lambda x, i: torch.index_select(x, 0, i),
     [[1.0, 2.0], [inf, 1.0], [4.0, 8.0], [nan, 1.0]])
IX3 = [[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]]]
case("i_index_select1", [(IX3, F32), ([2, 2, 0], I64)], lambda x, i: torch.index_select(x, 1, i),
     [[[1.0, 2.0], [4.0, 8.0], [inf, 1.0]], [[1.0, -1.0], [2.0, -2.0], [nan, 0.5]]])
# torch.gather(x, 1, idx)
case("i_gather", [([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], F32), ([[0, 0, 2], [1, 1, 1]], I64)],
     lambda x, i: torch.gather(x, 1, i), [[1.0, 2.0, inf], [4.0, 8.0, 16.0]])
# x.scatter_add(0, idx, src)
case("i_scatter_add", [([1.0, 2.0, 3.0, 4.0, 5.0], F32), ([1, 3, 1], I64), ([10.0, 20.0, 30.0], F32)],
     lambda x, i, s: x.scatter_add(0, i, s), [1.0, 2.0, 4.0, 8.0, inf])


def winner_only(axis):
    # kiln's documented rule (docs/semantics.md, "gradient of scatter"): of
    # duplicate indices only the last along the axis wrote its value, so
    # only it gets the gradient PyTorch gives every duplicate
    def post(grads, ts):
        idx = ts[1].detach()
        g = grads[2].clone()
        n = idx.shape[axis]
        for p in range(n):
            later = idx.narrow(axis, p + 1, n - p - 1)
            here = idx.narrow(axis, p, 1)
            lost = (later == here).any(dim=axis, keepdim=True)
            g.narrow(axis, p, 1)[lost] = 0.0
        grads[2] = g
        return grads
    return post


# x.scatter(0, idx, src): duplicates 1, 1 (the last wins); x's gradient is 0 where written
case("i_scatter", [([1.0, 2.0, 3.0, 4.0, 5.0], F32), ([1, 3, 1], I64), ([10.0, 20.0, 30.0], F32)],
     lambda x, i, s: x.scatter(0, i, s), [1.0, 2.0, 4.0, 8.0, 16.0], post=winner_only(0))
# x.index_add(0, idx, src)
case("i_index_add", [(IX, F32), ([2, 0, 2], I64), ([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], F32)],
     lambda x, i, s: x.index_add(0, i, s), [[1.0, 2.0], [4.0, 8.0], [inf, 1.0], [2.0, nan]])
# x.index_put((idx,), v, accumulate=True)
case("i_index_put_acc", [(IX, F32), ([2, 0, 2], I64), ([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], F32)],
     lambda x, i, v: x.index_put((i,), v, accumulate=True), [[1.0, 2.0], [4.0, 8.0], [16.0, 1.0], [2.0, nan]])


def put_winner(grads, ts):
    # as for scatter: of duplicate indices the last one wrote, only it gets a gradient
    idx = ts[1].tolist()
    g = grads[2].clone()
    for p in range(len(idx)):
        if idx[p] in idx[p + 1:]:
            g[p] = 0.0
    grads[2] = g
    return grads


case("i_index_put", [(IX, F32), ([2, 0, 2], I64), ([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]], F32)],
     lambda x, i, v: x.index_put((i,), v), [[1.0, 2.0], [4.0, 8.0], [16.0, 1.0], [2.0, nan]], post=put_winner)
# torch.sort(x, dim=1, stable=True).values and torch.topk(x, 2, 1).values with ties
SOX = [[3.0, 1.0, 3.0, 2.0], [nan, 0.0, -0.0, 5.0]]
case("i_sort", [(SOX, F32)], lambda x: torch.sort(x, dim=1, stable=True).values,
     [[1.0, 2.0, 4.0, 8.0], [1.0, 2.0, 4.0, 8.0]])
case("i_topk", [([[3.0, 1.0, 3.0, 2.0], [1.0, 0.0, -0.0, 5.0]], F32)], lambda x: torch.topk(x, 2, 1).values,
     [[1.0, 2.0], [4.0, 8.0]])

# ───────────── data movement ─────────────
MX = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]
S34 = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]
case("m_flip", [(MX, F32)], lambda x: torch.flip(x, (0, 1)), S34)  # torch.flip(x, (0, 1))
case("m_roll", [(MX, F32)], lambda x: torch.roll(x, -5, 1), S34)  # torch.roll(x, -5, 1)
case("m_tril", [(MX, F32)], lambda x: torch.tril(x, -1), S34)  # torch.tril(x, -1)
case("m_triu", [(MX, F32)], lambda x: torch.triu(x, 1), S34)  # torch.triu(x, 1)
case("m_pad", [(MX, F32)], lambda x: F.pad(x, (1, 2, 0, 1), value=nan),
     [[float(i * 7 + j) for j in range(7)] for i in range(4)])  # F.pad(x, (1, 2, 0, 1), value=nan)
case("m_pad_reflect", [([[1.0, 2.0, 3.0, 4.0]], F32)], lambda x: F.pad(x, (2, 3), mode="reflect"),
     [[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]])  # F.pad(x, (2, 3), mode="reflect")
case("m_pad_replicate", [([[1.0, 2.0, 3.0, 4.0]], F32)], lambda x: F.pad(x, (2, 3), mode="replicate"),
     [[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]])  # F.pad(x, (2, 3), mode="replicate")
case("m_slice", [(MX, F32)], lambda x: x[1:, 1::2], [[1.0, 2.0], [4.0, 8.0]])  # x[1:, 1::2]
case("m_concat", [([[1.0, 2.0]], F32), ([[3.0, 4.0], [5.0, 6.0]], F32)], lambda a, b: torch.cat([a, b, a], 0),
     [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])  # torch.cat([a, b, a], 0)
case("m_stack", [([1.0, 2.0], F32), ([3.0, 4.0], F32)], lambda a, b: torch.stack([a, b, a], 1),
     [[1.0, 2.0, 4.0], [8.0, 16.0, 32.0]])  # torch.stack([a, b, a], 1)
case("m_expand", [([[1.0], [2.0]], F32)], lambda x: x.expand(2, 3), [[1.0, 2.0, 4.0], [inf, 1.0, 1.0]])

# ───────────── 16-bit floats: the gradient's dtype and values ─────────────
HX = [-3.0, -1.0, -0.0, 0.5, 1.0, 2.0, 3.0, 0.125]
HS = [1.0, -2.0, 0.5, 4.0, 1.0, 1.0, 2.0, 0.25]
# (PyTorch 1.13 has no CPU kernels of the transcendental ops for float16:
# those are bf16 only)
case("h_tanh_bf16", [(HX, BF16)], torch.tanh, HS)  # torch.tanh(x)
case("h_sigmoid_bf16", [(HX, BF16)], torch.sigmoid, HS)  # torch.sigmoid(x)
case("h_gelu_bf16", [(HX, BF16)], F.gelu, HS)  # F.gelu(x)
case("h_exp_bf16", [(HX, BF16)], torch.exp, HS)  # torch.exp(x)
case("h_clamp_bf16", [(HX, BF16)], lambda x: torch.clamp(x, -1.0, 1.0), HS)  # torch.clamp(x, -1, 1)
case("h_softmax_bf16", [([HX], BF16)], lambda x: torch.softmax(x, -1), [HS])  # torch.softmax(x, -1)
# layer_norm, log_softmax and cross_entropy of bf16 (PyTorch's bf16 kernels
# round in between: its layer_norm gradient is 7 ulps off the float32 one):
# F.layer_norm(x.float(), (4,), w.float(), b.float(), 1e-5).bfloat16() and
# the float32 gradients rounded to bf16
case("h_layernorm_bf16", [([[1.0, 2.0, 3.0, 4.5], [0.1, 0.2, -0.3, 0.7]], BF16), ([1.0, 0.5, 2.0, -1.0], BF16),
                          ([0.0, 1.0, 0.0, -1.0], BF16)],
     lambda x, w, b: F.layer_norm(x, (4,), w, b, 1e-5), [[1.0, 2.0, -1.0, 0.5], [1.0, -1.0, 2.0, 4.0]], wide=True)
case("h_log_softmax_bf16", [([HX], BF16)], lambda x: torch.log_softmax(x, -1), [HS], wide=True)
case("h_ce_bf16", [([[0.5, 2.0, 1.0], [2.0, 0.5, -1.0]], BF16), ([2, 0], I64)], lambda x, t: F.cross_entropy(x, t),
     wide=True)
# torch.index_select(x.float(), 0, idx) rounded to bf16: kiln adds the duplicates of a 16-bit
# gradient in f32 and rounds once
case("h_index_select_bf16", [([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], BF16), ([2, 0, 2, 2], I64)],
     lambda x, i: torch.index_select(x, 0, i), [[1.0, 2.0], [256.0, 1.0], [1.5, 3.0], [0.75, 1.0]], wide=True)
for dt, nm in ((BF16, "bf16"), (F16, "f16")):
    # torch.gather(x, 1, idx): its gradient is a scatter_add in the dtype; x.scatter_add(1, idx, src)
    case("h_gather_" + nm, [([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dt), ([[0, 0, 2], [1, 1, 1]], I64)],
         lambda x, i: torch.gather(x, 1, i), [[1.0, 2.0, 0.25], [4.0, 8.0, 16.0]])
    case("h_scatter_add_" + nm, [([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dt), ([[0, 0, 2], [1, 1, 1]], I64),
                                 ([[10.0, 20.0, 30.0], [0.5, 0.25, 256.0]], dt)],
         lambda x, i, s: x.scatter_add(1, i, s), [[1.0, 2.0, 4.0], [8.0, 0.5, 2.0]])
    case("h_mul_" + nm, [(HX, dt), (HS, dt)], torch.mul, HS)  # a * b
    case("h_div_" + nm, [(HS, dt), (HX, dt)], torch.div, HS)  # a / b
    case("h_sum_" + nm, [(HX, dt)], lambda x: torch.sum(x), 3.0)  # torch.sum(x)

out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grad_edge_reference.txt")
with open(out_path, "w") as f:
    f.write("# written by grad_edge_reference.py (PyTorch %s); read by tests/backend/test_grad_edges.c\n"
            % torch.__version__)
    for name, ts, y, s, grads in CASES:
        for k, t in enumerate(ts):
            f.write(line(f"{name}.in{k}", t) + "\n")
        f.write(line(f"{name}.out", y) + "\n")
        f.write(line(f"{name}.seed", s) + "\n")
        for k, g in enumerate(grads):
            if g is not None:
                f.write(line(f"{name}.g{k}", g) + "\n")
print("wrote %d cases to %s" % (len(CASES), out_path))
