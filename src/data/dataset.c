/* In-memory datasets: generic host arrays and Fashion-MNIST from IDX files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data_internal.h"

static kiln_dataset *dataset_alloc(int64_t n, int ex_rank, const int64_t *ex_shape, kiln_loc loc) {
  int64_t ex_numel = 1;
  for (int i = 0; i < ex_rank; i++) ex_numel *= ex_shape[i];
  kiln_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) goto oom;
  ds->n = n;
  ds->ex_rank = ex_rank;
  memcpy(ds->ex_shape, ex_shape, sizeof(int64_t) * (size_t)ex_rank);
  ds->ex_numel = ex_numel;
  int64_t xs = n * ex_numel;
  ds->x = malloc(sizeof(float) * (size_t)(xs > 0 ? xs : 1));
  ds->y = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!ds->x || !ds->y) goto oom;
  return ds;
oom:
  kiln_dataset_destroy(ds);
  kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "dataset: cannot allocate %lld examples", (long long)n);
  return NULL;
}

kiln_status kiln_dataset_create_from_host_at(const float *features, int rank, const int64_t *shape,
                                             const int64_t *labels, kiln_dataset **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "dataset_from_host");
  if (rank < 1 || rank > KILN_MAX_RANK || !shape) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "dataset_from_host: rank %d must be in 1..%d", rank, KILN_MAX_RANK);
  }
  /* Bound the total element count: 2^40 floats is far beyond any host. */
  int64_t total = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] <= 0 || shape[i] > ((int64_t)1 << 40) / total) {
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "dataset_from_host: bad dimension %d = %lld", i, (long long)shape[i]);
    }
    total *= shape[i];
  }
  if (!features || !labels) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "dataset_from_host: %s is NULL", features ? "labels" : "features");
  }
  kiln_dataset *ds = dataset_alloc(shape[0], rank - 1, shape + 1, loc);
  if (!ds) return KILN_ERR_OUT_OF_MEMORY; /* recorded by dataset_alloc */
  memcpy(ds->x, features, sizeof(float) * (size_t)total);
  memcpy(ds->y, labels, sizeof(int64_t) * (size_t)shape[0]);
  *out = ds;
  return KILN_OK;
}

/* Load dir/base, or dir/base.gz when the plain file does not exist. */
static kiln_status load_one(const char *dir, const char *base, kiln_idx **out, kiln_loc loc) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, base);
  /* stat, not open: opening a FIFO would block here (the loader then
   * refuses anything but a regular file without blocking). */
  struct stat st;
  if (stat(path, &st) != 0) snprintf(path, sizeof path, "%s/%s.gz", dir, base);
  return kiln_idx_create_at(path, out, loc);
}

kiln_status kiln_dataset_create_fashion_mnist_at(const char *dir, bool train, kiln_dataset **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "fashion_mnist");
  if (!dir || !*dir) dir = kiln_cfg()->fashion_mnist_dir;
  if (!dir || !*dir) dir = "/usr/share/datasets/fashion-mnist";
  const char *pre = train ? "train" : "t10k";
  char img_name[64], lab_name[64];
  snprintf(img_name, sizeof img_name, "%s-images-idx3-ubyte", pre);
  snprintf(lab_name, sizeof lab_name, "%s-labels-idx1-ubyte", pre);
  kiln_idx *img = NULL, *lab = NULL;
  kiln_dataset *ds = NULL;
  kiln_status s = load_one(dir, img_name, &img, loc);
  if (s == KILN_OK) s = load_one(dir, lab_name, &lab, loc);
  if (s != KILN_OK) goto done;
  if (img->rank != 3 || lab->rank != 1) {
    s = kiln_error(KILN_ERR_CORRUPT, loc, "fashion_mnist: %s/%s has rank %d (want 3) / %s has rank %d (want 1)", dir,
               img_name, img->rank, lab_name, lab->rank);
    goto done;
  }
  if (img->dims[0] != lab->dims[0] || img->dims[0] == 0) {
    s = kiln_error(KILN_ERR_CORRUPT, loc, "fashion_mnist: %s/%s has %lld images but %s has %lld labels", dir, img_name,
               (long long)img->dims[0], lab_name, (long long)lab->dims[0]);
    goto done;
  }
  int64_t ex_shape[2] = {img->dims[1], img->dims[2]};
  ds = dataset_alloc(img->dims[0], 2, ex_shape, loc);
  if (!ds) {
    s = KILN_ERR_OUT_OF_MEMORY; /* recorded by dataset_alloc */
    goto done;
  }
  for (int64_t i = 0; i < ds->n; i++) {
    if (lab->data[i] > 9) {
      s = kiln_error(KILN_ERR_CORRUPT, loc, "fashion_mnist: %s/%s: label %d of example %lld is outside 0..9", dir,
                     lab_name, lab->data[i], (long long)i);
      kiln_dataset_destroy(ds);
      ds = NULL;
      goto done;
    }
    ds->y[i] = lab->data[i];
  }
  /* A 256-entry table: every pixel value normalizes the same way. */
  float table[256];
  for (int v = 0; v < 256; v++)
    table[v] = ((float)v / 255.0f - KILN_FASHION_MNIST_MEAN) / KILN_FASHION_MNIST_STD;
  for (int64_t i = 0; i < img->numel; i++) ds->x[i] = table[img->data[i]];
done:
  kiln_idx_destroy(img);
  kiln_idx_destroy(lab);
  *out = ds;
  return s;
}

void kiln_dataset_destroy(kiln_dataset *ds) {
  if (!ds) return;
  free(ds->x);
  free(ds->y);
  free(ds);
}

int64_t kiln_dataset_size(const kiln_dataset *ds) { return ds ? ds->n : 0; }

int kiln_dataset_example_shape(const kiln_dataset *ds, int64_t *out) {
  if (!ds) return -1;
  if (out) memcpy(out, ds->ex_shape, sizeof(int64_t) * (size_t)ds->ex_rank);
  return ds->ex_rank;
}

const float *kiln_dataset_features(const kiln_dataset *ds) { return ds ? ds->x : NULL; }
const int64_t *kiln_dataset_labels(const kiln_dataset *ds) { return ds ? ds->y : NULL; }
