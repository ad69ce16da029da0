/* Symbolic dimensions of a graph (issue 15, docs/dynamic-shapes.md): which
 * sizes of which nodes follow a dimension of an input that is allowed to
 * vary, and the family of concrete graphs one graph stands for.
 *
 * A graph stays concrete (every kiln_gnode holds the sizes it was traced
 * with); a kiln_symshape beside it says, per node and dimension, whether the
 * size is a product of symbols times a constant: size = coeff * s_a * s_b ...
 * (a monomial, the symbols a bit mask), plus a constant where a slice,
 * pad or concat adds or drops a fixed number of elements (T - 1, T + 2),
 * where symbol k is dimension `axis` of graph input `input`. Everything
 * else is a constant.
 *
 * Inference (kiln_symshape_infer) propagates the input symbols through every
 * op's shape rule, forwards and backwards (a constant, iota or broadcast
 * dimension that meets a symbolic one elementwise takes its symbol), to a
 * fixed point. Sizes a rule cannot express (a slice keeping a fixed part,
 * a sum of three products, a reshape that splits a symbolic size
 * ambiguously or a sum) stay constants: inference only decides how generic
 * the graph is. Values that are sizes are found the
 * same way, after the shapes: a slice's start that keeps a fixed number of
 * elements at the end of a symbolic size (T - k), and an integer constant
 * within 2 of a symbolic size of 8 or more (flip's n - 1: a program's own
 * constant that happens to be near a size is a guess that costs a miss).
 *
 * Correctness does not rest on inference being clever: a concrete graph is
 * an instance of a symbolic one (kiln_symshape_bind) only when every node
 * has the same op, dtype, attributes, constants and inputs, every constant
 * size is equal, every symbolic size equals its monomial at the symbol
 * values read from the new graph's inputs, and every symbol is >= 2 (sizes
 * 0 and 1 change broadcasting: a symbol never takes them). So a wrong guess
 * costs a cache miss, never a wrong program.
 *
 * Thread-safety: pure functions; a kiln_symshape is a plain value.
 */
#ifndef KILN_IR_SYMSHAPE_H
#define KILN_IR_SYMSHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/graph.h"

#define KILN_SYM_MAX 8

/* One dimension of one node: mask == 0 a constant (the node's own size);
 * else coeff * the product of the symbols in mask + add (add: a slice that
 * drops a fixed number of elements, a pad, a concat with a fixed part),
 * plus, when mask2 != 0, coeff2 * the product of the symbols in mask2: a
 * sum of two monomials (a concat of T and U rows: s0 + s1; a flatten of
 * [B, T - 1]: B*T - B). Canonical: mask2 == 0, or mask2 != 0 with
 * coeff2 != 0 and mask the higher degree (or, of one degree, the lower
 * symbols): s0+s1, s0*s1-s0; no more than two monomials. */
typedef struct kiln_symdim {
  uint8_t mask;
  int64_t coeff;
  int64_t add;
  uint8_t mask2;
  int64_t coeff2;
} kiln_symdim;

/* A value the graph holds that is a size (not a shape): slot -1 the
 * CONST node's value (flip's n - 1), slot k >= 0 its integer attribute k (a
 * slice's start T - 2 that keeps the last two elements, as roll makes). */
typedef struct kiln_sym_value {
  int32_t node;
  int32_t slot;
  kiln_symdim e;
} kiln_sym_value;

/* Where a symbol comes from: dimension axis of graph input `input`. */
typedef struct kiln_sym_origin {
  int32_t input;
  int32_t axis;
} kiln_sym_origin;

typedef struct kiln_symshape {
  int32_t n_nodes;
  kiln_symdim *dims; /* [n_nodes][KILN_MAX_RANK], owned */
  /* per node: a CONST whose value is k / a symbolic count (a mean's 1/n
   * over a varying axis, its gradient's, and what constant folding made of
   * it: a small integer k) has recip[i].mask != 0 (the count) and
   * fattr == k / (coeff * the symbols) within 2 ulps of its dtype (kiln_recip_close);
   * owned */
  kiln_symdim *recip;
  double *recip_num; /* per node: k of a CONST k / count (see recip); owned */
  /* per node: which of its values are sizes (bit 0: the CONST's value, bit
   * 1 + k: iattr[k]); their expressions in vals[0..n_vals), by node then
   * slot; owned */
  uint32_t *vslots;
  kiln_sym_value *vals;
  int32_t n_vals;
  int n_syms;
  kiln_sym_origin origin[KILN_SYM_MAX];
  int64_t value[KILN_SYM_MAX]; /* the sizes in the graph it was inferred on */
  /* more origins of the same symbols: input dimensions that inference found
   * to be one size up to a factor (they meet elementwise) are one symbol:
   * alias[k] is alias_coeff[k] times symbol alias_sym[k]; binding checks it
   * still is */
  int n_alias;
  int alias_sym[KILN_SYM_MAX];
  int64_t alias_coeff[KILN_SYM_MAX];
  kiln_sym_origin alias[KILN_SYM_MAX];
  int n_symbolic;              /* dimensions of nodes that are symbolic */
  int n_recip;                 /* CONST nodes that are 1 / a symbolic count */
  /* (n_vals: constants and attributes that are sizes) */
} kiln_symshape;

/* m at the symbol values v[0..s->n_syms), of either sign (a value that is
 * a size may be negative): INT64_MIN when it overflows. */
int64_t kiln_symdim_at(const kiln_symshape *s, const int64_t *v, const kiln_symdim *m);

static inline const kiln_symdim *kiln_symshape_dim(const kiln_symshape *s, int32_t node, int d) {
  return &s->dims[(size_t)node * KILN_MAX_RANK + (size_t)d];
}

/* Infer the symbolic dimensions of g when the n input dimensions `origins`
 * vary (n <= KILN_SYM_MAX; a LEAF input each; an origin whose size is 0 or
 * 1 is kept as a constant: a symbol is never 0 or 1). *out is overwritten
 * (free it with kiln_symshape_clear). Errors: KILN_ERR_INVALID_ARGUMENT (an
 * origin that is not a LEAF input's dimension, too many), OUT_OF_MEMORY. */
kiln_status kiln_symshape_infer(const kiln_graph *g, int n, const kiln_sym_origin *origins, kiln_symshape *out,
                                kiln_err *err);
void kiln_symshape_clear(kiln_symshape *s);

/* Whether v is k / cnt as the frontend and constant folding compute it
 * (k * (1.0 / cnt), or k / cnt, within 2 ulps of f32 when f32, else f64). */
int kiln_recip_close(double v, double k, int64_t cnt, int f32);

/* The structural hash of g with its symbolic sizes replaced by their
 * monomials (mask, coeff): equal for every instance of the family. Covers
 * what kiln_graph_hash covers, and the symbols' origins. */
uint64_t kiln_symshape_hash(const kiln_graph *g, const kiln_symshape *s);

/* The symbol values of s in graph h (values[0..s->n_syms)): the sizes of
 * the symbols' input dimensions in h. 0 when one is not a LEAF input's
 * dimension. No other check (kiln_symshape_bind makes them all). */
int kiln_symshape_values(const kiln_symshape *s, const kiln_graph *h, int64_t *values);

/* 1 when h is an instance of (g, s) (see the header comment), with the
 * symbol values in values[0..s->n_syms); 0 otherwise, with the first node
 * that differs in *bad_node (-1: the graphs' inputs, outputs or a symbol's
 * size differ). values and bad_node may be NULL. */
int kiln_symshape_bind(const kiln_graph *g, const kiln_symshape *s, const kiln_graph *h, int64_t *values,
                       int32_t *bad_node);

/* A node's fields as kiln_symshape_node_binds compares them, read in place
 * from whatever form the caller holds (a kiln_gnode, the frontend's trace
 * node): nothing is copied. */
typedef struct kiln_node_view {
  int op, dtype, rank, n_in, n_iattr;
  const int64_t *shape, *iattr;
  double fattr;
} kiln_node_view;

/* The check kiln_symshape_bind makes of node i, on its own: whether b (with
 * inputs b_in[0..b->n_in), or NULL: the caller compares them) is node i of g
 * at the symbol values v (already read and checked, >= 2 each). For a
 * caller that holds another graph's nodes in its own form (the frontend's
 * trace: a cache hit on a planned size, runtime/runtime.c). */
int kiln_symshape_node_binds(const kiln_graph *g, const kiln_symshape *s, const int64_t *v, int32_t i,
                             const kiln_node_view *b, const int32_t *b_in);

/* g with every symbolic size (and every 1/count constant) taken at the
 * symbol values values[0..s->n_syms) instead of g's own: a graph of the
 * family at those sizes (NULL on out of memory or when a size overflows).
 * At g's own values it is g. */
kiln_graph *kiln_symshape_instance(const kiln_graph *g, const kiln_symshape *s, const int64_t *values);

/* One size (or 1/count constant) of a node that a resize rewrites, with
 * its expression: a compact list read in order, instead of the whole
 * per-node table of every dimension. */
typedef struct kiln_sym_resize {
  int32_t node;
  int32_t dim;    /* the dimension, or -1: the node's CONST num / count, or
                   * KILN_SYM_RESIZE_VALUE - slot: a value that is a size
                   * (kiln_sym_value: slot -1 the CONST's, k iattr[k]) */
  kiln_symdim e;  /* the size, or the count */
  double num;
} kiln_sym_resize;

#define KILN_SYM_RESIZE_VALUE (-100)

/* The symbolic sizes and 1/count constants of s, node by node, into out
 * (may be NULL); returns how many. */
int32_t kiln_symshape_resize_list(const kiln_symshape *s, kiln_sym_resize *out);
/* h, an instance of s's graph (kiln_symshape_instance, or a clone of the
 * graph), taken to the symbol values in place: the sizes and constants of
 * list[0..n) (kiln_symshape_resize_list) rewritten, nothing else touched.
 * 0 when a size overflows (h is then of no use). */
int kiln_symshape_resize(kiln_graph *h, const kiln_symshape *s, const kiln_sym_resize *list, int32_t n,
                         const int64_t *values);

/* 2n distinct primes (n = s->n_syms), pa[0..n) then pb[0..n), all above
 * every size of g plus margin: symbol values at which no size of a family
 * coincides with another or with a constant (the generic instances
 * families are checked and made at). Within each set the symbols keep the
 * order of their values in s (a slice x[:U] of x[T] stays valid). */
void kiln_symshape_primes(const kiln_graph *g, const kiln_symshape *s, int64_t margin, int64_t *pa, int64_t *pb);
/* n_sets sets of primes sets[j][0..s->n_syms) for a family whose sizes
 * hold sums of symbols (s0 + s1): consecutive primes (p1 = p0 + 4) would
 * let s0 + s1 read back as 2 s0 + 4. Symbol k (in the order of the values)
 * of set j is about b (1 + j/8) (1 + (j + 1/2) k), b = 4 (the largest size
 * of g + margin): no symbol near a small multiple of another, and the
 * ratios differ from set to set, so a literal that reads back as another
 * expression at one pair of sets does not at the next. */
void kiln_symshape_primes_spread(const kiln_graph *g, const kiln_symshape *s, int64_t margin, int64_t *const *sets,
                                 int n_sets);

/* Dimension d of node i as text: "37", "s0", "8*s0", "s0*s1"; returns the
 * length written (snprintf's contract). */
int kiln_symshape_format_dim(const kiln_symshape *s, int32_t node, int d, const kiln_graph *g, char *buf,
                             size_t cap);
/* An expression of the symbols (a symbolic size, a value that is a size)
 * as text, the same way. */
int kiln_symshape_format_expr(const kiln_symshape *s, const kiln_symdim *v, char *buf, size_t cap);

#endif
