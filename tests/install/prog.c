/* A program built against an installed kiln (tests/install/check_install.sh):
 * kiln computes the sum of the squares of 1..10 and prints it (385, by
 * hand). With an argument, the path of the gRPC module that install holds,
 * it also starts the profiler server and checks that the module mapped
 * into the process is that very file, i.e. libkiln found its module in
 * the install it was loaded from, wherever that now lies. */
#define _GNU_SOURCE
#include <kiln/kiln.h>
#include <kiln/profiler_server.h>
#include <stdio.h>
#include <string.h>

static int mapped(const char *path) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return 0;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    const char *p = strchr(line, '/');
    found = p && !strcmp(p, path);
  }
  fclose(f);
  return found;
}

int main(int argc, char **argv) {
  /* The installed header and library are the same release. */
  if (strcmp(kiln_version(), KILN_VERSION_STRING) != 0) {
    fprintf(stderr, "prog: library %s, header %s\n", kiln_version(), KILN_VERSION_STRING);
    return 1;
  }
  kiln_tensor x = kiln_arange(KILN_F32, 1, 11, 1);
  int axis = 0;
  double v = kiln_item_f64(kiln_sum(kiln_mul(x, x), 1, &axis, false));
  if (kiln_last_status() != KILN_OK) {
    fprintf(stderr, "prog: %s\n", kiln_last_error());
    return 1;
  }
  printf("%g\n", v);
  int rc = v == 385.0 ? 0 : 1;
  if (argc > 1) {
    if (kiln_profiler_server_start(0) != KILN_OK) {
      fprintf(stderr, "prog: %s\n", kiln_last_error());
      rc = 1;
    } else if (!mapped(argv[1])) {
      fprintf(stderr, "prog: the profiler server runs, but not with the module %s\n", argv[1]);
      rc = 1;
    }
  }
  kiln_shutdown();
  return rc;
}
