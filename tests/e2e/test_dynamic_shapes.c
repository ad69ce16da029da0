/* Dynamic shapes through the public API (docs/dynamic-shapes.md): the
 * automatic rule (a program whose batch size changes compiles exactly
 * twice; one whose rank or dtype changes compiles per variant), explicit
 * marks (kiln_dynamic: one compile from the start), sizes 0 and 1 (their
 * own graphs), training results equal to the same program with dynamic
 * shapes off, and gradients of a planned graph against finite differences
 * at two sizes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/autograd.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "kt.h"
#include "runtime/runtime.h" /* kiln_runtime_test_force_key */

static void start(kiln_switch dyn) {
  kiln_options o = {0};
  o.dynamic_shapes = dyn;
  KT_CHECK(kiln_init(&o) == KILN_OK);
}

static float hval(int64_t i, int64_t j, int64_t salt) {
  uint64_t h = (uint64_t)(i * 7919 + j * 104729 + salt * 1299709) * 0x9E3779B97F4A7C15ULL;
  return (float)((h >> 40) % 2001) / 1000.0f - 1.0f;
}

/* A small regression model trained on batches of the given sizes: x [B, 12]
 * -> tanh(x w1 + b1) w2 -> mean squared error against y [B, 3], SGD. The
 * final w2 (48 values) in out; marked: x and y marked dynamic on axis 0.
 * Returns the UncachedCompile count of the training loop. */
static int64_t train(const int64_t *sizes, int n, int marked, float *out) {
  const int64_t w1s[2] = {12, 16}, b1s[1] = {16}, w2s[2] = {16, 3};
  kiln_tensor w1 = kiln_param(kiln_rand(KILN_RAND_NORMAL, KILN_F32, 2, w1s, 3));
  kiln_tensor b1 = kiln_param(kiln_zeros(KILN_F32, 1, b1s));
  kiln_tensor w2 = kiln_param(kiln_rand(KILN_RAND_NORMAL, KILN_F32, 2, w2s, 4));
  kiln_requires_grad(w1);
  kiln_requires_grad(b1);
  kiln_requires_grad(w2);
  kiln_mark_step();
  int64_t c0 = kiln_counter_value("UncachedCompile");
  static float x[256 * 12], y[256 * 3];
  for (int s = 0; s < n; s++) {
    int64_t B = sizes[s];
    for (int64_t i = 0; i < B * 12; i++) x[i] = hval(s, i, 1);
    for (int64_t i = 0; i < B * 3; i++) y[i] = hval(s, i, 2);
    const int64_t xs[2] = {B, 12}, ys[2] = {B, 3};
    kiln_tensor tx = kiln_from_host(x, KILN_F32, 2, xs), ty = kiln_from_host(y, KILN_F32, 2, ys);
    if (marked) {
      kiln_dynamic(tx, 0);
      kiln_dynamic(ty, -2);
    }
    kiln_tensor h = kiln_tanh(kiln_add(kiln_matmul(tx, w1), b1));
    kiln_tensor d = kiln_sub(kiln_matmul(h, w2), ty);
    kiln_tensor loss = kiln_mean(kiln_mul(d, d), 0, NULL, false);
    kiln_backward(loss);
    kiln_assign(w1, kiln_sub(w1, kiln_mul_c(kiln_grad(w1), 0.1)));
    kiln_assign(b1, kiln_sub(b1, kiln_mul_c(kiln_grad(b1), 0.1)));
    kiln_assign(w2, kiln_sub(w2, kiln_mul_c(kiln_grad(w2), 0.1)));
    kiln_zero_grad(w1);
    kiln_zero_grad(b1);
    kiln_zero_grad(w2);
    kiln_mark_step();
  }
  int64_t compiles = kiln_counter_value("UncachedCompile") - c0;
  KT_CHECK_MSG(kiln_to_host(w2, out, 48 * sizeof *out) == KILN_OK, "%s", kiln_last_error());
  kiln_release(w1);
  kiln_release(b1);
  kiln_release(w2);
  return compiles;
}

static const int64_t k_sizes[] = {17, 32, 5, 64, 2, 3, 97, 32, 200, 17};
#define N_SIZES ((int)(sizeof k_sizes / sizeof k_sizes[0]))

static void same_weights(const float *a, const float *b, const char *what) {
  for (int i = 0; i < 48; i++)
    KT_CHECK_MSG(fabsf(a[i] - b[i]) <= 1e-5f + 1e-5f * fabsf(b[i]), "%s: w2[%d] %.9g vs %.9g", what, i, a[i], b[i]);
}

KT_TEST(a_batch_size_that_changes_compiles_twice) {
  float off[48], on[48];
  start(KILN_SWITCH_OFF);
  int64_t c_off = train(k_sizes, N_SIZES, 0, off);
  kiln_shutdown();
  start(KILN_SWITCH_ON);
  int64_t p0 = kiln_counter_value("DynamicPlan"), r0 = kiln_counter_value("DynamicPassesReused");
  int64_t c_on = train(k_sizes, N_SIZES, 0, on);
  int64_t planned = kiln_counter_value("DynamicPlan") - p0, reused = kiln_counter_value("DynamicPassesReused") - r0;
  kiln_shutdown();
  KT_EQ_INT(c_off, 8); /* one graph per distinct size */
  KT_EQ_INT(c_on, 2);  /* the first size, then once for any size */
  KT_EQ_INT(planned, 6);
  KT_EQ_INT(reused, 6); /* each planned size took the family's graph through the passes */
  same_weights(on, off, "automatic");
}

KT_TEST(marked_dimensions_compile_once) {
  float off[48], on[48];
  start(KILN_SWITCH_OFF);
  train(k_sizes, N_SIZES, 0, off);
  kiln_shutdown();
  start(KILN_SWITCH_OFF); /* the marks alone: no automatic rule */
  int64_t c = train(k_sizes, N_SIZES, 1, on);
  kiln_shutdown();
  KT_EQ_INT(c, 1);
  same_weights(on, off, "marked");
}

/* A family's kernels run at any size: rows reduced over a dynamic axis of
 * 5M elements (20 MB of f32, more than a thread's stack) from a family made
 * at small sizes, a sum of computed values (exp(x) x: its row of values is
 * kept in blocks) and a layer norm's row over that axis (values kept for its
 * later loops only where the length is a constant), against double sums on
 * the host. Before, the kernels kept such rows in arrays of the row's length
 * on the stack and crashed. */
KT_TEST(a_family_reduces_rows_longer_than_a_stack) {
  start(KILN_SWITCH_ON);
  static const int64_t Ts[] = {300, 1000, 5000000};
  int64_t c0 = kiln_counter_value("UncachedCompile"), first = 0;
  for (int s = 0; s < 3; s++) {
    int64_t T = Ts[s], sh[2] = {2, T};
    float *x = malloc(sizeof(float) * 2 * (size_t)T), *y = malloc(sizeof(float) * 2 * (size_t)T);
    KT_CHECK(x && y);
    if (!x || !y) return free(x), free(y);
    for (int64_t i = 0; i < 2 * T; i++) x[i] = (float)(i % 7) - 3.0f + (i >= T ? 0.5f : 0.0f);
    kiln_tensor tx = kiln_dynamic(kiln_from_host(x, KILN_F32, 2, sh), 1);
    int ax[1] = {1};
    kiln_tensor m = kiln_mean(kiln_mul(kiln_exp(tx), tx), 1, ax, false);
    kiln_tensor d = kiln_sub(tx, kiln_mean(tx, 1, ax, true));
    kiln_tensor ln = kiln_mul(d, kiln_rsqrt(kiln_add_c(kiln_mean(kiln_mul(d, d), 1, ax, true), 1e-5)));
    float mv[2];
    KT_CHECK_MSG(kiln_to_host(m, mv, sizeof mv) == KILN_OK, "%s", kiln_last_error());
    KT_CHECK_MSG(kiln_to_host(ln, y, sizeof(float) * 2 * (size_t)T) == KILN_OK, "%s", kiln_last_error());
    for (int r = 0; r < 2; r++) {
      double se = 0, sx = 0, sv = 0;
      for (int64_t j = 0; j < T; j++) {
        double v = x[r * T + j];
        se += exp(v) * v, sx += v;
      }
      double mu = sx / (double)T;
      for (int64_t j = 0; j < T; j++) sv += (x[r * T + j] - mu) * (x[r * T + j] - mu);
      double inv = 1.0 / sqrt(sv / (double)T + 1e-5), worst = 0;
      KT_CHECK_MSG(fabs(mv[r] - se / (double)T) <= 1e-5 * fabs(se / (double)T), "T %lld row %d: mean %.9g vs %.9g",
                   (long long)T, r, mv[r], se / (double)T);
      for (int64_t j = 0; j < T; j++) {
        double e = fabs(y[r * T + j] - (x[r * T + j] - mu) * inv);
        worst = e > worst ? e : worst;
      }
      KT_CHECK_MSG(worst <= 1e-5, "T %lld row %d: layer norm off by %.3g", (long long)T, r, worst);
    }
    kiln_mark_step();
    free(x);
    free(y);
    if (s == 0) first = kiln_counter_value("UncachedCompile") - c0;
  }
  KT_CHECK(first >= 1);
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, first); /* the later sizes planned, not compiled */
  kiln_shutdown();
}

/* A bounded mark: sizes up to the bound are one family (one compile, the
 * values right); a size above it is an error naming the op, the shape and
 * the line, and nothing runs for it; a bound below 2 is an error too. */
KT_TEST(a_bounded_dimension_refuses_sizes_above_its_bound) {
  start(KILN_SWITCH_OFF);
  int64_t c0 = kiln_counter_value("UncachedCompile");
  static const int64_t ok_sizes[] = {24, 5, 64, 9};
  for (int k = 0; k < 4; k++) {
    int64_t T = ok_sizes[k], sh[2] = {T, 3};
    float x[64 * 3];
    for (int64_t i = 0; i < T * 3; i++) x[i] = hval(i, T, 5);
    kiln_tensor t = kiln_dynamic_bounded(kiln_from_host(x, KILN_F32, 2, sh), 0, 64);
    double got = kiln_item_f64(kiln_sum(kiln_mul(t, t), 0, NULL, 0)), want = 0;
    for (int64_t i = 0; i < T * 3; i++) want += (double)x[i] * x[i];
    KT_CHECK(kiln_last_status() == KILN_OK);
    KT_NEAR(got, want, 1e-4 * want);
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 1);
  int64_t big[2] = {65, 3};
  static float xb[65 * 3];
  kiln_tensor t = kiln_dynamic_bounded(kiln_from_host(xb, KILN_F32, 2, big), 0, 64);
  KT_CHECK(!kiln_is_valid(t));
  KT_CHECK(kiln_last_status() == KILN_ERR_INVALID_ARGUMENT);
  const char *e = kiln_last_error();
  KT_STR_CONTAINS(e, "dynamic_bounded: dimension 0 of shape [65,3] is 65, above its bound 64");
  KT_STR_CONTAINS(e, "test_dynamic_shapes.c:");
  kiln_clear_error();
  t = kiln_dynamic_bounded(kiln_from_host(xb, KILN_F32, 2, big), 0, 1);
  KT_CHECK(!kiln_is_valid(t));
  KT_STR_CONTAINS(kiln_last_error(), "bound below 2");
  kiln_clear_error();
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 1);
  kiln_shutdown();
}

/* Sizes 1 and 0 change broadcasting: each is a graph of its own, and the
 * results are right. */
KT_TEST(sizes_zero_and_one_are_their_own_graphs) {
  start(KILN_SWITCH_ON);
  static const int64_t sizes[] = {9, 12, 1, 53, 0, 8}; /* a mean's 1/n follows n from 8 (symshape.c) */
  int64_t c0 = kiln_counter_value("UncachedCompile");
  for (int s = 0; s < 6; s++) {
    int64_t n = sizes[s];
    float x[64], got[64];
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i + s);
    const int64_t xs[1] = {n};
    /* y = x * 2 - sum(x) / n: the mean's 1/n follows n */
    kiln_tensor t = kiln_from_host(x, KILN_F32, 1, xs);
    kiln_tensor y = kiln_keep(kiln_sub(kiln_mul_c(t, 2.0), kiln_mean(t, 0, NULL, true)));
    kiln_mark_step();
    KT_CHECK(kiln_to_host(y, got, sizeof(float) * (size_t)n) == KILN_OK);
    double mean = 0;
    for (int64_t i = 0; i < n; i++) mean += x[i] / (double)n;
    for (int64_t i = 0; i < n; i++) KT_NEAR(got[i], 2.0 * x[i] - mean, 1e-5);
    kiln_release(y);
  }
  /* 9 and 12: the first compile and the family; 1 and 0: their own; 53, 8: planned */
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 4);
  kiln_shutdown();
}

/* A rank or a dtype that changes is no size: each variant compiles. */
KT_TEST(rank_or_dtype_changes_compile_per_variant) {
  start(KILN_SWITCH_ON);
  int64_t c0 = kiln_counter_value("UncachedCompile"), p0 = kiln_counter_value("DynamicPlan");
  for (int s = 0; s < 6; s++) {
    static double xd[64];
    static float xf[64];
    for (int i = 0; i < 64; i++) xd[i] = xf[i] = (float)i;
    const int64_t s2[2] = {4, 8}, s3[3] = {2, 4, 8};
    kiln_tensor t = s % 2 ? kiln_from_host(xf, KILN_F32, s % 3 ? 2 : 3, s % 3 ? s2 : s3)
                          : kiln_from_host(xd, KILN_F64, s % 3 ? 2 : 3, s % 3 ? s2 : s3);
    kiln_tensor y = kiln_keep(kiln_sum(kiln_exp(t), 0, NULL, false));
    kiln_mark_step();
    double v = kiln_item_f64(y);
    KT_CHECK(v > 0);
    kiln_release(y);
  }
  /* f64 rank 3 (s 0), f32 rank 2 (1, 5), f64 rank 2 (2, 4), f32 rank 3 (3) */
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 4);
  KT_EQ_INT(kiln_counter_value("DynamicPlan") - p0, 0);
  kiln_shutdown();
}

/* f64 loss(w) = mean over B rows of tanh(x w)^2 (x [B, 5], w [5, 2]) and its
 * gradient by kiln_backward, at B through a family. */
static double loss_and_grad(int64_t B, const double *w, double *grad) {
  static double x[64 * 5];
  for (int64_t i = 0; i < B * 5; i++) x[i] = hval(B, i, 3);
  const int64_t xs[2] = {B, 5}, ws[2] = {5, 2};
  kiln_tensor tx = kiln_dynamic(kiln_from_host(x, KILN_F64, 2, xs), 0);
  kiln_tensor tw = kiln_param(kiln_from_host(w, KILN_F64, 2, ws));
  kiln_requires_grad(tw);
  kiln_tensor t = kiln_tanh(kiln_matmul(tx, tw));
  kiln_tensor loss = kiln_keep(kiln_mean(kiln_mul(t, t), 0, NULL, false));
  if (grad) kiln_backward(loss);
  kiln_tensor g = grad ? kiln_keep(kiln_grad(tw)) : (kiln_tensor){0, 0};
  kiln_mark_step();
  double v = kiln_item_f64(loss);
  if (grad) kiln_to_host(g, grad, 10 * sizeof *grad), kiln_release(g);
  kiln_release(loss);
  kiln_release(tw);
  return v;
}

KT_TEST(gradients_of_one_family_at_two_sizes) {
  start(KILN_SWITCH_ON);
  double w[10];
  for (int i = 0; i < 10; i++) w[i] = hval(i, 0, 5) * 0.5;
  int64_t c0 = kiln_counter_value("UncachedCompile");
  for (int s = 0; s < 2; s++) {
    int64_t B = s ? 41 : 23;
    double grad[10];
    loss_and_grad(B, w, grad);
    for (int k = 0; k < 10; k++) {
      double wp[10], wm[10], h = 1e-6;
      memcpy(wp, w, sizeof wp);
      memcpy(wm, w, sizeof wm);
      wp[k] += h;
      wm[k] -= h;
      double fd = (loss_and_grad(B, wp, NULL) - loss_and_grad(B, wm, NULL)) / (2 * h);
      KT_CHECK_MSG(fabs(grad[k] - fd) <= 1e-7 + 1e-5 * fabs(fd), "B %lld: dloss/dw[%d] %.12g, finite difference %.12g",
                   (long long)B, k, grad[k], fd);
    }
  }
  /* the loss-and-gradient graph and the loss graph, each compiled once (x
   * is marked) and planned at the second size */
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 2);
  KT_CHECK(kiln_counter_value("DynamicPlan") >= 2);
  kiln_shutdown();
}

/* A Transformer encoder layer (pre-norm, GELU, dropout 0.1, 4 heads) trained
 * with AdamW on sequences of varying length with a padding mask, the loss a
 * cross-entropy with ignore_index over the tokens: the final weights of
 * linear1 (64 x 32) in out. Returns the compiles of the loop. */
static int64_t train_encoder(float *out) {
  kiln_encoder_layer *l = NULL;
  kiln_encoder_layer_create(32, 4, 64, 0.1, KILN_ACTIVATION_GELU, KILN_NORM_PRE, 1e-5, 7, &l);
  kiln_linear *head = NULL;
  kiln_linear_create(32, 5, true, 8, &head);
  kiln_tensor ps[32];
  int np = kiln_module_params(&l->m, NULL, ps, 24);
  np += kiln_module_params(&head->m, NULL, ps + np, 32 - np);
  for (int k = 0; k < np; k++) kiln_requires_grad(ps[k]);
  kiln_adamw_opts ao = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  kiln_optim_create_adamw(np, ps, &ao, &opt);
  kiln_mark_step();
  static const int64_t lens[] = {24, 41, 17, 64, 9, 33, 41};
  int64_t c0 = kiln_counter_value("UncachedCompile");
  for (int s = 0; s < 7; s++) {
    int64_t T = lens[s];
    static float x[2 * 64 * 32];
    static int64_t y[2 * 64];
    static uint8_t pad[2 * 64];
    for (int64_t i = 0; i < 2 * T * 32; i++) x[i] = hval(s, i, 7);
    for (int64_t i = 0; i < 2 * T; i++) {
      pad[i] = i % T >= T - 3 && i >= T; /* the second sequence's last 3 tokens are padding */
      y[i] = pad[i] ? -100 : (int64_t)((uint64_t)(hval(s, i, 8) * 1000 + 1000) % 5);
    }
    const int64_t xs[3] = {2, T, 32}, ms[2] = {2, T}, ys[1] = {2 * T};
    kiln_tensor tx = kiln_from_host(x, KILN_F32, 3, xs);
    kiln_attn_opts ao2 = {.key_padding_mask = kiln_from_host(pad, KILN_BOOL, 2, ms), .training = true, .seed = 100 + (uint64_t)s};
    kiln_tensor h = kiln_encoder_layer_forward(l, tx, &ao2);
    const int64_t fs[2] = {2 * T, 32};
    kiln_tensor logits = kiln_linear_forward(head, kiln_reshape(h, 2, fs));
    kiln_tensor loss = kiln_cross_entropy(logits, kiln_from_host(y, KILN_I64, 1, ys), -100, 0.0);
    kiln_backward(loss);
    kiln_optim_step(opt);
    kiln_optim_zero_grad(opt);
    kiln_mark_step();
  }
  int64_t compiles = kiln_counter_value("UncachedCompile") - c0;
  KT_CHECK_MSG(kiln_to_host(l->linear1->weight, out, 64 * 32 * sizeof *out) == KILN_OK, "%s", kiln_last_error());
  kiln_optim_destroy(opt);
  kiln_linear_destroy(head);
  kiln_encoder_layer_destroy(l);
  return compiles;
}

KT_TEST(an_encoder_layer_trains_the_same_with_a_varying_length) {
  static float off[64 * 32], on[64 * 32];
  start(KILN_SWITCH_OFF);
  int64_t c_off = train_encoder(off);
  kiln_shutdown();
  start(KILN_SWITCH_ON);
  int64_t p0 = kiln_counter_value("DynamicPlan"), r0 = kiln_counter_value("DynamicPassesReused");
  int64_t c_on = train_encoder(on);
  int64_t planned = kiln_counter_value("DynamicPlan") - p0, reused = kiln_counter_value("DynamicPassesReused") - r0;
  kiln_shutdown();
  KT_EQ_INT(c_off, 6); /* six distinct lengths */
  KT_EQ_INT(c_on, 2);
  KT_EQ_INT(planned, 4);
  KT_EQ_INT(reused, 4);
  int bad = 0;
  for (int i = 0; i < 64 * 32 && bad < 5; i++)
    if (!(fabsf(on[i] - off[i]) <= 2e-5f + 2e-4f * fabsf(off[i]))) {
      KT_FAIL("linear1.weight[%d]: dynamic %.9g, static %.9g", i, on[i], off[i]);
      bad++;
    }
}

/* A next-token objective: inputs x[:, :-1], targets x[:, 1:] (sizes T - 1)
 * and a causal pad of one step (T + 1, cut back to T): one compile for every
 * length, the same loss as each length compiled for itself. */
static double shifted_loss(int64_t T, int64_t *compiles) {
  static float x[4 * 80];
  for (int64_t i = 0; i < 4 * T; i++) x[i] = hval(T, i, 9);
  int64_t c0 = kiln_counter_value("UncachedCompile");
  const int64_t xs[2] = {4, T}, lo[2] = {0, 1}, hi[2] = {0, 0};
  kiln_tensor tx = kiln_from_host(x, KILN_F32, 2, xs);
  kiln_tensor in = kiln_slice(tx, 1, 0, T - 1, 1), tgt = kiln_slice(tx, 1, 1, T, 1);
  kiln_tensor prev = kiln_slice(kiln_pad(tx, lo, hi, 0.0), 1, 0, T, 1); /* x shifted right by one */
  kiln_tensor d = kiln_sub(kiln_mul_c(in, 0.5), tgt);
  kiln_tensor loss = kiln_keep(kiln_add(kiln_mean(kiln_mul(d, d), 0, NULL, false),
                                        kiln_mean(kiln_mul(prev, tx), 0, NULL, false)));
  kiln_mark_step();
  double v = kiln_item_f64(loss);
  kiln_release(loss);
  *compiles += kiln_counter_value("UncachedCompile") - c0;
  return v;
}

KT_TEST(a_shifted_sequence_is_one_family) {
  static const int64_t lens[] = {17, 40, 9, 64, 33, 3};
  double on[6], off[6];
  int64_t c_on = 0, c_off = 0;
  start(KILN_SWITCH_OFF);
  for (int k = 0; k < 6; k++) off[k] = shifted_loss(lens[k], &c_off);
  kiln_shutdown();
  start(KILN_SWITCH_ON);
  int64_t p0 = kiln_counter_value("DynamicPlan");
  for (int k = 0; k < 6; k++) on[k] = shifted_loss(lens[k], &c_on);
  int64_t planned = kiln_counter_value("DynamicPlan") - p0;
  kiln_shutdown();
  KT_EQ_INT(c_off, 6);
  KT_EQ_INT(c_on, 2);
  KT_EQ_INT(planned, 4);
  for (int k = 0; k < 6; k++) KT_NEAR(on[k], off[k], 1e-6 + 1e-5 * fabs(off[k]));
}

/* Constant folding that turns a size into a value (the sum of a fill over
 * the varying axis: 0.5 T) does not commute with the sizes: the family's
 * graph through the passes is never reused for such a graph, and every
 * size's result is right (against the host). */
KT_TEST(a_size_folded_into_a_constant_is_never_reused) {
  start(KILN_SWITCH_ON);
  static const int64_t lens[] = {9, 17, 33, 12, 40, 9};
  static float x[40 * 4];
  int64_t r0 = kiln_counter_value("DynamicPassesReused");
  for (int s = 0; s < 6; s++) {
    int64_t T = lens[s];
    for (int64_t i = 0; i < T * 4; i++) x[i] = hval(T, i, 5);
    const int64_t xs[2] = {T, 4}, cs[2] = {1, 4};
    const int axis0[1] = {0};
    kiln_tensor tx = kiln_dynamic(kiln_from_host(x, KILN_F32, 2, xs), 0);
    kiln_tensor fill = kiln_expand(kiln_full(KILN_F32, 2, cs, 0.5), 2, xs); /* [T, 4] of 0.5 */
    kiln_tensor z = kiln_mul(kiln_add(fill, tx), tx);                       /* meets x: its T varies */
    kiln_tensor y = kiln_add(kiln_sum(fill, 1, axis0, false), kiln_sum(z, 1, axis0, false));
    float got[4];
    KT_CHECK(kiln_to_host(y, got, sizeof got) == KILN_OK);
    for (int j = 0; j < 4; j++) {
      double want = 0.5 * (double)T;
      for (int64_t i = 0; i < T; i++) want += (0.5 + x[i * 4 + j]) * x[i * 4 + j];
      KT_CHECK_MSG(fabs(got[j] - want) <= 1e-4 * (1 + fabs(want)), "T %lld: y[%d] %.9g, want %.9g", (long long)T, j,
                   got[j], want);
    }
  }
  KT_EQ_INT(kiln_counter_value("DynamicPassesReused") - r0, 0);
  kiln_shutdown();
}

/* What a user sees: the text dump of the compile made for any size names
 * its symbol and symbolic sizes; kiln_explain marks the planned sizes. */
KT_TEST(dumps_and_explain_show_the_family) {
  char dir[] = "/tmp/kiln-dyn-dumps-XXXXXX";
  KT_CHECK(mkdtemp(dir) != NULL);
  setenv("KILN_SAVE_GRAPHS", dir, 1);
  start(KILN_SWITCH_ON);
  float x[80];
  for (int i = 0; i < 80; i++) x[i] = (float)i;
  for (int s = 0; s < 4; s++) {
    const int64_t xs[2] = {8 + 4 * s, 4}; /* at most 20 x 4 */
    kiln_tensor y = kiln_keep(kiln_sum(kiln_exp(kiln_mul_c(kiln_from_host(x, KILN_F32, 2, xs), 0.01)), 0, NULL, false));
    kiln_mark_step();
    KT_CHECK(kiln_item_f64(y) > 0);
    kiln_release(y);
  }
  const char *ex = kiln_explain();
  KT_STR_CONTAINS(ex, "(compiled for any size)");
  KT_STR_CONTAINS(ex, "(a new size: planned, not compiled)");
  kiln_shutdown();
  unsetenv("KILN_SAVE_GRAPHS");
  /* the second compile (graph 2) is the family's: its dump says so */
  char cmd[256], buf[4096] = "";
  snprintf(cmd, sizeof cmd, "cat %s/graph-0002-*.txt", dir);
  FILE *p = popen(cmd, "r");
  size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
  buf[n] = 0;
  if (p) pclose(p);
  KT_STR_CONTAINS(buf, "# dynamic: s0 = dim 0 of input 0 (12 here)");
  KT_STR_CONTAINS(buf, "compiled once for any size");
  KT_STR_CONTAINS(buf, "# dynamic: %0 [s0,4]");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  KT_CHECK(system(cmd) == 0);
}

/* sum(exp(x * c)) over [B, 4], x marked dynamic on axis 0; checked against
 * the host in f64. */
static void run_scaled(int64_t B, double c) {
  static float x[64 * 4];
  for (int64_t i = 0; i < B * 4; i++) x[i] = hval(B, i, 7);
  const int64_t xs[2] = {B, 4};
  kiln_tensor tx = kiln_dynamic(kiln_from_host(x, KILN_F32, 2, xs), 0);
  float got[4];
  KT_CHECK_MSG(kiln_to_host(kiln_sum(kiln_exp(kiln_mul_c(tx, c)), 1, (const int[]){0}, false), got, sizeof got) ==
                   KILN_OK,
               "%s", kiln_last_error());
  for (int j = 0; j < 4; j++) {
    double want = 0;
    for (int64_t i = 0; i < B; i++) want += exp((double)x[i * 4 + j] * c);
    KT_CHECK_MSG(fabs(got[j] - want) <= 1e-5 * (1 + fabs(want)), "B %lld c %g: y[%d] %.9g, want %.9g", (long long)B, c,
                 j, got[j], want);
  }
  kiln_mark_step();
}

/* A planned size keeps no traced graph of its own: a hit on it is verified
 * by binding the trace to the family's graph at the size's symbol values
 * (kiln_lin_binds), and after a few hits the size keeps its own. Every
 * graph is forced onto one cache key, so that only that check tells the
 * programs apart: another program of the same shapes (another constant)
 * must compile and compute its own result, never run the planned size's. */
KT_TEST(a_planned_size_is_verified_against_its_family) {
  start(KILN_SWITCH_ON);
  kiln_runtime_test_force_key(0x1234);
  int64_t c0 = kiln_counter_value("UncachedCompile"), p0 = kiln_counter_value("DynamicPlan");
  int64_t h0 = kiln_counter_value("CachedCompile");
  run_scaled(8, 0.01);  /* the family */
  run_scaled(12, 0.01); /* planned */
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 1);
  KT_EQ_INT(kiln_counter_value("DynamicPlan") - p0, 1);
  for (int r = 0; r < 6; r++) run_scaled(12, 0.01); /* hits: bound to the family, then its own graph */
  KT_EQ_INT(kiln_counter_value("CachedCompile") - h0, 6);
  run_scaled(12, 0.02); /* another program: its own compile (a family of its own) */
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 2);
  run_scaled(20, 0.02); /* a new size of each program: planned from the right family */
  run_scaled(20, 0.01);
  run_scaled(20, 0.01);
  run_scaled(12, 0.01);
  KT_EQ_INT(kiln_counter_value("UncachedCompile") - c0, 2);
  KT_EQ_INT(kiln_counter_value("DynamicPlan") - p0, 3);
  KT_CHECK(kiln_counter_value("GraphCacheKeyCollision") > 0);
  KT_STR_CONTAINS(kiln_explain(), "(a new size: planned, not compiled)");
  kiln_runtime_test_force_key(0);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(a_batch_size_that_changes_compiles_twice), KT_CASE(marked_dimensions_compile_once),
        KT_CASE(a_family_reduces_rows_longer_than_a_stack),
        KT_CASE(a_bounded_dimension_refuses_sizes_above_its_bound),
        KT_CASE(sizes_zero_and_one_are_their_own_graphs), KT_CASE(rank_or_dtype_changes_compile_per_variant),
        KT_CASE(gradients_of_one_family_at_two_sizes), KT_CASE(an_encoder_layer_trains_the_same_with_a_varying_length),
        KT_CASE(a_shifted_sequence_is_one_family), KT_CASE(a_size_folded_into_a_constant_is_never_reused),
        KT_CASE(dumps_and_explain_show_the_family), KT_CASE(a_planned_size_is_verified_against_its_family))
