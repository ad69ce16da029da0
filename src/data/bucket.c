/* Bucketing batcher for variable-length sequences: one padded shape
 * [B, L_bucket] per bucket, so a model traced over the batches compiles
 * once per bucket instead of once per distinct length. */
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "data/data_internal.h"

typedef struct plan_batch {
  int bucket;
  int64_t start, count; /* range in the bucket's member list */
} plan_batch;

struct kiln_bucketer {
  kiln_bucket_options opts;
  int64_t bounds[KILN_MAX_BUCKETS];
  int64_t n;
  int64_t *off, *len; /* sequence i: tokens[off[i] .. off[i] + len[i]) */
  int64_t *tokens;
  int *bucket_of;     /* [n] */
  int64_t *members;   /* [n]: sequence ids grouped by bucket (this epoch's order) */
  int64_t mstart[KILN_MAX_BUCKETS + 1];
  plan_batch *batches; /* [num_batches], this epoch's order */
  int64_t num_batches;
  int64_t plan_epoch;  /* epoch the members/batches order is for; -1 none */
  int64_t epoch, next; /* position of kiln_bucketer_next */
  int64_t *stage_tokens;
  float *stage_mask;
  kiln_bucket_stats stats;
};

static void shuffle_ids(int64_t *a, int64_t n, uint64_t seed) {
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(((unsigned __int128)kiln_rng_bits(seed, (uint64_t)i) * (uint64_t)(i + 1)) >> 64);
    int64_t t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}

/* Order of one epoch: members of each bucket in id order (or shuffled
 * with a per-bucket stream), chunked into batches; then the batch order
 * is shuffled with its own stream. */
static void plan_epoch(kiln_bucketer *b, int64_t epoch) {
  if (b->plan_epoch == epoch) return;
  int nb = b->opts.n_boundaries;
  int64_t fill[KILN_MAX_BUCKETS];
  for (int k = 0; k < nb; k++) fill[k] = b->mstart[k];
  for (int64_t i = 0; i < b->n; i++) b->members[fill[b->bucket_of[i]]++] = i;
  uint64_t s = b->opts.seed + (uint64_t)epoch;
  /* Distinct streams: mix the purpose into the seed through the RNG. */
  if (b->opts.shuffle)
    for (int k = 0; k < nb; k++)
      shuffle_ids(b->members + b->mstart[k], b->mstart[k + 1] - b->mstart[k], kiln_rng_bits(s, 1000003u + (uint64_t)k));
  int64_t at = 0, bs = b->opts.batch_size;
  for (int k = 0; k < nb; k++)
    for (int64_t st = 0; st < b->mstart[k + 1] - b->mstart[k]; st += bs) {
      int64_t c = b->mstart[k + 1] - b->mstart[k] - st;
      b->batches[at++] = (plan_batch){k, b->mstart[k] + st, c < bs ? c : bs};
    }
  if (b->opts.shuffle) {
    uint64_t bseed = kiln_rng_bits(s, 7);
    for (int64_t i = b->num_batches - 1; i > 0; i--) {
      int64_t j = (int64_t)(((unsigned __int128)kiln_rng_bits(bseed, (uint64_t)i) * (uint64_t)(i + 1)) >> 64);
      plan_batch t = b->batches[i];
      b->batches[i] = b->batches[j];
      b->batches[j] = t;
    }
  }
  b->plan_epoch = epoch;
}

void kiln_bucketer_destroy(kiln_bucketer *b) {
  if (!b) return;
  free(b->off);
  free(b->len);
  free(b->tokens);
  free(b->bucket_of);
  free(b->members);
  free(b->batches);
  free(b->stage_tokens);
  free(b->stage_mask);
  free(b);
}

/* The options and sequences are usable; *total: the tokens kept (each
 * sequence cut at the largest bucket). KILN_OK, or the error recorded. */
static kiln_status check_input(int64_t n, const int64_t *const *seqs, const int64_t *lens, const kiln_bucket_options *o,
                       kiln_loc loc, int64_t *total) {
  if (!o || n < 0 || (n > 0 && (!seqs || !lens))) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bucketer: bad arguments (n = %lld, options %s)", (long long)n,
               o ? "set" : "NULL");
  }
  if (o->n_boundaries < 1 || o->n_boundaries > KILN_MAX_BUCKETS || !o->boundaries) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bucketer: %d bucket boundaries (want 1..%d)", o->n_boundaries,
               KILN_MAX_BUCKETS);
  }
  if (o->batch_size <= 0 || o->batch_size > ((int64_t)1 << 24)) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bucketer: batch_size %lld must be in 1..2^24", (long long)o->batch_size);
  }
  for (int k = 0; k < o->n_boundaries; k++)
    if (o->boundaries[k] <= 0 || o->boundaries[k] > ((int64_t)1 << 24) ||
        (k > 0 && o->boundaries[k] <= o->boundaries[k - 1])) {
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                 "bucketer: boundary %d = %lld: boundaries must be strictly increasing and in 1..2^24", k,
                 (long long)o->boundaries[k]);
    }
  int64_t lmax = o->boundaries[o->n_boundaries - 1];
  *total = 0;
  for (int64_t i = 0; i < n; i++) {
    if (lens[i] < 0 || (lens[i] > 0 && !seqs[i])) {
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bucketer: sequence %lld has length %lld%s", (long long)i,
                 (long long)lens[i], lens[i] < 0 ? "" : " but no data");
    }
    if (lens[i] > lmax && !o->truncate) {
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                 "bucketer: sequence %lld has length %lld, longer than the largest bucket %lld (set truncate to cut it)",
                 (long long)i, (long long)lens[i], (long long)lmax);
    }
    *total += lens[i] < lmax ? lens[i] : lmax;
  }
  return KILN_OK;
}

/* Copy the sequences in (cut at lmax) and put each in its bucket. */
static void fill_buckets(kiln_bucketer *b, const int64_t *const *seqs, const int64_t *lens, int64_t lmax) {
  kiln_bucket_stats *st = &b->stats;
  int64_t at = 0;
  for (int64_t i = 0; i < b->n; i++) {
    int64_t l = lens[i];
    if (l > lmax) {
      l = lmax;
      st->truncated++;
    }
    if (l) memcpy(b->tokens + at, seqs[i], sizeof(int64_t) * (size_t)l);
    b->off[i] = at;
    b->len[i] = l;
    at += l;
    int k = 0;
    while (b->bounds[k] < l) k++; /* l <= lmax, so this stops */
    b->bucket_of[i] = k;
    st->sequences[k]++;
    st->tokens[k] += l;
  }
}

/* Per-bucket member ranges, batch counts and padding statistics. */
static void bucket_stats(kiln_bucketer *b) {
  kiln_bucket_stats *st = &b->stats;
  int64_t all_tok = 0, all_pos = 0, bs = b->opts.batch_size;
  for (int k = 0; k < b->opts.n_boundaries; k++) {
    b->mstart[k + 1] = b->mstart[k] + st->sequences[k];
    st->length[k] = b->bounds[k];
    st->batches[k] = (st->sequences[k] + bs - 1) / bs;
    st->positions[k] = st->batches[k] * bs * b->bounds[k];
    st->waste[k] = st->positions[k] ? 1.0 - (double)st->tokens[k] / (double)st->positions[k] : 0.0;
    b->num_batches += st->batches[k];
    all_tok += st->tokens[k];
    all_pos += st->positions[k];
  }
  st->total_waste = all_pos ? 1.0 - (double)all_tok / (double)all_pos : 0.0;
}

kiln_status kiln_bucketer_create_at(int64_t n, const int64_t *const *seqs, const int64_t *lens,
                                    const kiln_bucket_options *o, kiln_bucketer **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "bucketer");
  int64_t total = 0;
  kiln_status st = check_input(n, seqs, lens, o, loc, &total);
  if (st != KILN_OK) return st;
  int nb = o->n_boundaries;
  int64_t lmax = o->boundaries[nb - 1];
  kiln_bucketer *b = calloc(1, sizeof *b);
  if (!b) goto oom;
  b->opts = *o;
  memcpy(b->bounds, o->boundaries, sizeof(int64_t) * (size_t)nb);
  b->opts.boundaries = b->bounds;
  b->n = n;
  b->plan_epoch = -1;
  size_t nn = (size_t)(n ? n : 1);
  b->off = malloc(sizeof(int64_t) * nn);
  b->len = malloc(sizeof(int64_t) * nn);
  b->tokens = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
  b->bucket_of = malloc(sizeof(int) * nn);
  b->members = malloc(sizeof(int64_t) * nn);
  b->batches = malloc(sizeof(plan_batch) * nn);
  b->stage_tokens = malloc(sizeof(int64_t) * (size_t)(o->batch_size * lmax));
  b->stage_mask = malloc(sizeof(float) * (size_t)(o->batch_size * lmax));
  if (!b->off || !b->len || !b->tokens || !b->bucket_of || !b->members || !b->batches || !b->stage_tokens ||
      !b->stage_mask)
    goto oom;
  b->stats.n_buckets = nb;
  fill_buckets(b, seqs, lens, lmax);
  bucket_stats(b);
  *out = b;
  return KILN_OK;
oom:
  kiln_bucketer_destroy(b);
  return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "bucketer: out of memory");
}

int64_t kiln_bucketer_num_batches(const kiln_bucketer *b) { return b ? b->num_batches : 0; }

void kiln_bucketer_stats(const kiln_bucketer *b, kiln_bucket_stats *out) {
  if (!out) return;
  if (!b) {
    memset(out, 0, sizeof *out);
    return;
  }
  *out = b->stats;
}

int64_t kiln_bucketer_fill_at(kiln_bucketer *b, int64_t epoch, int64_t index, int64_t *tokens, float *mask,
                              int64_t *length, int *bucket, int64_t *ids, kiln_loc loc) {
  if (!b || epoch < 0 || index < 0 || index >= b->num_batches || !tokens || !mask) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
               "bucketer_fill: batch %lld of epoch %lld is out of range or a buffer is NULL", (long long)index,
               (long long)epoch);
    return -1;
  }
  plan_epoch(b, epoch);
  plan_batch pb = b->batches[index];
  int64_t L = b->bounds[pb.bucket], bs = b->opts.batch_size;
  if (b->opts.exact_length) { /* the batch's own longest sequence (at least 1) */
    L = 1;
    for (int64_t r = 0; r < pb.count && r < bs; r++)
      if (b->len[b->members[pb.start + r]] > L) L = b->len[b->members[pb.start + r]];
  }
  for (int64_t r = 0; r < bs; r++) {
    int64_t id = r < pb.count ? b->members[pb.start + r] : -1;
    int64_t l = id >= 0 ? b->len[id] : 0;
    int64_t *trow = tokens + r * L;
    float *mrow = mask + r * L;
    if (l) memcpy(trow, b->tokens + b->off[id], sizeof(int64_t) * (size_t)l);
    for (int64_t c = 0; c < l; c++) mrow[c] = 1.0f;
    for (int64_t c = l; c < L; c++) {
      trow[c] = b->opts.pad_id;
      mrow[c] = 0.0f;
    }
    if (ids) ids[r] = id;
  }
  if (length) *length = L;
  if (bucket) *bucket = pb.bucket;
  return pb.count;
}

int kiln_bucketer_next_at(kiln_bucketer *b, kiln_seq_batch *out, kiln_loc loc) {
  if (!b || !out) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "bucketer_next: %s is NULL", b ? "out" : "bucketer");
    return -1;
  }
  memset(out, 0, sizeof *out);
  if (b->next >= b->num_batches) {
    b->epoch++;
    b->next = 0;
    return 0;
  }
  int64_t L = 0;
  int k = 0;
  int64_t valid = kiln_bucketer_fill_at(b, b->epoch, b->next, b->stage_tokens, b->stage_mask, &L, &k, NULL, loc);
  int64_t shape[2] = {b->opts.batch_size, L};
  out->tokens = kiln_from_host_at(b->stage_tokens, KILN_I64, 2, shape, loc);
  out->mask = kiln_from_host_at(b->stage_mask, KILN_F32, 2, shape, loc);
  out->length = L;
  out->bucket = k;
  out->n_valid = valid;
  out->epoch = b->epoch;
  out->index = b->next++;
  return kiln_is_valid(out->tokens) && kiln_is_valid(out->mask) ? 1 : -1;
}
