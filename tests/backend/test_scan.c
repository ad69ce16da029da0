/* prod, cumsum and cumprod on the ref backend and the backend under test
 * against NumPy values (tests/data/scan_reference.py writes
 * scan_reference.txt): several axes, keepdim, every dtype class (bool and
 * integers to i64, wrapping), empty axes; their gradients against the
 * script's (PyTorch's rules written out, zeros included: the product of the
 * others at a lone zero, 0 past two) and by finite differences (exact here:
 * the outputs are multilinear in x); and their argument errors. */
#include "backend/ref_cases.h"

static const double kX[12] = {0.3, -1.2, 2.5, 0.7, -3.1, 1.9, 0.05, -0.4, 4.2, -2.6, 1.1, 3.3};
/* rows: one zero, two zeros, none */
static const double kXZ[12] = {1.5, 0.0, -2.0, 0.5, 0.0, 3.0, 0.0, -1.25, 0.8, -1.1, 2.0, 1.3};
static const int32_t kI[8] = {5, INT32_MIN, 7, -3, INT32_MAX, 0, -1, 65536};
static const int64_t kIW[6] = {1LL << 40, 3, -(1LL << 30), 1LL << 33, 7, -5};
static const uint8_t kB[8] = {1, 0, 1, 1, 1, 1, 1, 1};
static const float kF[8] = {1.1f, -0.7f, 2.3f, 0.9f, 1.7f, -1.3f, 0.6f, 1.9f};
static const int64_t S34[2] = {3, 4}, S24[2] = {2, 4}, S23[2] = {2, 3}, S234[3] = {2, 3, 4};

static kiln_tensor in_x(void) { return kiln_from_host(kX, KILN_F64, 2, S34); }
static kiln_tensor in_xz(void) { return kiln_from_host(kXZ, KILN_F64, 2, S34); }
static kiln_tensor in_y(void) {
  static double y[24];
  for (int i = 0; i < 24; i++) y[i] = i * 0.125 - 1.4;
  return kiln_from_host(y, KILN_F64, 3, S234);
}
static kiln_tensor empty(int64_t r, int64_t c) {
  static const double none[1] = {0};
  const int64_t s[2] = {r, c};
  return kiln_from_host(none, KILN_F64, 2, s);
}

static const int k_ax0[1] = {0}, k_ax1[1] = {1}, k_axl[1] = {-1}, k_ax02[2] = {0, 2};
/* value cases */
typedef kiln_tensor (*case_fn)(void);
static kiln_tensor v_prod_all(void) { return kiln_prod(in_x(), 0, NULL, false); }
static kiln_tensor v_prod1(void) { return kiln_prod(in_x(), 1, k_ax1, false); }
static kiln_tensor v_prod0_keep(void) { return kiln_prod(in_x(), 1, k_ax0, true); }
static kiln_tensor v_prod_zeros(void) { return kiln_prod(in_xz(), 1, k_ax1, false); }
static kiln_tensor v_prod_y02(void) { return kiln_prod(in_y(), 2, k_ax02, false); }
static kiln_tensor v_prod_y_last(void) { return kiln_prod(in_y(), 1, k_axl, false); }
static kiln_tensor v_prod_f32(void) { return kiln_prod(kiln_from_host(kF, KILN_F32, 2, S24), 1, k_ax1, false); }
static kiln_tensor v_prod_i32(void) { return kiln_prod(kiln_from_host(kI, KILN_I32, 2, S24), 1, k_ax0, false); }
static kiln_tensor v_prod_i64_wrap(void) { return kiln_prod(kiln_from_host(kIW, KILN_I64, 2, S23), 1, k_ax1, false); }
static kiln_tensor v_prod_bool(void) { return kiln_prod(kiln_from_host(kB, KILN_BOOL, 2, S24), 1, k_ax1, false); }
static kiln_tensor v_prod_empty(void) { return kiln_prod(empty(3, 0), 1, k_ax1, false); }
static kiln_tensor v_cumsum0(void) { return kiln_cumsum(in_x(), 0); }
static kiln_tensor v_cumsum1(void) { return kiln_cumsum(in_x(), 1); }
static kiln_tensor v_cumsum_y1(void) { return kiln_cumsum(in_y(), 1); }
static kiln_tensor v_cumsum_y_last(void) { return kiln_cumsum(in_y(), -1); }
static kiln_tensor v_cumsum_f32(void) { return kiln_cumsum(kiln_from_host(kF, KILN_F32, 2, S24), 1); }
static kiln_tensor v_cumsum_i32(void) { return kiln_cumsum(kiln_from_host(kI, KILN_I32, 2, S24), 1); }
static kiln_tensor v_cumsum_bool(void) { return kiln_cumsum(kiln_from_host(kB, KILN_BOOL, 2, S24), 0); }
static kiln_tensor v_cumsum_empty(void) { return kiln_cumsum(empty(0, 3), 0); }
static kiln_tensor v_cumsum_empty_axis(void) { return kiln_cumsum(empty(2, 0), 1); }
static kiln_tensor v_cumprod1(void) { return kiln_cumprod(in_x(), 1); }
static kiln_tensor v_cumprod_zeros(void) { return kiln_cumprod(in_xz(), 1); }
static kiln_tensor v_cumprod_y0(void) { return kiln_cumprod(in_y(), 0); }
static kiln_tensor v_cumprod_i64_wrap(void) { return kiln_cumprod(kiln_from_host(kIW, KILN_I64, 2, S23), 1); }

#define V(name) {#name, v_##name}
static const struct {
  const char *name;
  case_fn fn;
} k_values[] = {
    V(prod_all),     V(prod1),          V(prod0_keep),     V(prod_zeros),      V(prod_y02),
    V(prod_y_last),  V(prod_f32),       V(prod_i32),       V(prod_i64_wrap),   V(prod_bool),
    V(prod_empty),   V(cumsum0),        V(cumsum1),        V(cumsum_y1),       V(cumsum_y_last),
    V(cumsum_f32),   V(cumsum_i32),     V(cumsum_bool),    V(cumsum_empty),    V(cumsum_empty_axis),
    V(cumprod1),     V(cumprod_zeros),  V(cumprod_y0),     V(cumprod_i64_wrap),
};
#define N_VALUES ((int)(sizeof k_values / sizeof k_values[0]))

/* gradient cases: from x (the [3,4] f64 parameter, kXZ), the gradient of
 * sum(out * w) is the script's grad_<name> */
typedef rc_fn grad_fn;
static kiln_tensor g_prod_zeros(kiln_tensor x) { return kiln_prod(x, 1, k_ax1, false); }
static kiln_tensor g_prod0(kiln_tensor x) { return kiln_prod(x, 1, k_ax0, true); }
static kiln_tensor g_cumsum1(kiln_tensor x) { return kiln_cumsum(x, 1); }
static kiln_tensor g_cumprod_zeros(kiln_tensor x) { return kiln_cumprod(x, 1); }
static kiln_tensor g_cumprod0(kiln_tensor x) { return kiln_cumprod(x, 0); }
#define G(name) {"grad_" #name, g_##name}
static const struct {
  const char *name;
  grad_fn fn;
} k_grads[] = {G(prod_zeros), G(prod0), G(cumsum1), G(cumprod_zeros), G(cumprod0)};
#define N_GRADS ((int)(sizeof k_grads / sizeof k_grads[0]))

/* floats: the order of a vectorized product may differ from NumPy's in the
 * last bits; integers exactly */
static void compare(const rc_want *w, kiln_tensor out, const char *backend) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(out, s);
  KT_CHECK_MSG(r == w->rank && !memcmp(s, w->shape, sizeof(int64_t) * (size_t)r), "%s on %s: shape differs (%s)",
               w->name, backend, kiln_last_error());
  kiln_dtype dt = kiln_dtype_of(out);
  const char *dn = dt == KILN_F64 ? "f64" : dt == KILN_F32 ? "f32" : dt == KILN_I64 ? "i64" : "?";
  KT_CHECK_MSG(!strcmp(dn, w->dt), "%s on %s: dtype %s, NumPy's %s", w->name, backend, dn, w->dt);
  double got[64];
  int64_t goti[64];
  int isf = dt != KILN_I64;
  kiln_tensor f = isf ? kiln_cast(out, KILN_F64) : out;
  if (r != w->rank || kiln_numel(f) != w->n ||
      kiln_to_host(f, isf ? (void *)got : (void *)goti, 8 * (size_t)w->n) != KILN_OK) {
    KT_FAIL("%s on %s: %s", w->name, backend, kiln_last_error());
    return;
  }
  double rtol = dt == KILN_F32 ? 1e-6 : 1e-12;
  for (int64_t i = 0; i < w->n; i++) {
    if (isf)
      KT_CHECK_MSG(fabs(got[i] - w->v[i]) <= rtol * (1e-300 + fabs(w->v[i])), "%s on %s: [%lld] = %.17g, NumPy %.17g",
                   w->name, backend, (long long)i, got[i], w->v[i]);
    else
      KT_CHECK_MSG(goti[i] == w->vi[i], "%s on %s: [%lld] = %" PRId64 ", NumPy %" PRId64, w->name, backend,
                   (long long)i, goti[i], w->vi[i]);
  }
}

KT_TEST(values_match_numpy) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++)
    for (int k = 0; k < N_VALUES; k++) {
      rc_want w;
      if (rc_read_want("scan_reference.txt", k_values[k].name, &w)) {
        KT_FAIL("%s: no reference data (run tests/data/scan_reference.py)", k_values[k].name);
        continue;
      }
      KT_CHECK(kiln_init(&(kiln_options){.backend = backends[b]}) == KILN_OK);
      compare(&w, k_values[k].fn(), backends[b]);
      KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s on %s: %s", w.name, backends[b], kiln_last_error());
      kiln_shutdown();
    }
}

/* The gradient against the script's (PyTorch's rules written out) and by
 * finite differences: the outputs are multilinear in x, so central
 * differences of step 1e-3 are exact up to rounding. */
static void gradcheck(int k, const char *backend) {
  rc_want w;
  if (rc_read_want("scan_reference.txt", k_grads[k].name, &w) || w.n != 12) {
    KT_FAIL("%s: no reference data (run tests/data/scan_reference.py)", k_grads[k].name);
    return;
  }
  double g[12];
  rc_gradcheck(w.name, k_grads[k].fn, kXZ, backend, 1e-3, 1e-9, g);
  for (int i = 0; i < 12; i++)
    KT_CHECK_MSG(fabs(g[i] - w.v[i]) <= 1e-12 * (1 + fabs(w.v[i])), "%s on %s: d/dx[%d]: backward %.17g, NumPy %.17g",
                 w.name, backend, i, g[i], w.v[i]);
}

KT_TEST(gradients_match_pytorch_rules_and_finite_differences) {
  for (int k = 0; k < N_GRADS; k++) {
    gradcheck(k, "ref");
    gradcheck(k, bc_backend_under_test());
  }
}

/* one bad call: the error names the op, the shape and this file */
static void expect_error(kiln_tensor (*bad)(void), const char *needle) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = "ref"}) == KILN_OK);
  (void)bad();
  KT_CHECK_MSG(kiln_last_status() != KILN_OK, "%s: no error", needle);
  KT_STR_CONTAINS(kiln_last_error(), needle);
  KT_STR_CONTAINS(kiln_last_error(), "test_scan.c");
  kiln_clear_error();
  kiln_shutdown();
}
static kiln_tensor b_cumsum(void) { return kiln_cumsum(in_x(), 2); }
static kiln_tensor b_cumprod(void) { return kiln_cumprod(in_x(), -3); }
static kiln_tensor b_prod_axis(void) {
  static const int two[1] = {2};
  return kiln_prod(in_x(), 1, two, false);
}
static kiln_tensor b_prod_twice(void) {
  static const int twice[2] = {1, -1};
  return kiln_prod(in_x(), 2, twice, false);
}

KT_TEST(argument_errors_name_the_op) {
  expect_error(b_cumsum, "cumsum: axis 2 is out of range for shape [3,4]");
  expect_error(b_cumprod, "cumprod: axis -3 is out of range for shape [3,4]");
  expect_error(b_prod_axis, "prod: axis 2 is out of range for shape [3,4]");
  expect_error(b_prod_twice, "prod: axis -1 appears more than once");
}

/* a 0-d scan is its value (torch.cumsum of a scalar) */
KT_TEST(scan_of_a_scalar) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = bc_backend_under_test()}) == KILN_OK);
  KT_NEAR(kiln_item_f64(kiln_cumsum(kiln_full(KILN_F64, 0, NULL, 2.5), 0)), 2.5, 0);
  KT_NEAR(kiln_item_f64(kiln_cumprod(kiln_full(KILN_F64, 0, NULL, -1.5), -1)), -1.5, 0);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(values_match_numpy), KT_CASE(gradients_match_pytorch_rules_and_finite_differences),
        KT_CASE(argument_errors_name_the_op), KT_CASE(scan_of_a_scalar))
