/* Elementwise op builders: broadcasting, dtype promotion, scalar forms. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frontend/api.h"

int kiln_api_input(kiln_frontend *fe, kiln_tensor t, const char *op, kiln_loc loc, kiln_tslot **slot,
                   kiln_node **node) {
  kiln_tslot *s = kiln_fe_slot(fe, t, op, loc);
  if (!s) return -1;
  if (slot) *slot = s;
  if (s->poisoned) return 1;
  kiln_node *n = kiln_fe_node_of(fe, s);
  if (!n) {
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "%s: out of memory", op);
    return -1;
  }
  *node = n;
  return 0;
}

kiln_tensor kiln_api_fail(kiln_frontend *fe, kiln_loc loc, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s", msg);
  return kiln_fe_poison(fe, loc);
}

int kiln_api_result_fits(kiln_dtype dt, int rank, const int64_t *shape, const char *op, kiln_loc loc) {
  if (kiln_fe_shape_ok(dt, rank, shape)) return 0;
  char sb[160];
  kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: the result shape %s (%s) has more elements or bytes than int64 holds",
             op, kiln_fe_shape_str(rank, shape, sb, sizeof sb), kiln_dtype_name(dt));
  return -1;
}

kiln_dtype kiln_api_promote(kiln_dtype a, kiln_dtype b) {
  /* category * 10 + width rank: u8/i8 and bf16/f16 tie */
  static const int rank_of[KILN_DTYPE_COUNT] = {[KILN_BOOL] = 0, [KILN_U8] = 11, [KILN_I8] = 11, [KILN_I32] = 12,
                                                [KILN_I64] = 13, [KILN_BF16] = 21, [KILN_F16] = 21,
                                                [KILN_F32] = 22, [KILN_F64] = 23};
  if (a == b) return a;
  if (rank_of[a] == rank_of[b]) return rank_of[a] > 20 ? KILN_F32 : KILN_I32;
  return rank_of[a] > rank_of[b] ? a : b;
}

int kiln_api_axis(int axis, int rank) {
  int a = axis < 0 ? axis + rank : axis;
  return (a < 0 || a >= (rank ? rank : 1)) ? -1 : a;
}

kiln_node *kiln_api_cast(kiln_frontend *fe, kiln_node *n, kiln_dtype dt, kiln_loc loc) {
  if (!n || n->dtype == dt) return n;
  return kiln_fe_node(fe, KILN_OP_CAST, dt, n->rank, n->shape, 1, &n, 0, NULL, 0.0, loc);
}

kiln_node *kiln_api_reshape(kiln_frontend *fe, kiln_node *n, int rank, const int64_t *shape, kiln_loc loc) {
  if (!n) return NULL;
  if (n->rank == rank && !memcmp(n->shape, shape, sizeof(int64_t) * (size_t)rank)) return n;
  return kiln_fe_node(fe, KILN_OP_RESHAPE, (kiln_dtype)n->dtype, rank, shape, 1, &n, 0, NULL, 0.0, loc);
}

kiln_node *kiln_api_broadcast(kiln_frontend *fe, kiln_node *n, int rank, const int64_t *shape, kiln_loc loc) {
  if (!n) return NULL;
  if (n->rank == rank && !memcmp(n->shape, shape, sizeof(int64_t) * (size_t)rank)) return n;
  /* a CONST is a uniform fill of any shape: one node instead of three */
  if (n->op == KILN_OP_CONST) return kiln_api_const(fe, (kiln_dtype)n->dtype, rank, shape, n->fattr, loc);
  if (n->rank < rank) {
    int64_t s[KILN_MAX_RANK];
    int pad = rank - n->rank;
    for (int i = 0; i < rank; i++) s[i] = i < pad ? 1 : n->shape[i - pad];
    n = kiln_api_reshape(fe, n, rank, s, loc);
    if (!n) return NULL;
    if (!memcmp(n->shape, shape, sizeof(int64_t) * (size_t)rank)) return n;
  }
  return kiln_fe_node(fe, KILN_OP_EXPAND, (kiln_dtype)n->dtype, rank, shape, 1, &n, 0, NULL, 0.0, loc);
}

int kiln_api_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out,
                             int *bad_axis) {
  int r = ra > rb ? ra : rb;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - ra), ib = i - (r - rb);
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else {
      *bad_axis = i;
      return -1;
    }
  }
  *rank = r;
  return 0;
}

int kiln_api_check_value(kiln_dtype dt, double *pv, const char *op, kiln_loc loc) {
  double v = *pv;
  static const double lo[KILN_DTYPE_COUNT] = {[KILN_I32] = -2147483648.0, [KILN_I64] = -9223372036854775808.0,
                                              [KILN_U8] = 0.0, [KILN_I8] = -128.0};
  static const double hi[KILN_DTYPE_COUNT] = {[KILN_I32] = 2147483647.0, [KILN_I64] = 9223372036854775807.0,
                                              [KILN_U8] = 255.0, [KILN_I8] = 127.0};
  if (kiln_dtype_is_float(dt)) return 0;
  int ok = isfinite(v);
  if (ok && dt != KILN_BOOL) {
    v = trunc(v); /* C conversion, as torch.full(..., 2.5, dtype=int32) gives 2 */
    ok = v >= lo[dt] && v < hi[dt] + 1.0;
  }
  if (ok && dt == KILN_BOOL) v = v != 0;
  *pv = v;
  if (ok) return 0;
  kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: value %g is not representable as %s", op, v, kiln_dtype_name(dt));
  return -1;
}

kiln_node *kiln_api_const(kiln_frontend *fe, kiln_dtype dt, int rank, const int64_t *shape, double v, kiln_loc loc) {
  return kiln_fe_node(fe, KILN_OP_CONST, dt, rank, shape, 0, NULL, 0, NULL, v, loc);
}

/* The name users know an elementwise op by: its public builder's
 * (kiln_logical_and is "logical_and", not the IR's "and"), for errors. */
#define KILN_FE_NULL(str) NULL
#define KILN_FE_DROP(str)
#define KILN_PUB_NONE KILN_FE_NULL
#define KILN_PUB_UNARY(fn) #fn KILN_FE_DROP
#define KILN_PUB_BINARY(fn) #fn KILN_FE_DROP
#define KILN_FE_PUB_NAME(NAME, PUB) [KILN_OP_##NAME] = PUB,
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, ...) KILN_FE_PUB_NAME(NAME, PUB(STR))
static const char *const pub_name[KILN_OP_COUNT] = {
#include "kiln/ops.def"
};
#undef KILN_OP
#undef KILN_FE_PUB_NAME
#undef KILN_FE_NULL
#undef KILN_FE_DROP
#undef KILN_PUB_NONE
#undef KILN_PUB_UNARY
#undef KILN_PUB_BINARY
static const char *op_name(int op) { return pub_name[op] ? pub_name[op] : kiln_op_name(op); }

/* ── unary ── */

static kiln_tensor unary(int op, kiln_tensor x, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  const char *name = op_name(op);
  kiln_node *n;
  int r = kiln_api_input(fe, x, name, loc, NULL, &n);
  if (r) return kiln_fe_poison(fe, loc);
  /* the op table's dtype rule: logical ops take bool, OPF_PROMOTE ops
   * compute integers in f32 (as PyTorch), the rest must accept the dtype */
  const kiln_op_info *t = &kiln_op_table[op];
  kiln_dtype dt = (kiln_dtype)n->dtype;
  if (t->flags & OPF_LOGICAL) dt = KILN_BOOL;
  if ((t->flags & OPF_PROMOTE) && !kiln_dtype_is_float(dt)) dt = KILN_F32;
  if (!(t->in >> dt & 1u)) return kiln_api_fail(fe, loc, "%s: not defined for %s tensors", name, kiln_dtype_name(dt));
  n = kiln_api_cast(fe, n, dt, loc);
  kiln_dtype out_dt = kiln_op_is_predicate(op) ? KILN_BOOL : dt;
  n = n ? kiln_fe_node(fe, op, out_dt, n->rank, n->shape, 1, &n, 0, NULL, 0.0, loc) : NULL;
  return kiln_fe_tensor(fe, n, loc);
}

kiln_tensor kiln_cast_at(kiln_tensor x, kiln_dtype dt, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  if ((unsigned)dt >= KILN_DTYPE_COUNT) return kiln_api_fail(fe, loc, "cast: unknown dtype %d", (int)dt);
  kiln_node *n;
  if (kiln_api_input(fe, x, "cast", loc, NULL, &n)) return kiln_fe_poison(fe, loc);
  return kiln_fe_tensor(fe, kiln_api_cast(fe, n, dt, loc), loc);
}

/* ── binary ── */

/* PyTorch's promotion categories: bool < integer < floating point. */
static int category(kiln_dtype d) { return d == KILN_BOOL ? 0 : kiln_dtype_is_float(d) ? 2 : 1; }

static kiln_tensor binary_nodes(kiln_frontend *fe, int op, kiln_node *a, kiln_node *b, kiln_loc loc) {
  const kiln_op_info *t = &kiln_op_table[op];
  /* fast path, the common case: same dtype, same shape, no conversion */
  if (a->dtype == b->dtype && a->rank == b->rank && t->out == KILN_OUT_SAME && (t->in >> a->dtype & 1u) &&
      !(t->flags & OPF_LOGICAL) && (!(t->flags & OPF_PROMOTE) || kiln_dtype_is_float((kiln_dtype)a->dtype))) {
    int same = 1;
    for (int i = 0; same && i < a->rank; i++) same = a->shape[i] == b->shape[i];
    if (same) {
      kiln_node *in[2] = {a, b};
      return kiln_fe_tensor(fe, kiln_fe_node(fe, op, (kiln_dtype)a->dtype, a->rank, a->shape, 2, in, 0, NULL, 0.0, loc),
                            loc);
    }
  }
  const char *name = op_name(op);
  kiln_dtype dt = kiln_api_promote((kiln_dtype)a->dtype, (kiln_dtype)b->dtype);
  /* PyTorch: a 0-d operand does not widen a dimensioned operand of its own
   * category (f32[3] * f64 0-d is f32; a higher category still promotes). */
  int ca = category((kiln_dtype)a->dtype), cb = category((kiln_dtype)b->dtype);
  if (a->rank == 0 && b->rank > 0 && ca == cb) dt = (kiln_dtype)b->dtype;
  if (b->rank == 0 && a->rank > 0 && ca == cb) dt = (kiln_dtype)a->dtype;
  /* the op table's dtype rule (as for unary ops): integer / is true
   * (float) division, as PyTorch's; integer pow stays integer */
  if (t->flags & OPF_LOGICAL) dt = KILN_BOOL;
  if ((t->flags & OPF_PROMOTE) && !kiln_dtype_is_float(dt)) dt = KILN_F32;
  if (!(t->in >> dt & 1u)) return kiln_api_fail(fe, loc, "%s: not defined for %s tensors", name, kiln_dtype_name(dt));
  int rank, bad;
  int64_t shape[KILN_MAX_RANK];
  if (kiln_api_broadcast_shape(a->rank, a->shape, b->rank, b->shape, &rank, shape, &bad)) {
    char sa[128], sb[128];
    return kiln_api_fail(fe, loc, "%s: shapes %s and %s cannot be broadcast (dimension %d)", name,
                         kiln_fe_shape_str(a->rank, a->shape, sa, sizeof sa),
                         kiln_fe_shape_str(b->rank, b->shape, sb, sizeof sb), bad);
  }
  if (kiln_api_result_fits(dt, rank, shape, name, loc)) return kiln_fe_poison(fe, loc);
  a = kiln_api_broadcast(fe, kiln_api_cast(fe, a, dt, loc), rank, shape, loc);
  b = kiln_api_broadcast(fe, kiln_api_cast(fe, b, dt, loc), rank, shape, loc);
  if (!a || !b) return kiln_fe_tensor(fe, NULL, loc);
  kiln_node *in[2] = {a, b};
  kiln_dtype out_dt = kiln_op_is_predicate(op) ? KILN_BOOL : dt;
  return kiln_fe_tensor(fe, kiln_fe_node(fe, op, out_dt, rank, shape, 2, in, 0, NULL, 0.0, loc), loc);
}

static kiln_tensor binary(int op, kiln_tensor a, kiln_tensor b, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  const char *name = op_name(op);
  kiln_node *na = NULL, *nb = NULL;
  int ra = kiln_api_input(fe, a, name, loc, NULL, &na);
  int rb = kiln_api_input(fe, b, name, loc, NULL, &nb);
  if (ra || rb) return kiln_fe_poison(fe, loc);
  return binary_nodes(fe, op, na, nb, loc);
}

/* The dtype a scalar takes next to a tensor of dtype dt: a double that is
 * not an integer (a fraction, inf, NaN, -0.0) is a float, as Python's. */
kiln_dtype kiln_api_scalar_dtype(kiln_dtype dt, double v) {
  if (kiln_dtype_is_float(dt)) return dt;
  if (v != floor(v) || !isfinite(v) || (v == 0.0 && signbit(v))) return KILN_F32;
  return dt == KILN_BOOL ? KILN_I64 : dt;
}

static kiln_tensor binary_scalar(int op, kiln_tensor a, double v, int constant, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  kiln_node *na;
  if (kiln_api_input(fe, a, op_name(op), loc, NULL, &na)) return kiln_fe_poison(fe, loc);
  kiln_dtype dt = kiln_api_scalar_dtype((kiln_dtype)na->dtype, v);
  if (op == KILN_OP_POW && !kiln_dtype_is_float(dt) && v < 0) /* as PyTorch */
    return kiln_api_fail(fe, loc, "pow: %s tensor to the negative integer power %g: integers to negative "
                         "integer powers are not allowed (cast the tensor to a float dtype first)",
                         kiln_dtype_name((kiln_dtype)na->dtype), v);
  if (kiln_api_check_value(dt, &v, op_name(op), loc)) return kiln_fe_poison(fe, loc);
  /* a constant is made directly in the tensor's shape (one node) */
  kiln_node *s = constant ? kiln_api_const(fe, dt, na->rank, na->shape, v, loc)
                          : kiln_fe_scalar_node(fe, dt, v, kiln_api_i64(v), loc);
  if (!s) return kiln_fe_tensor(fe, NULL, loc);
  return binary_nodes(fe, op, na, s, loc);
}

/* The public builders of the op table's rows (KILN_PUB_UNARY and
 * KILN_PUB_BINARY in kiln/ops.def). */
#define KILN_FE_DEF_NONE(NAME, fn)
#define KILN_FE_DEF_UNARY(NAME, fn) \
  kiln_tensor kiln_##fn##_at(kiln_tensor x, kiln_loc loc) { return unary(KILN_OP_##NAME, x, loc); }
#define KILN_FE_DEF_BINARY(NAME, fn)                                                \
  kiln_tensor kiln_##fn##_at(kiln_tensor a, kiln_tensor b, kiln_loc loc) {          \
    return binary(KILN_OP_##NAME, a, b, loc);                                       \
  }                                                                                 \
  kiln_tensor kiln_##fn##_s_at(kiln_tensor a, double s, kiln_loc loc) {             \
    return binary_scalar(KILN_OP_##NAME, a, s, 0, loc);                             \
  }                                                                                 \
  kiln_tensor kiln_##fn##_c_at(kiln_tensor a, double c, kiln_loc loc) {             \
    return binary_scalar(KILN_OP_##NAME, a, c, 1, loc);                             \
  }
#define KILN_PUB_NONE KILN_FE_DEF_NONE, none
#define KILN_PUB_UNARY(fn) KILN_FE_DEF_UNARY, fn
#define KILN_PUB_BINARY(fn) KILN_FE_DEF_BINARY, fn
#define KILN_FE_APPLY2(NAME, DEF, fn) DEF(NAME, fn)
#define KILN_FE_APPLY(NAME, ...) KILN_FE_APPLY2(NAME, __VA_ARGS__)
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, ...) KILN_FE_APPLY(NAME, PUB)
#include "kiln/ops.def"
#undef KILN_OP

kiln_tensor kiln_where_at(kiln_tensor cond, kiln_tensor a, kiln_tensor b, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  kiln_node *nc = NULL, *na = NULL, *nb = NULL;
  int r0 = kiln_api_input(fe, cond, "where", loc, NULL, &nc);
  int r1 = kiln_api_input(fe, a, "where", loc, NULL, &na);
  int r2 = kiln_api_input(fe, b, "where", loc, NULL, &nb);
  if (r0 || r1 || r2) return kiln_fe_poison(fe, loc);
  int rank, r, bad;
  int64_t s1[KILN_MAX_RANK], shape[KILN_MAX_RANK];
  char b0[128], b1[128], b2[128];
  if (kiln_api_broadcast_shape(nc->rank, nc->shape, na->rank, na->shape, &r, s1, &bad) ||
      kiln_api_broadcast_shape(r, s1, nb->rank, nb->shape, &rank, shape, &bad))
    return kiln_api_fail(fe, loc, "where: shapes %s, %s and %s cannot be broadcast",
                         kiln_fe_shape_str(nc->rank, nc->shape, b0, sizeof b0),
                         kiln_fe_shape_str(na->rank, na->shape, b1, sizeof b1),
                         kiln_fe_shape_str(nb->rank, nb->shape, b2, sizeof b2));
  kiln_dtype dt = kiln_api_promote((kiln_dtype)na->dtype, (kiln_dtype)nb->dtype);
  if (kiln_api_result_fits(dt, rank, shape, "where", loc)) return kiln_fe_poison(fe, loc);
  kiln_node *in[3] = {kiln_api_broadcast(fe, kiln_api_cast(fe, nc, KILN_BOOL, loc), rank, shape, loc),
                      kiln_api_broadcast(fe, kiln_api_cast(fe, na, dt, loc), rank, shape, loc),
                      kiln_api_broadcast(fe, kiln_api_cast(fe, nb, dt, loc), rank, shape, loc)};
  if (!in[0] || !in[1] || !in[2]) return kiln_fe_tensor(fe, NULL, loc);
  return kiln_fe_tensor(fe, kiln_fe_node(fe, KILN_OP_WHERE, dt, rank, shape, 3, in, 0, NULL, 0.0, loc), loc);
}
