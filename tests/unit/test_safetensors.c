/* safetensors checkpoints: reading a file written by the reference
 * implementation (tests/data/reference.safetensors, made by
 * tests/interop/safetensors_interop.py), kiln → file → kiln round trips for
 * every dtype, atomic saves, and rejection of malformed files with a message
 * that names the file and the problem.
 *
 * Expected values are computed here with the same arange formulas as the
 * Python script (keep the two in sync). With KILN_INTEROP_OUT=<path> the
 * interop test also writes a kiln file for the script to check
 * (tests/interop/check_safetensors.sh). */
#include <kiln/io.h>
#include <kiln/kiln.h>

#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "base/fs.h"
#include "kt.h"

#ifndef KILN_TEST_DATA_FALLBACK
#define KILN_TEST_DATA_FALLBACK "tests/data"
#endif

static char g_dir[256];

static void remove_dir(void) { kiln_fs_remove_tree(g_dir); }

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "%s/kiln-st-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    KT_CHECK(mkdtemp(g_dir) != NULL);
    atexit(remove_dir);
  }
}

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

/* Read a tensor into a host buffer of the given size; 0 on success. */
static int read_back(kiln_tensor t, void *dst, size_t bytes) { return kiln_to_host(t, dst, bytes) != KILN_OK; }

static int file_bytes(const char *path, uint8_t *buf, size_t cap, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  *n = fread(buf, 1, cap, f);
  fclose(f);
  return 0;
}

/* ───────────── the reference file from the safetensors package ───────────── */

KT_TEST(reads_reference_file_from_python) {
  start();
  const char *dir = getenv("KILN_TEST_DATA");
  char path[512];
  snprintf(path, sizeof path, "%s/reference.safetensors", dir ? dir : KILN_TEST_DATA_FALLBACK);
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  if (!f) {
    KT_FAIL("%s", kiln_last_error());
    return;
  }
  KT_EQ_INT(kiln_st_count(f), 11);
  KT_CHECK(kiln_st_metadata(f, "format") && !strcmp(kiln_st_metadata(f, "format"), "np"));
  KT_CHECK(kiln_st_metadata(f, "note") && !strcmp(kiln_st_metadata(f, "note"), "quoted \"value\" with a newline\n"));
  KT_CHECK(kiln_st_metadata(f, "missing") == NULL);

  float f32[6];
  kiln_tensor t = kiln_st_tensor(f, "f32_2x3");
  int64_t sh[KILN_MAX_RANK];
  KT_EQ_INT(kiln_shape(t, sh), 2);
  KT_EQ_INT(sh[0], 2);
  KT_EQ_INT(sh[1], 3);
  KT_CHECK(!read_back(t, f32, sizeof f32));
  for (int i = 0; i < 6; i++) KT_CHECK(f32[i] == (float)i * 0.5f - 1.0f);

  double f64[5];
  KT_CHECK(!read_back(kiln_st_tensor(f, "f64_vec"), f64, sizeof f64));
  for (int i = 0; i < 5; i++) KT_CHECK(f64[i] == (double)i / 3.0);

  int32_t i32[24];
  t = kiln_st_tensor(f, "i32_2x3x4");
  KT_EQ_INT(kiln_rank(t), 3);
  KT_CHECK(!read_back(t, i32, sizeof i32));
  for (int i = 0; i < 24; i++) KT_EQ_INT(i32[i], i - 10);

  int64_t i64[4];
  KT_CHECK(!read_back(kiln_st_tensor(f, "i64_big"), i64, sizeof i64));
  for (int i = 0; i < 4; i++) KT_EQ_INT(i64[i], (int64_t)i * 1000000000000LL - 7);

  uint8_t b[7];
  t = kiln_st_tensor(f, "bool_7");
  KT_EQ_INT(kiln_dtype_of(t), KILN_BOOL);
  KT_CHECK(!read_back(t, b, sizeof b));
  for (int i = 0; i < 7; i++) KT_EQ_INT(b[i], i % 3 == 0);

  t = kiln_st_tensor(f, "scalar_f32");
  KT_EQ_INT(kiln_rank(t), 0);
  KT_NEAR(kiln_item_f64(t), 3.25, 0);

  t = kiln_st_tensor(f, "empty_0x3");
  KT_EQ_INT(kiln_numel(t), 0);
  KT_EQ_INT(kiln_dim(t, 1), 3);

  /* F16 and U8 load as themselves, I16 converted to i32. */
  int fi = kiln_st_find(f, "f16_8");
  KT_CHECK(fi >= 0 && !strcmp(kiln_st_dtype_str(f, fi), "F16") && kiln_st_dtype(f, fi) == KILN_F16);
  float h[8];
  t = kiln_st_tensor(f, "f16_8");
  KT_EQ_INT(kiln_dtype_of(t), KILN_F16);
  KT_CHECK(!read_back(kiln_cast(t, KILN_F32), h, sizeof h));
  for (int i = 0; i < 8; i++) KT_CHECK(h[i] == (float)i * 0.25f - 1.0f);
  uint8_t u8[10];
  int32_t i16[4];
  t = kiln_st_tensor(f, "u8_10");
  KT_EQ_INT(kiln_dtype_of(t), KILN_U8);
  KT_CHECK(!read_back(t, u8, sizeof u8));
  for (int i = 0; i < 10; i++) KT_EQ_INT(u8[i], i * 25);
  KT_CHECK(!read_back(kiln_st_tensor(f, "i16_4"), i16, sizeof i16));
  for (int i = 0; i < 4; i++) KT_EQ_INT(i16[i], i * -1000);

  /* A name with JSON escapes and non-ASCII UTF-8. */
  float odd[2];
  KT_CHECK(!read_back(kiln_st_tensor(f, "odd \"name\"/\xc3\xbcnicode\t"), odd, sizeof odd));
  KT_CHECK(odd[0] == 0.0f && odd[1] == 1.0f);
  KT_EQ_INT(kiln_last_status(), KILN_OK);

  /* A missing name is an error naming the file, with a poisoned result. */
  t = kiln_st_tensor(f, "nope");
  KT_CHECK(!kiln_is_valid(t));
  KT_STR_CONTAINS(kiln_last_error(), "no tensor named \"nope\"");
  KT_STR_CONTAINS(kiln_last_error(), "reference.safetensors");
  KT_STR_CONTAINS(kiln_last_error(), "test_safetensors.c");
  kiln_st_file_destroy(f);
  kiln_shutdown();
}

/* The BF16/F16/U8/I8 file written through PyTorch
 * (tests/data/reference16.safetensors, safetensors_interop.py
 * write-reference16): values exact in their dtype, read through kiln's
 * conversions to f64. */
static void expect_f64(kiln_tensor t, kiln_dtype dt, const double *want, int n, const char *what) {
  KT_EQ_INT(kiln_dtype_of(t), dt);
  double got[16];
  KT_CHECK(n <= 16 && !read_back(kiln_cast(t, KILN_F64), got, sizeof(double) * (size_t)n));
  for (int i = 0; i < n; i++) {
    int same = isnan(want[i]) ? isnan(got[i]) : got[i] == want[i] && !signbit(got[i]) == !signbit(want[i]);
    KT_CHECK_MSG(same, "%s[%d]: %.17g, want %.17g", what, i, got[i], want[i]);
  }
}

KT_TEST(reads_16bit_file_from_pytorch) {
  start();
  const char *dir = getenv("KILN_TEST_DATA");
  char path[512];
  snprintf(path, sizeof path, "%s/reference16.safetensors", dir ? dir : KILN_TEST_DATA_FALLBACK);
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  if (!f) return;
  const double bf[9] = {1.0, -2.0, INFINITY, -INFINITY, NAN, ldexp(1.0, -133), 3.3895313892515355e38, -0.0,
                        1.0078125};
  const double hf[7] = {65504.0, ldexp(1.0, -24), -0.0, INFINITY, NAN, 0.333251953125, -0.0999755859375};
  const double u8[12] = {0, 21, 42, 63, 84, 105, 126, 147, 168, 189, 210, 231};
  const double i8[5] = {-128, -1, 0, 1, 127};
  expect_f64(kiln_st_tensor(f, "bf16_specials"), KILN_BF16, bf, 9, "bf16_specials");
  expect_f64(kiln_st_tensor(f, "f16_specials"), KILN_F16, hf, 7, "f16_specials");
  kiln_tensor img = kiln_st_tensor(f, "u8_img");
  KT_EQ_INT(kiln_rank(img), 2);
  expect_f64(kiln_reshape(img, 1, (int64_t[]){12}), KILN_U8, u8, 12, "u8_img");
  expect_f64(kiln_st_tensor(f, "i8_q"), KILN_I8, i8, 5, "i8_q");
  /* load_into converts exactly: F16 into an f32 parameter, U8 into i32 */
  int64_t s7[1] = {7}, s34[2] = {3, 4};
  kiln_tensor p = kiln_param(kiln_zeros(KILN_F32, 1, s7)), q = kiln_param(kiln_zeros(KILN_I32, 2, s34));
  KT_CHECK(kiln_st_load_into(f, "f16_specials", p) == KILN_OK);
  KT_CHECK(kiln_st_load_into(f, "u8_img", q) == KILN_OK);
  kiln_mark_step();
  expect_f64(p, KILN_F32, hf, 7, "f16 loaded into f32");
  expect_f64(kiln_reshape(q, 1, (int64_t[]){12}), KILN_I32, u8, 12, "u8 loaded into i32");
  /* narrowing is refused: BF16 into a u8 tensor */
  kiln_tensor w = kiln_param(kiln_zeros(KILN_U8, 1, (int64_t[]){9}));
  KT_EQ_INT(kiln_st_load_into(f, "bf16_specials", w), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "BF16 [9] but the destination is u8 [9]");
  kiln_clear_error();
  kiln_st_file_destroy(f);
  kiln_shutdown();
}

/* ───────────── round trips ───────────── */

/* The tensors the Python script's check-kiln expects (same formulas). */
#define N_KILN 11
static void kiln_set(kiln_tensor *t, const char **names) {
  static float w[12];
  static double v[6];
  static int32_t idx[5];
  static int64_t big[3];
  static uint8_t mask[6];
  for (int i = 0; i < 12; i++) w[i] = (float)i * 0.25f - 1.0f;
  for (int i = 0; i < 6; i++) v[i] = (double)i / 7.0;
  for (int i = 0; i < 5; i++) idx[i] = i * -3;
  for (int i = 0; i < 3; i++) big[i] = (int64_t)i * 5000000000LL;
  for (int i = 0; i < 6; i++) mask[i] = i % 2 == 1;
  int64_t s34[2] = {3, 4}, s6[1] = {6}, s5[1] = {5}, s3[1] = {3}, s20[2] = {2, 0};
  const char *n[N_KILN] = {"w_f32", "v_f64", "idx_i32", "big_i64", "mask_bool", "step", "nothing",
                           "h_bf16", "h_f16", "px_u8", "q_i8"};
  memcpy(names, n, sizeof n);
  t[0] = kiln_from_host(w, KILN_F32, 2, s34);
  /* v_f64 goes through pending work: save must compute it first. */
  t[1] = kiln_div_c(kiln_arange(KILN_F64, 0, 6, 1), 7.0);
  (void)v;
  t[2] = kiln_from_host(idx, KILN_I32, 1, s5);
  t[3] = kiln_from_host(big, KILN_I64, 1, s3);
  t[4] = kiln_from_host(mask, KILN_BOOL, 1, s6);
  t[5] = kiln_full(KILN_F32, 0, NULL, 42.0);
  t[6] = kiln_zeros(KILN_F64, 2, s20);
  /* 16-bit floats and 8-bit integers made by casts (rounded, wrapped) */
  t[7] = kiln_cast(kiln_add_s(kiln_mul_s(kiln_arange(KILN_F32, 0, 6, 1), 0.375), -1.0), KILN_BF16);
  t[8] = kiln_cast(kiln_div_s(kiln_arange(KILN_F32, 0, 5, 1), 3.0), KILN_F16);
  t[9] = kiln_cast(kiln_mul_s(kiln_arange(KILN_I32, 0, 8, 1), 37), KILN_U8);
  t[10] = kiln_cast(kiln_add_s(kiln_mul_s(kiln_arange(KILN_I32, 0, 6, 1), 60), -128), KILN_I8);
}

static const char *const k_meta[] = {"written_by", "kiln", "epoch", "3", NULL};

KT_TEST(round_trip_every_dtype) {
  start();
  kiln_tensor t[N_KILN];
  const char *names[N_KILN];
  kiln_set(t, names);
  char path[512];
  const char *interop = getenv("KILN_INTEROP_OUT");
  if (interop && *interop) snprintf(path, sizeof path, "%s", interop);
  else path_in(path, sizeof path, "rt.safetensors");
  KT_CHECK(kiln_save_safetensors(path, N_KILN, names, t, k_meta) == KILN_OK);
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  if (!f) {
    KT_FAIL("%s", kiln_last_error());
    return;
  }
  KT_EQ_INT(kiln_st_count(f), N_KILN);
  for (int i = 0; i < N_KILN; i++) KT_CHECK(!strcmp(kiln_st_name(f, i), names[i])); /* header keeps our order */
  KT_CHECK(kiln_st_metadata(f, "epoch") && !strcmp(kiln_st_metadata(f, "epoch"), "3"));
  for (int i = 0; i < N_KILN; i++) {
    kiln_tensor r = kiln_st_tensor(f, names[i]);
    int64_t a[KILN_MAX_RANK], b[KILN_MAX_RANK];
    KT_EQ_INT(kiln_shape(r, a), kiln_shape(t[i], b));
    for (int d = 0; d < kiln_rank(r); d++) KT_EQ_INT(a[d], b[d]);
    KT_EQ_INT(kiln_dtype_of(r), kiln_dtype_of(t[i]));
    size_t bytes = (size_t)kiln_numel(r) * kiln_dtype_size(kiln_dtype_of(r));
    uint8_t x[128], y[128];
    KT_CHECK(bytes <= sizeof x);
    KT_CHECK(!read_back(r, x, bytes) && !read_back(t[i], y, bytes));
    KT_CHECK_MSG(!memcmp(x, y, bytes), "tensor %s differs after the round trip", names[i]);
  }
  for (int i = 0; i < N_KILN; i++) KT_CHECK(kiln_st_find(f, names[i]) == i);
  kiln_st_file_destroy(f);
  kiln_shutdown();
}

KT_TEST(load_into_a_parameter) {
  start();
  char path[512];
  path_in(path, sizeof path, "param.safetensors");
  int64_t s[2] = {2, 2};
  float v[4] = {1, 2, 3, 4}, out[4];
  kiln_tensor w = kiln_param(kiln_from_host(v, KILN_F32, 2, s));
  const char *name = "layer.weight";
  KT_CHECK(kiln_save_safetensors(path, 1, &name, &w, NULL) == KILN_OK);
  kiln_assign(w, kiln_zeros(KILN_F32, 2, s));
  kiln_mark_step();
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  KT_CHECK(kiln_st_load_into(f, "layer.weight", w) == KILN_OK);
  kiln_mark_step();
  KT_CHECK(!read_back(w, out, sizeof out));
  for (int i = 0; i < 4; i++) KT_CHECK(out[i] == v[i]);
  /* Shape or dtype mismatch: an error, w unchanged. */
  int64_t s3[1] = {3};
  kiln_tensor wrong = kiln_param(kiln_zeros(KILN_F32, 1, s3));
  KT_EQ_INT(kiln_st_load_into(f, "layer.weight", wrong), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "F32 [2,2] but the destination is f32 [3]");
  kiln_clear_error();
  /* Widening is exact: F32 into an f64 tensor (it was refused); narrowing is refused: into bf16. */
  kiln_tensor wide = kiln_param(kiln_zeros(KILN_F64, 2, s));
  KT_CHECK_MSG(kiln_st_load_into(f, "layer.weight", wide) == KILN_OK, "%s", kiln_last_error());
  kiln_mark_step();
  double dout[4];
  KT_CHECK(kiln_to_host(wide, dout, sizeof dout) == KILN_OK);
  for (int i = 0; i < 4; i++) KT_CHECK(dout[i] == v[i]);
  kiln_tensor wrong_dt = kiln_param(kiln_zeros(KILN_BF16, 2, s));
  KT_EQ_INT(kiln_st_load_into(f, "layer.weight", wrong_dt), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "F32 [2,2] but the destination is bf16 [2,2]");
  kiln_clear_error();
  kiln_st_file_destroy(f);
  kiln_shutdown();
}

/* ───────────── atomicity ───────────── */

static int count_temp_files(void) {
  DIR *d = opendir(g_dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (strstr(e->d_name, ".tmp.")) n++;
  if (d) closedir(d);
  return n;
}

KT_TEST(failed_save_leaves_old_file_intact) {
  start();
  char path[512];
  path_in(path, sizeof path, "atomic.safetensors");
  int64_t s[1] = {4};
  float v[4] = {1, 2, 3, 4};
  kiln_tensor good = kiln_from_host(v, KILN_F32, 1, s);
  const char *names[2] = {"a", "b"};
  KT_CHECK(kiln_save_safetensors(path, 1, names, &good, NULL) == KILN_OK);
  static uint8_t before[4096], after[4096];
  size_t nb = 0, na = 0;
  KT_CHECK(file_bytes(path, before, sizeof before, &nb) == 0 && nb > 8);

  /* A poisoned tensor (a shape error upstream): nothing is written. */
  int64_t s3[1] = {3};
  kiln_tensor bad = kiln_add(good, kiln_zeros(KILN_F32, 1, s3));
  kiln_clear_error();
  kiln_tensor two[2] = {good, bad};
  KT_EQ_INT(kiln_save_safetensors(path, 2, names, two, NULL), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "\"b\" (#1) is null, stale or poisoned; nothing written");
  kiln_clear_error();
  /* A stale handle (released at the step marker). */
  kiln_mark_step();
  KT_EQ_INT(kiln_save_safetensors(path, 1, names, &good, NULL), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  /* Duplicate names and the reserved name. */
  kiln_tensor g2 = kiln_from_host(v, KILN_F32, 1, s), dup[2] = {g2, g2};
  const char *same[2] = {"x", "x"}, *reserved = "__metadata__";
  KT_EQ_INT(kiln_save_safetensors(path, 2, same, dup, NULL), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "duplicate tensor name \"x\"");
  kiln_clear_error();
  KT_EQ_INT(kiln_save_safetensors(path, 1, &reserved, dup, NULL), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  /* Invalid UTF-8 in a name, metadata key without a value. */
  const char *bad_utf8 = "\xff\xfe";
  const char *const odd_meta[] = {"key", NULL};
  KT_EQ_INT(kiln_save_safetensors(path, 1, &bad_utf8, dup, NULL), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_EQ_INT(kiln_save_safetensors(path, 1, names, dup, odd_meta), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_CHECK(file_bytes(path, after, sizeof after, &na) == 0);
  KT_CHECK(na == nb && !memcmp(before, after, nb));

  /* File-system failures: a missing directory, a directory in the way of
   * the rename. The error is IO, no temp file is left behind. */
  char missing[600], blocked[600];
  snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", g_dir);
  KT_EQ_INT(kiln_save_safetensors(missing, 1, names, &g2, NULL), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "no/such/dir");
  kiln_clear_error();
  path_in(blocked, sizeof blocked, "a-directory");
  mkdir(blocked, 0700);
  char inner[700];
  snprintf(inner, sizeof inner, "%s/keep", blocked);
  FILE *keep = fopen(inner, "w"); /* non-empty: rename over it must fail */
  if (keep) fclose(keep);
  KT_EQ_INT(kiln_save_safetensors(blocked, 1, names, &g2, NULL), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "previous file, if any, is unchanged");
  kiln_clear_error();
  KT_EQ_INT(count_temp_files(), 0);
  /* A successful save replaces the file completely. */
  float w[2] = {7, 8};
  int64_t s2[1] = {2};
  kiln_tensor nt = kiln_from_host(w, KILN_F32, 1, s2);
  KT_CHECK(kiln_save_safetensors(path, 1, names, &nt, NULL) == KILN_OK);
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  int64_t shp[KILN_MAX_RANK];
  KT_EQ_INT(kiln_st_shape(f, 0, shp), 1);
  KT_EQ_INT(shp[0], 2);
  kiln_st_file_destroy(f);
  KT_EQ_INT(count_temp_files(), 0);
  kiln_shutdown();
}

/* ───────────── malformed files ───────────── */

/* Write prefix (header_len) + json + data_n zero bytes to g_dir/name. */
static void write_image(char *path, size_t cap, const char *name, uint64_t header_len, const char *json,
                        size_t data_n) {
  path_in(path, cap, name);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  uint8_t p[8];
  for (int k = 0; k < 8; k++) p[k] = (uint8_t)(header_len >> (8 * k));
  fwrite(p, 1, 8, f);
  fwrite(json, 1, strlen(json), f);
  for (size_t i = 0; i < data_n; i++) fputc(0, f);
  fclose(f);
}

typedef struct bad_case {
  const char *json;
  size_t data_n;
  const char *want; /* substring of the message */
  kiln_status code;
} bad_case;

KT_TEST(rejects_malformed_files) {
  start();
  static const bad_case cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",", 0, "header ends early", KILN_ERR_CORRUPT},
      {"", 0, "does not start with '{'", KILN_ERR_CORRUPT},
      {"[1]", 0, "does not start with '{'", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "go past the data section",
       KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
       12, "overlap another tensor", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "hold 8 bytes but F32 with this shape needs 12",
       KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "negative dimension", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
       "too many elements", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", 8, "integer too large",
       KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
       8, "duplicate tensor name \"a\"", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "trailing bytes", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}x", 4, "trailing bytes after the header",
       KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "reversed", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "exactly 2 integers", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4, "not a fraction", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, "leading zero", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "has no \"shape\"", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", 0, "duplicate field", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "unknown field",
       KILN_ERR_CORRUPT},
      {"{\"__metadata__\":{\"k\":1}}", 0, "values must be strings", KILN_ERR_CORRUPT},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__", KILN_ERR_CORRUPT},
      {"{\"\\ud800x\":{}}", 0, "high surrogate", KILN_ERR_CORRUPT},
      {"{\"\\udc00\":{}}", 0, "lone low surrogate", KILN_ERR_CORRUPT},
      {"{\"a\\u0000b\":{}}", 0, "NUL character", KILN_ERR_CORRUPT},
      {"{\"\xc0\xaf\":{}}", 0, "invalid UTF-8", KILN_ERR_CORRUPT},
      {"{\"a\\q\":{}}", 0, "bad escape", KILN_ERR_CORRUPT},
      {"{\"a\tb\":{}}", 0, "control character", KILN_ERR_CORRUPT},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
       "more than 8 dimensions", KILN_ERR_UNSUPPORTED},
  };
  char path[512];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "bad%zu.safetensors", i);
    write_image(path, sizeof path, name, strlen(cases[i].json), cases[i].json, cases[i].data_n);
    kiln_clear_error();
    kiln_st_file *f = (kiln_st_file *)1;
    kiln_status s = kiln_st_file_create(path, &f);
    KT_CHECK_MSG(s == cases[i].code && f == NULL, "case %zu (%s): status %s", i, cases[i].json, kiln_status_name(s));
    KT_STR_CONTAINS(kiln_last_error(), cases[i].want);
    KT_STR_CONTAINS(kiln_last_error(), name);
    kiln_st_file_destroy(f == (kiln_st_file *)1 ? NULL : f);
  }
  /* Length prefix problems: file too short, header longer than the file,
   * header over the 100 MB cap. */
  static const struct {
    uint64_t header_len;
    const char *json, *want;
    int cut; /* write only the first 5 bytes */
  } pre[] = {{2, "{}", "shorter than the 8-byte header length", 1},
             {1000, "{}", "header length 1000 but only 2 bytes follow", 0},
             {(uint64_t)1 << 40, "{}", "exceeds the limit of 100000000 bytes", 0}};
  for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
    write_image(path, sizeof path, "prefix.safetensors", pre[i].header_len, pre[i].json, 0);
    if (pre[i].cut) KT_CHECK(truncate(path, 5) == 0);
    kiln_clear_error();
    kiln_st_file *f = NULL;
    KT_EQ_INT(kiln_st_file_create(path, &f), KILN_ERR_CORRUPT);
    KT_STR_CONTAINS(kiln_last_error(), pre[i].want);
  }
  kiln_clear_error();
  kiln_shutdown();
}

/* BF16 (no numpy dtype, so hand-made here), F16 specials, space padding
 * (allowed after the object), an empty file with only metadata, and an
 * unloadable dtype that still lets the file open. */
KT_TEST(reads_bf16_and_padding) {
  start();
  char path[512];
  path_in(path, sizeof path, "bf16.safetensors");
  const char *json = "{\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                     "\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[6,14]},"
                     "\"q\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[14,22]}}      ";
  /* bf16: 1.5 = 0x3FC0, -2 = 0xC000, 0x7F80 = inf; f16: 2^-24 (smallest
   * subnormal) = 0x0001, 65504 = 0x7BFF, -0 = 0x8000, 1 = 0x3C00. */
  const uint8_t data[22] = {0xC0, 0x3F, 0x00, 0xC0, 0x80, 0x7F, 0x01, 0x00, 0xFF, 0x7B, 0x00, 0x80, 0x00, 0x3C};
  FILE *fp = fopen(path, "wb");
  uint64_t hl = strlen(json);
  uint8_t p[8];
  for (int k = 0; k < 8; k++) p[k] = (uint8_t)(hl >> (8 * k));
  fwrite(p, 1, 8, fp);
  fwrite(json, 1, hl, fp);
  fwrite(data, 1, sizeof data, fp);
  fclose(fp);
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  float b[3], h[4];
  KT_EQ_INT(kiln_st_dtype(f, 0), KILN_BF16);
  KT_CHECK(!read_back(kiln_cast(kiln_st_tensor(f, "b"), KILN_F32), b, sizeof b));
  KT_CHECK(b[0] == 1.5f && b[1] == -2.0f && isinf(b[2]) && b[2] > 0);
  KT_CHECK(!read_back(kiln_cast(kiln_st_tensor(f, "h"), KILN_F32), h, sizeof h));
  KT_CHECK(h[0] == ldexpf(1.0f, -24) && h[1] == 65504.0f && h[2] == 0.0f && signbit(h[2]) && h[3] == 1.0f);
  KT_EQ_INT(kiln_st_dtype(f, 2), -1);
  KT_CHECK(!kiln_is_valid(kiln_st_tensor(f, "q")));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_UNSUPPORTED);
  KT_STR_CONTAINS(kiln_last_error(), "dtype U64, which kiln cannot load");
  kiln_clear_error();
  /* The file shrinks after it was opened: an error, not a short tensor. */
  KT_CHECK(truncate(path, (off_t)(8 + hl + 8)) == 0);
  KT_CHECK(!kiln_is_valid(kiln_st_tensor(f, "h")));
  KT_EQ_INT(kiln_last_status(), KILN_ERR_CORRUPT);
  KT_STR_CONTAINS(kiln_last_error(), "file shorter than when it was opened");
  kiln_clear_error();
  kiln_st_file_destroy(f);

  /* BOOL bytes other than 0 load as 1. */
  {
    const char *bj = "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}";
    write_image(path, sizeof path, "bool.safetensors", strlen(bj), bj, 0);
    FILE *bf = fopen(path, "ab");
    if (bf) {
      fwrite("\x00\x02\xff", 1, 3, bf);
      fclose(bf);
    }
    uint8_t m[3];
    KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
    KT_CHECK(!read_back(kiln_st_tensor(f, "m"), m, sizeof m));
    KT_CHECK(m[0] == 0 && m[1] == 1 && m[2] == 1);
    kiln_st_file_destroy(f);
  }

  /* Only metadata; no tensors: a valid file. */
  {
    const char *mj = "{\"__metadata__\":{\"k\":\"v\\u00e9\"}}";
    write_image(path, sizeof path, "meta.safetensors", strlen(mj), mj, 0);
  }
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  KT_EQ_INT(kiln_st_count(f), 0);
  KT_CHECK(kiln_st_metadata(f, "k") && !strcmp(kiln_st_metadata(f, "k"), "v\xc3\xa9"));
  kiln_st_file_destroy(f);
  kiln_shutdown();
}

KT_TEST(open_errors_name_the_file) {
  start();
  kiln_st_file *f = NULL;
  KT_EQ_INT(kiln_st_file_create("/nonexistent/dir/x.safetensors", &f), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "/nonexistent/dir/x.safetensors: cannot open");
  kiln_clear_error();
  KT_EQ_INT(kiln_st_file_create(g_dir, &f), KILN_ERR_IO); /* a directory */
  KT_STR_CONTAINS(kiln_last_error(), "not a regular file");
  kiln_clear_error();
  KT_CHECK(f == NULL);
  kiln_st_file_destroy(NULL);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(reads_reference_file_from_python), KT_CASE(reads_16bit_file_from_pytorch), KT_CASE(round_trip_every_dtype), KT_CASE(load_into_a_parameter),
        KT_CASE(failed_save_leaves_old_file_intact), KT_CASE(rejects_malformed_files), KT_CASE(reads_bf16_and_padding),
        KT_CASE(open_errors_name_the_file))
