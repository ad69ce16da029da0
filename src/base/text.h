/* Text buffers and the number formats of kiln's reports.
 *
 * kiln_text is kiln's one string builder: growable (zero-initialized,
 * `kiln_text t = {0}`) or on a caller's fixed buffer (kiln_text_on), where it
 * behaves like snprintf. Every report kiln prints (metrics, KILN_DEBUG records, kiln_explain) is
 * built in a kiln_text and formats durations and sizes the same way, so the
 * figures read alike wherever they appear. Not thread-safe per buffer: each
 * buffer belongs to the call that builds it. */
#ifndef KILN_BASE_TEXT_H
#define KILN_BASE_TEXT_H

#include <stddef.h>

typedef struct kiln_text {
  char *p;     /* NUL-terminated once anything was appended; NULL when empty */
  size_t len, cap;
  int failed;  /* an allocation failed: later appends are dropped */
  int fixed;   /* on a caller's buffer (kiln_text_on): never grown or freed */
} kiln_text;

/* A text on the caller's buffer buf[0..cap) (buf may be NULL when cap is 0),
 * which it writes like snprintf: it never grows, the text is truncated and
 * NUL-terminated within cap (buf[0] = 0 at once when cap > 0), and len counts
 * everything appended, so len >= cap means truncated. Never sets failed;
 * kiln_text_free empties it and leaves the buffer to the caller. */
kiln_text kiln_text_on(char *buf, size_t cap);

/* Append printf-style text. On allocation failure the buffer keeps what it
 * had and sets failed. */
void kiln_text_printf(kiln_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append n bytes of s (NULs included); as kiln_text_printf otherwise. */
void kiln_text_append(kiln_text *t, const char *s, size_t n);
/* Append s as a JSON string literal: quotes, backslash and control bytes
 * escaped (\u00XX), other bytes as they are; NULL as "". */
void kiln_text_json_str(kiln_text *t, const char *s);
/* The text so far ("" when empty); owned by t. */
const char *kiln_text_str(const kiln_text *t);
/* Take the text: a malloc'd string the caller frees (never NULL unless out
 * of memory; a copy for a fixed-buffer text); t is left empty. */
char *kiln_text_take(kiln_text *t);
void kiln_text_free(kiln_text *t);

/* A duration in PyTorch/XLA's metrics-report form: 1m02s341ms470.063us,
 * 3ms808.394us, 0.250us (leading unit unpadded, the others zero-padded). */
void kiln_text_duration_xla(kiln_text *t, double ns);
/* A short duration for records and tables: 850ns, 12.3us, 310ms, 1.25s. */
const char *kiln_fmt_duration(double ns, char *buf, size_t cap);
/* A byte count: 0B, 512B, 4.0KB, 1.23MB, 2.00GB (powers of 1024). */
const char *kiln_fmt_bytes(double bytes, char *buf, size_t cap);
/* The last path component of a source file name ("model.c"); "?" for NULL. */
const char *kiln_fmt_file(const char *path);

#endif
