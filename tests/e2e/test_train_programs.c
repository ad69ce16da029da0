/* Whole training programs over many steps, against PyTorch.
 *
 * tests/unit/test_torch_match.c checks one forward/backward; the bugs this
 * file hunts live where features meet over several steps: a weight used in
 * two places (its gradient is the sum), frozen and unfrozen parameters and
 * steps that give a parameter no gradient (AdamW's per-parameter step count),
 * gradient accumulation over micro-batches traced in separate steps,
 * clipping + a schedule + momentum/dampening/weight decay, batchnorm running
 * statistics with evaluation under no-grad interleaved with training, a loss
 * read (.item) in the middle of every step, a detached trunk, the encoder
 * layer with masks, a smaller last batch and ignore_index.
 *
 * Oracle: tests/data/train_programs_reference.py runs the same programs in
 * PyTorch (float64 from the same float32-rounded initial values) and wrote
 * tests/data/train_programs_reference.txt: every step's loss and the final
 * parameters and buffers. Weights, inputs and labels come from an integer
 * hash on both sides (splitmix64, as test_torch_match.c), so nothing but the
 * results is stored. Every program runs on ref and on the backend under test
 * ($KILN_TEST_BACKEND, default cpu). Negative controls break one program in
 * a way a wrong gradient or a wrong buffer update would, and require the
 * comparison to FAIL. TP_VERBOSE=1 prints the worst error of each array. */
#include <kiln/kiln.h>
#include <stdarg.h>

#include "kt.h"

/* |kiln - torch| <= ATOL + RTOL·|torch|: kiln runs in f32 against torch's
 * f64; the worst element of any array measures well below this (see
 * TP_VERBOSE=1), while a wrong gradient or update moves values by 1e-3+. */
#define RTOL 2e-5
#define ATOL 2e-6
/* bf16 autocast: kiln and torch round at different places (kiln's linear
 * adds the f32 bias after the bf16 matmul, torch's addmm rounds the sum to
 * bf16), so values agree to a few bf16 ulps (2^-8 relative), not f32's. */
#define RTOL_BF16 1e-2
#define ATOL_BF16 1e-3
static double g_rtol = RTOL, g_atol = ATOL;

/* ── the reference file ── */
typedef struct {
  char name[64];
  int64_t n;
  double *v;
} ref_entry;
static ref_entry g_ref[160];
static int g_nref = -1;

static void ref_load(void) {
  if (g_nref >= 0) return;
  g_nref = 0;
  const char *dirs[3] = {getenv("KILN_TEST_DATA"), "tests/data", "../tests/data"};
  FILE *fp = NULL;
  for (int i = 0; i < 3 && !fp; i++) {
    if (!dirs[i]) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/train_programs_reference.txt", dirs[i]);
    fp = fopen(path, "r");
  }
  if (!fp) return;
  while (g_nref < 160) {
    ref_entry *e = &g_ref[g_nref];
    long long n;
    if (fscanf(fp, "%63s %lld", e->name, &n) != 2 || n < 0 || n > 100000) break;
    e->n = n;
    e->v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
      if (fscanf(fp, "%lf", &e->v[i]) != 1) e->v[i] = NAN;
    g_nref++;
  }
  fclose(fp);
}

/* ── deterministic values (mirror of the script's mix/fill/ints/labels) ── */
static uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = (seed << 32 | i) + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static int64_t numel_of(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  return n;
}
static kiln_dtype g_dt = KILN_F32; /* the programs with plain parameters also run in f64 */
/* f32 tensor off + scale·u, u uniform in [-1, 1) from the hash (then cast to g_dt) */
static kiln_tensor fill(uint64_t seed, int rank, const int64_t *shape, double scale, double off) {
  int64_t n = numel_of(rank, shape);
  float *h = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++)
    h[i] = (float)(off + scale * ((double)(mix(seed, (uint64_t)i) >> 11) * 0x1.0p-52 - 1));
  kiln_tensor t = kiln_from_host(h, KILN_F32, rank, shape);
  free(h);
  return g_dt == KILN_F32 ? t : kiln_cast(t, g_dt);
}
/* i64 labels in [0, mod); with ignore_every, those whose second hash is 0
 * mod ignore_every become -100 */
static kiln_tensor labels(uint64_t seed, int rank, const int64_t *shape, int64_t mod, int64_t ignore_every) {
  int64_t n = numel_of(rank, shape);
  int64_t *h = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    h[i] = (int64_t)((mix(seed, (uint64_t)i) >> 11) % (uint64_t)mod);
    if (ignore_every && (mix(seed + 7, (uint64_t)i) >> 11) % (uint64_t)ignore_every == 0) h[i] = -100;
  }
  kiln_tensor t = kiln_from_host(h, KILN_I64, rank, shape);
  free(h);
  return t;
}
/* a parameter with the script's initial values, requiring grad unless frozen */
static kiln_tensor param(uint64_t seed, int rank, const int64_t *shape, double scale, double off, int trainable) {
  kiln_tensor p = kiln_param(fill(seed, rank, shape, scale, off));
  if (trainable) kiln_requires_grad(p);
  return p;
}
#define SHAPE(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

/* A stop-gradient the public API offers: an op traced in a no-grad region
 * (a scalar input, so nothing folds it away at trace time). */
static kiln_tensor detach(kiln_tensor t) {
  kiln_no_grad_begin();
  kiln_tensor d = kiln_mul_s(t, 1.0);
  kiln_no_grad_end();
  return d;
}

/* ── comparison ── */
static const char *g_backend;
static int g_report = 1;  /* 0 in negative controls: count, do not fail */
static int g_perturb = 0; /* which negative control a program applies */
static int64_t g_bad;     /* mismatching elements of the current run */

static void cmp_vals(const char *name, const double *got, int64_t n) {
  const ref_entry *e = NULL;
  for (int i = 0; i < g_nref; i++)
    if (strcmp(g_ref[i].name, name) == 0) e = &g_ref[i];
  if (!e || e->n != n) {
    g_bad += n ? n : 1;
    if (g_report) KT_FAIL("%s on %s: reference missing or %lld values, kiln %lld", name, g_backend,
                          e ? (long long)e->n : -1LL, (long long)n);
    return;
  }
  int64_t bad = 0, worst = 0;
  double worst_ratio = -1;
  for (int64_t i = 0; i < n; i++) {
    /* torch's NaN is the mean cross-entropy of a batch whose every label is
     * ignored, which kiln defines as 0 (docs/semantics.md) */
    double want = isnan(e->v[i]) ? 0.0 : e->v[i];
    double err = fabs(got[i] - want), tol = g_atol + g_rtol * fabs(want);
    if (!(err <= tol)) bad++;
    double r = isnan(err) ? INFINITY : err / tol;
    if (r > worst_ratio) worst_ratio = r, worst = i;
  }
  if (getenv("TP_VERBOSE")) fprintf(stderr, "    %-4s %-24s n=%-4lld worst err/tol %.3g\n", g_backend, name,
                                    (long long)n, worst_ratio);
  g_bad += bad;
  if (bad && g_report)
    KT_FAIL("%s on %s: %lld of %lld differ; worst [%lld]: kiln %.9g, torch %.9g", name, g_backend, (long long)bad,
            (long long)n, (long long)worst, got[worst], e->v[worst]);
}
static void cmp_tensor(kiln_tensor t, const char *fmt, ...) {
  char name[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  int64_t n = kiln_numel(t);
  double *got = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  if (n <= 0 || kiln_to_host(kiln_cast(t, KILN_F64), got, sizeof(double) * (size_t)n) != KILN_OK) {
    g_bad += 1;
    if (g_report) KT_FAIL("%s on %s: read failed: %s", name, g_backend, kiln_last_error());
  } else {
    cmp_vals(name, got, n);
  }
  free(got);
}
static void cmp_params(const char *prog, int n, const kiln_tensor *ps, const char *const *names) {
  char key[64];
  for (int i = 0; i < n; i++) {
    snprintf(key, sizeof key, "%s.p.%s", prog, names[i]);
    cmp_tensor(ps[i], "%s", key);
  }
}
/* loss.item() in the middle of a step: a value read (graph cut) */
static double item(kiln_tensor t) {
  double v = kiln_item_f64(t);
  if (g_report) KT_CHECK_MSG(!isnan(v), "item on %s: %s", g_backend, kiln_last_error());
  return v;
}
static void grads_of(int n, const kiln_tensor *ps, kiln_tensor *gs) {
  for (int i = 0; i < n; i++) gs[i] = kiln_grad(ps[i]);
}

/* ───────────── tied: the embedding is also the output projection ───────────── */
static void prog_tied(void) {
  enum { V = 11, D = 8, T = 5, S = 8 };
  kiln_tensor ps[3] = {param(1, SHAPE(V, D), 0.5, 0, 1), param(2, SHAPE(D, D), 0.35, 0, 1),
                       param(3, SHAPE(D), 0.1, 0, 1)};
  kiln_optim *o = NULL;
  kiln_adamw_opts ao = {.lr = 0.05, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
  KT_CHECK(kiln_optim_create_adamw(3, ps, &ao, &o) == KILN_OK);
  kiln_mark_step();
  double losses[S], norms[S];
  for (int s = 0; s < S; s++) {
    int64_t B = 2 + (s * 5) % 4; /* a new batch size most steps (dynamic shapes) */
    kiln_tensor ids = kiln_reshape(labels(100 + s, SHAPE(B * T), V, 0), 2, ((int64_t[]){B, T}));
    kiln_tensor y = kiln_reshape(labels(200 + s, SHAPE(B * T), V, 5), 2, ((int64_t[]){B, T}));
    kiln_tensor h = kiln_tanh(kiln_linear_apply(kiln_index_select(ps[0], 0, ids), ps[1], ps[2]));
    /* control 1: the projection's use of E gets no gradient */
    kiln_tensor proj = g_perturb == 1 ? detach(ps[0]) : ps[0];
    kiln_tensor loss = kiln_cross_entropy(kiln_matmul(h, kiln_transpose(proj, 0, 1)), y, -100, 0.0);
    losses[s] = item(loss);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    kiln_tensor g[3], c[3];
    grads_of(3, ps, g);
    norms[s] = item(kiln_clip_grad_norm(3, g, c, 0.22));
    kiln_optim_set_lr(o, kiln_lr_warmup_cosine(s, 2, S, 0.05, 0.005));
    KT_CHECK(kiln_optim_step_tensors(o, 3, ps, c) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  cmp_vals("tied.loss", losses, S);
  cmp_vals("tied.norm", norms, S);
  cmp_params("tied", 3, ps, (const char *const[]){"E", "W1", "b1"});
  kiln_optim_destroy(o);
}

/* ───────────── freeze: frozen, then unfrozen; steps without a gradient ─────────────
 * Layer 1 (SGD, momentum + dampening) is frozen for 4 steps then unfrozen:
 * its momentum buffer starts at its own first gradient. Layer 2 (AdamW, a
 * second optimizer stepping in the same step) gets no gradient in steps 6
 * and 7: no update, no weight decay, no step count. Clipping spans all four
 * parameters and skips the missing gradients (torch's None). */
static void prog_freeze(void) {
  enum { S = 10 };
  kiln_tensor ps[4] = {param(11, SHAPE(10, 6), 0.4, 0, 0), param(12, SHAPE(10), 0.2, 0, 0),
                       param(13, SHAPE(3, 10), 0.3, 0, 1), param(14, SHAPE(3), 0.2, 0, 1)};
  kiln_optim *o1 = NULL, *o2 = NULL;
  kiln_sgd_opts so = {.lr = 0.05, .momentum = 0.8, .dampening = 0.5, .weight_decay = 0.02};
  kiln_adamw_opts ao = {.lr = 0.02, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.05};
  KT_CHECK(kiln_optim_create_sgd(2, ps, &so, &o1) == KILN_OK);
  KT_CHECK(kiln_optim_create_adamw(2, ps + 2, &ao, &o2) == KILN_OK);
  kiln_mark_step();
  double losses[S], norms[S];
  for (int s = 0; s < S; s++) {
    if (s == 4) kiln_requires_grad(ps[0]), kiln_requires_grad(ps[1]);
    kiln_tensor x = fill(500 + s, SHAPE(5, 6), 1, 0), t = fill(600 + s, SHAPE(5, 3), 1, 0);
    kiln_tensor y = kiln_linear_apply(kiln_relu(kiln_linear_apply(x, ps[0], ps[1])), ps[2], ps[3]);
    kiln_tensor loss = kiln_mse_loss(y, t);
    losses[s] = item(loss);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    kiln_tensor g[4], c[4];
    grads_of(4, ps, g);
    if (s == 0) KT_CHECK(!kiln_is_valid(g[0]) && !kiln_is_valid(g[1]));
    if (s == 6 || s == 7) g[2] = g[3] = (kiln_tensor){0, 0}; /* torch: p.grad = None */
    norms[s] = item(kiln_clip_grad_norm(4, g, c, 0.3));
    KT_CHECK(kiln_optim_step_tensors(o1, 2, ps, c) == KILN_OK);
    KT_CHECK(kiln_optim_step_tensors(o2, 2, ps + 2, c + 2) == KILN_OK);
    kiln_optim_zero_grad(o1);
    kiln_optim_zero_grad(o2);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  KT_EQ_INT(kiln_optim_param_step_count(o1, 0), 6);
  KT_EQ_INT(kiln_optim_param_step_count(o2, 0), 8);
  cmp_vals("freeze.loss", losses, S);
  cmp_vals("freeze.norm", norms, S);
  cmp_params("freeze", 4, ps, (const char *const[]){"w1", "b1", "w2", "b2"});
  kiln_optim_destroy(o1);
  kiln_optim_destroy(o2);
}

/* ───────────── accum: micro-batches in separate steps, one weight used twice ───────────── */
static void prog_accum(void) {
  enum { S = 6, MB = 3 };
  kiln_tensor ps[3] = {param(21, SHAPE(6, 6), 0.4, 0, 1), param(22, SHAPE(2, 6), 0.4, 0, 1),
                       param(23, SHAPE(2), 0.1, 0, 1)};
  kiln_optim *o = NULL;
  kiln_sgd_opts so = {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true};
  KT_CHECK(kiln_optim_create_sgd(3, ps, &so, &o) == KILN_OK);
  kiln_mark_step();
  double losses[S * MB];
  for (int s = 0; s < S; s++) {
    for (int m = 0; m < MB; m++) {
      int64_t B = 2 + (3 * s + m) % 3;
      kiln_tensor x = fill(700 + 3 * s + m, SHAPE(B, 6), 1, 0), t = fill(800 + 3 * s + m, SHAPE(B, 2), 1, 0);
      kiln_tensor none = {0, 0};
      kiln_tensor h = kiln_linear_apply(kiln_tanh(kiln_linear_apply(x, ps[0], none)), ps[0], none);
      kiln_tensor loss = kiln_div_c(kiln_mse_loss(kiln_linear_apply(h, ps[1], ps[2]), t), 3.0);
      losses[s * MB + m] = item(loss);
      KT_CHECK(kiln_backward(loss) == KILN_OK);
      KT_CHECK(kiln_mark_step() == KILN_OK); /* each micro-batch is its own step */
      if (g_perturb == 2 && m == 0) kiln_optim_zero_grad(o); /* control 2: the first micro-batch is lost */
    }
    KT_CHECK(kiln_optim_step(o) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  cmp_vals("accum.loss", losses, S * MB);
  cmp_params("accum", 3, ps, (const char *const[]){"W", "wo", "bo"});
  kiln_optim_destroy(o);
}

/* ───────────── sgdsched: momentum + dampening + wd, step schedule, clipping ───────────── */
static void prog_sgdsched(void) {
  enum { S = 20 };
  kiln_tensor ps[4] = {param(31, SHAPE(8, 5), 0.45, 0, 1), param(32, SHAPE(8), 0.2, 0, 1),
                       param(33, SHAPE(4, 8), 0.35, 0, 1), param(34, SHAPE(4), 0.2, 0, 1)};
  kiln_optim *o = NULL;
  kiln_sgd_opts so = {.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.05};
  KT_CHECK(kiln_optim_create_sgd(4, ps, &so, &o) == KILN_OK);
  kiln_mark_step();
  double losses[S], norms[S];
  for (int s = 0; s < S; s++) {
    int64_t B = 3 + (s * 7) % 5;
    kiln_tensor x = fill(900 + s, SHAPE(B, 5), 1.5, 0), y = labels(1000 + s, SHAPE(B), 4, 4);
    kiln_tensor logits = kiln_linear_apply(kiln_relu(kiln_linear_apply(x, ps[0], ps[1])), ps[2], ps[3]);
    kiln_tensor loss = kiln_cross_entropy(logits, y, -100, 0.1);
    losses[s] = item(loss);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    kiln_tensor g[4], c[4];
    grads_of(4, ps, g);
    norms[s] = item(kiln_clip_grad_norm(4, g, c, 0.45 + 0.1 * (s % 3))); /* max_norm: a graph input */
    kiln_optim_set_lr(o, 0.1 * pow(0.5, s / 5));
    KT_CHECK(kiln_optim_step_tensors(o, 4, ps, c) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  cmp_vals("sgdsched.loss", losses, S);
  cmp_vals("sgdsched.norm", norms, S);
  cmp_params("sgdsched", 4, ps, (const char *const[]){"w1", "b1", "w2", "b2"});
  kiln_optim_destroy(o);
}

/* ───────────── bncnn: grouped/strided convs, batchnorm, eval interleaved ───────────── */
typedef struct {
  kiln_conv2d *c1, *c2;
  kiln_batchnorm2d *bn1, *bn2;
  kiln_tensor fw, fb;
} bncnn_model;
static kiln_tensor bncnn_forward(const bncnn_model *m, kiln_tensor x, bool train) {
  kiln_tensor h = kiln_batchnorm2d_forward(m->bn1, kiln_conv2d_forward(m->c1, x), train);
  h = kiln_max_pool2d(kiln_relu(h), 2, 0, 0);
  h = kiln_batchnorm2d_forward(m->bn2, kiln_conv2d_forward(m->c2, h), train);
  h = kiln_reshape(kiln_relu(h), 2, ((int64_t[]){kiln_dim(x, 0), -1}));
  return kiln_linear_apply(h, m->fw, m->fb);
}
static void prog_bncnn(void) {
  enum { S = 6 };
  bncnn_model m = {0};
  kiln_conv2d_create(2, 4, 3, 1, 1, 1, 2, true, 5, &m.c1);
  kiln_conv2d_create(4, 6, 3, 2, 1, 1, 2, false, 6, &m.c2);
  kiln_batchnorm2d_create(4, 1e-5, 0.1, &m.bn1);
  kiln_batchnorm2d_create(6, 1e-3, g_perturb == 3 ? 0.1 : 0.3, &m.bn2); /* control 3: the wrong momentum */
  KT_CHECK(m.c1 && m.c2 && m.bn1 && m.bn2);
  if (!m.c1 || !m.c2 || !m.bn1 || !m.bn2) return;
  kiln_assign(m.c1->weight, fill(41, SHAPE(4, 1, 3, 3), 0.5, 0));
  kiln_assign(m.c1->bias, fill(42, SHAPE(4), 0.1, 0));
  kiln_assign(m.c2->weight, fill(43, SHAPE(6, 2, 3, 3), 0.4, 0));
  kiln_assign(m.bn1->weight, fill(44, SHAPE(4), 0.2, 1));
  kiln_assign(m.bn1->bias, fill(45, SHAPE(4), 0.1, 0));
  kiln_assign(m.bn2->weight, fill(46, SHAPE(6), 0.2, 1));
  kiln_assign(m.bn2->bias, fill(47, SHAPE(6), 0.1, 0));
  m.fw = param(48, SHAPE(3, 24), 0.3, 0, 1);
  m.fb = param(49, SHAPE(3), 0.1, 0, 1);
  kiln_tensor ps[13] = {m.c1->weight, m.c1->bias, m.c2->weight, m.bn1->weight, m.bn1->bias, m.bn2->weight,
                        m.bn2->bias, m.fw, m.fb, m.bn1->running_mean, m.bn1->running_var, m.bn2->running_mean,
                        m.bn2->running_var};
  for (int i = 0; i < 7; i++) kiln_requires_grad(ps[i]);
  kiln_optim *o = NULL;
  kiln_sgd_opts so = {.lr = 0.05, .momentum = 0.9};
  KT_CHECK(kiln_optim_create_sgd(9, ps, &so, &o) == KILN_OK);
  kiln_mark_step();
  double losses[S], evals[2];
  int ne = 0;
  for (int s = 0; s < S; s++) {
    int64_t N = 2 + (s * 3) % 4;
    kiln_tensor x = fill(1100 + s, SHAPE(N, 2, 8, 8), 1, 0), y = labels(1200 + s, SHAPE(N), 3, 0);
    kiln_tensor loss = kiln_cross_entropy(bncnn_forward(&m, x, true), y, -100, 0.0);
    losses[s] = item(loss);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_optim_step(o) == KILN_OK);
    kiln_optim_zero_grad(o);
    if (s == 1 || s == 3) { /* evaluate the updated (still pending) model before the step ends */
      kiln_no_grad_begin();
      kiln_tensor ex = fill(1300 + s, SHAPE(4, 2, 8, 8), 1, 0);
      evals[ne++] = item(kiln_cross_entropy(bncnn_forward(&m, ex, false), labels(1400 + s, SHAPE(4), 3, 0), -100, 0));
      kiln_no_grad_end();
    }
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  cmp_vals("bncnn.loss", losses, S);
  cmp_vals("bncnn.eval", evals, 2);
  cmp_params("bncnn", 13, ps,
             (const char *const[]){"c1w", "c1b", "c2w", "bn1w", "bn1b", "bn2w", "bn2b", "fw", "fb", "rm1", "rv1",
                                   "rm2", "rv2"});
  kiln_optim_destroy(o);
  kiln_conv2d_destroy(m.c1);
  kiln_conv2d_destroy(m.c2);
  kiln_batchnorm2d_destroy(m.bn1);
  kiln_batchnorm2d_destroy(m.bn2);
}

/* ───────────── heads: two losses, one head on the detached trunk ───────────── */
static void prog_heads(void) {
  enum { S = 8 };
  kiln_tensor ps[6] = {param(51, SHAPE(8, 5), 0.45, 0, 1), param(52, SHAPE(8), 0.2, 0, 1),
                       param(53, SHAPE(2, 8), 0.35, 0, 1), param(54, SHAPE(2), 0.1, 0, 1),
                       param(55, SHAPE(3, 8), 0.35, 0, 1), param(56, SHAPE(3), 0.1, 0, 1)};
  kiln_optim *o = NULL;
  kiln_adamw_opts ao = {.lr = 0.03, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.02};
  KT_CHECK(kiln_optim_create_adamw(6, ps, &ao, &o) == KILN_OK);
  kiln_mark_step();
  double losses[2 * S];
  for (int s = 0; s < S; s++) {
    kiln_tensor x = fill(1500 + s, SHAPE(6, 5), 1, 0), t = fill(1600 + s, SHAPE(6, 2), 1, 0);
    kiln_tensor y = labels(1700 + s, SHAPE(6), 3, 0);
    kiln_tensor h = kiln_tanh(kiln_linear_apply(x, ps[0], ps[1]));
    kiln_tensor la = kiln_mse_loss(kiln_linear_apply(h, ps[2], ps[3]), t), loss = la;
    losses[2 * s] = item(la);
    losses[2 * s + 1] = 0;
    if (s % 3 != 2) { /* else head C is unused: no gradient, AdamW skips it */
      kiln_tensor lc = kiln_cross_entropy(kiln_linear_apply(detach(h), ps[4], ps[5]), y, -100, 0.0);
      losses[2 * s + 1] = item(lc);
      loss = kiln_add(la, kiln_mul_c(lc, 0.5));
    }
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_optim_step(o) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  cmp_vals("heads.loss", losses, 2 * S);
  cmp_params("heads", 6, ps, (const char *const[]){"tw", "tb", "aw", "ab", "cw", "cb"});
  kiln_optim_destroy(o);
}

/* ───────────── encoder: encoder layer with causal + padding masks, trained ───────────── */
static int g_amp; /* the encoder program under bf16 autocast */
static void prog_encoder(void) {
  const char *tag = g_amp ? "encamp" : "encoder";
  enum { D = 16, H = 2, FF = 32, B = 3, T = 6, C = 4, S = 5 };
  kiln_encoder_layer *l = NULL;
  kiln_encoder_layer_create(D, H, FF, 0.0, KILN_ACTIVATION_GELU, KILN_NORM_PRE, 1e-5, 9, &l);
  KT_CHECK(l != NULL);
  if (!l) return;
  const char *names[KILN_MODULE_MAX_ENTRIES + 2];
  kiln_tensor ps[KILN_MODULE_MAX_ENTRIES + 2];
  int np = kiln_module_params(&l->m, names, ps, KILN_MODULE_MAX_ENTRIES);
  KT_EQ_INT(np, 12);
  for (int i = 0; i < np; i++) {
    int64_t sh[KILN_MAX_RANK];
    int r = kiln_shape(ps[i], sh);
    size_t len = strlen(names[i]);
    int bias = len >= 4 && strcmp(names[i] + len - 4, "bias") == 0, norm = strstr(names[i], "norm") != NULL;
    kiln_assign(ps[i], fill(60 + (uint64_t)i, r, sh, bias ? 0.1 : norm ? 0.2 : 0.3, !bias && norm ? 1 : 0));
    kiln_requires_grad(ps[i]);
  }
  ps[np] = param(80, SHAPE(C, D), 0.3, 0, 1);
  ps[np + 1] = param(81, SHAPE(C), 0.1, 0, 1);
  names[np] = "head.weight", names[np + 1] = "head.bias";
  kiln_optim *o = NULL;
  /* SGD, not AdamW: the key bias's gradient is zero in exact arithmetic (a
   * softmax ignores a constant per row), so AdamW would turn each side's
   * rounding noise into full-size updates of it */
  kiln_sgd_opts so = {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01};
  KT_CHECK(kiln_optim_create_sgd(np + 2, ps, &so, &o) == KILN_OK);
  kiln_mark_step();
  unsigned char pad[B * T] = {0};
  for (int t = 4; t < T; t++) pad[T + t] = 1;
  for (int t = 2; t < T; t++) pad[2 * T + t] = 1;
  double losses[S];
  for (int s = 0; s < S; s++) {
    kiln_tensor x = fill(1800 + s, SHAPE(B, T, D), 1, 0);
    int64_t yh[B * T];
    for (int i = 0; i < B * T; i++) yh[i] = pad[i] ? -100 : (int64_t)((mix(1900 + s, (uint64_t)i) >> 11) % C);
    kiln_tensor y = kiln_from_host(yh, KILN_I64, 2, ((int64_t[]){B, T}));
    kiln_attn_opts ao2 = {.causal = true, .key_padding_mask = kiln_from_host(pad, KILN_BOOL, 2, ((int64_t[]){B, T})),
                          .training = true};
    if (g_amp) kiln_autocast_begin(KILN_BF16);
    kiln_tensor logits = kiln_linear_apply(kiln_encoder_layer_forward(l, x, &ao2), ps[np], ps[np + 1]);
    if (g_amp) kiln_autocast_end();
    kiln_tensor loss = kiln_cross_entropy(kiln_cast(logits, KILN_F32), y, -100, 0.0);
    losses[s] = item(loss);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_optim_step(o) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  char key[32];
  snprintf(key, sizeof key, "%s.loss", tag);
  cmp_vals(key, losses, S);
  cmp_params(tag, np + 2, ps, names);
  kiln_optim_destroy(o);
  kiln_release(ps[np]);
  kiln_release(ps[np + 1]);
  kiln_encoder_layer_destroy(l);
}

/* ───────────── amp: an MLP trained under bf16 autocast ───────────── */
static void prog_amp(void) {
  enum { S = 6 };
  kiln_tensor ps[4] = {param(91, SHAPE(16, 8), 0.35, 0, 1), param(92, SHAPE(16), 0.1, 0, 1),
                       param(93, SHAPE(4, 16), 0.25, 0, 1), param(94, SHAPE(4), 0.1, 0, 1)};
  kiln_optim *o = NULL;
  kiln_sgd_opts so = {.lr = g_perturb == 4 ? 0.11 : 0.1, .momentum = 0.9}; /* control 4: lr off by 10% */
  KT_CHECK(kiln_optim_create_sgd(4, ps, &so, &o) == KILN_OK);
  kiln_mark_step();
  g_rtol = RTOL_BF16, g_atol = ATOL_BF16;
  double losses[S];
  for (int s = 0; s < S; s++) {
    int64_t B = 3 + (s * 3) % 4;
    kiln_tensor x = fill(2000 + s, SHAPE(B, 8), 1, 0), y = labels(2100 + s, SHAPE(B), 4, 5);
    kiln_autocast_begin(KILN_BF16);
    kiln_tensor logits = kiln_linear_apply(kiln_gelu(kiln_linear_apply(x, ps[0], ps[1])), ps[2], ps[3]);
    kiln_autocast_end();
    kiln_tensor loss = kiln_cross_entropy(kiln_cast(logits, KILN_F32), y, -100, 0.0); /* torch: logits.float() */
    KT_CHECK(kiln_dtype_of(logits) == KILN_BF16 && kiln_dtype_of(loss) == KILN_F32);
    losses[s] = item(loss);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    for (int i = 0; i < 4; i++) KT_CHECK(kiln_dtype_of(kiln_grad(ps[i])) == KILN_F32);
    KT_CHECK(kiln_optim_step(o) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  cmp_vals("amp.loss", losses, S);
  cmp_params("amp", 4, ps, (const char *const[]){"w1", "b1", "w2", "b2"});
  g_rtol = RTOL, g_atol = ATOL;
  kiln_optim_destroy(o);
}

/* ───────────── loader: kiln's loader, a padded last batch, 2 epochs ─────────────
 * 22 examples in batches of 8: the third batch has 6 real rows and 2 of
 * padding (mask 0), which the program turns into ignored labels. */
static void prog_loader(void) {
  enum { N = 22, F = 6, BS = 8, S = 6 };
  float xh[N * F];
  int64_t yh[N];
  for (int i = 0; i < N * F; i++) xh[i] = (float)((double)(mix(2200, (uint64_t)i) >> 11) * 0x1.0p-52 - 1);
  for (int i = 0; i < N; i++) yh[i] = (int64_t)((mix(2201, (uint64_t)i) >> 11) % 3);
  kiln_dataset *ds = NULL;
  KT_CHECK(kiln_dataset_create_from_host(xh, 2, ((int64_t[]){N, F}), yh, &ds) == KILN_OK);
  kiln_loader *ld = NULL;
  kiln_batch_options bo = {.batch_size = BS, .shuffle = false, .drop_last = false};
  KT_CHECK(kiln_loader_create(ds, &bo, &ld) == KILN_OK);
  if (!ds || !ld) return;
  kiln_tensor ps[4] = {param(2202, SHAPE(8, 6), 0.4, 0, 1), param(2203, SHAPE(8), 0.1, 0, 1),
                       param(2204, SHAPE(3, 8), 0.4, 0, 1), param(2205, SHAPE(3), 0.1, 0, 1)};
  kiln_optim *o = NULL;
  kiln_sgd_opts so = {.lr = 0.2, .momentum = 0.5};
  KT_CHECK(kiln_optim_create_sgd(4, ps, &so, &o) == KILN_OK);
  kiln_mark_step();
  double losses[S];
  int s = 0;
  for (int guard = 0; s < S && guard < 2 * S; guard++) {
    kiln_batch b;
    int r = kiln_loader_next(ld, &b);
    KT_CHECK(r >= 0);
    if (r != 1) continue; /* end of an epoch */
    KT_EQ_INT(b.n_valid, s % 3 == 2 ? 6 : 8);
    kiln_tensor x = g_dt == KILN_F32 ? b.x : kiln_cast(b.x, g_dt);
    kiln_tensor y = kiln_where(kiln_gt_c(b.mask, 0.5), b.y, kiln_constant(KILN_I64, -100)); /* padding: ignored */
    kiln_tensor logits = kiln_linear_apply(kiln_tanh(kiln_linear_apply(x, ps[0], ps[1])), ps[2], ps[3]);
    kiln_tensor loss = kiln_cross_entropy(logits, y, -100, 0.0);
    losses[s++] = item(loss);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_optim_step(o) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  KT_EQ_INT(s, S);
  cmp_vals("loader.loss", losses, s);
  cmp_params("loader", 4, ps, (const char *const[]){"w1", "b1", "w2", "b2"});
  kiln_optim_destroy(o);
  kiln_loader_destroy(ld);
  kiln_dataset_destroy(ds);
}

/* ── driver ── */
static const char *backend_under_test(void) {
  const char *b = getenv("KILN_TEST_BACKEND");
  return b && *b ? b : "cpu";
}
/* Runs prog on backend; returns its mismatching elements. */
static int64_t run(void (*prog)(void), const char *backend) {
  ref_load();
  if (g_nref <= 0) {
    KT_FAIL("train_programs_reference.txt not found (set KILN_TEST_DATA to tests/data)");
    return 1;
  }
  kiln_shutdown();
  kiln_clear_error();
  g_backend = backend;
  g_bad = 0;
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend}) == KILN_OK);
  prog();
  if (g_report) KT_CHECK_MSG(kiln_last_status() == KILN_OK, "on %s: %s", backend, kiln_last_error());
  kiln_shutdown();
  return g_bad;
}
static void both(void (*prog)(void)) {
  run(prog, "ref");
  run(prog, backend_under_test());
}

KT_TEST(tied_embedding_adamw_clip_cosine) { both(prog_tied); }
KT_TEST(freeze_unfreeze_and_missing_grads) { both(prog_freeze); }
KT_TEST(grad_accumulation_across_steps) { both(prog_accum); }
KT_TEST(sgd_dampening_step_schedule_clip) { both(prog_sgdsched); }
KT_TEST(batchnorm_cnn_with_eval_between_steps) { both(prog_bncnn); }
KT_TEST(two_heads_detached_trunk) { both(prog_heads); }
KT_TEST(encoder_with_masks_trained) { both(prog_encoder); }
KT_TEST(mlp_under_bf16_autocast) { both(prog_amp); }
KT_TEST(loader_with_a_padded_last_batch) { both(prog_loader); }
KT_TEST(encoder_with_masks_under_bf16_autocast) {
  g_amp = 1, g_rtol = RTOL_BF16, g_atol = ATOL_BF16;
  both(prog_encoder);
  g_amp = 0, g_rtol = RTOL, g_atol = ATOL;
}

/* The programs with plain parameters in f64: torch's float64 answer to
 * ~1e-12, so even a rounding of a constant or a scalar input to f32 shows. */
KT_TEST(f64_programs_match_tightly) {
  g_dt = KILN_F64, g_rtol = 1e-12, g_atol = 1e-13;
  void (*progs[])(void) = {prog_tied, prog_freeze, prog_accum, prog_sgdsched, prog_heads, prog_loader};
  for (int i = 0; i < 6; i++) both(progs[i]);
  g_dt = KILN_F32, g_rtol = RTOL, g_atol = ATOL;
}

KT_TEST(negative_controls_are_detected) {
  g_report = 0;
  void (*progs[4])(void) = {prog_tied, prog_accum, prog_bncnn, prog_amp};
  for (int k = 1; k <= 4; k++) {
    g_perturb = k;
    void (*prog)(void) = progs[k - 1];
    int64_t bad = run(prog, backend_under_test());
    KT_CHECK_MSG(bad > 0, "negative control %d went unnoticed", k);
  }
  g_perturb = 0;
  g_report = 1;
}

KT_MAIN(KT_CASE(tied_embedding_adamw_clip_cosine), KT_CASE(freeze_unfreeze_and_missing_grads),
        KT_CASE(grad_accumulation_across_steps), KT_CASE(sgd_dampening_step_schedule_clip),
        KT_CASE(batchnorm_cnn_with_eval_between_steps), KT_CASE(two_heads_detached_trunk),
        KT_CASE(encoder_with_masks_trained), KT_CASE(mlp_under_bf16_autocast), KT_CASE(loader_with_a_padded_last_batch),
        KT_CASE(encoder_with_masks_under_bf16_autocast), KT_CASE(f64_programs_match_tightly),
                KT_CASE(negative_controls_are_detected))
