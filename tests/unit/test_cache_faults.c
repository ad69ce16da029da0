/* The cache never makes a program fail: faults of the compiler and of the
 * cache directory, injected without root tricks (fake compiler scripts, a
 * test hook that fails the cache directory's writes as a full disk does, a
 * stored entry with valid checksums and a truncated object). Oracles: the
 * values the compiled functions return, the files in the cache directory,
 * the errors' words. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "kiln/kiln.h"
#include "kt.h"
#include "cc_fixtures.h"
#include "toolchain/compiler.h"
#include "toolchain/compiler_internal.h"
#include "toolchain/diskcache.h"

static const char k_src[] = "int kk_answer(void) { return 6 * 7; }\n";

static kiln_cc *make_cc(const char *cc_path, const char *cache, kiln_err *err) {
  kiln_cc_config cfg = {0};
  cfg.cc = cc_path;
  cfg.cache_dir = cache;
  kiln_cc *cc = NULL;
  kiln_cc_create(&cfg, &cc, err);
  return cc;
}

/* Build k_src (checking its symbol) and call it; -1 on failure (err set). */
static int build_call(kiln_cc *cc, kiln_cc_result *res, kiln_err *err) {
  const char *sym = "kk_answer";
  kiln_so *so = NULL;
  if (kiln_cc_build_checked(cc, k_src, strlen(k_src), &sym, 1, &so, res, err) != KILN_OK) return -1;
  int (*f)(void) = NULL;
  void *p = kiln_so_symbol(so, sym);
  memcpy(&f, &p, sizeof f);
  int v = f ? f() : -2;
  kiln_so_close(so);
  return v;
}

/* A fake compiler (the script `body`, named `name`) in a fresh directory
 * dir with its cache in dir/cache; NULL (a failed check) if it cannot be
 * set up. */
static kiln_cc *fake_cc(char *dir, size_t dcap, char *cache, size_t ccap, const char *prefix, const char *name,
                        const char *body, kiln_err *err) {
  fresh_dir(dir, dcap, prefix);
  snprintf(cache, ccap, "%s/cache", dir);
  kiln_cc *cc = make_cc(script(dir, name, body, 0700), cache, err);
  KT_CHECK_MSG(cc != NULL, "%s", err->msg);
  return cc;
}

/* A compiler that exits 0 but leaves a truncated object: an error that says
 * so, nothing stored; the real compiler then builds and stores it. */
KT_TEST(truncated_object_is_never_stored) {
  char dir[4096], cache[4200];
  kiln_err err = {0};
  kiln_cc *cc = fake_cc(dir, sizeof dir, cache, sizeof cache, "cc-trunc-", "truncating-cc",
                        "#!/bin/sh\n"
                        "out=; prev=\n"
                        "for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n"
                        "gcc \"$@\" || exit $?\n"
                        "[ -n \"$out\" ] && truncate -s 1500 \"$out\"\n"
                        "exit 0\n",
                        &err);
  if (!cc) return;
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, &res, &err), -1);
  KT_STR_CONTAINS(err.msg, "not a complete shared object");
  KT_STR_CONTAINS(err.msg, "truncated");
  KT_STR_CONTAINS(err.msg, "truncating-cc");
  KT_EQ_INT(count_entries(cache), 0);
  kiln_cc_destroy(cc);

  memset(&err, 0, sizeof err);
  cc = make_cc("gcc", cache, &err);
  KT_CHECK_MSG(cc != NULL, "%s", err.msg);
  if (!cc) return;
  KT_EQ_INT(build_call(cc, &res, &err), 42);
  KT_EQ_INT(count_entries(cache), 1);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

/* An entry stored with valid checksums around a truncated object (what the
 * old driver stored from such a compiler): evicted and rebuilt, right
 * result, and the rebuilt entry is a hit next time. */
KT_TEST(stored_entry_that_does_not_load_is_rebuilt) {
  char dir[4096];
  fresh_dir(dir, sizeof dir, "cc-evict-");
  kiln_err err = {0};
  kiln_cc *cc = make_cc("gcc", dir, &err);
  KT_CHECK_MSG(cc != NULL, "%s", err.msg);
  if (!cc) return;
  const uint64_t key = 0x1234abcd5678ef01ULL;
  kiln_cc_test_force_key(cc, key);
  /* the bytes of a real object, cut short */
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, &res, &err), 42); /* stores a good entry under key */
  char name[32], path[4200];
  kiln_diskcache_entry_name(key, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  uint8_t *ent = NULL;
  size_t n = 0;
  int efd = open(path, O_RDONLY | O_CLOEXEC);
  KT_CHECK(efd >= 0 && kiln_fs_read_fd(efd, 1 << 26, &ent, &n, &err) == KILN_OK);
  if (efd >= 0) close(efd);
  kiln_cache_entry_view v;
  KT_CHECK(ent && kiln_cache_entry_parse(ent, n, &v, &err) == KILN_OK);
  kiln_diskcache *dc = NULL;
  KT_CHECK(kiln_diskcache_open(dir, &dc, &err) == KILN_OK);
  if (ent && dc)
    KT_CHECK(kiln_diskcache_store(dc, key, "test", k_src, strlen(k_src), v.so, v.so_len / 3, &err) == KILN_OK);
  free(ent);
  kiln_diskcache_close(dc);
  kiln_cc_destroy(cc);

  cc = make_cc("gcc", dir, &err);
  if (!cc) return;
  kiln_cc_test_force_key(cc, key);
  KT_EQ_INT(build_call(cc, &res, &err), 42);
  KT_EQ_INT(res.from_disk_cache, 0);
  KT_EQ_INT(res.disk_cache_corrupt, 1);
  KT_EQ_INT(build_call(cc, &res, &err), 42); /* the rebuilt entry loads */
  KT_EQ_INT(res.from_disk_cache, 1);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

/* A compiler that never exits is killed after KILN_CC_TIMEOUT seconds. */
KT_TEST(compiler_that_never_exits_times_out) {
  char dir[4096];
  fresh_dir(dir, sizeof dir, "cc-hang-");
  const char *fake = script(dir, "hanging-cc",
                            "#!/bin/sh\n"
                            "case \"$1\" in --version) exec gcc --version;; esac\n"
                            "sleep 600\n",
                            0700);
  setenv("KILN_CC_TIMEOUT", "1", 1);
  kiln_config_load(); /* read again: an earlier test loaded it */
  kiln_err err = {0};
  kiln_cc *cc = make_cc(fake, NULL, &err);
  unsetenv("KILN_CC_TIMEOUT");
  kiln_config_load();
  KT_CHECK_MSG(cc != NULL, "%s", err.msg);
  if (!cc) return;
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, &res, &err), -1);
  KT_STR_CONTAINS(err.msg, "did not finish within 1 s");
  KT_STR_CONTAINS(err.msg, "KILN_CC_TIMEOUT");
  KT_STR_CONTAINS(err.msg, "hanging-cc");
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

/* A compiler that exits 0 with a complete object that lacks the kernel's
 * symbol: a COMPILE error naming the symbol and the compiler (it once was
 * an INTERNAL error naming neither file nor compiler), nothing stored. */
KT_TEST(object_without_the_symbol_is_named) {
  char dir[4096], cache[4200];
  kiln_err err = {0};
  kiln_cc *cc = fake_cc(dir, sizeof dir, cache, sizeof cache, "cc-nosym-", "renaming-cc",
                        "#!/bin/sh\n"
                        "for a in \"$@\"; do case \"$a\" in *.c) echo 'int kk_other(void) { return 1; }' >\"$a\";; esac; done\n"
                        "exec gcc \"$@\"\n",
                        &err);
  if (!cc) return;
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, &res, &err), -1);
  KT_EQ_INT(err.code, KILN_ERR_COMPILE);
  KT_STR_CONTAINS(err.msg, "symbol kk_answer missing");
  KT_STR_CONTAINS(err.msg, "renaming-cc");
  KT_EQ_INT(count_entries(cache), 0);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

/* A KILN_CC that exists but cannot be run is named as such. */
KT_TEST(non_executable_compiler_is_named) {
  char dir[4096];
  fresh_dir(dir, sizeof dir, "cc-noexec-");
  const char *fake = script(dir, "plain-file-cc", "#!/bin/sh\nexec gcc \"$@\"\n", 0600);
  kiln_err err = {0};
  kiln_cc *cc = make_cc(fake, NULL, &err);
  KT_CHECK(cc == NULL);
  KT_STR_CONTAINS(err.msg, "plain-file-cc");
  KT_STR_CONTAINS(err.msg, "not executable");
  kiln_cc_destroy(cc);
  memset(&err, 0, sizeof err);
  cc = make_cc("/nonexistent/kiln-cc", NULL, &err);
  KT_CHECK(cc == NULL);
  KT_STR_CONTAINS(err.msg, "not found");
  kiln_fs_remove_tree(dir);
}

/* The cache directory cannot be written (full disk): builds and cache hits
 * go on elsewhere, said once. */
KT_TEST(full_cache_directory_is_survived) {
  char dir[4096];
  fresh_dir(dir, sizeof dir, "cc-full-");
  kiln_err err = {0};
  kiln_cc *cc = make_cc("gcc", dir, &err);
  if (!cc) return;
  kiln_cc_result res;
  KT_EQ_INT(build_call(cc, &res, &err), 42); /* stored while there was room */
  kiln_cc_destroy(cc);

  kiln_metrics_clear();
  cc = make_cc("gcc", dir, &err);
  if (!cc) return;
  kiln_cc_test_fail_cache_writes(cc, ENOSPC);
  KT_EQ_INT(build_call(cc, &res, &err), 42); /* a hit: the private copy goes elsewhere */
  KT_EQ_INT(res.from_disk_cache, 1);
  static const char other[] = "int kk_other(void) { return 5; }\n";
  const char *sym = "kk_other";
  kiln_so *so = NULL;
  KT_CHECK_MSG(kiln_cc_build_checked(cc, other, strlen(other), &sym, 1, &so, &res, &err) == KILN_OK, "%s", err.msg);
  int (*f)(void) = NULL;
  void *p = kiln_so_symbol(so, sym);
  memcpy(&f, &p, sizeof f);
  KT_EQ_INT(f ? f() : -1, 5); /* a miss: compiled elsewhere */
  kiln_so_close(so);
  KT_EQ_INT(kiln_counter_value("CacheDirUnwritable"), 1); /* one relocation, one warning */
  KT_EQ_INT(count_entries(dir), 1);                       /* nothing stored meanwhile */
  /* the relocated work directory is held (flock) while cc lives, so another process's sweep of
   * abandoned work directories (kiln_fs_remove_unlocked_dirs) leaves it alone */
  int wfd = open(cc->work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  KT_CHECK(wfd >= 0 && flock(wfd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK);
  if (wfd >= 0) close(wfd);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

KT_MAIN(KT_CASE(truncated_object_is_never_stored), KT_CASE(stored_entry_that_does_not_load_is_rebuilt),
        KT_CASE(compiler_that_never_exits_times_out), KT_CASE(non_executable_compiler_is_named),
        KT_CASE(full_cache_directory_is_survived), KT_CASE(object_without_the_symbol_is_named))
