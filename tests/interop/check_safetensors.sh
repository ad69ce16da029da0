#!/bin/sh
# Interop check between kiln and the Hugging Face `safetensors` package:
#   1. kiln reads tests/data/reference.safetensors (written by the package)
#      and a kiln-written file round-trips (the unit test does both);
#   2. the package reads the file kiln wrote and checks every value against
#      numpy (tests/interop/safetensors_interop.py check-kiln).
# Usage: tests/interop/check_safetensors.sh [build-dir]   (default: build)
# Needs python3 with venv; makes /tmp/st-venv (override: ST_VENV).
# Regenerate the reference file (only when the script's tensors change):
#   $ST_VENV/bin/python tests/interop/safetensors_interop.py write-reference tests/data/reference.safetensors
#   $ST_VENV/bin/python tests/interop/safetensors_interop.py write-reference16 tests/data/reference16.safetensors
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
venv=${ST_VENV:-/tmp/st-venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import safetensors, numpy' 2>/dev/null; then
  python3 -m venv --system-site-packages "$venv" # sees Debian's python3-torch (BF16 entries)
  "$venv/bin/pip" install -q safetensors numpy
fi
test_bin="$build/bin/tests/test_safetensors"
if [ ! -x "$test_bin" ]; then
  cmake --build "$build" -j1 --target test_safetensors
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-interop-XXXXXX")
trap 'rm -rf "$out"' EXIT
KILN_TEST_DATA="$root/tests/data" KILN_CACHE_DIR="$out/cache" KILN_INTEROP_OUT="$out/kiln.safetensors" \
  "$test_bin"
"$venv/bin/python" "$root/tests/interop/safetensors_interop.py" check-kiln "$out/kiln.safetensors"
