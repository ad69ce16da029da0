/* Multi-head self-attention and the Transformer encoder layer. */
#include <math.h>
#include <stdlib.h>

#include "base/status.h"
#include "nn/nn_internal.h"

static int is_null(kiln_tensor t) { return t.index == 0 && t.gen == 0; }

kiln_tensor kiln_sdpa_at(kiln_tensor q, kiln_tensor k, kiln_tensor v, kiln_tensor mask, double dropout, bool training,
                         uint64_t seed, kiln_loc loc) {
  KILN_NN_CHECK("sdpa", loc, 3, q, k, v, mask);
  int r = kiln_rank(k);
  /* checked here so that a mistake names sdpa and the shapes passed, not the
   * matmul of a transposed k the user never wrote */
  if (kiln_is_valid(q) && kiln_is_valid(k) && kiln_is_valid(v) &&
      (kiln_rank(q) < 2 || r < 2 || kiln_rank(v) < 2 || kiln_dim(q, -1) != kiln_dim(k, -1) ||
       kiln_dim(k, -2) != kiln_dim(v, -2))) {
    char sq[128], sk[128], sv[128];
    return kiln_nn_fail(loc,
                        "sdpa: q %s, k %s and v %s do not fit: expected q [..., L, E], k [..., S, E], v [..., S, Ev]",
                        kiln_nn_shape_str(q, sq, sizeof sq), kiln_nn_shape_str(k, sk, sizeof sk),
                        kiln_nn_shape_str(v, sv, sizeof sv));
  }
  if (r < 2) return kiln_nn_fail(loc, "sdpa: q, k, v need rank >= 2 (k has rank %d)", r);
  if (kiln_is_valid(k) && kiln_dim(k, -2) == 0) { /* softmax over no keys: an error, as softmax of an empty axis */
    char sq[128], sk[128];
    return kiln_nn_fail(loc, "sdpa: k %s has no keys (S = 0): the softmax over keys is empty (q %s)",
                        kiln_nn_shape_str(k, sk, sizeof sk), kiln_nn_shape_str(q, sq, sizeof sq));
  }
  /* f16: q scaled before the product, as PyTorch's sdpa. The unscaled q·kᵀ overflows f16 where the scaled
   * scores do not (q and k near 80 with E = 16: 102400 is inf, 25600 is not), and a score of inf made the row
   * NaN. Other dtypes have f32's range or more (bf16 too): the scale after the product, where it joins the
   * softmax's row kernel for free (before it, the encoder step needed a kernel more to scale q). */
  double scale = 1.0 / sqrt((double)kiln_dim(q, -1));
  kiln_tensor kt = kiln_transpose_at(k, r - 2, r - 1, loc);
  int f16 = kiln_autocast_dtype() == KILN_F16 || (kiln_is_valid(q) && kiln_dtype_of(q) == KILN_F16 &&
                                                   kiln_is_valid(k) && kiln_dtype_of(k) == KILN_F16);
  kiln_tensor s = f16 ? kiln_matmul_at(kiln_mul_c_at(q, scale, loc), kt, loc)
                      : kiln_mul_c_at(kiln_matmul_at(q, kt, loc), scale, loc);
  /* PyTorch's convention (F.scaled_dot_product_attention's attn_mask): a
   * bool mask says which keys take part (true = attend; the others get -inf,
   * so a row with no key attended is NaN, as in PyTorch); a float mask is
   * added to the scores. An integer mask has no agreed meaning (kiln's mha
   * key_padding_mask and PyTorch's MHA read 1 as "ignore", its SDPA reads
   * true as "attend"): refused rather than guessed. */
  if (!is_null(mask)) {
    kiln_dtype mt = kiln_dtype_of(mask);
    if (mt == KILN_BOOL) {
      s = kiln_where_at(mask, s, kiln_constant_at(kiln_dtype_of(s), -INFINITY, loc), loc);
    } else if (mt == KILN_F32 || mt == KILN_F64) {
      s = kiln_add_at(s, kiln_cast_at(mask, kiln_dtype_of(s), loc), loc);
    } else if (kiln_is_valid(mask)) {
      return kiln_nn_fail(loc,
                          "sdpa: the mask is %s; expected bool (true = attend, as PyTorch's "
                          "scaled_dot_product_attention) or a float mask added to the scores",
                          kiln_dtype_name(mt));
    }
  }
  kiln_tensor p = kiln_softmax_at(s, -1, loc);
  p = kiln_dropout_at(p, dropout, seed, training, loc);
  return kiln_matmul_at(p, v, loc);
}

kiln_status kiln_mha_create_at(int dim, int n_heads, double dropout, uint64_t seed, kiln_mha **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "mha");
  if (dim <= 0 || n_heads <= 0 || dim % n_heads || !(dropout >= 0 && dropout < 1)) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
               "mha: dim %d must be a positive multiple of n_heads %d, dropout %g in [0,1)", dim, n_heads, dropout);
  }
  kiln_mha *a = calloc(1, sizeof *a);
  if (!a) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "mha: out of host memory");
  }
  a->dim = dim;
  a->n_heads = n_heads;
  a->dropout = dropout;
  int64_t ws[2] = {3 * dim, dim}, bs[1] = {3 * dim}, os[2] = {dim, dim}, obs[1] = {dim};
  /* torch: xavier_uniform_ on the packed [3D, D] matrix, zero biases, and the
   * out projection keeps Linear's default init for its weight. */
  a->in_proj_weight = kiln_nn_uniform(2, ws, sqrt(6.0 / (double)(dim + 3 * dim)), kiln_nn_seed(seed, 0), loc);
  a->in_proj_bias = kiln_nn_fill(1, bs, 0.0, loc);
  a->out_weight = kiln_nn_uniform(2, os, 1.0 / sqrt((double)dim), kiln_nn_seed(seed, 1), loc);
  a->out_bias = kiln_nn_fill(1, obs, 0.0, loc);
  kiln_nn_add(&a->m, "in_proj_weight", a->in_proj_weight, 0);
  kiln_nn_add(&a->m, "in_proj_bias", a->in_proj_bias, 0);
  kiln_nn_add(&a->m, "out_proj.weight", a->out_weight, 0);
  kiln_nn_add(&a->m, "out_proj.bias", a->out_bias, 0);
  kiln_status chk = kiln_nn_create_check(&a->m, "mha", loc);
  if (chk != KILN_OK) {
    kiln_mha_destroy(a);
    return chk;
  }
  *out = a;
  return KILN_OK;
}

/* The additive mask [B|1, 1, T|1, T] of opts, or the null tensor. */
static kiln_tensor build_mask(const kiln_attn_opts *o, int64_t B, int64_t T, kiln_loc loc) {
  kiln_tensor m = {0, 0};
  if (!o) return m;
  if (o->causal) {
    int64_t cs[2] = {T, 1}, rs[2] = {1, T};
    kiln_tensor i = kiln_reshape_at(kiln_arange_at(KILN_I64, 0, (double)T, 1, loc), 2, cs, loc);
    kiln_tensor j = kiln_reshape_at(kiln_arange_at(KILN_I64, 0, (double)T, 1, loc), 2, rs, loc);
    m = kiln_where_at(kiln_gt_at(j, i, loc), kiln_constant_at(KILN_F32, KILN_NN_MASK_NEG, loc),
                      kiln_constant_at(KILN_F32, 0.0, loc), loc);
  }
  if (!is_null(o->key_padding_mask)) {
    kiln_tensor k = o->key_padding_mask;
    if (kiln_rank(k) != 2 || kiln_dim(k, 0) != B || kiln_dim(k, 1) != T)
      return kiln_nn_fail(loc, "mha: key_padding_mask must be [%lld, %lld]", (long long)B, (long long)T);
    kiln_dtype kt = kiln_dtype_of(k);
    if (kt == KILN_BOOL)
      k = kiln_where_at(k, kiln_constant_at(KILN_F32, KILN_NN_MASK_NEG, loc), kiln_constant_at(KILN_F32, 0.0, loc),
                        loc);
    else if (kt != KILN_F32 && kt != KILN_F64)
      return kiln_nn_fail(loc, "mha: key_padding_mask is %s; expected bool (true = padding, ignored) or a float "
                          "mask added to the scores", kiln_dtype_name(kt));
    int64_t ks[4] = {B, 1, 1, T};
    k = kiln_reshape_at(k, 4, ks, loc);
    m = is_null(m) ? k : kiln_add_at(m, k, loc);
  }
  return m;
}

kiln_tensor kiln_mha_forward_at(const kiln_mha *a, kiln_tensor x, const kiln_attn_opts *opts, kiln_loc loc) {
  if (!a) return kiln_nn_fail(loc, "mha: layer is NULL");
  KILN_NN_CHECK("mha", loc, 1, x, opts ? opts->key_padding_mask : (kiln_tensor){0, 0});
  if (kiln_rank(x) != 3 || kiln_dim(x, 2) != a->dim)
    return kiln_nn_fail(loc, "mha: input must be [B, T, %d] (batch_first)", a->dim);
  int64_t B = kiln_dim(x, 0), T = kiln_dim(x, 1), H = a->n_heads, hd = a->dim / a->n_heads;
  kiln_tensor qkv = kiln_linear_apply_at(x, a->in_proj_weight, a->in_proj_bias, loc); /* [B,T,3D] */
  int64_t s5[5] = {B, T, 3, H, hd};
  int perm5[5] = {2, 0, 3, 1, 4};
  qkv = kiln_permute_at(kiln_reshape_at(qkv, 5, s5, loc), perm5, loc); /* [3,B,H,T,hd] */
  int64_t s4[4] = {B, H, T, hd};
  kiln_tensor q = kiln_reshape_at(kiln_slice_at(qkv, 0, 0, 1, 1, loc), 4, s4, loc);
  kiln_tensor k = kiln_reshape_at(kiln_slice_at(qkv, 0, 1, 2, 1, loc), 4, s4, loc);
  kiln_tensor v = kiln_reshape_at(kiln_slice_at(qkv, 0, 2, 3, 1, loc), 4, s4, loc);
  kiln_tensor mask = build_mask(opts, B, T, loc);
  bool training = opts ? opts->training : false;
  uint64_t seed = opts ? opts->seed : 0;
  kiln_tensor o = kiln_sdpa_at(q, k, v, mask, a->dropout, training, seed, loc); /* [B,H,T,hd] */
  int perm4[4] = {0, 2, 1, 3};
  int64_t s3[3] = {B, T, a->dim};
  o = kiln_reshape_at(kiln_permute_at(o, perm4, loc), 3, s3, loc);
  return kiln_linear_apply_at(o, a->out_weight, a->out_bias, loc);
}

void kiln_mha_destroy(kiln_mha *a) {
  if (!a) return;
  kiln_module_release(&a->m);
  free(a);
}

kiln_status kiln_encoder_layer_create_at(int d_model, int n_heads, int dim_ff, double dropout, kiln_activation activation,
                                         kiln_norm_position norm_position, double eps, uint64_t seed,
                                         kiln_encoder_layer **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "encoder_layer");
  if (dim_ff <= 0) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "encoder_layer: dim_feedforward %d must be positive", dim_ff);
  }
  if ((activation != KILN_ACTIVATION_RELU && activation != KILN_ACTIVATION_GELU) ||
      (norm_position != KILN_NORM_POST && norm_position != KILN_NORM_PRE)) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "encoder_layer: activation %d (KILN_ACTIVATION_RELU or _GELU) or norm_position %d "
                      "(KILN_NORM_POST or _PRE) out of range",
                      (int)activation, (int)norm_position);
  }
  kiln_encoder_layer *l = calloc(1, sizeof *l);
  if (!l) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "encoder_layer: out of host memory");
  }
  l->dropout = dropout;
  l->activation = activation;
  l->norm_position = norm_position;
  kiln_status s = kiln_mha_create_at(d_model, n_heads, dropout, kiln_nn_seed(seed, 0), &l->self_attn, loc);
  kiln_status s1 = kiln_linear_create_at(d_model, dim_ff, true, kiln_nn_seed(seed, 1), &l->linear1, loc);
  kiln_status s2 = kiln_linear_create_at(dim_ff, d_model, true, kiln_nn_seed(seed, 2), &l->linear2, loc);
  kiln_status s3 = kiln_layernorm_create_at(d_model, eps, true, &l->norm1, loc);
  kiln_status s4 = kiln_layernorm_create_at(d_model, eps, true, &l->norm2, loc);
  if (s == KILN_OK) s = s1 != KILN_OK ? s1 : s2 != KILN_OK ? s2 : s3 != KILN_OK ? s3 : s4;
  if (s != KILN_OK) {
    kiln_encoder_layer_destroy(l);
    return s;
  }
  /* torch's state_dict order and names */
  kiln_nn_add_sub(&l->m, "self_attn", &l->self_attn->m);
  kiln_nn_add_sub(&l->m, "linear1", &l->linear1->m);
  kiln_nn_add_sub(&l->m, "linear2", &l->linear2->m);
  kiln_nn_add_sub(&l->m, "norm1", &l->norm1->m);
  kiln_nn_add_sub(&l->m, "norm2", &l->norm2->m);
  *out = l;
  return KILN_OK;
}

kiln_tensor kiln_encoder_layer_forward_at(const kiln_encoder_layer *l, kiln_tensor x, const kiln_attn_opts *opts,
                                          kiln_loc loc) {
  if (!l) return kiln_nn_fail(loc, "encoder_layer: layer is NULL");
  KILN_NN_CHECK("encoder_layer", loc, 1, x, opts ? opts->key_padding_mask : (kiln_tensor){0, 0});
  kiln_attn_opts o = {0};
  if (opts) o = *opts;
  uint64_t seed = o.seed;
  int tr = o.training;
  double p = l->dropout;
  o.seed = kiln_nn_seed(seed, 0); /* attention-weight dropout */
  kiln_tensor h = l->norm_position == KILN_NORM_PRE ? kiln_layernorm_forward_at(l->norm1, x, loc) : x;
  kiln_tensor sa = kiln_dropout_at(kiln_mha_forward_at(l->self_attn, h, &o, loc), p, kiln_nn_seed(seed, 1), tr, loc);
  x = l->norm_position == KILN_NORM_PRE ? kiln_add_at(x, sa, loc) : kiln_layernorm_forward_at(l->norm1, kiln_add_at(x, sa, loc), loc);
  h = l->norm_position == KILN_NORM_PRE ? kiln_layernorm_forward_at(l->norm2, x, loc) : x;
  kiln_tensor f = kiln_linear_forward_at(l->linear1, h, loc);
  f = l->activation == KILN_ACTIVATION_GELU ? kiln_gelu_at(f, loc) : kiln_relu_at(f, loc);
  f = kiln_dropout_at(f, p, kiln_nn_seed(seed, 2), tr, loc);
  f = kiln_dropout_at(kiln_linear_forward_at(l->linear2, f, loc), p, kiln_nn_seed(seed, 3), tr, loc);
  return l->norm_position == KILN_NORM_PRE ? kiln_add_at(x, f, loc) : kiln_layernorm_forward_at(l->norm2, kiln_add_at(x, f, loc), loc);
}

void kiln_encoder_layer_destroy(kiln_encoder_layer *l) {
  if (!l) return;
  /* the entries of l->m alias the sublayers' tensors: release them once */
  l->m.n = 0;
  kiln_mha_destroy(l->self_attn);
  kiln_linear_destroy(l->linear1);
  kiln_linear_destroy(l->linear2);
  kiln_layernorm_destroy(l->norm1);
  kiln_layernorm_destroy(l->norm2);
  free(l);
}
