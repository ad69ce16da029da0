/* Attention masks follow PyTorch's conventions: kiln_sdpa's bool mask is
 * "true = attend" (scaled_dot_product_attention), a float mask is added,
 * an integer mask is an error; mha's key_padding_mask is "true = padding"
 * (nn.MultiheadAttention). Expected values are computed here in double from
 * the same inputs; both backends. */
#include <math.h>
#include <stdint.h>

#include "kiln/kiln.h"
#include "kt.h"

enum { T = 4, HD = 3 };

static void start(const char *backend) {
  kiln_shutdown();
  kiln_clear_error();
  kiln_options o = {0};
  o.backend = backend;
  KT_CHECK(kiln_init(&o) == KILN_OK);
}

static void fill(float *p, int n, int seed) {
  for (int i = 0; i < n; i++) p[i] = (float)sin(0.7 * i + seed) * 1.5f;
}

/* softmax(q k^T / sqrt(hd) masked) v in double; attend[i][j] = 0 masks. */
static void oracle(const float *q, const float *k, const float *v, const int attend[T][T], double out[T][HD]) {
  for (int i = 0; i < T; i++) {
    double s[T], mx = -INFINITY, den = 0;
    for (int j = 0; j < T; j++) {
      double d = 0;
      for (int c = 0; c < HD; c++) d += (double)q[i * HD + c] * k[j * HD + c];
      s[j] = attend[i][j] ? d / sqrt((double)HD) : -INFINITY;
      if (s[j] > mx) mx = s[j];
    }
    for (int j = 0; j < T; j++) den += attend[i][j] ? exp(s[j] - mx) : 0.0;
    for (int c = 0; c < HD; c++) {
      double acc = 0;
      for (int j = 0; j < T; j++) acc += attend[i][j] ? exp(s[j] - mx) / den * v[j * HD + c] : 0.0;
      out[i][c] = den > 0 ? acc : NAN;
    }
  }
}

KT_TEST(sdpa_bool_mask_is_true_means_attend) {
  static const char *const backends[] = {"cpu", "ref"};
  float q[T * HD], k[T * HD], v[T * HD];
  fill(q, T * HD, 1);
  fill(k, T * HD, 2);
  fill(v, T * HD, 3);
  int attend[T][T];
  uint8_t mb[T * T];
  float mf[T * T];
  for (int i = 0; i < T; i++)
    for (int j = 0; j < T; j++) {
      attend[i][j] = i == T - 1 ? 0 : (j <= i || j == 3); /* last query attends to nothing */
      mb[i * T + j] = (uint8_t)attend[i][j];
      mf[i * T + j] = attend[i][j] ? 0.0f : -INFINITY;
    }
  double want[T][HD];
  oracle(q, k, v, attend, want);
  int64_t s4[4] = {1, 1, T, HD}, sm[2] = {T, T};
  for (int b = 0; b < 2; b++) {
    start(backends[b]);
    kiln_tensor Q = kiln_from_host(q, KILN_F32, 4, s4), K = kiln_from_host(k, KILN_F32, 4, s4),
                V = kiln_from_host(v, KILN_F32, 4, s4);
    for (int form = 0; form < 2; form++) {
      kiln_tensor m = form == 0 ? kiln_from_host(mb, KILN_BOOL, 2, sm) : kiln_from_host(mf, KILN_F32, 2, sm);
      float got[T * HD];
      KT_CHECK(kiln_to_host(kiln_sdpa(Q, K, V, m, 0.0, false, 0), got, sizeof got) == KILN_OK);
      for (int i = 0; i < T; i++)
        for (int c = 0; c < HD; c++) {
          double w = want[i][c], g = got[i * HD + c];
          if (isnan(w))
            KT_CHECK_MSG(isnan(g), "[%s] form %d: a query with no key attended gives NaN, got %g", backends[b], form, g);
          else
            KT_CHECK_MSG(fabs(g - w) <= 1e-5, "[%s] form %d: out[%d][%d] = %g, want %g", backends[b], form, i, c, g, w);
        }
    }
    /* an integer mask has no agreed meaning: refused, naming the dtype */
    int32_t mi[T * T] = {0};
    kiln_tensor r = kiln_sdpa(Q, K, V, kiln_from_host(mi, KILN_I32, 2, sm), 0.0, false, 0);
    KT_CHECK(!kiln_is_valid(r));
    KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
    KT_STR_CONTAINS(kiln_last_error(), "sdpa: the mask is i32");
    KT_STR_CONTAINS(kiln_last_error(), "test_sdpa_mask.c");
    kiln_clear_error();
    kiln_mark_step();
  }
  kiln_shutdown();
}

/* mha's key_padding_mask: true = padding. A bool mask and the equivalent
 * float mask give the same output, and a padded key changes nothing when its
 * value changes. */
KT_TEST(mha_key_padding_mask_true_means_ignore) {
  start("cpu");
  kiln_mha *a = NULL;
  kiln_mha_create(6, 2, 0.0, 11, &a);
  KT_CHECK(a != NULL);
  if (!a) return;
  float x[2 * T * 6];
  fill(x, 2 * T * 6, 5);
  int64_t sx[3] = {2, T, 6}, sm[2] = {2, T};
  uint8_t pad[2 * T] = {0, 0, 0, 1, 0, 0, 1, 1};
  float padf[2 * T];
  for (int i = 0; i < 2 * T; i++) padf[i] = pad[i] ? -1e9f : 0.0f;
  float out[3][2 * T * 6];
  for (int form = 0; form < 3; form++) {
    if (form == 2) /* change the padded positions' inputs: nothing may move */
      for (int b = 0; b < 2; b++)
        for (int t = 0; t < T; t++)
          if (pad[b * T + t])
            for (int c = 0; c < 6; c++) x[(b * T + t) * 6 + c] += 3.0f;
    kiln_attn_opts o = {0};
    o.key_padding_mask = form == 1 ? kiln_from_host(padf, KILN_F32, 2, sm) : kiln_from_host(pad, KILN_BOOL, 2, sm);
    KT_CHECK(kiln_to_host(kiln_mha_forward(a, kiln_from_host(x, KILN_F32, 3, sx), &o), out[form], sizeof out[form]) ==
             KILN_OK);
  }
  for (int b = 0; b < 2; b++)
    for (int t = 0; t < T; t++) {
      if (pad[b * T + t]) continue; /* a padded query's own output moves with its input */
      for (int c = 0; c < 6; c++) {
        int i = (b * T + t) * 6 + c;
        KT_NEAR(out[1][i], out[0][i], 1e-5);
        KT_NEAR(out[2][i], out[0][i], 1e-5);
      }
    }
  int64_t mi[2 * T] = {0};
  kiln_attn_opts o = {0};
  o.key_padding_mask = kiln_from_host(mi, KILN_I64, 2, sm);
  KT_CHECK(!kiln_is_valid(kiln_mha_forward(a, kiln_from_host(x, KILN_F32, 3, sx), &o)));
  KT_STR_CONTAINS(kiln_last_error(), "key_padding_mask is i64");
  kiln_clear_error();
  kiln_mha_destroy(a);
  kiln_shutdown();
}

KT_MAIN(KT_CASE(sdpa_bool_mask_is_true_means_attend), KT_CASE(mha_key_padding_mask_true_means_ignore))
