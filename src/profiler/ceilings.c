/* The machine's ceilings for the summary: FP32 FMA peak and STREAM-triad
 * bandwidth, measured once per process (about 0.3 s) by the same
 * microbenchmarks `make bench` reports (docs/machine.md), or taken from
 * $KILN_PEAK_GFLOPS / $KILN_PEAK_GBPS. A documented singleton
 * (pthread_once). */
#include "profiler/ceilings.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/config.h"

static double now_s(void) { return (double)kiln_now_ns() * 1e-9; }

/* 12 independent chains x 8 lanes x 2 flops per iteration. */
__attribute__((target("avx2,fma"), noinline)) static float fma_avx2(long iters) {
  __m256 a[12];
  for (int j = 0; j < 12; j++) a[j] = _mm256_set1_ps(1.0f + (float)j * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; j++) a[j] = _mm256_fmadd_ps(a[j], m, c);
  }
  __m256 s = a[0];
  for (int j = 1; j < 12; j++) s = _mm256_add_ps(s, a[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

/* 16 chains x 16 lanes x 2 flops per iteration. */
__attribute__((target("avx512f"), noinline)) static float fma_avx512(long iters) {
  __m512 a[16];
  for (int j = 0; j < 16; j++) a[j] = _mm512_set1_ps(1.0f + (float)j * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) a[j] = _mm512_fmadd_ps(a[j], m, c);
  }
  __m512 s = a[0];
  for (int j = 1; j < 16; j++) s = _mm512_add_ps(s, a[j]);
  return _mm512_reduce_add_ps(s);
}

static int has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static int has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
const char *kiln_prof_fma_isa(void) { return has_avx512() ? "avx512" : has_avx2() ? "avx2" : "none"; }
static double flops_per_iter(void) { return has_avx512() ? 512.0 : 192.0; }
static float fma_run(long iters) {
  if (has_avx512()) return fma_avx512(iters);
  if (has_avx2()) return fma_avx2(iters);
  float a = 1.0f; /* no SIMD FMA: a scalar chain, only so the code runs */
  for (long i = 0; i < iters * 96; i++) a = a * 0.9999999f + 1e-7f;
  return a;
}

typedef struct fma_job {
  long iters;
  volatile float sink;
} fma_job;

static void *fma_thread(void *p) {
  fma_job *j = p;
  j->sink = fma_run(j->iters);
  return NULL;
}

static int clamp_threads(int t) { return t < 1 ? 1 : t > 256 ? 256 : t; }

double kiln_prof_fma_peak_gflops(int threads, double seconds) {
  threads = clamp_threads(threads);
  long iters = 1000000;
  double t0 = now_s();
  volatile float sink = fma_run(iters); /* calibrate, and wake the core up */
  (void)sink;
  double dt = now_s() - t0;
  if (dt > 0) iters = (long)((double)iters * seconds / dt);
  if (iters < 3000) iters = 3000;
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    pthread_t th[256];
    fma_job jobs[256];
    int started[256];
    double s = now_s();
    for (int i = 0; i < threads; i++) {
      jobs[i].iters = iters / 3;
      started[i] = pthread_create(&th[i], NULL, fma_thread, &jobs[i]) == 0;
      if (!started[i]) fma_thread(&jobs[i]);
    }
    for (int i = 0; i < threads; i++)
      if (started[i]) pthread_join(th[i], NULL);
    double e = now_s() - s;
    double g = flops_per_iter() * (double)(iters / 3) * threads / e / 1e9;
    if (g > best) best = g;
  }
  return best;
}

typedef struct triad_job {
  float *a, *b, *c;
  size_t lo, hi;
  int init;
} triad_job;

static void *triad_thread(void *p) {
  triad_job *j = p;
  float *restrict a = j->a;
  float *restrict b = j->b, *restrict c = j->c;
  if (j->init) { /* first touch by the thread that will use the pages */
    for (size_t i = j->lo; i < j->hi; i++) a[i] = 0.0f, b[i] = 1.0f, c[i] = 2.0f;
    return NULL;
  }
  for (size_t i = j->lo; i < j->hi; i++) a[i] = b[i] + 3.0f * c[i];
  return NULL;
}

static void triad_pass(float *a, float *b, float *c, size_t n, int threads, int init) {
  pthread_t th[256];
  triad_job jobs[256];
  int started[256];
  for (int i = 0; i < threads; i++) {
    jobs[i] = (triad_job){a, b, c, n * (size_t)i / (size_t)threads, n * (size_t)(i + 1) / (size_t)threads, init};
    started[i] = pthread_create(&th[i], NULL, triad_thread, &jobs[i]) == 0;
    if (!started[i]) triad_thread(&jobs[i]);
  }
  for (int i = 0; i < threads; i++)
    if (started[i]) pthread_join(th[i], NULL);
}

double kiln_prof_triad_gbps(int threads, size_t n, int reps) {
  threads = clamp_threads(threads);
  float *a = aligned_alloc(64, n * sizeof(float)), *b = aligned_alloc(64, n * sizeof(float)),
        *c = aligned_alloc(64, n * sizeof(float));
  double best = 0;
  if (a && b && c && n) {
    triad_pass(a, b, c, n, threads, 1);
    triad_pass(a, b, c, n, threads, 0); /* warm-up */
    for (int r = 0; r < reps; r++) {
      double s = now_s();
      triad_pass(a, b, c, n, threads, 0);
      double e = now_s() - s;
      double g = 3.0 * sizeof(float) * (double)n / e / 1e9;
      if (g > best) best = g;
    }
    if (a[n / 2] != 7.0f) best = 0; /* 1 + 3*2: the loop really ran */
  }
  free(a);
  free(b);
  free(c);
  return best;
}

static kiln_prof_ceilings g_ceil;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void measure(void) {
  double f = 0, b = 0; /* malformed: measured */
  if (!kiln_cfg_double(kiln_cfg()->peak_gflops, &f)) f = 0;
  if (!kiln_cfg_double(kiln_cfg()->peak_gbps, &b)) b = 0;
  g_ceil.from_env = (f > 0) && (b > 0);
  long nc = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = nc < 1 ? 1 : (int)(nc > 256 ? 256 : nc);
  if (!(f > 0)) f = kiln_prof_fma_peak_gflops(threads, 0.15);
  if (!(b > 0)) b = kiln_prof_triad_gbps(threads, (size_t)8 << 20, 2); /* 3 x 32 MiB: beyond the caches */
  g_ceil.gflops = f;
  g_ceil.gbps = b;
}

kiln_prof_ceilings kiln_prof_machine_ceilings(void) {
  pthread_once(&g_once, measure);
  return g_ceil;
}
