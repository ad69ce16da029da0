/* Capture analysis: steps, device duty cycle, idle gaps with what the host
 * did during them, top kernels. kiln_profiler_summary prints it; tests
 * check the numbers directly.
 *
 * Thread-safety: pure functions of their arguments.
 */
#ifndef KILN_PROFILER_SUMMARY_H
#define KILN_PROFILER_SUMMARY_H

#include <stdio.h>

#include "kiln/profiler.h"
#include "profiler/capture.h"

/* An idle gap of every kernel lane inside a step. */
typedef struct kiln_prof_gap {
  uint64_t begin_ns, end_ns;
  /* host time overlapping the gap per kind (each kind's intervals merged
   * first, so nested events count once); user_ns: gap time that no kiln
   * host event covers (the user's own code, or idle). */
  double kind_ns[KILN_PROF_KIND_COUNT];
  double user_ns;
  const char *region; /* innermost user annotation at the gap's middle, or NULL */
} kiln_prof_gap;

typedef struct kiln_prof_step_stats {
  const char *name; /* the step region's name ("capture" when none) */
  int64_t step;     /* step number, -1 when none */
  uint64_t begin_ns, end_ns;
  double busy_ns;   /* time at least one kernel lane was busy */
  int n_gaps;       /* gaps over the threshold, in time order */
  kiln_prof_gap *gaps;
} kiln_prof_step_stats;

typedef struct kiln_prof_kernel_stats {
  const char *name;
  int64_t calls;   /* instances: overlapping lane events of one name are one call */
  double wall_ns;  /* sum over calls of (last lane end - first lane begin) */
  double flops, bytes;
} kiln_prof_kernel_stats;

typedef struct kiln_prof_analysis {
  int n_steps;
  kiln_prof_step_stats *steps;
  int n_kernels; /* sorted by wall_ns, descending */
  kiln_prof_kernel_stats *kernels;
  int n_lanes, n_host_threads;
  uint64_t n_events, dropped;
  double gap_threshold_ms, gap_threshold_fraction;
} kiln_prof_analysis;

/* Analyze c (opts may be NULL: defaults). Errors: OUT_OF_MEMORY. */
kiln_status kiln_prof_analyze(const kiln_prof_capture *c, const kiln_profiler_summary_opts *opts,
                              kiln_prof_analysis *out, kiln_err *err);
void kiln_prof_analysis_free(kiln_prof_analysis *a);
/* Print the analysis (the text of kiln_profiler_summary; `what` names the
 * source file). ceilings of 0 are printed as unknown. */
/* kiln_profiler_summary with the message in *err instead of the sticky
 * status (kiln_profiler_summary_at records it there). */
kiln_status kiln_prof_summary_run(const char *path, FILE *f, const kiln_profiler_summary_opts *opts, kiln_err *err);
void kiln_prof_analysis_print(const kiln_prof_analysis *a, const kiln_prof_capture *c, const char *what,
                              double peak_gflops, double peak_gbps, int top, FILE *f);

#endif
