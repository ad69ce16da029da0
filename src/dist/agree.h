/* Tiny synchronous exchanges between the ranks, outside any graph: what
 * the rank-divergence check (debug/diverge.c, docs/distributed.md) needs to
 * compare the ranks' graphs before one with collectives first runs.
 *
 * Every rank must make the same calls in the same order, and none may run
 * while a graph's collectives are in flight (the runtime drains its
 * executor before KILN_EV_FIRST_RUN). Called on the tracing thread. */
#ifndef KILN_DIST_AGREE_H
#define KILN_DIST_AGREE_H

#include <stddef.h>

#include "base/status.h"

/* This process's rank and the world size (0 and 1 alone, or when starting
 * the world failed). */
int kiln_dist_agree_world(int *rank);

/* out[r * bytes .. (r+1) * bytes) = rank r's in[0..bytes), for every rank
 * r (out holds world * bytes). Alone: a copy. Errors name the exchange
 * (`what`), the bytes and the world. */
kiln_status kiln_dist_agree_gather(const char *what, const void *in, size_t bytes, void *out, kiln_err *err);

#endif
