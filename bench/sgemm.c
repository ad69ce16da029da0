/* sgemm 1024^3 through kiln_matmul, in GFLOP/s, against the FP32 FMA peak
 * measured in this process on the same number of threads
 * ($KILN_NUM_THREADS or all cores; bench/run.sh runs 1 and 2). Targets:
 * >= 80% of peak on 1 thread, >= 75% on 2 or more. Each step is timed from
 * kiln_mark_step() to kiln_wait(), median of the steps. */
#include "machine.h"

enum { STEPS = 30 };
#define N 1024

int main(void) {
  int threads = kb_threads();
  double peak = kb_fma_peak_gflops(threads, 0.3);

  KB_CHECK(kiln_init(NULL));
  int64_t shape[2] = {N, N};
  float *a = malloc(sizeof(float) * N * N), *b = malloc(sizeof(float) * N * N), *c = malloc(sizeof(float) * N * N);
  if (!a || !b || !c) return 1;
  for (int i = 0; i < N * N; i++) {
    a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  }
  kiln_tensor ta = kiln_param(kiln_from_host(a, KILN_F32, 2, shape));
  kiln_tensor tb = kiln_param(kiln_from_host(b, KILN_F32, 2, shape));
  kiln_tensor tc = kiln_param(kiln_zeros(KILN_F32, 2, shape));
  static double t[STEPS];
  for (int s = 0; s < STEPS + 3; s++) {
    kiln_assign(tc, kiln_matmul(ta, tb));
    double t0 = kb_now_s();
    KB_CHECK(kiln_mark_step());
    KB_CHECK(kiln_wait());
    if (s >= 3) t[s - 3] = kb_now_s() - t0;
  }
  KB_CHECK(kiln_to_host(tc, c, sizeof(float) * N * N));
  /* Oracle: a few entries in double. */
  for (int r = 0; r < N; r += 331)
    for (int col = 0; col < N; col += 257) {
      double ref = 0;
      for (int k = 0; k < N; k++) ref += (double)a[r * N + k] * (double)b[k * N + col];
      if (fabs(ref - (double)c[r * N + col]) > 1e-3 * (1 + fabs(ref))) {
        fprintf(stderr, "sgemm: c[%d][%d] = %g, expected %g\n", r, col, (double)c[r * N + col], ref);
        return 1;
      }
    }
  double gflops = 2.0 * N * N * (double)N / kb_median(t, STEPS) / 1e9;
  double target = threads == 1 ? 0.80 : 0.75;
  char name[64], base[96], tgt[64];
  snprintf(name, sizeof name, "sgemm_1024_%dt_GFLOPs", threads);
  snprintf(base, sizeof base, "FP32 FMA peak %dt, %s (same run)", threads, kb_fma_isa());
  snprintf(tgt, sizeof tgt, ">= %.0f%% of peak", target * 100);
  kb_emit(&(kb_result){name, gflops, "GFLOP/s", base, peak, tgt, gflops >= target * peak});
  free(a);
  free(b);
  free(c);
  kiln_shutdown();
  return 0;
}
