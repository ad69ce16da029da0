/* The DDP bucket on the scheduler and the cpu backend: a concatenation of
 * gradients computed in place in its buffer, the all-reduce in that buffer,
 * and the memory plan of a later batch size resized from the first's. */
#include "schedule_harness.h"
#include "plan_compare.h"

/* c = concat(reshape(x·w), sum(z, axis 0), reshape(y·w)), r = all_reduce(c),
 * out = 2r for x [M, 6], w [6, 5], z [3, 5], y [2, 6]; extra: also 2·(x·w)
 * as an output (an input of c read twice), or x itself (an end copy). ids
 * (may be NULL): the products and the sum, c and r. */
enum { BUCKET_BLOCK_READ_TWICE = 1, BUCKET_INPUT_OUTPUT = 2 };
typedef struct bucket_ids {
  int p[3], c, r;
} bucket_ids;

static kiln_graph *bucket_graph(int64_t M, int extra, bucket_ids *ids) {
  enum { K = 6, N = 5, Z = 3, Y = 2 };
  gb b = {0};
  const int64_t sx[2] = {M, K}, sw[2] = {K, N}, sz[2] = {Z, N}, sy[2] = {Y, K}, sp[2] = {M, N}, sq[2] = {Y, N};
  const int64_t f1[1] = {M * N}, f2[1] = {N}, f3[1] = {Y * N}, ft[1] = {M * N + N + Y * N}, ax0 = 0, ra[2] = {0, 1};
  int x = leaf(&b, KILN_F32, 2, sx), w = leaf(&b, KILN_F32, 2, sw), z = leaf(&b, KILN_F32, 2, sz);
  int y = leaf(&b, KILN_F32, 2, sy);
  int i1[2] = {x, w}, i3[2] = {y, w};
  int p1 = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sp, 2, i1, 0, NULL, 0);
  int p2 = reduce(&b, KILN_OP_REDUCE_SUM, z, 1);
  int p3 = add(&b, KILN_OP_MATMUL, KILN_F32, 2, sq, 2, i3, 0, NULL, 0);
  int parts[3] = {add(&b, KILN_OP_RESHAPE, KILN_F32, 1, f1, 1, &p1, 0, NULL, 0),
                  add(&b, KILN_OP_RESHAPE, KILN_F32, 1, f2, 1, &p2, 0, NULL, 0),
                  add(&b, KILN_OP_RESHAPE, KILN_F32, 1, f3, 1, &p3, 0, NULL, 0)};
  int c = add(&b, KILN_OP_CONCAT, KILN_F32, 1, ft, 3, parts, 1, &ax0, 0);
  int r = add(&b, KILN_OP_ALL_REDUCE, KILN_F32, 1, ft, 1, &c, 2, ra, 0); /* SUM, a world of 1 */
  output(&b, bin(&b, KILN_OP_ADD, r, r), -1);
  if (extra == BUCKET_BLOCK_READ_TWICE) output(&b, bin(&b, KILN_OP_ADD, p1, p1), -1);
  if (extra == BUCKET_INPUT_OUTPUT) output(&b, x, -1);
  if (ids) *ids = (bucket_ids){{p1, p2, p3}, c, r};
  return finish(&b);
}

/* A DDP bucket: c = concat(reshape(x·w), sum(z, axis 0), reshape(y·w)),
 * r = all_reduce(c), out = 2r. Each input of c is computed straight into its
 * block of c's buffer (no concatenation kernel runs), the all-reduce runs in
 * that buffer, and the values are the concatenation's. In a second graph an
 * input is read twice (the product also feeds out2): then every input keeps
 * its own buffer and the concatenation is computed. */
KT_TEST(a_bucket_is_computed_in_place) {
  enum { M = 4, K = 6, N = 5, Z = 3, Y = 2, T = M * N + N + Y * N };
  static float xs[M * K], ws[K * N], zs[Z * N], ys[Y * K], out[T], out2[M * N], want[T];
  uint64_t seed = 11;
  for (int i = 0; i < M * K; i++) xs[i] = frand(&seed);
  for (int i = 0; i < K * N; i++) ws[i] = frand(&seed);
  for (int i = 0; i < Z * N; i++) zs[i] = frand(&seed);
  for (int i = 0; i < Y * K; i++) ys[i] = frand(&seed);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double a = 0;
      for (int k = 0; k < K; k++) a += (double)xs[i * K + k] * ws[k * N + j];
      want[i * N + j] = (float)(2 * a);
    }
  for (int j = 0; j < N; j++) {
    double a = 0;
    for (int i = 0; i < Z; i++) a += zs[i * N + j];
    want[M * N + j] = (float)(2 * a);
  }
  for (int i = 0; i < Y; i++)
    for (int j = 0; j < N; j++) {
      double a = 0;
      for (int k = 0; k < K; k++) a += (double)ys[i * K + k] * ws[k * N + j];
      want[M * N + N + i * N + j] = (float)(2 * a);
    }
  for (int shared = 0; shared < 2; shared++) {
    bucket_ids id;
    kiln_graph *g = bucket_graph(M, shared ? BUCKET_BLOCK_READ_TWICE : 0, &id);
    const int32_t p1 = id.p[0], p2 = id.p[1], p3 = id.p[2], c = id.c, r = id.r;
    kiln_sched *s = NULL;
    kiln_err err = {0};
    KT_CHECK_MSG(kiln_sched_build(g, &s, &err) == KILN_OK, "schedule: %s", err.msg);
    if (s) {
      const kiln_sbuf *bc = &s->bufs[s->buf_of[c]];
      KT_EQ_INT(s->kernels[s->owner[c]].n_stores, shared ? 1 : 0);
      KT_EQ_INT(s->buf_of[r], s->buf_of[c]); /* the all-reduce in place */
      const int32_t blocks[3] = {p1, p2, p3};
      const size_t at[3] = {0, sizeof(float) * M * N, sizeof(float) * (M * N + N)};
      for (int k = 0; k < 3; k++) {
        const kiln_sbuf *bk = &s->bufs[s->buf_of[blocks[k]]];
        int view = !shared;
        KT_CHECK_MSG(view ? bk->parent == s->buf_of[c] && bk->delta == at[k] : bk->parent < 0,
                     "graph %d: input %d: parent %d at %zu", shared, k, (int)bk->parent, bk->delta);
        if (view) {
          KT_CHECK(bk->offset == bc->offset + at[k]);
          KT_CHECK(bc->first <= bk->first && bk->last <= bc->last); /* the parent lives while its blocks do */
        }
      }
      kiln_sched_free(s);
    }
    void *in[] = {xs, ws, zs, ys}, *o[] = {out, out2};
    run(g, in, o);
    for (int i = 0; i < T; i++) KT_NEAR(out[i], want[i], 1e-4);
    for (int i = 0; shared && i < M * N; i++) KT_NEAR(out2[i], want[i], 1e-4);
    kiln_graph_free(g);
  }
}

/* The bucket graph above with M rows varying (the batch of a data-parallel
 * step): each later size's memory plan made from the plan at M = 101
 * (kiln_sched_build_like, which resizes the template's buffers and places
 * the blocks and the arena again) is the plan the size's own schedule
 * makes: the same buffers, bytes, block offsets, lifetimes and arena. */
KT_TEST(a_later_size_of_a_bucket_plans_memory_as_its_own_schedule_would) {
  kiln_graph *gt = bucket_graph(101, BUCKET_INPUT_OUTPUT, NULL);
  kiln_sched *t = NULL;
  kiln_err err = {0};
  KT_CHECK_MSG(kiln_sched_build(gt, &t, &err) == KILN_OK, "schedule: %s", err.msg);
  static const int64_t sizes[] = {2, 3, 7, 40, 1000};
  int blocks = 0, copies = 0;
  for (size_t k = 0; t && k < sizeof sizes / sizeof sizes[0]; k++) {
    kiln_graph *g = bucket_graph(sizes[k], BUCKET_INPUT_OUTPUT, NULL);
    kiln_sched *like = NULL, *full = NULL;
    KT_CHECK(kiln_sched_build_like(t, g, &like, &err) == KILN_OK);
    KT_CHECK(kiln_sched_build(g, &full, &err) == KILN_OK);
    if (like && full) {
      char what[32];
      snprintf(what, sizeof what, "M %lld", (long long)sizes[k]);
      blocks += kt_same_plan(like, full, what);
      for (int32_t p = 0; p < like->n_kernels; p++) copies += like->kernels[p].kind == KILN_SK_COPY;
    }
    kiln_sched_free(like);
    kiln_sched_free(full);
    kiln_graph_free(g);
  }
  KT_EQ_INT(blocks, 2 * 5); /* the reduction's and the second product's blocks, past the first, at every size */
  KT_EQ_INT(copies, 5);
  kiln_sched_free(t);
  kiln_graph_free(gt);
}

KT_TEST(teardown) { harness_teardown(); }

KT_MAIN(KT_CASE(a_bucket_is_computed_in_place),
        KT_CASE(a_later_size_of_a_bucket_plans_memory_as_its_own_schedule_would), KT_CASE(teardown))
