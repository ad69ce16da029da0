#include "base/hash.h"

#include <pthread.h>
#include <string.h>

uint64_t kiln_hash_bytes(const void *data, size_t n, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = kiln_hash_combine(h, w);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i < n; i++, k++) tail |= (uint64_t)p[i] << (8 * k);
  return kiln_hash_combine(h, tail ^ ((uint64_t)n << 56));
}

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[i] = c;
  }
}

uint32_t kiln_crc32c(const void *data, size_t n) {
  pthread_once(&crc_once, crc_init);
  const unsigned char *p = data;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}
