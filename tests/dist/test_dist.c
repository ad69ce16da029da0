/* The distributed tests (docs/distributed.md), run by run.sh alone (a world
 * of 1, no launcher) and under `mpirun -np 2` and `-np 4 --oversubscribe`.
 * Every rank checks its own results; mpirun fails if any rank fails.
 *
 *  - collectives (all_reduce SUM/MEAN/MAX, broadcast, all_gather on axes 0
 *    and 1) on f32, f64, i32 and i64, on the cpu and ref backends, against
 *    the result computed locally from every rank's (deterministic) input;
 *  - a collective overlapped with the kernels after it, against the same;
 *  - their gradients (the rules of kiln/dist.h) against the closed form;
 *  - data parallel: 3 SGD steps of a small MLP on N ranks, the loader
 *    sharded by rank with per-rank batch B/N, against the same steps of one
 *    model with batch B computed in the same process (no collectives);
 *  - alone: a world of 1 without mpirun never loads MPI (/proc/self/maps). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/spans.h"
#include "dist/dist.h"
#include "kiln/kiln.h"
#include "kt.h"

static int R, W; /* this rank, the world */

/* Rank r's element i: distinct per rank and element, exact in every dtype. */
static double val(int r, int64_t i) { return (double)((r * 7 + (int)i * 3) % 11) - 4.0 + 0.25 * r; }

static void start(const char *backend) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK_MSG(kiln_init(&(kiln_options){.backend = backend}) == KILN_OK, "kiln_init(%s): %s", backend,
               kiln_last_error());
}

static kiln_tensor input_of(int r, kiln_dtype dt, int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= shape[d];
  double *v = malloc(sizeof *v * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = dt == KILN_I32 || dt == KILN_I64 ? floor(val(r, i)) : val(r, i);
  kiln_tensor t = kiln_cast(kiln_from_host(v, KILN_F64, rank, shape), dt);
  free(v);
  return t;
}

static void read_f64(kiln_tensor t, double *out, int64_t n) {
  kiln_tensor d = kiln_cast(t, KILN_F64);
  KT_CHECK_MSG(kiln_to_host(d, out, sizeof *out * (size_t)n) == KILN_OK, "read: %s", kiln_last_error());
}

/* One check of n values against want, naming what and the backend. */
static void expect(const char *what, const char *be, kiln_dtype dt, const double *got, const double *want, int64_t n) {
  double tol = dt == KILN_F32 ? 1e-5 : 1e-12;
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
      KT_FAIL("rank %d/%d %s %s %s: element %lld is %.9g, expected %.9g", R, W, be, kiln_dtype_name(dt), what,
              (long long)i, got[i], want[i]);
      return;
    }
}

static void collectives_on(const char *be, kiln_dtype dt) {
  enum { A = 3, B = 4, N = A * B };
  const int64_t shape[2] = {A, B};
  double got[N * 8], want[N * 8];
  double in[8][N];
  for (int r = 0; r < W; r++)
    for (int i = 0; i < N; i++) in[r][i] = dt == KILN_I32 || dt == KILN_I64 ? floor(val(r, i)) : val(r, i);
  kiln_tensor x = input_of(R, dt, 2, shape);
  /* all_reduce SUM fused between elementwise work: (x*2+1) summed, then +1 */
  kiln_tensor s = kiln_add_c(kiln_all_reduce(kiln_add_c(kiln_mul_c(x, 2), 1), KILN_REDUCE_SUM), 1);
  read_f64(s, got, N);
  for (int i = 0; i < N; i++) {
    want[i] = 1;
    for (int r = 0; r < W; r++) want[i] += in[r][i] * 2 + 1;
  }
  expect("all_reduce SUM", be, dt, got, want, N);
  read_f64(kiln_all_reduce(x, KILN_REDUCE_MAX), got, N);
  for (int i = 0; i < N; i++) {
    want[i] = in[0][i];
    for (int r = 1; r < W; r++) want[i] = fmax(want[i], in[r][i]);
  }
  expect("all_reduce MAX", be, dt, got, want, N);
  if (dt == KILN_F32 || dt == KILN_F64) {
    read_f64(kiln_all_reduce(x, KILN_REDUCE_MEAN), got, N);
    for (int i = 0; i < N; i++) {
      want[i] = 0;
      for (int r = 0; r < W; r++) want[i] += in[r][i];
      want[i] /= W;
    }
    expect("all_reduce MEAN", be, dt, got, want, N);
  }
  read_f64(kiln_broadcast(x, W - 1), got, N);
  expect("broadcast from the last rank", be, dt, got, in[W - 1], N);
  read_f64(kiln_all_gather(x, 0), got, N * W); /* [W*A, B]: rank blocks */
  for (int r = 0; r < W; r++) memcpy(want + r * N, in[r], sizeof in[r]);
  expect("all_gather axis 0", be, dt, got, want, N * W);
  read_f64(kiln_all_gather(kiln_mul_c(x, 1), 1), got, N * W); /* [A, W*B] */
  for (int a = 0; a < A; a++)
    for (int r = 0; r < W; r++)
      for (int b = 0; b < B; b++) want[(a * W + r) * B + b] = in[r][a * B + b];
  expect("all_gather axis 1", be, dt, got, want, N * W);
  kiln_mark_step();
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d %s %s: %s", R, be, kiln_dtype_name(dt), kiln_last_error());
}

KT_TEST(collectives_match_local_reference) {
  const char *bes[2] = {"cpu", "ref"};
  const kiln_dtype dts[4] = {KILN_F32, KILN_F64, KILN_I32, KILN_I64};
  for (int b = 0; b < 2; b++) {
    start(bes[b]);
    for (int d = 0; d < 4; d++) collectives_on(bes[b], dts[d]);
  }
}

/* all_reduce SUM of u8 and i8 wraps modulo 2^8, as their arithmetic does
 * (NumPy, PyTorch): Open MPI's MPI_SUM of 8-bit integers saturates from 16
 * elements on (200 + 100 gave 255 for u8, 100 + 100 gave 127 for i8). 100
 * elements, rank r's element i (200 + 37 r + 11 i) mod 256 as bytes. */
KT_TEST(all_reduce_sum_of_bytes_wraps) {
  enum { N = 100 };
  const char *bes[2] = {"cpu", "ref"};
  const kiln_dtype dts[2] = {KILN_U8, KILN_I8};
  const int64_t n = N;
  for (int b = 0; b < 2; b++) {
    start(bes[b]);
    for (int d = 0; d < 2; d++) {
      uint8_t mine[N], got[N], want[N], hi[N];
      for (int i = 0; i < N; i++) {
        mine[i] = (uint8_t)(200 + 37 * R + 11 * i);
        want[i] = 0;
        hi[i] = 0;
        for (int r = 0; r < W; r++) {
          uint8_t v = (uint8_t)(200 + 37 * r + 11 * i);
          want[i] = (uint8_t)(want[i] + v);
          int bigger = dts[d] == KILN_U8 ? v > hi[i] : (int8_t)v > (int8_t)hi[i];
          if (r == 0 || bigger) hi[i] = v;
        }
      }
      kiln_tensor x = kiln_from_host(mine, dts[d], 1, &n);
      KT_CHECK(kiln_to_host(kiln_all_reduce(x, KILN_REDUCE_SUM), got, sizeof got) == KILN_OK);
      for (int i = 0; i < N; i++)
        if (got[i] != want[i]) {
          KT_FAIL("rank %d/%d %s %s all_reduce SUM: element %d is %d, expected %d", R, W, bes[b],
                  kiln_dtype_name(dts[d]), i, dts[d] == KILN_U8 ? got[i] : (int8_t)got[i],
                  dts[d] == KILN_U8 ? want[i] : (int8_t)want[i]);
          break;
        }
      KT_CHECK(kiln_to_host(kiln_all_reduce(x, KILN_REDUCE_MAX), got, sizeof got) == KILN_OK);
      KT_CHECK_MSG(!memcmp(got, hi, sizeof got), "rank %d/%d %s %s all_reduce MAX", R, W, bes[b],
                   kiln_dtype_name(dts[d]));
      kiln_mark_step();
    }
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d %s: %s", R, bes[b], kiln_last_error());
  }
}

/* all_reduce MAX of floats is kiln's `maximum` folded over the ranks (as
 * torch.maximum): a NaN on any one rank gives NaN on every rank, and +0.0
 * beats -0.0, whichever rank holds which. MPI_MAX (`a > b ? a : b`) kept or
 * dropped the NaN by operand order: max over (NaN on rank 0, 2 on rank 1)
 * was 2 on both ranks. Element e < W: NaN on rank e only; then +0.0 on the
 * last rank (others -0.0), +0.0 on rank 0, -0.0 everywhere. */
KT_TEST(all_reduce_max_nan_and_signed_zero) {
  const char *bes[2] = {"cpu", "ref"};
  const kiln_dtype dts[2] = {KILN_F32, KILN_F64};
  enum { M = 8 + 3 };
  const int64_t n = W + 3;
  double in[M], got[M];
  for (int e = 0; e < W; e++) in[e] = e == R ? NAN : 2.0 + e - R;
  in[W] = R == W - 1 ? 0.0 : -0.0;
  in[W + 1] = R == 0 ? 0.0 : -0.0;
  in[W + 2] = -0.0;
  for (int b = 0; b < 2; b++) {
    start(bes[b]);
    for (int d = 0; d < 2; d++) {
      read_f64(kiln_all_reduce(kiln_cast(kiln_from_host(in, KILN_F64, 1, &n), dts[d]), KILN_REDUCE_MAX), got, n);
      for (int e = 0; e < W; e++)
        KT_CHECK_MSG(isnan(got[e]), "rank %d/%d %s %s: max of a NaN on rank %d and numbers elsewhere is %g", R, W,
                     bes[b], kiln_dtype_name(dts[d]), e, got[e]);
      for (int e = W; e < W + 3; e++)
        KT_CHECK_MSG(got[e] == 0 && !!signbit(got[e]) == (e == W + 2), "rank %d/%d %s %s: element %d is %g", R, W,
                     bes[b], kiln_dtype_name(dts[d]), e, got[e]);
      kiln_mark_step();
    }
  }
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d: %s", R, kiln_last_error());
}

/* Collectives (all_reduce, all_gather, broadcast) on a dimension marked
 * dynamic (docs/dynamic-shapes.md): one compile on the cpu backend for
 * every size of it, each later size planned, and every size's results
 * against the local reference (ref compiles nothing: its values only). */
static void collectives_at_sizes(const char *be) {
  static const int64_t sizes[] = {37, 2, 5, 16, 61};
  enum { B = 4, NS = sizeof sizes / sizeof sizes[0] };
  int64_t c0 = kiln_counter_value("UncachedCompile"), p0 = kiln_counter_value("DynamicPlan");
  for (int k = 0; k < NS; k++) {
    int64_t T = sizes[k], n = T * B, shape[2] = {T, B};
    double *got = malloc(sizeof *got * (size_t)(n * W)), *want = malloc(sizeof *want * (size_t)(n * W));
    float *f = malloc(sizeof *f * (size_t)(n * W));
    for (int64_t i = 0; i < n; i++) f[i] = (float)val(R, i);
    kiln_tensor x = kiln_dynamic(kiln_from_host(f, KILN_F32, 2, shape), 0);
    kiln_tensor s = kiln_keep(kiln_add_c(kiln_all_reduce(kiln_add_c(kiln_mul_c(x, 2), 1), KILN_REDUCE_SUM), 1));
    kiln_tensor g = kiln_keep(kiln_all_gather(kiln_neg(x), 0)); /* [W*T, B] */
    kiln_tensor bc = kiln_keep(kiln_broadcast(kiln_mul_c(x, 3), W - 1));
    kiln_mark_step(); /* the one graph of the step; the reads below copy what it computed */
    KT_CHECK(kiln_to_host(s, f, sizeof *f * (size_t)n) == KILN_OK);
    for (int64_t i = 0; i < n; i++) got[i] = f[i];
    for (int64_t i = 0; i < n; i++) {
      want[i] = 1;
      for (int r = 0; r < W; r++) want[i] += (float)val(r, i) * 2 + 1;
    }
    char what[64];
    snprintf(what, sizeof what, "all_reduce SUM at T = %lld", (long long)T);
    expect(what, be, KILN_F32, got, want, n);
    KT_CHECK(kiln_to_host(g, f, sizeof *f * (size_t)(n * W)) == KILN_OK);
    for (int64_t i = 0; i < n * W; i++) got[i] = f[i];
    for (int r = 0; r < W; r++)
      for (int64_t i = 0; i < n; i++) want[r * n + i] = -(float)val(r, i);
    snprintf(what, sizeof what, "all_gather axis 0 at T = %lld", (long long)T);
    expect(what, be, KILN_F32, got, want, n * W);
    KT_CHECK(kiln_to_host(bc, f, sizeof *f * (size_t)n) == KILN_OK);
    for (int64_t i = 0; i < n; i++) got[i] = f[i], want[i] = 3 * (float)val(W - 1, i);
    snprintf(what, sizeof what, "broadcast from the last rank at T = %lld", (long long)T);
    expect(what, be, KILN_F32, got, want, n);
    kiln_release(s);
    kiln_release(g);
    kiln_release(bc);
    kiln_mark_step();
    free(got);
    free(want);
    free(f);
  }
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d %s: %s", R, be, kiln_last_error());
  if (!strcmp(be, "cpu")) {
    int64_t c = kiln_counter_value("UncachedCompile") - c0, p = kiln_counter_value("DynamicPlan") - p0;
    KT_CHECK_MSG(c == 1 && p == NS - 1, "rank %d: %lld compiles, %lld sizes planned (want 1, %d)", R, (long long)c,
                 (long long)p, NS - 1);
  }
}

KT_TEST(collectives_at_symbolic_sizes) {
  const char *bes[2] = {"cpu", "ref"};
  for (int b = 0; b < 2; b++) {
    start(bes[b]);
    collectives_at_sizes(bes[b]);
  }
}

/* The profile of the running session (ended here): in a world of several,
 * at least `want` collective events on the "kiln collectives" thread, named
 * "all_reduce f64 [48, 48] at .../test_dist.c:<line>", with their bytes
 * (the rank-divergence check's exchanges before the graph's first run are
 * collective events too, named for the check). */
static void expect_collective_events(int want, int64_t bytes) {
  kiln_prof_thread_events *th = NULL;
  int nth = 0, got = 0;
  uint64_t dropped = 0, t1 = 0;
  KT_CHECK(kiln_prof_session_end(&th, &nth, &dropped, &t1) == KILN_OK);
  for (int t = 0; t < nth; t++)
    for (uint32_t e = 0; e < th[t].n; e++) {
      const kiln_prof_event *ev = &th[t].ev[e];
      if (ev->kind != KILN_PROF_COLLECTIVE) continue;
      KT_CHECK_MSG(strcmp(th[t].name, "kiln collectives") == 0, "a collective event on thread %s", th[t].name);
      if (strncmp(ev->name, "rank divergence check", 21) == 0) continue;
      KT_CHECK_MSG(strncmp(ev->name, "all_reduce f64 [48, 48] at ", 27) == 0 && strstr(ev->name, "test_dist.c:"),
                   "collective event named %s", ev->name);
      KT_CHECK(ev->arg == bytes && ev->end_ns >= ev->begin_ns);
      got++;
    }
  kiln_prof_threads_free(th, nth);
  if (W > 1) KT_CHECK_MSG(got >= want, "rank %d: %d collective events, expected %d", R, got, want);
}

/* Overlap: r = all_reduce(x_r·w) is started, then w·w and (w·w)·w run while
 * it is in flight (their buffers must not reuse the bytes it reads or
 * writes), then y = r·((w·w)·w) waits for it. Against the value computed
 * here in double from every rank's x, on cpu (overlapped) and ref
 * (blocking); and the profiler's collective events. */
KT_TEST(overlapped_collective_matches_local_reference) {
  enum { n = 48 };
  const int64_t sh[2] = {n, n};
  static double xs[8][n * n], ws[n * n], t1[n * n], t2[n * n], t3[n * n], got[n * n];
  for (int r = 0; r < W; r++)
    for (int i = 0; i < n * n; i++) xs[r][i] = val(r, i) / 8;
  for (int i = 0; i < n * n; i++) ws[i] = (double)((i * 5) % 11) / 11 - 0.4;
  for (int i = 0; i < n; i++) /* t1 = sum_r x_r·w, t2 = w·w */
    for (int j = 0; j < n; j++) {
      double a1 = 0, a2 = 0;
      for (int k = 0; k < n; k++) {
        for (int r = 0; r < W; r++) a1 += xs[r][i * n + k] * ws[k * n + j];
        a2 += ws[i * n + k] * ws[k * n + j];
      }
      t1[i * n + j] = a1, t2[i * n + j] = a2;
    }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double a = 0;
      for (int k = 0; k < n; k++) a += t2[i * n + k] * ws[k * n + j];
      t3[i * n + j] = a;
    }
  const char *bes[2] = {"cpu", "ref"};
  for (int bi = 0; bi < 2; bi++) {
    start(bes[bi]);
    uint64_t t0 = 0;
    KT_CHECK(kiln_prof_session_begin(4096, &t0) == KILN_OK);
    for (int it = 0; it < 3; it++) { /* compiled once, then from the cache */
      kiln_tensor x = kiln_from_host(xs[R], KILN_F64, 2, sh), w = kiln_from_host(ws, KILN_F64, 2, sh);
      kiln_tensor r = kiln_all_reduce(kiln_matmul(x, w), KILN_REDUCE_SUM);
      kiln_tensor p3 = kiln_matmul(kiln_matmul(w, w), w);
      read_f64(kiln_matmul(r, p3), got, n * n);
      double want[n * n];
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
          double a = 0;
          for (int k = 0; k < n; k++) a += t1[i * n + k] * t3[k * n + j];
          want[i * n + j] = a;
        }
      expect("all_reduce overlapped with matmuls", bes[bi], KILN_F64, got, want, n * n);
      kiln_mark_step();
    }
    expect_collective_events(3, n * n * 8);
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d %s: %s", R, bes[bi], kiln_last_error());
  }
  /* the metrics: 3 all-reduces of n*n doubles at least, and in a world of
   * several the time in flight and the overlap line */
  KT_CHECK(kiln_counter_value("AllReduceCount") >= 3);
  KT_CHECK(kiln_counter_value("AllReduceBytes") >= 3 * n * n * 8);
  const char *rep = kiln_metrics_report();
  if (W > 1) {
    KT_CHECK_MSG(strstr(rep, "Metric: CollectiveTime") && strstr(rep, "Metric: CollectiveFlightTime"), "%s", rep);
    KT_CHECK_MSG(strstr(rep, "Collective overlap: ") != NULL, "%s", rep);
  }
}

/* grad of sum(c * op(w * x_r)) with c = 1 + element index (same on every
 * rank): all_reduce SUM: W c x_r; all_gather: W c[r block] x_r; broadcast
 * from root 0: W c x_0 on rank 0, 0 elsewhere. */
KT_TEST(collective_gradients) {
  start("cpu");
  enum { N = 6 };
  const int64_t shape[1] = {N};
  double ones[N], c[N * 8], got[N], want[N];
  for (int i = 0; i < N; i++) ones[i] = 1;
  for (int i = 0; i < N * 8; i++) c[i] = 1 + i;
  for (int k = 0; k < 3; k++) {
    kiln_tensor w = kiln_param(kiln_from_host(ones, KILN_F64, 1, shape));
    kiln_requires_grad(w);
    kiln_tensor y = kiln_mul(w, input_of(R, KILN_F64, 1, shape));
    y = k == 0 ? kiln_all_reduce(y, KILN_REDUCE_SUM) : k == 1 ? kiln_all_gather(y, 0) : kiln_broadcast(y, 0);
    int64_t yn = k == 1 ? N * W : N;
    kiln_tensor loss = kiln_sum(kiln_mul(y, kiln_from_host(c, KILN_F64, 1, &yn)), 0, NULL, false);
    KT_CHECK_MSG(kiln_backward(loss) == KILN_OK, "backward: %s", kiln_last_error());
    read_f64(kiln_grad(w), got, N);
    for (int i = 0; i < N; i++)
      want[i] = k == 0 ? W * c[i] * val(R, i) : k == 1 ? W * c[R * N + i] * val(R, i) : (R == 0 ? W * c[i] * val(0, i) : 0);
    expect(k == 0 ? "d all_reduce" : k == 1 ? "d all_gather" : "d broadcast", "cpu", KILN_F64, got, want, N);
    kiln_zero_grad(w);
    kiln_mark_step();
  }
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d: %s", R, kiln_last_error());
}

/* ───────────── data parallel vs one process ───────────── */

enum { NX = 64, DIN = 5, DH = 7, DOUT = 3, GB = 16, STEPS = 3 };

typedef struct mlp {
  kiln_tensor p[4]; /* w1 [DIN, DH], b1 [DH], w2 [DH, DOUT], b2 [DOUT] */
} mlp;

static mlp mlp_new(int seed_rank) {
  static const int64_t sh[4][2] = {{DIN, DH}, {DH, 0}, {DH, DOUT}, {DOUT, 0}};
  mlp m;
  for (int k = 0; k < 4; k++) {
    int rank = sh[k][1] ? 2 : 1;
    int64_t n = sh[k][0] * (sh[k][1] ? sh[k][1] : 1);
    double v[DIN * DH + DH * DOUT];
    /* a different init per rank: the broadcast must make them rank 0's */
    for (int64_t i = 0; i < n; i++) v[i] = 0.3 * sin(1.7 * (double)(i + 13 * k) + seed_rank);
    m.p[k] = kiln_param(kiln_cast(kiln_from_host(v, KILN_F64, rank, sh[k]), KILN_F32));
    kiln_requires_grad(m.p[k]);
  }
  return m;
}

/* mean over the batch of the cross-entropy (mask-weighted: none padded) */
static kiln_tensor mlp_loss(const mlp *m, const kiln_batch *b) {
  kiln_tensor h = kiln_relu(kiln_add(kiln_matmul(b->x, m->p[0]), m->p[1]));
  kiln_tensor logits = kiln_add(kiln_matmul(h, m->p[2]), m->p[3]);
  return kiln_cross_entropy(logits, b->y, -100, 0.0);
}

static void sgd(const mlp *m) {
  for (int k = 0; k < 4; k++) kiln_assign(m->p[k], kiln_sub(m->p[k], kiln_mul_c(kiln_grad(m->p[k]), 0.5)));
}

static void train(mlp *m, kiln_dataset *ds, int64_t batch, int shards, int rank, int ddp) {
  kiln_batcher *bt = NULL;
  kiln_batch_options o = {.batch_size = batch, .shuffle = true, .seed = 99, .drop_last = true,
                          .shard_count = shards, .shard_rank = rank};
  KT_CHECK_MSG(kiln_batcher_create(ds, &o, &bt) == KILN_OK, "batcher: %s", kiln_last_error());
  if (!bt) return;
  if (ddp) KT_CHECK(kiln_ddp_broadcast_params(4, m->p) == KILN_OK);
  kiln_mark_step();
  for (int s = 0; s < STEPS; s++) {
    kiln_batch b;
    KT_CHECK(kiln_batcher_next(bt, &b) == 1);
    KT_CHECK_MSG(kiln_backward(mlp_loss(m, &b)) == KILN_OK, "backward: %s", kiln_last_error());
    if (ddp) KT_CHECK(kiln_ddp_all_reduce_grads(4, m->p, 64 * 4) == KILN_OK); /* small buckets: several */
    sgd(m);
    for (int k = 0; k < 4; k++) kiln_zero_grad(m->p[k]);
    kiln_mark_step();
  }
  kiln_batcher_destroy(bt);
}

KT_TEST(data_parallel_matches_one_process) {
  start("cpu");
  static float x[NX * DIN];
  static int64_t y[NX];
  for (int i = 0; i < NX * DIN; i++) x[i] = (float)sin(0.37 * i);
  for (int i = 0; i < NX; i++) y[i] = i % DOUT;
  kiln_dataset *ds = NULL;
  const int64_t shape[2] = {NX, DIN};
  KT_CHECK(kiln_dataset_create_from_host(x, 2, shape, y, &ds) == KILN_OK);
  mlp one = mlp_new(0), dp = mlp_new(R); /* the reference starts from rank 0's init */
  train(&one, ds, GB, 1, 0, 0);
  train(&dp, ds, GB / W, W, R, 1);
  for (int k = 0; k < 4; k++) {
    double a[DIN * DH], b[DIN * DH];
    int64_t n = kiln_numel(one.p[k]);
    read_f64(one.p[k], a, n);
    read_f64(dp.p[k], b, n);
    for (int64_t i = 0; i < n; i++)
      if (!(fabs(a[i] - b[i]) <= 1e-5 * (1 + fabs(a[i])))) {
        KT_FAIL("rank %d/%d: parameter %d element %lld: %d ranks give %.9g, one process %.9g", R, W, k,
                (long long)i, W, b[i], a[i]);
        break;
      }
  }
  kiln_dataset_destroy(ds);
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d: %s", R, kiln_last_error());
  /* the buckets are summed in place: through shared memory when the ranks
   * share a host, through MPI across hosts (test_dist_netns) or with
   * KILN_DIST_SHM=0 (test_dist_np2_mpi); the parameters above matched
   * either way. One host: every rank's host name hashes the same. */
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  double hh = 0, hosts[64];
  for (const char *c = host; *c; c++) hh = fmod(hh * 131 + (unsigned char)*c, 1e9);
  int one_host = 1;
  if (W <= 64) {
    const int64_t one = 1;
    read_f64(kiln_all_gather(kiln_mul_c(kiln_ones(KILN_F64, 1, &one), hh), 0), hosts, W);
    for (int k = 0; k < W; k++) one_host = one_host && hosts[k] == hosts[0];
  }
  const char *shm = getenv("KILN_DIST_SHM");
  int64_t via_shm = kiln_counter_value("AllReduceSharedMemory");
  struct statvfs sv; /* a host whose /dev/shm is missing or nearly full falls back to MPI, rightly */
  int room = statvfs("/dev/shm", &sv) == 0 && (double)sv.f_bavail * (double)sv.f_frsize > 64e6;
  if (W == 1 || !one_host || (shm && strcmp(shm, "0") == 0))
    KT_CHECK_MSG(via_shm == 0, "rank %d: %lld all-reduces through shared memory", R, (long long)via_shm);
  else if (room)
    KT_CHECK_MSG(via_shm >= STEPS, "rank %d: %lld all-reduces through shared memory, %d steps", R,
                 (long long)via_shm, STEPS);
  else if (R == 0)
    fprintf(stderr, "test_dist: /dev/shm has no room here: the all-reduces went through MPI (%lld in shared memory)\n",
            (long long)via_shm);
}

/* kiln_ddp_all_reduce_grads on bf16 and f16 gradients (PyTorch DDP reduces
 * them too; kiln_all_reduce alone refuses 16-bit floats): the mean over the
 * ranks, summed in f32 and rounded once, beside f32 parameters (a bucket per
 * dtype run). Rank r's gradient of element i is (r + 1) (i + 1) / 2, so the
 * mean (W + 1) (i + 1) / 4 is exact in every dtype here. */
KT_TEST(ddp_16bit_gradients) {
  start("cpu");
  enum { NPAR = 5, L = 4 };
  const kiln_dtype dts[NPAR] = {KILN_F32, KILN_BF16, KILN_BF16, KILN_F16, KILN_F32};
  const int64_t n = L;
  double ones[L], c[L], got[L];
  kiln_tensor p[NPAR];
  for (int i = 0; i < L; i++) ones[i] = 1, c[i] = (R + 1) * (i + 1) * 0.5;
  for (int k = 0; k < NPAR; k++) {
    p[k] = kiln_param(kiln_cast(kiln_from_host(ones, KILN_F64, 1, &n), dts[k]));
    kiln_requires_grad(p[k]);
  }
  kiln_mark_step();
  kiln_tensor loss = kiln_zeros(KILN_F32, 0, NULL);
  for (int k = 0; k < NPAR; k++) {
    kiln_tensor t = kiln_mul(p[k], kiln_cast(kiln_from_host(c, KILN_F64, 1, &n), dts[k]));
    loss = kiln_add(loss, kiln_cast(kiln_sum(t, 0, NULL, false), KILN_F32));
  }
  KT_CHECK_MSG(kiln_backward(loss) == KILN_OK, "backward: %s", kiln_last_error());
  KT_CHECK_MSG(kiln_ddp_all_reduce_grads(NPAR, p, 0) == KILN_OK, "rank %d: %s", R, kiln_last_error());
  for (int k = 0; k < NPAR; k++) {
    KT_CHECK(kiln_dtype_of(kiln_grad(p[k])) == dts[k]);
    read_f64(kiln_grad(p[k]), got, L);
    for (int i = 0; i < L; i++)
      KT_CHECK_MSG(got[i] == (W + 1) * (i + 1) * 0.25, "rank %d/%d: %s gradient %d element %d is %g, expected %g", R,
                   W, kiln_dtype_name(dts[k]), k, i, got[i], (W + 1) * (i + 1) * 0.25);
  }
  kiln_mark_step();
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "rank %d: %s", R, kiln_last_error());
}

/* A bad handle in the parameter list is an error, as for
 * kiln_ddp_broadcast_params (it was skipped: that parameter's gradient
 * stayed each rank's own, and the ranks' parameters drifted apart). */
KT_TEST(ddp_refuses_bad_handle) {
  start("cpu");
  const int64_t n = 2;
  double v[2] = {1, 2};
  kiln_tensor p[2] = {kiln_param(kiln_from_host(v, KILN_F64, 1, &n)), {0, 0}};
  kiln_requires_grad(p[0]);
  KT_CHECK(kiln_backward(kiln_sum(p[0], 0, NULL, false)) == KILN_OK);
  KT_EQ_INT(kiln_ddp_all_reduce_grads(2, p, 0), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "ddp_all_reduce_grads: parameter 1 is not a valid tensor");
  kiln_clear_error();
  kiln_mark_step();
}

/* Alone (no launcher): rank 0 of 1, and MPI never loaded. */
KT_TEST(alone_loads_no_mpi) {
  if (W != 1) return;
  KT_EQ_INT(kiln_dist_rank(), 0);
  KT_CHECK(!kiln_dist_mpi_loaded());
  FILE *f = fopen("/proc/self/maps", "r");
  KT_CHECK(f != NULL);
  char line[4096];
  int mpi = 0;
  while (f && fgets(line, sizeof line, f)) mpi |= strstr(line, "libmpi") != NULL || strstr(line, "libkiln_mpi") != NULL;
  if (f) fclose(f);
  KT_CHECK_MSG(!mpi, "a program run alone mapped an MPI library");
}

static void init_world(void) {
  KT_CHECK_MSG(kiln_dist_init() == KILN_OK, "kiln_dist_init: %s", kiln_last_error());
  R = kiln_dist_rank();
  W = kiln_dist_world_size();
  if (W > 8) {
    KT_FAIL("world %d: this test supports up to 8 ranks", W);
    exit(1);
  }
}

KT_TEST(world) {
  init_world();
  const char *ws = getenv("KILN_TEST_WORLD"); /* run.sh: the -np it launched */
  if (ws) KT_EQ_INT(W, atoi(ws));
  KT_CHECK(R >= 0 && R < W);
  if (W > 1) KT_CHECK(kiln_dist_mpi_loaded());
}

KT_MAIN(KT_CASE(world), KT_CASE(collectives_match_local_reference), KT_CASE(all_reduce_sum_of_bytes_wraps),
        KT_CASE(all_reduce_max_nan_and_signed_zero), KT_CASE(collectives_at_symbolic_sizes),
        KT_CASE(overlapped_collective_matches_local_reference), KT_CASE(collective_gradients),
        KT_CASE(data_parallel_matches_one_process), KT_CASE(ddp_16bit_gradients),
        KT_CASE(ddp_refuses_bad_handle), KT_CASE(alone_loads_no_mpi))
