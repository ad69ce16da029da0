/* Loading compiled kernel objects (the cpu backend's generated code) safely.
 * Every object, built now or read from the disk cache, goes through here:
 * its bytes are checked to be a complete ELF shared object before dlopen (a
 * truncated object would map pages past the end of its file, and touching
 * them is SIGBUS, not an error), and the kernels it must define are checked
 * after. Thread safety: each function on its own arguments. */
#ifndef KILN_TOOLCHAIN_SHAREDOBJ_H
#define KILN_TOOLCHAIN_SHAREDOBJ_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_so kiln_so;

/* Why b (n bytes) is not a complete 64-bit ELF shared object (headers,
 * program headers, loaded segments and section table inside the bytes), or
 * NULL when it is. b need not be aligned. */
const char *kiln_so_elf_problem(const uint8_t *b, size_t n);
/* dlopen(path, RTLD_NOW | RTLD_LOCAL). The caller picks a path never loaded
 * before in this process (glibc hands back a loaded object whose path
 * matches). Errors: KILN_ERR_COMPILE with dlerror(), OUT_OF_MEMORY. */
kiln_status kiln_so_load_path(const char *path, kiln_so **out, kiln_err *err);
/* Load n bytes from a sealed memfd kept open while the object is loaded (so
 * its /proc/self/fd path is unique among loaded objects): for when no
 * directory can be written. Errors: KILN_ERR_IO, KILN_ERR_COMPILE. */
kiln_status kiln_so_load_memory(const uint8_t *b, size_t n, kiln_so **out, kiln_err *err);
/* Every syms[0..n) is defined, or KILN_ERR_COMPILE naming the first missing
 * symbol and `what` was loaded. */
kiln_status kiln_so_check_symbols(kiln_so *so, const char *const *syms, int n, const char *what, kiln_err *err);

/* dlsym in the object; NULL when absent (or so/name NULL). */
void *kiln_so_symbol(kiln_so *so, const char *name);
/* dlclose and free. NULL is accepted. */
void kiln_so_close(kiln_so *so);

#endif
