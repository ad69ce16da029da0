/* The machine's ceilings, measured by our own microbenchmarks in the same
 * process as the figure they bound (see docs/machine.md):
 *  - FP32 FMA peak: every thread runs independent FMA chains on registers
 *    (AVX-512, else AVX2+FMA, else scalar), enough chains to cover the FMA
 *    latency on both FMA ports;
 *  - STREAM triad: a[i] = b[i] + s*c[i] on arrays far larger than the
 *    caches, split across threads, best of several repetitions, counting
 *    3 x 4 bytes per element as STREAM does.
 * The measuring code is the library's (src/profiler/ceilings.c). */
#ifndef KILN_BENCH_MACHINE_H
#define KILN_BENCH_MACHINE_H

#include <stddef.h>

#include "bench_util.h"
#include "profiler/ceilings.h"

/* The microbenchmarks live in the library (src/profiler/ceilings.c): the
 * profiler's summary compares kernels with the same ceilings. */
static inline const char *kb_fma_isa(void) { return kiln_prof_fma_isa(); }
/* FP32 FMA peak in GFLOP/s on `threads` threads, about `seconds` long. */
static inline double kb_fma_peak_gflops(int threads, double seconds) {
  return kiln_prof_fma_peak_gflops(threads, seconds);
}
/* STREAM triad bandwidth in GB/s (1e9 bytes) on n floats per array; best
 * of `reps`. Returns 0 if the arrays cannot be allocated. */
static inline double kb_triad_gbps(int threads, size_t n, int reps) { return kiln_prof_triad_gbps(threads, n, reps); }

#endif
