/* Internal to src/codegen: the generator state shared by the expression
 * renderer (codegen_expr.c) and the kernel assembler (codegen.c). Not
 * thread-safe: one cg per kernel being generated. */
#ifndef KILN_CODEGEN_CODEGEN_INTERNAL_H
#define KILN_CODEGEN_CODEGEN_INTERNAL_H

#include <stdint.h>

#include "base/arena.h"
#include "base/text.h"
#include "codegen/codegen.h"

/* An index value: an affine combination k + sum c_i * atom_i of atoms, each
 * a C expression (a loop variable, or an opaque `x / d`, `x % n`, clamp)
 * with a known value range. Kept symbolic so that division and modulo by
 * constants can be folded at generation time (`(i0 * 6272 + i1) / 196`
 * -> `i0 * 32 + i1 / 196` when 0 <= i1 < 6272 ...). Atom ranges may be
 * narrowed to what holds wherever the value is used: an index into a node
 * of extent n is in [0, n-1] wherever that node is evaluated (a PAD or
 * CONCAT part is only read under its in-range condition). */
#define KILN_IX_MAXT 8
typedef struct kiln_ix_term {
  const char *s;   /* the atom's C text */
  int canon;       /* canonical axis number (i0..i7), or -1 */
  int64_t c;       /* coefficient (never 0) */
  int64_t lo, hi;  /* range of the atom */
  /* an atom `(base / dm)` or `(base % dm)` (op '/' or '%', else 0): so
   * that `(x % n) * c + (x / n) * (c * n)` recombines to `x * c` */
  char op;
  int64_t dm;
  const struct kiln_ix *base;
} kiln_ix_term;
typedef struct kiln_ix {
  int n;
  int64_t k;
  kiln_ix_term t[KILN_IX_MAXT];
} kiln_ix;

/* An index into a node: one index per axis, and/or the flat row-major
 * index; `kind` says whether it is one of the kernel's canonical
 * indices (where values are bound to locals and memoized). `flat` is the
 * form rendered for loads (e.g. the loop variable `f`); `flat_aff` is the
 * same value in terms of axes, used to derive per-axis indices. */
typedef struct ictx {
  kiln_sctx kind;
  int rank;
  const int64_t *shape;
  const kiln_ix *ax[KILN_MAX_RANK]; /* NULL: derived from flat */
  const kiln_ix *flat;              /* NULL: derived from ax */
  const kiln_ix *flat_aff;          /* NULL: flat */
} ictx;

/* The generator of one kernel: its schedule, string arena, memo tables
 * (node -> local variable, per context), argument list and first error. */
typedef struct cg {
  const kiln_graph *g;
  const kiln_sched *s;
  const kiln_skernel *k;
  int32_t kid;
  kiln_arena ar;
  kiln_text *cur; /* statements of the loop body being generated (F context) */
  kiln_text pre;  /* row-scope statements (RS context), flushed before each loop */
  kiln_text top;  /* statements before every loop: the loads of SCALAR and rank-0 inputs (hoist) */
  int n_top;
  const char **memo_f, **memo_rs;
  /* bits mode (kiln_cg_bits16): kiln_cg_ex renders the bits of 16-bit
   * floats (the loaded bits of moved ones), memoized in F contexts in memo_b */
  int bits;
  const char **memo_b;
  uint8_t *mov16; /* per node: 1 it moves a 16-bit load (bits mode stores it), 2 not, 0 not asked yet (codegen_expr.c) */
  int nvar;
  int32_t *args;
  const char **arg_ty;
  int n_args, cap_args;
  int32_t *sites; /* index-check sites: node ids (kiln_kernel_src.sites) */
  int n_sites, cap_sites;
  uint32_t used_axes; /* canonical axis variables read (elementwise kernels) */
  ictx fctx, rsctx;
  int64_t rs_shape[KILN_MAX_RANK];
  kiln_status st;
  char msg[160];
  /* a softmax row (codegen.c, softmax_row): the DIV store and the SUM whose
   * loop stores the dividend; -1 when the kernel is not one */
  int32_t sm_store, sm_sum;
  /* the row cache (codegen.c, row_cache): values kept in rc<i>[j] by the
   * loop that first computes them (loop number rc_first[i]) for the later
   * loops of the row; loop_no counts the loops of the row being written;
   * while probing, rc_count / rc_seen note per node how many loops compute
   * it and the first one (+ 1) */
  int n_rc, loop_no, probing;
  int32_t rc_node[4];
  int rc_first[4];
  uint8_t *rc_count;
  int16_t *rc_seen;
  /* an elementwise body's f32 sines and cosines (codegen.c, loop_f): while
   * sc_split is set, each is written KSC(ksinf, arg) and its argument's
   * check "kb |= ksincos_large(arg);" appended to sc_guard */
  int sc_split;
  kiln_text sc_guard;
  /* generating an instance of a family (codegen_sym.c): a choice made on a
   * size must not differ between the instances, whose sizes are primes */
  int sym;
  /* with sym: a size below it is a constant of the family; one at or above
   * it may be a symbol's (any size at run time): no local array has it as
   * its length (kiln_codegen_kernel_sym) */
  int64_t sym_floor;
  /* with sym: the instance's symbol values (primes), n_syms of them: a size
   * reads back as c * (product of symbols) + d over them (codegen_expr.c,
   * sym_lt_always) */
  int n_syms;
  const int64_t *sym_p;
} cg;

/* "i0".."i7": the canonical axis variables of a kernel's loops. */
extern const char *const kiln_cg_canon_ax[KILN_MAX_RANK];

static inline const kiln_gnode *NODE(cg *c, int32_t n) { return &c->g->nodes[n]; }
static inline int32_t INP(cg *c, int32_t n, int k) { return kiln_gnode_inputs(c->g, NODE(c, n))[k]; }
static inline int is_float(int dt) { return kiln_dt_is_float(dt); }

/* The C type of a node's value inside a kernel: bf16 and f16 values are
 * floats holding a value the dtype represents (kiln_cg_conv rounds them). */
static inline const char *cty(int dt) {
  switch (dt) {
    case KILN_F32: case KILN_BF16: case KILN_F16: return "float";
    case KILN_F64: return "double";
    case KILN_I32: return "int32_t";
    case KILN_I64: return "int64_t";
    case KILN_I8: return "int8_t";
    default: return "uint8_t";
  }
}
/* The C type of a buffer element of dtype dt: 16-bit floats are stored as
 * their bits. */
static inline const char *sty(int dt) { return kiln_dt_is_half(dt) ? "uint16_t" : cty(dt); }

/* A formatted string in the generator's arena ("0" and an error on OOM). */
const char *kiln_cg_sf(cg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Buffer id -> argument number of the kernel (added on first use). */
int kiln_cg_arg_of(cg *c, int32_t buf, const char *ty);
/* The site number of an index check on node n (added on first use). */
int kiln_cg_site_of(cg *c, int32_t n);
/* The value of the buffer element `elem` of dtype dt (a load), and the
 * element to store for the value v of dtype dt. */
const char *kiln_cg_ld(cg *c, int dt, const char *elem);
const char *kiln_cg_st(cg *c, int dt, const char *v);
/* Expression e of dtype `from` converted to `to` by the CAST rules. */
const char *kiln_cg_conv(cg *c, const char *e, int from, int to);
/* 1 when op's f32 result on values bf16 holds is one bf16 holds (neg, abs,
 * relu, max, min, floor, ceil, round, trunc, sign). */
int kiln_cg_keeps_bf16(int op);
/* 1 when every value of node n inside a kernel is one bf16 holds, or a NaN
 * (0 when unsure): its rounding to bf16 is then kbf16q. codegen_dtype.c. */
int kiln_cg_exact_bf16(cg *c, int32_t n);
/* Index algebra and contexts (codegen_index.c): the constant k; the range
 * of x's values; x rendered as C; a * ma + b * mb (b may be NULL); axis d
 * of context x; its flat index (in terms of the axes: lin_aff; as rendered
 * for loads: lin_ix, lin); x reset to node n's shape in no canonical
 * context. */
const kiln_ix *kiln_cg_ix_const(cg *c, int64_t k);
void kiln_cg_ix_range(const kiln_ix *x, int64_t *lo, int64_t *hi);
const char *kiln_cg_ix_str(cg *c, const kiln_ix *x);
const kiln_ix *kiln_cg_ix_lin2(cg *c, const kiln_ix *a, int64_t ma, const kiln_ix *b, int64_t mb);
const kiln_ix *kiln_cg_axis_ix(cg *c, const ictx *x, int d);
const char *kiln_cg_axis(cg *c, const ictx *x, int d);
const kiln_ix *kiln_cg_lin_aff(cg *c, const ictx *x);
const kiln_ix *kiln_cg_lin_ix(cg *c, const ictx *x);
const char *kiln_cg_lin(cg *c, const ictx *x);
void kiln_cg_ctx_other(ictx *x, const kiln_gnode *n);
/* Set up c->fctx and c->rsctx (the kernel's canonical indices). */
void kiln_cg_init_ctx(cg *c);
/* An index atom: the C text s (an int64_t variable) with values in [lo, hi]. */
const kiln_ix *kiln_cg_ix_atom(cg *c, const char *s, int64_t lo, int64_t hi);
/* The body of a line kernel (ARGSORT, SCATTER, SCATTER_ADD; codegen_line.c):
 * a loop over the lines [begin, end) along the kernel's one inner axis;
 * *items = the number of lines. */
void kiln_cg_gen_line(cg *c, kiln_text *o, int64_t *items);
/* Append the pending statements (c->pre) to out and clear them. */
void kiln_cg_flush_pre(cg *c, kiln_text *out);
/* a (+) b for reduction op in the accumulator's type (fl: double, else int64) */
const char *kiln_cg_comb(cg *c, int op, int fl, const char *a, const char *b);
/* The identity of a max/min/sum/prod reduction over input dtype idt, as in ref. */
const char *kiln_cg_reduce_init(int op, int idt);
/* Column kernels (codegen_col.c): whether a row kernel runs as one (the
 * inner axes a prefix but not a suffix, at least 16 rows, one reduction
 * plus row-shaped members), and its body. */
int kiln_cg_col_mode(cg *c, int suffix, int prefix, int64_t rows);
void kiln_cg_gen_col(cg *c, kiln_text *o, int64_t rows, int64_t L);
/* The C expression for node n at index x (binding locals in F/RS contexts). */
const char *kiln_cg_ex(cg *c, int32_t n, const ictx *x);
/* The bits (uint16_t) of node n's value at x when n is a 16-bit float
 * that moves at least one loaded element (views, pad, concat, gather,
 * index_select, where; its other inputs, constants or computed values,
 * as the bits the value path stores for them), else NULL. A store of
 * them keeps a moved NaN's sign and payload, as ref and PyTorch do (the
 * f32 value path quiets the NaN, and canonicalizes a bf16 one). */
const char *kiln_cg_bits16(cg *c, int32_t n, const ictx *x);
/* 1: kiln_cg_ex reads n from its buffer (a LEAF, SCALAR or materialized
 * node of another kernel) rather than computing it */
int kiln_cg_loads(cg *c, int32_t n);

#endif
