/* Attention tiles (schedule_fuse.c "Attention tiles", cpu_execute.c
 * run_tile): S = Q·Kᵀ, its softmax rows P and O = P·V run one batch entry at
 * a time when S and P are read by the next kernel alone. Each case runs on
 * the cpu backend with tiles (checking that a tile ran), without them
 * (KILN_TILE_ATTENTION=0: the three kernels one after the other) and on the
 * ref backend: tiled and untiled must agree bit for bit (the same library
 * calls per entry, the same row kernel on the entry's rows), and both with
 * ref within f32 tolerances. Cases where S or P has another reader must
 * not tile, and still match. */
#include <stdlib.h>

#include "backend_compare.h"
#include "runtime/runtime_internal.h"

/* ── counting the tiles that ran: the cpu backend's kernel names ── */

static int g_tiles;
static kiln_backend_vtable g_vt;
static const kiln_backend_vtable *g_orig;

static kiln_status spy_execute(kiln_backend *b, kiln_executable *e, void *const *in, void *const *out,
                               kiln_err *err) {
  kiln_status s = g_orig->execute(b, e, in, out, err);
  const kiln_kernel_timing *t = NULL;
  int n = g_orig->last_kernel_timings ? g_orig->last_kernel_timings(b, e, &t) : 0;
  for (int i = 0; i < n; i++)
    if (t[i].name && strstr(t[i].name, "attention tile")) g_tiles++;
  return s;
}

static void spy_install(void) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt || !rt->backend || rt->backend->vt == &g_vt) return;
  g_orig = rt->backend->vt;
  g_vt = *g_orig;
  g_vt.execute = spy_execute;
  rt->backend->vt = &g_vt;
}

/* ── the cases ── */

typedef struct acase {
  const char *name;
  int rank;              /* 4: [B, H, L, d]; 3: [B, L, d] */
  int64_t B, H, Lq, Lk, d, dv;
  int mask;              /* 0 none, 1 bool key padding [B,1,1,Lk] (one sentence wholly masked: NaN rows),
                          * 2 float [Lq, Lk] added (a causal -inf) */
  int kt;                /* 1: K comes as Kᵀ [.., d, Lk], computed in the graph (the GEMM reads it as is) */
  int also_p;            /* 1: P is an output too (P has another reader: no tile) */
  int tiles;             /* tiles expected */
  kiln_dtype dt;         /* 0: f32 */
  int k_batch1;          /* 1: K has batch 1, broadcast over B (a batch stride 0) */
  int dynamic;           /* 1: Lq and Lk marked dynamic (a family's planned sizes) */
} acase;

static const acase kCases[] = {
    {"heads", 4, 3, 4, 16, 16, 8, 8, 0, 0, 0, 1, 0, 0, 0},
    {"key_padding", 4, 4, 2, 24, 24, 16, 16, 1, 0, 0, 1, 0, 0, 0},
    {"causal_float_mask", 4, 2, 3, 20, 20, 8, 12, 2, 0, 0, 1, 0, 0, 0},
    {"cross_lengths_kt", 4, 2, 2, 9, 37, 8, 5, 0, 1, 0, 1, 0, 0, 0},
    {"batch_only_3d", 3, 5, 1, 33, 17, 12, 7, 1, 0, 0, 1, 0, 0, 0},
    {"long_rows", 4, 2, 2, 8, 130, 16, 16, 1, 1, 0, 1, 0, 0, 0},
    {"p_is_an_output", 4, 2, 2, 16, 16, 8, 8, 1, 0, 1, 0, 0, 0, 0},
    {"f64", 4, 2, 3, 12, 20, 8, 4, 1, 0, 0, 1, KILN_F64, 0, 0},
    {"k_broadcast_over_batch", 4, 3, 2, 10, 14, 8, 8, 0, 0, 0, 1, 0, 1, 0},
};

static kiln_dtype g_dt = KILN_F32;
static kiln_tensor in(int rank, const int64_t *s, uint64_t seed, double scale) {
  return kiln_mul_c(bc_input(g_dt, rank, s, seed, 0), scale);
}

static void prog(bc_result *r, const void *arg) {
  const acase *c = arg;
  spy_install();
  g_dt = c->dt ? c->dt : KILN_F32;
  int R = c->rank;
  int64_t q_s[4], k_s[4], v_s[4];
  int64_t lead[2] = {c->B, c->H};
  int nl = R - 2;
  for (int i = 0; i < nl; i++) q_s[i] = k_s[i] = v_s[i] = lead[i];
  q_s[nl] = c->Lq, q_s[nl + 1] = c->d;
  k_s[nl] = c->Lk, k_s[nl + 1] = c->d;
  v_s[nl] = c->Lk, v_s[nl + 1] = c->dv;
  kiln_tensor q = in(R, q_s, 11, 0.5), v = in(R, v_s, 13, 1.0), k;
  if (c->kt) { /* Kᵀ made by a kernel of the graph, read by the GEMM in its own layout */
    int64_t kt_s[4];
    memcpy(kt_s, k_s, sizeof kt_s);
    kt_s[nl] = c->d, kt_s[nl + 1] = c->Lk;
    kiln_tensor kt = kiln_add_c(in(R, kt_s, 12, 0.5), 0.25);
    k = kiln_transpose(kt, R - 2, R - 1);
  } else {
    if (c->k_batch1) k_s[0] = 1;
    k = in(R, k_s, 12, 0.5);
  }
  if (c->dynamic) { /* the lengths vary from step to step: the graph's family, planned at each */
    kiln_dynamic(q, R - 2);
    kiln_dynamic(k, R - 2);
    kiln_dynamic(v, R - 2);
  }
  kiln_tensor mask = {0, 0};
  if (c->mask == 1) {
    int64_t ms[4] = {c->B, 1, 1, c->Lk}, n = c->B * c->Lk;
    if (R == 3) ms[1] = 1, ms[2] = c->Lk;
    uint8_t *m = malloc((size_t)n);
    for (int64_t b = 0; b < c->B; b++)
      for (int64_t j = 0; j < c->Lk; j++) m[b * c->Lk + j] = b == 1 ? 0 : j < c->Lk - b * 3; /* entry 1: nothing */
    mask = kiln_from_host(m, KILN_BOOL, R == 4 ? 4 : 3, ms);
    free(m);
  } else if (c->mask == 2) {
    int64_t ms[2] = {c->Lq, c->Lk};
    float *m = malloc(sizeof *m * (size_t)(c->Lq * c->Lk));
    for (int64_t i = 0; i < c->Lq; i++)
      for (int64_t j = 0; j < c->Lk; j++) m[i * c->Lk + j] = j <= i ? 0.1f * (float)(j % 3) : -INFINITY;
    mask = kiln_cast(kiln_from_host(m, KILN_F32, 2, ms), g_dt);
    free(m);
  }
  kiln_tensor o;
  if (c->also_p) { /* sdpa's ops written out, P kept as an output */
    kiln_tensor s = kiln_mul_c(kiln_matmul(q, kiln_transpose(k, R - 2, R - 1)), 1.0 / sqrt((double)c->d));
    s = kiln_where(mask, s, kiln_constant(KILN_F32, -INFINITY));
    kiln_tensor p = kiln_softmax(s, -1);
    bc_emit(r, p, 0, 0, "%s: P", c->name);
    o = kiln_matmul(p, v);
  } else {
    o = kiln_sdpa(q, k, v, mask, 0.0, false, 0);
  }
  bc_emit(r, kiln_add_c(o, 1.0), 0, 0, "%s: O", c->name);
}

static int run_all(const char *backend, const acase *c, int n, bc_result *r) {
  const void *args[4];
  for (int k = 0; k < n; k++) args[k] = &c[k];
  return bc_run_steps(backend, prog, args, n, r);
}

/* bit for bit: NaN where NaN */
static void same_bits(const char *what, const bc_result *a, const bc_result *b) {
  KT_CHECK(a->status == KILN_OK && b->status == KILN_OK && a->n == b->n);
  if (a->status != KILN_OK || b->status != KILN_OK || a->n != b->n) return;
  for (int k = 0; k < a->n; k++) {
    const bc_out *x = &a->o[k], *y = &b->o[k];
    KT_CHECK(x->numel == y->numel && x->dt == y->dt);
    if (x->numel != y->numel) continue;
    int64_t bad = -1;
    for (int64_t i = 0; i < x->numel && bad < 0; i++) {
      double u = bc_get_f(x, i), w = bc_get_f(y, i);
      if (!(u == w || (isnan(u) && isnan(w)))) bad = i;
    }
    if (bad >= 0)
      KT_FAIL("%s/%s: element %lld: tiled %.9g, untiled %.9g", what, x->name, (long long)bad, bc_get_f(x, bad),
              bc_get_f(y, bad));
  }
}

KT_TEST(tiles_match_the_untiled_kernels_and_ref) {
  static bc_result ref, tiled, untiled; /* large: off the stack */
  setenv("KILN_NUM_THREADS", "2", 1); /* a tile runs with at least as many batch entries as threads */
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    const acase *c = &kCases[i];
    bc_run_oracle(prog, c, &ref);
    g_tiles = 0;
    unsetenv("KILN_TILE_ATTENTION");
    bc_run("cpu", prog, c, &tiled);
    int tiles = g_tiles;
    g_tiles = 0;
    setenv("KILN_TILE_ATTENTION", "0", 1);
    bc_run("cpu", prog, c, &untiled);
    unsetenv("KILN_TILE_ATTENTION");
    if (c->tiles ? tiles < 1 : tiles != 0) KT_FAIL("%s: %d attention tiles ran, expected %s", c->name, tiles,
                                                   c->tiles ? "one" : "none");
    KT_CHECK(g_tiles == 0); /* KILN_TILE_ATTENTION=0: none */
    same_bits(c->name, &tiled, &untiled);
    KT_CHECK(bc_compare(c->name, &ref, &tiled) == 0);
    bc_result_free(&ref);
    bc_result_free(&tiled);
    bc_result_free(&untiled);
  }
}

/* A family (the lengths marked dynamic): its first size compiles it, the
 * later ones are planned; each runs its tile */
KT_TEST(tiles_in_a_dynamic_family) {
  static const acase sizes[3] = {
      {"dyn_24", 4, 2, 2, 24, 24, 8, 8, 1, 0, 0, 1, 0, 0, 1},
      {"dyn_40", 4, 2, 2, 40, 40, 8, 8, 1, 0, 0, 1, 0, 0, 1},
      {"dyn_17", 4, 2, 2, 17, 17, 8, 8, 1, 0, 0, 1, 0, 0, 1},
  };
  static bc_result ref[3], tiled[3], untiled[3];
  setenv("KILN_NUM_THREADS", "2", 1);
  run_all("ref", sizes, 3, ref);
  g_tiles = 0;
  unsetenv("KILN_TILE_ATTENTION");
  run_all("cpu", sizes, 3, tiled);
  KT_CHECK_MSG(g_tiles >= 3, "%d attention tiles ran over 3 sizes", g_tiles);
  setenv("KILN_TILE_ATTENTION", "0", 1);
  run_all("cpu", sizes, 3, untiled);
  unsetenv("KILN_TILE_ATTENTION");
  for (int k = 0; k < 3; k++) {
    same_bits(sizes[k].name, &tiled[k], &untiled[k]);
    KT_CHECK(bc_compare(sizes[k].name, &ref[k], &tiled[k]) == 0);
    bc_result_free(&ref[k]);
    bc_result_free(&tiled[k]);
    bc_result_free(&untiled[k]);
  }
}

KT_MAIN(KT_CASE(tiles_match_the_untiled_kernels_and_ref), KT_CASE(tiles_in_a_dynamic_family))
