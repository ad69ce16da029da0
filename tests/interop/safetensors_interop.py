#!/usr/bin/env python3
"""Interop between kiln's safetensors code and the Hugging Face `safetensors`
package (the reference implementation).

  safetensors_interop.py write-reference OUT   write tests/data/reference.safetensors
  safetensors_interop.py write-reference16 OUT write tests/data/reference16.safetensors
                                               (BF16/F16/U8/I8, through PyTorch)
  safetensors_interop.py check-kiln FILE       check a file written by kiln

Both sides compute the expected values the same arange-based way as
tests/unit/test_safetensors.c (keep them in sync), so neither side trusts the
other's output: the values are checked against an independent formula.
Needs: pip install safetensors numpy (tests/interop/check_safetensors.sh);
write-reference16 and the 16-bit entries of check-kiln also need PyTorch
(Debian's python3-torch: a venv made with --system-site-packages sees it).
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

# 16-bit floats and 8-bit integers, as torch tensors (NumPy has no bfloat16).
# The reference values are exact in their dtype, so that the C test states
# them as literals; test_safetensors.c keeps the same lists.
def reference16():
    import torch
    inf, nan = float("inf"), float("nan")
    return {
        "bf16_specials": torch.tensor([1.0, -2.0, inf, -inf, nan, 2.0 ** -133, 3.3895313892515355e38, -0.0,
                                       1.0078125], dtype=torch.bfloat16),
        "f16_specials": torch.tensor([65504.0, 2.0 ** -24, -0.0, inf, nan, 0.333251953125, -0.0999755859375],
                                     dtype=torch.float16),
        "u8_img": (torch.arange(12, dtype=torch.int32) * 21).to(torch.uint8).reshape(3, 4),
        "i8_q": torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8),
    }


# What kiln's unit test writes of those dtypes (same formulas there).
def kiln16():
    import torch
    return {
        "h_bf16": (torch.arange(6, dtype=torch.float32) * 0.375 - 1).to(torch.bfloat16),
        "h_f16": (torch.arange(5, dtype=torch.float32) / 3).to(torch.float16),
        "px_u8": (torch.arange(8, dtype=torch.int32) * 37).to(torch.uint8),
        "q_i8": (torch.arange(6, dtype=torch.int32) * 60 - 128).to(torch.int8),
    }


def write_reference16(path):
    from safetensors.torch import save_file as save_torch
    save_torch(reference16(), path, metadata={"source": "tests/interop/safetensors_interop.py write-reference16"})


def check_kiln16(path):
    """The 16-bit and 8-bit entries kiln wrote, read by the package through
    PyTorch, bit for bit."""
    import torch
    from safetensors.torch import load_file as load_torch
    got, ok = load_torch(path), True
    for name, want in kiln16().items():
        g = got.get(name)
        if g is None or g.dtype != want.dtype or g.shape != want.shape or not torch.equal(g, want):
            print(f"{name}: got {g}, want {want}")
            ok = False
    return ok


def write_reference(path):
    save_file(REFERENCE, path, metadata=REFERENCE_META)


def check_kiln(path):
    with safe_open(path, framework="np") as f:
        names = set(f.keys())
    plain = names - set(kiln16())
    ok = check_kiln16(path)
    with safe_open(path, framework="np") as f:
        got = {k: f.get_tensor(k) for k in plain}
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
    print(("OK" if ok else "FAIL") + f": {path}: {len(names)} tensors checked against numpy and PyTorch")
    return ok


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write-reference":
        write_reference(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "write-reference16":
        write_reference16(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "check-kiln":
        sys.exit(0 if check_kiln(sys.argv[2]) else 1)
    else:
        sys.exit(__doc__)
