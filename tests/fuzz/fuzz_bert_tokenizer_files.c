/* libFuzzer harness. Property: for any bytes as one of a model folder's
 * tokenizer files (the first byte picks which: tokenizer.json,
 * tokenizer_config.json, special_tokens_map.json, added_tokens.json; the
 * others absent), kiln_bert_text_options
 *   1. never crashes or reads out of bounds (ASan/UBSan), whatever the JSON
 *      (unterminated strings, escapes, nesting, objects too long to keep,
 *      tokens given as strings, objects or numbers);
 *   2. succeeds, or fails with an error naming that file.
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_bert_tokenizer_files -max_total_time=60 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/bert.h"
#include "kiln/kiln.h"
#include "kiln/text.h"

static char g_dir[64];
static const char *const k_names[4] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                       "added_tokens.json"};

/* the folder goes when the fuzzer exits (libFuzzer ends with exit()) */
static void remove_dir(void) {
  char path[160];
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", g_dir, k_names[i]);
    unlink(path);
  }
  rmdir(g_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln-fuzz-berttok-XXXXXX");
    if (!mkdtemp(g_dir) || kiln_init(NULL) != KILN_OK) abort();
    atexit(remove_dir);
  }
  if (!size) return 0;
  const char *name = k_names[data[0] % 4];
  char path[160];
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", g_dir, k_names[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size > 1) fwrite(data + 1, 1, size - 1, f);
  fclose(f);
  kiln_tokenizer_options o;
  int64_t len = 0;
  kiln_status s = kiln_bert_text_options(g_dir, &o, &len);
  if (s != KILN_OK) {
    const char *e = kiln_last_error();
    if (!strstr(e, name)) {
      fprintf(stderr, "error does not name %s: %s\n", name, e);
      abort();
    }
  } else if (len < 2) {
    fprintf(stderr, "accepted with a maximum length of %lld\n", (long long)len);
    abort();
  }
  kiln_clear_error();
  return 0;
}
