/* The nn layers and losses on values near their dtype's limits, on ref and
 * on the backend under test ($KILN_TEST_BACKEND, default cpu): a variance
 * that overflows (NaN, not zeros), 16-bit inputs computed in f32 and
 * rounded once (losses, batch norm, BERT pooling), f16 attention whose
 * unscaled q·kᵀ would overflow. Oracles: the formulas in double on the
 * same inputs. The cases against PyTorch's reference file are in
 * test_nn_edges.c. */
#include <kiln/bert.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <math.h>
#include <stdlib.h>

#include "backend/backend_compare.h"
#include "for_backends.h"
#include "kt.h"



/* A row (layer norm) or channel (batch norm) of values near FLT_MAX: the
 * variance overflows to inf, and rsqrt(inf) = 0 turned the row into zeros
 * with status OK. It is NaN now (PyTorch 1.13 gives NaN or 0 depending on
 * its kernel's path); the other rows keep their values, checked against
 * (x - mean) / sqrt(var + eps) in double. */
KT_TEST(overflowing_variance_gives_nan) {
  FOR_BACKENDS(b) {
    const float big[8] = {-1e38f, 1e38f, -3e38f, 3e38f, 1, 2, 4, 8};
    const int64_t ls[2] = {2, 4};
    kiln_layernorm *n = NULL;
    KT_CHECK(kiln_layernorm_create(4, 1e-5, false, &n) == KILN_OK);
    float y[8];
    KT_CHECK(kiln_to_host(kiln_layernorm_forward(n, kiln_from_host(big, KILN_F32, 2, ls)), y, sizeof y) == KILN_OK);
    for (int i = 0; i < 4; i++) KT_CHECK_MSG(isnan(y[i]), "layernorm on %s: [0][%d] = %g, want NaN", g_backend, i, y[i]);
    double mu = (1 + 2 + 4 + 8) / 4.0, var = 0;
    for (int i = 4; i < 8; i++) var += (big[i] - mu) * (big[i] - mu) / 4;
    for (int i = 4; i < 8; i++) KT_NEAR(y[i], (big[i] - mu) / sqrt(var + 1e-5), 1e-6);
    kiln_mark_step();
    kiln_layernorm_destroy(n);
    /* batch norm, training: channel 0 of [2, 2, 1, 2] holds the big values */
    const float xb[8] = {-3e38f, 3e38f, 1, 2, 3e38f, -3e38f, 4, 8};
    const int64_t bs[4] = {2, 2, 1, 2};
    kiln_batchnorm2d *bn = NULL;
    KT_CHECK(kiln_batchnorm2d_create(2, 1e-5, 0.1, &bn) == KILN_OK);
    KT_CHECK(kiln_to_host(kiln_batchnorm2d_forward(bn, kiln_from_host(xb, KILN_F32, 4, bs), true), y, sizeof y) ==
             KILN_OK);
    const int c0[4] = {0, 1, 4, 5}, c1[4] = {2, 3, 6, 7};
    mu = (1 + 2 + 4 + 8) / 4.0;
    for (int i = 0; i < 4; i++) {
      KT_CHECK_MSG(isnan(y[c0[i]]), "batchnorm on %s: [%d] = %g, want NaN", g_backend, c0[i], y[c0[i]]);
      KT_NEAR(y[c1[i]], (xb[c1[i]] - mu) / sqrt(var + 1e-5), 1e-6);
    }
    kiln_mark_step();
    kiln_batchnorm2d_destroy(bn);
  }
}

/* 16-bit inputs to the losses, batch norm and BERT's pooling are computed in
 * f32 and rounded once: in 16 bits the sum of 70000 rows' losses or their
 * count (past 65504), a batch-norm mean (1003 is 1004 in bf16) and squares
 * (300² in f16) overflowed or cancelled. Oracles: the same formulas in
 * double on the 16-bit inputs, to a 16-bit rounding. */
KT_TEST(sixteen_bit_losses_and_norms_compute_in_f32) {
  FOR_BACKENDS(b) {
    enum { N = 70000 };
    float *l = malloc(sizeof(float) * 2 * N);
    int64_t *t = calloc(N, sizeof(int64_t));
    for (int i = 0; i < N; i++) {
      l[2 * i] = i < 5000 ? 0 : 10; /* rows 0..4999 [0, 30]: loss 30; the others [10, 0]: log1p(e^-10) */
      l[2 * i + 1] = i < 5000 ? 30 : 0;
    }
    const int64_t ls[2] = {N, 2}, ts[1] = {N};
    kiln_tensor lg = kiln_cast(kiln_from_host(l, KILN_F32, 2, ls), KILN_F16);
    double ce = kiln_item_f64(kiln_cross_entropy(lg, kiln_from_host(t, KILN_I64, 1, ts), -100, 0.0));
    double want = (5000 * (30 + log1p(exp(-30.0))) + (N - 5000) * log1p(exp(-10.0))) / N;
    KT_CHECK_MSG(fabs(ce - want) <= 2e-3 * want, "f16 cross_entropy on %s: %.9g, want %.9g", g_backend, ce, want);
    free(l);
    free(t);
    const float ms[4] = {300, 0, 0, 0};
    const int64_t s4[1] = {4};
    double mse = kiln_item_f64(kiln_mse_loss(kiln_cast(kiln_from_host(ms, KILN_F32, 1, s4), KILN_F16),
                                             kiln_zeros(KILN_F16, 1, s4)));
    KT_CHECK_MSG(mse == 22496.0, "f16 mse_loss on %s: %g, want 22496 (22500 in f16)", g_backend, mse);
    kiln_mark_step();
    /* batch norm, training, one channel of 4 values */
    const float bx[2][4] = {{1000, 1004, 1004, 1004}, {300, -300, -300, -300}};
    const kiln_dtype bdt[2] = {KILN_BF16, KILN_F16};
    const int64_t bs[4] = {4, 1, 1, 1};
    for (int k = 0; k < 2; k++) {
      kiln_batchnorm2d *bn = NULL;
      KT_CHECK(kiln_batchnorm2d_create(1, 1e-5, 0.1, &bn) == KILN_OK);
      float y[4];
      KT_CHECK(kiln_to_host(kiln_cast(kiln_batchnorm2d_forward(bn, kiln_cast(kiln_from_host(bx[k], KILN_F32, 4, bs),
                                                                                bdt[k]), true),
                                      KILN_F32),
                            y, sizeof y) == KILN_OK);
      double mu = 0, var = 0;
      for (int i = 0; i < 4; i++) mu += bx[k][i] / 4;
      for (int i = 0; i < 4; i++) var += (bx[k][i] - mu) * (bx[k][i] - mu) / 4;
      for (int i = 0; i < 4; i++) {
        double w = (bx[k][i] - mu) / sqrt(var + 1e-5);
        KT_CHECK_MSG(fabs(y[i] - w) <= 8e-3 * fabs(w), "%s batchnorm on %s: [%d] = %g, want %g",
                     kiln_dtype_name(bdt[k]), g_backend, i, y[i], w);
      }
      kiln_mark_step();
      kiln_batchnorm2d_destroy(bn);
    }
    /* mean pooling + L2 normalisation of f16 hidden states: squares of 1e-4 underflow f16, of 200 overflow it */
    const float hv[2] = {1e-4f, 200.f};
    const int64_t hs[3] = {1, 2, 4};
    for (int k = 0; k < 2; k++) {
      float h[8], y[4];
      for (int i = 0; i < 8; i++) h[i] = hv[k];
      const kiln_tensor none = {0, 0};
      kiln_tensor hid = kiln_cast(kiln_from_host(h, KILN_F32, 3, hs), KILN_F16);
      KT_CHECK(kiln_to_host(kiln_cast(kiln_mean_pool_normalize(hid, none), KILN_F32), y, sizeof y) == KILN_OK);
      for (int i = 0; i < 4; i++)
        KT_CHECK_MSG(y[i] == 0.5f, "f16 mean_pool_normalize of %g on %s: [%d] = %g, want 0.5", hv[k], g_backend, i,
                     y[i]);
      kiln_mark_step();
    }
  }
}

/* f16 q and k near 80 with E = 16: the unscaled q·kᵀ (102400) overflows f16,
 * the scaled scores (25600, 12800) do not; the output is v's first row (1).
 * With the scale after the product the row was NaN. Also f32 inputs inside
 * an f16 autocast region (the product in f16). */
KT_TEST(sdpa_f16_large_scores) {
  FOR_BACKENDS(b) {
    float qh[16], kh[32], vh[32], o[16];
    for (int i = 0; i < 16; i++) {
      qh[i] = 80;
      kh[i] = 80;
      kh[16 + i] = 40;
      vh[i] = 1;
      vh[16 + i] = 2;
    }
    const int64_t sq[4] = {1, 1, 1, 16}, sk[4] = {1, 1, 2, 16};
    for (int ac = 0; ac < 2; ac++) {
      kiln_tensor q = kiln_from_host(qh, KILN_F32, 4, sq), k = kiln_from_host(kh, KILN_F32, 4, sk),
                  v = kiln_from_host(vh, KILN_F32, 4, sk);
      if (ac) kiln_autocast_begin(KILN_F16);
      else {
        q = kiln_cast(q, KILN_F16);
        k = kiln_cast(k, KILN_F16);
        v = kiln_cast(v, KILN_F16);
      }
      const kiln_tensor none = {0, 0};
      kiln_tensor y = kiln_cast(kiln_sdpa(q, k, v, none, 0.0, false, 0), KILN_F32);
      if (ac) kiln_autocast_end();
      KT_CHECK(kiln_to_host(y, o, sizeof o) == KILN_OK);
      for (int i = 0; i < 16; i++)
        KT_CHECK_MSG(o[i] == 1.0f, "sdpa f16 (%s) on %s: [%d] = %g, want 1", ac ? "autocast" : "f16 inputs",
                     g_backend, i, o[i]);
      kiln_mark_step();
    }
  }
}

KT_MAIN(KT_CASE(overflowing_variance_gives_nan), KT_CASE(sixteen_bit_losses_and_norms_compute_in_f32),
        KT_CASE(sdpa_f16_large_scores))
