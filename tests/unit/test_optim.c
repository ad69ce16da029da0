/* Optimizers: SGD (momentum, dampening, Nesterov, weight decay) and AdamW
 * over several steps with given gradient tensors against a plain-C
 * implementation of torch.optim's update formulas; the lr schedule; global
 * norm clipping; that a changing learning rate never recompiles; and
 * kiln_optim_zero_grad (torch's optimizer.zero_grad(set_to_none=True)). */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/optim.h>

#include "kt.h"

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_metrics_clear();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

static uint64_t rng_state = 777;
static float frand(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(rng_state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

#define NP 2
static const int64_t sizes[NP] = {12, 5};
static const int64_t shape0[2] = {3, 4}, shape1[1] = {5};

static kiln_tensor make(const float *a, int i) {
  return i == 0 ? kiln_from_host(a, KILN_F32, 2, shape0) : kiln_from_host(a, KILN_F32, 1, shape1);
}

typedef struct {
  int adam;
  kiln_sgd_opts sgd;
  kiln_adamw_opts ad;
} cfg;

/* Runs `steps` steps of an optimizer in kiln and in plain C with the same
 * gradients and learning rates; compares parameters and state. */
static void run_case(cfg c, int steps) {
  start();
  float p0[NP][12];
  double ref[NP][12], s1[NP][12] = {{0}}, s2[NP][12] = {{0}};
  kiln_tensor params[NP];
  for (int i = 0; i < NP; i++) {
    for (int k = 0; k < sizes[i]; k++) ref[i][k] = p0[i][k] = frand();
    params[i] = kiln_param(make(p0[i], i));
  }
  kiln_optim *o = NULL;
  if (c.adam)
    kiln_optim_create_adamw(NP, params, &c.ad, &o);
  else
    kiln_optim_create_sgd(NP, params, &c.sgd, &o);
  KT_CHECK(o != NULL);
  if (!o) return;
  for (int t = 1; t <= steps; t++) {
    double lr = (c.adam ? c.ad.lr : c.sgd.lr) * (1.0 + 0.3 * t); /* changes every step */
    kiln_optim_set_lr(o, lr);
    float g[NP][12];
    kiln_tensor grads[NP];
    for (int i = 0; i < NP; i++) {
      for (int k = 0; k < sizes[i]; k++) g[i][k] = frand();
      grads[i] = make(g[i], i);
    }
    KT_CHECK(kiln_optim_step_tensors(o, NP, params, grads) == KILN_OK);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    for (int i = 0; i < NP; i++)
      for (int k = 0; k < sizes[i]; k++) {
        double p = ref[i][k], gk = g[i][k];
        if (!c.adam) { /* torch.optim.sgd._single_tensor_sgd */
          const kiln_sgd_opts *s = &c.sgd;
          gk += s->weight_decay * p;
          if (s->momentum > 0) {
            s1[i][k] = t == 1 ? gk : s->momentum * s1[i][k] + (1 - s->dampening) * gk;
            gk = s->nesterov ? gk + s->momentum * s1[i][k] : s1[i][k];
          }
          ref[i][k] = p - lr * gk;
        } else { /* torch.optim.adamw._single_tensor_adamw */
          const kiln_adamw_opts *a = &c.ad;
          p *= 1 - lr * a->weight_decay;
          s1[i][k] = a->beta1 * s1[i][k] + (1 - a->beta1) * gk;
          s2[i][k] = a->beta2 * s2[i][k] + (1 - a->beta2) * gk * gk;
          double bc1 = 1 - pow(a->beta1, t), bc2 = 1 - pow(a->beta2, t);
          double denom = sqrt(s2[i][k]) / sqrt(bc2) + a->eps;
          ref[i][k] = p - lr / bc1 * s1[i][k] / denom;
        }
      }
  }
  KT_EQ_INT(kiln_optim_step_count(o), steps);
  for (int i = 0; i < NP; i++) {
    float got[12], st[2][12];
    KT_CHECK(kiln_to_host(params[i], got, (size_t)sizes[i] * 4) == KILN_OK);
    for (int k = 0; k < sizes[i]; k++) KT_NEAR(got[k], ref[i][k], 2e-5 * (1 + fabs(ref[i][k])));
    const char *names[2];
    kiln_tensor state[2];
    int ns = kiln_optim_state(o, i, names, state, 2);
    KT_EQ_INT(ns, c.adam ? 2 : (c.sgd.momentum > 0 ? 1 : 0));
    for (int j = 0; j < ns; j++) {
      KT_CHECK(kiln_to_host(state[j], st[j], (size_t)sizes[i] * 4) == KILN_OK);
      for (int k = 0; k < sizes[i]; k++) {
        double want = j == 0 ? s1[i][k] : s2[i][k];
        KT_NEAR(st[j][k], want, 2e-5 * (1 + fabs(want)));
      }
    }
    if (ns > 0) KT_CHECK(strcmp(names[0], c.adam ? "exp_avg" : "momentum_buffer") == 0);
    kiln_release(params[i]);
  }
  kiln_optim_destroy(o);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(sgd_plain) { run_case((cfg){.sgd = {.lr = 0.1}}, 4); }
KT_TEST(sgd_momentum_weight_decay) { run_case((cfg){.sgd = {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}}, 5); }
KT_TEST(sgd_nesterov) {
  run_case((cfg){.sgd = {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.05, .nesterov = true}}, 5);
}
KT_TEST(sgd_dampening) { run_case((cfg){.sgd = {.lr = 0.05, .momentum = 0.9, .dampening = 0.3}}, 5); }
KT_TEST(adamw_steps) {
  run_case((cfg){.adam = 1, .ad = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01}}, 6);
}
KT_TEST(adamw_no_decay_other_betas) {
  run_case((cfg){.adam = 1, .ad = {.lr = 3e-3, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6}}, 5);
}

/* After the state exists, ten steps with a new lr each compile one graph. */
KT_TEST(changing_lr_compiles_once) {
  start();
  float w0[12] = {0};
  kiln_tensor p = kiln_param(make(w0, 0));
  kiln_adamw_opts ao = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
  kiln_optim *o = NULL;
  kiln_optim_create_adamw(1, &p, &ao, &o);
  KT_CHECK(kiln_mark_step() == KILN_OK); /* materializes the zero state */
  kiln_metrics_clear();
  for (int t = 0; t < 10; t++) {
    kiln_optim_set_lr(o, kiln_lr_warmup_cosine(t, 3, 10, 1e-2, 1e-4));
    float g[12];
    for (int k = 0; k < 12; k++) g[k] = frand();
    kiln_tensor gt = make(g, 0);
    KT_CHECK(kiln_optim_step_tensors(o, 1, &p, &gt) == KILN_OK);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
  KT_EQ_INT(kiln_counter_value("CachedCompile"), 9);
  kiln_optim_destroy(o);
  kiln_release(p);
  kiln_shutdown();
}

KT_TEST(lr_schedule_values) {
  double base = 0.1, mn = 0.001;
  KT_NEAR(kiln_lr_warmup_cosine(0, 4, 20, base, mn), base * 1 / 4, 1e-15);
  KT_NEAR(kiln_lr_warmup_cosine(3, 4, 20, base, mn), base, 1e-15);
  KT_NEAR(kiln_lr_warmup_cosine(4, 4, 20, base, mn), base, 1e-15); /* cosine starts at the top */
  KT_NEAR(kiln_lr_warmup_cosine(12, 4, 20, base, mn), mn + (base - mn) * 0.5, 1e-15);
  KT_NEAR(kiln_lr_warmup_cosine(8, 4, 20, base, mn), mn + (base - mn) * 0.5 * (1 + cos(M_PI * 0.25)), 1e-15);
  KT_NEAR(kiln_lr_warmup_cosine(20, 4, 20, base, mn), mn, 1e-15);
  KT_NEAR(kiln_lr_warmup_cosine(1000, 4, 20, base, mn), mn, 1e-15);
  KT_NEAR(kiln_lr_warmup_cosine(0, 0, 10, base, 0), base, 1e-15); /* no warm-up */
}

KT_TEST(clip_grad_norm_global) {
  start();
  float a[12], b[5];
  double sq = 0;
  for (int k = 0; k < 12; k++) a[k] = frand() * 3, sq += a[k] * a[k];
  for (int k = 0; k < 5; k++) b[k] = frand() * 3, sq += b[k] * b[k];
  double norm = sqrt(sq);
  for (int big = 0; big < 2; big++) {
    double max_norm = big ? norm * 2 : norm / 4;
    kiln_tensor g[2] = {make(a, 0), make(b, 1)}, out[2];
    kiln_tensor total = kiln_clip_grad_norm(2, g, out, max_norm);
    KT_NEAR(kiln_item_f64(total), norm, 1e-5 * norm);
    double scale = big ? 1.0 : max_norm / (norm + 1e-6);
    float ga[12], gb[5];
    KT_CHECK(kiln_to_host(out[0], ga, sizeof ga) == KILN_OK);
    KT_CHECK(kiln_to_host(out[1], gb, sizeof gb) == KILN_OK);
    for (int k = 0; k < 12; k++) KT_NEAR(ga[k], a[k] * scale, 1e-5);
    for (int k = 0; k < 5; k++) KT_NEAR(gb[k], b[k] * scale, 1e-5);
  }
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(optimizer_misuse_is_an_error) {
  start();
  float w[12] = {0};
  kiln_tensor p = kiln_param(make(w, 0)), q = kiln_param(make(w, 0));
  kiln_sgd_opts so = {.lr = 0.1, .momentum = 0, .nesterov = true};
  kiln_optim *bad = (kiln_optim *)&bad; /* not NULL: a failed create must clear it */
  KT_EQ_INT(kiln_optim_create_sgd(1, &p, &so, &bad), KILN_ERR_INVALID_ARGUMENT); /* Nesterov without momentum */
  KT_CHECK(bad == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  so.nesterov = false;
  kiln_optim *o = NULL;
  kiln_optim_create_sgd(1, &p, &so, &o);
  kiln_tensor g = make(w, 1); /* wrong shape */
  KT_EQ_INT(kiln_optim_step_tensors(o, 1, &p, &g), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  g = make(w, 0);
  KT_EQ_INT(kiln_optim_step_tensors(o, 1, &q, &g), KILN_ERR_INVALID_ARGUMENT); /* not its parameter */
  KT_STR_CONTAINS(kiln_last_error(), "test_optim.c");
  kiln_clear_error();
  KT_EQ_INT(kiln_optim_step_count(o), 0);
  kiln_optim_destroy(o);
  kiln_release(p);
  kiln_release(q);
  kiln_shutdown();
}

/* kiln_optim_zero_grad releases the gradient of every parameter (handles
 * stale, kiln_grad null) and the next backward accumulates from zero.
 * Expected gradients by hand: d/dw sum(w*w) = 2w, d/db sum(3b) = 3. */
KT_TEST(optim_zero_grad_restarts_accumulation) {
  start();
  float w0[12], b0[5];
  for (int i = 0; i < 12; i++) w0[i] = frand();
  for (int i = 0; i < 5; i++) b0[i] = frand();
  kiln_tensor ps[NP] = {kiln_param(make(w0, 0)), kiln_param(make(b0, 1))};
  for (int i = 0; i < NP; i++) kiln_requires_grad(ps[i]);
  kiln_sgd_opts so = {.lr = 0.1};
  kiln_optim *o = NULL;
  KT_CHECK(kiln_optim_create_sgd(NP, ps, &so, &o) == KILN_OK);
  kiln_optim_zero_grad(o); /* nothing to release yet: a no-op */
  KT_CHECK(kiln_grad(ps[0]).gen == 0 && kiln_grad(ps[1]).gen == 0);
  kiln_tensor loss = kiln_add(kiln_sum(kiln_mul(ps[0], ps[0]), 0, NULL, false),
                              kiln_sum(kiln_mul_c(ps[1], 3.0), 0, NULL, false));
  KT_CHECK(kiln_backward(loss) == KILN_OK);
  KT_CHECK(kiln_backward(loss) == KILN_OK); /* accumulates: 4w and 6 */
  KT_CHECK(kiln_mark_step() == KILN_OK);
  kiln_tensor g0 = kiln_grad(ps[0]), g1 = kiln_grad(ps[1]);
  float gw[12], gb[5];
  KT_CHECK(kiln_to_host(g0, gw, sizeof gw) == KILN_OK);
  KT_CHECK(kiln_to_host(g1, gb, sizeof gb) == KILN_OK);
  for (int i = 0; i < 12; i++) KT_NEAR(gw[i], 4 * w0[i], 1e-6);
  for (int i = 0; i < 5; i++) KT_NEAR(gb[i], 6, 0);
  kiln_optim_zero_grad(o);
  KT_CHECK(kiln_grad(ps[0]).gen == 0 && kiln_grad(ps[1]).gen == 0);
  KT_CHECK(!kiln_is_valid(g0) && !kiln_is_valid(g1)); /* released */
  /* from zero again: d/dw sum(2w) = 2, d/db sum(b) = 1 */
  KT_CHECK(kiln_backward(kiln_add(kiln_sum(kiln_mul_c(ps[0], 2.0), 0, NULL, false),
                                  kiln_sum(ps[1], 0, NULL, false))) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(kiln_to_host(kiln_grad(ps[0]), gw, sizeof gw) == KILN_OK);
  KT_CHECK(kiln_to_host(kiln_grad(ps[1]), gb, sizeof gb) == KILN_OK);
  for (int i = 0; i < 12; i++) KT_NEAR(gw[i], 2, 0);
  for (int i = 0; i < 5; i++) KT_NEAR(gb[i], 1, 0);
  kiln_optim_zero_grad(NULL); /* a no-op, like destroy */
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_optim_destroy(o);
  for (int i = 0; i < NP; i++) kiln_release(ps[i]);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(sgd_plain), KT_CASE(sgd_momentum_weight_decay), KT_CASE(sgd_nesterov), KT_CASE(sgd_dampening),
        KT_CASE(adamw_steps), KT_CASE(adamw_no_decay_other_betas), KT_CASE(changing_lr_compiles_once),
        KT_CASE(lr_schedule_values), KT_CASE(clip_grad_norm_global), KT_CASE(optimizer_misuse_is_an_error),
        KT_CASE(optim_zero_grad_restarts_accumulation))
