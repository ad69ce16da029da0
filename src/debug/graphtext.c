/* Text form of a kiln_graph: writer and parser (see graphtext.h).
 *
 * The parser treats its input as hostile (a dump may be edited by hand or
 * truncated): every index is range-checked before use, every count is
 * bounded by the input size or by KILN_GRAPHTEXT_MAX_NODES, and the finished
 * graph must pass kiln_graph_verify before anyone else sees it.
 */
#define _GNU_SOURCE
#include "debug/graphtext.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/text.h"

/* ───────────── attribute schema ─────────────
 * Named attributes per op. An int field fills iattr[slot]; a list field
 * fills iattr[slot*rank .. slot*rank+rank); a mask field is iattr[0] as a
 * bitmask printed as the list of its set bits. A node whose iattr count does
 * not match its schema (or holds a value a field cannot show) is written
 * with the raw `iattr=[...]` form instead, so writing never loses data. */
typedef enum { FK_INT, FK_LIST, FK_MASK, FK_DIST } field_kind;
typedef struct field {
  const char *name;
  field_kind kind;
  int slot;
} field;
typedef struct schema {
  int n_fields;
  field f[2];
  int has_value; /* fattr is shown as value= */
} schema;

static schema schema_of(int op) {
  schema s = {0, {{0}}, 0};
  switch (op) {
    case KILN_OP_LEAF: s = (schema){1, {{"input", FK_INT, 0}}, 0}; break;
    case KILN_OP_SCALAR: s = (schema){1, {{"input", FK_INT, 0}}, 1}; break;
    case KILN_OP_CONST: s.has_value = 1; break;
    case KILN_OP_RANDOM: s = (schema){1, {{"dist", FK_DIST, 0}}, 0}; break;
    case KILN_OP_REDUCE_SUM:
    case KILN_OP_REDUCE_MAX:
    case KILN_OP_REDUCE_MIN:
    case KILN_OP_REDUCE_PROD: s = (schema){1, {{"axes", FK_MASK, 0}}, 0}; break;
    case KILN_OP_IOTA:
    case KILN_OP_ARGMAX:
    case KILN_OP_CUMSUM:
    case KILN_OP_CUMPROD:
    case KILN_OP_CONCAT:
    case KILN_OP_INDEX_SELECT:
    case KILN_OP_GATHER:
    case KILN_OP_SCATTER:
    case KILN_OP_SCATTER_ADD: s = (schema){1, {{"axis", FK_INT, 0}}, 0}; break;
    case KILN_OP_ARGSORT: s = (schema){2, {{"axis", FK_INT, 0}, {"descending", FK_INT, 1}}, 0}; break;
    case KILN_OP_PERMUTE: s = (schema){1, {{"perm", FK_LIST, 0}}, 0}; break;
    case KILN_OP_SLICE: s = (schema){2, {{"start", FK_LIST, 0}, {"step", FK_LIST, 1}}, 0}; break;
    case KILN_OP_PAD: s = (schema){2, {{"lo", FK_LIST, 0}, {"hi", FK_LIST, 1}}, 1}; break;
    default: break;
  }
  return s;
}

static int schema_n_iattr(const schema *s, int rank) {
  int n = 0;
  for (int i = 0; i < s->n_fields; i++) n += s->f[i].kind == FK_LIST ? rank : 1;
  return n;
}

/* 1 if node n is shown exactly by its named fields. */
static int schema_fits(const schema *s, const kiln_gnode *n) {
  if (n->rank > KILN_MAX_RANK || n->n_iattr != schema_n_iattr(s, n->rank)) return 0;
  for (int i = 0; i < s->n_fields; i++)
    if (s->f[i].kind == FK_DIST && n->iattr[0] != 0 && n->iattr[0] != 1) return 0;
  return 1;
}

static void text_list(kiln_text *b, const char *name, const int64_t *v, int n) {
  kiln_text_printf(b, " %s=[", name);
  for (int k = 0; k < n; k++) kiln_text_printf(b, k ? ",%" PRId64 : "%" PRId64, v[k]);
  kiln_text_printf(b, "]");
}

/* %.17g round-trips every finite double; a NaN payload or -nan does not, so
 * the exact bits follow when the short form would lose them. */
static void text_double(kiln_text *b, const char *name, double v) {
  char tmp[40];
  snprintf(tmp, sizeof tmp, "%.17g", v);
  kiln_text_printf(b, " %s=%s", name, tmp);
  double back = strtod(tmp, NULL);
  if (memcmp(&back, &v, sizeof v)) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    kiln_text_printf(b, " fbits=0x%016" PRIx64, bits);
  }
}

int kiln_graphtext_format_attrs(const kiln_gnode *n, char *buf, size_t cap) {
  kiln_text b = kiln_text_on(buf, cap);
  schema s = schema_of(n->op);
  const int r = n->rank <= KILN_MAX_RANK ? n->rank : KILN_MAX_RANK;
  const int ni = n->n_iattr >= 0 && n->n_iattr <= KILN_MAX_IATTR ? n->n_iattr : 0;
  if (schema_fits(&s, n)) {
    for (int i = 0; i < s.n_fields; i++) {
      const field *f = &s.f[i];
      if (f->kind == FK_INT) kiln_text_printf(&b, " %s=%" PRId64, f->name, n->iattr[f->slot]);
      if (f->kind == FK_DIST) kiln_text_printf(&b, " %s=%s", f->name, n->iattr[0] ? "normal" : "uniform");
      if (f->kind == FK_LIST) text_list(&b, f->name, n->iattr + f->slot * r, r);
      if (f->kind == FK_MASK) {
        int64_t bits[64];
        int nb = 0;
        for (int d = 0; d < 64; d++)
          if (((uint64_t)n->iattr[0] >> d) & 1) bits[nb++] = d;
        text_list(&b, f->name, bits, nb);
      }
    }
  } else if (ni) {
    text_list(&b, "iattr", n->iattr, ni);
  }
  uint64_t fb;
  memcpy(&fb, &n->fattr, sizeof fb);
  if (s.has_value)
    text_double(&b, "value", n->fattr);
  else if (fb)
    text_double(&b, "f", n->fattr);
  return (int)b.len;
}

/* Source file names are written as given, with bytes that would break the
 * line (controls, DEL, backslash) as \xHH. */
static void write_file_name(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c == 0x7f || c == '\\')
      fprintf(f, "\\x%02x", c);
    else
      fputc(c, f);
  }
}

int kiln_graphtext_write(const kiln_graph *g, uint64_t key, const char *cause, FILE *f) {
  fprintf(f, "# kiln graph dump, text format v1 (docs/graphs.md)\n");
  fprintf(f, "key 0x%016" PRIx64 "\n", key);
  if (cause) {
    fputs("cause ", f);
    for (const char *c = cause; *c; c++) fputc(*c == '\n' || *c == '\r' ? ' ' : *c, f);
    fputc('\n', f);
  }
  fprintf(f, "graph 0x%016" PRIx64 ": %d nodes, %d inputs, %d outputs\n", kiln_graph_hash(g), (int)g->n_nodes,
          (int)g->n_inputs, (int)g->n_outputs);
  char attrs[1024];
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const kiln_gnode *n = &g->nodes[i];
    fprintf(f, "%%%d = %s %s[", (int)i, kiln_op_name(n->op), kiln_dtype_name((kiln_dtype)n->dtype));
    for (int d = 0; d < n->rank && d < KILN_MAX_RANK; d++) fprintf(f, d ? ",%" PRId64 : "%" PRId64, n->shape[d]);
    fputc(']', f);
    const int32_t *in = kiln_gnode_inputs(g, n);
    for (int k = 0; k < n->n_in; k++) fprintf(f, k ? ", %%%d" : " %%%d", (int)in[k]);
    kiln_graphtext_format_attrs(n, attrs, sizeof attrs);
    fputs(attrs, f);
    if (n->loc.file) {
      fputs(" @ ", f);
      write_file_name(f, n->loc.file);
      fprintf(f, ":%d", n->loc.line);
    }
    fputc('\n', f);
  }
  fputs("inputs:", f);
  for (int32_t k = 0; k < g->n_inputs; k++) fprintf(f, " %%%d", (int)g->input_node[k]);
  fputs("\noutputs:", f);
  for (int32_t o = 0; o < g->n_outputs; o++) {
    fprintf(f, o ? ", %%%d" : " %%%d", (int)g->output_node[o]);
    if (g->output_alias[o] >= 0) fprintf(f, " (aliases input #%d)", (int)g->output_alias[o]);
  }
  fputc('\n', f);
  fflush(f);
  return ferror(f) ? -1 : 0;
}

/* ───────────── parser ───────────── */

typedef struct parser {
  const char *name;
  int line;
  kiln_err *err;
  /* growing arrays, bounded by the input size */
  kiln_gnode *nodes;
  int32_t n_nodes, cap_nodes;
  int32_t *edges;
  int32_t n_edges, cap_edges;
  int32_t *inputs, n_inputs, cap_inputs;
  int32_t *outputs, *aliases, n_outputs, cap_outputs;
  int seen_inputs, seen_outputs;
  kiln_graphtext *out;
  /* "# dynamic:" lines: node -> its sizes (grown with the nodes), symbol defs */
  char **sym_shape;
  int32_t cap_sym_shape;
} parser;

__attribute__((format(printf, 2, 3))) static kiln_status perr(parser *p, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return kiln_err_set(p->err, KILN_ERR_CORRUPT, "%s:%d: %s", p->name, p->line, msg);
}

/* Grow *arr (elements of size sz) to hold n+1; 0 or -1 on OOM. */
static int grow(void **arr, int32_t n, int32_t *cap, size_t sz) {
  if (n < *cap) return 0;
  int32_t nc = *cap ? *cap * 2 : 16;
  void *v = realloc(*arr, sz * (size_t)nc);
  if (!v) return -1;
  *arr = v;
  *cap = nc;
  return 0;
}

static kiln_status oom(parser *p) { return kiln_err_set(p->err, KILN_ERR_OUT_OF_MEMORY, "%s: out of memory", p->name); }

static const char *skip_ws(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

/* Parse a decimal int64 at *s; 0 on success (advances *s). */
static int parse_i64(const char **s, int64_t *v) {
  const char *c = *s;
  if (!(*c == '-' || (*c >= '0' && *c <= '9'))) return -1;
  char *end;
  errno = 0;
  long long x = strtoll(c, &end, 10);
  if (errno || end == c) return -1;
  *v = x;
  *s = end;
  return 0;
}

/* Parse "%N" with 0 <= N < limit. */
static int parse_ref(const char **s, int32_t limit, int32_t *v) {
  if (**s != '%') return -1;
  (*s)++;
  int64_t x;
  if (parse_i64(s, &x) || x < 0 || x >= limit) return -1;
  *v = (int32_t)x;
  return 0;
}

/* Parse "[a,b,...]" into v (at most max entries). Returns the count or -1. */
static int parse_list(const char **s, int64_t *v, int max) {
  const char *c = *s;
  if (*c++ != '[') return -1;
  int n = 0;
  if (*c == ']') {
    *s = c + 1;
    return 0;
  }
  for (;;) {
    if (n >= max || parse_i64(&c, &v[n])) return -1;
    n++;
    if (*c == ']') break;
    if (*c++ != ',') return -1;
  }
  *s = c + 1;
  return n;
}

static int end_of_token(const char *c) { return *c == 0 || *c == ' ' || *c == '\t'; }

/* The location after " @ ": FILE:LINE where FILE uses \xHH escapes. */
static kiln_status parse_loc(parser *p, const char *s, kiln_gnode *n) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s) return perr(p, "expected FILE:LINE after '@'");
  const char *c = colon + 1;
  int64_t line;
  if (parse_i64(&c, &line) || *skip_ws(c) || line < 0 || line > INT32_MAX) return perr(p, "bad line number after '@'");
  size_t flen = (size_t)(colon - s);
  char *file = malloc(flen + 1);
  if (!file) return oom(p);
  size_t k = 0;
  for (const char *q = s; q < colon; q++) {
    if (*q == '\\') {
      unsigned v = 0;
      if (colon - q < 4 || q[1] != 'x' || !isxdigit((unsigned char)q[2]) || !isxdigit((unsigned char)q[3]) ||
          sscanf(q + 2, "%2x", &v) != 1 || !v) {
        free(file);
        return perr(p, "bad escape in file name (expected \\xHH)");
      }
      file[k++] = (char)v;
      q += 3;
    } else {
      file[k++] = *q;
    }
  }
  file[k] = 0;
  kiln_graphtext *t = p->out;
  /* consecutive nodes usually share a file: reuse the last string */
  if (t->n_files && !strcmp(t->files[t->n_files - 1], file)) {
    free(file);
  } else {
    char **v = realloc(t->files, sizeof *v * ((size_t)t->n_files + 1));
    if (!v) {
      free(file);
      return oom(p);
    }
    t->files = v;
    t->files[t->n_files++] = file;
  }
  n->loc.file = t->files[t->n_files - 1];
  n->loc.line = (int)line;
  return KILN_OK;
}

static int lookup_op(const char *s, size_t len) {
  for (int op = 0; op < KILN_OP_COUNT; op++)
    if (strlen(kiln_op_table[op].name) == len && !strncmp(kiln_op_table[op].name, s, len)) return op;
  return -1;
}

static int lookup_dtype(const char *s, size_t len) {
  for (int dt = 0; dt < KILN_DTYPE_COUNT; dt++) {
    const char *nm = kiln_dtype_name((kiln_dtype)dt);
    if (strlen(nm) == len && !strncmp(nm, s, len)) return dt;
  }
  return -1;
}

/* One attribute "name=value" at *s into node n (schema s). */
static kiln_status parse_attr(parser *p, const char **sp, kiln_gnode *n, const schema *sc, int *named, int *raw) {
  const char *s = *sp, *eq = s;
  while (*eq && *eq != '=' && !end_of_token(eq)) eq++;
  if (*eq != '=') return perr(p, "expected name=value, got '%.*s'", (int)(eq - s), s);
  size_t nl = (size_t)(eq - s);
  const char *v = eq + 1;
  int64_t list[64];
  if (nl == 5 && !strncmp(s, "iattr", 5)) {
    int k = parse_list(&v, list, KILN_MAX_IATTR);
    if (k < 0) return perr(p, "bad iattr list (at most %d integers)", KILN_MAX_IATTR);
    memcpy(n->iattr, list, sizeof list[0] * (size_t)k);
    n->n_iattr = k;
    *raw = 1;
  } else if ((nl == 5 && !strncmp(s, "value", 5)) || (nl == 1 && *s == 'f')) {
    char *end;
    n->fattr = strtod(v, &end);
    if (end == v) return perr(p, "bad number for '%.*s'", (int)nl, s);
    v = end;
  } else if (nl == 5 && !strncmp(s, "fbits", 5)) {
    char *end;
    errno = 0;
    unsigned long long bits = strtoull(v, &end, 16);
    if (end == v || errno) return perr(p, "bad fbits");
    uint64_t b64 = bits;
    memcpy(&n->fattr, &b64, sizeof b64);
    v = end;
  } else {
    const field *f = NULL;
    for (int i = 0; i < sc->n_fields; i++)
      if (strlen(sc->f[i].name) == nl && !strncmp(sc->f[i].name, s, nl)) f = &sc->f[i];
    if (!f) return perr(p, "unknown attribute '%.*s' for %s", (int)nl, s, kiln_op_name(n->op));
    int r = n->rank;
    if (f->kind == FK_INT) {
      if (parse_i64(&v, &n->iattr[f->slot])) return perr(p, "bad integer for '%s'", f->name);
    } else if (f->kind == FK_DIST) {
      if (!strncmp(v, "uniform", 7)) n->iattr[0] = 0, v += 7;
      else if (!strncmp(v, "normal", 6)) n->iattr[0] = 1, v += 6;
      else return perr(p, "dist must be uniform or normal");
    } else if (f->kind == FK_MASK) {
      int k = parse_list(&v, list, 64);
      if (k < 0) return perr(p, "bad axes list");
      uint64_t m = 0;
      for (int i = 0; i < k; i++) {
        if (list[i] < 0 || list[i] > 63) return perr(p, "axis %" PRId64 " out of range", list[i]);
        m |= (uint64_t)1 << list[i];
      }
      n->iattr[0] = (int64_t)m;
    } else {
      int k = parse_list(&v, list, KILN_MAX_RANK);
      if (k != r) return perr(p, "'%s' needs %d integers (the rank)", f->name, r);
      memcpy(n->iattr + f->slot * r, list, sizeof list[0] * (size_t)r);
    }
    *named = 1;
    n->n_iattr = schema_n_iattr(sc, r);
  }
  if (!end_of_token(v)) return perr(p, "unexpected text after '%.*s'", (int)nl, s);
  *sp = v;
  return KILN_OK;
}

static kiln_status parse_node(parser *p, char *line) {
  if (p->seen_inputs || p->seen_outputs) return perr(p, "node line after the inputs/outputs lines");
  if (p->n_nodes >= KILN_GRAPHTEXT_MAX_NODES) return perr(p, "more than %d nodes", KILN_GRAPHTEXT_MAX_NODES);
  if (grow((void **)&p->nodes, p->n_nodes, &p->cap_nodes, sizeof *p->nodes)) return oom(p);
  kiln_gnode *n = &p->nodes[p->n_nodes];
  memset(n, 0, sizeof *n);
  char *at = strstr(line, " @ ");
  if (at) *at = 0; /* the location is the rest of the line */
  const char *s = line;
  int32_t idx;
  if (parse_ref(&s, INT32_MAX, &idx) || idx != p->n_nodes)
    return perr(p, "expected node %%%d", (int)p->n_nodes);
  s = skip_ws(s);
  if (*s++ != '=') return perr(p, "expected '=' after %%%d", (int)idx);
  s = skip_ws(s);
  const char *w = s;
  while (*s && !end_of_token(s)) s++;
  int op = lookup_op(w, (size_t)(s - w));
  if (op < 0) return perr(p, "unknown op '%.*s'", (int)(s - w), w);
  n->op = (uint16_t)op;
  s = skip_ws(s);
  w = s;
  while (*s && *s != '[' && !end_of_token(s)) s++;
  int dt = lookup_dtype(w, (size_t)(s - w));
  if (dt < 0 || *s != '[') return perr(p, "expected dtype[shape] after %s", kiln_op_name(op));
  n->dtype = (uint8_t)dt;
  int64_t shape[KILN_MAX_RANK + 1];
  int r = parse_list(&s, shape, KILN_MAX_RANK);
  if (r < 0) return perr(p, "bad shape (at most %d integers in [])", KILN_MAX_RANK);
  for (int d = 0; d < r; d++) {
    if (shape[d] < 0) return perr(p, "negative dimension %" PRId64, shape[d]);
    n->shape[d] = shape[d];
  }
  n->rank = (uint8_t)r;
  n->in_off = p->n_edges;
  for (s = skip_ws(s); *s == '%'; s = skip_ws(s)) {
    int32_t v;
    if (parse_ref(&s, p->n_nodes, &v)) return perr(p, "input must name an earlier node (%%0..%%%d)", (int)p->n_nodes - 1);
    if (*s == ',') s++;
    if (grow((void **)&p->edges, p->n_edges, &p->cap_edges, sizeof *p->edges)) return oom(p);
    p->edges[p->n_edges++] = v;
    n->n_in++;
  }
  schema sc = schema_of(op);
  int named = 0, raw = 0;
  for (; *s; s = skip_ws(s)) {
    kiln_status st = parse_attr(p, &s, n, &sc, &named, &raw);
    if (st != KILN_OK) return st;
  }
  if (named && raw) return perr(p, "iattr=[...] cannot be mixed with named attributes");
  if (at) {
    kiln_status st = parse_loc(p, skip_ws(at + 3), n);
    if (st != KILN_OK) return st;
  }
  p->n_nodes++;
  return KILN_OK;
}

static kiln_status parse_inputs(parser *p, const char *s) {
  if (p->seen_inputs++) return perr(p, "second inputs line");
  for (s = skip_ws(s); *s; s = skip_ws(s)) {
    int32_t v;
    if (parse_ref(&s, p->n_nodes, &v) || !end_of_token(s)) return perr(p, "inputs: expected %%N of a node");
    if (grow((void **)&p->inputs, p->n_inputs, &p->cap_inputs, sizeof *p->inputs)) return oom(p);
    p->inputs[p->n_inputs++] = v;
  }
  return KILN_OK;
}

static kiln_status parse_outputs(parser *p, const char *s) {
  if (p->seen_outputs++) return perr(p, "second outputs line");
  for (s = skip_ws(s); *s; s = skip_ws(s)) {
    int32_t v, a = -1;
    if (parse_ref(&s, p->n_nodes, &v)) return perr(p, "outputs: expected %%N of a node");
    s = skip_ws(s);
    if (!strncmp(s, "(aliases input #", 16)) {
      s += 16;
      int64_t x;
      if (parse_i64(&s, &x) || x < 0 || x > INT32_MAX || *s != ')') return perr(p, "outputs: bad alias");
      a = (int32_t)x;
      s++;
    }
    if (*s == ',') s++;
    int32_t cap = p->cap_outputs;
    if (grow((void **)&p->outputs, p->n_outputs, &cap, sizeof *p->outputs)) return oom(p);
    if (grow((void **)&p->aliases, p->n_outputs, &p->cap_outputs, sizeof *p->aliases)) return oom(p);
    p->outputs[p->n_outputs] = v;
    p->aliases[p->n_outputs++] = a;
  }
  return KILN_OK;
}

/* "# dynamic: sK = <what> (N here)" and "# dynamic: %N [sizes]" (the
 * comment lines of a graph compiled for any size); other comments are
 * skipped. A malformed one is an error, as any line is. */
static kiln_status parse_dynamic(parser *p, const char *s) {
  s = skip_ws(s);
  if (*s == '%') {
    int32_t v;
    if (parse_ref(&s, p->n_nodes, &v)) return perr(p, "dynamic: expected %%N of a node");
    s = skip_ws(s);
    const char *close = *s == '[' ? strchr(s, ']') : NULL;
    if (!close || *skip_ws(close + 1)) return perr(p, "dynamic: expected [sizes] after %%%d", (int)v);
    if (v >= p->cap_sym_shape) {
      int32_t cap = p->cap_sym_shape;
      while (cap <= v) cap = cap ? cap * 2 : 64;
      char **a = realloc(p->sym_shape, sizeof *a * (size_t)cap);
      if (!a) return oom(p);
      memset(a + p->cap_sym_shape, 0, sizeof *a * (size_t)(cap - p->cap_sym_shape));
      p->sym_shape = a;
      p->cap_sym_shape = cap;
    }
    char *t = strndup(s + 1, (size_t)(close - s - 1));
    if (!t) return oom(p);
    free(p->sym_shape[v]);
    p->sym_shape[v] = t;
    return KILN_OK;
  }
  if (*s == 's' && s[1] >= '0' && s[1] <= '9') {
    char *end;
    long k = strtol(s + 1, &end, 10);
    const char *eq = skip_ws(end);
    if (k < 0 || k >= 64 || *eq != '=') return KILN_OK; /* "sK = ..." only */
    const char *what = skip_ws(eq + 1), *here = strstr(what, " (");
    size_t n = here ? (size_t)(here - what) : strlen(what);
    kiln_graphtext *o = p->out;
    if (k >= o->n_sym_def) {
      char **a = realloc(o->sym_def, sizeof *a * (size_t)(k + 1));
      if (!a) return oom(p);
      memset(a + o->n_sym_def, 0, sizeof *a * (size_t)(k + 1 - o->n_sym_def));
      o->sym_def = a;
      o->n_sym_def = (int)k + 1;
    }
    char *t = strndup(what, n);
    if (!t) return oom(p);
    free(o->sym_def[k]);
    o->sym_def[k] = t;
  }
  return KILN_OK;
}

static kiln_status parse_line(parser *p, char *line) {
  const char *s = skip_ws(line);
  if (!strncmp(s, "# dynamic:", 10)) return parse_dynamic(p, s + 10);
  if (!*s || *s == '#') return KILN_OK;
  if (*s == '%') return parse_node(p, line + (s - line));
  if (!strncmp(s, "key ", 4)) {
    char *end;
    errno = 0;
    p->out->key = strtoull(s + 4, &end, 0);
    if (errno || end == s + 4 || *skip_ws(end)) return perr(p, "bad key (expected 0x followed by hex digits)");
    p->out->has_key = 1;
    return KILN_OK;
  }
  if (!strncmp(s, "cause ", 6)) {
    char *c = strdup(s + 6);
    if (!c) return oom(p);
    free(p->out->cause);
    p->out->cause = c;
    return KILN_OK;
  }
  if (!strncmp(s, "graph ", 6)) return KILN_OK; /* counts are recomputed from the lines */
  if (!strncmp(s, "inputs:", 7)) return parse_inputs(p, s + 7);
  if (!strncmp(s, "outputs:", 8)) return parse_outputs(p, s + 8);
  return perr(p, "unrecognised line '%.40s'", s);
}

static kiln_status finish(parser *p) {
  if (!p->seen_inputs || !p->seen_outputs) return perr(p, "missing the %s line", p->seen_inputs ? "outputs:" : "inputs:");
  kiln_graph *g = kiln_graph_alloc(p->n_nodes, p->n_edges, p->n_inputs, p->n_outputs);
  if (!g) return oom(p);
  if (p->n_nodes) memcpy(g->nodes, p->nodes, sizeof *p->nodes * (size_t)p->n_nodes);
  if (p->n_edges) memcpy(g->in_idx, p->edges, sizeof *p->edges * (size_t)p->n_edges);
  if (p->n_inputs) memcpy(g->input_node, p->inputs, sizeof *p->inputs * (size_t)p->n_inputs);
  for (int32_t o = 0; o < p->n_outputs; o++) {
    g->output_node[o] = p->outputs[o];
    g->output_alias[o] = p->aliases[o];
  }
  p->out->g = g;
  if (p->sym_shape) { /* one entry per node */
    char **a = realloc(p->sym_shape, sizeof *a * ((size_t)p->n_nodes + 1));
    if (!a) return oom(p);
    for (int32_t i = p->cap_sym_shape; i <= p->n_nodes; i++) a[i] = NULL;
    p->out->sym_shape = a;
    p->sym_shape = NULL;
  }
  char msg[512];
  if (kiln_graph_verify(g, msg, sizeof msg))
    return kiln_err_set(p->err, KILN_ERR_CORRUPT, "%s: not a valid graph: %s", p->name, msg);
  g->hash = kiln_graph_hash(g);
  return KILN_OK;
}

kiln_status kiln_graphtext_parse(const char *text, size_t len, const char *name, kiln_graphtext *out, kiln_err *err) {
  if (!out) return kiln_err_set(err, KILN_ERR_INVALID_ARGUMENT, "kiln_graphtext_parse: NULL result");
  memset(out, 0, sizeof *out);
  parser p = {.name = name ? name : "<graph text>", .err = err, .out = out};
  if (len > KILN_GRAPHTEXT_MAX_BYTES)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: larger than %zu bytes", p.name, KILN_GRAPHTEXT_MAX_BYTES);
  char *copy = malloc(len + 1);
  if (!copy) return oom(&p);
  if (len) memcpy(copy, text, len);
  copy[len] = 0;
  kiln_status st = KILN_OK;
  const char *nul = len ? memchr(copy, 0, len) : NULL;
  if (nul) { /* a text dump never holds one; say where it is */
    for (const char *c = copy; c < nul; c++) p.line += *c == '\n';
    p.line++;
    st = perr(&p, "NUL byte in the text");
    p.line = 0;
  }
  char *line = copy;
  while (st == KILN_OK && line <= copy + len) {
    p.line++;
    char *nl = memchr(line, '\n', (size_t)(copy + len - line));
    char *end = nl ? nl : copy + len;
    *end = 0;
    if (end > line && end[-1] == '\r') end[-1] = 0;
    st = parse_line(&p, line);
    if (!nl) break;
    line = nl + 1;
  }
  if (st == KILN_OK) st = finish(&p);
  free(copy);
  free(p.nodes);
  free(p.edges);
  free(p.inputs);
  free(p.outputs);
  free(p.aliases);
  for (int32_t i = 0; i < p.cap_sym_shape && p.sym_shape; i++) free(p.sym_shape[i]); /* not taken: a failure */
  free(p.sym_shape);
  if (st != KILN_OK) kiln_graphtext_clear(out);
  if (!out->cause && st == KILN_OK) {
    out->cause = strdup("");
    if (!out->cause) {
      kiln_graphtext_clear(out);
      st = oom(&p);
    }
  }
  return st;
}

kiln_status kiln_graphtext_load(const char *path, kiln_graphtext *out, kiln_err *err) {
  if (out) memset(out, 0, sizeof *out);
  /* A blocking open: a FIFO waits for its writer, as with cat, so that
   * `kiln graph diff <(...) <(...)` reads pipes. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    close(fd);
    return kiln_err_set(err, KILN_ERR_IO, "%s: is a directory, not a graph file", path);
  }
  uint8_t *data = NULL;
  size_t n = 0;
  kiln_err rerr = {0};
  kiln_status st = kiln_fs_read_fd(fd, KILN_GRAPHTEXT_MAX_BYTES, &data, &n, &rerr);
  close(fd);
  if (st != KILN_OK) return kiln_err_set(err, st, "%s: %s", path, rerr.msg); /* which file, not just why */
  st = kiln_graphtext_parse((const char *)data, n, path, out, err);
  free(data);
  return st;
}

void kiln_graphtext_clear(kiln_graphtext *t) {
  if (!t) return;
  for (int32_t i = 0; t->sym_shape && t->g && i < t->g->n_nodes; i++) free(t->sym_shape[i]);
  free(t->sym_shape);
  for (int k = 0; k < t->n_sym_def; k++) free(t->sym_def[k]);
  free(t->sym_def);
  kiln_graph_free(t->g);
  free(t->cause);
  for (int i = 0; i < t->n_files; i++) free(t->files[i]);
  free(t->files);
  memset(t, 0, sizeof *t);
}
