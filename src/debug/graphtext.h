/* The text form of a kiln_graph: what KILN_SAVE_GRAPHS_FMT=text writes and
 * what `kiln graph diff` reads back (format described in docs/graphs.md).
 *
 *   # kiln graph dump, text format v1 (docs/graphs.md)
 *   key 0x00000000000000a1
 *   cause value read at train.c:40
 *   graph 0x1f2e3d4c5b6a7988: 4 nodes, 2 inputs, 1 outputs
 *   %0 = leaf f32[4,8] input=0 @ train.c:40
 *   %1 = leaf f32[4,8] input=1 @ train.c:41
 *   %2 = add f32[4,8] %0, %1 @ train.c:42
 *   %3 = reduce_sum f32[4,1] %2 axes=[1] @ train.c:43
 *   inputs: %0 %1
 *   outputs: %3 (aliases input #0)
 *
 * Every field of every node is written (attributes by name where the op has
 * named attributes, raw `iattr=[...]` otherwise), so parse(write(g)) is a
 * graph equal to g under kiln_graph_equal, with the same source locations.
 *
 * Thread-safety: all functions are reentrant (no global state).
 */
#ifndef KILN_DEBUG_GRAPHTEXT_H
#define KILN_DEBUG_GRAPHTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "ir/graph.h"

/* Limits of the parser: a larger file is rejected as CORRUPT rather than
 * allocating without bound. */
#define KILN_GRAPHTEXT_MAX_NODES (1 << 20)
#define KILN_GRAPHTEXT_MAX_BYTES ((size_t)1 << 30)

/* A parsed dump. `g` owns its arrays as usual; the source file names its
 * nodes point to are owned by this struct (`files`), so the graph must not
 * outlive it. Release with kiln_graphtext_clear. */
typedef struct kiln_graphtext {
  kiln_graph *g;
  uint64_t key;   /* the "key" header line, 0 when absent */
  int has_key;
  char *cause;    /* the "cause" header line, "" when absent (malloc'd) */
  char **files;   /* distinct file-name strings referenced by g's nodes */
  int n_files;
  /* A graph compiled for any size (docs/dynamic-shapes.md) has comment
   * lines naming its symbols and each node's symbolic sizes:
   *   # dynamic: s0 = dim 1 of input 2 (47 here)
   *   # dynamic: %4 [16,s0]
   * sym_def[k]: what symbol k is ("dim 1 of input 2"), NULL when not said;
   * sym_shape[i]: node i's sizes ("16,s0"), NULL for a node without a
   * symbolic size; both NULL arrays for a dump without them (malloc'd). */
  char **sym_def;
  int n_sym_def;
  char **sym_shape; /* g->n_nodes entries */
} kiln_graphtext;

/* Write g as text to f, with the optional header fields key and cause
 * (NULL: no cause line; newlines in it become spaces). g is read only.
 * Returns 0, or -1 when writing to f failed (errno from stdio). */
int kiln_graphtext_write(const kiln_graph *g, uint64_t key, const char *cause, FILE *f);

/* Append the attributes of node n in the text form (" axis=1 value=0.5";
 * "" when it has none) to buf, NUL-terminated and truncated at cap.
 * Returns the length the full text has (like snprintf). */
int kiln_graphtext_format_attrs(const kiln_gnode *n, char *buf, size_t cap);

/* Parse the text form: text[0..len) need not be NUL-terminated. `name`
 * (the file name, for messages) may be NULL. On success fills *out (the
 * caller releases it with kiln_graphtext_clear) and returns KILN_OK; the
 * graph's hash is recomputed. Errors, with "name:line: what" in err:
 * KILN_ERR_CORRUPT for malformed text or a graph that fails
 * kiln_graph_verify, KILN_ERR_OUT_OF_MEMORY, KILN_ERR_INVALID_ARGUMENT for a
 * NULL out. Never reads outside text[0..len). */
kiln_status kiln_graphtext_parse(const char *text, size_t len, const char *name, kiln_graphtext *out, kiln_err *err);

/* Read and parse the file at path (errors as above; KILN_ERR_IO when it
 * cannot be read, naming the path). */
kiln_status kiln_graphtext_load(const char *path, kiln_graphtext *out, kiln_err *err);

/* Free everything *t owns and zero it. Safe on a zeroed struct. */
void kiln_graphtext_clear(kiln_graphtext *t);

#endif
