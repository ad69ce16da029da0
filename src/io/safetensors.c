/* Checkpoints in the safetensors format: saving kiln tensors (atomically)
 * and reading entries of a validated file back into tensors. The format
 * itself (parse, validate, encode) lives in st_format.c. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/status.h"
#include "frontend/api.h"
#include "io/st_format.h"
#include "kiln/io.h"

/* The data section is the raw in-memory bytes of kiln's buffers. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

struct kiln_st_file {
  int fd;
  char *path;
  uint64_t data_start; /* file offset of the data section */
  kiln_st_header h;
};

static kiln_st_dt st_of_kiln(kiln_dtype d) {
  switch (d) {
    case KILN_F32: return KILN_ST_F32;
    case KILN_F64: return KILN_ST_F64;
    case KILN_I32: return KILN_ST_I32;
    case KILN_I64: return KILN_ST_I64;
    case KILN_BOOL: return KILN_ST_BOOL;
    case KILN_BF16: return KILN_ST_BF16;
    case KILN_F16: return KILN_ST_F16;
    case KILN_U8: return KILN_ST_U8;
    case KILN_I8: return KILN_ST_I8;
    default: return KILN_ST_DTYPE_COUNT;
  }
}

/* The kiln dtype an entry loads as, or -1 if none can hold it exactly. */
static int kiln_of_st(kiln_st_dt d) {
  switch (d) {
    case KILN_ST_F32: return KILN_F32;
    case KILN_ST_F16: return KILN_F16;
    case KILN_ST_BF16: return KILN_BF16;
    case KILN_ST_U8: return KILN_U8;
    case KILN_ST_I8: return KILN_I8;
    case KILN_ST_F64: return KILN_F64;
    case KILN_ST_I32: case KILN_ST_U16: case KILN_ST_I16: return KILN_I32;
    case KILN_ST_I64: case KILN_ST_U32: return KILN_I64;
    case KILN_ST_BOOL: return KILN_BOOL;
    default: return -1;
  }
}

/* ───────────── save ───────────── */

/* The number of key/value pairs of a NULL-terminated metadata list, or -1
 * (error recorded) when a key has no value. */
static int count_metadata(const char *path, const char *const *metadata, kiln_loc loc) {
  int n_meta = 0;
  if (!metadata) return 0;
  while (metadata[2 * n_meta]) {
    if (!metadata[2 * n_meta + 1]) {
      kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "save_safetensors %s: metadata key \"%.200s\" has no value", path,
                 metadata[2 * n_meta]);
      return -1;
    }
    n_meta++;
  }
  return n_meta;
}

/* Header entries (names, dtypes, shapes) for the tensors, each checked. */
static kiln_status fill_entries(kiln_st_header *h, const char *path, const char *const *names,
                                const kiln_tensor *tensors, kiln_loc loc) {
  for (int i = 0; i < h->n; i++) {
    kiln_st_entry *e = &h->entries[i];
    if (!names[i]) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "save_safetensors %s: name #%d is NULL", path, i);
    if (!strcmp(names[i], "__metadata__"))
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "save_safetensors %s: \"__metadata__\" is reserved", path);
    if (!kiln_is_valid(tensors[i]))
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                        "save_safetensors %s: tensor \"%.200s\" (#%d) is null, stale or poisoned; nothing written",
                        path, names[i], i);
    e->name = (char *)names[i];
    e->dtype = st_of_kiln(kiln_dtype_of(tensors[i]));
    e->rank = kiln_shape(tensors[i], e->shape);
    if (e->dtype == KILN_ST_DTYPE_COUNT || e->rank < 0)
      return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "save_safetensors %s: tensor \"%.200s\" has no saveable dtype",
                        path, names[i]);
  }
  return KILN_OK;
}

/* Data layout: widest elements first, so with the 8-aligned header every
 * tensor's data is aligned to its element size in the file (readers that
 * map the file can use it in place). The header keeps the caller's order.
 * Returns the data section's size. */
static uint64_t lay_out_data(kiln_st_header *h, const kiln_tensor *tensors) {
  uint64_t at = 0;
  for (size_t width = 8; width >= 1; width /= 2) {
    for (int i = 0; i < h->n; i++) {
      kiln_st_entry *e = &h->entries[i];
      if (kiln_st_dt_bytes(e->dtype) != width) continue;
      e->begin = at;
      e->end = at + (uint64_t)kiln_numel(tensors[i]) * width;
      at = e->end;
    }
  }
  return at;
}

/* The file's bytes: the header's length, the header, then each tensor's
 * data read back from kiln. *file is malloc'd (NULL on error). */
static kiln_status build_file(const kiln_st_header *h, const char *json, size_t json_n, uint64_t data_n,
                              const char *path, const char *const *names, const kiln_tensor *tensors, kiln_loc loc,
                              uint8_t **file, size_t *total) {
  *total = 8 + json_n + (size_t)data_n;
  uint8_t *f = *file = malloc(*total);
  if (!f)
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "save_safetensors %s: out of memory for %zu bytes", path, *total);
  for (int k = 0; k < 8; k++) f[k] = (uint8_t)((uint64_t)json_n >> (8 * k));
  memcpy(f + 8, json, json_n);
  for (int i = 0; i < h->n; i++) {
    const kiln_st_entry *e = &h->entries[i];
    size_t bytes = (size_t)(e->end - e->begin);
    if (!bytes) continue;
    kiln_status s = kiln_to_host_at(tensors[i], f + 8 + json_n + e->begin, bytes, loc);
    if (s) {
      kiln_error(s, loc, "save_safetensors %s: cannot read tensor \"%.200s\"; nothing written", path, names[i]);
      return s;
    }
  }
  return KILN_OK;
}

kiln_status kiln_save_safetensors_at(const char *path, int n, const char *const *names, const kiln_tensor *tensors,
                                     const char *const *metadata, kiln_loc loc) {
  if (!path || !*path) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "save_safetensors: path is NULL or empty");
  if (n < 0 || (n > 0 && (!names || !tensors)))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "save_safetensors %s: bad tensor list (n = %d%s)", path, n,
                      n > 0 ? ", names or tensors is NULL" : "");
  int n_meta = count_metadata(path, metadata, loc);
  if (n_meta < 0) return KILN_ERR_INVALID_ARGUMENT;
  kiln_st_header h = {0};
  h.n = n;
  h.n_meta = n_meta;
  h.has_meta = n_meta > 0;
  /* The header borrows the caller's strings: freed below by hand, not with
   * kiln_st_header_free. */
  h.meta = (char **)metadata;
  h.entries = calloc((size_t)(n ? n : 1), sizeof *h.entries);
  char *json = NULL;
  uint8_t *file = NULL;
  kiln_st_header check = {0};
  size_t json_n, total;
  kiln_err err = {0};
  kiln_status s = h.entries ? fill_entries(&h, path, names, tensors, loc)
                            : kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "save_safetensors %s: out of memory", path);
  if (s) goto out;
  uint64_t at = lay_out_data(&h, tensors);
  if ((s = kiln_st_header_encode(&h, &json, &json_n, &err))) {
    s = kiln_error(s, loc, "save_safetensors %s: %s", path, err.msg);
    goto out;
  }
  /* Parse what we are about to write: the same checks a reader makes
   * (duplicate names, offsets), so kiln never writes a file it would reject. */
  if ((s = kiln_st_header_parse(json, json_n, at, &check, &err))) {
    s = kiln_error(s == KILN_ERR_CORRUPT ? KILN_ERR_INVALID_ARGUMENT : s, loc, "save_safetensors %s: %s", path,
                   err.msg);
    goto out;
  }
  if ((s = build_file(&h, json, json_n, at, path, names, tensors, loc, &file, &total))) goto out;
  /* A file-system failure is KILN_ERR_IO whatever the helper said (a path
   * too long is still the file system's refusal, not a bad tensor), and
   * the message names the checkpoint and the system's reason. */
  if ((s = kiln_fs_write_output(path, "checkpoint", file, total, &err))) {
    s = s == KILN_ERR_OUT_OF_MEMORY ? s : KILN_ERR_IO;
    s = kiln_error(s, loc, "save_safetensors %s: %s (the previous file, if any, is unchanged)", path, err.msg);
  }
out:
  kiln_st_header_free(&check);
  free(h.entries);
  free(json);
  free(file);
  return s;
}

/* ───────────── load ───────────── */

/* pread until n bytes or EOF/error: bytes read, -1 on error. */
static ssize_t pread_all(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

kiln_status kiln_st_file_create_at(const char *path, kiln_st_file **out, kiln_loc loc) {
  if (out) *out = NULL;
  if (!path || !out) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "st_open: path or out is NULL");
  int fd;
  kiln_err err = {0};
  kiln_status s = kiln_fs_open_input(path, "safetensors file", &fd, &err);
  if (s != KILN_OK) return kiln_error(s, loc, "%s", err.msg);
  struct stat st;
  char *json = NULL;
  kiln_st_file *f = NULL;
  if (fstat(fd, &st) != 0) {
    s = kiln_error(KILN_ERR_IO, loc, "safetensors file %s: cannot stat: %s", path, strerror(errno));
    goto fail;
  }
  uint64_t size = (uint64_t)st.st_size, hl;
  uint8_t prefix[8] = {0};
  ssize_t r = pread_all(fd, prefix, size < 8 ? (size_t)size : 8, 0);
  if (r < 0) {
    s = kiln_error(KILN_ERR_IO, loc, "safetensors file %s: cannot read: %s", path, strerror(errno));
    goto fail;
  }
  if ((uint64_t)r < 8) size = (uint64_t)r; /* shrank since fstat */
  if ((s = kiln_st_prefix_check(prefix, size, &hl, &err))) {
    s = kiln_error(s, loc, "safetensors file %s: %s", path, err.msg);
    goto fail;
  }
  json = malloc(hl ? (size_t)hl : 1);
  f = calloc(1, sizeof *f);
  if (f) f->path = strdup(path);
  if (!json || !f || !f->path) {
    s = kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "safetensors file %s: out of memory", path);
    goto fail;
  }
  r = pread_all(fd, json, (size_t)hl, 8);
  if (r < 0 || (uint64_t)r != hl) {
    s = kiln_error(r < 0 ? KILN_ERR_IO : KILN_ERR_CORRUPT, loc, "safetensors file %s: truncated header (%s)", path,
                   r < 0 ? strerror(errno) : "short read");
    goto fail;
  }
  s = kiln_st_header_parse_owned(json, (size_t)hl, size - 8 - hl, &f->h, &err);
  json = NULL; /* owned by f->h now, or freed */
  if (s) {
    s = kiln_error(s, loc, "safetensors file %s: %s", path, err.msg);
    goto fail;
  }
  f->fd = fd;
  f->data_start = 8 + hl;
  *out = f;
  return KILN_OK;
fail:
  free(json);
  if (f) free(f->path);
  free(f);
  close(fd);
  return s;
}

int kiln_st_count(const kiln_st_file *f) { return f ? f->h.n : 0; }

const char *kiln_st_name(const kiln_st_file *f, int i) {
  return f && i >= 0 && i < f->h.n ? f->h.entries[i].name : NULL;
}

int kiln_st_find(const kiln_st_file *f, const char *name) {
  return f && name ? kiln_st_header_find(&f->h, name) : -1;
}

int kiln_st_shape(const kiln_st_file *f, int i, int64_t *out) {
  if (!f || i < 0 || i >= f->h.n) return -1;
  const kiln_st_entry *e = &f->h.entries[i];
  if (out) memcpy(out, e->shape, sizeof(int64_t) * (size_t)e->rank);
  return e->rank;
}

const char *kiln_st_dtype_str(const kiln_st_file *f, int i) {
  return f && i >= 0 && i < f->h.n ? kiln_st_dt_name(f->h.entries[i].dtype) : NULL;
}

int kiln_st_dtype(const kiln_st_file *f, int i) {
  return f && i >= 0 && i < f->h.n ? kiln_of_st(f->h.entries[i].dtype) : -1;
}

const char *kiln_st_metadata(const kiln_st_file *f, const char *key) {
  if (!f || !key) return NULL;
  for (int i = 0; i < f->h.n_meta; i++)
    if (!strcmp(f->h.meta[2 * i], key)) return f->h.meta[2 * i + 1];
  return NULL;
}

/* Convert numel elements of st dtype `d` at src into kiln dtype kd at dst. */
static void convert(kiln_st_dt d, const uint8_t *src, void *dst, size_t numel) {
  for (size_t i = 0; i < numel; i++) {
    switch (d) {
      case KILN_ST_U16: {
        uint16_t v;
        memcpy(&v, src + 2 * i, 2);
        ((int32_t *)dst)[i] = v;
        break;
      }
      case KILN_ST_I16: {
        int16_t v;
        memcpy(&v, src + 2 * i, 2);
        ((int32_t *)dst)[i] = v;
        break;
      }
      case KILN_ST_U32: {
        uint32_t v;
        memcpy(&v, src + 4 * i, 4);
        ((int64_t *)dst)[i] = v;
        break;
      }
      default: break;
    }
  }
}

kiln_tensor kiln_st_tensor_at(kiln_st_file *f, const char *name, kiln_loc loc) {
  if (!f || !name) return kiln_api_fail_at(KILN_ERR_INVALID_ARGUMENT, loc, "st_tensor: file or name is NULL");
  int i = kiln_st_header_find(&f->h, name);
  if (i < 0)
    return kiln_api_fail_at(KILN_ERR_INVALID_ARGUMENT, loc, "safetensors file %s: no tensor named \"%.200s\"", f->path,
                            name);
  const kiln_st_entry *e = &f->h.entries[i];
  int kd = kiln_of_st(e->dtype);
  if (kd < 0)
    return kiln_api_fail_at(KILN_ERR_UNSUPPORTED, loc,
                            "safetensors file %s: tensor \"%.200s\" has dtype %s, which kiln cannot load", f->path,
                            name, kiln_st_dt_name(e->dtype));
  size_t bytes = (size_t)(e->end - e->begin), numel = bytes / kiln_st_dt_bytes(e->dtype);
  int needs_convert = kiln_st_dt_bytes(e->dtype) != kiln_dtype_size((kiln_dtype)kd);
  uint8_t *raw = malloc(bytes ? bytes : 1);
  void *conv = needs_convert ? malloc(numel ? numel * kiln_dtype_size((kiln_dtype)kd) : 1) : NULL;
  kiln_tensor t;
  if (!raw || (needs_convert && !conv)) {
    t = kiln_api_fail_at(KILN_ERR_OUT_OF_MEMORY, loc, "safetensors file %s: out of memory for tensor \"%.200s\"",
                         f->path, name);
    goto out;
  }
  ssize_t r = pread_all(f->fd, raw, bytes, f->data_start + e->begin);
  if (r < 0 || (size_t)r != bytes) {
    t = kiln_api_fail_at(r < 0 ? KILN_ERR_IO : KILN_ERR_CORRUPT, loc,
                         "safetensors file %s: cannot read tensor \"%.200s\" (%s)", f->path, name,
                         r < 0 ? strerror(errno) : "file shorter than when it was opened");
    goto out;
  }
  if (e->dtype == KILN_ST_BOOL)
    for (size_t k = 0; k < bytes; k++) raw[k] = raw[k] != 0; /* kiln's BOOL is exactly 0 or 1 */
  if (needs_convert) convert(e->dtype, raw, conv, numel);
  t = kiln_from_host_at(needs_convert ? conv : raw, (kiln_dtype)kd, e->rank, e->shape, loc);
out:
  free(raw);
  free(conv);
  return t;
}

/* A conversion from dtype a to b that keeps every value, for the dtypes
 * older kiln loaded converted: a BF16 or F16 checkpoint into f32
 * parameters, U8/I8 data into i32 (loading into a tensor of the file's
 * own dtype needs none). */
static int widens(kiln_dtype a, kiln_dtype b) {
  switch (a) {
    case KILN_BF16: case KILN_F16: return b == KILN_F32 || b == KILN_F64;
    case KILN_F32: return b == KILN_F64;
    case KILN_U8: case KILN_I8: return b == KILN_I32 || b == KILN_I64;
    case KILN_I32: return b == KILN_I64;
    default: return 0;
  }
}

kiln_status kiln_st_load_into_at(kiln_st_file *f, const char *name, kiln_tensor dst, kiln_loc loc) {
  if (!f || !name) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "st_load_into: file or name is NULL");
  int i = kiln_st_header_find(&f->h, name);
  if (i < 0)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "safetensors file %s: no tensor named \"%.200s\"", f->path,
                      name);
  if (!kiln_is_valid(dst))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "st_load_into \"%.200s\": destination is null, stale or poisoned",
                      name);
  const kiln_st_entry *e = &f->h.entries[i];
  int64_t shape[KILN_MAX_RANK];
  int rank = kiln_shape(dst, shape);
  int same = rank == e->rank && !memcmp(shape, e->shape, sizeof(int64_t) * (size_t)rank);
  int kd = kiln_of_st(e->dtype);
  kiln_dtype dd = kiln_dtype_of(dst);
  if (!same || (kd != (int)dd && !(kd >= 0 && widens((kiln_dtype)kd, dd)))) {
    char fs[160] = "", ds[160] = "";
    size_t a = 0, b = 0;
    for (int d = 0; d < e->rank && a < sizeof fs - 24; d++)
      a += (size_t)snprintf(fs + a, sizeof fs - a, "%s%lld", d ? "," : "", (long long)e->shape[d]);
    for (int d = 0; d < rank && b < sizeof ds - 24; d++)
      b += (size_t)snprintf(ds + b, sizeof ds - b, "%s%lld", d ? "," : "", (long long)shape[d]);
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
                      "safetensors file %s: tensor \"%.200s\" is %s [%s] but the destination is %s [%s]", f->path,
                      name, kiln_st_dt_name(e->dtype), fs, kiln_dtype_name(kiln_dtype_of(dst)), ds);
  }
  kiln_tensor t = kiln_st_tensor_at(f, name, loc);
  if (!kiln_is_valid(t)) return kiln_last_status() ? kiln_last_status() : KILN_ERR_INTERNAL;
  if (kd != (int)dd) t = kiln_cast_at(t, dd, loc);
  kiln_assign_at(dst, t, loc);
  if (!kiln_is_valid(dst)) return kiln_last_status() ? kiln_last_status() : KILN_ERR_INTERNAL;
  return KILN_OK;
}

void kiln_st_file_destroy(kiln_st_file *f) {
  if (!f) return;
  close(f->fd);
  kiln_st_header_free(&f->h);
  free(f->path);
  free(f);
}
