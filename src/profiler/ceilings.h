/* The machine's FP32 FMA peak and memory bandwidth, for putting achieved
 * kernel rates in context. */
#ifndef KILN_PROFILER_CEILINGS_H
#define KILN_PROFILER_CEILINGS_H

#include <stddef.h>

typedef struct kiln_prof_ceilings {
  double gflops; /* FP32 FMA peak, all online CPUs, GFLOP/s */
  double gbps;   /* STREAM triad, GB/s (1e9 bytes) */
  int from_env;  /* 1: both from $KILN_PEAK_GFLOPS / $KILN_PEAK_GBPS */
} kiln_prof_ceilings;

/* FP32 FMA peak in GFLOP/s on `threads` threads (1..256), about `seconds`
 * long: independent FMA chains on registers (AVX-512, else AVX2+FMA, else
 * scalar), best of 3 (docs/machine.md). Also what `make bench` reports. */
double kiln_prof_fma_peak_gflops(int threads, double seconds);
/* STREAM triad bandwidth in GB/s (1e9 bytes) on `threads` threads over
 * arrays of n floats, best of `reps`; 0 if the arrays cannot be allocated. */
double kiln_prof_triad_gbps(int threads, size_t n, int reps);
/* "avx512", "avx2" or "none": the FMA kernel the peak is measured with. */
const char *kiln_prof_fma_isa(void);

/* Measured on first use (about 0.3 s; each value may come from the
 * environment instead), then cached for the process. Thread-safe. */
kiln_prof_ceilings kiln_prof_machine_ceilings(void);

#endif
