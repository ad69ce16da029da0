/* libFuzzer harness. Property: any sequence of calls to kiln's public
 * non-op functions (runtime, handles, transfers, autograd, nn layers,
 * optimizers, datasets and loaders, safetensors, tokenizer, debug,
 * profiler, summaries) with any handles — live, null, forged, released,
 * from before a kiln_shutdown, poisoned, another object's parameter — and
 * any values (NULL, negative, huge, out-of-range enums)
 *   1. never crashes, leaks, hangs or hits undefined behaviour (ASan/UBSan);
 *   2. leaves a non-empty message whenever the sticky status is an error;
 *   3. leaves kiln working: after the sequence, with the error cleared,
 *      sum([1,2,3,4]^2) is 30.
 * Objects made by a sequence are destroyed at its end (destroying twice is
 * not required to be safe, so the harness never does).
 *
 * The input is a byte stream: an opcode byte picks the call, the bytes
 * after it its arguments (a handle from the pool, a size from a table of
 * edge values, a pointer that may be NULL).
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_api_misuse -max_total_time=60 tests/fuzz/corpus/fuzz_api_misuse */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/bert.h"
#include "kiln/kiln.h"
#include "kiln/text.h"

typedef struct stream {
  const uint8_t *p;
  size_t n;
} stream;

static uint8_t byte(stream *s) {
  if (!s->n) return 0;
  s->n--;
  return *s->p++;
}

static int64_t edge(stream *s) {
  static const int64_t e[] = {0, 1, 2, 3, 4, -1, -2, 7, 8, 9, 100, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN,
                              1LL << 31, 1LL << 40, 16, 17, 32, 33};
  uint8_t b = byte(s);
  return b < 128 ? b % 6 : e[b % (sizeof e / sizeof e[0])];
}
static int small_int(stream *s) {
  int64_t v = edge(s);
  return v > INT32_MAX || v < INT32_MIN ? (int)(v & 0xff) : (int)v;
}
static double dval(stream *s) {
  static const double d[] = {0.0, 0.1, 1.0, -1.0, 0.5, 1.5, 1e-8, 1e30, -1e30, NAN, INFINITY, -INFINITY, 0.999};
  return d[byte(s) % (sizeof d / sizeof d[0])];
}

/* Sizes that are valid but huge (a 2^31 x 16 weight, a batch of 2^24 rows
 * of 2^24 tokens) make kiln allocate what the program asked for: not a
 * misuse, and past the fuzzer's memory limit. Sizes are small, or so large
 * that they overflow (an error), or negative. */
static int64_t tame(int64_t v, int64_t max) { return v > max && v <= ((int64_t)1 << 31) ? 2 : v; }
static void layer_sizes(stream *s, int *a, int *b) {
  *a = small_int(s) % 9;
  *b = small_int(s) % 9;
  if (byte(s) > 240) *a = *b = INT32_MAX; /* a weight of 2^62 elements: bytes overflow int64 */
}

#define POOL 8
static kiln_tensor pool[POOL];
static char g_dir[128], g_vocab[160], g_st[160];

static kiln_tensor pick(stream *s) { return pool[byte(s) % POOL]; }
static void put(stream *s, kiln_tensor t) { pool[byte(s) % POOL] = t; }

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}
static void rm_dir(void) { nftw(g_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS); }

static void setup_files(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/kiln-fuzz-misuse-%d", (int)getpid());
  (void)!mkdir(g_dir, 0700);
  atexit(rm_dir); /* traces and event files the sequences wrote */
  snprintf(g_vocab, sizeof g_vocab, "%s/vocab.txt", g_dir);
  FILE *f = fopen(g_vocab, "w");
  if (!f) abort();
  fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\n", f);
  fclose(f);
  snprintf(g_st, sizeof g_st, "%s/w.safetensors", g_dir);
}

typedef struct objs {
  kiln_linear *lin[2];
  kiln_optim *opt;
  kiln_dataset *ds;
  kiln_batcher *bat;
  kiln_loader *ld;
  kiln_bucketer *bk;
  kiln_tokenizer *tok;
  kiln_st_file *st;
  kiln_summary_writer *sw;
  int64_t batch_size; /* of bat: the harness sizes kiln_batcher_fill's buffers */
} objs;

static void destroy_all(objs *o) {
  kiln_linear_destroy(o->lin[0]);
  kiln_linear_destroy(o->lin[1]);
  kiln_optim_destroy(o->opt);
  kiln_loader_destroy(o->ld);
  kiln_batcher_destroy(o->bat);
  kiln_dataset_destroy(o->ds);
  kiln_bucketer_destroy(o->bk);
  kiln_tokenizer_destroy(o->tok);
  kiln_st_file_destroy(o->st);
  kiln_summary_writer_destroy(o->sw);
  memset(o, 0, sizeof *o);
}

/* Host buffers kiln reads: a program's buffers must hold what its sizes
 * say (kiln cannot check that), so the harness passes them only then. */
#define HOST_CAP 4096
static float k_feats[HOST_CAP];
static int64_t k_labels[HOST_CAP];

/* The element count of shape[0..r), or -1 beyond HOST_CAP; 0 when a size
 * is negative (kiln must refuse it before reading anything). */
static int64_t host_count(int r, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < r; i++) {
    if (shape[i] < 0) return 0;
    if (shape[i] && n > HOST_CAP / shape[i]) return -1;
    n *= shape[i];
  }
  return n;
}

static void one_call(stream *s, objs *o) {
  uint8_t op = byte(s) % 45;
  float buf[64];
  int64_t shape[KILN_MAX_RANK + 2];
  for (int i = 0; i < KILN_MAX_RANK + 2; i++) shape[i] = edge(s) & 3 ? (edge(s) & 3) + 1 : edge(s);
  switch (op) {
    case 0: { /* from_host: any dtype, rank, shape, data NULL or a 256-byte buffer */
      memset(buf, 0, sizeof buf);
      int r = small_int(s) % (KILN_MAX_RANK + 3);
      int64_t n = 1;
      for (int i = 0; i < r && i < KILN_MAX_RANK; i++) n = shape[i] > 0 && n <= 64 / shape[i] ? n * shape[i] : 65;
      put(s, kiln_from_host(n <= 8 && byte(s) & 1 ? buf : NULL, (kiln_dtype)(small_int(s) % 12 - 1), r, shape));
      break;
    }
    case 1: put(s, kiln_keep(pick(s))); break;
    case 2: kiln_release(pick(s)); break;
    case 3: {
      size_t bytes = (size_t)(byte(s) % 80);
      (void)kiln_to_host(pick(s), byte(s) & 1 ? buf : NULL, bytes);
      break;
    }
    case 4: (void)kiln_item_f64(pick(s)); break;
    case 5: (void)kiln_item_i64(pick(s)); break;
    case 6: put(s, kiln_dynamic(pick(s), small_int(s))); break;
    case 7: put(s, kiln_dynamic_bounded(pick(s), small_int(s), edge(s))); break;
    case 8: kiln_assign(pick(s), pick(s)); break;
    case 9: (void)kiln_mark_step(); break;
    case 10: (void)kiln_wait(); break;
    case 11: kiln_requires_grad(pick(s)); break;
    case 12: (void)kiln_backward(pick(s)); break;
    case 13: (void)kiln_backward_with(pick(s), pick(s)); break;
    case 14: put(s, kiln_grad(pick(s))); break;
    case 15: kiln_zero_grad(pick(s)); break;
    case 16: {
      int i = byte(s) & 1;
      int in, out;
      layer_sizes(s, &in, &out);
      if (!o->lin[i]) (void)kiln_linear_create(in, out, byte(s) & 1, 1, &o->lin[i]);
      else put(s, kiln_linear_forward(o->lin[i], pick(s)));
      break;
    }
    case 17: {
      if (o->opt) break;
      kiln_tensor ps[3] = {pick(s), pick(s), pick(s)};
      if (o->lin[0] && byte(s) & 1) ps[0] = o->lin[0]->weight;
      int n = small_int(s) % 4;
      if (byte(s) & 1) {
        kiln_sgd_opts so = {.lr = dval(s), .momentum = dval(s), .nesterov = byte(s) & 1};
        (void)kiln_optim_create_sgd(n, byte(s) & 3 ? ps : NULL, byte(s) & 3 ? &so : NULL, &o->opt);
      } else {
        kiln_adamw_opts ao = {.lr = dval(s), .beta1 = dval(s), .beta2 = dval(s), .eps = dval(s)};
        (void)kiln_optim_create_adamw(n, byte(s) & 3 ? ps : NULL, byte(s) & 3 ? &ao : NULL, &o->opt);
      }
      break;
    }
    case 18: (void)kiln_optim_step(o->opt); break;
    case 19: {
      kiln_tensor ps[4] = {pick(s), pick(s), pick(s), pick(s)}, gs[4] = {pick(s), pick(s), pick(s), pick(s)};
      int n = small_int(s); /* n > 4 is refused: the optimizer has at most 3 */
      (void)kiln_optim_step_tensors(o->opt, n, byte(s) & 3 ? ps : NULL, byte(s) & 3 ? gs : NULL);
      break;
    }
    case 20: kiln_optim_zero_grad(o->opt); kiln_optim_set_lr(o->opt, dval(s)); break;
    case 21:
      (void)kiln_optim_set_param_step_count(o->opt, small_int(s), edge(s));
      (void)kiln_optim_param_step_count(o->opt, small_int(s));
      (void)kiln_optim_state(o->opt, small_int(s), NULL, NULL, small_int(s));
      break;
    case 22: {
      kiln_tensor out[2];
      kiln_tensor gs[2] = {pick(s), pick(s)};
      put(s, kiln_clip_grad_norm(small_int(s) % 3, byte(s) & 3 ? gs : NULL, byte(s) & 3 ? out : NULL, dval(s)));
      break;
    }
    case 23: {
      if (o->ds) break;
      int64_t sh[KILN_MAX_RANK + 2];
      for (int i = 0; i < KILN_MAX_RANK + 2; i++) sh[i] = edge(s);
      if (byte(s) & 1) sh[0] = 4, sh[1] = 2;
      int r = small_int(s) % 11 - 1; /* -1..9 */
      int fits = r < 1 || r > KILN_MAX_RANK || (host_count(r, sh) >= 0 && sh[0] <= HOST_CAP);
      (void)kiln_dataset_create_from_host(fits && byte(s) & 7 ? k_feats : NULL, r, sh,
                                          fits && byte(s) & 7 ? k_labels : NULL, &o->ds);
      break;
    }
    case 24: {
      kiln_batch_options bo = {.batch_size = tame(edge(s), 64), .shuffle = byte(s) & 1, .drop_last = byte(s) & 1,
                               .shard_count = small_int(s), .shard_rank = small_int(s), .prefetch = small_int(s)};
      if (!o->bat && kiln_batcher_create(o->ds, byte(s) & 7 ? &bo : NULL, &o->bat) == KILN_OK)
        o->batch_size = bo.batch_size;
      else if (!o->ld) (void)kiln_loader_create(o->ds, &bo, &o->ld);
      break;
    }
    case 25: {
      kiln_batch b;
      if (byte(s) & 1) (void)kiln_batcher_next(o->bat, byte(s) & 7 ? &b : NULL);
      else (void)kiln_loader_next(o->ld, byte(s) & 7 ? &b : NULL);
      break;
    }
    case 26: {
      static float x[HOST_CAP], mask[HOST_CAP];
      static int64_t y[HOST_CAP];
      int64_t e = edge(s), i = edge(s), ex[KILN_MAX_RANK];
      int r = kiln_dataset_example_shape(o->ds, ex);
      int64_t per = r >= 0 ? host_count(r, ex) : -1;
      if (o->bat && per > 0 && o->batch_size > 0 && o->batch_size <= HOST_CAP / per)
        (void)kiln_batcher_fill(o->bat, e, i, byte(s) & 7 ? x : NULL, y, mask);
      break;
    }
    case 27: {
      if (o->bk) break;
      static const int64_t s0[3] = {5, 6, 7}, s1[5] = {5, 6, 7, 5, 6};
      const int64_t *seqs[2] = {s0, s1};
      int64_t lens[2] = {edge(s), edge(s)}, bounds[KILN_MAX_BUCKETS + 8];
      for (int i = 0; i < KILN_MAX_BUCKETS + 8; i++) bounds[i] = i < 3 ? tame(edge(s), 64) : 8 * i + (byte(s) & 1);
      if (byte(s) & 1) lens[0] = 3, lens[1] = 5, bounds[0] = 4, bounds[1] = 8, bounds[2] = 16;
      kiln_bucket_options bo = {.boundaries = byte(s) & 7 ? bounds : NULL, .n_boundaries = small_int(s),
                                .batch_size = tame(edge(s), 64), .truncate = byte(s) & 1, .shuffle = byte(s) & 1,
                                .exact_length = byte(s) & 1};
      int fits = lens[0] <= 3 && lens[1] <= 5; /* the data holds what lens says */
      if (bo.n_boundaries > KILN_MAX_BUCKETS + 8) bo.n_boundaries = KILN_MAX_BUCKETS + 8; /* what bounds holds */
      (void)kiln_bucketer_create(small_int(s) % 3, fits && byte(s) & 7 ? seqs : NULL, lens, &bo, &o->bk);
      break;
    }
    case 28: {
      kiln_seq_batch sb;
      kiln_bucket_stats st;
      (void)kiln_bucketer_next(o->bk, byte(s) & 7 ? &sb : NULL);
      kiln_bucketer_stats(o->bk, byte(s) & 7 ? &st : NULL);
      break;
    }
    case 29: {
      if (!o->tok) {
        kiln_tokenizer_options to = {.lowercase = byte(s) & 1};
        (void)kiln_tokenizer_create(byte(s) & 7 ? g_vocab : NULL, &to, &o->tok);
        break;
      }
      char text[32];
      size_t len = byte(s) % sizeof text;
      for (size_t i = 0; i < len; i++) text[i] = (char)byte(s);
      int64_t ids[16], n;
      (void)kiln_tokenizer_encode(o->tok, byte(s) & 7 ? text : NULL, len, edge(s), byte(s) & 7 ? ids : NULL,
                                  edge(s) & 15, byte(s) & 7 ? &n : NULL);
      (void)kiln_tokenizer_token(o->tok, edge(s));
      break;
    }
    case 30: {
      const char *names[2] = {"a", byte(s) & 3 ? "b" : (byte(s) & 1 ? NULL : "a")};
      kiln_tensor ts[2] = {pick(s), pick(s)};
      (void)kiln_save_safetensors(byte(s) & 7 ? g_st : NULL, small_int(s) % 3, byte(s) & 7 ? names : NULL,
                                  byte(s) & 7 ? ts : NULL, NULL);
      break;
    }
    case 31: {
      if (!o->st) {
        (void)kiln_st_file_create(byte(s) & 7 ? g_st : NULL, &o->st);
        break;
      }
      const char *nm = byte(s) & 3 ? (byte(s) & 1 ? "a" : "b") : NULL;
      int64_t sh[KILN_MAX_RANK];
      (void)kiln_st_shape(o->st, small_int(s), sh);
      if (byte(s) & 1) put(s, kiln_st_tensor(o->st, nm));
      else (void)kiln_st_load_into(o->st, nm, pick(s));
      break;
    }
    case 32: {
      if (!o->sw) (void)kiln_summary_writer_create(byte(s) & 7 ? g_dir : NULL, &o->sw);
      else (void)kiln_summary_scalar(o->sw, byte(s) & 7 ? "loss" : NULL, edge(s), dval(s));
      break;
    }
    case 33: {
      if (kiln_profiler_active()) {
        char out[16];
        (void)kiln_profiler_stop(byte(s) & 7 ? g_dir : NULL, byte(s) & 1 ? out : NULL, byte(s) % sizeof out);
      } else if (byte(s) & 1) {
        (void)kiln_profiler_start();
      } else {
        (void)kiln_profiler_stop(g_dir, NULL, 0); /* without a start */
      }
      break;
    }
    case 34:
      if (byte(s) & 1) kiln_trace_begin(byte(s) & 3 ? "x" : NULL);
      else kiln_trace_end();
      break;
    case 35: {
      kiln_tensor ts[2] = {pick(s), pick(s)};
      (void)kiln_compile(small_int(s) % 3, byte(s) & 7 ? ts : NULL);
      break;
    }
    case 36:
      if (byte(s) & 1) kiln_no_grad_begin();
      else kiln_no_grad_end();
      break;
    case 37:
      if (byte(s) & 1) kiln_autocast_begin((kiln_dtype)(small_int(s) % 12 - 1));
      else kiln_autocast_end();
      break;
    case 38: {
      const char *names[4];
      kiln_tensor ts[4];
      if (o->lin[0]) (void)kiln_module_params(&o->lin[0]->m, byte(s) & 1 ? names : NULL, ts, small_int(s) % 5);
      int64_t perm[8];
      int64_t n = edge(s);
      kiln_data_permutation(n, byte(s) & 1, 1, edge(s), n <= 8 && byte(s) & 3 ? perm : NULL);
      break;
    }
    case 40: {
      const char *names[4];
      kiln_site_stats st[2];
      (void)kiln_counter_names(byte(s) & 1 ? names : NULL, small_int(s) % 5);
      (void)kiln_metric_names(byte(s) & 1 ? names : NULL, small_int(s) % 5);
      (void)kiln_site_list(byte(s) & 1 ? st : NULL, small_int(s) % 3);
      (void)kiln_site_find(byte(s) & 1 ? "x.c" : NULL, small_int(s), (kiln_site_kind)(small_int(s) % 8 - 1),
                           byte(s) & 1 ? st : NULL);
      (void)kiln_site_kind_name((kiln_site_kind)small_int(s));
      kiln_counter_clear(byte(s) & 1 ? "MarkStep" : NULL);
      break;
    }
    case 41:
      switch (byte(s) % 4) {
        case 0: kiln_full_graph_begin(); break;
        case 1: kiln_full_graph_end(); break;
        case 2: (void)kiln_discard_step(); break;
        default: kiln_graph_tag(byte(s) & 1 ? "train" : NULL); break;
      }
      break;
    case 42:
      switch (byte(s) % 3) {
        case 0: put(s, kiln_all_reduce(pick(s), (kiln_reduce_op)(small_int(s) % 5 - 1))); break;
        case 1: put(s, kiln_broadcast(pick(s), small_int(s))); break;
        default: put(s, kiln_all_gather(pick(s), small_int(s))); break;
      }
      break;
    case 43: {
      kiln_tensor ps[2] = {pick(s), pick(s)};
      if (byte(s) & 1) (void)kiln_ddp_broadcast_params(small_int(s) % 3, byte(s) & 7 ? ps : NULL);
      else (void)kiln_ddp_all_reduce_grads(small_int(s) % 3, byte(s) & 7 ? ps : NULL, (size_t)edge(s));
      break;
    }
    case 44: {
      int i = small_int(s);
      (void)kiln_st_count(o->st);
      (void)kiln_st_name(o->st, i);
      (void)kiln_st_find(o->st, byte(s) & 1 ? "a" : NULL);
      (void)kiln_st_dtype_str(o->st, i);
      (void)kiln_st_dtype(o->st, i);
      (void)kiln_st_metadata(o->st, byte(s) & 1 ? "k" : NULL);
      (void)kiln_summary_flush(o->sw);
      (void)kiln_summary_path(o->sw);
      break;
    }
    case 39: { /* a fresh runtime (rare): every handle of the pool becomes stale */
      if (byte(s) < 240) break;
      destroy_all(o);
      kiln_shutdown();
      kiln_options ko = {.backend = "ref", .num_threads = small_int(s) % 3};
      if (kiln_init(&ko) != KILN_OK) {
        kiln_clear_error();
        kiln_options ok = {.backend = "ref"};
        if (kiln_init(&ok) != KILN_OK) abort();
      }
      break;
    }
  }
  if (kiln_last_status() != KILN_OK && !kiln_last_error()[0]) {
    fprintf(stderr, "op %d: status %s with an empty message\n", op, kiln_status_name(kiln_last_status()));
    abort();
  }
  if (byte(s) & 1) kiln_clear_error();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned calls;
  if (calls++ % 500 == 0) {
    if (!g_dir[0]) setup_files();
    kiln_shutdown();
    kiln_options ko = {.backend = "ref"};
    if (kiln_init(&ko) != KILN_OK) abort();
  }
  stream s = {data, size};
  objs o = {0};
  float v[4] = {1, 2, 3, 4};
  int64_t four = 4, neg = -1;
  pool[0] = (kiln_tensor){0, 0};
  pool[1] = (kiln_tensor){12345, 7};
  pool[2] = kiln_from_host(v, KILN_F32, 1, &four);
  pool[3] = kiln_keep(kiln_from_host(v, KILN_F32, 1, &four));
  pool[4] = kiln_full(KILN_F32, 1, &neg, 0.0); /* poisoned */
  pool[5] = kiln_keep(kiln_from_host(v, KILN_F32, 1, &four));
  kiln_release(pool[5]); /* released */
  pool[6] = kiln_sum(pool[2], 0, NULL, false);
  pool[7] = kiln_arange(KILN_I64, 0, 4, 1);
  kiln_clear_error();
  for (int step = 0; step < 32 && s.n; step++) one_call(&s, &o);
  destroy_all(&o);
  while (kiln_profiler_active()) (void)kiln_profiler_stop(g_dir, NULL, 0);
  for (int i = 0; i < 20; i++) kiln_full_graph_end();
  kiln_graph_tag(NULL);
  for (int i = 0; i < 20; i++) kiln_no_grad_end(); /* close what the sequence opened */
  for (int i = 0; i < 20; i++) kiln_autocast_end();
  for (int i = 0; i < 20; i++) kiln_trace_end();
  for (int i = 0; i < POOL; i++) kiln_release(pool[i]);
  kiln_clear_error();
  (void)kiln_mark_step();
  kiln_clear_error();
  /* property 3: kiln still works */
  kiln_tensor t = kiln_from_host(v, KILN_F32, 1, &four);
  double r = kiln_item_f64(kiln_sum(kiln_mul(t, t), 0, NULL, false));
  if (r != 30.0) {
    fprintf(stderr, "kiln broken after the sequence: %g (%s)\n", r, kiln_last_error());
    abort();
  }
  (void)kiln_mark_step();
  kiln_clear_error();
  return 0;
}
