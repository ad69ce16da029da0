/* The runner of the edge-shape tests: reads SHAPES_REF (a file of tests/data
 * written by its .py script) and runs k_cases[N_CASES] of the including test
 * on ref and the backend under test, alone and fused. Included after the
 * case table. */
/* ───────────── reference data ───────────── */

typedef struct ref_line {
  char name[64];
  int error; /* PyTorch raised: kiln must report an error */
  char dt[8];
  int rank, m;
  int64_t shape[KILN_MAX_RANK];
  int64_t *pos;
  double *val;
} ref_line;

static ref_line k_ref[N_CASES + 32];
static int k_nref;

static int load_reference(void) {
  const char *dirs[3] = {getenv("KILN_TEST_DATA"), "tests/data", "../tests/data"};
  FILE *f = NULL;
  char path[1024];
  for (int i = 0; i < 3 && !f; i++) {
    if (!dirs[i]) continue;
    snprintf(path, sizeof path, "%s/%s", dirs[i], SHAPES_REF);
    f = fopen(path, "r");
  }
  if (!f) {
    KT_FAIL("tests/data/%s not found (set KILN_TEST_DATA)", SHAPES_REF);
    return -1;
  }
  static char line[1 << 14];
  while (fgets(line, sizeof line, f) && k_nref < (int)(sizeof k_ref / sizeof k_ref[0])) {
    if (line[0] == '#' || line[0] == '\n') continue;
    ref_line *r = &k_ref[k_nref++];
    char *save = NULL, *tok = strtok_r(line, " \n", &save);
    snprintf(r->name, sizeof r->name, "%s", tok);
    tok = strtok_r(NULL, " \n", &save);
    if (tok && !strcmp(tok, "error")) {
      r->error = 1;
      continue;
    }
    snprintf(r->dt, sizeof r->dt, "%s", strtok_r(NULL, " \n", &save));
    r->rank = atoi(strtok_r(NULL, " \n", &save));
    for (int d = 0; d < r->rank; d++) r->shape[d] = strtoll(strtok_r(NULL, " \n", &save), NULL, 10);
    r->m = atoi(strtok_r(NULL, " \n", &save));
    r->pos = calloc((size_t)r->m + 1, sizeof *r->pos);
    r->val = calloc((size_t)r->m + 1, sizeof *r->val);
    for (int k = 0; k < r->m; k++) {
      r->pos[k] = strtoll(strtok_r(NULL, " \n", &save), NULL, 10);
      r->val[k] = strtod(strtok_r(NULL, " \n", &save), NULL);
    }
  }
  fclose(f);
  return 0;
}

static const ref_line *find_ref(const char *name) {
  for (int i = 0; i < k_nref; i++)
    if (!strcmp(k_ref[i].name, name)) return &k_ref[i];
  return NULL;
}

static const char *dt_short(kiln_dtype dt) {
  switch (dt) {
    case KILN_F32: return "f32";
    case KILN_F64: return "f64";
    case KILN_I32: return "i32";
    case KILN_I64: return "i64";
    case KILN_BOOL: return "bool";
    default: return kiln_dtype_name(dt);
  }
}

static int verbose(void) {
  const char *v = getenv("SHAPES_VERBOSE");
  return v && *v && *v != '0';
}

/* one case on the current runtime, checked against its reference line */
static void run_case(const shape_case *c, const ref_line *r, const char *where) {
  g_nleaf = g_nln = g_nemb = 0;
  kiln_clear_error();
  kiln_tensor y = fuse(c->fn());
  int64_t n = kiln_is_valid(y) ? kiln_numel(y) : 0;
  int rank = kiln_is_valid(y) ? kiln_rank(y) : -1;
  int64_t shape[KILN_MAX_RANK] = {0};
  if (rank >= 0) kiln_shape(y, shape);
  kiln_dtype dt = kiln_dtype_of(y);
  void *got = calloc((size_t)(n > 0 ? n : 1), 8);
  kiln_status st = kiln_is_valid(y) ? kiln_to_host(y, got, (size_t)n * kiln_dtype_size(dt)) : kiln_last_status();
  if (st == KILN_OK) st = kiln_last_status();
  char msg[512];
  snprintf(msg, sizeof msg, "%s", kiln_last_error());
  if (verbose()) {
    fprintf(stderr, "  %-28s %-9s %s", c->name, where, st == KILN_OK ? dt_short(dt) : "error");
    for (int d = 0; st == KILN_OK && d < rank; d++) fprintf(stderr, "%s%lld", d ? "x" : " [", (long long)shape[d]);
    fprintf(stderr, "%s %s\n", st == KILN_OK && rank > 0 ? "]" : "", st == KILN_OK ? "" : msg);
  }
  char op[32]; /* the op, as the case's name starts: "argmin" of argmin_3x0_ax1 */
  snprintf(op, sizeof op, "%.*s", (int)strcspn(c->name, "_"), c->name);
  if (r->error) {
    if (st == KILN_OK)
      KT_FAIL("%s on %s: PyTorch raises an error, kiln gives a %s tensor of %lld elements", c->name, where,
              dt_short(dt), (long long)n);
    else if (!strstr(msg, op))
      KT_FAIL("%s on %s: the error does not name %s: %s", c->name, where, op, msg);
  } else if (st != KILN_OK) {
    KT_FAIL("%s on %s: %s", c->name, where, msg);
  } else if (strcmp(dt_short(dt), r->dt) || rank != r->rank ||
             memcmp(shape, r->shape, sizeof(int64_t) * (size_t)(rank > 0 ? rank : 0))) {
    char gs[128] = "", ws[128] = "";
    for (int d = 0; d < rank && d < KILN_MAX_RANK; d++)
      snprintf(gs + strlen(gs), sizeof gs - strlen(gs), "%s%lld", d ? "," : "", (long long)shape[d]);
    for (int d = 0; d < r->rank; d++)
      snprintf(ws + strlen(ws), sizeof ws - strlen(ws), "%s%lld", d ? "," : "", (long long)r->shape[d]);
    KT_FAIL("%s on %s: %s[%s], PyTorch gives %s[%s]", c->name, where, dt_short(dt), gs, r->dt, ws);
  } else {
    bc_out o = {.dt = dt, .data = got};
    /* 16-bit floats: one ulp of the dtype (kiln and PyTorch may round an f32 result apart) */
    double rtol = dt == KILN_F64 ? 1e-12 : dt == KILN_BF16 ? 1. / 128 : dt == KILN_F16 ? 1. / 1024 : 2e-6;
    double atol = dt == KILN_F64 ? 1e-12 : dt == KILN_BF16 || dt == KILN_F16 ? rtol * 1e-3 : 1e-6;
    for (int k = 0; k < r->m; k++) {
      double w = r->val[k];
      int ok;
      if (bc_is_float(dt)) {
        double g = bc_get_f(&o, r->pos[k]);
        ok = isnan(w) ? isnan(g) : (isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w));
      } else {
        ok = bc_get_i(&o, r->pos[k]) == (int64_t)w;
      }
      if (!ok) {
        KT_FAIL("%s on %s: element %lld is %.9g, PyTorch gives %.9g", c->name, where, (long long)r->pos[k],
                bc_is_float(dt) ? bc_get_f(&o, r->pos[k]) : (double)bc_get_i(&o, r->pos[k]), w);
        break;
      }
    }
  }
  free(got);
  kiln_mark_step();
#ifdef SHAPES_CLEANUP
  SHAPES_CLEANUP();
#endif
  for (int i = 0; i < (g_nln < 4 ? g_nln : 4); i++) kiln_layernorm_destroy(g_ln[i]);
  for (int i = 0; i < (g_nemb < 4 ? g_nemb : 4); i++) kiln_embedding_destroy(g_emb[i]);
  kiln_clear_error();
}

static char k_ran[N_CASES];

/* every case on ref and the backend under test, alone and fused; the cases
 * whose name starts with `only` (all when NULL) */
static void run_all(const char *only) {
  if (!k_nref && load_reference() != 0) return;
  const char *backends[2] = {"ref", bc_backend_under_test()};
  for (int b = 0; b < 2; b++)
    for (int fused = 0; fused < 2; fused++) {
      g_fused = fused;
      kiln_clear_error();
      if (kiln_init(&(kiln_options){.backend = backends[b]}) != KILN_OK) {
        KT_FAIL("kiln_init(%s): %s", backends[b], kiln_last_error());
        continue;
      }
      char where[32];
      snprintf(where, sizeof where, "%s%s", backends[b], fused ? " fused" : "");
      for (int i = 0; i < N_CASES; i++) {
        if (only && strncmp(k_cases[i].name, only, strlen(only))) continue;
        k_ran[i] = 1;
        const ref_line *r = find_ref(k_cases[i].name);
        if (!r)
          KT_FAIL("%s: no line in %s (rerun its .py script)", k_cases[i].name, SHAPES_REF);
        else
          run_case(&k_cases[i], r, where);
      }
      kiln_shutdown();
    }
}

KT_TEST(every_reference_line_has_a_case) {
  if (!k_nref && load_reference() != 0) return;
  for (int i = 0; i < k_nref; i++) {
    int found = 0;
    for (int k = 0; k < N_CASES && !found; k++) found = !strcmp(k_cases[k].name, k_ref[i].name);
    KT_CHECK_MSG(found, "%s: a reference line without a case", k_ref[i].name);
  }
}
