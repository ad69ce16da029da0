/* A variable-length workload (issue 15 §4, docs/dynamic-shapes.md): a
 * Transformer encoder layer (d_model 256, 4 heads, feed-forward 1024, ReLU,
 * post-norm, dropout 0.1 in training mode; bench/train_step.c's encoder)
 * trained with plain SGD (lr 0.01, loss = mean of the output over the real
 * tokens) on batches of 16 sequences whose length is drawn uniformly from
 * 16..256 (splitmix64, seed 2026; bench/varlen_ref.py draws the same), the
 * same sequence of lengths for every variant:
 *
 *   dynamic  each batch at its own length ([16, L, 256]), the length marked
 *            dynamic (kiln_dynamic): one compile, every new length planned
 *   pad      every batch padded to 256 with a key padding mask (one shape),
 *            the loss over the real tokens; KILN_DYNAMIC off
 *   bucket   8 buckets, boundaries every 32: each batch padded to the next
 *            multiple of 32, with the mask; KILN_DYNAMIC off. The buckets are
 *            NOT warmed up: each compiles at its first batch, inside the run
 *
 * Each variant runs in a child process of its own (this program with
 * KILN_BENCH_VARLEN_VARIANT set) with a fresh, empty kernel cache, so its
 * compiles are real: the time of a variant includes its compiles (they are
 * part of the cost of a variable-length workload). The steady figures leave
 * out the steps that compiled (a planned length stays in: a plan is part of
 * the steady cost). PyTorch eager on the same unpadded batches
 * (bench/varlen_ref.py, no compile; 2 warm-up steps not timed) comes from
 * bench/run.sh: KILN_BENCH_TORCH_VARLEN="seconds tokens_per_s".
 *
 * Bars: compiles of the dynamic variant <= 2; its tokens/s >= 1.6x pad and
 * >= 1.1x bucket; its time <= 0.7x PyTorch's. KILN_BENCH_VARLEN_STEPS (default
 * 40) sets the number of steps. */
#include <stdint.h>
#include <unistd.h>

#include "bench_util.h"

enum { BATCH = 16, DMODEL = 256, MAXLEN = 256, MINLEN = 16, MAX_STEPS = 1000, MAX_PARAMS = 32 };

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The lengths of the run: uniform over MINLEN..MAXLEN (bench/varlen_ref.py
 * draws the same ones). */
static void draw_lengths(int *len, int n) {
  uint64_t s = 2026;
  for (int i = 0; i < n; i++) len[i] = MINLEN + (int)(splitmix(&s) % (MAXLEN - MINLEN + 1));
}

typedef struct vl_result {
  double total_s, steady_s;           /* all steps; steps without a compile */
  double tokens, steady_tokens, computed; /* real tokens (all, steady); tokens computed with padding */
  long compiles, plans, families;
  double again_s, rss_mb; /* the second pass over the same lengths; peak RSS after the first */
} vl_result;

static int padded_length(const char *variant, int L) {
  if (!strcmp(variant, "pad")) return MAXLEN;
  if (!strcmp(variant, "bucket")) return (L + 31) / 32 * 32;
  return L;
}

/* One step's loss: the mean of the output over the real tokens. The padded
 * variants mask the padding keys in attention and the padding rows in the
 * loss (the scale is a graph input: a new length never recompiles). */
static kiln_tensor step_loss(kiln_encoder_layer *enc, const float *xh, const uint8_t *pad, const float *keep,
                             int L, int Lp, int dynamic, uint64_t seed) {
  int64_t xs[3] = {BATCH, Lp, DMODEL};
  kiln_tensor x = kiln_from_host(xh, KILN_F32, 3, xs);
  kiln_attn_opts o = {.training = 1, .seed = seed};
  if (dynamic) return kiln_mean(kiln_encoder_layer_forward(enc, kiln_dynamic(x, 1), &o), 0, NULL, 0);
  int64_t ms[2] = {BATCH, Lp}, ks[3] = {BATCH, Lp, 1};
  o.key_padding_mask = kiln_from_host(pad, KILN_BOOL, 2, ms);
  kiln_tensor out = kiln_mul(kiln_encoder_layer_forward(enc, x, &o), kiln_from_host(keep, KILN_F32, 3, ks));
  return kiln_mul_s(kiln_sum(out, 0, NULL, 0), 1.0 / ((double)BATCH * L * DMODEL));
}

/* The batch at length L padded to Lp: the first L positions of each of the
 * 16 sequences of the pool [16, 256, 256], zeros after; the masks. */
static void make_batch(const float *pool, int L, int Lp, float *xh, uint8_t *pad, float *keep) {
  for (int b = 0; b < BATCH; b++)
    for (int t = 0; t < Lp; t++) {
      float *row = xh + ((size_t)b * Lp + t) * DMODEL;
      if (t < L)
        memcpy(row, pool + ((size_t)b * MAXLEN + t) * DMODEL, DMODEL * sizeof *row);
      else
        memset(row, 0, DMODEL * sizeof *row);
      pad[b * Lp + t] = t >= L;
      keep[b * Lp + t] = t < L;
    }
}

/* One variant's training state. */
typedef struct vl_run {
  const char *variant;
  int dynamic, np;
  kiln_encoder_layer *enc;
  kiln_optim *opt;
  kiln_tensor params[MAX_PARAMS], loss_keep;
  float *pool, *xh, keep[BATCH * MAXLEN];
  uint8_t pad[BATCH * MAXLEN];
} vl_run;

/* Train over the lengths once; add the times and tokens to r (the steps
 * that compiled count in the total only). */
static void train_pass(vl_run *v, const int *len, int steps, uint64_t seed0, vl_result *r) {
  for (int s = 0; s < steps; s++) {
    int L = len[s], Lp = padded_length(v->variant, L);
    long cs = (long)kiln_counter_value("UncachedCompile");
    double t0 = kb_now_s();
    make_batch(v->pool, L, Lp, v->xh, v->pad, v->keep);
    kiln_tensor loss = step_loss(v->enc, v->xh, v->pad, v->keep, L, Lp, v->dynamic, seed0 + (uint64_t)s);
    KB_CHECK(kiln_backward(loss));
    KB_CHECK(kiln_optim_step(v->opt));
    for (int i = 0; i < v->np; i++) kiln_zero_grad(v->params[i]);
    kiln_release(v->loss_keep);
    v->loss_keep = kiln_keep(loss);
    KB_CHECK(kiln_mark_step());
    KB_CHECK(kiln_wait());
    double dt = kb_now_s() - t0;
    r->total_s += dt, r->tokens += (double)BATCH * L, r->computed += (double)BATCH * Lp;
    if (kiln_counter_value("UncachedCompile") == cs) r->steady_s += dt, r->steady_tokens += (double)BATCH * L;
  }
}

static int setup_run(vl_run *v, const char *variant) {
  memset(v, 0, sizeof *v);
  v->variant = variant;
  v->dynamic = !strcmp(variant, "dynamic");
  kiln_options ko = {.dynamic_shapes = v->dynamic ? KILN_SWITCH_DEFAULT : KILN_SWITCH_OFF};
  KB_CHECK(kiln_init(&ko));
  KB_CHECK(kiln_encoder_layer_create(DMODEL, 4, 1024, 0.1, KILN_ACTIVATION_RELU, KILN_NORM_POST, 1e-5, 1, &v->enc));
  v->np = kiln_module_params(&v->enc->m, NULL, v->params, MAX_PARAMS);
  if (v->np <= 0 || v->np > MAX_PARAMS) return -1;
  for (int i = 0; i < v->np; i++) kiln_requires_grad(v->params[i]);
  kiln_sgd_opts so = {.lr = 0.01};
  KB_CHECK(kiln_optim_create_sgd(v->np, v->params, &so, &v->opt));
  KB_CHECK(kiln_mark_step()); /* parameter init is not part of the run */
  KB_CHECK(kiln_wait());
  v->pool = malloc((size_t)BATCH * MAXLEN * DMODEL * sizeof *v->pool);
  v->xh = malloc((size_t)BATCH * MAXLEN * DMODEL * sizeof *v->xh);
  if (!v->pool || !v->xh) return -1;
  uint64_t rs = 42;
  for (size_t i = 0; i < (size_t)BATCH * MAXLEN * DMODEL; i++)
    v->pool[i] = (float)((double)(splitmix(&rs) >> 11) * 0x1.0p-52 - 1.0);
  return 0;
}

/* The child: train one variant over the lengths and report; then a second
 * pass over the same lengths (every graph already made: the kernels' speed
 * without compiles, plans or first use of a new size's memory). */
static int run_variant(const char *variant, const int *len, int steps) {
  vl_run v;
  if (setup_run(&v, variant) != 0) {
    fprintf(stderr, "varlen: %s: cannot set up: %s\n", variant, kiln_last_error());
    return 1;
  }
  vl_result r = {0}, again = {0};
  long c0 = (long)kiln_counter_value("UncachedCompile"), p0 = (long)kiln_counter_value("DynamicPlan");
  long f0 = (long)kiln_counter_value("DynamicFamily");
  train_pass(&v, len, steps, 1, &r);
  r.compiles = (long)kiln_counter_value("UncachedCompile") - c0;
  r.plans = (long)kiln_counter_value("DynamicPlan") - p0;
  r.families = (long)kiln_counter_value("DynamicFamily") - f0;
  double rss = kb_peak_rss_mb(), loss = kiln_item_f64(v.loss_keep);
  train_pass(&v, len, steps, 1 + (uint64_t)steps, &again);
  long more = (long)kiln_counter_value("UncachedCompile") - c0 - r.compiles;
  more += (long)kiln_counter_value("DynamicPlan") - p0 - r.plans;
  printf("%s: %d steps, loss after them %.6g; %.0f tokens (%.0f computed) in %.3f s; %ld compiles, %ld planned; "
         "peak RSS %.0f MiB; again over the same lengths: %.3f s (%ld new graphs)\n",
         variant, steps, loss, r.tokens, r.computed, r.total_s, r.compiles, r.plans, rss, again.total_s, more);
  if (!(loss == loss) || more != 0) return 1;
  printf("KILN_VARLEN %.9g %.9g %.9g %.9g %.9g %ld %ld %ld %.9g %.9g\n", r.total_s, r.steady_s, r.tokens,
         r.steady_tokens, r.computed, r.compiles, r.plans, r.families, again.total_s, rss);
  kiln_release(v.loss_keep);
  kiln_optim_destroy(v.opt);
  kiln_encoder_layer_destroy(v.enc);
  free(v.pool);
  free(v.xh);
  kiln_shutdown();
  return 0;
}

/* Run one variant in a child with a fresh kernel cache; parse its report. */
static int spawn(const char *self, const char *variant, vl_result *r) {
  char dir[] = "/tmp/kiln-varlen-XXXXXX", cmd[4200];
  if (!mkdtemp(dir)) return -1;
  setenv("KILN_CACHE_DIR", dir, 1);
  setenv("KILN_BENCH_VARLEN_VARIANT", variant, 1);
  snprintf(cmd, sizeof cmd, "'%s'", self);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[512];
  int got = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "KILN_VARLEN %lf %lf %lf %lf %lf %ld %ld %ld %lf %lf", &r->total_s, &r->steady_s, &r->tokens,
               &r->steady_tokens, &r->computed, &r->compiles, &r->plans, &r->families, &r->again_s,
               &r->rss_mb) == 10)
      got = 1;
    else
      fputs(line, stdout);
  }
  int rc = pclose(f);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "varlen: could not remove %s\n", dir);
  return rc == 0 && got ? 0 : -1;
}

static void emit_rows(const vl_result *d, const vl_result *p, const vl_result *b, int distinct) {
  double tps = d->tokens / d->total_s, sps = d->steady_tokens / d->steady_s;
  char base[128];
  snprintf(base, sizeof base, "distinct lengths of the run (%d)", distinct);
  kb_emit(&(kb_result){"varlen_dynamic_compiles", (double)d->compiles, "compiles", base, distinct, "<= 2",
                       d->compiles <= 2});
  kb_emit(&(kb_result){"varlen_dynamic_tok_s_vs_pad", tps, "tok/s", "kiln padding to 256, compiles included",
                       p->tokens / p->total_s, ">= 1.6x padding", tps >= 1.6 * p->tokens / p->total_s});
  kb_emit(&(kb_result){"varlen_dynamic_tok_s_vs_buckets", tps, "tok/s",
                       "kiln 8 buckets (not warmed up), compiles included", b->tokens / b->total_s,
                       ">= 1.1x buckets", tps >= 1.1 * b->tokens / b->total_s});
  kb_emit(&(kb_result){"varlen_dynamic_steady_tok_s_vs_pad", sps, "tok/s", "kiln padding to 256, steady",
                       p->steady_tokens / p->steady_s, "- (no bar: steps that compiled left out)", 1});
  kb_emit(&(kb_result){"varlen_dynamic_steady_tok_s_vs_buckets", sps, "tok/s", "kiln 8 buckets, steady",
                       b->steady_tokens / b->steady_s, "- (no bar: steps that compiled left out)", 1});
  kb_emit(&(kb_result){"varlen_dynamic_again_tok_s_vs_buckets", d->tokens / d->again_s, "tok/s",
                       "kiln 8 buckets, second pass over the same lengths", b->tokens / b->again_s,
                       "- (no bar: every graph already made)", 1});
  kb_emit(&(kb_result){"varlen_dynamic_peak_rss_MiB", d->rss_mb, "MiB", "kiln padding to 256, peak RSS", p->rss_mb,
                       "- (no bar: VmHWM after the first pass)", 1});
  const char *tv = getenv("KILN_BENCH_TORCH_VARLEN");
  double ts = 0, ttps = 0;
  if (tv && sscanf(tv, "%lf %lf", &ts, &ttps) != 2) ts = ttps = 0;
  int threads = kb_threads();
  snprintf(base, sizeof base, ts > 0 ? "PyTorch eager %dt, same unpadded batches (same run)" : "PyTorch (missing)",
           threads);
  kb_emit(&(kb_result){"varlen_dynamic_time_s_vs_torch", d->total_s, "s", base, ts,
                       "<= 0.7x PyTorch's time (kiln's compile included)", ts > 0 && d->total_s <= 0.7 * ts});
  kb_emit(&(kb_result){"varlen_dynamic_steady_tok_s_vs_torch", sps, "tok/s", base, ttps,
                       "- (no bar: kiln's steps that compiled left out)", 1});
}

int main(void) {
  int steps = (int)(getenv("KILN_BENCH_VARLEN_STEPS") ? atoi(getenv("KILN_BENCH_VARLEN_STEPS")) : 40);
  if (steps <= 0 || steps > MAX_STEPS) steps = 40;
  static int len[MAX_STEPS];
  draw_lengths(len, steps);
  const char *variant = getenv("KILN_BENCH_VARLEN_VARIANT");
  if (variant) return run_variant(variant, len, steps);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  int seen[MAXLEN + 1] = {0}, distinct = 0;
  for (int i = 0; i < steps; i++) distinct += !seen[len[i]]++;
  vl_result r[3] = {{0}};
  const char *names[3] = {"dynamic", "pad", "bucket"};
  for (int v = 0; v < 3; v++)
    if (spawn(self, names[v], &r[v]) != 0) {
      fprintf(stderr, "varlen: the %s variant failed\n", names[v]);
      return 1;
    }
  if (r[0].families < 1 || r[1].compiles != 1) {
    fprintf(stderr, "varlen: expected a family for dynamic and one compile for pad\n");
    return 1;
  }
  for (int v = 0; v < 3; v++)
    printf("%-8s %7.3f s, %6.0f tok/s (steady %6.0f, again %6.0f tok/s), %4.2fx tokens computed, %ld compiles, "
           "%ld planned, peak RSS %.0f MiB\n",
           names[v], r[v].total_s, r[v].tokens / r[v].total_s, r[v].steady_tokens / r[v].steady_s,
           r[v].tokens / r[v].again_s, r[v].computed / r[v].tokens, r[v].compiles, r[v].plans, r[v].rss_mb);
  emit_rows(&r[0], &r[1], &r[2], distinct);
  return 0;
}
