/* Resume equals uninterrupted: N steps, a safetensors checkpoint of the
 * parameters, the optimizer state tensors and the host state (step counts),
 * a fresh runtime (kiln_shutdown + kiln_init: nothing survives but the
 * file), M more steps — must give the parameters of N + M uninterrupted
 * steps bit for bit. The oracle is the uninterrupted run.
 *
 *  - optimizers whose parameters count their own steps: a parameter that got
 *    no gradient on some steps (AdamW's bias correction, SGD's first-step
 *    rule with dampening). Before kiln_optim_param_step_count there was no
 *    way to save that count, and kiln_optim_set_step_count gave every
 *    parameter the optimizer's count: AdamW resumed 1.1655 for 1.1915.
 *  - a training loop: MLP with dropout (seed from the step), a shuffling
 *    loader (resumed mid-epoch), a warm-up/cosine lr schedule, AdamW. */
#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kt.h"

static char ckpt[256];

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

static void set_ckpt(const char *name) {
  snprintf(ckpt, sizeof ckpt, "/tmp/kiln_test_resume_%d_%s.safetensors", (int)getpid(), name);
}

/* Save params and every optimizer state tensor, with the step counts as
 * metadata ("step", "p<i>.step"). */
static void save(int n, const kiln_tensor *p, kiln_optim *o) {
  char owned[64][48], meta_s[9][2][32];
  const char *names[64], *meta[2 * 9 + 1];
  kiln_tensor ts[64];
  int k = 0, m = 0;
  for (int i = 0; i < n; i++) {
    snprintf(owned[k], sizeof owned[k], "p%d", i);
    names[k] = owned[k];
    ts[k++] = p[i];
    const char *sn[4];
    kiln_tensor st[4];
    int ns = kiln_optim_state(o, i, sn, st, 4);
    for (int j = 0; j < ns; j++) {
      snprintf(owned[k], sizeof owned[k], "p%d.%s", i, sn[j]);
      names[k] = owned[k];
      ts[k++] = st[j];
    }
  }
  for (int i = -1; i < n && i < 8; i++) {
    snprintf(meta_s[i + 1][0], 32, i < 0 ? "step" : "p%d.step", i);
    snprintf(meta_s[i + 1][1], 32, "%lld",
             (long long)(i < 0 ? kiln_optim_step_count(o) : kiln_optim_param_step_count(o, i)));
    meta[m++] = meta_s[i + 1][0];
    meta[m++] = meta_s[i + 1][1];
  }
  meta[m] = NULL;
  KT_CHECK(kiln_save_safetensors(ckpt, k, names, ts, meta) == KILN_OK);
}

/* Load what save wrote into fresh params and a fresh optimizer. */
static void load(int n, const kiln_tensor *p, kiln_optim *o) {
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(ckpt, &f) == KILN_OK);
  if (!f) return;
  char nm[48];
  for (int i = 0; i < n; i++) {
    snprintf(nm, sizeof nm, "p%d", i);
    KT_CHECK(kiln_st_load_into(f, nm, p[i]) == KILN_OK);
    const char *sn[4];
    kiln_tensor st[4];
    int ns = kiln_optim_state(o, i, sn, st, 4);
    for (int j = 0; j < ns; j++) {
      snprintf(nm, sizeof nm, "p%d.%s", i, sn[j]);
      KT_CHECK(kiln_st_load_into(f, nm, st[j]) == KILN_OK);
    }
  }
  const char *s = kiln_st_metadata(f, "step");
  KT_CHECK(s != NULL);
  kiln_optim_set_step_count(o, s ? atoll(s) : 0);
  for (int i = 0; i < n; i++) {
    snprintf(nm, sizeof nm, "p%d.step", i);
    s = kiln_st_metadata(f, nm);
    KT_CHECK(s != NULL);
    KT_CHECK(kiln_optim_set_param_step_count(o, i, s ? atoll(s) : 0) == KILN_OK);
  }
  kiln_st_file_destroy(f);
}

/* ───────────── optimizers with skipped parameters ───────────── */

#define NP 3
static const int64_t psize[1] = {6};

static float gval(int step, int i, int k) { return (float)((step * 31 + i * 7 + k * 3) % 17 - 8) / 8.0f; }

/* Parameter 1 gets no gradient on odd steps, parameter 2 none before step 4. */
static int has_grad(int step, int i) { return i == 0 || (i == 1 && step % 2 == 0) || (i == 2 && step >= 4); }

static kiln_optim *make_opt(int adam, const kiln_tensor *p) {
  kiln_optim *o = NULL;
  if (adam) {
    kiln_adamw_opts a = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01};
    KT_CHECK(kiln_optim_create_adamw(NP, p, &a, &o) == KILN_OK);
  } else {
    kiln_sgd_opts s = {.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01};
    KT_CHECK(kiln_optim_create_sgd(NP, p, &s, &o) == KILN_OK);
  }
  return o;
}

static void opt_steps(kiln_optim *o, kiln_tensor *p, int from, int to) {
  for (int s = from; s < to; s++) {
    kiln_tensor g[NP];
    for (int i = 0; i < NP; i++) {
      float gv[6];
      for (int k = 0; k < 6; k++) gv[k] = gval(s, i, k);
      g[i] = has_grad(s, i) ? kiln_from_host(gv, KILN_F32, 1, psize) : (kiln_tensor){0, 0};
    }
    kiln_optim_set_lr(o, 0.05 * (1 + s));
    KT_CHECK(kiln_optim_step_tensors(o, NP, p, g) == KILN_OK);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
}

/* Runs `total` steps with a checkpoint + fresh runtime after `cut` (cut 0:
 * uninterrupted); the parameters into out. */
static void run_opt(int adam, int cut, int total, float out[NP][6]) {
  static const float init[6] = {0.5f, -0.25f, 1, 2, -1.5f, 0.125f};
  kiln_tensor p[NP];
  start();
  for (int i = 0; i < NP; i++) p[i] = kiln_param(kiln_from_host(init, KILN_F32, 1, psize));
  kiln_optim *o = make_opt(adam, p);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  if (cut > 0) {
    opt_steps(o, p, 0, cut);
    save(NP, p, o);
    kiln_optim_destroy(o);
    start();
    static const float zero[6] = {0};
    for (int i = 0; i < NP; i++) p[i] = kiln_param(kiln_from_host(zero, KILN_F32, 1, psize));
    o = make_opt(adam, p);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    load(NP, p, o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
    KT_EQ_INT(kiln_optim_step_count(o), cut);
  }
  opt_steps(o, p, cut, total);
  for (int i = 0; i < NP; i++) KT_CHECK(kiln_to_host(p[i], out[i], sizeof out[i]) == KILN_OK);
  KT_EQ_INT(kiln_optim_param_step_count(o, 0), total);
  KT_EQ_INT(kiln_optim_param_step_count(o, 1), (total + 1) / 2);
  KT_EQ_INT(kiln_optim_param_step_count(o, 2), total - 4);
  kiln_optim_destroy(o);
}

static void check_resume(int adam) {
  set_ckpt(adam ? "adamw" : "sgd");
  float full[NP][6], res[NP][6];
  run_opt(adam, 0, 9, full);
  /* cut at 3: parameter 2 has had no step (SGD: its next is a first step,
   * without dampening); parameter 1 has had 2 of 3 */
  for (int cut = 3; cut <= 5; cut += 2) {
    run_opt(adam, cut, 9, res);
    for (int i = 0; i < NP; i++)
      for (int k = 0; k < 6; k++)
        KT_CHECK_MSG(!memcmp(&full[i][k], &res[i][k], 4), "%s cut %d: p%d[%d] %.9g resumed, %.9g uninterrupted",
                     adam ? "adamw" : "sgd", cut, i, k, res[i][k], full[i][k]);
  }
  unlink(ckpt);
}

KT_TEST(adamw_resume_with_skipped_parameters) { check_resume(1); }
KT_TEST(sgd_resume_with_skipped_parameters) { check_resume(0); }

KT_TEST(param_step_count_errors) {
  start();
  kiln_tensor p = kiln_param(kiln_zeros(KILN_F32, 1, psize));
  kiln_sgd_opts s = {.lr = 0.1};
  kiln_optim *o = NULL;
  KT_CHECK(kiln_optim_create_sgd(1, &p, &s, &o) == KILN_OK);
  KT_EQ_INT(kiln_optim_param_step_count(o, 0), 0);
  KT_EQ_INT(kiln_optim_param_step_count(o, 1), -1);
  KT_EQ_INT(kiln_optim_param_step_count(NULL, 0), -1);
  KT_CHECK(kiln_optim_set_param_step_count(o, 1, 3) == KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "optim_set_param_step_count: no such parameter (parameter 1 of 1");
  kiln_clear_error();
  KT_CHECK(kiln_optim_set_param_step_count(o, 0, -2) == KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "negative step count");
  kiln_clear_error();
  KT_CHECK(kiln_optim_set_param_step_count(NULL, 0, 1) == KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_EQ_INT(kiln_optim_param_step_count(o, 0), 0);
  KT_CHECK(kiln_optim_set_param_step_count(o, 0, 7) == KILN_OK);
  KT_EQ_INT(kiln_optim_param_step_count(o, 0), 7);
  KT_CHECK(kiln_optim_set_step_count(o, 2) == KILN_OK);
  KT_EQ_INT(kiln_optim_param_step_count(o, 0), 2);
  /* a negative count was ignored without an error */
  KT_CHECK(kiln_optim_set_step_count(o, -1) == KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "optim_set_step_count: negative step count (-1 steps)");
  KT_STR_CONTAINS(kiln_last_error(), "test_resume.c");
  kiln_clear_error();
  KT_CHECK(kiln_optim_set_step_count(NULL, 1) == KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_EQ_INT(kiln_optim_step_count(o), 2);
  KT_EQ_INT(kiln_optim_param_step_count(o, 0), 2);
  kiln_optim_destroy(o);
  kiln_shutdown();
}

/* ───────────── a training loop ───────────── */

#define NEX 100
#define FEAT 6
#define CLS 4
#define BATCH 16 /* 7 batches per epoch, the last padded */

static float feats[NEX * FEAT];
static int64_t labels[NEX];

typedef struct run {
  kiln_dataset *ds;
  kiln_loader *ld;
  kiln_linear *l1, *l2;
  kiln_tensor p[4];
  kiln_optim *o;
} run;

static void run_make(run *r, int skip_batches) {
  int64_t fs[2] = {NEX, FEAT};
  KT_CHECK(kiln_dataset_create_from_host(feats, 2, fs, labels, &r->ds) == KILN_OK);
  kiln_batch_options bo = {.batch_size = BATCH, .shuffle = true, .seed = 11};
  KT_CHECK(kiln_loader_create(r->ds, &bo, &r->ld) == KILN_OK);
  KT_CHECK(kiln_linear_create(FEAT, 24, true, 3, &r->l1) == KILN_OK);
  KT_CHECK(kiln_linear_create(24, CLS, true, 4, &r->l2) == KILN_OK);
  kiln_tensor p[4] = {r->l1->weight, r->l1->bias, r->l2->weight, r->l2->bias};
  memcpy(r->p, p, sizeof p);
  for (int i = 0; i < 4; i++) kiln_requires_grad(r->p[i]);
  kiln_adamw_opts ao = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  KT_CHECK(kiln_optim_create_adamw(4, r->p, &ao, &r->o) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  /* a resumed loader: the batches already trained on, skipped */
  kiln_batch b;
  for (int s = 0; s < skip_batches; s++) {
    if (kiln_loader_next(r->ld, &b) != 1) KT_EQ_INT(kiln_loader_next(r->ld, &b), 1);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
}

static void run_free(run *r) {
  kiln_optim_destroy(r->o);
  kiln_linear_destroy(r->l1);
  kiln_linear_destroy(r->l2);
  kiln_loader_destroy(r->ld);
  kiln_dataset_destroy(r->ds);
}

static void train(run *r, int from, int to, int total) {
  kiln_batch b;
  for (int s = from; s < to; s++) {
    if (kiln_loader_next(r->ld, &b) != 1) KT_EQ_INT(kiln_loader_next(r->ld, &b), 1);
    kiln_optim_set_lr(r->o, kiln_lr_warmup_cosine(s, 3, total, 1e-2, 1e-4));
    kiln_tensor h = kiln_relu(kiln_linear_forward(r->l1, b.x));
    h = kiln_dropout(h, 0.25, kiln_nn_seed(5, (uint64_t)s), true); /* the step's dropout seed */
    kiln_tensor loss = kiln_cross_entropy(kiln_linear_forward(r->l2, h), b.y, -100, 0.0);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_optim_step(r->o) == KILN_OK);
    kiln_optim_zero_grad(r->o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
}

static void train_run(int cut, int total, float *out, size_t cap) {
  run r;
  start();
  run_make(&r, 0);
  if (cut > 0) {
    train(&r, 0, cut, total);
    save(4, r.p, r.o);
    run_free(&r);
    start();
    run_make(&r, cut);
    load(4, r.p, r.o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  train(&r, cut, total, total);
  size_t at = 0;
  for (int i = 0; i < 4; i++) {
    size_t bytes = (size_t)kiln_numel(r.p[i]) * 4;
    KT_CHECK(at + bytes <= cap);
    if (at + bytes <= cap) KT_CHECK(kiln_to_host(r.p[i], out + at / 4, bytes) == KILN_OK);
    at += bytes;
  }
  run_free(&r);
  kiln_shutdown();
}

KT_TEST(training_resume_equals_uninterrupted) {
  for (int i = 0; i < NEX * FEAT; i++) feats[i] = (float)((i * 7919) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < NEX; i++) labels[i] = (int64_t)((i * 13) % CLS);
  set_ckpt("train");
  enum { N = FEAT * 24 + 24 + 24 * CLS + CLS };
  static float full[N], res[N];
  train_run(0, 17, full, sizeof full);
  train_run(10, 17, res, sizeof res); /* mid-epoch 2: batch 3 of 7 */
  int diff = 0;
  for (int i = 0; i < N; i++) diff += memcmp(&full[i], &res[i], 4) != 0;
  KT_CHECK_MSG(diff == 0, "%d of %d parameter values differ after resuming (first: %.9g vs %.9g)", diff, N, res[0],
               full[0]);
  /* and training moved them: the comparison is not of two initial states */
  float init[N];
  start();
  run r;
  run_make(&r, 0);
  KT_CHECK(kiln_to_host(r.p[0], init, FEAT * 24 * 4) == KILN_OK);
  run_free(&r);
  kiln_shutdown();
  KT_CHECK(memcmp(init, full, FEAT * 24 * 4) != 0);
  unlink(ckpt);
}

KT_MAIN(KT_CASE(adamw_resume_with_skipped_parameters), KT_CASE(sgd_resume_with_skipped_parameters),
        KT_CASE(param_step_count_errors), KT_CASE(training_resume_equals_uninterrupted))
