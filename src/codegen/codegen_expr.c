/* Kernel code generation, expressions: every node of a kernel is rendered
 * as a C expression at an index. The index is an `ictx`: one C expression
 * per axis (and optionally the row-major flat index) of the node being
 * evaluated. Move ops rewrite the index; elementwise ops combine their
 * inputs' values at the same index; materialized nodes are loads. In the
 * kernel's own canonical contexts (F: the loop index, RS: the row index)
 * every value is bound once to a local (`const T vN = ...;`), which gives
 * common subexpressions for free and keeps the loop bodies readable. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h" /* kiln_rng_uniform_top */
#include "codegen/codegen_internal.h"
#include "ir/scalar.h" /* kf32_bf16, kf32_f16: the bits of a 16-bit constant */

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

int kiln_cg_site_of(cg *c, int32_t n) {
  for (int i = 0; i < c->n_sites; i++)
    if (c->sites[i] == n) return i;
  if (c->n_sites == c->cap_sites) {
    int cap = c->cap_sites ? c->cap_sites * 2 : 4;
    int32_t *a = realloc(c->sites, sizeof *a * (size_t)cap);
    if (!a) {
      c->st = KILN_ERR_OUT_OF_MEMORY;
      return 0;
    }
    c->sites = a;
    c->cap_sites = cap;
  }
  c->sites[c->n_sites] = n;
  return c->n_sites++;
}

/* An index into axis `a` of node dn, checked: out of [0, n) it is reported
 * through the error word (first error wins) and clamped, so the load stays
 * in bounds (the output after an error is unspecified, never a crash). The
 * check is one unsigned compare; the report is a cold call. */
static const kiln_ix *checked_index(cg *c, int32_t n, const char *iv, int64_t dim, const char **text) {
  int e = kiln_cg_arg_of(c, KILN_CG_ERR_ARG, "int64_t");
  int site = kiln_cg_site_of(c, n);
  *text = kiln_cg_sf(c, "kidx((int64_t)(%s), %lldLL, a%d, %d)", iv, (long long)dim, e, site);
  return kiln_cg_ix_atom(c, *text, 0, dim - 1);
}

/* v, the value read at the checked index `text` (checked_index): if v never
 * renders it (the data is a fill or is broadcast along the indexed axis, or
 * the axis has size 1 so the index folded to 0), the check is added on its
 * own, so that no bad index goes unreported. */
static const char *with_check(cg *c, const char *v, const char *text) {
  if (strstr(v, text)) return v;
  return kiln_cg_sf(c, "(kchk%s, (%s))", text + 4, v); /* kidx(args) -> kchk(args) */
}

/* ───────────── literals (the CAST rules: codegen_dtype.c) ───────────── */

static const char *f64_lit(cg *c, double v) {
  /* a NaN keeps its sign bit (torch.full(..., -nan) and ref keep it) */
  if (isnan(v)) return signbit(v) ? "(-__builtin_nan(\"\"))" : "(__builtin_nan(\"\"))";
  if (isinf(v)) return v > 0 ? "(__builtin_inf())" : "(-__builtin_inf())";
  /* "%.17g" prints -0.0 as the int literal -0, which is +0 */
  if (v == 0) return signbit(v) ? "(-0.0)" : "(0.0)";
  return kiln_cg_sf(c, "(%.17g)", v);
}

/* A double constant as a value of dtype dt (the CONST and PAD rules). */
static const char *lit(cg *c, double v, int dt) {
  if (c->bits) { /* a 16-bit float's bits: what the value path stores (a NaN as f64_lit writes it, sign kept) */
    float f = isnan(v) ? (signbit(v) ? -NAN : NAN) : (float)v;
    return kiln_cg_sf(c, "((uint16_t)0x%04xu)", dt == KILN_BF16 ? kf32_bf16(f) : kf32_f16(f));
  }
  return kiln_cg_conv(c, f64_lit(c, v), KILN_F64, dt);
}


/* ───────────── expressions ───────────── */


/* The value of elem, a load that is the same at every item (a SCALAR
 * input, a rank-0 buffer), read once before the kernel's loops: read in a
 * loop, gcc's vectorizer must assume that a byte store (a mask, a bool)
 * may change it, and without versioning for aliases (-fvect-cost-model=
 * cheap) leaves the loop scalar: a kernel storing two dropout masks ran 3x
 * slower. */
static const char *hoist(cg *c, const char *ty, const char *elem) {
  const char *name = kiln_cg_sf(c, "kh%d", c->n_top++);
  kiln_text_printf(&c->top, "const %s %s KU = %s;\n", ty, name, elem);
  if (c->top.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  return name;
}

static const char *load(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  int32_t buf = kiln_sched_read_buf(c->s, n);
  if (buf < 0) {
    unsupported(c, "internal: load of a node without a buffer", nd->op, nd->dtype);
    return "0";
  }
  if (nd->op == KILN_OP_SCALAR) {
    int fl = is_float(nd->dtype);
    const char *ty = fl ? "double" : "int64_t";
    int a = kiln_cg_arg_of(c, buf, ty);
    return kiln_cg_conv(c, hoist(c, ty, kiln_cg_sf(c, "a%d[0]", a)), fl ? KILN_F64 : KILN_I64, nd->dtype);
  }
  int a = kiln_cg_arg_of(c, buf, sty(nd->dtype));
  const char *e = kiln_cg_sf(c, "a%d[%s]", a, kiln_cg_lin(c, x));
  if (nd->rank == 0) e = hoist(c, sty(nd->dtype), e);
  return c->bits ? e : kiln_cg_ld(c, nd->dtype, e);
}

/* The op table's C expression src with its operands a and b replaced by
 * the C texts va and vb (identifiers "a" and "b"; numbers such as 1.0f or
 * 1e-5 are copied whole). */
static const char *paste(cg *c, const char *src, const char *va, const char *vb) {
  kiln_text out = {0};
  kiln_text_printf(&out, "(");
  for (const char *p = src; *p;) {
    const char *q = p;
    if (isalpha((unsigned char)*p) || *p == '_') {
      while (isalnum((unsigned char)*q) || *q == '_') q++;
      if (q - p == 1 && (*p == 'a' || *p == 'b'))
        kiln_text_printf(&out, "(%s)", *p == 'a' ? va : vb);
      else
        kiln_text_printf(&out, "%.*s", (int)(q - p), p);
    } else if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
      while (isalnum((unsigned char)*q) || *q == '.' ||
             ((*q == '+' || *q == '-') && (q[-1] == 'e' || q[-1] == 'E') && !isalpha((unsigned char)p[1])))
        q++;
      kiln_text_printf(&out, "%.*s", (int)(q - p), p);
    } else {
      q++;
      kiln_text_printf(&out, "%c", *p);
    }
    p = q;
  }
  kiln_text_printf(&out, ")");
  const char *r = "0";
  if (out.failed || !out.p)
    c->st = KILN_ERR_OUT_OF_MEMORY;
  else
    r = kiln_cg_sf(c, "%s", out.p);
  free(out.p);
  return r;
}

/* An elementwise op given by the op table's scalar semantics: the F32, F64
 * or INT expression of its row (the text ref and constant folding compile),
 * on operands of dtype in_dt, converted to the node's dtype. */
static const char *scalar_op(cg *c, const kiln_gnode *nd, int in_dt, const char *a, const char *b) {
  const kiln_op_info *t = &kiln_op_table[nd->op];
  int fl = is_float(in_dt);
  if (!kiln_op_scalar_defined(nd->op, fl)) {
    unsupported(c, "elementwise op", nd->op, in_dt);
    return "0";
  }
  if (fl) {
    /* 16-bit floats: the f32 expression, rounded to the node's dtype */
    const char *e = paste(c, in_dt == KILN_F64 ? t->f64_src : t->f32_src, a, b ? b : a);
    if (nd->dtype == KILN_BF16 && in_dt == KILN_BF16 && kiln_cg_keeps_bf16(nd->op)) return kiln_cg_sf(c, "kbf16q(%s)", e);
    if (kiln_dt_is_half(nd->dtype)) return kiln_cg_conv(c, e, KILN_F32, nd->dtype);
    return nd->dtype == KILN_BOOL ? kiln_cg_sf(c, "((int32_t)%s)", e) : e;
  }
  const char *ia = kiln_cg_sf(c, "(int64_t)(%s)", a), *ib = b ? kiln_cg_sf(c, "(int64_t)(%s)", b) : ia;
  return kiln_cg_conv(c, paste(c, t->int_src, ia, ib), KILN_I64, nd->dtype);
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
  kiln_cg_ctx_other(y, in);
  const int64_t *ia = nd->iattr;
  switch (nd->op) {
    case KILN_OP_RESHAPE:
      y->flat = kiln_cg_lin_ix(c, x);
      y->flat_aff = kiln_cg_lin_aff(c, x);
      break;
    case KILN_OP_PERMUTE:
      for (int i = 0; i < nd->rank; i++) y->ax[ia[i]] = kiln_cg_axis_ix(c, x, i);
      break;
    case KILN_OP_EXPAND:
      for (int d = 0; d < nd->rank; d++) y->ax[d] = in->shape[d] == 1 ? kiln_cg_ix_const(c, 0) : kiln_cg_axis_ix(c, x, d);
      break;
    case KILN_OP_SLICE:
      for (int d = 0; d < nd->rank; d++)
        y->ax[d] = kiln_cg_ix_lin2(c, kiln_cg_axis_ix(c, x, d), ia[nd->rank + d], kiln_cg_ix_const(c, ia[d]), 1);
      break;
    case KILN_OP_PAD: /* the raw index: the caller tests it against the input's extent */
      for (int d = 0; d < nd->rank; d++) y->ax[d] = kiln_cg_ix_lin2(c, kiln_cg_axis_ix(c, x, d), 1, kiln_cg_ix_const(c, -ia[d]), 1);
      break;
    default: /* CONCAT, INDEX_SELECT, GATHER: handled by the caller */
      for (int d = 0; d < nd->rank && d < in->rank; d++) y->ax[d] = kiln_cg_axis_ix(c, x, d);
      break;
  }
}

/* Whether the index range [alo, ahi] may reach the part [off, off + len) of
 * a concat. In a family's instance (c->sym) every non-empty part may: the
 * instances' sizes are primes above every constant, so a constant range
 * that misses a part after a symbol's there (x[:3] of a concat of T rows
 * and more) reaches it at a smaller size of the family. */
static int part_reached(const cg *c, int64_t off, int64_t len, int64_t alo, int64_t ahi) {
  if (len <= 0) return 0;
  return c->sym || (off + len > alo && off <= ahi);
}

/* Node n's value at x, also in bits mode: an index or a condition that a
 * move of 16-bit values reads. */
static const char *value_ex(cg *c, int32_t n, const ictx *x) {
  int bits = c->bits;
  c->bits = 0;
  const char *v = kiln_cg_ex(c, n, x);
  c->bits = bits;
  return v;
}

/* PAD: the input where the index is inside it, else the pad value. */
static const char *move_pad(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  ictx y;
  child_ctx(c, n, 0, x, &y);
  const kiln_gnode *in = NODE(c, INP(c, n, 0));
  const char *cond = NULL;
  for (int d = 0; d < nd->rank; d++) {
    int64_t lo, hi;
    kiln_cg_ix_range(y.ax[d], &lo, &hi);
    /* always inside on this axis; in a family's instance (c->sym) never
     * along a symbol's extent: the instances' sizes are primes above every
     * constant, so a constant range inside it there (a strided window of a
     * padded T) may reach the padding at a smaller size of the family */
    if (lo >= 0 && hi < in->shape[d] && !(c->sym && in->shape[d] >= c->sym_floor)) continue;
    const char *t = kiln_cg_sf(c, "(uint64_t)%s < %lluULL", kiln_cg_ix_str(c, y.ax[d]), (unsigned long long)in->shape[d]);
    cond = cond ? kiln_cg_sf(c, "%s && %s", cond, t) : t;
  }
  const char *v = kiln_cg_ex(c, INP(c, n, 0), &y);
  if (!v) return NULL; /* bits mode: not a move of 16-bit loads */
  return cond ? kiln_cg_sf(c, "((%s) ? (%s) : %s)", cond, v, lit(c, nd->fattr, nd->dtype)) : v;
}

/* CONCAT: a select chain over the parts the index can reach. */
static const char *move_concat(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  const int64_t *ia = nd->iattr;
  ictx y;
  int a = (int)ia[0];
  const kiln_ix *iax = kiln_cg_axis_ix(c, x, a);
  int64_t alo, ahi;
  kiln_cg_ix_range(iax, &alo, &ahi);
  const char *ia_s = NULL;
  /* parts the index never reaches (empty ones included) are left out
   * of the select chain; the last part reached is its final else */
  int last = -1;
  int64_t off = 0;
  for (int k = 0; k < nd->n_in; k++) {
    int64_t len = NODE(c, INP(c, n, k))->shape[a];
    if (part_reached(c, off, len, alo, ahi)) last = k;
    off += len;
  }
  off = 0;
  const char *e = NULL, *tail = "";
  for (int k = 0; k <= last; k++) {
    int32_t in = INP(c, n, k);
    int64_t len = NODE(c, in)->shape[a];
    if (!part_reached(c, off, len, alo, ahi)) {
      off += len;
      continue;
    }
    kiln_cg_ctx_other(&y, NODE(c, in));
    for (int d = 0; d < nd->rank; d++) y.ax[d] = kiln_cg_axis_ix(c, x, d);
    y.ax[a] = kiln_cg_ix_lin2(c, iax, 1, kiln_cg_ix_const(c, -off), 1);
    const char *v = kiln_cg_ex(c, in, &y);
    if (!v) return NULL; /* bits mode: not a move of 16-bit loads */
    off += len;
    if (k == last) {
      e = e ? kiln_cg_sf(c, "%s%s%s", e, v, tail) : v;
      break;
    }
    if (!ia_s) ia_s = kiln_cg_ix_str(c, iax);
    const char *part = kiln_cg_sf(c, "((%s) < %lldLL ? (%s) : (", ia_s, (long long)off, v);
    e = e ? kiln_cg_sf(c, "%s%s", e, part) : part;
    tail = kiln_cg_sf(c, "%s))", tail);
  }
  return e ? e : lit(c, 0, nd->dtype);
}

/* INDEX_SELECT: the index tensor read at the output's axes a..a+rank, checked. */
static const char *move_index_select(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  const int64_t *ia = nd->iattr;
  int a = (int)ia[0];
  int32_t di = INP(c, n, 0), ii = INP(c, n, 1);
  const kiln_gnode *dn = NODE(c, di), *in = NODE(c, ii);
  ictx iy, dy;
  kiln_cg_ctx_other(&iy, in);
  for (int q = 0; q < in->rank; q++) iy.ax[q] = kiln_cg_axis_ix(c, x, a + q);
  const char *iv = value_ex(c, ii, &iy);
  kiln_cg_ctx_other(&dy, dn);
  for (int d = 0; d < dn->rank; d++)
    dy.ax[d] = d < a ? kiln_cg_axis_ix(c, x, d) : d > a ? kiln_cg_axis_ix(c, x, d - 1 + in->rank) : NULL;
  const char *chk;
  dy.ax[a] = checked_index(c, n, iv, dn->shape[a], &chk);
  const char *v = kiln_cg_ex(c, di, &dy);
  return v ? with_check(c, v, chk) : NULL;
}

/* GATHER: the index read at the output's position, checked. */
static const char *move_gather(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  const int64_t *ia = nd->iattr;
  int a = (int)ia[0];
  int32_t di = INP(c, n, 0), ii = INP(c, n, 1);
  const kiln_gnode *dn = NODE(c, di);
  ictx iy, dy;
  kiln_cg_ctx_other(&iy, NODE(c, ii));
  for (int d = 0; d < nd->rank; d++) iy.ax[d] = kiln_cg_axis_ix(c, x, d);
  const char *iv = value_ex(c, ii, &iy);
  kiln_cg_ctx_other(&dy, dn);
  for (int d = 0; d < dn->rank; d++) dy.ax[d] = kiln_cg_axis_ix(c, x, d);
  const char *chk;
  dy.ax[a] = checked_index(c, n, iv, dn->shape[a], &chk);
  const char *v = kiln_cg_ex(c, di, &dy);
  return v ? with_check(c, v, chk) : NULL;
}

static const char *move(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  ictx y;
  switch (nd->op) {
    case KILN_OP_RESHAPE: case KILN_OP_PERMUTE: case KILN_OP_EXPAND: case KILN_OP_SLICE:
      child_ctx(c, n, 0, x, &y);
      return kiln_cg_ex(c, INP(c, n, 0), &y);
    case KILN_OP_PAD: return move_pad(c, n, x);
    case KILN_OP_CONCAT: return move_concat(c, n, x);
    case KILN_OP_INDEX_SELECT: return move_index_select(c, n, x);
    case KILN_OP_GATHER: return move_gather(c, n, x);
    default: break;
  }
  unsupported(c, "move op", nd->op, nd->dtype);
  return "0";
}

/* Bits mode: the bits of a constant, or of a 16-bit float that moves
 * loaded elements (a view, pad, concat, gather, index_select or where;
 * kiln_cg_ex renders its computed inputs as their stored bits), NULL for
 * any other value. */
static const char *compute_bits(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  const int32_t *in = kiln_gnode_inputs(c->g, nd);
  switch (kiln_op_table[nd->op].kind) {
    case KILN_KIND_SOURCE: return nd->op == KILN_OP_CONST ? lit(c, nd->fattr, nd->dtype) : NULL;
    case KILN_KIND_MOVE: return move(c, n, x);
    case KILN_KIND_TERNARY: {
      if (NODE(c, in[1])->dtype != nd->dtype || NODE(c, in[2])->dtype != nd->dtype) return NULL;
      const char *cd = value_ex(c, in[0], x), *a = kiln_cg_ex(c, in[1], x), *b = kiln_cg_ex(c, in[2], x);
      if (!a || !b) return NULL;
      if (is_float(NODE(c, in[0])->dtype)) cd = kiln_cg_sf(c, "(kf2i64((double)(%s)) != 0)", cd);
      return kiln_cg_sf(c, "kselu16(((%s) != 0), (%s), (%s))", cd, a, b);
    }
    default: return NULL;
  }
}

static const char *compute(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  const int32_t *in = kiln_gnode_inputs(c->g, nd);
  if (c->bits) return compute_bits(c, n, x);
  switch (kiln_op_table[nd->op].kind) {
    case KILN_KIND_SOURCE:
      switch (nd->op) {
        case KILN_OP_SCALAR: return load(c, n, x);
        case KILN_OP_CONST: return lit(c, nd->fattr, nd->dtype);
        case KILN_OP_IOTA: return kiln_cg_conv(c, kiln_cg_axis(c, x, (int)nd->iattr[0]), KILN_I64, nd->dtype);
        case KILN_OP_RANDOM: {
          ictx sy;
          kiln_cg_ctx_other(&sy, NODE(c, in[0]));
          const char *seed = kiln_cg_conv(c, kiln_cg_ex(c, in[0], &sy), NODE(c, in[0])->dtype, KILN_I64);
          const char *r = nd->iattr[0] == 1
                              ? kiln_cg_sf(c, "krng_normal((uint64_t)(%s), (uint64_t)(%s))", seed, kiln_cg_lin(c, x))
                              : kiln_cg_sf(c, "krng_uniform_below((uint64_t)(%s), (uint64_t)(%s), %lldLL)", seed,
                                           kiln_cg_lin(c, x), (long long)kiln_rng_uniform_top((kiln_dtype)nd->dtype));
          return kiln_cg_conv(c, r, KILN_F64, nd->dtype);
        }
        default: break;
      }
      break;
    case KILN_KIND_UNARY: {
      const char *a = kiln_cg_ex(c, in[0], x);
      if (nd->op == KILN_OP_CAST && nd->dtype == KILN_BF16 && NODE(c, in[0])->dtype == KILN_F32 &&
          kiln_cg_exact_bf16(c, in[0]))
        return kiln_cg_sf(c, "kbf16q(%s)", a);
      if (nd->op == KILN_OP_CAST) return kiln_cg_conv(c, a, NODE(c, in[0])->dtype, nd->dtype);
      if (c->sc_split && x->kind == KILN_SCTX_F && (nd->op == KILN_OP_SIN || nd->op == KILN_OP_COS) &&
          nd->dtype == KILN_F32 && NODE(c, in[0])->dtype == KILN_F32) {
        kiln_text_printf(&c->sc_guard, "kb |= ksincos_large(%s);\n", a);
        if (c->sc_guard.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
        return kiln_cg_sf(c, "KSC(%s, %s)", nd->op == KILN_OP_SIN ? "ksinf" : "kcosf", a);
      }
      return scalar_op(c, nd, NODE(c, in[0])->dtype, a, NULL);
    }
    case KILN_KIND_BINARY: {
      const char *a = kiln_cg_ex(c, in[0], x), *b = kiln_cg_ex(c, in[1], x);
      return scalar_op(c, nd, NODE(c, in[0])->dtype, a, b);
    }
    case KILN_KIND_TERNARY: {
      const char *cd = kiln_cg_ex(c, in[0], x), *a = kiln_cg_ex(c, in[1], x), *b = kiln_cg_ex(c, in[2], x);
      int cdt = NODE(c, in[0])->dtype;
      if (is_float(cdt)) cd = kiln_cg_sf(c, "(kf2i64((double)(%s)) != 0)", cd);
      /* float values by a mask select (kself, scalar.inc; a 16-bit float
       * is an f32 inside a kernel): with ?: gcc sinks an arm's arithmetic
       * into a branch that, without AVX-512's masks, it cannot make a vector
       * select again, and the loop (a dropout's where) stayed scalar on
       * AVX2. Both arms are safe to evaluate: every scalar op is total
       * (integer x / 0 is 0, ...) */
      int same = NODE(c, in[1])->dtype == nd->dtype && NODE(c, in[2])->dtype == nd->dtype;
      if (same && (nd->dtype == KILN_F32 || nd->dtype == KILN_F64 || kiln_dt_is_half(nd->dtype)))
        return kiln_cg_sf(c, "%s(((%s) != 0), (%s), (%s))", nd->dtype == KILN_F64 ? "kseld" : "kself", cd, a, b);
      return kiln_cg_sf(c, "((%s) ? (%s) : (%s))", cd, a, b);
    }
    case KILN_KIND_MOVE: return move(c, n, x);
    default: break;
  }
  unsupported(c, "internal: op inlined that must be materialized", nd->op, nd->dtype);
  return "0";
}

int kiln_cg_loads(cg *c, int32_t n) {
  int op = NODE(c, n)->op;
  return c->s->owner[n] != c->kid && (op == KILN_OP_LEAF || op == KILN_OP_SCALAR || c->s->mat[n]);
}

static int moved16(cg *c, int32_t n);

const char *kiln_cg_ex(cg *c, int32_t n, const ictx *x) {
  const kiln_gnode *nd = NODE(c, n);
  if (c->st != KILN_OK) return "0";
  int member = c->s->owner[n] == c->kid;
  const char **memo = x->kind == KILN_SCTX_F ? c->memo_f : x->kind == KILN_SCTX_RS ? c->memo_rs : NULL;
  if (c->bits) {
    if (!kiln_dt_is_half(nd->dtype)) return NULL;
    memo = x->kind == KILN_SCTX_F ? c->memo_b : NULL;
  }
  if (memo && memo[n]) return memo[n];
  const char *e;
  if (c->bits && !moved16(c, n) && nd->op != KILN_OP_CONST) /* computed, a SCALAR: the bits its value is stored as */
    e = kiln_cg_st(c, nd->dtype, value_ex(c, n, x));
  else if (member && kiln_op_table[nd->op].kind == KILN_KIND_REDUCE)
    return kiln_cg_sf(c, "r%d", n);
  else if (kiln_cg_loads(c, n))
    e = load(c, n, x);
  else
    e = compute(c, n, x);
  if (!memo || !e) return e;
  if (c->bits) {
    const char *b = kiln_cg_sf(c, "b%d", c->nvar++);
    kiln_text_printf(c->cur, "const uint16_t %s = %s;\n", b, e);
    return memo[n] = b;
  }
  const char *v = kiln_cg_sf(c, "v%d", c->nvar++);
  /* bool temporaries are 32-bit (0 or 1): bytes mixed with 32-bit floats
   * in one loop leave the vectorizer no common vector shape */
  kiln_text_printf(x->kind == KILN_SCTX_F ? c->cur : &c->pre, "const %s %s = %s;\n",
                   nd->dtype == KILN_BOOL ? "int32_t" : cty(nd->dtype), v, e);
  memo[n] = v;
  return v;
}

/* 1 when node n, a 16-bit float, is moved without arithmetic from at
 * least one 16-bit load: a load itself, or a view, pad, concat, gather,
 * index_select or where with such an input. Bits mode renders its moved
 * elements as the loaded bits; its other inputs (constants, computed
 * values, a reduction's result) as the bits the value path would store for
 * them. A node with no such load is stored by the value path: the same
 * bits, and the generated code of arithmetic kernels stays as it was.
 * Memoized per node in c->mov16 (1: yes, 2: no). */
static int moved16(cg *c, int32_t n) {
  if (c->mov16[n]) return c->mov16[n] == 1;
  const kiln_gnode *nd = NODE(c, n);
  const int32_t *in = kiln_gnode_inputs(c->g, nd);
  int kind = kiln_op_table[nd->op].kind, r = 0;
  if (!kiln_dt_is_half(nd->dtype) || nd->op == KILN_OP_SCALAR)
    r = 0;
  else if (kiln_cg_loads(c, n))
    r = 1;
  else if (kind == KILN_KIND_TERNARY)
    r = NODE(c, in[1])->dtype == nd->dtype && NODE(c, in[2])->dtype == nd->dtype &&
        (moved16(c, in[1]) || moved16(c, in[2]));
  else if (kind == KILN_KIND_MOVE && nd->op == KILN_OP_CONCAT) {
    for (int k = 0; k < nd->n_in && !r; k++) r = moved16(c, in[k]);
  } else if (kind == KILN_KIND_MOVE)
    r = (nd->op == KILN_OP_RESHAPE || nd->op == KILN_OP_PERMUTE || nd->op == KILN_OP_EXPAND ||
         nd->op == KILN_OP_SLICE || nd->op == KILN_OP_PAD || nd->op == KILN_OP_INDEX_SELECT ||
         nd->op == KILN_OP_GATHER) &&
        moved16(c, in[0]);
  c->mov16[n] = r ? 1 : 2;
  return r;
}

const char *kiln_cg_bits16(cg *c, int32_t n, const ictx *x) {
  if (c->st != KILN_OK || !moved16(c, n)) return NULL;
  int bits = c->bits;
  c->bits = 1;
  const char *e = kiln_cg_ex(c, n, x);
  c->bits = bits;
  return c->st == KILN_OK ? e : NULL;
}
