/* Random programs over one varying length T, for the symbolic-dimension
 * tests (tests/unit/test_symshape.c) and their fuzz target
 * (tests/fuzz/fuzz_symshape.c): the same choices build the same program at
 * any T, so a program built at two lengths is one family. Test code only. */
#ifndef KILN_TESTS_SYMPROG_H
#define KILN_TESTS_SYMPROG_H

#include <stdint.h>

#include "backend/graph_builder.h"

/* A byte source: the next random number (any width). */
typedef uint64_t (*symprog_next)(void *ctx);

/* The test's source: a 64-bit LCG over *ctx (a uint64_t seed). */
static inline uint64_t symprog_lcg(void *ctx) {
  uint64_t *s = (uint64_t *)ctx;
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

/* The elementwise ops of the op table with an f32 function and an f32
 * result, unary and binary: the k-th (mod their count). Not the
 * discontinuous ones (floor, ceil, round, trunc, sign, remainder, fmod):
 * after a running sum, one ulp of difference between two correct kernels
 * (cpu and ref accumulate differently) turns into a whole step of theirs;
 * test_op_table covers them. */
static inline int symprog_pick(int kind, uint64_t k) {
  static const int jumps[] = {KILN_OP_FLOOR, KILN_OP_CEIL, KILN_OP_ROUND, KILN_OP_TRUNC, KILN_OP_SIGN,
                              KILN_OP_REMAINDER, KILN_OP_FMOD};
  int ops[KILN_OP_COUNT], n = 0;
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    int jump = 0;
    for (size_t j = 0; j < sizeof jumps / sizeof jumps[0]; j++) jump |= op == jumps[j];
    if ((int)kiln_op_table[op].kind == kind && op != KILN_OP_CAST && !jump && kiln_op_scalar_defined(op, 1) &&
        kiln_op_table[op].out == KILN_OUT_SAME)
      ops[n++] = op;
  }
  return n ? ops[k % (uint64_t)n] : (kind == KILN_KIND_UNARY ? KILN_OP_NEG : KILN_OP_ADD);
}
static inline int symprog_unary(uint64_t k) { return symprog_pick(KILN_KIND_UNARY, k); }
static inline int symprog_binary(uint64_t k) { return symprog_pick(KILN_KIND_BINARY, k); }

#define SYMPROG_CASES 22

/* A random program over one varying length T: a value [4, T, 6] goes
 * through every elementwise op of the table (unary ones bounded by a tanh,
 * binary ones with iota/constant partners, broadcast), permutes,
 * flatten/unflatten reshapes, matmuls with a weight, reductions over other
 * axes and over T (a softmax, an argmax), products and running products, a
 * scan and an argsort along T, a select, f64 casts, a gather, an
 * index_select and a scatter_add with computed indices, pads and partial
 * slices with fixed bounds, concats along a fixed axis, a minimum over T,
 * comparisons joined by logical ops into a select, a finiteness test, a
 * scatter to computed positions, a flip and a roll along T (sizes held as
 * values: the constant T - 1, a slice starting at T - 1). The same seed
 * builds the same program at any T. */
static inline kiln_graph *symprog_build_of(symprog_next next, void *r, int64_t T, int n_cases);
static inline kiln_graph *symprog_build(symprog_next next, void *r, int64_t T) {
  return symprog_build_of(next, r, T, SYMPROG_CASES);
}

/* Programs of the first n_cases kinds of step (cases 0 .. n_cases - 1) and
 * the default's sum over T (SYMPROG_CASES: all; 20: without the flip and
 * the roll, the programs before them). */
static inline kiln_graph *symprog_build_of(symprog_next next, void *r, int64_t T, int n_cases) {
  gb b = gb_new();
  int64_t sh[3] = {4, T, 6};
  int cur = leaf(&b, KILN_F32, 3, sh);
  int w = leaf(&b, KILN_F32, SH(6, 6));
  int nops = 4 + (int)(next(r) % 12);
  for (int k = 0; k < nops && b.g->n_nodes < 52; k++) {
    uint64_t pick = next(r) % (uint64_t)(n_cases + 1); /* n_cases: the default's sum over T */
    switch (pick == (uint64_t)n_cases ? 99 : pick) {
      case 0: { /* a partner broadcast along axis 0 */
        int64_t ps[3] = {1, sh[1], sh[2]};
        int p = next(r) % 2 ? nd(&b, KILN_OP_IOTA, KILN_F32, 3, ps, IN0, AT(2), 0)
                                 : nd(&b, KILN_OP_CONST, KILN_F32, 3, ps, IN0, AT0, 0.5);
        int x = nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(p), AT0, 0);
        int op = symprog_binary(next(r));
        cur = nd(&b, op, KILN_F32, 3, sh, IN(nd(&b, KILN_OP_TANH, KILN_F32, 3, sh, IN(cur), AT0, 0), x), AT0, 0);
        break;
      }
      case 1: /* any unary elementwise op of the table, of a value bounded by a tanh (a cosine of a running
               * sum of squares is not a well-posed comparison between two correct backends) */
        cur = nd(&b, KILN_OP_TANH, KILN_F32, 3, sh, IN(cur), AT0, 0);
        cur = nd(&b, symprog_unary(next(r)), KILN_F32, 3, sh, IN(cur), AT0, 0);
        break;
      case 2: { /* swap axes 0 and 1 and back */
        int64_t ps[3] = {sh[1], sh[0], sh[2]};
        int p = nd(&b, KILN_OP_PERMUTE, KILN_F32, 3, ps, IN(cur), AT(1, 0, 2), 0);
        int t = nd(&b, KILN_OP_NEG, KILN_F32, 3, ps, IN(p), AT0, 0);
        cur = nd(&b, KILN_OP_PERMUTE, KILN_F32, 3, sh, IN(t), AT(1, 0, 2), 0);
        break;
      }
      case 3: { /* flatten the leading axes, matmul, unflatten */
        if (sh[2] != 6) break;
        int64_t fs[2] = {sh[0] * sh[1], sh[2]};
        int f = nd(&b, KILN_OP_RESHAPE, KILN_F32, 2, fs, IN(cur), AT0, 0);
        int m = nd(&b, KILN_OP_MATMUL, KILN_F32, 2, fs, IN(f, w), AT0, 0);
        cur = nd(&b, KILN_OP_RESHAPE, KILN_F32, 3, sh, IN(m), AT0, 0);
        break;
      }
      case 4: { /* a reduction over the last axis, broadcast back */
        int64_t rs[3] = {sh[0], sh[1], 1};
        int red = nd(&b, KILN_OP_REDUCE_MAX, KILN_F32, 3, rs, IN(cur), AT(4), 0);
        int x = nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(red), AT0, 0);
        cur = nd(&b, KILN_OP_SUB, KILN_F32, 3, sh, IN(cur, x), AT0, 0);
        break;
      }
      case 5: { /* a fixed partial slice of T, concatenated on axis 2 to a slice of itself */
        if (sh[1] < 2) break;
        int64_t ss[3] = {sh[0], 2, sh[2]};
        int sl = nd(&b, KILN_OP_SLICE, KILN_F32, 3, ss, IN(cur), AT(0, 0, 0, 1, 1, 1), 0);
        int64_t cs[3] = {sh[0], 2, sh[2] * 2};
        int cat = nd(&b, KILN_OP_CONCAT, KILN_F32, 3, cs, IN(sl, sl), AT(2), 0);
        int64_t rs[3] = {sh[0], 1, 1};
        int red = nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, 3, rs, IN(cat), AT(6), 0);
        int x = nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(red), AT0, 0);
        cur = nd(&b, KILN_OP_ADD, KILN_F32, 3, sh, IN(cur, x), AT0, 0);
        break;
      }
      case 6: { /* a softmax along T (a row kernel whose row is T long) */
        int64_t rs[3] = {sh[0], 1, sh[2]};
        int mx = nd(&b, KILN_OP_REDUCE_MAX, KILN_F32, 3, rs, IN(cur), AT(2), 0);
        int d = nd(&b, KILN_OP_SUB, KILN_F32, 3, sh, IN(cur, nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(mx), AT0, 0)), AT0, 0);
        int e = nd(&b, KILN_OP_EXP, KILN_F32, 3, sh, IN(d), AT0, 0);
        int sm = nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, 3, rs, IN(e), AT(2), 0);
        cur = nd(&b, KILN_OP_DIV, KILN_F32, 3, sh, IN(e, nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(sm), AT0, 0)), AT0, 0);
        break;
      }
      case 7: /* a running sum along T (a scan T long) */
        cur = nd(&b, KILN_OP_CUMSUM, KILN_F32, 3, sh, IN(cur), AT(1), 0);
        break;
      case 8: { /* |x| by a select on a comparison with a broadcast zero */
        int z = nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, 0.0);
        int gt = nd(&b, KILN_OP_GT, KILN_BOOL, 3, sh, IN(cur, z), AT0, 0);
        int ng = nd(&b, KILN_OP_NEG, KILN_F32, 3, sh, IN(cur), AT0, 0);
        cur = nd(&b, KILN_OP_WHERE, KILN_F32, 3, sh, IN(gt, cur, ng), AT0, 0);
        break;
      }
      case 9: { /* through f64 and back, and a gather along the last axis (reversed) */
        int c64 = nd(&b, KILN_OP_CAST, KILN_F64, 3, sh, IN(cur), AT0, 0);
        int c32 = nd(&b, KILN_OP_CAST, KILN_F32, 3, sh, IN(nd(&b, KILN_OP_SQRT, KILN_F64, 3, sh, IN(nd(&b, KILN_OP_ABS, KILN_F64, 3, sh, IN(c64), AT0, 0)), AT0, 0)), AT0, 0);
        int64_t is[3] = {1, 1, sh[2]};
        int io = nd(&b, KILN_OP_IOTA, KILN_I64, 3, is, IN0, AT(2), 0);
        int rev = nd(&b, KILN_OP_SUB, KILN_I64, 3, is, IN(nd(&b, KILN_OP_CONST, KILN_I64, 3, is, IN0, AT0, (double)(sh[2] - 1)), io), AT0, 0);
        int ix = nd(&b, KILN_OP_EXPAND, KILN_I64, 3, sh, IN(rev), AT0, 0);
        cur = nd(&b, KILN_OP_GATHER, KILN_F32, 3, sh, IN(c32, ix), AT(2), 0);
        break;
      }
      case 10: { /* the rank of each element along T (a line kernel T long) */
        int as = nd(&b, KILN_OP_ARGSORT, KILN_I64, 3, sh, IN(cur), AT(1, 0), 0);
        int f = nd(&b, KILN_OP_CAST, KILN_F32, 3, sh, IN(as), AT0, 0);
        cur = nd(&b, KILN_OP_ADD, KILN_F32, 3, sh, IN(cur, f), AT0, 0);
        break;
      }
      case 11: { /* a pad of the last axis and the slice back */
        int64_t ps[3] = {sh[0], sh[1], sh[2] + 2};
        int pd = nd(&b, KILN_OP_PAD, KILN_F32, 3, ps, IN(cur), AT(0, 0, 1, 0, 0, 1), 0.0);
        int sq = nd(&b, KILN_OP_MUL, KILN_F32, 3, ps, IN(pd, pd), AT0, 0);
        cur = nd(&b, KILN_OP_SLICE, KILN_F32, 3, sh, IN(sq), AT(0, 0, 1, 1, 1, 1), 0);
        break;
      }
      case 12: { /* an index_select of the last axis, reversed by computed indices */
        int64_t is[1] = {sh[2]};
        int io = nd(&b, KILN_OP_IOTA, KILN_I64, 1, is, IN0, AT(0), 0);
        int ix = nd(&b, KILN_OP_SUB, KILN_I64, 1, is, IN(nd(&b, KILN_OP_CONST, KILN_I64, 1, is, IN0, AT0, (double)(sh[2] - 1)), io), AT0, 0);
        cur = nd(&b, KILN_OP_INDEX_SELECT, KILN_F32, 3, sh, IN(cur, ix), AT(2), 0);
        break;
      }
      case 13: { /* a scatter_add of tanh(x) back into x along the last axis (positions from an iota) */
        int64_t is[3] = {1, 1, sh[2]};
        int ix = nd(&b, KILN_OP_EXPAND, KILN_I64, 3, sh, IN(nd(&b, KILN_OP_IOTA, KILN_I64, 3, is, IN0, AT(2), 0)), AT0, 0);
        int v = nd(&b, KILN_OP_TANH, KILN_F32, 3, sh, IN(cur), AT0, 0);
        cur = nd(&b, KILN_OP_SCATTER_ADD, KILN_F32, 3, sh, IN(v, ix, v), AT(2), 0);
        break;
      }
      case 14: { /* a product over the last axis of values near 1, broadcast back */
        int t = nd(&b, KILN_OP_TANH, KILN_F32, 3, sh, IN(cur), AT0, 0);
        int one = nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, 1.0);
        int nr = nd(&b, KILN_OP_ADD, KILN_F32, 3, sh, IN(nd(&b, KILN_OP_MUL, KILN_F32, 3, sh, IN(t, nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, 0.1)), AT0, 0), one), AT0, 0);
        int64_t rs[3] = {sh[0], sh[1], 1};
        int pr = nd(&b, KILN_OP_REDUCE_PROD, KILN_F32, 3, rs, IN(nr), AT(4), 0);
        cur = nd(&b, KILN_OP_MUL, KILN_F32, 3, sh, IN(cur, nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(pr), AT0, 0)), AT0, 0);
        break;
      }
      case 15: { /* the position of the maximum along T, as a float added back */
        int64_t rs[3] = {sh[0], 1, sh[2]};
        int am = nd(&b, KILN_OP_ARGMAX, KILN_I64, 3, rs, IN(cur), AT(1), 0);
        int f = nd(&b, KILN_OP_CAST, KILN_F32, 3, rs, IN(am), AT0, 0);
        cur = nd(&b, KILN_OP_ADD, KILN_F32, 3, sh, IN(cur, nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(f), AT0, 0)), AT0, 0);
        break;
      }
      case 16: { /* a running product along the last axis of values near 1 */
        int t = nd(&b, KILN_OP_TANH, KILN_F32, 3, sh, IN(cur), AT0, 0);
        int nr = nd(&b, KILN_OP_ADD, KILN_F32, 3, sh, IN(nd(&b, KILN_OP_MUL, KILN_F32, 3, sh, IN(t, nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, 0.1)), AT0, 0), nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, 1.0)), AT0, 0);
        cur = nd(&b, KILN_OP_CUMPROD, KILN_F32, 3, sh, IN(nr), AT(2), 0);
        break;
      }
      case 17: { /* the minimum along T, subtracted */
        int64_t rs[3] = {sh[0], 1, sh[2]};
        int mn = nd(&b, KILN_OP_REDUCE_MIN, KILN_F32, 3, rs, IN(cur), AT(2), 0);
        cur = nd(&b, KILN_OP_SUB, KILN_F32, 3, sh, IN(cur, nd(&b, KILN_OP_EXPAND, KILN_F32, 3, sh, IN(mn), AT0, 0)), AT0, 0);
        break;
      }
      case 18: { /* comparisons of tanh(x), combined by a logical op, select x or -x; non-finite values to 0 */
        static const int cmp[] = {KILN_OP_LT, KILN_OP_LE, KILN_OP_GE, KILN_OP_EQ, KILN_OP_NE};
        int t = nd(&b, KILN_OP_TANH, KILN_F32, 3, sh, IN(cur), AT0, 0);
        int c1 = nd(&b, cmp[next(r) % 5], KILN_BOOL, 3, sh, IN(t, nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, 0.25)), AT0, 0);
        int c2 = nd(&b, cmp[next(r) % 5], KILN_BOOL, 3, sh, IN(t, nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, -0.5)), AT0, 0);
        int lg = nd(&b, next(r) % 2 ? KILN_OP_AND : KILN_OP_OR, KILN_BOOL, 3, sh, IN(c1, c2), AT0, 0);
        if (next(r) % 2) lg = nd(&b, KILN_OP_NOT, KILN_BOOL, 3, sh, IN(lg), AT0, 0);
        int ng = nd(&b, KILN_OP_NEG, KILN_F32, 3, sh, IN(cur), AT0, 0);
        cur = nd(&b, KILN_OP_WHERE, KILN_F32, 3, sh, IN(lg, cur, ng), AT0, 0);
        int fin = nd(&b, KILN_OP_ISFINITE, KILN_BOOL, 3, sh, IN(cur), AT0, 0);
        cur = nd(&b, KILN_OP_WHERE, KILN_F32, 3, sh, IN(fin, cur, nd(&b, KILN_OP_CONST, KILN_F32, 3, sh, IN0, AT0, 0.0)), AT0, 0);
        break;
      }
      case 19: { /* a scatter of tanh(x) into x along the last axis, to reversed positions (each once) */
        int64_t is[3] = {1, 1, sh[2]};
        int io = nd(&b, KILN_OP_IOTA, KILN_I64, 3, is, IN0, AT(2), 0);
        int rev = nd(&b, KILN_OP_SUB, KILN_I64, 3, is, IN(nd(&b, KILN_OP_CONST, KILN_I64, 3, is, IN0, AT0, (double)(sh[2] - 1)), io), AT0, 0);
        int ix = nd(&b, KILN_OP_EXPAND, KILN_I64, 3, sh, IN(rev), AT0, 0);
        int v = nd(&b, KILN_OP_TANH, KILN_F32, 3, sh, IN(cur), AT0, 0);
        cur = nd(&b, KILN_OP_SCATTER, KILN_F32, 3, sh, IN(cur, ix, v), AT(2), 0);
        break;
      }
      case 20: { /* reversed along T by computed indices, as flip makes them: (T - 1) - iota(T) */
        if (sh[1] < 2) break;
        int64_t is[1] = {sh[1]};
        int io = nd(&b, KILN_OP_IOTA, KILN_I64, 1, is, IN0, AT(0), 0);
        int c = nd(&b, KILN_OP_CONST, KILN_I64, 1, is, IN0, AT0, (double)(sh[1] - 1));
        int ix = nd(&b, KILN_OP_SUB, KILN_I64, 1, is, IN(c, io), AT0, 0);
        cur = nd(&b, KILN_OP_INDEX_SELECT, KILN_F32, 3, sh, IN(cur, ix), AT(1), 0);
        break;
      }
      case 21: { /* rolled along T by one, as roll makes it: x[:, T-1:] then x[:, :T-1] */
        if (sh[1] < 2) break;
        int64_t ts[3] = {sh[0], 1, sh[2]}, hs[3] = {sh[0], sh[1] - 1, sh[2]};
        int tail = nd(&b, KILN_OP_SLICE, KILN_F32, 3, ts, IN(cur), AT(0, sh[1] - 1, 0, 1, 1, 1), 0);
        int head = nd(&b, KILN_OP_SLICE, KILN_F32, 3, hs, IN(cur), AT(0, 0, 0, 1, 1, 1), 0);
        cur = nd(&b, KILN_OP_CONCAT, KILN_F32, 3, sh, IN(tail, head), AT(1), 0);
        break;
      }
      default: { /* a sum over T: the output is free of T */
        int64_t rs[3] = {sh[0], 1, sh[2]};
        int red = nd(&b, KILN_OP_REDUCE_SUM, KILN_F32, 3, rs, IN(cur), AT(2), 0);
        out(&b, red, -1);
        break;
      }
    }
  }
  out(&b, cur, -1);
  return b.g;
}

#endif
