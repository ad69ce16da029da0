/* The op table's conformance test: it walks every row of kiln's op table
 * (include/kiln/ops.def, up to KILN_OP_COUNT), so an op cannot be added
 * without being tested.
 *
 * - Every public elementwise row, for every dtype its rule accepts, on the
 *   ref backend and on the backend under test, against values computed by
 *   NumPy (tests/data/op_reference.py -> op_reference.txt): the op's meaning
 *   is restated there independently, with the IEEE specials and the integer
 *   extremes. A public row without reference data fails.
 * - Every other row through a recipe below (the public call that emits it):
 *   the backend under test against ref. A row without a recipe fails.
 * - Every differentiable row (its vjp column is not NULL): kiln_backward in
 *   f64 against central finite differences, on both backends.
 */
#include <kiln/autograd.h>

#include "backend/backend_compare.h"
#include "autograd/autograd_internal.h"
#include "ir/op.h"

/* ───────────── the public elementwise rows ───────────── */

typedef kiln_tensor (*un_fn)(kiln_tensor, kiln_loc);
typedef kiln_tensor (*bin_fn)(kiln_tensor, kiln_tensor, kiln_loc);
typedef struct pub_row {
  int op;
  const char *fn; /* the public name (kiln_<fn>) */
  un_fn un;
  bin_fn bin;
} pub_row;

#define T_DEF_NONE(NAME, fn)
#define T_DEF_UNARY(NAME, fn) {KILN_OP_##NAME, #fn, kiln_##fn##_at, NULL},
#define T_DEF_BINARY(NAME, fn) {KILN_OP_##NAME, #fn, NULL, kiln_##fn##_at},
#define KILN_PUB_NONE T_DEF_NONE, none
#define KILN_PUB_UNARY(fn) T_DEF_UNARY, fn
#define KILN_PUB_BINARY(fn) T_DEF_BINARY, fn
#define T_APPLY2(NAME, DEF, fn) DEF(NAME, fn)
#define T_APPLY(NAME, ...) T_APPLY2(NAME, __VA_ARGS__)
static const pub_row k_pub[] = {
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, ...) T_APPLY(NAME, PUB)
#include "kiln/ops.def"
#undef KILN_OP
};
#define N_PUB ((int)(sizeof k_pub / sizeof k_pub[0]))

static const pub_row *pub_of_op(int op) {
  for (int i = 0; i < N_PUB; i++)
    if (k_pub[i].op == op) return &k_pub[i];
  return NULL;
}

/* ───────────── reference data ───────────── */

typedef struct ref_case {
  const pub_row *row;
  int arity;
  kiln_dtype in_dt, out_dt;
  int n;
  void *a, *b;  /* inputs in in_dt */
  double *want; /* expected, as doubles (exact for every value written) */
  int64_t *want_i;
} ref_case;

#define MAX_CASES 512
static ref_case k_cases[MAX_CASES];
static int k_ncases;

static int dtype_of(const char *s, kiln_dtype *dt) {
  static const char *names[] = {"f32", "f64", "i32", "i64", "bool", "bf16", "f16", "u8", "i8"};
  static const kiln_dtype dts[] = {KILN_F32,  KILN_F64, KILN_I32, KILN_I64, KILN_BOOL,
                                   KILN_BF16, KILN_F16, KILN_U8,  KILN_I8};
  for (int i = 0; i < 9; i++)
    if (!strcmp(s, names[i])) {
      *dt = dts[i];
      return 0;
    }
  return -1;
}

static void store(void *p, kiln_dtype dt, int i, const char *tok) {
  switch (dt) {
    case KILN_F32: ((float *)p)[i] = (float)strtod(tok, NULL); break;
    case KILN_F64: ((double *)p)[i] = strtod(tok, NULL); break;
    case KILN_I32: ((int32_t *)p)[i] = (int32_t)strtoll(tok, NULL, 10); break;
    case KILN_I64: ((int64_t *)p)[i] = strtoll(tok, NULL, 10); break;
    case KILN_U8: ((uint8_t *)p)[i] = (uint8_t)strtoll(tok, NULL, 10); break;
    case KILN_I8: ((int8_t *)p)[i] = (int8_t)strtoll(tok, NULL, 10); break;
    case KILN_BF16: case KILN_F16: { /* every reference input is exact in both */
      float f = (float)strtod(tok, NULL);
      uint32_t u;
      memcpy(&u, &f, 4);
      _Float16 h = (_Float16)f;
      uint16_t hb;
      memcpy(&hb, &h, 2);
      ((uint16_t *)p)[i] = dt == KILN_BF16 ? (uint16_t)(u >> 16) : hb;
      break;
    }
    default: ((uint8_t *)p)[i] = (uint8_t)(strtoll(tok, NULL, 10) != 0); break;
  }
}

static int load_reference(void) {
  const char *dirs[3] = {getenv("KILN_TEST_DATA"), "tests/data", "../tests/data"};
  FILE *f = NULL;
  char path[1024];
  for (int i = 0; i < 3 && !f; i++) {
    if (!dirs[i]) continue;
    snprintf(path, sizeof path, "%s/op_reference.txt", dirs[i]);
    f = fopen(path, "r");
  }
  if (!f) {
    KT_FAIL("tests/data/op_reference.txt not found (set KILN_TEST_DATA)");
    return -1;
  }
  static char line[1 << 16];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char *save = NULL, *tok = strtok_r(line, " \n", &save);
    char fn[64];
    snprintf(fn, sizeof fn, "%s", tok);
    const pub_row *row = NULL;
    for (int i = 0; i < N_PUB; i++)
      if (!strcmp(k_pub[i].fn, fn)) row = &k_pub[i];
    if (!row) {
      KT_FAIL("op_reference.txt: \"%s\" is not a public elementwise op of the table", fn);
      continue;
    }
    if (k_ncases == MAX_CASES) {
      KT_FAIL("op_reference.txt: more than %d cases", MAX_CASES);
      break;
    }
    ref_case *c = &k_cases[k_ncases++];
    c->row = row;
    c->arity = atoi(strtok_r(NULL, " \n", &save));
    if (dtype_of(strtok_r(NULL, " \n", &save), &c->in_dt) || dtype_of(strtok_r(NULL, " \n", &save), &c->out_dt)) {
      KT_FAIL("op_reference.txt: %s: bad dtype", fn);
      k_ncases--;
      continue;
    }
    c->n = atoi(strtok_r(NULL, " \n", &save));
    KT_EQ_INT(c->arity, row->un ? 1 : 2);
    size_t es = kiln_dtype_size(c->in_dt);
    c->a = calloc((size_t)c->n, es);
    c->b = calloc((size_t)c->n, es);
    c->want = calloc((size_t)c->n, sizeof(double));
    c->want_i = calloc((size_t)c->n, sizeof(int64_t));
    int ok = 1;
    for (int k = 0; k < c->arity + 1 && ok; k++)
      for (int i = 0; i < c->n && ok; i++) {
        tok = strtok_r(NULL, " \n", &save);
        if (!tok) {
          ok = 0;
          break;
        }
        if (k < c->arity)
          store(k ? c->b : c->a, c->in_dt, i, tok);
        else {
          c->want[i] = strtod(tok, NULL);
          c->want_i[i] = strtoll(tok, NULL, 10);
        }
      }
    KT_CHECK_MSG(ok, "op_reference.txt: %s %s: too few values", fn, kiln_dtype_name(c->in_dt));
  }
  fclose(f);
  return 0;
}

static void free_reference(void) {
  for (int i = 0; i < k_ncases; i++) {
    free(k_cases[i].a);
    free(k_cases[i].b);
    free(k_cases[i].want);
    free(k_cases[i].want_i);
  }
  k_ncases = 0;
}

/* One program: every reference case as an output. */
static void prog_reference(bc_result *r, const void *arg) {
  (void)arg;
  for (int i = 0; i < k_ncases; i++) {
    ref_case *c = &k_cases[i];
    int64_t n = c->n;
    kiln_tensor a = kiln_from_host(c->a, c->in_dt, 1, &n);
    kiln_tensor y = c->row->un ? c->row->un(a, KILN_HERE) : c->row->bin(a, kiln_from_host(c->b, c->in_dt, 1, &n), KILN_HERE);
    bc_emit(r, y, 0, 0, "%s/%s", c->row->fn, kiln_dtype_name(c->in_dt));
  }
}

static void check_against_reference(const char *backend) {
  static bc_result got;
  bc_run(backend, prog_reference, NULL, &got);
  if (got.status != KILN_OK) {
    KT_FAIL("%s: the reference program failed: %s", backend, got.err);
    bc_result_free(&got);
    return;
  }
  KT_EQ_INT(got.n, k_ncases);
  for (int i = 0; i < got.n && i < k_ncases; i++) {
    const ref_case *c = &k_cases[i];
    const bc_out *o = &got.o[i];
    if (o->dt != c->out_dt || o->numel != c->n) {
      KT_FAIL("%s: %s: result is %s[%lld], NumPy's is %s[%d]", backend, o->name, kiln_dtype_name(o->dt),
              (long long)o->numel, kiln_dtype_name(c->out_dt), c->n);
      continue;
    }
    /* f32: a few ulp of libm differences; f64: 1 ulp-level */
    double rtol = bc_rtol(o->dt), atol = o->dt == KILN_F64 ? 1e-13 : bc_atol(o->dt);
    for (int64_t k = 0; k < o->numel; k++) {
      int isf = bc_is_float(o->dt);
      int ok = isf ? bc_close(bc_get_f(o, k), c->want[k], rtol, atol) : bc_get_i(o, k) == c->want_i[k];
      if (!ok) {
        char in[96];
        if (c->arity == 1 && (c->in_dt == KILN_F32 || c->in_dt == KILN_F64))
          snprintf(in, sizeof in, "x = %.9g", c->in_dt == KILN_F32 ? ((float *)c->a)[k] : ((double *)c->a)[k]);
        else
          snprintf(in, sizeof in, "element %lld", (long long)k);
        KT_FAIL("%s: %s (%s): kiln gives %.17g, NumPy %.17g", backend, o->name, in, bc_get_f(o, k), c->want[k]);
        break;
      }
    }
  }
  bc_result_free(&got);
}

KT_TEST(every_public_row_has_reference_data) {
  free_reference();
  if (load_reference()) return;
  for (int i = 0; i < N_PUB; i++) {
    int seen = 0;
    for (int k = 0; k < k_ncases; k++) seen += k_cases[k].row == &k_pub[i];
    KT_CHECK_MSG(seen > 0, "op %s (kiln_%s) has no reference data: add it to tests/data/op_reference.py",
                 kiln_op_name(k_pub[i].op), k_pub[i].fn);
  }
}

KT_TEST(public_rows_match_numpy_on_ref) {
  if (!k_ncases && load_reference()) return;
  check_against_reference("ref");
}

KT_TEST(public_rows_match_numpy_on_backend) {
  if (!k_ncases && load_reference()) return;
  check_against_reference(bc_backend_under_test());
}

/* ───────────── recipes for the other rows ───────────── */

#define MAXP 3
#define MAXE 64
typedef kiln_tensor (*recipe_fn)(const kiln_tensor *p);
typedef struct recipe {
  int op;
  recipe_fn fn;
  int np;
  int rank[MAXP];
  int64_t shape[MAXP][3];
  double tol, h; /* finite differences: tolerance, step */
} recipe;

static const int64_t S23[2] = {2, 3}, S3[1] = {3}, S22[2] = {2, 2};
static kiln_tensor r_leaf(const kiln_tensor *p) { return kiln_neg(p[0]); }
static kiln_tensor r_scalar(const kiln_tensor *p) { return kiln_mul_s(p[0], 1.5); }
static kiln_tensor r_const(const kiln_tensor *p) { return kiln_mul_c(p[0], 1.5); }
static kiln_tensor r_iota(const kiln_tensor *p) { return kiln_add(p[0], kiln_arange(KILN_F64, 0, 4, 1)); }
static kiln_tensor r_random(const kiln_tensor *p) {
  return kiln_add(kiln_mul(p[0], kiln_rand_normal(KILN_F64, 2, S23, 7)), kiln_rand_uniform(KILN_F64, 2, S23, 8));
}
static kiln_tensor r_cast(const kiln_tensor *p) { return kiln_cast(kiln_mul_c(kiln_cast(p[0], KILN_F32), 2), KILN_F64); }
static kiln_tensor r_where(const kiln_tensor *p) { return kiln_where(kiln_gt_c(p[0], 0), p[0], p[1]); }
static const int k_ax1[1] = {1};
static kiln_tensor r_sum(const kiln_tensor *p) { return kiln_sum(p[0], 1, k_ax1, 0); }
static kiln_tensor r_max(const kiln_tensor *p) { return kiln_max(p[0], 1, k_ax1, 0); }
static kiln_tensor r_min(const kiln_tensor *p) { return kiln_min(p[0], 1, k_ax1, 0); }
static kiln_tensor r_prod(const kiln_tensor *p) { return kiln_prod(p[0], 1, k_ax1, 0); }
static kiln_tensor r_cumsum(const kiln_tensor *p) { return kiln_cumsum(p[0], 1); }
static kiln_tensor r_cumprod(const kiln_tensor *p) { return kiln_cumprod(p[0], -1); }
static kiln_tensor r_argmax(const kiln_tensor *p) { return kiln_cast(kiln_argmax(p[0], 1, 0), KILN_F64); }
static kiln_tensor r_reshape(const kiln_tensor *p) {
  static const int64_t s[2] = {3, 2};
  return kiln_reshape(p[0], 2, s);
}
static kiln_tensor r_permute(const kiln_tensor *p) { return kiln_transpose(p[0], 0, 1); }
static kiln_tensor r_expand(const kiln_tensor *p) { return kiln_mul(kiln_expand(p[0], 2, S23), p[1]); }
static kiln_tensor r_slice(const kiln_tensor *p) { return kiln_slice(p[0], 1, 0, 3, 2); }
static kiln_tensor r_concat(const kiln_tensor *p) { return kiln_concat(2, p, 0); }
static kiln_tensor r_pad(const kiln_tensor *p) {
  static const int64_t lo[2] = {1, 0}, hi[2] = {0, 2};
  return kiln_pad(p[0], lo, hi, 0.5);
}
static kiln_tensor r_index_select(const kiln_tensor *p) {
  static const int64_t ix[3] = {1, 0, 1};
  return kiln_index_select(p[0], 0, kiln_from_host(ix, KILN_I64, 1, S3));
}
static kiln_tensor r_gather(const kiln_tensor *p) {
  static const int64_t ix[4] = {2, 0, 1, 1};
  return kiln_gather(p[0], 1, kiln_from_host(ix, KILN_I64, 2, S22));
}
static kiln_tensor r_matmul(const kiln_tensor *p) { return kiln_matmul(p[0], p[1]); }
/* sort values (a gather: their gradient is checked through it) and the
 * indices, and topk of the transpose (sorting along axis 0) */
static kiln_tensor r_argsort(const kiln_tensor *p) {
  kiln_tensor v, i, tv, ti;
  kiln_sort(p[0], 1, true, &v, &i);
  kiln_topk(p[0], 1, 0, false, &tv, &ti);
  kiln_tensor r = kiln_add(v, kiln_mul_c(kiln_cast(i, KILN_F64), 0.25));
  return kiln_add(r, kiln_add(kiln_expand(tv, 2, S23), kiln_expand(kiln_cast(ti, KILN_F64), 2, S23)));
}
/* duplicates on axis 0 (column 0: the last wins), column 2 out of the index's reach */
static kiln_tensor r_scatter(const kiln_tensor *p) {
  static const int64_t ix[4] = {2, 0, 2, 1};
  return kiln_scatter(p[0], 0, kiln_from_host(ix, KILN_I64, 2, S22), p[1]);
}
/* duplicates on axis 1 accumulate; src wider than the index */
static kiln_tensor r_scatter_add(const kiln_tensor *p) {
  static const int32_t ix[4] = {2, 2, 0, 1};
  return kiln_scatter_add(p[0], 1, kiln_from_host(ix, KILN_I32, 2, S22), p[1]);
}

/* the collectives in a world of 1 (this test runs alone): the value itself
 * on both backends, through the schedule's collective kernel and the dist
 * service; mixed with elementwise work so they sit between loop kernels.
 * Their values across ranks: tests/dist/test_dist.c under mpirun. */
static kiln_tensor r_all_reduce(const kiln_tensor *p) {
  return kiln_add(kiln_all_reduce(kiln_mul_c(p[0], 2), KILN_REDUCE_SUM), kiln_all_reduce(p[0], KILN_REDUCE_MEAN));
}
static kiln_tensor r_broadcast(const kiln_tensor *p) { return kiln_mul(kiln_broadcast(kiln_exp(p[0]), 0), p[0]); }
static kiln_tensor r_all_gather(const kiln_tensor *p) { return kiln_add(kiln_all_gather(kiln_sin(p[0]), 1), p[0]); }

#define P1(r0, ...) 1, {r0}, {{__VA_ARGS__}}
static const recipe k_recipes[] = {
    {KILN_OP_LEAF, r_leaf, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_SCALAR, r_scalar, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_CONST, r_const, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_IOTA, r_iota, P1(1, 4), 1e-6, 1e-6},
    {KILN_OP_RANDOM, r_random, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_CAST, r_cast, P1(2, 2, 3), 1e-3, 1e-3}, /* through f32: a step f32 resolves */
    {KILN_OP_WHERE, r_where, 2, {2, 2}, {{2, 3}, {2, 3}}, 1e-6, 1e-6},
    {KILN_OP_REDUCE_SUM, r_sum, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_REDUCE_MAX, r_max, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_REDUCE_MIN, r_min, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_ARGMAX, r_argmax, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_REDUCE_PROD, r_prod, P1(2, 2, 3), 1e-6, 1e-6}, /* zeros: test_scan.c */
    {KILN_OP_CUMSUM, r_cumsum, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_CUMPROD, r_cumprod, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_RESHAPE, r_reshape, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_PERMUTE, r_permute, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_EXPAND, r_expand, 2, {2, 2}, {{2, 1}, {2, 3}}, 1e-6, 1e-6},
    {KILN_OP_SLICE, r_slice, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_CONCAT, r_concat, 2, {2, 2}, {{2, 3}, {1, 3}}, 1e-6, 1e-6},
    {KILN_OP_PAD, r_pad, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_INDEX_SELECT, r_index_select, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_GATHER, r_gather, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_MATMUL, r_matmul, 2, {2, 2}, {{2, 3}, {3, 2}}, 1e-6, 1e-6},
    {KILN_OP_ARGSORT, r_argsort, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_SCATTER, r_scatter, 2, {2, 2}, {{3, 3}, {2, 3}}, 1e-6, 1e-6},
    {KILN_OP_SCATTER_ADD, r_scatter_add, 2, {2, 2}, {{2, 3}, {2, 3}}, 1e-6, 1e-6},
    {KILN_OP_ALL_REDUCE, r_all_reduce, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_BROADCAST, r_broadcast, P1(2, 2, 3), 1e-6, 1e-6},
    {KILN_OP_ALL_GATHER, r_all_gather, P1(2, 2, 3), 1e-6, 1e-6},
};
#define N_RECIPES ((int)(sizeof k_recipes / sizeof k_recipes[0]))

KT_TEST(every_row_is_tested) {
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    int n = pub_of_op(op) ? 1 : 0;
    for (int i = 0; i < N_RECIPES; i++) n += k_recipes[i].op == op;
    KT_CHECK_MSG(n == 1, "op %s: %d tests (a public elementwise row, or one recipe in tests/backend/test_op_table.c)",
                 kiln_op_name(op), n);
  }
}

/* Deterministic parameter values in [0.3, 1.7] (positive) or in
 * [-1.7, -0.3] u [0.3, 1.7] (mixed), all distinct: no ties for
 * maximum/minimum, no kinks of abs/relu straddled. */
static void param_values_in(int k, int n, double *v, int mixed) {
  for (int i = 0; i < n; i++) {
    double u = kiln_rng_uniform(1000 + (uint64_t)k, (uint64_t)i);
    double m = 0.3 + 1.4 * ((double)i + u) / (double)n;
    v[i] = mixed && (i + k) % 2 ? -m : m;
  }
}
static void param_values(int k, int n, double *v) { param_values_in(k, n, v, 1); }

typedef struct gcase {
  const char *name;
  recipe_fn fn;     /* recipe rows */
  const pub_row *row; /* public elementwise rows */
  int np;
  int rank[MAXP];
  int64_t shape[MAXP][3];
  double v[MAXP][MAXE];
  int n[MAXP];
  double tol, h;
} gcase;

static kiln_tensor run_case(const gcase *g, const kiln_tensor *p) {
  if (g->fn) return g->fn(p);
  return g->row->un ? g->row->un(p[0], KILN_HERE) : g->row->bin(p[0], p[1], KILN_HERE);
}

static void make_params(gcase *g, kiln_tensor *t, int keep) {
  for (int i = 0; i < g->np; i++) {
    t[i] = kiln_from_host(g->v[i], KILN_F64, g->rank[i], g->shape[i]);
    if (keep) t[i] = kiln_keep(t[i]);
  }
}

/* loss = sum(out * w), w fixed and distinct per element */
static kiln_tensor weighted(kiln_tensor out) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(out, s);
  int64_t n = kiln_numel(out);
  static double w[MAXE * 4];
  for (int64_t k = 0; k < n && k < MAXE * 4; k++) w[k] = 0.5 + 0.4 * sin(1.3 * (double)k + 0.2);
  return kiln_sum(kiln_mul(out, kiln_from_host(w, KILN_F64, r, s)), 0, NULL, 0);
}

static double loss_at(gcase *g) {
  kiln_tensor t[MAXP];
  make_params(g, t, 0);
  double L = kiln_item_f64(weighted(run_case(g, t)));
  kiln_mark_step();
  return L;
}

static void gradcheck(const char *backend, gcase *g) {
  kiln_shutdown();
  kiln_autograd_reset();
  kiln_clear_error();
  if (kiln_init(&(kiln_options){.backend = backend}) != KILN_OK) {
    KT_FAIL("%s: kiln_init(%s): %s", g->name, backend, kiln_last_error());
    return;
  }
  kiln_tensor t[MAXP];
  make_params(g, t, 1);
  for (int i = 0; i < g->np; i++) kiln_requires_grad(t[i]);
  if (kiln_backward(weighted(run_case(g, t))) != KILN_OK) {
    KT_FAIL("%s on %s: backward failed: %s", g->name, backend, kiln_last_error());
    kiln_shutdown();
    return;
  }
  static double ga[MAXP][MAXE];
  for (int i = 0; i < g->np; i++) {
    kiln_tensor gr = kiln_grad(t[i]);
    KT_CHECK_MSG(gr.gen != 0, "%s on %s: input %d has no gradient", g->name, backend, i);
    if (!gr.gen || kiln_to_host(gr, ga[i], sizeof(double) * (size_t)g->n[i]) != KILN_OK) {
      kiln_shutdown();
      return;
    }
  }
  kiln_mark_step();
  const double h = g->h > 0 ? g->h : 1e-6;
  int bad = 0;
  for (int i = 0; i < g->np; i++)
    for (int j = 0; j < g->n[i]; j++) {
      double v0 = g->v[i][j];
      g->v[i][j] = v0 + h;
      double lp = loss_at(g);
      g->v[i][j] = v0 - h;
      double lm = loss_at(g);
      g->v[i][j] = v0;
      double num = (lp - lm) / (2 * h);
      if (isnan(num) && isnan(ga[i][j])) continue; /* outside the op's domain (log of a negative, ...) */
      if (!(fabs(num - ga[i][j]) <= g->tol * (1 + fabs(num))) && bad++ < 3)
        KT_FAIL("%s on %s: d/d input%d[%d]: backward %.12g, finite differences %.12g", g->name, backend, i, j,
                ga[i][j], num);
    }
  for (int i = 0; i < g->np; i++) kiln_release(t[i]);
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s on %s: %s", g->name, backend, kiln_last_error());
  kiln_shutdown();
}

static void gradcheck_both(gcase *g) {
  gradcheck("ref", g);
  gradcheck(bc_backend_under_test(), g);
}

/* Both domains where the op is finite there (log, sqrt, pow of negatives
 * are not); every op must be finite on the positive one. */
KT_TEST(gradients_of_public_rows) {
  for (int i = 0; i < N_PUB; i++) {
    if (!kiln_op_table[k_pub[i].op].vjp) continue;
    for (int mixed = 0; mixed < 2; mixed++) {
      gcase g = {.name = k_pub[i].fn, .row = &k_pub[i], .np = k_pub[i].un ? 1 : 2, .tol = 1e-6};
      for (int k = 0; k < g.np; k++) {
        g.rank[k] = 2;
        g.shape[k][0] = 2;
        g.shape[k][1] = 4;
        g.n[k] = 8;
        param_values_in(k, 8, g.v[k], mixed);
      }
      kiln_shutdown();
      KT_CHECK(kiln_init(&(kiln_options){.backend = "ref"}) == KILN_OK);
      double L = loss_at(&g);
      kiln_shutdown();
      if (!isfinite(L)) {
        KT_CHECK_MSG(mixed, "%s: not finite on [0.3, 1.7]", g.name);
        continue;
      }
      gradcheck_both(&g);
    }
  }
}

KT_TEST(gradients_of_recipe_rows) {
  for (int r = 0; r < N_RECIPES; r++) {
    const recipe *rc = &k_recipes[r];
    if (!kiln_op_table[rc->op].vjp) continue;
    gcase g = {.name = kiln_op_name(rc->op), .fn = rc->fn, .np = rc->np, .tol = rc->tol, .h = rc->h};
    for (int k = 0; k < g.np; k++) {
      g.rank[k] = rc->rank[k];
      g.n[k] = 1;
      for (int d = 0; d < rc->rank[k]; d++) g.n[k] *= (int)(g.shape[k][d] = rc->shape[k][d]);
      param_values(k, g.n[k], g.v[k]);
    }
    gradcheck_both(&g);
  }
}

/* Values of the recipe rows: the backend under test against ref. */
static void prog_recipes(bc_result *r, const void *arg) {
  (void)arg;
  for (int i = 0; i < N_RECIPES; i++) {
    const recipe *rc = &k_recipes[i];
    kiln_tensor t[MAXP];
    for (int k = 0; k < rc->np; k++) {
      double v[MAXE];
      int n = 1;
      for (int d = 0; d < rc->rank[k]; d++) n *= (int)rc->shape[k][d];
      param_values(k, n, v);
      t[k] = kiln_from_host(v, KILN_F64, rc->rank[k], rc->shape[k]);
    }
    bc_emit(r, rc->fn(t), 0, 0, "%s", kiln_op_name(rc->op));
  }
}

KT_TEST(recipe_rows_match_ref) { bc_check("op table recipes", prog_recipes, NULL, NULL); }

KT_MAIN(KT_CASE(every_row_is_tested), KT_CASE(every_public_row_has_reference_data),
        KT_CASE(public_rows_match_numpy_on_ref), KT_CASE(public_rows_match_numpy_on_backend),
        KT_CASE(recipe_rows_match_ref), KT_CASE(gradients_of_public_rows), KT_CASE(gradients_of_recipe_rows))
