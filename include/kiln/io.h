/* kiln checkpoints: named tensors in the safetensors format.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON header
 * ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
 * "__metadata__": {"k": "v"}}), then the raw little-endian data. Files kiln
 * writes are read by the Hugging Face `safetensors` package and vice versa
 * (tests/interop). See docs/checkpoints.md.
 *
 * Errors: every function records a sticky error (kiln_last_error) that names
 * the file, the problem and the caller's file:line, and returns a status or
 * a poisoned tensor. A damaged or hostile file (truncated, oversized header,
 * bad JSON, unknown dtype, offsets out of range / overlapping / not matching
 * the shape, duplicate names, ...) is rejected as KILN_ERR_CORRUPT; it never
 * crashes kiln and never makes it read outside the file.
 *
 * Threads: like the tracing API, for the tracing thread only. A kiln_st_file
 * must not be used from two threads at once.
 */
#ifndef KILN_IO_H
#define KILN_IO_H

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Save n named tensors to `path` with their current values: pending work is
 * computed first (like kiln_to_host). The write is atomic: the file is
 * written to a temp file in the same directory, fsync'ed, renamed over
 * `path` and the directory fsync'ed, so a crash or a failed save leaves the
 * previous file intact (never a half-written one). The new file has mode
 * 0600 (checkpoints are private by default).
 *   names:    n distinct, non-NULL UTF-8 strings (not "__metadata__").
 *   tensors:  n live tensors of any kiln dtype (F32 F64 BF16 F16 I32 I64 U8
 *             I8 BOOL), each written as the same safetensors dtype.
 *   metadata: NULL, or a NULL-terminated array of key, value, key, value, ...
 *             strings stored in "__metadata__".
 * The caller keeps ownership of every argument. Errors:
 * KILN_ERR_INVALID_ARGUMENT (bad names, stale or poisoned tensor: nothing is
 * written), KILN_ERR_IO (the file system; the old file is untouched),
 * KILN_ERR_OUT_OF_MEMORY. The whole file is assembled in host memory first. */
#define kiln_save_safetensors(path, n, names, tensors, metadata) \
  kiln_save_safetensors_at((path), (n), (names), (tensors), (metadata), KILN_HERE)
kiln_status kiln_save_safetensors_at(const char *path, int n, const char *const *names, const kiln_tensor *tensors,
                                     const char *const *metadata, kiln_loc loc);

/* An open, validated safetensors file. */
typedef struct kiln_st_file kiln_st_file;

/* Open `path` and validate its header (the data is read lazily, per tensor).
 * On success *out is a new reader (free with kiln_st_file_destroy); on error
 * *out is NULL. Errors: KILN_ERR_IO (cannot open/read), KILN_ERR_CORRUPT (any
 * malformed file: the message says what), KILN_ERR_UNSUPPORTED (a valid file
 * kiln cannot represent, e.g. rank > 8), KILN_ERR_INVALID_ARGUMENT. */
#define kiln_st_file_create(path, out) kiln_st_file_create_at((path), (out), KILN_HERE)
kiln_status kiln_st_file_create_at(const char *path, kiln_st_file **out, kiln_loc loc);

/* Number of tensors in the file (0 for NULL). */
int kiln_st_count(const kiln_st_file *f);
/* Name of tensor i (header order), or NULL when i is out of range. Owned by
 * f, valid until kiln_st_file_destroy. */
const char *kiln_st_name(const kiln_st_file *f, int i);
/* Index of the tensor named `name`, or -1. */
int kiln_st_find(const kiln_st_file *f, const char *name);
/* Shape of tensor i into out[KILN_MAX_RANK]; returns its rank, -1 if i is
 * out of range. */
int kiln_st_shape(const kiln_st_file *f, int i, int64_t *out);
/* The file's dtype name of tensor i ("F32", "BF16", "U8", ...), or NULL. */
const char *kiln_st_dtype_str(const kiln_st_file *f, int i);
/* The kiln dtype tensor i loads as (F32, F64, I32, I64, BOOL, BF16, F16, U8
 * and I8 as themselves; U16/I16 as I32; U32 as I64), or -1 if kiln cannot
 * load it (U64, F8_*) or i is out of range. */
int kiln_st_dtype(const kiln_st_file *f, int i);
/* Value of metadata key `key`, or NULL. Owned by f. */
const char *kiln_st_metadata(const kiln_st_file *f, const char *key);

/* A new step-owned tensor (kiln_keep it to keep it) holding the data of the
 * entry `name`, converted as kiln_st_dtype says. A missing name, an
 * unloadable dtype or a file changed since it was opened record an error
 * (INVALID_ARGUMENT, UNSUPPORTED, CORRUPT/IO) and return a poisoned tensor.
 * BOOL bytes other than 0 load as 1. */
#define kiln_st_tensor(f, name) kiln_st_tensor_at((f), (name), KILN_HERE)
kiln_tensor kiln_st_tensor_at(kiln_st_file *f, const char *name, kiln_loc loc);

/* Copy the entry `name` into the existing (kept) tensor dst, in place
 * (kiln_assign): shapes must match, and the loaded dtype must be dst's or
 * convert to it exactly (BF16/F16 into f32 or f64, F32 into f64, U8/I8 into
 * i32 or i64, I32 into i64; anything narrower is refused: cast after loading).
 * Errors as
 * kiln_st_tensor, plus KILN_ERR_INVALID_ARGUMENT on a shape/dtype mismatch
 * (dst is then unchanged). */
#define kiln_st_load_into(f, name, dst) kiln_st_load_into_at((f), (name), (dst), KILN_HERE)
kiln_status kiln_st_load_into_at(kiln_st_file *f, const char *name, kiln_tensor dst, kiln_loc loc);

/* Close the file and free the reader. Tensors made from it stay valid.
 * NULL is a no-op. */
void kiln_st_file_destroy(kiln_st_file *f);

#ifdef __cplusplus
}
#endif
#endif /* KILN_IO_H */
