/* Profiler core: annotations (nesting, timing, threads, bounded buffers),
 * programmatic capture and its two output files, kernel names after the
 * annotation scopes. The summary's arithmetic is in test_profiler_summary.c.
 *
 * Oracles: the order and sleeps of the test itself (a region that slept
 * 2 ms lasts at least 2 ms and contains its children), a plain C JSON
 * validator, protobuf-c's own unpack of the written file. */
#define _GNU_SOURCE
#include <errno.h>
#include <kiln/kiln.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/fs.h"
#include "kt.h"
#include "profiler/capture.h"
#include "base/spans.h"
#include "xplane.pb-c.h"

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* The calling thread's events in a finished session. */
static kiln_prof_thread_events *my_events(kiln_prof_thread_events *t, int n) {
  for (int i = 0; i < n; i++)
    if (t[i].tid == (int64_t)gettid()) return &t[i];
  return NULL;
}

static const kiln_prof_event *find(const kiln_prof_thread_events *t, const char *name) {
  for (uint32_t i = 0; t && i < t->n; i++)
    if (!strcmp(t->ev[i].name, name)) return &t->ev[i];
  return NULL;
}

KT_TEST(annotations_nest_with_parent_child_timing) {
  uint64_t t0, t1, dt;
  KT_CHECK(kiln_prof_session_begin(1024, &t0) == KILN_OK);
  KT_CHECK(kiln_prof_session_begin(1024, &t1) == KILN_ERR_INVALID_ARGUMENT); /* one capture at a time */
  kiln_trace_begin("Outer");
  sleep_ms(2);
  kiln_trace_begin("Inner");
  sleep_ms(1);
  kiln_trace_end();
  kiln_trace_end();
  kiln_trace_end(); /* unbalanced end: ignored */
  KILN_TRACE("Scoped") {
    KILN_TRACE("Left by break") { break; }
  }
  kiln_prof_thread_events *th;
  int n;
  KT_CHECK(kiln_prof_session_end(&th, &n, &dt, &t1) == KILN_OK);
  kiln_prof_thread_events *me = my_events(th, n);
  KT_CHECK(me != NULL);
  const kiln_prof_event *o = find(me, "Outer"), *i = find(me, "Inner"), *s = find(me, "Scoped"),
                        *b = find(me, "Left by break");
  KT_CHECK(o && i && s && b);
  if (o && i && s && b) {
    KT_EQ_INT(o->depth, 0);
    KT_EQ_INT(i->depth, 1);
    KT_CHECK(o->begin_ns <= i->begin_ns && i->end_ns <= o->end_ns);
    KT_CHECK(o->end_ns - o->begin_ns >= 3000000); /* 2 ms + 1 ms of sleeps */
    KT_CHECK(i->end_ns - i->begin_ns >= 1000000);
    KT_CHECK(i->begin_ns - o->begin_ns >= 2000000);
    KT_CHECK(o->begin_ns >= t0 && o->end_ns <= t1);
    KT_EQ_INT(b->depth, 1); /* break left the inner scope, which ended */
    KT_CHECK(s->begin_ns <= b->begin_ns && b->end_ns <= s->end_ns);
    KT_EQ_INT(o->kind, KILN_PROF_USER);
  }
  KT_EQ_INT(me ? (int)me->dropped : -1, 0);
  kiln_prof_threads_free(th, n);
  /* no capture: annotations are still balanced and record nothing */
  kiln_trace_begin("Off");
  kiln_trace_end();
  KT_CHECK(!kiln_profiler_active());
}

KT_TEST(step_trace_marks_steps_and_closes_inner_regions) {
  uint64_t t0, t1, dt;
  KT_CHECK(kiln_prof_session_begin(1024, &t0) == KILN_OK);
  for (int s = 0; s < 3; s++) {
    kiln_step_trace("Training_Step", 10 + s);
    kiln_trace_begin("Forward");
    sleep_ms(1);
    if (s != 1) kiln_trace_end(); /* step 1 leaves Forward open: the next step closes it */
  }
  kiln_step_trace_end();
  kiln_prof_thread_events *th;
  int n;
  KT_CHECK(kiln_prof_session_end(&th, &n, &dt, &t1) == KILN_OK);
  kiln_prof_thread_events *me = my_events(th, n);
  int steps = 0, fwd = 0;
  uint64_t prev_end = 0;
  for (uint32_t i = 0; me && i < me->n; i++) {
    const kiln_prof_event *e = &me->ev[i];
    if (e->kind == KILN_PROF_STEP) {
      KT_EQ_INT((int)e->arg, 10 + steps);
      KT_CHECK(!strcmp(e->name, "Training_Step"));
      KT_CHECK(e->begin_ns >= prev_end);
      prev_end = e->end_ns;
      steps++;
    } else if (!strcmp(e->name, "Forward")) {
      KT_EQ_INT(e->depth, 1);
      fwd++;
    }
  }
  KT_EQ_INT(steps, 3);
  KT_EQ_INT(fwd, 3);
  kiln_prof_threads_free(th, n);
}

typedef struct thr_arg {
  const char *name;
  int count;
} thr_arg;

static void *annotating_thread(void *p) {
  thr_arg *a = p;
  kiln_prof_thread_set(a->name, -1);
  for (int i = 0; i < a->count; i++) {
    kiln_trace_begin(a->name);
    kiln_trace_begin("child");
    kiln_trace_end();
    kiln_trace_end();
  }
  return NULL;
}

KT_TEST(two_threads_annotate_during_a_capture) {
  uint64_t t0, t1, dt;
  KT_CHECK(kiln_prof_session_begin(1 << 16, &t0) == KILN_OK);
  thr_arg a = {"thread A", 5000}, b = {"thread B", 5000};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, annotating_thread, &a);
  pthread_create(&tb, NULL, annotating_thread, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  kiln_prof_thread_events *th;
  int n;
  KT_CHECK(kiln_prof_session_end(&th, &n, &dt, &t1) == KILN_OK);
  int seen = 0;
  for (int i = 0; i < n; i++) {
    const kiln_prof_thread_events *t = &th[i];
    const char *want = !strcmp(t->name, "thread A") ? "thread A" : !strcmp(t->name, "thread B") ? "thread B" : NULL;
    if (!want) continue;
    seen++;
    KT_EQ_INT((int)t->n, 10000);
    KT_EQ_INT((int)t->dropped, 0);
    int parents = 0;
    for (uint32_t k = 0; k < t->n; k++) {
      const kiln_prof_event *e = &t->ev[k];
      if (!strcmp(e->name, want)) parents++;
      else KT_CHECK(!strcmp(e->name, "child") && e->depth == 1);
      /* a child is recorded before its parent: it must lie inside it */
      if (k % 2 == 0 && k + 1 < t->n) KT_CHECK(e->begin_ns >= t->ev[k + 1].begin_ns && e->end_ns <= t->ev[k + 1].end_ns);
    }
    KT_EQ_INT(parents, 5000);
  }
  KT_EQ_INT(seen, 2);
  kiln_prof_threads_free(th, n);
}

KT_TEST(full_buffers_drop_and_count) {
  uint64_t t0, t1, dt;
  KT_CHECK(kiln_prof_session_begin(16, &t0) == KILN_OK);
  for (int i = 0; i < 100; i++) {
    kiln_trace_begin("e");
    kiln_trace_end();
  }
  kiln_prof_thread_events *th;
  int n;
  KT_CHECK(kiln_prof_session_end(&th, &n, &dt, &t1) == KILN_OK);
  kiln_prof_thread_events *me = my_events(th, n);
  KT_CHECK(me && me->n == 16 && me->dropped == 84);
  kiln_prof_threads_free(th, n);
}

/* An end recorded after the capture began for work that ended before it
 * (a thread read the time, then the capture started) is not in the
 * capture; work that ended inside is, clipped to the start. */
KT_TEST(work_that_ended_before_the_capture_is_not_in_it) {
  uint64_t t0, t1, dt;
  KT_CHECK(kiln_prof_session_begin(64, &t0) == KILN_OK);
  kiln_prof_record(KILN_PROF_USER, "ended before", t0 - 2000, t0 - 1000, -1, 0, 0);
  kiln_prof_record(KILN_PROF_STEP, "ended inside", t0 - 1000, t0 + 1000, 7, 0, 0);
  kiln_prof_thread_events *th;
  int n;
  KT_CHECK(kiln_prof_session_end(&th, &n, &dt, &t1) == KILN_OK);
  kiln_prof_thread_events *me = my_events(th, n);
  KT_CHECK(me && me->n == 1);
  if (me && me->n == 1) {
    KT_CHECK(!strcmp(me->ev[0].name, "ended inside"));
    KT_CHECK(me->ev[0].begin_ns == t0 && me->ev[0].arg == 7);
  }
  kiln_prof_threads_free(th, n);
}

/* ───── a minimal JSON validator (RFC 8259 grammar, no semantics) ───── */
static const char *js_ws(const char *p) {
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
  return p;
}
static const char *js_value(const char *p, int depth);
static const char *js_string(const char *p) {
  if (*p++ != '"') return NULL;
  while (*p && *p != '"') {
    if ((unsigned char)*p < 0x20) return NULL;
    if (*p == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
        p += 4;
      } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
        return NULL;
      }
    }
    p++;
  }
  return *p == '"' ? p + 1 : NULL;
}
static const char *js_value(const char *p, int depth) {
  if (depth > 64) return NULL;
  p = js_ws(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    int obj = *p == '{';
    p = js_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (obj) {
        p = js_string(js_ws(p));
        if (!p) return NULL;
        p = js_ws(p);
        if (*p++ != ':') return NULL;
      }
      p = js_value(p, depth + 1);
      if (!p) return NULL;
      p = js_ws(p);
      if (*p == ',') {
        p++;
        continue;
      }
      return *p == close ? p + 1 : NULL;
    }
  }
  if (*p == '"') return js_string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  char *end;
  strtod(p, &end);
  return end > p ? end : NULL;
}

static char *gunzip_file(const char *path) {
  gzFile g = gzopen(path, "rb");
  if (!g) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  int k;
  while (buf && (k = gzread(g, buf + n, (unsigned)(cap - n - 1))) > 0) {
    n += (size_t)k;
    if (cap - n < 2) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  gzclose(g);
  if (buf) buf[n] = 0;
  return buf;
}

static void read_file(const char *path, uint8_t **data, size_t *n) {
  FILE *f = fopen(path, "rb");
  *data = NULL;
  *n = 0;
  if (!f) return;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = malloc((size_t)len + 1);
  if (*data && fread(*data, 1, (size_t)len, f) == (size_t)len) *n = (size_t)len;
  fclose(f);
}

static const Tensorflow__Profiler__XPlane *plane(const Tensorflow__Profiler__XSpace *s, const char *name) {
  for (size_t i = 0; i < s->n_planes; i++)
    if (!strcmp(s->planes[i]->name, name)) return s->planes[i];
  return NULL;
}

static int plane_has_event(const Tensorflow__Profiler__XPlane *p, const char *prefix, const char *contains) {
  for (size_t i = 0; p && i < p->n_event_metadata; i++) {
    const char *nm = p->event_metadata[i]->value->name;
    if (!strncmp(nm, prefix, strlen(prefix)) && (!contains || strstr(nm, contains))) {
      /* and an event uses it */
      int64_t id = p->event_metadata[i]->key;
      for (size_t l = 0; l < p->n_lines; l++)
        for (size_t e = 0; e < p->lines[l]->n_events; e++)
          if (p->lines[l]->events[e]->metadata_id == id) return 1;
    }
  }
  return 0;
}

/* A small annotated training-like program: y = relu(x @ w * 2 + 1). */
static void annotated_steps(kiln_tensor w, int steps, int first_step) {
  int64_t xs[2] = {8, 4};
  float xd[32];
  for (int i = 0; i < 32; i++) xd[i] = (float)(i % 5) - 2.0f;
  for (int s = 0; s < steps; s++) {
    kiln_step_trace("Training_Step", first_step + s);
    kiln_tensor y = {0, 0};
    KILN_TRACE("Forward") {
      kiln_tensor x = kiln_from_host(xd, KILN_F32, 2, xs);
      y = kiln_keep(kiln_relu(kiln_add_c(kiln_mul_c(kiln_matmul(x, w), 2.0), 1.0)));
    }
    KILN_TRACE("FINISH_UPDATE") { kiln_mark_step(); }
    float out[8 * 16];
    kiln_to_host(y, out, sizeof out);
    kiln_release(y);
  }
  kiln_step_trace_end();
}

KT_TEST(capture_writes_xplane_and_chrome_trace_with_named_kernels) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  int64_t ws[2] = {4, 16};
  float wd[64];
  for (int i = 0; i < 64; i++) wd[i] = (float)(i % 7) * 0.25f;
  kiln_tensor w = kiln_keep(kiln_from_host(wd, KILN_F32, 2, ws));
  annotated_steps(w, 1, 0); /* compile outside the capture: names still carry the scopes */
  char logdir[512], run[1024];
  kiln_err err = {0};
  KT_CHECK(kiln_fs_mkdtemp(NULL, "kiln-prof-", logdir, sizeof logdir, &err) == KILN_OK);
  KT_CHECK(kiln_profiler_stop(logdir, run, sizeof run) == KILN_ERR_INVALID_ARGUMENT); /* none running */
  kiln_clear_error();
  KT_CHECK(kiln_profiler_start() == KILN_OK);
  KT_CHECK(kiln_profiler_start() == KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  annotated_steps(w, 3, 1);
  KT_CHECK(kiln_profiler_stop(logdir, run, sizeof run) == KILN_OK);
  KT_STR_CONTAINS(run, "/plugins/profile/");
  char host[256], path[2048];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;
  for (char *p = host; *p; p++)
    if (*p == '/') *p = '_';

  /* XSpace: protobuf-c's unpack is the oracle for the encoding */
  snprintf(path, sizeof path, "%s/%s.xplane.pb", run, host);
  uint8_t *data;
  size_t n;
  read_file(path, &data, &n);
  KT_CHECK(n > 0);
  Tensorflow__Profiler__XSpace *sp = tensorflow__profiler__xspace__unpack(NULL, n, data);
  KT_CHECK(sp != NULL);
  if (sp) {
    const Tensorflow__Profiler__XPlane *h = plane(sp, "/host:CPU"), *d = plane(sp, "/device:CUSTOM:0");
    KT_CHECK(h && d);
    KT_CHECK(plane_has_event(h, "Training_Step", NULL));
    KT_CHECK(plane_has_event(h, "Forward", NULL));
    KT_CHECK(plane_has_event(h, "FINISH_UPDATE", NULL));
    KT_CHECK(plane_has_event(h, "execute", NULL));
    KT_CHECK(plane_has_event(d, "Forward/gemm 8x16x4", NULL));
    KT_CHECK(plane_has_event(d, "Forward/fusion.", "relu"));
    int steps_line = 0, lane_lines = 0;
    for (size_t l = 0; d && l < d->n_lines; l++) {
      if (!strcmp(d->lines[l]->name, "Steps")) steps_line = (int)d->lines[l]->n_events;
      else if (!strncmp(d->lines[l]->name, "Kernels lane ", 13)) lane_lines++;
    }
    KT_EQ_INT(steps_line, 3);
    KT_CHECK(lane_lines >= 1);
    int exec_line = 0;
    for (size_t l = 0; h && l < h->n_lines; l++) exec_line |= !strcmp(h->lines[l]->name, "kiln executor");
    KT_CHECK(exec_line);
    tensorflow__profiler__xspace__free_unpacked(sp, NULL);
  }
  /* kiln's own reader gets the same capture back */
  kiln_prof_capture c;
  KT_CHECK(kiln_prof_xspace_decode(data, n, path, &c, &err) == KILN_OK);
  int kernels = 0, steps = 0;
  for (int i = 0; i < c.n_threads; i++)
    for (uint32_t k = 0; k < c.threads[i].n; k++) {
      kernels += c.threads[i].ev[k].kind == KILN_PROF_KERNEL;
      steps += c.threads[i].ev[k].kind == KILN_PROF_STEP;
    }
  KT_CHECK(kernels >= 6); /* a GEMM and a fusion per step */
  KT_EQ_INT(steps, 3);
  kiln_prof_capture_clear(&c);
  free(data);

  /* Chrome trace: valid JSON with the same names */
  snprintf(path, sizeof path, "%s/%s.trace.json.gz", run, host);
  char *json = gunzip_file(path);
  KT_CHECK(json != NULL);
  if (json) {
    const char *end = js_value(json, 0);
    KT_CHECK(end != NULL && *js_ws(end) == 0);
    KT_STR_CONTAINS(json, "\"traceEvents\"");
    KT_STR_CONTAINS(json, "\"name\":\"Forward/gemm 8x16x4\"");
    KT_STR_CONTAINS(json, "\"name\":\"Training_Step\"");
    KT_STR_CONTAINS(json, "\"step_num\":3");
    KT_STR_CONTAINS(json, "\"thread_name\"");
    KT_STR_CONTAINS(json, "\"dropped_events\":0");
    free(json);
  }
  kiln_release(w);
  kiln_shutdown();
  kiln_fs_remove_tree(logdir);
}

KT_TEST(scopes_do_not_change_graph_caching) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  int64_t s[1] = {64};
  kiln_tensor x = kiln_keep(kiln_zeros(KILN_F32, 1, s));
  KT_CHECK(kiln_mark_step() == KILN_OK); /* x computed: every later step is the same graph */
  kiln_metrics_clear();
  const char *names[3] = {"A", "B", NULL};
  for (int i = 0; i < 3; i++) {
    if (names[i]) kiln_trace_begin(names[i]);
    kiln_tensor y = kiln_keep(kiln_exp(kiln_add_c(x, 1.0)));
    if (names[i]) kiln_trace_end();
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_release(y);
  }
  KT_EQ_INT((int)kiln_counter_value("UncachedCompile"), 1);
  KT_EQ_INT((int)kiln_counter_value("CachedCompile"), 2);
  kiln_release(x);
  kiln_shutdown();
}

KT_TEST(timed_capture_rejects_bad_arguments_and_concurrent_runs) {
  kiln_err err = {0};
  KT_CHECK(kiln_prof_timed_capture(0, "/tmp/x", NULL, &err) == KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(err.msg, "out of range");
  KT_CHECK(kiln_prof_timed_capture(10, "/tmp/x", "../evil", &err) == KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(kiln_profiler_start() == KILN_OK);
  KT_CHECK(kiln_prof_timed_capture(10, "/tmp/x", NULL, &err) == KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(err.msg, "already running");
  char logdir[512], run[1024], p[2048];
  KT_CHECK(kiln_fs_mkdtemp(NULL, "kiln-prof-", logdir, sizeof logdir, &err) == KILN_OK);
  KT_CHECK(kiln_profiler_stop(logdir, run, sizeof run) == KILN_OK);
  snprintf(p, sizeof p, "%s/session", logdir);
  KT_CHECK(kiln_prof_timed_capture(20, p, "myhost", &err) == KILN_OK);
  snprintf(p, sizeof p, "%s/session/myhost.xplane.pb", logdir);
  KT_CHECK(access(p, R_OK) == 0);
  snprintf(p, sizeof p, "%s/session/myhost.trace.json.gz", logdir);
  KT_CHECK(access(p, R_OK) == 0);
  kiln_clear_error();
  kiln_fs_remove_tree(logdir);
}

/* ───── regions across the capture's edges (a capture taken from another
 * thread, as the profiler server does) ───── */

typedef struct edge_arg {
  int stop;     /* atomic: the capture is over, leave */
  int opened;   /* atomic: the thread's long regions are open */
  int64_t steps; /* steps the stepping thread finished */
} edge_arg;

/* Annotates steps in a loop, as a training thread does, until told to stop. */
static void *stepping_thread(void *p) {
  edge_arg *a = p;
  kiln_prof_thread_set("stepper", -1);
  int64_t s = 0;
  while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
    kiln_step_trace("Training_Step", s++);
    __atomic_store_n(&a->opened, 1, __ATOMIC_RELEASE);
    KILN_TRACE("Forward") { sleep_ms(1); }
    KILN_TRACE("Backward") { sleep_ms(1); }
  }
  kiln_step_trace_end();
  a->steps = s;
  return NULL;
}

/* Opens a step (and a region in it) before the capture and stays blocked
 * in it until the capture is over, like a thread waiting on a value read. */
static void *blocked_thread(void *p) {
  edge_arg *a = p;
  kiln_prof_thread_set("blocked", -1);
  kiln_step_trace("Training_Step", 41);
  kiln_trace_begin("waiting in a value read");
  __atomic_store_n(&a->opened, 1, __ATOMIC_RELEASE);
  while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) sleep_ms(1);
  kiln_trace_end();
  kiln_step_trace_end();
  return NULL;
}

/* Opens a region before the capture and ends it once the capture runs. */
static void *spanning_thread(void *p) {
  edge_arg *a = p;
  kiln_prof_thread_set("spanning", -1);
  kiln_trace_begin("began before the capture");
  __atomic_store_n(&a->opened, 1, __ATOMIC_RELEASE);
  while (!kiln_profiler_active()) sleep_ms(1);
  sleep_ms(5);
  kiln_trace_end();
  while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) sleep_ms(1);
  return NULL;
}

static const kiln_prof_thread_events *thread_named(const kiln_prof_capture *c, const char *name) {
  for (int i = 0; i < c->n_threads; i++)
    if (!strcmp(c->threads[i].name, name)) return &c->threads[i];
  return NULL;
}

static int count_named(const kiln_prof_thread_events *t, const char *name, kiln_prof_kind kind) {
  int n = 0;
  for (uint32_t i = 0; t && i < t->n; i++) n += !strcmp(t->ev[i].name, name) && t->ev[i].kind == kind;
  return n;
}

KT_TEST(a_capture_from_another_thread_holds_regions_across_its_edges) {
  edge_arg step = {0}, blocked = {0}, spanning = {0};
  pthread_t ts, tb, tsp;
  pthread_create(&tb, NULL, blocked_thread, &blocked);
  pthread_create(&tsp, NULL, spanning_thread, &spanning);
  while (!__atomic_load_n(&blocked.opened, __ATOMIC_ACQUIRE) || !__atomic_load_n(&spanning.opened, __ATOMIC_ACQUIRE))
    sleep_ms(1);
  pthread_create(&ts, NULL, stepping_thread, &step);
  /* the stepper is inside a step when the capture starts (each step marker
   * ends the step before: from its first one on it is always in a step) */
  while (!__atomic_load_n(&step.opened, __ATOMIC_ACQUIRE)) sleep_ms(1);
  char dir[512], path[1024];
  kiln_err err = {0};
  KT_CHECK(kiln_fs_mkdtemp(NULL, "kiln-prof-", dir, sizeof dir, &err) == KILN_OK);
  KT_CHECK(kiln_prof_timed_capture(200, dir, "edges", &err) == KILN_OK);
  __atomic_store_n(&step.stop, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&blocked.stop, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&spanning.stop, 1, __ATOMIC_RELEASE);
  pthread_join(ts, NULL);
  pthread_join(tb, NULL);
  pthread_join(tsp, NULL);

  snprintf(path, sizeof path, "%s/edges.xplane.pb", dir);
  uint8_t *data;
  size_t n;
  read_file(path, &data, &n);
  kiln_prof_capture c;
  KT_CHECK(kiln_prof_xspace_decode(data, n, path, &c, &err) == KILN_OK);
  free(data);
  /* the stepping thread: its steps and their regions, all inside the window */
  const kiln_prof_thread_events *st = thread_named(&c, "stepper");
  KT_CHECK(st != NULL);
  KT_CHECK(count_named(st, "Training_Step", KILN_PROF_STEP) >= 10); /* 200 ms of 2 ms steps */
  KT_CHECK(count_named(st, "Forward", KILN_PROF_USER) >= 10);
  KT_CHECK(count_named(st, "Backward", KILN_PROF_USER) >= 10);
  int at_start = 0;
  for (int i = 0; i < c.n_threads; i++)
    for (uint32_t k = 0; k < c.threads[i].n; k++) {
      const kiln_prof_event *e = &c.threads[i].ev[k];
      KT_CHECK(e->begin_ns >= c.start_ns && e->end_ns <= c.end_ns && e->begin_ns <= e->end_ns);
      at_start += &c.threads[i] == st && e->kind == KILN_PROF_STEP && e->begin_ns == c.start_ns;
    }
  KT_EQ_INT(at_start, 1); /* the step open at the start, clipped to it */
  /* the blocked thread: its step and region span the whole capture */
  const kiln_prof_thread_events *bt = thread_named(&c, "blocked");
  KT_CHECK(bt != NULL);
  KT_EQ_INT(count_named(bt, "Training_Step", KILN_PROF_STEP), 1);
  KT_EQ_INT(count_named(bt, "waiting in a value read", KILN_PROF_USER), 1);
  for (uint32_t k = 0; bt && k < bt->n; k++) {
    KT_CHECK(bt->ev[k].begin_ns == c.start_ns && bt->ev[k].end_ns == c.end_ns);
    if (bt->ev[k].kind == KILN_PROF_STEP) KT_EQ_INT((int)bt->ev[k].arg, 41);
  }
  /* the region that began before and ended inside: from the start */
  const kiln_prof_thread_events *sp = thread_named(&c, "spanning");
  KT_CHECK(sp && sp->n == 1);
  if (sp && sp->n == 1) {
    KT_CHECK(!strcmp(sp->ev[0].name, "began before the capture"));
    KT_CHECK(sp->ev[0].begin_ns == c.start_ns && sp->ev[0].end_ns < c.end_ns);
  }
  kiln_prof_capture_clear(&c);
  kiln_fs_remove_tree(dir);
  /* the threads' later ends recorded nothing anywhere: no capture runs */
  KT_CHECK(!kiln_profiler_active());
}

/* Steps queued without a value read still run on the executor when the
 * program stops the capture: their kernels must be in it. */
KT_TEST(programmatic_capture_of_queued_steps_has_kernel_lanes) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  int64_t ws[2] = {192, 192};
  kiln_tensor w = kiln_keep(kiln_rand_normal(KILN_F32, 2, ws, 7));
  kiln_tensor x = kiln_keep(kiln_rand_normal(KILN_F32, 2, ws, 8));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  char logdir[512], run[1024], path[2048], host[256];
  kiln_err err = {0};
  KT_CHECK(kiln_fs_mkdtemp(NULL, "kiln-prof-", logdir, sizeof logdir, &err) == KILN_OK);
  KT_CHECK(kiln_profiler_start() == KILN_OK);
  for (int s = 0; s < 4; s++) {
    kiln_step_trace("Training_Step", s);
    KILN_TRACE("Forward") {
      kiln_tensor y = kiln_tanh(kiln_matmul(kiln_matmul(x, w), w));
      kiln_assign(x, y);
    }
    KT_CHECK(kiln_mark_step() == KILN_OK); /* queued, not waited for */
  }
  kiln_step_trace_end();
  KT_CHECK(kiln_profiler_stop(logdir, run, sizeof run) == KILN_OK);
  gethostname(host, sizeof host);
  host[sizeof host - 1] = 0;
  for (char *p = host; *p; p++)
    if (*p == '/') *p = '_';
  snprintf(path, sizeof path, "%s/%s.xplane.pb", run, host);
  uint8_t *data;
  size_t n;
  read_file(path, &data, &n);
  kiln_prof_capture c;
  KT_CHECK(kiln_prof_xspace_decode(data, n, path, &c, &err) == KILN_OK);
  free(data);
  int gemms = 0, lanes = 0, steps = 0;
  for (int i = 0; i < c.n_threads; i++) {
    int lane_has = 0;
    for (uint32_t k = 0; k < c.threads[i].n; k++) {
      const kiln_prof_event *e = &c.threads[i].ev[k];
      lane_has |= e->kind == KILN_PROF_KERNEL;
      steps += e->kind == KILN_PROF_STEP;
      gemms += e->kind == KILN_PROF_KERNEL && !strncmp(e->name, "Forward/gemm 192x192x192", 24);
    }
    lanes += lane_has;
  }
  KT_EQ_INT(steps, 4);
  KT_CHECK(lanes >= 1);
  KT_CHECK(gemms >= 8); /* two GEMMs per step, on one lane or more each */
  kiln_prof_capture_clear(&c);
  kiln_release(w);
  kiln_release(x);
  kiln_shutdown();
  kiln_fs_remove_tree(logdir);
}

KT_TEST(timed_capture_with_null_err_reports_through_the_sticky_status) {
  kiln_clear_error();
  KT_CHECK(kiln_profiler_capture(0, "/tmp/x", NULL) == KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "duration 0 ms is out of range");
  kiln_clear_error();
}

/* A capture that cannot be written leaves no empty directories behind: the
 * run directory and the parents kiln made for it go, what existed stays. */
KT_TEST(failed_stop_removes_the_directories_it_made) {
  kiln_clear_error();
  char base[512], logdir[700], made[900];
  kiln_err err = {0};
  KT_CHECK(kiln_fs_mkdtemp(NULL, "kiln-prof-", base, sizeof base, &err) == KILN_OK);
  snprintf(logdir, sizeof logdir, "%s/new/logs", base);
  KT_CHECK(kiln_profiler_start() == KILN_OK);
  kiln_fs_test_write_fault(10, ENOSPC); /* the first file's write fails */
  char run[1024];
  KT_EQ_INT(kiln_profiler_stop(logdir, run, sizeof run), KILN_ERR_IO);
  kiln_fs_test_write_fault(0, 0);
  KT_STR_CONTAINS(kiln_last_error(), "profiler_stop");
  kiln_clear_error();
  snprintf(made, sizeof made, "%s/new", base);
  KT_CHECK(access(made, F_OK) != 0); /* new/logs/plugins/profile/<run> all gone */
  KT_CHECK(access(base, F_OK) == 0); /* what existed before stays */
  /* a directory that holds something stays too */
  KT_CHECK(kiln_fs_mkdirs_private(logdir, &err) == KILN_OK);
  snprintf(made, sizeof made, "%s/keep.txt", logdir);
  FILE *f = fopen(made, "w");
  KT_CHECK(f != NULL);
  if (f) fclose(f);
  KT_CHECK(kiln_profiler_start() == KILN_OK);
  kiln_fs_test_write_fault(10, ENOSPC);
  KT_EQ_INT(kiln_profiler_stop(logdir, run, sizeof run), KILN_ERR_IO);
  kiln_fs_test_write_fault(0, 0);
  kiln_clear_error();
  KT_CHECK(access(made, F_OK) == 0);
  snprintf(made, sizeof made, "%s/plugins", logdir);
  KT_CHECK(access(made, F_OK) != 0);
  kiln_fs_remove_tree(base);
}

KT_MAIN(KT_CASE(annotations_nest_with_parent_child_timing), KT_CASE(step_trace_marks_steps_and_closes_inner_regions),
        KT_CASE(work_that_ended_before_the_capture_is_not_in_it),
        KT_CASE(two_threads_annotate_during_a_capture), KT_CASE(full_buffers_drop_and_count),
        KT_CASE(capture_writes_xplane_and_chrome_trace_with_named_kernels), KT_CASE(scopes_do_not_change_graph_caching),
        KT_CASE(timed_capture_rejects_bad_arguments_and_concurrent_runs),
        KT_CASE(a_capture_from_another_thread_holds_regions_across_its_edges),
        KT_CASE(programmatic_capture_of_queued_steps_has_kernel_lanes),
        KT_CASE(timed_capture_with_null_err_reports_through_the_sticky_status),
        KT_CASE(failed_stop_removes_the_directories_it_made))
