#!/usr/bin/env python3
"""Reference values of kiln's prod, cumsum and cumprod, computed with NumPy.

Writes tests/data/scan_reference.txt, read by tests/backend/test_scan.c,
which builds each case with kiln on the ref and cpu backends. The inputs are
restated here and in the test; each case's meaning is restated with NumPy
(PyTorch's semantics: torch.prod, torch.cumsum, torch.cumprod: bool and
integer inputs give int64, wrapping; an empty product is 1; floats are
accumulated in double, as kiln's sums, and rounded once). The "grad_" cases
are the gradients of sum(out * w) (w as in the test) by PyTorch's rules,
written out here without the chain rule kiln uses: the product of the other
elements, 0 past one zero. One case per line:

    <case> <dtype> <rank> <shape...> <values...>

Run: python3 tests/data/scan_reference.py [out_path]
"""
import math
import sys

import numpy as np

X = np.array([0.3, -1.2, 2.5, 0.7, -3.1, 1.9, 0.05, -0.4, 4.2, -2.6, 1.1, 3.3]).reshape(3, 4)
# rows: one zero, two zeros, none
XZ = np.array([1.5, 0.0, -2.0, 0.5, 0.0, 3.0, 0.0, -1.25, 0.8, -1.1, 2.0, 1.3]).reshape(3, 4)
Y = np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.125 - 1.4
I = np.array([5, -2147483648, 7, -3, 2147483647, 0, -1, 65536], dtype=np.int32).reshape(2, 4)
IW = np.array([1 << 40, 3, -(1 << 30), 1 << 33, 7, -5], dtype=np.int64).reshape(2, 3)
B = np.array([1, 0, 1, 1, 1, 1, 1, 1], dtype=bool).reshape(2, 4)
F = np.array([1.1, -0.7, 2.3, 0.9, 1.7, -1.3, 0.6, 1.9], dtype=np.float32).reshape(2, 4)


def w_of(shape):
    n = int(np.prod(shape))
    return np.array([0.5 + 0.4 * math.sin(1.3 * i + 0.2) for i in range(n)]).reshape(shape)


def f32_via_f64(f, a, *args, **kw):
    return f(a.astype(np.float64), *args, **kw).astype(np.float32)


def grad_prod(x, axis):
    """d sum(prod(x, axis) * w) / dx: w times the product of the others"""
    w = np.expand_dims(w_of(np.prod(x, axis=axis).shape), axis)
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        line = list(idx)
        line[axis] = slice(None)
        others = np.delete(x[tuple(line)], idx[axis])
        wi = list(idx)
        wi[axis] = 0
        g[idx] = w[tuple(wi)] * np.prod(others)
    return g


def grad_cumprod(x, axis):
    """d sum(cumprod(x, axis) * w) / dx_i = sum over j >= i of w_j * prod(x_k, k <= j, k != i)"""
    w = w_of(x.shape)
    g = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        i = idx[axis]
        for j in range(i, x.shape[axis]):
            tj = list(idx)
            tj[axis] = j
            line = list(idx)
            line[axis] = slice(0, j + 1)
            seg = np.delete(x[tuple(line)], i)
            g[idx] += w[tuple(tj)] * np.prod(seg)
    return g


def grad_cumsum(x, axis):
    """the reverse running sum of w"""
    w = w_of(x.shape)
    return np.flip(np.cumsum(np.flip(w, axis), axis), axis)


CASES = {
    "prod_all": ("f64", np.prod(X)),
    "prod1": ("f64", np.prod(X, axis=1)),
    "prod0_keep": ("f64", np.prod(X, axis=0, keepdims=True)),
    "prod_zeros": ("f64", np.prod(XZ, axis=1)),
    "prod_y02": ("f64", np.prod(Y, axis=(0, 2))),
    "prod_y_last": ("f64", np.prod(Y, axis=-1)),
    "prod_f32": ("f32", f32_via_f64(np.prod, F, axis=1)),
    "prod_i32": ("i64", np.prod(I.astype(np.int64), axis=0)),
    "prod_i64_wrap": ("i64", np.prod(IW, axis=1)),
    "prod_bool": ("i64", np.prod(B.astype(np.int64), axis=1)),
    "prod_empty": ("f64", np.prod(np.zeros((3, 0)), axis=1)),
    "cumsum0": ("f64", np.cumsum(X, axis=0)),
    "cumsum1": ("f64", np.cumsum(X, axis=1)),
    "cumsum_y1": ("f64", np.cumsum(Y, axis=1)),
    "cumsum_y_last": ("f64", np.cumsum(Y, axis=-1)),
    "cumsum_f32": ("f32", f32_via_f64(np.cumsum, F, axis=1)),
    "cumsum_i32": ("i64", np.cumsum(I.astype(np.int64), axis=1)),
    "cumsum_bool": ("i64", np.cumsum(B.astype(np.int64), axis=0)),
    "cumsum_empty": ("f64", np.cumsum(np.zeros((0, 3)), axis=0)),
    "cumsum_empty_axis": ("f64", np.cumsum(np.zeros((2, 0)), axis=1)),
    "cumprod1": ("f64", np.cumprod(X, axis=1)),
    "cumprod_zeros": ("f64", np.cumprod(XZ, axis=1)),
    "cumprod_y0": ("f64", np.cumprod(Y, axis=0)),
    "cumprod_i64_wrap": ("i64", np.cumprod(IW, axis=1)),
    "grad_prod_zeros": ("f64", grad_prod(XZ, 1)),
    "grad_prod0": ("f64", grad_prod(XZ, 0)),
    "grad_cumsum1": ("f64", grad_cumsum(XZ, 1)),
    "grad_cumprod_zeros": ("f64", grad_cumprod(XZ, 1)),
    "grad_cumprod0": ("f64", grad_cumprod(XZ, 0)),
}


def fmt(x, dt):
    if dt.startswith("f"):
        x = float(x)
        return "nan" if math.isnan(x) else repr(x)
    return str(int(x))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/scan_reference.txt"
    lines = []
    with np.errstate(over="ignore"):
        for name, (dt, v) in CASES.items():
            v = np.asarray(v)
            lines.append(" ".join([name, dt, str(v.ndim)] + [str(d) for d in v.shape] + [fmt(x, dt) for x in v.ravel()]))
    with open(out, "w") as fh:
        fh.write("# kiln prod/cumsum/cumprod reference values: generated by tests/data/scan_reference.py (NumPy %s)\n"
                 % np.__version__)
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
