/* kiln's profiler API (see docs/profiling.md). */
#ifndef KILN_PROFILER_H
#define KILN_PROFILER_H

#endif
