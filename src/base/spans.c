/* Annotations, per-thread event buffers and the capture session.
 *
 * Why complete events recorded at the end of a region (and not separate
 * begin/end records): a region's begin time lives on the thread-local
 * annotation stack, so a buffer never holds an unmatched half, a dropped
 * event never unbalances the nesting the viewers rebuild, and the exporters
 * need no matching pass.
 */
#define _GNU_SOURCE
#include "base/spans.h"
#include "kiln/profiler.h" /* kiln_profiler_active */

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"
#include "kiln/profiler.h"

#define MAX_DEPTH 64
#define MAX_THREADS 1024

/* ───── per-thread state ─────
 *
 * Each thread that annotates, records or names itself gets a heap state,
 * linked into a registry so that the end of a capture can see the regions
 * every thread still has open (a training thread blocked in a value read
 * for the whole capture must still show its step, clipped to the capture).
 * The owner writes its stack under a sequence counter (a seqlock: no lock
 * on the annotation path); the ender reads a consistent copy, retrying
 * while the owner is mid-update. A thread's state is unlinked and freed by
 * a key destructor when the thread exits. */

typedef struct ann {
  const char *name; /* read by the ender: atomic */
  uint64_t t0;      /* atomic; 0: opened while no capture ran */
  int64_t arg;      /* atomic */
  uint64_t gen;     /* owner only: capture generation at begin */
  uint32_t scope;   /* owner only: scope id, UINT32_MAX: not yet interned */
  uint8_t kind;     /* atomic: USER or STEP */
} ann;

typedef struct tstate {
  struct tstate *prev, *next; /* registry links, guarded by g.mu */
  uint32_t seq;               /* odd while the owner updates the stack */
  int depth;                  /* atomic; may exceed MAX_DEPTH (counted, not named) */
  ann stack[MAX_DEPTH];
  char name[64]; /* guarded by g.mu */
  int lane;      /* guarded by g.mu */
  int64_t tid;
  kiln_prof_thread_events *buf; /* the running capture's buffer (guarded by g.mu) */
  uint64_t buf_gen;
} tstate;

/* ───── the session singleton ───── */

uint64_t kiln_prof_active_gen_; /* atomic; 0: no capture */

static struct {
  pthread_mutex_t mu;
  kiln_prof_thread_events *bufs[MAX_THREADS]; /* guarded by mu */
  int n;
  uint32_t cap;             /* events per thread for this session */
  uint64_t start_ns;        /* the running session's start (atomic) */
  uint64_t last_gen;        /* generations are never reused */
  int ending;               /* an end is collecting: no new session yet (guarded by mu) */
  uint64_t dropped_threads; /* atomic */
  int inflight;             /* atomic: record calls between check and write */
  uint32_t next_events;     /* atomic: kiln_profiler_set_buffer_events */
  tstate *threads;          /* registry (guarded by mu) */
  pthread_key_t key;
  pthread_once_t key_once;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_events = 65536, .key_once = PTHREAD_ONCE_INIT};

static __thread tstate *tl_ts;
static __thread int tl_step = -1; /* stack index of the open step region */
static __thread kiln_prof_thread_events *tl_buf;
static __thread uint64_t tl_gen;

uint64_t kiln_prof_now(void) { return kiln_now_ns(); }

const char *kiln_prof_kind_name(kiln_prof_kind k) {
  static const char *const names[KILN_PROF_KIND_COUNT] = {
      "annotation", "step", "tracing", "hashing", "compiling", "transferring",
      "waiting for the device", "waiting for input", "executing", "dispatching", "kernel", "collective",
      "memory"};
  return (unsigned)k < KILN_PROF_KIND_COUNT ? names[k] : "unknown";
}

static void tstate_exit(void *p) {
  tstate *ts = p;
  pthread_mutex_lock(&g.mu);
  if (ts->prev) ts->prev->next = ts->next;
  else g.threads = ts->next;
  if (ts->next) ts->next->prev = ts->prev;
  pthread_mutex_unlock(&g.mu);
  tl_ts = NULL;
  free(ts);
}

static void key_init(void) {
  if (pthread_key_create(&g.key, tstate_exit) != 0) g.key = (pthread_key_t)-1;
}

/* The calling thread's state, created on first use; NULL only when out of
 * memory (the thread's annotations are then not recorded). */
static tstate *ts_get(void) {
  tstate *ts = tl_ts;
  if (ts) return ts;
  pthread_once(&g.key_once, key_init);
  ts = calloc(1, sizeof *ts);
  if (!ts) return NULL;
  ts->lane = -1;
  ts->tid = (int64_t)syscall(SYS_gettid);
  pthread_mutex_lock(&g.mu);
  ts->next = g.threads;
  if (g.threads) g.threads->prev = ts;
  g.threads = ts;
  pthread_mutex_unlock(&g.mu);
  if (g.key != (pthread_key_t)-1) pthread_setspecific(g.key, ts);
  tl_ts = ts;
  return ts;
}

/* The seqlock's ordering without standalone fences (which ThreadSanitizer
 * does not model): the writer's stores of the stack between seq_enter and
 * seq_leave are release stores, so the odd sequence number is visible
 * before any of them; the reader's loads of the stack are acquire loads,
 * so its second look at the sequence number cannot move before them. On
 * x86 both are plain moves. */
static inline void seq_enter(tstate *ts) { __atomic_store_n(&ts->seq, ts->seq + 1, __ATOMIC_RELAXED); }
static inline void seq_leave(tstate *ts) { __atomic_store_n(&ts->seq, ts->seq + 1, __ATOMIC_RELEASE); }

void kiln_prof_thread_set(const char *name, int lane) {
  tstate *ts = ts_get();
  if (!ts) return;
  pthread_mutex_lock(&g.mu);
  snprintf(ts->name, sizeof ts->name, "%s", name ? name : "");
  ts->lane = lane;
  pthread_mutex_unlock(&g.mu);
}

/* A new buffer for thread ts in the running session (g.mu held). */
static kiln_prof_thread_events *buf_new_locked(const tstate *ts) {
  if (g.n >= MAX_THREADS) return NULL;
  kiln_prof_thread_events *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->ev = malloc(sizeof *t->ev * g.cap);
  if (!t->ev) {
    free(t);
    return NULL;
  }
  t->tid = ts->tid;
  t->lane = ts->lane;
  if (ts->name[0]) {
    snprintf(t->name, sizeof t->name, "%s", ts->name);
  } else if (t->tid == (int64_t)getpid()) {
    snprintf(t->name, sizeof t->name, "main thread");
  } else {
    snprintf(t->name, sizeof t->name, "thread (%lld)", (long long)t->tid);
  }
  g.bufs[g.n++] = t;
  return t;
}

/* The calling thread's buffer for generation gen (runs inside the
 * inflight window, so the session cannot end under it). */
static kiln_prof_thread_events *attach(uint64_t gen) {
  kiln_prof_thread_events *t = NULL;
  tstate *ts = ts_get();
  if (!ts) return NULL;
  char pn[32] = "";
  if (!ts->name[0] && ts->tid != (int64_t)getpid()) pthread_getname_np(pthread_self(), pn, sizeof pn);
  pthread_mutex_lock(&g.mu);
  if (__atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_SEQ_CST) == gen) {
    t = buf_new_locked(ts);
    if (t && pn[0]) snprintf(t->name, sizeof t->name, "%s (%lld)", pn, (long long)t->tid);
    ts->buf = t;
    ts->buf_gen = gen;
  }
  pthread_mutex_unlock(&g.mu);
  return t;
}

/* Append event x (times, name, kind, arg, work, source, memory fields) to
 * the calling thread's buffer in the running capture, at nesting depth. */
static void record_ev(kiln_prof_event x, int depth) {
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
    /* Work that began before the capture (span helpers return
     * KILN_PROF_BEFORE_CAPTURE, regions opened earlier) is clipped to its
     * start: the viewers and the summary see the capture window only. */
    uint64_t start = __atomic_load_n(&g.start_ns, __ATOMIC_RELAXED), b = x.begin_ns, e = x.end_ns;
    /* Work that ended before the capture began, whose end was recorded
     * just after (the end time read, then the capture started, then the
     * generation checked): not in the window at all. Clipped, it showed as
     * a zero-length copy at the start beside the region open there (a
     * stepping thread had two steps at the start). */
    if (b < start && e < start) {
      __atomic_fetch_sub(&g.inflight, 1, __ATOMIC_RELEASE);
      return;
    }
    if (b < start) {
      /* the work done inside the window: its share of a known span, else
       * unknown (0) rather than all of it in a shorter time */
      double in = b > KILN_PROF_BEFORE_CAPTURE && e > b ? (double)(e > start ? e - start : 0) / (double)(e - b) : 0;
      x.flops *= in;
      x.bytes *= in;
      x.begin_ns = b = start;
    }
    if (!t) {
      __atomic_fetch_add(&g.dropped_threads, 1, __ATOMIC_RELAXED);
    } else if (t->n < g.cap) {
      x.end_ns = e < b ? b : e;
      if (!x.name) x.name = "(unnamed)";
      x.depth = (uint8_t)(depth > 255 ? 255 : depth);
      t->ev[t->n++] = x;
    } else {
      t->dropped++;
    }
  }
  __atomic_fetch_sub(&g.inflight, 1, __ATOMIC_RELEASE);
}

static void record_depth(kiln_prof_kind kind, const char *name, uint64_t b, uint64_t e, int64_t arg, double flops,
                         double bytes, int depth) {
  record_ev((kiln_prof_event){.begin_ns = b, .end_ns = e, .name = name, .kind = (uint8_t)kind, .arg = arg,
                              .flops = flops, .bytes = bytes},
            depth);
}

void kiln_prof_record(kiln_prof_kind kind, const char *name, uint64_t b, uint64_t e, int64_t arg, double flops,
                      double bytes) {
  tstate *ts = tl_ts;
  record_depth(kind, name, b, e, arg, flops, bytes, ts ? ts->depth : 0);
}

void kiln_prof_record_src(kiln_prof_kind kind, const char *name, const char *src, uint64_t b, uint64_t e,
                          int64_t arg, double flops, double bytes) {
  tstate *ts = tl_ts;
  record_ev((kiln_prof_event){.begin_ns = b, .end_ns = e, .name = name, .kind = (uint8_t)kind, .arg = arg,
                              .flops = flops, .bytes = bytes, .src = src},
            ts ? ts->depth : 0);
}

void kiln_prof_record_memory(const char *allocator, const char *what, int64_t bytes, int64_t in_use, const void *p) {
  uint64_t t = kiln_now_ns();
  tstate *ts = tl_ts;
  record_ev((kiln_prof_event){.begin_ns = t, .end_ns = t, .name = allocator, .kind = KILN_PROF_MEMORY,
                              .arg = bytes, .src = what, .in_use = in_use, .addr = (uint64_t)(uintptr_t)p},
            ts ? ts->depth : 0);
}

/* ───── annotations ───── */

static inline void push(const char *name, kiln_prof_kind kind, int64_t arg) {
  tstate *ts = ts_get();
  if (!ts) return;
  int d = ts->depth;
  seq_enter(ts);
  if (d < MAX_DEPTH) {
    ann *a = &ts->stack[d];
    uint64_t gen = __atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_RELAXED);
    __atomic_store_n(&a->name, name, __ATOMIC_RELEASE);
    __atomic_store_n(&a->kind, (uint8_t)kind, __ATOMIC_RELEASE);
    __atomic_store_n(&a->arg, arg, __ATOMIC_RELEASE);
    __atomic_store_n(&a->t0, gen ? kiln_now_ns() : 0, __ATOMIC_RELEASE);
    a->scope = UINT32_MAX;
    a->gen = gen;
  }
  __atomic_store_n(&ts->depth, d + 1, __ATOMIC_RELEASE);
  seq_leave(ts);
}

static inline void pop(void) {
  tstate *ts = tl_ts;
  if (!ts || ts->depth <= 0) return;
  int d = ts->depth - 1;
  seq_enter(ts);
  __atomic_store_n(&ts->depth, d, __ATOMIC_RELEASE);
  seq_leave(ts);
  if (d == tl_step) tl_step = -1;
  if (d >= MAX_DEPTH) return;
  const ann *a = &ts->stack[d];
  /* Recorded whenever a capture runs at the end: a region opened before it
   * (t0 0, or an older capture's time) is clipped to the capture start by
   * record_depth. One still open when a capture ends was recorded, clipped,
   * by the end itself (kiln_prof_session_end). */
  if (kiln_prof_on()) record_depth((kiln_prof_kind)a->kind, a->name, a->t0, kiln_now_ns(), a->arg, 0, 0, d);
}

void kiln_trace_begin(const char *name) { push(name ? name : "(null)", KILN_PROF_USER, -1); }

void kiln_trace_begin_copy(const char *name) {
  const char *s = kiln_prof_intern(name ? name : "(null)");
  push(s ? s : "(name table full)", KILN_PROF_USER, -1);
}

void kiln_trace_end(void) {
  tstate *ts = tl_ts;
  if (!ts) return;
  if (ts->depth > 0 && ts->depth - 1 == tl_step) return; /* a step region ends only at the next step */
  pop();
}

void kiln_trace_scope_end_(kiln_trace_scope_ *s) {
  if (!s->open) return;
  s->open = 0;
  kiln_trace_end();
}

void kiln_step_trace_end(void) {
  int s = tl_step;
  tstate *ts = tl_ts;
  if (s < 0 || !ts) return;
  while (ts->depth > s) pop(); /* regions left open inside the step close with it */
}

void kiln_step_trace(const char *name, int64_t step) {
  kiln_step_trace_end();
  tstate *ts = ts_get();
  if (!ts) return;
  tl_step = ts->depth < MAX_DEPTH ? ts->depth : -1;
  push(name ? name : "(null)", KILN_PROF_STEP, step);
}

/* ───── scopes ───── */

uint32_t kiln_prof_scope_intern_(uint32_t parent, const char *name); /* scope.c */

uint32_t kiln_prof_scope_current(void) {
  tstate *ts = tl_ts;
  if (!ts) return 0;
  ann *stack = ts->stack;
  int top = ts->depth < MAX_DEPTH ? ts->depth : MAX_DEPTH;
  int i = top - 1;
  while (i >= 0 && stack[i].kind != KILN_PROF_USER) i--;
  if (i < 0) return 0;
  if (stack[i].scope != UINT32_MAX) return stack[i].scope;
  /* intern the missing prefix from the outermost user region inwards */
  uint32_t parent = 0;
  for (int k = 0; k <= i; k++) {
    ann *a = &stack[k];
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
bool kiln_profiler_active(void) { return kiln_prof_on(); }

kiln_status kiln_prof_session_begin(uint32_t events_per_thread, uint64_t *start_ns) {
  pthread_mutex_lock(&g.mu);
  if (__atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_SEQ_CST) || g.ending) {
    pthread_mutex_unlock(&g.mu);
    return KILN_ERR_INVALID_ARGUMENT;
  }
  g.cap = events_per_thread ? events_per_thread : kiln_profiler_buffer_events();
  g.n = 0;
  __atomic_store_n(&g.dropped_threads, 0, __ATOMIC_RELAXED);
  *start_ns = kiln_now_ns();
  __atomic_store_n(&g.start_ns, *start_ns, __ATOMIC_RELAXED);
  __atomic_store_n(&kiln_prof_active_gen_, ++g.last_gen, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&g.mu);
  return KILN_OK;
}

/* A consistent copy of ts's open regions (g.mu held, so ts stays alive).
 * Returns how many were copied; 0 if the owner kept changing its stack. */
static int snapshot_locked(tstate *ts, ann *out) {
  for (int tries = 0; tries < 10000; tries++) {
    uint32_t s1 = __atomic_load_n(&ts->seq, __ATOMIC_ACQUIRE);
    if (s1 & 1) {
      sched_yield();
      continue;
    }
    int d = __atomic_load_n(&ts->depth, __ATOMIC_ACQUIRE);
    if (d > MAX_DEPTH) d = MAX_DEPTH;
    if (d < 0) d = 0;
    for (int i = 0; i < d; i++) {
      out[i].name = __atomic_load_n(&ts->stack[i].name, __ATOMIC_ACQUIRE);
      out[i].t0 = __atomic_load_n(&ts->stack[i].t0, __ATOMIC_ACQUIRE);
      out[i].arg = __atomic_load_n(&ts->stack[i].arg, __ATOMIC_ACQUIRE);
      out[i].kind = __atomic_load_n(&ts->stack[i].kind, __ATOMIC_ACQUIRE);
    }
    if (__atomic_load_n(&ts->seq, __ATOMIC_RELAXED) == s1) return d;
  }
  return 0;
}

/* Record, into each thread's buffer, the regions it still has open at the
 * end of the capture (gen), clipped to [start, end]: a thread blocked
 * through the whole capture (in a value read, say) still shows the step it
 * is in. Its later end records nothing, since the capture is over. */
static void record_open_regions_locked(uint64_t gen, uint64_t start, uint64_t end) {
  ann snap[MAX_DEPTH];
  for (tstate *ts = g.threads; ts; ts = ts->next) {
    int d = snapshot_locked(ts, snap);
    if (!d) continue;
    kiln_prof_thread_events *t = ts->buf_gen == gen ? ts->buf : NULL;
    if (!t) t = buf_new_locked(ts);
    if (!t) {
      __atomic_fetch_add(&g.dropped_threads, (uint64_t)d, __ATOMIC_RELAXED);
      continue;
    }
    for (int i = 0; i < d; i++) {
      if (t->n >= g.cap) {
        t->dropped++;
        continue;
      }
      kiln_prof_event *ev = &t->ev[t->n++];
      ev->begin_ns = snap[i].t0 > start ? snap[i].t0 : start;
      ev->end_ns = end > ev->begin_ns ? end : ev->begin_ns;
      ev->name = snap[i].name ? snap[i].name : "(unnamed)";
      ev->kind = snap[i].kind;
      ev->depth = (uint8_t)i;
      ev->arg = snap[i].arg;
      ev->flops = ev->bytes = 0;
      ev->src = NULL;
      ev->in_use = 0;
      ev->addr = 0;
    }
  }
}

kiln_status kiln_prof_session_end(kiln_prof_thread_events **out, int *n_out, uint64_t *dropped_threads,
                                  uint64_t *end_ns) {
  *out = NULL;
  *n_out = 0;
  *dropped_threads = 0;
  pthread_mutex_lock(&g.mu);
  uint64_t gen = __atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_SEQ_CST);
  if (!gen || g.ending) {
    pthread_mutex_unlock(&g.mu);
    return KILN_ERR_INVALID_ARGUMENT;
  }
  uint64_t start = __atomic_load_n(&g.start_ns, __ATOMIC_RELAXED);
  *end_ns = kiln_now_ns();
  g.ending = 1; /* no new session may reuse g.bufs until they are collected */
  __atomic_store_n(&kiln_prof_active_gen_, 0, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&g.mu);
  /* writers that passed their check finish their one event; attach() may
   * need the mutex, so it is not held while waiting */
  while (__atomic_load_n(&g.inflight, __ATOMIC_ACQUIRE) != 0) sched_yield();
  pthread_mutex_lock(&g.mu);
  record_open_regions_locked(gen, start, *end_ns);
  kiln_prof_thread_events *v = calloc((size_t)g.n + 1, sizeof *v);
  for (int i = 0; i < g.n; i++) {
    kiln_prof_thread_events *t = g.bufs[i];
    /* an event that ended between the end time and the generation store
     * is clipped to the window like the rest */
    for (uint32_t k = 0; k < t->n; k++) {
      kiln_prof_event *e = &t->ev[k];
      if (e->end_ns > *end_ns) e->end_ns = *end_ns;
      if (e->begin_ns > e->end_ns) e->begin_ns = e->end_ns;
    }
    if (v) v[i] = *t;
    else free(t->ev);
    free(t);
    g.bufs[i] = NULL;
  }
  for (tstate *ts = g.threads; ts; ts = ts->next) ts->buf = NULL, ts->buf_gen = 0;
  int n = v ? g.n : 0;
  g.n = 0;
  g.ending = 0;
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
