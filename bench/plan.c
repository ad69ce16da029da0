/* Host cost of a new size of a dynamic family (issue 15 §4,
 * docs/dynamic-shapes.md): a graph of about 1,000 nodes (143 layers of
 * h = tanh(h @ W + b) on an input [B, 16] whose batch dimension is marked
 * dynamic; as traced, a layer is 7 graph nodes, 1,002 in all) traced at 12
 * batch sizes. The first size compiles the family; each later size is
 * planned (scheduled, laid out, bound to the family's kernels), not
 * compiled; each size ends its step (kiln_mark_step), as a training loop
 * does: without it every size's 1,000 traced tensors stay alive (a loop
 * that never marks a step keeps what it makes) and take the heap that each
 * plan would otherwise reuse. The figure is the median of the runtime's
 * metric DynamicPlanTime over the 11 planned sizes (bar: <= 200 us), beside
 * the CompileTime of the first size for scale (the disk cache off: a full
 * compile), and the graph's node count (metric GraphNodes). Every size's output is checked against the
 * same network computed on the host (f64), and the counters must say 1
 * compile and 11 plans. */
#include <stdint.h>

#include "bench_util.h"

enum { LAYERS = 143, WIDTH = 16, SIZES = 12 };

static const int64_t batch_sizes[SIZES] = {8, 24, 37, 64, 101, 128, 150, 199, 256, 311, 400, 512};

static uint64_t rng_state = 7;
static float rng_sym(void) { /* splitmix64, uniform in [-1, 1) */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)((double)(z >> 11) * 0x1.0p-52 - 1.0);
}

static float w_host[LAYERS][WIDTH * WIDTH], b_host[LAYERS][WIDTH];

/* The network on the host in f64: the oracle of every size. Returns the
 * largest absolute difference from got[B, WIDTH]. */
static double host_check(const float *x, int64_t B, const float *got) {
  double worst = 0;
  for (int64_t r = 0; r < B; r++) {
    double h[WIDTH], t[WIDTH];
    for (int j = 0; j < WIDTH; j++) h[j] = x[r * WIDTH + j];
    for (int l = 0; l < LAYERS; l++) {
      for (int j = 0; j < WIDTH; j++) {
        double s = b_host[l][j];
        for (int i = 0; i < WIDTH; i++) s += h[i] * w_host[l][i * WIDTH + j];
        t[j] = tanh(s);
      }
      memcpy(h, t, sizeof h);
    }
    for (int j = 0; j < WIDTH; j++) worst = fmax(worst, fabs(h[j] - got[r * WIDTH + j]));
  }
  return worst;
}

/* Trace, run and check one size; returns 0 when the result is right. */
static int run_size(int64_t B, const kiln_tensor *w, const kiln_tensor *b) {
  float *x = malloc((size_t)B * WIDTH * sizeof *x), *y = malloc((size_t)B * WIDTH * sizeof *y);
  if (!x || !y) return -1;
  for (int64_t i = 0; i < B * WIDTH; i++) x[i] = rng_sym();
  int64_t shape[2] = {B, WIDTH};
  kiln_tensor h = kiln_dynamic(kiln_from_host(x, KILN_F32, 2, shape), 0);
  for (int l = 0; l < LAYERS; l++) h = kiln_tanh(kiln_add(kiln_matmul(h, w[l]), b[l]));
  KB_CHECK(kiln_to_host(h, y, (size_t)B * WIDTH * sizeof *y));
  KB_CHECK(kiln_mark_step()); /* a step per size, as a training loop marks its steps */
  double err = host_check(x, B, y);
  free(x);
  free(y);
  if (!(err <= 1e-4)) {
    fprintf(stderr, "plan: batch %lld: output differs from the host's by %g\n", (long long)B, err);
    return -1;
  }
  return 0;
}

int main(void) {
  /* no disk cache: the first size's compile is a full compile every run */
  KB_CHECK(kiln_init(&(kiln_options){.disk_cache = KILN_SWITCH_OFF}));
  kiln_tensor w[LAYERS], b[LAYERS];
  int64_t ws[2] = {WIDTH, WIDTH}, bs[1] = {WIDTH};
  for (int l = 0; l < LAYERS; l++) { /* scaled so that tanh stays out of saturation */
    for (int i = 0; i < WIDTH * WIDTH; i++) w_host[l][i] = rng_sym() * 0.45f;
    for (int i = 0; i < WIDTH; i++) b_host[l][i] = rng_sym() * 0.1f;
    w[l] = kiln_keep(kiln_from_host(w_host[l], KILN_F32, 2, ws));
    b[l] = kiln_keep(kiln_from_host(b_host[l], KILN_F32, 1, bs));
  }
  kiln_metrics_clear();
  for (int i = 0; i < SIZES; i++)
    if (run_size(batch_sizes[i], w, b) != 0) return 1;
  int64_t compiles = kiln_counter_value("UncachedCompile"), plans = kiln_counter_value("DynamicPlan");
  int64_t families = kiln_counter_value("DynamicFamily");
  kiln_metric_stats pt = {0}, ct = {0}, nodes = {0};
  kiln_metric_data("DynamicPlanTime", &pt);
  kiln_metric_data("CompileTime", &ct);
  kiln_metric_data("GraphNodes", &nodes);
  printf("plan: %d sizes of a %.0f-node graph: %lld compile (%lld for any size), %lld planned; DynamicPlanTime "
         "p50 %.1f us (min %.1f, max %.1f); CompileTime %.1f ms\n",
         SIZES, nodes.max, (long long)compiles, (long long)families, (long long)plans, pt.p50 / 1e3,
         pt.min / 1e3, pt.max / 1e3, ct.max / 1e6);
  if (compiles != 1 || families != 1 || plans != SIZES - 1) {
    fprintf(stderr, "plan: expected 1 compile of a family and %d plans\n", SIZES - 1);
    return 1;
  }
  char base[128];
  snprintf(base, sizeof base, "full compile of the same %.0f-node graph (same run)", nodes.max);
  kb_emit(&(kb_result){"dynamic_plan_1k_nodes_us", pt.p50 / 1e3, "us", base, ct.max / 1e3,
                       "<= 200 us per new size", pt.p50 / 1e3 <= 200});
  for (int l = 0; l < LAYERS; l++) kiln_release(w[l]), kiln_release(b[l]);
  kiln_shutdown();
  return 0;
}
