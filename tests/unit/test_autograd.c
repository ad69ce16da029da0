/* Autograd contracts: accumulation across backward calls and steps,
 * zero_grad, no-grad regions (including hash-consed twins of no-grad
 * nodes), a training loop that compiles once and runs one execution per
 * step, and errors with the caller's file:line. Expected values are
 * computed here in plain C. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>

#include "autograd/autograd_internal.h"
#include "kt.h"

static void start(void) {
  kiln_shutdown();
  kiln_autograd_reset();
  kiln_clear_error();
  kiln_metrics_clear();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

static const int64_t S4[1] = {4};
static const double W0[4] = {0.5, -1.0, 2.0, 3.0};

static kiln_tensor param4(void) {
  kiln_tensor w = kiln_keep(kiln_from_host(W0, KILN_F64, 1, S4));
  kiln_requires_grad(w);
  return w;
}
static void read4(kiln_tensor t, double *out) { KT_CHECK(kiln_to_host(t, out, 4 * sizeof(double)) == KILN_OK); }

KT_TEST(gradients_accumulate_until_zero_grad) {
  start();
  kiln_tensor w = param4();
  KT_CHECK(kiln_grad(w).gen == 0); /* none yet */
  KT_CHECK(kiln_backward(kiln_sum(kiln_mul(w, w), 0, NULL, 0)) == KILN_OK);
  kiln_tensor g1 = kiln_grad(w);
  KT_CHECK(kiln_backward(kiln_sum(kiln_mul_c(w, 3.0), 0, NULL, 0)) == KILN_OK);
  KT_CHECK(kiln_grad(w).index == g1.index && kiln_grad(w).gen == g1.gen); /* same handle, accumulated */
  KT_CHECK(kiln_mark_step() == KILN_OK);
  double g[4];
  read4(kiln_grad(w), g);
  for (int i = 0; i < 4; i++) KT_NEAR(g[i], 2 * W0[i] + 3, 1e-12);
  /* a later step keeps adding */
  KT_CHECK(kiln_backward(kiln_sum(w, 0, NULL, 0)) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  read4(kiln_grad(w), g);
  for (int i = 0; i < 4; i++) KT_NEAR(g[i], 2 * W0[i] + 4, 1e-12);
  /* zero_grad forgets it */
  kiln_zero_grad(w);
  KT_CHECK(kiln_grad(w).gen == 0);
  KT_CHECK(!kiln_is_valid(g1)); /* the old gradient tensor was released */
  KT_CHECK(kiln_backward(kiln_sum(kiln_mul_c(w, 2.0), 0, NULL, 0)) == KILN_OK);
  read4(kiln_grad(w), g);
  for (int i = 0; i < 4; i++) KT_NEAR(g[i], 2, 0);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  kiln_release(w);
  KT_CHECK(kiln_last_status() == KILN_OK);
}

KT_TEST(no_grad_region_blocks_gradient) {
  start();
  kiln_tensor w = param4();
  KT_CHECK(kiln_grad_enabled());
  kiln_no_grad_begin();
  kiln_no_grad_begin(); /* nested */
  kiln_tensor stop = kiln_mul(w, w);
  kiln_no_grad_end();
  KT_CHECK(!kiln_grad_enabled());
  kiln_tensor z = kiln_exp(w); /* still inside the outer region */
  kiln_no_grad_end();
  KT_CHECK(kiln_grad_enabled());
  /* y is the same expression as z, traced with gradients on: it must not
   * be merged with the no-grad node (and neither may w*w below). */
  kiln_tensor y = kiln_exp(w);
  kiln_tensor sq = kiln_mul(w, w);
  kiln_tensor loss = kiln_add(kiln_sum(kiln_mul(w, stop), 0, NULL, 0),
                              kiln_add(kiln_sum(y, 0, NULL, 0), kiln_sum(z, 0, NULL, 0)));
  loss = kiln_add(loss, kiln_sum(sq, 0, NULL, 0));
  KT_CHECK(kiln_backward(loss) == KILN_OK);
  double g[4];
  read4(kiln_grad(w), g);
  for (int i = 0; i < 4; i++) KT_NEAR(g[i], W0[i] * W0[i] + exp(W0[i]) + 2 * W0[i], 1e-12);
  /* the values of no-grad results are the same as with gradients */
  double zv[4];
  read4(z, zv);
  for (int i = 0; i < 4; i++) KT_NEAR(zv[i], exp(W0[i]), 1e-12);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  /* a loss computed only inside a no-grad region has nothing to differentiate */
  kiln_no_grad_begin();
  kiln_tensor l2 = kiln_sum(kiln_exp(w), 0, NULL, 0);
  kiln_no_grad_end();
  KT_CHECK(kiln_backward(l2) == KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  kiln_release(w);
}

KT_TEST(no_grad_end_without_begin_is_an_error) {
  start();
  int line = __LINE__ + 1;
  kiln_no_grad_end();
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  char where[64];
  snprintf(where, sizeof where, "test_autograd.c:%d", line);
  KT_STR_CONTAINS(kiln_last_error(), where);
  kiln_clear_error();
  KT_CHECK(kiln_grad_enabled());
}

/* Linear regression y = X w + b trained with plain gradient descent: the
 * step (forward, backward, update) compiles once and executes once. */
KT_TEST(training_loop_compiles_once) {
  start();
  enum { N = 8, D = 3, STEPS = 12 };
  double X[N][D], Y[N], wt[D] = {1.0, -2.0, 0.5}, bt = 0.3;
  for (int i = 0; i < N; i++) {
    Y[i] = bt;
    for (int j = 0; j < D; j++) {
      X[i][j] = sin(1.7 * i + 0.9 * j) * 2;
      Y[i] += X[i][j] * wt[j];
    }
  }
  double w0[D] = {0, 0, 0}, b0 = 0;
  int64_t sx[2] = {N, D}, sy[2] = {N, 1}, sw[2] = {D, 1}, sb[1] = {1};
  kiln_tensor x = kiln_keep(kiln_from_host(X, KILN_F64, 2, sx));
  kiln_tensor y = kiln_keep(kiln_from_host(Y, KILN_F64, 2, sy));
  kiln_tensor w = kiln_keep(kiln_from_host(w0, KILN_F64, 2, sw));
  kiln_tensor b = kiln_keep(kiln_from_host(&b0, KILN_F64, 1, sb));
  kiln_requires_grad(w);
  kiln_requires_grad(b);
  /* the same loop in plain C */
  double cw[D] = {0, 0, 0}, cb = 0, lr = 0.05;
  for (int step = 0; step < STEPS; step++) {
    kiln_zero_grad(w);
    kiln_zero_grad(b);
    kiln_tensor err = kiln_sub(kiln_add(kiln_matmul(x, w), b), y);
    kiln_tensor loss = kiln_mean(kiln_mul(err, err), 0, NULL, 0);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    kiln_assign(w, kiln_sub(w, kiln_mul_s(kiln_grad(w), lr)));
    kiln_assign(b, kiln_sub(b, kiln_mul_s(kiln_grad(b), lr)));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    double gw[D] = {0}, gb = 0;
    for (int i = 0; i < N; i++) {
      double e = cb - Y[i];
      for (int j = 0; j < D; j++) e += X[i][j] * cw[j];
      for (int j = 0; j < D; j++) gw[j] += 2 * e * X[i][j] / N;
      gb += 2 * e / N;
    }
    for (int j = 0; j < D; j++) cw[j] -= lr * gw[j];
    cb -= lr * gb;
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
  KT_EQ_INT(kiln_counter_value("CachedCompile"), STEPS - 1);
  kiln_metric_stats ex;
  KT_CHECK(kiln_metric_data("ExecutionsPerStep", &ex) == 0);
  KT_EQ_INT(ex.count, STEPS);
  KT_NEAR(ex.min, 1, 0);
  KT_NEAR(ex.max, 1, 0);
  double kw[D], kb;
  KT_CHECK(kiln_to_host(w, kw, sizeof kw) == KILN_OK);
  KT_CHECK(kiln_to_host(b, &kb, sizeof kb) == KILN_OK);
  for (int j = 0; j < D; j++) KT_NEAR(kw[j], cw[j], 1e-10);
  KT_NEAR(kb, cb, 1e-10);
  /* and it learns: the loss went down from its start */
  double l0 = 0, l1 = 0;
  for (int i = 0; i < N; i++) {
    double e = cb - Y[i];
    for (int j = 0; j < D; j++) e += X[i][j] * cw[j];
    l0 += Y[i] * Y[i];
    l1 += e * e;
  }
  KT_CHECK(l1 < 0.5 * l0);
  kiln_release(x);
  kiln_release(y);
  kiln_release(w);
  kiln_release(b);
  KT_CHECK(kiln_last_status() == KILN_OK);
}

KT_TEST(errors_carry_the_callers_line) {
  start();
  kiln_tensor w = param4();
  char where[64];
  /* non-scalar loss without a seed */
  int line = __LINE__ + 1;
  KT_EQ_INT(kiln_backward(kiln_mul(w, w)), KILN_ERR_INVALID_ARGUMENT);
  snprintf(where, sizeof where, "test_autograd.c:%d", line);
  KT_STR_CONTAINS(kiln_last_error(), where);
  KT_STR_CONTAINS(kiln_last_error(), "[4]");
  kiln_clear_error();
  /* a seed of the wrong shape */
  double s3[3] = {1, 2, 3};
  kiln_tensor seed = kiln_from_host(s3, KILN_F64, 1, ((int64_t[]){3}));
  KT_EQ_INT(kiln_backward_with(kiln_mul(w, w), seed), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "seed");
  kiln_clear_error();
  /* a loss that depends on no requiring-grad tensor (argmax has no gradient) */
  kiln_tensor l = kiln_sum(kiln_cast(kiln_argmax(w, 0, 0), KILN_F64), 0, NULL, 0);
  KT_EQ_INT(kiln_backward(l), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "requires grad");
  kiln_clear_error();
  /* integer tensors cannot require grad */
  int32_t iv[2] = {1, 2};
  line = __LINE__ + 1;
  kiln_requires_grad(kiln_from_host(iv, KILN_I32, 1, ((int64_t[]){2})));
  snprintf(where, sizeof where, "test_autograd.c:%d", line);
  KT_STR_CONTAINS(kiln_last_error(), where);
  kiln_clear_error();
  /* a stale loss handle */
  kiln_tensor stale = kiln_sum(w, 0, NULL, 0);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_EQ_INT(kiln_backward(stale), KILN_ERR_STALE_HANDLE);
  kiln_clear_error();
  /* a poisoned loss propagates without a new message */
  kiln_tensor bad = kiln_add(w, kiln_from_host(s3, KILN_F64, 1, ((int64_t[]){3})));
  kiln_clear_error();
  KT_CHECK(kiln_backward(kiln_sum(bad, 0, NULL, 0)) != KILN_OK);
  kiln_clear_error();
  kiln_mark_step();
  kiln_clear_error();
  /* releasing a parameter drops its gradient too */
  KT_CHECK(kiln_backward(kiln_sum(w, 0, NULL, 0)) == KILN_OK);
  kiln_tensor g = kiln_grad(w);
  kiln_release(w);
  KT_CHECK(kiln_grad(w).gen == 0);
  KT_CHECK(!kiln_is_valid(g));
  KT_CHECK(kiln_mark_step() == KILN_OK);
}

/* A backward pass that makes many more nodes than the forward pass: the
 * list of created nodes grows (and moves) during the sweep. It used to be
 * read through a stale pointer (a crash in a BERT fine-tuning step; a
 * heap-use-after-free under ASan). y = sum(w * c^n) by n multiplications
 * with varying constants: dy/dw = prod(c). */
KT_TEST(a_backward_that_grows_the_node_list) {
  start();
  kiln_tensor w = param4();
  kiln_tensor y = w;
  double want = 1.0;
  for (int i = 0; i < 3000; i++) {
    double c = 1.0 + (i % 7 - 3) * 1e-4;
    y = kiln_tanh(kiln_mul_c(y, c));
    want *= c;
  }
  (void)want;
  KT_CHECK(kiln_backward(kiln_sum(y, 0, NULL, 0)) == KILN_OK);
  double g[4], x[4];
  read4(kiln_grad(w), g);
  /* the chain rule in plain C: d tanh(c v)/dv = c (1 - tanh(c v)^2) */
  for (int k = 0; k < 4; k++) {
    double v = W0[k], d = 1.0;
    for (int i = 0; i < 3000; i++) {
      double c = 1.0 + (i % 7 - 3) * 1e-4, t = tanh(c * v);
      d *= c * (1 - t * t);
      v = t;
    }
    x[k] = d;
    KT_NEAR(g[k], x[k], 1e-9 + 1e-9 * fabs(x[k]));
  }
  kiln_release(w);
  KT_CHECK(kiln_mark_step() == KILN_OK);
}

KT_MAIN(KT_CASE(gradients_accumulate_until_zero_grad), KT_CASE(a_backward_that_grows_the_node_list), KT_CASE(no_grad_region_blocks_gradient),
        KT_CASE(no_grad_end_without_begin_is_an_error), KT_CASE(training_loop_compiles_once),
        KT_CASE(errors_carry_the_callers_line))
