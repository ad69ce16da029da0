/* TensorBoard scalar event files: TFRecord framing around hand-encoded
 * `tensorflow.Event` protobufs (see docs/tensorboard.md for the layout and
 * for why no protobuf library is used). */
#include "io/tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/hash.h"
#include "base/status.h"

struct kiln_summary_writer {
  FILE *f;
  char *path;
  uint8_t *scratch; /* one encoded record; grows for long tags */
  size_t scratch_cap;
  int failed_errno; /* 0, or the errno of the first failed write */
};

/* ───────────── framing ───────────── */

uint32_t kiln_tfrecord_masked_crc(const void *data, size_t n) {
  uint32_t c = kiln_crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void kiln_tfrecord_header(uint8_t out[KILN_TFRECORD_HEADER_BYTES], uint64_t len) {
  for (int i = 0; i < 8; i++) out[i] = (uint8_t)(len >> (8 * i));
  put_le32(out + 8, kiln_tfrecord_masked_crc(out, 8));
}

/* ───────────── protobuf encoding ─────────────
 * A cursor that counts every byte but stores only those that fit, so one
 * pass both sizes and encodes (snprintf-style). */
typedef struct pb {
  uint8_t *p;
  size_t n, cap;
} pb;

static void pb_byte(pb *b, uint8_t v) {
  if (b->n < b->cap) b->p[b->n] = v;
  b->n++;
}
static void pb_bytes(pb *b, const void *src, size_t n) {
  const uint8_t *s = src;
  for (size_t i = 0; i < n; i++) pb_byte(b, s[i]);
}
static void pb_varint(pb *b, uint64_t v) {
  while (v >= 0x80) {
    pb_byte(b, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  pb_byte(b, (uint8_t)v);
}
static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}
/* Tag byte of field `field` with wire type `wt` (all our fields are < 16). */
static void pb_key(pb *b, unsigned field, unsigned wt) { pb_varint(b, (uint64_t)(field << 3 | wt)); }

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };
/* tensorflow.Event and tensorflow.Summary(.Value) field numbers. */
enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5 };
enum { SUM_VALUE = 1 };
enum { VAL_TAG = 1, VAL_SIMPLE_VALUE = 2 };

/* Protobuf fixed64/fixed32 are little-endian IEEE bits, on any host. */
static void pb_double(pb *b, double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  for (int i = 0; i < 8; i++) pb_byte(b, (uint8_t)(u >> (8 * i)));
}
static void pb_float(pb *b, float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  for (int i = 0; i < 4; i++) pb_byte(b, (uint8_t)(u >> (8 * i)));
}

size_t kiln_tfevents_encode_version(uint8_t *out, size_t cap, double wall_time) {
  pb b = {out, 0, cap};
  size_t vlen = sizeof KILN_TFEVENTS_FILE_VERSION - 1;
  pb_key(&b, EV_WALL_TIME, WT_FIXED64);
  pb_double(&b, wall_time);
  pb_key(&b, EV_FILE_VERSION, WT_LEN);
  pb_varint(&b, vlen);
  pb_bytes(&b, KILN_TFEVENTS_FILE_VERSION, vlen);
  return b.n;
}

size_t kiln_tfevents_encode_scalar(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                                   size_t tag_len, float value) {
  /* Length-delimited submessages need their size up front: every key here
   * is one byte, so the sizes are plain sums. */
  size_t value_len = 1 + varint_len(tag_len) + tag_len + 1 + 4;
  size_t summary_len = 1 + varint_len(value_len) + value_len;
  pb b = {out, 0, cap};
  pb_key(&b, EV_WALL_TIME, WT_FIXED64);
  pb_double(&b, wall_time);
  if (step != 0) { /* proto3 omits defaults; negative steps are 10-byte varints */
    pb_key(&b, EV_STEP, WT_VARINT);
    pb_varint(&b, (uint64_t)step);
  }
  pb_key(&b, EV_SUMMARY, WT_LEN);
  pb_varint(&b, summary_len);
  pb_key(&b, SUM_VALUE, WT_LEN);
  pb_varint(&b, value_len);
  pb_key(&b, VAL_TAG, WT_LEN);
  pb_varint(&b, tag_len);
  pb_bytes(&b, tag, tag_len);
  pb_key(&b, VAL_SIMPLE_VALUE, WT_FIXED32);
  pb_float(&b, value);
  return b.n;
}

int kiln_tfevents_utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t k;
    unsigned cp, min;
    if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07, min = 0x10000;
    else return 0; /* a continuation byte or 0xF8..0xFF as a lead byte */
    if (n - i <= k) return 0;
    for (size_t j = 1; j <= k; j++) {
      if ((p[i + j] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (p[i + j] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += k + 1;
  }
  return 1;
}

/* ───────────── the writer ───────────── */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Report the writer's earlier failure again (no new write is attempted). */
static kiln_status report_failed(const kiln_summary_writer *w, kiln_loc loc) {
  return kiln_error(KILN_ERR_IO, loc, "summary file %s: an earlier write failed (%s); nothing more is written",
                    w->path, strerror(w->failed_errno));
}

static kiln_status write_failed(kiln_summary_writer *w, int err, const char *what, kiln_loc loc) {
  if (!err) err = EIO; /* stdio does not always set errno */
  if (!w->failed_errno) w->failed_errno = err;
  return kiln_error(KILN_ERR_IO, loc, "summary file %s: %s failed: %s", w->path, what, strerror(err));
}

/* Frame `n` bytes of w->scratch as one TFRecord and hand it to stdio. */
static kiln_status write_record(kiln_summary_writer *w, size_t n, kiln_loc loc) {
  uint8_t hdr[KILN_TFRECORD_HEADER_BYTES], ftr[KILN_TFRECORD_FOOTER_BYTES];
  kiln_tfrecord_header(hdr, n);
  put_le32(ftr, kiln_tfrecord_masked_crc(w->scratch, n));
  errno = 0;
  if (fwrite(hdr, 1, sizeof hdr, w->f) != sizeof hdr || fwrite(w->scratch, 1, n, w->f) != n ||
      fwrite(ftr, 1, sizeof ftr, w->f) != sizeof ftr)
    return write_failed(w, errno, "write", loc);
  return KILN_OK;
}

/* Make w->scratch hold at least n bytes. */
static kiln_status reserve(kiln_summary_writer *w, size_t n, kiln_loc loc) {
  if (n <= w->scratch_cap) return KILN_OK;
  size_t cap = w->scratch_cap ? w->scratch_cap : 256;
  while (cap < n) cap *= 2;
  uint8_t *p = realloc(w->scratch, cap);
  if (!p) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "summary record of %zu bytes", n);
  w->scratch = p;
  w->scratch_cap = cap;
  return KILN_OK;
}

static void writer_free(kiln_summary_writer *w) {
  if (w->f) fclose(w->f);
  free(w->path);
  free(w->scratch);
  free(w);
}

/* Wrap an open fd (ownership passes here) into a writer *out and write the
 * file-version record; on error *out stays NULL (fd closed, path freed). */
static kiln_status writer_start(int fd, char *path, kiln_summary_writer **out, kiln_loc loc) {
  kiln_summary_writer *w = calloc(1, sizeof *w);
  if (!w) {
    close(fd);
    kiln_status s = kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "summary writer for %s", path);
    free(path);
    return s;
  }
  w->path = path;
  w->f = fdopen(fd, "wb");
  if (!w->f) {
    int e = errno;
    close(fd);
    kiln_status s = kiln_error(KILN_ERR_IO, loc, "summary file %s: fdopen: %s", path, strerror(e));
    writer_free(w);
    return s;
  }
  size_t n = kiln_tfevents_encode_version(NULL, 0, 0.0);
  kiln_status s = reserve(w, n, loc);
  if (s != KILN_OK) {
    writer_free(w);
    return s;
  }
  kiln_tfevents_encode_version(w->scratch, w->scratch_cap, now_seconds());
  /* Flushed at once: TensorBoard shows the run as soon as it starts. */
  s = write_record(w, n, loc);
  if (s == KILN_OK) s = kiln_summary_flush_at(w, loc);
  if (s != KILN_OK) {
    writer_free(w);
    return s;
  }
  *out = w;
  return KILN_OK;
}

kiln_summary_writer *kiln_tfevents_open_file(const char *path, kiln_loc loc) {
  if (!path || !*path) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "summary file path is %s", path ? "empty" : "NULL");
    return NULL;
  }
  /* The shared output rule (base/fs.h), for a stream: truncate a regular
   * file (through a symlink to one), write a character device as is,
   * refuse a FIFO (it would block), a directory or a block device. */
  int fd;
  kiln_err err = {0};
  if (kiln_fs_open_output_stream(path, "summary file", &fd, &err) != KILN_OK) {
    kiln_error(KILN_ERR_IO, loc, "%s", err.msg);
    return NULL;
  }
  char *copy = strdup(path);
  if (!copy) {
    close(fd);
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "summary writer for %s", path);
    return NULL;
  }
  kiln_summary_writer *w = NULL;
  writer_start(fd, copy, &w, loc);
  return w;
}

/* mkdir -p with mode 0755; 0 or an errno, with the failing prefix in
 * bad (capacity cap). */
static int mkdirs(const char *dir, char *bad, size_t cap) {
  size_t n = strlen(dir);
  char *p = malloc(n + 1);
  if (!p) return ENOMEM;
  memcpy(p, dir, n + 1);
  int err = 0;
  for (size_t i = 1; i <= n && !err; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    char saved = p[i];
    p[i] = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) err = errno;
    if (!err && (saved == '\0' || p[i + 1] == '\0')) { /* the leaf must be a directory */
      struct stat st;
      if (stat(p, &st) != 0) err = errno;
      else if (!S_ISDIR(st.st_mode)) err = ENOTDIR;
    }
    if (err) snprintf(bad, cap, "%s", p);
    p[i] = saved;
  }
  free(p);
  return err;
}

/* Host name for the file name: '/' or control characters would break the
 * path, so they become '_'. */
static void host_name(char *out, size_t cap) {
  if (gethostname(out, cap) != 0 || !out[0]) snprintf(out, cap, "localhost");
  out[cap - 1] = '\0';
  for (char *c = out; *c; c++)
    if (*c == '/' || (unsigned char)*c < 0x20 || *c == 0x7f) *c = '_';
}

/* Writers opened by this process: the last number in file names, so two
 * writers started in the same second never collide (as in TensorFlow). */
static atomic_uint g_writer_count;

kiln_status kiln_summary_writer_create_at(const char *logdir, kiln_summary_writer **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "summary_writer");
  if (!logdir || !*logdir) {
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "summary log directory is %s", logdir ? "empty" : "NULL");
  }
  char bad[4096];
  int err = mkdirs(logdir, bad, sizeof bad);
  if (err == ENOMEM) {
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "summary log directory %s", logdir);
  }
  if (err) {
    return kiln_error(KILN_ERR_IO, loc, "cannot create summary log directory %s (at %s): %s", logdir, bad, strerror(err));
  }
  char host[256];
  host_name(host, sizeof host);
  long long t = (long long)time(NULL);
  long pid = (long)getpid();
  /* A name already taken (another process with our pid on a shared disk,
   * a restored snapshot) is skipped, never overwritten. */
  for (int attempt = 0; attempt < 1000; attempt++) {
    unsigned uid = atomic_fetch_add(&g_writer_count, 1);
    const char *fmt = "%s/events.out.tfevents.%010lld.%s.%ld.%u";
    int len = snprintf(NULL, 0, fmt, logdir, t, host, pid, uid);
    char *path = len < 0 ? NULL : malloc((size_t)len + 1);
    if (!path) {
      return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "summary file name in %s", logdir);
    }
    snprintf(path, (size_t)len + 1, fmt, logdir, t, host, pid, uid);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return writer_start(fd, path, out, loc);
    int e = errno;
    if (e != EEXIST) {
      kiln_status s = kiln_error(KILN_ERR_IO, loc, "cannot create summary file %s: %s", path, strerror(e));
      free(path);
      return s;
    }
    free(path);
  }
  return kiln_error(KILN_ERR_IO, loc, "cannot create a summary file in %s: 1000 names already taken", logdir);
}

kiln_status kiln_summary_scalar_at(kiln_summary_writer *w, const char *tag, int64_t step, double value,
                                   kiln_loc loc) {
  if (!w) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_summary_scalar: NULL writer");
  if (!tag || !*tag)
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_summary_scalar: tag is %s", tag ? "empty" : "NULL");
  size_t tag_len = strlen(tag);
  if (!kiln_tfevents_utf8_valid(tag, tag_len))
    return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_summary_scalar: tag is not valid UTF-8");
  if (w->failed_errno) return report_failed(w, loc);
  float v = (float)value; /* TensorBoard's simple_value is a float */
  size_t n = kiln_tfevents_encode_scalar(NULL, 0, 0.0, step, tag, tag_len, v);
  kiln_status s = reserve(w, n, loc);
  if (s != KILN_OK) return s;
  kiln_tfevents_encode_scalar(w->scratch, w->scratch_cap, now_seconds(), step, tag, tag_len, v);
  return write_record(w, n, loc);
}

kiln_status kiln_summary_flush_at(kiln_summary_writer *w, kiln_loc loc) {
  if (!w) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_summary_flush: NULL writer");
  if (w->failed_errno) return report_failed(w, loc);
  errno = 0;
  if (fflush(w->f) != 0) return write_failed(w, errno, "flush", loc);
  return KILN_OK;
}

kiln_status kiln_summary_writer_destroy_at(kiln_summary_writer *w, kiln_loc loc) {
  if (!w) return KILN_OK;
  kiln_status s = kiln_summary_flush_at(w, loc);
  FILE *f = w->f;
  w->f = NULL;
  errno = 0;
  /* fclose can still fail (e.g. NFS reports write errors at close). */
  if (fclose(f) != 0 && s == KILN_OK) s = write_failed(w, errno, "close", loc);
  writer_free(w);
  return s;
}

const char *kiln_summary_path(const kiln_summary_writer *w) { return w ? w->path : NULL; }
