/* Forward AND backward of kiln's nn layers against PyTorch.
 *
 * Oracle: tests/interop/torch_grad_reference.py (run with a Python that has
 * torch) wrote tests/data/torch_grad_ref_*.txt: outputs, losses and the
 * gradients of the loss w.r.t. the input and every parameter, computed by
 * torch in float64. The weights and inputs are not stored: both sides derive
 * them from (name, index) with the same integer hash (tp_value here, value()
 * there), rounded to float32, so kiln sees exactly the values torch used.
 *
 * Models: torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0,
 * batch_first=True) in four variants (post/pre-norm × relu/gelu, two of them
 * with a causal + key-padding mask), loss = sum(y * W) for a fixed W; and two
 * small CNNs (conv → relu → maxpool → conv → relu → flatten → linear →
 * cross-entropy, the second with a grouped, strided, dilated conv and label
 * smoothing 0.1). Negative controls perturb one weight (or the loss weights)
 * and require the comparison to FAIL, so a comparison that silently passes
 * everything cannot hide here.
 *
 * Runs on the backend chosen by KILN_BACKEND (ref or cpu); the reference
 * files are found through KILN_TEST_DATA (set by ctest) or the working dir.
 * TP_VERBOSE=1 prints the worst error of every compared tensor. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "kt.h"

/* f32 tolerance: |got - want| <= TP_ATOL + TP_RTOL * |want| (torch is the
 * exact float64 answer; kiln's f32 errors measure ~2e-6 at most here, so the
 * margin is ~5x on the worst element and ~100x typically). */
#define TP_RTOL 1e-4
#define TP_ATOL 1e-5

/* ── reference files ── */
typedef struct {
  char name[96];
  int64_t n;
  double *v;
} tp_entry;
typedef struct {
  int n;
  tp_entry e[48];
} tp_file;

static int tp_load(tp_file *f, const char *file) {
  const char *dirs[3] = {getenv("KILN_TEST_DATA"), "tests/data", "../tests/data"};
  FILE *fp = NULL;
  for (int i = 0; i < 3 && !fp; i++) {
    if (!dirs[i]) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dirs[i], file);
    fp = fopen(path, "r");
  }
  f->n = 0;
  if (!fp) return -1;
  while (f->n < 48) {
    tp_entry *e = &f->e[f->n];
    long long n;
    if (fscanf(fp, "%95s %lld", e->name, &n) != 2 || n < 0 || n > (1 << 24)) break;
    e->n = n;
    e->v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
      if (fscanf(fp, "%lf", &e->v[i]) != 1) e->v[i] = NAN;
    f->n++;
  }
  fclose(fp);
  return 0;
}
static void tp_free(tp_file *f) {
  for (int i = 0; i < f->n; i++) free(f->e[i].v);
  f->n = 0;
}
static const tp_entry *tp_get(const tp_file *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->e[i].name, name) == 0) return &f->e[i];
  return NULL;
}

/* ── deterministic weights and inputs (mirror of the Python script) ── */
static double tp_value(uint64_t seed, uint64_t i) { /* splitmix64, exact */
  uint64_t z = (seed << 32 | i) + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}
static uint64_t tp_name_seed(const char *name) {
  uint64_t h = 0;
  for (const char *c = name; *c; c++) h = (h * 31 + (unsigned char)*c) % 100003;
  return h % 997;
}
/* The float32 values of parameter `name` (seed < 0) or of an input with an
 * explicit seed; the caller frees. Scales as in the script's fill(). */
static float *tp_fill(const char *name, int rank, const int64_t *shape, int seed) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  double a = 1.0, off = 0.0;
  size_t len = strlen(name);
  if (seed < 0) {
    if (len >= 4 && strcmp(name + len - 4, "bias") == 0) a = 0.2;
    else if (strstr(name, "norm")) a = 0.3, off = 1.0;
    else a = sqrt(3.0 * (double)shape[0] / (double)n);
  }
  uint64_t sd = seed < 0 ? tp_name_seed(name) : (uint64_t)seed;
  float *h = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = (float)(off + a * tp_value(sd, (uint64_t)i));
  return h;
}
static kiln_tensor tp_input(const char *name, int rank, const int64_t *shape, int seed, int perturb) {
  float *h = tp_fill(name, rank, shape, seed);
  if (perturb) h[0] += 0.05f;
  kiln_tensor t = kiln_from_host(h, KILN_F32, rank, shape);
  free(h);
  return t;
}

/* ── comparison ── */
/* Compares kiln tensor t against reference entry `name` of f. Returns the
 * number of mismatching elements (numel on a missing entry or a read error);
 * with report, each mismatching tensor is a test failure naming the worst
 * element. */
static int64_t tp_compare(const tp_file *f, const char *name, kiln_tensor t, int report) {
  const tp_entry *e = tp_get(f, name);
  int64_t n = kiln_numel(t);
  if (!e || e->n != n || n <= 0) {
    if (report) KT_FAIL("%s: reference missing or size %lld != %lld", name, e ? (long long)e->n : -1LL, (long long)n);
    return n > 0 ? n : 1;
  }
  float *got = malloc(sizeof(float) * (size_t)n);
  if (kiln_to_host(t, got, sizeof(float) * (size_t)n) != KILN_OK) {
    if (report) KT_FAIL("%s: read failed: %s", name, kiln_last_error());
    free(got);
    return n;
  }
  double scale = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(e->v[i]));
  int64_t bad = 0, worst = 0;
  double worst_excess = -1, max_err = 0;
  for (int64_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - e->v[i]), tol = TP_ATOL + TP_RTOL * fabs(e->v[i]);
    if (!(err <= tol)) bad++; /* NaN counts as bad */
    double excess = isnan(err) ? INFINITY : err / tol;
    if (excess > worst_excess) worst_excess = excess, worst = i;
    if (!(err <= max_err)) max_err = err;
  }
  if (getenv("TP_VERBOSE"))
    fprintf(stderr, "    %-34s n=%-5lld max|ref|=%-9.3g max err=%-9.3g worst err/tol=%.3g\n", name, (long long)n,
            scale, max_err, worst_excess);
  if (bad && report)
    KT_FAIL("%s: %lld of %lld elements differ; worst [%lld]: kiln %.9g, torch %.9g", name, (long long)bad,
            (long long)n, (long long)worst, (double)got[worst], e->v[worst]);
  free(got);
  return bad;
}

/* 1: assign the weights, run forward and backward all in one step (the
 * assigned values are still pending when backward traces). */
static int tp_same_step;

static void tp_start(void) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

/* Loads the trainable parameters of m (names get `prefix`) from tp_fill,
 * perturbing the one named `perturb` (may be NULL), and marks them as
 * requiring grad. Returns the count, copies handles/names out. */
static int tp_load_params(const kiln_module *m, const char *prefix, const char *perturb, kiln_tensor *ps,
                          char (*full)[96], int max) {
  const char *names[KILN_MODULE_MAX_ENTRIES];
  kiln_tensor ts[KILN_MODULE_MAX_ENTRIES];
  int n = kiln_module_params(m, names, ts, KILN_MODULE_MAX_ENTRIES);
  KT_CHECK(n > 0 && n <= max);
  if (n > max) n = max;
  for (int i = 0; i < n; i++) {
    snprintf(full[i], 96, "%s%s", prefix, names[i]);
    int64_t s[KILN_MAX_RANK];
    int r = kiln_shape(ts[i], s);
    kiln_assign(ts[i], tp_input(full[i], r, s, -1, perturb && strcmp(perturb, full[i]) == 0));
    ps[i] = ts[i];
  }
  return n;
}

/* ── Transformer encoder layer ── */
enum { E_D = 32, E_H = 4, E_FF = 64, E_B = 2, E_T = 5 };
static const struct {
  int norm_first, gelu, masked;
} enc_variants[4] = {{0, 0, 0}, {0, 1, 1}, {1, 0, 1}, {1, 1, 0}};

/* Runs encoder variant k; returns {mismatches in y and loss, in gradients}.
 * perturb names one parameter or "loss_weight" to corrupt (NULL: none). */
typedef struct {
  int64_t fwd, bwd;
} tp_result;
static tp_result encoder_case(int k, const char *perturb, int report) {
  tp_result res = {0, 0};
  tp_file f;
  char file[64];
  snprintf(file, sizeof file, "torch_grad_ref_enc%d.txt", k);
  if (tp_load(&f, file) != 0) {
    KT_FAIL("%s not found (set KILN_TEST_DATA to tests/data)", file);
    res.fwd = res.bwd = 1;
    return res;
  }
  tp_start();
  kiln_encoder_layer *l = NULL;
  kiln_encoder_layer_create(E_D, E_H, E_FF, 0.0, enc_variants[k].gelu ? KILN_ACTIVATION_GELU : KILN_ACTIVATION_RELU,
                            enc_variants[k].norm_first ? KILN_NORM_PRE : KILN_NORM_POST, 1e-5, 11, &l);
  KT_CHECK(l != NULL);
  kiln_tensor ps[KILN_MODULE_MAX_ENTRIES];
  char names[KILN_MODULE_MAX_ENTRIES][96];
  int np = tp_load_params(&l->m, "", perturb, ps, names, KILN_MODULE_MAX_ENTRIES);
  KT_EQ_INT(np, 12);
  int64_t xs[3] = {E_B, E_T, E_D}, ms[2] = {E_B, E_T};
  kiln_tensor x = kiln_keep(tp_input("x", 3, xs, 1, 0));
  kiln_tensor wl = kiln_keep(tp_input("loss_weight", 3, xs, 2, perturb && strcmp(perturb, "loss_weight") == 0));
  if (!tp_same_step) kiln_mark_step(); /* the assigned values become the parameters' buffers */
  for (int i = 0; i < np; i++) kiln_requires_grad(ps[i]);
  kiln_requires_grad(x);
  unsigned char mask[E_B * E_T] = {0};
  mask[E_T + 3] = mask[E_T + 4] = 1; /* batch 1: last two keys padded */
  kiln_attn_opts o = {0};
  if (enc_variants[k].masked) o.causal = true, o.key_padding_mask = kiln_from_host(mask, KILN_BOOL, 2, ms);
  kiln_tensor y = kiln_keep(kiln_encoder_layer_forward(l, x, &o));
  kiln_tensor loss = kiln_keep(kiln_sum(kiln_mul(y, wl), 0, NULL, 0));
  KT_CHECK(kiln_backward(loss) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK); /* forward + backward: one graph */
  res.fwd += tp_compare(&f, "y", y, report);
  res.fwd += tp_compare(&f, "loss", loss, report);
  res.bwd += tp_compare(&f, "grad.x", kiln_grad(x), report);
  for (int i = 0; i < np; i++) {
    char key[128];
    snprintf(key, sizeof key, "grad.%.95s", names[i]);
    res.bwd += tp_compare(&f, key, kiln_grad(ps[i]), report);
  }
  if (report) KT_CHECK_MSG(kiln_last_status() == KILN_OK, "status: %s", kiln_last_error());
  kiln_encoder_layer_destroy(l);
  kiln_release(x);
  kiln_release(wl);
  kiln_release(y);
  kiln_release(loss);
  kiln_shutdown();
  tp_free(&f);
  return res;
}

KT_TEST(encoder_layer_forward_backward_match_torch) {
  for (int k = 0; k < 4; k++) {
    if (getenv("TP_VERBOSE")) fprintf(stderr, "  encoder variant %d\n", k);
    tp_result r = encoder_case(k, NULL, 1);
    KT_CHECK_MSG(r.fwd == 0 && r.bwd == 0, "encoder variant %d: %lld forward, %lld gradient mismatches", k,
                 (long long)r.fwd, (long long)r.bwd);
  }
}

KT_TEST(encoder_negative_controls_are_detected) {
  /* A weight changed by 0.05 in one element changes the forward output. */
  tp_result r = encoder_case(0, "linear2.weight", 0);
  KT_CHECK_MSG(r.fwd > 0 && r.bwd > 0, "perturbed linear2.weight went unnoticed (%lld, %lld)", (long long)r.fwd,
               (long long)r.bwd);
  /* An attention weight: the output and the attention-path gradients move. */
  r = encoder_case(3, "self_attn.in_proj_weight", 0);
  KT_CHECK_MSG(r.fwd > 0 && r.bwd > 0, "perturbed in_proj_weight went unnoticed");
  /* Changing only the loss weights leaves y alone but every gradient moves:
   * the gradient comparisons are live on their own. */
  r = encoder_case(1, "loss_weight", 0);
  KT_CHECK_MSG(r.bwd > 0, "perturbed loss weights went unnoticed in the gradients");
  KT_CHECK_MSG(r.fwd > 0, "the loss itself must change too");
}

/* ── small CNN ── */
static const int cnn_targets[3] = {2, 0, 4};

static tp_result cnn_case(int v, const char *perturb, int report) {
  tp_result res = {0, 0};
  tp_file f;
  if (tp_load(&f, "torch_grad_ref_cnn.txt") != 0) {
    KT_FAIL("torch_grad_ref_cnn.txt not found (set KILN_TEST_DATA to tests/data)");
    res.fwd = res.bwd = 1;
    return res;
  }
  tp_start();
  kiln_conv2d *c1 = NULL;
  kiln_conv2d_create(1, 4, 3, 1, 1, 1, 1, 1, 21, &c1);
  kiln_conv2d *c2 = NULL;
  if (v == 0)
    kiln_conv2d_create(4, 8, 3, 1, 1, 1, 1, true, 22, &c2);
  else
    kiln_conv2d_create(4, 8, 3, 2, 2, 2, 2, true, 22, &c2);
  int feat = v == 0 ? 8 * 4 * 4 : 8 * 2 * 2;
  kiln_linear *fc = NULL;
  kiln_linear_create(feat, 5, 1, 23, &fc);
  KT_CHECK(c1 && c2 && fc);
  kiln_tensor ps[6];
  char names[6][96];
  int np = tp_load_params(&c1->m, "conv1.", perturb, ps, names, 2);
  np += tp_load_params(&c2->m, "conv2.", perturb, ps + np, names + np, 2);
  np += tp_load_params(&fc->m, "fc.", perturb, ps + np, names + np, 2);
  KT_EQ_INT(np, 6);
  int64_t xs[4] = {3, 1, 8, 8}, ts[1] = {3}, flat[2] = {3, -1}, tg[3];
  for (int i = 0; i < 3; i++) tg[i] = cnn_targets[i];
  kiln_tensor x = kiln_keep(tp_input("x", 4, xs, 3, 0));
  if (!tp_same_step) kiln_mark_step();
  for (int i = 0; i < np; i++) kiln_requires_grad(ps[i]);
  kiln_requires_grad(x);
  kiln_tensor h = kiln_max_pool2d(kiln_relu(kiln_conv2d_forward(c1, x)), 2, 0, 0);
  h = kiln_reshape(kiln_relu(kiln_conv2d_forward(c2, h)), 2, flat);
  kiln_tensor logits = kiln_keep(kiln_linear_forward(fc, h));
  kiln_tensor loss = kiln_keep(kiln_cross_entropy(logits, kiln_from_host(tg, KILN_I64, 1, ts), -100, v ? 0.1 : 0.0));
  KT_CHECK(kiln_backward(loss) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  char key[128];
  snprintf(key, sizeof key, "cnn%d.logits", v);
  res.fwd += tp_compare(&f, key, logits, report);
  snprintf(key, sizeof key, "cnn%d.loss", v);
  res.fwd += tp_compare(&f, key, loss, report);
  snprintf(key, sizeof key, "cnn%d.grad.x", v);
  res.bwd += tp_compare(&f, key, kiln_grad(x), report);
  for (int i = 0; i < np; i++) {
    snprintf(key, sizeof key, "cnn%d.grad.%.95s", v, names[i]);
    res.bwd += tp_compare(&f, key, kiln_grad(ps[i]), report);
  }
  if (report) KT_CHECK_MSG(kiln_last_status() == KILN_OK, "status: %s", kiln_last_error());
  kiln_conv2d_destroy(c1);
  kiln_conv2d_destroy(c2);
  kiln_linear_destroy(fc);
  kiln_release(x);
  kiln_release(logits);
  kiln_release(loss);
  kiln_shutdown();
  tp_free(&f);
  return res;
}

KT_TEST(cnn_forward_backward_match_torch) {
  for (int v = 0; v < 2; v++) {
    if (getenv("TP_VERBOSE")) fprintf(stderr, "  cnn variant %d\n", v);
    tp_result r = cnn_case(v, NULL, 1);
    KT_CHECK_MSG(r.fwd == 0 && r.bwd == 0, "cnn variant %d: %lld forward, %lld gradient mismatches", v,
                 (long long)r.fwd, (long long)r.bwd);
  }
}

KT_TEST(cnn_negative_controls_are_detected) {
  tp_result r = cnn_case(0, "conv1.weight", 0);
  KT_CHECK_MSG(r.fwd > 0 && r.bwd > 0, "perturbed conv1.weight went unnoticed (%lld, %lld)", (long long)r.fwd,
               (long long)r.bwd);
  r = cnn_case(1, "fc.bias", 0);
  KT_CHECK_MSG(r.fwd > 0 && r.bwd > 0, "perturbed fc.bias went unnoticed");
}

/* kiln_assign of the weights, forward and backward traced into ONE step:
 * gradients must reach the parameters through their pending assigned values
 * exactly as through materialized ones. */
KT_TEST(assign_forward_backward_in_one_step_match_torch) {
  tp_same_step = 1;
  tp_result r = encoder_case(2, NULL, 1);
  KT_CHECK_MSG(r.fwd == 0 && r.bwd == 0, "encoder: %lld forward, %lld gradient mismatches", (long long)r.fwd,
               (long long)r.bwd);
  r = cnn_case(1, NULL, 1);
  KT_CHECK_MSG(r.fwd == 0 && r.bwd == 0, "cnn: %lld forward, %lld gradient mismatches", (long long)r.fwd,
               (long long)r.bwd);
  tp_same_step = 0;
}

KT_MAIN(KT_CASE(encoder_layer_forward_backward_match_torch), KT_CASE(encoder_negative_controls_are_detected),
        KT_CASE(cnn_forward_backward_match_torch), KT_CASE(cnn_negative_controls_are_detected),
        KT_CASE(assign_forward_backward_in_one_step_match_torch))
