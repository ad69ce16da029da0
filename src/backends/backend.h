/* The backend interface: a vtable (destroy first, an API version, optional
 * slots NULL-checked by the runtime).
 *
 * Memory: device memory is addressed by opaque pointers returned by
 * buffer_alloc; on the cpu and ref backends they are host-addressable, but
 * the runtime never touches them except through copy_to_host/copy_to_device.
 *
 * Threads: compile may run on the tracing thread; execute runs on the
 * runtime's worker thread. A backend must allow compile and execute (of
 * different executables) to run concurrently.
 */
#ifndef KILN_BACKENDS_BACKEND_H
#define KILN_BACKENDS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/graph.h"
#include "ir/symshape.h"

#define KILN_BACKEND_API_VERSION 2

typedef struct kiln_backend kiln_backend;
typedef struct kiln_executable kiln_executable; /* backend-defined */

/* What the debug analysis reports about a compiled graph. */
typedef struct kiln_exec_info {
  int n_kernels;          /* fused loop kernels */
  int n_gemm_calls;       /* library GEMM calls */
  size_t input_bytes;
  size_t output_bytes;
  size_t aliased_bytes;   /* outputs written into donated inputs */
  size_t scratch_bytes;   /* peak intermediate bytes from the memory plan */
  size_t code_bytes;      /* generated code (source) size */
  int from_disk_cache;    /* 1: loaded from the persistent cache */
  double compile_ns;      /* total compile time */
  double codegen_ns, cc_ns, load_ns; /* phases (0 where not applicable) */
  /* compile_dynamic: 0 compiled as the graph is, 1 a family made (its
   * kernels compiled once for every size), 2 planned from a known family
   * (no code generated) */
  int family;
  char family_why[400]; /* compile_dynamic with family 0: why not */
  const void *family_id; /* family 1 or 2: the backend's family (opaque), for kiln_family_hint */
} kiln_exec_info;

/* What the caller of compile_dynamic knows of g: it is, by construction,
 * the graph that made family `family` (a compile whose info said family 1
 * and family_id) with its symbolic sizes taken at `values` (the family's
 * symbols, in its order). The backend may then take that family without
 * binding g to it, after checking the values against g's inputs. */
typedef struct kiln_family_hint {
  const void *family;
  int64_t values[KILN_SYM_MAX];
} kiln_family_hint;

/* Per-kernel timing record for the profiler (optional). */
typedef struct kiln_kernel_timing {
  const char *name; /* owned by the executable */
  uint64_t begin_ns, end_ns;
  int thread;       /* worker lane */
  double flops, bytes;
} kiln_kernel_timing;

/* What a compile produced, for graph dumps (docs/graphs.md): the graph the
 * backend compiled, its kernels and their generated C. Plain data: a reader
 * needs neither the scheduler nor codegen. */
typedef enum kiln_plan_kind {
  KILN_PLAN_LOOP = 0,    /* a fused elementwise loop */
  KILN_PLAN_ROW_LOOP,    /* a fused loop seeded by a reduction */
  KILN_PLAN_GEMM,        /* a GEMM library call */
  KILN_PLAN_GEMM_UPDATE, /* a GEMM call with an update fused in (alpha A B + beta C) */
  KILN_PLAN_COPY,        /* a buffer copy */
  KILN_PLAN_COLLECTIVE   /* a collective across processes (node: the collective), through src/dist */
} kiln_plan_kind;

typedef struct kiln_plan_kernel {
  kiln_plan_kind kind;
  int32_t node;           /* the node it is named after: a GEMM's value, a loop's seed (-1: COPY) */
  int32_t n_members;      /* loops: the nodes computed here, increasing */
  const int32_t *members;
  const char *src;        /* the generated C of a loop that stores something, else NULL */
  int64_t items;          /* src: the loop's size */
  size_t bytes;           /* COPY: bytes from buffer src_buf to dst_buf */
  int32_t src_buf, dst_buf;
} kiln_plan_kernel;

typedef struct kiln_compile_plan {
  const kiln_graph *graph;  /* the graph compiled (after the passes) */
  const char *none;         /* NULL, or why there are no kernels (the fields below are then 0/NULL) */
  int32_t n_kernels;
  const kiln_plan_kernel *kernels;
  const int32_t *owner;     /* per node of graph: the kernel computing it, -1 for inputs and inlined nodes */
  int n_loop_kernels, n_gemm_calls;
  const char *prelude;      /* the C the kernels' sources need before them */
} kiln_compile_plan;

/* Asked of a compile by passing it (NULL: nobody asks, and the compile does
 * no extra work). The backend calls plan once, on the thread that called
 * compile and before compile returns, after the compile succeeded; the plan
 * and everything it points to is valid during the call only. */
typedef struct kiln_compile_observer {
  void (*plan)(void *ctx, const kiln_compile_plan *p);
  void *ctx;
} kiln_compile_observer;

typedef struct kiln_backend_vtable {
  void (*destroy)(kiln_backend *b);
  int api_version; /* KILN_BACKEND_API_VERSION */
  const char *name;
  /* Device memory, 64-byte aligned. bytes may be 0 (returns a valid,
   * unique pointer). NULL on out-of-memory. */
  void *(*buffer_alloc)(kiln_backend *b, size_t bytes);
  void (*buffer_free)(kiln_backend *b, void *p);
  void (*copy_to_device)(kiln_backend *b, void *dst, const void *host_src, size_t bytes);
  void (*copy_to_host)(kiln_backend *b, void *host_dst, const void *src, size_t bytes);
  /* Compile g (already through the passes). On success *out is owned by the
   * caller (free with executable_free). obs: NULL, or who wants the plan
   * (kiln_compile_observer). */
  kiln_status (*compile)(kiln_backend *b, const kiln_graph *g, const kiln_compile_observer *obs,
                         kiln_executable **out, kiln_err *err);
  /* optional: compile g whose graph input dimensions dyn[0..n_dyn) vary
   * (docs/dynamic-shapes.md): the backend may make one compile serve every
   * size of g's family, so that a later graph of the family costs only its
   * plan. The executable is g's, exactly as compile's; executable_info says
   * what happened (family, family_why). */
  kiln_status (*compile_dynamic)(kiln_backend *b, const kiln_graph *g, const kiln_compile_observer *obs, int n_dyn,
                                 const kiln_sym_origin *dyn, const kiln_family_hint *hint, kiln_executable **out,
                                 kiln_err *err);
  /* Run: inputs[i] for graph input i (SCALAR inputs: an 8-byte buffer
   * holding a double for float dtypes, an int64 otherwise), outputs[o] for
   * output o, already allocated with the output's size. An aliased output
   * is passed the same pointer as its input. */
  kiln_status (*execute)(kiln_backend *b, kiln_executable *e, void *const *inputs, void *const *outputs,
                         kiln_err *err);
  void (*executable_free)(kiln_backend *b, kiln_executable *e);
  /* optional */
  void (*executable_info)(kiln_backend *b, const kiln_executable *e, kiln_exec_info *out);
  /* optional: timings of the last execute of e (valid until the next). */
  int (*last_kernel_timings)(kiln_backend *b, const kiln_executable *e, const kiln_kernel_timing **out);
  /* optional: free-form description for `kiln doctor` (owned by backend). */
  const char *(*describe)(kiln_backend *b);
  /* optional: after an execute of e failed because of the program's data
   * (an out-of-range index), the source line of the node at fault; returns
   * 1 and sets *out, or 0 if the failure has none. Valid until the next
   * execute of e; call it on the thread that ran the execute. */
  int (*last_error_loc)(kiln_backend *b, const kiln_executable *e, kiln_loc *out);
  /* optional: before the first run of e, whose graph has collectives, at a
   * point that every rank of a distributed job reaches for the same graph
   * with no collective in flight (the runtime, once the ranks agreed on
   * the graph). A collective call of the dist service may be made here:
   * the cpu backend puts e's buffers in memory the ranks of the node share
   * (kiln_dist_shared_alloc), so that e's all-reduces add in place
   * (docs/distributed.md, "The all-reduce in shared memory"). */
  void (*first_run)(kiln_backend *b, kiln_executable *e);
} kiln_backend_vtable;

/* The message of an out-of-range index found at run time (both backends
 * say the same): op, index, axis, axis size. Status KILN_ERR_INVALID_ARGUMENT. */
#define KILN_INDEX_ERR_FMT "%s: index %lld is out of range for axis %d of size %lld (indices must be in [0, size))"

struct kiln_backend {
  const kiln_backend_vtable *vt;
};

/* Construction parameters shared by the backends. */
typedef struct kiln_backend_config {
  int num_threads;
  const char *cache_dir; /* NULL or "" disables the disk cache */
} kiln_backend_config;

kiln_status kiln_backend_ref_create(const kiln_backend_config *cfg, kiln_backend **out, kiln_err *err);
kiln_status kiln_backend_cpu_create(const kiln_backend_config *cfg, kiln_backend **out, kiln_err *err);

/* The backend registry (backends/registry.c): every backend kiln has, by
 * name. A new backend is one line there. */
typedef kiln_status (*kiln_backend_create_fn)(const kiln_backend_config *cfg, kiln_backend **out, kiln_err *err);
typedef struct kiln_backend_entry {
  const char *name;
  kiln_backend_create_fn create;
} kiln_backend_entry;
/* The registered backends, in order; *n their count. */
const kiln_backend_entry *kiln_backends(int *n);
/* Create the backend called name, checking that it implements this
 * interface version; an unknown name is KILN_ERR_INVALID_ARGUMENT naming
 * the registered ones. */
kiln_status kiln_backend_create(const char *name, const kiln_backend_config *cfg, kiln_backend **out, kiln_err *err);

#endif
