/* The machine's ceilings, measured by our own microbenchmarks in the same
 * process as the figure they bound (see docs/machine.md):
 *  - FP32 FMA peak: every thread runs independent FMA chains on registers
 *    (AVX-512, else AVX2+FMA, else scalar), enough chains to cover the FMA
 *    latency on both FMA ports;
 *  - STREAM triad: a[i] = b[i] + s*c[i] on arrays far larger than the
 *    caches, split across threads, best of several repetitions, counting
 *    3 x 4 bytes per element as STREAM does.
 * Header-only (each bench source is its own program). */
#ifndef KILN_BENCH_MACHINE_H
#define KILN_BENCH_MACHINE_H

#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* 16 chains x 16 lanes x 2 flops per iteration. */
__attribute__((target("avx512f"), noinline)) static float kb_fma_avx512(long iters) {
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

/* 12 chains x 8 lanes x 2 flops per iteration (16 ymm registers). */
__attribute__((target("avx2,fma"), noinline)) static float kb_fma_avx2(long iters) {
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
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

static inline int kb_has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static inline int kb_has_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
static inline const char *kb_fma_isa(void) { return kb_has_avx512() ? "avx512" : kb_has_avx2() ? "avx2" : "none"; }
/* Flops per iteration of the kernel kb_fma_run uses. */
static inline double kb_fma_flops_per_iter(void) { return kb_has_avx512() ? 512.0 : 192.0; }

static inline float kb_fma_run(long iters) {
  if (kb_has_avx512()) return kb_fma_avx512(iters);
  if (kb_has_avx2()) return kb_fma_avx2(iters);
  float a = 1.0f; /* no SIMD FMA: a scalar chain, only so the code runs */
  for (long i = 0; i < iters * 96; i++) a = a * 0.9999999f + 1e-7f;
  return a;
}

typedef struct kb_fma_job {
  long iters;
  volatile float sink;
} kb_fma_job;

static void *kb_fma_thread(void *p) {
  kb_fma_job *j = p;
  j->sink = kb_fma_run(j->iters);
  return NULL;
}

/* FP32 FMA peak in GFLOP/s on `threads` threads, about `seconds` long. */
static inline double kb_fma_peak_gflops(int threads, double seconds) {
  if (threads < 1) threads = 1;
  if (threads > 256) threads = 256;
  long iters = 1000000;
  double t0 = kb_now_s();
  volatile float sink = kb_fma_run(iters); /* calibrate, and wake the core up */
  (void)sink;
  double dt = kb_now_s() - t0;
  if (dt > 0) iters = (long)((double)iters * seconds / dt);
  if (iters < 1000) iters = 1000;
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    pthread_t th[256];
    kb_fma_job jobs[256];
    double s = kb_now_s();
    for (int i = 0; i < threads; i++) {
      jobs[i].iters = iters / 3;
      pthread_create(&th[i], NULL, kb_fma_thread, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    double e = kb_now_s() - s;
    double g = kb_fma_flops_per_iter() * (double)(iters / 3) * threads / e / 1e9;
    if (g > best) best = g;
  }
  return best;
}

typedef struct kb_triad_job {
  float *a, *b, *c;
  size_t lo, hi;
  float s;
  int init;
} kb_triad_job;

static void *kb_triad_thread(void *p) {
  kb_triad_job *j = p;
  float *restrict a = j->a;
  const float *restrict b = j->b, *restrict c = j->c;
  if (j->init) { /* first touch by the thread that will use the pages */
    for (size_t i = j->lo; i < j->hi; i++) {
      j->a[i] = 0.0f;
      j->b[i] = 1.0f;
      j->c[i] = 2.0f;
    }
    return NULL;
  }
  const float s = j->s;
  for (size_t i = j->lo; i < j->hi; i++) a[i] = b[i] + s * c[i];
  return NULL;
}

static void kb_triad_pass(float *a, float *b, float *c, size_t n, int threads, int init) {
  pthread_t th[256];
  kb_triad_job jobs[256];
  for (int i = 0; i < threads; i++) {
    jobs[i] = (kb_triad_job){a, b, c, n * (size_t)i / (size_t)threads, n * (size_t)(i + 1) / (size_t)threads, 3.0f,
                             init};
    pthread_create(&th[i], NULL, kb_triad_thread, &jobs[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
}

/* STREAM triad bandwidth in GB/s (1e9 bytes) on n floats per array; best
 * of `reps`. Returns 0 if the arrays cannot be allocated. */
static inline double kb_triad_gbps(int threads, size_t n, int reps) {
  if (threads < 1) threads = 1;
  if (threads > 256) threads = 256;
  float *a = aligned_alloc(64, n * sizeof(float)), *b = aligned_alloc(64, n * sizeof(float)),
        *c = aligned_alloc(64, n * sizeof(float));
  double best = 0;
  if (a && b && c) {
    kb_triad_pass(a, b, c, n, threads, 1);
    kb_triad_pass(a, b, c, n, threads, 0); /* warm-up */
    for (int r = 0; r < reps; r++) {
      double s = kb_now_s();
      kb_triad_pass(a, b, c, n, threads, 0);
      double e = kb_now_s() - s;
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

#endif
