#!/usr/bin/env bash
# `make fuzz`: build each libFuzzer harness of tests/fuzz/ with clang (the
# library instrumented for coverage, ASan + UBSan on) in $b/, then run
# each for FUZZ_SECONDS (default 60). Seeds: tests/fuzz/corpus/<harness>/ if
# present; new inputs go to $b/corpus/<harness>/; a crash leaves its
# input in $b/artifacts/ and fails the run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
secs=${FUZZ_SECONDS:-60}
b=${BUILD:-build}-fuzz
harnesses=()
for f in tests/fuzz/*.c; do
  [ -e "$f" ] && harnesses+=("$(basename "$f" .c)")
done
if [ ${#harnesses[@]} -eq 0 ]; then
  echo "make fuzz: no harnesses in tests/fuzz/"
  exit 0
fi
echo "==== [fuzz] build: ${harnesses[*]}"
# -Werror off: clang warns about things gcc does not, and a new warning must
# not stop the fuzzers from running (the gcc builds keep -Werror).
CC=clang bash scripts/build.sh "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON \
  -DKILN_SANITIZE=address,undefined -DKILN_WERROR=OFF -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
  -- "${harnesses[@]}"
mkdir -p "$b/artifacts"
cache=$(mktemp -d "${TMPDIR:-/tmp}/kiln-fuzz-cache-XXXXXX")
trap 'rm -rf "$cache"' EXIT
export KILN_CACHE_DIR=$cache
export ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 # see scripts/test.sh
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failed=()
for h in "${harnesses[@]}"; do
  corpus=$b/corpus/$h
  mkdir -p "$corpus"
  seeds=()
  [ -d "tests/fuzz/corpus/$h" ] && seeds=("tests/fuzz/corpus/$h")
  echo "==== [fuzz] $h for ${secs}s"
  if ! "$b/bin/fuzz/$h" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 \
      -artifact_prefix="$b/artifacts/$h-" -print_final_stats=1 "$corpus" ${seeds[@]+"${seeds[@]}"} \
      >"$b/$h.log" 2>&1; then
    tail -60 "$b/$h.log"
    failed+=("$h")
  else
    grep -E '^stat::number_of_executed_units|^Done' "$b/$h.log" | tr '\n' ' '; echo
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "make fuzz: FAILED: ${failed[*]} (inputs in $b/artifacts/)"
  exit 1
fi
echo "make fuzz: ${#harnesses[@]} harnesses, ${secs}s each, no crash"
