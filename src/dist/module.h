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

#define KILN_MPI_ABI 1

typedef struct kiln_mpi_ops {
  int abi; /* KILN_MPI_ABI */
  int (*init)(int *rank, int *world, char *msg, size_t cap);
  /* reduce: 0 sum, 1 max; dt a number dtype with an MPI type (not bf16/f16) */
  int (*all_reduce)(const void *in, void *out, int64_t count, int dt, int reduce, char *msg, size_t cap);
  int (*broadcast)(void *buf, size_t bytes, int root, char *msg, size_t cap);
  /* out = the ranks' `bytes` bytes, in rank order */
  int (*all_gather)(const void *in, void *out, size_t bytes, char *msg, size_t cap);
  void (*finalize)(void);
} kiln_mpi_ops;

/* The module's one exported symbol. */
typedef const kiln_mpi_ops *(*kiln_mpi_module_fn)(void);

#endif
