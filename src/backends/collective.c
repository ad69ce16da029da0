/* Collective nodes through the dist service (collective.h). */
#include "backends/collective.h"

#include <stdio.h>
#include <string.h>

#include "base/spans.h"

static void shape_text(const kiln_backend_coll *c, char *sb, size_t cap) {
  int k = snprintf(sb, cap, "[");
  for (int d = 0; d < c->rank && k < (int)cap - 24; d++)
    k += snprintf(sb + k, cap - (size_t)k, "%s%lld", d ? ", " : "", (long long)c->shape[d]);
  snprintf(sb + k, cap - (size_t)k, "]");
}

void kiln_backend_coll_init(const kiln_graph *g, int32_t i, kiln_backend_coll *c) {
  const kiln_gnode *n = &g->nodes[i];
  const kiln_gnode *x = &g->nodes[kiln_gnode_inputs(g, n)[0]];
  int64_t count = kiln_gnode_numel(x), outer = 1;
  if (n->op == KILN_OP_ALL_GATHER)
    for (int d = 0; d < n->iattr[0]; d++) outer *= x->shape[d];
  memset(c, 0, sizeof *c);
  c->call = (kiln_dist_call){
      .kind = n->op == KILN_OP_ALL_REDUCE  ? KILN_DIST_ALL_REDUCE
              : n->op == KILN_OP_BROADCAST ? KILN_DIST_BROADCAST
                                           : KILN_DIST_ALL_GATHER,
      .dtype = n->dtype,
      .elem = count ? kiln_gnode_bytes(x) / (size_t)count : 1,
      .reduce = n->op == KILN_OP_ALL_REDUCE ? (int)n->iattr[0] : 0,
      .root = n->op == KILN_OP_BROADCAST ? (int)n->iattr[0] : 0,
      .world = (int)n->iattr[1],
      .count = count,
      .outer = outer ? outer : 1,
      .op = kiln_op_name(n->op),
  };
  c->rank = x->rank;
  memcpy(c->shape, x->shape, sizeof c->shape);
  c->loc = n->loc;
  /* "all_reduce f32 [1024] at train.c:88": the same text on every rank */
  char sb[128], name[256];
  shape_text(c, sb, sizeof sb);
  snprintf(name, sizeof name, "%s %s %s at %s:%d", c->call.op, kiln_dtype_name((kiln_dtype)c->call.dtype), sb,
           c->loc.file ? c->loc.file : "?", c->loc.line);
  c->call.name = kiln_prof_intern(name); /* NULL (table full): the op's name is used */
}

static void add_context(const kiln_backend_coll *c, kiln_err *err) {
  char sb[128];
  shape_text(c, sb, sizeof sb);
  kiln_err_context(err, "%s of %s %s traced at %s:%d", c->call.op, kiln_dtype_name((kiln_dtype)c->call.dtype), sb,
                   c->loc.file ? c->loc.file : "?", c->loc.line);
}

kiln_status kiln_backend_coll_start(const kiln_backend_coll *c, const void *in, void *out, kiln_dist_handle **h,
                                    kiln_err *err) {
  *h = NULL;
  if (!c->call.count) return KILN_OK;
  kiln_dist_call call = c->call;
  call.in = in;
  call.out = out;
  kiln_status s = kiln_dist_start(&call, h, err);
  if (s != KILN_OK) add_context(c, err);
  return s;
}

kiln_status kiln_backend_coll_wait(const kiln_backend_coll *c, kiln_dist_handle *h, kiln_err *err) {
  kiln_status s = kiln_dist_wait(h, err);
  if (s != KILN_OK) add_context(c, err);
  return s;
}

kiln_status kiln_backend_coll_run(const kiln_backend_coll *c, const void *in, void *out, kiln_err *err) {
  if (!c->call.count) return KILN_OK;
  kiln_dist_call call = c->call;
  call.in = in;
  call.out = out;
  kiln_status s = kiln_dist_collective(&call, err);
  if (s != KILN_OK) add_context(c, err);
  return s;
}
