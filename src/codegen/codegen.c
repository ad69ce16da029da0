/* Kernel code generation, loops: elementwise kernels, row kernels (one
 * loop per reduction, then the fused stores), column kernels, and the
 * function text with its hash name. Expressions: codegen_expr.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "codegen/codegen_internal.h"

/* ───────────── kernels ───────────── */

void kiln_cg_flush_pre(cg *c, kiln_text *out) {
  if (c->pre.len) kiln_text_append(out, c->pre.p, c->pre.len), c->pre.p[0] = 0;
  c->pre.len = 0;
}

/* Statements defining the inner-axis variables and `f` from `j` (row kernels). */
static void inner_index(cg *c, kiln_text *o, int suffix, int64_t L) {
  const kiln_skernel *k = c->k;
  int64_t st = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    if (!(k->mask >> d & 1)) continue;
    if (k->shape[d] == 1)
      kiln_text_printf(o, "const int64_t i%d KU = 0;\n", d);
    else if (k->shape[d] == L) /* the only inner axis: j itself (no division in the loop) */
      kiln_text_printf(o, "const int64_t i%d KU = j;\n", d);
    else
      kiln_text_printf(o, "const int64_t i%d KU = j / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
    st *= k->shape[d];
  }
  if (suffix) {
    kiln_text_printf(o, "const int64_t f KU = row * %lldLL + j;\n", (long long)L);
  } else {
    const char *e = "0";
    int64_t fs = 1;
    for (int d = k->rank - 1; d >= 0; d--) {
      e = kiln_cg_sf(c, "%s + i%d * %lldLL", e, d, (long long)fs);
      fs *= k->shape[d];
    }
    kiln_text_printf(o, "const int64_t f KU = %s;\n", e);
  }
}

/* The last inner axis with more than one element, when there are several
 * inner axes and either they are not a contiguous suffix, or they are and
 * the reduced value reads one of the others' index variables (reads: the
 * axes whose variables it uses, c->used_axes; a broadcast: a mean over all
 * axes of a layer norm's output reads each row's scale): such a reduction
 * runs as nested loops (outer inner axes from `jo`, the last one as `q`)
 * instead of decomposing a flat j with a division per element, and what
 * depends on the outer axes only is computed once per run of q (a full
 * reduction of that layer norm's output took 0.86-0.92 ms flat,
 * docs/codegen.md). -1 when the flat loop is as good: no such read, a last
 * axis shorter than 16 (not asked of a family's instance, sym: its sizes
 * are primes, and the choice must not depend on them). */
static int nested_axis(const kiln_skernel *k, int suffix, uint32_t reads, int sym) {
  int last = -1, n = 0;
  for (int d = 0; d < k->rank; d++)
    if ((k->mask >> d & 1) && k->shape[d] > 1) last = d, n++;
  if (n < 2) return -1;
  if (!suffix) return last;
  if (k->shape[last] < 16 && !sym) return -1;
  for (int d = 0; d < last; d++)
    if ((k->mask >> d & 1) && k->shape[d] > 1 && (reads >> d & 1)) return last;
  return -1;
}

/* For nested loops: `outer` gets the outer inner-axis variables from jo,
 * `inner` the last inner axis (q) and f. */
static void nested_index(cg *c, kiln_text *outer, kiln_text *inner, int dl) {
  const kiln_skernel *k = c->k;
  int64_t st = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    if (!(k->mask >> d & 1) || d == dl) continue;
    if (k->shape[d] == 1)
      kiln_text_printf(outer, "const int64_t i%d KU = 0;\n", d);
    else
      kiln_text_printf(outer, "const int64_t i%d KU = jo / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
    st *= k->shape[d];
  }
  kiln_text_printf(inner, "const int64_t i%d KU = q;\n", dl);
  const char *e = "0";
  int64_t fs = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    e = kiln_cg_sf(c, "%s + i%d * %lldLL", e, d, (long long)fs);
    fs *= k->shape[d];
  }
  kiln_text_printf(inner, "const int64_t f KU = %s;\n", e);
}

const char *kiln_cg_comb(cg *c, int op, int fl, const char *a, const char *b) {
  if (op == KILN_OP_REDUCE_PROD) return fl ? kiln_cg_sf(c, "(%s * %s)", a, b) : kiln_cg_sf(c, "kmul_i(%s, %s)", a, b);
  const char *fn = op == KILN_OP_REDUCE_SUM ? (fl ? NULL : "kadd_i")
                   : op == KILN_OP_REDUCE_MAX ? (fl ? "kmax_f64" : "kmax_i")
                                              : (fl ? "kmin_f64" : "kmin_i");
  return fn ? kiln_cg_sf(c, "%s(%s, %s)", fn, a, b) : kiln_cg_sf(c, "(%s + %s)", a, b);
}

/* `for (j < L) { text }`, or with `unroll` one block per j (a constant the C
 * compiler folds into the index arithmetic). */
static void loop_j(kiln_text *o, int64_t L, int unroll, const char *text) {
  if (!unroll) {
    kiln_text_printf(o, "for (int64_t j = 0; j < %lldLL; j++) {\n%s}\n", (long long)L, text);
    return;
  }
  for (int64_t j = 0; j < L; j++) kiln_text_printf(o, "{\nconst int64_t j KU = %lldLL;\n%s}\n", (long long)j, text);
}

/* The identity of a max/min/sum/prod reduction over the input dtype idt, as in
 * ref (what an empty reduction gives). */
const char *kiln_cg_reduce_init(int op, int idt) {
  int fl = is_float(idt);
  if (op == KILN_OP_REDUCE_MAX)
    return fl ? "(-__builtin_inf())" : idt == KILN_I32 ? "INT32_MIN" : idt == KILN_I64 ? "INT64_MIN"
                                     : idt == KILN_I8 ? "INT8_MIN" : "0";
  if (op == KILN_OP_REDUCE_MIN)
    return fl ? "(__builtin_inf())" : idt == KILN_I32 ? "INT32_MAX" : idt == KILN_I64 ? "INT64_MAX"
                                    : idt == KILN_I8 ? "INT8_MAX" : idt == KILN_U8 ? "UINT8_MAX" : "1";
  return op == KILN_OP_REDUCE_PROD ? "1" : "0";
}

/* One reduction of a row kernel being generated (gen_reduce): its node m,
 * the input's dtype, the input's value v at index j (after the statements
 * ix, which define the inner-axis variables and f, and body), the
 * accumulator type and identity, and the combining expressions. */
typedef struct red {
  int32_t m;
  const kiln_gnode *nd;
  int idt, fl;
  const char *v, *ix, *body;
  int suffix, unroll;
  int64_t L;
  const char *at, *init;
  const char *cpart, *cacc, *cfin; /* p[u] (+) x, acc (+) p[u], acc (+) x */
} red;

static void gen_argmax(cg *c, kiln_text *o, const red *r) {
  kiln_text_printf(o, "int64_t bi = 0; %s best = 0;\n", cty(r->idt));
  kiln_text_printf(o, "for (int64_t j = 0; j < %lldLL; j++) {\n%s%s", (long long)r->L, r->ix, r->body);
  kiln_text_printf(o, "const %s x = %s;\n", cty(r->idt), r->v);
  kiln_text_printf(o, "if (j == 0 || (best == best && (x != x || x > best))) { best = x; bi = j; }\n}\n");
  kiln_text_printf(o, "r%d = %s;\n}\n", r->m, kiln_cg_conv(c, "bi", KILN_I64, r->nd->dtype));
}

/* Too short for the partial accumulators (which would all stay at the
 * identity): the same sequential order, without their setup. */
static void gen_reduce_short(cg *c, kiln_text *o, const red *r) {
  kiln_text_printf(o, "%s acc = %s;\n", r->at, r->init);
  loop_j(o, r->L, r->unroll, kiln_cg_sf(c, "%s%sconst %s x = %s;\nacc = %s;\n", r->ix, r->body, cty(r->idt), r->v, r->cfin));
  kiln_text_printf(o, "r%d = %s;\n}\n", r->m, kiln_cg_conv(c, "acc", r->fl ? KILN_F64 : KILN_I64, r->nd->dtype));
}

/* Floats ask the C compiler for a vector reduction explicitly (`omp simd
 * reduction`, honoured through -fopenmp-simd): gcc does not vectorize the
 * 16 partial accumulators of integers when the body mixes dtypes or selects
 * (a softmax backward ran at 10 ns an element that way, 1.3 ns this way).
 * A sum or product accumulates in double; a max/min in the input's own type (exact), a
 * NaN anywhere making the result NaN as ref's kmax/kmin do. The order is the
 * vector lanes' (fixed for a given compiler and machine, the same on every
 * thread). dl: nested_axis. */
/* The row cache (row_cache below): the cached values the current loop reads
 * (those first computed by an earlier loop) ... */
static void rc_seed(cg *c) {
  for (int i = 0; i < c->n_rc; i++)
    if (c->rc_first[i] < c->loop_no) c->memo_f[c->rc_node[i]] = kiln_cg_sf(c, "rc%d[j]", i);
}

/* ... and, at the end of each loop, the next loop's number; while probing,
 * the nodes the loop computed. */
static void rc_end_loop(cg *c) {
  if (c->probing)
    for (int32_t n = 0; n < c->g->n_nodes; n++) {
      if (!c->memo_f[n]) continue;
      if (c->rc_count[n] < 255) c->rc_count[n]++;
      if (!c->rc_seen[n]) c->rc_seen[n] = (int16_t)(c->loop_no + 1);
    }
  if (c->loop_no < 32000) c->loop_no++;
}

/* The longest row whose values a reduction keeps whole in a local array
 * (xs[], rc<i>[]); longer rows go in blocks of it, or are not kept. */
enum { ROW_BLOCK = 4096 };

/* n is a constant of the kernel, not possibly a size that varies at run time
 * (a family's instance: c->sym_floor, kiln_codegen_kernel_sym): a local
 * array may have it as its length. */
static int fixed_len(const cg *c, int64_t n) { return !c->sym || n < c->sym_floor; }

static void gen_reduce_float(cg *c, kiln_text *o, const red *r, int dl) {
  int prod = r->nd->op == KILN_OP_REDUCE_PROD, sum = r->nd->op == KILN_OP_REDUCE_SUM || prod;
  int mx = r->nd->op == KILN_OP_REDUCE_MAX;
  const char *ft = cty(r->idt), *clause, *step;
  if (sum) { /* a sum or a product: in double */
    kiln_text_printf(o, "double acc = %s;\n", prod ? "1" : "0");
    clause = prod ? "reduction(*:acc)" : "reduction(+:acc)";
    step = prod ? "acc *= (double)x;\n" : "acc += (double)x;\n";
  } else {
    kiln_text_printf(o, "%s acc = (%s%s);\nint anynan = 0;\n", ft, mx ? "-" : "",
                     r->idt == KILN_F32 ? "__builtin_inff()" : "__builtin_inf()");
    clause = mx ? "reduction(max:acc) reduction(|:anynan)" : "reduction(min:acc) reduction(|:anynan)";
    step = mx ? "anynan |= x != x;\nacc = x > acc ? x : acc;\n" : "anynan |= x != x;\nacc = x < acc ? x : acc;\n";
  }
  const char *ix = r->ix, *var = "j";
  int64_t n = r->L;
  kiln_text ou = {0}, inr = {0};
  if (dl >= 0) { /* outer inner axes from jo, the last one as q */
    n = c->k->shape[dl];
    nested_index(c, &ou, &inr, dl);
    kiln_text_printf(o, "for (int64_t jo = 0; jo < %lldLL; jo++) {\n%s", (long long)(r->L / n), ou.p ? ou.p : "");
    ix = inr.p ? inr.p : "";
    var = "q";
  }
  const char *keep = ""; /* a softmax row: the dividend goes to the output now (softmax_row) */
  if (r->m == c->sm_sum && dl < 0)
    keep = kiln_cg_sf(c, "a%d[f] = x;\n", kiln_cg_arg_of(c, c->s->buf_of[c->sm_store], sty(r->idt)));
  for (int i = 0; i < c->n_rc && dl < 0; i++)
    if (c->rc_first[i] == c->loop_no && c->memo_f[c->rc_node[i]])
      keep = kiln_cg_sf(c, "%src%d[j] = %s;\n", keep, i, c->memo_f[c->rc_node[i]]);
  if (sum && r->idt == KILN_F32 && dl < 0 && n <= ROW_BLOCK && fixed_len(c, n) && (keep[0] || r->body[0])) {
    /* f32 values into a double sum: in one loop gcc vectorizes at the
     * double's 8 lanes, the values' arithmetic too (a softmax row's exp at
     * half speed); the values first at 16 lanes into a row array, then the
     * same vector sum over it (the same order: a [32,12,120,120] softmax
     * gave the same bits, 1.41 -> 1.04 ns an element on one core) */
    kiln_text_printf(o, "float xs[%lld];\n#pragma omp simd\nfor (int64_t j = 0; j < %lldLL; j++) {\n", (long long)n,
                     (long long)n);
    kiln_text_printf(o, "%s%sconst float x = %s;\n%sxs[j] = x;\n}\n", ix, r->body, r->v, keep);
    kiln_text_printf(o, "#pragma omp simd %s\nfor (int64_t j = 0; j < %lldLL; j++) {\nconst double x = xs[j];\n%s}\n",
                     clause, (long long)n, step);
  } else if (sum && r->idt == KILN_F32 && dl < 0 && (keep[0] || r->body[0])) {
    /* a longer row, or one whose length may be a symbol's (any size at run
     * time): the same two loops over blocks of ROW_BLOCK elements, the
     * array of a block on the stack; the lanes' sums meet at each block's
     * end (another order than one loop: within a sum's tolerance) */
    kiln_text_printf(o, "float xs[%d];\nfor (int64_t jb = 0; jb < %lldLL; jb += %d) {\n", ROW_BLOCK, (long long)n,
                     ROW_BLOCK);
    kiln_text_printf(o, "const int64_t je = jb + %d < %lldLL ? jb + %d : %lldLL;\n", ROW_BLOCK, (long long)n, ROW_BLOCK,
                     (long long)n);
    kiln_text_printf(o, "#pragma omp simd\nfor (int64_t j = jb; j < je; j++) {\n");
    kiln_text_printf(o, "%s%sconst float x = %s;\n%sxs[j - jb] = x;\n}\n", ix, r->body, r->v, keep);
    kiln_text_printf(o, "#pragma omp simd %s\nfor (int64_t j = jb; j < je; j++) {\n", clause);
    kiln_text_printf(o, "const double x = xs[j - jb];\n%s}\n}\n", step);
  } else {
    kiln_text_printf(o, "#pragma omp simd %s\nfor (int64_t %s = 0; %s < %lldLL; %s++) {\n%s%sconst %s x = %s;\n%s%s}\n",
                     clause, var, var, (long long)n, var, ix, r->body, ft, r->v, keep, step);
  }
  if (dl >= 0) kiln_text_printf(o, "}\n");
  if (ou.failed || inr.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(ou.p);
  free(inr.p);
  if (!sum) kiln_text_printf(o, "if (anynan) acc = (%s)__builtin_nan(\"\");\n", ft);
  kiln_text_printf(o, "r%d = %s;\n}\n", r->m, kiln_cg_conv(c, "acc", sum ? KILN_F64 : r->idt, r->nd->dtype));
}

/* Integers (exact in any order), nested loops: partial accumulator u takes
 * the elements q = u (mod 16) of every run of the last inner axis dl; a
 * fixed order either way. */
static void gen_reduce_int_nested(cg *c, kiln_text *o, const red *r, int dl) {
  int64_t n = c->k->shape[dl], no = r->L / n;
  kiln_text ou = {0}, in = {0};
  nested_index(c, &ou, &in, dl);
  const char *ib = kiln_cg_sf(c, "%s%sconst %s x = %s;\n", in.p ? in.p : "", r->body, cty(r->idt), r->v);
  kiln_text_printf(o, "%s p[16], acc = %s;\nfor (int u = 0; u < 16; u++) p[u] = %s;\n", r->at, r->init, r->init);
  kiln_text_printf(o, "for (int64_t jo = 0; jo < %lldLL; jo++) {\n%sint64_t q0 = 0;\n", (long long)no, ou.p ? ou.p : "");
  kiln_text_printf(o, "for (; q0 + 16 <= %lldLL; q0 += 16) for (int u = 0; u < 16; u++) {\nconst int64_t q = q0 + u;\n%sp[u] = %s;\n}\n",
                   (long long)n, ib, r->cpart);
  kiln_text_printf(o, "for (int64_t q = q0; q < %lldLL; q++) {\n%s{\nconst int u = (int)(q - q0);\np[u] = %s;\n}\n}\n}\n",
                   (long long)n, ib, r->cpart);
  kiln_text_printf(o, "for (int u = 0; u < 16; u++) acc = %s;\n", r->cacc);
  kiln_text_printf(o, "r%d = %s;\n}\n", r->m, kiln_cg_conv(c, "acc", r->fl ? KILN_F64 : KILN_I64, r->nd->dtype));
  if (ou.failed || in.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(ou.p);
  free(in.p);
}

/* Integers over a flat j: 16 independent partial accumulators
 * (vectorizable without reassociation flags, a fixed, thread-independent
 * order), then the remainder sequentially. */
static void gen_reduce_int_flat(cg *c, kiln_text *o, const red *r) {
  kiln_text_printf(o, "%s p[16], acc = %s;\nfor (int u = 0; u < 16; u++) p[u] = %s;\nint64_t j0 = 0;\n", r->at, r->init,
                   r->init);
  kiln_text_printf(o, "for (; j0 + 16 <= %lldLL; j0 += 16) for (int u = 0; u < 16; u++) {\nconst int64_t j = j0 + u;\n",
                   (long long)r->L);
  kiln_text_printf(o, "%s%sconst %s x = %s;\np[u] = %s;\n}\n", r->ix, r->body, cty(r->idt), r->v, r->cpart);
  kiln_text_printf(o, "for (int u = 0; u < 16; u++) acc = %s;\n", r->cacc);
  kiln_text_printf(o, "for (int64_t j = j0; j < %lldLL; j++) {\n%s%sconst %s x = %s;\nacc = %s;\n}\n", (long long)r->L,
                   r->ix, r->body, cty(r->idt), r->v, r->cfin);
  kiln_text_printf(o, "r%d = %s;\n}\n", r->m, kiln_cg_conv(c, "acc", r->fl ? KILN_F64 : KILN_I64, r->nd->dtype));
}

/* Reduction m of a row kernel into the local r<m>: an argmax, or a sum,
 * max or min of any type; those shorter than 16 run sequentially, longer
 * float ones as vector reductions, longer integer ones with 16 partial
 * accumulators. */
static void gen_reduce(cg *c, kiln_text *o, int32_t m, int suffix, int64_t L, int unroll) {
  red r = {.m = m, .nd = NODE(c, m), .suffix = suffix, .unroll = unroll, .L = L};
  int32_t in = INP(c, m, 0);
  r.idt = NODE(c, in)->dtype;
  r.fl = is_float(r.idt);
  memset(c->memo_f, 0, sizeof *c->memo_f * (size_t)c->g->n_nodes);
  memset(c->memo_b, 0, sizeof *c->memo_b * (size_t)c->g->n_nodes);
  rc_seed(c);
  kiln_text body = {0};
  c->cur = &body;
  uint32_t outer = c->used_axes;
  c->used_axes = 0;
  r.v = kiln_cg_ex(c, in, &c->fctx);
  uint32_t reads = c->used_axes; /* the axis variables the reduced value uses */
  c->used_axes |= outer;
  kiln_cg_flush_pre(c, o);
  kiln_text idx = {0};
  inner_index(c, &idx, suffix, L);
  r.ix = idx.p ? idx.p : "";
  r.body = body.p ? body.p : "";
  kiln_text_printf(o, "%s r%d;\n{\n", cty(r.nd->dtype), m);
  if (r.nd->op == KILN_OP_ARGMAX) {
    gen_argmax(c, o, &r);
  } else {
    r.at = r.fl ? "double" : "int64_t";
    r.init = kiln_cg_reduce_init(r.nd->op, r.idt);
    const char *xv = kiln_cg_sf(c, "((%s)x)", r.at);
    r.cpart = kiln_cg_comb(c, r.nd->op, r.fl, "p[u]", xv);
    r.cacc = kiln_cg_comb(c, r.nd->op, r.fl, "acc", "p[u]");
    r.cfin = kiln_cg_comb(c, r.nd->op, r.fl, "acc", xv);
    /* a suffix row nests only where nothing else uses the flat loop's j:
     * not unrolled, not a softmax's sum, no row cache */
    int flat_only = unroll || m == c->sm_sum || c->n_rc > 0;
    int dl = nested_axis(c->k, suffix, flat_only ? 0 : reads, c->sym);
    if (L < 16) gen_reduce_short(c, o, &r);
    else if (r.fl) gen_reduce_float(c, o, &r, dl);
    else if (dl >= 0) gen_reduce_int_nested(c, o, &r, dl);
    else gen_reduce_int_flat(c, o, &r);
  }
  rc_end_loop(c);
  if (body.failed || idx.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  free(idx.p);
}

/* A softmax row, e / sum(e) along the row with e any expression (the
 * frontend's softmax: e = exp(x - max)), is written in two passes instead
 * of three: the SUM's loop also stores e into the output, and the last loop
 * divides the output in place, instead of computing e (an exp per element)
 * again. The values are the same bits (e is stored in its own dtype, the
 * division is the same). Only when the DIV is the kernel's one F store, the
 * SUM is the last reduction (none after it reads the output's buffer,
 * which may be an aliased input), the row is a flat loop over a suffix
 * (gen_reduce_float's; not unrolled, not nested) and e, the sum's input and
 * the output are all f32 or all f64. Sets c->sm_store / c->sm_sum. */
static void softmax_row(cg *c, int suffix, int64_t L, int unroll) {
  const kiln_skernel *k = c->k;
  c->sm_store = c->sm_sum = -1;
  if (!suffix || unroll || L < 16 || k->n_stores != 1) return;
  int32_t m = k->stores[0], last_red = -1;
  for (int32_t j = 0; j < k->n_members; j++)
    if (kiln_op_table[NODE(c, k->members[j])->op].kind == KILN_KIND_REDUCE) last_red = k->members[j];
  const kiln_gnode *nd = NODE(c, m);
  if (nd->op != KILN_OP_DIV || last_red < 0 || NODE(c, last_red)->op != KILN_OP_REDUCE_SUM) return;
  if (!kiln_sched_shape_is(c->g, k, m, KILN_SCTX_F)) return;
  int32_t e = INP(c, m, 0), d = INP(c, m, 1);
  while (d != last_red && (NODE(c, d)->op == KILN_OP_EXPAND || NODE(c, d)->op == KILN_OP_RESHAPE)) d = INP(c, d, 0);
  int dt = nd->dtype;
  if (d != last_red || INP(c, d, 0) != e || (dt != KILN_F32 && dt != KILN_F64) || NODE(c, e)->dtype != dt ||
      NODE(c, d)->dtype != dt)
    return;
  c->sm_store = m;
  c->sm_sum = d;
}

/* The row cache. A row kernel reads its row once per reduction and once
 * more for its stores, and computes the fused values of each loop again
 * (a layer norm's input, a residual sum with a dropout mask, is computed
 * three times forward and five times in its gradient; a softmax gradient
 * computes exp twice). The row is first written to a scratch text to learn
 * which computed values (not plain loads) more than one loop needs; up to
 * four of them, the latest first (a value needed only to compute a kept
 * one in the same loop is not kept), 64 KiB at most, are kept in row-sized
 * local arrays rc<i>[] by the loop that first computes them and read from
 * there by the later loops: the same values (stored in their own type),
 * one computation. Only for flat (not nested, not unrolled) rows of 16 to
 * 4096 elements whose reductions are all float sums, maxima or minima
 * (each loop runs j over the row). Declares the arrays. */
static void row_loops(cg *c, kiln_text *o, int suffix, int64_t L, int unroll);

static int rc_feeds(cg *c, int32_t n) { /* n is an input of a kept value first computed in n's loop */
  for (int i = 0; i < c->n_rc; i++) {
    const kiln_gnode *nd = NODE(c, c->rc_node[i]);
    for (int32_t k = 0; k < nd->n_in; k++)
      if (INP(c, c->rc_node[i], k) == n && c->rc_seen[n] - 1 == c->rc_first[i]) return 1;
  }
  return 0;
}

static void row_cache(cg *c, kiln_text *o, int suffix, int64_t L, int unroll) {
  const kiln_skernel *k = c->k;
  c->n_rc = c->loop_no = 0;
  if (unroll || L < 16 || L > 4096 || !fixed_len(c, L) || nested_axis(k, suffix, 0, c->sym) >= 0) return;
  for (int32_t j = 0; j < k->n_members; j++) {
    int32_t m = k->members[j];
    if (kiln_op_table[NODE(c, m)->op].kind != KILN_KIND_REDUCE) continue;
    if (NODE(c, m)->op == KILN_OP_ARGMAX || !is_float(NODE(c, INP(c, m, 0))->dtype)) return;
  }
  int32_t nn = c->g->n_nodes;
  c->rc_count = calloc((size_t)nn + 1, 1);
  c->rc_seen = calloc((size_t)nn + 1, sizeof *c->rc_seen);
  kiln_text scratch = {0};
  if (c->rc_count && c->rc_seen) {
    c->probing = 1;
    row_loops(c, &scratch, suffix, L, unroll);
    c->probing = 0;
    c->loop_no = 0;
    c->pre.len = 0; /* the probe's row-scope statements, and their names */
    if (c->pre.p) c->pre.p[0] = 0;
    memset(c->memo_rs, 0, sizeof *c->memo_rs * (size_t)nn);
    size_t bytes = 0;
    for (int32_t n = nn - 1; n >= 0 && c->n_rc < 4; n--) {
      const kiln_gnode *nd = NODE(c, n);
      if (c->rc_count[n] < 2 || (nd->dtype != KILN_F32 && nd->dtype != KILN_F64) || rc_feeds(c, n)) continue;
      if (kiln_op_table[nd->op].kind == KILN_KIND_MOVE) continue; /* a broadcast row value, or a view */
      if (c->s->owner[n] != c->kid && (nd->op == KILN_OP_LEAF || nd->op == KILN_OP_SCALAR || c->s->mat[n]))
        continue; /* a load: reading it again costs what reading rc[] does */
      size_t b = (size_t)L * (nd->dtype == KILN_F64 ? 8 : 4);
      if (bytes + b > 65536) break;
      bytes += b;
      c->rc_node[c->n_rc] = n;
      c->rc_first[c->n_rc] = c->rc_seen[n] - 1;
      kiln_text_printf(o, "%s rc%d[%lld];\n", cty(nd->dtype), c->n_rc, (long long)L);
      c->n_rc++;
    }
  }
  if (scratch.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(scratch.p);
  free(c->rc_count);
  free(c->rc_seen);
  c->rc_count = NULL;
  c->rc_seen = NULL;
}

/* Body statements storing the F-shaped stores at index f. */
static void gen_f_stores(cg *c, kiln_text *body, int *any, size_t *values_len) {
  const kiln_skernel *k = c->k;
  memset(c->memo_f, 0, sizeof *c->memo_f * (size_t)c->g->n_nodes);
  memset(c->memo_b, 0, sizeof *c->memo_b * (size_t)c->g->n_nodes);
  rc_seed(c);
  c->cur = body;
  *any = 0;
  /* every value first, then every store: a store into a donated input must
   * not be seen by a later value of the same element */
  kiln_text stores = {0};
  for (int32_t j = 0; j < k->n_stores; j++) {
    int32_t m = k->stores[j];
    if (!kiln_sched_shape_is(c->g, k, m, KILN_SCTX_F)) continue;
    if (k->row && kiln_op_table[NODE(c, m)->op].kind == KILN_KIND_REDUCE) continue;
    KILN_ASSERT(c->s->buf_of[m] >= 0); /* a store has a buffer (schedule_mem.c) */
    int dt = NODE(c, m)->dtype;
    int a = kiln_cg_arg_of(c, c->s->buf_of[m], sty(dt));
    /* a 16-bit float moved without arithmetic is stored as the bits it was
     * loaded with (the softmax store divides) */
    const char *b = m == c->sm_store ? NULL : kiln_cg_bits16(c, m, &c->fctx);
    const char *v = b;
    if (!v)
      v = kiln_cg_st(c, dt,
                     m == c->sm_store ? kiln_cg_sf(c, "(a%d[f] / r%d)", a, c->sm_sum) : kiln_cg_ex(c, m, &c->fctx));
    kiln_text_printf(&stores, "a%d[f] = %s;\n", a, v);
    *any = 1;
  }
  if (values_len) *values_len = body->len;
  if (stores.p) kiln_text_append(body, stores.p, stores.len);
  if (stores.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(stores.p);
  if (c->k->row) rc_end_loop(c);
}

/* The loop over f in [lo, hi) of an elementwise body (b: values, then
 * stores). When the body has f32 sines or cosines (c->sc_guard holds one
 * "kb |= ksincos_large(arg);" per call, the calls are KSC(ksinf, arg)), it
 * runs in blocks of 256: a first loop over the block computes only the
 * arguments (the compiler drops the values nothing reads) and notes whether
 * any is 120 or more (or not finite); the block then runs with the small
 * reduction alone (ksinf_small, the same bits below 120) or, when one
 * element needs it, with the full function. The full reduction is about two
 * thirds of sin's cost and real arguments (angles, positions) rarely need it. */
static void loop_f(cg *c, kiln_text *o, const char *v, const char *lo, const char *hi, const char *idx, const char *b,
                   size_t values_len) {
  if (!c->sc_guard.p) {
    kiln_text_printf(o, "for (int64_t %s = %s; %s < %s; %s++) {\n%s%s}\n", v, lo, v, hi, v, idx, b);
    return;
  }
  kiln_text_printf(o, "for (int64_t fb = %s; fb < %s; fb += 256) {\n", lo, hi);
  kiln_text_printf(o, "const int64_t fe = %s - fb < 256 ? %s : fb + 256;\nint kb = 0;\n", hi, hi);
  kiln_text_printf(o, "#define KSC(fn, x) fn##_small(x)\n");
  kiln_text_printf(o, "for (int64_t %s = fb; %s < fe; %s++) {\n%s%.*s%s}\n", v, v, v, idx, (int)values_len, b,
                   c->sc_guard.p);
  kiln_text_printf(o, "if (!kb) {\nfor (int64_t %s = fb; %s < fe; %s++) {\n%s%s}\n} else {\n", v, v, v, idx, b);
  kiln_text_printf(o, "#undef KSC\n#define KSC(fn, x) fn(x)\n");
  kiln_text_printf(o, "for (int64_t %s = fb; %s < fe; %s++) {\n%s%s}\n}\n#undef KSC\n}\n", v, v, v, idx, b);
}

static void gen_elementwise(cg *c, kiln_text *o, int64_t *items) {
  const kiln_skernel *k = c->k;
  int64_t numel = 1;
  for (int d = 0; d < k->rank; d++) numel *= k->shape[d];
  *items = numel;
  kiln_text body = {0};
  int any;
  size_t values_len = 0;
  c->sc_split = 1;
  gen_f_stores(c, &body, &any, &values_len);
  c->sc_split = 0;
  const char *b = body.p ? body.p : "";
  if (c->used_axes == 0 || k->rank == 0) {
    loop_f(c, o, "f", "begin", "end", "", b, values_len);
  } else {
    /* the inner loop runs over the last axis with more than one element
     * (trailing 1-sized axes, as a pooling gradient has, index 0) */
    int last = k->rank - 1;
    while (last > 0 && k->shape[last] == 1) last--;
    int64_t n = k->shape[last];
    kiln_text_printf(o, "for (int64_t r = begin / %lldLL; r * %lldLL < end; r++) {\n", (long long)n, (long long)n);
    for (int d = k->rank - 1; d > last; d--) kiln_text_printf(o, "const int64_t i%d KU = 0;\n", d);
    int64_t st = 1;
    for (int d = last - 1; d >= 0; d--) {
      kiln_text_printf(o, "const int64_t i%d KU = r / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
      st *= k->shape[d];
    }
    kiln_text_printf(o, "const int64_t jb = r * %lldLL < begin ? begin - r * %lldLL : 0;\n", (long long)n, (long long)n);
    kiln_text_printf(o, "const int64_t je = (r + 1) * %lldLL > end ? end - r * %lldLL : %lldLL;\n", (long long)n,
              (long long)n, (long long)n);
    const char *idx =
        kiln_cg_sf(c, "const int64_t i%d KU = j;\nconst int64_t f KU = r * %lldLL + j;\n", last, (long long)n);
    /* a whole piece (every one but a task's first and last) runs a loop of
     * constant length: with the bounds jb..je gcc vectorizes each short
     * piece with a prologue and a tail, which for pieces of 32 (a head
     * split's permute, [32,128,384] f32 -> [32,12,128,32]) cost 4.6 ms on
     * one core against 1.4 ms this way (a family's instance, sym, always:
     * its sizes are primes, and the choice must not depend on them) */
    int whole = (n <= 256 || c->sym) && !c->sc_guard.p;
    if (whole) {
      kiln_text_printf(o, "if (jb == 0 && je == %lldLL) {\n", (long long)n);
      loop_f(c, o, "j", "0", kiln_cg_sf(c, "%lldLL", (long long)n), idx, b, values_len);
      kiln_text_printf(o, "} else {\n");
    }
    loop_f(c, o, "j", "jb", "je", idx, b, values_len);
    kiln_text_printf(o, whole ? "}\n}\n" : "}\n");
  }
  if (body.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  free(c->sc_guard.p);
  c->sc_guard = (kiln_text){0};
}

/* The opening of the loop over rows: the outer-axis variables and `row`.
 * unrolled (dl: the last outer axis with more than one element): blocks of
 * that axis, whose elements the inner `q` loop runs over (two braces to
 * close); else one plain loop over rows (one brace). */
static void row_loop_head(cg *c, kiln_text *o, int unroll, int dl) {
  const kiln_skernel *k = c->k;
  int64_t st = 1;
  if (!unroll) {
    kiln_text_printf(o, "for (int64_t row = begin; row < end; row++) {\n");
    for (int d = k->rank - 1; d >= 0; d--) {
      if (k->mask >> d & 1) continue;
      kiln_text_printf(o, "const int64_t i%d KU = row / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
      st *= k->shape[d];
    }
    return;
  }
  int64_t n = k->shape[dl];
  kiln_text_printf(o, "for (int64_t r = begin / %lldLL; r * %lldLL < end; r++) {\n", (long long)n, (long long)n);
  for (int d = k->rank - 1; d > dl; d--)
    if (!(k->mask >> d & 1)) kiln_text_printf(o, "const int64_t i%d KU = 0;\n", d);
  for (int d = dl - 1; d >= 0; d--) {
    if (k->mask >> d & 1) continue;
    kiln_text_printf(o, "const int64_t i%d KU = r / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
    st *= k->shape[d];
  }
  kiln_text_printf(o, "const int64_t jb = r * %lldLL < begin ? begin - r * %lldLL : 0;\n", (long long)n, (long long)n);
  kiln_text_printf(o, "const int64_t je = (r + 1) * %lldLL > end ? end - r * %lldLL : %lldLL;\n", (long long)n,
                   (long long)n, (long long)n);
  kiln_text_printf(o, "#pragma omp simd\nfor (int64_t q = jb; q < je; q++) {\nconst int64_t i%d KU = q;\n", dl);
  kiln_text_printf(o, "const int64_t row KU = r * %lldLL + q;\n", (long long)n);
}

/* The body of a row: its reductions, the F-shaped stores in a loop over
 * the inner axes, then the row-shaped stores (after the F loop: an
 * in-place (aliased) row value is read by the loops above before it is
 * overwritten). */
static void row_body(cg *c, kiln_text *o, int suffix, int64_t L, int unroll) {
  softmax_row(c, suffix, L, unroll);
  row_cache(c, o, suffix, L, unroll);
  row_loops(c, o, suffix, L, unroll);
}

static void row_loops(cg *c, kiln_text *o, int suffix, int64_t L, int unroll) {
  const kiln_skernel *k = c->k;
  for (int32_t j = 0; j < k->n_members; j++) {
    int32_t m = k->members[j];
    if (kiln_op_table[NODE(c, m)->op].kind == KILN_KIND_REDUCE) gen_reduce(c, o, m, suffix, L, unroll);
  }
  kiln_text body = {0};
  int any;
  gen_f_stores(c, &body, &any, NULL);
  kiln_cg_flush_pre(c, o);
  if (any) {
    kiln_text idx = {0};
    inner_index(c, &idx, suffix, L);
    loop_j(o, L, unroll, kiln_cg_sf(c, "%s%s", idx.p ? idx.p : "", body.p));
    if (idx.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
    free(idx.p);
  }
  if (body.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  kiln_text tail = {0};
  for (int32_t j = 0; j < k->n_stores; j++) {
    int32_t m = k->stores[j];
    int red = kiln_op_table[NODE(c, m)->op].kind == KILN_KIND_REDUCE;
    if (!red && kiln_sched_shape_is(c->g, k, m, KILN_SCTX_F)) continue;
    const char *v = kiln_cg_ex(c, m, &c->rsctx);
    KILN_ASSERT(c->s->buf_of[m] >= 0);
    int dt = NODE(c, m)->dtype;
    int a = kiln_cg_arg_of(c, c->s->buf_of[m], sty(dt));
    kiln_text_printf(&tail, "a%d[row] = %s;\n", a, kiln_cg_st(c, dt, v));
  }
  kiln_cg_flush_pre(c, o);
  if (tail.p) kiln_text_append(o, tail.p, tail.len);
  if (tail.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(tail.p);
}

/* A scan kernel (CUMSUM, CUMPROD; the schedule gives it alone): per row, a
 * sequential loop along the axis (L elements) that combines its input,
 * fused in F, into a running accumulator (double for floats, as the sums,
 * wrapping int64 for integers) and stores each element. The order is the
 * axis's, the same on every thread and as ref's. Rows run in parallel. */
static void gen_scan(cg *c, kiln_text *o, int suffix, int64_t L) {
  int32_t m = c->k->members[0], in = INP(c, m, 0);
  const kiln_gnode *nd = NODE(c, m);
  int idt = NODE(c, in)->dtype, fl = is_float(idt), prod = nd->op == KILN_OP_CUMPROD;
  memset(c->memo_f, 0, sizeof *c->memo_f * (size_t)c->g->n_nodes);
  memset(c->memo_b, 0, sizeof *c->memo_b * (size_t)c->g->n_nodes);
  kiln_text body = {0}, idx = {0};
  c->cur = &body;
  const char *v = kiln_cg_ex(c, in, &c->fctx);
  KILN_ASSERT(c->s->buf_of[m] >= 0); /* a scan is stored (schedule_mem.c) */
  int a = kiln_cg_arg_of(c, c->s->buf_of[m], sty(nd->dtype)); /* bf16/f16 stored as their bits */
  const char *step = fl ? (prod ? "acc * (double)x" : "acc + (double)x")
                        : (prod ? "kmul_i(acc, (int64_t)x)" : "kadd_i(acc, (int64_t)x)");
  row_loop_head(c, o, 0, -1);
  kiln_cg_flush_pre(c, o);
  inner_index(c, &idx, suffix, L);
  kiln_text_printf(o, "%s acc = %s;\n", fl ? "double" : "int64_t", prod ? "1" : "0");
  kiln_text_printf(o, "for (int64_t j = 0; j < %lldLL; j++) {\n%s%sconst %s x = %s;\nacc = %s;\na%d[f] = %s;\n}\n}\n",
                   (long long)L, idx.p ? idx.p : "", body.p ? body.p : "", cty(idt), v, step, a,
                   kiln_cg_st(c, nd->dtype, kiln_cg_conv(c, "acc", fl ? KILN_F64 : KILN_I64, nd->dtype)));
  if (body.failed || idx.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  free(idx.p);
}

/* A row kernel: a column kernel when col_mode says so (*col = 1), else a
 * loop over rows (items: the number of rows) computing the reductions over
 * the inner axes (L elements) and the stores. suffix: the inner axes (those
 * with more than one element) are the last ones, so f = row * L + j. */
static void gen_row(cg *c, kiln_text *o, int64_t *items, int *col) {
  const kiln_skernel *k = c->k;
  int64_t rows = 1, L = 1;
  int suffix = 1, prefix = 1, seen_inner = 0, seen_outer = 0;
  for (int d = 0; d < k->rank; d++) {
    if (k->shape[d] == 1) continue;
    if (k->mask >> d & 1) {
      seen_inner = 1;
      if (seen_outer) prefix = 0;
    } else {
      seen_outer = 1;
      if (seen_inner) suffix = 0;
    }
  }
  for (int d = 0; d < k->rank; d++) {
    if (k->mask >> d & 1)
      L *= k->shape[d];
    else
      rows *= k->shape[d];
  }
  *items = rows;
  if (kiln_op_table[NODE(c, k->seed)->op].kind == KILN_KIND_SCAN) {
    gen_scan(c, o, suffix, L);
    return;
  }
  if (kiln_cg_col_mode(c, suffix, prefix, rows)) {
    *col = 1;
    kiln_cg_gen_col(c, o, rows, L);
    return;
  }
  /* Short reductions (pooling windows, small softmax rows): unroll the
   * reduced axis and make the last row axis the inner loop, so the loop
   * over rows vectorizes and carries no division. */
  int dl = -1, unroll = L <= 8;
  for (int d = k->rank - 1; d >= 0 && dl < 0; d--)
    if (!(k->mask >> d & 1) && k->shape[d] > 1) dl = d;
  if (dl < 0 || k->shape[dl] < 4) unroll = 0;
  for (int32_t j = 0; j < k->n_members && unroll; j++) unroll = NODE(c, k->members[j])->op != KILN_OP_ARGMAX;
  row_loop_head(c, o, unroll, dl);
  row_body(c, o, suffix, L, unroll);
  kiln_text_printf(o, unroll ? "}\n}\n" : "}\n");
}

void kiln_kernel_src_clear(kiln_kernel_src *k) {
  if (!k) return;
  if (!k->borrowed) {
    free(k->src);
    free(k->args);
    free(k->sites);
  }
  memset(k, 0, sizeof *k);
}

static kiln_status gen_kernel(const kiln_sched *s, int32_t kid, int sym, int64_t sym_floor, int n_syms,
                              const int64_t *primes, kiln_kernel_src *out, kiln_err *err) {
  memset(out, 0, sizeof *out);
  cg c = {.g = s->g, .s = s, .k = &s->kernels[kid], .kid = kid, .st = KILN_OK, .sm_store = -1, .sm_sum = -1,
         .sym = sym, .sym_floor = sym_floor, .n_syms = n_syms, .sym_p = primes};
  const kiln_skernel *k = c.k;
  c.memo_f = calloc((size_t)s->g->n_nodes + 1, sizeof *c.memo_f);
  c.memo_rs = calloc((size_t)s->g->n_nodes + 1, sizeof *c.memo_rs);
  c.memo_b = calloc((size_t)s->g->n_nodes + 1, sizeof *c.memo_b);
  c.mov16 = calloc((size_t)s->g->n_nodes + 1, 1);
  if (!c.memo_f || !c.memo_rs || !c.memo_b || !c.mov16) c.st = KILN_ERR_OUT_OF_MEMORY;
  if (sym) kiln_cg_arg_of(&c, KILN_CG_SYM_ARG, "int64_t"); /* a0: the symbol values (codegen_sym.c) */
  if (c.st == KILN_OK) kiln_cg_init_ctx(&c);
  kiln_text body = {0};
  int64_t items = 0;
  int col = 0;
  if (c.st == KILN_OK) {
    if (k->line)
      kiln_cg_gen_line(&c, &body, &items);
    else if (k->row)
      gen_row(&c, &body, &items, &col);
    else
      gen_elementwise(&c, &body, &items);
  }
  kiln_text src = {0};
  /* a kernel with index checks may unswitch its loops on them (prelude) */
  kiln_text_printf(&src, "%svoid k_0000000000000000(void *const *args, int64_t begin, int64_t end) {\n",
                   c.n_sites ? "KIDX_FN " : "");
  for (int i = 0; i < c.n_args; i++)
    kiln_text_printf(&src, "%s *restrict a%d KU = (%s *)args[%d];\n", c.arg_ty[i], i, c.arg_ty[i], i);
  if (c.top.p) kiln_text_append(&src, c.top.p, c.top.len);
  if (body.p) kiln_text_append(&src, body.p, body.len);
  kiln_text_printf(&src, "}\n");
  if (body.failed || src.failed || c.pre.failed || c.top.failed) c.st = KILN_ERR_OUT_OF_MEMORY;
  free(body.p);
  free(c.pre.p);
  free(c.top.p);
  free(c.memo_f);
  free(c.memo_b);
  free(c.mov16);
  free(c.memo_rs);
  kiln_arena_destroy(&c.ar);
  if (c.st != KILN_OK) {
    free(src.p);
    free(c.args);
    free(c.arg_ty);
    free(c.sites);
    if (c.st == KILN_ERR_OUT_OF_MEMORY) return kiln_err_set(err, c.st, "codegen: out of memory");
    return kiln_err_set(err, c.st, "codegen: %s", c.msg);
  }
  free(c.arg_ty);
  uint64_t h = kiln_hash_bytes(src.p, src.len, 0x6b65726eULL);
  snprintf(out->name, sizeof out->name, "k_%016llx", (unsigned long long)h);
  /* "void " (after "KIDX_FN ", if any) + placeholder of the same length */
  memcpy(src.p + (c.n_sites ? 8 : 0) + 5, out->name, 18);
  out->src = src.p;
  out->len = src.len;
  out->hash = h;
  out->args = c.args;
  out->n_args = c.n_args;
  out->sites = c.sites;
  out->n_sites = c.n_sites;
  out->items = items;
  int64_t per = 1;
  if (k->row)
    for (int d = 0; d < k->rank; d++)
      if (k->mask >> d & 1) per *= k->shape[d];
  out->grain = col ? 64 : per >= 16384 ? 1 : 16384 / (per > 0 ? per : 1);
  out->span = col ? KILN_CG_COL_SPAN : 0;
  return KILN_OK;
}

kiln_status kiln_codegen_kernel(const kiln_sched *s, int32_t kid, kiln_kernel_src *out, kiln_err *err) {
  return gen_kernel(s, kid, 0, 0, 0, NULL, out, err);
}

kiln_status kiln_codegen_kernel_sym(const kiln_sched *s, int32_t kid, int64_t sym_floor, int n_syms,
                                    const int64_t *primes, kiln_kernel_src *out, kiln_err *err) {
  return gen_kernel(s, kid, 1, sym_floor, n_syms, primes, out, err);
}
