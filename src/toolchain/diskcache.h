/* The persistent kernel cache: one file per compiled object, under a
 * directory only the user can write. See docs/cache.md.
 *
 * An entry is a single file "<key as 16 hex digits>.kce" holding a fixed
 * header, a short human-readable description (compiler, flags, CPU
 * features), the exact C source and the shared object's bytes. One file
 * (instead of a .so plus a record beside it) means one atomic rename makes
 * an entry visible complete, and the record and the object can never come
 * from two different writers.
 *
 * Entry layout, integers little-endian:
 *   0  magic "KILNCACH"          8 bytes
 *   8  format version (1)        u32
 *   12 header crc32c             u32  (of bytes 0..63 with this field zero)
 *   16 key                       u64
 *   24 meta_len                  u64
 *   32 src_len                   u64
 *   40 so_len                    u64
 *   48 crc32c of meta            u32
 *   52 crc32c of source          u32
 *   56 crc32c of object          u32
 *   60 reserved, zero            4 bytes
 *   64 meta, source, object      exactly meta_len + src_len + so_len bytes
 *
 * A hit requires a well-formed entry, the requested key, and the stored
 * source equal byte for byte to the requested one: a 64-bit key collision
 * is a miss, never a wrong hit.
 *
 * Thread-safety: kiln_cache_entry_* are pure. A kiln_diskcache may be used
 * from several threads; it holds no mutable state after open. Several
 * processes may share one directory: writers never modify a visible file,
 * they rename complete new ones over it.
 */
#ifndef KILN_TOOLCHAIN_DISKCACHE_H
#define KILN_TOOLCHAIN_DISKCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define KILN_CACHE_ENTRY_MAGIC "KILNCACH"
#define KILN_CACHE_ENTRY_VERSION 1u
#define KILN_CACHE_ENTRY_HEADER 64u
#define KILN_CACHE_ENTRY_MAX_META 4096u
#define KILN_CACHE_ENTRY_MAX_BYTES (512u << 20) /* larger files are treated as corrupt */

/* A parsed entry; pointers borrow from the buffer given to the parser. */
typedef struct kiln_cache_entry_view {
  uint64_t key;
  const char *meta;
  size_t meta_len;
  const char *src;
  size_t src_len;
  const uint8_t *so;
  size_t so_len;
} kiln_cache_entry_view;

/* Validate and parse an entry held in memory. Never reads outside
 * buf[0..n). Errors: KILN_ERR_CORRUPT with the reason (bad magic,
 * unsupported version, header checksum, lengths that do not add up to the
 * file size, payload checksum). On error *out is zeroed. */
kiln_status kiln_cache_entry_parse(const uint8_t *buf, size_t n, kiln_cache_entry_view *out, kiln_err *err);

/* Serialize an entry into a new malloc'ed buffer (*out, caller frees).
 * Errors: KILN_ERR_INVALID_ARGUMENT (meta too long, too large),
 * KILN_ERR_OUT_OF_MEMORY. */
kiln_status kiln_cache_entry_encode(uint64_t key, const char *meta, size_t meta_len, const char *src,
                                    size_t src_len, const uint8_t *so, size_t so_len, uint8_t **out, size_t *out_n,
                                    kiln_err *err);

typedef struct kiln_diskcache kiln_diskcache;

/* Open (creating with mode 0700 if missing) the cache directory `dir`.
 * The directory must be owned by the effective user, not be a symlink and
 * not be writable by group/others. Stale temp files from crashed writers are
 * removed. Errors: KILN_ERR_UNSAFE ("refusing to use cache directory
 * <dir>: directory is writable by other users ..."), KILN_ERR_IO. */
kiln_status kiln_diskcache_open(const char *dir, kiln_diskcache **out, kiln_err *err);
/* Close; NULL is accepted. */
void kiln_diskcache_close(kiln_diskcache *dc);
/* The directory path given to open. Owned by dc. */
const char *kiln_diskcache_dir(const kiln_diskcache *dc);

/* Look up `key` for `src`. On a hit, *out_buf receives the whole entry
 * (caller frees) and *view points into it. On a miss (no entry, or an
 * entry for another source) *out_buf is NULL and KILN_OK is returned.
 * A corrupt entry is reported once on stderr ("kiln: cache entry <path> is
 * corrupt (<reason>); rebuilding"), *corrupt is set to 1 and it is a miss.
 * Before reading, the directory and the file are checked (fstat of the
 * opened descriptors, O_NOFOLLOW): owned by the user, not writable by
 * group/others, not symlinks; otherwise KILN_ERR_UNSAFE "refusing to load
 * <path>: <reason>". */
kiln_status kiln_diskcache_lookup(kiln_diskcache *dc, uint64_t key, const char *src, size_t src_len,
                                  uint8_t **out_buf, kiln_cache_entry_view *view, int *corrupt, kiln_err *err);

/* Store an entry atomically (temp file, fsync, rename, fsync directory),
 * replacing any entry with the same key. Errors: KILN_ERR_IO,
 * KILN_ERR_UNSAFE (the directory became unsafe). */
kiln_status kiln_diskcache_store(kiln_diskcache *dc, uint64_t key, const char *meta, const char *src,
                                 size_t src_len, const uint8_t *so, size_t so_len, kiln_err *err);

/* The file name of `key`'s entry ("<16 hex>.kce") into buf (>= 24 bytes). */
void kiln_diskcache_entry_name(uint64_t key, char *buf, size_t cap);

/* Remove the entry of key (a stored object that does not load): the next
 * build stores a fresh one. */
void kiln_diskcache_evict(kiln_diskcache *dc, uint64_t key);

#endif
