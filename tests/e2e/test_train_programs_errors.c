/* User mistakes in training programs that kiln took silently, or reported
 * as something else (found by the audit of tests/e2e/test_train_programs.c):
 * an index past the end where only the gradient of the indexing op runs,
 * an optimizer over a parameter that is no longer live or listed twice, a
 * stale batch passed to a layer or loss. Each must be an error naming the
 * function and the caller's line, on ref and on the backend under test. */
#include <kiln/kiln.h>

#include "kt.h"

#define SHAPE(...) (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

static const char *g_backend;
static const char *backend_under_test(void) {
  const char *b = getenv("KILN_TEST_BACKEND");
  return b && *b ? b : "cpu";
}
/* f32 values in [-1, 1) from a hash of (seed, i) */
static kiln_tensor fill(uint64_t seed, int rank, const int64_t *shape, double scale, double off) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  float *h = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    uint64_t z = (seed << 32 | (uint64_t)i) + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    h[i] = (float)(off + scale * ((double)((z ^ (z >> 31)) >> 11) * 0x1.0p-52 - 1));
  }
  kiln_tensor t = kiln_from_host(h, KILN_F32, rank, shape);
  free(h);
  return t;
}
/* i64 labels i % mod */
static kiln_tensor labels(int rank, const int64_t *shape, int64_t mod) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  int64_t *h = malloc(sizeof(int64_t) * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = i % mod;
  kiln_tensor t = kiln_from_host(h, KILN_I64, rank, shape);
  free(h);
  return t;
}

/* A class label or a token id past the end in a training step whose loss is
 * neither read nor kept: only the gradients of the gather / index_select
 * run, and they must report the index (they clamped it and trained on the
 * wrong row, status OK). k: 0 label == C, 1 label -1 (not the ignore_index),
 * 2 embedding id == V, 3 scatter_add index == dim (its source's gradient). */
static void bad_index_step(int k) {
  kiln_tensor w = kiln_param(fill(3001, SHAPE(4, 3), 0.5, 0));
  kiln_requires_grad(w);
  kiln_optim *o = NULL;
  kiln_sgd_opts so = {.lr = 0.1};
  KT_CHECK(kiln_optim_create_sgd(1, &w, &so, &o) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  int64_t ids[4] = {0, 1, 2, 1};
  if (k == 0) ids[2] = 3;
  if (k == 1) ids[2] = -1;
  if (k == 2 || k == 3) ids[2] = 4;
  kiln_tensor idx = kiln_from_host(ids, KILN_I64, 1, ((int64_t[]){4})), loss;
  int line = 0;
  if (k <= 1) {
    line = __LINE__ + 1;
    loss = kiln_cross_entropy(w, idx, -100, 0.0);
  } else if (k == 2) {
    line = __LINE__ + 1;
    loss = kiln_sum(kiln_tanh(kiln_index_select(w, 0, idx)), 0, NULL, 0);
  } else {
    kiln_tensor ix = kiln_reshape(idx, 2, ((int64_t[]){4, 1}));
    line = __LINE__ + 1;
    kiln_tensor y = kiln_scatter_add(kiln_zeros(KILN_F32, 2, ((int64_t[]){4, 1})), 0, ix, kiln_slice(w, 1, 0, 1, 1));
    loss = kiln_sum(kiln_mul(y, y), 0, NULL, 0);
  }
  KT_CHECK(kiln_backward(loss) == KILN_OK);
  KT_CHECK(kiln_optim_step(o) == KILN_OK);
  kiln_optim_zero_grad(o);
  kiln_status st = kiln_mark_step();
  if (st == KILN_OK) st = kiln_wait();
  char where[64];
  snprintf(where, sizeof where, "test_train_programs_errors.c:%d", line);
  KT_CHECK_MSG(st == KILN_ERR_INVALID_ARGUMENT, "case %d on %s: status %s, want INVALID_ARGUMENT", k, g_backend,
               kiln_status_name(st));
  KT_STR_CONTAINS(kiln_last_error(), "out of range");
  KT_STR_CONTAINS(kiln_last_error(), where);
  kiln_clear_error();
  kiln_optim_destroy(o);
  kiln_release(w);
}
KT_TEST(bad_index_in_a_training_step_is_reported) {
  for (int b = 0; b < 2; b++) {
    g_backend = b ? backend_under_test() : "ref";
    for (int k = 0; k < 4; k++) {
      kiln_shutdown();
      kiln_clear_error();
      KT_CHECK(kiln_init(&(kiln_options){.backend = g_backend}) == KILN_OK);
      bad_index_step(k);
      kiln_shutdown();
    }
  }
}

/* An optimizer over a parameter that is no longer live trained nothing and
 * said OK: a temporary given as a parameter (kiln_param forgotten) is
 * stale after its step; a released one is stale at once. */
KT_TEST(optimizer_over_a_dead_parameter_is_an_error) {
  for (int b = 0; b < 2; b++) {
    g_backend = b ? backend_under_test() : "ref";
    for (int k = 0; k < 2; k++) {
      kiln_shutdown();
      kiln_clear_error();
      KT_CHECK(kiln_init(&(kiln_options){.backend = g_backend}) == KILN_OK);
      kiln_tensor w = fill(3002, SHAPE(3), 1, 0); /* k == 0: not kept */
      if (k == 1) w = kiln_param(w);
      kiln_requires_grad(w);
      kiln_optim *o = NULL;
      kiln_adamw_opts ao = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
      KT_CHECK(kiln_optim_create_adamw(1, &w, &ao, &o) == KILN_OK);
      KT_CHECK(kiln_mark_step() == KILN_OK);
      if (k == 1) kiln_release(w);
      kiln_status st = kiln_optim_step(o);
      KT_CHECK_MSG(st == KILN_ERR_STALE_HANDLE, "case %d on %s: %s", k, g_backend, kiln_status_name(st));
      KT_STR_CONTAINS(kiln_last_error(), "optim step: parameter 0 is not a live tensor");
      KT_STR_CONTAINS(kiln_last_error(), "test_train_programs_errors.c");
      kiln_clear_error();
      kiln_tensor none = {0, 0};
      KT_CHECK(kiln_optim_step_tensors(o, 1, &w, &none) == KILN_ERR_STALE_HANDLE);
      kiln_clear_error();
      kiln_optim_destroy(o);
      kiln_shutdown();
    }
  }
}

/* A tied weight gathered from two modules' parameter lists appears twice:
 * each entry had its own AdamW state and the weight moved twice a step
 * (torch dedups model.parameters()); now an error naming both entries. */
KT_TEST(optimizer_with_a_parameter_listed_twice_is_an_error) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend_under_test()}) == KILN_OK);
  kiln_embedding *em = NULL;
  kiln_linear *out = NULL;
  kiln_embedding_create(5, 4, 1, &em);
  kiln_linear_create(4, 5, true, 2, &out);
  kiln_tensor ps[4];
  int n = kiln_module_params(&em->m, NULL, ps, 4);
  n += kiln_module_params(&out->m, NULL, ps + n, 4 - n);
  KT_EQ_INT(n, 3);
  ps[1] = em->weight; /* the output projection tied to the embedding, listed again */
  kiln_optim *o = (kiln_optim *)1;
  kiln_adamw_opts ao = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  KT_CHECK(kiln_optim_create_adamw(3, ps, &ao, &o) == KILN_ERR_INVALID_ARGUMENT && o == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "parameter 1 is parameter 0 again");
  kiln_clear_error();
  kiln_embedding_destroy(em);
  kiln_linear_destroy(out);
  kiln_shutdown();
}

/* The usual slip of a training loop: a batch made before the loop without
 * kiln_keep is stale from the second step on. Every layer and loss reports
 * it as a stale handle naming itself (they said "logits [..., C] need
 * targets [...]", "input must be [N, C, H, W]", or named an inner op:
 * "sub", "matmul", "mean", "cast"). */
KT_TEST(stale_batch_names_the_layer) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(&(kiln_options){.backend = backend_under_test()}) == KILN_OK);
  kiln_tensor x2 = fill(3003, SHAPE(2, 4), 1, 0), x4 = fill(3004, SHAPE(2, 4, 3, 3), 1, 0);
  kiln_tensor x3 = fill(3005, SHAPE(2, 3, 4), 1, 0), ids = labels(SHAPE(2), 4);
  KT_CHECK(kiln_mark_step() == KILN_OK); /* all four are stale now */
  kiln_tensor w = fill(3007, SHAPE(4, 4), 1, 0), w4 = fill(3008, SHAPE(4, 4, 1, 1), 1, 0), none = {0, 0}, g[1] = {x2};
  kiln_batchnorm2d *bn = NULL;
  kiln_layernorm *ln = NULL;
  kiln_embedding *em = NULL;
  kiln_mha *mha = NULL;
  kiln_batchnorm2d_create(4, 1e-5, 0.1, &bn);
  kiln_layernorm_create(4, 1e-5, true, &ln);
  kiln_embedding_create(4, 4, 1, &em);
  kiln_mha_create(4, 2, 0.0, 1, &mha);
  for (int k = 0; k < 12; k++) {
    static const char *const ops[12] = {"cross_entropy", "mse_loss",  "linear",  "conv2d", "max_pool2d",
                                        "batchnorm2d",   "layernorm", "embedding", "dropout", "sdpa",
                                        "mha",           "clip_grad_norm"};
    kiln_tensor r = none, c[1];
    switch (k) {
      case 0: r = kiln_cross_entropy(w, ids, -100, 0.0); break;
      case 1: r = kiln_mse_loss(x2, w); break;
      case 2: r = kiln_linear_apply(x2, w, none); break;
      case 3: r = kiln_conv2d_apply(x4, w4, none, 1, 0, 1, 1); break;
      case 4: r = kiln_max_pool2d(x4, 2, 0, 0); break;
      case 5: r = kiln_batchnorm2d_forward(bn, x4, true); break;
      case 6: r = kiln_layernorm_forward(ln, x2); break;
      case 7: r = kiln_embedding_forward(em, ids); break;
      case 8: r = kiln_dropout(x2, 0.1, 1, true); break;
      case 9: r = kiln_sdpa(x4, x4, x4, none, 0.0, false, 0); break;
      case 10: r = kiln_mha_forward(mha, x3, NULL); break;
      case 11: r = kiln_clip_grad_norm(1, g, c, 1.0); break;
    }
    char want[64];
    snprintf(want, sizeof want, "%s: tensor handle", ops[k]);
    KT_CHECK_MSG(!kiln_is_valid(r) && kiln_last_status() == KILN_ERR_STALE_HANDLE, "%s: %s", ops[k],
                 kiln_last_error());
    KT_STR_CONTAINS(kiln_last_error(), want);
    KT_STR_CONTAINS(kiln_last_error(), "test_train_programs_errors.c");
    kiln_clear_error();
  }
  kiln_batchnorm2d_destroy(bn);
  kiln_layernorm_destroy(ln);
  kiln_embedding_destroy(em);
  kiln_mha_destroy(mha);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(bad_index_in_a_training_step_is_reported), KT_CASE(optimizer_over_a_dead_parameter_is_an_error),
        KT_CASE(optimizer_with_a_parameter_listed_twice_is_an_error), KT_CASE(stale_batch_names_the_layer))
