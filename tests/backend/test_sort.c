/* sort, argsort, topk, scatter, scatter_add, index_add and index_put on the
 * ref backend and the backend under test against NumPy values
 * (tests/data/sort_reference.py writes sort_reference.txt): ties, NaN,
 * descending, k at its edges, duplicate indices; the gradient of sort and
 * topk values by finite differences; argument errors and out-of-range
 * indices at run time (the op, the index, the size and this file). */
#include "backend/ref_cases.h"

#define NAN_ NAN
static const double kXS[12] = {3.0, 1.0, 2.0, 1.0, NAN_, -1.0, NAN_, 0.0, 2.0, 2.0, -0.0, 0.0};
static const int32_t kIS[8] = {5, INT32_MIN, 7, INT32_MIN, INT32_MAX, 0, INT32_MAX, -1};
static const double kX[12] = {0.3, -1.2, 2.5, 0.7, -3.1, 1.9, 0.05, -0.4, 4.2, -2.6, 1.1, 3.3};
static const int64_t kIDX0[8] = {0, 2, 2, 1, 2, 2, 0, 1}, kIDX1[6] = {3, 0, 1, 1, 2, 3};
static const int32_t kIDXI[8] = {1, 1, 0, 3, 0, 2, 2, 2};
static const int64_t kIDXADD[3] = {3, 0, 3}, kIDXPUT[3] = {2, 0, 2};
static const int64_t S34[2] = {3, 4}, S24[2] = {2, 4}, S32[2] = {3, 2}, S43[2] = {4, 3}, S3[1] = {3}, S2[1] = {2},
                     S4[1] = {4};

static kiln_tensor xs(void) { return kiln_from_host(kXS, KILN_F64, 2, S34); }
static kiln_tensor is(void) { return kiln_from_host(kIS, KILN_I32, 2, S24); }
static kiln_tensor src(void) { /* arange(12) * 0.5 + 1 */
  return kiln_add_c(kiln_mul_c(kiln_reshape(kiln_arange(KILN_F64, 0, 12, 1), 2, S34), 0.5), 1.0);
}
static kiln_tensor sort_v(kiln_tensor x, int axis, bool desc) {
  kiln_tensor v;
  kiln_sort(x, axis, desc, &v, NULL);
  return v;
}
static kiln_tensor sort_i(kiln_tensor x, int axis, bool desc) {
  kiln_tensor i;
  kiln_sort(x, axis, desc, NULL, &i);
  return i;
}
static kiln_tensor topk_v(kiln_tensor x, int64_t k, int axis, bool largest) {
  kiln_tensor v, i;
  kiln_topk(x, k, axis, largest, &v, &i);
  return v;
}
static kiln_tensor topk_i(kiln_tensor x, int64_t k, int axis, bool largest) {
  kiln_tensor v, i;
  kiln_topk(x, k, axis, largest, &v, &i);
  return i;
}

/* Each case from x (the [3,4] f64 parameter of the gradient check). */
typedef rc_fn case_fn;
static kiln_tensor c_sort1_vals(kiln_tensor x) { return (void)x, sort_v(xs(), 1, false); }
static kiln_tensor c_sort_x_desc(kiln_tensor x) { return sort_v(x, 1, true); }
static kiln_tensor c_sort1_idx(kiln_tensor x) { return (void)x, sort_i(xs(), 1, false); }
static kiln_tensor c_sort1_desc_vals(kiln_tensor x) { return (void)x, sort_v(xs(), -1, true); }
static kiln_tensor c_sort1_desc_idx(kiln_tensor x) { return (void)x, kiln_argsort(xs(), 1, true); }
static kiln_tensor c_sort0_idx(kiln_tensor x) { return (void)x, kiln_argsort(xs(), 0, false); }
static kiln_tensor c_sort0_desc_idx(kiln_tensor x) { return (void)x, sort_i(xs(), -2, true); }
static kiln_tensor c_argsort_i32(kiln_tensor x) { return (void)x, kiln_argsort(is(), 1, false); }
static kiln_tensor c_argsort_i32_desc(kiln_tensor x) { return (void)x, kiln_argsort(is(), 1, true); }
static kiln_tensor c_sort_i32_vals(kiln_tensor x) { return (void)x, sort_v(is(), 0, true); }
static kiln_tensor c_argsort_bool_desc(kiln_tensor x) { return (void)x, kiln_argsort(kiln_gt_c(xs(), 1.0), 1, true); }
static kiln_tensor c_topk2_vals(kiln_tensor x) { return (void)x, topk_v(xs(), 2, 1, true); }
static kiln_tensor c_topk2_idx(kiln_tensor x) { return (void)x, topk_i(xs(), 2, -1, true); }
static kiln_tensor c_topk0_vals(kiln_tensor x) { return (void)x, topk_v(xs(), 0, 1, true); }
static kiln_tensor c_topk4_small_idx(kiln_tensor x) { return (void)x, topk_i(xs(), 4, 1, false); }
static kiln_tensor c_topk_axis0_vals(kiln_tensor x) { return topk_v(x, 3, 0, true); }
static kiln_tensor c_topk_axis0_idx(kiln_tensor x) { return topk_i(x, 2, 0, false); }
static kiln_tensor c_scatter0(kiln_tensor x) { return kiln_scatter(x, 0, kiln_from_host(kIDX0, KILN_I64, 2, S24), src()); }
static kiln_tensor c_scatter_add0(kiln_tensor x) {
  return kiln_scatter_add(x, 0, kiln_from_host(kIDX0, KILN_I64, 2, S24), src());
}
static kiln_tensor c_scatter1(kiln_tensor x) { return kiln_scatter(x, 1, kiln_from_host(kIDX1, KILN_I64, 2, S32), src()); }
static kiln_tensor c_scatter_add1(kiln_tensor x) {
  return kiln_scatter_add(x, -1, kiln_from_host(kIDX1, KILN_I64, 2, S32), kiln_mul_c(src(), 1.0));
}
static kiln_tensor c_scatter_add_i32(kiln_tensor x) {
  return (void)x, kiln_scatter_add(is(), 1, kiln_from_host(kIDXI, KILN_I32, 2, S24), is());
}
static kiln_tensor c_index_add1(kiln_tensor x) {
  return kiln_index_add(x, 1, kiln_from_host(kIDXADD, KILN_I64, 1, S3), kiln_slice(src(), 1, 0, 3, 1));
}
static kiln_tensor c_index_put(kiln_tensor x) {
  return kiln_index_put(x, kiln_from_host(kIDXPUT, KILN_I64, 1, S3), src(), false);
}
static kiln_tensor c_index_put_acc(kiln_tensor x) {
  return kiln_index_put(x, kiln_from_host(kIDXPUT, KILN_I64, 1, S3), src(), true);
}
static kiln_tensor c_index_put_bcast(kiln_tensor x) { /* values [4] broadcast to [2, 4] */
  return kiln_index_put(x, kiln_from_host(kIDXPUT, KILN_I64, 1, S2), kiln_reshape(kiln_slice(src(), 0, 0, 1, 1), 1, S4),
                        true);
}

/* grad: the case's output depends on x (a gradient is checked) */
#define C(name, grad) {#name, c_##name, grad}
static const struct {
  const char *name;
  case_fn fn;
  int grad;
} k_cases[] = {
    C(sort1_vals, 0),     C(sort_x_desc, 1),       C(sort1_idx, 0),         C(sort1_desc_vals, 0), C(sort1_desc_idx, 0),
    C(sort0_idx, 0),      C(sort0_desc_idx, 0),    C(argsort_i32, 0),     C(argsort_i32_desc, 0),
    C(sort_i32_vals, 0),  C(argsort_bool_desc, 0),  C(topk2_vals, 0),        C(topk2_idx, 0),       C(topk0_vals, 0),
    C(topk4_small_idx, 0), C(topk_axis0_vals, 1),  C(topk_axis0_idx, 0),  C(scatter0, 1),
    C(scatter_add0, 1),   C(scatter1, 1),          C(scatter_add1, 1),    C(scatter_add_i32, 0),
    C(index_add1, 1),     C(index_put, 1),         C(index_put_acc, 1),   C(index_put_bcast, 1),
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))

static void check_case(int k, const char *backend) {
  rc_want w;
  if (rc_read_want("sort_reference.txt", k_cases[k].name, &w)) {
    KT_FAIL("%s: no reference data (run tests/data/sort_reference.py)", k_cases[k].name);
    return;
  }
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend}) == KILN_OK);
  /* exact, signed zeros included (a sort moves values, it computes none) */
  rc_check_exact(&w, k_cases[k].fn(kiln_from_host(kX, KILN_F64, 2, S34)), backend, 1);
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
static void expect_error(const char *backend, kiln_tensor (*bad)(kiln_tensor), const char *needle) {
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend}) == KILN_OK);
  kiln_tensor out = bad(kiln_from_host(kX, KILN_F64, 2, S34));
  double tmp[64];
  if (kiln_last_status() == KILN_OK && kiln_numel(out) <= 64) /* run-time errors: found when the graph runs */
    (void)kiln_to_host(kiln_cast(out, KILN_F64), tmp, sizeof(double) * (size_t)kiln_numel(out));
  KT_CHECK_MSG(kiln_last_status() != KILN_OK, "%s on %s: no error", needle, backend);
  KT_STR_CONTAINS(kiln_last_error(), needle);
  KT_STR_CONTAINS(kiln_last_error(), "test_sort.c");
  kiln_clear_error();
  kiln_shutdown();
}
static const int64_t kBad0[8] = {0, 1, 2, 3, 0, 1, 2, 0}, kNeg[3] = {0, -1, 2};
static kiln_tensor b_topk(kiln_tensor x) { return topk_v(x, 5, 1, true); }
static kiln_tensor b_sort_axis(kiln_tensor x) { return sort_v(x, 2, false); }
static kiln_tensor b_scatter_shape(kiln_tensor x) {
  return kiln_scatter(x, 0, kiln_from_host(kIDX0, KILN_I64, 2, S24), kiln_slice(src(), 1, 0, 3, 1));
}
static kiln_tensor b_scatter_dtype(kiln_tensor x) {
  return kiln_scatter(x, 0, kiln_from_host(kIDX0, KILN_I64, 2, S24), kiln_cast(src(), KILN_F32));
}
static kiln_tensor b_scatter_range(kiln_tensor x) {
  return kiln_scatter(x, 0, kiln_from_host(kBad0, KILN_I64, 2, S24), src());
}
static kiln_tensor b_scatter_add_range(kiln_tensor x) {
  return kiln_scatter_add(x, 0, kiln_from_host(kBad0, KILN_I64, 2, S24), src());
}
static kiln_tensor b_index_put_neg(kiln_tensor x) {
  return kiln_index_put(x, kiln_from_host(kNeg, KILN_I64, 1, S3), src(), false);
}
static kiln_tensor b_index_add_shape(kiln_tensor x) {
  return kiln_index_add(x, 1, kiln_from_host(kIDXADD, KILN_I64, 1, S3), kiln_reshape(src(), 2, S43));
}
static const int64_t kTwo[2] = {0, 2}, S23[2] = {2, 3};
static kiln_tensor b_index_put_bcast(kiln_tensor x) { /* values [2,3] for x[[0,2]] of shape [2,4] */
  return kiln_index_put(x, kiln_from_host(kTwo, KILN_I64, 1, S2), kiln_zeros(KILN_F64, 2, S23), true);
}
static kiln_tensor b_index_2d(kiln_tensor x) { return kiln_index_put(x, kiln_from_host(kIDX0, KILN_I64, 2, S24), x, 0); }

KT_TEST(errors_name_the_op_and_line) {
  const char *be[2] = {"ref", bc_backend_under_test()};
  for (int i = 0; i < 2; i++) {
    expect_error(be[i], b_topk, "topk: k = 5 is out of range [0, 4] for axis 1 of shape [3,4]");
    expect_error(be[i], b_sort_axis, "sort: axis 2 is out of range for a tensor of rank 2");
    expect_error(be[i], b_scatter_shape, "scatter: index shape [2,4] must have the rank of the tensor [3,4]");
    expect_error(be[i], b_scatter_dtype, "scatter: values are f32, the tensor f64");
    expect_error(be[i], b_scatter_range, "scatter: index 3 is out of range for axis 0 of size 3");
    expect_error(be[i], b_scatter_add_range, "scatter_add: index 3 is out of range for axis 0 of size 3");
    expect_error(be[i], b_index_put_neg, "scatter: index -1 is out of range for axis 0 of size 3");
    expect_error(be[i], b_index_add_shape, "index_add: source shape [4,3] must be the tensor's [3,4]");
    expect_error(be[i], b_index_put_bcast, "index_put: values of shape [2,3] do not broadcast to [2,4] (x [3,4]");
    expect_error(be[i], b_index_2d, "index_put: the index must be a 1-D i32 or i64 tensor, got i64 [2,4]");
  }
}

KT_MAIN(KT_CASE(cases_match_numpy), KT_CASE(gradients_by_finite_differences), KT_CASE(errors_name_the_op_and_line))
