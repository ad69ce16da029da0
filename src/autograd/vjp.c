/* Vector-Jacobian product rules: for each differentiable IR op, the
 * gradients of its inputs as new trace nodes built from the gradient of its
 * output. Every rule is written with IR ops only, so forward, backward and
 * the optimizer update fuse into one graph.
 *
 * In the IR, elementwise inputs already have the output's shape (broadcasts
 * are explicit EXPAND nodes), so elementwise rules never sum over broadcast
 * dimensions: EXPAND's own rule does. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"

typedef struct vctx {
  kiln_frontend *fe;
  kiln_loc loc;
} vctx;

static int64_t numel(int rank, const int64_t *s) {
  int64_t e = 1;
  for (int i = 0; i < rank; i++) e *= s[i];
  return e;
}

/* Builders over nodes; each returns NULL when an input is NULL (out of
 * memory upstream), so a chain fails once at its end. */
static kiln_node *mk(vctx *c, int op, kiln_dtype dt, int rank, const int64_t *shape, int n_in, kiln_node **in,
                     int n_iattr, const int64_t *iattr, double fattr) {
  for (int i = 0; i < n_in; i++)
    if (!in[i]) return NULL;
  return kiln_fe_node(c->fe, op, dt, rank, shape, n_in, in, n_iattr, iattr, fattr, c->loc);
}
static kiln_node *un(vctx *c, int op, kiln_node *a) {
  return a ? mk(c, op, (kiln_dtype)a->dtype, a->rank, a->shape, 1, &a, 0, NULL, 0.0) : NULL;
}
/* Elementwise binary on same-shape operands; predicates give bool. */
static kiln_node *bin(vctx *c, int op, kiln_node *a, kiln_node *b) {
  if (!a || !b) return NULL;
  kiln_node *in[2] = {a, b};
  kiln_dtype dt = kiln_op_is_predicate(op) ? KILN_BOOL : (kiln_dtype)a->dtype;
  return mk(c, op, dt, a->rank, a->shape, 2, in, 0, NULL, 0.0);
}
/* A constant of like's dtype and shape. */
static kiln_node *cst(vctx *c, kiln_node *like, double v) {
  return like ? kiln_api_const(c->fe, (kiln_dtype)like->dtype, like->rank, like->shape, v, c->loc) : NULL;
}
static kiln_node *sel(vctx *c, kiln_node *cond, kiln_node *a, kiln_node *b) {
  if (!cond || !a || !b) return NULL;
  kiln_node *in[3] = {cond, a, b};
  return mk(c, KILN_OP_WHERE, (kiln_dtype)a->dtype, a->rank, a->shape, 3, in, 0, NULL, 0.0);
}
static kiln_node *reshape(vctx *c, kiln_node *a, int rank, const int64_t *shape) {
  return kiln_api_reshape(c->fe, a, rank, shape, c->loc);
}
static kiln_node *expand(vctx *c, kiln_node *a, int rank, const int64_t *shape) {
  return kiln_api_broadcast(c->fe, a, rank, shape, c->loc);
}
static kiln_node *cast(vctx *c, kiln_node *a, kiln_dtype dt) { return kiln_api_cast(c->fe, a, dt, c->loc); }
/* Keepdim sum over the axes in mask. */
static kiln_node *rsum(vctx *c, kiln_node *a, uint64_t mask) {
  if (!a) return NULL;
  if (!mask) return a;
  int64_t s[KILN_MAX_RANK];
  for (int i = 0; i < a->rank; i++) s[i] = (mask >> i) & 1 ? 1 : a->shape[i];
  int64_t attr = (int64_t)mask;
  return mk(c, KILN_OP_REDUCE_SUM, (kiln_dtype)a->dtype, a->rank, s, 1, &a, 1, &attr, 0.0);
}
static kiln_node *permute(vctx *c, kiln_node *a, const int *perm) {
  if (!a) return NULL;
  int64_t s[KILN_MAX_RANK], attr[KILN_MAX_RANK];
  int id = 1;
  for (int i = 0; i < a->rank; i++) {
    s[i] = a->shape[perm[i]];
    attr[i] = perm[i];
    id &= perm[i] == i;
  }
  return id ? a : mk(c, KILN_OP_PERMUTE, (kiln_dtype)a->dtype, a->rank, s, 1, &a, a->rank, attr, 0.0);
}
static kiln_node *swap_last2(vctx *c, kiln_node *a) {
  if (a && kiln_ag_is_swap_last2(a)) return a->in[0]; /* swap(swap(x)) = x: no node */
  int p[KILN_MAX_RANK];
  for (int i = 0; i < a->rank; i++) p[i] = i;
  p[a->rank - 2] = a->rank - 1;
  p[a->rank - 1] = a->rank - 2;
  return permute(c, a, p);
}
static kiln_node *matmul(vctx *c, kiln_node *a, kiln_node *b) {
  if (!a || !b) return NULL;
  int64_t s[KILN_MAX_RANK];
  memcpy(s, a->shape, sizeof(int64_t) * a->rank);
  s[a->rank - 1] = b->shape[b->rank - 1];
  kiln_node *in[2] = {a, b};
  return mk(c, KILN_OP_MATMUL, (kiln_dtype)a->dtype, a->rank, s, 2, in, 0, NULL, 0.0);
}
/* Constant zero padding (lo/hi per axis). */
static kiln_node *pad(vctx *c, kiln_node *a, const int64_t *lo, const int64_t *hi) {
  if (!a) return NULL;
  int64_t s[KILN_MAX_RANK], attr[2 * KILN_MAX_RANK];
  int any = 0;
  for (int i = 0; i < a->rank; i++) {
    s[i] = a->shape[i] + lo[i] + hi[i];
    attr[i] = lo[i];
    attr[a->rank + i] = hi[i];
    any |= lo[i] || hi[i];
  }
  return any ? mk(c, KILN_OP_PAD, (kiln_dtype)a->dtype, a->rank, s, 1, &a, 2 * a->rank, attr, 0.0) : a;
}
/* Step-1 slice: out has shape `shape`, starting at start[]. */
static kiln_node *crop(vctx *c, kiln_node *a, const int64_t *start, const int64_t *shape) {
  if (!a) return NULL;
  int64_t attr[2 * KILN_MAX_RANK];
  int id = 1;
  for (int i = 0; i < a->rank; i++) {
    attr[i] = start[i];
    attr[a->rank + i] = 1;
    id &= start[i] == 0 && shape[i] == a->shape[i];
  }
  return id ? a : mk(c, KILN_OP_SLICE, (kiln_dtype)a->dtype, a->rank, shape, 1, &a, 2 * a->rank, attr, 0.0);
}
/* The builders of an index op's gradient (INDEX_SELECT, GATHER, SCATTER*)
 * pass the indices on unclamped and make their nodes at the forward op's
 * line: the gradient's own gather/scatter then checks the indices when it
 * runs and reports an out-of-range one at the user's line. A training step
 * often computes only the gradient of an index op, not its value (the loss
 * is neither read nor kept that step): with clamped indices such a step
 * trained on the wrong rows (an embedding id or a class label past the
 * end) with status OK. */
static vctx at_forward(const vctx *c, const kiln_node *n) { return (vctx){c->fe, n->loc}; }
static kiln_node *iota(vctx *c, kiln_dtype dt, int rank, const int64_t *shape, int64_t axis) {
  return mk(c, KILN_OP_IOTA, dt, rank, shape, 0, NULL, 1, &axis, 0.0);
}

int kiln_ag_is_swap_last2(const kiln_node *n) {
  if (n->op != KILN_OP_PERMUTE || n->rank < 2 || n->n_iattr < n->rank) return 0;
  for (int i = 0; i < n->rank - 2; i++)
    if (n->iattr[i] != i) return 0;
  return n->iattr[n->rank - 2] == n->rank - 1 && n->iattr[n->rank - 1] == n->rank - 2;
}

kiln_node *kiln_ag_transposed_matmul(kiln_frontend *fe, kiln_node *mm, kiln_loc loc) {
  vctx c = {fe, loc};
  return matmul(&c, swap_last2(&c, mm->in[1]), swap_last2(&c, mm->in[0]));
}

int kiln_ag_differentiable(int op) { return op >= 0 && op < KILN_OP_COUNT && kiln_op_table[op].vjp != NULL; }

/* ───────────── the op table's gradient formulas ─────────────
 *
 * Each elementwise row of include/kiln/ops.def gives the gradient of each
 * input as a formula (the grammar is in ops.def's header). The formulas are
 * compiled once, at the first backward, into postfix code; a backward runs
 * the code with builders of trace nodes, so a formula costs what the
 * equivalent hand-written builder calls cost. */

enum { F_X, F_Y, F_Z, F_OUT, F_G, F_NUM, F_OP };
typedef struct finstr {
  uint8_t kind, nargs;
  int16_t op;
  double v;
} finstr;
typedef struct fcode {
  int start, len; /* in k_fpool; len 0: no gradient flows to this input */
} fcode;

#define F_POOL 4096
static finstr k_fpool[F_POOL];
static int k_fpool_n;
static fcode k_fcode[KILN_OP_COUNT][3];
static char k_ferr[256]; /* the first formula that does not parse */
static pthread_once_t k_fonce = PTHREAD_ONCE_INIT;

typedef struct fparse {
  const char *p, *end;
  int op; /* the row being compiled, for messages */
  int bad;
} fparse;

static void fp_fail(fparse *f, const char *why) {
  if (!f->bad && !k_ferr[0])
    snprintf(k_ferr, sizeof k_ferr, "op table: the gradient formula of %s does not parse (%s at \"%.20s\")",
             kiln_op_name(f->op), why, f->p);
  f->bad = 1;
}
static void fp_emit(fparse *f, int kind, int nargs, int op, double v) {
  if (f->bad) return;
  if (k_fpool_n == F_POOL) return fp_fail(f, "the formula pool is full");
  k_fpool[k_fpool_n++] = (finstr){(uint8_t)kind, (uint8_t)nargs, (int16_t)op, v};
}
static void fp_space(fparse *f) {
  while (f->p < f->end && isspace((unsigned char)*f->p)) f->p++;
}
static int fp_peek(fparse *f) {
  fp_space(f);
  return f->p < f->end ? *f->p : 0;
}
static void fp_expr(fparse *f);
static void fp_primary(fparse *f) {
  int ch = fp_peek(f);
  if (ch == '(') {
    f->p++;
    fp_expr(f);
    if (fp_peek(f) != ')') return fp_fail(f, "')' expected");
    f->p++;
    return;
  }
  if (isdigit(ch) || ch == '.') {
    char *e;
    double v = strtod(f->p, &e);
    if (e == f->p || e > f->end) return fp_fail(f, "bad number");
    f->p = e;
    return fp_emit(f, F_NUM, 0, 0, v);
  }
  const char *s = f->p;
  while (f->p < f->end && (isalnum((unsigned char)*f->p) || *f->p == '_')) f->p++;
  int len = (int)(f->p - s);
  if (!len) return fp_fail(f, "operand expected");
  static const char *const vars[] = {"x", "y", "z", "out", "g"};
  for (int k = 0; k < 5; k++)
    if ((int)strlen(vars[k]) == len && !memcmp(vars[k], s, (size_t)len)) return fp_emit(f, F_X + k, 0, 0, 0.0);
  int op = kiln_op_by_name(s, len);
  if (op < 0 || !kiln_op_is_elementwise(op) || op == KILN_OP_CAST) return fp_fail(f, "unknown name");
  if (fp_peek(f) != '(') return fp_fail(f, "'(' expected");
  f->p++;
  int n = 0;
  for (;;) {
    fp_expr(f);
    n++;
    if (fp_peek(f) != ',') break;
    f->p++;
  }
  if (fp_peek(f) != ')') return fp_fail(f, "')' expected");
  f->p++;
  if (n != kiln_op_table[op].arity) return fp_fail(f, "wrong number of arguments");
  fp_emit(f, F_OP, n, op, 0.0);
}
static void fp_unary(fparse *f) {
  if (fp_peek(f) == '-') {
    f->p++;
    int ch = fp_peek(f);
    if (isdigit(ch) || ch == '.') { /* a negative number */
      fp_primary(f);
      if (!f->bad) k_fpool[k_fpool_n - 1].v = -k_fpool[k_fpool_n - 1].v;
      return;
    }
    fp_unary(f);
    return fp_emit(f, F_OP, 1, KILN_OP_NEG, 0.0);
  }
  fp_primary(f);
}
static void fp_term(fparse *f) {
  fp_unary(f);
  for (int ch; !f->bad && ((ch = fp_peek(f)) == '*' || ch == '/');) {
    f->p++;
    fp_unary(f);
    fp_emit(f, F_OP, 2, ch == '*' ? KILN_OP_MUL : KILN_OP_DIV, 0.0);
  }
}
static void fp_expr(fparse *f) {
  fp_term(f);
  for (int ch; !f->bad && ((ch = fp_peek(f)) == '+' || ch == '-');) {
    f->p++;
    fp_term(f);
    fp_emit(f, F_OP, 2, ch == '+' ? KILN_OP_ADD : KILN_OP_SUB, 0.0);
  }
}

static void compile_formulas(void) {
  for (int op = 0; op < KILN_OP_COUNT; op++) {
    const char *v = kiln_op_table[op].vjp;
    if (!v || !strcmp(v, "@")) continue;
    for (int k = 0; k < 3 && *v; k++) {
      const char *end = strchr(v, ';');
      if (!end) end = v + strlen(v);
      fparse f = {v, end, op, 0};
      int start = k_fpool_n;
      if (fp_peek(&f)) {
        fp_expr(&f);
        if (!f.bad && fp_peek(&f)) fp_fail(&f, "junk after the formula");
      }
      if (f.bad) k_fpool_n = start;
      else k_fcode[op][k] = (fcode){start, k_fpool_n - start};
      v = *end ? end + 1 : end;
    }
  }
}

const char *kiln_ag_formula_error(void) {
  pthread_once(&k_fonce, compile_formulas);
  return k_ferr[0] ? k_ferr : NULL;
}

/* A value on the evaluation stack: a node, or a number not yet given a
 * dtype and shape. */
typedef struct fval {
  kiln_node *n;
  double v;
  int num;
} fval;

static int is_16bit(const kiln_node *a) { return a && (a->dtype == KILN_BF16 || a->dtype == KILN_F16); }
/* a 16-bit float as f32; anything else as it is */
static kiln_node *wide(vctx *c, kiln_node *a) { return is_16bit(a) ? cast(c, a, KILN_F32) : a; }

/* The nodes of a formula that round (not the exact ones: a select, a
 * comparison, a negation): with at most one, the formula in the 16-bit dtype
 * rounds once already and needs no f32 casts around it (g * y). */
static int rounding_ops(fcode code) {
  int r = 0;
  for (int i = 0; i < code.len; i++) {
    const finstr *f = &k_fpool[code.start + i];
    if (f->kind == F_OP && f->op != KILN_OP_WHERE && f->op != KILN_OP_NEG && !kiln_op_is_predicate(f->op)) r++;
  }
  return r;
}

/* Run the code of input k's formula. With a 16-bit g, the formula is
 * computed in f32 from the 16-bit values and rounded once at the end, as
 * PyTorch's backward kernels of 16-bit floats do (tanh_backward computes
 * g * (1 - y * y) in float): rounding after each of its nodes lost up to a
 * few 16-bit ulps, most where 1 - y * y cancels. A formula of one rounding
 * node is the same in the 16-bit dtype. */
static kiln_node *run_formula(vctx *c, fcode code, kiln_node *n, kiln_node *g) {
  fval st[64];
  int sp = 0;
  kiln_node *in3[3] = {n->n_in > 0 ? n->in[0] : NULL, n->n_in > 1 ? n->in[1] : NULL, n->n_in > 2 ? n->in[2] : NULL};
  kiln_node *g16 = is_16bit(g) && rounding_ops(code) > 1 ? g : NULL;
  for (int i = 0; i < code.len; i++) {
    const finstr *f = &k_fpool[code.start + i];
    if (f->kind != F_OP) {
      if (sp == 64) return NULL;
      kiln_node *v = f->kind == F_OUT ? n : f->kind == F_G ? g : f->kind == F_NUM ? NULL : in3[f->kind - F_X];
      if (f->kind != F_NUM && !v) return NULL;
      if (g16) v = wide(c, v);
      st[sp++] = (fval){v, f->v, f->kind == F_NUM};
      continue;
    }
    int k = f->nargs;
    fval *a = &st[sp - k];
    /* numbers take the dtype and shape of the first tensor among their
     * siblings (for where, among the branches), else g's */
    kiln_node *like = NULL;
    for (int j = f->op == KILN_OP_WHERE ? 1 : 0; j < k && !like; j++)
      if (!a[j].num) like = a[j].n;
    if (!like) like = g16 ? wide(c, g) : g;
    for (int j = 0; j < k; j++)
      if (a[j].num) a[j].n = cst(c, j == 0 && f->op == KILN_OP_WHERE ? g : like, a[j].v);
    kiln_node *r;
    if (f->op == KILN_OP_WHERE)
      r = sel(c, a[0].n, a[1].n, a[2].n);
    else if (k == 1)
      r = un(c, f->op, a[0].n);
    else
      r = bin(c, f->op, a[0].n, a[1].n);
    sp -= k;
    st[sp++] = (fval){r, 0.0, 0};
  }
  if (sp != 1) return NULL;
  kiln_node *r = st[0].num ? cst(c, g, st[0].v) : st[0].n;
  return g16 && r ? cast(c, r, (kiln_dtype)g16->dtype) : r;
}

/* SLICE: scatter g back into zeros of x's shape. A step s > 1 on an axis is
 * undone by interleaving: [L] -> [L,1] -> pad to [L,s] -> [L*s], which puts
 * g[i] at i*s; then crop to what fits and pad by the start. */
static kiln_node *slice_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0];
  int r = n->rank;
  const int64_t *start = n->iattr, *step = n->iattr + r;
  if (numel(r, n->shape) == 0) return cst(c, x, 0.0);
  kiln_node *cur = g;
  for (int d = 0; d < r && cur; d++) {
    if (step[d] == 1) continue;
    if (r + 1 > KILN_MAX_RANK) {
      kiln_error(KILN_ERR_UNSUPPORTED, c->loc,
                 "backward: the gradient of a strided slice of a rank-%d tensor is not supported (rank limit %d)", r,
                 KILN_MAX_RANK);
      return NULL;
    }
    int64_t s1[KILN_MAX_RANK], lo[KILN_MAX_RANK] = {0}, hi[KILN_MAX_RANK] = {0}, s2[KILN_MAX_RANK];
    int k = 0;
    for (int i = 0; i < r; i++) {
      s1[k++] = cur->shape[i];
      if (i == d) s1[k++] = 1;
    }
    hi[d + 1] = step[d] - 1;
    kiln_node *p = pad(c, reshape(c, cur, r + 1, s1), lo, hi);
    memcpy(s2, cur->shape, sizeof(int64_t) * r);
    s2[d] = cur->shape[d] * step[d];
    cur = reshape(c, p, r, s2);
    int64_t room = x->shape[d] - start[d];
    if (cur && s2[d] > room) {
      int64_t z[KILN_MAX_RANK] = {0};
      s2[d] = room;
      cur = crop(c, cur, z, s2);
    }
  }
  if (!cur) return NULL;
  int64_t lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
  for (int d = 0; d < r; d++) {
    lo[d] = start[d];
    hi[d] = x->shape[d] - start[d] - cur->shape[d];
  }
  return pad(c, cur, lo, hi);
}

/* SCATTER or SCATTER_ADD of src into x along axis at ix (out: x's shape). */
static kiln_node *scatter(vctx *c, int op, kiln_node *x, int axis, kiln_node *ix, kiln_node *src) {
  if (!x || !ix || !src) return NULL;
  kiln_node *in[3] = {x, ix, src};
  int64_t at = axis;
  return mk(c, op, (kiln_dtype)x->dtype, x->rank, x->shape, 3, in, 1, &at, 0.0);
}

/* INDEX_SELECT: g added into zeros of x's shape at the indices,
 * torch.index_add's rule, as one SCATTER_ADD over [A, D, B] along D of g
 * seen as [A, N, B]. (A matmul with a one-hot [D, N] matrix gave the same
 * sums, but multiplied every row of g by the zeros of the rows it does not
 * go to: an inf or NaN in one row of g made the gradient of every row of x
 * NaN.) 16-bit floats are accumulated in f32 and rounded once, as the
 * matmul did. */
static kiln_node *index_select_grad(vctx *c0, kiln_node *n, kiln_node *g) {
  vctx cx = at_forward(c0, n), *c = &cx;
  kiln_node *x = n->in[0], *ix = n->in[1];
  int a = (int)n->iattr[0];
  int64_t D = x->shape[a], A = numel(a, x->shape), B = numel(x->rank - a - 1, x->shape + a + 1);
  int64_t N = numel(ix->rank, ix->shape);
  if (N == 0 || numel(x->rank, x->shape) == 0) return cst(c, x, 0.0);
  kiln_dtype dt = (kiln_dtype)g->dtype, acc = dt == KILN_BF16 || dt == KILN_F16 ? KILN_F32 : dt;
  int64_t s1n1[3] = {1, N, 1}, sanb[3] = {A, N, B}, sadb[3] = {A, D, B};
  kiln_node *ci = expand(c, reshape(c, ix, 3, s1n1), 3, sanb);
  kiln_node *z = kiln_api_const(c->fe, acc, 3, sadb, 0.0, c->loc);
  kiln_node *r = scatter(c, KILN_OP_SCATTER_ADD, z, 1, ci, cast(c, reshape(c, g, 3, sanb), acc));
  return reshape(c, cast(c, r, dt), x->rank, x->shape);
}

/* GATHER of a along axis at the indices ix (out: ix's shape). */
static kiln_node *gather(vctx *c, kiln_node *a, int axis, kiln_node *ix) {
  if (!a || !ix) return NULL;
  kiln_node *in[2] = {a, ix};
  int64_t at = axis;
  return mk(c, KILN_OP_GATHER, (kiln_dtype)a->dtype, ix->rank, ix->shape, 2, in, 1, &at, 0.0);
}
/* GATHER: g added into zeros of x's shape at the indices, in one
 * SCATTER_ADD line kernel (sort and topk values are gathers: their
 * gradient goes to the positions the values came from). */
static kiln_node *gather_grad(vctx *c0, kiln_node *n, kiln_node *g) {
  vctx cx = at_forward(c0, n), *c = &cx;
  kiln_node *x = n->in[0], *ix = n->in[1];
  int a = (int)n->iattr[0];
  if (numel(ix->rank, ix->shape) == 0) return cst(c, x, 0.0);
  return scatter(c, KILN_OP_SCATTER_ADD, cst(c, x, 0.0), a, ix, g);
}

/* SCATTER / SCATTER_ADD: x's gradient is g (SCATTER: zero where a value was
 * written over it); src's is g gathered at the indices (SCATTER: only for
 * the duplicate that won, the last along the axis: the exact derivative),
 * zero-padded to src's shape where the indices do not reach. */
static void scatter_grad(vctx *c0, kiln_node *n, kiln_node *g, const uint8_t *want, kiln_node **gin) {
  vctx cx = at_forward(c0, n), *c = &cx;
  kiln_node *x = n->in[0], *ix = n->in[1], *src = n->in[2];
  int a = (int)n->iattr[0], add = n->op == KILN_OP_SCATTER_ADD;
  kiln_node *ci = ix;
  kiln_node *z = kiln_api_const(c->fe, (kiln_dtype)g->dtype, ix->rank, ix->shape, 0.0, c->loc);
  if (want[0]) gin[0] = add ? g : scatter(c, KILN_OP_SCATTER, g, a, ci, z);
  if (!want[2]) return;
  kiln_node *gs = gather(c, g, a, ci);
  if (!add && numel(ix->rank, ix->shape) > 0) {
    kiln_node *pos = iota(c, KILN_I64, ix->rank, ix->shape, a);
    kiln_node *m1 = kiln_api_const(c->fe, KILN_I64, x->rank, x->shape, -1.0, c->loc);
    kiln_node *won = bin(c, KILN_OP_EQ, gather(c, scatter(c, KILN_OP_SCATTER, m1, a, ci, pos), a, ci), pos);
    gs = sel(c, won, gs, z);
  }
  int64_t lo[KILN_MAX_RANK] = {0}, hi[KILN_MAX_RANK];
  for (int d = 0; d < src->rank; d++) hi[d] = src->shape[d] - ix->shape[d];
  gin[2] = pad(c, gs, lo, hi);
}

/* REDUCE_MAX / REDUCE_MIN: the gradient is spread evenly over the elements
 * equal to the extremum, torch.amax/amin's rule exactly: (g / count) * mask.
 * A product, not a select, as theirs: a NaN extremum equals no element,
 * and the gradient of its whole line is g / 0 * 0 = NaN (a select gave 0,
 * silently dropping it); an infinite g gives NaN off the extremum. x is
 * usually recomputed by the backward kernel and compared for equality with
 * the max the forward kernel stored: exact only because generated code
 * computes an expression identically wherever it appears
 * (-ffp-contract=off, no implicit reassociation, scalar libm;
 * docs/codegen.md §4a). */
static kiln_node *extremum_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0];
  uint64_t mask = (uint64_t)n->iattr[0];
  kiln_node *hit = cast(c, bin(c, KILN_OP_EQ, x, expand(c, n, x->rank, x->shape)), (kiln_dtype)x->dtype);
  kiln_node *share = expand(c, bin(c, KILN_OP_DIV, g, rsum(c, hit, mask)), x->rank, x->shape);
  return bin(c, KILN_OP_MUL, share, hit);
}

/* Keepdim product over the axes in mask. */
static kiln_node *rprod(vctx *c, kiln_node *a, uint64_t mask) {
  if (!a) return NULL;
  int64_t s[KILN_MAX_RANK];
  for (int i = 0; i < a->rank; i++) s[i] = (mask >> i) & 1 ? 1 : a->shape[i];
  int64_t attr = (int64_t)mask;
  return mk(c, KILN_OP_REDUCE_PROD, (kiln_dtype)a->dtype, a->rank, s, 1, &a, 1, &attr, 0.0);
}

/* REDUCE_PROD, torch.prod's rule, exact with zeros: no zero among the
 * reduced elements: g * (out / x) (PyTorch's order: (g * out) / x
 * overflowed where g * out is beyond the dtype and the result is not); one
 * zero: at the zero g times the product of the others, 0 elsewhere; two or
 * more: 0. From p, the product of the elements with the zeros read as 1,
 * and z, the number of zeros. */
static kiln_node *prod_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0];
  uint64_t mask = (uint64_t)n->iattr[0];
  kiln_node *zero = bin(c, KILN_OP_EQ, x, cst(c, x, 0.0));
  kiln_node *x1 = sel(c, zero, cst(c, x, 1.0), x);
  kiln_node *p = expand(c, rprod(c, x1, mask), x->rank, x->shape), *ge = expand(c, g, x->rank, x->shape);
  kiln_node *z = expand(c, rsum(c, cast(c, zero, (kiln_dtype)x->dtype), mask), x->rank, x->shape);
  kiln_node *at_zero = sel(c, bin(c, KILN_OP_EQ, z, cst(c, z, 1.0)), bin(c, KILN_OP_MUL, ge, p), cst(c, x, 0.0));
  kiln_node *other = sel(c, bin(c, KILN_OP_EQ, z, cst(c, z, 0.0)), bin(c, KILN_OP_MUL, ge, bin(c, KILN_OP_DIV, p, x1)),
                         cst(c, x, 0.0));
  return sel(c, zero, at_zero, other);
}

/* a reversed along axis: an index_select by L-1 .. 0. */
/* The collectives' gradients (kiln/dist.h). SUM: the all-reduced SUM of g
 * (DDP's rule: d/dx_r of sum_q f(sum x) is the sum over the ranks of their
 * gradients). BROADCAST: a reduce to the root: the summed g on the root,
 * zero elsewhere (a SCALAR factor 1 or 0, so every rank traces the same
 * graph and every rank still joins the all-reduce). ALL_GATHER: this rank's
 * slice of the summed g (a reduce-scatter). */
static kiln_node *all_reduce_sum(vctx *c, kiln_node *g, int64_t world) {
  if (!g) return NULL;
  int64_t attr[2] = {0, world};
  return mk(c, KILN_OP_ALL_REDUCE, (kiln_dtype)g->dtype, g->rank, g->shape, 1, &g, 2, attr, 0.0);
}
static int collective_grad(vctx *c, kiln_node *n, kiln_node *g, kiln_node **g0, kiln_loc loc) {
  kiln_node *x = n->in[0], *s = all_reduce_sum(c, g, n->iattr[1]);
  int rank = kiln_dist_rank();
  if (n->op == KILN_OP_ALL_REDUCE) {
    if (n->iattr[0] != 0) {
      kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "backward: all_reduce MAX has no gradient (traced at %s:%d)",
                 n->loc.file ? n->loc.file : "?", n->loc.line);
      return -1;
    }
    *g0 = s;
  } else if (n->op == KILN_OP_BROADCAST) {
    kiln_node *f = kiln_fe_scalar_node(c->fe, (kiln_dtype)g->dtype, rank == n->iattr[0] ? 1.0 : 0.0, 0, c->loc);
    *g0 = f && s ? bin(c, KILN_OP_MUL, s, expand(c, f, s->rank, s->shape)) : NULL;
  } else {
    int64_t start[KILN_MAX_RANK] = {0};
    start[n->iattr[0]] = (int64_t)rank * x->shape[n->iattr[0]];
    *g0 = crop(c, s, start, x->shape);
  }
  return 0;
}

/* REMAINDER: x's gradient is g, y's -g times the floor quotient, computed
 * as torch.div(x, y, rounding_mode="floor") does (PyTorch's rule): from
 * fmod, exact, not floor(x / y), whose rounded quotient can be the next
 * integer up (1 % 0.1f is 0.0999..., 9 times 0.1f: the quotient is 9, but
 * 1 / 0.1f rounds to 10). d = (x - fmod(x, y)) / y, less 1 when the
 * remainder's sign is not y's; then rounded to the nearest integer; 0 with
 * the sign of x / y where it is 0; x / y when y is 0. */
static kiln_node *floor_quotient(vctx *c, kiln_node *x, kiln_node *y) {
  kiln_node *m = bin(c, KILN_OP_FMOD, x, y), *q = bin(c, KILN_OP_DIV, x, y), *zero = cst(c, x, 0.0);
  kiln_node *d = bin(c, KILN_OP_DIV, bin(c, KILN_OP_SUB, x, m), y);
  kiln_node *other = bin(c, KILN_OP_NE, bin(c, KILN_OP_LT, y, zero), bin(c, KILN_OP_LT, m, zero));
  kiln_node *adj = bin(c, KILN_OP_AND, bin(c, KILN_OP_NE, m, zero), other);
  d = bin(c, KILN_OP_SUB, d, sel(c, adj, cst(c, x, 1.0), zero));
  kiln_node *fl = un(c, KILN_OP_FLOOR, d);
  kiln_node *up = bin(c, KILN_OP_GT, bin(c, KILN_OP_SUB, d, fl), cst(c, x, 0.5));
  kiln_node *r = sel(c, bin(c, KILN_OP_EQ, d, zero), bin(c, KILN_OP_MUL, q, zero),
                     bin(c, KILN_OP_ADD, fl, sel(c, up, cst(c, x, 1.0), zero)));
  return sel(c, bin(c, KILN_OP_EQ, y, zero), q, r);
}

static kiln_node *flip_axis(vctx *c, kiln_node *a, int axis) {
  if (!a || a->shape[axis] <= 1) return a;
  int64_t L = a->shape[axis], attr = axis;
  kiln_node *io = iota(c, KILN_I64, 1, &L, 0);
  kiln_node *in[2] = {a, bin(c, KILN_OP_SUB, cst(c, io, (double)(L - 1)), io)};
  return mk(c, KILN_OP_INDEX_SELECT, (kiln_dtype)a->dtype, a->rank, a->shape, 2, in, 1, &attr, 0.0);
}
static kiln_node *scan_node(vctx *c, int op, kiln_node *a, int axis) {
  int64_t attr = axis;
  return a ? mk(c, op, (kiln_dtype)a->dtype, a->rank, a->shape, 1, &a, 1, &attr, 0.0) : NULL;
}

/* CUMPROD, exact with zeros (no division): d out_j / d x_i is the product
 * of x_k over k <= j, k != i, for j >= i. With a new axis i before the
 * scanned axis j: P[i, j] = cumprod over j of (j == i ? 1 : x_j), and the
 * gradient of x_i is the sum over j >= i of g_j * P[i, j]. L^2 elements per
 * line: meant for the short scans a model takes the product of. */
static kiln_node *cumprod_grad(vctx *c, kiln_node *n, kiln_node *g) {
  kiln_node *x = n->in[0];
  int a = (int)n->iattr[0], r = x->rank;
  if (r + 1 > KILN_MAX_RANK) {
    kiln_error(KILN_ERR_UNSUPPORTED, c->loc, "backward: the gradient of cumprod needs rank + 1 <= %d, got rank %d",
               KILN_MAX_RANK, r);
    return NULL;
  }
  int64_t t[KILN_MAX_RANK], t1[KILN_MAX_RANK];
  for (int i = 0, k = 0; i < r; i++) {
    if (i == a) t[k] = x->shape[a], t1[k++] = 1;
    t[k] = t1[k] = x->shape[i];
    k++;
  }
  kiln_node *xb = expand(c, reshape(c, x, r + 1, t1), r + 1, t);
  kiln_node *ii = iota(c, KILN_I64, r + 1, t, a), *jj = iota(c, KILN_I64, r + 1, t, a + 1);
  kiln_node *p = scan_node(c, KILN_OP_CUMPROD, sel(c, bin(c, KILN_OP_EQ, ii, jj), cst(c, xb, 1.0), xb), a + 1);
  kiln_node *gb = expand(c, reshape(c, g, r + 1, t1), r + 1, t);
  kiln_node *term = sel(c, bin(c, KILN_OP_GE, jj, ii), bin(c, KILN_OP_MUL, gb, p), cst(c, xb, 0.0));
  return reshape(c, rsum(c, term, 1ULL << (a + 1)), r, x->shape);
}

int kiln_ag_vjp(kiln_frontend *fe, kiln_node *n, kiln_node *g, const uint8_t *want, kiln_node **gin,
                kiln_loc loc) {
  vctx cx = {fe, loc}, *c = &cx;
  for (int k = 0; k < n->n_in; k++) gin[k] = NULL;
  const char *rule = kiln_op_table[n->op].vjp;
  if (!rule) return 0; /* no gradient flows through this op */
  if (strcmp(rule, "@")) { /* the op table's formulas */
    const char *bad = kiln_ag_formula_error();
    if (bad) {
      kiln_error(KILN_ERR_INTERNAL, loc, "backward: %s", bad);
      return -1;
    }
    for (int k = 0; k < n->n_in && k < 3; k++) {
      if (!want[k] || !k_fcode[n->op][k].len) continue;
      gin[k] = run_formula(c, k_fcode[n->op][k], n, g);
      if (!gin[k]) {
        if (kiln_last_status() == KILN_OK)
          kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "backward: out of memory building the gradient of %s",
                     kiln_op_name(n->op));
        return -1;
      }
    }
    return 0;
  }
  kiln_node *x = n->n_in > 0 ? n->in[0] : NULL, *y = n->n_in > 1 ? n->in[1] : NULL;
  kiln_node **g0 = &gin[0], **g1 = n->n_in > 1 ? &gin[1] : NULL;
  switch (n->op) {
    case KILN_OP_CAST:
      if (kiln_dtype_is_float((kiln_dtype)x->dtype)) *g0 = cast(c, g, (kiln_dtype)x->dtype);
      break;
    case KILN_OP_REDUCE_SUM: *g0 = expand(c, g, x->rank, x->shape); break;
    case KILN_OP_REDUCE_MAX:
    case KILN_OP_REDUCE_MIN: *g0 = extremum_grad(c, n, g); break;
    case KILN_OP_REDUCE_PROD: *g0 = prod_grad(c, n, g); break;
    case KILN_OP_CUMSUM: { /* the reverse running sum of g */
      int a = (int)n->iattr[0];
      *g0 = flip_axis(c, scan_node(c, KILN_OP_CUMSUM, flip_axis(c, g, a), a), a);
      break;
    }
    case KILN_OP_CUMPROD: *g0 = cumprod_grad(c, n, g); break;
    case KILN_OP_REMAINDER:
      if (want[0]) *g0 = g;
      if (want[1]) /* 16-bit floats in f32, as in run_formula */
        *g1 = cast(c, bin(c, KILN_OP_MUL, un(c, KILN_OP_NEG, wide(c, g)), floor_quotient(c, wide(c, x), wide(c, y))),
                   (kiln_dtype)g->dtype);
      break;
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_BROADCAST:
    case KILN_OP_ALL_GATHER:
      if (collective_grad(c, n, g, g0, loc)) return -1;
      break;
    case KILN_OP_RESHAPE: *g0 = reshape(c, g, x->rank, x->shape); break;
    case KILN_OP_PERMUTE: {
      int inv[KILN_MAX_RANK];
      for (int i = 0; i < n->rank; i++) inv[n->iattr[i]] = i;
      *g0 = permute(c, g, inv);
      break;
    }
    case KILN_OP_EXPAND: {
      uint64_t mask = 0;
      for (int i = 0; i < n->rank; i++)
        if (x->shape[i] == 1 && n->shape[i] != 1) mask |= 1ULL << i;
      *g0 = reshape(c, rsum(c, g, mask), x->rank, x->shape);
      break;
    }
    case KILN_OP_SLICE: *g0 = slice_grad(c, n, g); break;
    case KILN_OP_CONCAT: {
      int a = (int)n->iattr[0];
      int64_t start[KILN_MAX_RANK] = {0};
      for (int k = 0; k < n->n_in; k++) {
        if (want[k]) gin[k] = crop(c, g, start, n->in[k]->shape);
        start[a] += n->in[k]->shape[a];
      }
      break;
    }
    case KILN_OP_PAD: *g0 = crop(c, g, n->iattr, x->shape); break;
    case KILN_OP_INDEX_SELECT: *g0 = index_select_grad(c, n, g); break;
    case KILN_OP_GATHER: *g0 = gather_grad(c, n, g); break;
    case KILN_OP_SCATTER:
    case KILN_OP_SCATTER_ADD: scatter_grad(c, n, g, want, gin); break;
    case KILN_OP_MATMUL:
      if (want[0]) *g0 = matmul(c, g, swap_last2(c, y));
      if (want[1]) *g1 = matmul(c, swap_last2(c, x), g);
      break;
    default: return 0; /* no gradient flows through this op */
  }
  for (int k = 0; k < n->n_in; k++) {
    if (!want[k]) gin[k] = NULL;
    else if (!gin[k] && !(k == 1 && (n->op == KILN_OP_INDEX_SELECT || n->op == KILN_OP_GATHER ||
                                       n->op == KILN_OP_SCATTER || n->op == KILN_OP_SCATTER_ADD))) {
      if (kiln_last_status() == KILN_OK)
        kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "backward: out of memory building the gradient of %s",
                   kiln_op_name(n->op));
      return -1;
    }
  }
  return 0;
}
