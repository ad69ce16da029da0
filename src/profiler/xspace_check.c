/* The XSpace wire-format walk (see xspace_check.h). Iterative over a
 * fixed-depth schema: the nesting of xplane.proto is at most 5 levels
 * (XSpace > XPlane > map entry > XEventMetadata > XStat), so a hostile
 * file cannot drive the recursion deeper. */
#include "profiler/xspace_check.h"

#include <string.h>

/* Message types of the schema, and the map entries protobuf-c makes. */
typedef enum msg { M_SPACE, M_PLANE, M_LINE, M_EVENT, M_STAT, M_EMETA, M_SMETA, M_EMENTRY, M_SMENTRY, M_NONE } msg;

static const char *const k_names[] = {"XSpace", "XPlane", "XLine", "XEvent", "XStat", "XEventMetadata",
                                      "XStatMetadata", "XPlane.event_metadata entry", "XPlane.stat_metadata entry"};

/* The submessage type of field `f` of `m`, M_NONE for a scalar, string or
 * unknown field. */
static msg sub_of(msg m, uint64_t f) {
  switch (m) {
    case M_SPACE: return f == 1 ? M_PLANE : M_NONE;
    case M_PLANE: return f == 3 ? M_LINE : f == 4 ? M_EMENTRY : f == 5 ? M_SMENTRY : f == 6 ? M_STAT : M_NONE;
    case M_LINE: return f == 4 ? M_EVENT : M_NONE;
    case M_EVENT: return f == 4 ? M_STAT : M_NONE;
    case M_EMETA: return f == 5 ? M_STAT : M_NONE;
    case M_EMENTRY: return f == 2 ? M_EMETA : M_NONE;
    case M_SMENTRY: return f == 2 ? M_SMETA : M_NONE;
    default: return M_NONE;
  }
}

/* Whether field `f` is in m's schema (else protobuf-c keeps a copy of it as
 * an unknown field). */
static int known(msg m, uint64_t f) {
  switch (m) {
    case M_SPACE: return f >= 1 && f <= 4;
    case M_PLANE: return f >= 1 && f <= 6;
    case M_LINE: return (f >= 1 && f <= 4) || (f >= 9 && f <= 11);
    case M_EVENT: return f >= 1 && f <= 5;
    case M_STAT: return f >= 1 && f <= 7;
    case M_EMETA: return f >= 1 && f <= 6;
    case M_SMETA: return f >= 1 && f <= 3;
    default: return f == 1 || f == 2;
  }
}

/* What protobuf-c allocates per message (its struct with the
 * ProtobufCMessage header, rounded up, plus malloc's overhead) and per
 * element of a repeated field (a pointer). Estimates, on the high side. */
#define COST_MSG 112u
#define COST_PTR 8u
#define COST_UNKNOWN 48u

int kiln_prof_xspace_first_byte_ok(uint8_t b) {
  /* fields 1..4 of XSpace, all length-delimited (wire type 2) */
  return b == 0x0a || b == 0x12 || b == 0x1a || b == 0x22;
}

static int varint(const uint8_t *p, size_t end, size_t *i, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*i >= end) return -1;
    uint8_t b = p[(*i)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

typedef struct frame {
  msg m;
  size_t end;
} frame;

kiln_status kiln_prof_xspace_check(const uint8_t *data, size_t n, const char *what, uint64_t max_lines,
                                   uint64_t max_events, kiln_err *err) {
  frame st[8];
  int depth = 0;
  st[0] = (frame){M_SPACE, n};
  size_t i = 0;
  uint64_t cost = COST_MSG, lines = 0, events = 0;
  const uint64_t budget = (uint64_t)n * KILN_XSPACE_DECODE_RATIO + KILN_XSPACE_DECODE_SLACK;
  const char *why = NULL;
  size_t at = 0;
  for (;;) {
    if (cost > budget)
      return kiln_err_set(err, KILN_ERR_CORRUPT,
                          "%s: decoding would need more than %llu MB for a %zu-byte file (about %llu messages by byte "
                          "%zu): not a capture kiln can read",
                          what, (unsigned long long)(budget >> 20), n, (unsigned long long)(cost / COST_MSG), at);
    while (depth > 0 && i == st[depth].end) depth--;
    if (depth == 0 && i == n) break;
    frame *fr = &st[depth];
    at = i;
    uint64_t tag, v;
    if (varint(data, fr->end, &i, &tag)) {
      why = "truncated or overlong field tag";
      break;
    }
    uint64_t field = tag >> 3;
    unsigned wt = (unsigned)(tag & 7);
    if (field == 0 || field > 536870911u) {
      why = "field number 0 or out of range";
      break;
    }
    msg sub = sub_of(fr->m, field);
    if (wt == 0) {
      if (varint(data, fr->end, &i, &v)) {
        why = "truncated varint";
        break;
      }
    } else if (wt == 1 || wt == 5) {
      size_t w = wt == 1 ? 8 : 4;
      if (fr->end - i < w) {
        why = "truncated fixed-width value";
        break;
      }
      i += w;
    } else if (wt == 2) {
      if (varint(data, fr->end, &i, &v)) {
        why = "truncated length";
        break;
      }
      if (v > fr->end - i) {
        why = "length runs past the end of its message";
        break;
      }
      if (sub != M_NONE) {
        if (depth + 1 >= (int)(sizeof st / sizeof st[0])) {
          why = "nested too deep for the XSpace schema";
          break;
        }
        cost += COST_MSG + COST_PTR;
        if (sub == M_LINE && ++lines > max_lines) {
          why = "more lines than kiln reads";
          break;
        }
        if (sub == M_EVENT && ++events > max_events) {
          why = "more events than kiln reads";
          break;
        }
        st[++depth] = (frame){sub, i + (size_t)v};
        continue;
      }
      i += (size_t)v;
      cost += v + 1 + COST_PTR; /* a string or bytes copy (or a packed array) */
    } else {
      why = wt == 3 || wt == 4 ? "group wire types are not used by XSpace" : "invalid wire type";
      break;
    }
    /* A field outside the schema becomes an unknown field that protobuf-c
     * copies. */
    if (!known(fr->m, field)) cost += COST_UNKNOWN + (wt == 2 ? 0 : 8);
  }
  if (why)
    return kiln_err_set(err, KILN_ERR_CORRUPT, "%s: not an XSpace protobuf: byte %zu (in %s): %s", what, at,
                        k_names[st[depth].m], why);
  return KILN_OK;
}
