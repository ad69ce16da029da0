/* The asynchronous executor under load: the tracing thread keeps queuing
 * steps, reading some values, releasing tensors whose buffers queued
 * executions still use, and donating buffers; results are checked against
 * a plain C model of the same computation. Also run under ThreadSanitizer
 * (make tsan). */
#include <kiln/kiln.h>

#include "kt.h"

#define N 4096

KT_TEST(pipeline_with_reads_and_releases) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  int64_t s[1] = {N};
  static float host[N], out[N];
  double model[N];
  for (int i = 0; i < N; i++) host[i] = model[i] = (float)(i % 17);
  kiln_tensor w = kiln_keep(kiln_from_host(host, KILN_F32, 1, s));
  for (int step = 0; step < 60; step++) {
    /* a temporary kept across one step, then released while queued */
    kiln_tensor tmp = kiln_keep(kiln_mul_c(w, 0.5));
    kiln_assign(w, kiln_add_s(kiln_mul_c(w, 0.5), (double)(step % 3)));
    KT_CHECK(kiln_mark_step() == KILN_OK);
    for (int i = 0; i < N; i++) model[i] = (float)((float)(model[i] * 0.5f) + (float)(step % 3));
    if (step % 7 == 0) {
      KT_CHECK(kiln_to_host(w, out, sizeof out) == KILN_OK);
      for (int i = 0; i < N; i += 97) KT_NEAR(out[i], model[i], 1e-4 * (1 + fabs(model[i])));
    }
    kiln_release(tmp);
  }
  KT_CHECK(kiln_wait() == KILN_OK);
  KT_CHECK(kiln_to_host(w, out, sizeof out) == KILN_OK);
  for (int i = 0; i < N; i++) KT_NEAR(out[i], model[i], 1e-4 * (1 + fabs(model[i])));
  KT_EQ_INT(kiln_counter_value("Execute") >= 60, 1);
  kiln_release(w);
  kiln_shutdown();
}

/* Shutdown with work still queued waits for it and frees everything. */
KT_TEST(shutdown_drains_queue) {
  kiln_shutdown();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  int64_t s[1] = {1 << 15};
  kiln_tensor a = kiln_keep(kiln_rand_uniform(KILN_F32, 1, s, 3));
  for (int i = 0; i < 10; i++) {
    kiln_assign(a, kiln_sqrt(kiln_add_c(a, 1.0)));
    kiln_mark_step();
  }
  kiln_shutdown(); /* no wait, no release: nothing may leak or crash */
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(pipeline_with_reads_and_releases), KT_CASE(shutdown_drains_queue))
