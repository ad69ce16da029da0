/* kiln_graph: verifier (accepts good graphs, rejects each kind of bad one
 * with a precise message), structural hash/equality, and the printer.
 * Graphs are built by hand with kiln_graph_alloc, independent of the
 * frontend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "kt.h"

#include "backend/graph_builder.h"

/* A valid graph touching most op kinds:
 *   y = sum((x + expand(bias)) * s, axis 1) ; z = matmul(x, w) */
static gb good_graph(void) {
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(4, 8));
  int bias = leaf(&b, KILN_F32, SH(1, 8));
  int s = scalar(&b, KILN_F32, 0.5);
  int e = nd(&b, KILN_OP_EXPAND, KILN_F32, SH(4, 8), IN(bias), AT0, 0);
  int a = nd(&b, KILN_OP_ADD, KILN_F32, SH(4, 8), IN(x, e), AT0, 0);
  int sr = nd(&b, KILN_OP_RESHAPE, KILN_F32, SH(1, 1), IN(s), AT0, 0);
  int se = nd(&b, KILN_OP_EXPAND, KILN_F32, SH(4, 8), IN(sr), AT0, 0);
  int m = nd(&b, KILN_OP_MUL, KILN_F32, SH(4, 8), IN(a, se), AT0, 0);
  int r = nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, SH(4, 1), IN(m), AT(2), 0);
  int w = leaf(&b, KILN_F32, SH(8, 3));
  int mm = nd(&b, KILN_OP_MATMUL, KILN_F32, SH(4, 3), IN(x, w), AT0, 0);
  int p = nd(&b, KILN_OP_PERMUTE, KILN_F32, SH(3, 4), IN(mm), AT(1, 0), 0);
  int sl = nd(&b, KILN_OP_SLICE, KILN_F32, SH(2, 2), IN(p), AT(1, 0, 1, 2), 0);
  int pd = nd(&b, KILN_OP_PAD, KILN_F32, SH(3, 5), IN(sl), AT(0, 1, 1, 2), -1.0);
  int c = nd(&b, KILN_OP_CONCAT, KILN_F32, SH(3, 9), IN(pd, p), AT(1), 0);
  int ids = leaf(&b, KILN_I32, SH(2, 2));
  int isel = nd(&b, KILN_OP_INDEX_SELECT, KILN_F32, SH(2, 2, 8), IN(x, ids), AT(0), 0);
  int am = nd(&b, KILN_OP_ARGMAX, KILN_I64, SH(2, 1, 8), IN(isel), AT(1), 0);
  int cmp = nd(&b, KILN_OP_GT, KILN_BOOL, SH(4, 8), IN(x, e), AT0, 0);
  int wh = nd(&b, KILN_OP_WHERE, KILN_F32, SH(4, 8), IN(cmp, x, a), AT0, 0);
  int seed = scalar(&b, KILN_I64, 7);
  int rnd = nd(&b, KILN_OP_RANDOM, KILN_F32, SH(4, 8), IN(seed), AT(1), 0);
  int io = nd(&b, KILN_OP_IOTA, KILN_I64, SH(2, 1, 8), IN0, AT(2), 0);
  int gi = nd(&b, KILN_OP_GATHER, KILN_F32, SH(2, 1, 8), IN(isel, io), AT(2), 0);
  (void)rnd;
  out(&b, r, -1);
  out(&b, c, -1);
  out(&b, am, -1);
  out(&b, wh, 0); /* donation: same bytes as x */
  out(&b, gi, -1);
  return b;
}

static int verify(const kiln_graph *g, char *msg) { return kiln_graph_verify(g, msg, 512); }

KT_TEST(verify_accepts_good_graph) {
  gb b = good_graph();
  char msg[512];
  int r = verify(b.g, msg);
  KT_CHECK_MSG(r == 0, "rejected: %s", msg);
  /* the empty graph is valid too */
  kiln_graph *e = kiln_graph_alloc(0, 0, 0, 0);
  KT_EQ_INT(verify(e, msg), 0);
  kiln_graph_free(e);
  kiln_graph_free(b.g);
}

/* Each bad graph: rejected, and the message names what is wrong. */
static void expect_bad(gb b, const char *needle, int line) {
  char msg[512] = "";
  int r = verify(b.g, msg);
  if (r != -1) KT_FAIL("(case at line %d) accepted a bad graph, expected \"%s\"", line, needle);
  else if (!strstr(msg, needle)) KT_FAIL("(case at line %d) message \"%s\" lacks \"%s\"", line, msg, needle);
  kiln_graph_free(b.g);
}
#define BAD(needle) expect_bad(b, needle, __LINE__)

KT_TEST(verify_rejects_bad_graphs) {
  gb b;
  int x, y;
  /* topological order */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  nd(&b, KILN_OP_NEG, KILN_F32, SH(4), IN(2), AT0, 0);
  nd(&b, KILN_OP_NEG, KILN_F32, SH(4), IN(x), AT0, 0);
  BAD("topological");
  /* self reference */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  nd(&b, KILN_OP_NEG, KILN_F32, SH(4), IN(1), AT0, 0);
  BAD("not an earlier node");
  /* arity */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  nd(&b, KILN_OP_ADD, KILN_F32, SH(4), IN(x), AT0, 0);
  BAD("has 1 inputs, add takes 2");
  /* variadic with no input */
  b = gb_new();
  nd(&b, KILN_OP_CONCAT, KILN_F32, SH(4), IN0, AT(0), 0);
  BAD("concat takes >= 1");
  /* implicit broadcasting is not allowed in the IR */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  y = leaf(&b, KILN_F32, SH(1, 8));
  nd(&b, KILN_OP_ADD, KILN_F32, SH(4, 8), IN(x, y), AT0, 0);
  BAD("input 1 (%1) is f32[1,8]: shape differs");
  /* mixed dtypes */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  y = leaf(&b, KILN_F64, SH(4));
  nd(&b, KILN_OP_MUL, KILN_F32, SH(4), IN(x, y), AT0, 0);
  BAD("expected dtype f32");
  /* transcendental on ints */
  b = gb_new();
  x = leaf(&b, KILN_I32, SH(4));
  nd(&b, KILN_OP_EXP, KILN_I32, SH(4), IN(x), AT0, 0);
  BAD("dtype i32, which exp does not accept");
  /* predicate must output bool */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  nd(&b, KILN_OP_LT, KILN_F32, SH(4), IN(x, x), AT0, 0);
  BAD("output dtype f32, expected bool");
  /* where needs a bool condition */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  nd(&b, KILN_OP_WHERE, KILN_F32, SH(4), IN(x, x, x), AT0, 0);
  BAD("expected dtype bool");
  /* sub on bool */
  b = gb_new();
  x = leaf(&b, KILN_BOOL, SH(4));
  nd(&b, KILN_OP_SUB, KILN_BOOL, SH(4), IN(x, x), AT0, 0);
  BAD("sub does not accept");
  /* reduce: mask beyond rank, wrong output shape, sum of bool */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, SH(4, 8), IN(x), AT(4), 0);
  BAD("beyond rank 2");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_REDUCE_MAX, KILN_F32, SH(4, 8), IN(x), AT(2), 0);
  BAD("output dim 1 is 8, expected 1");
  b = gb_new();
  x = leaf(&b, KILN_BOOL, SH(4));
  nd(&b, KILN_OP_REDUCE_SUM, KILN_BOOL, SH(1), IN(x), AT(1), 0);
  BAD("reduce_sum does not accept");
  /* argmax: dtype and axis */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_ARGMAX, KILN_I32, SH(4, 1), IN(x), AT(1), 0);
  BAD("argmax outputs i64");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_ARGMAX, KILN_I64, SH(4, 1), IN(x), AT(2), 0);
  BAD("axis 2 out of range");
  /* reshape element count */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_RESHAPE, KILN_F32, SH(33), IN(x), AT0, 0);
  BAD("input has 32 elements, output 33");
  /* permute */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_PERMUTE, KILN_F32, SH(8, 4), IN(x), AT(1, 1), 0);
  BAD("not a permutation");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_PERMUTE, KILN_F32, SH(4, 8), IN(x), AT(1, 0), 0);
  BAD("output dim 0 is not input dim 1");
  /* expand of a non-1 dim */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(2, 8));
  nd(&b, KILN_OP_EXPAND, KILN_F32, SH(4, 8), IN(x), AT0, 0);
  BAD("only size-1 dims expand");
  /* slice: overrun and bad step */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(10));
  nd(&b, KILN_OP_SLICE, KILN_F32, SH(4), IN(x), AT(2, 3), 0);
  BAD("overrun size 10");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(10));
  nd(&b, KILN_OP_SLICE, KILN_F32, SH(4), IN(x), AT(0, 0), 0);
  BAD("step 0 < 1");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(10));
  nd(&b, KILN_OP_SLICE, KILN_F32, SH(2), IN(x), AT(0), 0);
  BAD("needs 2 integer attributes");
  /* concat sizes */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(2, 3));
  y = leaf(&b, KILN_F32, SH(2, 4));
  nd(&b, KILN_OP_CONCAT, KILN_F32, SH(2, 8), IN(x, y), AT(1), 0);
  BAD("inputs sum to 7 along axis 1");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(2, 3));
  y = leaf(&b, KILN_F32, SH(3, 3));
  nd(&b, KILN_OP_CONCAT, KILN_F32, SH(2, 6), IN(x, y), AT(1), 0);
  BAD("input 1 (%1) dim 0 is 3, expected 2");
  /* pad */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  nd(&b, KILN_OP_PAD, KILN_F32, SH(3), IN(x), AT(-1, 0), 0);
  BAD("padding -1/0 out of range");
  b = gb_new();
  x = leaf(&b, KILN_I32, SH(4));
  nd(&b, KILN_OP_PAD, KILN_I32, SH(5), IN(x), AT(1, 0), 1e20);
  BAD("pad value 1e+20 does not fit");
  /* index ops */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  y = leaf(&b, KILN_F32, SH(3));
  nd(&b, KILN_OP_INDEX_SELECT, KILN_F32, SH(3, 8), IN(x, y), AT(0), 0);
  BAD("the index input has dtype f32");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  y = leaf(&b, KILN_I64, SH(3));
  nd(&b, KILN_OP_INDEX_SELECT, KILN_F32, SH(4, 8), IN(x, y), AT(0), 0);
  BAD("output dim 0 is 4, expected 3");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(0, 8));
  y = leaf(&b, KILN_I64, SH(3));
  nd(&b, KILN_OP_INDEX_SELECT, KILN_F32, SH(3, 8), IN(x, y), AT(0), 0);
  BAD("empty axis");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  y = leaf(&b, KILN_I64, SH(5, 2));
  nd(&b, KILN_OP_GATHER, KILN_F32, SH(5, 2), IN(x, y), AT(1), 0);
  BAD("index dim 0 (5) exceeds");
  /* matmul */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  y = leaf(&b, KILN_F32, SH(7, 3));
  nd(&b, KILN_OP_MATMUL, KILN_F32, SH(4, 3), IN(x, y), AT0, 0);
  BAD("contraction mismatch");
  b = gb_new();
  x = leaf(&b, KILN_U8, SH(4, 8)); /* the frontend widens u8 to i32 first */
  y = leaf(&b, KILN_U8, SH(8, 3));
  nd(&b, KILN_OP_MATMUL, KILN_U8, SH(4, 3), IN(x, y), AT0, 0);
  BAD("matmul does not accept");
  /* sources */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  b.g->nodes[x].iattr[0] = 3;
  BAD("graph input number 3 out of range");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  y = leaf(&b, KILN_F32, SH(4));
  b.g->input_node[1] = x;
  BAD("bound to node %0");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  y = nd(&b, KILN_OP_NEG, KILN_F32, SH(4), IN(x), AT0, 0);
  b.g->input_node[0] = y;
  BAD("a neg (not leaf/scalar)");
  b = gb_new();
  nd(&b, KILN_OP_CONST, KILN_I32, SH(4), IN0, AT0, 3e9);
  BAD("does not fit dtype i32");
  b = gb_new();
  x = scalar(&b, KILN_F32, 1.0);
  nd(&b, KILN_OP_RANDOM, KILN_F32, SH(4), IN(x), AT(0), 0);
  BAD("seed must be a 0-d i64");
  b = gb_new();
  nd(&b, KILN_OP_IOTA, KILN_F32, SH(4), IN0, AT(1), 0);
  BAD("axis 1 out of range for rank 1");
  /* frame: op, dtype, rank, dims, input list */
  b = gb_new();
  nd(&b, KILN_OP_COUNT + 3, KILN_F32, SH(4), IN0, AT0, 0);
  BAD("unknown op");
  b = gb_new();
  nd(&b, KILN_OP_CONST, 9, SH(4), IN0, AT0, 0);
  BAD("unknown dtype 9");
  b = gb_new();
  x = nd(&b, KILN_OP_CONST, KILN_F32, SH(4), IN0, AT0, 0);
  b.g->nodes[x].rank = 9;
  BAD("rank 9 exceeds 8");
  b = gb_new();
  nd(&b, KILN_OP_CONST, KILN_F32, SH(4, -1), IN0, AT0, 0);
  BAD("negative dim 1");
  b = gb_new();
  nd(&b, KILN_OP_CONST, KILN_F32, SH(1 << 30, 1 << 30), IN0, AT0, 0);
  BAD("too many elements");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  y = nd(&b, KILN_OP_NEG, KILN_F32, SH(4), IN(x), AT0, 0);
  b.g->nodes[y].in_off = 60;
  BAD("outside in_idx");
  /* outputs and aliases */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  out(&b, 5, -1);
  BAD("output 0 names node 5");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  out(&b, x, 2);
  BAD("aliases input 2, out of range");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  y = nd(&b, KILN_OP_CONCAT, KILN_F32, SH(8), IN(x, x), AT(0), 0);
  out(&b, y, 0);
  BAD("(32 bytes) aliases input 0 of 16 bytes");
  b = gb_new();
  x = scalar(&b, KILN_F64, 1.0);
  out(&b, x, 0);
  BAD("which is a scalar");
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4));
  y = nd(&b, KILN_OP_NEG, KILN_F32, SH(4), IN(x), AT0, 0);
  out(&b, y, 0);
  out(&b, x, 0);
  BAD("outputs 0 and 1 both alias input 0");
}

KT_TEST(verify_message_has_location) {
  gb b = gb_new();
  int x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_EXP, KILN_I64, SH(4, 8), IN(x), AT0, 0);
  char msg[512];
  KT_EQ_INT(verify(b.g, msg), -1);
  KT_STR_CONTAINS(msg, "node %1 (exp i64[4,8]");
  KT_STR_CONTAINS(msg, "test_graph.c:1001");
  kiln_graph_free(b.g);
  /* a tiny buffer truncates but stays terminated */
  b = gb_new();
  x = leaf(&b, KILN_F32, SH(4, 8));
  nd(&b, KILN_OP_EXP, KILN_I64, SH(4, 8), IN(x), AT0, 0);
  char tiny[8];
  KT_EQ_INT(kiln_graph_verify(b.g, tiny, sizeof tiny), -1);
  KT_EQ_INT(strlen(tiny), 7);
  KT_EQ_INT(kiln_graph_verify(b.g, NULL, 0), -1);
  kiln_graph_free(b.g);
}

KT_TEST(hash_and_equal) {
  gb a = good_graph(), b = good_graph();
  KT_CHECK(kiln_graph_hash(a.g) == kiln_graph_hash(b.g));
  KT_CHECK(kiln_graph_equal(a.g, b.g));
  /* not hashed: SCALAR values and source locations */
  int sidx = a.g->input_node[2];
  KT_EQ_INT(a.g->nodes[sidx].op, KILN_OP_SCALAR);
  b.g->nodes[sidx].fattr = 123.0;
  b.g->nodes[5].loc.line = 1;
  KT_CHECK(kiln_graph_hash(a.g) == kiln_graph_hash(b.g));
  KT_CHECK(kiln_graph_equal(a.g, b.g));
  /* each program change changes the hash and breaks equality */
  const char *whats[] = {"attr", "shape", "input", "dtype", "const", "alias", "output"};
  for (size_t c = 0; c < sizeof whats / sizeof whats[0]; c++) {
    gb m = good_graph();
    kiln_graph *g = m.g;
    switch (c) {
      case 0: g->nodes[8].iattr[0] = 1; break;      /* reduce axes */
      case 1: g->nodes[0].shape[1] = 9; break;      /* leaf shape */
      case 2: g->in_idx[g->nodes[4].in_off] = 1; break; /* add's first input */
      case 3: g->nodes[0].dtype = KILN_F64; break;
      case 4: g->nodes[13].fattr = -2.0; break;     /* pad value */
      case 5: g->output_alias[3] = -1; break;
      case 6: g->output_node[0] = 7; break;
    }
    KT_CHECK_MSG(kiln_graph_hash(g) != kiln_graph_hash(a.g), "changing the %s kept the hash", whats[c]);
    KT_CHECK_MSG(!kiln_graph_equal(g, a.g), "changing the %s kept equality", whats[c]);
    kiln_graph_free(g);
  }
  /* clone is equal and independent */
  kiln_graph *c = kiln_graph_clone(a.g);
  KT_CHECK(kiln_graph_equal(c, a.g));
  KT_CHECK(kiln_graph_hash(c) == kiln_graph_hash(a.g));
  c->nodes[1].shape[0] = 2;
  KT_CHECK(!kiln_graph_equal(c, a.g));
  kiln_graph_free(c);
  kiln_graph_free(a.g);
  kiln_graph_free(b.g);
}

static char *print_to_string(const kiln_graph *g) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  kiln_graph_print(g, f);
  fclose(f);
  return buf;
}

KT_TEST(print_graph) {
  gb b = good_graph();
  b.g->hash = kiln_graph_hash(b.g);
  char *s = print_to_string(b.g);
  KT_STR_CONTAINS(s, "%0 = leaf f32[4,8] input#0   # test_graph.c:1000\n");
  KT_STR_CONTAINS(s, "%4 = add f32[4,8] %0, %3   # test_graph.c:1004\n");
  KT_STR_CONTAINS(s, "%2 = scalar f32[] input#2");
  KT_STR_CONTAINS(s, "%8 = reduce_sum f32[4,1] %7 axes=[1]");
  KT_STR_CONTAINS(s, "%11 = permute f32[3,4] %10 perm=[1,0]");
  KT_STR_CONTAINS(s, "slice f32[2,2] %11 start=[1,0] step=[1,2]");
  KT_STR_CONTAINS(s, "pad f32[3,5] %12 lo=[0,1] hi=[1,2] value=-1");
  KT_STR_CONTAINS(s, "random f32[4,8] %20 dist=normal");
  KT_STR_CONTAINS(s, "argmax i64[2,1,8] %16 axis=1");
  KT_STR_CONTAINS(s, "outputs: %8, %14, %17, %19 (aliases input #0), %23\n");
  KT_STR_CONTAINS(s, "inputs: #0=%0 #1=%1 #2=%2");
  char hdr[64];
  snprintf(hdr, sizeof hdr, "graph 0x%016llx: 24 nodes", (unsigned long long)b.g->hash);
  KT_STR_CONTAINS(s, hdr);
  /* one line per node plus header, inputs and outputs */
  int lines = 0;
  for (char *p = s; *p; p++) lines += *p == '\n';
  KT_EQ_INT(lines, 24 + 3);
  free(s);
  /* a malformed graph prints without crashing */
  b.g->nodes[3].in_off = 1000;
  b.g->nodes[4].dtype = 77;
  s = print_to_string(b.g);
  KT_STR_CONTAINS(s, "?inputs");
  KT_STR_CONTAINS(s, "add ?[4,8]");
  free(s);
  kiln_graph_free(b.g);
}

KT_MAIN(KT_CASE(verify_accepts_good_graph), KT_CASE(verify_rejects_bad_graphs), KT_CASE(verify_message_has_location),
        KT_CASE(hash_and_equal), KT_CASE(print_graph))
