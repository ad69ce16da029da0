/* Helpers shared by the subcommands of `kiln`: see cli.h. */
#include "tools/cli.h"

#include <string.h>

const char *kiln_cli_error_message(void) {
  kiln_status s = kiln_last_status();
  const char *msg = kiln_last_error();
  if (s == KILN_OK) return msg;
  const char *name = kiln_status_name(s);
  size_t n = strlen(name);
  if (!strncmp(msg, name, n) && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  return *msg ? msg : name;
}
