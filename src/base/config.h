/* kiln's configuration: every environment variable the library reads, read
 * into one struct (docs/environment.md says what each one means).
 *
 * kiln_init loads it from the environment (kiln_config_load) when the
 * runtime starts; code that runs without a runtime (the thread pool, the
 * compiler driver, the GEMM selection, tools and tests calling them
 * directly) loads it on first use. Components read a field where they used
 * to call getenv: nothing in src/ calls getenv.
 *
 * Fields keep the variable's raw text (NULL when unset, "" when set empty),
 * so each component parses it exactly as before and a malformed value still
 * means its default (never an error).
 *
 * Thread-safety: a snapshot is immutable once published. kiln_config_load
 * and kiln_config_set publish a new one, or the earlier one with the same
 * contents (so that kiln_init / kiln_shutdown in a loop keeps one snapshot,
 * not one per cycle); readers holding the previous snapshot keep a valid one
 * (snapshots are never freed). */
#ifndef KILN_BASE_CONFIG_H
#define KILN_BASE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

/* X(field, "VARIABLE"): one line per variable, in docs/environment.md order. */
#define KILN_CONFIG_VARS(X)                         \
  /* runtime */                                     \
  X(backend, "KILN_BACKEND")                        \
  X(num_threads, "KILN_NUM_THREADS")                \
  X(pool_spin_us, "KILN_POOL_SPIN_US")              \
  X(sync, "KILN_SYNC")                              \
  X(buffer_cache_mb, "KILN_BUFFER_CACHE_MB")        \
  X(graph_cache_size, "KILN_GRAPH_CACHE_SIZE")      \
  /* compile cache */                               \
  X(cache_dir, "KILN_CACHE_DIR")                    \
  X(disk_cache, "KILN_DISK_CACHE")                  \
  X(cache_max_size, "KILN_CACHE_MAX_SIZE")          \
  X(xdg_cache_home, "XDG_CACHE_HOME")               \
  X(home, "HOME")                                   \
  /* kernel compiler */                             \
  X(cc, "KILN_CC")                                  \
  X(cc_timeout, "KILN_CC_TIMEOUT")                  \
  X(cflags, "KILN_CFLAGS")                          \
  X(path, "PATH")                                   \
  X(tmpdir, "TMPDIR")                               \
  /* GEMM */                                        \
  X(gemm, "KILN_GEMM")                              \
  X(gemm_bf16, "KILN_GEMM_BF16")                    \
  X(tile_attention, "KILN_TILE_ATTENTION")          \
  X(openblas_coretype, "OPENBLAS_CORETYPE")         \
  /* metrics and debugging */                       \
  X(metrics, "KILN_METRICS")                        \
  X(metrics_file, "KILN_METRICS_FILE")              \
  X(debug, "KILN_DEBUG")                            \
  X(debug_file, "KILN_DEBUG_FILE")                  \
  X(debug_warmup, "KILN_DEBUG_WARMUP")              \
  X(save_graphs, "KILN_SAVE_GRAPHS")                \
  X(save_graphs_fmt, "KILN_SAVE_GRAPHS_FMT")        \
  X(save_graphs_max_size, "KILN_SAVE_GRAPHS_MAX_SIZE") \
  X(passes, "KILN_PASSES")                          \
  X(dynamic, "KILN_DYNAMIC")                        \
  X(dump_code, "KILN_DUMP_CODE")                    \
  X(verify, "KILN_VERIFY")                          \
  X(log_errors, "KILN_LOG_ERRORS")                  \
  /* profiler */                                    \
  X(profiler_bind, "KILN_PROFILER_BIND")            \
  X(profiler_server_lib, "KILN_PROFILER_SERVER_LIB") \
  X(peak_gflops, "KILN_PEAK_GFLOPS")                \
  X(peak_gbps, "KILN_PEAK_GBPS")                    \
  /* dist: the MPI module, and the launcher's variables (read before MPI is \
   * loaded, to know whether the program runs alone) */ \
  X(mpi_lib, "KILN_MPI_LIB")                         \
  X(dist_timeout, "KILN_DIST_TIMEOUT")              \
  X(dist_shm, "KILN_DIST_SHM")                      \
  X(ompi_world_size, "OMPI_COMM_WORLD_SIZE")        \
  X(ompi_world_rank, "OMPI_COMM_WORLD_RANK")        \
  X(pmi_size, "PMI_SIZE")                           \
  X(pmi_rank, "PMI_RANK")                           \
  X(pmix_rank, "PMIX_RANK")                         \
  /* data */                                        \
  X(fashion_mnist_dir, "KILN_FASHION_MNIST_DIR")

typedef struct kiln_config {
#define KILN_CONFIG_FIELD(field, name) const char *field;
  KILN_CONFIG_VARS(KILN_CONFIG_FIELD)
#undef KILN_CONFIG_FIELD
} kiln_config;

/* The current configuration, loaded from the environment on first use.
 * Never NULL (out of memory on the first load: every variable unset). */
const kiln_config *kiln_cfg(void);

/* The numeric variables' parsers (docs/environment.md: a malformed value is
 * ignored and the default applies). True when v is, as a whole, a decimal
 * integer that fits a long (kiln_cfg_long) or a finite decimal number
 * (kiln_cfg_double), with optional blanks around it; *out is set only then.
 * NULL or empty: false. "2G" or "5m" is not a number (atol read 2 and 5). */
bool kiln_cfg_long(const char *v, long *out);
bool kiln_cfg_double(const char *v, double *out);
/* A size in bytes (KILN_CACHE_MAX_SIZE, KILN_SAVE_GRAPHS_MAX_SIZE): a
 * non-negative number, optionally followed by K, M or G (powers of 1024)
 * and B; def when v is NULL, empty or malformed. */
int64_t kiln_cfg_size(const char *v, int64_t def);

/* Threads of kiln's pool (both the runtime and a pool made alone take at
 * most this many). */
#define KILN_MAX_THREADS 256

/* KILN_NUM_THREADS as a thread count: a positive decimal integer (the whole
 * value), clamped to KILN_MAX_THREADS; 0 when it is unset, empty, not a
 * number, zero or negative (the caller then uses every online core). */
int kiln_cfg_num_threads(void);

/* Read the environment into a new snapshot and publish it (kiln_init does,
 * so a variable set before a runtime starts is seen by it). Out of memory:
 * the current snapshot stays. */
void kiln_config_load(void);

/* Publish a copy of *c (strings are copied): for tests, which change one
 * field of a copy of kiln_cfg() instead of the environment mid-run. */
void kiln_config_set(const kiln_config *c);

#endif
