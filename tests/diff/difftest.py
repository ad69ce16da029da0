#!/usr/bin/python3
"""Differential test of kiln against NumPy: random programs that mix ops,
views, matmul, indexing, casts, autograd and the state API (params, keep,
assign, release, value reads in the middle of a step, several steps) run on
kiln's `cpu` and `ref` backends through the public C API (diff_run) and are
compared with what this script computes with NumPy.

The oracle evaluates eagerly: kiln's contract is that lazy execution means
exactly what eager execution means (a read mid-step never changes anything
traced before it; kiln_assign replaces the value of a kept tensor). Gradients
are checked against central finite differences in double precision of the
same NumPy program.

Usage:
  difftest.py --run PATH/diff_run [--programs N] [--seed S] [--backends cpu,ref]
              [--keep-going] [--show N]
A failure prints the seed, the statement, what kiln and NumPy gave, and a
minimised program (statements dropped while it still fails). The program
language and how to add an op: docs/testing.md, "Differential test".
"""
import argparse
import math
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

import exact_island

F32, F64, I32, I64, BOOL = "f32", "f64", "i32", "i64", "bool"
BF16, F16 = "bf16", "f16"  # only inside 16-bit islands (Gen.half_island); never read
U8, I8 = "u8", "i8"  # only inside exact islands (exact_island.py)
HALVES = (BF16, F16)
NP = {F32: np.float32, F64: np.float64, I32: np.int32, I64: np.int64, BOOL: np.bool_, U8: np.uint8, I8: np.int8}
RANK_ORDER = [BOOL, U8, I8, I32, I64, BF16, F16, F32, F64]  # kiln's promotion order (u8 with i8 only in islands)
DTYPE_CODE = {F32: 0, F64: 1, I32: 2, I64: 3, BOOL: 4, BF16: 5, F16: 6, U8: 7, I8: 8}


def round16(v, dt):
    """f64 values rounded to f32, then to nearest even in bf16 or f16 (kiln's
    rule), as f64. bf16 by its bits (the top half of an f32), f16 by NumPy."""
    x = np.asarray(v, dtype=np.float64).astype(np.float32)
    if dt == F16:
        return x.astype(np.float16).astype(np.float64)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def promote(a, b):
    return RANK_ORDER[max(RANK_ORDER.index(a), RANK_ORDER.index(b))]


def is_float(dt):
    return dt in (F32, F64)


class Invalid(Exception):
    """The program uses a released tensor: not a program of the language."""


# ───────────────────────── the oracle: ops ─────────────────────────

def gelu(x):
    from math import erf
    v = np.vectorize(lambda t: 0.5 * t * (1.0 + erf(t / math.sqrt(2.0))))
    return v(x.astype(np.float64)) if x.size else x.astype(np.float64)


UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "gelu": gelu,
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "sin": np.sin,
    "cos": np.cos,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
}
BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "pow": np.power,
}
COMPARE = {"gt": np.greater, "lt": np.less}


def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def apply_op(name, ins, attrs, dts):
    """NumPy value and kiln dtype of op `name` on values ins (dtypes dts)."""
    exact = exact_island.apply(name, ins, attrs, dts)  # integers (wrapping), comparisons, logic, rounding
    if exact is not None:
        return exact
    x = ins[0] if ins else None
    if name in UNARY:
        return UNARY[name](x.astype(np.float64)), dts[0]
    if name in BINARY:
        dt = promote(dts[0], dts[1])
        cat = lambda d: 0 if d == BOOL else 2 if is_float(d) else 1  # PyTorch: a 0-d operand does not
        if ins[0].ndim == 0 and ins[1].ndim > 0 and cat(dts[0]) == cat(dts[1]):  # widen its own category
            dt = dts[1]
        if ins[1].ndim == 0 and ins[0].ndim > 0 and cat(dts[0]) == cat(dts[1]):
            dt = dts[0]
        if name == "div" and not is_float(dt):
            dt = F32  # integer / is true division (docs/semantics.md)
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 in the float islands: NaN, as kiln's
            return BINARY[name](ins[0].astype(np.float64), ins[1].astype(np.float64)), dt
    if name in COMPARE:
        return COMPARE[name](ins[0].astype(np.float64), ins[1].astype(np.float64)), BOOL
    if name in ("add_c", "add_s"):
        return x.astype(np.float64) + attrs[0], dts[0]
    if name in ("mul_c", "mul_s"):
        return x.astype(np.float64) * attrs[0], dts[0]
    if name == "where":
        dt = promote(dts[1], dts[2])
        return np.where(ins[0].astype(bool), ins[1].astype(np.float64), ins[2].astype(np.float64)), dt
    if name == "cast":
        dt = [F32, F64, I32, I64, BOOL, BF16, F16][int(attrs[0])]
        if dt == BOOL:
            return x != 0, dt
        if dt in (I32, I64):
            return np.trunc(x.astype(np.float64)), dt
        return x.astype(np.float64), dt
    if name in ("sum", "mean", "max", "min"):
        keep, n = int(attrs[0]), int(attrs[1])
        axes = tuple(int(a) for a in attrs[2:2 + n]) if n else None
        f = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[name]
        dt = I64 if name == "sum" and dts[0] in (BOOL, I32) else dts[0]  # int sums widen, as PyTorch's
        return f(x.astype(np.float64), axis=axes, keepdims=bool(keep)), dt
    if name == "prod":
        keep, n = int(attrs[0]), int(attrs[1])
        axes = tuple(int(a) for a in attrs[2:2 + n]) if n else None
        dt = I64 if dts[0] in (BOOL, I32) else dts[0]  # as torch.prod
        return np.prod(x.astype(np.float64), axis=axes, keepdims=bool(keep)), dt
    if name in ("cumsum", "cumprod"):
        dt = I64 if dts[0] in (BOOL, I32) else dts[0]  # as torch.cumsum
        return (np.cumsum if name == "cumsum" else np.cumprod)(x.astype(np.float64), axis=int(attrs[0])), dt
    if name in ("softmax", "log_softmax"):
        s = softmax(x.astype(np.float64), int(attrs[0]))
        return (s if name == "softmax" else np.log(s)), dts[0]
    if name == "reshape":
        return x.reshape([int(a) for a in attrs[1:1 + int(attrs[0])]]), dts[0]
    if name == "permute":
        return np.transpose(x, [int(a) for a in attrs]), dts[0]
    if name == "expand":
        return np.broadcast_to(x, [int(a) for a in attrs[1:1 + int(attrs[0])]]).copy(), dts[0]
    if name == "slice":
        ax, start, stop, step = (int(a) for a in attrs)
        idx = [slice(None)] * x.ndim
        idx[ax] = slice(start, stop, step)
        return x[tuple(idx)], dts[0]
    if name == "pad":
        value, r = attrs[0], x.ndim
        lo, hi = [int(a) for a in attrs[1:1 + r]], [int(a) for a in attrs[1 + r:1 + 2 * r]]
        return np.pad(x.astype(np.float64), list(zip(lo, hi)), constant_values=value), dts[0]
    if name == "clamp":
        return np.clip(x.astype(np.float64), attrs[0], attrs[1]), dts[0]
    if name == "flip":
        return np.flip(x, [int(a) for a in attrs[1:1 + int(attrs[0])]]).copy(), dts[0]
    if name == "roll":
        return np.roll(x, int(attrs[0]), int(attrs[1])), dts[0]
    if name in ("tril", "triu"):
        return (np.tril if name == "tril" else np.triu)(x, int(attrs[0])), dts[0]
    if name == "stack":
        return np.stack([i.astype(np.float64) for i in ins], axis=int(attrs[0])), promote(dts[0], dts[1])
    if name == "pad_with":
        mode, r = int(attrs[0]), x.ndim
        lo, hi = [int(a) for a in attrs[1:1 + r]], [int(a) for a in attrs[1 + r:1 + 2 * r]]
        return np.pad(x, list(zip(lo, hi)), mode="reflect" if mode == 1 else "edge"), dts[0]
    if name == "concat":
        return np.concatenate([i.astype(np.float64) for i in ins], axis=int(attrs[0])), promote(dts[0], dts[1])
    if name == "matmul":
        return np.matmul(ins[0].astype(np.float64), ins[1].astype(np.float64)), promote(dts[0], dts[1])
    if name == "index_select":
        return np.take(x, ins[1], axis=int(attrs[0])), dts[0]
    if name == "gather":
        return np.take_along_axis(x, ins[1], axis=int(attrs[0])), dts[0]
    if name in ("sort", "topk"):  # attrs: sort ax desc which | topk k ax largest which (which 1: indices)
        k, a = (None, attrs) if name == "sort" else (int(attrs[0]), attrs[1:])
        ax, desc, which = (int(v) for v in a)
        i = sort_positions(x, ax, desc)
        if k is not None:
            i = np.take(i, np.arange(k), axis=ax)
        return (i, I64) if which else (np.take_along_axis(x, i, ax), dts[0])
    if name == "scatter_add":
        out, ax = x.astype(np.float64 if is_float(dts[0]) else np.int64), int(attrs[0])
        for pos in np.ndindex(ins[1].shape):
            t = list(pos)
            t[ax] = ins[1][pos]
            out[tuple(t)] += ins[2][pos]
        return out, dts[0]
    raise ValueError("unknown op " + name)


def sort_positions(x, ax, desc):
    """torch.sort(stable=True) positions along ax (no NaN in programs): ascending by NumPy's stable
    argsort, descending by Python's stable sorted(reverse=True)"""
    if not desc:
        return np.argsort(x, axis=ax, kind="stable")
    xm = np.moveaxis(x, ax, -1)
    out = np.empty(xm.shape, dtype=np.int64)
    for pos in np.ndindex(xm.shape[:-1]):
        row = xm[pos].tolist()
        out[pos] = sorted(range(len(row)), key=lambda j: row[j], reverse=True)
    return np.moveaxis(out, -1, ax)


def to_dtype(v, dt):
    v = np.asarray(v)
    if dt in HALVES:
        return round16(v, dt)
    if dt == BOOL:
        return v.astype(bool)
    if dt in (I32, I64):
        return np.asarray(v, dtype=np.float64).astype(NP[dt]) if v.dtype.kind == "f" else v.astype(NP[dt])
    with np.errstate(over="ignore"):  # a value past f32's range is inf there, as kiln's
        return v.astype(NP[dt])


# ───────────────────────── the oracle: programs ─────────────────────────

class Node:
    """A value: a leaf (array) or an op on other values. Kept for finite
    differences: the loss is re-evaluated with a parameter perturbed."""
    __slots__ = ("op", "ins", "attrs", "dt", "val", "leaf_of")

    def __init__(self, op, ins, attrs, dt, val, leaf_of=None):
        self.op, self.ins, self.attrs, self.dt, self.val, self.leaf_of = op, ins, attrs, dt, val, leaf_of


def evaluate(node, over, memo):
    """node's value (float64 for floats) with leaf values replaced by over."""
    k = id(node)
    if k in memo:
        return memo[k]
    if k in over:
        v = over[k]
    elif node.op is None:
        v = node.val
    else:
        ins = [evaluate(i, over, memo) for i in node.ins]
        v, _ = apply_op(node.op, ins, node.attrs, [i.dt for i in node.ins])
        if not is_float(node.dt):
            v = to_dtype(v, node.dt)
    memo[k] = v
    return v


def parse(text):
    prog = []
    for line in text.strip().split("\n"):
        toks = line.split()
        if toks:
            prog.append(toks)
    return prog


def num(t):
    return float(t) if any(c in t for c in ".eEn") else int(t)


def run_oracle(prog):
    """Expected outputs: {statement index: ("v", dtype, shape, values)}."""
    var = {}      # id -> current Node (a handle's value; assign replaces it)
    kept = set()
    live = set()
    params = {}   # id -> True for requires-grad tensors
    grad_of = {}  # grad tensor id -> param id
    acc = {}      # param id -> accumulated gradient (float64 array)
    step_start = {}  # param id -> its Node at the start of the step (what backward differentiates)
    out = {}

    def get(i):
        if i not in live:
            raise Invalid("tensor %s used after release" % i)
        if i in grad_of:
            p = grad_of[i]
            return Node(None, [], [], F32, acc[p])
        return var[i]

    for si, st in enumerate(prog):
        kind = st[0]
        if kind == "in":
            tid, dt, r = st[1], st[2], int(st[3])
            shape = [int(a) for a in st[4:4 + r]]
            vals = [num(a) for a in st[5 + r:]]
            arr = np.array(vals, dtype=np.float64 if is_float(dt) else NP[dt]).reshape(shape)
            var[tid] = Node(None, [], [], dt, arr)
            live.add(tid)
        elif kind == "op":
            tid, name, nin = st[1], st[2], int(st[3])
            ins = [get(a) for a in st[4:4 + nin]]
            attrs = [num(a) for a in st[5 + nin:]]
            memo = {}
            v, dt = apply_op(name, [evaluate(i, {}, memo) for i in ins], attrs, [i.dt for i in ins])
            v = to_dtype(v, dt)
            if is_float(dt):
                v = v.astype(np.float64)
            var[tid] = Node(name, ins, attrs, dt, v)
            live.add(tid)
        elif kind == "keep":
            get(st[1])
            kept.add(st[1])
        elif kind == "release":
            get(st[1])
            kept.discard(st[1])
            live.discard(st[1])
            if st[1] in params:
                del params[st[1]]
                acc.pop(st[1], None)
                for g in [g for g, p in grad_of.items() if p == st[1]]:
                    del grad_of[g]
                    live.discard(g)
        elif kind == "assign":
            src = get(st[2])
            get(st[1])
            # the kept tensor now is src: its value, and (this step) its tape
            var[st[1]] = src
        elif kind in ("read", "item"):
            n = get(st[1])
            v = to_dtype(evaluate(n, {}, {}), n.dt)
            out[si] = (n.dt, list(v.shape), v.reshape(-1))
        elif kind == "step":
            for i in list(live):
                if i not in kept and i not in grad_of:
                    live.discard(i)
            # every kept value is now computed: a leaf
            for i in kept:
                if i in var:
                    var[i] = Node(None, [], [], var[i].dt, evaluate(var[i], {}, {}))
            step_start.clear()
        elif kind == "reqgrad":
            params[st[1]] = True
        elif kind == "backward":
            loss = get(st[1])
            if not any(reaches(loss, var[p]) for p in params):
                raise Invalid("backward of a loss that no requires-grad tensor reaches (kiln: an error)")
            for p in params:
                leaf = var[p]
                base = evaluate(loss, {}, {})
                g = np.zeros(leaf.val.shape, dtype=np.float64)
                if reaches(loss, leaf):
                    flat = leaf.val.astype(np.float64).reshape(-1).copy()
                    for k in range(flat.size):
                        # small: a min/max/relu input within h of a tie or of the kink gives a
                        # blended quotient (FD is in float64, so rounding costs ~1e-9 here)
                        h = 1e-7 * max(1.0, abs(flat[k]))
                        up, dn = flat.copy(), flat.copy()
                        up[k] += h
                        dn[k] -= h
                        fu = evaluate(loss, {id(leaf): up.reshape(leaf.val.shape)}, {})
                        fd = evaluate(loss, {id(leaf): dn.reshape(leaf.val.shape)}, {})
                        g.reshape(-1)[k] = (float(np.sum(fu)) - float(np.sum(fd))) / (2 * h)
                    # the difference quotient's rounding (~1e-12) would turn an exact 1 into
                    # 0.999999999999, which a later cast to an integer truncates to 0
                    acc[p] = acc.get(p, 0) + np.round(g, 8)
                del base
        elif kind == "grad":
            if st[2] not in acc:
                raise Invalid("no gradient for %s" % st[2])
            grad_of[st[1]] = st[2]
            live.add(st[1])
        elif kind == "zerograd":
            acc.pop(st[1], None)
            for g in [g for g, p in grad_of.items() if p == st[1]]:
                del grad_of[g]
                live.discard(g)
        else:
            raise ValueError("unknown statement " + kind)
    return out


def reaches(node, target, seen=None):
    """target is reached from node through differentiable float paths."""
    if seen is None:
        seen = set()
    if node is target:
        return True
    if id(node) in seen or node.op is None or not is_float(node.dt) or node.op in COMPARE:
        return False
    seen.add(id(node))
    ins = node.ins
    if node.op == "where":
        ins = ins[1:]
    if node.op in ("index_select", "gather", "sort", "topk"):
        ins = ins[:1]
    if node.op == "scatter_add":
        ins = [ins[0], ins[2]]
    if node.op == "cast" and not is_float(node.ins[0].dt):
        return False
    return any(reaches(i, target, seen) for i in ins)


# ───────────────────────── the generator ─────────────────────────

class Gen:
    """Random programs. Shapes come from a small set so that compiled graphs
    repeat across programs (the cpu backend's compile time dominates)."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.lines = []
        self.n = 0
        self.info = {}      # id -> (dtype, shape)
        self.live = set()
        self.kept = set()
        self.params = []    # requires-grad params (f32, kept)
        self.assigned_params = set()  # assigned this step (no backward after)
        self.has_grad = set()
        self.grad_ids = {}  # param -> grad tensor ids
        self.deps = {}      # id -> set of params reached through differentiable float ops this step

    def new_id(self):
        self.n += 1
        return "t%d" % self.n

    def emit(self, *toks):
        self.lines.append(" ".join(str(t) for t in toks))

    def values(self, dt, count, lo=-2.0, hi=2.0, ilo=0, ihi=4):
        r = self.r
        if dt == F32:
            return ["%.9g" % float(np.float32(r.uniform(lo, hi))) for _ in range(count)]
        if dt == F64:
            return ["%.17g" % r.uniform(lo, hi) for _ in range(count)]
        if dt == BOOL:
            return [str(r.randint(0, 1)) for _ in range(count)]
        return [str(r.randint(ilo, ihi)) for _ in range(count)]

    def inp(self, dt, shape, **kw):
        t = self.new_id()
        count = int(np.prod(shape)) if shape else 1
        self.emit("in", t, dt, len(shape), *shape, "|", *self.values(dt, count, **kw))
        self.info[t] = (dt, list(shape))
        self.live.add(t)
        self.deps[t] = set()
        return t

    def op(self, name, ins, attrs, dt, shape, deps=None):
        t = self.new_id()
        self.emit("op", t, name, len(ins), *ins, "|", *attrs)
        self.info[t] = (dt, list(shape))
        self.live.add(t)
        if deps is None:
            deps = set()
            if is_float(dt):
                for i in ins:
                    if is_float(self.info[i][0]):
                        deps |= self.deps.get(i, set())
        self.deps[t] = deps
        return t

    def shape(self):
        r = self.r
        return [r.choice([1, 2, 3, 4]) for _ in range(r.randint(1, 3))]

    def pick(self, pred=lambda t: True):
        c = sorted(t for t in self.live if pred(t))
        return self.r.choice(c) if c else None

    def floats(self):
        # not gradients: finite differences are exact only to ~1e-8, and the
        # ops here include discontinuous ones (casts to integers, comparisons)
        return self.pick(lambda t: is_float(self.info[t][0]) and len(self.info[t][1]) >= 1 and not self.is_grad(t)
                         and 0 < np.prod(self.info[t][1]) <= 64)

    # one random op on live tensors; returns the new id
    def random_op(self):
        r = self.r
        x = self.floats()
        if x is None:
            return self.inp(F32, self.shape())
        dt, s = self.info[x]
        k = r.random()
        if k < 0.14:
            # (no floor/round/sign/remainder: a 1-ulp difference upstream can
            # move their result by a whole unit; test_op_table covers them)
            name = r.choice(["neg", "abs", "exp", "tanh", "sigmoid", "relu", "gelu", "erf", "sin", "cos", "expm1",
                             "gelu_tanh"])
            if name in ("exp", "expm1"):
                x = self.op("tanh", [x], [], dt, s)
            return self.op(name, [x], [], dt, s)
        if k < 0.19:  # log / sqrt of a positive value
            y = self.op("add_c", [self.op("abs", [x], [], dt, s)], [0.25], dt, s)
            return self.op(r.choice(["log", "sqrt", "log1p", "rsqrt"]), [y], [], dt, s)
        if k < 0.36:  # broadcasting binary op
            ys = list(s)
            mode = r.randint(0, 2)
            if mode == 1:
                ys = [d if r.random() < 0.5 else 1 for d in ys]
            elif mode == 2 and len(ys) > 1:
                ys = ys[r.randint(1, len(ys) - 1):]
            ydt = r.choice([F32, F32, F32, F64])
            y = self.inp(ydt, ys)
            name = r.choice(["add", "sub", "mul", "div", "maximum", "minimum", "pow"])
            if name == "pow":  # a positive base, an exponent in (-1, 1): smooth in both
                x = self.op("add_c", [self.op("abs", [x], [], dt, s)], [0.5], dt, s)
                y = self.op("tanh", [y], [], ydt, ys)
                out = list(np.broadcast_shapes(tuple(s), tuple(ys)))
                return self.op(name, [x, y], [], promote(dt, ydt), out)
            if name == "div":
                y = self.op("add_c", [self.op("abs", [y], [], ydt, ys)], [0.5], ydt, ys)
            out = list(np.broadcast_shapes(tuple(s), tuple(ys)))
            a, b = (x, y) if name == "div" or r.random() < 0.7 else (y, x)
            return self.op(name, [a, b], [], promote(dt, ydt), out)
        if k < 0.42:
            name = r.choice(["add_c", "mul_c", "add_s", "mul_s"])
            return self.op(name, [x], ["%.9g" % float(np.float32(r.uniform(-1.5, 1.5)))], dt, s)
        if k < 0.47:  # where(x > y, x, z), the condition broadcast or combined by logic half the time
            y = self.inp(dt, s)
            c = self.op("gt", [x, y], [], BOOL, s)
            if r.random() < 0.5:
                cs = [d if r.random() < 0.5 else 1 for d in s]
                c2 = self.op(r.choice(["lt", "gt"]), [self.inp(F32, cs), self.inp(F32, cs)], [], BOOL, cs)
                c = c2 if r.random() < 0.5 else self.op(r.choice(["logical_and", "logical_or"]), [c, c2], [], BOOL, s)
            z = self.inp(F32, s)
            return self.op("where", [c, x, z], [], promote(dt, F32), s)
        if k < 0.52:  # casts, and integer arithmetic
            q = r.random()
            if q < 0.2:
                return self.half_island(s)
            if q < 0.45:
                return exact_island.int_island(self, s)
            if q < 0.6:
                return exact_island.float_island(self, s)
            to = r.choice([F64, I32, I64, F32])
            c = self.op("cast", [x], [DTYPE_CODE[to]], to, s)
            if to in (I32, I64):
                y = self.inp(to, s, ilo=-3, ihi=3)
                c = self.op(r.choice(["add", "mul", "maximum"]), [c, y], [], to, s)
                if r.random() < 0.5:
                    ax = r.randrange(len(s))
                    c = self.op("max", [c], [0, 1, ax], to, self.reduced(s, 0, [ax]))
                c = self.op("cast", [c], [DTYPE_CODE[F32]], F32, self.info[c][1])
            return c
        if k < 0.64 and r.random() < 0.3:
            return self.scan_or_prod(x)
        if k < 0.64:  # reductions
            name = r.choice(["sum", "mean", "max", "min"])
            keep = r.randint(0, 1)
            if r.random() < 0.3:
                axes = []
            else:
                axes = r.sample(range(len(s)), r.randint(1, len(s)))
            return self.op(name, [x], [keep, len(axes)] + axes, dt, self.reduced(s, keep, axes))
        if k < 0.67:
            ax = r.randrange(len(s))
            return self.op(r.choice(["softmax", "log_softmax"]), [x], [ax], dt, s)
        if k < 0.80:
            if r.random() < 0.3:
                return self.view_chain(x)
            return self.view(x)
        if k < 0.87:  # matmul
            if len(s) == 1:
                x = self.op("reshape", [x], [2, 1, s[0]], dt, [1, s[0]])
                s = [1, s[0]]
            kdim, n = s[-1], r.choice([1, 2, 3])
            w = self.inp(F32, [kdim, n])
            a, b = x, w
            if len(s) == 2 and r.random() < 0.3:  # [n?]: w^T @ x^T style
                w2 = self.inp(F32, [n, s[0]])
                return self.op("matmul", [w2, x], [], promote(dt, F32), [n, s[1]])
            if len(s) >= 3 and r.random() < 0.4:  # [m, K] or [K] @ [..., K, N]: a broadcast over x's batch
                m = r.choice([1, 2, 5])
                if r.random() < 0.3:
                    w1 = self.inp(F32, [s[-2]])
                    return self.op("matmul", [w1, x], [], promote(dt, F32), s[:-2] + [s[-1]])
                w2 = self.inp(F32, [m, s[-2]])
                return self.op("matmul", [w2, x], [], promote(dt, F32), s[:-2] + [m, s[-1]])
            return self.op("matmul", [a, b], [], promote(dt, F32), s[:-1] + [n])
        if k < 0.94:  # indexing
            ax = r.randrange(len(s))
            q = r.random()
            if q < 0.4:  # sort/topk, scatter_add (duplicates accumulate); read half the time, as
                if q < 0.25:  # their results are otherwise often dead ends or unread
                    t = self.sorting(x, ax)
                else:
                    gs = [r.randint(1, d) for d in s]
                    gs[ax] = r.randint(1, 4)
                    idx = self.inp(r.choice([I32, I64]), gs, ilo=0, ihi=s[ax] - 1)
                    t = self.op("scatter_add", [x, idx, self.inp(dt, gs)], [ax], dt, s)
                if r.random() < 0.5:
                    self.read(t)
                return t
            if q < 0.7:
                m = r.randint(1, 4)
                idx = self.inp(I64, [m], ilo=0, ihi=s[ax] - 1)
                return self.op("index_select", [x, idx], [ax], dt, s[:ax] + [m] + s[ax + 1:])
            gs = list(s)
            gs[ax] = r.randint(1, 3)
            idx = self.inp(r.choice([I32, I64]), gs, ilo=0, ihi=s[ax] - 1)
            return self.op("gather", [x, idx], [ax], dt, gs)
        # concat
        ax = r.randrange(len(s))
        ys = list(s)
        ys[ax] = r.randint(1, 3)
        y = self.inp(F32, ys)
        out = list(s)
        out[ax] += ys[ax]
        a, b = (x, y) if r.random() < 0.5 else (y, x)
        return self.op("concat", [a, b], [ax], promote(dt, F32), out)

    def sorting(self, x, ax):
        """sort or topk values or indices; of x plus a fresh input, so that floats have no ties (a
        tie's finite difference is the mean of the tied positions' gradients)"""
        r = self.r
        dt, s = self.info[x]
        y = self.op("add", [x, self.inp(dt, s)], [], dt, s)
        which = r.randint(0, 1)
        odt = I64 if which else dt
        if r.random() < 0.5:
            return self.op("sort", [y], [ax, r.randint(0, 1), which], odt, s)
        k = r.randint(1, s[ax])
        return self.op("topk", [y], [k, ax, r.randint(0, 1), which], odt, s[:ax] + [k] + s[ax + 1:])
    def scan_or_prod(self, x):
        """cumsum of x, or prod / cumprod of tanh(x) + 1 (in (0, 2): the
        products stay bounded) over axes of at most 8 elements"""
        r = self.r
        dt, s = self.info[x]
        name = r.choice(["prod", "cumsum", "cumprod"])
        if name != "cumsum":
            x = self.op("add_c", [self.op("tanh", [x], [], dt, s)], [1], dt, s)
        if name != "prod":
            ax = r.randrange(len(s))
            return self.op(name, [x], [ax - len(s) if r.random() < 0.3 else ax], dt, s)
        keep = r.randint(0, 1)
        axes, n = [], 1
        for a in r.sample(range(len(s)), len(s)):
            if n * s[a] <= 8 and (not axes or r.random() < 0.5):
                axes.append(a)
                n *= s[a]
        axes = axes or [0]  # (a view may have made every axis longer than 8)
        return self.op("prod", [x], [keep, len(axes)] + axes, dt, self.reduced(s, keep, axes))

    def half_island(self, s):
        """f32 inputs cast to bf16 or f16, one exact op (+ - * max: the f32
        result of two 16-bit values is the exactly rounded one, so kiln's
        f32-then-16-bit rounding and the oracle's f64-then-f32-then-16-bit
        agree bit for bit), cast back to f32. The 16-bit tensors are
        dropped from the live set: nothing else reads them."""
        r = self.r
        h = r.choice(HALVES)
        a = self.op("cast", [self.inp(F32, s)], [DTYPE_CODE[h]], h, s)
        b = self.op("cast", [self.inp(F32, s)], [DTYPE_CODE[h]], h, s)
        c = self.op(r.choice(["add", "sub", "mul", "maximum"]), [a, b], [], h, s)
        out = self.op("cast", [c], [DTYPE_CODE[F32]], F32, s)
        self.live -= {a, b, c}
        return out

    def reduced(self, s, keep, axes):
        if not axes:
            return [1] * len(s) if keep else []
        return [1 if i in axes else d for i, d in enumerate(s)] if keep else [d for i, d in enumerate(s) if i not in axes]

    def view(self, x):
        r = self.r
        dt, s = self.info[x]
        if r.random() < 0.25:
            return self.window(x)
        k = r.randint(0, 4)
        if k == 0:  # reshape
            n = int(np.prod(s))
            dims = []
            rest = n
            for _ in range(r.randint(0, 2)):
                ds = [d for d in range(1, rest + 1) if rest % d == 0]
                d = r.choice(ds)
                dims.append(d)
                rest //= d
            dims.append(rest)
            r.shuffle(dims)
            return self.op("reshape", [x], [len(dims)] + dims, dt, dims)
        if k == 1:  # permute
            p = list(range(len(s)))
            r.shuffle(p)
            return self.op("permute", [x], p, dt, [s[i] for i in p])
        if k == 2:  # expand size-1 axes (and maybe a new leading one)
            to = [d if d != 1 else r.choice([1, 2, 3]) for d in s]
            if len(to) < 3 and r.random() < 0.4:
                to = [r.choice([1, 2])] + to
            return self.op("expand", [x], [len(to)] + to, dt, to)
        if k == 3:  # slice
            ax = r.randrange(len(s))
            d = s[ax]
            for _ in range(20):
                start, stop, step = r.randint(-d, d), r.randint(-d, d + 1), r.randint(1, 3)
                m = len(range(d)[start:stop:step])
                if m > 0:
                    out = list(s)
                    out[ax] = m
                    return self.op("slice", [x], [ax, start, stop, step], dt, out)
            return x
        if r.random() < 0.5:
            return self.composed(x)
        lo = [r.randint(0, 2) for _ in s]
        hi = [r.randint(0, 2) for _ in s]
        out = [d + a + b for d, a, b in zip(s, lo, hi)]
        return self.op("pad", [x], ["%.9g" % float(np.float32(r.uniform(-1, 1)))] + lo + hi, dt, out)

    def view_chain(self, x):
        """2..5 views in a row, permutes half of them: the graph passes collapse chains (a permute of
        a permute is one permute, a reshape of a reshape one reshape), and a chain over axes of equal
        sizes may come back to x's shape without being the identity"""
        r = self.r
        for _ in range(r.randint(2, 5)):
            dt, s = self.info[x]
            if r.random() < 0.5 and len(s) >= 2:
                p = list(range(len(s)))
                r.shuffle(p)
                x = self.op("permute", [x], p, dt, [s[i] for i in p])
            else:
                x = self.view(x)
        return x

    def window(self, x):
        """a short window of constant bounds read from a tensor built along the same axis (a pad,
        a concat, or a transpose flattened): the reads of a pooling window or x[1:4] of a padded
        sequence, whose bounds a kernel made for other sizes (the family kernels of dynamic
        shapes, generated at large sizes) must not take for granted"""
        r = self.r
        dt, s = self.info[x]
        ax = r.randrange(len(s))
        k = r.randint(0, 2)
        if k == 0:
            lo = [r.randint(0, 2) if i == ax else 0 for i in range(len(s))]
            hi = [r.randint(0, 2) if i == ax else 0 for i in range(len(s))]
            out = [d + a + b for d, a, b in zip(s, lo, hi)]
            y = self.op("pad", [x], ["%.9g" % float(np.float32(r.uniform(-1, 1)))] + lo + hi, dt, out)
        elif k == 1:
            zs = list(s)
            zs[ax] = r.randint(1, 3)
            z = self.inp(dt, zs)
            out = list(s)
            out[ax] += zs[ax]
            y = self.op("concat", [x, z] if r.random() < 0.5 else [z, x], [ax], dt, out)
        else:
            if len(s) < 2:
                return x
            p = list(range(len(s)))
            p[-1], p[-2] = p[-2], p[-1]
            t = self.op("permute", [x], p, dt, [s[i] for i in p])
            n = int(np.prod(s))
            y = self.op("reshape", [t], [1, n], dt, [n])
            ax = 0
            out = [n]
        d = out[ax]
        start = r.randint(0, min(2, d - 1))
        stop = min(d, start + r.randint(1, 4))
        step = r.choice([1, 1, 2])
        sl = list(out)
        sl[ax] = len(range(d)[start:stop:step])
        return self.op("slice", [y], [ax, start, stop, step], dt, sl)

    def composed(self, x):
        """an op kiln composes from others (src/frontend/ops_compose.c): clamp, flip, roll,
        tril/triu, stack, reflect/replicate padding"""
        r = self.r
        dt, s = self.info[x]
        k = r.randint(0, 5)
        if k == 0:
            lo = float(np.float32(r.uniform(-1, 0)))
            return self.op("clamp", [x], ["%.9g" % lo, "%.9g" % float(np.float32(lo + r.uniform(0.1, 2)))], dt, s)
        if k == 1:
            axes = r.sample(range(len(s)), r.randint(1, len(s)))
            return self.op("flip", [x], [len(axes)] + [a - len(s) if r.random() < 0.3 else a for a in axes], dt, s)
        if k == 2:
            ax = r.randrange(len(s))
            return self.op("roll", [x], [r.randint(-2 * s[ax], 2 * s[ax]), ax], dt, s)
        if k == 3 and len(s) >= 2:
            return self.op(r.choice(["tril", "triu"]), [x], [r.randint(-2, 2)], dt, s)
        if k == 4:
            ax = r.randint(-len(s) - 1, len(s))
            a = ax + len(s) + 1 if ax < 0 else ax
            y = self.op("mul_c", [x], ["%.9g" % float(np.float32(r.uniform(-1.5, 1.5)))], dt, s)
            return self.op("stack", [x, y], [ax], dt, s[:a] + [2] + s[a:])
        mode = r.randint(1, 2)  # 1 reflect, 2 replicate
        lim = [d - 1 if mode == 1 else 2 for d in s]
        lo = [r.randint(0, min(2, m)) for m in lim]
        hi = [r.randint(0, min(2, m)) for m in lim]
        return self.op("pad_with", [x], [mode] + lo + hi, dt, [d + a + b for d, a, b in zip(s, lo, hi)])

    def read(self, t, kind="read"):
        self.emit(kind, t)

    def step(self):
        self.emit("step")
        self.live = {t for t in self.live if t in self.kept or self.is_grad(t)}
        self.assigned_params = set()
        for t in self.live:
            self.deps[t] = {t} if t in self.params else set()

    def is_grad(self, t):
        return any(t in g for g in self.grad_ids.values())

    def program(self):
        r = self.r
        for _ in range(r.randint(1, 3)):
            p = self.inp(F32, self.shape(), lo=-1.5, hi=1.5)
            self.emit("keep", p)
            self.kept.add(p)
            if r.random() < 0.8:
                self.emit("reqgrad", p)
                self.params.append(p)
        self.step()
        for _ in range(r.randint(1, 4)):
            self.one_step()
            self.step()
            for t in sorted(self.kept):
                if r.random() < 0.5:
                    self.read(t)
        for t in sorted(self.kept):
            self.read(t)
        for t in sorted(self.kept):
            self.emit("release", t)
        return "\n".join(self.lines) + "\n"

    def one_step(self):
        r = self.r
        made = []
        for _ in range(r.randint(2, 10)):
            t = self.random_op()
            made.append(t)
            u = r.random()
            if u < 0.12:
                self.read(self.pick(lambda q: q not in self.grad_only()))
            elif u < 0.18:
                x = self.floats()
                if x is not None:
                    s = self.op("sum", [x], [0, 0], self.info[x][0], [])
                    self.read(s, "item")
            elif u < 0.25:
                self.emit("keep", t)
                self.kept.add(t)
            elif u < 0.35:
                self.assign_something()
            elif u < 0.45:
                self.backward()
            elif u < 0.48:
                rel = self.pick(lambda q: q in self.kept and q not in self.params)
                if rel:
                    self.emit("release", rel)
                    self.kept.discard(rel)
                    self.live.discard(rel)
        if r.random() < 0.6:
            self.backward()
            if r.random() < 0.7:  # the SGD pattern, and a read before the marker
                for p in self.params:
                    if p in self.has_grad and p in self.live:
                        g = self.grad(p)
                        dt, s = self.info[p]
                        # a constant or a SCALAR learning rate (the cpu backend folds a
                        # SCALAR factor into a GEMM's alpha), subtracted or added negated
                        lr = r.choice(["0.1", "0.05", "0.2"])
                        if r.random() < 0.5:
                            upd = self.op("sub", [p, self.op("mul_c", [g], [lr], F32, s)], [], F32, s)
                        elif r.random() < 0.5:
                            upd = self.op("sub", [p, self.op("mul_s", [g], [lr], F32, s)], [], F32, s)
                        else:
                            upd = self.op("add", [self.op("mul_s", [g], ["-" + lr], F32, s), p], [], F32, s)
                        self.emit("assign", p, upd)
                        self.assigned_params.add(p)
                        if r.random() < 0.5:
                            self.read(p)
                        if r.random() < 0.5:
                            self.read(g)
        if r.random() < 0.25:
            self.gemm_update()
        if r.random() < 0.2:
            for p in self.params:
                if p in self.has_grad:
                    self.emit("zerograd", p)
                    self.has_grad.discard(p)
                    for g in self.grad_ids.pop(p, []):
                        self.live.discard(g)

    def gemm_update(self):
        """A kept 2-D tensor updated by a product, as an optimizer step or a
        gradient accumulation is: k = k - lr*(A^T @ B), k = k + A^T @ B or
        k = (A^T @ B)*lr + k (the cpu backend computes these in the GEMM's
        own stores, in place in k's buffer)."""
        r = self.r
        k = self.pick(lambda q: q in self.kept and self.info[q][0] == F32 and len(self.info[q][1]) == 2
                      and not self.is_grad(q) and q not in self.params)
        if k is None:
            return
        s = self.info[k][1]
        m = r.choice([1, 3, 4])
        a = self.inp(F32, [m, s[0]])
        b = self.inp(F32, [m, s[1]])
        prod = self.op("matmul", [self.op("permute", [a], [1, 0], F32, [s[0], m]), b], [], F32, s)
        u = r.random()
        if u < 0.4:
            lr = r.choice(["0.1", "0.5"])
            f = self.op(r.choice(["mul_s", "mul_c"]), [prod], [lr], F32, s)
            upd = self.op("sub", [k, f], [], F32, s)
        elif u < 0.7:
            upd = self.op("add", [k, prod], [], F32, s)
        else:
            upd = self.op("add", [self.op("mul_s", [prod], ["0.25"], F32, s), k], [], F32, s)
        upd = self.op("tanh", [upd], [], F32, s) if r.random() < 0.5 else upd  # bounded over many steps
        self.emit("assign", k, upd)
        self.deps[k] = set()
        if r.random() < 0.5:
            self.read(k)

    def grad_only(self):
        return {g for gs in self.grad_ids.values() for g in gs}

    def grad(self, p):
        g = self.new_id()
        self.emit("grad", g, p)
        self.info[g] = self.info[p]
        self.live.add(g)
        self.grad_ids.setdefault(p, []).append(g)
        self.deps[g] = set()
        return g

    def assign_something(self):
        r = self.r
        k = self.pick(lambda q: q in self.kept and is_float(self.info[q][0]) and not self.is_grad(q))
        if k is None:
            return
        dt, s = self.info[k]
        y = self.inp(dt, s)
        src = self.op(r.choice(["add", "mul", "maximum"]), [k, y], [], dt, s)
        src = self.op("tanh", [src], [], dt, s)  # keeps values bounded over many steps
        self.emit("assign", k, src)
        if k in self.params:
            self.assigned_params.add(k)
        self.deps[k] = set(self.deps.get(src, set())) if k not in self.params else self.deps.get(src, set())
        if r.random() < 0.6:
            self.read(k)

    def backward(self):
        ok = [p for p in self.params if p in self.live and p not in self.assigned_params]
        if not ok:
            return
        x = self.pick(lambda q: is_float(self.info[q][0]) and self.deps.get(q, set()) & set(ok)
                      and not (self.deps.get(q, set()) & self.assigned_params)
                      and np.prod(self.info[q][1]) <= 64)
        if x is None:
            return
        loss = self.op("sum", [x], [0, 0], self.info[x][0], [])
        if self.r.random() < 0.3:
            self.read(loss, "item")  # logging the loss before backward
        self.emit("backward", loss)
        for p in self.deps[x]:
            self.has_grad.add(p)
        if self.r.random() < 0.5:
            p = self.r.choice(sorted(self.deps[x] & set(ok)))
            self.read(self.grad(p))


# ───────────────────────── running and comparing ─────────────────────────

def run_kiln(exe, backend, programs, cache_dir):
    """{program index: (reads {statement: (dtype, shape, values)}, error or None)}"""
    with tempfile.NamedTemporaryFile("w", suffix=".prog", delete=False) as f:
        for i, text in programs:
            f.write("program %d\n%send\n" % (i, text))
        path = f.name
    env = dict(os.environ)
    if cache_dir:
        env["KILN_CACHE_DIR"] = cache_dir
    try:
        p = subprocess.run([exe, backend, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           universal_newlines=True, timeout=3600)
    finally:
        os.unlink(path)
    res = {i: ({}, None) for i, _ in programs}
    if p.returncode != 0:
        for i in res:
            res[i] = ({}, "diff_run exited %d: %s" % (p.returncode, p.stderr[-2000:]))
        return res
    for line in p.stdout.split("\n"):
        if line.startswith("R "):
            head, _, vals = line.partition(" | ")
            t = head.split()
            prog, si, dt, rank = int(t[1]), int(t[2]), t[3], int(t[4])
            shape = [int(a) for a in t[5:5 + rank]]
            conv = float if dt in (F32, F64) else int  # integers exactly (an i64 is not a double)
            res[prog][0][si] = (dt, shape, [conv(v) for v in vals.split()] if vals.strip() else [])
        elif line.startswith("E "):
            t = line.split(" ", 4)
            res[int(t[1])] = (res[int(t[1])][0], "statement %s: %s %s" % (t[2], t[3], t[4] if len(t) > 4 else ""))
    return res


def tolerance(stmt_kind, dt, want):
    scale = float(np.max(np.abs(want))) if want.size and np.all(np.isfinite(want)) else 1.0
    # f32 tolerances for f64 too: an f64 result usually has f32 ops upstream,
    # whose last bits differ between kiln (f32 math) and the oracle (f64
    # math rounded to f32)
    return 2e-4, 5e-5 * (1 + scale)


def compare(prog, expected, got, err):
    """None if kiln agrees with the oracle, else a description."""
    if err:
        return "kiln error: " + err
    for si, (dt, shape, want) in sorted(expected.items()):
        st = " ".join(prog[si])
        if si not in got:
            return "statement %d (%s): kiln printed nothing" % (si, st)
        gdt, gshape, gv = got[si]
        if st.startswith("item"):
            gshape, gdt = [], dt
        if list(gshape) != list(shape):
            return "statement %d (%s): shape %s, NumPy %s" % (si, st, gshape, shape)
        if gdt != dt:
            return "statement %d (%s): dtype %s, the oracle %s" % (si, st, gdt, dt)
        if not is_float(dt):  # exactly, as Python integers
            w = [int(v) for v in np.asarray(want).reshape(-1).tolist()]
            if len(gv) != len(w):
                return "statement %d (%s): %d values, NumPy %d" % (si, st, len(gv), len(w))
            bad = [k for k in range(len(w)) if int(gv[k]) != w[k]]
            if bad:
                return "statement %d (%s): element %d is %d, the oracle %d (of %d; %d differ)" % (
                    si, st, bad[0], int(gv[bad[0]]), w[bad[0]], len(w), len(bad))
            continue
        w = np.asarray(want, dtype=np.float64).reshape(-1)
        g = np.asarray(gv, dtype=np.float64)
        if g.size != w.size:
            return "statement %d (%s): %d values, NumPy %d" % (si, st, g.size, w.size)
        if is_float(dt):
            rtol, atol = tolerance(st, dt, w)
            with np.errstate(invalid="ignore"):  # inf - inf
                bad = ~((g == w) | (np.abs(g - w) <= atol + rtol * np.abs(w)) | (np.isnan(g) & np.isnan(w)))
        else:
            bad = g != w
        if np.any(bad):
            k = int(np.argmax(bad))
            return "statement %d (%s): element %d is %r, NumPy %r (of %d; %d differ)" % (
                si, st, k, g[k], w[k], w.size, int(np.sum(bad)))
    return None


def check(exe, backends, programs, cache_dir):
    """[(index, text, backend, problem)] for the programs kiln gets wrong."""
    expected = {}
    for i, text in programs:
        expected[i] = run_oracle(parse(text))
    bad = []
    for b in backends:
        res = run_kiln(exe, b, programs, cache_dir)
        for i, text in programs:
            reads, err = res[i]
            why = compare(parse(text), expected[i], reads, err)
            if why:
                bad.append((i, text, b, why))
    return bad


def minimise(exe, backend, text, cache_dir, budget=150):
    """Drop statements (and what depends on them) while kiln still fails."""
    lines = text.strip().split("\n")

    def fails(ls):
        t = "\n".join(ls) + "\n"
        try:
            exp = run_oracle(parse(t))
        except (Invalid, Exception):
            return False
        res = run_kiln(exe, backend, [(0, t)], cache_dir)
        reads, err = res[0]
        return compare(parse(t), exp, reads, err) is not None

    i = len(lines) - 1
    while i >= 0 and budget > 0:
        cand = lines[:i] + lines[i + 1:]
        budget -= 1
        if fails(cand):
            lines = cand
        i -= 1
        i = min(i, len(lines) - 1)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="the diff_run interpreter")
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backends", default="cpu,ref")
    ap.add_argument("--batch", type=int, default=500, help="programs per interpreter process")
    ap.add_argument("--cache-dir", default=os.environ.get("KILN_CACHE_DIR"))
    ap.add_argument("--no-minimise", action="store_true")
    ap.add_argument("--print", type=int, default=None, help="print program SEED and exit")
    a = ap.parse_args()
    if a.print is not None:
        sys.stdout.write(Gen(a.print).program())
        return 0
    backends = a.backends.split(",")
    total, failed, shown = 0, 0, 0
    for b0 in range(a.seed, a.seed + a.programs, a.batch):
        seeds = range(b0, min(b0 + a.batch, a.seed + a.programs))
        programs = [(s, Gen(s).program()) for s in seeds]
        bad = check(a.run, backends, programs, a.cache_dir)
        total += len(programs)
        bad_seeds = sorted({i for i, _, _, _ in bad})
        failed += len(bad_seeds)
        for i, text, b, why in bad:
            if shown >= 3:
                break
            shown += 1
            print("FAIL seed %d on %s: %s" % (i, b, why))
            if not a.no_minimise:
                print("minimised program (difftest.py --print %d gives the whole one):" % i)
                print(minimise(a.run, b, text, a.cache_dir))
        print("difftest: %d programs, seeds %d..%d, backends %s: %d failed so far" % (
            total, a.seed, b0 + len(programs) - 1, a.backends, failed), flush=True)
    print("%d passed, %d failed" % (total - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
