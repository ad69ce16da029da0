/* kiln's MPI module, libkiln_mpi.so (module.h): the only code of kiln that
 * includes mpi.h and links libmpi. Built by cmake/dist.cmake when MPI is
 * found; loaded by dist.c on first use. */
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "dist/module.h"
#include "kiln/kiln.h"

enum { TAG_ASK = 1, TAG_ANSWER = 2 };
static MPI_Comm g_svc = MPI_COMM_NULL; /* status queries */
static MPI_Request g_ask_req = MPI_REQUEST_NULL;
static int g_ask;
static MPI_Op g_fmax = MPI_OP_NULL; /* MAX of floats: NaN propagates (fmax_op) */
static MPI_Op g_sum8 = MPI_OP_NULL; /* SUM of 8-bit integers, wrapping (sum8_op) */

/* MPI_MAX of floats is `a > b ? a : b` (Open MPI), so a NaN is kept or
 * dropped by the order of the operands, which differs between ranks: rank 0
 * got 2 and rank 1 NaN for max(NaN, 2), the ranks silently apart. This op
 * is kiln's `maximum`: a NaN on any rank gives NaN on every rank, and +0.0
 * wins over -0.0, so the result does not depend on the order. */
#define FMAX_LOOP(T)                                                     \
  do {                                                                   \
    const T *a = in;                                                     \
    T *b = inout;                                                        \
    for (int i = 0; i < *len; i++) {                                     \
      T x = a[i], y = b[i];                                              \
      if (isnan(y)) continue;                                            \
      if (isnan(x) || x > y || (x == y && signbit(y) && !signbit(x))) b[i] = x; \
    }                                                                    \
  } while (0)
static void fmax_op(void *in, void *inout, int *len, MPI_Datatype *t) {
  if (*t == MPI_DOUBLE) FMAX_LOOP(double);
  else FMAX_LOOP(float);
}

/* MPI_SUM of MPI_UINT8_T / MPI_INT8_T saturates in Open MPI 4.1's AVX
 * reductions (op/avx, 16 or more elements): 200 + 100 gave 255 where u8
 * arithmetic (kiln's, NumPy's, PyTorch's) wraps to 44. This op adds modulo
 * 2^8, the same bits for both types. */
static void sum8_op(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  const uint8_t *a = in;
  uint8_t *b = inout;
  for (int i = 0; i < *len; i++) b[i] = (uint8_t)(a[i] + b[i]);
}

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
  rc = MPI_Op_create(fmax_op, 1, &g_fmax);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Op_create", msg, cap);
  rc = MPI_Op_create(sum8_op, 1, &g_sum8);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Op_create", msg, cap);
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

/* ── shared windows: a step's buffers that every rank of the node maps ──
 * (docs/distributed.md, "The all-reduce in shared memory"). A bucket of
 * gradients that lives in one is summed in place: each rank adds its share
 * of the elements over every rank's copy, in rank order, and writes the sum
 * into every copy; 2 x the bucket of memory traffic per rank, against about
 * 3.5 x for MPI_Allreduce's copies between private buffers. */
enum { SHM_MAX = 16 };
#define SHM_BUDGET ((size_t)4 << 30) /* bytes of this rank's windows, all together */
typedef struct shm_win {
  MPI_Win win;
  char **base;  /* every rank's memory, in this process's address space */
  size_t *size; /* and its bytes; NULL or all 0: not used */
  int locked;   /* MPI_Win_lock_all done */
} shm_win;
static shm_win g_win[SHM_MAX];
static int g_nwin;   /* windows made: the same on every rank */
static int g_shm_on; /* every rank made its first window: the same on every rank */
static size_t g_shm_bytes;
static int g_node = -1; /* 1: the whole world shares one node */

static int world_on_one_node(void) {
  if (g_node >= 0) return g_node;
  MPI_Comm node;
  int n = 0, w = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return g_node = 0;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  int mine = n == w, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return g_node = all;
}

static int m_shared_alloc(size_t bytes, void **out, char *msg, size_t cap) {
  *out = NULL;
  if (!world_on_one_node()) return 0;
  int w = 0, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  /* Open MPI's shared windows are files of /dev/shm: a page that does not
   * fit there would fault (SIGBUS) when first touched, so ask for room for
   * every rank's bytes twice over, and every rank must have it */
  unsigned long long want = bytes, total = 0;
  MPI_Allreduce(&want, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  struct statvfs sv;
  int ok = g_nwin < SHM_MAX && bytes <= SHM_BUDGET - g_shm_bytes && statvfs("/dev/shm", &sv) == 0 &&
           (double)sv.f_bavail * (double)sv.f_frsize >= 2.0 * (double)total;
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all || !total) return 0;
  shm_win *sw = &g_win[g_nwin];
  sw->base = calloc((size_t)w, sizeof *sw->base);
  sw->size = calloc((size_t)w, sizeof *sw->size);
  char *mine = NULL;
  /* 64 bytes more, each rank's part taken from its first 64-byte boundary
   * (the window's parts start wherever the MPI puts them; a page maps at
   * the same offset in every process, so every rank finds the same one) */
  int rc = MPI_Win_allocate_shared((MPI_Aint)(bytes ? bytes + 64 : 0), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mine,
                                   &sw->win);
  if (rc != MPI_SUCCESS) { /* still in the agreement below, so that no rank waits for this one */
    free(sw->base);
    free(sw->size);
    fail(rc, "MPI_Win_allocate_shared", msg, cap);
    MPI_Allreduce(&(int){0}, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return -1;
  }
  g_nwin++;
  ok = sw->base && sw->size;
  for (int k = 0; k < w && ok; k++) {
    MPI_Aint sz = 0;
    int du = 0;
    void *b = NULL;
    ok = MPI_Win_shared_query(sw->win, k, &sz, &du, &b) == MPI_SUCCESS;
    if (ok && sz >= 64) {
      size_t skip = (64 - (uintptr_t)b % 64) % 64;
      sw->base[k] = (char *)b + skip;
      sw->size[k] = (size_t)sz - 64;
    }
  }
  ok = ok && MPI_Win_lock_all(MPI_MODE_NOCHECK, sw->win) == MPI_SUCCESS;
  sw->locked = ok;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) { /* kept (freeing is collective too), never used */
    if (sw->size) memset(sw->size, 0, sizeof *sw->size * (size_t)w);
    return 0;
  }
  g_shm_on = 1;
  g_shm_bytes += bytes;
  *out = bytes ? sw->base[r] : NULL;
  return 0;
}

#define SHM_SUM(T, U)                                                                      \
  do {                                                                                     \
    if (w == 2) {                                                                          \
      T *restrict a = (T *)(sw->base[0] + off), *restrict b = (T *)(sw->base[1] + off);    \
      for (int64_t i = lo; i < hi; i++) {                                                  \
        T v = (T)((U)a[i] + (U)b[i]);                                                      \
        a[i] = v;                                                                          \
        b[i] = v;                                                                          \
      }                                                                                    \
    } else {                                                                               \
      for (int64_t i = lo; i < hi; i++) {                                                  \
        U v = (U)((T *)(sw->base[0] + off))[i];                                            \
        for (int k = 1; k < w; k++) v = (U)(T)(v + (U)((T *)(sw->base[k] + off))[i]);      \
        for (int k = 0; k < w; k++) ((T *)(sw->base[k] + off))[i] = (T)v;                  \
      }                                                                                    \
    }                                                                                      \
  } while (0)

/* 1: summed in place through shared memory; 0: not this call (MPI's turn);
 * -1: an MPI error */
static int shm_all_reduce(void *buf, int64_t count, int dt, int reduce, size_t es, char *msg, size_t cap) {
  int w = 0, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  /* what this rank says about its all-reduce: window, offset, count, dtype,
   * op; the ranks add in shared memory when every rank says the same and
   * has a window (min = max of every field), else MPI_Allreduce */
  int64_t v[5] = {-1, 0, count, dt, reduce}, lo5[5], hi5[5];
  int kind_ok = reduce == 0 && (dt == KILN_F32 || dt == KILN_F64 || dt == KILN_I32 || dt == KILN_I64);
  for (int k = 0; k < g_nwin && kind_ok && v[0] < 0; k++) {
    const shm_win *sw = &g_win[k];
    if (!sw->base || !sw->size) continue;
    uintptr_t p = (uintptr_t)buf, b = (uintptr_t)sw->base[r];
    size_t n = sw->size[r];
    if (n && p >= b && p - b <= n && (size_t)count * es <= n - (p - b)) {
      v[0] = k;
      v[1] = (int64_t)(p - b);
    }
  }
  int rc = MPI_Allreduce(v, lo5, 5, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(v, hi5, 5, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return fail(rc, "MPI_Allreduce", msg, cap);
  if (lo5[0] < 0 || memcmp(lo5, hi5, sizeof lo5) != 0) return 0;
  const shm_win *sw = &g_win[v[0]];
  int64_t off = v[1], lo = count * r / w, hi = count * (r + 1) / w;
  MPI_Win_sync(sw->win); /* the other ranks' stores, made before they arrived */
  switch (dt) {
    case KILN_F32: SHM_SUM(float, float); break;
    case KILN_F64: SHM_SUM(double, double); break;
    case KILN_I32: SHM_SUM(int32_t, uint32_t); break;
    default: SHM_SUM(int64_t, uint64_t); break;
  }
  MPI_Win_sync(sw->win);
  rc = MPI_Barrier(MPI_COMM_WORLD); /* every share written into every copy */
  MPI_Win_sync(sw->win);
  return rc == MPI_SUCCESS ? 1 : fail(rc, "MPI_Barrier", msg, cap);
}

static int m_all_reduce(const void *in, void *out, int64_t count, int dt, int reduce, int *shared, char *msg,
                        size_t cap) {
  size_t es;
  *shared = 0;
  MPI_Datatype t = mpi_type(dt, &es);
  if (t == MPI_DATATYPE_NULL) {
    snprintf(msg, cap, "all_reduce: dtype %d has no MPI type", dt);
    return -1;
  }
  if (g_shm_on) {
    int rc = shm_all_reduce(in == out ? out : NULL, in == out ? count : 0, dt, reduce, es, msg, cap);
    if (rc != 0) {
      *shared = rc == 1;
      return rc == 1 ? 0 : -1;
    }
  }
  MPI_Op op = reduce != 1 ? (es == 1 ? g_sum8 : MPI_SUM) : dt == KILN_F32 || dt == KILN_F64 ? g_fmax : MPI_MAX;
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
  if (g_fmax != MPI_OP_NULL) MPI_Op_free(&g_fmax);
  if (g_sum8 != MPI_OP_NULL) MPI_Op_free(&g_sum8);
  for (int k = 0; k < g_nwin; k++) {
    if (g_win[k].locked) MPI_Win_unlock_all(g_win[k].win);
    MPI_Win_free(&g_win[k].win);
    free(g_win[k].base);
    free(g_win[k].size);
  }
  g_nwin = 0;
  MPI_Finalize();
}

static const kiln_mpi_ops k_ops = {KILN_MPI_ABI, m_init,  m_arrive, m_all_reduce, m_broadcast,     m_all_gather,
                                   m_serve,      m_query, m_abort,  m_finalize,   m_shared_alloc};

__attribute__((visibility("default"))) const kiln_mpi_ops *kiln_mpi_module(void) { return &k_ops; }
