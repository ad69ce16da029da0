/* A finished capture in memory, its writers (Chrome trace JSON, XSpace)
 * and the XSpace reader the summary uses.
 *
 * Thread-safety: a capture is a plain value owned by one thread.
 */
#ifndef KILN_PROFILER_CAPTURE_H
#define KILN_PROFILER_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/spans.h"

typedef struct kiln_prof_capture {
  uint64_t start_ns, end_ns; /* kiln_now_ns clock */
  kiln_prof_thread_events *threads; /* owned */
  int n_threads;
  uint64_t dropped; /* events lost: full buffers plus a full thread table */
  char host[256];
  /* The machine's own name (gethostname; "" unknown): host may be what a
   * capture request named the file ("localhost_6010"); the XSpace's
   * hostnames field carries this one, and the summary compares it to know
   * whether ranks share a clock. */
  char machine[256];
  /* The process's place in a distributed job: rank 0 of 1 when alone. A
   * capture of rank R in a world of N > 1 is written as <host>-rank<R>. */
  int rank, world;
  /* CLOCK_REALTIME minus CLOCK_MONOTONIC at the capture start (ns): aligns
   * captures of ranks on different machines (0: unknown, e.g. read from a
   * file written by another profiler). */
  int64_t realtime_offset_ns;
  void *owned; /* reader: the unpacked message the names point into */
} kiln_prof_capture;

/* Where the profiler learns this process's rank and world (the dist
 * service is not a layer the profiler may call: kiln_init registers this).
 * Unset: rank 0 of 1. */
typedef void (*kiln_prof_world_fn)(int *rank, int *world);
void kiln_prof_set_world_fn(kiln_prof_world_fn fn);
/* This process's rank and world through the registered function. */
void kiln_prof_world(int *rank, int *world);

void kiln_prof_capture_clear(kiln_prof_capture *c);

/* Write the capture as gzipped Chrome Trace Event JSON to path (atomic).
 * Errors: KILN_ERR_IO, KILN_ERR_OUT_OF_MEMORY. */
kiln_status kiln_prof_write_chrome(const kiln_prof_capture *c, const char *path, kiln_err *err);
/* The JSON text itself (malloc'ed, caller frees; *n its length). */
kiln_status kiln_prof_chrome_json(const kiln_prof_capture *c, char **out, size_t *n, kiln_err *err);

/* Encode the capture as an XSpace (malloc'ed bytes, caller frees). */
kiln_status kiln_prof_xspace_encode(const kiln_prof_capture *c, uint8_t **out, size_t *n, kiln_err *err);
/* Write it to path (atomic). */
kiln_status kiln_prof_write_xplane(const kiln_prof_capture *c, const char *path, kiln_err *err);
/* Decode an XSpace back into a capture (*out cleared first; names point
 * into out->owned). Validates: a "/host:CPU" plane, metadata ids that
 * resolve, bounded counts (1M events, 4096 lines). Rejections are
 * KILN_ERR_CORRUPT with `what` (a file name) in the message. */
kiln_status kiln_prof_xspace_decode(const uint8_t *data, size_t n, const char *what, kiln_prof_capture *out,
                                    kiln_err *err);

/* Write <dir>/<stem>.xplane.pb and <stem>.trace.json.gz, creating dir;
 * <stem> is the host, "<host>-rank<R>" when c->world > 1. */
kiln_status kiln_prof_write_run(const kiln_prof_capture *c, const char *dir, kiln_err *err);
/* kiln_profiler_capture with the message in *err instead of the sticky
 * status (the profiler server's requests leave the program's status alone). */
kiln_status kiln_prof_timed_capture(uint32_t duration_ms, const char *session_dir, const char *host, kiln_err *err);

#endif
