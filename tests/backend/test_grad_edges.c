/* Gradients at edge values against PyTorch (tests/data/grad_edge_reference.py
 * writes grad_edge_reference.txt from PyTorch 1.13's autograd): zeros of
 * both signs, ties, +-inf and NaN in the inputs and in the seed (the
 * gradient of the output), duplicate indices, fully masked rows. Every case
 * runs on ref and on the backend under test, with its inputs and output
 * alone and passed through an elementwise select (so the op and its
 * backward are computed inside fused kernels), and checks the output, the
 * dtype and the gradient of every floating-point input.
 *
 * Tolerances. rtol = atol = 0: exact (NaN matches NaN; +0 and -0 are taken
 * as equal); the ops of these cases are exactly rounded IEEE arithmetic,
 * selects, data movement or sums of small integers, so PyTorch's values are
 * reproducible bit for bit. Otherwise |got - want| <= rtol |want| + atol,
 * and a non-finite expected value must match exactly: kiln's exp, log,
 * tanh, erf, sin, cos are its own f32 functions (docs/codegen.md §4b), within
 * a few ulps of glibc's/SLEEF's, and softmax, layer_norm, cross_entropy and
 * sdpa round their sums in another order than PyTorch's kernels. */
#include <inttypes.h>
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/bert.h>
#include <kiln/nn.h>

#include "autograd/autograd_internal.h"
#include "backend/backend_compare.h"

/* ───────────── the reference file ───────────── */

#define MAX_REF 640
#define MAX_VALS 64
#define MAX_IN 4

typedef struct ref_t {
  char name[48], dt[8];
  int rank;
  int64_t shape[KILN_MAX_RANK], n;
  double v[MAX_VALS];
} ref_t;

static ref_t *g_ref;
static int g_nref;

static void load_refs(void) {
  const char *dir = getenv("KILN_TEST_DATA");
  char path[512], tok[64];
  snprintf(path, sizeof path, "%s/grad_edge_reference.txt", dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    KT_FAIL("%s not found (set KILN_TEST_DATA; run tests/data/grad_edge_reference.py)", path);
    return;
  }
  g_ref = calloc(MAX_REF, sizeof *g_ref);
  while (g_ref && g_nref < MAX_REF && fscanf(f, "%47s", g_ref[g_nref].name) == 1) {
    ref_t *r = &g_ref[g_nref];
    if (r->name[0] == '#') {
      int c;
      while ((c = fgetc(f)) != '\n' && c != EOF) {}
      continue;
    }
    if (fscanf(f, "%7s %d", r->dt, &r->rank) != 2 || r->rank < 0 || r->rank > KILN_MAX_RANK) break;
    r->n = 1;
    for (int i = 0; i < r->rank; i++) {
      if (fscanf(f, "%" SCNd64, &r->shape[i]) != 1) goto bad;
      r->n *= r->shape[i];
    }
    if (r->n > MAX_VALS) goto bad;
    for (int64_t i = 0; i < r->n; i++) {
      if (fscanf(f, "%63s", tok) != 1) goto bad;
      r->v[i] = strcmp(tok, "nan") ? strtod(tok, NULL) : NAN;
    }
    g_nref++;
  }
  fclose(f);
  return;
bad:
  KT_FAIL("grad_edge_reference.txt: bad entry %s", g_ref[g_nref].name);
  fclose(f);
}

static const ref_t *find_ref(const char *name, const char *part) {
  char key[64];
  snprintf(key, sizeof key, "%s.%s", name, part);
  for (int i = 0; i < g_nref; i++)
    if (!strcmp(g_ref[i].name, key)) return &g_ref[i];
  return NULL;
}

static kiln_dtype dtype_of_name(const char *s) {
  static const struct {
    const char *n;
    kiln_dtype dt;
  } k[] = {{"f32", KILN_F32}, {"f64", KILN_F64}, {"bf16", KILN_BF16}, {"f16", KILN_F16}, {"i64", KILN_I64},
           {"bool", KILN_BOOL}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (!strcmp(k[i].n, s)) return k[i].dt;
  return KILN_DTYPE_COUNT;
}

/* A tensor of the reference's dtype and values (16-bit floats are exact:
 * the script wrote values of that dtype). */
static kiln_tensor from_ref(const ref_t *r) {
  kiln_dtype dt = dtype_of_name(r->dt);
  uint8_t buf[MAX_VALS * 8];
  for (int64_t i = 0; i < r->n; i++) {
    double v = r->v[i];
    switch (dt) {
      case KILN_F32: ((float *)buf)[i] = (float)v; break;
      case KILN_F64: ((double *)buf)[i] = v; break;
      case KILN_BF16: {
        float x = (float)v;
        uint32_t b;
        memcpy(&b, &x, 4);
        ((uint16_t *)buf)[i] = (uint16_t)(b >> 16);
        break;
      }
      case KILN_F16: {
        _Float16 h = (_Float16)v;
        memcpy((uint16_t *)buf + i, &h, 2);
        break;
      }
      case KILN_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
      default: buf[i] = v != 0; break;
    }
  }
  return kiln_from_host(buf, dt, r->rank, r->shape);
}

/* ───────────── running a case ───────────── */

typedef kiln_tensor (*case_fn)(const kiln_tensor *in);
static int g_fused;

/* Through where(true, t, 0): computed in a kernel with its neighbours. */
static kiln_tensor fuse(kiln_tensor t) {
  if (!g_fused) return t;
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(t, s);
  return kiln_where(kiln_ne_c(kiln_zeros(KILN_I32, r, s), 1.0), t, kiln_zeros(kiln_dtype_of(t), r, s));
}

static int close_to(double got, double want, double rtol, double atol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want) || (rtol == 0 && atol == 0)) return got == want;
  return fabs(got - want) <= rtol * fabs(want) + atol;
}

/* t against reference r: dtype, shape and values. */
static void compare(const char *what, const char *where, kiln_tensor t, const ref_t *r, double rtol, double atol) {
  if (!r) {
    KT_FAIL("%s %s: no reference (run tests/data/grad_edge_reference.py)", what, where);
    return;
  }
  if (!kiln_is_valid(t)) {
    KT_FAIL("%s %s: no tensor: %s", what, where, kiln_last_error());
    return;
  }
  kiln_dtype want_dt = dtype_of_name(r->dt);
  if (kiln_dtype_of(t) != want_dt) {
    KT_FAIL("%s %s: dtype %s, PyTorch's %s", what, where, kiln_dtype_name(kiln_dtype_of(t)), r->dt);
    return;
  }
  int64_t s[KILN_MAX_RANK];
  int rank = kiln_shape(t, s);
  if (rank != r->rank || memcmp(s, r->shape, sizeof(int64_t) * (size_t)rank)) {
    KT_FAIL("%s %s: shape differs from PyTorch's (rank %d vs %d)", what, where, rank, r->rank);
    return;
  }
  double got[MAX_VALS];
  if (kiln_to_host(kiln_cast(t, KILN_F64), got, sizeof(double) * (size_t)r->n) != KILN_OK) {
    KT_FAIL("%s %s: %s", what, where, kiln_last_error());
    return;
  }
  for (int64_t i = 0; i < r->n; i++)
    if (!close_to(got[i], r->v[i], rtol, atol)) {
      KT_FAIL("%s %s: [%lld] = %.9g, PyTorch %.9g", what, where, (long long)i, got[i], r->v[i]);
      return;
    }
}

static void run_case(const char *name, case_fn fn, double rtol, double atol) {
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++)
    for (int fused = 0; fused < 2; fused++) {
      char where[96];
      snprintf(where, sizeof where, "on %s%s", backends[b], fused ? " fused" : "");
      g_fused = fused;
      kiln_autograd_reset();
      kiln_clear_error();
      if (kiln_init(&(kiln_options){.backend = backends[b]}) != KILN_OK) {
        KT_FAIL("%s: kiln_init(%s): %s", name, backends[b], kiln_last_error());
        continue;
      }
      kiln_tensor leaf[MAX_IN], in[MAX_IN];
      const ref_t *ri[MAX_IN];
      int n_in = 0;
      char part[16];
      for (; n_in < MAX_IN; n_in++) {
        snprintf(part, sizeof part, "in%d", n_in);
        if (!(ri[n_in] = find_ref(name, part))) break;
        leaf[n_in] = kiln_keep(from_ref(ri[n_in]));
        if (bc_is_float(kiln_dtype_of(leaf[n_in]))) kiln_requires_grad(leaf[n_in]);
        in[n_in] = fuse(leaf[n_in]);
      }
      const ref_t *seed = find_ref(name, "seed");
      kiln_tensor y = fn(in);
      if (!n_in || !seed || !kiln_is_valid(y)) {
        KT_FAIL("%s %s: %s", name, where, n_in && seed ? kiln_last_error() : "no reference inputs or seed");
        kiln_shutdown();
        continue;
      }
      y = fuse(y);
      kiln_status st = kiln_backward_with(y, from_ref(seed));
      KT_CHECK_MSG(st == KILN_OK, "%s %s: backward: %s", name, where, kiln_last_error());
      char what[64];
      snprintf(what, sizeof what, "%s out", name);
      compare(what, where, y, find_ref(name, "out"), rtol, atol);
      for (int k = 0; k < n_in && st == KILN_OK; k++) {
        if (!bc_is_float(kiln_dtype_of(leaf[k]))) continue;
        snprintf(part, sizeof part, "g%d", k);
        snprintf(what, sizeof what, "%s d/din%d", name, k);
        compare(what, where, kiln_grad(leaf[k]), find_ref(name, part), rtol, atol);
      }
      KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s %s: %s", name, where, kiln_last_error());
      kiln_shutdown();
    }
}

typedef struct gcase {
  const char *name;
  case_fn fn;
  double rtol, atol;
} gcase;

static void run_all(const gcase *c, int n) {
  if (!g_ref) load_refs();
  for (int i = 0; i < n; i++) run_case(c[i].name, c[i].fn, c[i].rtol, c[i].atol);
}
#define RUN(cases) run_all(cases, (int)(sizeof cases / sizeof cases[0]))

static const int kAx1[1] = {1}, kAx01[2] = {0, 1};

/* A few f32 ulps: kiln's own f32 transcendental functions against PyTorch's. */
#define ULPS 1e-6

/* ───────────── unary ops at extreme inputs ───────────── */

/* torch.<op>(x) for x = [-inf, -100, -20, -1, -0, 0, 1e-30, 0.5, 1, 20, 100, inf, nan] */
#define UN(op) \
  static kiln_tensor u_##op(const kiln_tensor *in) { return kiln_##op(in[0]); }
UN(neg)
UN(abs)
UN(exp)
UN(expm1)
UN(log)
UN(log1p)
UN(sqrt)
UN(rsqrt)
UN(tanh)
UN(sigmoid)
UN(relu)
UN(gelu)
UN(gelu_tanh)
UN(erf)
UN(sin)
UN(cos)
UN(floor)
UN(ceil)
UN(round)
UN(trunc)
UN(sign)
#undef UN

KT_TEST(unary_ops_at_extremes) {
  static const gcase c[] = {
      {"u_neg", u_neg, 0, 0},       {"u_abs", u_abs, 0, 0},
      {"u_exp", u_exp, ULPS, 0},    {"u_expm1", u_expm1, ULPS, 0},
      /* PyTorch's log1p of a subnormal x is 0, kiln's x */
      {"u_log", u_log, ULPS, 0},    {"u_log1p", u_log1p, ULPS, 2e-45},
      {"u_sqrt", u_sqrt, 0, 0},     {"u_rsqrt", u_rsqrt, ULPS, 0},
      {"u_tanh", u_tanh, ULPS, 0},  {"u_sigmoid", u_sigmoid, ULPS, 0},
      {"u_relu", u_relu, 0, 0},     {"u_gelu", u_gelu, 4 * ULPS, 1e-12},
      {"u_gelu_tanh", u_gelu_tanh, 4 * ULPS, 1e-12},
      {"u_erf", u_erf, ULPS, 0},    {"u_sin", u_sin, ULPS, 0},
      {"u_cos", u_cos, ULPS, 0},    {"u_floor", u_floor, 0, 0},
      {"u_ceil", u_ceil, 0, 0},     {"u_round", u_round, 0, 0},
      {"u_trunc", u_trunc, 0, 0},   {"u_sign", u_sign, 0, 0},
      {"u_exp_big", u_exp, ULPS, 0}, {"u_log_tiny", u_log, ULPS, 0},
      {"u_log1p_m1", u_log1p, ULPS, 0},
  };
  RUN(c);
}

/* ───────────── maximum / minimum / clamp ───────────── */

/* torch.maximum(a, b) */
static kiln_tensor b_maximum(const kiln_tensor *in) { return kiln_maximum(in[0], in[1]); }
/* torch.minimum(a, b) */
static kiln_tensor b_minimum(const kiln_tensor *in) { return kiln_minimum(in[0], in[1]); }
/* torch.maximum(x, torch.tensor(0.0)) */
static kiln_tensor b_maximum_c(const kiln_tensor *in) { return kiln_maximum_c(in[0], 0.0); }
/* torch.minimum(x, torch.tensor(2.0)) */
static kiln_tensor b_minimum_c(const kiln_tensor *in) { return kiln_minimum_c(in[0], 2.0); }
/* torch.clamp(x, 0.0, 2.0) */
static kiln_tensor c_clamp(const kiln_tensor *in) { return kiln_clamp(in[0], 0.0, 2.0); }
/* torch.clamp(x, min=0.0) */
static kiln_tensor c_clamp_min(const kiln_tensor *in) { return kiln_clamp(in[0], 0.0, INFINITY); }
/* torch.clamp(x, max=2.0) */
static kiln_tensor c_clamp_max(const kiln_tensor *in) { return kiln_clamp(in[0], -INFINITY, 2.0); }
/* torch.clamp(x, 1.0, 1.0) */
static kiln_tensor c_clamp_eq(const kiln_tensor *in) { return kiln_clamp(in[0], 1.0, 1.0); }
/* torch.clamp(x, -1.0, 1.0), float64 */
static kiln_tensor c_clamp_f64(const kiln_tensor *in) { return kiln_clamp(in[0], -1.0, 1.0); }

/* torch.maximum / torch.minimum: a tie splits g in halves, NaN on either
 * side gives g to both, the smaller (larger) side gets 0 even for g = inf;
 * torch.clamp: g inside the closed interval [lo, hi], 0 outside and at NaN */
KT_TEST(maximum_minimum_clamp) {
  static const gcase c[] = {
      {"b_maximum", b_maximum, 0, 0},     {"b_minimum", b_minimum, 0, 0},     {"b_maximum_c", b_maximum_c, 0, 0},
      {"b_minimum_c", b_minimum_c, 0, 0}, {"c_clamp", c_clamp, 0, 0},         {"c_clamp_min", c_clamp_min, 0, 0},
      {"c_clamp_max", c_clamp_max, 0, 0}, {"c_clamp_eq", c_clamp_eq, 0, 0},   {"c_clamp_f64", c_clamp_f64, 0, 0},
  };
  RUN(c);
}

/* ───────────── div, pow, remainder, fmod ───────────── */

/* torch.div(a, b) */
static kiln_tensor b_div(const kiln_tensor *in) { return kiln_div(in[0], in[1]); }
/* torch.pow(a, b) */
static kiln_tensor b_pow(const kiln_tensor *in) { return kiln_pow(in[0], in[1]); }
/* torch.pow(x, 2.0) */
static kiln_tensor b_pow_c2(const kiln_tensor *in) { return kiln_pow_c(in[0], 2.0); }
/* torch.pow(x, 0.0) */
static kiln_tensor b_pow_c0(const kiln_tensor *in) { return kiln_pow_c(in[0], 0.0); }
/* torch.pow(x, -1.0) */
static kiln_tensor b_pow_cm1(const kiln_tensor *in) { return kiln_pow_c(in[0], -1.0); }
/* torch.pow(x, 3.0) */
static kiln_tensor b_pow_c3(const kiln_tensor *in) { return kiln_pow_c(in[0], 3.0); }
/* torch.remainder(a, b) */
static kiln_tensor b_remainder(const kiln_tensor *in) { return kiln_remainder(in[0], in[1]); }
/* torch.fmod(a, b) */
static kiln_tensor b_fmod(const kiln_tensor *in) { return kiln_fmod(in[0], in[1]); }

KT_TEST(div_pow_remainder_fmod) {
  static const gcase c[] = {
      /* torch.div(a, b); pow's rules are exact products except pow and log */
      {"b_div", b_div, 0, 0},           {"b_pow", b_pow, ULPS, 0},           {"b_pow_c2", b_pow_c2, 0, 0},
      {"b_pow_c0", b_pow_c0, 0, 0},     {"b_pow_cm1", b_pow_cm1, ULPS, 0},   {"b_pow_c3", b_pow_c3, ULPS, 0},
      {"b_remainder", b_remainder, 0, 0}, {"b_fmod", b_fmod, 0, 0},          {"b_remainder_f64", b_remainder, 0, 0},
  };
  RUN(c);
}

/* ───────────── where with inf / NaN in the branch not taken ───────────── */

/* torch.where(x > 0, torch.sqrt(x), 0.0) */
static kiln_tensor w_sqrt(const kiln_tensor *in) {
  return kiln_where(kiln_gt_c(in[0], 0.0), kiln_sqrt(in[0]), kiln_constant(KILN_F32, 0.0));
}
/* torch.where(x > 0, x, 1.0 / x) */
static kiln_tensor w_recip(const kiln_tensor *in) {
  return kiln_where(kiln_gt_c(in[0], 0.0), in[0], kiln_div(kiln_constant(KILN_F32, 1.0), in[0]));
}
/* torch.where(torch.tensor([True, False, True, False]), a, b) */
static kiln_tensor w_plain(const kiln_tensor *in) {
  static const uint8_t c[4] = {1, 0, 1, 0};
  static const int64_t s4[1] = {4};
  return kiln_where(fuse(kiln_from_host(c, KILN_BOOL, 1, s4)), in[0], in[1]);
}

KT_TEST(where_with_specials_not_taken) {
  static const gcase c[] = {{"w_sqrt", w_sqrt, 0, 0}, {"w_recip", w_recip, 0, 0}, {"w_plain", w_plain, 0, 0}};
  RUN(c);
}

/* ───────────── reductions ───────────── */

/* torch.amax(x, 1) */
static kiln_tensor r_amax(const kiln_tensor *in) { return kiln_max(in[0], 1, kAx1, false); }
/* torch.amin(x, 1) */
static kiln_tensor r_amin(const kiln_tensor *in) { return kiln_min(in[0], 1, kAx1, false); }
/* torch.amax(x, (0, 1)) */
static kiln_tensor r_amax_all(const kiln_tensor *in) { return kiln_max(in[0], 2, kAx01, false); }
/* torch.prod(x, 1) */
static kiln_tensor r_prod(const kiln_tensor *in) { return kiln_prod(in[0], 1, kAx1, false); }
/* torch.sqrt((x * x).sum(1)) */
static kiln_tensor r_norm(const kiln_tensor *in) { return kiln_sqrt(kiln_sum(kiln_mul(in[0], in[0]), 1, kAx1, false)); }
/* x.sum(1) */
static kiln_tensor r_sum_1(const kiln_tensor *in) { return kiln_sum(in[0], 1, kAx1, false); }
/* x.mean(1) */
static kiln_tensor r_mean_1(const kiln_tensor *in) { return kiln_mean(in[0], 1, kAx1, false); }
/* torch.cumsum(x, 1) */
static kiln_tensor r_cumsum(const kiln_tensor *in) { return kiln_cumsum(in[0], 1); }
/* torch.cumprod(x, 1) */
static kiln_tensor r_cumprod(const kiln_tensor *in) { return kiln_cumprod(in[0], 1); }
/* torch.cumprod(x, 0) */
static kiln_tensor r_cumprod_0(const kiln_tensor *in) { return kiln_cumprod(in[0], 0); }

/* torch.amax / torch.amin (kiln_max / kiln_min): ties split evenly; a NaN
 * row: NaN everywhere in it (g / 0 * mask) */
KT_TEST(reductions_and_scans) {
  static const gcase c[] = {
      {"r_amax", r_amax, 0, 0},       {"r_amin", r_amin, 0, 0},         {"r_amax_nan", r_amax, 0, 0},
      {"r_amin_nan", r_amin, 0, 0},   {"r_amax_all", r_amax_all, 0, 0}, {"r_amax_inf_g", r_amax, 0, 0},
      {"r_prod", r_prod, 0, 0},       {"r_prod_big", r_prod, ULPS, 0},  {"r_norm", r_norm, 0, 0},
      {"r_sum_1", r_sum_1, 0, 0},     {"r_mean_1", r_mean_1, 0, 0},
      {"r_cumsum", r_cumsum, 0, 0},   {"r_cumprod", r_cumprod, 0, 0},   {"r_cumprod_0", r_cumprod_0, 0, 0},
  };
  RUN(c);
}

/* ───────────── softmax, losses, layers ───────────── */

/* torch.softmax(x, -1) */
static kiln_tensor s_softmax(const kiln_tensor *in) { return kiln_softmax(in[0], -1); }
/* torch.log_softmax(x, -1) */
static kiln_tensor s_log_softmax(const kiln_tensor *in) { return kiln_log_softmax(in[0], -1); }
/* F.cross_entropy(x, t, ignore_index=-1) */
static kiln_tensor l_ce(const kiln_tensor *in) { return kiln_cross_entropy(in[0], in[1], -1, 0.0); }
/* F.cross_entropy(x, t, ignore_index=-1, label_smoothing=0.1) */
static kiln_tensor l_ce_smooth(const kiln_tensor *in) { return kiln_cross_entropy(in[0], in[1], -1, 0.1); }
/* F.cross_entropy(x, t, ignore_index=-1, label_smoothing=0.25) */
static kiln_tensor l_ce_smooth2(const kiln_tensor *in) { return kiln_cross_entropy(in[0], in[1], -1, 0.25); }
/* F.mse_loss(a, b) */
static kiln_tensor l_mse(const kiln_tensor *in) { return kiln_mse_loss(in[0], in[1]); }
/* F.layer_norm(x, (4,), w, b, 1e-5) */
static kiln_tensor n_layernorm(const kiln_tensor *in) {
  kiln_layernorm ln = {.weight = in[1], .bias = in[2], .dim = 4, .eps = 1e-5};
  return kiln_layernorm_forward(&ln, in[0]);
}
/* F.embedding(ids, w) */
static kiln_tensor n_embedding(const kiln_tensor *in) {
  kiln_embedding e = {.weight = in[0], .num = 4, .dim = 2};
  return kiln_embedding_forward(&e, in[1]);
}
static const kiln_tensor kNull = {0, 0};
/* F.normalize(h.sum(1) / 2, dim=-1) */
static kiln_tensor n_normalize(const kiln_tensor *in) { return kiln_mean_pool_normalize(in[0], kNull); }
/* F.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), dim=-1), m = mask[..., None] */
static kiln_tensor n_normalize_mask(const kiln_tensor *in) { return kiln_mean_pool_normalize(in[0], in[1]); }
/* F.dropout(x, 0.0, training=True) */
static kiln_tensor n_dropout0(const kiln_tensor *in) { return kiln_dropout(in[0], 0.0, 1, true); }
/* torch.softmax(q @ k.mT / sqrt(d) masked with -inf, -1) @ v */
static kiln_tensor a_sdpa(const kiln_tensor *in) { return kiln_sdpa(in[0], in[1], in[2], in[3], 0.0, false, 0); }

KT_TEST(softmax_losses_layers) {
  static const gcase c[] = {
      {"s_softmax", s_softmax, ULPS, 1e-7},       {"s_log_softmax", s_log_softmax, ULPS, 1e-7},
      {"l_ce", l_ce, ULPS, 1e-7},                 {"l_ce_smooth", l_ce_smooth, ULPS, 1e-7},
      {"l_ce_smooth2", l_ce_smooth2, ULPS, 1e-7}, {"l_mse", l_mse, 0, 0},
      {"n_layernorm", n_layernorm, 1e-5, 1e-5},   {"n_embedding", n_embedding, 0, 0},
      {"n_normalize", n_normalize, ULPS, 0},      {"n_normalize_mask", n_normalize_mask, ULPS, 0},
      {"n_dropout0", n_dropout0, 0, 0},           {"a_sdpa", a_sdpa, ULPS, 1e-7},
      {"a_sdpa_ok", a_sdpa, ULPS, 1e-7},
  };
  RUN(c);
}

/* ───────────── indexing and scattering with duplicate indices ───────────── */

/* torch.index_select(x, 0, idx) */
static kiln_tensor i_index_select(const kiln_tensor *in) { return kiln_index_select(in[0], 0, in[1]); }
/* torch.index_select(x, 1, idx) */
static kiln_tensor i_index_select1(const kiln_tensor *in) { return kiln_index_select(in[0], 1, in[1]); }
/* torch.gather(x, 1, idx) */
static kiln_tensor i_gather(const kiln_tensor *in) { return kiln_gather(in[0], 1, in[1]); }
/* x.scatter_add(0, idx, src) */
static kiln_tensor i_scatter_add(const kiln_tensor *in) { return kiln_scatter_add(in[0], 0, in[1], in[2]); }
/* x.scatter(0, idx, src) */
static kiln_tensor i_scatter(const kiln_tensor *in) { return kiln_scatter(in[0], 0, in[1], in[2]); }
/* x.index_add(0, idx, src) */
static kiln_tensor i_index_add(const kiln_tensor *in) { return kiln_index_add(in[0], 0, in[1], in[2]); }
/* x.index_put((idx,), v, accumulate=True) */
static kiln_tensor i_index_put_acc(const kiln_tensor *in) { return kiln_index_put(in[0], in[1], in[2], true); }
/* x.index_put((idx,), v) */
static kiln_tensor i_index_put(const kiln_tensor *in) { return kiln_index_put(in[0], in[1], in[2], false); }
/* torch.sort(x, dim=1, stable=True).values */
static kiln_tensor i_sort(const kiln_tensor *in) {
  kiln_tensor v;
  kiln_sort(in[0], 1, false, &v, NULL);
  return v;
}
/* torch.topk(x, 2, 1).values */
static kiln_tensor i_topk(const kiln_tensor *in) {
  kiln_tensor v;
  kiln_topk(in[0], 2, 1, true, &v, NULL);
  return v;
}

/* the gradient of an index_select / embedding / gather is an index_add of
 * the seed: rows never picked get exactly 0 even when the seed holds inf or
 * NaN; scatter / index_put: the duplicate that won (docs/semantics.md) */
KT_TEST(indexing_with_duplicates) {
  static const gcase c[] = {
      {"i_index_select", i_index_select, 0, 0}, {"i_index_select1", i_index_select1, 0, 0},
      {"i_gather", i_gather, 0, 0},             {"i_scatter_add", i_scatter_add, 0, 0},
      {"i_scatter", i_scatter, 0, 0},           {"i_index_add", i_index_add, 0, 0},
      {"i_index_put_acc", i_index_put_acc, 0, 0}, {"i_index_put", i_index_put, 0, 0},
      {"i_sort", i_sort, 0, 0},                 {"i_topk", i_topk, 0, 0},
  };
  RUN(c);
}

/* ───────────── data movement ───────────── */

/* torch.flip(x, (0, 1)) */
static kiln_tensor m_flip(const kiln_tensor *in) { return kiln_flip(in[0], 2, kAx01); }
/* torch.roll(x, -5, 1) */
static kiln_tensor m_roll(const kiln_tensor *in) { return kiln_roll(in[0], -5, 1); }
/* torch.tril(x, -1) */
static kiln_tensor m_tril(const kiln_tensor *in) { return kiln_tril(in[0], -1); }
/* torch.triu(x, 1) */
static kiln_tensor m_triu(const kiln_tensor *in) { return kiln_triu(in[0], 1); }
/* F.pad(x, (1, 2, 0, 1), value=nan) */
static kiln_tensor m_pad(const kiln_tensor *in) {
  static const int64_t lo[2] = {0, 1}, hi[2] = {1, 2};
  return kiln_pad(in[0], lo, hi, NAN);
}
/* F.pad(x, (2, 3), mode="reflect") */
static kiln_tensor m_pad_reflect(const kiln_tensor *in) {
  static const int64_t lo[2] = {0, 2}, hi[2] = {0, 3};
  return kiln_pad_with(in[0], lo, hi, KILN_PAD_REFLECT, 0.0);
}
/* F.pad(x, (2, 3), mode="replicate") */
static kiln_tensor m_pad_replicate(const kiln_tensor *in) {
  static const int64_t lo[2] = {0, 2}, hi[2] = {0, 3};
  return kiln_pad_with(in[0], lo, hi, KILN_PAD_REPLICATE, 0.0);
}
/* x[1:, 1::2] */
static kiln_tensor m_slice(const kiln_tensor *in) { return kiln_slice(kiln_slice(in[0], 0, 1, 3, 1), 1, 1, 4, 2); }
/* torch.cat([a, b, a], 0) */
static kiln_tensor m_concat(const kiln_tensor *in) {
  kiln_tensor p[3] = {in[0], in[1], in[0]};
  return kiln_concat(3, p, 0);
}
/* torch.stack([a, b, a], 1) */
static kiln_tensor m_stack(const kiln_tensor *in) {
  kiln_tensor p[3] = {in[0], in[1], in[0]};
  return kiln_stack(3, p, 1);
}
/* x.expand(2, 3) */
static kiln_tensor m_expand(const kiln_tensor *in) {
  static const int64_t s23[2] = {2, 3};
  return kiln_expand(in[0], 2, s23);
}

KT_TEST(data_movement) {
  static const gcase c[] = {
      {"m_flip", m_flip, 0, 0},   {"m_roll", m_roll, 0, 0},     {"m_tril", m_tril, 0, 0},
      {"m_triu", m_triu, 0, 0},   {"m_pad", m_pad, 0, 0},       {"m_pad_reflect", m_pad_reflect, 0, 0},
      {"m_pad_replicate", m_pad_replicate, 0, 0},               {"m_slice", m_slice, 0, 0},
      {"m_concat", m_concat, 0, 0}, {"m_stack", m_stack, 0, 0}, {"m_expand", m_expand, 0, 0},
  };
  RUN(c);
}

/* ───────────── 16-bit floats ───────────── */

/* x.scatter_add(1, idx, src) */
static kiln_tensor h_scatter_add1(const kiln_tensor *in) { return kiln_scatter_add(in[0], 1, in[1], in[2]); }
/* torch.clamp(x, -1.0, 1.0) */
static kiln_tensor h_clamp(const kiln_tensor *in) { return kiln_clamp(in[0], -1.0, 1.0); }
/* a * b */
static kiln_tensor h_mul(const kiln_tensor *in) { return kiln_mul(in[0], in[1]); }
/* a / b */
static kiln_tensor h_div(const kiln_tensor *in) { return kiln_div(in[0], in[1]); }
/* torch.sum(x) */
static kiln_tensor h_sum(const kiln_tensor *in) { return kiln_sum(in[0], 0, NULL, false); }

/* The gradient keeps the 16-bit dtype. The values are exact: each op and
 * each gradient rule is computed in f32 and rounded once to the 16-bit
 * dtype, as PyTorch's CPU kernels do (its backward kernels too); layer_norm,
 * log_softmax and cross_entropy against PyTorch in f32, rounded once (its
 * bf16 kernels of these round in between). softmax:
 * within one bf16 ulp (2^-7 relative): both compute in f32 and round once,
 * but PyTorch's backward reads the rounded output, kiln's its f32 value. */
#define BF16_ULP (1.0 / 128)
KT_TEST(sixteen_bit_floats) {
  static const gcase c[] = {
      {"h_tanh_bf16", u_tanh, 0, 0},        {"h_sigmoid_bf16", u_sigmoid, 0, 0},
      {"h_gelu_bf16", u_gelu, 0, 0},        {"h_exp_bf16", u_exp, 0, 0},
      {"h_clamp_bf16", h_clamp, 0, 0},      {"h_softmax_bf16", s_softmax, BF16_ULP, 0},
      {"h_layernorm_bf16", n_layernorm, 0, 0}, {"h_log_softmax_bf16", s_log_softmax, 0, 0},
      {"h_ce_bf16", l_ce, 0, 0},            {"h_gather_bf16", i_gather, 0, 0},
      {"h_gather_f16", i_gather, 0, 0},     {"h_scatter_add_bf16", h_scatter_add1, 0, 0},
      {"h_scatter_add_f16", h_scatter_add1, 0, 0}, {"h_index_select_bf16", i_index_select, 0, 0},
      {"h_mul_bf16", h_mul, 0, 0},          {"h_div_bf16", h_div, 0, 0},
      {"h_sum_bf16", h_sum, 0, 0},          {"h_mul_f16", h_mul, 0, 0},
      {"h_div_f16", h_div, 0, 0},           {"h_sum_f16", h_sum, 0, 0},
  };
  RUN(c);
}

KT_TEST(reference_file_loads) {
  if (!g_ref) load_refs();
  KT_CHECK_MSG(g_nref > 100, "grad_edge_reference.txt: %d entries", g_nref);
}

KT_MAIN(KT_CASE(reference_file_loads), KT_CASE(unary_ops_at_extremes), KT_CASE(maximum_minimum_clamp),
        KT_CASE(div_pow_remainder_fmod), KT_CASE(where_with_specials_not_taken), KT_CASE(reductions_and_scans),
        KT_CASE(softmax_losses_layers), KT_CASE(indexing_with_duplicates), KT_CASE(data_movement),
        KT_CASE(sixteen_bit_floats))
