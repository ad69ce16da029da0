/* The public graph-file API (kiln/graphfile.h): graph dumps read with the
 * text parser (graphtext.c), compared with kiln_graph_equal and diffed
 * with graphdiff.c. `kiln graph diff` prints what these return. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "debug/graphdiff.h"
#include "debug/graphtext.h"
#include "ir/graph.h"
#include "kiln/graphfile.h"

struct kiln_graph_file {
  kiln_graphtext t;
};

struct kiln_graph_diff {
  char *text;
  char summary[256];
  int count;
};

kiln_status kiln_graph_file_create_at(const char *path, kiln_graph_file **out, kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "kiln_graph_file_create");
  if (!path) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_graph_file_create: path is NULL");
  kiln_graph_file *f = calloc(1, sizeof *f);
  if (!f) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "kiln_graph_file_create: out of memory");
  kiln_err err = {0};
  kiln_status s = kiln_graphtext_load(path, &f->t, &err);
  if (s != KILN_OK) {
    kiln_graphtext_clear(&f->t);
    free(f);
    /* The parser's message names the file and the line. */
    return kiln_error(s, loc, "kiln_graph_file_create: %s", err.msg[0] ? err.msg : kiln_status_name(s));
  }
  *out = f;
  return KILN_OK;
}

void kiln_graph_file_destroy(kiln_graph_file *f) {
  if (!f) return;
  kiln_graphtext_clear(&f->t);
  free(f);
}

uint64_t kiln_graph_file_key(const kiln_graph_file *f) { return f ? f->t.key : 0; }

int kiln_graph_file_nodes(const kiln_graph_file *f) { return f ? (int)f->t.g->n_nodes : -1; }

bool kiln_graph_file_equal(const kiln_graph_file *a, const kiln_graph_file *b) {
  return a && b && kiln_graph_equal(a->t.g, b->t.g);
}

kiln_status kiln_graph_diff_create_at(const kiln_graph_file *a, const kiln_graph_file *b, kiln_graph_diff **out,
                                      kiln_loc loc) {
  KILN_CREATE_BEGIN(out, loc, "kiln_graph_diff_create");
  if (!a || !b) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_graph_diff_create: a graph file is NULL");
  kiln_graph_diff *d = calloc(1, sizeof *d);
  if (!d) return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "kiln_graph_diff_create: out of memory");
  /* The full text: the buffer grows until it fits. */
  kiln_diff_stats st = {0};
  for (size_t cap = 1 << 16; cap <= ((size_t)1 << 30); cap *= 4) {
    char *buf = malloc(cap);
    if (!buf) break;
    buf[0] = 0;
    const kiln_diff_syms sy = {(const char *const *)a->t.sym_shape, (const char *const *)b->t.sym_shape,
                               (const char *const *)a->t.sym_def,   (const char *const *)b->t.sym_def,
                               a->t.n_sym_def,                      b->t.n_sym_def};
    kiln_graphdiff_format_syms(a->t.g, b->t.g, &sy, buf, cap, &st);
    if (strlen(buf) + 1 < cap) {
      d->text = buf;
      break;
    }
    free(buf);
  }
  if (!d->text) {
    free(d);
    return kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "kiln_graph_diff_create: out of memory");
  }
  d->count = st.total;
  /* Equal graphs may still align differently (moved source lines), and
   * unequal ones may show no node-level difference. */
  if (!st.total && !kiln_graph_equal(a->t.g, b->t.g))
    snprintf(d->summary, sizeof d->summary, "no node-level differences, but the graphs are not equal");
  else
    kiln_graphdiff_summary(&st, d->summary, sizeof d->summary);
  *out = d;
  return KILN_OK;
}

void kiln_graph_diff_destroy(kiln_graph_diff *d) {
  if (!d) return;
  free(d->text);
  free(d);
}

const char *kiln_graph_diff_text(const kiln_graph_diff *d) { return d ? d->text : NULL; }

const char *kiln_graph_diff_summary(const kiln_graph_diff *d) { return d ? d->summary : NULL; }

int kiln_graph_diff_count(const kiln_graph_diff *d) { return d ? d->count : -1; }
