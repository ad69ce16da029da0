#include "passes/pass_const.h"

#include <math.h>
#include <string.h>

static int is_float(int dt) { return dt == KILN_F32 || dt == KILN_F64; }

/* Round a double to the dtype's float precision. */
static double round_to(int dt, double v) { return dt == KILN_F32 ? (double)(float)v : v; }

/* Integer range of an integer dtype. */
static void int_range(int dt, int64_t *lo, int64_t *hi) {
  if (dt == KILN_I32) {
    *lo = INT32_MIN;
    *hi = INT32_MAX;
  } else if (dt == KILN_BOOL) {
    *lo = 0;
    *hi = 1;
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
      out->f = round_to(dt, v);
      return 1;
    case KILN_I32:
    case KILN_I64:
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
  double d = (double)v.i;
  /* An i64 beyond 2^53 may not survive the round trip through double. */
  if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0)) return 0;
  *out = d;
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

/* Elementwise unary on a float dtype: computed in float for F32 so the
 * result is the one a backend's float code gives (these ops are exact or
 * correctly rounded in IEEE 754). */
static int unary_float(int op, int dt, double a, kiln_cval *r) {
  float af = (float)a;
  switch (op) {
    case KILN_OP_NEG:
      return float_result(dt, dt == KILN_F32 ? (double)-af : -a, r);
    case KILN_OP_ABS:
      return float_result(dt, dt == KILN_F32 ? (double)fabsf(af) : fabs(a), r);
    case KILN_OP_SQRT:
      return float_result(dt, dt == KILN_F32 ? (double)sqrtf(af) : sqrt(a), r);
    case KILN_OP_RELU:
      /* relu(NaN) and relu(-0) depend on how a backend writes max(x, 0). */
      if (isnan(a) || a == 0.0) return 0;
      return float_result(dt, a > 0 ? a : 0.0, r);
    default:
      return 0; /* libm-dependent (exp, log, tanh, ...) or not defined on floats */
  }
}

static int unary_int(int op, int dt, int64_t a, kiln_cval *r) {
  if (dt == KILN_BOOL) {
    if (op != KILN_OP_NOT) return 0;
    memset(r, 0, sizeof *r);
    r->i = !a;
    return 1;
  }
  switch (op) {
    case KILN_OP_NEG:
      return int_result(dt, -(__int128)a, r);
    case KILN_OP_ABS:
      return int_result(dt, a < 0 ? -(__int128)a : (__int128)a, r);
    case KILN_OP_RELU:
      return int_result(dt, a > 0 ? a : 0, r);
    default:
      return 0;
  }
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
      r->f = out_dt == KILN_F32 ? (double)(float)a.i : (double)a.i;
    return 1;
  }
  if (is_float(in_dt)) return trunc_to_int(out_dt, a.f, &r->i);
  return int_result(out_dt, a.i, r); /* narrowing i64 -> i32 out of range: refused */
}

int kiln_cval_unary(int op, int in_dt, int out_dt, kiln_cval a, kiln_cval *r) {
  if (op == KILN_OP_CAST) return cast(in_dt, out_dt, a, r);
  if (in_dt != out_dt) return 0;
  return is_float(in_dt) ? unary_float(op, in_dt, a.f, r) : unary_int(op, in_dt, a.i, r);
}

static int compare(int op, int c, kiln_cval *r) {
  /* c: -1 less, 0 equal, 1 greater, 2 unordered (NaN). */
  int v;
  switch (op) {
    case KILN_OP_EQ: v = c == 0; break;
    case KILN_OP_NE: v = c != 0; break;
    case KILN_OP_LT: v = c == -1; break;
    case KILN_OP_LE: v = c == -1 || c == 0; break;
    case KILN_OP_GT: v = c == 1; break;
    case KILN_OP_GE: v = c == 1 || c == 0; break;
    default: return 0;
  }
  memset(r, 0, sizeof *r);
  r->i = v;
  return 1;
}

static int binary_float(int op, int dt, double a, double b, kiln_cval *r) {
  float af = (float)a, bf = (float)b;
  int f32 = dt == KILN_F32;
  switch (op) {
    case KILN_OP_ADD: return float_result(dt, f32 ? (double)(af + bf) : a + b, r);
    case KILN_OP_SUB: return float_result(dt, f32 ? (double)(af - bf) : a - b, r);
    case KILN_OP_MUL: return float_result(dt, f32 ? (double)(af * bf) : a * b, r);
    case KILN_OP_DIV: return float_result(dt, f32 ? (double)(af / bf) : a / b, r);
    case KILN_OP_MAX:
    case KILN_OP_MIN:
      /* NaN and signed zeros: backends differ (fmax vs a > b ? a : b). */
      if (isnan(a) || isnan(b) || (a == b && signbit(a) != signbit(b))) return 0;
      return float_result(dt, (op == KILN_OP_MAX) == (a > b) ? a : b, r);
    default:
      if (op >= KILN_OP_EQ && op <= KILN_OP_GE)
        return compare(op, isnan(a) || isnan(b) ? 2 : a < b ? -1 : a > b ? 1 : 0, r);
      return 0; /* POW (libm), AND/OR (bool only) */
  }
}

static int binary_int(int op, int dt, int64_t a, int64_t b, kiln_cval *r) {
  if (op >= KILN_OP_EQ && op <= KILN_OP_GE) return compare(op, a < b ? -1 : a > b ? 1 : 0, r);
  if (dt == KILN_BOOL) {
    memset(r, 0, sizeof *r);
    /* bool add/max are "or", mul/min are "and" (graph_verify's rule). */
    if (op == KILN_OP_AND || op == KILN_OP_MUL || op == KILN_OP_MIN) r->i = a && b;
    else if (op == KILN_OP_OR || op == KILN_OP_ADD || op == KILN_OP_MAX) r->i = a || b;
    else return 0; /* no other arithmetic is defined on bool */
    return 1;
  }
  switch (op) {
    case KILN_OP_ADD: return int_result(dt, (__int128)a + b, r);
    case KILN_OP_SUB: return int_result(dt, (__int128)a - b, r);
    case KILN_OP_MUL: return int_result(dt, (__int128)a * b, r);
    case KILN_OP_DIV:
      /* ops.def: integer division truncates toward zero, x / 0 == 0. */
      if (b == 0) return int_result(dt, 0, r);
      return int_result(dt, (__int128)a / b, r); /* MIN / -1 overflows: refused */
    case KILN_OP_MAX: return int_result(dt, a > b ? a : b, r);
    case KILN_OP_MIN: return int_result(dt, a < b ? a : b, r);
    default: return 0; /* POW (backends may use libm), AND/OR on integers */
  }
}

int kiln_cval_binary(int op, int in_dt, kiln_cval a, kiln_cval b, kiln_cval *r) {
  return is_float(in_dt) ? binary_float(op, in_dt, a.f, b.f, r) : binary_int(op, in_dt, a.i, b.i, r);
}

int kiln_cval_sum(int dt, kiln_cval v, int64_t n, kiln_cval *r) {
  if (dt == KILN_BOOL || n < 0) return 0;
  if (is_float(dt)) return float_result(dt, v.f * (double)n, r);
  return int_result(dt, (__int128)v.i * n, r);
}
