/* Per-source-line totals of graph cuts and device-to-host reads.
 *
 * A documented singleton (like the metrics registry, it outlives the
 * runtime and is reset by kiln_metrics_clear): a fixed-size open-addressing
 * table keyed by (file pointer, line, kind). Source locations come from
 * __FILE__, a string literal, so the pointer identifies the file and the
 * hot path neither hashes strings nor allocates. One mutex guards the
 * table: events are a few per step, never per element. Thread-safe. */
#ifndef KILN_DEBUG_SITES_H
#define KILN_DEBUG_SITES_H

#include <stdint.h>

#include "base/text.h"
#include "kiln/kiln.h"

/* Add one event at loc: bytes and ns (reads: wait + copy; cuts: host time),
 * wait_ns (reads only). Past the table's capacity events are counted in an
 * "other lines" record. */
void kiln_sites_record(kiln_site_kind kind, kiln_loc loc, int64_t bytes, double ns, double wait_ns);
/* Count a compile caused by the cut at loc. */
void kiln_sites_record_compile(kiln_site_kind kind, kiln_loc loc, double compile_ns);
/* Reset every record. */
void kiln_sites_clear(void);
/* Append the table (header and one row per record of the given kinds, most
 * frequent first; kinds_mask bit k selects kiln_site_kind k; nothing when
 * empty) with each line prefixed by indent. */
void kiln_sites_format(kiln_text *t, unsigned kinds_mask, const char *indent);
/* Rows "<indent><count>  file:line (kind)" of the records of the given kinds
 * with compiles (by_compiles) or events, most first, at most max_rows. */
void kiln_sites_format_brief(kiln_text *t, unsigned kinds_mask, int by_compiles, int max_rows, const char *indent);

#endif
