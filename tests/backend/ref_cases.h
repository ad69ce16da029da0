/* Shared by the tests that check ops against a committed NumPy reference
 * file (test_compose.c, test_sort.c, test_scan.c): reading one case of the
 * file, and the finite-difference check of a function of one [3, 4] f64
 * parameter. Test code only.
 *
 * The files (written by tests/data/<name>_reference.py) hold one case per
 * line: <case> <dtype> <rank> <shape...> <values...>; '#' starts a comment
 * line; "nan" is NaN. */
#ifndef KILN_TESTS_REF_CASES_H
#define KILN_TESTS_REF_CASES_H

#include <inttypes.h>
#include <kiln/autograd.h>

#include "autograd/autograd_internal.h"
#include "backend/backend_compare.h"

#define RC_MAXV 512

typedef struct rc_want {
  char name[32], dt[8];
  int rank;
  int64_t shape[KILN_MAX_RANK], n;
  double v[RC_MAXV];   /* the values as doubles */
  int64_t vi[RC_MAXV]; /* and as integers (exact for i64) */
} rc_want;

/* Case `name` of $KILN_TEST_DATA/<file> into w; 0, or -1 when the file or
 * the case is missing or malformed. */
static inline int rc_read_want(const char *file, const char *name, rc_want *w) {
  const char *dir = getenv("KILN_TEST_DATA");
  char path[512], tok[64];
  snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/data", file);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int found = -1;
  while (found < 0 && fscanf(f, "%31s", w->name) == 1) {
    if (w->name[0] == '#') {
      int c;
      while ((c = fgetc(f)) != '\n' && c != EOF) {}
      continue;
    }
    if (fscanf(f, "%7s %d", w->dt, &w->rank) != 2 || w->rank < 0 || w->rank > KILN_MAX_RANK) break;
    w->n = 1;
    for (int i = 0; i < w->rank; i++) {
      if (fscanf(f, "%" SCNd64, &w->shape[i]) != 1) goto out;
      w->n *= w->shape[i];
    }
    if (w->n > RC_MAXV) break;
    for (int64_t i = 0; i < w->n; i++) {
      if (fscanf(f, "%63s", tok) != 1) goto out;
      w->v[i] = strcmp(tok, "nan") ? strtod(tok, NULL) : NAN;
      w->vi[i] = strtoll(tok, NULL, 10);
    }
    if (!strcmp(w->name, name)) found = 0;
  }
out:
  fclose(f);
  return found;
}

/* Compare out (any numeric dtype; read as f64) with case w exactly: its
 * shape, its dtype's name (f64 i64 i32) and every value (NaN matches NaN;
 * with signed_zero, -0 and +0 differ). */
static inline void rc_check_exact(const rc_want *w, kiln_tensor out, const char *backend, int signed_zero) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(out, s);
  KT_CHECK_MSG(r == w->rank && !memcmp(s, w->shape, sizeof(int64_t) * (size_t)r), "%s on %s: shape differs",
               w->name, backend);
  kiln_dtype dt = kiln_dtype_of(out);
  const char *dn = dt == KILN_F64 ? "f64" : dt == KILN_I64 ? "i64" : dt == KILN_I32 ? "i32" : "?";
  KT_CHECK_MSG(!strcmp(dn, w->dt), "%s on %s: dtype %s, NumPy's %s", w->name, backend, dn, w->dt);
  static double got[RC_MAXV];
  kiln_tensor f = kiln_cast(out, KILN_F64);
  if (r != w->rank || kiln_numel(f) != w->n || kiln_to_host(f, got, sizeof(double) * (size_t)w->n) != KILN_OK) {
    KT_FAIL("%s on %s: %s", w->name, backend, kiln_last_error());
    return;
  }
  for (int64_t i = 0; i < w->n; i++)
    KT_CHECK_MSG((got[i] == w->v[i] && (!signed_zero || signbit(got[i]) == signbit(w->v[i]))) ||
                     (isnan(got[i]) && isnan(w->v[i])),
                 "%s on %s: [%lld] = %.17g, NumPy %.17g", w->name, backend, (long long)i, got[i], w->v[i]);
}

typedef kiln_tensor (*rc_fn)(kiln_tensor x);

static const int64_t rc_S34[2] = {3, 4};

/* loss = sum(fn(x) * w), w_i = 0.5 + 0.4 sin(1.3 i + 0.2) (fixed, distinct:
 * as in the reference scripts), for x [3, 4] f64; with grad, also dloss/dx
 * by kiln_backward. */
static inline double rc_loss(rc_fn fn, const double *x, double *grad) {
  kiln_tensor t = kiln_from_host(x, KILN_F64, 2, rc_S34);
  if (grad) {
    t = kiln_keep(t);
    kiln_requires_grad(t);
  }
  kiln_tensor out = fn(t);
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(out, s);
  int64_t n = kiln_numel(out);
  static double wv[RC_MAXV];
  for (int64_t i = 0; i < n && i < RC_MAXV; i++) wv[i] = 0.5 + 0.4 * sin(1.3 * (double)i + 0.2);
  kiln_tensor L = kiln_sum(kiln_mul(out, kiln_from_host(wv, KILN_F64, r, s)), 0, NULL, 0);
  double v = kiln_item_f64(L);
  if (grad) {
    KT_CHECK(kiln_backward(L) == KILN_OK);
    kiln_tensor g = kiln_grad(t);
    KT_CHECK(g.gen && kiln_to_host(g, grad, sizeof(double) * 12) == KILN_OK);
    kiln_release(t);
  }
  kiln_mark_step();
  return v;
}

/* On `backend`: the backward of rc_loss at x0 against central differences
 * of step h (|fd - g| <= tol (1 + |fd|) for each of the 12 elements); the
 * backward's gradient is left in g. */
static inline void rc_gradcheck(const char *name, rc_fn fn, const double *x0, const char *backend, double h, double tol,
                                double *g) {
  kiln_autograd_reset();
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend}) == KILN_OK);
  double x[12];
  memcpy(x, x0, sizeof x);
  memset(g, 0, sizeof(double) * 12);
  rc_loss(fn, x, g);
  for (int i = 0; i < 12; i++) {
    x[i] = x0[i] + h;
    double lp = rc_loss(fn, x, NULL);
    x[i] = x0[i] - h;
    double lm = rc_loss(fn, x, NULL);
    x[i] = x0[i];
    double num = (lp - lm) / (2 * h);
    KT_CHECK_MSG(fabs(num - g[i]) <= tol * (1 + fabs(num)), "%s on %s: d/dx[%d]: backward %.12g, FD %.12g", name,
                 backend, i, g[i], num);
  }
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s on %s: %s", name, backend, kiln_last_error());
  kiln_shutdown();
}

#endif
