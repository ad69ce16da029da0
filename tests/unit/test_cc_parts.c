/* Several sources compiled at once (kiln_cc_build_parts, the cpu backend's
 * split of a large graph's kernels): each object loads and returns its own
 * value, the cache keeps one entry per source and answers them all the next
 * time, a part the compiler rejects fails the build with the compiler's
 * words and no object, and parts that cannot be written or whose compiler
 * runs out of space are made elsewhere. Oracles: the values the compiled
 * functions return, the entries in the cache directory, the counters. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "kiln/kiln.h"
#include "kt.h"
#include "cc_fixtures.h"
#include "toolchain/compiler.h"

enum { PARTS = 3 };

static kiln_cc *make_cc(const char *cc_path, const char *cache) {
  kiln_cc_config cfg = {0};
  cfg.cc = cc_path;
  cfg.cache_dir = cache;
  kiln_cc *cc = NULL;
  kiln_err err = {0};
  KT_CHECK_MSG(kiln_cc_create(&cfg, &cc, &err) == KILN_OK, "%s", err.msg);
  return cc;
}

/* Sources "int kk_p<i>(void) { return <base + i>; }" (a syntax error in
 * part `bad`, -1 none); the names kk_p<i>. */
typedef struct parts {
  char text[PARTS][128], name[PARTS][16];
  const char *src[PARTS];
  size_t len[PARTS];
  const char *sym[PARTS];
  const char *const *syms[PARTS];
  int n_syms[PARTS];
} parts;

static void make_parts(parts *p, int base, int bad) {
  for (int i = 0; i < PARTS; i++) {
    snprintf(p->name[i], sizeof p->name[i], "kk_p%d", i);
    snprintf(p->text[i], sizeof p->text[i], "int kk_p%d(void) { return %d%s; }\n", i, base + i, i == bad ? " +" : "");
    p->src[i] = p->text[i];
    p->len[i] = strlen(p->text[i]);
    p->sym[i] = p->name[i];
    p->syms[i] = &p->sym[i];
    p->n_syms[i] = 1;
  }
}

/* Build the parts and check that part i returns base + i; returns the
 * build's status. */
static kiln_status build_check(kiln_cc *cc, const parts *p, int base, kiln_cc_result *res, kiln_err *err) {
  kiln_so *so[PARTS];
  kiln_status st = kiln_cc_build_parts(cc, PARTS, p->src, p->len, p->syms, p->n_syms, so, res, err);
  for (int i = 0; i < PARTS; i++) {
    if (st != KILN_OK) {
      KT_CHECK_MSG(so[i] == NULL, "part %d: an object after a failed build", i);
      continue;
    }
    int (*f)(void) = NULL;
    void *sym = kiln_so_symbol(so[i], p->name[i]);
    memcpy(&f, &sym, sizeof f);
    KT_EQ_INT(f ? f() : -1, base + i);
    kiln_so_close(so[i]);
  }
  return st;
}

KT_TEST(parts_compile_together_and_come_back_from_the_cache) {
  char dir[4096];
  fresh_dir(dir, sizeof dir, "cc-parts-");
  kiln_cc *cc = make_cc("gcc", dir);
  if (!cc) return;
  parts p;
  make_parts(&p, 10, -1);
  kiln_cc_result res;
  kiln_err err = {0};
  KT_CHECK_MSG(build_check(cc, &p, 10, &res, &err) == KILN_OK, "%s", err.msg);
  KT_EQ_INT(res.compiler_runs, PARTS);
  KT_EQ_INT(res.from_disk_cache, 0);
  KT_EQ_INT(count_entries(dir), PARTS);
  KT_CHECK_MSG(build_check(cc, &p, 10, &res, &err) == KILN_OK, "%s", err.msg); /* every one a hit */
  KT_EQ_INT(res.compiler_runs, 0);
  KT_EQ_INT(res.from_disk_cache, 1);
  snprintf(p.text[1], sizeof p.text[1], "int kk_p1(void) { return %d; }\n", 11 + 100); /* one part changes */
  p.len[1] = strlen(p.text[1]);
  kiln_so *so[PARTS];
  KT_CHECK_MSG(kiln_cc_build_parts(cc, PARTS, p.src, p.len, p.syms, p.n_syms, so, &res, &err) == KILN_OK, "%s",
               err.msg);
  KT_EQ_INT(res.compiler_runs, 1);
  KT_EQ_INT(res.from_disk_cache, 0);
  int (*f)(void) = NULL;
  void *sym = so[1] ? kiln_so_symbol(so[1], "kk_p1") : NULL;
  memcpy(&f, &sym, sizeof f);
  KT_EQ_INT(f ? f() : -1, 111);
  for (int i = 0; i < PARTS; i++)
    if (so[i]) kiln_so_close(so[i]);
  KT_EQ_INT(count_entries(dir), PARTS + 1);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

KT_TEST(a_part_the_compiler_rejects_fails_the_build) {
  char dir[4096];
  fresh_dir(dir, sizeof dir, "cc-parts-bad-");
  kiln_cc *cc = make_cc("gcc", dir);
  if (!cc) return;
  parts p;
  make_parts(&p, 20, 1);
  kiln_cc_result res;
  kiln_err err = {0};
  KT_EQ_INT(build_check(cc, &p, 20, &res, &err), KILN_ERR_COMPILE);
  KT_STR_CONTAINS(err.msg, "kernel compiler failed (exit status");
  KT_STR_CONTAINS(err.msg, "error"); /* the compiler's own words */
  make_parts(&p, 20, -1); /* fixed: it builds */
  KT_CHECK_MSG(build_check(cc, &p, 20, &res, &err) == KILN_OK, "%s", err.msg);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

/* The cache directory cannot be written: every part is made elsewhere. */
KT_TEST(parts_survive_a_full_cache_directory) {
  char dir[4096];
  fresh_dir(dir, sizeof dir, "cc-parts-full-");
  kiln_cc *cc = make_cc("gcc", dir);
  if (!cc) return;
  kiln_metrics_clear();
  kiln_cc_test_fail_cache_writes(cc, ENOSPC);
  parts p;
  make_parts(&p, 30, -1);
  kiln_cc_result res;
  kiln_err err = {0};
  KT_CHECK_MSG(build_check(cc, &p, 30, &res, &err) == KILN_OK, "%s", err.msg);
  KT_EQ_INT(kiln_counter_value("CacheDirUnwritable"), 1);
  KT_EQ_INT(count_entries(dir), 0);
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

/* The compiler of one part runs out of space (a fake compiler says so the
 * first time it sees kk_p2): that part is made again elsewhere, the others
 * are kept. */
KT_TEST(a_part_whose_compiler_runs_out_of_space_is_made_elsewhere) {
  char dir[4096], cache[4200], body[8600];
  fresh_dir(dir, sizeof dir, "cc-parts-nospace-");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(body, sizeof body,
           "#!/bin/sh\n"
           "for a in \"$@\"; do case \"$a\" in *.c) if grep -q kk_p2 \"$a\" && mkdir '%s/once' 2>/dev/null; then\n"
           "  echo 'fatal error: No space left on device' >&2; exit 1; fi;; esac; done\n"
           "exec gcc \"$@\"\n",
           dir);
  const char *fake = script(dir, "nospace-cc", body, 0700);
  kiln_metrics_clear();
  kiln_cc *cc = make_cc(fake, cache);
  if (!cc) return;
  parts p;
  make_parts(&p, 40, -1);
  kiln_cc_result res;
  kiln_err err = {0};
  KT_CHECK_MSG(build_check(cc, &p, 40, &res, &err) == KILN_OK, "%s", err.msg);
  KT_EQ_INT(kiln_counter_value("CacheDirUnwritable"), 1);
  KT_EQ_INT(count_entries(cache), 2); /* the two made before the move */
  kiln_cc_destroy(cc);
  kiln_fs_remove_tree(dir);
}

KT_MAIN(KT_CASE(parts_compile_together_and_come_back_from_the_cache),
        KT_CASE(a_part_the_compiler_rejects_fails_the_build), KT_CASE(parts_survive_a_full_cache_directory),
        KT_CASE(a_part_whose_compiler_runs_out_of_space_is_made_elsewhere))
