/* Constant folding. A CONST is a uniform fill (value fattr at the node's
 * shape), so any node whose result is again uniform and exactly computable
 * becomes a CONST of the node's dtype and shape, at the node's location:
 *   - elementwise ops over CONST inputs (pass_const.h says which);
 *   - RESHAPE/EXPAND/PERMUTE/SLICE of a CONST, CONCAT of CONSTs holding the
 *     same value, PAD of a CONST with its own value (not INDEX_SELECT/GATHER:
 *     their indices are checked when the graph runs);
 *   - REDUCE_SUM of a CONST (v * n), REDUCE_MAX/MIN (v) and ARGMAX (0) of a
 *     CONST over a non-empty extent.
 */
#include "passes/pass_const.h"
#include "passes/pass_graph.h"

static const kiln_gnode *dnode(kiln_pass_walk *w, int32_t x) { return &w->view->nodes[x]; }

/* The value of destination node x if it is a CONST. */
static int const_of(kiln_pass_walk *w, int32_t x, kiln_cval *v) {
  const kiln_gnode *c = dnode(w, x);
  return c->op == KILN_OP_CONST && kiln_cval_from_fattr(c->dtype, c->fattr, v);
}

/* Product of the input dims selected by a reduction bitmask (elements
 * combined into each output element). -1 if the mask names no valid axis set. */
static int64_t reduce_extent(const kiln_gnode *x, int64_t mask) {
  if (mask < 0 || (x->rank < 63 && (mask >> x->rank) != 0)) return -1;
  int64_t e = 1;
  for (int d = 0; d < x->rank; d++)
    if (mask & ((int64_t)1 << d)) e *= x->shape[d];
  return e;
}

static int fold_elementwise(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in, kiln_cval *r) {
  kiln_cval a, b, c;
  switch (kiln_op_table[n->op].kind) {
    case KILN_KIND_UNARY:
      if (!const_of(w, in[0], &a)) return 0;
      return kiln_cval_unary(n->op, dnode(w, in[0])->dtype, n->dtype, a, r);
    case KILN_KIND_BINARY: {
      int dt = dnode(w, in[0])->dtype;
      if (dnode(w, in[1])->dtype != dt || !const_of(w, in[0], &a) || !const_of(w, in[1], &b)) return 0;
      /* The result dtype must be the one the op defines for its inputs. */
      int want = kiln_op_is_predicate(n->op) ? KILN_BOOL : dt;
      if (n->dtype != want || !kiln_cval_binary(n->op, dt, a, b, r)) return 0;
      return 1;
    }
    case KILN_KIND_TERNARY: /* WHERE */
      if (n->op != KILN_OP_WHERE || dnode(w, in[0])->dtype != KILN_BOOL || !const_of(w, in[0], &c)) return 0;
      if (dnode(w, in[1])->dtype != n->dtype || dnode(w, in[2])->dtype != n->dtype) return 0;
      if (!const_of(w, in[1], &a) || !const_of(w, in[2], &b)) return 0;
      *r = c.i ? a : b;
      return 1;
    default:
      return 0;
  }
}

/* Movement and indexing of a fill is the same fill at the new shape. */
static int fold_move(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in, kiln_cval *r) {
  const kiln_gnode *x = dnode(w, in[0]);
  if (x->dtype != n->dtype || !const_of(w, in[0], r)) return 0;
  switch (n->op) {
    case KILN_OP_RESHAPE:
    case KILN_OP_EXPAND:
    case KILN_OP_PERMUTE:
    case KILN_OP_SLICE:
      return 1;
    /* INDEX_SELECT and GATHER of a fill are not folded: an out-of-range
     * index is an error found when the graph runs (docs/codegen.md). */
    case KILN_OP_PAD: {
      kiln_cval p;
      return kiln_cval_from_fattr(n->dtype, n->fattr, &p) && kiln_cval_same(n->dtype, p, *r);
    }
    case KILN_OP_CONCAT:
      for (int32_t k = 1; k < n->n_in; k++) {
        kiln_cval v;
        if (dnode(w, in[k])->dtype != n->dtype || !const_of(w, in[k], &v) || !kiln_cval_same(n->dtype, v, *r))
          return 0;
      }
      return 1;
    default:
      return 0;
  }
}

static int fold_reduce(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in, kiln_cval *r) {
  const kiln_gnode *x = dnode(w, in[0]);
  kiln_cval v;
  if (n->n_iattr < 1 || !const_of(w, in[0], &v)) return 0;
  if (n->op == KILN_OP_ARGMAX) {
    /* Every element is the maximum: the first index, 0. */
    int64_t ax = n->iattr[0];
    if (n->dtype != KILN_I64 || ax < 0 || ax >= x->rank || x->shape[ax] <= 0) return 0;
    *r = (kiln_cval){0};
    return 1;
  }
  int64_t e = reduce_extent(x, n->iattr[0]);
  if (e < 0 || x->dtype != n->dtype) return 0;
  switch (n->op) {
    case KILN_OP_REDUCE_SUM:
      return kiln_cval_sum(n->dtype, v, e, r);
    case KILN_OP_REDUCE_MAX:
    case KILN_OP_REDUCE_MIN:
      if (e == 0) return 0; /* the max of nothing is not defined by ops.def */
      *r = v;
      return 1;
    default:
      return 0;
  }
}

static int32_t fold_rule(kiln_pass_walk *w, int32_t i, const kiln_gnode *n, const int32_t *in) {
  (void)i;
  kiln_cval r;
  int ok = 0;
  switch (kiln_op_table[n->op].kind) {
    case KILN_KIND_UNARY:
    case KILN_KIND_BINARY:
    case KILN_KIND_TERNARY:
      ok = fold_elementwise(w, n, in, &r);
      break;
    case KILN_KIND_MOVE:
      ok = fold_move(w, n, in, &r);
      break;
    case KILN_KIND_REDUCE:
      ok = fold_reduce(w, n, in, &r);
      break;
    default:
      break;
  }
  double fv;
  if (!ok || !kiln_cval_to_fattr(n->dtype, r, &fv)) return kiln_pass_keep(w, n, in);
  kiln_gnode c = kiln_pass_node_like(n, KILN_OP_CONST);
  c.fattr = fv;
  int32_t x = kiln_pass_emit(w, &c, NULL);
  if (x < 0) {
    w->status = KILN_ERR_OUT_OF_MEMORY;
    return -1;
  }
  w->changes++;
  return x;
}

kiln_status kiln_pass_fold(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes,
                              int *rebuilt) {
  return kiln_pass_walk_run(src, dst, ctx, fold_rule, changes, rebuilt);
}
