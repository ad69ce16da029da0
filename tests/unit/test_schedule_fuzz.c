/* Differential fuzzing of fusion: random graphs (elementwise chains, row and
 * column reductions, broadcasts, transposes, slices, concats, matmuls,
 * multi-use nodes, several outputs, donated inputs) compiled by the cpu
 * backend and checked against the ref backend, node for node of every
 * output. Fixed seed; KILN_FUZZ_GRAPHS=N runs more. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "kt.h"

enum { MAXN = 48 };

typedef struct fz {
  uint64_t s;
  kiln_graph *g;
  int n, n_in_idx;
} fz;

static uint64_t rnd(fz *f) {
  f->s = f->s * 6364136223846793005ULL + 1442695040888963407ULL;
  return f->s >> 33;
}
static int pick(fz *f, int n) { return (int)(rnd(f) % (uint64_t)n); }

static int node(fz *f, int op, int dt, int rank, const int64_t *sh, int n_in, const int *ins, int n_ia,
                const int64_t *ia) {
  kiln_gnode *x = &f->g->nodes[f->n];
  memset(x, 0, sizeof *x);
  x->op = (uint16_t)op;
  x->dtype = (uint8_t)dt;
  x->rank = (uint8_t)rank;
  memcpy(x->shape, sh, sizeof *sh * (size_t)rank);
  x->n_in = n_in;
  x->in_off = f->n_in_idx;
  for (int i = 0; i < n_in; i++) f->g->in_idx[f->n_in_idx++] = ins[i];
  x->n_iattr = n_ia;
  if (n_ia) memcpy(x->iattr, ia, sizeof *ia * (size_t)n_ia);
  return f->n++;
}

static int same(const kiln_gnode *a, const kiln_gnode *b) {
  return a->rank == b->rank && !memcmp(a->shape, b->shape, sizeof a->shape[0] * a->rank);
}

/* A node of the same shape as n (searching from a random start), or -1. */
static int partner(fz *f, int n) {
  int st = pick(f, f->n);
  for (int k = 0; k < f->n; k++) {
    int c = (st + k) % f->n;
    if (same(&f->g->nodes[c], &f->g->nodes[n])) return c;
  }
  return -1;
}

static kiln_graph *gen(fz *f, int dt) {
  f->g = kiln_graph_alloc(MAXN, MAXN * 3, 4, 4);
  f->n = f->n_in_idx = 0;
  int64_t A = 1 + pick(f, 37), B = 1 + pick(f, 41);
  int64_t shF[2] = {A, B}, shR[2] = {A, 1}, shC[2] = {1, B};
  const int64_t *ish[4] = {shF, shF, shR, shC};
  for (int i = 0; i < 4; i++) {
    int64_t ia = i;
    f->g->input_node[i] = node(f, KILN_OP_LEAF, dt, 2, ish[i], 0, NULL, 1, &ia);
  }
  static const int un[] = {KILN_OP_NEG, KILN_OP_ABS, KILN_OP_TANH, KILN_OP_SIGMOID, KILN_OP_RELU, KILN_OP_EXP};
  static const int bi[] = {KILN_OP_ADD, KILN_OP_SUB, KILN_OP_MUL, KILN_OP_MAX, KILN_OP_MIN};
  int target = 8 + pick(f, MAXN - 16);
  while (f->n < target) {
    int a = f->n - 1 - pick(f, f->n < 6 ? f->n : 6); /* mostly recent nodes: chains */
    if (pick(f, 4) == 0) a = pick(f, f->n);
    const kiln_gnode *x = &f->g->nodes[a];
    int r = x->rank;
    int64_t sh[2] = {x->shape[0], x->shape[1]};
    switch (pick(f, 10)) {
      case 0: case 1: {
        int op = un[pick(f, 6)];
        if (op == KILN_OP_EXP) { /* keep magnitudes sane: exp(tanh(x)) */
          int t = node(f, KILN_OP_TANH, dt, r, sh, 1, &a, 0, NULL);
          node(f, op, dt, r, sh, 1, &t, 0, NULL);
        } else {
          node(f, op, dt, r, sh, 1, &a, 0, NULL);
        }
        break;
      }
      case 2: case 3: {
        int b = partner(f, a);
        int ins[2] = {a, b};
        node(f, bi[pick(f, 5)], dt, r, sh, 2, ins, 0, NULL);
        break;
      }
      case 4: { /* broadcast a row- or column-shaped node */
        if (sh[0] == 1 || sh[1] == 1) {
          int64_t to[2] = {sh[0] == 1 ? A : sh[0], sh[1] == 1 ? B : sh[1]};
          if (sh[0] == 1 && sh[1] == 1) to[pick(f, 2)] = 1;
          node(f, KILN_OP_EXPAND, dt, 2, to, 1, &a, 0, NULL);
        }
        break;
      }
      case 5: case 6: { /* reductions keep magnitudes in check with a tanh first */
        int64_t mask = 1 + pick(f, 3);
        int t = node(f, KILN_OP_TANH, dt, r, sh, 1, &a, 0, NULL);
        int64_t to[2] = {(mask & 1) ? 1 : sh[0], (mask & 2) ? 1 : sh[1]};
        int op = pick(f, 3) ? KILN_OP_REDUCE_SUM : KILN_OP_REDUCE_MAX;
        node(f, op, dt, 2, to, 1, &t, 1, &mask);
        break;
      }
      case 7: {
        int64_t perm[2] = {1, 0}, to[2] = {sh[1], sh[0]};
        int kind = pick(f, 4);
        if (kind == 0) {
          node(f, KILN_OP_PERMUTE, dt, 2, to, 1, &a, 2, perm);
        } else if (kind == 1) {
          node(f, KILN_OP_RESHAPE, dt, 2, to, 1, &a, 0, NULL);
        } else if (kind == 2) { /* pad by one on each side, then crop back */
          int64_t pd[4] = {1, 0, 0, 1}, ps[2] = {sh[0] + 1, sh[1] + 1}, sl[4] = {1, 0, 1, 1};
          int p = node(f, KILN_OP_PAD, dt, 2, ps, 1, &a, 4, pd);
          f->g->nodes[p].fattr = 0.25;
          node(f, KILN_OP_SLICE, dt, 2, sh, 1, &p, 4, sl);
        } else { /* the softmax/layer-norm motif: x op broadcast(reduce(x)) */
          int64_t mask = 1 + pick(f, 2), rs[2] = {(mask & 1) ? 1 : sh[0], (mask & 2) ? 1 : sh[1]};
          int t = node(f, KILN_OP_TANH, dt, r, sh, 1, &a, 0, NULL);
          int red = node(f, pick(f, 2) ? KILN_OP_REDUCE_MAX : KILN_OP_REDUCE_SUM, dt, 2, rs, 1, &t, 1, &mask);
          int e = node(f, KILN_OP_EXPAND, dt, 2, sh, 1, &red, 0, NULL);
          int ins[2] = {t, e};
          node(f, bi[pick(f, 5)], dt, 2, sh, 2, ins, 0, NULL);
        }
        break;
      }
      case 8: {
        int64_t ia[4] = {pick(f, (int)sh[0]), 0, 1 + pick(f, 2), 1};
        int64_t to[2] = {(sh[0] - ia[0] + ia[2] - 1) / ia[2], sh[1]};
        if (pick(f, 2)) {
          node(f, KILN_OP_SLICE, dt, 2, to, 1, &a, 4, ia);
        } else { /* concat with itself along axis 1, then slice back */
          int ins[2] = {a, a};
          int64_t ax = 1, cs[2] = {sh[0], 2 * sh[1]}, sl[4] = {0, sh[1] / 2, 1, 1};
          int c = node(f, KILN_OP_CONCAT, dt, 2, cs, 2, ins, 1, &ax);
          node(f, KILN_OP_SLICE, dt, 2, sh, 1, &c, 4, sl);
        }
        break;
      }
      default: { /* matmul with a transposed partner: [m,k] x [k,m] */
        int b = partner(f, a);
        int64_t perm[2] = {1, 0}, tsh[2] = {sh[1], sh[0]}, o[2] = {sh[0], sh[0]};
        int t = node(f, KILN_OP_PERMUTE, dt, 2, tsh, 1, &b, 2, perm);
        int ins[2] = {a, t};
        int mm = node(f, KILN_OP_MATMUL, dt, 2, o, 2, ins, 0, NULL);
        node(f, KILN_OP_TANH, dt, 2, o, 1, &mm, 0, NULL); /* bounded */
        break;
      }
    }
  }
  kiln_graph *g = f->g;
  g->n_nodes = f->n;
  g->n_in_idx = f->n_in_idx;
  g->n_outputs = 1 + pick(f, 4);
  int used_alias[4] = {0};
  for (int o = 0; o < g->n_outputs; o++) {
    int n = o == 0 ? f->n - 1 : 4 + pick(f, f->n - 4);
    if (pick(f, 8) == 0) n = pick(f, 4); /* an input as an output */
    g->output_node[o] = n;
    g->output_alias[o] = -1;
    for (int i = 0; i < 4 && pick(f, 2); i++) /* donate a same-shaped input */
      if (!used_alias[i] && same(&g->nodes[g->input_node[i]], &g->nodes[n])) {
        used_alias[i] = 1;
        g->output_alias[o] = i;
        break;
      }
  }
  g->hash = kiln_graph_hash(g);
  return g;
}

/* f32 GEMM libraries round differently from ref's loop, and chained
 * matmuls amplify it: a looser bound when the graph has one. */
static int close_enough(double a, double b, int dt, int has_mm) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (a == b) return 1;
  double tol = dt == KILN_F32 ? (has_mm ? 1e-3 : 2e-5) : 1e-11;
  return fabs(a - b) <= tol * (1 + fabs(b));
}

static void check_graph(kiln_backend *cpu, kiln_backend *ref, kiln_graph *g, int dt, int gi) {
  char verr[256];
  if (kiln_graph_verify(g, verr, sizeof verr)) {
    KT_FAIL("graph %d invalid: %s", gi, verr);
    return;
  }
  size_t es = dt == KILN_F32 ? 4 : 8;
  void *in[4], *rin[4], *out_ref[4], *out_cpu[4];
  uint64_t s = 99 + (uint64_t)gi;
  for (int i = 0; i < 4; i++) {
    size_t n = (size_t)kiln_gnode_numel(&g->nodes[g->input_node[i]]);
    in[i] = malloc(n * es + 8);
    rin[i] = malloc(n * es + 8);
    for (size_t k = 0; k < n; k++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      double v = (double)((s >> 40) & 0xffff) / 16384.0 - 2.0;
      if (dt == KILN_F32) ((float *)in[i])[k] = (float)v;
      else ((double *)in[i])[k] = v;
    }
    memcpy(rin[i], in[i], n * es);
  }
  for (int o = 0; o < g->n_outputs; o++) {
    size_t bytes = kiln_gnode_bytes(&g->nodes[g->output_node[o]]);
    out_ref[o] = malloc(bytes + 8);
    int a = g->output_alias[o];
    out_cpu[o] = a >= 0 ? in[a] : malloc(bytes + 8);
  }
  kiln_err err = {0};
  kiln_executable *er = NULL, *ec = NULL;
  kiln_status st = ref->vt->compile(ref, g, NULL, &er, &err);
  if (st == KILN_OK) st = ref->vt->execute(ref, er, rin, out_ref, &err);
  KT_CHECK_MSG(st == KILN_OK, "graph %d ref: %s", gi, err.msg);
  st = cpu->vt->compile(cpu, g, NULL, &ec, &err);
  if (st == KILN_OK) st = cpu->vt->execute(cpu, ec, in, out_cpu, &err);
  KT_CHECK_MSG(st == KILN_OK, "graph %d cpu: %s", gi, err.msg);
  int has_mm = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) has_mm |= g->nodes[i].op == KILN_OP_MATMUL;
  for (int o = 0; o < g->n_outputs && st == KILN_OK; o++) {
    int64_t n = kiln_gnode_numel(&g->nodes[g->output_node[o]]);
    int bad = 0;
    for (int64_t k = 0; k < n && !bad; k++) {
      double a = dt == KILN_F32 ? ((float *)out_cpu[o])[k] : ((double *)out_cpu[o])[k];
      double b = dt == KILN_F32 ? ((float *)out_ref[o])[k] : ((double *)out_ref[o])[k];
      if (!close_enough(a, b, dt, has_mm)) {
        KT_FAIL("graph %d output %d (node %d, alias %d) elem %lld: cpu %.9g ref %.9g", gi, o, g->output_node[o],
                g->output_alias[o], (long long)k, a, b);
        bad = 1;
      }
    }
    if (bad && getenv("KILN_FUZZ_VERBOSE")) kiln_graph_print(g, stderr);
  }
  if (er) ref->vt->executable_free(ref, er);
  if (ec) cpu->vt->executable_free(cpu, ec);
  for (int o = 0; o < g->n_outputs; o++) {
    free(out_ref[o]);
    if (g->output_alias[o] < 0) free(out_cpu[o]);
  }
  for (int i = 0; i < 4; i++) free(in[i]), free(rin[i]);
}

KT_TEST(random_fused_graphs_match_ref) {
  kiln_backend_config cfg = {.num_threads = 2, .cache_dir = NULL};
  kiln_backend *cpu = NULL, *ref = NULL;
  kiln_err err = {0};
  KT_CHECK(kiln_backend_cpu_create(&cfg, &cpu, &err) == KILN_OK);
  KT_CHECK(kiln_backend_ref_create(&cfg, &ref, &err) == KILN_OK);
  if (!cpu || !ref) return;
  const char *env = getenv("KILN_FUZZ_GRAPHS");
  int n = env ? atoi(env) : 60;
  fz f = {.s = 20261122};
  for (int gi = 0; gi < n; gi++) {
    int dt = gi % 4 == 3 ? KILN_F64 : KILN_F32;
    kiln_graph *g = gen(&f, dt);
    check_graph(cpu, ref, g, dt, gi);
    kiln_graph_free(g);
  }
  cpu->vt->destroy(cpu);
  ref->vt->destroy(ref);
}

KT_MAIN(KT_CASE(random_fused_graphs_match_ref))
