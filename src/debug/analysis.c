/* The KILN_DEBUG analysis (see analysis.h and docs/metrics.md). */
#include "debug/analysis.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "debug/bucket.h"
#include "debug/graphdiff.h"
#include "debug/metrics.h"
#include "debug/sites.h"
#include "base/text.h"

enum {
  KILN_AN_HISTORY = 16,      /* graphs remembered per cut site (most recent) */
  KILN_AN_COMPILE_RATIO = 4, /* warn when, after warm-up, compiles >= steps / 4 */
  KILN_AN_UNMARKED_READS = 10000, /* value reads in one step that make it a loop missing its marker */
  KILN_AN_UNMARKED_CUTS = 32, /* cuts in one step (and twice a marked step's) before the warnings are checked at cuts */
  KILN_AN_DIFF_CAP = 8192,   /* bytes of "what changed" text per compile */
  KILN_AN_DIFF_LINES = 10,   /* "what changed" lines printed per compile */
  KILN_AN_BRIEF_ROWS = 10,   /* graphs listed by KILN_DEBUG=1's exit summary */
  KILN_AN_FULL_RECORDS = 4,  /* KILN_DEBUG=1: full compile records per call site before a pattern is named */
};

/* What the graph table and the totals show of a compiled graph: read from
 * its cache entry, or kept here once the cache dropped the entry
 * (KILN_EV_DROPPED: a program that compiles without end keeps twice
 * KILN_GRAPH_CACHE_SIZE entries). */
typedef struct kiln_an_row {
  uint64_t compile_step, execs, hits;
  double compile_ns;
  int compile_no, nodes, inputs, outputs, family, from_disk;
  char tag[32];
} kiln_an_row;

typedef struct kiln_an_graph {
  kiln_cache_entry *e; /* NULL once dropped from the cache: gone holds its row */
  kiln_cut_cause cause;
  kiln_an_row gone;
} kiln_an_graph;

/* A compiled graph as traced (kiln_cache_entry_graph: a planned size's is
 * its family's graph at its sizes, made when first asked for); out of
 * memory, the family's own graph, so that the text stays readable. */
static const kiln_graph *eg(const kiln_cache_entry *e) {
  const kiln_graph *g = kiln_cache_entry_graph((kiln_cache_entry *)e);
  return g ? g : e->fam_graph;
}

typedef struct kiln_an_site {
  const char *file;
  int line;
  int n, cap;   /* graphs compiled here in all */
  int *all;     /* their compile numbers, oldest first */
  int printed;       /* records printed for this site */
  unsigned patterns; /* bit per kiln_diff_pattern already printed */
  int noted;         /* KILN_DEBUG=1 said that the site's compiles are now counted */
  int families;      /* graphs compiled here as a dynamic family (docs/dynamic-shapes.md) */
  int planned;       /* graphs planned here from a family: no code generated */
  int plan_noted;    /* KILN_DEBUG=1 said that the site's sizes are now planned */
} kiln_an_site;

struct kiln_analysis {
  pthread_mutex_t mu;
  int level;
  FILE *out; /* stderr or KILN_DEBUG_FILE (owned then) */
  int own_out;
  int64_t warmup;
  int64_t steps, compiles, transfers, value_cuts;
  int64_t base_compiles, base_transfers, base_value_cuts; /* at the end of warm-up */
  int64_t warned_compiles, warned_transfers;              /* counts at the last warning */
  int64_t reads_this_step, warned_unmarked;               /* value-read cuts since the last step marker */
  /* The warnings checked at a cut that is not a step marker (a loop that
   * never marks a step): its cuts since the last marker, the compiles and
   * transfers at that marker, the most cuts a marked step made, and the
   * count of cuts at which to check (one compare per cut until then). */
  int64_t cuts_this_step, compiles_at_step, transfers_at_step, max_step_cuts, unmarked_at;
  kiln_an_graph *graphs; /* index compile_no - 1 */
  int n_graphs, cap_graphs;
  kiln_an_site *sites;
  int n_sites, cap_sites;
  int summary_done;
  char *explain;
};

kiln_analysis *kiln_analysis_create(void) {
  kiln_analysis *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  pthread_mutex_init(&a->mu, NULL);
  long lv = 0, wu = 5; /* malformed values: the defaults */
  if (!kiln_cfg_long(kiln_cfg()->debug, &lv) || lv < 0) lv = 0;
  a->level = lv > 2 ? 2 : (int)lv;
  if (!kiln_cfg_long(kiln_cfg()->debug_warmup, &wu)) wu = 5;
  a->warmup = wu < 0 ? 0 : wu;
  a->unmarked_at = KILN_AN_UNMARKED_CUTS;
  a->out = stderr;
  const char *file = kiln_cfg()->debug_file;
  if (a->level > 0 && file && *file) {
    FILE *f = fopen(file, "a");
    if (f) {
      a->out = f;
      a->own_out = 1;
    } else {
      kiln_log_printf(stderr, "kiln: cannot open KILN_DEBUG_FILE=%s for appending; writing the analysis to stderr\n", file);
    }
  }
  return a;
}

int kiln_analysis_level(const kiln_analysis *a) { return a ? a->level : 0; }

void kiln_analysis_destroy(kiln_analysis *a, kiln_runtime *rt) {
  if (!a) return;
  kiln_analysis_exit_summary(a, rt);
  if (a->own_out) fclose(a->out);
  free(a->graphs);
  for (int i = 0; i < a->n_sites; i++) free(a->sites[i].all);
  free(a->sites);
  free(a->explain);
  pthread_mutex_destroy(&a->mu);
  free(a);
}

/* ── compile history per cut site ── */

static kiln_an_site *site_get(kiln_analysis *a, kiln_loc loc) {
  for (int i = 0; i < a->n_sites; i++)
    if (a->sites[i].file == loc.file && a->sites[i].line == loc.line) return &a->sites[i];
  if (a->n_sites == a->cap_sites) {
    int nc = a->cap_sites ? a->cap_sites * 2 : 16;
    kiln_an_site *ns = realloc(a->sites, sizeof *ns * (size_t)nc);
    if (!ns) return NULL;
    a->sites = ns;
    a->cap_sites = nc;
  }
  kiln_an_site *s = &a->sites[a->n_sites++];
  *s = (kiln_an_site){.file = loc.file, .line = loc.line};
  return s;
}

/* Record compile number no at site s; -1 when out of memory. */
static int site_add(kiln_an_site *s, int no) {
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 8;
    int *na = realloc(s->all, sizeof *na * (size_t)nc);
    if (!na) return -1;
    s->all = na;
    s->cap = nc;
  }
  s->all[s->n++] = no;
  return 0;
}

/* The site's most recent compile numbers (at most KILN_AN_HISTORY: the
 * graph comparisons that name a pattern look no further back), oldest
 * first; returns the count. */
static int site_history(const kiln_an_site *s, int *out) {
  int n = s->n < KILN_AN_HISTORY ? s->n : KILN_AN_HISTORY;
  for (int i = 0; i < n; i++) out[i] = s->all[s->n - n + i];
  return n;
}

/* The first (input, dim) whose size varies over the graphs hist[0..n) (all
 * with the same inputs and ranks); 0 when none. */
static int varying_dim(const kiln_analysis *a, const int *hist, int n, int *in_out, int *d_out) {
  const kiln_graph *g0 = eg(a->graphs[hist[0] - 1].e);
  for (int k = 1; k < n; k++)
    if (eg(a->graphs[hist[k] - 1].e)->n_inputs != g0->n_inputs) return 0;
  for (int in = 0; in < g0->n_inputs; in++) {
    const kiln_gnode *x0 = &g0->nodes[g0->input_node[in]];
    for (int d = 0; d < x0->rank; d++) {
      int same_rank = 1, varies = 0;
      for (int k = 1; k < n && same_rank; k++) {
        const kiln_graph *g = eg(a->graphs[hist[k] - 1].e);
        const kiln_gnode *x = &g->nodes[g->input_node[in]];
        same_rank = x->rank == x0->rank;
        varies |= same_rank && x->shape[d] != x0->shape[d];
      }
      if (!same_rank) break;
      if (varies) {
        *in_out = in, *d_out = d;
        return 1;
      }
    }
  }
  return 0;
}

/* A graph's weight in bucket advice: how often it ran; a graph compiled
 * but not run yet (the report of its own compile) counts once, the run it
 * was compiled for. */
static int64_t runs_of(const kiln_cache_entry *e) { return (int64_t)(e->execs ? e->execs : 1); }

static kiln_an_row row_of(const kiln_cache_entry *e) {
  /* a planned size's graph has its family's nodes: no need to make it */
  const kiln_graph *g = e->graph ? e->graph : e->view ? e->view : e->fam_graph;
  kiln_an_row r = {e->compile_step, e->execs, e->hits, e->info.compile_ns, e->compile_no, g ? g->n_nodes : 0,
                   g ? g->n_inputs : 0, g ? g->n_outputs : 0, e->info.family, e->info.from_disk_cache, {0}};
  memcpy(r.tag, e->tag, sizeof r.tag);
  return r;
}

/* Graph i's row (its entry's, or what was kept when the cache dropped it). */
static kiln_an_row graph_row(const kiln_analysis *a, int i) {
  return a->graphs[i].e ? row_of(a->graphs[i].e) : a->graphs[i].gone;
}

/* For a site whose recent graphs hist[0..n) differ in an input dimension:
 * the sizes of that (input, dim) over all the site's graphs (those with the
 * same inputs), each weighted by the executions of its graphs, and
 * kiln_bucket_suggest's boundaries: the site's one suggestion. */
static void bucket_advice(kiln_analysis *a, const kiln_an_site *s, const int *hist, int n, kiln_text *t,
                          const char *indent) {
  int in, d;
  if (!varying_dim(a, hist, n, &in, &d)) return;
  const kiln_graph *g0 = eg(a->graphs[hist[0] - 1].e);
  const kiln_gnode *x0 = &g0->nodes[g0->input_node[in]];
  int64_t *values = malloc(sizeof *values * (size_t)s->n), *counts = malloc(sizeof *counts * (size_t)s->n);
  int nv = 0, used = 0, dropped = 0;
  for (int k = 0; values && counts && k < s->n; k++) {
    const kiln_cache_entry *e = a->graphs[s->all[k] - 1].e;
    if (!e) { /* dropped from the graph cache: its sizes are gone too */
      dropped++;
      continue;
    }
    const kiln_graph *g = eg(e);
    if (g->n_inputs != g0->n_inputs || g->nodes[g->input_node[in]].rank != x0->rank) continue; /* another program */
    int64_t v = g->nodes[g->input_node[in]].shape[d], c = runs_of(e);
    int j = 0;
    while (j < nv && values[j] != v) j++;
    if (j == nv) values[nv] = v, counts[nv++] = 0;
    counts[j] += c;
    used++;
  }
  for (int j = 1; j < nv; j++) /* ascending, for the reader and the advisor */
    for (int q = j; q > 0 && values[q - 1] > values[q]; q--) {
      int64_t tv = values[q], tc = counts[q];
      values[q] = values[q - 1], counts[q] = counts[q - 1];
      values[q - 1] = tv, counts[q - 1] = tc;
    }
  int64_t bounds[KILN_BUCKET_SUGGEST_MAX];
  double waste = 0;
  int nb = nv ? kiln_bucket_suggest(values, counts, nv, bounds, &waste) : 0;
  if (nb > 0) {
    kiln_text_printf(t, "%sexecutions per size of input %d (%s:%d) dim %d: ", indent, in, kiln_fmt_file(x0->loc.file),
                     x0->loc.line, d);
    for (int j = 0; j < nv && j < KILN_DIFF_LIST_MAX; j++)
      kiln_text_printf(t, "%s%" PRId64 " x%" PRId64, j ? ", " : "", values[j], counts[j]);
    if (nv > KILN_DIFF_LIST_MAX) kiln_text_printf(t, ", ... %d more of the %d sizes", nv - KILN_DIFF_LIST_MAX, nv);
    kiln_text_printf(t, "; suggested buckets: ");
    for (int j = 0; j < nb; j++) kiln_text_printf(t, "%s%" PRId64, j ? ", " : "", bounds[j]);
    kiln_text_printf(t, " (padding waste %.1f%%, weighted by executions; %d size%s from ", waste * 100.0, nv,
                     nv == 1 ? "" : "s");
    if (used == s->n)
      kiln_text_printf(t, "all %d compiles at this site)\n", s->n);
    else if (dropped)
      kiln_text_printf(t, "%d of the %d compiles at this site; %d another graph, %d no longer in the graph cache)\n",
                       used, s->n, s->n - used - dropped, dropped);
    else
      kiln_text_printf(t, "%d of the %d compiles at this site; %d compiled another graph)\n", used, s->n,
                       s->n - used);
  }
  free(values);
  free(counts);
}

/* Name the pattern of a site's history (oldest first) once it has three
 * graphs: growing tensor or varying input, with bucket advice for the
 * latter. Only the most recent run of graphs that differ in shapes alone
 * is classified (when it has three graphs): a site's first graphs are often
 * another program (the first step of an accumulation has no concat yet)
 * and would hide the pattern of all the others. */
static kiln_diff_pattern classify_site(kiln_analysis *a, const kiln_an_site *s, kiln_text *t, const char *prefix,
                                       const char *indent) {
  int hist_all[KILN_AN_HISTORY];
  int n_all = site_history(s, hist_all);
  if (n_all < 3) return KILN_DIFF_PATTERN_NONE;
  char *buf = malloc(KILN_AN_DIFF_CAP);
  if (!buf) return KILN_DIFF_PATTERN_NONE;
  /* The longest run of recent graphs in which each differs from the one
   * before only in shapes: one program whose sizes change. */
  int first = n_all - 1;
  while (first > 0) {
    kiln_diff_stats st = {0};
    buf[0] = 0;
    kiln_graphdiff_format_stats(eg(a->graphs[hist_all[first - 1] - 1].e),
                                eg(a->graphs[hist_all[first] - 1].e), buf, KILN_AN_DIFF_CAP, &st);
    if (st.added || st.removed || st.dtype || st.attrs || st.inputs || st.outputs) break;
    first--;
  }
  if (n_all - first < 3) first = 0; /* too short a run: classify everything */
  const int *hist = hist_all + first;
  int n = n_all - first;
  const kiln_graph *gs[KILN_AN_HISTORY];
  for (int k = 0; k < n; k++) gs[k] = eg(a->graphs[hist[k] - 1].e);
  /* One bucket suggestion per site: the advice over all its graphs, weighted
   * by their executions, printed under the pattern; only when it cannot be
   * made (the graphs' inputs differ in number or rank) does the pattern
   * suggest from its own window, weighted the same way. */
  kiln_text adv = {0};
  bucket_advice(a, s, hist, n, &adv, indent);
  int64_t runs[KILN_AN_HISTORY];
  for (int k = 0; k < n; k++) runs[k] = runs_of(a->graphs[hist[k] - 1].e);
  buf[0] = 0;
  kiln_diff_pattern p =
      kiln_graphdiff_classify_site(gs, n, s->n - (n_all - n), adv.len == 0, runs, buf, KILN_AN_DIFF_CAP);
  if (p != KILN_DIFF_PATTERN_NONE && buf[0]) kiln_text_printf(t, "%s%s\n", prefix, buf);
  if (p == KILN_DIFF_PATTERN_VARYING_INPUT && adv.len) kiln_text_printf(t, "%s", kiln_text_str(&adv));
  kiln_text_free(&adv);
  free(buf);
  return p;
}

/* "what changed" for the newest graph of a site, plus the pattern once the
 * site has compiled three graphs or more (returned; NONE: none). */
static kiln_diff_pattern what_changed(kiln_analysis *a, kiln_an_site *s, kiln_text *t) {
  int hist[KILN_AN_HISTORY];
  int n = site_history(s, hist);
  if (n < 2) return KILN_DIFF_PATTERN_NONE;
  const kiln_graph *g = eg(a->graphs[hist[n - 1] - 1].e);
  int best = -1;
  double best_d = 0;
  for (int k = 0; k < n - 1; k++) {
    double d = kiln_graphdiff_distance(eg(a->graphs[hist[k] - 1].e), g);
    if (best < 0 || d <= best_d) best = k, best_d = d; /* ties: the most recent */
  }
  char *buf = malloc(KILN_AN_DIFF_CAP);
  if (!buf) return KILN_DIFF_PATTERN_NONE;
  buf[0] = 0;
  int nd = kiln_graphdiff_format(eg(a->graphs[hist[best] - 1].e), g, buf, KILN_AN_DIFF_CAP);
  kiln_text_printf(t, "  what changed since compile #%d at the same site (%d difference%s):\n", hist[best], nd,
                   nd == 1 ? "" : "s");
  /* The first lines name the cause; a long tail of the same change
   * propagated through the graph only hides the next record. */
  int shown = 0, lines = 0;
  for (char *line = buf; *line; lines++) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (shown < KILN_AN_DIFF_LINES) kiln_text_printf(t, "  %.*s\n", (int)len, line), shown++;
    line += len + (end ? 1 : 0);
  }
  if (lines > shown) kiln_text_printf(t, "    ... %d more (KILN_SAVE_GRAPHS and `kiln graph diff` show all)\n", lines - shown);
  free(buf);
  return classify_site(a, s, t, "  pattern: ", "  ");
}

static void graph_line(kiln_text *t, const kiln_cache_entry *e) {
  const kiln_graph *g = eg(e);
  kiln_text_printf(t, "  graph %016" PRIx64 ": %d node%s, %d input%s, %d output%s\n", e->key, g->n_nodes,
                   g->n_nodes == 1 ? "" : "s", g->n_inputs, g->n_inputs == 1 ? "" : "s", g->n_outputs,
                   g->n_outputs == 1 ? "" : "s");
}

/* The full record of a compile: the cause, the graph, its memory and
 * compile time, and what changed since the site's closest earlier graph. */
static kiln_diff_pattern compile_record(kiln_analysis *a, kiln_an_site *s, const kiln_cut_cause *cause,
                                        const kiln_cache_entry *e, kiln_text *t) {
  char cs[256], b1[32], b2[32], b3[32], b4[32], b5[32];
  kiln_text_printf(t, "kiln: compile #%d (step %" PRIu64 "%s%s%s) cause: %s\n", e->compile_no, e->compile_step,
                   e->tag[0] ? ", tag \"" : "", e->tag, e->tag[0] ? "\"" : "", kiln_cut_cause_str(cause, cs, sizeof cs));
  graph_line(t, e);
  const kiln_exec_info *in = &e->info;
  kiln_text_printf(t, "  memory: inputs %s, outputs %s, aliased %s, intermediates %s, generated code %s\n",
                   kiln_fmt_bytes((double)in->input_bytes, b1, sizeof b1),
                   kiln_fmt_bytes((double)in->output_bytes, b2, sizeof b2),
                   kiln_fmt_bytes((double)in->aliased_bytes, b3, sizeof b3),
                   kiln_fmt_bytes((double)in->scratch_bytes, b4, sizeof b4),
                   kiln_fmt_bytes((double)in->code_bytes, b5, sizeof b5));
  kiln_text_printf(t, "  compile time %s (codegen %s, cc %s, load %s)%s\n",
                   kiln_fmt_duration(in->compile_ns, b1, sizeof b1), kiln_fmt_duration(in->codegen_ns, b2, sizeof b2),
                   kiln_fmt_duration(in->cc_ns, b3, sizeof b3), kiln_fmt_duration(in->load_ns, b4, sizeof b4),
                   in->from_disk_cache ? ", loaded from the disk cache" : "");
  return s ? what_changed(a, s, t) : KILN_DIFF_PATTERN_NONE;
}

/* KILN_DEBUG=1 says each cause once. A call site's compiles are printed in
 * full (what changed, the pattern) until a pattern is named (a growing
 * tensor, a varying input) or KILN_AN_FULL_RECORDS were printed; after
 * that a compile prints one line when it names a pattern not named before
 * at the site, and the first one that prints nothing says that the rest are
 * counted (the exit summary has the counts). KILN_DEBUG=2 prints every
 * compile in full. */
static void compile_report(kiln_analysis *a, kiln_an_site *s, const kiln_cut_cause *cause, const kiln_cache_entry *e,
                           kiln_text *t) {
  const unsigned named = 1u << KILN_DIFF_PATTERN_GROWING | 1u << KILN_DIFF_PATTERN_VARYING_INPUT;
  if (a->level >= 2 || !s || (!(s->patterns & named) && s->printed < KILN_AN_FULL_RECORDS)) {
    kiln_diff_pattern p = compile_record(a, s, cause, e, t);
    if (s) s->printed++, s->patterns |= 1u << p;
    return;
  }
  kiln_text pt = {0};
  kiln_diff_pattern p = classify_site(a, s, &pt, "  pattern: ", "  ");
  char cs[256];
  if (!(s->patterns & 1u << p) && pt.len) {
    kiln_text_printf(t, "kiln: compile #%d (step %" PRIu64 ") cause: %s (graph %d at this call site)\n%s",
                     e->compile_no, e->compile_step, kiln_cut_cause_str(cause, cs, sizeof cs), s->n,
                     kiln_text_str(&pt));
    s->printed++;
    s->patterns |= 1u << p;
  } else if (!s->noted) {
    kiln_text_printf(t, "kiln: compile #%d (step %" PRIu64 ") at %s:%d and the further compiles there are counted, "
                        "not printed: the summary at exit has the count; KILN_DEBUG=2 prints each\n",
                     e->compile_no, e->compile_step, kiln_fmt_file(s->file), s->line);
    s->noted = 1;
  }
  kiln_text_free(&pt);
}

/* The size of dimension o of g's inputs, or -1. */
static int64_t origin_size(const kiln_graph *g, const kiln_sym_origin *o) {
  if (!g || o->input < 0 || o->input >= g->n_inputs) return -1;
  const kiln_gnode *x = &g->nodes[g->input_node[o->input]];
  return o->axis >= 0 && o->axis < x->rank ? x->shape[o->axis] : -1;
}

/* The graph input dimensions that varied, as the user knows them: "dim 1 of
 * input 2 (leaf) at train.c:88 (37, 52), ..." with the size in prev (the
 * site's graph before, NULL: none) and here. */
static void dyn_origins(kiln_text *t, const kiln_cache_entry *e, const kiln_graph *prev) {
  const kiln_graph *g = eg(e);
  for (int k = 0; k < e->n_dyn; k++) {
    const kiln_sym_origin *o = &e->dyn[k];
    const kiln_gnode *x = o->input < g->n_inputs ? &g->nodes[g->input_node[o->input]] : NULL;
    kiln_text_printf(t, "%sdim %d of input %d (%s) at %s:%d", k ? ", " : "", o->axis, o->input,
                     x ? kiln_op_name(x->op) : "?", x && x->loc.file ? kiln_fmt_file(x->loc.file) : "?",
                     x ? x->loc.line : 0);
    int64_t was = origin_size(prev, o), now = origin_size(g, o);
    if (was >= 0 && now >= 0 && was != now) kiln_text_printf(t, " (%lld, %lld)", (long long)was, (long long)now);
    else if (now >= 0) kiln_text_printf(t, " (%lld)", (long long)now);
  }
}

/* The graph compiled at site s before e (NULL: none). */
static const kiln_graph *site_previous(const kiln_analysis *a, const kiln_an_site *s, const kiln_cache_entry *e) {
  if (!s) return NULL;
  for (int k = s->n - 1; k >= 0; k--) {
    int no = s->all[k];
    if (no != e->compile_no && no >= 1 && no <= a->n_graphs) return eg(a->graphs[no - 1].e);
  }
  return NULL;
}

/* What a compile with varying input sizes did (family 1: compiled once for
 * any size; 0: why it could not); planned sizes (2) are counted, the first
 * one at a site said once. */
static void dynamic_report(kiln_analysis *a, kiln_an_site *s, const kiln_cache_entry *e, kiln_text *t) {
  if (!e->n_dyn) return;
  if (e->info.family == 1) {
    kiln_text_printf(t, "  dynamic: ");
    dyn_origins(t, e, site_previous(a, s, e));
    if (s && s->families > 1) /* this site made one before: the graph differs from it beyond the sizes */
      kiln_text_printf(t, " var%s: compiled once for any size, a family of its own (the site's %d%s differ%s from "
                          "it in more than sizes: see what changed)\n", e->n_dyn == 1 ? "ies" : "y", s->families - 1,
                       s->families == 2 ? " earlier family" : " earlier families", s->families == 2 ? "s" : "");
    else
      kiln_text_printf(t, " var%s: compiled once for any size; later sizes are planned, not compiled "
                          "(KILN_DYNAMIC=off compiles each)\n", e->n_dyn == 1 ? "ies" : "y");
  } else if (e->info.family == 0 && e->info.family_why[0]) {
    kiln_text_printf(t, "  dynamic: ");
    dyn_origins(t, e, site_previous(a, s, e));
    kiln_text_printf(t, " vary, but this graph cannot be compiled for any size: %s; each size compiles\n",
                     e->info.family_why);
  } else if (e->info.family == 2 && s && (a->level >= 2 || !s->plan_noted)) {
    char cs[64];
    kiln_text_printf(t, "kiln: graph #%d (step %" PRIu64 ") at %s:%d: a new size (", e->compile_no, e->compile_step,
                     s->file ? kiln_fmt_file(s->file) : "?", s->line);
    dyn_origins(t, e, NULL);
    kiln_text_printf(t, ") planned from its dynamic family in %s: no code generated%s\n",
                     kiln_fmt_duration(e->info.compile_ns, cs, sizeof cs),
                     a->level >= 2 ? "" : "; the further sizes at this site are counted (exit summary)");
    s->plan_noted = 1;
  }
}

void kiln_analysis_dropped(kiln_analysis *a, const kiln_cache_entry *e) {
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  int i = e->compile_no - 1;
  if (i >= 0 && i < a->n_graphs && a->graphs[i].e == e) {
    a->graphs[i].gone = row_of(e);
    a->graphs[i].e = NULL;
  }
  pthread_mutex_unlock(&a->mu);
}

void kiln_analysis_compiled(kiln_analysis *a, kiln_runtime *rt, const kiln_cut_cause *cause, kiln_cache_entry *e) {
  (void)rt;
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  /* a deliberate warm-up (kiln_compile) is not a recompilation to warn about,
   * nor is a new size planned from a dynamic family */
  int planned = e->info.family == 2;
  if (cause->why != KILN_CUT_EXPLICIT_COMPILE && !planned) a->compiles++;
  if (a->n_graphs == a->cap_graphs) {
    int nc = a->cap_graphs ? a->cap_graphs * 2 : 32;
    kiln_an_graph *ng = realloc(a->graphs, sizeof *ng * (size_t)nc);
    if (!ng) goto out;
    a->graphs = ng;
    a->cap_graphs = nc;
  }
  /* compile numbers are dense: the runtime numbers them as they are made */
  if (e->compile_no != a->n_graphs + 1) goto out;
  a->graphs[a->n_graphs++] = (kiln_an_graph){e, *cause, {0}};
  kiln_an_site *s = site_get(a, cause->loc);
  if (s && site_add(s, e->compile_no)) s = NULL;
  if (s) { /* the site's KILN_AN_HISTORY most recent graphs stay in the cache: the comparisons read them */
    e->pins++;
    kiln_cache_entry *old = s->n > KILN_AN_HISTORY ? a->graphs[s->all[s->n - 1 - KILN_AN_HISTORY] - 1].e : NULL;
    if (old) old->pins--;
  }
  if (s) s->families += e->info.family == 1, s->planned += planned;
  if (a->level < 1) goto out;
  kiln_text t = {0};
  if (!planned) compile_report(a, s, cause, e, &t);
  dynamic_report(a, s, e, &t);
  if (t.len) {
    kiln_log_puts(a->out, kiln_text_str(&t));
    fflush(a->out);
  }
  kiln_text_free(&t);
out:
  pthread_mutex_unlock(&a->mu);
}

/* The "too frequent" warnings of kiln_analysis_step, checked at a cut that
 * is not a step marker once the step has cut KILN_AN_UNMARKED_CUTS times
 * and twice as often as any marked step: a loop without kiln_mark_step()
 * is one long step, which the step marker's check never sees. The step's
 * own counts stand for the ratio (a quarter of its cuts compiled), and the
 * warnings share the step marker's rate limit (again only when the count
 * doubled). */
static void unmarked_warnings(kiln_analysis *a) {
  int64_t n = a->cuts_this_step, comp = a->compiles - a->compiles_at_step;
  int64_t xfer = a->transfers - a->transfers_at_step;
  int wc = comp >= 2 && comp * KILN_AN_COMPILE_RATIO >= n && a->compiles >= 2 * a->warned_compiles;
  int wt = xfer >= 2 && a->transfers >= 2 * a->warned_transfers;
  if (!wc && !wt) return;
  kiln_text t = {0};
  if (wc) {
    kiln_text_printf(&t, "kiln: warning: CompileTime too frequent: %" PRId64 " counts during %" PRId64
                     " steps; %" PRId64 " of them in the %" PRId64 " graph cuts since the last kiln_mark_step()"
                     " (a loop that never marks a step is one step, its graph cut only by its reads)\n",
                     a->compiles, a->steps, comp, n);
    kiln_sites_format_brief(&t, ~(1u | 1u << KILN_SITE_CUT_EXPLICIT_COMPILE), 1, 8, "");
    a->warned_compiles = a->compiles;
  }
  if (wt) {
    kiln_text_printf(&t, "kiln: warning: TransferFromDeviceTime too frequent: %" PRId64 " counts during %" PRId64
                     " steps; %" PRId64 " of them since the last kiln_mark_step(), over %" PRId64 " graph cuts\n",
                     a->transfers, a->steps, xfer, n);
    kiln_sites_format_brief(&t, 1u << KILN_SITE_READ, 0, 8, "");
    a->warned_transfers = a->transfers;
  }
  pthread_mutex_lock(&a->mu);
  kiln_log_puts(a->out, kiln_text_str(&t));
  fflush(a->out);
  pthread_mutex_unlock(&a->mu);
  kiln_text_free(&t);
}

void kiln_analysis_cut_done(kiln_analysis *a, kiln_runtime *rt, const kiln_cut_cause *cause,
                            const kiln_cache_entry *e, int hit, double host_ns, uint32_t step_tensors) {
  if (a && cause->why != KILN_CUT_STEP_MARKER && cause->why != KILN_CUT_EXPLICIT_COMPILE &&
      ++a->cuts_this_step >= a->unmarked_at && a->level >= 1)
    unmarked_warnings(a);
  if (cause->why == KILN_CUT_VALUE_READ && a) {
    a->value_cuts++;
    /* A loop that reads results but never marks a step keeps every tensor
     * it makes (a step's tensors are released at its marker): say so once,
     * whatever the debug level, when the step has clearly become a loop. */
    if (++a->reads_this_step >= KILN_AN_UNMARKED_READS && !a->warned_unmarked) {
      char cs[256];
      a->warned_unmarked = 1;
      pthread_mutex_lock(&a->mu);
      kiln_log_printf(a->out,
              "kiln: warning: %" PRId64 " value reads and %u live tensors since the last kiln_mark_step() (latest: "
              "%s). A step's tensors are released only at its step marker: a loop that reads results must call "
              "kiln_mark_step() once per iteration, or its memory grows without bound.\n",
              a->reads_this_step, step_tensors, kiln_cut_cause_str(cause, cs, sizeof cs));
      fflush(a->out);
      pthread_mutex_unlock(&a->mu);
    }
  }
  /* The fixed host cost of an execution: a cut that found its graph. */
  if (hit && cause->why != KILN_CUT_EXPLICIT_COMPILE) kiln_metric_record("CachedCutTime", host_ns);
  if (!a || a->level < 2 || cause->why == KILN_CUT_EXPLICIT_COMPILE) return;
  char cs[256], b1[32];
  pthread_mutex_lock(&a->mu);
  kiln_log_printf(a->out, "kiln: execute graph %016" PRIx64 " (compile #%d%s%s%s) step %" PRIu64 " cause: %s, host %s%s\n",
          e->key, e->compile_no, e->tag[0] ? ", tag \"" : "", e->tag, e->tag[0] ? "\"" : "", kiln_runtime_steps(rt),
          kiln_cut_cause_str(cause, cs, sizeof cs), kiln_fmt_duration(host_ns, b1, sizeof b1),
          hit ? "" : " (compiled now)");
  fflush(a->out);
  pthread_mutex_unlock(&a->mu);
}

void kiln_analysis_read(kiln_analysis *a) {
  if (a) a->transfers++;
}

void kiln_analysis_step(kiln_analysis *a, kiln_runtime *rt) {
  (void)rt;
  if (!a) return;
  a->steps++;
  a->reads_this_step = 0;
  if (a->cuts_this_step > a->max_step_cuts) a->max_step_cuts = a->cuts_this_step;
  a->unmarked_at = 2 * a->max_step_cuts > KILN_AN_UNMARKED_CUTS ? 2 * a->max_step_cuts : KILN_AN_UNMARKED_CUTS;
  a->cuts_this_step = 0;
  a->compiles_at_step = a->compiles;
  a->transfers_at_step = a->transfers;
  if (a->steps == a->warmup) {
    a->base_compiles = a->compiles;
    a->base_transfers = a->transfers;
    a->base_value_cuts = a->value_cuts;
  }
  if (a->level < 1 || a->steps <= a->warmup) return;
  int64_t steps = a->steps - a->warmup;
  int64_t comp = a->compiles - a->base_compiles;
  int64_t xfer = a->transfers - a->base_transfers, vcut = a->value_cuts - a->base_value_cuts;
  pthread_mutex_lock(&a->mu);
  /* Re-warn only when the count doubled: a warning per step drowns the log. */
  if (comp >= 2 && comp * KILN_AN_COMPILE_RATIO >= steps && a->compiles >= 2 * a->warned_compiles) {
    kiln_text t = {0};
    kiln_text_printf(&t, "kiln: warning: CompileTime too frequent: %" PRId64 " counts during %" PRId64 " steps\n",
                     a->compiles, a->steps);
    kiln_sites_format_brief(&t, ~(1u | 1u << KILN_SITE_CUT_EXPLICIT_COMPILE), 1, 8, "");
    kiln_log_puts(a->out, kiln_text_str(&t));
    kiln_text_free(&t);
    a->warned_compiles = a->compiles;
  }
  if (((xfer >= 2 && xfer > steps) || (vcut >= 2 && vcut >= steps)) && a->transfers >= 2 * a->warned_transfers) {
    kiln_text t = {0};
    kiln_text_printf(&t, "kiln: warning: TransferFromDeviceTime too frequent: %" PRId64 " counts during %" PRId64
                     " steps\n", a->transfers, a->steps);
    kiln_sites_format_brief(&t, 1u << KILN_SITE_READ, 0, 8, "");
    kiln_log_puts(a->out, kiln_text_str(&t));
    kiln_text_free(&t);
    a->warned_transfers = a->transfers;
  }
  fflush(a->out);
  pthread_mutex_unlock(&a->mu);
}

/* ── kiln_explain ── */

/* The table of graphs; brief (KILN_DEBUG=1's exit summary): the first
 * KILN_AN_BRIEF_ROWS rows, then how many more. */
static void explain_graphs(const kiln_analysis *a, kiln_text *t, int brief) {
  char b1[32], cs[256];
  if (!a->n_graphs) return;
  kiln_text_printf(t, "graphs:\n  %5s %6s %-12s %7s %6s %7s %10s %10s  %s\n", "#", "step", "tag", "nodes", "inputs",
                   "outputs", "executions", "compile", "cause");
  int rows = brief && a->n_graphs > KILN_AN_BRIEF_ROWS + 1 ? KILN_AN_BRIEF_ROWS : a->n_graphs;
  for (int i = 0; i < rows; i++) {
    const kiln_an_row r = graph_row(a, i);
    kiln_text_printf(t, "  %5d %6" PRIu64 " %-12s %7d %6d %7d %10" PRIu64 " %10s  %s%s\n", r.compile_no,
                     r.compile_step, r.tag[0] ? r.tag : "-", r.nodes, r.inputs, r.outputs, r.execs,
                     kiln_fmt_duration(r.compile_ns, b1, sizeof b1),
                     kiln_cut_cause_str(&a->graphs[i].cause, cs, sizeof cs),
                     r.family == 2   ? " (a new size: planned, not compiled)"
                     : r.family == 1 ? " (compiled for any size)"
                                     : "");
  }
  if (rows < a->n_graphs)
    kiln_text_printf(t, "  ... %d more graphs (by call site below; kiln_explain() and KILN_DEBUG=2 list every one)\n",
                     a->n_graphs - rows);
}

/* Sites that compiled several graphs: how many, why, and what to do. */
static void explain_sites(kiln_analysis *a, kiln_text *t) {
  int header = 0;
  for (int i = 0; i < a->n_sites; i++) {
    kiln_an_site *s = &a->sites[i];
    if (s->n < 2) continue;
    if (!header) kiln_text_printf(t, "call sites that compiled more than one graph:\n");
    header = 1;
    kiln_text_printf(t, "  %s:%d: %d graphs", kiln_fmt_file(s->file), s->line, s->n);
    if (s->families) { /* dynamic shapes: one compile served the sizes */
      kiln_text_printf(t, " (%d compiled, %d of them for any size; %d sizes planned from those, no code generated)\n",
                       s->n - s->planned, s->families, s->planned);
      continue;
    }
    if (a->level == 1 && s->printed < s->n)
      kiln_text_printf(t, " (KILN_DEBUG=1 printed %d of these compiles, counted %d more; KILN_DEBUG=2 prints each)",
                       s->printed, s->n - s->printed);
    kiln_text_printf(t, "\n");
    classify_site(a, s, t, "    ", "    ");
  }
}

static void explain_build(kiln_analysis *a, kiln_runtime *rt, kiln_text *t, int brief) {
  char b1[32], b2[32], b3[32];
  int64_t steps = (int64_t)kiln_runtime_steps(rt);
  int64_t execs = 0, from_disk = 0;
  uint64_t hits = 0;
  for (int i = 0; i < a->n_graphs; i++) {
    const kiln_an_row r = graph_row(a, i);
    execs += (int64_t)r.execs;
    hits += r.hits;
    from_disk += r.from_disk;
  }
  double per = steps > 0 ? (double)steps : 1;
  kiln_text_printf(t, "kiln explain\n");
  kiln_text_printf(t, "  steps: %" PRId64 "\n", steps);
  kiln_text_printf(t, "  graphs compiled: %d (%" PRId64 " loaded from the disk cache), %.2f per step\n", a->n_graphs,
                   from_disk, steps ? (double)a->n_graphs / per : 0.0);
  kiln_text_printf(t, "  executions: %" PRId64 " (%.2f per step), cache hits: %" PRIu64 "\n", execs,
                   steps ? (double)execs / per : 0.0, hits);
  kiln_metric_stats ps;
  if (kiln_metric_data("ExecutionsPerStep", &ps) == 0 && ps.count)
    kiln_text_printf(t, "  executions per step: median %g, max %g over %" PRId64 " steps\n", ps.p50, ps.max,
                     ps.count);
  kiln_text_printf(t, "  graph cuts: step marker %" PRId64 ", value read %" PRId64 ", data-dependent %" PRId64
                   ", explicit compile %" PRId64 "\n",
                   kiln_counter_value("StepMarkerCut"), kiln_counter_value("ValueReadCut"),
                   kiln_counter_value("DataDependentCut"), kiln_counter_value("ExplicitCompileCut"));
  kiln_metric_stats cut, ex;
  if (kiln_metric_data("CachedCutTime", &cut) != 0 || !cut.count)
    kiln_text_printf(t, "  fixed host cost per execution: not measured yet (no cut has found its graph in the cache)\n");
  else
    kiln_text_printf(t,
                     "  fixed host cost per execution: %s median (%s p90, %" PRId64
                     " cuts that hit the cache: linearize, hash, lookup, enqueue)\n",
                     kiln_fmt_duration(cut.p50, b1, sizeof b1), kiln_fmt_duration(cut.p90, b2, sizeof b2), cut.count);
  if (kiln_metric_data("ExecuteTime", &ex) == 0 && ex.count)
    kiln_text_printf(t, "  device time per execution: %s median (%" PRId64 " executions)\n",
                     kiln_fmt_duration(ex.p50, b3, sizeof b3), ex.count);
  explain_graphs(a, t, brief);
  kiln_text lines = {0};
  kiln_sites_format(&lines, ~0u, "  ");
  if (lines.len) kiln_text_printf(t, "graph cuts and device-to-host reads by source line:\n%s", kiln_text_str(&lines));
  kiln_text_free(&lines);
  explain_sites(a, t);
}

static const char *explain_text(kiln_analysis *a, kiln_runtime *rt, int brief) {
  if (!a) return "";
  kiln_text t = {0};
  pthread_mutex_lock(&a->mu);
  explain_build(a, rt, &t, brief);
  free(a->explain);
  a->explain = t.failed ? (kiln_text_free(&t), NULL) : kiln_text_take(&t);
  const char *r = a->explain ? a->explain : "";
  pthread_mutex_unlock(&a->mu);
  return r;
}

const char *kiln_analysis_explain(kiln_analysis *a, kiln_runtime *rt) { return explain_text(a, rt, 0); }

void kiln_analysis_exit_summary(kiln_analysis *a, kiln_runtime *rt) {
  if (!a || a->level < 1 || a->summary_done) return;
  a->summary_done = 1;
  const char *s = explain_text(a, rt, a->level == 1);
  pthread_mutex_lock(&a->mu);
  kiln_log_printf(a->out, "kiln: summary\n%s", s);
  fflush(a->out);
  pthread_mutex_unlock(&a->mu);
}
