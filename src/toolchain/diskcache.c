#include "toolchain/diskcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/config.h"
#include "base/counters.h"
#include "base/log.h"
#include "base/fs.h"
#include "base/hash.h"

struct kiln_diskcache {
  char *dir;
  int dirfd;       /* every access goes through this verified descriptor */
  int64_t cap;     /* KILN_CACHE_MAX_SIZE in bytes; 0: no limit */
  int64_t written; /* bytes stored since the last size check (atomic) */
  int said;        /* the one line about removing entries was printed (atomic) */
};

/* ── the size limit ─────────────────────────────────────────────────── */

/* KILN_CACHE_MAX_SIZE: bytes, or a number with K, M or G (powers of 1024);
 * 0: no limit; unset or malformed: 2 GiB. */
static int64_t cap_from_config(void) { return kiln_cfg_size(kiln_cfg()->cache_max_size, (int64_t)2 << 30); }

typedef struct cache_file {
  int64_t size;
  struct timespec mtime;
  char name[32];
} cache_file;

static int older_first(const void *a, const void *b) {
  const cache_file *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Above the limit, remove the least recently used entries (a hit sets an
 * entry's mtime) down to 80% of it. Entries are only ever replaced whole,
 * so removing one is always safe: another process that has opened it reads
 * it to the end, one that has not compiles it again. Returns how many. */
static int prune(kiln_diskcache *dc) {
  int fd = dup(dc->dirfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return 0;
  }
  rewinddir(d); /* a dup shares the offset another scan of the directory left at its end */
  cache_file *f = NULL;
  size_t n = 0, cap = 0;
  int64_t total = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    struct stat st;
    if (len != 20 || strcmp(e->d_name + 16, ".kce") || fstatat(dc->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
        !S_ISREG(st.st_mode) || st.st_uid != geteuid())
      continue;
    if (n == cap) {
      cache_file *g = realloc(f, sizeof *f * (cap = cap ? 2 * cap : 256));
      if (!g) break;
      f = g;
    }
    f[n].size = (int64_t)st.st_size;
    f[n].mtime = st.st_mtim;
    memcpy(f[n].name, e->d_name, len + 1);
    total += f[n++].size;
  }
  closedir(d);
  int removed = 0;
  if (total > dc->cap) {
    qsort(f, n, sizeof *f, older_first);
    int64_t goal = dc->cap / 10 * 8;
    for (size_t i = 0; i < n && total > goal; i++)
      if (unlinkat(dc->dirfd, f[i].name, 0) == 0 || errno == ENOENT) total -= f[i].size, removed++;
    kiln_counter_add("PersistentCacheEvicted", removed);
    if (removed && !__atomic_exchange_n(&dc->said, 1, __ATOMIC_RELAXED))
      kiln_log_printf(stderr,
                      "kiln: cache directory %s is over KILN_CACHE_MAX_SIZE (%.1f MiB): removed the %d least "
                      "recently used entries\n",
                      dc->dir, (double)dc->cap / 1048576.0, removed);
  }
  free(f);
  return removed;
}

/* At open: a size check at most once an hour across processes (the stamp
 * file's mtime), so that many short runs are bounded too. */
static void prune_hourly(kiln_diskcache *dc) {
  static const char stamp[] = ".size-checked";
  struct stat st;
  if (fstatat(dc->dirfd, stamp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
      time(NULL) - st.st_mtime < 3600)
    return;
  int fd = openat(dc->dirfd, stamp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd >= 0) {
    (void)futimens(fd, NULL);
    close(fd);
  }
  prune(dc);
}

/* ── entry encoding ─────────────────────────────────────────────────── */

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static uint32_t header_crc(const uint8_t *hdr) {
  uint8_t tmp[KILN_CACHE_ENTRY_HEADER];
  memcpy(tmp, hdr, sizeof tmp);
  put_u32(tmp + 12, 0);
  return kiln_crc32c(tmp, sizeof tmp);
}

kiln_status kiln_cache_entry_encode(uint64_t key, const char *meta, size_t meta_len, const char *src,
                                    size_t src_len, const uint8_t *so, size_t so_len, uint8_t **out, size_t *out_n,
                                    kiln_err *err) {
  *out = NULL;
  *out_n = 0;
  if (meta_len > KILN_CACHE_ENTRY_MAX_META)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "cache entry description too long (%zu bytes)", meta_len);
  uint64_t total = (uint64_t)KILN_CACHE_ENTRY_HEADER + meta_len + src_len + so_len;
  if (src_len > KILN_CACHE_ENTRY_MAX_BYTES || so_len > KILN_CACHE_ENTRY_MAX_BYTES ||
      total > KILN_CACHE_ENTRY_MAX_BYTES)
    return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "cache entry too large (%llu bytes)",
                        (unsigned long long)total);
  uint8_t *buf = malloc((size_t)total);
  if (!buf) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory encoding a cache entry");
  memset(buf, 0, KILN_CACHE_ENTRY_HEADER);
  memcpy(buf, KILN_CACHE_ENTRY_MAGIC, 8);
  put_u32(buf + 8, KILN_CACHE_ENTRY_VERSION);
  put_u64(buf + 16, key);
  put_u64(buf + 24, meta_len);
  put_u64(buf + 32, src_len);
  put_u64(buf + 40, so_len);
  put_u32(buf + 48, kiln_crc32c(meta, meta_len));
  put_u32(buf + 52, kiln_crc32c(src, src_len));
  put_u32(buf + 56, kiln_crc32c(so, so_len));
  put_u32(buf + 12, header_crc(buf));
  uint8_t *p = buf + KILN_CACHE_ENTRY_HEADER;
  if (meta_len) memcpy(p, meta, meta_len);
  p += meta_len;
  if (src_len) memcpy(p, src, src_len);
  p += src_len;
  if (so_len) memcpy(p, so, so_len);
  *out = buf;
  *out_n = (size_t)total;
  return KILN_OK;
}

kiln_status kiln_cache_entry_parse(const uint8_t *buf, size_t n, kiln_cache_entry_view *out, kiln_err *err) {
  memset(out, 0, sizeof *out);
  if (n < KILN_CACHE_ENTRY_HEADER)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "truncated: %zu bytes, shorter than the %u-byte header", n,
                        KILN_CACHE_ENTRY_HEADER);
  if (memcmp(buf, KILN_CACHE_ENTRY_MAGIC, 8) != 0) return kiln_err_set(err, KILN_ERR_CORRUPT, "bad magic");
  uint32_t version = get_u32(buf + 8);
  if (version != KILN_CACHE_ENTRY_VERSION)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "unsupported format version %u (expected %u)", version,
                        KILN_CACHE_ENTRY_VERSION);
  if (get_u32(buf + 12) != header_crc(buf))
    return kiln_err_set(err, KILN_ERR_CORRUPT, "header checksum mismatch");
  uint64_t meta_len = get_u64(buf + 24), src_len = get_u64(buf + 32), so_len = get_u64(buf + 40);
  /* Each length is bounded before summing, so the sum cannot overflow. */
  if (meta_len > KILN_CACHE_ENTRY_MAX_META || src_len > KILN_CACHE_ENTRY_MAX_BYTES ||
      so_len > KILN_CACHE_ENTRY_MAX_BYTES)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "implausible lengths (meta %llu, source %llu, object %llu)",
                        (unsigned long long)meta_len, (unsigned long long)src_len, (unsigned long long)so_len);
  uint64_t want = (uint64_t)KILN_CACHE_ENTRY_HEADER + meta_len + src_len + so_len;
  if (want != n)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: file has %zu bytes, header describes %llu",
                        n < want ? "truncated" : "trailing bytes", n, (unsigned long long)want);
  const uint8_t *meta = buf + KILN_CACHE_ENTRY_HEADER;
  const uint8_t *src = meta + meta_len;
  const uint8_t *so = src + src_len;
  if (get_u32(buf + 48) != kiln_crc32c(meta, (size_t)meta_len))
    return kiln_err_set(err, KILN_ERR_CORRUPT, "description checksum mismatch");
  if (get_u32(buf + 52) != kiln_crc32c(src, (size_t)src_len))
    return kiln_err_set(err, KILN_ERR_CORRUPT, "source checksum mismatch");
  if (get_u32(buf + 56) != kiln_crc32c(so, (size_t)so_len))
    return kiln_err_set(err, KILN_ERR_CORRUPT, "object checksum mismatch");
  for (uint32_t i = 60; i < KILN_CACHE_ENTRY_HEADER; i++)
    if (buf[i]) return kiln_err_set(err, KILN_ERR_CORRUPT, "reserved header bytes are not zero");
  out->key = get_u64(buf + 16);
  out->meta = (const char *)meta;
  out->meta_len = (size_t)meta_len;
  out->src = (const char *)src;
  out->src_len = (size_t)src_len;
  out->so = so;
  out->so_len = (size_t)so_len;
  return KILN_OK;
}

/* ── the directory ──────────────────────────────────────────────────── */

void kiln_diskcache_entry_name(uint64_t key, char *buf, size_t cap) {
  snprintf(buf, cap, "%016llx.kce", (unsigned long long)key);
}

/* Remove leftovers of crashed processes: atomic-write temp files
 * (".<name>.tmp.<pid>.<n>") older than an hour, and compiler work
 * directories ("tmp-*", see compiler.c) that nobody holds a flock on and
 * that are older than a minute (kiln_fs_remove_unlocked_dirs). */
static void sweep_stale(kiln_diskcache *dc) {
  int fd = dup(dc->dirfd);
  if (fd < 0) return;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  rewinddir(d);
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.' || !strstr(e->d_name, ".tmp.")) continue;
    struct stat st;
    if (fstatat(dc->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (st.st_uid == geteuid() && S_ISREG(st.st_mode) && now - st.st_mtime > 3600) unlinkat(dc->dirfd, e->d_name, 0);
  }
  closedir(d);
  kiln_fs_remove_unlocked_dirs(dc->dir, "tmp-", 60);
}

kiln_status kiln_diskcache_open(const char *dir, kiln_diskcache **out, kiln_err *err) {
  *out = NULL;
  if (!dir || !*dir) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "empty cache directory");
  kiln_status s = kiln_fs_mkdirs_private(dir, err);
  if (s != KILN_OK) return s;
  /* O_NOFOLLOW: the leaf must not be a symlink; the descriptor is then
   * checked itself, so nothing can be swapped after the check. */
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    struct stat lst;
    if (e == ELOOP || e == ENOTDIR)
      return kiln_err_set(err, KILN_ERR_UNSAFE, "refusing to use cache directory %s: %s", dir,
                          lstat(dir, &lst) == 0 && S_ISLNK(lst.st_mode) ? "is a symbolic link" : "is not a directory");
    return kiln_err_set(err, KILN_ERR_IO, "cannot open cache directory %s: %s", dir, strerror(e));
  }
  struct stat st;
  const char *why = fstat(fd, &st) != 0 ? "cannot stat" : kiln_fs_stat_unsafe_reason(&st, 1);
  if (why) {
    close(fd);
    return kiln_err_set(err, KILN_ERR_UNSAFE,
                        "refusing to use cache directory %s: %s (mode %04o, owner uid %u; expected owner uid %u "
                        "and no group/other write permission: chmod 700 it or set KILN_CACHE_DIR)",
                        dir, why, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)geteuid());
  }
  kiln_diskcache *dc = calloc(1, sizeof *dc);
  if (!dc || !(dc->dir = strdup(dir))) {
    free(dc);
    close(fd);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
  }
  dc->dirfd = fd;
  dc->cap = cap_from_config();
  sweep_stale(dc);
  if (dc->cap > 0) prune_hourly(dc);
  *out = dc;
  return KILN_OK;
}

void kiln_diskcache_close(kiln_diskcache *dc) {
  if (!dc) return;
  close(dc->dirfd);
  free(dc->dir);
  free(dc);
}

const char *kiln_diskcache_dir(const kiln_diskcache *dc) { return dc ? dc->dir : NULL; }

/* Re-check the directory on every use: its mode may have changed since
 * open, and a writable directory lets others replace entries. */
static kiln_status check_dir(kiln_diskcache *dc, const char *path, kiln_err *err) {
  struct stat st;
  if (fstat(dc->dirfd, &st) != 0)
    return kiln_err_set(err, KILN_ERR_IO, "cannot stat cache directory %s: %s", dc->dir, strerror(errno));
  const char *why = kiln_fs_stat_unsafe_reason(&st, 1);
  if (why)
    return kiln_err_set(err, KILN_ERR_UNSAFE, "refusing to load %s: %s (%s, mode %04o)", path, why, dc->dir,
                        (unsigned)(st.st_mode & 07777));
  return KILN_OK;
}

kiln_status kiln_diskcache_lookup(kiln_diskcache *dc, uint64_t key, const char *src, size_t src_len,
                                  uint8_t **out_buf, kiln_cache_entry_view *view, int *corrupt, kiln_err *err) {
  *out_buf = NULL;
  memset(view, 0, sizeof *view);
  char name[32], path[PATH_MAX];
  kiln_diskcache_entry_name(key, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", dc->dir, name);
  kiln_status s = check_dir(dc, path, err);
  if (s != KILN_OK) return s;
  /* O_NONBLOCK: a FIFO planted under the name must not hang us. */
  int fd = openat(dc->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return KILN_OK;
    if (errno == ELOOP) return kiln_err_set(err, KILN_ERR_UNSAFE, "refusing to load %s: is a symbolic link", path);
    return kiln_err_set(err, KILN_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return kiln_err_set(err, KILN_ERR_IO, "cannot stat %s: %s", path, strerror(e));
  }
  const char *why = kiln_fs_stat_unsafe_reason(&st, 0);
  if (why) {
    close(fd);
    return kiln_err_set(err, KILN_ERR_UNSAFE, "refusing to load %s: %s (mode %04o, owner uid %u)", path, why,
                        (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
  }
  uint8_t *buf = NULL;
  size_t n = 0;
  kiln_err perr = {0};
  /* The checksum is verified on these bytes, read from the descriptor that
   * was checked: what is verified is exactly what gets loaded. */
  s = kiln_fs_read_fd(fd, KILN_CACHE_ENTRY_MAX_BYTES, &buf, &n, &perr);
  close(fd);
  if (s == KILN_ERR_IO || s == KILN_ERR_OUT_OF_MEMORY) {
    kiln_err_set(err, s, "%s", perr.msg);
    kiln_err_context(err, "reading cache entry %s", path);
    return s;
  }
  if (s == KILN_OK) s = kiln_cache_entry_parse(buf, n, view, &perr);
  if (s == KILN_OK && view->key != key) {
    s = KILN_ERR_CORRUPT;
    snprintf(perr.msg, sizeof perr.msg, "entry holds key %016llx", (unsigned long long)view->key);
  }
  if (s != KILN_OK) {
    kiln_log_printf(stderr, "kiln: cache entry %s is corrupt (%s); rebuilding\n", path, perr.msg);
    if (corrupt) *corrupt = 1;
    free(buf);
    memset(view, 0, sizeof *view);
    return KILN_OK;
  }
  if (view->src_len != src_len || memcmp(view->src, src, src_len) != 0) {
    /* Same key, different source: a hash collision (or a forced key in
     * tests). A miss; the caller's store replaces the entry. */
    free(buf);
    memset(view, 0, sizeof *view);
    return KILN_OK;
  }
  /* used now: the size limit removes the least recently used first */
  if (dc->cap > 0) (void)utimensat(dc->dirfd, name, NULL, AT_SYMLINK_NOFOLLOW);
  *out_buf = buf;
  return KILN_OK;
}

kiln_status kiln_diskcache_store(kiln_diskcache *dc, uint64_t key, const char *meta, const char *src,
                                 size_t src_len, const uint8_t *so, size_t so_len, kiln_err *err) {
  char name[32], path[PATH_MAX];
  kiln_diskcache_entry_name(key, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", dc->dir, name);
  kiln_status s = check_dir(dc, path, err);
  if (s != KILN_OK) return s;
  uint8_t *buf;
  size_t n;
  s = kiln_cache_entry_encode(key, meta, meta ? strlen(meta) : 0, src, src_len, so, so_len, &buf, &n, err);
  if (s != KILN_OK) return s;
  s = kiln_fs_write_atomic_at(dc->dirfd, dc->dir, name, buf, n, err);
  free(buf);
  /* every eighth of the limit written, one size check (by one thread) */
  if (s == KILN_OK && dc->cap > 0 &&
      __atomic_add_fetch(&dc->written, (int64_t)n, __ATOMIC_RELAXED) >= dc->cap / 8 &&
      __atomic_exchange_n(&dc->written, 0, __ATOMIC_RELAXED) >= dc->cap / 8)
    prune(dc);
  return s;
}

void kiln_diskcache_evict(kiln_diskcache *dc, uint64_t key) {
  if (!dc) return;
  char name[32];
  kiln_diskcache_entry_name(key, name, sizeof name);
  struct stat st;
  /* only a regular file of ours: anything else was never a kiln entry */
  if (fstatat(dc->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
    unlinkat(dc->dirfd, name, 0);
}
