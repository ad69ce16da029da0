/* Kernel code generation, dtypes: loads, stores and conversions between
 * dtypes (the CAST rules), and which f32 values bf16 already holds (whose
 * rounding to bf16 can be skipped). Split out of codegen_expr.c. */
#include <math.h>

#include "codegen/codegen_internal.h"
#include "ir/scalar.h" /* kbf16r: what bf16 holds (bf16_holds) */

const char *kiln_cg_ld(cg *c, int dt, const char *elem) {
  if (dt == KILN_BF16) return kiln_cg_sf(c, "kbf16_f32(%s)", elem);
  if (dt == KILN_F16) return kiln_cg_sf(c, "kf16_f32(%s)", elem);
  return elem;
}

const char *kiln_cg_st(cg *c, int dt, const char *v) {
  if (dt == KILN_BF16) return kiln_cg_sf(c, "kbf16_bits(%s)", v); /* v is a bf16 value: exact */
  if (dt == KILN_F16) return kiln_cg_sf(c, "kf32_f16(%s)", v);
  return v;
}

/* to a 16-bit float: the f32 value (by the f32 rule), rounded; a 16-bit
 * float source is its f32 value */
const char *kiln_cg_conv(cg *c, const char *e, int from, int to) {
  if (from == to) return e;
  if (kiln_dt_is_half(to)) {
    const char *f = kiln_cg_conv(c, e, kiln_dt_compute(from), KILN_F32);
    return kiln_cg_sf(c, to == KILN_BF16 ? "kbf16r(%s)" : "kf16r(%s)", f);
  }
  if (kiln_dt_is_half(from)) from = KILN_F32;
  if (from == to) return e;
  if (to == KILN_BOOL) return kiln_cg_sf(c, "((int32_t)((%s) != 0))", e);
  if (is_float(from)) {
    switch (to) {
      case KILN_F32: return kiln_cg_sf(c, "((float)(%s))", e);
      case KILN_F64: return kiln_cg_sf(c, "((double)(%s))", e);
      case KILN_I32: return kiln_cg_sf(c, "kf2i32((double)(%s))", e);
      case KILN_U8: return kiln_cg_sf(c, "ki2u8(kf2i64((double)(%s)))", e);
      case KILN_I8: return kiln_cg_sf(c, "ki2i8(kf2i64((double)(%s)))", e);
      default: return kiln_cg_sf(c, "kf2i64((double)(%s))", e);
    }
  }
  /* bool -> float as a select: the widening integer conversion blocks
   * vectorization of the loops (masks in pooling backward, accuracy counts) */
  if (from == KILN_BOOL && is_float(to)) return kiln_cg_sf(c, to == KILN_F32 ? "((%s) ? 1.0f : 0.0f)" : "((%s) ? 1.0 : 0.0)", e);
  switch (to) {
    case KILN_F32: return kiln_cg_sf(c, "((float)(int64_t)(%s))", e);
    case KILN_F64: return kiln_cg_sf(c, "((double)(int64_t)(%s))", e);
    case KILN_I32: return kiln_cg_sf(c, "ki2i32((int64_t)(%s))", e);
    case KILN_U8: return kiln_cg_sf(c, "ki2u8((int64_t)(%s))", e);
    case KILN_I8: return kiln_cg_sf(c, "ki2i8((int64_t)(%s))", e);
    default: return kiln_cg_sf(c, "((int64_t)(%s))", e);
  }
}

/* Ops whose f32 result is one of their inputs, 0, an integer rounding of
 * an input or a sign (or a NaN): on values bf16 represents, a value bf16
 * represents. */
int kiln_cg_keeps_bf16(int op) {
  switch (op) {
    case KILN_OP_NEG: case KILN_OP_ABS: case KILN_OP_RELU: case KILN_OP_MAX: case KILN_OP_MIN:
    case KILN_OP_FLOOR: case KILN_OP_CEIL: case KILN_OP_ROUND: case KILN_OP_TRUNC: case KILN_OP_SIGN:
      return 1;
    default:
      return 0;
  }
}

static int bf16_holds(double v) {
  float f = (float)v;
  return isnan(v) || ((double)f == v && kbf16r(f) == f);
}

/* kiln_cg_exact_bf16 to a depth (12; 0 past it): a bf16 node, a widening
 * of one, a constant or pad fill bf16 holds, moves and selects of such
 * values, and keeps_bf16 ops and concats of them. Rounding such a value to
 * bf16 only makes a NaN the quiet 0x7fc0 (kbf16q): autocast's casts around
 * a select or a relu (dropout in f32 between two bf16 ops) rounded values
 * already exact. */
static int exact_at(cg *c, int32_t n, int depth) {
  const kiln_gnode *nd = NODE(c, n);
  if (nd->dtype == KILN_BF16) return 1;
  if (nd->dtype != KILN_F32 || depth > 12) return 0;
  const int32_t *in = kiln_gnode_inputs(c->g, nd);
  switch (nd->op) {
    case KILN_OP_CONST: return bf16_holds(nd->fattr);
    case KILN_OP_CAST: return NODE(c, in[0])->dtype == KILN_BOOL || exact_at(c, in[0], depth + 1);
    case KILN_OP_PAD: if (!bf16_holds(nd->fattr)) return 0; /* fall through */
    case KILN_OP_RESHAPE: case KILN_OP_PERMUTE: case KILN_OP_EXPAND: case KILN_OP_SLICE:
    case KILN_OP_INDEX_SELECT: case KILN_OP_GATHER:
      return exact_at(c, in[0], depth + 1);
    case KILN_OP_WHERE: return exact_at(c, in[1], depth + 1) && exact_at(c, in[2], depth + 1);
    case KILN_OP_CONCAT: break; /* every input */
    default:
      if (!kiln_cg_keeps_bf16(nd->op)) return 0;
  }
  for (int32_t k = 0; k < nd->n_in; k++)
    if (!exact_at(c, in[k], depth + 1)) return 0;
  return 1;
}

int kiln_cg_exact_bf16(cg *c, int32_t n) { return exact_at(c, n, 0); }
