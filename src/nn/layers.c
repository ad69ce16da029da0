/* Linear, Embedding and LayerNorm. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"
#include "nn/nn_internal.h"

static int is_null(kiln_tensor t) { return t.index == 0 && t.gen == 0; }

static const char *shape_str(kiln_tensor t, char *buf, size_t cap) {
  int r = kiln_rank(t), o = snprintf(buf, cap, "[");
  for (int i = 0; i < r && o > 0 && (size_t)o < cap; i++)
    o += snprintf(buf + o, cap - (size_t)o, i ? ",%lld" : "%lld", (long long)kiln_dim(t, i));
  if (o > 0 && (size_t)o < cap) snprintf(buf + o, cap - (size_t)o, "]");
  return buf;
}

/* The shapes as the user passed them: x [..., in], weight [out, in], bias
 * [out]. Checked here so that a mistake names linear and those shapes, not
 * the matmul of a transposed weight the user never wrote. 1 and *err (a
 * poisoned tensor) when they do not fit; 0 when they do, or when an operand
 * is already invalid (the ops below report that). */
static int linear_shapes_bad(kiln_tensor x, kiln_tensor w, kiln_tensor b, kiln_loc loc, kiln_tensor *err) {
  int rx = kiln_rank(x), rw = kiln_rank(w), rb = is_null(b) ? 1 : kiln_rank(b);
  if (rx < 0 || rw < 0 || rb < 0) return 0;
  char sx[160], sw[160], sb[160];
  shape_str(x, sx, sizeof sx);
  shape_str(w, sw, sizeof sw);
  int64_t in = rx ? kiln_dim(x, -1) : -1;
  if (rx == 0 || rw != 2 || kiln_dim(w, 1) != in) {
    const char *hint = rx == 0 ? "the input must have at least one dimension (its last is in_features)"
                       : rw != 2 ? "the weight must be a matrix [out_features, in_features]"
                       : kiln_dim(w, 0) == in ? "the weight looks transposed: pass it as [out_features, in_features]"
                                              : "the weight's last dimension must equal the input's last dimension";
    *err = kiln_nn_fail(loc, "linear: input %s and weight %s do not fit: expected weight [out_features, %lld]; %s", sx, sw,
                 (long long)in, hint);
    return 1;
  }
  if (!is_null(b) && (rb != 1 || kiln_dim(b, 0) != kiln_dim(w, 0))) {
    *err = kiln_nn_fail(loc, "linear: bias %s does not fit weight %s: expected bias [%lld] (out_features)",
                 shape_str(b, sb, sizeof sb), sw, (long long)kiln_dim(w, 0));
    return 1;
  }
  return 0;
}

kiln_tensor kiln_linear_apply_at(kiln_tensor x, kiln_tensor w, kiln_tensor b, kiln_loc loc) {
  KILN_NN_CHECK("linear", loc, 2, x, w, b);
  kiln_tensor err;
  if (linear_shapes_bad(x, w, b, loc, &err)) return err;
  /* x Wᵀ: matmul broadcasts W over x's batch dims. */
  kiln_tensor y = kiln_matmul_at(x, kiln_transpose_at(w, 0, 1, loc), loc);
  return is_null(b) ? y : kiln_add_at(y, kiln_nn_autocast_bias(y, b, loc), loc);
}

kiln_status kiln_linear_create_at(int in_features, int out_features, bool bias, uint64_t seed, kiln_linear **out,
                                  kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "linear");
  if (in_features <= 0 || out_features <= 0) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "linear: bad sizes in=%d out=%d", in_features, out_features);
  }
  kiln_linear *l = calloc(1, sizeof *l);
  if (!l) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "linear: out of host memory");
  }
  l->in_features = in_features;
  l->out_features = out_features;
  /* kaiming_uniform(a=√5) reduces to U(±1/√fan_in); the bias uses the same bound. */
  double bound = 1.0 / sqrt((double)in_features);
  int64_t ws[2] = {out_features, in_features}, bs[1] = {out_features};
  l->weight = kiln_nn_uniform(2, ws, bound, kiln_nn_seed(seed, 0), loc);
  kiln_nn_add(&l->m, "weight", l->weight, 0);
  if (bias) {
    l->bias = kiln_nn_uniform(1, bs, bound, kiln_nn_seed(seed, 1), loc);
    kiln_nn_add(&l->m, "bias", l->bias, 0);
  }
  kiln_status chk = kiln_nn_create_check(&l->m, "linear", loc);
  if (chk != KILN_OK) {
    kiln_linear_destroy(l);
    return chk;
  }
  *out = l;
  return KILN_OK;
}

kiln_tensor kiln_linear_forward_at(const kiln_linear *l, kiln_tensor x, kiln_loc loc) {
  if (!l) return kiln_nn_fail(loc, "linear: layer is NULL");
  return kiln_linear_apply_at(x, l->weight, l->bias, loc);
}

void kiln_linear_destroy(kiln_linear *l) {
  if (!l) return;
  kiln_module_release(&l->m);
  free(l);
}

kiln_status kiln_embedding_create_at(int num, int dim, uint64_t seed, kiln_embedding **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "embedding");
  if (num <= 0 || dim <= 0) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "embedding: bad sizes num=%d dim=%d", num, dim);
  }
  kiln_embedding *e = calloc(1, sizeof *e);
  if (!e) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "embedding: out of host memory");
  }
  e->num = num;
  e->dim = dim;
  int64_t s[2] = {num, dim};
  e->weight = kiln_param(kiln_rand_at(KILN_RAND_NORMAL, KILN_F32, 2, s, kiln_nn_seed(seed, 0), loc));
  kiln_nn_add(&e->m, "weight", e->weight, 0);
  kiln_status chk = kiln_nn_create_check(&e->m, "embedding", loc);
  if (chk != KILN_OK) {
    kiln_embedding_destroy(e);
    return chk;
  }
  *out = e;
  return KILN_OK;
}

kiln_tensor kiln_embedding_forward_at(const kiln_embedding *e, kiln_tensor ids, kiln_loc loc) {
  if (!e) return kiln_nn_fail(loc, "embedding: layer is NULL");
  KILN_NN_CHECK("embedding", loc, 1, ids);
  return kiln_index_select_at(e->weight, 0, ids, loc);
}

void kiln_embedding_destroy(kiln_embedding *e) {
  if (!e) return;
  kiln_module_release(&e->m);
  free(e);
}

kiln_status kiln_layernorm_create_at(int dim, double eps, bool affine, kiln_layernorm **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "layernorm");
  if (dim <= 0 || !(eps >= 0)) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "layernorm: bad dim=%d or eps=%g", dim, eps);
  }
  kiln_layernorm *n = calloc(1, sizeof *n);
  if (!n) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "layernorm: out of host memory");
  }
  n->dim = dim;
  n->eps = eps;
  if (affine) {
    int64_t s[1] = {dim};
    n->weight = kiln_nn_fill(1, s, 1.0, loc);
    n->bias = kiln_nn_fill(1, s, 0.0, loc);
    kiln_nn_add(&n->m, "weight", n->weight, 0);
    kiln_nn_add(&n->m, "bias", n->bias, 0);
  }
  kiln_status chk = kiln_nn_create_check(&n->m, "layernorm", loc);
  if (chk != KILN_OK) {
    kiln_layernorm_destroy(n);
    return chk;
  }
  *out = n;
  return KILN_OK;
}

kiln_tensor kiln_layernorm_forward_at(const kiln_layernorm *n, kiln_tensor x, kiln_loc loc) {
  if (!n) return kiln_nn_fail(loc, "layernorm: layer is NULL");
  KILN_NN_CHECK("layernorm", loc, 1, x);
  if (kiln_rank(x) >= 1 && kiln_dim(x, -1) != n->dim)
    return kiln_nn_fail(loc, "layernorm: last dim is %lld, the layer normalizes %d", (long long)kiln_dim(x, -1),
                        n->dim);
  int ax[1] = {-1};
  /* 16-bit floats in f32, rounded once at the end, as PyTorch's kernel (per
   * node, the gradient was several bf16 ulps off) */
  kiln_dtype dt;
  x = kiln_nn_f32_inside(kiln_nn_autocast_f32(x, loc), &dt, loc);
  kiln_tensor mu = kiln_mean_at(x, 1, ax, 1, loc);
  kiln_tensor d = kiln_sub_at(x, mu, loc);
  kiln_tensor var = kiln_mean_at(kiln_mul_at(d, d, loc), 1, ax, 1, loc); /* biased, as torch */
  kiln_tensor y = kiln_mul_at(d, kiln_nn_inv_std(var, n->eps, loc), loc);
  if (!is_null(n->weight)) y = kiln_add_at(kiln_mul_at(y, n->weight, loc), n->bias, loc);
  return kiln_nn_round_to(y, dt, loc);
}

void kiln_layernorm_destroy(kiln_layernorm *n) {
  if (!n) return;
  kiln_module_release(&n->m);
  free(n);
}
