/* The distributed profiler on hand-built captures whose figures are known
 * by construction (the oracle is the arithmetic in the comments): the
 * per-rank files of a run and what they carry (rank, world, clock offset,
 * the Collectives line with bytes and algorithm bandwidth, XProf's step
 * grouping and framework ops named name:Type), the straggler per collective with what it
 * did meanwhile, each rank's temporal breakdown, clocks of two hosts
 * aligned by their CLOCK_REALTIME offsets, and the printed summary of a run
 * directory. */
#define _GNU_SOURCE
#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kt.h"
#include "prof_fixture.h"
#include "profiler/capture.h"
#include "profiler/summary.h"
#include "xplane.pb-c.h"

#define MS 1000000ull
#define T0 (1000 * MS)
#define COLL "all_reduce f32 [1024] at train.c:42"

static kiln_prof_event ev(kiln_prof_kind k, const char *name, double b_ms, double e_ms, int64_t arg) {
  kiln_prof_event e = {.begin_ns = T0 + (uint64_t)(b_ms * MS), .end_ns = T0 + (uint64_t)(e_ms * MS), .name = name,
                       .kind = (uint8_t)k, .arg = arg};
  return e;
}

/* Two steps (numbers 1 and 2) of 100 ms on each rank, capture [-10, 210].
 * Rank 0: kernels [0,40] [70,100]; all-reduce [40,70] (4096 bytes);
 *         step 2: kernels [100,150] [160,200], lane 1 [150,155]; all-reduce [150,160].
 * Rank 1: kernels [0,40] [70,100]; "Forward" [40,60] with a compile [40,50];
 *         all-reduce [60,70] (20 ms after rank 0); step 2: kernels [100,150]
 *         [160,200]; all-reduce [150,160] (on time).
 * shift_ms moves rank's whole clock (another host's CLOCK_MONOTONIC). */
static void build(kiln_prof_capture *c, int rank, const char *host, double shift_ms, int64_t rt_offset) {
  memset(c, 0, sizeof *c);
  snprintf(c->host, sizeof c->host, "%s", host);
  c->rank = rank, c->world = 2, c->realtime_offset_ns = rt_offset;
  c->start_ns = T0 - 10 * MS + (uint64_t)(shift_ms * MS);
  c->end_ns = T0 + 210 * MS + (uint64_t)(shift_ms * MS);
  prof_fixture_threads(c);
  kiln_prof_thread_events *h = &c->threads[0], *l0 = &c->threads[1], *l1 = &c->threads[2];
  h->ev[h->n++] = ev(KILN_PROF_STEP, "Training_Step", 0, 100, 1);
  h->ev[h->n++] = ev(KILN_PROF_STEP, "Training_Step", 100, 200, 2);
  l0->ev[l0->n++] = ev(KILN_PROF_KERNEL, "Forward/gemm 8x8x8", 0, 40, -1);
  l0->ev[l0->n++] = ev(KILN_PROF_KERNEL, "Backward/fusion.1 (mul)", 70, 100, -1);
  l0->ev[l0->n++] = ev(KILN_PROF_KERNEL, "Forward/gemm 8x8x8", 100, 150, -1);
  l0->ev[l0->n++] = ev(KILN_PROF_KERNEL, "Backward/fusion.1 (mul)", 160, 200, -1);
  if (rank == 0) {
    l0->ev[l0->n++] = ev(KILN_PROF_COLLECTIVE, COLL, 40, 70, 4096);
    l1->ev[l1->n++] = ev(KILN_PROF_KERNEL, "Backward/fusion.1 (mul)", 150, 155, -1);
  } else {
    kiln_prof_event fwd = ev(KILN_PROF_USER, "Forward", 40, 60, -1);
    fwd.depth = 1;
    h->ev[h->n++] = fwd;
    h->ev[h->n++] = ev(KILN_PROF_COMPILE, "compile", 40, 50, -1);
    l0->ev[l0->n++] = ev(KILN_PROF_COLLECTIVE, COLL, 60, 70, 4096);
  }
  l0->ev[l0->n++] = ev(KILN_PROF_COLLECTIVE, COLL, 150, 160, 4096);
  for (int t = 0; t < 3; t++)
    for (uint32_t k = 0; k < c->threads[t].n; k++) {
      c->threads[t].ev[k].begin_ns += (uint64_t)(shift_ms * MS);
      c->threads[t].ev[k].end_ns += (uint64_t)(shift_ms * MS);
    }
}

static void check_analysis(const kiln_prof_dist_analysis *a) {
  KT_EQ_INT(a->n_ranks, 2);
  KT_EQ_INT(a->n_colls, 2);
  KT_EQ_INT(a->n_steps_unmatched, 0);
  if (a->n_colls != 2 || a->n_ranks != 2) return;
  const kiln_prof_coll_match *m = &a->colls[0]; /* the latest first */
  KT_EQ_INT((int)m->step, 1);
  KT_EQ_INT(m->index, 0);
  KT_EQ_INT(m->late_rank, 1);
  KT_EQ_INT(m->first_rank, 0);
  KT_CHECK(m->name && !strcmp(m->name, COLL));
  KT_EQ_INT((int)m->bytes, 4096);
  KT_NEAR((double)(m->last_ns - m->first_ns) / 1e6, 20.0, 1e-6);
  KT_NEAR(m->kind_ns[KILN_PROF_COMPILE] / 1e6, 10.0, 1e-6);
  KT_NEAR(m->compute_ns, 0.0, 1e-9);
  KT_NEAR(m->user_ns / 1e6, 10.0, 1e-6); /* [50,60]: no kiln event */
  KT_CHECK(m->region && !strcmp(m->region, "Forward"));
  KT_EQ_INT((int)a->colls[1].step, 2);
  KT_NEAR((double)(a->colls[1].last_ns - a->colls[1].first_ns), 0.0, 0);
  const kiln_prof_rank_stats *r0 = &a->ranks[0], *r1 = &a->ranks[1];
  KT_EQ_INT(r0->n_steps, 2);
  KT_NEAR(r0->wall_ns / 1e6, 200.0, 1e-6);
  KT_NEAR(r0->compute_ns / 1e6, 165.0, 1e-6); /* 70 + [100,155] u [160,200] = 95 */
  KT_NEAR(r0->comm_ns / 1e6, 40.0, 1e-6);
  KT_NEAR(r0->overlap_ns / 1e6, 5.0, 1e-6); /* lane 1 [150,155] during the all-reduce */
  KT_NEAR(r0->idle_ns, 0.0, 1e-3);
  KT_NEAR(r0->wait_ns / 1e6, 20.0, 1e-6); /* arrived at 40, rank 1 at 60 */
  KT_EQ_INT(r0->n_late, 0);
  KT_NEAR(r1->compute_ns / 1e6, 160.0, 1e-6);
  KT_NEAR(r1->comm_ns / 1e6, 20.0, 1e-6);
  KT_NEAR(r1->idle_ns / 1e6, 20.0, 1e-6);
  KT_NEAR(r1->idle_kind_ns[KILN_PROF_COMPILE] / 1e6, 10.0, 1e-6);
  KT_NEAR(r1->idle_user_ns / 1e6, 10.0, 1e-6);
  KT_NEAR(r1->wait_ns, 0.0, 1e-9);
  KT_EQ_INT(r1->n_late, 1);
  KT_NEAR(r1->late_ns / 1e6, 20.0, 1e-6);
}

KT_TEST(straggler_and_breakdown_on_one_host) {
  kiln_prof_capture c[2];
  build(&c[0], 0, "h", 0, 5);
  build(&c[1], 1, "h", 0, 7); /* one host: the offsets are not used */
  kiln_prof_dist_analysis a;
  kiln_err err = {0};
  KT_CHECK(kiln_prof_dist_analyze(c, 2, &a, &err) == KILN_OK);
  KT_EQ_INT(a.realtime_aligned, 0);
  check_analysis(&a);
  kiln_prof_dist_analysis_free(&a);
  kiln_prof_capture_clear(&c[0]);
  kiln_prof_capture_clear(&c[1]);
}

/* Rank 1 on another host whose CLOCK_MONOTONIC reads 5 s more at the same
 * moment: its REALTIME - MONOTONIC offset is 5 s less. Aligned, the figures
 * are those of one host. */
KT_TEST(two_hosts_align_by_realtime_offset) {
  kiln_prof_capture c[2];
  int64_t off = (int64_t)1700000000 * 1000000000;
  build(&c[0], 0, "h1", 0, off);
  build(&c[1], 1, "h2", 5000, off - (int64_t)5000 * (int64_t)MS);
  kiln_prof_dist_analysis a;
  kiln_err err = {0};
  KT_CHECK(kiln_prof_dist_analyze(c, 2, &a, &err) == KILN_OK);
  KT_EQ_INT(a.realtime_aligned, 1);
  check_analysis(&a);
  kiln_prof_dist_analysis_free(&a);
  kiln_prof_capture_clear(&c[0]);
  kiln_prof_capture_clear(&c[1]);
}

static const char *stat_name(const Tensorflow__Profiler__XPlane *p, int64_t id) {
  for (size_t i = 0; i < p->n_stat_metadata; i++)
    if (p->stat_metadata[i]->key == id) return p->stat_metadata[i]->value->name;
  return "";
}

static const Tensorflow__Profiler__XStat *find_stat(const Tensorflow__Profiler__XPlane *p,
                                                    const Tensorflow__Profiler__XEvent *x, const char *name) {
  for (size_t i = 0; i < x->n_stats; i++)
    if (!strcmp(stat_name(p, x->stats[i]->metadata_id), name)) return x->stats[i];
  return NULL;
}

/* What XProf and the viewers read: per-event stats of the host plane. */
static void check_xspace(const uint8_t *buf, size_t n) {
  Tensorflow__Profiler__XSpace *sp = tensorflow__profiler__xspace__unpack(NULL, n, buf);
  KT_CHECK(sp != NULL);
  if (!sp) return;
  const Tensorflow__Profiler__XPlane *host = sp->planes[0];
  int colls = 0, ops = 0, steps = 0;
  for (size_t l = 0; l < host->n_lines; l++) {
    const Tensorflow__Profiler__XLine *line = host->lines[l];
    for (size_t k = 0; k < line->n_events; k++) {
      const Tensorflow__Profiler__XEvent *x = line->events[k];
      const Tensorflow__Profiler__XStat *g = find_stat(host, x, "group_id"), *t = find_stat(host, x, "tf_op");
      const Tensorflow__Profiler__XStat *sn = find_stat(host, x, "step_name");
      KT_CHECK_MSG(g != NULL, "event %zu of line %s has no group_id", k, line->name);
      if (!strcmp(line->name, "Collectives")) {
        colls++;
        const Tensorflow__Profiler__XStat *b = find_stat(host, x, "bytes"), *bw = find_stat(host, x, "algbw_gbps");
        KT_CHECK(b && b->int64_value == 4096);
        /* 4096 bytes in 30 ms (step 1) or 10 ms (step 2) */
        double want = 4096.0 / (x->duration_ps / 1000.0);
        KT_CHECK(bw && bw->double_value > 0);
        if (bw) KT_NEAR(bw->double_value, want, 1e-12);
      }
      if (!strncmp(line->name, "Ops lane ", 9)) {
        ops++;
        KT_CHECK(t == NULL); /* the name says it: a tf_op stat too would count the op twice */
        const char *nm = NULL;
        for (size_t m = 0; m < host->n_event_metadata; m++)
          if (host->event_metadata[m]->key == x->metadata_id) nm = host->event_metadata[m]->value->name;
        KT_CHECK_MSG(nm && !strcmp(nm, k % 2 ? "Backward/fusion.1__mul_:Fusion" : "Forward/gemm_8x8x8:Gemm"),
                     "op %s", nm ? nm : "(none)");
      }
      if (sn) {
        steps++;
        KT_CHECK(!strcmp(sn->str_value, g && g->int64_value == 1 ? "Training_Step 1" : "Training_Step 2"));
      }
    }
  }
  KT_EQ_INT(colls, 2);
  KT_EQ_INT(ops, 4);
  KT_EQ_INT(steps, 2);
  tensorflow__profiler__xspace__free_unpacked(sp, NULL);
}

KT_TEST(rank_files_round_trip_and_the_run_summary_names_the_straggler) {
  char dir[] = "/tmp/kiln-test-prof-dist-XXXXXX";
  KT_CHECK(mkdtemp(dir) != NULL);
  kiln_prof_capture c[2];
  build(&c[0], 0, "h", 0, 123456789);
  build(&c[1], 1, "h", 0, 123456789);
  kiln_err err = {0};
  for (int r = 0; r < 2; r++) KT_CHECK(kiln_prof_write_run(&c[r], dir, &err) == KILN_OK);
  uint8_t *buf = NULL;
  size_t n = 0;
  KT_CHECK(kiln_prof_xspace_encode(&c[1], &buf, &n, &err) == KILN_OK);
  check_xspace(buf, n);
  kiln_prof_capture d;
  KT_CHECK(kiln_prof_xspace_decode(buf, n, "rank1", &d, &err) == KILN_OK);
  KT_EQ_INT(d.rank, 1);
  KT_EQ_INT(d.world, 2);
  KT_CHECK(d.realtime_offset_ns == 123456789);
  int nk = 0, nc = 0;
  for (int t = 0; t < d.n_threads; t++)
    for (uint32_t k = 0; k < d.threads[t].n; k++)
      nk += d.threads[t].ev[k].kind == KILN_PROF_KERNEL, nc += d.threads[t].ev[k].kind == KILN_PROF_COLLECTIVE;
  KT_EQ_INT(nk, 4); /* the ops lines are not read back as more kernels */
  KT_EQ_INT(nc, 2);
  kiln_prof_capture_clear(&d);
  free(buf);
  char path[256];
  snprintf(path, sizeof path, "%s/h-rank1.xplane.pb", dir);
  KT_CHECK(access(path, R_OK) == 0);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  kiln_profiler_summary_opts o = {.peak_gflops = 100, .peak_gbps = 10};
  KT_CHECK(kiln_prof_summary_run(dir, f, &o, &err) == KILN_OK);
  fclose(f);
  KT_STR_CONTAINS(text, "distributed capture: 2 rank(s), one clock");
  KT_STR_CONTAINS(text, "the straggler is rank 1, last at 1 of them, 20.000 ms behind in all");
  KT_STR_CONTAINS(text, "  step 1 collective 0: rank 1 arrived 20.000 ms after rank 0 at " COLL " (4096 bytes)\n"
                        "    meanwhile rank 1 (in \"Forward\"): compiling 10.000 ms, user code or idle 10.000 ms\n");
  KT_STR_CONTAINS(text, "     0      2    200.000    82.5%     20.0%     12.5%      0.0%    20.000");
  KT_STR_CONTAINS(text, "  rank 1 idle 20.000 ms: compiling 10.000 ms, user code or idle 10.000 ms\n");
  KT_STR_CONTAINS(text, "──── rank 1 ────");
  free(text);
  for (int r = 0; r < 2; r++) {
    const char *ext[2] = {"xplane.pb", "trace.json.gz"};
    for (int e = 0; e < 2; e++) {
      snprintf(path, sizeof path, "%s/h-rank%d.%s", dir, r, ext[e]);
      unlink(path);
    }
    kiln_prof_capture_clear(&c[r]);
  }
  rmdir(dir);
}

KT_MAIN(KT_CASE(straggler_and_breakdown_on_one_host), KT_CASE(two_hosts_align_by_realtime_offset),
        KT_CASE(rank_files_round_trip_and_the_run_summary_names_the_straggler))
