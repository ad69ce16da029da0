/* The kernel compiler driver and its disk cache, end to end: real compiler
 * runs, real dlopen, real files. Oracles: the values the compiled functions
 * must return, /proc/cpuinfo for CPU features, file modes from stat. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "kiln/kiln.h"
#include "kt.h"
#include "toolchain/compiler.h"
#include "toolchain/diskcache.h"

/* A fresh private directory for one test, under $KILN_CACHE_DIR (set by
 * ctest) or $TMPDIR. The name contains a space on purpose: paths are
 * passed to the compiler without a shell. */
static void fresh_dir(char *out, size_t cap) {
  const char *base = getenv("KILN_CACHE_DIR");
  kiln_err err = {0};
  if (base && *base) {
    if (kiln_fs_mkdirs_private(base, &err) != KILN_OK) base = NULL;
  }
  if (kiln_fs_mkdtemp(base, "cc test ", out, cap, &err) != KILN_OK) {
    KT_FAIL("mkdtemp: %s", err.msg);
    out[0] = 0;
  }
}

static kiln_cc *make_cc(const char *dir, kiln_err *err) {
  kiln_cc_config cfg = {0};
  cfg.cache_dir = dir;
  kiln_cc *cc = NULL;
  kiln_status s = kiln_cc_create(&cfg, &cc, err);
  KT_CHECK_MSG(s == KILN_OK, "kiln_cc_create: %s", err->msg);
  return cc;
}

typedef int (*int_fn)(void);

/* Build `src`, call `int fn(void)` named `sym` and return its value (or
 * -9999 on failure). */
static int build_call(kiln_cc *cc, const char *src, const char *sym, kiln_cc_result *res) {
  kiln_err err = {0};
  kiln_so *so = NULL;
  kiln_status s = kiln_cc_build(cc, src, strlen(src), &so, res, &err);
  KT_CHECK_MSG(s == KILN_OK, "build failed: %s: %s", kiln_status_name(s), err.msg);
  if (s != KILN_OK) return -9999;
  int_fn f = (int_fn)kiln_so_symbol(so, sym);
  KT_CHECK_MSG(f != NULL, "symbol %s missing", sym);
  int v = f ? f() : -9999;
  kiln_so_close(so);
  return v;
}

static char entry_path[4096];
static const char *entry_of(const char *dir) {
  /* The only .kce file in the directory (tests use one source at a time). */
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "ls \"%s\"/*.kce 2>/dev/null | head -1", dir);
  FILE *p = popen(cmd, "r");
  entry_path[0] = 0;
  if (p) {
    if (!fgets(entry_path, sizeof entry_path, p)) entry_path[0] = 0;
    pclose(p);
  }
  entry_path[strcspn(entry_path, "\n")] = 0;
  return entry_path;
}

KT_TEST(cpu_features_match_proc_cpuinfo) {
  const char *f = kiln_cpu_features();
  KT_CHECK(f && *f);
  KT_CHECK(f == kiln_cpu_features()); /* computed once */
#if defined(__x86_64__)
  FILE *fp = fopen("/proc/cpuinfo", "r");
  if (!fp) return;
  char line[8192], flags[8192] = "";
  while (fgets(line, sizeof line, fp))
    if (!strncmp(line, "flags", 5)) {
      snprintf(flags, sizeof flags, " %s ", strchr(line, ':') + 1);
      break;
    }
  fclose(fp);
  flags[strcspn(flags, "\n")] = ' ';
  const char *names[][2] = {{"avx2", "avx2"}, {"fma", "fma"}, {"avx512f", "avx512f"}, {"avx512bw", "avx512bw"},
                            {"sse4_2", "sse4.2"}, {"avx512vl", "avx512vl"}};
  char feats[600];
  snprintf(feats, sizeof feats, " %s ", f);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char a[64], b[64];
    snprintf(a, sizeof a, " %s ", names[i][0]);
    snprintf(b, sizeof b, " %s ", names[i][1]);
    KT_CHECK_MSG((strstr(flags, a) != NULL) == (strstr(feats, b) != NULL), "feature %s: cpuinfo %d, kiln '%s'",
                 names[i][1], strstr(flags, a) != NULL, f);
  }
  /* the raw cpuid words (the disk cache's key: every instruction set that
   * -march=native may use, not only the named ones) hold what the kernel
   * reports for features kiln does not name */
  unsigned w[8];
  const char *raw = strstr(f, "cpuid:");
  KT_CHECK_MSG(raw && sscanf(raw, "cpuid:%x.%x.%x.%x.%x.%x.%x.%x", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6],
                             &w[7]) == 8, "no raw cpuid words in '%s'", f);
  if (!raw) return;
  const struct { const char *flag; int word, bit; } bits[] = {
      {"movbe", 0, 22}, {"aes", 0, 25}, {"adx", 2, 19}, {"sha_ni", 2, 29}, {"gfni", 3, 8}, {"vaes", 3, 9},
      {"vpclmulqdq", 3, 10}, {"abm", 6, 5}, {"sse4a", 6, 6}, {"lm", 7, 29}};
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
    char a[64];
    snprintf(a, sizeof a, " %s ", bits[i].flag);
    int in_cpuinfo = strstr(flags, a) != NULL, in_word = (w[bits[i].word] >> bits[i].bit) & 1;
    KT_CHECK_MSG(in_cpuinfo == in_word, "%s: /proc/cpuinfo %d, cpuid word %d bit %d: %d", bits[i].flag, in_cpuinfo,
                 bits[i].word, bits[i].bit, in_word);
  }
#endif
}

KT_TEST(build_then_disk_hit_in_new_instance) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  kiln_err err = {0};
  const char *src =
      "float kk_dot(const float *a, const float *b, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i];"
      " return s; }\nint kk_answer(void) { return 42; }\n";
  int64_t hit0 = kiln_counter_value("PersistentCacheHit"), miss0 = kiln_counter_value("PersistentCacheMiss");
  kiln_cc *cc = make_cc(dir, &err);
  if (!cc) return;
  KT_STR_CONTAINS(kiln_cc_command(cc), "-shared");
  KT_CHECK(kiln_cc_version(cc) && *kiln_cc_version(cc));
  KT_CHECK(kiln_cc_cache_dir(cc) && !strcmp(kiln_cc_cache_dir(cc), dir));
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, src, "kk_answer", &res), 42);
  KT_EQ_INT(res.from_disk_cache, 0);
  KT_EQ_INT(res.disk_cache_corrupt, 0);
  KT_CHECK(res.cc_ns > 0);
  KT_EQ_INT(kiln_counter_value("PersistentCacheMiss") - miss0, 1);
  /* The entry exists, is private, and a second build in the same instance
   * is a disk hit too (kiln_cc has no in-memory cache: that is the
   * runtime's). */
  struct stat st;
  KT_CHECK(stat(entry_of(dir), &st) == 0 && (st.st_mode & 0777) == 0600);
  KT_CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  kiln_cc_destroy(cc);

  cc = make_cc(dir, &err);
  if (!cc) return;
  kiln_so *so = NULL;
  KT_CHECK(kiln_cc_build(cc, src, strlen(src), &so, &res, &err) == KILN_OK);
  KT_EQ_INT(res.from_disk_cache, 1);
  KT_EQ_INT(kiln_counter_value("PersistentCacheHit") - hit0, 1);
  if (so) {
    typedef float (*dot_fn)(const float *, const float *, int);
    dot_fn dot = (dot_fn)kiln_so_symbol(so, "kk_dot");
    float a[5] = {1, 2, 3, 4, 5}, b[5] = {2, 2, 2, 2, -1};
    KT_CHECK(dot != NULL);
    if (dot) KT_NEAR(dot(a, b, 5), 15.0, 0);
    KT_CHECK(kiln_so_symbol(so, "kk_missing") == NULL);
    kiln_so_close(so);
  }
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

KT_TEST(compile_error_reports_compiler_output) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  kiln_err err = {0};
  kiln_cc *cc = make_cc(dir, &err);
  if (!cc) return;
  const char *src = "int kk_bad(void) { return undeclared_thing_xyz + ; }\n";
  kiln_so *so = (kiln_so *)1;
  kiln_status s = kiln_cc_build(cc, src, strlen(src), &so, NULL, &err);
  KT_EQ_INT(s, KILN_ERR_COMPILE);
  KT_CHECK(so == NULL);
  KT_STR_CONTAINS(err.msg, "undeclared_thing_xyz");
  KT_STR_CONTAINS(err.msg, "exit status");
  KT_CHECK(entry_of(dir)[0] == 0); /* nothing cached */
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

KT_TEST(missing_compiler_is_an_error_not_an_abort) {
  kiln_cc_config cfg = {.cc = "/nonexistent dir/kiln-no-such-cc"};
  kiln_cc *cc = (kiln_cc *)1;
  kiln_err err = {0};
  KT_EQ_INT(kiln_cc_create(&cfg, &cc, &err), KILN_ERR_COMPILE);
  KT_CHECK(cc == NULL);
  KT_STR_CONTAINS(err.msg, "kiln-no-such-cc");
  cfg.cc = NULL;
  cfg.cflags = "-O2 '-DUNBALANCED";
  KT_EQ_INT(kiln_cc_create(&cfg, &cc, &err), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(err.msg, "quote");
}

KT_TEST(quoted_flags_reach_the_compiler_without_a_shell) {
  kiln_cc_config cfg = {.cflags = "-O1 -fPIC -shared \"-DKK_VAL=(3 + 4)\" '-DKK_STR=\"$HOME;x\"'"};
  kiln_cc *cc = NULL;
  kiln_err err = {0};
  KT_CHECK_MSG(kiln_cc_create(&cfg, &cc, &err) == KILN_OK, "%s", err.msg);
  if (!cc) return;
  KT_CHECK(kiln_cc_cache_dir(cc) == NULL);
  kiln_cc_result res;
  /* KK_STR must arrive literally: a shell would have expanded $HOME and cut at ';'. */
  const char *src =
      "static const char s[] = KK_STR;\n"
      "int kk_v(void) { return KK_VAL * 10 + (s[0] == '$' && s[5] == ';' && sizeof s == 8); }\n";
  KT_EQ_INT(build_call(cc, src, "kk_v", &res), 71);
  KT_EQ_INT(res.from_disk_cache, 0);
  kiln_cc_destroy(cc);
}

KT_TEST(key_collision_never_loads_the_wrong_code) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  kiln_err err = {0};
  kiln_cc *cc = make_cc(dir, &err);
  if (!cc) return;
  kiln_cc_test_force_key(cc, 0x1234);
  const char *a = "int kk_f(void) { return 1; }\n";
  const char *b = "int kk_f(void) { return 2; }\n";
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, a, "kk_f", &res), 1);
  KT_EQ_INT(build_call(cc, b, "kk_f", &res), 2);
  KT_EQ_INT(res.from_disk_cache, 0);
  KT_EQ_INT(res.disk_cache_corrupt, 0);
  KT_EQ_INT(build_call(cc, b, "kk_f", &res), 2);
  KT_EQ_INT(res.from_disk_cache, 1);
  KT_EQ_INT(build_call(cc, a, "kk_f", &res), 1);
  KT_EQ_INT(res.from_disk_cache, 0);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

/* Corrupt the entry with `how`, then check the next build notices,
 * rebuilds correct code, says so on stderr, and the one after hits. */
static void corrupt_and_rebuild(int how) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  kiln_err err = {0};
  kiln_cc *cc = make_cc(dir, &err);
  if (!cc) return;
  const char *src = "int kk_g(void) { return 7; }\n";
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, src, "kk_g", &res), 7);
  const char *path = entry_of(dir);
  struct stat st;
  KT_CHECK(stat(path, &st) == 0);
  int fd = open(path, O_RDWR);
  KT_CHECK(fd >= 0);
  if (how == 0) KT_CHECK(ftruncate(fd, st.st_size / 2) == 0);               /* truncated */
  if (how == 1) { /* one flipped bit in the object */
    unsigned char c = 0;
    KT_CHECK(pread(fd, &c, 1, st.st_size - 100) == 1);
    c ^= 0x10;
    KT_CHECK(pwrite(fd, &c, 1, st.st_size - 100) == 1);
  }
  if (how == 2) {                                                           /* garbage */
    char junk[300];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
    KT_CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, junk, sizeof junk, 0) == (ssize_t)sizeof junk);
  }
  if (how == 3) KT_CHECK(ftruncate(fd, 0) == 0);                            /* empty */
  close(fd);

  /* Capture stderr to check the report. */
  char log[1100];
  snprintf(log, sizeof log, "%s/stderr.txt", dir);
  fflush(stderr);
  int saved = dup(2), lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(lfd, 2);
  close(lfd);
  int v = build_call(cc, src, "kk_g", &res);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  KT_EQ_INT(v, 7);
  KT_EQ_INT(res.disk_cache_corrupt, 1);
  KT_EQ_INT(res.from_disk_cache, 0);
  FILE *lf = fopen(log, "r");
  char text[2048] = "";
  if (lf) {
    size_t n = fread(text, 1, sizeof text - 1, lf);
    text[n] = 0;
    fclose(lf);
  }
  KT_STR_CONTAINS(text, "is corrupt");
  KT_STR_CONTAINS(text, "rebuilding");
  KT_STR_CONTAINS(text, ".kce");
  KT_EQ_INT(build_call(cc, src, "kk_g", &res), 7);
  KT_EQ_INT(res.from_disk_cache, 1);
  KT_EQ_INT(res.disk_cache_corrupt, 0);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

KT_TEST(corrupt_entry_truncated) { corrupt_and_rebuild(0); }
KT_TEST(corrupt_entry_bad_checksum) { corrupt_and_rebuild(1); }
KT_TEST(corrupt_entry_garbage) { corrupt_and_rebuild(2); }
KT_TEST(corrupt_entry_empty) { corrupt_and_rebuild(3); }

KT_TEST(refuses_unsafe_directory_and_files) {
  char dir[1024];
  fresh_dir(dir, sizeof dir);
  kiln_err err = {0};
  kiln_cc *cc = make_cc(dir, &err);
  if (!cc) return;
  const char *src = "int kk_h(void) { return 5; }\n";
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, src, "kk_h", &res), 5);
  kiln_so *so = NULL;

  /* The directory becomes world-writable after create: loading refused. */
  KT_CHECK(chmod(dir, 0777) == 0);
  KT_EQ_INT(kiln_cc_build(cc, src, strlen(src), &so, &res, &err), KILN_ERR_UNSAFE);
  KT_CHECK(so == NULL);
  KT_STR_CONTAINS(err.msg, "refusing to load");
  KT_STR_CONTAINS(err.msg, dir);
  KT_STR_CONTAINS(err.msg, "writable by other users");
  /* ... and a new instance refuses the directory outright. */
  kiln_cc *cc2 = (kiln_cc *)1;
  kiln_cc_config cfg = {.cache_dir = dir};
  KT_EQ_INT(kiln_cc_create(&cfg, &cc2, &err), KILN_ERR_UNSAFE);
  KT_CHECK(cc2 == NULL);
  KT_STR_CONTAINS(err.msg, dir);
  KT_CHECK(chmod(dir, 0770) == 0);
  KT_EQ_INT(kiln_cc_create(&cfg, &cc2, &err), KILN_ERR_UNSAFE);
  KT_CHECK(chmod(dir, 0700) == 0);

  /* A group-writable entry file. */
  const char *path = entry_of(dir);
  char saved_path[4096];
  snprintf(saved_path, sizeof saved_path, "%s", path);
  KT_CHECK(chmod(saved_path, 0620) == 0);
  KT_EQ_INT(kiln_cc_build(cc, src, strlen(src), &so, &res, &err), KILN_ERR_UNSAFE);
  KT_STR_CONTAINS(err.msg, saved_path);
  KT_STR_CONTAINS(err.msg, "writable by other users");
  KT_CHECK(chmod(saved_path, 0600) == 0);
  KT_EQ_INT(build_call(cc, src, "kk_h", &res), 5);
  KT_EQ_INT(res.from_disk_cache, 1);

  /* The entry replaced by a symlink (to a valid entry elsewhere). */
  char other[4200];
  snprintf(other, sizeof other, "%s/elsewhere", dir);
  KT_CHECK(rename(saved_path, other) == 0);
  KT_CHECK(symlink(other, saved_path) == 0);
  KT_EQ_INT(kiln_cc_build(cc, src, strlen(src), &so, &res, &err), KILN_ERR_UNSAFE);
  KT_STR_CONTAINS(err.msg, "symbolic link");
  unlink(saved_path);

  /* Owned by another user (only testable as root). */
  if (geteuid() == 0) {
    KT_EQ_INT(build_call(cc, src, "kk_h", &res), 5);
    KT_CHECK(chown(entry_of(dir), 65534, 65534) == 0);
    KT_EQ_INT(kiln_cc_build(cc, src, strlen(src), &so, &res, &err), KILN_ERR_UNSAFE);
    KT_STR_CONTAINS(err.msg, "owned by another user");
  }
  kiln_cc_destroy(cc);

  /* A cache directory that is a symlink to a private directory. */
  char link[1100], target[1100];
  snprintf(target, sizeof target, "%s/real", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  KT_CHECK(mkdir(target, 0700) == 0 && symlink(target, link) == 0);
  cfg.cache_dir = link;
  KT_EQ_INT(kiln_cc_create(&cfg, &cc2, &err), KILN_ERR_UNSAFE);
  KT_STR_CONTAINS(err.msg, "symbolic link");
  kiln_fs_remove_tree(dir);
}

KT_TEST(no_cache_dir_uses_private_temp_and_cleans_up) {
  kiln_cc_config cfg = {.cache_dir = ""};
  kiln_cc *cc = NULL;
  kiln_err err = {0};
  KT_CHECK_MSG(kiln_cc_create(&cfg, &cc, &err) == KILN_OK, "%s", err.msg);
  if (!cc) return;
  KT_CHECK(kiln_cc_cache_dir(cc) == NULL);
  kiln_cc_result res;
  int64_t miss0 = kiln_counter_value("PersistentCacheMiss");
  const char *src = "int kk_a(void) { return 3; }\nint kk_b(void) { return 4; }\n";
  KT_EQ_INT(build_call(cc, src, "kk_a", &res), 3);
  KT_EQ_INT(build_call(cc, src, "kk_b", &res), 4);
  KT_EQ_INT(res.from_disk_cache, 0);
  KT_EQ_INT(kiln_counter_value("PersistentCacheMiss") - miss0, 0); /* no persistent cache: not counted */
  kiln_cc_destroy(cc);
}

KT_MAIN(KT_CASE(cpu_features_match_proc_cpuinfo), KT_CASE(build_then_disk_hit_in_new_instance),
        KT_CASE(compile_error_reports_compiler_output), KT_CASE(missing_compiler_is_an_error_not_an_abort),
        KT_CASE(quoted_flags_reach_the_compiler_without_a_shell), KT_CASE(key_collision_never_loads_the_wrong_code),
        KT_CASE(corrupt_entry_truncated), KT_CASE(corrupt_entry_bad_checksum), KT_CASE(corrupt_entry_garbage),
        KT_CASE(corrupt_entry_empty), KT_CASE(refuses_unsafe_directory_and_files),
        KT_CASE(no_cache_dir_uses_private_temp_and_cleans_up))
