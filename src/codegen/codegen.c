/* Kernel code generation: every node of a kernel is rendered as a C
 * expression at an index. The index is an `ictx`: one C expression per axis
 * (and optionally the row-major flat index) of the node being evaluated.
 * Move ops rewrite the index; elementwise ops combine their inputs' values
 * at the same index; materialized nodes are loads. In the kernel's own
 * canonical contexts (F: the loop index, RS: the row index) every value is
 * bound once to a local (`const T vN = ...;`), which gives common
 * subexpressions for free and keeps the loop bodies readable. */
#include "codegen/codegen.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/hash.h"

/* ───────────── string building ───────────── */

typedef struct sb {
  char *p;
  size_t n, cap;
  int oom;
} sb;

static void sb_add(sb *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

__attribute__((format(printf, 2, 3))) static void sb_printf(sb *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    sb_add(b, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb_add(b, big, (size_t)n);
  free(big);
}

/* ───────────── generator state ───────────── */

typedef struct ictx {
  kiln_sctx kind;
  int rank;
  const int64_t *shape;
  const char *ax[KILN_MAX_RANK]; /* NULL: derived from flat */
  const char *flat;              /* NULL: derived from ax */
} ictx;

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

static const char *canon_ax[KILN_MAX_RANK] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};

__attribute__((format(printf, 2, 3))) static const char *sf(cg *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = n >= 0 ? kiln_arena_alloc(&c->ar, (size_t)n + 1) : NULL;
  if (!p) {
    c->st = KILN_ERR_OUT_OF_MEMORY;
    return "0";
  }
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

static void unsupported(cg *c, const char *what, int op, int dt) {
  if (c->st != KILN_OK) return;
  c->st = KILN_ERR_UNSUPPORTED;
  snprintf(c->msg, sizeof c->msg, "%s (op %s, dtype %s)", what, kiln_op_name(op), kiln_dtype_name((kiln_dtype)dt));
}

static const kiln_gnode *NODE(cg *c, int32_t n) { return &c->g->nodes[n]; }
static int32_t INP(cg *c, int32_t n, int k) { return kiln_gnode_inputs(c->g, NODE(c, n))[k]; }
static int is_float(int dt) { return dt == KILN_F32 || dt == KILN_F64; }

static const char *cty(int dt) {
  switch (dt) {
    case KILN_F32: return "float";
    case KILN_F64: return "double";
    case KILN_I32: return "int32_t";
    case KILN_I64: return "int64_t";
    default: return "uint8_t";
  }
}

static int arg_of(cg *c, int32_t buf, const char *ty) {
  for (int i = 0; i < c->n_args; i++)
    if (c->args[i] == buf) return i;
  if (c->n_args == c->cap_args) {
    int cap = c->cap_args ? c->cap_args * 2 : 8;
    int32_t *a = realloc(c->args, sizeof *a * (size_t)cap);
    if (a) c->args = a;
    const char **t = realloc(c->arg_ty, sizeof *t * (size_t)cap);
    if (t) c->arg_ty = t;
    if (!a || !t) {
      c->st = KILN_ERR_OUT_OF_MEMORY;
      return 0;
    }
    c->cap_args = cap;
  }
  c->args[c->n_args] = buf;
  c->arg_ty[c->n_args] = ty;
  return c->n_args++;
}

/* ───────────── conversions and literals (the CAST rules) ───────────── */

static const char *conv(cg *c, const char *e, int from, int to) {
  if (from == to) return e;
  if (to == KILN_BOOL) return sf(c, "((uint8_t)((%s) != 0))", e);
  if (is_float(from)) {
    switch (to) {
      case KILN_F32: return sf(c, "((float)(%s))", e);
      case KILN_F64: return sf(c, "((double)(%s))", e);
      case KILN_I32: return sf(c, "kf2i32((double)(%s))", e);
      default: return sf(c, "kf2i64((double)(%s))", e);
    }
  }
  switch (to) {
    case KILN_F32: return sf(c, "((float)(int64_t)(%s))", e);
    case KILN_F64: return sf(c, "((double)(int64_t)(%s))", e);
    case KILN_I32: return sf(c, "ki2i32((int64_t)(%s))", e);
    default: return sf(c, "((int64_t)(%s))", e);
  }
}

static const char *f64_lit(cg *c, double v) {
  if (isnan(v)) return "(__builtin_nan(\"\"))";
  if (isinf(v)) return v > 0 ? "(__builtin_inf())" : "(-__builtin_inf())";
  return sf(c, "(%.17g)", v);
}

/* A double constant as a value of dtype dt (the CONST and PAD rules). */
static const char *lit(cg *c, double v, int dt) { return conv(c, f64_lit(c, v), KILN_F64, dt); }

/* ───────────── indices ───────────── */

static const char *axis(cg *c, const ictx *x, int d) {
  if (x->shape[d] == 1) return "0";
  if (x->ax[d]) {
    for (int i = 0; i < KILN_MAX_RANK; i++)
      if (x->ax[d] == canon_ax[i]) c->used_axes |= 1u << i;
    return x->ax[d];
  }
  int64_t st = 1;
  for (int e = d + 1; e < x->rank; e++) st *= x->shape[e];
  return sf(c, "((%s) / %lldLL %% %lldLL)", x->flat, (long long)st, (long long)x->shape[d]);
}

static const char *lin(cg *c, const ictx *x) {
  if (x->flat) return x->flat;
  const char *e = NULL;
  int64_t st = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    if (x->shape[d] != 1) {
      const char *t = st == 1 ? axis(c, x, d) : sf(c, "(%s) * %lldLL", axis(c, x, d), (long long)st);
      e = e ? sf(c, "%s + %s", t, e) : t;
    }
    st *= x->shape[d];
  }
  return e ? sf(c, "(%s)", e) : "0";
}

static void ctx_other(ictx *x, const kiln_gnode *n) {
  memset(x, 0, sizeof *x);
  x->kind = KILN_SCTX_OTHER;
  x->rank = n->rank;
  x->shape = n->shape;
}

/* ───────────── expressions ───────────── */

static const char *ex(cg *c, int32_t n, const ictx *x);

static const char *load(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  int32_t buf = kiln_sched_read_buf(c->s, n);
  if (buf < 0) {
    unsupported(c, "internal: load of a node without a buffer", nd->op, nd->dtype);
    return "0";
  }
  if (nd->op == KILN_OP_SCALAR) {
    int fl = is_float(nd->dtype);
    int a = arg_of(c, buf, fl ? "double" : "int64_t");
    return conv(c, sf(c, "a%d[0]", a), fl ? KILN_F64 : KILN_I64, nd->dtype);
  }
  int a = arg_of(c, buf, cty(nd->dtype));
  return sf(c, "a%d[%s]", a, lin(c, x));
}

static const char *unary(cg *c, const kiln_gnode *nd, const char *a, int in_dt) {
  int t = nd->dtype;
  if (nd->op == KILN_OP_CAST) return conv(c, a, in_dt, t);
  if (is_float(t)) {
    const char *f = t == KILN_F32 ? "f" : "";
    const char *sx = t == KILN_F32 ? "f32" : "f64";
    const char *one = t == KILN_F32 ? "1.0f" : "1.0";
    switch (nd->op) {
      case KILN_OP_NEG: return sf(c, "(-(%s))", a);
      case KILN_OP_ABS: return sf(c, "fabs%s(%s)", f, a);
      case KILN_OP_EXP: return sf(c, "exp%s(%s)", f, a);
      case KILN_OP_LOG: return sf(c, "log%s(%s)", f, a);
      case KILN_OP_SQRT: return sf(c, "sqrt%s(%s)", f, a);
      case KILN_OP_RSQRT: return sf(c, "(%s / sqrt%s(%s))", one, f, a);
      case KILN_OP_TANH: return sf(c, "tanh%s(%s)", f, a);
      case KILN_OP_SIGMOID: return sf(c, "(%s / (%s + exp%s(-(%s))))", one, one, f, a);
      case KILN_OP_RELU: return sf(c, "krelu_%s(%s)", sx, a);
      case KILN_OP_GELU: return sf(c, "kgelu_%s(%s)", sx, a);
      case KILN_OP_GELU_TANH: return sf(c, "kgelut_%s(%s)", sx, a);
      case KILN_OP_NOT: return conv(c, sf(c, "((%s) == 0)", a), KILN_I64, t);
      default: break;
    }
    unsupported(c, "unary op", nd->op, t);
    return "0";
  }
  const char *r;
  switch (nd->op) {
    case KILN_OP_NEG: r = sf(c, "kneg_i(%s)", a); break;
    case KILN_OP_ABS: r = sf(c, "kabs_i(%s)", a); break;
    case KILN_OP_RELU: r = sf(c, "kmax_i(%s, 0)", a); break;
    case KILN_OP_NOT: r = sf(c, "((int64_t)((%s) == 0))", a); break;
    default: r = a; break; /* float math on integers: identity, as in ref */
  }
  return conv(c, r, KILN_I64, t);
}

static const char *binary(cg *c, const kiln_gnode *nd, const char *a, const char *b, int in_dt) {
  int t = nd->dtype, op = nd->op;
  static const char *cmp[] = {"==", "!=", "<", "<=", ">", ">="};
  if (op >= KILN_OP_EQ && op <= KILN_OP_GE) return sf(c, "((uint8_t)((%s) %s (%s)))", a, cmp[op - KILN_OP_EQ], b);
  if (op == KILN_OP_AND || op == KILN_OP_OR)
    return sf(c, "((uint8_t)(((%s) != 0) %s ((%s) != 0)))", a, op == KILN_OP_AND ? "&&" : "||", b);
  (void)in_dt;
  if (is_float(t)) {
    const char *sx = t == KILN_F32 ? "f32" : "f64";
    switch (op) {
      case KILN_OP_ADD: return sf(c, "((%s) + (%s))", a, b);
      case KILN_OP_SUB: return sf(c, "((%s) - (%s))", a, b);
      case KILN_OP_MUL: return sf(c, "((%s) * (%s))", a, b);
      case KILN_OP_DIV: return sf(c, "((%s) / (%s))", a, b);
      case KILN_OP_POW: return sf(c, "pow%s(%s, %s)", t == KILN_F32 ? "f" : "", a, b);
      case KILN_OP_MAX: return sf(c, "kmax_%s(%s, %s)", sx, a, b);
      case KILN_OP_MIN: return sf(c, "kmin_%s(%s, %s)", sx, a, b);
      default: break;
    }
    unsupported(c, "binary op", op, t);
    return "0";
  }
  const char *fn;
  switch (op) {
    case KILN_OP_ADD: fn = "kadd_i"; break;
    case KILN_OP_SUB: fn = "ksub_i"; break;
    case KILN_OP_MUL: fn = "kmul_i"; break;
    case KILN_OP_DIV: fn = "kdiv_i"; break;
    case KILN_OP_POW: fn = "kpow_i"; break;
    case KILN_OP_MAX: fn = "kmax_i"; break;
    case KILN_OP_MIN: fn = "kmin_i"; break;
    default: unsupported(c, "binary op", op, t); return "0";
  }
  return conv(c, sf(c, "%s((int64_t)(%s), (int64_t)(%s))", fn, a, b), KILN_I64, t);
}

/* Index context of input k of move node n, given the node's context x. */
static void child_ctx(cg *c, int32_t n, int k, const ictx *x, ictx *y) {
  kiln_sctx kind = kiln_sched_input_ctx(c->g, c->k, n, k, x->kind);
  if (kind == KILN_SCTX_RS && x->kind != KILN_SCTX_RS) {
    *y = c->rsctx;
    return;
  }
  if (kind != KILN_SCTX_OTHER) {
    *y = *x;
    return;
  }
  const kiln_gnode *nd = NODE(c, n), *in = NODE(c, INP(c, n, k));
  ctx_other(y, in);
  const int64_t *ia = nd->iattr;
  switch (nd->op) {
    case KILN_OP_RESHAPE: y->flat = lin(c, x); break;
    case KILN_OP_PERMUTE:
      for (int i = 0; i < nd->rank; i++) y->ax[ia[i]] = axis(c, x, i);
      break;
    case KILN_OP_EXPAND:
      for (int d = 0; d < nd->rank; d++) y->ax[d] = in->shape[d] == 1 ? "0" : axis(c, x, d);
      break;
    case KILN_OP_SLICE:
      for (int d = 0; d < nd->rank; d++)
        y->ax[d] = sf(c, "(%lldLL + (%s) * %lldLL)", (long long)ia[d], axis(c, x, d), (long long)ia[nd->rank + d]);
      break;
    case KILN_OP_PAD:
      for (int d = 0; d < nd->rank; d++) y->ax[d] = sf(c, "((%s) - %lldLL)", axis(c, x, d), (long long)ia[d]);
      break;
    default: /* CONCAT, INDEX_SELECT, GATHER: handled by the caller */
      for (int d = 0; d < nd->rank && d < in->rank; d++) y->ax[d] = axis(c, x, d);
      break;
  }
}

static const char *move(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  const int64_t *ia = nd->iattr;
  ictx y;
  switch (nd->op) {
    case KILN_OP_RESHAPE: case KILN_OP_PERMUTE: case KILN_OP_EXPAND: case KILN_OP_SLICE:
      child_ctx(c, n, 0, x, &y);
      return ex(c, INP(c, n, 0), &y);
    case KILN_OP_PAD: {
      child_ctx(c, n, 0, x, &y);
      const kiln_gnode *in = NODE(c, INP(c, n, 0));
      const char *cond = "1";
      for (int d = 0; d < nd->rank; d++)
        cond = sf(c, "%s && (uint64_t)(%s) < %lluULL", cond, y.ax[d], (unsigned long long)in->shape[d]);
      return sf(c, "((%s) ? (%s) : %s)", cond, ex(c, INP(c, n, 0), &y), lit(c, nd->fattr, nd->dtype));
    }
    case KILN_OP_CONCAT: {
      int a = (int)ia[0];
      const char *ia_s = axis(c, x, a);
      int64_t off = 0;
      const char *e = NULL, *tail = "";
      for (int k = 0; k < nd->n_in; k++) {
        int32_t in = INP(c, n, k);
        ctx_other(&y, NODE(c, in));
        for (int d = 0; d < nd->rank; d++) y.ax[d] = axis(c, x, d);
        y.ax[a] = sf(c, "((%s) - %lldLL)", ia_s, (long long)off);
        const char *v = ex(c, in, &y);
        off += NODE(c, in)->shape[a];
        if (k == nd->n_in - 1) {
          e = e ? sf(c, "%s%s%s", e, v, tail) : v;
        } else {
          const char *part = sf(c, "((%s) < %lldLL ? (%s) : (", ia_s, (long long)off, v);
          e = e ? sf(c, "%s%s", e, part) : part;
          tail = sf(c, "%s))", tail);
        }
      }
      return e;
    }
    case KILN_OP_INDEX_SELECT: {
      int a = (int)ia[0];
      int32_t di = INP(c, n, 0), ii = INP(c, n, 1);
      const kiln_gnode *dn = NODE(c, di), *in = NODE(c, ii);
      ictx iy, dy;
      ctx_other(&iy, in);
      for (int q = 0; q < in->rank; q++) iy.ax[q] = axis(c, x, a + q);
      const char *iv = ex(c, ii, &iy);
      ctx_other(&dy, dn);
      for (int d = 0; d < dn->rank; d++)
        dy.ax[d] = d < a ? axis(c, x, d) : d > a ? axis(c, x, d - 1 + in->rank) : NULL;
      dy.ax[a] = sf(c, "kclamp((int64_t)(%s), %lldLL)", iv, (long long)dn->shape[a]);
      return ex(c, di, &dy);
    }
    case KILN_OP_GATHER: {
      int a = (int)ia[0];
      int32_t di = INP(c, n, 0), ii = INP(c, n, 1);
      const kiln_gnode *dn = NODE(c, di);
      ictx iy, dy;
      ctx_other(&iy, NODE(c, ii));
      for (int d = 0; d < nd->rank; d++) iy.ax[d] = axis(c, x, d);
      const char *iv = ex(c, ii, &iy);
      ctx_other(&dy, dn);
      for (int d = 0; d < dn->rank; d++) dy.ax[d] = axis(c, x, d);
      dy.ax[a] = sf(c, "kclamp((int64_t)(%s), %lldLL)", iv, (long long)dn->shape[a]);
      return ex(c, di, &dy);
    }
    default: break;
  }
  unsupported(c, "move op", nd->op, nd->dtype);
  return "0";
}

static const char *compute(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  const int32_t *in = kiln_gnode_inputs(c->g, nd);
  switch (kiln_op_table[nd->op].kind) {
    case KILN_KIND_SOURCE:
      switch (nd->op) {
        case KILN_OP_SCALAR: return load(c, n, x);
        case KILN_OP_CONST: return lit(c, nd->fattr, nd->dtype);
        case KILN_OP_IOTA: return conv(c, axis(c, x, (int)nd->iattr[0]), KILN_I64, nd->dtype);
        case KILN_OP_RANDOM: {
          ictx sy;
          ctx_other(&sy, NODE(c, in[0]));
          const char *seed = conv(c, ex(c, in[0], &sy), NODE(c, in[0])->dtype, KILN_I64);
          const char *r = sf(c, "krng_%s((uint64_t)(%s), (uint64_t)(%s))", nd->iattr[0] == 1 ? "normal" : "uniform",
                             seed, lin(c, x));
          return conv(c, r, KILN_F64, nd->dtype);
        }
        default: break;
      }
      break;
    case KILN_KIND_UNARY: return unary(c, nd, ex(c, in[0], x), NODE(c, in[0])->dtype);
    case KILN_KIND_BINARY: {
      const char *a = ex(c, in[0], x), *b = ex(c, in[1], x);
      return binary(c, nd, a, b, NODE(c, in[0])->dtype);
    }
    case KILN_KIND_TERNARY: {
      const char *cd = ex(c, in[0], x), *a = ex(c, in[1], x), *b = ex(c, in[2], x);
      int cdt = NODE(c, in[0])->dtype;
      if (is_float(cdt)) cd = sf(c, "(kf2i64((double)(%s)) != 0)", cd);
      return sf(c, "((%s) ? (%s) : (%s))", cd, a, b);
    }
    case KILN_KIND_MOVE: return move(c, n, x);
    default: break;
  }
  unsupported(c, "internal: op inlined that must be materialized", nd->op, nd->dtype);
  return "0";
}

static const char *ex(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  if (c->st != KILN_OK) return "0";
  int member = c->s->owner[n] == c->kid;
  const char **memo = x->kind == KILN_SCTX_F ? c->memo_f : x->kind == KILN_SCTX_RS ? c->memo_rs : NULL;
  if (memo && memo[n]) return memo[n];
  if (member && kiln_op_table[nd->op].kind == KILN_KIND_REDUCE) return sf(c, "r%d", n);
  const char *e;
  if (!member && (nd->op == KILN_OP_LEAF || nd->op == KILN_OP_SCALAR || c->s->mat[n]))
    e = load(c, n, x);
  else
    e = compute(c, n, x);
  if (!memo) return e;
  const char *v = sf(c, "v%d", c->nvar++);
  sb_printf(x->kind == KILN_SCTX_F ? c->cur : &c->pre, "const %s %s = %s;\n", cty(nd->dtype), v, e);
  memo[n] = v;
  return v;
}

/* ───────────── kernels ───────────── */

static void flush_pre(cg *c, sb *out) {
  if (c->pre.n) sb_add(out, c->pre.p, c->pre.n);
  c->pre.n = 0;
  if (c->pre.p) c->pre.p[0] = 0;
}

/* Statements defining the inner-axis variables and `f` from `j` (row kernels). */
static void inner_index(cg *c, sb *o, int suffix, int64_t L) {
  const kiln_skernel *k = c->k;
  int64_t st = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    if (!(k->mask >> d & 1)) continue;
    if (k->shape[d] == 1)
      sb_printf(o, "const int64_t i%d KU = 0;\n", d);
    else if (k->shape[d] == L) /* the only inner axis: j itself (no division in the loop) */
      sb_printf(o, "const int64_t i%d KU = j;\n", d);
    else
      sb_printf(o, "const int64_t i%d KU = j / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
    st *= k->shape[d];
  }
  if (suffix) {
    sb_printf(o, "const int64_t f KU = row * %lldLL + j;\n", (long long)L);
  } else {
    const char *e = "0";
    int64_t fs = 1;
    for (int d = k->rank - 1; d >= 0; d--) {
      e = sf(c, "%s + i%d * %lldLL", e, d, (long long)fs);
      fs *= k->shape[d];
    }
    sb_printf(o, "const int64_t f KU = %s;\n", e);
  }
}

static const char *comb(cg *c, int op, int fl, const char *a, const char *b) {
  const char *fn = op == KILN_OP_REDUCE_SUM ? (fl ? NULL : "kadd_i")
                   : op == KILN_OP_REDUCE_MAX ? (fl ? "kmax_f64" : "kmax_i")
                                              : (fl ? "kmin_f64" : "kmin_i");
  return fn ? sf(c, "%s(%s, %s)", fn, a, b) : sf(c, "(%s + %s)", a, b);
}

static void gen_reduce(cg *c, sb *o, int32_t m, int suffix, int64_t L) {
  const kiln_gnode *nd = NODE(c, m);
  int32_t in = INP(c, m, 0);
  int idt = NODE(c, in)->dtype, fl = is_float(idt);
  memset(c->memo_f, 0, sizeof *c->memo_f * (size_t)c->g->n_nodes);
  sb body = {0};
  c->cur = &body;
  const char *v = ex(c, in, &c->fctx);
  flush_pre(c, o);
  sb idx = {0};
  inner_index(c, &idx, suffix, L);
  sb_printf(o, "%s r%d;\n{\n", cty(nd->dtype), m);
  if (nd->op == KILN_OP_ARGMAX) {
    sb_printf(o, "int64_t bi = 0; %s best = 0;\n", cty(idt));
    sb_printf(o, "for (int64_t j = 0; j < %lldLL; j++) {\n%s%s", (long long)L, idx.p ? idx.p : "", body.p ? body.p : "");
    sb_printf(o, "const %s x = %s;\n", cty(idt), v);
    sb_printf(o, "if (j == 0 || (best == best && (x != x || x > best))) { best = x; bi = j; }\n}\n");
    sb_printf(o, "r%d = %s;\n}\n", m, conv(c, "bi", KILN_I64, nd->dtype));
  } else {
    /* 16 independent partial accumulators: vectorizable without
     * reassociation flags, and a fixed, thread-independent order. */
    const char *at = fl ? "double" : "int64_t";
    const char *init = "0";
    /* identities of the input dtype, as in ref (what an empty reduction gives) */
    if (nd->op == KILN_OP_REDUCE_MAX)
      init = fl ? "(-__builtin_inf())" : idt == KILN_I32 ? "INT32_MIN" : idt == KILN_I64 ? "INT64_MIN" : "0";
    if (nd->op == KILN_OP_REDUCE_MIN)
      init = fl ? "(__builtin_inf())" : idt == KILN_I32 ? "INT32_MAX" : idt == KILN_I64 ? "INT64_MAX" : "1";
    const char *xv = sf(c, "((%s)x)", at);
    const char *cpart = comb(c, nd->op, fl, "p[u]", xv), *cacc = comb(c, nd->op, fl, "acc", "p[u]");
    const char *cfin = comb(c, nd->op, fl, "acc", xv);
    sb_printf(o, "%s p[16], acc = %s;\nfor (int u = 0; u < 16; u++) p[u] = %s;\nint64_t j0 = 0;\n", at, init, init);
    sb_printf(o, "for (; j0 + 16 <= %lldLL; j0 += 16) for (int u = 0; u < 16; u++) {\nconst int64_t j = j0 + u;\n",
              (long long)L);
    sb_printf(o, "%s%sconst %s x = %s;\np[u] = %s;\n}\n", idx.p ? idx.p : "", body.p ? body.p : "", cty(idt), v,
              cpart);
    sb_printf(o, "for (int u = 0; u < 16; u++) acc = %s;\n", cacc);
    sb_printf(o, "for (int64_t j = j0; j < %lldLL; j++) {\n%s%sconst %s x = %s;\nacc = %s;\n}\n", (long long)L,
              idx.p ? idx.p : "", body.p ? body.p : "", cty(idt), v, cfin);
    sb_printf(o, "r%d = %s;\n}\n", m, conv(c, "acc", fl ? KILN_F64 : KILN_I64, nd->dtype));
  }
  if (body.oom || idx.oom) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  free(idx.p);
}

/* Body statements storing the F-shaped stores at index f. */
static void gen_f_stores(cg *c, sb *body, int *any) {
  const kiln_skernel *k = c->k;
  memset(c->memo_f, 0, sizeof *c->memo_f * (size_t)c->g->n_nodes);
  c->cur = body;
  *any = 0;
  /* every value first, then every store: a store into a donated input must
   * not be seen by a later value of the same element */
  sb stores = {0};
  for (int32_t j = 0; j < k->n_stores; j++) {
    int32_t m = k->stores[j];
    if (!kiln_sched_shape_is(c->g, k, m, KILN_SCTX_F)) continue;
    if (k->row && kiln_op_table[NODE(c, m)->op].kind == KILN_KIND_REDUCE) continue;
    const char *v = ex(c, m, &c->fctx);
    int a = arg_of(c, c->s->buf_of[m], cty(NODE(c, m)->dtype));
    sb_printf(&stores, "a%d[f] = %s;\n", a, v);
    *any = 1;
  }
  if (stores.p) sb_add(body, stores.p, stores.n);
  if (stores.oom) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(stores.p);
}

static void gen_elementwise(cg *c, sb *o, int64_t *items) {
  const kiln_skernel *k = c->k;
  int64_t numel = 1;
  for (int d = 0; d < k->rank; d++) numel *= k->shape[d];
  *items = numel;
  sb body = {0};
  int any;
  gen_f_stores(c, &body, &any);
  const char *b = body.p ? body.p : "";
  if (c->used_axes == 0 || k->rank == 0) {
    sb_printf(o, "for (int64_t f = begin; f < end; f++) {\n%s}\n", b);
  } else {
    int last = k->rank - 1;
    int64_t n = k->shape[last];
    sb_printf(o, "for (int64_t r = begin / %lldLL; r * %lldLL < end; r++) {\n", (long long)n, (long long)n);
    int64_t st = 1;
    for (int d = last - 1; d >= 0; d--) {
      sb_printf(o, "const int64_t i%d KU = r / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
      st *= k->shape[d];
    }
    sb_printf(o, "const int64_t jb = r * %lldLL < begin ? begin - r * %lldLL : 0;\n", (long long)n, (long long)n);
    sb_printf(o, "const int64_t je = (r + 1) * %lldLL > end ? end - r * %lldLL : %lldLL;\n", (long long)n,
              (long long)n, (long long)n);
    sb_printf(o, "for (int64_t j = jb; j < je; j++) {\nconst int64_t i%d KU = j;\nconst int64_t f KU = r * %lldLL + j;\n%s}\n}\n",
              last, (long long)n, b);
  }
  if (body.oom) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
}

/* A lone reduction over leading axes (a column sum such as a bias
 * gradient): each task owns a block of up to 64 outputs and sweeps the
 * reduced rows once, reading memory contiguously, instead of one strided
 * pass per output. Sequential per output, so the order is fixed. */
static void gen_col(cg *c, sb *o, int64_t rows, int64_t L) {
  const kiln_skernel *k = c->k;
  int32_t m = k->members[0], in = INP(c, m, 0);
  const kiln_gnode *nd = NODE(c, m);
  int idt = NODE(c, in)->dtype, fl = is_float(idt);
  const char *at = fl ? "double" : "int64_t";
  const char *init = "0";
  if (nd->op == KILN_OP_REDUCE_MAX)
    init = fl ? "(-__builtin_inf())" : idt == KILN_I32 ? "INT32_MIN" : idt == KILN_I64 ? "INT64_MIN" : "0";
  if (nd->op == KILN_OP_REDUCE_MIN)
    init = fl ? "(__builtin_inf())" : idt == KILN_I32 ? "INT32_MAX" : idt == KILN_I64 ? "INT64_MAX" : "1";
  sb body = {0};
  c->cur = &body;
  const char *v = ex(c, in, &c->fctx);
  int a = arg_of(c, c->s->buf_of[m], cty(nd->dtype));
  sb_printf(o, "for (int64_t c0 = begin; c0 < end; c0 += 64) {\n");
  sb_printf(o, "const int64_t c1 = c0 + 64 < end ? c0 + 64 : end;\n%s acc[64];\n", at);
  sb_printf(o, "for (int64_t q = 0; q < c1 - c0; q++) acc[q] = %s;\n", init);
  sb_printf(o, "for (int64_t j = 0; j < %lldLL; j++) {\n", (long long)L);
  int64_t so = 1, si = 1;
  sb idx = {0};
  for (int d = k->rank - 1; d >= 0; d--) {
    int inner = k->mask >> d & 1;
    int64_t *st = inner ? &si : &so;
    sb_printf(&idx, "const int64_t i%d KU = %s / %lldLL %% %lldLL;\n", d, inner ? "j" : "row", (long long)*st,
              (long long)k->shape[d]);
    *st *= k->shape[d];
  }
  /* row values (broadcasts of row-shaped inputs) are per output: in the loop */
  sb_printf(o, "for (int64_t row = c0; row < c1; row++) {\n%sconst int64_t f KU = j * %lldLL + row;\n%s%s",
            idx.p ? idx.p : "", (long long)rows, c->pre.p ? c->pre.p : "", body.p ? body.p : "");
  c->pre.n = 0;
  sb_printf(o, "const %s x = %s;\nacc[row - c0] = %s;\n}\n}\n", cty(idt), v,
            comb(c, nd->op, fl, "acc[row - c0]", sf(c, "((%s)x)", at)));
  sb_printf(o, "for (int64_t row = c0; row < c1; row++) a%d[row] = %s;\n}\n", a,
            conv(c, "acc[row - c0]", fl ? KILN_F64 : KILN_I64, nd->dtype));
  if (body.oom || idx.oom) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  free(idx.p);
}

static void gen_row(cg *c, sb *o, int64_t *items, int *col) {
  const kiln_skernel *k = c->k;
  int64_t rows = 1, L = 1;
  int suffix = 1, prefix = 1, seen_inner = 0, seen_outer = 0;
  for (int d = 0; d < k->rank; d++) {
    if (k->shape[d] == 1) continue;
    if (k->mask >> d & 1) {
      seen_inner = 1;
      if (seen_outer) prefix = 0;
    } else {
      seen_outer = 1;
      if (seen_inner) suffix = 0;
    }
  }
  for (int d = 0; d < k->rank; d++) {
    if (k->mask >> d & 1)
      L *= k->shape[d];
    else
      rows *= k->shape[d];
  }
  *items = rows;
  int32_t m0 = k->members[0];
  if (!suffix && prefix && k->n_members == 1 && k->n_stores == 1 && NODE(c, m0)->op != KILN_OP_ARGMAX && rows >= 16) {
    *col = 1;
    gen_col(c, o, rows, L);
    return;
  }
  sb_printf(o, "for (int64_t row = begin; row < end; row++) {\n");
  int64_t st = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    if (k->mask >> d & 1) continue;
    sb_printf(o, "const int64_t i%d KU = row / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
    st *= k->shape[d];
  }
  for (int32_t j = 0; j < k->n_members; j++) {
    int32_t m = k->members[j];
    if (kiln_op_table[NODE(c, m)->op].kind == KILN_KIND_REDUCE) gen_reduce(c, o, m, suffix, L);
  }
  sb body = {0};
  int any;
  gen_f_stores(c, &body, &any);
  flush_pre(c, o);
  if (any) {
    sb idx = {0};
    inner_index(c, &idx, suffix, L);
    sb_printf(o, "for (int64_t j = 0; j < %lldLL; j++) {\n%s%s}\n", (long long)L, idx.p ? idx.p : "", body.p);
    if (idx.oom) c->st = KILN_ERR_OUT_OF_MEMORY;
    free(idx.p);
  }
  if (body.oom) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  /* row-shaped stores after the F loop: an in-place (aliased) row value is
   * read by the loops above before it is overwritten */
  sb tail = {0};
  for (int32_t j = 0; j < k->n_stores; j++) {
    int32_t m = k->stores[j];
    int red = kiln_op_table[NODE(c, m)->op].kind == KILN_KIND_REDUCE;
    if (!red && kiln_sched_shape_is(c->g, k, m, KILN_SCTX_F)) continue;
    const char *v = ex(c, m, &c->rsctx);
    int a = arg_of(c, c->s->buf_of[m], cty(NODE(c, m)->dtype));
    sb_printf(&tail, "a%d[row] = %s;\n", a, v);
  }
  flush_pre(c, o);
  if (tail.p) sb_add(o, tail.p, tail.n);
  if (tail.oom) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(tail.p);
  sb_printf(o, "}\n");
}

void kiln_kernel_src_clear(kiln_kernel_src *k) {
  if (!k) return;
  free(k->src);
  free(k->args);
  memset(k, 0, sizeof *k);
}

kiln_status kiln_codegen_kernel(const kiln_sched *s, int32_t kid, kiln_kernel_src *out, kiln_err *err) {
  memset(out, 0, sizeof *out);
  cg c = {.g = s->g, .s = s, .k = &s->kernels[kid], .kid = kid, .st = KILN_OK};
  const kiln_skernel *k = c.k;
  c.memo_f = calloc((size_t)s->g->n_nodes + 1, sizeof *c.memo_f);
  c.memo_rs = calloc((size_t)s->g->n_nodes + 1, sizeof *c.memo_rs);
  if (!c.memo_f || !c.memo_rs) c.st = KILN_ERR_OUT_OF_MEMORY;
  c.fctx.kind = KILN_SCTX_F;
  c.fctx.rank = k->rank;
  c.fctx.shape = k->shape;
  c.fctx.flat = "f";
  c.rsctx.kind = KILN_SCTX_RS;
  c.rsctx.rank = k->rank;
  c.rsctx.shape = c.rs_shape;
  c.rsctx.flat = "row";
  for (int d = 0; d < k->rank; d++) {
    int inner = k->mask >> d & 1;
    c.fctx.ax[d] = canon_ax[d];
    c.rsctx.ax[d] = inner ? "0" : canon_ax[d];
    c.rs_shape[d] = inner ? 1 : k->shape[d];
  }
  sb body = {0};
  int64_t items = 0;
  int col = 0;
  if (c.st == KILN_OK) {
    if (k->row)
      gen_row(&c, &body, &items, &col);
    else
      gen_elementwise(&c, &body, &items);
  }
  sb src = {0};
  sb_printf(&src, "void k_0000000000000000(void *const *args, int64_t begin, int64_t end) {\n");
  for (int i = 0; i < c.n_args; i++)
    sb_printf(&src, "%s *restrict a%d KU = (%s *)args[%d];\n", c.arg_ty[i], i, c.arg_ty[i], i);
  if (body.p) sb_add(&src, body.p, body.n);
  sb_printf(&src, "}\n");
  if (body.oom || src.oom || c.pre.oom) c.st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  free(c.pre.p);
  free(c.memo_f);
  free(c.memo_rs);
  kiln_arena_destroy(&c.ar);
  if (c.st != KILN_OK) {
    free(src.p);
    free(c.args);
    free(c.arg_ty);
    if (c.st == KILN_ERR_OUT_OF_MEMORY) return kiln_err_set(err, c.st, "codegen: out of memory");
    return kiln_err_set(err, c.st, "codegen: %s", c.msg);
  }
  free(c.arg_ty);
  uint64_t h = kiln_hash_bytes(src.p, src.n, 0x6b65726eULL);
  snprintf(out->name, sizeof out->name, "k_%016llx", (unsigned long long)h);
  memcpy(src.p + 5, out->name, 18); /* "void " + placeholder of the same length */
  out->src = src.p;
  out->len = src.n;
  out->hash = h;
  out->args = c.args;
  out->n_args = c.n_args;
  out->items = items;
  int64_t per = 1;
  if (k->row)
    for (int d = 0; d < k->rank; d++)
      if (k->mask >> d & 1) per *= k->shape[d];
  out->grain = col ? 64 : per >= 16384 ? 1 : 16384 / (per > 0 ? per : 1);
  return KILN_OK;
}
