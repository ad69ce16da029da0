/* C code generation for the LOOP kernels of a schedule.
 *
 * Each kernel becomes one self-contained C function
 *     void k_<hash>(void *const *args, int64_t begin, int64_t end)
 * that processes items [begin, end) of its parallel loop (elements of an
 * elementwise kernel, rows of a row kernel). Shapes are baked in as
 * constants; buffers are reached through args[] in an order given by
 * `args` (buffer ids of the schedule), so the text does not depend on the
 * graph it came from and <hash> (of the text) names identical kernels
 * identically across graphs. The functions rely on the helpers of
 * kiln_codegen_prelude(), which must precede them in the translation unit.
 *
 * Thread-safety: pure functions of their arguments.
 */
#ifndef KILN_CODEGEN_CODEGEN_H
#define KILN_CODEGEN_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/symshape.h"
#include "schedule/schedule.h"

typedef struct kiln_kernel_src {
  char *src;          /* the function's text (malloc'd, NUL-terminated) */
  size_t len;
  char name[24];      /* "k_" + 16 hex digits of hash */
  uint64_t hash;      /* of the text */
  int32_t n_args;
  int32_t *args;      /* buffer id of each argument (malloc'd) */
  int64_t items;      /* parallel loop size */
  int64_t grain;      /* minimum items per task */
  int64_t span;       /* 0, or a column kernel's block of outputs (KILN_CG_COL_SPAN): the items are
                       * best split evenly over the threads in tasks of at most this many */
  /* Index checks (INDEX_SELECT, GATHER): site k of the kernel is node
   * sites[k] of the schedule's graph. A kernel with sites takes the
   * execution's error word as the argument whose buffer id is
   * KILN_CG_ERR_ARG: int64_t[2], zeroed before the run; the first
   * out-of-range index stores {site + 1, the index} (first error wins). */
  int32_t n_sites;
  int32_t *sites;     /* malloc'd */
  int borrowed;       /* 1: src, args and sites belong to another kiln_kernel_src (a dynamic family's
                       * text, bound at another size): kiln_kernel_src_clear leaves them */
  const char *family_name; /* borrowed: that kiln_kernel_src's name (it outlives this one), or NULL */
} kiln_kernel_src;

/* Outputs per sweep of a column kernel (codegen_col.c, kiln_cg_gen_col). */
#define KILN_CG_COL_SPAN 512

/* The buffer id of the error-word argument (no real buffer has it). */
#define KILN_CG_ERR_ARG (-1)
/* The buffer id of a family kernel's symbol values (int64_t[KILN_SYM_MAX],
 * argument 0 of a kernel made by kiln_codegen_kernel_sym). */
#define KILN_CG_SYM_ARG (-2)

/* Generate the source of LOOP kernel `kid` of s into *out (owned by the
 * caller: kiln_kernel_src_clear). Errors: KILN_ERR_OUT_OF_MEMORY,
 * KILN_ERR_UNSUPPORTED (an op/dtype combination codegen does not know). */
kiln_status kiln_codegen_kernel(const kiln_sched *s, int32_t kid, kiln_kernel_src *out, kiln_err *err);
void kiln_kernel_src_clear(kiln_kernel_src *k);

/* ── family kernels (codegen_sym.c, docs/dynamic-shapes.md) ──
 *
 * One kernel for every size of a family of graphs (ir/symshape.h): the
 * kernel is generated for two instances of the family, at symbol values pa
 * and pb (distinct primes above every constant size of the graph), each
 * with argument 0 the symbol values (kiln_codegen_kernel_sym); the two texts
 * must be the same but for literals, and each literal that differs must
 * read back as the same expression of the symbols at pa and at pb: an
 * integer c * s_i * s_j ... + d (|d| <= 4), or a floating 1 / (c * s_i ...)
 * (a mean's factor). Those literals become expressions of a0[i], the text
 * is renamed by its hash, and *items is the loop size as a monomial
 * (exponents 0: a constant). Anything else fails with KILN_ERR_UNSUPPORTED (the
 * caller compiles the concrete graph instead): a family kernel is only made
 * when both instances say the same thing about every size.
 * sym_floor: the same for every instance of the family, the smallest size
 * a symbolic dimension takes at any of them (above every constant size): a
 * length at or above it may vary, so the kernel sizes no local array by it
 * (a row of any length must not overflow a thread's stack). primes: the
 * instance's n_syms symbol values: an index range is taken to stay below a
 * size only where it does at every size of the family, not only at these
 * primes (two symbols in another order at run time). */
kiln_status kiln_codegen_kernel_sym(const kiln_sched *s, int32_t kid, int64_t sym_floor, int n_syms,
                                    const int64_t *primes, kiln_kernel_src *out, kiln_err *err);
/* Whether hi < m holds at every size of a family (each symbol at least 2),
 * both read back from their values at an instance whose n_syms symbols are
 * the primes p (floor: its smallest symbolic size) as c * (a product of
 * symbols) + d (codegen_sym.c): an index range below a size at the
 * instance's primes only (the first U of a [U, T] flattened, U < T there) is
 * not. Used by the index folding of kiln_codegen_kernel_sym. */
int kiln_cg_sym_lt_always(int n_syms, const int64_t *p, int64_t floor, int64_t hi, int64_t m);
/* How far a size may be from a product of symbols for kiln_codegen_family
 * to read it back (the instances' primes must be above every constant size
 * plus twice this). */
#define KILN_CG_SYM_ADD_MARGIN 128
/* A product of symbols with exponents and an offset: coeff * prod
 * s_k^exp[k] + add (a loop over x[1:] of [T, 5] is 5 T - 5 items), plus
 * coeff2 * prod s_k^exp2[k] when coeff2 != 0 (a concat of T and U rows of
 * 5: 5 T + 5 U). */
typedef struct kiln_sym_mono {
  int64_t coeff;
  uint8_t exp[KILN_SYM_MAX];
  int64_t add;
  int64_t coeff2;
  uint8_t exp2[KILN_SYM_MAX];
} kiln_sym_mono;
/* A sum of two products of symbols the family's sizes hold (c1 * prod
 * s_k^e1[k] + c2 * prod s_k^e2[k]: s0 + s1, s0 s1 - s0): a literal that is
 * no single product plus an offset reads back as a product of symbols
 * times a constant times one of these, plus an offset. */
typedef struct kiln_sym_poly {
  int64_t c1, c2;
  uint8_t e1[KILN_SYM_MAX], e2[KILN_SYM_MAX];
} kiln_sym_poly;
kiln_status kiln_codegen_family(const kiln_kernel_src *a, const kiln_kernel_src *b, int n_syms, const int64_t *pa,
                                const int64_t *pb, const kiln_sym_poly *polys, int n_polys, kiln_kernel_src *out,
                                kiln_sym_mono *items, kiln_err *err);

/* Helpers every kernel uses (includes, conversions, NaN-aware min/max, the
 * RNG of src/base/rng.h). Static string. */
const char *kiln_codegen_prelude(void);

#endif
