/* libFuzzer harness. Property: for any sequence of op-builder calls with any
 * sizes and attributes (huge, negative, zero, overflowing), kiln's shape
 * rules
 *   1. never crash or hit undefined behaviour (ASan/UBSan): every overflow
 *      of element count or bytes is an INVALID_ARGUMENT with a message;
 *   2. give every valid tensor a shape whose sizes are >= 0 and whose
 *      non-zero sizes' product times the dtype size fits in int64;
 *   3. give a poisoned tensor (with an error recorded) instead of a shape
 *      that breaks rule 2.
 * Small tensors (at most 4096 elements) are also computed, on the ref
 * backend, so the rules meet the executor; big ones are only traced.
 *
 * The input is read as a byte stream: each op takes an opcode byte and the
 * operands and attributes it needs from the bytes that follow (sizes drawn
 * from a table of edge values or raw 64-bit words).
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_shape_rules -max_total_time=60 tests/fuzz/corpus/fuzz_shape_rules */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

typedef struct stream {
  const uint8_t *p;
  size_t n;
} stream;

static uint8_t byte(stream *s) {
  if (!s->n) return 0;
  s->n--;
  return *s->p++;
}

static int64_t word(stream *s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | byte(s);
  return (int64_t)v;
}

/* A size: mostly small, sometimes an edge value, sometimes raw. */
static int64_t size_of(stream *s) {
  static const int64_t edge[] = {0,          1,          2,          3,          -1,        INT64_MAX,
                                 INT64_MIN,  1LL << 31,  1LL << 32,  1LL << 62,  (1LL << 62) + 1, 1LL << 40,
                                 INT32_MAX,  -(1LL << 40)};
  uint8_t b = byte(s);
  if (b < 160) return b % 5;
  if (b < 240) return edge[b % (sizeof edge / sizeof edge[0])];
  return word(s);
}

static int valid_shape(kiln_tensor t) {
  int64_t sh[KILN_MAX_RANK];
  int r = kiln_shape(t, sh);
  if (r < 0) return 1; /* poisoned: fine */
  uint64_t bytes = kiln_dtype_size(kiln_dtype_of(t));
  for (int i = 0; i < r; i++) {
    if (sh[i] < 0) return 0;
    if (sh[i] && __builtin_mul_overflow(bytes, (uint64_t)sh[i], &bytes)) return 0;
  }
  return bytes <= (uint64_t)INT64_MAX;
}

enum { POOL = 8 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Nearly every input is a new graph, and the runtime keeps each traced
   * graph it compiled (a few KB; docs/environment.md,
   * KILN_GRAPH_CACHE_SIZE): a fresh runtime every 1000 inputs keeps a long
   * fuzzing run inside libFuzzer's memory limit. */
  static unsigned calls;
  if (calls++ % 1000 == 0) {
    kiln_shutdown();
    kiln_options o = {0};
    o.backend = "ref";
    if (kiln_init(&o) != KILN_OK) abort();
  }
  stream s = {data, size};
  kiln_tensor pool[POOL];
  int64_t one = 1;
  float v = 1.0f;
  for (int i = 0; i < POOL; i++) pool[i] = kiln_from_host(&v, KILN_F32, 1, &one);
  int big = 0;
  for (int step = 0; step < 24 && s.n; step++) {
    uint8_t op = byte(&s);
    kiln_tensor x = pool[byte(&s) % POOL], y = pool[byte(&s) % POOL], out = {0, 0};
    int rank = byte(&s) % (KILN_MAX_RANK + 2); /* KILN_MAX_RANK + 1: too many */
    int64_t shape[KILN_MAX_RANK + 1], lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
    for (int i = 0; i < rank; i++) shape[i] = size_of(&s);
    int xr = kiln_rank(x) > 0 ? kiln_rank(x) : 0;
    for (int i = 0; i < KILN_MAX_RANK; i++) {
      lo[i] = size_of(&s);
      hi[i] = size_of(&s);
    }
    int axis = (int)(int8_t)byte(&s) % 4;
    int axes[2] = {axis, (int)(int8_t)byte(&s) % 4};
    kiln_dtype dt = (kiln_dtype)(byte(&s) % KILN_DTYPE_COUNT);
    switch (op % 16) {
      case 0: out = kiln_zeros(dt, rank, shape); break;
      case 1: out = kiln_reshape(x, rank, shape); break;
      case 2: out = kiln_expand(x, rank, shape); break;
      case 3: out = kiln_slice(x, axis, size_of(&s), size_of(&s), size_of(&s)); break;
      case 4: out = kiln_pad(x, xr ? lo : NULL, xr ? hi : NULL, 0.0); break;
      case 5: out = kiln_concat(2, ((kiln_tensor[]){x, y}), axis); break;
      case 6: out = kiln_matmul(x, y); break;
      case 7: out = kiln_one_hot(kiln_cast(x, KILN_I64), size_of(&s), dt); break;
      case 8: out = kiln_sum(x, byte(&s) % 3, axes, byte(&s) & 1); break;
      case 9: out = kiln_max(x, byte(&s) % 3, axes, byte(&s) & 1); break;
      case 10: out = kiln_add(x, y); break;
      case 11: out = kiln_permute(x, ((int[]){axes[0] & 1, axes[1] & 1, 2, 3, 4, 5, 6, 7})); break;
      case 12: out = kiln_index_select(x, axis, kiln_cast(y, KILN_I64)); break;
      case 13: out = kiln_full(dt, rank, shape, 2.0); break;
      case 14: out = kiln_transpose(x, axes[0], axes[1]); break;
      default: out = kiln_arange(KILN_F32, 0.0, (double)size_of(&s), 1.0); break;
    }
    if (!valid_shape(out)) abort();
    if (kiln_is_valid(out)) {
      if (kiln_numel(out) > 4096) big = 1; /* a read could compute it: too slow */
      pool[byte(&s) % POOL] = out;
    }
    kiln_clear_error();
  }
  /* compute what is small: the rules meet the executor */
  for (int i = 0; i < POOL && !big; i++) {
    int64_t n = kiln_numel(pool[i]);
    if (!kiln_is_valid(pool[i]) || n < 0 || n > 4096) continue;
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    if (buf) kiln_to_host(pool[i], buf, (size_t)n * kiln_dtype_size(kiln_dtype_of(pool[i])));
    free(buf);
    kiln_clear_error();
  }
  kiln_mark_step();
  kiln_clear_error();
  return 0;
}
