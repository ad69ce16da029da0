/* kiln's profiler API (see docs/profiling.md).
 *
 * Annotations name regions of the program (a training step, its forward
 * and backward passes); a capture records them together with kiln's own
 * host work (tracing, cache lookups, compiles, transfers, device waits) and
 * every kernel the backend runs, one lane per worker thread. A capture is
 * written as a Chrome Trace Event file (Perfetto, chrome://tracing) and as
 * the XSpace protobuf TensorBoard's profile plugin reads.
 *
 * Cost: while no capture runs an annotation is one relaxed atomic load plus
 * a push/pop on a small per-thread stack of region names, with no lock
 * (kept so that kernels compiled outside a capture still carry the
 * annotation that made them, and so that a capture shows the regions that
 * were open across its start or its end). Measured by
 * bench/bench_profiler.c.
 *
 * Thread-safety: every function here may be called from any thread.
 * Annotations are per thread: begin/end pairs nest within one thread.
 */
#ifndef KILN_PROFILER_H
#define KILN_PROFILER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open a region named `name` on the calling thread. `name` is borrowed: it
 * must stay valid until the capture that records it is written (a string
 * literal); use kiln_trace_begin_copy for built strings. Regions nest; more
 * than 64 open regions on one thread are counted but not named. Never fails. */
void kiln_trace_begin(const char *name);
/* Like kiln_trace_begin, but the name is copied (up to 63 bytes) into an
 * interned table (a process-wide singleton of at most 64K names; beyond it
 * the region is named "(name table full)"). */
void kiln_trace_begin_copy(const char *name);
/* Close the innermost open region of the calling thread. An end without a
 * begin is ignored. */
void kiln_trace_end(void);

/* Scoped form: KILN_TRACE("Forward") { ... }. The region ends when the block
 * is left normally, or by `break`, `return` or `goto` out of it (the end
 * runs from a cleanup attribute). */
typedef struct kiln_trace_scope_ {
  int open;
} kiln_trace_scope_;
/* Implementation detail of KILN_TRACE (ends the region if still open). */
void kiln_trace_scope_end_(kiln_trace_scope_ *s);
#define KILN_TRACE_CAT2_(a, b) a##b
#define KILN_TRACE_CAT_(a, b) KILN_TRACE_CAT2_(a, b)
#define KILN_TRACE(name)                                                                                  \
  for (kiln_trace_scope_ KILN_TRACE_CAT_(kiln_ts_, __LINE__) __attribute__((cleanup(kiln_trace_scope_end_))) = \
           (kiln_trace_begin(name), (kiln_trace_scope_){1});                                              \
       KILN_TRACE_CAT_(kiln_ts_, __LINE__).open; kiln_trace_scope_end_(&KILN_TRACE_CAT_(kiln_ts_, __LINE__)))

/* Mark a step boundary: ends the calling thread's previous step region (if
 * one is open) and opens a region `name` for step number `step` ("Training_
 * Step", 12). The viewers and kiln_profiler_summary use these regions as the
 * steps. Call it at the top of each iteration; regions opened inside the
 * step must be closed before the next call. `name` is borrowed like
 * kiln_trace_begin's. */
void kiln_step_trace(const char *name, int64_t step);
/* End the calling thread's open step region (after the last step). */
void kiln_step_trace_end(void);

/* Start recording. Per-thread event buffers of kiln_profiler_buffer_events()
 * events are allocated as threads record their first event; when one is
 * full further events of that thread are dropped and counted (shown in both
 * output files and by the summary). Errors: KILN_ERR_INVALID_ARGUMENT if a
 * capture is already running (recorded in the sticky status). */
#define kiln_profiler_start() kiln_profiler_start_at(KILN_HERE)
kiln_status kiln_profiler_start_at(kiln_loc loc);
/* Wait for the executions queued so far (kiln_wait: the kernels of the
 * steps traced during the capture are in it), stop recording and write
 * <logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb and
 * <host>.trace.json.gz (directories created, files written atomically;
 * <host> is the host name). The run directory is copied into out_dir
 * (out_cap bytes, may be NULL/0). Errors (sticky status): INVALID_ARGUMENT
 * when no capture runs or logdir is NULL, IO when writing fails. The
 * capture is stopped in every case.
 *
 * What a capture holds: every event inside its window. Work and regions
 * that began before the start are clipped to it; regions still open at the
 * stop (a step whose thread is blocked in a value read) are recorded up to
 * the stop. */
#define kiln_profiler_stop(logdir, out_dir, out_cap) kiln_profiler_stop_at((logdir), (out_dir), (out_cap), KILN_HERE)
kiln_status kiln_profiler_stop_at(const char *logdir, char *out_dir, size_t out_cap, kiln_loc loc);

/* For the profiler server and programs that capture themselves: record for
 * duration_ms from now (blocking the calling thread only; other threads
 * keep running and are recorded), then write <session_dir>/<host>.xplane.pb
 * and <host>.trace.json.gz (session_dir and its parents are created; host
 * NULL: this machine's name). Errors: KILN_ERR_INVALID_ARGUMENT if a
 * capture is already running or an argument is bad (duration 0 or over 10
 * minutes, host containing '/'), KILN_ERR_IO, recorded in the sticky status
 * (kiln_last_error()) with the caller's file:line. */
#define kiln_profiler_capture(duration_ms, session_dir, host) \
  kiln_profiler_capture_at((duration_ms), (session_dir), (host), KILN_HERE)
kiln_status kiln_profiler_capture_at(uint32_t duration_ms, const char *session_dir, const char *host, kiln_loc loc);

/* true while a capture is running. */
bool kiln_profiler_active(void);
/* Events per thread buffer for later captures (default 65536; clamped to
 * [16, 16M]). Takes effect at the next start. */
void kiln_profiler_set_buffer_events(uint32_t n);
uint32_t kiln_profiler_buffer_events(void);

/* Summary options; zero-initialized means defaults. */
typedef struct kiln_profiler_summary_opts {
  double gap_ms;       /* report idle gaps longer than this (0: 1 ms) ... */
  double gap_fraction; /* ... or longer than this fraction of the step (0: 0.05) */
  int top_kernels;     /* kernels listed (0: 10) */
  double peak_gflops;  /* machine ceilings; 0: measured once in-process */
  double peak_gbps;
  int per_step;        /* nonzero: also print every step's row and its gaps (`--steps`) */
} kiln_profiler_summary_opts;

/* Print the analysis of a capture to f. Per step region name (the regions
 * of kiln_step_trace; the whole capture when there are none): how many
 * steps, the median, 90th percentile and longest wall time of those
 * entirely inside the capture, their device duty cycle (busy time over wall
 * time, where busy means at least one kernel lane ran), their idle gaps
 * above the threshold; then the outlier steps, each with its gaps and what
 * the host was doing during them (tracing, compiling, transferring, waiting
 * for the device, waiting for input, or the user's own code). A step is an
 * outlier when its wall time exceeds both 1.5 x its region's median and the
 * median plus 3 median absolute deviations (regions of 3 or more whole
 * steps). The median of an even count is the mean of the middle two; the
 * 90th percentile is the nearest rank (the ceil(0.9 n)-th smallest). With
 * opts->per_step every step is listed too. Then the top kernels by total
 * time with achieved GFLOP/s and GB/s beside the machine's ceilings. path
 * is a run directory (the newest *.xplane.pb in it, or in its newest
 * plugins/profile/<run>) or a .xplane.pb file; opts may be NULL (defaults).
 * A run directory holding one capture per rank of a distributed job (every
 * rank 0..N-1 of a world of N) is read together first: per rank the time
 * computing, communicating, both (overlap) and idle by cause; per
 * collective the rank that arrived last, how late, and what it did
 * meanwhile (docs/distributed.md, "Profiling a distributed job"); then
 * each rank's own summary.
 * Errors: KILN_ERR_IO, KILN_ERR_CORRUPT (not an XSpace written by a
 * profiler, or over the size limits), KILN_ERR_INVALID_ARGUMENT (path or f
 * NULL), recorded in the sticky status (kiln_last_error()) with the
 * caller's file:line. Thread-safe (reads only the file). */
#define kiln_profiler_summary(path, f, opts) kiln_profiler_summary_at((path), (f), (opts), KILN_HERE)
kiln_status kiln_profiler_summary_at(const char *path, FILE *f, const kiln_profiler_summary_opts *opts, kiln_loc loc);

#ifdef __cplusplus
}
#endif

#endif
