/* The machine's FP32 FMA peak and memory bandwidth, for putting achieved
 * kernel rates in context. */
#ifndef KILN_PROFILER_CEILINGS_H
#define KILN_PROFILER_CEILINGS_H

typedef struct kiln_prof_ceilings {
  double gflops; /* FP32 FMA peak, all online CPUs, GFLOP/s */
  double gbps;   /* STREAM triad, GB/s (1e9 bytes) */
  int from_env;  /* 1: both from $KILN_PEAK_GFLOPS / $KILN_PEAK_GBPS */
} kiln_prof_ceilings;

/* Measured on first use (about 0.3 s; each value may come from the
 * environment instead), then cached for the process. Thread-safe. */
kiln_prof_ceilings kiln_prof_machine_ceilings(void);

#endif
