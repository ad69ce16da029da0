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

#define KILN_BACKEND_API_VERSION 1

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
} kiln_exec_info;

/* Per-kernel timing record for the profiler (optional). */
typedef struct kiln_kernel_timing {
  const char *name; /* owned by the executable */
  uint64_t begin_ns, end_ns;
  int thread;       /* worker lane */
  double flops, bytes;
} kiln_kernel_timing;

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
   * caller (free with executable_free). */
  kiln_status (*compile)(kiln_backend *b, const kiln_graph *g, kiln_executable **out, kiln_err *err);
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

#endif
