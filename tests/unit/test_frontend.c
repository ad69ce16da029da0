/* Frontend and runtime contracts: lifetimes, stale handles, errors with
 * the caller's file:line, graph caching, value reads, donation, async
 * execution. Runs on the backend chosen by KILN_BACKEND (default cpu);
 * results are checked against values computed here in plain C. */
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include "kt.h"
#include "frontend/session.h" /* the frontend singleton's state */

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_metrics_clear();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

KT_TEST(lazy_add_and_read) {
  start();
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, out[6];
  int64_t sa[2] = {2, 3}, sb[1] = {3};
  kiln_tensor ta = kiln_from_host(a, KILN_F32, 2, sa);
  kiln_tensor tb = kiln_from_host(b, KILN_F32, 1, sb);
  kiln_tensor c = kiln_mul_c(kiln_add(ta, tb), 2.0); /* broadcast */
  KT_EQ_INT(kiln_counter_value("Execute"), 0);      /* nothing ran yet: lazy */
  KT_CHECK(kiln_to_host(c, out, sizeof out) == KILN_OK);
  for (int i = 0; i < 6; i++) KT_NEAR(out[i], (a[i] + b[i % 3]) * 2, 1e-6);
  KT_EQ_INT(kiln_counter_value("ValueReadCut"), 1);
  KT_EQ_INT(kiln_counter_value("TransferFromDevice"), 1);
  kiln_shutdown();
}

/* A training-style loop: a kept parameter updated in place each step
 * compiles once and then hits the cache; a new scalar value never
 * recompiles. */
KT_TEST(loop_compiles_once) {
  start();
  int64_t s[1] = {1000};
  static float w0[1000];
  for (int i = 0; i < 1000; i++) w0[i] = (float)i;
  kiln_tensor w = kiln_keep(kiln_from_host(w0, KILN_F32, 1, s));
  double expect[1000];
  for (int i = 0; i < 1000; i++) expect[i] = w0[i];
  for (int step = 0; step < 10; step++) {
    double lr = 0.1 * (step + 1);
    kiln_tensor g = kiln_mul_c(w, 0.5);
    kiln_assign(w, kiln_sub(w, kiln_mul_s(g, lr)));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    for (int i = 0; i < 1000; i++) expect[i] = (float)(expect[i] - (float)((float)(expect[i] * 0.5f) * (float)lr));
  }
  static float out[1000];
  KT_CHECK(kiln_to_host(w, out, sizeof out) == KILN_OK);
  for (int i = 0; i < 1000; i++) KT_NEAR(out[i], expect[i], 1e-3 * (1 + fabs(expect[i])));
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
  KT_EQ_INT(kiln_counter_value("CachedCompile"), 9);
  KT_EQ_INT(kiln_counter_value("MarkStep"), 10);
  kiln_release(w);
  kiln_shutdown();
}

KT_TEST(stale_handle_is_an_error_not_a_crash) {
  start();
  int64_t s[1] = {4};
  kiln_tensor t = kiln_zeros(KILN_F32, 1, s);
  kiln_mark_step(); /* t was not kept: released */
  kiln_clear_error();
  kiln_tensor u = kiln_add_c(t, 1.0);
  KT_CHECK(!kiln_is_valid(u));
  KT_CHECK(kiln_last_status() == KILN_ERR_STALE_HANDLE);
  KT_STR_CONTAINS(kiln_last_error(), "stale");
  KT_STR_CONTAINS(kiln_last_error(), "test_frontend.c");
  float out[4];
  kiln_clear_error();
  KT_CHECK(kiln_to_host(t, out, sizeof out) == KILN_ERR_STALE_HANDLE);
  kiln_clear_error();
  kiln_release(t); /* releasing a stale handle: reported, no crash */
  kiln_shutdown();
}

/* A handle kept across kiln_shutdown: the error names the shutdown, not a
 * step marker or kiln_release, which the program never called on it. */
KT_TEST(handle_from_before_shutdown_names_the_shutdown) {
  start();
  int64_t s[1] = {4};
  kiln_tensor t = kiln_keep(kiln_zeros(KILN_F32, 1, s));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  kiln_shutdown();
  start();
  kiln_clear_error();
  KT_CHECK(!kiln_is_valid(kiln_add_c(t, 1.0)));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_STALE_HANDLE);
  KT_STR_CONTAINS(kiln_last_error(), "add: tensor handle");
  KT_STR_CONTAINS(kiln_last_error(), "is stale: it was made before kiln_shutdown()");
  KT_CHECK(strstr(kiln_last_error(), "step marker") == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "test_frontend.c:");
  /* a handle of this session released at a step marker still says so */
  kiln_tensor u = kiln_zeros(KILN_F32, 1, s);
  kiln_mark_step();
  kiln_clear_error();
  KT_CHECK(!kiln_is_valid(kiln_neg(u)));
  KT_STR_CONTAINS(kiln_last_error(), "released at a step marker or by kiln_release");
  kiln_clear_error();
  kiln_shutdown();
}

KT_TEST(shape_error_names_op_shapes_and_line) {
  start();
  int64_t s1[2] = {2, 3}, s2[2] = {4, 5};
  kiln_tensor a = kiln_zeros(KILN_F32, 2, s1), b = kiln_zeros(KILN_F32, 2, s2);
  int line = __LINE__ + 1;
  kiln_tensor c = kiln_add(a, b);
  KT_CHECK(!kiln_is_valid(c));
  KT_CHECK(kiln_last_status() == KILN_ERR_INVALID_ARGUMENT);
  char where[64];
  snprintf(where, sizeof where, "test_frontend.c:%d", line);
  KT_STR_CONTAINS(kiln_last_error(), where);
  KT_STR_CONTAINS(kiln_last_error(), "add");
  KT_STR_CONTAINS(kiln_last_error(), "[2,3]");
  KT_STR_CONTAINS(kiln_last_error(), "[4,5]");
  /* poison propagates silently; the sticky status keeps the first error */
  kiln_tensor d = kiln_exp(c);
  KT_CHECK(!kiln_is_valid(d));
  KT_STR_CONTAINS(kiln_last_error(), where);
  KT_CHECK(kiln_mark_step() == KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  int64_t bad[2] = {7, -1};
  kiln_tensor r = kiln_reshape(a, 2, bad);
  KT_CHECK(!kiln_is_valid(r));
  KT_STR_CONTAINS(kiln_last_error(), "reshape");
  kiln_clear_error();
  kiln_tensor m = kiln_matmul(a, a);
  KT_CHECK(!kiln_is_valid(m));
  KT_STR_CONTAINS(kiln_last_error(), "matmul");
  kiln_shutdown();
}

KT_TEST(value_read_executes_only_what_is_needed) {
  start();
  int64_t s[1] = {3};
  float x[3] = {1, 2, 3};
  kiln_tensor t = kiln_from_host(x, KILN_F32, 1, s);
  kiln_tensor a = kiln_keep(kiln_exp(t));
  kiln_tensor b = kiln_sum(kiln_mul(t, t), 0, NULL, 0);
  KT_NEAR(kiln_item_f64(b), 14.0, 1e-5);
  KT_EQ_INT(kiln_counter_value("Execute") + 0 * kiln_wait(), 1);
  KT_CHECK(kiln_mark_step() == KILN_OK); /* computes a */
  kiln_wait();
  KT_EQ_INT(kiln_counter_value("Execute"), 2);
  float out[3];
  kiln_to_host(a, out, sizeof out);
  for (int i = 0; i < 3; i++) KT_NEAR(out[i], expf(x[i]), 1e-5);
  kiln_release(a);
  kiln_shutdown();
}

/* Distinct graphs forced onto one cache key must never run each other's
 * program: the structural check turns the collision into a miss. */
KT_TEST(forced_hash_collision_runs_the_right_program) {
  start();
  kiln_runtime_test_force_key(0x1234);
  int64_t s[1] = {4};
  float x[4] = {1, 2, 3, 4}, out[4];
  kiln_tensor t = kiln_from_host(x, KILN_F32, 1, s);
  kiln_to_host(kiln_add_c(t, 1.0), out, sizeof out);
  KT_NEAR(out[3], 5.0, 1e-6);
  kiln_to_host(kiln_mul_c(t, 3.0), out, sizeof out);
  KT_NEAR(out[3], 12.0, 1e-6);
  kiln_to_host(kiln_add(t, t), out, sizeof out);
  KT_NEAR(out[3], 8.0, 1e-6);
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 3);
  KT_CHECK(kiln_counter_value("GraphCacheKeyCollision") >= 2);
  kiln_runtime_test_force_key(0);
  kiln_shutdown();
}

/* x + x and x + y have the same node hashes; they must not share a program. */
KT_TEST(aliasing_pattern_is_part_of_the_graph) {
  start();
  int64_t s[1] = {2};
  float x[2] = {1, 2}, y[2] = {10, 20}, out[2];
  kiln_tensor tx = kiln_from_host(x, KILN_F32, 1, s), ty = kiln_from_host(y, KILN_F32, 1, s);
  kiln_to_host(kiln_add(tx, ty), out, sizeof out);
  KT_NEAR(out[1], 22.0, 1e-6);
  kiln_to_host(kiln_add(tx, tx), out, sizeof out);
  KT_NEAR(out[1], 4.0, 1e-6);
  kiln_shutdown();
}

KT_TEST(new_seed_never_recompiles) {
  start();
  int64_t s[1] = {1000};
  double mean[3];
  for (int k = 0; k < 3; k++) {
    kiln_tensor r = kiln_keep(kiln_rand_uniform(KILN_F32, 1, s, 1000 + k));
    kiln_mark_step();
    mean[k] = kiln_item_f64(kiln_mean(r, 0, NULL, 0));
    kiln_release(r);
  }
  KT_CHECK(mean[0] != mean[1]);
  for (int k = 0; k < 3; k++) KT_NEAR(mean[k], 0.5, 0.05);
  /* one compile for the step graph and one for the mean read */
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 2);
  kiln_shutdown();
}

/* Tracing the next step while the previous one runs: results stay right
 * when the program reads values later. */
KT_TEST(async_pipeline_keeps_order) {
  start();
  int64_t s[1] = {1 << 16};
  kiln_tensor acc = kiln_keep(kiln_zeros(KILN_F32, 1, s));
  for (int i = 0; i < 20; i++) {
    kiln_assign(acc, kiln_add_s(acc, 1.0));
    kiln_mark_step();
  }
  KT_NEAR(kiln_item_f64(kiln_sum(acc, 0, NULL, 0)), 20.0 * (1 << 16), 1.0);
  kiln_release(acc);
  kiln_shutdown();
}

KT_TEST(many_temporaries_no_leak) {
  start();
  int64_t s[2] = {8, 8};
  kiln_tensor w = kiln_keep(kiln_ones(KILN_F32, 2, s));
  for (int step = 0; step < 50; step++) {
    kiln_tensor x = kiln_rand_normal(KILN_F32, 2, s, (uint64_t)step);
    kiln_tensor y = kiln_relu(kiln_matmul(x, w));
    kiln_tensor l = kiln_mean(kiln_mul(y, y), 0, NULL, 0);
    kiln_assign(w, kiln_sub(w, kiln_mul_s(kiln_expand(kiln_reshape(l, 0, NULL), 2, s), 1e-3)));
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  KT_CHECK(kiln_wait() == KILN_OK);
  kiln_release(w);
  KT_EQ_INT(kiln_fe_peek()->fe.n_kept, 0);
  kiln_shutdown(); /* LeakSanitizer checks the rest */
}

/* A parameter updated in place is written into its own buffer (donated),
 * not copied into a new one; a buffer another tensor still holds is not. */
KT_TEST(parameter_update_is_donated) {
  start();
  int64_t s[1] = {256};
  kiln_tensor w = kiln_keep(kiln_ones(KILN_F32, 1, s));
  kiln_mark_step();
  kiln_frontend *fe = &kiln_fe_peek()->fe;
  void *p0 = fe->slots[w.index].buf->data;
  for (int i = 0; i < 5; i++) {
    kiln_assign(w, kiln_mul_c(w, 2.0));
    kiln_mark_step();
    KT_CHECK(fe->slots[w.index].buf->data == p0);
  }
  KT_NEAR(kiln_item_f64(kiln_sum(w, 0, NULL, 0)), 256.0 * 32, 1e-3);
  /* another kept tensor shares the value: no donation, both stay right */
  kiln_tensor v = kiln_keep(kiln_ones(KILN_F32, 1, s));
  kiln_mark_step();
  kiln_tensor alias = kiln_keep(kiln_zeros(KILN_F32, 1, s));
  kiln_assign(alias, v); /* alias now shares v's buffer */
  kiln_assign(v, kiln_add_c(v, 1.0));
  kiln_mark_step();
  KT_NEAR(kiln_item_f64(kiln_sum(v, 0, NULL, 0)), 512.0, 1e-3);
  KT_NEAR(kiln_item_f64(kiln_sum(alias, 0, NULL, 0)), 256.0, 1e-3);
  kiln_release(w);
  kiln_release(v);
  kiln_release(alias);
  kiln_shutdown();
}

/* Every op returns a tensor of its own, also when it leaves its input as it
 * is (a roll by 0 or by the size, a flip of no axis or of a size-1 axis, a
 * reflect or replicate pad of nothing, an identity permute, a reshape or
 * cast to what it is, dropout in evaluation or with p = 0): assigning to the
 * input afterwards leaves the result's value as it was, and releasing both
 * is no stale-handle error. The differential test found roll and pad
 * returning their input's handle. */
KT_TEST(an_op_that_changes_nothing_returns_a_tensor_of_its_own) {
  enum { N_OPS = 11 };
  for (int op = 0; op < N_OPS; op++) {
    start();
    const float v[6] = {1, -2, 3, -4, 5, -6};
    const int64_t sh[2] = {6, 1}, zero[2] = {0, 0};
    const int perm[2] = {0, 1}, ax1[1] = {1};
    kiln_tensor x = kiln_from_host(v, KILN_F32, 2, sh), y = {0, 0};
    switch (op) {
      case 0: y = kiln_roll(x, 0, 0); break;
      case 1: y = kiln_roll(x, 6, 0); break;
      case 2: y = kiln_flip(x, 0, NULL); break;
      case 3: y = kiln_flip(x, 1, ax1); break; /* axis 1 has size 1 */
      case 4: y = kiln_pad_with(x, zero, zero, KILN_PAD_REFLECT, 0.0); break;
      case 5: y = kiln_pad_with(x, zero, zero, KILN_PAD_REPLICATE, 0.0); break;
      case 6: y = kiln_permute(x, perm); break;
      case 7: y = kiln_reshape(x, 2, sh); break;
      case 8: y = kiln_cast(x, KILN_F32); break;
      case 9: y = kiln_dropout(x, 0.5, 1, false); break;
      default: y = kiln_dropout(x, 0.0, 1, true); break;
    }
    KT_CHECK_MSG(y.index != x.index || y.gen != x.gen, "op %d returned its input's handle", op);
    kiln_assign(x, kiln_mul_c(x, 10.0));
    float got[6] = {0};
    KT_CHECK(kiln_to_host(y, got, sizeof got) == KILN_OK);
    for (int i = 0; i < 6; i++) KT_CHECK_MSG(got[i] == v[i], "op %d: y[%d] = %g after the input was assigned", op, i, got[i]);
    kiln_release(y);
    kiln_release(x);
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "op %d: %s", op, kiln_last_error());
    kiln_shutdown();
  }
}

/* Device buffers of a length that varies step to step are reused by the
 * lengths near them (the buffer cache serves 64 KiB and up at four sizes per
 * power of two): 120,000 and 124,000 bytes share a size, 160,000 does not;
 * every value still reads back as written. */
KT_TEST(a_buffer_is_reused_by_a_nearby_size) {
  start();
  static float x[40000], back[40000];
  const int64_t n[3] = {30000, 31000, 40000};
  const int64_t reused[3] = {0, 1, 0}; /* BufferReuse added by each upload */
  for (int k = 0; k < 3; k++) {
    for (int64_t i = 0; i < n[k]; i++) x[i] = (float)(i % 977) * 0.5f + (float)k;
    int64_t r0 = kiln_counter_value("BufferReuse");
    kiln_tensor t = kiln_from_host(x, KILN_F32, 1, &n[k]);
    KT_EQ_INT(kiln_counter_value("BufferReuse") - r0, reused[k]);
    KT_CHECK(kiln_to_host(t, back, sizeof(float) * (size_t)n[k]) == KILN_OK);
    for (int64_t i = 0; i < n[k]; i += 997) KT_NEAR(back[i], x[i], 0);
    KT_NEAR(back[n[k] - 1], x[n[k] - 1], 0);
    kiln_release(t);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  kiln_shutdown();
}

KT_MAIN(KT_CASE(parameter_update_is_donated), KT_CASE(a_buffer_is_reused_by_a_nearby_size), KT_CASE(lazy_add_and_read), KT_CASE(loop_compiles_once), KT_CASE(stale_handle_is_an_error_not_a_crash),
        KT_CASE(handle_from_before_shutdown_names_the_shutdown),
        KT_CASE(shape_error_names_op_shapes_and_line), KT_CASE(value_read_executes_only_what_is_needed),
        KT_CASE(forced_hash_collision_runs_the_right_program), KT_CASE(aliasing_pattern_is_part_of_the_graph),
        KT_CASE(new_seed_never_recompiles), KT_CASE(async_pipeline_keeps_order), KT_CASE(many_temporaries_no_leak),
        KT_CASE(an_op_that_changes_nothing_returns_a_tensor_of_its_own))
