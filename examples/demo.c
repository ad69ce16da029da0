/* kiln demo: lazy tracing, one compile, cached steps, the metrics.
 *
 * Fits a linear model y = X w by gradient descent, with the gradient
 * written out by hand. Each iteration's operations are only recorded; the
 * step marker compiles the step's graph once into fused native kernels,
 * then every later step finds it in the cache and runs it asynchronously
 * while the next step is traced. */
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096 /* examples */
#define D 256  /* features */
#define STEPS 200

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(void) {
  if (kiln_init(NULL) != KILN_OK) {
    fprintf(stderr, "demo: %s\n", kiln_last_error());
    return 1;
  }
  printf("kiln %s, backend %s\n\n", kiln_version(), kiln_backend_name());

  /* Data: X ~ N(0,1), true weights w* = sin(i), y = X w* (+ noise). */
  int64_t xs[2] = {N, D}, ws[2] = {D, 1};
  kiln_tensor X = kiln_keep(kiln_rand_normal(KILN_F32, 2, xs, 42));
  static float wtrue[D];
  for (int i = 0; i < D; i++) wtrue[i] = sinf((float)i);
  kiln_tensor wstar = kiln_from_host(wtrue, KILN_F32, 2, ws);
  int64_t ys[2] = {N, 1};
  kiln_tensor noise = kiln_mul_c(kiln_rand_normal(KILN_F32, 2, ys, 7), 0.01);
  kiln_tensor Y = kiln_keep(kiln_add(kiln_matmul(X, wstar), noise));
  kiln_tensor W = kiln_keep(kiln_zeros(KILN_F32, 2, ws));
  kiln_tensor loss = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_mark_step(); /* materialize the data */

  printf("step  loss        time per step (averaged since the last line)\n");
  double t_first = 0, t_start = now_ms(), t_window = t_start;
  int window_steps = 0;
  for (int step = 0; step < STEPS; step++) {
    double t0 = now_ms();
    /* forward: residual r = X W - Y ; loss = mean(r^2) */
    kiln_tensor r = kiln_sub(kiln_matmul(X, W), Y);
    kiln_assign(loss, kiln_mean(kiln_mul(r, r), 0, NULL, 0));
    /* backward by hand: dL/dW = 2/N X^T r */
    kiln_tensor grad = kiln_mul_c(kiln_matmul(kiln_transpose(X, 0, 1), r), 2.0 / N);
    /* update: the learning rate is a graph input, so changing it never recompiles */
    double lr = 0.5 * (1.0 - (double)step / STEPS) + 0.05;
    kiln_assign(W, kiln_sub(W, kiln_mul_s(grad, lr)));
    if (kiln_mark_step() != KILN_OK) {
      fprintf(stderr, "demo: %s\n", kiln_last_error());
      return 1;
    }
    window_steps++;
    if (step % 40 == 0 || step == STEPS - 1) {
      /* loss was computed by the step: reading it waits for it, but does not cut the graph */
      double l = kiln_item_f64(loss);
      double t = now_ms();
      printf("%4d  %-10.6f  %.3f ms%s\n", step, l, (t - t_window) / window_steps,
             step == 0 ? "  (trace + compile + run)" : "");
      if (step == 0) t_first = t - t0;
      t_window = t;
      window_steps = 0;
    }
  }
  kiln_wait();
  double t_rest = now_ms() - t_start - t_first;
  double t_exec = 0;
  kiln_metric_stats ms;
  if (kiln_metric_data("ExecuteTime", &ms) == 0) t_exec = ms.sum / 1e6;

  static float wout[D];
  kiln_to_host(W, wout, sizeof wout);
  double err = 0;
  for (int i = 0; i < D; i++) err = fmax(err, fabs(wout[i] - wtrue[i]));

  printf("\nmax |W - w*| = %.4f\n", err);
  printf("first step %.1f ms (trace + compile + run), later steps %.3f ms on average\n", t_first,
         t_rest / (STEPS - 1));
  printf("\nWhat kiln did:\n");
  printf("  step markers        %lld\n", (long long)kiln_counter_value("MarkStep"));
  printf("  graphs compiled     %lld (UncachedCompile)\n", (long long)kiln_counter_value("UncachedCompile"));
  printf("  cache hits          %lld (CachedCompile)\n", (long long)kiln_counter_value("CachedCompile"));
  printf("  disk cache hits     %lld (PersistentCacheHit: run the demo again to see it)\n",
         (long long)kiln_counter_value("PersistentCacheHit"));
  printf("  executions          %lld, device time %.1f ms\n", (long long)kiln_counter_value("Execute"), t_exec);
  printf("  value reads         %lld (each waits for the device)\n",
         (long long)kiln_counter_value("TransferFromDevice"));
  if (kiln_metric_data("CompileTime", &ms) == 0)
    printf("  compile time        %.1f ms total over %lld compiles\n", ms.sum / 1e6, (long long)ms.count);
  printf("\nSet KILN_METRICS=1 for the full metrics report.\n");
  kiln_shutdown();
  return err < 0.05 ? 0 : 1;
}
