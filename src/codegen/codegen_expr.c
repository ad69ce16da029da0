/* Kernel code generation, expressions: every node of a kernel is rendered
 * as a C expression at an index. The index is an `ictx`: one C expression
 * per axis (and optionally the row-major flat index) of the node being
 * evaluated. Move ops rewrite the index; elementwise ops combine their
 * inputs' values at the same index; materialized nodes are loads. In the
 * kernel's own canonical contexts (F: the loop index, RS: the row index)
 * every value is bound once to a local (`const T vN = ...;`), which gives
 * common subexpressions for free and keeps the loop bodies readable. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen_internal.h"

/* ───────────── string building ───────────── */

void kiln_cg_sb_add(sb *b, const char *s, size_t n) {
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

void kiln_cg_sb_printf(sb *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    kiln_cg_sb_add(b, tmp, (size_t)n);
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
  kiln_cg_sb_add(b, big, (size_t)n);
  free(big);
}

const char *const kiln_cg_canon_ax[KILN_MAX_RANK] = {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"};

const char *kiln_cg_sf(cg *c, const char *fmt, ...) {
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

int kiln_cg_arg_of(cg *c, int32_t buf, const char *ty) {
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

const char *kiln_cg_conv(cg *c, const char *e, int from, int to) {
  if (from == to) return e;
  if (to == KILN_BOOL) return kiln_cg_sf(c, "((uint8_t)((%s) != 0))", e);
  if (is_float(from)) {
    switch (to) {
      case KILN_F32: return kiln_cg_sf(c, "((float)(%s))", e);
      case KILN_F64: return kiln_cg_sf(c, "((double)(%s))", e);
      case KILN_I32: return kiln_cg_sf(c, "kf2i32((double)(%s))", e);
      default: return kiln_cg_sf(c, "kf2i64((double)(%s))", e);
    }
  }
  switch (to) {
    case KILN_F32: return kiln_cg_sf(c, "((float)(int64_t)(%s))", e);
    case KILN_F64: return kiln_cg_sf(c, "((double)(int64_t)(%s))", e);
    case KILN_I32: return kiln_cg_sf(c, "ki2i32((int64_t)(%s))", e);
    default: return kiln_cg_sf(c, "((int64_t)(%s))", e);
  }
}

static const char *f64_lit(cg *c, double v) {
  if (isnan(v)) return "(__builtin_nan(\"\"))";
  if (isinf(v)) return v > 0 ? "(__builtin_inf())" : "(-__builtin_inf())";
  return kiln_cg_sf(c, "(%.17g)", v);
}

/* A double constant as a value of dtype dt (the CONST and PAD rules). */
static const char *lit(cg *c, double v, int dt) { return kiln_cg_conv(c, f64_lit(c, v), KILN_F64, dt); }

/* ───────────── indices ───────────── */

static const char *axis(cg *c, const ictx *x, int d) {
  if (x->shape[d] == 1) return "0";
  if (x->ax[d]) {
    for (int i = 0; i < KILN_MAX_RANK; i++)
      if (x->ax[d] == kiln_cg_canon_ax[i]) c->used_axes |= 1u << i;
    return x->ax[d];
  }
  int64_t st = 1;
  for (int e = d + 1; e < x->rank; e++) st *= x->shape[e];
  return kiln_cg_sf(c, "((%s) / %lldLL %% %lldLL)", x->flat, (long long)st, (long long)x->shape[d]);
}

static const char *lin(cg *c, const ictx *x) {
  if (x->flat) return x->flat;
  const char *e = NULL;
  int64_t st = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    if (x->shape[d] != 1) {
      const char *t = st == 1 ? axis(c, x, d) : kiln_cg_sf(c, "(%s) * %lldLL", axis(c, x, d), (long long)st);
      e = e ? kiln_cg_sf(c, "%s + %s", t, e) : t;
    }
    st *= x->shape[d];
  }
  return e ? kiln_cg_sf(c, "(%s)", e) : "0";
}

static void ctx_other(ictx *x, const kiln_gnode *n) {
  memset(x, 0, sizeof *x);
  x->kind = KILN_SCTX_OTHER;
  x->rank = n->rank;
  x->shape = n->shape;
}

/* ───────────── expressions ───────────── */


static const char *load(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  int32_t buf = kiln_sched_read_buf(c->s, n);
  if (buf < 0) {
    unsupported(c, "internal: load of a node without a buffer", nd->op, nd->dtype);
    return "0";
  }
  if (nd->op == KILN_OP_SCALAR) {
    int fl = is_float(nd->dtype);
    int a = kiln_cg_arg_of(c, buf, fl ? "double" : "int64_t");
    return kiln_cg_conv(c, kiln_cg_sf(c, "a%d[0]", a), fl ? KILN_F64 : KILN_I64, nd->dtype);
  }
  int a = kiln_cg_arg_of(c, buf, cty(nd->dtype));
  return kiln_cg_sf(c, "a%d[%s]", a, lin(c, x));
}

static const char *unary(cg *c, const kiln_gnode *nd, const char *a, int in_dt) {
  int t = nd->dtype;
  if (nd->op == KILN_OP_CAST) return kiln_cg_conv(c, a, in_dt, t);
  if (is_float(t)) {
    const char *f = t == KILN_F32 ? "f" : "";
    const char *sx = t == KILN_F32 ? "f32" : "f64";
    const char *one = t == KILN_F32 ? "1.0f" : "1.0";
    switch (nd->op) {
      case KILN_OP_NEG: return kiln_cg_sf(c, "(-(%s))", a);
      case KILN_OP_ABS: return kiln_cg_sf(c, "fabs%s(%s)", f, a);
      case KILN_OP_EXP: return t == KILN_F32 ? kiln_cg_sf(c, "kexpf(%s)", a) : kiln_cg_sf(c, "exp(%s)", a);
      case KILN_OP_LOG: return kiln_cg_sf(c, "log%s(%s)", f, a);
      case KILN_OP_SQRT: return kiln_cg_sf(c, "sqrt%s(%s)", f, a);
      case KILN_OP_RSQRT: return kiln_cg_sf(c, "(%s / sqrt%s(%s))", one, f, a);
      case KILN_OP_TANH: return kiln_cg_sf(c, "tanh%s(%s)", f, a);
      case KILN_OP_SIGMOID:
        return t == KILN_F32 ? kiln_cg_sf(c, "(1.0f / (1.0f + kexpf(-(%s))))", a) : kiln_cg_sf(c, "(1.0 / (1.0 + exp(-(%s))))", a);
      case KILN_OP_RELU: return kiln_cg_sf(c, "krelu_%s(%s)", sx, a);
      case KILN_OP_GELU: return kiln_cg_sf(c, "kgelu_%s(%s)", sx, a);
      case KILN_OP_GELU_TANH: return kiln_cg_sf(c, "kgelut_%s(%s)", sx, a);
      case KILN_OP_NOT: return kiln_cg_conv(c, kiln_cg_sf(c, "((%s) == 0)", a), KILN_I64, t);
      default: break;
    }
    unsupported(c, "unary op", nd->op, t);
    return "0";
  }
  const char *r;
  switch (nd->op) {
    case KILN_OP_NEG: r = kiln_cg_sf(c, "kneg_i(%s)", a); break;
    case KILN_OP_ABS: r = kiln_cg_sf(c, "kabs_i(%s)", a); break;
    case KILN_OP_RELU: r = kiln_cg_sf(c, "kmax_i(%s, 0)", a); break;
    case KILN_OP_NOT: r = kiln_cg_sf(c, "((int64_t)((%s) == 0))", a); break;
    default: r = a; break; /* float math on integers: identity, as in ref */
  }
  return kiln_cg_conv(c, r, KILN_I64, t);
}

static const char *binary(cg *c, const kiln_gnode *nd, const char *a, const char *b) {
  int t = nd->dtype, op = nd->op;
  static const char *cmp[] = {"==", "!=", "<", "<=", ">", ">="};
  if (op >= KILN_OP_EQ && op <= KILN_OP_GE) return kiln_cg_sf(c, "((uint8_t)((%s) %s (%s)))", a, cmp[op - KILN_OP_EQ], b);
  if (op == KILN_OP_AND || op == KILN_OP_OR)
    return kiln_cg_sf(c, "((uint8_t)(((%s) != 0) %s ((%s) != 0)))", a, op == KILN_OP_AND ? "&&" : "||", b);
  if (is_float(t)) {
    const char *sx = t == KILN_F32 ? "f32" : "f64";
    switch (op) {
      case KILN_OP_ADD: return kiln_cg_sf(c, "((%s) + (%s))", a, b);
      case KILN_OP_SUB: return kiln_cg_sf(c, "((%s) - (%s))", a, b);
      case KILN_OP_MUL: return kiln_cg_sf(c, "((%s) * (%s))", a, b);
      case KILN_OP_DIV: return kiln_cg_sf(c, "((%s) / (%s))", a, b);
      case KILN_OP_POW: return kiln_cg_sf(c, "pow%s(%s, %s)", t == KILN_F32 ? "f" : "", a, b);
      case KILN_OP_MAX: return kiln_cg_sf(c, "kmax_%s(%s, %s)", sx, a, b);
      case KILN_OP_MIN: return kiln_cg_sf(c, "kmin_%s(%s, %s)", sx, a, b);
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
  return kiln_cg_conv(c, kiln_cg_sf(c, "%s((int64_t)(%s), (int64_t)(%s))", fn, a, b), KILN_I64, t);
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
        y->ax[d] = kiln_cg_sf(c, "(%lldLL + (%s) * %lldLL)", (long long)ia[d], axis(c, x, d), (long long)ia[nd->rank + d]);
      break;
    case KILN_OP_PAD:
      for (int d = 0; d < nd->rank; d++) y->ax[d] = kiln_cg_sf(c, "((%s) - %lldLL)", axis(c, x, d), (long long)ia[d]);
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
      return kiln_cg_ex(c, INP(c, n, 0), &y);
    case KILN_OP_PAD: {
      child_ctx(c, n, 0, x, &y);
      const kiln_gnode *in = NODE(c, INP(c, n, 0));
      const char *cond = "1";
      for (int d = 0; d < nd->rank; d++)
        cond = kiln_cg_sf(c, "%s && (uint64_t)(%s) < %lluULL", cond, y.ax[d], (unsigned long long)in->shape[d]);
      return kiln_cg_sf(c, "((%s) ? (%s) : %s)", cond, kiln_cg_ex(c, INP(c, n, 0), &y), lit(c, nd->fattr, nd->dtype));
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
        y.ax[a] = kiln_cg_sf(c, "((%s) - %lldLL)", ia_s, (long long)off);
        const char *v = kiln_cg_ex(c, in, &y);
        off += NODE(c, in)->shape[a];
        if (k == nd->n_in - 1) {
          e = e ? kiln_cg_sf(c, "%s%s%s", e, v, tail) : v;
        } else {
          const char *part = kiln_cg_sf(c, "((%s) < %lldLL ? (%s) : (", ia_s, (long long)off, v);
          e = e ? kiln_cg_sf(c, "%s%s", e, part) : part;
          tail = kiln_cg_sf(c, "%s))", tail);
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
      const char *iv = kiln_cg_ex(c, ii, &iy);
      ctx_other(&dy, dn);
      for (int d = 0; d < dn->rank; d++)
        dy.ax[d] = d < a ? axis(c, x, d) : d > a ? axis(c, x, d - 1 + in->rank) : NULL;
      dy.ax[a] = kiln_cg_sf(c, "kclamp((int64_t)(%s), %lldLL)", iv, (long long)dn->shape[a]);
      return kiln_cg_ex(c, di, &dy);
    }
    case KILN_OP_GATHER: {
      int a = (int)ia[0];
      int32_t di = INP(c, n, 0), ii = INP(c, n, 1);
      const kiln_gnode *dn = NODE(c, di);
      ictx iy, dy;
      ctx_other(&iy, NODE(c, ii));
      for (int d = 0; d < nd->rank; d++) iy.ax[d] = axis(c, x, d);
      const char *iv = kiln_cg_ex(c, ii, &iy);
      ctx_other(&dy, dn);
      for (int d = 0; d < dn->rank; d++) dy.ax[d] = axis(c, x, d);
      dy.ax[a] = kiln_cg_sf(c, "kclamp((int64_t)(%s), %lldLL)", iv, (long long)dn->shape[a]);
      return kiln_cg_ex(c, di, &dy);
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
        case KILN_OP_IOTA: return kiln_cg_conv(c, axis(c, x, (int)nd->iattr[0]), KILN_I64, nd->dtype);
        case KILN_OP_RANDOM: {
          ictx sy;
          ctx_other(&sy, NODE(c, in[0]));
          const char *seed = kiln_cg_conv(c, kiln_cg_ex(c, in[0], &sy), NODE(c, in[0])->dtype, KILN_I64);
          const char *r = kiln_cg_sf(c, "krng_%s((uint64_t)(%s), (uint64_t)(%s))", nd->iattr[0] == 1 ? "normal" : "uniform",
                             seed, lin(c, x));
          return kiln_cg_conv(c, r, KILN_F64, nd->dtype);
        }
        default: break;
      }
      break;
    case KILN_KIND_UNARY: return unary(c, nd, kiln_cg_ex(c, in[0], x), NODE(c, in[0])->dtype);
    case KILN_KIND_BINARY: {
      const char *a = kiln_cg_ex(c, in[0], x), *b = kiln_cg_ex(c, in[1], x);
      return binary(c, nd, a, b);
    }
    case KILN_KIND_TERNARY: {
      const char *cd = kiln_cg_ex(c, in[0], x), *a = kiln_cg_ex(c, in[1], x), *b = kiln_cg_ex(c, in[2], x);
      int cdt = NODE(c, in[0])->dtype;
      if (is_float(cdt)) cd = kiln_cg_sf(c, "(kf2i64((double)(%s)) != 0)", cd);
      return kiln_cg_sf(c, "((%s) ? (%s) : (%s))", cd, a, b);
    }
    case KILN_KIND_MOVE: return move(c, n, x);
    default: break;
  }
  unsupported(c, "internal: op inlined that must be materialized", nd->op, nd->dtype);
  return "0";
}

const char *kiln_cg_ex(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  if (c->st != KILN_OK) return "0";
  int member = c->s->owner[n] == c->kid;
  const char **memo = x->kind == KILN_SCTX_F ? c->memo_f : x->kind == KILN_SCTX_RS ? c->memo_rs : NULL;
  if (memo && memo[n]) return memo[n];
  if (member && kiln_op_table[nd->op].kind == KILN_KIND_REDUCE) return kiln_cg_sf(c, "r%d", n);
  const char *e;
  if (!member && (nd->op == KILN_OP_LEAF || nd->op == KILN_OP_SCALAR || c->s->mat[n]))
    e = load(c, n, x);
  else
    e = compute(c, n, x);
  if (!memo) return e;
  const char *v = kiln_cg_sf(c, "v%d", c->nvar++);
  kiln_cg_sb_printf(x->kind == KILN_SCTX_F ? c->cur : &c->pre, "const %s %s = %s;\n", cty(nd->dtype), v, e);
  memo[n] = v;
  return v;
}

