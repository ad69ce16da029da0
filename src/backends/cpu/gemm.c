/* GEMM through a tuned library loaded at run time. See gemm.h and
 * docs/gemm.md for the measurements behind the default order.
 *
 * Libraries are dlopen'ed, not linked, so kiln itself has no hard
 * dependency on them: a machine without oneDNN or OpenBLAS still runs, on
 * the naive fallback. The state below is the documented GEMM singleton:
 * written once under g_mu by kiln_gemm_init, read without locks afterwards
 * (function pointers published with release/acquire).
 */
#define _GNU_SOURCE
#include "backends/cpu/gemm.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exit.h"
#include "toolchain/compiler.h" /* kiln_cpu_features */

typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                             int64_t, float, float *, int64_t);
typedef int (*dnnl_bf16_fn)(char, char, int64_t, int64_t, int64_t, float, const uint16_t *, int64_t,
                            const uint16_t *, int64_t, float, float *, int64_t);
typedef struct {
  int major, minor, patch;
  const char *hash;
  unsigned cpu_runtime, gpu_runtime;
} dnnl_version_t;
typedef const dnnl_version_t *(*dnnl_version_fn)(void);
typedef void (*omp_set_fn)(int);
enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                               float *, int);
typedef void (*cblas_dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int,
                               double, double *, int);
typedef void (*oblas_set_fn)(int);
typedef char *(*oblas_str_fn)(void);

enum { LIB_NAIVE = 0, LIB_ONEDNN = 1, LIB_OPENBLAS = 2 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_ready;   /* acquire/release */
static int g_lib;     /* LIB_* used for sgemm */
static int g_threads; /* kiln's thread count, applied to the libraries */
static char g_desc[256];
static dnnl_sgemm_fn g_dnnl_sgemm;
static dnnl_bf16_fn g_dnnl_bf16; /* dnnl_gemm_bf16bf16f32, NULL when missing */
static omp_set_fn g_omp_set;
static cblas_sgemm_fn g_cblas_sgemm;
static cblas_dgemm_fn g_cblas_dgemm;
static oblas_set_fn g_oblas_set_threads;
static char g_oblas_desc[160];
static int g_dgemm_lazy; /* OpenBLAS (for dgemm) not tried yet; under g_mu */

/* omp_set_num_threads sets a per-thread value (the caller's nthreads ICV),
 * so each calling thread applies kiln's count once. */
static _Thread_local int t_omp_threads;

static void omp_threads_apply(void) {
  int want = __atomic_load_n(&g_threads, __ATOMIC_RELAXED);
  if (g_omp_set && t_omp_threads != want) {
    g_omp_set(want);
    t_omp_threads = want;
  }
}

static int load_onednn(char *desc, size_t cap) {
  void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  dnnl_sgemm_fn f = (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm");
  dnnl_version_fn v = (dnnl_version_fn)dlsym(h, "dnnl_version");
  if (!f) {
    dlclose(h);
    return -1;
  }
  /* dlsym on the handle also searches its dependencies: Debian's oneDNN is
   * built with OpenMP (libgomp). */
  g_omp_set = (omp_set_fn)dlsym(h, "omp_set_num_threads");
  const dnnl_version_t *ver = v ? v() : NULL;
  if (ver)
    snprintf(desc, cap, "onednn %d.%d.%d (%s)", ver->major, ver->minor, ver->patch,
             g_omp_set ? "openmp" : "threads: library default");
  else
    snprintf(desc, cap, "onednn");
  g_dnnl_sgemm = f;
  g_dnnl_bf16 = (dnnl_bf16_fn)dlsym(h, "dnnl_gemm_bf16bf16f32");
  kiln_exit_drain_arm(); /* its destructors after the workers stop (base/exit.h) */
  return 0;
}

/* Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) mistakes some AVX-512 cores
 * (e.g. AMD Zen 4/5) for "Haswell" and runs AVX2 kernels at half speed; it
 * reads OPENBLAS_CORETYPE when it is loaded. On AVX-512 machines kiln sets
 * SkylakeX, which measured as fast as or faster than every other choice
 * (docs/gemm.md). A value the user set (in the environment when the
 * configuration was read) wins. Called from kiln_gemm_init, i.e. at runtime
 * start, because setenv is not safe once other threads may call getenv
 * (OpenBLAS reads it when it is loaded; kiln reads kiln_cfg()). */
static const char *g_oblas_core_how = "detected";
static void prepare_openblas_env(void) {
  const char *f = kiln_cpu_features();
  const char *user = kiln_cfg()->openblas_coretype;
  if (user && *user) {
    g_oblas_core_how = "from OPENBLAS_CORETYPE";
  } else if (strstr(f, "avx512f") && strstr(f, "avx512bw") && strstr(f, "avx512vl") && strstr(f, "avx512dq")) {
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
    g_oblas_core_how = "set by kiln";
  }
}

static int load_openblas(void) {
  const char *how = g_oblas_core_how;
  void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  cblas_sgemm_fn s = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
  cblas_dgemm_fn d = (cblas_dgemm_fn)dlsym(h, "cblas_dgemm");
  if (!s || !d) {
    dlclose(h);
    return -1;
  }
  g_oblas_set_threads = (oblas_set_fn)dlsym(h, "openblas_set_num_threads");
  oblas_str_fn core = (oblas_str_fn)dlsym(h, "openblas_get_corename");
  oblas_str_fn cfg = (oblas_str_fn)dlsym(h, "openblas_get_config");
  char ver[64] = "";
  if (cfg) { /* "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." -> "0.3.21" */
    const char *c = cfg();
    if (c && !strncmp(c, "OpenBLAS ", 9)) snprintf(ver, sizeof ver, " %.*s", (int)strcspn(c + 9, " "), c + 9);
  }
  snprintf(g_oblas_desc, sizeof g_oblas_desc, "openblas%s (core %s, %s)", ver, core ? core() : "?", how);
  g_cblas_sgemm = s;
  g_cblas_dgemm = d;
  kiln_exit_drain_arm(); /* its destructors after the workers stop (base/exit.h) */
  return 0;
}

static int default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int kiln_gemm_init(int num_threads) {
  if (num_threads <= 0) num_threads = default_threads();
  pthread_mutex_lock(&g_mu);
  __atomic_store_n(&g_threads, num_threads, __ATOMIC_RELAXED);
  if (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) {
    const char *want = kiln_cfg()->gemm;
    if (want && *want && strcmp(want, "onednn") && strcmp(want, "openblas") && strcmp(want, "naive")) {
      fprintf(stderr, "kiln: KILN_GEMM=%s is not one of onednn, openblas, naive; using the default\n", want);
      want = NULL;
    }
    int naive = want && !strcmp(want, "naive");
    if (!naive) prepare_openblas_env();
    int have_onednn = !naive && (!want || !strcmp(want, "onednn")) && load_onednn(g_desc, sizeof g_desc) == 0;
    /* With oneDNN in use, OpenBLAS is loaded only on the first dgemm
     * (oneDNN has none): a freshly loaded OpenBLAS pool busy-waits for a
     * while and measurably slowed oneDNN's threads on 2 cores. */
    if (have_onednn) {
      g_lib = LIB_ONEDNN;
      g_dgemm_lazy = 1;
    } else if (!naive && load_openblas() == 0) {
      g_lib = LIB_OPENBLAS;
      snprintf(g_desc, sizeof g_desc, "%s", g_oblas_desc);
    } else {
      g_lib = LIB_NAIVE;
      snprintf(g_desc, sizeof g_desc, "naive");
    }
    if (want && !naive && strcmp(want, g_lib == LIB_ONEDNN ? "onednn" : g_lib == LIB_OPENBLAS ? "openblas" : "naive"))
      fprintf(stderr, "kiln: KILN_GEMM=%s: library not available; using %s\n", want, g_desc);
    __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
  }
  if (g_oblas_set_threads) g_oblas_set_threads(num_threads);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

const char *kiln_gemm_library(void) {
  if (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) kiln_gemm_init(0);
  return g_desc;
}

static void ensure_ready(void) {
  if (!__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE)) kiln_gemm_init(0);
}

/* ── the naive fallback ─────────────────────────────────────────────── */

/* C = beta*C first (beta == 0 writes zeros, ignoring NaNs in C, as BLAS
 * does), then C += alpha * op(A) op(B) in k-blocks, accumulating each
 * block in a local row. The loop order keeps the inner loop contiguous in
 * C and, for the non-transposed B, in B. */
#define KILN_GEMM_NAIVE(NAME, T)                                                                               \
  static void NAME(int ta, int tb, int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t lda,         \
                   const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {                                       \
    for (int64_t i = 0; i < m; i++) {                                                                          \
      T *ci = c + i * ldc;                                                                                     \
      if (beta == 0)                                                                                           \
        for (int64_t j = 0; j < n; j++) ci[j] = 0;                                                             \
      else if (beta != 1)                                                                                      \
        for (int64_t j = 0; j < n; j++) ci[j] *= beta;                                                         \
    }                                                                                                          \
    if (k == 0 || alpha == 0) return;                                                                          \
    enum { KB = 256 };                                                                                         \
    for (int64_t p0 = 0; p0 < k; p0 += KB) {                                                                   \
      int64_t p1 = p0 + KB < k ? p0 + KB : k;                                                                  \
      for (int64_t i = 0; i < m; i++) {                                                                        \
        T *ci = c + i * ldc;                                                                                   \
        if (!tb) {                                                                                             \
          for (int64_t p = p0; p < p1; p++) {                                                                  \
            T aip = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);                                            \
            const T *bp = b + p * ldb;                                                                         \
            for (int64_t j = 0; j < n; j++) ci[j] += aip * bp[j];                                              \
          }                                                                                                    \
        } else {                                                                                               \
          for (int64_t j = 0; j < n; j++) {                                                                    \
            const T *bj = b + j * ldb;                                                                         \
            T s = 0;                                                                                           \
            if (!ta)                                                                                           \
              for (int64_t p = p0; p < p1; p++) s += a[i * lda + p] * bj[p];                                   \
            else                                                                                               \
              for (int64_t p = p0; p < p1; p++) s += a[p * lda + i] * bj[p];                                   \
            ci[j] += alpha * s;                                                                                \
          }                                                                                                    \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
  }
KILN_GEMM_NAIVE(naive_sgemm, float)
KILN_GEMM_NAIVE(naive_dgemm, double)

/* cblas takes int dimensions (Debian's OpenBLAS is not ILP64). */
static int fits_int(int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  return m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX;
}

/* oneDNN 2.6's AVX2 sgemm computes Aᵀ·B (a weight gradient dYᵀ·X, or a
 * half of one) at about half its speed when the rows of A or of B lie a
 * multiple of 2 KiB apart (a leading dimension % 512 == 0: layers of 512,
 * 1024, ... features): it reads k rows of each at once and they fall into
 * the same L1 sets. On one Zen 3 core, 512x256x2048 with lda 1024 ran at 31
 * GFLOP/s, 57 with A copied to rows 64 bytes longer (pad_ld); 256x512x2048
 * with ldb 1024 at 35, 57 with B copied. The copy moves k·m (k·n) floats
 * against 2·m·n·k flops, so it is made where the other side is wide enough;
 * not on AVX-512 CPUs, where it was not measured (docs/gemm.md, "A
 * transposed product with a power-of-two stride"). */
static int g_pad_tn = -1; /* -1 not decided yet; every thread decides the same (a benign race) */

static int pad_tn_on(void) {
  int on = __atomic_load_n(&g_pad_tn, __ATOMIC_RELAXED);
  if (on < 0) {
    on = !strstr(kiln_cpu_features(), "avx512f");
    __atomic_store_n(&g_pad_tn, on, __ATOMIC_RELAXED);
  }
  return on;
}

/* The leading dimension of a copy of rows of cols floats: a multiple of 16
 * (rows 64-byte aligned, and aligned_alloc's size a multiple of its
 * alignment, which AddressSanitizer insists on), 16 more than cols needs,
 * and not itself a multiple of 512 (cols 496 would give 512) */
static int64_t pad_ld(int64_t cols) {
  int64_t ld = (cols + 15) / 16 * 16 + 16;
  return ld % 512 == 0 ? ld + 16 : ld;
}

/* rows x cols floats (leading dimension ld) copied to rows pad_ld(cols)
 * apart, 64-byte aligned; NULL without memory */
static float *pad_copy(const float *x, int64_t rows, int64_t cols, int64_t ld) {
  int64_t lp = pad_ld(cols);
  float *o = aligned_alloc(64, (size_t)(rows * lp) * sizeof *o);
  if (o)
    for (int64_t r = 0; r < rows; r++) memcpy(o + r * lp, x + r * ld, (size_t)cols * sizeof *o);
  return o;
}

/* C = alpha·Aᵀ·B + beta·C with A and/or B copied as above where that wins:
 * 0 when done, 1 when no copy is worth making, -1 (C untouched) without
 * memory or when oneDNN refuses */
static int sgemm_tn_padded(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                           const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  int pad_a = lda % 512 == 0 && n >= 64, pad_b = ldb % 512 == 0 && m >= 64;
  if ((!pad_a && !pad_b) || k < 128 || !pad_tn_on()) return 1;
  float *ap = pad_a ? pad_copy(a, k, m, lda) : NULL, *bp = pad_b ? pad_copy(b, k, n, ldb) : NULL;
  int rc = -1;
  if ((ap || !pad_a) && (bp || !pad_b))
    rc = g_dnnl_sgemm('T', 'N', m, n, k, alpha, ap ? ap : a, ap ? pad_ld(m) : lda, bp ? bp : b, bp ? pad_ld(n) : ldb,
                      beta, c, ldc) == 0 ? 0 : -1;
  free(ap);
  free(bp);
  return rc;
}

void kiln_gemm_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  ensure_ready();
  /* k == 0 is C = beta*C; libraries differ in how they accept it. */
  if (k <= 0) {
    naive_sgemm(trans_a, trans_b, m, n, 0, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (g_lib == LIB_ONEDNN) {
    omp_threads_apply();
    if (trans_a && !trans_b && sgemm_tn_padded(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0) return;
    if (g_dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0)
      return;
    /* dnnl rejects what it cannot do (e.g. odd leading dimensions): the
     * fallback below computes it; C has not been touched. */
  } else if (g_lib == LIB_OPENBLAS && fits_int(m, n, k, lda, ldb, ldc)) {
    g_cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m,
                  (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    return;
  }
  naive_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* ── bf16 products by oneDNN (AMX) ─────────────────────────────────── */

/* oneDNN's dnnl_gemm_bf16bf16f32 runs on AMX tiles where the CPU has them:
 * on a Sapphire Rapids core 357–612 GFLOP/s on the training steps' shapes,
 * against 150–165 for its sgemm on widened copies and 60–87 for
 * vdpbf16ps (kiln's kernel, or oneDNN without AMX): docs/gemm.md, "bf16".
 * The default where amx-bf16 is present; KILN_GEMM_BF16=onednn asks for it
 * anywhere oneDNN has the function (then without AMX: for tests). */
int kiln_gemm_bf16_onednn_wanted(void) {
  ensure_ready();
  if (g_lib != LIB_ONEDNN || !g_dnnl_bf16) return 0;
  const char *want = kiln_cfg()->gemm_bf16;
  if (want && !strcmp(want, "onednn")) return 1;
  if (want && (!strcmp(want, "kernel") || !strcmp(want, "library"))) return 0;
  return strstr(kiln_cpu_features(), "amx-bf16") != NULL;
}

int kiln_gemm_bf16_onednn(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                          int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0 || !kiln_gemm_bf16_onednn_wanted()) return -1;
  /* AMX and vdpbf16ps treat subnormal inputs and results as zero: only
   * operands whose products and sums stay normal (gemm_bf16.c) */
  if (!kiln_gemm_bf16_flush_exact(trans_a, trans_b, m, n, k, a, lda, b, ldb)) return -1;
  omp_threads_apply();
  return g_dnnl_bf16(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc) == 0 ? 0
                                                                                                             : -1;
}

static int g_warm;

void kiln_gemm_warm(void) {
  if (__atomic_load_n(&g_warm, __ATOMIC_ACQUIRE)) return;
  ensure_ready();
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* not g_mu: kiln_gemm_sgemm may take it */
  pthread_mutex_lock(&mu);
  if (!g_warm) {
    float a[64] = {0}, c[64];
    static const int64_t mn[3][2] = {{8, 8}, {1, 8}, {8, 1}}; /* a GEMM and both matrix-vector products */
    for (int t = 0; t < 4; t++) /* each transposition: oneDNN initialises each on its first call */
      for (int q = 0; q < 3; q++)
        kiln_gemm_sgemm(t & 1, t >> 1, mn[q][0], mn[q][1], 8, 1.0f, a, 8, a, 8, 0.0f, c, 8);
    kiln_exit_drain_arm();
    __atomic_store_n(&g_warm, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&mu);
}

void kiln_gemm_dgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                     int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  ensure_ready();
  if (__atomic_load_n(&g_dgemm_lazy, __ATOMIC_ACQUIRE)) {
    pthread_mutex_lock(&g_mu);
    if (g_dgemm_lazy) {
      if (load_openblas() == 0 && g_oblas_set_threads)
        g_oblas_set_threads(__atomic_load_n(&g_threads, __ATOMIC_RELAXED));
      __atomic_store_n(&g_dgemm_lazy, 0, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_mu);
  }
  if (k > 0 && g_cblas_dgemm && fits_int(m, n, k, lda, ldb, ldc)) {
    g_cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m,
                  (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    return;
  }
  naive_dgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
