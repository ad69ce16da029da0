/* Helpers shared by the subcommands of `kiln`: see cli.h. */
#include "tools/cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *kiln_cli_error_message(void) {
  kiln_status s = kiln_last_status();
  const char *msg = kiln_last_error();
  if (s == KILN_OK) return msg;
  const char *name = kiln_status_name(s);
  size_t n = strlen(name);
  if (!strncmp(msg, name, n) && msg[n] == ':' && msg[n + 1] == ' ') {
    msg += n + 2;
  } else { /* "FILE:LINE: STATUS: ": the first ": STATUS: " ends kiln's prefix */
    char pat[80];
    snprintf(pat, sizeof pat, ": %s: ", name);
    const char *p = strstr(msg, pat);
    if (p) msg = p + strlen(pat);
  }
  return *msg ? msg : name;
}

static void cli_expected(const char *cmd, const char *flag, const char *what, const char *v) {
  fprintf(stderr, "kiln %s: %s: expected %s, got '%s'\n", cmd, flag, what, v);
}

int kiln_cli_parse_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi, long long *out) {
  char what[96];
  if (hi >= INT_MAX && lo == 1)
    snprintf(what, sizeof what, "a positive integer");
  else if (hi >= INT_MAX && lo == 0)
    snprintf(what, sizeof what, "a non-negative integer");
  else
    snprintf(what, sizeof what, "an integer from %lld to %lld", lo, hi);
  char *end = NULL;
  errno = 0;
  long long x = v && *v ? strtoll(v, &end, 10) : 0;
  if (!v || !*v || errno || !end || *end || x < lo || x > hi) {
    cli_expected(cmd, flag, what, v ? v : "");
    return -1;
  }
  *out = x;
  return 0;
}

int kiln_cli_parse_number(const char *cmd, const char *flag, const char *v, double lo, int lo_open, double *out) {
  char what[96];
  if (lo == 0)
    snprintf(what, sizeof what, "a %s number", lo_open ? "positive" : "non-negative");
  else
    snprintf(what, sizeof what, "a number %s %g", lo_open ? ">" : ">=", lo);
  char *end = NULL;
  errno = 0;
  double x = v && *v ? strtod(v, &end) : NAN;
  if (!v || !*v || errno || !end || *end || !isfinite(x) || x < lo || (lo_open && x == lo)) {
    cli_expected(cmd, flag, what, v ? v : "");
    return -1;
  }
  *out = x;
  return 0;
}

/* Whether dir is a directory this process may create files in; when not,
 * why (written into why). */
static int dir_writable(const char *dir, char *why, size_t cap) {
  struct stat st;
  if (stat(dir, &st) != 0) {
    if (errno == ENOENT)
      snprintf(why, cap, "the directory '%s' does not exist", dir);
    else
      snprintf(why, cap, "'%s': %s", dir, strerror(errno));
    return 0;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, cap, "'%s' is not a directory", dir);
    return 0;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    snprintf(why, cap, "the directory '%s' is not writable (%s)", dir, strerror(errno));
    return 0;
  }
  return 1;
}

int kiln_cli_check_output_file(const char *cmd, const char *flag, const char *path) {
  char dir[4096], why[4200];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir) dir[1] = 0; /* "/x" */
  else *slash = 0;
  struct stat st;
  int ok = *path && dir_writable(dir, why, sizeof why);
  if (!*path) snprintf(why, sizeof why, "the path is empty");
  if (ok && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(why, sizeof why, "it is a directory; give a file name");
    ok = 0;
  }
  if (!ok) fprintf(stderr, "kiln %s: %s: cannot write '%s': %s\n", cmd, flag, path, why);
  return ok ? 0 : -1;
}

int kiln_cli_check_output_dir(const char *cmd, const char *flag, const char *path) {
  char dir[4096], why[4200] = "the path is empty";
  snprintf(dir, sizeof dir, "%s", path);
  struct stat st;
  int ok = 0;
  /* the directory itself, else its nearest existing ancestor (created below it) */
  while (*dir) {
    if (stat(dir, &st) == 0) {
      ok = dir_writable(dir, why, sizeof why);
      break;
    }
    if (errno != ENOENT && errno != ENOTDIR) { /* ENOTDIR: an ancestor is a file, found above */
      snprintf(why, sizeof why, "'%s': %s", dir, strerror(errno));
      break;
    }
    char *slash = strrchr(dir, '/');
    while (slash && slash > dir && slash[-1] == '/') slash--;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
  }
  if (!ok) fprintf(stderr, "kiln %s: %s: cannot write to '%s': %s\n", cmd, flag, path, why);
  return ok ? 0 : -1;
}

static int g_stdout_errno; /* the first write error on stdout, 0 while none */

int kiln_cli_stdout_ok(void) {
  if (g_stdout_errno) return 0;
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return 1;
  g_stdout_errno = errno ? errno : EIO; /* ferror alone: the failed write's errno is gone */
  return 0;
}

int kiln_cli_stdout_errno(void) { return g_stdout_errno; }
