#!/usr/bin/python3
"""The layer check: which folders of src/ (and tools/) may include which.

Every `#include "folder/..."` in src/ and tools/ is an edge between folders
(sub-folders count as their top folder: backends/cpu is backends). An edge
must be in ALLOWED (the layer graph of docs/architecture.md, "Layers") or in
EXCEPTIONS (an edge the code has today against that graph, with what removes
it). The check fails on any other edge, and on an exception that no longer
occurs (so the list only shrinks). `kiln/` is the public API: anyone may
include it.

Usage: check_layers.py [ROOT]      (run by `make test` as test_layers)
       check_layers.py --self-test  (test_layers_self: the check catches what it should)
"""
import os
import re
import sys

# folder -> folders it may include (besides itself and the public kiln/)
ALLOWED = {
    "base": set(),
    "ir": {"base"},
    "passes": {"ir", "base"},
    "schedule": {"ir", "base"},
    "codegen": {"schedule", "ir", "base"},
    # the C compiler driver, the disk cache of objects, the shared-object loader
    "toolchain": {"base"},
    "backends": {"toolchain", "codegen", "schedule", "ir", "base"},
    "runtime": {"backends", "codegen", "schedule", "passes", "ir", "base"},
    "frontend": {"runtime", "ir", "base"},
    "autograd": {"frontend", "runtime", "ir", "base"},
    "nn": {"autograd", "frontend", "ir", "base"},
    "optim": {"nn", "autograd", "frontend", "base"},
    "data": {"frontend", "base"},
    "io": {"frontend", "base"},
    # observers: they read what the runtime exposes (graphs, records)
    "debug": {"runtime", "ir", "base"},
    "profiler": {"runtime", "base"},
    # tools use the public API only
    "tools": {"tools"},
}
# kiln_init / kiln_shutdown (src/init/): the top, which assembles the layers
# (starts the runtime, registers the observers of runtime/events.h); it may
# include every folder of src/, and no folder may include it.
ALLOWED["init"] = set(ALLOWED) - {"tools"}

# Edges the code has today against the graph above, each with what removes
# it (issue "One table says what every op means, and the layers call one
# way", section 2). Remove an entry in the change that removes its edge.
EXCEPTIONS = {
    ("runtime", "frontend"): "the runtime owns the frontend's state, linearizes its trace and writes its tensor "
                             "slots: the frontend owns its state and hands the runtime a linearized graph",
    ("tools", "backends"): "kiln doctor benchmarks the GEMM library: a public query",
    ("tools", "base"): "tools use the internal kiln_err (also declared by kiln/profiler.h): a public error type",
    ("tools", "debug"): "kiln graph diff parses and diffs dumps with debug's code: a public graph-file API",
    ("tools", "profiler"): "kiln profile uses the server's request checks: the public profiler API",
    ("tools", "toolchain"): "kiln doctor probes the compiler driver: a public query",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def edges(root):
    found = {}
    for top in ("src", "tools"):
        base = os.path.join(root, top)
        for d, _, files in os.walk(base):
            for f in files:
                if not f.endswith((".c", ".h", ".cc")):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, root)
                parts = rel.split(os.sep)
                src = "tools" if parts[0] == "tools" else parts[1]
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for m in INCLUDE.finditer(text):
                    dst = m.group(1)
                    if dst == src or dst == "kiln":
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    found.setdefault((src, dst), []).append(f"{rel}:{line}")
    return found


def check(root, out=print):
    found = edges(root)
    bad = 0
    for (src, dst), where in sorted(found.items()):
        if src not in ALLOWED:
            out(f"check_layers: folder {src}/ is not in the layer graph (add it to ALLOWED and to "
                  f"docs/architecture.md): {where[0]}")
            bad += 1
        elif dst not in ALLOWED[src] and (src, dst) not in EXCEPTIONS:
            out(f"check_layers: {src}/ may not include {dst}/ (docs/architecture.md, \"Layers\"):")
            for w in where:
                out(f"  {w}")
            bad += 1
    for (src, dst), why in sorted(EXCEPTIONS.items()):
        if (src, dst) not in found:
            out(f"check_layers: the exception {src} -> {dst} no longer occurs: remove it from EXCEPTIONS")
            bad += 1
    n_exc = sum(1 for e in found if e in EXCEPTIONS)
    if bad:
        out(f"check_layers: {bad} problem(s)")
        return 1
    out(f"check_layers: {len(found)} folder edges, {len(found) - n_exc} in the layer graph, "
        f"{n_exc} listed exceptions")
    return 0


def self_test():
    """The check itself: a tree with every listed exception and an allowed
    edge passes; adding a forbidden edge fails naming the file and line;
    dropping an exception's edge fails as stale."""
    import tempfile

    def tree(d, extra=(), drop=None):
        for i, (src, dst) in enumerate(sorted(EXCEPTIONS) + [("passes", "ir")] + list(extra)):
            if (src, dst) == drop:
                continue
            folder = os.path.join(d, "tools") if src == "tools" else os.path.join(d, "src", src)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"f{i}.c"), "w") as f:
                f.write(f'/* edge */\n#include "{dst}/x.h"\n#include "kiln/kiln.h"\n')

    ok = True
    with tempfile.TemporaryDirectory() as d:
        tree(d)
        msgs = []
        ok &= check(d, msgs.append) == 0
    with tempfile.TemporaryDirectory() as d:
        tree(d, extra=[("base", "runtime")])
        msgs = []
        ok &= check(d, msgs.append) == 1 and any("base/ may not include runtime/" in m for m in msgs) \
            and any(re.search(r"src/base/f\d+\.c:2$", m) for m in msgs)
    if EXCEPTIONS:
        src, dst = sorted(EXCEPTIONS)[0]
        with tempfile.TemporaryDirectory() as d:
            tree(d, drop=(src, dst))
            msgs = []
            ok &= check(d, msgs.append) == 1 and any(f"{src} -> {dst} no longer occurs" in m for m in msgs)
    print("check_layers: self-test " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    return check(root)


if __name__ == "__main__":
    sys.exit(main())
