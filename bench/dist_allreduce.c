/* All-reduce bandwidth across the ranks (issue 14, §5): kiln's collective (a
 * compiled graph with one all_reduce SUM, steady state: found in the cache,
 * run by the executor through the communication thread) against the MPI
 * library's own MPI_Allreduce on buffers of the same size, 4 MiB and 64 MiB
 * of f32. Run by bench/run.sh under `mpirun -np 2`; built only when MPI is
 * found (cmake/dist.cmake). Rank 0 prints the figures.
 *
 * Both sides time whole calls, interleaved (kiln, MPI, kiln, ...) so load
 * from elsewhere on the machine hits both alike; the figure is the median
 * per-call time of several trials, as algorithm bandwidth (bytes / time).
 * MPI is started here with MPI_THREAD_MULTIPLE: kiln's communication thread
 * stays up (answering status queries) while this thread calls MPI_Allreduce;
 * kiln then runs on the same MPI. Target: kiln >= 0.9x MPI's bandwidth. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

enum { TRIALS = 7 };

/* One trial of kiln: `iters` steps of y = all_reduce(x), waited for. */
static double kiln_trial(kiln_tensor x, int iters) {
  KB_CHECK(kiln_wait());
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = kb_now_s();
  for (int i = 0; i < iters; i++) {
    kiln_tensor y = kiln_keep(kiln_all_reduce(x, KILN_REDUCE_SUM));
    KB_CHECK(kiln_mark_step());
    KB_CHECK(kiln_wait());
    kiln_release(y);
  }
  return (kb_now_s() - t0) / iters;
}

static double mpi_trial(const float *in, float *out, int64_t n, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = kb_now_s();
  for (int i = 0; i < iters; i++) MPI_Allreduce(in, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return (kb_now_s() - t0) / iters;
}

static void one_size(int rank, int world, int mib) {
  int64_t n = (int64_t)mib * 1024 * 1024 / 4;
  float *in = malloc(sizeof *in * (size_t)n), *out = malloc(sizeof *out * (size_t)n);
  for (int64_t i = 0; i < n; i++) in[i] = (float)((i + rank) % 13);
  kiln_tensor x = kiln_param(kiln_from_host(in, KILN_F32, 1, &n));
  KB_CHECK(kiln_mark_step());
  int iters = mib >= 64 ? 4 : 24;
  kiln_trial(x, 2); /* compile and warm up both */
  mpi_trial(in, out, n, 2);
  double tk[TRIALS], tm[TRIALS];
  for (int t = 0; t < TRIALS; t++) {
    tk[t] = kiln_trial(x, iters);
    tm[t] = mpi_trial(in, out, n, iters);
  }
  double bytes = (double)n * 4, gk = bytes / kb_median(tk, TRIALS) / 1e9, gm = bytes / kb_median(tm, TRIALS) / 1e9;
  if (rank == 0) {
    char name[64], base[96];
    snprintf(name, sizeof name, "all-reduce %d MiB f32 %dr", mib, world);
    snprintf(base, sizeof base, "MPI_Allreduce (Open MPI, same buffers) GB/s");
    kb_emit(&(kb_result){name, gk, "GB/s", base, gm, ">= 0.9x MPI", gk >= 0.9 * gm});
  }
  kiln_release(x);
  free(in);
  free(out);
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "dist_allreduce: this MPI does not provide MPI_THREAD_MULTIPLE\n");
    return 1;
  }
  KB_CHECK(kiln_dist_init());
  KB_CHECK(kiln_init(&(kiln_options){.backend = "cpu"}));
  int rank = kiln_dist_rank(), world = kiln_dist_world_size();
  if (world < 2) {
    fprintf(stderr, "dist_allreduce: run under mpirun -np 2 (bench/run.sh does)\n");
    return 1;
  }
  one_size(rank, world, 4);
  one_size(rank, world, 64);
  kiln_shutdown();
  return 0; /* kiln finalizes MPI at exit */
}
