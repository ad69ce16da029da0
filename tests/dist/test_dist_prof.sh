#!/usr/bin/env bash
# A real 2-rank capture (docs/distributed.md, "Profiling a distributed job"):
# tests/dist/test_dist_prof.c under mpirun -np 2 with rank 1 made slow
# (30 ms in "slow_input" before every all-reduce); `kiln profile capture`
# takes one second of both ranks' servers at once; the run must hold one
# file per rank, and `kiln profile summary` on it must name rank 1 as the
# straggler, what it was doing ("slow_input") and the all-reduce's source
# line, with rank 0 waiting in the collectives.
# Usage: test_dist_prof.sh MPIRUN BINDIR (BINDIR holds kiln and tests/test_dist_prof)
set -euo pipefail
mpirun=$1 bin=$2
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-dist-prof-XXXXXX")
job=
cleanup() {
  touch "$out/STOP"
  [ -n "$job" ] && { wait "$job" 2>/dev/null || true; }
  rm -rf "$out"
}
trap cleanup EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# a rank left waiting ends the job with kiln's report well before ctest's limit
export KILN_DIST_TIMEOUT=60
fwd=(-x KILN_CACHE_DIR -x KILN_DIST_TIMEOUT)
if [ -n "${ASAN_OPTIONS:-}" ]; then # as tests/dist/run.sh: Open MPI's own leaks at MPI_Finalize
  export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
  fwd+=(-x ASAN_OPTIONS)
fi
"$mpirun" --oversubscribe -np 2 --mca btl self,vader "${fwd[@]}" "$bin/tests/test_dist_prof" "$out/STOP" 1 \
  >"$out/job.log" 2>&1 &
job=$!
ports=()
for i in $(seq 600); do
  mapfile -t ports < <(sed -n 's/^rank \([01]\) port \([0-9]*\)$/\1 \2/p' "$out/job.log" | sort | cut -d' ' -f2)
  [ ${#ports[@]} -eq 2 ] && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
[ ${#ports[@]} -eq 2 ] || { cat "$out/job.log"; echo "FAIL: the ranks did not start their profiler servers"; exit 1; }
sleep 1 # past the first steps' compiles
run=$("$bin/kiln" profile capture --addr "localhost:${ports[0]},localhost:${ports[1]}" --duration-ms 1000 \
  --logdir "$out/logs")
touch "$out/STOP"
wait "$job" || { cat "$out/job.log"; echo "FAIL: the job failed"; exit 1; }
job=
ls "$run"
for r in 0 1; do
  ls "$run"/*-rank$r.xplane.pb >/dev/null || { echo "FAIL: no capture file of rank $r in $run"; exit 1; }
done
"$bin/kiln" profile summary "$run" >"$out/summary.txt"
sed -n '1,/^──── rank 0/p' "$out/summary.txt"
fail=0
want() {
  grep -qF -- "$1" "$out/summary.txt" || { echo "FAIL: the summary does not say: $1"; fail=1; }
}
want "distributed capture: 2 rank(s), one clock"
want "the straggler is rank 1,"
want 'meanwhile rank 1 (in "slow_input")'
want "after rank 0 at all_reduce f32 [1024] at "
want "test_dist_prof.c:"
# rank 0 waits about 30 ms per step for rank 1: most of its steps' time
wait0=$(awk '$1 == 0 && $2 ~ /^[0-9]+$/ { print $8 / $3 }' "$out/summary.txt" | head -1)
awk -v w="${wait0:-0}" 'BEGIN { exit !(w > 0.3) }' || { echo "FAIL: rank 0's wait is ${wait0:-?} of its wall time, expected > 0.3"; fail=1; }
[ $fail = 0 ] && echo "test_dist_prof: OK"
exit $fail
