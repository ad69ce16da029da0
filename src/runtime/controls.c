/* The runtime's controls of include/kiln/debug.h (the remedies that
 * debugging.md prescribes): full-graph regions, graph tags. Tracing-thread
 * calls, like the rest of the tracing API. (The controls that walk tensors,
 * explicit compile and discarding a step, are frontend/controls.c;
 * kiln_explain, the report, is debug/observe.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

void kiln_full_graph_begin_at(kiln_loc loc) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return;
  if (rt->full_graph_depth++ == 0) rt->full_graph_loc = loc;
}

void kiln_full_graph_end_at(kiln_loc loc) {
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return;
  if (rt->full_graph_depth <= 0) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "full_graph_end: no full-graph region is open");
    return;
  }
  rt->full_graph_depth--;
}

void kiln_graph_tag_at(const char *tag, kiln_loc loc) {
  (void)loc;
  kiln_runtime *rt = kiln_runtime_get();
  if (!rt) return;
  snprintf(rt->tag, sizeof rt->tag, "%s", tag ? tag : "");
}
