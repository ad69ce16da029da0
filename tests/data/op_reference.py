#!/usr/bin/env python3
"""Reference values of kiln's public elementwise ops, computed with NumPy.

Writes tests/data/op_reference.txt, read by tests/backend/test_op_table.c,
which runs every public elementwise row of kiln's op table
(include/kiln/ops.def) on the ref and cpu backends against these values.

Each op's meaning is restated here independently of kiln, with PyTorch's
dtype rules: "float" ops compute integer and bool operands in f32; neg, abs,
relu, sub are not defined on bool; comparisons and logical ops give bool;
integer arithmetic wraps. Inputs include the IEEE specials (NaN, +-inf, -0)
and the integer extremes. One case per line:

    <fn> <arity> <in dtype> <out dtype> <n> a_1..a_n [b_1..b_n] out_1..out_n

bf16 and f16 operands are computed in f64 and rounded to f32 then to the
16-bit dtype (kiln computes them in f32: results may differ by one 16-bit
ulp, the test's tolerance); u8 and i8 wrap as NumPy's uint8 and int8 do.

Run (needs NumPy and PyTorch, Debian's python3-numpy and python3-torch):
    python3 tests/data/op_reference.py [out_path]
Adding an op to the table means adding its entry to OPS below and rerunning.
"""
import math
import sys

import numpy as np

F32, F64, I32, I64, BOOL = "f32", "f64", "i32", "i64", "bool"
BF16, F16, U8, I8 = "bf16", "f16", "u8", "i8"
NP = {F32: np.float32, F64: np.float64, I32: np.int32, I64: np.int64, BOOL: np.bool_,
      F16: np.float16, U8: np.uint8, I8: np.int8}
FLOATS = (F32, F64, BF16, F16)
HALVES = (BF16, F16)
DTYPES = (F32, F64, I32, I64, BOOL, BF16, F16, U8, I8)


def to_half(x, dt):
    """f64 values rounded to bf16 / f16 the way kiln stores them: to f32
    first, then to nearest even (PyTorch's c10::BFloat16 / NumPy's float16),
    returned as f64. bf16 rounding comes from PyTorch (an outside oracle)."""
    x32 = np.asarray(x, dtype=np.float64).astype(np.float32)
    if dt == F16:
        return x32.astype(np.float16).astype(np.float64)
    import torch
    return torch.from_numpy(x32.copy()).to(torch.bfloat16).to(torch.float64).numpy()

VALUES = {
    "float": [-3.5, -2.0, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 10.0, 100.0,
              math.nan, math.inf, -math.inf],
    I32: [-2147483648, -100, -7, -2, -1, 0, 1, 2, 3, 7, 100, 2147483647],
    I64: [-9223372036854775808, -4611686018427387904, -7, -2, -1, 0, 1, 2, 3, 7,
          4611686018427387904, 9223372036854775807],
    BOOL: [0, 1],
    U8: [0, 1, 2, 3, 7, 100, 127, 128, 200, 255],
    I8: [-128, -100, -7, -2, -1, 0, 1, 2, 3, 7, 100, 127],
}

erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    return x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def integral(f):
    """a rounding function: the identity on integers (NumPy's would go through f64)"""
    return lambda a: a if a.dtype.kind in "iub" else f(a)


def remainder(a, b):
    """Python's %: NumPy's remainder, except x % 0 = 0 on integers (NumPy's too)"""
    return np.remainder(a, b)


def int_pow(a, b, dt):
    """PyTorch's integer pow, from Python's integers: by squaring modulo 2^64
    then wrapped to dt; a negative exponent truncates 1 / a^-b (1 for 1,
    +-1 for -1, else 0)"""
    bits = {I32: 32, I64: 64, U8: 8, I8: 8}[dt]
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        if y < 0:
            r = 1 if x == 1 else (-1 if y & 1 else 1) if x == -1 else 0
        else:
            r = pow(x, y, 1 << bits)
        r %= 1 << bits
        if dt != U8 and r >= 1 << (bits - 1):
            r -= 1 << bits
        out.append(r)
    return np.array(out, dtype=NP[dt])


def relu(x):
    return np.where(x < 0, np.zeros_like(x), x)


# name: (arity, rule, function). rule: "float" (integer and bool operands in
# f32, computed in f64 and rounded), "num" (same dtype, not bool), "any" (same
# dtype, bool included), "cmp" (bool result), "logic" (operands as bool),
# "fpred" (a bool test of the operand, integer and bool operands in f32).
OPS = {
    "neg": (1, "num", lambda a: -a),
    "abs": (1, "num", np.abs),
    "exp": (1, "float", np.exp),
    "log": (1, "float", np.log),
    "sqrt": (1, "float", np.sqrt),
    "rsqrt": (1, "float", lambda a: 1.0 / np.sqrt(a)),
    "tanh": (1, "float", np.tanh),
    "sigmoid": (1, "float", lambda a: 1.0 / (1.0 + np.exp(-a))),
    "relu": (1, "num", relu),
    "gelu": (1, "float", gelu),
    "gelu_tanh": (1, "float", gelu_tanh),
    "erf": (1, "float", erf),
    "sin": (1, "float", np.sin),
    "cos": (1, "float", np.cos),
    "logical_not": (1, "logic", np.logical_not),
    "floor": (1, "num", integral(np.floor)),
    "ceil": (1, "num", integral(np.ceil)),
    "round": (1, "num", integral(np.rint)),
    "trunc": (1, "num", integral(np.trunc)),
    "sign": (1, "num", np.sign),
    "log1p": (1, "float", np.log1p),
    "expm1": (1, "float", np.expm1),
    "isnan": (1, "fpred", np.isnan),
    "isinf": (1, "fpred", np.isinf),
    "isfinite": (1, "fpred", np.isfinite),
    "add": (2, "any", lambda a, b: a + b),
    "sub": (2, "num", lambda a, b: a - b),
    "mul": (2, "any", lambda a, b: a * b),
    "div": (2, "float", lambda a, b: a / b),
    "pow": (2, "ipow", np.power),
    "maximum": (2, "any", np.maximum),
    "minimum": (2, "any", np.minimum),
    "eq": (2, "cmp", lambda a, b: a == b),
    "ne": (2, "cmp", lambda a, b: a != b),
    "lt": (2, "cmp", lambda a, b: a < b),
    "le": (2, "cmp", lambda a, b: a <= b),
    "gt": (2, "cmp", lambda a, b: a > b),
    "ge": (2, "cmp", lambda a, b: a >= b),
    "logical_and": (2, "logic", np.logical_and),
    "logical_or": (2, "logic", np.logical_or),
    "remainder": (2, "num", remainder),
    "fmod": (2, "num", np.fmod),
}


def values(dt):
    return VALUES["float"] if dt in FLOATS else VALUES[dt]


def operands(dt, arity):
    v = values(dt)
    n = len(v)
    npdt = np.float64 if dt in HALVES else NP[dt]  # every float value is exact in bf16 and f16
    if arity == 1:
        return [np.array(v, dtype=npdt)]
    pairs = [(i, j) for i in range(n) for j in sorted({i, (i + 1) % n, (i + 5) % n, (i + n // 2) % n})]
    return [np.array([v[i] for i, _ in pairs], dtype=npdt), np.array([v[j] for _, j in pairs], dtype=npdt)]


def case(fn, arity, rule, f, dt):
    """(out dtype, output array) of fn on operands of dtype dt, or None when
    the op is not defined on dt."""
    ops = operands(dt, arity)
    with np.errstate(all="ignore"):
        if dt in HALVES:  # computed in f64, rounded once to f32 then to dt (kiln computes in f32)
            if rule in ("float", "num", "any", "ipow"):
                return ops, dt, to_half(f(*ops), dt)
            if rule == "fpred":
                return ops, BOOL, f(ops[0])
        if rule == "ipow":  # integers stay integers (PyTorch's); bool is not defined
            if dt == BOOL:
                return None
            if dt not in FLOATS:
                return ops, dt, int_pow(ops[0], ops[1], dt)
            rule = "float"
        if rule == "float":
            odt = dt if dt in FLOATS else F32
            x = [o.astype(NP[odt]).astype(np.float64) for o in ops]
            return ops, odt, f(*x).astype(NP[odt])
        if rule == "fpred":
            return ops, BOOL, f(ops[0].astype(NP[dt if dt in FLOATS else F32]))
        if rule == "num" and dt == BOOL:
            return None
        if rule == "logic":
            return ops, BOOL, f(*[o.astype(np.bool_) for o in ops])
        if rule == "cmp":
            return ops, BOOL, f(*ops)
        return ops, dt, f(*ops).astype(NP[dt])


def fmt(x, dt):
    if dt in FLOATS:
        x = float(x)
        return "nan" if math.isnan(x) else repr(x)
    return str(int(x))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/op_reference.txt"
    lines = []
    for fn, (arity, rule, f) in OPS.items():
        for dt in DTYPES:
            c = case(fn, arity, rule, f, dt)
            if c is None:
                continue
            ops, odt, res = c
            n = len(res)
            vals = [fmt(x, dt) for o in ops for x in o] + [fmt(x, odt) for x in res]
            lines.append("%s %d %s %s %d %s" % (fn, arity, dt, odt, n, " ".join(vals)))
    with open(out, "w") as fh:
        import torch
        fh.write("# kiln op reference values: generated by tests/data/op_reference.py (NumPy %s, PyTorch %s)\n"
                 % (np.__version__, torch.__version__))
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
