/* kiln_graph_verify: the IR's invariants, checked the same way for every
 * producer of graphs (frontend, passes, tests).
 *
 * A graph that passes must be safe to interpret: every index in range, every
 * shape consistent with its op's rule in ops.def, every attribute in range.
 * The dtype rules below are the contract between the frontend (which
 * promotes/casts before emitting a node) and the backends (which implement
 * exactly these combinations); docs/testing.md lists them.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"

/* Dtype classes. */
#define DT_FLOAT KILN_DT_FLOAT
#define DT_NUM KILN_DT_NUM
#define DT_ANY KILN_DT_ANY
#define DT_INDEX KILN_DT_INDEX

/* Largest element count accepted: keeps every byte count and flat index
 * far from int64/size_t overflow. */
#define MAX_NUMEL (1LL << 48)

typedef struct vctx {
  const kiln_graph *g;
  char *err;
  size_t err_len;
} vctx;

/* Safe on a malformed node (unknown dtype, rank too large). */
static const char *dt_name(int dt) { return dt < KILN_DTYPE_COUNT ? kiln_dtype_name((kiln_dtype)dt) : "?"; }

static void fmt_type(char *buf, size_t len, const kiln_gnode *n) {
  int k = snprintf(buf, len, "%s[", dt_name(n->dtype));
  int rank = n->rank <= KILN_MAX_RANK ? n->rank : KILN_MAX_RANK;
  for (int d = 0; d < rank && k > 0 && (size_t)k < len; d++)
    k += snprintf(buf + k, len - (size_t)k, d ? ",%lld" : "%lld", (long long)n->shape[d]);
  if (k > 0 && (size_t)k < len) snprintf(buf + k, len - (size_t)k, "]");
}

/* Record "node %i (op) <message> [at file:line]" and return -1. */
__attribute__((format(printf, 3, 4))) static int node_fail(vctx *c, int32_t i, const char *fmt, ...) {
  char body[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  const kiln_gnode *n = &c->g->nodes[i];
  char type[160];
  fmt_type(type, sizeof type, n);
  if (c->err && c->err_len) {
    if (n->loc.file)
      snprintf(c->err, c->err_len, "node %%%d (%s %s, from %s:%d): %s", (int)i, kiln_op_name(n->op), type,
               n->loc.file, n->loc.line, body);
    else
      snprintf(c->err, c->err_len, "node %%%d (%s %s): %s", (int)i, kiln_op_name(n->op), type, body);
  }
  return -1;
}

__attribute__((format(printf, 2, 3))) static int graph_fail(vctx *c, const char *fmt, ...) {
  if (c->err && c->err_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->err_len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static int same_shape(const kiln_gnode *a, const kiln_gnode *b) {
  if (a->rank != b->rank) return 0;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

static int64_t numel_of(const kiln_gnode *n) {
  int64_t e = 1;
  for (int d = 0; d < n->rank; d++) e *= n->shape[d];
  return e;
}

/* A double that converts to dtype dt without undefined behaviour. */
static int value_fits(int dt, double v) {
  if (dt == KILN_I32) return v > -2147483649.0 && v < 2147483648.0;
  if (dt == KILN_I64) return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  return 1;
}

static int check_dtype(vctx *c, int32_t i, int dt, unsigned allowed, const char *what) {
  if (!(allowed & (1u << dt)))
    return node_fail(c, i, "%s has dtype %s, which %s does not accept", what, dt_name((int)dt),
                     kiln_op_name(c->g->nodes[i].op));
  return 0;
}

static int need_iattr(vctx *c, int32_t i, int count) {
  if (c->g->nodes[i].n_iattr < count)
    return node_fail(c, i, "needs %d integer attributes, has %d", count, (int)c->g->nodes[i].n_iattr);
  return 0;
}

/* The input k must have the node's shape (and dtype dt unless dt < 0). */
static int input_like(vctx *c, int32_t i, int k, int dt) {
  const kiln_gnode *n = &c->g->nodes[i];
  const kiln_gnode *in = &c->g->nodes[kiln_gnode_inputs(c->g, n)[k]];
  char t[160];
  fmt_type(t, sizeof t, in);
  if (!same_shape(in, n)) return node_fail(c, i, "input %d (%%%d) is %s: shape differs from the output", k,
                                           (int)kiln_gnode_inputs(c->g, n)[k], t);
  if (dt >= 0 && in->dtype != dt)
    return node_fail(c, i, "input %d (%%%d) is %s, expected dtype %s", k, (int)kiln_gnode_inputs(c->g, n)[k], t,
                     dt_name((int)dt));
  return 0;
}

static int check_source(vctx *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  switch (n->op) {
    case KILN_OP_LEAF:
    case KILN_OP_SCALAR:
      if (need_iattr(c, i, 1)) return -1;
      if (n->iattr[0] < 0 || n->iattr[0] >= c->g->n_inputs)
        return node_fail(c, i, "graph input number %lld out of range [0, %d)", (long long)n->iattr[0],
                         (int)c->g->n_inputs);
      if (c->g->input_node[n->iattr[0]] != i)
        return node_fail(c, i, "graph input %lld is bound to node %%%d, not to this node", (long long)n->iattr[0],
                         (int)c->g->input_node[n->iattr[0]]);
      if (n->op == KILN_OP_SCALAR && n->rank != 0) return node_fail(c, i, "a scalar input must be 0-d");
      return 0;
    case KILN_OP_CONST:
      if (!value_fits(n->dtype, n->fattr))
        return node_fail(c, i, "value %g does not fit dtype %s", n->fattr, dt_name((int)n->dtype));
      return 0;
    case KILN_OP_IOTA:
      if (need_iattr(c, i, 1) || check_dtype(c, i, n->dtype, DT_NUM, "the output")) return -1;
      if (n->iattr[0] < 0 || n->iattr[0] >= n->rank)
        return node_fail(c, i, "axis %lld out of range for rank %d", (long long)n->iattr[0], n->rank);
      return 0;
    case KILN_OP_RANDOM: {
      if (need_iattr(c, i, 1) || check_dtype(c, i, n->dtype, DT_FLOAT, "the output")) return -1;
      if (n->iattr[0] != 0 && n->iattr[0] != 1)
        return node_fail(c, i, "distribution %lld is neither 0 (uniform) nor 1 (normal)", (long long)n->iattr[0]);
      const kiln_gnode *seed = &c->g->nodes[kiln_gnode_inputs(c->g, n)[0]];
      if (seed->rank != 0 || seed->dtype != KILN_I64) return node_fail(c, i, "the seed must be a 0-d i64");
      return 0;
    }
    default: return 0;
  }
}

/* Elementwise ops: the IN and OUT columns of the op table. */
static int check_elementwise(vctx *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  const kiln_op_info *t = &kiln_op_table[n->op];
  const kiln_gnode *a = &c->g->nodes[kiln_gnode_inputs(c->g, n)[0]];
  if (n->op == KILN_OP_CAST) return input_like(c, i, 0, -1);
  if (n->op == KILN_OP_WHERE)
    return input_like(c, i, 0, KILN_BOOL) || input_like(c, i, 1, n->dtype) || input_like(c, i, 2, n->dtype);
  /* the data inputs share one dtype, which the op must accept */
  for (int k = 0; k < n->n_in; k++)
    if (input_like(c, i, k, k ? a->dtype : -1)) return -1;
  if (check_dtype(c, i, a->dtype, t->in, "the input")) return -1;
  int want = t->out == KILN_OUT_BOOL ? KILN_BOOL : a->dtype;
  if (n->dtype != want)
    return node_fail(c, i, "output dtype %s, expected %s (inputs %s)", dt_name((int)n->dtype), dt_name(want),
                     dt_name((int)a->dtype));
  return 0;
}

static int check_reduce(vctx *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  const kiln_gnode *x = &c->g->nodes[kiln_gnode_inputs(c->g, n)[0]];
  if (need_iattr(c, i, 1)) return -1;
  if (x->rank != n->rank) return node_fail(c, i, "input rank %d differs from the output's (keepdim form)", x->rank);
  if (n->op == KILN_OP_ARGMAX) {
    int64_t axis = n->iattr[0];
    if (axis < 0 || axis >= n->rank) return node_fail(c, i, "axis %lld out of range for rank %d", (long long)axis, n->rank);
    if (n->dtype != KILN_I64) return node_fail(c, i, "argmax outputs i64");
    for (int d = 0; d < n->rank; d++)
      if (n->shape[d] != (d == axis ? 1 : x->shape[d]))
        return node_fail(c, i, "output dim %d is %lld, expected %lld", d, (long long)n->shape[d],
                         (long long)(d == axis ? 1 : x->shape[d]));
    return 0;
  }
  uint64_t mask = (uint64_t)n->iattr[0];
  if (n->rank < 64 && (mask >> n->rank) != 0)
    return node_fail(c, i, "axis mask 0x%llx names axes beyond rank %d", (unsigned long long)mask, n->rank);
  if (n->dtype != x->dtype) return node_fail(c, i, "output dtype differs from the input's");
  if (check_dtype(c, i, n->dtype, kiln_op_table[n->op].in, "the input")) return -1;
  for (int d = 0; d < n->rank; d++) {
    int64_t want = (mask >> d) & 1 ? 1 : x->shape[d];
    if (n->shape[d] != want)
      return node_fail(c, i, "output dim %d is %lld, expected %lld", d, (long long)n->shape[d], (long long)want);
  }
  return 0;
}

/* A scan (CUMSUM, CUMPROD): the input's shape and dtype, one axis. */
static int check_scan(vctx *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  const kiln_gnode *x = &c->g->nodes[kiln_gnode_inputs(c->g, n)[0]];
  if (need_iattr(c, i, 1)) return -1;
  int64_t axis = n->iattr[0];
  if (axis < 0 || axis >= n->rank) return node_fail(c, i, "axis %lld out of range for rank %d", (long long)axis, n->rank);
  if (n->dtype != x->dtype) return node_fail(c, i, "output dtype differs from the input's");
  if (check_dtype(c, i, n->dtype, kiln_op_table[n->op].in, "the input")) return -1;
  if (x->rank != n->rank || memcmp(x->shape, n->shape, sizeof(int64_t) * (size_t)n->rank))
    return node_fail(c, i, "output shape differs from the input's");
  return 0;
}

/* A collective (ALL_REDUCE, BROADCAST, ALL_GATHER): iattr[1] the world size
 * (>= 1); the input's dtype; its shape, ALL_GATHER's axis iattr[0] world
 * times longer. */
static int check_collective(vctx *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  const kiln_gnode *x = &c->g->nodes[kiln_gnode_inputs(c->g, n)[0]];
  if (need_iattr(c, i, 2)) return -1;
  int64_t a0 = n->iattr[0], world = n->iattr[1];
  if (world < 1 || world > (1 << 30)) return node_fail(c, i, "world size %lld out of range", (long long)world);
  if (n->dtype != x->dtype) return node_fail(c, i, "output dtype differs from the input's");
  if (check_dtype(c, i, n->dtype, kiln_op_table[n->op].in, "the input")) return -1;
  if (n->op == KILN_OP_ALL_REDUCE && (a0 < 0 || a0 > 1 || kiln_dt_is_half(n->dtype)))
    return node_fail(c, i, "reduction %lld on %s is not supported", (long long)a0, kiln_dtype_name(n->dtype));
  if (n->op == KILN_OP_BROADCAST && (a0 < 0 || a0 >= world))
    return node_fail(c, i, "root %lld is not a rank of a world of %lld", (long long)a0, (long long)world);
  if (n->op == KILN_OP_ALL_GATHER && (a0 < 0 || a0 >= n->rank))
    return node_fail(c, i, "axis %lld out of range for rank %d", (long long)a0, n->rank);
  if (x->rank != n->rank) return node_fail(c, i, "output rank differs from the input's");
  for (int d = 0; d < n->rank; d++) {
    int64_t want = n->op == KILN_OP_ALL_GATHER && d == a0 ? x->shape[d] * world : x->shape[d];
    if (n->shape[d] != want)
      return node_fail(c, i, "output dim %d is %lld, expected %lld", d, (long long)n->shape[d], (long long)want);
  }
  return 0;
}

/* The shape rules of the data-movement ops (ops.def's doc column says
 * what each computes). Each takes the node i, its input x and its rank. */
static int check_permute(vctx *c, int32_t i, const kiln_gnode *n, const kiln_gnode *x, int R) {
  if (need_iattr(c, i, R)) return -1;
  if (x->rank != R) return node_fail(c, i, "input rank %d differs", x->rank);
  int seen[KILN_MAX_RANK] = {0};
  for (int d = 0; d < R; d++) {
    int64_t p = n->iattr[d];
    if (p < 0 || p >= R || seen[p]) return node_fail(c, i, "iattr is not a permutation of %d axes", R);
    seen[p] = 1;
    if (n->shape[d] != x->shape[p]) return node_fail(c, i, "output dim %d is not input dim %lld", d, (long long)p);
  }
  return 0;
}

static int check_slice(vctx *c, int32_t i, const kiln_gnode *n, const kiln_gnode *x, int R) {
  if (need_iattr(c, i, 2 * R)) return -1;
  if (x->rank != R) return node_fail(c, i, "input rank %d differs", x->rank);
  for (int d = 0; d < R; d++) {
    int64_t start = n->iattr[d], step = n->iattr[R + d], len = n->shape[d], dim = x->shape[d];
    if (step < 1) return node_fail(c, i, "axis %d: step %lld < 1", d, (long long)step);
    if (start < 0 || start > dim)
      return node_fail(c, i, "axis %d: start %lld outside [0, %lld]", d, (long long)start, (long long)dim);
    if (len > 0 && (start >= dim || (len - 1) > (dim - 1 - start) / step))
      return node_fail(c, i, "axis %d: %lld elements from %lld by %lld overrun size %lld", d, (long long)len,
                       (long long)start, (long long)step, (long long)dim);
  }
  return 0;
}

static int check_concat(vctx *c, int32_t i, const kiln_gnode *n, const int32_t *in, int R) {
  if (need_iattr(c, i, 1)) return -1;
  int64_t axis = n->iattr[0], total = 0;
  if (axis < 0 || axis >= R) return node_fail(c, i, "axis %lld out of range for rank %d", (long long)axis, R);
  for (int k = 0; k < n->n_in; k++) {
    const kiln_gnode *p = &c->g->nodes[in[k]];
    if (p->rank != R || p->dtype != n->dtype)
      return node_fail(c, i, "input %d (%%%d) has a different rank or dtype", k, (int)in[k]);
    for (int d = 0; d < R; d++)
      if (d != axis && p->shape[d] != n->shape[d])
        return node_fail(c, i, "input %d (%%%d) dim %d is %lld, expected %lld", k, (int)in[k], d,
                         (long long)p->shape[d], (long long)n->shape[d]);
    total += p->shape[axis];
  }
  if (total != n->shape[axis])
    return node_fail(c, i, "inputs sum to %lld along axis %lld, output has %lld", (long long)total, (long long)axis,
                     (long long)n->shape[axis]);
  return 0;
}

static int check_pad(vctx *c, int32_t i, const kiln_gnode *n, const kiln_gnode *x, int R) {
  if (need_iattr(c, i, 2 * R)) return -1;
  if (x->rank != R) return node_fail(c, i, "input rank %d differs", x->rank);
  if (!value_fits(n->dtype, n->fattr)) return node_fail(c, i, "pad value %g does not fit the dtype", n->fattr);
  for (int d = 0; d < R; d++) {
    int64_t lo = n->iattr[d], hi = n->iattr[R + d];
    if (lo < 0 || hi < 0 || lo > MAX_NUMEL || hi > MAX_NUMEL)
      return node_fail(c, i, "axis %d: padding %lld/%lld out of range", d, (long long)lo, (long long)hi);
    if (n->shape[d] != x->shape[d] + lo + hi)
      return node_fail(c, i, "axis %d: output %lld != %lld + %lld + %lld", d, (long long)n->shape[d],
                       (long long)x->shape[d], (long long)lo, (long long)hi);
  }
  return 0;
}

/* INDEX_SELECT and GATHER. */
static int check_index(vctx *c, int32_t i, const kiln_gnode *n, const kiln_gnode *x, const kiln_gnode *idx, int R) {
  if (need_iattr(c, i, 1) || check_dtype(c, i, idx->dtype, DT_INDEX, "the index input")) return -1;
  int64_t axis = n->iattr[0];
  if (axis < 0 || axis >= x->rank) return node_fail(c, i, "axis %lld out of range for rank %d", (long long)axis, x->rank);
  if (x->shape[axis] == 0 && numel_of(n) > 0)
    return node_fail(c, i, "indexes an empty axis %lld but has a non-empty output", (long long)axis);
  if (n->op == KILN_OP_GATHER) {
    if (idx->rank != x->rank) return node_fail(c, i, "index rank %d differs from the data's %d", idx->rank, x->rank);
    if (!same_shape(idx, n)) return node_fail(c, i, "output shape differs from the index shape");
    for (int d = 0; d < R; d++)
      if (d != axis && idx->shape[d] > x->shape[d])
        return node_fail(c, i, "index dim %d (%lld) exceeds the data's (%lld)", d, (long long)idx->shape[d],
                         (long long)x->shape[d]);
    return 0;
  }
  if (R != x->rank - 1 + idx->rank)
    return node_fail(c, i, "rank %d != data rank %d - 1 + index rank %d", R, x->rank, idx->rank);
  for (int d = 0; d < R; d++) {
    int64_t want = d < axis ? x->shape[d] : d < axis + idx->rank ? idx->shape[d - axis] : x->shape[d - idx->rank + 1];
    if (n->shape[d] != want)
      return node_fail(c, i, "output dim %d is %lld, expected %lld", d, (long long)n->shape[d], (long long)want);
  }
  return 0;
}

/* ARGSORT: i64 of the input's shape; iattr = {axis, descending}. */
static int check_argsort(vctx *c, int32_t i, const kiln_gnode *n, const kiln_gnode *x) {
  if (need_iattr(c, i, 2) || check_dtype(c, i, x->dtype, kiln_op_table[n->op].in, "the input")) return -1;
  if (n->dtype != KILN_I64) return node_fail(c, i, "argsort outputs i64");
  if (n->iattr[0] < 0 || n->iattr[0] >= x->rank)
    return node_fail(c, i, "axis %lld out of range for rank %d", (long long)n->iattr[0], x->rank);
  if (n->iattr[1] != 0 && n->iattr[1] != 1) return node_fail(c, i, "descending flag %lld is not 0 or 1", (long long)n->iattr[1]);
  if (!same_shape(x, n)) return node_fail(c, i, "output shape differs from the input's");
  return 0;
}

/* SCATTER and SCATTER_ADD: in[0] data (the output's type), in[1] indices of
 * its rank, in[2] values of its dtype and rank; the index shape fits both. */
static int check_scatter(vctx *c, int32_t i, const kiln_gnode *n, const kiln_gnode *x, const int32_t *in) {
  const kiln_gnode *idx = &c->g->nodes[in[1]], *src = &c->g->nodes[in[2]];
  if (need_iattr(c, i, 1) || check_dtype(c, i, idx->dtype, DT_INDEX, "the index input") ||
      check_dtype(c, i, n->dtype, kiln_op_table[n->op].in, "the output"))
    return -1;
  int64_t axis = n->iattr[0];
  if (axis < 0 || axis >= x->rank) return node_fail(c, i, "axis %lld out of range for rank %d", (long long)axis, x->rank);
  if (!same_shape(x, n)) return node_fail(c, i, "output shape differs from the data's");
  if (src->dtype != n->dtype) return node_fail(c, i, "values dtype %s differs from the data's", dt_name((int)src->dtype));
  if (idx->rank != x->rank || src->rank != x->rank)
    return node_fail(c, i, "index rank %d and values rank %d must be the data's %d", idx->rank, src->rank, x->rank);
  for (int d = 0; d < x->rank; d++) {
    if (idx->shape[d] > src->shape[d] || (d != axis && idx->shape[d] > x->shape[d]))
      return node_fail(c, i, "index dim %d (%lld) exceeds the values' (%lld) or the data's (%lld)", d,
                       (long long)idx->shape[d], (long long)src->shape[d], (long long)x->shape[d]);
  }
  if (x->shape[axis] == 0 && numel_of(idx) > 0)
    return node_fail(c, i, "scatters into an empty axis %lld", (long long)axis);
  return 0;
}

static int check_move(vctx *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  const int32_t *in = kiln_gnode_inputs(c->g, n);
  const kiln_gnode *x = &c->g->nodes[in[0]];
  const int R = n->rank;
  if (n->op == KILN_OP_ARGSORT) return check_argsort(c, i, n, x);
  if (x->dtype != n->dtype) return node_fail(c, i, "output dtype differs from input 0's %s", dt_name((int)x->dtype));
  switch (n->op) {
    case KILN_OP_RESHAPE:
      if (numel_of(x) != numel_of(n))
        return node_fail(c, i, "input has %lld elements, output %lld", (long long)numel_of(x), (long long)numel_of(n));
      return 0;
    case KILN_OP_PERMUTE: return check_permute(c, i, n, x, R);
    case KILN_OP_EXPAND:
      if (x->rank != R) return node_fail(c, i, "input rank %d differs (expand keeps the rank)", x->rank);
      for (int d = 0; d < R; d++)
        if (x->shape[d] != n->shape[d] && x->shape[d] != 1)
          return node_fail(c, i, "input dim %d is %lld: only size-1 dims expand", d, (long long)x->shape[d]);
      return 0;
    case KILN_OP_SLICE: return check_slice(c, i, n, x, R);
    case KILN_OP_CONCAT: return check_concat(c, i, n, in, R);
    case KILN_OP_PAD: return check_pad(c, i, n, x, R);
    case KILN_OP_INDEX_SELECT:
    case KILN_OP_GATHER: return check_index(c, i, n, x, &c->g->nodes[in[1]], R);
    case KILN_OP_SCATTER:
    case KILN_OP_SCATTER_ADD: return check_scatter(c, i, n, x, in);
    default: return 0;
  }
}

static int check_matmul(vctx *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  const int32_t *in = kiln_gnode_inputs(c->g, n);
  const kiln_gnode *a = &c->g->nodes[in[0]], *b = &c->g->nodes[in[1]];
  const int R = n->rank;
  if (check_dtype(c, i, n->dtype, KILN_DT_CONTRACT, "the output")) return -1;
  if (a->dtype != n->dtype || b->dtype != n->dtype) return node_fail(c, i, "input dtypes differ from the output's");
  if (R < 2 || a->rank != R || b->rank != R) return node_fail(c, i, "needs inputs and output of one rank >= 2");
  for (int d = 0; d < R - 2; d++)
    if (a->shape[d] != n->shape[d] || b->shape[d] != n->shape[d])
      return node_fail(c, i, "batch dim %d differs between inputs and output", d);
  if (a->shape[R - 1] != b->shape[R - 2])
    return node_fail(c, i, "contraction mismatch: a has K=%lld, b has K=%lld", (long long)a->shape[R - 1],
                     (long long)b->shape[R - 2]);
  if (n->shape[R - 2] != a->shape[R - 2] || n->shape[R - 1] != b->shape[R - 1])
    return node_fail(c, i, "output is not [.., M=%lld, N=%lld]", (long long)a->shape[R - 2], (long long)b->shape[R - 1]);
  return 0;
}

/* Structural checks of node i: op, dtype, shape, attribute and input ranges. */
static int check_node_frame(vctx *c, int32_t i) {
  const kiln_graph *g = c->g;
  const kiln_gnode *n = &g->nodes[i];
  if (n->op >= KILN_OP_COUNT) return graph_fail(c, "node %%%d: unknown op %d", (int)i, (int)n->op);
  if (n->dtype >= KILN_DTYPE_COUNT) return node_fail(c, i, "unknown dtype %d", (int)n->dtype);
  if (n->rank > KILN_MAX_RANK) return node_fail(c, i, "rank %d exceeds %d", (int)n->rank, KILN_MAX_RANK);
  int64_t e = 1;
  for (int d = 0; d < n->rank; d++) {
    if (n->shape[d] < 0) return node_fail(c, i, "negative dim %d", d);
    if (n->shape[d] > 0 && e > MAX_NUMEL / n->shape[d]) return node_fail(c, i, "too many elements");
    if (n->shape[d] > 0) e *= n->shape[d]; /* a 0 must not hide the other sizes' overflow */
  }
  if (n->n_iattr < 0 || n->n_iattr > KILN_MAX_IATTR)
    return node_fail(c, i, "n_iattr %d outside [0, %d]", (int)n->n_iattr, KILN_MAX_IATTR);
  int arity = kiln_op_table[n->op].arity;
  if (arity >= 0 ? n->n_in != arity : n->n_in < 1)
    return node_fail(c, i, "has %d inputs, %s takes %s%d", (int)n->n_in, kiln_op_name(n->op), arity < 0 ? ">= " : "",
                     arity < 0 ? 1 : arity);
  if (n->in_off < 0 || n->in_off > g->n_in_idx || n->n_in > g->n_in_idx - n->in_off)
    return node_fail(c, i, "input list [%d, +%d) outside in_idx[0, %d)", (int)n->in_off, (int)n->n_in,
                     (int)g->n_in_idx);
  const int32_t *in = kiln_gnode_inputs(g, n);
  for (int k = 0; k < n->n_in; k++)
    if (in[k] < 0 || in[k] >= i)
      return node_fail(c, i, "input %d is %%%d: not an earlier node (topological order)", k, (int)in[k]);
  return 0;
}

int kiln_graph_verify(const kiln_graph *g, char *err, size_t err_len) {
  vctx c = {g, err, err_len};
  if (err && err_len) err[0] = 0;
  if (!g) return graph_fail(&c, "graph is NULL");
  if (g->n_nodes < 0 || g->n_inputs < 0 || g->n_outputs < 0 || g->n_in_idx < 0)
    return graph_fail(&c, "negative counts");
  if ((g->n_nodes && !g->nodes) || (g->n_in_idx && !g->in_idx) || (g->n_inputs && !g->input_node) ||
      (g->n_outputs && (!g->output_node || !g->output_alias)))
    return graph_fail(&c, "missing arrays");
  /* graph inputs first: node checks rely on input_node being in range */
  for (int32_t k = 0; k < g->n_inputs; k++) {
    int32_t ni = g->input_node[k];
    if (ni < 0 || ni >= g->n_nodes) return graph_fail(&c, "graph input %d names node %d, out of range", (int)k, (int)ni);
    int op = g->nodes[ni].op;
    if (op != KILN_OP_LEAF && op != KILN_OP_SCALAR)
      return graph_fail(&c, "graph input %d names node %%%d, a %s (not leaf/scalar)", (int)k, (int)ni, kiln_op_name(op));
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (check_node_frame(&c, i)) return -1;
    int r = 0;
    switch (kiln_op_table[g->nodes[i].op].kind) {
      case KILN_KIND_SOURCE: r = check_source(&c, i); break;
      case KILN_KIND_UNARY:
      case KILN_KIND_BINARY:
      case KILN_KIND_TERNARY: r = check_elementwise(&c, i); break;
      case KILN_KIND_REDUCE: r = check_reduce(&c, i); break;
      case KILN_KIND_MOVE: r = check_move(&c, i); break;
      case KILN_KIND_MATMUL: r = check_matmul(&c, i); break;
      case KILN_KIND_SCAN: r = check_scan(&c, i); break;
      case KILN_KIND_COLLECTIVE: r = check_collective(&c, i); break;
    }
    if (r) return -1;
  }
  for (int32_t o = 0; o < g->n_outputs; o++) {
    int32_t ni = g->output_node[o];
    if (ni < 0 || ni >= g->n_nodes) return graph_fail(&c, "output %d names node %d, out of range", (int)o, (int)ni);
    int32_t a = g->output_alias[o];
    if (a == -1) continue;
    if (a < 0 || a >= g->n_inputs) return graph_fail(&c, "output %d aliases input %d, out of range", (int)o, (int)a);
    const kiln_gnode *src = &g->nodes[g->input_node[a]], *dst = &g->nodes[ni];
    if (src->op != KILN_OP_LEAF)
      return graph_fail(&c, "output %d aliases input %d, which is a scalar, not a buffer", (int)o, (int)a);
    if (kiln_gnode_bytes(src) != kiln_gnode_bytes(dst))
      return graph_fail(&c, "output %d (%zu bytes) aliases input %d of %zu bytes", (int)o, kiln_gnode_bytes(dst),
                        (int)a, kiln_gnode_bytes(src));
    for (int32_t p = 0; p < o; p++)
      if (g->output_alias[p] == a) return graph_fail(&c, "outputs %d and %d both alias input %d", (int)p, (int)o, (int)a);
  }
  return 0;
}
