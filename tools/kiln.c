/* kiln — the command-line program.
 *
 *   kiln --version          library version and backends
 *   kiln doctor [--quick]   what kiln sees on this machine: CPU, threads,
 *                           GEMM library and its speed, kernel compiler,
 *                           cache directory
 *   kiln ops [--markdown]   the op table (include/kiln/ops.def)
 *   kiln help               usage
 *
 * Subcommands live in one table (kiln_cli_commands) so that later ones
 * (train, profile, graph diff) are one row and one function each. A bad
 * command line prints usage and exits 2; a subcommand that finds a problem
 * exits 1; nothing here aborts. Standard output that cannot be written (a
 * full disk, /dev/full, a closed pipe while SIGPIPE is ignored) is such a
 * problem whatever the command: main reports it and exits 1 (`graph diff`:
 * 2, its "cannot do it" status), never 0. SIGPIPE keeps its default action.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/doctor.h"
#include "kiln/kiln.h"
#include "tools/cli.h"
#include "tools/graph.h"
#include "tools/embed.h"
#include "tools/ops.h"
#include "tools/profile.h"
#include "tools/train.h"

/* Exit codes. */
enum { KILN_CLI_OK = 0, KILN_CLI_PROBLEM = 1, KILN_CLI_USAGE = 2 };

typedef struct kiln_cli_command {
  const char *name;    /* first word on the command line */
  const char *args;    /* argument synopsis for usage */
  const char *summary; /* one line */
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
  int trouble;                       /* the exit status when its output cannot be written */
} kiln_cli_command;

static int kiln_cli_version(int argc, char **argv);
static int kiln_cli_doctor(int argc, char **argv);
static int kiln_cli_help(int argc, char **argv);

static const kiln_cli_command kiln_cli_commands[] = {
    {"version", "", "print the library version and the backends", kiln_cli_version, 1},
    {"doctor", "[--quick]", "check this machine: CPU, threads, GEMM, compiler, cache", kiln_cli_doctor, 1},
    {"train", "[--model mlp|cnn|transformer] [...]", "train a classifier on Fashion-MNIST (--help for options)",
     kiln_cli_train, 1},
    {"embed", "--model DIR [--batch N] [--ids]", "sentence embeddings of stdin's lines with a BERT model folder",
     kiln_cli_embed, 1},
    {"graph", "diff A B", "compare two graphs dumped with KILN_SAVE_GRAPHS", kiln_cli_graph, 2},
    {"ops", "[--markdown]", "list kiln's ops: kind, arity, public functions, dtypes, gradient, doc", kiln_cli_ops, 1},
    {"profile", "capture|summary [...]", "capture a profile from a running program, or summarize one",
     kiln_cli_profile, 1},
    {"help", "", "print this message", kiln_cli_help, 1},
};
enum { KILN_CLI_N_COMMANDS = sizeof kiln_cli_commands / sizeof kiln_cli_commands[0] };

/* The backends compiled into this library, in order of preference. */
static const char *const kiln_cli_backends[] = {"cpu", "ref"};

/* Where docs/environment.md is: installed beside this program
 * (<bin>/KILN_DOCS_FROM_BIN, wherever the install now lies), else, for a
 * program run from its build tree, in the source tree. */
static void kiln_cli_env_doc(char *out, size_t cap) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  const char *rel = KILN_DOCS_FROM_BIN;
  if (rel[0] == '/') {
    snprintf(out, cap, "%s/environment.md", rel);
  } else if (len > 0) {
    self[len] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    snprintf(out, cap, "%s/%s/environment.md", self, rel);
  } else {
    out[0] = 0;
  }
  char *real = out[0] && access(out, R_OK) == 0 ? realpath(out, NULL) : NULL;
  if (real) {
    snprintf(out, cap, "%s", real); /* without the bin/.. */
    free(real);
  } else {
    snprintf(out, cap, "%s/environment.md", KILN_DOCS_SOURCE);
  }
}

static void kiln_cli_usage(FILE *f) {
  fprintf(f, "usage: kiln <command> [args]\n       kiln --version\n\ncommands:\n");
  for (int i = 0; i < KILN_CLI_N_COMMANDS; i++) {
    char head[64];
    snprintf(head, sizeof head, "%s %s", kiln_cli_commands[i].name, kiln_cli_commands[i].args);
    fprintf(f, "  %-24s %s\n", head, kiln_cli_commands[i].summary);
  }
  char doc[4200];
  kiln_cli_env_doc(doc, sizeof doc);
  fprintf(f, "\nenvironment: KILN_BACKEND, KILN_NUM_THREADS, KILN_CACHE_DIR, KILN_CC, KILN_CFLAGS,\n"
             "KILN_CACHE_MAX_SIZE, KILN_METRICS, KILN_METRICS_FILE, KILN_GEMM, KILN_DISK_CACHE, KILN_DEBUG,\n"
             "KILN_DEBUG_FILE, KILN_SAVE_GRAPHS, KILN_SAVE_GRAPHS_FMT (see %s)\n",
          doc);
}

static int kiln_cli_usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "kiln: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n\n");
  kiln_cli_usage(stderr);
  return KILN_CLI_USAGE;
}

static int kiln_cli_help(int argc, char **argv) {
  if (argc > 1) return kiln_cli_usage_error("help takes no arguments (got '%s')", argv[1]);
  kiln_cli_usage(stdout);
  return KILN_CLI_OK;
}

static int kiln_cli_version(int argc, char **argv) {
  if (argc > 1) return kiln_cli_usage_error("version takes no arguments (got '%s')", argv[1]);
  printf("kiln %s (header %s)\nbackends:", kiln_version(), KILN_VERSION_STRING);
  for (size_t i = 0; i < sizeof kiln_cli_backends / sizeof kiln_cli_backends[0]; i++)
    printf(" %s", kiln_cli_backends[i]);
  printf("\n");
  return KILN_CLI_OK;
}

/* ───────────── doctor ───────────── */

/* "model name" from /proc/cpuinfo; "unknown" elsewhere. */
static void kiln_cli_cpu_model(char *out, size_t cap) {
  snprintf(out, cap, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *v = strchr(line, ':');
    if (!v) continue;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    snprintf(out, cap, "%s", v);
    out[strcspn(out, "\n")] = 0;
    break;
  }
  fclose(f);
}

/* Threads as the runtime chooses them: $KILN_NUM_THREADS (a positive
 * integer) or every online core. *from_env tells which. */
static int kiln_cli_threads(int *from_env) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  *from_env = 0;
  const char *s = getenv("KILN_NUM_THREADS");
  if (s && *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!errno && *end == 0 && v >= 1) {
      *from_env = 1;
      return v > 256 ? 256 : (int)v; /* the runtime's limit */
    }
  }
  return (int)cores;
}

/* The cache directory as the runtime resolves it (src/runtime/runtime.c);
 * "" when there is none (no HOME). */
static void kiln_cli_cache_dir(char *out, size_t cap, const char **source) {
  const char *d = getenv("KILN_CACHE_DIR");
  if (d && *d) {
    snprintf(out, cap, "%s", d);
    *source = "KILN_CACHE_DIR";
    return;
  }
  const char *x = getenv("XDG_CACHE_HOME");
  if (x && *x) {
    snprintf(out, cap, "%s/kiln", x);
    *source = "XDG_CACHE_HOME";
    return;
  }
  const char *h = getenv("HOME");
  if (h && *h)
    snprintf(out, cap, "%s/.cache/kiln", h);
  else
    out[0] = 0;
  *source = "~/.cache/kiln";
}

/* nftw has no user pointer: the walk's totals live here for one walk. */
static struct {
  long files;
  long long bytes;
  long unsafe; /* files writable by group/others */
} kiln_cli_walk;

static int kiln_cli_walk_visit(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  if (type == FTW_F) {
    kiln_cli_walk.files++;
    kiln_cli_walk.bytes += (long long)st->st_size;
    if (st->st_mode & (S_IWGRP | S_IWOTH)) kiln_cli_walk.unsafe++;
  }
  return 0;
}

static void kiln_cli_human_bytes(long long b, char *out, size_t cap) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int i = 0;
  while (v >= 1024 && i < 4) v /= 1024, i++;
  snprintf(out, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* Returns 1 if it found a problem. */
static int kiln_cli_doctor_cache(void) {
  char dir[4096];
  const char *source;
  kiln_cli_cache_dir(dir, sizeof dir, &source);
  const char *dc = getenv("KILN_DISK_CACHE");
  int disabled = dc && strcmp(dc, "0") == 0;
  if (!dir[0]) {
    printf("cache directory   none: neither KILN_CACHE_DIR, XDG_CACHE_HOME nor HOME is set (disk cache off)\n");
    return 0;
  }
  printf("cache directory   %s (%s)%s\n", dir, source, disabled ? "; disk cache disabled by KILN_DISK_CACHE=0" : "");
  struct stat st;
  if (stat(dir, &st) != 0) {
    printf("  exists          no (created with mode 0700 on first compile)\n");
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) {
    printf("  PROBLEM         %s exists but is not a directory\n", dir);
    return 1;
  }
  int problem = 0;
  printf("  permissions     %04o, owner uid %ld%s\n", (unsigned)(st.st_mode & 07777), (long)st.st_uid,
         st.st_uid == getuid() ? " (you)" : "");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    printf("  WARNING         writable by %s: kiln refuses to load code from it (fix: chmod go-w %s)\n",
           (st.st_mode & S_IWOTH) ? "others" : "group", dir);
    problem = 1;
  }
  if (st.st_uid != getuid()) {
    printf("  WARNING         owned by another user: kiln refuses to load code from it\n");
    problem = 1;
  }
  memset(&kiln_cli_walk, 0, sizeof kiln_cli_walk);
  if (nftw(dir, kiln_cli_walk_visit, 16, FTW_PHYS) != 0) {
    printf("  WARNING         cannot read all of it: %s\n", strerror(errno));
    problem = 1;
  }
  char human[32];
  kiln_cli_human_bytes(kiln_cli_walk.bytes, human, sizeof human);
  printf("  entries         %ld files, %s\n", kiln_cli_walk.files, human);
  if (kiln_cli_walk.unsafe) {
    printf("  WARNING         %ld files writable by group/others (they will be refused)\n", kiln_cli_walk.unsafe);
    problem = 1;
  }
  return problem;
}

/* Compile and call a one-line kernel: proves the toolchain works end to end. */
static int kiln_cli_doctor_compiler(void) {
  kiln_compiler_info cc;
  kiln_clear_error();
  kiln_status st = kiln_compiler_probe_at(&cc, KILN_CLI_NO_LOC);
  if (!cc.found) {
    printf("kernel compiler   PROBLEM: %s\n", kiln_cli_error_message());
    return 1;
  }
  printf("kernel compiler   %s\n", cc.command);
  printf("  version         %s\n", cc.version);
  if (!cc.compiled)
    printf("  PROBLEM         test compile failed: %s\n", kiln_cli_error_message());
  else if (!cc.ran)
    printf("  PROBLEM         test kernel compiled but did not load or run correctly\n");
  else
    printf("  test compile    ok, %.0f ms\n", cc.compile_ms);
  return st != KILN_OK;
}

static int kiln_cli_doctor(int argc, char **argv) {
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else
      return kiln_cli_usage_error("doctor: unknown argument '%s'", argv[i]);
  }
  int problems = 0;
  char model[256];
  kiln_cli_cpu_model(model, sizeof model);
  printf("kiln              %s\n", kiln_version());
  printf("cpu               %s\n", model);
  printf("  features        %s\n", kiln_cpu_features());
  int from_env;
  int threads = kiln_cli_threads(&from_env);
  printf("threads           %d (%s; %ld cores online)\n", threads, from_env ? "KILN_NUM_THREADS" : "all cores",
         sysconf(_SC_NPROCESSORS_ONLN));
  const char *backend = getenv("KILN_BACKEND");
  printf("backend           %s%s\n", backend && *backend ? backend : "cpu",
         backend && *backend ? " (KILN_BACKEND)" : " (default)");

  kiln_gemm_info gemm;
  if (kiln_gemm_probe_at(threads, &gemm, KILN_CLI_NO_LOC) != KILN_OK) {
    printf("gemm              PROBLEM: no GEMM library could be loaded\n");
    problems++;
  } else {
    const char *g = getenv("KILN_GEMM");
    printf("gemm              %s%s%s%s\n", gemm.library, g && *g ? " (KILN_GEMM=" : "", g && *g ? g : "",
           g && *g ? ")" : "");
    if (!quick) {
      double gf = 0;
      kiln_clear_error();
      kiln_status st = kiln_gemm_benchmark_at(threads, 1024, 0.5, &gf, KILN_CLI_NO_LOC);
      if (st == KILN_ERR_INTERNAL) {
        printf("  PROBLEM         sgemm 1024^3 returned a wrong result\n");
        problems++;
      } else if (st != KILN_OK) {
        printf("  PROBLEM         sgemm 1024^3: %s\n", kiln_cli_error_message());
        problems++;
      } else {
        printf("  sgemm 1024^3    %.0f GFLOP/s on %d thread%s\n", gf, threads, threads == 1 ? "" : "s");
      }
    }
  }
  problems += kiln_cli_doctor_compiler();
  problems += kiln_cli_doctor_cache();
  printf("%s\n", problems ? "some problems found (see above)" : "all good");
  return problems ? KILN_CLI_PROBLEM : KILN_CLI_OK;
}

/* ───────────── main ───────────── */

/* rc, or `trouble` (when rc is less) after reporting that standard output
 * could not be written. */
static int kiln_cli_finish(const char *cmd, int rc, int trouble) {
  if (kiln_cli_stdout_ok()) return rc;
  fprintf(stderr, "kiln%s%s: cannot write standard output: %s\n", cmd ? " " : "", cmd ? cmd : "",
          strerror(kiln_cli_stdout_errno()));
  return rc < trouble ? trouble : rc;
}

int main(int argc, char **argv) {
  if (argc < 2) return kiln_cli_usage_error("%s", "missing command");
  const char *cmd = argv[1];
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    if (argc > 2) return kiln_cli_usage_error("--version takes no arguments (got '%s')", argv[2]);
    return kiln_cli_finish(NULL, kiln_cli_version(1, argv + 1), KILN_CLI_PROBLEM);
  }
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
    return kiln_cli_finish(NULL, kiln_cli_help(argc - 1, argv + 1), KILN_CLI_PROBLEM);
  for (int i = 0; i < KILN_CLI_N_COMMANDS; i++)
    if (strcmp(cmd, kiln_cli_commands[i].name) == 0)
      return kiln_cli_finish(cmd, kiln_cli_commands[i].run(argc - 1, argv + 1), kiln_cli_commands[i].trouble);
  if (cmd[0] == '-') return kiln_cli_usage_error("unknown option '%s'", cmd);
  return kiln_cli_usage_error("unknown command '%s'", cmd);
}
