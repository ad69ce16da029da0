/* TensorBoard event files (include/kiln/summary.h): files written by kiln
 * are read back by an independent minimal reader written here — its own
 * bitwise CRC-32C, TFRecord framing with both checksums verified, a generic
 * protobuf field walker — and compared with what was logged. Also: CRC-32C
 * known answers, exact bytes of small records derived by hand from the
 * protobuf encoding rules, file naming, and errors (bad arguments, a log
 * directory that cannot be created, disk full, file size limit) that must
 * be reported, never abort.
 *
 * With KILN_TFEVENTS_OUT=<dir> the interop test writes its run into <dir>
 * and keeps it, for tests/interop/check_tfevents.sh (TensorBoard's own
 * reader). Keep interop_series() in sync with check_tfevents.py. */
#include <kiln/kiln.h>
#include <kiln/summary.h>

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/hash.h"
#include "io/tfevents.h"
#include "kt.h"

static char g_dir[256];

static void remove_dir(void) { kiln_fs_remove_tree(g_dir); }

static void start(void) {
  kiln_clear_error();
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "%s/kiln-tfevents-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    KT_CHECK(mkdtemp(g_dir) != NULL);
    atexit(remove_dir);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ───────────── the independent reader ───────────── */

/* Bitwise CRC-32C (reflected Castagnoli polynomial 0x82F63B78), no table:
 * deliberately not sharing code with src/base/hash.c. */
static uint32_t ref_crc32c(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}
static uint32_t ref_masked(const uint8_t *p, size_t n) {
  uint32_t c = ref_crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
static uint64_t le(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

typedef struct ev {
  int has_wall, has_version, nvalues, has_value;
  double wall_time;
  int64_t step;
  char version[64];
  char tag[16384];
  float value;
} ev;

/* Read a varint at *pos (< end); -1 on truncation or more than 10 bytes. */
static int rd_varint(const uint8_t *p, size_t end, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= end) return -1;
    uint8_t b = p[(*pos)++];
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

/* Walk the fields of one message in p[pos, end). Calls back per field with
 * its number, wire type and payload (varint value, or bytes). Returns -1 on
 * a malformed message or when the callback rejects a field. */
typedef int (*field_fn)(ev *e, unsigned field, unsigned wt, uint64_t v, const uint8_t *bytes, size_t n);
static int walk(const uint8_t *p, size_t pos, size_t end, ev *e, field_fn fn) {
  while (pos < end) {
    uint64_t key, v = 0;
    if (rd_varint(p, end, &pos, &key) != 0) return -1;
    unsigned field = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
    const uint8_t *bytes = NULL;
    size_t n = 0;
    if (wt == 0) {
      if (rd_varint(p, end, &pos, &v) != 0) return -1;
    } else if (wt == 1 || wt == 5) {
      n = wt == 1 ? 8 : 4;
      if (end - pos < n) return -1;
      v = le(p + pos, (int)n);
      pos += n;
    } else if (wt == 2) {
      if (rd_varint(p, end, &pos, &v) != 0 || v > end - pos) return -1;
      bytes = p + pos;
      n = (size_t)v;
      pos += n;
    } else {
      return -1;
    }
    if (fn(e, field, wt, v, bytes, n) != 0) return -1;
  }
  return 0;
}
static int value_field(ev *e, unsigned f, unsigned wt, uint64_t v, const uint8_t *b, size_t n) {
  if (f == 1 && wt == 2 && n < sizeof e->tag) {
    memcpy(e->tag, b, n);
    e->tag[n] = '\0';
    return 0;
  }
  if (f == 2 && wt == 5) {
    uint32_t u = (uint32_t)v;
    memcpy(&e->value, &u, 4);
    e->has_value = 1;
    return 0;
  }
  return -1; /* kiln writes nothing else */
}
static int summary_field(ev *e, unsigned f, unsigned wt, uint64_t v, const uint8_t *b, size_t n) {
  if (f != 1 || wt != 2) return -1;
  e->nvalues++;
  return walk(b, 0, n, e, value_field);
}
static int event_field(ev *e, unsigned f, unsigned wt, uint64_t v, const uint8_t *b, size_t n) {
  if (f == 1 && wt == 1) {
    memcpy(&e->wall_time, &v, 8);
    e->has_wall = 1;
  } else if (f == 2 && wt == 0) {
    e->step = (int64_t)v;
  } else if (f == 3 && wt == 2 && n < sizeof e->version) {
    memcpy(e->version, b, n);
    e->version[n] = '\0';
    e->has_version = 1;
  } else if (f == 5 && wt == 2) {
    return walk(b, 0, n, e, summary_field);
  } else {
    return -1;
  }
  return 0;
}

/* Parse every complete record of the file into evs (capacity cap). Returns
 * the number of records, or -1 on a bad checksum / malformed event (with a
 * test failure). *tail gets the bytes after the last complete record. */
static int read_events(const char *path, ev *evs, int cap, size_t *tail) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    KT_FAIL("cannot open %s", path);
    return -1;
  }
  static uint8_t buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  size_t pos = 0;
  int count = 0;
  while (len - pos >= 12) {
    uint64_t n = le(buf + pos, 8);
    if ((uint32_t)le(buf + pos + 8, 4) != ref_masked(buf + pos, 8)) {
      KT_FAIL("record %d: length CRC mismatch", count);
      return -1;
    }
    if (n > len - pos - 12 || len - pos - 12 - n < 4) break; /* incomplete record */
    const uint8_t *data = buf + pos + 12;
    if ((uint32_t)le(data + n, 4) != ref_masked(data, (size_t)n)) {
      KT_FAIL("record %d: data CRC mismatch", count);
      return -1;
    }
    if (count >= cap) {
      KT_FAIL("more than %d records", cap);
      return -1;
    }
    memset(&evs[count], 0, sizeof evs[count]);
    if (walk(data, 0, (size_t)n, &evs[count], event_field) != 0) {
      KT_FAIL("record %d: malformed Event", count);
      return -1;
    }
    count++;
    pos += 12 + (size_t)n + 4;
  }
  if (tail) *tail = len - pos;
  else KT_EQ_INT(len - pos, 0);
  return count;
}

/* ───────────── checksums and exact bytes ───────────── */

KT_TEST(crc32c_known_answers) {
  KT_EQ_INT(kiln_crc32c("123456789", 9), 0xE3069283u); /* the CRC-32C check value */
  KT_EQ_INT(ref_crc32c((const uint8_t *)"123456789", 9), 0xE3069283u);
  uint8_t zeros[32] = {0}, ones[32], inc[32];
  for (int i = 0; i < 32; i++) ones[i] = 0xFF, inc[i] = (uint8_t)i;
  /* RFC 3720 (iSCSI) appendix B.4 test vectors */
  KT_EQ_INT(kiln_crc32c(zeros, 32), 0x8A9136AAu);
  KT_EQ_INT(kiln_crc32c(ones, 32), 0x62A8AB43u);
  KT_EQ_INT(kiln_crc32c(inc, 32), 0x46DD794Eu);
  KT_EQ_INT(kiln_crc32c("", 0), 0);
  uint32_t c = 0xE3069283u;
  KT_EQ_INT(kiln_tfrecord_masked_crc("123456789", 9), (uint32_t)(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

KT_TEST(record_header_bytes) {
  uint8_t h[12];
  kiln_tfrecord_header(h, 0x0102030405060708ull);
  const uint8_t want[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  KT_CHECK(memcmp(h, want, 8) == 0);
  KT_EQ_INT(le(h + 8, 4), ref_masked(h, 8));
}

KT_TEST(event_bytes_by_hand) {
  uint8_t b[64];
  /* Event{wall_time=1.0, file_version="brain.Event:2"}: key 0x09 (field 1,
   * fixed64), 1.0 = 0x3FF0000000000000 LE; key 0x1a (field 3, bytes), 13. */
  const uint8_t ver[] = {0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x1a, 13, 'b', 'r', 'a', 'i', 'n', '.', 'E', 'v', 'e',
                         'n', 't', ':', '2'};
  KT_EQ_INT(kiln_tfevents_encode_version(b, sizeof b, 1.0), sizeof ver);
  KT_CHECK(memcmp(b, ver, sizeof ver) == 0);
  /* Event{wall_time=2.0, step=300, summary{value{tag="a", simple_value=1}}}:
   * 300 = varint ac 02; summary (0x2a) of 10 bytes = value (0x0a) of 8
   * bytes = tag (0x0a) 1 "a", simple_value (0x15) 1.0f = 00 00 80 3f. */
  const uint8_t sc[] = {0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0xac, 0x02, 0x2a, 10, 0x0a, 8,
                        0x0a, 1, 'a', 0x15, 0, 0, 0x80, 0x3f};
  KT_EQ_INT(kiln_tfevents_encode_scalar(b, sizeof b, 2.0, 300, "a", 1, 1.0f), sizeof sc);
  KT_CHECK(memcmp(b, sc, sizeof sc) == 0);
  /* step 0 is the proto3 default: omitted */
  KT_EQ_INT(kiln_tfevents_encode_scalar(b, sizeof b, 2.0, 0, "a", 1, 1.0f), sizeof sc - 3);
  /* a negative step is a 10-byte two's-complement varint */
  KT_EQ_INT(kiln_tfevents_encode_scalar(NULL, 0, 2.0, -1, "a", 1, 1.0f), sizeof sc - 3 + 11);
  /* snprintf-style: a short buffer gets a prefix, the full size is returned */
  memset(b, 0xEE, sizeof b);
  KT_EQ_INT(kiln_tfevents_encode_scalar(b, 5, 2.0, 300, "a", 1, 1.0f), sizeof sc);
  KT_CHECK(memcmp(b, sc, 5) == 0 && b[5] == 0xEE);
}

KT_TEST(utf8_validation) {
  KT_CHECK(kiln_tfevents_utf8_valid("train/loss", 10));
  KT_CHECK(kiln_tfevents_utf8_valid("\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80", 9)); /* ü € 😀 */
  KT_CHECK(!kiln_tfevents_utf8_valid("\xff", 1));
  KT_CHECK(!kiln_tfevents_utf8_valid("\xc3", 1));             /* truncated */
  KT_CHECK(!kiln_tfevents_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
  KT_CHECK(!kiln_tfevents_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
  KT_CHECK(!kiln_tfevents_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
  KT_CHECK(!kiln_tfevents_utf8_valid("\x80", 1));
}

/* ───────────── round trips through files ───────────── */

/* The series the interop check also verifies (keep in sync with
 * tests/interop/check_tfevents.py): steps 0..19 of three tags, logged
 * step-major, then two special values at step 1000000000000. */
#define INTEROP_STEPS 20
#define INTEROP_BIG_STEP 1000000000000LL
static double interop_loss(int s) { return 2.5 * exp(-0.1 * s); }
static double interop_acc(int s) { return s / 20.0; }
static double interop_uni(int s) { return -1.5 + 0.25 * s; }

static const char *k_uni_tag = "eval/\xc3\xbc" "n\xc3\xaf" "c\xc3\xb8" "de"; /* eval/ünïcøde */

static int write_interop_series(kiln_summary_writer *w) {
  int bad = 0;
  for (int s = 0; s < INTEROP_STEPS; s++) {
    bad |= kiln_summary_scalar(w, "train/loss", s, interop_loss(s)) != KILN_OK;
    bad |= kiln_summary_scalar(w, "train/accuracy", s, interop_acc(s)) != KILN_OK;
    bad |= kiln_summary_scalar(w, k_uni_tag, s, interop_uni(s)) != KILN_OK;
  }
  bad |= kiln_summary_scalar(w, "special/nan", INTEROP_BIG_STEP, NAN) != KILN_OK;
  bad |= kiln_summary_scalar(w, "special/inf", INTEROP_BIG_STEP, -INFINITY) != KILN_OK;
  return bad;
}

static int same_float(float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); }

KT_TEST(round_trip_interop_series) {
  start();
  const char *out = getenv("KILN_TFEVENTS_OUT");
  char dir[512];
  if (out && *out) snprintf(dir, sizeof dir, "%s", out);
  else snprintf(dir, sizeof dir, "%s/runs/exp1", g_dir); /* nested, not there yet */
  double t0 = now_s();
  kiln_summary_writer *w = NULL;
  kiln_summary_writer_create(dir, &w);
  KT_CHECK_MSG(w != NULL, "open: %s", kiln_last_error());
  if (!w) return;
  KT_EQ_INT(write_interop_series(w), 0);
  KT_EQ_INT(kiln_summary_flush(w), KILN_OK);
  char path[1024];
  snprintf(path, sizeof path, "%s", kiln_summary_path(w));
  KT_EQ_INT(kiln_summary_writer_destroy(w), KILN_OK);
  double t1 = now_s();
  KT_EQ_INT(kiln_last_status(), KILN_OK);

  /* name: <dir>/events.out.tfevents.<10-digit time>.<host>.<pid>.<n> */
  char host[256] = "";
  gethostname(host, sizeof host);
  const char *base = strrchr(path, '/') + 1;
  KT_CHECK(strncmp(path, dir, strlen(dir)) == 0);
  long long t;
  char rest[512];
  KT_CHECK(sscanf(base, "events.out.tfevents.%10lld.%511s", &t, rest) == 2);
  KT_CHECK(t >= (long long)t0 - 1 && t <= (long long)t1 + 1);
  char want_rest[512];
  snprintf(want_rest, sizeof want_rest, "%s.%ld.", host, (long)getpid());
  KT_CHECK_MSG(strncmp(rest, want_rest, strlen(want_rest)) == 0, "name %s", base);

  static ev evs[128];
  int n = read_events(path, evs, 128, NULL);
  KT_EQ_INT(n, 1 + 3 * INTEROP_STEPS + 2);
  if (n != 1 + 3 * INTEROP_STEPS + 2) return;
  KT_CHECK(evs[0].has_version && strcmp(evs[0].version, "brain.Event:2") == 0);
  KT_CHECK(evs[0].nvalues == 0 && evs[0].step == 0);
  double prev = 0;
  for (int i = 0; i < n; i++) {
    KT_CHECK(evs[i].has_wall && evs[i].wall_time >= t0 - 1e-3 && evs[i].wall_time <= t1 + 1e-3);
    KT_CHECK(evs[i].wall_time >= prev);
    prev = evs[i].wall_time;
    if (i > 0) KT_CHECK(!evs[i].has_version && evs[i].nvalues == 1 && evs[i].has_value);
  }
  for (int s = 0; s < INTEROP_STEPS; s++) {
    const ev *e = &evs[1 + 3 * s];
    KT_CHECK(e[0].step == s && strcmp(e[0].tag, "train/loss") == 0 && same_float(e[0].value, (float)interop_loss(s)));
    KT_CHECK(e[1].step == s && strcmp(e[1].tag, "train/accuracy") == 0 && same_float(e[1].value, (float)interop_acc(s)));
    KT_CHECK(e[2].step == s && strcmp(e[2].tag, k_uni_tag) == 0 && same_float(e[2].value, (float)interop_uni(s)));
  }
  const ev *e = &evs[n - 2];
  KT_CHECK(e[0].step == INTEROP_BIG_STEP && strcmp(e[0].tag, "special/nan") == 0 && isnan(e[0].value));
  KT_CHECK(e[1].step == INTEROP_BIG_STEP && strcmp(e[1].tag, "special/inf") == 0 && isinf(e[1].value) &&
           e[1].value < 0);
  if (out && *out) fprintf(stderr, "  kept %s\n", path);
}

KT_TEST(round_trip_edge_values) {
  start();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/edge", g_dir);
  kiln_summary_writer *w = NULL;
  kiln_summary_writer_create(dir, &w);
  KT_CHECK(w != NULL);
  if (!w) return;
  static char long_tag[10001]; /* longer than the initial scratch buffer; 2-byte length varint */
  memset(long_tag, 'x', 10000);
  const int64_t steps[] = {-5, 0, 127, 128, INT64_MAX, INT64_MIN, 42};
  const double vals[] = {1e-40, -0.0, 3.4e38, 1e39, 0.1, FLT_MIN, 123456789.0};
  const char *tags[] = {"a", "b", "c", "d", long_tag, "f", "g"};
  for (int i = 0; i < 7; i++) KT_EQ_INT(kiln_summary_scalar(w, tags[i], steps[i], vals[i]), KILN_OK);
  KT_EQ_INT(kiln_summary_writer_destroy(w), KILN_OK);
  static ev evs[16];
  DIR *d = opendir(dir);
  struct dirent *de;
  char path[1024] = "";
  int files = 0;
  while (d && (de = readdir(d)))
    if (strncmp(de->d_name, "events.out.tfevents.", 20) == 0) {
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      files++;
    }
  if (d) closedir(d);
  KT_EQ_INT(files, 1);
  KT_EQ_INT(read_events(path, evs, 16, NULL), 8);
  for (int i = 0; i < 7; i++) {
    const ev *e = &evs[1 + i];
    KT_CHECK_MSG(e->step == steps[i], "step %d", i);
    KT_CHECK_MSG(strcmp(e->tag, tags[i]) == 0, "tag %d", i);
    KT_CHECK_MSG(same_float(e->value, (float)vals[i]), "value %d: %g vs %g", i, e->value, (float)vals[i]);
  }
  KT_CHECK(signbit(evs[2].value));    /* -0.0 stays negative */
  KT_CHECK(isinf(evs[4].value));      /* 1e39 overflows float, like TensorFlow's cast */
  KT_CHECK(evs[1].value > 0 && evs[1].value < 1e-38f); /* denormal kept */
}

KT_TEST(directory_mode_and_distinct_files) {
  start();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/modes/a/b/", g_dir); /* trailing slash too */
  mode_t um = umask(022);
  kiln_summary_writer *w1 = NULL, *w2 = NULL;
  kiln_summary_writer_create(dir, &w1);
  kiln_summary_writer_create(dir, &w2);
  umask(um);
  KT_CHECK(w1 && w2);
  if (w1 && w2) KT_CHECK(strcmp(kiln_summary_path(w1), kiln_summary_path(w2)) != 0);
  struct stat st;
  KT_CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0755);
  if (w1) KT_CHECK(stat(kiln_summary_path(w1), &st) == 0 && (st.st_mode & 0777) == 0644);
  /* the version record is flushed at open: visible before any scalar */
  ev evs[2];
  if (w1) KT_EQ_INT(read_events(kiln_summary_path(w1), evs, 2, NULL), 1);
  KT_EQ_INT(kiln_summary_writer_destroy(w1), KILN_OK);
  KT_EQ_INT(kiln_summary_writer_destroy(w2), KILN_OK);
  KT_EQ_INT(kiln_summary_writer_destroy(NULL), KILN_OK);
  KT_CHECK(kiln_summary_path(NULL) == NULL);
}

/* ───────────── errors: reported, never fatal ───────────── */

KT_TEST(bad_arguments) {
  start();
  kiln_summary_writer *none = (kiln_summary_writer *)&none; /* not NULL: a failed create must clear it */
  KT_EQ_INT(kiln_summary_writer_create(NULL, &none), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(none == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "test_tfevents.c"); /* the caller's file:line */
  kiln_clear_error();
  KT_CHECK(kiln_summary_writer_create("", &none) != KILN_OK && none == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_EQ_INT(kiln_summary_scalar(NULL, "x", 0, 1.0), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_summary_flush(NULL), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/args", g_dir);
  kiln_summary_writer *w = NULL;
  kiln_summary_writer_create(dir, &w);
  KT_CHECK(w != NULL);
  if (!w) return;
  KT_EQ_INT(kiln_summary_scalar(w, NULL, 0, 1.0), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_summary_scalar(w, "", 0, 1.0), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_EQ_INT(kiln_summary_scalar(w, "bad\xff", 0, 1.0), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "UTF-8");
  kiln_clear_error();
  /* rejected calls wrote nothing; the writer still works */
  KT_EQ_INT(kiln_summary_scalar(w, "ok", 1, 2.0), KILN_OK);
  char path[1024];
  snprintf(path, sizeof path, "%s", kiln_summary_path(w));
  KT_EQ_INT(kiln_summary_writer_destroy(w), KILN_OK);
  ev evs[4];
  KT_EQ_INT(read_events(path, evs, 4, NULL), 2);
}

KT_TEST(logdir_cannot_be_created) {
  start();
  char file[512], dir[600];
  snprintf(file, sizeof file, "%s/plain-file", g_dir);
  FILE *f = fopen(file, "w");
  KT_CHECK(f != NULL);
  if (f) fclose(f);
  snprintf(dir, sizeof dir, "%s/sub", file); /* a directory under a regular file */
  kiln_summary_writer *none = NULL;
  KT_EQ_INT(kiln_summary_writer_create(dir, &none), KILN_ERR_IO);
  KT_CHECK(none == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), dir);
  KT_STR_CONTAINS(kiln_last_error(), strerror(ENOTDIR));
  kiln_clear_error();
  KT_CHECK(kiln_summary_writer_create(file, &none) == KILN_ERR_IO && none == NULL); /* the log directory is a file */
  KT_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), strerror(ENOTDIR));
  kiln_clear_error();
}

KT_TEST(disk_full_at_open) {
  start();
  if (access("/dev/full", W_OK) != 0) return; /* not Linux: nothing to test */
  /* the version record is flushed at open, so /dev/full fails right there */
  KT_CHECK(kiln_tfevents_open_file("/dev/full", KILN_HERE) == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "/dev/full");
  KT_STR_CONTAINS(kiln_last_error(), strerror(ENOSPC));
  kiln_clear_error();
}

/* A file-size limit makes writes fail mid-run (EFBIG) the way a full disk
 * does: every call reports KILN_ERR_IO, nothing aborts, and the records
 * before the failure stay readable. */
KT_TEST(write_fails_mid_run) {
  start();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/fsize", g_dir);
  kiln_summary_writer *w = NULL;
  kiln_summary_writer_create(dir, &w);
  KT_CHECK(w != NULL);
  if (!w) return;
  struct rlimit old;
  getrlimit(RLIMIT_FSIZE, &old);
  void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = {8192, old.rlim_max};
  KT_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  int first_fail = -1;
  for (int i = 0; i < 2000 && first_fail < 0; i++) {
    if (kiln_summary_scalar(w, "train/loss", i, i * 0.5) != KILN_OK || kiln_summary_flush(w) != KILN_OK)
      first_fail = i;
  }
  KT_CHECK(first_fail > 0);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), kiln_summary_path(w));
  kiln_clear_error();
  KT_EQ_INT(kiln_summary_scalar(w, "train/loss", 5000, 1.0), KILN_ERR_IO); /* the failure sticks */
  KT_STR_CONTAINS(kiln_last_error(), "earlier write failed");
  kiln_clear_error();
  KT_EQ_INT(kiln_summary_flush(w), KILN_ERR_IO);
  kiln_clear_error();
  char path[1024];
  snprintf(path, sizeof path, "%s", kiln_summary_path(w));
  KT_EQ_INT(kiln_summary_writer_destroy(w), KILN_ERR_IO);
  kiln_clear_error();
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_sig);
  static ev evs[512];
  size_t tail = 0;
  int n = read_events(path, evs, 512, &tail);
  KT_CHECK_MSG(n >= first_fail, "%d records, first failure at scalar %d", n, first_fail);
  for (int i = 1; i < n; i++) KT_CHECK(evs[i].step == i - 1 && same_float(evs[i].value, (float)((i - 1) * 0.5)));
  struct stat st;
  KT_CHECK(stat(path, &st) == 0 && st.st_size <= 8192);
}

KT_MAIN(KT_CASE(crc32c_known_answers), KT_CASE(record_header_bytes), KT_CASE(event_bytes_by_hand),
        KT_CASE(utf8_validation), KT_CASE(round_trip_interop_series), KT_CASE(round_trip_edge_values),
        KT_CASE(directory_mode_and_distinct_files), KT_CASE(bad_arguments), KT_CASE(logdir_cannot_be_created),
        KT_CASE(disk_full_at_open), KT_CASE(write_fails_mid_run))
