/* kiln/dist.h — processes working as one: data-parallel training over MPI
 * (docs/distributed.md).
 *
 * The same program runs alone or under a launcher (`mpirun -np N prog`,
 * Slurm's `srun`). Alone, it is rank 0 of a world of 1: the collectives are
 * the value itself, and MPI is never loaded. Launched in a world of N, the
 * first distributed call loads kiln's MPI module (libkiln_mpi.so) and
 * starts MPI; MPI is finalized when the process exits.
 *
 * The collectives are lazy ops like any other: they are recorded into the
 * step's graph, compiled and cached with it, and run by the backend when
 * the step runs. Every rank must trace the same collectives in the same
 * order (the same program on every rank does). The world size is part of
 * the graph: a graph traced for N ranks runs only in a world of N.
 *
 * Thread-safety: the world functions may be called from any thread; the op
 * builders and the DDP helpers from the tracing thread, like every op. */
#ifndef KILN_DIST_H
#define KILN_DIST_H

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Start the world (idempotent; the other calls start it on first use too).
 * Errors: KILN_ERR_UNSUPPORTED when launched by MPI but this kiln was built
 * without MPI or its module cannot be loaded (the message says what to
 * install); KILN_ERR_INTERNAL when MPI_Init fails. Sticky, with loc. */
#define kiln_dist_init() kiln_dist_init_at(KILN_HERE)
kiln_status kiln_dist_init_at(kiln_loc loc);
/* This process's rank in [0, world); 0 when run alone. */
int kiln_dist_rank(void);
/* The number of processes; 1 when run alone (or when starting failed: see
 * kiln_dist_init's status). */
int kiln_dist_world_size(void);

typedef enum kiln_reduce_op {
  KILN_REDUCE_SUM,
  KILN_REDUCE_MEAN, /* the sum divided by the world size (floats only) */
  KILN_REDUCE_MAX,
} kiln_reduce_op;

/* Every rank gets the elementwise reduction of t over the ranks (same
 * shape and dtype). Numbers only; bf16/f16 are refused (cast to f32:
 * MPI has no 16-bit float sum). Gradient: SUM's is the all-reduced SUM of
 * the incoming gradient (as in DDP), MEAN's its MEAN; MAX has none. */
#define kiln_all_reduce(t, op) kiln_all_reduce_at((t), (op), KILN_HERE)
kiln_tensor kiln_all_reduce_at(kiln_tensor t, kiln_reduce_op op, kiln_loc loc);
/* Rank root's t on every rank (t has the same shape and dtype on every
 * rank). Gradient: the gradients summed over the ranks on root, zero on the
 * others (a reduce to root). */
#define kiln_broadcast(t, root) kiln_broadcast_at((t), (root), KILN_HERE)
kiln_tensor kiln_broadcast_at(kiln_tensor t, int root, kiln_loc loc);
/* The ranks' t concatenated in rank order along axis (negative counts from
 * the end): that dim grows world times. Gradient: this rank's slice of the
 * gradient summed over the ranks (a reduce-scatter). */
#define kiln_all_gather(t, axis) kiln_all_gather_at((t), (axis), KILN_HERE)
kiln_tensor kiln_all_gather_at(kiln_tensor t, int axis, kiln_loc loc);

/* ───────────── data parallel (PyTorch DDP's recipe) ─────────────
 *
 *     kiln_ddp_broadcast_params(n, params);          // once, after init
 *     for (...) {
 *       kiln_backward(loss);                          // loss: the mean over this rank's batch
 *       kiln_ddp_all_reduce_grads(n, params, 0);      // grads := their mean over the ranks
 *       kiln_optim_step(...); kiln_mark_step();
 *     }
 *
 * With the loader sharded by rank (kiln_batch_options.shard_*), N ranks
 * with per-rank batch B/N compute the update one process computes with
 * batch B (within floating-point reassociation). */

/* Make every parameter rank 0's value (kiln_assign of a broadcast).
 * A world of 1: nothing to do. INVALID_ARGUMENT for a bad handle. */
#define kiln_ddp_broadcast_params(n, params) kiln_ddp_broadcast_params_at((n), (params), KILN_HERE)
kiln_status kiln_ddp_broadcast_params_at(int n, const kiln_tensor *params, kiln_loc loc);
/* After kiln_backward: replace each parameter's gradient by its mean over
 * the ranks. Gradients are packed into buckets of about bucket_bytes
 * (0: 25 MiB, PyTorch DDP's default), taken in reverse parameter order (the
 * order backward produces them), one all-reduce per bucket, the results
 * unpacked into the gradients (kiln_assign); bf16/f16 gradients are summed
 * and divided in f32, rounded once. Parameters without a gradient
 * are skipped (on every rank alike: a parameter has a gradient on one rank
 * only if it has on all, for the same program). A world of 1: nothing.
 * INVALID_ARGUMENT for a bad handle (in a world of 1 too). */
#define kiln_ddp_all_reduce_grads(n, params, bucket_bytes) \
  kiln_ddp_all_reduce_grads_at((n), (params), (bucket_bytes), KILN_HERE)
kiln_status kiln_ddp_all_reduce_grads_at(int n, const kiln_tensor *params, size_t bucket_bytes, kiln_loc loc);

#ifdef __cplusplus
}
#endif
#endif /* KILN_DIST_H */
