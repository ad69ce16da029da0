/* libFuzzer harness. Property: for any program of tests/backend/symprog.h
 * built at any two lengths T1 and T2 (0 to 299), symbolic-dimension
 * inference and binding (src/ir/symshape.h)
 *   1. never crash or hit undefined behaviour (ASan/UBSan);
 *   2. give a graph that is an instance of its own family;
 *   3. are sound: when the T2 graph binds to the family inferred at T1, the
 *      bound value is T2 and every node's every size is its monomial at T2
 *      (checked here independently of the binder), and the T2 graph's
 *      sizes that inference left constant equal the T1 graph's; every value
 *      that is a size (a constant, a slice's start) is its expression at
 *      T2, and the family's instance at T2 has the T2 graph's sizes and
 *      attributes.
 * The input is read as T1 and T2 (a byte each, plus a third for the high
 * bits) and then the program's choices, one byte per choice.
 *
 * Build: cmake -DKILN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DKILN_SANITIZE=address,undefined
 * Run:   build/bin/fuzz/fuzz_symshape -max_total_time=60 tests/fuzz/corpus/fuzz_symshape */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/symshape.h"

#include "backend/symprog.h"

typedef struct stream {
  const uint8_t *p;
  size_t n;
} stream;

static uint64_t next_byte(void *ctx) {
  stream *s = (stream *)ctx;
  if (!s->n) return 0;
  s->n--;
  return *s->p++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int64_t t1 = (data[0] + (data[2] & 1) * 256) % 300, t2 = (data[1] + (data[2] >> 1 & 1) * 256) % 300;
  stream s1 = {data + 3, size - 3}, s2 = s1;
  kiln_graph *a = symprog_build(next_byte, &s1, t1), *b = symprog_build(next_byte, &s2, t2);
  char why[256];
  if (kiln_graph_verify(a, why, sizeof why) || kiln_graph_verify(b, why, sizeof why)) abort(); /* the generator */
  kiln_symshape sa;
  kiln_err e;
  if (kiln_symshape_infer(a, 1, &(kiln_sym_origin){0, 1}, &sa, &e) != KILN_OK) abort();
  int64_t v[KILN_SYM_MAX];
  if (!kiln_symshape_bind(a, &sa, a, v, NULL)) abort();
  if (kiln_symshape_bind(a, &sa, b, v, NULL)) {
    if (sa.n_syms && v[0] != t2) abort();
    for (int32_t i = 0; i < a->n_nodes; i++)
      for (int d = 0; d < a->nodes[i].rank; d++) {
        const kiln_symdim *m = kiln_symshape_dim(&sa, i, d);
        int64_t want = m->mask ? m->coeff * t2 + m->add : a->nodes[i].shape[d];
        if (b->nodes[i].shape[d] != want) abort();
      }
    /* and every value that is a size (a flip's T - 1, a roll's slice start)
     * is its expression at T2 */
    for (int32_t k = 0; k < sa.n_vals; k++) {
      const kiln_sym_value *x = &sa.vals[k];
      int64_t want = x->e.coeff * (x->e.mask ? t2 : 1) + x->e.add;
      if (x->slot < 0 ? b->nodes[x->node].fattr != (double)want : b->nodes[x->node].iattr[x->slot] != want) abort();
    }
    /* the family's instance at T2 is the T2 graph's sizes and values */
    kiln_graph *inst = kiln_symshape_instance(a, &sa, v);
    if (!inst) abort();
    for (int32_t i = 0; i < a->n_nodes; i++) {
      const kiln_gnode *p = &inst->nodes[i], *q = &b->nodes[i];
      if (memcmp(p->shape, q->shape, sizeof p->shape[0] * (size_t)p->rank) ||
          memcmp(p->iattr, q->iattr, sizeof p->iattr[0] * (size_t)p->n_iattr))
        abort();
    }
    kiln_graph_free(inst);
  }
  kiln_symshape_clear(&sa);
  kiln_graph_free(a);
  kiln_graph_free(b);
  return 0;
}
