/* The scenario programs S1–S4 (examples/s*.c, docs/debugging.md) end to
 * end: each variant runs as a child process with KILN_DEBUG=1 writing to a
 * temporary KILN_DEBUG_FILE; the test checks the numbers of the program's
 * machine-readable line (all taken from kiln's counters) and that kiln's
 * analysis names the right cause at the right file:line. The expected line
 * numbers are learnt by searching each example's source for its marker
 * comment ("S1: the value read", ...), so no line number is hard-coded.
 * Nothing here measures speed: step times are in docs/debugging.md. */
#include <kiln/kiln.h>

#include <stdarg.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kt.h"

#define OUT_CAP (1 << 20)

/* ───────────── locating the programs and their sources ───────────── */

static char g_bin_dir[4200]; /* <build>/bin/examples */
static char g_src_dir[4200]; /* <source>/examples */

static void find_dirs(void) {
  if (g_bin_dir[0]) return;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = 0;
  char *slash = strrchr(self, '/'); /* <build>/bin/tests/test_scenarios */
  if (slash) *slash = 0;
  slash = strrchr(self, '/');
  if (slash) *slash = 0;
  snprintf(g_bin_dir, sizeof g_bin_dir, "%s/examples", self);
  /* CMake compiles with absolute paths: __FILE__ is <source>/tests/e2e/... */
  const char *env = getenv("KILN_SOURCE_DIR");
  if (env && *env) {
    snprintf(g_src_dir, sizeof g_src_dir, "%s/examples", env);
  } else {
    snprintf(g_src_dir, sizeof g_src_dir, "%s", __FILE__);
    char *p = strstr(g_src_dir, "tests/e2e/test_scenarios.c");
    if (p) strcpy(p, "examples");
  }
}

/* Line number (1-based) of the first line of examples/<file> containing
 * marker, or -1. */
static int marker_line(const char *file, const char *marker) {
  find_dirs();
  char path[8192], line[4096];
  snprintf(path, sizeof path, "%s/%s", g_src_dir, file);
  FILE *f = fopen(path, "r");
  if (!f) {
    KT_FAIL("cannot open %s to find the marker \"%s\"", path, marker);
    return -1;
  }
  int n = 0, found = -1;
  while (fgets(line, sizeof line, f)) {
    n++;
    if (strstr(line, marker)) {
      found = n;
      break;
    }
  }
  fclose(f);
  if (found < 0) KT_FAIL("marker \"%s\" not found in %s", marker, path);
  return found;
}

/* ───────────── running a program ───────────── */

/* The last occurrence of needle in text, or NULL. */
static const char *last_strstr(const char *text, const char *needle) {
  const char *last = NULL;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) last = p;
  return last;
}

/* The last `n` characters of text (to keep failure messages short). */
static const char *tail(const char *text, size_t n) {
  size_t len = strlen(text);
  return len > n ? text + len - n : text;
}


typedef struct run {
  int status;  /* exit status, -1 if it did not exit normally */
  char *out;   /* stdout + stderr */
  char *debug; /* the KILN_DEBUG_FILE contents */
  /* the machine-readable line */
  int parsed, steps;
  char scenario[16], variant[16];
  double step_ms, executions_per_step, transfers_per_step;
  long long compiles;
} run;

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return strdup("");
  char *buf = malloc(OUT_CAP);
  size_t n = buf ? fread(buf, 1, OUT_CAP - 1, f) : 0;
  fclose(f);
  if (!buf) return strdup("");
  buf[n] = 0;
  return buf;
}

/* Run bin/examples/<prog> with NULL-terminated extra arguments. */
static run run_prog(const char *prog, ...) {
  find_dirs();
  run r;
  memset(&r, 0, sizeof r);
  r.status = -1;
  char path[8192], dbg[] = "/tmp/kiln-scenario-debug-XXXXXX";
  snprintf(path, sizeof path, "%s/%s", g_bin_dir, prog);
  const char *argv[16] = {path};
  int argc = 1;
  va_list ap;
  va_start(ap, prog);
  const char *arg;
  while (argc < 15 && (arg = va_arg(ap, const char *))) argv[argc++] = arg;
  va_end(ap);
  argv[argc] = NULL;
  if (access(path, X_OK) != 0) {
    KT_FAIL("%s is missing: build the example_%s target (cmake --build <build> --target example_%s)", path, prog,
            prog);
    r.out = strdup("");
    r.debug = strdup("");
    return r;
  }
  int dfd = mkstemp(dbg);
  if (dfd >= 0) close(dfd);
  int fd[2];
  if (dfd < 0 || pipe(fd)) {
    KT_FAIL("cannot set up a child process for %s", prog);
    r.out = strdup("");
    r.debug = strdup("");
    return r;
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    dup2(fd[1], 2);
    close(fd[0]);
    close(fd[1]);
    setenv("KILN_DEBUG", "1", 1);
    setenv("KILN_DEBUG_FILE", dbg, 1);
    unsetenv("KILN_METRICS");
    unsetenv("KILN_SAVE_GRAPHS");
    unsetenv("KILN_DEBUG_WARMUP"); /* the warnings start after the default 5 steps */
    execv(path, (char *const *)argv);
    fprintf(stderr, "cannot run %s\n", path);
    _exit(127);
  }
  close(fd[1]);
  r.out = malloc(OUT_CAP);
  size_t n = 0;
  ssize_t got;
  while (r.out && n + 1 < OUT_CAP && (got = read(fd[0], r.out + n, OUT_CAP - 1 - n)) > 0) n += (size_t)got;
  if (r.out) r.out[n] = 0;
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.debug = slurp(dbg);
  unlink(dbg);
  if (!r.out) r.out = strdup("");
  const char *line = strstr(r.out, "scenario: ");
  if (line && sscanf(line,
                     "scenario: %15s variant: %15s steps: %d step_ms: %lf compiles: %lld executions_per_step: %lf "
                     "transfers_per_step: %lf",
                     r.scenario, r.variant, &r.steps, &r.step_ms, &r.compiles, &r.executions_per_step,
                     &r.transfers_per_step) == 7)
    r.parsed = 1;
  if (r.status != 0 || !r.parsed)
    KT_FAIL("%s exited with %d (machine line %s); its output:\n%s", prog, r.status, r.parsed ? "parsed" : "missing",
            tail(r.out, 4000));
  return r;
}

static void run_free(run *r) {
  free(r->out);
  free(r->debug);
}

/* 1 if text contains needle within `window` characters after the first
 * occurrence of anchor. */
static int near_after(const char *text, const char *anchor, const char *needle, size_t window) {
  const char *a = strstr(text, anchor);
  if (!a) return 0;
  const char *n = strstr(a, needle);
  return n && (size_t)(n - a) <= window;
}

/* KT_STR_CONTAINS for long texts: on failure, show only their end. */
#define CHECK_CONTAINS(hay, needle) \
  KT_CHECK_MSG(strstr((hay), (needle)), "\"%s\" not found in %s, which ends with:\n%s", (needle), #hay, tail((hay), 2000))

/* ───────────── S1: a value read in the model ───────────── */

KT_TEST(s1_value_read_is_named_and_fixed) {
  int line = marker_line("s1_value_read.c", "S1: the value read");
  char site[64];
  snprintf(site, sizeof site, "s1_value_read.c:%d", line);

  run slow = run_prog("s1_value_read", "--steps", "20", (char *)NULL);
  KT_CHECK(slow.parsed && !strcmp(slow.variant, "slow") && slow.steps == 20);
  KT_CHECK_MSG(slow.executions_per_step > 1, "slow: executions per step %.2f, expected > 1", slow.executions_per_step);
  KT_CHECK_MSG(slow.transfers_per_step >= 1, "slow: transfers per step %.2f, expected >= 1", slow.transfers_per_step);
  CHECK_CONTAINS(slow.debug, "TransferFromDeviceTime too frequent");
  /* the warning lists the line of the read */
  KT_CHECK_MSG(near_after(slow.debug, "TransferFromDeviceTime too frequent", site, 600),
               "the transfer warning does not name %s:\n%s", site, tail(slow.debug, 3000));
  /* the compile record names the cause */
  char cause[96];
  snprintf(cause, sizeof cause, "value read at %s", site);
  CHECK_CONTAINS(slow.debug, cause);

  run fixed = run_prog("s1_value_read", "--fixed", "--steps", "20", (char *)NULL);
  KT_CHECK(fixed.parsed && !strcmp(fixed.variant, "fixed"));
  KT_NEAR(fixed.executions_per_step, 1.0, 0);
  KT_NEAR(fixed.transfers_per_step, 0.0, 0);
  KT_CHECK_MSG(!strstr(fixed.debug, "TransferFromDeviceTime too frequent"), "fixed run still warns:\n%s",
               tail(fixed.debug, 3000));
  KT_CHECK(!strstr(fixed.debug, site));
  KT_CHECK(fixed.compiles < slow.compiles);
  run_free(&slow);
  run_free(&fixed);
}

/* ───────────── S2: a graph that grows every step ───────────── */

KT_TEST(s2_growing_graph_is_named_and_fixed) {
  int line = marker_line("s2_growing_eval.c", "S2: the concat");
  char site[64], pat[96];
  snprintf(site, sizeof site, "s2_growing_eval.c:%d", line);

  run s8 = run_prog("s2_growing_eval", "--steps", "8", (char *)NULL);
  run s16 = run_prog("s2_growing_eval", "--steps", "16", (char *)NULL);
  /* every evaluation step compiles: 8 more steps, 8 more graphs */
  KT_EQ_INT(s16.compiles - s8.compiles, 8);
  CHECK_CONTAINS(s16.debug, "CompileTime too frequent");
  /* the diff names the concat's line and its two shapes, 8 rows apart */
  snprintf(pat, sizeof pat, "concat at %s: shape [", site);
  const char *d = strstr(s16.debug, pat);
  KT_CHECK_MSG(d != NULL, "no \"%s\" in the debug output:\n%s", pat, tail(s16.debug, 3000));
  if (d) {
    long long r0 = 0, c0 = 0, r1 = 0, c1 = 0;
    int got = sscanf(d + strlen(pat), "%lld,%lld] -> [%lld,%lld]", &r0, &c0, &r1, &c1);
    KT_EQ_INT(got, 4);
    /* against the closest earlier graph: some whole number of batches */
    KT_CHECK_MSG(r1 > r0 && (r1 - r0) % 8 == 0, "concat rows %lld -> %lld", r0, r1);
    KT_EQ_INT(c0, 10);
    KT_EQ_INT(c1, 10);
  }
  /* classified as a growing tensor, at the concat's line, growing by one batch */
  char grow[96];
  snprintf(grow, sizeof grow, "growing tensor: concat at %s", site);
  CHECK_CONTAINS(s16.debug, grow);
  CHECK_CONTAINS(s16.debug, "grows by 8 every step");

  run f8 = run_prog("s2_growing_eval", "--fixed", "--steps", "8", (char *)NULL);
  run f16 = run_prog("s2_growing_eval", "--fixed", "--steps", "16", (char *)NULL);
  /* compiles flat, transfers up: the seed's trade */
  KT_EQ_INT(f16.compiles, f8.compiles);
  KT_CHECK(f16.compiles < s16.compiles);
  KT_CHECK_MSG(f16.transfers_per_step > s16.transfers_per_step, "fixed %.2f vs slow %.2f transfers per step",
               f16.transfers_per_step, s16.transfers_per_step);
  KT_NEAR(f16.transfers_per_step, 1.0, 0);
  KT_NEAR(f16.executions_per_step, 1.0, 0);
  KT_CHECK(!strstr(f16.debug, "CompileTime too frequent"));
  KT_CHECK(!strstr(f16.debug, pat));
  /* both variants predict the same */
  const char *a1 = strstr(s16.out, "evaluation accuracy"), *a2 = strstr(f16.out, "evaluation accuracy");
  KT_CHECK(a1 && a2);
  if (a1 && a2) KT_CHECK(strncmp(a1, a2, strcspn(a1, "\n")) == 0);
  run_free(&s8);
  run_free(&s16);
  run_free(&f8);
  run_free(&f16);
}

/* ───────────── S3: executions per step ───────────── */

KT_TEST(s3_one_execution_per_step) {
  run slow = run_prog("s3_executions", "--steps", "20", (char *)NULL);
  run fixed = run_prog("s3_executions", "--fixed", "--steps", "20", (char *)NULL);
  /* 8 layers: one execution per layer vs one per step, same transfers */
  KT_NEAR(slow.executions_per_step, 8.0, 0);
  KT_NEAR(fixed.executions_per_step, 1.0, 0);
  KT_NEAR(slow.transfers_per_step, 8.0, 0);
  KT_NEAR(fixed.transfers_per_step, 8.0, 0);
  /* the same numbers come out */
  const char *c1 = strstr(slow.out, "monitor checksum"), *c2 = strstr(fixed.out, "monitor checksum");
  KT_CHECK(c1 && c2);
  if (c1 && c2) KT_CHECK(strncmp(c1, c2, strcspn(c1, "\n")) == 0);
  /* kiln_explain (printed by the program) states the fixed cost of one
   * execution and the executions per step */
  CHECK_CONTAINS(fixed.out, "fixed host cost per execution: ");
  CHECK_CONTAINS(slow.out, "fixed host cost per execution: ");
  CHECK_CONTAINS(slow.out, "executions per step: median 8");
  CHECK_CONTAINS(fixed.out, "executions per step: median 1");
  int line = marker_line("s3_executions.c", "S3: the per-layer read");
  char site[64];
  snprintf(site, sizeof site, "s3_executions.c:%d", line);
  CHECK_CONTAINS(slow.out, site); /* explain's cut table names the read */
  KT_CHECK(!strstr(fixed.out, site));
  run_free(&slow);
  run_free(&fixed);
}

/* ───────────── S4: variable-length inputs ───────────── */

/* Distinct values of the "batch lengths:" line; writes them to vals. */
static int batch_lengths(const char *out, long long *vals, int cap) {
  const char *p = strstr(out, "batch lengths:");
  if (!p) return -1;
  p += strlen("batch lengths:");
  int n = 0;
  while (*p && *p != '\n') {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p) break;
    p = end;
    int seen = 0;
    for (int i = 0; i < n; i++) seen |= vals[i] == v;
    if (!seen && n < cap) vals[n++] = v;
  }
  return n;
}

static long long number_after(const char *text, const char *label) {
  const char *p = strstr(text, label);
  return p ? strtoll(p + strlen(label), NULL, 10) : -1;
}

KT_TEST(s4_variable_length_is_named_and_fixed) {
  int line = marker_line("s4_variable_length.c", "S4: the input batch");
  char site[64];
  snprintf(site, sizeof site, "s4_variable_length.c:%d", line);

  run slow = run_prog("s4_variable_length", (char *)NULL);
  long long lens[64];
  int distinct = batch_lengths(slow.out, lens, 64);
  KT_CHECK_MSG(distinct > 3, "slow run: %d distinct lengths", distinct);
  /* one training graph per distinct length */
  KT_EQ_INT(number_after(slow.out, "training: "), distinct);
  /* kiln says the input's dimension varies, at the batch's line, with the values */
  CHECK_CONTAINS(slow.debug, "CompileTime too frequent");
  KT_CHECK_MSG(near_after(slow.debug, "varying input: dim 1 of input", site, 80),
               "no varying-input classification naming %s:\n%s", site, tail(slow.debug, 3000));
  CHECK_CONTAINS(slow.debug, site);
  /* the values seen, after the classification */
  char sizes[64];
  snprintf(sizes, sizeof sizes, "takes %d sizes", distinct);
  CHECK_CONTAINS(slow.debug, sizes);
  for (int i = 0; i < distinct; i++) {
    char v[32];
    snprintf(v, sizeof v, "%lld", lens[i]);
    KT_CHECK_MSG(near_after(slow.debug, sizes, v, 400), "length %s not listed after \"%s\"", v, sizes);
  }
  /* bucket advice for the training step's site, from the summary at exit
   * (it has seen every length) */
  char step_site[80];
  snprintf(step_site, sizeof step_site, "s4_variable_length.c:%d: ",
           marker_line("s4_variable_length.c", "S4: the training step"));
  const char *summary = last_strstr(slow.debug, "call sites that compiled more than one graph");
  const char *adv = summary ? strstr(summary, step_site) : NULL;
  adv = adv ? strstr(adv, "suggested buckets: ") : NULL;
  KT_CHECK_MSG(adv != NULL, "no bucket advice:\n%s", tail(slow.debug, 3000));
  char advice[128] = "";
  if (adv) snprintf(advice, sizeof advice, "%.*s", (int)strcspn(adv + 19, "(\n"), adv + 19);
  if (strlen(advice) && advice[strlen(advice) - 1] == ' ') advice[strlen(advice) - 1] = 0;

  run fixed = run_prog("s4_variable_length", "--fixed", (char *)NULL);
  /* the fixed program buckets with exactly the boundaries kiln suggested */
  const char *bl = strstr(fixed.out, "buckets:");
  char used[128] = "";
  int n_buckets = 0;
  for (const char *p = bl ? bl + 8 : NULL; p && *p && *p != '\n' && *p != ';'; p++) {
    if (*p == ' ' && p[1] >= '0' && p[1] <= '9') {
      long long v = strtoll(p + 1, NULL, 10);
      size_t n = strlen(used);
      snprintf(used + n, sizeof used - n, "%s%lld", n_buckets ? ", " : "", v);
      n_buckets++;
    }
    if (*p == '(') p = strchr(p, ')');
    if (!p) break;
  }
  KT_CHECK_MSG(adv && !strncmp(advice, used, strlen(used)) && strlen(advice) == strlen(used),
               "kiln suggests buckets \"%s\" but examples/s4_variable_length.c uses \"%s\" (update k_buckets)",
               advice, used);
  /* every bucket's training and evaluation graph compiled in the warm-up,
   * nothing during training or evaluation */
  KT_CHECK(n_buckets >= 2);
  KT_EQ_INT(number_after(fixed.out, "warm-up: "), 2 * n_buckets);
  KT_EQ_INT(number_after(fixed.out, "training: "), 0);
  KT_EQ_INT(number_after(fixed.out, "evaluation: "), 0);
  KT_NEAR(fixed.executions_per_step, 1.0, 0);
  KT_CHECK(fixed.compiles < slow.compiles);
  /* the full-graph region saw no cut */
  KT_CHECK(!strstr(fixed.out, "graph cut inside a full-graph region"));
  KT_CHECK(!strstr(fixed.debug, "graph cut inside a full-graph region"));
  KT_CHECK_MSG(!strstr(fixed.debug, "CompileTime too frequent"), "fixed run warns:\n%s", tail(fixed.debug, 3000));
  /* explain's graph table tells training and evaluation graphs apart */
  CHECK_CONTAINS(fixed.out, " train ");
  CHECK_CONTAINS(fixed.out, " eval ");
  CHECK_CONTAINS(fixed.debug, "tag \"train\"");
  CHECK_CONTAINS(fixed.debug, "tag \"eval\"");

  /* dynamic shapes: the slow program's data grouped by length, each batch at
   * its own length, no buckets and no warm-up: the training step compiles
   * twice (the first length, then once for any length) and every further
   * length is planned; it computes fewer padded tokens than the buckets.
   * (The step times are measured by the bench, not asserted here.) */
  run dyn = run_prog("s4_variable_length", "--dynamic", (char *)NULL);
  long long dlens[64];
  int ddistinct = batch_lengths(dyn.out, dlens, 64);
  KT_CHECK_MSG(ddistinct > 3, "dynamic run: %d distinct lengths", ddistinct);
  KT_EQ_INT(number_after(dyn.out, "training: "), 2);
  KT_EQ_INT(number_after(dyn.out, "sizes planned from a dynamic family: "), ddistinct - 2);
  KT_CHECK(number_after(dyn.out, "evaluation: ") <= 2);
  long long pad_dyn = number_after(dyn.out, "padded tokens: "), pad_fixed = number_after(fixed.out, "padded tokens: ");
  KT_CHECK_MSG(pad_dyn > 0 && pad_dyn < pad_fixed && pad_dyn < number_after(slow.out, "padded tokens: "),
               "padded tokens: dynamic %lld, fixed %lld", pad_dyn, pad_fixed);
  /* KILN_DEBUG names the varying input at its line and says what happened */
  KT_CHECK_MSG(near_after(dyn.debug, "dynamic: dim 1 of input", site, 120),
               "no dynamic line naming %s:\n%s", site, tail(dyn.debug, 3000));
  CHECK_CONTAINS(dyn.debug, "compiled once for any size");
  CHECK_CONTAINS(dyn.debug, "planned from its dynamic family");
  KT_CHECK_MSG(!strstr(dyn.debug, "CompileTime too frequent"), "dynamic run warns:\n%s", tail(dyn.debug, 3000));
  run_free(&slow);
  run_free(&fixed);
  run_free(&dyn);
}

KT_MAIN(KT_CASE(s1_value_read_is_named_and_fixed), KT_CASE(s2_growing_graph_is_named_and_fixed),
        KT_CASE(s3_one_execution_per_step), KT_CASE(s4_variable_length_is_named_and_fixed))
