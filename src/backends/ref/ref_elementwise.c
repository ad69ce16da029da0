/* ref backend: element access, conversions, source ops and elementwise ops.
 * See ref_ops.h for the numeric rules. */
#include <math.h>
#include <string.h>

#include "backends/ref/ref_ops.h"
#include "base/rng.h"

/* ───────────── conversions ───────────── */

/* float -> int32 with C truncation; NaN and out-of-range give INT32_MIN
 * (the x86 "integer indefinite" value, so compiled code agrees). */
static int32_t f2i32(double x) {
  if (!(x > -2147483649.0 && x < 2147483648.0)) return INT32_MIN;
  return (int32_t)x;
}
static int64_t f2i64(double x) {
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)x;
}

double kiln_ref_get_f(const kiln_ref_val *v, int64_t i) {
  switch (v->dtype) {
    case KILN_F32: return ((const float *)v->data)[i];
    case KILN_F64: return ((const double *)v->data)[i];
    case KILN_I32: return ((const int32_t *)v->data)[i];
    case KILN_I64: return (double)((const int64_t *)v->data)[i];
    default: return ((const uint8_t *)v->data)[i] != 0;
  }
}

int64_t kiln_ref_get_i(const kiln_ref_val *v, int64_t i) {
  switch (v->dtype) {
    case KILN_F32: return f2i64(((const float *)v->data)[i]);
    case KILN_F64: return f2i64(((const double *)v->data)[i]);
    case KILN_I32: return ((const int32_t *)v->data)[i];
    case KILN_I64: return ((const int64_t *)v->data)[i];
    default: return ((const uint8_t *)v->data)[i] != 0;
  }
}

void kiln_ref_set_f(kiln_ref_val *v, int64_t i, double x) {
  switch (v->dtype) {
    case KILN_F32: ((float *)v->data)[i] = (float)x; break;
    case KILN_F64: ((double *)v->data)[i] = x; break;
    case KILN_I32: ((int32_t *)v->data)[i] = f2i32(x); break;
    case KILN_I64: ((int64_t *)v->data)[i] = f2i64(x); break;
    default: ((uint8_t *)v->data)[i] = x != 0; break; /* NaN != 0: true */
  }
}

void kiln_ref_set_i(kiln_ref_val *v, int64_t i, int64_t x) {
  switch (v->dtype) {
    /* int64 -> float converts directly (one rounding), not through double */
    case KILN_F32: ((float *)v->data)[i] = (float)x; break;
    case KILN_F64: ((double *)v->data)[i] = (double)x; break;
    /* narrowing wraps modulo 2^32 (spelled through unsigned: no UB) */
    case KILN_I32: ((int32_t *)v->data)[i] = (int32_t)(uint32_t)(uint64_t)x; break;
    case KILN_I64: ((int64_t *)v->data)[i] = x; break;
    default: ((uint8_t *)v->data)[i] = x != 0; break;
  }
}

void kiln_ref_copy_elem(kiln_ref_val *dst, int64_t di, const kiln_ref_val *src, int64_t si) {
  size_t es = kiln_dtype_size((kiln_dtype)src->dtype);
  memcpy((char *)dst->data + (size_t)di * es, (const char *)src->data + (size_t)si * es, es);
}

void kiln_ref_unravel(int64_t flat, int rank, const int64_t *shape, int64_t *coord) {
  for (int d = rank - 1; d >= 0; d--) {
    int64_t s = shape[d] > 0 ? shape[d] : 1;
    coord[d] = flat % s;
    flat /= s;
  }
}

int64_t kiln_ref_ravel(const int64_t *coord, int rank, const int64_t *shape) {
  int64_t flat = 0;
  for (int d = 0; d < rank; d++) flat = flat * shape[d] + coord[d];
  return flat;
}

/* ───────────── sources ───────────── */

void kiln_ref_eval_source(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins,
                          void *const *graph_inputs) {
  switch (n->op) {
    case KILN_OP_LEAF:
      memcpy(out->data, graph_inputs[n->iattr[0]], kiln_gnode_bytes(n));
      break;
    case KILN_OP_SCALAR: {
      /* the runtime passes 8 bytes: a double for float dtypes, else int64 */
      if (kiln_ref_is_float(n->dtype)) {
        double d;
        memcpy(&d, graph_inputs[n->iattr[0]], sizeof d);
        for (int64_t i = 0; i < out->numel; i++) kiln_ref_set_f(out, i, d);
      } else {
        int64_t v;
        memcpy(&v, graph_inputs[n->iattr[0]], sizeof v);
        for (int64_t i = 0; i < out->numel; i++) kiln_ref_set_i(out, i, v);
      }
      break;
    }
    case KILN_OP_CONST:
      for (int64_t i = 0; i < out->numel; i++) kiln_ref_set_f(out, i, n->fattr);
      break;
    case KILN_OP_IOTA: {
      int64_t coord[KILN_MAX_RANK];
      for (int64_t i = 0; i < out->numel; i++) {
        kiln_ref_unravel(i, n->rank, n->shape, coord);
        kiln_ref_set_i(out, i, coord[n->iattr[0]]);
      }
      break;
    }
    case KILN_OP_RANDOM: {
      uint64_t seed = (uint64_t)kiln_ref_get_i(&ins[0], 0);
      for (int64_t i = 0; i < out->numel; i++) {
        double r = n->iattr[0] == 1 ? kiln_rng_normal(seed, (uint64_t)i) : kiln_rng_uniform(seed, (uint64_t)i);
        kiln_ref_set_f(out, i, r);
      }
      break;
    }
    default: break;
  }
}

/* ───────────── unary ───────────── */

static float unary_f32(int op, float x) {
  switch (op) {
    case KILN_OP_NEG: return -x;
    case KILN_OP_ABS: return fabsf(x);
    case KILN_OP_EXP: return expf(x);
    case KILN_OP_LOG: return logf(x);
    case KILN_OP_SQRT: return sqrtf(x);
    case KILN_OP_RSQRT: return 1.0f / sqrtf(x);
    case KILN_OP_TANH: return tanhf(x);
    case KILN_OP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case KILN_OP_RELU: return x < 0.0f ? 0.0f : x; /* relu(NaN) = NaN */
    case KILN_OP_GELU: return x * 0.5f * (1.0f + erff(x / 1.41421356237309504880f));
    case KILN_OP_GELU_TANH:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
    default: return x;
  }
}

static double unary_f64(int op, double x) {
  switch (op) {
    case KILN_OP_NEG: return -x;
    case KILN_OP_ABS: return fabs(x);
    case KILN_OP_EXP: return exp(x);
    case KILN_OP_LOG: return log(x);
    case KILN_OP_SQRT: return sqrt(x);
    case KILN_OP_RSQRT: return 1.0 / sqrt(x);
    case KILN_OP_TANH: return tanh(x);
    case KILN_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case KILN_OP_RELU: return x < 0.0 ? 0.0 : x;
    case KILN_OP_GELU: return x * 0.5 * (1.0 + erf(x / 1.41421356237309504880));
    case KILN_OP_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    default: return x;
  }
}

/* Integer unary ops wrap: computed modulo 2^64 here, the store narrows i32
 * modulo 2^32, which equals 32-bit wrapping arithmetic. */
static int64_t unary_int(int op, int64_t x) {
  uint64_t ux = (uint64_t)x;
  switch (op) {
    case KILN_OP_NEG: return (int64_t)(0 - ux);
    case KILN_OP_ABS: return x < 0 ? (int64_t)(0 - ux) : x;
    case KILN_OP_RELU: return x < 0 ? 0 : x;
    case KILN_OP_NOT: return x == 0;
    default: return x;
  }
}

/* ───────────── binary ───────────── */

static float binary_f32(int op, float a, float b) {
  switch (op) {
    case KILN_OP_ADD: return a + b;
    case KILN_OP_SUB: return a - b;
    case KILN_OP_MUL: return a * b;
    case KILN_OP_DIV: return a / b;
    case KILN_OP_POW: return powf(a, b);
    case KILN_OP_MAX: return isnan(a) ? a : isnan(b) ? b : (a > b ? a : b);
    case KILN_OP_MIN: return isnan(a) ? a : isnan(b) ? b : (a < b ? a : b);
    default: return 0.0f;
  }
}

static double binary_f64(int op, double a, double b) {
  switch (op) {
    case KILN_OP_ADD: return a + b;
    case KILN_OP_SUB: return a - b;
    case KILN_OP_MUL: return a * b;
    case KILN_OP_DIV: return a / b;
    case KILN_OP_POW: return pow(a, b);
    case KILN_OP_MAX: return isnan(a) ? a : isnan(b) ? b : (a > b ? a : b);
    case KILN_OP_MIN: return isnan(a) ? a : isnan(b) ? b : (a < b ? a : b);
    default: return 0.0;
  }
}

/* Integer power by squaring, wrapping. Negative exponents follow the
 * truncation of 1 / a^-b: 1 for a == 1, +-1 for a == -1, else 0 (a == 0
 * included, like integer division by zero). */
static int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) {
    if (a == 1) return 1;
    if (a == -1) return (b & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, base = (uint64_t)a;
  uint64_t e = (uint64_t)b;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return (int64_t)r;
}

static int64_t binary_int(int op, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
    case KILN_OP_ADD: return (int64_t)(ua + ub);
    case KILN_OP_SUB: return (int64_t)(ua - ub);
    case KILN_OP_MUL: return (int64_t)(ua * ub);
    case KILN_OP_DIV:
      if (b == 0) return 0;
      if (b == -1) return (int64_t)(0 - ua); /* INT_MIN / -1 wraps */
      return a / b;
    case KILN_OP_POW: return ipow(a, b);
    case KILN_OP_MAX: return a > b ? a : b;
    case KILN_OP_MIN: return a < b ? a : b;
    default: return 0;
  }
}

/* Comparisons and logic. Floats compare exactly as doubles (f32 -> f64 is
 * exact); integers as int64. NaN compares false except for ne. */
static int predicate(int op, const kiln_ref_val *a, const kiln_ref_val *b, int64_t i) {
  if (op == KILN_OP_AND) return kiln_ref_get_f(a, i) != 0 && kiln_ref_get_f(b, i) != 0;
  if (op == KILN_OP_OR) return kiln_ref_get_f(a, i) != 0 || kiln_ref_get_f(b, i) != 0;
  if (kiln_ref_is_float(a->dtype)) {
    double x = kiln_ref_get_f(a, i), y = kiln_ref_get_f(b, i);
    switch (op) {
      case KILN_OP_EQ: return x == y;
      case KILN_OP_NE: return x != y;
      case KILN_OP_LT: return x < y;
      case KILN_OP_LE: return x <= y;
      case KILN_OP_GT: return x > y;
      case KILN_OP_GE: return x >= y;
      default: return 0;
    }
  }
  int64_t x = kiln_ref_get_i(a, i), y = kiln_ref_get_i(b, i);
  switch (op) {
    case KILN_OP_EQ: return x == y;
    case KILN_OP_NE: return x != y;
    case KILN_OP_LT: return x < y;
    case KILN_OP_LE: return x <= y;
    case KILN_OP_GT: return x > y;
    case KILN_OP_GE: return x >= y;
    default: return 0;
  }
}

/* ───────────── dispatch ───────────── */

void kiln_ref_eval_elementwise(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins) {
  const int64_t N = out->numel;
  const int op = n->op;
  if (op == KILN_OP_CAST) {
    /* integer sources go through int64 so i64 -> f32 rounds once */
    for (int64_t i = 0; i < N; i++) {
      if (kiln_ref_is_float(ins[0].dtype))
        kiln_ref_set_f(out, i, kiln_ref_get_f(&ins[0], i));
      else
        kiln_ref_set_i(out, i, kiln_ref_get_i(&ins[0], i));
    }
    return;
  }
  if (op == KILN_OP_WHERE) {
    for (int64_t i = 0; i < N; i++)
      kiln_ref_copy_elem(out, i, kiln_ref_get_i(&ins[0], i) != 0 ? &ins[1] : &ins[2], i);
    return;
  }
  if (kiln_op_is_predicate(op)) {
    for (int64_t i = 0; i < N; i++) kiln_ref_set_i(out, i, predicate(op, &ins[0], &ins[1], i));
    return;
  }
  const int unary = kiln_op_table[op].kind == KILN_KIND_UNARY;
  switch (out->dtype) {
    case KILN_F32: {
      float *o = out->data;
      const float *a = ins[0].data;
      const float *b = unary ? NULL : ins[1].data;
      for (int64_t i = 0; i < N; i++) o[i] = unary ? unary_f32(op, a[i]) : binary_f32(op, a[i], b[i]);
      break;
    }
    case KILN_F64: {
      double *o = out->data;
      const double *a = ins[0].data;
      const double *b = unary ? NULL : ins[1].data;
      for (int64_t i = 0; i < N; i++) o[i] = unary ? unary_f64(op, a[i]) : binary_f64(op, a[i], b[i]);
      break;
    }
    default:
      /* i32, i64, bool (bool only reaches here for not/maximum/minimum) */
      for (int64_t i = 0; i < N; i++) {
        int64_t a = kiln_ref_get_i(&ins[0], i);
        int64_t r = unary ? unary_int(op, a) : binary_int(op, a, kiln_ref_get_i(&ins[1], i));
        kiln_ref_set_i(out, i, r);
      }
      break;
  }
}
