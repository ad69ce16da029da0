/* The metrics registry: counters, sampled metrics, percentiles, the report
 * format and the exit report. Oracles are computed here independently
 * (closed-form sums, nearest-rank percentiles of known sequences). */
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "debug/metrics.h"
#include "kiln/kiln.h"
#include "kt.h"

KT_TEST(counter_basic) {
  kiln_metrics_clear();
  KT_EQ_INT(kiln_counter_value("TestNeverCounted"), 0);
  kiln_counter_add("TestA", 1);
  kiln_counter_add("TestA", 41);
  KT_EQ_INT(kiln_counter_value("TestA"), 42);
  kiln_counter_add("TestA", -2);
  KT_EQ_INT(kiln_counter_value("TestA"), 40);
  /* NULL names are ignored, never a crash. */
  kiln_counter_add(NULL, 1);
  KT_EQ_INT(kiln_counter_value(NULL), 0);
}

/* The same name at a different address (a heap copy, a reused buffer) is the
 * same counter: the pointer cache is only a shortcut. */
KT_TEST(counter_keyed_by_content) {
  kiln_metrics_clear();
  char *copy = strdup("TestContent");
  kiln_counter_add("TestContent", 3);
  kiln_counter_add(copy, 4);
  KT_EQ_INT(kiln_counter_value("TestContent"), 7);
  char buf[32];
  snprintf(buf, sizeof buf, "TestBufX");
  kiln_counter_add(buf, 1);
  snprintf(buf, sizeof buf, "TestBufY"); /* same address, new text */
  kiln_counter_add(buf, 10);
  KT_EQ_INT(kiln_counter_value("TestBufX"), 1);
  KT_EQ_INT(kiln_counter_value("TestBufY"), 10);
  free(copy);
}

enum { THREADS = 4, ADDS = 100000 };
static void *adder(void *arg) {
  char name[32];
  snprintf(name, sizeof name, "TestThread%d", (int)(intptr_t)arg);
  for (int i = 0; i < ADDS; i++) {
    kiln_counter_add("TestShared", 1);
    kiln_counter_add(name, 2);
    if (i % 100 == 0) kiln_metric_record("TestSharedMetric", (double)i);
  }
  return NULL;
}

KT_TEST(counter_threads) {
  kiln_metrics_clear();
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, adder, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  KT_EQ_INT(kiln_counter_value("TestShared"), (int64_t)THREADS * ADDS);
  for (int i = 0; i < THREADS; i++) {
    char name[32];
    snprintf(name, sizeof name, "TestThread%d", i);
    KT_EQ_INT(kiln_counter_value(name), 2 * ADDS);
  }
  kiln_metric_stats st;
  KT_EQ_INT(kiln_metric_data("TestSharedMetric", &st), 0);
  KT_EQ_INT(st.count, THREADS * (ADDS / 100));
  /* each thread records 0, 100, ..., 99900: sum = 100 * (999*1000/2) */
  KT_NEAR(st.sum, (double)THREADS * 100.0 * 999.0 * 1000.0 / 2.0, 1e-6);
  KT_NEAR(st.min, 0, 0);
  KT_NEAR(st.max, 99900, 0);
}

KT_TEST(metric_stats) {
  kiln_metrics_clear();
  kiln_metric_stats st;
  KT_EQ_INT(kiln_metric_data("TestMissing", &st), -1);
  KT_EQ_INT(st.count, 0);
  /* 1..100 shuffled (37 is coprime with 100): order must not matter */
  for (int i = 0; i < 100; i++) kiln_metric_record("TestValues", (double)((i * 37) % 100 + 1));
  KT_EQ_INT(kiln_metric_data("TestValues", &st), 0);
  KT_EQ_INT(st.count, 100);
  KT_NEAR(st.sum, 5050, 0);
  KT_NEAR(st.min, 1, 0);
  KT_NEAR(st.max, 100, 0);
  /* nearest rank: the smallest value with >= p% of samples at or below it */
  KT_NEAR(st.p50, 50, 0);
  KT_NEAR(st.p90, 90, 0);
  KT_NEAR(st.p99, 99, 0);
  /* a counter and a metric may share a name without interfering */
  KT_EQ_INT(kiln_counter_value("TestValues"), 0);
}

/* Percentiles come from the most recent 1024 samples; count/sum/min/max from all. */
KT_TEST(metric_window) {
  kiln_metrics_clear();
  for (int i = 1; i <= 3000; i++) kiln_metric_record("TestWindow", (double)i);
  kiln_metric_stats st;
  KT_EQ_INT(kiln_metric_data("TestWindow", &st), 0);
  KT_EQ_INT(st.count, 3000);
  KT_NEAR(st.sum, 3000.0 * 3001.0 / 2.0, 0);
  KT_NEAR(st.min, 1, 0);
  KT_NEAR(st.max, 3000, 0);
  /* window = 1977..3000; rank ceil(0.5*1024) = 512 -> 1977 + 511 */
  KT_NEAR(st.p50, 2488, 0);
  KT_NEAR(st.p99, 1977 + 1013, 0); /* ceil(0.99*1024) = 1014 */
  /* NaN samples are dropped (they would poison min/max) */
  kiln_metric_record("TestWindow", NAN);
  KT_EQ_INT(kiln_metric_data("TestWindow", &st), 0);
  KT_EQ_INT(st.count, 3000);
}

KT_TEST(report_format) {
  kiln_metrics_clear();
  kiln_counter_add("TestZeta", 12);
  kiln_counter_add("TestAlpha", 3);
  kiln_metric_record("TestCompileTime", 1234567890.0); /* 1.23456789 s */
  kiln_metric_record("TestNodes", 200);
  kiln_metric_record("TestNodes", 400);
  const char *r = kiln_metrics_report();
  KT_STR_CONTAINS(r, "Counter: TestZeta\n  Value: 12\n");
  KT_STR_CONTAINS(r, "Counter: TestAlpha\n  Value: 3\n");
  KT_STR_CONTAINS(r, "Metric: TestCompileTime\n  TotalSamples: 1\n  Accumulator: 1s234ms567.890us\n");
  KT_STR_CONTAINS(r, "Metric: TestNodes\n  TotalSamples: 2\n  Accumulator: 600\n  ValueRate: ");
  KT_STR_CONTAINS(r, "Percentiles: 1%=200; 5%=200; 10%=200; 20%=200; 50%=200; 80%=400; 90%=400; 95%=400; 99%=400\n");
  KT_STR_CONTAINS(r, "Percentiles: 1%=1s234ms567.890us; ");
  /* sorted by name within each section */
  const char *a = strstr(r, "Counter: TestAlpha"), *z = strstr(r, "Counter: TestZeta");
  KT_CHECK(a && z && a < z);
  const char *c = strstr(r, "Metric: TestCompileTime"), *n = strstr(r, "Metric: TestNodes");
  KT_CHECK(c && n && c < n);
  /* Counters never counted since the clear are omitted. */
  kiln_metrics_clear();
  r = kiln_metrics_report();
  KT_CHECK(strstr(r, "TestZeta") == NULL);
  KT_EQ_INT(kiln_counter_value("TestZeta"), 0);
  kiln_metric_stats st;
  KT_EQ_INT(kiln_metric_data("TestNodes", &st), 0);
  KT_EQ_INT(st.count, 0);
}

KT_TEST(duration_format) {
  kiln_metrics_clear();
  kiln_metric_record("TestShortTime", 3808394.0); /* 3.808394 ms */
  kiln_metric_record("TestTinyTime", 250.0);
  kiln_metric_record("TestLongTime", 62.0 * 1e9 + 5e6); /* 1 min 2 s 5 ms */
  const char *r = kiln_metrics_report();
  KT_STR_CONTAINS(r, "Accumulator: 3ms808.394us\n");
  KT_STR_CONTAINS(r, "Accumulator: 0.250us\n");
  KT_STR_CONTAINS(r, "Accumulator: 1m02s005ms000.000us\n");
}

KT_TEST(now_monotonic) {
  uint64_t a = kiln_now_ns();
  uint64_t b = kiln_now_ns();
  KT_CHECK(b >= a);
  KT_CHECK(a > 0);
}

/* KILN_METRICS_FILE: the child process writes its report at exit. */
KT_TEST(exit_report_file) {
  char tmpl[] = "/tmp/kiln_metrics_test_XXXXXX";
  int fd = mkstemp(tmpl);
  KT_CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("KILN_METRICS_FILE", tmpl, 1);
    unsetenv("KILN_METRICS");
    kiln_metrics_clear();
    kiln_metrics_install_exit_report();
    kiln_metrics_install_exit_report(); /* idempotent: one report, not two */
    kiln_counter_add("TestExitCounter", 5);
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  KT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FILE *f = fopen(tmpl, "r");
  char text[4096] = {0};
  if (f) {
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
  }
  KT_STR_CONTAINS(text, "Counter: TestExitCounter\n  Value: 5\n");
  const char *first = strstr(text, "TestExitCounter");
  KT_CHECK(first && !strstr(first + 1, "TestExitCounter"));
  unlink(tmpl);
}

KT_MAIN(KT_CASE(counter_basic), KT_CASE(counter_keyed_by_content), KT_CASE(counter_threads), KT_CASE(metric_stats),
        KT_CASE(metric_window), KT_CASE(report_format), KT_CASE(duration_format), KT_CASE(now_monotonic),
        KT_CASE(exit_report_file))
