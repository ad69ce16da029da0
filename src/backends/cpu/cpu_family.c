/* Families of graphs on the cpu backend (docs/dynamic-shapes.md): a graph
 * whose input sizes vary is compiled once for every size.
 *
 * The first graph of a family (ir/symshape.h: the graph, which of its sizes
 * follow the varying input dimensions) makes the family's kernels: two
 * instances of the graph at sizes that are distinct primes above every
 * constant size are scheduled; their schedules must be the same (not their
 * sizes); each loop kernel is generated for both, with argument 0 the
 * symbol values, and read back into one text valid at every size
 * (kiln_codegen_family). Those texts are what the C compiler sees, once.
 *
 * A later graph of the same family (it binds: same ops, attributes and
 * constants, every size its expression at the new symbol values) is only
 * scheduled: its memory plan, GEMM sizes and loop sizes are its own, its
 * schedule must have the family's structure, and its loop kernels are the
 * family's, told the symbol values through argument 0. No code is
 * generated and the C compiler does not run: a new size costs a plan.
 *
 * Whatever does not fit (no symbol left, a schedule that differs, a kernel
 * whose instances differ other than by sizes) falls back to compiling the
 * graph as it is: the family is an optimisation, never a different result.
 * A family that failed is remembered, so its graphs do not try again. */
#include "backends/cpu/cpu_family.h"

#include "base/hash.h"
#include "base/text.h"

/* One family: its first graph and symbols (to bind later graphs), the
 * structure of its schedule, and per kernel of the schedule the family's
 * text (NULL for kernels without one) and loop size. */
struct kiln_cpu_family {
  uint64_t hash;
  kiln_graph *g0;
  kiln_symshape s0;
  uint64_t sig;
  int32_t n_kernels;
  kiln_kernel_src *tmpl;
  uint8_t *same_src; /* per kernel: 1 when its text is an earlier kernel's (shared: the kernel table finds
                      * it by pointer, kent.family_src) */
  kiln_sym_mono *items;
  const char **labels; /* per kernel: its op list (interned), see kiln_cpu_family_labels */
  /* the instance at the first primes and its schedule: the fusion every
   * later size reuses (kiln_sched_build_like) */
  kiln_graph *tg;
  kiln_sched *ts;
  int failed;
  int64_t sym_floor; /* kiln_codegen_kernel_sym: below it, a size is a constant at every instance */
  char why[400];
  /* the intermediate buffers of every size of the family: one arena, grown
   * to the largest size run so far, instead of one per size (a new length
   * of a variable-length workload would otherwise map and touch its own) */
  kiln_cpu_arena arena;
};
typedef struct kiln_cpu_family fam;

/* Families kept per backend (made ones and failed ones, which answer later
 * graphs of their structure at once); beyond, graphs compile as they are. */
#define KILN_CPU_MAX_FAMILIES 256

struct kiln_cpu_families {
  fam **v; /* each allocated once: executables point into them */
  size_t n, cap;
};

static void fam_free(kiln_backend *kb, fam *m) {
  if (!m) return;
  kiln_graph_free(m->g0);
  kiln_symshape_clear(&m->s0);
  for (int32_t k = 0; m->tmpl && k < m->n_kernels; k++) {
    if (m->same_src && m->same_src[k]) m->tmpl[k].src = NULL; /* the earlier kernel's */
    kiln_kernel_src_clear(&m->tmpl[k]);
  }
  free(m->tmpl);
  free(m->same_src);
  free(m->items);
  free(m->labels);
  kiln_sched_free(m->ts);
  kiln_graph_free(m->tg);
  if (m->arena.p) kiln_cpu_scratch_event(kb, m->arena.p, -(int64_t)m->arena.cap);
  kiln_cpu_arena_release(&m->arena);
  pthread_mutex_destroy(&m->arena.mu);
  free(m);
}

void kiln_cpu_families_free(kiln_backend *kb, kiln_cpu_families *f) {
  if (!f) return;
  for (size_t i = 0; i < f->n; i++) fam_free(kb, f->v[i]);
  free(f->v);
  free(f);
}

/* The structure of a schedule, not its sizes: kernels (kind, members,
 * stores, operands), buffers (kind, graph input or output number) and
 * which buffer each node is read from. */
static uint64_t sched_signature(const kiln_sched *s) {
  uint64_t h = kiln_hash_combine(0x736967ULL, (uint64_t)s->n_kernels);
  for (int32_t i = 0; i < s->n_kernels; i++) {
    const kiln_skernel *k = &s->kernels[i];
    h = kiln_hash_combine(h, (uint64_t)k->kind | (uint64_t)k->row << 8 | (uint64_t)k->line << 16 |
                                 (uint64_t)k->rank << 24 | (uint64_t)k->mask << 32);
    h = kiln_hash_combine(h, (uint64_t)(uint32_t)k->seed | (uint64_t)(uint32_t)k->n_members << 32);
    for (int32_t m = 0; m < k->n_members; m++) h = kiln_hash_combine(h, (uint64_t)k->members[m]);
    h = kiln_hash_combine(h, (uint64_t)k->n_stores);
    for (int32_t m = 0; m < k->n_stores; m++) h = kiln_hash_combine(h, (uint64_t)k->stores[m]);
    h = kiln_hash_combine(h, (uint64_t)(uint32_t)k->node | (uint64_t)(uint32_t)k->mm << 32);
    h = kiln_hash_combine(h, (uint64_t)(uint32_t)k->a.node | (uint64_t)k->a.trans << 32 | (uint64_t)k->b.trans << 33);
    h = kiln_hash_combine(h, (uint64_t)(uint32_t)k->b.node | (uint64_t)(uint32_t)k->c_node << 32);
    h = kiln_hash_combine(h, (uint64_t)(uint32_t)k->alpha_node | (uint64_t)(uint32_t)k->src_buf << 32);
    h = kiln_hash_combine(h, (uint64_t)(uint32_t)k->dst_buf);
  }
  h = kiln_hash_combine(h, (uint64_t)s->n_bufs);
  for (int32_t i = 0; i < s->n_bufs; i++)
    h = kiln_hash_combine(h, (uint64_t)s->bufs[i].kind | (uint64_t)(uint32_t)s->bufs[i].index << 8 |
                                 (uint64_t)(uint32_t)s->bufs[i].parent << 32);
  for (int32_t i = 0; i < s->g->n_nodes; i++)
    h = kiln_hash_combine(h, (uint64_t)(uint32_t)s->buf_of[i] | (uint64_t)s->mat[i] << 32);
  return h;
}

static void fail(fam *m, const char *what, const kiln_err *e) {
  m->failed = 1;
  kiln_text w = kiln_text_on(m->why, sizeof m->why);
  kiln_text_printf(&w, "%s%s%s", what, e ? ": " : "", e ? e->msg : "");
}

/* The sums of two products of symbols among the family's sizes and values
 * (the candidates literals read back as, kiln_sym_poly): into out[0..cap),
 * returns how many. */
static int family_polys(const kiln_symshape *s, kiln_sym_poly *out, int cap) {
  int n = 0;
  for (int32_t i = 0; i < s->n_nodes + s->n_vals; i++) /* the sizes, then the values that are sizes (T - U) */
    for (int d = 0; d < (i < s->n_nodes ? KILN_MAX_RANK : 1); d++) {
      const kiln_symdim *v = i < s->n_nodes ? kiln_symshape_dim(s, i, d) : &s->vals[i - s->n_nodes].e;
      if (!v->mask2) continue;
      kiln_sym_poly p = {v->coeff, v->coeff2, {0}, {0}};
      for (int k = 0; k < KILN_SYM_MAX; k++) p.e1[k] = v->mask >> k & 1, p.e2[k] = v->mask2 >> k & 1;
      int j = 0;
      while (j < n && memcmp(&out[j], &p, sizeof p)) j++;
      if (j == n && n < cap) out[n++] = p;
    }
  return n;
}

/* The sums of symbols a family's kernels read literals back as. */
typedef struct fam_polys {
  kiln_sym_poly v[16];
  int n;
} fam_polys;

/* Kernel i's family text read back from instance a's text ka and the
 * instance at px (schedule sx) into *out, *items. */
static kiln_status read_kernel(const fam *m, const kiln_kernel_src *ka, const kiln_sched *sx, int32_t i,
                               const int64_t *pa, const int64_t *px, const fam_polys *fp, kiln_kernel_src *out,
                               kiln_sym_mono *items, kiln_err *e) {
  kiln_kernel_src kx;
  kiln_status st = kiln_codegen_kernel_sym(sx, i, m->sym_floor, m->s0.n_syms, px, &kx, e);
  if (st != KILN_OK) return st;
  st = kiln_codegen_family(ka, &kx, m->s0.n_syms, pa, px, fp->v, fp->n, out, items, e);
  kiln_kernel_src_clear(&kx);
  return st;
}

/* The family's kernels from its instances at pa and pb (schedules sa, sb);
 * with sums of symbols among its sizes (fp), each kernel is read back from
 * a third instance (sc at pc) too and must read the same: a literal that
 * happened to read back as another expression at two sets of primes does
 * not at a third. */
static void make_templates(fam *m, const kiln_sched *sa, const kiln_sched *sb, const kiln_sched *sc,
                           const int64_t *pa, const int64_t *pb, const int64_t *pc, const fam_polys *fp) {
  int32_t nk = sa->n_kernels;
  m->tmpl = calloc((size_t)nk + 1, sizeof *m->tmpl);
  m->items = calloc((size_t)nk + 1, sizeof *m->items);
  m->labels = calloc((size_t)nk + 1, sizeof *m->labels);
  m->same_src = calloc((size_t)nk + 1, 1);
  if (!m->tmpl || !m->items || !m->labels || !m->same_src) return fail(m, "out of memory", NULL);
  m->n_kernels = nk;
  for (int32_t i = 0; i < nk && !m->failed; i++) {
    const kiln_skernel *k = &sa->kernels[i];
    if (k->kind != KILN_SK_LOOP || k->n_stores == 0) continue;
    kiln_kernel_src ka, t3 = {0};
    kiln_sym_mono it3;
    kiln_err e = {0};
    kiln_status st = kiln_codegen_kernel_sym(sa, i, m->sym_floor, m->s0.n_syms, pa, &ka, &e);
    if (st == KILN_OK) st = read_kernel(m, &ka, sb, i, pa, pb, fp, &m->tmpl[i], &m->items[i], &e);
    if (st == KILN_OK && sc) { /* the third reading */
      st = read_kernel(m, &ka, sc, i, pa, pc, fp, &t3, &it3, &e);
      if (st == KILN_OK && (strcmp(t3.src, m->tmpl[i].src) || memcmp(&it3, &m->items[i], sizeof it3)))
        st = kiln_err_set(&e, KILN_ERR_UNSUPPORTED, "a third instance reads back otherwise");
      kiln_kernel_src_clear(&t3);
      if (st != KILN_OK) kiln_kernel_src_clear(&m->tmpl[i]);
    }
    kiln_kernel_src_clear(&ka);
    if (st != KILN_OK) {
      char what[64];
      snprintf(what, sizeof what, "kernel %d", (int)i);
      fail(m, what, &e);
      continue;
    }
    for (int32_t q = 0; q < i; q++) /* a text made before (a model's repeated layers): one copy */
      if (m->tmpl[q].src && !m->same_src[q] && m->tmpl[q].hash == m->tmpl[i].hash &&
          strcmp(m->tmpl[q].src, m->tmpl[i].src) == 0) {
        free(m->tmpl[i].src);
        m->tmpl[i].src = m->tmpl[q].src;
        m->same_src[i] = 1;
        break;
      }
  }
}

/* The smallest size a symbolic dimension of g takes at the instances gi:
 * above every constant size (the primes are), and at most any size that
 * varies at every instance, so the kernels of both instances make the same
 * choice about a length (kiln_codegen_kernel_sym). */
static int64_t sym_floor(const kiln_graph *g, const kiln_symshape *s, const kiln_graph *const *gi, int n) {
  int64_t lo = INT64_MAX;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int d = 0; d < g->nodes[i].rank; d++)
      if (kiln_symshape_dim(s, i, d)->mask)
        for (int k = 0; k < n; k++)
          if (gi[k]->nodes[i].shape[d] < lo) lo = gi[k]->nodes[i].shape[d];
  return lo;
}

/* A new family from g: its symbols, two instances, their schedules, its
 * kernels. m->failed says whether it can serve. */
static void make_family(fam *m, const kiln_graph *g, int n_dyn, const kiln_sym_origin *dyn) {
  kiln_err e = {0};
  if (kiln_symshape_infer(g, n_dyn, dyn, &m->s0, &e) != KILN_OK) return fail(m, "symbols", &e);
  if (m->s0.n_syms == 0) return fail(m, "no size varies (sizes 0 and 1 stay constants)", NULL);
  m->hash = kiln_symshape_hash(g, &m->s0);
  m->g0 = kiln_graph_clone(g);
  int64_t pa[KILN_SYM_MAX], pb[KILN_SYM_MAX], pc[KILN_SYM_MAX];
  kiln_symshape_primes(g, &m->s0, KILN_CG_SYM_ADD_MARGIN, pa, pb); /* a size's offset is read back below the margin */
  fam_polys fp;
  fp.n = family_polys(&m->s0, fp.v, 16);
  int third = fp.n > 0; /* sums of symbols: a third instance checks the reading */
  if (third) kiln_symshape_primes_spread(g, &m->s0, KILN_CG_SYM_ADD_MARGIN, (int64_t *const[]){pa, pb, pc}, 3);
  kiln_graph *ga = m->g0 ? kiln_symshape_instance(g, &m->s0, pa) : NULL;
  kiln_graph *gb = ga ? kiln_symshape_instance(g, &m->s0, pb) : NULL;
  kiln_graph *gc = gb && third ? kiln_symshape_instance(g, &m->s0, pc) : NULL;
  if (gb && (!third || gc)) m->sym_floor = sym_floor(g, &m->s0, (const kiln_graph *const[]){ga, gb, gc}, third ? 3 : 2);
  kiln_sched *sa = NULL, *sb = NULL, *sc = NULL;
  char why[160];
  if (!gb || (third && !gc)) fail(m, "the instances' sizes overflow", NULL);
  else if (kiln_graph_verify(ga, why, sizeof why) || kiln_graph_verify(gb, why, sizeof why) ||
           (gc && kiln_graph_verify(gc, why, sizeof why))) {
    kiln_err ve = {.code = KILN_ERR_INVALID_ARGUMENT};
    kiln_text w = kiln_text_on(ve.msg, sizeof ve.msg);
    kiln_text_printf(&w, "%s", why);
    if (strstr(why, "(slice ") && strstr(why, "overrun")) /* x[:T] of a fixed tensor: its instances overrun it */
      kiln_text_printf(&w, " (a slice of a fixed tensor by a varying length: take its rows with "
                           "kiln_index_select by kiln_arange(0, T) for one family)");
    fail(m, "an instance is not a valid graph", &ve); /* a size that does not follow its symbol */
  }
  else if (kiln_sched_build(ga, &sa, &e) != KILN_OK || kiln_sched_build(gb, &sb, &e) != KILN_OK ||
           (gc && kiln_sched_build(gc, &sc, &e) != KILN_OK))
    fail(m, "scheduling an instance", &e);
  else if ((m->sig = sched_signature(sa)) != sched_signature(sb) || (sc && sched_signature(sc) != m->sig))
    fail(m, "the instances' schedules differ", NULL);
  else
    make_templates(m, sa, sb, sc, pa, pb, pc, &fp);
  if (!m->failed) { /* kept: later sizes take its fusion */
    m->tg = ga;
    m->ts = sa;
    ga = NULL;
    sa = NULL;
  }
  kiln_sched_free(sa);
  kiln_sched_free(sb);
  kiln_sched_free(sc);
  kiln_graph_free(ga);
  kiln_graph_free(gb);
  kiln_graph_free(gc);
}

/* The family g belongs to (made when new), or NULL (out of memory). Under
 * b->mu for the table; the family is made outside it and inserted after. */
static fam *find_family(cpu_backend *b, const kiln_graph *g, int n_dyn, const kiln_sym_origin *dyn, int *made,
                        int64_t *v) {
  *made = 0;
  /* binding decides (the family's own symbols, not those g's sizes would
   * suggest: at length 2 a fixed slice [0:2] looks like all of it) */
  pthread_mutex_lock(&b->mu);
  kiln_cpu_families *f = b->fams;
  for (size_t i = 0; f && i < f->n; i++) {
    fam *m = f->v[i];
    if (m->g0 && m->g0->n_nodes == g->n_nodes && m->g0->n_inputs == g->n_inputs &&
        kiln_symshape_bind(m->g0, &m->s0, g, v, NULL)) {
      pthread_mutex_unlock(&b->mu);
      return m;
    }
  }
  size_t n_fams = f ? f->n : 0;
  pthread_mutex_unlock(&b->mu);
  /* a bounded table: a program whose graphs keep changing otherwise than by
   * sizes (a growing concat) would make a family, failed, per compile */
  if (n_fams >= KILN_CPU_MAX_FAMILIES) return NULL;
  fam *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  pthread_mutex_init(&m->arena.mu, NULL);
  make_family(m, g, n_dyn, dyn);
  pthread_mutex_lock(&b->mu);
  if (!b->fams) b->fams = calloc(1, sizeof *b->fams);
  f = b->fams;
  if (f && f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 8;
    fam **v = realloc(f->v, sizeof *v * cap);
    if (v) f->v = v, f->cap = cap;
  }
  int in = f && f->n < f->cap;
  if (in) f->v[f->n++] = m, *made = 1;
  pthread_mutex_unlock(&b->mu);
  if (!in) { /* out of memory: this graph compiles as it is */
    fam_free(&b->base, m);
    return NULL;
  }
  return m;
}

/* The hinted family, when it is one of b's, usable, and g's input sizes
 * give the hint's values (symbols >= 2); else NULL. */
static fam *hinted(cpu_backend *b, const kiln_graph *g, const kiln_family_hint *hint, int64_t *v) {
  if (!hint || !hint->family) return NULL;
  fam *m = NULL;
  pthread_mutex_lock(&b->mu);
  for (size_t i = 0; b->fams && i < b->fams->n && !m; i++)
    if (b->fams->v[i] == hint->family) m = b->fams->v[i];
  pthread_mutex_unlock(&b->mu);
  if (!m || m->failed || !m->g0 || m->g0->n_nodes != g->n_nodes || m->g0->n_inputs != g->n_inputs ||
      m->g0->n_outputs != g->n_outputs || !kiln_symshape_values(&m->s0, g, v))
    return NULL;
  for (int k = 0; k < m->s0.n_syms; k++)
    if (v[k] < 2 || v[k] != hint->values[k]) return NULL;
  return m;
}

kiln_cpu_family *kiln_cpu_family_of(cpu_backend *b, const kiln_graph *g, int n_dyn, const kiln_sym_origin *dyn,
                                    const kiln_family_hint *hint, int64_t *values, int *made) {
  memset(values, 0, sizeof *values * KILN_SYM_MAX);
  *made = 0;
  fam *h = hinted(b, g, hint, values);
  if (h) return h;
  fam *m = find_family(b, g, n_dyn, dyn, made, values);
  if (m && *made && !m->failed) memcpy(values, m->s0.value, sizeof m->s0.value);
  return m;
}

kiln_status kiln_cpu_family_schedule(const kiln_cpu_family *f, int made, const kiln_graph *g, kiln_sched **out,
                                     kiln_err *err) {
  const fam *m = f;
  if (m && !made && !m->failed && m->ts) {
    kiln_err e = {0};
    if (kiln_sched_build_like(m->ts, g, out, &e) == KILN_OK) return KILN_OK;
    if (e.code == KILN_ERR_OUT_OF_MEMORY) return kiln_err_set(err, e.code, "%s", e.msg);
  }
  return kiln_sched_build(g, out, err);
}

/* A kernel's loop size at the symbol values v (kiln_sym_mono); -1 when it
 * overflows. */
static int64_t items_at(const kiln_sym_mono *it, int n, const int64_t *v) {
  int64_t x = it->coeff, y = it->coeff2;
  for (int k = 0; k < n; k++) {
    for (int e = 0; e < it->exp[k]; e++)
      if (__builtin_mul_overflow(x, v[k], &x)) return -1;
    for (int e = 0; y && e < it->exp2[k]; e++)
      if (__builtin_mul_overflow(y, v[k], &y)) return -1;
  }
  if (__builtin_add_overflow(x, y, &x) || __builtin_add_overflow(x, it->add, &x)) return -1;
  return x;
}

kiln_status kiln_cpu_family_sources(const kiln_cpu_family *f, int made, const int64_t *values, const kiln_sched *s,
                                    kiln_kernel_src *srcs, int64_t *symvals, kiln_cpu_arena **arena, int *how, char *why,
                                    size_t why_cap, kiln_err *err) {
  fam *m = (fam *)f; /* the family's arena is handed out writable */
  *how = 0;
  if (!m) {
    snprintf(why, why_cap, "no family: out of memory, or %d families made already", KILN_CPU_MAX_FAMILIES);
    return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "%s", why);
  }
  if (m->failed) {
    kiln_text w = kiln_text_on(why, why_cap);
    kiln_text_printf(&w, "%s", m->why);
    return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "%s", m->why);
  }
  /* a schedule made like the family's is compared with it directly (its
   * member lists are the family's: cheaper than hashing it); one made on
   * its own, by its signature */
  int same = s->borrowed ? kiln_sched_same_structure(s, m->ts) : sched_signature(s) == m->sig;
  if (!same || s->n_kernels != m->n_kernels) {
    snprintf(why, why_cap, "this size's schedule differs from the family's");
    return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "%s", why);
  }
  const int64_t *v = values;
  for (int32_t i = 0; i < s->n_kernels; i++) { /* every loop size first: nothing is written for a size that fails */
    if (!m->tmpl[i].src) continue;
    if (items_at(&m->items[i], m->s0.n_syms, v) < 0) {
      snprintf(why, why_cap, "kernel %d: its loop size is negative at these sizes", (int)i);
      return kiln_err_set(err, KILN_ERR_UNSUPPORTED, "%s", why);
    }
  }
  for (int32_t i = 0; i < s->n_kernels; i++) {
    if (!m->tmpl[i].src) continue;
    int64_t items = items_at(&m->items[i], m->s0.n_syms, v);
    srcs[i] = m->tmpl[i]; /* the family's text, borrowed: it lives as long as the backend */
    srcs[i].borrowed = 1;
    srcs[i].family_name = m->tmpl[i].name;
    srcs[i].items = items;
  }
  memcpy(symvals, v, sizeof *v * KILN_SYM_MAX);
  *arena = &m->arena;
  *how = made ? 1 : 2;
  return KILN_OK;
}

const char **kiln_cpu_family_labels(const kiln_cpu_family *f) { return f ? ((fam *)f)->labels : NULL; }
