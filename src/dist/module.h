/* The ABI between kiln (dist.c) and its MPI module (libkiln_mpi.so, built
 * from mpi_impl.c, the one file of kiln that includes mpi.h and links
 * libmpi). dist.c dlopens the module on the first distributed call, so a
 * program that never goes distributed neither links nor loads MPI.
 *
 * Every function returns 0 or non-zero with a message in msg[0..cap).
 * Counts are elements of kiln dtype `dt` (kiln_dtype of kiln/kiln.h); the
 * module splits counts beyond MPI's int. Called under dist.c's lock: MPI
 * sees one calling thread at a time (MPI_THREAD_SERIALIZED). */
#ifndef KILN_DIST_MODULE_H
#define KILN_DIST_MODULE_H

#include <stddef.h>
#include <stdint.h>

#define KILN_MPI_ABI 3

/* How a call waits: the arrival barrier and status queries are started
 * nonblocking and tested; between tests the module calls idle(ctx), which
 * sleeps a little (so a waiting rank does not burn a core), answers other
 * ranks' status queries and returns non-zero to give up (the deadline
 * passed). A call that gives up returns 1 and leaves its request pending:
 * the caller then ends the job (abort). */
typedef struct kiln_mpi_poll {
  int (*idle)(void *ctx);
  void *ctx;
} kiln_mpi_poll;

/* What a rank says about itself when another rank asks (the timeout
 * report): its collectives started so far, its step, and its last
 * collective ("all_reduce f32 [4] at train.c:88", NUL-terminated). */
typedef struct kiln_mpi_peer {
  int64_t seq;  /* collectives started */
  int64_t step; /* step markers passed */
  int64_t busy; /* 1: waiting in collective number seq */
  char last[232];
} kiln_mpi_peer;

typedef struct kiln_mpi_ops {
  int abi; /* KILN_MPI_ABI */
  int (*init)(int *rank, int *world, char *msg, size_t cap);
  /* Wait until every rank has arrived at the next collective (a barrier,
   * polled): 0, 1 (gave up), -1 (an MPI error: msg). The collective itself
   * then runs with the library's blocking call (its fastest algorithm):
   * every rank is in it, so only a rank dying mid-way can stall it, and
   * the launcher then stops the job. */
  int (*arrive)(const kiln_mpi_poll *p, char *msg, size_t cap);
  /* reduce: 0 sum, 1 max; dt a number dtype with an MPI type (not bf16/f16).
   * In place (in == out) on memory of shared_alloc, on every rank at the
   * same offset, the ranks add through shared memory instead of MPI's
   * copies (*shared = 1); otherwise MPI_Allreduce (*shared = 0). */
  int (*all_reduce)(const void *in, void *out, int64_t count, int dt, int reduce, int *shared, char *msg,
                    size_t cap);
  int (*broadcast)(void *buf, size_t bytes, int root, char *msg, size_t cap);
  /* out = the ranks' `bytes` bytes, in rank order */
  int (*all_gather)(const void *in, void *out, size_t bytes, char *msg, size_t cap);
  /* Answer the status queries other ranks sent (nonblocking). */
  void (*serve)(const kiln_mpi_peer *mine);
  /* Ask rank `peer` for its status: 0 answered (*out), 1 gave up. */
  int (*query)(int peer, kiln_mpi_peer *out, const kiln_mpi_poll *p);
  /* End the whole job (MPI_Abort): the other ranks may be blocked in MPI. */
  void (*abort)(int code);
  void (*finalize)(void);
  /* Collective (every rank calls it at the same point of its program, with
   * nothing else in flight): `bytes` of memory that every rank of the node
   * can read and write (an MPI-3 shared window), for a step's buffers so
   * that all_reduce adds in place. *out = NULL (and 0 returned) when not
   * available: world not on one node, bytes 0 on this rank, the shared
   * memory file system short of room, or the window budget spent. Freed
   * only at finalize. */
  int (*shared_alloc)(size_t bytes, void **out, char *msg, size_t cap);
} kiln_mpi_ops;

/* The module's one exported symbol. */
typedef const kiln_mpi_ops *(*kiln_mpi_module_fn)(void);

#endif
