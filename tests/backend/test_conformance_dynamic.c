/* Conformance at symbolic sizes (docs/dynamic-shapes.md): programs through
 * the public API whose input has a dimension marked dynamic, traced at
 * several sizes in one session (1 compile for any size at the first, the
 * others planned) and compared, size by size, with the "ref" backend run on
 * the same programs, the oracle. Every public elementwise builder of the op
 * table (from kiln/ops.def), and the reductions over the varying axis and
 * across it (a mean's 1/T included), softmax, scans, sort, argmax, matmul,
 * transposes, slices, pads, concats, stacks, gathers, a scatter, a
 * one-hot and a select. The counters must say one compile and a plan for
 * each later size: a program that cannot be one family fails here (KILN_DEBUG=1
 * names why), flips, rolls and triangles along the varying axis included. */
#include "backend/backend_compare.h"

/* The op table's public elementwise builders (KILN_PUB_UNARY / _BINARY). */
typedef struct pub_op {
  const char *name;
  kiln_tensor (*un)(kiln_tensor, kiln_loc);
  kiln_tensor (*bin)(kiln_tensor, kiln_tensor, kiln_loc);
} pub_op;

#define PUB_NONE_(fn)
#define PUB_UNARY_(fn) {#fn, kiln_##fn##_at, NULL},
#define PUB_BINARY_(fn) {#fn, NULL, kiln_##fn##_at},
#define KILN_PUB_NONE PUB_NONE_, none
#define KILN_PUB_UNARY(fn) PUB_UNARY_, fn
#define KILN_PUB_BINARY(fn) PUB_BINARY_, fn
#define PUB_APPLY2(DEF, fn) DEF(fn)
#define PUB_APPLY(...) PUB_APPLY2(__VA_ARGS__)
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, ...) PUB_APPLY(PUB)
static const pub_op k_pub[] = {
#include "kiln/ops.def"
};
#undef KILN_OP

/* Sizes of the varying axis: the first compiles the family, each later one
 * is planned (1 and 0 are graphs of their own: not here). */
static const int64_t k_sizes[] = {37, 2, 3, 5, 16, 61, 300};
enum { N_SIZES = sizeof k_sizes / sizeof k_sizes[0] };

typedef struct dcase {
  int64_t T;
  int probe; /* 1: the step after the last: reads the counters, traces nothing */
  int which; /* the program */
  int64_t U; /* a second varying size (the program of two symbols) */
} dcase;

/* The second size, beside each of k_sizes. */
static const int64_t k_usizes[] = {11, 9, 2, 3, 16, 7, 5};

static int64_t g_compiles, g_plans;

/* x [T, 5] f32 in [-2, 2), its dimension 0 marked dynamic. */
static kiln_tensor dyn_input(int64_t T, uint64_t seed) {
  int64_t sh[2] = {T, 5};
  return kiln_dynamic(bc_input(KILN_F32, 2, sh, seed, 0), 0);
}

/* Every public elementwise builder over x [T, 5] (binary ones against a
 * second dynamic input and against a broadcast row); unary ones of a value
 * bounded by a tanh, kept away from 0 where a builder takes logs or roots. */
static void prog_elementwise(bc_result *r, int64_t T) {
  kiln_tensor x = dyn_input(T, 11), y = dyn_input(T, 12);
  int64_t rs[2] = {1, 5};
  kiln_tensor row = bc_input(KILN_F32, 2, rs, 13, 0);
  kiln_tensor t = kiln_tanh(x), p = kiln_add_c(kiln_abs(t), 0.25);
  for (size_t i = 0; i < sizeof k_pub / sizeof k_pub[0]; i++) {
    const pub_op *o = &k_pub[i];
    if (o->un) {
      bc_emit(r, o->un(p, KILN_HERE), 2e-5, 2e-6, "%s(p)", o->name);
      bc_emit(r, o->un(t, KILN_HERE), 2e-5, 2e-6, "%s(t)", o->name);
    } else {
      kiln_tensor q = kiln_add_c(kiln_abs(kiln_tanh(y)), 0.5);
      bc_emit(r, o->bin(p, q, KILN_HERE), 2e-5, 2e-6, "%s(p, q)", o->name);
      bc_emit(r, o->bin(t, row, KILN_HERE), 2e-5, 2e-6, "%s(t, row)", o->name);
    }
  }
}

/* Reductions, scans and shape ops over the varying axis and across it. */
static void prog_structure(bc_result *r, int64_t T) {
  kiln_tensor x = dyn_input(T, 21);
  int a0[1] = {0}, a1[1] = {1};
  bc_emit(r, kiln_sum(x, 1, a0, 1), 1e-5, 1e-5, "sum over T");
  bc_emit(r, kiln_mean(x, 1, a0, 0), 1e-5, 1e-6, "mean over T (1/T)");
  bc_emit(r, kiln_max(x, 1, a0, 1), 0, 0, "max over T");
  bc_emit(r, kiln_min(x, 1, a1, 1), 0, 0, "min across T");
  bc_emit(r, kiln_mean(x, 1, a1, 1), 1e-5, 1e-6, "mean across T");
  bc_emit(r, kiln_prod(kiln_add_c(kiln_mul_c(kiln_tanh(x), 0.01), 1.0), 1, a0, 1), 1e-5, 1e-6, "prod over T");
  bc_emit(r, kiln_argmax(x, 0, 0), 0, 0, "argmax over T");
  bc_emit(r, kiln_softmax(x, 0), 1e-5, 1e-7, "softmax over T");
  bc_emit(r, kiln_log_softmax(x, 1), 1e-5, 1e-6, "log_softmax across T");
  bc_emit(r, kiln_cumsum(x, 0), 1e-5, 1e-5, "cumsum along T");
  bc_emit(r, kiln_argsort(x, 0, 0), 0, 0, "argsort along T");
  bc_emit(r, kiln_transpose(x, 0, 1), 0, 0, "transpose");
  int64_t ws[2] = {5, 3};
  kiln_tensor w = bc_input(KILN_F32, 2, ws, 22, 0);
  bc_emit(r, kiln_matmul(x, w), 1e-5, 1e-5, "x @ w");
  bc_emit(r, kiln_matmul(kiln_transpose(x, 0, 1), x), 1e-4, 1e-4, "x^T @ x (contracts T)");
  bc_emit(r, kiln_slice(x, 0, 1, T, 1), 0, 0, "x[1:]");
  bc_emit(r, kiln_slice(x, 1, 1, 4, 2), 0, 0, "x[:, 1:4:2]");
  kiln_tensor two[2] = {x, kiln_neg(x)};
  bc_emit(r, kiln_concat(2, two, 0), 0, 0, "concat along T");
  bc_emit(r, kiln_concat(2, two, 1), 0, 0, "concat across T");
  int64_t lo[2] = {1, 0}, hi[2] = {2, 1};
  bc_emit(r, kiln_pad(x, lo, hi, 0.5), 0, 0, "pad");
  /* constant ranges along T: at the family's instances (primes above every
   * constant) rows 1..3 of x padded by 1 never reach the padding after x, nor
   * rows 0..2 of a concat its second part, nor 4 elements of x^T flattened
   * its second row; at T = 2 they do (they read past x, or x again) */
  int64_t lo1[2] = {1, 0}, hi1[2] = {1, 0};
  bc_emit(r, kiln_slice(kiln_pad(x, lo1, hi1, 0.5), 0, 1, 4, 1), 0, 0, "rows 1..3 of x padded along T");
  kiln_tensor own[2] = {kiln_mul_c(x, 3.0), kiln_sqrt(kiln_abs(x))}; /* a concat of its own: fused */
  bc_emit(r, kiln_slice(kiln_concat(2, own, 0), 0, 0, 3, 1), 0, 0, "rows 0..2 of a concat along T");
  /* and the first 4 elements of x^T flattened: i / T and i % T of a constant i */
  int64_t flt[1] = {5 * T};
  kiln_tensor xtf = kiln_reshape(kiln_transpose(kiln_exp(kiln_mul_c(x, 0.25)), 0, 1), 1, flt);
  bc_emit(r, kiln_slice(xtf, 0, 0, 4, 1), 1e-6, 1e-6, "the first 4 of x^T flattened");
  int64_t fl[1] = {T * 5};
  bc_emit(r, kiln_reshape(x, 1, fl), 0, 0, "flatten");
  int64_t is[1] = {3};
  int64_t idx[3] = {4, 0, 2};
  kiln_tensor ix = kiln_from_host(idx, KILN_I64, 1, is);
  bc_emit(r, kiln_index_select(x, 1, ix), 0, 0, "index_select across T");
  kiln_tensor zero = kiln_mul_c(x, 0.0);
  bc_emit(r, kiln_where(kiln_gt(x, zero), x, kiln_neg(x)), 0, 0, "where");
  bc_emit(r, kiln_cast(x, KILN_F64), 0, 0, "cast f64");
  bc_emit(r, kiln_cumprod(kiln_add_c(kiln_mul_c(kiln_tanh(x), 0.01), 1.0), 0), 1e-5, 1e-6, "cumprod along T");
  bc_emit(r, kiln_argmin(x, 0, 1), 0, 0, "argmin over T");
  bc_emit(r, kiln_clamp(x, -0.5, 0.5), 0, 0, "clamp");
  kiln_tensor st[2] = {x, kiln_abs(x)};
  bc_emit(r, kiln_stack(2, st, 0), 0, 0, "stack");
  int64_t us[3] = {1, T, 5}, es[3] = {2, T, 5};
  bc_emit(r, kiln_expand(kiln_reshape(x, 3, us), 3, es), 0, 0, "expand");
  kiln_tensor am = kiln_argmax(x, 1, 1); /* [T, 1] positions across T */
  bc_emit(r, kiln_gather(x, 1, am), 0, 0, "gather the row maxima");
  bc_emit(r, kiln_scatter(kiln_mul_c(x, 0.0), 1, am, kiln_gather(x, 1, am)), 0, 0, "scatter them back");
  bc_emit(r, kiln_one_hot(kiln_argmax(x, 1, 0), 5, KILN_F32), 0, 0, "one_hot of the argmax");
  int64_t rs[2] = {T, 5};
  kiln_tensor noise = kiln_rand(KILN_RAND_NORMAL, KILN_F32, 2, rs, 17); /* each element's by its position */
  bc_emit(r, kiln_add(x, kiln_mul_c(kiln_rand(KILN_RAND_UNIFORM, KILN_F32, 2, rs, 11), 0.1)), 1e-6, 1e-6,
          "uniform noise [T, 5]");
  bc_emit(r, kiln_sum(kiln_mul(noise, x), 1, (int[]){0}, 0), 1e-4, 1e-5, "normal noise summed over T");
}

/* Ops whose graphs hold a size as a value, not a shape: flip's index
 * n - 1 - i (an iota no shape rule ties to the axis), roll's slice start
 * T - k, the last row's T - 1, the pads' edges, a triangle's row and
 * column iotas. A roll by k is the identity at sizes dividing k (another
 * graph): by -1, it is one at every size. Each op reads its own multiple of
 * x: two ops' slices that meet at one size (x[T-1:] and x[1:2] at T = 2)
 * would be one node of that size's trace, another graph. */
static void prog_sized_values(bc_result *r, int64_t T) {
  kiln_tensor x0 = dyn_input(T, 31);
  int ax0[1] = {0}, both[2] = {0, 1}, k = 1;
#define OWN() kiln_mul_c(x0, (double)(k++))
  bc_emit(r, kiln_flip(OWN(), 1, ax0), 0, 0, "flip T");
  /* [T, 6]: the iota of the other axis is not as long as any T tried (at
   * T = 5 the trace would share flip T's iota with it: another graph) */
  int64_t lo[2] = {0, 0}, hi[2] = {0, 1};
  bc_emit(r, kiln_flip(kiln_exp(kiln_pad(x0, lo, hi, 0.5)), 2, both), 1e-6, 1e-6, "flip both axes");
  bc_emit(r, kiln_roll(OWN(), -1, 0), 0, 0, "roll along T");
  bc_emit(r, kiln_roll(OWN(), 7, 1), 0, 0, "roll across T");
  bc_emit(r, kiln_slice(OWN(), 0, T - 1, T, 1), 0, 0, "the last row");
  /* the two edges of one reflecting pad by 1 are one row at T = 3: an edge
   * each of two tensors */
  int64_t one[2] = {1, 0}, two[2] = {2, 0}, none[2] = {0, 0};
  bc_emit(r, kiln_pad_with(OWN(), one, none, KILN_PAD_REFLECT, 0), 0, 0, "reflecting pad before T");
  bc_emit(r, kiln_pad_with(OWN(), none, one, KILN_PAD_REFLECT, 0), 0, 0, "reflecting pad after T");
  bc_emit(r, kiln_pad_with(OWN(), two, two, KILN_PAD_REPLICATE, 0), 0, 0, "replicating pad along T");
#undef OWN
  kiln_tensor sq = kiln_matmul(x0, kiln_transpose(x0, 0, 1));
  bc_emit(r, kiln_tril(sq, 0), 1e-4, 1e-4, "tril of a T x T matrix");
  bc_emit(r, kiln_triu(sq, 1), 1e-4, 1e-4, "triu above the diagonal");
  bc_emit(r, kiln_sum(kiln_tril(sq, -1), 1, ax0, 0), 1e-4, 1e-4, "column sums below the diagonal");
}

/* Varying sizes T and U whose sums and products the graph holds: a
 * concat of T rows and U rows ([T + U, 5]: s0 + s1) with a softmax and a
 * sum over it; a flatten of the shifted sequences of a [U, T, 5] batch
 * ([U (T - 1), 5]: s0 s1 - s1, a next-token objective's layout) with a mean
 * over all of it (1 / (5 U (T - 1))); slices of a third by U rows. */
static void prog_two_symbols(bc_result *r, int64_t T, int64_t U) {
  kiln_tensor x = dyn_input(T, 41);
  int64_t us[2] = {U, 5}, zs[3] = {U, T, 5};
  kiln_tensor y = kiln_dynamic(bc_input(KILN_F32, 2, us, 42, 0), 0);
  kiln_tensor parts[2] = {kiln_tanh(x), kiln_mul_c(y, 0.5)};
  kiln_tensor cat = kiln_concat(2, parts, 0);
  int ax0[1] = {0};
  bc_emit(r, kiln_exp(cat), 1e-6, 1e-6, "exp of the concat of T and U rows");
  bc_emit(r, kiln_softmax(cat, 0), 1e-6, 1e-6, "softmax over the T + U rows");
  bc_emit(r, kiln_sum(cat, 1, ax0, 0), 1e-5, 1e-5, "sum over the T + U rows");
  kiln_tensor z = kiln_dynamic(kiln_dynamic(bc_input(KILN_F32, 3, zs, 43, 0), 0), 1);
  int64_t fl[2] = {U * (T - 1), 5};
  kiln_tensor flat = kiln_reshape(kiln_slice(z, 1, 0, T - 1, 1), 2, fl);
  bc_emit(r, kiln_mul_c(flat, 3.0), 0, 0, "the shifted sequences flattened");
  bc_emit(r, kiln_mean(kiln_mul(flat, flat), 0, NULL, 0), 1e-5, 1e-6, "their mean square");
  /* slices by a varying amount: the first and the last U rows of a [V, 5]
   * input, V = T + U + 1 (a third symbol) */
  int64_t V = T + U + 1, vs[2] = {V, 5};
  kiln_tensor a = kiln_dynamic(bc_input(KILN_F32, 2, vs, 44, 0), 0);
  bc_emit(r, kiln_mul(kiln_slice(a, 0, 0, U, 1), y), 0, 0, "the first U rows of V, times y");
  bc_emit(r, kiln_add(kiln_slice(a, 0, V - U, V, 1), y), 0, 0, "the last U rows of V, plus y");
}

static void prog(bc_result *r, const void *arg) {
  const dcase *c = arg;
  if (c->probe) { /* the counters after every size ran */
    g_compiles = kiln_counter_value("UncachedCompile");
    g_plans = kiln_counter_value("DynamicPlan");
    return;
  }
  if (c->which == 0) prog_elementwise(r, c->T);
  else if (c->which == 1) prog_structure(r, c->T);
  else if (c->which == 2) prog_sized_values(r, c->T);
  else prog_two_symbols(r, c->T, c->U);
}

/* Program `which` at every size on ref and on the backend under test: each
 * size's results against ref's, one compile and the rest planned. With
 * with_one, T = 1 last: a graph of its own (a size 1 broadcasts: a symbol
 * never takes it), compiled, its values right too. */
static void check_program(int which, const char *what, int with_one) {
  static bc_result ref[N_SIZES + 2], got[N_SIZES + 2];
  dcase cs[N_SIZES + 2];
  const void *args[N_SIZES + 2];
  int n = N_SIZES + (with_one ? 1 : 0); /* the sizes run; then the probe */
  for (int k = 0; k <= n; k++) {
    int64_t T = k < N_SIZES ? k_sizes[k] : 1, U = k < N_SIZES ? k_usizes[k] : 2;
    cs[k] = (dcase){k < n ? T : 0, k == n, which, k < n ? U : 0};
    args[k] = &cs[k];
  }
  KT_CHECK(bc_run_oracle_steps(prog, args, n + 1, ref) == 0);
  kiln_metrics_clear();
  KT_CHECK_MSG(bc_run_steps(bc_backend_under_test(), prog, args, n + 1, got) == 0, "%s: %s", what, got[0].err);
  for (int k = 0; k < n; k++) {
    char name[64];
    snprintf(name, sizeof name, "%s at T = %lld", what, (long long)cs[k].T);
    KT_EQ_INT(bc_compare(name, &ref[k], &got[k]), 0);
  }
  if (strcmp(bc_backend_under_test(), "cpu") == 0) { /* ref compiles nothing: the cpu's counters */
    int want = 1 + (with_one ? 1 : 0);
    KT_CHECK_MSG(g_compiles == want && g_plans == N_SIZES - 1, "%s: %lld compiles, %lld sizes planned (want %d, %d)",
                 what, (long long)g_compiles, (long long)g_plans, want, N_SIZES - 1);
  }
  for (int k = 0; k <= n; k++) {
    bc_result_free(&ref[k]);
    bc_result_free(&got[k]);
  }
}

KT_TEST(every_elementwise_builder_at_every_size) { check_program(0, "elementwise", 1); }
KT_TEST(reductions_scans_and_shape_ops_at_every_size) { check_program(1, "structure", 1); }
KT_TEST(flip_roll_and_triangles_at_every_size) { check_program(2, "sized values", 0) /* reflecting pads need T >= 2 */; }
KT_TEST(sums_and_products_of_two_sizes) { check_program(3, "two symbols", 1); }

KT_MAIN(KT_CASE(every_elementwise_builder_at_every_size), KT_CASE(reductions_scans_and_shape_ops_at_every_size),
        KT_CASE(flip_roll_and_triangles_at_every_size), KT_CASE(sums_and_products_of_two_sizes))
