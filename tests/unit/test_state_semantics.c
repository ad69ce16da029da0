/* The state API interleaved with value reads: a read in the middle of a step
 * must not change the meaning of anything traced before it, a read before
 * kiln_backward keeps the tape, a loop that reads but never marks a step
 * finds its graphs in the cache, and handles survive no restart.
 *
 * Every case runs on both backends (cpu and ref); expected values are
 * computed here on the host in double precision from the same inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "kt.h"

static const char *const k_backends[] = {"cpu", "ref"};

static int start(const char *backend) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_options o = {0};
  o.backend = backend;
  o.num_threads = 2;
  return kiln_init(&o) == KILN_OK;
}

static kiln_tensor vec(const float *v, int64_t n) { return kiln_from_host(v, KILN_F32, 1, &n); }

static void read4(kiln_tensor t, float *out) { KT_CHECK(kiln_to_host(t, out, 4 * sizeof(float)) == KILN_OK); }

/* r = keep(2*A); A = A + B; read A; step: r is 2*(old A), for a kept
 * dependent, one that is not kept (read before the step ends), and an item
 * read of the assigned tensor. */
KT_TEST(read_of_assigned_tensor_keeps_earlier_meaning) {
  for (int bi = 0; bi < 2; bi++) {
    KT_CHECK(start(k_backends[bi]));
    const float a0[4] = {1, 2, 3, 4}, b0[4] = {10, 20, 30, 40};
    for (int variant = 0; variant < 3; variant++) {
      kiln_tensor A = kiln_keep(vec(a0, 4)), B = kiln_keep(vec(b0, 4));
      kiln_mark_step(); /* A and B are computed buffers now */
      kiln_tensor r = kiln_mul_c(A, 2.0), u = kiln_add_c(A, 1.0);
      if (variant != 1) kiln_keep(r);
      kiln_assign(A, kiln_add(A, B));
      float got[4], ua[4];
      if (variant == 2) {
        int64_t one = 1;
        kiln_tensor s = kiln_reshape(kiln_slice(A, 0, 0, 1, 1), 1, &one);
        KT_NEAR(kiln_item_f64(kiln_sum(s, 0, NULL, 0)), 11.0, 0);
      } else {
        read4(A, got);
        for (int i = 0; i < 4; i++) KT_NEAR(got[i], a0[i] + b0[i], 0);
      }
      read4(r, got); /* not kept in variant 1: read before the step ends */
      read4(u, ua);
      for (int i = 0; i < 4; i++) {
        KT_NEAR(got[i], 2.0 * a0[i], 0);
        KT_NEAR(ua[i], a0[i] + 1.0, 0);
      }
      KT_CHECK(kiln_mark_step() == KILN_OK);
      read4(A, got);
      for (int i = 0; i < 4; i++) KT_NEAR(got[i], a0[i] + b0[i], 0);
      if (variant != 1) {
        read4(r, got);
        for (int i = 0; i < 4; i++) KT_NEAR(got[i], 2.0 * a0[i], 0);
        kiln_release(r);
      }
      kiln_release(A);
      kiln_release(B);
      KT_CHECK_MSG(kiln_last_status() == KILN_OK, "[%s] %s", k_backends[bi], kiln_last_error());
    }
  }
  kiln_shutdown();
}

/* The training pattern: backward, an SGD update of w, a read of w before
 * the step marker; the kept gradient is the one of the old w. */
KT_TEST(read_after_update_keeps_gradient_of_old_weights) {
  for (int bi = 0; bi < 2; bi++) {
    KT_CHECK(start(k_backends[bi]));
    const float w0[4] = {0.5f, -1.0f, 2.0f, 0.25f}, x0[4] = {1, 2, 3, 4};
    kiln_tensor w = kiln_param(vec(w0, 4));
    kiln_requires_grad(w);
    for (int step = 0; step < 3; step++) {
      float wv[4];
      read4(w, wv);
      kiln_mark_step();
      kiln_tensor x = vec(x0, 4);
      /* loss = sum(w*w*x): dloss/dw = 2*w*x */
      kiln_tensor loss = kiln_sum(kiln_mul(kiln_mul(w, w), x), 0, NULL, 0);
      KT_CHECK(kiln_backward(loss) == KILN_OK);
      kiln_tensor g = kiln_grad(w);
      kiln_assign(w, kiln_sub(w, kiln_mul_c(g, 0.1)));
      float nw[4], gv[4];
      read4(w, nw);
      read4(g, gv);
      KT_CHECK(kiln_mark_step() == KILN_OK);
      float gv2[4];
      read4(g, gv2);
      for (int i = 0; i < 4; i++) {
        double ge = 2.0 * wv[i] * x0[i];
        KT_NEAR(gv[i], ge, 1e-5 * (1 + fabs(ge)));
        KT_NEAR(gv2[i], ge, 1e-5 * (1 + fabs(ge)));
        KT_NEAR(nw[i], wv[i] - 0.1 * ge, 1e-5 * (1 + fabs(ge)));
      }
      kiln_zero_grad(w);
    }
    KT_CHECK_MSG(kiln_last_status() == KILN_OK, "[%s] %s", k_backends[bi], kiln_last_error());
    kiln_release(w);
  }
  kiln_shutdown();
}

/* Logging the loss before backward (item, then backward of the same
 * tensor) works as in PyTorch. */
KT_TEST(value_read_before_backward_keeps_the_tape) {
  for (int bi = 0; bi < 2; bi++) {
    KT_CHECK(start(k_backends[bi]));
    const float w0[4] = {1, 2, 3, 4};
    kiln_tensor w = kiln_param(vec(w0, 4));
    kiln_requires_grad(w);
    kiln_mark_step();
    kiln_tensor loss = kiln_sum(kiln_mul(w, w), 0, NULL, 0);
    KT_NEAR(kiln_item_f64(loss), 30.0, 1e-4);
    KT_CHECK_MSG(kiln_backward(loss) == KILN_OK, "[%s] %s", k_backends[bi], kiln_last_error());
    kiln_mark_step();
    float gv[4];
    read4(kiln_grad(w), gv);
    for (int i = 0; i < 4; i++) KT_NEAR(gv[i], 2.0 * w0[i], 1e-5);
    /* a read tensor used in further ops: the gradient still flows through
     * it (3 * sum(w*w) + sum(w) after reading sum(w*w)) */
    kiln_zero_grad(w);
    kiln_tensor l1 = kiln_sum(kiln_mul(w, w), 0, NULL, 0);
    KT_NEAR(kiln_item_f64(l1), 30.0, 1e-4);
    kiln_tensor l2 = kiln_add(kiln_mul_c(l1, 3.0), kiln_sum(w, 0, NULL, 0));
    KT_CHECK_MSG(kiln_backward(l2) == KILN_OK, "[%s] %s", k_backends[bi], kiln_last_error());
    read4(kiln_grad(w), gv);
    for (int i = 0; i < 4; i++) KT_NEAR(gv[i], 6.0 * w0[i] + 1.0, 1e-5);
    kiln_mark_step();
    kiln_release(w);
    kiln_clear_error();
  }
  kiln_shutdown();
}

/* A loop that reads results but never marks a step: the second pass finds
 * the first pass's graph (no compile, no collision counted). */
KT_TEST(read_only_loop_hits_the_cache) {
  for (int bi = 0; bi < 2; bi++) {
    KT_CHECK(start(k_backends[bi]));
    const float w0[4] = {1, 2, 3, 4};
    kiln_tensor w = kiln_param(vec(w0, 4));
    kiln_mark_step();
    kiln_metrics_clear();
    for (int pass = 0; pass < 6; pass++) {
      float xv[4] = {(float)pass, 1, 2, 3}, out[4];
      kiln_tensor x = vec(xv, 4);
      /* x*w is traced before 2*w: on the first pass x's LEAF is made
       * before w's, on later passes w's LEAF and 2*w are the first pass's
       * nodes (hash-consed), made before x's: the same graph, made in
       * another order. */
      kiln_tensor xw = kiln_mul(x, w);
      kiln_tensor y = kiln_add(xw, kiln_mul_c(w, 2.0));
      read4(y, out);
      for (int i = 0; i < 4; i++) KT_NEAR(out[i], xv[i] * w0[i] + 2.0 * w0[i], 1e-6);
    }
    KT_EQ_INT(kiln_counter_value("GraphCacheKeyCollision"), 0);
    KT_CHECK_MSG(kiln_counter_value("UncachedCompile") == 1, "[%s] %lld compiles for 6 identical passes",
                 k_backends[bi], (long long)kiln_counter_value("UncachedCompile"));
    kiln_mark_step();
    kiln_release(w);
  }
  kiln_shutdown();
}

/* A loop that reads 10000 times without a step marker is told, once, that
 * its tensors live until the marker. */
KT_TEST(read_only_loop_is_warned_once) {
  char path[] = "/tmp/kiln-unmarked-XXXXXX";
  int fd = mkstemp(path);
  KT_CHECK(fd >= 0);
  close(fd);
  setenv("KILN_DEBUG", "1", 1);
  setenv("KILN_DEBUG_FILE", path, 1);
  KT_CHECK(start("ref"));
  const float one = 1.0f;
  int64_t n1 = 1;
  kiln_tensor w = kiln_param(kiln_from_host(&one, KILN_F32, 1, &n1));
  kiln_mark_step();
  for (int i = 0; i < 10050; i++) {
    float v;
    kiln_to_host(kiln_add_c(w, (double)(i & 7)), &v, sizeof v);
    if (v != 1.0f + (float)(i & 7)) KT_FAIL("pass %d read %g", i, v);
  }
  kiln_mark_step();
  kiln_release(w);
  kiln_shutdown();
  unsetenv("KILN_DEBUG");
  unsetenv("KILN_DEBUG_FILE");
  FILE *f = fopen(path, "r");
  char text[8192] = {0};
  if (f) {
    size_t got = fread(text, 1, sizeof text - 1, f);
    text[got] = 0;
    fclose(f);
  }
  unlink(path);
  KT_STR_CONTAINS(text, "10000 value reads");
  KT_STR_CONTAINS(text, "kiln_mark_step() once per iteration");
  KT_STR_CONTAINS(text, "test_state_semantics.c");
  char *first = strstr(text, "value reads and");
  KT_CHECK(first && !strstr(first + 1, "value reads and"));
  kiln_clear_error();
}

/* A handle from before kiln_shutdown is stale after the next kiln_init,
 * even when the new runtime reuses its slot. */
KT_TEST(handles_do_not_survive_a_restart) {
  KT_CHECK(start("ref"));
  const float a0[4] = {1, 2, 3, 4}, b0[4] = {5, 6, 7, 8};
  kiln_tensor old = kiln_keep(vec(a0, 4));
  kiln_mark_step();
  KT_CHECK(start("ref"));
  kiln_tensor fresh = kiln_keep(vec(b0, 4));
  kiln_mark_step();
  (void)fresh;
  float got[4];
  KT_CHECK(kiln_to_host(old, got, sizeof got) == KILN_ERR_STALE_HANDLE);
  KT_STR_CONTAINS(kiln_last_error(), "stale");
  KT_CHECK(!kiln_is_valid(old));
  kiln_shutdown();
  kiln_clear_error();
}

KT_MAIN(KT_CASE(read_of_assigned_tensor_keeps_earlier_meaning),
        KT_CASE(read_after_update_keeps_gradient_of_old_weights),
        KT_CASE(value_read_before_backward_keeps_the_tape), KT_CASE(read_only_loop_hits_the_cache),
        KT_CASE(read_only_loop_is_warned_once),
        KT_CASE(handles_do_not_survive_a_restart))
