/* Tests of src/passes: each rewrite on hand-built graphs (node counts,
 * invariants, locations) and semantic preservation checked against the ref
 * backend (the oracle) on random inputs, plus a randomized graph test. */

#include "passes_harness.h"

/* ───────────── DCE ───────────── */

KT_TEST(test_dce_removes_dead_keeps_inputs) {
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23);
  tb_leaf(b, KILN_F32, 2, S23); /* unused input: must stay */
  int s = tb_scalar(b, KILN_F32); /* unused scalar input */
  int dead = tb_un(b, KILN_OP_EXP, x);
  tb_un(b, KILN_OP_ABS, dead);
  int z = tb_un(b, KILN_OP_TANH, x);
  tb_out(b, z, -1);
  kiln_graph *g = tb_graph(b);
  kiln_pass_stats st;
  kiln_graph *o = opt(g, &st);
  KT_CHECK(o != NULL);
  if (o) {
    KT_EQ_INT(o->n_nodes, 4); /* x, unused leaf, scalar, tanh */
    KT_EQ_INT(st.dce_removed, 2);
    KT_EQ_INT(o->nodes[o->input_node[1]].op, KILN_OP_LEAF);
    KT_EQ_INT(o->nodes[o->input_node[2]].op, KILN_OP_SCALAR);
    KT_EQ_INT(o->nodes[o->input_node[2]].loc.line, ENUM_LINE(g, s));
    KT_EQ_INT(out_node(o, 0)->op, KILN_OP_TANH);
    KT_EQ_INT(out_node(o, 0)->loc.line, ENUM_LINE(g, z));
    check_same_results(g, o, 2);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

/* ───────────── CSE ───────────── */

KT_TEST(test_cse_merges_identical_nodes) {
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23), y = tb_leaf(b, KILN_F32, 2, S23);
  int seed1 = tb_scalar(b, KILN_I64), seed2 = tb_scalar(b, KILN_I64);
  int a1 = tb_bin(b, KILN_OP_ADD, x, y), a2 = tb_bin(b, KILN_OP_ADD, x, y);
  int m = tb_bin(b, KILN_OP_MUL, a1, a2);
  /* equal constants merge, then the muls by them */
  int c1 = tb_const(b, KILN_F32, 2, S23, 2.0), c2 = tb_const(b, KILN_F32, 2, S23, 2.0);
  int cneg = tb_const(b, KILN_F32, 2, S23, -2.0);
  int b1 = tb_bin(b, KILN_OP_MUL, x, c1), b2 = tb_bin(b, KILN_OP_MUL, x, c2), b3 = tb_bin(b, KILN_OP_MUL, x, cneg);
  int sum = tb_bin(b, KILN_OP_ADD, tb_bin(b, KILN_OP_ADD, b1, b2), b3);
  /* -0.0 and +0.0 are different fills: not merged */
  int z1 = tb_const(b, KILN_F32, 2, S23, 0.0), z2 = tb_const(b, KILN_F32, 2, S23, -0.0);
  int zz = tb_bin(b, KILN_OP_ADD, tb_bin(b, KILN_OP_MAX, x, z1), tb_bin(b, KILN_OP_MAX, x, z2));
  /* RANDOM: same seed node merges, another seed does not */
  int64_t uni = 0;
  int r1 = tb_node(b, KILN_OP_RANDOM, KILN_F32, 2, S23, (int32_t[]){seed1}, 1, &uni, 1, 0);
  int r2 = tb_node(b, KILN_OP_RANDOM, KILN_F32, 2, S23, (int32_t[]){seed1}, 1, &uni, 1, 0);
  int r3 = tb_node(b, KILN_OP_RANDOM, KILN_F32, 2, S23, (int32_t[]){seed2}, 1, &uni, 1, 0);
  int rs = tb_bin(b, KILN_OP_ADD, tb_bin(b, KILN_OP_ADD, r1, r2), r3);
  tb_out(b, m, -1);
  tb_out(b, sum, -1);
  tb_out(b, zz, -1);
  tb_out(b, rs, -1);
  kiln_graph *g = tb_graph(b);
  kiln_pass_stats st;
  kiln_graph *o = opt(g, &st);
  KT_CHECK(o != NULL);
  if (o) {
    /* merged: a2, c2, b2, r2 */
    KT_EQ_INT(st.cse_merged, 4);
    KT_EQ_INT(o->n_nodes, g->n_nodes - 4);
    KT_EQ_INT(count_op(o, KILN_OP_RANDOM), 2);
    KT_EQ_INT(count_op(o, KILN_OP_SCALAR), 2);
    /* mul(a1, a1): both inputs are the first add, which keeps its location */
    const kiln_gnode *mn = out_node(o, 0);
    const int32_t *mi = kiln_gnode_inputs(o, mn);
    KT_EQ_INT(mi[0], mi[1]);
    KT_EQ_INT(o->nodes[mi[0]].loc.line, ENUM_LINE(g, a1));
    /* both zero constants survive */
    int pos = 0, neg = 0;
    for (int32_t i = 0; i < o->n_nodes; i++) {
      if (o->nodes[i].op != KILN_OP_CONST || o->nodes[i].fattr != 0.0) continue;
      if (signbit(o->nodes[i].fattr)) neg++;
      else pos++;
    }
    KT_EQ_INT(pos, 1);
    KT_EQ_INT(neg, 1);
    check_same_results(g, o, 3);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

/* ───────────── constant folding ───────────── */

/* Output o of the optimized graph is a CONST holding v (bitwise for floats)
 * at the folded node's line (line -1: the result equals an earlier constant,
 * and CSE keeps that one with its own location). */
static void expect_const(const kiln_graph *o, int out, double v, int line) {
  const kiln_gnode *n = out_node(o, out);
  KT_CHECK_MSG(n->op == KILN_OP_CONST, "output %d is %s, expected const", out, kiln_op_name(n->op));
  if (n->op != KILN_OP_CONST) return;
  KT_CHECK_MSG(!memcmp(&n->fattr, &v, sizeof v) || (isnan(v) && isnan(n->fattr)), "output %d holds %.17g, expected %.17g",
               out, n->fattr, v);
  if (line >= 0) KT_EQ_INT(n->loc.line, line);
}
static void expect_not_const(const kiln_graph *o, int out, int op) {
  const kiln_gnode *n = out_node(o, out);
  KT_CHECK_MSG(n->op == op, "output %d is %s, expected %s (not folded)", out, kiln_op_name(n->op), kiln_op_name(op));
}

KT_TEST(test_fold_elementwise) {
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23);
  int c2 = tb_const(b, KILN_F32, 2, S23, 2), c3 = tb_const(b, KILN_F32, 2, S23, 3);
  int a = tb_const(b, KILN_F32, 2, S23, 0.1), c = tb_const(b, KILN_F32, 2, S23, 0.2);
  int i_max = tb_const(b, KILN_I32, 2, S23, 2147483647.0), i_one = tb_const(b, KILN_I32, 2, S23, 1);
  int i_7 = tb_const(b, KILN_I32, 2, S23, 7), i_m2 = tb_const(b, KILN_I32, 2, S23, -2), i_0 = tb_const(b, KILN_I32, 2, S23, 0);
  int nan = tb_const(b, KILN_F32, 2, S23, NAN);
  int f27 = tb_const(b, KILN_F32, 2, S23, -2.7), big = tb_const(b, KILN_F32, 2, S23, 1e10);
  int t = tb_const(b, KILN_BOOL, 2, S23, 1), f = tb_const(b, KILN_BOOL, 2, S23, 0);
  int n0 = tb_bin(b, KILN_OP_MUL, tb_bin(b, KILN_OP_ADD, c2, c3), c3);        /* (2+3)*3 = 15 */
  int n1 = tb_bin(b, KILN_OP_ADD, a, c);                                     /* in float */
  int n2 = tb_bin(b, KILN_OP_ADD, i_max, i_one);                             /* wraps, as kernels do */
  int n3 = tb_bin(b, KILN_OP_DIV, i_7, i_m2);                                /* -3 */
  int n4 = tb_bin(b, KILN_OP_DIV, i_7, i_0);                                 /* 0 */
  int n5 = tb_un(b, KILN_OP_EXP, c2);                                        /* libm: kept */
  int n6 = tb_bin(b, KILN_OP_MAX, nan, c2);                                  /* NaN propagates */
  int n7 = tb_cast(b, f27, KILN_I32);                                        /* -2 */
  int n8 = tb_cast(b, big, KILN_I32);                                        /* out of range: INT32_MIN */
  int n9 = tb_bin(b, KILN_OP_LT, c2, c3);                                    /* true */
  int n10 = tb_where(b, tb_bin(b, KILN_OP_AND, t, f), c2, c3);               /* 3 */
  int n11 = tb_un(b, KILN_OP_SQRT, c2);                                      /* sqrtf(2) */
  int n12 = tb_bin(b, KILN_OP_DIV, c2, tb_const(b, KILN_F32, 2, S23, 0));    /* inf */
  int n13 = tb_bin(b, KILN_OP_ADD, t, f);                                    /* bool add = or */
  int n14 = tb_bin(b, KILN_OP_MUL, x, tb_bin(b, KILN_OP_SUB, c3, c2));       /* x * (3-2) -> x */
  int n15 = tb_cast(b, tb_const(b, KILN_I64, 2, S23, 16777217.0), KILN_F32); /* rounds to 16777216 */
  int n16 = tb_bin(b, KILN_OP_NE, nan, nan);                                 /* true */
  int outs[] = {n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11, n12, n13, n14, n15, n16};
  for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) tb_out(b, outs[k], -1);
  kiln_graph *g = tb_graph(b);
  kiln_pass_stats st;
  kiln_graph *o = opt(g, &st);
  KT_CHECK(o != NULL);
  if (o) {
    expect_const(o, 0, 15, ENUM_LINE(g, n0));
    expect_const(o, 1, (double)(0.1f + 0.2f), ENUM_LINE(g, n1));
    expect_const(o, 2, -2147483648.0, ENUM_LINE(g, n2));
    expect_const(o, 3, -3, ENUM_LINE(g, n3));
    expect_const(o, 4, 0, -1);
    expect_not_const(o, 5, KILN_OP_EXP);
    expect_const(o, 6, NAN, -1); /* equals the NaN constant: CSE keeps that one */
    expect_const(o, 7, -2, -1);
    expect_const(o, 8, -2147483648.0, -1);
    expect_const(o, 9, 1, -1);
    expect_const(o, 10, 3, -1);
    expect_const(o, 11, (double)sqrtf(2.0f), ENUM_LINE(g, n11));
    expect_const(o, 12, INFINITY, ENUM_LINE(g, n12));
    expect_const(o, 13, 1, -1);
    KT_EQ_INT(o->output_node[14], o->input_node[0]);
    expect_const(o, 15, 16777216.0, ENUM_LINE(g, n15));
    expect_const(o, 16, 1, -1);
    KT_CHECK(st.folded >= 14);
    KT_EQ_INT(st.simplified, 1);
    check_same_results(g, o, 2);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

KT_TEST(test_fold_move_and_reduce) {
  tb *b = tb_new();
  const int64_t s13[2] = {1, 3}, s43[2] = {4, 3}, s12[1] = {12}, s03[2] = {0, 3}, s63[2] = {6, 5};
  int c = tb_const(b, KILN_F32, 2, s13, 1.5);
  int e = tb_expand(b, c, 2, s43);
  int n0 = tb_reshape(b, e, 1, s12);
  int n1 = tb_permute(b, e, (const int64_t[]){1, 0});
  int n2 = tb_slice(b, e, (const int64_t[]){1, 0, 2, 1}, (const int64_t[]){2, 3});
  int n3 = tb_reduce(b, KILN_OP_REDUCE_SUM, e, 1);  /* [1,3] = 6 */
  int n4 = tb_reduce(b, KILN_OP_REDUCE_MAX, e, 3);  /* 1.5 */
  int n5 = tb_reduce(b, KILN_OP_ARGMAX, e, 0);      /* 0 */
  int n6 = tb_pad(b, e, (const int64_t[]){1, 0, 1, 2}, 1.5); /* same value: const [6,5] */
  int n7 = tb_pad(b, e, (const int64_t[]){1, 0, 1, 2}, 0.0); /* different: kept */
  int n8 = tb_concat(b, (const int32_t[]){e, e, e}, 3, 0);
  int ez = tb_const(b, KILN_F32, 2, s03, 2.0);
  int n9 = tb_reduce(b, KILN_OP_REDUCE_MAX, ez, 1); /* max over nothing: kept */
  int n10 = tb_reduce(b, KILN_OP_REDUCE_SUM, ez, 1); /* sum over nothing: 0 */
  int ib = tb_const(b, KILN_I32, 2, S23, 2147483647.0);
  int n11 = tb_reduce(b, KILN_OP_REDUCE_SUM, ib, 2); /* overflow: kept */
  int n12 = tb_concat(b, (const int32_t[]){e, tb_const(b, KILN_F32, 2, s43, 2.5)}, 2, 0); /* mixed: kept */
  int outs[] = {n0, n1, n2, n3, n4, n5, n6, n7, n8, n9, n10, n11, n12};
  for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++) tb_out(b, outs[k], -1);
  kiln_graph *g = tb_graph(b);
  kiln_graph *o = opt(g, NULL);
  KT_CHECK(o != NULL);
  if (o) {
    expect_const(o, 0, 1.5, ENUM_LINE(g, n0));
    expect_const(o, 1, 1.5, ENUM_LINE(g, n1));
    expect_const(o, 2, 1.5, ENUM_LINE(g, n2));
    expect_const(o, 3, 6.0, ENUM_LINE(g, n3));
    expect_const(o, 4, 1.5, ENUM_LINE(g, n4));
    expect_const(o, 5, 0.0, ENUM_LINE(g, n5));
    expect_const(o, 6, 1.5, ENUM_LINE(g, n6));
    KT_EQ_INT(out_node(o, 6)->shape[0], s63[0]);
    KT_EQ_INT(out_node(o, 6)->shape[1], s63[1]);
    expect_not_const(o, 7, KILN_OP_PAD);
    expect_const(o, 8, 1.5, ENUM_LINE(g, n8));
    expect_not_const(o, 9, KILN_OP_REDUCE_MAX);
    expect_const(o, 10, 0.0, ENUM_LINE(g, n10));
    expect_not_const(o, 11, KILN_OP_REDUCE_SUM);
    expect_not_const(o, 12, KILN_OP_CONCAT);
    check_same_results(g, o, 1);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

/* ───────────── algebraic simplification ───────────── */

KT_TEST(test_simplify_identities) {
  tb *b = tb_new();
  const int64_t s11[2] = {1, 1}, s6[1] = {6}, s32[2] = {3, 2}, s13[2] = {1, 3};
  int x = tb_leaf(b, KILN_F32, 2, S23), y = tb_leaf(b, KILN_F32, 2, S23);
  int bl = tb_leaf(b, KILN_BOOL, 2, S23), xi = tb_leaf(b, KILN_I32, 2, S23);
  int xs = tb_leaf(b, KILN_F32, 2, s13);
  /* the constants are broadcast from [1,1], as the frontend emits them */
  int one = tb_expand(b, tb_const(b, KILN_F32, 2, s11, 1), 2, S23);
  int zero = tb_expand(b, tb_const(b, KILN_F32, 2, s11, 0), 2, S23);
  int ione = tb_const(b, KILN_I32, 2, S23, 1);
  int btrue = tb_const(b, KILN_BOOL, 2, S23, 1);
  int r_outs[16], n_r = 0; /* outputs that must become x */
  r_outs[n_r++] = tb_bin(b, KILN_OP_MUL, x, one);
  r_outs[n_r++] = tb_bin(b, KILN_OP_MUL, one, x);
  r_outs[n_r++] = tb_bin(b, KILN_OP_ADD, x, zero);
  r_outs[n_r++] = tb_bin(b, KILN_OP_ADD, zero, x);
  r_outs[n_r++] = tb_bin(b, KILN_OP_SUB, x, zero);
  r_outs[n_r++] = tb_bin(b, KILN_OP_DIV, x, one);
  r_outs[n_r++] = tb_un(b, KILN_OP_NEG, tb_un(b, KILN_OP_NEG, x));
  r_outs[n_r++] = tb_reshape(b, tb_reshape(b, x, 1, s6), 2, S23);
  r_outs[n_r++] = tb_reshape(b, x, 2, S23);
  r_outs[n_r++] = tb_permute(b, tb_permute(b, x, (const int64_t[]){1, 0}), (const int64_t[]){1, 0});
  r_outs[n_r++] = tb_expand(b, x, 2, S23);
  r_outs[n_r++] = tb_cast(b, x, KILN_F32);
  r_outs[n_r++] = tb_slice(b, x, (const int64_t[]){0, 0, 1, 1}, S23);
  r_outs[n_r++] = tb_concat(b, (const int32_t[]){x}, 1, 1);
  r_outs[n_r++] = tb_pad(b, x, (const int64_t[]){0, 0, 0, 0}, 7.0);
  r_outs[n_r++] = tb_where(b, btrue, x, y);
  for (int k = 0; k < n_r; k++) tb_out(b, r_outs[k], -1);
  int o_not = tb_un(b, KILN_OP_NOT, tb_un(b, KILN_OP_NOT, bl));
  int o_and = tb_bin(b, KILN_OP_MUL, bl, btrue); /* bool mul is "and" */
  int o_int = tb_bin(b, KILN_OP_DIV, tb_bin(b, KILN_OP_MUL, ione, xi), ione);
  int o_rr = tb_reshape(b, tb_reshape(b, x, 1, s6), 2, s32);             /* one reshape of x */
  int p = tb_permute(b, tb_leaf(b, KILN_F32, 3, (const int64_t[]){2, 3, 4}), (const int64_t[]){1, 2, 0});
  int o_pp = tb_permute(b, p, (const int64_t[]){2, 0, 1});               /* identity */
  int o_pq = tb_permute(b, p, (const int64_t[]){0, 2, 1});               /* one permute */
  int o_ee = tb_expand(b, tb_expand(b, tb_reshape(b, xs, 2, s13), 2, s13), 2, S23); /* expand xs */
  int o_wcc = tb_where(b, bl, y, y);
  tb_out(b, o_not, -1);
  tb_out(b, o_and, -1);
  tb_out(b, o_int, -1);
  tb_out(b, o_rr, -1);
  tb_out(b, o_pp, -1);
  tb_out(b, o_pq, -1);
  tb_out(b, o_ee, -1);
  tb_out(b, o_wcc, -1);
  kiln_graph *g = tb_graph(b);
  kiln_pass_stats st;
  kiln_graph *o = opt(g, &st);
  KT_CHECK(o != NULL);
  if (o) {
    for (int k = 0; k < n_r; k++)
      KT_CHECK_MSG(o->output_node[k] == o->input_node[0], "output %d (%s) is %s, expected the input x", k,
                   kiln_op_name(g->nodes[r_outs[k]].op), kiln_op_name(out_node(o, k)->op));
    int base = n_r;
    KT_EQ_INT(o->output_node[base + 0], o->input_node[2]);
    KT_EQ_INT(o->output_node[base + 1], o->input_node[2]);
    KT_EQ_INT(o->output_node[base + 2], o->input_node[3]);
    const kiln_gnode *rr = out_node(o, base + 3);
    KT_EQ_INT(rr->op, KILN_OP_RESHAPE);
    KT_EQ_INT(kiln_gnode_inputs(o, rr)[0], o->input_node[0]);
    KT_EQ_INT(rr->loc.line, ENUM_LINE(g, o_rr));
    KT_EQ_INT(o->nodes[o->output_node[base + 4]].op, KILN_OP_LEAF);
    const kiln_gnode *pq = out_node(o, base + 5);
    KT_EQ_INT(pq->op, KILN_OP_PERMUTE);
    KT_EQ_INT(o->nodes[kiln_gnode_inputs(o, pq)[0]].op, KILN_OP_LEAF);
    KT_EQ_INT(pq->loc.line, ENUM_LINE(g, o_pq));
    /* p = [1,2,0], then [0,2,1]: out axis i = x axis p[q[i]] = [1,0,2] */
    KT_CHECK(pq->iattr[0] == 1 && pq->iattr[1] == 0 && pq->iattr[2] == 2);
    const kiln_gnode *ee = out_node(o, base + 6);
    KT_EQ_INT(ee->op, KILN_OP_EXPAND);
    KT_EQ_INT(kiln_gnode_inputs(o, ee)[0], o->input_node[4]);
    KT_EQ_INT(o->output_node[base + 7], o->input_node[1]);
    /* nothing but the inputs, the reshape, the permute and the expand remain */
    KT_EQ_INT(o->n_nodes, 6 + 3);
    check_same_results(g, o, 3);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

/* pad(a) + pad(b) with zero fills, along one axis, a and b adjacent there:
 * pad(concat(a, b)); a chain of three (the gradient of slicing a tensor into
 * three) is one concat. Gaps, overlaps, other fills and pads along two axes
 * stay sums. Values against ref, before and after. */
KT_TEST(test_simplify_pad_sums_become_concat) {
  for (int dt = 0; dt < 2; dt++) {
    int ty = dt ? KILN_I32 : KILN_F32;
    tb *b = tb_new();
    const int64_t s24[2] = {2, 4}, s64[2] = {6, 4};
    int x = tb_leaf(b, ty, 2, s64);
    int part[3], pd[3];
    static const int64_t at[3][4] = {{0, 0, 1, 1}, {2, 0, 1, 1}, {4, 0, 1, 1}};
    static const int64_t pads[3][4] = {{0, 0, 4, 0}, {2, 0, 2, 0}, {4, 0, 0, 0}};
    for (int k = 0; k < 3; k++) {
      part[k] = tb_slice(b, x, at[k], s24);
      pd[k] = tb_pad(b, part[k], pads[k], 0.0);
    }
    int o_all = tb_bin(b, KILN_OP_ADD, tb_bin(b, KILN_OP_ADD, pd[1], pd[0]), pd[2]); /* -> concat of 3 */
    int o_two = tb_bin(b, KILN_OP_ADD, pd[2], pd[1]);                              /* -> pad(concat) */
    int o_gap = tb_bin(b, KILN_OP_ADD, pd[0], pd[2]);                              /* a gap: a sum */
    int o_same = tb_bin(b, KILN_OP_ADD, pd[1], pd[1]);                             /* overlap: a sum */
    static const int64_t s23[2] = {2, 3}, pad2[4] = {2, 0, 2, 1};
    int o_fill = tb_bin(b, KILN_OP_ADD, pd[0], tb_pad(b, part[1], pads[1], 1.0));
    int two_axes = tb_pad(b, tb_slice(b, x, at[1], s23), pad2, 0.0);
    int o_axes = tb_bin(b, KILN_OP_ADD, pd[0], two_axes);
    int outs[6] = {o_all, o_two, o_gap, o_same, o_fill, o_axes};
    for (int k = 0; k < 6; k++) tb_out(b, outs[k], -1);
    kiln_graph *g = tb_graph(b);
    kiln_pass_stats st;
    kiln_graph *o = opt(g, &st);
    KT_CHECK(o != NULL);
    if (o) {
      const kiln_gnode *c = out_node(o, 0);
      KT_CHECK_MSG(c->op == KILN_OP_CONCAT && c->n_in == 3 && c->iattr[0] == 0, "three pads summed: %s of %d",
                   kiln_op_name(c->op), c->n_in);
      KT_EQ_INT(c->loc.line, ENUM_LINE(g, o_all));
      const kiln_gnode *p = out_node(o, 1);
      KT_CHECK_MSG(p->op == KILN_OP_PAD && p->iattr[0] == 2 && p->iattr[2] == 0 &&
                       o->nodes[kiln_gnode_inputs(o, p)[0]].op == KILN_OP_CONCAT,
                   "two adjacent pads: %s", kiln_op_name(p->op));
      for (int k = 2; k < 6; k++)
        KT_CHECK_MSG(out_node(o, k)->op == KILN_OP_ADD, "output %d must stay a sum, is %s", k,
                     kiln_op_name(out_node(o, k)->op));
      check_same_results(g, o, 3);
    }
    kiln_graph_free(o);
    kiln_graph_free(g);
    free(b);
  }
}

/* x*0 -> 0 and x-x -> 0 are wrong for Inf/NaN; 0-x and 1/x are not identities. */
KT_TEST(test_simplify_refuses_unsafe) {
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23);
  int zero = tb_const(b, KILN_F32, 2, S23, 0), one = tb_const(b, KILN_F32, 2, S23, 1);
  int inf = tb_bin(b, KILN_OP_DIV, x, zero); /* +-inf or NaN where x is 0 */
  tb_out(b, tb_bin(b, KILN_OP_MUL, inf, zero), -1);
  tb_out(b, tb_bin(b, KILN_OP_MUL, zero, inf), -1);
  tb_out(b, tb_bin(b, KILN_OP_SUB, inf, inf), -1);
  tb_out(b, tb_bin(b, KILN_OP_SUB, zero, x), -1);
  tb_out(b, tb_bin(b, KILN_OP_DIV, one, x), -1);
  tb_out(b, tb_bin(b, KILN_OP_POW, x, one), -1);
  kiln_graph *g = tb_graph(b);
  kiln_pass_stats st;
  kiln_graph *o = opt(g, &st);
  KT_CHECK(o != NULL);
  if (o) {
    KT_EQ_INT(st.simplified, 0);
    KT_EQ_INT(st.folded, 0);
    KT_EQ_INT(out_node(o, 0)->op, KILN_OP_MUL);
    KT_EQ_INT(out_node(o, 1)->op, KILN_OP_MUL);
    KT_EQ_INT(out_node(o, 2)->op, KILN_OP_SUB);
    KT_EQ_INT(out_node(o, 3)->op, KILN_OP_SUB);
    KT_EQ_INT(out_node(o, 4)->op, KILN_OP_DIV);
    KT_EQ_INT(out_node(o, 5)->op, KILN_OP_POW);
    check_same_results(g, o, 3);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

/* An identity on a broadcast operand keeps the broadcast: the output shape
 * never changes, and the replacement keeps the right location. */
KT_TEST(test_simplify_keeps_output_shape) {
  tb *b = tb_new();
  const int64_t s13[2] = {1, 3};
  int x = tb_leaf(b, KILN_F32, 2, s13);
  int ex = tb_expand(b, x, 2, S23);
  int m = tb_bin(b, KILN_OP_MUL, ex, tb_const(b, KILN_F32, 2, S23, 1));
  tb_out(b, m, 0 - 1);
  tb_out(b, tb_bin(b, KILN_OP_ADD, tb_const(b, KILN_F32, 2, S23, 0), ex), -1);
  kiln_graph *g = tb_graph(b);
  kiln_graph *o = opt(g, NULL);
  KT_CHECK(o != NULL);
  if (o) {
    const kiln_gnode *n = out_node(o, 0);
    KT_EQ_INT(n->op, KILN_OP_EXPAND);
    KT_EQ_INT(n->loc.line, ENUM_LINE(g, ex));
    KT_EQ_INT(o->output_node[0], o->output_node[1]);
    KT_EQ_INT(o->n_nodes, 2);
    check_same_results(g, o, 2);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

/* ───────────── interface and invariants ───────────── */

KT_TEST(test_outputs_aliases_and_order) {
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23), w = tb_leaf(b, KILN_F32, 2, S23);
  int sc = tb_scalar(b, KILN_F32);
  int lr = tb_expand(b, tb_reshape(b, sc, 2, (const int64_t[]){1, 1}), 2, S23);
  /* w <- w - lr * x  (donated), and x*1 (becomes the input itself) */
  int upd = tb_bin(b, KILN_OP_SUB, w, tb_bin(b, KILN_OP_MUL, lr, x));
  int same = tb_bin(b, KILN_OP_MUL, x, tb_const(b, KILN_F32, 2, S23, 1));
  tb_out(b, same, -1);
  tb_out(b, upd, 1);
  tb_out(b, same, -1);
  kiln_graph *g = tb_graph(b);
  kiln_graph *o = opt(g, NULL);
  KT_CHECK(o != NULL);
  if (o) {
    KT_EQ_INT(o->output_node[0], o->input_node[0]);
    KT_EQ_INT(o->output_node[2], o->input_node[0]);
    KT_EQ_INT(out_node(o, 1)->op, KILN_OP_SUB);
    KT_EQ_INT(o->output_alias[1], 1);
    check_same_results(g, o, 3);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

KT_TEST(test_errors) {
  kiln_err err = {0};
  kiln_graph *o = (kiln_graph *)&err; /* must be cleared */
  kiln_pass_stats st;
  st.folded = 99;
  KT_EQ_INT(kiln_passes_run(NULL, &o, &st, &err), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(o == NULL);
  KT_EQ_INT(st.folded, 0);
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23);
  int n = tb_un(b, KILN_OP_NEG, x);
  tb_out(b, n, -1);
  kiln_graph *g = tb_graph(b);
  KT_EQ_INT(kiln_passes_run(g, NULL, NULL, NULL), KILN_ERR_INVALID_ARGUMENT);
  /* a forward reference: a malformed graph is reported, never crashes */
  g->in_idx[g->nodes[n].in_off] = n;
  o = (kiln_graph *)&err;
  KT_EQ_INT(kiln_passes_run(g, &o, NULL, &err), KILN_ERR_INTERNAL);
  KT_CHECK(o == NULL);
  KT_STR_CONTAINS(err.msg, "not topological");
  g->in_idx[g->nodes[n].in_off] = 12345;
  KT_EQ_INT(kiln_passes_run(g, &o, NULL, &err), KILN_ERR_INTERNAL);
  g->in_idx[g->nodes[n].in_off] = x;
  g->output_node[0] = 7;
  KT_EQ_INT(kiln_passes_run(g, &o, NULL, &err), KILN_ERR_INTERNAL);
  KT_STR_CONTAINS(err.msg, "output 0");
  kiln_graph_free(g);
  free(b);
}

/* KILN_VERIFY=1 turns verification on in any build: a semantically invalid
 * input graph is reported as the frontend's bug. (Set through the
 * configuration, which the passes read, as if the variable had been set
 * when it was loaded.) */
KT_TEST(test_verify_env) {
  kiln_config saved = *kiln_cfg(), c = saved;
  c.verify = "1";
  kiln_config_set(&c);
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23), y = tb_leaf(b, KILN_F32, 2, (const int64_t[]){3, 2});
  tb_out(b, tb_bin(b, KILN_OP_ADD, x, y), -1); /* shapes differ: invalid */
  kiln_graph *g = tb_graph(b);
  kiln_graph *o = NULL;
  kiln_err err = {0};
  KT_EQ_INT(kiln_passes_run(g, &o, NULL, &err), KILN_ERR_INTERNAL);
  KT_STR_CONTAINS(err.msg, "before the passes");
  KT_CHECK(o == NULL);
  kiln_graph_free(g);
  /* and a valid graph passes with every intermediate result verified */
  memset(b, 0, sizeof *b);
  x = tb_leaf(b, KILN_F32, 2, S23);
  tb_out(b, tb_un(b, KILN_OP_NEG, tb_un(b, KILN_OP_NEG, tb_bin(b, KILN_OP_MUL, x, tb_const(b, KILN_F32, 2, S23, 1)))), -1);
  g = tb_graph(b);
  o = opt(g, NULL);
  KT_CHECK(o && o->n_nodes == 1);
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
  kiln_config_set(&saved);
}

/* ───────────── randomized: ref(before) == ref(after) ───────────── */

typedef struct rg {
  tb *b;
  uint64_t s;
  int32_t f[512], nf; /* f32 [2,3] nodes */
  int32_t i[512], ni; /* i32 [2,3] */
  int32_t bo[512], nb; /* bool [2,3] */
  int seed_node;
} rg;

static int rnd(rg *r, int n) { return (int)(splitmix(&r->s) % (uint64_t)n); }
static int pick_f(rg *r) { return r->f[rnd(r, r->nf)]; }
static int pick_i(rg *r) { return r->i[rnd(r, r->ni)]; }
static int pick_b(rg *r) { return r->bo[rnd(r, r->nb)]; }
static void add_f(rg *r, int x) { if (r->nf < 512) r->f[r->nf++] = x; }
static void add_i(rg *r, int x) { if (r->ni < 512) r->i[r->ni++] = x; }
static void add_b(rg *r, int x) { if (r->nb < 512) r->bo[r->nb++] = x; }

/* A constant of the pool's shape, sometimes broadcast from a smaller fill. */
static int rconst(rg *r, int dt) {
  static const double vals[] = {0, 1, -1, 2, 0.5, 3, -0.25, 1, 0};
  double v = vals[rnd(r, 9)];
  if (dt == KILN_BOOL) v = rnd(r, 2);
  switch (rnd(r, 3)) {
    case 0: return tb_const(r->b, dt, 2, S23, v);
    case 1: return tb_expand(r->b, tb_const(r->b, dt, 2, (const int64_t[]){1, 1}, v), 2, S23);
    default: return tb_expand(r->b, tb_const(r->b, dt, 2, (const int64_t[]){1, 3}, v), 2, S23);
  }
}

static void rg_step(rg *r) {
  tb *b = r->b;
  static const int fbin[] = {KILN_OP_ADD, KILN_OP_SUB, KILN_OP_MUL, KILN_OP_DIV, KILN_OP_MAX, KILN_OP_MIN};
  static const int ibin[] = {KILN_OP_ADD, KILN_OP_SUB, KILN_OP_MUL, KILN_OP_DIV, KILN_OP_MAX, KILN_OP_MIN};
  static const int fun[] = {KILN_OP_NEG, KILN_OP_ABS, KILN_OP_RELU, KILN_OP_EXP, KILN_OP_SQRT, KILN_OP_TANH};
  static const int cmp[] = {KILN_OP_EQ, KILN_OP_NE, KILN_OP_LT, KILN_OP_LE, KILN_OP_GT, KILN_OP_GE};
  switch (rnd(r, 20)) {
    case 0: add_f(r, rconst(r, KILN_F32)); break;
    case 1: add_f(r, tb_bin(b, fbin[rnd(r, 6)], pick_f(r), pick_f(r))); break;
    case 2: { /* an identity opportunity */
      int x = pick_f(r);
      int one = rconst(r, KILN_F32);
      int k = rnd(r, 5);
      int op = k == 0 || k == 1 ? KILN_OP_MUL : k == 2 ? KILN_OP_ADD : k == 3 ? KILN_OP_SUB : KILN_OP_DIV;
      add_f(r, k == 1 ? tb_bin(b, op, one, x) : tb_bin(b, op, x, one));
      break;
    }
    case 3: add_f(r, tb_un(b, fun[rnd(r, 6)], pick_f(r))); break;
    case 4: { /* a duplicate (CSE) of a recent computed node */
      int x = pick_f(r);
      const kiln_gnode *n = tb_at(b, x);
      if (n->op == KILN_OP_LEAF || n->op == KILN_OP_SCALAR) break;
      add_f(r, tb_node(b, n->op, n->dtype, n->rank, n->shape, b->in_idx + n->in_off, n->n_in, n->iattr, n->n_iattr,
                       n->fattr));
      break;
    }
    case 5: { /* reshape chain */
      int x = tb_reshape(b, pick_f(r), 1, (const int64_t[]){6});
      x = tb_reshape(b, x, 2, (const int64_t[]){3, 2});
      if (rnd(r, 2)) x = tb_un(b, KILN_OP_NEG, x);
      add_f(r, tb_reshape(b, x, 2, S23));
      break;
    }
    case 6: { /* permute chain through [3,2] */
      int x = tb_permute(b, pick_f(r), (const int64_t[]){1, 0});
      if (rnd(r, 2)) x = tb_bin(b, KILN_OP_ADD, x, tb_permute(b, pick_f(r), (const int64_t[]){1, 0}));
      add_f(r, tb_permute(b, x, (const int64_t[]){1, 0}));
      break;
    }
    case 7: { /* reduce and broadcast back */
      int x = pick_f(r);
      int ops[] = {KILN_OP_REDUCE_SUM, KILN_OP_REDUCE_MAX, KILN_OP_REDUCE_MIN};
      int mask = 1 + rnd(r, 3);
      int red = tb_reduce(b, ops[rnd(r, 3)], x, mask);
      add_f(r, tb_expand(b, red, 2, S23));
      break;
    }
    case 8: { /* compare and select */
      int c = tb_bin(b, cmp[rnd(r, 6)], pick_f(r), pick_f(r));
      add_b(r, c);
      add_f(r, tb_where(b, c, pick_f(r), pick_f(r)));
      break;
    }
    case 9: { /* integer arithmetic */
      int a = rnd(r, 2) ? tb_cast(b, pick_f(r), KILN_I32) : pick_i(r);
      int c = rnd(r, 2) ? rconst(r, KILN_I32) : pick_i(r);
      int x = tb_bin(b, ibin[rnd(r, 6)], a, c);
      add_i(r, x);
      add_f(r, tb_cast(b, x, KILN_F32));
      break;
    }
    case 10: { /* no-op movement */
      int x = pick_f(r);
      switch (rnd(r, 5)) {
        case 0: x = tb_slice(b, x, (const int64_t[]){0, 0, 1, 1}, S23); break;
        case 1: x = tb_pad(b, x, (const int64_t[]){0, 0, 0, 0}, 0.0); break;
        case 2: x = tb_concat(b, (const int32_t[]){x}, 1, rnd(r, 2)); break;
        case 3: x = tb_expand(b, x, 2, S23); break;
        default: x = tb_cast(b, x, KILN_F32); break;
      }
      add_f(r, x);
      break;
    }
    case 11: { /* pad then slice back */
      int x = pick_f(r);
      double v = rnd(r, 2) ? 0.0 : 1.5;
      int p = tb_pad(b, x, (const int64_t[]){1, 0, 0, 2}, v);
      add_f(r, tb_slice(b, p, (const int64_t[]){rnd(r, 2), rnd(r, 3), 1, 1}, S23));
      break;
    }
    case 12: { /* concat then slice */
      int c = tb_concat(b, (const int32_t[]){pick_f(r), pick_f(r)}, 2, 0);
      add_f(r, tb_slice(b, c, (const int64_t[]){rnd(r, 3), 0, 1, 1}, S23));
      break;
    }
    case 13: { /* logic */
      int ops[] = {KILN_OP_AND, KILN_OP_OR, KILN_OP_NOT, KILN_OP_ADD, KILN_OP_MUL};
      int op = ops[rnd(r, 5)];
      int a = rnd(r, 3) ? pick_b(r) : rconst(r, KILN_BOOL);
      int x = op == KILN_OP_NOT ? tb_un(b, op, a) : tb_bin(b, op, a, rnd(r, 2) ? pick_b(r) : rconst(r, KILN_BOOL));
      add_b(r, x);
      break;
    }
    case 14: add_f(r, tb_where(b, rconst(r, KILN_BOOL), pick_f(r), pick_f(r))); break;
    case 15: { /* constant-only arithmetic */
      int x = tb_bin(b, fbin[rnd(r, 6)], rconst(r, KILN_F32), rconst(r, KILN_F32));
      if (rnd(r, 2)) x = tb_un(b, fun[rnd(r, 3)], x);
      add_f(r, x);
      break;
    }
    case 16: { /* argmax back to f32 */
      int a = tb_reduce(b, KILN_OP_ARGMAX, pick_f(r), rnd(r, 2));
      int x = tb_cast(b, a, KILN_F32);
      add_f(r, tb_expand(b, x, 2, S23));
      break;
    }
    case 17: add_f(r, tb_node(b, KILN_OP_IOTA, KILN_F32, 2, S23, NULL, 0, (const int64_t[]){rnd(r, 2)}, 1, 0)); break;
    case 18: { /* random numbers: the same seed twice */
      int64_t dist = rnd(r, 2);
      add_f(r, tb_node(b, KILN_OP_RANDOM, KILN_F32, 2, S23, (const int32_t[]){r->seed_node}, 1, &dist, 1, 0));
      break;
    }
    default: add_f(r, tb_un(b, KILN_OP_NEG, tb_un(b, KILN_OP_NEG, pick_f(r)))); break;
  }
}

static kiln_graph *random_graph(uint64_t seed, int steps) {
  rg r;
  memset(&r, 0, sizeof r);
  r.s = seed;
  r.b = tb_new();
  tb *b = r.b;
  add_f(&r, tb_leaf(b, KILN_F32, 2, S23));
  add_f(&r, tb_leaf(b, KILN_F32, 2, S23));
  add_i(&r, tb_leaf(b, KILN_I32, 2, S23));
  add_b(&r, tb_leaf(b, KILN_BOOL, 2, S23));
  int sc = tb_scalar(b, KILN_F32);
  add_f(&r, tb_expand(b, tb_reshape(b, sc, 2, (const int64_t[]){1, 1}), 2, S23));
  r.seed_node = tb_scalar(b, KILN_I64);
  tb_leaf(b, KILN_F32, 1, (const int64_t[]){5}); /* never used */
  for (int k = 0; k < steps; k++) rg_step(&r);
  int n_out = 1 + rnd(&r, 3);
  for (int o = 0; o < n_out; o++) {
    int which = rnd(&r, 4);
    int x = which == 0 ? pick_i(&r) : which == 1 ? pick_b(&r) : r.f[r.nf - 1 - rnd(&r, r.nf < 4 ? r.nf : 4)];
    /* output 0 may be donated into input 0 when the sizes match */
    int alias = o == 0 && tb_at(b, x)->dtype == KILN_F32 && rnd(&r, 2) ? 0 : -1;
    tb_out(b, x, alias);
  }
  if (rnd(&r, 2)) { /* one output reading many nodes, so few die */
    int acc = pick_f(&r);
    for (int k = 0; k < 8; k++) acc = tb_bin(b, KILN_OP_ADD, acc, pick_f(&r));
    tb_out(b, acc, -1);
  }
  kiln_graph *g = tb_graph(b);
  free(b);
  return g;
}

KT_TEST(test_random_graphs) {
  int total_before = 0, total_after = 0;
  kiln_pass_stats sum;
  memset(&sum, 0, sizeof sum);
  for (int t = 0; t < 300; t++) {
    kiln_graph *g = random_graph(0x5eed0000u + (uint64_t)t, 10 + t % 50);
    char msg[512];
    KT_CHECK_MSG(kiln_graph_verify(g, msg, sizeof msg) == 0, "generator made an invalid graph: %s", msg);
    kiln_pass_stats st;
    int failed_before = kt_failed_checks;
    kiln_graph *o = opt(g, &st);
    if (o) {
      check_same_results(g, o, 2);
      /* a fixed point: running again changes nothing */
      kiln_pass_stats st2;
      kiln_graph *o2 = opt(o, &st2);
      KT_CHECK(o2 && kiln_graph_equal(o, o2));
      KT_EQ_INT(st2.folded + st2.simplified + st2.cse_merged + st2.dce_removed, 0);
      kiln_graph_free(o2);
      total_before += st.nodes_before;
      total_after += st.nodes_after;
      sum.folded += st.folded;
      sum.simplified += st.simplified;
      sum.cse_merged += st.cse_merged;
      sum.dce_removed += st.dce_removed;
    }
    if (kt_failed_checks != failed_before) {
      fprintf(stderr, "  (random graph %d)\n", t);
      kiln_graph_free(o);
      kiln_graph_free(g);
      break;
    }
    kiln_graph_free(o);
    kiln_graph_free(g);
  }
  /* the generator must actually exercise every pass */
  KT_CHECK(sum.folded > 100 && sum.simplified > 100 && sum.cse_merged > 50 && sum.dce_removed > 100);
  KT_CHECK(total_after < total_before);
  fprintf(stderr, "  random graphs: %d -> %d nodes; folded %d, simplified %d, cse %d, dce %d\n", total_before,
          total_after, sum.folded, sum.simplified, sum.cse_merged, sum.dce_removed);
}

/* ───────────── scale ───────────── */

/* 10,000+ nodes: a long chain full of identities and duplicates collapses
 * to its essential nodes (and the passes stay linear: this would take
 * seconds if any pass were quadratic). */
KT_TEST(test_large_graph) {
  tb *b = tb_new();
  int x = tb_leaf(b, KILN_F32, 2, S23), y = tb_leaf(b, KILN_F32, 2, S23);
  int one = tb_const(b, KILN_F32, 2, S23, 1);
  int acc = x;
  for (int k = 0; k < 1000; k++) {
    int a = tb_bin(b, KILN_OP_MUL, acc, one);                 /* -> acc */
    int c = tb_bin(b, KILN_OP_ADD, a, y);                     /* kept */
    int d = tb_bin(b, KILN_OP_ADD, acc, y);                   /* same as c after simplify: CSE */
    int e = tb_un(b, KILN_OP_NEG, tb_un(b, KILN_OP_NEG, d));  /* -> d */
    int f = tb_reshape(b, tb_reshape(b, e, 1, (const int64_t[]){6}), 2, S23); /* -> e */
    tb_un(b, KILN_OP_EXP, f);                                 /* dead */
    acc = tb_bin(b, KILN_OP_MAX, f, tb_bin(b, KILN_OP_MUL, c, tb_const(b, KILN_F32, 2, S23, 0.5)));
  }
  tb_out(b, acc, -1);
  kiln_graph *g = tb_graph(b);
  KT_CHECK(g->n_nodes > 10000);
  kiln_pass_stats st;
  kiln_graph *o = opt(g, &st);
  KT_CHECK(o != NULL);
  if (o) {
    /* per step: add, const 0.5 (one after CSE), mul, max */
    KT_EQ_INT(o->n_nodes, 2 + 1 + 3 * 1000);
    check_same_results(g, o, 1);
    fprintf(stderr, "  %d -> %d nodes in %.2f ms\n", st.nodes_before, st.nodes_after, st.ns / 1e6);
  }
  kiln_graph_free(o);
  kiln_graph_free(g);
  free(b);
}

KT_MAIN(KT_CASE(test_dce_removes_dead_keeps_inputs), KT_CASE(test_cse_merges_identical_nodes),
        KT_CASE(test_fold_elementwise), KT_CASE(test_fold_move_and_reduce), KT_CASE(test_simplify_identities),
        KT_CASE(test_simplify_refuses_unsafe), KT_CASE(test_simplify_keeps_output_shape),
        KT_CASE(test_simplify_pad_sums_become_concat),
        KT_CASE(test_outputs_aliases_and_order), KT_CASE(test_errors), KT_CASE(test_verify_env),
        KT_CASE(test_random_graphs), KT_CASE(test_large_graph))
