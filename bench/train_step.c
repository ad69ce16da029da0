/* Training steps through the public API, side by side with PyTorch eager
 * (bench/torch_train.py, measured by bench/run.sh in the same run and passed
 * in the environment). One model per process, chosen by $KILN_BENCH_TRAIN,
 * so that the peak resident memory is the model's own:
 *
 *   mlp      MLP 784-1024-1024-10 (Linear, ReLU), x [128, 784], cross-entropy,
 *            plain SGD; also the achieved GFLOP/s beside the FMA peak
 *   encoder  Transformer encoder layer d_model 256, 4 heads, feed-forward
 *            1024, ReLU, post-norm, dropout 0.1 in training mode, x [16, 128,
 *            256], loss = mean of the output, plain SGD
 *   demo     the demo's default model kiln_model_create(KILN_MODEL_MLP, 10,
 *            seed) on a Fashion-MNIST shaped batch [128, 28, 28], cross-
 *            entropy, trained as `kiln train` (make demo) trains it by
 *            default: AdamW lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay
 *            0.01; also the peak resident memory
 *   demo_momentum  the same model with SGD momentum 0.9 (informational, no
 *            bar: the demo row of earlier versions of this benchmark)
 *
 * A step is: kiln_from_host of a fixed random batch, forward, loss,
 * kiln_backward, kiln_optim_step, kiln_zero_grad, kiln_mark_step, kiln_wait. Each step is
 * timed from its first call to the end of kiln_wait (torch eager on the CPU
 * is synchronous, so both sides time the same thing); the figure is the
 * median of 50 steps after 10 warm-up steps (the first compiles).
 *
 * Every model also reports its executions per training step (must be 1):
 * the ExecutionsPerStep metric and Execute / MarkStep over the timed steps.
 *
 * Baselines (environment, from bench/run.sh): KILN_BENCH_TORCH_TRAIN_MS
 * (torch's median step in ms), KILN_BENCH_TORCH_TRAIN_RSS_MB (its peak
 * resident memory), KILN_BENCH_TORCH_TRAIN_BLAS (the OpenBLAS core type it
 * ran with). Absent: the figures are emitted with the baseline marked
 * missing and the bar not passed. KILN_BENCH_JAX_TRAIN_MS (JAX's jitted
 * step, bench/jax_train.py) and KILN_BENCH_JAX_VERSION, when set, add a
 * row against JAX: informational, no bar.
 *
 * Mixed precision (KILN_BENCH_TRAIN_AMP=bf16, mlp and encoder): the steps
 * alternate between f32 and a bf16 autocast region around forward + loss
 * (interleaved A/B in one process, each graph compiled once), and two more
 * rows give the bf16 median against kiln's own f32 median (bar 0.6x) and
 * against PyTorch's CPU autocast(dtype=torch.bfloat16) step
 * (KILN_BENCH_TORCH_AMP_TRAIN_MS, bench/torch_train.py MODEL THREADS bf16;
 * bar 0.7x). KILN_BENCH_TRAIN_AMP=bf16-only runs every step in bf16 (no f32
 * rows; for KILN_BENCH_TRAIN_PROFILE, whose per-kernel table would otherwise
 * mix the two graphs).
 *
 * Cost of genericity (KILN_BENCH_TRAIN_DYNAMIC=ab, encoder; issue 15 §4):
 * this program runs itself KILN_BENCH_TRAIN_AB_ROUNDS times (default 3)
 * each way, interleaved (A B A B ...): KILN_BENCH_TRAIN_DYNAMIC=1, the
 * sequence dimension marked dynamic (the step runs the family's kernels),
 * and =0, the same step specialised; each child reports its median step and
 * whether its compile made a family (it must, and the specialised one must
 * not). The row is the median of the dynamic children's medians against the
 * specialised ones' (bar: <= 1.10x), with the dynamic step's GFLOP/s beside
 * the FMA peak. */
#include <stdint.h>
#include <unistd.h>

#include "bench_util.h"
#include "machine.h"
/* Internal, for the diagnostic per-kernel profile only (KILN_BENCH_TRAIN_PROFILE). */
#include "kernel_profile.h"

enum { WARMUP = 10, STEPS = 50, MAX_PARAMS = 32 };

/* Fixed pseudo-random host data (splitmix64): generated once. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static float rng_unit(uint64_t *s) { return (float)((double)(rng_next(s) >> 11) * 0x1.0p-53); }

typedef struct bench_model {
  const char *name;
  /* one of the three, the others NULL */
  kiln_linear *fc[3];
  kiln_encoder_layer *enc;
  kiln_model *demo;
  kiln_tensor params[MAX_PARAMS];
  int n_params;
  int64_t x_shape[3];
  int x_rank;
  int has_target; /* cross-entropy against labels, else mean */
  double momentum;
  int adamw; /* AdamW as `kiln train` defaults, else SGD (lr 0.01, momentum) */
  double macs_per_example; /* forward multiply-adds, for GFLOP/s */
  double bar;              /* kiln / torch step time must be <= bar; 0: no bar */
} bench_model;

/* The encoder's forward multiply-adds per example at sequence length T: per
 * token in_proj 3·D², scores + weighted sum 2·T·D, out_proj D², FF 2·D·FF. */
static double encoder_macs(int T) {
  return (double)T * (3.0 * 256 * 256 + 2.0 * T * 256 + 256.0 * 256 + 2.0 * 256 * 1024);
}

static kiln_tensor forward(const bench_model *m, kiln_tensor x, uint64_t seed) {
  if (m->fc[0]) {
    kiln_tensor h = kiln_relu(kiln_linear_forward(m->fc[0], x));
    h = kiln_relu(kiln_linear_forward(m->fc[1], h));
    return kiln_linear_forward(m->fc[2], h);
  }
  if (m->enc) {
    kiln_attn_opts o = {.training = 1, .seed = seed};
    return kiln_encoder_layer_forward(m->enc, x, &o);
  }
  return kiln_model_forward(m->demo, x, 1, seed);
}

static int setup(bench_model *m, const char *which) {
  memset(m, 0, sizeof *m);
  m->name = which;
  if (!strcmp(which, "mlp")) {
    kiln_linear_create(784, 1024, true, 1, &m->fc[0]);
    kiln_linear_create(1024, 1024, true, 2, &m->fc[1]);
    kiln_linear_create(1024, 10, true, 3, &m->fc[2]);
    for (int i = 0; i < 3; i++) {
      if (!m->fc[i]) return -1;
      m->params[m->n_params++] = m->fc[i]->weight;
      m->params[m->n_params++] = m->fc[i]->bias;
    }
    m->x_rank = 2, m->x_shape[0] = 128, m->x_shape[1] = 784;
    m->has_target = 1, m->momentum = 0, m->bar = 0.8;
    m->macs_per_example = 784.0 * 1024 + 1024.0 * 1024 + 1024.0 * 10;
  } else if (!strcmp(which, "encoder")) {
    kiln_encoder_layer_create(256, 4, 1024, 0.1, KILN_ACTIVATION_RELU, KILN_NORM_POST, 1e-5, 1, &m->enc);
    if (!m->enc) return -1;
    m->n_params = kiln_module_params(&m->enc->m, NULL, m->params, MAX_PARAMS);
    m->x_rank = 3, m->x_shape[0] = 16, m->x_shape[1] = 128, m->x_shape[2] = 256;
    m->has_target = 0, m->momentum = 0, m->bar = 0.6;
    m->macs_per_example = encoder_macs(128);
  } else if (!strcmp(which, "demo") || !strcmp(which, "demo_momentum") || !strcmp(which, "cnn") ||
             !strcmp(which, "transformer")) {
    kiln_model_kind kind = !strcmp(which, "cnn")           ? KILN_MODEL_CNN
                           : !strcmp(which, "transformer") ? KILN_MODEL_TRANSFORMER
                                                           : KILN_MODEL_MLP;
    kiln_model_create(kind, 10, 1, &m->demo);
    if (!m->demo) return -1;
    m->n_params = kiln_model_params(m->demo, NULL, m->params, MAX_PARAMS);
    m->x_rank = 3, m->x_shape[0] = 128, m->x_shape[1] = 28, m->x_shape[2] = 28;
    m->has_target = 1, m->momentum = 0.9, m->bar = 0.7;
    if (!strcmp(which, "demo")) m->adamw = 1;
    if (!strcmp(which, "demo_momentum")) m->bar = 0;
    m->macs_per_example = kiln_model_forward_flops(m->demo);
  } else {
    fprintf(stderr, "train_step: KILN_BENCH_TRAIN must be mlp, encoder, demo, demo_momentum, cnn or transformer, not '%s'\n",
            which);
    return -1;
  }
  if (m->n_params <= 0 || m->n_params > MAX_PARAMS) return -1;
  for (int i = 0; i < m->n_params; i++) kiln_requires_grad(m->params[i]);
  return 0;
}

static void free_model(bench_model *m) {
  for (int i = 0; i < 3; i++) kiln_linear_destroy(m->fc[i]);
  kiln_encoder_layer_destroy(m->enc);
  kiln_model_destroy(m->demo);
}

/* KILN_BENCH_TRAIN_PROFILE=1: the per-kernel profile (kernel_profile.h). */

static double env_num(const char *name) {
  const char *s = getenv(name);
  return s && *s ? atof(s) : 0;
}

/* One child of the A/B comparison: this program with KILN_BENCH_TRAIN_DYNAMIC
 * set to mode; returns its median step (ms) and whether it made a family. */
static int ab_child(const char *self, const char *mode, double *ms, long *families) {
  setenv("KILN_BENCH_TRAIN_DYNAMIC", mode, 1);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "'%s'", self);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[512];
  int got = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "KILN_TRAIN_AB %lf %ld", ms, families) == 2) got = 1;
  return pclose(f) == 0 && got ? 0 : -1;
}

/* KILN_BENCH_TRAIN_DYNAMIC=ab: the encoder step with the family's kernels
 * against the same step specialised, interleaved child processes. */
static int ab_main(const char *which) {
  if (strcmp(which, "encoder")) {
    fprintf(stderr, "train_step: KILN_BENCH_TRAIN_DYNAMIC=ab is for the encoder only\n");
    return 1;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  int rounds = (int)env_num("KILN_BENCH_TRAIN_AB_ROUNDS");
  if (rounds <= 0 || rounds > 16) rounds = 3;
  double dyn[16], spec[16];
  for (int r = 0; r < rounds; r++) {
    long fam_d = 0, fam_s = 0;
    if (ab_child(self, "1", &dyn[r], &fam_d) || ab_child(self, "0", &spec[r], &fam_s)) {
      fprintf(stderr, "train_step: an A/B child failed\n");
      return 1;
    }
    printf("round %d: dynamic %.3f ms (families %ld), specialised %.3f ms (families %ld)\n", r + 1, dyn[r], fam_d,
           spec[r], fam_s);
    if (fam_d < 1 || fam_s != 0) {
      fprintf(stderr, "train_step: the dynamic child must compile a family and the specialised one none\n");
      return 1;
    }
  }
  double md = kb_median(dyn, rounds), ms = kb_median(spec, rounds);
  int threads = kb_threads();
  char base[128], cb[96];
  snprintf(base, sizeof base, "kiln specialised step %dt, interleaved A/B x%d (same run)", threads, rounds);
  kb_emit(&(kb_result){"train_encoder_dynamic_step_ms", md, "ms", base, ms, "<= 1.10x specialised",
                       md <= 1.10 * ms});
  double peak = kb_fma_peak_gflops(threads, 0.3), gf = 6.0 * encoder_macs(128) * 16 / (md * 1e-3) / 1e9;
  snprintf(cb, sizeof cb, "FP32 FMA peak %dt, %s (same run)", threads, kb_fma_isa());
  kb_emit(&(kb_result){"train_encoder_dynamic_GFLOPs", gf, "GFLOP/s", cb, peak, "- (6 x MACs x batch / step)", 1});
  return 0;
}

int main(void) {
  const char *which = getenv("KILN_BENCH_TRAIN");
  if (!which) which = "mlp";
  const char *dyn_env = getenv("KILN_BENCH_TRAIN_DYNAMIC");
  if (dyn_env && !strcmp(dyn_env, "ab")) return ab_main(which);
  KB_CHECK(kiln_init(NULL));
  int threads = kb_threads();
  bench_model m;
  if (setup(&m, which) != 0) {
    fprintf(stderr, "train_step: cannot build model '%s': %s\n", which, kiln_last_error());
    return 1;
  }
  /* KILN_BENCH_TRAIN_MOMENTUM overrides the momentum (diagnostics only). */
  if (getenv("KILN_BENCH_TRAIN_MOMENTUM")) m.momentum = env_num("KILN_BENCH_TRAIN_MOMENTUM");
  kiln_sgd_opts so = {.lr = 0.01, .momentum = m.momentum};
  kiln_adamw_opts ao = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  if (m.adamw)
    kiln_optim_create_adamw(m.n_params, m.params, &ao, &opt);
  else
    kiln_optim_create_sgd(m.n_params, m.params, &so, &opt);
  if (!opt) {
    fprintf(stderr, "train_step: %s\n", kiln_last_error());
    return 1;
  }
  if (getenv("KILN_BENCH_TRAIN_PROFILE")) prof_install();
  KB_CHECK(kiln_mark_step()); /* parameter init is not part of the step graph */
  KB_CHECK(kiln_wait());

  /* The batch: generated once, copied in every step (as torch uses a tensor
   * per step). */
  int64_t nx = 1;
  for (int i = 0; i < m.x_rank; i++) nx *= m.x_shape[i];
  float *xh = malloc((size_t)nx * sizeof *xh);
  int64_t yh[128];
  if (!xh) return 1;
  uint64_t rs = 42;
  for (int64_t i = 0; i < nx; i++) xh[i] = m.enc ? 2.0f * rng_unit(&rs) - 1.0f : rng_unit(&rs);
  for (int i = 0; i < 128; i++) yh[i] = (int64_t)(rng_next(&rs) % 10);
  int64_t y_shape[1] = {m.x_shape[0]};

  static double step_s[STEPS], amp_s[STEPS];
  const char *amp_env = getenv("KILN_BENCH_TRAIN_AMP");
  int dyn = dyn_env && !strcmp(dyn_env, "1");
  long families = 0; /* DynamicFamily over the warm-up (the A/B children report it) */
  int amp_only = amp_env && !strcmp(amp_env, "bf16-only");
  int amp = amp_env && (!strcmp(amp_env, "bf16") || amp_only);
  int n32 = 0, n16 = 0;
  double loss_first = 0, loss_last = 0;
  kiln_tensor loss_keep = {0, 0};
  int64_t exec0 = 0, mark0 = 0;
  for (int s = 0; s < WARMUP + STEPS; s++) {
    if (s == WARMUP) {
      KB_CHECK(kiln_wait());
      loss_first = kiln_item_f64(loss_keep);
      families = (long)kiln_counter_value("DynamicFamily");
      kiln_metrics_clear(); /* counters and metrics over the timed steps only */
      prof_on = getenv("KILN_BENCH_TRAIN_PROFILE") != NULL;
      exec0 = kiln_counter_value("Execute");
      mark0 = kiln_counter_value("MarkStep");
    }
    double t0 = kb_now_s();
    kiln_tensor x = kiln_from_host(xh, KILN_F32, m.x_rank, m.x_shape);
    /* KILN_BENCH_TRAIN_DYNAMIC=1: the batch's dimension 1 (the encoder's
     * sequence length) marked dynamic: the step runs the family's kernels,
     * which take that size at run time (docs/dynamic-shapes.md) */
    if (dyn && m.x_rank > 1) kiln_dynamic(x, 1);
    int on = amp && (amp_only || (s & 1));
    if (on) kiln_autocast_begin(KILN_BF16);
    kiln_tensor out = forward(&m, x, (uint64_t)s + 1);
    kiln_tensor loss = m.has_target ? kiln_cross_entropy(out, kiln_from_host(yh, KILN_I64, 1, y_shape), -100, 0.0)
                                    : kiln_mean(out, 0, NULL, 0);
    if (on) kiln_autocast_end();
    KB_CHECK(kiln_backward(loss));
    KB_CHECK(kiln_optim_step(opt));
    /* torch's zero_grad(set_to_none=True): the gradients need not be step
     * outputs, and the next backward starts from zero. */
    for (int i = 0; i < m.n_params; i++) kiln_zero_grad(m.params[i]);
    /* The loss is a step output every step (same graph every step). */
    kiln_release(loss_keep);
    loss_keep = kiln_keep(loss);
    KB_CHECK(kiln_mark_step());
    KB_CHECK(kiln_wait());
    if (s >= WARMUP && !amp) step_s[s - WARMUP] = kb_now_s() - t0;
    if (s >= WARMUP && amp) *(on ? &amp_s[n16++] : &step_s[n32++]) = kb_now_s() - t0;
  }
  int64_t execs = kiln_counter_value("Execute") - exec0, marks = kiln_counter_value("MarkStep") - mark0;
  kiln_metric_stats eps = {0}, ex = {0};
  kiln_metric_data("ExecutionsPerStep", &eps);
  kiln_metric_data("ExecuteTime", &ex);
  loss_last = kiln_item_f64(loss_keep);
  if (getenv("KILN_BENCH_TRAIN_REPORT")) fputs(kiln_metrics_report(), stderr);
  if (prof_on) prof_print(STEPS, "step", 40);
  double rss = kb_peak_rss_mb();

  /* The result must be a training run: finite losses, and with labels the
   * loss of the fixed batch went down. */
  printf("%s: loss after warm-up %.6g, after %d more steps %.6g\n", which, loss_first, STEPS, loss_last);
  if (!(loss_first == loss_first && loss_last == loss_last) || (m.has_target && !(loss_last < loss_first))) {
    fprintf(stderr, "train_step %s: bad losses: first %g, last %g\n", which, loss_first, loss_last);
    return 1;
  }
  if (amp_only) { /* no f32 steps to compare with: the median alone */
    printf("%s bf16-only: median step %.3f ms\n", which, kb_median(amp_s, n16) * 1e3);
    return 0;
  }
  double med = kb_median(step_s, amp ? n32 : STEPS) * 1e3;
  if (dyn_env) printf("KILN_TRAIN_AB %.6f %ld\n", med, families);
  double torch_ms = env_num("KILN_BENCH_TORCH_TRAIN_MS"), torch_rss = env_num("KILN_BENCH_TORCH_TRAIN_RSS_MB");
  const char *blas = getenv("KILN_BENCH_TORCH_TRAIN_BLAS");
  char base[160], name[64], target[64];
  if (torch_ms > 0)
    snprintf(base, sizeof base, "PyTorch eager %dt, %s (same run)", threads, blas ? blas : "?");
  else
    snprintf(base, sizeof base, "PyTorch eager (missing: torch not importable)");
  printf("%s: %d params, loss %.5g -> %.5g over %d steps; ExecuteTime p50 %.3f ms of step %.3f ms; peak RSS %.1f "
         "MiB; load %s",
         which, m.n_params, loss_first, loss_last, STEPS, ex.p50 / 1e6, med, rss, "");
  {
    FILE *f = fopen("/proc/loadavg", "r");
    char l[64] = "?";
    if (f) {
      if (!fgets(l, sizeof l, f)) l[0] = 0;
      fclose(f);
    }
    printf("%s", l);
  }

  /* the mixed-precision run's f32 steps are its interleaved baseline, not the f32 rows (their own
   * run, beside PyTorch): only its bf16 rows are emitted */
  if (amp) goto amp_rows;
  snprintf(name, sizeof name, "train_%s_step_ms", which);
  if (m.bar > 0)
    snprintf(target, sizeof target, "<= %.1fx PyTorch", m.bar);
  else
    snprintf(target, sizeof target, "- (no bar)");
  kb_emit(&(kb_result){name, med, "ms", base, torch_ms, target,
                       m.bar > 0 ? torch_ms > 0 && med <= m.bar * torch_ms : 1});

  double jax_ms = env_num("KILN_BENCH_JAX_TRAIN_MS");
  if (jax_ms > 0) {
    const char *jv = getenv("KILN_BENCH_JAX_VERSION");
    char jb[96];
    snprintf(jb, sizeof jb, "JAX %s jit, CPU (same run)", jv && *jv ? jv : "?");
    snprintf(name, sizeof name, "train_%s_step_ms_vs_jax", which);
    kb_emit(&(kb_result){name, med, "ms", jb, jax_ms, "- (no bar)", 1});
  }

  if (!strcmp(which, "mlp") || !strcmp(which, "encoder")) { /* the step's FLOPs against the FMA peak */
    double peak = kb_fma_peak_gflops(threads, 0.3);
    double gf = 6.0 * m.macs_per_example * (double)m.x_shape[0] / (med * 1e-3) / 1e9;
    char cb[96];
    snprintf(cb, sizeof cb, "FP32 FMA peak %dt, %s (same run)", threads, kb_fma_isa());
    snprintf(name, sizeof name, "train_%s_GFLOPs", which);
    kb_emit(&(kb_result){name, gf, "GFLOP/s", cb, peak, "- (6 x MACs x batch / step)", 1});
    if (torch_ms > 0) {
      double tg = 6.0 * m.macs_per_example * (double)m.x_shape[0] / (torch_ms * 1e-3) / 1e9;
      printf("  PyTorch achieves %.1f GFLOP/s on the same step (%.0f%% of the FMA peak)\n", tg, 100 * tg / peak);
    }
  }
  if (!strcmp(which, "demo")) {
    snprintf(name, sizeof name, "train_%s_peak_rss_MiB", which);
    kb_emit(&(kb_result){name, rss, "MiB",
                         torch_rss > 0 ? "PyTorch eager peak RSS, same model (same run)" : "PyTorch (missing)",
                         torch_rss, "- (VmHWM)", 1});
  }
amp_rows:
  if (amp) {
    double med16 = kb_median(amp_s, n16) * 1e3, tamp = env_num("KILN_BENCH_TORCH_AMP_TRAIN_MS");
    char ab[96];
    snprintf(ab, sizeof ab, "kiln f32 step, %dt (same run, interleaved)", threads);
    snprintf(name, sizeof name, "train_%s_bf16_step_ms", which);
    /* The bar is for CPUs with avx512_bf16 (issue 13 §4); without it the bf16
     * GEMMs widen their operands to f32 for the library's sgemm, and the row
     * says what that costs with no bar (docs/performance.md). */
    if (kb_cpu_flag("avx512_bf16"))
      kb_emit(&(kb_result){name, med16, "ms", ab, med, "<= 0.6x kiln f32", med16 <= 0.6 * med});
    else
      kb_emit(&(kb_result){name, med16, "ms", ab, med, "- (no avx512_bf16 on this CPU; bar where it has it)", 1});
    snprintf(ab, sizeof ab, tamp > 0 ? "PyTorch CPU autocast bf16 %dt (same run)" : "PyTorch autocast (missing)",
             threads);
    snprintf(name, sizeof name, "train_%s_bf16_step_ms_vs_torch", which);
    kb_emit(&(kb_result){name, med16, "ms", ab, tamp, "<= 0.7x PyTorch autocast", tamp > 0 && med16 <= 0.7 * tamp});
  }
  /* Executions per step: the metric (every sample) and the counters. */
  double per = marks > 0 ? (double)execs / (double)marks : 0;
  int one = eps.count > 0 && eps.min == 1 && eps.max == 1 && per == 1.0;
  printf("  ExecutionsPerStep: %lld samples, min %g max %g; Execute %lld / MarkStep %lld\n", (long long)eps.count,
         eps.min, eps.max, (long long)execs, (long long)marks);
  snprintf(name, sizeof name, "train_%s_execs_per_step", which);
  if (!amp) kb_emit(&(kb_result){name, per, "execs", "required", 1.0, "== 1 (metric and counters)", one});

  kiln_release(loss_keep);
  kiln_optim_destroy(opt);
  free_model(&m);
  free(xh);
  kiln_shutdown();
  return 0;
}
