#!/bin/sh
# XProf's Overview Page, Framework Op Stats and Memory Profile on a real kiln capture
# (registered as test_profile_xprof when the venv of scripts/install-deps.sh
# exists; docs/profiling.md):
#   1. examples/s5_profile_step trains and captures 500 ms of itself;
#   2. tests/interop/check_xprof.py runs XProf's converter on the capture
#      and checks its step times and op statistics against the capture's
#      Chrome trace.
# Usage: tests/interop/check_xprof.sh BUILD_DIR VENV_PYTHON
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
py=$2
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-xprof-XXXXXX")
trap 'rm -rf "$out"' EXIT
(cd "$out" && KILN_CACHE_DIR=${KILN_CACHE_DIR:-$out/cache} "$build/bin/examples/s5_profile_step" --seconds 3 \
  --self-capture --capture-ms 500 --logdir "$out/logs") >"$out/s5.log" 2>&1 ||
  { cat "$out/s5.log"; echo "FAIL: s5_profile_step"; exit 1; }
run=$(dirname "$(find "$out/logs" -name '*.xplane.pb' | head -1)")
# XProf logs every conversion step on stderr: keep only the check's lines
"$py" "$root/tests/interop/check_xprof.py" "$run" 2>"$out/xprof.log" || { tail -20 "$out/xprof.log"; exit 1; }
