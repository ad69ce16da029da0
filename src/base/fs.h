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

/* The length of path's longest prefix that names an existing directory
 * ("a/b" of "a/b/c/d" when a/b exists; 0 when none does): taken before
 * kiln_fs_mkdirs_private, it is what kiln_fs_rmdirs_empty keeps. */
size_t kiln_fs_existing_prefix(const char *path);

/* Undo kiln_fs_mkdirs_private after a failure: remove path, then each
 * parent, while it is an empty directory and longer than keep bytes (what
 * existed before). A directory that holds anything stays. */
void kiln_fs_rmdirs_empty(const char *path, size_t keep);

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

/* Remove the temp files of the atomic writes in progress in this process.
 * Async-signal-safe (only unlinkat): for a handler that ends the process
 * (dist's SIGTERM handler), so an interrupted write leaves neither a
 * partial file nor its temp file. */
void kiln_fs_remove_pending_temps(void);

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

/* Remove the directories "<dir>/<prefix>*" of this user that no process
 * holds a flock on and that were last modified more than min_age_s seconds
 * ago: work directories of killed processes (their owner holds an
 * exclusive flock on the directory while it lives; the age covers the
 * moment between mkdtemp and flock). dir NULL: $TMPDIR or /tmp. Returns
 * how many were removed. Best effort. */
int kiln_fs_remove_unlocked_dirs(const char *dir, const char *prefix, int min_age_s);

/* Remove `path` and everything below it without following symlinks (a
 * symlink is removed, not its target). Best effort; returns 0 when the tree
 * is gone. Depth-limited to 16 levels. */
int kiln_fs_remove_tree(const char *path);

/* A process-unique number for temp names (atomic counter). */
uint64_t kiln_fs_unique(void);

/* ───── files the user names: one rule for every reader and writer ─────
 *
 * Outputs (checkpoints, KILN_METRICS_FILE, profiles, TensorBoard event
 * files, graph dumps) follow one rule, decided here once (docs/checkpoints.md,
 * "Where kiln writes"):
 *   - a path that does not exist yet, or a regular file: atomic replace
 *     (temp file beside it, fsync, rename, fsync the directory);
 *   - a symbolic link: the rule is applied to its target (the link stays; a
 *     link to a missing file is refused);
 *   - a character device (/dev/null, /dev/stdout, a tty): written directly,
 *     never replaced (renaming over /dev/full as root destroyed it);
 *   - anything else (directory, FIFO, socket, block device): refused with
 *     KILN_ERR_IO naming the path and what it is.
 * Inputs the user names (checkpoints, dataset files, captures) must be
 * regular files (after following symlinks): a FIFO would block kiln forever
 * and a device would never end.
 *
 * Temporary files of atomic writes are named ".<name>.kiln.tmp.<pid>.<rand>"
 * so that kiln recognises them: each kiln_fs_write_output removes the ones in
 * its directory whose owner process no longer exists (a save killed by
 * SIGKILL cannot clean up after itself). */

typedef enum kiln_fs_out_kind {
  KILN_FS_OUT_REPLACE, /* atomic replace of the resolved path */
  KILN_FS_OUT_DEVICE,  /* a character device: write directly */
} kiln_fs_out_kind;

/* Apply the output rule to `path`: the path to write (the symlink's target
 * for a link) goes to resolved (capacity cap), the way to write it to *kind.
 * `what` names the file in messages ("checkpoint", "KILN_METRICS_FILE").
 * Errors: KILN_ERR_IO ("refusing to write <what> <path>: it is a FIFO ..."). */
kiln_status kiln_fs_output_target(const char *path, const char *what, char *resolved, size_t cap,
                                  kiln_fs_out_kind *kind, kiln_err *err);

/* Write `n` bytes as the whole content of the output `path` following the
 * rule above. On failure the old file is intact and no temp file remains.
 * Errors: KILN_ERR_IO with the path and strerror ("... No space left on
 * device"). */
kiln_status kiln_fs_write_output(const char *path, const char *what, const void *data, size_t n, kiln_err *err);

/* Open `path` for a stream writer (an event file): created or truncated
 * when it is a new or regular file (through a symlink to one), opened
 * as is for a character device, refused otherwise. *out_fd: O_WRONLY,
 * O_CLOEXEC. Errors: KILN_ERR_IO. */
kiln_status kiln_fs_open_output_stream(const char *path, const char *what, int *out_fd, kiln_err *err);

/* Open an input the user names, read-only, refusing anything that is not a
 * regular file (after following symlinks) without blocking on a FIFO: the
 * open is O_NONBLOCK and the kind is checked with fstat on the open fd.
 * Errors: KILN_ERR_IO ("<what> <path>: cannot open: ..." or "... is a FIFO
 * (named pipe), not a regular file"). */
kiln_status kiln_fs_open_input(const char *path, const char *what, int *out_fd, kiln_err *err);

/* What a stat mode is, in words ("a FIFO (named pipe)", "a directory"). */
const char *kiln_fs_kind_name(mode_t mode);

/* Remove the temp files ".<name>.kiln.tmp.<pid>.<rand>" in `dirfd` whose
 * owner pid is not a live process (and that are regular files of ours).
 * Returns how many were removed. Thread-safe; best effort. */
int kiln_fs_remove_stale_temps(int dirfd);

/* Test hook (tests only; process-wide): the next atomic writes fail after
 * `after_bytes` bytes of content with errno `err_no` (e.g. ENOSPC), or,
 * with err_no < 0, stop there forever (pause) so a test can kill the
 * writer mid-write. err_no 0 turns the hook off. */
void kiln_fs_test_write_fault(uint64_t after_bytes, int err_no);

#endif
