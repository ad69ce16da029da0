/* Growable text buffers and the number formats of kiln's reports.
 *
 * Every report kiln prints (metrics, KILN_DEBUG records, kiln_explain) is
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
} kiln_text;

/* Append printf-style text. On allocation failure the buffer keeps what it
 * had and sets failed. */
void kiln_text_printf(kiln_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text so far ("" when empty); owned by t. */
const char *kiln_text_str(const kiln_text *t);
/* Take the text: a malloc'd string the caller frees (never NULL unless out
 * of memory); t is left empty. */
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
