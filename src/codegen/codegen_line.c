/* Line kernels: ARGSORT, SCATTER and SCATTER_ADD, each a kernel of its own
 * (the schedule's `line` kernels). The parallel items are the lines along
 * the op's axis (every index of the other axes); one task handles whole
 * lines, in order, so a sort is stable and a scatter's duplicates resolve
 * (last wins) or accumulate in the same order on every run and thread
 * count. Inputs are read through loads or inlined expressions, so what
 * produces them fuses into this kernel as into any other. */
#include <stdlib.h>

#include "codegen/codegen_internal.h"

/* The opening of the loop over lines: `row`, the outer axis variables. */
static void line_head(cg *c, kiln_text *o, int a) {
  const kiln_skernel *k = c->k;
  int64_t st = 1;
  kiln_text_printf(o, "for (int64_t row = begin; row < end; row++) {\n");
  for (int d = k->rank - 1; d >= 0; d--) {
    if (d == a) continue;
    kiln_text_printf(o, "const int64_t i%d KU = row / %lldLL %% %lldLL;\n", d, (long long)st, (long long)k->shape[d]);
    st *= k->shape[d];
  }
}

/* The flat index into the kernel's domain with axis a at `v`. */
static const char *flat_at(cg *c, int a, const char *v) {
  const kiln_skernel *k = c->k;
  const char *e = "0";
  int64_t st = 1;
  for (int d = k->rank - 1; d >= 0; d--) {
    if (k->shape[d] != 1) e = kiln_cg_sf(c, "%s + %s * %lldLL", e, d == a ? v : kiln_cg_canon_ax[d], (long long)st);
    st *= k->shape[d];
  }
  return e;
}

/* An index context over node n (of the kernel's rank) at the canonical
 * axes, axis a at the atom v in [0, len). */
static void at_axes(cg *c, ictx *x, int32_t n, int a, const char *v, int64_t len) {
  const kiln_gnode *nd = NODE(c, n);
  *x = (ictx){.kind = KILN_SCTX_OTHER, .rank = nd->rank, .shape = nd->shape};
  for (int d = 0; d < nd->rank; d++)
    x->ax[d] = d == a ? kiln_cg_ix_atom(c, v, 0, len > 0 ? len - 1 : 0) : c->fctx.ax[d];
}

/* out[line] = in0[line] for the L elements of the line (SCATTER's copy),
 * stored as node n's dtype (16-bit floats as their bits). */
static void copy_line(cg *c, kiln_text *o, int32_t n, int a, int out) {
  int64_t L = c->k->shape[a];
  ictx x;
  at_axes(c, &x, INP(c, n, 0), a, "j", L);
  const char *v = kiln_cg_bits16(c, INP(c, n, 0), &x); /* 16-bit floats: the bits, NaNs kept */
  if (!v) v = kiln_cg_st(c, NODE(c, n)->dtype, kiln_cg_ex(c, INP(c, n, 0), &x));
  kiln_text_printf(o, "for (int64_t j = 0; j < %lldLL; j++) a%d[%s] = %s;\n", (long long)L, out, flat_at(c, a, "j"),
                   v);
}

/* ARGSORT: the line's keys (as double, or int64 for integers: exact) into
 * kk, the stable merge sort of the prelude (ksort), the positions out. A
 * failed scratch allocation reports site -2 (out of memory) in the error
 * word and leaves the output unwritten. */
static void gen_argsort(cg *c, kiln_text *o, int32_t n, int a) {
  const kiln_gnode *in = NODE(c, INP(c, n, 0));
  int64_t L = c->k->shape[a];
  int fl = is_float(in->dtype), out = kiln_cg_arg_of(c, c->s->buf_of[n], "int64_t");
  int e = kiln_cg_arg_of(c, KILN_CG_ERR_ARG, "int64_t");
  kiln_cg_site_of(c, n);
  ictx x;
  at_axes(c, &x, INP(c, n, 0), a, "j", L);
  const char *v = kiln_cg_ex(c, INP(c, n, 0), &x), *kt = fl ? "double" : "int64_t";
  kiln_text_printf(o, "%s *kk = (%s *)malloc(sizeof(%s) * %lldULL);\n", kt, kt, kt, (long long)L + 1);
  kiln_text_printf(o, "int64_t *kp = (int64_t *)malloc(sizeof(int64_t) * %lldULL);\n", 2 * (long long)L + 2);
  kiln_text_printf(o, "if (!kk || !kp) kidx_report(a%d, -2, 0);\nelse {\n", e);
  line_head(c, o, a);
  kiln_text_printf(o, "for (int64_t j = 0; j < %lldLL; j++) kk[j] = (%s)(%s);\n", (long long)L, kt, v);
  kiln_text_printf(o, "ksort(%s, %s, kp, kp + %lldLL, %lldLL, %d);\n", fl ? "kk" : "0", fl ? "0" : "kk",
                   (long long)L + 1, (long long)L, (int)NODE(c, n)->iattr[1]);
  kiln_text_printf(o, "for (int64_t j = 0; j < %lldLL; j++) a%d[%s] = kp[j];\n}\n}\n", (long long)L, out,
                   flat_at(c, a, "j"));
  kiln_text_printf(o, "free(kk);\nfree(kp);\n");
}

/* SCATTER / SCATTER_ADD: the line of x, then for q along the index's axis
 * (when the line is inside the index's extent) the value src[.., q, ..]
 * written at (or added to) position idx[.., q, ..], checked. The buffer
 * holds the dtype's elements (16-bit floats as their bits, loaded and
 * stored through kiln_cg_ld/st, a sum rounded to the dtype: the f32 values
 * written into a bf16 buffer were garbage, and gather's, sort's and
 * cross_entropy's gradients of 16-bit floats with them). */
static void gen_scatter(cg *c, kiln_text *o, int32_t n, int a) {
  const kiln_gnode *nd = NODE(c, n), *ix = NODE(c, INP(c, n, 1));
  int64_t Lx = c->k->shape[a], Li = ix->shape[a];
  int out = kiln_cg_arg_of(c, c->s->buf_of[n], sty(nd->dtype));
  line_head(c, o, a);
  copy_line(c, o, n, a, out);
  const char *cond = "1";
  for (int d = 0; d < nd->rank; d++)
    if (d != a && ix->shape[d] < nd->shape[d]) cond = kiln_cg_sf(c, "%s && i%d < %lldLL", cond, d, (long long)ix->shape[d]);
  ictx xi, xs;
  at_axes(c, &xi, INP(c, n, 1), a, "q", Li);
  at_axes(c, &xs, INP(c, n, 2), a, "q", Li);
  const char *iv = kiln_cg_ex(c, INP(c, n, 1), &xi), *sv = kiln_cg_ex(c, INP(c, n, 2), &xs);
  int e = kiln_cg_arg_of(c, KILN_CG_ERR_ARG, "int64_t"), site = kiln_cg_site_of(c, n);
  kiln_text_printf(o, "if (%s)\nfor (int64_t q = 0; q < %lldLL; q++) {\n", cond, (long long)Li);
  kiln_text_printf(o, "const int64_t t = kidx((int64_t)(%s), %lldLL, a%d, %d);\n", iv, (long long)Lx, e, site);
  const char *dst = kiln_cg_sf(c, "a%d[%s]", out, flat_at(c, a, "t")), *ty = cty(nd->dtype);
  int dt = nd->dtype;
  const char *sb =
      nd->op == KILN_OP_SCATTER && NODE(c, INP(c, n, 2))->dtype == dt ? kiln_cg_bits16(c, INP(c, n, 2), &xs) : NULL;
  if (sb) /* a 16-bit float moved: its bits, NaNs kept */
    kiln_text_printf(o, "%s = %s;\n", dst, sb);
  else if (nd->op == KILN_OP_SCATTER)
    kiln_text_printf(o, "%s = %s;\n", dst, kiln_cg_st(c, dt, kiln_cg_sf(c, "(%s)(%s)", ty, sv)));
  else if (kiln_dt_is_half(dt)) /* the f32 sum of two 16-bit values, rounded to the dtype */
    kiln_text_printf(o, "%s = %s;\n", dst,
                     kiln_cg_st(c, dt, kiln_cg_conv(c, kiln_cg_sf(c, "(%s + (float)(%s))", kiln_cg_ld(c, dt, dst), sv),
                                                    KILN_F32, dt)));
  else if (is_float(dt))
    kiln_text_printf(o, "%s = %s + (%s)(%s);\n", dst, dst, ty, sv);
  else { /* integers wrap: the sum in the unsigned type of the dtype's width */
    const char *uty = dt == KILN_I32 ? "uint32_t" : dt == KILN_I64 ? "uint64_t" : "uint8_t";
    kiln_text_printf(o, "%s = (%s)((%s)%s + (%s)(%s));\n", dst, ty, uty, dst, uty, sv);
  }
  kiln_text_printf(o, "}\n}\n");
}

void kiln_cg_gen_line(cg *c, kiln_text *o, int64_t *items) {
  const kiln_skernel *k = c->k;
  int32_t n = k->members[0];
  int a = 0;
  while (a < k->rank && !(k->mask >> a & 1)) a++;
  int64_t rows = 1;
  for (int d = 0; d < k->rank; d++)
    if (d != a) rows *= k->shape[d];
  *items = rows;
  KILN_ASSERT(k->n_members == 1 && a < k->rank && c->s->buf_of[n] >= 0);
  if (NODE(c, n)->op == KILN_OP_ARGSORT)
    gen_argsort(c, o, n, a);
  else
    gen_scatter(c, o, n, a);
}
