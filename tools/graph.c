/* `kiln graph diff A B`: compare two graphs dumped with KILN_SAVE_GRAPHS
 * (text format) and print what changed, node by node, with the source line
 * of each node (docs/graphs.md).
 *
 * Exit status: 0 the graphs are structurally equal, 1 they differ, 2 bad
 * usage or a file that cannot be read or parsed (the message names the file
 * and line).
 */
#include "tools/graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug/graphdiff.h"
#include "debug/graphtext.h"

enum { GRAPH_EQUAL = 0, GRAPH_DIFFERENT = 1, GRAPH_USAGE = 2 };

static void graph_usage(FILE *f) {
  fprintf(f,
          "usage: kiln graph diff A B\n"
          "\n"
          "Compare two graphs written by KILN_SAVE_GRAPHS=DIR (KILN_SAVE_GRAPHS_FMT=text, the default):\n"
          "one line per difference, with the source line that created the node:\n"
          "  ~ NODE at FILE:LINE: what changed (old -> new)\n"
          "  + NODE at FILE:LINE [shape]   only in B\n"
          "  - NODE at FILE:LINE [shape]   only in A\n"
          "Exit status: 0 equal, 1 different, 2 usage or unreadable file.\n");
}

/* The full diff text (grown until it fits). NULL on out-of-memory. */
static char *diff_text(const kiln_graph *a, const kiln_graph *b, kiln_diff_stats *st) {
  for (size_t cap = 1 << 16; cap <= ((size_t)1 << 30); cap *= 4) {
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = 0;
    kiln_graphdiff_format_stats(a, b, buf, cap, st);
    if (strlen(buf) + 1 < cap) return buf;
    free(buf);
  }
  return NULL;
}

static int graph_diff(const char *pa, const char *pb) {
  kiln_graphtext ta, tb;
  kiln_err err = {0};
  if (kiln_graphtext_load(pa, &ta, &err) != KILN_OK) {
    fprintf(stderr, "kiln graph diff: %s\n", err.msg);
    return GRAPH_USAGE;
  }
  if (kiln_graphtext_load(pb, &tb, &err) != KILN_OK) {
    fprintf(stderr, "kiln graph diff: %s\n", err.msg);
    kiln_graphtext_clear(&ta);
    return GRAPH_USAGE;
  }
  kiln_diff_stats st;
  char *text = diff_text(ta.g, tb.g, &st);
  int rc = GRAPH_USAGE;
  if (!text) {
    fprintf(stderr, "kiln graph diff: out of memory\n");
  } else {
    printf("--- %s (key 0x%016" PRIx64 ", %d nodes)\n+++ %s (key 0x%016" PRIx64 ", %d nodes)\n", pa, ta.key,
           (int)ta.g->n_nodes, pb, tb.key, (int)tb.g->n_nodes);
    fputs(text, stdout);
    char sum[256];
    /* equal graphs may still align differently (moved source lines): the
     * structural comparison decides the exit status */
    int equal = kiln_graph_equal(ta.g, tb.g);
    if (!st.total && !equal) snprintf(sum, sizeof sum, "no node-level differences, but the graphs are not equal");
    else kiln_graphdiff_summary(&st, sum, sizeof sum);
    printf("%s\n", sum);
    rc = equal ? GRAPH_EQUAL : GRAPH_DIFFERENT;
    free(text);
  }
  kiln_graphtext_clear(&ta);
  kiln_graphtext_clear(&tb);
  return rc;
}

int kiln_cli_graph(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
    graph_usage(stdout);
    return GRAPH_EQUAL;
  }
  if (argc < 2) {
    fprintf(stderr, "kiln graph: missing subcommand\n\n");
    graph_usage(stderr);
    return GRAPH_USAGE;
  }
  if (strcmp(argv[1], "diff")) {
    fprintf(stderr, "kiln graph: unknown subcommand '%s'\n\n", argv[1]);
    graph_usage(stderr);
    return GRAPH_USAGE;
  }
  if (argc != 4) {
    fprintf(stderr, "kiln graph diff: expected two files, got %d\n\n", argc - 2);
    graph_usage(stderr);
    return GRAPH_USAGE;
  }
  return graph_diff(argv[2], argv[3]);
}
