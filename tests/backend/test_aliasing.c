/* Host memory, in-place updates and views, on the ref backend and the
 * backend under test, against exact values:
 *   - bool host bytes other than 0 and 1 read as true, as NumPy's and
 *     PyTorch's bool views of the same bytes (np.uint8 array .view(bool)):
 *     sum 4, not 259; cast 1, not 255; == true;
 *   - a backward that would reach the value a requiring-grad tensor had
 *     before a kiln_assign is an error naming the assign (PyTorch: "a
 *     variable needed for gradient computation has been modified by an
 *     inplace operation"), not a gradient without that use's part;
 *     backward then assign, and a second forward/backward after the
 *     assign in the same step, still work;
 *   - mistakes at the host boundary (a NULL shape, a short destination) and
 *     in expand's target name what is wrong. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>

#include "backend/backend_compare.h"

static const uint8_t bool_bytes[8] = {0, 1, 2, 255, 1, 0, 128, 0};
static const int64_t s8[1] = {8}, s24[2] = {2, 4};

static void prog_bool_bytes(bc_result *r, const void *arg) {
  (void)arg;
  kiln_tensor b = kiln_from_host(bool_bytes, KILN_BOOL, 1, s8);
  bc_emit(r, b, 0, 0, "bool");
  bc_emit(r, kiln_sum(b, 0, NULL, false), 0, 0, "sum");
  bc_emit(r, kiln_cast(b, KILN_I32), 0, 0, "cast i32");
  bc_emit(r, kiln_cast(b, KILN_F32), 0, 0, "cast f32");
  bc_emit(r, kiln_eq_c(b, 1), 0, 0, "eq true");
  bc_emit(r, kiln_logical_not(b), 0, 0, "not");
  bc_emit(r, kiln_transpose(kiln_reshape(b, 2, s24), 0, 1), 0, 0, "transposed");
  bc_emit(r, kiln_where(b, kiln_full(KILN_I32, 1, s8, 7), kiln_zeros(KILN_I32, 1, s8)), 0, 0,
          "where");
}

KT_TEST(bool_host_bytes_other_than_0_and_1_are_true) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  static bc_result res;
  for (int k = 0; k < 2; k++) {
    bc_run(backends[k], prog_bool_bytes, NULL, &res);
    KT_CHECK_MSG(res.status == KILN_OK && res.n == 8, "%s: %s", backends[k], res.err);
    if (res.status != KILN_OK || res.n != 8) continue;
    int64_t truth[8], count = 0;
    for (int i = 0; i < 8; i++) count += truth[i] = bool_bytes[i] != 0;
    KT_CHECK_MSG(bc_get_i(&res.o[1], 0) == count, "%s: sum of bool bytes = %lld, NumPy's bool view gives %lld",
                 backends[k], (long long)bc_get_i(&res.o[1], 0), (long long)count);
    for (int i = 0; i < 8; i++) {
      const char *b = backends[k];
      KT_CHECK_MSG(((const uint8_t *)res.o[0].data)[i] == truth[i], "%s: bool byte %d reads back as %d, want %d", b,
                   bool_bytes[i], ((const uint8_t *)res.o[0].data)[i], (int)truth[i]);
      KT_CHECK_MSG(bc_get_i(&res.o[2], i) == truth[i], "%s: i32 of bool byte %d = %lld", b, bool_bytes[i],
                   (long long)bc_get_i(&res.o[2], i));
      KT_CHECK_MSG(bc_get_f(&res.o[3], i) == (double)truth[i], "%s: f32 of bool byte %d = %g", b, bool_bytes[i],
                   bc_get_f(&res.o[3], i));
      KT_CHECK_MSG(bc_get_i(&res.o[4], i) == truth[i], "%s: bool byte %d == true is %lld", b, bool_bytes[i],
                   (long long)bc_get_i(&res.o[4], i));
      KT_CHECK_MSG(bc_get_i(&res.o[5], i) == !truth[i], "%s: not of bool byte %d is %lld", b, bool_bytes[i],
                   (long long)bc_get_i(&res.o[5], i));
      /* transposed [2,4] -> [4,2]: element (c, r) is byte r*4 + c */
      KT_CHECK_MSG(((const uint8_t *)res.o[6].data)[(i % 4) * 2 + i / 4] == truth[i],
                   "%s: transposed bool byte %d reads %d", b, bool_bytes[i],
                   ((const uint8_t *)res.o[6].data)[(i % 4) * 2 + i / 4]);
      KT_CHECK_MSG(bc_get_i(&res.o[7], i) == 7 * truth[i], "%s: where on bool byte %d gives %lld", b, bool_bytes[i],
                   (long long)bc_get_i(&res.o[7], i));
    }
    bc_result_free(&res);
  }
}

static double host_f(kiln_tensor t, int i) {
  float v[8] = {0};
  if (kiln_numel(t) > 8 || kiln_to_host(t, v, sizeof(float) * (size_t)kiln_numel(t)) != KILN_OK) return NAN;
  return v[i];
}

static const float p0[4] = {1, 2, 3, 4};
static const int64_t s4[1] = {4};

static kiln_tensor new_param(void) {
  kiln_tensor p = kiln_param(kiln_from_host(p0, KILN_F32, 1, s4));
  kiln_requires_grad(p);
  kiln_mark_step();
  return p;
}

/* loss = sum(p*p) traced, p assigned p + 1, then loss + sum(3p) differentiated:
 * kiln's gradient is d/d(the new p) and would be 3 (the p*p use lost) */
KT_TEST(backward_through_a_value_replaced_by_assign_is_an_error) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int k = 0; k < 2; k++) {
    KT_CHECK(kiln_init(&(kiln_options){.backend = backends[k]}) == KILN_OK);
    kiln_tensor p = new_param();
    kiln_tensor y = kiln_sum(kiln_mul(p, p), 0, NULL, false);
    kiln_assign(p, kiln_add_c(p, 1));
    kiln_tensor loss = kiln_add(y, kiln_sum(kiln_mul_c(p, 3), 0, NULL, false));
    KT_CHECK(kiln_last_status() == KILN_OK);
    kiln_status st = kiln_backward(loss);
    KT_CHECK_MSG(st == KILN_ERR_INVALID_ARGUMENT, "%s: backward after assign returned %s, grad %g", backends[k],
                 kiln_status_name(st), kiln_is_valid(kiln_grad(p)) ? host_f(kiln_grad(p), 0) : NAN);
    KT_STR_CONTAINS(kiln_last_error(), "before kiln_assign at");
    KT_STR_CONTAINS(kiln_last_error(), "test_aliasing.c");
    KT_STR_CONTAINS(kiln_last_error(), "f32 [4]");
    KT_CHECK(!kiln_is_valid(kiln_grad(p))); /* nothing accumulated */
    kiln_clear_error();
    /* a read of the replaced value's dependent in between changes nothing */
    kiln_mark_step();
    kiln_tensor q = new_param();
    kiln_tensor z = kiln_mul_c(q, 2);
    kiln_assign(q, kiln_mul_c(q, 0.5));
    KT_NEAR(host_f(z, 3), 8.0, 0);
    KT_CHECK(kiln_backward(kiln_sum(z, 0, NULL, false)) == KILN_ERR_INVALID_ARGUMENT);
    kiln_clear_error();
    kiln_shutdown();
  }
}

/* The orders that are right: backward then assign; a second forward and
 * backward of the new value in the same step (two updates per step); and
 * an assign of a tensor the loss does not use. Exact in f32. */
KT_TEST(backward_then_assign_and_a_second_update_in_one_step_still_work) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int k = 0; k < 2; k++) {
    KT_CHECK(kiln_init(&(kiln_options){.backend = backends[k]}) == KILN_OK);
    kiln_tensor p = new_param(), other = kiln_param(kiln_from_host(p0, KILN_F32, 1, s4));
    kiln_requires_grad(other);
    kiln_tensor u = kiln_keep(kiln_mul(other, other)); /* other's old value, used by nothing differentiated below */
    kiln_assign(other, kiln_add_c(other, 1));
    KT_CHECK(kiln_backward(kiln_sum(kiln_mul(p, p), 0, NULL, false)) == KILN_OK); /* grad 2p */
    kiln_assign(p, kiln_sub(p, kiln_mul_c(kiln_grad(p), 0.25)));                 /* p/2 */
    kiln_zero_grad(p);
    kiln_tensor cube = kiln_mul(kiln_mul(p, p), p);
    KT_CHECK(kiln_backward(kiln_sum(cube, 0, NULL, false)) == KILN_OK); /* grad 3 (p/2)^2 */
    kiln_assign(p, kiln_sub(p, kiln_grad(p)));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    for (int i = 0; i < 4; i++) {
      double h = p0[i] / 2;
      KT_NEAR(host_f(p, i), h - 3 * h * h, 0);
      KT_NEAR(host_f(u, i), p0[i] * p0[i], 0);
      KT_NEAR(host_f(other, i), p0[i] + 1, 0);
    }
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s: %s", backends[k], kiln_last_error());
    kiln_clear_error();
    kiln_shutdown();
  }
}

/* Mistakes at the host boundary and in view arguments name what is wrong */
KT_TEST(host_transfer_and_view_mistakes_name_the_problem) {
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  float buf[4] = {0};
  KT_CHECK(!kiln_is_valid(kiln_from_host(buf, KILN_F32, 1, NULL)));
  KT_STR_CONTAINS(kiln_last_error(), "from_host: the shape of rank 1 is NULL");
  kiln_clear_error();
  KT_CHECK(!kiln_is_valid(kiln_full(KILN_F32, 9, s4, 0.0)));
  KT_STR_CONTAINS(kiln_last_error(), "full: rank 9 is out of range [0,8]");
  kiln_clear_error();
  kiln_tensor x = kiln_zeros(KILN_F32, 1, s4);
  static const int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
  KT_CHECK(!kiln_is_valid(kiln_expand(x, 9, s9)));
  KT_STR_CONTAINS(kiln_last_error(), "expand: the target rank 9 is out of range [0,8]");
  kiln_clear_error();
  KT_EQ_INT(kiln_to_host(x, buf, 8), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "to_host: destination has 8 bytes, the tensor needs 16");
  kiln_clear_error();
  kiln_shutdown();
}

KT_MAIN(KT_CASE(bool_host_bytes_other_than_0_and_1_are_true), KT_CASE(host_transfer_and_view_mistakes_name_the_problem),
        KT_CASE(backward_through_a_value_replaced_by_assign_is_an_error),
        KT_CASE(backward_then_assign_and_a_second_update_in_one_step_still_work))
