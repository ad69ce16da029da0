/* The distributed summary: the captures of every rank of one job, read
 * together. Per collective, which rank arrived last and what it did while
 * the others waited (the idle-gap analysis across ranks); per rank, the
 * temporal breakdown of its steps (compute, communication, their overlap,
 * idle time by cause), as PyTorch's Holistic Trace Analysis gives for
 * Kineto traces.
 *
 * Clocks: ranks on one machine share CLOCK_MONOTONIC, so their times
 * compare as recorded; captures from different hosts are put on rank 0's
 * clock by their CLOCK_REALTIME offsets (as good as the machines' NTP). */
#include <stdlib.h>
#include <string.h>

#include "profiler/intervals.h"
#include "profiler/summary.h"

typedef kiln_ival ival;

/* Time of merged u intersected with merged v, inside [a, b). */
static double both(const ival *u, size_t nu, const ival *v, size_t nv, uint64_t a, uint64_t b) {
  double t = 0;
  for (size_t i = 0, j = 0; i < nu && j < nv;) {
    uint64_t x = u[i].b > v[j].b ? u[i].b : v[j].b, y = u[i].e < v[j].e ? u[i].e : v[j].e;
    if (x < a) x = a;
    if (y > b) y = b;
    if (y > x) t += (double)(y - x);
    if (u[i].e < v[j].e) i++;
    else j++;
  }
  return t;
}

/* One rank's events by class, on rank 0's clock, merged per class. */
typedef struct rank_view {
  const kiln_prof_capture *c;
  int64_t shift;
  ival *kern, *coll, *host, *kind[KILN_PROF_KIND_COUNT];
  size_t n_kern, n_coll, n_host, n_kind[KILN_PROF_KIND_COUNT];
  const kiln_prof_event **colls; /* unmerged, by begin */
  const kiln_prof_event **coll_step; /* the step holding each */
  size_t n_colls;
  const kiln_prof_event **steps; /* by begin */
  size_t n_steps;
} rank_view;

static int cmp_evp(const void *x, const void *y) {
  const kiln_prof_event *a = *(const kiln_prof_event *const *)x, *b = *(const kiln_prof_event *const *)y;
  return a->begin_ns < b->begin_ns ? -1 : a->begin_ns > b->begin_ns;
}

static int is_host_work(int k) { /* memory events are instants: no work */
  return k != KILN_PROF_USER && k != KILN_PROF_STEP && k != KILN_PROF_KERNEL && k != KILN_PROF_MEMORY &&
         k < KILN_PROF_KIND_COUNT;
}

/* The step of v holding time t (rank clock): the latest to begin; NULL: none. */
static const kiln_prof_event *step_of(const rank_view *v, uint64_t t) {
  const kiln_prof_event *best = NULL;
  for (size_t i = 0; i < v->n_steps && v->steps[i]->begin_ns <= t; i++)
    if (v->steps[i]->end_ns > t) best = v->steps[i];
  return best;
}

static int view_build(rank_view *v, const kiln_prof_capture *c, int64_t shift) {
  memset(v, 0, sizeof *v);
  v->c = c, v->shift = shift;
  size_t n = 0;
  for (int i = 0; i < c->n_threads; i++) n += c->threads[i].n;
  v->kern = malloc(sizeof(ival) * (n + 1)), v->coll = malloc(sizeof(ival) * (n + 1));
  v->host = malloc(sizeof(ival) * (n + 1));
  v->colls = malloc(sizeof *v->colls * (n + 1)), v->steps = malloc(sizeof *v->steps * (n + 1));
  v->coll_step = malloc(sizeof *v->coll_step * (n + 1));
  int ok = v->kern && v->coll && v->host && v->colls && v->steps && v->coll_step;
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++) ok = ok && (v->kind[k] = malloc(sizeof(ival) * (n + 1)));
  if (!ok) return -1;
  for (int i = 0; i < c->n_threads; i++)
    for (uint32_t k = 0; k < c->threads[i].n; k++) {
      const kiln_prof_event *e = &c->threads[i].ev[k];
      ival iv = {e->begin_ns + (uint64_t)shift, e->end_ns + (uint64_t)shift};
      if (e->kind == KILN_PROF_KERNEL) v->kern[v->n_kern++] = iv;
      if (e->kind == KILN_PROF_COLLECTIVE) v->coll[v->n_coll++] = iv, v->colls[v->n_colls++] = e;
      if (e->kind == KILN_PROF_STEP) v->steps[v->n_steps++] = e;
      if (is_host_work(e->kind)) v->host[v->n_host++] = iv;
      if (e->kind < KILN_PROF_KIND_COUNT) v->kind[e->kind][v->n_kind[e->kind]++] = iv;
    }
  v->n_kern = kiln_ival_merge(v->kern, v->n_kern);
  v->n_coll = kiln_ival_merge(v->coll, v->n_coll);
  v->n_host = kiln_ival_merge(v->host, v->n_host);
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++) v->n_kind[k] = kiln_ival_merge(v->kind[k], v->n_kind[k]);
  qsort(v->colls, v->n_colls, sizeof *v->colls, cmp_evp);
  qsort(v->steps, v->n_steps, sizeof *v->steps, cmp_evp);
  for (size_t i = 0; i < v->n_colls; i++) v->coll_step[i] = step_of(v, v->colls[i]->begin_ns);
  return 0;
}

static void view_free(rank_view *v) {
  free(v->kern), free(v->coll), free(v->host), free(v->colls), free(v->steps), free(v->coll_step);
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++) free(v->kind[k]);
}

/* The temporal breakdown of the rank's whole steps. */
static void breakdown(const rank_view *v, kiln_prof_rank_stats *r) {
  const kiln_prof_capture *c = v->c;
  for (size_t i = 0; i < v->n_steps; i++) {
    const kiln_prof_event *s = v->steps[i];
    if (s->begin_ns <= c->start_ns || s->end_ns >= c->end_ns) continue; /* cut by the capture */
    uint64_t a = s->begin_ns + (uint64_t)v->shift, b = s->end_ns + (uint64_t)v->shift;
    double comp = kiln_ival_within(v->kern, v->n_kern, a, b), comm = kiln_ival_within(v->coll, v->n_coll, a, b);
    double ov = both(v->kern, v->n_kern, v->coll, v->n_coll, a, b);
    double idle = (double)(b - a) - (comp + comm - ov);
    r->n_steps++;
    r->wall_ns += (double)(b - a);
    r->compute_ns += comp, r->comm_ns += comm, r->overlap_ns += ov, r->idle_ns += idle > 0 ? idle : 0;
    /* idle time by cause: host work outside kernels and collectives */
    double covered = 0;
    for (int k = 0; k < KILN_PROF_KIND_COUNT; k++) {
      if (!is_host_work(k) || k == KILN_PROF_COLLECTIVE) continue;
      double t = kiln_ival_within(v->kind[k], v->n_kind[k], a, b) - both(v->kind[k], v->n_kind[k], v->kern, v->n_kern, a, b) -
                 both(v->kind[k], v->n_kind[k], v->coll, v->n_coll, a, b);
      r->idle_kind_ns[k] += t > 0 ? t : 0;
    }
    covered = kiln_ival_within(v->host, v->n_host, a, b) - both(v->host, v->n_host, v->kern, v->n_kern, a, b) -
              both(v->host, v->n_host, v->coll, v->n_coll, a, b);
    double u = (idle > 0 ? idle : 0) - (covered > 0 ? covered : 0);
    r->idle_user_ns += u > 0 ? u : 0;
  }
}

static const kiln_prof_event *find_step(const rank_view *v, const kiln_prof_event *s0) {
  for (size_t i = 0; i < v->n_steps; i++)
    if (v->steps[i]->arg == s0->arg && !strcmp(v->steps[i]->name, s0->name)) return v->steps[i];
  return NULL;
}

/* The collectives of v inside step s (rank clock), into out; their count. */
static size_t step_colls(const rank_view *v, const kiln_prof_event *s, const kiln_prof_event **out) {
  size_t n = 0;
  for (size_t i = 0; i < v->n_colls; i++)
    if (v->coll_step[i] == s) out[n++] = v->colls[i];
  return n;
}

/* What the late rank did between the first arrival and its own. */
static void describe_late(const rank_view *v, kiln_prof_coll_match *m) {
  uint64_t a = m->first_ns, b = m->last_ns;
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++)
    if (is_host_work(k)) m->kind_ns[k] = kiln_ival_within(v->kind[k], v->n_kind[k], a, b);
  m->compute_ns = kiln_ival_within(v->kern, v->n_kern, a, b);
  double cov = m->compute_ns + kiln_ival_within(v->host, v->n_host, a, b) - both(v->kern, v->n_kern, v->host, v->n_host, a, b);
  m->user_ns = (double)(b - a) - cov > 0 ? (double)(b - a) - cov : 0;
  uint64_t mid = a + (b - a) / 2 - (uint64_t)v->shift;
  int depth = -1;
  for (int i = 0; i < v->c->n_threads; i++)
    for (uint32_t k = 0; k < v->c->threads[i].n; k++) {
      const kiln_prof_event *e = &v->c->threads[i].ev[k];
      if (e->kind == KILN_PROF_USER && e->begin_ns <= mid && e->end_ns > mid && (int)e->depth > depth)
        depth = e->depth, m->region = e->name;
    }
}

static int match_step(rank_view *vs, int n, const kiln_prof_event *s0, const kiln_prof_event ***lists,
                      kiln_prof_dist_analysis *out, size_t *cap) {
  size_t cnt = 0;
  for (int r = 0; r < n; r++) {
    const kiln_prof_event *s = r ? find_step(&vs[r], s0) : s0;
    size_t k = s ? step_colls(&vs[r], s, lists[r]) : (size_t)-1;
    if (!s || (r && k != cnt)) return 1; /* unmatched */
    cnt = k;
  }
  for (size_t j = 0; j < cnt; j++) {
    if ((size_t)out->n_colls == *cap) {
      size_t nc = *cap ? *cap * 2 : 64;
      kiln_prof_coll_match *v = realloc(out->colls, nc * sizeof *v);
      if (!v) return -1;
      out->colls = v, *cap = nc;
    }
    kiln_prof_coll_match *m = &out->colls[out->n_colls++];
    memset(m, 0, sizeof *m);
    m->step = s0->arg, m->index = (int)j, m->name = lists[0][j]->name, m->bytes = lists[0][j]->arg;
    m->first_ns = UINT64_MAX;
    for (int r = 0; r < n; r++) {
      uint64_t t = lists[r][j]->begin_ns + (uint64_t)vs[r].shift;
      if (t < m->first_ns) m->first_ns = t, m->first_rank = r;
      if (t >= m->last_ns) m->last_ns = t, m->late_rank = r;
    }
    for (int r = 0; r < n; r++) out->ranks[r].wait_ns += (double)(m->last_ns - (lists[r][j]->begin_ns + (uint64_t)vs[r].shift));
    out->ranks[m->late_rank].n_late += m->last_ns > m->first_ns;
    out->ranks[m->late_rank].late_ns += (double)(m->last_ns - m->first_ns);
    describe_late(&vs[m->late_rank], m);
  }
  return 0;
}

static int cmp_late(const void *x, const void *y) {
  const kiln_prof_coll_match *a = x, *b = y;
  uint64_t wa = a->last_ns - a->first_ns, wb = b->last_ns - b->first_ns;
  return wa > wb ? -1 : wa < wb;
}

static void clock_shifts(const kiln_prof_capture *caps, int n, kiln_prof_dist_analysis *out) {
  int same_host = 1, offsets = 1;
  for (int r = 0; r < n; r++) {
    same_host &= !strcmp(caps[r].host, caps[0].host);
    offsets &= caps[r].realtime_offset_ns != 0;
  }
  out->realtime_aligned = !same_host && offsets;
  for (int r = 0; r < n; r++)
    out->shift_ns[r] = out->realtime_aligned ? caps[r].realtime_offset_ns - caps[0].realtime_offset_ns : 0;
}

kiln_status kiln_prof_dist_analyze(const kiln_prof_capture *caps, int n, kiln_prof_dist_analysis *out,
                                   kiln_err *err) {
  memset(out, 0, sizeof *out);
  rank_view *vs = calloc((size_t)n, sizeof *vs);
  const kiln_prof_event ***lists = calloc((size_t)n, sizeof *lists);
  out->ranks = calloc((size_t)n, sizeof *out->ranks);
  out->shift_ns = calloc((size_t)n, sizeof *out->shift_ns);
  int bad = !vs || !lists || !out->ranks || !out->shift_ns;
  out->n_ranks = n;
  if (!bad) clock_shifts(caps, n, out);
  for (int r = 0; r < n && !bad; r++) {
    bad = view_build(&vs[r], &caps[r], out->shift_ns[r]) != 0;
    lists[r] = bad ? NULL : malloc(sizeof **lists * (vs[r].n_colls + 1));
    bad = bad || !lists[r];
    if (bad) break;
    out->ranks[r].rank = caps[r].rank, out->ranks[r].host = caps[r].host;
    breakdown(&vs[r], &out->ranks[r]);
  }
  size_t cap = 0;
  for (size_t i = 0; !bad && i < vs[0].n_steps; i++) {
    int m = match_step(vs, n, vs[0].steps[i], lists, out, &cap);
    if (m < 0) bad = 1;
    out->n_steps_unmatched += m > 0;
  }
  if (!bad && out->n_colls) qsort(out->colls, (size_t)out->n_colls, sizeof *out->colls, cmp_late);
  for (int r = 0; vs && lists && r < n; r++) view_free(&vs[r]), free(lists[r]);
  free(vs), free(lists);
  if (bad) {
    kiln_prof_dist_analysis_free(out);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profile summary: out of memory analyzing %d ranks", n);
  }
  return KILN_OK;
}

void kiln_prof_dist_analysis_free(kiln_prof_dist_analysis *a) {
  if (!a) return;
  free(a->ranks), free(a->colls), free(a->shift_ns);
  memset(a, 0, sizeof *a);
}

static double pct(double x, double of) { return of > 0 ? 100.0 * x / of : 0; }

static void print_ranks(const kiln_prof_dist_analysis *a, FILE *f) {
  fprintf(f,
          "per rank, over its whole steps (compute: a kernel lane busy; communication: a collective in flight;\n"
          "overlap: both, communication hidden behind computation; idle: neither; wait: time in collectives\n"
          "before the last rank arrived):\n");
  fprintf(f, "  rank  steps    wall ms  compute      comm   overlap      idle   wait ms  last at\n");
  for (int r = 0; r < a->n_ranks; r++) {
    const kiln_prof_rank_stats *s = &a->ranks[r];
    fprintf(f, "  %4d  %5d  %9.3f  %6.1f%%  %7.1f%%  %7.1f%%  %7.1f%%  %8.3f  %d collective(s), %.3f ms late\n", s->rank,
            s->n_steps, s->wall_ns / 1e6, pct(s->compute_ns, s->wall_ns), pct(s->comm_ns, s->wall_ns),
            pct(s->overlap_ns, s->comm_ns), pct(s->idle_ns, s->wall_ns), s->wait_ns / 1e6, s->n_late, s->late_ns / 1e6);
  }
  for (int r = 0; r < a->n_ranks; r++) {
    const kiln_prof_rank_stats *s = &a->ranks[r];
    if (!(s->idle_ns > 0)) continue;
    fprintf(f, "  rank %d idle %.3f ms:", s->rank, s->idle_ns / 1e6);
    for (int k = 0; k < KILN_PROF_KIND_COUNT; k++)
      if (s->idle_kind_ns[k] > 0) fprintf(f, " %s %.3f ms,", kiln_prof_kind_name((kiln_prof_kind)k), s->idle_kind_ns[k] / 1e6);
    fprintf(f, " user code or idle %.3f ms\n", s->idle_user_ns / 1e6);
  }
}

static void print_late(const kiln_prof_coll_match *m, FILE *f) {
  fprintf(f, "  step %lld collective %d: rank %d arrived %.3f ms after rank %d at %s", (long long)m->step, m->index,
          m->late_rank, (double)(m->last_ns - m->first_ns) / 1e6, m->first_rank, m->name ? m->name : "(unnamed)");
  if (m->bytes >= 0) fprintf(f, " (%lld bytes)", (long long)m->bytes);
  fprintf(f, "\n    meanwhile rank %d%s%s%s:", m->late_rank, m->region ? " (in \"" : "", m->region ? m->region : "",
          m->region ? "\")" : "");
  if (m->compute_ns > 0) fprintf(f, " kernels %.3f ms,", m->compute_ns / 1e6);
  for (int k = 0; k < KILN_PROF_KIND_COUNT; k++)
    if (m->kind_ns[k] > 0) fprintf(f, " %s %.3f ms,", kiln_prof_kind_name((kiln_prof_kind)k), m->kind_ns[k] / 1e6);
  fprintf(f, " user code or idle %.3f ms\n", m->user_ns / 1e6);
}

void kiln_prof_dist_print(const kiln_prof_dist_analysis *a, int top, int per_step, FILE *f) {
  fprintf(f, "distributed capture: %d rank(s)%s\n\n", a->n_ranks,
          a->realtime_aligned ? ", on several hosts: clocks aligned by each capture's CLOCK_REALTIME offset"
                              : ", one clock (CLOCK_MONOTONIC of one host)");
  print_ranks(a, f);
  int late = 0, worst = -1;
  double worst_ns = 0;
  for (int r = 0; r < a->n_ranks; r++)
    if (a->ranks[r].late_ns > worst_ns) worst_ns = a->ranks[r].late_ns, worst = r;
  for (int i = 0; i < a->n_colls; i++) late += a->colls[i].last_ns > a->colls[i].first_ns;
  fprintf(f, "\nstragglers: %d collective(s) matched across the ranks", a->n_colls);
  if (a->n_steps_unmatched) fprintf(f, " (%d step(s) of rank 0 not matched on every rank)", a->n_steps_unmatched);
  if (worst >= 0)
    fprintf(f, "; the straggler is rank %d, last at %d of them, %.3f ms behind in all\n", a->ranks[worst].rank,
            a->ranks[worst].n_late, worst_ns / 1e6);
  else
    fprintf(f, "; no rank arrived late\n");
  int shown = per_step ? a->n_colls : (top < a->n_colls ? top : a->n_colls);
  for (int i = 0; i < shown && i < late; i++) print_late(&a->colls[i], f);
  if (shown < late) fprintf(f, "  (%d more: --steps lists every one)\n", late - shown);
}
