/* The span recorder: timed events (spans) that every layer records, the
 * user's annotation regions and scopes, and the per-thread bounded buffers
 * that hold them during a capture. It is a primitive like the clock and the
 * counters (base/counters.h): the thread pool records kernel spans on its
 * workers, the compiler driver its phases, the frontend reads the current
 * annotation scope for every traced node, so it lives below all of them.
 * The profiler (src/profiler/: captures, exporters, summary, server) starts
 * and ends sessions and reads what was recorded.
 *
 * Recording is one relaxed atomic load when no capture runs
 * (kiln_prof_on()). During a capture each thread appends complete events
 * (begin, end) to its own buffer, allocated on its first event; a full
 * buffer drops and counts. Stopping a capture waits for the writers still
 * inside a record call, so buffers are collected and freed safely.
 *
 * Every event lies inside the capture window: one that began before the
 * capture is clipped to its start when recorded, and the annotation
 * regions a thread still has open when the capture stops are recorded,
 * clipped to its end, by the stop itself.
 *
 * Thread-safety: every function may be called from any thread; the
 * session (kiln_prof_session_*) is a documented process-wide singleton.
 */
#ifndef KILN_BASE_SPANS_H
#define KILN_BASE_SPANS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* What an event is; the summary attributes idle gaps by these kinds. */
typedef enum kiln_prof_kind {
  KILN_PROF_USER = 0,    /* a user annotation */
  KILN_PROF_STEP,        /* a step region (kiln_step_trace); arg = step number */
  KILN_PROF_TRACING,     /* kiln building a step's graph: a cut, linearization */
  KILN_PROF_HASH,        /* graph hashing and cache lookup */
  KILN_PROF_COMPILE,     /* compile and its phases */
  KILN_PROF_TRANSFER,    /* host<->device copy; arg = bytes */
  KILN_PROF_WAIT_DEVICE, /* the host waiting for queued executions */
  KILN_PROF_WAIT_INPUT,  /* the host waiting for the data loader */
  KILN_PROF_EXECUTE,     /* an executable running (executor thread) */
  KILN_PROF_DISPATCH,    /* handing work to the pool / the executor queue */
  KILN_PROF_KERNEL,      /* one kernel's work on one lane (device plane) */
  KILN_PROF_COLLECTIVE,  /* one collective, from this rank's arrival to its completion; arg = bytes;
                          * name "all_reduce f32 [n] at file:line" (the same on every rank, and
                          * collectives run in the same order on every rank) */
  KILN_PROF_MEMORY,      /* an instant: a buffer allocated (arg = bytes > 0) or freed (arg = -bytes);
                          * name = the allocator ("kiln device buffers"), in_use = its bytes in use
                          * after the event, addr = the buffer (kiln_prof_memory) */
  KILN_PROF_KIND_COUNT
} kiln_prof_kind;

/* Short lower-case name of a kind ("compile", ...). Never NULL. */
const char *kiln_prof_kind_name(kiln_prof_kind k);

typedef struct kiln_prof_event {
  uint64_t begin_ns, end_ns; /* CLOCK_MONOTONIC (kiln_now_ns) */
  const char *name;          /* static, interned, or the user's literal */
  uint8_t kind;              /* kiln_prof_kind */
  uint8_t depth;             /* annotation nesting depth on its thread */
  int64_t arg;               /* step number, bytes, ... (-1: none) */
  double flops, bytes;       /* kernels: work done on this lane (0: unknown) */
  const char *src;           /* kernels: the user's "file.c:88" behind the kernel; memory: what the
                              * buffer is for ("scratch"); static or interned, NULL: unknown */
  int64_t in_use;            /* memory: the allocator's bytes in use after the event */
  uint64_t addr;             /* memory: the buffer's address */
} kiln_prof_event;

/* Nonzero while a capture runs: the generation of the running capture. */
extern uint64_t kiln_prof_active_gen_;
static inline int kiln_prof_on(void) { return __atomic_load_n(&kiln_prof_active_gen_, __ATOMIC_RELAXED) != 0; }

/* Record a complete event on the calling thread (no-op when no capture
 * runs). name must outlive the capture (static or kiln_prof_intern). A
 * begin before the capture start is clipped to it. */
void kiln_prof_record(kiln_prof_kind kind, const char *name, uint64_t begin_ns, uint64_t end_ns, int64_t arg,
                      double flops, double bytes);
/* kiln_prof_record with the user's source line of a kernel (src: static
 * or interned, NULL: unknown). */
void kiln_prof_record_src(kiln_prof_kind kind, const char *name, const char *src, uint64_t begin_ns,
                          uint64_t end_ns, int64_t arg, double flops, double bytes);
/* Record a memory event now (KILN_PROF_MEMORY): allocator (static: names the
 * allocator in the profile), what (static or NULL: the buffer's use),
 * bytes > 0 an allocation, < 0 a free, in_use the allocator's bytes in use
 * after it, p the buffer. Call it where the allocator updates its total, so
 * that the order of the events is the order of the totals. */
void kiln_prof_record_memory(const char *allocator, const char *what, int64_t bytes, int64_t in_use, const void *p);
static inline void kiln_prof_memory(const char *allocator, const char *what, int64_t bytes, int64_t in_use,
                                    const void *p) {
  if (kiln_prof_on()) kiln_prof_record_memory(allocator, what, bytes, in_use, p);
}
/* The clock events use. */
uint64_t kiln_prof_now(void);

/* Name the calling thread in traces ("kiln executor"); lane >= 0 makes its
 * kernel events appear on device lane `lane` (a worker thread), -1 for
 * host-only threads. The name is copied (63 bytes). */
void kiln_prof_thread_set(const char *name, int lane);

/* What kiln_prof_span_begin returns while no capture runs: a time before
 * any capture (never a real clock reading), so that work which began before
 * a capture and ends inside it is recorded, clipped to the capture start. */
#define KILN_PROF_BEFORE_CAPTURE ((uint64_t)1)

/* Host-work span helper: t = kiln_prof_span_begin(); ...;
 * kiln_prof_span_end(t, kind, name, arg). Costs one atomic load when off.
 * The begin is never 0, so callers may use 0 for "no span". */
static inline uint64_t kiln_prof_span_begin(void) { return kiln_prof_on() ? kiln_prof_now() : KILN_PROF_BEFORE_CAPTURE; }
static inline void kiln_prof_span_end(uint64_t t0, kiln_prof_kind kind, const char *name, int64_t arg) {
  if (t0 && kiln_prof_on()) kiln_prof_record(kind, name, t0, kiln_prof_now(), arg, 0, 0);
}

/* ───── session (used by capture.c) ───── */

typedef struct kiln_prof_thread_events {
  char name[64];
  int64_t tid;    /* OS thread id */
  int lane;       /* device lane or -1 */
  uint32_t n;     /* events kept */
  uint64_t dropped;
  kiln_prof_event *ev; /* owned */
} kiln_prof_thread_events;

/* Begin a session: fails (returns KILN_ERR_INVALID_ARGUMENT) if one runs. */
kiln_status kiln_prof_session_begin(uint32_t events_per_thread, uint64_t *start_ns);
/* End the running session: waits for in-flight writers and hands over the
 * threads' buffers (*out, *n_out owned by the caller: free with
 * kiln_prof_threads_free). *dropped_threads counts events lost because the
 * thread table was full. Returns KILN_ERR_INVALID_ARGUMENT if none runs. */
kiln_status kiln_prof_session_end(kiln_prof_thread_events **out, int *n_out, uint64_t *dropped_threads,
                                  uint64_t *end_ns);
void kiln_prof_threads_free(kiln_prof_thread_events *t, int n);

/* ───── interned strings and annotation scopes ───── */

/* A stable copy of s (at most 255 bytes kept) in the process-wide intern
 * table; the same string gives the same pointer. NULL when the table is
 * full (64K strings) or out of memory. */
const char *kiln_prof_intern(const char *s);
/* The id of the innermost annotation scope open on the calling thread
 * (0: none). Ids name scope paths ("Forward/attention") and are stable for
 * the process. */
uint32_t kiln_prof_scope_current(void);
/* The path of a scope id ("" for 0 or unknown). Never NULL; stable. */
const char *kiln_prof_scope_path(uint32_t id);

#endif
