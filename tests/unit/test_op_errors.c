/* Every public op builder of kiln.h names ITSELF in its errors, with the
 * caller's file:line (this file), whatever it is built from: handed (a) the
 * null tensor, (b) a released handle, (c) a handle from before
 * kiln_shutdown() + kiln_init(), in each of its tensor inputs, it returns a
 * poisoned tensor and records INVALID_ARGUMENT / STALE_HANDLE with a
 * message that starts with the builder's own name ("stack: ...", never an
 * inner op's "reshape: ..."); (d) a poisoned input adds no message (the
 * first error stays); (e) a wrong dtype and (f) a bad axis or attribute
 * name the builder too. After each, kiln still computes a known result.
 * The elementwise builders come from kiln/ops.def, so a new row is covered
 * without a change here. */
#include <kiln/kiln.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kt.h"

static const int64_t SH23[2] = {2, 3};

/* A good f32 [2,3] tensor (1..6), a good i64 index [2,3] and [2]. */
static kiln_tensor good_f(void) {
  float a[6] = {1, 2, 3, 4, 5, 6};
  return kiln_from_host(a, KILN_F32, 2, SH23);
}
static kiln_tensor good_idx23(void) {
  int64_t a[6] = {0, 1, 0, 1, 0, 1};
  return kiln_from_host(a, KILN_I64, 2, SH23);
}
static kiln_tensor good_idx2(void) {
  int64_t a[2] = {1, 0};
  const int64_t s[1] = {2};
  return kiln_from_host(a, KILN_I64, 1, s);
}

/* sum(x * x) of [1, 2, 3, 4] is 30 with no error: kiln still works. */
static int sane(void) {
  float a[4] = {1, 2, 3, 4};
  int64_t sh[1] = {4};
  kiln_tensor t = kiln_from_host(a, KILN_F32, 1, sh);
  double s = kiln_item_f64(kiln_sum(kiln_mul(t, t), 0, NULL, false));
  return s == 30.0 && kiln_last_status() == KILN_OK;
}

/* The message ("file:line: STATUS: op: what") names the builder right
 * after the status (followed by ':' or ' ' as in "pad (reflect): ...") and
 * holds this file's name (the caller's line). */
static int names_op(const char *m, const char *op) {
  if (!m || !strstr(m, "test_op_errors.c")) return 0;
  const char *p = strstr(m, ": ");
  p = p ? strstr(p + 2, ": ") : NULL; /* past "file:line: STATUS" */
  size_t n = strlen(op);
  return p && !strncmp(p + 2, op, n) && (p[2 + n] == ':' || p[2 + n] == ' ' || p[2 + n] == '(');
}

/* One error case: status st, a message naming op and this file, an invalid
 * result; then cleared, and kiln still works. */
static void expect_(kiln_tensor r, kiln_status st, const char *op, const char *what, int line, int valid) {
  const char *m = kiln_last_error();
  if (kiln_last_status() != st)
    KT_FAIL("line %d: %s (%s): status %d, want %d: \"%s\"", line, op, what, (int)kiln_last_status(), (int)st,
            m ? m : "");
  else if (!names_op(m, op))
    KT_FAIL("line %d: %s (%s): message does not start with \"%s\" or lacks the caller's line: \"%s\"", line, op,
            what, op, m ? m : "(null)");
  kiln_clear_error();
  if (kiln_is_valid(r) != valid) KT_FAIL("line %d: %s (%s): the result is %svalid", line, op, what, valid ? "in" : "");
  if (!sane()) KT_FAIL("line %d: kiln broken after %s (%s): %s", line, op, what, kiln_last_error());
  kiln_clear_error();
}
#define EXPECT(r, st, op, what) expect_((r), (st), (op), (what), __LINE__, 0)
/* the same for a function that returns its (valid) input */
#define EXPECT_T(r, st, op, what) expect_((r), (st), (op), (what), __LINE__, 1)

/* ───────── the builders, each with one input replaced ─────────
 * call(bad, pos): the builder with its tensor input number pos replaced by
 * bad, every other argument good. */
typedef kiln_tensor (*call_fn)(kiln_tensor bad, int pos);
typedef struct op_case {
  const char *op; /* the name the user knows */
  int n_in;       /* tensor inputs */
  call_fn call;
} op_case;

#define PICK(pos, i, bad, good) ((pos) == (i) ? (bad) : (good))

static kiln_tensor c_where(kiln_tensor b, int p) {
  return kiln_where(PICK(p, 0, b, kiln_gt_c(good_f(), 2.0)), PICK(p, 1, b, good_f()), PICK(p, 2, b, good_f()));
}
static kiln_tensor c_cast(kiln_tensor b, int p) { return (void)p, kiln_cast(b, KILN_I32); }
static const int AX1[1] = {1};
static kiln_tensor c_sum(kiln_tensor b, int p) { return (void)p, kiln_sum(b, 1, AX1, false); }
static kiln_tensor c_mean(kiln_tensor b, int p) { return (void)p, kiln_mean(b, 1, AX1, false); }
static kiln_tensor c_max(kiln_tensor b, int p) { return (void)p, kiln_max(b, 1, AX1, false); }
static kiln_tensor c_min(kiln_tensor b, int p) { return (void)p, kiln_min(b, 1, AX1, false); }
static kiln_tensor c_prod(kiln_tensor b, int p) { return (void)p, kiln_prod(b, 1, AX1, false); }
static kiln_tensor c_cumsum(kiln_tensor b, int p) { return (void)p, kiln_cumsum(b, 1); }
static kiln_tensor c_cumprod(kiln_tensor b, int p) { return (void)p, kiln_cumprod(b, 1); }
static kiln_tensor c_argmax(kiln_tensor b, int p) { return (void)p, kiln_argmax(b, 1, false); }
static kiln_tensor c_argmin(kiln_tensor b, int p) { return (void)p, kiln_argmin(b, 1, false); }
static kiln_tensor c_softmax(kiln_tensor b, int p) { return (void)p, kiln_softmax(b, 1); }
static kiln_tensor c_log_softmax(kiln_tensor b, int p) { return (void)p, kiln_log_softmax(b, 1); }
static kiln_tensor c_reshape(kiln_tensor b, int p) {
  const int64_t s[1] = {6};
  return (void)p, kiln_reshape(b, 1, s);
}
static const int PERM10[2] = {1, 0};
static kiln_tensor c_permute(kiln_tensor b, int p) { return (void)p, kiln_permute(b, PERM10); }
static kiln_tensor c_transpose(kiln_tensor b, int p) { return (void)p, kiln_transpose(b, 0, 1); }
static kiln_tensor c_expand(kiln_tensor b, int p) {
  const int64_t s[3] = {4, 2, 3};
  return (void)p, kiln_expand(b, 3, s);
}
static kiln_tensor c_slice(kiln_tensor b, int p) { return (void)p, kiln_slice(b, 1, 0, 2, 1); }
static kiln_tensor c_concat(kiln_tensor b, int p) {
  kiln_tensor xs[2] = {PICK(p, 0, b, good_f()), PICK(p, 1, b, good_f())};
  return kiln_concat(2, xs, 0);
}
static kiln_tensor c_stack(kiln_tensor b, int p) {
  kiln_tensor xs[2] = {PICK(p, 0, b, good_f()), PICK(p, 1, b, good_f())};
  return kiln_stack(2, xs, 0);
}
static const int64_t LO11[2] = {1, 1}, HI11[2] = {1, 1};
static kiln_tensor c_pad(kiln_tensor b, int p) { return (void)p, kiln_pad(b, LO11, HI11, 0.0); }
static kiln_tensor c_pad_reflect(kiln_tensor b, int p) {
  return (void)p, kiln_pad_with(b, LO11, HI11, KILN_PAD_REFLECT, 0.0);
}
static kiln_tensor c_pad_replicate(kiln_tensor b, int p) {
  return (void)p, kiln_pad_with(b, LO11, HI11, KILN_PAD_REPLICATE, 0.0);
}
static kiln_tensor c_pad_with_const(kiln_tensor b, int p) {
  return (void)p, kiln_pad_with(b, LO11, HI11, KILN_PAD_CONSTANT, 0.0);
}
static kiln_tensor c_index_select(kiln_tensor b, int p) {
  return kiln_index_select(PICK(p, 0, b, good_f()), 1, PICK(p, 1, b, good_idx2()));
}
static kiln_tensor c_gather(kiln_tensor b, int p) {
  return kiln_gather(PICK(p, 0, b, good_f()), 1, PICK(p, 1, b, good_idx23()));
}
static kiln_tensor c_one_hot(kiln_tensor b, int p) { return (void)p, kiln_one_hot(b, 3, KILN_F32); }
static kiln_tensor c_sort_values(kiln_tensor b, int p) {
  kiln_tensor v;
  kiln_sort(b, 1, false, &v, NULL);
  return (void)p, v;
}
static kiln_tensor c_sort_indices(kiln_tensor b, int p) {
  kiln_tensor i;
  kiln_sort(b, 1, false, NULL, &i);
  return (void)p, i;
}
static kiln_tensor c_argsort(kiln_tensor b, int p) { return (void)p, kiln_argsort(b, 1, false); }
static kiln_tensor c_topk_values(kiln_tensor b, int p) {
  kiln_tensor v;
  kiln_topk(b, 2, 1, true, &v, NULL);
  return (void)p, v;
}
static kiln_tensor c_topk_indices(kiln_tensor b, int p) {
  kiln_tensor i;
  kiln_topk(b, 2, 1, true, NULL, &i);
  return (void)p, i;
}
static kiln_tensor c_scatter(kiln_tensor b, int p) {
  return kiln_scatter(PICK(p, 0, b, good_f()), 1, PICK(p, 1, b, good_idx23()), PICK(p, 2, b, good_f()));
}
static kiln_tensor c_scatter_add(kiln_tensor b, int p) {
  return kiln_scatter_add(PICK(p, 0, b, good_f()), 1, PICK(p, 1, b, good_idx23()), PICK(p, 2, b, good_f()));
}
static kiln_tensor c_index_add(kiln_tensor b, int p) {
  return kiln_index_add(PICK(p, 0, b, good_f()), 0, PICK(p, 1, b, good_idx2()), PICK(p, 2, b, good_f()));
}
static kiln_tensor c_index_put(kiln_tensor b, int p) {
  return kiln_index_put(PICK(p, 0, b, good_f()), PICK(p, 1, b, good_idx2()), PICK(p, 2, b, good_f()), false);
}
static kiln_tensor c_index_put_acc(kiln_tensor b, int p) {
  return kiln_index_put(PICK(p, 0, b, good_f()), PICK(p, 1, b, good_idx2()), PICK(p, 2, b, good_f()), true);
}
static kiln_tensor c_clamp(kiln_tensor b, int p) { return (void)p, kiln_clamp(b, 1.0, 4.0); }
static kiln_tensor c_clamp_lo(kiln_tensor b, int p) { return (void)p, kiln_clamp(b, 1.0, INFINITY); }
static kiln_tensor c_clamp_none(kiln_tensor b, int p) { return (void)p, kiln_clamp(b, -INFINITY, INFINITY); }
static const int AX01[2] = {0, 1};
static kiln_tensor c_flip(kiln_tensor b, int p) { return (void)p, kiln_flip(b, 2, AX01); }
static kiln_tensor c_roll(kiln_tensor b, int p) { return (void)p, kiln_roll(b, 1, 1); }
static kiln_tensor c_tril(kiln_tensor b, int p) { return (void)p, kiln_tril(b, 0); }
static kiln_tensor c_triu(kiln_tensor b, int p) { return (void)p, kiln_triu(b, 0); }
static kiln_tensor c_matmul(kiln_tensor b, int p) {
  return kiln_matmul(PICK(p, 0, b, good_f()), PICK(p, 1, b, kiln_transpose(good_f(), 0, 1)));
}
static kiln_tensor c_dynamic(kiln_tensor b, int p) { return (void)p, kiln_dynamic(b, 0); }
static kiln_tensor c_dynamic_bounded(kiln_tensor b, int p) { return (void)p, kiln_dynamic_bounded(b, 0, 8); }

static const op_case CASES[] = {
    {"where", 3, c_where},         {"cast", 1, c_cast},
    {"sum", 1, c_sum},             {"mean", 1, c_mean},
    {"max", 1, c_max},             {"min", 1, c_min},
    {"prod", 1, c_prod},           {"cumsum", 1, c_cumsum},
    {"cumprod", 1, c_cumprod},     {"argmax", 1, c_argmax},
    {"argmin", 1, c_argmin},       {"softmax", 1, c_softmax},
    {"log_softmax", 1, c_log_softmax}, {"reshape", 1, c_reshape},
    {"permute", 1, c_permute},     {"transpose", 1, c_transpose},
    {"expand", 1, c_expand},       {"slice", 1, c_slice},
    {"concat", 2, c_concat},       {"stack", 2, c_stack},
    {"pad", 1, c_pad},             {"pad", 1, c_pad_reflect},
    {"pad", 1, c_pad_replicate},   {"pad", 1, c_pad_with_const},
    {"index_select", 2, c_index_select}, {"gather", 2, c_gather},
    {"one_hot", 1, c_one_hot},     {"sort", 1, c_sort_values},
    {"sort", 1, c_sort_indices},   {"argsort", 1, c_argsort},
    {"topk", 1, c_topk_values},    {"topk", 1, c_topk_indices},
    {"scatter", 3, c_scatter},     {"scatter_add", 3, c_scatter_add},
    {"index_add", 3, c_index_add}, {"index_put", 3, c_index_put},
    {"index_put", 3, c_index_put_acc}, {"clamp", 1, c_clamp},
    {"clamp", 1, c_clamp_lo},      {"clamp", 1, c_clamp_none},
    {"flip", 1, c_flip},           {"roll", 1, c_roll},
    {"tril", 1, c_tril},           {"triu", 1, c_triu},
    {"matmul", 2, c_matmul},       {"dynamic", 1, c_dynamic},
    {"dynamic_bounded", 1, c_dynamic_bounded},
};

/* The elementwise builders of the op table. */
typedef kiln_tensor (*un_fn)(kiln_tensor, kiln_loc);
typedef kiln_tensor (*bin_fn)(kiln_tensor, kiln_tensor, kiln_loc);
typedef kiln_tensor (*bs_fn)(kiln_tensor, double, kiln_loc);
typedef struct ew_case {
  const char *op;
  un_fn un;
  bin_fn bin;
  bs_fn s, c;
} ew_case;
#define KILN_PUB_NONE
#define KILN_PUB_UNARY(fn) {#fn, kiln_##fn##_at, NULL, NULL, NULL},
#define KILN_PUB_BINARY(fn) {#fn, NULL, kiln_##fn##_at, kiln_##fn##_s_at, kiln_##fn##_c_at},
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, IN, OUT, FLAGS, COST, F32, F64, INT, VJP, DOC) PUB
static const ew_case EW[] = {
#include "kiln/ops.def"
};
#undef KILN_OP
#undef KILN_PUB_NONE
#undef KILN_PUB_UNARY
#undef KILN_PUB_BINARY
#define N_EW ((int)(sizeof EW / sizeof EW[0]))
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The elementwise form number f of EW[i] (0 tensor-tensor or unary, 1 _s,
 * 2 _c) with input pos replaced. */
static kiln_tensor ew_call(int i, int f, kiln_tensor b, int pos) {
  const ew_case *e = &EW[i];
  if (e->un) return e->un(b, KILN_HERE);
  if (f == 1) return e->s(b, 2.0, KILN_HERE);
  if (f == 2) return e->c(b, 2.0, KILN_HERE);
  return e->bin(PICK(pos, 0, b, good_f()), PICK(pos, 1, b, good_f()), KILN_HERE);
}
static int ew_forms(int i) { return EW[i].un ? 1 : 3; }
static int ew_inputs(int i, int f) { return EW[i].bin && f == 0 ? 2 : 1; }

/* A handle from before kiln_shutdown() + kiln_init(). */
static kiln_tensor pre_shutdown;

/* The bad handles of kinds (a)-(c), with the status each must give. */
static kiln_tensor bad_handle(int kind, kiln_status *st, const char **what) {
  if (kind == 0) {
    *st = KILN_ERR_INVALID_ARGUMENT, *what = "the null tensor";
    return (kiln_tensor){0, 0};
  }
  *st = KILN_ERR_STALE_HANDLE;
  if (kind == 1) {
    *what = "a released handle";
    kiln_tensor r = kiln_keep(good_f());
    kiln_release(r);
    return r;
  }
  *what = "a handle from before kiln_shutdown";
  return pre_shutdown;
}

KT_TEST(test_setup_pre_shutdown_handle) {
  pre_shutdown = kiln_keep(good_f());
  kiln_shutdown();
  KT_CHECK(kiln_init(NULL) == KILN_OK);
  KT_CHECK(!kiln_is_valid(pre_shutdown));
  kiln_clear_error();
  KT_CHECK(sane());
}

KT_TEST(test_bad_handles_name_the_builder) {
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < N_CASES; i++)
      for (int p = 0; p < CASES[i].n_in; p++) {
        kiln_status st;
        const char *what;
        kiln_tensor b = bad_handle(k, &st, &what);
        char w[96];
        snprintf(w, sizeof w, "%s as input %d", what, p);
        EXPECT(CASES[i].call(b, p), st, CASES[i].op, w);
      }
  kiln_mark_step();
}

KT_TEST(test_bad_handles_name_the_elementwise_builder) {
  KT_CHECK(N_EW > 40);
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < N_EW; i++)
      for (int f = 0; f < ew_forms(i); f++)
        for (int p = 0; p < ew_inputs(i, f); p++) {
          kiln_status st;
          const char *what;
          kiln_tensor b = bad_handle(k, &st, &what);
          char w[96];
          snprintf(w, sizeof w, "%s as input %d of form %d", what, p, f);
          EXPECT(ew_call(i, f, b, p), st, EW[i].op, w);
        }
  kiln_mark_step();
}

/* (d): a poisoned input, with its error still recorded: the result is
 * poisoned and the first message stays; after kiln_clear_error() a
 * poisoned input still gives a poisoned result and records nothing. */
static void poisoned_case(kiln_tensor (*call)(kiln_tensor, int), int pos, const char *op, int line) {
  for (int cleared = 0; cleared < 2; cleared++) {
    const int64_t bad[1] = {-3};
    kiln_tensor pz = kiln_full(KILN_F32, 1, bad, 1.0);
    char first[512];
    snprintf(first, sizeof first, "%s", kiln_last_error() ? kiln_last_error() : "");
    if (cleared) kiln_clear_error();
    kiln_tensor r = call(pz, pos);
    if (kiln_is_valid(r)) KT_FAIL("line %d: %s: poisoned input %d gives a valid result", line, op, pos);
    if (cleared && kiln_last_status() != KILN_OK)
      KT_FAIL("line %d: %s: a poisoned input %d recorded a new error: %s", line, op, pos, kiln_last_error());
    if (!cleared && (kiln_last_status() != KILN_ERR_INVALID_ARGUMENT || strcmp(kiln_last_error(), first)))
      KT_FAIL("line %d: %s: the first error changed: \"%s\" -> \"%s\"", line, op, first, kiln_last_error());
    kiln_clear_error();
  }
}

static kiln_tensor ew_poison_call(kiln_tensor b, int pos);
static int ew_cur_i, ew_cur_f;
static kiln_tensor ew_poison_call(kiln_tensor b, int pos) { return ew_call(ew_cur_i, ew_cur_f, b, pos); }

KT_TEST(test_poisoned_inputs_add_no_message) {
  for (int i = 0; i < N_CASES; i++)
    for (int p = 0; p < CASES[i].n_in; p++) poisoned_case(CASES[i].call, p, CASES[i].op, __LINE__);
  for (int i = 0; i < N_EW; i++)
    for (int f = 0; f < ew_forms(i); f++)
      for (int p = 0; p < ew_inputs(i, f); p++) {
        ew_cur_i = i, ew_cur_f = f;
        poisoned_case(ew_poison_call, p, EW[i].op, __LINE__);
      }
  KT_CHECK(sane());
  kiln_mark_step();
}


#define INV KILN_ERR_INVALID_ARGUMENT

/* (e) a dtype the op does not take, (f) an out-of-range axis or a bad
 * attribute: each names the builder the program called. */
KT_TEST(test_bad_attributes_name_the_builder) {
  kiln_tensor x = good_f(), ix = good_idx23(), i2 = good_idx2();
  kiln_tensor xi = kiln_cast(x, KILN_I32), xb = kiln_gt_c(x, 2.0);
  const int ax9[1] = {9}, ax00[2] = {0, 0}, pbad[2] = {0, 0};
  const int64_t s7[1] = {7}, s99[2] = {9, 9}, lo_bad[2] = {-5, 0}, hi0[2] = {0, 0}, lo3[2] = {3, 0};
  const int64_t neg[1] = {-2}, huge[4] = {INT64_MAX / 2, INT64_MAX / 2, 4, 4};
  kiln_tensor v, w;
  EXPECT(kiln_sum(x, 1, ax9, false), INV, "sum", "axis 9");
  EXPECT(kiln_sum(x, 2, ax00, false), INV, "sum", "axis twice");
  EXPECT(kiln_mean(x, 1, ax9, false), INV, "mean", "axis 9");
  EXPECT(kiln_mean(x, -1, ax9, false), INV, "mean", "negative axis count");
  EXPECT(kiln_max(x, 1, ax9, false), INV, "max", "axis 9");
  EXPECT(kiln_min(x, 1, ax9, false), INV, "min", "axis 9");
  EXPECT(kiln_prod(x, 1, ax9, false), INV, "prod", "axis 9");
  EXPECT(kiln_sum(x, 1, NULL, false), INV, "sum", "NULL axes");
  EXPECT(kiln_cumsum(x, 9), INV, "cumsum", "axis 9");
  EXPECT(kiln_cumprod(x, -9), INV, "cumprod", "axis -9");
  EXPECT(kiln_argmax(x, 9, false), INV, "argmax", "axis 9");
  EXPECT(kiln_argmin(x, 9, false), INV, "argmin", "axis 9");
  EXPECT(kiln_softmax(x, 9), INV, "softmax", "axis 9");
  EXPECT(kiln_log_softmax(x, -3), INV, "log_softmax", "axis -3");
  EXPECT(kiln_reshape(x, 1, s7), INV, "reshape", "7 elements from 6");
  EXPECT(kiln_reshape(x, 1, neg), INV, "reshape", "size -2");
  EXPECT(kiln_permute(x, pbad), INV, "permute", "axis twice");
  EXPECT(kiln_permute(x, NULL), INV, "permute", "NULL perm");
  EXPECT(kiln_transpose(x, 0, 9), INV, "transpose", "axis 9");
  EXPECT(kiln_expand(x, 2, s99), INV, "expand", "[2,3] to [9,9]");
  EXPECT(kiln_expand(x, 4, huge), INV, "expand", "overflowing size");
  EXPECT(kiln_slice(x, 9, 0, 1, 1), INV, "slice", "axis 9");
  EXPECT(kiln_slice(x, 1, 0, 1, 0), INV, "slice", "step 0");
  kiln_tensor cx[2] = {x, kiln_transpose(x, 0, 1)};
  EXPECT(kiln_concat(2, cx, 0), INV, "concat", "[2,3] with [3,2]");
  EXPECT(kiln_concat(2, cx, 9), INV, "concat", "axis 9");
  EXPECT(kiln_concat(0, cx, 0), INV, "concat", "no tensors");
  EXPECT(kiln_stack(2, cx, 0), INV, "stack", "[2,3] with [3,2]");
  EXPECT(kiln_stack(2, cx, 9), INV, "stack", "axis 9");
  EXPECT(kiln_stack(0, NULL, 0), INV, "stack", "no tensors");
  EXPECT(kiln_pad(x, lo_bad, hi0, 0.0), INV, "pad", "removing 5 of 2");
  EXPECT(kiln_pad_with(x, lo3, hi0, KILN_PAD_REFLECT, 0.0), INV, "pad", "reflect 3 on 2");
  EXPECT(kiln_pad_with(x, lo_bad, hi0, KILN_PAD_REPLICATE, 0.0), INV, "pad", "replicate -5");
  EXPECT(kiln_pad_with(x, lo3, hi0, (kiln_pad_mode)7, 0.0), INV, "pad", "mode 7");
  EXPECT(kiln_pad_with(x, lo_bad, hi0, KILN_PAD_CONSTANT, 0.0), INV, "pad", "constant -5");
  EXPECT(kiln_pad_with(xi, lo3, hi0, KILN_PAD_CONSTANT, 0.5e30), INV, "pad", "i32 value 5e29");
  EXPECT(kiln_index_select(x, 9, i2), INV, "index_select", "axis 9");
  EXPECT(kiln_index_select(x, 0, x), INV, "index_select", "f32 index");
  EXPECT(kiln_gather(x, 9, ix), INV, "gather", "axis 9");
  EXPECT(kiln_gather(x, 1, x), INV, "gather", "f32 index");
  EXPECT(kiln_gather(x, 1, i2), INV, "gather", "1-D index of a 2-D tensor");
  EXPECT(kiln_one_hot(i2, -1, KILN_F32), INV, "one_hot", "n = -1");
  EXPECT(kiln_one_hot(x, 3, KILN_F32), INV, "one_hot", "f32 index");
  EXPECT(kiln_one_hot(i2, 3, (kiln_dtype)99), INV, "one_hot", "dtype 99");
  kiln_sort(x, 9, false, &v, &w);
  EXPECT(v, INV, "sort", "axis 9");
  KT_CHECK(!kiln_is_valid(w));
  EXPECT(kiln_argsort(x, 9, false), INV, "argsort", "axis 9");
  kiln_topk(x, 4, 1, true, &v, &w);
  EXPECT(v, INV, "topk", "k 4 of 3");
  KT_CHECK(!kiln_is_valid(w));
  kiln_topk(x, -1, 1, true, NULL, &w);
  EXPECT(w, INV, "topk", "k -1");
  kiln_topk(x, 1, 9, true, &v, NULL);
  EXPECT(v, INV, "topk", "axis 9");
  EXPECT(kiln_scatter(x, 9, ix, x), INV, "scatter", "axis 9");
  EXPECT(kiln_scatter(x, 1, x, x), INV, "scatter", "f32 index");
  EXPECT(kiln_scatter(x, 1, ix, xi), INV, "scatter", "i32 values into f32");
  EXPECT(kiln_scatter_add(xb, 1, ix, xb), INV, "scatter_add", "bool");
  EXPECT(kiln_scatter_add(x, 1, i2, x), INV, "scatter_add", "1-D index");
  EXPECT(kiln_index_add(x, 9, i2, x), INV, "index_add", "axis 9");
  EXPECT(kiln_index_add(x, 0, ix, x), INV, "index_add", "2-D index");
  EXPECT(kiln_index_add(x, 0, i2, xi), INV, "index_add", "i32 source into f32");
  EXPECT(kiln_index_add(x, 1, i2, x), INV, "index_add", "source [2,3] for axis 1 of 2");
  EXPECT(kiln_index_put(x, ix, x, false), INV, "index_put", "2-D index");
  EXPECT(kiln_index_put(x, i2, kiln_cast(x, KILN_F64), false), INV, "index_put", "f64 values into f32");
  EXPECT(kiln_index_put(x, i2, xi, true), INV, "index_put", "i32 values, accumulate");
  EXPECT(kiln_index_put(xb, i2, xb, true), INV, "index_put", "bool, accumulate");
  EXPECT(kiln_index_put(x, i2, kiln_transpose(x, 0, 1), false), INV, "index_put", "[3,2] values for [2,3]");
  EXPECT(kiln_index_put(kiln_sum(x, 0, NULL, false), i2, x, false), INV, "index_put", "0-d x");
  EXPECT(kiln_clamp(x, 4.0, 1.0), INV, "clamp", "lo above hi");
  EXPECT(kiln_clamp(xi, 1e20, INFINITY), INV, "clamp", "i32 lower bound 1e20");
  EXPECT(kiln_clamp(xi, -INFINITY, -1e20), INV, "clamp", "i32 upper bound -1e20");
  /* not errors: a NaN bound makes an i32 clamp f32 NaN, as torch.clamp */
  kiln_tensor cn = kiln_clamp(xi, NAN, 1.0);
  KT_CHECK(kiln_dtype_of(cn) == KILN_F32 && isnan(kiln_item_f64(kiln_sum(cn, 0, NULL, false))));
  KT_CHECK(kiln_last_status() == KILN_OK);
  int32_t ci[6];
  KT_CHECK(kiln_to_host(kiln_clamp(xi, 2.0, 4.0), ci, sizeof ci) == KILN_OK);
  KT_CHECK(ci[0] == 2 && ci[2] == 3 && ci[4] == 4 && ci[5] == 4);
  EXPECT(kiln_flip(x, 1, ax9), INV, "flip", "axis 9");
  EXPECT(kiln_flip(x, 2, ax00), INV, "flip", "axis twice");
  EXPECT(kiln_flip(x, 1, NULL), INV, "flip", "NULL axes");
  EXPECT(kiln_roll(x, 1, 9), INV, "roll", "axis 9");
  EXPECT(kiln_tril(i2, 0), INV, "tril", "rank 1");
  EXPECT(kiln_triu(kiln_sum(x, 0, NULL, false), 0), INV, "triu", "rank 0");
  EXPECT(kiln_matmul(x, x), INV, "matmul", "[2,3] @ [2,3]");
  EXPECT(kiln_matmul(x, kiln_sum(x, 0, NULL, false)), INV, "matmul", "0-d operand");
  EXPECT(kiln_matmul(xb, xb), INV, "matmul", "bool");
  EXPECT(kiln_where(xb, x, kiln_transpose(x, 0, 1)), INV, "where", "[2,3] with [3,2]");
  EXPECT(kiln_cast(x, (kiln_dtype)99), INV, "cast", "dtype 99");
  /* kiln_dynamic returns t itself (documented), the error recorded; a
   * size above the bound poisons */
  EXPECT_T(kiln_dynamic(x, 9), INV, "dynamic", "axis 9");
  EXPECT(kiln_dynamic_bounded(x, 0, 1), INV, "dynamic_bounded", "max 1");
  EXPECT_T(kiln_dynamic_bounded(x, 9, 8), INV, "dynamic_bounded", "axis 9");
  kiln_mark_step();
}

/* The sources and the elementwise builders' attributes. */
KT_TEST(test_bad_attributes_of_sources_and_elementwise) {
  const int64_t neg[1] = {-2}, huge[4] = {INT64_MAX / 2, INT64_MAX / 2, 4, 4};
  float a[2] = {1, 2};
  EXPECT(kiln_from_host(a, KILN_F32, 1, neg), INV, "from_host", "size -2");
  EXPECT(kiln_from_host(NULL, KILN_F32, 1, SH23), INV, "from_host", "NULL data");
  EXPECT(kiln_from_host(a, (kiln_dtype)99, 1, SH23), INV, "from_host", "dtype 99");
  EXPECT(kiln_from_host(a, KILN_F32, -1, SH23), INV, "from_host", "rank -1");
  EXPECT(kiln_full(KILN_F32, 1, neg, 1.0), INV, "full", "size -2");
  EXPECT(kiln_full(KILN_F32, 4, huge, 1.0), INV, "full", "overflowing size");
  EXPECT(kiln_full(KILN_I32, 1, SH23, 1e20), INV, "full", "i32 value 1e20");
  EXPECT(kiln_full((kiln_dtype)99, 1, SH23, 1.0), INV, "full", "dtype 99");
  EXPECT(kiln_arange(KILN_F32, 0, 4, 0), INV, "arange", "step 0");
  EXPECT(kiln_arange(KILN_F32, 0, NAN, 1), INV, "arange", "stop NaN");
  EXPECT(kiln_arange(KILN_F32, 0, 1e300, 1e-300), INV, "arange", "too many elements");
  EXPECT(kiln_arange(KILN_BOOL, 0, 4, 1), INV, "arange", "bool");
  EXPECT(kiln_rand((kiln_rand_kind)5, KILN_F32, 1, SH23, 1), INV, "rand", "kind 5");
  EXPECT(kiln_rand(KILN_RAND_UNIFORM, KILN_I32, 1, SH23, 1), INV, "rand", "i32");
  EXPECT(kiln_rand(KILN_RAND_UNIFORM, KILN_F32, 4, huge, 1), INV, "rand", "overflowing size");
  EXPECT(kiln_scalar((kiln_dtype)99, 1.0), INV, "scalar", "dtype 99");
  EXPECT(kiln_scalar(KILN_U8, -1.0), INV, "scalar", "u8 -1");
  EXPECT(kiln_constant((kiln_dtype)99, 1.0), INV, "constant", "dtype 99");
  EXPECT(kiln_constant(KILN_I8, 300.0), INV, "constant", "i8 300");
  kiln_tensor x = good_f(), xi = kiln_cast(x, KILN_I32), y = kiln_transpose(x, 0, 1);
  for (int i = 0; i < N_EW; i++) {
    if (EW[i].un) continue;
    char w[64];
    snprintf(w, sizeof w, "[2,3] with [3,2]");
    EXPECT(EW[i].bin(x, y, KILN_HERE), INV, EW[i].op, w);
    if (!strncmp(EW[i].op, "logical_", 8)) continue; /* bool operands: any value is representable */
    EXPECT(EW[i].c(xi, 1e20, KILN_HERE), INV, EW[i].op, "i32 with constant 1e20");
    EXPECT(EW[i].s(xi, -1e20, KILN_HERE), INV, EW[i].op, "i32 with scalar -1e20");
  }
  kiln_mark_step();
}


/* A result too large for int64 (made lazily: nothing is allocated) is
 * refused naming the builder, not the inner node that would overflow
 * ("expand" for a broadcasting add, "concat" for stack or a padding). */
KT_TEST(test_oversized_results_name_the_builder) {
  const int64_t col[2] = {1LL << 31, 1}, row[2] = {1, 1LL << 31}, big[2] = {1LL << 29, 1LL << 30};
  kiln_tensor c = kiln_exp(kiln_full(KILN_F32, 2, col, 1.0)), r = kiln_exp(kiln_full(KILN_F32, 2, row, 1.0));
  for (int i = 0; i < N_EW; i++) {
    if (!EW[i].bin) continue;
    kiln_tensor o = EW[i].bin(c, r, KILN_HERE);
    if (strncmp(EW[i].op, "logical_", 8)) {
      EXPECT(o, INV, EW[i].op, "[2^31,1] with [1,2^31]");
    } else { /* computed in bool: 2^62 bytes fit */
      KT_CHECK(kiln_is_valid(o) && kiln_last_status() == KILN_OK);
    }
  }
  EXPECT(kiln_where(kiln_gt_c(c, 0.0), c, r), INV, "where", "[2^31,1] with [1,2^31]");
  kiln_tensor x = kiln_exp(kiln_full(KILN_F32, 2, big, 1.0));
  KT_CHECK(kiln_is_valid(x));
  kiln_tensor xs[4] = {x, x, x, x};
  EXPECT(kiln_stack(4, xs, 0), INV, "stack", "4 x [2^29,2^30] f32");
  EXPECT(kiln_concat(4, xs, 0), INV, "concat", "4 x [2^29,2^30] f32");
  const int64_t lo[2] = {1LL << 30, 0}, hi[2] = {1LL << 30, 0};
  EXPECT(kiln_pad_with(x, lo, hi, KILN_PAD_REPLICATE, 0.0), INV, "pad", "replicate to 5 x 2^59 elements");
  EXPECT(kiln_pad(x, lo, hi, 0.0), INV, "pad", "constant to 5 x 2^59 elements");
  kiln_mark_step();
}


/* sort / topk of a 0-d tensor: the values are a tensor of their own (as
 * torch.sort's), not the input's handle; after an error (a bad axis or k)
 * they are poisoned, not the input. */
KT_TEST(test_sort_of_0d_values_are_their_own) {
  kiln_tensor x = kiln_keep(kiln_constant(KILN_F32, 5.0)), v, w, i;
  kiln_sort(x, 0, false, &v, &i);
  kiln_topk(x, 1, -1, true, &w, NULL);
  KT_CHECK(v.index != x.index && w.index != x.index);
  kiln_keep(v);
  kiln_keep(w);
  kiln_assign(x, kiln_constant(KILN_F32, 7.0));
  KT_CHECK(kiln_item_f64(v) == 5.0 && kiln_item_f64(w) == 5.0); /* torch: 5 */
  KT_CHECK(kiln_item_i64(i) == 0);
  kiln_release(v);
  kiln_release(w);
  KT_CHECK(kiln_is_valid(x) && kiln_item_f64(x) == 7.0 && kiln_last_status() == KILN_OK);
  kiln_sort(x, 3, false, &v, &i);
  KT_CHECK(!kiln_is_valid(i));
  EXPECT(v, INV, "sort", "0-d, axis 3");
  kiln_topk(x, 2, 0, true, &v, &i);
  KT_CHECK(!kiln_is_valid(i));
  EXPECT(v, INV, "topk", "0-d, k 2");
  kiln_release(x);
  kiln_mark_step();
}

/* A NULL lo or hi pads nothing on that side, in every mode (kiln_pad's
 * rule; reflect and replicate refused NULL). Against the same call with
 * explicit zeros and against values written here: x = [[1,2,3],[4,5,6]]. */
KT_TEST(test_pad_with_null_side_is_zero) {
  const float xv[6] = {1, 2, 3, 4, 5, 6};
  const int64_t xs[2] = {2, 3}, lo[2] = {0, 2}, z[2] = {0, 0};
  kiln_tensor x = kiln_from_host(xv, KILN_F32, 2, xs);
  const float want_reflect[10] = {3, 2, 1, 2, 3, 6, 5, 4, 5, 6}, want_rep[10] = {1, 1, 1, 2, 3, 4, 4, 4, 5, 6};
  const kiln_pad_mode modes[2] = {KILN_PAD_REFLECT, KILN_PAD_REPLICATE};
  for (int m = 0; m < 2; m++) {
    float a[10] = {0}, b[10] = {0}, c[6] = {0};
    KT_EQ_INT(kiln_to_host(kiln_pad_with(x, lo, NULL, modes[m], 0.0), a, sizeof a), KILN_OK);
    KT_EQ_INT(kiln_to_host(kiln_pad_with(x, lo, z, modes[m], 0.0), b, sizeof b), KILN_OK);
    KT_EQ_INT(kiln_to_host(kiln_pad_with(x, NULL, NULL, modes[m], 0.0), c, sizeof c), KILN_OK);
    KT_CHECK(!memcmp(a, m ? want_rep : want_reflect, sizeof a) && !memcmp(a, b, sizeof a));
    KT_CHECK(!memcmp(c, xv, sizeof c));
  }
  KT_EQ_INT(kiln_last_status(), KILN_OK);
  kiln_mark_step();
}

KT_MAIN(KT_CASE(test_setup_pre_shutdown_handle), KT_CASE(test_bad_handles_name_the_builder),
        KT_CASE(test_bad_handles_name_the_elementwise_builder), KT_CASE(test_poisoned_inputs_add_no_message),
        KT_CASE(test_bad_attributes_name_the_builder), KT_CASE(test_bad_attributes_of_sources_and_elementwise),
        KT_CASE(test_oversized_results_name_the_builder),
        KT_CASE(test_sort_of_0d_values_are_their_own), KT_CASE(test_pad_with_null_side_is_zero))
