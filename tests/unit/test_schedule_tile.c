/* The schedule of an attention tile (schedule_fuse.c, "Attention tiles";
 * schedule_mem.c, tile_span): softmax(Q·Kᵀ)·V with Q, Kᵀ and V computed by
 * kernels of the graph. The three kernels end up next to each other, the
 * first marked; since a backend may run them interleaved, batch entry by
 * batch entry, every buffer they read lives until the tile's last kernel and
 * every buffer they write from its first (so none shares bytes with one they
 * read: O of an entry must not land on Q of a later one). Run on the cpu
 * backend (2 threads, 4 entries: tiled) against the same in double. */
#include "schedule_harness.h"

enum { B = 2, H = 2, L = 8, D = 4, DV = 6 };

static int mm(gb *b, int x, int y, int64_t m, int64_t n) {
  const int64_t s[4] = {B, H, m, n};
  int ins[2] = {x, y};
  return add(b, KILN_OP_MATMUL, KILN_F32, 4, s, 2, ins, 0, NULL, 0);
}

static int scaled(gb *b, int x, double f) {
  const kiln_gnode *n = &b->nodes[x];
  return bin(b, KILN_OP_MUL, x, cnst(b, KILN_F32, n->rank, n->shape, f));
}

KT_TEST(tile_kernels_adjacent_and_their_buffers_live_through_it) {
  gb b = {0};
  const int64_t qs[4] = {B, H, L, D}, ks[4] = {B, H, D, L}, vs[4] = {B, H, L, DV}, ss[4] = {B, H, L, L};
  int q = scaled(&b, leaf(&b, KILN_F32, 4, qs), 0.5);
  int kt = scaled(&b, leaf(&b, KILN_F32, 4, ks), 0.25);
  int v = scaled(&b, leaf(&b, KILN_F32, 4, vs), 2.0);
  int s = mm(&b, q, kt, L, L);
  int mx = reduce(&b, KILN_OP_REDUCE_MAX, s, 8);
  int e = un(&b, KILN_OP_EXP, bin(&b, KILN_OP_SUB, s, expand(&b, mx, 4, ss)));
  int p = bin(&b, KILN_OP_DIV, e, expand(&b, reduce(&b, KILN_OP_REDUCE_SUM, e, 8), 4, ss));
  int o = mm(&b, p, v, L, DV);
  int y = un(&b, KILN_OP_NEG, o);
  output(&b, y, -1);
  kiln_graph *g = finish(&b);

  kiln_sched *sc = NULL;
  kiln_err err = {0};
  KT_CHECK(kiln_sched_build(g, &sc, &err) == KILN_OK);
  int32_t t = -1;
  for (int32_t i = 0; sc && i < sc->n_kernels; i++)
    if (sc->kernels[i].tile) t = i;
  KT_CHECK(t >= 0);
  if (sc && t >= 0) {
    KT_CHECK(t + 2 < sc->n_kernels && sc->kernels[t].kind == KILN_SK_GEMM &&
             sc->kernels[t + 1].kind == KILN_SK_LOOP && sc->kernels[t + 2].kind == KILN_SK_GEMM);
    KT_EQ_INT(sc->kernels[t].node, s);
    KT_EQ_INT(sc->kernels[t + 2].node, o);
    const int read[4] = {q, kt, v, s}, written[3] = {s, p, o};
    for (int i = 0; i < 4; i++) {
      const kiln_sbuf *bf = &sc->bufs[sc->buf_of[read[i]]];
      KT_CHECK_MSG(bf->last >= t + 2, "node %d read by the tile lives until %d, the tile ends at %d", read[i],
                   (int)bf->last, (int)t + 2);
    }
    for (int i = 0; i < 3; i++) {
      const kiln_sbuf *bf = &sc->bufs[sc->buf_of[written[i]]];
      KT_CHECK_MSG(bf->first <= t, "node %d written by the tile lives from %d, the tile starts at %d", written[i],
                   (int)bf->first, (int)t);
      for (int j = 0; j < 4; j++) { /* no scratch bytes shared with what the tile reads */
        const kiln_sbuf *rb = &sc->bufs[sc->buf_of[read[j]]];
        if (bf == rb || bf->kind != KILN_SBUF_SCRATCH || rb->kind != KILN_SBUF_SCRATCH) continue;
        KT_CHECK(bf->offset + bf->bytes <= rb->offset || rb->offset + rb->bytes <= bf->offset);
      }
    }
  }
  kiln_sched_free(sc);

  static float xq[B * H * L * D], xk[B * H * D * L], xv[B * H * L * DV], got[B * H * L * DV];
  uint64_t st = 11;
  for (int i = 0; i < B * H * L * D; i++) xq[i] = frand(&st) * 3, xk[i] = frand(&st) * 3;
  for (int i = 0; i < B * H * L * DV; i++) xv[i] = frand(&st);
  void *in[] = {xq, xk, xv}, *out[] = {got};
  run(g, in, out);
  for (int bh = 0; bh < B * H; bh++)
    for (int i = 0; i < L; i++) {
      double sr[L], m = -INFINITY, den = 0;
      for (int j = 0; j < L; j++) {
        sr[j] = 0;
        for (int c = 0; c < D; c++) sr[j] += 0.5 * xq[(bh * L + i) * D + c] * 0.25 * xk[(bh * D + c) * L + j];
        m = fmax(m, sr[j]);
      }
      for (int j = 0; j < L; j++) den += exp(sr[j] - m);
      for (int c = 0; c < DV; c++) {
        double acc = 0;
        for (int j = 0; j < L; j++) acc += exp(sr[j] - m) / den * 2.0 * xv[(bh * L + j) * DV + c];
        KT_NEAR(got[(bh * L + i) * DV + c], -acc, 1e-5);
      }
    }
  kiln_graph_free(g);
}

KT_TEST(teardown) { harness_teardown(); }

KT_MAIN(KT_CASE(tile_kernels_adjacent_and_their_buffers_live_through_it), KT_CASE(teardown))
