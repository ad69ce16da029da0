/* Sorting and scattering builders: sort, argsort, topk (an ARGSORT node,
 * the values a GATHER of it, so their gradient is GATHER's: g added back at
 * the positions the values came from), scatter and scatter_add (SCATTER
 * and SCATTER_ADD nodes), index_add and index_put (scatters of a 1-D index
 * broadcast over the other axes). */
#include <string.h>

#include "frontend/api.h"

#define FE_OR(fe, fail)                          \
  kiln_frontend *fe = kiln_api_frontend_at(loc); \
  if (!fe) return fail

static int is_index_dtype(int dt) { return dt == KILN_I32 || dt == KILN_I64; }

static int64_t numel(const kiln_node *n) {
  int64_t e = 1;
  for (int i = 0; i < n->rank; i++) e *= n->shape[i];
  return e;
}

/* The ARGSORT node of n along axis a (bool sorted as i32). */
static kiln_node *argsort_node(kiln_frontend *fe, kiln_node *n, int a, bool descending, kiln_loc loc) {
  if (n->dtype == KILN_BOOL) n = kiln_api_cast(fe, n, KILN_I32, loc);
  if (!n) return NULL;
  int64_t attr[2] = {a, descending ? 1 : 0};
  return kiln_fe_node(fe, KILN_OP_ARGSORT, KILN_I64, n->rank, n->shape, 1, &n, 2, attr, 0.0, loc);
}

/* Checks x and axis for op; the ARGSORT node's tensor (a rank-0 x is sorted
 * as [1] and the result reshaped back), or a poisoned tensor. */
static kiln_tensor sorted_positions(kiln_frontend *fe, const char *op, kiln_tensor x, int axis, bool descending,
                                    kiln_node **xn, kiln_loc loc) {
  kiln_node *n;
  if (kiln_api_input(fe, x, op, loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  *xn = n;
  int a = kiln_api_axis(axis, n->rank ? n->rank : 1);
  if (a < 0)
    return kiln_api_fail(fe, loc, "%s: axis %d is out of range for a tensor of rank %d", op, axis, n->rank);
  if (n->rank == 0) {
    int64_t one = 1;
    n = kiln_api_reshape(fe, n, 1, &one, loc);
  }
  kiln_node *s = n ? argsort_node(fe, n, a, descending, loc) : NULL;
  if (s && (*xn)->rank == 0) s = kiln_api_reshape(fe, s, 0, NULL, loc);
  return s ? kiln_fe_tensor(fe, s, loc) : kiln_fe_poison(fe, loc);
}

/* The values of sort / topk from the positions ix: a gather, or for a 0-d x
 * a tensor of its own on x's value (as torch.sort: returning x itself made
 * kiln_assign(x, ...) change the values, and releasing them release x);
 * poisoned when ix is (an error, e.g. topk's k, leaves no valid values). */
static kiln_tensor sorted_values(kiln_frontend *fe, kiln_tensor x, const kiln_node *n, int axis, kiln_tensor ix,
                                 kiln_loc loc) {
  if (!n || !kiln_is_valid(ix)) return ix;
  return n->rank == 0 ? kiln_fe_tensor(fe, (kiln_node *)n, loc) : kiln_gather_at(x, axis, ix, loc);
}

kiln_tensor kiln_argsort_at(kiln_tensor x, int axis, bool descending, kiln_loc loc) {
  FE_OR(fe, ((kiln_tensor){0, 0}));
  kiln_node *n = NULL;
  return sorted_positions(fe, "argsort", x, axis, descending, &n, loc);
}

void kiln_sort_at(kiln_tensor x, int axis, bool descending, kiln_tensor *values, kiln_tensor *indices, kiln_loc loc) {
  if (values) *values = (kiln_tensor){0, 0};
  if (indices) *indices = (kiln_tensor){0, 0};
  FE_OR(fe, );
  kiln_node *n = NULL;
  kiln_tensor ix = sorted_positions(fe, "sort", x, axis, descending, &n, loc);
  if (indices) *indices = ix;
  if (values) *values = sorted_values(fe, x, n, axis, ix, loc);
}

void kiln_topk_at(kiln_tensor x, int64_t k, int axis, bool largest, kiln_tensor *values, kiln_tensor *indices,
                  kiln_loc loc) {
  if (values) *values = (kiln_tensor){0, 0};
  if (indices) *indices = (kiln_tensor){0, 0};
  FE_OR(fe, );
  kiln_node *n = NULL;
  kiln_tensor ix = sorted_positions(fe, "topk", x, axis, largest, &n, loc);
  int a = n ? kiln_api_axis(axis, n->rank ? n->rank : 1) : -1;
  if (a >= 0) {
    int64_t dim = n->rank ? n->shape[a] : 1;
    char sa[128];
    if (k < (n->rank ? 0 : 1) || k > dim) /* a 0-d tensor is its own top 1 */
      ix = kiln_api_fail(fe, loc, "topk: k = %lld is out of range [%d, %lld] for axis %d of shape %s", (long long)k,
                         n->rank ? 0 : 1, (long long)dim, axis, kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
    else if (n->rank > 0)
      ix = kiln_slice_at(ix, axis, 0, k, 1, loc);
  }
  if (indices) *indices = ix;
  if (values) *values = sorted_values(fe, x, n, axis, ix, loc);
}

/* SCATTER / SCATTER_ADD of src into x along axis at idx, checked. */
static kiln_tensor scatter(int op, const char *name, kiln_tensor x, int axis, kiln_tensor idx, kiln_tensor src,
                           kiln_loc loc) {
  FE_OR(fe, ((kiln_tensor){0, 0}));
  kiln_node *n = NULL, *ix = NULL, *s = NULL;
  int r0 = kiln_api_input(fe, x, name, loc, NULL, &n), r1 = kiln_api_input(fe, idx, name, loc, NULL, &ix);
  int r2 = kiln_api_input(fe, src, name, loc, NULL, &s);
  if (r0 || r1 || r2) return kiln_fe_poison(fe, loc);
  char sa[128], sb[128], sc[128];
  int a = kiln_api_axis(axis, n->rank);
  if (a < 0 || n->rank == 0)
    return kiln_api_fail(fe, loc, "%s: axis %d is out of range for a tensor of rank %d", name, axis, n->rank);
  if (!is_index_dtype(ix->dtype))
    return kiln_api_fail(fe, loc, "%s: indices must be i32 or i64, got %s", name, kiln_dtype_name(ix->dtype));
  if (s->dtype != n->dtype)
    return kiln_api_fail(fe, loc, "%s: values are %s, the tensor %s (they must match)", name,
                         kiln_dtype_name(s->dtype), kiln_dtype_name(n->dtype));
  if (op == KILN_OP_SCATTER_ADD && n->dtype == KILN_BOOL)
    return kiln_api_fail(fe, loc, "%s: bool tensors cannot be added", name);
  int ok = ix->rank == n->rank && s->rank == n->rank;
  for (int d = 0; ok && d < n->rank; d++) ok = ix->shape[d] <= s->shape[d] && (d == a || ix->shape[d] <= n->shape[d]);
  if (!ok)
    return kiln_api_fail(fe, loc,
                         "%s: index shape %s must have the rank of the tensor %s and values %s, and fit in the values "
                         "(and the tensor, off axis %d)",
                         name, kiln_fe_shape_str(ix->rank, ix->shape, sa, sizeof sa),
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb),
                         kiln_fe_shape_str(s->rank, s->shape, sc, sizeof sc), axis);
  if (n->shape[a] == 0 && numel(ix) > 0)
    return kiln_api_fail(fe, loc, "%s: scattering into an empty axis %d of shape %s", name, axis,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  kiln_node *in[3] = {n, ix, s};
  int64_t attr = a;
  return kiln_fe_tensor(fe, kiln_fe_node(fe, op, (kiln_dtype)n->dtype, n->rank, n->shape, 3, in, 1, &attr, 0.0, loc),
                        loc);
}

kiln_tensor kiln_scatter_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_tensor src, kiln_loc loc) {
  return scatter(KILN_OP_SCATTER, "scatter", x, axis, idx, src, loc);
}

kiln_tensor kiln_scatter_add_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_tensor src, kiln_loc loc) {
  return scatter(KILN_OP_SCATTER_ADD, "scatter_add", x, axis, idx, src, loc);
}

/* The 1-D index idx of length m, laid along axis a and broadcast to the
 * shape (rank, shape) (shape[a] == m): the index of a scatter that writes
 * whole slices. */
static kiln_tensor slice_index(kiln_tensor idx, int a, int rank, const int64_t *shape, kiln_loc loc) {
  int64_t s1[KILN_MAX_RANK];
  for (int d = 0; d < rank; d++) s1[d] = d == a ? shape[a] : 1;
  return kiln_expand_at(kiln_reshape_at(idx, rank, s1, loc), rank, shape, loc);
}

/* Checks the 1-D index of index_add / index_put; its length, or -1. */
static int64_t index_1d(kiln_frontend *fe, const char *op, kiln_tensor idx, kiln_loc loc) {
  kiln_node *ix;
  if (kiln_api_input(fe, idx, op, loc, NULL, &ix)) return -1;
  char sa[128];
  if (ix->rank != 1 || !is_index_dtype(ix->dtype)) {
    kiln_api_fail(fe, loc, "%s: the index must be a 1-D i32 or i64 tensor, got %s %s", op, kiln_dtype_name(ix->dtype),
                  kiln_fe_shape_str(ix->rank, ix->shape, sa, sizeof sa));
    return -1;
  }
  return ix->shape[0];
}

kiln_tensor kiln_index_add_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_tensor src, kiln_loc loc) {
  FE_OR(fe, ((kiln_tensor){0, 0}));
  kiln_node *n, *s;
  if (kiln_api_input(fe, x, "index_add", loc, NULL, &n) || kiln_api_input(fe, src, "index_add", loc, NULL, &s))
    return kiln_fe_poison(fe, loc);
  int64_t m = index_1d(fe, "index_add", idx, loc);
  if (m < 0) return kiln_fe_poison(fe, loc);
  int a = kiln_api_axis(axis, n->rank);
  char sa[128], sb[128];
  int ok = a >= 0 && n->rank > 0 && s->rank == n->rank;
  for (int d = 0; ok && d < n->rank; d++) ok = s->shape[d] == (d == a ? m : n->shape[d]);
  if (!ok)
    return kiln_api_fail(fe, loc, "index_add: source shape %s must be the tensor's %s with axis %d of size %lld",
                         kiln_fe_shape_str(s->rank, s->shape, sa, sizeof sa),
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb), axis, (long long)m);
  int64_t sh[KILN_MAX_RANK];
  memcpy(sh, s->shape, sizeof(int64_t) * (size_t)s->rank);
  return scatter(KILN_OP_SCATTER_ADD, "index_add", x, a, slice_index(idx, a, s->rank, sh, loc), src, loc);
}

kiln_tensor kiln_index_put_at(kiln_tensor x, kiln_tensor idx, kiln_tensor values, bool accumulate, kiln_loc loc) {
  FE_OR(fe, ((kiln_tensor){0, 0}));
  kiln_node *n;
  if (kiln_api_input(fe, x, "index_put", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  int64_t m = index_1d(fe, "index_put", idx, loc);
  if (m < 0) return kiln_fe_poison(fe, loc);
  if (n->rank == 0) return kiln_api_fail(fe, loc, "index_put: cannot index a 0-d tensor");
  int64_t sh[KILN_MAX_RANK];
  memcpy(sh, n->shape, sizeof(int64_t) * (size_t)n->rank);
  sh[0] = m;
  kiln_node *vn;
  if (kiln_api_input(fe, values, "index_put", loc, NULL, &vn)) return kiln_fe_poison(fe, loc);
  int ok = vn->rank <= n->rank; /* NumPy broadcasting, as x[idx] = values */
  for (int i = 0; ok && i < vn->rank; i++) {
    int64_t d = vn->shape[vn->rank - 1 - i], want = sh[n->rank - 1 - i];
    ok = d == want || d == 1;
  }
  if (!ok) {
    char sa[128], sb[128], sc[128];
    return kiln_api_fail(fe, loc, "index_put: values of shape %s do not broadcast to %s (x %s indexed by %lld indices)",
                         kiln_fe_shape_str(vn->rank, vn->shape, sa, sizeof sa),
                         kiln_fe_shape_str(n->rank, sh, sb, sizeof sb),
                         kiln_fe_shape_str(n->rank, n->shape, sc, sizeof sc), (long long)m);
  }
  kiln_tensor v = kiln_expand_at(values, n->rank, sh, loc);
  const char *name = accumulate ? "index_put(accumulate)" : "index_put";
  return scatter(accumulate ? KILN_OP_SCATTER_ADD : KILN_OP_SCATTER, name, x, 0, slice_index(idx, 0, n->rank, sh, loc),
                 v, loc);
}
