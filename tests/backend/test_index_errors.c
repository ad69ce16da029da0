/* Out-of-range indices of index_select and gather are an error, as in
 * PyTorch (issue 11): an index outside [0, dim) -- negative ones included --
 * makes the next sync point that waits for the execution return
 * KILN_ERR_INVALID_ARGUMENT with a message naming the op, the index, the
 * axis size and the user's line that traced the op; the status is sticky
 * until kiln_clear_error, and a later step with good indices computes the
 * right values. Checked on both backends, with indices that come from the
 * host and indices computed in the same fused kernel, and through
 * nn Embedding. Expected values come from host loops in this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kt.h"

static const char *const k_backends[2] = {"ref", "cpu"};

static int start(const char *backend) {
  kiln_status s = kiln_init(&(kiln_options){.backend = backend});
  KT_CHECK_MSG(s == KILN_OK, "kiln_init(%s): %s", backend, kiln_last_error());
  return s == KILN_OK;
}

/* The sticky message names op, index and size, at the op's line. */
static void check_message(const char *backend, const char *op, const char *index, const char *size, int line) {
  const char *m = kiln_last_error();
  char at[64];
  snprintf(at, sizeof at, "test_index_errors.c:%d:", line);
  KT_CHECK_MSG(strstr(m, op) != NULL, "[%s] no op %s in: %s", backend, op, m);
  KT_CHECK_MSG(strstr(m, index) != NULL, "[%s] no '%s' in: %s", backend, index, m);
  KT_CHECK_MSG(strstr(m, size) != NULL, "[%s] no '%s' in: %s", backend, size, m);
  /* the message starts with the op's location: "<dir>/test_index_errors.c:N:" */
  const char *hit = strstr(m, at);
  KT_CHECK_MSG(hit && memchr(m, ' ', (size_t)(hit - m)) == NULL, "[%s] message does not start at %s: %s", backend, at,
               m);
  KT_CHECK_MSG(strstr(m, "INVALID_ARGUMENT") != NULL, "[%s] no status name in: %s", backend, m);
}

static const float k_table[5][3] = {{0, 1, 2}, {10, 11, 12}, {20, 21, 22}, {30, 31, 32}, {40, 41, 42}};

/* index_select(table[5,3], 0, idx[4]) * 2 with idx from the host; returns
 * the status of the read and fills out[4][3]. *line: the op's line. */
static kiln_status run_select(const int64_t *idx, float *out, int *line) {
  int64_t ts[2] = {5, 3}, is[1] = {4};
  kiln_tensor T = kiln_from_host(k_table, KILN_F32, 2, ts);
  kiln_tensor I = kiln_from_host(idx, KILN_I64, 1, is);
  *line = __LINE__ + 1;
  kiln_tensor Y = kiln_mul_c(kiln_index_select(T, 0, I), 2.0);
  kiln_status s = kiln_to_host(Y, out, sizeof(float) * 12);
  kiln_mark_step();
  return s;
}

KT_TEST(index_select_out_of_range_is_an_error) {
  for (int b = 0; b < 2; b++) {
    if (!start(k_backends[b])) continue;
    float out[12];
    int line = 0;
    const int64_t bad[4] = {1, 7, 2, 0};
    kiln_status s = run_select(bad, out, &line);
    KT_CHECK_MSG(s == KILN_ERR_INVALID_ARGUMENT, "[%s] status %s", k_backends[b], kiln_status_name(s));
    KT_EQ_INT(kiln_last_status(), KILN_ERR_INVALID_ARGUMENT);
    check_message(k_backends[b], "index_select", "index 7", "size 5", line);
    /* sticky: a later sync point still says so until it is cleared */
    KT_EQ_INT(kiln_wait(), KILN_ERR_INVALID_ARGUMENT);
    kiln_clear_error();
    /* the same graph with good indices: right values, reported once only */
    const int64_t good[4] = {4, 0, 3, 3};
    s = run_select(good, out, &line);
    KT_CHECK_MSG(s == KILN_OK, "[%s] good step: %s", k_backends[b], kiln_last_error());
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 3; j++)
        KT_CHECK_MSG(out[i * 3 + j] == 2 * k_table[good[i]][j], "[%s] out[%d][%d] = %g, want %g", k_backends[b], i,
                     j, out[i * 3 + j], 2 * k_table[good[i]][j]);
    /* negative: PyTorch's index_select rejects it too */
    const int64_t neg[4] = {0, 1, -1, 2};
    s = run_select(neg, out, &line);
    KT_CHECK_MSG(s == KILN_ERR_INVALID_ARGUMENT, "[%s] negative: status %s", k_backends[b], kiln_status_name(s));
    check_message(k_backends[b], "index_select", "index -1", "size 5", line);
    kiln_clear_error();
    KT_EQ_INT(kiln_wait(), KILN_OK);
    kiln_shutdown();
  }
}

/* gather along axis 1 with i32 indices computed on the device (idx + k),
 * fused with a reduction; the error surfaces at kiln_wait after the step. */
KT_TEST(gather_out_of_range_is_an_error_in_a_fused_kernel) {
  for (int b = 0; b < 2; b++) {
    if (!start(k_backends[b])) continue;
    int64_t ts[2] = {5, 3}, is[2] = {5, 2};
    const int32_t idx[10] = {0, 1, 1, 0, 0, 0, 1, 1, 0, 1};
    for (int shift = 0; shift <= 2; shift++) {
      kiln_tensor T = kiln_from_host(k_table, KILN_F32, 2, ts);
      kiln_tensor I = kiln_add_c(kiln_from_host(idx, KILN_I32, 2, is), (double)shift);
      int line = __LINE__ + 1;
      kiln_tensor G = kiln_gather(T, 1, I);
      int ax = 1;
      kiln_tensor S = kiln_keep(kiln_sum(G, 1, &ax, 0));
      kiln_mark_step();
      kiln_status s = kiln_wait();
      if (shift <= 1) { /* indices in 0..2: in range */
        KT_CHECK_MSG(s == KILN_OK, "[%s] shift %d: %s", k_backends[b], shift, kiln_last_error());
        float out[5];
        KT_EQ_INT(kiln_to_host(S, out, sizeof out), KILN_OK);
        for (int i = 0; i < 5; i++) {
          float want = k_table[i][idx[2 * i] + shift] + k_table[i][idx[2 * i + 1] + shift];
          KT_CHECK_MSG(out[i] == want, "[%s] shift %d: out[%d] = %g, want %g", k_backends[b], shift, i, out[i], want);
        }
      } else { /* index 3 on an axis of size 3 */
        KT_CHECK_MSG(s == KILN_ERR_INVALID_ARGUMENT, "[%s] status %s", k_backends[b], kiln_status_name(s));
        check_message(k_backends[b], "gather", "index 3", "size 3", line);
        kiln_clear_error();
      }
      kiln_release(S);
    }
    kiln_shutdown();
  }
}

/* An out-of-range token id through nn Embedding names index_select and the
 * forward call's line. */
KT_TEST(embedding_token_out_of_range_is_an_error) {
  for (int b = 0; b < 2; b++) {
    if (!start(k_backends[b])) continue;
    kiln_embedding *e = NULL;
    kiln_embedding_create(6, 4, 7, &e);
    KT_CHECK(e != NULL);
    int64_t s1[1] = {3};
    const int32_t ids[3] = {0, 6, 5};
    kiln_tensor ids_t = kiln_from_host(ids, KILN_I32, 1, s1);
    int line = __LINE__ + 1;
    kiln_tensor y = kiln_embedding_forward(e, ids_t);
    float out[12];
    kiln_status s = kiln_to_host(y, out, sizeof out);
    KT_CHECK_MSG(s == KILN_ERR_INVALID_ARGUMENT, "[%s] status %s", k_backends[b], kiln_status_name(s));
    check_message(k_backends[b], "index_select", "index 6", "size 6", line);
    kiln_clear_error();
    kiln_mark_step();
    kiln_embedding_destroy(e);
    kiln_shutdown();
  }
}

/* Data whose value does not depend on the indexed axis: a fill (not
 * constant-folded away), a broadcast along the axis, and an axis of size 1
 * (where the index folds to 0 in the generated code). The bad index is still
 * reported, and good ones read the right values. */
static const float k_row[3] = {1.5f, -2, 4};

static kiln_tensor flat_data(int kind, int64_t *dim) {
  int64_t fs[2] = {4, 3}, rs[2] = {1, 3};
  kiln_tensor row = kiln_from_host(k_row, KILN_F32, 2, rs);
  *dim = kind == 2 ? 1 : 4;
  return kind == 0 ? kiln_full(KILN_F32, 2, fs, 2.5) : kind == 1 ? kiln_expand(row, 2, fs) : row;
}

KT_TEST(indices_the_value_does_not_read_are_still_checked) {
  for (int b = 0; b < 2; b++) {
    if (!start(k_backends[b])) continue;
    for (int kind = 0; kind < 3; kind++)
      for (int bad = 0; bad < 2; bad++) {
        int64_t dim, is[1] = {3};
        kiln_tensor X = flat_data(kind, &dim);
        const int64_t idx[3] = {0, bad ? dim : dim - 1, 0};
        kiln_tensor I = kiln_from_host(idx, KILN_I64, 1, is);
        int line = __LINE__ + 1;
        kiln_tensor Y = kiln_index_select(X, 0, I);
        float out[9];
        kiln_status s = kiln_to_host(Y, out, sizeof out);
        if (!bad) {
          KT_CHECK_MSG(s == KILN_OK, "[%s] kind %d: %s", k_backends[b], kind, kiln_last_error());
          for (int i = 0; i < 9; i++) {
            float want = kind == 0 ? 2.5f : k_row[i % 3];
            KT_CHECK_MSG(out[i] == want, "[%s] kind %d: out[%d] = %g, want %g", k_backends[b], kind, i, out[i], want);
          }
        } else {
          KT_CHECK_MSG(s == KILN_ERR_INVALID_ARGUMENT, "[%s] kind %d: status %s", k_backends[b], kind,
                       kiln_status_name(s));
          char want_i[32], want_s[32];
          snprintf(want_i, sizeof want_i, "index %lld ", (long long)dim);
          snprintf(want_s, sizeof want_s, "size %lld ", (long long)dim);
          check_message(k_backends[b], "index_select", want_i, want_s, line);
          kiln_clear_error();
        }
        kiln_mark_step();
      }
    kiln_shutdown();
  }
}

KT_MAIN(KT_CASE(index_select_out_of_range_is_an_error), KT_CASE(gather_out_of_range_is_an_error_in_a_fused_kernel),
        KT_CASE(embedding_token_out_of_range_is_an_error), KT_CASE(indices_the_value_does_not_read_are_still_checked))
