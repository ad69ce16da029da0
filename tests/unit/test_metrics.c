/* The metrics registry: counters, sampled metrics, percentiles, the report
 * format and the exit report; the text buffers (base/text.h) the reports are
 * built in. Oracles are computed here independently
 * (closed-form sums, nearest-rank percentiles of known sequences). */
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/config.h"
#include "base/text.h"
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
  /* p50 is the median, the mean of the middle two of an even count (one rule
   * in every report, base/stats.h); the others nearest rank: the smallest
   * value with >= p% of samples at or below it */
  KT_NEAR(st.p50, 50.5, 0);
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
  /* window = 1977..3000; the median: the mean of its 512th and 513th */
  KT_NEAR(st.p50, 2488.5, 0);
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
  KT_STR_CONTAINS(r, "Percentiles: 1%=200; 5%=200; 10%=200; 20%=200; 50%=300; 80%=400; 90%=400; 95%=400; 99%=400\n");
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

/* kiln_text_on writes like snprintf: truncated and NUL-terminated within
 * cap, len counting everything asked; a zero cap only counts. */
KT_TEST(text_fixed_buffer) {
  char buf[8];
  memset(buf, 'x', sizeof buf);
  kiln_text t = kiln_text_on(buf, sizeof buf);
  KT_CHECK(buf[0] == 0 && !strcmp(kiln_text_str(&t), ""));
  kiln_text_printf(&t, "%d-", 123);
  kiln_text_append(&t, "abcdef", 6);
  kiln_text_printf(&t, "%s", "tail");
  KT_CHECK(!strcmp(buf, "123-abc"));
  KT_EQ_INT((long long)t.len, 14);
  KT_CHECK(!t.failed);
  kiln_text_free(&t); /* empties it; the buffer stays the caller's */
  KT_CHECK(buf[0] == 0 && t.len == 0 && t.p == buf);
  kiln_text_json_str(&t, "a\"b");
  KT_CHECK(!strcmp(buf, "\"a\\\"b\""));
  char *copy = kiln_text_take(&t);
  KT_CHECK(copy && !strcmp(copy, "\"a\\\"b\"") && copy != buf);
  free(copy);
  kiln_text n = kiln_text_on(NULL, 0);
  kiln_text_printf(&n, "%s", "hello");
  kiln_text_append(&n, "!", 1);
  KT_EQ_INT((long long)n.len, 6);
  KT_CHECK(!strcmp(kiln_text_str(&n), ""));
}

KT_TEST(text_append_json) {
  kiln_text t = {0};
  kiln_text_append(&t, "", 0);
  KT_CHECK(t.p && !strcmp(t.p, "")); /* any append makes a string */
  kiln_text_append(&t, "ab\0c", 4);
  KT_EQ_INT((long long)t.len, 4);
  KT_CHECK(!memcmp(t.p, "ab\0c", 5));
  kiln_text_free(&t);
  kiln_text_json_str(&t, "q\"\\\n\x1f\xc3\xa9");
  KT_CHECK(!strcmp(kiln_text_str(&t), "\"q\\\"\\\\\\u000a\\u001f\xc3\xa9\""));
  kiln_text_json_str(&t, NULL);
  KT_CHECK(!strcmp(kiln_text_str(&t) + t.len - 2, "\"\""));
  /* past the first growth */
  kiln_text_free(&t);
  for (int i = 0; i < 1000; i++) kiln_text_append(&t, "0123456789", 10);
  KT_EQ_INT((long long)t.len, 10000);
  KT_CHECK(strlen(t.p) == 10000 && t.p[9999] == '9');
  kiln_text_free(&t);
}

KT_TEST(now_monotonic) {
  uint64_t a = kiln_now_ns();
  uint64_t b = kiln_now_ns();
  KT_CHECK(b >= a);
  KT_CHECK(a > 0);
}

/* Every block of the full report of a real run parses: "Metric: X" is
 * followed by exactly TotalSamples, Accumulator, ValueRate, Rate and
 * Percentiles with the nine percentiles; "Counter: X" by "  Value: N"
 * whose N is kiln_counter_value(X). */
KT_TEST(report_parses) {
  kiln_shutdown();
  kiln_metrics_clear();
  kiln_options o = {.backend = "ref", .disk_cache = KILN_SWITCH_OFF};
  KT_EQ_INT(kiln_init(&o), KILN_OK);
  int64_t n = 4;
  float h[4] = {1, 2, 3, 4};
  kiln_tensor p = kiln_keep(kiln_from_host(h, KILN_F32, 1, &n));
  for (int i = 0; i < 3; i++) {
    kiln_assign(p, kiln_mul_c(p, 2.0));
    KT_NEAR(kiln_item_f64(kiln_sum(p, 0, NULL, 0)), 10.0 * (1 << (i + 1)), 1e-4);
    kiln_mark_step();
  }
  KT_EQ_INT(kiln_wait(), KILN_OK); /* Execute counts finished executions */
  kiln_metric_record("TestSizeBytes", 1.5 * 1024 * 1024);
  char *r = strdup(kiln_metrics_report());
  int metrics = 0, counters = 0;
  static const char *const fields[] = {"  TotalSamples: ", "  Accumulator: ", "  ValueRate: ", "  Rate: ",
                                       "  Percentiles: 1%="};
  char *save = NULL;
  for (char *line = strtok_r(r, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (!strncmp(line, "Metric: ", 8)) {
      metrics++;
      for (int f = 0; f < 5; f++) {
        line = strtok_r(NULL, "\n", &save);
        KT_CHECK_MSG(line && !strncmp(line, fields[f], strlen(fields[f])), "metric block field %d: %s", f,
                     line ? line : "(end)");
        if (!line) break;
        if (f == 0) KT_CHECK(atoll(line + strlen(fields[0])) > 0);
        if (f == 4) {
          int semis = 0;
          for (const char *c = line; *c; c++) semis += *c == ';';
          KT_EQ_INT(semis, 8);
          KT_CHECK(strstr(line, "; 99%=") != NULL);
        }
      }
    } else if (!strncmp(line, "Counter: ", 9)) {
      counters++;
      char name[128];
      snprintf(name, sizeof name, "%s", line + 9);
      line = strtok_r(NULL, "\n", &save);
      KT_CHECK(line && !strncmp(line, "  Value: ", 9));
      if (line) KT_EQ_INT(atoll(line + 9), kiln_counter_value(name));
    } else if (!strcmp(line, "Source lines (graph cuts and device-to-host reads):")) {
      break; /* the per-line table ends the report */
    } else {
      KT_FAIL("unexpected report line: %s", line);
    }
  }
  KT_CHECK(metrics >= 5);  /* CompileTime, ExecuteTime, ... */
  KT_CHECK(counters >= 8); /* MarkStep, Execute, ... */
  free(r);
  r = (char *)kiln_metrics_report();
  KT_STR_CONTAINS(r, "Metric: TestSizeBytes\n  TotalSamples: 1\n  Accumulator: 1.50MB\n");
  KT_STR_CONTAINS(r, "Counter: StepMarkerCut\n  Value: 3\n");
  KT_STR_CONTAINS(r, "Counter: ValueReadCut\n  Value: 3\n");
  KT_STR_CONTAINS(r, "Source lines (graph cuts and device-to-host reads):\n     count compiles");
  /* the short report: the figures that matter, exact */
  const char *s = kiln_metrics_report_short();
  KT_STR_CONTAINS(s, "steps: 3\ncompiles: 2 (cached 4, from disk 0)\nexecutions: 6 (2.00 per step)\n");
  KT_STR_CONTAINS(s, "transfers to host: 3 (1.00 per step, 12B)\n");
  KT_STR_CONTAINS(s, "graph cuts: step marker 3, value read 3, data-dependent 0, explicit compile 0\n");
  kiln_shutdown();
}

/* A minimal JSON checker (RFC 8259 grammar, no semantics): returns the
 * position after one value, or NULL. */
static const char *json_ws(const char *p) {
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
  return p;
}
static const char *json_value(const char *p);
static const char *json_string(const char *p) {
  if (*p++ != '"') return NULL;
  for (; *p && *p != '"'; p++) {
    if ((unsigned char)*p < 0x20) return NULL;
    if (*p == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL;
        p += 4;
      } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
        return NULL;
      }
    }
  }
  return *p == '"' ? p + 1 : NULL;
}
static const char *json_value(const char *p) {
  p = json_ws(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = json_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        p = json_string(json_ws(p));
        if (!p) return NULL;
        p = json_ws(p);
        if (*p++ != ':') return NULL;
      }
      p = json_value(p);
      if (!p) return NULL;
      p = json_ws(p);
      if (*p == close) return p + 1;
      if (*p++ != ',') return NULL;
    }
  }
  if (*p == '"') return json_string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  char *end;
  if (*p != '-' && (*p < '0' || *p > '9')) return NULL;
  strtod(p, &end);
  return end > p ? end : NULL;
}

KT_TEST(json_report) {
  kiln_metrics_clear();
  kiln_counter_add("TestJsonCounter", 41);
  kiln_counter_add("Test\"Quoted\\Name", 1);
  kiln_metric_record("TestJsonTime", 1500.0);
  kiln_metric_record("TestJsonTime", 2500.0);
  const char *j = kiln_metrics_report_json();
  const char *end = json_value(j);
  KT_CHECK_MSG(end && *json_ws(end) == 0, "invalid JSON: %s", j);
  KT_STR_CONTAINS(j, "\"TestJsonCounter\":41");
  KT_STR_CONTAINS(j, "\"Test\\\"Quoted\\\\Name\":1");
  /* numbers parse back to the stored values */
  const char *m = strstr(j, "\"TestJsonTime\":{\"count\":");
  KT_CHECK(m != NULL);
  if (m) {
    KT_EQ_INT(atoll(m + strlen("\"TestJsonTime\":{\"count\":")), 2);
    const char *sum = strstr(m, "\"sum\":");
    KT_CHECK(sum && strtod(sum + 6, NULL) == 4000.0);
    const char *mx = strstr(m, "\"max\":");
    KT_CHECK(mx && strtod(mx + 6, NULL) == 2500.0);
  }
  KT_STR_CONTAINS(j, "\"sites\":[");
}

KT_TEST(names_and_clear_one) {
  kiln_metrics_clear();
  kiln_counter_add("TestNameB", 2);
  kiln_counter_add("TestNameA", 1);
  kiln_metric_record("TestNameM", 1);
  const char *names[64];
  int n = kiln_counter_names(names, 64);
  KT_EQ_INT(n, 2);
  if (n == 2) {
    KT_CHECK(!strcmp(names[0], "TestNameA"));
    KT_CHECK(!strcmp(names[1], "TestNameB"));
  }
  KT_EQ_INT(kiln_counter_names(NULL, 0), 2);
  KT_EQ_INT(kiln_metric_names(names, 64), 1);
  KT_CHECK(!strcmp(names[0], "TestNameM"));
  kiln_counter_clear("TestNameB");
  kiln_counter_clear("TestNeverSeen");
  kiln_counter_clear(NULL);
  KT_EQ_INT(kiln_counter_value("TestNameB"), 0);
  KT_EQ_INT(kiln_counter_value("TestNameA"), 1);
  KT_EQ_INT(kiln_counter_names(names, 1), 1);
  kiln_metric_clear("TestNameM");
  KT_EQ_INT(kiln_metric_names(NULL, 0), 0);
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
    kiln_config_load(); /* read again: the parent may have loaded it before the change */
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
  /* written through a temporary file renamed into place: none is left */
  char tmp[128];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", tmpl, (long)pid);
  KT_CHECK(access(tmp, F_OK) != 0);
  unlink(tmpl);
}

KT_MAIN(KT_CASE(counter_basic), KT_CASE(counter_keyed_by_content), KT_CASE(counter_threads), KT_CASE(metric_stats),
        KT_CASE(metric_window), KT_CASE(report_format), KT_CASE(duration_format), KT_CASE(text_fixed_buffer),
        KT_CASE(text_append_json), KT_CASE(now_monotonic), KT_CASE(exit_report_file), KT_CASE(report_parses),
        KT_CASE(json_report), KT_CASE(names_and_clear_one))
