#!/usr/bin/env bash
# The distributed tests (tests/dist/test_dist.c) in a world of NP.
# Usage: run.sh MPIRUN NP BINDIR
#   NP 1: the program alone, without a launcher (a world of 1: no MPI loaded)
#   NP > 1: mpirun -np NP --oversubscribe (more ranks than cores)
# CI runs as root: Open MPI refuses that unless told, so the settings are
# here, not in the user's way.
set -euo pipefail
mpirun=$1 np=$2 bin=$3
export KILN_TEST_WORLD=$np
if [ "$np" = 1 ]; then
  exec "$bin/test_dist"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shared memory between the ranks of this machine; no network probing
exec "$mpirun" --oversubscribe -np "$np" --mca btl self,vader -x KILN_TEST_WORLD -x KILN_CACHE_DIR \
  "$bin/test_dist"
