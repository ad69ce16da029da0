#include "base/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

kiln_status kiln_fs_write_atomic_at(int dirfd, const char *dir_path, const char *name, const void *data,
                                    size_t n, kiln_err *err) {
  char tmp[320];
  int len = snprintf(tmp, sizeof tmp, ".%s.tmp.%ld.%llu", name, (long)getpid(),
                     (unsigned long long)kiln_fs_unique());
  if (len < 0 || (size_t)len >= sizeof tmp)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "file name too long: %.200s", name);
  int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "cannot create %s/%s: %s", dir_path, tmp, strerror(errno));
  const char *step = "write";
  if (write_all(fd, data, n) != 0) goto fail;
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
    base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
  }
  int len = snprintf(out, cap, "%s/%sXXXXXX", base, prefix ? prefix : "kiln-");
  if (len < 0 || (size_t)len >= cap) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "temp path too long");
  if (!mkdtemp(out)) /* mkdtemp creates the directory with mode 0700 */
    return kiln_err_set(err, KILN_ERR_IO, "cannot create a temp directory under %s: %s", base, strerror(errno));
  return KILN_OK;
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
