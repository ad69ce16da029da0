/* What kiln finds on this machine: the queries behind `kiln doctor`.
 *
 *   kiln_compiler_info cc;
 *   if (kiln_compiler_probe(&cc) != KILN_OK) fprintf(stderr, "%s\n", kiln_last_error());
 *   kiln_gemm_info g;
 *   double gflops;
 *   if (kiln_gemm_probe(4, &g) == KILN_OK && kiln_gemm_benchmark(4, 1024, 0.5, &gflops) == KILN_OK)
 *     printf("%s: %.0f GFLOP/s\n", g.library, gflops);
 *
 * Errors go to the one channel (kiln.h): a status return, recorded in the
 * sticky status with the caller's file:line. None of these functions
 * starts the runtime.
 *
 * Thread-safety: every function here may be called from any thread.
 */
#ifndef KILN_DOCTOR_H
#define KILN_DOCTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CPU features kiln's generated kernels are compiled for and keyed on
 * ("x86 sse4.2 avx avx2 fma ..."; "generic" where they cannot be read).
 * Owned by kiln, valid for the life of the process. Never NULL. */
const char *kiln_cpu_features(void);

/* The kernel compiler, as the cpu backend would run it. */
typedef struct kiln_compiler_info {
  bool found;          /* a compiler was found: command and version are set */
  char command[4096];  /* "/usr/bin/cc -O2 -march=native ..." (truncated to fit) */
  char version[512];   /* the first line of its --version */
  bool compiled;       /* the test kernel compiled and loaded */
  bool ran;            /* ... and returned the right value */
  double compile_ms;   /* compiling and loading the test kernel, in milliseconds */
} kiln_compiler_info;

/* Find the kernel compiler ($KILN_CC, $KILN_CFLAGS, else cc and the default
 * flags; docs/environment.md) and test it end to end: compile a one-line
 * kernel (without the disk cache), load it and call it. *out is filled as
 * far as the test got. Errors (sticky status): INVALID_ARGUMENT (out is
 * NULL); the compiler driver's error when no usable compiler is found
 * (found false) or the test kernel does not compile or load (compiled
 * false), with the compiler's message; COMPILE when the kernel loaded but
 * returned a wrong value (ran false). */
#define kiln_compiler_probe(out) kiln_compiler_probe_at((out), KILN_HERE)
kiln_status kiln_compiler_probe_at(kiln_compiler_info *out, kiln_loc loc);

/* The GEMM library the cpu backend runs matrix products with. */
typedef struct kiln_gemm_info {
  const char *library; /* "onednn 2.6.3 (...)", "openblas 0.3.21 (...)", "naive" (owned by kiln) */
} kiln_gemm_info;

/* Load the GEMM library ($KILN_GEMM, else the preferred one found;
 * docs/gemm.md) as the cpu backend does, set it to `threads` threads, and
 * describe it. The library is chosen once per process: a later call (or
 * the cpu backend's start) finds the same one. Errors (sticky status): INVALID_ARGUMENT (out NULL, threads < 1),
 * UNSUPPORTED when no library could be loaded. */
#define kiln_gemm_probe(threads, out) kiln_gemm_probe_at((threads), (out), KILN_HERE)
kiln_status kiln_gemm_probe_at(int threads, kiln_gemm_info *out, kiln_loc loc);

/* Measure the GEMM library: an f32 n x n x n product (loading the library
 * for `threads` threads first, as kiln_gemm_probe), once to warm up, then
 * repeated for about `seconds` (at most 1000 times); *gflops is the rate
 * achieved (0 on error). The result is spot-checked. Errors (sticky
 * status): INVALID_ARGUMENT (gflops NULL, threads < 1, n outside
 * 1..8192, seconds outside [0, 60]), UNSUPPORTED (no library),
 * OUT_OF_MEMORY, INTERNAL when the library returned a wrong result. */
#define kiln_gemm_benchmark(threads, n, seconds, gflops) \
  kiln_gemm_benchmark_at((threads), (n), (seconds), (gflops), KILN_HERE)
kiln_status kiln_gemm_benchmark_at(int threads, int64_t n, double seconds, double *gflops, kiln_loc loc);

#ifdef __cplusplus
}
#endif

#endif
