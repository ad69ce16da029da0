/* IDX reader: a bounds-checked parser over a memory buffer plus a file
 * loader that streams plain or gzip files (zlib) into one allocation. The
 * loader reads the header first and then exactly the payload it declares,
 * so a hostile file cannot make it allocate more than KILN_IDX_MAX_BYTES. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "base/fs.h"
#include "data/data_internal.h"

#define IDX_DTYPE_UBYTE 0x08

static uint32_t be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static const char *dtype_word(uint8_t t) {
  switch (t) {
    case 0x08: return "ubyte";
    case 0x09: return "sbyte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    default: return NULL;
  }
}

/* Validate the header in buf[0..len) and compute the header size and the
 * payload size it declares. Shared by the parser and the streaming loader
 * (which calls it on a partial buffer with need_all = 0). */
static kiln_status parse_header(const uint8_t *buf, size_t len, const char *name, kiln_idx *out,
                                size_t *header_len, kiln_err *err) {
  if (len < 4)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: not an IDX file: truncated header (%zu of 4 bytes)", name, len);
  if (buf[0] != 0 || buf[1] != 0)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: not an IDX file: bad magic %02x%02x%02x%02x", name, buf[0],
                        buf[1], buf[2], buf[3]);
  if (buf[2] != IDX_DTYPE_UBYTE) {
    const char *w = dtype_word(buf[2]);
    if (w)
      return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "%s: IDX dtype 0x%02x (%s) is not supported (only 0x08 ubyte)",
                          name, buf[2], w);
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: not an IDX file: unknown dtype byte 0x%02x", name, buf[2]);
  }
  int rank = buf[3];
  if (rank == 0) return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: IDX rank is 0", name);
  if (rank > KILN_MAX_RANK)
    return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "%s: IDX rank %d exceeds the maximum %d", name, rank, KILN_MAX_RANK);
  size_t hl = 4 + 4 * (size_t)rank;
  if (len < hl)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: truncated IDX header (%zu of %zu bytes)", name, len, hl);
  memset(out, 0, sizeof *out);
  out->rank = rank;
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) {
    uint32_t d = be32(buf + 4 + 4 * (size_t)i);
    out->dims[i] = d;
    /* Bound the product before multiplying so it can never overflow. */
    if (d != 0 && numel > KILN_IDX_MAX_BYTES / (int64_t)d)
      return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: IDX dims declare more than %lld bytes of data (dim %d = %u)",
                          name, (long long)KILN_IDX_MAX_BYTES, i, d);
    numel *= d;
  }
  out->numel = numel;
  *header_len = hl;
  return KILN_OK;
}

kiln_status kiln_idx_parse_err(const uint8_t *buf, size_t len, const char *name, kiln_idx *out, kiln_err *err) {
  if (!name) name = "<memory>";
  if (!out) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: idx_parse: out is NULL", name);
  if (!buf && len) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: idx_parse: buffer is NULL", name);
  kiln_idx h;
  size_t hl = 0;
  kiln_status s = parse_header(buf, len, name, &h, &hl, err);
  if (s != KILN_OK) return s;
  size_t have = len - hl, want = (size_t)h.numel;
  if (have < want)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: truncated IDX data: %zu of %zu bytes", name, have, want);
  if (have > want)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: IDX file has %zu trailing bytes after %zu bytes of data", name,
                        have - want, want);
  h.data = buf + hl;
  *out = h;
  return KILN_OK;
}

kiln_status kiln_idx_parse_at(const void *buf, size_t len, const char *name, kiln_idx *out, kiln_loc loc) {
  kiln_err err = {0};
  kiln_status s = kiln_idx_parse_err(buf, len, name, out, &err);
  if (s != KILN_OK) kiln_error(s, loc, "%s", err.msg);
  return s;
}

/* ───────────── file loading ───────────── */

/* A byte source: plain stdio or zlib's gzFile (which also reads plain
 * files, but we only depend on zlib when the build has it). */
typedef struct src {
  FILE *f;
  gzFile gz;
} src;

/* Read up to n bytes; returns bytes read (short at EOF) or -1 on error. */
static long long src_read(src *s, void *dst, size_t n) {
  if (s->gz) {
    size_t got = 0;
    while (got < n) {
      unsigned chunk = n - got > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
      int r = gzread(s->gz, (uint8_t *)dst + got, chunk);
      if (r < 0) return -1;
      if (r == 0) break;
      got += (size_t)r;
    }
    return (long long)got;
  }
  size_t r = fread(dst, 1, n, s->f);
  if (r < n && ferror(s->f)) return -1;
  return (long long)r;
}

static const char *src_error(src *s) {
  if (s->gz) {
    int code = 0;
    const char *m = gzerror(s->gz, &code);
    if (!m || !*m) return "read error";
    /* zlib prefixes its message with the name it was opened with, which
     * for gzdopen is "<fd:4>"; callers name the file themselves. */
    if (!strncmp(m, "<fd:", 4)) {
      const char *c = strstr(m, ": ");
      if (c) m = c + 2;
    }
    return m;
  }
  return strerror(errno);
}

/* The error for a failed src_read: corrupt gzip data (bad CRC, bad
 * deflate stream) is KILN_ERR_CORRUPT, anything else KILN_ERR_IO. */
static kiln_status read_failed(src *s, const char *path, kiln_err *err) {
  int code = 0;
  if (s->gz) (void)gzerror(s->gz, &code);
  if (code == Z_DATA_ERROR)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: corrupt gzip data: %s", path, src_error(s));
  return kiln_err_set(err, KILN_ERR_IO, "%s: read error: %s", path, src_error(s));
}

static void src_close(src *s) {
  if (s->gz) gzclose(s->gz);
  if (s->f) fclose(s->f);
}

static kiln_status load_err(const char *path, kiln_idx **out, kiln_err *err) {
  *out = NULL;
  src s = {0};
  /* Refuses a FIFO or a device without blocking on it (base/fs.h). */
  int in_fd;
  kiln_status os = kiln_fs_open_input(path, "IDX file", &in_fd, err);
  if (os != KILN_OK) return os;
  s.f = fdopen(in_fd, "rb");
  if (!s.f) {
    int e = errno;
    close(in_fd);
    return kiln_err_set(err, KILN_ERR_IO, "%s: cannot open: %s", path, strerror(e));
  }
  uint8_t magic[2] = {0, 0};
  size_t m = fread(magic, 1, 2, s.f);
  int gzipped = m == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  rewind(s.f);
  if (gzipped) {
    int fd = dup(fileno(s.f));
    fclose(s.f);
    s.f = NULL;
    s.gz = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!s.gz) {
      if (fd >= 0) close(fd);
      return kiln_err_set(err, KILN_ERR_IO, "%s: cannot open gzip stream", path);
    }
  }
  kiln_status st = KILN_OK;
  uint8_t hdr[4 + 4 * 255];
  kiln_idx h;
  size_t hl = 0;
  long long r = src_read(&s, hdr, 4);
  if (r < 0) {
    st = read_failed(&s, path, err);
    goto done;
  }
  st = parse_header(hdr, (size_t)r, path, &h, &hl, err);
  if (st != KILN_OK && (size_t)r == 4 && hdr[0] == 0 && hdr[1] == 0 && hdr[3] <= KILN_MAX_RANK && hdr[3] > 0 &&
      hdr[2] == IDX_DTYPE_UBYTE) {
    /* The first 4 bytes are fine: read the dims and check again. */
    size_t more = 4 * (size_t)hdr[3];
    long long r2 = src_read(&s, hdr + 4, more);
    if (r2 < 0) {
      st = read_failed(&s, path, err);
      goto done;
    }
    st = parse_header(hdr, 4 + (size_t)r2, path, &h, &hl, err);
  }
  if (st != KILN_OK) goto done;
  kiln_idx *idx = malloc(sizeof *idx + hl + (size_t)h.numel + 1);
  if (!idx) {
    st = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes", path, (long long)h.numel);
    goto done;
  }
  uint8_t *buf = (uint8_t *)(idx + 1);
  memcpy(buf, hdr, hl);
  /* One byte more than declared: reading it tells trailing data apart. */
  r = src_read(&s, buf + hl, (size_t)h.numel + 1);
  if (r < 0) {
    free(idx);
    st = read_failed(&s, path, err);
    goto done;
  }
  /* A longer file is reported as "trailing bytes" by the parser. */
  st = kiln_idx_parse_err(buf, hl + (size_t)r, path, idx, err);
  if (st != KILN_OK) {
    free(idx);
    goto done;
  }
  *out = idx;
done:
  src_close(&s);
  return st;
}

kiln_status kiln_idx_create_at(const char *path, kiln_idx **out, kiln_loc loc) {
  kiln_err err = {0};
  kiln_status s;
  if (!out) {
    s = kiln_err_set(&err, KILN_ERR_INVALID_ARGUMENT, "idx_load: out is NULL");
  } else if (!path) {
    *out = NULL;
    s = kiln_err_set(&err, KILN_ERR_INVALID_ARGUMENT, "idx_load: path is NULL");
  } else {
    s = load_err(path, out, &err);
  }
  if (s != KILN_OK) kiln_error(s, loc, "%s", err.msg);
  return s;
}

void kiln_idx_destroy(kiln_idx *idx) { free(idx); }
