/* Tiny synchronous exchanges between the ranks (agree.h): an all-gather of
 * raw bytes through the dist service, run on the calling thread. */
#include "dist/agree.h"

#include "dist/dist.h"
#include "kiln/kiln.h"

int kiln_dist_agree_world(int *rank) {
  int r = 0, w = 1;
  if (kiln_dist_world((kiln_loc){0}, &r, &w) != KILN_OK) r = 0, w = 1;
  if (rank) *rank = r;
  return w;
}

kiln_status kiln_dist_agree_gather(const char *what, const void *in, size_t bytes, void *out, kiln_err *err) {
  int rank = 0, world = kiln_dist_agree_world(&rank);
  const kiln_dist_call c = {.kind = KILN_DIST_ALL_GATHER, .dtype = KILN_U8, .elem = 1, .world = world, .in = in,
                            .out = out, .count = (int64_t)bytes, .outer = 1, .op = what};
  return kiln_dist_collective(&c, err);
}
