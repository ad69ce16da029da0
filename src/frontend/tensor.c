/* Tensor table, trace-time nodes and hash-consing. See trace.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "frontend/api.h"
#include "frontend/trace.h"
#include "base/spans.h"

#define KILN_CONS_INIT 4096u

kiln_status kiln_frontend_init(kiln_frontend *fe, kiln_device_hooks hooks) {
  memset(fe, 0, sizeof *fe);
  fe->hooks = hooks;
  fe->cap_slots = 1024;
  fe->slots = calloc(fe->cap_slots, sizeof *fe->slots);
  fe->cons_cap = KILN_CONS_INIT;
  fe->cons = calloc(fe->cons_cap, sizeof *fe->cons);
  if (!fe->slots || !fe->cons) {
    free(fe->slots);
    free(fe->cons);
    return KILN_ERR_OUT_OF_MEMORY;
  }
  fe->n_slots = 1; /* slot 0: the null tensor */
  fe->mark_epoch = 1;
  return KILN_OK;
}

/* Free a slot (slot_new clears the rest when it is reused). */
void kiln_fe_slot_free(kiln_frontend *fe, uint32_t i) {
  kiln_tslot *s = &fe->slots[i];
  if (s->buf) kiln_buf_unref(s->buf);
  if (s->donor) kiln_buf_unref(s->donor);
  s->buf = s->donor = NULL;
  s->node = s->traced = NULL;
  s->live = 0;
  s->gen = s->gen + 1 ? s->gen + 1 : 1;
  s->next_free = fe->free_head;
  fe->free_head = i;
}

static void release_nodes(kiln_frontend *fe) {
  /* LEAF nodes hold buffer references: drop them before forgetting nodes. */
  for (uint32_t i = 0; i < fe->n_leaves; i++) kiln_buf_unref(fe->leaves[i]->buf);
  fe->n_leaves = 0;
  fe->n_created = 0;
  fe->n_replaced = 0;
  memset(fe->cons, 0, sizeof *fe->cons * fe->cons_cap);
  kiln_arena_reset(&fe->arena);
  fe->n_nodes = 0;
}

uint32_t kiln_fe_max_gen(const kiln_frontend *fe) {
  uint32_t m = 0;
  for (uint32_t i = 1; i < fe->n_slots; i++)
    if (fe->slots[i].gen > m) m = fe->slots[i].gen;
  return m;
}

void kiln_frontend_destroy(kiln_frontend *fe) {
  if (!fe->slots) return;
  for (uint32_t i = 1; i < fe->n_slots; i++)
    if (fe->slots[i].live) kiln_fe_slot_free(fe, i);
  release_nodes(fe);
  kiln_arena_destroy(&fe->arena);
  free(fe->slots);
  free(fe->cons);
  free(fe->step_list);
  free(fe->kept_list);
  free(fe->leaves);
  free(fe->created);
  free(fe->replaced);
  memset(fe, 0, sizeof *fe);
}

const char *kiln_fe_shape_str(int rank, const int64_t *shape, char *buf, size_t len) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, len - o, "[");
  for (int i = 0; i < rank && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, i ? ",%lld" : "%lld", (long long)shape[i]);
  if (o < len) snprintf(buf + o, len - o, "]");
  return buf;
}

kiln_tslot *kiln_fe_slot(kiln_frontend *fe, kiln_tensor t, const char *op, kiln_loc loc) {
  if (t.index == 0 && t.gen == 0) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: the null tensor was passed", op);
    return NULL;
  }
  if (t.gen < fe->gen_base) { /* every slot of this frontend starts at gen_base */
    kiln_error(KILN_ERR_STALE_HANDLE, loc,
               "%s: tensor handle {%u,%u} is stale: it was made before kiln_shutdown(), which released every "
               "tensor (kept ones and parameters included); a handle from before it is never valid again: make "
               "the tensor again after kiln_init()",
               op, t.index, t.gen);
    return NULL;
  }
  if (t.index >= fe->n_slots || !fe->slots[t.index].live || fe->slots[t.index].gen != t.gen) {
    kiln_error(KILN_ERR_STALE_HANDLE, loc,
               "%s: tensor handle {%u,%u} is stale (released at a step marker or by kiln_release; "
               "use kiln_keep to keep a tensor across steps)",
               op, t.index, t.gen);
    return NULL;
  }
  return &fe->slots[t.index];
}

static int list_push(uint32_t **list, uint32_t *n, uint32_t *cap, uint32_t v) {
  if (*n == *cap) {
    uint32_t nc = *cap ? *cap * 2 : 256;
    uint32_t *nl = realloc(*list, nc * sizeof **list);
    if (!nl) return -1;
    *list = nl;
    *cap = nc;
  }
  (*list)[(*n)++] = v;
  return 0;
}

static kiln_tslot *slot_new(kiln_frontend *fe, kiln_loc loc, kiln_tensor *out) {
  uint32_t i = fe->free_head;
  if (i) {
    fe->free_head = fe->slots[i].next_free;
  } else {
    if (fe->n_slots == fe->cap_slots) {
      uint32_t nc = fe->cap_slots * 2;
      kiln_tslot *ns = realloc(fe->slots, nc * sizeof *ns);
      if (!ns) return NULL;
      memset(ns + fe->cap_slots, 0, (nc - fe->cap_slots) * sizeof *ns);
      fe->slots = ns;
      fe->cap_slots = nc;
    }
    i = fe->n_slots++;
    fe->slots[i].gen = fe->gen_base ? fe->gen_base : 1;
  }
  if (list_push(&fe->step_list, &fe->n_step, &fe->cap_step, i)) {
    fe->slots[i].next_free = fe->free_head;
    fe->free_head = i;
    return NULL;
  }
  kiln_tslot *s = &fe->slots[i];
  uint32_t gen = s->gen ? s->gen : 1;
  memset(s, 0, sizeof *s);
  s->gen = gen;
  s->live = 1;
  s->kept_pos = -1;
  s->loc = loc;
  out->index = i;
  out->gen = s->gen;
  return s;
}

kiln_tensor kiln_fe_poison(kiln_frontend *fe, kiln_loc loc) {
  kiln_tensor t = {0, 0};
  kiln_tslot *s = slot_new(fe, loc, &t);
  if (s) s->poisoned = 1;
  return t;
}

kiln_tensor kiln_api_fail_at(kiln_status s, kiln_loc loc, const char *fmt, ...) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  kiln_error(s, loc, "%s", msg);
  return kiln_fe_poison(fe, loc);
}

kiln_tensor kiln_fe_tensor(kiln_frontend *fe, kiln_node *node, kiln_loc loc) {
  /* every node made inside a no-grad region is marked: an unmarked one there is an op's input
   * returned unchanged (a reshape to the same shape, a full slice), which must come out detached too
   * (a plain LEAF never carries a gradient: only a tensor's own LEAF or a read's tape does) */
  if (node && fe->no_grad_depth && !node->no_grad && (node->op != KILN_OP_LEAF || node->own || node->tape))
    node = kiln_fe_own_node(fe, node, 1);
  if (!node) return kiln_fe_poison(fe, loc);
  kiln_tensor t = {0, 0};
  kiln_tslot *s = slot_new(fe, loc, &t);
  if (!s) {
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory creating a tensor");
    return t;
  }
  s->node = node;
  if (node->op == KILN_OP_LEAF) { /* an op that returned its input: computed */
    kiln_buf_ref(node->buf);
    s->buf = node->buf;
  }
  s->dtype = node->dtype;
  s->rank = node->rank;
  for (int i = 0; i < node->rank; i++) s->shape[i] = node->shape[i];
  fe->ops_traced++;
  return t;
}

kiln_tensor kiln_fe_tensor_buf(kiln_frontend *fe, kiln_buf *buf, kiln_dtype dt, int rank, const int64_t *shape,
                               kiln_loc loc) {
  kiln_tensor t = {0, 0};
  kiln_tslot *s = slot_new(fe, loc, &t);
  if (!s) {
    kiln_buf_unref(buf);
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "out of memory creating a tensor");
    return t;
  }
  s->buf = buf;
  s->dtype = (uint8_t)dt;
  s->rank = (uint8_t)rank;
  if (rank) memcpy(s->shape, shape, sizeof(int64_t) * (size_t)rank);
  return t;
}

/* ── nodes ── */

/* Cheap per-word step (multiply + rotate) and one strong final mix: this
 * runs for every traced op. */
static inline uint64_t hstep(uint64_t h, uint64_t v) {
  h ^= v * 0x9e3779b97f4a7c15ULL;
  return ((h << 27) | (h >> 37)) * 0xff51afd7ed558ccdULL;
}

static inline uint64_t node_struct_hash(int op, kiln_dtype dt, int rank, const int64_t *shape, int n_in,
                                 kiln_node *const *in, int n_iattr, const int64_t *iattr, double fattr) {
  uint64_t h = hstep(0x6b696c6eULL, ((uint64_t)op << 16) | ((uint64_t)dt << 8) | (uint64_t)rank);
  for (int i = 0; i < rank; i++) h = hstep(h, (uint64_t)shape[i]);
  h = hstep(h, (uint64_t)n_iattr);
  for (int i = 0; i < n_iattr; i++) h = hstep(h, (uint64_t)iattr[i]);
  if (op != KILN_OP_SCALAR) {
    uint64_t fb;
    memcpy(&fb, &fattr, sizeof fb);
    h = hstep(h, fb);
  }
  for (int i = 0; i < n_in; i++) h = hstep(h, in[i]->hash);
  return kiln_mix64(h);
}

static int cons_grow(kiln_frontend *fe) {
  uint32_t nc = fe->cons_cap * 2;
  kiln_node **nb = calloc(nc, sizeof *nb);
  if (!nb) return -1;
  for (uint32_t b = 0; b < fe->cons_cap; b++) {
    kiln_node *n = fe->cons[b];
    while (n) {
      kiln_node *next = n->cons_next;
      uint64_t key = n->op == KILN_OP_LEAF ? kiln_hash_combine(n->hash, (uint64_t)(uintptr_t)n->buf) : n->hash;
      uint32_t nbkt = (uint32_t)(key & (nc - 1));
      n->cons_next = nb[nbkt];
      nb[nbkt] = n;
      n = next;
    }
  }
  free(fe->cons);
  fe->cons = nb;
  fe->cons_cap = nc;
  return 0;
}

static kiln_node *node_alloc(kiln_frontend *fe, int op, kiln_dtype dt, int rank, const int64_t *shape, int n_in,
                             kiln_node *const *in, int n_iattr, const int64_t *iattr, double fattr, uint64_t h,
                             kiln_loc loc) {
  if (fe->n_created == fe->cap_created) {
    uint32_t nc = fe->cap_created ? fe->cap_created * 2 : 1024;
    kiln_node **nl = realloc(fe->created, nc * sizeof *nl);
    if (!nl) return NULL;
    fe->created = nl;
    fe->cap_created = nc;
  }
  /* every field is set below: no zeroing (this runs for every traced op) */
  kiln_node *n = kiln_arena_alloc_raw(&fe->arena, sizeof *n + sizeof(kiln_node *) * (size_t)n_in +
                                                      sizeof(int64_t) * (size_t)n_iattr);
  if (!n) return NULL;
  n->in = (kiln_node **)(n + 1);
  n->iattr = (int64_t *)(n->in + n_in);
  n->hash = h;
  n->op = (uint16_t)op;
  n->dtype = (uint8_t)dt;
  n->rank = (uint8_t)rank;
  n->no_grad = fe->no_grad_depth > 0;
  n->dyn = 0;
  n->own = 0;
  n->n_in = (uint16_t)n_in;
  n->n_iattr = (uint16_t)n_iattr;
  for (int i = 0; i < rank; i++) n->shape[i] = shape[i];
  for (int i = 0; i < n_in; i++) n->in[i] = in[i];
  for (int i = 0; i < n_iattr; i++) n->iattr[i] = iattr[i];
  n->ival = 0;
  n->buf = NULL;
  n->tape = NULL;
  n->mark = 0;
  n->cons_next = NULL;
  n->fattr = fattr;
  n->loc = loc;
  n->scope = kiln_prof_scope_current();
  n->lin = -1;
  fe->n_nodes++;
  fe->created[fe->n_created++] = n;
  return n;
}

__attribute__((noinline)) int kiln_fe_shape_check(kiln_dtype dt, int rank, const int64_t *shape) {
  uint64_t bytes = kiln_dtype_size(dt) ? kiln_dtype_size(dt) : 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0) return 0;
    /* the product of the non-zero sizes, so a shape with a 0 in it cannot
     * hide an overflow that a reduction over that axis would expose */
    if (shape[i] && __builtin_mul_overflow(bytes, (uint64_t)shape[i], &bytes)) return 0;
  }
  return bytes <= (uint64_t)INT64_MAX;
}

/* Every node's shape passes here: one check for every shape rule. */
__attribute__((cold, noinline)) static kiln_node *shape_fail(int op, kiln_dtype dt, int rank, const int64_t *shape, int n_in, kiln_node *const *in,
                             kiln_loc loc) {
  char so[160], si[3][160];
  for (int i = 0; i < 3; i++) si[i][0] = 0;
  for (int i = 0; i < n_in && i < 3; i++) kiln_fe_shape_str(in[i]->rank, in[i]->shape, si[i], sizeof si[i]);
  kiln_error(KILN_ERR_INVALID_ARGUMENT, loc,
             "%s: the result shape %s (%s) has a negative size or more elements or bytes than int64 holds "
             "(inputs %s%s%s%s%s)",
             kiln_op_name(op), kiln_fe_shape_str(rank, shape, so, sizeof so), kiln_dtype_name(dt),
             n_in ? si[0] : "none", n_in > 1 ? ", " : "", si[1], n_in > 2 ? ", " : "", si[2]);
  return NULL;
}

kiln_node *kiln_fe_node(kiln_frontend *fe, int op, kiln_dtype dt, int rank, const int64_t *shape, int n_in,
                        kiln_node *const *in, int n_iattr, const int64_t *iattr, double fattr, kiln_loc loc) {
  KILN_ASSERT(op != KILN_OP_LEAF && op != KILN_OP_SCALAR && n_iattr <= KILN_MAX_IATTR && rank <= KILN_MAX_RANK);
  uint64_t h = node_struct_hash(op, dt, rank, shape, n_in, in, n_iattr, iattr, fattr);
  uint32_t b = (uint32_t)(h & (fe->cons_cap - 1));
  for (kiln_node *n = fe->cons[b]; n; n = n->cons_next) {
    if (n->hash != h || n->op != op || n->dtype != dt || n->rank != rank || n->n_in != n_in ||
        n->n_iattr != n_iattr || n->no_grad != (fe->no_grad_depth > 0))
      continue;
    int same = !memcmp(&n->fattr, &fattr, sizeof fattr);
    for (int i = 0; same && i < rank; i++) same = n->shape[i] == shape[i];
    for (int i = 0; same && i < n_iattr; i++) same = n->iattr[i] == iattr[i];
    for (int i = 0; same && i < n_in; i++) same = n->in[i] == in[i];
    if (same) return n; /* common subexpression: share it */
  }
  if (!kiln_fe_shape_ok(dt, rank, shape)) return shape_fail(op, dt, rank, shape, n_in, in, loc);
  kiln_node *n = node_alloc(fe, op, dt, rank, shape, n_in, in, n_iattr, iattr, fattr, h, loc);
  if (!n) return NULL;
  n->cons_next = fe->cons[b];
  fe->cons[b] = n;
  if (fe->n_nodes > fe->cons_cap) cons_grow(fe);
  return n;
}

kiln_node *kiln_fe_scalar_node(kiln_frontend *fe, kiln_dtype dt, double fv, int64_t iv, kiln_loc loc) {
  uint64_t h = node_struct_hash(KILN_OP_SCALAR, dt, 0, NULL, 0, NULL, 0, NULL, 0.0);
  kiln_node *n = node_alloc(fe, KILN_OP_SCALAR, dt, 0, NULL, 0, NULL, 0, NULL, fv, h, loc);
  if (!n) return NULL;
  n->ival = iv;
  /* Never hash-consed (two scalars that happen to be equal stay two graph
   * inputs, so the graph's structure never depends on scalar values) and in
   * no cons bucket: it lives in the step's arena and holds nothing that
   * release_nodes must drop. */
  return n;
}

/* A new LEAF on buf, in the step's leaf list (holding a buffer reference);
 * consed: also in the hash-consing table under key. */
static kiln_node *leaf_alloc(kiln_frontend *fe, kiln_buf *buf, kiln_dtype dt, int rank, const int64_t *shape,
                             uint64_t h, int consed, uint64_t key, kiln_loc loc) {
  if (fe->n_leaves == fe->cap_leaves) {
    uint32_t nc = fe->cap_leaves ? fe->cap_leaves * 2 : 64;
    kiln_node **nl = realloc(fe->leaves, nc * sizeof *nl);
    if (!nl) return NULL;
    fe->leaves = nl;
    fe->cap_leaves = nc;
  }
  kiln_node *n = node_alloc(fe, KILN_OP_LEAF, dt, rank, shape, 0, NULL, 0, NULL, 0.0, h, loc);
  if (!n) return NULL;
  fe->leaves[fe->n_leaves++] = n;
  n->buf = buf;
  n->no_grad = 0; /* a source: the flag only tells a detached copy (kiln_fe_own_node) */
  kiln_buf_ref(buf);
  if (consed) {
    uint32_t b = (uint32_t)(key & (fe->cons_cap - 1));
    n->cons_next = fe->cons[b];
    fe->cons[b] = n;
    if (fe->n_nodes > fe->cons_cap) cons_grow(fe);
  }
  return n;
}

static kiln_node *leaf_node(kiln_frontend *fe, kiln_tslot *s) {
  uint64_t h = node_struct_hash(KILN_OP_LEAF, (kiln_dtype)s->dtype, s->rank, s->shape, 0, NULL, 0, NULL, 0.0);
  kiln_node *n;
  if (s->grad_own) { /* a tensor that requires grad: a LEAF of its own (kiln_fe_own_node) */
    n = leaf_alloc(fe, s->buf, (kiln_dtype)s->dtype, s->rank, s->shape, h, 0, 0, s->loc);
    if (n) {
      n->dyn = s->dyn;
      n->own = 1;
    }
    return n;
  }
  uint64_t key = kiln_hash_combine(h, (uint64_t)(uintptr_t)s->buf);
  uint32_t b = (uint32_t)(key & (fe->cons_cap - 1));
  for (n = fe->cons[b]; n; n = n->cons_next)
    if (n->op == KILN_OP_LEAF && n->buf == s->buf) {
      n->dyn |= s->dyn;
      return n;
    }
  n = leaf_alloc(fe, s->buf, (kiln_dtype)s->dtype, s->rank, s->shape, h, 1, key, s->loc);
  if (n) n->dyn = s->dyn;
  return n;
}

kiln_node *kiln_fe_own_node(kiln_frontend *fe, const kiln_node *n, int no_grad) {
  kiln_node *c;
  if (n->op == KILN_OP_LEAF) {
    c = leaf_alloc(fe, n->buf, (kiln_dtype)n->dtype, n->rank, n->shape, n->hash, 0, 0, n->loc);
    if (c) c->dyn = n->dyn;
  } else {
    /* same op, inputs and attributes (computed twice, or merged again by the compiler's CSE): not in the
     * hash-consing table, so no later op finds it as a twin; a SCALAR keeps its value */
    c = node_alloc(fe, n->op, (kiln_dtype)n->dtype, n->rank, n->shape, n->n_in, n->in, n->n_iattr, n->iattr,
                   n->fattr, n->hash, n->loc);
    if (c) c->ival = n->ival;
  }
  if (c) {
    c->no_grad = (uint8_t)(no_grad ? 1 : n->no_grad);
    c->own = 1;
  }
  return c;
}

kiln_node *kiln_fe_node_of(kiln_frontend *fe, kiln_tslot *s) {
  if (s->poisoned) return NULL;
  if (s->node) return s->node;
  if (!s->buf) return NULL;
  s->node = leaf_node(fe, s); /* cached until the step ends */
  /* a value read mid-step: its uses see the computed buffer, its gradient
   * still reaches the step's tape */
  if (s->node && s->traced && !s->node->tape) s->node->tape = s->traced;
  return s->node;
}

void kiln_fe_set_computed(kiln_frontend *fe, kiln_tslot *s, kiln_buf *buf) {
  (void)fe;
  kiln_buf_unref(s->buf);
  s->buf = buf;
  s->node = NULL; /* a LEAF on buf is made on next use */
  s->traced = NULL;
  kiln_buf_unref(s->donor);
  s->donor = NULL;
}

void kiln_fe_set_poisoned(kiln_frontend *fe, kiln_tslot *s) {
  (void)fe;
  s->poisoned = 1;
  s->node = NULL;
  s->traced = NULL;
}

void kiln_fe_end_step(kiln_frontend *fe) {
  for (uint32_t k = 0; k < fe->n_step; k++) {
    uint32_t i = fe->step_list[k];
    kiln_tslot *s = &fe->slots[i];
    if (s->live && !s->kept) kiln_fe_slot_free(fe, i);
  }
  fe->n_step = 0;
  /* Kept tensors: drop the per-step LEAF cache (nodes die with the arena). */
  for (uint32_t k = 0; k < fe->n_kept; k++) {
    kiln_tslot *s = &fe->slots[fe->kept_list[k]];
    if (s->node && s->node->op == KILN_OP_LEAF) s->node = NULL;
    s->traced = NULL;
    KILN_ASSERT(!s->node || s->poisoned);
  }
  release_nodes(fe);
}

int kiln_fe_note_replaced(kiln_frontend *fe, kiln_tensor t, kiln_node *old, kiln_loc loc) {
  if (fe->n_replaced == fe->cap_replaced) {
    uint32_t nc = fe->cap_replaced ? fe->cap_replaced * 2 : 16;
    kiln_replaced *nl = realloc(fe->replaced, nc * sizeof *nl);
    if (!nl) {
      kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "assign: out of memory");
      return -1;
    }
    fe->replaced = nl;
    fe->cap_replaced = nc;
  }
  fe->replaced[fe->n_replaced++] = (kiln_replaced){old, t.index, t.gen, loc};
  return 0;
}
