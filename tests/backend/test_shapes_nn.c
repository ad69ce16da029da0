/* Edge shapes, part 2 (the harness and its rules: test_shapes.c), against
 * PyTorch 1.13 (tests/data/shapes_nn_reference.py -> shapes_nn_reference.txt):
 * bf16, f16, u8, i8 and bool at edge shapes (elementwise with broadcasting,
 * reductions, scans, sort/topk, matmul, shape ops, softmax and layer norm of
 * 16-bit floats over rows of 0, 1 and 4097 elements); kiln_sdpa, batch norm,
 * dropout at p = 0 and 1, linear, clamp, conv2d and pooling at edge sizes;
 * the _s and _c forms of binary ops with 0-d and empty operands; and
 * kiln_dynamic marks on dimensions of size 0 and 1 (dyn_ cases: the values
 * of the specialised graph). */
#include "backend/shapes_common.h"

#define INQ(dt, seed, ...) fuse(make((dt), NR(__VA_ARGS__), S(__VA_ARGS__), (seed)))
#define INQ0(dt, seed) fuse(make((dt), 0, k_none, (seed)))
#define BF KILN_BF16
#define HF KILN_F16
#define U8 KILN_U8
#define I8 KILN_I8
#define POS(x) kiln_gt_c((x), 0)

/* batch norm modules made by a case, destroyed after it (SHAPES_CLEANUP) */
static kiln_batchnorm2d *g_bn;
static void bn_cleanup(void) {
  if (g_bn) kiln_batchnorm2d_destroy(g_bn);
  g_bn = NULL;
}
#define SHAPES_CLEANUP bn_cleanup
/* forward of a fresh BatchNorm2d(C, 1e-5, 0.1); which: 0 the output, 1 its
 * running mean, 2 its running variance after the forward */
static kiln_tensor bn(kiln_tensor x, bool training, int which) {
  if (!kiln_is_valid(x) || kiln_batchnorm2d_create((int)kiln_dim(x, 1), 1e-5, 0.1, &g_bn) != KILN_OK) return k_null;
  kiln_tensor y = kiln_batchnorm2d_forward(g_bn, x, training);
  if (which == 0) return y;
  kiln_keep(y);
  kiln_mark_step();
  return which == 1 ? g_bn->running_mean : g_bn->running_var;
}
static kiln_tensor sdpa(kiln_tensor q, kiln_tensor k, kiln_tensor v, kiln_tensor mask) {
  return kiln_sdpa(q, k, v, mask, 0.0, false, 0);
}
/* kiln_dynamic on axis of a new input */
static kiln_tensor dyn(int axis, int rank, const int64_t *shape, int seed) {
  return fuse(kiln_dynamic(make(KILN_F32, rank, shape, seed), axis));
}
#define DYN(axis, seed, ...) dyn((axis), NR(__VA_ARGS__), S(__VA_ARGS__), (seed))
static kiln_tensor layer_norm16(kiln_tensor x) { return layer_norm(x); }

/* ── 16-bit floats and 8-bit integers: elementwise, broadcasting ── */
CASE(add_bf16_3x1_1x4, kiln_add(INQ(BF, 0, 3, 1), INQ(BF, 1, 1, 4)))
CASE(add_f16_0x3_1x3, kiln_add(INQ(HF, 0, 0, 3), INQ(HF, 1, 1, 3)))
CASE(mul_f16_rank0_2x3, kiln_mul(INQ0(HF, 3), INQ(HF, 1, 2, 3)))
CASE(add_bf16_f16, kiln_add(INQ(BF, 0, 2, 1), INQ(HF, 1, 1, 3)))
CASE(add_u8_3x1_1x4, kiln_add(INQ(U8, 0, 3, 1), INQ(U8, 1, 1, 4)))
CASE(sub_i8_3x1_1x4, kiln_sub(INQ(I8, 0, 3, 1), INQ(I8, 1, 1, 4)))
CASE(mul_u8_i8, kiln_mul(INQ(U8, 0, 3, 1), INQ(I8, 1, 4)))
CASE(add_u8_0x3_1x3, kiln_add(INQ(U8, 0, 0, 3), INQ(U8, 1, 1, 3)))
CASE(add_i8_rank0_rank8, kiln_add(INQ0(I8, 3), fuse(make(I8, 8, R8A, 1))))
CASE(add_u8_bf16, kiln_add(INQ(U8, 0, 3, 1), INQ(BF, 1, 1, 2)))
CASE(lt_u8_0x2_2, kiln_lt(INQ(U8, 0, 0, 2), INQ(U8, 1, 2)))
CASE(where_bool_bf16, kiln_where(POS(IN(0, 3, 1)), INQ(BF, 1, 1, 4), INQ0(BF, 2)))
CASE(exp_bf16_T, kiln_exp(T(INQ(BF, 0, 3, 4))))
CASE(and_bool_0x3, kiln_logical_and(POS(IN(0, 0, 3)), POS(IN(1, 1, 3))))
CASE(neg_i8_rank0, kiln_neg(INQ0(I8, 3)))
/* ── reductions ── */
CASE(sum_u8_0x3_ax0, SUM(INQ(U8, 0, 0, 3), AX(0), false))
CASE(sum_u8_4097, kiln_sum(INQ(U8, 0, 4097), 0, NULL, false))
CASE(sum_i8_3x0_ax1, SUM(INQ(I8, 0, 3, 0), AX(1), false))
CASE(sum_i8_rank0, kiln_sum(INQ0(I8, 3), 0, NULL, false))
CASE(sum_bf16_0x3_ax0, SUM(INQ(BF, 0, 0, 3), AX(0), false))
CASE(sum_bf16_2x4097_ax1, SUM(INQ(BF, 0, 2, 4097), AX(1), false))
CASE(sum_f16_rank0, kiln_sum(INQ0(HF, 3), 0, NULL, false))
CASE(mean_bf16_3x0_ax1, MEAN(INQ(BF, 0, 3, 0), AX(1), false))
CASE(mean_f16_2x4097_ax1, MEAN(INQ(HF, 0, 2, 4097), AX(1), false))
CASE(mean_bf16_rank0, kiln_mean(INQ0(BF, 3), 0, NULL, false))
CASE(max_u8_0x3_ax1, MAX(INQ(U8, 0, 0, 3), AX(1), false))
CASE(max_i8_4097x2_ax0, MAX(INQ(I8, 0, 4097, 2), AX(0), false))
CASE(min_bf16_T_ax1, MIN(T(INQ(BF, 0, 3, 5)), AX(1), false))
CASE(max_f16_rank0, kiln_max(INQ0(HF, 3), 0, NULL, false))
CASE(max_u8_0_err, kiln_max(INQ(U8, 0, 0), 0, NULL, false))
CASE(argmax_u8_4097, kiln_argmax(INQ(U8, 3, 4097), 0, false))
CASE(argmin_i8_T_ax0, kiln_argmin(T(INQ(I8, 0, 3, 5)), 0, false))
CASE(argmax_bf16_0x3_ax1, kiln_argmax(INQ(BF, 0, 0, 3), 1, false))
CASE(prod_i8_0, kiln_prod(INQ(I8, 0, 0), 0, NULL, false))
CASE(sum_bool_3x1_ax1, SUM(POS(IN(0, 3, 1)), AX(1), false))
/* ── scans, sort, topk ── */
CASE(cumsum_u8_2x4097, kiln_cumsum(INQ(U8, 0, 2, 4097), 1))
CASE(cumsum_i8_3x0, kiln_cumsum(INQ(I8, 0, 3, 0), 1))
CASE(cumsum_bf16_rank0, kiln_cumsum(INQ0(BF, 3), 0))
CASE(cumsum_f16_T, kiln_cumsum(T(INQ(HF, 0, 3, 4)), 1))
CASE(cumsum_bool_4, kiln_cumsum(POS(IN(0, 4)), 0))
CASE(sort_u8_4097_v, sorted(INQ(U8, 2, 4097), 0, false, 0))
CASE(sort_i8_4097_i, sorted(INQ(I8, 2, 4097), 0, true, 1))
CASE(sort_bf16_3x0_v, sorted(INQ(BF, 0, 3, 0), 1, false, 0))
CASE(sort_f16_rank0_v, sorted(INQ0(HF, 3), 0, false, 0))
CASE(sort_bf16_T_i, sorted(T(INQ(BF, 0, 3, 5)), 0, false, 1))
CASE(topk_u8_k0_v, topk(INQ(U8, 0, 3, 4), 0, 1, true, 0))
CASE(topk_i8_T_i, topk(T(INQ(I8, 0, 3, 5)), 2, 1, false, 1))
CASE(topk_f16_4097_v, topk(INQ(HF, 2, 4097), 5, 0, true, 0))
CASE(topk_bf16_rank0_v, topk(INQ0(BF, 3), 1, 0, true, 0))
/* ── matmul (integers: i32, docs/semantics.md) ── */
CASE(matmul_bf16_2x0_0x3, kiln_matmul(INQ(BF, 0, 2, 0), INQ(BF, 1, 0, 3)))
CASE(matmul_f16_1x4097_dot, kiln_matmul(INQ(HF, 0, 4097), INQ(HF, 1, 4097)))
CASE(matmul_bf16_bcast, kiln_matmul(INQ(BF, 0, 2, 1, 2, 3), INQ(BF, 1, 3, 3, 2)))
CASE(matmul_u8_3x4_4x2, kiln_matmul(INQ(U8, 0, 3, 4), INQ(U8, 1, 4, 2)))
CASE(matmul_i8_v_v, kiln_matmul(INQ(I8, 0, 5), INQ(I8, 1, 5)))
CASE(matmul_i8_b0, kiln_matmul(INQ(I8, 0, 0, 2, 3), INQ(I8, 1, 3, 4)))
CASE(matmul_bf16_T, kiln_matmul(T(INQ(BF, 0, 3, 2)), INQ(BF, 1, 3, 4)))
/* ── shape ops ── */
CASE(concat_bf16_0x3_2x3, CAT(0, INQ(BF, 0, 0, 3), INQ(BF, 1, 2, 3)))
CASE(concat_u8_2x0_2x3, CAT(1, INQ(U8, 0, 2, 0), INQ(U8, 1, 2, 3)))
CASE(concat_i8_T, CAT(1, T(INQ(I8, 0, 2, 3)), INQ(I8, 1, 3, 1)))
CASE(pad_f16_0x3, kiln_pad(INQ(HF, 0, 0, 3), S(1, 2), S(1, 0), 1.5))
CASE(pad_u8_2x1, kiln_pad(INQ(U8, 0, 2, 1), S(0, 1), S(0, 2), 7))
CASE(pad_i8_reflect, kiln_pad_with(INQ(I8, 0, 1, 2, 4), S(0, 0, 3), S(0, 0, 2), KILN_PAD_REFLECT, 0))
CASE(slice_bf16_step, kiln_slice(INQ(BF, 0, 7, 3), 0, 1, END, 3))
CASE(slice_u8_empty, kiln_slice(INQ(U8, 0, 5, 3), 0, 4, 2, 1))
CASE(flip_i8_0x3, FLIP(INQ(I8, 0, 0, 3), AX(0, 1)))
CASE(flip_f16_T, FLIP(T(INQ(HF, 0, 3, 4)), AX(0)))
CASE(flip_bool_rank0, kiln_flip(POS(IN0(3)), 0, NULL))
/* ── row kernels of 16-bit floats ── */
CASE(softmax_bf16_3x1, kiln_softmax(INQ(BF, 0, 3, 1), 1))
CASE(softmax_f16_2x4097, kiln_softmax(INQ(HF, 0, 2, 4097), 1))
CASE(softmax_bf16_0x3, kiln_softmax(INQ(BF, 0, 0, 3), 1))
CASE(log_softmax_f16_3x1, kiln_log_softmax(INQ(HF, 0, 3, 1), 1))
CASE(log_softmax_bf16_2x4097, kiln_log_softmax(INQ(BF, 0, 2, 4097), 1))
CASE(softmax_f16_3x0, kiln_softmax(INQ(HF, 0, 3, 0), 1))
CASE(layer_norm_bf16_3x1, layer_norm16(INQ(BF, 0, 3, 1)))
CASE(layer_norm_f16_2x4097, layer_norm16(INQ(HF, 0, 2, 4097)))
CASE(layer_norm_bf16_0x4, layer_norm16(INQ(BF, 0, 0, 4)))
/* ── attention ── */
CASE(sdpa_1x1x3x4, sdpa(IN(0, 1, 1, 3, 4), IN(1, 1, 1, 3, 4), IN(2, 1, 1, 3, 4), k_null))
CASE(sdpa_b0, sdpa(IN(0, 0, 2, 3, 4), IN(1, 0, 2, 3, 4), IN(2, 0, 2, 3, 4), k_null))
CASE(sdpa_t0, sdpa(IN(0, 1, 2, 0, 4), IN(1, 1, 2, 0, 4), IN(2, 1, 2, 0, 4), k_null))
CASE(sdpa_t1, sdpa(IN(0, 2, 1, 1, 4), IN(1, 2, 1, 1, 4), IN(2, 2, 1, 1, 4), k_null))
CASE(sdpa_mask_bcast, sdpa(IN(0, 2, 2, 3, 4), IN(1, 2, 2, 3, 4), IN(2, 2, 2, 3, 4), IN(3, 1, 1, 3, 3)))
CASE(sdpa_bool_mask_none,
     sdpa(IN(0, 1, 1, 2, 4), IN(1, 1, 1, 3, 4), IN(2, 1, 1, 3, 4), fuse(kiln_zeros(KILN_BOOL, 4, S(1, 1, 2, 3)))))
CASE(sdpa_tq_tk, sdpa(IN(0, 1, 2, 2, 4), IN(1, 1, 2, 5, 4), IN(2, 1, 2, 5, 3), k_null))
CASE(sdpa_tk0, sdpa(IN(0, 1, 1, 2, 4), IN(1, 1, 1, 0, 4), IN(2, 1, 1, 0, 4), k_null))
CASE(sdpa_bf16, sdpa(INQ(BF, 0, 1, 2, 3, 4), INQ(BF, 1, 1, 2, 3, 4), INQ(BF, 2, 1, 2, 3, 4), k_null))
CASE(sdpa_hd_mismatch_err, sdpa(IN(0, 1, 1, 3, 4), IN(1, 1, 1, 3, 5), IN(2, 1, 1, 3, 4), k_null))
/* ── batch norm, dropout, linear, clamp ── */
CASE(batchnorm_train_2x3x2x2, bn(IN(0, 2, 3, 2, 2), true, 0))
CASE(batchnorm_train_1x2x1x1, bn(IN(0, 1, 2, 1, 1), true, 0))
CASE(batchnorm_eval_0x2x3x3, bn(IN(0, 0, 2, 3, 3), false, 0))
CASE(batchnorm_eval_2x3x1x1, bn(IN(0, 2, 3, 1, 1), false, 0))
CASE(batchnorm_train_var_4x2x1x1, bn(IN(0, 4, 2, 1, 1), true, 2))
CASE(batchnorm_train_mean_2x2x0x3, bn(IN(0, 2, 2, 0, 3), true, 1))
CASE(batchnorm_train_0x2x3x3, bn(IN(0, 0, 2, 3, 3), true, 0))
CASE(dropout_p0_3x4, kiln_dropout(IN(0, 3, 4), 0.0, 1, true))
CASE(dropout_p1_3x4, kiln_dropout(IN(0, 3, 4), 1.0, 1, true))
CASE(dropout_p1_0x3, kiln_dropout(IN(0, 0, 3), 1.0, 1, true))
CASE(dropout_p05_0x3, kiln_dropout(IN(0, 0, 3), 0.5, 1, true))
CASE(dropout_p05_rank0_eval, kiln_dropout(IN0(3), 0.5, 1, false))
CASE(linear_0x3, kiln_linear_apply(IN(0, 0, 3), IN(1, 4, 3), IN(2, 4)))
CASE(linear_in0, kiln_linear_apply(IN(0, 2, 0), IN(1, 4, 0), IN(2, 4)))
CASE(linear_out0, kiln_linear_apply(IN(0, 2, 3), IN(1, 0, 3), IN(2, 0)))
CASE(linear_v, kiln_linear_apply(IN(0, 3), IN(1, 4, 3), IN(2, 4)))
CASE(linear_rank8, kiln_linear_apply(IN(0, 2, 1, 1, 1, 1, 1, 2, 3), IN(1, 2, 3), k_null))
CASE(clamp_0x3, kiln_clamp(IN(0, 0, 3), -1, 1))
CASE(clamp_rank0, kiln_clamp(IN0(3), -1, 1))
CASE(clamp_lo_eq_hi, kiln_clamp(IN(0, 5), 0.5, 0.5))
CASE(clamp_lo_gt_hi, kiln_clamp(IN(0, 5), 1, -1))
CASE(clamp_u8_2x3, kiln_clamp(INQ(U8, 0, 2, 3), 1, 254))
CASE(clamp_bf16_T, kiln_clamp(T(INQ(BF, 0, 3, 4)), -0.5, 1.25))
/* ── conv2d, pooling ── */
CASE(conv2d_cin0, kiln_conv2d_apply(IN(0, 1, 0, 4, 4), IN(1, 2, 0, 3, 3), IN(2, 2), 1, 0, 1, 1))
CASE(conv2d_k_eq_padded, kiln_conv2d_apply(IN(0, 1, 2, 3, 3), IN(1, 2, 2, 5, 5), k_null, 1, 1, 1, 1))
CASE(conv2d_stride_gt_in, kiln_conv2d_apply(IN(0, 1, 1, 4, 4), IN(1, 1, 1, 2, 2), k_null, 5, 0, 1, 1))
CASE(conv2d_dil_edge, kiln_conv2d_apply(IN(0, 1, 1, 5, 5), IN(1, 1, 1, 3, 3), k_null, 1, 0, 2, 1))
CASE(conv2d_dil_pad_stride, kiln_conv2d_apply(IN(0, 2, 2, 4, 4), IN(1, 3, 2, 2, 2), IN(2, 3), 3, 2, 3, 1))
CASE(conv2d_dil_too_big_err, kiln_conv2d_apply(IN(0, 1, 1, 4, 4), IN(1, 1, 1, 3, 3), k_null, 1, 0, 2, 1))
CASE(conv2d_1x1_input_pad, kiln_conv2d_apply(IN(0, 1, 1, 1, 1), IN(1, 1, 1, 3, 3), k_null, 1, 1, 1, 1))
CASE(conv2d_hw0_err, kiln_conv2d_apply(IN(0, 1, 1, 0, 4), IN(1, 1, 1, 1, 1), k_null, 1, 0, 1, 1))
CASE(maxpool_k_eq_in, kiln_max_pool2d(IN(0, 2, 3, 4, 4), 4, 0, 0))
CASE(avgpool_k_eq_in, kiln_avg_pool2d(IN(0, 2, 3, 4, 4), 4, 0, 0))
CASE(maxpool_k_eq_padded, kiln_max_pool2d(IN(0, 1, 1, 3, 3), 5, 5, 2))
CASE(avgpool_k_eq_padded, kiln_avg_pool2d(IN(0, 1, 1, 3, 3), 5, 5, 2))
CASE(maxpool_1x1, kiln_max_pool2d(IN(0, 1, 2, 1, 1), 1, 0, 0))
CASE(maxpool_c0, kiln_max_pool2d(IN(0, 2, 0, 4, 4), 2, 0, 0))
CASE(avgpool_stride_gt_k, kiln_avg_pool2d(IN(0, 1, 1, 5, 5), 2, 3, 0))
CASE(max_pool2d_pad_gt_half_err, kiln_max_pool2d(IN(0, 1, 1, 4, 4), 2, 2, 2))
/* ── _s and _c forms with 0-d and empty operands ── */
CASE(add_s_rank0, kiln_add_s(IN0(3), 0.5))
CASE(add_c_0x3, kiln_add_c(IN(0, 0, 3), 0.5))
CASE(mul_s_0, kiln_mul_s(IN(0, 0), 3.0))
CASE(sub_c_rank0_i64, kiln_sub_c(INQ0(KILN_I64, 3), 2))
CASE(div_c_rank0_i64, kiln_div_c(INQ0(KILN_I64, 3), 2))
CASE(div_s_0_i64, kiln_div_s(INQ(KILN_I64, 0, 0), 2.5))
CASE(pow_c_rank0, kiln_pow_c(IN0(3), 2.0))
CASE(pow_s_0x3, kiln_pow_s(IN(0, 0, 3), 3.0))
CASE(max_c_rank0, kiln_maximum_c(IN0(3), 0.0))
CASE(lt_c_0x3, kiln_lt_c(IN(0, 0, 3), 0.0))
CASE(lt_s_rank0_u8, kiln_lt_s(INQ0(U8, 3), 100))
CASE(add_c_u8_rank0, kiln_add_c(INQ0(U8, 3), 3))
CASE(add_s_bf16_0, kiln_add_s(INQ(BF, 0, 0), 0.25))
CASE(mul_c_i8_rank0, kiln_mul_c(INQ0(I8, 3), 100))
CASE(add_c_bool_rank0, kiln_add_c(POS(IN0(3)), 1))
CASE(div_c_u8_0x2, kiln_div_c(INQ(U8, 0, 0, 2), 2))
/* ── dynamic marks on dims of size 0 and 1 ── */
CASE(dyn_add_0x3_1x3, kiln_add(DYN(0, 0, 0, 3), DYN(0, 1, 1, 3)))
CASE(dyn_add_1x3_4x1, kiln_add(DYN(0, 0, 1, 3), DYN(1, 1, 4, 1)))
CASE(dyn_sum_1x5_ax0, SUM(DYN(0, 0, 1, 5), AX(0), false))
CASE(dyn_mean_0x3_ax1, MEAN(DYN(0, 0, 0, 3), AX(1), false))
CASE(dyn_mean_1x3_ax0, MEAN(DYN(0, 0, 1, 3), AX(0), false))
CASE(dyn_matmul_1x3_3x1, kiln_matmul(DYN(0, 0, 1, 3), DYN(1, 1, 3, 1)))
CASE(dyn_matmul_0x3_3x2, kiln_matmul(DYN(0, 0, 0, 3), IN(1, 3, 2)))
CASE(dyn_softmax_2x1, kiln_softmax(DYN(1, 0, 2, 1), 1))
CASE(dyn_concat_0x3_2x3, CAT(0, DYN(0, 0, 0, 3), IN(1, 2, 3)))
CASE(dyn_concat_1x3_1x3, CAT(0, DYN(0, 0, 1, 3), DYN(0, 1, 1, 3)))
CASE(dyn_slice_1x3, kiln_slice(DYN(0, 0, 1, 3), 1, 1, END, 1))
CASE(dyn_reshape_1x6, kiln_reshape(DYN(0, 0, 1, 6), 2, S(3, 2)))
CASE(dyn_cumsum_1x4_ax0, kiln_cumsum(DYN(0, 0, 1, 4), 0))
CASE(dyn_layer_norm_1x4, layer_norm(DYN(0, 0, 1, 4)))
CASE(dyn_sort_1_v, sorted(DYN(0, 3, 1), 0, false, 0))
CASE(dyn_pad_0x2, kiln_pad(DYN(0, 0, 0, 2), S(1, 0), S(2, 0), 0.5))

static const shape_case k_cases[] = {
    E(add_bf16_3x1_1x4), E(add_f16_0x3_1x3), E(mul_f16_rank0_2x3), E(add_bf16_f16), E(add_u8_3x1_1x4),
    E(sub_i8_3x1_1x4), E(mul_u8_i8), E(add_u8_0x3_1x3), E(add_i8_rank0_rank8), E(add_u8_bf16), E(lt_u8_0x2_2),
    E(where_bool_bf16), E(exp_bf16_T), E(and_bool_0x3), E(neg_i8_rank0), E(sum_u8_0x3_ax0), E(sum_u8_4097),
    E(sum_i8_3x0_ax1), E(sum_i8_rank0), E(sum_bf16_0x3_ax0), E(sum_bf16_2x4097_ax1), E(sum_f16_rank0),
    E(mean_bf16_3x0_ax1), E(mean_f16_2x4097_ax1), E(mean_bf16_rank0), E(max_u8_0x3_ax1), E(max_i8_4097x2_ax0),
    E(min_bf16_T_ax1), E(max_f16_rank0), E(max_u8_0_err), E(argmax_u8_4097), E(argmin_i8_T_ax0),
    E(argmax_bf16_0x3_ax1), E(prod_i8_0), E(sum_bool_3x1_ax1), E(cumsum_u8_2x4097), E(cumsum_i8_3x0),
    E(cumsum_bf16_rank0), E(cumsum_f16_T), E(cumsum_bool_4), E(sort_u8_4097_v), E(sort_i8_4097_i),
    E(sort_bf16_3x0_v), E(sort_f16_rank0_v), E(sort_bf16_T_i), E(topk_u8_k0_v), E(topk_i8_T_i), E(topk_f16_4097_v),
    E(topk_bf16_rank0_v), E(matmul_bf16_2x0_0x3), E(matmul_f16_1x4097_dot), E(matmul_bf16_bcast),
    E(matmul_u8_3x4_4x2), E(matmul_i8_v_v), E(matmul_i8_b0), E(matmul_bf16_T), E(concat_bf16_0x3_2x3),
    E(concat_u8_2x0_2x3), E(concat_i8_T), E(pad_f16_0x3), E(pad_u8_2x1), E(pad_i8_reflect), E(slice_bf16_step),
    E(slice_u8_empty), E(flip_i8_0x3), E(flip_f16_T), E(flip_bool_rank0), E(softmax_bf16_3x1),
    E(softmax_f16_2x4097), E(softmax_bf16_0x3), E(log_softmax_f16_3x1), E(log_softmax_bf16_2x4097),
    E(softmax_f16_3x0), E(layer_norm_bf16_3x1), E(layer_norm_f16_2x4097), E(layer_norm_bf16_0x4), E(sdpa_1x1x3x4),
    E(sdpa_b0), E(sdpa_t0), E(sdpa_t1), E(sdpa_mask_bcast), E(sdpa_bool_mask_none), E(sdpa_tq_tk), E(sdpa_tk0),
    E(sdpa_bf16), E(sdpa_hd_mismatch_err), E(batchnorm_train_2x3x2x2), E(batchnorm_train_1x2x1x1),
    E(batchnorm_eval_0x2x3x3), E(batchnorm_eval_2x3x1x1), E(batchnorm_train_var_4x2x1x1),
    E(batchnorm_train_mean_2x2x0x3), E(batchnorm_train_0x2x3x3), E(dropout_p0_3x4), E(dropout_p1_3x4),
    E(dropout_p1_0x3), E(dropout_p05_0x3), E(dropout_p05_rank0_eval), E(linear_0x3), E(linear_in0), E(linear_out0),
    E(linear_v), E(linear_rank8), E(clamp_0x3), E(clamp_rank0), E(clamp_lo_eq_hi), E(clamp_lo_gt_hi),
    E(clamp_u8_2x3), E(clamp_bf16_T), E(conv2d_cin0), E(conv2d_k_eq_padded), E(conv2d_stride_gt_in),
    E(conv2d_dil_edge), E(conv2d_dil_pad_stride), E(conv2d_dil_too_big_err), E(conv2d_1x1_input_pad),
    E(conv2d_hw0_err), E(maxpool_k_eq_in), E(avgpool_k_eq_in), E(maxpool_k_eq_padded), E(avgpool_k_eq_padded),
    E(maxpool_1x1), E(maxpool_c0), E(avgpool_stride_gt_k), E(max_pool2d_pad_gt_half_err), E(add_s_rank0),
    E(add_c_0x3), E(mul_s_0), E(sub_c_rank0_i64), E(div_c_rank0_i64), E(div_s_0_i64), E(pow_c_rank0), E(pow_s_0x3),
    E(max_c_rank0), E(lt_c_0x3), E(lt_s_rank0_u8), E(add_c_u8_rank0), E(add_s_bf16_0), E(mul_c_i8_rank0),
    E(add_c_bool_rank0), E(div_c_u8_0x2), E(dyn_add_0x3_1x3), E(dyn_add_1x3_4x1), E(dyn_sum_1x5_ax0),
    E(dyn_mean_0x3_ax1), E(dyn_mean_1x3_ax0), E(dyn_matmul_1x3_3x1), E(dyn_matmul_0x3_3x2), E(dyn_softmax_2x1),
    E(dyn_concat_0x3_2x3), E(dyn_concat_1x3_1x3), E(dyn_slice_1x3), E(dyn_reshape_1x6), E(dyn_cumsum_1x4_ax0),
    E(dyn_layer_norm_1x4), E(dyn_sort_1_v), E(dyn_pad_0x2),};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))
#define SHAPES_REF "shapes_nn_reference.txt"
#include "backend/shapes_runner.h"

KT_TEST(dtypes_elementwise) {
  static const char *groups[] = {"add_", "sub_", "mul_", "lt_", "where_", "exp_", "and_", "neg_", "div_", "pow_"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(dtypes_reductions_scans_sorts) {
  static const char *groups[] = {"sum_", "mean_", "max_", "min_", "argm", "prod_", "cum", "sort_", "topk_"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(dtypes_matmul_shape_ops_rows) {
  static const char *groups[] = {"matmul", "concat", "pad_", "slice", "flip", "softmax", "log_softmax", "layer_norm"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(nn_layers) {
  static const char *groups[] = {"sdpa", "batchnorm", "dropout", "linear", "clamp", "conv2d", "maxpool", "avgpool",
                                 "max_pool2d"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(dynamic_marks) { run_all("dyn_"); }
KT_TEST(every_case_ran) {
  for (int i = 0; i < N_CASES; i++) KT_CHECK_MSG(k_ran[i], "%s: in no group of this test", k_cases[i].name);
}

KT_MAIN(KT_CASE(every_reference_line_has_a_case), KT_CASE(dtypes_elementwise), KT_CASE(dtypes_reductions_scans_sorts),
        KT_CASE(dtypes_matmul_shape_ops_rows), KT_CASE(nn_layers), KT_CASE(dynamic_marks), KT_CASE(every_case_ran))
