/* kiln's MPI module, libkiln_mpi.so (module.h): the only code of kiln that
 * includes mpi.h and links libmpi. Built by cmake/dist.cmake when MPI is
 * found; loaded by dist.c on first use. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dist/module.h"
#include "kiln/kiln.h"

static int fail(int rc, const char *what, char *msg, size_t cap) {
  char e[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, e, &n) != MPI_SUCCESS) snprintf(e, sizeof e, "MPI error %d", rc);
  snprintf(msg, cap, "%s: %s", what, e);
  return -1;
}

static int m_init(int *rank, int *world, char *msg, size_t cap) {
  int inited = 0, provided = 0, rc;
  MPI_Initialized(&inited);
  if (!inited) {
    rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Init_thread", msg, cap);
    if (provided < MPI_THREAD_SERIALIZED) {
      snprintf(msg, cap, "MPI_Init_thread: this MPI provides thread level %d, kiln needs MPI_THREAD_SERIALIZED",
               provided);
      return -1;
    }
  }
  /* errors come back as codes, never abort the job from inside a call */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, world);
  return 0;
}

static MPI_Datatype mpi_type(int dt, size_t *size) {
  switch (dt) {
    case KILN_F32: *size = 4; return MPI_FLOAT;
    case KILN_F64: *size = 8; return MPI_DOUBLE;
    case KILN_I32: *size = 4; return MPI_INT32_T;
    case KILN_I64: *size = 8; return MPI_INT64_T;
    case KILN_U8: *size = 1; return MPI_UINT8_T;
    case KILN_I8: *size = 1; return MPI_INT8_T;
    default: *size = 0; return MPI_DATATYPE_NULL;
  }
}

static int m_all_reduce(const void *in, void *out, int64_t count, int dt, int reduce, char *msg, size_t cap) {
  size_t es;
  MPI_Datatype t = mpi_type(dt, &es);
  if (t == MPI_DATATYPE_NULL) {
    snprintf(msg, cap, "all_reduce: dtype %d has no MPI type", dt);
    return -1;
  }
  MPI_Op op = reduce == 1 ? MPI_MAX : MPI_SUM;
  for (int64_t at = 0; at < count;) { /* MPI counts are int */
    int n = count - at > INT_MAX / 2 ? INT_MAX / 2 : (int)(count - at);
    const char *src = (const char *)in + (size_t)at * es;
    char *dst = (char *)out + (size_t)at * es;
    int rc = MPI_Allreduce(src == dst ? MPI_IN_PLACE : src, dst, n, t, op, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Allreduce", msg, cap);
    at += n;
  }
  return 0;
}

static int m_broadcast(void *buf, size_t bytes, int root, char *msg, size_t cap) {
  for (size_t at = 0; at < bytes;) {
    int n = bytes - at > INT_MAX / 2 ? INT_MAX / 2 : (int)(bytes - at);
    int rc = MPI_Bcast((char *)buf + at, n, MPI_BYTE, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Bcast", msg, cap);
    at += (size_t)n;
  }
  return 0;
}

static int m_all_gather(const void *in, void *out, size_t bytes, char *msg, size_t cap) {
  if (bytes > (size_t)INT_MAX) {
    snprintf(msg, cap, "all_gather: %zu bytes per rank, more than MPI's int count", bytes);
    return -1;
  }
  int rc = MPI_Allgather(in, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Allgather", msg, cap);
}

static void m_finalize(void) {
  int inited = 0, done = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&done);
  if (inited && !done) MPI_Finalize();
}

static const kiln_mpi_ops k_ops = {KILN_MPI_ABI, m_init, m_all_reduce, m_broadcast, m_all_gather, m_finalize};

__attribute__((visibility("default"))) const kiln_mpi_ops *kiln_mpi_module(void) { return &k_ops; }
