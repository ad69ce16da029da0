/* kiln's own lines on stderr (and in KILN_DEBUG_FILE): in a world of
 * several processes (a program launched by mpirun or srun) every line
 * starts with the process's rank, "[rank 1] kiln: ...", so that the
 * interleaved output of N ranks can be told apart (docs/distributed.md).
 *
 * The rank and world come from the launcher's variables (base/config.h:
 * OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, PMIX_RANK), read once, without
 * loading MPI: they are what MPI reports as the rank in MPI_COMM_WORLD.
 * Alone (no launcher, or a world of 1) there is no prefix.
 *
 * Thread-safety: every function may be called from any thread; a line is
 * written with one stdio call, so lines of two threads do not mix. */
#ifndef KILN_BASE_LOG_H
#define KILN_BASE_LOG_H

#include <stdio.h>

/* This process's rank as the launcher set it, and the world size in
 * *world (may be NULL): 0 and 1 alone; world -1 when the launcher gave a
 * rank but no size (PMIx). */
int kiln_log_rank(int *world);

/* "[rank R] " in a world of several processes, "" otherwise. */
const char *kiln_log_prefix(void);

/* Write text to f with the prefix at the start of every line (text need
 * not end in a newline). */
void kiln_log_puts(FILE *f, const char *text);

/* printf-style kiln_log_puts. */
void kiln_log_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
