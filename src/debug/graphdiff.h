/* Graph diffs: what changed between two graphs of the same program, and why
 * a call site keeps compiling new graphs (docs/graphs.md).
 *
 * Nodes of the two graphs are aligned by their (op, source file:line)
 * sequence in topological order (a longest common subsequence after
 * trimming the common prefix and suffix); aligned nodes are then compared
 * field by field. Source files are compared by base name, so dumps of the
 * same program built in different directories still align.
 *
 * Output lines (stable: tests and tools grep them), two spaces of indent:
 *   ~ concat at eval.c:41: shape [96,10] -> [104,10] (dim 0: 96 -> 104)
 *   ~ input 2 (leaf) at train.c:88: shape [8,87] -> [8,112] (dim 1: 87 -> 112)
 *   ~ add at model.c:9: dtype f32 -> f64
 *   ~ slice at model.c:10: attrs start=[0,0] step=[1,1] -> start=[0,4] step=[1,1]
 *   ~ mul at model.c:11: inputs %3, %4 -> %3, %5
 *   + reduce_sum at model.c:12 [8]
 *   - mul at model.c:15 [8,64]
 *   ~ outputs: 2 -> 3
 *   ~ output 1: now neg at model.c:16 (was add at model.c:14)
 *   ~ output 0: aliases input #0 -> none
 *   ~ symbol s0: dim 1 of input 2 -> dim 0 of input 0
 * Graphs compiled for any size (their dumps' symbolic sizes given,
 * kiln_diff_syms) are compared by those: "shape [16,s0] -> [16,2*s0]", a
 * node with a symbolic size against one without it "shape [16,s0] ->
 * [16,52]"; two sizes of one family show their sizes with the symbolic
 * ones they share: "shape [16,47] -> [16,52] (dim 1: 47 -> 52), [16,s0]
 * in both".
 * Several changes of one node share its line, separated by "; ". "~" and
 * "+" lines come in the new graph's node order, then the "-" lines in the
 * old graph's order, then the graph-level ones (outputs).
 *
 * Thread-safety: all functions are reentrant; graphs are only read.
 */
#ifndef KILN_DEBUG_GRAPHDIFF_H
#define KILN_DEBUG_GRAPHDIFF_H

#include <stddef.h>

#include "ir/graph.h"

typedef enum kiln_diff_pattern {
  KILN_DIFF_PATTERN_NONE = 0,     /* the graphs do not differ */
  KILN_DIFF_PATTERN_GROWING,      /* a tensor grows compile after compile (S2) */
  KILN_DIFF_PATTERN_VARYING_INPUT,/* an input dimension takes varying values (S4) */
  KILN_DIFF_PATTERN_OTHER,        /* some other change */
} kiln_diff_pattern;

/* Counts of the kinds of differences, for one-line summaries. */
typedef struct kiln_diff_stats {
  int added, removed;     /* nodes */
  int shape, dtype, attrs, inputs; /* aligned nodes whose field changed */
  int outputs;            /* graph-level output lines */
  int symbols;            /* symbols defined otherwise */
  int total;              /* number of difference lines */
} kiln_diff_stats;

/* How far apart a and b are: 0 when kiln_graph_equal(a, b), otherwise > 0:
 * one per unmatched node, one per aligned node whose dtype, attributes or
 * inputs changed, 0.1 per aligned node whose shape alone changed, one for
 * changed outputs. For choosing the closest cached graph. */
double kiln_graphdiff_distance(const kiln_graph *a, const kiln_graph *b);

/* Append (at the end of the NUL-terminated string already in out; out[0]
 * must be NUL or text) the difference lines old_g -> new_g described above,
 * each ending in '\n', truncated at cap (always NUL-terminated when cap > 0).
 * Returns the number of differences (0: none). */
int kiln_graphdiff_format(const kiln_graph *old_g, const kiln_graph *new_g, char *out, size_t cap);

/* Same, also counting kinds of differences into *stats (may be NULL). */
int kiln_graphdiff_format_stats(const kiln_graph *old_g, const kiln_graph *new_g, char *out, size_t cap,
                                kiln_diff_stats *stats);

/* The symbolic sizes of two graphs compiled for any size, as their dumps
 * give them (kiln_graphtext.sym_shape, .sym_def): per node "16,s0" or NULL
 * (concrete), per symbol what it is ("dim 1 of input 2") or NULL. Any
 * array may be NULL (none). */
typedef struct kiln_diff_syms {
  const char *const *old_shape, *const *new_shape;
  const char *const *old_def, *const *new_def;
  int n_old_def, n_new_def;
} kiln_diff_syms;

/* kiln_graphdiff_format_stats comparing symbolic sizes where sy gives them
 * (sy may be NULL: the plain diff). */
int kiln_graphdiff_format_syms(const kiln_graph *old_g, const kiln_graph *new_g, const kiln_diff_syms *sy, char *out,
                               size_t cap, kiln_diff_stats *stats);

/* Write "3 differences: 1 node added, 2 shapes changed" (or "no
 * differences") into out (truncated at cap). Kinds, in this order: node(s)
 * added, removed, shape(s) changed, dtype(s) changed, attribute(s) changed,
 * node(s) rewired, output(s) changed, symbol(s) changed. Returns out. */
char *kiln_graphdiff_summary(const kiln_diff_stats *s, char *out, size_t cap);

/* Classify the history of graphs compiled at one call site (oldest first,
 * n >= 2) and write a one-paragraph explanation into out (NUL-terminated,
 * truncated at cap):
 *   GROWING        some aligned non-input node (an input when none) has a
 *                  dimension that increases by the same step at every
 *                  compile, and the program makes it grow: from each graph
 *                  to the next an input changed to the shape of an output of
 *                  the graph before (a kept tensor fed back and extended), or
 *                  no input changed at all (a shape computed from the step
 *                  count); needs n >= 3 (two increases) so that one larger
 *                  batch is not mistaken for growth;
 *   VARYING_INPUT  otherwise, a graph input's dimension takes differing
 *                  values (listed sorted with counts, the first
 *                  KILN_DIFF_LIST_MAX of them, with a bucket suggestion from
 *                  kiln_bucket_suggest): a size that comes from outside, such
 *                  as a sweep of batch sizes, even a steady one;
 *   OTHER          the graphs differ in another way (the first difference
 *                  of the last two graphs is quoted);
 *   NONE           all graphs are structurally equal, or n < 2.
 * The explanation names the node, its file:line, the dimension and the
 * values, and the suggested fix. */
kiln_diff_pattern kiln_graphdiff_classify(const kiln_graph *const *history, int n, char *out, size_t cap);

/* The same for the most recent n graphs of a call site that compiled n_site
 * graphs in all (n_site >= n): a varying input then says "over the last n of
 * the site's n_site compiles", so that a window is never read as the whole.
 * A varying input's bucket suggestion (kiln_bucket_suggest, the one rule of
 * every report): advise 0 leaves it out ("suggested below": the caller
 * prints the site's one suggestion, weighted by the executions of all its
 * graphs); advise 1 gives it here, each size weighted by weights[k], the
 * executions of history[k] (NULL: each graph once, and the text says so;
 * kiln_graphdiff_classify passes 1, NULL). */
kiln_diff_pattern kiln_graphdiff_classify_site(const kiln_graph *const *history, int n, int n_site, int advise,
                                               const int64_t *weights, char *out, size_t cap);

/* How many distinct sizes a varying-input explanation lists before "... N
 * more of the M sizes". */
#define KILN_DIFF_LIST_MAX 32

/* "none", "growing", "varying_input", "other". */
const char *kiln_diff_pattern_name(kiln_diff_pattern p);

#endif
