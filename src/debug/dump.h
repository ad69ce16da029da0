/* Graph dumps: KILN_SAVE_GRAPHS=DIR writes every compiled graph into DIR
 * in the format of KILN_SAVE_GRAPHS_FMT (docs/graphs.md):
 *   text (default)  the IR with source lines, parseable (debug/graphtext.h)
 *   dot             Graphviz; fused kernels are `subgraph cluster_k<i>`
 *   c               the generated C source of the graph's kernels
 * File names: graph-<seq, 4 digits>-<key, 16 hex>.<txt|dot|c>, written
 * atomically (temp file + rename) into a directory created with mode 0700.
 */
#ifndef KILN_DEBUG_DUMP_H
#define KILN_DEBUG_DUMP_H

#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "ir/graph.h"

typedef enum kiln_dump_format { KILN_DUMP_TEXT = 0, KILN_DUMP_DOT, KILN_DUMP_C } kiln_dump_format;

/* What the compile produced (backends/backend.h, through runtime/events.h's
 * KILN_EV_COMPILE_PLAN): the graph after the passes, the kernels, their C. */
typedef struct kiln_compile_plan kiln_compile_plan;

/* 1 when KILN_SAVE_GRAPHS is set with a format drawn from a compile's plan
 * (dot, c): the debug observer then asks the runtime for the plan. */
int kiln_dump_wants_plan(void);

/* When KILN_SAVE_GRAPHS is set: write graph `seq` (the pre-pass graph g,
 * the compile's plan or NULL, its cache key and the cause of the compile,
 * NULL allowed) as described above; note: NULL, or comment lines ("# ...",
 * each ending in a newline) appended to a text dump (the symbols of a
 * dynamic graph). g and plan are only read. Never fails
 * the caller: the first problem (an unusable directory, an unknown format,
 * a failed write) is reported once per process on stderr, later ones
 * silently skip the dump. Thread-safe (the report-once flag is an atomic
 * singleton). */
void kiln_dump_graph(const kiln_graph *g, const kiln_compile_plan *plan, uint64_t key, const char *cause, int seq,
                     const char *note);

/* Write g in format fmt to f (what kiln_dump_graph puts in the file).
 * dot and c draw from the plan (the graph the backend compiled, its kernels
 * and their C): without a plan (NULL), or with one that has no kernels
 * (plan->none: the ref backend), dot draws the graph unfused and c is a
 * comment saying why (both still return KILN_OK). Errors: KILN_ERR_IO when
 * writing f failed, KILN_ERR_OUT_OF_MEMORY. Reentrant. */
kiln_status kiln_dump_write(const kiln_graph *g, const kiln_compile_plan *plan, uint64_t key, const char *cause,
                            kiln_dump_format fmt, FILE *f, kiln_err *err);

/* Parse a KILN_SAVE_GRAPHS_FMT value ("text", "dot", "c"; NULL or "" is
 * text). Returns 0, or -1 for an unknown name (*fmt is then text). */
int kiln_dump_format_parse(const char *s, kiln_dump_format *fmt);

/* The file name extension of a format: "txt", "dot", "c". */
const char *kiln_dump_format_ext(kiln_dump_format fmt);

#endif
