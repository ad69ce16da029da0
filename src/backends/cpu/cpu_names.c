/* The cpu backend's steps as profiles name them (cpu_internal.h): a loop
 * kernel's op list, the scope and source line of each step, and its name,
 * made once, when a profile first needs it. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/cpu/cpu_internal.h"

/* The op list of loop kernel ki, "fusion.3 (mul,add,relu)" (interned; NULL
 * when out of memory): the part of its profile name that the schedule
 * decides (kiln_cpu_name_steps adds the scope). */
const char *kiln_cpu_loop_label(const kiln_sched *s, int32_t ki) {
  const kiln_graph *g = s->g;
  const kiln_skernel *k = &s->kernels[ki];
  char buf[200];
  int m = snprintf(buf, sizeof buf, "fusion.%d (", ki);
  size_t len = m > 0 ? (size_t)m : 0;
  int first = 1;
  for (int32_t i = 0; i < k->n_members && len + 24 < sizeof buf; i++) {
    int op = g->nodes[k->members[i]].op;
    if (op == KILN_OP_LEAF || op == KILN_OP_SCALAR || op == KILN_OP_CONST) continue;
    int dup = 0; /* each op once, in first-use order */
    for (int32_t j = 0; j < i && !dup; j++) dup = g->nodes[k->members[j]].op == op;
    if (dup) continue;
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", first ? "" : ",", kiln_op_name(op));
    first = 0;
  }
  if (first && len >= 2) buf[len - 2] = 0; /* only constants: "fusion.3" */
  else if (len + 2 < sizeof buf) snprintf(buf + len, sizeof buf - len, ")");
  return kiln_prof_intern(buf);
}

/* What names step sp of kernel ki in profiles, kept in the step: the
 * annotation scope of its root node, the user's line behind it (where the
 * user made the node that seeded the kernel, the MATMUL of a GEMM: an
 * update fused into it is the optimizer's line) and, for a loop kernel,
 * its op list (label, computed by the caller). */
void kiln_cpu_name_parts(const kiln_sched *s, int32_t ki, step *sp, const char *label) {
  const kiln_graph *g = s->g;
  const kiln_skernel *k = &s->kernels[ki];
  int32_t root = k->kind == KILN_SK_LOOP && k->n_stores ? k->stores[k->n_stores - 1]
                 : k->kind == KILN_SK_GEMM || k->kind == KILN_SK_COLL ? k->node
                                                                      : -1;
  sp->scope = root >= 0 ? g->nodes[root].scope : 0;
  sp->has_scope = root >= 0;
  int32_t n = k->kind == KILN_SK_GEMM ? k->mm : k->kind == KILN_SK_COLL ? k->node : k->seed;
  sp->src_loc = n >= 0 && n < g->n_nodes ? g->nodes[n].loc : (kiln_loc){0};
  sp->label = label;
  sp->tag.name = sp->name; /* until named (kiln_cpu_step_resolve) */
  sp->tag.resolve = kiln_cpu_step_resolve;
}

/* The kernel's name in profiles, after its ops and the annotation scope of
 * its root node (the analogue of XLA_HLO_DEBUG op names): "Forward/fusion.3
 * (mul,add,relu)", "Backward/gemm 128x1024x784"; interned: it outlives the
 * executable. */
static const char *step_name(const step *sp) {
  char buf[256];
  const char *scope = sp->has_scope ? kiln_prof_scope_path(sp->scope) : "";
  int n = snprintf(buf, sizeof buf, "%s%s", scope, scope[0] ? "/" : "");
  if (n < 0 || n >= (int)sizeof buf) n = 0;
  size_t cap = sizeof buf - (size_t)n;
  if (sp->kind == ST_GEMM && sp->tile) { /* S = Q·Kᵀ, its rows, O = P·V (cpu_execute.c, run_tile) */
    double nb = 1;
    for (int d = 0; d < sp->brank; d++) nb *= (double)sp->bshape[d];
    snprintf(buf + n, cap, "attention tile %.0fx(%lldx%lldx%lld, rows, %lldx%lldx%lld)", nb, (long long)sp->m,
             (long long)sp->n, (long long)sp->k, (long long)sp[2].m, (long long)sp[2].n, (long long)sp[2].k);
  } else if (sp->kind == ST_GEMM) {
    if (sp->brank > 0) {
      double nb = 1;
      for (int d = 0; d < sp->brank; d++) nb *= (double)sp->bshape[d];
      snprintf(buf + n, cap, "gemm %.0fx(%lldx%lldx%lld)%s", nb, (long long)sp->m, (long long)sp->n, (long long)sp->k,
               sp->c0buf >= 0 ? " +update" : "");
    } else {
      snprintf(buf + n, cap, "gemm %lldx%lldx%lld%s", (long long)sp->m, (long long)sp->n, (long long)sp->k,
               sp->c0buf >= 0 ? " +update" : "");
    }
  } else if (sp->kind == ST_COPY) {
    snprintf(buf + n, cap, "copy %zu B", sp->bytes);
  } else if (sp->kind == ST_COLL) {
    snprintf(buf + n, cap, "%s %zu B", sp->coll->call.op, sp->bytes);
  } else {
    snprintf(buf + n, cap, "%s", sp->label ? sp->label : sp->name);
  }
  const char *r = kiln_prof_intern(buf);
  return r ? r : sp->name;
}

void kiln_cpu_step_resolve(const kiln_pool_tag *tag) {
  step *sp = (step *)((char *)(uintptr_t)tag - offsetof(step, tag)); /* the step holding the tag */
  if (__atomic_load_n(&sp->named, __ATOMIC_ACQUIRE)) return;
  const char *name = step_name(sp), *src = NULL;
  if (sp->src_loc.file) { /* "train.c:88" */
    char buf[160];
    snprintf(buf, sizeof buf, "%s:%d", kiln_fmt_file(sp->src_loc.file), sp->src_loc.line);
    src = kiln_prof_intern(buf);
  }
  /* threads that resolve at once store the same interned strings */
  __atomic_store_n(&sp->tag.src, src, __ATOMIC_RELEASE);
  __atomic_store_n(&sp->tag.name, name, __ATOMIC_RELEASE);
  __atomic_store_n(&sp->named, 1, __ATOMIC_RELEASE);
}

void kiln_cpu_name_steps(kiln_executable *e) {
  if (e->named) return;
  for (int32_t i = 0; i < e->n_steps; i++) kiln_cpu_step_resolve(&e->steps[i].tag);
  e->named = 1;
}
