/* The kernel compiler driver: C source -> shared object -> dlopen, with the
 * persistent (disk) cache in front of it.
 *
 * Cache key = hash(kiln version, compiler path + version, flags, CPU
 * features, source text). A hit is verified by comparing the stored source
 * text with the requested one (a key collision never loads the wrong code)
 * and the object's checksum. Entries are written atomically (write, fsync,
 * rename). The cache directory must be owned by the user and not writable by
 * group/others, nor may the object file be: otherwise loading is refused
 * with KILN_ERR_UNSAFE naming the path.
 *
 * Thread-safety: all functions may be called from any thread; the
 * kiln_cc handle serializes its own state.
 */
#ifndef KILN_TOOLCHAIN_COMPILER_H
#define KILN_TOOLCHAIN_COMPILER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "kiln/doctor.h" /* kiln_cpu_features */

typedef struct kiln_cc kiln_cc;   /* compiler + cache configuration */
#include "toolchain/sharedobj.h" /* kiln_so: a loaded shared object */

typedef struct kiln_cc_config {
  const char *cc;        /* NULL: $KILN_CC or "cc" */
  const char *cflags;    /* NULL: $KILN_CFLAGS or the default ("-O2 -march=native ...") */
  const char *cache_dir; /* NULL/"": no disk cache (objects go to a private temp dir) */
} kiln_cc_config;

typedef struct kiln_cc_result {
  int from_disk_cache;       /* 1: hit */
  int disk_cache_corrupt;    /* 1: a corrupt entry was found and rebuilt */
  double cc_ns, load_ns;     /* time in the compiler / in dlopen + checks */
  int compiler_runs;         /* sources the compiler was run on (0: every one from the cache) */
} kiln_cc_result;

/* Create a compiler driver. Resolves the compiler (cfg->cc, else $KILN_CC,
 * else "cc", looked up in PATH), runs `<cc> --version`, picks the flags
 * (cfg->cflags, else $KILN_CFLAGS, else defaults for gcc/clang/other; see
 * docs/cache.md) and opens the cache directory (created 0700 if missing).
 * cfg may be NULL. *out is NULL on error. Errors: KILN_ERR_COMPILE (compiler
 * not found / not runnable, message names it), KILN_ERR_INVALID_ARGUMENT
 * (unbalanced quote in the flags), KILN_ERR_UNSAFE (cache directory is a
 * symlink, not ours, or writable by group/others: "refusing to use cache
 * directory <dir>: ..."), KILN_ERR_IO. */
kiln_status kiln_cc_create(const kiln_cc_config *cfg, kiln_cc **out, kiln_err *err);
/* Free the driver and remove its private work directory. Objects already
 * loaded stay valid until kiln_so_close. NULL is accepted. */
void kiln_cc_destroy(kiln_cc *cc);
/* Compile (or find in the disk cache) and load `source` (len bytes; one
 * call per graph: all its new kernels in one source, one compiler run).
 * *out receives the loaded object (caller closes it with kiln_so_close);
 * res (may be NULL) is filled in all cases. Bumps the counters
 * PersistentCacheHit / PersistentCacheMiss when a cache directory is set.
 * Errors: KILN_ERR_COMPILE (the compiler failed: message has the exit
 * status, the command and the first 20 lines of its output; or dlopen
 * failed), KILN_ERR_UNSAFE ("refusing to load <path>: ..."), KILN_ERR_IO,
 * KILN_ERR_OUT_OF_MEMORY. A corrupt cache entry is not an error: it is
 * reported on stderr, flagged in res->disk_cache_corrupt and rebuilt. */
kiln_status kiln_cc_build(kiln_cc *cc, const char *source, size_t len, kiln_so **out, kiln_cc_result *res,
                          kiln_err *err);
/* kiln_cc_build that also checks that the loaded object defines each of
 * symbols[0..n_symbols) before it is stored or returned. Every object, built
 * or from the cache, is checked (complete ELF, loads, symbols) before use; a
 * cache entry that fails is evicted and rebuilt; a cache directory that
 * cannot be written (full disk) moves compiling elsewhere for the rest of
 * the run (one warning) instead of failing. Extra errors: KILN_ERR_COMPILE
 * when the compiler's output is incomplete, lacks a symbol (both named) or
 * the compiler ran past KILN_CC_TIMEOUT seconds (default 300). */
kiln_status kiln_cc_build_checked(kiln_cc *cc, const char *source, size_t len, const char *const *symbols,
                                  int n_symbols, kiln_so **out, kiln_cc_result *res, kiln_err *err);
/* kiln_cc_build_checked of n sources at once (out[p]: source[p]'s object,
 * checked for symbols[p][0..n_symbols[p])): each is looked up in the disk
 * cache, and the compilers of those it lacks run at the same time, one
 * process each (a graph's kernels split into a part per core: the
 * compiler is single-threaded). A source whose compiler cannot write or
 * runs out of space is made again as kiln_cc_build_checked would. res sums
 * the loads and holds the wall time of the compilers; from_disk_cache when
 * every part came from the cache. On error no object is returned. */
kiln_status kiln_cc_build_parts(kiln_cc *cc, int n, const char *const *source, const size_t *len,
                                const char *const *const *symbols, const int *n_symbols, kiln_so **out,
                                kiln_cc_result *res, kiln_err *err);
/* kiln_so_symbol and kiln_so_close: runtime/sharedobj.h */
/* Descriptions for `kiln doctor` and the cache key. Owned by cc. */
const char *kiln_cc_command(const kiln_cc *cc);   /* "/usr/bin/cc -O2 -march=native ..." */
const char *kiln_cc_version(const kiln_cc *cc);   /* first line of `cc --version` */
const char *kiln_cc_cache_dir(const kiln_cc *cc); /* NULL when disabled */
/* kiln_cpu_features (public, kiln/doctor.h): the CPU feature string (e.g.
 * "x86 sse4.2 ... avx2 avx512f ..."; "generic" off x86), from cpuid and
 * XCR0, computed once. Static storage. */
/* 1: the CPU's vendor is AMD (cpuid), read with the features; not part of
 * the feature string, so not of the cache key. */
int kiln_cpu_is_amd(void);

/* Test hook: force every cache key to this value (0 = off) to provoke
 * collisions. */
void kiln_cc_test_force_key(kiln_cc *cc, uint64_t key);
/* Test hook: writes into the cache directory's work directory fail with
 * err_no (e.g. ENOSPC), as on a full disk (0 = off; no effect without a
 * cache directory). */
void kiln_cc_test_fail_cache_writes(kiln_cc *cc, int err_no);

#endif
