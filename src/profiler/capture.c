/* Programmatic capture: start/stop into a TensorBoard logdir, and the
 * blocking timed capture the profiler server uses. */
#define _GNU_SOURCE
#include "profiler/capture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "kiln/profiler.h"

static uint64_t g_start_ns; /* guarded by the session: only the starter writes it */
static int64_t g_realtime_offset_ns;
static kiln_prof_world_fn g_world_fn;

void kiln_prof_set_world_fn(kiln_prof_world_fn fn) { __atomic_store_n(&g_world_fn, fn, __ATOMIC_RELEASE); }

void kiln_prof_world(int *rank, int *world) {
  *rank = 0, *world = 1;
  kiln_prof_world_fn fn = __atomic_load_n(&g_world_fn, __ATOMIC_ACQUIRE);
  if (fn) fn(rank, world);
  if (*world < 1 || *rank < 0 || *rank >= *world) *rank = 0, *world = 1;
}

/* CLOCK_REALTIME - CLOCK_MONOTONIC now, read between two monotonic reads
 * (the pair closest together of three tries). */
static int64_t realtime_offset(void) {
  int64_t best = 0, best_w = INT64_MAX;
  for (int i = 0; i < 3; i++) {
    struct timespec a, r, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_REALTIME, &r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    int64_t ta = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec, tb = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec;
    int64_t tr = (int64_t)r.tv_sec * 1000000000 + r.tv_nsec;
    if (tb - ta < best_w) best_w = tb - ta, best = tr - (ta + (tb - ta) / 2);
  }
  return best;
}

static void session_started(uint64_t t0) {
  g_start_ns = t0;
  g_realtime_offset_ns = realtime_offset();
}

void kiln_prof_capture_clear(kiln_prof_capture *c) {
  if (!c) return;
  if (c->owned) {
    /* a decoded capture: its event arrays are ours, names live in owned */
    void kiln_prof_xspace_free_owned_(void *p);
    kiln_prof_xspace_free_owned_(c->owned);
  }
  kiln_prof_threads_free(c->threads, c->n_threads);
  memset(c, 0, sizeof *c);
}

static void host_name(char *out, size_t cap) {
  if (gethostname(out, cap) != 0 || !out[0]) snprintf(out, cap, "localhost");
  out[cap - 1] = 0;
  for (char *p = out; *p; p++)
    if (*p == '/') *p = '_'; /* a file name component */
}

kiln_status kiln_prof_write_run(const kiln_prof_capture *c, const char *dir, kiln_err *err) {
  size_t existed = kiln_fs_existing_prefix(dir); /* a failed write leaves no empty directories */
  kiln_status s = kiln_fs_mkdirs_private(dir, err);
  if (s != KILN_OK) {
    kiln_fs_rmdirs_empty(dir, existed);
    kiln_err_context(err, "while creating the profile directory");
    return s;
  }
  char stem[300];
  if (c->world > 1)
    snprintf(stem, sizeof stem, "%s-rank%d", c->host, c->rank);
  else
    snprintf(stem, sizeof stem, "%s", c->host);
  size_t n = strlen(dir) + strlen(stem) + 32;
  char *path = malloc(n);
  if (!path) s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profiler: out of memory");
  else {
    snprintf(path, n, "%s/%s.xplane.pb", dir, stem);
    s = kiln_prof_write_xplane(c, path, err);
    if (s == KILN_OK) {
      snprintf(path, n, "%s/%s.trace.json.gz", dir, stem);
      s = kiln_prof_write_chrome(c, path, err);
    }
    free(path);
  }
  if (s != KILN_OK) kiln_fs_rmdirs_empty(dir, existed); /* a written file stays, and its directories */
  return s;
}

static kiln_status collect(kiln_prof_capture *c, const char *host) {
  memset(c, 0, sizeof *c);
  uint64_t dropped_threads = 0;
  kiln_status s = kiln_prof_session_end(&c->threads, &c->n_threads, &dropped_threads, &c->end_ns);
  c->start_ns = g_start_ns;
  c->realtime_offset_ns = g_realtime_offset_ns;
  host_name(c->machine, sizeof c->machine);
  kiln_prof_world(&c->rank, &c->world);
  c->dropped = dropped_threads;
  for (int i = 0; i < c->n_threads; i++) c->dropped += c->threads[i].dropped;
  if (host && *host)
    snprintf(c->host, sizeof c->host, "%s", host);
  else
    host_name(c->host, sizeof c->host);
  return s;
}

kiln_status kiln_profiler_start_at(kiln_loc loc) {
  uint64_t t0;
  if (kiln_prof_session_begin(0, &t0) != KILN_OK)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profiler_start: a capture is already running");
  session_started(t0);
  return KILN_OK;
}

kiln_status kiln_profiler_stop_at(const char *logdir, char *out_dir, size_t out_cap, kiln_loc loc) {
  if (out_dir && out_cap) out_dir[0] = 0;
  /* The steps traced so far run on the executor after the calling thread
   * moved on: wait for them, so that their kernels are in the capture (its
   * status is the sticky one, reported by the program's own sync points). */
  if (kiln_prof_on()) (void)kiln_wait();
  kiln_prof_capture c;
  kiln_status s = collect(&c, NULL);
  if (s == KILN_ERR_INVALID_ARGUMENT)
    return kiln_error(s, loc, "profiler_stop: no capture is running (call kiln_profiler_start first)");
  if (s != KILN_OK) {
    kiln_prof_capture_clear(&c);
    return kiln_error(s, loc, "profiler_stop: out of memory collecting the events");
  }
  if (!logdir || !*logdir) {
    kiln_prof_capture_clear(&c);
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "profiler_stop: logdir is NULL or empty (events discarded)");
  }
  /* TensorBoard lists runs by this directory name */
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y_%m_%d_%H_%M_%S", &tm);
  size_t n = strlen(logdir) + 64;
  char *dir = malloc(n);
  if (!dir) {
    kiln_prof_capture_clear(&c);
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "profiler_stop: out of memory");
  }
  snprintf(dir, n, "%s/plugins/profile/%s", logdir, stamp);
  kiln_err err = {0};
  s = kiln_prof_write_run(&c, dir, &err);
  kiln_prof_capture_clear(&c);
  if (s != KILN_OK) {
    free(dir);
    return kiln_error(s, loc, "profiler_stop: %s", err.msg);
  }
  if (out_dir && out_cap) snprintf(out_dir, out_cap, "%s", dir);
  free(dir);
  return KILN_OK;
}

kiln_status kiln_profiler_capture_at(uint32_t duration_ms, const char *session_dir, const char *host, kiln_loc loc) {
  kiln_err e = {0};
  kiln_status s = kiln_prof_timed_capture(duration_ms, session_dir, host, &e);
  return s == KILN_OK ? s : kiln_error(s, loc, "%s", e.msg);
}

kiln_status kiln_prof_timed_capture(uint32_t duration_ms, const char *session_dir, const char *host, kiln_err *err) {
  if (!session_dir || !*session_dir)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "profiler capture: the session directory is empty");
  if (duration_ms == 0 || duration_ms > 600000)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                        "profiler capture: duration %u ms is out of range (1 to 600000 ms)", duration_ms);
  if (host && (strchr(host, '/') || !strcmp(host, ".") || !strcmp(host, "..") || strlen(host) > 200))
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "profiler capture: invalid host name \"%.64s\"", host);
  uint64_t t0;
  if (kiln_prof_session_begin(0, &t0) != KILN_OK)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "profiler capture: a capture is already running");
  session_started(t0);
  struct timespec ts = {duration_ms / 1000, (long)(duration_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  kiln_prof_capture c;
  kiln_status s = collect(&c, host);
  if (s != KILN_OK) {
    kiln_prof_capture_clear(&c);
    return kiln_err_set(err, s, "profiler capture: %s",
                        s == KILN_ERR_INVALID_ARGUMENT ? "the capture was stopped by another caller"
                                                       : "out of memory collecting the events");
  }
  s = kiln_prof_write_run(&c, session_dir, err);
  kiln_prof_capture_clear(&c);
  return s;
}
