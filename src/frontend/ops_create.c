/* Creation builders and handle-level API (keep, release, assign, queries). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/api.h"

static int check_shape(kiln_frontend *fe, const char *op, int rank, const int64_t *shape, kiln_loc loc) {
  if (rank < 0 || rank > KILN_MAX_RANK) {
    kiln_api_fail(fe, loc, "%s: rank %d is out of range [0,%d]", op, rank, KILN_MAX_RANK);
    return -1;
  }
  if (rank && !shape) {
    kiln_api_fail(fe, loc, "%s: the shape of rank %d is NULL", op, rank);
    return -1;
  }
  for (int i = 0; i < rank; i++)
    if (shape[i] < 0) {
      kiln_api_fail(fe, loc, "%s: negative dimension %lld at axis %d", op, (long long)shape[i], i);
      return -1;
    }
  if (!kiln_fe_shape_ok(KILN_F64, rank, shape)) { /* the widest dtype: any cast of it fits too */
    char sa[160];
    kiln_api_fail(fe, loc, "%s: shape %s has more elements or bytes than int64 holds", op,
                  kiln_fe_shape_str(rank, shape, sa, sizeof sa));
    return -1;
  }
  return 0;
}

static int check_dtype(kiln_frontend *fe, const char *op, kiln_dtype dt, kiln_loc loc) {
  if ((unsigned)dt < KILN_DTYPE_COUNT) return 0;
  kiln_api_fail(fe, loc, "%s: unknown dtype %d", op, (int)dt);
  return -1;
}

kiln_tensor kiln_from_host_at(const void *data, kiln_dtype dt, int rank, const int64_t *shape, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  if (check_dtype(fe, "from_host", dt, loc) || check_shape(fe, "from_host", rank, shape, loc))
    return kiln_fe_poison(fe, loc);
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  size_t bytes = (size_t)n * kiln_dtype_size(dt);
  if (bytes && !data) return kiln_api_fail(fe, loc, "from_host: data is NULL for %lld elements", (long long)n);
  /* bool: any non-zero byte is true, stored as 1 (as NumPy's and PyTorch's
   * bool views of bytes read it); the kernels assume 0 or 1 */
  uint8_t *norm = NULL;
  if (dt == KILN_BOOL) {
    const uint8_t *u = data;
    size_t i = 0;
    while (i < bytes && u[i] <= 1) i++;
    if (i < bytes) {
      if (!(norm = malloc(bytes)))
        return kiln_api_fail_at(KILN_ERR_OUT_OF_MEMORY, loc, "from_host: out of memory for %zu bytes", bytes);
      for (size_t k = 0; k < bytes; k++) norm[k] = u[k] != 0;
      data = norm;
    }
  }
  kiln_buf *b = fe->hooks.upload(fe->hooks.ctx, data, bytes, loc);
  free(norm);
  if (!b) return kiln_fe_poison(fe, loc);
  return kiln_fe_tensor_buf(fe, b, dt, rank, shape, loc);
}

kiln_tensor kiln_full_at(kiln_dtype dt, int rank, const int64_t *shape, double v, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  if (check_dtype(fe, "full", dt, loc) || check_shape(fe, "full", rank, shape, loc) ||
      kiln_api_check_value(dt, &v, "full", loc))
    return kiln_fe_poison(fe, loc);
  return kiln_fe_tensor(fe, kiln_api_const(fe, dt, rank, shape, v, loc), loc);
}

kiln_tensor kiln_arange_at(kiln_dtype dt, double start, double stop, double step, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  if (check_dtype(fe, "arange", dt, loc)) return kiln_fe_poison(fe, loc);
  if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step) || dt == KILN_BOOL)
    return kiln_api_fail(fe, loc, "arange: bad range (%g, %g, %g) for %s", start, stop, step, kiln_dtype_name(dt));
  double len = ceil((stop - start) / step);
  if (len < 0) len = 0;
  if (len > 1e12) return kiln_api_fail(fe, loc, "arange: %g elements is too many", len);
  /* integers: the step's fraction would be dropped (a step of 0.5 gave
   * zeros; PyTorch: an error or a different length) */
  if (!kiln_dtype_is_float(dt) && step != trunc(step))
    return kiln_api_fail(fe, loc, "arange: the step %g of an integer arange (%s) is not an integer", step,
                         kiln_dtype_name(dt));
  /* start + i * step computed in PyTorch's accumulation type and rounded
   * once to dt: double for f32 and f64, float for bf16 and f16 (computed in
   * f32, arange(0, 1, 0.3) gave 0.900000036 for 0.899999976); int64 for the
   * integers, then wrapped to dt (computed in i32, arange(-3e9, 0, 1e9) was
   * an i32 constant of -3e9: INT32_MIN on cpu, an internal error on ref).
   * start and step must fit int64, as in PyTorch (1e29 was INT64_MIN). */
  if (!kiln_dtype_is_float(dt) &&
      (kiln_api_check_value(KILN_I64, &start, "arange", loc) || kiln_api_check_value(KILN_I64, &step, "arange", loc)))
    return kiln_fe_poison(fe, loc);
  kiln_dtype cdt = dt == KILN_F32 ? KILN_F64 : kiln_dt_is_half(dt) ? KILN_F32 : kiln_dtype_is_float(dt) ? dt : KILN_I64;
  int64_t n = (int64_t)len, axis = 0;
  kiln_node *io = kiln_fe_node(fe, KILN_OP_IOTA, cdt, 1, &n, 0, NULL, 1, &axis, 0.0, loc);
  kiln_node *r = io;
  if (r && step != 1) {
    kiln_node *in[2] = {r, kiln_api_const(fe, cdt, 1, &n, step, loc)};
    r = in[1] ? kiln_fe_node(fe, KILN_OP_MUL, cdt, 1, &n, 2, in, 0, NULL, 0.0, loc) : NULL;
  }
  if (r && start != 0) {
    kiln_node *in[2] = {r, kiln_api_const(fe, cdt, 1, &n, start, loc)};
    r = in[1] ? kiln_fe_node(fe, KILN_OP_ADD, cdt, 1, &n, 2, in, 0, NULL, 0.0, loc) : NULL;
  }
  if (r && cdt != dt) r = kiln_api_cast(fe, r, dt, loc);
  return kiln_fe_tensor(fe, r, loc);
}

kiln_tensor kiln_rand_at(kiln_rand_kind kind, kiln_dtype dt, int rank, const int64_t *shape, uint64_t seed,
                         kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  if (check_dtype(fe, "rand", dt, loc) || check_shape(fe, "rand", rank, shape, loc)) return kiln_fe_poison(fe, loc);
  if (!kiln_dtype_is_float(dt) || (kind != KILN_RAND_UNIFORM && kind != KILN_RAND_NORMAL))
    return kiln_api_fail(fe, loc, "rand: needs a floating-point dtype (got %s) and kind 0 or 1", kiln_dtype_name(dt));
  kiln_node *s = kiln_fe_scalar_node(fe, KILN_I64, 0.0, (int64_t)seed, loc);
  int64_t k = kind;
  kiln_node *r = s ? kiln_fe_node(fe, KILN_OP_RANDOM, dt, rank, shape, 1, &s, 1, &k, 0.0, loc) : NULL;
  return kiln_fe_tensor(fe, r, loc);
}

kiln_tensor kiln_scalar_at(kiln_dtype dt, double v, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  if (check_dtype(fe, "scalar", dt, loc) || kiln_api_check_value(dt, &v, "scalar", loc)) return kiln_fe_poison(fe, loc);
  return kiln_fe_tensor(fe, kiln_fe_scalar_node(fe, dt, v, kiln_api_i64(v), loc), loc);
}

kiln_tensor kiln_constant_at(kiln_dtype dt, double v, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  if (check_dtype(fe, "constant", dt, loc) || kiln_api_check_value(dt, &v, "constant", loc))
    return kiln_fe_poison(fe, loc);
  return kiln_fe_tensor(fe, kiln_api_const(fe, dt, 0, NULL, v, loc), loc);
}

/* ── handle-level API ── */

static kiln_tslot *peek(kiln_tensor t) {
  kiln_frontend *fe = kiln_api_frontend_at((kiln_loc){0});
  if (!fe || t.index >= fe->n_slots || !fe->slots[t.index].live || fe->slots[t.index].gen != t.gen || !t.gen)
    return NULL;
  return &fe->slots[t.index];
}

bool kiln_is_valid(kiln_tensor t) {
  kiln_tslot *s = peek(t);
  return s && !s->poisoned;
}
int kiln_rank(kiln_tensor t) {
  kiln_tslot *s = peek(t);
  return s && !s->poisoned ? s->rank : -1;
}
int64_t kiln_dim(kiln_tensor t, int axis) {
  kiln_tslot *s = peek(t);
  if (!s || s->poisoned) return -1;
  int a = kiln_api_axis(axis, s->rank);
  return a < 0 || !s->rank ? -1 : s->shape[a];
}
int64_t kiln_numel(kiln_tensor t) {
  kiln_tslot *s = peek(t);
  if (!s || s->poisoned) return -1;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->shape[i];
  return n;
}
kiln_dtype kiln_dtype_of(kiln_tensor t) {
  kiln_tslot *s = peek(t);
  return s ? (kiln_dtype)s->dtype : KILN_DTYPE_COUNT;
}
int kiln_shape(kiln_tensor t, int64_t *out) {
  kiln_tslot *s = peek(t);
  if (!s || s->poisoned) return -1;
  if (out) memcpy(out, s->shape, sizeof(int64_t) * s->rank);
  return s->rank;
}

/* Mark dimension `axis` of t dynamic; max > 0: its size must not exceed
 * max (a contract the program states: a size above it is its error, here,
 * not a graph compiled for it). */
static kiln_tensor mark_dynamic(kiln_tensor t, int axis, int64_t max, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return t;
  const char *op = max ? "dynamic_bounded" : "dynamic";
  kiln_tslot *s = kiln_fe_slot(fe, t, op, loc);
  if (!s || s->poisoned) return t;
  int a = axis < 0 ? axis + s->rank : axis;
  char sb[128];
  if (a < 0 || a >= s->rank) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "%s: axis %d is out of range for shape %s", op, axis,
               kiln_fe_shape_str(s->rank, s->shape, sb, sizeof sb));
    return t;
  }
  if (max && (max < 2 || s->shape[a] > max))
    return kiln_api_fail(fe, loc, "%s: dimension %d of shape %s is %lld, %s %lld", op, a,
                         kiln_fe_shape_str(s->rank, s->shape, sb, sizeof sb), (long long)s->shape[a],
                         max < 2 ? "and a bound below 2 leaves no size to vary: bound" : "above its bound",
                         (long long)max);
  s->dyn |= (uint8_t)(1u << a);
  if (s->node && s->node->op == KILN_OP_LEAF) s->node->dyn |= (uint8_t)(1u << a); /* already an input of this step */
  return t;
}

kiln_tensor kiln_dynamic_at(kiln_tensor t, int axis, kiln_loc loc) { return mark_dynamic(t, axis, 0, loc); }

kiln_tensor kiln_dynamic_bounded_at(kiln_tensor t, int axis, int64_t max, kiln_loc loc) {
  if (max <= 0) max = 1; /* no bound is kiln_dynamic's: a bound of 0 or less is a mistake */
  return mark_dynamic(t, axis, max, loc);
}

kiln_tensor kiln_keep(kiln_tensor t) {
  kiln_frontend *fe = kiln_api_frontend_at((kiln_loc){0});
  if (!fe) return t;
  kiln_tslot *s = kiln_fe_slot(fe, t, "keep", (kiln_loc){0, 0});
  if (!s || s->kept) return t;
  if (fe->n_kept == fe->cap_kept) {
    uint32_t nc = fe->cap_kept ? fe->cap_kept * 2 : 64;
    uint32_t *nl = realloc(fe->kept_list, nc * sizeof *nl);
    if (!nl) {
      kiln_error(KILN_ERR_OUT_OF_MEMORY, (kiln_loc){0, 0}, "keep: out of memory");
      return t;
    }
    fe->kept_list = nl;
    fe->cap_kept = nc;
  }
  s->kept = 1;
  s->kept_pos = (int32_t)fe->n_kept;
  fe->kept_list[fe->n_kept++] = t.index;
  return t;
}

void kiln_release(kiln_tensor t) {
  if (!t.gen) return;
  kiln_frontend *fe = kiln_api_frontend_at((kiln_loc){0});
  if (!fe) return;
  kiln_tslot *s = kiln_fe_slot(fe, t, "release", (kiln_loc){0, 0});
  if (!s) return;
  if (s->kept) {
    /* swap-remove from the kept list */
    uint32_t last = fe->kept_list[--fe->n_kept];
    fe->kept_list[s->kept_pos] = last;
    fe->slots[last].kept_pos = s->kept_pos;
    s->kept = 0;
    s->kept_pos = -1;
  }
  /* Free now. If it was made this step, its step-list entry later finds
   * the slot dead (or reused, and then the entry of the new tensor decides). */
  kiln_fe_slot_free(fe, t.index);
}

void kiln_assign_at(kiln_tensor dst, kiln_tensor src, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return;
  kiln_tslot *d = kiln_fe_slot(fe, dst, "assign", loc), *s = NULL;
  kiln_node *n = NULL;
  int r = kiln_api_input(fe, src, "assign", loc, &s, &n);
  if (!d || r < 0) return;
  char sa[128], sb[128];
  if (r == 0 && (d->dtype != n->dtype || d->rank != n->rank ||
                 memcmp(d->shape, n->shape, sizeof(int64_t) * d->rank))) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "assign: destination %s %s and source %s %s differ",
               kiln_dtype_name(d->dtype), kiln_fe_shape_str(d->rank, d->shape, sa, sizeof sa),
               kiln_dtype_name(n->dtype), kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
    return;
  }
  if (r == 1) { /* poisoned source poisons the destination */
    kiln_fe_set_poisoned(fe, d);
    return;
  }
  if (d == s) return;
  if (d->node && d->node != n && kiln_fe_note_replaced(fe, dst, d->node, loc)) return;
  d->traced = NULL; /* a new value: the tape of the old one no longer describes it */
  if (n->op == KILN_OP_LEAF) { /* a computed value: share the buffer */
    kiln_buf_ref(n->buf);
    kiln_fe_set_computed(fe, d, n->buf);
    return;
  }
  /* The old buffer may be donated to the new value at the next cut. */
  if (d->buf) {
    kiln_buf_unref(d->donor);
    d->donor = d->buf;
    d->buf = NULL;
  }
  /* a tensor that requires grad keeps a node of its own: the source's uses are not its uses */
  d->node = d->grad_own && n != d->node ? kiln_fe_own_node(fe, n, 0) : n;
  if (!d->node) {
    kiln_error(KILN_ERR_OUT_OF_MEMORY, loc, "assign: out of memory");
    kiln_fe_set_poisoned(fe, d);
    return;
  }
  d->poisoned = 0;
}
