#include "base/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* Temp-name counter: the one piece of process-wide state here; it only has
 * to differ between calls, so an atomic increment suffices. */
static uint64_t g_unique;

uint64_t kiln_fs_unique(void) { return __atomic_add_fetch(&g_unique, 1, __ATOMIC_RELAXED); }

kiln_status kiln_fs_mkdirs_private(const char *path, kiln_err *err) {
  if (!path || !*path) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "empty directory path");
  char buf[PATH_MAX];
  size_t n = strlen(path);
  if (n >= sizeof buf) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "path too long: %.200s...", path);
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
  /* Walk the components left to right; each missing one is created 0700.
   * EEXIST is fine: the leaf is checked by the caller. */
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != 0) continue;
    char saved = buf[i];
    buf[i] = 0;
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
      int e = errno;
      buf[i] = saved;
      return kiln_err_set(err, KILN_ERR_IO, "cannot create directory %s: %s", path, strerror(e));
    }
    buf[i] = saved;
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return kiln_err_set(err, KILN_ERR_IO, "cannot create directory %s: not a directory", path);
  return KILN_OK;
}

size_t kiln_fs_existing_prefix(const char *path) {
  char buf[PATH_MAX];
  size_t n = path ? strlen(path) : 0;
  if (n == 0 || n >= sizeof buf) return 0;
  memcpy(buf, path, n + 1);
  struct stat st;
  while (n > 0) {
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) return n;
    while (n > 0 && buf[n - 1] != '/') buf[--n] = 0; /* drop the last component */
  }
  return 0;
}

void kiln_fs_rmdirs_empty(const char *path, size_t keep) {
  char buf[PATH_MAX];
  size_t n = path ? strlen(path) : 0;
  if (n == 0 || n >= sizeof buf) return;
  memcpy(buf, path, n + 1);
  while (n > keep) {
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    if (n <= keep || rmdir(buf) != 0) return; /* not empty, or not ours */
    while (n > 0 && buf[n - 1] != '/') buf[--n] = 0;
  }
}

const char *kiln_fs_stat_unsafe_reason(const struct stat *st, int want_dir) {
  if (S_ISLNK(st->st_mode)) return "is a symbolic link";
  if (want_dir && !S_ISDIR(st->st_mode)) return "is not a directory";
  if (!want_dir && !S_ISREG(st->st_mode)) return "is not a regular file";
  if (st->st_uid != geteuid()) return want_dir ? "directory is owned by another user" : "file is owned by another user";
  if (st->st_mode & (S_IWGRP | S_IWOTH))
    return want_dir ? "directory is writable by other users" : "file is writable by other users";
  return NULL;
}

kiln_status kiln_fs_check_private_dir(const char *path, const char *what, kiln_err *err) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return kiln_err_set(err, KILN_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
  const char *why = kiln_fs_stat_unsafe_reason(&st, 1);
  if (why)
    return kiln_err_set(err, KILN_ERR_UNSAFE,
                        "%s %s: %s (mode %04o, owner uid %u; expected a directory owned by uid %u with mode 0700)",
                        what, path, why, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)geteuid());
  return KILN_OK;
}

static int write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

kiln_status kiln_fs_write_new_at(int dirfd, const char *dir_path, const char *name, const void *data, size_t n,
                                 kiln_err *err) {
  int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "cannot create %s/%s: %s", dir_path, name, strerror(errno));
  if (write_all(fd, data, n) != 0) {
    int e = errno;
    close(fd);
    unlinkat(dirfd, name, 0);
    return kiln_err_set(err, KILN_ERR_IO, "cannot write %s/%s: %s", dir_path, name, strerror(e));
  }
  if (close(fd) != 0) {
    int e = errno;
    unlinkat(dirfd, name, 0);
    return kiln_err_set(err, KILN_ERR_IO, "cannot write %s/%s: %s", dir_path, name, strerror(e));
  }
  return KILN_OK;
}

/* The write-fault test hook (kiln_fs_test_write_fault): process-wide and
 * atomic, read once per atomic write. */
static uint64_t g_fault_after;
static int g_fault_errno;

void kiln_fs_test_write_fault(uint64_t after_bytes, int err_no) {
  __atomic_store_n(&g_fault_after, after_bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&g_fault_errno, err_no, __ATOMIC_RELEASE);
}

/* write_all for temp files of atomic writes, with the test hook. */
static int write_all_hooked(int fd, const void *data, size_t n) {
  int fe = __atomic_load_n(&g_fault_errno, __ATOMIC_ACQUIRE);
  if (!fe) return write_all(fd, data, n);
  uint64_t after = __atomic_load_n(&g_fault_after, __ATOMIC_RELAXED);
  size_t first = after < n ? (size_t)after : n;
  if (write_all(fd, data, first) != 0) return -1;
  if (first == n) return 0;
  if (fe < 0) {
    (void)fsync(fd); /* so the test sees the partial temp file's size */
    for (;;) pause();
  }
  errno = fe;
  return -1;
}

/* ".<name>.kiln.tmp.<pid>.<rand>" (".tmp." as the disk cache's sweep
 * expects): the pid lets a later save tell a dead
 * writer's leftover from a write in progress; the random part keeps
 * writers with the same pid on a shared disk (other hosts, containers)
 * apart. */
#define KILN_TMP_TAG ".kiln.tmp."

static uint32_t temp_rand(void) {
  uint64_t x = kiln_fs_unique() * 0x9E3779B97F4A7C15ull;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  x ^= (uint64_t)ts.tv_nsec * 0xBF58476D1CE4E5B9ull ^ (uint64_t)ts.tv_sec;
  x ^= x >> 31;
  return (uint32_t)x;
}

/* The temp files of atomic writes in progress, for kiln_fs_remove_pending_temps
 * (a signal handler): a slot is claimed with an atomic exchange, filled,
 * then published by storing its dirfd. */
enum { PENDING_SLOTS = 8 };
static struct {
  int busy;  /* claimed */
  int dirfd; /* -1: not published */
  char name[320];
} g_pending[PENDING_SLOTS] = {[0 ... PENDING_SLOTS - 1] = {0, -1, ""}};

static int pending_add(int dirfd, const char *tmp) {
  for (int i = 0; i < PENDING_SLOTS; i++) {
    if (__atomic_exchange_n(&g_pending[i].busy, 1, __ATOMIC_ACQUIRE)) continue;
    snprintf(g_pending[i].name, sizeof g_pending[i].name, "%s", tmp);
    __atomic_store_n(&g_pending[i].dirfd, dirfd, __ATOMIC_RELEASE);
    return i;
  }
  return -1; /* more writers than slots: that one is not cleaned on a signal */
}

static void pending_drop(int i) {
  if (i < 0) return;
  __atomic_store_n(&g_pending[i].dirfd, -1, __ATOMIC_RELEASE);
  __atomic_store_n(&g_pending[i].busy, 0, __ATOMIC_RELEASE);
}

void kiln_fs_remove_pending_temps(void) {
  for (int i = 0; i < PENDING_SLOTS; i++) {
    int fd = __atomic_load_n(&g_pending[i].dirfd, __ATOMIC_ACQUIRE);
    if (fd >= 0) unlinkat(fd, g_pending[i].name, 0);
  }
}

static kiln_status write_atomic_tmp(int dirfd, const char *dir_path, const char *name, const char *tmp,
                                    const void *data, size_t n, kiln_err *err);

kiln_status kiln_fs_write_atomic_at(int dirfd, const char *dir_path, const char *name, const void *data,
                                    size_t n, kiln_err *err) {
  char tmp[320];
  int len = snprintf(tmp, sizeof tmp, ".%s" KILN_TMP_TAG "%ld.%08x", name, (long)getpid(), temp_rand());
  if (len < 0 || (size_t)len >= sizeof tmp)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "file name too long: %.200s", name);
  int slot = pending_add(dirfd, tmp);
  kiln_status st = write_atomic_tmp(dirfd, dir_path, name, tmp, data, n, err);
  pending_drop(slot);
  return st;
}

static kiln_status write_atomic_tmp(int dirfd, const char *dir_path, const char *name, const char *tmp,
                                    const void *data, size_t n, kiln_err *err) {
  int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "cannot create %s/%s: %s", dir_path, tmp, strerror(errno));
  const char *step = "write";
  if (write_all_hooked(fd, data, n) != 0) goto fail;
  /* fsync before rename: otherwise a crash can leave the new name pointing
   * at a file whose data never reached the disk (zero-length or holes). */
  step = "fsync";
  if (fsync(fd) != 0) goto fail;
  step = "close";
  if (close(fd) != 0) {
    fd = -1;
    goto fail;
  }
  fd = -1;
  step = "rename";
  if (renameat(dirfd, tmp, dirfd, name) != 0) goto fail;
  /* Make the rename itself durable. Failure here does not undo the rename,
   * and the entry is complete either way, so it is not an error. */
  (void)fsync(dirfd);
  return KILN_OK;
fail : {
  int e = errno;
  if (fd >= 0) close(fd);
  unlinkat(dirfd, tmp, 0);
  return kiln_err_set(err, KILN_ERR_IO, "cannot %s %s/%s: %s", step, dir_path, name, strerror(e));
}
}

kiln_status kiln_fs_write_atomic(const char *path, const void *data, size_t n, kiln_err *err) {
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  if (!*name) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "not a file path: %s", path);
  if (!slash) {
    strcpy(dir, ".");
  } else if (slash == path) {
    strcpy(dir, "/");
  } else {
    size_t dn = (size_t)(slash - path);
    if (dn >= sizeof dir) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "path too long: %.200s", path);
    memcpy(dir, path, dn);
    dir[dn] = 0;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return kiln_err_set(err, KILN_ERR_IO, "cannot open directory %s: %s", dir, strerror(errno));
  kiln_status s = kiln_fs_write_atomic_at(dfd, dir, name, data, n, err);
  close(dfd);
  return s;
}

kiln_status kiln_fs_read_fd(int fd, size_t max_bytes, uint8_t **out, size_t *out_n, kiln_err *err) {
  *out = NULL;
  *out_n = 0;
  struct stat st;
  size_t cap = 4096;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    if ((uint64_t)st.st_size > max_bytes)
      return kiln_err_set(err, KILN_ERR_CORRUPT, "file is %lld bytes, more than the limit %zu",
                          (long long)st.st_size, max_bytes);
    cap = (size_t)st.st_size + 1;
  }
  uint8_t *buf = malloc(cap + 1);
  if (!buf) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory reading a file");
  size_t n = 0;
  for (;;) {
    if (n == cap) {
      if (cap > max_bytes) {
        free(buf);
        return kiln_err_set(err, KILN_ERR_CORRUPT, "file is larger than the limit %zu", max_bytes);
      }
      size_t ncap = cap * 2;
      uint8_t *nb = realloc(buf, ncap + 1);
      if (!nb) {
        free(buf);
        return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory reading a file");
      }
      buf = nb;
      cap = ncap;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      free(buf);
      return kiln_err_set(err, KILN_ERR_IO, "read failed: %s", strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  if (n > max_bytes) {
    free(buf);
    return kiln_err_set(err, KILN_ERR_CORRUPT, "file is larger than the limit %zu", max_bytes);
  }
  buf[n] = 0;
  *out = buf;
  *out_n = n;
  return KILN_OK;
}

kiln_status kiln_fs_mkdtemp(const char *base, const char *prefix, char *out, size_t cap, kiln_err *err) {
  if (!base || !*base) {
    base = kiln_cfg()->tmpdir;
    if (!base || !*base) base = "/tmp";
  }
  int len = snprintf(out, cap, "%s/%sXXXXXX", base, prefix ? prefix : "kiln-");
  if (len < 0 || (size_t)len >= cap) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "temp path too long");
  if (!mkdtemp(out)) /* mkdtemp creates the directory with mode 0700 */
    return kiln_err_set(err, KILN_ERR_IO, "cannot create a temp directory under %s: %s", base, strerror(errno));
  return KILN_OK;
}

int kiln_fs_remove_unlocked_dirs(const char *dir, const char *prefix, int min_age_s) {
  if (!dir || !*dir) {
    dir = kiln_cfg()->tmpdir;
    if (!dir || !*dir) dir = "/tmp";
  }
  DIR *d = opendir(dir);
  if (!d) return 0;
  int dfd = dirfd(d), removed = 0;
  size_t np = strlen(prefix);
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, np) != 0) continue;
    struct stat st;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid() || now - st.st_mtime <= min_age_s)
      continue;
    int wfd = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wfd < 0) continue;
    if (flock(wfd, LOCK_EX | LOCK_NB) == 0) {
      char path[PATH_MAX];
      if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path && kiln_fs_remove_tree(path) == 0)
        removed++;
    }
    close(wfd);
  }
  closedir(d);
  return removed;
}

static int remove_tree_at(int parent, const char *name, int depth) {
  if (unlinkat(parent, name, 0) == 0) return 0;
  if (errno != EISDIR && errno != EPERM) return errno == ENOENT ? 0 : -1;
  if (depth > 16) return -1;
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (remove_tree_at(dirfd(d), e->d_name, depth + 1) != 0) rc = -1;
  }
  closedir(d);
  if (unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT) rc = -1;
  return rc;
}

int kiln_fs_remove_tree(const char *path) {
  if (!path || !*path) return -1;
  return remove_tree_at(AT_FDCWD, path, 0);
}

/* ───────────── the rule for files the user names ───────────── */

const char *kiln_fs_kind_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

kiln_status kiln_fs_output_target(const char *path, const char *what, char *resolved, size_t cap,
                                  kiln_fs_out_kind *kind, kiln_err *err) {
  *kind = KILN_FS_OUT_REPLACE;
  if (!path || !*path) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: empty path", what);
  struct stat st;
  const char *target = path;
  char real[PATH_MAX];
  if (lstat(path, &st) != 0) {
    if (errno != ENOENT) return kiln_err_set(err, KILN_ERR_IO, "%s %s: cannot stat: %s", what, path, strerror(errno));
    goto found; /* a new file */
  }
  if (S_ISLNK(st.st_mode)) {
    /* Write through the link: replacing the link by a file would silently
     * detach whatever it pointed to (a shared metrics file, a device). */
    if (!realpath(path, real) || stat(real, &st) != 0)
      return kiln_err_set(err, KILN_ERR_IO,
                          "refusing to write %s %s: it is a symbolic link whose target cannot be resolved (%s)", what,
                          path, strerror(errno));
    target = real;
  }
  if (S_ISREG(st.st_mode)) goto found;
  if (S_ISCHR(st.st_mode)) {
    *kind = KILN_FS_OUT_DEVICE;
    goto found;
  }
  return kiln_err_set(err, KILN_ERR_IO,
                      "refusing to write %s %s%s%s: it is %s; kiln writes only regular files (replaced atomically) "
                      "and character devices",
                      what, path, target != path ? " -> " : "", target != path ? target : "",
                      kiln_fs_kind_name(st.st_mode));
found:
  if (strlen(target) >= cap) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: path too long: %.200s", what, path);
  strcpy(resolved, target);
  return KILN_OK;
}

/* Split path into its directory (out, capacity cap) and its last
 * component; NULL when there is none. */
static const char *split_dir(const char *path, char *dir, size_t cap) {
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  if (!*name) return NULL;
  if (!slash) {
    snprintf(dir, cap, ".");
  } else if (slash == path) {
    snprintf(dir, cap, "/");
  } else {
    size_t dn = (size_t)(slash - path);
    if (dn >= cap) return NULL;
    memcpy(dir, path, dn);
    dir[dn] = 0;
  }
  return name;
}

/* open() for writing that cannot block on a FIFO swapped in after the
 * check (O_NONBLOCK makes that open fail with ENXIO); the flag is cleared
 * once fstat confirmed the kind, so writes block as usual. */
static int open_out(const char *path, int flags) {
  int fd = open(path, flags | O_NONBLOCK, 0644);
  if (fd >= 0) {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  }
  return fd;
}

static kiln_status write_device(const char *path, const char *what, const void *data, size_t n, kiln_err *err) {
  int fd = open_out(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "%s %s: cannot open: %s", what, path, strerror(errno));
  struct stat st;
  /* Checked again on the open fd: the path may have changed since. */
  if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
    close(fd);
    return kiln_err_set(err, KILN_ERR_IO, "%s %s: changed while being opened; not written", what, path);
  }
  int rc = write_all(fd, data, n);
  int e = errno;
  close(fd);
  if (rc != 0) return kiln_err_set(err, KILN_ERR_IO, "cannot write %s %s: %s", what, path, strerror(e));
  return KILN_OK;
}

kiln_status kiln_fs_write_output(const char *path, const char *what, const void *data, size_t n, kiln_err *err) {
  char target[PATH_MAX], dir[PATH_MAX];
  kiln_fs_out_kind kind;
  kiln_status s = kiln_fs_output_target(path, what, target, sizeof target, &kind, err);
  if (s != KILN_OK) return s;
  if (kind == KILN_FS_OUT_DEVICE) return write_device(target, what, data, n, err);
  const char *name = split_dir(target, dir, sizeof dir);
  if (!name) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: not a file path: %.200s", what, path);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return kiln_err_set(err, KILN_ERR_IO, "cannot write %s %s: cannot open its directory %s: %s", what, path, dir,
                        strerror(errno));
  /* Before writing: the space a killed save left behind may be what this
   * save needs. */
  kiln_fs_remove_stale_temps(dfd);
  kiln_err e2 = {0};
  s = kiln_fs_write_atomic_at(dfd, dir, name, data, n, &e2);
  close(dfd);
  if (s != KILN_OK) return kiln_err_set(err, s, "%s: %s", what, e2.msg);
  return KILN_OK;
}

kiln_status kiln_fs_open_output_stream(const char *path, const char *what, int *out_fd, kiln_err *err) {
  *out_fd = -1;
  char target[PATH_MAX];
  kiln_fs_out_kind kind;
  kiln_status s = kiln_fs_output_target(path, what, target, sizeof target, &kind, err);
  if (s != KILN_OK) return s;
  int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY;
  if (kind == KILN_FS_OUT_REPLACE) flags |= O_CREAT | O_TRUNC | O_NOFOLLOW;
  int fd = open_out(target, flags);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "cannot create %s %s: %s", what, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || (kind == KILN_FS_OUT_REPLACE ? !S_ISREG(st.st_mode) : !S_ISCHR(st.st_mode))) {
    close(fd);
    return kiln_err_set(err, KILN_ERR_IO, "%s %s: changed while being opened; not written", what, path);
  }
  *out_fd = fd;
  return KILN_OK;
}

kiln_status kiln_fs_open_input(const char *path, const char *what, int *out_fd, kiln_err *err) {
  *out_fd = -1;
  if (!path || !*path) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "%s: empty path", what);
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
   * writer forever, before fstat could tell what it is. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "%s %s: cannot open: %s", what, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return kiln_err_set(err, KILN_ERR_IO, "%s %s: cannot stat: %s", what, path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return kiln_err_set(err, KILN_ERR_IO, "%s %s: is %s, not a regular file", what, path,
                        kiln_fs_kind_name(st.st_mode));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  *out_fd = fd;
  return KILN_OK;
}

/* Parse "<pid>.<tail>" at p to the end of the name: the pid, or 0 when the
 * tail is not 8 lowercase hex digits (hex) or 1 to 20 decimal digits. */
static long pid_dot_tail(const char *p, int hex) {
  long pid = 0;
  const char *d0 = p;
  while (*p >= '0' && *p <= '9' && p - d0 < 10) pid = pid * 10 + (*p++ - '0');
  if (p == d0 || *p != '.') return 0;
  p++;
  int n = 0;
  for (; (*p >= '0' && *p <= '9') || (hex && *p >= 'a' && *p <= 'f'); p++) n++;
  if (*p) return 0;
  return hex ? (n == 8 ? pid : 0) : (n >= 1 && n <= 20 ? pid : 0);
}

/* The owner pid of a temp name ".<name>.kiln.tmp.<pid>.<8 hex>", or of the
 * name kiln used before (".<name>.tmp.<pid>.<counter>", whose leftovers
 * users upgrading still have), or 0. */
static long temp_owner(const char *n) {
  if (n[0] != '.') return 0;
  const char *t = NULL;
  for (const char *p = strstr(n + 1, KILN_TMP_TAG); p; p = strstr(p + 1, KILN_TMP_TAG)) t = p;
  if (t) return pid_dot_tail(t + strlen(KILN_TMP_TAG), 1);
  for (const char *p = strstr(n + 1, ".tmp."); p; p = strstr(p + 1, ".tmp.")) t = p;
  return t ? pid_dot_tail(t + 5, 0) : 0;
}

int kiln_fs_remove_stale_temps(int dirfd) {
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return 0;
  }
  int removed = 0;
  long self = (long)getpid();
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid = temp_owner(e->d_name);
    if (pid <= 0 || pid == self) continue;
    /* Alive (or not ours to signal: EPERM) means a write may be in
     * progress; only ESRCH proves the owner is gone. A recycled pid keeps
     * the file until that process exits too: a leak, never a loss. */
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
      continue;
    if (unlinkat(dirfd, e->d_name, 0) == 0) removed++;
  }
  closedir(d);
  return removed;
}
