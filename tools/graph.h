/* `kiln graph`: see graph.c. */
#ifndef KILN_TOOLS_GRAPH_H
#define KILN_TOOLS_GRAPH_H

/* `kiln graph diff A B`. argv[0] is "graph". Returns the process exit code:
 * 0 the two dumps are structurally equal (or --help), 1 they differ, 2 bad
 * usage or a file that cannot be read or parsed. Prints the diff on stdout,
 * problems on stderr. Not thread-safe (stdio output only). */
int kiln_cli_graph(int argc, char **argv);

#endif
