/* The public queries the `kiln` tools are built on: kiln/doctor.h (the
 * kernel compiler, the GEMM library), kiln/graphfile.h (graph dumps read
 * and diffed) and kiln_profiler_client_addr_valid. Each error goes to the
 * one channel: a status return and the sticky status, never a crash. */
#define _GNU_SOURCE
#include <kiln/doctor.h>
#include <kiln/graphfile.h>
#include <kiln/kiln.h>
#include <kiln/profiler_server.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kt.h"

static const char k_dump[] =
    "# kiln graph dump, text format v1\n"
    "key 0x00000000000000a1\n"
    "%0 = leaf f32[4,8] input=0 @ train.c:40\n"
    "%1 = leaf f32[4,8] input=1 @ train.c:41\n"
    "%2 = add f32[4,8] %0, %1 @ train.c:42\n"
    "%3 = reduce_sum f32[4,1] %2 axes=[1] @ train.c:43\n"
    "inputs: %0 %1\n"
    "outputs: %3\n";

/* Write text to the file at path. */
static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  KT_CHECK(f != NULL);
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* text with the first occurrence of from replaced by to (malloc'd). */
static char *replace(const char *text, const char *from, const char *to) {
  const char *p = strstr(text, from);
  size_t n = strlen(text) + strlen(to) + 1;
  char *s = malloc(n);
  if (!s || !p) {
    free(s);
    return NULL;
  }
  snprintf(s, n, "%.*s%s%s", (int)(p - text), text, to, p + strlen(from));
  return s;
}

KT_TEST(graph_file_read_and_diff) {
  char dir[] = "/tmp/kiln-graphfile-XXXXXX";
  KT_CHECK(mkdtemp(dir) != NULL);
  char pa[256], pb[256], pc[256], bad[256];
  snprintf(pa, sizeof pa, "%s/a.txt", dir);
  snprintf(pb, sizeof pb, "%s/b.txt", dir);
  snprintf(pc, sizeof pc, "%s/c.txt", dir);
  snprintf(bad, sizeof bad, "%s/bad.txt", dir);
  write_file(pa, k_dump);
  char *mul = replace(k_dump, "add f32", "mul f32");
  char *moved = replace(k_dump, "train.c:42", "train.c:99"); /* same graph, another source line */
  KT_CHECK(mul && moved);
  if (mul) write_file(pb, mul);
  if (moved) write_file(pc, moved);
  write_file(bad, "# kiln graph dump, text format v1\nkey 0x1\n%0 = frobnicate f32[2] @ x.c:1\n");
  free(mul);
  free(moved);

  kiln_clear_error();
  kiln_graph_file *a = NULL, *b = NULL, *c = NULL;
  KT_EQ_INT(kiln_graph_file_create(pa, &a), KILN_OK);
  KT_EQ_INT(kiln_graph_file_create(pb, &b), KILN_OK);
  KT_EQ_INT(kiln_graph_file_create(pc, &c), KILN_OK);
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  KT_EQ_INT(kiln_graph_file_nodes(a), 4);
  KT_CHECK(kiln_graph_file_key(a) == 0xa1);
  KT_CHECK(kiln_graph_file_equal(a, a));
  KT_CHECK(kiln_graph_file_equal(a, c));
  KT_CHECK(!kiln_graph_file_equal(a, b));

  kiln_graph_diff *d = NULL;
  KT_EQ_INT(kiln_graph_diff_create(a, b, &d), KILN_OK);
  KT_EQ_INT(kiln_graph_diff_count(d), 2);
  KT_STR_CONTAINS(kiln_graph_diff_text(d), "  + mul at train.c:42 [4,8]\n");
  KT_STR_CONTAINS(kiln_graph_diff_text(d), "  - add at train.c:42 [4,8]\n");
  KT_CHECK(!strcmp(kiln_graph_diff_summary(d), "2 differences: 1 node added, 1 node removed"));
  kiln_graph_diff_destroy(d);
  d = NULL;
  KT_EQ_INT(kiln_graph_diff_create(a, a, &d), KILN_OK);
  KT_EQ_INT(kiln_graph_diff_count(d), 0);
  KT_CHECK(!strcmp(kiln_graph_diff_text(d), ""));
  KT_CHECK(!strcmp(kiln_graph_diff_summary(d), "no differences"));
  kiln_graph_diff_destroy(d);

  /* errors: a status, the sticky status with the file and the caller's line, *out NULL */
  kiln_graph_file *x = (kiln_graph_file *)1;
  KT_EQ_INT(kiln_graph_file_create(bad, &x), KILN_ERR_CORRUPT);
  KT_CHECK(x == NULL);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_CORRUPT);
  KT_STR_CONTAINS(kiln_last_error(), "bad.txt:3:");
  KT_STR_CONTAINS(kiln_last_error(), "test_tool_queries.c:");
  kiln_clear_error();
  KT_EQ_INT(kiln_graph_file_create("/nonexistent/kiln/graph.txt", &x), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "/nonexistent/kiln/graph.txt");
  kiln_clear_error();
  KT_EQ_INT(kiln_graph_file_create(NULL, &x), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_graph_file_create(pa, NULL), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
  KT_EQ_INT(kiln_graph_diff_create(a, NULL, &d), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(d == NULL);
  kiln_clear_error();
  /* NULL objects: documented failure values */
  KT_EQ_INT(kiln_graph_file_nodes(NULL), -1);
  KT_CHECK(kiln_graph_file_key(NULL) == 0);
  KT_CHECK(!kiln_graph_file_equal(a, NULL));
  KT_CHECK(kiln_graph_diff_text(NULL) == NULL && kiln_graph_diff_summary(NULL) == NULL);
  KT_EQ_INT(kiln_graph_diff_count(NULL), -1);
  kiln_graph_diff_destroy(NULL);
  kiln_graph_file_destroy(NULL);

  kiln_graph_file_destroy(a);
  kiln_graph_file_destroy(b);
  kiln_graph_file_destroy(c);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  KT_CHECK(system(cmd) == 0);
}

KT_TEST(compiler_probe) {
  kiln_clear_error();
  kiln_compiler_info cc;
  KT_EQ_INT(kiln_compiler_probe(&cc), KILN_OK);
  KT_CHECK(cc.found && cc.compiled && cc.ran);
  KT_CHECK(cc.command[0] != 0 && cc.version[0] != 0);
  KT_CHECK(cc.compile_ms >= 0);
  KT_CHECK(kiln_cpu_features() != NULL && kiln_cpu_features()[0] != 0);
  KT_EQ_INT(kiln_compiler_probe(NULL), KILN_ERR_INVALID_ARGUMENT);
  KT_STR_CONTAINS(kiln_last_error(), "kiln_compiler_probe");
  kiln_clear_error();
}

KT_TEST(compiler_probe_bad_compiler) {
  /* The environment is read once per process (the config), so the bad
   * compiler is tried in a child of its own. */
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  KT_CHECK(n > 0);
  if (n <= 0) return;
  self[n] = 0;
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "KILN_CC=/nonexistent/kiln-cc KT_CHILD=bad_cc '%s' child_bad_compiler 2>&1", self);
  FILE *p = popen(cmd, "r");
  KT_CHECK(p != NULL);
  if (!p) return;
  char out[8192];
  size_t got = fread(out, 1, sizeof out - 1, p);
  out[got] = 0;
  KT_EQ_INT(pclose(p), 0);
  KT_STR_CONTAINS(out, "1 passed, 0 failed");
}

KT_TEST(child_bad_compiler) {
  const char *child = getenv("KT_CHILD");
  if (!child || strcmp(child, "bad_cc")) return; /* only in the child of compiler_probe_bad_compiler */
  kiln_clear_error();
  kiln_compiler_info cc;
  kiln_status s = kiln_compiler_probe(&cc);
  KT_CHECK(s != KILN_OK);
  KT_CHECK(!cc.found && !cc.compiled && !cc.ran);
  KT_EQ_INT(kiln_last_status(), s);
  KT_STR_CONTAINS(kiln_last_error(), "/nonexistent/kiln-cc");
  kiln_clear_error();
}

KT_TEST(gemm_probe_and_benchmark) {
  kiln_clear_error();
  kiln_gemm_info g;
  KT_EQ_INT(kiln_gemm_probe(1, &g), KILN_OK);
  KT_CHECK(g.library != NULL && g.library[0] != 0);
  double gf = -1;
  KT_EQ_INT(kiln_gemm_benchmark(1, 64, 0.0, &gf), KILN_OK);
  KT_CHECK(gf > 0);
  KT_EQ_INT(kiln_gemm_benchmark(1, 0, 0.0, &gf), KILN_ERR_INVALID_ARGUMENT);
  KT_CHECK(gf == 0);
  KT_STR_CONTAINS(kiln_last_error(), "kiln_gemm_benchmark");
  kiln_clear_error();
  KT_EQ_INT(kiln_gemm_benchmark(0, 64, 0.0, &gf), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_gemm_benchmark(1, 64, -1.0, &gf), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_gemm_benchmark(1, 64, 0.0, NULL), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_gemm_probe(1, NULL), KILN_ERR_INVALID_ARGUMENT);
  KT_EQ_INT(kiln_gemm_probe(0, &g), KILN_ERR_INVALID_ARGUMENT);
  kiln_clear_error();
}

KT_TEST(profiler_client_addr_valid) {
  kiln_clear_error();
  KT_CHECK(kiln_profiler_client_addr_valid("localhost:6009"));
  KT_CHECK(kiln_profiler_client_addr_valid("[::1]:6009"));
  KT_CHECK(kiln_profiler_client_addr_valid("10.0.0.1:65535"));
  KT_CHECK(!kiln_profiler_client_addr_valid("localhost:0"));
  KT_CHECK(!kiln_profiler_client_addr_valid("localhost:65536"));
  KT_CHECK(!kiln_profiler_client_addr_valid("localhost"));
  KT_CHECK(!kiln_profiler_client_addr_valid(":6009"));
  KT_CHECK(!kiln_profiler_client_addr_valid("a:b:6009"));
  KT_CHECK(!kiln_profiler_client_addr_valid(""));
  KT_CHECK(!kiln_profiler_client_addr_valid(NULL));
  KT_EQ_INT(kiln_last_status(), KILN_OK); /* an answer, not an error */
}

KT_MAIN(KT_CASE(graph_file_read_and_diff), KT_CASE(compiler_probe), KT_CASE(compiler_probe_bad_compiler),
        KT_CASE(child_bad_compiler), KT_CASE(gemm_probe_and_benchmark), KT_CASE(profiler_client_addr_valid))
