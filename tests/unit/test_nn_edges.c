/* Edge cases of the nn layers, losses, composite ops and optimizers against
 * PyTorch (tests/data/nn_edge_reference.py writes nn_edge_reference.txt:
 * the inputs, PyTorch's outputs, gradients and parameters). Every case runs
 * on ref and on the backend under test ($KILN_TEST_BACKEND, default cpu).
 *
 * Tolerances, |kiln - torch| <= atol + rtol·|torch| (NaN matches NaN, an
 * infinity matches only itself): f64 cases rtol 1e-10, atol 1e-12 (both
 * compute in double; only the order of sums differs); f32 layers rtol 2e-5,
 * atol 2e-6 (a few f32 roundings of O(1) values). Gradients are of
 * L = sum(y · r) with PyTorch's r. */
#include <inttypes.h>
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include "backend/backend_compare.h"
#include "for_backends.h"
#include "kt.h"

#define F64_RTOL 1e-10
#define F64_ATOL 1e-12
#define F32_RTOL 2e-5
#define F32_ATOL 2e-6

/* ───────────── the reference file ───────────── */
typedef struct arr {
  char name[80];
  int64_t n;
  double *v;
} arr;
static arr *g_arr;
static int g_narr;

static void load(void) {
  if (g_arr) return;
  const char *dir = getenv("KILN_TEST_DATA");
  char path[512];
  snprintf(path, sizeof path, "%s/nn_edge_reference.txt", dir ? dir : "tests/data");
  FILE *f = fopen(path, "r");
  if (!f) {
    KT_FAIL("cannot open %s (run tests/data/nn_edge_reference.py)", path);
    return;
  }
  int cap = 1024;
  g_arr = calloc((size_t)cap, sizeof *g_arr);
  char tok[80];
  while (fscanf(f, "%71s", tok) == 1) {
    if (tok[0] == '#') {
      int c;
      while ((c = fgetc(f)) != '\n' && c != EOF) {}
      continue;
    }
    if (g_narr == cap) g_arr = realloc(g_arr, sizeof *g_arr * (size_t)(cap *= 2));
    arr *a = &g_arr[g_narr++];
    snprintf(a->name, sizeof a->name, "%s", tok);
    if (fscanf(f, "%" SCNd64, &a->n) != 1 || a->n < 0) break;
    a->v = malloc(sizeof(double) * (size_t)(a->n + 1));
    for (int64_t i = 0; i < a->n; i++)
      if (fscanf(f, "%79s", tok) != 1) goto out;
      else a->v[i] = strtod(tok, NULL);
  }
out:
  fclose(f);
}

static const arr *find(const char *name) {
  load();
  for (int i = 0; i < g_narr; i++)
    if (!strcmp(g_arr[i].name, name)) return &g_arr[i];
  return NULL;
}
/* The array named by the format; a failure (and a zero array) when missing. */
__attribute__((format(printf, 2, 3))) static const double *A(int64_t *n, const char *fmt, ...) {
  static double zeros[4096];
  char name[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  const arr *a = find(name);
  if (!a) KT_FAIL("reference array %s is missing", name);
  if (n) *n = a ? a->n : 0;
  return a ? a->v : zeros;
}

/* A tensor of dtype dt and shape from the array's values. */
static kiln_tensor T(const char *name, kiln_dtype dt, int rank, const int64_t *shape) {
  int64_t n = 0, want = 1;
  const double *v = A(&n, "%s", name);
  for (int i = 0; i < rank; i++) want *= shape[i];
  if (n != want) {
    KT_FAIL("%s has %lld values, the test expects %lld", name, (long long)n, (long long)want);
    return kiln_full(dt, rank, shape, 0);
  }
  kiln_tensor t = kiln_from_host(v, KILN_F64, rank, shape);
  return dt == KILN_F64 ? t : kiln_cast(t, dt);
}
/* A kept leaf that requires gradients. */
static kiln_tensor leaf(const char *name, kiln_dtype dt, int rank, const int64_t *shape) {
  kiln_tensor t = kiln_keep(T(name, dt, rank, shape));
  kiln_requires_grad(t);
  return t;
}


/* t (any numeric dtype) against the reference array `name`. */
static void cmp(kiln_tensor t, double rtol, double atol, const char *fmt, ...) {
  char name[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  int64_t n = 0;
  const double *want = A(&n, "%s", name);
  if (!t.gen) {
    KT_FAIL("%s on %s: no tensor (%s)", name, g_backend, kiln_last_error());
    return;
  }
  if (kiln_numel(t) != n) {
    KT_FAIL("%s on %s: %lld elements, PyTorch %lld (%s)", name, g_backend, (long long)kiln_numel(t), (long long)n,
            kiln_last_error());
    return;
  }
  double *got = malloc(sizeof(double) * (size_t)(n + 1));
  if (kiln_to_host(kiln_cast(t, KILN_F64), got, sizeof(double) * (size_t)n) != KILN_OK) {
    KT_FAIL("%s on %s: %s", name, g_backend, kiln_last_error());
    free(got);
    return;
  }
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 4; i++) {
    double g = got[i], w = want[i];
    int ok = isnan(w) ? isnan(g) : isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w);
    if (!ok) {
      KT_FAIL("%s on %s: [%lld] = %.17g, PyTorch %.17g", name, g_backend, (long long)i, g, w);
      bad++;
    }
  }
  free(got);
}


/* backward of sum(y · r), r from <c>.r */
static void backward_r(kiln_tensor y, const char *c) {
  int64_t s[KILN_MAX_RANK];
  int r = kiln_shape(y, s);
  char name[96];
  snprintf(name, sizeof name, "%s.r", c);
  kiln_tensor L = kiln_sum(kiln_mul(y, T(name, kiln_dtype_of(y), r, s)), 0, NULL, 0);
  KT_CHECK_MSG(kiln_backward(L) == KILN_OK, "%s on %s: backward: %s", c, g_backend, kiln_last_error());
}

/* Load a module's tensors from <c>.<name> (PyTorch's state_dict names);
 * parameters then require gradients. */
static void set_module(const kiln_module *m, const char *c) {
  const char *names[KILN_MODULE_MAX_ENTRIES];
  kiln_tensor ts[KILN_MODULE_MAX_ENTRIES];
  int n = kiln_module_state(m, names, ts, KILN_MODULE_MAX_ENTRIES);
  for (int i = 0; i < n; i++) {
    int64_t s[KILN_MAX_RANK];
    int r = kiln_shape(ts[i], s);
    char name[128];
    snprintf(name, sizeof name, "%s.%s", c, names[i]);
    kiln_assign(ts[i], T(name, KILN_F32, r, s));
  }
  n = kiln_module_params(m, names, ts, KILN_MODULE_MAX_ENTRIES);
  for (int i = 0; i < n; i++) kiln_requires_grad(ts[i]);
}
/* Every parameter's gradient against <c>.g.<name>. */
static void cmp_module_grads(const kiln_module *m, const char *c, double rtol, double atol) {
  const char *names[KILN_MODULE_MAX_ENTRIES];
  kiln_tensor ts[KILN_MODULE_MAX_ENTRIES];
  int n = kiln_module_params(m, names, ts, KILN_MODULE_MAX_ENTRIES);
  for (int i = 0; i < n; i++) cmp(kiln_grad(ts[i]), rtol, atol, "%s.g.%s", c, names[i]);
}

/* ───────────── conv2d: F.conv2d(x, w, b, stride, padding, dilation, groups) ───────────── */
KT_TEST(conv2d_configs) {
  static const char *cases[] = {"conv_basic", "conv_s2_nonsq", "conv_dil",      "conv_groups",
                                "conv_depthwise", "conv_small_in", "conv_1x1_s3", "conv_all"};
  FOR_BACKENDS(b) {
    /* f64, then f32 (the GEMMs of f32 take other paths; sums of <= 36 terms of O(1): 2e-5) */
    for (int f = 0; f < 2; f++)
      for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        kiln_dtype dt = f ? KILN_F32 : KILN_F64;
        double rt = f ? 2e-5 : F64_RTOL, at = f ? 2e-5 : F64_ATOL;
        const char *c = cases[k];
        const double *g = A(NULL, "%s.cfg", c);
        int64_t xs[4] = {(int64_t)g[0], (int64_t)g[1], (int64_t)g[2], (int64_t)g[3]};
        int64_t ws[4] = {(int64_t)g[4], (int64_t)g[1] / (int64_t)g[10], (int64_t)g[5], (int64_t)g[6]};
        int64_t bs[1] = {ws[0]};
        char nm[96];
        snprintf(nm, sizeof nm, "%s.x", c);
        kiln_tensor x = leaf(nm, dt, 4, xs);
        snprintf(nm, sizeof nm, "%s.weight", c);
        kiln_tensor w = leaf(nm, dt, 4, ws), bias = {0, 0};
        snprintf(nm, sizeof nm, "%s.bias", c);
        if (g[11] != 0) bias = leaf(nm, dt, 1, bs);
        kiln_tensor y = kiln_conv2d_apply(x, w, bias, (int)g[7], (int)g[8], (int)g[9], (int)g[10]);
        cmp(y, rt, at, "%s.y", c);
        backward_r(y, c);
        cmp(kiln_grad(x), rt, at, "%s.g.x", c);
        cmp(kiln_grad(w), rt, at, "%s.g.weight", c);
        if (g[11] != 0) cmp(kiln_grad(bias), rt, at, "%s.g.bias", c);
        kiln_mark_step();
        kiln_release(x);
        kiln_release(w);
        if (g[11] != 0) kiln_release(bias);
      }
  }
}

/* ───────────── pooling: F.max_pool2d(x, k, s, p), F.avg_pool2d(..., count_include_pad=True) ───────────── */
KT_TEST(pool2d_configs) {
  static const char *cases[] = {"max_k3s2p1", "max_k2",  "max_k3s1p1", "max_special", "max_k2_special",
                                "avg_k3s2p1", "avg_k2s1", "avg_k3",    "avg_k2s3p1", "max_small_in", "avg_small_in"};
  FOR_BACKENDS(b) {
    for (size_t k = 0; k < 2 * sizeof cases / sizeof *cases; k++) {
      /* f64, then f32 (max exact; a mean of 9: 1e-6) */
      int f = k >= sizeof cases / sizeof *cases;
      kiln_dtype dt = f ? KILN_F32 : KILN_F64;
      double rt = f ? 1e-6 : F64_RTOL, at = f ? 1e-6 : F64_ATOL;
      const char *c = cases[k % (sizeof cases / sizeof *cases)];
      const double *g = A(NULL, "%s.cfg", c);
      int64_t xs[4] = {(int64_t)g[0], (int64_t)g[1], (int64_t)g[2], (int64_t)g[3]};
      char nm[96];
      snprintf(nm, sizeof nm, "%s.x", c);
      kiln_tensor x = leaf(nm, dt, 4, xs);
      kiln_tensor y = kiln_pool2d(x, g[4] != 0 ? KILN_POOL_MAX : KILN_POOL_AVG, (int)g[5], (int)g[6], (int)g[7]);
      cmp(y, rt, at, "%s.y", c);
      if (g[8] == 0) {
        backward_r(y, c);
        cmp(kiln_grad(x), rt, at, "%s.g.x", c);
      }
      kiln_mark_step();
      kiln_release(x);
    }
    /* ties in a max window: the gradient is split evenly (docs/semantics.md,
     * kiln_max's rule), where torch gives it all to the first */
    double ones[4] = {1, 1, 1, 1}, g[4] = {0};
    int64_t s[4] = {1, 1, 2, 2};
    kiln_tensor x = kiln_keep(kiln_from_host(ones, KILN_F64, 4, s));
    kiln_requires_grad(x);
    KT_CHECK(kiln_backward(kiln_sum(kiln_max_pool2d(x, 2, 0, 0), 0, NULL, 0)) == KILN_OK);
    KT_CHECK(kiln_to_host(kiln_grad(x), g, sizeof g) == KILN_OK);
    for (int i = 0; i < 4; i++) KT_CHECK_MSG(g[i] == 0.25, "max_pool2d tie on %s: %g", g_backend, g[i]);
    kiln_mark_step();
    kiln_release(x);
  }
}

/* ───────────── nn.Linear, nn.LayerNorm, nn.Embedding (f32) ───────────── */
KT_TEST(linear_layernorm_embedding) {
  FOR_BACKENDS(b) {
    kiln_linear *l = NULL;
    KT_CHECK(kiln_linear_create(5, 4, true, 1, &l) == KILN_OK);
    set_module(&l->m, "linear");
    int64_t xs[3] = {2, 3, 5};
    kiln_tensor x = leaf("linear.x", KILN_F32, 3, xs);
    kiln_tensor y = kiln_linear_forward(l, x); /* nn.Linear(5, 4)(x) */
    cmp(y, F32_RTOL, F32_ATOL, "linear.y");
    backward_r(y, "linear");
    cmp(kiln_grad(x), F32_RTOL, F32_ATOL, "linear.g.x");
    cmp_module_grads(&l->m, "linear", F32_RTOL, F32_ATOL);
    kiln_mark_step();
    kiln_release(x);
    kiln_linear_destroy(l);

    /* nn.LayerNorm(6, eps, elementwise_affine): a constant row, a row of small variance */
    static const char *ln[] = {"ln_eps5", "ln_eps2", "ln_noaffine"};
    for (int k = 0; k < 3; k++) {
      const double *g = A(NULL, "%s.cfg", ln[k]);
      kiln_layernorm *n = NULL;
      KT_CHECK(kiln_layernorm_create((int)g[1], g[2], g[3] != 0, &n) == KILN_OK);
      set_module(&n->m, ln[k]);
      int64_t s[2] = {(int64_t)g[0], (int64_t)g[1]};
      char nm[64];
      snprintf(nm, sizeof nm, "%s.x", ln[k]);
      x = leaf(nm, KILN_F32, 2, s);
      y = kiln_layernorm_forward(n, x);
      cmp(y, F32_RTOL, F32_ATOL, "%s.y", ln[k]);
      backward_r(y, ln[k]);
      /* the gradient of a row of variance 0 is 1/sqrt(eps)-scaled: 1e-4 relative */
      cmp(kiln_grad(x), 1e-4, 1e-4, "%s.g.x", ln[k]);
      cmp_module_grads(&n->m, ln[k], F32_RTOL, F32_ATOL);
      kiln_mark_step();
      kiln_release(x);
      kiln_layernorm_destroy(n);
    }

    /* nn.Embedding(6, 3)(ids), repeated ids accumulate their gradients */
    kiln_embedding *e = NULL;
    KT_CHECK(kiln_embedding_create(6, 3, 2, &e) == KILN_OK);
    set_module(&e->m, "emb");
    int64_t is[2] = {2, 3};
    y = kiln_embedding_forward(e, T("emb.ids", KILN_I64, 2, is));
    cmp(y, 0, 0, "emb.y");
    backward_r(y, "emb");
    cmp_module_grads(&e->m, "emb", F32_RTOL, F32_ATOL);
    kiln_mark_step();
    /* an id outside [0, 6) is an error, not a row of garbage */
    int64_t bad[2] = {1, 6}, neg[2] = {-1, 0}, s2[1] = {2};
    for (int k = 0; k < 2; k++) {
      kiln_clear_error();
      y = kiln_embedding_forward(e, kiln_from_host(k ? neg : bad, KILN_I64, 1, s2));
      float out[6];
      kiln_status st = kiln_to_host(y, out, sizeof out);
      KT_CHECK_MSG(st == KILN_ERR_INVALID_ARGUMENT, "embedding id %lld on %s: status %d", (long long)(k ? -1 : 6),
                   g_backend, (int)st);
      kiln_mark_step();
    }
    kiln_clear_error();
    kiln_embedding_destroy(e);
  }
}

/* ───────────── nn.BatchNorm2d(C, eps, momentum): train, train, eval ───────────── */
KT_TEST(batchnorm2d_train_eval) {
  static const char *cases[] = {"bn", "bn_small"};
  FOR_BACKENDS(b) {
    for (int k = 0; k < 2; k++) {
      const char *c = cases[k];
      const double *g = A(NULL, "%s.cfg", c);
      kiln_batchnorm2d *bn = NULL;
      KT_CHECK(kiln_batchnorm2d_create((int)g[1], g[4], g[5], &bn) == KILN_OK);
      set_module(&bn->m, c);
      int64_t xs[4] = {(int64_t)g[0], (int64_t)g[1], (int64_t)g[2], (int64_t)g[3]};
      char nm[64];
      snprintf(nm, sizeof nm, "%s.x1", c);
      kiln_tensor x = leaf(nm, KILN_F32, 4, xs);
      kiln_tensor y = kiln_batchnorm2d_forward(bn, x, true);
      cmp(y, F32_RTOL, F32_ATOL, "%s.y1", c);
      backward_r(y, c);
      cmp(kiln_grad(x), 1e-4, 1e-5, "%s.g.x", c);
      cmp_module_grads(&bn->m, c, F32_RTOL, F32_ATOL);
      kiln_mark_step();
      kiln_release(x);
      /* running_var with the unbiased variance, momentum as torch */
      cmp(bn->running_mean, F32_RTOL, F32_ATOL, "%s.rm1", c);
      cmp(bn->running_var, F32_RTOL, F32_ATOL, "%s.rv1", c);
      kiln_module_zero_grad(&bn->m);
      snprintf(nm, sizeof nm, "%s.x2", c);
      y = kiln_batchnorm2d_forward(bn, T(nm, KILN_F32, 4, xs), true);
      cmp(y, F32_RTOL, F32_ATOL, "%s.y2", c);
      kiln_mark_step();
      cmp(bn->running_mean, F32_RTOL, F32_ATOL, "%s.rm2", c);
      cmp(bn->running_var, F32_RTOL, F32_ATOL, "%s.rv2", c);
      snprintf(nm, sizeof nm, "%s.x3", c);
      y = kiln_batchnorm2d_forward(bn, T(nm, KILN_F32, 4, xs), false);
      cmp(y, F32_RTOL, F32_ATOL, "%s.y3", c);
      kiln_mark_step();
      kiln_batchnorm2d_destroy(bn);
    }
  }
}

/* ───────────── attention ───────────── */
/* softmax(q kᵀ/√hd + mask) v (F.scaled_dot_product_attention's formula); a
 * bool mask true = attend; a query attending to no key is NaN. */
KT_TEST(sdpa_masks) {
  static const char *cases[] = {"sdpa_none", "sdpa_causal", "sdpa_float", "sdpa_nanrow", "sdpa_cross"};
  FOR_BACKENDS(b) {
    for (int k = 0; k < 5; k++) {
      const char *c = cases[k];
      const double *g = A(NULL, "%s.cfg", c);
      int64_t s[4] = {(int64_t)g[0], (int64_t)g[1], (int64_t)g[2], (int64_t)g[3]}, Tk = (int64_t)g[5];
      int64_t ks[4] = {s[0], s[1], Tk, s[3]}, ms[2] = {s[2], Tk}, fs[4] = {s[0], 1, s[2], Tk};
      kiln_tensor qkv[3], mask = {0, 0};
      static const char *qn[3] = {"q", "k", "v"};
      char nm[64];
      for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%s.%s", c, qn[i]);
        qkv[i] = leaf(nm, KILN_F64, 4, i ? ks : s);
      }
      snprintf(nm, sizeof nm, "%s.mask", c);
      if (g[4] == 1) mask = kiln_cast(T(nm, KILN_F64, 2, ms), KILN_BOOL);
      if (g[4] == 2) mask = T(nm, KILN_F64, 4, fs);
      kiln_tensor y = kiln_sdpa(qkv[0], qkv[1], qkv[2], mask, 0.0, false, 0);
      cmp(y, F64_RTOL, F64_ATOL, "%s.y", c);
      if (k != 3) {
        backward_r(y, c);
        for (int i = 0; i < 3; i++) cmp(kiln_grad(qkv[i]), F64_RTOL, F64_ATOL, "%s.g.%s", c, qn[i]);
      }
      kiln_mark_step();
      for (int i = 0; i < 3; i++) kiln_release(qkv[i]);
    }
  }
}

/* nn.MultiheadAttention(8, 2, batch_first=True)(x, x, x, key_padding_mask,
 * attn_mask=causal bool, need_weights=False) */
KT_TEST(mha_masks) {
  static const char *cases[] = {"mha_plain", "mha_causal", "mha_kpm", "mha_both"};
  FOR_BACKENDS(b) {
    for (int k = 0; k < 4; k++) {
      const char *c = cases[k];
      const double *g = A(NULL, "%s.cfg", c);
      kiln_mha *a = NULL;
      KT_CHECK(kiln_mha_create((int)g[2], (int)g[3], 0.0, 3, &a) == KILN_OK);
      set_module(&a->m, c);
      int64_t xs[3] = {(int64_t)g[0], (int64_t)g[1], (int64_t)g[2]}, ks[2] = {xs[0], xs[1]};
      char nm[64];
      snprintf(nm, sizeof nm, "%s.x", c);
      kiln_tensor x = leaf(nm, KILN_F32, 3, xs);
      snprintf(nm, sizeof nm, "%s.kpm", c);
      kiln_attn_opts o = {.causal = g[4] != 0};
      if (g[5] != 0) o.key_padding_mask = kiln_cast(T(nm, KILN_F64, 2, ks), KILN_BOOL);
      kiln_tensor y = kiln_mha_forward(a, x, &o);
      cmp(y, F32_RTOL, F32_ATOL, "%s.y", c);
      backward_r(y, c);
      cmp(kiln_grad(x), 1e-4, 1e-5, "%s.g.x", c);
      cmp_module_grads(&a->m, c, 1e-4, 1e-5);
      kiln_mark_step();
      kiln_release(x);
      kiln_mha_destroy(a);
    }
  }
}

/* nn.TransformerEncoderLayer(8, 2, 16, dropout=0, activation, norm_first,
 * batch_first=True)(x, src_key_padding_mask): gradients of x and of every
 * parameter */
KT_TEST(encoder_layer_grads) {
  static const char *cases[] = {"enc_post_relu", "enc_pre_gelu"};
  FOR_BACKENDS(b) {
    for (int k = 0; k < 2; k++) {
      const char *c = cases[k];
      const double *g = A(NULL, "%s.cfg", c);
      kiln_encoder_layer *l = NULL;
      KT_CHECK(kiln_encoder_layer_create((int)g[2], (int)g[3], (int)g[4], 0.0, (kiln_activation)(int)g[5],
                                         (kiln_norm_position)(int)g[6], 1e-5, 4, &l) == KILN_OK);
      set_module(&l->m, c);
      int64_t xs[3] = {(int64_t)g[0], (int64_t)g[1], (int64_t)g[2]}, ks[2] = {xs[0], xs[1]};
      char nm[64];
      snprintf(nm, sizeof nm, "%s.x", c);
      kiln_tensor x = leaf(nm, KILN_F32, 3, xs);
      snprintf(nm, sizeof nm, "%s.kpm", c);
      kiln_attn_opts o = {0};
      if (g[7] != 0) o.key_padding_mask = kiln_cast(T(nm, KILN_F64, 2, ks), KILN_BOOL);
      kiln_tensor y = kiln_encoder_layer_forward(l, x, &o);
      cmp(y, 1e-4, 1e-5, "%s.y", c);
      backward_r(y, c);
      cmp(kiln_grad(x), 1e-4, 1e-5, "%s.g.x", c);
      cmp_module_grads(&l->m, c, 1e-4, 1e-5);
      kiln_mark_step();
      kiln_release(x);
      kiln_encoder_layer_destroy(l);
    }
  }
}

/* ───────────── losses ───────────── */
/* F.cross_entropy(logits, target, ignore_index, label_smoothing) (mean);
 * rank 3: torch gets logits.permute(0, 2, 1), kiln's class axis is last */
KT_TEST(cross_entropy_cases) {
  static const char *cases[] = {"ce_plain", "ce_ignore", "ce_ls", "ce_ls_ignore2", "ce_rank3", "ce_big", "ce_neginf"};
  FOR_BACKENDS(b) {
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
      const char *c = cases[k];
      int64_t n = 0;
      const double *g = A(&n, "%s.cfg", c);
      int rank = (int)n - 2;
      int64_t s[3];
      for (int i = 0; i < rank; i++) s[i] = (int64_t)g[i];
      char nm[64];
      snprintf(nm, sizeof nm, "%s.logits", c);
      kiln_tensor x = leaf(nm, KILN_F64, rank, s);
      snprintf(nm, sizeof nm, "%s.target", c);
      kiln_tensor t = T(nm, KILN_I64, rank - 1, s);
      kiln_tensor loss = kiln_cross_entropy(x, t, (int64_t)g[rank], g[rank + 1]);
      cmp(loss, F64_RTOL, F64_ATOL, "%s.loss", c);
      KT_CHECK(kiln_backward(loss) == KILN_OK);
      cmp(kiln_grad(x), F64_RTOL, F64_ATOL, "%s.g.logits", c);
      kiln_mark_step();
      kiln_release(x);
    }
    /* every target ignored: 0 (docs/semantics.md; PyTorch's 0/0 is NaN) */
    int64_t s[2] = {2, 3}, ts[1] = {2}, tv[2] = {-100, -100};
    double lv[6] = {1, 2, 3, 4, 5, 6};
    double l = kiln_item_f64(kiln_cross_entropy(kiln_from_host(lv, KILN_F64, 2, s),
                                                kiln_from_host(tv, KILN_I64, 1, ts), -100, 0.1));
    KT_CHECK_MSG(l == 0, "all-ignored cross_entropy on %s: %g", g_backend, l);
    kiln_mark_step();
    /* F.mse_loss(a, b) */
    int64_t ms[2] = {3, 4};
    kiln_tensor a = leaf("mse.a", KILN_F64, 2, ms);
    kiln_tensor loss = kiln_mse_loss(a, T("mse.b", KILN_F64, 2, ms));
    cmp(loss, F64_RTOL, F64_ATOL, "mse.loss");
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    cmp(kiln_grad(a), F64_RTOL, F64_ATOL, "mse.g.a");
    kiln_mark_step();
    kiln_release(a);
  }
}

/* ───────────── composite ops ───────────── */
/* torch.softmax / torch.log_softmax on rows with -inf, all -inf, +inf, NaN
 * and values near 1e4, along either axis; gradients on the finite rows */
KT_TEST(softmax_specials) {
  FOR_BACKENDS(b) {
    int64_t s[2] = {6, 4}, gs[2] = {3, 4};
    for (int f = 0; f < 2; f++) {
      const char *tag = f ? "f32" : "f64";
      double rt = f ? 1e-6 : F64_RTOL, at = f ? 1e-7 : F64_ATOL;
      char nm[64];
      snprintf(nm, sizeof nm, "softmax_%s.x", tag);
      kiln_tensor x = T(nm, f ? KILN_F32 : KILN_F64, 2, s);
      cmp(kiln_softmax(x, 1), rt, at, "softmax_%s.y1", tag);
      cmp(kiln_softmax(x, 0), rt, at, "softmax_%s.y0", tag);
      cmp(kiln_log_softmax(x, -1), rt, at, "log_softmax_%s.y1", tag);
      cmp(kiln_log_softmax(x, 0), rt, at, "log_softmax_%s.y0", tag);
      kiln_mark_step();
    }
    for (int lg = 0; lg < 2; lg++) {
      kiln_tensor x = leaf("softmax_grad.x", KILN_F64, 2, gs);
      kiln_tensor y = lg ? kiln_log_softmax(x, 1) : kiln_softmax(x, 1);
      backward_r(y, "softmax_grad");
      cmp(kiln_grad(x), F64_RTOL, F64_ATOL, lg ? "log_softmax_grad.g" : "softmax_grad.g");
      kiln_mark_step();
      kiln_release(x);
    }
  }
}

/* F.pad(x, pads, mode="reflect" / "replicate"), pad = size - 1 and pad > size */
KT_TEST(pad_modes) {
  static const char *cases[] = {"pad_reflect_max", "pad_reflect_4d", "pad_replicate_big", "pad_replicate_1"};
  FOR_BACKENDS(b) {
    for (int k = 0; k < 4; k++) {
      const char *c = cases[k];
      const double *g = A(NULL, "%s.cfg", c);
      int rank = (int)g[0];
      int64_t s[4], lo[4], hi[4];
      for (int i = 0; i < rank; i++) {
        s[i] = (int64_t)g[1 + i];
        lo[i] = (int64_t)g[1 + rank + 2 * i];
        hi[i] = (int64_t)g[2 + rank + 2 * i];
      }
      char nm[64];
      snprintf(nm, sizeof nm, "%s.x", c);
      kiln_tensor x = leaf(nm, KILN_F64, rank, s);
      kiln_tensor y = kiln_pad_with(x, lo, hi, k < 2 ? KILN_PAD_REFLECT : KILN_PAD_REPLICATE, 0.0);
      cmp(y, 0, 0, "%s.y", c);
      backward_r(y, c);
      cmp(kiln_grad(x), F64_RTOL, F64_ATOL, "%s.g.x", c);
      kiln_mark_step();
      kiln_release(x);
    }
    /* F.one_hot(ids, 5) */
    int64_t is[2] = {2, 3};
    cmp(kiln_one_hot(T("one_hot.ids", KILN_I64, 2, is), 5, KILN_I64), 0, 0, "one_hot.y");
    kiln_mark_step();
  }
}

/* torch.nn.utils.clip_grad_norm_([p1, p2], max_norm): total norm and the
 * clipped gradients (coefficient max_norm / (total + 1e-6), at most 1) */
KT_TEST(clip_grad_norm_cases) {
  static const char *cases[] = {"clip_scaled", "clip_unscaled", "clip_zero", "clip_inf",
                                "clip_nan",    "clip_f64",      "clip_tiny"};
  FOR_BACKENDS(b) {
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
      const char *c = cases[k];
      const double *g = A(NULL, "%s.cfg", c);
      kiln_dtype dt = g[0] != 0 ? KILN_F64 : KILN_F32;
      double rt = dt == KILN_F64 ? F64_RTOL : 1e-6, at = dt == KILN_F64 ? F64_ATOL : 1e-12;
      int64_t s1[2] = {3, 4}, s2[1] = {5};
      char nm[64];
      kiln_tensor gr[2], out[2];
      snprintf(nm, sizeof nm, "%s.g1", c);
      gr[0] = T(nm, dt, 2, s1);
      snprintf(nm, sizeof nm, "%s.g2", c);
      gr[1] = T(nm, dt, 1, s2);
      kiln_tensor total = kiln_clip_grad_norm(2, gr, out, g[1]);
      cmp(total, rt, at, "%s.total", c);
      cmp(out[0], rt, at, "%s.out1", c);
      cmp(out[1], rt, at, "%s.out2", c);
      kiln_mark_step();
    }
  }
}

/* ───────────── optimizers: 6 steps of torch.optim.SGD / AdamW ───────────── */
/* p2 has no gradient at step 1 (None); lr halved before step 4. */
/* gscale != 0: the gradients times gscale (in dt, as the reference) */
static void run_optim_scaled(const char *c, int adamw, kiln_dtype dt, double gscale) {
  const double *g = A(NULL, "%s.cfg", c);
  int64_t s1[2] = {3, 4}, s2[1] = {5};
  /* f32: a few f32 roundings per step, 6 steps */
  double rt = dt == KILN_F64 ? F64_RTOL : 1e-5, at = dt == KILN_F64 ? F64_ATOL : 1e-6;
  kiln_tensor p[2] = {kiln_keep(T("optim.p1", dt, 2, s1)), kiln_keep(T("optim.p2", dt, 1, s2))};
  kiln_optim *o = NULL;
  if (adamw) {
    kiln_adamw_opts ao = {.lr = g[0], .beta1 = g[1], .beta2 = g[2], .eps = g[3], .weight_decay = g[4]};
    KT_CHECK(kiln_optim_create_adamw(2, p, &ao, &o) == KILN_OK);
  } else {
    kiln_sgd_opts so = {.lr = g[0], .momentum = g[1], .dampening = g[2], .weight_decay = g[3], .nesterov = g[4] != 0};
    KT_CHECK(kiln_optim_create_sgd(2, p, &so, &o) == KILN_OK);
  }
  if (!o) return;
  for (int t = 0; t < 6; t++) {
    if (t == 3) kiln_optim_set_lr(o, kiln_optim_lr(o) * 0.5);
    char n1[32], n2[32];
    snprintf(n1, sizeof n1, "optim.g1.%d", t);
    snprintf(n2, sizeof n2, "optim.g2.%d", t);
    kiln_tensor gr[2] = {T(n1, dt, 2, s1), t == 0 ? (kiln_tensor){0, 0} : T(n2, dt, 1, s2)};
    for (int k = 0; k < 2 && gscale != 0; k++)
      if (gr[k].gen) gr[k] = kiln_mul_c(gr[k], gscale);
    KT_CHECK(kiln_optim_step_tensors(o, 2, p, gr) == KILN_OK);
    kiln_mark_step();
    cmp(p[0], rt, at, "%s.p1.%d", c, t);
    cmp(p[1], rt, at, "%s.p2.%d", c, t);
  }
  kiln_optim_destroy(o);
  kiln_release(p[0]);
  kiln_release(p[1]);
}
static void run_optim(const char *c, int adamw, kiln_dtype dt) { run_optim_scaled(c, adamw, dt, 0); }

KT_TEST(sgd_options) {
  FOR_BACKENDS(b) {
    for (int i = 0; i < 6; i++) {
      char c[16];
      snprintf(c, sizeof c, "sgd%d", i);
      run_optim(c, 0, KILN_F64);
    }
    run_optim("sgd3_f32", 0, KILN_F32);
    run_optim("sgd4_f32", 0, KILN_F32);
  }
}

KT_TEST(adamw_options) {
  FOR_BACKENDS(b) {
    for (int i = 0; i < 4; i++) {
      char c[16];
      snprintf(c, sizeof c, "adamw%d", i);
      run_optim(c, 1, KILN_F64);
    }
    run_optim("adamw0_f32", 1, KILN_F32);
    run_optim("adamw2_f32", 1, KILN_F32);
    /* gradients near 1e20: their squares overflow f32; (1 - beta2) g g does not (an inf second moment froze
     * the parameters) */
    run_optim_scaled("adamw0_big_f32", 1, KILN_F32, 1e20);
  }
}

/* ───────────── default initialisation (torch.nn.init) ───────────── */
/* Values inside [-bound, bound], reaching 0.98·bound, with the mean and the
 * variance of U(-bound, bound) (bound²/3) within wide statistical margins. */
static void check_uniform(kiln_tensor w, double bound, const char *what) {
  int64_t n = kiln_numel(w);
  float *v = malloc(sizeof(float) * (size_t)n);
  if (kiln_to_host(w, v, sizeof(float) * (size_t)n) != KILN_OK) {
    KT_FAIL("%s on %s: %s", what, g_backend, kiln_last_error());
    free(v);
    return;
  }
  double mx = 0, sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) {
    mx = fmax(mx, fabs(v[i]));
    sum += v[i];
    sq += (double)v[i] * v[i];
  }
  double mean = sum / (double)n, var = sq / (double)n - mean * mean, want = bound * bound / 3;
  KT_CHECK_MSG(mx <= bound * (1 + 1e-6) && mx >= 0.98 * bound, "%s on %s: max |w| %g, bound %g", what, g_backend, mx,
               bound);
  KT_CHECK_MSG(fabs(mean) <= 6 * sqrt(want / (double)n), "%s on %s: mean %g", what, g_backend, mean);
  KT_CHECK_MSG(fabs(var / want - 1) <= 0.1, "%s on %s: variance %g, U(±%g) has %g", what, g_backend, var, bound, want);
  free(v);
}

KT_TEST(default_init) {
  FOR_BACKENDS(b) {
    const double *g = A(NULL, "init_linear.cfg"); /* nn.Linear(300, 200) */
    kiln_linear *l = NULL;
    KT_CHECK(kiln_linear_create((int)g[0], (int)g[1], true, 11, &l) == KILN_OK);
    if (l) {
      check_uniform(l->weight, g[2], "Linear weight");
      check_uniform(l->bias, g[3], "Linear bias");
    }
    kiln_linear_destroy(l);
    g = A(NULL, "init_conv.cfg"); /* nn.Conv2d(8, 16, (3, 5), groups=4): fan_in 2·3·5 */
    kiln_conv2d *cv = NULL;
    KT_CHECK(kiln_conv2d_create_at((int)g[0], (int)g[1], (int)g[2], (int)g[3], 1, 0, 1, (int)g[4], true, 12, &cv,
                                   KILN_HERE) == KILN_OK);
    if (cv) {
      check_uniform(cv->weight, g[5], "Conv2d weight");
      float bv[16];
      KT_CHECK(kiln_numel(cv->bias) == 16 && kiln_to_host(cv->bias, bv, sizeof bv) == KILN_OK);
      for (int i = 0; i < 16; i++) KT_CHECK_MSG(fabs(bv[i]) <= g[6], "Conv2d bias on %s: %g", g_backend, bv[i]);
    }
    kiln_conv2d_destroy(cv);
    g = A(NULL, "init_mha.cfg"); /* nn.MultiheadAttention(16, 4): xavier_uniform in_proj */
    kiln_mha *a = NULL;
    KT_CHECK(kiln_mha_create((int)g[0], (int)g[1], 0.0, 13, &a) == KILN_OK);
    if (a) {
      check_uniform(a->in_proj_weight, g[2], "MHA in_proj_weight");
      check_uniform(a->out_weight, g[3], "MHA out_proj.weight");
    }
    kiln_mha_destroy(a);
    /* nn.Embedding: N(0, 1) */
    kiln_embedding *e = NULL;
    KT_CHECK(kiln_embedding_create(500, 40, 14, &e) == KILN_OK);
    if (e) {
      static float v[20000];
      KT_CHECK(kiln_to_host(e->weight, v, sizeof v) == KILN_OK);
      double sum = 0, sq = 0;
      for (int i = 0; i < 20000; i++) sum += v[i], sq += (double)v[i] * v[i];
      double mean = sum / 20000, var = sq / 20000 - mean * mean;
      KT_CHECK_MSG(fabs(mean) < 0.05 && fabs(var - 1) < 0.05, "Embedding on %s: mean %g var %g", g_backend, mean, var);
    }
    kiln_embedding_destroy(e);
  }
}

/* ───────────── F.dropout(x, p, training) ───────────── */
KT_TEST(dropout_cases) {
  FOR_BACKENDS(b) {
    enum { N = 40000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = 1.0f + (float)(i % 7) * 0.25f;
    int64_t s[1] = {N};
    kiln_tensor tx = kiln_from_host(x, KILN_F32, 1, s);
    /* p = 0 and eval: x itself */
    KT_CHECK(kiln_to_host(kiln_dropout(tx, 0.0, 5, true), y, sizeof y) == KILN_OK);
    KT_CHECK(!memcmp(x, y, sizeof y));
    KT_CHECK(kiln_to_host(kiln_dropout(tx, 0.4, 5, false), y, sizeof y) == KILN_OK);
    KT_CHECK(!memcmp(x, y, sizeof y));
    /* training: zeros with probability p, the rest x / (1 - p) (in f32, as torch) */
    KT_CHECK(kiln_to_host(kiln_dropout(tx, 0.3, 5, true), y, sizeof y) == KILN_OK);
    int kept = 0, bad = 0;
    for (int i = 0; i < N; i++) {
      if (y[i] == 0) continue;
      kept++;
      float want = x[i] * (1.0f / 0.7f);
      if (fabsf(y[i] - want) > 1e-6f * want && bad++ < 3) KT_FAIL("dropout on %s: %g, want %g", g_backend, y[i], want);
    }
    KT_CHECK_MSG(fabs(kept / (double)N - 0.7) < 0.02, "dropout on %s kept %d of %d", g_backend, kept, N);
    kiln_mark_step();
    /* p = 1: an error (docs/semantics.md; torch gives zeros) */
    KT_CHECK(!kiln_is_valid(kiln_dropout(tx, 1.0, 5, true)) && kiln_last_status() == KILN_ERR_INVALID_ARGUMENT);
    kiln_clear_error();
  }
}

KT_MAIN(KT_CASE(conv2d_configs), KT_CASE(pool2d_configs), KT_CASE(linear_layernorm_embedding),
        KT_CASE(batchnorm2d_train_eval), KT_CASE(sdpa_masks), KT_CASE(mha_masks), KT_CASE(encoder_layer_grads),
        KT_CASE(cross_entropy_cases), KT_CASE(softmax_specials), KT_CASE(pad_modes), KT_CASE(clip_grad_norm_cases),
        KT_CASE(sgd_options), KT_CASE(adamw_options), KT_CASE(default_init), KT_CASE(dropout_cases))
