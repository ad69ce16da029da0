/* `kiln train`: train an image classifier on Fashion-MNIST and show what a
 * user expects from a training run — a live progress line, periodic
 * evaluation, the final test accuracy, a checkpoint, TensorBoard curves and
 * a short summary of what kiln did (compiles, cached steps, executions per
 * step, transfers).
 *
 * One training step = forward + backward + optimizer update, traced lazily
 * and compiled into one graph, executed once per step.
 *
 * Under `mpirun -np N` (docs/distributed.md) the same flags train data
 * parallel: --batch is the global batch, each rank reads its shard of it
 * (batch / N examples), the parameters start as rank 0's, the gradients
 * (and the logged loss) are averaged over the ranks every step, and rank 0
 * alone prints, evaluates and writes the checkpoint and the curves. */
#include "tools/train.h"

#include "tools/cli.h"

#include <kiln/kiln.h>
#include <kiln/summary.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PARAMS 64

typedef struct train_opts {
  const char *model, *data, *logdir, *checkpoint, *optim;
  kiln_dtype amp; /* KILN_F32: off; KILN_BF16/KILN_F16: forward and loss in an autocast region */
  int epochs, batch, eval_every, quiet;
  int rows_min; /* --rows MIN: each training batch keeps its first T image rows, T drawn from [MIN, 28] (0: all) */
  int64_t max_steps;
  double lr, weight_decay;
  uint64_t seed;
  int rank, world; /* this process in the world (0 and 1 alone); rank 0 prints and writes */
} train_opts;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: kiln train [--model mlp|cnn|transformer] [--epochs N] [--batch B] [--lr LR]\n"
          "                  [--optim adamw|sgd] [--weight-decay WD] [--seed S] [--max-steps N]\n"
          "                  [--eval-every STEPS] [--data DIR] [--logdir DIR] [--checkpoint PATH]\n"
          "                  [--amp off|bf16|f16] [--rows MIN] [--quiet]\n"
          "Trains on Fashion-MNIST (Debian package dataset-fashion-mnist, or --data DIR with the IDX files).\n"
          "Defaults: mlp 8 epochs, cnn 3 epochs, transformer 6 epochs; batch 128; AdamW lr 1e-3 with warm-up\n"
          "and cosine decay; checkpoint kiln-<model>.safetensors. --amp bf16: mixed precision (f32 parameters,\n"
          "matmul inputs and activations in bf16; see docs/training.md). --rows MIN (transformer): each training\n"
          "batch keeps its first T image rows, T from MIN to 28, a sequence of its own length (dynamic shapes:\n"
          "docs/dynamic-shapes.md).\n");
}

/* One option's value into o; 0, or 2 (a usage error, already printed). */
static int parse_value(train_opts *o, const char *a, const char *v) {
  long long n = 0;
  if (!strcmp(a, "--model")) o->model = v;
  else if (!strcmp(a, "--optim")) o->optim = v;
  else if (!strcmp(a, "--data")) o->data = v;
  else if (!strcmp(a, "--logdir")) o->logdir = v;
  else if (!strcmp(a, "--checkpoint")) o->checkpoint = v;
  else if (!strcmp(a, "--amp")) {
    if (!strcmp(v, "off")) o->amp = KILN_F32;
    else if (!strcmp(v, "bf16")) o->amp = KILN_BF16;
    else if (!strcmp(v, "f16")) o->amp = KILN_F16;
    else {
      fprintf(stderr, "kiln train: --amp: expected off, bf16 or f16, got '%s'\n", v);
      return 2;
    }
  }
  else if (!strcmp(a, "--epochs") || !strcmp(a, "--eval-every")) {
    if (kiln_cli_parse_int("train", a, v, 1, INT_MAX, &n)) return 2;
    *(!strcmp(a, "--epochs") ? &o->epochs : &o->eval_every) = (int)n;
  } else if (!strcmp(a, "--max-steps")) {
    if (kiln_cli_parse_int("train", a, v, 1, LLONG_MAX, &n)) return 2;
    o->max_steps = n;
  } else if (!strcmp(a, "--rows")) {
    if (kiln_cli_parse_int("train", a, v, 1, 28, &n)) return 2;
    o->rows_min = (int)n;
  } else if (!strcmp(a, "--batch")) {
    if (kiln_cli_parse_int("train", a, v, 1, 65536, &n)) return 2;
    o->batch = (int)n;
  } else if (!strcmp(a, "--lr")) {
    if (kiln_cli_parse_number("train", a, v, 0, 1, &o->lr)) return 2;
  } else if (!strcmp(a, "--weight-decay")) {
    if (kiln_cli_parse_number("train", a, v, 0, 0, &o->weight_decay)) return 2;
  } else if (!strcmp(a, "--seed")) {
    if (kiln_cli_parse_int("train", a, v, 0, LLONG_MAX, &n)) return 2;
    o->seed = (uint64_t)n;
  } else {
    fprintf(stderr, "kiln train: unknown option '%s'\n\n", a);
    usage(stderr);
    return 2;
  }
  return 0;
}

/* The options that take a value (parse_value's). */
static int takes_value(const char *a) {
  static const char *const names[] = {"--model", "--optim", "--data", "--logdir", "--checkpoint", "--amp",
                                      "--epochs", "--eval-every", "--max-steps", "--rows", "--batch", "--lr",
                                      "--weight-decay", "--seed"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(a, names[i])) return 1;
  return 0;
}

/* 0: run; 1: --help was printed; 2: a usage error (printed). */
static int parse_opts(int argc, char **argv, train_opts *o) {
  *o = (train_opts){.model = "mlp", .optim = "adamw", .batch = 128, .lr = 1e-3, .weight_decay = 0.01, .seed = 1,
                     .amp = KILN_F32};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--quiet")) {
      o->quiet = 1;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 1;
    } else if (a[0] != '-' || a[1] != '-') {
      fprintf(stderr, "kiln train: unexpected argument '%s' (options start with --)\n\n", a);
      usage(stderr);
      return 2;
    } else if (!takes_value(a)) {
      fprintf(stderr, "kiln train: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    } else if (i + 1 >= argc) {
      fprintf(stderr, "kiln train: %s needs a value\n", a);
      return 2;
    } else if (parse_value(o, a, argv[++i])) {
      return 2;
    }
  }
  int kind = kiln_model_kind_parse(o->model);
  if (kind < 0) {
    fprintf(stderr, "kiln train: --model: expected mlp, cnn or transformer, got '%s'\n", o->model);
    return 2;
  }
  if (strcmp(o->optim, "adamw") && strcmp(o->optim, "sgd")) {
    fprintf(stderr, "kiln train: --optim: expected adamw or sgd, got '%s'\n", o->optim);
    return 2;
  }
  if (!o->epochs) o->epochs = kind == KILN_MODEL_CNN ? 3 : kind == KILN_MODEL_TRANSFORMER ? 6 : 8;
  if (o->rows_min && kind != KILN_MODEL_TRANSFORMER) {
    fprintf(stderr, "kiln train: --rows: only the transformer reads images as sequences of rows, not --model %s\n",
            o->model);
    return 2;
  }
  return 0;
}

/* Every output is checked before the first step: a run must not train for
 * an hour and then find that it cannot save its result. 0, or -1 (printed). */
static int check_outputs(const train_opts *o, char *ckpt, size_t cap) {
  snprintf(ckpt, cap, "%s", o->checkpoint ? o->checkpoint : "");
  if (!o->checkpoint) snprintf(ckpt, cap, "kiln-%s.safetensors", o->model);
  if (o->rank != 0) return 0; /* rank 0 writes every output */
  if (kiln_cli_check_output_file("train", "--checkpoint", ckpt)) return -1;
  if (o->logdir && kiln_cli_check_output_dir("train", "--logdir", o->logdir)) return -1;
  return 0;
}

/* The loss of a batch whose padding rows (mask 0) are ignored. */
static kiln_tensor batch_loss(kiln_tensor logits, const kiln_batch *b) {
  kiln_tensor ignore = kiln_full(KILN_I64, 1, (int64_t[]){kiln_dim(b->y, 0)}, -100);
  kiln_tensor y = kiln_where(kiln_gt_c(b->mask, 0.5), b->y, ignore);
  return kiln_cross_entropy(logits, y, -100, 0.0);
}

/* Test-set accuracy and loss, accumulated on the device (no graph that grows
 * with the number of batches, one small read at the end). */
static int evaluate(kiln_model *m, kiln_batcher *test, kiln_dtype amp, double *acc, double *loss) {
  kiln_tensor correct = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_tensor total_loss = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  int64_t n = 0;
  kiln_batch b;
  kiln_no_grad_begin();
  while (kiln_batcher_next(test, &b) == 1) {
    if (amp != KILN_F32) kiln_autocast_begin(amp);
    kiln_tensor logits = kiln_model_forward(m, b.x, 0, 0);
    if (amp != KILN_F32) kiln_autocast_end();
    kiln_tensor hit = kiln_cast(kiln_eq(kiln_argmax(logits, 1, 0), b.y), KILN_F32);
    kiln_assign(correct, kiln_add(correct, kiln_sum(kiln_mul(hit, b.mask), 0, NULL, 0)));
    kiln_assign(total_loss, kiln_add(total_loss, kiln_mul_c(batch_loss(logits, &b), (double)b.n_valid)));
    n += b.n_valid;
    if (kiln_mark_step() != KILN_OK) break;
  }
  kiln_no_grad_end();
  *acc = n ? kiln_item_f64(correct) / (double)n : 0;
  *loss = n ? kiln_item_f64(total_loss) / (double)n : 0;
  kiln_release(correct);
  kiln_release(total_loss);
  return kiln_last_status() == KILN_OK ? 0 : -1;
}

static int save_checkpoint(const char *path, kiln_model *m, kiln_optim *opt, int64_t step) {
  const char *names[4 * MAX_PARAMS];
  kiln_tensor ts[4 * MAX_PARAMS];
  char owned[4 * MAX_PARAMS][96];
  int n = kiln_model_state(m, names, ts, MAX_PARAMS);
  if (n > MAX_PARAMS) n = MAX_PARAMS;
  for (int i = 0; i < n; i++) {
    snprintf(owned[i], sizeof owned[i], "model.%s", names[i]);
    names[i] = owned[i];
  }
  /* optimizer state: per parameter, its state tensors */
  int np = kiln_model_params(m, NULL, NULL, 0);
  for (int p = 0; p < np && n < 4 * MAX_PARAMS - 4; p++) {
    const char *sn[4];
    kiln_tensor st[4];
    int k = kiln_optim_state(opt, p, sn, st, 4);
    for (int j = 0; j < k && j < 4; j++) {
      snprintf(owned[n], sizeof owned[n], "optim.%d.%s", p, sn[j]);
      names[n] = owned[n];
      ts[n++] = st[j];
    }
  }
  /* the step, and each parameter's own step count (torch's state["step"];
   * kiln_optim_set_param_step_count puts it back) */
  char meta_owned[MAX_PARAMS + 1][2][32];
  const char *meta[2 * (MAX_PARAMS + 1) + 3] = {"format", "kiln"};
  int nm = 2;
  for (int p = -1; p < np && p < MAX_PARAMS; p++) {
    char *k = meta_owned[p + 1][0], *v = meta_owned[p + 1][1];
    snprintf(k, 32, p < 0 ? "step" : "optim.%d.step", p);
    snprintf(v, 32, "%lld", (long long)(p < 0 ? step : kiln_optim_param_step_count(opt, p)));
    meta[nm++] = k;
    meta[nm++] = v;
  }
  meta[nm] = NULL;
  return kiln_save_safetensors(path, n, names, ts, meta) == KILN_OK ? 0 : -1;
}

static void progress(const train_opts *o, int64_t step, int64_t total, int epoch, double loss, double ex_s,
                     double eta) {
  if (o->quiet) return;
  int tty = isatty(STDOUT_FILENO);
  printf("%sstep %6lld/%lld  epoch %d/%d  loss %.4f  %7.0f examples/s  ETA %d:%02d%s", tty ? "\r" : "",
         (long long)step, (long long)total, epoch + 1, o->epochs, loss, ex_s, (int)eta / 60, (int)eta % 60,
         tty ? "   " : "\n");
  fflush(stdout);
}

/* What a run holds; train_teardown releases whatever was made. */
typedef struct train_ctx {
  kiln_dataset *train, *test;
  kiln_loader *loader;
  kiln_batcher *tb;
  kiln_model *m;
  kiln_optim *opt;
  kiln_summary_writer *sw;
  kiln_tensor params[MAX_PARAMS], loss_kept;
  int np;
} train_ctx;

/* Data, loader, model, optimizer and summary writer; 0, or 1 after printing
 * the error. */
static int train_setup(const train_opts *o, train_ctx *c) {
  if (kiln_dataset_create_fashion_mnist(o->data, true, &c->train) == KILN_OK)
    kiln_dataset_create_fashion_mnist(o->data, false, &c->test);
  if (!c->train || !c->test) {
    fprintf(stderr, "kiln train: cannot load Fashion-MNIST%s%s: %s\n", o->data ? " from --data " : "",
            o->data ? o->data : "", kiln_cli_error_message());
    return 1;
  }
  /* each rank reads its shard: every world-th example of the same per-epoch permutation */
  kiln_batch_options bo = {.batch_size = o->batch / o->world, .shuffle = true, .seed = o->seed, .drop_last = false,
                           .prefetch = 4, .shard_count = o->world, .shard_rank = o->rank};
  kiln_loader_create(c->train, &bo, &c->loader);
  kiln_batch_options to = {.batch_size = 1000, .shuffle = false};
  kiln_batcher_create(c->test, &to, &c->tb);
  kiln_model_create((kiln_model_kind)kiln_model_kind_parse(o->model), 10, o->seed, &c->m);
  if (!c->loader || !c->tb || !c->m) {
    fprintf(stderr, "kiln train: %s\n", kiln_cli_error_message());
    return 1;
  }
  c->np = kiln_model_params(c->m, NULL, c->params, MAX_PARAMS);
  for (int i = 0; i < c->np; i++) kiln_requires_grad(c->params[i]);
  kiln_sgd_opts sgd = {.lr = o->lr, .momentum = 0.9, .weight_decay = o->weight_decay};
  kiln_adamw_opts adamw = {.lr = o->lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = o->weight_decay};
  if (!strcmp(o->optim, "sgd"))
    kiln_optim_create_sgd(c->np, c->params, &sgd, &c->opt);
  else
    kiln_optim_create_adamw(c->np, c->params, &adamw, &c->opt);
  if (!c->opt || kiln_mark_step() != KILN_OK || /* materialize the initial parameters */
      (o->world > 1 && (kiln_ddp_broadcast_params(c->np, c->params) != KILN_OK || kiln_mark_step() != KILN_OK))) {
    fprintf(stderr, "kiln train: %s\n", kiln_cli_error_message());
    return 1;
  }
  if (o->rank == 0 && o->logdir && kiln_summary_writer_create(o->logdir, &c->sw) != KILN_OK) { /* before the first step */
    fprintf(stderr, "kiln train: --logdir: %s\n", kiln_cli_error_message());
    return 1;
  }
  c->loss_kept = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  return 0;
}

static void train_teardown(train_ctx *c) {
  kiln_summary_writer_destroy(c->sw);
  kiln_release(c->loss_kept);
  kiln_optim_destroy(c->opt);
  kiln_model_destroy(c->m);
  kiln_loader_destroy(c->loader);
  kiln_batcher_destroy(c->tb);
  kiln_dataset_destroy(c->train);
  kiln_dataset_destroy(c->test);
  kiln_shutdown();
}

/* --rows: the batch's images cut to their first T rows, T drawn from
 * [rows_min, 28] by the step: a sequence length of its own every step. The
 * rows are cut on the host (the batch is already computed: a copy, no graph
 * cut), so the length is a size of the step's input, which dynamic shapes
 * make a plan, not a compile. */
static kiln_tensor cut_rows(const train_opts *o, kiln_tensor x, int64_t step) {
  int64_t sh[3];
  if (!o->rows_min || kiln_shape(x, sh) != 3) return x;
  uint64_t h = ((uint64_t)step + 1) * 0x9E3779B97F4A7C15ULL ^ o->seed;
  int64_t T = o->rows_min + (int64_t)((h >> 33) % (uint64_t)(29 - o->rows_min));
  if (T >= sh[1]) return x;
  size_t n = (size_t)(sh[0] * sh[1] * sh[2]);
  float *full = malloc(n * sizeof *full), *cut = malloc((size_t)(sh[0] * T * sh[2]) * sizeof *cut);
  kiln_tensor r = x;
  if (full && cut && kiln_to_host(x, full, n * sizeof *full) == KILN_OK) {
    for (int64_t i = 0; i < sh[0]; i++) memcpy(cut + i * T * sh[2], full + i * sh[1] * sh[2], sizeof *cut * (size_t)(T * sh[2]));
    const int64_t cs[3] = {sh[0], T, sh[2]};
    r = kiln_from_host(cut, KILN_F32, 3, cs);
  }
  free(full);
  free(cut);
  return r;
}

/* One step: forward (in the autocast region when --amp), backward, update. */
static int train_step(const train_opts *o, train_ctx *c, const kiln_batch *b, int64_t step, double lr) {
  kiln_optim_set_lr(c->opt, lr);
  if (o->amp != KILN_F32) kiln_autocast_begin(o->amp); /* forward and loss; backward follows the graph */
  kiln_tensor x = cut_rows(o, b->x, step);
  kiln_tensor loss = batch_loss(kiln_model_forward(c->m, x, 1, o->seed * 1000003u + (uint64_t)step), b);
  if (o->amp != KILN_F32) kiln_autocast_end();
  /* the logged loss: the global batch's, as one process would log it */
  kiln_assign(c->loss_kept, o->world > 1 ? kiln_all_reduce(loss, KILN_REDUCE_MEAN) : loss);
  kiln_backward(loss);
  if (o->world > 1) kiln_ddp_all_reduce_grads(c->np, c->params, 0); /* gradients: their mean over the ranks */
  kiln_optim_step(c->opt);
  for (int i = 0; i < c->np; i++) kiln_zero_grad(c->params[i]); /* gradients need not be step outputs */
  return kiln_mark_step() != KILN_OK;
}

typedef struct train_progress {
  double t_last, acc, eval_loss;
  int64_t last_step;
  int epoch;
  int diverged; /* the loss became NaN or infinite: no checkpoint, status 1 */
} train_progress;

/* The progress line and the periodic evaluation after step `step`; 1 when
 * the evaluation failed. */
static int after_step(const train_opts *o, train_ctx *c, train_progress *p, int64_t step, int64_t total,
                      int64_t eval_every, double lr) {
  double l = 0;
  if (step % 50 == 0 || step == total) {
    /* every rank reads the same (averaged) loss: all stop together */
    l = kiln_item_f64(c->loss_kept);
    if (!isfinite(l) && kiln_last_status() == KILN_OK) {
      if (o->rank == 0)
        fprintf(stderr, "%skiln train: the training loss is %g at step %lld: training diverged (try a smaller --lr)\n",
                !o->quiet && isatty(STDOUT_FILENO) ? "\n" : "", l, (long long)step);
      p->diverged = 1;
      return 1;
    }
  }
  if (o->rank != 0) return 0; /* rank 0 prints, evaluates and logs */
  if (step % 50 == 0 || step == total) {
    double t = now_s();
    double ex_s = (double)(step - p->last_step) * o->batch / (t - p->t_last);
    progress(o, step, total, p->epoch, l, ex_s, (double)(total - step) * o->batch / (ex_s > 0 ? ex_s : 1));
    if (c->sw) {
      kiln_summary_scalar(c->sw, "train/loss", step, l);
      kiln_summary_scalar(c->sw, "train/learning_rate", step, lr);
      kiln_summary_scalar(c->sw, "train/examples_per_second", step, ex_s);
    }
    p->t_last = t;
    p->last_step = step;
  }
  if (step % eval_every == 0 || step == total) {
    if (evaluate(c->m, c->tb, o->amp, &p->acc, &p->eval_loss)) return 1;
    if (step == total && !isfinite(p->eval_loss)) { /* the last update's result: the training loss came before it */
      fprintf(stderr, "kiln train: the test loss is %g after the last step: training diverged (try a smaller --lr)\n",
              p->eval_loss);
      p->diverged = 1;
      return 1;
    }
    if (!o->quiet)
      printf("%sevaluation after %lld steps: test accuracy %.2f%%, test loss %.4f\n",
             isatty(STDOUT_FILENO) ? "\n" : "", (long long)step, p->acc * 100, p->eval_loss);
    if (c->sw) {
      kiln_summary_scalar(c->sw, "test/accuracy", step, p->acc);
      kiln_summary_scalar(c->sw, "test/loss", step, p->eval_loss);
      kiln_summary_flush(c->sw);
    }
    p->t_last = now_s(); /* evaluation is not training throughput */
    p->last_step = step;
  }
  return 0;
}

/* The summary of what kiln did during the run. */
static void report(double wall) {
  kiln_metric_stats eps = {0}, ct = {0}, et = {0};
  kiln_metric_data("ExecutionsPerStep", &eps);
  kiln_metric_data("CompileTime", &ct);
  kiln_metric_data("ExecuteTime", &et);
  printf("\nWhat kiln did:\n");
  printf("  graphs compiled      %lld (%.1f s compiling), %lld found in the disk cache\n",
         (long long)kiln_counter_value("UncachedCompile"), ct.sum / 1e9,
         (long long)kiln_counter_value("PersistentCacheGraphHit"));
  printf("  cached steps         %lld\n", (long long)kiln_counter_value("CachedCompile"));
  printf("  executions per step  %.2f on average (max %.0f)\n", eps.count ? eps.sum / (double)eps.count : 0,
         eps.max);
  printf("  device busy          %.1f s of %.1f s\n", et.sum / 1e9, wall);
  printf("  transfers            %lld to the device, %lld from it\n", (long long)kiln_counter_value("TransferToDevice"),
         (long long)kiln_counter_value("TransferFromDevice"));
}

/* The world this run trains in (launched by mpirun: several processes);
 * 0, or 2 after printing a usage error, or 1 when it cannot start. */
static int join_world(train_opts *o) {
  if (kiln_dist_init() != KILN_OK) {
    fprintf(stderr, "kiln train: %s\n", kiln_cli_error_message());
    return 1;
  }
  o->rank = kiln_dist_rank();
  o->world = kiln_dist_world_size();
  if (o->batch % o->world) {
    if (o->rank == 0)
      fprintf(stderr,
              "kiln train: --batch: the global batch %d does not split over the %d processes of this run: give a "
              "multiple of %d\n",
              o->batch, o->world, o->world);
    return 2;
  }
  if (o->rank) o->quiet = 1; /* rank 0 prints */
  return 0;
}

int kiln_cli_train(int argc, char **argv) {
  train_opts o;
  char ckpt[4096];
  int rc = parse_opts(argc - 1, argv + 1, &o);
  if (rc) return rc == 1 ? 0 : rc;
  if ((rc = join_world(&o)) != 0) return rc;
  if (check_outputs(&o, ckpt, sizeof ckpt)) return 1;
  if (kiln_init(NULL) != KILN_OK) {
    fprintf(stderr, "kiln train: %s\n", kiln_cli_error_message());
    return 1;
  }
  train_ctx c = {0};
  if (train_setup(&o, &c)) {
    train_teardown(&c);
    return 1;
  }
  int64_t per_epoch = kiln_loader_num_batches(c.loader), total = per_epoch * o.epochs;
  if (o.max_steps && o.max_steps < total) total = o.max_steps;
  int64_t eval_every = o.eval_every > 0 ? o.eval_every : per_epoch;
  char procs[64] = "";
  if (o.world > 1) snprintf(procs, sizeof procs, " (%d per process, %d processes)", o.batch / o.world, o.world);
  if (o.rank == 0)
    printf("kiln train: model %s (%lld parameters), %lld training / %lld test examples, batch %d%s, %s lr %g, %lld "
           "steps, backend %s%s%s\n",
           o.model, (long long)kiln_model_num_params(c.m), (long long)kiln_dataset_size(c.train),
           (long long)kiln_dataset_size(c.test), o.batch, procs, o.optim, o.lr, (long long)total, kiln_backend_name(),
           o.amp != KILN_F32 ? ", amp " : "", o.amp != KILN_F32 ? kiln_dtype_name(o.amp) : "");
  double t0 = now_s();
  train_progress p = {.t_last = t0};
  int64_t step = 0;
  while (step < total) {
    kiln_batch b;
    int got = kiln_loader_next(c.loader, &b);
    if (got == 0) {
      p.epoch++;
      continue;
    }
    if (got < 0) break;
    double lr = kiln_lr_warmup_cosine(step, total / 20 + 1, total, o.lr, o.lr * 0.01);
    if (train_step(&o, &c, &b, step, lr)) break;
    step++;
    if (after_step(&o, &c, &p, step, total, eval_every, lr)) break;
  }
  double wall = now_s() - t0;
  int ok = kiln_last_status() == KILN_OK && step == total && !p.diverged;
  if (!ok && !p.diverged) {
    char who[32] = ""; /* kiln's own lines carry the rank too (docs/distributed.md) */
    if (o.world > 1) snprintf(who, sizeof who, "[rank %d] ", o.rank);
    fprintf(stderr, "%skiln train: stopped at step %lld: %s\n", who, (long long)step, kiln_cli_error_message());
  }
  if (o.rank != 0) { /* rank 0 reports and writes the checkpoint */
    train_teardown(&c);
    return ok ? 0 : 1;
  }
  if (ok && save_checkpoint(ckpt, c.m, c.opt, step)) {
    fprintf(stderr, "kiln train: checkpoint not written: %s\n", kiln_cli_error_message());
    ok = 0;
  }
  if (!p.diverged)
    printf("\nfinal test accuracy %.2f%% (test loss %.4f) after %lld steps in %.1f s\n", p.acc * 100, p.eval_loss,
           (long long)step, wall);
  if (ok) printf("checkpoint: %s\n", ckpt);
  if (c.sw) printf("TensorBoard logs: %s (tensorboard --logdir %s)\n", kiln_summary_path(c.sw), o.logdir);
  report(wall);
  train_teardown(&c);
  return ok ? 0 : 1;
}
