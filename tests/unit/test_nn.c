/* nn layers: each forward against a plain-C reference computed here on
 * small random inputs (direct loops: a 7-loop convolution, per-head
 * attention, ...). Runs on the backend chosen by KILN_BACKEND. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "kt.h"

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_metrics_clear();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

static uint64_t rng_state = 12345;
static float frand(void) { /* U(-1, 1), deterministic */
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}
static void fill(float *a, int64_t n) {
  for (int64_t i = 0; i < n; i++) a[i] = frand();
}
static kiln_tensor host(const float *a, int rank, const int64_t *shape) {
  return kiln_from_host(a, KILN_F32, rank, shape);
}
static void read(kiln_tensor t, float *out, int64_t n) {
  KT_CHECK(kiln_numel(t) == n);
  KT_CHECK(kiln_to_host(t, out, (size_t)n * sizeof *out) == KILN_OK);
}
static void set_param(kiln_tensor p, const float *a) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(p, s);
  kiln_assign(p, host(a, r, s));
}
#define CHECK_ALL(got, want, n, tol)                                                  \
  do {                                                                                \
    int bad_ = 0;                                                                     \
    for (int64_t i_ = 0; i_ < (int64_t)(n) && bad_ < 5; i_++)                          \
      if (!(fabs((double)(got)[i_] - (double)(want)[i_]) <= (tol) * (1 + fabs((double)(want)[i_])))) { \
        KT_FAIL("element %lld: %.7g vs %.7g", (long long)i_, (double)(got)[i_], (double)(want)[i_]); \
        bad_++;                                                                       \
      }                                                                               \
  } while (0)

/* ── plain-C references ── */
static void ref_linear(const float *x, int64_t rows, int in, int out, const float *w, const float *b, float *y) {
  for (int64_t r = 0; r < rows; r++)
    for (int o = 0; o < out; o++) {
      double s = b ? b[o] : 0;
      for (int i = 0; i < in; i++) s += (double)x[r * in + i] * w[o * in + i];
      y[r * out + o] = (float)s;
    }
}
static void ref_layernorm(const float *x, int64_t rows, int d, const float *w, const float *b, double eps, float *y) {
  for (int64_t r = 0; r < rows; r++) {
    double mu = 0, var = 0;
    for (int i = 0; i < d; i++) mu += x[r * d + i];
    mu /= d;
    for (int i = 0; i < d; i++) var += (x[r * d + i] - mu) * (x[r * d + i] - mu);
    var /= d;
    for (int i = 0; i < d; i++) y[r * d + i] = (float)((x[r * d + i] - mu) / sqrt(var + eps) * w[i] + b[i]);
  }
}
/* self-attention; kpm: [B,T] 1 = masked key (or NULL) */
static void ref_mha(const float *x, int B, int T, int D, int H, const float *win, const float *bin, const float *wo,
                    const float *bo, int causal, const unsigned char *kpm, float *y) {
  int hd = D / H;
  float *qkv = malloc(sizeof(float) * B * T * 3 * D), *o = malloc(sizeof(float) * B * T * D);
  ref_linear(x, (int64_t)B * T, D, 3 * D, win, bin, qkv);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int t = 0; t < T; t++) {
        double sc[64], mx = -1e300, z = 0;
        for (int s = 0; s < T; s++) {
          double a = 0;
          for (int d = 0; d < hd; d++)
            a += (double)qkv[(b * T + t) * 3 * D + h * hd + d] * qkv[(b * T + s) * 3 * D + D + h * hd + d];
          a /= sqrt((double)hd);
          if ((causal && s > t) || (kpm && kpm[b * T + s])) a += -1e9;
          sc[s] = a;
          if (a > mx) mx = a;
        }
        for (int s = 0; s < T; s++) z += (sc[s] = exp(sc[s] - mx));
        for (int d = 0; d < hd; d++) {
          double a = 0;
          for (int s = 0; s < T; s++) a += sc[s] / z * qkv[(b * T + s) * 3 * D + 2 * D + h * hd + d];
          o[(b * T + t) * D + h * hd + d] = (float)a;
        }
      }
  ref_linear(o, (int64_t)B * T, D, D, wo, bo, y);
  free(qkv);
  free(o);
}

KT_TEST(linear_forward_and_init) {
  start();
  kiln_linear *l = NULL;
  kiln_linear_create(5, 3, 1, 7, &l);
  KT_CHECK(l != NULL);
  const char *names[4];
  kiln_tensor ps[4];
  KT_EQ_INT(kiln_module_params(&l->m, names, ps, 4), 2);
  KT_CHECK(strcmp(names[0], "weight") == 0 && strcmp(names[1], "bias") == 0);
  float x[4 * 5], w[15], b[3], y[12], want[12];
  fill(x, 20);
  int64_t xs[2] = {4, 5};
  kiln_tensor ty = kiln_linear_forward(l, host(x, 2, xs));
  read(ty, y, 12);
  read(l->weight, w, 15);
  read(l->bias, b, 3);
  ref_linear(x, 4, 5, 3, w, b, want);
  CHECK_ALL(y, want, 12, 1e-5);
  /* PyTorch init: U(±1/√in), not constant */
  double bound = 1 / sqrt(5.0);
  int distinct = 0;
  for (int i = 0; i < 15; i++) {
    KT_CHECK(fabs(w[i]) <= bound);
    distinct += w[i] != w[0];
  }
  for (int i = 0; i < 3; i++) KT_CHECK(fabs(b[i]) <= bound);
  KT_CHECK(distinct > 10);
  /* same seed, same init */
  kiln_linear *l2 = NULL;
  kiln_linear_create(5, 3, 1, 7, &l2);
  float w2[15];
  read(l2->weight, w2, 15);
  CHECK_ALL(w2, w, 15, 0);
  kiln_linear_destroy(l);
  kiln_linear_destroy(l2);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(embedding_lookup) {
  start();
  kiln_embedding *e = NULL;
  kiln_embedding_create(6, 4, 3, &e);
  int64_t ids[5] = {0, 5, 2, 2, 1}, is[2] = {1, 5};
  float w[24], y[20];
  kiln_tensor out = kiln_embedding_forward(e, kiln_from_host(ids, KILN_I64, 2, is));
  KT_EQ_INT(kiln_rank(out), 3);
  KT_EQ_INT(kiln_dim(out, 2), 4);
  read(out, y, 20);
  read(e->weight, w, 24);
  for (int i = 0; i < 5; i++) CHECK_ALL(y + 4 * i, w + 4 * ids[i], 4, 0);
  double m = 0, v = 0; /* N(0,1) init, loosely */
  for (int i = 0; i < 24; i++) m += w[i], v += w[i] * w[i];
  KT_CHECK(fabs(m / 24) < 0.6 && v / 24 > 0.3 && v / 24 < 3);
  kiln_embedding_destroy(e);
  kiln_shutdown();
}

KT_TEST(layernorm_forward) {
  start();
  kiln_layernorm *n = NULL;
  kiln_layernorm_create(8, 1e-5, 1, &n);
  float x[24], w[8], b[8], y[24], want[24];
  fill(x, 24);
  fill(w, 8);
  fill(b, 8);
  set_param(n->weight, w);
  set_param(n->bias, b);
  int64_t xs[3] = {3, 1, 8};
  read(kiln_layernorm_forward(n, host(x, 3, xs)), y, 24);
  ref_layernorm(x, 3, 8, w, b, 1e-5, want);
  CHECK_ALL(y, want, 24, 1e-4);
  /* wrong last dim: an error, not a crash */
  int64_t bad[2] = {3, 7};
  kiln_tensor e = kiln_layernorm_forward(n, kiln_zeros(KILN_F32, 2, bad));
  KT_CHECK(!kiln_is_valid(e));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "test_nn.c");
  kiln_clear_error();
  kiln_layernorm_destroy(n);
  kiln_shutdown();
}

static void ref_conv(const float *x, const float *w, const float *b, int N, int C, int H, int W, int O, int kh,
                     int kw, int st, int pad, int dil, int g, float *y, int *OH, int *OW) {
  int oh = (H + 2 * pad - dil * (kh - 1) - 1) / st + 1, ow = (W + 2 * pad - dil * (kw - 1) - 1) / st + 1;
  int cg = C / g, og = O / g;
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          double s = b ? b[o] : 0;
          int gi = o / og;
          for (int c = 0; c < cg; c++)
            for (int ki = 0; ki < kh; ki++)
              for (int kj = 0; kj < kw; kj++) {
                int hi = i * st + ki * dil - pad, wj = j * st + kj * dil - pad;
                if (hi < 0 || hi >= H || wj < 0 || wj >= W) continue;
                s += (double)x[((n * C + gi * cg + c) * H + hi) * W + wj] * w[((o * cg + c) * kh + ki) * kw + kj];
              }
          y[((n * O + o) * oh + i) * ow + j] = (float)s;
        }
  *OH = oh;
  *OW = ow;
}

KT_TEST(conv2d_matches_direct_loops) {
  struct {
    int N, C, H, W, O, k, st, pad, dil, g, bias;
  } cs[] = {
      {2, 4, 7, 6, 6, 3, 2, 1, 2, 2, 1}, /* stride, padding, dilation, groups */
      {1, 3, 5, 5, 4, 3, 1, 1, 1, 1, 1}, /* "same" 3x3 */
      {2, 4, 6, 5, 4, 3, 1, 0, 1, 4, 0}, /* depthwise, no bias */
      {1, 2, 4, 4, 3, 1, 1, 0, 1, 1, 1}, /* 1x1 */
  };
  start();
  for (size_t t = 0; t < sizeof cs / sizeof cs[0]; t++) {
    int N = cs[t].N, C = cs[t].C, H = cs[t].H, W = cs[t].W, O = cs[t].O, k = cs[t].k;
    kiln_conv2d *c = NULL;
    kiln_conv2d_create(C, O, k, cs[t].st, cs[t].pad, cs[t].dil, cs[t].g, cs[t].bias, 11 + t, &c);
    KT_CHECK(c != NULL);
    int64_t nx = (int64_t)N * C * H * W, nw = (int64_t)O * (C / cs[t].g) * k * k;
    float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw), b[16];
    float *y = malloc(sizeof(float) * 4096), *want = malloc(sizeof(float) * 4096);
    fill(x, nx);
    read(c->weight, w, nw);
    if (cs[t].bias) read(c->bias, b, O);
    int64_t xs[4] = {N, C, H, W};
    kiln_tensor ty = kiln_conv2d_forward(c, host(x, 4, xs));
    int oh, ow;
    ref_conv(x, w, cs[t].bias ? b : NULL, N, C, H, W, O, k, k, cs[t].st, cs[t].pad, cs[t].dil, cs[t].g, want, &oh,
             &ow);
    KT_EQ_INT(kiln_dim(ty, 2), oh);
    KT_EQ_INT(kiln_dim(ty, 3), ow);
    read(ty, y, (int64_t)N * O * oh * ow);
    CHECK_ALL(y, want, (int64_t)N * O * oh * ow, 1e-5);
    kiln_conv2d_destroy(c);
    free(x), free(w), free(y), free(want);
  }
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(pooling_max_and_avg) {
  start();
  int N = 2, C = 3, H = 7, W = 6;
  float x[252], y[252];
  fill(x, 252);
  int64_t xs[4] = {N, C, H, W};
  struct {
    int is_max, k, st, pad;
  } ps[] = {{1, 3, 2, 1}, {1, 2, 2, 0}, {0, 2, 2, 0}, {0, 3, 1, 1}};
  for (int t = 0; t < 4; t++) {
    int k = ps[t].k, st = ps[t].st, pad = ps[t].pad;
    int oh = (H + 2 * pad - k) / st + 1, ow = (W + 2 * pad - k) / st + 1;
    kiln_tensor ty = kiln_pool2d(host(x, 4, xs), ps[t].is_max ? KILN_POOL_MAX : KILN_POOL_AVG, k, st, pad);
    read(ty, y, (int64_t)N * C * oh * ow);
    float want[252];
    for (int nc = 0; nc < N * C; nc++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          double m = -INFINITY, s = 0;
          for (int a = 0; a < k; a++)
            for (int bb = 0; bb < k; bb++) {
              int hi = i * st + a - pad, wj = j * st + bb - pad;
              double v = (hi < 0 || hi >= H || wj < 0 || wj >= W) ? (ps[t].is_max ? -INFINITY : 0)
                                                                   : x[(nc * H + hi) * W + wj];
              if (v > m) m = v;
              s += v;
            }
          want[(nc * oh + i) * ow + j] = (float)(ps[t].is_max ? m : s / (k * k));
        }
    CHECK_ALL(y, want, (int64_t)N * C * oh * ow, 1e-5);
  }
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(attention_masks_match_direct) {
  start();
  int B = 2, T = 5, D = 8, H = 2;
  kiln_mha *a = NULL;
  kiln_mha_create(D, H, 0.0, 5, &a);
  KT_CHECK(a != NULL);
  float win[192], bin[24], wo[64], bo[8], x[80], y[80], want[80];
  read(a->in_proj_weight, win, 192);
  for (int i = 0; i < 192; i++) KT_CHECK(fabs(win[i]) <= sqrt(6.0 / 32));
  fill(bin, 24);
  fill(bo, 8);
  set_param(a->in_proj_bias, bin); /* torch inits them to zero: test them non-zero */
  set_param(a->out_bias, bo);
  read(a->out_weight, wo, 64);
  fill(x, 80);
  int64_t xs[3] = {B, T, D}, ms[2] = {B, T};
  unsigned char kpm[10] = {0, 0, 0, 1, 1, 0, 1, 0, 0, 0};
  for (int variant = 0; variant < 4; variant++) {
    kiln_attn_opts o = {0};
    o.causal = variant & 1;
    if (variant & 2) o.key_padding_mask = kiln_from_host(kpm, KILN_BOOL, 2, ms);
    read(kiln_mha_forward(a, host(x, 3, xs), &o), y, 80);
    ref_mha(x, B, T, D, H, win, bin, wo, bo, o.causal, (variant & 2) ? kpm : NULL, want);
    CHECK_ALL(y, want, 80, 1e-4);
  }
  /* an f32 padding mask is added as is */
  float fm[10];
  for (int i = 0; i < 10; i++) fm[i] = kpm[i] ? -1e9f : 0.0f;
  kiln_attn_opts o = {.key_padding_mask = host(fm, 2, ms)};
  read(kiln_mha_forward(a, host(x, 3, xs), &o), y, 80);
  ref_mha(x, B, T, D, H, win, bin, wo, bo, 0, kpm, want);
  CHECK_ALL(y, want, 80, 1e-4);
  const char *names[8];
  KT_EQ_INT(kiln_module_params(&a->m, names, NULL, 8), 4);
  KT_CHECK(strcmp(names[2], "out_proj.weight") == 0);
  kiln_mha_destroy(a);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

static double gelu(double v) { return 0.5 * v * (1 + erf(v / sqrt(2.0))); }

KT_TEST(encoder_layer_pre_and_post_norm) {
  start();
  int B = 2, T = 4, D = 8, H = 2, F = 16;
  for (int norm_first = 0; norm_first < 2; norm_first++) {
    kiln_encoder_layer *l = NULL;
    kiln_encoder_layer_create(D, H, F, 0.1, norm_first ? KILN_ACTIVATION_GELU : KILN_ACTIVATION_RELU,
                              norm_first ? KILN_NORM_PRE : KILN_NORM_POST, 1e-5, 21, &l);
    KT_CHECK(l != NULL);
    const char *names[16];
    kiln_tensor ps[16];
    KT_EQ_INT(kiln_module_params(&l->m, names, ps, 16), 12);
    KT_CHECK(strcmp(names[0], "self_attn.in_proj_weight") == 0 && strcmp(names[11], "norm2.bias") == 0);
    static float p[12][512];
    for (int i = 0; i < 12; i++) {
      int64_t n = kiln_numel(ps[i]);
      if (i % 2 || strncmp(names[i], "norm", 4) == 0) { /* non-trivial biases and norms */
        fill(p[i], n);
        set_param(ps[i], p[i]);
      }
      read(ps[i], p[i], n);
    }
    float x[64], y[64], want[64], a[64], h[64], x1[64], f1[128], f2[64];
    fill(x, 64);
    int64_t xs[3] = {B, T, D};
    kiln_attn_opts o = {.causal = true, .training = 0};
    read(kiln_encoder_layer_forward(l, host(x, 3, xs), &o), y, 64);
    /* p: 0 in_w 1 in_b 2 out_w 3 out_b 4 l1.w 5 l1.b 6 l2.w 7 l2.b 8 n1.w 9 n1.b 10 n2.w 11 n2.b */
    if (norm_first) {
      ref_layernorm(x, B * T, D, p[8], p[9], 1e-5, h);
      ref_mha(h, B, T, D, H, p[0], p[1], p[2], p[3], 1, NULL, a);
      for (int i = 0; i < 64; i++) x1[i] = x[i] + a[i];
      ref_layernorm(x1, B * T, D, p[10], p[11], 1e-5, h);
    } else {
      ref_mha(x, B, T, D, H, p[0], p[1], p[2], p[3], 1, NULL, a);
      for (int i = 0; i < 64; i++) a[i] += x[i];
      ref_layernorm(a, B * T, D, p[8], p[9], 1e-5, x1);
      memcpy(h, x1, sizeof h);
    }
    ref_linear(h, B * T, D, F, p[4], p[5], f1);
    for (int i = 0; i < 128; i++) f1[i] = (float)(norm_first ? gelu(f1[i]) : (f1[i] > 0 ? f1[i] : 0));
    ref_linear(f1, B * T, F, D, p[6], p[7], f2);
    for (int i = 0; i < 64; i++) f2[i] += x1[i];
    if (norm_first)
      memcpy(want, f2, sizeof want);
    else
      ref_layernorm(f2, B * T, D, p[10], p[11], 1e-5, want);
    CHECK_ALL(y, want, 64, 2e-4);
    /* training mode runs (dropout) and differs from eval */
    o.training = 1;
    o.seed = 99;
    read(kiln_encoder_layer_forward(l, host(x, 3, xs), &o), a, 64);
    int diff = 0;
    for (int i = 0; i < 64; i++) diff += a[i] != y[i];
    KT_CHECK(diff > 0);
    kiln_encoder_layer_destroy(l);
  }
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(batchnorm_train_eval_running_stats) {
  start();
  int N = 3, C = 2, H = 2, W = 3, HW = 6;
  kiln_batchnorm2d *bn = NULL;
  kiln_batchnorm2d_create(C, 1e-5, 0.1, &bn);
  float w[2] = {1.5f, -0.5f}, b[2] = {0.25f, 1.0f};
  set_param(bn->weight, w);
  set_param(bn->bias, b);
  int64_t xs[4] = {N, C, H, W};
  double rm[2] = {0, 0}, rv[2] = {1, 1};
  float x[36], y[36];
  for (int step = 0; step < 2; step++) {
    fill(x, 36);
    for (int i = 0; i < 36; i++) x[i] = x[i] * 2 + (float)step;
    kiln_tensor ty = kiln_keep(kiln_batchnorm2d_forward(bn, host(x, 4, xs), 1));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    read(ty, y, 36);
    kiln_release(ty);
    for (int c = 0; c < C; c++) {
      double mu = 0, var = 0;
      for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) mu += x[(n * C + c) * HW + i];
      mu /= N * HW;
      for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) var += pow(x[(n * C + c) * HW + i] - mu, 2);
      var /= N * HW;
      for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
          int k = (n * C + c) * HW + i;
          KT_NEAR(y[k], (x[k] - mu) / sqrt(var + 1e-5) * w[c] + b[c], 1e-4);
        }
      rm[c] = 0.9 * rm[c] + 0.1 * mu;
      rv[c] = 0.9 * rv[c] + 0.1 * var * (N * HW) / (N * HW - 1);
    }
  }
  float got[2];
  read(bn->running_mean, got, 2);
  for (int c = 0; c < 2; c++) KT_NEAR(got[c], rm[c], 1e-5);
  read(bn->running_var, got, 2);
  for (int c = 0; c < 2; c++) KT_NEAR(got[c], rv[c], 1e-5);
  /* eval: running statistics, no update */
  read(kiln_batchnorm2d_forward(bn, host(x, 4, xs), 0), y, 36);
  for (int k = 0; k < 36; k++) {
    int c = (k / HW) % C;
    KT_NEAR(y[k], (x[k] - rm[c]) / sqrt(rv[c] + 1e-5) * w[c] + b[c], 1e-4);
  }
  const char *names[4];
  KT_EQ_INT(kiln_module_params(&bn->m, NULL, NULL, 0), 2);
  KT_EQ_INT(kiln_module_state(&bn->m, names, NULL, 4), 4);
  KT_CHECK(strcmp(names[3], "running_var") == 0);
  kiln_batchnorm2d_destroy(bn);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(cross_entropy_ignore_index_and_smoothing) {
  start();
  int N = 6, C = 5;
  float lg[30];
  fill(lg, 30);
  for (int i = 0; i < 30; i++) lg[i] *= 3;
  int64_t tg[6] = {0, 4, -100, 2, 1, -100}, ls[2] = {N, C}, ts[1] = {N};
  double eps_list[3] = {0.0, 0.1, 1.0};
  for (int e = 0; e < 3; e++) {
    double ls_eps = eps_list[e];
    kiln_tensor l = kiln_cross_entropy(host(lg, 2, ls), kiln_from_host(tg, KILN_I64, 1, ts), -100, ls_eps);
    KT_EQ_INT(kiln_rank(l), 0);
    double got = kiln_item_f64(l), sum = 0;
    int cnt = 0;
    for (int i = 0; i < N; i++) {
      if (tg[i] == -100) continue;
      double mx = -1e300, z = 0, mean_lp = 0;
      for (int c = 0; c < C; c++) mx = fmax(mx, lg[i * C + c]);
      for (int c = 0; c < C; c++) z += exp(lg[i * C + c] - mx);
      for (int c = 0; c < C; c++) mean_lp += (lg[i * C + c] - mx - log(z)) / C;
      double nll = -(lg[i * C + tg[i]] - mx - log(z));
      sum += (1 - ls_eps) * nll - ls_eps * mean_lp;
      cnt++;
    }
    KT_NEAR(got, sum / cnt, 1e-5);
  }
  /* every target ignored: 0, not NaN */
  int64_t all[6] = {-100, -100, -100, -100, -100, -100};
  KT_NEAR(kiln_item_f64(kiln_cross_entropy(host(lg, 2, ls), kiln_from_host(all, KILN_I64, 1, ts), -100, 0)), 0, 0);
  /* MSE */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0, 2, 5, 4, 1, 6};
  KT_NEAR(kiln_item_f64(kiln_mse_loss(host(a, 1, ts), host(b, 1, ts))), (1 + 4 + 16) / 6.0, 1e-6);
  /* targets of the wrong shape: an error */
  int64_t ts2[1] = {5};
  KT_CHECK(!kiln_is_valid(kiln_cross_entropy(host(lg, 2, ls), kiln_from_host(tg, KILN_I64, 1, ts2), -100, 0)));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  kiln_shutdown();
}

KT_TEST(dropout_mean_and_new_seed_no_recompile) {
  start();
  int64_t s[1] = {20000};
  static float y[20000];
  float first[64];
  for (int step = 0; step < 4; step++) {
    kiln_tensor x = kiln_ones(KILN_F32, 1, s);
    kiln_tensor d = kiln_keep(kiln_dropout(x, 0.25, 1000 + (uint64_t)step, 1));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    read(d, y, 20000);
    kiln_release(d);
    double sum = 0;
    int zeros = 0;
    for (int i = 0; i < 20000; i++) {
      sum += y[i];
      zeros += y[i] == 0;
      KT_CHECK(y[i] == 0 || fabs(y[i] - 1 / 0.75) < 1e-6);
    }
    KT_NEAR(sum / 20000, 1.0, 0.03);          /* mean preserved */
    KT_NEAR(zeros / 20000.0, 0.25, 0.02);     /* drop rate */
    if (step == 0)
      memcpy(first, y, sizeof first);
    else
      KT_CHECK(memcmp(first, y, sizeof first) != 0); /* a new mask */
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
  /* eval: identity */
  float one[4] = {1, 2, 3, 4}, out[4];
  int64_t s4[1] = {4};
  read(kiln_dropout(host(one, 1, s4), 0.5, 1, 0), out, 4);
  CHECK_ALL(out, one, 4, 0);
  KT_CHECK(!kiln_is_valid(kiln_dropout(host(one, 1, s4), 1.0, 1, 1)));
  kiln_clear_error();
  kiln_shutdown();
}

KT_TEST(bad_arguments_are_errors) {
  start();
  kiln_linear *l = (kiln_linear *)&l; /* not NULL: a failed create must clear it */
  KT_EQ_INT(kiln_linear_create(0, 3, true, 0, &l), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(l == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "test_nn.c:"); /* the caller's line */
  kiln_clear_error();
  kiln_mha *a = NULL;
  KT_EQ_INT(kiln_mha_create(10, 3, 0, 0, &a), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(a == NULL);
  kiln_clear_error();
  kiln_conv2d *c = NULL;
  KT_EQ_INT(kiln_conv2d_create(3, 4, 3, 1, 0, 1, 2, true, 0, &c), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(c == NULL);
  kiln_clear_error();
  KT_EQ_INT(kiln_linear_create(3, 4, true, 0, NULL), KILN_ERR_INVALID_ARGUMENT); /* no out parameter */
  kiln_clear_error();
  /* a weight passed as [in, out]: linear and the shapes the user passed,
   * not a matmul of a transposed weight */
  const kiln_tensor no_bias = {0, 0};
  int64_t x2[2] = {8, 3}, w2[2] = {3, 4}, wok[2] = {4, 3}, b1[1] = {5};
  KT_CHECK(!kiln_is_valid(kiln_linear_apply(kiln_zeros(KILN_F32, 2, x2), kiln_zeros(KILN_F32, 2, w2), no_bias)));
  KT_STR_CONTAINS(kiln_last_error(), "linear: input [8,3] and weight [3,4] do not fit: expected weight "
                                     "[out_features, 3]; the weight looks transposed: pass it as [out_features, "
                                     "in_features]");
  KT_STR_CONTAINS(kiln_last_error(), "test_nn.c:");
  KT_CHECK(strstr(kiln_last_error(), "matmul") == NULL);
  kiln_clear_error();
  int64_t w3[2] = {4, 5};
  KT_CHECK(!kiln_is_valid(kiln_linear_apply(kiln_zeros(KILN_F32, 2, x2), kiln_zeros(KILN_F32, 2, w3), no_bias)));
  KT_STR_CONTAINS(kiln_last_error(), "linear: input [8,3] and weight [4,5] do not fit: expected weight "
                                     "[out_features, 3]; the weight's last dimension must equal the input's last");
  kiln_clear_error();
  KT_CHECK(!kiln_is_valid(kiln_linear_apply(kiln_zeros(KILN_F32, 2, x2), kiln_zeros(KILN_F32, 2, wok),
                                            kiln_zeros(KILN_F32, 1, b1))));
  KT_STR_CONTAINS(kiln_last_error(), "linear: bias [5] does not fit weight [4,3]: expected bias [4] (out_features)");
  kiln_clear_error();
  /* shapes that fit are untouched: [8,3] x [4,3]^T = [8,4] */
  kiln_tensor y = kiln_linear_apply(kiln_zeros(KILN_F32, 2, x2), kiln_zeros(KILN_F32, 2, wok), no_bias);
  KT_CHECK(kiln_is_valid(y) && kiln_dim(y, 0) == 8 && kiln_dim(y, 1) == 4);
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  /* sdpa and mse_loss name themselves and the shapes passed, not an inner matmul or sub */
  int64_t q3[3] = {2, 4, 6}, k3[3] = {2, 5, 7}, v3[3] = {2, 5, 6}, t2[2] = {8, 4};
  KT_CHECK(!kiln_is_valid(kiln_sdpa(kiln_zeros(KILN_F32, 3, q3), kiln_zeros(KILN_F32, 3, k3),
                                    kiln_zeros(KILN_F32, 3, v3), no_bias, 0.0, false, 0)));
  KT_STR_CONTAINS(kiln_last_error(), "sdpa: q [2,4,6], k [2,5,7] and v [2,5,6] do not fit");
  kiln_clear_error();
  KT_CHECK(!kiln_is_valid(kiln_mse_loss(kiln_zeros(KILN_F32, 2, x2), kiln_zeros(KILN_F32, 2, t2))));
  KT_STR_CONTAINS(kiln_last_error(), "mse_loss: input [8,3] and target [8,4] cannot be broadcast");
  KT_STR_CONTAINS(kiln_last_error(), "test_nn.c:");
  kiln_clear_error();
  int64_t xs[4] = {1, 1, 2, 2};
  KT_CHECK(!kiln_is_valid(kiln_max_pool2d(kiln_zeros(KILN_F32, 4, xs), 3, 1, 0)));
  KT_STR_CONTAINS(kiln_last_error(), "larger than the padded input");
  kiln_clear_error();
  kiln_shutdown();
}

/* A CNN forward + loss with batchnorm updates and a new dropout seed each
 * step compiles one graph once the parameters exist. */
KT_TEST(cnn_step_compiles_once) {
  start();
  kiln_conv2d *c = NULL;
  kiln_conv2d_create(1, 4, 3, 1, 1, 1, 1, 1, 1, &c);
  kiln_batchnorm2d *bn = NULL;
  kiln_batchnorm2d_create(4, 1e-5, 0.1, &bn);
  kiln_linear *fc = NULL;
  kiln_linear_create(4 * 3 * 3, 5, 1, 2, &fc);
  KT_CHECK(kiln_mark_step() == KILN_OK); /* materializes the initial parameters */
  kiln_metrics_clear();
  int64_t xs[4] = {2, 1, 6, 6}, ts[1] = {2}, fs[2] = {2, 36};
  double prev = -1;
  for (int step = 0; step < 4; step++) {
    float x[72];
    fill(x, 72);
    int64_t tg[2] = {step % 5, 3};
    kiln_tensor h = kiln_relu(kiln_batchnorm2d_forward(bn, kiln_conv2d_forward(c, host(x, 4, xs)), 1));
    h = kiln_reshape(kiln_max_pool2d(h, 2, 2, 0), 2, fs);
    h = kiln_dropout(h, 0.2, 500 + (uint64_t)step, 1);
    kiln_tensor loss =
        kiln_keep(kiln_cross_entropy(kiln_linear_forward(fc, h), kiln_from_host(tg, KILN_I64, 1, ts), -100, 0.1));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    double l = kiln_item_f64(loss);
    KT_CHECK(isfinite(l) && l > 0 && l != prev);
    prev = l;
    kiln_release(loss);
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
  kiln_conv2d_destroy(c);
  kiln_batchnorm2d_destroy(bn);
  kiln_linear_destroy(fc);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

/* ── PyTorch reference (tests/interop/torch_reference.py → tests/data/nn_torch_ref.txt) ── */
typedef struct {
  char name[80];
  int64_t n;
  double *v;
} ref_entry;
static ref_entry refs[64];
static int n_refs;

static int load_refs(void) {
  const char *dirs[3] = {getenv("KILN_TEST_DATA"), "tests/data", "../tests/data"};
  FILE *f = NULL;
  for (int i = 0; i < 3 && !f; i++) {
    if (!dirs[i]) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/nn_torch_ref.txt", dirs[i]);
    f = fopen(path, "r");
  }
  if (!f) return -1;
  n_refs = 0;
  while (n_refs < 64) {
    ref_entry *e = &refs[n_refs];
    long long n;
    if (fscanf(f, "%79s %lld", e->name, &n) != 2) break;
    e->n = n;
    e->v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
      if (fscanf(f, "%lf", &e->v[i]) != 1) e->v[i] = NAN;
    n_refs++;
  }
  fclose(f);
  return 0;
}
static const ref_entry *ref_get(const char *name) {
  for (int i = 0; i < n_refs; i++)
    if (strcmp(refs[i].name, name) == 0) return &refs[i];
  KT_FAIL("reference %s missing", name);
  return NULL;
}
static kiln_tensor ref_tensor(const ref_entry *e, int rank, const int64_t *shape) {
  float *h = malloc(sizeof(float) * (size_t)e->n);
  for (int64_t i = 0; i < e->n; i++) h[i] = (float)e->v[i];
  kiln_tensor t = host(h, rank, shape);
  free(h);
  return t;
}

KT_TEST(torch_reference_encoder_and_cross_entropy) {
  start();
  if (load_refs() != 0) {
    KT_FAIL("tests/data/nn_torch_ref.txt not found (set KILN_TEST_DATA)");
    return;
  }
  int B = 2, T = 5, D = 8, H = 2, F = 16;
  int64_t xs[3] = {B, T, D}, ms[2] = {B, T};
  const ref_entry *x = ref_get("x"), *kpm = ref_get("kpm");
  unsigned char mask[10];
  for (int i = 0; i < 10; i++) mask[i] = kpm->v[i] != 0;
  for (int variant = 0; variant < 2; variant++) {
    kiln_encoder_layer *l = NULL;
    kiln_encoder_layer_create(D, H, F, 0.0, variant ? KILN_ACTIVATION_GELU : KILN_ACTIVATION_RELU,
                              variant ? KILN_NORM_PRE : KILN_NORM_POST, 1e-5, 3, &l);
    const char *names[16];
    kiln_tensor ps[16];
    int n = kiln_module_state(&l->m, names, ps, 16);
    KT_EQ_INT(n, 12);
    for (int i = 0; i < n; i++) { /* load torch's state dict by name */
      char key[128];
      snprintf(key, sizeof key, "enc%d.%s", variant, names[i]);
      const ref_entry *e = ref_get(key);
      int64_t s[KILN_MAX_RANK];
      int r = kiln_shape(ps[i], s);
      if (e && e->n == kiln_numel(ps[i])) kiln_assign(ps[i], ref_tensor(e, r, s));
    }
    kiln_attn_opts o = {.causal = true, .key_padding_mask = kiln_from_host(mask, KILN_BOOL, 2, ms)};
    float y[80];
    read(kiln_encoder_layer_forward(l, ref_tensor(x, 3, xs), &o), y, 80);
    char key[32];
    snprintf(key, sizeof key, "enc%d.y", variant);
    const ref_entry *want = ref_get(key);
    if (want) CHECK_ALL(y, want->v, 80, 2e-4);
    kiln_encoder_layer_destroy(l);
  }
  const ref_entry *lg = ref_get("ce.logits"), *tg = ref_get("ce.target"), *loss = ref_get("ce.loss");
  int64_t ls[2] = {7, 4}, ts[1] = {7}, t64[7];
  for (int i = 0; i < 7; i++) t64[i] = (int64_t)tg->v[i];
  double got =
      kiln_item_f64(kiln_cross_entropy(ref_tensor(lg, 2, ls), kiln_from_host(t64, KILN_I64, 1, ts), -100, 0.15));
  KT_NEAR(got, loss->v[0], 1e-5);
  for (int i = 0; i < n_refs; i++) free(refs[i].v);
  n_refs = 0;
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

/* kiln_module_zero_grad (torch's module.zero_grad(set_to_none=True)): the
 * gradients of a Linear's parameters are released and the next backward
 * starts from zero. For loss = sum(x Wᵀ + b) over a batch of B rows,
 * dW[o][i] = Σ_b x[b][i] and db[o] = B, by hand. */
KT_TEST(module_zero_grad_restarts_accumulation) {
  start();
  enum { B = 3, IN = 4, OUT = 2 };
  kiln_linear *l = NULL;
  KT_CHECK(kiln_linear_create(IN, OUT, true, 7, &l) == KILN_OK);
  kiln_module_zero_grad(&l->m); /* nothing yet: a no-op */
  kiln_requires_grad(l->weight);
  kiln_requires_grad(l->bias);
  float x[B * IN];
  fill(x, B * IN);
  const int64_t xs[2] = {B, IN};
  float colsum[IN] = {0};
  for (int b = 0; b < B; b++)
    for (int i = 0; i < IN; i++) colsum[i] += x[b * IN + i];
  for (int round = 0; round < 2; round++) {
    int times = round == 0 ? 2 : 1; /* round 0 accumulates two backwards */
    for (int k = 0; k < times; k++)
      KT_CHECK(kiln_backward(kiln_sum(kiln_linear_forward(l, host(x, 2, xs)), 0, NULL, false)) == KILN_OK);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_tensor gw = kiln_grad(l->weight), gb = kiln_grad(l->bias);
    float w[OUT * IN], b[OUT];
    read(gw, w, OUT * IN);
    read(gb, b, OUT);
    for (int o = 0; o < OUT; o++) {
      for (int i = 0; i < IN; i++) KT_NEAR(w[o * IN + i], times * colsum[i], 1e-5);
      KT_NEAR(b[o], times * B, 0);
    }
    kiln_module_zero_grad(&l->m);
    KT_CHECK(kiln_grad(l->weight).gen == 0 && kiln_grad(l->bias).gen == 0);
    KT_CHECK(!kiln_is_valid(gw) && !kiln_is_valid(gb));
  }
  kiln_module_zero_grad(NULL);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_linear_destroy(l);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(linear_forward_and_init), KT_CASE(embedding_lookup), KT_CASE(layernorm_forward),
        KT_CASE(conv2d_matches_direct_loops), KT_CASE(pooling_max_and_avg), KT_CASE(attention_masks_match_direct),
        KT_CASE(encoder_layer_pre_and_post_norm), KT_CASE(batchnorm_train_eval_running_stats),
        KT_CASE(cross_entropy_ignore_index_and_smoothing), KT_CASE(dropout_mean_and_new_seed_no_recompile),
        KT_CASE(bad_arguments_are_errors), KT_CASE(cnn_step_compiles_once),
        KT_CASE(torch_reference_encoder_and_cross_entropy), KT_CASE(module_zero_grad_restarts_accumulation))
