/* kiln data: IDX files (MNIST / Fashion-MNIST), in-memory datasets,
 * shuffled fixed-shape batching, an asynchronous loader and a bucketing
 * batcher for variable-length sequences.
 *
 * Ownership: every object made by a kiln_<type>_create* constructor is owned
 * by the caller and freed with the matching kiln_<type>_destroy (NULL is a
 * no-op). Tensors in a kiln_batch / kiln_seq_batch are
 * ordinary step tensors: the next kiln_mark_step() releases them unless the
 * caller keeps them.
 *
 * Errors: on bad input (missing or malformed file, bad argument) a
 * constructor returns the error status with *out NULL and records the sticky
 * status with the caller's file:line and the file name (kiln_last_error()).
 * Nothing aborts.
 *
 * Threads: a dataset is immutable after construction and may be read from
 * any thread. Batchers, loaders and bucketers are used from the tracing
 * thread only (they create tensors). The loader's own background thread only
 * touches host memory; the tensor upload happens in kiln_loader_next().
 */
#ifndef KILN_DATA_H
#define KILN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ───────────── IDX files ─────────────
 * Format: 2 zero bytes, dtype byte (only 0x08 = unsigned byte is
 * supported), rank byte, rank big-endian u32 dims, then the data, packed,
 * row-major. A file that starts with the gzip magic bytes (whatever its
 * name) is decompressed with zlib, a required dependency. */
typedef struct kiln_idx {
  int rank;                     /* 1..KILN_MAX_RANK */
  int64_t dims[KILN_MAX_RANK];  /* dims[0..rank) */
  int64_t numel;                /* product of dims */
  const uint8_t *data;          /* numel bytes */
} kiln_idx;

/* Largest IDX payload kiln accepts (bounds memory use on hostile files). */
#define KILN_IDX_MAX_BYTES ((int64_t)1 << 31)

/* Parse an IDX image held in memory. On success *out describes it and
 * out->data points INTO buf (no copy: buf must outlive its use). name is
 * used in error messages only (may be NULL). Never reads outside
 * buf[0..len). Errors: KILN_ERR_CORRUPT (truncated, trailing bytes, bad
 * magic, zero rank, too large), KILN_ERR_UNSUPPORTED (dtype other than
 * ubyte, rank > KILN_MAX_RANK); recorded in the sticky status. */
#define kiln_idx_parse(buf, len, name, out) kiln_idx_parse_at((buf), (len), (name), (out), KILN_HERE)
kiln_status kiln_idx_parse_at(const void *buf, size_t len, const char *name, kiln_idx *out, kiln_loc loc);

/* Read and parse an IDX file (plain or gzip). On success *out is a new
 * kiln_idx owning its data (free with kiln_idx_destroy); on error *out is NULL
 * and the sticky status names the file. Errors: KILN_ERR_IO (cannot open or
 * read, not a regular file), KILN_ERR_CORRUPT (also: damaged gzip data),
 * KILN_ERR_UNSUPPORTED, KILN_ERR_OUT_OF_MEMORY. Thread-safe. */
#define kiln_idx_create(path, out) kiln_idx_create_at((path), (out), KILN_HERE)
kiln_status kiln_idx_create_at(const char *path, kiln_idx **out, kiln_loc loc);
/* Free a kiln_idx from kiln_idx_create. NULL is a no-op. */
void kiln_idx_destroy(kiln_idx *idx);

/* ───────────── datasets ───────────── */
/* N examples, each a f32 feature array of a fixed shape plus an i64 label. */
typedef struct kiln_dataset kiln_dataset;

/* A dataset from host arrays: features f32 with shape[0] = N (rank >= 1;
 * rank 1 means one scalar feature per example), labels i64 [N]. Both are
 * copied: the caller keeps ownership. Errors (*out NULL): INVALID_ARGUMENT,
 * OUT_OF_MEMORY. */
#define kiln_dataset_create_from_host(features, rank, shape, labels, out) \
  kiln_dataset_create_from_host_at((features), (rank), (shape), (labels), (out), KILN_HERE)
kiln_status kiln_dataset_create_from_host_at(const float *features, int rank, const int64_t *shape,
                                             const int64_t *labels, kiln_dataset **out, kiln_loc loc);

/* Normalization of Fashion-MNIST pixels: (x/255 - mean) / std. */
#define KILN_FASHION_MNIST_MEAN 0.2860f
#define KILN_FASHION_MNIST_STD 0.3530f
/* Fashion-MNIST from dir (NULL: $KILN_FASHION_MNIST_DIR, else
 * /usr/share/datasets/fashion-mnist). train true: the 60000 training
 * examples (train-*-ubyte[.gz]), else the 10000 test ones (t10k-*).
 * Features f32 [N, 28, 28] normalized as above, labels i64 in 0..9.
 * Errors (*out NULL): IO, CORRUPT (e.g. image/label counts differ or a
 * label is out of range; the message names the file). */
#define kiln_dataset_create_fashion_mnist(dir, train, out) \
  kiln_dataset_create_fashion_mnist_at((dir), (train), (out), KILN_HERE)
kiln_status kiln_dataset_create_fashion_mnist_at(const char *dir, bool train, kiln_dataset **out, kiln_loc loc);

/* Free a dataset. Every batcher/loader over it must be destroyed first.
 * NULL is a no-op. */
void kiln_dataset_destroy(kiln_dataset *ds);
/* Number of examples (0 for NULL). */
int64_t kiln_dataset_size(const kiln_dataset *ds);
/* Shape of one example's features into out[KILN_MAX_RANK]; returns its rank
 * (0 for scalar features, -1 for NULL). */
int kiln_dataset_example_shape(const kiln_dataset *ds, int64_t *out);
/* Direct read access: features [N, example shape] and labels [N]. Owned by
 * the dataset. */
const float *kiln_dataset_features(const kiln_dataset *ds);
const int64_t *kiln_dataset_labels(const kiln_dataset *ds);

/* ───────────── batching ───────────── */
typedef struct kiln_batch_options {
  int64_t batch_size; /* B > 0 */
  bool shuffle;       /* false: dataset order every epoch */
  uint64_t seed;      /* epoch e is shuffled with seed + e */
  bool drop_last;     /* true: drop the last partial batch; false: pad it to B (mask 0) */
  int prefetch;       /* kiln_loader only: batches prepared ahead (<= 0: 2) */
  /* Sharding for data parallel (kiln/dist.h): with shard_count > 1 this
   * batcher sees examples perm[shard_rank], perm[shard_rank + shard_count],
   * ... of each epoch's permutation (the same on every rank for the same
   * seed), floor(N / shard_count) of them, as PyTorch's DistributedSampler
   * with drop_last. Batch k of the ranks together is batch k of an
   * unsharded batcher with batch size shard_count x B over the first
   * shard_count x floor(N / shard_count) examples of the permutation (the
   * last N mod shard_count are skipped that epoch). 0 or 1: no sharding
   * (typically shard_count = kiln_dist_world_size(), shard_rank =
   * kiln_dist_rank()). */
  int shard_count;
  int shard_rank;
} kiln_batch_options;

/* One batch. Every batch of a batcher has the same shapes, so a step over
 * it compiles once. Padding rows have zero features, label 0, mask 0. */
typedef struct kiln_batch {
  kiln_tensor x;    /* f32 [B, example shape...] */
  kiln_tensor y;    /* i64 [B] */
  kiln_tensor mask; /* f32 [B]: 1 for a real example, 0 for padding */
  int64_t n_valid;  /* real examples in this batch (B except a padded last batch) */
  int64_t epoch;    /* epoch this batch belongs to */
  int64_t index;    /* batch number within the epoch */
} kiln_batch;

/* The order of the examples in an epoch: perm[0..N) is a permutation of
 * 0..N-1 by Fisher–Yates driven by kiln's counter-based RNG with seed
 * (seed + epoch); identity when shuffle is false. A pure function of
 * (n, shuffle, seed, epoch). Thread-safe. A NULL perm with n > 0 records
 * INVALID_ARGUMENT (nothing written); n <= 0 writes nothing. */
void kiln_data_permutation(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int64_t *perm);

/* A synchronous batcher. ds must outlive it. INVALID_ARGUMENT (*out NULL)
 * on a bad option. */
typedef struct kiln_batcher kiln_batcher;
#define kiln_batcher_create(ds, opts, out) kiln_batcher_create_at((ds), (opts), (out), KILN_HERE)
kiln_status kiln_batcher_create_at(const kiln_dataset *ds, const kiln_batch_options *opts, kiln_batcher **out,
                                   kiln_loc loc);
/* NULL is a no-op. */
void kiln_batcher_destroy(kiln_batcher *b);
/* Batches per epoch: ceil(N / B), or floor(N / B) with drop_last. */
int64_t kiln_batcher_num_batches(const kiln_batcher *b);
/* Gather batch `index` of `epoch` into host memory: x holds B * example
 * numel floats, y and mask B entries each. Returns the number of real
 * examples, or -1 (sticky error) for an index out of range. Does not move
 * the batcher's position. */
#define kiln_batcher_fill(b, epoch, index, x, y, mask) \
  kiln_batcher_fill_at((b), (epoch), (index), (x), (y), (mask), KILN_HERE)
int64_t kiln_batcher_fill_at(kiln_batcher *b, int64_t epoch, int64_t index, float *x, int64_t *y, float *mask,
                             kiln_loc loc);
/* The next batch as tensors (tracing thread). Returns 1 with *out filled;
 * 0 at the end of an epoch (*out zeroed; the next call starts the next
 * epoch); -1 on error (sticky status). */
#define kiln_batcher_next(b, out) kiln_batcher_next_at((b), (out), KILN_HERE)
int kiln_batcher_next_at(kiln_batcher *b, kiln_batch *out, kiln_loc loc);

/* ───────────── asynchronous loader ─────────────
 * Same batches, in the same order, as kiln_batcher with the same options.
 * A background thread gathers the next `prefetch` batches into host
 * staging buffers; kiln_loader_next() (tracing thread) only uploads an
 * already gathered buffer with kiln_from_host. On the CPU backend that
 * upload is one memcpy per tensor. Metrics: counter "LoaderBatches" (batches
 * handed out) and metric "LoaderWaitTime" (ns the tracing thread waited for
 * the background thread, one sample per kiln_loader_next call). */
typedef struct kiln_loader kiln_loader;
#define kiln_loader_create(ds, opts, out) kiln_loader_create_at((ds), (opts), (out), KILN_HERE)
kiln_status kiln_loader_create_at(const kiln_dataset *ds, const kiln_batch_options *opts, kiln_loader **out,
                                  kiln_loc loc);
/* Stops and joins the background thread, then frees. NULL is a no-op. */
void kiln_loader_destroy(kiln_loader *l);
int64_t kiln_loader_num_batches(const kiln_loader *l);
/* As kiln_batcher_next: 1 batch, 0 end of epoch, -1 error. */
#define kiln_loader_next(l, out) kiln_loader_next_at((l), (out), KILN_HERE)
int kiln_loader_next_at(kiln_loader *l, kiln_batch *out, kiln_loc loc);

/* ───────────── bucketing for variable-length sequences ─────────────
 * Each sequence goes to the smallest bucket (boundary) that holds it; a
 * batch holds sequences of one bucket only and is padded to [B, L_bucket],
 * so there is one compiled shape per bucket. */
#define KILN_MAX_BUCKETS 32
typedef struct kiln_bucket_options {
  const int64_t *boundaries; /* strictly increasing lengths > 0 (e.g. 64, 128, 256) */
  int n_boundaries;          /* 1..KILN_MAX_BUCKETS */
  int64_t batch_size;        /* B > 0; the last batch of a bucket is padded with empty rows */
  bool truncate;             /* true: cut longer sequences to the largest bucket; false: reject them */
  int64_t pad_id;            /* token id written into padded positions */
  bool shuffle;              /* shuffle within buckets and the batch order (seed + epoch) */
  uint64_t seed;
  /* true: each batch is padded to its own longest sequence instead of the
   * bucket's boundary (the buckets only group similar lengths): for dynamic
   * shapes (docs/dynamic-shapes.md), where a new length costs a plan, not a
   * compile. The stats stay those of the boundaries. */
  bool exact_length;
} kiln_bucket_options;

/* What one epoch looks like (independent of the epoch: only the order changes). */
typedef struct kiln_bucket_stats {
  int n_buckets;
  int64_t length[KILN_MAX_BUCKETS];      /* the bucket's L */
  int64_t sequences[KILN_MAX_BUCKETS];   /* sequences assigned to it */
  int64_t batches[KILN_MAX_BUCKETS];     /* batches per epoch */
  int64_t tokens[KILN_MAX_BUCKETS];      /* real tokens (after truncation) */
  int64_t positions[KILN_MAX_BUCKETS];   /* batches * B * L */
  double waste[KILN_MAX_BUCKETS];        /* 1 - tokens / positions (0 if no batch) */
  double total_waste;                    /* over all buckets */
  int64_t truncated;                     /* sequences cut by truncate */
} kiln_bucket_stats;

typedef struct kiln_seq_batch {
  kiln_tensor tokens; /* i64 [B, L], pad_id in padded positions */
  kiln_tensor mask;   /* f32 [B, L]: 1 real token, 0 padding. Not an attention mask as is
                       * (a float attention mask is added to the scores): for
                       * kiln_attn_opts.key_padding_mask pass kiln_eq_c(mask, 0.0) (bool,
                       * true = padding); for kiln_sdpa, kiln_ne_c(mask, 0.0) reshaped to
                       * [B, 1, 1, L] (bool, true = attend) */
  int64_t length;     /* L: the bucket's boundary (exact_length: the batch's longest sequence) */
  int bucket;         /* bucket index */
  int64_t n_valid;    /* real sequences in the batch */
  int64_t epoch, index;
} kiln_seq_batch;

typedef struct kiln_bucketer kiln_bucketer;
/* n sequences: seqs[i] points to lens[i] tokens. Copied (after truncation):
 * the caller keeps ownership. Errors (*out NULL): INVALID_ARGUMENT (bad
 * options, a negative length, a sequence too long with truncate false — the
 * message gives its index and length), OUT_OF_MEMORY. Empty sequences are
 * allowed. */
#define kiln_bucketer_create(n, seqs, lens, opts, out) \
  kiln_bucketer_create_at((n), (seqs), (lens), (opts), (out), KILN_HERE)
kiln_status kiln_bucketer_create_at(int64_t n, const int64_t *const *seqs, const int64_t *lens,
                                    const kiln_bucket_options *opts, kiln_bucketer **out, kiln_loc loc);
/* NULL is a no-op. */
void kiln_bucketer_destroy(kiln_bucketer *b);
int64_t kiln_bucketer_num_batches(const kiln_bucketer *b);
/* Fill *out with the per-bucket counts and padding waste. */
void kiln_bucketer_stats(const kiln_bucketer *b, kiln_bucket_stats *out);
/* Host form of batch `index` of `epoch`: tokens and mask must hold B * Lmax
 * entries (Lmax = largest boundary); the batch is written packed as [B, L].
 * Sets *length, *bucket, ids[0..B) (sequence index, -1 for padding rows; ids
 * may be NULL). Returns n_valid, or -1 for an index out of range. */
#define kiln_bucketer_fill(b, epoch, index, tokens, mask, length, bucket, ids) \
  kiln_bucketer_fill_at((b), (epoch), (index), (tokens), (mask), (length), (bucket), (ids), KILN_HERE)
int64_t kiln_bucketer_fill_at(kiln_bucketer *b, int64_t epoch, int64_t index, int64_t *tokens, float *mask,
                              int64_t *length, int *bucket, int64_t *ids, kiln_loc loc);
/* The next batch as tensors: 1 batch, 0 end of epoch, -1 error. */
#define kiln_bucketer_next(b, out) kiln_bucketer_next_at((b), (out), KILN_HERE)
int kiln_bucketer_next_at(kiln_bucketer *b, kiln_seq_batch *out, kiln_loc loc);

#ifdef __cplusplus
}
#endif
#endif /* KILN_DATA_H */
