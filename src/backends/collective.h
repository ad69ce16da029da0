/* A collective node (ALL_REDUCE, BROADCAST, ALL_GATHER) run through the
 * dist service (dist/dist.h): shared by the cpu and ref backends, which
 * differ only in where the input and output buffers live. */
#ifndef KILN_BACKENDS_COLLECTIVE_H
#define KILN_BACKENDS_COLLECTIVE_H

#include "base/status.h"
#include "dist/dist.h"
#include "ir/graph.h"

/* A collective as compiled: the call without its buffers, the node's shape
 * and the user's line that traced it (for messages). */
typedef struct kiln_backend_coll {
  kiln_dist_call call;
  int rank;
  int64_t shape[KILN_MAX_RANK];
  kiln_loc loc;
} kiln_backend_coll;

/* Describe collective node n of g. */
void kiln_backend_coll_init(const kiln_graph *g, int32_t n, kiln_backend_coll *c);
/* Run it from in to out (out may equal in except for ALL_GATHER). Errors
 * name the op, its dtype and shape and the user's line. */
kiln_status kiln_backend_coll_run(const kiln_backend_coll *c, const void *in, void *out, kiln_err *err);
/* The same in two halves (the cpu executor overlaps kernels with it): start
 * (in and out must stay untouched until the wait; *h NULL when there is
 * nothing to wait for), then wait. */
kiln_status kiln_backend_coll_start(const kiln_backend_coll *c, const void *in, void *out, kiln_dist_handle **h,
                                    kiln_err *err);
kiln_status kiln_backend_coll_wait(const kiln_backend_coll *c, kiln_dist_handle *h, kiln_err *err);

#endif
