/* Kernel code generation, indices: the index algebra (kiln_ix: affine
 * sums of atoms with known ranges, divided and reduced exactly where the
 * ranges allow) and the index contexts of a kernel's values. Split out of
 * codegen_expr.c, which renders the values at these indices. */
#include <string.h>

#include "codegen/codegen_internal.h"

static const kiln_ix *ix_atom(cg *c, const char *s, int canon, int64_t lo, int64_t hi);

/* ───────────── index algebra (see kiln_ix in codegen_internal.h) ───────────── */

#define IX_BIG ((int64_t)1 << 60)

static kiln_ix *ix_new(cg *c) {
  kiln_ix *r = kiln_arena_alloc(&c->ar, sizeof *r);
  if (!r) {
    c->st = KILN_ERR_OUT_OF_MEMORY;
    static kiln_ix zero;
    return &zero; /* read-only fallback: callers copy before writing */
  }
  memset(r, 0, sizeof *r);
  return r;
}

static int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) || r > IX_BIG || r < -IX_BIG) return (a > 0 || b > 0) ? IX_BIG : -IX_BIG;
  return r;
}

static int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > IX_BIG || r < -IX_BIG) return ((a < 0) != (b < 0)) ? -IX_BIG : IX_BIG;
  return r;
}

/* The range of x's value (from its atoms' ranges). */
void kiln_cg_ix_range(const kiln_ix *x, int64_t *lo, int64_t *hi) {
  int64_t l = x->k, h = x->k;
  for (int i = 0; i < x->n; i++) {
    int64_t a = sat_mul(x->t[i].c, x->t[i].lo), b = sat_mul(x->t[i].c, x->t[i].hi);
    l = sat_add(l, a < b ? a : b);
    h = sat_add(h, a < b ? b : a);
  }
  *lo = l;
  *hi = h;
}

const kiln_ix *kiln_cg_ix_atom(cg *c, const char *s, int64_t lo, int64_t hi) { return ix_atom(c, s, -1, lo, hi); }

const kiln_ix *kiln_cg_ix_const(cg *c, int64_t k) {
  kiln_ix *r = ix_new(c);
  if (c->st == KILN_OK) r->k = k;
  return r;
}

static const kiln_ix *ix_atom(cg *c, const char *s, int canon, int64_t lo, int64_t hi) {
  if (lo == hi) return kiln_cg_ix_const(c, lo);
  kiln_ix *r = ix_new(c);
  if (c->st != KILN_OK) return r;
  r->n = 1;
  r->t[0] = (kiln_ix_term){.s = s, .canon = canon, .c = 1, .lo = lo, .hi = hi};
  return r;
}

/* The atom `(base op dm)` with range [lo, hi]. */
static const kiln_ix *ix_divmod_atom(cg *c, const kiln_ix *base, char op, int64_t dm, int64_t lo, int64_t hi) {
  const kiln_ix *r = ix_atom(c, kiln_cg_sf(c, "(%s %c %lldLL)", kiln_cg_ix_str(c, base), op, (long long)dm), -1, lo, hi);
  if (c->st == KILN_OK && r->n == 1) {
    kiln_ix *w = (kiln_ix *)r;
    w->t[0].op = op;
    w->t[0].dm = dm;
    w->t[0].base = base;
  }
  return r;
}

/* x as a single opaque atom (when it has too many terms). */
static const kiln_ix *ix_opaque(cg *c, const kiln_ix *x) {
  int64_t lo, hi;
  kiln_cg_ix_range(x, &lo, &hi);
  return ix_atom(c, kiln_cg_ix_str(c, x), -1, lo, hi);
}

/* a * ma + b * mb */
const kiln_ix *kiln_cg_ix_lin2(cg *c, const kiln_ix *a, int64_t ma, const kiln_ix *b, int64_t mb) {
  kiln_ix *r = ix_new(c);
  if (c->st != KILN_OK) return r;
  r->k = a->k * ma + (b ? b->k * mb : 0);
  for (int w = 0; w < 2; w++) {
    const kiln_ix *x = w ? b : a;
    int64_t m = w ? mb : ma;
    if (!x || m == 0) continue;
    for (int i = 0; i < x->n; i++) {
      int j = 0;
      while (j < r->n && strcmp(r->t[j].s, x->t[i].s) != 0) j++;
      if (j < r->n) {
        r->t[j].c += x->t[i].c * m;
        if (r->t[j].c == 0) r->t[j] = r->t[--r->n];
        continue;
      }
      if (r->n == KILN_IX_MAXT) { /* too many terms: fold what we have into one atom */
        kiln_ix *o = (kiln_ix *)ix_opaque(c, r);
        if (c->st != KILN_OK) return r;
        *r = *o;
      }
      r->t[r->n] = x->t[i];
      r->t[r->n++].c = x->t[i].c * m;
    }
  }
  for (int p = 0; p < r->n; p++) {
    if (r->t[p].op != '%') continue;
    for (int q = 0; q < r->n; q++) {
      const kiln_ix_term *tp = &r->t[p], *tq = &r->t[q];
      if (tq->op != '/' || tq->dm != tp->dm || tq->c != tp->c * tp->dm || strcmp(kiln_cg_ix_str(c, tq->base), kiln_cg_ix_str(c, tp->base)) != 0)
        continue;
      /* (x % n) * c + (x / n) * (c * n) = x * c */
      kiln_ix *rest = ix_new(c);
      if (c->st != KILN_OK) return r;
      rest->k = r->k;
      for (int i = 0; i < r->n; i++)
        if (i != p && i != q) rest->t[rest->n++] = r->t[i];
      return kiln_cg_ix_lin2(c, rest, 1, tp->base, tp->c);
    }
  }
  return r;
}

/* x narrowed to [lo, hi] (its value wherever it is used). A narrowed sum
 * becomes one atom with the tight range: `(i3 / 2 - 1)` known in [0, 13]
 * lets a later `(A * 14 + B) / 14` fold, which the separate terms
 * (ranges [0, 13] and a constant -1) would not. */
static const kiln_ix *ix_clamp(cg *c, const kiln_ix *x, int64_t lo, int64_t hi) {
  int64_t l, h;
  kiln_cg_ix_range(x, &l, &h);
  if (l >= lo && h <= hi) return x;
  if (l < lo) l = lo;
  if (h > hi) h = hi;
  if (x->n == 1 && x->t[0].c == 1 && x->k == 0) { /* narrow the atom itself */
    kiln_ix *r = ix_new(c);
    if (c->st != KILN_OK) return r;
    *r = *x;
    r->t[0].lo = l - x->k;
    r->t[0].hi = h - x->k;
    return r;
  }
  return ix_atom(c, kiln_cg_ix_str(c, x), -1, l, h);
}

static int64_t fdiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

static int64_t gcd64(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* x = h * g + l with h the terms whose coefficients are multiples of g
 * (divided by g) and l the rest plus the constant's remainder in [0, g). */
static void ix_split(cg *c, const kiln_ix *x, int64_t g, kiln_ix **h, kiln_ix **l) {
  *h = ix_new(c);
  *l = ix_new(c);
  if (c->st != KILN_OK) return;
  (*h)->k = fdiv(x->k, g);
  (*l)->k = x->k - (*h)->k * g;
  for (int i = 0; i < x->n; i++) {
    kiln_ix *w = x->t[i].c % g == 0 ? *h : *l;
    w->t[w->n] = x->t[i];
    if (w == *h) w->t[w->n].c /= g;
    w->n++;
  }
}

/* In a family's instance (c->sym): whether hi, the end of an index range,
 * may be compared with m, a symbol's size, only at the instances' primes:
 * hi < m holds there but not at every size of the family (a constant window
 * of a transposed [3, T] flattened: its x / T is not 0 at T = 2; the first U
 * elements of a [U, T] flattened, made where U < T, at a size where U > T). */
static int sym_small_vs_size(const cg *c, int64_t hi, int64_t m) {
  return c->sym && m >= c->sym_floor && hi < m && !kiln_cg_sym_lt_always(c->n_syms, c->sym_p, c->sym_floor, hi, m);
}

/* floor(x / d), d >= 1, for x >= 0 wherever it is used. With g a divisor
 * of d (d itself, or the gcd of d and a coefficient): the terms whose
 * coefficients are multiples of g divide exactly, and when the rest stays
 * in [0, g) it drops out: floor(x / d) = floor(h / (d / g)). Otherwise the
 * rest becomes one atom `(rest / d)`. */
static const kiln_ix *ix_div(cg *c, const kiln_ix *x, int64_t d) {
  if (d == 1) return x;
  if (d <= 0) return kiln_cg_ix_const(c, 0); /* an empty node: never evaluated */
  int64_t lo, hi;
  kiln_cg_ix_range(x, &lo, &hi);
  if (lo < 0) lo = 0;
  if (sym_small_vs_size(c, hi, d)) return ix_divmod_atom(c, x, '/', d, 0, hi); /* d >= 1: in [0, hi] */
  int64_t cand[KILN_IX_MAXT + 1];
  int nc = 0;
  cand[nc++] = d;
  for (int i = 0; i < x->n; i++) {
    int64_t g = gcd64(x->t[i].c, d), j = 0;
    while (j < nc && cand[j] != g) j++;
    if (g > 1 && j == nc) cand[nc++] = g;
  }
  for (int i = 1; i < nc; i++) /* largest divisor first */
    for (int j = i; j > 1 && cand[j] > cand[j - 1]; j--) {
      int64_t t = cand[j];
      cand[j] = cand[j - 1];
      cand[j - 1] = t;
    }
  kiln_ix *h, *l;
  int64_t llo, lhi;
  for (int i = 0; i < nc; i++) {
    int64_t g = cand[i];
    ix_split(c, x, g, &h, &l);
    if (c->st != KILN_OK) return x;
    kiln_cg_ix_range(l, &llo, &lhi);
    if (llo >= 0 && lhi < g && !sym_small_vs_size(c, lhi, g))
      return g == d ? ix_clamp(c, h, lo / d, hi / d) : ix_div(c, h, d / g);
  }
  ix_split(c, x, d, &h, &l);
  if (c->st != KILN_OK) return x;
  kiln_cg_ix_range(l, &llo, &lhi);
  if (llo >= 0) {
    const kiln_ix *q = ix_divmod_atom(c, l, '/', d, sym_small_vs_size(c, lhi, d) ? 0 : llo / d,
                                      sym_small_vs_size(c, lhi, d) ? lhi : lhi / d);
    return ix_clamp(c, kiln_cg_ix_lin2(c, h, 1, q, 1), lo / d, hi / d);
  }
  return ix_divmod_atom(c, x, '/', d, lo / d, hi / d);
}

/* x mod n, n >= 1, for x >= 0 wherever it is used: terms with coefficients
 * that are multiples of n drop out; what stays in [0, n) needs no `%`. */
static const kiln_ix *ix_mod(cg *c, const kiln_ix *x, int64_t n) {
  if (n <= 1) return kiln_cg_ix_const(c, 0); /* n < 1: an empty node, never evaluated */
  int64_t lo, hi;
  kiln_cg_ix_range(x, &lo, &hi);
  if (lo >= 0 && sym_small_vs_size(c, hi, n)) return ix_divmod_atom(c, x, '%', n, 0, hi);
  if (lo >= 0 && hi < n) return x;
  kiln_ix *r = ix_new(c);
  if (c->st != KILN_OK) return r;
  r->k = x->k - fdiv(x->k, n) * n;
  for (int i = 0; i < x->n; i++)
    if (x->t[i].c % n != 0) r->t[r->n++] = x->t[i];
  int64_t rlo, rhi;
  kiln_cg_ix_range(r, &rlo, &rhi);
  if (rlo >= 0 && rhi < n && !sym_small_vs_size(c, rhi, n)) return r;
  const kiln_ix *base = rlo >= 0 ? r : x;
  return ix_divmod_atom(c, base, '%', n, 0, n - 1);
}

const char *kiln_cg_ix_str(cg *c, const kiln_ix *x) {
  if (x->n == 0) return kiln_cg_sf(c, "%lldLL", (long long)x->k);
  if (x->n == 1 && x->k == 0 && x->t[0].c == 1) {
    if (x->t[0].canon >= 0) c->used_axes |= 1u << x->t[0].canon;
    return x->t[0].s;
  }
  const char *e = NULL;
  for (int i = 0; i < x->n; i++) {
    const kiln_ix_term *t = &x->t[i];
    if (t->canon >= 0) c->used_axes |= 1u << t->canon;
    const char *v = t->c == 1 ? t->s : kiln_cg_sf(c, "%s * %lldLL", t->s, (long long)t->c);
    e = e ? kiln_cg_sf(c, "%s + %s", e, v) : v;
  }
  if (x->k) e = kiln_cg_sf(c, "%s + %lldLL", e, (long long)x->k);
  return kiln_cg_sf(c, "(%s)", e);
}

/* ───────────── indices ───────────── */

const kiln_ix *kiln_cg_axis_ix(cg *c, const ictx *x, int d) {
  if (x->shape[d] <= 1) return kiln_cg_ix_const(c, 0); /* 0: an empty node, never evaluated */
  if (x->ax[d]) return ix_clamp(c, x->ax[d], 0, x->shape[d] - 1);
  int64_t st = 1;
  for (int e = d + 1; e < x->rank; e++) st *= x->shape[e];
  const kiln_ix *fl = x->flat_aff ? x->flat_aff : x->flat;
  return ix_clamp(c, ix_mod(c, ix_div(c, fl, st), x->shape[d]), 0, x->shape[d] - 1);
}

const char *kiln_cg_axis(cg *c, const ictx *x, int d) { return kiln_cg_ix_str(c, kiln_cg_axis_ix(c, x, d)); }

/* The flat index in terms of the axes (for deriving axes of a reshape). */
const kiln_ix *kiln_cg_lin_aff(cg *c, const ictx *x) {
  if (x->flat_aff) return x->flat_aff;
  int all = 1;
  for (int d = 0; d < x->rank; d++) all &= x->ax[d] != NULL || x->shape[d] == 1;
  if (x->flat && !all) return x->flat;
  const kiln_ix *e = kiln_cg_ix_const(c, 0);
  int64_t st = 1, numel = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    if (x->shape[d] != 1) e = kiln_cg_ix_lin2(c, e, 1, kiln_cg_axis_ix(c, x, d), st);
    st *= x->shape[d];
  }
  for (int d = 0; d < x->rank; d++) numel *= x->shape[d];
  return ix_clamp(c, e, 0, numel - 1);
}

/* The flat index as rendered for loads. */
const kiln_ix *kiln_cg_lin_ix(cg *c, const ictx *x) { return x->flat ? x->flat : kiln_cg_lin_aff(c, x); }
const char *kiln_cg_lin(cg *c, const ictx *x) { return kiln_cg_ix_str(c, kiln_cg_lin_ix(c, x)); }

void kiln_cg_ctx_other(ictx *x, const kiln_gnode *n) {
  memset(x, 0, sizeof *x);
  x->kind = KILN_SCTX_OTHER;
  x->rank = n->rank;
  x->shape = n->shape;
}

void kiln_cg_init_ctx(cg *c) {
  const kiln_skernel *k = c->k;
  c->fctx.kind = KILN_SCTX_F;
  c->fctx.rank = k->rank;
  c->fctx.shape = k->shape;
  c->rsctx.kind = KILN_SCTX_RS;
  c->rsctx.rank = k->rank;
  c->rsctx.shape = c->rs_shape;
  int64_t nf = 1, nr = 1;
  for (int d = 0; d < k->rank; d++) {
    int inner = k->mask >> d & 1;
    c->rs_shape[d] = inner ? 1 : k->shape[d];
    c->fctx.ax[d] = ix_atom(c, kiln_cg_canon_ax[d], d, 0, k->shape[d] - 1);
    c->rsctx.ax[d] = inner ? kiln_cg_ix_const(c, 0) : c->fctx.ax[d];
    nf *= k->shape[d];
    nr *= c->rs_shape[d];
  }
  c->fctx.flat = ix_atom(c, "f", -1, 0, nf - 1);
  c->rsctx.flat = ix_atom(c, "row", -1, 0, nr - 1);
  /* the flat indices in terms of the axes, for reshapes of the canonical index */
  ictx t = c->fctx;
  t.flat = NULL;
  c->fctx.flat_aff = kiln_cg_lin_aff(c, &t);
  t = c->rsctx;
  t.flat = NULL;
  c->rsctx.flat_aff = kiln_cg_lin_aff(c, &t);
}
