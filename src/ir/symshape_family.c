/* Symbolic dimensions of a graph (symshape.h), once inferred: the family
 * hash, binding a concrete graph (or a trace's nodes) to a family, instances
 * at other sizes, printing, and the probe primes. Inference: symshape.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "ir/symshape.h"

/* ───────────── the family: hash and binding ───────────── */

static uint64_t mono_hash(const kiln_symdim *v) {
  uint64_t h = ((uint64_t)v->mask << 56) ^ (uint64_t)v->coeff ^ 0x5e5e5e5eULL ^ ((uint64_t)v->add * 0x9E3779B97F4A7C15ULL);
  if (v->mask2) h = kiln_hash_combine(h, ((uint64_t)v->mask2 << 56) ^ (uint64_t)v->coeff2);
  return h;
}

/* The first of node i's values that are sizes (kiln_symshape.vals, sorted
 * by node): NULL when it has none. */
static const kiln_sym_value *values_of(const kiln_symshape *s, int32_t i) {
  if (!s->vslots || !s->vslots[i]) return NULL;
  int32_t lo = 0, hi = s->n_vals;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (s->vals[mid].node < i) lo = mid + 1;
    else hi = mid;
  }
  return lo < s->n_vals && s->vals[lo].node == i ? &s->vals[lo] : NULL;
}

/* The expression of slot `slot` of node i (the caller checked its bit). */
static const kiln_symdim *value_expr(const kiln_symshape *s, int32_t i, int slot) {
  const kiln_sym_value *p = values_of(s, i);
  for (; p && p < s->vals + s->n_vals && p->node == i; p++)
    if (p->slot == slot) return &p->e;
  return NULL;
}

static int slot_is_size(const kiln_symshape *s, int32_t i, int slot) {
  return s->vslots && (s->vslots[i] >> (slot + 1) & 1u);
}

/* graph.c's node_hash with a symbolic dim hashed as its monomial and a
 * reciprocal of a dim as its symbol, a value that is a size as its
 * expression: every other field is hashed as there. */
static uint64_t node_hash(const kiln_graph *g, const kiln_symshape *s, int32_t i) {
  const kiln_gnode *n = &g->nodes[i];
  uint64_t h = kiln_hash_combine(n->op, ((uint64_t)n->dtype << 8) | n->rank);
  for (int d = 0; d < n->rank; d++) {
    const kiln_symdim *v = kiln_symshape_dim(s, i, d);
    h = kiln_hash_combine(h, v->mask ? mono_hash(v) : (uint64_t)n->shape[d]);
  }
  h = kiln_hash_combine(h, (uint64_t)n->n_iattr);
  for (int k = 0; k < n->n_iattr; k++) {
    const kiln_symdim *e = slot_is_size(s, i, k) ? value_expr(s, i, k) : NULL;
    h = kiln_hash_combine(h, e ? mono_hash(e) ^ 0x736c6f74ULL : (uint64_t)n->iattr[k]);
  }
  const kiln_symdim *rc = &s->recip[i];
  const kiln_symdim *cv = slot_is_size(s, i, -1) ? value_expr(s, i, -1) : NULL;
  if (cv) {
    h = kiln_hash_combine(h, mono_hash(cv) ^ 0x76616cULL);
  } else if (rc->mask) {
    h = kiln_hash_combine(h, ((uint64_t)rc->mask << 56) ^ (uint64_t)rc->coeff ^ 0x7265636970ULL ^ (uint64_t)rc->add);
    h = kiln_hash_combine(h, (uint64_t)(int64_t)s->recip_num[i]);
  } else if (n->op != KILN_OP_SCALAR) {
    uint64_t fb;
    memcpy(&fb, &n->fattr, sizeof fb);
    h = kiln_hash_combine(h, fb);
  }
  const int32_t *in = kiln_gnode_inputs(g, n);
  h = kiln_hash_combine(h, (uint64_t)n->n_in);
  for (int k = 0; k < n->n_in; k++) h = kiln_hash_combine(h, (uint64_t)in[k]);
  return h;
}

uint64_t kiln_symshape_hash(const kiln_graph *g, const kiln_symshape *s) {
  uint64_t h = kiln_hash_combine(0x73796d73ULL, (uint64_t)g->n_nodes);
  h = kiln_hash_combine(h, (uint64_t)s->n_syms);
  for (int k = 0; k < s->n_syms; k++)
    h = kiln_hash_combine(h, ((uint64_t)(uint32_t)s->origin[k].input << 32) | (uint32_t)s->origin[k].axis);
  for (int k = 0; k < s->n_alias; k++) {
    h = kiln_hash_combine(h, ((uint64_t)(uint32_t)s->alias[k].input << 32 | (uint32_t)s->alias[k].axis) ^
                                 ((uint64_t)s->alias_sym[k] << 58));
    h = kiln_hash_combine(h, (uint64_t)s->alias_coeff[k]);
  }
  for (int32_t i = 0; i < g->n_nodes; i++) h = kiln_hash_combine(h, node_hash(g, s, i));
  for (int32_t k = 0; k < g->n_inputs; k++) h = kiln_hash_combine(h, (uint64_t)g->input_node[k]);
  for (int32_t o = 0; o < g->n_outputs; o++) {
    h = kiln_hash_combine(h, (uint64_t)g->output_node[o]);
    h = kiln_hash_combine(h, (uint64_t)(int64_t)g->output_alias[o]);
  }
  return h;
}

int64_t kiln_symdim_at(const kiln_symshape *s, const int64_t *v, const kiln_symdim *m) {
  int64_t x = m->coeff, y = m->mask2 ? m->coeff2 : 0;
  for (int k = 0; k < s->n_syms; k++) {
    if ((m->mask >> k & 1) && __builtin_mul_overflow(x, v[k], &x)) return INT64_MIN;
    if ((m->mask2 >> k & 1) && __builtin_mul_overflow(y, v[k], &y)) return INT64_MIN;
  }
  if (__builtin_add_overflow(x, y, &x) || __builtin_add_overflow(x, m->add, &x) || x == INT64_MIN) return INT64_MIN;
  return x;
}

/* m at the symbol values v (-1 on overflow or when negative). */
static int64_t eval_at(const kiln_symshape *s, const int64_t *v, const kiln_symdim *m) {
  int64_t x = kiln_symdim_at(s, v, m);
  return x == INT64_MIN || x < 0 ? -1 : x;
}

/* Two float constants that differ only by the rounding of the arithmetic
 * that made them (within 2 ulps of their dtype): constant folding of a
 * factor like 1/256 with a size-derived one that cancels rounds differently
 * at different sizes. The family's kernels keep the first one's value; the
 * result differs from the size's own by that rounding, as any
 * reassociation would. Exact for integers and bool. */
static int rounding_apart(double x, double y, int dt) {
  if (!kiln_dt_is_float(dt) || !isfinite(x) || !isfinite(y)) return 0;
  double tol = dt == KILN_F64 ? 4.5e-16 : 2.4e-7;
  return fabs(x - y) <= tol * fabs(x);
}

/* Node a of g (symbolic, s at values v) against node b of h (concrete). */
int kiln_symshape_node_binds(const kiln_graph *g, const kiln_symshape *s, const int64_t *v, int32_t i,
                             const kiln_node_view *b, const int32_t *b_in) {
  const kiln_gnode *a = &g->nodes[i];
  if (a->op != b->op || a->dtype != b->dtype || a->rank != b->rank || a->n_in != b->n_in || a->n_iattr != b->n_iattr)
    return 0;
  for (int d = 0; d < a->rank; d++) {
    const kiln_symdim *m = kiln_symshape_dim(s, i, d);
    if (b->shape[d] != (m->mask ? eval_at(s, v, m) : a->shape[d])) return 0;
  }
  uint32_t sized = s->vslots ? s->vslots[i] : 0;
  if (!sized) {
    for (int k = 0; k < a->n_iattr; k++) /* a few: a loop, not a call */
      if (a->iattr[k] != b->iattr[k]) return 0;
  } else { /* values that are sizes: their expressions at v */
    for (int k = 0; k < a->n_iattr; k++) {
      const kiln_symdim *e = sized >> (k + 1) & 1u ? value_expr(s, i, k) : NULL;
      if (e ? b->iattr[k] != eval_at(s, v, e) : a->iattr[k] != b->iattr[k]) return 0;
    }
    if (sized & 1u) {
      const kiln_symdim *e = value_expr(s, i, -1);
      int64_t x = e ? kiln_symdim_at(s, v, e) : INT64_MIN;
      return x != INT64_MIN && b->fattr == (double)x &&
             (!b_in || memcmp(kiln_gnode_inputs(g, a), b_in, sizeof(int32_t) * (size_t)a->n_in) == 0);
    }
  }
  if (s->recip[i].mask) {
    int64_t cnt = eval_at(s, v, &s->recip[i]);
    if (cnt <= 0 || !kiln_recip_close(b->fattr, s->recip_num[i], cnt, a->dtype == KILN_F32)) return 0;
  } else if (a->op != KILN_OP_SCALAR && memcmp(&a->fattr, &b->fattr, sizeof a->fattr) &&
             !(a->op == KILN_OP_CONST && rounding_apart(a->fattr, b->fattr, a->dtype))) {
    return 0;
  }
  return !b_in || memcmp(kiln_gnode_inputs(g, a), b_in, sizeof(int32_t) * (size_t)a->n_in) == 0;
}

int kiln_symshape_values(const kiln_symshape *s, const kiln_graph *h, int64_t *values) {
  for (int k = 0; k < s->n_syms; k++) {
    int32_t in = s->origin[k].input;
    if (in < 0 || in >= h->n_inputs) return 0;
    const kiln_gnode *x = &h->nodes[h->input_node[in]];
    if (x->op != KILN_OP_LEAF || s->origin[k].axis < 0 || s->origin[k].axis >= x->rank) return 0;
    values[k] = x->shape[s->origin[k].axis];
  }
  return 1;
}

int kiln_symshape_bind(const kiln_graph *g, const kiln_symshape *s, const kiln_graph *h, int64_t *values,
                       int32_t *bad_node) {
  if (bad_node) *bad_node = -1;
  if (g->n_nodes != h->n_nodes || g->n_inputs != h->n_inputs || g->n_outputs != h->n_outputs ||
      s->n_nodes != g->n_nodes)
    return 0;
  if (memcmp(g->input_node, h->input_node, sizeof(int32_t) * (size_t)g->n_inputs) ||
      memcmp(g->output_node, h->output_node, sizeof(int32_t) * (size_t)g->n_outputs) ||
      memcmp(g->output_alias, h->output_alias, sizeof(int32_t) * (size_t)g->n_outputs))
    return 0;
  int64_t v[KILN_SYM_MAX];
  if (!kiln_symshape_values(s, h, v)) return 0;
  for (int k = 0; k < s->n_syms; k++)
    if (v[k] < 2) return 0; /* 0 and 1: another graph */
  for (int k = 0; k < s->n_alias; k++) { /* one symbol, one size */
    const kiln_gnode *x = &h->nodes[h->input_node[s->alias[k].input]];
    if (x->op != KILN_OP_LEAF || s->alias[k].axis >= x->rank ||
        x->shape[s->alias[k].axis] != s->alias_coeff[k] * v[s->alias_sym[k]])
      return 0;
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *x = &h->nodes[i];
    const kiln_node_view b = {x->op, x->dtype, x->rank, x->n_in, x->n_iattr, x->shape, x->iattr, x->fattr};
    if (!kiln_symshape_node_binds(g, s, v, i, &b, kiln_gnode_inputs(h, x))) {
      if (bad_node) *bad_node = i;
      return 0;
    }
  }
  if (values) memcpy(values, v, sizeof v[0] * (size_t)s->n_syms);
  return 1;
}

int32_t kiln_symshape_resize_list(const kiln_symshape *s, kiln_sym_resize *out) {
  int32_t n = 0;
  for (int32_t i = 0; i < s->n_nodes; i++) {
    for (int d = 0; d < KILN_MAX_RANK; d++) {
      const kiln_symdim *m = kiln_symshape_dim(s, i, d);
      if (!m->mask) continue;
      if (out) out[n] = (kiln_sym_resize){i, d, *m, 0};
      n++;
    }
    if (s->recip[i].mask) {
      if (out) out[n] = (kiln_sym_resize){i, -1, s->recip[i], s->recip_num[i]};
      n++;
    }
    for (const kiln_sym_value *p = values_of(s, i); p && p < s->vals + s->n_vals && p->node == i; p++) {
      if (out) out[n] = (kiln_sym_resize){i, KILN_SYM_RESIZE_VALUE - p->slot, p->e, 0};
      n++;
    }
  }
  return n;
}

/* Slot `slot` of node n (kiln_sym_value) set to x: 0 when it cannot hold it. */
static int set_value(kiln_gnode *n, int slot, int64_t x) {
  if (slot < 0) {
    if (x == INT64_MIN) return 0;
    n->fattr = (double)x;
    return 1;
  }
  if (x < 0 || slot >= n->n_iattr) return 0;
  n->iattr[slot] = x;
  return 1;
}

/* Node i of h at the values: its symbolic sizes and 1/count constant. */
static int resize_node(kiln_graph *h, const kiln_symshape *s, const int64_t *values, int32_t i) {
  kiln_gnode *n = &h->nodes[i];
  for (int d = 0; d < n->rank; d++) {
    const kiln_symdim *m = kiln_symshape_dim(s, i, d);
    if (!m->mask) continue;
    n->shape[d] = eval_at(s, values, m);
    if (n->shape[d] < 0) return 0;
  }
  if (s->recip[i].mask) {
    int64_t cnt = eval_at(s, values, &s->recip[i]);
    if (cnt <= 0) return 0;
    n->fattr = s->recip_num[i] * (1.0 / (double)cnt); /* the frontend's 1/n, times what folding put on it */
  }
  for (const kiln_sym_value *p = values_of(s, i); p && p < s->vals + s->n_vals && p->node == i; p++)
    if (!set_value(n, p->slot, p->slot < 0 ? kiln_symdim_at(s, values, &p->e) : eval_at(s, values, &p->e))) return 0;
  return 1;
}

kiln_graph *kiln_symshape_instance(const kiln_graph *g, const kiln_symshape *s, const int64_t *values) {
  kiln_graph *h = kiln_graph_clone(g);
  if (!h) return NULL;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (!resize_node(h, s, values, i)) {
      kiln_graph_free(h);
      return NULL;
    }
  h->hash = 0; /* g's is not this graph's; computed where needed (graph.h) */
  return h;
}

int kiln_symshape_resize(kiln_graph *h, const kiln_symshape *s, const kiln_sym_resize *list, int32_t n,
                         const int64_t *values) {
  for (int32_t k = 0; k < n; k++) {
    const kiln_sym_resize *r = &list[k];
    kiln_gnode *x = &h->nodes[r->node];
    if (r->dim <= KILN_SYM_RESIZE_VALUE + 1) { /* a value that is a size (kiln_symshape_resize_list) */
      int slot = KILN_SYM_RESIZE_VALUE - r->dim;
      if (!set_value(x, slot, slot < 0 ? kiln_symdim_at(s, values, &r->e) : eval_at(s, values, &r->e))) return 0;
      continue;
    }
    int64_t v = eval_at(s, values, &r->e);
    if (r->dim >= 0) {
      if (v < 0) return 0;
      x->shape[r->dim] = v;
    } else { /* the frontend's 1/n, times what folding put on it (resize_node) */
      if (v <= 0) return 0;
      x->fattr = r->num * (1.0 / (double)v);
    }
  }
  h->hash = 0;
  return 1;
}

int kiln_symshape_format_dim(const kiln_symshape *s, int32_t node, int d, const kiln_graph *g, char *buf,
                             size_t cap) {
  const kiln_symdim *v = kiln_symshape_dim(s, node, d);
  if (!v->mask) return snprintf(buf, cap, "%lld", (long long)g->nodes[node].shape[d]);
  return kiln_symshape_format_expr(s, v, buf, cap);
}

/* coeff * the symbols of mask at buf + n ("-" or "+" before it when not
 * first): returns the new length. */
static size_t format_mono(const kiln_symshape *s, uint8_t mask, int64_t coeff, char *buf, size_t cap, size_t n) {
  int w = 0;
  if (n) w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%s", coeff < 0 ? "-" : "+");
  else if (coeff < 0) w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "-");
  n += (size_t)(w > 0 ? w : 0);
  uint64_t mag = coeff < 0 ? 0 - (uint64_t)coeff : (uint64_t)coeff;
  w = mag != 1 ? snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%llu", (unsigned long long)mag) : 0;
  n += (size_t)(w > 0 ? w : 0);
  size_t first = n;
  for (int k = 0; k < s->n_syms; k++)
    if (mask >> k & 1) {
      w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%ss%d", n > first || mag != 1 ? "*" : "", k);
      n += (size_t)(w > 0 ? w : 0);
    }
  return n;
}

int kiln_symshape_format_expr(const kiln_symshape *s, const kiln_symdim *v, char *buf, size_t cap) {
  if (cap) buf[0] = 0;
  size_t n = format_mono(s, v->mask, v->coeff, buf, cap, 0);
  int w;
  if (v->mask2) n = format_mono(s, v->mask2, v->coeff2, buf, cap, n);
  if (v->add) {
    w = snprintf(n < cap ? buf + n : NULL, n < cap ? cap - n : 0, "%+lld", (long long)v->add);
    n += (size_t)(w > 0 ? w : 0);
  }
  return (int)n;
}

static int is_prime(int64_t v) {
  if (v < 2) return 0;
  for (int64_t d = 2; d * d <= v; d++)
    if (v % d == 0) return 0;
  return 1;
}

static int64_t prime_above(int64_t v) {
  int64_t p = v + 1;
  while (!is_prime(p)) p++;
  return p;
}

/* The largest size of g (at least 64). */
static int64_t largest_size(const kiln_graph *g) {
  int64_t big = 64;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int d = 0; d < g->nodes[i].rank; d++)
      if (g->nodes[i].shape[d] > big) big = g->nodes[i].shape[d];
  return big;
}

/* rank[k]: symbol k's place in the order of the symbols' values in s (a
 * slice x[:U] of x[T, ...] needs U <= T at the instances too). */
static void symbol_ranks(const kiln_symshape *s, int *rank) {
  for (int k = 0; k < s->n_syms; k++) {
    rank[k] = 0;
    for (int q = 0; q < s->n_syms; q++) rank[k] += s->value[q] < s->value[k] || (s->value[q] == s->value[k] && q < k);
  }
}

void kiln_symshape_primes(const kiln_graph *g, const kiln_symshape *s, int64_t margin, int64_t *pa, int64_t *pb) {
  int n = s->n_syms, rank[KILN_SYM_MAX], sym_at[KILN_SYM_MAX];
  symbol_ranks(s, rank);
  for (int k = 0; k < n; k++) sym_at[rank[k]] = k;
  int64_t p = largest_size(g) + margin;
  for (int k = 0; k < 2 * n; k++) {
    p = prime_above(p);
    (k < n ? pa : pb)[sym_at[k % n]] = p;
  }
}

void kiln_symshape_primes_spread(const kiln_graph *g, const kiln_symshape *s, int64_t margin, int64_t *const *sets,
                                 int n_sets) {
  int rank[KILN_SYM_MAX];
  symbol_ranks(s, rank);
  int64_t base = 4 * (largest_size(g) + margin);
  for (int j = 0; j < n_sets; j++)
    for (int k = 0; k < s->n_syms; k++)
      sets[j][k] = prime_above(base * (8 + j) / 8 * (2 + (2 * j + 1) * rank[k]) / 2);
}
