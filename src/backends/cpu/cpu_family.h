/* Families of graphs on the cpu backend (cpu_family.c): one compile for
 * every size of a graph whose input sizes vary. Internal to the backend. */
#ifndef KILN_BACKENDS_CPU_CPU_FAMILY_H
#define KILN_BACKENDS_CPU_CPU_FAMILY_H

#include "backends/cpu/cpu_internal.h"
#include "ir/symshape.h"

/* The family kernels of schedule s (of a graph through the passes), whose
 * graph inputs' dimensions dyn[0..n_dyn) vary: srcs[i] for each loop kernel
 * with stores (the family's text, its loop size at s's sizes), symvals the
 * symbol values of s's graph (argument 0 of those kernels), *arena the
 * family's shared intermediate buffers (the executable runs in them instead
 * of its own). *how: 1 the
 * family was made now (its kernels are new: the C compiler runs once), 2 it
 * was known (nothing new to compile). KILN_ERR_UNSUPPORTED (with the reason
 * in why): compile s's graph as it is. Thread-safe (the family table is
 * under b->mu; the caller must not hold it). */
kiln_status kiln_cpu_family_sources(cpu_backend *b, const kiln_sched *s, int n_dyn, const kiln_sym_origin *dyn,
                                    kiln_kernel_src *srcs, int64_t *symvals, kiln_cpu_arena **arena, int *how, char *why,
                                    size_t why_cap, kiln_err *err);
void kiln_cpu_families_free(kiln_backend *kb, kiln_cpu_families *f);

#endif
