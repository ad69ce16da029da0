#!/bin/sh
# Interop check between kiln's BERT and Hugging Face `transformers`: a model
# fine-tuned by kiln (examples/embed_similarity.c, five AdamW steps on
# all-MiniLM-L6-v2) is saved under the published names; `transformers` loads
# the folder (no missing or unexpected tensors but the pooler, which
# sentence embeddings do not use and kiln carries through) and its sentence
# embeddings equal kiln's (`kiln embed` on the same folder): cosine >=
# 0.99999 for each sentence of tests/data/minilm_sentences.txt.
# Usage: tests/interop/check_bert_transformers.sh [build-dir]   (default: build)
# Needs PyTorch (Debian's python3-torch) and PyPI's transformers (a venv with
# the system packages, /tmp/tf-venv; override: TF_VENV).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
venv=${TF_VENV:-/tmp/tf-venv}
model=$build/models/all-MiniLM-L6-v2
[ -f "$model/model.safetensors" ] || bash "$root/scripts/fetch-model.sh" "$model"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import transformers, torch' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  # transformers 4.x: Debian's torch is 1.13; numpy < 2 for that torch
  "$venv/bin/pip" install -q "transformers==4.45.2" "numpy<2"
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bert-interop-XXXXXX")
trap 'rm -rf "$out"' EXIT
KILN_CACHE_DIR="$out/cache" "$build/bin/examples/embed_similarity" "$model" "$out" >/dev/null
cp "$model/vocab.txt" "$model/sentence_bert_config.json" "$out/"
KILN_CACHE_DIR="$out/cache" "$build/bin/kiln" embed --model "$out" <"$root/tests/data/minilm_sentences.txt" >"$out/kiln.txt"
"$venv/bin/python" - "$out" "$model" "$root/tests/data/minilm_sentences.txt" <<'PY'
import sys
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer
out, model_dir, sentences = sys.argv[1:4]
m, info = AutoModel.from_pretrained(out, output_loading_info=True)
assert not info["unexpected_keys"] and not info["mismatched_keys"], info
assert set(info["missing_keys"]) <= {"pooler.dense.weight", "pooler.dense.bias"}, info
tok = AutoTokenizer.from_pretrained(model_dir)
with open(sentences, "rb") as fh:
    S = [l.decode("utf-8") for l in fh.read().split(b"\n")[:-1]]
kiln = np.loadtxt(out + "/kiln.txt", ndmin=2)
assert kiln.shape == (len(S), 384), kiln.shape
with torch.no_grad():
    for i, s in enumerate(S):
        b = tok([s], truncation=True, max_length=256, return_tensors="pt")
        h = m(**b).last_hidden_state[0].numpy().mean(0)
        h /= max(np.linalg.norm(h), 1e-12)
        c = float(np.dot(h, kiln[i]) / np.linalg.norm(kiln[i]))
        assert c >= 0.99999, (i, c)
print("check_bert_transformers: transformers loads kiln's fine-tuned model; %d embeddings agree" % len(S))
PY
