#!/usr/bin/env bash
# An install is relocatable (issue 11): install the build to one prefix,
# move it to another, then build and run a program against the moved copy
# twice: with pkg-config (kiln.pc) and with find_package(kiln) (the CMake
# package). Nothing installed may name the first prefix. Run by ctest
# (test_install_relocated, label e2e).
# Usage: check_install.sh BUILD_DIR SOURCE_DIR C_COMPILER [SANITIZERS]
# (SANITIZERS: the build's KILN_SANITIZE; the programs need the same flags).
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) cc=$3 san=${4:-}
flags=()
if [ -n "$san" ]; then flags=(-fsanitize="$san"); fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tmp=$(cd "$tmp" && pwd -P) # /proc/self/maps names the real path
fail() { echo "check_install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/p1" >/dev/null
mv "$tmp/p1" "$tmp/p2"
p2=$tmp/p2
if grep -rl "$tmp/p1" "$p2"; then fail "the files above still name the install prefix $tmp/p1"; fi
pc=$(find "$p2" -name kiln.pc)
[ -n "$pc" ] || fail "no kiln.pc under $p2"
libdir=$(dirname "$(dirname "$pc")") # <prefix>/lib or <prefix>/lib/<multiarch>
export KILN_CACHE_DIR=$tmp/cache

# pkg-config: every path it gives lies in the moved install.
export PKG_CONFIG_PATH=$libdir/pkgconfig
pcflags=$(pkg-config --cflags --libs kiln)
echo "pkg-config --cflags --libs kiln: $pcflags"
# kiln.pc's version is the installed header's KILN_VERSION_STRING.
hdr=$(find "$p2" -path '*/kiln/kiln.h' | head -1)
hv=$(sed -n 's/^#define KILN_VERSION_STRING "\(.*\)"$/\1/p' "$hdr")
pv=$(pkg-config --modversion kiln)
[ -n "$hv" ] && [ "$pv" = "$hv" ] || fail "kiln.pc says version $pv, the installed kiln.h ${hv:-none}"
for f in $pcflags; do
  case $f in
    -I* | -L*) d=$(cd "${f:2}" 2>/dev/null && pwd -P) || fail "$f: no such directory"
      case $d in "$p2"/*) ;; *) fail "$f is outside the install ($p2)" ;; esac ;;
  esac
done
# shellcheck disable=SC2086 # pcflags is a list of words
"$cc" ${flags[@]+"${flags[@]}"} "$src/tests/install/prog.c" $pcflags -Wl,-rpath,"$libdir" -o "$tmp/prog"
module=$libdir/kiln/libkiln_grpc.so
args=()
if [ -f "$module" ]; then args=("$module"); fi # built with gRPC: libkiln must load this one
out=$("$tmp/prog" ${args[@]+"${args[@]}"}) || fail "the pkg-config program failed (output: $out)"
[ "$out" = 385 ] || fail "the pkg-config program printed $out, expected 385"

# find_package(kiln) with CMAKE_PREFIX_PATH: shared and static library.
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$p2" -DKILN_PROG="$src/tests/install/prog.c" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${flags[*]-}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/consumer" >/dev/null
grep -q "$p2" "$tmp/consumer/CMakeCache.txt" || fail "find_package(kiln) did not find the moved install"
for p in prog_shared prog_static; do
  out=$("$tmp/consumer/$p") || fail "$p failed (output: $out)"
  [ "$out" = 385 ] || fail "$p printed $out, expected 385"
done
echo "check_install: ok (installed, moved to $p2, built and ran with pkg-config and find_package)"
