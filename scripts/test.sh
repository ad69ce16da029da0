#!/usr/bin/env bash
# `make test`: the whole suite twice — a normal RelWithDebInfo build (build/)
# and an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/,
# directory prefix "build" overridable with BUILD=...;
# leak detection on). Stops at the first failing run. The last line printed
# is the combined test summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export JOBS=${JOBS:-2}
b=${BUILD:-build} # build directory prefix: $b and $b-asan

summary() { # the ctest summary line of a log, or a failure note
  grep -E '^[0-9]+% tests passed' "$1" | tail -1 || true
}
count() { sed -n 's/.* out of \([0-9]*\).*/\1/p' <<<"$1"; }

run_suite() { # run_suite <label> <build dir> <cmake options...>
  local label=$1 dir=$2; shift 2
  echo "==== [$label] build ($dir)"
  bash scripts/build.sh "$dir" "$@"
  echo "==== [$label] ctest"
  local log=$dir/ctest.log rc=0
  ctest --test-dir "$dir" --output-on-failure -j "$JOBS" 2>&1 | tee "$log" || rc=$?
  local s
  s=$(summary "$log")
  if [ $rc -ne 0 ] || [ -z "$s" ]; then
    echo "make test: [$label] failed: ${s:-no tests ran}"
    exit 1
  fi
  last_summary=$s
}

run_suite normal "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=
sum_normal=$last_summary
# The sanitizer run: every error is fatal (-fno-sanitize-recover=all in CMake),
# leaks included; GEMM and kernel libraries are not instrumented, which is fine
# for ASan/UBSan.
# intercept_tls_get_addr=0: the sanitizer runtime of GCC 12 and LLVM 14
# (Debian 12) takes a dynamic TLS block that happens to start at offset 16
# of a page for a glibc 2.19 header and reads two words before it as the
# block's bounds; LeakSanitizer's tracer then dies scanning them ("Tracer
# caught signal 11"), after the test passed, depending on where malloc put
# the block (libgomp's and oneDNN's TLS, loaded with the GEMM library).
# Without the interceptor static TLS is still scanned (use_tls).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ -f "$root/scripts/lsan.supp" ]; then
  export LSAN_OPTIONS=suppressions=$root/scripts/lsan.supp:print_suppressions=0
fi
run_suite asan "$b-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=address,undefined,float-cast-overflow
sum_asan=$last_summary

n1=$(count "$sum_normal"); n2=$(count "$sum_asan")
echo "normal build: $sum_normal"
echo "asan+ubsan build: $sum_asan"
echo "100% tests passed, 0 tests failed out of $((n1 + n2)) ($n1 normal + $n2 under ASan+UBSan)"
