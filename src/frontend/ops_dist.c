/* The collective builders (kiln/dist.h): all_reduce, broadcast, all_gather.
 * Each records one COLLECTIVE node whose last attribute is the world size
 * (so a graph traced for N ranks hashes differently from one for M). A
 * world of 1 still records the node: the backends run it as a copy, and
 * the op is exercised (and cached) the same way alone and distributed. */
#include "dist/dist.h"
#include "frontend/api.h"

/* The input node and the world, or NULL (error recorded / poison). */
static kiln_node *dist_input(kiln_frontend *fe, kiln_tensor t, const char *op, kiln_loc loc, int *rank,
                             int *world) {
  kiln_node *n;
  if (kiln_api_input(fe, t, op, loc, NULL, &n)) return NULL;
  if (kiln_dist_world(loc, rank, world) != KILN_OK) return NULL;
  return n;
}

kiln_tensor kiln_all_reduce_at(kiln_tensor t, kiln_reduce_op op, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  int rank, world;
  kiln_node *n = dist_input(fe, t, "all_reduce", loc, &rank, &world);
  if (!n) return kiln_fe_poison(fe, loc);
  char sb[128];
  if (op != KILN_REDUCE_SUM && op != KILN_REDUCE_MEAN && op != KILN_REDUCE_MAX)
    return kiln_api_fail(fe, loc, "all_reduce: unknown reduction %d", (int)op);
  if (n->dtype == KILN_BOOL || n->dtype == KILN_BF16 || n->dtype == KILN_F16)
    return kiln_api_fail(fe, loc, "all_reduce: %s %s is not supported (cast to %s first%s)",
                         kiln_dtype_name((kiln_dtype)n->dtype), kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb),
                         n->dtype == KILN_BOOL ? "i32" : "f32",
                         n->dtype == KILN_BOOL ? "" : ": MPI has no 16-bit float sum");
  if (op == KILN_REDUCE_MEAN && !kiln_dtype_is_float((kiln_dtype)n->dtype))
    return kiln_api_fail(fe, loc, "all_reduce: MEAN of %s %s (a mean needs a float dtype)",
                         kiln_dtype_name((kiln_dtype)n->dtype), kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  int64_t attr[2] = {op == KILN_REDUCE_MAX ? 1 : 0, world};
  kiln_node *r = kiln_fe_node(fe, KILN_OP_ALL_REDUCE, (kiln_dtype)n->dtype, n->rank, n->shape, 1, &n, 2, attr, 0.0, loc);
  kiln_tensor out = kiln_fe_tensor(fe, r, loc);
  return op == KILN_REDUCE_MEAN && world > 1 ? kiln_div_c_at(out, (double)world, loc) : out;
}

kiln_tensor kiln_broadcast_at(kiln_tensor t, int root, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  int rank, world;
  kiln_node *n = dist_input(fe, t, "broadcast", loc, &rank, &world);
  if (!n) return kiln_fe_poison(fe, loc);
  if (root < 0 || root >= world)
    return kiln_api_fail(fe, loc, "broadcast: root %d is not a rank of this world of %d", root, world);
  int64_t attr[2] = {root, world};
  return kiln_fe_tensor(
      fe, kiln_fe_node(fe, KILN_OP_BROADCAST, (kiln_dtype)n->dtype, n->rank, n->shape, 1, &n, 2, attr, 0.0, loc), loc);
}

kiln_tensor kiln_all_gather_at(kiln_tensor t, int axis, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return (kiln_tensor){0, 0};
  int rank, world;
  kiln_node *n = dist_input(fe, t, "all_gather", loc, &rank, &world);
  if (!n) return kiln_fe_poison(fe, loc);
  char sb[128];
  int a = kiln_api_axis(axis, n->rank);
  if (a < 0 || n->rank == 0)
    return kiln_api_fail(fe, loc, "all_gather: axis %d is out of range for shape %s", axis,
                         kiln_fe_shape_str(n->rank, n->shape, sb, sizeof sb));
  int64_t shape[KILN_MAX_RANK], attr[2] = {a, world};
  for (int d = 0; d < n->rank; d++) shape[d] = n->shape[d];
  shape[a] *= world;
  return kiln_fe_tensor(
      fe, kiln_fe_node(fe, KILN_OP_ALL_GATHER, (kiln_dtype)n->dtype, n->rank, shape, 1, &n, 2, attr, 0.0, loc), loc);
}
