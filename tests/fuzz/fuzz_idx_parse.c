/* libFuzzer harness. Property: for any bytes, the IDX parser
 *   1. never reads outside the input and never crashes (ASan/UBSan), and
 *   2. accepts exactly the canonical files: an accepted input has rank
 *      1..KILN_MAX_RANK, its dims re-encode to the header bytes, and header
 *      plus numel data bytes is exactly the input size, with data pointing
 *      right after the header;
 *   3. a rejection is CORRUPT or UNSUPPORTED with a message naming the file.
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_idx_parse -max_total_time=60 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so any over-read hits ASan's redzone. */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  kiln_idx idx;
  kiln_err err = {0};
  kiln_status s = kiln_idx_parse_err(buf, size, "fuzz.idx", &idx, &err);
  if (s == KILN_OK) {
    size_t hl = 4 + 4 * (size_t)idx.rank;
    if (idx.rank < 1 || idx.rank > KILN_MAX_RANK || buf[3] != idx.rank || buf[2] != 0x08) abort();
    int64_t numel = 1;
    for (int i = 0; i < idx.rank; i++) {
      const uint8_t *p = buf + 4 + 4 * i;
      uint32_t d = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
      if (idx.dims[i] != (int64_t)d) abort();
      numel *= d;
    }
    if (numel != idx.numel || hl + (size_t)numel != size || idx.data != buf + hl) abort();
    /* Touch every data byte: must stay inside the input. */
    volatile unsigned sum = 0;
    for (int64_t i = 0; i < idx.numel; i++) sum += idx.data[i];
    (void)sum;
  } else if ((s != KILN_ERR_CORRUPT && s != KILN_ERR_UNSUPPORTED) || !strstr(err.msg, "fuzz.idx")) {
    abort();
  }
  free(buf);
  return 0;
}
