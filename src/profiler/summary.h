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

enum { KILN_PROF_CUT_BEFORE = 1, KILN_PROF_CUT_AFTER = 2 };

typedef struct kiln_prof_step_stats {
  const char *name; /* the step region's name ("capture" when none) */
  int64_t step;     /* step number, -1 when none */
  uint64_t begin_ns, end_ns;
  int cut;          /* KILN_PROF_CUT_* bits: the step began before / ends after the capture */
  double busy_ns;   /* time at least one kernel lane was busy */
  int n_gaps;       /* gaps over the threshold, in time order */
  kiln_prof_gap *gaps;
} kiln_prof_step_stats;

/* The steps of one region name, as kiln_profiler_summary aggregates them
 * (include/kiln/profiler.h defines the median, p90 and outlier rules). Only
 * whole steps (not cut by the capture's start or end) are in the sample. */
typedef struct kiln_prof_region_stats {
  const char *name;
  int n_steps;                   /* steps of this name in the capture */
  int n_whole;                   /* of which entirely inside it: the sample */
  double median_ns, p90_ns, max_ns, mad_ns; /* of the whole steps' wall times (0 when none) */
  double wall_ns, busy_ns;       /* sums over the whole steps */
  int n_gaps;                    /* idle gaps over the threshold in the whole steps */
  double outlier_ns;             /* wall time above which a whole step is an outlier; 0: none can be */
  int n_outliers;
  int *outliers;                 /* indices into kiln_prof_analysis.steps, slowest first */
} kiln_prof_region_stats;

typedef struct kiln_prof_kernel_stats {
  const char *name;
  int64_t calls;   /* instances: overlapping lane events of one name are one call */
  double wall_ns;  /* sum over calls of (last lane end - first lane begin) */
  double flops, bytes;
} kiln_prof_kernel_stats;

typedef struct kiln_prof_analysis {
  int n_steps;
  kiln_prof_step_stats *steps;
  int n_regions; /* in order of their first step */
  kiln_prof_region_stats *regions;
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
/* kiln_profiler_summary with the message in *err instead of the sticky
 * status (kiln_profiler_summary_at records it there). */
kiln_status kiln_prof_summary_run(const char *path, FILE *f, const kiln_profiler_summary_opts *opts, kiln_err *err);
/* Print the analysis (the text of kiln_profiler_summary; `what` names the
 * source file): the per-region table and outliers, every step too when
 * per_step, then `top` kernels. Ceilings of 0 are printed as unknown. */
void kiln_prof_analysis_print(const kiln_prof_analysis *a, const kiln_prof_capture *c, const char *what,
                              double peak_gflops, double peak_gbps, int top, int per_step, FILE *f);

/* ───── distributed captures: one capture per rank of the same job ───── */

/* One collective matched across the ranks: the k-th collective of step
 * `step` on every rank (collectives run in the same order on every rank). */
typedef struct kiln_prof_coll_match {
  int64_t step;
  int index;          /* its position within the step, from 0 */
  const char *name;   /* "all_reduce f32 [n] at file:line" (rank 0's) */
  int64_t bytes;      /* -1: unknown */
  uint64_t first_ns, last_ns; /* first and last arrival, on rank 0's clock */
  int first_rank, late_rank;
  /* what the late rank did in [first_ns, last_ns): host time per kind
   * (each kind's intervals merged), kernel time (compute_ns) and time no
   * kiln event covers (user_ns: the user's own code, or idle) */
  double kind_ns[KILN_PROF_KIND_COUNT];
  double compute_ns, user_ns;
  const char *region; /* innermost user annotation of the late rank at the window's middle, or NULL */
} kiln_prof_coll_match;

/* One rank's time over its whole steps (HTA's temporal breakdown). */
typedef struct kiln_prof_rank_stats {
  int rank;
  const char *host;
  int n_steps;                 /* whole steps */
  double wall_ns;              /* sum of their wall times */
  double compute_ns;           /* some kernel lane busy */
  double comm_ns;              /* some collective in flight */
  double overlap_ns;           /* both: communication hidden behind computation */
  double idle_ns;              /* neither */
  double idle_kind_ns[KILN_PROF_KIND_COUNT]; /* idle time by what the host did (kinds merged) */
  double idle_user_ns;         /* idle time no kiln host event covers */
  double wait_ns;              /* in matched collectives: time from this rank's arrival to the last rank's */
  int n_late;                  /* matched collectives where this rank arrived last */
  double late_ns;              /* sum of (its arrival - the first arrival) over those */
} kiln_prof_rank_stats;

typedef struct kiln_prof_dist_analysis {
  int n_ranks; /* ranks[i] is captures[i], in rank order */
  kiln_prof_rank_stats *ranks;
  int n_colls;
  kiln_prof_coll_match *colls;
  int n_steps_unmatched;  /* steps of rank 0 missing on a rank or with other collectives */
  int realtime_aligned;   /* clocks aligned by CLOCK_REALTIME (captures from several machines) */
  int64_t *shift_ns;      /* per rank: added to its times to put them on rank 0's clock */
} kiln_prof_dist_analysis;

/* Analyze the captures of one job (caps sorted by rank, n >= 1). Times of
 * ranks on other hosts are aligned by each capture's realtime offset.
 * Errors: OUT_OF_MEMORY. */
kiln_status kiln_prof_dist_analyze(const kiln_prof_capture *caps, int n, kiln_prof_dist_analysis *out,
                                   kiln_err *err);
void kiln_prof_dist_analysis_free(kiln_prof_dist_analysis *a);
/* Print it: per rank the breakdown, then the stragglers (the late rank per
 * collective, slowest first, at most `top`; every one with per_step). */
void kiln_prof_dist_print(const kiln_prof_dist_analysis *a, int top, int per_step, FILE *f);

#endif
