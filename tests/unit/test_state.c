/* State across steps: what a result may depend on besides its inputs —
 * checkpoints of views, of lazy tensors and of tensors whose step is still
 * running; host memory handed to kiln; tensors that share a buffer while one
 * of them is updated in place (buffer donation) over several in-flight
 * steps; gradients accumulated over backward calls and steps; and
 * determinism: the same program gives the same bits from a cold compile, an
 * in-memory cache hit, a disk cache hit, with KILN_DEBUG and metrics on, and
 * (for kiln's own kernels: elementwise, reductions, the RNG) on 1 or 2
 * threads. Oracles: values by hand (written beside them), the tensor read
 * directly, and the other run bit for bit. */
#include <kiln/kiln.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kt.h"

static void start_opts(const kiln_options *o) {
  kiln_shutdown();
  kiln_clear_error();
  KT_CHECK(kiln_init(o) == KILN_OK);
}
static void start(void) { start_opts(NULL); }

static char path[256];

/* ───────────── checkpoints ───────────── */

/* A transpose, a strided slice, an expand, a 0-d, a zero-size tensor and a
 * lazy expression are saved as their logical values, in every dtype. */
KT_TEST(checkpoint_saves_logical_values) {
  start();
  snprintf(path, sizeof path, "/tmp/kiln_test_state_%d.safetensors", (int)getpid());
  for (int dt = 0; dt < KILN_DTYPE_COUNT; dt++) {
    /* 0..5 as [2, 3]; every dtype holds them exactly */
    kiln_tensor t = kiln_reshape(kiln_cast(kiln_arange(KILN_F32, 0, 6, 1), (kiln_dtype)dt), 2, ((int64_t[]){2, 3}));
    if (dt == KILN_BOOL) t = kiln_reshape(kiln_cast(kiln_arange(KILN_I32, 0, 6, 1), KILN_BOOL), 2, ((int64_t[]){2, 3}));
    kiln_tensor v[4] = {kiln_transpose(t, 0, 1), kiln_slice(t, 1, 0, 3, 2),
                        kiln_expand(kiln_slice(t, 0, 1, 2, 1), 2, ((int64_t[]){3, 3})), t};
    const char *names[4] = {"transpose", "slice", "expand", "lazy"};
    KT_CHECK(kiln_save_safetensors(path, 4, names, v, NULL) == KILN_OK);
    kiln_st_file *f = NULL;
    KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
    for (int i = 0; i < 4 && f; i++) {
      kiln_tensor back = kiln_st_tensor(f, names[i]);
      KT_EQ_INT(kiln_dtype_of(back), dt);
      int64_t s0[KILN_MAX_RANK], s1[KILN_MAX_RANK];
      KT_EQ_INT(kiln_shape(back, s1), kiln_shape(v[i], s0));
      KT_CHECK(!memcmp(s0, s1, 2 * sizeof *s0));
      /* as f64 to compare: values 0..5 */
      double a[9] = {0}, b[9] = {0};
      KT_CHECK(kiln_to_host(kiln_cast(back, KILN_F64), a, sizeof a) == KILN_OK);
      KT_CHECK(kiln_to_host(kiln_cast(v[i], KILN_F64), b, sizeof b) == KILN_OK);
      KT_CHECK_MSG(!memcmp(a, b, sizeof a), "%s %s: %g %g %g ... saved, %g %g %g ... meant",
                   kiln_dtype_name((kiln_dtype)dt), names[i], a[0], a[1], a[2], b[0], b[1], b[2]);
    }
    /* by hand: transpose [[0,3],[1,4],[2,5]], slice [[0,2],[3,5]], expand [[3,4,5] x3] */
    if (dt == KILN_F32 && f) {
      float x[9];
      KT_CHECK(kiln_to_host(kiln_st_tensor(f, "transpose"), x, sizeof x) == KILN_OK);
      KT_CHECK(x[0] == 0 && x[1] == 3 && x[2] == 1 && x[5] == 5);
      KT_CHECK(kiln_to_host(kiln_st_tensor(f, "slice"), x, sizeof x) == KILN_OK);
      KT_CHECK(x[0] == 0 && x[1] == 2 && x[2] == 3 && x[3] == 5);
      KT_CHECK(kiln_to_host(kiln_st_tensor(f, "expand"), x, sizeof x) == KILN_OK);
      KT_CHECK(x[0] == 3 && x[2] == 5 && x[3] == 3 && x[8] == 5);
    }
    kiln_st_file_destroy(f);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  /* 0-d and zero-size */
  kiln_tensor s = kiln_mul_c(kiln_constant(KILN_F64, 1.5), 3), z = kiln_zeros(KILN_I64, 2, ((int64_t[]){0, 4}));
  const char *names[2] = {"scalar", "empty"};
  kiln_tensor ts[2] = {s, z};
  KT_CHECK(kiln_save_safetensors(path, 2, names, ts, NULL) == KILN_OK);
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  if (f) {
    int64_t sh[KILN_MAX_RANK];
    KT_EQ_INT(kiln_st_shape(f, kiln_st_find(f, "scalar"), sh), 0);
    KT_CHECK(kiln_item_f64(kiln_st_tensor(f, "scalar")) == 4.5);
    KT_EQ_INT(kiln_st_shape(f, kiln_st_find(f, "empty"), sh), 2);
    KT_CHECK(sh[0] == 0 && sh[1] == 4);
    KT_EQ_INT(kiln_numel(kiln_st_tensor(f, "empty")), 0);
  }
  kiln_st_file_destroy(f);
  KT_CHECK(kiln_last_status() == KILN_OK);
  unlink(path);
  kiln_shutdown();
}

/* A save right after kiln_mark_step (the step still running) and a save of
 * a parameter assigned this step but not yet computed. */
KT_TEST(checkpoint_of_running_and_pending_steps) {
  start();
  snprintf(path, sizeof path, "/tmp/kiln_test_state_run_%d.safetensors", (int)getpid());
  int64_t n = 4096;
  kiln_tensor p = kiln_param(kiln_arange(KILN_F32, 0, (double)n, 1));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  for (int step = 1; step <= 3; step++) {
    kiln_assign(p, kiln_add_c(kiln_mul_c(p, 2), 1)); /* p <- 2p + 1 */
    KT_CHECK(kiln_mark_step() == KILN_OK);          /* enqueued; the save waits for it */
  }
  kiln_assign(p, kiln_add_c(p, 0.5)); /* pending: the save computes it */
  const char *names[1] = {"p"};
  KT_CHECK(kiln_save_safetensors(path, 1, names, &p, NULL) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  kiln_st_file *f = NULL;
  KT_CHECK(kiln_st_file_create(path, &f) == KILN_OK);
  float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
  if (f && a && b) {
    KT_CHECK(kiln_to_host(kiln_st_tensor(f, "p"), a, (size_t)n * 4) == KILN_OK);
    KT_CHECK(kiln_to_host(p, b, (size_t)n * 4) == KILN_OK);
    /* x -> 2x+1 three times: 8x + 7, then + 0.5 */
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += a[i] != 8.0f * (float)i + 7.5f || b[i] != a[i];
    KT_EQ_INT(bad, 0);
  }
  free(a);
  free(b);
  kiln_st_file_destroy(f);
  unlink(path);
  kiln_shutdown();
}

/* ───────────── host memory, shared buffers, gradients ───────────── */

KT_TEST(host_memory_is_copied) {
  start();
  float h[4] = {1, 2, 3, 4};
  int64_t s4[1] = {4};
  kiln_tensor t = kiln_keep(kiln_from_host(h, KILN_F32, 1, s4));
  h[0] = 99;
  kiln_tensor u = kiln_keep(kiln_mul_c(t, 2));
  h[1] = 77;
  KT_CHECK(kiln_mark_step() == KILN_OK);
  h[2] = 55;
  float o[4];
  KT_CHECK(kiln_to_host(u, o, sizeof o) == KILN_OK);
  KT_CHECK(o[0] == 2 && o[1] == 4 && o[2] == 6 && o[3] == 8);
  /* a dataset copies too: the loader's batches keep the values at creation */
  float feats[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  int64_t labels[4] = {0, 1, 2, 3}, fs[2] = {4, 2};
  kiln_dataset *ds = NULL;
  KT_CHECK(kiln_dataset_create_from_host(feats, 2, fs, labels, &ds) == KILN_OK);
  kiln_batch_options bo = {.batch_size = 4};
  kiln_loader *ld = NULL;
  KT_CHECK(kiln_loader_create(ds, &bo, &ld) == KILN_OK);
  feats[3] = -1;
  labels[1] = 9;
  kiln_batch b;
  KT_EQ_INT(kiln_loader_next(ld, &b), 1);
  float x[8];
  int64_t y[4];
  KT_CHECK(kiln_to_host(b.x, x, sizeof x) == KILN_OK);
  KT_CHECK(kiln_to_host(b.y, y, sizeof y) == KILN_OK);
  KT_CHECK(x[3] == 3 && y[1] == 1);
  kiln_loader_destroy(ld);
  kiln_dataset_destroy(ds);
  kiln_shutdown();
}

static float first(kiln_tensor t) {
  float o[4] = {-1};
  KT_CHECK(kiln_to_host(t, o, sizeof o) == KILN_OK);
  return o[0];
}

/* q = p shares p's buffer; updating either in place (the old buffer is
 * donated at the step marker) must never change the other, over steps
 * still in flight; a tensor traced from p before kiln_assign sees the old p. */
KT_TEST(shared_buffers_and_in_place_updates) {
  start();
  float h[4] = {1, 2, 3, 4};
  int64_t s4[1] = {4};
  kiln_tensor p = kiln_param(kiln_from_host(h, KILN_F32, 1, s4));
  kiln_tensor q = kiln_keep(kiln_zeros(KILN_F32, 1, s4));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  kiln_tensor before = kiln_keep(kiln_add_c(p, 10)); /* 11 */
  kiln_assign(p, kiln_mul_c(p, 3));                 /* 3 */
  kiln_tensor after = kiln_keep(kiln_add_c(p, 10));  /* 13 */
  KT_CHECK(first(before) == 11); /* a read mid-step */
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(first(after) == 13 && first(p) == 3);
  kiln_assign(q, p); /* shares p's buffer */
  for (int i = 0; i < 3; i++) {
    kiln_assign(p, kiln_add_c(p, 1));
    KT_CHECK(kiln_mark_step() == KILN_OK); /* not waited for */
  }
  KT_CHECK(first(q) == 3 && first(p) == 6);
  kiln_assign(q, p);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  kiln_assign(q, kiln_add_c(q, 100));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(first(p) == 6 && first(q) == 106);
  /* a swap through a shared buffer in one step */
  kiln_assign(q, p);
  kiln_assign(p, kiln_add_c(q, 1));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(first(q) == 6 && first(p) == 7);
  /* released while its step runs: what was traced from it is still right */
  kiln_assign(p, kiln_add_c(p, 1));
  kiln_tensor r = kiln_keep(kiln_mul_c(p, 2));
  KT_CHECK(kiln_mark_step() == KILN_OK);
  kiln_release(p);
  KT_CHECK(first(r) == 16);
  KT_CHECK(kiln_last_status() == KILN_OK);
  kiln_shutdown();
}

KT_TEST(gradients_accumulate_across_steps) {
  start();
  float h[4] = {1, 2, 3, 4};
  int64_t s4[1] = {4};
  kiln_tensor w = kiln_param(kiln_from_host(h, KILN_F32, 1, s4));
  kiln_requires_grad(w);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(kiln_backward(kiln_sum(kiln_mul(w, w), 0, NULL, false)) == KILN_OK); /* 2w */
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(kiln_backward(kiln_sum(kiln_mul_c(w, 3), 0, NULL, false)) == KILN_OK); /* + 3 */
  KT_CHECK(kiln_mark_step() == KILN_OK);
  float o[4];
  KT_CHECK(kiln_to_host(kiln_grad(w), o, sizeof o) == KILN_OK);
  KT_CHECK(o[0] == 5 && o[3] == 11);
  kiln_tensor g = kiln_grad(w);
  kiln_zero_grad(w);
  KT_CHECK(kiln_grad(w).gen == 0);
  KT_CHECK(kiln_to_host(g, o, sizeof o) == KILN_ERR_STALE_HANDLE); /* the old handle */
  kiln_clear_error();
  /* a read between two backward calls of one step */
  KT_CHECK(kiln_backward(kiln_sum(w, 0, NULL, false)) == KILN_OK);
  KT_CHECK(first(kiln_grad(w)) == 1);
  KT_CHECK(kiln_backward(kiln_sum(w, 0, NULL, false)) == KILN_OK);
  KT_CHECK(first(kiln_grad(w)) == 2);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(first(kiln_grad(w)) == 2);
  /* the update reads the gradient; both survive the step */
  kiln_zero_grad(w);
  KT_CHECK(kiln_backward(kiln_sum(kiln_mul(w, w), 0, NULL, false)) == KILN_OK);
  kiln_assign(w, kiln_sub(w, kiln_mul_c(kiln_grad(w), 0.5))); /* w - w = 0 */
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(kiln_to_host(kiln_grad(w), o, sizeof o) == KILN_OK);
  KT_CHECK(o[0] == 2 && o[3] == 8);
  KT_CHECK(first(w) == 0);
  kiln_shutdown();
}

/* ───────────── determinism ───────────── */

#define DN 96

/* 12 steps of a small model: matmul (mm != 0) or not, dropout seeded by the
 * step, AdamW; the parameters into out[DN * 8]. */
static void det_run(int mm, float *out) {
  int64_t ws[2] = {DN, 8}, xs[2] = {16, DN};
  kiln_tensor w = kiln_param(kiln_rand_normal(KILN_F32, 2, ws, 3));
  kiln_requires_grad(w);
  kiln_adamw_opts ao = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *o = NULL;
  KT_CHECK(kiln_optim_create_adamw(1, &w, &ao, &o) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  for (int s = 0; s < 12; s++) {
    kiln_tensor x = kiln_rand_uniform(KILN_F32, 2, xs, 100 + (uint64_t)s);
    x = kiln_dropout(x, 0.3, kiln_nn_seed(7, (uint64_t)s), true);
    kiln_tensor y;
    if (mm) {
      y = kiln_matmul(x, w);
    } else { /* [16, DN, 1] * [DN, 8] summed over DN: no GEMM */
      int ax[1] = {1};
      y = kiln_sum(kiln_mul(kiln_reshape(x, 3, ((int64_t[]){16, DN, 1})), w), 1, ax, false);
    }
    kiln_tensor loss = kiln_mean(kiln_mul(kiln_tanh(y), kiln_sin(y)), 0, NULL, false);
    KT_CHECK(kiln_backward(loss) == KILN_OK);
    KT_CHECK(kiln_optim_step(o) == KILN_OK);
    kiln_optim_zero_grad(o);
    KT_CHECK(kiln_mark_step() == KILN_OK);
  }
  KT_CHECK(kiln_to_host(w, out, DN * 8 * 4) == KILN_OK);
  kiln_optim_destroy(o);
  kiln_release(w);
}

static int same_bits(const float *a, const float *b) { return !memcmp(a, b, DN * 8 * 4); }

KT_TEST(same_bits_from_every_cache_and_with_debug_on) {
  char dir[] = "/tmp/kiln_test_state_cache_XXXXXX";
  KT_CHECK(mkdtemp(dir) != NULL);
  kiln_options o = {.cache_dir = dir, .num_threads = 2};
  static float cold[DN * 8], mem[DN * 8], disk[DN * 8], dbg[DN * 8], init[DN * 8];
  for (int mm = 0; mm < 2; mm++) {
    start_opts(&o);
    det_run(mm, cold);
    int64_t compiled = kiln_counter_value("UncachedCompile");
    det_run(mm, mem); /* the same runtime: its graph cache */
    KT_EQ_INT(kiln_counter_value("UncachedCompile"), compiled);
    start_opts(&o); /* a new runtime: the disk cache */
    det_run(mm, disk);
    KT_CHECK(kiln_counter_value("PersistentCacheHit") > 0);
    setenv("KILN_DEBUG", "1", 1);
    setenv("KILN_DEBUG_WARMUP", "0", 1);
    start_opts(&o);
    det_run(mm, dbg);
    unsetenv("KILN_DEBUG");
    unsetenv("KILN_DEBUG_WARMUP");
    KT_CHECK_MSG(same_bits(cold, mem), "mm %d: an in-memory cache hit changed the result", mm);
    KT_CHECK_MSG(same_bits(cold, disk), "mm %d: a disk cache hit changed the result", mm);
    KT_CHECK_MSG(same_bits(cold, dbg), "mm %d: KILN_DEBUG changed the result", mm);
  }
  /* the runs trained: w moved from its initial values */
  start_opts(&o);
  int64_t ws[2] = {DN, 8};
  KT_CHECK(kiln_to_host(kiln_rand_normal(KILN_F32, 2, ws, 3), init, sizeof init) == KILN_OK);
  KT_CHECK(!same_bits(init, cold));
  kiln_shutdown();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  KT_CHECK(system(cmd) == 0);
}

/* kiln's own kernels (elementwise, reductions with fixed partial sums, the
 * counter-based RNG) give the same bits on any thread count. (GEMMs go to
 * the BLAS library, whose split may depend on it: docs/semantics.md.) */
KT_TEST(same_bits_on_one_and_two_threads) {
  static float one[DN * 8], two[DN * 8];
  kiln_options o1 = {.num_threads = 1}, o2 = {.num_threads = 2};
  start_opts(&o1);
  det_run(0, one);
  start_opts(&o2);
  det_run(0, two);
  KT_CHECK(same_bits(one, two));
  kiln_shutdown();
}

/* Dropout: a new seed each step gives a new mask; the same seed the same. */
KT_TEST(dropout_masks_per_step) {
  start();
  int64_t s[1] = {4096};
  kiln_tensor ones = kiln_ones(KILN_F32, 1, s);
  static float a[4096], b[4096], c[4096];
  KT_CHECK(kiln_to_host(kiln_dropout(ones, 0.5, kiln_nn_seed(1, 0), true), a, sizeof a) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  KT_CHECK(kiln_to_host(kiln_dropout(ones = kiln_ones(KILN_F32, 1, s), 0.5, kiln_nn_seed(1, 1), true), b,
                        sizeof b) == KILN_OK);
  KT_CHECK(kiln_mark_step() == KILN_OK);
  start();
  KT_CHECK(kiln_to_host(kiln_dropout(kiln_ones(KILN_F32, 1, s), 0.5, kiln_nn_seed(1, 0), true), c, sizeof c) ==
           KILN_OK);
  int kept = 0, differ = 0;
  for (int i = 0; i < 4096; i++) {
    KT_CHECK(a[i] == 0 || a[i] == 2); /* 1 / (1 - 0.5) */
    kept += a[i] != 0;
    differ += a[i] != b[i];
  }
  KT_CHECK(kept > 1800 && kept < 2300); /* ~ 2048 */
  KT_CHECK(differ > 1500);              /* ~ half of them differ between two independent masks */
  KT_CHECK(!memcmp(a, c, sizeof a));    /* same seed, new runtime */
  kiln_shutdown();
}

KT_MAIN(KT_CASE(checkpoint_saves_logical_values), KT_CASE(checkpoint_of_running_and_pending_steps),
        KT_CASE(host_memory_is_copied), KT_CASE(shared_buffers_and_in_place_updates),
        KT_CASE(gradients_accumulate_across_steps), KT_CASE(same_bits_from_every_cache_and_with_debug_on),
        KT_CASE(same_bits_on_one_and_two_threads), KT_CASE(dropout_masks_per_step))
