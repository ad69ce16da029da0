/* Internal interface of the ref backend: element access with the IR's
 * conversion rules, and one evaluator per op kind.
 *
 * The ref backend is the oracle of every backend test, so everything here
 * favours obviously-correct over fast: each node is evaluated into its own
 * freshly allocated buffer, one element at a time, with no threads.
 *
 * Numeric rules (the precise reading of include/kiln/ops.def, also written down in
 * docs/testing.md so compiled backends can match them):
 *   - float elementwise math is done in the node's dtype (expf for f32);
 *     bf16 and f16 in f32, each result rounded to nearest even by the store;
 *   - u8 and i8 compute in wrapping int64 and wrap modulo 2^8 on store;
 *   - integer arithmetic wraps (two's complement), integer division by zero
 *     gives 0, INT_MIN / -1 wraps to INT_MIN;
 *   - float -> int conversion truncates; NaN or out-of-range values give the
 *     target's minimum (what x86 cvtt* instructions produce);
 *   - anything -> bool is != 0; bool is stored as uint8 0/1;
 *   - maximum/minimum and reduce_max/min propagate NaN;
 *   - reductions accumulate floats in double and integers in wrapping int64.
 *
 * Thread-safety: all functions are pure over their arguments.
 */
#ifndef KILN_BACKENDS_REF_REF_OPS_H
#define KILN_BACKENDS_REF_REF_OPS_H

#include <stdint.h>

#include "ir/graph.h"

/* A materialized tensor value: a packed row-major buffer of a node's dtype
 * and shape. Borrowed: the evaluators never free it. */
typedef struct kiln_ref_val {
  void *data;
  int dtype;
  int rank;
  const int64_t *shape;
  int64_t numel;
} kiln_ref_val;

/* 1 for the float dtypes (f32, f64, bf16, f16). */
static inline int kiln_ref_is_float(int dt) { return kiln_dt_is_float(dt); }

/* Element i of v as a double (exact for f32/f64/bool/i32; i64 rounds). */
double kiln_ref_get_f(const kiln_ref_val *v, int64_t i);
/* Element i of v as an int64 (floats converted with kiln_ref_f2i64 rules). */
int64_t kiln_ref_get_i(const kiln_ref_val *v, int64_t i);
/* Store x into element i, converted to v's dtype by the CAST rules. */
void kiln_ref_set_f(kiln_ref_val *v, int64_t i, double x);
void kiln_ref_set_i(kiln_ref_val *v, int64_t i, int64_t x);
/* Copy element si of src into element di of dst (same dtype). */
void kiln_ref_copy_elem(kiln_ref_val *dst, int64_t di, const kiln_ref_val *src, int64_t si);

/* Row-major index helpers. */
void kiln_ref_unravel(int64_t flat, int rank, const int64_t *shape, int64_t *coord);
int64_t kiln_ref_ravel(const int64_t *coord, int rank, const int64_t *shape);

/* Evaluators: out is the node's (zeroed) buffer, ins its materialized
 * inputs in order. They assume a graph that passed kiln_graph_verify. */
void kiln_ref_eval_source(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins,
                          void *const *graph_inputs);
void kiln_ref_eval_elementwise(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins);
/* Returns 0, or -1 when its accumulators cannot be allocated. */
int kiln_ref_eval_reduce(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins);
/* CUMSUM / CUMPROD; 0, or -1 when its accumulators cannot be allocated. */
int kiln_ref_eval_scan(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *x);
/* Returns 1 if an index (INDEX_SELECT, GATHER) is out of range: the first
 * such index is stored in *bad (the read is clamped). */
int kiln_ref_eval_move(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins, int n_in, int64_t *bad);
/* ARGSORT, SCATTER, SCATTER_ADD (ref_sort.c): 0, 1 if an index is out of
 * range (the first in *bad, the write clamped), -1 when out of memory. */
int kiln_ref_eval_line(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins, int64_t *bad);
void kiln_ref_eval_matmul(const kiln_gnode *n, kiln_ref_val *out, const kiln_ref_val *ins);

#endif
