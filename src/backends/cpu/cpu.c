/* The cpu backend: schedule -> C kernels (compiled once, shared by source
 * hash across graphs) -> a compact plan interpreted by execute().
 *
 * Why a plan and not a generated per-graph driver: a driver in C would need
 * a compiler run for every new graph even when all its kernels are already
 * loaded; with the plan, a graph whose kernels are all known compiles in
 * microseconds and never starts the C compiler (docs/codegen.md).
 *
 * Thread-safety: compile serializes on the backend's mutex (the kernel
 * table and the compiler); execute of different executables may run
 * concurrently with compile and with each other; one executable runs one
 * execute at a time (its own mutex guards its scratch arena and timings).
 */
#include "backends/cpu/cpu_internal.h"

#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_family.h"
#include "base/text.h"

/* ───────────── kernel table ───────────── */

static kent *tab_find(cpu_backend *b, uint64_t h, const char *src) {
  if (!b->tab_cap) return NULL;
  for (size_t i = h & (b->tab_cap - 1);; i = (i + 1) & (b->tab_cap - 1)) {
    kent *e = &b->tab[i];
    if (!e->src) return NULL;
    if (e->hash == h && (e->family_src == src || strcmp(e->src, src) == 0)) return e;
  }
}

static int tab_insert(cpu_backend *b, uint64_t h, const char *src, const char *family_src, kernel_fn fn,
                      so_ref *owner) {
  if ((b->tab_n + 1) * 2 > b->tab_cap) {
    size_t cap = b->tab_cap ? b->tab_cap * 2 : 64;
    kent *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < b->tab_cap; i++) {
      if (!b->tab[i].src) continue;
      size_t j = b->tab[i].hash & (cap - 1);
      while (t[j].src) j = (j + 1) & (cap - 1);
      t[j] = b->tab[i];
    }
    free(b->tab);
    b->tab = t;
    b->tab_cap = cap;
  }
  char *copy = strdup(src);
  if (!copy) return -1;
  size_t i = h & (b->tab_cap - 1);
  while (b->tab[i].src) i = (i + 1) & (b->tab_cap - 1);
  b->tab[i] = (kent){h, copy, family_src, fn, owner};
  b->tab_n++;
  return 0;
}

/* Close an object no executable uses: its kernels leave the table (which
 * is rebuilt: open addressing has no deletion) and it is unmapped. */
static void so_release(cpu_backend *b, so_ref *r) {
  if (--r->refs > 0) return;
  size_t cap = b->tab_cap;
  kent *old = b->tab;
  kent *t = cap ? calloc(cap, sizeof *t) : NULL;
  if (cap && !t) return; /* out of memory: keep it loaded (correct, only not reclaimed) */
  b->tab = t;
  b->tab_n = 0;
  for (size_t i = 0; i < cap; i++) {
    if (!old[i].src) continue;
    if (old[i].owner == r) {
      free(old[i].src);
      continue;
    }
    size_t j = old[i].hash & (cap - 1);
    while (t[j].src) j = (j + 1) & (cap - 1);
    t[j] = old[i];
    b->tab_n++;
  }
  free(old);
  for (size_t i = 0; i < b->n_sos; i++)
    if (b->sos[i] == r) {
      b->sos[i] = b->sos[--b->n_sos];
      break;
    }
  kiln_so_close(r->so);
  free(r);
  kiln_counter_add("CpuObjectsUnloaded", 1);
}

/* ───────────── compile ───────────── */

static void exe_free(kiln_backend *kb, kiln_executable *e) {
  if (!e) return;
  if (e->n_uses) {
    cpu_backend *b = (cpu_backend *)kb;
    pthread_mutex_lock(&b->mu);
    for (int32_t i = 0; i < e->n_uses; i++) so_release(b, e->uses[i]);
    pthread_mutex_unlock(&b->mu);
  }
  free(e->uses);
  for (int32_t i = 0; e->steps && i < e->n_steps; i++)
    if (e->steps[i].kind == ST_COLL) free(e->steps[i].coll);
  free(e->steps);
  free(e->arg_bufs);
  free(e->gdims);
  free(e->names);
  free(e->bufs);
  if (e->arena) kiln_cpu_scratch_event(kb, e->arena, -(int64_t)e->scratch_bytes);
  if (!e->arena_adopted) free(e->arena);
  free(e->timings);
  free(e->sites);
  if (e->tile_buf) kiln_cpu_scratch_event(kb, e->tile_buf, -(int64_t)e->tile_cap);
  free(e->tile_buf);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

static void gemm_step(const kiln_sched *s, const kiln_skernel *k, step *st, int64_t **gdims) {
  const kiln_graph *g = s->g;
  const kiln_gnode *mm = &g->nodes[k->mm];
  int r = mm->rank;
  const int32_t *in = kiln_gnode_inputs(g, mm);
  const kiln_gnode *a = &g->nodes[in[0]], *b = &g->nodes[in[1]];
  st->kind = ST_GEMM;
  st->name = "gemm";
  st->f64 = mm->dtype == KILN_F64;
  st->dt = mm->dtype;
  st->cdt = g->nodes[k->node].dtype;
  st->m = mm->shape[r - 2];
  st->n = mm->shape[r - 1];
  st->k = a->shape[r - 1];
  st->ta = k->a.trans;
  st->tb = k->b.trans;
  st->lda = st->ta ? st->m : st->k;
  st->ldb = st->tb ? st->k : st->n;
  st->brank = r - 2;
  st->bshape = *gdims;
  st->sa = *gdims + (r - 2);
  st->sb = *gdims + 2 * (r - 2);
  int64_t *bshape = *gdims, *sa = bshape + (r - 2), *sb = sa + (r - 2);
  *gdims += 3 * (r - 2);
  for (int d = 0; d < r - 2; d++) {
    bshape[d] = mm->shape[d];
    sa[d] = k->a.batch_stride[d];
    sb[d] = k->b.batch_stride[d];
  }
  (void)b;
  st->abuf = s->buf_of[k->a.node];
  st->bbuf = s->buf_of[k->b.node];
  st->cbuf = s->buf_of[k->node];
  KILN_ASSERT(st->abuf >= 0 && st->bbuf >= 0 && st->cbuf >= 0); /* the schedule gives each a buffer */
  st->c0buf = k->c_node >= 0 ? kiln_sched_read_buf(s, k->c_node) : -1;
  st->alphabuf = k->alpha_node >= 0 ? kiln_sched_read_buf(s, k->alpha_node) : -1;
  st->alpha = k->alpha_c;
  st->beta = k->c_node >= 0 ? k->beta : 0.0;
  double batch = 1;
  for (int d = 0; d < r - 2; d++) batch *= (double)mm->shape[d];
  st->flops = 2.0 * batch * (double)st->m * (double)st->n * (double)st->k;
}

/* Every buffer step p (kernel p of the schedule) touches must be live at p
 * in the schedule's plan; a scratch buffer that is not may share its bytes
 * with another one (plan_arena), which would be a wrong value without any
 * error. The schedule computes liveness; this checks it against what the
 * step really reads and writes, so a disagreement is an internal error
 * instead. */
static int step_buffers_live(const kiln_sched *s, int32_t p, const step *sp, const int32_t *args) {
  int32_t ids[8], n = 0;
  if (sp->kind == ST_GEMM) {
    ids[n++] = sp->abuf, ids[n++] = sp->bbuf, ids[n++] = sp->cbuf;
    ids[n++] = sp->c0buf, ids[n++] = sp->alphabuf;
  } else if (sp->kind == ST_COPY || sp->kind == ST_COLL) {
    ids[n++] = sp->src, ids[n++] = sp->dst;
  }
  for (int32_t i = 0; i < (sp->kind == ST_LOOP ? sp->n_args : n); i++) {
    int32_t id = sp->kind == ST_LOOP ? args[i] : ids[i];
    if (id < 0) continue; /* the error word, or no such operand */
    const kiln_sbuf *bf = &s->bufs[id];
    if (bf->kind == KILN_SBUF_SCRATCH && (p < bf->first || p > bf->last)) return 0;
  }
  return 1;
}

/* Compiling a graph, in stages: generate the C of each loop kernel
 * (generate_kernels), compile the ones the kernel table lacks into one
 * object through the compiler's cache and add them to the table
 * (load_new_kernels), then bind each kernel of the schedule to a step of the
 * plan (bind_steps). cpu_compile runs them and fills the executable's info. */

/* A compile in progress: its schedule, kernel sources and timings. */
typedef struct compile_job {
  cpu_backend *b;
  const kiln_sched *s;
  kiln_kernel_src *srcs; /* per kernel; src NULL for non-loop or store-less kernels */
  kiln_executable *e;
  int32_t total_args, total_sites;
  int32_t n_names; /* names copied into the executable's (kernels not of a family) */
  size_t code_bytes;
  kiln_cc_result ccr;
  const char **labels; /* a family's loop kernel op lists, per kernel (kiln_cpu_loop_label), or NULL */
  kiln_err *err;
} compile_job;

static kiln_status compile_oom(kiln_err *err) {
  return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "cpu compile: out of memory");
}

/* The C source of every loop kernel that stores something. */
static kiln_status generate_kernels(compile_job *j) {
  const kiln_sched *s = j->s;
  kiln_status st = KILN_OK;
  for (int32_t i = 0; i < s->n_kernels && st == KILN_OK; i++) {
    const kiln_skernel *k = &s->kernels[i];
    if (k->kind != KILN_SK_LOOP || k->n_stores == 0) continue;
    st = kiln_codegen_kernel(s, i, &j->srcs[i], j->err);
    j->total_args += j->srcs[i].n_args;
    j->total_sites += j->srcs[i].n_sites;
    if (j->srcs[i].n_args > j->e->max_args) j->e->max_args = j->srcs[i].n_args;
  }
  return st;
}

/* Kernel i has source, is not in the table and is not the same kernel as an
 * earlier one of this graph. Under b->mu. */
static int kernel_is_new(const compile_job *j, int32_t i) {
  const kiln_kernel_src *srcs = j->srcs;
  if (!srcs[i].src || tab_find(j->b, srcs[i].hash, srcs[i].src)) return 0;
  for (int32_t k = 0; k < i; k++)
    if (srcs[k].src && srcs[k].hash == srcs[i].hash) return 0;
  return 1;
}

/* Take in a just-loaded object: a reference for it, and its kernels
 * (kernels ks[0..nk) of this graph) into the table. Under b->mu. An object
 * that could not be referenced is closed; once referenced, it stays (a
 * missing symbol leaves the kernels found so far usable). */
static kiln_status register_object(compile_job *j, kiln_so *so, const int32_t *ks, int32_t nk) {
  cpu_backend *b = j->b;
  const kiln_kernel_src *srcs = j->srcs;
  if (b->n_sos == b->cap_sos) {
    size_t cap = b->cap_sos ? b->cap_sos * 2 : 16;
    so_ref **v = realloc(b->sos, sizeof *v * cap);
    if (!v) {
      kiln_so_close(so);
      return compile_oom(j->err);
    }
    b->sos = v;
    b->cap_sos = cap;
  }
  so_ref *ref = calloc(1, sizeof *ref);
  if (!ref) {
    kiln_so_close(so);
    return compile_oom(j->err);
  }
  ref->so = so;
  b->sos[b->n_sos++] = ref;
  for (int32_t q = 0; q < nk; q++) {
    int32_t i = ks[q];
    if (!srcs[i].src || tab_find(b, srcs[i].hash, srcs[i].src)) continue;
    void *sym = kiln_so_symbol(so, srcs[i].name);
    if (!sym)
      return kiln_err_set(j->err, KILN_ERR_INTERNAL, "cpu compile: symbol %s missing in the kernels just loaded (%s)",
                          srcs[i].name, kiln_cc_command(b->cc));
    kernel_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    if (tab_insert(b, srcs[i].hash, srcs[i].src, srcs[i].family_name ? srcs[i].src : NULL, fn, ref))
      return compile_oom(j->err);
  }
  return KILN_OK;
}

/* The least kernel source worth a compiler process of its own: below it,
 * starting one costs more than the part would save. */
#define CC_PART_MIN_BYTES 8192
#define CC_MAX_PARTS 8

/* Every kernel not yet loaded goes into a translation unit (after the
 * prelude), compiled or found in the cache, loaded and registered. A large
 * graph's new kernels are split into up to one unit per pool thread, of
 * about equal source bytes, in kernel order, compiled at the same time
 * (kiln_cc_build_parts); the split depends only on the kernels, so the
 * same graph finds the same units in the disk cache. Under b->mu. */
static kiln_status load_new_kernels(compile_job *j) {
  cpu_backend *b = j->b;
  const kiln_sched *s = j->s;
  const kiln_kernel_src *srcs = j->srcs;
  size_t pre = strlen(kiln_codegen_prelude()), body = 0;
  int32_t n_new = 0, *ks = malloc(sizeof *ks * ((size_t)s->n_kernels + 1)); /* the new kernels, in order */
  if (!ks) return compile_oom(j->err);
  for (int32_t i = 0; i < s->n_kernels; i++) {
    if (srcs[i].src) j->code_bytes += srcs[i].len;
    if (!kernel_is_new(j, i)) continue;
    body += srcs[i].len + 1;
    ks[n_new++] = i;
  }
  if (!n_new) {
    free(ks);
    return KILN_OK;
  }
  int n_parts = (int)(body / CC_PART_MIN_BYTES);
  if (n_parts > b->num_threads) n_parts = b->num_threads;
  if (n_parts > CC_MAX_PARTS) n_parts = CC_MAX_PARTS;
  if (n_parts > n_new) n_parts = (int)n_new;
  if (n_parts < 1) n_parts = 1;
  const char **names = malloc(sizeof *names * (size_t)n_new); /* checked before an object is cached */
  char *units = malloc(body + (pre + 1) * (size_t)n_parts);
  kiln_status st = (names && units) ? KILN_OK : compile_oom(j->err);
  const int32_t n = n_new;
  const char *src[CC_MAX_PARTS];
  size_t len[CC_MAX_PARTS];
  const char *const *syms[CC_MAX_PARTS];
  int n_syms[CC_MAX_PARTS], first[CC_MAX_PARTS + 1];
  kiln_so *so[CC_MAX_PARTS] = {0};
  if (st == KILN_OK) {
    char *p = units;
    size_t done = 0;
    int32_t q = 0;
    for (int part = 0; part < n_parts; part++) { /* about its share of the bytes, one kernel at least */
      size_t upto = body * (size_t)(part + 1) / (size_t)n_parts;
      int last = part == n_parts - 1;
      first[part] = q;
      src[part] = p;
      syms[part] = names + q;
      p += sprintf(p, "%s", kiln_codegen_prelude());
      /* n - q >= n_parts - part here: every later part gets a kernel */
      while (q < n && (last || q == first[part] || (done < upto && n - q > n_parts - 1 - part))) {
        const kiln_kernel_src *k = &srcs[ks[q]];
        names[q] = k->name;
        memcpy(p, k->src, k->len);
        p += k->len;
        *p++ = '\n';
        done += k->len + 1;
        q++;
      }
      n_syms[part] = q - first[part];
      len[part] = (size_t)(p - src[part]);
      *p++ = 0;
    }
    first[n_parts] = n;
    /* KILN_DUMP_CODE=1: show every new translation unit (debugging aid) */
    for (int part = 0; part < n_parts && b->dump_code; part++)
      fprintf(stderr, "── kiln cpu: %d new kernel(s) ──\n%s\n", n_syms[part], src[part]);
    st = kiln_cc_build_parts(b->cc, n_parts, src, len, syms, n_syms, so, &j->ccr, j->err);
    for (int part = 0; part < n_parts; part++) {
      if (st == KILN_OK) st = register_object(j, so[part], ks + first[part], n_syms[part]);
      else if (so[part]) kiln_so_close(so[part]);
    }
    kiln_counter_add("CpuKernelsCompiled", n_new);
  }
  free(ks);
  free(names);
  free(units);
  return st;
}

/* The step of loop kernel i: its function from the table (which holds a
 * reference to its object for the executable), arguments and index-check
 * sites. Under b->mu. */
static void bind_loop_step(compile_job *j, int32_t i, step *sp, int32_t *argp, int32_t *sitep) {
  const kiln_sched *s = j->s;
  const kiln_kernel_src *src = &j->srcs[i];
  kiln_executable *e = j->e;
  kent *ke = tab_find(j->b, src->hash, src->src);
  KILN_ASSERT(ke);
  int32_t u = 0;
  while (u < e->n_uses && e->uses[u] != ke->owner) u++;
  if (u == e->n_uses) { /* a reference per object, held until exe_free */
    e->uses[e->n_uses++] = ke->owner;
    ke->owner->refs++;
  }
  sp->kind = ST_LOOP;
  sp->fn = ke->fn;
  sp->items = src->items;
  sp->grain = src->grain;
  sp->span = src->span;
  sp->n_args = src->n_args;
  if (src->borrowed) { /* a family's kernel: its argument list is the family's */
    sp->args = src->args;
  } else {
    sp->args = e->arg_bufs + *argp;
    memcpy(e->arg_bufs + *argp, src->args, sizeof *src->args * (size_t)src->n_args);
    *argp += src->n_args;
  }
  for (int32_t a = 0; a < src->n_args; a++)
    if (src->args[a] >= 0) sp->mem_bytes += (double)s->bufs[src->args[a]].bytes; /* not the error word, the symbols */
  sp->n_sites = src->n_sites;
  sp->site_off = *sitep;
  for (int32_t q = 0; q < src->n_sites; q++) {
    const kiln_graph *sg = s->g; /* the schedule's graph: sites are its node ids */
    const kiln_gnode *nd = &sg->nodes[src->sites[q]];
    int ax = (int)nd->iattr[0];
    e->sites[(*sitep)++] = (isite){kiln_op_name(nd->op), ax, sg->nodes[kiln_gnode_inputs(sg, nd)[0]].shape[ax], nd->loc};
  }
  if (src->family_name) { /* a family's kernel: its name is the family's */
    sp->name = src->family_name;
  } else {
    char *nm = e->names + 24 * (size_t)j->n_names++;
    memcpy(nm, src->name, sizeof src->name);
    sp->name = nm;
  }
}

/* The plan's arrays, sized for the schedule. */
static kiln_status alloc_plan(compile_job *j) {
  const kiln_sched *s = j->s;
  kiln_executable *e = j->e;
  size_t n_gdims = 0; /* the GEMMs' batch shapes and strides */
  for (int32_t i = 0; i < s->n_kernels; i++)
    if (s->kernels[i].kind == KILN_SK_GEMM) n_gdims += 3 * (size_t)(s->g->nodes[s->kernels[i].mm].rank - 2);
  e->steps = calloc((size_t)s->n_kernels + 1, sizeof *e->steps);
  e->arg_bufs = malloc(sizeof *e->arg_bufs * ((size_t)j->total_args + 1));
  e->gdims = malloc(sizeof *e->gdims * (n_gdims + 1));
  int32_t own = 0;
  for (int32_t i = 0; i < s->n_kernels; i++) own += j->srcs[i].src && !j->srcs[i].family_name;
  e->names = calloc((size_t)own + 1, 24);
  e->bufs = malloc(sizeof *e->bufs * ((size_t)s->n_bufs + 1));
  e->sites = calloc((size_t)j->total_sites + 1, sizeof *e->sites);
  e->uses = calloc((size_t)s->n_kernels + 1, sizeof *e->uses);
  if (!e->steps || !e->arg_bufs || !e->gdims || !e->names || !e->bufs || !e->sites || !e->uses)
    return compile_oom(j->err);
  return KILN_OK;
}

/* A step per kernel of the schedule (loop kernels without stores have
 * none), each checked against the planned buffer lifetimes. Under b->mu. */
static kiln_status bind_steps(compile_job *j) {
  const kiln_sched *s = j->s;
  kiln_executable *e = j->e;
  int32_t argp = 0, sitep = 0;
  int64_t *gdims = e->gdims;
  for (int32_t i = 0; i < s->n_kernels; i++) {
    const kiln_skernel *k = &s->kernels[i];
    step *sp = &e->steps[e->n_steps];
    if (k->kind == KILN_SK_LOOP) {
      if (!j->srcs[i].src) continue;
      bind_loop_step(j, i, sp, &argp, &sitep);
    } else if (k->kind == KILN_SK_GEMM) {
      gemm_step(s, k, sp, &gdims);
      sp->tile = k->tile;
    } else if (k->kind == KILN_SK_COLL) {
      sp->kind = ST_COLL;
      sp->coll = malloc(sizeof *sp->coll);
      if (!sp->coll) return compile_oom(j->err);
      kiln_backend_coll_init(s->g, k->node, sp->coll);
      sp->name = sp->coll->call.op;
      sp->src = s->buf_of[kiln_gnode_inputs(s->g, &s->g->nodes[k->node])[0]];
      sp->dst = s->buf_of[k->node];
      sp->bytes = kiln_gnode_bytes(&s->g->nodes[k->node]);
      sp->mem_bytes = (double)sp->bytes;
      sp->wait_at = k->wait_at;
    } else {
      sp->kind = ST_COPY;
      sp->name = "copy";
      sp->src = k->src_buf;
      sp->dst = k->dst_buf;
      sp->bytes = k->bytes;
      sp->mem_bytes = 2.0 * (double)sp->bytes;
    }
    if (!step_buffers_live(s, i, sp, sp->kind == ST_LOOP ? sp->args : NULL))
      return kiln_err_set(j->err, KILN_ERR_INTERNAL,
                          "cpu compile: kernel %d (%s) uses a buffer outside its planned lifetime", (int)i, sp->name);
    sp->kpos = i;
    sp->tag = (kiln_pool_tag){.flops = sp->flops, .bytes = sp->mem_bytes};
    const char *label = NULL;
    if (k->kind == KILN_SK_LOOP) { /* a family's kernels have one op list at every size */
      label = j->labels ? j->labels[i] : NULL;
      if (!label) label = kiln_cpu_loop_label(s, i);
      if (j->labels) j->labels[i] = label;
    }
    kiln_cpu_name_parts(s, i, sp, label);
    e->n_steps++;
  }
  return KILN_OK;
}

/* ───────────── attention tiles ───────────── */

/* Largest S (and P) of one batch entry a tile keeps in its scratch: past
 * it the scores no longer stay in L2, and the three steps run as planned */
enum { TILE_MAX_BYTES = 2 << 20 };

/* Can the GEMM step g1 (marked by the schedule, kiln_skernel.tile) and the
 * two after it run as an attention tile (cpu_execute.c, run_tile)? What
 * the schedule checked on the graph, checked again on the steps, and what
 * only the backend knows: the threads (one library call per entry, as
 * run_gemm makes them), the scratch size, KILN_TILE_ATTENTION=0. */
static int tile_ok(const cpu_backend *b, const kiln_executable *e, int32_t i) {
  const char *v = kiln_cfg()->tile_attention;
  if ((v && !strcmp(v, "0")) || i + 2 >= e->n_steps) return 0;
  const step *g1 = &e->steps[i], *r = g1 + 1, *g2 = g1 + 2;
  if (r->kind != ST_LOOP || g2->kind != ST_GEMM || r->kpos != g1->kpos + 1 || g2->kpos != g1->kpos + 2 ||
      r->span > 0)
    return 0;
  for (int q = 0; q < 2; q++) {
    const step *g = q ? g2 : g1;
    if (g->c0buf >= 0 || g->alphabuf >= 0 || g->cdt != g->dt || (g->dt != KILN_F32 && g->dt != KILN_F64) ||
        g->k <= 0 || g->brank != g1->brank)
      return 0;
  }
  if (g1->m <= 0 || g1->n <= 0 || g2->n <= 0 || g2->ta || g2->m != g1->m || g2->k != g1->n || g2->lda != g2->k ||
      g1->cbuf == g2->abuf)
    return 0;
  int64_t nb = 1, st = g1->m * g1->n;
  for (int d = g1->brank - 1; d >= 0; d--) {
    if (g2->bshape[d] != g1->bshape[d] || (g1->bshape[d] != 1 && g2->sa[d] != st)) return 0;
    st *= g1->bshape[d];
    nb *= g1->bshape[d];
  }
  size_t ent = (size_t)(g1->m * g1->n) * kiln_dtype_size((kiln_dtype)g1->dt);
  if (nb < 2 || nb < b->num_threads || r->items != nb * g1->m || ent > TILE_MAX_BYTES) return 0;
  int reads_s = 0, writes_p = 0;
  for (int32_t a = 0; a < r->n_args; a++) {
    reads_s |= r->args[a] == g1->cbuf;
    writes_p |= r->args[a] == g2->abuf;
  }
  return reads_s && writes_p;
}

/* Keep the tiles that can run; the first step of each carries the flops of
 * the three (its timing is theirs). */
static void check_tiles(compile_job *j) {
  kiln_executable *e = j->e;
  for (int32_t i = 0; i < e->n_steps; i++) {
    step *sp = &e->steps[i];
    if (sp->kind != ST_GEMM || !sp->tile) continue;
    if (!tile_ok(j->b, e, i)) {
      sp->tile = 0;
      continue;
    }
    for (int q = 1; q <= 2; q++) {
      sp->flops += sp[q].flops, sp->mem_bytes += sp[q].mem_bytes;
      sp[q].flops = sp[q].mem_bytes = 0;
      sp[q].tag.flops = sp[q].tag.bytes = 0;
    }
    sp->tag.flops = sp->flops, sp->tag.bytes = sp->mem_bytes;
    i += 2;
  }
}

/* The schedule's buffers and the numbers of kiln_exec_info. */
static void fill_info(const compile_job *j, const kiln_graph *g, uint64_t t0, uint64_t t1, uint64_t t2) {
  const kiln_sched *s = j->s;
  kiln_executable *e = j->e;
  for (int32_t i = 0; i < s->n_bufs; i++)
    e->bufs[i] = (xbuf){(int32_t)s->bufs[i].kind, s->bufs[i].index, s->bufs[i].offset};
  e->n_bufs = s->n_bufs;
  e->scratch_bytes = s->scratch_bytes;
  kiln_exec_info *in = &e->info;
  in->n_kernels = s->n_loop_kernels;
  in->n_gemm_calls = s->n_gemm_calls;
  for (int32_t i = 0; i < s->n_bufs; i++)
    if (s->bufs[i].kind == KILN_SBUF_INPUT) in->input_bytes += s->bufs[i].bytes;
  for (int32_t o = 0; o < g->n_outputs; o++) in->output_bytes += kiln_gnode_bytes(&g->nodes[g->output_node[o]]);
  in->aliased_bytes = s->aliased_bytes;
  in->scratch_bytes = s->scratch_bytes;
  in->code_bytes = j->code_bytes;
  in->from_disk_cache = j->ccr.from_disk_cache;
  in->codegen_ns = (double)(t1 - t0);
  in->cc_ns = j->ccr.cc_ns;
  in->load_ns = j->ccr.load_ns;
  in->compile_ns = (double)(t2 - t0);
}

/* The compile's plan for an observer (graph dumps): the schedule's kernels
 * and the sources generate_kernels made. Out of memory: no call (the dump
 * then says the backend reported no plan). */
static void report_plan(const compile_job *j, const kiln_compile_observer *obs) {
  const kiln_sched *s = j->s;
  kiln_plan_kernel *pk = calloc((size_t)s->n_kernels + 1, sizeof *pk);
  if (!pk) return;
  for (int32_t i = 0; i < s->n_kernels; i++) {
    const kiln_skernel *k = &s->kernels[i];
    kiln_plan_kernel *p = &pk[i];
    if (k->kind == KILN_SK_GEMM) {
      p->kind = k->c_node >= 0 ? KILN_PLAN_GEMM_UPDATE : KILN_PLAN_GEMM;
      p->node = k->node;
    } else if (k->kind == KILN_SK_COLL) {
      p->kind = KILN_PLAN_COLLECTIVE;
      p->node = k->node;
    } else if (k->kind == KILN_SK_COPY) {
      p->kind = KILN_PLAN_COPY;
      p->node = -1;
      p->bytes = k->bytes;
      p->src_buf = k->src_buf;
      p->dst_buf = k->dst_buf;
    } else {
      p->kind = k->row ? KILN_PLAN_ROW_LOOP : KILN_PLAN_LOOP;
      p->node = k->seed;
      p->n_members = k->n_members;
      p->members = k->members;
      p->src = j->srcs[i].src;
      p->items = j->srcs[i].items;
    }
  }
  obs->plan(obs->ctx, &(kiln_compile_plan){.graph = s->g,
                                           .n_kernels = s->n_kernels,
                                           .kernels = pk,
                                           .owner = s->owner,
                                           .n_loop_kernels = s->n_loop_kernels,
                                           .n_gemm_calls = s->n_gemm_calls,
                                           .prelude = kiln_codegen_prelude()});
  free(pk);
}

/* A family's kernels for this schedule instead of generating them
 * (cpu_family.c); on any reason not to, the graph's own (generate_kernels),
 * with the reason in the executable's info. */
static kiln_status family_or_own_kernels(compile_job *j, int n_dyn, const kiln_cpu_family *f, int made,
                                         const int64_t *values) {
  kiln_exec_info *in = &j->e->info;
  if (n_dyn > 0) {
    kiln_err fe = {0};
    int how = 0;
    kiln_status st = kiln_cpu_family_sources(f, made, values, j->s, j->srcs, j->e->symvals, &j->e->shared, &how,
                                             in->family_why, sizeof in->family_why, &fe);
    if (st == KILN_OK) {
      in->family = how;
      j->labels = kiln_cpu_family_labels(f);
      for (int32_t i = 0; i < j->s->n_kernels; i++) {
        if (!j->srcs[i].src) continue;
        if (!j->srcs[i].borrowed) j->total_args += j->srcs[i].n_args; /* a borrowed list is not copied */
        j->total_sites += j->srcs[i].n_sites;
        if (j->srcs[i].n_args > j->e->max_args) j->e->max_args = j->srcs[i].n_args;
      }
      return KILN_OK;
    }
    if (st == KILN_ERR_OUT_OF_MEMORY) return kiln_err_set(j->err, st, "%s", fe.msg);
    if (!in->family_why[0]) {
      kiln_text w = kiln_text_on(in->family_why, sizeof in->family_why);
      kiln_text_printf(&w, "%s", fe.msg);
    }
  }
  return generate_kernels(j);
}

static kiln_status compile_with(kiln_backend *kb, const kiln_graph *g, const kiln_compile_observer *obs, int n_dyn,
                                const kiln_sym_origin *dyn, const kiln_family_hint *hint, kiln_executable **out,
                                kiln_err *err) {
  cpu_backend *b = (cpu_backend *)kb;
  *out = NULL;
  uint64_t t0 = kiln_now_ns();
  kiln_sched *s = NULL;
  /* a graph with varying sizes: its family, whose fusion a known family's
   * later sizes reuse (cpu_family.h) */
  int64_t values[KILN_SYM_MAX];
  int made = 0;
  const kiln_cpu_family *f = n_dyn > 0 ? kiln_cpu_family_of(b, g, n_dyn, dyn, hint, values, &made) : NULL;
  KILN_RETURN_IF_ERROR(err, kiln_cpu_family_schedule(f, made, g, &s, err), "while scheduling a graph of %d nodes",
                       g->n_nodes);
  compile_job j = {.b = b, .s = s, .err = err};
  j.e = calloc(1, sizeof *j.e);
  j.srcs = calloc((size_t)s->n_kernels + 1, sizeof *j.srcs);
  kiln_status st = (j.e && j.srcs) ? KILN_OK : compile_oom(err);
  if (j.e) pthread_mutex_init(&j.e->mu, NULL);
  if (st == KILN_OK) st = family_or_own_kernels(&j, n_dyn, f, made, values);
  if (st == KILN_OK && j.e->info.family) j.e->info.family_id = f;
  uint64_t t1 = kiln_now_ns();
  kiln_prof_span_end(t0, KILN_PROF_COMPILE, "compile: schedule + codegen", -1);
  pthread_mutex_lock(&b->mu);
  if (st == KILN_OK) st = load_new_kernels(&j);
  if (st == KILN_OK) st = alloc_plan(&j);
  if (st == KILN_OK) st = bind_steps(&j);
  if (st == KILN_OK) check_tiles(&j);
  pthread_mutex_unlock(&b->mu);
  uint64_t t2 = kiln_now_ns();
  if (st == KILN_OK) fill_info(&j, g, t0, t1, t2);
  if (st == KILN_OK && obs && obs->plan) report_plan(&j, obs);
  if (j.srcs)
    for (int32_t i = 0; i < s->n_kernels; i++) kiln_kernel_src_clear(&j.srcs[i]);
  free(j.srcs);
  kiln_sched_free(s);
  if (st != KILN_OK) {
    if (j.e) exe_free(kb, j.e);
    return st;
  }
  *out = j.e;
  return KILN_OK;
}

static kiln_status cpu_compile(kiln_backend *kb, const kiln_graph *g, const kiln_compile_observer *obs,
                               kiln_executable **out, kiln_err *err) {
  return compile_with(kb, g, obs, 0, NULL, NULL, out, err);
}

static kiln_status cpu_compile_dynamic(kiln_backend *kb, const kiln_graph *g, const kiln_compile_observer *obs,
                                       int n_dyn, const kiln_sym_origin *dyn, const kiln_family_hint *hint,
                                       kiln_executable **out, kiln_err *err) {
  return compile_with(kb, g, obs, n_dyn, dyn, hint, out, err);
}

static const char *cpu_describe(kiln_backend *kb) { return ((cpu_backend *)kb)->desc; }

static void cpu_destroy(kiln_backend *kb) {
  cpu_backend *b = (cpu_backend *)kb;
  if (!b) return;
  kiln_pool_destroy(b->pool);
  for (size_t i = 0; i < b->tab_cap; i++) free(b->tab[i].src);
  free(b->tab);
  for (size_t i = 0; i < b->n_sos; i++) {
    kiln_so_close(b->sos[i]->so);
    free(b->sos[i]);
  }
  free(b->sos);
  kiln_cc_destroy(b->cc);
  kiln_cpu_families_free(kb, b->fams);
  pthread_mutex_destroy(&b->mu);
  free(b);
}

static const kiln_backend_vtable k_cpu_vtable = {
    .destroy = cpu_destroy,
    .api_version = KILN_BACKEND_API_VERSION,
    .name = "cpu",
    .buffer_alloc = kiln_cpu_buffer_alloc,
    .buffer_free = kiln_cpu_buffer_free,
    .copy_to_device = kiln_cpu_copy,
    .copy_to_host = kiln_cpu_copy,
    .compile = cpu_compile,
    .compile_dynamic = cpu_compile_dynamic,
    .execute = kiln_cpu_execute,
    .executable_free = exe_free,
    .executable_info = kiln_cpu_executable_info,
    .last_kernel_timings = kiln_cpu_last_kernel_timings,
    .describe = cpu_describe,
    .first_run = kiln_cpu_first_run,
    .last_error_loc = kiln_cpu_last_error_loc,
};

kiln_status kiln_backend_cpu_create(const kiln_backend_config *cfg, kiln_backend **out, kiln_err *err) {
  *out = NULL;
  cpu_backend *b = calloc(1, sizeof *b);
  if (!b) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "cpu backend: out of memory");
  b->base.vt = &k_cpu_vtable;
  pthread_mutex_init(&b->mu, NULL);
  const char *dump = kiln_cfg()->dump_code;
  b->dump_code = dump && *dump == '1';
  kiln_status st = kiln_pool_create(cfg ? cfg->num_threads : 0, &b->pool, err);
  if (st != KILN_OK) {
    cpu_destroy(&b->base);
    return st;
  }
  b->num_threads = kiln_pool_size(b->pool);
  kiln_cc_config ccfg = {.cc = NULL, .cflags = NULL, .cache_dir = cfg ? cfg->cache_dir : NULL};
  st = kiln_cc_create(&ccfg, &b->cc, err);
  if (st != KILN_OK) {
    kiln_err_context(err, "while creating the cpu backend");
    cpu_destroy(&b->base);
    return st;
  }
  kiln_gemm_init(1); /* one library thread per call: the pool splits GEMMs (see run_gemm) */
  kiln_gemm_warm(); /* the library's one-time set-up here, not under a worker (gemm.h, base/exit.h) */
  const char *cd = kiln_cc_cache_dir(b->cc);
  snprintf(b->desc, sizeof b->desc, "cpu: %d threads, gemm %s, cc \"%s\" (%s), cpu features [%s], disk cache %s",
           b->num_threads, kiln_gemm_library(), kiln_cc_command(b->cc), kiln_cc_version(b->cc), kiln_cpu_features(),
           cd ? cd : "off");
  *out = &b->base;
  return KILN_OK;
}
