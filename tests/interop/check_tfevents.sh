#!/bin/sh
# Interop check between kiln's summary writer and TensorBoard: the unit test
# writes a run (KILN_TFEVENTS_OUT), then TensorBoard's own TFRecord reader,
# Event protobuf and EventAccumulator read it back
# (tests/interop/check_tfevents.py). Not part of CI: it installs
# `tensorboard` from PyPI. See docs/tensorboard.md.
# Usage: tests/interop/check_tfevents.sh [build-dir]   (default: build)
# Needs python3 with venv; makes /tmp/tb-venv (override: TB_VENV).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
venv=${TB_VENV:-/tmp/tb-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q tensorboard
fi
test_bin="$build/bin/tests/test_tfevents"
if [ ! -x "$test_bin" ]; then
  cmake --build "$build" -j1 --target test_tfevents
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-tfevents-XXXXXX")
trap 'rm -rf "$out"' EXIT
KILN_TFEVENTS_OUT="$out/run" "$test_bin" round_trip_interop_series
"$venv/bin/python" "$root/tests/interop/check_tfevents.py" "$out/run"
