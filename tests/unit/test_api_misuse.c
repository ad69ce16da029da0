/* API misuse never crashes kiln (part 1: kiln.h's non-op functions,
 * autograd.h, nn.h, optim.h). Each case hands a public function NULL
 * pointers, out-of-range enums, negative or huge counts, or invalid tensor
 * handles (null, forged, released, from before kiln_shutdown, poisoned),
 * or calls it in the wrong state, and checks the documented failure value,
 * that the sticky status names the function and this file's call site,
 * and that kiln computes a known result afterwards (misuse_common.h).
 * Part 2 (io, data, text, bert, models, debug, summary, profiler, graph
 * files, doctor, dist): test_api_misuse2.c. */
#include <kiln/autograd.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>
#include <math.h>
#include <stdint.h>

#include "misuse_common.h"

static const int64_t SH4[1] = {4};

/* Handles that are not live tensors, each built a different way. */
static void bad_handles(kiln_tensor out[5]) {
  float a[4] = {1, 2, 3, 4};
  out[0] = (kiln_tensor){0, 0};                       /* the null tensor */
  out[1] = (kiln_tensor){123456, 77};                 /* forged */
  out[2] = (kiln_tensor){UINT32_MAX, UINT32_MAX};     /* forged, extreme */
  kiln_tensor r = kiln_keep(kiln_from_host(a, KILN_F32, 1, SH4));
  kiln_release(r);
  out[3] = r;                                         /* released */
  int64_t bad[1] = {-3};
  out[4] = kiln_full(KILN_F32, 1, bad, 1.0);          /* poisoned */
  kiln_clear_error();
}

KT_TEST(test_runtime_lifecycle) {
  KT_CHECK(misuse_sane());
  KT_CHECK(kiln_init(NULL) != KILN_OK); /* already started */
  EXPECT_ERR_NOLOC("kiln_init");
  kiln_shutdown();
  kiln_shutdown(); /* safe when not started */
  KT_CHECK(strcmp(kiln_backend_name(), "") != 0 || 1);
  kiln_options o = {.backend = "no-such-backend"};
  KT_CHECK(kiln_init(&o) != KILN_OK);
  EXPECT_ERR_NOLOC("kiln_init");
  kiln_shutdown();
  kiln_options o2 = {.num_threads = -5};
  KT_CHECK(kiln_init(&o2) != KILN_OK);
  EXPECT_ERR_NOLOC("kiln_init");
  kiln_shutdown();
  kiln_options o3 = {.disk_cache = (kiln_switch)42};
  KT_CHECK(kiln_init(&o3) != KILN_OK);
  EXPECT_ERR_NOLOC("kiln_init");
  kiln_shutdown();
  kiln_options o4 = {.dynamic_shapes = (kiln_switch)-9};
  KT_CHECK(kiln_init(&o4) != KILN_OK);
  EXPECT_ERR_NOLOC("kiln_init");
  kiln_shutdown();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  KT_CHECK(misuse_sane());
}

KT_TEST(test_names_of_bad_enums) {
  KT_CHECK(kiln_status_name((kiln_status)99) != NULL);
  KT_CHECK(kiln_status_name((kiln_status)-1) != NULL);
  KT_CHECK(kiln_dtype_name((kiln_dtype)99) != NULL);
  KT_CHECK(kiln_dtype_name((kiln_dtype)-1) != NULL);
  KT_EQ_INT(kiln_dtype_size((kiln_dtype)99), 0);
  KT_EQ_INT(kiln_dtype_size((kiln_dtype)-1), 0);
  KT_EQ_INT(kiln_counter_value(NULL), 0);
  KT_EQ_INT(kiln_metric_data(NULL, NULL), -1);
  KT_EQ_INT(kiln_metric_data("ExecuteTime", NULL), -1);
  EXPECT_OK();
  KT_CHECK(kiln_version() != NULL);
}

KT_TEST(test_bad_handles_queries) {
  kiln_tensor b[5];
  bad_handles(b);
  for (int i = 0; i < 5; i++) {
    int64_t sh[KILN_MAX_RANK];
    KT_EQ_INT(kiln_rank(b[i]), -1);
    KT_EQ_INT(kiln_shape(b[i], sh), -1);
    KT_CHECK(!kiln_is_valid(b[i]));
    KT_CHECK(kiln_numel(b[i]) <= 0);
    (void)kiln_dim(b[i], 0);
    (void)kiln_dtype_of(b[i]);
    kiln_clear_error();
  }
}

KT_TEST(test_bad_handles_sync) {
  kiln_tensor b[5];
  bad_handles(b);
  for (int i = 0; i < 5; i++) {
    float dst[4];
    KT_CHECK(kiln_to_host(b[i], dst, sizeof dst) != KILN_OK);
    EXPECT_ERR("kiln_to_host");
    KT_CHECK(isnan(kiln_item_f64(b[i])));
    EXPECT_ERR("item");
    KT_EQ_INT(kiln_item_i64(b[i]), 0);
    EXPECT_ERR("item");
    /* a poisoned tensor (i == 4) propagates without a new message */
    KT_CHECK(!kiln_is_valid(kiln_dynamic(b[i], 0)));
    if (i < 4) EXPECT_ERR("dynamic");
    KT_CHECK(!kiln_is_valid(kiln_dynamic_bounded(b[i], 0, 8)));
    if (i < 4) EXPECT_ERR("dynamic");
    float a[4] = {1, 2, 3, 4};
    kiln_tensor k = kiln_keep(kiln_from_host(a, KILN_F32, 1, SH4));
    kiln_assign(b[i], k);
    if (i < 4) EXPECT_ERR("assign");
    if (i < 4) {
      kiln_assign(k, b[i]); /* k keeps its value */
      EXPECT_ERR("assign");
      KT_NEAR(kiln_item_f64(kiln_sum(k, 0, NULL, false)), 10, 0);
    }
    kiln_release(k);
    kiln_release(b[i]); /* no crash; released twice for b[3] */
    kiln_clear_error();
    KT_CHECK(!kiln_is_valid(kiln_keep(b[i])));
    kiln_clear_error();
  }
  KT_CHECK(misuse_sane());
}

KT_TEST(test_stale_after_shutdown) {
  float a[4] = {1, 2, 3, 4};
  kiln_tensor k = kiln_keep(kiln_from_host(a, KILN_F32, 1, SH4));
  kiln_shutdown();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  KT_CHECK(!kiln_is_valid(k));
  KT_CHECK(isnan(kiln_item_f64(k)));
  EXPECT_ERR("item");
  KT_CHECK(!kiln_is_valid(kiln_add(k, k)));
  EXPECT_ERR("add");
  kiln_release(k);
  kiln_clear_error();
}

KT_TEST(test_host_transfers) {
  float a[4] = {1, 2, 3, 4};
  int64_t sh2[2] = {2, 2}, neg[2] = {2, -2}, big[KILN_MAX_RANK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  KT_CHECK(!kiln_is_valid(kiln_from_host(NULL, KILN_F32, 2, sh2)));
  EXPECT_ERR("kiln_from_host");
  KT_CHECK(!kiln_is_valid(kiln_from_host(a, (kiln_dtype)99, 2, sh2)));
  EXPECT_ERR("kiln_from_host");
  KT_CHECK(!kiln_is_valid(kiln_from_host(a, (kiln_dtype)-1, 2, sh2)));
  EXPECT_ERR("kiln_from_host");
  KT_CHECK(!kiln_is_valid(kiln_from_host(a, KILN_F32, -1, sh2)));
  EXPECT_ERR("kiln_from_host");
  KT_CHECK(!kiln_is_valid(kiln_from_host(a, KILN_F32, KILN_MAX_RANK + 1, big)));
  EXPECT_ERR("kiln_from_host");
  KT_CHECK(!kiln_is_valid(kiln_from_host(a, KILN_F32, 2, NULL)));
  EXPECT_ERR("kiln_from_host");
  KT_CHECK(!kiln_is_valid(kiln_from_host(a, KILN_F32, 2, neg)));
  EXPECT_ERR("kiln_from_host");
  kiln_tensor t = kiln_from_host(a, KILN_F32, 2, sh2);
  float dst[8];
  KT_CHECK(kiln_to_host(t, NULL, 16) != KILN_OK);
  EXPECT_ERR("kiln_to_host");
  KT_CHECK(kiln_to_host(t, dst, 15) != KILN_OK);
  EXPECT_ERR("kiln_to_host");
  KT_CHECK(kiln_to_host(t, dst, 0) != KILN_OK);
  EXPECT_ERR("kiln_to_host");
  KT_CHECK(kiln_to_host(t, dst, sizeof dst) == KILN_OK); /* larger than needed: fine */
  KT_NEAR(dst[3], 4, 0);
  KT_CHECK(isnan(kiln_item_f64(t))); /* not one element */
  EXPECT_ERR("item");
  KT_EQ_INT(kiln_item_i64(t), 0);
  EXPECT_ERR("item");
  KT_CHECK(!kiln_is_valid(kiln_full((kiln_dtype)99, 2, sh2, 1.0)));
  EXPECT_ERR("full");
  KT_CHECK(!kiln_is_valid(kiln_full(KILN_F32, 2, NULL, 1.0)));
  EXPECT_ERR("full");
  KT_CHECK(!kiln_is_valid(kiln_rand((kiln_rand_kind)99, KILN_F32, 2, sh2, 1)));
  EXPECT_ERR("rand");
  KT_CHECK(!kiln_is_valid(kiln_rand(KILN_RAND_NORMAL, KILN_I32, 2, sh2, 1)));
  EXPECT_ERR("rand");
  KT_CHECK(!kiln_is_valid(kiln_scalar((kiln_dtype)99, 1.0)));
  EXPECT_ERR("scalar");
  KT_CHECK(!kiln_is_valid(kiln_constant((kiln_dtype)-4, 1.0)));
  EXPECT_ERR("constant");
  KT_CHECK(!kiln_is_valid(kiln_arange(KILN_F32, 0, 10, 0)));
  EXPECT_ERR("arange");
  KT_CHECK(!kiln_is_valid(kiln_arange(KILN_F32, 0, 1e30, 1e-30)));
  EXPECT_ERR("arange");
  KT_CHECK(!kiln_is_valid(kiln_cast(t, (kiln_dtype)99)));
  EXPECT_ERR("cast");
  KT_CHECK(!kiln_is_valid(kiln_one_hot(kiln_arange(KILN_I64, 0, 3, 1), 4, (kiln_dtype)99)));
  EXPECT_ERR("one_hot");
  kiln_mark_step();
}

KT_TEST(test_dynamic_marks) {
  float a[4] = {1, 2, 3, 4};
  kiln_tensor t = kiln_from_host(a, KILN_F32, 1, SH4);
  kiln_dynamic(t, 5); /* returns t (documented); the error is recorded */
  EXPECT_ERR("dynamic");
  kiln_dynamic(t, -9);
  EXPECT_ERR("dynamic");
  KT_CHECK(!kiln_is_valid(kiln_dynamic_bounded(t, 0, 1)));
  EXPECT_ERR("kiln_dynamic_bounded");
  KT_CHECK(!kiln_is_valid(kiln_dynamic_bounded(t, 0, 3)));
  EXPECT_ERR("kiln_dynamic_bounded");
  KT_CHECK(!kiln_is_valid(kiln_dynamic_bounded(t, 0, -1)));
  EXPECT_ERR("kiln_dynamic_bounded");
  kiln_mark_step();
}

KT_TEST(test_autocast_misuse) {
  kiln_autocast_end();
  EXPECT_ERR("kiln_autocast_end");
  kiln_autocast_begin(KILN_F64);
  EXPECT_ERR("kiln_autocast_begin");
  kiln_autocast_begin((kiln_dtype)99);
  EXPECT_ERR("kiln_autocast_begin");
  KT_EQ_INT(kiln_autocast_dtype(), KILN_F32);
  for (int i = 0; i < 17; i++) kiln_autocast_begin(KILN_BF16);
  EXPECT_ERR("kiln_autocast_begin");
  for (int i = 0; i < 16; i++) kiln_autocast_end();
  EXPECT_OK();
  KT_EQ_INT(kiln_autocast_dtype(), KILN_F32);
}

KT_TEST(test_autograd_misuse) {
  kiln_tensor b[5];
  bad_handles(b);
  for (int i = 0; i < 5; i++) {
    KT_CHECK(kiln_backward(b[i]) != KILN_OK);
    if (i < 4) EXPECT_ERR("backward"); /* a poisoned loss: no new message */
    kiln_clear_error();
    kiln_requires_grad(b[i]);
    if (i < 4) EXPECT_ERR("requires_grad");
    kiln_clear_error();
    KT_CHECK(!kiln_is_valid(kiln_grad(b[i])));
    kiln_clear_error();
    kiln_zero_grad(b[i]);
    kiln_clear_error();
  }
  float a[4] = {1, 2, 3, 4};
  kiln_tensor x = kiln_from_host(a, KILN_F32, 1, SH4);
  KT_CHECK(kiln_backward(kiln_sum(x, 0, NULL, false)) != KILN_OK); /* no tape */
  EXPECT_ERR("kiln_backward");
  kiln_tensor p = kiln_param(kiln_from_host(a, KILN_F32, 1, SH4));
  kiln_zero_grad(p); /* before any backward: a no-op */
  EXPECT_OK();
  KT_CHECK(!kiln_is_valid(kiln_grad(p)));
  kiln_requires_grad(p);
  kiln_tensor y = kiln_mul(p, p);
  KT_CHECK(kiln_backward(y) != KILN_OK); /* not a scalar */
  EXPECT_ERR("kiln_backward");
  kiln_tensor nul = {0, 0};
  KT_CHECK(kiln_backward_with(y, nul) != KILN_OK);
  EXPECT_ERR("backward");
  int64_t sh3[1] = {3};
  KT_CHECK(kiln_backward_with(y, kiln_ones(KILN_F32, 1, sh3)) != KILN_OK);
  EXPECT_ERR("backward");
  kiln_tensor l = kiln_sum(kiln_mul(p, p), 0, NULL, false);
  KT_CHECK(kiln_backward(l) == KILN_OK);
  kiln_status second = kiln_backward(l); /* twice: an error or an accumulation, never a crash */
  if (second != KILN_OK) EXPECT_ERR("kiln_backward");
  kiln_tensor xi = kiln_param(kiln_arange(KILN_I64, 0, 4, 1));
  kiln_requires_grad(xi);
  EXPECT_ERR("kiln_requires_grad");
  kiln_no_grad_end();
  EXPECT_ERR("kiln_no_grad_end");
  KT_CHECK(kiln_grad_enabled());
  kiln_release(p);
  kiln_release(xi);
  kiln_mark_step();
}

KT_TEST(test_module_misuse) {
  const char *names[4];
  kiln_tensor ts[4];
  KT_EQ_INT(kiln_module_params(NULL, names, ts, 4), -1);
  KT_EQ_INT(kiln_module_state(NULL, names, ts, 4), -1);
  kiln_module_zero_grad(NULL);
  kiln_module_release(NULL);
  kiln_clear_error();
  kiln_module bogus;
  memset(&bogus, 0, sizeof bogus);
  bogus.n = 1000;
  KT_EQ_INT(kiln_module_params(&bogus, names, ts, 4), -1);
  EXPECT_ERR_NOLOC("kiln_module_params");
  bogus.n = -3;
  KT_EQ_INT(kiln_module_state(&bogus, names, ts, 4), -1);
  EXPECT_ERR_NOLOC("kiln_module_state");
  kiln_module_zero_grad(&bogus);
  kiln_module_release(&bogus);
  kiln_clear_error();
  kiln_linear *l = NULL;
  KT_CHECK(kiln_linear_create(4, 2, true, 1, NULL) != KILN_OK);
  EXPECT_ERR("linear");
  KT_CHECK(kiln_linear_create(-4, 2, true, 1, &l) != KILN_OK && l == NULL);
  EXPECT_ERR("linear");
  /* valid ints, a weight too large for int64 bytes: an error, not a layer of poisoned parameters */
  KT_CHECK(kiln_linear_create(INT32_MAX, INT32_MAX, true, 1, &l) != KILN_OK && l == NULL);
  EXPECT_ERR("linear|rand");
  kiln_embedding *eh = NULL;
  KT_CHECK(kiln_embedding_create(INT32_MAX, INT32_MAX, 1, &eh) != KILN_OK && eh == NULL);
  EXPECT_ERR("embedding|rand");
  kiln_conv2d *ch = NULL;
  KT_CHECK(kiln_conv2d_create(INT32_MAX, INT32_MAX, 3, 1, 0, 1, 1, false, 1, &ch) != KILN_OK && ch == NULL);
  EXPECT_ERR("conv2d|rand");
  KT_EQ_INT(kiln_module_params(&bogus, NULL, NULL, -1), -1);
  kiln_clear_error();
  float a[4] = {1, 2, 3, 4};
  kiln_tensor x = kiln_from_host(a, KILN_F32, 1, SH4);
  KT_CHECK(!kiln_is_valid(kiln_linear_forward(l, x))); /* after a failed create */
  EXPECT_ERR("linear");
  kiln_tensor nul = {0, 0};
  KT_CHECK(!kiln_is_valid(kiln_linear_apply(x, nul, nul)));
  EXPECT_ERR("linear"); /* not the inner transpose */
  kiln_embedding *e = NULL;
  KT_CHECK(kiln_embedding_create(-1, 4, 1, &e) != KILN_OK && !e);
  EXPECT_ERR("embedding");
  KT_CHECK(!kiln_is_valid(kiln_embedding_forward(e, x)));
  EXPECT_ERR("embedding");
  kiln_layernorm *n = NULL;
  KT_CHECK(kiln_layernorm_create(0, 1e-5, true, &n) != KILN_OK && !n);
  EXPECT_ERR("layernorm");
  KT_CHECK(kiln_layernorm_create(4, -1.0, true, &n) != KILN_OK && !n);
  EXPECT_ERR("layernorm");
  KT_CHECK(!kiln_is_valid(kiln_layernorm_forward(n, x)));
  EXPECT_ERR("layernorm");
  kiln_mha *m = NULL;
  KT_CHECK(kiln_mha_create(6, 4, 0.0, 1, &m) != KILN_OK && !m);
  EXPECT_ERR("mha");
  KT_CHECK(kiln_mha_create(8, 2, 1.5, 1, &m) != KILN_OK && !m);
  EXPECT_ERR("mha");
  KT_CHECK(!kiln_is_valid(kiln_mha_forward(m, x, NULL)));
  EXPECT_ERR("mha");
  kiln_encoder_layer *el = NULL;
  KT_CHECK(kiln_encoder_layer_create(8, 2, 16, 0.0, (kiln_activation)9, KILN_NORM_POST, 1e-5, 1, &el) != KILN_OK);
  EXPECT_ERR("encoder_layer");
  KT_CHECK(kiln_encoder_layer_create(8, 2, 16, 0.0, KILN_ACTIVATION_RELU, (kiln_norm_position)-1, 1e-5, 1, &el) !=
           KILN_OK);
  EXPECT_ERR("encoder_layer");
  KT_CHECK(!kiln_is_valid(kiln_encoder_layer_forward(el, x, NULL)));
  EXPECT_ERR("encoder_layer");
  kiln_conv2d *c = NULL;
  KT_CHECK(kiln_conv2d_create(3, 4, 3, 0, 0, 1, 1, true, 1, &c) != KILN_OK && !c);
  EXPECT_ERR("conv2d");
  KT_CHECK(kiln_conv2d_create(3, 4, 3, 1, 0, 1, 0, true, 1, &c) != KILN_OK && !c);
  EXPECT_ERR("conv2d");
  KT_CHECK(kiln_conv2d_create(3, 4, 3, 1, -1, 1, 1, true, 1, &c) != KILN_OK && !c);
  EXPECT_ERR("conv2d");
  KT_CHECK(!kiln_is_valid(kiln_conv2d_forward(c, x)));
  EXPECT_ERR("conv2d");
  kiln_batchnorm2d *bn = NULL;
  KT_CHECK(kiln_batchnorm2d_create(-1, 1e-5, 0.1, &bn) != KILN_OK && !bn);
  EXPECT_ERR("batchnorm2d");
  KT_CHECK(!kiln_is_valid(kiln_batchnorm2d_forward(bn, x, true)));
  EXPECT_ERR("batchnorm2d");
  kiln_linear_destroy(NULL);
  kiln_embedding_destroy(NULL);
  kiln_layernorm_destroy(NULL);
  kiln_mha_destroy(NULL);
  kiln_encoder_layer_destroy(NULL);
  kiln_conv2d_destroy(NULL);
  kiln_batchnorm2d_destroy(NULL);
  EXPECT_OK();
  kiln_mark_step();
}

KT_TEST(test_nn_functions_misuse) {
  float a[4] = {1, 2, 3, 4};
  int64_t s4[4] = {1, 1, 2, 2};
  kiln_tensor x = kiln_from_host(a, KILN_F32, 4, s4);
  KT_CHECK(!kiln_is_valid(kiln_pool2d(x, (kiln_pool_kind)7, 2, 1, 0)));
  EXPECT_ERR("pool2d");
  KT_CHECK(!kiln_is_valid(kiln_pool2d(x, KILN_POOL_MAX, 0, 1, 0)));
  EXPECT_ERR("pool2d");
  KT_CHECK(!kiln_is_valid(kiln_pool2d(x, KILN_POOL_MAX, 2, -1, 0)));
  EXPECT_ERR("pool2d");
  KT_CHECK(!kiln_is_valid(kiln_dropout(x, -0.5, 1, true)));
  EXPECT_ERR("dropout");
  KT_CHECK(!kiln_is_valid(kiln_dropout(x, NAN, 1, true)));
  EXPECT_ERR("dropout");
  kiln_tensor nul = {0, 0};
  KT_CHECK(!kiln_is_valid(kiln_sdpa(nul, nul, nul, nul, 0.0, false, 1)));
  EXPECT_ERR("sdpa");
  KT_CHECK(!kiln_is_valid(kiln_conv2d_apply(x, nul, nul, 1, 0, 1, 1)));
  EXPECT_ERR("conv2d");
  KT_CHECK(!kiln_is_valid(kiln_cross_entropy(x, nul, -100, 0.0)));
  EXPECT_ERR("cross_entropy");
  int64_t s22[2] = {2, 2};
  kiln_tensor lg = kiln_reshape(x, 2, s22);
  kiln_tensor tg = kiln_arange(KILN_I64, 0, 2, 1);
  KT_CHECK(!kiln_is_valid(kiln_cross_entropy(lg, tg, -100, 2.0)));
  EXPECT_ERR("cross_entropy");
  KT_CHECK(!kiln_is_valid(kiln_cross_entropy(lg, tg, -100, NAN)));
  EXPECT_ERR("cross_entropy");
  KT_CHECK(!kiln_is_valid(kiln_mse_loss(x, nul)));
  EXPECT_ERR("mse_loss"); /* not the inner sub */
  kiln_mark_step();
}

KT_TEST(test_optim_misuse) {
  float a[4] = {1, 2, 3, 4};
  kiln_tensor p = kiln_param(kiln_from_host(a, KILN_F32, 1, SH4));
  kiln_sgd_opts so = {.lr = 0.1};
  kiln_adamw_opts ao = {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
  kiln_optim *o = NULL;
  KT_CHECK(kiln_optim_create_sgd(1, &p, &so, NULL) != KILN_OK);
  EXPECT_ERR("sgd|optim");
  KT_CHECK(kiln_optim_create_sgd(-1, &p, &so, &o) != KILN_OK && !o);
  EXPECT_ERR("sgd|optim");
  KT_CHECK(kiln_optim_create_sgd(1, NULL, &so, &o) != KILN_OK && !o);
  EXPECT_ERR("sgd|optim");
  KT_CHECK(kiln_optim_create_sgd(1, &p, NULL, &o) != KILN_OK && !o);
  EXPECT_ERR("sgd|optim");
  kiln_sgd_opts bad = {.lr = NAN};
  KT_CHECK(kiln_optim_create_sgd(1, &p, &bad, &o) != KILN_OK && !o);
  EXPECT_ERR("sgd|optim");
  kiln_tensor nul = {0, 0};
  KT_CHECK(kiln_optim_create_sgd(1, &nul, &so, &o) != KILN_OK && !o);
  EXPECT_ERR("sgd|optim");
  kiln_adamw_opts badb = ao;
  badb.beta1 = 1.5;
  KT_CHECK(kiln_optim_create_adamw(1, &p, &badb, &o) != KILN_OK && !o);
  EXPECT_ERR("adamw|optim");
  KT_CHECK(kiln_optim_create_adamw(0, &p, &ao, &o) != KILN_OK && !o);
  EXPECT_ERR("adamw|optim");
  /* the out parameter of a failed create, used */
  KT_CHECK(kiln_optim_step(o) != KILN_OK);
  EXPECT_ERR("optim step");
  kiln_optim_set_lr(o, 0.5);
  EXPECT_ERR_NOLOC("kiln_optim_set_lr");
  KT_CHECK(isnan(kiln_optim_lr(o)) || kiln_optim_lr(o) == 0);
  KT_CHECK(kiln_optim_step_count(o) <= 0);
  KT_CHECK(kiln_optim_set_step_count(o, 3) != KILN_OK);
  EXPECT_ERR("optim_set_step_count");
  KT_CHECK(kiln_optim_param_step_count(o, 0) == -1);
  KT_CHECK(kiln_optim_set_param_step_count(o, 0, 3) != KILN_OK);
  EXPECT_ERR("optim_set_param_step_count");
  KT_CHECK(kiln_optim_step_tensors(o, 1, &p, &p) != KILN_OK);
  EXPECT_ERR("optim step");
  kiln_optim_zero_grad(o);
  KT_EQ_INT(kiln_optim_state(o, 0, NULL, NULL, 0), -1);
  kiln_optim_destroy(o);
  kiln_clear_error();
  /* a live optimizer */
  KT_CHECK(kiln_optim_create_adamw(1, &p, &ao, &o) == KILN_OK && o);
  KT_CHECK(kiln_optim_step(o) == KILN_OK); /* no gradients: nothing to do */
  kiln_optim_zero_grad(o);                 /* before any backward */
  EXPECT_OK();
  KT_CHECK(kiln_optim_set_step_count(o, -1) != KILN_OK);
  EXPECT_ERR("optim_set_step_count");
  KT_EQ_INT(kiln_optim_param_step_count(o, 7), -1);
  KT_EQ_INT(kiln_optim_param_step_count(o, -1), -1);
  kiln_clear_error();
  KT_CHECK(kiln_optim_set_param_step_count(o, 7, 1) != KILN_OK);
  EXPECT_ERR("optim_set_param_step_count");
  KT_CHECK(kiln_optim_set_param_step_count(o, 0, -2) != KILN_OK);
  EXPECT_ERR("optim_set_param_step_count");
  KT_EQ_INT(kiln_optim_state(o, 9, NULL, NULL, 0), -1);
  KT_EQ_INT(kiln_optim_state(o, -1, NULL, NULL, 4), -1);
  kiln_clear_error();
  kiln_tensor other = kiln_param(kiln_from_host(a, KILN_F32, 1, SH4));
  kiln_tensor g = kiln_ones(KILN_F32, 1, SH4);
  KT_CHECK(kiln_optim_step_tensors(o, 1, &other, &g) != KILN_OK); /* not o's parameter */
  EXPECT_ERR("optim step");
  KT_CHECK(kiln_optim_step_tensors(o, 2, &p, &g) != KILN_OK);
  EXPECT_ERR("optim step");
  KT_CHECK(kiln_optim_step_tensors(o, 1, NULL, NULL) != KILN_OK);
  EXPECT_ERR("optim step");
  KT_CHECK(kiln_optim_step_tensors(o, -1, &p, &g) != KILN_OK);
  EXPECT_ERR("optim step");
  int64_t sh3[1] = {3};
  kiln_tensor g3 = kiln_ones(KILN_F32, 1, sh3);
  KT_CHECK(kiln_optim_step_tensors(o, 1, &p, &g3) != KILN_OK);
  EXPECT_ERR("optim step");
  kiln_optim_set_lr(o, NAN);
  EXPECT_ERR_NOLOC("kiln_optim_set_lr");
  kiln_optim_set_lr(o, -1.0);
  EXPECT_ERR_NOLOC("kiln_optim_set_lr");
  kiln_optim_set_lr(o, INFINITY);
  EXPECT_ERR_NOLOC("kiln_optim_set_lr");
  KT_NEAR(kiln_optim_lr(o), 0.1, 0); /* unchanged */
  kiln_optim_destroy(o);
  kiln_optim_destroy(NULL);
  KT_CHECK(isfinite(kiln_lr_warmup_cosine(-5, -1, -10, 0.1, 0.0)));
  KT_CHECK(isfinite(kiln_lr_warmup_cosine(5, 10, 0, 0.1, 0.0)));
  kiln_tensor outs[2];
  KT_CHECK(!kiln_is_valid(kiln_clip_grad_norm(-1, &g, outs, 1.0)));
  EXPECT_ERR("clip_grad_norm");
  KT_CHECK(!kiln_is_valid(kiln_clip_grad_norm(1, NULL, outs, 1.0)));
  EXPECT_ERR("clip_grad_norm");
  KT_CHECK(kiln_is_valid(kiln_clip_grad_norm(1, &nul, outs, 1.0))); /* a null gradient is skipped (torch's None) */
  EXPECT_OK();
  KT_CHECK(!kiln_is_valid(kiln_clip_grad_norm(1, &g, outs, -1.0)));
  EXPECT_ERR("clip_grad_norm");
  kiln_release(p);
  kiln_release(other);
  kiln_mark_step();
}

/* State: kiln_mark_step / kiln_wait / kiln_discard_step with nothing to do,
 * and a step after an error (sticky) still reports it, cleared after. */
KT_TEST(test_sync_points_in_any_state) {
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(kiln_wait() == KILN_OK);
  int64_t neg[1] = {-1};
  kiln_full(KILN_F32, 1, neg, 0.0);
  KT_CHECK(kiln_mark_step() != KILN_OK);
  KT_CHECK(kiln_wait() != KILN_OK);
  kiln_clear_error();
  KT_CHECK(misuse_sane());
  kiln_shutdown();
  KT_CHECK(kiln_mark_step() == KILN_OK); /* starts the runtime implicitly */
  KT_CHECK(misuse_sane());
}

/* Everything after kiln_shutdown (and so before the next kiln_init): the
 * queries answer, the first tracing call starts the runtime again. */
KT_TEST(test_calls_after_shutdown) {
  float a[4] = {1, 2, 3, 4};
  kiln_tensor k = kiln_keep(kiln_from_host(a, KILN_F32, 1, SH4));
  kiln_shutdown();
  kiln_release(k);
  kiln_zero_grad(k);
  kiln_clear_error();
  KT_CHECK(kiln_last_status() == KILN_OK && kiln_last_error() != NULL);
  (void)kiln_counter_value("MarkStep");
  KT_CHECK(kiln_metrics_report() != NULL);
  kiln_metrics_clear();
  KT_CHECK(kiln_grad_enabled());
  KT_EQ_INT(kiln_autocast_dtype(), KILN_F32);
  KT_CHECK(!kiln_profiler_active());
  KT_CHECK(kiln_wait() == KILN_OK);
  kiln_shutdown();
  KT_CHECK(kiln_discard_step() == KILN_OK);
  kiln_shutdown();
  KT_CHECK(kiln_backend_name() != NULL);
  kiln_shutdown();
  KT_CHECK(!kiln_is_valid(kiln_grad(k)));
  kiln_clear_error();
  kiln_shutdown();
  KT_CHECK(kiln_backward(k) != KILN_OK);
  EXPECT_ERR("backward");
  KT_CHECK(misuse_sane());
}

KT_MAIN(KT_CASE(test_runtime_lifecycle), KT_CASE(test_names_of_bad_enums), KT_CASE(test_bad_handles_queries),
        KT_CASE(test_bad_handles_sync), KT_CASE(test_stale_after_shutdown), KT_CASE(test_host_transfers),
        KT_CASE(test_dynamic_marks), KT_CASE(test_autocast_misuse), KT_CASE(test_autograd_misuse),
        KT_CASE(test_module_misuse), KT_CASE(test_nn_functions_misuse), KT_CASE(test_optim_misuse),
        KT_CASE(test_sync_points_in_any_state), KT_CASE(test_calls_after_shutdown))
