/* libFuzzer harness. Property: for any bytes, the cache entry parser
 *   1. never reads outside the input and never crashes (ASan/UBSan), and
 *   2. accepts only canonical entries: an accepted input re-encodes from
 *      its parsed view to exactly the same bytes, and its pieces lie inside
 *      the input, in order.
 * So a damaged file on disk is either rejected or is byte-for-byte a valid
 * entry (which the cache then still compares against the source).
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_cache_entry -max_total_time=60 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toolchain/diskcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so any over-read hits ASan's redzone. */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  kiln_cache_entry_view v;
  kiln_err err = {0};
  if (kiln_cache_entry_parse(buf, size, &v, &err) == KILN_OK) {
    const uint8_t *end = buf + size;
    if (!((const uint8_t *)v.meta >= buf && (const uint8_t *)v.src >= (const uint8_t *)v.meta + v.meta_len &&
          v.so >= (const uint8_t *)v.src + v.src_len && v.so + v.so_len == end))
      abort();
    uint8_t *again = NULL;
    size_t n = 0;
    if (kiln_cache_entry_encode(v.key, v.meta, v.meta_len, v.src, v.src_len, v.so, v.so_len, &again, &n, &err) !=
            KILN_OK ||
        n != size || memcmp(again, buf, size) != 0)
      abort();
    free(again);
  } else if (err.code != KILN_ERR_CORRUPT || !err.msg[0]) {
    abort(); /* rejection must say why, as CORRUPT */
  }
  free(buf);
  return 0;
}
