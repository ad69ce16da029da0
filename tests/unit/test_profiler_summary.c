/* The capture analysis on synthetic captures whose gaps and host activity
 * are known by construction (the oracle is the arithmetic written below),
 * both in memory and after a round trip through the XSpace file format, and
 * the printed summary. */
#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "prof_fixture.h"
#include "profiler/capture.h"
#include "profiler/summary.h"
#include "xplane.pb-c.h"

#define MS 1000000ull
#define T0 (1000 * MS) /* an arbitrary clock origin */

static kiln_prof_event ev(kiln_prof_kind k, const char *name, double b_ms, double e_ms) {
  kiln_prof_event e = {.begin_ns = T0 + (uint64_t)(b_ms * MS), .end_ns = T0 + (uint64_t)(e_ms * MS), .name = name,
                       .kind = (uint8_t)k, .arg = -1};
  return e;
}

/* Two steps of 100 ms each.
 * Lane 0 kernels: [0,10] [30,60] [90,100] in step 0; [100,150] [150,195] in step 1.
 * Lane 1 kernel: [5,35] (overlaps lane 0: busy union [0,60]).
 * So step 0 is busy [0,60] u [90,100] = 70 ms; gap [60,90] (30 ms).
 * Host thread: compile [55,75] (inner phase [58,70] nested: counted once),
 * wait for input [75,85], nothing of kiln's [85,90] -> user code 5 ms;
 * tracing [60,62] overlaps the compile: both kinds counted.
 * Step 1 busy [100,195] = 95 ms; gap [195,200] (5 ms > 1 ms). Transfer
 * [196,198] (2 ms), user 3 ms. A 0.5 ms gap [150,150.5] would be below the
 * threshold: lane 0's second kernel starts at 150.5 below. */
static void build(kiln_prof_capture *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->host, sizeof c->host, "synthetic");
  c->start_ns = T0;
  c->end_ns = T0 + 200 * MS;
  prof_fixture_threads(c);
  kiln_prof_thread_events *h = &c->threads[0], *l0 = &c->threads[1], *l1 = &c->threads[2];
  kiln_prof_event s0 = ev(KILN_PROF_STEP, "Training_Step", 0, 100), s1 = ev(KILN_PROF_STEP, "Training_Step", 100, 200);
  s0.arg = 7, s1.arg = 8;
  h->ev[h->n++] = s0;
  h->ev[h->n++] = s1;
  kiln_prof_event fwd = ev(KILN_PROF_USER, "Forward", 50, 95);
  fwd.depth = 1;
  h->ev[h->n++] = fwd;
  h->ev[h->n++] = ev(KILN_PROF_COMPILE, "compile", 55, 75);
  h->ev[h->n++] = ev(KILN_PROF_COMPILE, "compile: C compiler", 58, 70);
  h->ev[h->n++] = ev(KILN_PROF_TRACING, "trace", 60, 62);
  h->ev[h->n++] = ev(KILN_PROF_WAIT_INPUT, "loader wait", 75, 85);
  h->ev[h->n++] = ev(KILN_PROF_TRANSFER, "to device", 196, 198);
  kiln_prof_event k;
  k = ev(KILN_PROF_KERNEL, "Forward/gemm 8x8x8", 0, 10), k.flops = 2e9, k.bytes = 1e6;
  l0->ev[l0->n++] = k;
  k = ev(KILN_PROF_KERNEL, "Forward/gemm 8x8x8", 5, 35), k.flops = 1e9; /* same call on lane 1? no: overlaps */
  l1->ev[l1->n++] = k;
  k = ev(KILN_PROF_KERNEL, "Backward/fusion.1 (mul)", 30, 60), k.bytes = 3e9;
  l0->ev[l0->n++] = k;
  l0->ev[l0->n++] = ev(KILN_PROF_KERNEL, "Backward/fusion.1 (mul)", 90, 100);
  l0->ev[l0->n++] = ev(KILN_PROF_KERNEL, "Backward/fusion.1 (mul)", 100, 150);
  l0->ev[l0->n++] = ev(KILN_PROF_KERNEL, "Backward/fusion.1 (mul)", 150.5, 195);
}

static void check(const kiln_prof_analysis *a) {
  KT_EQ_INT(a->n_steps, 2);
  if (a->n_steps != 2) return;
  const kiln_prof_step_stats *s0 = &a->steps[0], *s1 = &a->steps[1];
  KT_EQ_INT((int)s0->step, 7);
  KT_EQ_INT((int)s1->step, 8);
  KT_NEAR(s0->busy_ns / 1e6, 70.0, 1e-6);
  KT_NEAR(s1->busy_ns / 1e6, 94.5, 1e-6);
  KT_EQ_INT(s0->n_gaps, 1);
  KT_EQ_INT(s1->n_gaps, 1); /* [150, 150.5] is under the 1 ms threshold */
  if (s0->n_gaps == 1) {
    const kiln_prof_gap *g = &s0->gaps[0];
    KT_NEAR((double)(g->begin_ns - T0) / 1e6, 60.0, 1e-6);
    KT_NEAR((double)(g->end_ns - T0) / 1e6, 90.0, 1e-6);
    KT_NEAR(g->kind_ns[KILN_PROF_COMPILE] / 1e6, 15.0, 1e-6); /* [60,75], the nested phase once */
    KT_NEAR(g->kind_ns[KILN_PROF_TRACING] / 1e6, 2.0, 1e-6);
    KT_NEAR(g->kind_ns[KILN_PROF_WAIT_INPUT] / 1e6, 10.0, 1e-6);
    KT_NEAR(g->kind_ns[KILN_PROF_TRANSFER], 0.0, 1e-9);
    KT_NEAR(g->user_ns / 1e6, 5.0, 1e-6);
    KT_CHECK(g->region && !strcmp(g->region, "Forward"));
  }
  if (s1->n_gaps == 1) {
    const kiln_prof_gap *g = &s1->gaps[0];
    KT_NEAR((double)(g->begin_ns - T0) / 1e6, 195.0, 1e-6);
    KT_NEAR((double)(g->end_ns - T0) / 1e6, 200.0, 1e-6);
    KT_NEAR(g->kind_ns[KILN_PROF_TRANSFER] / 1e6, 2.0, 1e-6);
    KT_NEAR(g->user_ns / 1e6, 3.0, 1e-6);
    KT_CHECK(g->region == NULL);
  }
  /* kernels: fusion.1 has 4 calls, 30+10+50+44.5 ms; the gemm one call
   * (lanes overlap) of 35 ms wall with 3 GFLOP */
  KT_EQ_INT(a->n_kernels, 2);
  if (a->n_kernels == 2) {
    KT_CHECK(!strcmp(a->kernels[0].name, "Backward/fusion.1 (mul)"));
    KT_EQ_INT((int)a->kernels[0].calls, 4);
    KT_NEAR(a->kernels[0].wall_ns / 1e6, 134.5, 1e-6);
    KT_CHECK(!strcmp(a->kernels[1].name, "Forward/gemm 8x8x8"));
    KT_EQ_INT((int)a->kernels[1].calls, 1);
    KT_NEAR(a->kernels[1].wall_ns / 1e6, 35.0, 1e-6);
    KT_NEAR(a->kernels[1].flops, 3e9, 1);
  }
  KT_EQ_INT(a->n_lanes, 2);
}

KT_TEST(summary_finds_known_gaps_and_attributions) {
  kiln_prof_capture c;
  build(&c);
  kiln_prof_analysis a;
  kiln_err err = {0};
  KT_CHECK(kiln_prof_analyze(&c, NULL, &a, &err) == KILN_OK);
  check(&a);
  kiln_prof_analysis_free(&a);
  /* a 40 ms threshold (and 50% of the step) hides every gap */
  kiln_profiler_summary_opts o = {.gap_ms = 40, .gap_fraction = 0.5};
  KT_CHECK(kiln_prof_analyze(&c, &o, &a, &err) == KILN_OK);
  KT_EQ_INT(a.steps[0].n_gaps + a.steps[1].n_gaps, 0);
  kiln_prof_analysis_free(&a);
  kiln_prof_capture_clear(&c);
}

KT_TEST(summary_survives_the_xplane_round_trip_and_prints) {
  kiln_prof_capture c, back;
  build(&c);
  c.dropped = 5;
  uint8_t *buf;
  size_t n;
  kiln_err err = {0};
  KT_CHECK(kiln_prof_xspace_encode(&c, &buf, &n, &err) == KILN_OK);
  KT_CHECK(kiln_prof_xspace_decode(buf, n, "synthetic.xplane.pb", &back, &err) == KILN_OK);
  KT_EQ_INT((int)back.dropped, 5);
  kiln_prof_analysis a;
  KT_CHECK(kiln_prof_analyze(&back, NULL, &a, &err) == KILN_OK);
  check(&a);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  kiln_prof_analysis_print(&a, &back, "synthetic.xplane.pb", 100.0, 10.0, 10, 1, f);
  fclose(f);
  KT_STR_CONTAINS(text, "idle 30.000 ms at +60.000 ms (in Forward): host was tracing 2.000 ms (7%), compiling "
                        "15.000 ms (50%), waiting for input 10.000 ms (33%), in user code 5.000 ms (17%)");
  KT_STR_CONTAINS(text, "5 DROPPED");
  /* both steps touch the capture's edges (the synthetic capture is exactly
   * their span): the summary says their wall time is cut */
  KT_STR_CONTAINS(text, "Training_Step           100.000       70.000   70.0%     1  (began before the capture)");
  KT_STR_CONTAINS(text, "(ends after the capture)");
  KT_STR_CONTAINS(text, "Backward/fusion.1 (mul)");
  /* gemm: 3 GFLOP in 35 ms = 85.71 GFLOP/s, 85.7% of the 100 GFLOP/s peak */
  KT_STR_CONTAINS(text, "85.71   85.7%");
  free(text);
  /* a ceiling below an achieved rate: the table says why */
  f = open_memstream(&text, &len);
  kiln_prof_analysis_print(&a, &back, "synthetic.xplane.pb", 50.0, 10.0, 10, 0, f);
  fclose(f);
  KT_STR_CONTAINS(text, "85.71  171.4%");
  KT_STR_CONTAINS(text, "(over 100% of a ceiling: the ceilings were measured while the machine was busy");
  free(text);
  f = open_memstream(&text, &len);
  kiln_prof_analysis_print(&a, &back, "synthetic.xplane.pb", 1e6, 1e6, 10, 0, f);
  fclose(f);
  KT_CHECK(strstr(text, "over 100% of a ceiling") == NULL);
  free(text);
  kiln_prof_analysis_free(&a);
  kiln_prof_capture_clear(&back);
  /* truncations and garbage are rejected cleanly */
  for (size_t cut = 1; cut < n; cut += n / 97 + 1) {
    kiln_prof_capture t;
    kiln_status s = kiln_prof_xspace_decode(buf, cut, "cut.xplane.pb", &t, &err);
    if (s == KILN_OK) kiln_prof_capture_clear(&t);
    else KT_EQ_INT(s, KILN_ERR_CORRUPT);
  }
  free(buf);
  kiln_prof_capture_clear(&c);
  KT_CHECK(kiln_prof_summary_run("/nonexistent/kiln", stdout, NULL, &err) == KILN_ERR_IO);
  KT_STR_CONTAINS(err.msg, "/nonexistent/kiln");
}

/* Events that begin before their line's start (a capture written before
 * kiln clipped events, other profilers) are clipped on reading; an offset
 * beyond any capture is still rejected as corrupt. */
KT_TEST(reader_clips_early_events_and_rejects_garbage_times) {
  kiln_prof_capture c;
  build(&c);
  uint8_t *buf;
  size_t n;
  kiln_err err = {0};
  KT_CHECK(kiln_prof_xspace_encode(&c, &buf, &n, &err) == KILN_OK);
  kiln_prof_capture_clear(&c);
  Tensorflow__Profiler__XSpace *sp = tensorflow__profiler__xspace__unpack(NULL, n, buf);
  free(buf);
  KT_CHECK(sp != NULL);
  if (!sp) return;
  /* the host plane's first line, first event: the step [0, 100] ms; move
   * its begin 20 ms before the capture, keeping its end */
  Tensorflow__Profiler__XPlane *host = NULL;
  for (size_t i = 0; i < sp->n_planes; i++)
    if (!strcmp(sp->planes[i]->name, "/host:CPU")) host = sp->planes[i];
  KT_CHECK(host && host->n_lines > 0 && host->lines[0]->n_events > 0);
  if (!host || !host->n_lines || !host->lines[0]->n_events) return;
  Tensorflow__Profiler__XEvent *x = host->lines[0]->events[0];
  const int64_t ps_per_ms = 1000000000;
  KT_EQ_INT((int)(x->offset_ps / ps_per_ms), 0);
  KT_EQ_INT((int)(x->duration_ps / ps_per_ms), 100);
  x->offset_ps = -20 * ps_per_ms;
  x->duration_ps = 120 * ps_per_ms;
  n = tensorflow__profiler__xspace__get_packed_size(sp);
  buf = malloc(n);
  tensorflow__profiler__xspace__pack(sp, buf);
  kiln_prof_capture back;
  KT_CHECK(kiln_prof_xspace_decode(buf, n, "early.xplane.pb", &back, &err) == KILN_OK);
  const kiln_prof_event *step = NULL;
  for (int i = 0; i < back.n_threads && !step; i++)
    for (uint32_t k = 0; k < back.threads[i].n && !step; k++)
      if (back.threads[i].ev[k].kind == KILN_PROF_STEP) step = &back.threads[i].ev[k];
  KT_CHECK(step != NULL);
  if (step) {
    KT_CHECK(step->begin_ns == back.start_ns); /* clipped to the capture start */
    KT_CHECK(step->end_ns == back.start_ns + 100 * MS); /* its end kept */
  }
  /* and the summary reads it: step 7 is still [0, 100] ms */
  kiln_prof_analysis a;
  KT_CHECK(kiln_prof_analyze(&back, NULL, &a, &err) == KILN_OK);
  KT_EQ_INT(a.n_steps, 2);
  if (a.n_steps == 2) KT_NEAR((double)(a.steps[0].end_ns - a.steps[0].begin_ns) / MS, 100.0, 1e-9);
  kiln_prof_analysis_free(&a);
  kiln_prof_capture_clear(&back);
  free(buf);
  /* an offset of -1000 s is no capture's: corrupt, with the event named */
  x->offset_ps = -1000 * 1000 * ps_per_ms;
  n = tensorflow__profiler__xspace__get_packed_size(sp);
  buf = malloc(n);
  tensorflow__profiler__xspace__pack(sp, buf);
  KT_CHECK(kiln_prof_xspace_decode(buf, n, "garbage.xplane.pb", &back, &err) == KILN_ERR_CORRUPT);
  KT_STR_CONTAINS(err.msg, "garbage.xplane.pb: event 0 of line \"main thread\" has an impossible time");
  kiln_prof_capture_clear(&back);
  free(buf);
  tensorflow__profiler__xspace__free_unpacked(sp, NULL);
}

/* Steps of known wall times, for the aggregate. Training_Step 100 begins
 * at the capture's start and 111 ends at its end (cut: counted, left out of
 * the times); 101..110 are whole, of these durations in ms: */
static const double k_train_ms[10] = {10, 12, 11, 10, 30, 11, 12, 10, 15, 11};
/* then two Eval_Step regions of 5 and 6 ms. One kernel covers each step,
 * except step 105 (30 ms): its kernel runs 10 ms, then the host compiles
 * for 20 ms with no kernel running. */
typedef struct step_spec {
  const char *name;
  int64_t step;
  double ms;
} step_spec;

static void build_steps(kiln_prof_capture *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->host, sizeof c->host, "steps");
  c->n_threads = 2;
  c->threads = calloc(2, sizeof *c->threads);
  kiln_prof_thread_events *h = &c->threads[0], *l = &c->threads[1];
  snprintf(h->name, sizeof h->name, "main thread");
  h->tid = 1, h->lane = -1;
  snprintf(l->name, sizeof l->name, "kiln executor");
  l->tid = 2, l->lane = 0;
  h->ev = calloc(32, sizeof *h->ev);
  l->ev = calloc(32, sizeof *l->ev);
  double t = 0;
  step_spec steps[14] = {{"Training_Step", 100, 5}};
  for (int i = 0; i < 10; i++) steps[1 + i] = (step_spec){"Training_Step", 101 + i, k_train_ms[i]};
  steps[11] = (step_spec){"Eval_Step", 0, 5};
  steps[12] = (step_spec){"Eval_Step", 1, 6};
  steps[13] = (step_spec){"Training_Step", 111, 4};
  for (int i = 0; i < 14; i++) {
    kiln_prof_event st = ev(KILN_PROF_STEP, steps[i].name, t, t + steps[i].ms);
    st.arg = steps[i].step;
    h->ev[h->n++] = st;
    double kend = steps[i].step == 105 ? t + 10 : t + steps[i].ms;
    l->ev[l->n++] = ev(KILN_PROF_KERNEL, "Forward/fusion.0 (add)", t, kend);
    if (steps[i].step == 105) h->ev[h->n++] = ev(KILN_PROF_COMPILE, "compile", t + 10, t + 30);
    t += steps[i].ms;
  }
  c->start_ns = T0;
  c->end_ns = T0 + (uint64_t)(t * MS);
}

/* The expected statistics, worked out by hand from k_train_ms:
 * sorted 10 10 10 11 11 11 12 12 15 30; median (11 + 11) / 2 = 11; p90 the
 * ceil(0.9 * 10) = 9th smallest = 15; max 30; deviations from 11 sorted
 * 0 0 0 1 1 1 1 1 4 19, MAD (1 + 1) / 2 = 1; outlier above
 * max(1.5 * 11, 11 + 3 * 1) = 16.5: step 105 (30 ms) only — step 109
 * (15 ms) is over the median + 3 MAD but not 1.5 x the median. Duty: busy
 * 132 - 20 of 132 ms. Eval_Step: 2 whole steps, median 5.5, p90 the 2nd
 * smallest = 6, no outliers (fewer than 3). */
KT_TEST(summary_aggregates_steps_by_region) {
  kiln_prof_capture c;
  build_steps(&c);
  kiln_prof_analysis a;
  kiln_err err = {0};
  KT_CHECK(kiln_prof_analyze(&c, NULL, &a, &err) == KILN_OK);
  KT_EQ_INT(a.n_regions, 2);
  if (a.n_regions == 2) {
    const kiln_prof_region_stats *t = &a.regions[0], *e = &a.regions[1];
    KT_CHECK(!strcmp(t->name, "Training_Step") && !strcmp(e->name, "Eval_Step"));
    KT_EQ_INT(t->n_steps, 12);
    KT_EQ_INT(t->n_whole, 10);
    KT_NEAR(t->median_ns / 1e6, 11.0, 1e-9);
    KT_NEAR(t->p90_ns / 1e6, 15.0, 1e-9);
    KT_NEAR(t->max_ns / 1e6, 30.0, 1e-9);
    KT_NEAR(t->mad_ns / 1e6, 1.0, 1e-9);
    KT_NEAR(t->outlier_ns / 1e6, 16.5, 1e-9);
    KT_NEAR(t->wall_ns / 1e6, 132.0, 1e-6);
    KT_NEAR(t->busy_ns / 1e6, 112.0, 1e-6);
    KT_EQ_INT(t->n_gaps, 1);
    KT_EQ_INT(t->n_outliers, 1);
    if (t->n_outliers == 1) KT_EQ_INT((int)a.steps[t->outliers[0]].step, 105);
    KT_EQ_INT(e->n_steps, 2);
    KT_EQ_INT(e->n_whole, 2);
    KT_NEAR(e->median_ns / 1e6, 5.5, 1e-9);
    KT_NEAR(e->p90_ns / 1e6, 6.0, 1e-9);
    KT_EQ_INT(e->n_outliers, 0);
    KT_NEAR(e->outlier_ns, 0.0, 0);
  }
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  kiln_prof_analysis_print(&a, &c, "steps.xplane.pb", 100.0, 10.0, 10, 0, f);
  fclose(f);
  KT_STR_CONTAINS(text, "  Training_Step            12     10     11.000     15.000     30.000   84.8%     1        1\n");
  KT_STR_CONTAINS(text, "  Eval_Step                 2      2      5.500      6.000      6.000  100.0%     0        0\n");
  KT_STR_CONTAINS(text, "(2 step(s) cut by the capture's start or end");
  KT_STR_CONTAINS(text, "  step 105 Training_Step: 30.000 ms, 2.73 x the median; device busy 10.000 ms (33.3%), "
                        "1 idle gap(s)\n      idle 20.000 ms at +10.000 ms: host was compiling 20.000 ms (100%)\n");
  KT_CHECK(strstr(text, "step 109") == NULL);
  KT_CHECK(strstr(text, "every step:") == NULL); /* the per-step table only with --steps */
  KT_STR_CONTAINS(text, "(every step with its idle gaps: --steps)");
  free(text);
  f = open_memstream(&text, &len);
  kiln_prof_analysis_print(&a, &c, "steps.xplane.pb", 100.0, 10.0, 10, 1, f);
  fclose(f);
  KT_STR_CONTAINS(text, "every step:");
  KT_STR_CONTAINS(text, "  109      Training_Step            15.000       15.000  100.0%     0\n");
  KT_STR_CONTAINS(text, "  100      Training_Step             5.000        5.000  100.0%     0  (began before the capture)");
  free(text);
  kiln_prof_analysis_free(&a);
  kiln_prof_capture_clear(&c);
}

/* A program that includes only <kiln/kiln.h> and the profiler header passes
 * NULL for the error and reads the message from the sticky status. */
KT_TEST(public_summary_with_null_err_reports_through_the_sticky_status) {
  kiln_clear_error();
  KT_CHECK(kiln_profiler_summary("/nonexistent/kiln-null-err", stdout, NULL) == KILN_ERR_IO);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "/nonexistent/kiln-null-err");
  KT_STR_CONTAINS(kiln_last_error(), "test_profiler_summary.c:"); /* the caller's line */
  kiln_clear_error();
}

KT_MAIN(KT_CASE(summary_finds_known_gaps_and_attributions), KT_CASE(summary_aggregates_steps_by_region), KT_CASE(summary_survives_the_xplane_round_trip_and_prints),
        KT_CASE(reader_clips_early_events_and_rejects_garbage_times),
        KT_CASE(public_summary_with_null_err_reports_through_the_sticky_status))
