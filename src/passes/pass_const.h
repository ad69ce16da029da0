/* Internal to src/passes: exact compile-time evaluation of elementwise ops on
 * typed scalar constants, for constant folding.
 *
 * The rule is "fold only what every backend computes bit for bit". The
 * values come from the op table's scalar functions (include/kiln/ops.def),
 * the same C the ref backend runs and every generated kernel inlines, and
 * only for the ops and dtype classes the table marks exact (OPF_FOLD_FLOAT,
 * OPF_FOLD_INT): IEEE-rounded arithmetic, comparisons, maximum/minimum/relu
 * with their NaN and signed-zero rules, wrapping integer arithmetic.
 * Refused (return 0, left to the backend): libm functions (exp, log, tanh,
 * float pow, ...: another backend's libm may round differently), and
 * constants whose fattr does not hold an exact value of their dtype.
 *
 * Pure functions: thread-safe.
 */
#ifndef KILN_PASSES_PASS_CONST_H
#define KILN_PASSES_PASS_CONST_H

#include <stdint.h>

#include "ir/graph.h"

/* A scalar of some dtype: f for F32/F64 (an F32 value is exactly a float),
 * i for I32/I64/BOOL (a BOOL is 0 or 1). */
typedef struct kiln_cval {
  double f;
  int64_t i;
} kiln_cval;

/* The value a fill with fattr v has in dtype dt (as CONST and PAD use it).
 * 0 when v is not exactly a value of dt (non-integral or out of range for an
 * integer dtype, not 0/1 for bool). */
int kiln_cval_from_fattr(int dt, double v, kiln_cval *out);
/* The fattr encoding of v in dtype dt; 0 if a double cannot hold it
 * (an i64 beyond 2^53). */
int kiln_cval_to_fattr(int dt, kiln_cval v, double *out);
/* 1 if a and b are the same value of dt; floats: same bits up to the NaN
 * payload (so -0 and +0 differ, any two NaNs are equal). */
int kiln_cval_same(int dt, kiln_cval a, kiln_cval b);
/* 1 if v is exactly one / zero (either sign) in dt; for bool (mul is "and",
 * add is "or") true / false. */
int kiln_cval_is_one(int dt, kiln_cval v);
int kiln_cval_is_zero(int dt, kiln_cval v);

/* Unary op (NEG ... CAST) of a (dtype in_dt) giving dtype out_dt.
 * 1 and *r on success, 0 when it must not be folded. */
int kiln_cval_unary(int op, int in_dt, int out_dt, kiln_cval a, kiln_cval *r);
/* Binary op (ADD ... OR) on two values of in_dt (the result has in_dt, or
 * BOOL for comparisons and logic). 1 and *r on success, 0 otherwise. */
int kiln_cval_binary(int op, int in_dt, kiln_cval a, kiln_cval b, kiln_cval *r);
/* The sum of n copies of v in dt (REDUCE_SUM of a fill) as the runtime's
 * sum from +0 gives it: +0 for n = 0 or a zero fill, inf/NaN for an inf/NaN
 * fill, else v*n rounded once where that is exact in every order. 0 (not
 * folded) on integer overflow, for BOOL, and for a float sum whose partial
 * sums would round. */
int kiln_cval_sum(int dt, kiln_cval v, int64_t n, kiln_cval *r);

#endif
