/* Shape and indexing builders, and matmul. */
#include <string.h>

#include "frontend/api.h"

#define FE_OR_NULL(fe)                      \
  kiln_frontend *fe = kiln_api_frontend_at(loc); \
  if (!fe) return (kiln_tensor){0, 0}

static int64_t numel_of(int rank, const int64_t *s) {
  int64_t e = 1;
  for (int i = 0; i < rank; i++) e *= s[i];
  return e;
}

kiln_tensor kiln_reshape_at(kiln_tensor x, int rank, const int64_t *shape, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n;
  if (kiln_api_input(fe, x, "reshape", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  char sa[128], sb[128];
  if (rank < 0 || rank > KILN_MAX_RANK)
    return kiln_api_fail(fe, loc, "reshape: rank %d is out of range [0,%d]", rank, KILN_MAX_RANK);
  if (rank && !shape) return kiln_api_fail(fe, loc, "reshape: the shape of rank %d is NULL", rank);
  int64_t s[KILN_MAX_RANK];
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < rank; i++) {
    s[i] = shape[i];
    if (s[i] == -1 && infer < 0) {
      infer = i;
    } else if (s[i] < 0) {
      return kiln_api_fail(fe, loc, "reshape: bad dimension %lld in the target shape", (long long)s[i]);
    } else if (__builtin_mul_overflow(known, s[i], &known)) {
      return kiln_api_fail(fe, loc, "reshape: the target shape %s has more elements than int64 holds",
                           kiln_fe_shape_str(rank, shape, sb, sizeof sb));
    }
  }
  int64_t total = numel_of(n->rank, n->shape);
  if (infer >= 0) {
    if (known == 0 || total % known)
      return kiln_api_fail(fe, loc, "reshape: cannot infer -1 for shape %s from %s",
                           kiln_fe_shape_str(rank, shape, sb, sizeof sb),
                           kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
    s[infer] = total / known;
    known *= s[infer]; /* == total: no overflow */
  }
  if (known != total)
    return kiln_api_fail(fe, loc, "reshape: shape %s (%lld elements) does not match %s (%lld elements)",
                         kiln_fe_shape_str(rank, s, sb, sizeof sb), (long long)known,
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa), (long long)total);
  kiln_node *r = kiln_api_reshape(fe, n, rank, s, loc);
  return kiln_fe_tensor(fe, r, loc);
}

static kiln_node *permute_node(kiln_frontend *fe, kiln_node *n, const int *perm, kiln_loc loc) {
  int64_t s[KILN_MAX_RANK], attr[KILN_MAX_RANK];
  int identity = 1;
  for (int i = 0; i < n->rank; i++) {
    s[i] = n->shape[perm[i]];
    attr[i] = perm[i];
    identity &= perm[i] == i;
  }
  if (identity) return n;
  return kiln_fe_node(fe, KILN_OP_PERMUTE, (kiln_dtype)n->dtype, n->rank, s, 1, &n, n->rank, attr, 0.0, loc);
}

kiln_tensor kiln_permute_at(kiln_tensor x, const int *perm, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n;
  if (kiln_api_input(fe, x, "permute", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  int seen[KILN_MAX_RANK] = {0}, p[KILN_MAX_RANK];
  char sa[128];
  for (int i = 0; i < n->rank; i++) {
    int a = perm ? kiln_api_axis(perm[i], n->rank) : -1;
    if (a < 0 || seen[a])
      return kiln_api_fail(fe, loc, "permute: not a permutation of the %d axes of shape %s", n->rank,
                           kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
    seen[a] = 1;
    p[i] = a;
  }
  return kiln_fe_tensor(fe, permute_node(fe, n, p, loc), loc);
}

kiln_tensor kiln_transpose_at(kiln_tensor x, int axis0, int axis1, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n;
  if (kiln_api_input(fe, x, "transpose", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  int a = kiln_api_axis(axis0, n->rank), b = kiln_api_axis(axis1, n->rank);
  char sa[128];
  if (a < 0 || b < 0 || n->rank == 0)
    return kiln_api_fail(fe, loc, "transpose: axes %d, %d out of range for shape %s", axis0, axis1,
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
  int p[KILN_MAX_RANK];
  for (int i = 0; i < n->rank; i++) p[i] = i;
  p[a] = b;
  p[b] = a;
  return kiln_fe_tensor(fe, permute_node(fe, n, p, loc), loc);
}

kiln_tensor kiln_expand_at(kiln_tensor x, int rank, const int64_t *shape, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n;
  if (kiln_api_input(fe, x, "expand", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  char sa[128], sb[128];
  if (rank < 0 || rank > KILN_MAX_RANK || (rank && !shape))
    return kiln_api_fail(fe, loc, "expand: the target rank %d is out of range [0,%d] or its shape is NULL", rank,
                         KILN_MAX_RANK);
  int ok = rank >= n->rank;
  /* -1 keeps the dimension's size (torch.Tensor.expand); not for a new
   * leading dimension */
  int64_t want[KILN_MAX_RANK];
  for (int i = 0; ok && i < rank; i++) {
    int j = i - (rank - n->rank);
    want[i] = shape[i] == -1 && j >= 0 ? n->shape[j] : shape[i];
    if (want[i] < 0 || (j >= 0 && n->shape[j] != 1 && n->shape[j] != want[i])) ok = 0;
  }
  if (!ok)
    return kiln_api_fail(fe, loc, "expand: cannot broadcast shape %s to %s",
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa),
                         kiln_fe_shape_str(rank, shape, sb, sizeof sb));
  return kiln_fe_tensor(fe, kiln_api_broadcast(fe, n, rank, want, loc), loc);
}

kiln_tensor kiln_slice_at(kiln_tensor x, int axis, int64_t start, int64_t stop, int64_t step, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n;
  if (kiln_api_input(fe, x, "slice", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  char sa[128];
  int a = kiln_api_axis(axis, n->rank);
  if (a < 0 || n->rank == 0)
    return kiln_api_fail(fe, loc, "slice: axis %d out of range for shape %s", axis,
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
  if (step < 1) return kiln_api_fail(fe, loc, "slice: step must be >= 1, got %lld", (long long)step);
  int64_t d = n->shape[a];
  if (start < 0) start += d;
  if (stop < 0) stop += d;
  start = start < 0 ? 0 : (start > d ? d : start);
  stop = stop < start ? start : (stop > d ? d : stop);
  int64_t len = stop == start ? 0 : 1 + (stop - start - 1) / step; /* no overflow for any step */
  int64_t s[KILN_MAX_RANK], attr[2 * KILN_MAX_RANK];
  memcpy(s, n->shape, sizeof s);
  s[a] = len;
  for (int i = 0; i < n->rank; i++) {
    attr[i] = i == a ? start : 0;
    attr[n->rank + i] = i == a ? step : 1;
  }
  if (len == d && step == 1) return kiln_fe_tensor(fe, n, loc);
  return kiln_fe_tensor(fe, kiln_fe_node(fe, KILN_OP_SLICE, (kiln_dtype)n->dtype, n->rank, s, 1, &n, 2 * n->rank,
                                         attr, 0.0, loc),
                        loc);
}

kiln_tensor kiln_concat_at(int n_in, const kiln_tensor *xs, int axis, kiln_loc loc) {
  FE_OR_NULL(fe);
  if (n_in < 1 || !xs) return kiln_api_fail(fe, loc, "concat: needs at least one tensor");
  kiln_node *stackbuf[16];
  kiln_node **in = n_in <= 16 ? stackbuf : kiln_arena_alloc(&fe->arena, sizeof(kiln_node *) * (size_t)n_in);
  if (!in) return kiln_fe_tensor(fe, NULL, loc);
  int poisoned = 0;
  kiln_dtype dt = KILN_BOOL;
  for (int i = 0; i < n_in; i++) {
    int r = kiln_api_input(fe, xs[i], "concat", loc, NULL, &in[i]);
    if (r) poisoned = 1;
    else dt = kiln_api_promote(dt, (kiln_dtype)in[i]->dtype);
  }
  if (poisoned) return kiln_fe_poison(fe, loc);
  int rank = in[0]->rank;
  int a = kiln_api_axis(axis, rank);
  char sa[128], sb[128];
  if (a < 0 || rank == 0)
    return kiln_api_fail(fe, loc, "concat: axis %d out of range for shape %s", axis,
                         kiln_fe_shape_str(rank, in[0]->shape, sa, sizeof sa));
  int64_t s[KILN_MAX_RANK];
  memcpy(s, in[0]->shape, sizeof s);
  s[a] = 0;
  for (int i = 0; i < n_in; i++) {
    int ok = in[i]->rank == rank;
    for (int d = 0; ok && d < rank; d++) ok = d == a || in[i]->shape[d] == in[0]->shape[d];
    if (!ok)
      return kiln_api_fail(fe, loc, "concat: shapes %s and %s differ outside axis %d",
                           kiln_fe_shape_str(rank, in[0]->shape, sa, sizeof sa),
                           kiln_fe_shape_str(in[i]->rank, in[i]->shape, sb, sizeof sb), a);
    if (__builtin_add_overflow(s[a], in[i]->shape[a], &s[a]))
      return kiln_api_fail(fe, loc, "concat: the sizes along axis %d overflow int64", axis);
    in[i] = kiln_api_cast(fe, in[i], dt, loc);
    if (!in[i]) return kiln_fe_tensor(fe, NULL, loc);
  }
  if (n_in == 1) return kiln_fe_tensor(fe, in[0], loc);
  int64_t attr = a;
  return kiln_fe_tensor(fe, kiln_fe_node(fe, KILN_OP_CONCAT, dt, rank, s, n_in, in, 1, &attr, 0.0, loc), loc);
}

kiln_tensor kiln_pad_at(kiln_tensor x, const int64_t *lo, const int64_t *hi, double value, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n;
  if (kiln_api_input(fe, x, "pad", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  if (kiln_api_check_value((kiln_dtype)n->dtype, &value, "pad", loc)) return kiln_fe_poison(fe, loc);
  int64_t s[KILN_MAX_RANK], attr[2 * KILN_MAX_RANK];
  /* negative padding removes elements (F.pad): a slice, then the rest */
  int crop = 0;
  for (int i = 0; i < n->rank; i++) {
    int64_t l = lo ? lo[i] : 0, h = hi ? hi[i] : 0, d = n->shape[i];
    if (l >= 0 && h >= 0) continue;
    if (l < -d || h < -d || (l < 0 ? -l : 0) + (h < 0 ? -h : 0) > d) {
      char sa[128];
      return kiln_api_fail(fe, loc, "pad: padding %lld and %lld on axis %d of %s removes more than the axis has",
                           (long long)l, (long long)h, i, kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
    }
    crop = 1;
  }
  if (crop) {
    kiln_tensor y = x;
    for (int i = 0; i < n->rank; i++) {
      int64_t l = lo ? lo[i] : 0, h = hi ? hi[i] : 0;
      s[i] = l > 0 ? l : 0;
      attr[i] = h > 0 ? h : 0;
      if (l < 0 || h < 0) y = kiln_slice_at(y, i, l < 0 ? -l : 0, n->shape[i] - (h < 0 ? -h : 0), 1, loc);
    }
    return kiln_pad_at(y, s, attr, value, loc);
  }
  int any = 0;
  for (int i = 0; i < n->rank; i++) {
    int64_t l = lo ? lo[i] : 0, h = hi ? hi[i] : 0;
    if (__builtin_add_overflow(n->shape[i], l, &s[i]) || __builtin_add_overflow(s[i], h, &s[i])) {
      char sa[128];
      return kiln_api_fail(fe, loc, "pad: axis %d of %s padded by %lld and %lld overflows int64", i,
                           kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa), (long long)l, (long long)h);
    }
    attr[i] = l;
    attr[n->rank + i] = h;
    any |= l || h;
  }
  if (!any) return kiln_fe_tensor(fe, n, loc);
  return kiln_fe_tensor(fe, kiln_fe_node(fe, KILN_OP_PAD, (kiln_dtype)n->dtype, n->rank, s, 1, &n, 2 * n->rank,
                                         attr, value, loc),
                        loc);
}

static int is_index_dtype(int dt) { return dt == KILN_I32 || dt == KILN_I64; }

kiln_tensor kiln_index_select_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = NULL, *ix = NULL;
  int r0 = kiln_api_input(fe, x, "index_select", loc, NULL, &n);
  int r1 = kiln_api_input(fe, idx, "index_select", loc, NULL, &ix);
  if (r0 || r1) return kiln_fe_poison(fe, loc);
  char sa[128];
  int a = kiln_api_axis(axis, n->rank);
  if (a < 0 || n->rank == 0)
    return kiln_api_fail(fe, loc, "index_select: axis %d out of range for shape %s", axis,
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
  if (!is_index_dtype(ix->dtype))
    return kiln_api_fail(fe, loc, "index_select: indices must be i32 or i64, got %s", kiln_dtype_name(ix->dtype));
  int rank = n->rank - 1 + ix->rank;
  if (rank > KILN_MAX_RANK) return kiln_api_fail(fe, loc, "index_select: result rank %d > %d", rank, KILN_MAX_RANK);
  int64_t s[KILN_MAX_RANK];
  int k = 0;
  for (int i = 0; i < a; i++) s[k++] = n->shape[i];
  for (int i = 0; i < ix->rank; i++) s[k++] = ix->shape[i];
  for (int i = a + 1; i < n->rank; i++) s[k++] = n->shape[i];
  if (n->shape[a] == 0 && numel_of(ix->rank, ix->shape) > 0)
    return kiln_api_fail(fe, loc, "index_select: indexing into an empty axis %d of shape %s", a,
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
  kiln_node *in[2] = {n, ix};
  int64_t attr = a;
  return kiln_fe_tensor(
      fe, kiln_fe_node(fe, KILN_OP_INDEX_SELECT, (kiln_dtype)n->dtype, rank, s, 2, in, 1, &attr, 0.0, loc), loc);
}

kiln_tensor kiln_gather_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *n = NULL, *ix = NULL;
  int r0 = kiln_api_input(fe, x, "gather", loc, NULL, &n);
  int r1 = kiln_api_input(fe, idx, "gather", loc, NULL, &ix);
  if (r0 || r1) return kiln_fe_poison(fe, loc);
  char sa[128], sb[128];
  int a = kiln_api_axis(axis, n->rank);
  int ok = a >= 0 && n->rank > 0 && ix->rank == n->rank;
  for (int i = 0; ok && i < n->rank; i++) ok = i == a || ix->shape[i] <= n->shape[i];
  if (!ok)
    return kiln_api_fail(fe, loc, "gather: index shape %s does not fit data shape %s along axis %d",
                         kiln_fe_shape_str(ix->rank, ix->shape, sb, sizeof sb),
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa), axis);
  if (!is_index_dtype(ix->dtype))
    return kiln_api_fail(fe, loc, "gather: indices must be i32 or i64, got %s", kiln_dtype_name(ix->dtype));
  if (n->shape[a] == 0 && numel_of(ix->rank, ix->shape) > 0)
    return kiln_api_fail(fe, loc, "gather: indexing into an empty axis of shape %s",
                         kiln_fe_shape_str(n->rank, n->shape, sa, sizeof sa));
  kiln_node *in[2] = {n, ix};
  int64_t attr = a;
  return kiln_fe_tensor(
      fe, kiln_fe_node(fe, KILN_OP_GATHER, (kiln_dtype)n->dtype, ix->rank, ix->shape, 2, in, 1, &attr, 0.0, loc), loc);
}

kiln_tensor kiln_one_hot_at(kiln_tensor idx, int64_t depth, kiln_dtype dt, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *ix;
  if (kiln_api_input(fe, idx, "one_hot", loc, NULL, &ix)) return kiln_fe_poison(fe, loc);
  if (!is_index_dtype(ix->dtype))
    return kiln_api_fail(fe, loc, "one_hot: indices must be i32 or i64, got %s", kiln_dtype_name(ix->dtype));
  if (depth < 0 || ix->rank + 1 > KILN_MAX_RANK || (unsigned)dt >= KILN_DTYPE_COUNT)
    return kiln_api_fail(fe, loc, "one_hot: bad depth %lld or dtype", (long long)depth);
  int rank = ix->rank + 1;
  int64_t s[KILN_MAX_RANK], s1[KILN_MAX_RANK];
  memcpy(s, ix->shape, sizeof(int64_t) * ix->rank);
  memcpy(s1, ix->shape, sizeof(int64_t) * ix->rank);
  s[rank - 1] = depth;
  s1[rank - 1] = 1;
  if (!kiln_fe_shape_ok(KILN_I64, rank, s) || !kiln_fe_shape_ok(dt, rank, s)) {
    char sa[160];
    return kiln_api_fail(fe, loc, "one_hot: depth %lld for indices %s gives more elements or bytes than int64 holds",
                         (long long)depth, kiln_fe_shape_str(ix->rank, ix->shape, sa, sizeof sa));
  }
  int64_t ax = rank - 1;
  kiln_node *io = kiln_fe_node(fe, KILN_OP_IOTA, (kiln_dtype)ix->dtype, rank, s, 0, NULL, 1, &ax, 0.0, loc);
  kiln_node *e = kiln_api_broadcast(fe, kiln_api_reshape(fe, ix, rank, s1, loc), rank, s, loc);
  if (!io || !e) return kiln_fe_tensor(fe, NULL, loc);
  kiln_node *in[2] = {e, io};
  kiln_node *eq = kiln_fe_node(fe, KILN_OP_EQ, KILN_BOOL, rank, s, 2, in, 0, NULL, 0.0, loc);
  return kiln_fe_tensor(fe, kiln_api_cast(fe, eq, dt, loc), loc);
}

/* The product when it holds no values (an empty batch, M or N) or only
 * zeros (K = 0): 0 · (Σa + Σb), broadcast to the product's shape. The
 * batched lowering below would broadcast each operand to the whole batch
 * first, and for an empty product that batch may be huge (a [1, 1] times a
 * [2^31, 1, 0] is empty, yet a[2^31, 1, 1] would be computed): nothing is
 * computed beyond the operands themselves. The sums keep a and b in the
 * graph, so their gradients are zeros (as in PyTorch), not missing. */
static kiln_node *zero_product(kiln_frontend *fe, kiln_node *na, kiln_node *nb, kiln_dtype dt, int rank,
                               const int64_t *so, kiln_loc loc) {
  int64_t ones[KILN_MAX_RANK];
  for (int i = 0; i < KILN_MAX_RANK; i++) ones[i] = 1;
  kiln_node *op[2] = {na, nb}, *sum[2];
  for (int k = 0; k < 2; k++) {
    int64_t mask = (int64_t)((1ULL << op[k]->rank) - 1);
    sum[k] = kiln_fe_node(fe, KILN_OP_REDUCE_SUM, dt, op[k]->rank, ones, 1, &op[k], 1, &mask, 0.0, loc);
    sum[k] = kiln_api_reshape(fe, sum[k], rank, ones, loc);
    if (!sum[k]) return NULL;
  }
  kiln_node *s = kiln_fe_node(fe, KILN_OP_ADD, dt, rank, ones, 2, sum, 0, NULL, 0.0, loc);
  kiln_node *in[2] = {s, kiln_api_const(fe, dt, rank, ones, 0.0, loc)};
  if (!in[0] || !in[1]) return NULL;
  kiln_node *z = kiln_fe_node(fe, KILN_OP_MUL, dt, rank, ones, 2, in, 0, NULL, 0.0, loc);
  return kiln_api_broadcast(fe, z, rank, so, loc);
}

/* [..., M, K] @ [K, N]: the batch dims fold into M, so the product is one
 * GEMM with M = batch·M (as PyTorch's matmul does), and the weight's
 * gradient is one GEMM over all rows instead of a GEMM per batch entry
 * followed by a sum over the batch. b1: b was 1-D (N = 1 is dropped). */
static kiln_tensor matmul_fold_batch(kiln_frontend *fe, kiln_node *na, kiln_node *nb, kiln_dtype dt, int b1,
                                     kiln_loc loc) {
  int64_t K = na->shape[na->rank - 1], N = nb->shape[nb->rank - 1];
  int64_t rows = 1;
  for (int i = 0; i < na->rank - 1; i++) rows *= na->shape[i];
  int64_t s2[2] = {rows, K}, os[KILN_MAX_RANK];
  kiln_node *a2 = kiln_api_reshape(fe, na, 2, s2, loc);
  if (!a2) return kiln_fe_tensor(fe, NULL, loc);
  int64_t so2[2] = {rows, N};
  kiln_node *in2[2] = {a2, nb};
  kiln_node *r = kiln_fe_node(fe, KILN_OP_MATMUL, dt, 2, so2, 2, in2, 0, NULL, 0.0, loc);
  int orank = na->rank - (b1 ? 1 : 0);
  memcpy(os, na->shape, sizeof(int64_t) * (size_t)(na->rank - 1));
  if (!b1) os[na->rank - 1] = N;
  if (r) r = kiln_api_reshape(fe, r, orank, os, loc);
  return kiln_fe_tensor(fe, r, loc);
}

/* A matmul operand in dtype dt. A transposed operand (a Linear layer's
 * x @ Wᵀ) is cast before its transpose: cast(permute(W)) is permute(cast(W)),
 * value for value, but the cast then reads and writes W in its own layout
 * (contiguous, vectorised; through the permute it read with a stride), the
 * GEMM reads the transpose for free, and the weight's gradient arrives in
 * W's layout (autograd.c, send_input_grad), so the update that follows
 * reads it contiguously too. */
static kiln_node *operand_cast(kiln_frontend *fe, kiln_node *n, kiln_dtype dt, kiln_loc loc) {
  if (!n || n->dtype == dt || n->op != KILN_OP_PERMUTE || n->n_iattr < n->rank) return kiln_api_cast(fe, n, dt, loc);
  int perm[KILN_MAX_RANK];
  for (int i = 0; i < n->rank; i++) perm[i] = (int)n->iattr[i];
  kiln_node *c = kiln_api_cast(fe, n->in[0], dt, loc);
  return c ? permute_node(fe, c, perm, loc) : NULL;
}

/* [M, K] @ [..., K, N] computed as (bᵀ folded into rows) @ aᵀ, transposed
 * back (see kiln_matmul_at for when). a1: a was 1-D (M = 1 is dropped). */
static kiln_tensor matmul_transposed(kiln_frontend *fe, kiln_node *na, kiln_node *nb, kiln_dtype dt, int a1,
                                     kiln_loc loc) {
  int r = nb->rank;
  int64_t M = na->shape[0], K = na->shape[1], N = nb->shape[r - 1];
  int perm[KILN_MAX_RANK], p2[2] = {1, 0};
  for (int i = 0; i < r; i++) perm[i] = i;
  perm[r - 2] = r - 1, perm[r - 1] = r - 2;
  int64_t rows = 1;
  for (int i = 0; i < r - 2; i++) rows *= nb->shape[i];
  rows *= N; /* the shape of b, already checked: no overflow */
  int64_t s2[2] = {rows, K}, so2[2] = {rows, M}, os[KILN_MAX_RANK];
  kiln_node *in2[2] = {kiln_api_reshape(fe, permute_node(fe, nb, perm, loc), 2, s2, loc),
                       permute_node(fe, na, p2, loc)};
  if (!in2[0] || !in2[1]) return kiln_fe_tensor(fe, NULL, loc);
  kiln_node *t = kiln_fe_node(fe, KILN_OP_MATMUL, dt, 2, so2, 2, in2, 0, NULL, 0.0, loc);
  memcpy(os, nb->shape, sizeof(int64_t) * (size_t)(r - 2));
  os[r - 2] = N;
  if (a1) /* [..., N, 1] is the result [..., N] */
    return kiln_fe_tensor(fe, kiln_api_reshape(fe, t, r - 1, os, loc), loc);
  os[r - 1] = M;
  t = kiln_api_reshape(fe, t, r, os, loc);
  return kiln_fe_tensor(fe, t ? permute_node(fe, t, perm, loc) : NULL, loc);
}

/* The operands' shapes as the user gave them, written out for a message
 * only when there is one (a matmul that succeeds formats nothing). */
typedef struct mm_shapes {
  int ra, rb;
  int64_t a[KILN_MAX_RANK], b[KILN_MAX_RANK];
  char sa[128], sb[128];
} mm_shapes;

static const char *mm_sa(mm_shapes *m) { return kiln_fe_shape_str(m->ra, m->a, m->sa, sizeof m->sa); }
static const char *mm_sb(mm_shapes *m) { return kiln_fe_shape_str(m->rb, m->b, m->sb, sizeof m->sb); }

/* The general case: batch dims broadcast against each other; the dims
 * added for 1-D operands (a1, b1) dropped from the result. */
static kiln_tensor matmul_broadcast(kiln_frontend *fe, kiln_node *na, kiln_node *nb, kiln_dtype dt, int a1, int b1,
                                    mm_shapes *ms, kiln_loc loc) {
  int64_t M = na->shape[na->rank - 2], K = na->shape[na->rank - 1], N = nb->shape[nb->rank - 1];
  int br, bad;
  int64_t bs[KILN_MAX_RANK];
  if (kiln_api_broadcast_shape(na->rank - 2, na->shape, nb->rank - 2, nb->shape, &br, bs, &bad))
    return kiln_api_fail(fe, loc, "matmul: batch dimensions of %s and %s cannot be broadcast", mm_sa(ms), mm_sb(ms));
  int64_t sa2[KILN_MAX_RANK], sb2[KILN_MAX_RANK], so[KILN_MAX_RANK];
  memcpy(sa2, bs, sizeof(int64_t) * br);
  memcpy(sb2, bs, sizeof(int64_t) * br);
  memcpy(so, bs, sizeof(int64_t) * br);
  sa2[br] = M, sa2[br + 1] = K;
  sb2[br] = K, sb2[br + 1] = N;
  so[br] = M, so[br + 1] = N;
  int empty = K == 0;
  for (int i = 0; i < br + 2; i++) empty |= so[i] == 0;
  kiln_node *r;
  if (empty) {
    if (!kiln_fe_shape_ok(dt, br + 2, so)) {
      char sr[160];
      return kiln_api_fail(fe, loc,
                           "matmul: the result shape %s (%s) has a negative size or more elements or bytes than int64 "
                           "holds (inputs %s, %s)",
                           kiln_fe_shape_str(br + 2, so, sr, sizeof sr), kiln_dtype_name(dt), mm_sa(ms), mm_sb(ms));
    }
    r = zero_product(fe, na, nb, dt, br + 2, so, loc);
  } else {
    kiln_node *in[2] = {kiln_api_broadcast(fe, na, br + 2, sa2, loc), kiln_api_broadcast(fe, nb, br + 2, sb2, loc)};
    if (!in[0] || !in[1]) return kiln_fe_tensor(fe, NULL, loc);
    r = kiln_fe_node(fe, KILN_OP_MATMUL, dt, br + 2, so, 2, in, 0, NULL, 0.0, loc);
  }
  if (!r) return kiln_fe_tensor(fe, NULL, loc);
  /* drop the dims added for 1-D operands */
  int orank = br + 2;
  int64_t fs[KILN_MAX_RANK];
  int k = 0;
  for (int i = 0; i < br; i++) fs[k++] = so[i];
  if (!a1) fs[k++] = M;
  if (!b1) fs[k++] = N;
  if (k != orank) r = kiln_api_reshape(fe, r, k, fs, loc);
  return kiln_fe_tensor(fe, r, loc);
}

kiln_tensor kiln_matmul_at(kiln_tensor a, kiln_tensor b, kiln_loc loc) {
  FE_OR_NULL(fe);
  kiln_node *na = NULL, *nb = NULL;
  int r0 = kiln_api_input(fe, a, "matmul", loc, NULL, &na);
  int r1 = kiln_api_input(fe, b, "matmul", loc, NULL, &nb);
  if (r0 || r1) return kiln_fe_poison(fe, loc);
  mm_shapes ms = {.ra = na->rank, .rb = nb->rank};
  memcpy(ms.a, na->shape, sizeof ms.a[0] * na->rank);
  memcpy(ms.b, nb->shape, sizeof ms.b[0] * nb->rank);
  if (na->rank == 0 || nb->rank == 0)
    return kiln_api_fail(fe, loc, "matmul: scalar operand (shapes %s and %s)", mm_sa(&ms), mm_sb(&ms));
  kiln_dtype dt = kiln_api_promote((kiln_dtype)na->dtype, (kiln_dtype)nb->dtype);
  /* integers accumulate in i32 (u8, i8, i32) or i64, as torch.matmul on
   * integer CPU tensors: the product of u8 operands is an i32 tensor */
  if (dt == KILN_BOOL)
    return kiln_api_fail(fe, loc, "matmul: not defined for bool operands (shapes %s and %s)", mm_sa(&ms), mm_sb(&ms));
  if (!kiln_dtype_is_float(dt) && dt != KILN_I64) dt = KILN_I32;
  kiln_dtype ac = kiln_api_autocast(fe); /* f32/bf16/f16 operands in the region's dtype */
  if (ac != KILN_F32 && kiln_dtype_is_float(dt) && dt != KILN_F64) dt = ac;
  na = operand_cast(fe, na, dt, loc);
  nb = operand_cast(fe, nb, dt, loc);
  if (!na || !nb) return kiln_fe_tensor(fe, NULL, loc); /* a cast's bytes overflow: recorded */
  int a1 = na->rank == 1, b1 = nb->rank == 1;
  int64_t s[KILN_MAX_RANK];
  if (a1) {
    s[0] = 1;
    s[1] = na->shape[0];
    na = kiln_api_reshape(fe, na, 2, s, loc);
  }
  if (b1) {
    s[0] = nb->shape[0];
    s[1] = 1;
    nb = kiln_api_reshape(fe, nb, 2, s, loc);
  }
  if (!na || !nb) return kiln_fe_tensor(fe, NULL, loc);
  int64_t M = na->shape[na->rank - 2], K = na->shape[na->rank - 1];
  int64_t K2 = nb->shape[nb->rank - 2], N = nb->shape[nb->rank - 1];
  if (K != K2) return kiln_api_fail(fe, loc, "matmul: inner dimensions differ (%lld vs %lld) for shapes %s and %s",
                                    (long long)K, (long long)K2, mm_sa(&ms), mm_sb(&ms));
  if (na->rank > 2 && nb->rank == 2) return matmul_fold_batch(fe, na, nb, dt, b1, loc);
  /* [M, K] @ [..., K, N]: broadcasting a to the whole batch would compute
   * B·M·K values (a [512, 512] times a [512, 512, 1]: 512 MiB for 1 MiB
   * operands). When that is more than b and the result together, compute
   * (bᵀ folded into rows) @ aᵀ and transpose back, as PyTorch's matmul
   * does: memory bounded by the operands and the result. */
  if (na->rank == 2 && nb->rank > 2) {
    double B = 1;
    for (int i = 0; i < nb->rank - 2; i++) B *= (double)nb->shape[i];
    if (B * (double)M * (double)K > B * (double)N * ((double)K + (double)M))
      return matmul_transposed(fe, na, nb, dt, a1, loc);
  }
  return matmul_broadcast(fe, na, nb, dt, a1, b1, &ms, loc);
}
