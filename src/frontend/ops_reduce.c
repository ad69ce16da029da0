/* Reduction builders: sum, mean, prod, max, min, argmax, softmax, log_softmax;
 * the scans cumsum and cumprod. */
#include <string.h>

#include "frontend/api.h"

/* Build the keepdim reduction, then drop the axes unless keepdim. */
static kiln_node *reduce_node(kiln_frontend *fe, int op, kiln_node *n, uint64_t mask, int keepdim, kiln_loc loc) {
  int64_t kshape[KILN_MAX_RANK], oshape[KILN_MAX_RANK];
  int orank = 0;
  for (int i = 0; i < n->rank; i++) {
    int red = (int)((mask >> i) & 1);
    kshape[i] = red ? 1 : n->shape[i];
    if (!red) oshape[orank++] = n->shape[i];
  }
  int64_t attr = (int64_t)mask;
  kiln_dtype dt = op == KILN_OP_ARGMAX ? KILN_I64 : (kiln_dtype)n->dtype;
  if (op == KILN_OP_ARGMAX) {
    for (int i = 0; i < n->rank; i++)
      if ((mask >> i) & 1) attr = i;
  }
  /* no axis (a 0-d x): the value itself; its argmax is 0 (torch) */
  if (!mask && op == KILN_OP_ARGMAX) return kiln_api_const(fe, KILN_I64, 0, NULL, 0.0, loc);
  kiln_node *r = mask ? kiln_fe_node(fe, op, dt, n->rank, kshape, 1, &n, 1, &attr, 0.0, loc) : n;
  if (!r || keepdim) return r;
  return kiln_api_reshape(fe, r, orank, oshape, loc);
}

/* Parse axes into a bitmask; 0 axes = all. Returns -1 on a bad axis, -2 on
 * an axis named twice (PyTorch: "dim ... appears multiple times"; a silent
 * union would hide a typo such as {1, -1} meant as {0, 1}). A 0-d tensor
 * takes axis 0 or -1 (as PyTorch), which reduces over nothing (mask 0).
 * -3: a negative count, or a count without an array. */
static int axes_mask(int rank, int n_axes, const int *axes, uint64_t *mask, int *bad) {
  *mask = 0;
  if (n_axes < 0 || (n_axes > 0 && !axes)) { /* a bad list never silently means "all axes" */
    *bad = n_axes;
    return -3;
  }
  if (n_axes == 0) {
    *mask = rank ? ((1ULL << rank) - 1) : 0;
    return 0;
  }
  int scalar_axes = 0;
  for (int i = 0; i < n_axes; i++) {
    if (rank == 0 && (axes[i] == 0 || axes[i] == -1)) {
      *bad = axes[i];
      if (scalar_axes++) return -2;
      continue;
    }
    int a = kiln_api_axis(axes[i], rank);
    if (a < 0 || rank == 0) {
      *bad = axes[i];
      return -1;
    }
    if ((*mask >> a) & 1) {
      *bad = axes[i];
      return -2;
    }
    *mask |= 1ULL << a;
  }
  return 0;
}

static kiln_tensor reduce(int op, const char *name, kiln_tensor x, int n_axes, const int *axes, int keepdim,
                          int mean, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  kiln_node *n;
  if (kiln_api_input(fe, x, name, loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  uint64_t mask;
  int bad = 0;
  char sb[128];
  int am = axes_mask(n->rank, n_axes, axes, &mask, &bad);
  if (am == -2)
    return kiln_api_fail(fe, loc, "%s: axis %d appears more than once in the axes of shape %s", name, bad,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  if (am == -3)
    return kiln_api_fail(fe, loc, "%s: bad axis list (%d axes%s) for shape %s", name, bad, axes ? "" : ", NULL array",
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  if (am)
    return kiln_api_fail(fe, loc, "%s: axis %d is out of range for shape %s", name, bad,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  int64_t count = 1;
  for (int i = 0; i < n->rank; i++)
    if ((mask >> i) & 1) count *= n->shape[i];
  if (count == 0 && op != KILN_OP_REDUCE_SUM && op != KILN_OP_REDUCE_PROD)
    return kiln_api_fail(fe, loc, "%s: reduction over an empty axis of shape %s has no identity", name,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  if (mean && !kiln_dtype_is_float((kiln_dtype)n->dtype))
    return kiln_api_fail(fe, loc, "%s: needs a floating-point tensor, got %s", name, kiln_dtype_name(n->dtype));
  /* PyTorch: sums and products of bool and of every integer dtype are int64 (they do
   * not wrap at 2^31 or 2^8) */
  if ((op == KILN_OP_REDUCE_SUM || op == KILN_OP_REDUCE_PROD) && !kiln_dtype_is_float((kiln_dtype)n->dtype) && n->dtype != KILN_I64)
    n = kiln_api_cast(fe, n, KILN_I64, loc);
  if (!n) return kiln_fe_tensor(fe, NULL, loc); /* the cast's bytes overflow: recorded */
  /* a mean of bf16 / f16 is computed in f32 and rounded once (NumPy's): its
   * sum rounded to 16 bits first overflowed f16 (1e6 values of 0.1: inf) and
   * 1 / count rounded to 16 bits was off by up to 2^-9 */
  kiln_dtype mean_dt = (kiln_dtype)n->dtype;
  if (mean && (mean_dt == KILN_BF16 || mean_dt == KILN_F16)) n = kiln_api_cast(fe, n, KILN_F32, loc);
  if (!n) return kiln_fe_tensor(fe, NULL, loc);
  kiln_node *r = reduce_node(fe, op, n, mask, keepdim, loc);
  if (r && mean) {
    kiln_node *c = kiln_api_const(fe, (kiln_dtype)r->dtype, 0, NULL, count ? 1.0 / (double)count : 0.0 / 0.0, loc);
    c = kiln_api_broadcast(fe, c, r->rank, r->shape, loc);
    kiln_node *in[2] = {r, c};
    r = c ? kiln_fe_node(fe, KILN_OP_MUL, (kiln_dtype)r->dtype, r->rank, r->shape, 2, in, 0, NULL, 0.0, loc) : NULL;
    r = kiln_api_cast(fe, r, mean_dt, loc);
  }
  return kiln_fe_tensor(fe, r, loc);
}

kiln_tensor kiln_sum_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc) {
  return reduce(KILN_OP_REDUCE_SUM, "sum", x, n_axes, axes, keepdim, 0, loc);
}
kiln_tensor kiln_mean_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc) {
  return reduce(KILN_OP_REDUCE_SUM, "mean", x, n_axes, axes, keepdim, 1, loc);
}
kiln_tensor kiln_prod_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc) {
  return reduce(KILN_OP_REDUCE_PROD, "prod", x, n_axes, axes, keepdim, 0, loc);
}
kiln_tensor kiln_max_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc) {
  return reduce(KILN_OP_REDUCE_MAX, "max", x, n_axes, axes, keepdim, 0, loc);
}
kiln_tensor kiln_min_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc) {
  return reduce(KILN_OP_REDUCE_MIN, "min", x, n_axes, axes, keepdim, 0, loc);
}
kiln_tensor kiln_argmax_at(kiln_tensor x, int axis, bool keepdim, kiln_loc loc) {
  return reduce(KILN_OP_ARGMAX, "argmax", x, 1, &axis, keepdim, 0, loc);
}

/* cumsum / cumprod: one SCAN node of x's shape (bool and every integer
 * dtype but i64 first widened to i64, as torch.cumsum: u8/i8 do not wrap). */
static kiln_tensor scan(int op, const char *name, kiln_tensor x, int axis, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  kiln_node *n;
  if (kiln_api_input(fe, x, name, loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  char sb[128];
  int a = n->rank ? kiln_api_axis(axis, n->rank) : (axis == 0 || axis == -1) ? 0 : -1;
  if (a < 0)
    return kiln_api_fail(fe, loc, "%s: axis %d is out of range for shape %s", name, axis,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  if (!kiln_dtype_is_float((kiln_dtype)n->dtype) && n->dtype != KILN_I64) n = kiln_api_cast(fe, n, KILN_I64, loc);
  if (!n || n->rank == 0) return kiln_fe_tensor(fe, n, loc); /* a 0-d scan is the value (torch) */
  int64_t attr = a;
  return kiln_fe_tensor(fe, kiln_fe_node(fe, op, (kiln_dtype)n->dtype, n->rank, n->shape, 1, &n, 1, &attr, 0.0, loc),
                        loc);
}

kiln_tensor kiln_cumsum_at(kiln_tensor x, int axis, kiln_loc loc) { return scan(KILN_OP_CUMSUM, "cumsum", x, axis, loc); }
kiln_tensor kiln_cumprod_at(kiln_tensor x, int axis, kiln_loc loc) {
  return scan(KILN_OP_CUMPROD, "cumprod", x, axis, loc);
}

static kiln_node *binop(kiln_frontend *fe, int op, kiln_node *a, kiln_node *b, kiln_loc loc) {
  if (!a || !b) return NULL;
  kiln_node *in[2] = {a, kiln_api_broadcast(fe, b, a->rank, a->shape, loc)};
  if (!in[1]) return NULL;
  return kiln_fe_node(fe, op, (kiln_dtype)a->dtype, a->rank, a->shape, 2, in, 0, NULL, 0.0, loc);
}
static kiln_node *unop(kiln_frontend *fe, int op, kiln_node *a, kiln_loc loc) {
  return a ? kiln_fe_node(fe, op, (kiln_dtype)a->dtype, a->rank, a->shape, 1, &a, 0, NULL, 0.0, loc) : NULL;
}

static kiln_tensor softmax(kiln_tensor x, int axis, int log_form, kiln_loc loc) {
  const char *name = log_form ? "log_softmax" : "softmax";
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  kiln_node *n;
  if (kiln_api_input(fe, x, name, loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  char sb[128];
  /* a 0-d x takes axis 0 or -1 (PyTorch): a softmax over its one value */
  int a = n->rank ? kiln_api_axis(axis, n->rank) : (axis == 0 || axis == -1) ? 0 : -1;
  if (a < 0)
    return kiln_api_fail(fe, loc, "%s: axis %d is out of range for shape %s", name, axis,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  if (n->rank && n->shape[a] == 0)
    return kiln_api_fail(fe, loc, "%s: axis %d of shape %s is empty", name, axis,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  /* integers, and 16-bit floats inside an autocast region, in f32 (an f32
   * result); 16-bit floats outside one in f32 too, rounded once to their
   * dtype at the end (PyTorch's CPU kernels): rounded after every node, a
   * bf16 softmax was up to 8 bf16 ulps off */
  kiln_dtype out_dt = (kiln_dtype)n->dtype;
  if (!kiln_dtype_is_float(out_dt) || (kiln_api_autocast(fe) != KILN_F32 && (out_dt == KILN_BF16 || out_dt == KILN_F16)))
    out_dt = KILN_F32;
  if (n->dtype == KILN_BF16 || n->dtype == KILN_F16 || !kiln_dtype_is_float((kiln_dtype)n->dtype))
    n = kiln_api_cast(fe, n, KILN_F32, loc);
  if (!n) return kiln_fe_tensor(fe, NULL, loc);
  uint64_t mask = n->rank ? 1ULL << a : 0;
  /* The max only shifts the exponent's argument: softmax and log_softmax do
   * not depend on it, so its gradient is exactly zero and is not built (as
   * PyTorch's softmax backward, p·(g − Σ g·p), has no max term). Built, it
   * was a third reduction in the forward row kernel (the count of elements
   * equal to the max) and a term of rounding noise on the max's element. */
  fe->no_grad_depth++;
  kiln_node *m = reduce_node(fe, KILN_OP_REDUCE_MAX, n, mask, 1, loc);
  fe->no_grad_depth--;
  kiln_node *sh = binop(fe, KILN_OP_SUB, n, m, loc);
  kiln_node *e = unop(fe, KILN_OP_EXP, sh, loc);
  kiln_node *s = e ? reduce_node(fe, KILN_OP_REDUCE_SUM, e, mask, 1, loc) : NULL;
  kiln_node *r = log_form ? binop(fe, KILN_OP_SUB, sh, unop(fe, KILN_OP_LOG, s, loc), loc)
                          : binop(fe, KILN_OP_DIV, e, s, loc);
  return kiln_fe_tensor(fe, kiln_api_cast(fe, r, out_dt, loc), loc);
}

kiln_tensor kiln_softmax_at(kiln_tensor x, int axis, kiln_loc loc) { return softmax(x, axis, 0, loc); }
kiln_tensor kiln_log_softmax_at(kiln_tensor x, int axis, kiln_loc loc) { return softmax(x, axis, 1, loc); }
