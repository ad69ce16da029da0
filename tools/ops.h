/* `kiln ops`: see ops.c. */
#ifndef KILN_TOOLS_OPS_H
#define KILN_TOOLS_OPS_H

/* argv[0] is "ops". Returns the process exit code (0 ok, 2 usage). */
int kiln_cli_ops(int argc, char **argv);

#endif
