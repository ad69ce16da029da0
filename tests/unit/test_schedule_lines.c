/* Scheduler + codegen + cpu backend, the kernels of their own: sort and
 * scatter (line kernels), cumsum/cumprod (scans) and prod, fused with their
 * producers, against plain C computed here. */
#include "schedule_harness.h"

/* ARGSORT and SCATTER_ADD are line kernels of their own, with their
 * producers (a mul, a neg) inlined: two kernels, no scratch. The sort is
 * checked as a stable permutation (many ties, lines longer than a merge
 * pass), the scatter-add against the same additions in order in plain C. */
KT_TEST(sort_and_scatter_are_line_kernels) {
  enum { R = 64, L = 3001, M = 70 };
  gb b = {0};
  int64_t sx[2] = {R, L}, si[2] = {R, M}, ax1[2] = {1, 0};
  int x = leaf(&b, KILN_F32, 2, sx), idx = leaf(&b, KILN_I64, 2, si), src = leaf(&b, KILN_F32, 2, si);
  int y = bin(&b, KILN_OP_MUL, x, cnst(&b, KILN_F32, 2, sx, 2.0));
  output(&b, add(&b, KILN_OP_ARGSORT, KILN_I64, 2, sx, 1, &y, 2, ax1, 0), -1);
  int ins[3] = {x, idx, un(&b, KILN_OP_NEG, src)};
  output(&b, add(&b, KILN_OP_SCATTER_ADD, KILN_F32, 2, sx, 3, ins, 1, ax1, 0), -1);
  kiln_graph *g = finish(&b);
  float *xs = malloc(sizeof(float) * R * L), *ss = malloc(sizeof(float) * R * M), *o2 = malloc(sizeof(float) * R * L);
  int64_t *is = malloc(sizeof(int64_t) * R * M), *o1 = malloc(sizeof(int64_t) * R * L);
  uint64_t s = 7;
  for (int i = 0; i < R * L; i++) xs[i] = floorf(frand(&s) * 20) / 4; /* ties */
  for (int i = 0; i < R * M; i++) ss[i] = frand(&s), is[i] = (int64_t)((frand(&s) + 1) * 4) % 8; /* duplicates */
  void *in[] = {xs, is, ss}, *out[] = {o1, o2};
  kiln_exec_info info = run(g, in, out);
  KT_EQ_INT(info.n_kernels, 2);
  KT_EQ_INT(info.scratch_bytes, 0);
  int bad = 0;
  uint8_t *seen = calloc(L, 1);
  for (int r = 0; r < R; r++) {
    memset(seen, 0, L);
    for (int j = 0; j < L; j++) {
      int64_t p = o1[r * L + j];
      if (p < 0 || p >= L || seen[p]++) {
        bad++;
        continue;
      }
      if (j == 0) continue;
      int64_t q = o1[r * L + j - 1];
      float a = xs[r * L + q], c = xs[r * L + p];
      bad += a > c || (a == c && q > p); /* ascending, ties in order */
    }
  }
  KT_EQ_INT(bad, 0);
  for (int r = 0; r < R; r++) {
    float line[L];
    memcpy(line, xs + r * L, sizeof line);
    for (int q = 0; q < M; q++) line[is[r * M + q]] = line[is[r * M + q]] + -ss[r * M + q];
    bad += memcmp(line, o2 + r * L, sizeof line) != 0;
  }
  KT_EQ_INT(bad, 0);
  free(seen);
  free(xs), free(ss), free(o2), free(is), free(o1);
  kiln_graph_free(g);
}

/* A scan is a kernel of its own with its producer fused in: cumsum along
 * the last axis (rows contiguous) and the first (strided), cumprod, against
 * running sums / products in double written here. */
static int scan(gb *b, int op, int a, int axis) {
  const kiln_gnode *x = &b->nodes[a];
  int64_t ia = axis;
  return add(b, op, x->dtype, x->rank, x->shape, 1, &a, 1, &ia, 0);
}

KT_TEST(scans_fuse_their_producer) {
  enum { R = 5, C = 37 };
  int64_t sh[2] = {R, C};
  static float xs[R * C], ys[R * C];
  uint64_t st = 11;
  for (int i = 0; i < R * C; i++) xs[i] = frand(&st);
  for (int axis = 0; axis < 2; axis++)
    for (int op = KILN_OP_CUMSUM; op <= KILN_OP_CUMPROD; op++) {
      gb b = {0};
      int x = leaf(&b, KILN_F32, 2, sh);
      int e = bin(&b, KILN_OP_MUL, un(&b, KILN_OP_EXP, x), cnst(&b, KILN_F32, 2, sh, 0.5));
      output(&b, scan(&b, op, e, axis), -1);
      kiln_graph *g = finish(&b);
      void *in[] = {xs}, *out[] = {ys};
      kiln_exec_info info = run(g, in, out);
      KT_EQ_INT(info.n_kernels, 1);
      int bad = 0;
      for (int r = 0; r < (axis ? R : C); r++) {
        double acc = op == KILN_OP_CUMPROD;
        for (int j = 0; j < (axis ? C : R); j++) {
          int i = axis ? r * C + j : j * C + r;
          double v = (double)(expf(xs[i]) * 0.5f);
          acc = op == KILN_OP_CUMPROD ? acc * v : acc + v;
          bad += !(fabs(ys[i] - acc) <= 1e-6 * fabs(acc)); /* kexpf: within an ulp of expf */
        }
      }
      KT_CHECK_MSG(bad == 0, "%s along axis %d: %d elements differ", kiln_op_name(op), axis, bad);
      kiln_graph_free(g);
    }
}

/* prod fuses as sum does (the product and the scaled rows in one row
 * kernel), over long rows (the vector path) and in integers (partial
 * products), and as a column reduction. */
KT_TEST(prod_fuses_like_sum) {
  enum { R = 24, C = 40 };
  int64_t sh[2] = {R, C};
  static double xs[R * C], ys[R * C], cs[C];
  static int64_t xi[R * C], pi[R];
  uint64_t st = 5;
  for (int i = 0; i < R * C; i++) xs[i] = 0.6 + 0.8 * frand(&st), xi[i] = (int64_t)(frand(&st) * 7) - 3 + (i % 5 == 0) * 1000003;
  gb b = {0};
  int x = leaf(&b, KILN_F64, 2, sh);
  int y = bin(&b, KILN_OP_MUL, x, expand(&b, reduce(&b, KILN_OP_REDUCE_PROD, x, 2), 2, sh));
  output(&b, y, -1);
  kiln_graph *g = finish(&b);
  void *in[] = {xs}, *out[] = {ys};
  KT_EQ_INT(run(g, in, out).n_kernels, 1);
  for (int r = 0; r < R; r++) {
    double p = 1;
    for (int c = 0; c < C; c++) p *= xs[r * C + c];
    for (int c = 0; c < C; c++) KT_NEAR(ys[r * C + c], xs[r * C + c] * p, 1e-12 * fabs(p) + 1e-300);
  }
  kiln_graph_free(g);
  gb bc = {0};
  output(&bc, reduce(&bc, KILN_OP_REDUCE_PROD, leaf(&bc, KILN_F64, 2, sh), 1), -1);
  g = finish(&bc);
  void *outc[] = {cs};
  KT_EQ_INT(run(g, in, outc).n_kernels, 1);
  for (int c = 0; c < C; c++) {
    double p = 1;
    for (int r = 0; r < R; r++) p *= xs[r * C + c];
    KT_NEAR(cs[c], p, 1e-12 * fabs(p));
  }
  kiln_graph_free(g);
  gb bi = {0};
  output(&bi, reduce(&bi, KILN_OP_REDUCE_PROD, leaf(&bi, KILN_I64, 2, sh), 2), -1);
  g = finish(&bi);
  void *ini[] = {xi}, *outi[] = {pi};
  run(g, ini, outi);
  for (int r = 0; r < R; r++) {
    uint64_t p = 1;
    for (int c = 0; c < C; c++) p *= (uint64_t)xi[r * C + c];
    KT_CHECK_MSG(pi[r] == (int64_t)p, "row %d: %lld, wrapping product %lld", r, (long long)pi[r], (long long)p);
  }
  kiln_graph_free(g);
}

KT_TEST(teardown) { harness_teardown(); }

KT_MAIN(KT_CASE(sort_and_scatter_are_line_kernels), KT_CASE(scans_fuse_their_producer), KT_CASE(prod_fuses_like_sum),
        KT_CASE(teardown))
