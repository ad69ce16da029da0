/* The kiln side of the differential test (tests/diff/difftest.py): reads
 * programs of the test's small language and runs them through kiln's public
 * API on one backend, printing every value read.
 *
 * Usage: diff_run BACKEND FILE
 * FILE holds programs, each "program N" ... "end". For each read/item the
 * output line is
 *   R <program> <statement index> <dtype> <rank> <dims...> | <values...>
 * and a program that ended with an error prints
 *   E <program> <statement index> <status> <message>
 * (the statement where kiln's sticky status first became an error). One
 * runtime serves every program (compiled graphs are reused); each program
 * releases what it kept. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

/* The public elementwise builders, from the op table (kiln/ops.def): unary
 * ones, and binary ones with their tensor-scalar forms NAME_s (a graph
 * input) and NAME_c (a constant). */
static const struct {
  const char *name;
  kiln_tensor (*un)(kiln_tensor, kiln_loc);
  kiln_tensor (*bin)(kiln_tensor, kiln_tensor, kiln_loc);
  kiln_tensor (*s)(kiln_tensor, double, kiln_loc);
  kiln_tensor (*c)(kiln_tensor, double, kiln_loc);
} k_elementwise[] = {
#define D_NONE(fn)
#define D_UNARY(fn) {#fn, kiln_##fn##_at, NULL, NULL, NULL},
#define D_BINARY(fn) {#fn, NULL, kiln_##fn##_at, kiln_##fn##_s_at, kiln_##fn##_c_at},
#define KILN_PUB_NONE D_NONE(none)
#define KILN_PUB_UNARY(fn) D_UNARY(fn)
#define KILN_PUB_BINARY(fn) D_BINARY(fn)
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, ...) PUB
#include "kiln/ops.def"
#undef KILN_OP
#undef KILN_PUB_NONE
#undef KILN_PUB_UNARY
#undef KILN_PUB_BINARY
};

#define MAX_TOK 16384
#define MAX_IDS 4096

static kiln_tensor g_t[MAX_IDS];
static int g_dynamic;

static int tid(const char *s) {
  int v = atoi(s + 1);
  return v > 0 && v < MAX_IDS ? v : 0;
}

static kiln_dtype dtype_of(const char *s) {
  if (!strcmp(s, "f32")) return KILN_F32;
  if (!strcmp(s, "f64")) return KILN_F64;
  if (!strcmp(s, "i32")) return KILN_I32;
  if (!strcmp(s, "i64")) return KILN_I64;
  if (!strcmp(s, "u8")) return KILN_U8;
  if (!strcmp(s, "i8")) return KILN_I8;
  return KILN_BOOL;
}

static void print_tensor(int prog, int si, kiln_tensor t, const char *kind) {
  if (!strcmp(kind, "item")) {
    double v = kiln_item_f64(t);
    if (kiln_last_status() != KILN_OK) return;
    printf("R %d %d %s 0 | %.17g\n", prog, si, kiln_dtype_name(kiln_dtype_of(t)), v);
    return;
  }
  int64_t shape[KILN_MAX_RANK];
  int rank = kiln_shape(t, shape);
  if (rank < 0) {
    kiln_to_host(t, NULL, 0); /* records why */
    return;
  }
  kiln_dtype dt = kiln_dtype_of(t);
  int64_t n = kiln_numel(t);
  void *buf = malloc((size_t)(n > 0 ? n : 1) * 8);
  if (!buf || kiln_to_host(t, buf, (size_t)n * kiln_dtype_size(dt)) != KILN_OK) {
    free(buf);
    return;
  }
  printf("R %d %d %s %d", prog, si, kiln_dtype_name(dt), rank);
  for (int i = 0; i < rank; i++) printf(" %lld", (long long)shape[i]);
  printf(" |");
  for (int64_t i = 0; i < n; i++) {
    switch (dt) {
      case KILN_F32: printf(" %.9g", ((float *)buf)[i]); break;
      case KILN_F64: printf(" %.17g", ((double *)buf)[i]); break;
      case KILN_I32: printf(" %d", ((int32_t *)buf)[i]); break;
      case KILN_I64: printf(" %lld", (long long)((int64_t *)buf)[i]); break;
      case KILN_I8: printf(" %d", ((int8_t *)buf)[i]); break;
      default: printf(" %d", ((uint8_t *)buf)[i]); break; /* bool, u8 */
    }
  }
  printf("\n");
  free(buf);
}

/* One op statement: op ID NAME NIN IN... | ATTRS... */
static kiln_tensor run_op(char **tok, int nt) {
  const char *name = tok[2];
  int nin = atoi(tok[3]);
  kiln_tensor in[4] = {{0, 0}};
  for (int i = 0; i < nin && i < 4; i++) in[i] = g_t[tid(tok[4 + i])];
  int a0 = 5 + nin, na = nt - a0;
  double at[MAX_TOK];
  int64_t ai[MAX_TOK];
  int ii[MAX_TOK];
  for (int i = 0; i < na; i++) {
    at[i] = strtod(tok[a0 + i], NULL);
    /* the integer views of a scalar attribute (2^62, NaN) only where they exist: the float -> integer
     * conversion is undefined outside the range */
    ai[i] = at[i] >= -9223372036854775808.0 && at[i] < 9223372036854775808.0 ? (int64_t)at[i] : 0;
    ii[i] = at[i] > -2147483649.0 && at[i] < 2147483648.0 ? (int)at[i] : 0;
  }
  kiln_tensor x = in[0], y = in[1];
  /* every public elementwise op of the op table, by its public name */
  for (size_t k = 0; k < sizeof k_elementwise / sizeof k_elementwise[0]; k++) {
    if (strcmp(name, k_elementwise[k].name)) continue;
    return k_elementwise[k].un ? k_elementwise[k].un(x, KILN_HERE) : k_elementwise[k].bin(x, y, KILN_HERE);
  }
  size_t nl = strlen(name);
  if (nl > 2 && name[nl - 2] == '_' && (name[nl - 1] == 's' || name[nl - 1] == 'c'))
    for (size_t k = 0; k < sizeof k_elementwise / sizeof k_elementwise[0]; k++) {
      const char *base = k_elementwise[k].name;
      if (!k_elementwise[k].s || strlen(base) != nl - 2 || strncmp(name, base, nl - 2)) continue;
      return (name[nl - 1] == 's' ? k_elementwise[k].s : k_elementwise[k].c)(x, at[0], KILN_HERE);
    }
  if (!strcmp(name, "where")) return kiln_where(in[0], in[1], in[2]);
  if (!strcmp(name, "cast")) return kiln_cast(x, (kiln_dtype)ii[0]);
  if (!strcmp(name, "sum")) return kiln_sum(x, ii[1], ii[1] ? ii + 2 : NULL, ii[0]);
  if (!strcmp(name, "mean")) return kiln_mean(x, ii[1], ii[1] ? ii + 2 : NULL, ii[0]);
  if (!strcmp(name, "max")) return kiln_max(x, ii[1], ii[1] ? ii + 2 : NULL, ii[0]);
  if (!strcmp(name, "min")) return kiln_min(x, ii[1], ii[1] ? ii + 2 : NULL, ii[0]);
  if (!strcmp(name, "prod")) return kiln_prod(x, ii[1], ii[1] ? ii + 2 : NULL, ii[0]);
  if (!strcmp(name, "cumsum")) return kiln_cumsum(x, ii[0]);
  if (!strcmp(name, "cumprod")) return kiln_cumprod(x, ii[0]);
  if (!strcmp(name, "softmax")) return kiln_softmax(x, ii[0]);
  if (!strcmp(name, "log_softmax")) return kiln_log_softmax(x, ii[0]);
  if (!strcmp(name, "reshape")) return kiln_reshape(x, ii[0], ai + 1);
  if (!strcmp(name, "permute")) return kiln_permute(x, ii);
  if (!strcmp(name, "expand")) return kiln_expand(x, ii[0], ai + 1);
  if (!strcmp(name, "slice")) return kiln_slice(x, ii[0], ai[1], ai[2], ai[3]);
  if (!strcmp(name, "pad")) {
    int r = kiln_rank(x);
    return kiln_pad(x, ai + 1, ai + 1 + (r > 0 ? r : 0), at[0]);
  }
  if (!strcmp(name, "concat")) return kiln_concat(nin, in, ii[0]);
  if (!strcmp(name, "clamp")) return kiln_clamp(x, at[0], at[1]);
  if (!strcmp(name, "flip")) return kiln_flip(x, ii[0], ii + 1);
  if (!strcmp(name, "roll")) return kiln_roll(x, ai[0], ii[1]);
  if (!strcmp(name, "tril")) return kiln_tril(x, ai[0]);
  if (!strcmp(name, "triu")) return kiln_triu(x, ai[0]);
  if (!strcmp(name, "stack")) return kiln_stack(nin, in, ii[0]);
  if (!strcmp(name, "pad_with")) {
    int r = kiln_rank(x);
    return kiln_pad_with(x, ai + 1, ai + 1 + (r > 0 ? r : 0), (kiln_pad_mode)ii[0], 0);
  }
  if (!strcmp(name, "matmul")) return kiln_matmul(x, y);
  if (!strcmp(name, "index_select")) return kiln_index_select(x, ii[0], y);
  if (!strcmp(name, "gather")) return kiln_gather(x, ii[0], y);
  if (!strcmp(name, "sort") || !strcmp(name, "topk")) { /* sort ax desc which | topk k ax largest which */
    kiln_tensor v, i;
    if (name[0] == 's')
      kiln_sort(x, ii[0], ii[1], &v, &i);
    else
      kiln_topk(x, ai[0], ii[1], ii[2], &v, &i);
    return ii[name[0] == 's' ? 2 : 3] ? i : v;
  }
  if (!strcmp(name, "scatter_add")) return kiln_scatter_add(x, ii[0], y, in[2]);
  if (!strcmp(name, "scatter")) return kiln_scatter(x, ii[0], y, in[2]);
  if (!strcmp(name, "index_add")) return kiln_index_add(x, ii[0], y, in[2]);
  if (!strcmp(name, "index_put")) return kiln_index_put(x, y, in[2], ii[0]);
  if (!strcmp(name, "argmax")) return kiln_argmax(x, ii[0], ii[1]);
  if (!strcmp(name, "argmin")) return kiln_argmin(x, ii[0], ii[1]);
  fprintf(stderr, "diff_run: unknown op %s\n", name);
  exit(2);
}

static kiln_tensor run_in(char **tok, int nt) {
  kiln_dtype dt = dtype_of(tok[2]);
  int rank = atoi(tok[3]);
  int64_t shape[KILN_MAX_RANK], n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i] = atoll(tok[4 + i]);
  int v0 = 5 + rank;
  void *buf = calloc((size_t)(n > 0 ? n : 1), 8);
  for (int64_t i = 0; i < n && v0 + i < nt; i++) {
    double v = strtod(tok[v0 + i], NULL);
    switch (dt) {
      case KILN_F32: ((float *)buf)[i] = (float)v; break;
      case KILN_F64: ((double *)buf)[i] = v; break;
      case KILN_I32: ((int32_t *)buf)[i] = (int32_t)atoll(tok[v0 + i]); break;
      case KILN_I64: ((int64_t *)buf)[i] = atoll(tok[v0 + i]); break;
      case KILN_U8: ((uint8_t *)buf)[i] = (uint8_t)atoi(tok[v0 + i]); break;
      case KILN_I8: ((int8_t *)buf)[i] = (int8_t)atoi(tok[v0 + i]); break;
      default: ((uint8_t *)buf)[i] = (uint8_t)(v != 0); break;
    }
  }
  kiln_tensor t = kiln_from_host(buf, dt, rank, shape);
  free(buf);
  return t;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: diff_run BACKEND FILE\n");
    return 2;
  }
  FILE *f = fopen(argv[2], "r");
  if (!f) {
    perror(argv[2]);
    return 2;
  }
  kiln_options o = {0};
  o.backend = argv[1];
  g_dynamic = getenv("KILN_DIFF_DYNAMIC") && atoi(getenv("KILN_DIFF_DYNAMIC")) > 0;
  if (kiln_init(&o) != KILN_OK) {
    fprintf(stderr, "diff_run: %s\n", kiln_last_error());
    return 2;
  }
  static char line[1 << 20];
  static char *tok[MAX_TOK + 16];
  int prog = -1, si = 0, failed_at = -1;
  int kept[MAX_IDS], n_kept = 0;
  while (fgets(line, sizeof line, f)) {
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      fprintf(stderr, "diff_run: a statement longer than %zu bytes\n", sizeof line - 1);
      return 2;
    }
    int nt = 0;
    for (char *p = strtok(line, " \t\n"); p; p = strtok(NULL, " \t\n")) {
      if (nt == MAX_TOK + 16) {
        fprintf(stderr, "diff_run: a statement of more than %d words\n", MAX_TOK);
        return 2;
      }
      tok[nt++] = p;
    }
    if (!nt) continue;
    const char *k = tok[0];
    if (!strcmp(k, "program")) {
      prog = atoi(tok[1]);
      si = 0;
      failed_at = -1;
      n_kept = 0;
      memset(g_t, 0, sizeof g_t);
      continue;
    }
    if (!strcmp(k, "end")) {
      for (int i = 0; i < n_kept; i++)
        if (kiln_is_valid(g_t[kept[i]])) kiln_release(g_t[kept[i]]);
      kiln_mark_step();
      if (failed_at >= 0 || kiln_last_status() != KILN_OK) {
        char m[512];
        snprintf(m, sizeof m, "%s", kiln_last_error());
        for (char *c = m; *c; c++)
          if (*c == '\n') *c = ' ';
        printf("E %d %d %s %s\n", prog, failed_at >= 0 ? failed_at : si, kiln_status_name(kiln_last_status()),
               *m ? m : "?");
      }
      kiln_clear_error();
      fflush(stdout);
      continue;
    }
    if (!strcmp(k, "in")) {
      g_t[tid(tok[1])] = run_in(tok, nt);
      /* KILN_DIFF_DYNAMIC=1: every dimension of 2 or more of every input
       * marked dynamic (the family's kernels, sizes read at run time) */
      if (g_dynamic)
        for (int a = 0; a < kiln_rank(g_t[tid(tok[1])]); a++)
          if (kiln_dim(g_t[tid(tok[1])], a) >= 2) kiln_dynamic(g_t[tid(tok[1])], a);
    } else if (!strcmp(k, "op")) {
      g_t[tid(tok[1])] = run_op(tok, nt);
    } else if (!strcmp(k, "keep")) {
      kiln_keep(g_t[tid(tok[1])]);
      if (n_kept < MAX_IDS) kept[n_kept++] = tid(tok[1]);
    } else if (!strcmp(k, "release")) {
      kiln_release(g_t[tid(tok[1])]);
    } else if (!strcmp(k, "assign")) {
      kiln_assign(g_t[tid(tok[1])], g_t[tid(tok[2])]);
    } else if (!strcmp(k, "read") || !strcmp(k, "item")) {
      print_tensor(prog, si, g_t[tid(tok[1])], k);
    } else if (!strcmp(k, "step")) {
      kiln_mark_step();
    } else if (!strcmp(k, "reqgrad")) {
      kiln_requires_grad(g_t[tid(tok[1])]);
    } else if (!strcmp(k, "backward")) {
      kiln_backward(g_t[tid(tok[1])]);
    } else if (!strcmp(k, "grad")) {
      g_t[tid(tok[1])] = kiln_grad(g_t[tid(tok[2])]);
    } else if (!strcmp(k, "zerograd")) {
      kiln_zero_grad(g_t[tid(tok[1])]);
    } else {
      fprintf(stderr, "diff_run: unknown statement %s\n", k);
      return 2;
    }
    if (failed_at < 0 && kiln_last_status() != KILN_OK) failed_at = si;
    si++;
  }
  fclose(f);
  kiln_shutdown();
  return 0;
}
