/* libFuzzer harness. Property: for any bytes, the graph text parser
 * (src/debug/graphtext.h, read by `kiln graph diff`)
 *   1. never reads outside the input and never crashes (ASan/UBSan), and
 *      allocates in proportion to the input (node count capped);
 *   2. accepts only graphs that pass kiln_graph_verify, and an accepted
 *      graph writes back to text that parses to an equal graph (same
 *      structure, same source locations);
 *   3. a rejection is CORRUPT (or OUT_OF_MEMORY) with a message naming the
 *      file;
 *   4. the graph diff of an accepted graph against itself is empty (with
 *      its symbolic sizes, "# dynamic:" lines, too) and against a fixed
 *      reference graph does not crash.
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_graph_text -max_total_time=60 tests/fuzz/corpus/fuzz_graph_text */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debug/graphdiff.h"
#include "debug/graphtext.h"

static const char reference[] =
    "%0 = leaf f32[4,8] input=0 @ ref.c:1\n"
    "%1 = exp f32[4,8] %0 @ ref.c:2\n"
    "%2 = reduce_sum f32[4,1] %1 axes=[1] @ ref.c:3\n"
    "inputs: %0\noutputs: %2\n";

static int same_locs(const kiln_graph *a, const kiln_graph *b) {
  for (int32_t i = 0; i < a->n_nodes; i++) {
    kiln_loc x = a->nodes[i].loc, y = b->nodes[i].loc;
    if (x.line != y.line || (!x.file) != (!y.file) || (x.file && strcmp(x.file, y.file))) return 0;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so any over-read hits ASan's redzone. */
  char *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);
  kiln_graphtext t;
  kiln_err err = {0};
  kiln_status s = kiln_graphtext_parse(buf, size, "fuzz.txt", &t, &err);
  if (s == KILN_OK) {
    char msg[256];
    if (!t.g || kiln_graph_verify(t.g, msg, sizeof msg)) abort();
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f || kiln_graphtext_write(t.g, t.key, t.cause, f)) abort();
    fclose(f);
    kiln_graphtext u;
    if (kiln_graphtext_parse(text, len, "again.txt", &u, &err) != KILN_OK) abort();
    if (!kiln_graph_equal(t.g, u.g) || !same_locs(t.g, u.g) || u.key != t.key) abort();
    char diff[4096] = "";
    if (kiln_graphdiff_format(t.g, u.g, diff, sizeof diff) != 0 || kiln_graphdiff_distance(t.g, u.g) != 0) abort();
    kiln_graphtext ref;
    if (kiln_graphtext_parse(reference, sizeof reference - 1, "ref.txt", &ref, &err) != KILN_OK) abort();
    kiln_graphdiff_format(ref.g, t.g, diff, sizeof diff);
    const kiln_diff_syms sy = {(const char *const *)t.sym_shape, (const char *const *)t.sym_shape,
                               (const char *const *)t.sym_def,   (const char *const *)t.sym_def,
                               t.n_sym_def,                      t.n_sym_def};
    diff[0] = 0;
    if (kiln_graphdiff_format_syms(t.g, t.g, &sy, diff, sizeof diff, NULL) != 0) abort();
    const kiln_diff_syms one = {NULL, (const char *const *)t.sym_shape, NULL, (const char *const *)t.sym_def, 0,
                                t.n_sym_def};
    kiln_graphdiff_format_syms(ref.g, t.g, &one, diff, sizeof diff, NULL);
    (void)kiln_graphdiff_distance(t.g, ref.g);
    const kiln_graph *h[3] = {ref.g, t.g, u.g};
    kiln_graphdiff_classify(h, 3, diff, sizeof diff);
    kiln_graphtext_clear(&ref);
    kiln_graphtext_clear(&u);
    kiln_graphtext_clear(&t);
    free(text);
  } else if ((s != KILN_ERR_CORRUPT && s != KILN_ERR_OUT_OF_MEMORY) || !strstr(err.msg, "fuzz.txt")) {
    abort();
  }
  free(buf);
  return 0;
}
