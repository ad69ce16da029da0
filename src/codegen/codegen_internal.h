/* Internal to src/codegen: the generator state shared by the expression
 * renderer (codegen_expr.c) and the kernel assembler (codegen.c). Not
 * thread-safe: one cg per kernel being generated. */
#ifndef KILN_CODEGEN_CODEGEN_INTERNAL_H
#define KILN_CODEGEN_CODEGEN_INTERNAL_H

#include <stdint.h>

#include "base/arena.h"
#include "codegen/codegen.h"

/* A growable string; oom is sticky. */
typedef struct sb {
  char *p;
  size_t n, cap;
  int oom;
} sb;

/* An index into a node: one C expression per axis, and/or the flat
 * row-major index; `kind` says whether it is one of the kernel's canonical
 * indices (where values are bound to locals and memoized). */
typedef struct ictx {
  kiln_sctx kind;
  int rank;
  const int64_t *shape;
  const char *ax[KILN_MAX_RANK]; /* NULL: derived from flat */
  const char *flat;              /* NULL: derived from ax */
} ictx;

/* The generator of one kernel: its schedule, string arena, memo tables
 * (node -> local variable, per context), argument list and first error. */
typedef struct cg {
  const kiln_graph *g;
  const kiln_sched *s;
  const kiln_skernel *k;
  int32_t kid;
  kiln_arena ar;
  sb *cur; /* statements of the loop body being generated (F context) */
  sb pre;  /* row-scope statements (RS context), flushed before each loop */
  const char **memo_f, **memo_rs;
  int nvar;
  int32_t *args;
  const char **arg_ty;
  int n_args, cap_args;
  uint32_t used_axes; /* canonical axis variables read (elementwise kernels) */
  ictx fctx, rsctx;
  int64_t rs_shape[KILN_MAX_RANK];
  kiln_status st;
  char msg[160];
} cg;

/* "i0".."i7": the canonical axis variables of a kernel's loops. */
extern const char *const kiln_cg_canon_ax[KILN_MAX_RANK];

static inline const kiln_gnode *NODE(cg *c, int32_t n) { return &c->g->nodes[n]; }
static inline int32_t INP(cg *c, int32_t n, int k) { return kiln_gnode_inputs(c->g, NODE(c, n))[k]; }
static inline int is_float(int dt) { return dt == KILN_F32 || dt == KILN_F64; }

static inline const char *cty(int dt) {
  switch (dt) {
    case KILN_F32: return "float";
    case KILN_F64: return "double";
    case KILN_I32: return "int32_t";
    case KILN_I64: return "int64_t";
    default: return "uint8_t";
  }
}

void kiln_cg_sb_add(sb *b, const char *s, size_t n);
void kiln_cg_sb_printf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A formatted string in the generator's arena ("0" and an error on OOM). */
const char *kiln_cg_sf(cg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Buffer id -> argument number of the kernel (added on first use). */
int kiln_cg_arg_of(cg *c, int32_t buf, const char *ty);
/* Expression e of dtype `from` converted to `to` by the CAST rules. */
const char *kiln_cg_conv(cg *c, const char *e, int from, int to);
/* The C expression for node n at index x (binding locals in F/RS contexts). */
const char *kiln_cg_ex(cg *c, int32_t n, const ictx *x);

#endif
