/* GEMM through a tuned library chosen by measurement (see docs/gemm.md).
 * Row-major. C = alpha * op(A) op(B) + beta * C, op = transpose if trans.
 * Thread-safe. Threads: the library uses kiln_gemm_set_threads() threads. */
#ifndef KILN_BACKENDS_CPU_GEMM_H
#define KILN_BACKENDS_CPU_GEMM_H

#include <stdint.h>

/* Load the library (idempotent). Preference: $KILN_GEMM ("onednn",
 * "openblas", "naive"), else the default order. Returns 0 on success; the
 * naive fallback always works. */
int kiln_gemm_init(int num_threads);
const char *kiln_gemm_library(void); /* "onednn 2.6.3", "openblas ...", "naive" */
void kiln_gemm_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* Run the library's first GEMMs now, on the caller's thread, if they have
 * not run yet: oneDNN generates its kernels then (about 30 ms) and
 * registers C++ destructors for them, which a process exiting with a step
 * still executing would run under a worker (base/exit.h); the exit drain is
 * armed after them. Called where the cpu backend is made (kiln_init), with
 * the library's other one-time set-up. Cheap once done. */
void kiln_gemm_warm(void);
void kiln_gemm_dgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                     int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
/* C = op(A) op(B) (alpha 1, beta 0) for dt bf16 or f16 (packed to f32 for
 * the library's sgemm, rounded to nearest even into C), i32 or i64
 * (accumulated in dt, wrapping). gemm_convert.c. */
void kiln_gemm_other(int dt, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                     const void *b, int64_t ldb, void *c, int64_t ldc);
/* bf16/f16 op(A) op(B) as f32 sums into dense fc (m x n): the library's
 * sgemm on copies widened to f32 (0), or -1 without memory for them; and one
 * element (i, j) of it as f32 sums in order, which needs no memory. */
int kiln_gemm_half_products(int dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                            const uint16_t *b, int64_t ldb, float *fc);
float kiln_gemm_half_dot(int dt, int ta, int tb, int64_t i, int64_t j, int64_t k, const uint16_t *a, int64_t lda,
                         const uint16_t *b, int64_t ldb);
/* f32 C = C0 + alpha·bf16(op(A) op(B)) for bf16 A and B, by kiln_gemm_bf16_upd
 * where preferred, else the library's sgemm on widened copies; C0 may be C */
void kiln_gemm_bf16_update(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                           int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc, const float *c0,
                           float alpha);
/* C = op(A) op(B) for bf16 A and B with f32 accumulation, by kiln's
 * AVX512_BF16 (vdpbf16ps) kernel: C in f32 (c_bf16 0) or rounded to nearest
 * even into bf16 (c_bf16 1), leading dimension ldc. Returns 0 when done, -1
 * when this CPU or compiler has no such kernel or memory for the packed
 * panels ran out (C untouched). gemm_bf16.c; docs/gemm.md says when it is
 * used. */
int kiln_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                   const uint16_t *b, int64_t ldb, void *c, int64_t ldc, int c_bf16);
/* The same into f32 C = C0 + alpha·bf16(op(A) op(B)): the product rounded to
 * bf16, then multiplied and added in f32 (an f32 weight's update from a bf16
 * gradient, fused: schedule_fuse.c). C0 has C's layout and may be C. */
int kiln_gemm_bf16_upd(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                       const uint16_t *b, int64_t ldb, float *c, int64_t ldc, const float *c0, float alpha);
int kiln_gemm_bf16_available(void); /* 1: kiln_gemm_bf16 runs on this CPU */
/* 1: bf16 products go to oneDNN's dnnl_gemm_bf16bf16f32 (AMX) before the
 * paths below: the CPU has amx-bf16, or KILN_GEMM_BF16=onednn (gemm.c) */
int kiln_gemm_bf16_onednn_wanted(void);
/* C (f32, ldc) = op(A) op(B) for bf16 A and B by dnnl_gemm_bf16bf16f32
 * where wanted and exact (no subnormal on the way: flush_exact): 0, or -1
 * (C untouched) when not taken */
int kiln_gemm_bf16_onednn(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                          int64_t lda, const uint16_t *b, int64_t ldb, float *c, int64_t ldc);
/* 1 when bf16 dot products that treat subnormal inputs and results as zero
 * (vdpbf16ps, AMX) give what f32 arithmetic gives for op(A) op(B): no
 * subnormal input, every nonzero product and partial sum normal. Reads A
 * and B once. gemm_bf16.c. */
int kiln_gemm_bf16_flush_exact(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                               int64_t lda, const uint16_t *b, int64_t ldb);
/* 1: bf16 GEMMs go to kiln_gemm_bf16 rather than the library's sgemm on
 * widened copies (this CPU's vdpbf16ps is the faster, or the library is the
 * naive loops; never where oneDNN's bf16 GEMM is wanted;
 * KILN_GEMM_BF16=kernel|library|onednn overrides) */
int kiln_gemm_bf16_preferred(void);

#endif
