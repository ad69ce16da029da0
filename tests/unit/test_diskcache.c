/* The cache entry format, the cache directory and the file-system helpers
 * under it. Oracles: the bytes that were stored, stat(2) modes, and the
 * property that every damaged entry is rejected (never parsed as valid). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/fs.h"
#include "kiln/kiln.h"
#include "kt.h"
#include "toolchain/diskcache.h"

static const char k_src[] = "int f(void) { return 1; }\n";
static const uint8_t k_so[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0xff, 0x80};

static void fresh_dir(char *out, size_t cap) {
  const char *base = getenv("KILN_CACHE_DIR");
  kiln_err err = {0};
  if (base && *base && kiln_fs_mkdirs_private(base, &err) != KILN_OK) base = NULL;
  if (kiln_fs_mkdtemp(base, "dc test ", out, cap, &err) != KILN_OK) KT_FAIL("mkdtemp: %s", err.msg);
}

static uint8_t *make_entry(size_t *n) {
  uint8_t *buf = NULL;
  kiln_err err = {0};
  KT_CHECK(kiln_cache_entry_encode(0xabcdef0123456789ULL, "meta", 4, k_src, strlen(k_src), k_so, sizeof k_so, &buf,
                                   n, &err) == KILN_OK);
  return buf;
}

KT_TEST(entry_roundtrip) {
  size_t n;
  uint8_t *buf = make_entry(&n);
  if (!buf) return;
  KT_EQ_INT(n, KILN_CACHE_ENTRY_HEADER + 4 + strlen(k_src) + sizeof k_so);
  KT_CHECK(memcmp(buf, "KILNCACH", 8) == 0);
  kiln_cache_entry_view v;
  kiln_err err = {0};
  KT_EQ_INT(kiln_cache_entry_parse(buf, n, &v, &err), KILN_OK);
  KT_CHECK(v.key == 0xabcdef0123456789ULL);
  KT_EQ_INT(v.meta_len, 4);
  KT_CHECK(memcmp(v.meta, "meta", 4) == 0);
  KT_EQ_INT(v.src_len, strlen(k_src));
  KT_CHECK(memcmp(v.src, k_src, v.src_len) == 0);
  KT_EQ_INT(v.so_len, sizeof k_so);
  KT_CHECK(memcmp(v.so, k_so, sizeof k_so) == 0);
  free(buf);
}

KT_TEST(every_truncation_is_corrupt) {
  size_t n;
  uint8_t *buf = make_entry(&n);
  if (!buf) return;
  for (size_t len = 0; len < n; len++) {
    /* A copy of exactly len bytes, so ASan catches any read past it. */
    uint8_t *cut = malloc(len ? len : 1);
    memcpy(cut, buf, len);
    kiln_cache_entry_view v;
    kiln_err err = {0};
    kiln_status s = kiln_cache_entry_parse(cut, len, &v, &err);
    KT_CHECK_MSG(s == KILN_ERR_CORRUPT, "length %zu accepted", len);
    KT_CHECK(v.so == NULL);
    free(cut);
  }
  /* Trailing garbage too. */
  uint8_t *longer = malloc(n + 1);
  memcpy(longer, buf, n);
  longer[n] = 0;
  kiln_cache_entry_view v;
  kiln_err err = {0};
  KT_EQ_INT(kiln_cache_entry_parse(longer, n + 1, &v, &err), KILN_ERR_CORRUPT);
  KT_STR_CONTAINS(err.msg, "trailing");
  free(longer);
  free(buf);
}

KT_TEST(every_single_bit_flip_is_corrupt) {
  size_t n;
  uint8_t *buf = make_entry(&n);
  if (!buf) return;
  int accepted = 0;
  for (size_t i = 0; i < n; i++) {
    for (int bit = 0; bit < 8; bit++) {
      buf[i] ^= (uint8_t)(1u << bit);
      kiln_cache_entry_view v;
      kiln_err err = {0};
      if (kiln_cache_entry_parse(buf, n, &v, &err) != KILN_ERR_CORRUPT) accepted++;
      buf[i] ^= (uint8_t)(1u << bit);
    }
  }
  KT_EQ_INT(accepted, 0);
  free(buf);
}

KT_TEST(parse_reasons_are_specific) {
  size_t n;
  uint8_t *buf = make_entry(&n);
  if (!buf) return;
  kiln_cache_entry_view v;
  kiln_err err = {0};
  buf[0] = 'X';
  kiln_cache_entry_parse(buf, n, &v, &err);
  KT_STR_CONTAINS(err.msg, "magic");
  buf[0] = 'K';
  buf[n - 1] ^= 1;
  kiln_cache_entry_parse(buf, n, &v, &err);
  KT_STR_CONTAINS(err.msg, "object checksum");
  buf[n - 1] ^= 1;
  kiln_cache_entry_parse(buf, n - 3, &v, &err);
  KT_STR_CONTAINS(err.msg, "truncated");
  free(buf);
  KT_EQ_INT(kiln_cache_entry_encode(1, "x", KILN_CACHE_ENTRY_MAX_META + 1, "", 0, NULL, 0, &buf, &n, &err),
            KILN_ERR_INVALID_ARGUMENT);
}

KT_TEST(store_lookup_hit_miss_corrupt) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  char sub[1100];
  snprintf(sub, sizeof sub, "%s/a/b/kiln", dir); /* parents are created too */
  kiln_diskcache *dc = NULL;
  kiln_err err = {0};
  KT_CHECK_MSG(kiln_diskcache_open(sub, &dc, &err) == KILN_OK, "%s", err.msg);
  if (!dc) return;
  struct stat st;
  KT_CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
  uint8_t *buf;
  kiln_cache_entry_view v;
  int corrupt = 0;
  /* Empty cache: a miss. */
  KT_EQ_INT(kiln_diskcache_lookup(dc, 7, k_src, strlen(k_src), &buf, &v, &corrupt, &err), KILN_OK);
  KT_CHECK(buf == NULL && corrupt == 0);
  KT_EQ_INT(kiln_diskcache_store(dc, 7, "m", k_src, strlen(k_src), k_so, sizeof k_so, &err), KILN_OK);
  KT_EQ_INT(kiln_diskcache_lookup(dc, 7, k_src, strlen(k_src), &buf, &v, &corrupt, &err), KILN_OK);
  KT_CHECK(buf != NULL);
  if (buf) KT_CHECK(v.so_len == sizeof k_so && memcmp(v.so, k_so, sizeof k_so) == 0);
  free(buf);
  /* Same key, other source (a collision): a miss, not corrupt. */
  KT_EQ_INT(kiln_diskcache_lookup(dc, 7, "int g;", 6, &buf, &v, &corrupt, &err), KILN_OK);
  KT_CHECK(buf == NULL && corrupt == 0);
  /* A source that is a prefix of the stored one must not match either. */
  KT_EQ_INT(kiln_diskcache_lookup(dc, 7, k_src, strlen(k_src) - 1, &buf, &v, &corrupt, &err), KILN_OK);
  KT_CHECK(buf == NULL);
  /* An entry stored under another key's name (e.g. renamed): corrupt. */
  char a[1200], b[1200], name[32];
  kiln_diskcache_entry_name(7, name, sizeof name);
  snprintf(a, sizeof a, "%s/%s", sub, name);
  kiln_diskcache_entry_name(8, name, sizeof name);
  snprintf(b, sizeof b, "%s/%s", sub, name);
  KT_CHECK(link(a, b) == 0);
  fflush(stderr);
  KT_EQ_INT(kiln_diskcache_lookup(dc, 8, k_src, strlen(k_src), &buf, &v, &corrupt, &err), KILN_OK);
  KT_CHECK(buf == NULL && corrupt == 1);
  /* A FIFO under an entry's name must neither hang nor load. */
  kiln_diskcache_entry_name(9, name, sizeof name);
  snprintf(b, sizeof b, "%s/%s", sub, name);
  KT_CHECK(mkfifo(b, 0600) == 0);
  KT_EQ_INT(kiln_diskcache_lookup(dc, 9, k_src, strlen(k_src), &buf, &v, &corrupt, &err), KILN_ERR_UNSAFE);
  KT_STR_CONTAINS(err.msg, "not a regular file");
  kiln_diskcache_close(dc);
  kiln_fs_remove_tree(dir);
}

KT_TEST(stale_temp_files_are_swept) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  char old_tmp[1200], new_tmp[1200], old_work[1200], held_work[1200];
  snprintf(old_tmp, sizeof old_tmp, "%s/.00000000000000aa.kce.tmp.1.1", dir);
  snprintf(new_tmp, sizeof new_tmp, "%s/.00000000000000bb.kce.tmp.1.2", dir);
  snprintf(old_work, sizeof old_work, "%s/tmp-1-abcdef", dir);
  snprintf(held_work, sizeof held_work, "%s/tmp-2-abcdef", dir);
  kiln_err err = {0};
  KT_EQ_INT(kiln_fs_write_atomic(old_tmp, "x", 1, &err), KILN_OK);
  KT_EQ_INT(kiln_fs_write_atomic(new_tmp, "x", 1, &err), KILN_OK);
  KT_CHECK(mkdir(old_work, 0700) == 0 && mkdir(held_work, 0700) == 0);
  char inner[1300];
  snprintf(inner, sizeof inner, "%s/k1.c", old_work);
  KT_EQ_INT(kiln_fs_write_atomic(inner, "y", 1, &err), KILN_OK);
  struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
  KT_CHECK(utimensat(AT_FDCWD, old_tmp, t, 0) == 0);
  KT_CHECK(utimensat(AT_FDCWD, old_work, t, 0) == 0);
  KT_CHECK(utimensat(AT_FDCWD, held_work, t, 0) == 0);
  /* A live process holds a flock on its work directory. */
  int hfd = open(held_work, O_RDONLY | O_DIRECTORY);
  KT_CHECK(hfd >= 0 && flock(hfd, LOCK_EX) == 0);
  kiln_diskcache *dc = NULL;
  KT_EQ_INT(kiln_diskcache_open(dir, &dc, &err), KILN_OK);
  struct stat st;
  KT_CHECK(stat(old_tmp, &st) != 0);  /* old temp file: gone */
  KT_CHECK(stat(new_tmp, &st) == 0);  /* a writer may still be busy with this one */
  KT_CHECK(stat(old_work, &st) != 0); /* abandoned work directory: gone */
  KT_CHECK(stat(held_work, &st) == 0);
  close(hfd);
  kiln_diskcache_close(dc);
  kiln_fs_remove_tree(dir);
}

/* Compiler work directories of killed processes under the temp base
 * ("kiln-cc-*": no cache directory, or the cache could not be written)
 * were never removed; each kiln_cc sweeps the abandoned ones now. */
KT_TEST(abandoned_work_directories_are_swept) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  const char *names[] = {"kiln-cc-old1", "kiln-cc-held", "kiln-cc-new1", "other-old", "kiln-cc-file"};
  char p[5][1200];
  for (int i = 0; i < 5; i++) snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
  kiln_err err = {0};
  for (int i = 0; i < 4; i++) KT_CHECK(mkdir(p[i], 0700) == 0);
  KT_EQ_INT(kiln_fs_write_atomic(p[4], "z", 1, &err), KILN_OK);
  char inner[1300], sub[1300];
  snprintf(sub, sizeof sub, "%s/sub", p[0]);
  snprintf(inner, sizeof inner, "%s/sub/k.so", p[0]);
  KT_CHECK(mkdir(sub, 0700) == 0);
  KT_EQ_INT(kiln_fs_write_atomic(inner, "y", 1, &err), KILN_OK);
  struct timespec t[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
  for (int i = 0; i < 5; i++)
    if (i != 2) KT_CHECK(utimensat(AT_FDCWD, p[i], t, 0) == 0);
  int hfd = open(p[1], O_RDONLY | O_DIRECTORY);
  KT_CHECK(hfd >= 0 && flock(hfd, LOCK_EX) == 0);
  KT_EQ_INT(kiln_fs_remove_unlocked_dirs(dir, "kiln-cc-", 60), 1);
  struct stat st;
  KT_CHECK(stat(p[0], &st) != 0); /* abandoned (old, nobody holds it): gone, with what it held */
  for (int i = 1; i < 5; i++) KT_CHECK_MSG(stat(p[i], &st) == 0, "%s was removed", names[i]);
  close(hfd);
  KT_EQ_INT(kiln_fs_remove_unlocked_dirs(dir, "kiln-cc-", 60), 1); /* released: now it goes too */
  KT_CHECK(stat(p[1], &st) != 0);
  kiln_fs_remove_tree(dir);
}

/* The cache had no size limit: a program that compiled a new graph every
 * step filled the disk over a long run. KILN_CACHE_MAX_SIZE bounds it: the
 * least recently used entries (a hit renews an entry) go down to 80%, on a
 * store every eighth of the limit and at open at most once an hour. */
static int entry_exists(const char *dir, uint64_t key) {
  char name[32], path[1200];
  kiln_diskcache_entry_name(key, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  return stat(path, &st) == 0;
}

static void set_max_size(const char *v) {
  kiln_config c = *kiln_cfg();
  c.cache_max_size = v;
  kiln_config_set(&c);
}

KT_TEST(cache_size_is_bounded_least_recently_used_first) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  static uint8_t so[10000]; /* an entry of about 10 KB */
  for (size_t i = 0; i < sizeof so; i++) so[i] = (uint8_t)(i * 7);
  set_max_size("80K");
  kiln_diskcache *dc = NULL;
  kiln_err err = {0};
  KT_EQ_INT(kiln_diskcache_open(dir, &dc, &err), KILN_OK);
  if (!dc) return;
  int64_t evicted0 = kiln_counter_value("PersistentCacheEvicted");
  /* 7 entries, 70 KB: under the limit; each older than the next */
  for (uint64_t k = 1; k <= 7; k++) {
    KT_EQ_INT(kiln_diskcache_store(dc, k, "m", k_src, strlen(k_src), so, sizeof so, &err), KILN_OK);
    char name[32], path[1200];
    kiln_diskcache_entry_name(k, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct timespec t[2] = {{.tv_sec = 1000000000 + (time_t)k}, {.tv_sec = 1000000000 + (time_t)k}};
    KT_CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
  }
  for (uint64_t k = 1; k <= 7; k++) KT_CHECK(entry_exists(dir, k));
  /* a hit renews entry 1: now the most recently used */
  uint8_t *buf = NULL;
  kiln_cache_entry_view v;
  KT_EQ_INT(kiln_diskcache_lookup(dc, 1, k_src, strlen(k_src), &buf, &v, NULL, &err), KILN_OK);
  KT_CHECK(buf != NULL);
  free(buf);
  /* 3 more: past 80 KB; the check runs at the store that completes 10 KB (an eighth) */
  for (uint64_t k = 8; k <= 10; k++)
    KT_EQ_INT(kiln_diskcache_store(dc, k, "m", k_src, strlen(k_src), so, sizeof so, &err), KILN_OK);
  int left = 0;
  for (uint64_t k = 1; k <= 10; k++) left += entry_exists(dir, k);
  KT_CHECK_MSG(left * 10100 <= 80 * 1024 * 8 / 10 + 10100, "%d entries left", left);
  KT_CHECK(entry_exists(dir, 1));  /* renewed by its hit */
  KT_CHECK(!entry_exists(dir, 2)); /* the least recently used went first */
  KT_CHECK(entry_exists(dir, 10));
  KT_CHECK(kiln_counter_value("PersistentCacheEvicted") > evicted0);
  kiln_diskcache_close(dc);
  /* at open: a cache already over the limit is cut when the last check is an hour old */
  set_max_size("20K");
  KT_EQ_INT(kiln_diskcache_open(dir, &dc, &err), KILN_OK); /* checked less than an hour ago: left */
  kiln_diskcache_close(dc);
  KT_CHECK(entry_exists(dir, 10) && entry_exists(dir, 1));
  char stamp[1200];
  snprintf(stamp, sizeof stamp, "%s/.size-checked", dir);
  struct timespec old[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
  KT_CHECK(utimensat(AT_FDCWD, stamp, old, 0) == 0);
  KT_EQ_INT(kiln_diskcache_open(dir, &dc, &err), KILN_OK);
  kiln_diskcache_close(dc);
  left = 0;
  for (uint64_t k = 1; k <= 10; k++) left += entry_exists(dir, k);
  KT_CHECK_MSG(left <= 1, "%d entries left under a 20K limit", left);
  /* 0: no limit; a malformed value: the default (2 GiB) */
  set_max_size("0");
  KT_EQ_INT(kiln_diskcache_open(dir, &dc, &err), KILN_OK);
  for (uint64_t k = 20; k <= 25; k++)
    KT_EQ_INT(kiln_diskcache_store(dc, k, "m", k_src, strlen(k_src), so, sizeof so, &err), KILN_OK);
  kiln_diskcache_close(dc);
  for (uint64_t k = 20; k <= 25; k++) KT_CHECK(entry_exists(dir, k));
  set_max_size("a lot");
  KT_EQ_INT(kiln_diskcache_open(dir, &dc, &err), KILN_OK);
  KT_EQ_INT(kiln_diskcache_store(dc, 30, "m", k_src, strlen(k_src), so, sizeof so, &err), KILN_OK);
  kiln_diskcache_close(dc);
  KT_CHECK(entry_exists(dir, 20) && entry_exists(dir, 30));
  set_max_size(NULL);
  kiln_fs_remove_tree(dir);
}

KT_TEST(fs_atomic_write_replaces_and_is_private) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  char path[1100];
  snprintf(path, sizeof path, "%s/file with space", dir);
  kiln_err err = {0};
  KT_EQ_INT(kiln_fs_write_atomic(path, "first", 5, &err), KILN_OK);
  KT_EQ_INT(kiln_fs_write_atomic(path, "second!", 7, &err), KILN_OK);
  int fd = open(path, O_RDONLY);
  uint8_t *data = NULL;
  size_t n = 0;
  KT_EQ_INT(kiln_fs_read_fd(fd, 100, &data, &n, &err), KILN_OK);
  KT_EQ_INT(n, 7);
  KT_CHECK(data && memcmp(data, "second!", 7) == 0);
  free(data);
  lseek(fd, 0, SEEK_SET);
  KT_EQ_INT(kiln_fs_read_fd(fd, 3, &data, &n, &err), KILN_ERR_CORRUPT); /* over the limit */
  close(fd);
  struct stat st;
  KT_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  /* No temp files left beside it. */
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "ls -A \"%s\" | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int count = -1;
  if (p) {
    if (fscanf(p, "%d", &count) != 1) count = -1;
    pclose(p);
  }
  KT_EQ_INT(count, 1);
  /* Atomic write into a missing directory fails cleanly. */
  snprintf(path, sizeof path, "%s/missing/x", dir);
  KT_EQ_INT(kiln_fs_write_atomic(path, "x", 1, &err), KILN_ERR_IO);
  KT_STR_CONTAINS(err.msg, "missing");
  kiln_fs_remove_tree(dir);
}

KT_TEST(fs_remove_tree_does_not_follow_symlinks) {
  char dir[1024], outside[1024];
  fresh_dir(dir, sizeof dir);
  fresh_dir(outside, sizeof outside);
  char keep[1100], link[1100], sub[1100], f[1200];
  snprintf(keep, sizeof keep, "%s/keep", outside);
  kiln_err err = {0};
  KT_EQ_INT(kiln_fs_write_atomic(keep, "k", 1, &err), KILN_OK);
  snprintf(link, sizeof link, "%s/link", dir);
  KT_CHECK(symlink(outside, link) == 0);
  snprintf(sub, sizeof sub, "%s/sub", dir);
  KT_CHECK(mkdir(sub, 0700) == 0);
  snprintf(f, sizeof f, "%s/f", sub);
  KT_EQ_INT(kiln_fs_write_atomic(f, "f", 1, &err), KILN_OK);
  KT_EQ_INT(kiln_fs_remove_tree(dir), 0);
  struct stat st;
  KT_CHECK(stat(dir, &st) != 0);
  KT_CHECK(stat(keep, &st) == 0);
  kiln_fs_remove_tree(outside);
}

KT_TEST(fs_check_private_dir) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  kiln_err err = {0};
  KT_EQ_INT(kiln_fs_check_private_dir(dir, "refusing to use", &err), KILN_OK);
  KT_CHECK(chmod(dir, 0702) == 0);
  KT_EQ_INT(kiln_fs_check_private_dir(dir, "refusing to use", &err), KILN_ERR_UNSAFE);
  KT_STR_CONTAINS(err.msg, "writable by other users");
  KT_STR_CONTAINS(err.msg, dir);
  KT_CHECK(chmod(dir, 0755) == 0); /* readable by others is fine: nothing secret, nothing writable */
  KT_EQ_INT(kiln_fs_check_private_dir(dir, "refusing to use", &err), KILN_OK);
  char missing[1100];
  snprintf(missing, sizeof missing, "%s/nope", dir);
  KT_EQ_INT(kiln_fs_check_private_dir(missing, "x", &err), KILN_ERR_IO);
  kiln_fs_remove_tree(dir);
}

KT_MAIN(KT_CASE(entry_roundtrip), KT_CASE(every_truncation_is_corrupt), KT_CASE(every_single_bit_flip_is_corrupt),
        KT_CASE(parse_reasons_are_specific), KT_CASE(store_lookup_hit_miss_corrupt),
        KT_CASE(stale_temp_files_are_swept), KT_CASE(abandoned_work_directories_are_swept),
        KT_CASE(cache_size_is_bounded_least_recently_used_first), KT_CASE(fs_atomic_write_replaces_and_is_private),
        KT_CASE(fs_remove_tree_does_not_follow_symlinks), KT_CASE(fs_check_private_dir))
