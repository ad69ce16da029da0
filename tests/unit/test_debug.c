/* The runtime analysis: per-line tables, KILN_DEBUG records and warnings,
 * recompilation explained, full-graph regions, explicit compile and
 * discarded steps, graph tags, kiln_explain. Oracles: the program's own
 * source lines (__LINE__), counts of the events it makes, and values
 * computed on the host. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "kt.h"

static char g_debug_path[256];

/* Restart the runtime with KILN_DEBUG=level written to a fresh temp file
 * (level 0: unset). The ref backend: the analysis does not depend on the
 * backend, and its compiles are instant. */
static void start(int level) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_metrics_clear();
  snprintf(g_debug_path, sizeof g_debug_path, "/tmp/kiln_test_debug_%ld.txt", (long)getpid());
  remove(g_debug_path);
  if (level > 0) {
    char lv[8];
    snprintf(lv, sizeof lv, "%d", level);
    setenv("KILN_DEBUG", lv, 1);
    setenv("KILN_DEBUG_FILE", g_debug_path, 1);
  } else {
    unsetenv("KILN_DEBUG");
    unsetenv("KILN_DEBUG_FILE");
  }
  setenv("KILN_DEBUG_WARMUP", "2", 1);
  kiln_options o = {.backend = "ref", .disk_cache = KILN_SWITCH_OFF};
  KT_EQ_INT(kiln_init(&o), KILN_OK);
}

/* The KILN_DEBUG output so far (caller frees); "" if none. */
static char *debug_output(void) {
  FILE *f = fopen(g_debug_path, "r");
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

static kiln_tensor vec(float v, int64_t n) {
  float *h = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) h[i] = v + (float)i;
  kiln_tensor t = kiln_from_host(h, KILN_F32, 1, &n);
  free(h);
  return t;
}

/* A program that reads at two lines N and M times: the table counts exactly
 * those reads, with their bytes, and one value-read cut per pending read. */
KT_TEST(per_line_reads) {
  start(0);
  kiln_tensor p = kiln_keep(vec(1, 4));
  int line_a = 0, line_b = 0;
  for (int step = 0; step < 5; step++) {
    kiln_tensor y = kiln_sum(kiln_mul_c(p, 2.0), 0, NULL, 0);
    double a = kiln_item_f64(y); line_a = __LINE__;
    KT_NEAR(a, 2.0 * (1 + 2 + 3 + 4), 1e-5);
    if (step % 2 == 0) {
      float out[4];
      KT_EQ_INT(kiln_to_host(kiln_add_c(p, 1.0), out, sizeof out), KILN_OK); line_b = __LINE__;
      KT_NEAR(out[3], 5.0, 1e-6);
    }
    kiln_mark_step();
  }
  kiln_site_stats s;
  KT_EQ_INT(kiln_site_find(__FILE__, line_a, KILN_SITE_READ, &s), 0);
  KT_EQ_INT(s.count, 5);
  KT_EQ_INT(s.bytes, 5 * 4);
  KT_CHECK(s.time_ns > 0 && s.wait_ns <= s.time_ns);
  KT_EQ_INT(kiln_site_find(__FILE__, line_b, KILN_SITE_READ, &s), 0);
  KT_EQ_INT(s.count, 3);
  KT_EQ_INT(s.bytes, 3 * 16);
  KT_EQ_INT(kiln_site_find(__FILE__, line_a, KILN_SITE_CUT_VALUE_READ, &s), 0);
  KT_EQ_INT(s.count, 5);
  KT_EQ_INT(s.compiles, 1); /* the same graph every step */
  KT_EQ_INT(kiln_site_find("test_debug.c", line_b, KILN_SITE_CUT_VALUE_READ, &s), 0); /* base name matches */
  KT_EQ_INT(s.count, 3);
  KT_EQ_INT(kiln_site_find(__FILE__, line_a + 1000, KILN_SITE_READ, &s), -1);
  KT_EQ_INT(kiln_counter_value("ValueReadCut"), 8);
  KT_EQ_INT(kiln_counter_value("TransferFromDevice"), 8);
  /* the table in the full report and in kiln_explain */
  char row[128], where[64];
  snprintf(where, sizeof where, "test_debug.c:%d", line_a);
  snprintf(row, sizeof row, "%-18s %s\n", "read", where);
  KT_STR_CONTAINS(kiln_metrics_report(), row);
  KT_STR_CONTAINS(kiln_explain(), row);
  int n = kiln_site_list(NULL, 0);
  KT_CHECK(n >= 4);
  kiln_site_stats all[16];
  KT_EQ_INT(kiln_site_list(all, 16), n);
  for (int i = 1; i < n && i < 16; i++) KT_CHECK(all[i - 1].count >= all[i].count);
}

/* Level 1: a record per compile, naming the cause and the user's line. */
KT_TEST(debug_compile_record) {
  start(1);
  kiln_tensor p = kiln_keep(vec(0, 8));
  kiln_tensor y = kiln_sum(kiln_exp(p), 0, NULL, 0);
  double v = kiln_item_f64(y);
  int line = __LINE__ - 1;
  KT_CHECK(v > 0);
  kiln_assign(p, kiln_add_c(p, 1.0));
  kiln_mark_step();
  int mark_line = __LINE__ - 1;
  kiln_wait();
  char *out = debug_output();
  char want[160];
  snprintf(want, sizeof want, "kiln: compile #1 (step 0) cause: value read at test_debug.c:%d (kiln_item_f64)\n",
           line);
  KT_STR_CONTAINS(out, want);
  snprintf(want, sizeof want, "kiln: compile #2 (step 0) cause: step marker at test_debug.c:%d\n", mark_line);
  KT_STR_CONTAINS(out, want);
  KT_STR_CONTAINS(out, " nodes, 1 input, 1 output\n  memory: inputs ");
  KT_STR_CONTAINS(out, "  compile time ");
  KT_EQ_INT(count_of(out, "kiln: compile #"), 2);
  KT_EQ_INT(count_of(out, "kiln: execute "), 0); /* level 2 only */
  free(out);
}

/* Level 2: a record per execution too, cache hits included. */
KT_TEST(debug_execute_records) {
  start(2);
  kiln_tensor p = kiln_keep(vec(0, 8));
  for (int i = 0; i < 3; i++) {
    kiln_assign(p, kiln_mul_c(p, 0.5));
    kiln_mark_step();
  }
  int line = __LINE__ - 2;
  kiln_wait();
  char *out = debug_output();
  char want[96];
  snprintf(want, sizeof want, "cause: step marker at test_debug.c:%d, host ", line);
  KT_EQ_INT(count_of(out, want), 3);
  KT_EQ_INT(count_of(out, "kiln: compile #"), 1);
  KT_EQ_INT(count_of(out, "(compiled now)"), 1);
  free(out);
}

/* Too-frequent warnings after the warm-up (2 steps here), with the lines. */
KT_TEST(debug_too_frequent) {
  start(1);
  kiln_tensor p = kiln_keep(vec(1, 4));
  kiln_tensor acc = kiln_keep(vec(0, 2));
  int read_line = 0, mark_line = 0;
  for (int step = 0; step < 8; step++) {
    kiln_tensor y = kiln_sum(kiln_mul(p, p), 0, NULL, 0);
    for (int r = 0; r < 2; r++) {
      kiln_item_f64(kiln_add_c(y, r)); read_line = __LINE__;
    }
    kiln_tensor parts[2] = {acc, vec(1, 2)};
    kiln_tensor grown = kiln_concat(2, parts, 0);
    kiln_release(acc);
    acc = kiln_keep(grown);
    kiln_mark_step(); mark_line = __LINE__;
  }
  kiln_wait();
  char *out = debug_output();
  KT_STR_CONTAINS(out, "kiln: warning: TransferFromDeviceTime too frequent: ");
  char want[96];
  /* first warned at step 3 (the first after the warm-up): 2 reads x 3 steps */
  snprintf(want, sizeof want, "TransferFromDeviceTime too frequent: 6 counts during 3 steps\n     6  test_debug.c:%d (read)\n",
           read_line);
  KT_STR_CONTAINS(out, want);
  KT_STR_CONTAINS(out, "kiln: warning: CompileTime too frequent: ");
  snprintf(want, sizeof want, "  test_debug.c:%d (step marker)\n", mark_line);
  KT_STR_CONTAINS(out, want);
  /* rate-limited: the counts at each warning at least double */
  KT_CHECK(count_of(out, "TransferFromDeviceTime too frequent") <= 3);
  KT_CHECK(count_of(out, "CompileTime too frequent") <= 3);
  free(out);
}

/* A tensor that grows every step: "what changed" names the concat's line
 * and the shapes, and after three graphs the pattern is named. */
KT_TEST(debug_what_changed_growing) {
  start(1);
  kiln_tensor acc = kiln_keep(vec(0, 8));
  int cat_line = 0;
  for (int step = 0; step < 4; step++) {
    kiln_tensor parts[2] = {acc, vec((float)step, 8)};
    kiln_tensor grown = kiln_concat(2, parts, 0); cat_line = __LINE__;
    kiln_release(acc);
    acc = kiln_keep(kiln_mul_c(grown, 1.0));
    kiln_mark_step();
  }
  kiln_wait();
  char *out = debug_output();
  KT_STR_CONTAINS(out, "what changed since compile #1 at the same site");
  char want[96];
  snprintf(want, sizeof want, "concat at test_debug.c:%d: shape [16] -> [24]", cat_line);
  KT_STR_CONTAINS(out, want);
  KT_STR_CONTAINS(out, "  pattern: ");
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 4);
  const char *ex = kiln_explain();
  KT_STR_CONTAINS(ex, "call sites that compiled more than one graph:\n");
  free(out);
}

/* An input dimension that varies: the values seen and suggested buckets
 * (level 2: a full record at every compile). */
KT_TEST(debug_varying_input_buckets) {
  start(2);
    /* new lengths arrive out of order: not a growing tensor */
  static const int64_t lens[] = {112, 87, 112, 250, 87, 130, 87};
  int line = 0;
  for (int i = 0; i < 7; i++) {
    kiln_tensor x = vec(1, lens[i]);
    kiln_tensor s = kiln_sum(kiln_mul_c(x, 2.0), 0, NULL, 0);
    double v = kiln_item_f64(s); line = __LINE__;
    KT_NEAR(v, (double)lens[i] * (double)(lens[i] + 1), 1e-2 * (double)lens[i] * (double)lens[i]);
    kiln_mark_step();
  }
  kiln_wait();
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 4);
  kiln_site_stats st;
  KT_EQ_INT(kiln_site_find(__FILE__, line, KILN_SITE_CUT_VALUE_READ, &st), 0);
  KT_EQ_INT(st.compiles, 4);
  char *out = debug_output();
  KT_STR_CONTAINS(out, "suggested buckets: ");
  /* at the 4th compile, weighted by the executions so far */
  KT_STR_CONTAINS(out, "dim 0: 87 x2, 112 x2, 130 x1, 250 x1; suggested buckets: ");
  free(out);
  KT_STR_CONTAINS(kiln_explain(), "dim 0: 87 x3, 112 x2, 130 x1, 250 x1; suggested buckets: ");
}

static int lines_of(const char *s) { return count_of(s, "\n"); }

/* The 60-step loop of the level tests: a batch whose size changes every
 * step (1, 2, ..., 60 rows from the host), summed into a kept total: one
 * new graph per step at the step marker. Returns the marker's line; the
 * total is checked against the host's sum. */
static int sweep_60_steps(void) {
  kiln_tensor total = kiln_keep(kiln_zeros(KILN_F32, 0, NULL));
  kiln_mark_step(); /* the total's zeros: a graph of its own line */
  int mark_line = 0;
  double want = 0;
  for (int step = 0; step < 60; step++) {
    kiln_tensor x = vec(0.5f, step + 1); /* 0.5, 1.5, ... */
    for (int i = 0; i <= step; i++) want += 2.0 * (0.5 + i);
    kiln_assign(total, kiln_add(total, kiln_sum(kiln_mul_c(x, 2.0), 0, NULL, 0)));
    kiln_mark_step(); mark_line = __LINE__;
  }
  KT_NEAR(kiln_item_f64(total), want, 1e-6 * want);
  kiln_release(total);
  kiln_wait();
  return mark_line;
}

/* KILN_DEBUG=1 says each cause once: the site's first graph and first
 * recompile in full, the pattern once, a note that the rest are counted, and
 * the count in the summary; KILN_DEBUG=2 prints every compile and every
 * execution. The pattern is a varying input (a sweep of sizes from the
 * host, not a growing tensor), and the sizes reported are all 60. */
KT_TEST(debug_level_1_says_each_cause_once) {
  start(1);
  int mark = sweep_60_steps();
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 61); /* the total's zeros, then one per step */
  kiln_site_stats st;
  KT_EQ_INT(kiln_site_find(__FILE__, mark, KILN_SITE_CUT_STEP_MARKER, &st), 0);
  KT_EQ_INT(st.compiles, 60);
  char *out = debug_output();
  char want[320];
  snprintf(want, sizeof want, "cause: step marker at test_debug.c:%d", mark);
  KT_EQ_INT(count_of(out, want), 3); /* compiles #2, #3 and #4 (which names the pattern) in full */
  KT_EQ_INT(count_of(out, "  memory: inputs "), 4); /* full records: the zeros' graph, #2, #3, #4 */
  snprintf(want, sizeof want,
           "kiln: compile #4 (step 3) cause: step marker at test_debug.c:%d\n", mark);
  KT_STR_CONTAINS(out, want);
  KT_STR_CONTAINS(out, "  pattern: varying input: dim 0 of input 1 (leaf) at test_debug.c:");
  KT_STR_CONTAINS(out, "takes 3 sizes over 3 compiles (1, 2, 3)");
  snprintf(want, sizeof want,
           "kiln: compile #5 (step 4) at test_debug.c:%d and the further compiles there are counted, not printed: "
           "the summary at exit has the count; KILN_DEBUG=2 prints each\n", mark);
  KT_STR_CONTAINS(out, want);
  KT_EQ_INT(count_of(out, "kiln: execute "), 0);
  kiln_shutdown(); /* prints the summary */
  free(out);
  out = debug_output();
  snprintf(want, sizeof want,
           "  test_debug.c:%d: 60 graphs (KILN_DEBUG=1 printed 3 of these compiles, counted 57 more; KILN_DEBUG=2 "
           "prints each)\n", mark);
  KT_STR_CONTAINS(out, want);
  /* every size of the site, not the last 16 */
  KT_STR_CONTAINS(out, "takes 16 sizes over the last 16 of the site's 60 compiles (45, 46, ");
  KT_STR_CONTAINS(out, "dim 0: 1 x1, 2 x1, 3 x1, ");
  KT_STR_CONTAINS(out, ", 32 x1, ... 28 more of the 60 sizes; suggested buckets: ");
  KT_STR_CONTAINS(out, "60 sizes from all 60 compiles at this site)\n");
  fprintf(stderr, "  KILN_DEBUG=1: %d lines\n", lines_of(out));
  KT_STR_CONTAINS(out, "  ... 51 more graphs (by call site below; kiln_explain() and KILN_DEBUG=2 list every one)\n");
  KT_CHECK_MSG(strstr(out, "growing") == NULL, "a sweep of sizes called growing:\n%s", out);
  int n1 = lines_of(out);
  KT_CHECK_MSG(n1 <= 80, "KILN_DEBUG=1 printed %d lines for 60 steps:\n%s", n1, out);
  free(out);

  start(2);
  mark = sweep_60_steps();
  kiln_shutdown();
  out = debug_output();
  snprintf(want, sizeof want, "kiln: compile #61 (step 60) cause: step marker at test_debug.c:%d\n", mark);
  KT_STR_CONTAINS(out, want);
  KT_EQ_INT(count_of(out, "  memory: inputs "), 61);     /* every compile in full */
  KT_EQ_INT(count_of(out, "kiln: execute graph "), 61); /* and every execution */
  KT_CHECK(strstr(out, "counted, not printed") == NULL && strstr(out, "more graphs (by call site") == NULL);
  int n2 = lines_of(out);
  fprintf(stderr, "  KILN_DEBUG=2: %d lines\n", n2);
  KT_CHECK_MSG(n2 > 10 * n1, "KILN_DEBUG=2: %d lines, KILN_DEBUG=1: %d", n2, n1);
  free(out);
}

/* A cut inside a full-graph region is an error naming both lines; a read of
 * a computed tensor is fine; nothing crashes and the step still runs. */
KT_TEST(full_graph_region) {
  start(0);
  kiln_tensor p = kiln_keep(vec(1, 4));
  kiln_full_graph_begin(); int open_line = __LINE__;
  kiln_full_graph_begin(); /* nested: the outermost line is reported */
  kiln_tensor y = kiln_sum(p, 0, NULL, 0);
  double v = kiln_item_f64(y); int read_line = __LINE__;
  KT_CHECK(v != v); /* NaN: the read failed */
  KT_EQ_INT(kiln_last_status(), KILN_ERR_GRAPH_CUT);
  char want[160];
  snprintf(want, sizeof want,
           "graph cut inside a full-graph region: value read at test_debug.c:%d (kiln_item_f64) (region opened at "
           "test_debug.c:%d)", read_line, open_line);
  KT_STR_CONTAINS(kiln_last_error(), want);
  KT_EQ_INT(kiln_counter_value("ValueReadCut"), 0);
  kiln_clear_error();
  float h[4];
  KT_EQ_INT(kiln_to_host(p, h, sizeof h), KILN_OK); /* computed: no cut */
  KT_NEAR(h[2], 3.0, 0);
  kiln_assign(p, kiln_add_c(p, 1.0));
  KT_EQ_INT(kiln_mark_step(), KILN_OK); /* the step marker is the expected cut */
  kiln_full_graph_end();
  kiln_full_graph_end();
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  KT_EQ_INT(kiln_to_host(p, h, sizeof h), KILN_OK);
  KT_NEAR(h[0], 2.0, 0);
  kiln_full_graph_end(); /* unbalanced */
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
}

/* kiln_compile + kiln_discard_step: a warm-up over two shapes compiles both
 * graphs and leaves the parameter untouched; the real steps hit the cache. */
KT_TEST(compile_and_discard) {
  start(0);
  kiln_tensor w = kiln_keep(vec(1, 4));
  static const int64_t lens[] = {3, 5};
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < 2; i++) {
      float xs[5] = {1, 1, 1, 1, 1};
      kiln_tensor x = kiln_from_host(xs, KILN_F32, 1, &lens[i]);
      kiln_tensor g = kiln_mul_c(kiln_expand(kiln_sum(x, 0, NULL, 1), 1, (int64_t[]){4}), 0.5);
      kiln_tensor scratch = kiln_keep(kiln_add_c(g, 1.0)); /* kept this step, never computed */
      kiln_assign(w, kiln_sub(w, g));
      if (pass == 0) {
        KT_EQ_INT(kiln_compile(0, NULL), KILN_OK);
        KT_EQ_INT(kiln_discard_step(), KILN_OK);
        KT_CHECK(!kiln_is_valid(scratch)); /* released: it had no value to restore */
      } else {
        KT_EQ_INT(kiln_mark_step(), KILN_OK); /* the same outputs as the warm-up: w, scratch */
        kiln_release(scratch);
      }
    }
    if (pass == 0) {
      float h[4];
      KT_EQ_INT(kiln_to_host(w, h, sizeof h), KILN_OK);
      for (int k = 0; k < 4; k++) KT_NEAR(h[k], 1.0 + k, 0); /* untouched */
      KT_EQ_INT(kiln_counter_value("ExplicitCompileCut"), 2);
      KT_EQ_INT(kiln_counter_value("UncachedCompile"), 2);
      KT_EQ_INT(kiln_counter_value("Execute"), 0);
      KT_EQ_INT(kiln_counter_value("CachedCompile"), 0);
    }
  }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 2); /* nothing new */
  KT_EQ_INT(kiln_counter_value("CachedCompile"), 2);
  float h[4];
  KT_EQ_INT(kiln_to_host(w, h, sizeof h), KILN_OK);
  for (int k = 0; k < 4; k++) KT_NEAR(h[k], 1.0 + k - 1.5 - 2.5, 1e-6);
}

/* A warm-up of a real training step (Linear, SGD with momentum): the
 * parameters and the optimizer state come back unchanged, and the training
 * step that follows finds its graph in the cache. */
KT_TEST(warmup_training_step) {
  start(0);
  kiln_linear *fc = NULL;
  kiln_linear_create(4, 3, 1, 7, &fc);
  KT_CHECK(fc != NULL);
  if (!fc) return;
  kiln_tensor params[2] = {fc->weight, fc->bias};
  for (int i = 0; i < 2; i++) kiln_requires_grad(params[i]);
  kiln_sgd_opts so = {.lr = 0.1, .momentum = 0.9};
  kiln_optim *opt = NULL;
  kiln_optim_create_sgd(2, params, &so, &opt);
  kiln_mark_step(); /* materialize whatever the constructors left pending */
  float w0[12], w1[12];
  KT_EQ_INT(kiln_to_host(fc->weight, w0, sizeof w0), KILN_OK);
  float xh[8] = {1, 2, 3, 4, -1, 0.5f, 2, 0};
  int64_t xs[2] = {2, 4};
  for (int round = 0; round < 2; round++) {
    kiln_tensor y = kiln_linear_forward(fc, kiln_from_host(xh, KILN_F32, 2, xs));
    KT_EQ_INT(kiln_backward(kiln_mean(kiln_mul(y, y), 0, NULL, 0)), KILN_OK);
    KT_EQ_INT(kiln_optim_step(opt), KILN_OK);
    for (int i = 0; i < 2; i++) kiln_zero_grad(params[i]);
    if (round == 0) {
      int64_t before = kiln_counter_value("UncachedCompile");
      KT_EQ_INT(kiln_compile(0, NULL), KILN_OK);
      KT_EQ_INT(kiln_counter_value("UncachedCompile"), before + 1);
      KT_EQ_INT(kiln_discard_step(), KILN_OK);
      KT_EQ_INT(kiln_to_host(fc->weight, w1, sizeof w1), KILN_OK);
      for (int k = 0; k < 12; k++) KT_NEAR(w1[k], w0[k], 0);
    } else {
      int64_t uncached = kiln_counter_value("UncachedCompile"), cached = kiln_counter_value("CachedCompile");
      KT_EQ_INT(kiln_mark_step(), KILN_OK);
      KT_EQ_INT(kiln_counter_value("UncachedCompile"), uncached);
      KT_EQ_INT(kiln_counter_value("CachedCompile"), cached + 1);
      KT_EQ_INT(kiln_to_host(fc->weight, w1, sizeof w1), KILN_OK);
      int changed = 0;
      for (int k = 0; k < 12; k++) changed += w1[k] != w0[k];
      KT_CHECK(changed > 0); /* the real step trained */
    }
  }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_optim_destroy(opt);
  kiln_linear_destroy(fc);
}

/* kiln_compile of named tensors: compiled, not computed, still readable. */
KT_TEST(compile_named_tensors) {
  start(0);
  kiln_tensor p = kiln_keep(vec(2, 3));
  kiln_tensor y = kiln_sum(kiln_mul(p, p), 0, NULL, 0);
  KT_EQ_INT(kiln_compile(1, &y), KILN_OK);
  int line = __LINE__ - 1;
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 1);
  KT_EQ_INT(kiln_counter_value("Execute"), 0);
  kiln_site_stats st;
  KT_EQ_INT(kiln_site_find(__FILE__, line, KILN_SITE_CUT_EXPLICIT_COMPILE, &st), 0);
  KT_EQ_INT(st.compiles, 1);
  KT_NEAR(kiln_item_f64(y), 4 + 9 + 16, 1e-5);
  KT_EQ_INT(kiln_counter_value("CachedCompile"), 1);
  kiln_tensor null_tensor = {0, 0};
  KT_EQ_INT(kiln_compile(1, &null_tensor), KILN_ERR_STALE_HANDLE);
  kiln_clear_error();
}

/* Graph tags: in the compile records and per graph in kiln_explain. */
KT_TEST(graph_tags_and_explain) {
  start(1);
  kiln_tensor p = kiln_keep(vec(1, 4));
  kiln_graph_tag("train");
  kiln_assign(p, kiln_mul_c(p, 2.0));
  kiln_mark_step();
  kiln_graph_tag("eval");
  KT_NEAR(kiln_item_f64(kiln_sum(p, 0, NULL, 0)), 20.0, 1e-5);
  kiln_graph_tag(NULL);
  kiln_mark_step();
  kiln_wait();
  char *out = debug_output();
  KT_STR_CONTAINS(out, "kiln: compile #1 (step 0, tag \"train\") cause: step marker at test_debug.c:");
  KT_STR_CONTAINS(out, "kiln: compile #2 (step 1, tag \"eval\") cause: value read at test_debug.c:");
  free(out);
  const char *ex = kiln_explain();
  KT_STR_CONTAINS(ex, "kiln explain\n  steps: 2\n  graphs compiled: 2 ");
  KT_STR_CONTAINS(ex, " train ");
  KT_STR_CONTAINS(ex, " eval ");
  KT_STR_CONTAINS(ex, "graph cuts: step marker 1, value read 1, data-dependent 0, explicit compile 0\n");
  KT_STR_CONTAINS(ex, "fixed host cost per execution: ");
  kiln_shutdown(); /* prints the summary */
  out = debug_output();
  KT_STR_CONTAINS(out, "kiln: summary\nkiln explain\n");
  free(out);
  remove(g_debug_path);
  unsetenv("KILN_DEBUG");
  unsetenv("KILN_DEBUG_FILE");
}

KT_MAIN(KT_CASE(per_line_reads), KT_CASE(debug_compile_record), KT_CASE(debug_execute_records),
        KT_CASE(debug_too_frequent), KT_CASE(debug_what_changed_growing), KT_CASE(debug_varying_input_buckets), KT_CASE(debug_level_1_says_each_cause_once),
        KT_CASE(full_graph_region), KT_CASE(compile_and_discard), KT_CASE(warmup_training_step), KT_CASE(compile_named_tensors),
        KT_CASE(graph_tags_and_explain))
