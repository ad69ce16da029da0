/* `kiln profile`: capture a profile from a running program, or summarize
 * one (docs/profiling.md).
 *
 *   kiln profile capture --addr localhost:6009 [--duration-ms 1000] [--logdir DIR]
 *       asks the program's profiler server (kiln_profiler_server_start) for
 *       a capture, written to DIR/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/, and
 *       prints that run directory on stdout (status lines go to stderr, so
 *       that `run=$(kiln profile capture ...)` works). A distributed job:
 *       --ranks N (rank R serves on PORT + R) or a comma-separated list of
 *       addresses, all captured over the same window into one run.
 *   kiln profile summary PATH [--steps] [--gap-ms X] [--top N]
 *       prints kiln_profiler_summary for a run directory, a logdir or a
 *       .xplane.pb file: per step region, the count, median, p90 and
 *       outlier steps; every step with --steps.
 *
 * Exit codes: 0 done, 1 the capture or summary failed (message on stderr),
 * 2 bad command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/profiler.h"
#include "kiln/profiler_server.h"
#include "tools/cli.h"
#include "tools/profile.h"

enum { PROFILE_OK = 0, PROFILE_PROBLEM = 1, PROFILE_USAGE = 2 };

static void profile_usage(FILE *f) {
  fprintf(f,
          "usage: kiln profile capture --addr HOST:PORT[,HOST:PORT...] [--ranks N] [--duration-ms N] [--logdir DIR]\n"
          "       kiln profile summary PATH [--steps] [--gap-ms X] [--top N]\n"
          "\n"
          "capture  ask a running program's profiler server (kiln_profiler_server_start) to record\n"
          "         N milliseconds (default 1000, at most %u) and write them to\n"
          "         DIR/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/ (DIR default: ./logs), the layout\n"
          "         TensorBoard's profile plugin reads; prints that directory. Several addresses, or\n"
          "         --ranks N (the servers of a distributed job's ranks on PORT .. PORT+N-1), are\n"
          "         captured over the same window into one run, one file per rank\n"
          "summary  per step region: steps, median / p90 / max wall time, device duty cycle, idle\n"
          "         gaps; the outlier steps (over 1.5 x the median and the median + 3 MAD) with\n"
          "         their gaps and what the host did during them; top kernels. PATH is a run\n"
          "         directory, a logdir or a .xplane.pb; a run of a distributed job (one file per\n"
          "         rank) first names the straggler per collective and each rank's compute /\n"
          "         communication / overlap / idle time (--steps: every step with its gaps;\n"
          "         --gap-ms: report gaps longer than X ms, default 1; --top: kernels listed, default 10)\n",
          KILN_PROFILER_MAX_DURATION_MS);
}

static int profile_bad(const char *fmt, const char *arg) {
  fprintf(stderr, "kiln profile: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n\n");
  profile_usage(stderr);
  return PROFILE_USAGE;
}

/* A whole-string unsigned decimal in [lo, hi], else -1. */
static long long parse_uint(const char *s, long long lo, long long hi) {
  if (!s || *s < '0' || *s > '9') return -1;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || !end || *end || v < lo || v > hi) return -1;
  return v;
}

static int profile_capture(int argc, char **argv) {
  const char *addr = NULL, *logdir = "logs";
  long long duration = 1000, ranks = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      profile_usage(stdout);
      return PROFILE_OK;
    }
    if (i + 1 >= argc) return profile_bad("%s: missing value (or unknown option)", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--addr")) {
      addr = v;
    } else if (!strcmp(a, "--duration-ms")) {
      duration = parse_uint(v, 1, KILN_PROFILER_MAX_DURATION_MS);
      if (duration < 0) return profile_bad("--duration-ms: expected a number of milliseconds from 1 to 600000, got '%s'", v);
    } else if (!strcmp(a, "--logdir")) {
      logdir = v;
    } else if (!strcmp(a, "--ranks")) {
      ranks = parse_uint(v, 1, 256);
      if (ranks < 0) return profile_bad("--ranks: expected a number of ranks from 1 to 256, got '%s'", v);
    } else {
      return profile_bad("capture: unknown option %s", a);
    }
  }
  if (!addr) return profile_bad("capture: --addr HOST:PORT is required%s", "");
  char *list = NULL; /* --ranks N: HOST:PORT .. HOST:PORT+N-1, the servers of ranks 0 .. N-1 */
  if (ranks > 0) {
    const char *colon = strrchr(addr, ':');
    long long port = colon ? parse_uint(colon + 1, 1, 65535) : -1;
    if (!kiln_profiler_client_addr_valid(addr) || port < 0 || port + ranks - 1 > 65535)
      return profile_bad("--addr with --ranks: expected HOST:PORT of rank 0, ports up to 65535, got '%s'", addr);
    size_t cap = (size_t)ranks * (strlen(addr) + 8) + 1, o = 0;
    list = malloc(cap);
    if (!list) return PROFILE_PROBLEM;
    for (long long r = 0; r < ranks; r++)
      o += (size_t)snprintf(list + o, cap - o, "%s%.*s:%lld", r ? "," : "", (int)(colon - addr), addr, port + r);
    addr = list;
  }
  for (const char *p = addr; p;) { /* every address of a comma-separated list */
    const char *comma = strchr(p, ',');
    char one[300];
    snprintf(one, sizeof one, "%.*s", comma ? (int)(comma - p) : (int)strlen(p), p);
    if (!kiln_profiler_client_addr_valid(one)) {
      int rc = profile_bad("--addr: expected HOST:PORT[,HOST:PORT...] with ports from 1 to 65535 (e.g. localhost:6009), got '%s'", one);
      free(list);
      return rc;
    }
    p = comma ? comma + 1 : NULL;
  }
  /* the capture's output, checked before the capture's wait */
  if (kiln_cli_check_output_dir("profile capture", "--logdir", logdir)) {
    free(list);
    return PROFILE_PROBLEM;
  }
  fprintf(stderr, "kiln profile: capturing %lld ms from %s ...\n", duration, addr);
  char run[4096];
  /* No source location: the user of a command line has no use for ours. */
  kiln_status st = kiln_profiler_client_capture_at(addr, (uint32_t)duration, logdir, run, sizeof run, KILN_CLI_NO_LOC);
  free(list);
  if (st != KILN_OK) fprintf(stderr, "kiln profile: %s\n", kiln_cli_error_message());
  /* gRPC's own threads are gone before the process exits (see
   * kiln_profiler_server_stop): a leak checker at exit never meets them. */
  kiln_shutdown();
  if (st != KILN_OK) return PROFILE_PROBLEM;
  printf("%s\n", run);
  return PROFILE_OK;
}

static int profile_summary(int argc, char **argv) {
  const char *path = NULL;
  kiln_profiler_summary_opts opts = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      profile_usage(stdout);
      return PROFILE_OK;
    }
    if (!strcmp(a, "--steps")) {
      opts.per_step = 1;
    } else if (!strcmp(a, "--gap-ms") || !strcmp(a, "--top")) {
      if (i + 1 >= argc) return profile_bad("%s: missing value", a);
      const char *v = argv[++i];
      if (!strcmp(a, "--top")) {
        long long n = parse_uint(v, 1, 1000);
        if (n < 0) return profile_bad("--top: expected an integer from 1 to 1000, got '%s'", v);
        opts.top_kernels = (int)n;
      } else {
        char *end = NULL;
        double g = strtod(v, &end);
        if (!end || *end || !(g > 0) || g > 1e6) return profile_bad("--gap-ms: expected a positive number of milliseconds, got '%s'", v);
        opts.gap_ms = g;
      }
    } else if (a[0] == '-') {
      return profile_bad("summary: unknown option %s", a);
    } else if (path) {
      return profile_bad("summary: one PATH only (got a second: %s)", a);
    } else {
      path = a;
    }
  }
  if (!path) return profile_bad("summary: PATH is required (a run directory, a logdir or a .xplane.pb)%s", "");
  kiln_clear_error();
  if (kiln_profiler_summary_at(path, stdout, &opts, KILN_CLI_NO_LOC) != KILN_OK) {
    fflush(stdout);
    fprintf(stderr, "kiln profile summary: %s\n", kiln_cli_error_message());
    return PROFILE_PROBLEM;
  }
  return PROFILE_OK;
}

int kiln_cli_profile(int argc, char **argv) {
  if (argc < 2) return profile_bad("missing subcommand: capture or summary%s", "");
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    profile_usage(stdout);
    return PROFILE_OK;
  }
  if (!strcmp(argv[1], "capture")) return profile_capture(argc - 1, argv + 1);
  if (!strcmp(argv[1], "summary")) return profile_summary(argc - 1, argv + 1);
  return profile_bad("unknown subcommand %s (expected capture or summary)", argv[1]);
}
