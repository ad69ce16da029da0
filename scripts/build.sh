#!/usr/bin/env bash
# Configure and build kiln into a build directory.
# Usage: scripts/build.sh BUILD_DIR [cmake -D options...] [-- targets...]
# Environment: JOBS (default 2), CC (compiler for the library).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$1; shift
opts=()
targets=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; targets=("$@"); break; fi
  opts+=("$1"); shift
done
case $dir in /*) ;; *) dir=$root/$dir ;; esac
cmake -S "$root" -B "$dir" ${opts[@]+"${opts[@]}"} >/dev/null
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$dir" -j "${JOBS:-2}" --target "${targets[@]}"
else
  cmake --build "$dir" -j "${JOBS:-2}"
fi
