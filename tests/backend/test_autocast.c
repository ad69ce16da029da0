/* Autocast (mixed precision, include/kiln/kiln.h) on the ref backend and
 * the backend under test:
 *   - which ops run in 16 bits (the dtypes of their results), nesting,
 *     a region with autocast off, and the errors;
 *   - matmul in a bf16 region against the f64 products of the
 *     bf16-rounded operands (rounded here, independently of kiln): products
 *     of bf16 values are exact in f32, only the order of the sums differs;
 *   - a two-layer network's loss and f32 parameter gradients in a bf16
 *     region against the same network in f32, within bf16's precision;
 *     and ref against the backend under test;
 *   - a linear layer's forward and backward in a bf16 region against
 *     PyTorch's CPU autocast (tests/data/autocast_reference.txt, made by
 *     tests/data/autocast_reference.py): dtypes, integer and f64 matmuls
 *     (never cast, exact), and values within bf16's rounding. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "backend/ref_cases.h"

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

static kiln_tensor ac_vals(int n, int a, int m, double d, double off, int rank, const int64_t *shape) {
  double v[24];
  for (int i = 0; i < n; i++) v[i] = (double)(float)(((i * a) % m) / d - off);
  return kiln_cast(kiln_from_host(v, KILN_F64, rank, shape), KILN_F32);
}

static void prog_torch(bc_result *r, const void *arg) {
  (void)arg;
  int64_t sx[2] = {4, 6}, sw[2] = {3, 6}, sb[1] = {3}, sy[1] = {4};
  kiln_tensor x = ac_vals(24, 13, 17, 7.0, 1.1, 2, sx), w = ac_vals(18, 5, 11, 9.0, 0.6, 2, sw);
  kiln_tensor b = ac_vals(3, 1, 3, 10.0, 0.05, 1, sb);
  kiln_requires_grad(x);
  kiln_requires_grad(w);
  kiln_requires_grad(b);
  int64_t tg[4] = {0, 2, 1, 2};
  int32_t hi[24];
  for (int i = 0; i < 24; i++) hi[i] = (i * 3) % 7 - 3;
  kiln_tensor xi = kiln_from_host(hi, KILN_I32, 2, sx), xd = kiln_cast(x, KILN_F64);
  kiln_autocast_begin(KILN_BF16);
  kiln_tensor lin = kiln_linear_apply(x, w, b), h = kiln_relu(lin);
  kiln_tensor loss = kiln_add(kiln_cross_entropy(h, kiln_from_host(tg, KILN_I64, 1, sy), -100, 0.0),
                              kiln_mul_c(kiln_sum(kiln_log_softmax(h, -1), 0, NULL, false), 0.01));
  kiln_tensor mi = kiln_matmul(xi, kiln_transpose(xi, 0, 1)), md = kiln_matmul(xd, kiln_transpose(xd, 0, 1));
  kiln_autocast_end();
  kiln_backward(loss);
  bc_emit(r, lin, 0, 0, "lin");
  bc_emit(r, h, 0, 0, "h");
  bc_emit(r, mi, 0, 0, "mi");
  bc_emit(r, md, 0, 0, "md");
  bc_emit(r, loss, 0, 0, "loss");
  bc_emit(r, kiln_grad(x), 0, 0, "gx");
  bc_emit(r, kiln_grad(w), 0, 0, "gw");
  bc_emit(r, kiln_grad(b), 0, 0, "gb");
}

/* Tolerances: lin is the bf16 product rounded, then the bias added and
 * rounded again (PyTorch's addmm rounds once): half an ulp of the product
 * plus half an ulp of the sum, within one bf16 ulp (2^-7 relative) of the
 * largest value; relu keeps it. The loss and the f32 gradients are computed
 * from those bf16 values and from the bf16 GEMMs of the backward pass: a
 * few bf16 ulps of the largest gradient (1/64 of it). The integer and f64
 * matmuls are never cast: exact (f64: up to the order of 6 products). */
KT_TEST(a_linear_layer_matches_pytorch_cpu_autocast) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  static bc_result res;
  static rc_want want;
  for (int k = 0; k < 2; k++) {
    bc_run(backends[k], prog_torch, NULL, &res);
    KT_CHECK_MSG(res.status == KILN_OK && res.n == 8, "%s: %s", backends[k], res.err);
    for (int o = 0; o < res.n && res.status == KILN_OK; o++) {
      const bc_out *out = &res.o[o];
      if (rc_read_want("autocast_reference.txt", out->name, &want)) {
        KT_FAIL("%s missing from tests/data/autocast_reference.txt (set KILN_TEST_DATA)", out->name);
        break;
      }
      KT_CHECK_MSG(!strcmp(kiln_dtype_name(out->dt), want.dt) && out->numel == want.n,
                   "%s: %s is %s [%lld], PyTorch %s [%lld]", backends[k], out->name, kiln_dtype_name(out->dt),
                   (long long)out->numel, want.dt, (long long)want.n);
      if (out->numel != want.n) continue;
      double mag = 0;
      for (int64_t i = 0; i < want.n; i++) mag = fmax(mag, fabs(want.v[i]));
      int grad = out->name[0] == 'g' || !strcmp(out->name, "loss"), exact = out->dt == KILN_I32;
      for (int64_t i = 0; i < want.n; i++) {
        double got = bc_get_f(out, i);
        double tol = exact ? 0 : out->dt == KILN_F64 ? 1e-15 * (1 + mag) : grad ? mag / 64 : mag / 128;
        if (fabs(got - want.v[i]) > tol) {
          KT_FAIL("%s: %s[%lld] = %.9g, PyTorch autocast %.9g (tolerance %.3g)", backends[k], out->name, (long long)i,
                  got, want.v[i], tol);
          break;
        }
      }
    }
    bc_result_free(&res);
  }
}

KT_MAIN(KT_CASE(which_ops_run_in_16_bits), KT_CASE(bf16_network_matches_f32_within_bf16_precision),
        KT_CASE(a_linear_layer_matches_pytorch_cpu_autocast))
