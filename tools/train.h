/* `kiln train`: see train.c. */
#ifndef KILN_TOOLS_TRAIN_H
#define KILN_TOOLS_TRAIN_H

/* argv[0] is "train". Returns the process exit code (0 ok, 1 failure, 2 usage). */
int kiln_cli_train(int argc, char **argv);

#endif
