#include "passes/pass_const.h"

#include "ir/scalar.h"

#include <math.h>
#include <string.h>

static int is_float(int dt) { return kiln_dt_is_float(dt); }

/* Round a double to the dtype's float precision. */
static double round_to(int dt, double v) {
  switch (dt) {
    case KILN_F32: return (double)(float)v;
    case KILN_BF16: return kbf16r((float)v); /* through f32, as the kernels */
    case KILN_F16: return kf16r((float)v);
    default: return v;
  }
}

/* Integer range of an integer dtype. */
static void int_range(int dt, int64_t *lo, int64_t *hi) {
  if (dt == KILN_I32) {
    *lo = INT32_MIN;
    *hi = INT32_MAX;
  } else if (dt == KILN_BOOL) {
    *lo = 0;
    *hi = 1;
  } else if (dt == KILN_U8) {
    *lo = 0;
    *hi = UINT8_MAX;
  } else if (dt == KILN_I8) {
    *lo = INT8_MIN;
    *hi = INT8_MAX;
  } else {
    *lo = INT64_MIN;
    *hi = INT64_MAX;
  }
}

/* C conversion of a double to an integer dtype (truncation), refused where C
 * leaves it undefined (NaN, out of range). */
static int trunc_to_int(int dt, double v, int64_t *out) {
  if (isnan(v)) return 0;
  double t = trunc(v);
  int64_t lo, hi;
  int_range(dt, &lo, &hi);
  /* -2^63 is exact in double, 2^63 is the first value out of range. */
  if (dt == KILN_I64) {
    if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0)) return 0;
  } else if (!(t >= (double)lo && t <= (double)hi)) {
    return 0;
  }
  *out = (int64_t)t;
  return 1;
}

int kiln_cval_from_fattr(int dt, double v, kiln_cval *out) {
  memset(out, 0, sizeof *out);
  switch (dt) {
    case KILN_F32:
    case KILN_F64:
    case KILN_BF16:
    case KILN_F16:
      out->f = round_to(dt, v);
      return 1;
    case KILN_I32:
    case KILN_I64:
    case KILN_U8:
    case KILN_I8:
      if (trunc(v) != v) return 0;
      return trunc_to_int(dt, v, &out->i);
    case KILN_BOOL:
      if (v != 0.0 && v != 1.0) return 0;
      out->i = v != 0.0;
      return 1;
    default:
      return 0;
  }
}

int kiln_cval_to_fattr(int dt, kiln_cval v, double *out) {
  if (is_float(dt)) {
    *out = round_to(dt, v.f);
    return 1;
  }
  /* An i64 beyond 2^53 may not survive the round trip through double.
   * Checked on the integer: (double)(2^53 + 1) is 2^53, which passed. */
  if (v.i < -((int64_t)1 << 53) || v.i > ((int64_t)1 << 53)) return 0;
  *out = (double)v.i;
  return 1;
}

int kiln_cval_same(int dt, kiln_cval a, kiln_cval b) {
  if (!is_float(dt)) return a.i == b.i;
  if (isnan(a.f) || isnan(b.f)) return isnan(a.f) && isnan(b.f);
  return a.f == b.f && signbit(a.f) == signbit(b.f);
}

/* For bool, mul is "and" and add is "or" (graph_verify): true is the one,
 * false the zero. */
int kiln_cval_is_one(int dt, kiln_cval v) { return is_float(dt) ? v.f == 1.0 : v.i == 1; }
int kiln_cval_is_zero(int dt, kiln_cval v) { return is_float(dt) ? v.f == 0.0 : v.i == 0; }

/* Store an integer result, refusing overflow of the dtype. */
static int int_result(int dt, __int128 v, kiln_cval *r) {
  int64_t lo, hi;
  int_range(dt, &lo, &hi);
  if (v < lo || v > hi) return 0;
  memset(r, 0, sizeof *r);
  r->i = (int64_t)v;
  return 1;
}

static int float_result(int dt, double v, kiln_cval *r) {
  memset(r, 0, sizeof *r);
  r->f = round_to(dt, v);
  return 1;
}

/* A result of the op table's scalar function, stored in dtype dt with the
 * IR's conversion rules (i32 wraps modulo 2^32, bool is != 0). */
static int store_int(int dt, int64_t v, kiln_cval *r) {
  memset(r, 0, sizeof *r);
  switch (dt) {
    case KILN_I32: r->i = ki2i32(v); break;
    case KILN_U8: r->i = ki2u8(v); break;
    case KILN_I8: r->i = ki2i8(v); break;
    case KILN_BOOL: r->i = v != 0; break;
    default: r->i = v; break;
  }
  return 1;
}

static int cast(int in_dt, int out_dt, kiln_cval a, kiln_cval *r) {
  memset(r, 0, sizeof *r);
  if (out_dt == KILN_BOOL) {
    r->i = is_float(in_dt) ? a.f != 0.0 : a.i != 0;
    return 1;
  }
  if (is_float(out_dt)) {
    /* int -> float: one C conversion (round to nearest) into the target. */
    if (is_float(in_dt))
      r->f = round_to(out_dt, a.f);
    else
      r->f = out_dt == KILN_F64 ? (double)a.i : round_to(out_dt, (double)(float)a.i);
    return 1;
  }
  /* float -> int: the IR's conversion (NaN and out of range give the
   * minimum, as kernels compute it), one helper for every stage */
  if (is_float(in_dt)) return store_int(out_dt, out_dt == KILN_I32 ? kf2i32(a.f) : kf2i64(a.f), r);
  return store_int(out_dt, a.i, r); /* narrowing wraps */
}

/* The op's scalar function from the op table, where the table says it is
 * exact for the operands' dtype class. */
static int table_fn(int op, int in_dt, int out_dt, kiln_cval a, kiln_cval b, kiln_cval *r) {
  const kiln_op_info *t = &kiln_op_table[op];
  int fl = is_float(in_dt);
  if (!kiln_op_scalar_defined(op, fl) || !(t->flags & (fl ? OPF_FOLD_FLOAT : OPF_FOLD_INT))) return 0;
  if (!fl) return store_int(out_dt, t->i64(a.i, b.i), r);
  /* 16-bit floats compute in f32 (float_result rounds them) */
  double v = in_dt != KILN_F64 ? (double)t->f32((float)a.f, (float)b.f) : t->f64(a.f, b.f);
  if (!is_float(out_dt)) return store_int(out_dt, v != 0, r);
  return float_result(out_dt, v, r);
}

int kiln_cval_unary(int op, int in_dt, int out_dt, kiln_cval a, kiln_cval *r) {
  if (op == KILN_OP_CAST) return cast(in_dt, out_dt, a, r);
  if (kiln_op_table[op].kind != KILN_KIND_UNARY) return 0;
  return table_fn(op, in_dt, out_dt, a, a, r);
}

int kiln_cval_binary(int op, int in_dt, kiln_cval a, kiln_cval b, kiln_cval *r) {
  if (kiln_op_table[op].kind != KILN_KIND_BINARY) return 0;
  return table_fn(op, in_dt, kiln_op_is_predicate(op) ? KILN_BOOL : in_dt, a, b, r);
}

/* 1 if every partial sum k*v, k <= n, is exact in double: v's significand
 * (odd, trailing zeros dropped) times n stays below 2^53. Then any order of
 * the additions (sequential in ref, lanes in a compiled kernel, a backend's
 * tree) gives v*n, and the fold is what every backend computes. */
static int sum_exact(double v, int64_t n) {
  int e;
  double f = frexp(fabs(v), &e); /* f in [0.5, 1) */
  uint64_t m = (uint64_t)ldexp(f, 53); /* exact: 53 bits */
  while (m && !(m & 1)) m >>= 1;
  return m && (uint64_t)n <= ((uint64_t)1 << 53) / m;
}

int kiln_cval_sum(int dt, kiln_cval v, int64_t n, kiln_cval *r) {
  if (dt == KILN_BOOL || n < 0) return 0;
  if (is_float(dt)) {
    /* A sum starts at +0: nothing (even of inf or NaN) and zeros of either
     * sign sum to +0, where v*n gave NaN (inf*0) and -0. */
    if (n == 0 || v.f == 0.0) return float_result(dt, 0.0, r);
    if (isnan(v.f) || isinf(v.f)) return float_result(dt, v.f, r);
    if (!sum_exact(v.f, n)) return 0; /* 0.1 ten times in order is 0.9999999999999999, not 1 */
    return float_result(dt, v.f * (double)n, r);
  }
  return int_result(dt, (__int128)v.i * n, r);
}
