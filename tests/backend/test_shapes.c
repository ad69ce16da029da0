/* Edge shapes on the ref backend and the backend under test, each op alone
 * and with its inputs and output fused into elementwise kernels, against
 * PyTorch 1.13 (tests/data/shapes_reference.py -> shapes_reference.txt, one
 * line per case, matched by name): dimensions of size 0 in each position,
 * rank 0 and KILN_MAX_RANK, size-1 dimensions broadcast on either side,
 * views (transposed, stepped slices, expanded) as inputs, a reduction over
 * 2^20 + 1 elements, row kernels over 1 and 4097 elements, and gradients.
 * A case PyTorch rejects must be a kiln error (an invalid tensor or a
 * failed read) with a message naming the op; where kiln deliberately
 * differs (docs/semantics.md) the reference holds kiln's documented result.
 * SHAPES_VERBOSE=1 prints every case's result and error message. */
#include "backend/shapes_common.h"

/* ── elementwise and broadcasting ── */
CASE(add_3x1x5_1x4x1, kiln_add(IN(0, 3, 1, 5), IN(1, 1, 4, 1)))
CASE(add_1x4_3x1, kiln_add(IN(0, 1, 4), IN(1, 3, 1)))
CASE(add_4_3x1, kiln_add(IN(0, 4), IN(1, 3, 1)))
CASE(sub_3x1_4, kiln_sub(IN(0, 3, 1), IN(1, 4)))
CASE(add_0x3_1x3, kiln_add(IN(0, 0, 3), IN(1, 1, 3)))
CASE(add_0x3_0x1, kiln_add(IN(0, 0, 3), IN(1, 0, 1)))
CASE(add_3x0_3x1, kiln_add(IN(0, 3, 0), IN(1, 3, 1)))
CASE(add_1x0_3x1, kiln_add(IN(0, 1, 0), IN(1, 3, 1)))
CASE(add_2x0x4_4, kiln_add(IN(0, 2, 0, 4), IN(1, 4)))
CASE(add_0_rank0, kiln_add(IN(0, 0), IN0(1)))
CASE(add_0x3_3x1_err, kiln_add(IN(0, 0, 3), IN(1, 3, 1)))
CASE(add_rank0_rank0, kiln_add(IN0(3), IN0(1)))
CASE(mul_rank0_2x3, kiln_mul(IN0(3), IN(1, 2, 3)))
CASE(add_rank8, kiln_add(fuse(make(KILN_F32, 8, R8A, 0)), fuse(make(KILN_F32, 8, R8B, 1))))
CASE(add_rank8_rank0, kiln_add(fuse(make(KILN_F32, 8, R8A, 0)), IN0(2)))
CASE(add_rank8_2, kiln_add(fuse(make(KILN_F32, 8, R8A, 0)), IN(2, 2)))
CASE(exp_0x3, kiln_exp(IN(0, 0, 3)))
CASE(neg_rank0, kiln_neg(IN0(3)))
CASE(lt_0x2_2, kiln_lt(IN(0, 0, 2), IN(1, 2)))
CASE(where_3x1_1x4_rank0, kiln_where(kiln_gt_c(IN(0, 3, 1), 0), IN(1, 1, 4), IN0(2)))
CASE(where_0_1_1, kiln_where(kiln_gt_c(IN(0, 0), 0), IN(1, 1), IN(2, 1)))
CASE(where_2x1x1_1x3x1_1x1x4, kiln_where(kiln_gt_c(IN(0, 2, 1, 1), 0), IN(1, 1, 3, 1), IN(2, 1, 1, 4)))
CASE(mul_T_4x3, kiln_mul(T(IN(0, 3, 4)), IN(1, 4, 3)))
CASE(add_T_T, kiln_add(T(IN(0, 3, 4)), T(IN(1, 3, 4))))
CASE(exp_step_slice, kiln_exp(kiln_slice(IN(0, 7, 3), 0, 0, END, 2)))
CASE(add_step_slice_cols, kiln_add(kiln_slice(IN(0, 3, 9), 1, 1, END, 3), IN(1, 3, 3)))
CASE(add_expanded, kiln_add(kiln_expand(IN(0, 3, 1), 2, S(3, 4)), kiln_expand(IN(1, 1, 4), 2, S(3, 4))))
CASE(cast_i64_0x2, kiln_cast(IN(0, 0, 2), KILN_I64))
/* ── reductions ── */
CASE(sum_0x3_all, kiln_sum(IN(0, 0, 3), 0, NULL, false))
CASE(sum_0x3_ax0, SUM(IN(0, 0, 3), AX(0), false))
CASE(sum_0x3_ax1, SUM(IN(0, 0, 3), AX(1), false))
CASE(sum_3x0_ax1, SUM(IN(0, 3, 0), AX(1), false))
CASE(sum_3x0_ax1_keep, SUM(IN(0, 3, 0), AX(1), true))
CASE(sum_2x0x3_ax02, SUM(IN(0, 2, 0, 3), AX(0, 2), false))
CASE(sum_2x0x3_ax02_keep, SUM(IN(0, 2, 0, 3), AX(0, 2), true))
CASE(sum_2x0x3_ax1_keep, SUM(IN(0, 2, 0, 3), AX(1), true))
CASE(prod_0x3_ax0, PROD(IN(0, 0, 3), AX(0), false))
CASE(prod_0_all, kiln_prod(IN(0, 0), 0, NULL, false))
CASE(mean_0x3_ax0, MEAN(IN(0, 0, 3), AX(0), false))
CASE(mean_3x0_ax1, MEAN(IN(0, 3, 0), AX(1), false))
CASE(mean_0_all, kiln_mean(IN(0, 0), 0, NULL, false))
CASE(mean_0x3_ax1, MEAN(IN(0, 0, 3), AX(1), false))
CASE(max_0x3_ax0, MAX(IN(0, 0, 3), AX(0), false))
CASE(max_0x3_ax1, MAX(IN(0, 0, 3), AX(1), false))
CASE(min_0_all, kiln_min(IN(0, 0), 0, NULL, false))
CASE(argmax_0x3_ax0, kiln_argmax(IN(0, 0, 3), 0, false))
CASE(argmax_0x3_ax1, kiln_argmax(IN(0, 0, 3), 1, false))
CASE(argmin_3x0_ax1, kiln_argmin(IN(0, 3, 0), 1, false))
CASE(sum_rank0, kiln_sum(IN0(3), 0, NULL, false))
CASE(sum_rank0_ax0, SUM(IN0(3), AX(0), false))
CASE(max_rank0, kiln_max(IN0(3), 0, NULL, false))
CASE(argmax_rank0, kiln_argmax(IN0(3), 0, false))
CASE(mean_rank0_keep, MEAN(IN0(3), AX(0), true))
CASE(prod_rank0_axm1, PROD(IN0(3), AX(-1), false))
CASE(max_rank0_axm1_keep, MAX(IN0(3), AX(-1), true))
CASE(argmin_rank0, kiln_argmin(IN0(3), -1, false))
CASE(sum_rank0_ax1_err, SUM(IN0(3), AX(1), false))
CASE(sum_rank0_ax0_m1_err, SUM(IN0(3), AX(0, -1), false))
CASE(sum_2x3x4_ax02_keep, SUM(IN(0, 2, 3, 4), AX(0, 2), true))
CASE(max_2x3x4_ax_m1_0, MAX(IN(0, 2, 3, 4), AX(-1, 0), false))
CASE(mean_2x3x4_ax12, MEAN(IN(0, 2, 3, 4), AX(1, 2), false))
CASE(sum_rank8_ax1357, SUM(IN(0, 2, 3, 1, 2, 2, 1, 3, 2), AX(1, 3, 5, 7), false))
CASE(sum_rank8_all, kiln_sum(IN(0, 2, 3, 1, 2, 2, 1, 3, 2), 0, NULL, false))
CASE(sum_T_ax0, SUM(T(IN(0, 3, 5)), AX(0), false))
CASE(max_T_ax1, MAX(T(IN(0, 3, 5)), AX(1), false))
CASE(argmax_T_ax0, kiln_argmax(T(IN(0, 3, 5)), 0, false))
CASE(sum_step_slice_ax1, SUM(kiln_slice(IN(0, 6, 5), 0, 0, END, 2), AX(1), false))
CASE(sum_expanded_ax0, SUM(kiln_expand(IN(0, 1, 5), 2, S(4, 5)), AX(0), false))
CASE(sum_big, kiln_sum(IN(0, BIG), 0, NULL, false))
CASE(sum_big_keep_2d, SUM(IN(0, 1, BIG), AX(1), true))
CASE(mean_big, kiln_mean(IN(0, BIG), 0, NULL, false))
CASE(max_big, kiln_max(IN(3, BIG), 0, NULL, false))
CASE(argmax_big, kiln_argmax(IN(3, BIG), 0, false))
CASE(argmin_big, kiln_argmin(IN(3, BIG), 0, false))
CASE(sum_i64_0x3, SUM(kiln_cast(IN(0, 0, 3), KILN_I64), AX(0), false))
CASE(prod_i64_0, kiln_prod(kiln_cast(IN(0, 0), KILN_I64), 0, NULL, false))
/* ── scans ── */
CASE(cumsum_0x3_ax0, kiln_cumsum(IN(0, 0, 3), 0))
CASE(cumsum_3x0_ax0, kiln_cumsum(IN(0, 3, 0), 0))
CASE(cumprod_3x0_ax1, kiln_cumprod(IN(0, 3, 0), 1))
CASE(cumsum_rank0, kiln_cumsum(IN0(3), 0))
CASE(cumsum_T_ax1, kiln_cumsum(T(IN(0, 3, 4)), 1))
CASE(cumprod_step_ax0, kiln_cumprod(kiln_slice(IN(0, 7, 2), 0, 0, END, 3), 0))
CASE(cumsum_1x4097_ax1, kiln_cumsum(IN(0, 2, 4097), 1))
/* ── sort / topk ── */
CASE(sort_0_v, sorted(IN(0, 0), 0, false, 0))
CASE(sort_0_i, sorted(IN(0, 0), 0, false, 1))
CASE(sort_3x0_ax1_v, sorted(IN(0, 3, 0), 1, true, 0))
CASE(sort_0x3_ax1_i, sorted(IN(0, 0, 3), 1, false, 1))
CASE(sort_rank0_v, sorted(IN0(3), 0, false, 0))
CASE(sort_rank0_i, sorted(IN0(3), 0, false, 1))
CASE(sort_2x1_ax1_i, sorted(IN(0, 2, 1), 1, false, 1))
CASE(sort_T_ax1_v, sorted(T(IN(0, 3, 5)), 1, false, 0))
CASE(sort_T_ax0_i, sorted(T(IN(0, 3, 5)), 0, true, 1))
CASE(sort_4097_v, sorted(IN(2, 4097), 0, false, 0))
CASE(argsort_4097, kiln_argsort(IN(2, 4097), 0, true))
CASE(topk_k0_v, topk(IN(0, 3, 4), 0, 1, true, 0))
CASE(topk_k0_i, topk(IN(0, 3, 4), 0, 1, true, 1))
CASE(topk_empty_axis, topk(IN(0, 3, 0), 0, 1, true, 0))
CASE(topk_0x4_ax1_v, topk(IN(0, 0, 4), 2, 1, true, 0))
CASE(topk_rank0_v, topk(IN0(3), 1, 0, true, 0))
CASE(topk_rank0_i, topk(IN0(3), 1, 0, true, 1))
CASE(topk_k_gt_dim, topk(IN(0, 3, 0), 1, 1, true, 0))
CASE(topk_T_v, topk(T(IN(0, 3, 5)), 2, 1, false, 0))
/* ── gather / scatter / index ── */
static const int64_t k_g[6] = {0, 3, 1, 2, 2, 0}, k_is[3] = {3, 0, 3}, k_i2[2] = {2, 0}, k_ce[3] = {0, 3, 1};
static const int64_t k_z3[3] = {0, 0, 0};
CASE(gather_idx_3x0, kiln_gather(IN(0, 3, 4), 1, IDX(k_e, 3, 0)))
CASE(gather_idx_0x4, kiln_gather(IN(0, 3, 4), 1, IDX(k_e, 0, 4)))
CASE(gather_T, kiln_gather(T(IN(0, 4, 3)), 1, IDX(k_g, 3, 2)))
CASE(index_select_empty_idx, kiln_index_select(IN(0, 3, 4), 0, IDX(k_e, 0)))
CASE(index_select_0x4_empty_idx, kiln_index_select(IN(0, 0, 4), 0, IDX(k_e, 0)))
CASE(index_select_x_3x0, kiln_index_select(IN(0, 3, 0), 0, IDX(k_i2, 2)))
CASE(index_select_T, kiln_index_select(T(IN(0, 4, 3)), 1, IDX(k_is, 3)))
CASE(scatter_empty_idx, kiln_scatter(IN(0, 3, 4), 1, IDX(k_e, 3, 0), IN(1, 3, 2)))
CASE(scatter_add_empty_idx, kiln_scatter_add(IN(0, 3, 4), 0, IDX(k_e, 0, 4), IN(1, 2, 4)))
CASE(index_add_m0, kiln_index_add(IN(0, 3, 4), 0, IDX(k_e, 0), IN(1, 0, 4)))
CASE(index_put_m0, kiln_index_put(IN(0, 3, 4), IDX(k_e, 0), IN(1, 0, 4), false))
CASE(index_put_m0_acc, kiln_index_put(IN(0, 3, 4), IDX(k_e, 0), IN(1, 4), true))
CASE(one_hot_0, kiln_one_hot(IDX(k_e, 0), 4, KILN_F32))
CASE(embedding_ids_0, embedding(IDX(k_e, 0), IN(0, 5, 3)))
CASE(embedding_ids_2x0, embedding(IDX(k_e, 2, 0), IN(0, 5, 3)))
/* ── shape ops ── */
CASE(concat_0x3_2x3, CAT(0, IN(0, 0, 3), IN(1, 2, 3)))
CASE(concat_2x3_0x3, CAT(0, IN(0, 2, 3), IN(1, 0, 3)))
CASE(concat_2x0_2x3_ax1, CAT(1, IN(0, 2, 0), IN(1, 2, 3)))
CASE(concat_0x3_0x3, CAT(0, IN(0, 0, 3), IN(1, 0, 3)))
CASE(concat_0x3_0x2_ax1, CAT(1, IN(0, 0, 3), IN(1, 0, 2)))
CASE(concat_T_ax0, CAT(1, T(IN(0, 2, 3)), IN(1, 3, 1)))
CASE(concat_rank0_err, CAT(0, IN0(0), IN0(1)))
CASE(stack_0x3, STACK(1, IN(0, 0, 3), IN(1, 0, 3)))
CASE(stack_rank0, STACK(0, IN0(0), IN0(1), IN0(2)))
CASE(pad_0x3_const, kiln_pad(IN(0, 0, 3), S(0, 1), S(0, 2), 1.5))
CASE(pad_0x3_const_ax0, kiln_pad(IN(0, 0, 3), S(1, 0), S(1, 0), 1.5))
CASE(pad_reflect_2x1x4, kiln_pad_with(IN(0, 2, 1, 4), S(0, 0, 3), S(0, 0, 2), KILN_PAD_REFLECT, 0))
CASE(pad_replicate_2x1x1, kiln_pad_with(IN(0, 2, 1, 1), S(0, 0, 2), S(0, 0, 3), KILN_PAD_REPLICATE, 0))
CASE(pad_replicate_1x0, kiln_pad_with(IN(0, 1, 1, 0), S(0, 0, 1), S(0, 0, 1), KILN_PAD_REPLICATE, 0))
CASE(pad_const_T, kiln_pad(T(IN(0, 3, 2)), S(0, 1), S(1, 0), -1.0))
CASE(slice_empty, kiln_slice(IN(0, 5, 3), 0, 4, 2, 1))
CASE(slice_step_0x3, kiln_slice(IN(0, 0, 3), 0, 0, END, 2))
CASE(slice_step_of_T, kiln_slice(T(IN(0, 3, 7)), 0, 1, END, 3))
CASE(flip_0x3, FLIP(IN(0, 0, 3), AX(0, 1)))
CASE(flip_rank0, kiln_flip(IN0(3), 0, NULL))
CASE(flip_T, FLIP(T(IN(0, 3, 4)), AX(0)))
CASE(roll_0, kiln_roll(IN(0, 0), 3, 0))
CASE(roll_3x0, kiln_roll(IN(0, 3, 0), 2, 0))
CASE(roll_T, kiln_roll(T(IN(0, 3, 4)), 5, 1))
CASE(roll_len1, kiln_roll(IN(0, 3, 1), -7, 1))
CASE(tril_0x3, kiln_tril(IN(0, 0, 3), 0))
CASE(triu_3x0, kiln_triu(IN(0, 3, 0), 1))
CASE(tril_2x0x4, kiln_tril(IN(0, 2, 0, 4), 0))
CASE(triu_T, kiln_triu(T(IN(0, 3, 4)), -1))
CASE(tril_rank1_err, kiln_tril(IN(0, 4), 0))
CASE(permute_rank0, kiln_permute(IN0(3), (const int[]){0}))
CASE(permute_0x2x3, kiln_permute(IN(0, 0, 2, 3), ((const int[]){2, 0, 1})))
CASE(permute_rank8, kiln_permute(IN(0, 2, 1, 3, 1, 2, 1, 1, 2), ((const int[]){7, 6, 5, 4, 3, 2, 1, 0})))
CASE(reshape_0x3_3x0, kiln_reshape(IN(0, 0, 3), 2, S(3, 0)))
CASE(reshape_0x3_m1x2x0, kiln_reshape(IN(0, 0, 3), 3, S(2, 0, -1)))
CASE(reshape_0x3_m1x0_err, kiln_reshape(IN(0, 0, 3), 2, S(-1, 0)))
CASE(reshape_rank0_1x1, kiln_reshape(IN0(3), 2, S(1, 1)))
CASE(reshape_1x1_rank0, kiln_reshape(IN(3, 1, 1), 0, k_none))
CASE(reshape_T, kiln_reshape(T(IN(0, 3, 4)), 1, S(12)))
CASE(expand_3x1_3x0, kiln_expand(IN(0, 3, 1), 2, S(3, 0)))
CASE(expand_rank0_2x3, kiln_expand(IN0(3), 2, S(2, 3)))
CASE(expand_0x1_2x0x4, kiln_expand(IN(0, 0, 1), 3, S(2, 0, 4)))
CASE(expand_3x1_4x1_err, kiln_expand(IN(0, 3, 1), 2, S(4, 1)))
/* ── matmul ── */
CASE(matmul_2x0_0x3, kiln_matmul(IN(0, 2, 0), IN(0, 0, 3)))
CASE(matmul_0x3_3x4, kiln_matmul(IN(0, 0, 3), IN(0, 3, 4)))
CASE(matmul_2x3_3x0, kiln_matmul(IN(0, 2, 3), IN(0, 3, 0)))
CASE(matmul_b0, kiln_matmul(IN(0, 0, 2, 3), IN(0, 3, 4)))
CASE(matmul_v0_v0, kiln_matmul(IN(0, 0), IN(1, 0)))
CASE(matmul_v_m, kiln_matmul(IN(0, 3), IN(1, 3, 4)))
CASE(matmul_m_v, kiln_matmul(IN(0, 4, 3), IN(1, 3)))
CASE(matmul_v_v, kiln_matmul(IN(0, 3), IN(1, 3)))
CASE(matmul_bcast, kiln_matmul(IN(0, 2, 1, 2, 3), IN(1, 1, 3, 3, 2)))
CASE(matmul_T_T, kiln_matmul(T(IN(0, 3, 2)), T(IN(1, 4, 3))))
CASE(matmul_expanded_b, kiln_matmul(kiln_expand(IN(0, 1, 2, 3), 3, S(4, 2, 3)), IN(1, 4, 3, 2)))
CASE(matmul_rank0_err, kiln_matmul(IN0(0), IN(0, 3)))
CASE(matmul_1x1_1x1, kiln_matmul(IN(3, 1, 1), IN(1, 1, 1)))
CASE(matmul_inner_mismatch_err, kiln_matmul(IN(0, 2, 3), IN(0, 4, 2)))
/* ── row kernels ── */
CASE(softmax_0x3_ax1, kiln_softmax(IN(0, 0, 3), 1))
CASE(softmax_3x0_ax1, kiln_softmax(IN(0, 3, 0), 1))
CASE(log_softmax_2x0x3_ax1, kiln_log_softmax(IN(0, 2, 0, 3), 1))
CASE(softmax_rank0, kiln_softmax(IN0(3), 0))
CASE(log_softmax_rank0, kiln_log_softmax(IN0(3), 0))
CASE(softmax_rank0_axm1, kiln_softmax(IN0(3), -1))
CASE(softmax_rank0_ax1_err, kiln_softmax(IN0(3), 1))
CASE(softmax_3x1_ax1, kiln_softmax(IN(0, 3, 1), 1))
CASE(log_softmax_3x1_ax1, kiln_log_softmax(IN(0, 3, 1), 1))
CASE(softmax_2x4097, kiln_softmax(IN(0, 2, 4097), 1))
CASE(log_softmax_2x4097, kiln_log_softmax(IN(0, 2, 4097), 1))
CASE(softmax_T_ax1, kiln_softmax(T(IN(0, 3, 5)), 1))
CASE(softmax_T_ax0, kiln_softmax(T(IN(0, 3, 5)), 0))
CASE(softmax_expanded, kiln_softmax(kiln_expand(IN(0, 1, 5), 2, S(3, 5)), 1))
CASE(layer_norm_3x1, layer_norm(IN(0, 3, 1)))
CASE(layer_norm_0x4, layer_norm(IN(0, 0, 4)))
CASE(layer_norm_2x4097, layer_norm(IN(0, 2, 4097)))
CASE(layer_norm_T, layer_norm(T(IN(0, 4, 3))))
/* ── conv / pool / losses ── */
CASE(conv2d_batch0, kiln_conv2d_apply(IN(0, 0, 1, 4, 4), IN(1, 2, 1, 3, 3), k_null, 1, 0, 1, 1))
CASE(conv2d_1x1, kiln_conv2d_apply(IN(0, 1, 1, 1, 1), IN(1, 2, 1, 1, 1), IN(2, 2), 1, 0, 1, 1))
CASE(maxpool_batch0, kiln_max_pool2d(IN(0, 0, 2, 4, 4), 2, 0, 0))
CASE(avgpool_batch0, kiln_avg_pool2d(IN(0, 0, 2, 4, 4), 2, 0, 0))
CASE(maxpool_T, kiln_max_pool2d(kiln_transpose(IN(0, 1, 1, 4, 6), 2, 3), 2, 0, 0))
CASE(cross_entropy_1class, kiln_cross_entropy(IN(0, 3, 1), IDX(k_z3, 3), -100, 0.0))
CASE(cross_entropy_T, kiln_cross_entropy(T(IN(0, 4, 3)), IDX(k_ce, 3), -100, 0.0))
CASE(mse_0x3, kiln_mse_loss(IN(0, 0, 3), IN(1, 0, 3)))
/* ── more: dtypes, big rows, columns, rank 8 views ── */
static const int64_t k_2[1] = {2}, k_1[1] = {1}, k_ce2[2] = {4096, 7}, k_R2[8] = {2, 2, 2, 2, 2, 2, 2, 2};
static const int64_t k_perm8[8] = {2, 1, 3, 1, 2, 1, 1, 2};
#define IN8(seed, sh) fuse(make(KILN_F32, 8, (sh), (seed)))
CASE(sum_bool_0, kiln_sum(kiln_gt_c(IN(0, 0), 0), 0, NULL, false))
CASE(sum_i32_big, kiln_sum(kiln_cast(IN(0, BIG), KILN_I32), 0, NULL, false))
CASE(sum_f64_big_mid, SUM(IND(0, 2, (1 << 19) + 1, 2), AX(1), true))
CASE(argmax_ties_big, kiln_argmax(kiln_zeros(KILN_F32, 1, S(BIG)), 0, false))
CASE(max_1x4097_ax0, MAX(IN(0, 1, 4097), AX(0), false))
CASE(max_4097x2_ax0, MAX(IN(0, 4097, 2), AX(0), false))
CASE(argmax_4097x2_ax0, kiln_argmax(IN(0, 4097, 2), 0, false))
CASE(sum_rank8_2s_ax0246, SUM(IN8(0, k_R2), AX(0, 2, 4, 6), false))
CASE(sum_rank8_perm, SUM(kiln_permute(IN8(0, k_perm8), ((const int[]){7, 6, 5, 4, 3, 2, 1, 0})), AX(0, 7), false))
CASE(cumsum_big, kiln_cumsum(IN(0, BIG), 0))
CASE(cumsum_T_4097, kiln_cumsum(T(IN(0, 4097, 2)), 1))
CASE(softmax_4097x2_ax0, kiln_softmax(IN(0, 4097, 2), 0))
CASE(log_softmax_T_4097, kiln_log_softmax(T(IN(0, 4097, 2)), 1))
CASE(matmul_1x1_1x4097, kiln_matmul(IN(3, 1, 1), IN(1, 1, 4097)))
CASE(matmul_4097_dot, kiln_matmul(IN(0, 4097), IN(1, 4097)))
CASE(matmul_b0_bcast, kiln_matmul(IN(0, 0, 1, 2, 3), IN(1, 5, 3, 2)))
CASE(matmul_step_v, kiln_matmul(IN(0, 2, 3), kiln_slice(IN(0, 7), 0, 0, END, 3)))
CASE(matmul_rank8, kiln_matmul(IN(0, 2, 1, 1, 1, 1, 1, 2, 3), IN(1, 1, 1, 1, 1, 1, 2, 3, 2)))
CASE(conv2d_out0, kiln_conv2d_apply(IN(0, 1, 1, 4, 4), IN(1, 0, 1, 3, 3), k_null, 1, 0, 1, 1))
CASE(conv2d_small_err, kiln_conv2d_apply(IN(0, 1, 1, 2, 2), IN(1, 1, 1, 3, 3), k_null, 1, 0, 1, 1))
CASE(max_pool2d_big_k_err, kiln_max_pool2d(IN(0, 1, 1, 2, 2), 3, 0, 0))
CASE(cross_entropy_0, kiln_cross_entropy(IN(0, 0, 3), IDX(k_e, 0), -100, 0.0))
CASE(cross_entropy_4097, kiln_cross_entropy(IN(0, 2, 4097), IDX(k_ce2, 2), -100, 0.0))
CASE(gather_x_0x4, kiln_gather(IN(0, 0, 4), 1, IDX(k_e, 0, 2)))
CASE(index_select_rank0_idx, kiln_index_select(IN(0, 3, 4), 0, fuse(kiln_from_host(k_1, KILN_I64, 0, k_none))))
CASE(one_hot_rank0, kiln_one_hot(fuse(kiln_from_host(k_2, KILN_I64, 0, k_none)), 4, KILN_F32))
CASE(embedding_rank0, embedding(fuse(kiln_from_host(k_2, KILN_I64, 0, k_none)), IN(0, 5, 3)))
CASE(topk_4097_all, topk(IN(2, 4097), 4097, 0, true, 1))
CASE(sort_4097x2_ax0_i, sorted(IN(2, 4097, 2), 0, false, 1))
CASE(where_rank8_0, kiln_where(kiln_gt_c(IN(0, 2, 1, 2, 1, 2, 1, 2, 0), 0), IN8(1, R8B), IN0(2)))
CASE(roll_rank8, kiln_roll(IN8(0, k_R2), 3, 5))
CASE(tril_1x4097, kiln_tril(IN(0, 2, 4097), 4000))
CASE(sum_expanded_T, SUM(T(kiln_expand(IN(0, 3, 1), 2, S(3, 4))), AX(1), false))
CASE(concat_mid0_rank3, CAT(1, IN(0, 2, 0, 3), IN(1, 2, 2, 3), IN(2, 2, 0, 3)))
CASE(stack_axm1, STACK(-1, IN(0, 2, 0), IN(1, 2, 0)))
CASE(pad_reflect_T, kiln_pad_with(T(IN(0, 4, 3)), S(0, 2), S(0, 1), KILN_PAD_REFLECT, 0))
CASE(mse_big, kiln_mse_loss(IN(0, BIG), IN(1, BIG)))
CASE(layer_norm_2x0x4, layer_norm(IN(0, 2, 0, 4)))
CASE(grad_mean_big, grad_of(kiln_mean(GL(0, BIG), 0, NULL, false), 0))
CASE(grad_softmax_4097, grad_of(kiln_mul(kiln_softmax(GL(0, 2, 4097), 1), IND(1, 2, 4097)), 0))
CASE(grad_matmul_b0_bcast_b, grad_of(kiln_matmul(GL(0, 0, 1, 2, 3), GL(1, 5, 3, 2)), 1))
static kiln_tensor where_x_3x(kiln_tensor c, kiln_tensor a) { return kiln_where(c, a, kiln_mul_c(a, 3)); }
CASE(grad_where_rank8, grad_of(where_x_3x(kiln_gt_c(fuse(make(KILN_F64, 8, R8B, 1)), 0), leaf(8, R8A, 0)), 0))
/* ── gradients of sum(f(x)), in f64 ── */
static kiln_tensor sq(kiln_tensor a) { return kiln_mul(a, a); }
CASE(grad_sum_0x3, grad_of(kiln_sum(GL(0, 0, 3), 0, NULL, false), 0))
CASE(grad_mean_3x0_ax1, grad_of(MEAN(GL(0, 3, 0), AX(1), false), 0))
CASE(grad_add_bcast_a, grad_of(sq(kiln_add(GL(0, 3, 1, 5), GL(1, 1, 4, 1))), 0))
CASE(grad_add_bcast_b, grad_of(sq(kiln_add(GL(0, 3, 1, 5), GL(1, 1, 4, 1))), 1))
CASE(grad_mul_rank0_a, grad_of(kiln_mul(GL0(0), GL(1, 2, 3)), 0))
CASE(grad_mul_rank8_a, grad_of(kiln_mul(leaf(8, R8A, 0), leaf(8, R8B, 1)), 0))
CASE(grad_matmul_2x0_a, grad_of(kiln_matmul(GL(0, 2, 0), GL(1, 0, 3)), 0))
CASE(grad_matmul_2x0_b, grad_of(kiln_matmul(GL(0, 2, 0), GL(1, 0, 3)), 1))
CASE(grad_matmul_0x3_b, grad_of(kiln_matmul(GL(0, 0, 3), GL(1, 3, 4)), 1))
CASE(grad_matmul_v_v, grad_of(kiln_matmul(GL(0, 3), GL(1, 3)), 0))
CASE(grad_softmax_3x1, grad_of(kiln_mul(kiln_softmax(GL(0, 3, 1), 1), IND(1, 3, 1)), 0))
CASE(grad_gather_empty, grad_of(kiln_gather(GL(0, 3, 4), 1, IDX(k_e, 3, 0)), 0))
CASE(grad_concat_empty, grad_of(kiln_mul_c(CAT(0, GL(0, 0, 3), GL(1, 2, 3)), 2), 0))
CASE(grad_max_2x3_ax0_keep, grad_of(MAX(GL(0, 2, 3), AX(0), true), 0))
CASE(grad_expand_rank0, grad_of(kiln_mul(kiln_expand(GL0(0), 2, S(2, 3)), IND(1, 2, 3)), 0))
CASE(grad_cumsum_3x0, grad_of(kiln_cumsum(GL(0, 3, 0), 1), 0))
CASE(grad_sort_0, grad_of(sorted(GL(0, 0), 0, false, 0), 0))
CASE(grad_layer_norm_3x1, grad_of(kiln_mul(layer_norm(GL(0, 3, 1)), IND(1, 3, 1)), 0))

static const shape_case k_cases[] = {
    E(add_3x1x5_1x4x1), E(add_1x4_3x1), E(add_4_3x1), E(sub_3x1_4), E(add_0x3_1x3), E(add_0x3_0x1), E(add_3x0_3x1),
    E(add_1x0_3x1), E(add_2x0x4_4), E(add_0_rank0), E(add_0x3_3x1_err), E(add_rank0_rank0), E(mul_rank0_2x3),
    E(add_rank8), E(add_rank8_rank0), E(add_rank8_2), E(exp_0x3), E(neg_rank0), E(lt_0x2_2), E(where_3x1_1x4_rank0),
    E(where_0_1_1), E(where_2x1x1_1x3x1_1x1x4), E(mul_T_4x3), E(add_T_T), E(exp_step_slice), E(add_step_slice_cols),
    E(add_expanded), E(cast_i64_0x2), E(sum_0x3_all), E(sum_0x3_ax0), E(sum_0x3_ax1), E(sum_3x0_ax1),
    E(sum_3x0_ax1_keep), E(sum_2x0x3_ax02), E(sum_2x0x3_ax02_keep), E(sum_2x0x3_ax1_keep), E(prod_0x3_ax0),
    E(prod_0_all), E(mean_0x3_ax0), E(mean_3x0_ax1), E(mean_0_all), E(mean_0x3_ax1), E(max_0x3_ax0), E(max_0x3_ax1),
    E(min_0_all), E(argmax_0x3_ax0), E(argmax_0x3_ax1), E(argmin_3x0_ax1), E(sum_rank0), E(sum_rank0_ax0),
    E(max_rank0), E(argmax_rank0), E(mean_rank0_keep), E(prod_rank0_axm1), E(max_rank0_axm1_keep), E(argmin_rank0),
    E(sum_rank0_ax1_err), E(sum_rank0_ax0_m1_err), E(sum_2x3x4_ax02_keep), E(max_2x3x4_ax_m1_0), E(mean_2x3x4_ax12),
    E(sum_rank8_ax1357), E(sum_rank8_all), E(sum_T_ax0), E(max_T_ax1), E(argmax_T_ax0), E(sum_step_slice_ax1),
    E(sum_expanded_ax0), E(sum_big), E(sum_big_keep_2d), E(mean_big), E(max_big), E(argmax_big), E(argmin_big),
    E(sum_i64_0x3), E(prod_i64_0), E(cumsum_0x3_ax0), E(cumsum_3x0_ax0), E(cumprod_3x0_ax1), E(cumsum_rank0),
    E(cumsum_T_ax1), E(cumprod_step_ax0), E(cumsum_1x4097_ax1), E(sort_0_v), E(sort_0_i), E(sort_3x0_ax1_v),
    E(sort_0x3_ax1_i), E(sort_rank0_v), E(sort_rank0_i), E(sort_2x1_ax1_i), E(sort_T_ax1_v), E(sort_T_ax0_i),
    E(sort_4097_v), E(argsort_4097), E(topk_k0_v), E(topk_k0_i), E(topk_empty_axis), E(topk_0x4_ax1_v),
    E(topk_rank0_v), E(topk_rank0_i), E(topk_k_gt_dim), E(topk_T_v), E(gather_idx_3x0), E(gather_idx_0x4),
    E(gather_T), E(index_select_empty_idx), E(index_select_0x4_empty_idx), E(index_select_x_3x0), E(index_select_T),
    E(scatter_empty_idx), E(scatter_add_empty_idx), E(index_add_m0), E(index_put_m0), E(index_put_m0_acc),
    E(one_hot_0), E(embedding_ids_0), E(embedding_ids_2x0), E(concat_0x3_2x3), E(concat_2x3_0x3), E(concat_2x0_2x3_ax1),
    E(concat_0x3_0x3), E(concat_0x3_0x2_ax1), E(concat_T_ax0), E(concat_rank0_err), E(stack_0x3), E(stack_rank0),
    E(pad_0x3_const), E(pad_0x3_const_ax0), E(pad_reflect_2x1x4), E(pad_replicate_2x1x1), E(pad_replicate_1x0),
    E(pad_const_T), E(slice_empty), E(slice_step_0x3), E(slice_step_of_T), E(flip_0x3), E(flip_rank0),
    E(flip_T), E(roll_0), E(roll_3x0), E(roll_T), E(roll_len1), E(tril_0x3), E(triu_3x0), E(tril_2x0x4),
    E(triu_T), E(tril_rank1_err), E(permute_rank0), E(permute_0x2x3), E(permute_rank8), E(reshape_0x3_3x0),
    E(reshape_0x3_m1x2x0), E(reshape_0x3_m1x0_err), E(reshape_rank0_1x1), E(reshape_1x1_rank0), E(reshape_T),
    E(expand_3x1_3x0), E(expand_rank0_2x3), E(expand_0x1_2x0x4), E(expand_3x1_4x1_err), E(matmul_2x0_0x3),
    E(matmul_0x3_3x4), E(matmul_2x3_3x0), E(matmul_b0), E(matmul_v0_v0), E(matmul_v_m), E(matmul_m_v),
    E(matmul_v_v), E(matmul_bcast), E(matmul_T_T), E(matmul_expanded_b), E(matmul_rank0_err), E(matmul_1x1_1x1),
    E(matmul_inner_mismatch_err), E(softmax_0x3_ax1), E(softmax_3x0_ax1), E(log_softmax_2x0x3_ax1), E(softmax_rank0),
    E(log_softmax_rank0), E(softmax_rank0_axm1), E(softmax_rank0_ax1_err), E(softmax_3x1_ax1), E(log_softmax_3x1_ax1),
    E(softmax_2x4097), E(log_softmax_2x4097), E(softmax_T_ax1), E(softmax_T_ax0), E(softmax_expanded),
    E(layer_norm_3x1), E(layer_norm_0x4), E(layer_norm_2x4097), E(layer_norm_T), E(conv2d_batch0), E(conv2d_1x1),
    E(maxpool_batch0), E(avgpool_batch0), E(maxpool_T), E(cross_entropy_1class), E(cross_entropy_T), E(mse_0x3),
    E(sum_bool_0), E(sum_i32_big), E(sum_f64_big_mid), E(argmax_ties_big), E(max_1x4097_ax0), E(max_4097x2_ax0),
    E(argmax_4097x2_ax0), E(sum_rank8_2s_ax0246), E(sum_rank8_perm), E(cumsum_big), E(cumsum_T_4097),
    E(softmax_4097x2_ax0), E(log_softmax_T_4097), E(matmul_1x1_1x4097), E(matmul_4097_dot), E(matmul_b0_bcast),
    E(matmul_step_v), E(matmul_rank8), E(conv2d_out0), E(conv2d_small_err), E(max_pool2d_big_k_err), E(cross_entropy_0),
    E(cross_entropy_4097), E(gather_x_0x4), E(index_select_rank0_idx), E(one_hot_rank0), E(embedding_rank0),
    E(topk_4097_all), E(sort_4097x2_ax0_i), E(where_rank8_0), E(roll_rank8), E(tril_1x4097), E(sum_expanded_T),
    E(concat_mid0_rank3), E(stack_axm1), E(pad_reflect_T), E(mse_big), E(layer_norm_2x0x4), E(grad_mean_big),
    E(grad_softmax_4097), E(grad_matmul_b0_bcast_b), E(grad_where_rank8), E(grad_sum_0x3), E(grad_mean_3x0_ax1),
    E(grad_add_bcast_a), E(grad_add_bcast_b), E(grad_mul_rank0_a), E(grad_mul_rank8_a), E(grad_matmul_2x0_a),
    E(grad_matmul_2x0_b), E(grad_matmul_0x3_b), E(grad_matmul_v_v), E(grad_softmax_3x1), E(grad_gather_empty),
    E(grad_concat_empty), E(grad_max_2x3_ax0_keep), E(grad_expand_rank0), E(grad_cumsum_3x0), E(grad_sort_0),
    E(grad_layer_norm_3x1),
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))

#define SHAPES_REF "shapes_reference.txt"
#include "backend/shapes_runner.h"

KT_TEST(elementwise_and_broadcasting) {
  static const char *groups[] = {"add_", "sub_", "mul_", "exp_", "neg_", "lt_", "where_", "cast_"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(reductions_and_scans) {
  static const char *groups[] = {"sum_", "prod_", "mean_", "max_", "min_", "argm", "cum"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(sorting_and_indexing) {
  static const char *groups[] = {"sort", "topk", "gather", "argsort", "index_", "scatter", "one_hot", "embedding"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(shape_ops) {
  static const char *groups[] = {"concat", "stack", "pad_", "slice", "flip", "roll", "tril", "triu", "permute",
                                 "reshape", "expand_"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(matmul_rows_and_nn) {
  static const char *groups[] = {"matmul",  "softmax",       "log_softmax", "layer_norm", "conv2d",
                                 "maxpool", "avgpool", "cross_entropy", "mse"};
  for (size_t g = 0; g < sizeof groups / sizeof *groups; g++) run_all(groups[g]);
}
KT_TEST(gradients) { run_all("grad_"); }
KT_TEST(every_case_ran) {
  for (int i = 0; i < N_CASES; i++) KT_CHECK_MSG(k_ran[i], "%s: in no group of this test", k_cases[i].name);
}

KT_MAIN(KT_CASE(every_reference_line_has_a_case), KT_CASE(elementwise_and_broadcasting),
        KT_CASE(reductions_and_scans), KT_CASE(sorting_and_indexing), KT_CASE(shape_ops),
        KT_CASE(matmul_rows_and_nn), KT_CASE(gradients), KT_CASE(every_case_ran))
