/* The compiler driver's internals shared by its files (compiler.c: one
 * source; compiler_parts.c: several at once). Not an API: the driver's
 * state and the steps of a build, each documented where it is defined. */
#ifndef KILN_TOOLCHAIN_COMPILER_INTERNAL_H
#define KILN_TOOLCHAIN_COMPILER_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "base/status.h"
#include "toolchain/compiler.h"
#include "toolchain/diskcache.h"
#include "toolchain/sharedobj.h"

#define KILN_CC_MAX_FLAGS 64
#define KILN_CC_OUTPUT_CAP 16384 /* bytes of compiler output kept for errors */
#define KILN_CC_ERROR_LINES 20

struct kiln_cc {
  pthread_mutex_t mu; /* serializes builds (the work dir, seq, the cache) */
  char *cc_path;      /* resolved executable */
  char *flags;
  char *argv_store;   /* the flags split in place */
  char *flag_argv[KILN_CC_MAX_FLAGS];
  int nflags;
  char *command;
  char *version;
  char *meta; /* description stored in cache entries */
  kiln_diskcache *dc;
  char work[PATH_MAX - 128]; /* room for "/<file name>" in PATH_MAX */
  int work_fd; /* held open and flock'ed so stale-dir sweeping leaves it alone */
  uint64_t base_key, force_key, seq;
  int timeout_s;      /* KILN_CC_TIMEOUT: the compiler is killed after this */
  int relocated;      /* the work directory left the cache directory (it could not be written) */
  int warned_store;   /* "not caching" said once */
  int test_fail_errno; /* test hook: writes into the cache directory's work dir fail */
};

kiln_status kiln_cc_run_capture(char *const argv[], char *out, size_t cap, int *exit_code, int timeout_s,
                                int *timed_out, kiln_err *err);
int kiln_cc_relocate_work(kiln_cc *cc, const char *why);
kiln_status kiln_cc_work_write(kiln_cc *cc, const char *name, const void *data, size_t n, int *errno_out,
                               kiln_err *err);
kiln_status kiln_cc_load_cached(kiln_cc *cc, uint64_t key, const char *source, size_t len, const char *const *syms,
                                int n_syms, kiln_so **out, kiln_cc_result *res, int *hit, kiln_err *err);
void kiln_cc_argv(const kiln_cc *cc, char *so_path, char *c_path, char **argv);
int kiln_cc_out_of_space(const char *output);
kiln_status kiln_cc_failed(const kiln_cc *cc, int code, char *output, kiln_err *err);
kiln_status kiln_cc_compile_source(kiln_cc *cc, const char *source, size_t len, char *so_name, size_t so_cap,
                                   kiln_cc_result *res, kiln_err *err);
kiln_status kiln_cc_load_compiled(kiln_cc *cc, uint64_t key, const char *source, size_t len, const char *so_name,
                                  const char *const *syms, int n_syms, kiln_so **out, kiln_cc_result *res,
                                  kiln_err *err);

#endif
