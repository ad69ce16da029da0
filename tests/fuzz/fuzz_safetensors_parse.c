/* libFuzzer harness for the safetensors parser. Property: for any bytes
 * (taken as a whole file image), kiln_st_image_parse
 *   1. never reads outside the input and never crashes (ASan/UBSan);
 *   2. rejects with KILN_ERR_CORRUPT or KILN_ERR_UNSUPPORTED and a message,
 *      or accepts a header whose entries lie inside the data section, tile
 *      it exactly, have byte sizes equal to numel × dtype size, and unique
 *      names that lookup finds;
 *   3. for an accepted header, encoding it and parsing the result gives the
 *      same entries and metadata (the writer and the reader agree).
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_WERROR=OFF
 *        [-DKILN_SANITIZE=address,undefined]
 * Run:   build/bin/fuzz/fuzz_safetensors_parse -max_total_time=120 [corpus-dir]
 * Seeds: tests/data/reference.safetensors is a good starting corpus. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/st_format.h"

static void check_same(const kiln_st_header *a, const kiln_st_header *b) {
  if (a->n != b->n || a->n_meta != b->n_meta) abort();
  for (int i = 0; i < a->n; i++) {
    const kiln_st_entry *x = &a->entries[i], *y = &b->entries[i];
    if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->rank != y->rank || x->begin != y->begin ||
        x->end != y->end || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->rank))
      abort();
  }
  for (int i = 0; i < 2 * a->n_meta; i++)
    if (strcmp(a->meta[i], b->meta[i])) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so any over-read hits ASan's redzone. */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  kiln_st_header h;
  uint64_t start;
  kiln_err err = {0};
  kiln_status s = kiln_st_image_parse(buf, size, &h, &start, &err);
  if (s != KILN_OK) {
    if ((s != KILN_ERR_CORRUPT && s != KILN_ERR_UNSUPPORTED) || !err.msg[0]) abort();
    free(buf);
    return 0;
  }
  uint64_t data_len = size - start, covered = 0;
  for (int i = 0; i < h.n; i++) {
    const kiln_st_entry *e = &h.entries[i];
    if (e->begin > e->end || e->end > data_len || e->rank < 0 || e->rank > 8) abort();
    uint64_t numel = 1;
    for (int d = 0; d < e->rank; d++) numel *= (uint64_t)e->shape[d];
    if (numel * kiln_st_dt_bytes(e->dtype) != e->end - e->begin) abort();
    covered += e->end - e->begin;
    if (kiln_st_header_find(&h, e->name) != i) abort(); /* unique names */
  }
  if (covered != data_len) abort(); /* tiled exactly: no holes, no overlaps */
  char *json = NULL;
  size_t jn = 0;
  if (kiln_st_header_encode(&h, &json, &jn, &err) != KILN_OK) abort();
  kiln_st_header again;
  if (kiln_st_header_parse(json, jn, data_len, &again, &err) != KILN_OK) abort();
  check_same(&h, &again);
  kiln_st_header_free(&again);
  kiln_st_header_free(&h);
  free(json);
  free(buf);
  return 0;
}
