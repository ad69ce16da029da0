/* Graph dumps (see dump.h). */
#define _GNU_SOURCE
#include "debug/dump.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/fs.h"
#include "debug/graphtext.h"
#include "runtime/events.h"

int kiln_dump_format_parse(const char *s, kiln_dump_format *fmt) {
  *fmt = KILN_DUMP_TEXT;
  if (!s || !*s || !strcmp(s, "text")) return 0;
  if (!strcmp(s, "dot")) return *fmt = KILN_DUMP_DOT, 0;
  if (!strcmp(s, "c")) return *fmt = KILN_DUMP_C, 0;
  return -1;
}

const char *kiln_dump_format_ext(kiln_dump_format fmt) {
  return fmt == KILN_DUMP_DOT ? "dot" : fmt == KILN_DUMP_C ? "c" : "txt";
}

static const char *base_name(const char *path) {
  const char *s = path ? strrchr(path, '/') : NULL;
  return s ? s + 1 : path;
}

/* Text inside a C or DOT comment: no line breaks, no comment terminator. */
static void put_comment_text(FILE *f, const char *s) {
  for (; s && *s; s++) {
    if (*s == '\n' || *s == '\r')
      fputc(' ', f);
    else if (s[0] == '*' && s[1] == '/')
      fputs("* ", f);
    else
      fputc(*s, f);
  }
}

/* Text inside a DOT double-quoted string. */
static void put_dot_string(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c >= 0x20 && c != 0x7f)
      fputc(c, f);
  }
}

/* A kernel's kind as the dumps name it. */
static const char *kernel_label(const kiln_plan_kernel *kn) {
  switch (kn->kind) {
    case KILN_PLAN_GEMM: return "gemm";
    case KILN_PLAN_GEMM_UPDATE: return "gemm with update";
    case KILN_PLAN_ROW_LOOP: return "row loop";
    case KILN_PLAN_COLLECTIVE: return "collective";
    default: return "loop";
  }
}

static int is_gemm(const kiln_plan_kernel *kn) { return kn->kind == KILN_PLAN_GEMM || kn->kind == KILN_PLAN_GEMM_UPDATE; }

/* The plan's kernels, or NULL with *why saying why there are none. */
static const kiln_compile_plan *kernels_of(const kiln_compile_plan *p, const char **why) {
  *why = !p ? "the backend reported no plan" : p->none ? p->none : NULL;
  return *why ? NULL : p;
}

static void write_dot(const kiln_graph *g0, const kiln_compile_plan *plan, uint64_t key, const char *cause, FILE *f) {
  const char *why;
  const kiln_compile_plan *s = kernels_of(plan, &why);
  const kiln_graph *g = plan && plan->graph ? plan->graph : g0;
  fprintf(f, "/* kiln graph dump (dot), key 0x%016" PRIx64 ", cause: ", key);
  put_comment_text(f, cause ? cause : "(not given)");
  fprintf(f, "\n * %d nodes before the passes, %d after; ", (int)g0->n_nodes, (int)g->n_nodes);
  if (s) {
    fprintf(f, "%d kernels (each fused kernel is a cluster) */\n", (int)s->n_kernels);
  } else {
    fputs("not fused (", f);
    put_comment_text(f, why);
    fputs(") */\n", f);
  }
  fputs("digraph kiln_graph {\n  node [shape=box, fontname=\"monospace\"];\n", f);
  /* cluster of each node: the kernel that computes it, else the first
   * kernel that inlines it (a node drawn in one cluster only) */
  int32_t *cl = malloc(sizeof *cl * ((size_t)g->n_nodes + 1));
  for (int32_t i = 0; cl && i < g->n_nodes; i++) cl[i] = s ? s->owner[i] : -1;
  for (int32_t k = 0; cl && s && k < s->n_kernels; k++) {
    const kiln_plan_kernel *kn = &s->kernels[k];
    if (is_gemm(kn) && cl[kn->node] < 0) cl[kn->node] = k;
    if (kn->kind != KILN_PLAN_LOOP && kn->kind != KILN_PLAN_ROW_LOOP) continue;
    for (int32_t j = 0; j < kn->n_members; j++)
      if (cl[kn->members[j]] < 0) cl[kn->members[j]] = k;
  }
  /* nodes inlined as index expressions belong to their first consumer's
   * kernel; consumers come later in topological order, so one backward
   * sweep settles chains of inlined nodes */
  for (int32_t j = g->n_nodes - 1; cl && s && j >= 0; j--) {
    if (cl[j] < 0) continue;
    const kiln_gnode *n = &g->nodes[j];
    const int32_t *in = kiln_gnode_inputs(g, n);
    for (int k = 0; k < n->n_in; k++) {
      const kiln_gnode *x = &g->nodes[in[k]];
      if (s->owner[in[k]] >= 0 || x->op == KILN_OP_LEAF || x->op == KILN_OP_SCALAR) continue;
      if (cl[in[k]] < 0 || cl[j] < cl[in[k]]) cl[in[k]] = cl[j];
    }
  }
  for (int32_t k = -1; k < (s ? s->n_kernels : 0); k++) {
    int any = 0;
    for (int32_t i = 0; cl && i < g->n_nodes; i++) any |= cl[i] == k;
    if (k >= 0 && !any) continue;
    const char *ind = k >= 0 ? "    " : "  ";
    if (k >= 0)
      fprintf(f, "  subgraph cluster_k%d {\n    label=\"kernel %d: %s\";\n    style=rounded;\n", (int)k, (int)k,
              kernel_label(&s->kernels[k]));
    for (int32_t i = 0; i < g->n_nodes; i++) {
      if ((cl ? cl[i] : -1) != k) continue;
      const kiln_gnode *n = &g->nodes[i];
      fprintf(f, "%sn%d [label=\"%%%d %s %s[", ind, (int)i, (int)i, kiln_op_name(n->op),
              kiln_dtype_name((kiln_dtype)n->dtype));
      for (int d = 0; d < n->rank; d++) fprintf(f, d ? ",%" PRId64 : "%" PRId64, n->shape[d]);
      fputs("]\\n", f);
      put_dot_string(f, n->loc.file ? base_name(n->loc.file) : "?");
      fprintf(f, ":%d\"%s];\n", n->loc.line,
              n->op == KILN_OP_LEAF || n->op == KILN_OP_SCALAR ? ", shape=ellipse" : "");
    }
    if (k >= 0) fputs("  }\n", f);
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    const int32_t *in = kiln_gnode_inputs(g, n);
    for (int j = 0; j < n->n_in; j++) fprintf(f, "  n%d -> n%d;\n", (int)in[j], (int)i);
  }
  for (int32_t o = 0; o < g->n_outputs; o++)
    fprintf(f, "  out%d [label=\"output %d\", shape=plaintext];\n  n%d -> out%d;\n", (int)o, (int)o,
            (int)g->output_node[o], (int)o);
  fputs("}\n", f);
  free(cl);
}

static void write_c(const kiln_graph *g0, const kiln_compile_plan *plan, uint64_t key, const char *cause, FILE *f) {
  const char *why;
  const kiln_compile_plan *s = kernels_of(plan, &why);
  fprintf(f, "/* kiln graph dump (generated C), key 0x%016" PRIx64 "\n * cause: ", key);
  put_comment_text(f, cause ? cause : "(not given)");
  if (!s) {
    fputs("\n * no code: ", f);
    put_comment_text(f, why);
    fputs("\n */\n", f);
    return;
  }
  const kiln_graph *opt = s->graph;
  fprintf(f, "\n * %d nodes before the passes, %d after; %d kernels (%d loops, %d GEMM calls).\n"
             " * Each k_<hash> function computes items [begin, end) of one fused kernel;\n"
             " * GEMM kernels call the GEMM library and have no source here.\n */\n",
          (int)g0->n_nodes, (int)opt->n_nodes, (int)s->n_kernels, s->n_loop_kernels, s->n_gemm_calls);
  fputs(s->prelude ? s->prelude : "", f);
  for (int32_t k = 0; k < s->n_kernels; k++) {
    const kiln_plan_kernel *kn = &s->kernels[k];
    fprintf(f, "\n/* kernel %d: ", (int)k);
    if (kn->kind == KILN_PLAN_COPY) {
      fprintf(f, "copy %zu bytes (buffer %d -> %d) */\n", kn->bytes, (int)kn->src_buf, (int)kn->dst_buf);
      continue;
    }
    const kiln_gnode *seed = &opt->nodes[kn->node];
    fprintf(f, "%s, %s at ", kernel_label(kn), kiln_op_name(seed->op));
    put_comment_text(f, seed->loc.file ? base_name(seed->loc.file) : "?");
    fprintf(f, ":%d", seed->loc.line);
    if (is_gemm(kn) || !kn->src) {
      fputs(" (no generated source) */\n", f);
      continue;
    }
    fprintf(f, ", %" PRId64 " items */\n%s\n", kn->items, kn->src);
  }
}

kiln_status kiln_dump_write(const kiln_graph *g, const kiln_compile_plan *plan, uint64_t key, const char *cause,
                            kiln_dump_format fmt, FILE *f, kiln_err *err) {
  if (fmt == KILN_DUMP_DOT)
    write_dot(g, plan, key, cause, f);
  else if (fmt == KILN_DUMP_C)
    write_c(g, plan, key, cause, f);
  else
    kiln_graphtext_write(g, key, cause, f);
  if (fflush(f) || ferror(f)) return kiln_err_set(err, KILN_ERR_IO, "writing the graph dump failed: %s", strerror(errno));
  return KILN_OK;
}

/* Report the first problem only: a failing directory would otherwise print
 * one line per compile. Process-wide singleton, atomic. */
static atomic_int dump_reported;

static void report_once(const char *fmt, const char *a, const char *b) {
  if (atomic_exchange(&dump_reported, 1)) return;
  char what[1536];
  if (snprintf(what, sizeof what, fmt, a, b) < 0) what[0] = 0;
  kiln_log_printf(stderr, "kiln: KILN_SAVE_GRAPHS: %s (further problems with graph dumps are not reported)\n", what);
}

/* Bytes of graph dumps this process has written, against the limit
 * KILN_SAVE_GRAPHS_MAX_SIZE (default 1 GiB, 0: none): a program that
 * compiles every step would otherwise write dumps until the disk is full.
 * Process-wide, atomic; the line saying the limit was reached is printed once. */
static _Atomic int64_t dump_bytes;
static atomic_int dump_capped;

/* 1 when a dump of n more bytes stays within the limit (and counts them). */
static int dump_budget(size_t n) {
  int64_t cap = kiln_cfg_size(kiln_cfg()->save_graphs_max_size, (int64_t)1 << 30);
  int64_t before = atomic_fetch_add(&dump_bytes, (int64_t)n);
  if (cap == 0 || before + (int64_t)n <= cap) return 1;
  atomic_fetch_sub(&dump_bytes, (int64_t)n);
  if (!atomic_exchange(&dump_capped, 1))
    kiln_log_printf(stderr,
                    "kiln: KILN_SAVE_GRAPHS: the graphs saved by this process reached KILN_SAVE_GRAPHS_MAX_SIZE "
                    "(%lld bytes); later graphs are not saved\n",
                    (long long)cap);
  return 0;
}

int kiln_dump_wants_plan(void) {
  const char *dir = kiln_cfg()->save_graphs;
  kiln_dump_format fmt;
  return dir && *dir && !kiln_dump_format_parse(kiln_cfg()->save_graphs_fmt, &fmt) && fmt != KILN_DUMP_TEXT;
}

void kiln_dump_graph(const kiln_graph *g, const kiln_compile_plan *plan, uint64_t key, const char *cause, int seq,
                     const char *note) {
  const char *dir = kiln_cfg()->save_graphs;
  if (!dir || !*dir || !g) return;
  const char *fs = kiln_cfg()->save_graphs_fmt;
  kiln_dump_format fmt;
  if (kiln_dump_format_parse(fs, &fmt)) report_once("KILN_SAVE_GRAPHS_FMT=%s is not text, dot or c%s; writing text", fs, "");
  kiln_err err = {0};
  if (kiln_fs_mkdirs_private(dir, &err) != KILN_OK) {
    report_once("cannot create the directory %s: %s", dir, err.msg);
    return;
  }
  char *data = NULL;
  size_t n = 0;
  FILE *mf = open_memstream(&data, &n);
  if (!mf) {
    report_once("out of memory writing a dump into %s%s", dir, "");
    return;
  }
  kiln_status st = kiln_dump_write(g, plan, key, cause, fmt, mf, &err);
  if (st == KILN_OK && note && fmt == KILN_DUMP_TEXT) fputs(note, mf); /* comment lines: the reader skips them */
  fclose(mf);
  if (st == KILN_OK && !dump_budget(n)) {
    free(data);
    return;
  }
  if (st == KILN_OK) {
    size_t plen = strlen(dir) + 64;
    char *path = malloc(plen);
    if (!path) {
      st = kiln_err_set(&err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    } else {
      snprintf(path, plen, "%s/graph-%04d-%016" PRIx64 ".%s", dir, seq, key, kiln_dump_format_ext(fmt));
      st = kiln_fs_write_output(path, "graph dump", data, n, &err);
      free(path);
    }
  }
  if (st != KILN_OK) report_once("cannot write a graph into %s: %s", dir, err.msg);
  free(data);
}
