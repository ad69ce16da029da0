/* Rank divergence (docs/distributed.md, "When ranks trace different
 * graphs"): before a graph with collectives first runs
 * (KILN_EV_FIRST_RUN), the ranks all-gather its 8-byte key; if they
 * differ, they exchange their graphs in the text form (graphtext.h), and
 * every rank refuses the run with one error that names the ranks, the
 * graph keys and the differences between rank 0's graph and each other
 * graph (graphdiff.h: the nodes and the user's source lines that made
 * them) — instead of collectives that never match, a hang.
 *
 * debug may not call the dist service (the layers of
 * docs/architecture.md), so the exchange is handed in by kiln_init (which
 * assembles the layers) as two functions. */
#ifndef KILN_DEBUG_DIVERGE_H
#define KILN_DEBUG_DIVERGE_H

#include <stddef.h>

#include "base/status.h"

typedef struct kiln_diverge_comm {
  /* the world size, and this process's rank in *rank */
  int (*world)(int *rank);
  /* out[r * bytes ..] = rank r's in[0..bytes) for every rank (a synchronous all-gather) */
  kiln_status (*gather)(const char *what, const void *in, size_t bytes, void *out, kiln_err *err);
} kiln_diverge_comm;

/* Register the check as an observer of the runtime's events (once; later
 * calls change nothing). comm is copied. */
void kiln_diverge_attach(const kiln_diverge_comm *comm);

#endif
