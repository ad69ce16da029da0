/* ref backend: reductions, scans, data movement, indexing and matmul, written as
 * plain loops over output (or input) coordinates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ref/ref_ops.h"

/* ───────────── reductions ───────────── */

/* Identity of max/min for integer dtypes (and bool). */
static int64_t int_lowest(int dt) {
  return dt == KILN_I32 ? INT32_MIN : dt == KILN_I64 ? INT64_MIN : dt == KILN_I8 ? INT8_MIN : 0;
}
static int64_t int_highest(int dt) {
  return dt == KILN_I32 ? INT32_MAX : dt == KILN_I64 ? INT64_MAX : dt == KILN_I8 ? INT8_MAX : dt == KILN_U8 ? UINT8_MAX : 1;
}

static void eval_argmax(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *x) {
  const int axis = (int)n->iattr[0];
  const int64_t len = x->shape[axis];
  int64_t coord[KILN_MAX_RANK];
  for (int64_t o = 0; o < out->numel; o++) {
    kiln_ref_unravel(o, out->rank, out->shape, coord);
    int64_t best = 0;
    if (kiln_ref_is_float(x->dtype)) {
      double bv = 0;
      for (int64_t j = 0; j < len; j++) {
        coord[axis] = j;
        double v = kiln_ref_get_f(x, kiln_ref_ravel(coord, x->rank, x->shape));
        if (j == 0 || (!isnan(bv) && (isnan(v) || v > bv))) {
          best = j;
          bv = v;
        }
      }
    } else {
      int64_t bv = 0;
      for (int64_t j = 0; j < len; j++) {
        coord[axis] = j;
        int64_t v = kiln_ref_get_i(x, kiln_ref_ravel(coord, x->rank, x->shape));
        if (j == 0 || v > bv) {
          best = j;
          bv = v;
        }
      }
    }
    kiln_ref_set_i(out, o, best); /* empty axis: 0 */
  }
}

int kiln_ref_eval_reduce(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins) {
  const kiln_ref_val *x = &ins[0];
  if (n->op == KILN_OP_ARGMAX) {
    eval_argmax(n, out, x);
    return 0;
  }
  const uint64_t mask = (uint64_t)n->iattr[0];
  const int is_f = kiln_ref_is_float(x->dtype);
  const int64_t M = out->numel;
  /* One accumulator per output element; floats in double, ints in int64. */
  double *accf = calloc((size_t)M + 1, sizeof *accf);
  int64_t *acci = calloc((size_t)M + 1, sizeof *acci);
  if (!accf || !acci) {
    free(accf);
    free(acci);
    return -1;
  }
  for (int64_t o = 0; o < M; o++) {
    if (n->op == KILN_OP_REDUCE_MAX) {
      accf[o] = -INFINITY;
      acci[o] = int_lowest(x->dtype);
    } else if (n->op == KILN_OP_REDUCE_MIN) {
      accf[o] = INFINITY;
      acci[o] = int_highest(x->dtype);
    } else if (n->op == KILN_OP_REDUCE_PROD) {
      accf[o] = 1;
      acci[o] = 1;
    }
  }
  int64_t coord[KILN_MAX_RANK];
  for (int64_t i = 0; i < x->numel; i++) {
    kiln_ref_unravel(i, x->rank, x->shape, coord);
    for (int d = 0; d < x->rank; d++)
      if (mask & (1ull << d)) coord[d] = 0;
    int64_t o = kiln_ref_ravel(coord, out->rank, out->shape);
    if (is_f) {
      double v = kiln_ref_get_f(x, i), a = accf[o];
      switch (n->op) {
        case KILN_OP_REDUCE_SUM: accf[o] = a + v; break;
        case KILN_OP_REDUCE_PROD: accf[o] = a * v; break;
        /* NaN propagates: once the accumulator is NaN it stays NaN */
        case KILN_OP_REDUCE_MAX: accf[o] = isnan(a) ? a : (isnan(v) || v > a) ? v : a; break;
        case KILN_OP_REDUCE_MIN: accf[o] = isnan(a) ? a : (isnan(v) || v < a) ? v : a; break;
        default: break;
      }
    } else {
      int64_t v = kiln_ref_get_i(x, i), a = acci[o];
      switch (n->op) {
        case KILN_OP_REDUCE_SUM: acci[o] = (int64_t)((uint64_t)a + (uint64_t)v); break;
        case KILN_OP_REDUCE_PROD: acci[o] = (int64_t)((uint64_t)a * (uint64_t)v); break;
        case KILN_OP_REDUCE_MAX: acci[o] = v > a ? v : a; break;
        case KILN_OP_REDUCE_MIN: acci[o] = v < a ? v : a; break;
        default: break;
      }
    }
  }
  for (int64_t o = 0; o < M; o++) {
    if (is_f)
      kiln_ref_set_f(out, o, accf[o]);
    else
      kiln_ref_set_i(out, o, acci[o]);
  }
  free(accf);
  free(acci);
  return 0;
}

/* ───────────── scans ───────────── */

/* CUMSUM / CUMPROD along iattr[0]: element by element in row-major order,
 * each output the one before it along the axis combined with the input;
 * floats in double (rounded at each store), integers wrapping in int64. */
int kiln_ref_eval_scan(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *x) {
  const int axis = (int)n->iattr[0];
  const int prod = n->op == KILN_OP_CUMPROD;
  int64_t stride = 1;
  for (int d = axis + 1; d < x->rank; d++) stride *= x->shape[d];
  const int64_t len = x->shape[axis];
  double *acc = calloc((size_t)x->numel + 1, sizeof *acc); /* the running values, in double */
  if (!acc) return -1;
  for (int64_t i = 0; i < x->numel; i++) {
    int first = (i / stride) % len == 0;
    if (kiln_ref_is_float(x->dtype)) {
      double v = kiln_ref_get_f(x, i), a = first ? (prod ? 1.0 : 0.0) : acc[i - stride];
      acc[i] = prod ? a * v : a + v;
      kiln_ref_set_f(out, i, acc[i]);
    } else {
      uint64_t v = (uint64_t)kiln_ref_get_i(x, i);
      uint64_t a = first ? (uint64_t)prod : (uint64_t)kiln_ref_get_i(out, i - stride);
      kiln_ref_set_i(out, i, (int64_t)(prod ? a * v : a + v));
    }
  }
  free(acc);
  return 0;
}

/* ───────────── data movement ───────────── */

/* An index out of [0, dim) is an error (PyTorch's rule); the first one
 * is kept in *bad and the index is clamped so the read stays in bounds. */
static int64_t check_index(int64_t v, int64_t dim, int *nbad, int64_t *bad) {
  if ((uint64_t)v < (uint64_t)dim) return v;
  if (!(*nbad)++) *bad = v;
  return v < 0 ? 0 : dim - 1;
}

int kiln_ref_eval_move(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins, int n_in, int64_t *bad) {
  int nbad = 0;
  const kiln_ref_val *x = &ins[0];
  const int R = out->rank;
  int64_t oc[KILN_MAX_RANK], ic[KILN_MAX_RANK];
  switch (n->op) {
    case KILN_OP_RESHAPE:
      memcpy(out->data, x->data, kiln_gnode_bytes(n));
      return 0;
    case KILN_OP_PERMUTE:
      for (int64_t o = 0; o < out->numel; o++) {
        kiln_ref_unravel(o, R, out->shape, oc);
        for (int d = 0; d < R; d++) ic[n->iattr[d]] = oc[d];
        kiln_ref_copy_elem(out, o, x, kiln_ref_ravel(ic, x->rank, x->shape));
      }
      return 0;
    case KILN_OP_EXPAND:
      for (int64_t o = 0; o < out->numel; o++) {
        kiln_ref_unravel(o, R, out->shape, oc);
        for (int d = 0; d < R; d++) ic[d] = x->shape[d] == 1 ? 0 : oc[d];
        kiln_ref_copy_elem(out, o, x, kiln_ref_ravel(ic, x->rank, x->shape));
      }
      return 0;
    case KILN_OP_SLICE:
      for (int64_t o = 0; o < out->numel; o++) {
        kiln_ref_unravel(o, R, out->shape, oc);
        for (int d = 0; d < R; d++) ic[d] = n->iattr[d] + oc[d] * n->iattr[R + d];
        kiln_ref_copy_elem(out, o, x, kiln_ref_ravel(ic, x->rank, x->shape));
      }
      return 0;
    case KILN_OP_CONCAT: {
      const int axis = (int)n->iattr[0];
      int64_t offset = 0;
      for (int k = 0; k < n_in; k++) {
        const kiln_ref_val *in = &ins[k];
        for (int64_t i = 0; i < in->numel; i++) {
          kiln_ref_unravel(i, R, in->shape, ic);
          memcpy(oc, ic, sizeof ic);
          oc[axis] += offset;
          kiln_ref_copy_elem(out, kiln_ref_ravel(oc, R, out->shape), in, i);
        }
        offset += in->shape[axis];
      }
      return 0;
    }
    case KILN_OP_PAD:
      for (int64_t o = 0; o < out->numel; o++) kiln_ref_set_f(out, o, n->fattr);
      for (int64_t i = 0; i < x->numel; i++) {
        kiln_ref_unravel(i, R, x->shape, ic);
        for (int d = 0; d < R; d++) oc[d] = ic[d] + n->iattr[d];
        kiln_ref_copy_elem(out, kiln_ref_ravel(oc, R, out->shape), x, i);
      }
      return 0;
    case KILN_OP_INDEX_SELECT: {
      /* out coords = x[:axis] ++ idx coords ++ x[axis+1:] */
      const kiln_ref_val *idx = &ins[1];
      const int axis = (int)n->iattr[0], ir = idx->rank;
      for (int64_t o = 0; o < out->numel; o++) {
        kiln_ref_unravel(o, R, out->shape, oc);
        int64_t iflat = kiln_ref_ravel(oc + axis, ir, idx->shape);
        for (int d = 0; d < axis; d++) ic[d] = oc[d];
        ic[axis] = check_index(kiln_ref_get_i(idx, iflat), x->shape[axis], &nbad, bad);
        for (int d = axis + 1; d < x->rank; d++) ic[d] = oc[d - 1 + ir];
        kiln_ref_copy_elem(out, o, x, kiln_ref_ravel(ic, x->rank, x->shape));
      }
      return nbad != 0;
    }
    case KILN_OP_GATHER: {
      const kiln_ref_val *idx = &ins[1];
      const int axis = (int)n->iattr[0];
      for (int64_t o = 0; o < out->numel; o++) {
        kiln_ref_unravel(o, R, out->shape, oc);
        memcpy(ic, oc, sizeof ic);
        ic[axis] = check_index(kiln_ref_get_i(idx, o), x->shape[axis], &nbad, bad);
        kiln_ref_copy_elem(out, o, x, kiln_ref_ravel(ic, x->rank, x->shape));
      }
      return nbad != 0;
    }
    default: return 0;
  }
}

/* ───────────── matmul ───────────── */

void kiln_ref_eval_matmul(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins) {
  const kiln_ref_val *a = &ins[0], *b = &ins[1];
  const int R = out->rank;
  const int64_t M = a->shape[R - 2], K = a->shape[R - 1], N = b->shape[R - 1];
  int64_t batch = 1;
  for (int d = 0; d < R - 2; d++) batch *= out->shape[d];
  if (!kiln_ref_is_float(a->dtype)) {
    /* integers: wrapping int64 products and sums, narrowed by the store */
    for (int64_t bt = 0; bt < batch; bt++)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          uint64_t acc = 0;
          for (int64_t k = 0; k < K; k++)
            acc += (uint64_t)kiln_ref_get_i(a, (bt * M + i) * K + k) * (uint64_t)kiln_ref_get_i(b, (bt * K + k) * N + j);
          kiln_ref_set_i(out, (bt * M + i) * N + j, (int64_t)acc);
        }
    return;
  }
  /* products and sums in double, one rounding to the node dtype at the end */
  for (int64_t bt = 0; bt < batch; bt++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += kiln_ref_get_f(a, (bt * M + i) * K + k) * kiln_ref_get_f(b, (bt * K + k) * N + j);
        kiln_ref_set_f(out, (bt * M + i) * N + j, acc);
      }
}
