/* Run one traced program on two backends through the public API and compare
 * the results with tolerances per dtype. Shared by test_conformance.c and
 * test_random_graphs.c. Test code only; not thread-safe.
 *
 * A program is a function that traces ops and registers the tensors to
 * compare with bc_emit(). bc_run() starts the runtime on a backend, calls
 * the program, ends the step (kiln_mark_step computes every emitted tensor
 * in one graph), reads the results back and shuts the runtime down. The
 * program must be deterministic: it is called once per backend.
 *
 * The backend under test is $KILN_TEST_BACKEND (default "cpu"); the oracle
 * is always "ref".
 */
#ifndef KILN_TESTS_BACKEND_COMPARE_H
#define KILN_TESTS_BACKEND_COMPARE_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "kiln/kiln.h"
#include "kt.h"

#define BC_MAX_OUT 512

typedef struct bc_out {
  kiln_tensor t;
  char name[96];
  double rtol, atol; /* 0: the dtype's default */
  kiln_dtype dt;
  int rank;
  int64_t shape[KILN_MAX_RANK];
  int64_t numel;
  void *data; /* malloc'd host copy */
} bc_out;

typedef struct bc_result {
  const char *backend;
  int n;
  bc_out o[BC_MAX_OUT];
  kiln_status status;
  char err[1024];
} bc_result;

typedef void (*bc_prog_fn)(bc_result *r, const void *arg);

static inline const char *bc_backend_under_test(void) {
  const char *b = getenv("KILN_TEST_BACKEND");
  return b && *b ? b : "cpu";
}

/* Register t (kept past the step) as a compared output. */
__attribute__((format(printf, 5, 6))) static inline void bc_emit(bc_result *r, kiln_tensor t, double rtol,
                                                                  double atol, const char *fmt, ...) {
  if (r->n >= BC_MAX_OUT) {
    KT_FAIL("bc_emit: more than %d outputs", BC_MAX_OUT);
    return;
  }
  bc_out *o = &r->o[r->n++];
  o->t = kiln_keep(t);
  o->rtol = rtol;
  o->atol = atol;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->name, sizeof o->name, fmt, ap);
  va_end(ap);
}

/* Deterministic host data. kind 0: floats in [-2, 2), ints in [-20, 20]
 * (zeros included), bool 0/1; kind 1: positive (floats [0.25, 4.25), ints
 * [1, 20]); kind 2: kind 0 with specials mixed in (NaN, +-inf, -0, huge). */
static inline void *bc_host_data(kiln_dtype dt, int64_t n, uint64_t seed, int kind) {
  void *p = calloc((size_t)(n > 0 ? n : 1), kiln_dtype_size(dt) ? kiln_dtype_size(dt) : 1);
  static const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 1e10, -3e9, 2.5, -2.5, 0.0, 1e300};
  for (int64_t i = 0; i < n; i++) {
    double u = kiln_rng_uniform(seed, (uint64_t)i);
    double f = kind == 1 ? 0.25 + 4.0 * u : -2.0 + 4.0 * u;
    int64_t k = kind == 1 ? 1 + (int64_t)(u * 20) : (int64_t)(u * 41) - 20;
    if (kind == 2 && i % 3 == 1) f = specials[(i / 3) % 10];
    switch (dt) {
      case KILN_F32: ((float *)p)[i] = (float)f; break;
      case KILN_F64: ((double *)p)[i] = f; break;
      case KILN_I32: ((int32_t *)p)[i] = (int32_t)k; break;
      case KILN_I64: ((int64_t *)p)[i] = k; break;
      case KILN_BF16: { /* the f32's top half: truncated, a bf16 all the same */
        float x = (float)f;
        uint32_t b;
        memcpy(&b, &x, 4);
        ((uint16_t *)p)[i] = (uint16_t)(b >> 16);
        break;
      }
      case KILN_F16: {
        _Float16 h = (_Float16)f;
        memcpy((uint16_t *)p + i, &h, 2);
        break;
      }
      case KILN_U8: ((uint8_t *)p)[i] = (uint8_t)(kind == 1 ? k : k + 128); break;
      case KILN_I8: ((int8_t *)p)[i] = (int8_t)k; break;
      default: ((uint8_t *)p)[i] = u < 0.5; break;
    }
  }
  return p;
}

/* A device tensor from bc_host_data. */
static inline kiln_tensor bc_input(kiln_dtype dt, int rank, const int64_t *shape, uint64_t seed, int kind) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= shape[d];
  void *p = bc_host_data(dt, n, seed, kind);
  kiln_tensor t = kiln_from_host(p, dt, rank, shape);
  free(p);
  return t;
}

static inline void bc_result_free(bc_result *r) {
  for (int i = 0; i < r->n; i++) free(r->o[i].data);
  r->n = 0;
}

/* Trace prog(r[k], args[k]) and end the step, for k in [0, n), all in one
 * runtime session on backend: steps after the first with the same graph
 * structure reuse the compiled executable with new inputs. Each r[k] gets
 * the results of step k. Returns 0 if every step ran without error. */
static inline int bc_run_steps(const char *backend, bc_prog_fn prog, const void *const *args, int n, bc_result *r) {
  for (int k = 0; k < n; k++) {
    memset(&r[k], 0, sizeof r[k]);
    r[k].backend = backend;
  }
  kiln_clear_error();
  kiln_status s = kiln_init(&(kiln_options){.backend = backend});
  if (s == KILN_OK && strcmp(kiln_backend_name(), backend) != 0) {
    kiln_shutdown();
    s = KILN_ERR_INTERNAL;
  }
  if (s != KILN_OK) {
    for (int k = 0; k < n; k++) {
      r[k].status = s;
      snprintf(r[k].err, sizeof r[k].err, "kiln_init(%s): %s", backend, kiln_last_error());
    }
    kiln_clear_error();
    return -1;
  }
  int bad = 0;
  for (int k = 0; k < n; k++) {
    prog(&r[k], args[k]);
    s = kiln_mark_step();
    for (int i = 0; i < r[k].n && s == KILN_OK; i++) {
      bc_out *o = &r[k].o[i];
      o->rank = kiln_shape(o->t, o->shape);
      o->dt = kiln_dtype_of(o->t);
      o->numel = kiln_numel(o->t);
      size_t bytes = (size_t)(o->numel > 0 ? o->numel : 0) * kiln_dtype_size(o->dt);
      o->data = calloc(bytes ? bytes : 1, 1);
      if (o->rank < 0 || !kiln_is_valid(o->t)) {
        s = kiln_last_status() != KILN_OK ? kiln_last_status() : KILN_ERR_INVALID_ARGUMENT;
        break;
      }
      s = kiln_to_host(o->t, o->data, bytes);
    }
    for (int i = 0; i < r[k].n; i++) kiln_release(r[k].o[i].t);
    r[k].status = s != KILN_OK ? s : kiln_last_status();
    snprintf(r[k].err, sizeof r[k].err, "%s", kiln_last_error());
    bad |= r[k].status != KILN_OK;
    kiln_clear_error();
  }
  kiln_shutdown();
  return bad ? -1 : 0;
}

/* One step of prog on backend; returns 0 if it ran without error. */
static inline int bc_run(const char *backend, bc_prog_fn prog, const void *arg, bc_result *r) {
  return bc_run_steps(backend, prog, &arg, 1, r);
}

/* A bf16 / f16 bit pattern as a double, decoded from the formats'
 * definitions (independent of kiln's conversions). */
static inline double bc_half_bits(int dt, uint16_t h) {
  int ebits = dt == KILN_BF16 ? 8 : 5, mbits = 15 - ebits, bias = (1 << (ebits - 1)) - 1;
  int e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << ebits) - 1) return m ? copysign(NAN, sign) : sign * INFINITY; /* a NaN keeps its sign */
  if (e == 0) return sign * ldexp((double)m, 1 - bias - mbits);
  return sign * ldexp((double)(m | (1 << mbits)), e - bias - mbits);
}
static inline int bc_is_float(int dt) { return dt == KILN_F32 || dt == KILN_F64 || dt == KILN_BF16 || dt == KILN_F16; }
/* Default tolerances per dtype: 16-bit floats allow one ulp of their own
 * (a libm difference in f32 can move the rounding by one). */
static inline double bc_rtol(int dt) {
  return dt == KILN_F32 ? 1e-5 : dt == KILN_BF16 ? 1.0 / 128 : dt == KILN_F16 ? 1.0 / 1024 : 1e-12;
}
static inline double bc_atol(int dt) {
  return dt == KILN_F32 ? 1e-6 : dt == KILN_BF16 ? 1e-6 : dt == KILN_F16 ? 1e-7 : 1e-12;
}

/* Element i of o as double / int64. */
static inline double bc_get_f(const bc_out *o, int64_t i) {
  switch (o->dt) {
    case KILN_F32: return ((const float *)o->data)[i];
    case KILN_F64: return ((const double *)o->data)[i];
    case KILN_I32: return ((const int32_t *)o->data)[i];
    case KILN_I64: return (double)((const int64_t *)o->data)[i];
    case KILN_BF16: case KILN_F16: return bc_half_bits(o->dt, ((const uint16_t *)o->data)[i]);
    case KILN_I8: return ((const int8_t *)o->data)[i];
    default: return ((const uint8_t *)o->data)[i];
  }
}
static inline int64_t bc_get_i(const bc_out *o, int64_t i) {
  switch (o->dt) {
    case KILN_I32: return ((const int32_t *)o->data)[i];
    case KILN_I64: return ((const int64_t *)o->data)[i];
    case KILN_BOOL: case KILN_U8: return ((const uint8_t *)o->data)[i];
    case KILN_I8: return ((const int8_t *)o->data)[i];
    default: return (int64_t)bc_get_f(o, i);
  }
}

/* |x - want| within tolerance; NaN matches NaN, infinities match exactly. */
static inline int bc_close(double x, double want, double rtol, double atol) {
  if (isnan(want) || isnan(x)) return isnan(want) && isnan(x);
  if (isinf(want) || isinf(x)) return x == want;
  return fabs(x - want) <= atol + rtol * fabs(want);
}

/* The oracle's runs: ref on the graph as traced, without the graph passes
 * (KILN_PASSES=0; the environment's own setting restored after), so that a
 * pass that changes a value is found by every comparison (both backends run
 * the same passes: comparing them alone could not see it). */
static inline int bc_run_oracle_steps(bc_prog_fn prog, const void *const *args, int n, bc_result *r) {
  const char *passes = getenv("KILN_PASSES");
  char saved[64];
  snprintf(saved, sizeof saved, "%s", passes ? passes : "");
  setenv("KILN_PASSES", "0", 1);
  int rc = bc_run_steps("ref", prog, args, n, r);
  if (passes)
    setenv("KILN_PASSES", saved, 1);
  else
    unsetenv("KILN_PASSES");
  return rc;
}
static inline int bc_run_oracle(bc_prog_fn prog, const void *arg, bc_result *r) {
  return bc_run_oracle_steps(prog, &arg, 1, r);
}

/* Compare every output of got against the oracle ref. Returns the number of
 * mismatching outputs (each reported once, with its first bad element). */
static inline int bc_compare(const char *what, const bc_result *ref, const bc_result *got) {
  if (ref->status != KILN_OK || got->status != KILN_OK) {
    KT_FAIL("%s: run failed: %s: %s (%s) / %s: %s (%s)", what, ref->backend, kiln_status_name(ref->status),
            ref->err, got->backend, kiln_status_name(got->status), got->err);
    return 1;
  }
  if (ref->n != got->n) {
    KT_FAIL("%s: %d outputs on %s, %d on %s", what, ref->n, ref->backend, got->n, got->backend);
    return 1;
  }
  int bad = 0;
  for (int k = 0; k < ref->n; k++) {
    const bc_out *a = &ref->o[k], *b = &got->o[k];
    if (a->dt != b->dt || a->rank != b->rank || a->numel != b->numel ||
        memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)(a->rank > 0 ? a->rank : 0))) {
      KT_FAIL("%s/%s: dtype or shape differs between %s and %s", what, a->name, ref->backend, got->backend);
      bad++;
      continue;
    }
    int is_f = bc_is_float(a->dt);
    double rtol = a->rtol > 0 ? a->rtol : bc_rtol(a->dt);
    double atol = a->atol > 0 ? a->atol : bc_atol(a->dt);
    for (int64_t i = 0; i < a->numel; i++) {
      int ok = is_f ? bc_close(bc_get_f(b, i), bc_get_f(a, i), rtol, atol) : bc_get_i(a, i) == bc_get_i(b, i);
      if (!ok) {
        KT_FAIL("%s/%s (%s, %lld elements): element %lld: %s gives %.9g, ref gives %.9g", what, a->name,
                kiln_dtype_name(a->dt), (long long)a->numel, (long long)i, got->backend, bc_get_f(b, i),
                bc_get_f(a, i));
        bad++;
        break;
      }
    }
  }
  return bad;
}

/* Run prog on the oracle (ref without passes) and on the backend under test, compare; if keep_ref is
 * non-NULL the ref results are left there (caller frees) for extra checks. */
static inline int bc_check(const char *what, bc_prog_fn prog, const void *arg, bc_result *keep_ref) {
  static bc_result ref, got; /* large: keep off the stack */
  bc_run_oracle(prog, arg, &ref);
  bc_run(bc_backend_under_test(), prog, arg, &got);
  int bad = bc_compare(what, &ref, &got);
  bc_result_free(&got);
  if (keep_ref)
    *keep_ref = ref;
  else
    bc_result_free(&ref);
  return bad;
}

#endif
