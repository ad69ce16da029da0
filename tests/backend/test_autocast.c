/* Autocast (mixed precision, include/kiln/kiln.h) on the ref backend and
 * the backend under test:
 *   - which ops run in 16 bits (the dtypes of their results), nesting,
 *     a region with autocast off, and the errors;
 *   - matmul in a bf16 region against the f64 products of the
 *     bf16-rounded operands (rounded here, independently of kiln): products
 *     of bf16 values are exact in f32, only the order of the sums differs;
 *   - a two-layer network's loss and f32 parameter gradients in a bf16
 *     region against the same network in f32, within bf16's precision;
 *     and ref against the backend under test. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "backend/backend_compare.h"

enum { NB = 24, NI = 40, NH = 32, NO = 10 };

/* round to nearest even, from the format's definition */
static double host_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  memcpy(&r, &u, 4);
  return r;
}

/* arg: the region's dtype (KILN_F32: no region) */
static void prog_net(bc_result *r, const void *arg) {
  kiln_dtype amp = *(const kiln_dtype *)arg;
  int64_t sx[2] = {NB, NI}, s1[2] = {NH, NI}, sb1[1] = {NH}, s2[2] = {NO, NH}, sb2[1] = {NO};
  kiln_tensor x = bc_input(KILN_F32, 2, sx, 11, 0), w1 = bc_input(KILN_F32, 2, s1, 12, 0);
  kiln_tensor b1 = bc_input(KILN_F32, 1, sb1, 13, 0), w2 = bc_input(KILN_F32, 2, s2, 14, 0);
  kiln_tensor b2 = bc_input(KILN_F32, 1, sb2, 15, 0);
  int64_t tgt[NB];
  for (int i = 0; i < NB; i++) tgt[i] = (i * 7) % NO;
  kiln_tensor y = kiln_from_host(tgt, KILN_I64, 1, (int64_t[]){NB});
  kiln_tensor ps[4] = {w1, b1, w2, b2};
  for (int i = 0; i < 4; i++) kiln_requires_grad(ps[i]);
  if (amp != KILN_F32) kiln_autocast_begin(amp);
  kiln_tensor mm = kiln_matmul(x, kiln_transpose(w1, 0, 1));
  kiln_tensor h = kiln_relu(kiln_linear_apply(x, w1, b1));
  kiln_tensor logits = kiln_linear_apply(kiln_mul_c(h, 0.25), w2, b2);
  kiln_tensor sm = kiln_softmax(logits, -1);
  kiln_tensor loss = kiln_cross_entropy(logits, y, -100, 0.0);
  if (amp != KILN_F32) kiln_autocast_end();
  kiln_backward(loss);
  /* bf16 intermediates may round differently on the two backends (f32
   * sums in another order), and the gradients follow them */
  double rt = amp == KILN_F32 ? 0 : 2e-2, at = amp == KILN_F32 ? 0 : 2e-3;
  bc_emit(r, mm, 0, 0, "matmul");
  bc_emit(r, logits, 0, 0, "logits");
  bc_emit(r, sm, rt, at, "softmax");
  bc_emit(r, loss, rt, at, "loss");
  const char *names[4] = {"w1", "b1", "w2", "b2"};
  for (int i = 0; i < 4; i++) bc_emit(r, kiln_grad(ps[i]), rt, at, "grad %s", names[i]);
}

static double rel_err(const bc_out *a, const bc_out *b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a->numel; i++) {
    double d = bc_get_f(a, i) - bc_get_f(b, i);
    num += d * d;
    den += bc_get_f(b, i) * bc_get_f(b, i);
  }
  return sqrt(num / (den > 0 ? den : 1));
}

static void check_matmul_host(const char *backend, const bc_out *o) {
  float *x = bc_host_data(KILN_F32, NB * NI, 11, 0), *w = bc_host_data(KILN_F32, NH * NI, 12, 0);
  int bad = 0;
  for (int i = 0; i < NB && !bad; i++)
    for (int j = 0; j < NH && !bad; j++) {
      double s = 0, mag = 0;
      for (int q = 0; q < NI; q++) {
        double p = host_bf16(x[i * NI + q]) * host_bf16(w[j * NI + q]);
        s += p, mag += fabs(p);
      }
      /* f32 sums in another order, then one rounding to bf16 */
      if (fabs(bc_get_f(o, i * NH + j) - s) > mag / 256 + 1e-6) {
        KT_FAIL("%s: bf16 autocast matmul (%d, %d) = %.9g, the bf16-rounded operands give %.9g", backend, i, j,
                bc_get_f(o, i * NH + j), s);
        bad = 1;
      }
    }
  free(x);
  free(w);
}

KT_TEST(bf16_network_matches_f32_within_bf16_precision) {
  static bc_result f32, amp;
  kiln_dtype d32 = KILN_F32, d16 = KILN_BF16;
  KT_CHECK(bc_check("f32 network", prog_net, &d32, &f32) == 0);
  KT_CHECK(bc_check("bf16 autocast network", prog_net, &d16, NULL) == 0);
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++) {
    bc_run(backends[b], prog_net, &d16, &amp);
    KT_CHECK_MSG(amp.status == KILN_OK && amp.n == 8, "%s: %s", backends[b], amp.err);
    if (amp.status != KILN_OK || amp.n != 8 || f32.n != 8) continue;
    const kiln_dtype want[8] = {KILN_BF16, KILN_BF16, KILN_F32, KILN_F32, KILN_F32, KILN_F32, KILN_F32, KILN_F32};
    for (int i = 0; i < 8; i++)
      KT_CHECK_MSG(amp.o[i].dt == want[i], "%s: %s is %s in a bf16 region, want %s", backends[b], amp.o[i].name,
                   kiln_dtype_name(amp.o[i].dt), kiln_dtype_name(want[i]));
    check_matmul_host(backends[b], &amp.o[0]);
    /* bf16 keeps 8 bits: a relative error of a few 2^-9 per value */
    for (int i = 1; i < 8; i++) {
      double e = rel_err(&amp.o[i], &f32.o[i]);
      KT_CHECK_MSG(e < 2e-2, "%s: %s differs from f32 by %.3g (relative, RMS)", backends[b], amp.o[i].name, e);
      KT_CHECK_MSG(i == 1 || i == 3 || e > 0, "%s: %s is bit-identical to f32: was bf16 used?", backends[b],
                   amp.o[i].name);
    }
    bc_result_free(&amp);
  }
  bc_result_free(&f32);
}

KT_TEST(which_ops_run_in_16_bits) {
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  int64_t s[2] = {4, 6}, s4[4] = {2, 3, 5, 5}, sw[2] = {3, 6}, so[2] = {4, 3}, sb[1] = {3};
  kiln_tensor a = kiln_zeros(KILN_F32, 2, s), w = kiln_zeros(KILN_F32, 2, sw);
  kiln_tensor d = kiln_zeros(KILN_F64, 2, s);
  KT_CHECK(kiln_autocast_dtype() == KILN_F32);
  kiln_autocast_begin(KILN_BF16);
  KT_CHECK(kiln_autocast_dtype() == KILN_BF16);
  kiln_tensor m = kiln_matmul(a, kiln_transpose(w, 0, 1));
  KT_CHECK(kiln_dtype_of(m) == KILN_BF16);
  KT_CHECK(kiln_dtype_of(kiln_relu(m)) == KILN_BF16);        /* elementwise: the input's dtype */
  KT_CHECK(kiln_dtype_of(kiln_add(m, kiln_zeros(KILN_F32, 2, so))) == KILN_F32); /* promotes */
  KT_CHECK(kiln_dtype_of(kiln_linear_apply(a, w, kiln_zeros(KILN_F32, 1, sb))) == KILN_BF16);
  KT_CHECK(kiln_dtype_of(kiln_softmax(m, -1)) == KILN_F32);
  KT_CHECK(kiln_dtype_of(kiln_log_softmax(m, -1)) == KILN_F32);
  KT_CHECK(kiln_dtype_of(kiln_mse_loss(m, m)) == KILN_F32);
  KT_CHECK(kiln_dtype_of(kiln_matmul(d, kiln_transpose(d, 0, 1))) == KILN_F64); /* f64 is never cast */
  kiln_layernorm *ln = NULL;
  KT_CHECK(kiln_layernorm_create(3, 1e-5, true, &ln) == KILN_OK);
  KT_CHECK(kiln_dtype_of(kiln_layernorm_forward(ln, m)) == KILN_F32);
  kiln_conv2d *cv = NULL;
  KT_CHECK(kiln_conv2d_create(3, 4, 3, 1, 1, 1, 1, true, 1, &cv) == KILN_OK);
  KT_CHECK(kiln_dtype_of(kiln_conv2d_forward(cv, kiln_zeros(KILN_F32, 4, s4))) == KILN_BF16);
  kiln_autocast_begin(KILN_F32); /* a region with autocast off */
  KT_CHECK(kiln_dtype_of(kiln_matmul(a, kiln_transpose(w, 0, 1))) == KILN_F32);
  KT_CHECK(kiln_dtype_of(kiln_softmax(m, -1)) == KILN_BF16); /* outside autocast: the input's dtype */
  kiln_autocast_end();
  kiln_autocast_end();
  KT_CHECK(kiln_dtype_of(kiln_matmul(a, kiln_transpose(w, 0, 1))) == KILN_F32);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_autocast_end();
  KT_STR_CONTAINS(kiln_last_error(), "autocast_end: not inside an autocast region");
  KT_STR_CONTAINS(kiln_last_error(), "test_autocast.c");
  kiln_clear_error();
  kiln_autocast_begin(KILN_I32);
  KT_STR_CONTAINS(kiln_last_error(), "autocast_begin: dtype i32 is not bf16, f16 or f32");
  KT_CHECK(kiln_autocast_dtype() == KILN_F32);
  kiln_clear_error();
  for (int i = 0; i < 17; i++) kiln_autocast_begin(KILN_BF16);
  KT_STR_CONTAINS(kiln_last_error(), "more than 16 nested regions");
  for (int i = 0; i < 16; i++) kiln_autocast_end();
  KT_CHECK(kiln_autocast_dtype() == KILN_F32);
  kiln_clear_error();
  kiln_layernorm_destroy(ln);
  kiln_conv2d_destroy(cv);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(which_ops_run_in_16_bits), KT_CASE(bf16_network_matches_f32_within_bf16_precision))
