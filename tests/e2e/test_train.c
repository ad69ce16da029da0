/* End to end, CI-sized: train the MLP on real Fashion-MNIST for 200 steps
 * through the public API (models, autograd, AdamW, the asynchronous loader),
 * check the test accuracy and kiln's own counters (one compile for the
 * step, one execution per step), then save a checkpoint and check that a
 * fresh model loaded from it predicts exactly the same.
 *
 * The `kiln train` command line: every bad flag value is named with the
 * flag and the value, and an unusable output path (checkpoint, logdir) is
 * refused before kiln starts, with no kiln source path in any message. */
#define _GNU_SOURCE
#include <kiln/kiln.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kt.h"

#define STEPS 200
#define MAXP 64

/* Accuracy over the first `batches` test batches of 500. */
static double accuracy(kiln_model *m, kiln_dataset *test, int batches) {
  kiln_batch_options o = {.batch_size = 500, .shuffle = false};
  kiln_batcher *b = NULL;
  kiln_batcher_create(test, &o, &b);
  kiln_tensor correct = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_batch bt;
  int n = 0;
  kiln_no_grad_begin();
  for (int i = 0; i < batches && kiln_batcher_next(b, &bt) == 1; i++) {
    kiln_tensor pred = kiln_argmax(kiln_model_forward(m, bt.x, 0, 0), 1, 0);
    kiln_assign(correct, kiln_add(correct, kiln_sum(kiln_cast(kiln_eq(pred, bt.y), KILN_F32), 0, NULL, 0)));
    kiln_mark_step();
    n += 500;
  }
  kiln_no_grad_end();
  double acc = kiln_item_f64(correct) / n;
  kiln_release(correct);
  kiln_batcher_destroy(b);
  return acc;
}

KT_TEST(mlp_trains_and_checkpoints) {
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  kiln_dataset *train = NULL, *test = NULL;
  kiln_dataset_create_fashion_mnist(NULL, true, &train);
  kiln_dataset_create_fashion_mnist(NULL, false, &test);
  KT_CHECK_MSG(train && test, "%s", kiln_last_error());
  if (!train || !test) return;
  kiln_batch_options bo = {.batch_size = 128, .shuffle = true, .seed = 7};
  kiln_loader *loader = NULL;
  kiln_loader_create(train, &bo, &loader);
  kiln_model *m = NULL;
  kiln_model_create(KILN_MODEL_MLP, 10, 3, &m);
  kiln_tensor params[MAXP];
  int np = kiln_model_params(m, NULL, params, MAXP);
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_adamw_opts ao = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  kiln_optim_create_adamw(np, params, &ao, &opt);
  kiln_mark_step();
  int64_t compiles0 = kiln_counter_value("UncachedCompile");
  kiln_metrics_clear();
  kiln_tensor loss_kept = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  double first_loss = 0;
  for (int step = 0; step < STEPS; step++) {
    kiln_batch b;
    if (kiln_loader_next(loader, &b) != 1) kiln_loader_next(loader, &b);
    kiln_tensor loss = kiln_cross_entropy(kiln_model_forward(m, b.x, 1, (uint64_t)step), b.y, -100, 0.0);
    kiln_assign(loss_kept, loss);
    kiln_backward(loss);
    kiln_optim_step(opt);
    for (int i = 0; i < np; i++) kiln_zero_grad(params[i]);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    if (step == 0) first_loss = kiln_item_f64(loss_kept);
  }
  double last_loss = kiln_item_f64(loss_kept);
  kiln_metric_stats eps;
  KT_CHECK(kiln_metric_data("ExecutionsPerStep", &eps) == 0);
  KT_NEAR(eps.max, 1.0, 0);
  KT_NEAR(eps.min, 1.0, 0);
  /* the step graph compiles once (plus the loss_kept initial value) */
  KT_CHECK(kiln_counter_value("UncachedCompile") <= 2);
  KT_CHECK(kiln_counter_value("CachedCompile") >= STEPS - 2);
  KT_CHECK(first_loss > 1.5 && last_loss < 0.8);
  double acc = accuracy(m, test, 4);
  fprintf(stderr, "  loss %.3f -> %.3f, test accuracy %.3f (compiles before training: %lld)\n", first_loss, last_loss,
          acc, (long long)compiles0);
  KT_CHECK(acc > 0.78);

  /* checkpoint round trip: a fresh model with other weights, loaded */
  char path[] = "/tmp/kiln-e2e-ckpt-XXXXXX";
  int fd = mkstemp(path);
  KT_CHECK(fd >= 0);
  close(fd);
  const char *names[MAXP];
  kiln_tensor state[MAXP];
  int ns = kiln_model_state(m, names, state, MAXP);
  KT_CHECK(kiln_save_safetensors(path, ns, names, state, NULL) == KILN_OK);
  kiln_model *m2 = NULL;
  kiln_model_create(KILN_MODEL_MLP, 10, 99, &m2);
  kiln_mark_step();
  KT_CHECK(fabs(accuracy(m2, test, 4) - acc) > 0.2); /* untrained: different */
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  kiln_tensor state2[MAXP];
  const char *names2[MAXP];
  kiln_model_state(m2, names2, state2, MAXP);
  for (int i = 0; f && i < ns; i++) KT_CHECK(kiln_st_load_into(f, names2[i], state2[i]) == KILN_OK);
  kiln_st_file_destroy(f);
  kiln_mark_step();
  KT_NEAR(accuracy(m2, test, 4), acc, 1e-9);
  unlink(path);

  kiln_release(loss_kept);
  kiln_model_destroy(m2);
  kiln_optim_destroy(opt);
  kiln_model_destroy(m);
  kiln_loader_destroy(loader);
  kiln_dataset_destroy(train);
  kiln_dataset_destroy(test);
  kiln_shutdown();
}

/* Mixed precision: the demo's Transformer trained for AMP_STEPS steps in f32
 * and, from the same initial weights and batches, inside a bf16 autocast
 * region, reaches the same test accuracy within noise (on 1000 test
 * examples: one standard error of an accuracy near 0.75 is about 0.014). */
#define AMP_STEPS 120
static double train_transformer(kiln_dataset *train, kiln_dataset *test, kiln_dtype amp, double *loss) {
  kiln_batch_options bo = {.batch_size = 64, .shuffle = true, .seed = 11};
  kiln_loader *loader = NULL;
  kiln_loader_create(train, &bo, &loader);
  kiln_model *m = NULL;
  kiln_model_create(KILN_MODEL_TRANSFORMER, 10, 5, &m);
  kiln_tensor params[MAXP];
  int np = kiln_model_params(m, NULL, params, MAXP);
  for (int i = 0; i < np; i++) kiln_requires_grad(params[i]);
  kiln_adamw_opts ao = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  kiln_optim_create_adamw(np, params, &ao, &opt);
  kiln_mark_step();
  kiln_tensor loss_kept = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  for (int step = 0; step < AMP_STEPS; step++) {
    kiln_batch b;
    if (kiln_loader_next(loader, &b) != 1) kiln_loader_next(loader, &b);
    if (amp != KILN_F32) kiln_autocast_begin(amp);
    kiln_tensor logits = kiln_model_forward(m, b.x, 1, (uint64_t)step);
    kiln_tensor l = kiln_cross_entropy(logits, b.y, -100, 0.0);
    if (amp != KILN_F32) {
      kiln_autocast_end();
      KT_CHECK(kiln_dtype_of(logits) == amp);     /* the classifier head ran in bf16 */
      KT_CHECK(kiln_dtype_of(l) == KILN_F32);     /* the loss in f32 */
    }
    kiln_assign(loss_kept, l);
    kiln_backward(l);
    kiln_optim_step(opt);
    for (int i = 0; i < np; i++) {
      KT_CHECK(kiln_dtype_of(kiln_grad(params[i])) == KILN_F32); /* f32 master weights, f32 gradients */
      kiln_zero_grad(params[i]);
    }
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  *loss = kiln_item_f64(loss_kept);
  if (amp != KILN_F32) kiln_autocast_begin(amp);
  double acc = accuracy(m, test, 2);
  if (amp != KILN_F32) kiln_autocast_end();
  kiln_release(loss_kept);
  kiln_optim_destroy(opt);
  kiln_model_destroy(m);
  kiln_loader_destroy(loader);
  return acc;
}

KT_TEST(transformer_trains_in_bf16_autocast) {
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  kiln_dataset *train = NULL, *test = NULL;
  kiln_dataset_create_fashion_mnist(NULL, true, &train);
  kiln_dataset_create_fashion_mnist(NULL, false, &test);
  KT_CHECK_MSG(train && test, "%s", kiln_last_error());
  if (!train || !test) return;
  double l32 = 0, l16 = 0;
  double a32 = train_transformer(train, test, KILN_F32, &l32);
  double a16 = train_transformer(train, test, KILN_BF16, &l16);
  fprintf(stderr, "  transformer %d steps: f32 loss %.6f accuracy %.4f; bf16 autocast loss %.6f accuracy %.4f\n",
          AMP_STEPS, l32, a32, l16, a16);
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
  KT_CHECK(a32 > 0.6 && a16 > 0.6);      /* both learned */
  KT_CHECK(fabs(a32 - a16) < 0.04);      /* within noise: about 3 standard errors */
  kiln_dataset_destroy(train);
  kiln_dataset_destroy(test);
  kiln_shutdown();
}

/* ── the `kiln train` command line ── */

static char g_kiln[4096]; /* <build>/bin/kiln */

static void find_kiln(void) {
  if (g_kiln[0]) return;
  ssize_t n = readlink("/proc/self/exe", g_kiln, sizeof g_kiln - 1);
  g_kiln[n > 0 ? n : 0] = 0;
  for (int i = 0; i < 2; i++) { /* <build>/bin/tests/test_train -> <build>/bin */
    char *s = strrchr(g_kiln, '/');
    if (s) *s = 0;
  }
  strncat(g_kiln, "/kiln", sizeof g_kiln - strlen(g_kiln) - 1);
}

/* `kiln train ARGS` with stdout+stderr into out; returns the exit status. */
static int run_train(const char *args, char *out, size_t cap) {
  find_kiln();
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' train %s 2>&1", g_kiln, args);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* --rows: a sequence length of its own each step (dynamic shapes): the
 * training step compiles once for any length and the later lengths are
 * planned; the run learns; --rows is refused for a model without rows. */
KT_TEST(cli_variable_rows_compile_once) {
  static char out[1 << 16];
  setenv("KILN_DEBUG", "1", 1);
  int st = run_train("--model transformer --rows 12 --max-steps 40 --eval-every 40 --batch 64 --quiet "
                     "--checkpoint /tmp/kiln-test-rows.safetensors",
                     out, sizeof out);
  unsetenv("KILN_DEBUG");
  KT_EQ_INT(st, 0);
  KT_STR_CONTAINS(out, "varies: compiled once for any size");
  KT_STR_CONTAINS(out, "planned from its dynamic family");
  int families = 0; /* one family for the training step: not one per length */
  for (const char *p = strstr(out, "compiled once for any size"); p; p = strstr(p + 1, "compiled once for any size"))
    families++;
  KT_EQ_INT(families, 1);
  const char *acc = strstr(out, "final test accuracy ");
  double a = acc ? strtod(acc + 20, NULL) : 0;
  KT_CHECK_MSG(a > 30.0, "accuracy %.2f%% after 40 steps of cut images", a); /* 10 classes: chance is 10% */
  remove("/tmp/kiln-test-rows.safetensors");
  KT_EQ_INT(run_train("--model mlp --rows 12", out, sizeof out), 2);
  KT_STR_CONTAINS(out, "--rows: only the transformer");
  KT_EQ_INT(run_train("--model transformer --rows 40", out, sizeof out), 2);
  KT_STR_CONTAINS(out, "--rows");
}

KT_TEST(cli_bad_values_name_their_flag) {
  static const struct {
    const char *args, *want;
  } cases[] = {
      {"--batch -3", "kiln train: --batch: expected an integer from 1 to 65536, got '-3'\n"},
      {"--batch 70000", "kiln train: --batch: expected an integer from 1 to 65536, got '70000'\n"},
      {"--batch 12x", "kiln train: --batch: expected an integer from 1 to 65536, got '12x'\n"},
      {"--epochs 0", "kiln train: --epochs: expected a positive integer, got '0'\n"},
      {"--eval-every ''", "kiln train: --eval-every: expected a positive integer, got ''\n"},
      {"--max-steps -5", "kiln train: --max-steps: expected a positive integer, got '-5'\n"},
      {"--lr 0", "kiln train: --lr: expected a positive number, got '0'\n"},
      {"--lr fast", "kiln train: --lr: expected a positive number, got 'fast'\n"},
      {"--lr inf", "kiln train: --lr: expected a positive number, got 'inf'\n"},
      {"--weight-decay -0.1", "kiln train: --weight-decay: expected a non-negative number, got '-0.1'\n"},
      {"--seed -1", "kiln train: --seed: expected a non-negative integer, got '-1'\n"},
      {"--optim adam", "kiln train: --optim: expected adamw or sgd, got 'adam'\n"},
      {"--model resnet", "kiln train: --model: expected mlp, cnn or transformer, got 'resnet'\n"},
      {"--amp fp8", "kiln train: --amp: expected off, bf16 or f16, got 'fp8'\n"},
      {"--batch", "kiln train: --batch needs a value\n"},
  };
  char out[16384];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = run_train(cases[i].args, out, sizeof out);
    KT_CHECK_MSG(rc == 2, "kiln train %s: exit %d", cases[i].args, rc);
    KT_CHECK_MSG(strcmp(out, cases[i].want) == 0, "kiln train %s:\n got: %s want: %s", cases[i].args, out,
                 cases[i].want);
  }
  KT_EQ_INT(run_train("--frob 1", out, sizeof out), 2);
  KT_CHECK_MSG(strncmp(out, "kiln train: unknown option '--frob'\n\nusage: kiln train", 52) == 0, "got: %s", out);
  KT_EQ_INT(run_train("--help", out, sizeof out), 0);
  KT_STR_CONTAINS(out, "usage: kiln train");
}

KT_TEST(cli_outputs_are_checked_before_training) {
  char out[16384], dir[] = "/tmp/kiln-e2e-cli-XXXXXX", args[512];
  KT_CHECK(mkdtemp(dir) != NULL);
  /* a checkpoint in a directory that does not exist: refused at once, before
   * kiln starts (no "kiln train: model ..." line, no step) */
  snprintf(args, sizeof args, "--max-steps 1 --checkpoint %s/missing/model.safetensors", dir);
  KT_EQ_INT(run_train(args, out, sizeof out), 1);
  char want[1024];
  snprintf(want, sizeof want,
           "kiln train: --checkpoint: cannot write '%s/missing/model.safetensors': the directory '%s/missing' does "
           "not exist\n",
           dir, dir);
  KT_CHECK_MSG(strcmp(out, want) == 0, "got: %s", out);
  /* a checkpoint path that is a directory */
  snprintf(args, sizeof args, "--max-steps 1 --checkpoint %s", dir);
  KT_EQ_INT(run_train(args, out, sizeof out), 1);
  KT_STR_CONTAINS(out, "it is a directory; give a file name");
  /* a logdir below a regular file */
  char file[128];
  snprintf(file, sizeof file, "%s/plain", dir);
  FILE *f = fopen(file, "w");
  KT_CHECK(f != NULL);
  if (f) fclose(f);
  snprintf(args, sizeof args, "--max-steps 1 --checkpoint %s/ok.safetensors --logdir %s/tb", dir, file);
  KT_EQ_INT(run_train(args, out, sizeof out), 1);
  snprintf(want, sizeof want, "kiln train: --logdir: cannot write to '%s/tb': '%s' is not a directory\n", file, file);
  KT_CHECK_MSG(strcmp(out, want) == 0, "got: %s", out);
  /* a bad --data directory: reported with the directory, not kiln's source */
  snprintf(args, sizeof args, "--max-steps 1 --checkpoint %s/ok.safetensors --data %s/nodata", dir, dir);
  KT_EQ_INT(run_train(args, out, sizeof out), 1);
  snprintf(want, sizeof want, "kiln train: cannot load Fashion-MNIST from --data %s/nodata: IDX file %s/nodata/", dir,
           dir);
  KT_CHECK_MSG(strncmp(out, want, strlen(want)) == 0, "got: %s", out);
  KT_CHECK_MSG(strstr(out, "train.c") == NULL && strstr(out, "tools/") == NULL, "kiln's own source in: %s", out);
  KT_CHECK(access(file, F_OK) == 0 && access(dir, F_OK) == 0);
  unlink(file);
  rmdir(dir);
}

KT_MAIN(KT_CASE(cli_variable_rows_compile_once), KT_CASE(cli_bad_values_name_their_flag), KT_CASE(cli_outputs_are_checked_before_training),
        KT_CASE(mlp_trains_and_checkpoints), KT_CASE(transformer_trains_in_bf16_autocast))
