/* Fast 64-bit hashing for structural graph hashes and cache keys. */
#ifndef KILN_BASE_HASH_H
#define KILN_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t kiln_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
/* Order-dependent combination. */
static inline uint64_t kiln_hash_combine(uint64_t h, uint64_t v) {
  return kiln_mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}
/* Hash of a byte string (FNV-1a folded through the mixer). */
uint64_t kiln_hash_bytes(const void *data, size_t n, uint64_t seed);

/* CRC-32C style checksum for on-disk records (software, table-driven). */
uint32_t kiln_crc32c(const void *data, size_t n);

#endif
