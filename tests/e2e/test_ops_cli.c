/* End-to-end: `kiln ops` prints the op table of include/kiln/ops.def, one
 * line per op, as text and as a markdown table. The oracle is the table
 * itself, read here with a KILN_OP macro of the test's own: every op's
 * name starts a line, every public function is named, and a bad argument
 * is a usage error (exit 2). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kt.h"

typedef struct op_row {
  const char *name, *fn;
  int pub; /* 0 none, 1 unary, 2 binary */
  int differentiable;
} op_row;

#define KILN_PUB_NONE NULL, 0
#define KILN_PUB_UNARY(fn) #fn, 1
#define KILN_PUB_BINARY(fn) #fn, 2
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, IN, OUT, FLAGS, COST, F32, F64, INT, VJP, DOC) \
  {STR, PUB, VJP != NULL},
static const op_row k_ops[] = {
#include "kiln/ops.def"
};
#undef KILN_OP
enum { N_OPS = sizeof k_ops / sizeof k_ops[0] };

static char g_bin[4096]; /* <build>/bin */

static void find_bin(void) {
  if (g_bin[0]) return;
  ssize_t n = readlink("/proc/self/exe", g_bin, sizeof g_bin - 1);
  g_bin[n > 0 ? n : 0] = 0;
  for (int i = 0; i < 2; i++) { /* <build>/bin/tests/test_ops_cli -> <build>/bin */
    char *s = strrchr(g_bin, '/');
    if (s) *s = 0;
  }
}

/* Run a shell command; its stdout (stderr too with merge) into out (cap
 * bytes); returns the exit status (-1 if it did not exit). */
static int run_cmd(const char *cmd, int merge, char *out, size_t cap) {
  char full[8300];
  snprintf(full, sizeof full, "%s%s", cmd, merge ? " 2>&1" : " 2>/dev/null");
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The line of out that starts with prefix, copied into line (cap bytes); 0 when none. */
static int line_starting(const char *out, const char *prefix, char *line, size_t cap) {
  size_t n = strlen(prefix);
  for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (!strncmp(p, prefix, n)) {
      size_t len = strcspn(p, "\n");
      snprintf(line, cap, "%.*s", (int)len, p);
      return 1;
    }
  }
  return 0;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

KT_TEST(text_table_lists_every_op) {
  find_bin();
  char cmd[4200], line[1024];
  static char out[1 << 18];
  snprintf(cmd, sizeof cmd, "'%s/kiln' ops", g_bin);
  KT_EQ_INT(run_cmd(cmd, 0, out, sizeof out), 0);
  KT_EQ_INT(count_lines(out), N_OPS + 1); /* a header, then one line per op */
  KT_CHECK(line_starting(out, "op ", line, sizeof line));
  KT_STR_CONTAINS(line, "differentiable");
  for (int i = 0; i < N_OPS; i++) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s ", k_ops[i].name);
    if (!line_starting(out, prefix, line, sizeof line)) {
      KT_FAIL("no line for op %s", k_ops[i].name);
      continue;
    }
    char want[256];
    if (k_ops[i].pub) {
      snprintf(want, sizeof want, " kiln_%s", k_ops[i].fn);
      KT_STR_CONTAINS(line, want);
    }
    if (k_ops[i].pub == 2) {
      snprintf(want, sizeof want, "kiln_%s kiln_%s_s kiln_%s_c", k_ops[i].fn, k_ops[i].fn, k_ops[i].fn);
      KT_STR_CONTAINS(line, want);
    }
    KT_STR_CONTAINS(line, k_ops[i].differentiable ? " yes " : " no ");
  }
}

KT_TEST(markdown_table_lists_every_op) {
  find_bin();
  char cmd[4200], line[1024];
  static char out[1 << 18];
  snprintf(cmd, sizeof cmd, "'%s/kiln' ops --markdown", g_bin);
  KT_EQ_INT(run_cmd(cmd, 0, out, sizeof out), 0);
  KT_EQ_INT(count_lines(out), N_OPS + 2); /* header, rule, one row per op */
  KT_CHECK(line_starting(out, "| op | kind | arity |", line, sizeof line));
  KT_CHECK(line_starting(out, "|---|", line, sizeof line));
  for (int i = 0; i < N_OPS; i++) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "| `%s` |", k_ops[i].name);
    if (!line_starting(out, prefix, line, sizeof line)) {
      KT_FAIL("no row for op %s", k_ops[i].name);
      continue;
    }
    if (k_ops[i].pub) {
      char want[256];
      snprintf(want, sizeof want, "`kiln_%s`", k_ops[i].fn);
      KT_STR_CONTAINS(line, want);
    }
  }
  /* abs's doc is "|x|": escaped, so that the row keeps its cells */
  KT_CHECK(line_starting(out, "| `abs` |", line, sizeof line));
  KT_STR_CONTAINS(line, "\\|x\\|");
}

KT_TEST(bad_argument_is_a_usage_error) {
  find_bin();
  char cmd[4200];
  static char out[1 << 16];
  snprintf(cmd, sizeof cmd, "'%s/kiln' ops --bogus", g_bin);
  KT_EQ_INT(run_cmd(cmd, 1, out, sizeof out), 2);
  KT_STR_CONTAINS(out, "unknown argument '--bogus'");
  KT_STR_CONTAINS(out, "usage: kiln ops");
  snprintf(cmd, sizeof cmd, "'%s/kiln' ops --help", g_bin);
  KT_EQ_INT(run_cmd(cmd, 1, out, sizeof out), 0);
  KT_STR_CONTAINS(out, "usage: kiln ops [--markdown]");
  snprintf(cmd, sizeof cmd, "'%s/kiln' help", g_bin);
  KT_EQ_INT(run_cmd(cmd, 1, out, sizeof out), 0);
  KT_STR_CONTAINS(out, "ops [--markdown]");
}

KT_MAIN(KT_CASE(text_table_lists_every_op), KT_CASE(markdown_table_lists_every_op),
        KT_CASE(bad_argument_is_a_usage_error))
