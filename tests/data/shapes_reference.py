#!/usr/bin/env python3
"""Reference results of kiln's public ops at edge shapes, computed with PyTorch.

Writes tests/data/shapes_reference.txt, read by tests/backend/test_shapes.c,
which traces the same cases (by name) on the ref and cpu backends, each op
alone and fused into elementwise kernels, and compares dtype, shape and
values. The cases: dimensions of size 0 in each position (reductions and
sorts over an empty axis, concat with an empty operand, matmul with an inner
or outer size 0, gathers with an empty index), rank 0 and rank 8
(KILN_MAX_RANK), size-1 dimensions broadcast on either side and both
operands broadcast at once, views (transposed, stepped slices, expanded)
as inputs, a reduction over 2^20 + 1 elements and row kernels over axes of
length 1 and 4097; gradients where the op has one.

Inputs are the same on both sides: element i of input `seed` is
((7 i + 5 seed) mod 17 - 8) / 4 (exact in every float dtype). One case per
line:

    <name> ok <dtype> <rank> <dims...> <m> <i_1> <v_1> ... <i_m> <v_m>
    <name> error

m positions of the row-major result are listed (all of them up to 64
elements, else 48 spread over it, the last included). Where kiln deliberately
differs from PyTorch (docs/semantics.md), the case's line holds kiln's
documented result and the entry in DIFFERS below says why.

Run (needs PyTorch, Debian's python3-torch):
    python3 tests/data/shapes_reference.py [out_path]
"""
import math
import sys

import torch
import torch.nn.functional as F

F32, F64, I64 = torch.float32, torch.float64, torch.int64
NAMES = {torch.float32: "f32", torch.float64: "f64", torch.int32: "i32", torch.int64: "i64",
         torch.bool: "bool"}


def inp(shape, seed=0, dt=F32):
    n = math.prod(shape)
    v = [((7 * i + 5 * seed) % 17 - 8) / 4 for i in range(n)]
    return torch.tensor(v, dtype=F64).to(dt).reshape(shape)


def idx(vals, shape):
    return torch.tensor(vals, dtype=I64).reshape(shape)


def grad_of(f, *xs):
    """the gradients of sum(f(*xs)) with respect to each x, in f64"""
    xs = [x.to(F64).requires_grad_(True) for x in xs]
    y = f(*xs)
    y.sum().backward()
    return [x.grad if x.grad is not None else torch.zeros_like(x) for x in xs]


R8A, R8B = [2, 1, 2, 1, 2, 1, 2, 1], [1, 2, 1, 2, 1, 2, 1, 2]
BIG = (1 << 20) + 1


def sorted_(x, axis, desc, which):
    v, i = torch.sort(x, dim=axis, descending=desc, stable=True)
    return v if which == 0 else i


def topk_(x, k, axis, largest, which):
    """torch.topk; its order of ties is unspecified: kiln's (docs/semantics.md) is the first k of the
    stable sort, so the indices come from torch.sort(stable=True)"""
    v, i = torch.topk(x, k, dim=axis, largest=largest, sorted=True)
    if which == 0:
        return v
    return torch.sort(x, dim=axis, descending=largest, stable=True)[1].narrow(axis if x.dim() else 0, 0, k) \
        if x.dim() else i


def layer_norm(x):
    return F.layer_norm(x, x.shape[-1:], eps=1e-5)


CASES = {
    # ── elementwise and broadcasting ──
    "add_3x1x5_1x4x1": lambda: inp([3, 1, 5], 0) + inp([1, 4, 1], 1),
    "add_1x4_3x1": lambda: inp([1, 4], 0) + inp([3, 1], 1),
    "add_4_3x1": lambda: inp([4], 0) + inp([3, 1], 1),
    "sub_3x1_4": lambda: inp([3, 1], 0) - inp([4], 1),
    "add_0x3_1x3": lambda: inp([0, 3], 0) + inp([1, 3], 1),
    "add_0x3_0x1": lambda: inp([0, 3], 0) + inp([0, 1], 1),
    "add_3x0_3x1": lambda: inp([3, 0], 0) + inp([3, 1], 1),
    "add_1x0_3x1": lambda: inp([1, 0], 0) + inp([3, 1], 1),
    "add_2x0x4_4": lambda: inp([2, 0, 4], 0) + inp([4], 1),
    "add_0_rank0": lambda: inp([0], 0) + inp([], 1),
    "add_0x3_3x1_err": lambda: inp([0, 3], 0) + inp([3, 1], 1),
    "add_rank0_rank0": lambda: inp([], 3) + inp([], 1),
    "mul_rank0_2x3": lambda: inp([], 3) * inp([2, 3], 1),
    "add_rank8": lambda: inp(R8A, 0) + inp(R8B, 1),
    "add_rank8_rank0": lambda: inp(R8A, 0) + inp([], 2),
    "add_rank8_2": lambda: inp(R8A, 0) + inp([2], 2),
    "exp_0x3": lambda: torch.exp(inp([0, 3])),
    "neg_rank0": lambda: -inp([], 3),
    "lt_0x2_2": lambda: inp([0, 2], 0) < inp([2], 1),
    "where_3x1_1x4_rank0": lambda: torch.where(inp([3, 1], 0) > 0, inp([1, 4], 1), inp([], 2)),
    "where_0_1_1": lambda: torch.where(inp([0], 0) > 0, inp([1], 1), inp([1], 2)),
    "where_2x1x1_1x3x1_1x1x4": lambda: torch.where(inp([2, 1, 1], 0) > 0, inp([1, 3, 1], 1), inp([1, 1, 4], 2)),
    "mul_T_4x3": lambda: inp([3, 4], 0).t() * inp([4, 3], 1),
    "add_T_T": lambda: inp([3, 4], 0).t() + inp([3, 4], 1).t(),
    "exp_step_slice": lambda: torch.exp(inp([7, 3], 0)[::2]),
    "add_step_slice_cols": lambda: inp([3, 9], 0)[:, 1::3] + inp([3, 3], 1),
    "add_expanded": lambda: inp([3, 1], 0).expand(3, 4) + inp([1, 4], 1).expand(3, 4),
    "cast_i64_0x2": lambda: inp([0, 2]).to(I64),
    # ── reductions ──
    "sum_0x3_all": lambda: inp([0, 3]).sum(),
    "sum_0x3_ax0": lambda: inp([0, 3]).sum(0),
    "sum_0x3_ax1": lambda: inp([0, 3]).sum(1),
    "sum_3x0_ax1": lambda: inp([3, 0]).sum(1),
    "sum_3x0_ax1_keep": lambda: inp([3, 0]).sum(1, keepdim=True),
    "sum_2x0x3_ax02": lambda: inp([2, 0, 3]).sum((0, 2)),
    "sum_2x0x3_ax02_keep": lambda: inp([2, 0, 3]).sum((0, 2), keepdim=True),
    "sum_2x0x3_ax1_keep": lambda: inp([2, 0, 3]).sum(1, keepdim=True),
    "prod_0x3_ax0": lambda: inp([0, 3]).prod(0),
    "prod_0_all": lambda: inp([0]).prod(),
    "mean_0x3_ax0": lambda: inp([0, 3]).mean(0),
    "mean_3x0_ax1": lambda: inp([3, 0]).mean(1),
    "mean_0_all": lambda: inp([0]).mean(),
    "mean_0x3_ax1": lambda: inp([0, 3]).mean(1),
    "max_0x3_ax0": lambda: inp([0, 3]).amax(0),
    "max_0x3_ax1": lambda: inp([0, 3]).amax(1),
    "min_0_all": lambda: inp([0]).amin(),
    "argmax_0x3_ax0": lambda: inp([0, 3]).argmax(0),
    "argmax_0x3_ax1": lambda: inp([0, 3]).argmax(1),
    "argmin_3x0_ax1": lambda: inp([3, 0]).argmin(1),
    "sum_rank0": lambda: inp([], 3).sum(),
    "sum_rank0_ax0": lambda: inp([], 3).sum(0),
    "max_rank0": lambda: inp([], 3).amax(),
    "argmax_rank0": lambda: inp([], 3).argmax(0),
    "mean_rank0_keep": lambda: inp([], 3).mean(0, keepdim=True),
    "prod_rank0_axm1": lambda: inp([], 3).prod(-1),
    "max_rank0_axm1_keep": lambda: inp([], 3).amax(-1, keepdim=True),
    "argmin_rank0": lambda: inp([], 3).argmin(-1),
    "sum_rank0_ax1_err": lambda: inp([], 3).sum(1),
    "sum_rank0_ax0_m1_err": lambda: inp([], 3).sum((0, -1)),
    "sum_2x3x4_ax02_keep": lambda: inp([2, 3, 4]).sum((0, 2), keepdim=True),
    "max_2x3x4_ax_m1_0": lambda: inp([2, 3, 4]).amax((-1, 0)),
    "mean_2x3x4_ax12": lambda: inp([2, 3, 4]).mean((1, 2)),
    "sum_rank8_ax1357": lambda: inp([2, 3, 1, 2, 2, 1, 3, 2]).sum((1, 3, 5, 7)),
    "sum_rank8_all": lambda: inp([2, 3, 1, 2, 2, 1, 3, 2]).sum(),
    "sum_T_ax0": lambda: inp([3, 5]).t().sum(0),
    "max_T_ax1": lambda: inp([3, 5]).t().amax(1),
    "argmax_T_ax0": lambda: inp([3, 5]).t().argmax(0),
    "sum_step_slice_ax1": lambda: inp([6, 5])[::2].sum(1),
    "sum_expanded_ax0": lambda: inp([1, 5]).expand(4, 5).sum(0),
    "sum_big": lambda: inp([BIG]).sum(),
    "sum_big_keep_2d": lambda: inp([1, BIG]).sum(1, keepdim=True),
    "mean_big": lambda: inp([BIG]).mean(),
    "max_big": lambda: inp([BIG], 3).amax(),
    "argmax_big": lambda: inp([BIG], 3).argmax(),
    "argmin_big": lambda: inp([BIG], 3).argmin(),
    "sum_i64_0x3": lambda: inp([0, 3]).to(I64).sum(0),
    "prod_i64_0": lambda: inp([0]).to(I64).prod(),
    # ── scans ──
    "cumsum_0x3_ax0": lambda: inp([0, 3]).cumsum(0),
    "cumsum_3x0_ax0": lambda: inp([3, 0]).cumsum(0),
    "cumprod_3x0_ax1": lambda: inp([3, 0]).cumprod(1),
    "cumsum_rank0": lambda: inp([], 3).cumsum(0),
    "cumsum_T_ax1": lambda: inp([3, 4]).t().cumsum(1),
    "cumprod_step_ax0": lambda: inp([7, 2])[::3].cumprod(0),
    "cumsum_1x4097_ax1": lambda: inp([2, 4097]).cumsum(1),
    # ── sort / topk ──
    "sort_0_v": lambda: sorted_(inp([0]), 0, False, 0),
    "sort_0_i": lambda: sorted_(inp([0]), 0, False, 1),
    "sort_3x0_ax1_v": lambda: sorted_(inp([3, 0]), 1, True, 0),
    "sort_0x3_ax1_i": lambda: sorted_(inp([0, 3]), 1, False, 1),
    "sort_rank0_v": lambda: sorted_(inp([], 3), 0, False, 0),
    "sort_rank0_i": lambda: sorted_(inp([], 3), 0, False, 1),
    "sort_2x1_ax1_i": lambda: sorted_(inp([2, 1]), 1, False, 1),
    "sort_T_ax1_v": lambda: sorted_(inp([3, 5]).t(), 1, False, 0),
    "sort_T_ax0_i": lambda: sorted_(inp([3, 5]).t(), 0, True, 1),
    "sort_4097_v": lambda: sorted_(inp([4097], 2), 0, False, 0),
    "argsort_4097": lambda: sorted_(inp([4097], 2), 0, True, 1),
    "topk_k0_v": lambda: topk_(inp([3, 4]), 0, 1, True, 0),
    "topk_k0_i": lambda: topk_(inp([3, 4]), 0, 1, True, 1),
    "topk_empty_axis": lambda: topk_(inp([3, 0]), 0, 1, True, 0),
    "topk_0x4_ax1_v": lambda: topk_(inp([0, 4]), 2, 1, True, 0),
    "topk_rank0_v": lambda: topk_(inp([], 3), 1, 0, True, 0),
    "topk_rank0_i": lambda: topk_(inp([], 3), 1, 0, True, 1),
    "topk_k_gt_dim": lambda: topk_(inp([3, 0]), 1, 1, True, 0),
    "topk_T_v": lambda: topk_(inp([3, 5]).t(), 2, 1, False, 0),
    # ── gather / scatter / index ──
    "gather_idx_3x0": lambda: torch.gather(inp([3, 4]), 1, idx([], [3, 0])),
    "gather_idx_0x4": lambda: torch.gather(inp([3, 4]), 1, idx([], [0, 4])),
    "gather_T": lambda: torch.gather(inp([4, 3]).t(), 1, idx([0, 3, 1, 2, 2, 0], [3, 2])),
    "index_select_empty_idx": lambda: torch.index_select(inp([3, 4]), 0, idx([], [0])),
    "index_select_0x4_empty_idx": lambda: torch.index_select(inp([0, 4]), 0, idx([], [0])),
    "index_select_x_3x0": lambda: torch.index_select(inp([3, 0]), 0, idx([2, 0], [2])),
    "index_select_T": lambda: torch.index_select(inp([4, 3]).t(), 1, idx([3, 0, 3], [3])),
    "scatter_empty_idx": lambda: inp([3, 4]).scatter(1, idx([], [3, 0]), inp([3, 2], 1)),
    "scatter_add_empty_idx": lambda: inp([3, 4]).scatter_add(0, idx([], [0, 4]), inp([2, 4], 1)),
    "index_add_m0": lambda: inp([3, 4]).index_add(0, idx([], [0]), inp([0, 4], 1)),
    "index_put_m0": lambda: inp([3, 4]).index_put((idx([], [0]),), inp([0, 4], 1)),
    "index_put_m0_acc": lambda: inp([3, 4]).index_put((idx([], [0]),), inp([4], 1), accumulate=True),
    "one_hot_0": lambda: F.one_hot(idx([], [0]), 4).to(F32),
    "embedding_ids_0": lambda: F.embedding(idx([], [0]), inp([5, 3])),
    "embedding_ids_2x0": lambda: F.embedding(idx([], [2, 0]), inp([5, 3])),
    # ── shape ops ──
    "concat_0x3_2x3": lambda: torch.cat([inp([0, 3], 0), inp([2, 3], 1)], 0),
    "concat_2x3_0x3": lambda: torch.cat([inp([2, 3], 0), inp([0, 3], 1)], 0),
    "concat_2x0_2x3_ax1": lambda: torch.cat([inp([2, 0], 0), inp([2, 3], 1)], 1),
    "concat_0x3_0x3": lambda: torch.cat([inp([0, 3], 0), inp([0, 3], 1)], 0),
    "concat_0x3_0x2_ax1": lambda: torch.cat([inp([0, 3], 0), inp([0, 2], 1)], 1),
    "concat_T_ax0": lambda: torch.cat([inp([2, 3], 0).t(), inp([3, 1], 1)], 1),
    "concat_rank0_err": lambda: torch.cat([inp([], 0), inp([], 1)], 0),
    "stack_0x3": lambda: torch.stack([inp([0, 3], 0), inp([0, 3], 1)], 1),
    "stack_rank0": lambda: torch.stack([inp([], 0), inp([], 1), inp([], 2)], 0),
    "pad_0x3_const": lambda: F.pad(inp([0, 3]), (1, 2), value=1.5),
    "pad_0x3_const_ax0": lambda: F.pad(inp([0, 3]), (0, 0, 1, 1), value=1.5),
    "pad_reflect_2x1x4": lambda: F.pad(inp([2, 1, 4]), (3, 2), mode="reflect"),
    "pad_replicate_2x1x1": lambda: F.pad(inp([2, 1, 1]), (2, 3), mode="replicate"),
    "pad_replicate_1x0": lambda: F.pad(inp([1, 1, 0]), (1, 1), mode="replicate"),
    "pad_const_T": lambda: F.pad(inp([3, 2]).t(), (1, 0, 0, 1), value=-1.0),
    "slice_empty": lambda: inp([5, 3])[4:2],
    "slice_step_0x3": lambda: inp([0, 3])[::2],
    "slice_step_of_T": lambda: inp([3, 7]).t()[1::3],
    "flip_0x3": lambda: torch.flip(inp([0, 3]), (0, 1)),
    "flip_rank0": lambda: torch.flip(inp([], 3), ()),
    "flip_T": lambda: torch.flip(inp([3, 4]).t(), (0,)),
    "roll_0": lambda: torch.roll(inp([0]), 3, 0),
    "roll_3x0": lambda: torch.roll(inp([3, 0]), 2, 0),
    "roll_T": lambda: torch.roll(inp([3, 4]).t(), 5, 1),
    "roll_len1": lambda: torch.roll(inp([3, 1]), -7, 1),
    "tril_0x3": lambda: torch.tril(inp([0, 3])),
    "triu_3x0": lambda: torch.triu(inp([3, 0]), 1),
    "tril_2x0x4": lambda: torch.tril(inp([2, 0, 4])),
    "triu_T": lambda: torch.triu(inp([3, 4]).t(), -1),
    "tril_rank1_err": lambda: torch.tril(inp([4])),
    "permute_rank0": lambda: inp([], 3).permute(()),
    "permute_0x2x3": lambda: inp([0, 2, 3]).permute(2, 0, 1),
    "permute_rank8": lambda: inp([2, 1, 3, 1, 2, 1, 1, 2]).permute(7, 6, 5, 4, 3, 2, 1, 0),
    "reshape_0x3_3x0": lambda: inp([0, 3]).reshape(3, 0),
    "reshape_0x3_m1x2x0": lambda: inp([0, 3]).reshape(2, 0, -1),
    "reshape_0x3_m1x0_err": lambda: inp([0, 3]).reshape(-1, 0),
    "reshape_rank0_1x1": lambda: inp([], 3).reshape(1, 1),
    "reshape_1x1_rank0": lambda: inp([1, 1], 3).reshape(()),
    "reshape_T": lambda: inp([3, 4]).t().reshape(12),
    "expand_3x1_3x0": lambda: inp([3, 1]).expand(3, 0),
    "expand_rank0_2x3": lambda: inp([], 3).expand(2, 3),
    "expand_0x1_2x0x4": lambda: inp([0, 1]).expand(2, 0, 4),
    "expand_3x1_4x1_err": lambda: inp([3, 1]).expand(4, 1),
    # ── matmul ──
    "matmul_2x0_0x3": lambda: inp([2, 0]) @ inp([0, 3]),
    "matmul_0x3_3x4": lambda: inp([0, 3]) @ inp([3, 4]),
    "matmul_2x3_3x0": lambda: inp([2, 3]) @ inp([3, 0]),
    "matmul_b0": lambda: inp([0, 2, 3]) @ inp([3, 4]),
    "matmul_v0_v0": lambda: inp([0]) @ inp([0], 1),
    "matmul_v_m": lambda: inp([3]) @ inp([3, 4], 1),
    "matmul_m_v": lambda: inp([4, 3]) @ inp([3], 1),
    "matmul_v_v": lambda: inp([3]) @ inp([3], 1),
    "matmul_bcast": lambda: inp([2, 1, 2, 3]) @ inp([1, 3, 3, 2], 1),
    "matmul_T_T": lambda: inp([3, 2]).t() @ inp([4, 3], 1).t(),
    "matmul_expanded_b": lambda: inp([1, 2, 3]).expand(4, 2, 3) @ inp([4, 3, 2], 1),
    "matmul_rank0_err": lambda: inp([]) @ inp([3]),
    "matmul_1x1_1x1": lambda: inp([1, 1], 3) @ inp([1, 1], 1),
    "matmul_inner_mismatch_err": lambda: inp([2, 3]) @ inp([4, 2]),
    # ── row kernels ──
    "softmax_0x3_ax1": lambda: torch.softmax(inp([0, 3]), 1),
    "softmax_3x0_ax1": lambda: torch.softmax(inp([3, 0]), 1),
    "log_softmax_2x0x3_ax1": lambda: torch.log_softmax(inp([2, 0, 3]), 1),
    "softmax_rank0": lambda: torch.softmax(inp([], 3), 0),
    "log_softmax_rank0": lambda: torch.log_softmax(inp([], 3), 0),
    "softmax_rank0_axm1": lambda: torch.softmax(inp([], 3), -1),
    "softmax_rank0_ax1_err": lambda: torch.softmax(inp([], 3), 1),
    "softmax_3x1_ax1": lambda: torch.softmax(inp([3, 1]), 1),
    "log_softmax_3x1_ax1": lambda: torch.log_softmax(inp([3, 1]), 1),
    "softmax_2x4097": lambda: torch.softmax(inp([2, 4097]), 1),
    "log_softmax_2x4097": lambda: torch.log_softmax(inp([2, 4097]), 1),
    "softmax_T_ax1": lambda: torch.softmax(inp([3, 5]).t(), 1),
    "softmax_T_ax0": lambda: torch.softmax(inp([3, 5]).t(), 0),
    "softmax_expanded": lambda: torch.softmax(inp([1, 5]).expand(3, 5), 1),
    "layer_norm_3x1": lambda: layer_norm(inp([3, 1])),
    "layer_norm_0x4": lambda: layer_norm(inp([0, 4])),
    "layer_norm_2x4097": lambda: layer_norm(inp([2, 4097])),
    "layer_norm_T": lambda: layer_norm(inp([4, 3]).t()),
    # ── conv / pool / losses ──
    "conv2d_batch0": lambda: F.conv2d(inp([0, 1, 4, 4]), inp([2, 1, 3, 3], 1)),
    "conv2d_1x1": lambda: F.conv2d(inp([1, 1, 1, 1]), inp([2, 1, 1, 1], 1), inp([2], 2)),
    "maxpool_batch0": lambda: F.max_pool2d(inp([0, 2, 4, 4]), 2),
    "avgpool_batch0": lambda: F.avg_pool2d(inp([0, 2, 4, 4]), 2),
    "maxpool_T": lambda: F.max_pool2d(inp([1, 1, 4, 6]).transpose(2, 3), 2),
    "cross_entropy_1class": lambda: F.cross_entropy(inp([3, 1]), idx([0, 0, 0], [3])),
    "cross_entropy_T": lambda: F.cross_entropy(inp([4, 3]).t(), idx([0, 3, 1], [3])),
    "mse_0x3": lambda: F.mse_loss(inp([0, 3]), inp([0, 3], 1)),
    # ── more: dtypes, big rows, columns, rank 8 views ──
    "sum_bool_0": lambda: (inp([0]) > 0).sum(),
    "sum_i32_big": lambda: inp([BIG]).to(torch.int32).sum(),
    "sum_f64_big_mid": lambda: inp([2, (1 << 19) + 1, 2], 0, F64).sum(1, keepdim=True),
    "argmax_ties_big": lambda: torch.zeros(BIG).argmax(),
    "max_1x4097_ax0": lambda: inp([1, 4097]).amax(0),
    "max_4097x2_ax0": lambda: inp([4097, 2]).amax(0),
    "argmax_4097x2_ax0": lambda: inp([4097, 2]).argmax(0),
    "sum_rank8_2s_ax0246": lambda: inp([2] * 8).sum((0, 2, 4, 6)),
    "sum_rank8_perm": lambda: inp([2, 1, 3, 1, 2, 1, 1, 2]).permute(7, 6, 5, 4, 3, 2, 1, 0).sum((0, 7)),
    "cumsum_big": lambda: inp([BIG]).cumsum(0),
    "cumsum_T_4097": lambda: inp([4097, 2]).t().cumsum(1),
    "softmax_4097x2_ax0": lambda: torch.softmax(inp([4097, 2]), 0),
    "log_softmax_T_4097": lambda: torch.log_softmax(inp([4097, 2]).t(), 1),
    "matmul_1x1_1x4097": lambda: inp([1, 1], 3) @ inp([1, 4097], 1),
    "matmul_4097_dot": lambda: inp([4097]) @ inp([4097], 1),
    "matmul_b0_bcast": lambda: inp([0, 1, 2, 3]) @ inp([5, 3, 2], 1),
    "matmul_step_v": lambda: inp([2, 3]) @ inp([7])[::3],
    "matmul_rank8": lambda: inp([2, 1, 1, 1, 1, 1, 2, 3]) @ inp([1, 1, 1, 1, 1, 2, 3, 2], 1),
    "conv2d_out0": lambda: F.conv2d(inp([1, 1, 4, 4]), inp([0, 1, 3, 3], 1)),
    "conv2d_small_err": lambda: F.conv2d(inp([1, 1, 2, 2]), inp([1, 1, 3, 3], 1)),
    "max_pool2d_big_k_err": lambda: F.max_pool2d(inp([1, 1, 2, 2]), 3),
    "cross_entropy_0": lambda: F.cross_entropy(inp([0, 3]), idx([], [0])),
    "cross_entropy_4097": lambda: F.cross_entropy(inp([2, 4097]), idx([4096, 7], [2])),
    "gather_x_0x4": lambda: torch.gather(inp([0, 4]), 1, idx([], [0, 2])),
    "index_select_rank0_idx": lambda: torch.index_select(inp([3, 4]), 0, idx([1], [])),
    "one_hot_rank0": lambda: F.one_hot(idx([2], []), 4).to(F32),
    "embedding_rank0": lambda: F.embedding(idx([2], []), inp([5, 3])),
    "topk_4097_all": lambda: topk_(inp([4097], 2), 4097, 0, True, 1),
    "sort_4097x2_ax0_i": lambda: sorted_(inp([4097, 2], 2), 0, False, 1),
    "where_rank8_0": lambda: torch.where(inp([2, 1, 2, 1, 2, 1, 2, 0]) > 0, inp(R8B, 1), inp([], 2)),
    "roll_rank8": lambda: torch.roll(inp([2] * 8), 3, 5),
    "tril_1x4097": lambda: torch.tril(inp([2, 4097]), 4000),
    "sum_expanded_T": lambda: inp([3, 1]).expand(3, 4).t().sum(1),
    "concat_mid0_rank3": lambda: torch.cat([inp([2, 0, 3], 0), inp([2, 2, 3], 1), inp([2, 0, 3], 2)], 1),
    "stack_axm1": lambda: torch.stack([inp([2, 0], 0), inp([2, 0], 1)], -1),
    "pad_reflect_T": lambda: F.pad(inp([4, 3]).t(), (2, 1), mode="reflect"),
    "mse_big": lambda: F.mse_loss(inp([BIG]), inp([BIG], 1)),
    "layer_norm_2x0x4": lambda: layer_norm(inp([2, 0, 4])),
    "grad_mean_big": lambda: grad_of(lambda x: x.mean(), inp([BIG]))[0],
    "grad_softmax_4097": lambda: grad_of(lambda x: torch.softmax(x, 1) * inp([2, 4097], 1, F64), inp([2, 4097]))[0],
    "grad_matmul_b0_bcast_b": lambda: grad_of(lambda a, b: a @ b, inp([0, 1, 2, 3]), inp([5, 3, 2], 1))[1],
    "grad_where_rank8": lambda: grad_of(lambda a: torch.where(inp(R8B, 1, F64) > 0, a, a * 3), inp(R8A))[0],
    # ── gradients (of sum(f(x)), in f64) ──
    "grad_sum_0x3": lambda: grad_of(lambda x: x.sum(), inp([0, 3]))[0],
    "grad_mean_3x0_ax1": lambda: grad_of(lambda x: x.mean(1), inp([3, 0]))[0],
    "grad_add_bcast_a": lambda: grad_of(lambda a, b: (a + b) * (a + b), inp([3, 1, 5]), inp([1, 4, 1], 1))[0],
    "grad_add_bcast_b": lambda: grad_of(lambda a, b: (a + b) * (a + b), inp([3, 1, 5]), inp([1, 4, 1], 1))[1],
    "grad_mul_rank0_a": lambda: grad_of(lambda a, b: a * b, inp([]), inp([2, 3], 1))[0],
    "grad_mul_rank8_a": lambda: grad_of(lambda a, b: a * b, inp(R8A), inp(R8B, 1))[0],
    "grad_matmul_2x0_a": lambda: grad_of(lambda a, b: a @ b, inp([2, 0]), inp([0, 3], 1))[0],
    "grad_matmul_2x0_b": lambda: grad_of(lambda a, b: a @ b, inp([2, 0]), inp([0, 3], 1))[1],
    "grad_matmul_0x3_b": lambda: grad_of(lambda a, b: a @ b, inp([0, 3]), inp([3, 4], 1))[1],
    "grad_matmul_v_v": lambda: grad_of(lambda a, b: a @ b, inp([3]), inp([3], 1))[0],
    "grad_softmax_3x1": lambda: grad_of(lambda x: torch.softmax(x, 1) * inp([3, 1], 1, F64), inp([3, 1]))[0],
    "grad_gather_empty": lambda: grad_of(lambda x: torch.gather(x, 1, idx([], [3, 0])), inp([3, 4]))[0],
    "grad_concat_empty": lambda: grad_of(lambda a, b: torch.cat([a, b], 0) * 2, inp([0, 3]), inp([2, 3], 1))[0],
    "grad_max_2x3_ax0_keep": lambda: grad_of(lambda x: x.amax(0, keepdim=True), inp([2, 3]))[0],
    "grad_expand_rank0": lambda: grad_of(lambda x: x.expand(2, 3) * inp([2, 3], 1, F64), inp([]))[0],
    "grad_cumsum_3x0": lambda: grad_of(lambda x: x.cumsum(1), inp([3, 0]))[0],
    "grad_sort_0": lambda: grad_of(lambda x: sorted_(x, 0, False, 0), inp([0]))[0],
    "grad_layer_norm_3x1": lambda: grad_of(lambda x: layer_norm(x) * inp([3, 1], 1, F64), inp([3, 1]))[0],
}

# Cases where kiln deliberately differs (docs/semantics.md): name -> kiln's documented result, computed here.
def refuse():
    raise RuntimeError("kiln refuses this case")


DIFFERS = {
    # softmax / log_softmax over an empty axis: an error in kiln, an empty result in PyTorch ("Reductions")
    "softmax_3x0_ax1": refuse,
    "log_softmax_2x0x3_ax1": refuse,
    # cross_entropy with no target left to average (none at all here): 0 in kiln, NaN (0 / 0) in PyTorch
    "cross_entropy_0": lambda: torch.tensor(0.0),
    # index_select with a 0-d index: the axis is replaced by the index's dims (none), as numpy.take;
    # PyTorch keeps the axis with size 1 ("Indexing")
    "index_select_rank0_idx": lambda: inp([3, 4])[1],
}


def fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    return repr(float(v))


def line(name, f):
    f = DIFFERS.get(name, f)
    try:
        y = f()
    except (RuntimeError, IndexError, ValueError) as e:
        return f"{name} error"
    y = y.detach().contiguous()
    flat = y.reshape(-1).tolist()
    n = len(flat)
    pos = list(range(n)) if n <= 64 else sorted({(n - 1) * k // 47 for k in range(48)})
    dims = " ".join(str(d) for d in y.shape)
    vals = " ".join(f"{i} {fmt(flat[i])}" for i in pos)
    head = f"{name} ok {NAMES[y.dtype]} {y.dim()}" + (f" {dims}" if dims else "")
    return f"{head} {len(pos)}" + (f" {vals}" if vals else "")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else __file__.replace(".py", ".txt")
    lines = [f"# kiln edge-shape reference: generated by tests/data/shapes_reference.py (PyTorch {torch.__version__})"]
    lines += [line(name, f) for name, f in CASES.items()]
    with open(out, "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
