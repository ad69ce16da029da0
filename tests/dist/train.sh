#!/usr/bin/env bash
# `kiln train` under mpirun (docs/distributed.md): 2 ranks with the global
# batch split between them train the MLP to the loss curve and test
# accuracy of one process with the same global batch: with SGD within
# floating-point reassociation (every printed value), with AdamW (the
# default) to the same final accuracy within noise (Adam divides by the root
# of the squared gradients, so a last-bit difference in a near-zero gradient
# moves its update by up to the learning rate: a 100-step curve drifts by a
# few tenths of a percent, as any change of summation order makes it drift).
# Only rank 0 prints and writes outputs (checkpoint, TensorBoard curves). A
# bad --batch is refused naming the flag.
# Usage: train.sh MPIRUN KILN_BIN   (needs Fashion-MNIST: skipped without it)
set -euo pipefail
mpirun=$1 kiln=$2
data=${KILN_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ ! -e "$data/train-labels-idx1-ubyte.gz" ] && [ ! -e "$data/train-labels-idx1-ubyte" ]; then
  echo "SKIP: no Fashion-MNIST in $data (Debian package dataset-fashion-mnist)"
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(--model mlp --max-steps 100 --batch 64 --eval-every 50)
fail() { echo "FAIL: $*"; echo "--- one process:"; cat "$tmp/one.txt"; echo "--- two ranks:"; cat "$tmp/two.txt"; exit 1; }

fwd=(-x KILN_NUM_THREADS -x KILN_CACHE_DIR)
if [ -n "${ASAN_OPTIONS:-}" ]; then
  # the sanitizer suite: Open MPI leaks its own state at MPI_Finalize (run.sh)
  export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
  fwd+=(-x ASAN_OPTIONS)
fi
[ -n "${UBSAN_OPTIONS:-}" ] && fwd+=(-x UBSAN_OPTIONS)
# NAME EXTRA...: one process into NAME-one.txt, 2 ranks into NAME-two.txt (checkpoint, logs in $tmp/NAME-logs)
run_both() {
  local name=$1
  shift
  timeout 300 "$kiln" train "${flags[@]}" "$@" --checkpoint "$tmp/$name-one.safetensors" >"$tmp/one.txt" 2>&1 ||
    fail "one process ($name)"
  mkdir "$tmp/$name-logs"
  timeout 300 "$mpirun" --oversubscribe -np 2 --mca btl self,vader "${fwd[@]}" "$kiln" train "${flags[@]}" "$@" \
    --checkpoint "$tmp/$name-two.safetensors" --logdir "$tmp/$name-logs" >"$tmp/two.txt" 2>&1 || fail "mpirun -np 2 ($name)"
  cp "$tmp/one.txt" "$tmp/$name-one.txt"
  cp "$tmp/two.txt" "$tmp/$name-two.txt"
}
# the curves: every logged loss, the evaluations and the final accuracy
curve() { tr '\r' '\n' <"$1" | grep -oE 'loss [0-9.]+|test accuracy [0-9.]+%' | grep -oE '[0-9.]+'; }

run_both sgd --optim sgd
mapfile -t a < <(curve "$tmp/sgd-one.txt")
mapfile -t b < <(curve "$tmp/sgd-two.txt")
[ "${#a[@]}" -ge 6 ] || fail "one process logged ${#a[@]} values"
[ "${#a[@]}" = "${#b[@]}" ] || fail "${#a[@]} logged values alone, ${#b[@]} with 2 ranks"
for i in "${!a[@]}"; do
  # 4 printed decimals of a loss; accuracies in %: reassociation moves them by far less than 0.05
  awk -v x="${a[$i]}" -v y="${b[$i]}" 'BEGIN { d = x - y; if (d < 0) d = -d; exit !(d <= 0.002 + 0.002 * x) }' ||
    fail "SGD value $i: ${a[$i]} alone, ${b[$i]} with 2 ranks"
done

run_both adamw
mapfile -t c < <(curve "$tmp/adamw-one.txt")
mapfile -t d < <(curve "$tmp/adamw-two.txt")
[ "${#c[@]}" = "${#d[@]}" ] || fail "${#c[@]} logged values alone, ${#d[@]} with 2 ranks (AdamW)"
# the last line: "final test accuracy A% (test loss L)": A within 1 point, L within 2 %
n=${#c[@]}
awk -v x="${c[$((n - 2))]}" -v y="${d[$((n - 2))]}" 'BEGIN { d = x - y; if (d < 0) d = -d; exit !(d <= 1.0) }' ||
  fail "AdamW final accuracy ${c[$((n - 2))]}% alone, ${d[$((n - 2))]}% with 2 ranks"
awk -v x="${c[$((n - 1))]}" -v y="${d[$((n - 1))]}" 'BEGIN { d = x - y; if (d < 0) d = -d; exit !(d <= 0.02 * x) }' ||
  fail "AdamW final test loss ${c[$((n - 1))]} alone, ${d[$((n - 1))]} with 2 ranks"
# rank 0 alone printed and wrote
[ "$(grep -c '^kiln train: model' "$tmp/two.txt")" = 1 ] || fail "the header printed more than once"
[ "$(tr '\r' '\n' <"$tmp/two.txt" | grep -c '^final test accuracy')" = 1 ] || fail "the result printed more than once"
[ -s "$tmp/adamw-two.safetensors" ] || fail "no checkpoint"
[ "$(ls "$tmp/adamw-logs" | wc -l)" = 1 ] || fail "logdir holds $(ls "$tmp/adamw-logs")"
# a global batch that does not split over the ranks: refused, naming the flag
if timeout 120 "$mpirun" --oversubscribe -np 2 --mca btl self,vader "${fwd[@]}" "$kiln" train --batch 63 --max-steps 1 \
  --checkpoint "$tmp/bad.safetensors" >"$tmp/bad.txt" 2>&1; then
  fail "--batch 63 on 2 ranks was accepted"
fi
grep -q -- "--batch: the global batch 63 does not split over the 2 processes" "$tmp/bad.txt" ||
  { cat "$tmp/bad.txt"; fail "no --batch message"; }
[ ! -e "$tmp/bad.safetensors" ] || fail "a refused run wrote a checkpoint"
echo "kiln train: 2 ranks match one process (SGD: ${a[*]}; AdamW: ${c[*]} alone, ${d[*]} with 2 ranks)"
