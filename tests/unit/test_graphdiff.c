/* Graph diffs (src/debug/graphdiff.h): exact difference lines for hand-built
 * graph pairs, the distance, the summary line, and the classification of
 * compile histories (growing tensor, varying input, other, none). Graphs are
 * built by hand with explicit source locations, so every expected line is
 * written out in full here. */
#include <stdio.h>
#include <string.h>

#include "debug/graphdiff.h"
#include "debug/graphtext.h"
#include "kt.h"

#include "backend/graph_builder.h"

static void at(gb *b, int node, const char *file, int line) { b->g->nodes[node].loc = (kiln_loc){file, line}; }

/* S2: acc = concat(acc, piece) at eval.c:41, acc kept from the last step. */
static kiln_graph *growing(int64_t rows) {
  gb b = gb_new();
  int acc = leaf(&b, KILN_F32, SH(rows, 10));
  at(&b, acc, "eval.c", 40);
  int piece = leaf(&b, KILN_F32, SH(8, 10));
  at(&b, piece, "/home/u/proj/eval.c", 39); /* directories do not matter */
  int c = nd(&b, KILN_OP_CONCAT, KILN_F32, SH(rows + 8, 10), IN(acc, piece), AT(0), 0);
  at(&b, c, "eval.c", 41);
  out(&b, c, -1);
  return b.g;
}

/* S4: x [8, len] at train.c:88, row sums at train.c:90. */
static kiln_graph *varying(int64_t len) {
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(8, len));
  at(&b, x, "train.c", 88);
  int s = nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, SH(8, 1), IN(x), AT(2), 0);
  at(&b, s, "train.c", 90);
  out(&b, s, -1);
  return b.g;
}

KT_TEST(equal_graphs_have_no_differences) {
  kiln_graph *a = growing(96), *b = growing(96);
  char buf[256] = "";
  KT_EQ_INT(kiln_graphdiff_format(a, b, buf, sizeof buf), 0);
  KT_CHECK(strcmp(buf, "") == 0);
  KT_NEAR(kiln_graphdiff_distance(a, b), 0, 0);
  kiln_diff_stats st;
  kiln_graphdiff_format_stats(a, b, buf, sizeof buf, &st);
  char sum[128];
  KT_CHECK(strcmp(kiln_graphdiff_summary(&st, sum, sizeof sum), "no differences") == 0);
  kiln_graph_free(a);
  kiln_graph_free(b);
}

KT_TEST(shape_changes_name_the_dimension) {
  kiln_graph *a = growing(96), *b = growing(104);
  char buf[1024] = "";
  KT_EQ_INT(kiln_graphdiff_format(a, b, buf, sizeof buf), 2);
  const char *want = "  ~ input 0 (leaf) at eval.c:40: shape [96,10] -> [104,10] (dim 0: 96 -> 104)\n"
                     "  ~ concat at eval.c:41: shape [104,10] -> [112,10] (dim 0: 104 -> 112)\n";
  KT_CHECK_MSG(strcmp(buf, want) == 0, "got:\n%s", buf);
  KT_NEAR(kiln_graphdiff_distance(a, b), 0.2, 1e-12);
  /* appends after existing text */
  char buf2[1024] = "header\n";
  kiln_graphdiff_format(a, b, buf2, sizeof buf2);
  KT_CHECK(strncmp(buf2, "header\n  ~ input 0", 18) == 0);
  /* truncation keeps a NUL and the count */
  char small[20] = "";
  KT_EQ_INT(kiln_graphdiff_format(a, b, small, sizeof small), 2);
  KT_EQ_INT(strlen(small), 19);
  kiln_graph_free(a);
  kiln_graph_free(b);
}

KT_TEST(added_removed_rewired_and_outputs) {
  gb o = gb_new();
  int x = leaf(&o, KILN_F32, SH(8, 64));
  at(&o, x, "model.c", 10);
  int m = nd(&o, KILN_OP_MUL, KILN_F32, SH(8, 64), IN(x, x), AT0, 0);
  at(&o, m, "model.c", 15);
  int ng = nd(&o, KILN_OP_NEG, KILN_F32, SH(8, 64), IN(m), AT0, 0);
  at(&o, ng, "model.c", 16);
  out(&o, ng, -1);
  gb n = gb_new();
  x = leaf(&n, KILN_F32, SH(8, 64));
  at(&n, x, "model.c", 10);
  ng = nd(&n, KILN_OP_NEG, KILN_F32, SH(8, 64), IN(x), AT0, 0);
  at(&n, ng, "model.c", 16);
  int r = nd(&n, KILN_OP_REDUCE_SUM, KILN_F32, SH(8, 1), IN(ng), AT(2), 0);
  at(&n, r, "model.c", 12);
  out(&n, r, -1);
  char buf[1024] = "";
  kiln_diff_stats st;
  KT_EQ_INT(kiln_graphdiff_format_stats(o.g, n.g, buf, sizeof buf, &st), 4);
  const char *want = "  ~ neg at model.c:16: inputs %1 -> %0\n"
                     "  + reduce_sum at model.c:12 [8,1]\n"
                     "  - mul at model.c:15 [8,64]\n"
                     "  ~ output 0: now reduce_sum at model.c:12 (was neg at model.c:16)\n";
  KT_CHECK_MSG(strcmp(buf, want) == 0, "got:\n%s", buf);
  char sum[160];
  kiln_graphdiff_summary(&st, sum, sizeof sum);
  KT_CHECK_MSG(strcmp(sum, "4 differences: 1 node added, 1 node removed, 1 node rewired, 1 output changed") == 0,
               "got: %s", sum);
  KT_NEAR(kiln_graphdiff_distance(o.g, n.g), 4, 1e-12);
  /* the reverse direction swaps + and - */
  buf[0] = 0;
  kiln_graphdiff_format(n.g, o.g, buf, sizeof buf);
  KT_STR_CONTAINS(buf, "  + mul at model.c:15 [8,64]\n");
  KT_STR_CONTAINS(buf, "  - reduce_sum at model.c:12 [8,1]\n");
  kiln_graph_free(o.g);
  kiln_graph_free(n.g);
}

KT_TEST(dtype_and_attribute_changes) {
  gb o = gb_new(), n = gb_new();
  int x = leaf(&o, KILN_F32, SH(4, 8));
  int s = nd(&o, KILN_OP_SLICE, KILN_F32, SH(4, 4), IN(x), AT(0, 0, 1, 1), 0);
  int c = nd(&o, KILN_OP_CAST, KILN_F32, SH(4, 4), IN(s), AT0, 0);
  out(&o, c, -1);
  x = leaf(&n, KILN_F32, SH(4, 8));
  s = nd(&n, KILN_OP_SLICE, KILN_F32, SH(4, 4), IN(x), AT(0, 4, 1, 1), 0);
  c = nd(&n, KILN_OP_CAST, KILN_F64, SH(4, 4), IN(s), AT0, 0);
  out(&n, c, -1);
  char buf[1024] = "";
  KT_EQ_INT(kiln_graphdiff_format(o.g, n.g, buf, sizeof buf), 2);
  /* builder locations: this file, line 1000 + node index */
  const char *want = "  ~ slice at test_graphdiff.c:1001: attrs start=[0,0] step=[1,1] -> start=[0,4] step=[1,1]\n"
                     "  ~ cast at test_graphdiff.c:1002: dtype f32 -> f64\n";
  KT_CHECK_MSG(strcmp(buf, want) == 0, "got:\n%s", buf);
  KT_NEAR(kiln_graphdiff_distance(o.g, n.g), 2, 1e-12);
  kiln_graph_free(o.g);
  kiln_graph_free(n.g);
}

KT_TEST(output_alias_change) {
  gb o = gb_new(), n = gb_new();
  int x = leaf(&o, KILN_F32, SH(4));
  out(&o, nd(&o, KILN_OP_NEG, KILN_F32, SH(4), IN(x), AT0, 0), 0);
  x = leaf(&n, KILN_F32, SH(4));
  out(&n, nd(&n, KILN_OP_NEG, KILN_F32, SH(4), IN(x), AT0, 0), -1);
  char buf[256] = "";
  KT_EQ_INT(kiln_graphdiff_format(o.g, n.g, buf, sizeof buf), 1);
  KT_CHECK_MSG(strcmp(buf, "  ~ output 0: aliases input #0 -> none\n") == 0, "got:\n%s", buf);
  KT_NEAR(kiln_graphdiff_distance(o.g, n.g), 1, 1e-12);
  kiln_graph_free(o.g);
  kiln_graph_free(n.g);
}

KT_TEST(distance_prefers_the_closer_graph) {
  kiln_graph *a = varying(87), *b = varying(96), *c = growing(96);
  KT_CHECK(kiln_graphdiff_distance(a, b) > 0);
  KT_CHECK(kiln_graphdiff_distance(a, b) < kiln_graphdiff_distance(a, c));
  kiln_graph_free(a);
  kiln_graph_free(b);
  kiln_graph_free(c);
}

KT_TEST(classify_growing_tensor) {
  kiln_graph *h[4] = {growing(96), growing(104), growing(112), growing(120)};
  char buf[1024];
  kiln_diff_pattern p = kiln_graphdiff_classify((const kiln_graph *const *)h, 4, buf, sizeof buf);
  KT_EQ_INT(p, KILN_DIFF_PATTERN_GROWING);
  KT_CHECK_MSG(strcmp(buf, "growing tensor: concat at eval.c:41, dim 0: 104 -> 112 -> 120 -> 128 (+8 per compile). "
                           "The tensor made at eval.c:41 grows by 8 every step, so every step is a new graph; "
                           "accumulate it on the host (read each step's piece) or preallocate a fixed-size buffer.") == 0,
               "got: %s", buf);
  for (int i = 0; i < 4; i++) kiln_graph_free(h[i]);
}

KT_TEST(classify_varying_input) {
  int64_t lens[5] = {87, 112, 87, 96, 112};
  kiln_graph *h[5];
  for (int i = 0; i < 5; i++) h[i] = varying(lens[i]);
  char buf[1024];
  kiln_diff_pattern p = kiln_graphdiff_classify((const kiln_graph *const *)h, 5, buf, sizeof buf);
  KT_EQ_INT(p, KILN_DIFF_PATTERN_VARYING_INPUT);
  KT_STR_CONTAINS(buf, "varying input: dim 1 of input 0 (leaf) at train.c:88 takes 3 sizes over 5 compiles "
                       "(87 x2, 96, 112 x2). Each new size is a new graph; pad to buckets (suggested boundaries: ");
  KT_STR_CONTAINS(buf, "with kiln's bucketing batcher (include/kiln/data.h) and warm them up with kiln_compile.");
  /* two compiles that grow once are a varying input, not growth */
  p = kiln_graphdiff_classify((const kiln_graph *const *)h, 2, buf, sizeof buf);
  KT_EQ_INT(p, KILN_DIFF_PATTERN_VARYING_INPUT);
  KT_STR_CONTAINS(buf, "takes 2 sizes over 2 compiles (87, 112)");
  /* an input whose size grows steadily on its own (a sweep of batch sizes
   * from the host), fed back from no output: a varying input, not growth */
  kiln_graph *g3[3] = {varying(10), varying(20), varying(30)};
  p = kiln_graphdiff_classify((const kiln_graph *const *)g3, 3, buf, sizeof buf);
  KT_EQ_INT(p, KILN_DIFF_PATTERN_VARYING_INPUT);
  KT_STR_CONTAINS(buf, "varying input: dim 1 of input 0 (leaf) at train.c:88 takes 3 sizes over 3 compiles (10, 20, 30)");
  /* the last 3 of a site's 29 compiles: the window is named as such */
  p = kiln_graphdiff_classify_site((const kiln_graph *const *)g3, 3, 29, 1, NULL, buf, sizeof buf);
  KT_EQ_INT(p, KILN_DIFF_PATTERN_VARYING_INPUT);
  KT_STR_CONTAINS(buf, "takes 3 sizes over the last 3 of the site's 29 compiles (10, 20, 30)");
  for (int i = 0; i < 5; i++) kiln_graph_free(h[i]);
  for (int i = 0; i < 3; i++) kiln_graph_free(g3[i]);
}

/* A steady sweep of a computed node (a matmul of a growing batch) whose
 * size comes from a host input: varying input. The same growth with no
 * input changing (a shape computed from the step count): growing. */
static kiln_graph *sweep(int64_t rows) {
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(rows, 16));
  at(&b, x, "sweep.c", 20);
  int y = nd(&b, KILN_OP_NEG, KILN_F32, SH(rows, 16), IN(x), AT0, 0);
  at(&b, y, "sweep.c", 21);
  out(&b, nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, SH(1, 16), IN(y), AT(1), 0), -1);
  return b.g;
}

static kiln_graph *from_step(int64_t n) {
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(4));
  at(&b, x, "count.c", 5);
  int c = nd(&b, KILN_OP_CONST, KILN_F32, SH(n), IN0, AT0, 1.0);
  at(&b, c, "count.c", 6);
  out(&b, c, -1);
  out(&b, nd(&b, KILN_OP_NEG, KILN_F32, SH(4), IN(x), AT0, 0), -1);
  return b.g;
}

KT_TEST(classify_sweep_is_not_growth) {
  enum { N = 40 };
  kiln_graph *h[N];
  for (int i = 0; i < N; i++) h[i] = sweep(8 * (i + 1));
  char buf[4096];
  KT_EQ_INT(kiln_graphdiff_classify((const kiln_graph *const *)h, N, buf, sizeof buf), KILN_DIFF_PATTERN_VARYING_INPUT);
  KT_CHECK_MSG(strstr(buf, "growing") == NULL, "got: %s", buf);
  /* 40 sizes: the first KILN_DIFF_LIST_MAX listed, and how many are not */
  KT_STR_CONTAINS(buf, "varying input: dim 0 of input 0 (leaf) at sweep.c:20 takes 40 sizes over 40 compiles (8, 16, 24, ");
  KT_STR_CONTAINS(buf, ", 256, ... 8 more of the 40 sizes). Each new size is a new graph");
  for (int i = 0; i < N; i++) kiln_graph_free(h[i]);
  kiln_graph *g[3] = {from_step(5), from_step(6), from_step(7)};
  KT_EQ_INT(kiln_graphdiff_classify((const kiln_graph *const *)g, 3, buf, sizeof buf), KILN_DIFF_PATTERN_GROWING);
  KT_STR_CONTAINS(buf, "growing tensor: const at count.c:6, dim 0: 5 -> 6 -> 7 (+1 per compile)");
  for (int i = 0; i < 3; i++) kiln_graph_free(g[i]);
}

KT_TEST(classify_none_and_other) {
  kiln_graph *same[3] = {varying(8), varying(8), varying(8)};
  char buf[1024];
  KT_EQ_INT(kiln_graphdiff_classify((const kiln_graph *const *)same, 3, buf, sizeof buf), KILN_DIFF_PATTERN_NONE);
  KT_EQ_INT(kiln_graphdiff_classify((const kiln_graph *const *)same, 1, buf, sizeof buf), KILN_DIFF_PATTERN_NONE);
  gb o = gb_new(), n = gb_new();
  int x = leaf(&o, KILN_F32, SH(4, 8));
  out(&o, nd(&o, KILN_OP_CONST, KILN_F32, SH(4, 8), IN0, AT0, 1.0), -1);
  (void)x;
  x = leaf(&n, KILN_F32, SH(4, 8));
  out(&n, nd(&n, KILN_OP_CONST, KILN_F32, SH(4, 8), IN0, AT0, 2.0), -1);
  const kiln_graph *h[2] = {o.g, n.g};
  KT_EQ_INT(kiln_graphdiff_classify(h, 2, buf, sizeof buf), KILN_DIFF_PATTERN_OTHER);
  /* only a constant's value changed: that is the cause named (a scalar input never recompiles) */
  KT_STR_CONTAINS(buf, "a constant changes value (1 difference between the last two graphs, each a constant's value; "
                       "first: ~ const at test_graphdiff.c:1001: attrs value=1 -> value=2)");
  for (int i = 0; i < 3; i++) kiln_graph_free(same[i]);
  kiln_graph_free(o.g);
  kiln_graph_free(n.g);
  KT_CHECK(strcmp(kiln_diff_pattern_name(KILN_DIFF_PATTERN_VARYING_INPUT), "varying_input") == 0);
}

/* Graphs of many repeated (op, line) keys still align by position: a
 * layer loop with one more layer in the middle. */
KT_TEST(repeated_keys_align_by_order) {
  gb o = gb_new(), n = gb_new();
  int x = leaf(&o, KILN_F32, SH(4, 4));
  for (int i = 0; i < 5; i++) {
    x = nd(&o, KILN_OP_TANH, KILN_F32, SH(4, 4), IN(x), AT0, 0);
    at(&o, x, "layers.c", 7);
  }
  out(&o, x, -1);
  x = leaf(&n, KILN_F32, SH(4, 4));
  for (int i = 0; i < 6; i++) {
    x = nd(&n, KILN_OP_TANH, KILN_F32, SH(4, 4), IN(x), AT0, 0);
    at(&n, x, "layers.c", 7);
  }
  out(&n, x, -1);
  char buf[1024] = "";
  KT_EQ_INT(kiln_graphdiff_format(o.g, n.g, buf, sizeof buf), 2);
  KT_CHECK_MSG(strcmp(buf, "  + tanh at layers.c:7 [4,4]\n"
                           "  ~ output 0: now tanh at layers.c:7 (was tanh at layers.c:7)\n") == 0,
               "got:\n%s", buf);
  kiln_graph_free(o.g);
  kiln_graph_free(n.g);
}

/* A dump of x [16, len] -> tanh -> row sums; sym: the dump of a graph
 * compiled for any size (symbol s0 = dim `axis` of input 0), else none. */
static void dump_text(char *buf, size_t cap, int64_t len, int sym, int axis) {
  int n = snprintf(buf, cap,
                   "# kiln graph dump, text format v1 (docs/graphs.md)\n"
                   "%%0 = leaf f32[16,%lld] input=0 @ train.c:88\n"
                   "%%1 = tanh f32[16,%lld] %%0 @ train.c:89\n"
                   "%%2 = reduce_sum f32[16,1] %%1 axes=[1] @ train.c:90\n"
                   "inputs: %%0\noutputs: %%2\n",
                   (long long)len, (long long)len);
  if (sym)
    snprintf(buf + n, cap - (size_t)n,
             "# dynamic: s0 = dim %d of input 0 (%lld here)\n"
             "# dynamic: 2 symbolic sizes, 0 constants 1/n of them; compiled once for any size\n"
             "# dynamic: %%0 [16,s0]\n# dynamic: %%1 [16,s0]\n",
             axis, (long long)len);
}

/* The diff of two dumps as `kiln graph diff` makes it, with their symbols. */
static int diff_dumps(const char *a, const char *b, char *out, size_t cap, kiln_diff_stats *st) {
  kiln_graphtext ta, tb;
  kiln_err err = {0};
  out[0] = 0;
  if (kiln_graphtext_parse(a, strlen(a), "a.txt", &ta, &err) != KILN_OK) {
    KT_FAIL("%s", err.msg);
    return -1;
  }
  if (kiln_graphtext_parse(b, strlen(b), "b.txt", &tb, &err) != KILN_OK) {
    KT_FAIL("%s", err.msg);
    kiln_graphtext_clear(&ta);
    return -1;
  }
  const kiln_diff_syms sy = {(const char *const *)ta.sym_shape, (const char *const *)tb.sym_shape,
                             (const char *const *)ta.sym_def,   (const char *const *)tb.sym_def,
                             ta.n_sym_def,                      tb.n_sym_def};
  int n = kiln_graphdiff_format_syms(ta.g, tb.g, &sy, out, cap, st);
  kiln_graphtext_clear(&ta);
  kiln_graphtext_clear(&tb);
  return n;
}

/* Graphs compiled for any size are compared by their symbolic sizes: two
 * sizes of one family show their sizes and the symbolic ones they share, a
 * family against a graph of one size shows the symbols, a symbol that
 * stands for another dimension is named. */
KT_TEST(symbolic_dumps_compare_by_their_symbols) {
  char a[1024], b[1024], out[1024];
  kiln_diff_stats st;
  dump_text(a, sizeof a, 47, 1, 1);
  dump_text(b, sizeof b, 52, 1, 1);
  KT_EQ_INT(diff_dumps(a, b, out, sizeof out, &st), 2); /* one family, two sizes */
  KT_CHECK_MSG(strcmp(out, "  ~ input 0 (leaf) at train.c:88: shape [16,47] -> [16,52] (dim 1: 47 -> 52), [16,s0] in both\n"
                           "  ~ tanh at train.c:89: shape [16,47] -> [16,52] (dim 1: 47 -> 52), [16,s0] in both\n") == 0,
               "got:\n%s", out);
  KT_EQ_INT(diff_dumps(a, a, out, sizeof out, &st), 0); /* itself */
  dump_text(b, sizeof b, 52, 0, 1); /* compiled for its size: no symbol */
  KT_EQ_INT(diff_dumps(a, b, out, sizeof out, &st), 3);
  KT_CHECK_MSG(strcmp(out, "  ~ input 0 (leaf) at train.c:88: shape [16,s0] -> [16,52]\n"
                           "  ~ tanh at train.c:89: shape [16,s0] -> [16,52]\n"
                           "  ~ symbol s0: dim 1 of input 0 -> (none)\n") == 0,
               "got:\n%s", out);
  KT_EQ_INT(st.shape, 2);
  KT_EQ_INT(st.symbols, 1);
  dump_text(b, sizeof b, 47, 1, 0); /* s0 another dimension */
  KT_EQ_INT(diff_dumps(a, b, out, sizeof out, &st), 1);
  KT_CHECK_MSG(strcmp(out, "  ~ symbol s0: dim 1 of input 0 -> dim 0 of input 0\n") == 0, "got:\n%s", out);
  char sum[128];
  KT_CHECK(strcmp(kiln_graphdiff_summary(&st, sum, sizeof sum), "1 difference: 1 symbol changed") == 0);
  dump_text(a, sizeof a, 47, 0, 1); /* neither has symbols: the plain diff */
  dump_text(b, sizeof b, 52, 0, 1);
  KT_EQ_INT(diff_dumps(a, b, out, sizeof out, &st), 2);
  KT_CHECK_MSG(strstr(out, "shape [16,47] -> [16,52] (dim 1: 47 -> 52)") != NULL, "got:\n%s", out);
}

KT_MAIN(KT_CASE(symbolic_dumps_compare_by_their_symbols), KT_CASE(equal_graphs_have_no_differences), KT_CASE(shape_changes_name_the_dimension),
        KT_CASE(added_removed_rewired_and_outputs), KT_CASE(dtype_and_attribute_changes), KT_CASE(output_alias_change),
        KT_CASE(distance_prefers_the_closer_graph), KT_CASE(classify_growing_tensor),
        KT_CASE(classify_varying_input), KT_CASE(classify_sweep_is_not_growth), KT_CASE(classify_none_and_other), KT_CASE(repeated_keys_align_by_order))
