/* Shuffled fixed-shape batching. Every batch has shape [B, ...] so a
 * training step traced over it compiles once: the last partial batch is
 * padded (mask 0) or dropped, never a smaller shape. */
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "data/data_internal.h"

/* Unbiased-enough draw in [0, bound): the high half of a 64x64 product
 * (Lemire); the bias is < bound / 2^64, far below anything observable. */
static int64_t draw_below(uint64_t seed, uint64_t k, int64_t bound) {
  return (int64_t)(((unsigned __int128)kiln_rng_bits(seed, k) * (uint64_t)bound) >> 64);
}

void kiln_data_permutation(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int64_t *perm) {
  if (n > 0 && !perm) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, (kiln_loc){0, 0}, "kiln_data_permutation: perm is NULL (n = %lld)",
               (long long)n);
    return;
  }
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  if (!shuffle || n < 2) return; /* n - 1 below: INT64_MIN - 1 would wrap */
  /* Fisher–Yates; step i uses counter i of stream (seed + epoch), so the
   * order is a pure function of (n, seed, epoch). */
  uint64_t s = seed + (uint64_t)epoch;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = draw_below(s, (uint64_t)i, i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

kiln_status kiln_batch_plan_init(kiln_batch_plan *p, const kiln_dataset *ds, const kiln_batch_options *o,
                                 const char *who, kiln_loc loc) {
  if (!ds || !o) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: %s is NULL", who, ds ? "options" : "dataset");
  if (o->batch_size <= 0 || o->batch_size > ((int64_t)1 << 31))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: batch_size %lld must be in 1..2^31", who,
                      (long long)o->batch_size);
  if (ds->ex_rank + 1 > KILN_MAX_RANK)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: examples of rank %d leave no room for the batch axis", who,
                      ds->ex_rank);
  int shards = o->shard_count > 1 ? o->shard_count : 1;
  if (o->shard_count < 0 || o->shard_rank < 0 || o->shard_rank >= shards)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: shard_rank %d is not in 0..%d (shard_count %d)", who,
                      o->shard_rank, shards - 1, o->shard_count);
  memset(p, 0, sizeof *p);
  p->ds = ds;
  p->opts = *o;
  p->n = ds->n / shards;
  int64_t b = o->batch_size;
  p->num_batches = o->drop_last ? p->n / b : (p->n + b - 1) / b;
  if (p->n == 0)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: %lld examples leave none for each of %d shards", who,
                      (long long)ds->n, shards);
  if (p->num_batches == 0)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "%s: drop_last with batch_size %lld > dataset size %lld leaves no batch", who, (long long)b,
                      (long long)p->n);
  p->rank = ds->ex_rank + 1;
  p->xshape[0] = b;
  memcpy(p->xshape + 1, ds->ex_shape, sizeof(int64_t) * (size_t)ds->ex_rank);
  return KILN_OK;
}

void kiln_batch_plan_permutation(const kiln_batch_plan *p, int64_t epoch, int64_t *perm) {
  kiln_data_permutation(p->ds->n, p->opts.shuffle, p->opts.seed, epoch, perm);
  int64_t w = p->opts.shard_count > 1 ? p->opts.shard_count : 1, r = p->opts.shard_rank;
  if (w == 1) return;
  for (int64_t j = 0; j < p->n; j++) perm[j] = perm[r + w * j]; /* r + w j >= j: in place */
}

int64_t kiln_batch_plan_gather(const kiln_batch_plan *p, const int64_t *perm, int64_t index, float *x, int64_t *y,
                               float *mask) {
  const kiln_dataset *ds = p->ds;
  int64_t b = p->opts.batch_size, first = index * b;
  int64_t valid = p->n - first < b ? p->n - first : b;
  size_t row = sizeof(float) * (size_t)ds->ex_numel;
  for (int64_t r = 0; r < valid; r++) {
    int64_t e = perm[first + r];
    memcpy((char *)x + (size_t)r * row, ds->x + e * ds->ex_numel, row);
    y[r] = ds->y[e];
    mask[r] = 1.0f;
  }
  /* Padding rows: zeros, label 0 (a valid class index, so a loss that
   * gathers by label stays in range), mask 0. */
  if (valid < b) memset((char *)x + (size_t)valid * row, 0, (size_t)(b - valid) * row);
  for (int64_t r = valid; r < b; r++) {
    y[r] = 0;
    mask[r] = 0.0f;
  }
  return valid;
}

struct kiln_batcher {
  kiln_batch_plan plan;
  int64_t *perm;       /* permutation of perm_epoch */
  int64_t perm_epoch;  /* -1: none yet */
  int64_t epoch, next; /* position of kiln_batcher_next */
  float *x, *mask;     /* staging for one batch */
  int64_t *y;
};

kiln_status kiln_batcher_create_at(const kiln_dataset *ds, const kiln_batch_options *opts, kiln_batcher **out,
                                   kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "batcher");
  kiln_batch_plan plan;
  kiln_status s = kiln_batch_plan_init(&plan, ds, opts, "batcher", loc);
  if (s != KILN_OK) return s;
  kiln_batcher *b = calloc(1, sizeof *b);
  if (!b) goto oom;
  b->plan = plan;
  b->perm_epoch = -1;
  int64_t bs = plan.opts.batch_size;
  b->perm = malloc(sizeof(int64_t) * (size_t)ds->n);
  int64_t xs = bs * ds->ex_numel;
  b->x = malloc(sizeof(float) * (size_t)(xs > 0 ? xs : 1));
  b->y = malloc(sizeof(int64_t) * (size_t)bs);
  b->mask = malloc(sizeof(float) * (size_t)bs);
  if (!b->perm || !b->x || !b->y || !b->mask) goto oom;
  *out = b;
  return KILN_OK;
oom:
  kiln_batcher_destroy(b);
  return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "batcher: out of memory");
}

void kiln_batcher_destroy(kiln_batcher *b) {
  if (!b) return;
  free(b->perm);
  free(b->x);
  free(b->y);
  free(b->mask);
  free(b);
}

int64_t kiln_batcher_num_batches(const kiln_batcher *b) { return b ? b->plan.num_batches : 0; }

int64_t kiln_batcher_fill_at(kiln_batcher *b, int64_t epoch, int64_t index, float *x, int64_t *y, float *mask,
                             kiln_loc loc) {
  if (!b || epoch < 0 || index < 0 || index >= b->plan.num_batches || !x || !y || !mask) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
               "batcher_fill: batch %lld of epoch %lld is out of range or a buffer is NULL", (long long)index,
               (long long)epoch);
    return -1;
  }
  if (b->perm_epoch != epoch) {
    kiln_batch_plan_permutation(&b->plan, epoch, b->perm);
    b->perm_epoch = epoch;
  }
  return kiln_batch_plan_gather(&b->plan, b->perm, index, x, y, mask);
}

int kiln_batcher_next_at(kiln_batcher *b, kiln_batch *out, kiln_loc loc) {
  if (!b || !out) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "batcher_next: %s is NULL", b ? "out" : "batcher");
    return -1;
  }
  memset(out, 0, sizeof *out);
  if (b->next >= b->plan.num_batches) {
    b->epoch++;
    b->next = 0;
    return 0;
  }
  int64_t valid = kiln_batcher_fill_at(b, b->epoch, b->next, b->x, b->y, b->mask, loc);
  int64_t bs = b->plan.opts.batch_size;
  out->x = kiln_from_host_at(b->x, KILN_F32, b->plan.rank, b->plan.xshape, loc);
  out->y = kiln_from_host_at(b->y, KILN_I64, 1, &bs, loc);
  out->mask = kiln_from_host_at(b->mask, KILN_F32, 1, &bs, loc);
  out->n_valid = valid;
  out->epoch = b->epoch;
  out->index = b->next++;
  if (!kiln_is_valid(out->x) || !kiln_is_valid(out->y) || !kiln_is_valid(out->mask)) return -1;
  return 1;
}
