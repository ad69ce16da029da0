/* Helpers shared by the subcommands of `kiln`. */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

#include "kiln/kiln.h"

/* The location the commands pass to the _at functions: none. The user of a
 * command line has no use for kiln's own file:line. */
#define KILN_CLI_NO_LOC ((kiln_loc){NULL, 0})

/* The sticky error's message (kiln_last_error()) without what kiln puts
 * before it: "FILE:LINE: STATUS: " (a call made from the tools' own code
 * names the tool's source line, which a command line's user has no use
 * for) or "STATUS: " (a call made without a location); the status name when
 * the message is empty. "" when there is no error. */
const char *kiln_cli_error_message(void);

/* Parse a flag's value, all of it, as a decimal integer in [lo, hi]. On
 * success *out is set and 0 returned; otherwise prints
 * "kiln CMD: FLAG: expected a positive integer, got 'V'" (or "a
 * non-negative integer", "an integer from LO to HI") to stderr and returns
 * -1. */
int kiln_cli_parse_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi, long long *out);

/* Parse a flag's value, all of it, as a finite number > lo (lo_open) or
 * >= lo. Errors as kiln_cli_parse_int ("expected a positive number"). */
int kiln_cli_parse_number(const char *cmd, const char *flag, const char *v, double lo, int lo_open, double *out);

/* Can a file be written at `path` (created or replaced)? Its directory must
 * exist and be writable, and path must not be a directory. 0 when so;
 * otherwise prints "kiln CMD: FLAG: cannot write 'PATH': <why>" and returns
 * -1. For checking a command's outputs before it starts its work. */
int kiln_cli_check_output_file(const char *cmd, const char *flag, const char *path);

/* Can the directory `path` be used for output (it exists and is a writable
 * directory, or its nearest existing ancestor is one, so that it can be
 * created)? 0 when so; otherwise prints "kiln CMD: FLAG: cannot write to
 * 'PATH': <why>" and returns -1. */
int kiln_cli_check_output_dir(const char *cmd, const char *flag, const char *path);

/* Whether everything written to stdout so far has reached its file: flushes
 * it; 0 after a write error (then kiln_cli_stdout_errno says which; it
 * stays 0 once so). A command that writes much checks it as it goes, to stop
 * early; main checks it after every command. */
int kiln_cli_stdout_ok(void);
int kiln_cli_stdout_errno(void);

#endif
