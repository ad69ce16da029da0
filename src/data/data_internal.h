/* Internal pieces shared by kiln's data sources (src/data/). */
#ifndef KILN_DATA_INTERNAL_H
#define KILN_DATA_INTERNAL_H

#include "base/status.h"
#include "kiln/data.h"
#include "kiln/text.h"

/* IDX parse that reports into err instead of the sticky status: the fuzz
 * harness and kiln_idx_create use it. Same contract as kiln_idx_parse_at;
 * every rejection is KILN_ERR_CORRUPT or KILN_ERR_UNSUPPORTED with a
 * message that starts with name. */
kiln_status kiln_idx_parse_err(const uint8_t *buf, size_t len, const char *name, kiln_idx *out, kiln_err *err);

/* The tokenizer's constructor and encoder reporting into err instead of the
 * sticky status (the fuzz harness uses them). from_memory copies buf[0..n);
 * name is used in messages only (NULL: "<memory>"). Same contracts as
 * kiln_tokenizer_create_at and kiln_tokenizer_encode_at. */
kiln_status kiln_tokenizer_create_from_memory_err(const char *buf, size_t n, const kiln_tokenizer_options *opts,
                                                  const char *name, kiln_tokenizer **out, kiln_err *err);
kiln_status kiln_tokenizer_encode_err(const kiln_tokenizer *t, const char *utf8, size_t len, int64_t max_len,
                                      int64_t *ids, int64_t cap, int64_t *n_out, kiln_err *err);

struct kiln_dataset {
  int64_t n;
  int ex_rank;                       /* rank of one example */
  int64_t ex_shape[KILN_MAX_RANK];
  int64_t ex_numel;                  /* floats per example */
  float *x;                          /* [n, ex_numel] */
  int64_t *y;                        /* [n] */
};

/* Batch geometry shared by the batcher and the loader. */
typedef struct kiln_batch_plan {
  const kiln_dataset *ds;
  kiln_batch_options opts;
  int64_t n;                         /* examples per epoch: the shard's (ds->n unsharded) */
  int64_t num_batches;
  int rank;                          /* of x: 1 + example rank */
  int64_t xshape[KILN_MAX_RANK];     /* [B, example shape...] */
} kiln_batch_plan;

/* Validate options and fill the plan; records a sticky error and returns
 * non-OK on a bad option. */
kiln_status kiln_batch_plan_init(kiln_batch_plan *p, const kiln_dataset *ds, const kiln_batch_options *o,
                                 const char *who, kiln_loc loc);
/* The epoch's order of this shard's examples into perm[0..p->n) (perm has
 * room for ds->n): the dataset's permutation, then every shard_count-th
 * entry from shard_rank. */
void kiln_batch_plan_permutation(const kiln_batch_plan *p, int64_t epoch, int64_t *perm);
/* Gather batch `index` given the epoch's permutation into host buffers
 * (B rows; rows past the data are padding). Returns n_valid. Reads only
 * the immutable dataset: safe on any thread. */
int64_t kiln_batch_plan_gather(const kiln_batch_plan *p, const int64_t *perm, int64_t index, float *x,
                               int64_t *y, float *mask);

#endif
