/* Helpers shared by the subcommands of `kiln`. */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

#include "kiln/kiln.h"

/* The location the commands pass to the _at functions: none. The user of a
 * command line has no use for kiln's own file:line. */
#define KILN_CLI_NO_LOC ((kiln_loc){NULL, 0})

/* The sticky error's message (kiln_last_error()) without the "STATUS: "
 * that kiln puts before the message of a call made without a location;
 * the status name when the message is empty. "" when there is no error. */
const char *kiln_cli_error_message(void);

#endif
