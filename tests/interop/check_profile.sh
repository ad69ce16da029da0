#!/bin/sh
# Interop check between kiln's profiler and TensorBoard's profile plugin
# (docs/profiling.md):
#   1. examples/s5_profile_step trains with its profiler server on a port;
#   2. `kiln profile capture` takes 500 ms from outside, `kiln profile
#      summary` analyses it;
#   3. the plugin's own converter (xprof, the package behind
#      tensorboard-plugin-profile) loads that capture: annotations
#      (Training_Step, Forward, Backward, FINISH_UPDATE), steps and kernels
#      must be there (tests/interop/check_profile.py convert);
#   4. TensorBoard on loopback, started in the program's directory with the
#      relative --logdir logs and asked through its HTTP API exactly as its
#      "Capture Profile" dialog asks, captures from the same server; the new
#      run must appear in the plugin's run list and convert as well; a
#      request the server refuses must fail with its reason in TensorBoard's
#      log;
#   5. a summary that could not read the capture fails the check at the end.
# It installs tensorboard and tensorboard-plugin-profile from PyPI: about
# 10 s once the venv exists, 36-126 s more to create it on a 2-core machine,
# within CI's 3-minute budget (docs/profiling.md). Run it by hand at least
# whenever the profiler's output formats or its server change.
#
# Usage: tests/interop/check_profile.sh [build-dir] [--screenshot PNG]
# Needs python3 with venv; makes /tmp/kiln-profile-venv (override:
# PROFILE_VENV). Versions: TB_VERSION (default 2.21.0), TBP_VERSION
# (tensorboard-plugin-profile, default 2.24.2).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build
png=
while [ $# -gt 0 ]; do
  case $1 in
    --screenshot) png=$2; shift 2 ;;
    *) build=$1; shift ;;
  esac
done
build=$(cd "$build" && pwd) # absolute: the program runs in another directory
start=$(date +%s)
venv=${PROFILE_VENV:-/tmp/kiln-profile-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import xprof.convert.raw_to_tool_data' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "tensorboard==${TB_VERSION:-2.21.0}" \
    "tensorboard-plugin-profile==${TBP_VERSION:-2.24.2}"
fi
echo "venv ready after $(( $(date +%s) - start )) s"
s5=$build/bin/examples/s5_profile_step
kiln=$build/bin/kiln
if [ ! -x "$s5" ] || [ ! -x "$kiln" ]; then
  cmake --build "$build" -j1 --target example_s5_profile_step kiln_cli
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-profile-XXXXXX")
s5_pid=
cleanup() {
  [ -n "$s5_pid" ] && kill "$s5_pid" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

# 1. the program, on a free port; its first line names the port. It runs in
# $out, where TensorBoard runs with the relative --logdir logs (step 4).
(cd "$out" && KILN_CACHE_DIR=$out/cache exec "$s5" --port 0 --seconds 120 --logdir "$out/logs") >"$out/s5.log" 2>&1 &
s5_pid=$!
port=
i=0
while [ -z "$port" ] && [ $i -lt 100 ]; do
  port=$(sed -n 's/^profiler server listening on port \([0-9]*\).*/\1/p' "$out/s5.log")
  [ -n "$port" ] || { sleep 0.2; i=$((i + 1)); }
done
[ -n "$port" ] || { cat "$out/s5.log"; echo "FAIL: s5_profile_step did not start its server"; exit 1; }
echo "s5_profile_step: server on port $port"
# Capture steady-state steps, not the first ones' compiles: wait for step 50.
i=0
until grep -q '^step 50 ' "$out/s5.log"; do
  [ $i -lt 600 ] || { cat "$out/s5.log"; echo "FAIL: s5_profile_step did not reach step 50 in 120 s"; exit 1; }
  sleep 0.2; i=$((i + 1))
done

# 2. kiln's own client and summary.
run=$("$kiln" profile capture --addr "localhost:$port" --duration-ms 500 --logdir "$out/logs")
echo "kiln profile capture -> $run"
# A summary failure is reported at the end, after the viewers' checks.
summary_ok=1
"$kiln" profile summary "$run" || summary_ok=0

# 3. the plugin's converter on that capture.
"$venv/bin/python" "$root/tests/interop/check_profile.py" convert "$run"

# 4. TensorBoard's "Capture Profile" against the same server.
if [ -n "$png" ]; then
  "$venv/bin/python" "$root/tests/interop/check_profile.py" capture "$out/logs" "localhost:$port" --screenshot "$png"
else
  "$venv/bin/python" "$root/tests/interop/check_profile.py" capture "$out/logs" "localhost:$port"
fi
# TensorBoard sent its relative --logdir and the program resolved it (its stderr says so).
if ! grep "repository_root was relative" "$out/s5.log"; then
  tail -20 "$out/s5.log"
  echo "FAIL: TensorBoard's capture did not go through a relative repository_root (the program's log above)"
  exit 1
fi
if [ $summary_ok = 0 ]; then
  echo "FAIL: kiln profile summary could not read the capture (see above)"
  exit 1
fi
echo "check_profile: OK in $(( $(date +%s) - start )) s"
