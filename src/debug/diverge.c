/* The rank-divergence check (diverge.h). */
#include "debug/diverge.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/counters.h"
#include "base/text.h"
#include "debug/graphdiff.h"
#include "debug/graphtext.h"
#include "ir/graph.h"
#include "ir/op.h"
#include "runtime/events.h"

static kiln_diverge_comm g_comm; /* set once by kiln_diverge_attach */

/* This rank's graph in the text form (malloc'd, *n bytes; NULL and 0 when
 * out of memory: the others then see an empty graph). */
static char *graph_text(const kiln_event *ev, size_t *n) {
  char *buf = NULL, cs[256];
  *n = 0;
  FILE *f = open_memstream(&buf, n);
  if (!f) return NULL;
  int rc = kiln_graphtext_write(ev->graph, ev->key, kiln_cut_cause_str(ev->cause, cs, sizeof cs), f);
  if (fclose(f) != 0 || rc != 0) {
    free(buf);
    *n = 0;
    return NULL;
  }
  return buf;
}

/* Every rank's graph text: all[r * stride ..], len[r] bytes (len and ok:
 * world entries each). 0, or -1 with err. Every rank makes the same
 * exchanges whatever fails locally (a rank that skipped one would leave the
 * others waiting): the sizes, then whether every rank could allocate the
 * buffers (ok), then (only if all could) the texts. */
static int gather_graphs(const kiln_event *ev, int world, char **all, uint64_t *len, uint64_t *ok, size_t *stride,
                         kiln_err *err) {
  size_t n = 0;
  char *mine = graph_text(ev, &n), *pad = NULL;
  uint64_t n64 = n, max = 0;
  int rc = -1;
  *all = NULL;
  if (g_comm.gather("rank divergence check (graph sizes)", &n64, 8, len, err) != KILN_OK) goto out;
  for (int r = 0; r < world; r++) max = len[r] > max ? len[r] : max;
  pad = calloc(1, max ? max : 1);
  *all = malloc((size_t)max * (size_t)world + 1);
  uint64_t mine_ok = pad && *all;
  if (g_comm.gather("rank divergence check (memory)", &mine_ok, 8, ok, err) != KILN_OK) goto out;
  for (int r = 0; r < world; r++)
    if (!ok[r]) {
      kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY,
                   "rank divergence check: rank %d is out of memory for %d graphs of up to %" PRIu64 " bytes", r,
                   world, max);
      goto out;
    }
  if (mine) memcpy(pad, mine, n);
  if (g_comm.gather("rank divergence check (graphs)", pad, max, *all, err) != KILN_OK) goto out;
  *stride = max;
  rc = 0;
out:
  free(mine);
  free(pad);
  if (rc) {
    free(*all);
    *all = NULL;
  }
  return rc;
}

/* "rank r's graph ... differs from rank 0's" with the diff lines, into t. */
static void describe_diff(kiln_text *t, const char *all, const uint64_t *len, size_t stride, int r) {
  kiln_graphtext a = {0}, b = {0};
  kiln_err e = {0};
  if (kiln_graphtext_parse(all, len[0], "rank 0", &a, &e) != KILN_OK ||
      kiln_graphtext_parse(all + (size_t)r * stride, len[r], "rank", &b, &e) != KILN_OK) {
    kiln_text_printf(t, "; rank %d's graph could not be compared: %s", r, e.msg);
  } else {
    char lines[640] = "", sum[160];
    kiln_diff_stats st = {0};
    kiln_graphdiff_format_stats(a.g, b.g, lines, sizeof lines, &st);
    kiln_text_printf(t, "; rank %d's graph against rank 0's: %s:\n%s", r, kiln_graphdiff_summary(&st, sum, sizeof sum),
                     lines);
  }
  kiln_graphtext_clear(&a);
  kiln_graphtext_clear(&b);
}

/* The error every rank reports: the ranks and their keys, grouped, then
 * the diffs of the first few groups against rank 0's graph. */
static void divergence_error(const kiln_event *ev, int world, const uint64_t *keys, uint64_t *scratch,
                             kiln_err *verdict) {
  char *all = NULL;
  uint64_t *len = scratch, *oks = scratch + world;
  size_t stride = 0;
  int ok = gather_graphs(ev, world, &all, len, oks, &stride, verdict) == 0;
  kiln_text t = {0};
  kiln_text_printf(&t, "rank divergence: the ranks traced different graphs before a collective (");
  int shown = 0;
  for (int r = 0; r < world; r++) {
    int first = 1; /* list each distinct key once, with its ranks */
    for (int q = 0; q < r; q++) first &= keys[q] != keys[r];
    if (!first) continue;
    int many = 0;
    for (int q = r + 1; q < world; q++) many |= keys[q] == keys[r];
    kiln_text_printf(&t, "%sgraph %016" PRIx64 " on rank%s %d", r ? "; " : "", keys[r], many ? "s" : "", r);
    for (int q = r + 1; q < world; q++)
      if (keys[q] == keys[r]) kiln_text_printf(&t, ",%d", q);
  }
  kiln_text_printf(&t, ")");
  for (int r = 1; ok && r < world && shown < 3; r++) {
    int first = keys[r] != keys[0];
    for (int q = 1; q < r; q++) first &= keys[q] != keys[r];
    if (!first) continue;
    describe_diff(&t, all, len, stride, r);
    shown++;
  }
  const char *sofar = kiln_text_str(&t);
  kiln_text_printf(&t, "%severy rank must trace the same collectives in the same order; the step is refused on every "
                       "rank instead of waiting forever",
                   sofar[0] && sofar[strlen(sofar) - 1] == '\n' ? "" : ". ");
  if (ok) kiln_err_set(verdict, KILN_ERR_INVALID_ARGUMENT, "%s", kiln_text_str(&t));
  else kiln_err_context(verdict, "%s", kiln_text_str(&t));
  kiln_text_free(&t);
  free(all);
}

/* What the ranks compare: the graph's structure (ops, dtypes, shapes, the
 * wiring, inputs and outputs) and every attribute of its collectives, but
 * not the values other nodes carry: a constant that differs by rank
 * (x * rank) or a slice at this rank's offset (the gradient of an
 * all_gather) make graphs whose collectives still match. Anything else
 * that differs is a divergence. */
static uint64_t agreement_key(const kiln_graph *g) {
  kiln_graph *c = kiln_graph_clone(g);
  if (!c) return kiln_graph_hash(g); /* out of memory: every value counts */
  for (int32_t i = 0; i < c->n_nodes; i++) {
    kiln_gnode *n = &c->nodes[i];
    if (n->op < KILN_OP_COUNT && kiln_op_table[n->op].kind == KILN_KIND_COLLECTIVE) continue;
    n->fattr = 0;
    if (n->op != KILN_OP_LEAF && n->op != KILN_OP_SCALAR) memset(n->iattr, 0, sizeof n->iattr);
  }
  uint64_t h = kiln_graph_hash(c);
  kiln_graph_free(c);
  return h;
}

static void on_first_run(const kiln_event *ev) {
  int rank = 0, world = g_comm.world(&rank);
  if (world <= 1) return;
  /* keys, then the sizes and answers of the graph exchange. (Failing to
   * allocate these few bytes is the one failure that leaves the other
   * ranks waiting: every later one is exchanged.) */
  uint64_t *keys = calloc((size_t)world * 3, sizeof *keys), key = agreement_key(ev->graph);
  if (!keys) {
    kiln_err_set(ev->verdict, KILN_ERR_OUT_OF_MEMORY, "rank divergence check: out of memory");
    return;
  }
  kiln_counter_add("RankAgreementCheck", 1);
  if (g_comm.gather("rank divergence check (graph keys)", &key, 8, keys, ev->verdict) == KILN_OK) {
    int same = 1;
    for (int r = 1; r < world; r++) same &= keys[r] == keys[0];
    if (!same) divergence_error(ev, world, keys, keys + world, ev->verdict);
  }
  free(keys);
}

static void on_event(void *ctx, const kiln_event *ev) {
  (void)ctx;
  if (ev->kind == KILN_EV_FIRST_RUN && ev->verdict && ev->verdict->code == KILN_OK) on_first_run(ev);
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void attach_once(void) { kiln_events_observe(on_event, NULL); }

void kiln_diverge_attach(const kiln_diverge_comm *comm) {
  if (!comm || !comm->world || !comm->gather) return;
  if (!g_comm.world) g_comm = *comm;
  pthread_once(&g_once, attach_once);
}
