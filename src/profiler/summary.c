/* kiln_profiler_summary: what the seed's authors did by eye in the trace
 * viewer (select the device's idle gap, look at what the host threads were
 * doing), done for every step of a capture. */
#define _GNU_SOURCE
#include "profiler/intervals.h"
#include "profiler/summary.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/stats.h"
#include "profiler/ceilings.h"
#include "profiler/xspace_check.h"

typedef kiln_ival ival;

/* Memory events are instants (an allocation, a free): no work, no time. */
static int is_host_work(int kind) {
  return kind != KILN_PROF_USER && kind != KILN_PROF_STEP && kind != KILN_PROF_KERNEL && kind != KILN_PROF_MEMORY &&
         kind < KILN_PROF_KIND_COUNT;
}

typedef struct kref {
  const char *name;
  uint64_t b, e;
  double flops, bytes;
} kref;

static int cmp_kref(const void *x, const void *y) {
  const kref *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  if (c) return c;
  return a->b < b->b ? -1 : a->b > b->b;
}

static int cmp_kstats(const void *x, const void *y) {
  const kiln_prof_kernel_stats *a = x, *b = y;
  if (a->wall_ns != b->wall_ns) return a->wall_ns > b->wall_ns ? -1 : 1;
  return strcmp(a->name, b->name);
}

static int cmp_step(const void *x, const void *y) {
  const kiln_prof_step_stats *a = x, *b = y;
  return a->begin_ns < b->begin_ns ? -1 : a->begin_ns > b->begin_ns;
}

void kiln_prof_analysis_free(kiln_prof_analysis *a) {
  if (!a) return;
  for (int i = 0; i < a->n_steps; i++) free(a->steps[i].gaps);
  free(a->steps);
  for (int i = 0; i < a->n_regions; i++) free(a->regions[i].outliers);
  free(a->regions);
  free(a->kernels);
  memset(a, 0, sizeof *a);
}

/* The event's kind, unknown kinds read as user annotations. */
static int event_kind(const kiln_prof_event *e) {
  return e->kind < KILN_PROF_KIND_COUNT ? e->kind : KILN_PROF_USER;
}

/* The intervals one analysis works from: the kernels' (merged in place),
 * the kernel instances, the host work by kind and all of it together. */
typedef struct analyze_scratch {
  ival *kv;
  kref *kr;
  ival *hv[KILN_PROF_KIND_COUNT];
  ival *any;
  size_t nk, nkm, na, nh[KILN_PROF_KIND_COUNT];
} analyze_scratch;

typedef struct event_counts {
  size_t kernels, steps, host, kind[KILN_PROF_KIND_COUNT];
} event_counts;

/* First pass: how many of each, and the capture's lane and thread counts. */
static event_counts count_events(const kiln_prof_capture *c, kiln_prof_analysis *out) {
  event_counts n = {0};
  for (int i = 0; i < c->n_threads; i++) {
    const kiln_prof_thread_events *t = &c->threads[i];
    int dev = 0, host = 0;
    out->n_events += t->n;
    for (uint32_t k = 0; k < t->n; k++) {
      int kind = event_kind(&t->ev[k]);
      if (kind == KILN_PROF_KERNEL) n.kernels++, dev = 1;
      else host = 1;
      if (kind == KILN_PROF_STEP) n.steps++;
      if (is_host_work(kind)) n.kind[kind]++, n.host++;
    }
    out->n_lanes += dev;
    out->n_host_threads += host;
  }
  return n;
}

/* Room for the counted events and the steps; returns nonzero when out of memory. */
static int scratch_alloc(analyze_scratch *s, const event_counts *n, kiln_prof_analysis *out) {
  s->kv = malloc(sizeof *s->kv * (n->kernels + 1));
  s->kr = malloc(sizeof *s->kr * (n->kernels + 1));
  s->any = malloc(sizeof *s->any * (n->host + 1));
  int oom = !s->kv || !s->kr || !s->any;
  for (int k = 0; k < KILN_PROF_KIND_COUNT && !oom; k++)
    if (n->kind[k] && !(s->hv[k] = malloc(sizeof **s->hv * n->kind[k]))) oom = 1;
  out->steps = calloc(n->steps ? n->steps : 1, sizeof *out->steps);
  if (!out->steps) oom = 1;
  return oom;
}

static void scratch_free(analyze_scratch *s) {
  free(s->kv);
  free(s->kr);
  free(s->any);
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++) free(s->hv[k]);
}

/* Second pass: the intervals into s, the steps into out; returns the step count. */
static size_t collect_events(const kiln_prof_capture *c, analyze_scratch *s, kiln_prof_analysis *out) {
  size_t ns = 0;
  for (int i = 0; i < c->n_threads; i++) {
    const kiln_prof_thread_events *t = &c->threads[i];
    for (uint32_t k = 0; k < t->n; k++) {
      const kiln_prof_event *e = &t->ev[k];
      int kind = event_kind(e);
      if (kind == KILN_PROF_KERNEL) {
        s->kv[s->nk] = (ival){e->begin_ns, e->end_ns};
        s->kr[s->nk++] = (kref){e->name, e->begin_ns, e->end_ns, e->flops, e->bytes};
      } else if (kind == KILN_PROF_STEP) {
        out->steps[ns++] = (kiln_prof_step_stats){e->name, e->arg, e->begin_ns, e->end_ns, 0, 0, 0, NULL};
      } else if (is_host_work(kind)) {
        s->hv[kind][s->nh[kind]++] = (ival){e->begin_ns, e->end_ns};
        s->any[s->na++] = (ival){e->begin_ns, e->end_ns};
      }
    }
  }
  return ns;
}

/* Per-kernel totals from the instances kr (sorted here), the longest first;
 * returns nonzero when out of memory. */
static int summarize_kernels(kiln_prof_analysis *out, kref *kr, size_t nk) {
  qsort(kr, nk, sizeof *kr, cmp_kref);
  out->kernels = calloc(nk + 1, sizeof *out->kernels);
  if (!out->kernels) return 1;
  for (size_t i = 0; i < nk;) {
    kiln_prof_kernel_stats *s = &out->kernels[out->n_kernels++];
    s->name = kr[i].name;
    size_t j = i;
    while (j < nk && !strcmp(kr[j].name, s->name)) {
      uint64_t b = kr[j].b, e = kr[j].e;
      s->calls++;
      s->flops += kr[j].flops;
      s->bytes += kr[j].bytes;
      j++;
      /* lanes of one call overlap; back-to-back calls only touch */
      while (j < nk && !strcmp(kr[j].name, s->name) && kr[j].b < e) {
        if (kr[j].e > e) e = kr[j].e;
        s->flops += kr[j].flops;
        s->bytes += kr[j].bytes;
        j++;
      }
      s->wall_ns += (double)(e - b);
    }
    i = j;
  }
  qsort(out->kernels, (size_t)out->n_kernels, sizeof *out->kernels, cmp_kstats);
  return 0;
}

/* What the host did during the gap [gb, ge), and the innermost user region
 * open at its middle. */
static void describe_gap(kiln_prof_gap *g, const kiln_prof_capture *c, const analyze_scratch *s, uint64_t gb,
                         uint64_t ge) {
  memset(g, 0, sizeof *g);
  g->begin_ns = gb;
  g->end_ns = ge;
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++)
    if (s->nh[k]) g->kind_ns[k] = kiln_ival_within(s->hv[k], s->nh[k], gb, ge);
  g->user_ns = (double)(ge - gb) - kiln_ival_within(s->any, s->na, gb, ge);
  uint64_t mid = gb + (ge - gb) / 2;
  int best_depth = -1;
  for (int ti = 0; ti < c->n_threads; ti++)
    for (uint32_t k = 0; k < c->threads[ti].n; k++) {
      const kiln_prof_event *e = &c->threads[ti].ev[k];
      if (e->kind == KILN_PROF_USER && e->begin_ns <= mid && e->end_ns > mid && e->depth > best_depth)
        best_depth = e->depth, g->region = e->name;
    }
}

/* The step's device busy time and its gaps longer than the threshold;
 * returns nonzero when out of memory. */
static int analyze_step(kiln_prof_step_stats *st, const kiln_prof_analysis *out, const kiln_prof_capture *c,
                        const analyze_scratch *s) {
  const ival *kv = s->kv;
  size_t nkm = s->nkm;
  uint64_t a = st->begin_ns, b = st->end_ns;
  st->busy_ns = kiln_ival_within(kv, nkm, a, b);
  double thr = out->gap_threshold_ms * 1e6, f = out->gap_threshold_fraction * (double)(b - a);
  if (f < thr) thr = f;
  /* the gaps: the complement of the busy set inside [a, b) */
  size_t cap = 0;
  uint64_t cur = a;
  for (size_t i = 0; i <= nkm; i++) {
    uint64_t gb = cur, ge = i < nkm ? kv[i].b : b;
    if (i < nkm && kv[i].e <= a) continue;
    if (ge > b) ge = b;
    if (ge > gb && (double)(ge - gb) > thr) {
      if ((size_t)st->n_gaps == cap) {
        cap = cap ? cap * 2 : 8;
        kiln_prof_gap *g = realloc(st->gaps, sizeof *g * cap);
        if (!g) return 1;
        st->gaps = g;
      }
      describe_gap(&st->gaps[st->n_gaps++], c, s, gb, ge);
    }
    if (i < nkm) {
      if (kv[i].b >= b) break;
      cur = kv[i].e;
    }
  }
  return 0;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}


/* One region's statistics over its whole steps (w: scratch for n_steps
 * doubles); returns nonzero when out of memory. The rules are documented
 * at kiln_profiler_summary (include/kiln/profiler.h). */
static int region_stats(kiln_prof_analysis *out, kiln_prof_region_stats *rg, double *w) {
  int n = 0;
  for (int i = 0; i < out->n_steps; i++) {
    const kiln_prof_step_stats *st = &out->steps[i];
    if (strcmp(st->name, rg->name) || st->cut) continue;
    double wall = (double)(st->end_ns - st->begin_ns);
    w[n++] = wall;
    rg->wall_ns += wall;
    rg->busy_ns += st->busy_ns;
    rg->n_gaps += st->n_gaps;
  }
  rg->n_whole = n;
  if (n == 0) return 0;
  qsort(w, (size_t)n, sizeof *w, cmp_double);
  rg->median_ns = kiln_median_sorted(w, (size_t)n);
  rg->p90_ns = w[(9 * n + 9) / 10 - 1]; /* nearest rank: the ceil(0.9 n)-th smallest */
  rg->max_ns = w[n - 1];
  for (int i = 0; i < n; i++) w[i] = fabs(w[i] - rg->median_ns);
  qsort(w, (size_t)n, sizeof *w, cmp_double);
  rg->mad_ns = kiln_median_sorted(w, (size_t)n);
  if (n < 3) return 0; /* two steps say nothing about what is usual */
  rg->outlier_ns = fmax(1.5 * rg->median_ns, rg->median_ns + 3 * rg->mad_ns);
  for (int i = 0; i < out->n_steps; i++) {
    const kiln_prof_step_stats *st = &out->steps[i];
    if (strcmp(st->name, rg->name) || st->cut || (double)(st->end_ns - st->begin_ns) <= rg->outlier_ns) continue;
    if (!rg->outliers && !(rg->outliers = malloc(sizeof *rg->outliers * (size_t)n))) return 1;
    /* insertion, slowest first: outliers are few */
    int k = rg->n_outliers++;
    uint64_t wall = st->end_ns - st->begin_ns;
    for (; k > 0; k--) {
      const kiln_prof_step_stats *o = &out->steps[rg->outliers[k - 1]];
      if (o->end_ns - o->begin_ns >= wall) break;
      rg->outliers[k] = rg->outliers[k - 1];
    }
    rg->outliers[k] = i;
  }
  return 0;
}

/* Steps grouped by region name, in order of first appearance; returns
 * nonzero when out of memory. */
static int summarize_regions(kiln_prof_analysis *out) {
  int ns = out->n_steps;
  out->regions = calloc(ns ? (size_t)ns : 1, sizeof *out->regions);
  double *w = malloc(sizeof *w * (ns ? (size_t)ns : 1));
  int oom = !out->regions || !w;
  for (int i = 0; i < ns && !oom; i++) {
    int r = 0;
    while (r < out->n_regions && strcmp(out->regions[r].name, out->steps[i].name)) r++;
    if (r == out->n_regions) out->regions[out->n_regions++].name = out->steps[i].name;
    out->regions[r].n_steps++;
  }
  for (int r = 0; r < out->n_regions && !oom; r++) oom = region_stats(out, &out->regions[r], w);
  free(w);
  return oom;
}

kiln_status kiln_prof_analyze(const kiln_prof_capture *c, const kiln_profiler_summary_opts *opts,
                              kiln_prof_analysis *out, kiln_err *err) {
  memset(out, 0, sizeof *out);
  kiln_profiler_summary_opts o = opts ? *opts : (kiln_profiler_summary_opts){0};
  out->gap_threshold_ms = o.gap_ms > 0 ? o.gap_ms : 1.0;
  out->gap_threshold_fraction = o.gap_fraction > 0 ? o.gap_fraction : 0.05;
  out->dropped = c->dropped;
  event_counts n = count_events(c, out);
  analyze_scratch s = {0};
  int oom = scratch_alloc(&s, &n, out);
  size_t ns = oom ? 0 : collect_events(c, &s, out);
  if (!oom && ns == 0) { /* no step regions: the whole capture is one */
    out->steps[0] = (kiln_prof_step_stats){"capture", -1, c->start_ns, c->end_ns, 0, 0, 0, NULL};
    ns = 1;
  }
  out->n_steps = (int)ns;
  if (!oom) {
    qsort(out->steps, ns, sizeof *out->steps, cmp_step);
    /* kernel instances, before kv is merged */
    oom = summarize_kernels(out, s.kr, s.nk);
    s.nkm = kiln_ival_merge(s.kv, s.nk);
    for (int k = 0; k < KILN_PROF_KIND_COUNT; k++) s.nh[k] = kiln_ival_merge(s.hv[k], s.nh[k]);
    s.na = kiln_ival_merge(s.any, s.na);
  }
  for (size_t si = 0; si < ns && !oom; si++) {
    kiln_prof_step_stats *st = &out->steps[si];
    /* a step region is clipped to the capture: its wall time is only the
     * part inside the window (the "capture" pseudo-step is the window) */
    if (st->step >= 0 && st->begin_ns <= c->start_ns) st->cut |= KILN_PROF_CUT_BEFORE;
    if (st->step >= 0 && st->end_ns >= c->end_ns) st->cut |= KILN_PROF_CUT_AFTER;
    oom = analyze_step(st, out, c, &s);
  }
  if (!oom) oom = summarize_regions(out);
  scratch_free(&s);
  if (oom) {
    kiln_prof_analysis_free(out);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profile summary: out of memory");
  }
  return KILN_OK;
}

static void pct_of(char *buf, size_t n, double v, double peak) {
  if (peak > 0) snprintf(buf, n, "%5.1f%%", 100.0 * v / peak);
  else snprintf(buf, n, "   n/a");
}

/* One idle gap's line: its length, place, region and what the host did. */
static void print_gap(const kiln_prof_gap *gp, const kiln_prof_step_stats *s, FILE *f) {
  double len = (double)(gp->end_ns - gp->begin_ns);
  fprintf(f, "      idle %.3f ms at +%.3f ms", len / 1e6, (double)(gp->begin_ns - s->begin_ns) / 1e6);
  if (gp->region) fprintf(f, " (in %s)", gp->region);
  fprintf(f, ": host was");
  int any = 0;
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++) {
    if (gp->kind_ns[k] < len * 0.01 || gp->kind_ns[k] <= 0) continue;
    fprintf(f, "%s %s %.3f ms (%.0f%%)", any ? "," : "", kiln_prof_kind_name((kiln_prof_kind)k),
            gp->kind_ns[k] / 1e6, 100.0 * gp->kind_ns[k] / len);
    any = 1;
  }
  if (gp->user_ns >= len * 0.01 || !any)
    fprintf(f, "%s in user code %.3f ms (%.0f%%)", any ? "," : "", gp->user_ns / 1e6, 100.0 * gp->user_ns / len);
  fprintf(f, "\n");
}

static const char *cut_note(int cut) {
  return cut == (KILN_PROF_CUT_BEFORE | KILN_PROF_CUT_AFTER) ? "  (spans the whole capture)"
         : cut == KILN_PROF_CUT_BEFORE                       ? "  (began before the capture)"
         : cut == KILN_PROF_CUT_AFTER                        ? "  (ends after the capture)"
                                                             : "";
}

/* Every step's row and its gaps (--steps). */
static void print_steps(const kiln_prof_analysis *a, FILE *f) {
  fprintf(f, "\nevery step:\n");
  fprintf(f, "  %-8s %-20s %10s %12s %7s %5s\n", "step", "name", "wall ms", "device ms", "duty", "gaps");
  for (int i = 0; i < a->n_steps; i++) {
    const kiln_prof_step_stats *s = &a->steps[i];
    double wall = (double)(s->end_ns - s->begin_ns);
    char num[24];
    if (s->step >= 0) snprintf(num, sizeof num, "%lld", (long long)s->step);
    else snprintf(num, sizeof num, "-");
    fprintf(f, "  %-8s %-20.20s %10.3f %12.3f %6.1f%% %5d%s\n", num, s->name, wall / 1e6, s->busy_ns / 1e6,
            wall > 0 ? 100.0 * s->busy_ns / wall : 0.0, s->n_gaps, cut_note(s->cut));
    for (int g = 0; g < s->n_gaps; g++) print_gap(&s->gaps[g], s, f);
  }
}

/* The per-region table: counts, median / p90 / max wall time, duty, gaps. */
static void print_regions(const kiln_prof_analysis *a, FILE *f) {
  fprintf(f, "\nsteps by region (times of the steps entirely inside the capture; idle gap: no kernel lane busy "
             "for more than %.3g ms or %.3g%% of the step):\n",
          a->gap_threshold_ms, 100.0 * a->gap_threshold_fraction);
  fprintf(f, "  %-20s %6s %6s %10s %10s %10s %7s %5s %8s\n", "region", "steps", "whole", "median ms", "p90 ms",
          "max ms", "duty", "gaps", "outliers");
  int cut = 0;
  for (int r = 0; r < a->n_regions; r++) {
    const kiln_prof_region_stats *g = &a->regions[r];
    cut += g->n_steps - g->n_whole;
    if (!g->n_whole) {
      fprintf(f, "  %-20.20s %6d %6d %10s %10s %10s %7s %5s %8s\n", g->name, g->n_steps, 0, "-", "-", "-", "-", "-",
              "-");
      continue;
    }
    fprintf(f, "  %-20.20s %6d %6d %10.3f %10.3f %10.3f %6.1f%% %5d %8d\n", g->name, g->n_steps, g->n_whole,
            g->median_ns / 1e6, g->p90_ns / 1e6, g->max_ns / 1e6,
            g->wall_ns > 0 ? 100.0 * g->busy_ns / g->wall_ns : 0.0, g->n_gaps, g->n_outliers);
  }
  if (cut)
    fprintf(f, "  (%d step(s) cut by the capture's start or end: counted in \"steps\", left out of the times)\n",
            cut);
}

/* The outlier steps, slowest first per region, each with its gaps. */
static void print_outliers(const kiln_prof_analysis *a, FILE *f) {
  int n = 0;
  for (int r = 0; r < a->n_regions; r++) n += a->regions[r].n_outliers;
  fprintf(f, "\noutlier steps (wall time over 1.5 x their region's median and over the median + 3 median absolute "
             "deviations; regions of 3+ whole steps):%s\n",
          n ? "" : " none");
  for (int r = 0; r < a->n_regions; r++) {
    const kiln_prof_region_stats *g = &a->regions[r];
    for (int k = 0; k < g->n_outliers; k++) {
      const kiln_prof_step_stats *s = &a->steps[g->outliers[k]];
      double wall = (double)(s->end_ns - s->begin_ns);
      fprintf(f, "  step %lld %s: %.3f ms, %.2f x the median; device busy %.3f ms (%.1f%%), %d idle gap(s)\n",
              (long long)s->step, s->name, wall / 1e6, wall / g->median_ns, s->busy_ns / 1e6,
              wall > 0 ? 100.0 * s->busy_ns / wall : 0.0, s->n_gaps);
      for (int gi = 0; gi < s->n_gaps; gi++) print_gap(&s->gaps[gi], s, f);
    }
  }
}

static void print_kernels(const kiln_prof_analysis *a, double peak_gflops, double peak_gbps, int top, FILE *f) {
  if (!a->n_kernels) {
    fprintf(f, "\nno kernels ran during the capture\n");
    return;
  }
  double total = 0;
  int over = 0;
  for (int i = 0; i < a->n_kernels; i++) total += a->kernels[i].wall_ns;
  fprintf(f, "\ntop kernels by time (%d distinct, %.3f ms in all):\n", a->n_kernels, total / 1e6);
  fprintf(f, "  %10s %6s %6s %10s %7s %10s %7s  %s\n", "time ms", "share", "calls", "GFLOP/s", "of peak", "GB/s",
          "of peak", "kernel");
  for (int i = 0; i < a->n_kernels && i < top; i++) {
    const kiln_prof_kernel_stats *k = &a->kernels[i];
    double gf = k->wall_ns > 0 ? k->flops / k->wall_ns : 0, gb = k->wall_ns > 0 ? k->bytes / k->wall_ns : 0;
    char p1[16], p2[16];
    pct_of(p1, sizeof p1, gf, peak_gflops);
    pct_of(p2, sizeof p2, gb, peak_gbps);
    fprintf(f, "  %10.3f %5.1f%% %6lld %10.2f %7s %10.2f %7s  %s\n", k->wall_ns / 1e6,
            total > 0 ? 100.0 * k->wall_ns / total : 0.0, (long long)k->calls, gf, p1, gb, p2, k->name);
    over |= (peak_gflops > 0 && gf > peak_gflops) || (peak_gbps > 0 && gb > peak_gbps);
  }
  if (over)
    fprintf(f, "  (over 100%% of a ceiling: the ceilings were measured while the machine was busy, or the kernel's\n"
               "   data stayed in cache, faster than the memory STREAM measures; set KILN_PEAK_GFLOPS and\n"
               "   KILN_PEAK_GBPS to the machine's known ceilings)\n");
}

void kiln_prof_analysis_print(const kiln_prof_analysis *a, const kiln_prof_capture *c, const char *what,
                              double peak_gflops, double peak_gbps, int top, int per_step, FILE *f) {
  fprintf(f, "kiln profile summary of %s\n", what);
  fprintf(f, "capture: %.3f ms on host \"%s\": %d host thread(s), %d kernel lane(s), %llu events",
          (double)(c->end_ns - c->start_ns) / 1e6, c->host, a->n_host_threads, a->n_lanes,
          (unsigned long long)a->n_events);
  if (a->dropped)
    fprintf(f, ", %llu DROPPED (per-thread buffers were full: the timeline has holes; capture less or raise "
               "kiln_profiler_set_buffer_events)\n",
            (unsigned long long)a->dropped);
  else
    fprintf(f, ", none dropped\n");
  if (peak_gflops > 0 || peak_gbps > 0)
    fprintf(f, "machine ceilings: %.1f GFLOP/s (FP32 FMA peak), %.1f GB/s (STREAM triad)\n", peak_gflops, peak_gbps);
  print_regions(a, f);
  print_outliers(a, f);
  if (per_step) print_steps(a, f);
  else fprintf(f, "\n(every step with its idle gaps: --steps)\n");
  print_kernels(a, peak_gflops, peak_gbps, top, f);
}

/* The newest entry of dir whose name ends in suffix (regular file) or, with
 * suffix NULL, the newest subdirectory; names sort by time in both cases
 * (YYYY_MM_DD_HH_MM_SS), so "newest" is the greatest name. */
static int newest(const char *dir, const char *suffix, char *out, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  char best[256] = "";
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    size_t n = strlen(e->d_name);
    if (suffix) {
      size_t s = strlen(suffix);
      if (n <= s || strcmp(e->d_name + n - s, suffix)) continue;
    } else if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) {
      continue;
    }
    if (n < sizeof best && strcmp(e->d_name, best) > 0) snprintf(best, sizeof best, "%s", e->d_name);
  }
  closedir(d);
  if (!best[0]) return -1;
  snprintf(out, cap, "%s/%s", dir, best);
  return 0;
}

static kiln_status find_xplane(const char *path, char *out, size_t cap, kiln_err *err) {
  struct stat st;
  if (stat(path, &st) != 0) return kiln_err_set(err, KILN_ERR_IO, "profile summary: %s: no such file or directory", path);
  if (!S_ISDIR(st.st_mode)) {
    snprintf(out, cap, "%s", path);
    return KILN_OK;
  }
  if (newest(path, ".xplane.pb", out, cap) == 0) return KILN_OK;
  char prof[4096], run[4096];
  snprintf(prof, sizeof prof, "%s/plugins/profile", path);
  if (newest(prof, NULL, run, sizeof run) == 0 && newest(run, ".xplane.pb", out, cap) == 0) return KILN_OK;
  return kiln_err_set(err, KILN_ERR_IO,
                      "profile summary: no *.xplane.pb in %s (nor in its newest plugins/profile/<run>)", path);
}

kiln_status kiln_profiler_summary_at(const char *path, FILE *f, const kiln_profiler_summary_opts *opts, kiln_loc loc) {
  kiln_err e = {0};
  kiln_status s = kiln_prof_summary_run(path, f, opts, &e);
  return s == KILN_OK ? s : kiln_error(s, loc, "%s", e.msg);
}

static kiln_status load_capture(const char *file, kiln_prof_capture *c, kiln_err *err) {
  /* A regular file only (a FIFO would block), and a look at its first
   * byte before reading it all: a file that cannot be an XSpace is
   * rejected for what it is, without reading or decoding it. */
  int fd;
  memset(c, 0, sizeof *c);
  KILN_RETURN_IF_ERROR(err, kiln_fs_open_input(file, "profile summary: capture", &fd, err), "while opening %s", file);
  uint8_t first = 0;
  ssize_t got = pread(fd, &first, 1, 0);
  if (got == 1 && !kiln_prof_xspace_first_byte_ok(first)) {
    close(fd);
    return kiln_err_set(err, KILN_ERR_CORRUPT,
                        "profile summary: %s is not an XSpace protobuf (first byte 0x%02x is no XSpace field; "
                        "expected a *.xplane.pb written by a profiler)",
                        file, first);
  }
  uint8_t *data = NULL;
  size_t n = 0;
  /* The decoder's own limit (xplane.c); reading more would be wasted. */
  kiln_status s = kiln_fs_read_fd(fd, (size_t)512 << 20, &data, &n, err);
  close(fd);
  if (s != KILN_OK) {
    kiln_err_context(err, "while reading the capture %s", file);
    return s;
  }
  s = kiln_prof_xspace_decode(data, n, file, c, err);
  free(data);
  return s;
}

static kiln_status summarize_one(const kiln_prof_capture *c, const char *file, const kiln_profiler_summary_opts *opts,
                                 FILE *f, kiln_err *err) {
  kiln_prof_analysis a;
  kiln_status s = kiln_prof_analyze(c, opts, &a, err);
  if (s != KILN_OK) return s;
  double pf = opts ? opts->peak_gflops : 0, pb = opts ? opts->peak_gbps : 0;
  if (!(pf > 0) || !(pb > 0)) {
    kiln_prof_ceilings m = kiln_prof_machine_ceilings();
    if (!(pf > 0)) pf = m.gflops;
    if (!(pb > 0)) pb = m.gbps;
  }
  kiln_prof_analysis_print(&a, c, file, pf, pb, opts && opts->top_kernels > 0 ? opts->top_kernels : 10,
                           opts && opts->per_step, f);
  kiln_prof_analysis_free(&a);
  return KILN_OK;
}

#define MAX_RANK_FILES 1024

static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* The *.xplane.pb files of dir, sorted (malloc'ed names); their count. */
static int rank_files(const char *dir, char **names) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < MAX_RANK_FILES) {
    size_t l = strlen(e->d_name);
    if (e->d_name[0] == '.' || l <= 10 || strcmp(e->d_name + l - 10, ".xplane.pb")) continue;
    size_t need = strlen(dir) + l + 2;
    if (!(names[n] = malloc(need))) break;
    snprintf(names[n++], need, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  return n;
}

typedef struct rank_cap {
  kiln_prof_capture c;
  const char *file;
} rank_cap;

static int cmp_cap_rank(const void *x, const void *y) {
  const rank_cap *a = x, *b = y;
  return a->c.rank < b->c.rank ? -1 : a->c.rank > b->c.rank;
}

/* A run directory holding the captures of every rank of one job: the
 * distributed summary, then each rank's own. *done 0: not such a run. */
static kiln_status summarize_ranks(const char *dir, FILE *f, const kiln_profiler_summary_opts *opts, int *done,
                                   kiln_err *err) {
  *done = 0;
  char **names = calloc(MAX_RANK_FILES, sizeof *names);
  rank_cap *rc = calloc(MAX_RANK_FILES, sizeof *rc);
  kiln_prof_capture *caps = calloc(MAX_RANK_FILES, sizeof *caps); /* rc's captures, by rank (shallow copies) */
  if (!names || !rc || !caps) {
    free(names), free(rc), free(caps);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profile summary: out of memory");
  }
  int n = rank_files(dir, names), loaded = 0, ranks = n > 1;
  kiln_status s = KILN_OK;
  for (; ranks && loaded < n && s == KILN_OK; loaded++) {
    s = load_capture(names[loaded], &rc[loaded].c, err);
    rc[loaded].file = names[loaded];
    ranks = s != KILN_OK || rc[loaded].c.world == n;
  }
  if (s == KILN_OK && ranks) {
    qsort(rc, (size_t)n, sizeof *rc, cmp_cap_rank);
    for (int r = 0; r < n; r++) ranks &= rc[r].c.rank == r, caps[r] = rc[r].c;
  }
  if (s == KILN_OK && ranks) {
    *done = 1;
    kiln_prof_dist_analysis da;
    s = kiln_prof_dist_analyze(caps, n, &da, err);
    if (s == KILN_OK) {
      fprintf(f, "kiln profile summary of %s\n", dir);
      kiln_prof_dist_print(&da, opts && opts->top_kernels > 0 ? opts->top_kernels : 10, opts && opts->per_step, f);
      kiln_prof_dist_analysis_free(&da);
    }
    for (int r = 0; r < n && s == KILN_OK; r++) {
      fprintf(f, "\n──── rank %d ────\n", r);
      s = summarize_one(&rc[r].c, rc[r].file, opts, f, err);
    }
  }
  for (int i = 0; i < loaded; i++) kiln_prof_capture_clear(&rc[i].c);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names), free(rc), free(caps);
  return s;
}

kiln_status kiln_prof_summary_run(const char *path, FILE *f, const kiln_profiler_summary_opts *opts, kiln_err *err) {
  if (!path || !f) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "profile summary: path or stream is NULL");
  char file[4096];
  KILN_RETURN_IF_ERROR(err, find_xplane(path, file, sizeof file, err), "while looking for a capture");
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    int done = 0;
    kiln_status s = summarize_ranks(dir, f, opts, &done, err);
    if (s != KILN_OK || done) return s;
  }
  kiln_prof_capture c;
  kiln_status s = load_capture(file, &c, err);
  if (s != KILN_OK) return s;
  s = summarize_one(&c, file, opts, f, err);
  kiln_prof_capture_clear(&c);
  return s;
}
