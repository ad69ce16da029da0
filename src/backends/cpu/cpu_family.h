/* Families of graphs on the cpu backend (cpu_family.c): one compile for
 * every size of a graph whose input sizes vary. Internal to the backend. */
#ifndef KILN_BACKENDS_CPU_CPU_FAMILY_H
#define KILN_BACKENDS_CPU_CPU_FAMILY_H

#include "backends/cpu/cpu_internal.h"
#include "ir/symshape.h"

/* One family (opaque): its graphs, kernels and shared buffers. */
typedef struct kiln_cpu_family kiln_cpu_family;

/* The family of g (a graph through the passes) whose graph inputs'
 * dimensions dyn[0..n_dyn) vary: a known one g binds to (values[0..
 * KILN_SYM_MAX): g's symbol values), or one made from g now (*made = 1:
 * its kernels are new, the C compiler runs once; it may have failed, see
 * kiln_cpu_family_sources). NULL: out of memory or too many families (g
 * compiles as it is). hint (may be NULL): a family g is known to be an
 * instance of (backend.h), taken without binding once g's input sizes give
 * its values. Thread-safe (the family table is under b->mu; the
 * caller must not hold it). */
kiln_cpu_family *kiln_cpu_family_of(cpu_backend *b, const kiln_graph *g, int n_dyn, const kiln_sym_origin *dyn,
                                    const kiln_family_hint *hint, int64_t *values, int *made);

/* The schedule of g: for a known family (f not NULL, not failed, made 0),
 * the family's fusion at g's sizes (kiln_sched_build_like: only the memory
 * plan is made); otherwise, or when that fails, g's own
 * (kiln_sched_build). */
kiln_status kiln_cpu_family_schedule(const kiln_cpu_family *f, int made, const kiln_graph *g, kiln_sched **out,
                                     kiln_err *err);

/* The family kernels of schedule s (of g, found by kiln_cpu_family_of with
 * these values and made): srcs[i] for each loop kernel with stores (the
 * family's text, its loop size at s's sizes), symvals the symbol values
 * (argument 0 of those kernels), *arena the family's shared intermediate
 * buffers (the executable runs in them instead of its own). *how: 1 the
 * family was made now, 2 it was known. KILN_ERR_UNSUPPORTED (with the
 * reason in why): compile s's graph as it is. */
kiln_status kiln_cpu_family_sources(const kiln_cpu_family *f, int made, const int64_t *values, const kiln_sched *s,
                                    kiln_kernel_src *srcs, int64_t *symvals, kiln_cpu_arena **arena, int *how, char *why,
                                    size_t why_cap, kiln_err *err);
/* The op lists of f's loop kernels (profile names), one per kernel of its
 * schedule, NULL until the first executable of f names them; read and
 * written under b->mu. */
const char **kiln_cpu_family_labels(const kiln_cpu_family *f);

void kiln_cpu_families_free(kiln_backend *kb, kiln_cpu_families *f);

#endif
