"""Exact islands of the differential test (tests/diff/difftest.py).

Integer arithmetic wraps, comparisons and logic give bools, and the rounding
ops of floats are exact on values with few significant bits: there kiln has
one right answer, bit for bit, whatever it fuses. An island is a short chain
of such ops on fresh inputs (u8, i8, i32, i64 with their extremes; floats
with NaN, infinities, -0 and halves), mixed with promotion, the scalar forms
(`_s` a graph input, `_c` a constant), reductions, integer matmul, sorting
and scattering, and read without a tolerance.

The oracle restates docs/semantics.md independently of kiln's code: integers
are computed as Python integers (exact at any width) and wrapped to the
result's dtype; u8 with i8 gives i32; sums, products and scans of integers
give i64; an integer matmul accumulates in i32 (i64 if an operand is i64);
x % 0 and fmod(x, 0) are 0 on integers; integer pow truncates 1/a^-b for a
negative exponent; round is half to even; sign(NaN) is NaN.
"""
import math

import numpy as np

F32, F64, I32, I64, BOOL, U8, I8 = "f32", "f64", "i32", "i64", "bool", "u8", "i8"
INTS = (U8, I8, I32, I64)
BITS = {U8: 8, I8: 8, I32: 32, I64: 64}
RANGE = {U8: (0, 255), I8: (-128, 127), I32: (-2 ** 31, 2 ** 31 - 1), I64: (-2 ** 63, 2 ** 63 - 1)}
# the scalars of `_s`/`_c` forms: the C API takes a double, which holds every i64 only to 2^53
SCALAR_RANGE = dict(RANGE, **{I64: (-2 ** 62, 2 ** 62)})
NPT = {U8: np.uint8, I8: np.int8, I32: np.int32, I64: np.int64, BOOL: np.bool_}
INT_ORDER = [BOOL, U8, I8, I32, I64]
DTYPES = (F32, F64, I32, I64, BOOL, "bf16", "f16", U8, I8)  # kiln_dtype's order: a cast's attribute

ARITH = ("add", "sub", "mul", "maximum", "minimum", "remainder", "fmod", "pow")
CMP = ("eq", "ne", "lt", "le", "gt", "ge")
LOGIC = ("logical_and", "logical_or")
ROUNDING = ("floor", "ceil", "round", "trunc")
TESTS = ("isnan", "isinf", "isfinite")


def is_int(dt):
    return dt in INTS or dt == BOOL


# ───────────────────────── the oracle ─────────────────────────

def wrap1(v, dt):
    """the Python integer v as dt's arithmetic leaves it (modulo 2^bits)"""
    if dt == BOOL:
        return bool(v)
    m = 1 << BITS[dt]
    v %= m
    if dt != U8 and v >= m >> 1:
        v -= m
    return v


def wrap(a, dt):
    a = np.asarray(a, dtype=object)
    out = np.empty(a.shape, dtype=NPT[dt])
    for pos in np.ndindex(a.shape):
        out[pos] = wrap1(int(a[pos]), dt)
    return out


def exact(a):
    """an integer or bool array as Python integers"""
    a = np.asarray(a)
    out = np.empty(a.shape, dtype=object)
    for pos in np.ndindex(a.shape):
        out[pos] = int(a[pos])
    return out


def ipromote(a, b, nd_a=1, nd_b=1):
    """kiln's promotion of two integer or bool dtypes (u8 with i8 gives i32; a
    0-d operand does not widen a tensor of its own category)"""
    if a == b:
        return a
    if (nd_a == 0) != (nd_b == 0) and BOOL not in (a, b):
        return b if nd_a == 0 else a
    if {a, b} == {U8, I8}:
        return I32
    return max(a, b, key=INT_ORDER.index)


def _rem(x, y):
    return 0 if y == 0 else x % y


def _fmod(x, y):
    if y == 0:
        return 0
    r = abs(x) % abs(y)
    return -r if x < 0 else r


def _pow(dt):
    def f(x, y):
        if y < 0:
            return 1 if x == 1 else ((-1 if y & 1 else 1) if x == -1 else 0)
        return pow(x, y, 1 << BITS[dt])
    return f


def int_binary(name, a, b, dt):
    a, b = exact(a), exact(b)
    if name == "add":
        return a + b
    if name == "sub":
        return a - b
    if name == "mul":
        return a * b
    if name in ("maximum", "minimum"):
        return np.frompyfunc(max if name == "maximum" else min, 2, 1)(a, b)
    f = {"remainder": _rem, "fmod": _fmod, "pow": _pow(dt)}[name]
    return np.frompyfunc(f, 2, 1)(a, b)


def compare(name, a, b):
    f = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
         "gt": np.greater, "ge": np.greater_equal}[name]
    return np.asarray(f(a, b), dtype=bool)


def float_binary(name, a, b):
    """remainder / fmod of floats, exactly (math.fmod is exact), then the
    divisor's sign for remainder; x % 0 is NaN; an infinite dividend NaN"""
    def rem(x, y, python):
        if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0:
            return math.nan
        r = math.fmod(x, y)
        if python and r != 0 and (r < 0) != (y < 0):
            r += y
        if python and r == 0:
            r = math.copysign(0.0, y)
        return r
    out = np.frompyfunc(lambda x, y: rem(float(x), float(y), name == "remainder"), 2, 1)(a, b)
    return np.asarray(out, dtype=np.float64)


def _sign(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isnan(x), x, np.sign(x))


def scalar_tensor(v, dt):
    """a `_s`/`_c` scalar as a 0-d operand of the tensor's dtype"""
    return np.asarray(int(v), dtype=object) if is_int(dt) else np.asarray(float(v))


def apply(name, ins, attrs, dts):
    """(value, dtype) of the exact ops, or None for an op the general oracle
    (difftest.apply_op) computes. Integer values come back as Python
    integers or arrays of the dtype; floats as float64."""
    base, form = name, None
    if name.endswith(("_s", "_c")) and name[:-2] in ARITH + CMP + LOGIC:
        base, form = name[:-2], name[-1]
    ints = all(is_int(d) for d in dts)
    if form:
        x, dt = ins[0], dts[0]
        if base in ("add", "mul") and not ints:
            return None  # the general oracle's add_c / mul_c
        s = scalar_tensor(attrs[0], dt)
        if base in LOGIC:
            return (np.logical_and if base == "logical_and" else np.logical_or)(x != 0, s != 0), BOOL
        if base in CMP:
            return compare(base, exact(x) if ints else x.astype(np.float64), s), BOOL
        if ints:
            return wrap(int_binary(base, x, s, dt), dt), dt
        if base in ("remainder", "fmod"):
            return float_binary(base, x.astype(np.float64), s), dt
        return None
    if name in CMP:
        if ints:
            return compare(name, exact(ins[0]), exact(ins[1])), BOOL
        return compare(name, ins[0].astype(np.float64), ins[1].astype(np.float64)), BOOL
    if name in LOGIC:
        f = np.logical_and if name == "logical_and" else np.logical_or
        return f(np.asarray(ins[0]) != 0, np.asarray(ins[1]) != 0), BOOL
    if name == "logical_not":
        return np.asarray(ins[0]) == 0, BOOL
    if name in TESTS:
        x = np.asarray(ins[0], dtype=np.float64) if not ints else np.zeros(np.shape(ins[0]))
        return {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}[name](x), BOOL
    if name in ROUNDING:
        if ints:
            return ins[0], dts[0]
        f = {"floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc}[name]
        return f(ins[0].astype(np.float64)), dts[0]
    if name == "sign":
        if ints:
            return wrap(np.frompyfunc(lambda v: (v > 0) - (v < 0), 1, 1)(exact(ins[0])), dts[0]), dts[0]
        return _sign(ins[0]), dts[0]
    if name in ("remainder", "fmod") and not ints:
        return float_binary(name, ins[0].astype(np.float64), ins[1].astype(np.float64)), promote_float(dts)
    if not ints or not dts:
        return None
    return int_op(name, ins, attrs, dts)


def promote_float(dts):
    return F64 if F64 in dts else F32


def int_op(name, ins, attrs, dts):
    """the ops on integer and bool operands whose general oracle goes through float64"""
    x, dt = ins[0], dts[0]
    if name in ARITH:
        odt = ipromote(dts[0], dts[1], np.ndim(ins[0]), np.ndim(ins[1]))
        return wrap(int_binary(name, ins[0], ins[1], odt), odt), odt
    if name in ("neg", "abs"):
        v = exact(x)
        return wrap(-v if name == "neg" else np.frompyfunc(abs, 1, 1)(v), dt), dt
    if name == "where":
        odt = ipromote(dts[1], dts[2], np.ndim(ins[1]), np.ndim(ins[2]))
        return wrap(np.where(np.asarray(x) != 0, exact(ins[1]), exact(ins[2])), odt), odt
    if name == "cast":
        to = DTYPES[int(attrs[0])]
        if to == BOOL:
            return np.asarray(x) != 0, BOOL
        if to in INTS:
            return wrap(exact(x), to), to
        return None
    if name in ("sum", "prod", "max", "min"):
        keep, n = int(attrs[0]), int(attrs[1])
        axes = tuple(int(a) % max(np.ndim(x), 1) for a in attrs[2:2 + n]) if n else None
        v = exact(x)
        if name == "sum":
            return wrap(np.sum(v, axis=axes, keepdims=bool(keep)), I64), I64
        if name == "prod":
            return wrap(np.prod(v, axis=axes, keepdims=bool(keep)), I64), I64
        f = np.max if name == "max" else np.min
        return wrap(f(v, axis=axes, keepdims=bool(keep)), dt), dt
    if name in ("cumsum", "cumprod"):
        f = np.cumsum if name == "cumsum" else np.cumprod
        return wrap(f(exact(x), axis=int(attrs[0])), I64), I64
    if name in ("argmax", "argmin"):
        ax, keep = int(attrs[0]), int(attrs[1])
        f = np.argmax if name == "argmax" else np.argmin  # the first extreme, as PyTorch's
        i = f(np.asarray(x).astype(np.int64) if dt != I64 else x, axis=ax)
        return (np.expand_dims(i, ax) if keep else i).astype(np.int64), I64
    if name == "matmul":
        a, b = dts
        odt = I64 if I64 in dts else I32
        if a == BOOL and b == BOOL:
            return None
        return wrap(np.matmul(exact(ins[0]), exact(ins[1])), odt), odt
    if name in ("concat", "stack"):
        odt = dts[0]
        for d in dts[1:]:
            odt = ipromote(odt, d)
        vs = [exact(i) for i in ins]
        ax = int(attrs[0])
        v = np.concatenate(vs, axis=ax) if name == "concat" else np.stack(vs, axis=ax)
        return wrap(v, odt), odt
    if name in ("scatter", "scatter_add", "index_add"):
        out, ax, idx, src = exact(x), int(attrs[0]), np.asarray(ins[1]), exact(ins[2])
        for pos in np.ndindex(idx.shape if name != "index_add" else src.shape):
            t = list(pos)
            t[ax] = idx[pos] if name != "index_add" else idx[pos[ax]]
            t = tuple(t)
            out[t] = src[pos] if name == "scatter" else out[t] + src[pos]
        return wrap(out, dt), dt
    if name == "index_put":
        out, idx, acc = exact(x), np.asarray(ins[1]), int(attrs[0])
        vals = np.broadcast_to(exact(ins[2]), (idx.shape[0],) + out.shape[1:])
        for i in range(idx.shape[0]):
            out[idx[i]] = out[idx[i]] + vals[i] if acc else vals[i]
        return wrap(out, dt), dt
    return None


# ───────────────────────── the generator ─────────────────────────

def int_values(r, dt, n):
    lo, hi = RANGE[dt]
    special = [lo, lo + 1, hi, hi - 1, 0, 1, -1, 2, -2, 3, 7, 16]
    out = []
    for _ in range(n):
        u = r.random()
        v = r.choice(special) if u < 0.3 else r.randint(-8, 8) if u < 0.75 else r.randint(lo, hi)
        out.append(str(wrap1(v, dt)))
    return out


# huge values exact in f32 (2^100, -3 * 2^68): the oracle reads an f32 input's text as a double
FLOAT_SPECIAL = ["nan", "inf", "-inf", "-0.0", "0.5", "-0.5", "1.5", "2.5", "-2.5", "1.2676506002282294e+30",
                 "-8.854437155380585e+20", "16777216.0", "3.0", "-7.0"]


def float_values(r, n):
    """quarters in [-8, 8] and IEEE specials: every rounding op and remainder of them is exact"""
    return [r.choice(FLOAT_SPECIAL) if r.random() < 0.3 else "%.2f" % (r.randint(-32, 32) / 4.0) for _ in range(n)]


def fresh(g, dt, shape, values=None):
    t = g.new_id()
    n = int(np.prod(shape)) if shape else 1
    vals = values if values is not None else int_values(g.r, dt, n) if dt in INTS else float_values(g.r, n)
    g.emit("in", t, dt, len(shape), *shape, "|", *vals)
    g.info[t] = (dt, list(shape))
    g.live.add(t)
    g.deps[t] = set()
    return t


def idx_values(r, n, dim):
    return [str(r.randint(0, dim - 1)) for _ in range(n)]


def int_island(g, s):
    """a chain of 2..6 integer ops on fresh integer inputs of shape s; every
    value read exactly; the last one returned (it stays live: only reads and
    other islands use integer tensors)"""
    r = g.r
    cur = fresh(g, r.choice(INTS), s)
    for _ in range(r.randint(2, 6)):
        dt, sh = g.info[cur]
        if not sh:
            break
        k = r.random()
        if k < 0.3:
            cur = int_arith(g, cur)
        elif k < 0.42:
            name = r.choice(ARITH) + r.choice(["_s", "_c"])
            lo, hi = SCALAR_RANGE[dt] if dt != BOOL else (0, 1)
            v = r.choice([r.randint(-5, 5), lo, hi, 2, -1, 0]) if "pow" not in name else r.randint(0, 9)
            v = min(max(v, lo), hi)
            if dt == BOOL:
                cur = g.op("cast", [cur], [DTYPES.index(U8)], U8, sh)
                dt = U8
                v = min(max(v, 0), 255)
            cur = g.op(name, [cur], [v], dt, sh)
        elif k < 0.5:
            name = r.choice(["neg", "abs", "sign", "floor", "round"])
            if dt == BOOL:
                cur = g.op("cast", [cur], [DTYPES.index(I8)], I8, sh)
                dt = I8
            cur = g.op(name, [cur], [], dt, sh)
        elif k < 0.62:
            cur = int_logic(g, cur)
        elif k < 0.7:
            to = r.choice(INTS + (BOOL,))
            cur = g.op("cast", [cur], [DTYPES.index(to)], to, sh)
        elif k < 0.8:
            cur = int_reduce(g, cur)
        elif k < 0.88:
            cur = int_matmul(g, cur)
        else:
            cur = int_index(g, cur)
        if r.random() < 0.3:
            g.read(cur)
    g.read(cur)
    return cur


def other_shape(r, sh):
    mode = r.randint(0, 2)
    if mode == 1:
        return [d if r.random() < 0.5 else 1 for d in sh]
    if mode == 2 and len(sh) > 1:
        return sh[r.randint(1, len(sh) - 1):]
    return list(sh)


def int_arith(g, cur):
    r = g.r
    dt, sh = g.info[cur]
    ys = other_shape(r, sh)
    ydt = r.choice(INTS)
    y = fresh(g, ydt, ys)
    name = r.choice(ARITH)
    if name == "pow" and r.random() < 0.7:  # mostly small exponents, whose results are not all 0 / 1 / wrapped
        y = g.op("remainder_c", [y], [5], ydt, ys)
    a, b = (cur, y) if r.random() < 0.6 else (y, cur)
    odt = ipromote(g.info[a][0], g.info[b][0])
    return g.op(name, [a, b], [], odt, list(np.broadcast_shapes(tuple(sh), tuple(ys))))


def int_logic(g, cur):
    """comparisons (tensor, _s, _c), logic, where back to integers"""
    r = g.r
    dt, sh = g.info[cur]
    if dt == BOOL:
        c = cur
    elif r.random() < 0.5:
        y = fresh(g, r.choice(INTS), other_shape(r, sh))
        c = g.op(r.choice(CMP), [cur, y], [], BOOL, list(np.broadcast_shapes(tuple(sh), tuple(g.info[y][1]))))
    else:
        lo, hi = SCALAR_RANGE[dt]
        v = min(max(r.choice([0, 1, -1, 3, lo, hi]), lo), hi)
        c = g.op(r.choice(CMP) + r.choice(["_s", "_c"]), [cur], [v], BOOL, sh)
    csh = g.info[c][1]
    q = r.random()
    if q < 0.3:
        d = g.op(r.choice(LOGIC) + r.choice(["_s", "_c"]), [c], [r.randint(0, 1)], BOOL, csh)
        return g.op("logical_not", [d], [], BOOL, csh) if r.random() < 0.5 else d
    if q < 0.5:
        e = fresh(g, r.choice(INTS), csh)
        return g.op(r.choice(LOGIC), [c, e], [], BOOL, csh)
    a, b = fresh(g, r.choice(INTS), csh), fresh(g, r.choice(INTS), csh)
    if dt != BOOL and g.info[cur][1] == csh and r.random() < 0.5:
        a = cur
    return g.op("where", [c, a, b], [], ipromote(g.info[a][0], g.info[b][0]), csh)


def int_reduce(g, cur):
    r = g.r
    dt, sh = g.info[cur]
    name = r.choice(["sum", "prod", "max", "min", "cumsum", "cumprod", "argmax", "argmin"])
    ax = r.randrange(len(sh))
    if name in ("cumsum", "cumprod"):
        return g.op(name, [cur], [ax], I64, sh)
    keep = r.randint(0, 1) if len(sh) > 1 else 1
    if name in ("argmax", "argmin"):
        if dt == BOOL:
            return cur
        return g.op(name, [cur], [ax, keep], I64, sh[:ax] + [1] + sh[ax + 1:] if keep else sh[:ax] + sh[ax + 1:])
    if name in ("max", "min") and dt == BOOL:
        return cur
    axes = [ax] if r.random() < 0.7 else list(range(len(sh)))
    out = [1 if i in axes else d for i, d in enumerate(sh)] if keep else [d for i, d in enumerate(sh) if i not in axes]
    odt = I64 if name in ("sum", "prod") else dt
    return g.op(name, [cur], [keep, len(axes)] + axes, odt, out)


def int_matmul(g, cur):
    r = g.r
    dt, sh = g.info[cur]
    if len(sh) < 2:
        cur = g.op("reshape", [cur], [2, 1, sh[0]], dt, [1, sh[0]])
        sh = [1, sh[0]]
    ydt = r.choice(INTS + (BOOL,)) if dt != BOOL else r.choice(INTS)
    n = r.choice([1, 2, 3])
    y = fresh(g, ydt, [sh[-1], n]) if ydt != BOOL else g.op("gt_c", [fresh(g, I8, [sh[-1], n])], [0], BOOL, [sh[-1], n])
    odt = I64 if I64 in (dt, ydt) else I32
    return g.op("matmul", [cur, y], [], odt, sh[:-1] + [n])


def int_index(g, cur):
    """scatter (the last duplicate wins), scatter_add / index_add / index_put (duplicates wrap as they add),
    sort and topk (ties in order), gather"""
    r = g.r
    dt, sh = g.info[cur]
    ax = r.randrange(len(sh))
    k = r.randint(0, 5)
    if dt == BOOL:
        cur = g.op("cast", [cur], [DTYPES.index(I32)], I32, sh)
        dt = I32
    if k <= 1:
        gs = [r.randint(1, d) for d in sh]
        gs[ax] = r.randint(1, 4)
        idx = fresh(g, r.choice([I32, I64]), gs, idx_values(r, int(np.prod(gs)), sh[ax]))
        return g.op("scatter" if k == 0 else "scatter_add", [cur, idx, fresh(g, dt, gs)], [ax], dt, sh)
    if k == 2:
        m = r.randint(1, 4)
        idx = fresh(g, I64, [m], idx_values(r, m, sh[ax]))
        ss = list(sh)
        ss[ax] = m
        return g.op("index_add", [cur, idx, fresh(g, dt, ss)], [ax], dt, sh)
    if k == 3:
        m = r.randint(1, 4)
        idx = fresh(g, I64, [m], idx_values(r, m, sh[0]))
        vs = [m] + sh[1:] if r.random() < 0.6 else sh[1:]
        return g.op("index_put", [cur, idx, fresh(g, dt, vs)], [r.randint(0, 1)], dt, sh)
    if k == 4:
        which = r.randint(0, 1)
        if r.random() < 0.5:
            return g.op("sort", [cur], [ax, r.randint(0, 1), which], I64 if which else dt, sh)
        kk = r.randint(1, sh[ax])
        return g.op("topk", [cur], [kk, ax, r.randint(0, 1), which], I64 if which else dt, sh[:ax] + [kk] + sh[ax + 1:])
    gs = list(sh)
    gs[ax] = r.randint(1, 3)
    idx = fresh(g, r.choice([I32, I64]), gs, idx_values(r, int(np.prod(gs)), sh[ax]))
    return g.op("gather", [cur, idx], [ax], dt, gs)


def float_island(g, s):
    """rounding, remainders, tests of values, comparisons and logic on float
    inputs with specials; the island's float values, its inputs included,
    leave the live set after their reads (NaN and infinities would spoil later
    finite differences and casts to integers); the last bool is returned"""
    r = g.r
    first = g.n + 1  # the ids this island makes: t<first>...
    dt = r.choice([F32, F64])
    x = fresh(g, dt, s)
    made = [x]
    for _ in range(r.randint(1, 4)):
        k = r.random()
        if k < 0.4:
            x = g.op(r.choice(ROUNDING + ("sign", "abs", "neg")), [x], [], dt, s)
        elif k < 0.65:
            name = r.choice(["remainder", "fmod"])
            if r.random() < 0.5:
                v = r.choice(["0.75", "-1.5", "2.0", "-0.25", "3.0", "0.0", "inf"])
                x = g.op(name + r.choice(["_s", "_c"]), [x], [v], dt, s)
            else:
                y = fresh(g, dt, s, [r.choice(["0.75", "-1.5", "2.0", "-0.25", "3.0", "0.0"]) for _ in
                                     range(int(np.prod(s)))])
                x = g.op(name, [x, y], [], dt, s)
        else:
            y = fresh(g, dt, s)
            x = g.op(r.choice(["maximum", "minimum", "add", "mul"]), [x, y], [], dt, s)
        made.append(x)
        if r.random() < 0.4:
            g.read(x)
    g.read(x)
    k = r.random()
    if k < 0.4:
        c = g.op(r.choice(TESTS), [x], [], BOOL, s)
    elif k < 0.7:
        c = g.op(r.choice(CMP), [x, fresh(g, dt, s)], [], BOOL, s)
    else:
        c = g.op(r.choice(CMP) + r.choice(["_s", "_c"]), [x], [r.choice(["0.5", "-2.0", "inf", "nan"])], BOOL, s)
    if r.random() < 0.5:
        c = g.op(r.choice(LOGIC), [c, g.op(r.choice(TESTS), [made[0]], [], BOOL, s)], [], BOOL, s)
    g.read(c)
    for t in list(g.live):  # every float of the island (its fresh operands too) leaves the program
        if int(t[1:]) >= first and g.info[t][0] in (F32, F64):
            g.live.discard(t)
    return c
