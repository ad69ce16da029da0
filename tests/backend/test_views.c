/* Chains of views and their gradients against PyTorch autograd
 * (tests/data/views_reference.txt, made by tests/data/views_reference.py),
 * on the ref backend and the backend under test, in f64 and f32: slices
 * with steps and negative bounds, transposes and permutes, expand, reshape
 * of non-contiguous data, flip, roll, pads, concat/stack of views of one
 * tensor, gather/index_select with duplicate indices, a tensor used twice
 * (x * x, x @ xᵀ). Each case is y = f(x) for one [3, 4, 5] x and the
 * gradient of sum(y * w): a slice's gradient scatters back, an expand's
 * sums, a transpose's transposes, duplicate indices accumulate.
 *
 * Also kiln_assign of a tensor to a permutation of itself (transpose, flip,
 * roll, a row shift, a swap of two tensors), where the old buffer is
 * donated to the new value: a kernel writing in place must not overwrite
 * what it still reads. Exact: the values are permutations. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>

#include "backend/ref_cases.h"

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define AX(...) ((const int[]){__VA_ARGS__})
enum { N_CASES = 22 };

static kiln_tensor view_case(int k, kiln_tensor x, kiln_dtype dt) {
  switch (k) {
    case 0: return kiln_slice(x, 2, 1, 5, 2);
    case 1: return kiln_expand(kiln_slice(x, 1, 0, 1, 1), 4, SH(2, 3, 6, 5));
    case 2: return kiln_reshape(kiln_transpose(x, 0, 2), 2, SH(5, 12));
    case 3: return kiln_flip(kiln_permute(x, AX(1, 2, 0)), 2, AX(0, 2));
    case 4: return kiln_slice(kiln_mul(x, x), 1, -3, -1, 1);
    case 5: return kiln_matmul(x, kiln_transpose(x, 1, 2));
    case 6: return kiln_concat(2, ((const kiln_tensor[]){kiln_slice(x, 2, 3, 5, 1), kiln_flip(x, 1, AX(2))}), 2);
    case 7: return kiln_pad(x, SH(-1, 2, 0), SH(1, -2, 3), 0.5);
    case 8: return kiln_roll(x, -3, 2);
    case 9: return kiln_tril(kiln_transpose(x, 1, 2), -1);
    case 10: return kiln_stack(2, ((const kiln_tensor[]){x, kiln_mul_c(x, 2)}), 1);
    case 11: {
      int64_t id[60];
      for (int i = 0; i < 60; i++) id[i] = (i * 7) % 3;
      return kiln_gather(x, 0, kiln_from_host(id, KILN_I64, 3, SH(3, 4, 5)));
    }
    case 12: return kiln_index_select(x, 2, kiln_from_host(((const int64_t[]){4, 4, 0, 2, 4}), KILN_I64, 1, SH(5)));
    case 13: return kiln_cumsum(kiln_flip(x, 1, AX(1)), 1);
    case 14: return kiln_slice(kiln_reshape(kiln_transpose(x, 1, 2), 2, SH(15, 4)), 0, 1, 15, 3);
    case 15: return kiln_add(kiln_slice(x, 2, 0, 1, 1), kiln_slice(x, 0, 2, 3, 1));
    case 16: return kiln_matmul(kiln_slice(x, 0, 0, 1, 1), kiln_transpose(kiln_slice(x, 0, 0, 1, 1), 1, 2));
    case 17: return kiln_sum(kiln_expand(kiln_reshape(x, 4, SH(3, 1, 4, 5)), 4, SH(3, 7, 4, 5)), 1, AX(1), false);
    case 18: return kiln_pad_with(x, SH(0, 1, 2), SH(0, 2, 1), KILN_PAD_REFLECT, 0);
    case 19: return kiln_pad_with(x, SH(1, 0, 3), SH(2, 1, 0), KILN_PAD_REPLICATE, 0);
    case 20: return kiln_mul(kiln_transpose(x, 0, 1), kiln_transpose(x, 0, 1));
    default: {
      kiln_tensor p = kiln_slice(kiln_permute(x, AX(2, 0, 1)), 0, -4, 5, 2);
      return kiln_slice(kiln_reshape(p, 2, SH(2, 12)), 1, -100, 100, 5);
    }
  }
  (void)dt;
}

static double x_value(int i) { return (double)(float)(((i * 37) % 23) / 8.0 - 1.3); }
static double w_value(int64_t i) { return ((i * 5) % 7 - 3) / 4.0; }

/* arg: the dtype. Outputs: y0, g0, y1, g1, ... */
static void prog_views(bc_result *r, const void *arg) {
  kiln_dtype dt = *(const kiln_dtype *)arg;
  double h[60];
  for (int i = 0; i < 60; i++) h[i] = x_value(i);
  kiln_tensor xs[N_CASES], loss = {0, 0};
  for (int k = 0; k < N_CASES; k++) {
    xs[k] = kiln_cast(kiln_from_host(h, KILN_F64, 3, SH(3, 4, 5)), dt);
    kiln_requires_grad(xs[k]);
    kiln_tensor y = view_case(k, xs[k], dt);
    int64_t n = kiln_numel(y), s[KILN_MAX_RANK];
    int rank = kiln_shape(y, s);
    double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) w[i] = w_value(i);
    kiln_tensor wt = kiln_cast(kiln_from_host(w, KILN_F64, rank, s), dt);
    free(w);
    kiln_tensor lk = kiln_sum(kiln_mul(y, wt), 0, NULL, false);
    loss = k ? kiln_add(loss, lk) : lk; /* one backward: each x gets its own case's gradient */
    bc_emit(r, y, 0, 0, "y%d", k);
  }
  kiln_backward(loss);
  for (int k = 0; k < N_CASES; k++) bc_emit(r, kiln_grad(xs[k]), 0, 0, "g%d", k);
}

static void check_against_torch(const char *backend, kiln_dtype dt, const bc_result *res) {
  static rc_want w;
  double tol = dt == KILN_F64 ? 1e-10 : 2e-6; /* the file has 12 digits */
  for (int o = 0; o < res->n; o++) {
    const bc_out *out = &res->o[o];
    if (rc_read_want("views_reference.txt", out->name, &w)) {
      KT_FAIL("%s: case %s missing from tests/data/views_reference.txt (set KILN_TEST_DATA)", backend, out->name);
      return;
    }
    KT_CHECK_MSG(out->rank == w.rank && !memcmp(out->shape, w.shape, sizeof(int64_t) * (size_t)w.rank),
                 "%s %s: %s has another shape than PyTorch's", backend, kiln_dtype_name(dt), out->name);
    if (out->numel != w.n) continue;
    int bad = 0;
    for (int64_t i = 0; i < w.n && !bad; i++) {
      double got = bc_get_f(out, i);
      if (fabs(got - w.v[i]) > tol * (1 + fabs(w.v[i]))) {
        KT_FAIL("%s %s: %s[%lld] = %.17g, PyTorch %.17g", backend, kiln_dtype_name(dt), out->name, (long long)i, got,
                w.v[i]);
        bad = 1;
      }
    }
  }
}

KT_TEST(views_and_their_gradients_match_pytorch) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  const kiln_dtype dts[2] = {KILN_F64, KILN_F32};
  static bc_result res;
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      bc_run(backends[b], prog_views, &dts[d], &res);
      KT_CHECK_MSG(res.status == KILN_OK && res.n == 2 * N_CASES, "%s: %s", backends[b], res.err);
      if (res.status == KILN_OK) check_against_torch(backends[b], dts[d], &res);
      bc_result_free(&res);
    }
}

/* ───────────── assign of a tensor to a permutation of itself ───────────── */

enum { NP = 67 }; /* not a multiple of any vector width */

static float perm_src(int i) { return (float)((i * 7919) % 251) - 100.0f; }

static kiln_tensor perm_case(int k, kiln_tensor a) {
  switch (k) {
    case 0: return kiln_transpose(a, 0, 1);
    case 1: return kiln_flip(a, 1, AX(0));
    case 2: return kiln_flip(a, 1, AX(1));
    case 3: return kiln_roll(a, 1, 1);
    case 4: return kiln_roll(a, -1, 0);
    default: return kiln_add_c(kiln_transpose(a, 0, 1), 1.0);
  }
}
static double perm_want(int k, int i, int j) {
  switch (k) {
    case 0: return perm_src(j * NP + i);
    case 1: return perm_src((NP - 1 - i) * NP + j);
    case 2: return perm_src(i * NP + NP - 1 - j);
    case 3: return perm_src(i * NP + (j + NP - 1) % NP);
    case 4: return perm_src(((i + 1) % NP) * NP + j);
    default: return perm_src(j * NP + i) + 1.0;
  }
}

KT_TEST(assign_to_a_permutation_of_itself_in_place) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  static float h[NP * NP], got[NP * NP];
  for (int i = 0; i < NP * NP; i++) h[i] = perm_src(i);
  for (int b = 0; b < 2; b++) {
    KT_CHECK(kiln_init(&(kiln_options){.backend = backends[b]}) == KILN_OK);
    for (int k = 0; k < 6; k++) {
      kiln_tensor a = kiln_keep(kiln_from_host(h, KILN_F32, 2, SH(NP, NP)));
      kiln_mark_step();
      kiln_tensor old = kiln_keep(kiln_mul_c(a, 1.0)); /* traced before: the old value */
      kiln_assign(a, perm_case(k, a));
      kiln_mark_step();
      KT_CHECK(kiln_to_host(a, got, sizeof got) == KILN_OK);
      int bad = 0;
      for (int i = 0; i < NP && !bad; i++)
        for (int j = 0; j < NP && !bad; j++)
          if (got[i * NP + j] != perm_want(k, i, j)) {
            KT_FAIL("%s: case %d: a[%d][%d] = %g after the assign, want %g", backends[b], k, i, j, got[i * NP + j],
                    perm_want(k, i, j));
            bad = 1;
          }
      KT_CHECK(kiln_to_host(old, got, sizeof got) == KILN_OK);
      KT_CHECK_MSG(!memcmp(got, h, sizeof h), "%s: case %d: a value traced before the assign changed", backends[b],
                   k);
      kiln_release(a);
      kiln_release(old);
    }
    /* a swap through temporaries: both old buffers donated, each read by the other's kernel */
    kiln_tensor a = kiln_keep(kiln_from_host(h, KILN_F32, 2, SH(NP, NP)));
    kiln_tensor c = kiln_keep(kiln_neg(kiln_from_host(h, KILN_F32, 2, SH(NP, NP))));
    kiln_mark_step();
    kiln_tensor ta = kiln_add_c(a, 0.0), tc = kiln_add_c(c, 0.0);
    kiln_assign(a, kiln_flip(tc, 1, AX(0)));
    kiln_assign(c, kiln_transpose(ta, 0, 1));
    kiln_mark_step();
    KT_CHECK(kiln_to_host(a, got, sizeof got) == KILN_OK);
    KT_CHECK_MSG(got[0] == -perm_want(1, 0, 0) && got[NP * NP - 1] == -perm_want(1, NP - 1, NP - 1),
                 "%s: swap: a[0] = %g", backends[b], got[0]);
    KT_CHECK(kiln_to_host(c, got, sizeof got) == KILN_OK);
    for (int i = 0; i < NP * NP; i++)
      if (got[i] != perm_want(0, i / NP, i % NP)) {
        KT_FAIL("%s: swap: c[%d] = %g, want %g", backends[b], i, got[i], perm_want(0, i / NP, i % NP));
        break;
      }
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s: %s", backends[b], kiln_last_error());
    kiln_clear_error();
    kiln_shutdown();
  }
}

KT_MAIN(KT_CASE(views_and_their_gradients_match_pytorch), KT_CASE(assign_to_a_permutation_of_itself_in_place))
