/* The composed ops (clamp, argmin, stack, flip, roll, tril/triu, reflect and
 * replicate padding) on the ref backend and the backend under test against
 * NumPy values (tests/data/compose_reference.py writes
 * compose_reference.txt), their gradients by finite differences on both, and
 * their argument errors (the op's name and the caller's line). */
#include "backend/ref_cases.h"

static const double kX[12] = {0.3, -1.2, 2.5, 0.7, -3.1, 1.9, 0.05, -0.4, 4.2, -2.6, 1.1, 3.3};
static const double kXN[12] = {2.0, -1.0, -1.0, 5.0, 0.5, NAN, -7.0, 0.5, 3.0, 3.0, 3.0, 3.0};
static const int32_t kI[8] = {5, INT32_MIN, 7, INT32_MIN, INT32_MAX, 0, -1, INT32_MAX};
static const int64_t S34[2] = {3, 4}, S24[2] = {2, 4}, S234[3] = {2, 3, 4};

static kiln_tensor in_y(void) {
  static double y[24];
  for (int i = 0; i < 24; i++) y[i] = i * 0.5 - 3.0;
  return kiln_from_host(y, KILN_F64, 3, S234);
}

/* Each case from x (the [3,4] f64 parameter of the gradient check). */
typedef rc_fn case_fn;
static kiln_tensor c_clamp(kiln_tensor x) { return kiln_clamp(x, -2.0, 3.0); }
static kiln_tensor c_clamp_lo(kiln_tensor x) { return kiln_clamp(x, -2.0, INFINITY); }
static kiln_tensor c_clamp_int(kiln_tensor x) {
  (void)x;
  return kiln_clamp(kiln_from_host(kI, KILN_I32, 2, S24), -3, 6);
}
static kiln_tensor c_argmin0(kiln_tensor x) {
  (void)x;
  return kiln_argmin(kiln_from_host(kXN, KILN_F64, 2, S34), 0, false);
}
static kiln_tensor c_argmin1_keep(kiln_tensor x) {
  (void)x;
  return kiln_argmin(kiln_from_host(kXN, KILN_F64, 2, S34), 1, true);
}
static kiln_tensor c_argmin_i32(kiln_tensor x) {
  (void)x;
  return kiln_argmin(kiln_from_host(kI, KILN_I32, 2, S24), 1, false);
}
static kiln_tensor c_stack0(kiln_tensor x) {
  kiln_tensor p[2] = {x, kiln_mul_c(x, 2)};
  return kiln_stack(2, p, 0);
}
static kiln_tensor c_stack2(kiln_tensor x) {
  kiln_tensor p[3] = {x, kiln_mul_c(x, 2), kiln_neg(x)};
  return kiln_stack(3, p, 2);
}
static kiln_tensor c_stack_neg(kiln_tensor x) {
  kiln_tensor p[2] = {x, kiln_mul_c(x, 2)};
  return kiln_stack(2, p, -2);
}
static const int k_ax01[2] = {0, 1}, k_axl[1] = {-1};
static kiln_tensor c_flip01(kiln_tensor x) { return kiln_flip(x, 2, k_ax01); }
static kiln_tensor c_flip_last(kiln_tensor x) {
  (void)x;
  return kiln_flip(in_y(), 1, k_axl);
}
static kiln_tensor c_roll1(kiln_tensor x) { return kiln_roll(x, 1, 1); }
static kiln_tensor c_roll_neg(kiln_tensor x) { return kiln_roll(x, -5, 0); }
static kiln_tensor c_tril0(kiln_tensor x) {
  (void)x;
  return kiln_tril(in_y(), 0);
}
static kiln_tensor c_tril_m1(kiln_tensor x) {
  (void)x;
  return kiln_tril(in_y(), -1);
}
static kiln_tensor c_triu1(kiln_tensor x) {
  (void)x;
  return kiln_triu(in_y(), 1);
}
static kiln_tensor c_triu_m2(kiln_tensor x) { return kiln_triu(x, -2); }
static kiln_tensor c_pad_reflect(kiln_tensor x) {
  static const int64_t lo[2] = {1, 2}, hi[2] = {2, 3};
  return kiln_pad_with(x, lo, hi, KILN_PAD_REFLECT, 0);
}
static kiln_tensor c_pad_replicate(kiln_tensor x) {
  static const int64_t lo[2] = {2, 0}, hi[2] = {1, 4};
  return kiln_pad_with(x, lo, hi, KILN_PAD_REPLICATE, 0);
}
static kiln_tensor c_pad_reflect3(kiln_tensor x) {
  (void)x;
  static const int64_t lo[3] = {0, 2, 1}, hi[3] = {0, 1, 0};
  return kiln_pad_with(in_y(), lo, hi, KILN_PAD_REFLECT, 0);
}

static kiln_tensor c_pad_crop(kiln_tensor x) {
  static const int64_t lo[2] = {-1, 2}, hi[2] = {1, -1};
  return kiln_pad(x, lo, hi, 9.0);
}
static kiln_tensor c_expand_keep(kiln_tensor x) {
  static const int64_t shape[2] = {-1, 5};
  return kiln_expand(kiln_slice(x, 1, 0, 1, 1), 2, shape);
}

/* grad: the case's output depends on x (a gradient is checked) */
#define C(name, grad) {#name, c_##name, grad}
static const struct {
  const char *name;
  case_fn fn;
  int grad;
} k_cases[] = {
    C(clamp, 1),       C(clamp_lo, 1),   C(clamp_int, 0),   C(argmin0, 0),     C(argmin1_keep, 0),
    C(argmin_i32, 0),  C(stack0, 1),     C(stack2, 1),      C(stack_neg, 1),   C(flip01, 1),
    C(flip_last, 0),   C(roll1, 1),      C(roll_neg, 1),    C(tril0, 0),       C(tril_m1, 0),
    C(triu1, 0),       C(triu_m2, 1),    C(pad_reflect, 1), C(pad_replicate, 1), C(pad_reflect3, 0),
    C(pad_crop, 1),    C(expand_keep, 1),
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))

static void check_case(int k, const char *backend) {
  rc_want w;
  if (rc_read_want("compose_reference.txt", k_cases[k].name, &w)) {
    KT_FAIL("%s: no reference data (run tests/data/compose_reference.py)", k_cases[k].name);
    return;
  }
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend}) == KILN_OK);
  /* exact */
  rc_check_exact(&w, k_cases[k].fn(kiln_from_host(kX, KILN_F64, 2, S34)), backend, 0);
  kiln_shutdown();
}

KT_TEST(cases_match_numpy) {
  for (int k = 0; k < N_CASES; k++) {
    check_case(k, "ref");
    check_case(k, bc_backend_under_test());
  }
}

KT_TEST(gradients_by_finite_differences) {
  for (int k = 0; k < N_CASES; k++)
    if (k_cases[k].grad) {
      double g[12];
      rc_gradcheck(k_cases[k].name, k_cases[k].fn, kX, "ref", 1e-6, 1e-6, g);
      rc_gradcheck(k_cases[k].name, k_cases[k].fn, kX, bc_backend_under_test(), 1e-6, 1e-6, g);
    }
}

/* one bad call: the error names the op and this file */
static void expect_error(kiln_tensor (*bad)(kiln_tensor), const char *needle) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = "ref"}) == KILN_OK);
  kiln_tensor out = bad(kiln_from_host(kX, KILN_F64, 2, S34));
  (void)out;
  KT_CHECK_MSG(kiln_last_status() != KILN_OK, "%s: no error", needle);
  KT_STR_CONTAINS(kiln_last_error(), needle);
  KT_STR_CONTAINS(kiln_last_error(), "test_compose.c");
  kiln_clear_error();
  kiln_shutdown();
}
static kiln_tensor b_clamp(kiln_tensor x) { return kiln_clamp(x, 2, 1); }
static kiln_tensor b_stack(kiln_tensor x) {
  kiln_tensor p[2] = {x, kiln_transpose(x, 0, 1)};
  return kiln_stack(2, p, 0);
}
static kiln_tensor b_stack_axis(kiln_tensor x) {
  kiln_tensor p[1] = {x};
  return kiln_stack(1, p, 3);
}
static kiln_tensor b_flip(kiln_tensor x) {
  static const int twice[2] = {1, -1};
  return kiln_flip(x, 2, twice);
}
static kiln_tensor b_roll(kiln_tensor x) { return kiln_roll(x, 1, 2); }
static kiln_tensor b_tril(kiln_tensor x) { return kiln_tril(kiln_reshape(x, 1, (int64_t[]){12}), 0); }
static kiln_tensor b_reflect(kiln_tensor x) {
  static const int64_t lo[2] = {3, 0}, hi[2] = {0, 0};
  return kiln_pad_with(x, lo, hi, KILN_PAD_REFLECT, 0);
}
static kiln_tensor b_argmin(kiln_tensor x) { return kiln_argmin(x, -3, false); }

KT_TEST(argument_errors_name_the_op) {
  expect_error(b_clamp, "clamp: the lower bound 2 is above the upper bound 1");
  expect_error(b_stack, "stack: tensor 1 has shape [4,3], tensor 0 has [3,4]");
  expect_error(b_stack_axis, "stack: axis 3 is out of range for a tensor of rank 3");
  expect_error(b_flip, "flip: axis -1 is named twice");
  expect_error(b_roll, "roll: axis 2 is out of range");
  expect_error(b_tril, "tril: needs a tensor of rank >= 2 (got rank 1)");
  expect_error(b_reflect, "pad (reflect): padding (3, 0) on axis 0 of size 3: must be in [0, 2]");
  expect_error(b_argmin, "argmin: axis -3 is out of range");
}

KT_MAIN(KT_CASE(cases_match_numpy), KT_CASE(gradients_by_finite_differences), KT_CASE(argument_errors_name_the_op))
