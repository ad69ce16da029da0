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

#include "kiln/graphfile.h"
#include "tools/cli.h"

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

static int graph_diff(const char *pa, const char *pb) {
  kiln_graph_file *ta = NULL, *tb = NULL;
  kiln_graph_diff *d = NULL;
  int rc = GRAPH_USAGE;
  kiln_clear_error();
  /* No source location: the user of a command line has no use for ours. */
  if (kiln_graph_file_create_at(pa, &ta, KILN_CLI_NO_LOC) != KILN_OK ||
      kiln_graph_file_create_at(pb, &tb, KILN_CLI_NO_LOC) != KILN_OK) {
    fprintf(stderr, "kiln graph diff: %s\n", kiln_cli_error_message());
  } else if (kiln_graph_diff_create_at(ta, tb, &d, KILN_CLI_NO_LOC) != KILN_OK) {
    fprintf(stderr, "kiln graph diff: %s\n",
            kiln_last_status() == KILN_ERR_OUT_OF_MEMORY ? "out of memory" : kiln_cli_error_message());
  } else {
    printf("--- %s (key 0x%016" PRIx64 ", %d nodes)\n+++ %s (key 0x%016" PRIx64 ", %d nodes)\n", pa,
           kiln_graph_file_key(ta), kiln_graph_file_nodes(ta), pb, kiln_graph_file_key(tb), kiln_graph_file_nodes(tb));
    fputs(kiln_graph_diff_text(d), stdout);
    printf("%s\n", kiln_graph_diff_summary(d));
    /* equal graphs may still align differently (moved source lines): the
     * structural comparison decides the exit status */
    rc = kiln_graph_file_equal(ta, tb) ? GRAPH_EQUAL : GRAPH_DIFFERENT;
  }
  kiln_graph_diff_destroy(d);
  kiln_graph_file_destroy(tb);
  kiln_graph_file_destroy(ta);
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
