/* Algebraic simplification: identities that hold bit for bit under IEEE 754
 * (with one documented exception, x + 0 when x is -0, see docs/passes.md).
 *   x*1, 1*x, x/1, x+0, 0+x, x-0           -> x (EXPAND(x) when x is smaller)
 *   neg(neg x), not(not x)                  -> x
 *   reshape(reshape x)                      -> reshape x;  reshape to x's shape -> x
 *   permute(permute x)                      -> one permute; identity permute -> x
 *   expand(expand x)                        -> expand x;   expand to x's shape -> x
 *   cast to x's dtype, whole-axis slice, zero pad, concat of one input -> x
 *   where(const c, a, b) -> a or b;  where(c, a, a) -> a
 *   pad(a) + pad(b), zero fills along one axis, a and b adjacent there
 *                                           -> pad(concat(a, b)) (x + 0 -> x)
 * Deliberately not done: x*0 -> 0 (NaN/Inf times 0 is NaN) and x-x -> 0
 * (Inf - Inf is NaN).
 *
 * "The constant" is a CONST seen through RESHAPE/EXPAND/PERMUTE/SLICE (a fill
 * moved around is still a fill), so the rules apply whether or not folding
 * has run first. The replacement always has the node's dtype and shape
 * (kiln_pass_coerce), so outputs never change shape.
 */
#include <math.h>
#include <string.h>

#include "passes/pass_const.h"
#include "passes/pass_graph.h"

static const kiln_gnode *dnode(kiln_pass_walk *w, int32_t x) { return &w->view->nodes[x]; }
static int32_t din(kiln_pass_walk *w, int32_t x, int k) {
  return kiln_gnode_inputs(w->view, dnode(w, x))[k];
}

/* The fill value of x in dtype dt if x is a CONST, possibly moved. */
static int fill_of(kiln_pass_walk *w, int32_t x, int dt, kiln_cval *v) {
  for (int hops = 0; hops < 64; hops++) {
    const kiln_gnode *c = dnode(w, x);
    if (c->dtype != dt) return 0;
    switch (c->op) {
      case KILN_OP_CONST:
        return kiln_cval_from_fattr(dt, c->fattr, v);
      case KILN_OP_RESHAPE:
      case KILN_OP_EXPAND:
      case KILN_OP_PERMUTE:
      case KILN_OP_SLICE:
        x = din(w, x, 0);
        break;
      default:
        return 0;
    }
  }
  return 0;
}

static int is_one(kiln_pass_walk *w, int32_t x, int dt) {
  kiln_cval v;
  return fill_of(w, x, dt, &v) && kiln_cval_is_one(dt, v);
}
static int is_zero(kiln_pass_walk *w, int32_t x, int dt) {
  kiln_cval v;
  return fill_of(w, x, dt, &v) && kiln_cval_is_zero(dt, v);
}
/* +0 only (any integer zero): x - (-0) is not x, since -0 - (-0) is +0. */
static int is_pos_zero(kiln_pass_walk *w, int32_t x, int dt) {
  kiln_cval v;
  return fill_of(w, x, dt, &v) && kiln_cval_is_zero(dt, v) && !(kiln_dt_is_float(dt) && signbit(v.f));
}

/* The operand that n reduces to, or -1. */
static int32_t identity_operand(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in) {
  int dt = n->dtype;
  switch (n->op) {
    case KILN_OP_MUL: /* for bool: x and true */
      if (is_one(w, in[1], dt)) return in[0];
      if (is_one(w, in[0], dt)) return in[1];
      return -1;
    case KILN_OP_ADD: /* for bool: x or false */
      if (is_zero(w, in[1], dt)) return in[0];
      if (is_zero(w, in[0], dt)) return in[1];
      return -1;
    case KILN_OP_SUB:
      return dt != KILN_BOOL && is_pos_zero(w, in[1], dt) ? in[0] : -1;
    case KILN_OP_DIV:
      return dt != KILN_BOOL && is_one(w, in[1], dt) ? in[0] : -1;
    case KILN_OP_NEG:
    case KILN_OP_NOT:
      return dnode(w, in[0])->op == n->op ? din(w, in[0], 0) : -1;
    case KILN_OP_RESHAPE:
    case KILN_OP_EXPAND:
      return kiln_pass_same_shape(dnode(w, in[0]), n) ? in[0] : -1;
    case KILN_OP_CAST:
      return dnode(w, in[0])->dtype == dt ? in[0] : -1;
    case KILN_OP_CONCAT:
      return n->n_in == 1 ? in[0] : -1;
    case KILN_OP_SLICE: {
      const kiln_gnode *x = dnode(w, in[0]);
      if (!kiln_pass_same_shape(x, n) || n->n_iattr < 2 * n->rank) return -1;
      /* Same extent from start 0: every index is taken (step is then 1 on
       * any axis longer than one; an empty axis selects nothing anyway). */
      for (int d = 0; d < n->rank; d++)
        if (n->shape[d] > 0 && (n->iattr[d] != 0 || (n->shape[d] > 1 && n->iattr[n->rank + d] != 1))) return -1;
      return in[0];
    }
    case KILN_OP_PAD:
      if (n->n_iattr < 2 * n->rank) return -1;
      for (int d = 0; d < 2 * n->rank; d++)
        if (n->iattr[d] != 0) return -1;
      return in[0];
    case KILN_OP_PERMUTE:
      if (n->n_iattr < n->rank) return -1;
      for (int d = 0; d < n->rank; d++)
        if (n->iattr[d] != d) return -1;
      return in[0];
    case KILN_OP_WHERE: {
      kiln_cval c;
      if (in[1] == in[2]) return in[1];
      if (fill_of(w, in[0], KILN_BOOL, &c)) return c.i ? in[1] : in[2];
      return -1;
    }
    default:
      return -1;
  }
}

/* 1 if p (of length r) is a permutation of 0..r-1. */
static int is_perm(const int64_t *p, int r) {
  unsigned seen = 0;
  for (int d = 0; d < r; d++) {
    if (p[d] < 0 || p[d] >= r || (seen >> p[d]) & 1u) return 0;
    seen |= 1u << p[d];
  }
  return 1;
}

/* Collapse op(op(x)) for RESHAPE, PERMUTE and EXPAND into one node on x
 * (or x itself). Returns the replacement, -1 for none (w->status for OOM). */
static int32_t collapse_chain(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in) {
  const kiln_gnode *inner = dnode(w, in[0]);
  if (inner->op != n->op || inner->n_in != 1) return -1;
  int32_t x = din(w, in[0], 0);
  kiln_gnode m = *n;
  if (n->op == KILN_OP_PERMUTE) {
    /* out axis i = inner axis q[i] = x axis p[q[i]] */
    if (n->n_iattr < n->rank || inner->n_iattr < inner->rank || inner->rank != n->rank) return -1;
    if (!is_perm(n->iattr, n->rank) || !is_perm(inner->iattr, n->rank)) return -1;
    int ident = 1;
    for (int d = 0; d < n->rank; d++) {
      m.iattr[d] = inner->iattr[n->iattr[d]];
      ident &= m.iattr[d] == d;
    }
    if (ident) return kiln_pass_coerce(w, n, x);
  } else if (n->op == KILN_OP_EXPAND) {
    /* Only size-1 dims grow, so x has 1 wherever the final shape differs. */
  } else if (n->op != KILN_OP_RESHAPE) {
    return -1;
  }
  /* x's shape back: the identity for a reshape or an expand, not for a permutation (one that swaps axes
   * of equal sizes keeps the shape; the identity permutation returned above) */
  if (n->op != KILN_OP_PERMUTE && kiln_pass_same_shape(dnode(w, x), n)) return kiln_pass_coerce(w, n, x);
  int32_t r = kiln_pass_emit(w, &m, &x);
  if (r < 0) w->status = KILN_ERR_OUT_OF_MEMORY;
  return r;
}

/* add(pad(a), pad(b)), both filled with zeros, padded along one axis ax
 * only, b starting along ax where a ends (or the other way round):
 * pad(concat(a, b)), or concat(a, b) when the two cover the axis. Every
 * element is one operand plus a zero, so this is x + 0 -> x (the -0
 * exception above). It is the gradient of slicing a tensor into parts (a
 * fused projection's q, k and v: three pads summed), which otherwise
 * computes two additions, and for 16-bit floats two roundings, per element
 * of a copy. A concat along ax among a's or b's replacement is flattened, so
 * a chain of such sums becomes one concat. */
enum { PAD_CONCAT_MAX = 64 };
static int32_t pad_concat(kiln_pass_walk *w, const kiln_gnode *n, const int32_t *in) {
  if (n->op != KILN_OP_ADD || n->n_in != 2) return -1;
  int R = n->rank, ax = -1;
  int64_t lo[2], hi[2], len[2];
  double fill = 0.0;
  for (int k = 0; k < 2; k++) {
    const kiln_gnode *p = dnode(w, in[k]);
    kiln_cval v;
    if (p->op != KILN_OP_PAD || p->dtype != n->dtype || !kiln_pass_same_shape(p, n) || p->n_iattr < 2 * R ||
        !kiln_cval_from_fattr(n->dtype, p->fattr, &v) || !kiln_cval_is_zero(n->dtype, v))
      return -1;
    fill = k ? fill + v.f : v.f; /* where neither has data: the sum of the fills (-0 only for two -0) */
    for (int d = 0; d < R; d++)
      if (p->iattr[d] || p->iattr[R + d]) {
        if (ax >= 0 && ax != d) return -1;
        ax = d;
      }
  }
  if (ax < 0) return -1;
  for (int k = 0; k < 2; k++) {
    const kiln_gnode *p = dnode(w, in[k]);
    lo[k] = p->iattr[ax], hi[k] = p->iattr[R + ax], len[k] = dnode(w, din(w, in[k], 0))->shape[ax];
  }
  int f = lo[0] <= lo[1] ? 0 : 1, s = 1 - f;
  if (lo[f] + len[f] != lo[s] || len[f] == 0 || len[s] == 0) return -1;
  int32_t parts[PAD_CONCAT_MAX];
  int np = 0;
  for (int k = 0; k < 2; k++) {
    int32_t x = din(w, in[k == 0 ? f : s], 0);
    const kiln_gnode *xn = dnode(w, x);
    int flat = xn->op == KILN_OP_CONCAT && xn->n_iattr >= 1 && xn->iattr[0] == ax;
    int cnt = flat ? xn->n_in : 1;
    if (np + cnt > PAD_CONCAT_MAX) return -1;
    for (int q = 0; q < cnt; q++) parts[np++] = flat ? din(w, x, q) : x;
  }
  kiln_gnode c = kiln_pass_node_like(n, KILN_OP_CONCAT);
  c.shape[ax] = len[f] + len[s];
  c.n_in = np;
  c.n_iattr = 1;
  c.iattr[0] = ax;
  kiln_gnode pd = kiln_pass_node_like(n, KILN_OP_PAD);
  pd.n_in = 1;
  pd.n_iattr = 2 * R;
  pd.iattr[ax] = lo[f];
  pd.iattr[R + ax] = hi[s];
  pd.fattr = fill;
  int32_t cc = kiln_pass_emit(w, &c, parts);
  if (cc < 0 || (lo[f] == 0 && hi[s] == 0)) return cc;
  return kiln_pass_emit(w, &pd, &cc);
}

static int32_t simplify_rule(kiln_pass_walk *w, int32_t i, const kiln_gnode *n, const int32_t *in) {
  (void)i;
  int32_t x = identity_operand(w, n, in);
  int32_t r = x >= 0 ? kiln_pass_coerce(w, n, x) : -1;
  if (r < 0 && w->status == KILN_OK &&
      (n->op == KILN_OP_RESHAPE || n->op == KILN_OP_PERMUTE || n->op == KILN_OP_EXPAND))
    r = collapse_chain(w, n, in);
  if (r < 0 && w->status == KILN_OK && n->op == KILN_OP_ADD) r = pad_concat(w, n, in);
  if (w->status != KILN_OK) return -1;
  if (r < 0) return kiln_pass_keep(w, n, in);
  w->changes++;
  return r;
}

kiln_status kiln_pass_simplify(const kiln_graph *src, kiln_pgraph *dst, kiln_pass_ctx *ctx, int *changes,
                              int *rebuilt) {
  return kiln_pass_walk_run(src, dst, ctx, simplify_rule, changes, rebuilt);
}
