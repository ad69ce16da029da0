/* Annotations, per-thread event buffers and the capture session.
 *
 * Why complete events recorded at the end of a region (and not separate
 * begin/end records): a region's begin time lives on the thread-local
 * annotation stack, so a buffer never holds an unmatched half, a dropped
 * event never unbalances the nesting the viewers rebuild, and the exporters
 * need no matching pass.
 */
#define _GNU_SOURCE
#include "profiler/events.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "debug/metrics.h"
#include "kiln/profiler.h"

#define MAX_DEPTH 64
#define MAX_THREADS 1024

/* ───── the session singleton ───── */

uint64_t kiln_prof_active_gen_; /* atomic; 0: no capture */

static struct {
  pthread_mutex_t mu;
  kiln_prof_thread_events *bufs[MAX_THREADS]; /* guarded by mu */
  uint32_t caps[MAX_THREADS];
  int n;
  uint32_t cap;           /* events per thread for this session */
  uint64_t last_gen;      /* generations are never reused */
  uint64_t dropped_threads; /* atomic */
  int inflight;           /* atomic: record calls between check and write */
  uint32_t next_events;   /* atomic: kiln_profiler_set_buffer_events */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_events = 65536};

typedef struct ann {
  const char *name;
  uint64_t t0;   /* 0: opened while no capture ran */
  uint64_t gen;  /* capture generation at begin */
  uint32_t scope; /* scope id, UINT32_MAX: not yet interned */
  uint8_t kind;  /* USER or STEP */
  int64_t arg;
} ann;

static __thread ann tl_stack[MAX_DEPTH];
static __thread int tl_depth;  /* may exceed MAX_DEPTH: those are counted, not named */
static __thread int tl_step = -1; /* stack index of the open step region */
static __thread kiln_prof_thread_events *tl_buf;
static __thread uint64_t tl_gen;
static __thread char tl_name[64];
static __thread int tl_lane = -1;

uint64_t kiln_prof_now(void) { return kiln_now_ns(); }

const char *kiln_prof_kind_name(kiln_prof_kind k) {
  static const char *const names[KILN_PROF_KIND_COUNT] = {
      "annotation", "step", "tracing", "hashing", "compiling", "transferring",
      "waiting for the device", "waiting for input", "executing", "dispatching", "kernel"};
  return (unsigned)k < KILN_PROF_KIND_COUNT ? names[k] : "unknown";
}

void kiln_prof_thread_set(const char *name, int lane) {
  snprintf(tl_name, sizeof tl_name, "%s", name ? name : "");
  tl_lane = lane;
}

/* The calling thread's buffer for generation gen (runs inside the
 * inflight window, so the session cannot end under it). */
static kiln_prof_thread_events *attach(uint64_t gen) {
  kiln_prof_thread_events *t = NULL;
  pthread_mutex_lock(&g.mu);
  if (__atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_SEQ_CST) == gen && g.n < MAX_THREADS) {
    t = calloc(1, sizeof *t);
    if (t) t->ev = malloc(sizeof *t->ev * g.cap);
    if (t && !t->ev) {
      free(t);
      t = NULL;
    }
    if (t) {
      t->tid = (int64_t)syscall(SYS_gettid);
      t->lane = tl_lane;
      if (tl_name[0])
        snprintf(t->name, sizeof t->name, "%s", tl_name);
      else if (t->tid == (int64_t)getpid())
        snprintf(t->name, sizeof t->name, "main thread");
      else {
        char pn[32] = "";
        pthread_getname_np(pthread_self(), pn, sizeof pn);
        snprintf(t->name, sizeof t->name, "%s (%lld)", pn[0] ? pn : "thread", (long long)t->tid);
      }
      g.caps[g.n] = g.cap;
      g.bufs[g.n++] = t;
    }
  }
  pthread_mutex_unlock(&g.mu);
  return t;
}

static void record_depth(kiln_prof_kind kind, const char *name, uint64_t b, uint64_t e, int64_t arg, double flops,
                         double bytes, int depth) {
  uint64_t gen = __atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_RELAXED);
  if (!gen) return;
  /* Dekker-style handshake with kiln_prof_session_end: announce, then
   * re-check; the ender clears the generation, then waits for zero. */
  __atomic_fetch_add(&g.inflight, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_SEQ_CST) == gen) {
    if (tl_gen != gen) {
      tl_buf = attach(gen);
      tl_gen = gen;
    }
    kiln_prof_thread_events *t = tl_buf;
    if (!t) {
      __atomic_fetch_add(&g.dropped_threads, 1, __ATOMIC_RELAXED);
    } else if (t->n < g.cap) {
      kiln_prof_event *ev = &t->ev[t->n++];
      ev->begin_ns = b;
      ev->end_ns = e < b ? b : e;
      ev->name = name ? name : "(unnamed)";
      ev->kind = (uint8_t)kind;
      ev->depth = (uint8_t)(depth > 255 ? 255 : depth);
      ev->arg = arg;
      ev->flops = flops;
      ev->bytes = bytes;
    } else {
      t->dropped++;
    }
  }
  __atomic_fetch_sub(&g.inflight, 1, __ATOMIC_RELEASE);
}

void kiln_prof_record(kiln_prof_kind kind, const char *name, uint64_t b, uint64_t e, int64_t arg, double flops,
                      double bytes) {
  record_depth(kind, name, b, e, arg, flops, bytes, tl_depth);
}

/* ───── annotations ───── */

static inline void push(const char *name, kiln_prof_kind kind, int64_t arg) {
  int d = tl_depth++;
  if (d >= MAX_DEPTH) return;
  ann *a = &tl_stack[d];
  a->name = name;
  a->kind = (uint8_t)kind;
  a->arg = arg;
  a->scope = UINT32_MAX;
  uint64_t gen = __atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_RELAXED);
  a->gen = gen;
  a->t0 = gen ? kiln_now_ns() : 0;
}

static inline void pop(void) {
  if (tl_depth <= 0) return;
  int d = --tl_depth;
  if (d == tl_step) tl_step = -1;
  if (d >= MAX_DEPTH) return;
  ann *a = &tl_stack[d];
  if (a->t0 && __atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_RELAXED) == a->gen)
    record_depth((kiln_prof_kind)a->kind, a->name, a->t0, kiln_now_ns(), a->arg, 0, 0, d);
}

void kiln_trace_begin(const char *name) { push(name ? name : "(null)", KILN_PROF_USER, -1); }

void kiln_trace_begin_copy(const char *name) {
  const char *s = kiln_prof_intern(name ? name : "(null)");
  push(s ? s : "(name table full)", KILN_PROF_USER, -1);
}

void kiln_trace_end(void) {
  if (tl_depth > 0 && tl_depth - 1 == tl_step) return; /* a step region ends only at the next step */
  pop();
}

void kiln_trace_scope_end_(kiln_trace_scope_ *s) {
  if (!s->open) return;
  s->open = 0;
  kiln_trace_end();
}

void kiln_step_trace_end(void) {
  int s = tl_step;
  if (s < 0) return;
  while (tl_depth > s) pop(); /* regions left open inside the step close with it */
}

void kiln_step_trace(const char *name, int64_t step) {
  kiln_step_trace_end();
  tl_step = tl_depth < MAX_DEPTH ? tl_depth : -1;
  push(name ? name : "(null)", KILN_PROF_STEP, step);
}

/* ───── scopes ───── */

uint32_t kiln_prof_scope_intern_(uint32_t parent, const char *name); /* scope.c */

uint32_t kiln_prof_scope_current(void) {
  int top = tl_depth < MAX_DEPTH ? tl_depth : MAX_DEPTH;
  int i = top - 1;
  while (i >= 0 && tl_stack[i].kind != KILN_PROF_USER) i--;
  if (i < 0) return 0;
  if (tl_stack[i].scope != UINT32_MAX) return tl_stack[i].scope;
  /* intern the missing prefix from the outermost user region inwards */
  uint32_t parent = 0;
  for (int k = 0; k <= i; k++) {
    ann *a = &tl_stack[k];
    if (a->kind != KILN_PROF_USER) continue;
    if (a->scope == UINT32_MAX) a->scope = kiln_prof_scope_intern_(parent, a->name);
    parent = a->scope;
  }
  return parent;
}

/* ───── session ───── */

void kiln_profiler_set_buffer_events(uint32_t n) {
  if (n < 16) n = 16;
  if (n > (1u << 24)) n = 1u << 24;
  __atomic_store_n(&g.next_events, n, __ATOMIC_RELAXED);
}
uint32_t kiln_profiler_buffer_events(void) { return __atomic_load_n(&g.next_events, __ATOMIC_RELAXED); }
int kiln_profiler_active(void) { return kiln_prof_on(); }

kiln_status kiln_prof_session_begin(uint32_t events_per_thread, uint64_t *start_ns) {
  pthread_mutex_lock(&g.mu);
  if (__atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_SEQ_CST)) {
    pthread_mutex_unlock(&g.mu);
    return KILN_ERR_INVALID_ARGUMENT;
  }
  g.cap = events_per_thread ? events_per_thread : kiln_profiler_buffer_events();
  g.n = 0;
  __atomic_store_n(&g.dropped_threads, 0, __ATOMIC_RELAXED);
  *start_ns = kiln_now_ns();
  __atomic_store_n(&kiln_prof_active_gen_, ++g.last_gen, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&g.mu);
  return KILN_OK;
}

kiln_status kiln_prof_session_end(kiln_prof_thread_events **out, int *n_out, uint64_t *dropped_threads,
                                  uint64_t *end_ns) {
  *out = NULL;
  *n_out = 0;
  *dropped_threads = 0;
  pthread_mutex_lock(&g.mu);
  if (!__atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_SEQ_CST)) {
    pthread_mutex_unlock(&g.mu);
    return KILN_ERR_INVALID_ARGUMENT;
  }
  *end_ns = kiln_now_ns();
  __atomic_store_n(&kiln_prof_active_gen_, 0, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&g.mu);
  /* writers that passed their check finish their one event; attach() may
   * need the mutex, so it is not held while waiting */
  while (__atomic_load_n(&g.inflight, __ATOMIC_ACQUIRE) != 0) sched_yield();
  pthread_mutex_lock(&g.mu);
  kiln_prof_thread_events *v = calloc((size_t)g.n + 1, sizeof *v);
  for (int i = 0; i < g.n; i++) {
    if (v) v[i] = *g.bufs[i];
    else free(g.bufs[i]->ev);
    free(g.bufs[i]);
    g.bufs[i] = NULL;
  }
  int n = v ? g.n : 0;
  g.n = 0;
  *dropped_threads = __atomic_load_n(&g.dropped_threads, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&g.mu);
  *out = v;
  *n_out = n;
  return v ? KILN_OK : KILN_ERR_OUT_OF_MEMORY;
}

void kiln_prof_threads_free(kiln_prof_thread_events *t, int n) {
  if (!t) return;
  for (int i = 0; i < n; i++) free(t[i].ev);
  free(t);
}
