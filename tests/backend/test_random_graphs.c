/* Random-graph fuzzer: random programs of 5-60 ops (elementwise with
 * broadcasting, reductions, reshape/permute/slice/concat/pad/expand,
 * matmul, where, cast, index ops) built through the public API from random
 * host inputs, evaluated on "ref" without the graph passes (KILN_PASSES=0:
 * the graph as traced) and on the backend under test with them, compared.
 *
 * Fixed seed: graph i is a pure function of (seed, i), so a failure names
 * the graph and KILN_FUZZ_ONLY=i reproduces it alone, printing its ops.
 *   KILN_FUZZ_GRAPHS=N   number of graphs (default 2000)
 *   KILN_FUZZ_SEED=S     another seed (default 20240601)
 *   KILN_FUZZ_BATCH=B    graphs traced into one step (default 25)
 *   KILN_FUZZ_DATA=D     input data sets per graph (default 2, at most 4):
 *                        data sets after the first run in the same session
 *                        and reuse the compiled executable
 *   KILN_FUZZ_ONLY=i     run graph i alone and print its op log
 *
 * Cost: a compiled backend pays one compiler run per distinct step graph,
 * so B independent random graphs are traced into one step (each keeps its
 * outputs) and one compile covers all of them; see docs/testing.md.
 *
 * Numerics: values that feed a discontinuous op (float->int cast,
 * comparison, argmax) must be bit-identical on both backends, so the
 * generator tracks which tensors are "exact" (inputs, integer math, data
 * movement, neg/abs/relu/max/min) and only lets exact tensors reach those
 * ops. Floats that may grow (mul, sum, matmul, exp, ...) are clamped to
 * [-8, 8] so tolerances stay meaningful. */
#include "backend/backend_compare.h"

#define POOL 96
#define MAX_NUMEL 2048

typedef struct gen {
  uint64_t seed, ctr;
  uint64_t data_salt; /* changes input values, never the structure */
  int n;
  kiln_tensor t[POOL];
  uint8_t exact[POOL];
  char *log;
  size_t log_len, log_cap;
} gen;

static uint64_t rbits(gen *g) { return kiln_rng_bits(g->seed, g->ctr++); }
static int rint_(gen *g, int n) { return n <= 1 ? 0 : (int)(rbits(g) % (uint64_t)n); }
static int chance(gen *g, int pct) { return rint_(g, 100) < pct; }

__attribute__((format(printf, 2, 3))) static void glog(gen *g, const char *fmt, ...) {
  if (!g->log) return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  if (g->log_len + (size_t)k + 2 > g->log_cap) return;
  memcpy(g->log + g->log_len, line, (size_t)k);
  g->log_len += (size_t)k;
  g->log[g->log_len++] = '\n';
  g->log[g->log_len] = 0;
}

static const char *shape_s(kiln_tensor t, char *buf) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(t, s);
  int k = sprintf(buf, "%s[", kiln_dtype_name(kiln_dtype_of(t)));
  for (int d = 0; d < r; d++) k += sprintf(buf + k, d ? ",%lld" : "%lld", (long long)s[d]);
  sprintf(buf + k, "]");
  return buf;
}

static int is_f(kiln_tensor t) { return kiln_dtype_of(t) == KILN_F32 || kiln_dtype_of(t) == KILN_F64; }

/* Add t to the pool (dropping it when too large). Returns its index or -1. */
static int push(gen *g, kiln_tensor t, int exact, const char *what) {
  char sb[96];
  if (!kiln_is_valid(t) || kiln_numel(t) > MAX_NUMEL) return -1;
  int i = g->n < POOL ? g->n++ : 1 + rint_(g, POOL - 1);
  g->t[i] = t;
  g->exact[i] = (uint8_t)(exact || !is_f(t));
  glog(g, "  t%d = %s -> %s%s", i, what, shape_s(t, sb), g->exact[i] ? "" : " ~");
  return i;
}

/* A pool index, biased toward recent entries; optionally only exact ones. */
static int pick(gen *g, int need_exact) {
  for (int tries = 0; tries < 16; tries++) {
    int i = g->n - 1 - rint_(g, rint_(g, 2) ? 4 : g->n);
    if (i < 0) i = 0;
    if (!need_exact || g->exact[i]) return i;
  }
  return 0; /* t0 is always an input: exact */
}

static const kiln_dtype k_dts[] = {KILN_F32, KILN_F32, KILN_F32, KILN_F64, KILN_I32, KILN_I64, KILN_BOOL};

static kiln_tensor new_input(gen *g, kiln_dtype dt, int rank, const int64_t *shape) {
  return bc_input(dt, rank, shape, rbits(g) ^ g->data_salt, 0);
}

/* A shape that broadcasts against s (some dims 1, maybe fewer leading). */
static int bcast_shape(gen *g, int rank, const int64_t *s, int64_t *out) {
  int drop = rank > 0 && chance(g, 25) ? rint_(g, rank + 1) : 0;
  for (int d = drop; d < rank; d++) out[d - drop] = chance(g, 30) ? 1 : s[d];
  return rank - drop;
}

static kiln_tensor clamp8(kiln_tensor t) { return is_f(t) ? kiln_minimum_c(kiln_maximum_c(t, -8), 8) : t; }

/* 1 if x and y broadcast together. */
static int bcast_ok(kiln_tensor x, kiln_tensor y) {
  int64_t sx[KILN_MAX_RANK], sy[KILN_MAX_RANK];
  int rx = kiln_shape(x, sx), ry = kiln_shape(y, sy), r = rx > ry ? rx : ry;
  for (int d = 0; d < r; d++) {
    int64_t a = d - (r - rx) >= 0 ? sx[d - (r - rx)] : 1, b = d - (r - ry) >= 0 ? sy[d - (r - ry)] : 1;
    if (a != b && a != 1 && b != 1) return 0;
  }
  return 1;
}

/* An operand broadcast-compatible with a: a pool entry or a new input. */
static kiln_tensor partner(gen *g, kiln_tensor a, int need_exact, int *exact) {
  int64_t sa[KILN_MAX_RANK], sb[KILN_MAX_RANK], so[KILN_MAX_RANK];
  int ra = kiln_shape(a, sa);
  for (int tries = 0; tries < 6; tries++) {
    int j = pick(g, need_exact);
    int rb = kiln_shape(g->t[j], sb), r = ra > rb ? ra : rb, ok = 1;
    for (int d = 0; d < r && ok; d++) {
      int64_t x = d - (r - ra) >= 0 ? sa[d - (r - ra)] : 1, y = d - (r - rb) >= 0 ? sb[d - (r - rb)] : 1;
      ok = x == y || x == 1 || y == 1;
      so[d] = x == 1 ? y : x;
    }
    int64_t n = 1;
    for (int d = 0; d < r && ok; d++) n *= so[d];
    if (ok && n <= MAX_NUMEL) {
      *exact = g->exact[j];
      return g->t[j];
    }
  }
  int rb = bcast_shape(g, ra, sa, sb);
  *exact = 1;
  return new_input(g, k_dts[rint_(g, 7)], rb, sb);
}

/* One random op on the pool. */
static void step(gen *g) {
  char buf[160];
  int ia = pick(g, 0);
  kiln_tensor a = g->t[ia];
  int ex = g->exact[ia], pex = 0;
  int64_t s[KILN_MAX_RANK];
  int R = kiln_shape(a, s);
  int64_t n = kiln_numel(a);
  kiln_dtype dt = kiln_dtype_of(a);
  int kind = rint_(g, 22);
  switch (kind) {
    case 0: { /* exact unary */
      static const char *nm[] = {"neg", "abs", "relu", "not"};
      int k = dt == KILN_BOOL ? 3 : rint_(g, 3);
      kiln_tensor r = k == 0 ? kiln_neg(a) : k == 1 ? kiln_abs(a) : k == 2 ? kiln_relu(a) : kiln_logical_not(a);
      snprintf(buf, sizeof buf, "%s(t%d)", nm[k], ia);
      push(g, r, ex, buf);
      return;
    }
    case 1:
    case 2: { /* transcendental on a tame input */
      static const char *nm[] = {"exp(tanh)", "log(abs+1)", "sqrt(abs)", "rsqrt(abs+1)", "tanh", "sigmoid",
                                 "gelu", "gelu_tanh"};
      int k = rint_(g, 8);
      kiln_tensor x = dt == KILN_BOOL ? kiln_cast(a, KILN_F32) : a, r;
      switch (k) {
        case 0: r = kiln_exp(kiln_tanh(x)); break;
        case 1: r = kiln_log(kiln_add_c(kiln_abs(x), 1)); break;
        case 2: r = kiln_sqrt(kiln_abs(x)); break;
        case 3: r = kiln_rsqrt(kiln_add_c(kiln_abs(x), 1)); break;
        case 4: r = kiln_tanh(x); break;
        case 5: r = kiln_sigmoid(x); break;
        case 6: r = kiln_gelu(clamp8(x)); break;
        default: r = kiln_gelu_tanh(clamp8(x)); break;
      }
      snprintf(buf, sizeof buf, "%s(t%d)", nm[k], ia);
      push(g, r, 0, buf);
      return;
    }
    case 3:
    case 4:
    case 5: { /* binary arithmetic with broadcasting */
      kiln_tensor b = partner(g, a, 0, &pex);
      int k = rint_(g, 7);
      static const char *nm[] = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};
      int both_bool = dt == KILN_BOOL && kiln_dtype_of(b) == KILN_BOOL;
      kiln_tensor r;
      if (both_bool && (k == 1 || k == 3 || k == 6)) k = 0;
      switch (k) {
        case 0: r = kiln_add(a, b); break;
        case 1: r = kiln_sub(a, b); break;
        case 2: r = clamp8(kiln_mul(a, b)); break;
        case 3: /* integer division by zero is defined (0); floats get a safe divisor */
          r = is_f(b) || is_f(a) ? clamp8(kiln_div(a, kiln_add_c(kiln_abs(kiln_cast(b, KILN_F32)), 0.5)))
                                 : kiln_div(a, b);
          break;
        case 4: r = kiln_maximum(a, b); break;
        case 5: r = kiln_minimum(a, b); break;
        default:
          r = clamp8(kiln_pow(kiln_add_c(kiln_abs(kiln_cast(a, KILN_F32)), 0.5),
                              kiln_minimum_c(kiln_maximum_c(kiln_cast(b, KILN_F32), -2), 2)));
          break;
      }
      int exact = ex && pex && (k == 0 || k == 1 || k == 4 || k == 5) ? 1 : 0;
      snprintf(buf, sizeof buf, "%s(t%d, %s)", nm[k], ia, shape_s(b, (char[96]){0}));
      push(g, r, exact, buf);
      return;
    }
    case 6: { /* comparison / logic on exact operands */
      if (!ex) return;
      kiln_tensor b = partner(g, a, 1, &pex);
      int k = rint_(g, 8);
      static const char *nm[] = {"eq", "ne", "lt", "le", "gt", "ge", "and", "or"};
      kiln_tensor (*fns[8])(kiln_tensor, kiln_tensor, kiln_loc) = {kiln_eq_at, kiln_ne_at, kiln_lt_at, kiln_le_at,
                                                                   kiln_gt_at, kiln_ge_at, kiln_logical_and_at,
                                                                   kiln_logical_or_at};
      snprintf(buf, sizeof buf, "%s(t%d, %s)", nm[k], ia, shape_s(b, (char[96]){0}));
      push(g, fns[k](a, b, KILN_HERE), 1, buf);
      return;
    }
    case 7: { /* where(cond from exact data, a, b) */
      int cex = 0;
      kiln_tensor c = partner(g, a, 1, &cex);
      if (kiln_dtype_of(c) != KILN_BOOL) c = kiln_gt_c(c, 0);
      kiln_tensor b = partner(g, a, 0, &pex);
      if (!bcast_ok(c, b)) b = a, pex = ex;
      snprintf(buf, sizeof buf, "where(%s, t%d, %s)", shape_s(c, (char[96]){0}), ia, shape_s(b, (char[96]){0}));
      push(g, kiln_where(c, a, b), ex && pex, buf);
      return;
    }
    case 8: { /* cast */
      kiln_dtype to = k_dts[rint_(g, 7)];
      if (!ex && !(to == KILN_F32 || to == KILN_F64)) to = KILN_F64;
      snprintf(buf, sizeof buf, "cast(t%d, %s)", ia, kiln_dtype_name(to));
      push(g, kiln_cast(a, to), ex, buf);
      return;
    }
    case 9:
    case 10: { /* reductions */
      int axes[KILN_MAX_RANK], na = 0;
      int64_t cnt = 1;
      for (int d = 0; d < R; d++)
        if (chance(g, 40)) axes[na++] = chance(g, 50) ? d : d - R, cnt *= s[d];
      if (na == 0) cnt = n;
      int keep = chance(g, 50), k = rint_(g, 5);
      static const char *nm[] = {"sum", "mean", "max", "min", "argmax"};
      if (k == 1 && !is_f(a)) k = 0;
      if ((k == 2 || k == 3) && cnt == 0) k = 0;
      if (k == 4 && (R == 0 || !ex || s[R - 1] == 0)) k = 0;
      kiln_tensor r = k == 0 ? clamp8(kiln_sum(a, na, axes, keep))
                      : k == 1 ? kiln_mean(a, na, axes, keep)
                      : k == 2 ? kiln_max(a, na, axes, keep)
                      : k == 3 ? kiln_min(a, na, axes, keep)
                               : kiln_argmax(a, -1, keep);
      snprintf(buf, sizeof buf, "%s(t%d, %d axes, keep %d)", nm[k], ia, na, keep);
      push(g, r, k >= 2 && ex, buf);
      return;
    }
    case 11: { /* reshape: flatten, merge two adjacent dims, or insert a 1 */
      int64_t ns[KILN_MAX_RANK];
      int nr = 0, how = rint_(g, 3);
      if (how == 0 || R < 2) {
        ns[nr++] = chance(g, 50) ? -1 : n;
        if (R < KILN_MAX_RANK && chance(g, 50)) ns[nr++] = 1;
      } else if (how == 1) {
        int m = rint_(g, R - 1); /* merge dims m and m+1 */
        for (int d = 0; d < R; d++) {
          if (d == m + 1) continue;
          ns[nr++] = d == m ? s[d] * s[d + 1] : s[d];
        }
      } else {
        int at = rint_(g, R + 1);
        for (int d = 0; d <= R; d++) {
          if (d == at) ns[nr++] = 1;
          if (d < R) ns[nr++] = s[d];
        }
      }
      if (nr > KILN_MAX_RANK) return;
      snprintf(buf, sizeof buf, "reshape(t%d, rank %d)", ia, nr);
      push(g, kiln_reshape(a, nr, ns), ex, buf);
      return;
    }
    case 12:
    case 13: { /* permute / transpose */
      if (R < 2) return;
      int p[KILN_MAX_RANK];
      for (int d = 0; d < R; d++) p[d] = d;
      for (int d = R - 1; d > 0; d--) {
        int j = rint_(g, d + 1), t = p[d];
        p[d] = p[j], p[j] = t;
      }
      snprintf(buf, sizeof buf, "permute(t%d, [%d,%d,..])", ia, p[0], p[1]);
      push(g, kiln_permute(a, p), ex, buf);
      return;
    }
    case 14: { /* slice */
      if (R == 0) return;
      int ax = rint_(g, R);
      int64_t d = s[ax] + 1, st = rint_(g, (int)(2 * d + 1)) - d, sp = rint_(g, (int)(2 * d + 1)) - d;
      int64_t step = 1 + rint_(g, 3);
      snprintf(buf, sizeof buf, "slice(t%d, axis %d, %lld:%lld:%lld)", ia, ax, (long long)st, (long long)sp,
               (long long)step);
      push(g, kiln_slice(a, ax, st, sp, step), ex, buf);
      return;
    }
    case 15: { /* concat with a slice of itself or a transformed copy */
      if (R == 0) return;
      int ax = rint_(g, R);
      kiln_tensor parts[3] = {a, kiln_slice(a, ax, rint_(g, 3), s[ax], 1), chance(g, 50) ? kiln_neg(kiln_cast(a, KILN_I32)) : a};
      int np = 2 + rint_(g, 2);
      snprintf(buf, sizeof buf, "concat(t%d.., axis %d, %d parts)", ia, ax, np);
      push(g, kiln_concat(np, parts, ax), ex, buf);
      return;
    }
    case 16: { /* pad */
      int64_t lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
      for (int d = 0; d < R; d++) lo[d] = rint_(g, 3), hi[d] = rint_(g, 2);
      static const double vals[] = {0, -1, 2.5, 1};
      double v = vals[rint_(g, 4)];
      snprintf(buf, sizeof buf, "pad(t%d, value %g)", ia, v);
      push(g, kiln_pad(a, lo, hi, v), ex, buf);
      return;
    }
    case 17: { /* expand: size-1 dims and a new leading dim */
      int64_t ns[KILN_MAX_RANK];
      int lead = R < KILN_MAX_RANK && chance(g, 50), nr = 0;
      if (lead) ns[nr++] = 1 + rint_(g, 3);
      for (int d = 0; d < R; d++) ns[nr++] = s[d] == 1 ? 1 + rint_(g, 4) : s[d];
      snprintf(buf, sizeof buf, "expand(t%d)", ia);
      push(g, kiln_expand(a, nr, ns), ex, buf);
      return;
    }
    case 18: { /* matmul with a new weight (or a vector) */
      kiln_tensor x = is_f(a) ? a : kiln_cast(a, KILN_F32);
      if (R == 0) x = kiln_reshape(x, 1, ((int64_t[]){1}));
      int64_t K = R == 0 ? 1 : s[R - 1], N = 1 + rint_(g, 5);
      kiln_dtype wd = chance(g, 70) ? KILN_F32 : KILN_F64;
      kiln_tensor w = chance(g, 20) ? new_input(g, wd, 1, &K) : new_input(g, wd, 2, ((int64_t[]){K, N}));
      snprintf(buf, sizeof buf, "matmul(t%d, %s)", ia, shape_s(w, (char[96]){0}));
      push(g, clamp8(kiln_matmul(x, w)), 0, buf);
      return;
    }
    case 19: { /* index_select (in-range indices: out of range is an error, test_index_errors) */
      if (R == 0) return;
      int ax = rint_(g, R);
      if (s[ax] == 0) return;
      int64_t is[2] = {1 + rint_(g, 4), 1 + rint_(g, 3)};
      int ir = rint_(g, 3);
      int64_t cnt = ir == 0 ? 1 : ir == 1 ? is[0] : is[0] * is[1];
      int64_t ids[12];
      for (int k = 0; k < cnt; k++) ids[k] = rint_(g, (int)s[ax]);
      kiln_tensor idx = kiln_from_host(ids, KILN_I64, ir, is);
      if (chance(g, 50)) idx = kiln_cast(idx, KILN_I32);
      snprintf(buf, sizeof buf, "index_select(t%d, axis %d, idx rank %d)", ia, ax, ir);
      push(g, kiln_index_select(a, ax, idx), ex, buf);
      return;
    }
    case 20: { /* gather */
      if (R == 0) return;
      int ax = rint_(g, R);
      if (s[ax] == 0) return;
      int64_t is[KILN_MAX_RANK], cnt = 1;
      for (int d = 0; d < R; d++) is[d] = d == ax ? 1 + rint_(g, 3) : (s[d] == 0 ? 0 : 1 + rint_(g, (int)s[d])), cnt *= is[d];
      int64_t *ids = calloc((size_t)cnt + 1, sizeof *ids);
      for (int64_t k = 0; k < cnt; k++) ids[k] = rint_(g, (int)s[ax]);
      kiln_tensor idx = kiln_from_host(ids, KILN_I64, R, is);
      free(ids);
      snprintf(buf, sizeof buf, "gather(t%d, axis %d)", ia, ax);
      push(g, kiln_gather(a, ax, idx), ex, buf);
      return;
    }
    default: { /* scalar forms: graph-input scalars and constants */
      double v = (double)(rint_(g, 9) - 4) * (chance(g, 50) ? 0.5 : 1);
      int k = rint_(g, 4);
      kiln_tensor r = k == 0   ? kiln_add_s(a, v)
                      : k == 1 ? clamp8(kiln_mul_c(a, v))
                      : k == 2 ? kiln_maximum_s(a, v)
                               : kiln_sub_c(dt == KILN_BOOL ? kiln_cast(a, KILN_I32) : a, v);
      snprintf(buf, sizeof buf, "scalar op %d (t%d, %g)", k, ia, v);
      push(g, r, ex && v == floor(v) && k != 1, buf);
      return;
    }
  }
}

typedef struct fuzz_args {
  uint64_t seed;
  int first, count;
  int data; /* data set number: same structure, other input values */
  char **logs; /* logs[i - first] or NULL */
} fuzz_args;

/* Build graph number idx and emit its outputs. */
static void build_graph(bc_result *r, uint64_t seed, int idx, int data, char *log) {
  gen g = {.seed = kiln_rng_bits(seed, (uint64_t)idx),
           .data_salt = (uint64_t)data * 0x9e3779b97f4a7c15ULL,
           .log = log,
           .log_cap = log ? 16384 : 0};
  if (log) log[0] = 0;
  int R = (int)(rbits(&g) % 5);
  int64_t s[KILN_MAX_RANK];
  for (int d = 0; d < R; d++) s[d] = chance(&g, 3) ? 0 : 1 + rint_(&g, 5);
  int n_in = 1 + rint_(&g, 3);
  glog(&g, "graph %d:", idx);
  for (int k = 0; k < n_in; k++) {
    int64_t bs[KILN_MAX_RANK];
    int br = k == 0 ? R : bcast_shape(&g, R, s, bs);
    push(&g, new_input(&g, k_dts[rint_(&g, 7)], br, k == 0 ? s : bs), 1, "input");
  }
  int n_ops = 5 + rint_(&g, 56);
  for (int k = 0; k < n_ops; k++) step(&g);
  if (kiln_last_status() != KILN_OK) { /* a generator bug: say which graph */
    KT_FAIL("graph %d: tracing error: %s", idx, kiln_last_error());
    kiln_clear_error();
  }
  bc_emit(r, g.t[g.n - 1], 1e-4, 1e-4, "graph %d last", idx);
  if (g.n > n_in + 1 && chance(&g, 50)) {
    int j = n_in + rint_(&g, g.n - n_in - 1);
    bc_emit(r, g.t[j], 1e-4, 1e-4, "graph %d t%d", idx, j);
  }
}

static void prog_batch(bc_result *r, const void *arg) {
  const fuzz_args *a = arg;
  for (int i = 0; i < a->count; i++) build_graph(r, a->seed, a->first + i, a->data, a->logs ? a->logs[i] : NULL);
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

/* Run graphs [first, first + count) with n_data data sets on ref and on the
 * backend under test (one session each: data set 2.. reuse the compiled
 * executable) and compare. Returns the number of mismatching outputs. */
static int check_batch(uint64_t seed, int first, int count, int n_data, char **logs, const char *what) {
  static bc_result ref[4], got[4];
  fuzz_args a[4];
  const void *args[4];
  if (n_data > 4) n_data = 4;
  for (int d = 0; d < n_data; d++) {
    a[d] = (fuzz_args){seed, first, count, d, d == 0 ? logs : NULL};
    args[d] = &a[d];
  }
  bc_run_oracle_steps(prog_batch, args, n_data, ref); /* ref on the graph as traced */
  bc_run_steps(bc_backend_under_test(), prog_batch, args, n_data, got);
  int bad = 0;
  for (int d = 0; d < n_data; d++) {
    char w[96];
    snprintf(w, sizeof w, "%s data %d", what, d);
    bad += bc_compare(w, &ref[d], &got[d]);
    bc_result_free(&ref[d]);
    bc_result_free(&got[d]);
  }
  return bad;
}

KT_TEST(random_graphs) {
  uint64_t seed = (uint64_t)env_int("KILN_FUZZ_SEED", 20240601);
  int total = env_int("KILN_FUZZ_GRAPHS", 2000), batch = env_int("KILN_FUZZ_BATCH", 25);
  int n_data = env_int("KILN_FUZZ_DATA", 2), only = env_int("KILN_FUZZ_ONLY", -1);
  if (batch < 1) batch = 1;
  if (n_data < 1) n_data = 1;
  char *log = malloc(16384);
  if (only >= 0) {
    int bad = check_batch(seed, only, 1, n_data, &log, "fuzz single");
    fprintf(stderr, "%s%s\n", log, bad ? "MISMATCH" : "ok");
    free(log);
    return;
  }
  int failures = 0;
  for (int first = 0; first < total && failures < 5; first += batch) {
    int count = first + batch <= total ? batch : total - first;
    char what[64];
    snprintf(what, sizeof what, "fuzz graphs %d..%d", first, first + count - 1);
    if (check_batch(seed, first, count, n_data, NULL, what) == 0) continue;
    failures++;
    /* shrink: find the failing graphs of the batch and print their ops */
    for (int i = 0; i < count; i++)
      if (check_batch(seed, first + i, 1, n_data, &log, "fuzz single"))
        fprintf(stderr, "%s(reproduce: KILN_FUZZ_ONLY=%d)\n", log, first + i);
  }
  fprintf(stderr, "random graphs: %d graphs x %d data sets, batch %d, seed %llu, backend %s\n", total, n_data,
          batch, (unsigned long long)seed, bc_backend_under_test());
  free(log);
}

KT_MAIN(KT_CASE(random_graphs))
