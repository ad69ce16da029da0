/* `kiln embed`: see embed.c. */
#ifndef KILN_TOOLS_EMBED_H
#define KILN_TOOLS_EMBED_H

/* argv[0] is "embed". Returns the process exit code (0 ok, 1 failure, 2 usage). */
int kiln_cli_embed(int argc, char **argv);

#endif
