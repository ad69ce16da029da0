/* Which graph input dimensions vary (docs/dynamic-shapes.md): the
 * automatic rule of KILN_DYNAMIC=auto and the explicit marks.
 *
 * Each call site that compiled keeps the signature of its last compiled
 * graph's inputs (kind, dtype, sizes). When it compiles again and the new
 * graph's inputs differ from that only in some sizes, those dimensions vary:
 * they are added to the site's set (it only grows), and the compile asks the
 * backend to make it serve every size of those dimensions
 * (compile_dynamic). A site whose graphs differ otherwise (another input
 * count, rank or dtype) starts again. Sizes 0 and 1 never become symbols
 * (ir/symshape.h); the backend decides whether the graph can be a family
 * at all and says why not. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

typedef struct sig_in {
  uint8_t op, dtype, rank;
  int64_t shape[KILN_MAX_RANK];
} sig_in;

typedef struct dyn_site {
  const char *file;
  int line;
  int32_t n_inputs;
  sig_in *in;
  int n_dyn;
  kiln_sym_origin dyn[KILN_SYM_MAX];
} dyn_site;

struct kiln_dyn_sites {
  dyn_site *v;
  size_t n, cap;
};

void kiln_dyn_sites_free(kiln_dyn_sites *d) {
  if (!d) return;
  for (size_t i = 0; i < d->n; i++) free(d->v[i].in);
  free(d->v);
  free(d);
}

static dyn_site *site_of(kiln_runtime *rt, kiln_loc loc) {
  if (!rt->dyn) rt->dyn = calloc(1, sizeof *rt->dyn);
  kiln_dyn_sites *d = rt->dyn;
  if (!d) return NULL;
  for (size_t i = 0; i < d->n; i++)
    if (d->v[i].line == loc.line && (d->v[i].file == loc.file || (d->v[i].file && loc.file && !strcmp(d->v[i].file, loc.file))))
      return &d->v[i];
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 16;
    dyn_site *v = realloc(d->v, sizeof *v * cap);
    if (!v) return NULL;
    d->v = v;
    d->cap = cap;
  }
  dyn_site *s = &d->v[d->n++];
  memset(s, 0, sizeof *s);
  s->file = loc.file;
  s->line = loc.line;
  return s;
}

static void add_origin(int *n, kiln_sym_origin *v, int32_t input, int axis) {
  for (int k = 0; k < *n; k++)
    if (v[k].input == input && v[k].axis == axis) return;
  if (*n < KILN_SYM_MAX) v[(*n)++] = (kiln_sym_origin){input, axis};
}

/* The site's record becomes g's inputs; the dimensions that changed since
 * the last compile there join its set. */
static void site_update(dyn_site *s, const kiln_input_view *iv) {
  kiln_gnode tmp;
  int same = s->in && s->n_inputs == iv->n;
  /* one pass: the sizes that changed join the set and are recorded; an
   * input of another op, dtype or rank makes the record anew below (what
   * this pass did to it is dropped) */
  for (int32_t k = 0; same && k < iv->n; k++) {
    const kiln_gnode *x = iv->at(iv->ctx, k, &tmp);
    same = s->in[k].op == x->op && s->in[k].dtype == x->dtype && s->in[k].rank == x->rank;
    for (int d = 0; same && d < x->rank; d++)
      if (s->in[k].shape[d] != x->shape[d]) {
        if (x->op == KILN_OP_LEAF) add_origin(&s->n_dyn, s->dyn, k, d);
        s->in[k].shape[d] = x->shape[d];
      }
  }
  if (!same) {
    sig_in *in = malloc(sizeof *in * ((size_t)iv->n + 1));
    free(s->in);
    s->in = NULL; /* out of memory: the site starts again next time */
    s->n_inputs = 0;
    s->n_dyn = 0;
    if (!in) return;
    s->in = in;
    s->n_inputs = iv->n;
    s->n_dyn = 0;
    for (int32_t k = 0; k < iv->n; k++) {
      const kiln_gnode *x = iv->at(iv->ctx, k, &tmp);
      s->in[k] = (sig_in){x->op, x->dtype, x->rank, {0}};
      memcpy(s->in[k].shape, x->shape, sizeof x->shape[0] * x->rank);
    }
  }
}

static const kiln_gnode *graph_input(const void *ctx, int32_t k, kiln_gnode *tmp) {
  const kiln_graph *g = ctx;
  (void)tmp;
  return &g->nodes[g->input_node[k]];
}

static const kiln_gnode *request_input(const void *ctx, int32_t k, kiln_gnode *tmp) {
  const kiln_run_request *rq = ctx;
  rq->input_node(rq->ctx, (uint32_t)k, tmp);
  return tmp;
}

kiln_input_view kiln_graph_inputs(const kiln_graph *g) { return (kiln_input_view){g->n_inputs, graph_input, g}; }

kiln_input_view kiln_request_inputs(const kiln_run_request *rq) {
  return (kiln_input_view){(int32_t)rq->n_inputs, request_input, rq};
}

int kiln_dynamic_origins(kiln_runtime *rt, const kiln_run_request *rq, const kiln_input_view *iv,
                         kiln_sym_origin *out) {
  int n = 0;
  for (uint32_t k = 0; k < rq->n_inputs && k < (uint32_t)iv->n; k++) /* kiln_dynamic marks */
    for (int d = 0; rq->inputs[k].dyn && d < KILN_MAX_RANK; d++)
      if (rq->inputs[k].dyn >> d & 1) add_origin(&n, out, (int32_t)k, d);
  if (rt->dynamic_auto) {
    dyn_site *s = site_of(rt, rq->cause.loc);
    if (s) {
      site_update(s, iv);
      for (int k = 0; k < s->n_dyn; k++) add_origin(&n, out, s->dyn[k].input, s->dyn[k].axis);
    }
  }
  return n;
}
