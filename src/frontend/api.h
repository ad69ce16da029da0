/* Shared helpers of the public op builders (the API layer). */
#ifndef KILN_FRONTEND_API_H
#define KILN_FRONTEND_API_H

#include "frontend/trace.h"

/* The frontend singleton's tensor table and trace (frontend/session.c),
 * starting kiln (kiln_init with defaults from the environment) on first
 * use. NULL if kiln could not start, or if another thread is tracing this
 * step (the error, naming both threads' calls, is recorded with loc; a call
 * with no location of its own passes (kiln_loc){0}). Every traced op passes
 * here: the tracing thread's own calls cost one compare. */
kiln_frontend *kiln_api_frontend_at(kiln_loc loc);

/* Resolve an input: fills *node; returns 0 if ok, 1 if poisoned (silently
 * propagate), -1 if stale/null (error recorded). */
int kiln_api_input(kiln_frontend *fe, kiln_tensor t, const char *op, kiln_loc loc, kiln_tslot **slot,
                   kiln_node **node);
/* PyTorch's promotion (docs/semantics.md): bool < integers < floats; among
 * integers the wider (u8 with i8: i32, kiln has no i16); among floats the
 * wider, bf16 with f16: f32. */
kiln_dtype kiln_api_promote(kiln_dtype a, kiln_dtype b);
/* The autocast dtype in force (KILN_F32: none); autocast.c. */
kiln_dtype kiln_api_autocast(const kiln_frontend *fe);
static inline int kiln_dtype_is_float(kiln_dtype d) {
  return d == KILN_F32 || d == KILN_F64 || d == KILN_BF16 || d == KILN_F16;
}
/* node converted to dt (itself if already). */
kiln_node *kiln_api_cast(kiln_frontend *fe, kiln_node *n, kiln_dtype dt, kiln_loc loc);
/* node broadcast to (rank, shape) with RESHAPE + EXPAND as needed. */
kiln_node *kiln_api_broadcast(kiln_frontend *fe, kiln_node *n, int rank, const int64_t *shape, kiln_loc loc);
/* Broadcast shape of two shapes; -1 on mismatch (bad_axis set). */
int kiln_api_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out,
                             int *bad_axis);
/* A reshape node (itself if same shape). */
kiln_node *kiln_api_reshape(kiln_frontend *fe, kiln_node *n, int rank, const int64_t *shape, kiln_loc loc);
/* A CONST node of dt filled with v, of shape. */
kiln_node *kiln_api_const(kiln_frontend *fe, kiln_dtype dt, int rank, const int64_t *shape, double v, kiln_loc loc);
/* Convert *v to dt's value set (integers truncate, bool is != 0) and return
 * 0, or record an error naming op and return -1 when it is not
 * representable (NaN/inf or out of range for an integer dtype). */
int kiln_api_check_value(kiln_dtype dt, double *v, const char *op, kiln_loc loc);
/* The dtype a double takes next to a tensor of dtype dt in the _s / _c
 * builders: a double that is not an integer (a fraction, inf, NaN, -0.0) is
 * a float, as Python's; an integer takes dt (i64 next to bool). */
kiln_dtype kiln_api_scalar_dtype(kiln_dtype dt, double v);
/* (int64_t)v without undefined behaviour (0 when out of range or NaN). */
static inline int64_t kiln_api_i64(double v) {
  return (v == v && v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? (int64_t)v : 0;
}
/* 0 if a result of dt and shape can be made (kiln_fe_shape_ok), else -1
 * after an error naming op (the builder the program called: an inner
 * node's failure would name the inner op, e.g. "expand" for an add). */
int kiln_api_result_fits(kiln_dtype dt, int rank, const int64_t *shape, const char *op, kiln_loc loc);
/* Normalize an axis (negative from the end) against rank; -1 if out of range. */
int kiln_api_axis(int axis, int rank);
/* The fail-and-poison helper for code that holds no frontend (layers,
 * losses, optimizers, loaders): the runtime's frontend (started if need be;
 * when it cannot start, or another thread is tracing, the null tensor, with
 * that error recorded instead), then error s recorded at loc with the
 * formatted message and a poisoned tensor returned. */
kiln_tensor kiln_api_fail_at(kiln_status s, kiln_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same for the op builders, which hold fe: records an
 * INVALID_ARGUMENT error ("<op>: <what> (shapes [..] and [..])"). Returns a
 * poisoned tensor. */
kiln_tensor kiln_api_fail(kiln_frontend *fe, kiln_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
