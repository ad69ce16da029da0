/* Data-parallel training steps (issue 14, §5): the MLP 784-1024-1024-10
 * (kiln_model_create(KILN_MODEL_MLP)), cross-entropy, plain SGD lr 0.01,
 * the gradients averaged over the ranks (kiln_ddp_all_reduce_grads, 25 MiB
 * buckets) every step. Run by bench/run.sh alone and under
 * `mpirun -np 2`, one thread per rank (KILN_NUM_THREADS=1).
 *
 * Each rank's batch is a fixed random [B, 784] with B = KILN_BENCH_DIST_BATCH
 * (per rank; default 128: the global batch 256 over 2 ranks). A step is:
 * kiln_from_host, forward, loss, kiln_backward, the all-reduce of the
 * gradients, kiln_optim_step, kiln_zero_grad, kiln_mark_step, kiln_wait,
 * timed from its first call to the end of kiln_wait (PyTorch DDP on the
 * CPU is synchronous, so both sides time the same thing); the figure is
 * rank 0's median of 50 steps after 10 warm-up steps (the first compiles),
 * the ranks starting together after a barrier (a one-element all-reduce).
 *
 * Alone it prints "KILN_DIST_STEP_MS <ms>" (the 1 rank x 1 thread step at
 * the same per-rank batch, for the scaling row). In a world of N, rank 0
 * emits two rows:
 *   dist-train-2x1    step ms vs PyTorch DDP (gloo, 2 processes x 1 thread,
 *                     bench/dist_train_ref.py: KILN_BENCH_TORCH_DDP_MS),
 *                     bar <= 0.7x
 *   dist-scaling-2x1  examples/s of the world vs 1 rank x 1 thread at the
 *                     same per-rank batch (KILN_BENCH_DIST_ONE_MS), bar >= 1.7x
 * A missing baseline: the row says so and its bar is not passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "kiln/kiln.h"

#define WARMUP 10
#define STEPS 50
#define MAXP 16

static double env_num(const char *name) {
  const char *s = getenv(name);
  return s && *s ? atof(s) : 0;
}

/* One step, waited for; its wall time in ms. */
static double step(kiln_model *m, kiln_optim *opt, int np, kiln_tensor *params, const float *xh, const int64_t *yh,
                   int64_t b) {
  double t0 = kb_now_s();
  const int64_t xs[2] = {b, 784};
  kiln_tensor x = kiln_from_host(xh, KILN_F32, 2, xs);
  kiln_tensor y = kiln_from_host(yh, KILN_I64, 1, &b);
  kiln_tensor loss = kiln_cross_entropy(kiln_model_forward(m, x, 1, 0), y, -100, 0.0);
  KB_CHECK(kiln_backward(loss));
  KB_CHECK(kiln_ddp_all_reduce_grads(np, params, 0));
  kiln_optim_step(opt);
  for (int i = 0; i < np; i++) kiln_zero_grad(params[i]);
  KB_CHECK(kiln_mark_step());
  KB_CHECK(kiln_wait());
  return (kb_now_s() - t0) * 1e3;
}

/* Every rank here before any goes on. */
static void barrier(void) {
  const int64_t one = 1;
  kiln_tensor t = kiln_all_reduce(kiln_ones(KILN_F32, 1, &one), KILN_REDUCE_SUM);
  float v;
  KB_CHECK(kiln_to_host(t, &v, sizeof v));
  KB_CHECK(kiln_mark_step());
}

static void emit(int world, int64_t b, double ms) {
  double torch_ms = env_num("KILN_BENCH_TORCH_DDP_MS"), one_ms = env_num("KILN_BENCH_DIST_ONE_MS");
  char name[64], base[160];
  snprintf(name, sizeof name, "dist-train-%dx1", world);
  snprintf(base, sizeof base, "PyTorch DDP gloo %dx1 step%s", world, torch_ms > 0 ? "" : " (missing)");
  kb_emit(&(kb_result){name, ms, "ms", base, torch_ms, "<= 0.7x PyTorch DDP", torch_ms > 0 && ms <= 0.7 * torch_ms});
  double ex_s = (double)(b * world) / (ms / 1e3), one_ex_s = one_ms > 0 ? (double)b / (one_ms / 1e3) : 0;
  snprintf(name, sizeof name, "dist-scaling-%dx1", world);
  snprintf(base, sizeof base, "kiln 1x1 at batch %lld%s", (long long)b, one_ms > 0 ? "" : " (missing)");
  kb_emit(&(kb_result){name, ex_s, "ex/s", base, one_ex_s, ">= 1.7x 1 rank", one_ex_s > 0 && ex_s >= 1.7 * one_ex_s});
}

int main(void) {
  KB_CHECK(kiln_init(NULL));
  KB_CHECK(kiln_dist_init());
  int rank = kiln_dist_rank(), world = kiln_dist_world_size();
  int64_t b = env_num("KILN_BENCH_DIST_BATCH") > 0 ? (int64_t)env_num("KILN_BENCH_DIST_BATCH") : 128;
  float *xh = malloc(sizeof *xh * (size_t)(b * 784));
  int64_t *yh = malloc(sizeof *yh * (size_t)b);
  srand(42 + (unsigned)rank); /* each rank its own data, as its shard would be */
  for (int64_t i = 0; i < b * 784; i++) xh[i] = (float)rand() / (float)RAND_MAX;
  for (int64_t i = 0; i < b; i++) yh[i] = rand() % 10;
  kiln_model *m = NULL;
  KB_CHECK(kiln_model_create(KILN_MODEL_MLP, 10, 1, &m));
  kiln_tensor params[MAXP];
  int np = kiln_model_params(m, NULL, params, MAXP);
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_optim *opt = NULL;
  KB_CHECK(kiln_optim_create_sgd(np, params, &(kiln_sgd_opts){.lr = 0.01}, &opt));
  KB_CHECK(kiln_mark_step());
  KB_CHECK(kiln_ddp_broadcast_params(np, params));
  KB_CHECK(kiln_mark_step());
  for (int s = 0; s < WARMUP; s++) step(m, opt, np, params, xh, yh, b);
  barrier();
  double t[STEPS];
  for (int s = 0; s < STEPS; s++) t[s] = step(m, opt, np, params, xh, yh, b);
  double ms = kb_median(t, STEPS);
  if (world == 1) {
    printf("1 rank x 1 thread, batch %lld: %.3f ms/step\nKILN_DIST_STEP_MS %.4f\n", (long long)b, ms, ms);
  } else if (rank == 0) {
    printf("%d ranks x 1 thread, batch %lld per rank (global %lld): %.3f ms/step (rank 0's median)\n", world,
           (long long)b, (long long)(b * world), ms);
    emit(world, b, ms);
  }
  kiln_optim_destroy(opt);
  kiln_model_destroy(m);
  free(xh);
  free(yh);
  kiln_shutdown();
  return 0;
}
