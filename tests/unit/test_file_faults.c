/* Faults around the files kiln reads and writes (issue 11, section 3):
 *   - a checkpoint save killed mid-write (kill -9 of a child paused inside
 *     the write by the fs test hook) leaves a temp file that the next save
 *     in the directory removes, and the old checkpoint stays loadable;
 *   - ENOSPC during a save (the write-failing hook): old file intact, no
 *     temp file, KILN_ERR_IO naming the checkpoint and strerror;
 *   - output paths that are not regular files (symlink, dangling symlink,
 *     FIFO, directory, /dev/null, /dev/full), for checkpoints, the metrics
 *     file and event files; inputs that are FIFOs or directories are refused
 *     without blocking;
 *   - a gzip IDX file with a bad CRC is reported by its name, not "<fd:N>";
 *   - memory bounded by the input: a 24 MB safetensors header of tiny
 *     metadata pairs and a 32 MB capture of empty messages, each measured as
 *     the peak RSS of a child process (wait4), against 4x the file + 64 MB.
 * The oracle for "intact" is the bytes and values the test wrote itself. */
#include <kiln/data.h>
#include <kiln/io.h>
#include <kiln/kiln.h>
#include <kiln/profiler.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "base/config.h"
#include "base/fs.h"
#include "debug/metrics.h"
#include "io/tfevents.h"
#include "profiler/summary.h"
#include "kt.h"

static char g_dir[256];
static pid_t g_owner;

/* Children that exit() (to run the metrics report) must not remove it. */
static void remove_dir(void) {
  if (getpid() == g_owner) kiln_fs_remove_tree(g_dir);
}

/* A fresh directory per test (its own stale-temp scan). */
static void fresh(char *out, size_t cap, const char *name) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "%s/kiln-faults-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    KT_CHECK(mkdtemp(g_dir) != NULL);
    g_owner = getpid();
    atexit(remove_dir);
  }
  snprintf(out, cap, "%s/%s", g_dir, name);
  KT_CHECK(mkdir(out, 0700) == 0);
}

static void start(void) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

/* Temp files of atomic writes in dir; the size of the largest in *bytes. */
static int count_temps(const char *dir, off_t *bytes) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  if (bytes) *bytes = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strstr(e->d_name, ".kiln.tmp.")) continue;
    n++;
    char p[1024];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (bytes && stat(p, &st) == 0 && st.st_size > *bytes) *bytes = st.st_size;
  }
  closedir(d);
  return n;
}

/* Size of the temp file of process pid in dir, -1 if there is none. */
static off_t temp_of(const char *dir, pid_t pid) {
  char tag[64];
  snprintf(tag, sizeof tag, ".kiln.tmp.%ld.", (long)pid);
  DIR *d = opendir(dir);
  off_t size = -1;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (!strstr(e->d_name, tag)) continue;
    char p[1024];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (stat(p, &st) == 0) size = st.st_size;
  }
  if (d) closedir(d);
  return size;
}

/* Save a [n] f32 tensor filled with v as "w" to path. */
static kiln_status save_filled(const char *path, int64_t n, float v) {
  float *buf = malloc(sizeof(float) * (size_t)n);
  if (!buf) return KILN_ERR_OUT_OF_MEMORY;
  for (int64_t i = 0; i < n; i++) buf[i] = v + (float)(i % 7);
  kiln_tensor t = kiln_from_host(buf, KILN_F32, 1, &n);
  free(buf);
  const char *names[] = {"w"};
  return kiln_save_safetensors(path, 1, names, &t, NULL);
}

/* 1 if path holds "w" = [n] f32 with the values save_filled(v) wrote. */
static int holds(const char *path, int64_t n, float v) {
  kiln_st_file *f = NULL;
  if (kiln_st_file_create(path, &f) != KILN_OK) return 0;
  kiln_tensor t = kiln_st_tensor(f, "w");
  float *buf = malloc(sizeof(float) * (size_t)n);
  int ok = buf && kiln_to_host(t, buf, sizeof(float) * (size_t)n) == KILN_OK;
  for (int64_t i = 0; ok && i < n; i++) ok = buf[i] == v + (float)(i % 7);
  free(buf);
  kiln_st_file_destroy(f);
  return ok;
}

/* ───────────── killed and failing saves ───────────── */

KT_TEST(save_killed_mid_write_leaves_a_temp_the_next_save_removes) {
  char dir[512], ckpt[600], other[600];
  fresh(dir, sizeof dir, "killed");
  snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
  snprintf(other, sizeof other, "%s/other.safetensors", dir);
  const int64_t n = 1 << 20; /* 4 MB of data */
  start();
  KT_EQ_INT(save_filled(ckpt, n, 1.0f), KILN_OK);
  kiln_shutdown(); /* the child starts its own runtime: no threads across fork */
  pid_t last_child = 0;
  for (int round = 0; round < 2; round++) {
    pid_t pid = fork();
    last_child = pid;
    if (pid == 0) {
      if (kiln_init(NULL) != KILN_OK) _exit(2);
      kiln_fs_test_write_fault(1 << 20, -1); /* stop for good after 1 MB */
      save_filled(ckpt, n, 2.0f);
      _exit(3); /* not reached: the hook pauses */
    }
    KT_CHECK(pid > 0);
    /* Wait (not a timing assertion: a bound on a hang) until the child's
     * temp file holds the first megabyte, then kill it. */
    for (int i = 0; i < 6000 && temp_of(dir, pid) < (1 << 20); i++) usleep(10000);
    KT_CHECK(temp_of(dir, pid) >= (1 << 20));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    KT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  /* A leftover named the way kiln named temps before, by a dead process
   * (the last child, reaped). */
  char legacy[700];
  snprintf(legacy, sizeof legacy, "%s/.ckpt.safetensors.tmp.%ld.3", dir, (long)last_child);
  int lfd = open(legacy, O_WRONLY | O_CREAT, 0600);
  KT_CHECK(lfd >= 0);
  close(lfd);
  /* The second writer removed the first one's leftover before writing:
   * kills in a row do not pile up (tens of them filled gigabytes). */
  KT_EQ_INT(count_temps(dir, NULL), 1);
  start();
  KT_CHECK(holds(ckpt, n, 1.0f)); /* the old checkpoint is intact */
  KT_EQ_INT(save_filled(other, 16, 5.0f), KILN_OK);
  KT_EQ_INT(count_temps(dir, NULL), 0); /* the leftover is removed */
  struct stat lst;
  KT_CHECK(stat(legacy, &lst) != 0 && errno == ENOENT);
  KT_CHECK(holds(ckpt, n, 1.0f));
  KT_CHECK(holds(other, 16, 5.0f));
  /* A live writer's temp file is left alone: our own pid's. */
  char live[700];
  snprintf(live, sizeof live, "%s/.x.kiln.tmp.%ld.0000abcd", dir, (long)getpid());
  int fd = open(live, O_WRONLY | O_CREAT, 0600);
  KT_CHECK(fd >= 0);
  close(fd);
  KT_EQ_INT(save_filled(other, 16, 6.0f), KILN_OK);
  KT_EQ_INT(count_temps(dir, NULL), 1);
  unlink(live);
}

KT_TEST(enospc_during_save_keeps_the_old_checkpoint_and_says_so) {
  char dir[512], ckpt[600];
  fresh(dir, sizeof dir, "enospc");
  snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
  start();
  KT_EQ_INT(save_filled(ckpt, 4096, 1.0f), KILN_OK);
  kiln_clear_error();
  kiln_fs_test_write_fault(1000, ENOSPC);
  kiln_status s = save_filled(ckpt, 4096, 2.0f);
  kiln_fs_test_write_fault(0, 0);
  KT_EQ_INT(s, KILN_ERR_IO);
  KT_EQ_INT(kiln_last_status(), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), ckpt);
  KT_STR_CONTAINS(kiln_last_error(), strerror(ENOSPC));
  KT_STR_CONTAINS(kiln_last_error(), "unchanged");
  KT_EQ_INT(count_temps(dir, NULL), 0);
  kiln_clear_error();
  KT_CHECK(holds(ckpt, 4096, 1.0f));
}

/* ───────────── outputs that are not regular files ───────────── */

KT_TEST(checkpoint_through_a_symlink_writes_its_target) {
  char dir[512], target[600], link[600];
  fresh(dir, sizeof dir, "symlink");
  snprintf(target, sizeof target, "%s/real.safetensors", dir);
  snprintf(link, sizeof link, "%s/latest.safetensors", dir);
  start();
  KT_EQ_INT(save_filled(target, 8, 1.0f), KILN_OK);
  KT_CHECK(symlink("real.safetensors", link) == 0);
  KT_EQ_INT(save_filled(link, 8, 3.0f), KILN_OK);
  struct stat st;
  KT_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode)); /* still a link */
  KT_CHECK(holds(target, 8, 3.0f));
  /* A link to nothing is refused, and stays a link to nothing. */
  char dangling[600];
  snprintf(dangling, sizeof dangling, "%s/dangling.safetensors", dir);
  KT_CHECK(symlink("missing/nowhere", dangling) == 0);
  kiln_clear_error();
  KT_EQ_INT(save_filled(dangling, 8, 1.0f), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "symbolic link");
  KT_CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
  kiln_clear_error();
}

KT_TEST(checkpoint_onto_fifo_directory_or_device) {
  char dir[512], fifo[600], sub[600];
  fresh(dir, sizeof dir, "special");
  snprintf(fifo, sizeof fifo, "%s/pipe", dir);
  snprintf(sub, sizeof sub, "%s/sub", dir);
  KT_CHECK(mkfifo(fifo, 0600) == 0);
  KT_CHECK(mkdir(sub, 0700) == 0);
  start();
  alarm(120); /* a regression would block on the FIFO: fail, don't hang */
  kiln_clear_error();
  KT_EQ_INT(save_filled(fifo, 8, 1.0f), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "FIFO");
  struct stat st;
  KT_CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  kiln_clear_error();
  KT_EQ_INT(save_filled(sub, 8, 1.0f), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "a directory");
  KT_CHECK(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode));
  /* A character device is written, never replaced. */
  kiln_clear_error();
  KT_EQ_INT(save_filled("/dev/null", 8, 1.0f), KILN_OK);
  KT_CHECK(lstat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
  if (lstat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
    KT_EQ_INT(save_filled("/dev/full", 8, 1.0f), KILN_ERR_IO);
    KT_STR_CONTAINS(kiln_last_error(), strerror(ENOSPC));
    KT_CHECK(lstat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode));
  }
  kiln_clear_error();
  /* Event files: the same rule through the stream opener. */
  KT_CHECK(kiln_tfevents_open_file(fifo, KILN_HERE) == NULL);
  KT_STR_CONTAINS(kiln_last_error(), "FIFO");
  kiln_clear_error();
  kiln_summary_writer *w = kiln_tfevents_open_file("/dev/null", KILN_HERE);
  KT_CHECK(w != NULL);
  KT_EQ_INT(kiln_summary_writer_destroy(w), KILN_OK);
  KT_CHECK(lstat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
  alarm(0);
  kiln_clear_error();
}

/* KILN_METRICS_FILE is written at exit: run that in a child. */
static void metrics_at_exit(const char *path) {
  kiln_shutdown();
  pid_t pid = fork();
  if (pid == 0) {
    setenv("KILN_METRICS_FILE", path, 1);
    unsetenv("KILN_METRICS");
    kiln_config_load(); /* read again: the parent loaded it before the change */
    kiln_metrics_install_exit_report();
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  KT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

KT_TEST(metrics_file_symlink_and_fifo) {
  char dir[512], target[600], link[600], fifo[600];
  fresh(dir, sizeof dir, "metrics");
  snprintf(target, sizeof target, "%s/metrics.txt", dir);
  snprintf(link, sizeof link, "%s/link.txt", dir);
  snprintf(fifo, sizeof fifo, "%s/pipe", dir);
  KT_CHECK(symlink(target, link) == 0 && mkfifo(fifo, 0600) == 0);
  FILE *f = fopen(target, "w");
  KT_CHECK(f && fputs("old\n", f) >= 0 && fclose(f) == 0);
  alarm(120);
  metrics_at_exit(link);
  metrics_at_exit(fifo);
  alarm(0);
  struct stat st;
  KT_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  KT_CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  char buf[64] = {0};
  f = fopen(target, "r");
  KT_CHECK(f && fread(buf, 1, sizeof buf - 1, f) > 0);
  if (f) fclose(f);
  KT_CHECK(strncmp(buf, "old\n", 4) != 0); /* the report replaced the target's content */
}

/* ───────────── inputs that are not regular files ───────────── */

KT_TEST(fifo_and_directory_inputs_are_refused_without_blocking) {
  char dir[512], fifo[600];
  fresh(dir, sizeof dir, "inputs");
  snprintf(fifo, sizeof fifo, "%s/pipe", dir);
  KT_CHECK(mkfifo(fifo, 0600) == 0);
  start();
  alarm(120);
  kiln_st_file *f = NULL;
  kiln_clear_error();
  KT_EQ_INT(kiln_st_file_create(fifo, &f), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "FIFO");
  kiln_clear_error();
  KT_EQ_INT(kiln_st_file_create(dir, &f), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "a directory");
  kiln_idx *idx = NULL;
  kiln_clear_error();
  KT_EQ_INT(kiln_idx_create(fifo, &idx), KILN_ERR_IO);
  KT_STR_CONTAINS(kiln_last_error(), "FIFO");
  kiln_err err = {0};
  FILE *out = fopen("/dev/null", "w");
  KT_EQ_INT(kiln_prof_summary_run(fifo, out, NULL, &err), KILN_ERR_IO);
  KT_STR_CONTAINS(err.msg, "FIFO");
  fclose(out);
  alarm(0);
  kiln_clear_error();
}

KT_TEST(gzip_crc_error_names_the_file) {
  char dir[512], path[600];
  fresh(dir, sizeof dir, "gzip");
  snprintf(path, sizeof path, "%s/labels-idx1-ubyte.gz", dir);
  uint8_t raw[8 + 64] = {0, 0, 0x08, 1, 0, 0, 0, 64};
  for (int i = 0; i < 64; i++) raw[8 + i] = (uint8_t)(i % 10);
  gzFile g = gzopen(path, "wb");
  KT_CHECK(g && gzwrite(g, raw, sizeof raw) == (int)sizeof raw && gzclose(g) == Z_OK);
  /* Flip a bit of the CRC32 in the 8-byte trailer. */
  int fd = open(path, O_RDWR);
  off_t end = lseek(fd, 0, SEEK_END);
  uint8_t b;
  KT_CHECK(pread(fd, &b, 1, end - 8) == 1);
  b ^= 1;
  KT_CHECK(pwrite(fd, &b, 1, end - 8) == 1);
  close(fd);
  start();
  kiln_idx *idx = NULL;
  kiln_clear_error();
  KT_EQ_INT(kiln_idx_create(path, &idx), KILN_ERR_CORRUPT);
  KT_STR_CONTAINS(kiln_last_error(), path);
  KT_STR_CONTAINS(kiln_last_error(), "gzip");
  KT_CHECK(strstr(kiln_last_error(), "<fd:") == NULL);
  kiln_clear_error();
}

/* ───────────── memory bounded by the input ───────────── */

static long long rss_now(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long long pages = 0, res = 0;
  if (f) {
    if (fscanf(f, "%lld %lld", &pages, &res) != 2) res = 0;
    fclose(f);
  }
  return res * sysconf(_SC_PAGESIZE);
}

/* Run fn(arg) in a child; its exit code must be 0. Returns the child's
 * peak RSS above what it inherited, in bytes. */
static long long child_peak(int (*fn)(const char *), const char *arg) {
  kiln_shutdown();
  long long base = rss_now();
  pid_t pid = fork();
  if (pid == 0) _exit(fn(arg));
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  KT_CHECK(wait4(pid, &status, 0, &ru) == pid);
  KT_CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
  return (long long)ru.ru_maxrss * 1024 - base;
}

static int open_header(const char *path) {
  kiln_st_file *f = NULL;
  kiln_status s = kiln_st_file_create(path, &f);
  int ok = s == KILN_OK && kiln_st_count(f) == 0 && kiln_st_metadata(f, "a") && !strcmp(kiln_st_metadata(f, "a"), "b");
  kiln_st_file_destroy(f);
  return ok ? 0 : 1;
}

KT_TEST(safetensors_header_memory_follows_its_size) {
  char dir[512], path[600];
  fresh(dir, sizeof dir, "header");
  snprintf(path, sizeof path, "%s/meta.safetensors", dir);
  /* {"__metadata__":{"a":"b","a":"b",...}} padded to 24 MB: 3 M pairs. */
  const size_t pair = 8, pairs = ((size_t)24 << 20) / pair;
  size_t hl = 17 + pairs * pair + 1;
  hl = (hl + 7) & ~(size_t)7;
  uint8_t *img = malloc(8 + hl);
  KT_CHECK(img != NULL);
  if (!img) return;
  for (int k = 0; k < 8; k++) img[k] = (uint8_t)((uint64_t)hl >> (8 * k));
  char *h = (char *)img + 8;
  size_t o = 0;
  memcpy(h, "{\"__metadata__\":{", 17);
  o = 17;
  for (size_t i = 0; i < pairs; i++, o += pair) memcpy(h + o, i ? ",\"a\":\"b\"" : "\"a\":\"b\" ", pair);
  h[o++] = '}';
  h[o++] = '}';
  while (o < hl) h[o++] = ' ';
  kiln_err err = {0};
  KT_EQ_INT(kiln_fs_write_atomic(path, img, 8 + hl, &err), KILN_OK);
  free(img);
  long long peak = child_peak(open_header, path);
  long long bound = 4 * (long long)(8 + hl) + (64ll << 20);
  KT_CHECK_MSG(peak < bound, "opening a %zu-byte header took %lld MB (bound %lld MB)", hl, peak >> 20, bound >> 20);
}

static int summarize(const char *path) {
  kiln_err err = {0};
  FILE *out = fopen("/dev/null", "w");
  kiln_status s = kiln_prof_summary_run(path, out, NULL, &err);
  fclose(out);
  return s == KILN_ERR_CORRUPT && strstr(err.msg, "decoding would need") ? 0 : 1;
}

/* A protobuf length-delimited field header: tag then varint length. */
static size_t put_len(uint8_t *p, uint8_t tag, uint64_t len) {
  size_t o = 0;
  p[o++] = tag;
  do {
    uint8_t b = len & 0x7f;
    len >>= 7;
    p[o++] = b | (len ? 0x80 : 0);
  } while (len);
  return o;
}

KT_TEST(capture_of_empty_messages_is_refused_before_decoding) {
  char dir[512], path[600], bad[600];
  fresh(dir, sizeof dir, "xspace");
  snprintf(path, sizeof path, "%s/huge.xplane.pb", dir);
  /* XSpace{planes: XPlane{lines: XLine{events: XEvent{stats: XStat{} x 16M}}}}:
   * 32 MB that protobuf-c would turn into 16 M structs (over a gigabyte). */
  const size_t stats = (size_t)16 << 20, body = stats * 2;
  uint8_t *img = malloc(body + 64);
  KT_CHECK(img != NULL);
  if (!img) return;
  uint8_t hdr[64];
  size_t ev_h = put_len(hdr, 0x22, body);                      /* XLine.events */
  size_t ln_h = put_len(hdr + 16, 0x1a, ev_h + body);          /* XPlane.lines */
  size_t pl_h = put_len(hdr + 32, 0x0a, ln_h + ev_h + body);   /* XSpace.planes */
  size_t o = 0;
  memcpy(img + o, hdr + 32, pl_h), o += pl_h;
  memcpy(img + o, hdr + 16, ln_h), o += ln_h;
  memcpy(img + o, hdr, ev_h), o += ev_h;
  for (size_t i = 0; i < stats; i++) img[o++] = 0x22, img[o++] = 0x00; /* XEvent.stats: empty XStat */
  kiln_err err = {0};
  KT_EQ_INT(kiln_fs_write_atomic(path, img, o, &err), KILN_OK);
  long long peak = child_peak(summarize, path);
  long long bound = 4 * (long long)o + (64ll << 20);
  KT_CHECK_MSG(peak < bound, "a %zu-byte capture took %lld MB (bound %lld MB)", o, peak >> 20, bound >> 20);
  /* A truncated one says where it goes wrong; a non-protobuf says so at once. */
  snprintf(bad, sizeof bad, "%s/cut.xplane.pb", dir);
  KT_EQ_INT(kiln_fs_write_atomic(bad, img, 4096, &err), KILN_OK);
  FILE *out = fopen("/dev/null", "w");
  KT_EQ_INT(kiln_prof_summary_run(bad, out, NULL, &err), KILN_ERR_CORRUPT);
  KT_STR_CONTAINS(err.msg, "not an XSpace protobuf: byte");
  KT_EQ_INT(kiln_fs_write_atomic(bad, "hello, world\n", 13, &err), KILN_OK);
  KT_EQ_INT(kiln_prof_summary_run(bad, out, NULL, &err), KILN_ERR_CORRUPT);
  KT_STR_CONTAINS(err.msg, "first byte 0x68");
  fclose(out);
  free(img);
}

KT_MAIN(KT_CASE(save_killed_mid_write_leaves_a_temp_the_next_save_removes),
        KT_CASE(enospc_during_save_keeps_the_old_checkpoint_and_says_so),
        KT_CASE(checkpoint_through_a_symlink_writes_its_target), KT_CASE(checkpoint_onto_fifo_directory_or_device),
        KT_CASE(metrics_file_symlink_and_fifo), KT_CASE(fifo_and_directory_inputs_are_refused_without_blocking),
        KT_CASE(gzip_crc_error_names_the_file), KT_CASE(safetensors_header_memory_follows_its_size),
        KT_CASE(capture_of_empty_messages_is_refused_before_decoding))
