/* Shared helpers of the benchmarks (header-only: each bench source is its own
 * program). Every benchmark prints, for each figure, one human line and one
 * machine line for bench/run.sh:
 *
 *   KILN_BENCH <tab> name <tab> value <tab> unit <tab> baseline_or_ceiling
 *              <tab> ceiling_value <tab> ratio <tab> target <tab> pass
 *
 * ratio is value / ceiling_value: for throughputs the fraction of the
 * machine's ceiling (higher is better), for latencies the multiple of the
 * baseline (lower is better). The target is an absolute statement checked
 * here; pass is 1 or 0. */
#ifndef KILN_BENCH_UTIL_H
#define KILN_BENCH_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/kiln.h"

static inline double kb_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Peak resident set (VmHWM) of this process in MiB; 0 if unknown. */
static inline double kb_peak_rss_mb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
  fclose(f);
  return kb / 1024.0;
}

static int kb_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v): the mean of the middle two for an even n, the
 * rule of src/base/stats.h (kept here: the benchmarks use the public API only). */
static inline double kb_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, kb_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Abort the benchmark (not the library) when kiln reports an error. */
#define KB_CHECK(expr)                                                                      \
  do {                                                                                      \
    kiln_status kb_s_ = (expr);                                                             \
    if (kb_s_ != KILN_OK) {                                                                 \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #expr,              \
              kiln_status_name(kb_s_), kiln_last_error());                                  \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

/* Number of threads kiln will use: $KILN_NUM_THREADS or all cores. */
static inline int kb_threads(void) {
  const char *s = getenv("KILN_NUM_THREADS");
  int n = s ? atoi(s) : 0;
  if (n <= 0) {
    FILE *f = popen("nproc 2>/dev/null", "r");
    if (f) {
      if (fscanf(f, "%d", &n) != 1) n = 0;
      pclose(f);
    }
  }
  return n > 0 ? n : 1;
}

/* 1 when /proc/cpuinfo lists the CPU flag `flag` (a whole word), else 0. */
static inline int kb_cpu_flag(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  char line[8192];
  int found = 0;
  size_t n = strlen(flag);
  while (!found && fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    for (char *p = strstr(line, flag); p && !found; p = strstr(p + 1, flag))
      found = (p == line || p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n' || p[n] == 0);
    break;
  }
  fclose(f);
  return found;
}

typedef struct kb_result {
  const char *name;
  double value;
  const char *unit;
  const char *baseline;  /* what the value is compared with */
  double baseline_value; /* measured in the same run, same unit */
  const char *target;    /* e.g. "<= 100 ns/op", ">= 80% of peak" */
  int pass;
} kb_result;

static inline void kb_emit(const kb_result *r) {
  double ratio = r->baseline_value != 0 ? r->value / r->baseline_value : 0;
  printf("%-26s %12.3f %-8s | %s = %.3f | ratio %.3f | target %s: %s\n", r->name, r->value, r->unit, r->baseline,
         r->baseline_value, ratio, r->target, r->pass ? "PASS" : "MISS");
  printf("KILN_BENCH\t%s\t%.6g\t%s\t%s\t%.6g\t%.4f\t%s\t%d\n", r->name, r->value, r->unit, r->baseline,
         r->baseline_value, ratio, r->target, r->pass);
  fflush(stdout);
}

#endif
