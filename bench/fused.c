/* A fused chain of 8 elementwise ops on 16M f32 (one kernel: read x once,
 * write y once), in GB/s counting 1 read + 1 write of 16M floats, against
 * the STREAM triad bandwidth measured in this process on the same number of
 * threads. Target >= 70% of triad. Each step is timed from kiln_mark_step()
 * to kiln_wait() (host overhead included), median of the steps. */
#include "machine.h"

enum { STEPS = 30 };
#define N ((int64_t)16 << 20)

int main(void) {
  int threads = kb_threads();
  /* Ceiling first, while nothing else holds memory bandwidth. */
  double triad = kb_triad_gbps(threads, (size_t)64 << 20, 5);

  KB_CHECK(kiln_init(NULL));
  int64_t shape[1] = {N};
  float *host = malloc(sizeof(float) * (size_t)N);
  if (!host) return 1;
  for (int64_t i = 0; i < N; i++) host[i] = (float)(i % 1000) / 500.0f - 1.0f; /* [-1, 1) */
  kiln_tensor x = kiln_param(kiln_from_host(host, KILN_F32, 1, shape));
  kiln_tensor y = kiln_param(kiln_zeros(KILN_F32, 1, shape));
  static double t[STEPS];
  for (int s = 0; s < STEPS + 2; s++) {
    kiln_tensor h = kiln_mul_c(x, 1.5);
    h = kiln_add_c(h, 0.25);
    h = kiln_maximum_c(h, -1.0);
    h = kiln_mul_c(h, 0.5);
    h = kiln_minimum_c(h, 4.0);
    h = kiln_add_c(h, 0.125);
    h = kiln_abs(h);
    h = kiln_neg(h);
    kiln_assign(y, h);
    double t0 = kb_now_s();
    KB_CHECK(kiln_mark_step());
    KB_CHECK(kiln_wait());
    if (s >= 2) t[s - 2] = kb_now_s() - t0; /* the first steps compile */
  }
  KB_CHECK(kiln_to_host(y, host, sizeof(float) * (size_t)N));
  /* Oracle for a few elements, in double. */
  for (int64_t i = 0; i < N; i += N / 7 + 1) {
    double v = (double)(i % 1000) / 500.0 - 1.0;
    v = v * 1.5 + 0.25;
    v = v > -1.0 ? v : -1.0;
    v = v * 0.5;
    v = v < 4.0 ? v : 4.0;
    v = -(fabs(v + 0.125));
    if (fabs((double)host[i] - v) > 1e-5) {
      fprintf(stderr, "fused: y[%lld] = %g, expected %g\n", (long long)i, (double)host[i], v);
      return 1;
    }
  }
  double sec = kb_median(t, STEPS);
  double gbps = 2.0 * sizeof(float) * (double)N / sec / 1e9;
  char name[64], base[96];
  snprintf(name, sizeof name, "fused_chain8_16M_%dt_GBps", threads);
  snprintf(base, sizeof base, "STREAM triad %dt (same run)", threads);
  kb_emit(&(kb_result){name, gbps, "GB/s", base, triad, ">= 70% of triad", gbps >= 0.70 * triad});
  free(host);
  kiln_shutdown();
  return 0;
}
