/* Test fixtures of the compiler-driver tests (test_cache_faults.c,
 * test_cc_parts.c): a fresh private directory, an executable script (a
 * fake compiler), the entries of a cache directory. Test code only. */
#ifndef KILN_TESTS_CC_FIXTURES_H
#define KILN_TESTS_CC_FIXTURES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "kt.h"

/* A new directory under $KILN_CACHE_DIR (or the temporary directory). */
static inline void fresh_dir(char *out, size_t cap, const char *prefix) {
  const char *base = getenv("KILN_CACHE_DIR");
  kiln_err err = {0};
  if (base && *base && kiln_fs_mkdirs_private(base, &err) != KILN_OK) base = NULL;
  if (kiln_fs_mkdtemp(base, prefix, out, cap, &err) != KILN_OK) {
    KT_FAIL("mkdtemp: %s", err.msg);
    out[0] = 0;
  }
}

/* An executable script `body` at dir/name; returns its path (static). */
static inline const char *script(const char *dir, const char *name, const char *body, int mode) {
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  KT_CHECK(f != NULL);
  if (f) {
    fputs(body, f);
    fclose(f);
  }
  chmod(path, (mode_t)mode);
  return path;
}

/* The cache entries (.kce files) in dir. */
static inline int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, ".kce") != NULL;
  if (d) closedir(d);
  return n;
}

#endif
