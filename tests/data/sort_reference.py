#!/usr/bin/env python3
"""Reference values of kiln's sorting and scattering ops (sort, argsort, topk,
scatter, scatter_add, index_add, index_put), computed with NumPy and plain
Python.

Writes tests/data/sort_reference.txt, read by tests/backend/test_sort.c, which
builds each case with kiln on the ref and cpu backends. The inputs are
restated here and in the test. Semantics (PyTorch's, docs/semantics.md):
torch.sort(stable=True) with NaN the largest value, ties in their original
order (ascending: np.argsort(kind="stable"); descending: Python's stable
sorted(reverse=True) on (isnan, value) keys); torch.topk(sorted=True) as the
first k of that sort; scatter_add / index_add / index_put(accumulate=True) as
np.add.at; scatter / index_put with duplicate indices: the last one along the
axis wins (kiln's documented choice, PyTorch leaves it unspecified). One case
per line:

    <case> <dtype> <rank> <shape...> <values...>

Run: python3 tests/data/sort_reference.py [out_path]
"""
import math
import sys

import numpy as np

NAN = math.nan
# ties, NaNs (several in one row), a signed zero, a row already sorted
XS = np.array([3.0, 1.0, 2.0, 1.0, NAN, -1.0, NAN, 0.0, 2.0, 2.0, -0.0, 0.0]).reshape(3, 4)
# integers with ties at the extremes
IS = np.array([5, -2147483648, 7, -2147483648, 2147483647, 0, 2147483647, -1], dtype=np.int32).reshape(2, 4)
X = np.array([0.3, -1.2, 2.5, 0.7, -3.1, 1.9, 0.05, -0.4, 4.2, -2.6, 1.1, 3.3]).reshape(3, 4)
SRC = np.arange(12, dtype=np.float64).reshape(3, 4) * 0.5 + 1.0
# scatter along axis 0: duplicates in columns 1 and 3 ([2,4] index into a [3,4] tensor)
IDX0 = np.array([[0, 2, 2, 1], [2, 2, 0, 1]])
# along axis 1, an index narrower than src ([3,2] into [3,4]), duplicates in row 1
IDX1 = np.array([[3, 0], [1, 1], [2, 3]])
IDX_ADD = np.array([3, 0, 3])
IDX_PUT = np.array([2, 0, 2])
IDXI = np.array([[1, 1, 0, 3], [0, 2, 2, 2]])


def sort_idx(a, axis, desc):
    """stable sort positions along axis; NaN the largest"""
    a = np.moveaxis(a, axis, -1)
    out = np.empty(a.shape, dtype=np.int64)
    for pos in np.ndindex(a.shape[:-1]):
        row = a[pos]
        if desc:
            key = [(1, 0.0) if (isinstance(v, float) and math.isnan(v)) else (0, v) for v in row.tolist()]
            out[pos] = sorted(range(len(row)), key=lambda j: key[j], reverse=True)
        else:
            out[pos] = np.argsort(row, kind="stable")
    return np.moveaxis(out, -1, axis)


def sort_vals(a, axis, desc):
    return np.take_along_axis(a, sort_idx(a, axis, desc), axis)


def topk(a, k, axis, largest):
    i = np.take(sort_idx(a, axis, largest), np.arange(k), axis=axis)
    return np.take_along_axis(a, i, axis), i


def scatter(x, axis, idx, src, add):
    """x with src written (or added) at idx along axis, in row-major order of idx"""
    out = x.copy()
    for pos in np.ndindex(idx.shape):
        t = list(pos)
        t[axis] = idx[pos]
        if add:
            out[tuple(t)] = out[tuple(t)] + src[pos]
        else:
            out[tuple(t)] = src[pos]
    return out


def index_add(x, axis, idx, src):
    out = x.copy()
    np.add.at(np.moveaxis(out, axis, 0), idx, np.moveaxis(src, axis, 0))
    return out


def index_put(x, idx, vals, acc):
    out = x.copy()
    if acc:
        np.add.at(out, idx, vals)
    else:
        for i, j in enumerate(idx):
            out[j] = vals[i]
    return out


def scatter_add_i32(x, axis, idx, src):
    out = x.astype(np.int64)
    np.add.at(out, tuple(idx if d == axis else np.indices(idx.shape)[d] for d in range(idx.ndim)), src[:2, :4])
    return ((out + 2**31) % 2**32 - 2**31).astype(np.int32)  # i32 wraps


CASES = {
    "sort1_vals": ("f64", sort_vals(XS, 1, False)),
    "sort_x_desc": ("f64", sort_vals(X, 1, True)),
    "sort1_idx": ("i64", sort_idx(XS, 1, False)),
    "sort1_desc_vals": ("f64", sort_vals(XS, 1, True)),
    "sort1_desc_idx": ("i64", sort_idx(XS, 1, True)),
    "sort0_idx": ("i64", sort_idx(XS, 0, False)),
    "sort0_desc_idx": ("i64", sort_idx(XS, 0, True)),
    "argsort_i32": ("i64", sort_idx(IS, 1, False)),
    "argsort_i32_desc": ("i64", sort_idx(IS, 1, True)),
    "sort_i32_vals": ("i32", sort_vals(IS, 0, True)),
    "argsort_bool_desc": ("i64", sort_idx((XS > 1.0).astype(np.int64), 1, True)),  # bool sorts as 0/1
    "topk2_vals": ("f64", topk(XS, 2, 1, True)[0]),
    "topk2_idx": ("i64", topk(XS, 2, 1, True)[1]),
    "topk0_vals": ("f64", topk(XS, 0, 1, True)[0]),
    "topk4_small_idx": ("i64", topk(XS, 4, 1, False)[1]),
    "topk_axis0_vals": ("f64", topk(X, 3, 0, True)[0]),
    "topk_axis0_idx": ("i64", topk(X, 2, 0, False)[1]),
    "scatter0": ("f64", scatter(X, 0, IDX0, SRC, False)),
    "scatter_add0": ("f64", scatter(X, 0, IDX0, SRC, True)),
    "scatter1": ("f64", scatter(X, 1, IDX1, SRC, False)),
    "scatter_add1": ("f64", scatter(X, 1, IDX1, SRC, True)),
    "scatter_add_i32": ("i32", scatter_add_i32(IS, 1, IDXI, IS)),
    "index_add1": ("f64", index_add(X, 1, IDX_ADD, SRC[:, :3])),
    "index_put": ("f64", index_put(X, IDX_PUT, SRC, False)),
    "index_put_acc": ("f64", index_put(X, IDX_PUT, SRC, True)),
    "index_put_bcast": ("f64", index_put(X, IDX_PUT[:2], np.broadcast_to(SRC[0], (2, 4)), True)),
}


def fmt(x, dt):
    if dt.startswith("f"):
        x = float(x)
        return "nan" if math.isnan(x) else repr(x)
    return str(int(x))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/sort_reference.txt"
    lines = []
    for name, (dt, v) in CASES.items():
        v = np.asarray(v)
        lines.append(" ".join([name, dt, str(v.ndim)] + [str(d) for d in v.shape] + [fmt(x, dt) for x in v.ravel()]))
    with open(out, "w") as fh:
        fh.write("# kiln sort/scatter reference values: generated by tests/data/sort_reference.py (NumPy %s)\n"
                 % np.__version__)
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
