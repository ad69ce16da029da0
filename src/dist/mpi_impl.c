/* kiln's MPI module, libkiln_mpi.so (module.h): the only code of kiln that
 * includes mpi.h and links libmpi. Built by cmake/dist.cmake when MPI is
 * found; loaded by dist.c on first use. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dist/module.h"
#include "kiln/kiln.h"

enum { TAG_ASK = 1, TAG_ANSWER = 2 };
static MPI_Comm g_svc = MPI_COMM_NULL; /* status queries */
static MPI_Request g_ask_req = MPI_REQUEST_NULL;
static int g_ask;

static int fail(int rc, const char *what, char *msg, size_t cap) {
  char e[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, e, &n) != MPI_SUCCESS) snprintf(e, sizeof e, "MPI error %d", rc);
  /* "what: e", cut to cap (copied, not printed: callers pass short buffers) */
  size_t k = 0;
  for (const char *parts[3] = {what, ": ", e}, **p = parts; p < parts + 3; p++)
    for (const char *c = *p; *c && k + 1 < cap; c++) msg[k++] = *c;
  if (cap) msg[k] = 0;
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
  /* status queries (the timeout report) travel on a communicator of their
   * own, so they never match the collectives' or the program's messages */
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_svc);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Comm_dup", msg, cap);
  MPI_Comm_set_errhandler(g_svc, MPI_ERRORS_RETURN);
  rc = MPI_Irecv(&g_ask, 1, MPI_INT, MPI_ANY_SOURCE, TAG_ASK, g_svc, &g_ask_req);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Irecv", msg, cap);
  return 0;
}

/* Test r until it completes (0) or p gives up (1); -1: an MPI error. */
static int poll_req(MPI_Request *r, const kiln_mpi_poll *p, const char *what, char *msg, size_t cap) {
  for (;;) {
    int done = 0, rc = MPI_Test(r, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return fail(rc, what, msg, cap);
    if (done) return 0;
    if (p && p->idle(p->ctx)) return 1;
  }
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

/* Every rank has arrived at this collective: a barrier tested until it
 * completes (0) or p gives up (1: a rank has not arrived in time). */
static int m_arrive(const kiln_mpi_poll *p, char *msg, size_t cap) {
  MPI_Request r;
  int rc = MPI_Ibarrier(MPI_COMM_WORLD, &r);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Ibarrier", msg, cap);
  return poll_req(&r, p, "MPI_Ibarrier", msg, cap);
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

/* A query is one int (the asker's rank); the answer a kiln_mpi_peer as bytes. */
static void m_serve(const kiln_mpi_peer *mine) {
  for (int k = 0; k < 64 && g_ask_req != MPI_REQUEST_NULL; k++) {
    int done = 0;
    MPI_Status st;
    if (MPI_Test(&g_ask_req, &done, &st) != MPI_SUCCESS || !done) return;
    /* small: sent eagerly, never waits on the asker */
    MPI_Send(mine, (int)sizeof *mine, MPI_BYTE, st.MPI_SOURCE, TAG_ANSWER, g_svc);
    if (MPI_Irecv(&g_ask, 1, MPI_INT, MPI_ANY_SOURCE, TAG_ASK, g_svc, &g_ask_req) != MPI_SUCCESS) return;
  }
}

static int m_query(int peer, kiln_mpi_peer *out, const kiln_mpi_poll *p) {
  static int me; /* the message's content is not read */
  MPI_Request rq[2];
  char msg[64];
  if (MPI_Isend(&me, 1, MPI_INT, peer, TAG_ASK, g_svc, &rq[0]) != MPI_SUCCESS) return 1;
  if (MPI_Irecv(out, (int)sizeof *out, MPI_BYTE, peer, TAG_ANSWER, g_svc, &rq[1]) != MPI_SUCCESS) return 1;
  if (poll_req(&rq[1], p, "MPI_Irecv", msg, sizeof msg) != 0) return 1;
  out->last[sizeof out->last - 1] = 0;
  return poll_req(&rq[0], p, "MPI_Isend", msg, sizeof msg) < 0;
}

static void m_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static void m_finalize(void) {
  int inited = 0, done = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&done);
  if (!inited || done) return;
  if (g_ask_req != MPI_REQUEST_NULL) {
    MPI_Cancel(&g_ask_req);
    MPI_Wait(&g_ask_req, MPI_STATUS_IGNORE);
  }
  if (g_svc != MPI_COMM_NULL) MPI_Comm_free(&g_svc);
  MPI_Finalize();
}

static const kiln_mpi_ops k_ops = {KILN_MPI_ABI, m_init,  m_arrive, m_all_reduce, m_broadcast, m_all_gather,
                                   m_serve,      m_query, m_abort,  m_finalize};

__attribute__((visibility("default"))) const kiln_mpi_ops *kiln_mpi_module(void) { return &k_ops; }
