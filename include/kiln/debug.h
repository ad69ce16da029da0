/* kiln's performance-debugging API (see docs/debugging.md). */
#ifndef KILN_DEBUG_H
#define KILN_DEBUG_H

#endif
