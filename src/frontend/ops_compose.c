/* Ops composed from the table's ops: clamp, argmin, stack, flip, roll,
 * tril/triu and reflect/replicate padding. Each checks its arguments itself
 * and names itself in errors (with the caller's file:line), then builds from
 * the public builders at the caller's location: their graphs fuse, and their
 * gradients are the sum of their parts' (the same as PyTorch's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/api.h"

#define FE_OR_NULL(fe)                           \
  kiln_frontend *fe = kiln_api_frontend_at(loc); \
  if (!fe) return (kiln_tensor){0, 0}

/* The input's node, or NULL after the error (a poisoned output is made). */
static kiln_node *input(kiln_frontend *fe, kiln_tensor x, const char *op, kiln_loc loc) {
  kiln_node *n;
  return kiln_api_input(fe, x, op, loc, NULL, &n) ? NULL : n;
}

/* What an op returns when it leaves its input as it is: a tensor of its own
 * on the input's value, as kiln_pad does for no padding (value semantics:
 * kiln_assign to one, or kiln_release of one, leaves the other alone).
 * Returning x itself made `y = roll(x, 0); kiln_assign(x, ...)` change y,
 * and releasing both a stale-handle error. */
static kiln_tensor unchanged(kiln_frontend *fe, kiln_node *n, kiln_loc loc) { return kiln_fe_tensor(fe, n, loc); }

/* A normalised axis, or -1 after an error naming op and the rank. */
static int axis_of(kiln_frontend *fe, const char *op, int axis, int rank, kiln_loc loc) {
  int a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    kiln_api_fail(fe, loc, "%s: axis %d is out of range for a tensor of rank %d", op, axis, rank);
    return -1;
  }
  return a;
}

/* torch.clamp: the value is minimum(maximum(x, lo), hi) (NaN stays NaN);
 * the gradient is torch.clamp's, g where lo <= x <= hi and 0 elsewhere and
 * at NaN, as a select of x where it is inside the bounds and of the clamped
 * value, computed without a gradient, where it is not. (The gradient of
 * maximum and minimum alone split g in halves at a bound exactly.) */
kiln_tensor kiln_clamp_at(kiln_tensor x, double lo, double hi, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = input(fe, x, "clamp", loc);
  if (!n) return kiln_fe_poison(fe, loc);
  if (lo > hi) return kiln_api_fail(fe, loc, "clamp: the lower bound %g is above the upper bound %g", lo, hi);
  int has_lo = !(isinf(lo) && lo < 0), has_hi = !(isinf(hi) && hi > 0);
  /* a bound maximum_c / minimum_c would refuse (1e20 on i32) is refused
   * here, naming clamp and not the inner op */
  double vl = lo, vh = hi;
  kiln_dtype dt = (kiln_dtype)n->dtype;
  if ((has_lo && kiln_api_check_value(kiln_api_scalar_dtype(dt, lo), &vl, "clamp", loc)) ||
      (has_hi && kiln_api_check_value(kiln_api_scalar_dtype(dt, hi), &vh, "clamp", loc)))
    return kiln_fe_poison(fe, loc);
  if (!has_lo && !has_hi) return unchanged(fe, n, loc);
  fe->no_grad_depth++;
  kiln_tensor v = has_lo ? kiln_maximum_c_at(x, lo, loc) : x;
  if (has_hi) v = kiln_minimum_c_at(v, hi, loc);
  fe->no_grad_depth--;
  kiln_tensor inside = has_lo ? kiln_ge_c_at(x, lo, loc) : kiln_le_c_at(x, hi, loc);
  if (has_lo && has_hi) inside = kiln_logical_and_at(inside, kiln_le_c_at(x, hi, loc), loc);
  return kiln_where_at(inside, x, v, loc);
}

/* argmin(x) = argmax of an order-reversing map: -x on floats (NaN stays the
 * pick, as torch.argmin), -1 - x on signed integers (no overflow at the
 * minimum), 255 - x on u8. */
kiln_tensor kiln_argmin_at(kiln_tensor x, int axis, bool keepdim, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = input(fe, x, "argmin", loc);
  if (!n) return kiln_fe_poison(fe, loc);
  int a = n->rank > 0 ? axis_of(fe, "argmin", axis, n->rank, loc) : 0;
  if (a < 0) return kiln_fe_poison(fe, loc);
  if (n->rank > 0 && n->shape[a] == 0) { /* named here: argmax's error would name argmax */
    char sb[128];
    return kiln_api_fail(fe, loc, "argmin: reduction over an empty axis of shape %s has no identity",
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  }
  kiln_dtype dt = (kiln_dtype)n->dtype;
  kiln_tensor r;
  if (kiln_dtype_is_float(dt)) {
    r = kiln_neg_at(x, loc);
  } else {
    kiln_tensor xi = dt == KILN_BOOL ? kiln_cast_at(x, KILN_I32, loc) : x;
    /* u8 has no -1: 255 - x reverses its order as -1 - x does the signed ones' */
    double top = dt == KILN_U8 ? 255.0 : -1.0;
    r = kiln_sub_at(kiln_constant_at(dt == KILN_BOOL ? KILN_I32 : dt, top, loc), xi, loc);
  }
  return kiln_argmax_at(r, axis, keepdim, loc);
}

kiln_tensor kiln_stack_at(int n, const kiln_tensor *xs, int axis, kiln_loc loc) {
  FE_OR_NULL(fe);
  if (n < 1 || !xs) return kiln_api_fail(fe, loc, "stack: needs at least one tensor (got %d)", n);
  kiln_node *first = input(fe, xs[0], "stack", loc);
  if (!first) return kiln_fe_poison(fe, loc);
  int rank = first->rank;
  if (rank + 1 > KILN_MAX_RANK) return kiln_api_fail(fe, loc, "stack: rank %d + 1 is above %d", rank, KILN_MAX_RANK);
  int a = axis_of(fe, "stack", axis, rank + 1, loc);
  if (a < 0) return kiln_fe_poison(fe, loc);
  char sa[128], sb[128];
  kiln_dtype dt = (kiln_dtype)first->dtype; /* concat's: the promoted dtype */
  for (int i = 1; i < n; i++) {
    kiln_node *m = input(fe, xs[i], "stack", loc);
    if (!m) return kiln_fe_poison(fe, loc);
    dt = kiln_api_promote(dt, (kiln_dtype)m->dtype);
    if (m->rank != rank || memcmp(m->shape, first->shape, sizeof(int64_t) * (size_t)rank))
      return kiln_api_fail(fe, loc, "stack: tensor %d has shape %s, tensor 0 has %s (all must be equal)", i,
                           kiln_fe_shape_str(m->rank, m->shape, sa, sizeof sa),
                           kiln_fe_shape_str(rank, first->shape, sb, sizeof sb));
  }
  int64_t s[KILN_MAX_RANK];
  for (int i = 0, j = 0; i <= rank; i++) s[i] = i == a ? n : first->shape[j++];
  if (kiln_api_result_fits(dt, rank + 1, s, "stack", loc)) return kiln_fe_poison(fe, loc);
  s[a] = 1;
  kiln_tensor parts[64], *p = n <= 64 ? parts : malloc(sizeof(kiln_tensor) * (size_t)n);
  if (!p) return kiln_api_fail(fe, loc, "stack: out of memory");
  for (int i = 0; i < n; i++) p[i] = kiln_reshape_at(xs[i], rank + 1, s, loc);
  kiln_tensor out = kiln_concat_at(n, p, a, loc);
  if (p != parts) free(p);
  return out;
}

/* x reversed along one (normalised) axis: an index_select by n-1 .. 0. */
static kiln_tensor flip1(kiln_tensor x, int a, int64_t size, kiln_loc loc) {
  if (size <= 1) return x;
  return kiln_index_select_at(x, a, kiln_arange_at(KILN_I64, (double)(size - 1), -1.0, -1.0, loc), loc);
}

kiln_tensor kiln_flip_at(kiln_tensor x, int n_axes, const int *axes, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = input(fe, x, "flip", loc);
  if (!n) return kiln_fe_poison(fe, loc);
  if (n_axes < 0 || (n_axes && !axes)) return kiln_api_fail(fe, loc, "flip: bad axis list (%d axes)", n_axes);
  unsigned seen = 0;
  for (int i = 0; i < n_axes; i++) {
    int a = axis_of(fe, "flip", axes[i], n->rank, loc);
    if (a < 0) return kiln_fe_poison(fe, loc);
    if (seen >> a & 1u) return kiln_api_fail(fe, loc, "flip: axis %d is named twice", axes[i]);
    seen |= 1u << a;
  }
  int rank = n->rank;
  int64_t s[KILN_MAX_RANK];
  memcpy(s, n->shape, sizeof(int64_t) * (size_t)rank);
  int changed = 0;
  for (int a = 0; a < rank; a++)
    if ((seen >> a & 1u) && s[a] > 1) {
      x = flip1(x, a, s[a], loc);
      changed = 1;
    }
  return changed ? x : unchanged(fe, n, loc);
}

kiln_tensor kiln_roll_at(kiln_tensor x, int64_t shift, int axis, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = input(fe, x, "roll", loc);
  if (!n) return kiln_fe_poison(fe, loc);
  int a = axis_of(fe, "roll", axis, n->rank, loc);
  if (a < 0) return kiln_fe_poison(fe, loc);
  int64_t size = n->shape[a];
  int64_t k = size ? ((shift % size) + size) % size : 0;
  if (k == 0) return unchanged(fe, n, loc);
  kiln_tensor parts[2] = {kiln_slice_at(x, a, size - k, size, 1, loc), kiln_slice_at(x, a, 0, size - k, 1, loc)};
  return kiln_concat_at(2, parts, a, loc);
}

/* keep = (col - row) <= k (lower) or >= k (upper) over the last two axes */
static kiln_tensor triangle(kiln_tensor x, int64_t k, int upper, const char *op, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = input(fe, x, op, loc);
  if (!n) return kiln_fe_poison(fe, loc);
  if (n->rank < 2) return kiln_api_fail(fe, loc, "%s: needs a tensor of rank >= 2 (got rank %d)", op, n->rank);
  int64_t rows = n->shape[n->rank - 2], cols = n->shape[n->rank - 1];
  const int64_t rs[2] = {rows, 1}, cs[2] = {1, cols};
  kiln_tensor r = kiln_reshape_at(kiln_arange_at(KILN_I64, 0, (double)rows, 1, loc), 2, rs, loc);
  kiln_tensor c = kiln_reshape_at(kiln_arange_at(KILN_I64, 0, (double)cols, 1, loc), 2, cs, loc);
  kiln_tensor d = kiln_sub_at(c, r, loc);
  /* col - row is in [1 - rows, cols - 1]: a k past it keeps all or nothing
   * (k = INT64_MAX was an error, as a constant beyond what a double holds) */
  k = k < -rows ? -rows : k > cols ? cols : k;
  kiln_tensor keep = upper ? kiln_ge_c_at(d, (double)k, loc) : kiln_le_c_at(d, (double)k, loc);
  kiln_tensor zero = kiln_constant_at((kiln_dtype)n->dtype, 0.0, loc);
  return kiln_where_at(keep, x, zero, loc);
}

kiln_tensor kiln_tril_at(kiln_tensor x, int64_t k, kiln_loc loc) { return triangle(x, k, 0, "tril", loc); }
kiln_tensor kiln_triu_at(kiln_tensor x, int64_t k, kiln_loc loc) { return triangle(x, k, 1, "triu", loc); }

/* The border of one axis: `count` elements before (lo) or after (hi) x along
 * a, copied from the edge (replicate) or mirrored without it (reflect). */
static kiln_tensor border(kiln_tensor x, int a, int rank, const int64_t *shape, int64_t count, int hi,
                          kiln_pad_mode mode, kiln_loc loc) {
  int64_t size = shape[a];
  if (mode == KILN_PAD_REPLICATE) {
    int64_t s[KILN_MAX_RANK];
    memcpy(s, shape, sizeof(int64_t) * (size_t)rank);
    s[a] = count;
    return kiln_expand_at(kiln_slice_at(x, a, hi ? size - 1 : 0, hi ? size : 1, 1, loc), rank, s, loc);
  }
  kiln_tensor edge = hi ? kiln_slice_at(x, a, size - 1 - count, size - 1, 1, loc) : kiln_slice_at(x, a, 1, count + 1, 1, loc);
  return flip1(edge, a, count, loc);
}

kiln_tensor kiln_pad_with_at(kiln_tensor x, const int64_t *lo, const int64_t *hi, kiln_pad_mode mode, double value,
                             kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = input(fe, x, "pad", loc);
  if (!n) return kiln_fe_poison(fe, loc);
  if (mode == KILN_PAD_CONSTANT) return kiln_pad_at(x, lo, hi, value, loc);
  const char *name = mode == KILN_PAD_REFLECT ? "pad (reflect)" : "pad (replicate)";
  if (mode != KILN_PAD_REFLECT && mode != KILN_PAD_REPLICATE)
    return kiln_api_fail(fe, loc, "pad: unknown mode %d", (int)mode);
  int rank = n->rank;
  static const int64_t none[KILN_MAX_RANK]; /* a NULL side pads nothing, as kiln_pad's */
  if (!lo) lo = none;
  if (!hi) hi = none;
  int64_t s[KILN_MAX_RANK];
  memcpy(s, n->shape, sizeof(int64_t) * (size_t)rank);
  for (int a = 0; a < rank; a++) {
    int64_t limit = mode == KILN_PAD_REFLECT ? s[a] - 1 : (s[a] ? INT64_MAX : 0);
    if (lo[a] < 0 || hi[a] < 0 || lo[a] > limit || hi[a] > limit)
      return kiln_api_fail(fe, loc, "%s: padding (%lld, %lld) on axis %d of size %lld: must be in [0, %lld]", name,
                           (long long)lo[a], (long long)hi[a], a, (long long)s[a], (long long)(limit < 0 ? 0 : limit));
  }
  int64_t out[KILN_MAX_RANK]; /* the result's shape, checked before the concats that make it */
  for (int a = 0; a < rank; a++)
    if (__builtin_add_overflow(s[a], lo[a], &out[a]) || __builtin_add_overflow(out[a], hi[a], &out[a])) out[a] = -1;
  if (kiln_api_result_fits((kiln_dtype)n->dtype, rank, out, name, loc)) return kiln_fe_poison(fe, loc);
  int changed = 0;
  for (int a = 0; a < rank; a++) {
    if (!lo[a] && !hi[a]) continue;
    changed = 1;
    kiln_tensor parts[3];
    int np = 0;
    if (lo[a]) parts[np++] = border(x, a, rank, s, lo[a], 0, mode, loc);
    parts[np++] = x;
    if (hi[a]) parts[np++] = border(x, a, rank, s, hi[a], 1, mode, loc);
    x = kiln_concat_at(np, parts, a, loc);
    s[a] += lo[a] + hi[a];
  }
  return changed ? x : unchanged(fe, n, loc);
}
