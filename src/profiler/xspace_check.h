/* A cheap structural check of an XSpace protobuf, before protobuf-c
 * unpacks it.
 *
 * Why: protobuf-c allocates a struct for every (sub)message it meets
 * before it can tell the input is not a capture; a 32 MB file of tiny
 * nested messages made `kiln profile summary` use 2.5 GB and then say "not
 * an XSpace protobuf". This walk reads the wire format against the schema
 * (proto/xplane.proto) without allocating, says where a malformed file
 * goes wrong, enforces the line/event limits, and estimates what unpacking
 * would allocate, refusing a file whose decoding would need more than
 * KILN_XSPACE_DECODE_RATIO times its size (plus a constant).
 *
 * Thread-safety: a pure function of its arguments. */
#ifndef KILN_PROFILER_XSPACE_CHECK_H
#define KILN_PROFILER_XSPACE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Estimated decoding memory allowed per input byte, plus
 * KILN_XSPACE_DECODE_SLACK bytes. The estimate charges 120 bytes per
 * message (protobuf-c's real cost is 60-90); kiln's own captures come to
 * about 11 by it (a 22-byte host event is an XEvent and an XStat), while a
 * file of empty messages (2 bytes each) comes to 60. */
#define KILN_XSPACE_DECODE_RATIO 32
#define KILN_XSPACE_DECODE_SLACK ((uint64_t)16 << 20)

/* 1 if `byte` can start an XSpace (the tag of one of its fields); 0 means
 * the file is not an XSpace, decided without reading the rest. */
int kiln_prof_xspace_first_byte_ok(uint8_t byte);

/* Check data[0..n). max_lines / max_events: limits on XLines and XEvents.
 * Errors: KILN_ERR_CORRUPT "<what>: not an XSpace protobuf: byte 17 (in
 * XPlane.lines): ..." or "...: decoding would need ~N MB". */
kiln_status kiln_prof_xspace_check(const uint8_t *data, size_t n, const char *what, uint64_t max_lines,
                                   uint64_t max_events, kiln_err *err);

#endif
