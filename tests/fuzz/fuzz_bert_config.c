/* libFuzzer harness. Property: for any bytes as a model folder's config.json
 * (and no model.safetensors), kiln_bert_load
 *   1. never crashes or reads out of bounds (ASan/UBSan), whatever the JSON
 *      (unterminated strings, escapes, nesting, numbers strtod rejects);
 *   2. fails, with no model, and an error that names config.json (the
 *      configuration is bad) or model.safetensors (it was accepted: the
 *      missing file is the next error).
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_bert_config -max_total_time=60 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/bert.h"
#include "kiln/kiln.h"

static char g_dir[64];

/* the folder goes when the fuzzer exits (libFuzzer ends with exit()) */
static void remove_dir(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/config.json", g_dir);
  unlink(path);
  rmdir(g_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln-fuzz-bert-XXXXXX");
    if (!mkdtemp(g_dir) || kiln_init(NULL) != KILN_OK) abort();
    atexit(remove_dir);
  }
  char path[128];
  snprintf(path, sizeof path, "%s/config.json", g_dir);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size) fwrite(data, 1, size, f);
  fclose(f);
  kiln_bert *m = NULL;
  kiln_status s = kiln_bert_load(g_dir, &m);
  if (s == KILN_OK || m) abort(); /* there is no model.safetensors */
  const char *e = kiln_last_error();
  if (!strstr(e, "config.json") && !strstr(e, "model.safetensors")) {
    fprintf(stderr, "error names neither file: %s\n", e);
    abort();
  }
  kiln_clear_error();
  return 0;
}
