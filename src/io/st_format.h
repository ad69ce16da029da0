/* The safetensors format in memory: header parsing, validation and encoding.
 *
 * Layout of a file: 8-byte little-endian header length N, N bytes of JSON
 * header (UTF-8, may be padded at the end with spaces), then the data
 * section. The header maps tensor names to {"dtype", "shape",
 * "data_offsets": [begin, end]} with offsets relative to the data section;
 * the optional "__metadata__" entry is an object of string values.
 *
 * Everything here works on memory buffers (no file system), so the fuzz
 * harness drives exactly the code that reads files. The parser treats the
 * input as hostile: every number is range-checked before use, the entries
 * must tile the data section exactly (no holes, no overlaps: a hole could
 * hide a second payload, an overlap would alias two tensors) and an
 * accepted header never makes a later read go outside the data section.
 *
 * Thread-safety: functions are reentrant (no shared state).
 */
#ifndef KILN_IO_ST_FORMAT_H
#define KILN_IO_ST_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Largest header accepted: the reference implementation's limit. Bounds the
 * memory a hostile file can make us allocate before any data is read. */
#define KILN_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

/* Every dtype of the safetensors spec (so files holding some kiln cannot
 * load still open, and their other tensors load). */
typedef enum kiln_st_dt {
  KILN_ST_BOOL,
  KILN_ST_U8,
  KILN_ST_I8,
  KILN_ST_U16,
  KILN_ST_I16,
  KILN_ST_F16,
  KILN_ST_BF16,
  KILN_ST_U32,
  KILN_ST_I32,
  KILN_ST_F32,
  KILN_ST_U64,
  KILN_ST_I64,
  KILN_ST_F64,
  KILN_ST_F8_E4M3,
  KILN_ST_F8_E5M2,
  KILN_ST_DTYPE_COUNT
} kiln_st_dt;

/* "F32", ... for a valid dtype, "?" otherwise. */
const char *kiln_st_dt_name(kiln_st_dt d);
/* Bytes per element (0 for an invalid dtype). */
size_t kiln_st_dt_bytes(kiln_st_dt d);

/* One tensor entry. Offsets are relative to the data section. In a parsed
 * header the name points into kiln_st_header.text. */
typedef struct kiln_st_entry {
  char *name; /* NUL-terminated UTF-8 (NUL-free) */
  kiln_st_dt dtype;
  int rank;
  int64_t shape[8];
  uint64_t begin, end;
} kiln_st_entry;

/* A parsed header. Owns its strings and arrays: kiln_st_header_free. */
typedef struct kiln_st_header {
  char *text;             /* the header text; names and metadata point into it */
  kiln_st_entry *entries; /* header order */
  int n;
  int *by_name; /* indices into entries sorted by name (for lookup) */
  char **meta;  /* n_meta key/value pairs: meta[2i] key, meta[2i+1] value */
  int n_meta;
  int has_meta; /* the header had a "__metadata__" object (possibly empty) */
} kiln_st_header;

/* Parse and validate the JSON header `json` (len bytes, not NUL-terminated)
 * for a data section of data_len bytes. On success fills *out (caller frees
 * with kiln_st_header_free). On failure *out is empty and err says what and
 * where ("header byte 17: expected ':'"); the code is KILN_ERR_CORRUPT for a
 * malformed header, KILN_ERR_UNSUPPORTED for a valid one kiln cannot
 * represent (rank > 8), KILN_ERR_OUT_OF_MEMORY. */
kiln_status kiln_st_header_parse(const char *json, size_t len, uint64_t data_len, kiln_st_header *out,
                                 kiln_err *err);

/* Same, taking ownership of the malloc'ed `json` (freed on failure, kept by
 * *out on success): strings are decoded in place, so parsing needs no
 * memory per string; the header's memory is its size plus about 96 bytes
 * per tensor and 16 per metadata pair, never more than about 4 times the
 * header. */
kiln_status kiln_st_header_parse_owned(char *json, size_t len, uint64_t data_len, kiln_st_header *out,
                                       kiln_err *err);

/* Check the 8-byte length prefix `prefix` of a file of file_size bytes:
 * sets *header_len. Errors (KILN_ERR_CORRUPT): file shorter than 8 bytes,
 * header larger than KILN_ST_MAX_HEADER or than the rest of the file. */
kiln_status kiln_st_prefix_check(const uint8_t *prefix, uint64_t file_size, uint64_t *header_len, kiln_err *err);

/* A whole file image in memory: prefix check + header parse. *data_start is
 * the offset of the data section in buf. */
kiln_status kiln_st_image_parse(const uint8_t *buf, size_t n, kiln_st_header *out, uint64_t *data_start,
                                kiln_err *err);

/* Index of the entry named `name`, or -1. O(log n). */
int kiln_st_header_find(const kiln_st_header *h, const char *name);

/* Encode h's entries (header order, their offsets as given) and metadata as
 * a JSON header padded with spaces to a multiple of 8 bytes (so the data
 * section is 8-aligned in the file). *out is malloc'ed (caller frees), not
 * NUL-terminated. Names and metadata must be valid UTF-8 without NUL.
 * Errors: KILN_ERR_INVALID_ARGUMENT (bad UTF-8), KILN_ERR_OUT_OF_MEMORY. */
kiln_status kiln_st_header_encode(const kiln_st_header *h, char **out, size_t *out_n, kiln_err *err);

/* 1 if s[0..n) is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
int kiln_st_utf8_valid(const char *s, size_t n);

void kiln_st_header_free(kiln_st_header *h);

#endif
