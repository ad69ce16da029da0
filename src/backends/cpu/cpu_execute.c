/* The cpu backend's execution: the plan's steps run in order, loops and
 * GEMMs spread over the thread pool (the plan is built by cpu.c). */
#define _GNU_SOURCE /* mremap */
#include <sys/mman.h>

#include "backends/cpu/cpu_internal.h"
#include "dist/dist.h"

/* ───────────── buffers ───────────── */

void *kiln_cpu_buffer_alloc(kiln_backend *kb, size_t bytes) {
  void *p = NULL;
  size_t n = (bytes + 63) & ~(size_t)63;
  if (posix_memalign(&p, 64, n ? n : 64)) return NULL;
  return p;
}
void kiln_cpu_buffer_free(kiln_backend *kb, void *p) { free(p); }

/* The shared arena of a dynamic family, mapped by pages: a larger size
 * remaps it (mremap moves the pages already touched, copying nothing) and
 * only the new part is fresh, so a run over growing sizes touches each page
 * once instead of a new arena each time. Page-aligned, so 64-byte aligned. */
void *kiln_cpu_arena_grow(kiln_cpu_arena *a, size_t cap) {
  void *p = a->p ? mremap(a->p, a->cap, cap, MREMAP_MAYMOVE)
                 : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void kiln_cpu_arena_release(kiln_cpu_arena *a) {
  if (a->p) munmap(a->p, a->cap);
  a->p = NULL;
  a->cap = 0;
}

void kiln_cpu_scratch_event(kiln_backend *kb, const void *p, int64_t bytes) {
  int64_t in_use = __atomic_add_fetch(&((cpu_backend *)kb)->scratch_in_use, bytes, __ATOMIC_RELAXED);
  kiln_prof_memory(KILN_CPU_SCRATCH_ALLOCATOR, "scratch", bytes, in_use, p);
}
void kiln_cpu_copy(kiln_backend *kb, void *dst, const void *src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
}

/* ───────────── execute ───────────── */

typedef struct loop_ctx {
  kernel_fn fn;
  void *const *args;
} loop_ctx;

static void run_loop(void *ctx, int64_t begin, int64_t end) {
  loop_ctx *l = ctx;
  l->fn(l->args, begin, end);
}

/* GEMM work is split across kiln's own pool, with the library running one
 * thread per call: the library's threads (OpenMP in Debian's oneDNN) and
 * kiln's pool would otherwise take turns on the same cores, and on 2 cores
 * that was measured to make a step 100x slower for tens of steps while the
 * two sets of threads spun against each other. Parts: whole batch entries
 * when there are enough of them, else row blocks of C (or column blocks
 * when C is wide and short). */
typedef struct gemm_job {
  const step *sp;
  void *const *ptr;
  int64_t parts;   /* parts per batch entry */
  int split_rows;  /* 1: split M, 0: split N */
} gemm_job;

/* The element offsets of batch entry bi's A and B in GEMM step sp */
static void entry_offsets(const step *sp, int64_t bi, int64_t *oa, int64_t *ob) {
  int64_t rem = bi;
  *oa = *ob = 0;
  for (int d = sp->brank - 1; d >= 0; d--) {
    int64_t ix = rem % sp->bshape[d];
    rem /= sp->bshape[d];
    *oa += ix * sp->sa[d];
    *ob += ix * sp->sb[d];
  }
}

static void gemm_part(const gemm_job *j, int64_t item) {
  const step *sp = j->sp;
  size_t es = kiln_dtype_size((kiln_dtype)sp->dt), ces = kiln_dtype_size((kiln_dtype)sp->cdt);
  int64_t bi = item / j->parts, part = item % j->parts;
  int64_t oa, ob;
  entry_offsets(sp, bi, &oa, &ob);
  const char *A = (const char *)j->ptr[sp->abuf] + (size_t)oa * es;
  const char *B = (const char *)j->ptr[sp->bbuf] + (size_t)ob * es;
  size_t c_off = (size_t)(bi * sp->m * sp->n) * ces;
  char *c = (char *)j->ptr[sp->cbuf] + c_off;
  const char *c0 = sp->c0buf >= 0 ? (const char *)j->ptr[sp->c0buf] + c_off : NULL;
  int64_t m = sp->m, n = sp->n, total = j->split_rows ? m : n;
  int64_t lo = total * part / j->parts, hi = total * (part + 1) / j->parts;
  if (hi <= lo) return;
  if (j->split_rows) { /* rows lo..hi of C: rows of op(A) */
    A += (size_t)(sp->ta ? lo : lo * sp->lda) * es;
    c += (size_t)(lo * n) * ces;
    if (c0) c0 += (size_t)(lo * n) * ces;
    m = hi - lo;
  } else { /* columns lo..hi of C: columns of op(B) */
    B += (size_t)(sp->tb ? lo * sp->ldb : lo) * es;
    c += (size_t)lo * ces;
    if (c0) c0 += (size_t)lo * ces;
    n = hi - lo;
  }
  /* a fused update: C starts as the updated input (this part of it), unless
   * C is that input's own buffer */
  double alpha = sp->alpha, beta = sp->beta; /* beta is 0 without c0 */
  if (sp->alphabuf >= 0) {
    double v;
    memcpy(&v, j->ptr[sp->alphabuf], sizeof v); /* a float SCALAR input is held as a double */
    alpha *= sp->f64 ? v : (double)(float)v;
  }
  if (sp->dt != KILN_F32 && sp->dt != KILN_F64) {
    if (sp->cdt == sp->dt) /* a plain product: 16-bit and integer GEMMs are updates only as below */
      kiln_gemm_other(sp->dt, sp->ta, sp->tb, m, n, sp->k, A, sp->lda, B, sp->ldb, c, sp->n);
    else /* f32 C = C0 + alpha·bf16(A·B) (schedule_fuse.c), C0 possibly C itself */
      kiln_gemm_bf16_update(sp->ta, sp->tb, m, n, sp->k, (const uint16_t *)A, sp->lda, (const uint16_t *)B, sp->ldb,
                            (float *)c, sp->n, (const float *)c0, (float)alpha);
    return;
  }
  if (c0 && c0 != c)
    for (int64_t r = 0; r < m; r++) memcpy(c + (size_t)(r * sp->n) * es, c0 + (size_t)(r * sp->n) * es, (size_t)n * es);
  if (sp->k == 0) { /* C = beta·C */
    for (int64_t r = 0; r < m; r++) {
      char *cr = c + (size_t)(r * sp->n) * es;
      if (beta == 0.0) memset(cr, 0, (size_t)n * es);
      else if (sp->f64) for (int64_t q = 0; q < n; q++) ((double *)cr)[q] *= beta;
      else for (int64_t q = 0; q < n; q++) ((float *)cr)[q] *= (float)beta;
    }
  } else if (sp->f64) {
    kiln_gemm_dgemm(sp->ta, sp->tb, m, n, sp->k, alpha, (const double *)A, sp->lda, (const double *)B, sp->ldb, beta,
                    (double *)c, sp->n);
  } else {
    kiln_gemm_sgemm(sp->ta, sp->tb, m, n, sp->k, (float)alpha, (const float *)A, sp->lda, (const float *)B, sp->ldb,
                    (float)beta, (float *)c, sp->n);
  }
}

static void gemm_range(void *ctx, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) gemm_part(ctx, i);
}

static void run_gemm(cpu_backend *b, const step *sp, void *const *ptr) {
  int64_t nb = 1;
  for (int d = 0; d < sp->brank; d++) nb *= sp->bshape[d];
  if (sp->m == 0 || sp->n == 0 || nb == 0) return;
  int T = b->num_threads;
  double flops = 2.0 * (double)sp->m * (double)sp->n * (double)(sp->k ? sp->k : 1) * (double)nb;
  gemm_job j = {sp, ptr, 1, sp->m >= sp->n};
  /* below ~1 MFLOP a split costs more than it saves */
  if (T > 1 && nb < T && flops >= 1e6) {
    int64_t dim = j.split_rows ? sp->m : sp->n;
    j.parts = dim >= 16 * T ? T : (dim >= 2 * T ? T : 1);
  }
  int64_t items = nb * j.parts;
  /* a grain of all items runs inline, as the direct call did */
  kiln_pool_parallel_for_tagged(b->pool, gemm_range, &j, items, (T == 1 || flops < 1e6) ? items : 1, &sp->tag);
}

/* ───────────── attention tiles ─────────────
 *
 * Steps g1, r, g2 = g1 + 1, g1 + 2 that the schedule marked and cpu.c
 * checked (tile_ok): S = Q·Kᵀ, a row kernel P = rows(S), O = P·V.
 * Run one batch entry at a time, S and P of the entry in a scratch of its
 * chunk of entries (Lq × Lk each, sized for L2) instead of their arena
 * buffers: the scores never go to memory and the second GEMM reads P from
 * cache. Each entry's GEMMs are the library calls the batched steps make for
 * it (one call per entry: tiles run only with at least as many entries as
 * threads, where run_gemm splits by entry), and the row kernel runs on the
 * entry's rows with S and P where it expects them: the same values. */
typedef struct tile_job {
  const step *g1, *r, *g2;
  void *const *ptr;
  void *errw, *symvals;
  char *scratch;
  size_t ent, per; /* bytes of S (and of P) of one entry; of a chunk's scratch */
  int64_t nb, chunks;
} tile_job;

/* C = op(A)·op(B) of entry bi of plain GEMM step sp (f32 or f64, k > 0):
 * A read from a when set (its lda), C written to c when set (ldc n) */
static void gemm_entry(const step *sp, void *const *ptr, int64_t bi, const void *a, void *c) {
  size_t es = kiln_dtype_size((kiln_dtype)sp->dt);
  int64_t oa, ob;
  entry_offsets(sp, bi, &oa, &ob);
  const char *A = a ? (const char *)a : (const char *)ptr[sp->abuf] + (size_t)oa * es;
  const char *B = (const char *)ptr[sp->bbuf] + (size_t)ob * es;
  char *C = c ? (char *)c : (char *)ptr[sp->cbuf] + (size_t)(bi * sp->m * sp->n) * es;
  if (sp->f64)
    kiln_gemm_dgemm(sp->ta, sp->tb, sp->m, sp->n, sp->k, sp->alpha, (const double *)A, sp->lda, (const double *)B,
                    sp->ldb, 0.0, (double *)C, sp->n);
  else
    kiln_gemm_sgemm(sp->ta, sp->tb, sp->m, sp->n, sp->k, (float)sp->alpha, (const float *)A, sp->lda,
                    (const float *)B, sp->ldb, 0.0f, (float *)C, sp->n);
}

static void tile_chunks(void *ctx, int64_t begin, int64_t end) {
  const tile_job *j = ctx;
  const step *g1 = j->g1, *r = j->r, *g2 = j->g2;
  int64_t lq = g1->m;
  for (int64_t c = begin; c < end; c++) {
    char *S = j->scratch + (size_t)c * j->per, *P = S + j->ent;
    void **args = (void **)(void *)(P + j->ent);
    for (int64_t bi = j->nb * c / j->chunks; bi < j->nb * (c + 1) / j->chunks; bi++) {
      gemm_entry(g1, j->ptr, bi, NULL, S);
      /* the row kernel indexes S and P by the row: their bases as if the
       * scratch held this entry's rows of the whole buffers */
      uintptr_t off = (uintptr_t)bi * (uintptr_t)j->ent;
      for (int32_t a = 0; a < r->n_args; a++) {
        int32_t id = r->args[a];
        args[a] = id == KILN_CG_ERR_ARG   ? j->errw
                  : id == KILN_CG_SYM_ARG ? j->symvals
                  : id == g1->cbuf        ? (void *)((uintptr_t)S - off)
                  : id == g2->abuf        ? (void *)((uintptr_t)P - off)
                                          : j->ptr[id];
      }
      r->fn(args, bi * lq, (bi + 1) * lq);
      gemm_entry(g2, j->ptr, bi, P, NULL);
    }
  }
}

/* Run the tile at steps sp, sp + 1, sp + 2; 0 when its scratch could not be
 * had (the caller runs the three steps one after the other). Under e->mu. */
static int run_tile(cpu_backend *b, kiln_executable *e, const step *sp, void *const *ptr, void *errw) {
  const step *r = sp + 1;
  int64_t nb = 1;
  for (int d = 0; d < sp->brank; d++) nb *= sp->bshape[d];
  size_t ent = (size_t)(sp->m * sp->n) * kiln_dtype_size((kiln_dtype)sp->dt);
  size_t per = (2 * ent + sizeof(void *) * (size_t)r->n_args + 63) / 64 * 64;
  int64_t chunks = b->num_threads < nb ? b->num_threads : nb;
  size_t need = per * (size_t)chunks;
  if (e->tile_cap < need) {
    void *p = NULL;
    if (posix_memalign(&p, 64, need)) return 0;
    if (e->tile_buf) kiln_cpu_scratch_event(&b->base, e->tile_buf, -(int64_t)e->tile_cap);
    free(e->tile_buf);
    e->tile_buf = p;
    e->tile_cap = need;
    kiln_cpu_scratch_event(&b->base, p, (int64_t)need); /* in memory profiles with the arenas */
  }
  tile_job j = {sp, r, sp + 2, ptr, errw, e->symvals, e->tile_buf, ent, per, nb, chunks};
  kiln_pool_parallel_for_tagged(b->pool, tile_chunks, &j, chunks, 1, &sp->tag);
  return 1;
}

/* The grain a loop step runs with: a column kernel's (span > 0) outputs in
 * one task per thread, each as wide as the kernel's sweep at most (a
 * narrower task sweeps the rows more often; codegen_col.c), in whole
 * blocks of its grain; any other kernel's own grain. */
static int64_t loop_grain(const step *sp, int threads) {
  if (sp->span <= 0 || threads < 1) return sp->grain;
  int64_t per = (sp->items + threads - 1) / threads, g = sp->grain > 0 ? sp->grain : 1;
  per = (per + g - 1) / g * g;
  return per > sp->span ? (sp->span > g ? sp->span : g) : per;
}

/* The error of the first failing kernel, sp, from its error word errw
 * (codegen.h): an index out of range at one of its sites, or site -2: a
 * line kernel could not allocate its scratch (codegen_line.c). */
static kiln_status fault_status(kiln_executable *e, const step *sp, const int64_t *errw, kiln_err *err) {
  int64_t site = errw[0] - 1;
  if (site == -2)
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "cpu execute: out of memory for the scratch of kernel %s",
                        sp->name);
  if (site < 0 || site >= sp->n_sites)
    return kiln_err_set(err, KILN_ERR_INTERNAL, "cpu execute: bad index-check site %lld", (long long)site);
  const isite *is = &e->sites[sp->site_off + site];
  e->fault_loc = is->loc;
  e->has_fault = 1;
  return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, KILN_INDEX_ERR_FMT, is->op, (long long)errw[1], is->axis,
                      (long long)is->dim);
}

/* The collectives in flight during one execution (overlap: the steps
 * after a COLL run while it is in flight; it is waited for before the first
 * step at or past its wait point, and at the end). The first failure is
 * kept; later steps still run on every rank alike. */
typedef struct flights {
  struct {
    kiln_dist_handle *h;
    const step *sp;
  } v[32];
  int n;
  kiln_status st;
  kiln_err err;
} flights;

static void flights_fail(flights *f, const kiln_err *ce) {
  if (f->st != KILN_OK) return;
  f->st = ce->code;
  f->err = *ce;
}

/* Wait for those that must complete before a step at kernel position kpos
 * (INT32_MAX: all of them). */
static void flights_wait(flights *f, int32_t kpos) {
  int k = 0;
  for (int i = 0; i < f->n; i++) {
    if (f->v[i].sp->wait_at > kpos) {
      f->v[k++] = f->v[i];
      continue;
    }
    kiln_err ce;
    if (kiln_backend_coll_wait(f->v[i].sp->coll, f->v[i].h, &ce) != KILN_OK) flights_fail(f, &ce);
  }
  f->n = k;
}

static void flights_start(flights *f, const step *sp, void *const *ptr) {
  if (f->n == (int)(sizeof f->v / sizeof f->v[0])) flights_wait(f, INT32_MAX);
  kiln_dist_handle *h = NULL;
  kiln_err ce;
  if (kiln_backend_coll_start(sp->coll, ptr[sp->src], ptr[sp->dst], &h, &ce) != KILN_OK) flights_fail(f, &ce);
  else if (h) {
    f->v[f->n].h = h;
    f->v[f->n++].sp = sp;
  }
}

/* (backend.h, first_run) e's arena in memory every rank of the node maps,
 * when the dist service has it (NULL alone, across hosts, ...: e allocates
 * its own at its first run). Collective: every rank calls
 * kiln_dist_shared_alloc, with 0 bytes when e takes none (a family's
 * graph, whose buffers are the family's, or an arena already made). */
void kiln_cpu_first_run(kiln_backend *kb, kiln_executable *e) {
  pthread_mutex_lock(&e->mu);
  size_t want = !e->shared && !e->arena ? e->scratch_bytes : 0;
  void *p = kiln_dist_shared_alloc(want);
  if (p && want) {
    e->arena = p;
    e->arena_adopted = 1;
    kiln_cpu_scratch_event(kb, p, (int64_t)want);
  }
  pthread_mutex_unlock(&e->mu);
}

/* The intermediate buffers of this execute (under e->mu): the executable's
 * own arena, allocated at its first run; or, for a graph of a dynamic
 * family, the family's, locked for the execute and grown when this size
 * needs more than the sizes before it. */
static kiln_status scratch_arena(kiln_backend *kb, kiln_executable *e, void **out, kiln_err *err) {
  if (e->shared) {
    kiln_cpu_arena *a = e->shared;
    pthread_mutex_lock(&a->mu);
    if (e->scratch_bytes > a->cap) {
      size_t cap = e->scratch_bytes + e->scratch_bytes / 4; /* room to grow without a new arena each time */
      void *p = kiln_cpu_arena_grow(a, cap);
      if (!p) {
        pthread_mutex_unlock(&a->mu);
        return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "cpu execute: cannot allocate %zu scratch bytes", cap);
      }
      if (a->p) kiln_cpu_scratch_event(kb, a->p, -(int64_t)a->cap);
      a->p = p;
      a->cap = cap;
      kiln_cpu_scratch_event(kb, p, (int64_t)cap);
    }
    *out = a->p;
    return KILN_OK;
  }
  if (e->scratch_bytes && !e->arena) {
    e->arena = kiln_cpu_buffer_alloc(kb, e->scratch_bytes);
    if (!e->arena)
      return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "cpu execute: cannot allocate %zu scratch bytes",
                          e->scratch_bytes);
    kiln_cpu_scratch_event(kb, e->arena, (int64_t)e->scratch_bytes);
  }
  *out = e->arena;
  return KILN_OK;
}

kiln_status kiln_cpu_execute(kiln_backend *kb, kiln_executable *e, void *const *inputs, void *const *outputs,
                               kiln_err *err) {
  cpu_backend *b = (cpu_backend *)kb;
  pthread_mutex_lock(&e->mu);
  if (!e->timings) { /* made by the first run, on the executor's thread, not by the compile (a plan) */
    e->timings = calloc((size_t)e->n_steps + 1, sizeof *e->timings);
    if (!e->timings) {
      pthread_mutex_unlock(&e->mu);
      return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "cpu execute: out of memory");
    }
  }
  if (!e->named && kiln_prof_on()) kiln_cpu_name_steps(e); /* a profile names its kernels */
  void *arena = NULL;
  kiln_status ast = scratch_arena(kb, e, &arena, err);
  if (ast != KILN_OK) {
    pthread_mutex_unlock(&e->mu);
    return ast;
  }
  void *small[64];
  size_t need = (size_t)e->n_bufs + (size_t)e->max_args;
  void **ptr = need <= 64 ? small : malloc(sizeof *ptr * need);
  if (!ptr) {
    if (e->shared) pthread_mutex_unlock(&e->shared->mu);
    pthread_mutex_unlock(&e->mu);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "cpu execute: out of memory");
  }
  void **args = ptr + e->n_bufs;
  /* the error word of the index checks (codegen.h): {site + 1, index} */
  int64_t errw[2] = {0, 0};
  int32_t fault_step = -1;
  flights fl = {.n = 0, .st = KILN_OK};
  e->has_fault = 0;
  for (int32_t i = 0; i < e->n_bufs; i++) {
    const xbuf *bf = &e->bufs[i];
    ptr[i] = bf->kind == KILN_SBUF_INPUT    ? inputs[bf->index]
             : bf->kind == KILN_SBUF_OUTPUT ? outputs[bf->index]
                                            : (char *)arena + bf->offset;
  }
  for (int32_t i = 0; i < e->n_steps; i++) {
    const step *sp = &e->steps[i];
    kiln_kernel_timing *t = &e->timings[i];
    int tiled = 0; /* steps after this one it ran (an attention tile) */
    if (fl.n) flights_wait(&fl, sp->kpos);
    t->begin_ns = kiln_now_ns();
    switch (sp->kind) {
      case ST_LOOP: {
        for (int32_t a = 0; a < sp->n_args; a++) {
          int32_t id = sp->args[a];
          args[a] = id == KILN_CG_ERR_ARG ? (void *)errw : id == KILN_CG_SYM_ARG ? (void *)e->symvals : ptr[id];
        }
        loop_ctx l = {sp->fn, args};
        kiln_pool_parallel_for_tagged(b->pool, run_loop, &l, sp->items, loop_grain(sp, b->num_threads), &sp->tag);
        /* the first failing kernel is the one to report; later ones cannot
         * overwrite the word. The run goes on (indices were clamped), so
         * every output is written and nothing is left half-done. */
        if (sp->n_sites && fault_step < 0 && errw[0]) fault_step = i;
        break;
      }
      case ST_GEMM:
        if (sp->tile && run_tile(b, e, sp, ptr, errw)) {
          tiled = 2;
          if (sp[1].n_sites && fault_step < 0 && errw[0]) fault_step = i + 1;
        } else {
          run_gemm(b, sp, ptr);
        }
        break;
      case ST_COLL: { /* started here, waited for at its wait point */
        uint64_t c0 = kiln_prof_span_begin();
        flights_start(&fl, sp, ptr);
        if (c0 && kiln_prof_on()) kiln_cpu_step_resolve(&sp->tag);
        if (c0 && kiln_prof_on())
          kiln_prof_record_src(KILN_PROF_KERNEL, sp->tag.name, sp->tag.src, c0, kiln_prof_now(), -1, 0, 0);
        break;
      }
      default: {
        uint64_t c0 = kiln_prof_span_begin();
        kiln_cpu_copy(kb, ptr[sp->dst], ptr[sp->src], sp->bytes);
        if (c0 && kiln_prof_on()) kiln_cpu_step_resolve(&sp->tag);
        if (c0 && kiln_prof_on())
          kiln_prof_record_src(KILN_PROF_KERNEL, sp->tag.name, sp->tag.src, c0, kiln_prof_now(), -1, 0, sp->mem_bytes);
        break;
      }
    }
    t->end_ns = kiln_now_ns();
    t->name = __atomic_load_n(&sp->tag.name, __ATOMIC_ACQUIRE); /* "fusion.6 (reduce_max,reduce_sum,div)", "gemm 128x256x64" once named */
    t->flops = sp->flops;
    t->bytes = sp->mem_bytes;
    for (; tiled > 0; tiled--) { /* the tile's other two steps: run inside it, their time in its */
      kiln_kernel_timing *u = &e->timings[++i];
      *u = (kiln_kernel_timing){.begin_ns = t->end_ns, .end_ns = t->end_ns};
      u->name = __atomic_load_n(&e->steps[i].tag.name, __ATOMIC_ACQUIRE);
    }
  }
  flights_wait(&fl, INT32_MAX);
  if (ptr != small) free(ptr);
  if (fl.st != KILN_OK && err) *err = fl.err;
  kiln_status st = fault_step >= 0 ? fault_status(e, &e->steps[fault_step], errw, err) : fl.st;
  if (e->shared) pthread_mutex_unlock(&e->shared->mu);
  pthread_mutex_unlock(&e->mu);
  return st;
}

int kiln_cpu_last_error_loc(kiln_backend *kb, const kiln_executable *e, kiln_loc *out) {
  (void)kb;
  if (!e->has_fault) return 0;
  *out = e->fault_loc;
  return 1;
}

void kiln_cpu_executable_info(kiln_backend *kb, const kiln_executable *e, kiln_exec_info *out) { *out = e->info; }

int kiln_cpu_last_kernel_timings(kiln_backend *kb, const kiln_executable *e, const kiln_kernel_timing **out) {
  (void)kb;
  kiln_executable *w = (kiln_executable *)e; /* naming is done once, under its lock */
  pthread_mutex_lock(&w->mu);
  kiln_cpu_name_steps(w);
  int n = w->timings ? w->n_steps : 0; /* none before the first run */
  for (int32_t i = 0; i < n; i++) w->timings[i].name = w->steps[i].tag.name;
  pthread_mutex_unlock(&w->mu);
  *out = e->timings;
  return n;
}

