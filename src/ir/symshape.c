/* Symbolic dimensions of a graph (symshape.h): inference. The family hash,
 * binding, instances and printing are in symshape_family.c. */
#include "ir/symshape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

#define R KILN_MAX_RANK

/* Inference state: dims as in kiln_symshape, and whether each is decided. */
typedef struct inf {
  const kiln_graph *g;
  kiln_symshape *s;
  uint8_t *known; /* [n_nodes][R] */
  int changed;
  /* symbols found to be one size up to a factor (a union-find with
   * multipliers: s_k = mult[k] * s_parent[k]) */
  int parent[KILN_SYM_MAX];
  int64_t mult[KILN_SYM_MAX];
  int united;
  /* 1 while the rules that tie sizes run to their fixed point: a slice or
   * pad along a symbolic size is decided as that size plus a constant only
   * after them (x[T-U:] added to y [U] is U, not T - 11) */
  int ties_only;
} inf;

static int sym_root(inf *c, int k, int64_t *m) {
  int64_t f = 1;
  while (c->parent[k] != k) {
    f *= c->mult[k];
    k = c->parent[k];
  }
  *m = f;
  return k;
}

/* Two decided sizes that must be equal: when they are ca * s_x and cb * s_y
 * (single symbols) with one a multiple of the other, the two symbols are one
 * size up to that factor (a padding mask [B, T] and the B*T tokens of a
 * flattened loss). */
static void tie(inf *c, kiln_symdim a, kiln_symdim b) {
  if (!a.mask || !b.mask || a.mask == b.mask || a.add || b.add || a.mask2 || b.mask2) return;
  if (__builtin_popcount(a.mask) != 1 || __builtin_popcount(b.mask) != 1) return;
  int64_t mx, my;
  int x = sym_root(c, __builtin_ctz(a.mask), &mx), y = sym_root(c, __builtin_ctz(b.mask), &my);
  if (x == y) return;
  int64_t fx = a.coeff * mx, fy = b.coeff * my; /* fx * s_x = fy * s_y */
  if (fx <= 0 || fy <= 0) return;
  if (fy % fx == 0) c->parent[x] = y, c->mult[x] = fy / fx; /* s_x = (fy / fx) s_y */
  else if (fx % fy == 0) c->parent[y] = x, c->mult[y] = fx / fy;
  else return;
  c->united = 1;
}

static int symdim_same(const kiln_symdim *a, const kiln_symdim *b) {
  return a->mask == b->mask && a->coeff == b->coeff && a->add == b->add && a->mask2 == b->mask2 &&
         (!a->mask2 || a->coeff2 == b->coeff2);
}

static kiln_symdim *dim_at(inf *c, int32_t i, int d) { return &c->s->dims[(size_t)i * R + (size_t)d]; }
static int is_known(inf *c, int32_t i, int d) { return c->known[(size_t)i * R + (size_t)d]; }

/* A size at the symbol values the inference started from (-1 when it overflows). */
static int64_t eval(const kiln_symshape *s, kiln_symdim v) {
  int64_t x = kiln_symdim_at(s, s->value, &v);
  return x == INT64_MIN ? -1 : x;
}

/* Two monomials (mask a, coeff ca; mask b, coeff cb; either may be absent:
 * mask 0 or coeff 0) and a constant, as a canonical kiln_symdim in *out: 0
 * when it needs a constant term the masks cannot hold (never: add is
 * separate) or is no symbolic size at all. */
static int poly2(uint8_t ma, int64_t ca, uint8_t mb, int64_t cb, int64_t add, kiln_symdim *out) {
  if (!ma || !ca) ma = 0, ca = 0;
  if (!mb || !cb) mb = 0, cb = 0;
  if (ma && ma == mb) {
    if (__builtin_add_overflow(ca, cb, &ca)) return 0;
    mb = 0, cb = 0;
    if (!ca) ma = 0;
  }
  if (!ma) ma = mb, ca = cb, mb = 0, cb = 0;
  if (!ma) return 0;
  int pa = __builtin_popcount(ma), pb = __builtin_popcount(mb);
  if (mb && (pb > pa || (pb == pa && mb < ma))) { /* the higher degree first, then the lower symbols */
    uint8_t t = ma;
    int64_t tc = ca;
    ma = mb, ca = cb, mb = t, cb = tc;
  }
  *out = (kiln_symdim){ma, ca, add, mb, cb};
  return 1;
}

/* a + b, when it has at most two monomials. */
static int poly_add(kiln_symdim a, kiln_symdim b, kiln_symdim *out) {
  uint8_t m[4] = {a.mask, a.mask2, b.mask, b.mask2};
  int64_t c[4] = {a.mask ? a.coeff : 0, a.mask2 ? a.coeff2 : 0, b.mask ? b.coeff : 0, b.mask2 ? b.coeff2 : 0};
  uint8_t um[2] = {0, 0};
  int64_t uc[2] = {0, 0};
  int n = 0;
  for (int i = 0; i < 4; i++) {
    if (!m[i] || !c[i]) continue;
    int k = 0;
    while (k < n && um[k] != m[i]) k++;
    if (k == n) {
      if (n == 2) return 0;
      um[n++] = m[i];
    }
    if (__builtin_add_overflow(uc[k], c[i], &uc[k])) return 0;
  }
  int64_t add;
  if (__builtin_add_overflow(a.add, b.add, &add)) return 0;
  return poly2(um[0], uc[0], um[1], uc[1], add, out);
}

/* Decide dimension d of node i as v, when undecided and v gives its size
 * (a symbolic value that does not is not taken: the size stays open). */
static void set(inf *c, int32_t i, int d, kiln_symdim v) {
  if (is_known(c, i, d)) return;
  const kiln_gnode *n = &c->g->nodes[i];
  if (v.mask && eval(c->s, v) != n->shape[d]) return;
  if (!v.mask) v = (kiln_symdim){0, n->shape[d], 0, 0, 0};
  *dim_at(c, i, d) = v;
  c->known[(size_t)i * R + (size_t)d] = 1;
  c->changed = 1;
}

static void set_const(inf *c, int32_t i, int d) { set(c, i, d, (kiln_symdim){0, 0, 0, 0, 0}); }

/* Dimension dj of node j and di of node i are the same size: whichever is
 * decided decides the other (the first symbolic one wins for outputs). */
static void same(inf *c, int32_t i, int di, int32_t j, int dj) {
  if (is_known(c, j, dj) && !is_known(c, i, di)) set(c, i, di, *dim_at(c, j, dj));
  else if (is_known(c, i, di) && !is_known(c, j, dj)) set(c, j, dj, *dim_at(c, i, di));
  else if (is_known(c, i, di)) tie(c, *dim_at(c, i, di), *dim_at(c, j, dj));
}

/* Elementwise and other same-shape ops: an output dimension is symbolic as
 * soon as one input's is, a constant when a decided input's is a constant
 * and none is symbolic; it then decides its undecided inputs (a constant or
 * a broadcast whose size came from the program). */
static void rule_same_shape(inf *c, int32_t i, int n_in, const int32_t *in) {
  const kiln_gnode *n = &c->g->nodes[i];
  for (int d = 0; d < n->rank; d++) {
    int any = 0;
    for (int k = 0; k < n_in; k++) {
      if (c->g->nodes[in[k]].rank != n->rank || !is_known(c, in[k], d)) continue;
      any = 1;
      if (dim_at(c, in[k], d)->mask) {
        set(c, i, d, *dim_at(c, in[k], d));
        tie(c, *dim_at(c, i, d), *dim_at(c, in[k], d));
      }
    }
    if (any) set_const(c, i, d);
    if (is_known(c, i, d))
      for (int k = 0; k < n_in; k++)
        if (c->g->nodes[in[k]].rank == n->rank) same(c, i, d, in[k], d);
  }
}

/* A reshape: the two-pointer grouping of the input and output dimensions
 * other than 1 (a size 1 is a constant wherever it is) whose products
 * agree. A 1:1 group keeps the value; a merge multiplies the monomials
 * (constant when two share a symbol); a split of a symbolic size gives the
 * symbols to the output dimensions that can carry them. Groups are lists
 * of dimension numbers (ia of the input, ib of the output). */
static void merge_group(inf *c, int32_t i, int32_t x, const int *ia, int na, int b0) {
  kiln_symdim v = {0, 1, 0, 0, 0}, off = {0, 0, 0, 0, 0};
  int has_off = 0;
  for (int k = 0; k < na; k++) {
    if (!is_known(c, x, ia[k])) return;
    kiln_symdim u = *dim_at(c, x, ia[k]);
    if (u.mask && (u.add || u.mask2)) { /* a sum: at most one, times the monomials of the others */
      if (has_off) return set_const(c, i, b0);
      off = u, has_off = 1;
      continue;
    }
    int64_t f = u.mask ? u.coeff : c->g->nodes[x].shape[ia[k]];
    if (u.mask & v.mask) return set_const(c, i, b0); /* a square: not a monomial */
    v.mask |= u.mask;
    if (__builtin_mul_overflow(v.coeff, f, &v.coeff)) return set_const(c, i, b0);
  }
  if (has_off) { /* (c1 m1 + c2 m2 + a) * (k M) = c1 k m1 M + c2 k m2 M + a k M: two monomials at most */
    if ((off.mask & v.mask) || (off.mask2 & v.mask) || (off.mask2 && off.add && v.mask)) return set_const(c, i, b0);
    int64_t c1, c2 = 0, a = 0;
    if (__builtin_mul_overflow(off.coeff, v.coeff, &c1) || (off.mask2 && __builtin_mul_overflow(off.coeff2, v.coeff, &c2)) ||
        __builtin_mul_overflow(off.add, v.coeff, &a))
      return set_const(c, i, b0);
    kiln_symdim w;
    int ok = v.mask ? (off.mask2 ? poly2(off.mask | v.mask, c1, off.mask2 | v.mask, c2, 0, &w)
                                 : poly2(off.mask | v.mask, c1, v.mask, a, 0, &w))
                    : poly2(off.mask, c1, off.mask2, c2, a, &w);
    if (!ok) return set_const(c, i, b0);
    v = w;
  }
  set(c, i, b0, v);
}

/* A split of one size u into the output dimensions ib[0..nb): innermost
 * first, each takes a subset of the symbols still left (the largest that
 * fits first) and a factor of the coefficient left; all of u must be used,
 * else the dimensions stay constants. */
static void split_group(inf *c, int32_t i, int32_t x, int a0, const int *ib, int nb) {
  const kiln_gnode *n = &c->g->nodes[i];
  if (!is_known(c, x, a0)) return;
  kiln_symdim u = *dim_at(c, x, a0), pick[R];
  uint8_t left = u.mask;
  int64_t cleft = u.coeff;
  int ok = u.mask != 0 && !u.add && !u.mask2;
  for (int q = nb - 1; ok && q >= 0; q--) {
    int b = ib[q];
    ok = 0;
    for (unsigned sub = left;; sub = (sub - 1) & left) {
      int64_t p = eval(c->s, (kiln_symdim){(uint8_t)sub, 1, 0, 0, 0});
      if (p > 0 && n->shape[b] % p == 0 && n->shape[b] / p > 0 && cleft % (n->shape[b] / p) == 0) {
        pick[q] = (kiln_symdim){(uint8_t)sub, n->shape[b] / p, 0, 0, 0};
        left &= (uint8_t)~sub;
        cleft /= n->shape[b] / p;
        ok = 1;
        break;
      }
      if (!sub) break;
    }
  }
  ok = ok && !left && cleft == 1;
  for (int q = 0; q < nb; q++) {
    if (ok && pick[q].mask) set(c, i, ib[q], pick[q]);
    else set_const(c, i, ib[q]);
  }
}

static void rule_reshape(inf *c, int32_t i, int32_t x) {
  const kiln_gnode *n = &c->g->nodes[i], *xn = &c->g->nodes[x];
  int da[R], db[R], na = 0, nb = 0;
  for (int d = 0; d < n->rank; d++) {
    if (n->shape[d] == 1) set_const(c, i, d);
    else db[nb++] = d;
  }
  for (int d = 0; d < xn->rank; d++)
    if (xn->shape[d] != 1) da[na++] = d;
  if (kiln_gnode_numel(n) <= 0) {
    for (int d = 0; d < n->rank; d++) set_const(c, i, d);
    return;
  }
  int a = 0, b = 0;
  while (a < na || b < nb) {
    int a0 = a, b0 = b;
    int64_t pa = a < na ? xn->shape[da[a++]] : 1, pb = b < nb ? n->shape[db[b++]] : 1;
    while (pa != pb) {
      if (pa < pb && a < na) pa *= xn->shape[da[a++]];
      else if (pb < pa && b < nb) pb *= n->shape[db[b++]];
      else return; /* cannot happen for a verified graph: leave it open */
    }
    if (a - a0 == 1 && b - b0 == 1) same(c, i, db[b0], x, da[a0]);
    else if (b - b0 == 1) merge_group(c, i, x, da + a0, a - a0, db[b0]);
    else if (a - a0 == 1) split_group(c, i, x, da[a0], db + b0, b - b0);
    else
      for (int o = b0; o < b; o++) set_const(c, i, db[o]);
  }
}

/* EXPAND: a dimension broadcast from 1 is decided by the op that consumes it
 * (backwards), otherwise it is the input's. */
static void rule_expand(inf *c, int32_t i, int32_t x) {
  const kiln_gnode *n = &c->g->nodes[i], *xn = &c->g->nodes[x];
  for (int d = 0; d < n->rank; d++) {
    if (xn->shape[d] == n->shape[d]) same(c, i, d, x, d);
    else if (!is_known(c, x, d)) set_const(c, x, d); /* a size-1 dimension */
  }
}

static int full_slice(const kiln_gnode *n, const kiln_gnode *x, int d) {
  return n->iattr[d] == 0 && n->iattr[n->rank + d] == 1 && n->shape[d] == x->shape[d];
}

static int pad_free(const kiln_gnode *n, int d) { return n->iattr[d] == 0 && n->iattr[n->rank + d] == 0; }

/* A slice or pad along a symbolic size: the output is the input's size
 * plus what it adds (a pad) or minus what it drops (a slice of step 1 that
 * keeps the larger part, as x[:, :-1] or x[:, 1:]: a slice keeping the
 * smaller part, x[:, :2], keeps a fixed number of elements, a constant). */
static void offset_dim(inf *c, int32_t i, int d, int32_t x) {
  const kiln_gnode *n = &c->g->nodes[i], *xn = &c->g->nodes[x];
  if (c->ties_only) return;
  if (!is_known(c, x, d)) return; /* decided later (an index_select's length the iota guess gives) */
  if (!dim_at(c, x, d)->mask) return set_const(c, i, d);
  kiln_symdim v = *dim_at(c, x, d);
  int64_t delta = n->shape[d] - xn->shape[d];
  if (n->op == KILN_OP_SLICE && (n->iattr[n->rank + d] != 1 || -delta >= n->shape[d])) return set_const(c, i, d);
  if (__builtin_add_overflow(v.add, delta, &v.add)) return set_const(c, i, d);
  set(c, i, d, v);
}

/* The concatenated axis: the sum of the parts, when the symbolic parts
 * share their symbols (T + T = 2T, T + 3); a constant otherwise. */
static void concat_axis(inf *c, int32_t i, int d, int n_in, const int32_t *in) {
  kiln_symdim v = {0, 0, 0, 0, 0};
  int64_t fixed = 0;
  for (int k = 0; k < n_in; k++) {
    if (!is_known(c, in[k], d)) return;
    kiln_symdim u = *dim_at(c, in[k], d);
    if (!u.mask) {
      if (__builtin_add_overflow(fixed, c->g->nodes[in[k]].shape[d], &fixed)) return set_const(c, i, d);
      continue;
    }
    if (!v.mask) v = u;
    else if (!poly_add(v, u, &v)) return set_const(c, i, d); /* three monomials (T + U + V) */
  }
  if (!v.mask || __builtin_add_overflow(v.add, fixed, &v.add)) return set_const(c, i, d);
  set(c, i, d, v);
}

static void rule_index_select(inf *c, int32_t i, const int32_t *in) {
  const kiln_gnode *n = &c->g->nodes[i], *x = &c->g->nodes[in[0]], *ix = &c->g->nodes[in[1]];
  int axis = (int)n->iattr[0];
  for (int d = 0; d < axis; d++) same(c, i, d, in[0], d);
  for (int d = 0; d < ix->rank; d++) same(c, i, axis + d, in[1], d);
  for (int d = axis + 1; d < x->rank; d++) same(c, i, d - 1 + ix->rank, in[0], d);
}

static void rule_matmul(inf *c, int32_t i, const int32_t *in) {
  const kiln_gnode *n = &c->g->nodes[i];
  int r = n->rank;
  for (int d = 0; d < r - 2; d++) {
    same(c, i, d, in[0], d);
    same(c, i, d, in[1], d);
  }
  same(c, i, r - 2, in[0], r - 2);
  same(c, i, r - 1, in[1], r - 1);
  same(c, in[0], r - 1, in[1], r - 2); /* the contracted size */
}

static void rule_collective(inf *c, int32_t i, int32_t x) {
  const kiln_gnode *n = &c->g->nodes[i];
  for (int d = 0; d < n->rank; d++) {
    if (n->op == KILN_OP_ALL_GATHER && d == n->iattr[0]) {
      if (!is_known(c, x, d)) continue;
      kiln_symdim v = *dim_at(c, x, d);
      int64_t w = n->iattr[1];
      if (v.mask && !__builtin_mul_overflow(v.coeff, w, &v.coeff) && !__builtin_mul_overflow(v.add, w, &v.add) &&
          !__builtin_mul_overflow(v.coeff2, w, &v.coeff2))
        set(c, i, d, v);
      else
        set_const(c, i, d);
    } else {
      same(c, i, d, x, d);
    }
  }
}

static void rule_move(inf *c, int32_t i, const int32_t *in) {
  const kiln_gnode *n = &c->g->nodes[i], *x = &c->g->nodes[in[0]];
  switch (n->op) {
    case KILN_OP_RESHAPE: rule_reshape(c, i, in[0]); break;
    case KILN_OP_EXPAND: rule_expand(c, i, in[0]); break;
    case KILN_OP_PERMUTE:
      for (int d = 0; d < n->rank; d++) same(c, i, d, in[0], (int)n->iattr[d]);
      break;
    case KILN_OP_SLICE:
    case KILN_OP_PAD:
      for (int d = 0; d < n->rank; d++) {
        int keep = n->op == KILN_OP_SLICE ? full_slice(n, x, d) : pad_free(n, d);
        if (keep) same(c, i, d, in[0], d);
        else offset_dim(c, i, d, in[0]);
      }
      break;
    case KILN_OP_CONCAT:
      for (int d = 0; d < n->rank; d++) {
        if (d == n->iattr[0]) {
          concat_axis(c, i, d, n->n_in, in);
        } else {
          for (int k = 0; k < n->n_in; k++) same(c, i, d, in[k], d);
        }
      }
      break;
    case KILN_OP_INDEX_SELECT: rule_index_select(c, i, in); break;
    case KILN_OP_GATHER: /* out = the indices' shape; off the axis they may be shorter than the data */
      for (int d = 0; d < n->rank; d++) {
        same(c, i, d, in[1], d);
        if (d != n->iattr[0] && c->g->nodes[in[1]].shape[d] == x->shape[d]) same(c, in[1], d, in[0], d);
      }
      break;
    default: /* ARGSORT, SCATTER, SCATTER_ADD: the shape of in[0]; the indices and values may be shorter */
      for (int d = 0; d < n->rank; d++) {
        same(c, i, d, in[0], d);
        for (int k = 1; k < n->n_in; k++)
          if (d != n->iattr[0] && c->g->nodes[in[k]].rank == n->rank && c->g->nodes[in[k]].shape[d] == x->shape[d])
            same(c, in[k], d, in[0], d);
      }
      break;
  }
}

static void rule_reduce(inf *c, int32_t i, int32_t x) {
  const kiln_gnode *n = &c->g->nodes[i];
  uint64_t mask = n->op == KILN_OP_ARGMAX ? 1ULL << n->iattr[0] : (uint64_t)n->iattr[0];
  for (int d = 0; d < n->rank; d++) {
    if (mask >> d & 1) set_const(c, i, d);
    else same(c, i, d, x, d);
  }
}

static void apply(inf *c, int32_t i) {
  const kiln_gnode *n = &c->g->nodes[i];
  const int32_t *in = kiln_gnode_inputs(c->g, n);
  switch (kiln_op_table[n->op].kind) {
    case KILN_KIND_SOURCE: break; /* LEAFs are seeded; the others' sizes come from their consumers */
    case KILN_KIND_UNARY:
    case KILN_KIND_BINARY:
    case KILN_KIND_TERNARY:
    case KILN_KIND_SCAN: rule_same_shape(c, i, n->n_in, in); break;
    case KILN_KIND_REDUCE: rule_reduce(c, i, in[0]); break;
    case KILN_KIND_MOVE: rule_move(c, i, in); break;
    case KILN_KIND_MATMUL: rule_matmul(c, i, in); break;
    case KILN_KIND_COLLECTIVE: rule_collective(c, i, in[0]); break;
  }
}

/* Forwards then backwards until nothing changes (each sweep decides a
 * dimension or stops; a few sweeps in practice). */
static void settle(inf *c) {
  for (int sweep = 0; sweep < 64; sweep++) {
    c->changed = 0;
    for (int32_t i = 0; i < c->g->n_nodes; i++) apply(c, i);
    for (int32_t i = c->g->n_nodes - 1; i >= 0; i--) apply(c, i);
    if (!c->changed) break;
  }
}

/* The undecided dimensions of sources and broadcasts decided constant: 1
 * when there was one. */
static int settle_sources(inf *c) {
  int any = 0;
  for (int32_t i = 0; i < c->g->n_nodes; i++) {
    const kiln_gnode *n = &c->g->nodes[i];
    if (kiln_op_table[n->op].kind != KILN_KIND_SOURCE && n->op != KILN_OP_EXPAND) continue;
    for (int d = 0; d < n->rank; d++)
      if (!is_known(c, i, d)) set_const(c, i, d), any = 1;
  }
  return any;
}

/* Whether some dimension decided constant has size v. */
static int constant_size(inf *c, int64_t v) {
  for (int32_t i = 0; i < c->g->n_nodes; i++)
    for (int d = 0; d < c->g->nodes[i].rank; d++)
      if (is_known(c, i, d) && !dim_at(c, i, d)->mask && c->g->nodes[i].shape[d] == v) return 1;
  return 0;
}

/* An iota's dimensions that no rule decided (an index vector's length:
 * flip's n - 1 .. 0 is an iota as long as the axis it reverses, which no
 * shape rule ties to it) that are as large as a symbolic size take it (the
 * rules then carry it to what the iota makes), unless a dimension decided
 * constant is as large too (x[T, 5] at T = 5: which one the iota follows is
 * anyone's guess): a guess, which binding checks at every later size (a
 * program's own length that happened to equal the size is a miss there,
 * never a wrong program). 1 when one was taken. */
static int coincide(inf *c) {
  const kiln_graph *g = c->g;
  kiln_symdim cand[16];
  int nc = 0;
  for (int32_t i = 0; i < g->n_nodes && nc < 16; i++)
    for (int d = 0; d < g->nodes[i].rank && nc < 16; d++) {
      if (!is_known(c, i, d) || !dim_at(c, i, d)->mask) continue;
      kiln_symdim v = *dim_at(c, i, d);
      int k = 0;
      while (k < nc && !symdim_same(&cand[k], &v)) k++;
      if (k == nc) cand[nc++] = v;
    }
  int took = 0;
  for (int32_t i = 0; nc && i < g->n_nodes; i++)
    for (int d = 0; d < g->nodes[i].rank && g->nodes[i].op == KILN_OP_IOTA; d++) {
      if (is_known(c, i, d)) continue;
      for (int k = 0; k < nc; k++)
        if (eval(c->s, cand[k]) == g->nodes[i].shape[d] && !constant_size(c, g->nodes[i].shape[d])) {
          set(c, i, d, cand[k]);
          took = 1;
          break;
        }
      if (took) return 1; /* one at a time: the rules decide what follows from it */
    }
  return 0;
}

/* Symbols for the origins: origins of one group (group[k], numbered from
 * 0 in order of first occurrence) are one symbol: its origin is the group's
 * first with mult[k] 1, the others are its aliases, each mult[k] times it. */
static kiln_status seed(inf *c, int n, const kiln_sym_origin *origins, const int *group, const int64_t *mult,
                        kiln_err *err) {
  const kiln_graph *g = c->g;
  if (n < 0 || n > KILN_SYM_MAX)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "symbolic shapes: %d varying dimensions, at most %d", n,
                        KILN_SYM_MAX);
  int sym_of_group[KILN_SYM_MAX];
  for (int k = 0; k < KILN_SYM_MAX; k++) sym_of_group[k] = -1, c->parent[k] = k, c->mult[k] = 1;
  for (int k = 0; k < n; k++) {
    kiln_sym_origin o = origins[k];
    const kiln_gnode *x = o.input >= 0 && o.input < g->n_inputs ? &g->nodes[g->input_node[o.input]] : NULL;
    if (!x || x->op != KILN_OP_LEAF || o.axis < 0 || o.axis >= x->rank)
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                          "symbolic shapes: input %d has no dimension %d that can vary", o.input, o.axis);
  }
  for (int pass = 0; pass < 2; pass++) /* the symbols first, then their aliases */
    for (int k = 0; k < n; k++) {
      kiln_sym_origin o = origins[k];
      const kiln_gnode *x = &g->nodes[g->input_node[o.input]];
      if (x->shape[o.axis] < 2) continue; /* 0 and 1 change broadcasting: stays a constant */
      int s = sym_of_group[group[k]];
      if (pass == 0) {
        if (s >= 0 || mult[k] != 1) continue;
        s = sym_of_group[group[k]] = c->s->n_syms++;
        c->s->origin[s] = o;
        c->s->value[s] = x->shape[o.axis];
        set(c, g->input_node[o.input], o.axis, (kiln_symdim){(uint8_t)(1u << s), 1, 0, 0, 0});
      } else {
        if (s < 0 || x->shape[o.axis] != mult[k] * c->s->value[s]) continue; /* no symbol to follow: a constant */
        if (c->s->origin[s].input == o.input && c->s->origin[s].axis == o.axis) continue; /* the symbol's own */
        c->s->alias_sym[c->s->n_alias] = s;
        c->s->alias_coeff[c->s->n_alias] = mult[k];
        c->s->alias[c->s->n_alias++] = o;
        set(c, g->input_node[o.input], o.axis, (kiln_symdim){(uint8_t)(1u << s), mult[k], 0, 0, 0});
      }
    }
  for (int32_t k = 0; k < g->n_inputs; k++) /* the other input sizes are constants */
    for (int d = 0; d < g->nodes[g->input_node[k]].rank; d++) set_const(c, g->input_node[k], d);
  return KILN_OK;
}

/* A product of sizes of node i (the dimensions in `dims`, a bit mask) as a
 * monomial; 0 when it is a constant or not a monomial (a symbol twice). */
static int size_product(const kiln_graph *g, const kiln_symshape *s, int32_t i, uint64_t dims, kiln_symdim *out) {
  const kiln_gnode *n = &g->nodes[i];
  /* a product of monomials times at most one offset size (4 x (T - 1)):
   * sym * k + add * k with k the product of the rest */
  kiln_symdim v = {0, 1, 0, 0, 0}, off = {0, 0, 0, 0, 0};
  for (int d = 0; d < n->rank; d++) {
    if (!(dims >> d & 1)) continue;
    const kiln_symdim *u = kiln_symshape_dim(s, i, d);
    if (u->mask && (u->add || u->mask2)) { /* a sum (T - 1, B T - B): times constants only */
      if (off.mask) return 0;
      off = *u;
      continue;
    }
    int64_t f = u->mask ? u->coeff : n->shape[d];
    if ((u->mask & v.mask) || __builtin_mul_overflow(v.coeff, f, &v.coeff)) return 0;
    v.mask |= u->mask;
  }
  if (off.mask) { /* the offset size times constants only (a symbol times a sum is no longer one) */
    if (v.mask || __builtin_mul_overflow(off.coeff, v.coeff, &off.coeff) ||
        __builtin_mul_overflow(off.add, v.coeff, &off.add) || __builtin_mul_overflow(off.coeff2, v.coeff, &off.coeff2))
      return 0;
    v = off;
  }
  *out = v;
  return v.mask != 0;
}

static void add_cand(kiln_symdim *cand, int *nc, kiln_symdim v) {
  for (int k = 0; k < *nc; k++)
    if (symdim_same(&cand[k], &v)) return;
  if (*nc < 64) cand[(*nc)++] = v;
}

/* v as k / cnt for k = +-1 or +-2: k, or 0 when it is not. A mean's factor
 * is 1.0 / (double)cnt; constant folding may have multiplied it by the 2 of
 * a squared error's gradient or negated it since, rounding once more in the
 * constant's dtype (within 2 ulps of it: f32 or f64). Larger k would take too many of a program's own
 * constants for such factors (0.5 is 8/16): a guess that costs a miss, but
 * a miss at every size. */
static double recip_numerator(double v, int64_t cnt, int f32) {
  double r = v * (double)cnt, k = nearbyint(r);
  if (k == 0 || fabs(k) > 2 || fabs(r - k) > 1e-6) return 0;
  return kiln_recip_close(v, k, cnt, f32) ? k : 0;
}

/* v as k / c (k = +-1, +-2) for a fixed count c a sum of the graph reduces */
static int fixed_recip(double v, const int64_t *fixed, int nf, int f32) {
  for (int k = 0; k < nf; k++)
    if (recip_numerator(v, fixed[k], f32) != 0) return 1;
  return 0;
}

/* CONST nodes whose value is k / a symbolic count (k a small integer): a
 * mean's factor 1/n over a varying axis, and what folding made of it. A
 * constant that is also k / the fixed count of one of the graph's sums stays
 * a constant: a mean over a fixed axis makes exactly that value, and taking
 * it for a symbolic size that happens to match here (1/384 as 2 / (32·s0) at
 * s0 = 24) would make a family that no other size binds to. */
static void find_recips(const kiln_graph *g, kiln_symshape *s) {
  kiln_symdim cand[64], v;
  int64_t fixed[64];
  int nc = 0, nf = 0;
  /* the counts a mean divides by: a reduction's reduced sizes, a node's
   * element count, a single size */
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    if (n->op == KILN_OP_REDUCE_SUM) {
      v = (kiln_symdim){0, 0, 0, 0, 0};
      if (size_product(g, s, kiln_gnode_inputs(g, n)[0], (uint64_t)n->iattr[0], &v)) add_cand(cand, &nc, v);
      else if (!v.mask && v.coeff >= 2 && nf < 64) fixed[nf++] = v.coeff;
    }
    if (size_product(g, s, i, (1ULL << n->rank) - 1, &v)) add_cand(cand, &nc, v);
    for (int d = 0; d < n->rank; d++)
      if (size_product(g, s, i, 1ULL << d, &v)) add_cand(cand, &nc, v);
  }
  for (int32_t i = 0; nc && i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    if (n->op != KILN_OP_CONST || (n->dtype != KILN_F32 && n->dtype != KILN_F64) || n->fattr == 0 ||
        !(fabs(n->fattr) < 1))
      continue;
    if (fixed_recip(n->fattr, fixed, nf, n->dtype == KILN_F32)) continue;
    for (int k = 0; k < nc; k++) {
      int64_t cnt = eval(s, cand[k]);
      /* small counts are not taken: a program's own 0.25 or 0.1 is 1/4 or
       * 2/20 at some small size (a guess that costs a family per size after
       * it). 1/n from n = 8 (a mean over 12 rows is common); 2/n, which a
       * program's constants meet more often, from n = 32. */
      double num = cnt >= 8 ? recip_numerator(n->fattr, cnt, n->dtype == KILN_F32) : 0;
      if (fabs(num) == 2 && cnt < 32) num = 0;
      if (num != 0) {
        s->recip[i] = cand[k];
        s->recip_num[i] = num;
        s->n_recip++;
        break;
      }
    }
  }
}

/* The value of slot `slot` of node i is e (kiln_sym_value); vals are
 * appended in node order, so kept sorted by (node, slot) when each node's
 * slots are added in order. */
static int add_value(kiln_symshape *s, int32_t i, int slot, kiln_symdim e, int32_t *cap) {
  if (s->n_vals == *cap) {
    int32_t nc = *cap ? *cap * 2 : 16;
    kiln_sym_value *p = realloc(s->vals, sizeof *p * (size_t)nc);
    if (!p) return 0;
    s->vals = p;
    *cap = nc;
  }
  s->vals[s->n_vals++] = (kiln_sym_value){i, slot, e};
  s->vslots[i] |= 1u << (slot + 1);
  return 1;
}

/* Values that are sizes (kiln_symshape.vals): a slice's start along a
 * symbolic size that keeps a fixed number of elements at its end (x[T-2:],
 * as roll makes; the last token x[T-1:]) or just before it, and an integer
 * CONST within 2 of a symbolic size of 8 or more (flip's index n - 1 - i).
 * 0 on out of memory. */
static int find_values(const kiln_graph *g, kiln_symshape *s) {
  kiln_symdim cand[64], v;
  int nc = 0;
  int32_t cap = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    for (int d = 0; d < n->rank; d++)
      if (size_product(g, s, i, 1ULL << d, &v)) add_cand(cand, &nc, v);
  }
  for (int32_t i = 0; nc && i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    if (n->op == KILN_OP_SLICE) {
      int32_t x = kiln_gnode_inputs(g, n)[0];
      for (int d = 0; d < n->rank && d < KILN_MAX_IATTR / 2; d++) {
        const kiln_symdim *u = kiln_symshape_dim(s, x, d);
        int64_t start = n->iattr[d], in = g->nodes[x].shape[d], gap = in - start - n->shape[d];
        /* ends at the end (x[T-1:], the last token), or 1 or 2 before it
         * from a size of 8 (a reflecting pad's x[T-1-k:T-1]: smaller, a
         * program's own fixed x[1:3] would look like one) */
        const kiln_symdim *o = kiln_symshape_dim(s, i, d);
        if (!u->mask || n->iattr[n->rank + d] != 1 || start <= 0 || gap < 0 || gap > 2 || (gap && in < 8)) continue;
        kiln_symdim e = *u;
        if (o->mask) { /* x[T-U:] of a symbolic U: T - U */
          kiln_symdim neg = *o;
          neg.coeff = -neg.coeff, neg.coeff2 = -neg.coeff2, neg.add = -neg.add - gap;
          if (!poly_add(e, neg, &e) || eval(s, e) != start) continue;
        } else if (__builtin_sub_overflow(e.add, n->shape[d] + gap, &e.add) || eval(s, e) != start) {
          continue;
        }
        if (!add_value(s, i, d, e, &cap)) return 0;
      }
      continue;
    }
    if (n->op != KILN_OP_CONST || n->dtype == KILN_BOOL || s->recip[i].mask || !(fabs(n->fattr) >= 6) ||
        !(fabs(n->fattr) < 9e15) || n->fattr != nearbyint(n->fattr))
      continue;
    int64_t want = (int64_t)n->fattr;
    for (int64_t delta = 0; delta <= 2; delta = delta > 0 ? -delta : 1 - delta) {
      int k = 0;
      while (k < nc && (eval(s, cand[k]) < 8 || eval(s, cand[k]) + delta != want)) k++;
      if (k < nc) {
        kiln_symdim e = cand[k];
        e.add += delta;
        if (!add_value(s, i, -1, e, &cap)) return 0;
        break;
      }
    }
  }
  return 1;
}

/* One inference with the origins grouped by group[]: *united when two
 * symbols turned out to be one size (the caller groups them and runs
 * again). */
static kiln_status infer_once(const kiln_graph *g, int n, const kiln_sym_origin *origins, const int *group,
                              const int64_t *mult, kiln_symshape *out, int *united, int *root, int64_t *root_mult,
                              kiln_err *err) {
  memset(out, 0, sizeof *out);
  out->n_nodes = g->n_nodes;
  out->dims = calloc((size_t)g->n_nodes * R + 1, sizeof *out->dims);
  out->recip = calloc((size_t)g->n_nodes + 1, sizeof *out->recip);
  out->recip_num = calloc((size_t)g->n_nodes + 1, sizeof *out->recip_num);
  out->vslots = calloc((size_t)g->n_nodes + 1, sizeof *out->vslots);
  inf c = {.g = g, .s = out, .known = calloc((size_t)g->n_nodes * R + 1, 1)};
  if (!out->dims || !out->recip || !out->recip_num || !out->vslots || !c.known) {
    free(c.known);
    kiln_symshape_clear(out);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "symbolic shapes: out of memory for %d nodes", g->n_nodes);
  }
  kiln_status st = seed(&c, n, origins, group, mult, err);
  c.ties_only = 1;
  if (st == KILN_OK) settle(&c);
  c.ties_only = 0;
  if (st == KILN_OK) settle(&c);
  for (int round = 0; st == KILN_OK && round < 32 && coincide(&c); round++) settle(&c);
  /* what is still open where the program gave a size (a source, a
   * broadcast: a replicating pad's expand of the edge to k rows) is
   * constant; then what follows from that (the concat of it along T) */
  if (st == KILN_OK && settle_sources(&c)) settle(&c);
  for (int32_t i = 0; st == KILN_OK && i < g->n_nodes; i++)
    for (int d = 0; d < g->nodes[i].rank; d++) {
      if (!is_known(&c, i, d)) set_const(&c, i, d);
      out->n_symbolic += dim_at(&c, i, d)->mask != 0;
    }
  *united = c.united;
  for (int k = 0; k < KILN_SYM_MAX; k++) root[k] = sym_root(&c, k, &root_mult[k]);
  free(c.known);
  if (st == KILN_OK) find_recips(g, out);
  if (st == KILN_OK && !find_values(g, out))
    st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "symbolic shapes: out of memory for %d nodes", g->n_nodes);
  if (st != KILN_OK) kiln_symshape_clear(out);
  return st;
}

kiln_status kiln_symshape_infer(const kiln_graph *g, int n, const kiln_sym_origin *origins, kiln_symshape *out,
                                kiln_err *err) {
  int group[KILN_SYM_MAX];
  int64_t mult[KILN_SYM_MAX];
  for (int k = 0; k < KILN_SYM_MAX; k++) group[k] = k, mult[k] = 1;
  for (int round = 0;; round++) {
    int united = 0, root[KILN_SYM_MAX];
    int64_t root_mult[KILN_SYM_MAX];
    kiln_status st = infer_once(g, n, origins, group, mult, out, &united, root, root_mult, err);
    if (st != KILN_OK || !united || round >= KILN_SYM_MAX) return st;
    /* symbols that met as one size (up to a factor) become one: each origin
     * is its symbol's root times a multiplier; group the origins by root,
     * then infer again */
    int sym_of_origin[KILN_SYM_MAX], ng = 0, remap[KILN_SYM_MAX];
    int64_t coeff_of_origin[KILN_SYM_MAX];
    for (int k = 0; k < n && k < KILN_SYM_MAX; k++) sym_of_origin[k] = -1, coeff_of_origin[k] = 1;
    for (int s = 0; s < out->n_syms; s++)
      for (int k = 0; k < n; k++)
        if (origins[k].input == out->origin[s].input && origins[k].axis == out->origin[s].axis) sym_of_origin[k] = s;
    for (int a = 0; a < out->n_alias; a++)
      for (int k = 0; k < n; k++)
        if (origins[k].input == out->alias[a].input && origins[k].axis == out->alias[a].axis)
          sym_of_origin[k] = out->alias_sym[a], coeff_of_origin[k] = out->alias_coeff[a];
    for (int k = 0; k < KILN_SYM_MAX; k++) remap[k] = -1;
    for (int k = 0; k < n; k++) {
      int sy = sym_of_origin[k];
      if (sy < 0) {
        group[k] = ng++, mult[k] = 1; /* no symbol (size 0 or 1): a group of its own */
        continue;
      }
      int r = root[sy];
      if (remap[r] < 0) remap[r] = ng++;
      group[k] = remap[r];
      mult[k] = coeff_of_origin[k] * root_mult[sy];
    }
    kiln_symshape_clear(out);
  }
}

void kiln_symshape_clear(kiln_symshape *s) {
  free(s->dims);
  free(s->recip);
  free(s->recip_num);
  free(s->vslots);
  free(s->vals);
  memset(s, 0, sizeof *s);
}

int kiln_recip_close(double v, double k, int64_t cnt, int f32) {
  double a = k * (1.0 / (double)cnt), b = k / (double)cnt;
  return v == a || v == b || fabs(v - b) <= (f32 ? 2.5e-7 : 4.5e-16) * fabs(b);
}
