/* The memory profile and the kernels' source lines in captures.
 *
 * A hand-built capture whose figures are known by construction (the oracle
 * is the arithmetic in the comments): the XSpace carries, per allocator, a
 * host line "Memory: <allocator>" of "MemoryAllocation" /
 * "MemoryDeallocation" events in time order with the stats XProf's memory
 * profile converter reads (allocator_name, bytes_allocated,
 * peak_bytes_in_use, requested_bytes, allocation_bytes, addr, region_type,
 * group_id); kernels carry their user's line as the stat "source" and in
 * their framework-op name; the Chrome trace has the in-use counter; kiln's
 * own reader skips the memory lines.
 *
 * And a live capture of a training-like loop: the runtime's buffer cache
 * and the cpu backend's scratch arenas record allocations and frees whose
 * in-use totals form one consistent chain (every event's total is the one
 * before it plus its bytes), and the kernels name this file's lines. */
#define _GNU_SOURCE
#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>

#include "base/spans.h"
#include "kt.h"
#include "profiler/capture.h"
#include "xplane.pb-c.h"

#define MS 1000000ull
#define T0 (1000 * MS)
#define BUFS "kiln device buffers"
#define SCRATCH "kiln cpu scratch arenas"

typedef Tensorflow__Profiler__XSpace XSpace;
typedef Tensorflow__Profiler__XPlane XPlane;
typedef Tensorflow__Profiler__XLine XLine;
typedef Tensorflow__Profiler__XEvent XEvent;
typedef Tensorflow__Profiler__XStat XStat;

static kiln_prof_event mem(const char *alloc, double t_ms, int64_t bytes, int64_t in_use, uint64_t addr) {
  kiln_prof_event e = {.begin_ns = T0 + (uint64_t)(t_ms * MS), .end_ns = T0 + (uint64_t)(t_ms * MS),
                       .name = alloc, .kind = KILN_PROF_MEMORY, .arg = bytes, .in_use = in_use, .addr = addr};
  return e;
}

/* Capture [0, 100 ms]: step 7 is [0, 100]. Device buffers, recorded on two
 * threads: +1000 at 10 (A, in use 1000), +500 at 20 (B, 1500, thread 2),
 * -1000 at 30 (A, 500), +2000 at 40 (C, 2500), -500 at 50 (B, 2000,
 * thread 2): peak 2500 from 40 on. Scratch: +64 at 5 (in use 64 + 128
 * arenas made before the capture: 192). A kernel made at train.c:88. */
static void build(kiln_prof_capture *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->host, sizeof c->host, "h");
  c->rank = 0, c->world = 1;
  c->start_ns = T0, c->end_ns = T0 + 100 * MS;
  c->n_threads = 3;
  c->threads = calloc(3, sizeof *c->threads);
  kiln_prof_thread_events *h = &c->threads[0], *x = &c->threads[1], *l = &c->threads[2];
  snprintf(h->name, sizeof h->name, "main thread"), h->tid = 1, h->lane = -1;
  snprintf(x->name, sizeof x->name, "kiln executor"), x->tid = 2, x->lane = -1;
  snprintf(l->name, sizeof l->name, "kiln worker 0"), l->tid = 3, l->lane = 0;
  h->ev = calloc(8, sizeof *h->ev), x->ev = calloc(8, sizeof *x->ev), l->ev = calloc(8, sizeof *l->ev);
  h->ev[h->n++] = (kiln_prof_event){.begin_ns = T0, .end_ns = T0 + 100 * MS, .name = "Training_Step",
                                    .kind = KILN_PROF_STEP, .arg = 7};
  h->ev[h->n++] = mem(BUFS, 10, 1000, 1000, 0x1000);
  h->ev[h->n++] = mem(BUFS, 30, -1000, 500, 0x1000);
  h->ev[h->n++] = mem(BUFS, 40, 2000, 2500, 0x3000);
  h->ev[h->n++] = mem(SCRATCH, 5, 64, 192, 0x9000);
  x->ev[x->n++] = mem(BUFS, 20, 500, 1500, 0x2000);
  x->ev[x->n++] = mem(BUFS, 50, -500, 2000, 0x2000);
  l->ev[l->n++] = (kiln_prof_event){.begin_ns = T0 + 60 * MS, .end_ns = T0 + 70 * MS, .name = "Forward/gemm 8x8x8",
                                    .kind = KILN_PROF_KERNEL, .arg = -1, .flops = 1024, .src = "train.c:88"};
}

static const char *stat_name(const XPlane *p, int64_t id) {
  for (size_t i = 0; i < p->n_stat_metadata; i++)
    if (p->stat_metadata[i]->key == id) return p->stat_metadata[i]->value->name;
  return "";
}

static const char *event_name(const XPlane *p, const XEvent *x) {
  for (size_t m = 0; m < p->n_event_metadata; m++)
    if (p->event_metadata[m]->key == x->metadata_id) return p->event_metadata[m]->value->name;
  return "";
}

static const XStat *find_stat(const XPlane *p, const XEvent *x, const char *name) {
  for (size_t i = 0; i < x->n_stats; i++)
    if (!strcmp(stat_name(p, x->stats[i]->metadata_id), name)) return x->stats[i];
  return NULL;
}

static int64_t int_stat(const XPlane *p, const XEvent *x, const char *name) {
  const XStat *s = find_stat(p, x, name);
  KT_CHECK_MSG(s && s->value_case == TENSORFLOW__PROFILER__XSTAT__VALUE_INT64_VALUE, "stat %s", name);
  return s && s->value_case == TENSORFLOW__PROFILER__XSTAT__VALUE_INT64_VALUE ? s->int64_value : -1;
}

static const char *str_stat(const XPlane *p, const XEvent *x, const char *name) {
  const XStat *s = find_stat(p, x, name);
  KT_CHECK_MSG(s && s->value_case == TENSORFLOW__PROFILER__XSTAT__VALUE_STR_VALUE, "stat %s", name);
  return s && s->value_case == TENSORFLOW__PROFILER__XSTAT__VALUE_STR_VALUE ? s->str_value : "";
}

static const XLine *line_named(const XPlane *p, const char *name) {
  for (size_t l = 0; l < p->n_lines; l++)
    if (p->lines[l]->name && !strcmp(p->lines[l]->name, name)) return p->lines[l];
  return NULL;
}

static void check_buffers_line(const XPlane *host) {
  const XLine *l = line_named(host, "Memory: " BUFS);
  KT_CHECK(l != NULL);
  if (!l) return;
  KT_EQ_INT((int)l->n_events, 5);
  if (l->n_events != 5) return;
  /* in time order across the two threads */
  static const int64_t t_ms[5] = {10, 20, 30, 40, 50}, bytes[5] = {1000, 500, 1000, 2000, 500};
  static const int64_t in_use[5] = {1000, 1500, 500, 2500, 2000}, peak[5] = {1000, 1500, 1500, 2500, 2500};
  static const int64_t addr[5] = {0x1000, 0x2000, 0x1000, 0x3000, 0x2000};
  static const int alloc[5] = {1, 1, 0, 1, 0};
  for (int i = 0; i < 5; i++) {
    const XEvent *x = l->events[i];
    KT_CHECK(!strcmp(event_name(host, x), alloc[i] ? "MemoryAllocation" : "MemoryDeallocation"));
    KT_EQ_INT((int)(x->offset_ps / 1000000000), (int)t_ms[i]);
    KT_EQ_INT((int)x->duration_ps, 0);
    KT_CHECK(!strcmp(str_stat(host, x, "allocator_name"), BUFS));
    KT_EQ_INT((int)int_stat(host, x, "bytes_allocated"), (int)in_use[i]);
    KT_EQ_INT((int)int_stat(host, x, "peak_bytes_in_use"), (int)peak[i]);
    KT_EQ_INT((int)int_stat(host, x, "requested_bytes"), (int)bytes[i]);
    KT_EQ_INT((int)int_stat(host, x, "allocation_bytes"), (int)bytes[i]);
    KT_EQ_INT((int)int_stat(host, x, "addr"), (int)addr[i]);
    KT_EQ_INT((int)int_stat(host, x, "group_id"), 7);
    KT_EQ_INT((int)int_stat(host, x, "kiln_kind"), KILN_PROF_MEMORY);
    KT_CHECK(!strcmp(str_stat(host, x, "region_type"), "buffer"));
    KT_CHECK(find_stat(host, x, "bytes_reserved") == NULL); /* XProf adds it to the bytes in use */
  }
}

static void check_xspace(const uint8_t *buf, size_t n) {
  XSpace *sp = tensorflow__profiler__xspace__unpack(NULL, n, buf);
  KT_CHECK(sp != NULL);
  if (!sp) return;
  const XPlane *host = sp->planes[0], *dev = sp->planes[1];
  KT_CHECK(!strcmp(host->name, "/host:CPU"));
  check_buffers_line(host);
  const XLine *s = line_named(host, "Memory: " SCRATCH);
  KT_CHECK(s && s->n_events == 1);
  if (s && s->n_events == 1) {
    /* the peak counts the arenas made before the capture: 192, not 64 */
    KT_EQ_INT((int)int_stat(host, s->events[0], "peak_bytes_in_use"), 192);
    KT_EQ_INT((int)int_stat(host, s->events[0], "requested_bytes"), 64);
  }
  /* no memory event on the threads' own lines */
  for (size_t li = 0; li < host->n_lines; li++)
    for (size_t k = 0; k < host->lines[li]->n_events; k++)
      if (strncmp(host->lines[li]->name, "Memory: ", 8))
        KT_CHECK(strncmp(event_name(host, host->lines[li]->events[k]), "Memory", 6));
  /* the kernel: "source" on the device plane, the line in its framework op */
  const XLine *ops = line_named(host, "Ops lane 0");
  KT_CHECK(ops && ops->n_events == 1);
  if (ops && ops->n_events == 1)
    KT_CHECK_MSG(!strcmp(event_name(host, ops->events[0]), "Forward/gemm_8x8x8->train.c-88:Gemm"), "op %s",
                 event_name(host, ops->events[0]));
  const XLine *lane = line_named(dev, "Kernels lane 0 (kiln worker 0)");
  KT_CHECK(lane && lane->n_events == 1);
  if (lane && lane->n_events == 1) {
    KT_CHECK(!strcmp(event_name(dev, lane->events[0]), "Forward/gemm 8x8x8"));
    KT_CHECK(!strcmp(str_stat(dev, lane->events[0], "source"), "train.c:88"));
  }
  tensorflow__profiler__xspace__free_unpacked(sp, NULL);
}

KT_TEST(memory_lines_and_kernel_sources_in_the_xspace) {
  kiln_prof_capture c;
  build(&c);
  kiln_err err = {0};
  uint8_t *buf = NULL;
  size_t n = 0;
  KT_CHECK(kiln_prof_xspace_encode(&c, &buf, &n, &err) == KILN_OK);
  check_xspace(buf, n);
  /* kiln's reader: the memory lines are XProf's, not threads of the capture */
  kiln_prof_capture d;
  KT_CHECK(kiln_prof_xspace_decode(buf, n, "memory.xplane.pb", &d, &err) == KILN_OK);
  int mem_events = 0, threads_named_memory = 0;
  for (int i = 0; i < d.n_threads; i++) {
    threads_named_memory += !strncmp(d.threads[i].name, "Memory: ", 8);
    for (uint32_t k = 0; k < d.threads[i].n; k++) mem_events += !strncmp(d.threads[i].ev[k].name, "Memory", 6);
  }
  KT_EQ_INT(mem_events, 0);
  KT_EQ_INT(threads_named_memory, 0);
  kiln_prof_capture_clear(&d);
  free(buf);
  /* the Chrome trace: a counter sample per event, the kernel's source */
  char *json = NULL;
  KT_CHECK(kiln_prof_chrome_json(&c, &json, &n, &err) == KILN_OK);
  if (json) {
    KT_STR_CONTAINS(json, "{\"ph\":\"C\",\"pid\":1,\"ts\":40000.000,\"cat\":\"memory\",\"name\":\"" BUFS
                          "\",\"args\":{\"in_use_bytes\":2500}}");
    KT_STR_CONTAINS(json, "\"source\":\"train.c:88\"");
    int samples = 0;
    for (const char *p = json; (p = strstr(p, "\"ph\":\"C\"")); p++) samples++;
    KT_EQ_INT(samples, 6);
  }
  free(json);
  kiln_prof_capture_clear(&c);
}

/* Every memory event of allocator name: the bytes in use before it (in_use
 * - bytes) must be the bytes in use after another event, except for one
 * (the first), whatever the order of events recorded at the same
 * nanosecond on two threads: as multisets, {before} = {start} + {after} -
 * {end}. Returns the number of events; *peak the largest in-use total,
 * the one before the first event included. */
static int check_chain(const kiln_prof_capture *c, const char *name, int64_t *peak) {
  int n = 0;
  *peak = 0;
  for (int i = 0; i < c->n_threads; i++)
    for (uint32_t k = 0; k < c->threads[i].n; k++) n += c->threads[i].ev[k].kind == KILN_PROF_MEMORY &&
                                                          !strcmp(c->threads[i].ev[k].name, name);
  int64_t *before = calloc((size_t)n + 1, sizeof *before), *after = calloc((size_t)n + 1, sizeof *after);
  int m = 0;
  for (int i = 0; i < c->n_threads; i++)
    for (uint32_t k = 0; k < c->threads[i].n; k++) {
      const kiln_prof_event *e = &c->threads[i].ev[k];
      if (e->kind != KILN_PROF_MEMORY || strcmp(e->name, name)) continue;
      KT_CHECK(e->arg != 0 && e->in_use >= 0 && e->addr != 0 && e->begin_ns == e->end_ns);
      before[m] = e->in_use - e->arg, after[m] = e->in_use;
      if (e->in_use > *peak) *peak = e->in_use;
      m++;
    }
  /* unmatched befores (after removing one equal after each) */
  int unmatched = 0;
  for (int i = 0; i < m; i++) {
    int j = 0;
    while (j < m && after[j] != before[i]) j++;
    if (j < m) after[j] = INT64_MIN;
    else if (++unmatched == 1 && before[i] > *peak) *peak = before[i];
  }
  KT_CHECK_MSG(m == 0 || unmatched == 1, "%s: %d of %d events do not follow another one", name, unmatched, m);
  free(before), free(after);
  return m;
}

KT_TEST(live_capture_records_buffers_scratch_and_kernel_lines) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  int64_t ws[2] = {64, 64};
  kiln_tensor w = kiln_keep(kiln_rand_normal(KILN_F32, 2, ws, 7));
  kiln_tensor x = kiln_keep(kiln_rand_normal(KILN_F32, 2, ws, 8));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  uint64_t t0;
  KT_CHECK(kiln_prof_session_begin(0, &t0) == KILN_OK);
  int mm_line = 0, tanh_line = 0;
  kiln_tensor prev = {0};
  for (int s = 0; s < 4; s++) { /* a new output each step, the previous one freed */
    kiln_step_trace("Training_Step", s);
    kiln_tensor h = kiln_matmul(x, w); mm_line = __LINE__;
    kiln_tensor y = kiln_tanh(kiln_mul_c(h, 0.5)); tanh_line = __LINE__;
    kiln_keep(y);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    if (s) kiln_release(prev);
    prev = y;
  }
  kiln_step_trace_end();
  KT_CHECK(kiln_wait() == KILN_OK);
  kiln_prof_capture c;
  memset(&c, 0, sizeof c);
  uint64_t dropped = 0;
  KT_CHECK(kiln_prof_session_end(&c.threads, &c.n_threads, &dropped, &c.end_ns) == KILN_OK);
  c.start_ns = t0;
  snprintf(c.host, sizeof c.host, "h");
  c.world = 1;
  int64_t peak = 0, speak = 0;
  int nb = check_chain(&c, BUFS, &peak);
  KT_CHECK_MSG(nb >= 7, "%d buffer events", nb); /* y of each step, and three frees of it */
  KT_CHECK(peak > 0);
  KT_CHECK(check_chain(&c, SCRATCH, &speak) >= 1); /* the graph's first run: its arena (h) */
  KT_CHECK(speak > 0);
  /* the kernels name the lines of this file that made them */
  char mm_src[64], tanh_src[64];
  snprintf(mm_src, sizeof mm_src, "test_profiler_memory.c:%d", mm_line);
  snprintf(tanh_src, sizeof tanh_src, "test_profiler_memory.c:%d", tanh_line);
  int gemm = 0, fused = 0;
  for (int i = 0; i < c.n_threads; i++)
    for (uint32_t k = 0; k < c.threads[i].n; k++) {
      const kiln_prof_event *e = &c.threads[i].ev[k];
      if (e->kind != KILN_PROF_KERNEL) continue;
      KT_CHECK_MSG(e->src != NULL, "kernel %s has no source line", e->name);
      if (!e->src) continue;
      if (strstr(e->name, "gemm")) gemm += !strcmp(e->src, mm_src);
      else fused += !strcmp(e->src, tanh_src);
    }
  KT_CHECK(gemm >= 4);
  KT_CHECK(fused >= 4);
  /* the XSpace's peak is the largest total recorded */
  kiln_err err = {0};
  uint8_t *buf = NULL;
  size_t n = 0;
  KT_CHECK(kiln_prof_xspace_encode(&c, &buf, &n, &err) == KILN_OK);
  XSpace *sp = buf ? tensorflow__profiler__xspace__unpack(NULL, n, buf) : NULL;
  KT_CHECK(sp != NULL);
  if (sp) {
    const XLine *l = line_named(sp->planes[0], "Memory: " BUFS);
    KT_CHECK(l && (int)l->n_events == nb);
    if (l && l->n_events) {
      KT_EQ_INT((int)int_stat(sp->planes[0], l->events[l->n_events - 1], "peak_bytes_in_use"), (int)peak);
      for (size_t k = 1; k < l->n_events; k++) KT_CHECK(l->events[k]->offset_ps >= l->events[k - 1]->offset_ps);
    }
    tensorflow__profiler__xspace__free_unpacked(sp, NULL);
  }
  free(buf);
  kiln_prof_threads_free(c.threads, c.n_threads);
  kiln_release(prev);
  /* no capture: nothing is recorded, the totals go on */
  KT_CHECK(!kiln_prof_on());
  kiln_shutdown();
}

KT_MAIN(KT_CASE(memory_lines_and_kernel_sources_in_the_xspace),
        KT_CASE(live_capture_records_buffers_scratch_and_kernel_lines))
