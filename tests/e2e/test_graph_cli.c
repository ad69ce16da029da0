/* End-to-end: graph dumps from a real program (KILN_SAVE_GRAPHS) and the
 * `kiln graph diff` command on them. The program is the S2 scenario
 * (examples/s2_growing_eval.c), whose evaluation graphs differ in the size
 * of one concat; the oracle is that program's own source (the concat's line
 * is found by its marker comment) and the exit-code contract of the
 * command (0 equal, 1 different, 2 unusable input). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kt.h"

static char g_bin[4096]; /* <build>/bin */

static void find_bin(void) {
  if (g_bin[0]) return;
  ssize_t n = readlink("/proc/self/exe", g_bin, sizeof g_bin - 1);
  g_bin[n > 0 ? n : 0] = 0;
  for (int i = 0; i < 2; i++) { /* <build>/bin/tests/test_graph_cli -> <build>/bin */
    char *s = strrchr(g_bin, '/');
    if (s) *s = 0;
  }
}

/* Run a shell command; its stdout+stderr into out (cap bytes); returns the
 * exit status (-1 if it did not exit). */
static int run_cmd(const char *cmd, char *out, size_t cap) {
  char full[32800];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names in dir ending in ext (caller frees each and the array). */
static int list_files(const char *dir, const char *ext, char ***out) {
  DIR *d = opendir(dir);
  int n = 0, cap = 64;
  char **v = malloc(sizeof *v * (size_t)cap);
  struct dirent *e;
  while (d && v && (e = readdir(d))) {
    size_t l = strlen(e->d_name), le = strlen(ext);
    if (strncmp(e->d_name, "graph-", 6) || l < le || strcmp(e->d_name + l - le, ext)) continue;
    if (n == cap) break;
    v[n++] = strdup(e->d_name);
  }
  if (d) closedir(d);
  qsort(v, (size_t)n, sizeof *v, cmp_str);
  *out = v;
  return n;
}

static int concat_line(void) {
  char path[4096], line[4096];
  snprintf(path, sizeof path, "%s", __FILE__);
  char *p = strstr(path, "tests/e2e/");
  if (!p) return -1;
  strcpy(p, "examples/s2_growing_eval.c");
  FILE *f = fopen(path, "r");
  int n = 0, found = -1;
  while (f && fgets(line, sizeof line, f)) {
    n++;
    if (strstr(line, "/* S2: the concat */")) {
      found = n;
      break;
    }
  }
  if (f) fclose(f);
  return found;
}

KT_TEST(text_dumps_and_graph_diff) {
  find_bin();
  char dir[] = "/tmp/kiln-graph-cli-XXXXXX", cmd[32768], out[65536];
  KT_CHECK(mkdtemp(dir) != NULL);
  snprintf(cmd, sizeof cmd, "KILN_DISK_CACHE=0 KILN_SAVE_GRAPHS=%s/text '%s/examples/s2_growing_eval' --steps 4", dir,
           g_bin);
  KT_CHECK(run_cmd(cmd, out, sizeof out) == 0);
  char sub[4200], **files = NULL;
  snprintf(sub, sizeof sub, "%s/text", dir);
  int n = list_files(sub, ".txt", &files);
  KT_CHECK(n >= 3); /* training graph(s), then one graph per evaluation step */
  int line = concat_line();
  KT_CHECK(line > 0);
  if (n >= 3 && line > 0) {
    /* the last two evaluation graphs: the concat grew by one batch */
    snprintf(cmd, sizeof cmd, "'%s/kiln' graph diff '%s/%s' '%s/%s'", g_bin, sub, files[n - 2], sub, files[n - 1]);
    int st = run_cmd(cmd, out, sizeof out);
    KT_CHECK(st == 1);
    char want[256];
    snprintf(want, sizeof want, "concat at s2_growing_eval.c:%d: shape [", line);
    KT_CHECK(strstr(out, want) != NULL);
    KT_CHECK(strstr(out, "difference") != NULL);
    if (st != 1 || !strstr(out, want)) fprintf(stderr, "kiln graph diff said:\n%s\n", out);
    /* a graph against itself */
    snprintf(cmd, sizeof cmd, "'%s/kiln' graph diff '%s/%s' '%s/%s'", g_bin, sub, files[n - 1], sub, files[n - 1]);
    KT_CHECK(run_cmd(cmd, out, sizeof out) == 0);
    /* a damaged dump: exit 2, the file and line named */
    char bad[4300];
    snprintf(bad, sizeof bad, "%s/bad.txt", dir);
    FILE *f = fopen(bad, "w");
    KT_CHECK(f != NULL);
    if (f) {
      fputs("# kiln graph dump, text format v1\nkey 0x1\n%0 = frobnicate f32[2] @ x.c:1\n", f);
      fclose(f);
    }
    snprintf(cmd, sizeof cmd, "'%s/kiln' graph diff '%s' '%s/%s'", g_bin, bad, sub, files[n - 1]);
    KT_CHECK(run_cmd(cmd, out, sizeof out) == 2);
    KT_CHECK(strstr(out, "bad.txt:") != NULL);
    /* usage */
    snprintf(cmd, sizeof cmd, "'%s/kiln' graph diff '%s'", g_bin, bad);
    KT_CHECK(run_cmd(cmd, out, sizeof out) == 2);
  }
  for (int i = 0; i < n; i++) free(files[i]);
  free(files);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  KT_CHECK(system(cmd) == 0);
}

KT_TEST(dot_dumps_draw_kernels_as_clusters) {
  find_bin();
  char dir[] = "/tmp/kiln-graph-dot-XXXXXX", cmd[32768], out[65536];
  KT_CHECK(mkdtemp(dir) != NULL);
  snprintf(cmd, sizeof cmd,
           "KILN_DISK_CACHE=0 KILN_SAVE_GRAPHS=%s KILN_SAVE_GRAPHS_FMT=dot '%s/examples/s2_growing_eval' --steps 2",
           dir, g_bin);
  KT_CHECK(run_cmd(cmd, out, sizeof out) == 0);
  char **files = NULL;
  int n = list_files(dir, ".dot", &files);
  KT_CHECK(n >= 1);
  if (n >= 1) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, files[0]);
    FILE *f = fopen(path, "r");
    size_t len = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[len] = 0;
    if (f) fclose(f);
    KT_CHECK(strstr(out, "\ndigraph kiln_graph {") != NULL);
    KT_CHECK(strstr(out, "subgraph cluster_k") != NULL);
    KT_CHECK(strstr(out, "s2_growing_eval.c:") != NULL);
  }
  for (int i = 0; i < n; i++) free(files[i]);
  free(files);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  KT_CHECK(system(cmd) == 0);
}

KT_MAIN(KT_CASE(text_dumps_and_graph_diff), KT_CASE(dot_dumps_draw_kernels_as_clusters))
