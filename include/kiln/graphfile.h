/* Graph dump files: read the graphs KILN_SAVE_GRAPHS wrote (the text
 * format, KILN_SAVE_GRAPHS_FMT=text; docs/graphs.md) and compare two of
 * them. `kiln graph diff` is built on this.
 *
 *   kiln_graph_file *a = NULL, *b = NULL;
 *   kiln_graph_diff *d = NULL;
 *   if (kiln_graph_file_create("old.txt", &a) == KILN_OK && kiln_graph_file_create("new.txt", &b) == KILN_OK &&
 *       kiln_graph_diff_create(a, b, &d) == KILN_OK)
 *     printf("%s%s\n", kiln_graph_diff_text(d), kiln_graph_diff_summary(d));
 *   else
 *     fprintf(stderr, "%s\n", kiln_last_error());
 *   kiln_graph_diff_destroy(d);
 *   kiln_graph_file_destroy(b);
 *   kiln_graph_file_destroy(a);
 *
 * Errors go to the one channel (kiln.h). None of these functions starts
 * the runtime.
 *
 * Thread-safety: the objects are read-only once created; different objects
 * may be used from different threads.
 */
#ifndef KILN_GRAPHFILE_H
#define KILN_GRAPHFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A parsed graph dump. */
typedef struct kiln_graph_file kiln_graph_file;

/* Read and parse the dump at path. Errors (sticky status; the message names
 * the file and, for bad contents, the line): INVALID_ARGUMENT (path or out
 * NULL), IO (cannot be read), CORRUPT (not a text dump, or a graph that
 * fails kiln's checks; files over 1 GiB or 2^20 nodes are refused),
 * OUT_OF_MEMORY. */
#define kiln_graph_file_create(path, out) kiln_graph_file_create_at((path), (out), KILN_HERE)
kiln_status kiln_graph_file_create_at(const char *path, kiln_graph_file **out, kiln_loc loc);
void kiln_graph_file_destroy(kiln_graph_file *f);

/* The dump's cache key (its "key" line; 0 when absent or f is NULL). */
uint64_t kiln_graph_file_key(const kiln_graph_file *f);
/* The number of nodes of its graph; -1 when f is NULL. */
int kiln_graph_file_nodes(const kiln_graph_file *f);
/* Whether the two graphs are structurally equal (the graph cache's
 * comparison: ops, dtypes, shapes, attributes, inputs and outputs; source
 * lines are ignored). false when either is NULL. */
bool kiln_graph_file_equal(const kiln_graph_file *a, const kiln_graph_file *b);

/* What changed from graph a to graph b: nodes aligned by op and source line,
 * one line per difference (docs/graphs.md lists the forms):
 *   ~ concat at eval.c:41: shape [96,10] -> [104,10] (dim 0: 96 -> 104)
 *   + reduce_sum at model.c:12 [8]
 *   - mul at model.c:15 [8,64] */
typedef struct kiln_graph_diff kiln_graph_diff;

/* Diff a against b. Errors (sticky status): INVALID_ARGUMENT (a, b or out
 * NULL), OUT_OF_MEMORY. */
#define kiln_graph_diff_create(a, b, out) kiln_graph_diff_create_at((a), (b), (out), KILN_HERE)
kiln_status kiln_graph_diff_create_at(const kiln_graph_file *a, const kiln_graph_file *b, kiln_graph_diff **out,
                                      kiln_loc loc);
void kiln_graph_diff_destroy(kiln_graph_diff *d);

/* The difference lines, each indented by two spaces and ending in '\n'
 * ("" when there are none). Owned by d. NULL when d is NULL. */
const char *kiln_graph_diff_text(const kiln_graph_diff *d);
/* One line without '\n': "3 differences: 1 node added, 2 shapes changed",
 * "no differences", or "no node-level differences, but the graphs are not
 * equal". Owned by d. NULL when d is NULL. */
const char *kiln_graph_diff_summary(const kiln_graph_diff *d);
/* The number of difference lines; -1 when d is NULL. */
int kiln_graph_diff_count(const kiln_graph_diff *d);

#ifdef __cplusplus
}
#endif

#endif
