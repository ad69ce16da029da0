/* `kiln graph`: see graph.c. */
#ifndef KILN_TOOLS_GRAPH_H
#define KILN_TOOLS_GRAPH_H

/* argv[0] is "graph". Returns the process exit code (0 ok, 1 failure, 2 usage). */
int kiln_cli_graph(int argc, char **argv);

#endif
