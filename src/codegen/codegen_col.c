/* Column kernels: a lone reduction over leading axes (a bias gradient), as
 * one sweep over the rows per block of outputs. Split out of codegen.c. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen_internal.h"

/* Rows ahead a sweep asks for its input: see col_prefetch */
enum { COL_AHEAD = 16, COL_MAX_WALK = 64, COL_MAX_PF = 8 };

/* The buffers the reduced value n loads at the kernel's own index f (the
 * loads reached from it through elementwise ops, of the kernel's shape),
 * as arguments: args[i] of element size sizes[i]. */
static void col_loads(cg *c, int32_t n, int32_t *walked, int *nw, int *args, int *sizes, int *na) {
  const kiln_skernel *k = c->k;
  for (int i = 0; i < *nw; i++)
    if (walked[i] == n) return;
  if (*nw >= COL_MAX_WALK || *na >= COL_MAX_PF) return;
  walked[(*nw)++] = n;
  const kiln_gnode *nd = NODE(c, n);
  if (kiln_cg_loads(c, n)) {
    int same = nd->rank == k->rank;
    for (int d = 0; d < k->rank && same; d++) same = nd->shape[d] == k->shape[d];
    int32_t buf = kiln_sched_read_buf(c->s, n);
    if (!same || buf < 0) return;
    int a = kiln_cg_arg_of(c, buf, sty(nd->dtype));
    for (int i = 0; i < *na; i++)
      if (args[i] == a) return;
    args[*na] = a, sizes[(*na)++] = (int)kiln_dtype_size((kiln_dtype)nd->dtype);
    return;
  }
  if (c->s->owner[n] == c->kid || !kiln_op_is_elementwise(nd->op)) return;
  const int32_t *in = kiln_gnode_inputs(c->g, nd);
  for (int i = 0; i < nd->n_in; i++) col_loads(c, in[i], walked, nw, args, sizes, na);
}

/* Each row's block of every input the sweep loads, asked for COL_AHEAD
 * rows ahead (into L2): the rows are a whole row apart, and the hardware
 * prefetchers do not follow that across pages. A [2048, 1024] bf16 sum out
 * of cache: 1.6 -> 0.5-0.7 ms on one core, 0.62 -> 0.30-0.35 on two; the
 * same in cache. */
static void col_prefetch(cg *c, kiln_text *o, int32_t in, int64_t rows, int64_t L) {
  int32_t walked[COL_MAX_WALK];
  int args[COL_MAX_PF], sizes[COL_MAX_PF], nw = 0, na = 0;
  col_loads(c, in, walked, &nw, args, sizes, &na);
  if (!na) return;
  kiln_text_printf(o, "if (j + %d < %lldLL) {\n", COL_AHEAD, (long long)L);
  for (int i = 0; i < na; i++)
    kiln_text_printf(o, "for (int64_t l = c0; l < c1; l += %d) __builtin_prefetch(&a%d[(j + %d) * %lldLL + l], 0, 2);"
                     "\n", 64 / sizes[i], args[i], COL_AHEAD, (long long)rows);
  kiln_text_printf(o, "}\n");
}

/* A lone reduction over leading axes (a column sum such as a bias
 * gradient): each task owns blocks of up to KILN_CG_COL_SPAN outputs and
 * sweeps the reduced rows once per block, reading each row's block
 * contiguously, instead of one strided pass per output. Sequential per
 * output, so the order is fixed (and the bits do not depend on how the
 * outputs are split over threads). The block is wide because a narrow one
 * reads a few cache lines per row at a stride of a whole row, a pattern the
 * hardware prefetchers do not follow across pages: 64 bf16 outputs of a
 * [2048, 1024] input took 1.9-2.8 ms on one core, 512 took 0.44-0.48
 * (docs/codegen.md). */
void kiln_cg_gen_col(cg *c, kiln_text *o, int64_t rows, int64_t L) {
  const kiln_skernel *k = c->k;
  int32_t m = k->members[0], in = INP(c, m, 0);
  const kiln_gnode *nd = NODE(c, m);
  int idt = NODE(c, in)->dtype, fl = is_float(idt);
  const char *at = fl ? "double" : "int64_t";
  const char *init = kiln_cg_reduce_init(nd->op, idt);
  kiln_text body = {0};
  c->cur = &body;
  const char *v = kiln_cg_ex(c, in, &c->fctx);
  int w = KILN_CG_COL_SPAN;
  kiln_text_printf(o, "for (int64_t c0 = begin; c0 < end; c0 += %d) {\n", w);
  kiln_text_printf(o, "const int64_t c1 = c0 + %d < end ? c0 + %d : end;\n%s acc[%d];\n", w, w, at, w);
  kiln_text_printf(o, "for (int64_t q = 0; q < c1 - c0; q++) acc[q] = %s;\n", init);
  kiln_text_printf(o, "for (int64_t j = 0; j < %lldLL; j++) {\n", (long long)L);
  int64_t so = 1, si = 1;
  kiln_text idx = {0};
  for (int d = k->rank - 1; d >= 0; d--) {
    int inner = k->mask >> d & 1;
    int64_t *st = inner ? &si : &so;
    kiln_text_printf(&idx, "const int64_t i%d KU = %s / %lldLL %% %lldLL;\n", d, inner ? "j" : "row", (long long)*st,
              (long long)k->shape[d]);
    *st *= k->shape[d];
  }
  col_prefetch(c, o, in, rows, L);
  /* row values (broadcasts of row-shaped inputs) are per output: in the loop */
  kiln_text_printf(o, "for (int64_t row = c0; row < c1; row++) {\n%sconst int64_t f KU = j * %lldLL + row;\n%s%s",
            idx.p ? idx.p : "", (long long)rows, c->pre.p ? c->pre.p : "", body.p ? body.p : "");
  c->pre.len = 0;
  kiln_text_printf(o, "const %s x = %s;\nacc[row - c0] = %s;\n}\n}\n", cty(idt), v,
            kiln_cg_comb(c, nd->op, fl, "acc[row - c0]", kiln_cg_sf(c, "((%s)x)", at)));
  /* per output: the reduced value, then the row-shaped members (a mean's
   * scaling, a variance's epsilon) and the stores */
  kiln_text_printf(o, "for (int64_t row = c0; row < c1; row++) {\n");
  so = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    if (k->mask >> d & 1) continue;
    kiln_text_printf(o, "const int64_t i%d KU = row / %lldLL %% %lldLL;\n", d, (long long)so, (long long)k->shape[d]);
    so *= k->shape[d];
  }
  kiln_text_printf(o, "const %s r%d = %s;\n", cty(nd->dtype), m, kiln_cg_conv(c, "acc[row - c0]", fl ? KILN_F64 : KILN_I64, nd->dtype));
  memset(c->memo_rs, 0, sizeof *c->memo_rs * (size_t)c->g->n_nodes);
  kiln_text tail = {0};
  for (int32_t j = 0; j < k->n_stores; j++) {
    int32_t st = k->stores[j];
    const char *sv = kiln_cg_ex(c, st, &c->rsctx);
    int dt = NODE(c, st)->dtype;
    kiln_text_printf(&tail, "a%d[row] = %s;\n", kiln_cg_arg_of(c, c->s->buf_of[st], sty(dt)), kiln_cg_st(c, dt, sv));
  }
  kiln_cg_flush_pre(c, o);
  if (tail.p) kiln_text_append(o, tail.p, tail.len);
  kiln_text_printf(o, "}\n}\n");
  if (body.failed || idx.failed || tail.failed) c->st = KILN_ERR_OUT_OF_MEMORY;
  free(tail.p);
  free(body.p);
  free(idx.p);
}

/* Column mode (gen_col): the inner axes are a prefix but not a suffix,
 * there are at least 16 rows, and the kernel is one reduction (the seed, not
 * an argmax) plus row-shaped members only. */
int kiln_cg_col_mode(cg *c, int suffix, int prefix, int64_t rows) {
  const kiln_skernel *k = c->k;
  int colok = !suffix && prefix && rows >= 16 && NODE(c, k->members[0])->op != KILN_OP_ARGMAX;
  for (int32_t j = 1; j < k->n_members && colok; j++)
    colok = kiln_op_table[NODE(c, k->members[j])->op].kind != KILN_KIND_REDUCE &&
            !kiln_sched_shape_is(c->g, k, k->members[j], KILN_SCTX_F);
  return colok;
}
