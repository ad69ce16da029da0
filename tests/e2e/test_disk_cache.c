/* The persistent cache across processes, through the public API: a second
 * process finds the compiled graph on disk; a corrupted entry is detected,
 * reported and rebuilt; a cache directory that other users can write is
 * refused with an error naming it. The program re-executes itself as the
 * child ("child" argument) so each run is a fresh process. */
#include <kiln/kiln.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kt.h"

static char g_self[4096];
static char g_dir[512];

/* Child: compute a small graph, print counters and a checksum. */
static int child(void) {
  int64_t s[2] = {64, 64};
  kiln_tensor a = kiln_rand_uniform(KILN_F32, 2, s, 5);
  kiln_tensor b = kiln_softmax(kiln_add_c(kiln_mul(a, a), 0.25), 1);
  double v = kiln_item_f64(kiln_sum(b, 0, NULL, 0));
  kiln_status st = kiln_last_status();
  printf("status=%s hit=%lld miss=%lld value=%.6f\n", kiln_status_name(st),
         (long long)kiln_counter_value("PersistentCacheHit"), (long long)kiln_counter_value("PersistentCacheMiss"), v);
  if (st != KILN_OK) printf("error=%s\n", kiln_last_error());
  kiln_shutdown();
  return st == KILN_OK ? 0 : 3;
}

/* Run the child with KILN_CACHE_DIR=g_dir; capture stdout+stderr. */
static int run_child(char *out, size_t len) {
  int fd[2];
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    dup2(fd[1], 2);
    close(fd[0]);
    setenv("KILN_CACHE_DIR", g_dir, 1);
    setenv("KILN_BACKEND", "cpu", 1);
    execl(g_self, g_self, "child", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < len && (r = read(fd[0], out + n, len - 1 - n)) > 0) n += (size_t)r;
  out[n] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static double value_of(const char *out) {
  const char *p = strstr(out, "value=");
  return p ? atof(p + 6) : -1.0;
}

/* Append garbage to / truncate every regular file under dir (recursively). */
static int corrupt_all(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st)) continue;
    if (S_ISDIR(st.st_mode)) {
      n += corrupt_all(p);
    } else if (S_ISREG(st.st_mode)) {
      if (truncate(p, st.st_size / 2) == 0) n++;
    }
  }
  closedir(d);
  return n;
}

KT_TEST(second_process_hits_the_disk_cache) {
  char out1[8192], out2[8192];
  KT_EQ_INT(run_child(out1, sizeof out1), 0);
  KT_STR_CONTAINS(out1, "status=OK");
  KT_STR_CONTAINS(out1, "hit=0");
  KT_CHECK(!strstr(out1, "miss=0"));
  KT_EQ_INT(run_child(out2, sizeof out2), 0);
  KT_STR_CONTAINS(out2, "miss=0");
  KT_CHECK(!strstr(out2, "hit=0"));
  KT_NEAR(value_of(out1), 64.0, 1e-3); /* each softmax row sums to 1 */
  KT_NEAR(value_of(out2), value_of(out1), 1e-9);
}

KT_TEST(corrupt_entry_is_reported_and_rebuilt) {
  char out[8192];
  KT_CHECK(corrupt_all(g_dir) > 0);
  KT_EQ_INT(run_child(out, sizeof out), 0);
  KT_STR_CONTAINS(out, "corrupt");
  KT_NEAR(value_of(out), 64.0, 1e-3);
  /* and the rebuilt entry is good again */
  KT_EQ_INT(run_child(out, sizeof out), 0);
  KT_STR_CONTAINS(out, "miss=0");
}

KT_TEST(world_writable_cache_dir_is_refused) {
  char out[8192];
  KT_CHECK(chmod(g_dir, 0777) == 0);
  int rc = run_child(out, sizeof out);
  KT_CHECK(rc != 0);
  KT_STR_CONTAINS(out, "UNSAFE");
  KT_STR_CONTAINS(out, g_dir);
  chmod(g_dir, 0700);
}

int main_tests(int argc, char **argv);

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "child")) return child();
  ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
  if (n <= 0) return 1;
  g_self[n] = 0;
  snprintf(g_dir, sizeof g_dir, "/tmp/kiln-e2e-cache-XXXXXX");
  if (!mkdtemp(g_dir)) return 1;
  int rc = main_tests(1, argv);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_dir);
  return rc;
}

#define main main_tests
KT_MAIN(KT_CASE(second_process_hits_the_disk_cache), KT_CASE(corrupt_entry_is_reported_and_rebuilt),
        KT_CASE(world_writable_cache_dir_is_refused))
#undef main
