/* The metrics reports: the registry (base/counters.c) printed in the style
 * of PyTorch/XLA's metrics_report(), the short summary, the JSON form, and
 * the KILN_METRICS report at exit. */
#define _GNU_SOURCE
#include "debug/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "debug/sites.h"
#include "kiln/kiln.h"

/* ───────────── report ───────────── */

static void kiln_strbuf_value(kiln_text *b, double v, int unit) {
  char tmp[32];
  if (unit == 1)
    kiln_text_duration_xla(b, v);
  else if (unit == 2)
    kiln_text_printf(b, "%s", kiln_fmt_bytes(v, tmp, sizeof tmp));
  else
    kiln_text_printf(b, "%.6g", v);
}

/* Unit of a metric from its name: 1 time (ns, "...Time"), 2 bytes ("...Bytes"), 0 plain. */
static int kiln_metric_name_unit(const char *name) {
  size_t n = strlen(name);
  if (n >= 4 && strcmp(name + n - 4, "Time") == 0) return 1;
  if (n >= 5 && strcmp(name + n - 5, "Bytes") == 0) return 2;
  return 0;
}


/* The collectives' overlap (dist.h): the part of their time in flight
 * (start to completion) the executor did not spend waiting for them. */
static void kiln_metrics_format_overlap(kiln_text *b) {
  kiln_metric_stats w, f;
  if (kiln_metric_data("CollectiveFlightTime", &f) != 0 || f.sum <= 0) return;
  if (kiln_metric_data("CollectiveTime", &w) != 0) w = (kiln_metric_stats){0};
  char t1[32], t2[32];
  double hidden = w.sum < f.sum ? 1.0 - w.sum / f.sum : 0.0;
  kiln_text_printf(b, "Collective overlap: %.1f%% of the collectives' time in flight hidden behind compute (waited %s of %s)\n",
                   100.0 * hidden, kiln_fmt_duration(w.sum, t1, sizeof t1), kiln_fmt_duration(f.sum, t2, sizeof t2));
}

static void kiln_metrics_format(kiln_text *b) {
  static const double pcts[] = {1, 5, 10, 20, 50, 80, 90, 95, 99};
  kiln_metric_snapshot *s = malloc(sizeof *s);
  const char **v;
  int n = kiln_counters_sorted(1, &v);
  for (int i = 0; s && i < n; i++) {
    if (kiln_metric_snapshot_take(v[i], s) != 0 || s->count == 0) continue; /* cleared or never sampled */
    int is_time = kiln_metric_name_unit(v[i]);
    kiln_text_printf(b, "Metric: %s\n  TotalSamples: %lld\n  Accumulator: ", v[i], (long long)s->count);
    kiln_strbuf_value(b, s->sum, is_time);
    /* Rates over the retained window, as PyTorch/XLA computes them. */
    double span_s = (double)(s->t_last - s->t_first) / 1e9;
    kiln_text_printf(b, "\n  ValueRate: ");
    kiln_strbuf_value(b, span_s > 0 ? s->window_sum / span_s : 0, is_time);
    kiln_text_printf(b, " / second\n  Rate: %.6g / second\n  Percentiles: ",
                       span_s > 0 ? (double)s->n / span_s : 0);
    for (size_t k = 0; k < sizeof pcts / sizeof pcts[0]; k++) {
      kiln_text_printf(b, "%s%g%%=", k ? "; " : "", pcts[k]);
      kiln_strbuf_value(b, kiln_metric_percentile(s, pcts[k]), is_time);
    }
    kiln_text_printf(b, "\n");
  }
  free(v);
  free(s);
  n = kiln_counters_sorted(0, &v);
  for (int i = 0; i < n; i++) {
    int64_t val = kiln_counter_value(v[i]);
    if (val == 0) continue;
    kiln_text_printf(b, "Counter: %s\n  Value: %lld\n", v[i], (long long)val);
  }
  free(v);
  kiln_metrics_format_overlap(b);
  kiln_text src = {0};
  kiln_sites_format(&src, ~0u, "  ");
  if (src.len) kiln_text_printf(b, "Source lines (graph cuts and device-to-host reads):\n%s", kiln_text_str(&src));
  kiln_text_free(&src);
}

/* The last report of each kind handed out; replaced by the next call of
 * the same kind (see kiln.h). */
enum { KILN_REPORT_FULL, KILN_REPORT_SHORT, KILN_REPORT_JSON, KILN_REPORT_KINDS };
static pthread_mutex_t g_report_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_report[KILN_REPORT_KINDS];

static const char *kiln_report_publish(int kind, kiln_text *b) {
  char *p = b->failed ? (kiln_text_free(b), strdup("")) : kiln_text_take(b);
  pthread_mutex_lock(&g_report_mu);
  free(g_report[kind]);
  g_report[kind] = p;
  const char *r = p ? p : "";
  pthread_mutex_unlock(&g_report_mu);
  return r;
}

const char *kiln_metrics_report(void) {
  kiln_text b = {0};
  kiln_metrics_format(&b);
  return kiln_report_publish(KILN_REPORT_FULL, &b);
}

static double kiln_metric_sum(const char *name, int64_t *count) {
  kiln_metric_stats st;
  if (kiln_metric_data(name, &st) != 0) st = (kiln_metric_stats){0};
  if (count) *count = st.count;
  return st.sum;
}

void kiln_metrics_format_short(kiln_text *b) {
  int64_t steps = kiln_counter_value("MarkStep");
  int64_t execs = kiln_counter_value("Execute"), xfers = kiln_counter_value("TransferFromDevice");
  int64_t n_compile = 0, n_exec = 0;
  double compile_ns = kiln_metric_sum("CompileTime", &n_compile);
  double exec_ns = kiln_metric_sum("ExecuteTime", &n_exec);
  char t1[32], t2[32], t3[32], t4[32];
  double per = steps > 0 ? (double)steps : 1;
  kiln_text_printf(b, "steps: %lld\n", (long long)steps);
  kiln_text_printf(b, "compiles: %lld (cached %lld, from disk %lld)\n", (long long)kiln_counter_value("UncachedCompile"),
                   (long long)kiln_counter_value("CachedCompile"),
                   (long long)kiln_counter_value("PersistentCacheGraphHit"));
  if (kiln_counter_value("DynamicFamily") || kiln_counter_value("DynamicPlan"))
    kiln_text_printf(b, "dynamic shapes: %lld compiles for any size, %lld new sizes planned (docs/dynamic-shapes.md)\n",
                     (long long)kiln_counter_value("DynamicFamily"), (long long)kiln_counter_value("DynamicPlan"));
  kiln_text_printf(b, "executions: %lld (%.2f per step)\n", (long long)execs, steps ? (double)execs / per : 0);
  kiln_text_printf(b, "transfers to host: %lld (%.2f per step, %s)\n", (long long)xfers,
                   steps ? (double)xfers / per : 0,
                   kiln_fmt_bytes((double)kiln_counter_value("TransferFromDeviceBytes"), t1, sizeof t1));
  kiln_text_printf(b, "compile time: %s (%s per compile)\n", kiln_fmt_duration(compile_ns, t2, sizeof t2),
                   kiln_fmt_duration(n_compile ? compile_ns / (double)n_compile : 0, t3, sizeof t3));
  kiln_text_printf(b, "execute time: %s (%s per execution)\n", kiln_fmt_duration(exec_ns, t4, sizeof t4),
                   kiln_fmt_duration(n_exec ? exec_ns / (double)n_exec : 0, t1, sizeof t1));
  kiln_metrics_format_overlap(b);
  kiln_text_printf(b, "graph cuts: step marker %lld, value read %lld, data-dependent %lld, explicit compile %lld\n",
                   (long long)kiln_counter_value("StepMarkerCut"), (long long)kiln_counter_value("ValueReadCut"),
                   (long long)kiln_counter_value("DataDependentCut"),
                   (long long)kiln_counter_value("ExplicitCompileCut"));
}

const char *kiln_metrics_report_short(void) {
  kiln_text b = {0};
  kiln_metrics_format_short(&b);
  return kiln_report_publish(KILN_REPORT_SHORT, &b);
}

/* Finite numbers only: JSON has no NaN or infinity. */
static void kiln_json_num(kiln_text *b, double v) { kiln_text_printf(b, "%.17g", isfinite(v) ? v : 0.0); }

const char *kiln_metrics_report_json(void) {
  kiln_text b = {0};
  const char **v;
  kiln_text_printf(&b, "{\"counters\":{");
  int n = kiln_counters_sorted(0, &v), first = 1;
  for (int i = 0; i < n; i++) {
    int64_t val = kiln_counter_value(v[i]);
    if (val == 0) continue;
    kiln_text_printf(&b, "%s", first ? "" : ",");
    kiln_text_json_str(&b, v[i]);
    kiln_text_printf(&b, ":%lld", (long long)val);
    first = 0;
  }
  free(v);
  kiln_text_printf(&b, "},\"metrics\":{");
  n = kiln_counters_sorted(1, &v), first = 1;
  for (int i = 0; i < n; i++) {
    kiln_metric_stats st;
    if (kiln_metric_data(v[i], &st) != 0 || st.count == 0) continue;
    kiln_text_printf(&b, "%s", first ? "" : ",");
    kiln_text_json_str(&b, v[i]);
    kiln_text_printf(&b, ":{\"count\":%lld,\"sum\":", (long long)st.count);
    kiln_json_num(&b, st.sum);
    const char *keys[] = {"min", "max", "p50", "p90", "p99"};
    double vals[] = {st.min, st.max, st.p50, st.p90, st.p99};
    for (int k = 0; k < 5; k++) {
      kiln_text_printf(&b, ",\"%s\":", keys[k]);
      kiln_json_num(&b, vals[k]);
    }
    kiln_text_printf(&b, "}");
    first = 0;
  }
  free(v);
  kiln_text_printf(&b, "},\"sites\":[");
  int ns = kiln_site_list(NULL, 0);
  kiln_site_stats *sv = ns > 0 ? malloc(sizeof *sv * (size_t)ns) : NULL;
  if (sv) {
    int got = kiln_site_list(sv, ns); /* records may have been cleared meanwhile */
    if (got < ns) ns = got;
  }
  for (int i = 0; sv && i < ns; i++) {
    kiln_text_printf(&b, "%s{\"file\":", i ? "," : "");
    kiln_text_json_str(&b, kiln_fmt_file(sv[i].file));
    kiln_text_printf(&b, ",\"line\":%d,\"kind\":", sv[i].line);
    kiln_text_json_str(&b, kiln_site_kind_name(sv[i].kind));
    kiln_text_printf(&b, ",\"count\":%lld,\"bytes\":%lld,\"time_ns\":", (long long)sv[i].count,
                     (long long)sv[i].bytes);
    kiln_json_num(&b, sv[i].time_ns);
    kiln_text_printf(&b, ",\"wait_ns\":");
    kiln_json_num(&b, sv[i].wait_ns);
    kiln_text_printf(&b, ",\"compiles\":%lld,\"compile_ns\":", (long long)sv[i].compiles);
    kiln_json_num(&b, sv[i].compile_ns);
    kiln_text_printf(&b, "}");
  }
  free(sv);
  kiln_text_printf(&b, "]}\n");
  return kiln_report_publish(KILN_REPORT_JSON, &b);
}

void kiln_metrics_clear(void) {
  kiln_counters_reset_all();
  kiln_sites_clear();
}

/* ───────────── report at exit ───────────── */

/* KILN_METRICS_FILE may contain %p, replaced by the process id, and %r,
 * replaced by the rank (0 alone), so that several processes of one job
 * write separate files. */
static void kiln_metrics_exit_path(const char *tmpl, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = tmpl; *p && o + 1 < cap; p++) {
    if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r')) {
      int n = snprintf(out + o, cap - o, "%ld", p[1] == 'p' ? (long)getpid() : (long)kiln_log_rank(NULL));
      if (n < 0 || (size_t)n >= cap - o) break;
      o += (size_t)n;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = 0;
}

static void kiln_metrics_exit_report(void) {
  const char *on = kiln_cfg()->metrics;
  const char *file = kiln_cfg()->metrics_file;
  int to_stderr = on && on[0] && strcmp(on, "0") != 0;
  int to_file = file && file[0];
  if (!to_stderr && !to_file) return;
  const char *rep = kiln_metrics_report();
  int world = 1, rank = kiln_log_rank(&world);
  if (to_stderr) {
    if (world != 1) { /* several processes' reports on one stderr: say whose */
      char w[16] = "?";
      if (world > 0) snprintf(w, sizeof w, "%d", world);
      fprintf(stderr, "──── kiln metrics (rank %d of %s) ────\n%s", rank, w, rep);
    } else {
      fprintf(stderr, "──── kiln metrics ────\n%s", rep);
    }
  }
  if (to_file) {
    char path[4096];
    kiln_metrics_exit_path(file, path, sizeof path);
    /* The shared output rule (base/fs.h): atomic replace of a regular file,
     * through a symlink to its target, direct write to a character device
     * (/dev/stdout), refusal of anything else. */
    kiln_err err = {0};
    if (kiln_fs_write_output(path, "KILN_METRICS_FILE", rep, strlen(rep), &err) != KILN_OK)
      kiln_log_printf(stderr, "kiln: %s\n", err.msg);
  }
}

static pthread_once_t g_exit_once = PTHREAD_ONCE_INIT;
static void kiln_metrics_exit_install_once(void) { atexit(kiln_metrics_exit_report); }

void kiln_metrics_install_exit_report(void) { pthread_once(&g_exit_once, kiln_metrics_exit_install_once); }
