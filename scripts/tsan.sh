#!/usr/bin/env bash
# `make tsan`: the threaded parts (thread pool, executor, queue, metrics,
# profiler event buffers, debug analysis, data loader, the compiler driver's
# parallel parts, the attention tiles' chunks) under ThreadSanitizer, in
# build-tsan/. Only the matching test programs are built. Select others with
# TSAN_TESTS (an extended regex on test names).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
b=${BUILD:-build}-tsan
regex=${TSAN_TESTS:-pool|executor|queue|async|metrics|thread|profiler$|debug|data|cache_cap|cc_parts|attention_tile}
tests=()
for f in tests/unit/*.c tests/backend/*.c tests/e2e/*.c; do
  [ -e "$f" ] || continue
  n=$(basename "$f" .c)
  grep -qE "$regex" <<<"$n" && tests+=("$n")
done
if [ ${#tests[@]} -eq 0 ]; then
  echo "make tsan: no test matches /$regex/"
  exit 1
fi
echo "==== [tsan] build: ${tests[*]}"
bash scripts/build.sh "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=thread -- "${tests[@]}"
# The GEMM libraries (oneDNN's OpenMP, OpenBLAS's threads) are not
# instrumented and would only add false reports: use the naive GEMM.
export KILN_GEMM=naive
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4"
# gcc 12's TSan cannot map its shadow under the high mmap entropy of recent
# kernels; running without ASLR avoids that where the sandbox allows it.
wrap=()
if setarch "$(uname -m)" -R true 2>/dev/null; then wrap=(setarch "$(uname -m)" -R); fi
names=$(IFS='|'; echo "${tests[*]}")
echo "==== [tsan] ctest"
"${wrap[@]}" ctest --test-dir "$b" --output-on-failure -j "${JOBS:-2}" -R "^($names)\$" --no-tests=error
