/* GEMM: every transpose combination, odd and empty sizes, padded leading
 * dimensions and alpha/beta cases, for each available library, against a
 * plain triple loop in double precision.
 *
 * The library is chosen once per process (KILN_GEMM is read at init), so
 * each library runs in a forked child with KILN_GEMM set; the child's exit
 * status carries its result. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/cpu/gemm.h"
#include "base/config.h"
#include "kiln/kiln.h"
#include "kt.h"

#define SKIP_CODE 77

static uint64_t g_state = 0x9e3779b97f4a7c15ULL;
static double next_val(void) { /* splitmix64 -> [-1, 1) */
  uint64_t z = (g_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return (double)(z >> 11) / (double)(1ULL << 52) - 1.0;
}

/* One case in float or double; returns the number of bad elements. */
static int check_case_ld(int dbl, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, double beta,
                         int nan_c, int64_t lda_set, int64_t ldb_set) {
  /* Stored shapes: A is m x k (k x m when transposed), B is k x n (n x k). */
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  int64_t lda = ac + 3, ldb = bc + 1, ldc = n + 2; /* padded: strides must be honoured */
  if (lda_set) lda = lda_set;
  if (ldb_set) ldb = ldb_set;
  size_t an = (size_t)(ar * lda + 1), bn = (size_t)(br * ldb + 1), cn = (size_t)(m * ldc + 1);
  double *A = malloc(an * sizeof *A), *B = malloc(bn * sizeof *B), *C0 = malloc(cn * sizeof *C0);
  for (size_t i = 0; i < an; i++) A[i] = next_val();
  for (size_t i = 0; i < bn; i++) B[i] = next_val();
  for (size_t i = 0; i < cn; i++) C0[i] = nan_c ? NAN : next_val();
  int bad = 0;
  float *af = malloc(an * sizeof *af), *bf = malloc(bn * sizeof *bf), *cf = malloc(cn * sizeof *cf);
  double *cd = malloc(cn * sizeof *cd);
  for (size_t i = 0; i < an; i++) af[i] = (float)A[i];
  for (size_t i = 0; i < bn; i++) bf[i] = (float)B[i];
  for (size_t i = 0; i < cn; i++) cf[i] = (float)C0[i], cd[i] = C0[i];
  if (dbl)
    kiln_gemm_dgemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, cd, ldc);
  else
    kiln_gemm_sgemm(ta, tb, m, n, k, (float)alpha, af, lda, bf, ldb, (float)beta, cf, ldc);
  for (int64_t i = 0; i < m; i++) {
    for (int64_t j = 0; j < ldc; j++) {
      double got = dbl ? cd[i * ldc + j] : (double)cf[i * ldc + j];
      double c0 = dbl ? C0[i * ldc + j] : (double)(float)C0[i * ldc + j];
      if (j >= n) { /* padding must be untouched */
        if (!(got == c0 || (got != got && c0 != c0))) bad++;
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < k; p++) {
        double x = dbl ? (ta ? A[p * lda + i] : A[i * lda + p]) : (double)(ta ? af[p * lda + i] : af[i * lda + p]);
        double y = dbl ? (tb ? B[j * ldb + p] : B[p * ldb + j]) : (double)(tb ? bf[j * ldb + p] : bf[p * ldb + j]);
        ref += x * y;
        mag += fabs(x * y);
      }
      ref *= alpha;
      mag *= fabs(alpha);
      if (beta != 0) {
        ref += beta * c0;
        mag += fabs(beta * c0);
      }
      /* The worst-case rounding bound of a length-k dot product. */
      double tol = (dbl ? 1.2e-16 : 6.0e-8) * (double)(k + 2) * (mag + 1);
      if (!(fabs(got - ref) <= tol)) {
        if (bad < 3)
          KT_FAIL("%s ta=%d tb=%d m=%lld n=%lld k=%lld alpha=%g beta=%g: C[%lld][%lld] = %.9g, want %.9g",
                  dbl ? "dgemm" : "sgemm", ta, tb, (long long)m, (long long)n, (long long)k, alpha, beta,
                  (long long)i, (long long)j, got, ref);
        bad++;
      }
    }
  }
  free(A), free(B), free(C0), free(af), free(bf), free(cf), free(cd);
  return bad;
}

static int check_case(int dbl, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, double beta,
                      int nan_c) {
  return check_case_ld(dbl, ta, tb, m, n, k, alpha, beta, nan_c, 0, 0);
}

static void run_all_cases(void) {
  static const int64_t sizes[] = {0, 1, 3, 17};
  static const double ab[][2] = {{1, 0}, {0.5, 2}, {-1.5, 1}};
  int bad = 0;
  for (int dbl = 0; dbl < 2; dbl++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        for (size_t im = 0; im < 4; im++)
          for (size_t in = 0; in < 4; in++)
            for (size_t ik = 0; ik < 4; ik++)
              for (size_t s = 0; s < 3; s++)
                bad += check_case(dbl, ta, tb, sizes[im], sizes[in], sizes[ik], ab[s][0], ab[s][1], 0);
        /* beta == 0 must ignore NaNs already in C. */
        bad += check_case(dbl, ta, tb, 5, 7, 3, 1, 0, 1);
        /* Bigger than the naive fallback's k-block and the libraries'
         * small-matrix paths; MLP-like shapes. */
        bad += check_case(dbl, ta, tb, 65, 33, 300, 1, 0, 0);
        bad += check_case(dbl, ta, tb, 128, 100, 784, 1, 1, 0);
      }
  /* Aᵀ·B with rows of A and/or B a multiple of 2 KiB apart: on AVX2 the
   * oneDNN path copies them to another stride (gemm.c, sgemm_tn_padded);
   * every beta, NaNs in C with beta 0, the rows' padding untouched */
  static const int64_t lds[3][2] = {{512, 0}, {0, 1024}, {1024, 512}};
  for (int l = 0; l < 3; l++)
    for (size_t s = 0; s < 3; s++) {
      bad += check_case_ld(0, 1, 0, 70, 65, 130, ab[s][0], ab[s][1], 0, lds[l][0], lds[l][1]);
      bad += check_case_ld(0, 1, 0, 64, 100, 257, 1, 0, 1, lds[l][0], lds[l][1]);
    }
  KT_EQ_INT(bad, 0);
}

/* In a child: select `lib` through KILN_GEMM, check it was selected (or
 * that it really is unavailable), run every case. */
static int child_run(const char *lib, const char *soname) {
  setenv("KILN_GEMM", lib, 1);
  kiln_config_load(); /* read again: the parent may have loaded it before the change */
  kiln_gemm_init(2);
  const char *got = kiln_gemm_library();
  fprintf(stderr, "  [%s] kiln_gemm_library() = %s\n", lib, got);
  if (strncmp(got, lib, strlen(lib)) != 0) {
    void *h = soname ? dlopen(soname, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h) {
      KT_FAIL("KILN_GEMM=%s: %s is loadable but kiln chose %s", lib, soname, got);
      return 1;
    }
    fprintf(stderr, "  [%s] not installed: skipped\n", lib);
    return SKIP_CODE;
  }
  run_all_cases();
  kiln_gemm_init(1); /* changing the thread count later must keep results right */
  KT_EQ_INT(check_case(0, 0, 1, 128, 64, 200, 1, 0, 0), 0);
  return kt_failed_checks ? 1 : 0;
}

static void run_library(const char *lib, const char *soname) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(child_run(lib, soname)); /* _exit: the libraries' pools need no teardown */
  int st = 0;
  KT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  KT_CHECK_MSG(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == SKIP_CODE), "%s: child status %d", lib,
               st);
}

KT_TEST(naive_matches_double_reference) { run_library("naive", NULL); }
KT_TEST(openblas_matches_double_reference) { run_library("openblas", "libopenblas.so.0"); }
KT_TEST(onednn_matches_double_reference) { run_library("onednn", "libdnnl.so.2"); }

KT_TEST(default_library_is_described) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("KILN_GEMM");
    kiln_config_load();
    const char *d = kiln_gemm_library();
    fprintf(stderr, "  default: %s\n", d);
    int ok = d && (!strncmp(d, "onednn", 6) || !strncmp(d, "openblas", 8) || !strcmp(d, "naive"));
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 0, 1, 1, 1}, c[4];
    kiln_gemm_sgemm(0, 0, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2); /* [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] */
    ok = ok && c[0] == 4 && c[1] == 5 && c[2] == 10 && c[3] == 11;
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  KT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* bf16: kiln's vdpbf16ps kernel (where the CPU has AVX512_BF16) and the
 * KILN_BF16 path of kiln_gemm_other, against f64 sums of the same bf16
 * products (exact in f32: only the order of the f32 sums differs). Odd
 * sizes exercise the edge tiles and the zero-padded odd K. */
static uint16_t to_bf16(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* mode 0: kiln_gemm_other (the path KILN_GEMM_BF16 picks), 1: the kernel
 * into f32 C, 2: the kernel into bf16 C */
static int check_bf16(int mode, int ta, int tb, int64_t m, int64_t n, int64_t k) {
  int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ar = ta ? k : m, br = tb ? n : k, ldc = n + 2;
  uint16_t *A = malloc((size_t)(ar * lda + 1) * 2), *B = malloc((size_t)(br * ldb + 1) * 2);
  float *C = malloc((size_t)(m * ldc + 1) * 4);
  uint16_t *Ch = malloc((size_t)(m * ldc + 1) * 2);
  for (int64_t i = 0; i < ar * lda; i++) A[i] = to_bf16(next_val());
  for (int64_t i = 0; i < br * ldb; i++) B[i] = to_bf16(next_val());
  for (int64_t i = 0; i < m * ldc; i++) C[i] = -7, Ch[i] = 0x7777; /* the gaps between rows stay */
  int bad = 0;
  if (mode == 1) KT_EQ_INT(kiln_gemm_bf16(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, 0), 0);
  else if (mode == 2) KT_EQ_INT(kiln_gemm_bf16(ta, tb, m, n, k, A, lda, B, ldb, Ch, ldc, 1), 0);
  else kiln_gemm_other(KILN_BF16, ta, tb, m, n, k, A, lda, B, ldb, Ch, ldc);
  for (int64_t i = 0; i < m && !bad; i++) {
    for (int64_t j = n; j < ldc && !bad; j++)
      if (mode == 1 ? C[i * ldc + j] != -7 : Ch[i * ldc + j] != 0x7777) {
        KT_FAIL("bf16 mode %d %lldx%lldx%lld: wrote C[%lld][%lld], past the row", mode, (long long)m, (long long)n,
                (long long)k, (long long)i, (long long)j);
        bad = 1;
      }
    for (int64_t j = 0; j < n && !bad; j++) {
      double s = 0, mag = 0;
      for (int64_t q = 0; q < k; q++) {
        double p = from_bf16(A[ta ? q * lda + i : i * lda + q]) * from_bf16(B[tb ? j * ldb + q : q * ldb + j]);
        s += p, mag += fabs(p);
      }
      double got = mode == 1 ? C[i * ldc + j] : from_bf16(Ch[i * ldc + j]);
      /* f32 sums (their error grows with K); bf16 output: one rounding more */
      double tol = mode == 1 ? 1e-6 * mag * (1.0 + (double)k / 256) + 1e-30 : mag / 256 + 1e-30;
      if (fabs(got - s) > tol) {
        KT_FAIL("bf16 mode %d ta=%d tb=%d %lldx%lldx%lld: C[%lld][%lld] = %.9g, want %.9g", mode, ta, tb,
                (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, got, s);
        bad = 1;
      }
    }
  }
  free(A), free(B), free(C), free(Ch);
  return bad;
}

/* vdpbf16ps treats subnormal inputs and results as zero: a 40-term dot of
 * 1e-39 (a subnormal bf16) by 1e5 came out 0 (ref: 4.04e-33), tiny products
 * (1e-20 x 1e-20, 1e-40 each) summed to 0 (ref: 4.04e-39). Such tiles are
 * computed exactly (gemm_bf16.c, exact_tile): against f64 sums of the same
 * products, with an absolute floor of half f32's smallest subnormal per
 * product (f32 rounds each subnormal product) or bf16's smallest.
 * shape 0: every value tiny; 1: one tiny row of A among normal ones in a
 * GEMM of several tiles; scale: the values of A times 2^-a, of B 2^-b. */
static int check_bf16_tiny(int mode, int ta, int tb, int64_t m, int64_t n, int64_t k, int sa, int sb, int shape) {
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  uint16_t *A = malloc((size_t)(m * k) * 2), *B = malloc((size_t)(k * n) * 2);
  float *C = malloc((size_t)(m * n) * 4), *C0 = malloc((size_t)(m * n) * 4);
  uint16_t *Ch = malloc((size_t)(m * n) * 2);
  for (int64_t i = 0; i < m; i++)
    for (int64_t q = 0; q < k; q++) {
      int tiny = shape == 0 || i == m / 2;
      A[ta ? q * lda + i : i * lda + q] = to_bf16(ldexp(next_val(), tiny ? -sa : 0));
    }
  for (int64_t i = 0; i < k * n; i++) B[i] = to_bf16(ldexp(next_val(), shape == 0 ? -sb : 0));
  for (int64_t i = 0; i < m * n; i++) C0[i] = (float)next_val(), C[i] = C0[i];
  if (mode == 1) KT_EQ_INT(kiln_gemm_bf16(ta, tb, m, n, k, A, lda, B, ldb, C, n, 0), 0);
  else if (mode == 2) KT_EQ_INT(kiln_gemm_bf16(ta, tb, m, n, k, A, lda, B, ldb, Ch, n, 1), 0);
  else if (mode == 3) KT_EQ_INT(kiln_gemm_bf16_upd(ta, tb, m, n, k, A, lda, B, ldb, C, n, C, -0.5f), 0); /* in place */
  else if (mode == 4) kiln_gemm_other(KILN_BF16, ta, tb, m, n, k, A, lda, B, ldb, Ch, n); /* the path chosen */
  else kiln_gemm_bf16_update(ta, tb, m, n, k, A, lda, B, ldb, C, n, C, -0.5f);
  int bad = 0;
  for (int64_t i = 0; i < m && !bad; i++)
    for (int64_t j = 0; j < n && !bad; j++) {
      double s = 0, mag = 0;
      for (int64_t q = 0; q < k; q++) {
        double p = from_bf16(A[ta ? q * lda + i : i * lda + q]) * from_bf16(B[tb ? j * ldb + q : q * ldb + j]);
        s += p, mag += fabs(p);
      }
      int c16 = mode == 2 || mode == 4, upd = mode == 3 || mode == 5;
      double got = c16 ? from_bf16(Ch[i * n + j]) : C[i * n + j], want = s;
      /* a subnormal f32 product is rounded to a multiple of 2^-149: up to half of that per product */
      double floor32 = ldexp((double)k + 1, -149);
      double tol = c16 ? mag / 256 + ldexp(1, -133) : 1e-6 * mag * (1.0 + (double)k / 256) + floor32;
      if (upd) {
        want = C0[i * n + j] + from_bf16(to_bf16(s)) * -0.5;
        tol = mag / 256 + 1e-6 * fabs(want) + ldexp(1, -133);
      }
      if (fabs(got - want) > tol) {
        KT_FAIL("bf16 tiny mode %d ta=%d tb=%d %lldx%lldx%lld 2^-%d x 2^-%d shape %d: C[%lld][%lld] = %.9g, want %.9g (tol %g)",
                mode, ta, tb, (long long)m, (long long)n, (long long)k, sa, sb, shape, (long long)i, (long long)j,
                got, want, tol);
        bad = 1;
      }
    }
  free(A), free(B), free(C), free(C0), free(Ch);
  return bad;
}

static void bf16_subnormals(void) {
  /* 2^-133..: subnormal bf16 inputs; 2^-66 x 2^-66: normal inputs, subnormal products; 2^-60 x 2^-60: normal
   * products whose partial sums may not be; the shapes span several MR x NR tiles and an odd K */
  static const int scales[4][2] = {{133, 0}, {66, 66}, {60, 60}, {126, 3}};
  int64_t before = kiln_counter_value("Bf16GemmExactTiles");
  for (int s = 0; s < 4; s++)
    for (int mode = 1; mode <= 3; mode++)
      for (int t = 0; t < 4; t++) {
        check_bf16_tiny(mode, t & 1, t >> 1, 13, 37, 41, scales[s][0], scales[s][1], 0);
        check_bf16_tiny(mode, t & 1, t >> 1, 100, 70, 64, scales[s][0], scales[s][1], 1);
      }
  KT_CHECK(kiln_counter_value("Bf16GemmExactTiles") > before);
  /* values of ordinary size never leave the kernel */
  before = kiln_counter_value("Bf16GemmExactTiles");
  for (int t = 0; t < 4; t++) check_bf16(1, t & 1, t >> 1, 100, 70, 801);
  KT_EQ_INT(kiln_counter_value("Bf16GemmExactTiles"), before);
}

static int child_bf16(void) {
  /* edge tiles, odd K (zero-padded), K = 0, a transposed B of whole 16 x 16
   * word blocks and a rest (K 130), K past one block (2048), full panels of
   * A and B packed 16 k-pairs at a time with a rest (K 70, 66) in several
   * column blocks (N past 512) */
  const int64_t sizes[][3] = {{1, 1, 1},    {13, 37, 15},  {12, 32, 384}, {100, 70, 801},
                              {130, 1100, 9}, {5, 3, 0},   {40, 96, 130}, {25, 64, 32},
                              {7, 33, 4101}, {50, 64, 4100}, {37, 1060, 70}, {24, 544, 66}};
  const int ns = (int)(sizeof sizes / sizeof sizes[0]);
  int have = kiln_gemm_bf16_available();
  fprintf(stderr, "  bf16 kernel (avx512_bf16): %s; preferred here: %s\n", have ? "available" : "not on this CPU",
          kiln_gemm_bf16_preferred() ? "yes" : "no");
  if (!have) { /* refused, C untouched */
    uint16_t a = 0x3f80;
    float c = 7;
    KT_EQ_INT(kiln_gemm_bf16(0, 0, 1, 1, 1, &a, 1, &a, 1, &c, 1, 0), -1);
    KT_NEAR(c, 7, 0);
  }
  kiln_config cfg = *kiln_cfg();
  /* kiln_gemm_other by the library's sgemm, by the kernel, by oneDNN's bf16
   * GEMM (AMX where the CPU has it; without AMX oneDNN may refuse, and the
   * sgemm path runs: the values must be right either way) */
  static const char *const paths[3] = {"library", "kernel", "onednn"};
  int onednn = !strncmp(kiln_gemm_library(), "onednn", 6);
  for (int path = 0; path < 3; path++) {
    cfg.gemm_bf16 = paths[path];
    kiln_config_set(&cfg);
    KT_EQ_INT(kiln_gemm_bf16_preferred(), path == 1 && have);
    KT_EQ_INT(kiln_gemm_bf16_onednn_wanted(), path == 2 && onednn);
    for (int s = 0; s < ns; s++)
      for (int t = 0; t < 4; t++) check_bf16(0, t & 1, t >> 1, sizes[s][0], sizes[s][1], sizes[s][2]);
  }
  /* oneDNN's bf16 GEMM flushes subnormals as vdpbf16ps does: operands that
   * could meet one go through f32 sums (kiln_gemm_bf16_flush_exact) */
  static const int tiny[4][2] = {{133, 0}, {66, 66}, {60, 60}, {126, 3}};
  for (int sc = 0; sc < 4; sc++)
    for (int mode = 4; mode <= 5; mode++)
      for (int t = 0; t < 4; t++) {
        check_bf16_tiny(mode, t & 1, t >> 1, 13, 37, 41, tiny[sc][0], tiny[sc][1], 0);
        check_bf16_tiny(mode, t & 1, t >> 1, 100, 70, 64, tiny[sc][0], tiny[sc][1], 1);
      }
  if (strstr(kiln_cpu_features(), "amx-bf16") && onednn) { /* taken where AMX is, refused when not exact */
    uint16_t a[64], b[64];
    float c[64];
    for (int i = 0; i < 64; i++) a[i] = 0x3f80, b[i] = 0x4000; /* 1, 2 */
    KT_EQ_INT(kiln_gemm_bf16_onednn(0, 0, 8, 8, 8, a, 8, b, 8, c, 8), 0);
    KT_NEAR(c[63], 16, 0);
    a[5] = 0x0001; /* a subnormal */
    KT_EQ_INT(kiln_gemm_bf16_onednn(0, 0, 8, 8, 8, a, 8, b, 8, c, 8), -1);
  }
  cfg.gemm_bf16 = NULL;
  kiln_config_set(&cfg);
  KT_EQ_INT(kiln_gemm_bf16_onednn_wanted(), onednn && strstr(kiln_cpu_features(), "amx-bf16") != NULL);
  if (have)
    for (int s = 0; s < ns; s++)
      for (int t = 0; t < 4; t++)
        for (int mode = 1; mode <= 2; mode++) check_bf16(mode, t & 1, t >> 1, sizes[s][0], sizes[s][1], sizes[s][2]);
  if (have) bf16_subnormals();
  return kt_failed_checks ? 1 : 0;
}

/* kiln_gemm_bf16_flush_exact against its rule (gemm.h): 0 when an operand
 * holds a subnormal, else whether the smallest exponent fields sum to at
 * least 142. A (m x k, stored k x m when transposed) and B with rows longer
 * than their values (the padding holds subnormals, which must be ignored),
 * rows long enough for the AVX-512 scan's vector loop and its tail. */
static int flush_case(int ta, int tb, int a_field, int b_field, uint16_t a_odd, uint16_t b_odd) {
  const int64_t m = 40, n = 37, k = 33;
  int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n, lda = ac + 3, ldb = bc + 5;
  uint16_t *a = malloc((size_t)(ar * lda) * 2), *b = malloc((size_t)(br * ldb) * 2);
  for (int64_t i = 0; i < ar * lda; i++) a[i] = i % lda >= ac ? 0x0001 : (uint16_t)(a_field << 7 | (i % 5));
  for (int64_t i = 0; i < br * ldb; i++) b[i] = i % ldb >= bc ? 0x8001 : (uint16_t)(0x8000 | b_field << 7 | (i % 3));
  if (a_odd != 0xffff) a[(ar - 1) * lda + ac - 1] = a_odd; /* the last value stored */
  if (b_odd != 0xffff) b[(br - 1) * ldb + bc - 1] = b_odd;
  int got = kiln_gemm_bf16_flush_exact(ta, tb, m, n, k, a, lda, b, ldb);
  free(a), free(b);
  return got;
}

KT_TEST(bf16_flush_exact_rule) {
  for (int t = 0; t < 4; t++) {
    int ta = t & 1, tb = t >> 1;
    KT_EQ_INT(flush_case(ta, tb, 127, 127, 0xffff, 0xffff), 1);     /* ordinary values */
    KT_EQ_INT(flush_case(ta, tb, 127, 127, 0x0003, 0xffff), 0);     /* a subnormal in A, its last value */
    KT_EQ_INT(flush_case(ta, tb, 127, 127, 0xffff, 0x8002), 0);     /* a negative subnormal in B */
    KT_EQ_INT(flush_case(ta, tb, 127, 127, 71 << 7, 71 << 7), 1);   /* fields 71 + 71 = 142 */
    KT_EQ_INT(flush_case(ta, tb, 127, 127, 71 << 7, 70 << 7), 0);   /* 71 + 70 = 141 */
    KT_EQ_INT(flush_case(ta, tb, 100, 42, 0xffff, 0xffff), 1);      /* every value small, the sum 142 */
    KT_EQ_INT(flush_case(ta, tb, 100, 41, 0xffff, 0xffff), 0);
    KT_EQ_INT(flush_case(ta, tb, 0, 127, 0xffff, 0xffff), 0);        /* A: zeros and subnormals (field 0) */
    KT_EQ_INT(flush_case(ta, tb, 127, 127, 0x7f80, 0xffc0), 1);     /* an infinity, a NaN */
    KT_EQ_INT(flush_case(ta, tb, 127, 127, 0x8000, 0xffff), 1);     /* -0 */
  }
}

/* In a child, as the libraries' cases: the GEMM library the conversion
 * path loads keeps its thread pool to the end, and LeakSanitizer's exit
 * scan of a pool thread's dynamic TLS (a dlopen'ed library's) crashes with
 * this toolchain ("Tracer caught signal 11"); _exit skips it. */
KT_TEST(bf16_gemm_matches_products_of_rounded_inputs) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(child_bf16());
  int st = 0;
  KT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  KT_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "bf16: child status %d", st);
}

KT_MAIN(KT_CASE(naive_matches_double_reference), KT_CASE(openblas_matches_double_reference),
        KT_CASE(onednn_matches_double_reference), KT_CASE(default_library_is_described),
        KT_CASE(bf16_gemm_matches_products_of_rounded_inputs), KT_CASE(bf16_flush_exact_rule))
