/* Parameter lists, dropout and the stateless helpers of the nn layers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/api.h"
#include "kiln/autograd.h"
#include "nn/nn_internal.h"

void kiln_nn_add(kiln_module *m, const char *name, kiln_tensor t, int is_buffer) {
  /* The layers add a fixed, small number of entries: overflow is a kiln bug. */
  if (m->n >= KILN_MODULE_MAX_ENTRIES) return;
  snprintf(m->names[m->n], KILN_MODULE_NAME_MAX, "%s", name);
  m->tensors[m->n] = t;
  m->is_buffer[m->n] = (unsigned char)(is_buffer != 0);
  m->n++;
}

void kiln_nn_add_sub(kiln_module *m, const char *prefix, const kiln_module *sub) {
  for (int i = 0; i < sub->n; i++) {
    char name[2 * KILN_MODULE_NAME_MAX + 2];
    snprintf(name, sizeof name, "%s.%s", prefix, sub->names[i]);
    kiln_nn_add(m, name, sub->tensors[i], sub->is_buffer[i]);
  }
}

int kiln_nn_list(int n, const char *names_base, size_t name_stride, const kiln_tensor *tensors,
                 const unsigned char *is_buffer, int with_buffers, const char **names, kiln_tensor *out, int max) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (is_buffer[i] && !with_buffers) continue;
    if (k < max) {
      if (names) names[k] = names_base + (size_t)i * name_stride;
      if (out) out[k] = tensors[i];
    }
    k++;
  }
  return k;
}

/* kiln_module is a public struct: a program may hand in one it filled (or
 * corrupted) itself. Its count must index the fixed arrays. */
static int module_ok(const kiln_module *m, const char *fn) {
  if (m->n >= 0 && m->n <= KILN_MODULE_MAX_ENTRIES) return 1;
  kiln_error(KILN_ERR_INVALID_ARGUMENT, (kiln_loc){NULL, 0},
             "%s: module has %d entries (0 to %d): not a module of kiln's", fn, m->n, KILN_MODULE_MAX_ENTRIES);
  return 0;
}

static int list(const kiln_module *m, int with_buffers, const char **names, kiln_tensor *out, int max) {
  if (!m) return -1;
  if (!module_ok(m, with_buffers ? "kiln_module_state" : "kiln_module_params")) return -1;
  return kiln_nn_list(m->n, m->names[0], sizeof m->names[0], m->tensors, m->is_buffer, with_buffers, names, out,
                      max);
}

int kiln_module_params(const kiln_module *m, const char **names, kiln_tensor *out, int max) {
  return list(m, 0, names, out, max);
}

int kiln_module_state(const kiln_module *m, const char **names, kiln_tensor *out, int max) {
  return list(m, 1, names, out, max);
}

void kiln_module_zero_grad(const kiln_module *m) {
  if (!m || !module_ok(m, "kiln_module_zero_grad")) return;
  for (int i = 0; i < m->n; i++) kiln_zero_grad(m->tensors[i]);
}

void kiln_module_release(kiln_module *m) {
  if (!m || !module_ok(m, "kiln_module_release")) return;
  for (int i = 0; i < m->n; i++) kiln_release(m->tensors[i]);
  m->n = 0;
}

kiln_status kiln_nn_create_check(const kiln_module *m, const char *op, kiln_loc loc) {
  for (int i = 0; i < m->n; i++) {
    if (kiln_is_valid(m->tensors[i])) continue;
    /* The op that poisoned it (e.g. rand: a shape too large) recorded why. */
    kiln_status s = kiln_last_status();
    kiln_error(s != KILN_OK ? s : KILN_ERR_INTERNAL, loc, "%s: could not create parameter %s", op, m->names[i]);
    return s != KILN_OK ? s : KILN_ERR_INTERNAL;
  }
  return KILN_OK;
}

uint64_t kiln_nn_seed(uint64_t seed, uint64_t k) {
  /* SplitMix64 over a mix of both: the in-graph RNG is linear in the seed,
   * so sub-streams must not be seed + k. */
  uint64_t z = seed ^ (k * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

kiln_tensor kiln_nn_uniform(int rank, const int64_t *shape, double bound, uint64_t seed, kiln_loc loc) {
  kiln_tensor u = kiln_rand_at(KILN_RAND_UNIFORM, KILN_F32, rank, shape, seed, loc);
  /* u·2b − b: U(-b, b) */
  return kiln_param(kiln_sub_c_at(kiln_mul_c_at(u, 2.0 * bound, loc), bound, loc));
}

kiln_tensor kiln_nn_fill(int rank, const int64_t *shape, double v, kiln_loc loc) {
  /* Uploaded, not kiln_full: a kept constant stays a constant node, so the
   * first training step would fold it and compile a graph of its own. */
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  float *h = malloc((size_t)n * sizeof *h + 1);
  if (!h) return kiln_param(kiln_full_at(KILN_F32, rank, shape, v, loc));
  for (int64_t i = 0; i < n; i++) h[i] = (float)v;
  kiln_tensor t = kiln_param(kiln_from_host_at(h, KILN_F32, rank, shape, loc));
  free(h);
  return t;
}

int kiln_nn_check_inputs(const char *op, kiln_loc loc, kiln_tensor *out, int nreq, int n, const kiln_tensor *ts) {
  kiln_frontend *fe = NULL;
  for (int i = 0; i < n; i++) {
    if (i >= nreq && ts[i].index == 0 && ts[i].gen == 0) continue;
    if (!fe && !(fe = kiln_api_frontend_at(loc))) {
      *out = (kiln_tensor){0, 0}; /* kiln could not start, or another thread traces: recorded */
      return 1;
    }
    kiln_tslot *s = kiln_fe_slot(fe, ts[i], op, loc); /* records the stale-handle error */
    if (!s || s->poisoned) {
      *out = kiln_fe_poison(fe, loc);
      return 1;
    }
  }
  return 0;
}

kiln_tensor kiln_dropout_at(kiln_tensor x, double p, uint64_t seed, bool training, kiln_loc loc) {
  if (!(p >= 0.0 && p < 1.0)) return kiln_nn_fail(loc, "dropout: p = %g is outside [0, 1)", p);
  KILN_NN_CHECK("dropout", loc, 1, x);
  int64_t shape[KILN_MAX_RANK];
  int rank = kiln_shape(x, shape);
  if (rank < 0) return kiln_nn_fail(loc, "dropout: invalid input tensor");
  /* nothing dropped: still a tensor of its own (a reshape to its own shape
   * adds no node), as every op returns, so releasing or assigning one leaves
   * the other alone */
  if (!training || p == 0.0) return kiln_reshape_at(x, rank, shape, loc);
  kiln_dtype dt = kiln_dtype_of(x);
  if (dt != KILN_F32 && dt != KILN_F64) dt = KILN_F32;
  /* The seed is a graph input of the RANDOM node: a new one never recompiles. */
  kiln_tensor keep = kiln_ge_c_at(kiln_rand_at(KILN_RAND_UNIFORM, dt, rank, shape, seed, loc), p, loc);
  /* the zero in the scaled value's dtype: an f32 zero made a bf16 x's
   * dropout f32 (torch keeps the input's dtype) */
  kiln_tensor scaled = kiln_mul_c_at(x, 1.0 / (1.0 - p), loc);
  kiln_tensor zero = kiln_constant_at(kiln_dtype_of(scaled), 0.0, loc);
  return kiln_where_at(keep, scaled, zero, loc);
}
