/* Graph diffs and recompilation patterns (see graphdiff.h). */
#include "debug/graphdiff.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "debug/bucket.h"
#include "debug/graphtext.h"

/* Above this many LCS cells (the middle part of the two graphs after the
 * common prefix and suffix) the alignment falls back to a greedy scan:
 * 4M cells is 16 MiB, and graphs that differ that much are not "the same
 * program with small changes" anyway. */
#define LCS_MAX_CELLS ((size_t)4 << 20)
#define GREEDY_WINDOW 64

/* ───────────── text helpers ───────────── */

static const char *base_name(const char *path) {
  const char *s = path ? strrchr(path, '/') : NULL;
  return s ? s + 1 : path;
}

static void fmt_loc(const kiln_gnode *n, char *buf, size_t cap) {
  if (n->loc.file)
    snprintf(buf, cap, "%s:%d", base_name(n->loc.file), n->loc.line);
  else
    snprintf(buf, cap, "<unknown>");
}

/* "concat at eval.c:41" or "input 2 (leaf) at train.c:88". */
static void fmt_node(const kiln_gnode *n, char *buf, size_t cap) {
  char loc[300];
  fmt_loc(n, loc, sizeof loc);
  if ((n->op == KILN_OP_LEAF || n->op == KILN_OP_SCALAR) && n->n_iattr >= 1)
    snprintf(buf, cap, "input %" PRId64 " (%s) at %s", n->iattr[0], kiln_op_name(n->op), loc);
  else
    snprintf(buf, cap, "%s at %s", kiln_op_name(n->op), loc);
}

static void fmt_shape(const kiln_gnode *n, char *buf, size_t cap) {
  kiln_text b = kiln_text_on(buf, cap);
  kiln_text_printf(&b, "[");
  for (int d = 0; d < n->rank && d < KILN_MAX_RANK; d++)
    kiln_text_printf(&b, d ? ",%" PRId64 : "%" PRId64, n->shape[d]);
  kiln_text_printf(&b, "]");
}

/* Node n's sizes as a diff shows them: its symbolic ones (sym: "16,s0")
 * when it has them, else its own. */
static void fmt_shape_sym(const kiln_gnode *n, const char *sym, char *buf, size_t cap) {
  if (!sym) {
    fmt_shape(n, buf, cap);
    return;
  }
  kiln_text b = kiln_text_on(buf, cap);
  kiln_text_printf(&b, "[%s]", sym);
}

static const char *sym_at(const char *const *v, int32_t i) { return v ? v[i] : NULL; }

/* ───────────── alignment ───────────── */

static int same_key(const kiln_gnode *a, const kiln_gnode *b) {
  if (a->op != b->op || a->loc.line != b->loc.line) return 0;
  const char *fa = base_name(a->loc.file), *fb = base_name(b->loc.file);
  if (!fa || !fb) return fa == fb;
  return strcmp(fa, fb) == 0;
}

/* Pair nodes of a and b: ma[i] = j (or -1), mb[j] = i (or -1). Returns 0,
 * -1 on out-of-memory (the arrays then hold a prefix/suffix-only match). */
static int align(const kiln_graph *a, const kiln_graph *b, int32_t *ma, int32_t *mb) {
  const int32_t na = a->n_nodes, nb = b->n_nodes;
  for (int32_t i = 0; i < na; i++) ma[i] = -1;
  for (int32_t j = 0; j < nb; j++) mb[j] = -1;
  int32_t p = 0;
  while (p < na && p < nb && same_key(&a->nodes[p], &b->nodes[p])) ma[p] = mb[p] = p, p++;
  int32_t s = 0;
  while (s < na - p && s < nb - p && same_key(&a->nodes[na - 1 - s], &b->nodes[nb - 1 - s])) {
    ma[na - 1 - s] = nb - 1 - s;
    mb[nb - 1 - s] = na - 1 - s;
    s++;
  }
  const int32_t m = na - p - s, k = nb - p - s;
  if (m == 0 || k == 0) return 0;
  const size_t cells = (size_t)(m + 1) * (size_t)(k + 1);
  uint32_t *L = cells <= LCS_MAX_CELLS ? malloc(sizeof *L * cells) : NULL;
  if (!L) {
    /* greedy: each node of a takes the next matching node of b nearby */
    int32_t j = 0;
    for (int32_t i = 0; i < m && j < k; i++) {
      for (int32_t t = j; t < k && t < j + GREEDY_WINDOW; t++)
        if (same_key(&a->nodes[p + i], &b->nodes[p + t])) {
          ma[p + i] = p + t;
          mb[p + t] = p + i;
          j = t + 1;
          break;
        }
    }
    return cells <= LCS_MAX_CELLS ? -1 : 0;
  }
  /* L[i][j] = LCS length of a[p+i..] and b[p+j..] */
#define AT(i, j) L[(size_t)(i) * (size_t)(k + 1) + (size_t)(j)]
  for (int32_t i = m; i >= 0; i--)
    for (int32_t j = k; j >= 0; j--) {
      if (i == m || j == k)
        AT(i, j) = 0;
      else if (same_key(&a->nodes[p + i], &b->nodes[p + j]))
        AT(i, j) = AT(i + 1, j + 1) + 1;
      else
        AT(i, j) = AT(i + 1, j) > AT(i, j + 1) ? AT(i + 1, j) : AT(i, j + 1);
    }
  for (int32_t i = 0, j = 0; i < m && j < k;) {
    if (same_key(&a->nodes[p + i], &b->nodes[p + j]) && AT(i, j) == AT(i + 1, j + 1) + 1) {
      ma[p + i] = p + j;
      mb[p + j] = p + i;
      i++, j++;
    } else if (AT(i + 1, j) >= AT(i, j + 1)) {
      i++;
    } else {
      j++;
    }
  }
#undef AT
  free(L);
  return 0;
}

/* ───────────── the diff ───────────── */

static int attrs_equal(const kiln_gnode *a, const kiln_gnode *b) {
  if (a->n_iattr != b->n_iattr) return 0;
  if (a->n_iattr > 0 && memcmp(a->iattr, b->iattr, sizeof a->iattr[0] * (size_t)a->n_iattr)) return 0;
  return a->op == KILN_OP_SCALAR || !memcmp(&a->fattr, &b->fattr, sizeof a->fattr);
}

static int shape_equal(const kiln_gnode *a, const kiln_gnode *b) {
  return a->rank == b->rank && !memcmp(a->shape, b->shape, sizeof a->shape[0] * a->rank);
}

static void fmt_inputs(const kiln_graph *g, const kiln_gnode *n, kiln_text *b) {
  const int32_t *in = kiln_gnode_inputs(g, n);
  if (!n->n_in) kiln_text_printf(b, "(none)");
  for (int k = 0; k < n->n_in; k++) kiln_text_printf(b, k ? ", %%%d" : "%%%d", (int)in[k]);
}

/* Compare aligned nodes i (old) and j (new); append "; "-joined changes to
 * b and count them. Returns the distance contribution. */
static double compare_pair(const kiln_graph *og, int32_t i, const kiln_graph *ng, int32_t j, const int32_t *mb,
                           const kiln_diff_syms *sy, kiln_text *b, kiln_diff_stats *st, int *changed) {
  const kiln_gnode *o = &og->nodes[i], *n = &ng->nodes[j];
  int parts = 0;
  double dist = 0;
  char t1[256], t2[256];
  if (o->dtype != n->dtype) {
    kiln_text_printf(b, "%sdtype %s -> %s", parts++ ? "; " : "", kiln_dtype_name((kiln_dtype)o->dtype),
                     kiln_dtype_name((kiln_dtype)n->dtype));
    st->dtype++;
    dist += 1;
  }
  const char *so = sy ? sym_at(sy->old_shape, i) : NULL, *sn = sy ? sym_at(sy->new_shape, j) : NULL;
  if ((so || sn) && !(so && sn && !strcmp(so, sn))) { /* a symbolic size on one side, or other ones */
    fmt_shape_sym(o, so, t1, sizeof t1);
    fmt_shape_sym(n, sn, t2, sizeof t2);
    kiln_text_printf(b, "%sshape %s -> %s", parts++ ? "; " : "", t1, t2);
    st->shape++;
    dist += 0.1;
  } else if (!shape_equal(o, n)) { /* two sizes; of one family when both have the same symbolic sizes */
    fmt_shape(o, t1, sizeof t1);
    fmt_shape(n, t2, sizeof t2);
    kiln_text_printf(b, "%sshape %s -> %s", parts++ ? "; " : "", t1, t2);
    int nd = 0, dd = -1;
    if (o->rank == n->rank)
      for (int d = 0; d < o->rank; d++)
        if (o->shape[d] != n->shape[d]) nd++, dd = d;
    if (nd == 1)
      kiln_text_printf(b, " (dim %d: %" PRId64 " -> %" PRId64 ")", dd, o->shape[dd], n->shape[dd]);
    if (so) kiln_text_printf(b, ", [%s] in both", so);
    st->shape++;
    dist += 0.1;
  }
  if (!attrs_equal(o, n)) {
    kiln_graphtext_format_attrs(o, t1, sizeof t1);
    kiln_graphtext_format_attrs(n, t2, sizeof t2);
    kiln_text_printf(b, "%sattrs %s -> %s", parts++ ? "; " : "", t1[0] ? t1 + 1 : "(none)",
                     t2[0] ? t2 + 1 : "(none)");
    st->attrs++;
    dist += 1;
  }
  /* An input that is a new node is explained by its "+" line; only a
   * rewiring among aligned nodes is a change of this node. */
  int rewired = o->n_in != n->n_in;
  const int32_t *oi = kiln_gnode_inputs(og, o), *ni = kiln_gnode_inputs(ng, n);
  for (int k = 0; !rewired && k < n->n_in; k++) rewired = mb[ni[k]] >= 0 && mb[ni[k]] != oi[k];
  if (rewired) {
    kiln_text_printf(b, "%sinputs ", parts++ ? "; " : "");
    fmt_inputs(og, o, b);
    kiln_text_printf(b, " -> ");
    fmt_inputs(ng, n, b);
    st->inputs++;
    dist += 1;
  }
  *changed = parts;
  return dist;
}

/* The whole diff, its text appended to b (a kiln_text_on(NULL, 0) when no
 * text is wanted). Returns the distance. */
static double diff_core(const kiln_graph *og, const kiln_graph *ng, const kiln_diff_syms *sy, kiln_text *b,
                        kiln_diff_stats *st) {
  memset(st, 0, sizeof *st);
  int32_t *ma = malloc(sizeof *ma * ((size_t)og->n_nodes + 1));
  int32_t *mb = malloc(sizeof *mb * ((size_t)ng->n_nodes + 1));
  if (!ma || !mb) {
    free(ma);
    free(mb);
    kiln_text_printf(b, "  ? graph diff: out of memory\n");
    st->total = 1;
    return (double)og->n_nodes + (double)ng->n_nodes + 1;
  }
  align(og, ng, ma, mb);
  double dist = 0;
  char name[400], shape[256];
  for (int32_t j = 0; j < ng->n_nodes; j++) {
    const kiln_gnode *n = &ng->nodes[j];
    fmt_node(n, name, sizeof name);
    if (mb[j] < 0) {
      fmt_shape_sym(n, sy ? sym_at(sy->new_shape, j) : NULL, shape, sizeof shape);
      kiln_text_printf(b, "  + %s %s\n", name, shape);
      st->added++, st->total++, dist += 1;
      continue;
    }
    /* measure first, then write the line only when something changed */
    int changed = 0;
    kiln_diff_stats tmp = *st;
    kiln_text none = kiln_text_on(NULL, 0);
    compare_pair(og, mb[j], ng, j, mb, sy, &none, &tmp, &changed);
    if (!changed) continue;
    kiln_text_printf(b, "  ~ %s: ", name);
    dist += compare_pair(og, mb[j], ng, j, mb, sy, b, st, &changed);
    kiln_text_printf(b, "\n");
    st->total++;
  }
  for (int32_t i = 0; i < og->n_nodes; i++) {
    if (ma[i] >= 0) continue;
    fmt_node(&og->nodes[i], name, sizeof name);
    fmt_shape_sym(&og->nodes[i], sy ? sym_at(sy->old_shape, i) : NULL, shape, sizeof shape);
    kiln_text_printf(b, "  - %s %s\n", name, shape);
    st->removed++, st->total++, dist += 1;
  }
  if (og->n_outputs != ng->n_outputs) {
    kiln_text_printf(b, "  ~ outputs: %d -> %d\n", (int)og->n_outputs, (int)ng->n_outputs);
    st->outputs++, st->total++, dist += 1;
  } else {
    for (int32_t o = 0; o < ng->n_outputs; o++) {
      int32_t on = og->output_node[o], nn = ng->output_node[o];
      if (mb[nn] != on) {
        char was[400];
        fmt_node(&ng->nodes[nn], name, sizeof name);
        fmt_node(&og->nodes[on], was, sizeof was);
        kiln_text_printf(b, "  ~ output %d: now %s (was %s)\n", (int)o, name, was);
        st->outputs++, st->total++, dist += 1;
      } else if (og->output_alias[o] != ng->output_alias[o]) {
        char was[16] = "none", now[16] = "none";
        if (og->output_alias[o] >= 0) snprintf(was, sizeof was, "#%d", (int)og->output_alias[o]);
        if (ng->output_alias[o] >= 0) snprintf(now, sizeof now, "#%d", (int)ng->output_alias[o]);
        kiln_text_printf(b, "  ~ output %d: aliases input %s -> %s\n", (int)o, was, now);
        st->outputs++, st->total++, dist += 1;
      }
    }
  }
  int n_def = sy ? (sy->n_old_def > sy->n_new_def ? sy->n_old_def : sy->n_new_def) : 0;
  for (int k = 0; k < n_def; k++) { /* a symbol that stands for another dimension */
    const char *was = k < sy->n_old_def ? sym_at(sy->old_def, k) : NULL;
    const char *now = k < sy->n_new_def ? sym_at(sy->new_def, k) : NULL;
    if (was && now && !strcmp(was, now)) continue;
    if (!was && !now) continue;
    kiln_text_printf(b, "  ~ symbol s%d: %s -> %s\n", k, was ? was : "(none)", now ? now : "(none)");
    st->symbols++, st->total++, dist += 1;
  }
  free(ma);
  free(mb);
  return dist;
}

double kiln_graphdiff_distance(const kiln_graph *a, const kiln_graph *b) {
  if (kiln_graph_equal(a, b)) return 0;
  kiln_diff_stats st;
  kiln_text none = kiln_text_on(NULL, 0);
  double d = diff_core(a, b, NULL, &none, &st);
  /* structurally different but aligned identically (e.g. only the source
   * lines moved): still not 0 */
  return d > 0 ? d : 0.01;
}

int kiln_graphdiff_format_syms(const kiln_graph *old_g, const kiln_graph *new_g, const kiln_diff_syms *sy, char *out,
                               size_t cap, kiln_diff_stats *stats) {
  kiln_diff_stats st;
  size_t start = out && cap ? strnlen(out, cap - 1) : 0;
  kiln_text b = out && cap ? kiln_text_on(out + start, cap - start) : kiln_text_on(NULL, 0);
  diff_core(old_g, new_g, sy, &b, &st);
  if (stats) *stats = st;
  return st.total;
}

int kiln_graphdiff_format_stats(const kiln_graph *old_g, const kiln_graph *new_g, char *out, size_t cap,
                                kiln_diff_stats *stats) {
  return kiln_graphdiff_format_syms(old_g, new_g, NULL, out, cap, stats);
}

int kiln_graphdiff_format(const kiln_graph *old_g, const kiln_graph *new_g, char *out, size_t cap) {
  return kiln_graphdiff_format_stats(old_g, new_g, out, cap, NULL);
}

char *kiln_graphdiff_summary(const kiln_diff_stats *s, char *out, size_t cap) {
  kiln_text b = kiln_text_on(out, cap);
  if (!s->total) {
    kiln_text_printf(&b, "no differences");
    return out;
  }
  kiln_text_printf(&b, "%d difference%s:", s->total, s->total == 1 ? "" : "s");
  const struct {
    int n;
    const char *one, *many;
  } parts[] = {
      {s->added, "node added", "nodes added"},       {s->removed, "node removed", "nodes removed"},
      {s->shape, "shape changed", "shapes changed"}, {s->dtype, "dtype changed", "dtypes changed"},
      {s->attrs, "attribute changed", "attributes changed"},
      {s->inputs, "node rewired", "nodes rewired"},  {s->outputs, "output changed", "outputs changed"},
      {s->symbols, "symbol changed", "symbols changed"},
  };
  int first = 1;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (!parts[i].n) continue;
    kiln_text_printf(&b, "%s %d %s", first ? "" : ",", parts[i].n, parts[i].n == 1 ? parts[i].one : parts[i].many);
    first = 0;
  }
  return out;
}

const char *kiln_diff_pattern_name(kiln_diff_pattern p) {
  switch (p) {
    case KILN_DIFF_PATTERN_NONE: return "none";
    case KILN_DIFF_PATTERN_GROWING: return "growing";
    case KILN_DIFF_PATTERN_VARYING_INPUT: return "varying_input";
    case KILN_DIFF_PATTERN_OTHER: return "other";
  }
  return "?";
}

/* ───────────── classification ─────────────
 * A "chain" follows one node of the last graph back through the pairwise
 * alignments of consecutive graphs; chain[k] is its index in history[k]. */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The values of a chain's dim d over the history, "96 -> 104 -> 112"
 * (long histories keep the first two and the last three). */
static void fmt_series(const int64_t *v, int n, kiln_text *b) {
  for (int k = 0; k < n; k++) {
    if (n > 6 && k == 2) {
      kiln_text_printf(b, " -> ...");
      k = n - 4;
      continue;
    }
    kiln_text_printf(b, k ? " -> %" PRId64 : "%" PRId64, v[k]);
  }
}

static void explain_growing(const kiln_gnode *node, int d, const int64_t *v, int n, kiln_text *b) {
  char name[400], loc[300];
  fmt_node(node, name, sizeof name);
  fmt_loc(node, loc, sizeof loc);
  int64_t dmin = INT64_MAX, dmax = 0;
  for (int k = 1; k < n; k++) {
    int64_t dl = v[k] - v[k - 1];
    if (dl < dmin) dmin = dl;
    if (dl > dmax) dmax = dl;
  }
  kiln_text_printf(b, "growing tensor: %s, dim %d: ", name, d);
  fmt_series(v, n, b);
  if (dmin == dmax)
    kiln_text_printf(b, " (+%" PRId64 " per compile). The tensor made at %s grows by %" PRId64 " every step", dmin,
                     loc, dmin);
  else
    kiln_text_printf(b, " (+%" PRId64 " to +%" PRId64 " per compile). The tensor made at %s grows every step", dmin,
                     dmax, loc);
  kiln_text_printf(b, ", so every step is a new graph; accumulate it on the host (read each step's piece) or "
                      "preallocate a fixed-size buffer.");
}

/* advise: 0, the caller gives the site's one suggestion itself (the
 * KILN_DEBUG analysis: weighted by the executions of all the site's graphs);
 * 1, suggest here, each size weighted by weights[k] (the executions of
 * graph k; NULL: each graph once, as said). */
static void explain_varying(const kiln_gnode *node, int d, const int64_t *v, const int64_t *weights, int n,
                            int n_site, int advise, kiln_text *b) {
  char name[400];
  fmt_node(node, name, sizeof name);
  int64_t *sorted = malloc(sizeof *sorted * (size_t)n), *vals = malloc(sizeof *vals * (size_t)n),
          *cnts = malloc(sizeof *cnts * (size_t)n);
  if (!sorted || !vals || !cnts) {
    free(sorted), free(vals), free(cnts);
    kiln_text_printf(b, "varying input: dim %d of %s takes different sizes (out of memory listing them).", d, name);
    return;
  }
  memcpy(sorted, v, sizeof *v * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
  int64_t *runs = advise ? malloc(sizeof *runs * (size_t)n) : NULL; /* executions per distinct size */
  int nd = 0;
  for (int k = 0; k < n; k++) {
    if (nd && vals[nd - 1] == sorted[k]) {
      cnts[nd - 1]++;
    } else {
      vals[nd] = sorted[k];
      cnts[nd++] = 1;
    }
  }
  for (int j = 0; runs && j < nd; j++) {
    runs[j] = 0;
    for (int k = 0; k < n; k++)
      if (v[k] == vals[j]) runs[j] += weights ? (weights[k] > 0 ? weights[k] : 1) : 1;
  }
  if (n_site > n)
    kiln_text_printf(b, "varying input: dim %d of %s takes %d sizes over the last %d of the site's %d compiles (", d,
                     name, nd, n, n_site);
  else
    kiln_text_printf(b, "varying input: dim %d of %s takes %d sizes over %d compiles (", d, name, nd, n);
  for (int k = 0; k < nd; k++) {
    if (k == KILN_DIFF_LIST_MAX) {
      kiln_text_printf(b, ", ... %d more of the %d sizes", nd - k, nd);
      break;
    }
    kiln_text_printf(b, k ? ", %" PRId64 : "%" PRId64, vals[k]);
    if (cnts[k] > 1) kiln_text_printf(b, " x%" PRId64, cnts[k]);
  }
  kiln_text_printf(b, "). Each new size is a new graph; pad to buckets");
  int64_t bounds[KILN_BUCKET_SUGGEST_MAX];
  double waste = 0;
  int nb = runs ? kiln_bucket_suggest(vals, runs, nd, bounds, &waste) : 0;
  if (!advise) {
    kiln_text_printf(b, " (suggested below)");
  } else if (nb > 0) {
    kiln_text_printf(b, " (suggested boundaries: ");
    for (int k = 0; k < nb; k++) kiln_text_printf(b, k ? ", %" PRId64 : "%" PRId64, bounds[k]);
    kiln_text_printf(b, "; %.1f%% padding, %s)", 100.0 * waste,
                     weights ? "weighted by executions" : "each graph's size counted once");
  }
  kiln_text_printf(b, " with kiln's bucketing batcher (include/kiln/data.h) and warm them up with kiln_compile.");
  free(sorted), free(vals), free(cnts), free(runs);
}

/* back[k][j]: the node of history[k-1] aligned with node j of history[k]
 * (-1: none). Whether an input of history[k] changed its shape (or is new). */
static int input_changed(const kiln_graph *const *history, int32_t *const *back, int k, int32_t j) {
  int32_t pj = back[k][j];
  return pj < 0 || !shape_equal(&history[k - 1]->nodes[pj], &history[k]->nodes[j]);
}

/* 1 when every graph's inputs are those of the graph before (in shape). */
static int inputs_steady(const kiln_graph *const *history, int n, int32_t *const *back) {
  for (int k = 1; k < n; k++)
    for (int32_t i = 0; i < history[k]->n_inputs; i++)
      if (input_changed(history, back, k, history[k]->input_node[i])) return 0;
  return 1;
}

/* 1 when, from each graph to the next, an input changed its shape to that
 * of an output of the graph before: a tensor the program keeps and feeds
 * back (acc = concat(acc, piece) each step). A size that comes from the host
 * (a from_host batch whose size changes, even steadily) has no such link. */
static int fed_back(const kiln_graph *const *history, int n, int32_t *const *back) {
  for (int k = 1; k < n; k++) {
    const kiln_graph *g = history[k], *prev = history[k - 1];
    int found = 0;
    for (int32_t i = 0; i < g->n_inputs && !found; i++) {
      const kiln_gnode *x = &g->nodes[g->input_node[i]];
      if (!input_changed(history, back, k, g->input_node[i])) continue;
      for (int32_t o = 0; o < prev->n_outputs && !found; o++) {
        const kiln_gnode *y = &prev->nodes[prev->output_node[o]];
        found = y->dtype == x->dtype && shape_equal(x, y);
      }
    }
    if (!found) return 0;
  }
  return 1;
}

/* 1 when og -> ng changed nothing but the values of constants: every node
 * aligned, the same shapes, dtypes and wiring, and each node whose
 * attributes changed a const (a kiln_*_c operand, kiln_full, kiln_constant
 * whose value the program changes from step to step). */
static int const_values_only(const kiln_graph *og, const kiln_graph *ng) {
  kiln_diff_stats st;
  kiln_text none = kiln_text_on(NULL, 0);
  diff_core(og, ng, NULL, &none, &st);
  if (!st.attrs || st.added || st.removed || st.shape || st.dtype || st.inputs || st.outputs) return 0;
  int32_t *ma = malloc(sizeof *ma * ((size_t)og->n_nodes + 1)), *mb = malloc(sizeof *mb * ((size_t)ng->n_nodes + 1));
  int ok = ma && mb;
  if (ok) align(og, ng, ma, mb);
  for (int32_t j = 0; ok && j < ng->n_nodes; j++)
    ok = mb[j] >= 0 && (attrs_equal(&og->nodes[mb[j]], &ng->nodes[j]) || ng->nodes[j].op == KILN_OP_CONST);
  free(ma);
  free(mb);
  return ok;
}

/* 1 when every graph of history[0..n) (n >= 3) is the one before with nodes
 * added and nothing else changed but wiring and outputs: a chain of ops that
 * gets longer at every cut (a tensor carried from iteration to iteration,
 * x = f(x), with no step marker to compute it). */
static int only_grows(const kiln_graph *const *history, int n) {
  if (n < 3) return 0;
  for (int k = 1; k < n; k++) {
    kiln_diff_stats st;
    kiln_text none = kiln_text_on(NULL, 0);
    diff_core(history[k - 1], history[k], NULL, &none, &st);
    if (!st.added || st.removed || st.shape || st.dtype || st.attrs) return 0;
  }
  return 1;
}

/* OTHER: the first difference of the last two graphs, and the remedy of the
 * two causes recognized here (a constant that changes value, a graph that
 * only gets longer); otherwise the general advice. */
static void explain_other(const kiln_graph *const *history, int n, kiln_text *b) {
  const kiln_graph *prev = history[n - 2], *last = history[n - 1];
  char diff[512] = "";
  kiln_diff_stats st;
  kiln_graphdiff_format_stats(prev, last, diff, sizeof diff, &st);
  char *nl = strchr(diff, '\n');
  if (nl) *nl = 0;
  const char *first = diff;
  while (*first == ' ') first++;
  if (const_values_only(prev, last)) {
    kiln_text_printf(b,
                     "a constant changes value (%d difference%s between the last two graphs, each a constant's "
                     "value; first: %s). A compile-time constant is part of the graph, so each new value is a new "
                     "graph: pass the value as a scalar graph input instead (kiln_<op>_s or kiln_scalar, not "
                     "kiln_<op>_c or kiln_constant), which never recompiles.",
                     st.total, st.total == 1 ? "" : "s", *first ? first : "?");
    return;
  }
  if (only_grows(history, n)) {
    kiln_text_printf(b,
                     "a growing graph: each of the last %d graphs is the one before with nodes added (%d node%s "
                     "added in the last; first: %s). A tensor computed from itself at every iteration (x = f(x)) "
                     "with no kiln_mark_step() between them keeps its whole history pending, so every cut compiles "
                     "and runs a longer graph: keep the tensor (kiln_keep), update it with kiln_assign and end each "
                     "iteration with kiln_mark_step().",
                     n, st.added, st.added == 1 ? "" : "s", *first ? first : "?");
    return;
  }
  kiln_text_printf(b,
                   "the graph changed in another way (%d difference%s between the last two graphs; first: %s). "
                   "Make the traced program the same at every step: no data-dependent control flow or shapes.",
                   st.total, st.total == 1 ? "" : "s", *first ? first : "?");
}

kiln_diff_pattern kiln_graphdiff_classify(const kiln_graph *const *history, int n, char *out, size_t cap) {
  return kiln_graphdiff_classify_site(history, n, n, 1, NULL, out, cap);
}

kiln_diff_pattern kiln_graphdiff_classify_site(const kiln_graph *const *history, int n, int n_site, int advise,
                                               const int64_t *weights, char *out, size_t cap) {
  kiln_text b = kiln_text_on(out, cap);
  if (n < 2 || !history) {
    kiln_text_printf(&b, "no recompilation: fewer than two graphs to compare.");
    return KILN_DIFF_PATTERN_NONE;
  }
  int all_equal = 1;
  for (int k = 1; k < n && all_equal; k++) all_equal = kiln_graph_equal(history[k - 1], history[k]);
  if (all_equal) {
    kiln_text_printf(&b, "no recompilation pattern: all %d graphs are structurally equal.", n);
    return KILN_DIFF_PATTERN_NONE;
  }
  const kiln_graph *last = history[n - 1];
  /* back[k][j]: node of history[k-1] aligned with node j of history[k] */
  int32_t **back = calloc((size_t)n, sizeof *back);
  int32_t *chain = malloc(sizeof *chain * (size_t)n);
  int64_t *vals = malloc(sizeof *vals * (size_t)n);
  int ok = back && chain && vals;
  for (int k = 1; k < n && ok; k++) {
    int32_t *ma = malloc(sizeof *ma * ((size_t)history[k - 1]->n_nodes + 1));
    back[k] = malloc(sizeof *back[k] * ((size_t)history[k]->n_nodes + 1));
    ok = ma && back[k];
    if (ok) align(history[k - 1], history[k], ma, back[k]);
    free(ma);
  }
  kiln_diff_pattern pat = KILN_DIFF_PATTERN_OTHER;
  /* A steady growth is a growing tensor when the program makes it so: the
   * grown tensor is fed back (kept and extended), or no input changed (a
   * shape computed from the step count). Growth driven by an input that
   * changes on its own is a varying input, however regular its sizes. */
  int may_grow = n >= 3 && ok && (inputs_steady(history, n, back) || fed_back(history, n, back));
  /* pass 0: growth of a computed node; pass 1: growth of an input;
   * pass 2: a varying input dimension */
  for (int pass = 0; pass < 3 && ok && pat == KILN_DIFF_PATTERN_OTHER; pass++) {
    if (pass < 2 && !may_grow) continue;
    for (int32_t j = 0; j < last->n_nodes && pat == KILN_DIFF_PATTERN_OTHER; j++) {
      const kiln_gnode *node = &last->nodes[j];
      int is_input = node->op == KILN_OP_LEAF || node->op == KILN_OP_SCALAR;
      if ((pass == 0) == is_input) continue;
      chain[n - 1] = j;
      int complete = 1;
      for (int k = n - 1; k > 0 && complete; k--) {
        chain[k - 1] = back[k][chain[k]];
        complete = chain[k - 1] >= 0 && history[k - 1]->nodes[chain[k - 1]].rank == node->rank;
      }
      if (!complete) continue;
      for (int d = 0; d < node->rank && pat == KILN_DIFF_PATTERN_OTHER; d++) {
        int growing = 1, varies = 0;
        for (int k = 0; k < n; k++) {
          vals[k] = history[k]->nodes[chain[k]].shape[d];
          /* a steady growth (the same step each compile, as a tensor that
           * gains a batch per step): sizes that merely happen to increase
           * (160, 192, 256) are a varying dimension, not a growing tensor */
          if (k && (vals[k] <= vals[k - 1] || vals[k] - vals[k - 1] != vals[1] - vals[0])) growing = 0;
          if (k && vals[k] != vals[0]) varies = 1;
        }
        if (pass < 2 && growing) {
          explain_growing(node, d, vals, n, &b);
          pat = KILN_DIFF_PATTERN_GROWING;
        } else if (pass == 2 && varies) {
          explain_varying(node, d, vals, weights, n, n_site < n ? n : n_site, advise, &b);
          pat = KILN_DIFF_PATTERN_VARYING_INPUT;
        }
      }
    }
  }
  if (pat == KILN_DIFF_PATTERN_OTHER) explain_other(history, n, &b);
  for (int k = 0; back && k < n; k++) free(back[k]);
  free(back);
  free(chain);
  free(vals);
  return pat;
}
