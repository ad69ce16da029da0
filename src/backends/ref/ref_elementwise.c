/* ref backend: element access, conversions, source ops and elementwise ops.
 * See ref_ops.h for the numeric rules. */
#include <math.h>
#include <string.h>

#include "backends/ref/ref_ops.h"
#include "base/rng.h"
#include "ir/scalar.h"

/* ───────────── conversions ───────────── */

/* float -> int and int narrowing: the IR's conversion rules, the helpers
 * generated kernels use (src/ir/scalar.inc): truncation, NaN and
 * out-of-range give the minimum, narrowing wraps. */
static int32_t f2i32(double x) { return kf2i32(x); }
static int64_t f2i64(double x) { return kf2i64(x); }

double kiln_ref_get_f(const kiln_ref_val *v, int64_t i) {
  switch (v->dtype) {
    case KILN_F32: return ((const float *)v->data)[i];
    case KILN_F64: return ((const double *)v->data)[i];
    case KILN_I32: return ((const int32_t *)v->data)[i];
    case KILN_I64: return (double)((const int64_t *)v->data)[i];
    case KILN_BF16: return kbf16_f32(((const uint16_t *)v->data)[i]);
    case KILN_F16: return kf16_f32(((const uint16_t *)v->data)[i]);
    case KILN_U8: return ((const uint8_t *)v->data)[i];
    case KILN_I8: return ((const int8_t *)v->data)[i];
    default: return ((const uint8_t *)v->data)[i] != 0;
  }
}

int64_t kiln_ref_get_i(const kiln_ref_val *v, int64_t i) {
  switch (v->dtype) {
    case KILN_F32: return f2i64(((const float *)v->data)[i]);
    case KILN_F64: return f2i64(((const double *)v->data)[i]);
    case KILN_I32: return ((const int32_t *)v->data)[i];
    case KILN_I64: return ((const int64_t *)v->data)[i];
    case KILN_BF16: return f2i64(kbf16_f32(((const uint16_t *)v->data)[i]));
    case KILN_F16: return f2i64(kf16_f32(((const uint16_t *)v->data)[i]));
    case KILN_U8: return ((const uint8_t *)v->data)[i];
    case KILN_I8: return ((const int8_t *)v->data)[i];
    default: return ((const uint8_t *)v->data)[i] != 0;
  }
}

void kiln_ref_set_f(kiln_ref_val *v, int64_t i, double x) {
  switch (v->dtype) {
    case KILN_F32: ((float *)v->data)[i] = (float)x; break;
    case KILN_F64: ((double *)v->data)[i] = x; break;
    case KILN_I32: ((int32_t *)v->data)[i] = f2i32(x); break;
    case KILN_I64: ((int64_t *)v->data)[i] = f2i64(x); break;
    /* 16-bit floats round through f32 (PyTorch's c10 types are built from
     * a float): f64 -> bf16 is two roundings, as there */
    case KILN_BF16: ((uint16_t *)v->data)[i] = kf32_bf16((float)x); break;
    case KILN_F16: ((uint16_t *)v->data)[i] = kf32_f16((float)x); break;
    /* float -> 8-bit integer: to int64 by the i64 rule, then wrapped */
    case KILN_U8: ((uint8_t *)v->data)[i] = ki2u8(f2i64(x)); break;
    case KILN_I8: ((int8_t *)v->data)[i] = ki2i8(f2i64(x)); break;
    default: ((uint8_t *)v->data)[i] = x != 0; break; /* NaN != 0: true */
  }
}

void kiln_ref_set_i(kiln_ref_val *v, int64_t i, int64_t x) {
  switch (v->dtype) {
    /* int64 -> float converts directly (one rounding), not through double */
    case KILN_F32: ((float *)v->data)[i] = (float)x; break;
    case KILN_F64: ((double *)v->data)[i] = (double)x; break;
    /* narrowing wraps modulo 2^32 (spelled through unsigned: no UB) */
    case KILN_I32: ((int32_t *)v->data)[i] = ki2i32(x); break;
    case KILN_I64: ((int64_t *)v->data)[i] = x; break;
    case KILN_BF16: ((uint16_t *)v->data)[i] = kf32_bf16((float)x); break;
    case KILN_F16: ((uint16_t *)v->data)[i] = kf32_f16((float)x); break;
    case KILN_U8: ((uint8_t *)v->data)[i] = ki2u8(x); break;
    case KILN_I8: ((int8_t *)v->data)[i] = ki2i8(x); break;
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
      int64_t top = kiln_rng_uniform_top((kiln_dtype)n->dtype);
      for (int64_t i = 0; i < out->numel; i++) {
        double r = n->iattr[0] == 1 ? kiln_rng_normal(seed, (uint64_t)i)
                                    : kiln_rng_uniform_below(seed, (uint64_t)i, top);
        kiln_ref_set_f(out, i, r);
      }
      break;
    }
    default: break;
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
  /* every other elementwise op is its scalar function in the op table,
   * evaluated in the inputs' dtype class and stored with the IR's
   * conversion rules (a bool result is != 0) */
  const kiln_op_info *t = &kiln_op_table[op];
  const int binary = t->kind == KILN_KIND_BINARY;
  const kiln_ref_val *a = &ins[0], *b = binary ? &ins[1] : &ins[0];
  switch (a->dtype) {
    case KILN_F32: {
      const float *x = a->data, *y = b->data;
      for (int64_t i = 0; i < N; i++) kiln_ref_set_f(out, i, t->f32(x[i], y[i]));
      break;
    }
    case KILN_F64: {
      const double *x = a->data, *y = b->data;
      for (int64_t i = 0; i < N; i++) kiln_ref_set_f(out, i, t->f64(x[i], y[i]));
      break;
    }
    case KILN_BF16:
    case KILN_F16: /* in f32, rounded by the store */
      for (int64_t i = 0; i < N; i++)
        kiln_ref_set_f(out, i, t->f32((float)kiln_ref_get_f(a, i), (float)kiln_ref_get_f(b, i)));
      break;
    default: /* integers and bool: wrapping int64, narrowed by the store */
      for (int64_t i = 0; i < N; i++) kiln_ref_set_i(out, i, t->i64(kiln_ref_get_i(a, i), kiln_ref_get_i(b, i)));
      break;
  }
}
