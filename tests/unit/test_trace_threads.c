/* Two threads tracing at once: the second thread's calls are refused with an
 * error naming both calls, the first thread's work is unharmed, and tracing
 * may move to another thread after a step marker. */
#include <pthread.h>
#include <stdint.h>

#include "kiln/kiln.h"
#include "kt.h"

typedef struct job {
  kiln_tensor in, out;
  kiln_status read_status;
  float value;
} job;

static void *second_thread(void *arg) {
  job *j = arg;
  j->out = kiln_add_c(j->in, 1.0); /* refused: the main thread is tracing */
  j->read_status = kiln_to_host(j->in, &j->value, sizeof j->value);
  return NULL;
}

static void *next_owner(void *arg) {
  job *j = arg;
  j->out = kiln_keep(kiln_mul_c(j->in, 3.0));
  j->read_status = kiln_mark_step();
  kiln_to_host(j->out, &j->value, sizeof j->value);
  return NULL;
}

KT_TEST(second_tracing_thread_is_refused) {
  kiln_options o = {0};
  o.backend = "ref";
  KT_CHECK(kiln_init(&o) == KILN_OK);
  float v = 2.0f;
  int64_t one = 1;
  kiln_tensor x = kiln_keep(kiln_from_host(&v, KILN_F32, 1, &one)); /* this thread traces the step */
  kiln_tensor y = kiln_mul_c(x, 5.0);
  job j = {x, {0, 0}, KILN_OK, 0};
  pthread_t th;
  KT_CHECK(pthread_create(&th, NULL, second_thread, &j) == 0);
  pthread_join(th, NULL);
  KT_CHECK(!kiln_is_valid(j.out));
  KT_CHECK(j.read_status != KILN_OK);
  KT_STR_CONTAINS(kiln_last_error(), "tracing from two threads");
  KT_STR_CONTAINS(kiln_last_error(), "test_trace_threads.c:37"); /* the first thread's first call */
  KT_STR_CONTAINS(kiln_last_error(), "test_trace_threads.c:18"); /* the refused call */
  kiln_clear_error();
  float got = 0;
  KT_CHECK(kiln_to_host(y, &got, sizeof got) == KILN_OK); /* the first thread's work is intact */
  KT_NEAR(got, 10.0, 0);
  KT_CHECK(kiln_mark_step() == KILN_OK);

  /* after the marker another thread may take over */
  job k = {x, {0, 0}, KILN_ERR_INTERNAL, 0};
  KT_CHECK(pthread_create(&th, NULL, next_owner, &k) == 0);
  pthread_join(th, NULL);
  KT_EQ_INT(k.read_status, KILN_OK);
  KT_NEAR(k.value, 6.0, 0);
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
  kiln_shutdown();
}

KT_MAIN(KT_CASE(second_tracing_thread_is_refused))
