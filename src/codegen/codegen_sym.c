/* Family kernels (codegen.h, docs/dynamic-shapes.md): one kernel text for
 * every size of a family, read back from the texts of two instances.
 *
 * Why two instances and not a symbolic generator: the generator folds
 * index arithmetic with numbers (division and modulo by constants, value
 * ranges); written again over symbols it would be a second generator to
 * keep in step with the first. Instead the same generator runs at two
 * instances whose symbol values are distinct primes above every constant
 * size of the graph. A literal that depends on the sizes then differs
 * between the texts, and its two values factor uniquely over the primes: a
 * product of sizes (a size, a stride, a loop bound) reads back as
 * c * s_i * s_j ... at both, a bound like `size - 1` as that plus a small
 * offset, a mean's factor as 1 / such a product. Each must read back as the
 * same expression at both instances; any other difference (a choice the
 * generator made differently, a value that is not such an expression) fails
 * the family, and the graph is compiled as it is. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/text.h"
#include "codegen/codegen.h"

/* The largest offset a size may have from its product of symbols (a pad, a
 * slice dropping elements, `size - 1` bounds): the primes of the instances
 * are above every constant size plus twice this (cpu_family.c), so a
 * literal within it of a multiple of a prime can only be such a size. */
#define KILN_CG_SYM_MAX_ADD 64

typedef struct mono {
  int64_t c, d;           /* c * prod s_k^e[k] + d */
  uint8_t e[KILN_SYM_MAX]; /* exponents */
  int any;                 /* some exponent > 0 */
} mono;

/* v = c * prod p[k]^e[k] with c free of the primes p. */
static void factor(int64_t v, int n, const int64_t *p, mono *m) {
  memset(m, 0, sizeof *m);
  for (int k = 0; k < n; k++)
    while (v != 0 && v % p[k] == 0 && m->e[k] < 255) {
      v /= p[k];
      m->e[k]++;
      m->any = 1;
    }
  m->c = v;
}

/* The expression both va (at pa) and vb (at pb) are, with an offset in
 * [-dmax, dmax]; 0 when there is none. */
static int read_back(int64_t va, int64_t vb, int n, const int64_t *pa, const int64_t *pb, int dmax, mono *out) {
  for (int64_t d = 0; d <= dmax; d = d > 0 ? -d : 1 - d) {
    if (d < -dmax) break;
    mono a, b;
    factor(va - d, n, pa, &a);
    factor(vb - d, n, pb, &b);
    if (!a.any || a.c != b.c || a.c == 0 || memcmp(a.e, b.e, sizeof a.e)) continue;
    *out = a;
    out->d = d;
    return 1;
  }
  return 0;
}

/* p at the primes q (0 on overflow or when it is not positive). */
static int64_t poly_at(const kiln_sym_poly *p, int n, const int64_t *q) {
  int64_t x = p->c1, y = p->c2;
  for (int k = 0; k < n; k++) {
    for (int e = 0; e < p->e1[k]; e++)
      if (__builtin_mul_overflow(x, q[k], &x)) return 0;
    for (int e = 0; e < p->e2[k]; e++)
      if (__builtin_mul_overflow(y, q[k], &y)) return 0;
  }
  return __builtin_add_overflow(x, y, &x) || x <= 0 ? 0 : x;
}

/* The expression both va and vb are as c * M * P + d, P one of the polys
 * (its index in *which), M a product of symbols, |d| <= dmax: out holds c,
 * M's exponents and d. 0 when there is none. */
static int read_back_poly(int64_t va, int64_t vb, int n, const int64_t *pa, const int64_t *pb,
                          const kiln_sym_poly *polys, int n_polys, int dmax, mono *out, int *which) {
  for (int j = 0; j < n_polys; j++) {
    int64_t qa = poly_at(&polys[j], n, pa), qb = poly_at(&polys[j], n, pb);
    if (!qa || !qb) continue;
    for (int64_t d = 0; d <= dmax; d = d > 0 ? -d : 1 - d) {
      if (d < -dmax) break;
      int64_t ra, rb;
      if (__builtin_sub_overflow(va, d, &ra) || __builtin_sub_overflow(vb, d, &rb) || ra % qa || rb % qb) continue;
      mono a, b;
      factor(ra / qa, n, pa, &a);
      factor(rb / qb, n, pb, &b);
      if (a.c != b.c || a.c == 0 || memcmp(a.e, b.e, sizeof a.e)) continue;
      *out = a;
      out->d = d;
      *which = j;
      return 1;
    }
  }
  return 0;
}

/* v at the instance's primes read as c * M + d, M a product of symbols
 * (exponents e), |d| <= KILN_CG_SYM_ADD_MARGIN / 2, the smallest |d| first;
 * a value that no symbol divides and is below every symbolic size: the
 * constant c = v. 0: no such reading (a sum of products, s0 + s1). */
typedef struct sym_read {
  int64_t c, d;
  int n; /* the degree of M */
  uint8_t e[KILN_SYM_MAX];
} sym_read;

static int sym_read_of(int n_syms, const int64_t *p, int64_t floor, int64_t v, sym_read *r) {
  for (int64_t d = 0; d <= KILN_CG_SYM_ADD_MARGIN / 2; d = d > 0 ? -d : 1 - d) {
    memset(r, 0, sizeof *r);
    int64_t x = v - d;
    for (int k = 0; k < n_syms && k < KILN_SYM_MAX; k++)
      while (x != 0 && p[k] > 1 && x % p[k] == 0 && r->e[k] < 60) {
        x /= p[k];
        r->e[k]++;
        r->n++;
      }
    if (r->n && x >= 1) {
      r->c = x;
      r->d = d;
      return 1;
    }
  }
  memset(r, 0, sizeof *r);
  r->c = v;
  return v < floor - KILN_CG_SYM_ADD_MARGIN / 2;
}

int kiln_cg_sym_lt_always(int n_syms, const int64_t *p, int64_t floor, int64_t hi, int64_t m) {
  sym_read h, s;
  int rh = sym_read_of(n_syms, p, floor, hi, &h), rm = sym_read_of(n_syms, p, floor, m, &s);
  if (!rh && !rm) return hi < m && m - hi <= KILN_CG_SYM_ADD_MARGIN / 2; /* one sum of products, offsets */
  if (!rh || !rm || s.n > 60) return 0;
  for (int k = 0; k < KILN_SYM_MAX; k++)
    if (h.e[k] > s.e[k]) return 0; /* a symbol of hi's that m lacks: either may be the larger */
  /* m - hi = X (c_m R - c_h) + d_m - d_h, X = hi's product >= 2^n_h, R = the
   * rest of m's >= 2^(n_m - n_h): smallest at the smallest X and R where
   * c_m R >= c_h */
  __int128 X = (__int128)1 << h.n, R = (__int128)1 << (s.n - h.n);
  return (__int128)s.c * R >= h.c && X * ((__int128)s.c * R - h.c) + s.d - h.d > 0;
}

/* c times the symbols to exponents e: "5LL * a0[0] * a0[1]". */
static void emit_product(kiln_text *o, int64_t c, const uint8_t *e, int n) {
  kiln_text_printf(o, "%lldLL", (long long)c);
  for (int k = 0; k < n; k++)
    for (int x = 0; x < e[k]; x++) kiln_text_printf(o, " * a0[%d]", k);
}

/* "(c * M + d)", or with p: "(c * M * (c1 * P1 + c2 * P2) + d)". */
static void emit_read(kiln_text *o, const mono *m, const kiln_sym_poly *p, int n) {
  kiln_text_printf(o, "(");
  emit_product(o, m->c, m->e, n);
  if (p) {
    kiln_text_printf(o, " * (");
    emit_product(o, p->c1, p->e1, n);
    kiln_text_printf(o, " + ");
    emit_product(o, p->c2, p->e2, n);
    kiln_text_printf(o, ")");
  }
  if (m->d) kiln_text_printf(o, " %c %lldLL", m->d < 0 ? '-' : '+', (long long)(m->d < 0 ? -m->d : m->d));
  kiln_text_printf(o, ")");
}

static int is_ident(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

/* The length of the number token at s: digits, letters (suffixes, hex,
 * exponents), '.', and a sign right after an exponent letter. */
static size_t num_len(const char *s) {
  size_t i = 0;
  int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  while (is_ident(s[i]) || s[i] == '.' ||
         ((s[i] == '-' || s[i] == '+') && i > 0 && (hex ? (s[i - 1] == 'p' || s[i - 1] == 'P')
                                                        : (s[i - 1] == 'e' || s[i - 1] == 'E'))))
    i++;
  return i;
}

/* An integer token: digits then only u/U/l/L. *uns: it has a U. */
static int int_token(const char *s, size_t n, int64_t *v, int *uns) {
  size_t i = 0;
  uint64_t x = 0;
  while (i < n && s[i] >= '0' && s[i] <= '9') {
    if (x > (uint64_t)INT64_MAX / 10) return 0;
    x = x * 10 + (uint64_t)(s[i++] - '0');
  }
  if (i == 0 || (n > 1 && s[0] == '0' && i > 1)) return 0; /* octal and hex are never sizes */
  *uns = 0;
  for (; i < n; i++) {
    if (s[i] == 'u' || s[i] == 'U') *uns = 1;
    else if (s[i] != 'l' && s[i] != 'L') return 0;
  }
  if (x > (uint64_t)INT64_MAX) return 0;
  *v = (int64_t)x;
  return 1;
}

typedef struct dec {
  int n;
  const int64_t *pa, *pb;
  const kiln_sym_poly *polys;
  int n_polys;
  kiln_text o;
  char why[160];
} dec;


/* The reason the family kernel cannot be made (cut to fit). */
__attribute__((format(printf, 2, 3))) static void why(dec *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
  (void)n;
}

/* Two number tokens that differ: an integer expression of the symbols, or
 * 1 over one (a floating literal). */
static int differing_number(dec *c, const char *a, size_t na, const char *b, size_t nb) {
  int64_t va, vb;
  int ua, ub;
  mono m;
  if (int_token(a, na, &va, &ua) && int_token(b, nb, &vb, &ub) && ua == ub) {
    int j = -1;
    if (!read_back(va, vb, c->n, c->pa, c->pb, KILN_CG_SYM_MAX_ADD, &m) &&
        !read_back_poly(va, vb, c->n, c->pa, c->pb, c->polys, c->n_polys, KILN_CG_SYM_MAX_ADD, &m, &j)) {
      why(c, "the literal %.*s (%.*s) is no expression of the sizes", (int)na, a, (int)nb, b);
      return 0;
    }
    if (ua) kiln_text_printf(&c->o, "((uint64_t)");
    emit_read(&c->o, &m, j >= 0 ? &c->polys[j] : NULL, c->n);
    if (ua) kiln_text_printf(&c->o, ")");
    return 1;
  }
  char ta[64], tb[64];
  if (na >= sizeof ta || nb >= sizeof tb) return 0;
  memcpy(ta, a, na), ta[na] = 0;
  memcpy(tb, b, nb), tb[nb] = 0;
  char *ea, *eb;
  double fa = strtod(ta, &ea), fb = strtod(tb, &eb);
  if (*ea || *eb || !(fa != 0) || !(fb != 0)) {
    why(c, "the literals %s and %s differ", ta, tb);
    return 0;
  }
  /* k / m for a small integer k: a mean's 1/n, and what constant folding
   * made of it (ir/symshape.h, kiln_recip_close) */
  for (int k = -2; k <= 2; k++) {
    if (!k) continue;
    double ra = k / fa, rb = k / fb;
    if (!(ra < 9.2e18) || !(rb < 9.2e18)) return 0;
    int64_t ia = (int64_t)(ra + 0.5), ib = (int64_t)(rb + 0.5);
    int j = -1;
    if (ia <= 0 || ib <= 0 || !kiln_recip_close(fa, k, ia, 1) || !kiln_recip_close(fb, k, ib, 1) ||
        (!read_back(ia, ib, c->n, c->pa, c->pb, KILN_CG_SYM_MAX_ADD, &m) && /* 1 / (4 (T - 1)) too */
         !read_back_poly(ia, ib, c->n, c->pa, c->pb, c->polys, c->n_polys, KILN_CG_SYM_MAX_ADD, &m, &j)))
      continue;
    kiln_text_printf(&c->o, "(%d.0 * (1.0 / (double)", k); /* a negative k: a negative literal */
    emit_read(&c->o, &m, j >= 0 ? &c->polys[j] : NULL, c->n);
    kiln_text_printf(&c->o, "))");
    return 1;
  }
  why(c, "the constant %s (%s) is not k over an expression of the sizes", ta, tb);
  return 0;
}

/* Walk the two texts in step: identifiers and other characters must be
 * equal; numbers equal or read back. */
static int decode(dec *c, const char *a, const char *b) {
  size_t i = 0, j = 0;
  while (a[i] || b[j]) {
    if (is_ident(a[i]) && !(a[i] >= '0' && a[i] <= '9')) { /* an identifier: copied whole */
      size_t s = i, t = j;
      while (is_ident(a[i])) i++;
      while (is_ident(b[j])) j++;
      if (i - s != j - t || memcmp(a + s, b + t, i - s)) break;
      kiln_text_append(&c->o, a + s, i - s);
    } else if (a[i] >= '0' && a[i] <= '9' && b[j] >= '0' && b[j] <= '9') {
      size_t na = num_len(a + i), nb = num_len(b + j);
      if (na == nb && !memcmp(a + i, b + j, na)) kiln_text_append(&c->o, a + i, na);
      else if (!differing_number(c, a + i, na, b + j, nb)) return 0;
      i += na;
      j += nb;
    } else {
      if (a[i] != b[j]) break;
      kiln_text_append(&c->o, a + i, 1);
      i++, j++;
    }
  }
  if (a[i] || b[j]) {
    if (!c->why[0]) why(c, "the two instances' kernels differ at \"%.24s\"", a + i);
    return 0;
  }
  return 1;
}

/* A copy of k's text with its name replaced by the placeholder. */
static char *unnamed(const kiln_kernel_src *k) {
  char *t = strdup(k->src);
  char *at = t ? strstr(t, k->name) : NULL;
  if (at) memcpy(at, "k_0000000000000000", 18);
  return t;
}

kiln_status kiln_codegen_family(const kiln_kernel_src *a, const kiln_kernel_src *b, int n_syms, const int64_t *pa,
                                const int64_t *pb, const kiln_sym_poly *polys, int n_polys, kiln_kernel_src *out,
                                kiln_sym_mono *items, kiln_err *err) {
  memset(out, 0, sizeof *out);
  if (a->n_args != b->n_args || a->n_sites != b->n_sites || a->n_args < 1 || a->args[0] != KILN_CG_SYM_ARG ||
      memcmp(a->args, b->args, sizeof *a->args * (size_t)a->n_args) ||
      (a->n_sites && memcmp(a->sites, b->sites, sizeof *a->sites * (size_t)a->n_sites)))
    return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "family kernel: the instances' kernels read different buffers");
  mono m;
  memset(items, 0, sizeof *items);
  if (a->items == b->items) {
    items->coeff = a->items;
  } else {
    /* a product of sizes, plus an offset as a size's own (a slice or a pad
     * of the varying axis times the other sizes: 5 (T - 1)), or a product
     * times a sum the sizes hold (5 (T + U)) */
    int j = -1;
    if (!read_back(a->items, b->items, n_syms, pa, pb, KILN_CG_SYM_MAX_ADD, &m) &&
        !read_back_poly(a->items, b->items, n_syms, pa, pb, polys, n_polys, KILN_CG_SYM_MAX_ADD, &m, &j))
      return kiln_err_set(err, KILN_ERR_UNSUPPORTED,
                          "family kernel: its loop size (%lld, %lld) is no product of sizes plus an offset",
                          (long long)a->items, (long long)b->items);
    items->add = m.d;
    if (j < 0) {
      items->coeff = m.c;
      memcpy(items->exp, m.e, sizeof items->exp); /* a square where a T x T score matrix is the loop */
    } else { /* c M (c1 P1 + c2 P2) = c c1 M P1 + c c2 M P2 */
      const kiln_sym_poly *p = &polys[j];
      if (__builtin_mul_overflow(m.c, p->c1, &items->coeff) || __builtin_mul_overflow(m.c, p->c2, &items->coeff2))
        return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "family kernel: its loop size overflows");
      for (int k = 0; k < KILN_SYM_MAX; k++) {
        if (m.e[k] + p->e1[k] > 255 || m.e[k] + p->e2[k] > 255)
          return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "family kernel: its loop size overflows");
        items->exp[k] = (uint8_t)(m.e[k] + p->e1[k]);
        items->exp2[k] = (uint8_t)(m.e[k] + p->e2[k]);
      }
    }
  }
  dec c = {n_syms, pa, pb, polys, n_polys, {0}, ""};
  char *ta = unnamed(a), *tb = unnamed(b);
  int ok = ta && tb && decode(&c, ta, tb) && !c.o.failed;
  free(ta);
  free(tb);
  if (!ok) {
    free(c.o.p);
    return kiln_err_set(err, c.o.failed ? KILN_ERR_OUT_OF_MEMORY : KILN_ERR_UNSUPPORTED, "family kernel: %s",
                        c.why[0] ? c.why : "out of memory");
  }
  out->args = malloc(sizeof *out->args * (size_t)a->n_args);
  out->sites = malloc(sizeof *out->sites * ((size_t)a->n_sites + 1));
  if (!out->args || !out->sites) {
    free(c.o.p);
    kiln_kernel_src_clear(out);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "family kernel: out of memory");
  }
  memcpy(out->args, a->args, sizeof *a->args * (size_t)a->n_args);
  if (a->n_sites) memcpy(out->sites, a->sites, sizeof *a->sites * (size_t)a->n_sites);
  out->n_args = a->n_args;
  out->n_sites = a->n_sites;
  out->src = c.o.p;
  out->len = c.o.len;
  uint64_t h = kiln_hash_bytes(out->src, out->len, 0x6b65726eULL);
  out->hash = h;
  snprintf(out->name, sizeof out->name, "k_%016llx", (unsigned long long)h);
  char *at = strstr(out->src, "k_0000000000000000");
  if (at) memcpy(at, out->name, 18);
  out->items = a->items; /* at instance a; the caller evaluates *items */
  out->grain = a->grain == b->grain ? a->grain : 1;
  out->span = a->span == b->span ? a->span : 0;
  return KILN_OK;
}
