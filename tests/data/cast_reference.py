#!/usr/bin/env python3
"""Reference values of kiln's casts to and from bf16, f16, u8 and i8, made by
PyTorch (bf16, and the 8-bit integers) and NumPy (f16).

Writes tests/data/cast_reference.txt, read by tests/backend/test_dtypes.c,
which casts every input on the ref and cpu backends and compares bits. One
case per line:

    <src dtype> <dst dtype> <n> in_1..in_n out_1..out_n

Floats are written as their bit patterns in hex (f32 0x3f800000, bf16/f16
0x3c00, f64 0x3ff0000000000000); integers in decimal. A NaN output matches
any NaN (PyTorch's and the CPU's NaN payloads differ).

The cases: IEEE specials, round-to-nearest-even ties on both sides of an
even mantissa, the largest finite values and the first ones that overflow
to inf, subnormals of the source and of the target, f64 sources that round
differently directly and through f32 (kiln, like PyTorch's c10 types,
rounds f64 through f32), integers beyond the target's exact range, and
float -> u8/i8 conversions (truncate, then wrap modulo 2^8: what PyTorch
gives on x86 for in-range-of-int64 values).

Run: /usr/bin/python3 tests/data/cast_reference.py [out_path]   (NumPy, PyTorch)
"""
import struct
import sys

import numpy as np
import torch

TORCH = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16,
         "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8, "i8": torch.int8}


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def bits_of(t, dt):
    """bit patterns (float dtypes) or integers of a 1-D tensor"""
    if dt == "f32":
        return [int(x) for x in t.view(torch.int32).numpy().astype(np.uint32)]
    if dt == "f64":
        return [int(x) for x in t.view(torch.int64).numpy().astype(np.uint64)]
    if dt in ("bf16", "f16"):
        return [int(x) for x in t.view(torch.int16).numpy().astype(np.uint16)]
    return [int(x) for x in t.numpy()]


def fmt(v, dt):
    return hex(v) if dt in ("f32", "f64", "bf16", "f16") else str(v)


def f32_inputs():
    b = [0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000,
         0x7F7FFFFF, 0xFF7FFFFF,  # the largest f32: inf in bf16 and f16
         0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF,  # bf16 ties: to even 1.0, to even up, above
         0x7F7F7FFF, 0x7F7F8000,  # below / at the tie to bf16 overflow
         0x00000001, 0x00008000, 0x00018000, 0x007FFFFF,  # f32 subnormals
         0x477FE000, 0x477FEFFF, 0x477FF000,  # 65504, below and at the tie to f16 overflow
         0x33800000, 0x33000000, 0x33400000, 0x33C00000,  # 2^-24 (f16's least), 2^-25 tie, 0.75, 1.5 x 2^-24
         0x3F801000, 0x3F803000, 0x3F801001,  # f16 ties at 1 + 2^-11, 1 + 3 x 2^-11, above
         0x38800000, 0x387FC000,  # f16's least normal, and a value just below it
         0x3EAAAAAB, 0x3DCCCCCD, 0xC2F6E979, 0x4B800001]  # 1/3, 0.1, -123.456, 2^24 + 2
    rng = np.random.default_rng(5)
    b += [int(x) for x in rng.integers(0, 2 ** 32, 24, dtype=np.uint64)]
    return [x for x in b if not (np.isnan(f32(x)) and x != 0x7FC00000)]  # one NaN input is enough


def cases():
    out = []
    fin = torch.tensor(np.array(f32_inputs(), dtype=np.uint32).view(np.float32).copy())
    for dst in ("bf16", "f16"):
        if dst == "bf16":
            res = fin.to(torch.bfloat16)
        else:  # NumPy's float16 conversion (an oracle independent of PyTorch's)
            res = torch.from_numpy(fin.numpy().astype(np.float16))
        out.append(("f32", dst, bits_of(fin, "f32"), bits_of(res, dst)))
    # f64 -> 16-bit: through f32, as PyTorch
    d = [1 + 2.0 ** -8 + 2.0 ** -30, 1 + 2.0 ** -11 + 2.0 ** -40, 65519.99999999, 1e-300, -1e300, 0.1, 2.0 ** -149,
         3.3895313892515355e38, 1 / 3]
    din = torch.tensor(d, dtype=torch.float64)
    for dst in ("bf16", "f16"):
        out.append(("f64", dst, bits_of(din, "f64"), bits_of(din.to(TORCH[dst]), dst)))
    # 16-bit -> f32 / f64 / the other 16-bit type / integers
    for src in ("bf16", "f16"):
        pats = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0x3F80, 0x7BFF, 0x7C00, 0x7F7F, 0x7F80,
                0xFF80, 0xFC00, 0x4170, 0xC2F7, 0x5BFF, 0x4F80, 0x6000, 0x5E00]
        h = torch.tensor(np.array(pats, dtype=np.uint16).view(np.int16).copy()).view(TORCH[src])
        for dst in ("f32", "f64", "bf16" if src == "f16" else "f16"):
            out.append((src, dst, bits_of(h, src), bits_of(h.to(TORCH[dst]), dst)))
        # to integers: finite inputs only (NaN/inf to integers is not defined in PyTorch)
        fins = [p for p in pats if torch.isfinite(torch.tensor([p], dtype=torch.int32).to(torch.int16)
                                                  .view(TORCH[src])).item()]
        hf = torch.tensor(np.array(fins, dtype=np.uint16).view(np.int16).copy()).view(TORCH[src])
        small = hf[(hf.float().abs() < 2 ** 31)]
        for dst in ("i32", "u8", "i8"):
            # to u8/i8 through int64, as kiln (and PyTorch on x86)
            conv = small.to(torch.int64).to(TORCH[dst]) if dst != "i32" else small.to(torch.int32)
            out.append((src, dst, bits_of(small, src), bits_of(conv, dst)))
    # integers -> 16-bit floats: beyond the exact range they round (through f32)
    ints = {"i32": [0, 1, -1, 255, 256, 257, 2049, 2051, 65504, 65520, 16777217, -16777219, 2147483647, -2147483648],
            "i64": [0, -7, 4097, 16777217, 9007199254740993, -9223372036854775808, 9223372036854775807],
            "u8": [0, 1, 7, 127, 128, 200, 255], "i8": [-128, -100, -1, 0, 1, 100, 127]}
    for src, vals in ints.items():
        t = torch.tensor(vals, dtype=TORCH[src])
        for dst in ("bf16", "f16"):
            out.append((src, dst, bits_of(t, src), bits_of(t.to(TORCH[dst]), dst)))
    # between integers: narrowing wraps
    wide = torch.tensor([0, 1, -1, 127, 128, 255, 256, -128, -129, 1000, -1000, 2147483647], dtype=torch.int64)
    for src, dst in (("i64", "u8"), ("i64", "i8"), ("i32", "u8"), ("i32", "i8")):
        t = wide.to(TORCH[src])
        out.append((src, dst, bits_of(t, src), bits_of(t.to(TORCH[dst]), dst)))
    u = torch.tensor([0, 1, 127, 128, 200, 255], dtype=torch.uint8)
    out.append(("u8", "i8", bits_of(u, "u8"), bits_of(u.to(torch.int8), "i8")))
    s = torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8)
    out.append(("i8", "u8", bits_of(s, "i8"), bits_of(s.to(torch.uint8), "u8")))
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/cast_reference.txt"
    with open(path, "w") as fh:
        fh.write("# kiln cast reference values: generated by tests/data/cast_reference.py (NumPy %s, PyTorch %s)\n"
                 % (np.__version__, torch.__version__))
        for src, dst, a, b in cases():
            fh.write("%s %s %d %s %s\n" % (src, dst, len(a), " ".join(fmt(x, src) for x in a),
                                           " ".join(fmt(x, dst) for x in b)))


if __name__ == "__main__":
    main()
