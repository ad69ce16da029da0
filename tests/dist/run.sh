#!/usr/bin/env bash
# The distributed tests (tests/dist/test_dist.c) in a world of NP.
# Usage: run.sh MPIRUN NP BINDIR [PROGRAM [VAR=VALUE...]]
#   PROGRAM: a test of BINDIR (default test_dist); VAR=VALUE: set and
#   forwarded to every rank
#   NP 1: the program alone, without a launcher (a world of 1: no MPI loaded)
#   NP > 1: mpirun -np NP --oversubscribe (more ranks than cores)
# CI runs as root: Open MPI refuses that unless told, so the settings are
# here, not in the user's way.
set -euo pipefail
mpirun=$1 np=$2 bin=$3 prog=${4:-test_dist}
shift $(($# < 4 ? $# : 4))
export KILN_TEST_WORLD=$np
fwd=(-x KILN_TEST_WORLD -x KILN_CACHE_DIR)
for kv in "$@"; do
  export "${kv?}"
  fwd+=(-x "${kv%%=*}")
done
if [ "$np" = 1 ]; then
  exec "$bin/$prog"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -n "${ASAN_OPTIONS:-}" ]; then
  # The sanitizer suite (scripts/test.sh): Open MPI leaks its own state at
  # MPI_Finalize (every reported frame is in libmpi or its components, none
  # in kiln), so the launched ranks skip the leak check; the np 1 run above
  # (no MPI) keeps it for kiln's own code, and every other check stays on.
  export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
  fwd+=(-x ASAN_OPTIONS)
fi
[ -n "${UBSAN_OPTIONS:-}" ] && fwd+=(-x UBSAN_OPTIONS)
# shared memory between the ranks of this machine; no network probing
exec "$mpirun" --oversubscribe -np "$np" --mca btl self,vader "${fwd[@]}" "$bin/$prog"
