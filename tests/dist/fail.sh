#!/usr/bin/env bash
# The distributed failure cases (tests/dist/test_dist_fail.c) under
# `mpirun -np 2`: a collective one rank skips (KILN_DIST_TIMEOUT=2) and a
# rank killed mid-training. Each must end the job non-zero within a bounded
# time (`timeout` guards CI against a hang) with kiln's message naming what
# happened; the killed run must leave the checkpoint complete, no temp file.
# Usage: fail.sh MPIRUN BINDIR
set -uo pipefail
mpirun=$1 bin=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fwd=(-x KILN_CACHE_DIR -x KILN_DIST_TIMEOUT)
if [ -n "${ASAN_OPTIONS:-}" ]; then # as run.sh: Open MPI's own leaks at exit
  export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
  fwd+=(-x ASAN_OPTIONS)
fi
[ -n "${UBSAN_OPTIONS:-}" ] && fwd+=(-x UBSAN_OPTIONS)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

run_case() { # run_case NAME: the job's output in $dir/NAME.log, its status in $rc
  local t0=$SECONDS
  timeout -k 5 90 "$mpirun" --oversubscribe -np 2 --mca btl self,vader "${fwd[@]}" \
    "$bin/test_dist_fail" "$1" "$dir" >"$dir/$1.log" 2>&1
  rc=$?
  echo "== $1: exit $rc after $((SECONDS - t0)) s"
  cat "$dir/$1.log"
  [ $((SECONDS - t0)) -ge 90 ] && bad "$1: the job hung (killed by timeout)"
  [ $rc -eq 0 ] && bad "$1: the job exited 0"
}

expect_lines() { # every "expect: X" line of the log must appear as X in it
  grep '^expect: ' "$dir/$1.log" | sed 's/^expect: //' | while IFS= read -r want; do
    grep -vF "expect: " "$dir/$1.log" | grep -qF -- "$want" || echo "$want"
  done >"$dir/$1.missing"
  [ -s "$dir/$1.missing" ] && bad "$1: missing from the output: $(cat "$dir/$1.missing")"
  grep -q '^expect: ' "$dir/$1.log" || bad "$1: the program printed no expectation"
}

KILN_DIST_TIMEOUT=2 run_case timeout
expect_lines timeout
grep -q "did not complete within 2 s (KILN_DIST_TIMEOUT)" "$dir/timeout.log" || bad "timeout: no timeout message"

KILN_DIST_TIMEOUT=300 run_case kill
expect_lines kill
grep -q "another rank died or the job was stopped" "$dir/kill.log" || bad "kill: no message from kiln"
ls -a "$dir" | grep -q 'kiln.tmp' && bad "kill: a temp file of the checkpoint remains: $(ls -a "$dir")"
if [ -f "$dir/ckpt.safetensors" ]; then # step 1's checkpoint, complete: w = 1 + 2 everywhere
  /usr/bin/python3 - "$dir/ckpt.safetensors" <<'PY' || bad "kill: the checkpoint is not step 1's complete file"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
s, e = h["w"]["data_offsets"]
assert len(b) == 8 + n + e, "size"
v = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
assert len(v) == 1024 and all(x == 3.0 for x in v), "values"
PY
else
  bad "kill: step 1's checkpoint is missing"
fi
[ $fails -eq 0 ] && echo "fail.sh: all cases passed"
exit $((fails > 0))
