/* The audit of what kiln tells the user (docs/debugging.md): programs with
 * one performance problem each, known by construction, and the statement
 * kiln must make about it. Oracles: the program's own source lines
 * (__LINE__), the counts it makes, and the cause it was written with. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "kt.h"

/* Restart the runtime on the ref backend (its compiles are instant; the
 * analysis does not depend on the backend), counters cleared, KILN_DEBUG
 * unset: kiln_explain() says everything checked here. */
static void start(kiln_switch dynamic) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_metrics_clear();
  unsetenv("KILN_DEBUG");
  unsetenv("KILN_DEBUG_FILE");
  kiln_options o = {.backend = "ref", .disk_cache = KILN_SWITCH_OFF, .dynamic_shapes = dynamic};
  KT_EQ_INT(kiln_init(&o), KILN_OK);
}

static kiln_tensor vec(int64_t n) {
  float *h = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = (float)i / (float)n;
  kiln_tensor t = kiln_from_host(h, KILN_F32, 1, &n);
  free(h);
  return t;
}

/* A learning rate passed as a compile-time constant that changes every step:
 * each step is a new graph, and the cause is the constant, not control flow
 * or shapes (before: "the graph changed in another way ... no
 * data-dependent control flow or shapes"). */
KT_TEST(changing_constant_is_named) {
  start(KILN_SWITCH_DEFAULT);
  kiln_tensor w = kiln_keep(vec(8));
  int line = 0;
  for (int s = 0; s < 6; s++) {
    kiln_assign(w, kiln_mul_c(w, 1.0 - 0.01 * s)); line = __LINE__;
    kiln_mark_step();
  }
  kiln_wait();
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 6);
  const char *ex = kiln_explain();
  char want[256];
  snprintf(want, sizeof want, "a constant changes value (1 difference between the last two graphs, each a "
                              "constant's value; first: ~ const at test_explain_audit.c:%d: attrs value=", line);
  KT_STR_CONTAINS(ex, want);
  KT_STR_CONTAINS(ex, "pass the value as a scalar graph input instead (kiln_<op>_s or kiln_scalar");
  KT_CHECK(!strstr(ex, "no data-dependent control flow"));
  /* the advice, followed: kiln_mul_s compiles once for every value */
  start(KILN_SWITCH_DEFAULT);
  w = kiln_keep(vec(8));
  for (int s = 0; s < 6; s++) {
    kiln_assign(w, kiln_mul_s(w, 1.0 - 0.01 * s));
    kiln_mark_step();
  }
  kiln_wait();
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
}

/* A tensor carried from iteration to iteration with no step marker: every
 * read compiles a longer graph. The cause is the missing step marker (before:
 * "the graph changed in another way ... no data-dependent control flow or
 * shapes"). */
KT_TEST(growing_graph_without_step_marker_is_named) {
  start(KILN_SWITCH_DEFAULT);
  kiln_tensor w = kiln_keep(vec(4));
  int64_t four = 4;
  kiln_tensor acc = kiln_zeros(KILN_F32, 1, &four);
  int add_line = 0, read_line = 0;
  for (int s = 0; s < 7; s++) {
    acc = kiln_add(acc, w); add_line = __LINE__;
    double v = kiln_item_f64(kiln_sum(acc, 0, NULL, 0)); read_line = __LINE__;
    KT_NEAR(v, (s + 1) * (0 + 0.25 + 0.5 + 0.75), 1e-5);
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 7);
  const char *ex = kiln_explain();
  char want[320];
  snprintf(want, sizeof want, "  test_explain_audit.c:%d: 7 graphs\n    a growing graph: each of the last 7 graphs is "
                              "the one before with nodes added (1 node added in the last; first: + add at "
                              "test_explain_audit.c:%d [4])", read_line, add_line);
  KT_STR_CONTAINS(ex, want);
  KT_STR_CONTAINS(ex, "end each iteration with kiln_mark_step()");
  /* the advice, followed: one graph for every iteration */
  start(KILN_SWITCH_DEFAULT);
  w = kiln_keep(vec(4));
  acc = kiln_keep(kiln_zeros(KILN_F32, 1, &four));
  int64_t after_two = 0;
  for (int s = 0; s < 7; s++) {
    kiln_assign(acc, kiln_add(acc, w));
    KT_NEAR(kiln_item_f64(kiln_sum(acc, 0, NULL, 0)), (s + 1) * 1.5, 1e-5);
    kiln_mark_step();
    if (s == 1) after_two = kiln_counter_value("UncachedCompile"); /* the first step's acc is a constant */
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), after_two);
}

/* Graphs that differ in another way keep the general explanation: the op
 * order changing with the step (three orders, three graphs). */
KT_TEST(other_change_keeps_general_advice) {
  start(KILN_SWITCH_DEFAULT);
  kiln_tensor w = kiln_keep(vec(4));
  for (int s = 0; s < 6; s++) {
    kiln_tensor x = vec(4);
    kiln_tensor y = kiln_keep(s % 3 == 0   ? kiln_mul(kiln_add(x, w), w)
                              : s % 3 == 1 ? kiln_add(kiln_mul(x, w), w)
                                           : kiln_sub(kiln_mul(x, w), w));
    kiln_mark_step();
    kiln_release(y);
  }
  const char *ex = kiln_explain();
  KT_STR_CONTAINS(ex, "the graph changed in another way");
  KT_CHECK(!strstr(ex, "a constant changes value") && !strstr(ex, "a growing graph"));
}

/* The graphs compiled by a loop over batches of the given sizes (one graph
 * per size, dynamic shapes off), each batch padded up to the smallest of
 * bounds[0..nb) that holds it (nb 0: no padding). */
static int64_t compiles_for(const int64_t *sizes, int n, const int64_t *bounds, int nb) {
  start(KILN_SWITCH_OFF);
  kiln_tensor w = kiln_keep(vec(1));
  for (int s = 0; s < n; s++) {
    int64_t len = sizes[s];
    for (int b = 0; b < nb; b++)
      if (bounds[b] >= sizes[s]) {
        len = bounds[b];
        break;
      }
    kiln_tensor x = vec(len);
    kiln_assign(w, kiln_add(w, kiln_sum(x, 0, NULL, 1)));
    kiln_mark_step();
  }
  kiln_wait();
  return kiln_counter_value("UncachedCompile");
}

/* Bucket advice for a batch size that takes three values: followed, it must
 * compile fewer graphs than the sizes seen (before: "suggested buckets: 3,
 * 5, 9", one bucket per size, which saves nothing). */
KT_TEST(bucket_advice_saves_compiles) {
  const int64_t sizes[] = {3, 9, 5};
  int n = (int)(sizeof sizes / sizeof sizes[0]);
  KT_EQ_INT(compiles_for(sizes, n, NULL, 0), 3); /* one graph per size */
  const char *ex = kiln_explain(), *adv = strstr(ex, "suggested buckets: ");
  KT_CHECK(adv != NULL);
  int64_t bounds[8];
  int nb = 0;
  for (const char *p = adv ? adv + strlen("suggested buckets: ") : NULL; p && nb < 8;) {
    char *end;
    bounds[nb++] = strtoll(p, &end, 10);
    if (strncmp(end, ", ", 2) != 0) break;
    p = end + 2;
  }
  KT_CHECK(nb >= 1 && nb < 3);
  KT_CHECK(nb >= 1 && bounds[nb - 1] >= 9);
  KT_CHECK(compiles_for(sizes, n, bounds, nb) < 3);
}

/* A graph large enough to be compiled as several objects, loaded from the
 * disk cache by a fresh runtime: the short report's "from disk" counts that
 * one graph (before: one per object, "compiles: 1 (cached 0, from disk 2)"). */
static double big_graph(void) {
  int64_t d[] = {8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100};
  int nb = (int)(sizeof d / sizeof d[0]) - 1;
  int64_t s0[2] = {4, d[0]};
  kiln_tensor h = kiln_rand_normal(KILN_F32, 2, s0, 1);
  kiln_tensor acc = kiln_zeros(KILN_F32, 0, NULL);
  for (int i = 0; i < nb; i++) { /* a shape per layer: every kernel is new */
    int64_t sw[2] = {d[i], d[i + 1]};
    h = kiln_softmax(kiln_tanh(kiln_matmul(h, kiln_rand_normal(KILN_F32, 2, sw, 10 + (uint64_t)i))), 1);
    acc = kiln_add(acc, kiln_mean(kiln_exp(h), 0, NULL, 0));
  }
  return kiln_item_f64(acc);
}

KT_TEST(from_disk_counts_graphs) {
  char dir[] = "/tmp/kiln_explain_audit_XXXXXX";
  KT_CHECK(mkdtemp(dir) != NULL);
  kiln_options o = {.backend = "cpu", .num_threads = 2, .cache_dir = dir, .disk_cache = KILN_SWITCH_ON};
  for (int run = 0; run < 2; run++) {
    kiln_shutdown();
    kiln_metrics_clear();
    KT_EQ_INT(kiln_init(&o), KILN_OK);
    KT_CHECK(big_graph() > 0);
    kiln_shutdown();
  }
  KT_CHECK(kiln_counter_value("PersistentCacheHit") >= 2); /* the premise: several objects, each a hit */
  KT_EQ_INT(kiln_counter_value("PersistentCacheMiss"), 0);
  KT_EQ_INT(kiln_counter_value("PersistentCacheGraphHit"), 1);
  KT_STR_CONTAINS(kiln_metrics_report_short(), "compiles: 1 (cached 0, from disk 1)\n");
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  KT_EQ_INT(system(cmd), 0);
}

KT_MAIN(KT_CASE(changing_constant_is_named), KT_CASE(growing_graph_without_step_marker_is_named),
        KT_CASE(other_change_keeps_general_advice),
        KT_CASE(bucket_advice_saves_compiles),
        KT_CASE(from_disk_counts_graphs))
