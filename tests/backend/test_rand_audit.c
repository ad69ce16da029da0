/* Audit of kiln's random numbers as a user's program meets them:
 * kiln_rand_uniform / kiln_rand_normal in every float dtype against the exact
 * distributions (a chi-square over 16 bins whose edges account for rounding
 * to the dtype, moments, a Kolmogorov-Smirnov statistic, tails), independence
 * of nearby seeds and elements, the same bits on both backends, on any thread
 * count and on a second run, composed with views (transpose, slice, expand,
 * reductions) fused into other kernels; kiln_dropout (fraction dropped,
 * survivors scaled by 1/(1-p), p = 0 and eval the identity, p = 1 refused as
 * documented, the gradient's mask the forward's, seeds) and the attention
 * dropout of kiln_sdpa. Bounds are generous (about 5 sigma or P < 1e-4) and
 * the seeds fixed, so nothing is flaky. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/models.h>
#include <kiln/nn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"

enum { N = 1000000 };
static const kiln_dtype k_float[4] = {KILN_F32, KILN_F64, KILN_BF16, KILN_F16};
static const int k_prec[4] = {24, 53, 8, 11}; /* significand bits */

static void start(const char *backend, int threads) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend, .num_threads = threads}) == KILN_OK);
}

/* t as doubles (the cast to f64 is exact from every float dtype) */
static double *read_f64(kiln_tensor t, int64_t n) {
  double *v = malloc(sizeof(double) * (size_t)n);
  KT_CHECK(kiln_to_host(kiln_cast(t, KILN_F64), v, sizeof(double) * (size_t)n) == KILN_OK);
  return v;
}

/* P(U rounds to a value below e) for U uniform in [0, 1) rounded to nearest
 * with p significand bits: U < e - h, h half the spacing just below e. */
static double below_edge(double e, int p) {
  int ex;
  double m = frexp(e, &ex); /* e = m 2^ex, m in [0.5, 1) */
  double spacing = ldexp(1.0, ex - 1 - (p - 1));
  if (m == 0.5) spacing /= 2; /* a power of two: the binade below is finer */
  return e - spacing / 2;
}

KT_TEST(uniform_matches_the_exact_distribution_in_every_dtype) {
  start("cpu", 0);
  int64_t n = N;
  for (int d = 0; d < 4; d++) {
    double *v = read_f64(kiln_rand_uniform(k_float[d], 1, &n, 12345 + (uint64_t)d), n);
    int64_t bins[16] = {0}, outside = 0;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
      double x = v[i];
      if (!(x >= 0 && x < 1)) {
        outside++;
        continue;
      }
      bins[(int)(x * 16)]++;
      sum += x;
      sq += (x - 0.5) * (x - 0.5);
    }
    const char *name = kiln_dtype_name(k_float[d]);
    KT_CHECK_MSG(outside == 0, "uniform %s: %lld draws outside [0, 1)", name, (long long)outside);
    double chi = 0;
    for (int k = 0; k < 16; k++) {
      double lo = k ? below_edge(k / 16.0, k_prec[d]) : 0, hi = k < 15 ? below_edge((k + 1) / 16.0, k_prec[d]) : 1;
      double want = (hi - lo) * (double)n;
      chi += (bins[k] - want) * (bins[k] - want) / want;
    }
    /* 15 degrees of freedom: P(chi2 > 50) < 1e-5 */
    KT_CHECK_MSG(chi < 50, "uniform %s: chi-square over 16 bins %.1f", name, chi);
    double mean = sum / (double)n, var = sq / (double)n;
    KT_CHECK_MSG(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / (double)n), "uniform %s: mean %.6f", name, mean);
    KT_CHECK_MSG(fabs(var - 1.0 / 12) < 5 * sqrt(1.0 / 180 / (double)n) + 1e-5, "uniform %s: variance %.6f", name, var);
    if (k_prec[d] >= 24) { /* KS against U(0, 1): sorted draws; 1.95 / sqrt(n) is P = 0.001 */
      int64_t counts[4096] = {0};
      for (int64_t i = 0; i < n; i++) counts[(int)(v[i] * 4096)]++;
      double ks = 0;
      int64_t acc = 0;
      for (int k = 0; k < 4096; k++) {
        acc += counts[k];
        double dlt = fabs((double)acc / (double)n - (k + 1) / 4096.0);
        if (dlt > ks) ks = dlt;
      }
      KT_CHECK_MSG(ks < 1.95 / sqrt((double)n), "uniform %s: KS statistic %.5f", name, ks);
    }
    free(v);
  }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_shutdown();
}

static double phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

KT_TEST(normal_matches_the_exact_distribution_in_every_dtype) {
  start("cpu", 0);
  int64_t n = N;
  for (int d = 0; d < 4; d++) {
    double *v = read_f64(kiln_rand_normal(k_float[d], 1, &n, 777 + (uint64_t)d), n);
    const char *name = kiln_dtype_name(k_float[d]);
    double sum = 0, sq = 0, cube = 0, quart = 0, mx = 0;
    int64_t t3 = 0, t4 = 0, bad = 0;
    static int64_t counts[800];
    memset(counts, 0, sizeof counts);
    for (int64_t i = 0; i < n; i++) {
      double x = v[i];
      if (!isfinite(x)) {
        bad++;
        continue;
      }
      sum += x, sq += x * x, cube += x * x * x, quart += x * x * x * x;
      t3 += fabs(x) > 3;
      t4 += fabs(x) > 4;
      if (fabs(x) > mx) mx = fabs(x);
      int k = (int)floor((x + 4) * 100); /* bins of 0.01 over [-4, 4) */
      if (k >= 0 && k < 800) counts[k]++;
    }
    KT_CHECK_MSG(bad == 0, "normal %s: %lld values not finite", name, (long long)bad);
    double m = sum / (double)n, var = sq / (double)n - m * m;
    KT_CHECK_MSG(fabs(m) < 5 / sqrt((double)n), "normal %s: mean %.5f", name, m);
    KT_CHECK_MSG(fabs(var - 1) < 5 * sqrt(2.0 / (double)n) + (k_prec[d] < 12 ? 2e-3 : 0), "normal %s: variance %.5f",
                 name, var);
    KT_CHECK_MSG(fabs(cube / (double)n) < 5 * sqrt(15.0 / (double)n), "normal %s: third moment %.5f", name,
                 cube / (double)n);
    KT_CHECK_MSG(fabs(quart / (double)n - 3) < 5 * sqrt(96.0 / (double)n) + (k_prec[d] < 12 ? 0.02 : 0),
                 "normal %s: fourth moment %.5f", name, quart / (double)n);
    /* tails: P(|x| > 3) = 0.0026998, P(|x| > 4) = 6.334e-5 */
    double w3 = 0.0026998 * (double)n, w4 = 6.334e-5 * (double)n;
    KT_CHECK_MSG(fabs((double)t3 - w3) < 5 * sqrt(w3) + 0.02 * w3, "normal %s: %lld beyond 3 sigma, want %.0f", name,
                 (long long)t3, w3);
    KT_CHECK_MSG(fabs((double)t4 - w4) < 5 * sqrt(w4) + 0.05 * w4, "normal %s: %lld beyond 4 sigma, want %.0f", name,
                 (long long)t4, w4);
    KT_CHECK_MSG(mx > 4.4 && mx < 8.6, "normal %s: largest |x| %.3f", name, mx);
    if (k_prec[d] >= 24) { /* KS on a 0.01 grid */
      double ks = 0;
      int64_t acc = 0;
      for (int64_t i = 0; i < n; i++) acc += v[i] < -4;
      for (int k = 0; k < 800; k++) {
        acc += counts[k];
        double dlt = fabs((double)acc / (double)n - phi(-4 + (k + 1) * 0.01));
        if (dlt > ks) ks = dlt;
      }
      KT_CHECK_MSG(ks < 1.95 / sqrt((double)n), "normal %s: KS statistic %.5f", name, ks);
    }
    free(v);
  }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_shutdown();
}

static double corr(const double *a, const double *b, int64_t n) {
  double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
  for (int64_t i = 0; i < n; i++) ma += a[i], mb += b[i];
  ma /= (double)n, mb /= (double)n;
  for (int64_t i = 0; i < n; i++) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / sqrt(saa * sbb);
}

KT_TEST(nearby_seeds_and_elements_are_independent) {
  start("cpu", 0);
  int64_t n = N;
  double *a = read_f64(kiln_rand_uniform(KILN_F64, 1, &n, 1000), n);
  double *b = read_f64(kiln_rand_uniform(KILN_F64, 1, &n, 1001), n);
  double *c = read_f64(kiln_rand_normal(KILN_F64, 1, &n, 1000), n);
  double lim = 5 / sqrt((double)n);
  KT_CHECK_MSG(fabs(corr(a, b, n)) < lim, "seeds 1000 and 1001: correlation %.5f", corr(a, b, n));
  KT_CHECK_MSG(fabs(corr(a, a + 1, n - 1)) < lim, "elements k and k + 1: correlation %.5f", corr(a, a + 1, n - 1));
  KT_CHECK_MSG(fabs(corr(c, c + 1, n - 1)) < lim, "normal k and k + 1: correlation %.5f", corr(c, c + 1, n - 1));
  int64_t same = 0;
  for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
  KT_CHECK(same < 3);
  free(a);
  free(b);
  free(c);
  kiln_shutdown();
}

/* One program run on a backend / thread count: draws in every dtype and
 * their views fused into other kernels, read back as raw bytes. */
enum { R = 257, C = 129, NOUT = 4 * 7 };
typedef struct run_out {
  double v[NOUT][R * C];
  int64_t n[NOUT];
} run_out;

static void run_program(const char *backend, int threads, run_out *o) {
  start(backend, threads);
  int64_t shape[2] = {R, C}, row[2] = {1, C};
  int k = 0;
  for (int d = 0; d < 4; d++) {
    kiln_tensor u = kiln_rand_uniform(k_float[d], 2, shape, 5 + (uint64_t)d);
    kiln_tensor g = kiln_rand_normal(k_float[d], 2, shape, 5 + (uint64_t)d);
    kiln_tensor r1 = kiln_rand_uniform(k_float[d], 2, row, 9);
    kiln_tensor outs[7] = {
        u,
        g,
        kiln_mul_c(kiln_transpose(g, 0, 1), 1.0),         /* [C, R] */
        kiln_add_c(kiln_slice(u, 0, 3, R, 2), 0.0),       /* rows 3, 5, ... */
        kiln_sum(g, 1, (int[]){0}, false),                  /* [C] */
        kiln_mul(kiln_expand(r1, 2, shape), kiln_ones(k_float[d], 2, shape)), /* row repeated */
        kiln_dropout(kiln_add_c(u, 1.0), 0.3, 41, true),
    };
    int64_t ns[7] = {R * C, R * C, R * C, ((R - 3) / 2 + 1) * C, C, R * C, R * C};
    for (int i = 0; i < 7; i++, k++) {
      o->n[k] = ns[i];
      KT_CHECK(kiln_to_host(kiln_cast(outs[i], KILN_F64), o->v[k], sizeof(double) * (size_t)ns[i]) == KILN_OK);
    }
    double r1h[C];
    KT_CHECK(kiln_to_host(kiln_cast(r1, KILN_F64), r1h, sizeof r1h) == KILN_OK);
    /* the views hold the draws themselves, where they are */
    const double *uh = o->v[k - 7], *gh = o->v[k - 6];
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++) {
        KT_CHECK(o->v[k - 5][j * R + i] == gh[i * C + j]);
        if (i >= 3 && (i - 3) % 2 == 0) KT_CHECK(o->v[k - 4][((i - 3) / 2) * C + j] == uh[i * C + j]);
        KT_CHECK(o->v[k - 2][i * C + j] == r1h[j]);
      }
    for (int j = 0; j < C; j++) {
      double s = 0;
      for (int i = 0; i < R; i++) s += gh[i * C + j];
      KT_CHECK_MSG(fabs(o->v[k - 3][j] - s) <= 1e-5 * R + 0.05 * (k_prec[d] < 12) * R, "%s %s: sum of column %d",
                   backend, kiln_dtype_name(k_float[d]), j);
    }
  }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_shutdown();
}

KT_TEST(same_bits_on_every_backend_thread_count_and_run) {
  static run_out base, other;
  run_program("cpu", 1, &base);
  const struct {
    const char *backend;
    int threads;
  } runs[3] = {{"cpu", 3}, {"cpu", 1}, {"ref", 1}};
  for (int r = 0; r < 3; r++) {
    run_program(runs[r].backend, runs[r].threads, &other);
    for (int k = 0; k < NOUT; k++) {
      if (k % 7 == 4) continue; /* a sum: its order may differ between backends */
      int64_t diff = 0, first = -1;
      for (int64_t i = 0; i < base.n[k]; i++)
        if (memcmp(&base.v[k][i], &other.v[k][i], sizeof(double)) != 0) {
          diff++;
          if (first < 0) first = i;
        }
      KT_CHECK_MSG(diff == 0, "%s with %d threads, output %d (%s, case %d): %lld values differ from cpu/1 thread, "
                   "first [%lld] %.17g vs %.17g", runs[r].backend, runs[r].threads, k, kiln_dtype_name(k_float[k / 7]),
                   k % 7, (long long)diff, (long long)first, first >= 0 ? other.v[k][first] : 0.0,
                   first >= 0 ? base.v[k][first] : 0.0);
    }
  }
}

KT_TEST(dropout_drops_p_and_scales_survivors) {
  start("cpu", 0);
  int64_t shape[2] = {1000, 1000};
  static const double ps[3] = {0.1, 0.5, 0.9};
  for (int d = 0; d < 4; d++) {
    const char *name = kiln_dtype_name(k_float[d]);
    kiln_tensor x = kiln_keep(kiln_add_c(kiln_rand_uniform(k_float[d], 2, shape, 3), 0.5));
    double *xh = read_f64(x, N);
    for (int i = 0; i < 3; i++) {
      double p = ps[i];
      double *y = read_f64(kiln_dropout(x, p, 100 + (uint64_t)i, true), N);
      int64_t zero = 0, bad = 0;
      for (int64_t k = 0; k < N; k++) {
        if (y[k] == 0) {
          zero++;
          continue;
        }
        /* the scale and the product each rounded once to the dtype */
        double want = xh[k] / (1 - p), tol = ldexp(fabs(want), 1 - k_prec[d]);
        bad += !(fabs(y[k] - want) <= tol);
      }
      KT_CHECK_MSG(fabs((double)zero / N - p) < 5 * sqrt(p * (1 - p) / N), "dropout %s p %g: %lld of %d dropped", name,
                   p, (long long)zero, N);
      KT_CHECK_MSG(bad == 0, "dropout %s p %g: %lld survivors not x / (1 - p)", name, p, (long long)bad);
      free(y);
    }
    /* p = 0 and eval: the identity, bit for bit */
    for (int m = 0; m < 2; m++) {
      double *y = read_f64(kiln_dropout(x, m ? 0.5 : 0.0, 1, m == 0), N);
      KT_CHECK_MSG(memcmp(y, xh, sizeof(double) * N) == 0, "dropout %s %s: not the identity", name,
                   m ? "eval" : "p = 0");
      free(y);
    }
    free(xh);
    kiln_release(x);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  /* p = 1: documented as an error (docs/semantics.md), not NaN */
  kiln_tensor bad = kiln_dropout(kiln_ones(KILN_F32, 1, (int64_t[]){4}), 1.0, 1, true);
  KT_CHECK(!kiln_is_valid(bad));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "dropout: p = 1 is outside [0, 1)");
  kiln_clear_error();
  kiln_shutdown();
}

KT_TEST(dropout_gradient_uses_the_forward_mask_and_seeds_differ) {
  for (int b = 0; b < 2; b++) {
    const char *backend = b ? "ref" : "cpu";
    start(backend, 0);
    enum { M = 64 * 50 };
    int64_t shape[2] = {64, 50};
    double p = 0.4;
    kiln_tensor x = kiln_keep(kiln_add_c(kiln_rand_uniform(KILN_F32, 2, shape, 8), 0.25));
    kiln_tensor w = kiln_rand_normal(KILN_F32, 2, shape, 9);
    kiln_requires_grad(x);
    kiln_tensor y = kiln_dropout(x, p, 1234, true);
    KT_CHECK(kiln_backward(kiln_sum(kiln_mul(y, w), 0, NULL, false)) == KILN_OK);
    float yh[M], gh[M], wh[M], y2[M], y3[M];
    KT_CHECK(kiln_to_host(y, yh, sizeof yh) == KILN_OK);
    KT_CHECK(kiln_to_host(kiln_grad(x), gh, sizeof gh) == KILN_OK);
    KT_CHECK(kiln_to_host(w, wh, sizeof wh) == KILN_OK);
    KT_CHECK(kiln_to_host(kiln_dropout(x, p, 1234, true), y2, sizeof y2) == KILN_OK);
    KT_CHECK(kiln_to_host(kiln_dropout(x, p, 1235, true), y3, sizeof y3) == KILN_OK);
    int64_t mism = 0, same_mask = 0, both = 0, kept = 0;
    float s = (float)(1.0 / (1.0 - p));
    for (int k = 0; k < M; k++) {
      int keep = yh[k] != 0;
      kept += keep;
      float want = keep ? wh[k] * s : 0.0f;
      mism += !(fabs(gh[k] - want) <= 2e-7 * fabs(want));
      same_mask += (y2[k] != 0) == keep && y2[k] == yh[k];
      both += keep && y3[k] != 0;
    }
    KT_CHECK_MSG(mism == 0, "%s: %lld gradients not w / (1 - p) under the forward mask", backend, (long long)mism);
    KT_EQ_INT(same_mask, M);
    /* another seed: an independent mask, P(both kept) = (1 - p)^2 */
    double want = (1 - p) * (1 - p) * M;
    KT_CHECK_MSG(fabs(both - want) < 5 * sqrt(want), "%s: seeds 1234 and 1235 both keep %lld, want %.0f", backend,
                 (long long)both, want);
    KT_CHECK(kept > 0);
    KT_EQ_INT(kiln_last_status(), KILN_OK);
    kiln_shutdown();
  }
}

/* kiln_sdpa's attention dropout is kiln_dropout of the softmax weights with
 * the same seed (what lets a caller reproduce it), on both backends. */
KT_TEST(attention_dropout_is_dropout_of_the_weights) {
  float out[2][2][4 * 6 * 8];
  for (int b = 0; b < 2; b++) {
    start(b ? "ref" : "cpu", 0);
    int64_t qs[4] = {2, 2, 6, 8};
    kiln_tensor q = kiln_rand_normal(KILN_F32, 4, qs, 1), k = kiln_rand_normal(KILN_F32, 4, qs, 2);
    kiln_tensor v = kiln_rand_normal(KILN_F32, 4, qs, 3), none = {0, 0};
    kiln_tensor o = kiln_sdpa(q, k, v, none, 0.5, true, 99);
    kiln_tensor sc = kiln_mul_c(kiln_matmul(q, kiln_transpose(k, 2, 3)), 1.0 / sqrt(8.0));
    kiln_tensor man = kiln_matmul(kiln_dropout(kiln_softmax(sc, -1), 0.5, 99, true), v);
    KT_CHECK(kiln_to_host(o, out[b][0], sizeof out[b][0]) == KILN_OK);
    KT_CHECK(kiln_to_host(man, out[b][1], sizeof out[b][1]) == KILN_OK);
    for (int i = 0; i < 4 * 6 * 8; i++) KT_NEAR(out[b][0][i], out[b][1][i], 1e-5);
    kiln_tensor ev = kiln_sdpa(q, k, v, none, 0.5, false, 99);
    kiln_tensor ev_man = kiln_matmul(kiln_softmax(sc, -1), v);
    float e1[4 * 6 * 8], e2[4 * 6 * 8];
    KT_CHECK(kiln_to_host(ev, e1, sizeof e1) == KILN_OK);
    KT_CHECK(kiln_to_host(ev_man, e2, sizeof e2) == KILN_OK);
    for (int i = 0; i < 4 * 6 * 8; i++) KT_NEAR(e1[i], e2[i], 1e-5);
    KT_EQ_INT(kiln_last_status(), KILN_OK);
    kiln_shutdown();
  }
  for (int i = 0; i < 4 * 6 * 8; i++) KT_NEAR(out[0][0][i], out[1][0][i], 1e-5);
}

/* The transformer model's dropout sites: each (layer, step) its own masks.
 * Every parameter of the encoder layers is zeroed except one layer's
 * attention output bias (ones), so that layer adds dropout(ones) to the
 * stream and nothing else in the model is random: the logits show that
 * layer's mask. Layer i drew with seed step + i, so layer 1 at step s
 * replayed layer 0's masks of step s + 1 (bit-identical logits); kiln_nn_seed
 * documents that sub-streams must not be seed + k. */
static void model_logits(kiln_model *m, int on, bool training, uint64_t step, float *out) {
  const char *names[64];
  kiln_tensor ts[64];
  int n = kiln_model_params(m, names, ts, 64);
  char want[64];
  snprintf(want, sizeof want, "layers.%d.self_attn.out_proj.bias", on);
  for (int i = 0; i < n; i++) {
    if (strncmp(names[i], "layers.", 7) != 0) continue;
    int64_t sh[KILN_MAX_RANK];
    int r = kiln_shape(ts[i], sh);
    kiln_assign(ts[i], kiln_full(KILN_F32, r, sh, strcmp(names[i], want) == 0 ? 1.0 : 0.0));
  }
  int64_t xs[3] = {2, 28, 28};
  kiln_tensor x = kiln_rand_uniform(KILN_F32, 3, xs, 4);
  KT_CHECK(kiln_to_host(kiln_model_forward(m, x, training, step), out, sizeof(float) * 20) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
}

KT_TEST(transformer_dropout_sites_do_not_replay_each_other) {
  start("cpu", 0);
  kiln_model *m = NULL;
  KT_CHECK(kiln_model_create(KILN_MODEL_TRANSFORMER, 10, 1, &m) == KILN_OK);
  if (!m) return;
  float l0s[20], l0n[20], l1s[20], ev[2][20];
  model_logits(m, 0, true, 100, l0s);
  model_logits(m, 0, true, 101, l0n);
  model_logits(m, 1, true, 100, l1s);
  KT_CHECK_MSG(memcmp(l0s, l0n, sizeof l0s) != 0, "the logits do not show the dropout mask");
  KT_CHECK_MSG(memcmp(l1s, l0n, sizeof l1s) != 0, "layer 1 at step 100 replays layer 0's dropout masks of step 101");
  /* eval: no dropout, and then the one layer's bias alone decides: equal */
  for (int on = 0; on < 2; on++) model_logits(m, on, false, 0, ev[on]);
  KT_CHECK(memcmp(ev[0], ev[1], sizeof ev[0]) == 0);
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_model_destroy(m);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(uniform_matches_the_exact_distribution_in_every_dtype),
        KT_CASE(normal_matches_the_exact_distribution_in_every_dtype),
        KT_CASE(nearby_seeds_and_elements_are_independent), KT_CASE(same_bits_on_every_backend_thread_count_and_run),
        KT_CASE(dropout_drops_p_and_scales_survivors), KT_CASE(dropout_gradient_uses_the_forward_mask_and_seeds_differ),
        KT_CASE(attention_dropout_is_dropout_of_the_weights), KT_CASE(transformer_dropout_sites_do_not_replay_each_other))
