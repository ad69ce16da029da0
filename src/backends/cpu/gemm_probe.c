/* kiln_gemm_probe and kiln_gemm_benchmark (kiln/doctor.h): the GEMM
 * library the cpu backend uses, and its speed. `kiln doctor` prints them. */
#include <stdlib.h>

#include "backends/cpu/gemm.h"
#include "base/clock.h"
#include "base/status.h"
#include "kiln/doctor.h"

kiln_status kiln_gemm_probe_at(int threads, kiln_gemm_info *out, kiln_loc loc) {
  if (!out) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_gemm_probe: out is NULL");
  out->library = NULL;
  if (threads < 1) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_gemm_probe: threads %d < 1", threads);
  if (kiln_gemm_init(threads) != 0)
    return kiln_error(KILN_ERR_UNSUPPORTED, loc, "kiln_gemm_probe: no GEMM library could be loaded");
  out->library = kiln_gemm_library();
  return KILN_OK;
}

kiln_status kiln_gemm_benchmark_at(int threads, int64_t n, double seconds, double *gflops, kiln_loc loc) {
  if (!gflops) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_gemm_benchmark: gflops is NULL");
  *gflops = 0;
  if (threads < 1) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_gemm_benchmark: threads %d < 1", threads);
  if (n < 1 || n > 8192)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_gemm_benchmark: n = %lld is outside 1..8192",
                      (long long)n);
  if (!(seconds >= 0 && seconds <= 60))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_gemm_benchmark: %g seconds is outside [0, 60]", seconds);
  if (kiln_gemm_init(threads) != 0)
    return kiln_error(KILN_ERR_UNSUPPORTED, loc, "kiln_gemm_benchmark: no GEMM library could be loaded");
  size_t bytes = sizeof(float) * (size_t)(n * n);
  float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "kiln_gemm_benchmark: out of memory for three %lldx%lld matrices",
                      (long long)n, (long long)n);
  }
  for (int64_t i = 0; i < n * n; i++) {
    a[i] = (float)((i * 7) % 13) / 13.0f;
    b[i] = (float)((i * 5) % 11) / 11.0f;
    c[i] = 0;
  }
  kiln_gemm_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm-up: threads, packing buffers */
  int reps = 0;
  uint64_t t0 = kiln_now_ns(), t;
  do {
    kiln_gemm_sgemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    reps++;
    t = kiln_now_ns();
  } while ((double)(t - t0) < seconds * 1e9 && reps < 1000);
  double rate = 2.0 * (double)n * (double)n * (double)n * reps / (double)(t > t0 ? t - t0 : 1);
  /* c[0] = sum_k a[k] b[k*n]: a spot check that the library computed something. */
  double ref = 0;
  for (int64_t k = 0; k < n; k++) ref += (double)a[k] * (double)b[k * n];
  double got = c[0];
  free(a);
  free(b);
  free(c);
  if (!(got > ref - 1e-2 * (ref + 1) && got < ref + 1e-2 * (ref + 1)))
    return kiln_error(KILN_ERR_INTERNAL, loc,
                      "kiln_gemm_benchmark: sgemm %lld^3 returned a wrong result (c[0] = %g, expected %g) from %s",
                      (long long)n, got, ref, kiln_gemm_library());
  *gflops = rate;
  return KILN_OK;
}
