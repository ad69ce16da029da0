/* Scheduler + codegen + cpu backend: fusion counts on hand-built graphs and
 * the compiled results against plain C computed here. The per-line kernels
 * (sort, scatter, scans) are in test_schedule_lines.c, the DDP bucket's
 * in-place concatenation in test_schedule_bucket.c. */
#include "base/config.h"
#include "schedule_harness.h"

/* ───────────── fusion counts + results ───────────── */

KT_TEST(chain_of_8_is_one_kernel) {
  gb b = {0};
  int64_t sh[1] = {100003};
  int x = leaf(&b, KILN_F32, 1, sh);
  int c = cnst(&b, KILN_F32, 1, sh, 0.5);
  int y = bin(&b, KILN_OP_MUL, x, c);        /* 1 */
  y = bin(&b, KILN_OP_ADD, y, x);            /* 2 */
  y = un(&b, KILN_OP_TANH, y);               /* 3 */
  y = bin(&b, KILN_OP_SUB, y, c);            /* 4 */
  y = un(&b, KILN_OP_ABS, y);                /* 5 */
  y = un(&b, KILN_OP_SQRT, y);               /* 6 */
  y = bin(&b, KILN_OP_MAX, y, c);            /* 7 */
  y = un(&b, KILN_OP_NEG, y);                /* 8 */
  output(&b, y, -1);
  kiln_graph *g = finish(&b);
  float *xs = malloc(sizeof(float) * 100003), *ys = malloc(sizeof(float) * 100003);
  uint64_t s = 1;
  for (int i = 0; i < 100003; i++) xs[i] = frand(&s) * 3;
  void *in[] = {xs}, *out[] = {ys};
  kiln_exec_info info = run(g, in, out);
  KT_EQ_INT(info.n_kernels, 1);
  KT_EQ_INT(info.scratch_bytes, 0);
  int bad = 0;
  for (int i = 0; i < 100003; i++) {
    float v = -fmaxf(sqrtf(fabsf(tanhf(xs[i] * 0.5f + xs[i]) - 0.5f)), 0.5f);
    if (fabsf(v - ys[i]) > 1e-6f) bad++;
  }
  KT_EQ_INT(bad, 0);
  /* a second compile of the same graph finds every kernel loaded */
  info = run(g, in, out);
  KT_NEAR(info.cc_ns, 0, 0);
  free(xs);
  free(ys);
  kiln_graph_free(g);
}

KT_TEST(softmax_rows_at_most_two_kernels) {
  enum { R = 37, C = 129 };
  gb b = {0};
  int64_t sh[2] = {R, C}, rs[2] = {R, 1};
  int x = leaf(&b, KILN_F32, 2, sh);
  int m = reduce(&b, KILN_OP_REDUCE_MAX, x, 2);
  int me = expand(&b, m, 2, sh);
  int e = un(&b, KILN_OP_EXP, bin(&b, KILN_OP_SUB, x, me));
  int s = reduce(&b, KILN_OP_REDUCE_SUM, e, 2);
  int y = bin(&b, KILN_OP_DIV, e, expand(&b, s, 2, sh));
  (void)rs;
  output(&b, y, -1);
  kiln_graph *g = finish(&b);
  static float xs[R * C], ys[R * C];
  uint64_t st = 7;
  for (int i = 0; i < R * C; i++) xs[i] = frand(&st) * 10;
  void *in[] = {xs}, *out[] = {ys};
  kiln_exec_info info = run(g, in, out);
  KT_CHECK(info.n_kernels <= 2);
  for (int r = 0; r < R; r++) {
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < C; c++) mx = fmax(mx, xs[r * C + c]);
    for (int c = 0; c < C; c++) sum += exp(xs[r * C + c] - mx);
    for (int c = 0; c < C; c++) KT_NEAR(ys[r * C + c], exp(xs[r * C + c] - mx) / sum, 1e-6);
  }
  kiln_graph_free(g);
}

KT_TEST(layernorm_at_most_two_kernels) {
  enum { R = 16, C = 200 };
  gb b = {0};
  int64_t sh[2] = {R, C}, rs[2] = {R, 1}, cs[2] = {1, C};
  int x = leaf(&b, KILN_F32, 2, sh);
  int gam = leaf(&b, KILN_F32, 2, cs), bet = leaf(&b, KILN_F32, 2, cs);
  int inv = cnst(&b, KILN_F32, 2, rs, 1.0 / C);
  int mean = bin(&b, KILN_OP_MUL, reduce(&b, KILN_OP_REDUCE_SUM, x, 2), inv);
  int xc = bin(&b, KILN_OP_SUB, x, expand(&b, mean, 2, sh));
  int var = bin(&b, KILN_OP_MUL, reduce(&b, KILN_OP_REDUCE_SUM, bin(&b, KILN_OP_MUL, xc, xc), 2), inv);
  int rstd = un(&b, KILN_OP_RSQRT, bin(&b, KILN_OP_ADD, var, cnst(&b, KILN_F32, 2, rs, 1e-5)));
  int y = bin(&b, KILN_OP_MUL, xc, expand(&b, rstd, 2, sh));
  y = bin(&b, KILN_OP_MUL, y, expand(&b, gam, 2, sh));
  y = bin(&b, KILN_OP_ADD, y, expand(&b, bet, 2, sh));
  output(&b, y, -1);
  output(&b, rstd, -1); /* saved for backward: a row-shaped output of the same kernel */
  kiln_graph *g = finish(&b);
  static float xs[R * C], ys[R * C], gs[C], bs[C], rstds[R];
  uint64_t st = 3;
  for (int i = 0; i < R * C; i++) xs[i] = frand(&st) * 4 + 1;
  for (int i = 0; i < C; i++) gs[i] = frand(&st), bs[i] = frand(&st);
  void *in[] = {xs, gs, bs}, *out[] = {ys, rstds};
  kiln_exec_info info = run(g, in, out);
  KT_CHECK_MSG(info.n_kernels <= 2, "%d kernels", info.n_kernels);
  for (int r = 0; r < R; r++) {
    double mu = 0, v = 0;
    for (int c = 0; c < C; c++) mu += xs[r * C + c];
    mu /= C;
    for (int c = 0; c < C; c++) v += (xs[r * C + c] - mu) * (xs[r * C + c] - mu);
    v /= C;
    double rsd = 1 / sqrt(v + 1e-5);
    KT_NEAR(rstds[r], rsd, 1e-4 * rsd);
    for (int c = 0; c < C; c++) KT_NEAR(ys[r * C + c], (xs[r * C + c] - mu) * rsd * gs[c] + bs[c], 2e-5);
  }
  kiln_graph_free(g);
}

KT_TEST(matmul_bias_relu_is_gemm_plus_one_kernel) {
  enum { M = 33, K = 47, N = 29 };
  gb b = {0};
  int64_t sa[2] = {M, K}, sbt[2] = {N, K}, sbias[2] = {1, N}, so[2] = {M, N}, sbb[2] = {K, N};
  int a = leaf(&b, KILN_F32, 2, sa);
  int wt = leaf(&b, KILN_F32, 2, sbt); /* weight stored [N, K], used transposed */
  int bias = leaf(&b, KILN_F32, 2, sbias);
  int64_t perm[2] = {1, 0};
  int w = add(&b, KILN_OP_PERMUTE, KILN_F32, 2, sbb, 1, &wt, 2, perm, 0);
  int ins[2] = {a, w};
  int mm = add(&b, KILN_OP_MATMUL, KILN_F32, 2, so, 2, ins, 0, NULL, 0);
  int y = un(&b, KILN_OP_RELU, bin(&b, KILN_OP_ADD, mm, expand(&b, bias, 2, so)));
  output(&b, y, -1);
  kiln_graph *g = finish(&b);
  static float as[M * K], ws[N * K], bs[N], ys[M * N];
  uint64_t st = 11;
  for (int i = 0; i < M * K; i++) as[i] = frand(&st);
  for (int i = 0; i < N * K; i++) ws[i] = frand(&st);
  for (int i = 0; i < N; i++) bs[i] = frand(&st);
  void *in[] = {as, ws, bs}, *out[] = {ys};
  kiln_exec_info info = run(g, in, out);
  KT_EQ_INT(info.n_gemm_calls, 1);
  KT_EQ_INT(info.n_kernels, 1);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = bs[j];
      for (int k = 0; k < K; k++) acc += (double)as[i * K + k] * ws[j * K + k];
      KT_NEAR(ys[i * N + j], acc > 0 ? acc : 0, 1e-4);
    }
  kiln_graph_free(g);
}

/* ───────────── op coverage against plain C ───────────── */

static int moveop(gb *b, int op, int a, int rank, const int64_t *shape, int n_iattr, const int64_t *ia, double f) {
  return add(b, op, b->nodes[a].dtype, rank, shape, 1, &a, n_iattr, ia, f);
}

KT_TEST(move_ops_match_c) {
  enum { R = 4, C = 6 };
  gb b = {0};
  int64_t sx[2] = {R, C}, sp[2] = {C, R}, ss[2] = {2, 2}, spad[2] = {5, 8}, scat[2] = {R, 2 * C};
  int64_t s38[2] = {3, 8}, s83[2] = {8, 3}, sidx[1] = {5}, ssel[2] = {5, C}, sg[2] = {R, 2};
  int x = leaf(&b, KILN_F32, 2, sx);
  int idx = leaf(&b, KILN_I64, 1, sidx);
  int gidx = leaf(&b, KILN_I32, 2, sg);
  int64_t perm[2] = {1, 0}, sl[4] = {1, 2, 2, 2}, pad[4] = {1, 0, 0, 2}, ax1 = 1, ax0 = 0;
  output(&b, moveop(&b, KILN_OP_PERMUTE, x, 2, sp, 2, perm, 0), -1);
  output(&b, moveop(&b, KILN_OP_SLICE, x, 2, ss, 4, sl, 0), -1);
  output(&b, moveop(&b, KILN_OP_PAD, x, 2, spad, 4, pad, -1.5), -1);
  int x2 = bin(&b, KILN_OP_MUL, x, cnst(&b, KILN_F32, 2, sx, 2.0));
  int cins[2] = {x, x2};
  output(&b, add(&b, KILN_OP_CONCAT, KILN_F32, 2, scat, 2, cins, 1, &ax1, 0), -1);
  int rs = moveop(&b, KILN_OP_RESHAPE, x, 2, s38, 0, NULL, 0);
  output(&b, moveop(&b, KILN_OP_PERMUTE, rs, 2, s83, 2, perm, 0), -1);
  int sins[2] = {x, idx};
  output(&b, add(&b, KILN_OP_INDEX_SELECT, KILN_F32, 2, ssel, 2, sins, 1, &ax0, 0), -1);
  int gins[2] = {x, gidx};
  output(&b, add(&b, KILN_OP_GATHER, KILN_F32, 2, sg, 2, gins, 1, &ax1, 0), -1);
  int io = add(&b, KILN_OP_IOTA, KILN_F32, 2, sx, 0, NULL, 1, &ax1, 0);
  output(&b, bin(&b, KILN_OP_ADD, io, x), -1);
  kiln_graph *g = finish(&b);
  float xs[R * C], o1[C * R], o2[4], o3[5 * 8], o4[R * 2 * C], o5[24], o6[5 * C], o7[R * 2], o8[R * C];
  int64_t is[5] = {3, 1, 0, 3, 2}; /* in range: an out-of-range index is an error (test_index_errors) */
  int32_t gs[R * 2] = {0, 5, 1, 2, 3, 3, 1, 4};
  for (int i = 0; i < R * C; i++) xs[i] = (float)i * 0.5f - 3;
  void *in[] = {xs, is, gs}, *out[] = {o1, o2, o3, o4, o5, o6, o7, o8};
  run(g, in, out);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) KT_NEAR(o1[j * R + i], xs[i * C + j], 0);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) KT_NEAR(o2[i * 2 + j], xs[(1 + 2 * i) * C + 2 + 2 * j], 0);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 8; j++) KT_NEAR(o3[i * 8 + j], (i >= 1 && j < C) ? xs[(i - 1) * C + j] : -1.5f, 0);
  for (int i = 0; i < R; i++)
    for (int j = 0; j < 2 * C; j++) KT_NEAR(o4[i * 2 * C + j], j < C ? xs[i * C + j] : 2 * xs[i * C + j - C], 0);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 8; j++) KT_NEAR(o5[j * 3 + i], xs[i * 8 + j], 0);
  for (int q = 0; q < 5; q++) {
    int64_t r = is[q] < 0 ? 0 : is[q] >= R ? R - 1 : is[q];
    for (int j = 0; j < C; j++) KT_NEAR(o6[q * C + j], xs[r * C + j], 0);
  }
  for (int i = 0; i < R; i++)
    for (int j = 0; j < 2; j++) {
      int c = gs[i * 2 + j] < 0 ? 0 : gs[i * 2 + j] >= C ? C - 1 : gs[i * 2 + j];
      KT_NEAR(o7[i * 2 + j], xs[i * C + c], 0);
    }
  for (int i = 0; i < R * C; i++) KT_NEAR(o8[i], xs[i] + (float)(i % C), 0);
  kiln_graph_free(g);
}

/* im2col (pad, 9 strided slices, reshapes, concat) and its backward (slices
 * of the concat, reshaped and padded back, summed): the index expressions
 * fold divisions and modulos through the reshapes (docs/codegen.md §4);
 * the results must not change. */
KT_TEST(im2col_and_its_backward_match_c) {
  enum { N = 2, C = 3, H = 5, W = 6, HP = H + 2, WP = W + 2 };
  gb b = {0};
  int64_t sx[4] = {N, C, H, W}, sp[4] = {N, C, HP, WP}, sr[3] = {N, 1, C * H * W}, scat[3] = {N, 9, C * H * W};
  int64_t s5[5] = {N, 9, C, H, W}, s5k[5] = {N, 1, C, H, W};
  int x = leaf(&b, KILN_F32, 4, sx);
  int64_t pad[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  int xp = moveop(&b, KILN_OP_PAD, x, 4, sp, 8, pad, 0);
  int parts[9];
  for (int k = 0; k < 9; k++) {
    int64_t sl[8] = {0, 0, k / 3, k % 3, 1, 1, 1, 1};
    int s = moveop(&b, KILN_OP_SLICE, xp, 4, sx, 8, sl, 0);
    parts[k] = moveop(&b, KILN_OP_RESHAPE, s, 3, sr, 0, NULL, 0);
  }
  int64_t ax1 = 1;
  int cat = add(&b, KILN_OP_CONCAT, KILN_F32, 3, scat, 9, parts, 1, &ax1, 0);
  output(&b, cat, -1);
  int r5 = moveop(&b, KILN_OP_RESHAPE, cat, 5, s5, 0, NULL, 0);
  int acc = -1;
  for (int k = 0; k < 9; k++) {
    int64_t sl[10] = {0, k, 0, 0, 0, 1, 1, 1, 1, 1};
    int s = moveop(&b, KILN_OP_SLICE, r5, 5, s5k, 10, sl, 0);
    int r = moveop(&b, KILN_OP_RESHAPE, s, 4, sx, 0, NULL, 0);
    int64_t pk[8] = {0, 0, k / 3, k % 3, 0, 0, 2 - k / 3, 2 - k % 3};
    int p = moveop(&b, KILN_OP_PAD, r, 4, sp, 8, pk, 0);
    acc = acc < 0 ? p : bin(&b, KILN_OP_ADD, acc, p);
  }
  output(&b, acc, -1);
  kiln_graph *g = finish(&b);
  static float xs[N * C * H * W], o1[N * 9 * C * H * W], o2[N * C * HP * WP], e2[N * C * HP * WP];
  uint64_t seed = 7;
  for (int i = 0; i < N * C * H * W; i++) xs[i] = frand(&seed);
  void *in[] = {xs}, *out[] = {o1, o2};
  run(g, in, out);
  memset(e2, 0, sizeof e2);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < 9; k++)
      for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
          for (int z = 0; z < W; z++) {
            int py = y + k / 3, pz = z + k % 3; /* padded coordinates */
            float v = (py >= 1 && py <= H && pz >= 1 && pz <= W) ? xs[((n * C + c) * H + py - 1) * W + pz - 1] : 0;
            float got = o1[((n * 9 + k) * C + c) * H * W + y * W + z];
            KT_NEAR(got, v, 0);
            e2[((n * C + c) * HP + py) * WP + pz] += got;
          }
  for (int i = 0; i < N * C * HP * WP; i++) KT_NEAR(o2[i], e2[i], 1e-6);
  kiln_graph_free(g);
}

KT_TEST(reductions_any_axes) {
  enum { A = 5, B = 7, C = 3 };
  gb b = {0};
  int64_t sx[3] = {A, B, C};
  int x = leaf(&b, KILN_F32, 3, sx);
  int xi = leaf(&b, KILN_I32, 3, sx);
  output(&b, reduce(&b, KILN_OP_REDUCE_SUM, x, 2), -1);  /* middle axis */
  output(&b, reduce(&b, KILN_OP_REDUCE_MAX, x, 1), -1);  /* outer axis */
  output(&b, reduce(&b, KILN_OP_ARGMAX, x, 4), -1);      /* last axis, with NaN */
  output(&b, reduce(&b, KILN_OP_REDUCE_MIN, x, 7), -1);  /* everything */
  output(&b, reduce(&b, KILN_OP_REDUCE_SUM, xi, 5), -1); /* axes 0 and 2 */
  kiln_graph *g = finish(&b);
  float xs[A * B * C], o1[A * C], o2[B * C], o4[1];
  int64_t o3[A * B];
  int32_t xis[A * B * C], o5[B];
  uint64_t st = 5;
  for (int i = 0; i < A * B * C; i++) xs[i] = frand(&st) * 5, xis[i] = (int32_t)(i * 7919 % 1000) - 500;
  xs[2 * B * C + 3 * C + 1] = NAN;
  xs[1 * B * C + 4 * C + 0] = 100; /* ties: first index wins */
  xs[1 * B * C + 4 * C + 2] = 100;
  void *in[] = {xs, xis}, *out[] = {o1, o2, o3, o4, o5};
  run(g, in, out);
  float mn = INFINITY;
  for (int a = 0; a < A; a++)
    for (int c = 0; c < C; c++) {
      double s = 0;
      for (int j = 0; j < B; j++) s += xs[(a * B + j) * C + c];
      if (!isnan(s)) KT_NEAR(o1[a * C + c], s, 1e-5);
      else KT_CHECK(isnan(o1[a * C + c]));
    }
  for (int j = 0; j < B; j++)
    for (int c = 0; c < C; c++) {
      float m = -INFINITY;
      for (int a = 0; a < A; a++) {
        float v = xs[(a * B + j) * C + c];
        m = isnan(m) || isnan(v) ? NAN : fmaxf(m, v);
      }
      if (isnan(m)) KT_CHECK(isnan(o2[j * C + c]));
      else KT_NEAR(o2[j * C + c], m, 0);
    }
  for (int a = 0; a < A; a++)
    for (int j = 0; j < B; j++) {
      int64_t bi = 0;
      for (int c = 1; c < C; c++) {
        float best = xs[(a * B + j) * C + bi], v = xs[(a * B + j) * C + c];
        if (!isnan(best) && (isnan(v) || v > best)) bi = c;
      }
      KT_EQ_INT(o3[a * B + j], bi);
    }
  for (int i = 0; i < A * B * C; i++) mn = isnan(xs[i]) || isnan(mn) ? NAN : fminf(mn, xs[i]);
  KT_CHECK(isnan(mn) ? isnan(o4[0]) : o4[0] == mn);
  for (int j = 0; j < B; j++) {
    int64_t s = 0;
    for (int a = 0; a < A; a++)
      for (int c = 0; c < C; c++) s += xis[(a * B + j) * C + c];
    KT_EQ_INT(o5[j], (int32_t)s);
  }
  kiln_graph_free(g);
}

KT_TEST(integer_and_bool_rules) {
  enum { n = 8 };
  gb b = {0};
  int64_t sh[1] = {n};
  int a = leaf(&b, KILN_I32, 1, sh), c = leaf(&b, KILN_I32, 1, sh), f = leaf(&b, KILN_F32, 1, sh);
  output(&b, bin(&b, KILN_OP_DIV, a, c), -1);
  output(&b, bin(&b, KILN_OP_POW, a, c), -1);
  output(&b, add(&b, KILN_OP_CAST, KILN_I32, 1, sh, 1, &f, 0, NULL, 0), -1);
  int lt = bin(&b, KILN_OP_LT, a, c);
  int w[3] = {lt, a, c};
  output(&b, add(&b, KILN_OP_WHERE, KILN_I32, 1, sh, 3, w, 0, NULL, 0), -1);
  output(&b, add(&b, KILN_OP_CAST, KILN_BOOL, 1, sh, 1, &f, 0, NULL, 0), -1);
  kiln_graph *g = finish(&b);
  int32_t as[n] = {7, -7, INT32_MIN, 5, 0, 3, -2, 9}, cs[n] = {2, 2, -1, 0, 0, -1, 3, 31};
  float fs[n] = {1.9f, -1.9f, NAN, 3e10f, -0.0f, 0.5f, 1e9f, -3e9f};
  int32_t o1[n], o2[n], o3[n], o4[n];
  uint8_t o5[n];
  void *in[] = {as, cs, fs}, *out[] = {o1, o2, o3, o4, o5};
  run(g, in, out);
  int32_t d[n] = {3, -3, INT32_MIN, 0, 0, -3, 0, 0};
  int32_t p[n] = {49, 49, 0, 1, 1, 0, -8, (int32_t)(uint32_t)0x6b4ad3c9u};
  int32_t cv[n] = {1, -1, INT32_MIN, INT32_MIN, 0, 0, 1000000000, INT32_MIN};
  {
    uint64_t r = 1, x = 9;
    for (int i = 0; i < 31; i++) r *= x;
    p[7] = (int32_t)(uint32_t)r;
  }
  for (int i = 0; i < n; i++) {
    KT_EQ_INT(o1[i], d[i]);
    KT_EQ_INT(o2[i], p[i]);
    KT_EQ_INT(o3[i], cv[i]);
    KT_EQ_INT(o4[i], as[i] < cs[i] ? as[i] : cs[i]);
    KT_EQ_INT(o5[i], fs[i] != 0);
  }
  kiln_graph_free(g);
}

KT_TEST(random_is_bit_exact_and_scalars_work) {
  enum { n = 1000 };
  gb b = {0};
  int64_t sh[1] = {n}, uni = 0, nor = 1;
  int seed = scalar(&b, KILN_I64);
  int lr = scalar(&b, KILN_F32);
  int u = add(&b, KILN_OP_RANDOM, KILN_F32, 1, sh, 1, &seed, 1, &uni, 0);
  int z = add(&b, KILN_OP_RANDOM, KILN_F64, 1, sh, 1, &seed, 1, &nor, 0);
  output(&b, bin(&b, KILN_OP_MUL, u, expand(&b, moveop(&b, KILN_OP_RESHAPE, lr, 1, (int64_t[]){1}, 0, NULL, 0), 1, sh)), -1);
  output(&b, z, -1);
  output(&b, lr, -1); /* a scalar input as an output */
  kiln_graph *g = finish(&b);
  int64_t sv = 1234567;
  double lv = 0.25;
  float o1[n], o3[1];
  double o2[n];
  void *in[] = {&sv, &lv}, *out[] = {o1, o2, o3};
  run(g, in, out);
  int bad = 0;
  for (int k = 0; k < n; k++) {
    if (o1[k] != (float)kiln_rng_uniform(1234567, (uint64_t)k) * 0.25f) bad++;
    if (o2[k] != kiln_rng_normal(1234567, (uint64_t)k)) bad++;
  }
  KT_EQ_INT(bad, 0);
  KT_NEAR(o3[0], 0.25, 0);
  kiln_graph_free(g);
}

KT_TEST(aliased_outputs_stay_correct) {
  enum { n = 8 };
  gb b = {0};
  int64_t sh[2] = {n, n};
  int64_t perm[2] = {1, 0};
  int x = leaf(&b, KILN_F32, 2, sh), w = leaf(&b, KILN_F32, 2, sh), gr = leaf(&b, KILN_F32, 2, sh);
  /* in place and safe: w -= 0.1 * grad */
  output(&b, bin(&b, KILN_OP_SUB, w, bin(&b, KILN_OP_MUL, gr, cnst(&b, KILN_F32, 2, sh, 0.1))), 1);
  /* unsafe: reads x transposed while writing x */
  output(&b, bin(&b, KILN_OP_ADD, x, moveop(&b, KILN_OP_PERMUTE, x, 2, sh, 2, perm, 0)), 0);
  output(&b, x, -1); /* the old x too: read by an end copy */
  kiln_graph *g = finish(&b);
  float xs[n * n], x0[n * n], ws[n * n], w0[n * n], gs[n * n], xold[n * n];
  for (int i = 0; i < n * n; i++) xs[i] = x0[i] = (float)i, ws[i] = w0[i] = (float)(i % 5), gs[i] = (float)(i % 3);
  void *in[] = {xs, ws, gs}, *out[] = {ws, xs, xold};
  kiln_exec_info info = run(g, in, out);
  KT_CHECK(info.aliased_bytes >= sizeof ws);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      KT_NEAR(ws[i * n + j], w0[i * n + j] - 0.1f * gs[i * n + j], 1e-6);
      KT_NEAR(xs[i * n + j], x0[i * n + j] + x0[j * n + i], 0);
      KT_NEAR(xold[i * n + j], x0[i * n + j], 0);
    }
  kiln_graph_free(g);
}

KT_TEST(batched_matmul_with_broadcast_and_transpose) {
  enum { B0 = 2, B1 = 3, M = 4, K = 5, N = 6 };
  gb b = {0};
  int64_t sa[4] = {B0, B1, M, K}, sb1[4] = {1, B1, N, K}, sbe[4] = {B0, B1, N, K}, sbt[4] = {B0, B1, K, N};
  int64_t so[4] = {B0, B1, M, N}, perm[4] = {0, 1, 3, 2};
  int a = leaf(&b, KILN_F64, 4, sa), w = leaf(&b, KILN_F64, 4, sb1);
  int wt = moveop(&b, KILN_OP_PERMUTE, expand(&b, w, 4, sbe), 4, sbt, 4, perm, 0);
  int ins[2] = {a, wt};
  int mm = add(&b, KILN_OP_MATMUL, KILN_F64, 4, so, 2, ins, 0, NULL, 0);
  output(&b, mm, -1);
  output(&b, mm, -1); /* the same node twice */
  kiln_graph *g = finish(&b);
  double as[B0 * B1 * M * K], ws[B1 * N * K], o[B0 * B1 * M * N], o2[B0 * B1 * M * N];
  uint64_t st = 9;
  for (int i = 0; i < B0 * B1 * M * K; i++) as[i] = frand(&st);
  for (int i = 0; i < B1 * N * K; i++) ws[i] = frand(&st);
  void *in[] = {as, ws}, *out[] = {o, o2};
  kiln_exec_info info = run(g, in, out);
  KT_EQ_INT(info.n_gemm_calls, 1);
  for (int p = 0; p < B0; p++)
    for (int q = 0; q < B1; q++)
      for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
          double acc = 0;
          for (int k = 0; k < K; k++) acc += as[((p * B1 + q) * M + i) * K + k] * ws[(q * N + j) * K + k];
          KT_NEAR(o[((p * B1 + q) * M + i) * N + j], acc, 1e-12);
          KT_NEAR(o2[((p * B1 + q) * M + i) * N + j], acc, 1e-12);
        }
  kiln_graph_free(g);
}

/* An f32 weight's update from a bf16 product (mixed precision: the
 * gradient's GEMM in bf16, the weight in f32) is one GEMM too, and gives the
 * unfused kernels' values bit for bit: the product rounded to bf16, times lr,
 * subtracted in f32. Integer-valued operands make every f32 sum exact in any
 * order, so the expected values are exact. Both bf16 paths (kiln's kernel
 * and the library on widened copies), K in one block and past it, in place
 * and with no factor, out of place. */
static uint16_t bf16_of_int(int v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16); /* small integers are exact in bf16 */
}
static float bf16_round(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u = ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) << 16;
  memcpy(&f, &u, 4);
  return f;
}

KT_TEST(bf16_gemm_updates_match_unfused_bits) {
  enum { K = 23, N = 45, MMAX = 2101 }; /* whole 12 x 32 tiles of the kernel and edges */
  static uint16_t xs[MMAX * K], ds[MMAX * N];
  static float w0[K * N], ws[K * N], wold[K * N];
  uint64_t st = 11;
  for (int i = 0; i < MMAX * K; i++) xs[i] = bf16_of_int((int)(frand(&st) * 16.0f));
  for (int i = 0; i < MMAX * N; i++) ds[i] = bf16_of_int((int)(frand(&st) * 16.0f));
  for (int i = 0; i < K * N; i++) w0[i] = frand(&st);
  double lr = 0.1;
  kiln_config cfg = *kiln_cfg(), saved = cfg;
  for (int path = 0; path < 2; path++)
    for (int big = 0; big < 2; big++)
      for (int plain = 0; plain < 2; plain++) {
        cfg.gemm_bf16 = path ? "library" : "kernel";
        kiln_config_set(&cfg);
        int64_t M = big ? MMAX : 37;
        int64_t sx[2] = {M, K}, sxt[2] = {K, M}, sd[2] = {M, N}, sw[2] = {K, N}, perm[2] = {1, 0}, one[2] = {1, 1};
        gb b = {0};
        int x = leaf(&b, KILN_BF16, 2, sx), d = leaf(&b, KILN_BF16, 2, sd), w = leaf(&b, KILN_F32, 2, sw);
        int s = scalar(&b, KILN_F32);
        int ins[2] = {moveop(&b, KILN_OP_PERMUTE, x, 2, sxt, 2, perm, 0), d};
        int mm = add(&b, KILN_OP_MATMUL, KILN_BF16, 2, sw, 2, ins, 0, NULL, 0);
        int g32 = add(&b, KILN_OP_CAST, KILN_F32, 2, sw, 1, &mm, 0, NULL, 0);
        int lrx = expand(&b, moveop(&b, KILN_OP_RESHAPE, s, 2, one, 0, NULL, 0), 2, sw);
        /* plain: W + dW, W's old value also an output (not in place) */
        output(&b, plain ? bin(&b, KILN_OP_ADD, w, g32) : bin(&b, KILN_OP_SUB, w, bin(&b, KILN_OP_MUL, g32, lrx)),
               plain ? -1 : 2);
        if (plain) output(&b, w, -1);
        kiln_graph *g = finish(&b);
        memcpy(ws, w0, sizeof ws);
        static float wnew[K * N];
        void *in[] = {xs, ds, ws, &lr}, *out[] = {plain ? wnew : ws, wold};
        kiln_exec_info info = run(g, in, out);
        KT_EQ_INT(info.n_gemm_calls, 1);
        KT_EQ_INT(info.n_kernels, 0); /* the update is the GEMM's */
        const float *got = plain ? wnew : ws;
        int bad = 0;
        for (int i = 0; i < K && !bad; i++)
          for (int j = 0; j < N && !bad; j++) {
            float acc = 0; /* exact: integers, |sum| <= 2101 * 225 < 2^24 */
            for (int64_t q = 0; q < M; q++) {
              float xv, dv;
              uint32_t ux = (uint32_t)xs[q * K + i] << 16, ud = (uint32_t)ds[q * N + j] << 16;
              memcpy(&xv, &ux, 4), memcpy(&dv, &ud, 4);
              acc += xv * dv;
            }
            float gv = bf16_round(acc), t = gv * (float)lr;
            float want = plain ? w0[i * N + j] + gv : w0[i * N + j] - t;
            if (got[i * N + j] != want) {
              KT_FAIL("bf16 update (%s, M %lld, %s): W[%d][%d] = %.9g, want %.9g", path ? "library" : "kernel",
                      (long long)M, plain ? "W + dW" : "W - lr dW", i, j, got[i * N + j], want);
              bad = 1;
            }
            if (plain && wold[i * N + j] != w0[i * N + j]) {
              KT_FAIL("W's old value changed at [%d][%d]", i, j);
              bad = 1;
            }
          }
        kiln_graph_free(g);
      }
  kiln_config_set(&saved);
}

/* GEMM updates (schedule_fuse.c): W - lr·(Xᵀ·D) with a run-time lr, in place;
 * the same when W cannot be overwritten (its old value is also an output);
 * a batched f64 accumulation acc + 0.5·(A·B) written the other way round;
 * and a product read twice, which must stay a GEMM of its own. */
KT_TEST(gemm_updates_match_c) {
  enum { M = 37, K = 23, N = 19 };
  int64_t sx[2] = {M, K}, sxt[2] = {K, M}, sd[2] = {M, N}, sw[2] = {K, N}, perm[2] = {1, 0}, one[2] = {1, 1};
  static float xs[M * K], ds[M * N], w0[K * N], ws[K * N], wold[K * N];
  uint64_t st = 5;
  for (int i = 0; i < M * K; i++) xs[i] = frand(&st);
  for (int i = 0; i < M * N; i++) ds[i] = frand(&st);
  for (int i = 0; i < K * N; i++) w0[i] = frand(&st);
  double lr = 0.125;
  for (int keep_old = 0; keep_old < 2; keep_old++) {
    gb b = {0};
    int x = leaf(&b, KILN_F32, 2, sx), d = leaf(&b, KILN_F32, 2, sd), w = leaf(&b, KILN_F32, 2, sw);
    int s = scalar(&b, KILN_F32);
    int ins[2] = {moveop(&b, KILN_OP_PERMUTE, x, 2, sxt, 2, perm, 0), d};
    int mm = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sw, 2, ins, 0, NULL, 0);
    int lrx = expand(&b, moveop(&b, KILN_OP_RESHAPE, s, 2, one, 0, NULL, 0), 2, sw);
    output(&b, bin(&b, KILN_OP_SUB, w, bin(&b, KILN_OP_MUL, mm, lrx)), 2);
    if (keep_old) output(&b, w, -1); /* read by an end copy: W's buffer cannot take the update */
    kiln_graph *g = finish(&b);
    memcpy(ws, w0, sizeof ws);
    void *in[] = {xs, ds, ws, &lr}, *out[] = {ws, wold}; /* a donated output is written to its input */
    kiln_exec_info info = run(g, in, out);
    KT_EQ_INT(info.n_gemm_calls, 1);
    KT_EQ_INT(info.n_kernels, 0); /* the update is the GEMM's */
    if (!keep_old) KT_CHECK(info.aliased_bytes >= sizeof ws);
    for (int i = 0; i < K; i++)
      for (int j = 0; j < N; j++) {
        double acc = 0;
        for (int m = 0; m < M; m++) acc += (double)xs[m * K + i] * ds[m * N + j];
        KT_NEAR(ws[i * N + j], w0[i * N + j] - (float)lr * acc, 1e-5);
        if (keep_old) KT_NEAR(wold[i * N + j], w0[i * N + j], 0);
      }
    kiln_graph_free(g);
  }
  { /* f64, batched, constant alpha, add(Y, X) */
    enum { B = 3, P = 5, Q = 4, R = 6 };
    int64_t sa[3] = {B, P, Q}, sb[3] = {B, Q, R}, so[3] = {B, P, R};
    gb b = {0};
    int a = leaf(&b, KILN_F64, 3, sa), bb = leaf(&b, KILN_F64, 3, sb), acc = leaf(&b, KILN_F64, 3, so);
    int ins[2] = {a, bb};
    int mm = add(&b, KILN_OP_MATMUL, KILN_F64, 3, so, 2, ins, 0, NULL, 0);
    output(&b, bin(&b, KILN_OP_ADD, bin(&b, KILN_OP_MUL, cnst(&b, KILN_F64, 3, so, 0.5), mm), acc), 2);
    kiln_graph *g = finish(&b);
    double as[B * P * Q], bs[B * Q * R], cs[B * P * R], c0[B * P * R];
    for (int i = 0; i < B * P * Q; i++) as[i] = frand(&st);
    for (int i = 0; i < B * Q * R; i++) bs[i] = frand(&st);
    for (int i = 0; i < B * P * R; i++) cs[i] = c0[i] = frand(&st);
    void *in[] = {as, bs, cs}, *out[] = {cs};
    kiln_exec_info info = run(g, in, out);
    KT_EQ_INT(info.n_gemm_calls, 1);
    KT_EQ_INT(info.n_kernels, 0);
    for (int q = 0; q < B; q++)
      for (int i = 0; i < P; i++)
        for (int j = 0; j < R; j++) {
          double v = 0;
          for (int k = 0; k < Q; k++) v += as[(q * P + i) * Q + k] * bs[(q * Q + k) * R + j];
          KT_NEAR(cs[(q * P + i) * R + j], c0[(q * P + i) * R + j] + 0.5 * v, 1e-12);
        }
    kiln_graph_free(g);
  }
  { /* the product also read elsewhere: a GEMM, then a loop for each use */
    gb b = {0};
    int64_t sq[2] = {K, K};
    int x = leaf(&b, KILN_F32, 2, sx), w = leaf(&b, KILN_F32, 2, sq);
    int ins[2] = {moveop(&b, KILN_OP_PERMUTE, x, 2, sxt, 2, perm, 0), x};
    int mm = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sq, 2, ins, 0, NULL, 0);
    output(&b, bin(&b, KILN_OP_ADD, w, mm), 1);
    output(&b, un(&b, KILN_OP_NEG, mm), -1);
    kiln_graph *g = finish(&b);
    static float wq[K * K], wq0[K * K], neg[K * K];
    for (int i = 0; i < K * K; i++) wq[i] = wq0[i] = frand(&st);
    void *in[] = {xs, wq}, *out[] = {wq, neg};
    kiln_exec_info info = run(g, in, out);
    KT_EQ_INT(info.n_gemm_calls, 1);
    KT_CHECK(info.n_kernels >= 1);
    for (int i = 0; i < K; i++)
      for (int j = 0; j < K; j++) {
        double v = 0;
        for (int m = 0; m < M; m++) v += (double)xs[m * K + i] * xs[m * K + j];
        KT_NEAR(wq[i * K + j], wq0[i * K + j] + v, 1e-5);
        KT_NEAR(neg[i * K + j], -v, 1e-5);
      }
    kiln_graph_free(g);
  }
}

KT_TEST(shared_kernels_across_graphs) {
  /* two graphs with the same elementwise shape of work share the kernel:
   * the second compiles without the C compiler */
  for (int rep = 0; rep < 2; rep++) {
    gb b = {0};
    int64_t sh[1] = {77};
    int x = leaf(&b, KILN_F32, 1, sh), y = leaf(&b, KILN_F32, 1, sh);
    int out = bin(&b, KILN_OP_ADD, un(&b, KILN_OP_EXP, x), y);
    if (rep) (void)un(&b, KILN_OP_NEG, x); /* a dead node: a different graph */
    output(&b, out, -1);
    kiln_graph *g = finish(&b);
    float xs[77], ys[77], os[77];
    for (int i = 0; i < 77; i++) xs[i] = (float)i / 50, ys[i] = (float)rep;
    void *in[] = {xs, ys}, *o[] = {os};
    kiln_exec_info info = run(g, in, o);
    if (rep) KT_NEAR(info.cc_ns, 0, 0);
    for (int i = 0; i < 77; i++) KT_NEAR(os[i], expf(xs[i]) + (float)rep, 1e-6);
    kiln_graph_free(g);
  }
}

KT_TEST(column_reductions) {
  enum { R = 300, C = 70 };
  gb b = {0};
  int64_t sx[2] = {R, C};
  int x = leaf(&b, KILN_F32, 2, sx);
  int xi = leaf(&b, KILN_I64, 2, sx);
  output(&b, reduce(&b, KILN_OP_REDUCE_SUM, un(&b, KILN_OP_ABS, x), 1), -1); /* bias-gradient shape */
  output(&b, reduce(&b, KILN_OP_REDUCE_MIN, xi, 1), -1);
  /* a mean over the batch: the scaling joins the column kernel */
  int64_t rs[2] = {1, C};
  output(&b, bin(&b, KILN_OP_MUL, reduce(&b, KILN_OP_REDUCE_SUM, x, 1), cnst(&b, KILN_F32, 2, rs, 1.0 / R)), -1);
  kiln_graph *g = finish(&b);
  static float xs[R * C], o1[C], o3[C];
  static int64_t xis[R * C], o2[C];
  uint64_t st = 21;
  for (int i = 0; i < R * C; i++) xs[i] = frand(&st), xis[i] = (int64_t)(frand(&st) * 1e12);
  void *in[] = {xs, xis}, *out[] = {o1, o2, o3};
  kiln_exec_info info = run(g, in, out);
  KT_EQ_INT(info.n_kernels, 3);
  for (int c = 0; c < C; c++) {
    double s = 0, s3 = 0;
    for (int r = 0; r < R; r++) s3 += xs[r * C + c];
    KT_NEAR(o3[c], s3 / R, 1e-6);
    int64_t mn = INT64_MAX;
    for (int r = 0; r < R; r++) s += fabsf(xs[r * C + c]), mn = xis[r * C + c] < mn ? xis[r * C + c] : mn;
    KT_NEAR(o1[c], s, 1e-4);
    KT_EQ_INT(o2[c], mn);
  }
  kiln_graph_free(g);
}

KT_TEST(scratch_is_reused_by_liveness) {
  /* x W W W W: each product is read only by the next, so the third can
   * reuse the first's memory: peak scratch is two products, not three */
  enum { n = 24 };
  gb b = {0};
  int64_t sh[2] = {n, n};
  int x = leaf(&b, KILN_F32, 2, sh), w = leaf(&b, KILN_F32, 2, sh);
  int a = x;
  for (int i = 0; i < 4; i++) {
    int ins[2] = {a, w};
    a = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sh, 2, ins, 0, NULL, 0);
  }
  output(&b, a, -1);
  kiln_graph *g = finish(&b);
  static float xs[n * n], ws[n * n], out[n * n], t1[n * n], t2[n * n];
  for (int i = 0; i < n * n; i++) xs[i] = (float)(i % 7) / 7, ws[i] = (i % n == i / n) ? 0.5f : 0.01f;
  void *in[] = {xs, ws}, *o[] = {out};
  kiln_exec_info info = run(g, in, o);
  KT_EQ_INT(info.n_gemm_calls, 4);
  KT_EQ_INT(info.n_kernels, 0);
  KT_EQ_INT(info.scratch_bytes, 2 * sizeof xs);
  memcpy(t1, xs, sizeof xs);
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int k = 0; k < n; k++) acc += (double)t1[i * n + k] * ws[k * n + j];
        t2[i * n + j] = (float)acc;
      }
    memcpy(t1, t2, sizeof t1);
  }
  for (int i = 0; i < n * n; i++) KT_NEAR(out[i], t1[i], 1e-5);
  kiln_graph_free(g);
}

KT_TEST(teardown) { harness_teardown(); }

KT_TEST(collective_issued_early_and_its_buffers_kept_in_flight) {
  /* p1 = x·w, p2 = w·w, p3 = p2·w, r = all_reduce(p1) traced after them,
   * y = r·p3. The collective is issued right after p1's kernel and waited
   * for at y; p1 (its input) must not share bytes with p2 or p3, which run
   * while it is in flight (the old plan let p2 reuse p1's bytes). */
  enum { n = 16 };
  gb b = {0};
  int64_t sh[2] = {n, n};
  int x = leaf(&b, KILN_F32, 2, sh), w = leaf(&b, KILN_F32, 2, sh);
  int i1[2] = {x, w}, i2[2] = {w, w};
  int p1 = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sh, 2, i1, 0, NULL, 0);
  int p2 = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sh, 2, i2, 0, NULL, 0);
  int i3[2] = {p2, w};
  int p3 = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sh, 2, i3, 0, NULL, 0);
  const int64_t ra[2] = {0, 1}; /* SUM, a world of 1 */
  int r = add(&b, KILN_OP_ALL_REDUCE, KILN_F32, 2, sh, 1, &p1, 2, ra, 0);
  int i4[2] = {r, p3};
  int y = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sh, 2, i4, 0, NULL, 0);
  output(&b, y, -1);
  kiln_graph *g = finish(&b);
  kiln_sched *s = NULL;
  kiln_err err = {0};
  KT_CHECK_MSG(kiln_sched_build(g, &s, &err) == KILN_OK, "schedule: %s", err.msg);
  if (s) {
    KT_EQ_INT(s->n_kernels, 5);
    KT_EQ_INT(s->kernels[1].kind, KILN_SK_COLL); /* right after p1's GEMM */
    KT_EQ_INT(s->kernels[1].wait_at, s->owner[y]);
    KT_EQ_INT(s->owner[y], 4);
    const kiln_sbuf *a = &s->bufs[s->buf_of[p1]];
    for (int k = 0; k < 2; k++) {
      const kiln_sbuf *o = &s->bufs[s->buf_of[k ? p3 : p2]];
      KT_CHECK_MSG(a->kind != KILN_SBUF_SCRATCH || o->kind != KILN_SBUF_SCRATCH ||
                       a->offset + a->bytes <= o->offset || o->offset + o->bytes <= a->offset,
                   "p%d shares bytes with the all_reduce's input", k ? 3 : 2);
    }
    kiln_sched_free(s);
  }
  static float xs[n * n], ws[n * n], out[n * n], t1[n * n], t2[n * n], t3[n * n];
  for (int i = 0; i < n * n; i++) xs[i] = (float)(i % 7) / 7, ws[i] = (float)((i * 5) % 11) / 11 - 0.4f;
  void *in[] = {xs, ws}, *o[] = {out};
  run(g, in, o);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double a1 = 0, a2 = 0;
      for (int k = 0; k < n; k++) a1 += (double)xs[i * n + k] * ws[k * n + j], a2 += (double)ws[i * n + k] * ws[k * n + j];
      t1[i * n + j] = (float)a1, t2[i * n + j] = (float)a2;
    }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double a3 = 0;
      for (int k = 0; k < n; k++) a3 += (double)t2[i * n + k] * ws[k * n + j];
      t3[i * n + j] = (float)a3;
    }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0;
      for (int k = 0; k < n; k++) acc += (double)t1[i * n + k] * t3[k * n + j];
      KT_NEAR(out[i * n + j], acc, 1e-4 * (1 + fabs(acc)));
    }
  kiln_graph_free(g);
}

KT_MAIN(KT_CASE(chain_of_8_is_one_kernel), KT_CASE(softmax_rows_at_most_two_kernels),
        KT_CASE(layernorm_at_most_two_kernels), KT_CASE(matmul_bias_relu_is_gemm_plus_one_kernel),
        KT_CASE(move_ops_match_c), KT_CASE(im2col_and_its_backward_match_c), KT_CASE(reductions_any_axes), KT_CASE(integer_and_bool_rules),
        KT_CASE(random_is_bit_exact_and_scalars_work), KT_CASE(aliased_outputs_stay_correct),
        KT_CASE(batched_matmul_with_broadcast_and_transpose), KT_CASE(gemm_updates_match_c), KT_CASE(bf16_gemm_updates_match_unfused_bits), KT_CASE(shared_kernels_across_graphs), KT_CASE(column_reductions),
        KT_CASE(scratch_is_reused_by_liveness),
        KT_CASE(collective_issued_early_and_its_buffers_kept_in_flight),
        KT_CASE(teardown))
