/* Long runs stay bounded: what kiln holds while a program runs for many
 * steps (memory that is still reachable, so that LeakSanitizer's check at
 * exit never sees it; descriptors; threads) must not grow with the step
 * count when the program's own data does not.
 *
 * - A program whose shapes never recur (a new size every step) once kept a
 *   graph-cache entry per size forever: past KILN_GRAPH_CACHE_SIZE the
 *   executables went, but every entry and its traced graph stayed (about
 *   0.8 KB per planned size, 4 KB per compiled five-node graph). The cache
 *   now keeps at most 2 * KILN_GRAPH_CACHE_SIZE entries (docs/environment.md).
 * - A training loop, value reads every step, tensors made and released,
 *   optimizers and modules made and destroyed, kiln_init / kiln_shutdown
 *   cycles: memory, descriptors and threads plateau.
 *
 * Oracles: values computed on the host; the counters UncachedCompile,
 * DynamicPlan, GraphCacheDropped; /proc/self/status (VmRSS), /proc/self/fd
 * and /proc/self/task with margins several times what the runs need. */
#include <dirent.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/autograd.h"
#include "kiln/debug.h"
#include "kiln/dist.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "kt.h"

#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void); /* sanitizer/allocator_interface.h */
#define KT_ASAN 1
#else
#define KT_ASAN 0
#endif

/* Memory in use, in kB: VmRSS; under ASan, whose quarantine holds freed
 * memory (RSS grows by design), the bytes its allocator has handed out. */
static long rss_kb(void) {
#if KT_ASAN
  return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
#else
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) {
      v = atol(line + 6);
      break;
    }
  fclose(f);
  return v;
#endif
}

/* Heap in use, in bytes (mallinfo2: exact, unlike RSS; under ASan its
 * allocator's count, which glibc's mallinfo2 does not see). */
static size_t heap_in_use(void) {
#if KT_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  return mallinfo2().uordblks;
#endif
}

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

static void start(const char *cache_size) {
  kiln_shutdown();
  kiln_clear_error();
  if (cache_size) setenv("KILN_GRAPH_CACHE_SIZE", cache_size, 1); /* read when the runtime starts */
  else unsetenv("KILN_GRAPH_CACHE_SIZE");
  KT_CHECK(kiln_init(NULL) == KILN_OK);
}

enum { CAP = 8, MAX_N = 4096 };
static float g_ones[MAX_N];

/* sum(2 x) over n ones: 2n, for a size n that the loop gives each step */
static double sized_graph(int64_t n) {
  kiln_tensor x = kiln_from_host(g_ones, KILN_F32, 1, &n);
  return kiln_item_f64(kiln_sum(kiln_mul_c(x, 2.0), 0, NULL, 0));
}

static int64_t graphs_made(void) {
  return kiln_counter_value("UncachedCompile") + kiln_counter_value("DynamicPlan");
}

/* A new size every step (planned from its dynamic family after the second):
 * the graph cache holds at most 2 * CAP entries, the values stay right when
 * a dropped size comes back, kiln_explain still reports every graph, and
 * the memory of 10,000 more sizes grows by far less than their entries'. */
KT_TEST(new_size_every_step_keeps_the_graph_cache_bounded) {
  start("8");
  for (int i = 0; i < MAX_N; i++) g_ones[i] = 1.0f;
  kiln_metrics_clear();
  enum { STEPS = 12000, WARM = 2000 };
  long rss_warm = 0;
  int bad = 0;
  for (int s = 0; s < STEPS; s++) {
    int64_t n = 1 + s % MAX_N; /* sizes 1..4096, then again: dropped ones come back */
    double v = sized_graph(n);
    if (v != 2.0 * (double)n && bad++ < 5) KT_FAIL("step %d size %lld: %g, want %g", s, (long long)n, v, 2.0 * n);
    kiln_mark_step();
    int64_t held = graphs_made() - kiln_counter_value("GraphCacheDropped");
    if (held > 2 * CAP && bad++ < 5)
      KT_FAIL("step %d: %lld graphs made, %lld dropped: %lld held, more than 2 * KILN_GRAPH_CACHE_SIZE = %d", s,
              (long long)graphs_made(), (long long)kiln_counter_value("GraphCacheDropped"), (long long)held, 2 * CAP);
    if (s == WARM) rss_warm = rss_kb();
  }
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
  long grown = rss_kb() - rss_warm;
  /* unbounded: ~0.8 KB per size, 8 MB over these 10,000 steps; bounded:
   * the analysis's row per graph, ~1.3 MB */
  KT_CHECK_MSG(grown < 4096, "RSS grew by %ld kB over %d steps of new sizes", grown, STEPS - WARM);
  const char *ex = kiln_explain();
  char want[64];
  snprintf(want, sizeof want, "graphs compiled: %lld ", (long long)graphs_made());
  KT_STR_CONTAINS(ex, want);
  kiln_shutdown();
}

/* A dropped graph compiled (not planned) comes back right: KILN_DYNAMIC=off
 * makes every size a compile of its own. The analysis keeps the 16 most
 * recent graphs of a call site (pinned), the cache one executable and two
 * entries: the second pass finds none of its 20 sizes and compiles each. */
/* A runtime with room for one executable (two entries) and every size a
 * compile of its own (KILN_DYNAMIC=off), its counters cleared. */
static void start_one_executable(void) {
  kiln_shutdown();
  kiln_clear_error();
  setenv("KILN_GRAPH_CACHE_SIZE", "1", 1);
  kiln_options o = {0};
  o.dynamic_shapes = KILN_SWITCH_OFF;
  KT_CHECK(kiln_init(&o) == KILN_OK);
  kiln_metrics_clear();
}

KT_TEST(dropped_compiled_graphs_come_back_right) {
  start_one_executable();
  for (int pass = 0; pass < 2; pass++)
    for (int64_t n = 1; n <= 20; n++) {
      double v = sized_graph(n);
      KT_CHECK_MSG(v == 2.0 * (double)n, "pass %d size %lld: %g", pass, (long long)n, v);
      kiln_mark_step();
    }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 40);
  KT_CHECK_MSG(kiln_counter_value("GraphCacheDropped") >= 40 - 16 - 2, "dropped %lld",
               (long long)kiln_counter_value("GraphCacheDropped"));
  KT_STR_CONTAINS(kiln_explain(), "graphs compiled: 40 ");
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
  kiln_shutdown();
  unsetenv("KILN_GRAPH_CACHE_SIZE");
}

/* A graph with collectives is never dropped: its first run is agreed by all
 * the ranks (one exchange each, in the same order everywhere), and each rank
 * drops by its own use, so a graph made again on one rank only would start
 * an exchange the others never join (a hang). The program above with an
 * all-reduce (a world of one: the identity) compiles each size once; without
 * the rule the second pass compiled 20 again, as the program above does. */
KT_TEST(collective_graphs_are_never_dropped) {
  start_one_executable();
  for (int pass = 0; pass < 2; pass++)
    for (int64_t n = 1; n <= 20; n++) {
      kiln_tensor x = kiln_from_host(g_ones, KILN_F32, 1, &n);
      double v = kiln_item_f64(kiln_sum(kiln_all_reduce(x, KILN_REDUCE_SUM), 0, NULL, 0));
      KT_CHECK_MSG(v == (double)n, "pass %d size %lld: %g", pass, (long long)n, v);
      kiln_mark_step();
    }
  KT_EQ_INT(kiln_counter_value("UncachedCompile"), 20);
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
  kiln_shutdown();
  unsetenv("KILN_GRAPH_CACHE_SIZE");
}

/* A small MLP trained with AdamW, the loss read every 10th step: after the
 * warm-up the memory, descriptors and threads stay where they are. */
KT_TEST(training_loop_plateaus) {
  start(NULL);
  kiln_metrics_clear();
  kiln_linear *l1 = NULL, *l2 = NULL;
  KT_CHECK(kiln_linear_create(16, 32, true, 1, &l1) == KILN_OK);
  KT_CHECK(kiln_linear_create(32, 4, true, 2, &l2) == KILN_OK);
  kiln_tensor ps[4] = {l1->weight, l1->bias, l2->weight, l2->bias};
  for (int i = 0; i < 4; i++) kiln_requires_grad(ps[i]);
  const kiln_adamw_opts ao = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
  kiln_optim *opt = NULL;
  KT_CHECK(kiln_optim_create_adamw(4, ps, &ao, &opt) == KILN_OK);
  float xb[8 * 16];
  int64_t yb[8];
  for (int i = 0; i < 8 * 16; i++) xb[i] = (float)((i * 37) % 11) / 11.0f;
  for (int i = 0; i < 8; i++) yb[i] = i % 4;
  const int64_t xs[2] = {8, 16}, ys[1] = {8};
  enum { STEPS = 4000, WARM = 500 };
  long rss0 = 0;
  int fd0 = 0, th0 = 0;
  double first = 0, last = 0;
  for (int s = 0; s < STEPS; s++) {
    kiln_tensor x = kiln_from_host(xb, KILN_F32, 2, xs), y = kiln_from_host(yb, KILN_I64, 1, ys);
    kiln_tensor h = kiln_relu(kiln_linear_forward(l1, x));
    kiln_tensor loss = kiln_cross_entropy(kiln_linear_forward(l2, h), y, -100, 0.0);
    kiln_backward(loss);
    kiln_optim_step(opt);
    kiln_optim_zero_grad(opt);
    if (s == 0) first = kiln_item_f64(loss);
    if (s % 10 == 9) last = kiln_item_f64(loss);
    kiln_mark_step();
    if (s == WARM) rss0 = rss_kb(), fd0 = count_dir("/proc/self/fd"), th0 = count_dir("/proc/self/task");
  }
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
  KT_CHECK_MSG(last < first * 0.5, "the loss went from %g to %g", first, last);
  long grown = rss_kb() - rss0;
  KT_CHECK_MSG(grown < 2048, "RSS grew by %ld kB over %d training steps", grown, STEPS - WARM);
  KT_EQ_INT(count_dir("/proc/self/fd"), fd0);
  KT_EQ_INT(count_dir("/proc/self/task"), th0);
  KT_CHECK(kiln_counter_value("UncachedCompile") <= 8);
  kiln_optim_destroy(opt);
  kiln_linear_destroy(l1);
  kiln_linear_destroy(l2);
  kiln_shutdown();
}

/* Tensors made, read and released every step; modules and optimizers made
 * and destroyed: nothing accumulates. */
KT_TEST(reads_and_objects_each_step_plateau) {
  start(NULL);
  float b[64], out[64];
  for (int i = 0; i < 64; i++) b[i] = (float)i;
  const int64_t sh[1] = {64};
  enum { STEPS = 6000, WARM = 1000 };
  long rss0 = 0;
  int fd0 = 0, th0 = 0;
  for (int s = 0; s < STEPS; s++) {
    kiln_tensor x = kiln_keep(kiln_from_host(b, KILN_F32, 1, sh));
    kiln_tensor y = kiln_add_c(x, (double)(s % 3));
    KT_CHECK(kiln_to_host(y, out, sizeof out) == KILN_OK);
    if (out[63] != 63.0f + (float)(s % 3) && s < 5) KT_FAIL("step %d: %g", s, out[63]);
    kiln_release(x);
    kiln_linear *l = NULL;
    KT_CHECK(kiln_linear_create(4, 4, true, (uint64_t)s, &l) == KILN_OK);
    kiln_tensor ps[2] = {l->weight, l->bias};
    kiln_sgd_opts so = {0};
    so.lr = 0.1;
    kiln_optim *o = NULL;
    KT_CHECK(kiln_optim_create_sgd(2, ps, &so, &o) == KILN_OK);
    kiln_optim_destroy(o);
    kiln_linear_destroy(l);
    kiln_mark_step();
    if (s == WARM) rss0 = rss_kb(), fd0 = count_dir("/proc/self/fd"), th0 = count_dir("/proc/self/task");
  }
  KT_CHECK_MSG(kiln_last_status() == KILN_OK, "%s", kiln_last_error());
  long grown = rss_kb() - rss0;
  KT_CHECK_MSG(grown < 2048, "RSS grew by %ld kB over %d steps", grown, STEPS - WARM);
  KT_EQ_INT(count_dir("/proc/self/fd"), fd0);
  KT_EQ_INT(count_dir("/proc/self/task"), th0);
  kiln_shutdown();
}

/* kiln_init / kiln_shutdown cycles give back their threads, descriptors and
 * memory. Each kiln_init published a new snapshot of the configuration and
 * kept every earlier one (readers may hold them): 600 bytes per cycle for
 * ever. One with the contents of an earlier one is now that one again. The
 * heap in use grew by ~600 KB over these cycles without that. */
KT_TEST(init_shutdown_cycles_give_back_threads_descriptors_and_memory) {
  kiln_shutdown();
  const float b[4] = {1, 2, 3, 4};
  const int64_t sh[1] = {4};
  int fd0 = 0, th0 = 0;
  size_t heap0 = 0;
  enum { CYCLES = 1000, WARM = 20 };
  for (int c = 0; c < CYCLES; c++) {
    KT_CHECK(kiln_init(NULL) == KILN_OK);
    if (c % 50 == 0) KT_NEAR(kiln_item_f64(kiln_sum(kiln_from_host(b, KILN_F32, 1, sh), 0, NULL, 0)), 10.0, 0);
    kiln_shutdown();
    if (c == WARM) fd0 = count_dir("/proc/self/fd"), th0 = count_dir("/proc/self/task"), heap0 = heap_in_use();
  }
  KT_EQ_INT(count_dir("/proc/self/fd"), fd0);
  KT_EQ_INT(count_dir("/proc/self/task"), th0);
  long long grown = (long long)heap_in_use() - (long long)heap0;
  KT_CHECK_MSG(grown < 128 * 1024, "heap in use grew by %lld bytes over %d init/shutdown cycles", grown,
               CYCLES - WARM);
}

KT_MAIN(KT_CASE(new_size_every_step_keeps_the_graph_cache_bounded), KT_CASE(dropped_compiled_graphs_come_back_right),
        KT_CASE(collective_graphs_are_never_dropped),
        KT_CASE(training_loop_plateaus), KT_CASE(reads_and_objects_each_step_plateau),
        KT_CASE(init_shutdown_cycles_give_back_threads_descriptors_and_memory))
