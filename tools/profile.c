/* `kiln profile` (placeholder until the subcommand lands). */
#include <stdio.h>

#include "tools/profile.h"

int kiln_cli_profile(int argc, char **argv) {
  (void)argc;
  fprintf(stderr, "kiln %s: not available in this build\n", argv[0]);
  return 1;
}
