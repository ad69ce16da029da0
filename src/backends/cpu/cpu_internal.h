/* Internal to the cpu backend: its state and the executable's plan (the
 * steps execute interprets), shared by compile (cpu.c) and execution
 * (cpu_execute.c). */
#ifndef KILN_BACKENDS_CPU_CPU_INTERNAL_H
#define KILN_BACKENDS_CPU_CPU_INTERNAL_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/collective.h"
#include "backends/cpu/gemm.h"
#include "codegen/codegen.h"
#include "base/counters.h"
#include "base/spans.h"
#include "base/text.h"
#include "toolchain/compiler.h"
#include "base/pool.h"
#include "schedule/schedule.h"

typedef void (*kernel_fn)(void *const *args, int64_t begin, int64_t end);

/* A loaded shared object and the executables whose steps call into it:
 * closed (and its kernels dropped from the table) when the last of them is
 * freed, so a runtime that evicts executables (KILN_GRAPH_CACHE_SIZE) does
 * not keep every object it ever loaded mapped. */
typedef struct so_ref {
  kiln_so *so;
  int refs;
} so_ref;

typedef struct kent {
  uint64_t hash;
  char *src; /* verifies a hash hit: a collision never runs the wrong code */
  const char *family_src; /* the dynamic family's text it was made from (lives as long as the backend), or
                           * NULL: a lookup with that very text needs no comparison */
  kernel_fn fn;
  so_ref *owner;
} kent;

/* The families of graphs compiled once for every size (cpu_family.c). */
typedef struct kiln_cpu_families kiln_cpu_families;

/* Intermediate buffers shared by the executables of one family, which run
 * one at a time in them (mu held through an execute); grown to the largest
 * scratch size asked. */
typedef struct kiln_cpu_arena {
  pthread_mutex_t mu;
  void *p;
  size_t cap;
} kiln_cpu_arena;
/* Grow a's mapping to cap bytes (the first call maps it); the new address,
 * or NULL (a unchanged). kiln_cpu_arena_release unmaps it. */
void *kiln_cpu_arena_grow(kiln_cpu_arena *a, size_t cap);
void kiln_cpu_arena_release(kiln_cpu_arena *a);

typedef struct cpu_backend {
  kiln_backend base;
  kiln_pool *pool;
  kiln_cc *cc;
  int num_threads;
  pthread_mutex_t mu; /* kernel table, shared objects, the compiler */
  kent *tab;
  size_t tab_cap, tab_n;
  so_ref **sos;
  size_t n_sos, cap_sos;
  int dump_code; /* KILN_DUMP_CODE=1 when the backend was created */
  kiln_cpu_families *fams; /* under mu */
  char desc[1024];
  int64_t scratch_in_use; /* atomic: bytes of the executables' scratch arenas (memory profile) */
} cpu_backend;

/* The allocator name of the scratch arenas in memory profiles. */
#define KILN_CPU_SCRATCH_ALLOCATOR "kiln cpu scratch arenas"
/* A scratch arena allocated (bytes > 0) or freed (bytes < 0): the backend's
 * total and a memory event while a capture runs. */
void kiln_cpu_scratch_event(kiln_backend *kb, const void *p, int64_t bytes);

enum { ST_LOOP, ST_GEMM, ST_COPY, ST_COLL };

/* An index check of a kernel, for the error message: the op, the checked
 * axis, its size and the user's line that traced the node. */
typedef struct isite {
  const char *op;
  int axis;
  int64_t dim;
  kiln_loc loc;
} isite;

/* One step of an executable; the fields of its kind only (a planned size
 * of a dynamic family keeps one per kernel: kept small). */
typedef struct step {
  int kind;
  int32_t kpos; /* the schedule's kernel position of this step */
  const char *name;
  union {
    struct { /* LOOP */
      kernel_fn fn;
      int64_t items, grain, span; /* span: kiln_kernel_src's */
      const int32_t *args; /* buffer ids (KILN_CG_ERR_ARG: the error word, KILN_CG_SYM_ARG: exe->symvals): in
                            * exe->arg_bufs, or a dynamic family's kernel's own (they live as long as the backend) */
      int32_t n_args;
      int32_t n_sites, site_off; /* index checks: exe->sites[site_off ..] */
    };
    struct { /* GEMM */
      int f64, ta, tb;
      int dt;  /* the operands' and result's dtype: f32 and f64 go to the library, others to kiln_gemm_other */
      int cdt; /* C's dtype: dt, or f32 for an f32 update from a bf16 product (schedule_fuse.c) */
      int64_t m, n, k, lda, ldb;
      const int64_t *bshape, *sa, *sb; /* brank each, in exe->gdims */
      int brank;
      int32_t abuf, bbuf, cbuf;
      int32_t c0buf, alphabuf; /* a fused update: C's initial value (times beta) and alpha's SCALAR, or -1 */
      double alpha, beta;
      int tile; /* this GEMM, the loop step after it and the GEMM after that run one batch entry at a
                 * time (kiln_skernel.tile; cpu_execute.c, run_tile) */
    };
    struct { /* COPY (and COLL: src the input's buffer, dst the output's) */
      int32_t src, dst;
      size_t bytes;
      kiln_backend_coll *coll; /* COLL: owned by the step */
      int32_t wait_at; /* COLL: in flight until the step with kpos >= wait_at (the schedule's KILN_SK_COLL) */
    };
  };
  double flops, mem_bytes;
  kiln_pool_tag tag; /* profiler name: "<scope>/fusion.3 (mul,add,relu)" (kiln_cpu_name_steps; until
                     * then the step's own name) and the user's line */
  /* what names it, kept until named: the root node's annotation scope, the
   * user's line, a loop kernel's op list */
  uint32_t scope;
  int has_scope;
  kiln_loc src_loc;
  const char *label;
  int named; /* tag holds its name (atomic: kiln_cpu_step_resolve) */
} step;

/* A buffer of the plan as execution reads it: a graph input or output
 * (index) or scratch at offset in the arena (kiln_sbuf's kind). */
typedef struct xbuf {
  int32_t kind;
  int32_t index;
  size_t offset;
} xbuf;

struct kiln_executable {
  int32_t n_steps;
  step *steps;
  int32_t *arg_bufs;
  int64_t *gdims; /* the GEMM steps' batch shapes and strides */
  char *names; /* kernel names, "k_<hash>\0" each */
  int32_t n_bufs;
  xbuf *bufs;
  size_t scratch_bytes;
  pthread_mutex_t mu;
  void *arena;
  int arena_adopted; /* arena is the caller's (arena_adopt): not freed here */
  kiln_kernel_timing *timings; /* per step, of the last run; made by the first run */
  int32_t max_args;
  isite *sites;
  so_ref **uses; /* the objects its steps call into, one reference each */
  int32_t n_uses;
  kiln_loc fault_loc; /* of the last execute's failure (last_error_loc) */
  int has_fault;
  kiln_exec_info info;
  int64_t symvals[KILN_SYM_MAX]; /* a family's graph: its symbol values (its kernels' argument 0) */
  kiln_cpu_arena *shared;        /* a family's graph: the family's arena (borrowed), instead of arena */
  int named; /* the steps' profile names are made (kiln_cpu_name_steps) */
  void *tile_buf; /* the attention tiles' per-thread scratch (run_tile), grown as needed; under mu */
  size_t tile_cap;
};

/* Give every step of e its profile name and source line (interned), once:
 * when a profile records e's kernels or their timings are read, not at
 * every compile (a new size of a dynamic family would pay it). Under e->mu. */
void kiln_cpu_name_steps(kiln_executable *e);
/* The same for the one step whose tag this is (the tag's resolve: a kernel
 * recorded by a capture that started while its executable ran). Any
 * thread, any number at once. */
void kiln_cpu_step_resolve(const kiln_pool_tag *tag);

/* Profile names of steps (cpu_names.c): the op list of loop kernel ki
 * ("fusion.3 (mul,add,relu)", interned; NULL when out of memory), and what
 * names step sp of kernel ki (its root's scope, the user's line, label). */
const char *kiln_cpu_loop_label(const kiln_sched *s, int32_t ki);
void kiln_cpu_name_parts(const kiln_sched *s, int32_t ki, step *sp, const char *label);

/* Execution (cpu_execute.c): buffers, the backend's execute and its queries. */
void kiln_cpu_first_run(kiln_backend *kb, kiln_executable *e); /* backend.h, first_run */
void *kiln_cpu_buffer_alloc(kiln_backend *kb, size_t bytes);
void kiln_cpu_buffer_free(kiln_backend *kb, void *p);
void kiln_cpu_copy(kiln_backend *kb, void *dst, const void *src, size_t bytes);
kiln_status kiln_cpu_execute(kiln_backend *kb, kiln_executable *e, void *const *inputs, void *const *outputs,
                             kiln_err *err);
int kiln_cpu_last_error_loc(kiln_backend *kb, const kiln_executable *e, kiln_loc *out);
void kiln_cpu_executable_info(kiln_backend *kb, const kiln_executable *e, kiln_exec_info *out);
int kiln_cpu_last_kernel_timings(kiln_backend *kb, const kiln_executable *e, const kiln_kernel_timing **out);

#endif
