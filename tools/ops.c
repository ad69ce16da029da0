/* `kiln ops [--markdown]`: kiln's op table, read from the public
 * include/kiln/ops.def (the one description of every IR op), one line per
 * op: its name, kind, arity, the public functions made from the row,
 * the dtypes it accepts, whether it is differentiable (the row has a vjp)
 * and its one-line doc. --markdown prints the same as a markdown table.
 *
 * Exit codes: 0 printed, 2 bad command line. */
#include "tools/ops.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kiln/kiln.h"

enum { OPS_OK = 0, OPS_USAGE = 2 };

/* The FLAGS column's names (ops.def's header comment); only the public
 * builder's dtype conversions matter here. */
enum {
  OPF_PROMOTE = 1 << 0,
  OPF_LOGICAL = 1 << 1,
  OPF_FOLD_FLOAT = 1 << 2,
  OPF_FOLD_INT = 1 << 3,
  OPF_RUNTIME_CHECK = 1 << 4,
};

typedef struct ops_row {
  const char *name;  /* the op's name in dumps and errors */
  const char *kind;  /* SOURCE, UNARY, ... */
  int arity;         /* -1: variadic */
  const char *fn;    /* the public function's stem, NULL when none */
  int pub;           /* 0 none, 1 unary (kiln_<fn>), 2 binary (kiln_<fn>, _s, _c) */
  const char *in;    /* the IN column: ANY, NUM, FLOAT, BOOL, INDEX, NONE */
  unsigned flags;
  const char *vjp;   /* NULL: not differentiable */
  const char *doc;
} ops_row;

#define KILN_PUB_NONE NULL, 0
#define KILN_PUB_UNARY(fn) #fn, 1
#define KILN_PUB_BINARY(fn) #fn, 2
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, IN, OUT, FLAGS, COST, F32, F64, INT, VJP, DOC) \
  {STR, #KIND, ARITY, PUB, #IN, FLAGS, VJP, DOC},
static const ops_row ops_table[] = {
#include "kiln/ops.def"
};
#undef KILN_OP
#undef KILN_PUB_NONE
#undef KILN_PUB_UNARY
#undef KILN_PUB_BINARY
enum { OPS_N = sizeof ops_table / sizeof ops_table[0] };

static void ops_usage(FILE *f) {
  fprintf(f,
          "usage: kiln ops [--markdown]\n"
          "\n"
          "Print kiln's op table (include/kiln/ops.def), one line per op: name, kind, arity,\n"
          "the public functions made from it, the dtypes it accepts, whether it is\n"
          "differentiable, and its one-line doc. --markdown: as a markdown table.\n");
}

/* The kind in lower case ("unary"). */
static void ops_kind(const ops_row *r, char *out, size_t cap) {
  size_t i = 0;
  for (; r->kind[i] && i + 1 < cap; i++) out[i] = (char)tolower((unsigned char)r->kind[i]);
  out[i] = 0;
}

static void ops_arity(const ops_row *r, char *out, size_t cap) {
  if (r->arity < 0)
    snprintf(out, cap, "n");
  else
    snprintf(out, cap, "%d", r->arity);
}

/* "kiln_add kiln_add_s kiln_add_c" (quote: each in backticks, comma-separated); "-" when none. */
static void ops_public(const ops_row *r, int quote, char *out, size_t cap) {
  const char *q = quote ? "`" : "", *sep = quote ? ", " : " ";
  if (!r->pub)
    snprintf(out, cap, "-");
  else if (r->pub == 1)
    snprintf(out, cap, "%skiln_%s%s", q, r->fn, q);
  else
    snprintf(out, cap, "%skiln_%s%s%s%skiln_%s_s%s%s%skiln_%s_c%s", q, r->fn, q, sep, q, r->fn, q, sep, q, r->fn, q);
}

/* The accepted dtypes, with the public builder's conversions. */
static void ops_dtypes(const ops_row *r, char *out, size_t cap) {
  static const struct {
    const char *in, *dtypes;
  } sets[] = {{"ANY", "bool u8 i8 i32 i64 bf16 f16 f32 f64"},
              {"NUM", "u8 i8 i32 i64 bf16 f16 f32 f64"},
              {"FLOAT", "bf16 f16 f32 f64"},
              {"BOOL", "bool"},
              {"INDEX", "i32 i64"},
              {"CONTRACT", "i32 i64 bf16 f16 f32 f64 (u8 i8: as i32)"},
              {"NONE", "-"}};
  const char *d = r->in;
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
    if (!strcmp(r->in, sets[i].in)) d = sets[i].dtypes;
  const char *note = "";
  if (r->flags & OPF_PROMOTE)
    note = " (ints, bool: computed in f32)";
  else if (r->flags & OPF_LOGICAL)
    note = " (others: converted to bool)";
  snprintf(out, cap, "%s%s", d, note);
}

enum { OPS_COLS = 7 };
static const char *const ops_head[OPS_COLS] = {"op", "kind", "arity", "public functions", "dtypes", "differentiable",
                                               "doc"};

/* The cells of row r (quote: markdown backticks). */
static void ops_cells(const ops_row *r, int quote, char cells[OPS_COLS][256]) {
  snprintf(cells[0], 256, "%s", r->name);
  ops_kind(r, cells[1], 256);
  ops_arity(r, cells[2], 256);
  ops_public(r, quote, cells[3], 256);
  ops_dtypes(r, cells[4], 256);
  snprintf(cells[5], 256, "%s", r->vjp ? "yes" : "no");
  cells[6][0] = 0; /* the doc is printed from the table: it may be long */
}

/* A markdown cell: '|' escaped. */
static void ops_md_cell(const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputc('\\', stdout);
    fputc(*s, stdout);
  }
}

static void ops_print_markdown(void) {
  printf("|");
  for (int c = 0; c < OPS_COLS; c++) printf(" %s |", ops_head[c]);
  printf("\n|");
  for (int c = 0; c < OPS_COLS; c++) printf("---|");
  printf("\n");
  for (int i = 0; i < OPS_N; i++) {
    char cells[OPS_COLS][256];
    ops_cells(&ops_table[i], 1, cells);
    printf("| `%s` |", cells[0]);
    for (int c = 1; c < OPS_COLS - 1; c++) {
      printf(" ");
      ops_md_cell(cells[c]);
      printf(" |");
    }
    printf(" ");
    ops_md_cell(ops_table[i].doc);
    printf(" |\n");
  }
}

static void ops_print_text(void) {
  int width[OPS_COLS];
  for (int c = 0; c < OPS_COLS; c++) width[c] = (int)strlen(ops_head[c]);
  for (int i = 0; i < OPS_N; i++) {
    char cells[OPS_COLS][256];
    ops_cells(&ops_table[i], 0, cells);
    for (int c = 0; c < OPS_COLS - 1; c++)
      if ((int)strlen(cells[c]) > width[c]) width[c] = (int)strlen(cells[c]);
  }
  for (int c = 0; c < OPS_COLS - 1; c++) printf("%-*s  ", width[c], ops_head[c]);
  printf("%s\n", ops_head[OPS_COLS - 1]);
  for (int i = 0; i < OPS_N; i++) {
    char cells[OPS_COLS][256];
    ops_cells(&ops_table[i], 0, cells);
    for (int c = 0; c < OPS_COLS - 1; c++) printf("%-*s  ", width[c], cells[c]);
    printf("%s\n", ops_table[i].doc);
  }
}

int kiln_cli_ops(int argc, char **argv) {
  int markdown = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      ops_usage(stdout);
      return OPS_OK;
    }
    if (!strcmp(argv[i], "--markdown")) {
      markdown = 1;
      continue;
    }
    fprintf(stderr, "kiln ops: unknown argument '%s'\n\n", argv[i]);
    ops_usage(stderr);
    return OPS_USAGE;
  }
  if (markdown)
    ops_print_markdown();
  else
    ops_print_text();
  return OPS_OK;
}
