/* Vector-Jacobian product rules: for each differentiable IR op, the
 * gradients of its inputs as new trace nodes built from the gradient of its
 * output. Every rule is written with IR ops only, so forward, backward and
 * the optimizer update fuse into one graph.
 *
 * In the IR, elementwise inputs already have the output's shape (broadcasts
 * are explicit EXPAND nodes), so elementwise rules never sum over broadcast
 * dimensions: EXPAND's own rule does. */
#include <string.h>

#include "autograd/autograd_internal.h"

typedef struct vctx {
  kiln_frontend *fe;
  kiln_loc loc;
} vctx;

static int64_t numel(int rank, const int64_t *s) {
  int64_t e = 1;
  for (int i = 0; i < rank; i++) e *= s[i];
  return e;
}

/* Builders over nodes; each returns NULL when an input is NULL (out of
 * memory upstream), so a chain fails once at its end. */
static kiln_node *mk(vctx *c, int op, kiln_dtype dt, int rank, const int64_t *shape, int n_in, kiln_node **in,
                     int n_iattr, const int64_t *iattr, double fattr) {
  for (int i = 0; i < n_in; i++)
    if (!in[i]) return NULL;
  return kiln_fe_node(c->fe, op, dt, rank, shape, n_in, in, n_iattr, iattr, fattr, c->loc);
}
static kiln_node *un(vctx *c, int op, kiln_node *a) {
  return a ? mk(c, op, (kiln_dtype)a->dtype, a->rank, a->shape, 1, &a, 0, NULL, 0.0) : NULL;
}
/* Elementwise binary on same-shape operands; predicates give bool. */
static kiln_node *bin(vctx *c, int op, kiln_node *a, kiln_node *b) {
  if (!a || !b) return NULL;
  kiln_node *in[2] = {a, b};
  kiln_dtype dt = kiln_op_is_predicate(op) ? KILN_BOOL : (kiln_dtype)a->dtype;
  return mk(c, op, dt, a->rank, a->shape, 2, in, 0, NULL, 0.0);
}
/* A constant of like's dtype and shape. */
static kiln_node *cst(vctx *c, kiln_node *like, double v) {
  return like ? kiln_api_const(c->fe, (kiln_dtype)like->dtype, like->rank, like->shape, v, c->loc) : NULL;
}
static kiln_node *sel(vctx *c, kiln_node *cond, kiln_node *a, kiln_node *b) {
  if (!cond || !a || !b) return NULL;
  kiln_node *in[3] = {cond, a, b};
  return mk(c, KILN_OP_WHERE, (kiln_dtype)a->dtype, a->rank, a->shape, 3, in, 0, NULL, 0.0);
}
static kiln_node *mulc(vctx *c, kiln_node *a, double v) { return bin(c, KILN_OP_MUL, a, cst(c, a, v)); }
static kiln_node *reshape(vctx *c, kiln_node *a, int rank, const int64_t *shape) {
  return kiln_api_reshape(c->fe, a, rank, shape, c->loc);
}
static kiln_node *expand(vctx *c, kiln_node *a, int rank, const int64_t *shape) {
  return kiln_api_broadcast(c->fe, a, rank, shape, c->loc);
}
static kiln_node *cast(vctx *c, kiln_node *a, kiln_dtype dt) { return kiln_api_cast(c->fe, a, dt, c->loc); }
/* Keepdim sum over the axes in mask. */
static kiln_node *rsum(vctx *c, kiln_node *a, uint64_t mask) {
  if (!a) return NULL;
  if (!mask) return a;
  int64_t s[KILN_MAX_RANK];
  for (int i = 0; i < a->rank; i++) s[i] = (mask >> i) & 1 ? 1 : a->shape[i];
  int64_t attr = (int64_t)mask;
  return mk(c, KILN_OP_REDUCE_SUM, (kiln_dtype)a->dtype, a->rank, s, 1, &a, 1, &attr, 0.0);
}
static kiln_node *permute(vctx *c, kiln_node *a, const int *perm) {
  if (!a) return NULL;
  int64_t s[KILN_MAX_RANK], attr[KILN_MAX_RANK];
  int id = 1;
  for (int i = 0; i < a->rank; i++) {
    s[i] = a->shape[perm[i]];
    attr[i] = perm[i];
    id &= perm[i] == i;
  }
  return id ? a : mk(c, KILN_OP_PERMUTE, (kiln_dtype)a->dtype, a->rank, s, 1, &a, a->rank, attr, 0.0);
}
static kiln_node *swap_last2(vctx *c, kiln_node *a) {
  if (a && kiln_ag_is_swap_last2(a)) return a->in[0]; /* swap(swap(x)) = x: no node */
  int p[KILN_MAX_RANK];
  for (int i = 0; i < a->rank; i++) p[i] = i;
  p[a->rank - 2] = a->rank - 1;
  p[a->rank - 1] = a->rank - 2;
  return permute(c, a, p);
}
static kiln_node *matmul(vctx *c, kiln_node *a, kiln_node *b) {
  if (!a || !b) return NULL;
  int64_t s[KILN_MAX_RANK];
  memcpy(s, a->shape, sizeof(int64_t) * a->rank);
  s[a->rank - 1] = b->shape[b->rank - 1];
  kiln_node *in[2] = {a, b};
  return mk(c, KILN_OP_MATMUL, (kiln_dtype)a->dtype, a->rank, s, 2, in, 0, NULL, 0.0);
}
/* Constant zero padding (lo/hi per axis). */
static kiln_node *pad(vctx *c, kiln_node *a, const int64_t *lo, const int64_t *hi) {
  if (!a) return NULL;
  int64_t s[KILN_MAX_RANK], attr[2 * KILN_MAX_RANK];
  int any = 0;
  for (int i = 0; i < a->rank; i++) {
    s[i] = a->shape[i] + lo[i] + hi[i];
    attr[i] = lo[i];
    attr[a->rank + i] = hi[i];
    any |= lo[i] || hi[i];
  }
  return any ? mk(c, KILN_OP_PAD, (kiln_dtype)a->dtype, a->rank, s, 1, &a, 2 * a->rank, attr, 0.0) : a;
}
/* Step-1 slice: out has shape `shape`, starting at start[]. */
static kiln_node *crop(vctx *c, kiln_node *a, const int64_t *start, const int64_t *shape) {
  if (!a) return NULL;
  int64_t attr[2 * KILN_MAX_RANK];
  int id = 1;
  for (int i = 0; i < a->rank; i++) {
    attr[i] = start[i];
    attr[a->rank + i] = 1;
    id &= start[i] == 0 && shape[i] == a->shape[i];
  }
  return id ? a : mk(c, KILN_OP_SLICE, (kiln_dtype)a->dtype, a->rank, shape, 1, &a, 2 * a->rank, attr, 0.0);
}
/* Clamp integer indices to [0, d) as INDEX_SELECT and GATHER do. */
static kiln_node *clamp_idx(vctx *c, kiln_node *ix, int64_t d) {
  kiln_node *lo = bin(c, KILN_OP_MAX, ix, cst(c, ix, 0.0));
  return bin(c, KILN_OP_MIN, lo, cst(c, ix, (double)(d - 1)));
}
static kiln_node *iota(vctx *c, kiln_dtype dt, int rank, const int64_t *shape, int64_t axis) {
  return mk(c, KILN_OP_IOTA, dt, rank, shape, 0, NULL, 1, &axis, 0.0);
}

int kiln_ag_is_swap_last2(const kiln_node *n) {
  if (n->op != KILN_OP_PERMUTE || n->rank < 2 || n->n_iattr < n->rank) return 0;
  for (int i = 0; i < n->rank - 2; i++)
    if (n->iattr[i] != i) return 0;
  return n->iattr[n->rank - 2] == n->rank - 1 && n->iattr[n->rank - 1] == n->rank - 2;
}

kiln_node *kiln_ag_transposed_matmul(kiln_frontend *fe, kiln_node *mm, kiln_loc loc) {
  vctx c = {fe, loc};
  return matmul(&c, swap_last2(&c, mm->in[1]), swap_last2(&c, mm->in[0]));
}

int kiln_ag_differentiable(int op) {
  switch (op) {
    case KILN_OP_NEG: case KILN_OP_ABS: case KILN_OP_EXP: case KILN_OP_LOG: case KILN_OP_SQRT:
    case KILN_OP_RSQRT: case KILN_OP_TANH: case KILN_OP_SIGMOID: case KILN_OP_RELU: case KILN_OP_GELU:
    case KILN_OP_GELU_TANH: case KILN_OP_CAST: case KILN_OP_ADD: case KILN_OP_SUB: case KILN_OP_MUL:
    case KILN_OP_DIV: case KILN_OP_POW: case KILN_OP_MAX: case KILN_OP_MIN: case KILN_OP_WHERE:
    case KILN_OP_REDUCE_SUM: case KILN_OP_REDUCE_MAX: case KILN_OP_REDUCE_MIN: case KILN_OP_RESHAPE:
    case KILN_OP_PERMUTE: case KILN_OP_EXPAND: case KILN_OP_SLICE: case KILN_OP_CONCAT: case KILN_OP_PAD:
    case KILN_OP_INDEX_SELECT: case KILN_OP_GATHER: case KILN_OP_MATMUL:
      return 1;
    default:
      return 0;
  }
}

/* d/dx gelu(x) = Phi(x) + x phi(x). There is no erf op, so Phi(x) is read
 * back from the forward value: gelu(x) / x (Phi(0) = 1/2). The division is
 * exact to rounding because gelu(x) is computed as x * (...). */
static kiln_node *gelu_grad(vctx *c, kiln_node *x, kiln_node *y, kiln_node *g) {
  kiln_node *z = bin(c, KILN_OP_EQ, x, cst(c, x, 0.0));
  kiln_node *phi_cdf = sel(c, z, cst(c, x, 0.5), bin(c, KILN_OP_DIV, y, sel(c, z, cst(c, x, 1.0), x)));
  kiln_node *e = un(c, KILN_OP_EXP, mulc(c, bin(c, KILN_OP_MUL, x, x), -0.5));
  kiln_node *pdf = mulc(c, e, 0.39894228040143267794); /* 1/sqrt(2 pi) */
  return bin(c, KILN_OP_MUL, g, bin(c, KILN_OP_ADD, phi_cdf, bin(c, KILN_OP_MUL, x, pdf)));
}

/* y = 0.5 x (1 + t), t = tanh(u), u = k0 (x + k1 x^3):
 * dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k0 (1 + 3 k1 x^2). */
static kiln_node *gelu_tanh_grad(vctx *c, kiln_node *x, kiln_node *g) {
  const double k0 = 0.79788456080286535588, k1 = 0.044715;
  kiln_node *x2 = bin(c, KILN_OP_MUL, x, x);
  kiln_node *u = mulc(c, bin(c, KILN_OP_ADD, x, mulc(c, bin(c, KILN_OP_MUL, x2, x), k1)), k0);
  kiln_node *t = un(c, KILN_OP_TANH, u);
  kiln_node *a = mulc(c, bin(c, KILN_OP_ADD, t, cst(c, t, 1.0)), 0.5);
  kiln_node *sech2 = bin(c, KILN_OP_SUB, cst(c, t, 1.0), bin(c, KILN_OP_MUL, t, t));
  kiln_node *du = mulc(c, bin(c, KILN_OP_ADD, cst(c, x, 1.0), mulc(c, x2, 3.0 * k1)), 0.5 * k0);
  kiln_node *b = bin(c, KILN_OP_MUL, bin(c, KILN_OP_MUL, x, sech2), du);
  return bin(c, KILN_OP_MUL, g, bin(c, KILN_OP_ADD, a, b));
}

/* SLICE: scatter g back into zeros of x's shape. A step s > 1 on an axis is
 * undone by interleaving: [L] -> [L,1] -> pad to [L,s] -> [L*s], which puts
 * g[i] at i*s; then crop to what fits and pad by the start. */
static kiln_node *slice_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0];
  int r = n->rank;
  const int64_t *start = n->iattr, *step = n->iattr + r;
  if (numel(r, n->shape) == 0) return cst(c, x, 0.0);
  kiln_node *cur = g;
  for (int d = 0; d < r && cur; d++) {
    if (step[d] == 1) continue;
    if (r + 1 > KILN_MAX_RANK) {
      kiln_error(KILN_ERR_UNSUPPORTED, c->loc,
                 "backward: the gradient of a strided slice of a rank-%d tensor is not supported (rank limit %d)", r,
                 KILN_MAX_RANK);
      return NULL;
    }
    int64_t s1[KILN_MAX_RANK], lo[KILN_MAX_RANK] = {0}, hi[KILN_MAX_RANK] = {0}, s2[KILN_MAX_RANK];
    int k = 0;
    for (int i = 0; i < r; i++) {
      s1[k++] = cur->shape[i];
      if (i == d) s1[k++] = 1;
    }
    hi[d + 1] = step[d] - 1;
    kiln_node *p = pad(c, reshape(c, cur, r + 1, s1), lo, hi);
    memcpy(s2, cur->shape, sizeof(int64_t) * r);
    s2[d] = cur->shape[d] * step[d];
    cur = reshape(c, p, r, s2);
    int64_t room = x->shape[d] - start[d];
    if (cur && s2[d] > room) {
      int64_t z[KILN_MAX_RANK] = {0};
      s2[d] = room;
      cur = crop(c, cur, z, s2);
    }
  }
  if (!cur) return NULL;
  int64_t lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
  for (int d = 0; d < r; d++) {
    lo[d] = start[d];
    hi[d] = x->shape[d] - start[d] - cur->shape[d];
  }
  return pad(c, cur, lo, hi);
}

/* INDEX_SELECT: scatter-add as a matmul with a one-hot matrix:
 * gx[A, D, B] = onehot[D, N] @ g[A, N, B]. */
static kiln_node *index_select_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0], *ix = n->in[1];
  int a = (int)n->iattr[0];
  int64_t D = x->shape[a], A = numel(a, x->shape), B = numel(x->rank - a - 1, x->shape + a + 1);
  int64_t N = numel(ix->rank, ix->shape);
  if (N == 0 || numel(x->rank, x->shape) == 0) return cst(c, x, 0.0);
  int64_t s1n[2] = {1, N}, sdn[2] = {D, N};
  kiln_node *ci = reshape(c, clamp_idx(c, ix, D), 2, s1n);
  kiln_node *eq = bin(c, KILN_OP_EQ, expand(c, ci, 2, sdn), iota(c, (kiln_dtype)ix->dtype, 2, sdn, 0));
  kiln_node *oh = cast(c, eq, (kiln_dtype)g->dtype);
  kiln_node *r;
  if (A == 1) {
    int64_t snb[2] = {N, B};
    r = matmul(c, oh, reshape(c, g, 2, snb));
  } else {
    int64_t sanb[3] = {A, N, B}, s1dn[3] = {1, D, N}, sadn[3] = {A, D, N};
    r = matmul(c, expand(c, reshape(c, oh, 3, s1dn), 3, sadn), reshape(c, g, 3, sanb));
  }
  return reshape(c, r, x->rank, x->shape);
}

/* GATHER: out[.., i, ..] = x[.., idx[.., i, ..], ..] along axis a. With a
 * new axis after a holding x's positions k: T[.., i, k, ..] = g where
 * idx == k; summing over i gives the scatter-add, and zero padding covers
 * the positions of other axes that idx does not reach. */
static kiln_node *gather_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0], *ix = n->in[1];
  int a = (int)n->iattr[0], r = x->rank;
  int64_t Xa = x->shape[a];
  if (numel(ix->rank, ix->shape) == 0) return cst(c, x, 0.0);
  if (r + 1 > KILN_MAX_RANK) {
    kiln_error(KILN_ERR_UNSUPPORTED, c->loc, "backward: the gradient of gather on a rank-%d tensor is not supported",
               r);
    return NULL;
  }
  int64_t t[KILN_MAX_RANK], t1[KILN_MAX_RANK], o[KILN_MAX_RANK];
  int k = 0;
  for (int i = 0; i < r; i++) {
    t[k] = t1[k] = ix->shape[i];
    k++;
    if (i == a) {
      t[k] = Xa;
      t1[k] = 1;
      k++;
    }
  }
  kiln_node *ci = expand(c, reshape(c, clamp_idx(c, ix, Xa), r + 1, t1), r + 1, t);
  kiln_node *eq = bin(c, KILN_OP_EQ, ci, iota(c, (kiln_dtype)ix->dtype, r + 1, t, a + 1));
  kiln_node *gx = expand(c, reshape(c, g, r + 1, t1), r + 1, t);
  kiln_node *s = rsum(c, sel(c, eq, gx, cst(c, gx, 0.0)), 1ULL << a);
  for (int i = 0; i < r; i++) o[i] = i == a ? Xa : ix->shape[i];
  int64_t lo[KILN_MAX_RANK] = {0}, hi[KILN_MAX_RANK];
  for (int i = 0; i < r; i++) hi[i] = x->shape[i] - o[i];
  return pad(c, reshape(c, s, r, o), lo, hi);
}

/* REDUCE_MAX / REDUCE_MIN: the gradient is spread evenly over the elements
 * equal to the extremum (as torch.amax/amin do). x is usually recomputed by
 * the backward kernel and compared for equality with the max the forward
 * kernel stored: exact only because generated code computes an expression
 * identically wherever it appears (-ffp-contract=off, no implicit
 * reassociation, scalar libm; docs/codegen.md §4a). */
static kiln_node *extremum_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0];
  uint64_t mask = (uint64_t)n->iattr[0];
  kiln_node *hit = bin(c, KILN_OP_EQ, x, expand(c, n, x->rank, x->shape));
  kiln_node *cnt = rsum(c, cast(c, hit, (kiln_dtype)x->dtype), mask);
  kiln_node *share = expand(c, bin(c, KILN_OP_DIV, g, cnt), x->rank, x->shape);
  return sel(c, hit, share, cst(c, x, 0.0));
}

int kiln_ag_vjp(kiln_frontend *fe, kiln_node *n, kiln_node *g, const uint8_t *want, kiln_node **gin,
                kiln_loc loc) {
  vctx cx = {fe, loc}, *c = &cx;
  for (int k = 0; k < n->n_in; k++) gin[k] = NULL;
  kiln_node *x = n->n_in > 0 ? n->in[0] : NULL, *y = n->n_in > 1 ? n->in[1] : NULL;
  kiln_node **g0 = &gin[0], **g1 = n->n_in > 1 ? &gin[1] : NULL;
  switch (n->op) {
    case KILN_OP_NEG: *g0 = un(c, KILN_OP_NEG, g); break;
    case KILN_OP_ABS: {
      kiln_node *pos = bin(c, KILN_OP_GT, x, cst(c, x, 0.0)), *neg = bin(c, KILN_OP_LT, x, cst(c, x, 0.0));
      *g0 = sel(c, pos, g, sel(c, neg, un(c, KILN_OP_NEG, g), cst(c, g, 0.0))); /* sign(0) = 0 */
      break;
    }
    case KILN_OP_EXP: *g0 = bin(c, KILN_OP_MUL, g, n); break;
    case KILN_OP_LOG: *g0 = bin(c, KILN_OP_DIV, g, x); break;
    case KILN_OP_SQRT: *g0 = bin(c, KILN_OP_DIV, mulc(c, g, 0.5), n); break;
    case KILN_OP_RSQRT: /* d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3 */
      *g0 = bin(c, KILN_OP_MUL, mulc(c, g, -0.5), bin(c, KILN_OP_MUL, n, bin(c, KILN_OP_MUL, n, n)));
      break;
    case KILN_OP_TANH:
      *g0 = bin(c, KILN_OP_MUL, g, bin(c, KILN_OP_SUB, cst(c, n, 1.0), bin(c, KILN_OP_MUL, n, n)));
      break;
    case KILN_OP_SIGMOID:
      *g0 = bin(c, KILN_OP_MUL, g, bin(c, KILN_OP_MUL, n, bin(c, KILN_OP_SUB, cst(c, n, 1.0), n)));
      break;
    case KILN_OP_RELU: *g0 = sel(c, bin(c, KILN_OP_GT, x, cst(c, x, 0.0)), g, cst(c, g, 0.0)); break;
    case KILN_OP_GELU: *g0 = gelu_grad(c, x, n, g); break;
    case KILN_OP_GELU_TANH: *g0 = gelu_tanh_grad(c, x, g); break;
    case KILN_OP_CAST:
      if (kiln_dtype_is_float((kiln_dtype)x->dtype)) *g0 = cast(c, g, (kiln_dtype)x->dtype);
      break;
    case KILN_OP_ADD:
      *g0 = g;
      *g1 = g;
      break;
    case KILN_OP_SUB:
      *g0 = g;
      if (want[1]) *g1 = un(c, KILN_OP_NEG, g);
      break;
    case KILN_OP_MUL:
      if (want[0]) *g0 = bin(c, KILN_OP_MUL, g, y);
      if (want[1]) *g1 = bin(c, KILN_OP_MUL, g, x);
      break;
    case KILN_OP_DIV:
      if (want[0]) *g0 = bin(c, KILN_OP_DIV, g, y);
      if (want[1]) *g1 = un(c, KILN_OP_NEG, bin(c, KILN_OP_DIV, bin(c, KILN_OP_MUL, g, n), y));
      break;
    case KILN_OP_POW: /* as PyTorch: no gradient through b == 0 (for a) or a == 0 (for b) */
      if (want[0]) {
        kiln_node *d = bin(c, KILN_OP_MUL, y, bin(c, KILN_OP_POW, x, bin(c, KILN_OP_SUB, y, cst(c, y, 1.0))));
        *g0 = sel(c, bin(c, KILN_OP_EQ, y, cst(c, y, 0.0)), cst(c, g, 0.0), bin(c, KILN_OP_MUL, g, d));
      }
      if (want[1]) {
        kiln_node *d = bin(c, KILN_OP_MUL, n, un(c, KILN_OP_LOG, x));
        *g1 = sel(c, bin(c, KILN_OP_EQ, x, cst(c, x, 0.0)), cst(c, g, 0.0), bin(c, KILN_OP_MUL, g, d));
      }
      break;
    case KILN_OP_MAX:
    case KILN_OP_MIN: { /* ties split the gradient evenly, as PyTorch does */
      int wins = n->op == KILN_OP_MAX ? KILN_OP_GT : KILN_OP_LT;
      kiln_node *share = sel(c, bin(c, wins, x, y), cst(c, g, 1.0),
                             sel(c, bin(c, KILN_OP_EQ, x, y), cst(c, g, 0.5), cst(c, g, 0.0)));
      if (want[0]) *g0 = bin(c, KILN_OP_MUL, g, share);
      if (want[1]) *g1 = bin(c, KILN_OP_MUL, g, bin(c, KILN_OP_SUB, cst(c, g, 1.0), share));
      break;
    }
    case KILN_OP_WHERE: /* the condition carries no gradient */
      if (want[1]) gin[1] = sel(c, x, g, cst(c, g, 0.0));
      if (want[2]) gin[2] = sel(c, x, cst(c, g, 0.0), g);
      break;
    case KILN_OP_REDUCE_SUM: *g0 = expand(c, g, x->rank, x->shape); break;
    case KILN_OP_REDUCE_MAX:
    case KILN_OP_REDUCE_MIN: *g0 = extremum_grad(c, n, g); break;
    case KILN_OP_RESHAPE: *g0 = reshape(c, g, x->rank, x->shape); break;
    case KILN_OP_PERMUTE: {
      int inv[KILN_MAX_RANK];
      for (int i = 0; i < n->rank; i++) inv[n->iattr[i]] = i;
      *g0 = permute(c, g, inv);
      break;
    }
    case KILN_OP_EXPAND: {
      uint64_t mask = 0;
      for (int i = 0; i < n->rank; i++)
        if (x->shape[i] == 1 && n->shape[i] != 1) mask |= 1ULL << i;
      *g0 = reshape(c, rsum(c, g, mask), x->rank, x->shape);
      break;
    }
    case KILN_OP_SLICE: *g0 = slice_grad(c, n, g); break;
    case KILN_OP_CONCAT: {
      int a = (int)n->iattr[0];
      int64_t start[KILN_MAX_RANK] = {0};
      for (int k = 0; k < n->n_in; k++) {
        if (want[k]) gin[k] = crop(c, g, start, n->in[k]->shape);
        start[a] += n->in[k]->shape[a];
      }
      break;
    }
    case KILN_OP_PAD: *g0 = crop(c, g, n->iattr, x->shape); break;
    case KILN_OP_INDEX_SELECT: *g0 = index_select_grad(c, n, g); break;
    case KILN_OP_GATHER: *g0 = gather_grad(c, n, g); break;
    case KILN_OP_MATMUL:
      if (want[0]) *g0 = matmul(c, g, swap_last2(c, y));
      if (want[1]) *g1 = matmul(c, swap_last2(c, x), g);
      break;
    default: return 0; /* no gradient flows through this op */
  }
  for (int k = 0; k < n->n_in; k++) {
    if (!want[k]) gin[k] = NULL;
    else if (!gin[k] && kiln_ag_differentiable(n->op) && !(n->op == KILN_OP_WHERE && k == 0) &&
             !((n->op == KILN_OP_INDEX_SELECT || n->op == KILN_OP_GATHER) && k == 1)) {
      if (kiln_last_status() == KILN_OK)
        kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "backward: out of memory building the gradient of %s",
                   kiln_op_name(n->op));
      return -1;
    }
  }
  return 0;
}
