/* TensorBoard event files, internals: TFRecord framing and the hand-encoded
 * `tensorflow.Event` protobufs behind include/kiln/summary.h. Exposed here
 * (not in the public header) so tests can check the bytes and drive error
 * paths. All functions are pure and thread-safe unless noted. */
#ifndef KILN_IO_TFEVENTS_H
#define KILN_IO_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/summary.h"

/* The version string TensorBoard expects in the first record. */
#define KILN_TFEVENTS_FILE_VERSION "brain.Event:2"
/* Bytes of TFRecord framing around a record's data: 8 (length) + 4 (masked
 * CRC of the length) before it, 4 (masked CRC of the data) after it. */
#define KILN_TFRECORD_HEADER_BYTES 12
#define KILN_TFRECORD_FOOTER_BYTES 4

/* TFRecord's masked CRC-32C of n bytes: rotate the CRC right by 15 bits and
 * add 0xa282ead8 (so a CRC stored inside checksummed data does not make a
 * trivial fixed point). */
uint32_t kiln_tfrecord_masked_crc(const void *data, size_t n);

/* The 12-byte record header for `len` bytes of data: len as uint64
 * little-endian, then the masked CRC of those 8 bytes (little-endian). */
void kiln_tfrecord_header(uint8_t out[KILN_TFRECORD_HEADER_BYTES], uint64_t len);

/* Encode the first Event of a file: {wall_time, file_version} into out
 * (capacity cap). Returns the encoded size; when it exceeds cap, out holds
 * only a prefix (snprintf-style: call again with a bigger buffer). */
size_t kiln_tfevents_encode_version(uint8_t *out, size_t cap, double wall_time);

/* Encode Event{wall_time, step, summary{value{tag, simple_value}}} into out
 * (capacity cap); tag is tag_len bytes, not necessarily NUL-terminated, and
 * must already be valid UTF-8. step 0 is omitted (the proto3 default).
 * Returns the encoded size, snprintf-style as above. */
size_t kiln_tfevents_encode_scalar(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                                   size_t tag_len, float value);

/* 1 when the n bytes at s are well-formed UTF-8 (no overlong forms,
 * surrogates or code points past U+10FFFF), else 0. */
int kiln_tfevents_utf8_valid(const char *s, size_t n);

/* Open a writer on the exact file `path` (created or truncated, mode 0644)
 * instead of a fresh name in a log directory: for tests that need a
 * special file such as /dev/full. Same errors and ownership as
 * kiln_summary_writer_create. */
kiln_summary_writer *kiln_tfevents_open_file(const char *path, kiln_loc loc);

#endif
