/* The machine's ceilings for the summary: FP32 FMA peak and STREAM-triad
 * bandwidth, measured once per process (about 0.3 s) the same way
 * bench/machine.h measures them (docs/machine.md), or taken from
 * $KILN_PEAK_GFLOPS / $KILN_PEAK_GBPS. A documented singleton
 * (pthread_once). */
#include "profiler/ceilings.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

static float scalar_fma(long iters) {
  float a = 1.0f;
  for (long i = 0; i < iters * 8; i++) a = a * 0.9999999f + 1e-7f;
  return a;
}

static int g_isa; /* 2: avx512, 1: avx2, 0: scalar */
static double flops_per_iter(void) { return g_isa == 2 ? 512.0 : g_isa == 1 ? 192.0 : 16.0; }
static float fma_run(long iters) {
  return g_isa == 2 ? fma_avx512(iters) : g_isa == 1 ? fma_avx2(iters) : scalar_fma(iters);
}

typedef struct job {
  long iters;
  float *a, *b, *c;
  size_t lo, hi;
  volatile float sink;
} job;

static void *fma_thread(void *p) {
  job *j = p;
  j->sink = fma_run(j->iters);
  return NULL;
}

static void *triad_thread(void *p) {
  job *j = p;
  for (size_t i = j->lo; i < j->hi; i++) j->a[i] = j->b[i] + 3.0f * j->c[i];
  return NULL;
}

static void *init_thread(void *p) {
  job *j = p;
  for (size_t i = j->lo; i < j->hi; i++) j->a[i] = 0.0f, j->b[i] = 1.0f, j->c[i] = 2.0f;
  return NULL;
}

static double run_threads(void *(*fn)(void *), job *jobs, int threads) {
  pthread_t th[64];
  int started = 0;
  double t0 = now_s();
  for (int i = 0; i < threads; i++)
    if (pthread_create(&th[i], NULL, fn, &jobs[i]) == 0) started++;
    else fn(&jobs[i]);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  return now_s() - t0;
}

static kiln_prof_ceilings g_ceil;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void measure(void) {
  const char *ef = getenv("KILN_PEAK_GFLOPS"), *eb = getenv("KILN_PEAK_GBPS");
  double f = ef ? strtod(ef, NULL) : 0, b = eb ? strtod(eb, NULL) : 0;
  g_ceil.from_env = (f > 0) && (b > 0);
  long nc = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = nc < 1 ? 1 : nc > 64 ? 64 : (int)nc;
  job jobs[64] = {{0}};
  if (!(f > 0)) {
    g_isa = __builtin_cpu_supports("avx512f") ? 2 : (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
    long iters = 200000;
    double t0 = now_s();
    volatile float s = fma_run(iters);
    (void)s;
    double dt = now_s() - t0;
    if (dt > 0) iters = (long)((double)iters * 0.05 / dt); /* ~50 ms per pass */
    if (iters < 1000) iters = 1000;
    for (int rep = 0; rep < 2; rep++) {
      for (int i = 0; i < threads; i++) jobs[i].iters = iters;
      double e = run_threads(fma_thread, jobs, threads);
      double g = flops_per_iter() * (double)iters * threads / e / 1e9;
      if (g > f) f = g;
    }
  }
  if (!(b > 0)) {
    size_t n = (size_t)8 << 20; /* 3 x 32 MiB: beyond the caches */
    float *a = aligned_alloc(64, n * 4), *x = aligned_alloc(64, n * 4), *y = aligned_alloc(64, n * 4);
    if (a && x && y) {
      for (int i = 0; i < threads; i++)
        jobs[i] = (job){0, a, x, y, n * (size_t)i / (size_t)threads, n * (size_t)(i + 1) / (size_t)threads, 0};
      run_threads(init_thread, jobs, threads);
      for (int rep = 0; rep < 3; rep++) {
        double e = run_threads(triad_thread, jobs, threads);
        double g = 12.0 * (double)n / e / 1e9;
        if (rep > 0 && g > b) b = g;
      }
    }
    free(a), free(x), free(y);
  }
  g_ceil.gflops = f;
  g_ceil.gbps = b;
}

kiln_prof_ceilings kiln_prof_machine_ceilings(void) {
  pthread_once(&g_once, measure);
  return g_ceil;
}
