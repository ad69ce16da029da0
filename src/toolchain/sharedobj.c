/* Loading compiled kernel objects safely: a structural check of the ELF
 * bytes before dlopen, loading from a path or from memory, and the symbol
 * check. See sharedobj.h and docs/cache.md. */
#define _GNU_SOURCE
#include "toolchain/sharedobj.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct kiln_so {
  void *handle;
  int fd; /* the memfd the object was loaded from (kept open while loaded), or -1 */
};

/* Why `b` (n bytes) is not a complete ELF shared object, or NULL. dlopen
 * maps segments by their offsets: a truncated file maps pages past its end,
 * and touching them (relocation) is SIGBUS, not an error. So every object
 * is checked before it is loaded: headers, program headers, every loaded
 * segment and the section table inside the file. */
const char *kiln_so_elf_problem(const uint8_t *b, size_t n) {
  if (n < sizeof(Elf64_Ehdr)) return "shorter than an ELF header";
  Elf64_Ehdr ehdr; /* copied: the bytes (a cache entry's payload) need not be aligned */
  memcpy(&ehdr, b, sizeof ehdr);
  const Elf64_Ehdr *eh = &ehdr;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return "not an ELF file";
  if (eh->e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
  if (eh->e_type != ET_DYN) return "not a shared object";
  if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > n ||
      (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > n - eh->e_phoff)
    return "program headers outside the file (truncated)";
  for (int i = 0; i < eh->e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, b + eh->e_phoff + (size_t)i * sizeof ph, sizeof ph);
    if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) && (ph.p_offset > n || ph.p_filesz > n - ph.p_offset))
      return "a segment ends past the end of the file (truncated)";
  }
  if (eh->e_shnum && (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > n ||
                      (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > n - eh->e_shoff))
    return "section headers outside the file (truncated)";
  return NULL;
}

static kiln_so *so_new(void *handle, int fd, kiln_err *err) {
  kiln_so *so = calloc(1, sizeof *so);
  if (!so) {
    dlclose(handle);
    if (fd >= 0) close(fd);
    kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  so->handle = handle;
  so->fd = fd;
  return so;
}

kiln_status kiln_so_load_path(const char *path, kiln_so **out, kiln_err *err) {
  *out = NULL;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    return kiln_err_set(err, KILN_ERR_COMPILE, "cannot load compiled kernels %s: %s", path, e ? e : "dlopen failed");
  }
  *out = so_new(h, -1, err);
  return *out ? KILN_OK : KILN_ERR_OUT_OF_MEMORY;
}

/* Load an object from memory: a sealed memfd, kept open while the object is
 * loaded (its /proc/self/fd path is then unique among loaded objects: glibc
 * would hand back an already loaded object whose path matches). The last
 * resort when no directory can be written. */
kiln_status kiln_so_load_memory(const uint8_t *b, size_t n, kiln_so **out, kiln_err *err) {
  *out = NULL;
  int fd = memfd_create("kiln-kernels", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return kiln_err_set(err, KILN_ERR_IO, "memfd_create: %s", strerror(errno));
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, b + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = errno;
      close(fd);
      return kiln_err_set(err, KILN_ERR_IO, "writing kernels to memory: %s", strerror(e));
    }
    off += (size_t)w;
  }
  (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    close(fd);
    return kiln_err_set(err, KILN_ERR_COMPILE, "cannot load compiled kernels from memory: %s", e ? e : "dlopen failed");
  }
  *out = so_new(h, fd, err);
  return *out ? KILN_OK : KILN_ERR_OUT_OF_MEMORY;
}

/* Every symbol of syms (n of them) is in the object, or an error naming the
 * first missing one and what was loaded. */
kiln_status kiln_so_check_symbols(kiln_so *so, const char *const *syms, int n, const char *what, kiln_err *err) {
  for (int i = 0; i < n; i++)
    if (!dlsym(so->handle, syms[i]))
      return kiln_err_set(err, KILN_ERR_COMPILE, "symbol %s missing in the compiled kernels (%s)", syms[i], what);
  return KILN_OK;
}

void *kiln_so_symbol(kiln_so *so, const char *name) { return so && name ? dlsym(so->handle, name) : NULL; }

void kiln_so_close(kiln_so *so) {
  if (!so) return;
  if (so->handle) dlclose(so->handle);
  if (so->fd >= 0) close(so->fd);
  free(so);
}

