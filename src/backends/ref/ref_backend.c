/* The ref backend: a plain interpreter of kiln_graph, the oracle of every
 * backend test (see docs/testing.md).
 *
 * compile  = kiln_graph_verify + keep a clone of the graph;
 * execute  = evaluate the nodes in order, each into its own zeroed
 *            temporary, then copy the output nodes to the output buffers.
 * Because outputs are written only after every node has been evaluated (and
 * LEAF nodes copy their input first), an output that aliases an input
 * (donation) is always correct.
 *
 * Thread-safety: the backend has no mutable state; executables are
 * read-only after compile but for the fault record of last_error_loc
 * (under the executable's mutex), so any number of compiles and executes
 * may run concurrently.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/collective.h"
#include "backends/ref/ref_ops.h"

typedef struct ref_backend {
  kiln_backend base;
} ref_backend;

struct kiln_executable {
  kiln_graph *g; /* owned clone */
  /* the node at fault in the last failed execute (last_error_loc); the
   * only mutable state, so guarded: executes may run concurrently */
  pthread_mutex_t mu;
  kiln_loc fault_loc;
  int has_fault;
};

static void ref_destroy(kiln_backend *b) { free(b); }

static void *ref_buffer_alloc(kiln_backend *b, size_t bytes) {
  (void)b;
  /* round up to the alignment (aligned_alloc requires a multiple); 0 bytes
   * still gets a unique, valid pointer */
  size_t n = (bytes + 63) / 64 * 64;
  if (n == 0) n = 64;
  if (n < bytes) return NULL; /* overflow */
  void *p = aligned_alloc(64, n);
  if (p) memset(p, 0, n);
  return p;
}

static void ref_buffer_free(kiln_backend *b, void *p) {
  (void)b;
  free(p);
}

static void ref_copy(kiln_backend *b, void *dst, const void *src, size_t bytes) {
  (void)b;
  if (bytes) memcpy(dst, src, bytes);
}

static kiln_status ref_compile(kiln_backend *b, const kiln_graph *g, const kiln_compile_observer *obs,
                               kiln_executable **out, kiln_err *err) {
  (void)b;
  *out = NULL;
  char msg[512];
  if (kiln_graph_verify(g, msg, sizeof msg) != 0)
    return kiln_err_set(err, KILN_ERR_INTERNAL, "ref: invalid graph: %s", msg);
  kiln_executable *e = calloc(1, sizeof *e);
  if (!e) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory compiling a graph");
  e->g = kiln_graph_clone(g);
  if (!e->g) {
    free(e);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory cloning a graph of %d nodes",
                        (int)g->n_nodes);
  }
  pthread_mutex_init(&e->mu, NULL);
  if (obs && obs->plan) /* no schedule, no code: the graph runs node by node */
    obs->plan(obs->ctx, &(kiln_compile_plan){
                            .graph = g, .none = "the ref backend runs the graph node by node, without kernels or code"});
  *out = e;
  return KILN_OK;
}

static void ref_executable_free(kiln_backend *b, kiln_executable *e) {
  (void)b;
  if (!e) return;
  kiln_graph_free(e->g);
  pthread_mutex_destroy(&e->mu);
  free(e);
}

/* Evaluate node i into vals[i] (whose buffer is already allocated). */
static kiln_status eval_node(const kiln_graph *g, int32_t i, kiln_ref_val *vals, void *const *inputs,
                             kiln_err *err) {
  const kiln_gnode *n = &g->nodes[i];
  const int32_t *in = kiln_gnode_inputs(g, n);
  /* gather the input values in order (CONCAT may have many) */
  kiln_ref_val small[4];
  kiln_ref_val *ins = small;
  if (n->n_in > 4) {
    ins = calloc((size_t)n->n_in, sizeof *ins);
    if (!ins) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory at node %%%d", (int)i);
  }
  for (int k = 0; k < n->n_in; k++) ins[k] = vals[in[k]];
  kiln_status s = KILN_OK;
  switch (kiln_op_table[n->op].kind) {
    case KILN_KIND_SOURCE: kiln_ref_eval_source(n, &vals[i], ins, inputs); break;
    case KILN_KIND_UNARY:
    case KILN_KIND_BINARY:
    case KILN_KIND_TERNARY: kiln_ref_eval_elementwise(n, &vals[i], ins); break;
    case KILN_KIND_REDUCE:
      if (kiln_ref_eval_reduce(n, &vals[i], ins) != 0)
        s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory in %s at node %%%d",
                         kiln_op_name(n->op), (int)i);
      break;
    case KILN_KIND_MOVE: {
      int64_t bad = 0;
      int line = n->op == KILN_OP_ARGSORT || n->op == KILN_OP_SCATTER || n->op == KILN_OP_SCATTER_ADD;
      int r = line ? kiln_ref_eval_line(n, &vals[i], ins, &bad) : kiln_ref_eval_move(n, &vals[i], ins, n->n_in, &bad);
      if (r < 0) {
        s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory in %s at node %%%d", kiln_op_name(n->op),
                         (int)i);
      } else if (r) {
        int ax = (int)n->iattr[0];
        s = kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, KILN_INDEX_ERR_FMT, kiln_op_name(n->op), (long long)bad, ax,
                         (long long)ins[0].shape[ax]);
      }
      break;
    }
    case KILN_KIND_MATMUL: kiln_ref_eval_matmul(n, &vals[i], ins); break;
    case KILN_KIND_COLLECTIVE: {
      kiln_backend_coll c;
      kiln_backend_coll_init(g, i, &c);
      s = kiln_backend_coll_run(&c, ins[0].data, vals[i].data, err);
      break;
    }
    case KILN_KIND_SCAN:
      if (kiln_ref_eval_scan(n, &vals[i], &ins[0]) != 0)
        s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory in %s at node %%%d",
                         kiln_op_name(n->op), (int)i);
      break;
  }
  if (ins != small) free(ins);
  return s;
}

static kiln_status ref_execute(kiln_backend *b, kiln_executable *e, void *const *inputs, void *const *outputs,
                               kiln_err *err) {
  (void)b;
  const kiln_graph *g = e->g;
  const int32_t N = g->n_nodes;
  kiln_ref_val *vals = calloc((size_t)N + 1, sizeof *vals);
  /* last_use[i]: the last node reading i (N for outputs), so temporaries
   * are freed as soon as nothing needs them */
  int32_t *last_use = calloc((size_t)N + 1, sizeof *last_use);
  kiln_status s = KILN_OK;
  pthread_mutex_lock(&e->mu);
  e->has_fault = 0;
  pthread_mutex_unlock(&e->mu);
  if (!vals || !last_use) {
    s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory executing %d nodes", (int)N);
    goto done;
  }
  for (int32_t i = 0; i < N; i++) {
    last_use[i] = i;
    const kiln_gnode *n = &g->nodes[i];
    const int32_t *in = kiln_gnode_inputs(g, n);
    for (int k = 0; k < n->n_in; k++) last_use[in[k]] = i;
  }
  for (int32_t o = 0; o < g->n_outputs; o++) last_use[g->output_node[o]] = N;

  for (int32_t i = 0; i < N && s == KILN_OK; i++) {
    const kiln_gnode *n = &g->nodes[i];
    size_t bytes = kiln_gnode_bytes(n);
    vals[i] = (kiln_ref_val){.data = calloc(bytes ? bytes : 1, 1),
                             .dtype = n->dtype,
                             .rank = n->rank,
                             .shape = n->shape,
                             .numel = kiln_gnode_numel(n)};
    if (!vals[i].data) {
      s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory (%zu bytes) for %s at node %%%d", bytes,
                       kiln_op_name(n->op), (int)i);
      break;
    }
    s = eval_node(g, i, vals, inputs, err);
    if (s == KILN_ERR_INVALID_ARGUMENT) { /* the program's data (an index): say where it was traced */
      pthread_mutex_lock(&e->mu);
      e->fault_loc = n->loc;
      e->has_fault = 1;
      pthread_mutex_unlock(&e->mu);
    }
    /* free the inputs whose last reader was this node */
    const int32_t *in = kiln_gnode_inputs(g, n);
    for (int k = 0; k < n->n_in; k++) {
      if (last_use[in[k]] == i && vals[in[k]].data) {
        free(vals[in[k]].data);
        vals[in[k]].data = NULL;
      }
    }
    if (last_use[i] == i) { /* dead node: nothing reads it */
      free(vals[i].data);
      vals[i].data = NULL;
    }
  }
  if (s == KILN_OK) {
    for (int32_t o = 0; o < g->n_outputs; o++) {
      const kiln_gnode *n = &g->nodes[g->output_node[o]];
      size_t bytes = kiln_gnode_bytes(n);
      if (bytes) memcpy(outputs[o], vals[g->output_node[o]].data, bytes);
    }
  }
done:
  if (vals)
    for (int32_t i = 0; i < N; i++) free(vals[i].data);
  free(vals);
  free(last_use);
  return s;
}

static int ref_last_error_loc(kiln_backend *b, const kiln_executable *e, kiln_loc *out) {
  (void)b;
  kiln_executable *m = (kiln_executable *)e; /* the mutex only */
  pthread_mutex_lock(&m->mu);
  int has = m->has_fault;
  if (has) *out = m->fault_loc;
  pthread_mutex_unlock(&m->mu);
  return has;
}

static void ref_executable_info(kiln_backend *b, const kiln_executable *e, kiln_exec_info *out) {
  (void)b;
  memset(out, 0, sizeof *out);
  const kiln_graph *g = e->g;
  for (int32_t i = 0; i < g->n_inputs; i++) out->input_bytes += kiln_gnode_bytes(&g->nodes[g->input_node[i]]);
  for (int32_t o = 0; o < g->n_outputs; o++) {
    size_t bytes = kiln_gnode_bytes(&g->nodes[g->output_node[o]]);
    out->output_bytes += bytes;
    if (g->output_alias[o] >= 0) out->aliased_bytes += bytes;
  }
  /* the interpreter has no fused kernels: every node is its own "kernel" */
  for (int32_t i = 0; i < g->n_nodes; i++) {
    int op = g->nodes[i].op;
    if (op == KILN_OP_MATMUL)
      out->n_gemm_calls++;
    else if (op != KILN_OP_LEAF && op != KILN_OP_SCALAR)
      out->n_kernels++;
  }
}

static const char *ref_describe(kiln_backend *b) {
  (void)b;
  return "ref: plain reference interpreter (one node at a time, one thread, no compiler)";
}

static const kiln_backend_vtable k_ref_vtable = {
    .destroy = ref_destroy,
    .api_version = KILN_BACKEND_API_VERSION,
    .name = "ref",
    .buffer_alloc = ref_buffer_alloc,
    .buffer_free = ref_buffer_free,
    .copy_to_device = ref_copy,
    .copy_to_host = ref_copy,
    .compile = ref_compile,
    .execute = ref_execute,
    .executable_free = ref_executable_free,
    .executable_info = ref_executable_info,
    .last_kernel_timings = NULL,
    .describe = ref_describe,
    .last_error_loc = ref_last_error_loc,
};

kiln_status kiln_backend_ref_create(const kiln_backend_config *cfg, kiln_backend **out, kiln_err *err) {
  (void)cfg;
  *out = NULL;
  ref_backend *rb = calloc(1, sizeof *rb);
  if (!rb) return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "ref: out of memory creating the backend");
  rb->base.vt = &k_ref_vtable;
  *out = &rb->base;
  return KILN_OK;
}
