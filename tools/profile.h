/* `kiln profile`: see profile.c. */
#ifndef KILN_TOOLS_PROFILE_H
#define KILN_TOOLS_PROFILE_H

/* argv[0] is "profile". Returns the process exit code (0 ok, 1 failure, 2 usage). */
int kiln_cli_profile(int argc, char **argv);

#endif
