#!/usr/bin/env python3
"""Reference results of kiln's ops at edge shapes, second part, computed with PyTorch.

Writes tests/data/shapes_nn_reference.txt, read by tests/backend/test_shapes_nn.c
(the same format and inputs as shapes_reference.py, whose helpers it uses):
the dtypes bf16, f16, u8, i8 and bool at edge shapes (size-0 dimensions, rank
0, broadcasting both sides, rows of 1 and 4097 elements); attention, batch
norm, dropout at p = 0 and p = 1, linear, clamp, conv2d and pooling at edge
sizes; the tensor-scalar (_s) and tensor-constant (_c) forms of binary ops
with 0-d and empty operands; and dynamic dimension marks (kiln_dynamic) on
dimensions of size 0 and 1, which must give the values of the specialised graph.

8-bit integer inputs are the f32 inputs truncated to int64 first (values -2..2,
u8 wraps them to 254, 255), as the C side builds them.

PyTorch 1.13 has no CPU kernels of f16 cumsum, topk and matmul: those are
computed in f32 and rounded once, as kiln computes every 16-bit op.

Run (needs PyTorch, Debian's python3-torch):
    python3 tests/data/shapes_nn_reference.py [out_path]
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shapes_reference as base  # noqa: E402
from shapes_reference import F32, F64, I64, inp, idx, grad_of, sorted_, topk_, refuse, fmt  # noqa: E402,F401

BF, HF, U8, I8, I32 = torch.bfloat16, torch.float16, torch.uint8, torch.int8, torch.int32
NAMES = {**base.NAMES, BF: "bf16", HF: "f16", U8: "u8", I8: "i8"}


def inq(shape, seed=0, dt=F32):
    """the inputs of shapes_reference.py in dtype dt; 8-bit integers through int64"""
    x = inp(shape, seed, F64)
    return x.to(I64).to(dt) if dt in (U8, I8) else x.to(dt)


def ln16(x):
    """kiln's layer norm of a 16-bit x: computed in f32, rounded once"""
    return F.layer_norm(x.float(), x.shape[-1:], eps=1e-5).to(x.dtype)


def bn(x, training, steps=1):
    """BatchNorm2d(C, eps 1e-5, momentum 0.1), fresh; the output of its last forward"""
    m = torch.nn.BatchNorm2d(x.shape[1], eps=1e-5, momentum=0.1).double()
    m.train(training)
    for _ in range(steps):
        y = m(x.double())
    return y.float()


def bn_stat(x, which):
    m = torch.nn.BatchNorm2d(x.shape[1], eps=1e-5, momentum=0.1).double()
    m(x.double())
    return (m.running_mean if which == 0 else m.running_var).float()


def sdpa(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask) if hasattr(F, "scaled_dot_product_attention") \
        else sdpa_math(q, k, v, mask)


def sdpa_math(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) if q.shape[-1] else q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


CASES = {
    # ── 16-bit floats and 8-bit integers: elementwise, broadcasting ──
    "add_bf16_3x1_1x4": lambda: inq([3, 1], 0, BF) + inq([1, 4], 1, BF),
    "add_f16_0x3_1x3": lambda: inq([0, 3], 0, HF) + inq([1, 3], 1, HF),
    "mul_f16_rank0_2x3": lambda: inq([], 3, HF) * inq([2, 3], 1, HF),
    "add_bf16_f16": lambda: inq([2, 1], 0, BF) + inq([1, 3], 1, HF),
    "add_u8_3x1_1x4": lambda: inq([3, 1], 0, U8) + inq([1, 4], 1, U8),
    "sub_i8_3x1_1x4": lambda: inq([3, 1], 0, I8) - inq([1, 4], 1, I8),
    "mul_u8_i8": lambda: inq([3, 1], 0, U8) * inq([4], 1, I8),
    "add_u8_0x3_1x3": lambda: inq([0, 3], 0, U8) + inq([1, 3], 1, U8),
    "add_i8_rank0_rank8": lambda: inq([], 3, I8) + inq(base.R8A, 1, I8),
    "add_u8_bf16": lambda: inq([3, 1], 0, U8) + inq([1, 2], 1, BF),
    "lt_u8_0x2_2": lambda: inq([0, 2], 0, U8) < inq([2], 1, U8),
    "where_bool_bf16": lambda: torch.where(inp([3, 1]) > 0, inq([1, 4], 1, BF), inq([], 2, BF)),
    "exp_bf16_T": lambda: torch.exp(inq([3, 4], 0, BF).t()),
    "and_bool_0x3": lambda: (inp([0, 3]) > 0) & (inp([1, 3], 1) > 0),
    "neg_i8_rank0": lambda: -inq([], 3, I8),
    # ── reductions ──
    "sum_u8_0x3_ax0": lambda: inq([0, 3], 0, U8).sum(0),
    "sum_u8_4097": lambda: inq([4097], 0, U8).sum(),
    "sum_i8_3x0_ax1": lambda: inq([3, 0], 0, I8).sum(1),
    "sum_i8_rank0": lambda: inq([], 3, I8).sum(),
    "sum_bf16_0x3_ax0": lambda: inq([0, 3], 0, BF).sum(0),
    "sum_bf16_2x4097_ax1": lambda: inq([2, 4097], 0, BF).sum(1),
    "sum_f16_rank0": lambda: inq([], 3, HF).sum(),
    "mean_bf16_3x0_ax1": lambda: inq([3, 0], 0, BF).mean(1),
    "mean_f16_2x4097_ax1": lambda: inq([2, 4097], 0, HF).float().mean(1).to(HF),
    "mean_bf16_rank0": lambda: inq([], 3, BF).mean(),
    "max_u8_0x3_ax1": lambda: inq([0, 3], 0, U8).amax(1),
    "max_i8_4097x2_ax0": lambda: inq([4097, 2], 0, I8).amax(0),
    "min_bf16_T_ax1": lambda: inq([3, 5], 0, BF).t().amin(1),
    "max_f16_rank0": lambda: inq([], 3, HF).amax(),
    "max_u8_0_err": lambda: inq([0], 0, U8).amax(),
    "argmax_u8_4097": lambda: inq([4097], 3, U8).argmax(),
    "argmin_i8_T_ax0": lambda: inq([3, 5], 0, I8).t().argmin(0),
    "argmax_bf16_0x3_ax1": lambda: inq([0, 3], 0, BF).argmax(1),
    "prod_i8_0": lambda: inq([0], 0, I8).prod(),
    "sum_bool_3x1_ax1": lambda: (inp([3, 1]) > 0).sum(1),
    # ── scans, sort, topk ──
    "cumsum_u8_2x4097": lambda: inq([2, 4097], 0, U8).cumsum(1),
    "cumsum_i8_3x0": lambda: inq([3, 0], 0, I8).cumsum(1),
    "cumsum_bf16_rank0": lambda: inq([], 3, BF).cumsum(0),
    "cumsum_f16_T": lambda: inq([3, 4], 0, HF).t().float().cumsum(1).to(HF),
    "cumsum_bool_4": lambda: (inp([4]) > 0).cumsum(0),
    "sort_u8_4097_v": lambda: sorted_(inq([4097], 2, U8), 0, False, 0),
    "sort_i8_4097_i": lambda: sorted_(inq([4097], 2, I8), 0, True, 1),
    "sort_bf16_3x0_v": lambda: sorted_(inq([3, 0], 0, BF), 1, False, 0),
    "sort_f16_rank0_v": lambda: sorted_(inq([], 3, HF), 0, False, 0),
    "sort_bf16_T_i": lambda: sorted_(inq([3, 5], 0, BF).t(), 0, False, 1),
    "topk_u8_k0_v": lambda: topk_(inq([3, 4], 0, U8), 0, 1, True, 0),
    "topk_i8_T_i": lambda: topk_(inq([3, 5], 0, I8).t(), 2, 1, False, 1),
    "topk_f16_4097_v": lambda: topk_(inq([4097], 2, HF).float(), 5, 0, True, 0).to(HF),
    "topk_bf16_rank0_v": lambda: topk_(inq([], 3, BF), 1, 0, True, 0),
    # ── matmul (integers: i32 in kiln, DIFFERS) ──
    "matmul_bf16_2x0_0x3": lambda: inq([2, 0], 0, BF) @ inq([0, 3], 1, BF),
    "matmul_f16_1x4097_dot": lambda: (inq([4097], 0, HF).float() @ inq([4097], 1, HF).float()).to(HF),
    "matmul_bf16_bcast": lambda: inq([2, 1, 2, 3], 0, BF) @ inq([3, 3, 2], 1, BF),
    "matmul_u8_3x4_4x2": lambda: inq([3, 4], 0, U8) @ inq([4, 2], 1, U8),
    "matmul_i8_v_v": lambda: inq([5], 0, I8) @ inq([5], 1, I8),
    "matmul_i8_b0": lambda: inq([0, 2, 3], 0, I8) @ inq([3, 4], 1, I8),
    "matmul_bf16_T": lambda: inq([3, 2], 0, BF).t() @ inq([3, 4], 1, BF),
    # ── shape ops ──
    "concat_bf16_0x3_2x3": lambda: torch.cat([inq([0, 3], 0, BF), inq([2, 3], 1, BF)]),
    "concat_u8_2x0_2x3": lambda: torch.cat([inq([2, 0], 0, U8), inq([2, 3], 1, U8)], 1),
    "concat_i8_T": lambda: torch.cat([inq([2, 3], 0, I8).t(), inq([3, 1], 1, I8)], 1),
    "pad_f16_0x3": lambda: F.pad(inq([0, 3], 0, HF), (2, 0, 1, 1), value=1.5),
    "pad_u8_2x1": lambda: F.pad(inq([2, 1], 0, U8), (1, 2), value=7),
    "pad_i8_reflect": lambda: F.pad(inq([1, 2, 4], 0, I8).float(), (3, 2), mode="reflect").to(I8),
    "slice_bf16_step": lambda: inq([7, 3], 0, BF)[1::3],
    "slice_u8_empty": lambda: inq([5, 3], 0, U8)[4:2],
    "flip_i8_0x3": lambda: inq([0, 3], 0, I8).flip(0, 1),
    "flip_f16_T": lambda: inq([3, 4], 0, HF).t().flip(0),
    "flip_bool_rank0": lambda: inp([], 3) > 0,
    # ── row kernels of 16-bit floats ──
    "softmax_bf16_3x1": lambda: torch.softmax(inq([3, 1], 0, BF), 1),
    "softmax_f16_2x4097": lambda: torch.softmax(inq([2, 4097], 0, HF).float(), 1).to(HF),
    "softmax_bf16_0x3": lambda: torch.softmax(inq([0, 3], 0, BF), 1),
    "log_softmax_f16_3x1": lambda: torch.log_softmax(inq([3, 1], 0, HF).float(), 1).to(HF),
    "log_softmax_bf16_2x4097": lambda: torch.log_softmax(inq([2, 4097], 0, BF).float(), 1).to(BF),
    "softmax_f16_3x0": lambda: torch.softmax(inq([3, 0], 0, HF).float(), 1).to(HF),
    "layer_norm_bf16_3x1": lambda: ln16(inq([3, 1], 0, BF)),
    "layer_norm_f16_2x4097": lambda: ln16(inq([2, 4097], 0, HF)),
    "layer_norm_bf16_0x4": lambda: ln16(inq([0, 4], 0, BF)),
    # ── attention ──
    "sdpa_1x1x3x4": lambda: sdpa_math(inp([1, 1, 3, 4], 0), inp([1, 1, 3, 4], 1), inp([1, 1, 3, 4], 2)),
    "sdpa_b0": lambda: sdpa_math(inp([0, 2, 3, 4], 0), inp([0, 2, 3, 4], 1), inp([0, 2, 3, 4], 2)),
    "sdpa_t0": lambda: sdpa_math(inp([1, 2, 0, 4], 0), inp([1, 2, 0, 4], 1), inp([1, 2, 0, 4], 2)),
    "sdpa_t1": lambda: sdpa_math(inp([2, 1, 1, 4], 0), inp([2, 1, 1, 4], 1), inp([2, 1, 1, 4], 2)),
    "sdpa_mask_bcast": lambda: sdpa_math(inp([2, 2, 3, 4], 0), inp([2, 2, 3, 4], 1), inp([2, 2, 3, 4], 2),
                                         inp([1, 1, 3, 3], 3)),
    "sdpa_bool_mask_none": lambda: sdpa_math(inp([1, 1, 2, 4], 0), inp([1, 1, 3, 4], 1), inp([1, 1, 3, 4], 2),
                                             torch.zeros(1, 1, 2, 3, dtype=torch.bool)),
    "sdpa_tq_tk": lambda: sdpa_math(inp([1, 2, 2, 4], 0), inp([1, 2, 5, 4], 1), inp([1, 2, 5, 3], 2)),
    "sdpa_tk0": lambda: sdpa_math(inp([1, 1, 2, 4], 0), inp([1, 1, 0, 4], 1), inp([1, 1, 0, 4], 2)),
    "sdpa_bf16": lambda: sdpa_math(inq([1, 2, 3, 4], 0, BF).float(), inq([1, 2, 3, 4], 1, BF).float(),
                                   inq([1, 2, 3, 4], 2, BF).float()).to(BF),
    "sdpa_hd_mismatch_err": lambda: sdpa_math(inp([1, 1, 3, 4], 0), inp([1, 1, 3, 5], 1), inp([1, 1, 3, 4], 2)),
    # ── batch norm, dropout, linear, clamp ──
    "batchnorm_train_2x3x2x2": lambda: bn(inp([2, 3, 2, 2]), True),
    "batchnorm_train_1x2x1x1": lambda: bn(inp([1, 2, 1, 1]), True),
    "batchnorm_eval_0x2x3x3": lambda: bn(inp([0, 2, 3, 3]), False),
    "batchnorm_eval_2x3x1x1": lambda: bn(inp([2, 3, 1, 1]), False),
    "batchnorm_train_var_4x2x1x1": lambda: bn_stat(inp([4, 2, 1, 1]), 1),
    "batchnorm_train_mean_2x2x0x3": lambda: bn_stat(inp([2, 2, 0, 3]), 0),
    "batchnorm_train_0x2x3x3": lambda: bn(inp([0, 2, 3, 3]), True),
    "dropout_p0_3x4": lambda: F.dropout(inp([3, 4]), 0.0, True),
    "dropout_p1_3x4": lambda: F.dropout(inp([3, 4]), 1.0, True),
    "dropout_p1_0x3": lambda: F.dropout(inp([0, 3]), 1.0, True),
    "dropout_p05_0x3": lambda: F.dropout(inp([0, 3]), 0.5, True),
    "dropout_p05_rank0_eval": lambda: F.dropout(inp([], 3), 0.5, False),
    "linear_0x3": lambda: F.linear(inp([0, 3]), inp([4, 3], 1), inp([4], 2)),
    "linear_in0": lambda: F.linear(inp([2, 0]), inp([4, 0], 1), inp([4], 2)),
    "linear_out0": lambda: F.linear(inp([2, 3]), inp([0, 3], 1), inp([0], 2)),
    "linear_v": lambda: F.linear(inp([3]), inp([4, 3], 1), inp([4], 2)),
    "linear_rank8": lambda: F.linear(inp([2, 1, 1, 1, 1, 1, 2, 3]), inp([2, 3], 1)),
    "clamp_0x3": lambda: inp([0, 3]).clamp(-1, 1),
    "clamp_rank0": lambda: inp([], 3).clamp(-1, 1),
    "clamp_lo_eq_hi": lambda: inp([5]).clamp(0.5, 0.5),
    "clamp_lo_gt_hi": lambda: inp([5]).clamp(1, -1),
    "clamp_u8_2x3": lambda: inq([2, 3], 0, U8).clamp(1, 254),
    "clamp_bf16_T": lambda: inq([3, 4], 0, BF).t().clamp(-0.5, 1.25),
    # ── conv2d, pooling ──
    "conv2d_cin0": lambda: F.conv2d(inp([1, 0, 4, 4]), inp([2, 0, 3, 3], 1), inp([2], 2)),
    "conv2d_k_eq_padded": lambda: F.conv2d(inp([1, 2, 3, 3]), inp([2, 2, 5, 5], 1), None, 1, 1),
    "conv2d_stride_gt_in": lambda: F.conv2d(inp([1, 1, 4, 4]), inp([1, 1, 2, 2], 1), None, 5, 0),
    "conv2d_dil_edge": lambda: F.conv2d(inp([1, 1, 5, 5]), inp([1, 1, 3, 3], 1), None, 1, 0, 2),
    "conv2d_dil_pad_stride": lambda: F.conv2d(inp([2, 2, 4, 4]), inp([3, 2, 2, 2], 1), inp([3], 2), 3, 2, 3),
    "conv2d_dil_too_big_err": lambda: F.conv2d(inp([1, 1, 4, 4]), inp([1, 1, 3, 3], 1), None, 1, 0, 2),
    "conv2d_1x1_input_pad": lambda: F.conv2d(inp([1, 1, 1, 1]), inp([1, 1, 3, 3], 1), None, 1, 1),
    "conv2d_hw0_err": lambda: F.conv2d(inp([1, 1, 0, 4]), inp([1, 1, 1, 1], 1), None),
    "maxpool_k_eq_in": lambda: F.max_pool2d(inp([2, 3, 4, 4]), 4),
    "avgpool_k_eq_in": lambda: F.avg_pool2d(inp([2, 3, 4, 4]), 4),
    "maxpool_k_eq_padded": lambda: F.max_pool2d(inp([1, 1, 3, 3]), 5, 5, 2),
    "avgpool_k_eq_padded": lambda: F.avg_pool2d(inp([1, 1, 3, 3]), 5, 5, 2),
    "maxpool_1x1": lambda: F.max_pool2d(inp([1, 2, 1, 1]), 1),
    "maxpool_c0": lambda: F.max_pool2d(inp([2, 0, 4, 4]), 2),
    "avgpool_stride_gt_k": lambda: F.avg_pool2d(inp([1, 1, 5, 5]), 2, 3),
    "max_pool2d_pad_gt_half_err": lambda: F.max_pool2d(inp([1, 1, 4, 4]), 2, 2, 2),
    # ── _s and _c forms with 0-d and empty operands ──
    "add_s_rank0": lambda: inp([], 3) + 0.5,
    "add_c_0x3": lambda: inp([0, 3]) + 0.5,
    "mul_s_0": lambda: inp([0]) * 3.0,
    "sub_c_rank0_i64": lambda: inq([], 3, I64) - 2,
    "div_c_rank0_i64": lambda: inq([], 3, I64) / 2,
    "div_s_0_i64": lambda: inq([0], 0, I64) / 2.5,
    "pow_c_rank0": lambda: torch.pow(inp([], 3), 2.0),
    "pow_s_0x3": lambda: torch.pow(inp([0, 3]), 3.0),
    "max_c_rank0": lambda: torch.maximum(inp([], 3), torch.tensor(0.0)),
    "lt_c_0x3": lambda: inp([0, 3]) < 0.0,
    "lt_s_rank0_u8": lambda: inq([], 3, U8) < 100,
    "add_c_u8_rank0": lambda: inq([], 3, U8) + 3,
    "add_s_bf16_0": lambda: inq([0], 0, BF) + 0.25,
    "mul_c_i8_rank0": lambda: inq([], 3, I8) * 100,
    "add_c_bool_rank0": lambda: (inp([], 3) > 0) + 1,
    "div_c_u8_0x2": lambda: inq([0, 2], 0, U8) / 2,
    # ── dynamic marks on dims of size 0 and 1 (the same values as without) ──
    "dyn_add_0x3_1x3": lambda: inp([0, 3]) + inp([1, 3], 1),
    "dyn_add_1x3_4x1": lambda: inp([1, 3]) + inp([4, 1], 1),
    "dyn_sum_1x5_ax0": lambda: inp([1, 5]).sum(0),
    "dyn_mean_0x3_ax1": lambda: inp([0, 3]).mean(1),
    "dyn_mean_1x3_ax0": lambda: inp([1, 3]).mean(0),
    "dyn_matmul_1x3_3x1": lambda: inp([1, 3]) @ inp([3, 1], 1),
    "dyn_matmul_0x3_3x2": lambda: inp([0, 3]) @ inp([3, 2], 1),
    "dyn_softmax_2x1": lambda: torch.softmax(inp([2, 1]), 1),
    "dyn_concat_0x3_2x3": lambda: torch.cat([inp([0, 3]), inp([2, 3], 1)]),
    "dyn_concat_1x3_1x3": lambda: torch.cat([inp([1, 3]), inp([1, 3], 1)]),
    "dyn_slice_1x3": lambda: inp([1, 3])[:, 1:],
    "dyn_reshape_1x6": lambda: inp([1, 6]).reshape(3, 2),
    "dyn_cumsum_1x4_ax0": lambda: inp([1, 4]).cumsum(0),
    "dyn_layer_norm_1x4": lambda: base.layer_norm(inp([1, 4])),
    "dyn_sort_1_v": lambda: sorted_(inp([1], 3), 0, False, 0),
    "dyn_pad_0x2": lambda: F.pad(inp([0, 2]), (0, 0, 1, 2), value=0.5),
}

DIFFERS = {
    # matmul of 8-bit integers: an i32 result accumulated in i32 ("Dtypes and promotion"); PyTorch keeps u8/i8
    "matmul_u8_3x4_4x2": lambda: inq([3, 4], 0, U8).to(I32) @ inq([4, 2], 1, U8).to(I32),
    "matmul_i8_v_v": lambda: (inq([5], 0, I8).to(I32) * inq([5], 1, I8).to(I32)).sum().to(I32),
    "matmul_i8_b0": lambda: torch.zeros(0, 2, 4, dtype=I32),
    # u8 op i8: i32 in kiln (no i16), i16 in PyTorch ("Dtypes and promotion")
    "mul_u8_i8": lambda: inq([3, 1], 0, U8).to(I32) * inq([4], 1, I8).to(I32),
    # softmax over an empty axis: an error in kiln ("Reductions"); so is kiln_sdpa with no keys ("Attention masks")
    "softmax_f16_3x0": refuse,
    "sdpa_t0": refuse,
    "sdpa_tk0": refuse,
    # clamp with lo > hi: an error in kiln, hi everywhere in PyTorch ("Composed ops")
    "clamp_lo_gt_hi": refuse,
    # dropout with p = 1: an error in kiln, zeros in PyTorch ("Gradients at edge values")
    "dropout_p1_3x4": refuse,
    "dropout_p1_0x3": refuse,
    # conv2d with 0 input channels: the bias at every position in kiln (a sum of no products);
    # PyTorch 1.13 returns an empty [N, 0, H', W'] ("Layers, losses and optimizers")
    "conv2d_cin0": lambda: inp([2], 2).reshape(1, 2, 1, 1).expand(1, 2, 2, 2),
    # pooling of 0 channels: an empty result in kiln (as a batch of 0), an error in PyTorch
    "maxpool_c0": lambda: torch.zeros(0, dtype=F32).reshape(2, 0, 1, 1).expand(2, 0, 2, 2),
}


def line(name, f):
    f = DIFFERS.get(name, f)
    try:
        y = f()
    except (RuntimeError, IndexError, ValueError):
        return f"{name} error"
    y = y.detach().contiguous()
    flat = (y.float() if y.dtype in (BF, HF) else y).reshape(-1).tolist()
    n = len(flat)
    pos = list(range(n)) if n <= 64 else sorted({(n - 1) * k // 47 for k in range(48)})
    dims = " ".join(str(d) for d in y.shape)
    vals = " ".join(f"{i} {fmt(flat[i])}" for i in pos)
    head = f"{name} ok {NAMES[y.dtype]} {y.dim()}" + (f" {dims}" if dims else "")
    return f"{head} {len(pos)}" + (f" {vals}" if vals else "")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.abspath(__file__).replace(".py", ".txt")
    lines = [f"# kiln edge-shape reference, part 2: generated by tests/data/shapes_nn_reference.py "
             f"(PyTorch {torch.__version__})"]
    lines += [line(name, f) for name, f in CASES.items()]
    with open(out, "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
