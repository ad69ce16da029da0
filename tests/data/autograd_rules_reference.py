#!/usr/bin/env python3
"""PyTorch reference gradients for the rules of kiln's autograd
(tests/unit/test_autograd_rules.c): when requires_grad takes effect, which
uses of a tensor are its gradient's target (not a hash-consed twin, not a
tensor sharing its buffer), no-grad regions (ops returning their input, mixed
inputs, tensors made inside), values read mid-step, backward twice, seeds,
several views of one leaf, and the gradient's dtype.

Writes tests/data/autograd_rules_reference.txt: one array per line,

    <name> <count> <values...>

x and r are inputs (f64, shape [6]); every case's <case>.g is the gradient
PyTorch gives the tensor w of that case (float64 throughout), or "none".
The C test runs the same program with kiln on the ref and cpu backends.

Run (PyTorch 1.13):  /usr/bin/python3 tests/data/autograd_rules_reference.py [out_path]
"""
import sys

import torch

torch.manual_seed(20261128)
D = torch.float64
LINES = []


def W(name, t):
    v = torch.as_tensor(t).detach().reshape(-1).double().tolist()
    LINES.append("%s %d %s" % (name, len(v), " ".join(repr(a) for a in v)))


x = torch.randn(6, dtype=D)
x[1] = 0.5  # cast to an integer: truncates
r = torch.randn(6, dtype=D)
W("x", x)
W("r", r)


def leaf(v):
    return v.clone().requires_grad_()


def case(name, fn):
    w = fn()
    W(name + ".g", w.grad if w.grad is not None else torch.zeros(0))


def after_use():  # requires_grad after w was used: that use carries no gradient
    w = x.clone()
    early = w * w
    w.requires_grad_()
    ((early + w) * r).sum().backward()
    return w


def cse_twin():  # w = 2x requires grad; c = 2x is another tensor (kiln: the same hash-consed node)
    w = (x * 2.0).requires_grad_()
    c = x * 2.0
    (w * c * r).sum().backward()
    return w


def zeros_twin():  # a zero-initialised parameter and another zeros tensor of its shape
    w = torch.zeros(6, dtype=D, requires_grad=True)
    c = torch.zeros(6, dtype=D)
    ((w + x) * (c + x) * r).sum().backward()
    return w


def shared_buffer():  # c = a copy of w (kiln: kiln_assign shares the computed buffer)
    w = leaf(x)
    c = w.detach().clone()
    (w * c * r).sum().backward()
    return w


def assign_twin():  # w := v under no-grad (kiln_assign), then a loss using w and v
    w = leaf(x)
    v = x * 3.0
    with torch.no_grad():
        w.copy_(v)
    (w * v * r).sum().backward()
    return w


def read_mid():  # w computed this step, used, read, used again
    w = (x * 1.0).requires_grad_()
    a = (w * w * r).sum()
    _ = w.tolist()
    (a + (w * r).sum()).backward()
    return w


def read_then_requires():  # read, used, then requires_grad: the earlier use carries none
    w = x * 1.0
    _ = w.tolist()
    a = (w * w * r).sum()
    w.requires_grad_()
    (a + (w * r).sum()).backward()
    return w


def nograd_identity():  # a reshape to the same shape / a full slice inside no-grad is detached
    w = leaf(x)
    with torch.no_grad():
        c = w.reshape(6)
        d = w[0:6]
    (w * c * r + w * d).sum().backward()
    return w


def nograd_mixed():  # an op inside no-grad mixing w and x: a constant
    w = leaf(x)
    with torch.no_grad():
        y = w * x
    (w * y * r).sum().backward()
    return w


def made_in_nograd():  # created inside no-grad, then requires grad: a leaf
    with torch.no_grad():
        w = x * 2.0
    w.requires_grad_()
    (w * w * r).sum().backward()
    return w


def nondiff_paths():  # integer cast, comparison condition, argmax index: no gradient through them
    w = leaf(x)
    t = w.to(torch.int32).to(D)
    m = torch.where(w > 0, w, w * 0.5)
    k = torch.argmax(w).to(D)
    ((t * w + m + k) * r).sum().backward()
    return w


def views():  # one leaf through several views of one graph
    w = leaf(x)
    a = w[0:3] * w[3:6]
    b = w.reshape(2, 3)[1] * 2.0
    c = w.reshape(3, 2).t()[0]  # elements 0, 2, 4
    e = w[0:1].expand(3)
    ((a + b) * r[0:3]).sum().add_((c * e * r[3:6]).sum()).backward()
    return w


def backward_twice():  # the same loss twice in one step (PyTorch: retain_graph=True): gradients add
    w = leaf(x)
    loss = (w * w * r).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    return w


def seed_f32():  # a float32 seed for a float64 output: converted to the output's dtype
    w = leaf(x)
    (w * w).backward(r.float())
    return w


def read_computed_then_requires():  # t = f(w) read, used, then marked: its later uses still reach w
    w = leaf(x)
    t = w * 2.0
    _ = t.tolist()
    a = (t * t * r).sum()
    t.requires_grad_()  # a no-op: t already requires grad
    (a + (t * t * t * r).sum()).backward()
    return w


def nograd_read():  # a value read inside a no-grad region, used inside (a constant) and outside it
    w = leaf(x)
    t = w * 2.0
    with torch.no_grad():
        _ = t.tolist()
        u = t * x
    (t * u * r).sum().backward()
    return w


def nonleaf():  # requires_grad on a tensor computed from w: a no-op in PyTorch; kiln also keeps its gradient
    w = leaf(x)
    c = w * 3.0
    c.requires_grad_()
    c.retain_grad()
    v = w.reshape(6)  # a view of w marked too: its uses still reach w, and w's are not v's
    v.requires_grad_()
    v.retain_grad()
    (c * c * r + v * r + w * w).sum().backward()
    W("nonleaf.cg", c.grad)
    W("nonleaf_v.g", v.grad)
    return w


def transposed_nonleaf():  # a kept transpose of w, used in a matmul and elementwise: its gradient has both
    w = leaf(x)
    t = w.reshape(2, 3).t()
    t.retain_grad()
    y = r.reshape(2, 3) @ t
    (y * y).sum().add_((t * r.reshape(3, 2)).sum()).backward()
    W("transposed_nonleaf_t.g", t.grad)
    return w


for name, fn in [("after_use", after_use), ("cse_twin", cse_twin), ("zeros_twin", zeros_twin),
                 ("shared_buffer", shared_buffer), ("assign_twin", assign_twin), ("read_mid", read_mid),
                 ("read_then_requires", read_then_requires), ("nograd_identity", nograd_identity),
                 ("nograd_mixed", nograd_mixed), ("made_in_nograd", made_in_nograd),
                 ("nondiff_paths", nondiff_paths), ("views", views), ("backward_twice", backward_twice),
                 ("seed_f32", seed_f32), ("nonleaf", nonleaf), ("nograd_read", nograd_read),
                 ("transposed_nonleaf", transposed_nonleaf),
                 ("read_computed_then_requires", read_computed_then_requires)]:
    case(name, fn)

out = sys.argv[1] if len(sys.argv) > 1 else __file__.replace(".py", ".txt")
with open(out, "w") as f:
    f.write("# generated by tests/data/autograd_rules_reference.py (PyTorch %s); do not edit\n" % torch.__version__)
    f.write("\n".join(LINES) + "\n")
