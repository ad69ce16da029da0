/* Generated-kernel regressions found by outside testing, and the classes
 * they belong to:
 *  - an EXPAND of a keepdim reduction of a PAD gave running window sums on
 *    cpu (gcc's vectorizer with -fno-trapping-math, docs/codegen.md): the
 *    issue's program against host-computed values, then every composition
 *    of a view (pad, slice, concat, permute, reshape, expand) with a
 *    reduction and a consumer that broadcasts it back, cpu against ref;
 *  - the max/min gradient lost elements when the backward kernel recomputed
 *    the input with another FMA contraction than the forward kernel: every
 *    slice of random data (no ties) must give its gradient to exactly one
 *    element, on both backends, and match ref;
 *  - a GEMM whose operand is a float SCALAR (kiln_mul_s's factor, made a
 *    [1, 1] by the backward of a broadcast) read the buffer the SCALAR was
 *    materialized into after the arena had given it to the GEMM's own
 *    output (the schedule's liveness counted the SCALAR's input instead):
 *    the gradient was 0 (difftest seed 975). Programs with a SCALAR GEMM
 *    operand, forward and backward, against ref;
 *  - softmax rows are written in two passes (the sum's loop stores exp(x -
 *    max) into the output, the last loop divides it in place; codegen.c's
 *    softmax_row): masked rows (-inf scores, as attention's padding), rows
 *    reaching exp's subnormal range, f32 and f64, written into a fresh
 *    buffer and in place into the input (kiln_assign), against a host
 *    softmax in double and against ref;
 *  - row kernels keep values their later loops need in row-sized local
 *    arrays (codegen.c's row_cache): a layer norm of a residual sum with a
 *    dropout-like mask, forward and gradient (its rows keep the masked sum
 *    and x - mean), rows of 16, 300 and 5000 (past the cache's 4096), against
 *    a host layer norm in double and against ref;
 *  - column kernels (a reduction over leading axes: bias gradients) sweep
 *    blocks of up to 512 outputs, split over the threads in whole blocks of
 *    64 (codegen_col.c, cpu_execute.c's loop_grain): widths around
 *    those edges, short and long columns, f32, bf16 and i32 sums, a max and
 *    a mean, bit for bit against ref (both sum each output in order);
 *  - a reduction over several trailing axes whose value reads a broadcast
 *    along one of them (a mean of a layer norm's output) runs as nested
 *    loops (codegen.c's nested_axis): all axes and the last two, with and
 *    without leading rows, the broadcast along each axis, sums, max, min,
 *    means and products of f32, bf16 and i32, against ref;
 *  - values a kernel knows bf16 holds (a bf16 value widened, selected,
 *    relu'd, compared with a bf16-exact constant) are not rounded again
 *    when cast back (codegen_dtype.c, kbf16q), nor the results
 *    of bf16 neg/abs/relu/max/min/floor/sign; f32 values, products and
 *    constants bf16 does not hold are: bit for bit against ref, NaNs,
 *    infinities, -0 and huge values included;
 *  - elementwise kernels run whole pieces of their last axis (up to 256)
 *    as constant-length loops and a task's partial first and last pieces
 *    with bounds (codegen.c, gen_elementwise): permutes with a broadcast
 *    add large enough to be split mid-piece, pieces of 1 to 257, f32 and
 *    bf16, bit for bit against ref;
 *  - a kernel unswitched on an index check (KIDX_FN) whose value is a
 *    loop-invariant NaN-aware max/min chain stored 0 on AVX-512 (gcc 12.2
 *    sank the value into masked branches; -fno-tree-sink now,
 *    docs/codegen.md; test_random_graphs seed 91127, graph 1464): the
 *    issue's program against its hand-computed value, then index_select and
 *    gather with invariant and varying indices under max/min/clamp chains
 *    and broadcasting consumers, f32 and f64, against ref. */
#include "backend/backend_compare.h"

/* ── 1. the issue's program, exact ── */

typedef struct pad_case {
  int rows, op; /* op: 0 sum, 1 max, 2 mean */
} pad_case;

static void prog_pad(bc_result *r, const void *arg) {
  const pad_case *pc = arg;
  int64_t s[2] = {pc->rows, 4}, lo[2] = {1, 0}, hi[2] = {0, 0}, e[2] = {pc->rows + 1, 4};
  float *x = malloc(sizeof(float) * (size_t)pc->rows * 4);
  for (int i = 0; i < pc->rows * 4; i++) x[i] = (float)(i + 1) * (i % 3 ? 1.0f : -0.5f);
  kiln_tensor X = kiln_from_host(x, KILN_F32, 2, s);
  free(x);
  kiln_tensor Y = kiln_pad(X, lo, hi, 0.0);
  int ax = 1;
  kiln_tensor red = pc->op == 0 ? kiln_sum(Y, 1, &ax, 1) : pc->op == 1 ? kiln_max(Y, 1, &ax, 1) : kiln_mean(Y, 1, &ax, 1);
  bc_emit(r, kiln_expand(red, 2, e), 0, 0, "expand(reduce(pad))");
}

KT_TEST(expand_of_keepdim_reduction_of_pad) {
  for (int rows = 3; rows <= 9; rows++)
    for (int op = 0; op < 3; op++) {
      pad_case pc = {rows, op};
      const char *backends[2] = {"ref", bc_backend_under_test()};
      for (int b = 0; b < 2; b++) {
        static bc_result res;
        if (bc_run(backends[b], prog_pad, &pc, &res)) {
          KT_FAIL("[%s] rows %d op %d: %s", backends[b], rows, op, res.err);
          bc_result_free(&res);
          continue;
        }
        const float *got = res.o[0].data;
        for (int i = 0; i <= rows; i++) {
          double want = 0, mx = -INFINITY;
          for (int j = 0; j < 4; j++) {
            int k = (i - 1) * 4 + j;
            double v = i == 0 ? 0.0 : (double)((float)(k + 1) * (k % 3 ? 1.0f : -0.5f));
            want += v;
            mx = v > mx ? v : mx;
          }
          want = op == 0 ? want : op == 1 ? mx : want / 4;
          for (int j = 0; j < 4; j++)
            KT_CHECK_MSG(fabs(got[i * 4 + j] - want) <= 1e-5 * (1 + fabs(want)),
                         "[%s] rows %d op %d: out[%d][%d] = %g, want %g", backends[b], rows, op, i, j,
                         got[i * 4 + j], want);
        }
        bc_result_free(&res);
      }
    }
}

/* ── 2. the class: view x reduction x broadcast back, cpu against ref ── */

enum { V_PAD0, V_PAD1, V_PAD01, V_SLICE0, V_SLICE1, V_CONCAT0, V_CONCAT1, V_PERMUTE, V_RESHAPE, V_EXPAND, V_COUNT };

typedef struct view_case {
  int view, consumer; /* consumer: 0 none, 1 expand back, 2 v - red, 3 exp(v - red) * red */
  int64_t rows, cols;
} view_case;

static kiln_tensor make_view(int v, kiln_tensor x, int64_t R, int64_t C) {
  int64_t lo0[2] = {1, 0}, hi0[2] = {2, 0}, lo1[2] = {0, 2}, hi1[2] = {0, 1}, lo01[2] = {2, 1}, hi01[2] = {1, 3};
  switch (v) {
    case V_PAD0: return kiln_pad(x, lo0, hi0, 0.5);
    case V_PAD1: return kiln_pad(x, lo1, hi1, -1.0);
    case V_PAD01: return kiln_pad(x, lo01, hi01, 0.0);
    case V_SLICE0: return kiln_slice(x, 0, 1, R, 2);
    case V_SLICE1: return kiln_slice(x, 1, 1, C, 2);
    case V_CONCAT0: return kiln_concat(2, ((kiln_tensor[]){x, kiln_neg(x)}), 0);
    case V_CONCAT1: return kiln_concat(2, ((kiln_tensor[]){kiln_mul_c(x, 2.0), x}), 1);
    case V_PERMUTE: return kiln_permute(x, ((int[]){1, 0}));
    case V_RESHAPE: return kiln_reshape(x, 2, ((int64_t[]){C, R}));
    default: { /* a size-1 axis broadcast, then padded: expand feeding a pad */
      int64_t one[2] = {1, C}, to[2] = {R, C}, lo[2] = {1, 0}, hi[2] = {0, 0};
      return kiln_pad(kiln_expand(kiln_slice(x, 0, 0, 1, 1), 2, to), lo, hi, 0.0);
      (void)one;
    }
  }
}

static void prog_views(bc_result *r, const void *arg) {
  const view_case *vc = arg;
  int64_t s[2] = {vc->rows, vc->cols};
  kiln_tensor x = bc_input(KILN_F32, 2, s, 1000 + (uint64_t)vc->view, 0);
  kiln_tensor v = make_view(vc->view, x, vc->rows, vc->cols);
  int64_t vs[KILN_MAX_RANK];
  int vr = kiln_shape(v, vs);
  for (int op = 0; op < 4; op++)
    for (int axes = 0; axes < 3; axes++) {
      int ax[2] = {axes == 1 ? 1 : 0, 1}, n = axes == 2 ? 2 : 1;
      for (int keep = 0; keep < 2; keep++) {
        kiln_tensor red = op == 0   ? kiln_sum(v, n, ax, keep)
                          : op == 1 ? kiln_max(v, n, ax, keep)
                          : op == 2 ? kiln_min(v, n, ax, keep)
                                    : kiln_mean(v, n, ax, keep);
        /* one consumer per program: a reduction read by one node fuses
         * with it, which is where the generated indexing composes */
        if (vc->consumer == 0) bc_emit(r, red, 0, 0, "view %d op %d axes %d keep %d: reduce", vc->view, op, axes, keep);
        if (!keep || vc->consumer == 0) continue;
        kiln_tensor out = vc->consumer == 1   ? kiln_expand(red, vr, vs)
                          : vc->consumer == 2 ? kiln_sub(v, red)
                                              : kiln_mul(kiln_exp(kiln_sub(v, red)), red);
        bc_emit(r, out, 1e-5, 1e-5, "view %d op %d axes %d: consumer %d", vc->view, op, axes, vc->consumer);
      }
    }
}

KT_TEST(views_around_reductions_match_ref) {
  /* 4 columns: short rows (unrolled row loop); 9: long rows; 17 rows:
   * enough rows for the column kernel */
  static const int64_t shapes[][2] = {{4, 4}, {5, 9}, {17, 9}};
  for (int si = 0; si < 3; si++)
    for (int v = 0; v < V_COUNT; v++)
      for (int cons = 0; cons < 4; cons++) {
        view_case vc = {v, cons, shapes[si][0], shapes[si][1]};
        char what[80];
        snprintf(what, sizeof what, "view %d, consumer %d, on [%lld,%lld]", v, cons, (long long)vc.rows,
                 (long long)vc.cols);
        KT_CHECK_MSG(bc_check(what, prog_views, &vc, NULL) == 0, "%s differs from ref", what);
      }
}

/* ── 3. the max/min gradient through a recomputed input ── */

typedef struct grad_case {
  int64_t rows, cols;
  int axis, is_min;
} grad_case;

static void prog_grad(bc_result *r, const void *arg) {
  const grad_case *gc = arg;
  int64_t s[2] = {gc->rows, gc->cols};
  kiln_tensor p = kiln_param(bc_input(KILN_F32, 2, s, 77 + (uint64_t)gc->axis, 0));
  kiln_requires_grad(p);
  kiln_tensor x = kiln_add_c(kiln_gelu(p), 0.3); /* recomputed by the backward kernel */
  int ax = gc->axis;
  kiln_tensor m = gc->is_min ? kiln_min(x, 1, &ax, 0) : kiln_max(x, 1, &ax, 0);
  kiln_backward(kiln_sum(kiln_mul_c(m, 1.5), 0, NULL, 0));
  bc_emit(r, kiln_grad(p), 1e-5, 1e-6, "grad of %s over axis %d", gc->is_min ? "min" : "max", gc->axis);

}

KT_TEST(extremum_gradient_reaches_one_element_per_slice) {
  static const int64_t shapes[][2] = {{64, 37}, {1, 50}, {50, 1}, {33, 8}};
  for (int si = 0; si < 4; si++)
    for (int axis = 0; axis < 2; axis++)
      for (int is_min = 0; is_min < 2; is_min++) {
        grad_case gc = {shapes[si][0], shapes[si][1], axis, is_min};
        static bc_result ref, got;
        bc_run_oracle(prog_grad, &gc, &ref);
        bc_run(bc_backend_under_test(), prog_grad, &gc, &got);
        const bc_result *res[2] = {&ref, &got};
        for (int b = 0; b < 2; b++) {
          if (res[b]->n != 1) {
            KT_FAIL("[%s] no gradient: %s", res[b]->backend, res[b]->err);
            continue;
          }
          const float *g = res[b]->o[0].data;
          int64_t R = gc.rows, C = gc.cols, nsl = axis == 0 ? C : R, len = axis == 0 ? R : C, bad = 0;
          for (int64_t k = 0; k < nsl; k++) {
            int nz = 0;
            for (int64_t t = 0; t < len; t++) nz += g[axis == 0 ? t * C + k : k * C + t] != 0.0f;
            bad += nz != 1;
          }
          KT_CHECK_MSG(bad == 0, "[%s] [%lld,%lld] %s over axis %d: %lld of %lld slices lost their gradient",
                       res[b]->backend, (long long)R, (long long)C, is_min ? "min" : "max", axis, (long long)bad,
                       (long long)nsl);
        }
        if (ref.n == 1 && got.n == 1) KT_CHECK(bc_compare("extremum gradient", &ref, &got) == 0);
        bc_result_free(&ref);
        bc_result_free(&got);
      }
}

/* ── 4. a float SCALAR as a GEMM operand ── */

typedef struct scalar_case {
  int pre;   /* 0: min, 1: sum, 2: none (the parameter is the row) */
  int n;     /* index_select picks n copies of the row */
  int m;     /* columns of the right operand */
} scalar_case;

static void prog_scalar_gemm(bc_result *r, const void *arg) {
  const scalar_case *sc = arg;
  int64_t s[3] = {1, 1, 3}, ws[2] = {sc->n, sc->m};
  kiln_tensor p = kiln_param(bc_input(KILN_F32, 3, s, 975, 0));
  kiln_requires_grad(p);
  int ax = 2, ax2[2] = {0, 1};
  kiln_tensor row = sc->pre == 0 ? kiln_min(p, 1, &ax, 0) : sc->pre == 1 ? kiln_sum(p, 1, &ax, 0)
                                                                           : kiln_reshape(kiln_slice(p, 2, 0, 1, 1), 2, s);
  int64_t *idx = calloc((size_t)sc->n, sizeof *idx);
  int64_t ni = sc->n;
  kiln_tensor sel = kiln_index_select(row, 1, kiln_from_host(idx, KILN_I64, 1, &ni)); /* [1, n] */
  free(idx);
  kiln_tensor y = kiln_mul_s(kiln_matmul(sel, bc_input(KILN_F32, 2, ws, 976, 0)), -0.0690995753);
  bc_emit(r, y, 1e-5, 1e-6, "forward");
  kiln_backward(kiln_sum(y, 2, ax2, 0));
  bc_emit(r, kiln_grad(p), 1e-5, 1e-6, "gradient");
  /* the factor itself as the left operand of a forward GEMM */
  int64_t one[2] = {1, 1};
  kiln_tensor f = kiln_mul_s(kiln_ones(KILN_F32, 2, one), 0.37);
  bc_emit(r, kiln_add_c(kiln_matmul(f, bc_input(KILN_F32, 2, ((int64_t[]){1, sc->m}), 977, 0)), 1.0), 1e-6, 1e-6,
          "scalar @ matrix");
}

KT_TEST(scalar_gemm_operand_matches_ref) {
  for (int pre = 0; pre < 3; pre++)
    for (int n = 1; n <= 3; n++)
      for (int m = 1; m <= 5; m += 2) {
        scalar_case sc = {pre, n, m};
        char what[64];
        snprintf(what, sizeof what, "scalar GEMM operand (pre %d, n %d, m %d)", pre, n, m);
        KT_CHECK_MSG(bc_check(what, prog_scalar_gemm, &sc, NULL) == 0, "%s differs from ref", what);
      }
}

/* ── 5. softmax rows in two passes ── */

typedef struct sm_case {
  int rows, len, f64, in_place;
} sm_case;

/* Row r, element j: a score in [-20, 20], rows with r % 3 == 1 masked from
 * j >= len / 2 on (as padding), rows with r % 3 == 2 spread to -110 (exp
 * of the shifted score reaches the subnormals and underflows to 0). */
static double sm_x(int r, int j, int len) {
  double v = (double)((r * 131 + j * 71) % 97) / 97.0 * 40.0 - 20.0;
  return r % 3 == 2 ? v * 2.75 - 55.0 : v;
}
static int sm_keep(int r, int j, int len) { return r % 3 != 1 || j < len / 2; }

static void prog_softmax(bc_result *r, const void *arg) {
  const sm_case *sc = arg;
  int64_t s[2] = {sc->rows, sc->len};
  size_t n = (size_t)sc->rows * (size_t)sc->len;
  double *xd = malloc(sizeof(double) * n);
  float *xf = malloc(sizeof(float) * n);
  uint8_t *mask = malloc((size_t)sc->rows * (size_t)sc->len);
  for (int i = 0; i < sc->rows; i++)
    for (int j = 0; j < sc->len; j++) {
      xd[i * sc->len + j] = sm_x(i, j, sc->len);
      xf[i * sc->len + j] = (float)xd[i * sc->len + j];
      mask[i * sc->len + j] = (uint8_t)sm_keep(i, j, sc->len);
    }
  kiln_dtype dt = sc->f64 ? KILN_F64 : KILN_F32;
  kiln_tensor x = kiln_from_host(sc->f64 ? (void *)xd : (void *)xf, dt, 2, s);
  kiln_tensor m = kiln_from_host(mask, KILN_BOOL, 2, s);
  free(xd);
  free(xf);
  free(mask);
  kiln_tensor sc_x = kiln_where(m, kiln_mul_c(x, 0.5), kiln_constant(dt, -INFINITY));
  if (sc->in_place) {
    kiln_tensor p = kiln_param(kiln_add_c(sc_x, 0.0));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    kiln_assign(p, kiln_softmax(p, -1)); /* the output donated to p's buffer */
    bc_emit(r, p, 1e-6, 1e-30, "softmax in place");
  } else {
    bc_emit(r, kiln_softmax(sc_x, -1), 1e-6, 1e-30, "softmax");
  }
}

KT_TEST(softmax_rows_in_two_passes) {
  static const int lens[] = {16, 17, 40, 128, 130};
  for (int li = 0; li < 5; li++)
    for (int f64 = 0; f64 < 2; f64++)
      for (int ip = 0; ip < 2; ip++) {
        sm_case sc = {7, lens[li], f64, ip};
        char what[96];
        snprintf(what, sizeof what, "softmax rows %d x %d %s%s", sc.rows, sc.len, f64 ? "f64" : "f32",
                 ip ? " in place" : "");
        static bc_result got;
        if (bc_run(bc_backend_under_test(), prog_softmax, &sc, &got) || got.n != 1) {
          KT_FAIL("%s: %s", what, got.err);
          bc_result_free(&got);
          continue;
        }
        int bad = 0;
        for (int i = 0; i < sc.rows; i++) { /* the host softmax, in double from the same inputs */
          double mx = -INFINITY, sum = 0, e[130];
          for (int j = 0; j < sc.len; j++) {
            double v = sm_keep(i, j, sc.len) ? (f64 ? sm_x(i, j, sc.len) : (double)(float)sm_x(i, j, sc.len)) * 0.5
                                             : -INFINITY;
            e[j] = v;
            mx = v > mx ? v : mx;
          }
          for (int j = 0; j < sc.len; j++) sum += e[j] = exp(e[j] - mx);
          for (int j = 0; j < sc.len; j++) {
            double want = e[j] / sum, g = bc_get_f(&got.o[0], (int64_t)i * sc.len + j);
            if (!(fabs(g - want) <= 1e-5 * want + (f64 ? 1e-300 : 1e-37)) && bad++ < 3)
              KT_FAIL("%s: [%d][%d] = %g, want %g", what, i, j, g, want);
          }
        }
        bc_result_free(&got);
        KT_CHECK_MSG(bc_check(what, prog_softmax, &sc, NULL) == 0, "%s differs from ref", what);
      }
}

/* ── 6. the row cache ── */

typedef struct rc_case {
  int rows, len;
} rc_case;

static double rc_x(int r, int j) { return (double)((r * 37 + j * 11) % 53) / 53.0 * 4.0 - 2.0; }

static void prog_row_cache(bc_result *r, const void *arg) {
  const rc_case *rc = arg;
  int64_t s[2] = {rc->rows, rc->len};
  size_t n = (size_t)rc->rows * (size_t)rc->len;
  float *x = malloc(sizeof(float) * n);
  uint8_t *keep = malloc(n);
  for (int i = 0; i < rc->rows; i++)
    for (int j = 0; j < rc->len; j++) {
      x[(size_t)i * rc->len + j] = (float)rc_x(i, j);
      keep[(size_t)i * rc->len + j] = (uint8_t)((i + j) % 5 != 0);
    }
  kiln_tensor p = kiln_param(kiln_from_host(x, KILN_F32, 2, s));
  kiln_requires_grad(p);
  kiln_tensor m = kiln_from_host(keep, KILN_BOOL, 2, s);
  free(x);
  free(keep);
  /* h = p + where(keep, 1.25 p, 0); layer norm of h over the row */
  kiln_tensor h = kiln_add(p, kiln_where(m, kiln_mul_c(p, 1.25), kiln_constant(KILN_F32, 0.0)));
  int ax = -1;
  kiln_tensor d = kiln_sub(h, kiln_mean(h, 1, &ax, 1));
  kiln_tensor y = kiln_mul(d, kiln_rsqrt(kiln_add_c(kiln_mean(kiln_mul(d, d), 1, &ax, 1), 1e-5)));
  bc_emit(r, y, 1e-5, 1e-6, "layer norm");
  kiln_backward(kiln_sum(kiln_mul(y, kiln_add_c(p, 0.5)), 0, NULL, 0));
  bc_emit(r, kiln_grad(p), 1e-4, 1e-5, "layer norm gradient");
}

KT_TEST(row_cache_matches_ref) {
  static const int lens[] = {16, 300, 5000};
  for (int li = 0; li < 3; li++) {
    rc_case rc = {5, lens[li]};
    char what[64];
    snprintf(what, sizeof what, "layer norm rows 5 x %d", rc.len);
    static bc_result got;
    if (bc_run(bc_backend_under_test(), prog_row_cache, &rc, &got) || got.n != 2) {
      KT_FAIL("%s: %s", what, got.err);
      bc_result_free(&got);
      continue;
    }
    int bad = 0;
    for (int i = 0; i < rc.rows; i++) { /* the host layer norm, in double from the same inputs */
      double mean = 0, var = 0;
      for (int j = 0; j < rc.len; j++) {
        double v = (double)(float)rc_x(i, j);
        mean += (i + j) % 5 != 0 ? v + (double)(float)((float)v * 1.25f) : v;
      }
      mean /= rc.len;
      for (int j = 0; j < rc.len; j++) {
        double v = (double)(float)rc_x(i, j);
        double hv = (i + j) % 5 != 0 ? v + (double)(float)((float)v * 1.25f) : v;
        var += (hv - mean) * (hv - mean);
      }
      var /= rc.len;
      for (int j = 0; j < rc.len; j++) {
        double v = (double)(float)rc_x(i, j);
        double hv = (i + j) % 5 != 0 ? v + (double)(float)((float)v * 1.25f) : v;
        double want = (hv - mean) / sqrt(var + 1e-5), g = bc_get_f(&got.o[0], (int64_t)i * rc.len + j);
        if (!(fabs(g - want) <= 1e-4 * (1 + fabs(want))) && bad++ < 3)
          KT_FAIL("%s: [%d][%d] = %g, want %g", what, i, j, g, want);
      }
    }
    bc_result_free(&got);
    KT_CHECK_MSG(bc_check(what, prog_row_cache, &rc, NULL) == 0, "%s differs from ref", what);
  }
}

/* ── 7. column kernels in wide sweeps ── */

typedef struct col_case {
  int64_t rows, cols;
  kiln_dtype dt;
  int op; /* 0 sum, 1 max, 2 mean; over axis 0, or axes 0 and 1 of [2, rows/2, cols] when lead2 */
  int lead2;
} col_case;

static void prog_col(bc_result *r, const void *arg) {
  const col_case *cc = arg;
  int64_t s2[2] = {cc->rows, cc->cols}, s3[3] = {2, cc->rows / 2, cc->cols};
  kiln_tensor x = cc->lead2 ? bc_input(cc->dt, 3, s3, 404 + (uint64_t)cc->cols, 0)
                            : bc_input(cc->dt, 2, s2, 404 + (uint64_t)cc->cols, 0);
  int ax[2] = {0, 1}, n = cc->lead2 ? 2 : 1;
  kiln_tensor red = cc->op == 0 ? kiln_sum(x, n, ax, 0) : cc->op == 1 ? kiln_max(x, n, ax, 0) : kiln_mean(x, n, ax, 0);
  bc_emit(r, red, 0, 0, "column reduction");
}

KT_TEST(column_kernels_match_ref) {
  static const int64_t cols[] = {1, 63, 65, 511, 513, 1100, 2049};
  static const int64_t rows[] = {18, 300};
  static const struct {
    kiln_dtype dt;
    int op;
  } kinds[] = {{KILN_F32, 0}, {KILN_BF16, 0}, {KILN_I32, 0}, {KILN_F32, 1}, {KILN_F32, 2}};
  for (int ci = 0; ci < 7; ci++)
    for (int ri = 0; ri < 2; ri++)
      for (int ki = 0; ki < 5; ki++) {
        col_case cc = {rows[ri], cols[ci], kinds[ki].dt, kinds[ki].op, (ci + ki) % 3 == 0};
        char what[96];
        snprintf(what, sizeof what, "op %d of %s [%lld, %lld]%s", cc.op, kiln_dtype_name(cc.dt), (long long)cc.rows,
                 (long long)cc.cols, cc.lead2 ? " as [2, rows/2, cols]" : "");
        KT_CHECK_MSG(bc_check(what, prog_col, &cc, NULL) == 0, "%s differs from ref", what);
      }
}

/* ── 8. suffix reductions reading a broadcast ── */

typedef struct bcast_case {
  int64_t shape[3];
  int n_axes; /* the last n_axes axes reduced */
  int along;  /* the broadcast operand varies along this axis only */
  int op;     /* 0 sum, 1 max, 2 min, 3 mean, 4 prod */
  kiln_dtype dt;
} bcast_case;

static void prog_bcast(bc_result *r, const void *arg) {
  const bcast_case *bc = arg;
  int64_t bs[3] = {1, 1, 1};
  bs[bc->along] = bc->shape[bc->along];
  kiln_tensor x = bc_input(bc->dt, 3, bc->shape, 808 + (uint64_t)bc->op, 0);
  kiln_tensor s = bc_input(bc->dt, 3, bs, 909 + (uint64_t)bc->along, 0);
  /* x * s + s: the broadcast read in the reduced value's expression */
  kiln_tensor v = bc->op == 4 ? kiln_add_c(kiln_mul_c(kiln_mul(x, s), 0.01), 1.0) : kiln_add(kiln_mul(x, s), s);
  int ax[3], n = bc->n_axes;
  for (int i = 0; i < n; i++) ax[i] = 3 - n + i;
  kiln_tensor red = bc->op == 0   ? kiln_sum(v, n, ax, 0)
                    : bc->op == 1 ? kiln_max(v, n, ax, 0)
                    : bc->op == 2 ? kiln_min(v, n, ax, 0)
                    : bc->op == 3 ? kiln_mean(v, n, ax, 0)
                                  : kiln_prod(v, n, ax, 0);
  double tol = bc->dt == KILN_F32 ? 1e-5 : bc->dt == KILN_BF16 ? 1e-2 : 0;
  bc_emit(r, red, tol, tol, "reduction of a broadcast");
}

KT_TEST(suffix_reductions_of_broadcasts_match_ref) {
  static const int64_t shapes[][3] = {{1, 24, 40}, {3, 17, 33}, {6, 5, 300}};
  static const struct {
    kiln_dtype dt;
    int op;
  } kinds[] = {{KILN_F32, 0}, {KILN_F32, 1}, {KILN_F32, 2}, {KILN_F32, 3}, {KILN_F32, 4},
               {KILN_BF16, 0}, {KILN_BF16, 1}, {KILN_I32, 0}, {KILN_I32, 1}};
  for (int si = 0; si < 3; si++)
    for (int n = 2; n <= 3; n++)
      for (int along = 0; along < 3; along++)
        for (int ki = 0; ki < 9; ki++) {
          bcast_case bc = {{shapes[si][0], shapes[si][1], shapes[si][2]}, n, along, kinds[ki].op, kinds[ki].dt};
          char what[112];
          snprintf(what, sizeof what, "op %d of %s [%lld,%lld,%lld] over the last %d axes, broadcast along %d",
                   bc.op, kiln_dtype_name(bc.dt), (long long)bc.shape[0], (long long)bc.shape[1],
                   (long long)bc.shape[2], n, along);
          KT_CHECK_MSG(bc_check(what, prog_bcast, &bc, NULL) == 0, "%s differs from ref", what);
        }
}

/* ── 9. bf16 casts of values bf16 already holds ── */

static void prog_exact(bc_result *r, const void *arg) {
  (void)arg;
  int64_t s[2] = {37, 29};
  kiln_tensor xb = bc_input(KILN_BF16, 2, s, 5150, 2), xf = bc_input(KILN_F32, 2, s, 5151, 2);
  kiln_tensor wide = kiln_cast(xb, KILN_F32), mask = kiln_gt_c(xf, 0.0);
  kiln_tensor zero = kiln_full(KILN_F32, 2, s, 0.0);
  kiln_tensor cat[2] = {wide, xf};
  kiln_tensor outs[] = {
      kiln_where(mask, wide, zero),                     /* exact */
      kiln_relu(wide),                                  /* exact */
      kiln_maximum_c(wide, 0.5),                        /* exact */
      kiln_neg(kiln_abs(wide)),                         /* exact */
      kiln_cast(mask, KILN_F32),                        /* exact */
      kiln_maximum_c(wide, 0.1),                        /* 0.1: rounded */
      kiln_where(mask, xf, zero),                       /* f32 values: rounded */
      kiln_mul_c(wide, 3.0),                            /* a product: rounded */
      kiln_concat(2, cat, 0),                           /* half f32: rounded */
  };
  for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) bc_emit(r, kiln_cast(outs[k], KILN_BF16), 0, 0, "cast %zu", k);
  bc_emit(r, kiln_relu(xb), 0, 0, "bf16 relu");
  bc_emit(r, kiln_neg(xb), 0, 0, "bf16 neg");
  bc_emit(r, kiln_abs(xb), 0, 0, "bf16 abs");
  bc_emit(r, kiln_floor(xb), 0, 0, "bf16 floor");
  bc_emit(r, kiln_sign(xb), 0, 0, "bf16 sign");
  bc_emit(r, kiln_maximum(xb, kiln_neg(xb)), 0, 0, "bf16 max");
  bc_emit(r, kiln_minimum_c(xb, 0.75), 0, 0, "bf16 min");
}

KT_TEST(exact_bf16_values_are_not_rounded_again) {
  static bc_result ref, got;
  bc_run_oracle(prog_exact, NULL, &ref);
  bc_run(bc_backend_under_test(), prog_exact, NULL, &got);
  KT_CHECK(ref.status == KILN_OK && got.status == KILN_OK && ref.n == got.n && ref.n == 16);
  for (int k = 0; k < ref.n && k < got.n; k++) {
    const bc_out *a = &ref.o[k], *b = &got.o[k];
    KT_CHECK(a->dt == KILN_BF16 && b->dt == KILN_BF16 && a->numel == b->numel);
    if (a->numel != b->numel) continue;
    const uint16_t *x = a->data, *y = b->data;
    int64_t bad = 0;
    for (int64_t i = 0; i < a->numel; i++)
      if (x[i] != y[i] && bad++ < 2)
        KT_FAIL("%s element %lld: %s %04x, ref %04x", a->name, (long long)i, got.backend, (unsigned)y[i],
                (unsigned)x[i]);
  }
  bc_result_free(&ref);
  bc_result_free(&got);
}

/* ── 10. elementwise pieces, whole and partial ── */

typedef struct piece_case {
  int64_t shape[3]; /* permuted to [s0, s2, s1]: the output's last axis is shape[1] */
  kiln_dtype dt;
} piece_case;

static void prog_piece(bc_result *r, const void *arg) {
  const piece_case *pc = arg;
  int64_t bs[3] = {1, pc->shape[1], pc->shape[2]};
  kiln_tensor x = bc_input(pc->dt, 3, pc->shape, 6100 + (uint64_t)pc->shape[1], 0);
  kiln_tensor b = bc_input(pc->dt, 3, bs, 6200 + (uint64_t)pc->shape[2], 0);
  static const int perm[3] = {0, 2, 1};
  kiln_tensor y = kiln_permute(kiln_add(x, b), perm);
  bc_emit(r, kiln_mul_c(y, 2.0), 0, 0, "permuted sum");
}

KT_TEST(elementwise_pieces_match_ref) {
  static const int64_t shapes[][3] = {{40, 1, 513}, {37, 41, 45}, {3, 256, 100}, {3, 257, 99}, {9, 32, 130}};
  for (int si = 0; si < 5; si++)
    for (int d = 0; d < 2; d++) {
      piece_case pc = {{shapes[si][0], shapes[si][1], shapes[si][2]}, d ? KILN_BF16 : KILN_F32};
      static bc_result ref, got;
      bc_run_oracle(prog_piece, &pc, &ref);
      bc_run(bc_backend_under_test(), prog_piece, &pc, &got);
      KT_CHECK(ref.status == KILN_OK && got.status == KILN_OK && ref.n == 1 && got.n == 1);
      if (ref.n == 1 && got.n == 1 && ref.o[0].numel == got.o[0].numel) {
        size_t bytes = (size_t)ref.o[0].numel * kiln_dtype_size(ref.o[0].dt);
        KT_CHECK_MSG(memcmp(ref.o[0].data, got.o[0].data, bytes) == 0, "[%lld,%lld,%lld] %s: cpu differs from ref",
                     (long long)pc.shape[0], (long long)pc.shape[1], (long long)pc.shape[2],
                     kiln_dtype_name(pc.dt));
      }
      bc_result_free(&ref);
      bc_result_free(&got);
    }
}

/* ── an index check unswitched around an invariant max/min chain ── */

typedef struct idx_case {
  kiln_dtype dt;
  int form; /* 0: 0-d index (invariant), 1: index vector, 2: gather */
  int chain; /* 0: maximum(x + x, clamp(x * w)), 1: clamp only, 2: minimum(x, max_c(x * w)) */
  int out;   /* the one output (another output would be its own kernel, read by the others) */
} idx_case;

static void prog_idx(bc_result *r, const void *arg) {
  const idx_case *ic = arg;
  double x0v[1] = {-0.7};
  float wv[4] = {1.3f, -0.6f, 2.6f, 0.2f};
  int64_t iv[3] = {2, 0, 3}, s11[2] = {1, 1}, s14[2] = {1, 4}, s4[1] = {4}, s1[1] = {1}, s3[1] = {3};
  kiln_tensor x0 = kiln_cast(kiln_from_host(x0v, KILN_F64, 0, NULL), ic->dt);
  kiln_tensor w = kiln_cast(kiln_from_host(wv, KILN_F32, 2, s14), ic->dt);
  kiln_tensor prod = kiln_reshape(kiln_matmul(kiln_reshape(x0, 2, s11), w), 1, s4);
  kiln_tensor x2 = kiln_expand(kiln_reshape(kiln_add(x0, x0), 1, s1), 1, s4);
  kiln_tensor v = ic->chain == 0   ? kiln_maximum(x2, kiln_minimum_c(kiln_maximum_c(prod, -8), 8))
                  : ic->chain == 1 ? kiln_minimum_c(kiln_maximum_c(prod, -8), 8)
                                   : kiln_minimum(x2, kiln_maximum_c(prod, -1));
  kiln_tensor idx = kiln_cast(kiln_from_host(iv, KILN_I64, ic->form == 0 ? 0 : 1, ic->form == 0 ? NULL : s3),
                              KILN_I32);
  kiln_tensor g = ic->form == 2 ? kiln_gather(v, 0, kiln_cast(idx, KILN_I64)) : kiln_index_select(v, 0, idx);
  int64_t e2[2] = {2, ic->form == 0 ? 4 : 3}, gs[2] = {1, ic->form == 0 ? 1 : 3};
  kiln_tensor g2 = kiln_reshape(g, 2, gs);
  if (ic->out == 0) bc_emit(r, kiln_expand(g2, 2, e2), 0, 0, "expand(select(chain))");
  if (ic->out == 1)
    bc_emit(r, kiln_maximum(kiln_expand(g2, 2, e2), kiln_expand(g2, 2, e2)), 0, 0, "maximum of expands");
  if (ic->out == 2) bc_emit(r, g, 0, 0, "the selection itself");
}

KT_TEST(index_checks_around_invariant_chains_match_ref) {
  /* the issue's program: max(-1.4, clamp(-0.7 * 2.6, -8, 8)) = -1.4 everywhere */
  for (int out = 0; out < 2; out++) {
    static bc_result got;
    idx_case issue = {KILN_F64, 0, 0, out};
    bc_run(bc_backend_under_test(), prog_idx, &issue, &got);
    KT_CHECK(got.status == KILN_OK && got.n == 1);
    for (int64_t i = 0; got.n == 1 && i < got.o[0].numel; i++)
      KT_CHECK_MSG(fabs(bc_get_f(&got.o[0], i) + 1.4) < 1e-12, "%s[%lld] = %g, want -1.4", got.o[0].name,
                   (long long)i, bc_get_f(&got.o[0], i));
    bc_result_free(&got);
  }
  for (int d = 0; d < 2; d++)
    for (int form = 0; form < 3; form++)
      for (int chain = 0; chain < 3; chain++)
        for (int out = 0; out < 3; out++) {
          idx_case ic = {d ? KILN_F32 : KILN_F64, form, chain, out};
          char what[96];
          snprintf(what, sizeof what, "%s, index form %d, chain %d, output %d", kiln_dtype_name(ic.dt), form, chain,
                   out);
          KT_CHECK_MSG(bc_check(what, prog_idx, &ic, NULL) == 0, "%s differs from ref", what);
        }
}

KT_MAIN(KT_CASE(expand_of_keepdim_reduction_of_pad), KT_CASE(views_around_reductions_match_ref),
        KT_CASE(extremum_gradient_reaches_one_element_per_slice), KT_CASE(scalar_gemm_operand_matches_ref),
        KT_CASE(softmax_rows_in_two_passes), KT_CASE(row_cache_matches_ref),
        KT_CASE(column_kernels_match_ref), KT_CASE(suffix_reductions_of_broadcasts_match_ref),
        KT_CASE(exact_bf16_values_are_not_rounded_again), KT_CASE(elementwise_pieces_match_ref),
        KT_CASE(index_checks_around_invariant_chains_match_ref))
