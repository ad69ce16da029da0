/* File-system helpers for files kiln writes and later trusts: private
 * directories, atomic writes, ownership/permission checks.
 *
 * Why this exists: the disk cache holds shared objects that kiln loads and
 * runs. A file that another user can write (or swap through a symlink or a
 * writable directory) would let that user run code as us, and a file that a
 * crash left half-written must never be mistaken for a complete one. So
 * every write here is "write a temp file, fsync, rename, fsync the
 * directory", and every check uses lstat/fstat, never a path that could be
 * swapped between the check and the use.
 *
 * All functions are thread-safe (no shared state besides an atomic counter
 * used to make temp names unique within the process). Errors are reported
 * through kiln_err with the path in the message; none of them aborts.
 */
#ifndef KILN_BASE_FS_H
#define KILN_BASE_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "base/status.h"

/* Create `path` and any missing parents with mode 0700 (mkdir -p). Existing
 * components are left as they are (their safety is checked separately with
 * kiln_fs_check_private_dir on the leaf). Errors: KILN_ERR_IO. */
kiln_status kiln_fs_mkdirs_private(const char *path, kiln_err *err);

/* Why `st` (from lstat/fstat) is not a safe place to load code from, or
 * NULL when it is safe: it must be owned by the effective user, not be a
 * symlink, be of the expected kind (want_dir: directory, else regular file)
 * and not be writable by group or others. The returned string is static. */
const char *kiln_fs_stat_unsafe_reason(const struct stat *st, int want_dir);

/* lstat `path` and check it is a private directory (see above). Errors:
 * KILN_ERR_IO when it cannot be stat'ed, KILN_ERR_UNSAFE with a message
 * "<what> <path>: <reason>" otherwise. `what` is e.g. "refusing to use
 * cache directory". */
kiln_status kiln_fs_check_private_dir(const char *path, const char *what, kiln_err *err);

/* Atomically replace `name` inside the directory `dirfd` with `n` bytes of
 * `data`: the content is written to a unique temp file (mode 0600,
 * O_EXCL|O_NOFOLLOW), fsync'ed, renamed over `name`, and the directory is
 * fsync'ed. Readers see either the old file or the complete new one, never a
 * prefix. `dir_path` is used only in messages. Errors: KILN_ERR_IO (the temp
 * file is removed). */
kiln_status kiln_fs_write_atomic_at(int dirfd, const char *dir_path, const char *name, const void *data,
                                    size_t n, kiln_err *err);

/* Same, for a full path (opens the parent directory). */
kiln_status kiln_fs_write_atomic(const char *path, const void *data, size_t n, kiln_err *err);

/* Write `n` bytes to a new file `name` in `dirfd` (O_CREAT|O_EXCL, mode
 * 0600), without fsync: for private scratch files. Errors: KILN_ERR_IO. */
kiln_status kiln_fs_write_new_at(int dirfd, const char *dir_path, const char *name, const void *data, size_t n,
                                 kiln_err *err);

/* Read all of the open file `fd` (from its current offset) into a new
 * malloc'ed buffer (*out, caller frees; a terminating NUL is appended but not
 * counted in *out_n). Fails with KILN_ERR_IO on read errors and with
 * KILN_ERR_CORRUPT when the file exceeds `max_bytes`. */
kiln_status kiln_fs_read_fd(int fd, size_t max_bytes, uint8_t **out, size_t *out_n, kiln_err *err);

/* Create a fresh private (0700) directory "<base>/<prefix>XXXXXX" and write
 * its path to out (size cap). base NULL: $TMPDIR or /tmp. Errors:
 * KILN_ERR_IO. */
kiln_status kiln_fs_mkdtemp(const char *base, const char *prefix, char *out, size_t cap, kiln_err *err);

/* Remove `path` and everything below it without following symlinks (a
 * symlink is removed, not its target). Best effort; returns 0 when the tree
 * is gone. Depth-limited to 16 levels. */
int kiln_fs_remove_tree(const char *path);

/* A process-unique number for temp names (atomic counter). */
uint64_t kiln_fs_unique(void);

#endif
