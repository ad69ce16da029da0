/* The dist service (dist.h): the world, the MPI module loaded on first use,
 * and the collectives. */
#include "dist/dist.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/module.h"
#include "kiln/dist.h"

/* The world: one per process (a documented singleton), set once under
 * g_once; MPI calls are serialized under g_mu. */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const kiln_mpi_ops *g_ops;
static int g_rank, g_world = 1;
static kiln_status g_status = KILN_OK;
static char g_msg[1024];

/* The launcher's world size, read before MPI is loaded: Open MPI's
 * OMPI_COMM_WORLD_SIZE, else PMI_SIZE (MPICH, Slurm's PMI); a PMIx rank
 * alone means launched, size unknown (-1). 1 when run alone. */
static int launcher_world(void) {
  const kiln_config *c = kiln_cfg();
  const char *s = c->ompi_world_size ? c->ompi_world_size : c->pmi_size;
  if (s) {
    long v = strtol(s, NULL, 10);
    return v > 1 && v < (1L << 30) ? (int)v : 1;
  }
  return c->pmix_rank ? -1 : 1;
}

static void atexit_finalize(void) {
  pthread_mutex_lock(&g_mu);
  if (g_ops) g_ops->finalize();
  pthread_mutex_unlock(&g_mu);
}

static const kiln_mpi_ops *load_module(char *why, size_t cap) {
#ifdef KILN_MPI_MODULE_BUILD
  const char *cands[2] = {kiln_cfg()->mpi_lib, KILN_MPI_MODULE_BUILD};
  size_t n = 0;
  for (int i = 0; i < 2; i++) {
    if (!cands[i] || !*cands[i]) continue;
    /* RTLD_GLOBAL: Open MPI's own plugins resolve libmpi's symbols globally */
    void *h = dlopen(cands[i], RTLD_NOW | RTLD_GLOBAL);
    const char *e = NULL;
    if (h) {
      kiln_mpi_module_fn fn = (kiln_mpi_module_fn)dlsym(h, "kiln_mpi_module");
      const kiln_mpi_ops *ops = fn ? fn() : NULL;
      if (ops && ops->abi == KILN_MPI_ABI) return ops; /* kept open for the process's life */
      e = fn ? "it answered with another ABI" : "it has no kiln_mpi_module";
      dlclose(h);
    } else {
      e = dlerror();
    }
    if (n < cap) n += (size_t)snprintf(why + n, cap - n, "%s%s: %s", n ? "; " : "", cands[i], e ? e : "cannot load");
  }
  if (!n) snprintf(why, cap, "no module path");
  return NULL;
#else
  snprintf(why, cap,
           "this kiln was built without MPI: install libopenmpi-dev and openmpi-bin (scripts/install-deps.sh) and "
           "rebuild to run distributed");
  return NULL;
#endif
}

static void start_world(void) {
  int w = launcher_world();
  if (w == 1) return; /* alone: rank 0 of 1, no MPI */
  char why[768];
  const kiln_mpi_ops *ops = load_module(why, sizeof why);
  if (!ops) {
    g_status = KILN_ERR_UNSUPPORTED;
    snprintf(g_msg, sizeof g_msg, "dist: launched in a world of %s, but the MPI module is not available (%s)",
             w > 0 ? "several processes" : "PMIx processes", why);
    return;
  }
  char msg[512] = "";
  int rank = 0, world = 1;
  if (ops->init(&rank, &world, msg, sizeof msg) != 0) {
    g_status = KILN_ERR_INTERNAL;
    snprintf(g_msg, sizeof g_msg, "dist: starting MPI failed: %s", msg);
    return;
  }
  g_ops = ops;
  g_rank = rank;
  g_world = world;
  atexit(atexit_finalize);
}

kiln_status kiln_dist_world(kiln_loc loc, int *rank, int *world) {
  pthread_once(&g_once, start_world);
  *rank = g_rank;
  *world = g_world;
  if (g_status != KILN_OK) return kiln_error(g_status, loc, "%s", g_msg);
  return KILN_OK;
}

int kiln_dist_mpi_loaded(void) {
  pthread_once(&g_once, start_world);
  return g_ops != NULL;
}

/* ───────────── the public functions (kiln/dist.h) ───────────── */

kiln_status kiln_dist_init_at(kiln_loc loc) {
  int r, w;
  return kiln_dist_world(loc, &r, &w);
}

int kiln_dist_rank(void) {
  pthread_once(&g_once, start_world);
  return g_rank;
}

int kiln_dist_world_size(void) {
  pthread_once(&g_once, start_world);
  return g_world;
}

/* ───────────── collectives ───────────── */

/* ALL_GATHER with the axis not outermost: gather rank blocks [world][outer]
 * [blk] into tmp, then interleave into out [outer][world][blk]. */
static int gather_axis(const kiln_dist_call *c, char *msg, size_t cap) {
  size_t bytes = (size_t)c->count * c->elem, blk = bytes / (size_t)c->outer;
  if (c->outer == 1) return g_ops->all_gather(c->in, c->out, bytes, msg, cap);
  char *tmp = malloc(bytes * (size_t)c->world);
  if (!tmp) {
    snprintf(msg, cap, "out of memory (%zu bytes)", bytes * (size_t)c->world);
    return -1;
  }
  int rc = g_ops->all_gather(c->in, tmp, bytes, msg, cap);
  for (int64_t o = 0; rc == 0 && o < c->outer; o++)
    for (int w = 0; w < c->world; w++)
      memcpy((char *)c->out + ((size_t)o * (size_t)c->world + (size_t)w) * blk,
             tmp + (size_t)w * bytes + (size_t)o * blk, blk);
  free(tmp);
  return rc;
}

kiln_status kiln_dist_collective(const kiln_dist_call *c, kiln_err *err) {
  int rank, world;
  if (kiln_dist_world((kiln_loc){0}, &rank, &world) != KILN_OK)
    return kiln_err_set(err, g_status, "%s: %s", c->op, g_msg);
  if (world != c->world)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT,
                        "%s: the graph was traced for a world of %d processes but runs in a world of %d", c->op,
                        c->world, world);
  size_t bytes = (size_t)c->count * c->elem;
  if (world == 1) { /* alone: the value itself */
    if (c->out != c->in && bytes) memmove(c->out, c->in, bytes);
    return KILN_OK;
  }
  char msg[512] = "";
  int rc;
  pthread_mutex_lock(&g_mu);
  switch (c->kind) {
    case KILN_DIST_ALL_REDUCE: rc = g_ops->all_reduce(c->in, c->out, c->count, c->dtype, c->reduce, msg, sizeof msg); break;
    case KILN_DIST_BROADCAST:
      if (c->out != c->in && bytes) memcpy(c->out, c->in, bytes);
      rc = g_ops->broadcast(c->out, bytes, c->root, msg, sizeof msg);
      break;
    default: rc = gather_axis(c, msg, sizeof msg); break;
  }
  pthread_mutex_unlock(&g_mu);
  if (rc != 0)
    return kiln_err_set(err, KILN_ERR_INTERNAL, "%s of %lld elements on rank %d of %d: %s", c->op,
                        (long long)c->count, rank, world, msg);
  return KILN_OK;
}
