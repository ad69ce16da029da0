#!/usr/bin/env python3
"""Interop between kiln's safetensors code and the Hugging Face `safetensors`
package (the reference implementation).

  safetensors_interop.py write-reference OUT   write tests/data/reference.safetensors
  safetensors_interop.py check-kiln FILE       check a file written by kiln

Both sides compute the expected values the same arange-based way as
tests/unit/test_safetensors.c (keep them in sync), so neither side trusts the
other's output: the values are checked against an independent formula.
Needs: pip install safetensors numpy (tests/interop/check_safetensors.sh).
"""
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

# Tensors of the reference file: several dtypes and shapes, including a
# scalar, an empty tensor, dtypes kiln converts (F16 -> f32, U8/I16 -> i32)
# and a name that needs JSON escapes.
REFERENCE = {
    "f32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3) * np.float32(0.5) - np.float32(1),
    "f64_vec": np.arange(5, dtype=np.float64) / 3.0,
    "i32_2x3x4": np.arange(24, dtype=np.int32).reshape(2, 3, 4) - 10,
    "i64_big": np.arange(4, dtype=np.int64) * 1_000_000_000_000 - 7,
    "bool_7": (np.arange(7) % 3) == 0,
    "scalar_f32": np.array(3.25, dtype=np.float32),
    "empty_0x3": np.zeros((0, 3), dtype=np.float32),
    "f16_8": np.arange(8, dtype=np.float16) * np.float16(0.25) - np.float16(1),
    "u8_10": (np.arange(10) * 25).astype(np.uint8),
    "i16_4": (np.arange(4) * -1000).astype(np.int16),
    'odd "name"/\u00fcnicode\t': np.arange(2, dtype=np.float32),
}
REFERENCE_META = {"format": "np", "source": "tests/interop/safetensors_interop.py",
                  "note": 'quoted "value" with a newline\n'}

# What kiln's unit test writes when KILN_INTEROP_OUT is set.
KILN = {
    "w_f32": np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(0.25) - np.float32(1),
    "v_f64": np.arange(6, dtype=np.float64) / 7.0,
    "idx_i32": np.arange(5, dtype=np.int32) * -3,
    "big_i64": np.arange(3, dtype=np.int64) * 5_000_000_000,
    "mask_bool": (np.arange(6) % 2) == 1,
    "step": np.array(42.0, dtype=np.float32),
    "nothing": np.zeros((2, 0), dtype=np.float64),
}
KILN_META = {"written_by": "kiln", "epoch": "3"}


def write_reference(path):
    save_file(REFERENCE, path, metadata=REFERENCE_META)


def check_kiln(path):
    got = load_file(path)
    ok = True
    if set(got) != set(KILN):
        print(f"names differ: got {sorted(got)}, want {sorted(KILN)}")
        ok = False
    for name, want in KILN.items():
        g = got.get(name)
        if g is None:
            continue
        if g.dtype != want.dtype or g.shape != want.shape or not np.array_equal(g, want):
            print(f"{name}: got {g.dtype} {g.shape} {g.ravel()[:8]}, want {want.dtype} {want.shape} {want.ravel()[:8]}")
            ok = False
    with safe_open(path, framework="np") as f:
        meta = f.metadata()
    if meta != KILN_META:
        print(f"metadata: got {meta}, want {KILN_META}")
        ok = False
    print(("OK" if ok else "FAIL") + f": {path}: {len(got)} tensors checked against numpy")
    return ok


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write-reference":
        write_reference(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "check-kiln":
        sys.exit(0 if check_kiln(sys.argv[2]) else 1)
    else:
        sys.exit(__doc__)
