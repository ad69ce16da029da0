/* libFuzzer harness. Property: for any bytes as a model folder's
 * modules.json or its Pooling module's config.json (the first byte picks
 * which; the folder has a valid config.json and no model.safetensors),
 * kiln_bert_load
 *   1. never crashes or reads out of bounds (ASan/UBSan), whatever the JSON
 *      (unterminated strings, escapes, nesting, objects too long to keep);
 *   2. fails, with no model, and an error that names modules.json, the
 *      Pooling module's config.json, or model.safetensors (the modules were
 *      accepted: the missing file is the next error).
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_bert_modules -max_total_time=60 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/bert.h"
#include "kiln/kiln.h"

static char g_dir[64];

static void put(const char *name, const void *data, size_t size) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size) fwrite(data, 1, size, f);
  fclose(f);
}

static const char k_config[] =
    "{\"vocab_size\": 30, \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
    "\"intermediate_size\": 16, \"max_position_embeddings\": 16, \"type_vocab_size\": 2, \"layer_norm_eps\": 1e-12}";
static const char k_modules[] =
    "[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
    " {\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}]";
static const char k_pooling[] = "{\"word_embedding_dimension\": 8, \"pooling_mode_cls_token\": true}";

/* the folder goes when the fuzzer exits (libFuzzer ends with exit()) */
static void remove_dir(void) {
  static const char *const names[3] = {"config.json", "modules.json", "1_Pooling/config.json"};
  char path[160];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/1_Pooling", g_dir);
  rmdir(path);
  rmdir(g_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln-fuzz-bertmod-XXXXXX");
    if (!mkdtemp(g_dir) || kiln_init(NULL) != KILN_OK) abort();
    atexit(remove_dir);
    char sub[96];
    snprintf(sub, sizeof sub, "%s/1_Pooling", g_dir);
    if (mkdir(sub, 0700) != 0) abort();
    put("config.json", k_config, sizeof k_config - 1);
  }
  if (size < 1) return 0;
  int pooling = data[0] & 1;
  put("modules.json", pooling ? k_modules : (const char *)data + 1, pooling ? sizeof k_modules - 1 : size - 1);
  put("1_Pooling/config.json", pooling ? (const char *)data + 1 : k_pooling, pooling ? size - 1 : sizeof k_pooling - 1);
  kiln_bert *m = NULL;
  kiln_status s = kiln_bert_load(g_dir, &m);
  if (s == KILN_OK || m) abort(); /* there is no model.safetensors */
  const char *e = kiln_last_error();
  if (!strstr(e, "modules.json") && !strstr(e, "config.json") && !strstr(e, "model.safetensors")) {
    fprintf(stderr, "error names no file: %s\n", e);
    abort();
  }
  kiln_clear_error();
  return 0;
}
