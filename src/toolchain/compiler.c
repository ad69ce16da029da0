/* The kernel compiler driver. See compiler.h and docs/cache.md.
 *
 * Flow of kiln_cc_build: key = hash(base key, source) -> disk cache lookup
 * -> on a miss, write the source into the private work directory, run the
 * compiler there (posix_spawn, no shell), store the object in the disk
 * cache -> dlopen a private copy. The work directory (mkdtemp, mode 0700,
 * flock'ed while in use) lives inside the cache directory when there is one
 * (same file system, known to be ours) and in $TMPDIR otherwise.
 */
#define _GNU_SOURCE
#include "toolchain/compiler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/log.h"
#include "base/fs.h"
#include "base/hash.h"
#include "base/counters.h"
#include "base/spans.h"
#include "toolchain/diskcache.h"
#include "toolchain/sharedobj.h"

extern char **environ;

#include "toolchain/compiler_internal.h"

/* Defaults keep IEEE semantics (no -ffast-math: results must match the ref
 * backend bit for bit where the op semantics say so) but let the vectorizer
 * work: -fno-math-errno lets sqrtf & co. become instructions, and gcc's -O2
 * "very cheap" vectorizer cost model refuses loops whose trip count is
 * unknown, so the "cheap" model is asked for. -fopenmp-simd honours
 * `#pragma omp simd reduction(...)` (no OpenMP runtime): the one way
 * generated code may ask for a reordered (vector) reduction, explicitly.
 * -pipe avoids the assembler temp file. Measured numbers are in
 * docs/cache.md.
 *
 * -ffp-contract=off: a value computed in two kernels (a forward kernel and a
 * backward kernel that recomputes it) must round the same way in both; with
 * contraction the compiler fuses a*b+c into an FMA in one loop and not in
 * the other, and the max/min gradient, which compares the recomputed input
 * with the saved extremum, lost elements. No -fno-trapping-math: with it,
 * gcc 12's vectorizer if-converts a padded (bounds-checked) load inside a
 * loop that stores groups of elements and miscompiles it on AVX-512 (an
 * expand of a keepdim reduction of a padded tensor gave running window sums;
 * reduced reproducer in docs/codegen.md). -fno-tree-sink: gcc 12.2 on
 * AVX-512 sinks a loop-invariant value into the masked branches it
 * if-converts in a loop that KIDX_FN unswitches on an index check, and the
 * vectorized loop stored 0 for it (an index_select of a clamped maximum,
 * found by test_random_graphs; reproducer in docs/codegen.md).
 * docs/codegen.md states the floating-point contract. */
static const char k_flags_gcc[] =
    "-O2 -march=native -fPIC -shared -fno-math-errno -ffp-contract=off -ftree-vectorize "
    "-fvect-cost-model=cheap -fopenmp-simd -fno-tree-sink -fno-semantic-interposition -pipe";
static const char k_flags_clang[] =
    "-O2 -march=native -fPIC -shared -fno-math-errno -ffp-contract=off -fopenmp-simd -pipe";
static const char k_flags_other[] = "-O2 -fPIC -shared -ffp-contract=off";

static uint64_t now_ns(void) { return kiln_now_ns(); }

/* ── CPU features ───────────────────────────────────────────────────── */

/* Computed once (pthread_once) and immutable afterwards: a documented
 * process-wide constant, not mutable state. */
static char g_features[512];
static int g_cpu_amd; /* cpuid's vendor is AuthenticAMD */
static pthread_once_t g_features_once = PTHREAD_ONCE_INIT;

static void feat_add(size_t *n, const char *name) {
  int w = snprintf(g_features + *n, sizeof g_features - *n, "%s%s", *n ? " " : "", name);
  if (w > 0 && *n + (size_t)w < sizeof g_features) *n += (size_t)w;
}

#if defined(__x86_64__) || defined(__i386__)
static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}
#endif

static void features_init(void) {
  size_t n = 0;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  feat_add(&n, "x86");
  if (__get_cpuid(0, &a, &b, &c, &d)) g_cpu_amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  unsigned c1 = c;
  /* the raw feature words (the disk cache's key, below), filled as the
   * leaves are read: 1 ecx, edx; 7.0 ebx, ecx, edx; 7.1 eax; 0x80000001 */
  unsigned w[8] = {c1, d, 0, 0, 0, 0, 0, 0};
  /* AVX state must also be enabled by the OS (XCR0), not just present. */
  uint64_t xcr0 = (c1 & (1u << 27)) ? xgetbv0() : 0;
  int avx_os = (xcr0 & 0x6) == 0x6, avx512_os = (xcr0 & 0xe6) == 0xe6;
  int amx_os = (xcr0 & (3u << 17)) == (3u << 17);
  if (c1 & (1u << 20)) feat_add(&n, "sse4.2");
  if (c1 & (1u << 23)) feat_add(&n, "popcnt");
  if (avx_os && (c1 & (1u << 28))) feat_add(&n, "avx");
  if (avx_os && (c1 & (1u << 12))) feat_add(&n, "fma");
  if (avx_os && (c1 & (1u << 29))) feat_add(&n, "f16c");
  unsigned max_leaf = __get_cpuid_max(0, NULL);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    unsigned b7 = b, c7 = c, d7 = d, max7 = a;
    w[2] = b7, w[3] = c7, w[4] = d7;
    if (b7 & (1u << 3)) feat_add(&n, "bmi1");
    if (b7 & (1u << 8)) feat_add(&n, "bmi2");
    if (avx_os && (b7 & (1u << 5))) feat_add(&n, "avx2");
    if (avx512_os) {
      static const struct { int reg, bit; const char *name; } k[] = {
          {0, 16, "avx512f"},     {0, 17, "avx512dq"},   {0, 28, "avx512cd"},    {0, 30, "avx512bw"},
          {0, 31, "avx512vl"},    {0, 21, "avx512ifma"}, {1, 1, "avx512vbmi"},   {1, 6, "avx512vbmi2"},
          {1, 11, "avx512vnni"},  {1, 12, "avx512bitalg"}, {1, 14, "avx512vpopcntdq"}, {2, 23, "avx512fp16"},
      };
      for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        unsigned r = k[i].reg == 0 ? b7 : k[i].reg == 1 ? c7 : d7;
        if (r & (1u << k[i].bit)) feat_add(&n, k[i].name);
      }
    }
    if (max7 >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      w[5] = a;
      if (avx_os && (a & (1u << 4))) feat_add(&n, "avxvnni");
      if (avx512_os && (a & (1u << 5))) feat_add(&n, "avx512bf16");
    }
    if (amx_os && (d7 & (1u << 24))) feat_add(&n, "amx-tile");
    if (amx_os && (d7 & (1u << 22))) feat_add(&n, "amx-bf16");
    if (amx_os && (d7 & (1u << 25))) feat_add(&n, "amx-int8");
  }
  /* The names above are what kiln's own code asks for; the disk cache's key
   * needs everything -march=native may use (gfni, vaes, vpclmulqdq, sha,
   * adx, movbe, lzcnt, sse4a, ...): the raw feature words of leaves 1, 7.0,
   * 7.1 and 0x80000001 and the OS-enabled state, so that objects built on
   * one CPU are never loaded on another that lacks one of its instructions
   * (a shared cache directory on mixed machines would get SIGILL). */
  if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u) {
    __cpuid(0x80000001u, a, b, c, d);
    w[6] = c, w[7] = d;
  }
  char raw[128];
  snprintf(raw, sizeof raw, "cpuid:%x.%x.%x.%x.%x.%x.%x.%x.xcr0:%llx", w[0], w[1], w[2], w[3], w[4], w[5], w[6],
           w[7], (unsigned long long)xcr0);
  feat_add(&n, raw);
#else
  feat_add(&n, "generic");
#endif
}

const char *kiln_cpu_features(void) {
  pthread_once(&g_features_once, features_init);
  return g_features;
}

int kiln_cpu_is_amd(void) {
  pthread_once(&g_features_once, features_init);
  return g_cpu_amd;
}

/* ── running a program ──────────────────────────────────────────────── */

/* Find `name` like execvp would; the result (malloc'ed) is what the key
 * and the messages name. */
static char *resolve_program(const char *name) {
  if (strchr(name, '/')) return access(name, X_OK) == 0 ? strdup(name) : NULL;
  const char *path = kiln_cfg()->path;
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  char buf[PATH_MAX];
  while (*path) {
    const char *end = strchr(path, ':');
    size_t len = end ? (size_t)(end - path) : strlen(path);
    int w = len ? snprintf(buf, sizeof buf, "%.*s/%s", (int)len, path, name) : snprintf(buf, sizeof buf, "./%s", name);
    struct stat st;
    if (w > 0 && (size_t)w < sizeof buf && stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
      return strdup(buf);
    path += len + (end ? 1 : 0);
  }
  return NULL;
}

/* Run argv (argv[0] an executable path) with stdin from /dev/null and
 * stdout+stderr captured into out (NUL-terminated, truncated at cap; the
 * rest is drained so the child never blocks). *exit_code: the exit status,
 * or 128+signal. timeout_s > 0: the child runs in its own process group,
 * which is killed (SIGKILL) when the time is up: *timed_out is set and the
 * status is KILN_ERR_COMPILE. Errors: KILN_ERR_COMPILE when it cannot be
 * started. */
kiln_status kiln_cc_run_capture(char *const argv[], char *out, size_t cap, int *exit_code, int timeout_s,
                               int *timed_out, kiln_err *err) {
  out[0] = 0;
  *exit_code = -1;
  if (timed_out) *timed_out = 0;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return kiln_err_set(err, KILN_ERR_IO, "pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  posix_spawnattr_t sa;
  posix_spawnattr_init(&sa);
  /* its own process group: a timeout kills the compiler's children too */
  posix_spawnattr_setflags(&sa, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&sa, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, &sa, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&sa);
  close(p[1]);
  if (rc != 0) {
    close(p[0]);
    return kiln_err_set(err, KILN_ERR_COMPILE, "cannot run %s: %s", argv[0], strerror(rc));
  }
  size_t n = 0;
  char sink[4096];
  uint64_t deadline = timeout_s > 0 ? kiln_now_ns() + (uint64_t)timeout_s * 1000000000ULL : 0;
  int killed = 0;
  for (;;) {
    if (deadline) {
      uint64_t now = kiln_now_ns();
      int ms = now >= deadline ? 0 : (int)((deadline - now) / 1000000ULL) + 1;
      struct pollfd pf = {p[0], POLLIN, 0};
      int pr = now >= deadline ? 0 : poll(&pf, 1, ms);
      if (pr < 0 && errno == EINTR) continue;
      if (pr == 0) { /* time is up: the compiler and everything it started */
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        killed = 1;
        break;
      }
    }
    char *dst = n + 1 < cap ? out + n : sink;
    size_t room = n + 1 < cap ? cap - 1 - n : sizeof sink;
    ssize_t r = read(p[0], dst, room);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (dst != sink) n += (size_t)r;
  }
  out[n] = 0;
  close(p[0]);
  int st = 0, lost = 0;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno == EINTR) continue;
    /* The host program ignores SIGCHLD, so the child was reaped for us and
     * its status is lost: assume success; a failed compile is then caught
     * when its output is missing or incomplete. */
    if (errno == ECHILD) {
      lost = 1;
      break;
    }
    return kiln_err_set(err, KILN_ERR_COMPILE, "waitpid(%s): %s", argv[0], strerror(errno));
  }
  if (killed) {
    if (timed_out) *timed_out = 1;
    return kiln_err_set(err, KILN_ERR_COMPILE,
                        "the kernel compiler %s did not finish within %d s and was killed (KILN_CC_TIMEOUT=%d; "
                        "raise it for very large graphs, or check the compiler)",
                        argv[0], timeout_s, timeout_s);
  }
  *exit_code = lost ? 0 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return KILN_OK;
}

/* Split flags on blanks; '...' and "..." group words (no escapes, no
 * expansion: there is no shell). Splits in place into cc->argv_store. */
static kiln_status split_flags(kiln_cc *cc, kiln_err *err) {
  char *s = cc->argv_store;
  cc->nflags = 0;
  while (*s) {
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    if (!*s) break;
    if (cc->nflags == KILN_CC_MAX_FLAGS)
      return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "too many compiler flags (at most %d)", KILN_CC_MAX_FLAGS);
    char *dst = s, *word = s;
    char quote = 0;
    while (*s && (quote || (*s != ' ' && *s != '\t' && *s != '\n'))) {
      if (!quote && (*s == '\'' || *s == '"')) {
        quote = *s++;
      } else if (quote && *s == quote) {
        quote = 0;
        s++;
      } else {
        *dst++ = *s++;
      }
    }
    if (quote) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "unbalanced quote in compiler flags: %s", cc->flags);
    int at_end = *s == 0;
    *dst = 0;
    if (!at_end) s++;
    cc->flag_argv[cc->nflags++] = word;
  }
  return KILN_OK;
}

/* ── create / destroy ───────────────────────────────────────────────── */

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

static kiln_status create_work_dir(kiln_cc *cc, const char *cache_dir, kiln_err *err) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "tmp-%ld-", (long)getpid());
  /* a killed process's work directory under the temp base (the cache's are swept when it opens) */
  if (!cache_dir) kiln_fs_remove_unlocked_dirs(NULL, "kiln-cc-", 60);
  kiln_status s = kiln_fs_mkdtemp(cache_dir, cache_dir ? prefix : "kiln-cc-", cc->work, sizeof cc->work, err);
  if (s != KILN_OK) return s;
  cc->work_fd = open(cc->work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (cc->work_fd < 0) return kiln_err_set(err, KILN_ERR_IO, "cannot open %s: %s", cc->work, strerror(errno));
  (void)flock(cc->work_fd, LOCK_EX | LOCK_NB);
  return KILN_OK;
}

/* KILN_CC_TIMEOUT: seconds a compiler run may take (default 300: a
 * thousand-kernel graph compiles in tens of seconds); 0 or less: none */
static int timeout_from_config(void) {
  long v = 300; /* malformed: the default */
  if (!kiln_cfg_long(kiln_cfg()->cc_timeout, &v)) v = 300;
  return v > 86400 ? 86400 : v < 0 ? 0 : (int)v;
}

/* cc->cc_path: the configured compiler (KILN_CC, default "cc") resolved. */
static kiln_status find_compiler(kiln_cc *cc, const kiln_cc_config *cfg, kiln_err *err) {
  const char *name = cfg->cc && *cfg->cc ? cfg->cc : kiln_cfg()->cc;
  if (!name || !*name) name = "cc";
  cc->cc_path = resolve_program(name);
  if (cc->cc_path) return KILN_OK;
  /* say why: a file that exists but cannot be run is not "not found" */
  struct stat st;
  if (strchr(name, '/') && stat(name, &st) == 0)
    return kiln_err_set(err, KILN_ERR_COMPILE, "kernel compiler '%s' is %s (set KILN_CC to a C compiler, e.g. gcc)",
                        name, S_ISDIR(st.st_mode) ? "a directory" : "not executable (no permission to run it)");
  return kiln_err_set(err, KILN_ERR_COMPILE,
                      "kernel compiler '%s' not found%s (set KILN_CC to a C compiler, e.g. gcc)", name,
                      strchr(name, '/') ? "" : " in PATH as an executable file");
}

/* Run `cc --version` into outbuf; cc->version: its first line (NULL when
 * out of memory, which the caller reports). */
static kiln_status query_version(kiln_cc *cc, char *outbuf, size_t cap, kiln_err *err) {
  int code;
  char *vargv[] = {cc->cc_path, "--version", NULL};
  kiln_status s = kiln_cc_run_capture(vargv, outbuf, cap, &code, cc->timeout_s, NULL, err);
  if (s == KILN_OK && code != 0)
    s = kiln_err_set(err, KILN_ERR_COMPILE, "'%s --version' failed (exit status %d): %.300s", cc->cc_path, code,
                     outbuf);
  if (s != KILN_OK) return s;
  size_t l1 = strcspn(outbuf, "\n");
  cc->version = strndup(outbuf, l1);
  return KILN_OK;
}

/* The default flags for the compiler whose `--version` printed out. */
static const char *default_flags(const char *version_output) {
  /* `cc --version` of gcc does not say "gcc" on line 1; the FSF copyright
   * line does. */
  if (strstr(version_output, "clang")) return k_flags_clang;
  if (strstr(version_output, "Free Software Foundation") || strstr(version_output, "gcc") ||
      strstr(version_output, "GCC"))
    return k_flags_gcc;
  return k_flags_other;
}

/* The flags, split, and what is derived from them: the command line shown
 * in errors and the description stored in cache entries. */
static kiln_status set_flags(kiln_cc *cc, const char *flags, kiln_err *err) {
  cc->flags = strdup(flags);
  cc->argv_store = strdup(flags);
  if (!cc->version || !cc->flags || !cc->argv_store)
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  kiln_status s = split_flags(cc, err);
  if (s != KILN_OK) return s;
  cc->command = dup_printf("%s %s", cc->cc_path, cc->flags);
  cc->meta = dup_printf("kiln %s\ncompiler %s\nversion %s\nflags %s\ncpu %s\n", KILN_VERSION_STRING, cc->cc_path,
                        cc->version, cc->flags, kiln_cpu_features());
  if (!cc->command || !cc->meta) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  if (strlen(cc->meta) > KILN_CACHE_ENTRY_MAX_META) cc->meta[KILN_CACHE_ENTRY_MAX_META] = 0;
  return KILN_OK;
}

/* Everything that changes the produced code goes into the key, each part
 * hashed with its length so that boundaries cannot be shifted. */
static uint64_t compiler_key(const kiln_cc *cc) {
  const char *parts[] = {KILN_VERSION_STRING, cc->cc_path, cc->version, cc->flags, kiln_cpu_features()};
  uint64_t h = 0x6b696c6e2d636301ULL; /* "kiln-cc\1" */
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    h = kiln_hash_combine(h, kiln_hash_bytes(parts[i], strlen(parts[i]), i + 1));
  return h;
}

kiln_status kiln_cc_create(const kiln_cc_config *cfg, kiln_cc **out, kiln_err *err) {
  *out = NULL;
  kiln_cc_config none = {0};
  if (!cfg) cfg = &none;
  kiln_cc *cc = calloc(1, sizeof *cc);
  if (!cc) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_init(&cc->mu, NULL);
  cc->work_fd = -1;
  cc->timeout_s = timeout_from_config();
  kiln_status s = find_compiler(cc, cfg, err);
  if (s != KILN_OK) goto fail;
  char outbuf[KILN_CC_OUTPUT_CAP];
  if ((s = query_version(cc, outbuf, sizeof outbuf, err)) != KILN_OK) goto fail;
  const char *flags = cfg->cflags ? cfg->cflags : kiln_cfg()->cflags;
  if (!flags) flags = default_flags(outbuf);
  if ((s = set_flags(cc, flags, err)) != KILN_OK) goto fail;
  cc->base_key = compiler_key(cc);

  const char *cache_dir = cfg->cache_dir && *cfg->cache_dir ? cfg->cache_dir : NULL;
  if (cache_dir) {
    s = kiln_diskcache_open(cache_dir, &cc->dc, err);
    if (s != KILN_OK) goto fail;
  }
  if ((s = create_work_dir(cc, cache_dir, err)) != KILN_OK) goto fail;
  *out = cc;
  return KILN_OK;
fail:
  kiln_cc_destroy(cc);
  return s;
}

void kiln_cc_destroy(kiln_cc *cc) {
  if (!cc) return;
  if (cc->work[0]) kiln_fs_remove_tree(cc->work);
  if (cc->work_fd >= 0) close(cc->work_fd);
  kiln_diskcache_close(cc->dc);
  free(cc->cc_path);
  free(cc->flags);
  free(cc->argv_store);
  free(cc->command);
  free(cc->version);
  free(cc->meta);
  pthread_mutex_destroy(&cc->mu);
  free(cc);
}

const char *kiln_cc_command(const kiln_cc *cc) { return cc ? cc->command : NULL; }
const char *kiln_cc_version(const kiln_cc *cc) { return cc ? cc->version : NULL; }
const char *kiln_cc_cache_dir(const kiln_cc *cc) { return cc ? kiln_diskcache_dir(cc->dc) : NULL; }
void kiln_cc_test_force_key(kiln_cc *cc, uint64_t key) {
  pthread_mutex_lock(&cc->mu);
  cc->force_key = key;
  pthread_mutex_unlock(&cc->mu);
}

/* ── build ──────────────────────────────────────────────────────────── */

/* Keep the first KILN_CC_ERROR_LINES lines of compiler output. */
static void first_lines(char *text, int max_lines) {
  int lines = 0;
  for (char *p = text; *p; p++) {
    if (*p == '\n' && ++lines == max_lines) {
      strcpy(p, "\n...");
      return;
    }
  }
}

/* The cache directory could not be written (full disk, quota, I/O error):
 * compile in a private directory elsewhere and stop caching, saying so once.
 * The cache is an optimisation: it never makes a program fail. */
int kiln_cc_relocate_work(kiln_cc *cc, const char *why) {
  if (cc->relocated) return -1;
  const char *tmp = kiln_cfg()->tmpdir;
  const char *bases[] = {tmp && *tmp ? tmp : "/tmp", "/dev/shm", "/var/tmp"};
  char old[sizeof cc->work];
  snprintf(old, sizeof old, "%s", cc->work);
  for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
    kiln_err e = {0};
    char dir[sizeof cc->work];
    kiln_fs_remove_unlocked_dirs(bases[i], "kiln-cc-", 60);
    if (kiln_fs_mkdtemp(bases[i], "kiln-cc-", dir, sizeof dir, &e) != KILN_OK) continue;
    char probe[sizeof dir + 16];
    snprintf(probe, sizeof probe, "%s/probe", dir);
    int pfd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int ok = pfd >= 0 && write(pfd, "kiln", 4) == 4;
    if (pfd >= 0) close(pfd);
    unlink(probe);
    if (!ok) {
      kiln_fs_remove_tree(dir);
      continue;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      kiln_fs_remove_tree(dir);
      continue;
    }
    kiln_log_printf(stderr,
            "kiln: warning: cannot write in the cache directory (%s): compiling in %s and not caching compiled "
            "kernels for the rest of this run\n",
            why, dir);
    (void)flock(fd, LOCK_EX | LOCK_NB); /* held while it lives: no sweep removes it */
    if (cc->work_fd >= 0) close(cc->work_fd);
    kiln_fs_remove_tree(old);
    snprintf(cc->work, sizeof cc->work, "%s", dir);
    cc->work_fd = fd;
    cc->relocated = 1;
    cc->test_fail_errno = 0;
    kiln_counter_add("CacheDirUnwritable", 1);
    return 0;
  }
  return -1;
}

/* Write a file into the work directory (with the test hook). */
kiln_status kiln_cc_work_write(kiln_cc *cc, const char *name, const void *data, size_t n, int *errno_out,
                              kiln_err *err) {
  *errno_out = 0;
  if (cc->test_fail_errno) {
    *errno_out = cc->test_fail_errno;
    return kiln_err_set(err, KILN_ERR_IO, "cannot write %s/%s: %s", cc->work, name, strerror(cc->test_fail_errno));
  }
  errno = 0;
  kiln_status s = kiln_fs_write_new_at(cc->work_fd, cc->work, name, data, n, err);
  if (s != KILN_OK) *errno_out = errno ? errno : EIO;
  return s;
}

/* dlopen a file of the private work directory. Every loaded object gets a
 * name never used before in this process: glibc reuses an already loaded
 * object whose name matches, so reusing a name could run stale code. */
static kiln_status load_private(kiln_cc *cc, const char *name, kiln_so **out, kiln_err *err) {
  char path[sizeof cc->work + 64];
  snprintf(path, sizeof path, "%s/%s", cc->work, name);
  kiln_status s = kiln_so_load_path(path, out, err);
  /* The mapping keeps the file alive; the name is not needed any more. */
  unlinkat(cc->work_fd, name, 0);
  return s;
}

/* Check and load object bytes (a verified cache entry, or what the
 * compiler wrote): ELF structure first, then a private copy in the work
 * directory (moved out of the cache directory if that cannot be written,
 * or into memory as a last resort), then the symbols. */
static kiln_status load_bytes(kiln_cc *cc, const uint8_t *b, size_t n, const char *what, const char *const *syms,
                              int n_syms, kiln_so **out, kiln_err *err) {
  *out = NULL;
  const char *bad = kiln_so_elf_problem(b, n);
  if (bad) return kiln_err_set(err, KILN_ERR_COMPILE, "%s is not a complete shared object: %s", what, bad);
  char so_name[64];
  snprintf(so_name, sizeof so_name, "h%llu.so", (unsigned long long)++cc->seq);
  int e = 0;
  kiln_err werr = {0};
  kiln_status s = kiln_cc_work_write(cc, so_name, b, n, &e, &werr);
  if (s != KILN_OK && kiln_cc_relocate_work(cc, werr.msg) == 0) s = kiln_cc_work_write(cc, so_name, b, n, &e, &werr);
  s = s == KILN_OK ? load_private(cc, so_name, out, err) : kiln_so_load_memory(b, n, out, err);
  if (s == KILN_OK) s = kiln_so_check_symbols(*out, syms, n_syms, what, err);
  if (s != KILN_OK && *out) {
    kiln_so_close(*out);
    *out = NULL;
  }
  return s;
}

/* Look key up in the disk cache and load a verified entry; *hit says
 * whether *out was loaded from it. An entry that does not load is evicted
 * (a miss). */
kiln_status kiln_cc_load_cached(kiln_cc *cc, uint64_t key, const char *source, size_t len, const char *const *syms,
                               int n_syms, kiln_so **out, kiln_cc_result *res, int *hit, kiln_err *err) {
  *hit = 0;
  uint64_t t0 = now_ns();
  uint8_t *entry = NULL;
  kiln_cache_entry_view view;
  int corrupt = 0;
  kiln_status s = kiln_diskcache_lookup(cc->dc, key, source, len, &entry, &view, &corrupt, err);
  if (s != KILN_OK) return s;
  res->disk_cache_corrupt = corrupt;
  if (entry) {
    /* Load a private copy of the verified bytes: the cache file itself
     * is never dlopen'ed, so nothing can change it between the checksum
     * and the load (see docs/cache.md). */
    char what[160];
    snprintf(what, sizeof what, "cache entry %s/%016llx", kiln_diskcache_dir(cc->dc), (unsigned long long)key);
    kiln_err lerr = {0};
    s = load_bytes(cc, view.so, view.so_len, what, syms, n_syms, out, &lerr);
    free(entry);
    if (s == KILN_OK) {
      res->from_disk_cache = 1;
      res->load_ns = (double)(now_ns() - t0);
      kiln_prof_span_end(t0, KILN_PROF_COMPILE, "compile: load (disk cache)", -1);
      kiln_counter_add("PersistentCacheHit", 1);
      *hit = 1;
      return KILN_OK;
    }
    /* Checksums right, object wrong (stored by an older kiln from a
     * compiler that left a truncated object): evict it and rebuild. */
    kiln_log_printf(stderr, "kiln: %s; evicting the entry and rebuilding\n", lerr.msg);
    kiln_diskcache_evict(cc->dc, key);
    res->disk_cache_corrupt = 1;
  }
  kiln_counter_add("PersistentCacheMiss", 1);
  kiln_prof_span_end(t0, KILN_PROF_COMPILE, "compile: disk cache lookup", -1);
  return KILN_OK;
}

/* The compiler's command line: flags, output, input, libm. argv has room
 * for KILN_CC_MAX_FLAGS + 8 entries. */
void kiln_cc_argv(const kiln_cc *cc, char *so_path, char *c_path, char **argv) {
  int argc = 0;
  argv[argc++] = cc->cc_path;
  for (int i = 0; i < cc->nflags; i++) argv[argc++] = cc->flag_argv[i];
  argv[argc++] = "-o";
  argv[argc++] = so_path;
  argv[argc++] = c_path;
  /* kernels call libm (expf, tanh, ...): a program that does not link libm
   * itself must still be able to load them */
  argv[argc++] = "-lm";
  argv[argc] = NULL;
}

int kiln_cc_out_of_space(const char *output) {
  return strstr(output, "No space left on device") || strstr(output, "Disk quota exceeded");
}

/* The error of a compiler run that exited with code (output: what it
 * printed, cut to its first lines here). */
kiln_status kiln_cc_failed(const kiln_cc *cc, int code, char *output, kiln_err *err) {
  first_lines(output, KILN_CC_ERROR_LINES);
  return kiln_err_set(err, KILN_ERR_COMPILE, "kernel compiler failed (exit status %d): %s\n%s", code, cc->command,
                      output);
}

/* Write the source into the work directory and compile it there into
 * so_name (of the work directory). A work directory that cannot be written,
 * or a compiler out of space, moves the work directory once and tries again. */
kiln_status kiln_cc_compile_source(kiln_cc *cc, const char *source, size_t len, char *so_name, size_t so_cap,
                                  kiln_cc_result *res, kiln_err *err) {
  char c_name[64];
  for (int attempt = 0;; attempt++) {
    uint64_t seq = ++cc->seq;
    snprintf(c_name, sizeof c_name, "k%llu.c", (unsigned long long)seq);
    snprintf(so_name, so_cap, "k%llu.so", (unsigned long long)seq);
    int e = 0;
    kiln_err werr = {0};
    kiln_status s = kiln_cc_work_write(cc, c_name, source, len, &e, &werr);
    if (s != KILN_OK) {
      if (attempt == 0 && kiln_cc_relocate_work(cc, werr.msg) == 0) continue;
      return kiln_err_set(err, KILN_ERR_IO, "cannot write the kernel source anywhere: %s", werr.msg);
    }
    char c_path[sizeof cc->work + 64], so_path[sizeof cc->work + 64];
    snprintf(c_path, sizeof c_path, "%s/%s", cc->work, c_name);
    snprintf(so_path, sizeof so_path, "%s/%s", cc->work, so_name);
    char *argv[KILN_CC_MAX_FLAGS + 8];
    kiln_cc_argv(cc, so_path, c_path, argv);

    char *output = malloc(KILN_CC_OUTPUT_CAP);
    if (!output) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    int code;
    uint64_t t0 = now_ns();
    s = kiln_cc_run_capture(argv, output, KILN_CC_OUTPUT_CAP, &code, cc->timeout_s, NULL, err);
    res->cc_ns = (double)(now_ns() - t0);
    kiln_prof_span_end(t0, KILN_PROF_COMPILE, "compile: C compiler", (int64_t)len);
    unlinkat(cc->work_fd, c_name, 0);
    if (s == KILN_OK && code != 0) {
      if (kiln_cc_out_of_space(output) && attempt == 0 &&
          kiln_cc_relocate_work(cc, "the compiler ran out of space") == 0) {
        free(output);
        unlinkat(cc->work_fd, so_name, 0);
        continue;
      }
      s = kiln_cc_failed(cc, code, output, err);
    }
    free(output);
    if (s != KILN_OK) unlinkat(cc->work_fd, so_name, 0);
    return s;
  }
}

/* What the compiler wrote into so_name, checked and loaded before it is
 * stored: an object that does not load never reaches the cache. */
kiln_status kiln_cc_load_compiled(kiln_cc *cc, uint64_t key, const char *source, size_t len, const char *so_name,
                                 const char *const *syms, int n_syms, kiln_so **out, kiln_cc_result *res,
                                 kiln_err *err) {
  uint64_t t0 = now_ns();
  int fd = openat(cc->work_fd, so_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  uint8_t *bytes = NULL;
  size_t n = 0;
  kiln_err rerr = {0};
  kiln_status s = fd >= 0 ? kiln_fs_read_fd(fd, KILN_CACHE_ENTRY_MAX_BYTES, &bytes, &n, &rerr)
                          : kiln_err_set(&rerr, KILN_ERR_COMPILE, "no output file: %s", strerror(errno));
  if (fd >= 0) close(fd);
  unlinkat(cc->work_fd, so_name, 0);
  if (s != KILN_OK) return kiln_err_set(err, KILN_ERR_COMPILE, "kernel compiler %s: %s", cc->command, rerr.msg);
  char what[96];
  snprintf(what, sizeof what, "the output of the kernel compiler %s", cc->cc_path);
  s = load_bytes(cc, bytes, n, what, syms, n_syms, out, err);
  if (s != KILN_OK) {
    free(bytes);
    kiln_err_context(err, "exit status 0 from %s", cc->command);
    return s;
  }
  if (cc->dc && !cc->relocated) {
    kiln_err serr = {0};
    s = kiln_diskcache_store(cc->dc, key, cc->meta, source, len, bytes, n, &serr);
    /* A cache that cannot be written costs time, not correctness: warn
     * once and go on with the loaded object. */
    if (s != KILN_OK && !cc->warned_store) {
      cc->warned_store = 1;
      kiln_log_printf(stderr, "kiln: warning: not caching compiled kernels: %s\n", serr.msg);
    }
  }
  free(bytes);
  res->load_ns = (double)(now_ns() - t0);
  kiln_prof_span_end(t0, KILN_PROF_COMPILE, "compile: load", -1);
  return KILN_OK;
}

static kiln_status build_locked(kiln_cc *cc, const char *source, size_t len, const char *const *syms, int n_syms,
                                kiln_so **out, kiln_cc_result *res, kiln_err *err) {
  uint64_t key = cc->force_key ? cc->force_key : kiln_hash_bytes(source, len, cc->base_key);
  kiln_status s;
  if (cc->dc) {
    int hit;
    s = kiln_cc_load_cached(cc, key, source, len, syms, n_syms, out, res, &hit, err);
    if (s != KILN_OK || hit) return s;
  }
  char so_name[64];
  res->compiler_runs = 1;
  s = kiln_cc_compile_source(cc, source, len, so_name, sizeof so_name, res, err);
  if (s != KILN_OK) return s;
  return kiln_cc_load_compiled(cc, key, source, len, so_name, syms, n_syms, out, res, err);
}

kiln_status kiln_cc_build_checked(kiln_cc *cc, const char *source, size_t len, const char *const *symbols,
                                  int n_symbols, kiln_so **out, kiln_cc_result *res, kiln_err *err) {
  kiln_cc_result local;
  if (!res) res = &local;
  memset(res, 0, sizeof *res);
  if (out) *out = NULL;
  if (!cc || !source || !out || n_symbols < 0 || (n_symbols && !symbols))
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "kiln_cc_build: NULL argument");
  pthread_mutex_lock(&cc->mu);
  kiln_status s = build_locked(cc, source, len, symbols, n_symbols, out, res, err);
  pthread_mutex_unlock(&cc->mu);
  return s;
}

kiln_status kiln_cc_build(kiln_cc *cc, const char *source, size_t len, kiln_so **out, kiln_cc_result *res,
                          kiln_err *err) {
  return kiln_cc_build_checked(cc, source, len, NULL, 0, out, res, err);
}

void kiln_cc_test_fail_cache_writes(kiln_cc *cc, int err_no) {
  pthread_mutex_lock(&cc->mu);
  cc->test_fail_errno = cc->dc ? err_no : 0;
  pthread_mutex_unlock(&cc->mu);
}


