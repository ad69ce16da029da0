/* The dist service (docs/distributed.md): this process's rank and world,
 * and the collectives the backends execute. It sits beside the toolchain:
 * it needs only base; the backends call it to run a collective node, the
 * frontend asks it the world size when it traces one.
 *
 * MPI lives in its own module (module.h), loaded on the first call that
 * needs it, and only when a launcher (mpirun, srun with PMI/PMIx) started
 * this process in a world of more than one: a program run alone never
 * loads it, and its collectives are copies.
 *
 * Collectives run on one communication thread per process ("kiln
 * collectives", started with the world): kiln_dist_start queues a call and
 * returns at once, kiln_dist_wait waits for it, so the executor runs the
 * following kernels while a collective is in flight. Calls complete in the
 * order they were started. A collective that does not complete within
 * KILN_DIST_TIMEOUT seconds ends the job with a report of the ranks that
 * have not arrived (docs/distributed.md).
 *
 * Thread-safety: every function may be called from any thread; MPI calls
 * are serialized by one lock (the communication thread runs the
 * collectives, the tracing thread initializes). */
#ifndef KILN_DIST_DIST_H
#define KILN_DIST_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Start the world if a launcher made one (loading the MPI module), once per
 * process. *rank and *world: 0 and 1 when the program runs alone. An error
 * (module missing, MPI_Init failed) is recorded as the sticky status with
 * loc and returned on every later call. */
kiln_status kiln_dist_world(kiln_loc loc, int *rank, int *world);

typedef enum kiln_dist_kind { KILN_DIST_ALL_REDUCE, KILN_DIST_BROADCAST, KILN_DIST_ALL_GATHER } kiln_dist_kind;

/* One collective as a backend runs it. */
typedef struct kiln_dist_call {
  kiln_dist_kind kind;
  int dtype;      /* kiln_dtype */
  size_t elem;    /* bytes per element */
  int reduce;     /* ALL_REDUCE: 0 sum, 1 max */
  int root;       /* BROADCAST */
  int world;      /* the world size the graph was traced for */
  const void *in; /* count elements */
  void *out;      /* count elements (ALL_GATHER: world x count); may equal in except for ALL_GATHER */
  int64_t count;
  int64_t outer;  /* ALL_GATHER: the product of the dims before the axis (out is [outer, world, count/outer]) */
  const char *op; /* the op's name, for messages */
  const char *name; /* interned, for profiles and the timeout report: "all_reduce f32 [1024] at
                     * train.c:88" (the same on every rank); NULL: op */
} kiln_dist_call;

/* Run c and wait for it (kiln_dist_start + kiln_dist_wait). Errors
 * (KILN_ERR_UNSUPPORTED, KILN_ERR_INTERNAL for an MPI failure) name the op,
 * the element count and the world. */
kiln_status kiln_dist_collective(const kiln_dist_call *c, kiln_err *err);

/* Collective: every rank calls it at the same point, with no collective in
 * flight (the runtime, before a graph with collectives first runs). bytes
 * of memory that every rank of the node maps (module.h, shared_alloc), for
 * that graph's buffers, so that its all-reduces add in place in shared
 * memory; NULL when not available (alone, ranks on several nodes, no room
 * in /dev/shm, KILN_DIST_SHM=0, bytes 0): the buffers are private and the
 * all-reduces go through MPI. Freed when MPI is. */
void *kiln_dist_shared_alloc(size_t bytes);

/* A collective in flight. */
typedef struct kiln_dist_handle kiln_dist_handle;

/* Start c: checks it and queues it for the communication thread. c->in
 * and c->out must stay valid and untouched until kiln_dist_wait returns.
 * *out: the handle to wait on (NULL when nothing is left to wait for: a
 * world of 1 copies at once). Errors as kiln_dist_collective's. */
kiln_status kiln_dist_start(const kiln_dist_call *c, kiln_dist_handle **out, kiln_err *err);

/* Wait for h (NULL: at once) and free it; its error, if it failed. The
 * time waited is the metric CollectiveTime; start to completion is
 * CollectiveFlightTime. */
kiln_status kiln_dist_wait(kiln_dist_handle *h, kiln_err *err);

/* The step number this process is at (the timeout report and the SIGTERM
 * message name it): src/init/ calls it at every step marker. */
void kiln_dist_note_step(int64_t step);

/* Whether the MPI module is loaded in this process (tests: a program run
 * alone never loads it). */
int kiln_dist_mpi_loaded(void);

#endif
