/* What kiln's reports say, checked against what the program did (the second
 * audit of docs/debugging.md): one bucket suggestion per call site whose
 * padding is the padding of following it, one median rule, and the "too
 * frequent" warnings of a loop that never marks a step. Oracles: the sizes
 * and counts the program makes, computed here by hand. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/debug.h"
#include "kiln/kiln.h"
#include "kt.h"

static char g_path[256];

/* Restart the runtime on the ref backend, counters cleared; level > 0:
 * KILN_DEBUG=level written to a fresh file (debug_output reads it). */
static void start(int level) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_metrics_clear();
  snprintf(g_path, sizeof g_path, "/tmp/kiln_test_explain_report_%ld.txt", (long)getpid());
  remove(g_path);
  if (level > 0) {
    char lv[8];
    snprintf(lv, sizeof lv, "%d", level);
    setenv("KILN_DEBUG", lv, 1);
    setenv("KILN_DEBUG_FILE", g_path, 1);
  } else {
    unsetenv("KILN_DEBUG");
    unsetenv("KILN_DEBUG_FILE");
  }
  kiln_options o = {.backend = "ref", .disk_cache = KILN_SWITCH_OFF, .dynamic_shapes = KILN_SWITCH_OFF};
  KT_EQ_INT(kiln_init(&o), KILN_OK);
}

/* The KILN_DEBUG output so far (caller frees). */
static char *debug_output(void) {
  FILE *f = fopen(g_path, "r");
  if (!f) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = calloc((size_t)n + 1, 1);
  if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
  fclose(f);
  return s;
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static kiln_tensor vec(int64_t n) {
  float *h = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = (float)i / (float)n;
  kiln_tensor t = kiln_from_host(h, KILN_F32, 1, &n);
  free(h);
  return t;
}

/* A batch size that varies, some sizes running far more often than others.
 * The report must make one suggestion for the site (before: the pattern's
 * "suggested boundaries: ..." counting each compiled size once, and the
 * executions line's "suggested buckets: ..." weighting by executions, two
 * different answers), and the padding it states must be the padding the
 * program gets by padding each batch it ran to the suggested buckets. */
KT_TEST(one_bucket_suggestion_with_its_real_padding) {
  static const int64_t sizes[] = {5, 12, 30, 9, 17, 5, 5, 12, 5, 30, 5, 12, 5, 7, 5, 12, 5, 30, 22, 5, 12, 5, 5};
  const int n = (int)(sizeof sizes / sizeof sizes[0]);
  start(1);
  kiln_tensor w = kiln_keep(vec(1));
  for (int s = 0; s < n; s++) {
    kiln_assign(w, kiln_add(w, kiln_sum(vec(sizes[s]), 0, NULL, 1)));
    kiln_mark_step();
  }
  kiln_wait();
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 7); /* one graph per distinct size */
  const char *ex = kiln_explain();
  const char *site = strstr(ex, "call sites that compiled more than one graph:");
  KT_CHECK(site != NULL);
  if (!site) return;
  KT_EQ_INT(count_of(site, "suggested buckets: ") + count_of(site, "suggested boundaries: "), 1);
  KT_STR_CONTAINS(site, "pad to buckets (suggested below)");
  const char *adv = strstr(site, "suggested buckets: ");
  KT_CHECK(adv != NULL);
  if (!adv) return;
  int64_t bounds[8];
  int nb = 0;
  const char *p = adv + strlen("suggested buckets: ");
  for (char *end; nb < 8; p = end + 2) {
    bounds[nb++] = strtoll(p, &end, 10);
    if (strncmp(end, ", ", 2) != 0) {
      p = end;
      break;
    }
  }
  double stated = -1;
  KT_EQ_INT(sscanf(p, " (padding waste %lf%%", &stated), 1);
  /* follow it: every batch that ran, padded to the smallest bucket that holds it */
  double pad = 0, total = 0;
  for (int s = 0; s < n; s++) {
    int64_t b = -1;
    for (int k = 0; k < nb && b < 0; k++)
      if (bounds[k] >= sizes[s]) b = bounds[k];
    KT_CHECK(b >= 0); /* the buckets hold every size */
    pad += (double)(b - sizes[s]);
    total += (double)b;
  }
  KT_CHECK(nb >= 1 && nb < 7); /* fewer graphs than before */
  KT_NEAR(stated, 100.0 * pad / total, 0.05 + 1e-9);
  /* the live records say the same: no other suggestion was printed */
  char *out = debug_output();
  KT_CHECK(!strstr(out, "suggested boundaries"));
  free(out);
}

/* Ten steps of two executions and ten of three: the median is 2.5, in
 * kiln_explain, kiln_metric_data and the metrics report (before: "median 2",
 * the lower middle value, where the profiler takes the mean of the two). */
KT_TEST(median_of_an_even_count_is_the_mean_of_the_middle_two) {
  start(0);
  kiln_tensor w = kiln_keep(vec(4));
  for (int s = 0; s < 20; s++) {
    kiln_assign(w, kiln_add_c(w, 1.0));
    int reads = s % 2 ? 1 : 2; /* + the step's own execution: 2 or 3 */
    for (int r = 0; r < reads; r++) KT_CHECK(isfinite(kiln_item_f64(kiln_sum(kiln_mul_c(w, r + 1), 0, NULL, 0))));
    kiln_mark_step();
  }
  kiln_wait();
  kiln_metric_stats st;
  KT_EQ_INT(kiln_metric_data("ExecutionsPerStep", &st), 0);
  KT_EQ_INT(st.count, 20);
  KT_NEAR(st.min, 2, 0);
  KT_NEAR(st.max, 3, 0);
  KT_NEAR(st.p50, 2.5, 0);
  KT_STR_CONTAINS(kiln_explain(), "  executions per step: median 2.5, max 3 over 20 steps\n");
  const char *rep = kiln_metrics_report(), *m = strstr(rep, "Metric: ExecutionsPerStep");
  KT_CHECK(m != NULL);
  if (m) {
    const char *pc = strstr(m, "50%=");
    KT_CHECK(pc && strncmp(pc, "50%=2.5;", 8) == 0);
  }
}

/* The S2 bug without step markers: a tensor accumulated by concat, read
 * every iteration, never a kiln_mark_step(). Every read compiles a new graph;
 * the "too frequent" warning must come while the loop runs (before: only at
 * kiln_mark_step, so nothing until the exit summary), rate-limited: again
 * only when the count doubled. */
KT_TEST(compiles_without_step_marker_warn_while_running) {
  start(1);
  int64_t one = 1;
  kiln_tensor acc = kiln_zeros(KILN_F32, 1, &one);
  const int iters = 80;
  int read_line = 0;
  for (int s = 0; s < iters; s++) {
    kiln_tensor both[2] = {acc, vec(2)};
    acc = kiln_concat(2, both, 0);
    KT_CHECK(isfinite(kiln_item_f64(kiln_sum(acc, 0, NULL, 0)))); read_line = __LINE__;
  }
  KT_EQ_INT(kiln_counter_value("MarkStep"), 0);
  KT_CHECK(kiln_counter_value("UncachedCompile") >= iters);
  char *out = debug_output(); /* before the exit summary */
  KT_CHECK(!strstr(out, "kiln: summary"));
  int warnings = count_of(out, "kiln: warning: CompileTime too frequent:");
  KT_CHECK(warnings >= 1);
  KT_CHECK(warnings <= 3); /* 32 -> 64 cuts: at most one per doubling */
  KT_STR_CONTAINS(out, "graph cuts since the last kiln_mark_step()");
  char want[64];
  snprintf(want, sizeof want, "test_explain_report.c:%d (value read)", read_line);
  KT_STR_CONTAINS(out, want);
  free(out);
  /* a loop with its step markers and a steady graph: no warning at all */
  start(1);
  kiln_tensor w = kiln_keep(vec(4));
  for (int s = 0; s < iters; s++) {
    kiln_assign(w, kiln_add_c(w, 1.0));
    KT_CHECK(isfinite(kiln_item_f64(kiln_sum(w, 0, NULL, 0))));
    kiln_mark_step();
  }
  out = debug_output();
  KT_CHECK(!strstr(out, "CompileTime too frequent"));
  free(out);
  start(0);
}

/* Two threads trace in turn, handing over at their step markers (the only
 * way kiln allows, kiln.h "Threads"); thread 0 also reads a value each
 * step. The report counts both threads' steps, executions and cuts, and
 * the read's line, exactly. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_turn, g_read_line;
static kiln_tensor g_w;

static void *tracer(void *arg) {
  int me = (int)(intptr_t)arg;
  for (int s = 0; s < 10; s++) {
    pthread_mutex_lock(&g_mu);
    while (g_turn != me) pthread_cond_wait(&g_cv, &g_mu);
    kiln_assign(g_w, kiln_add(g_w, kiln_sum(vec(4 + me), 0, NULL, 1)));
    if (me == 0) {
      (void)kiln_item_f64(kiln_sum(g_w, 0, NULL, 0)); g_read_line = __LINE__;
    }
    if (kiln_mark_step() != KILN_OK) g_turn = -1;
    else g_turn = 1 - me;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
  }
  return NULL;
}

KT_TEST(two_threads_tracing_in_turn_are_counted) {
  start(0);
  int64_t one = 1;
  g_w = kiln_keep(kiln_zeros(KILN_F32, 1, &one));
  kiln_mark_step();
  g_turn = 0;
  pthread_t t[2];
  for (intptr_t i = 0; i < 2; i++) KT_EQ_INT(pthread_create(&t[i], NULL, tracer, (void *)i), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  kiln_wait();
  KT_CHECK(g_turn != -1);
  const char *ex = kiln_explain();
  KT_STR_CONTAINS(ex, "  steps: 21\n");
  KT_STR_CONTAINS(ex, "  executions: 31 (1.48 per step)"); /* 1 + 10 reads + 20 steps */
  KT_STR_CONTAINS(ex, "  graph cuts: step marker 21, value read 10,");
  char want[128];
  snprintf(want, sizeof want, "        10        0        40B");
  KT_STR_CONTAINS(ex, want); /* ten 4-byte reads */
  snprintf(want, sizeof want, "read               test_explain_report.c:%d\n", g_read_line);
  KT_STR_CONTAINS(ex, want);
  float v = 0;
  KT_EQ_INT(kiln_to_host(g_w, &v, sizeof v), KILN_OK);
  KT_NEAR(v, 10 * (0 + 0.25 + 0.5 + 0.75) + 10 * (0 + 0.2 + 0.4 + 0.6 + 0.8), 1e-4);
}

KT_MAIN(KT_CASE(one_bucket_suggestion_with_its_real_padding),
        KT_CASE(median_of_an_even_count_is_the_mean_of_the_middle_two),
        KT_CASE(compiles_without_step_marker_warn_while_running),
        KT_CASE(two_threads_tracing_in_turn_are_counted))
