#!/usr/bin/python3
"""The layer check: which folders of src/ (and tools/) may include and call which.

Every `#include "folder/..."` in src/ and tools/ is an edge between folders
(sub-folders count as their top folder: backends/cpu is backends). An edge
must be in ALLOWED (the layer graph of docs/architecture.md, "Layers") or in
EXCEPTIONS (an edge the code has today against that graph, with what removes
it). The check fails on any other edge, and on an exception that no longer
occurs (so the list only shrinks). `kiln/` is the public API: anyone may
include it. A header in PRIVATE may be included from its own folder only.

With --calls BUILD it also checks call edges, from the built objects: `nm`
on the objects of src/ and tools/ in BUILD (CMakeFiles/<target>.dir/src/...
.o) gives the folder that defines each global symbol and the folders whose
objects reference it; a reference across folders is an edge, unless the
symbol is public (named in include/kiln/: a program may call it too). A call
edge must be in ALLOWED, EXCEPTIONS or CALL_EXCEPTIONS (edges made through a
header of an allowed folder, with what removes them); a CALL_EXCEPTIONS entry
that no longer occurs fails too. This catches what includes do not show: a
declaration copied instead of included, or a function one folder declares
and another defines.

Usage: check_layers.py [ROOT]                (test_layers: include edges)
       check_layers.py ROOT --calls BUILD    (test_layer_calls: include and call edges)
       check_layers.py --self-test           (test_layers_self: the check catches what it should)
"""
import os
import re
import shutil
import subprocess
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
    # processes working as one (rank, world, collectives over the MPI module
    # loaded on first use): a service like the toolchain, needing only base
    "dist": {"base"},
    # the backends run collective nodes through dist
    "backends": {"toolchain", "dist", "codegen", "schedule", "ir", "base"},
    "runtime": {"backends", "codegen", "schedule", "passes", "ir", "base"},
    # dist: the world size a collective is traced for
    "frontend": {"runtime", "dist", "ir", "base"},
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
}

# Call edges that no include shows, each with what removes it (none today).
CALL_EXCEPTIONS = {}

# header -> the one folder that may include it
PRIVATE = {
    "runtime/runtime_internal.h": "runtime",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"(([a-z_]+)/[^"]*)"', re.M)


def edges(root, private=None):
    """Include edges {(src, dst): ["file:line", ...]}; private (a list) gets
    "file:line: header" for each PRIVATE header included from another folder."""
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
                    dst = m.group(2)
                    line = text.count("\n", 0, m.start()) + 1
                    if private is not None and m.group(1) in PRIVATE and PRIVATE[m.group(1)] != src:
                        private.append(f"{rel}:{line}: {m.group(1)}")
                    if dst == src or dst == "kiln":
                        continue
                    found.setdefault((src, dst), []).append(f"{rel}:{line}")
    return found


def public_names(root):
    """Every kiln_ name in the public headers (include/kiln/)."""
    names = set()
    inc = os.path.join(root, "include", "kiln")
    for f in sorted(os.listdir(inc)) if os.path.isdir(inc) else []:
        with open(os.path.join(inc, f), encoding="utf-8", errors="replace") as fh:
            names |= set(re.findall(r"\bkiln_\w+", fh.read()))
    return names


def call_edges(root, build):
    """Call edges {(src, dst): ["object: symbol", ...]} from the objects of
    src/ and tools/ in the build directory, or a string saying what failed."""
    objs = {}
    top = os.path.join(build, "CMakeFiles")
    for d, _, files in os.walk(top):
        for f in files:
            if not f.endswith(".o"):
                continue
            parts = os.path.relpath(os.path.join(d, f), top).split(os.sep)
            if len(parts) < 3 or not parts[0].endswith(".dir") or parts[1] not in ("src", "tools"):
                continue
            source = "/".join(parts[1:])[:-2]
            if not os.path.exists(os.path.join(root, source)):
                continue  # left behind by a source file since removed
            folder = "tools" if parts[1] == "tools" else parts[2]
            objs[os.path.join(d, f)] = (folder, source)
    if not objs:
        return f"no objects of src/ under {top}: build first"
    nm = shutil.which("nm")
    if not nm:
        return "nm not found"
    r = subprocess.run([nm, "-A", "-P"] + sorted(objs), capture_output=True, text=True)
    if r.returncode != 0:
        return f"nm failed: {r.stderr.strip()[:300]}"
    defs, refs = {}, []
    for line in r.stdout.splitlines():
        a = line.split()
        if len(a) < 3 or not a[0].endswith(":"):
            continue
        obj, name, kind = a[0][:-1], a[1], a[2]
        if obj not in objs:
            continue
        if kind == "U":
            refs.append((obj, name))
        elif kind in "TDBRCGSVWi":
            defs.setdefault(name, obj)
    if not defs:
        return "no symbols in the objects (built with LTO?)"
    public = public_names(root)
    found = {}
    for obj, name in refs:
        if name not in defs or name in public:
            continue
        a, b = objs[obj][0], objs[defs[name]][0]
        if a != b:
            found.setdefault((a, b), []).append(f"{objs[obj][1]}: {name} (defined in {objs[defs[name]][1]})")
    return found


def check(root, out=print, build=None):
    private = []
    found = edges(root, private)
    bad = 0
    for w in private:
        out(f"check_layers: a private header included from another folder (PRIVATE): {w}")
        bad += 1
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
    calls = None
    if build is not None:
        calls = call_edges(root, build)
        if isinstance(calls, str):
            out(f"check_layers: cannot check call edges: {calls}")
            bad += 1
            calls = {}
        for (src, dst), where in sorted(calls.items()):
            if src not in ALLOWED:
                out(f"check_layers: folder {src}/ is not in the layer graph: {where[0]}")
                bad += 1
            elif dst not in ALLOWED[src] and (src, dst) not in EXCEPTIONS and (src, dst) not in CALL_EXCEPTIONS:
                out(f"check_layers: {src}/ may not call {dst}/ (docs/architecture.md, \"Layers\"):")
                for w in where:
                    out(f"  {w}")
                bad += 1
        for (src, dst), why in sorted(CALL_EXCEPTIONS.items()):
            if (src, dst) not in calls:
                out(f"check_layers: the call exception {src} -> {dst} no longer occurs: remove it from "
                    f"CALL_EXCEPTIONS")
                bad += 1
    if bad:
        out(f"check_layers: {bad} problem(s)")
        return 1
    out(f"check_layers: {len(found)} folder edges, {len(found) - n_exc} in the layer graph, "
        f"{n_exc} listed exceptions")
    if calls is not None:
        n_cexc = sum(1 for e in calls if e[1] not in ALLOWED.get(e[0], ()))
        out(f"check_layers: {len(calls)} call edges between folders, {len(calls) - n_cexc} in the layer graph, "
            f"{n_cexc} listed exceptions")
    return 0


def write_objects(d, refs, public=()):
    """A build directory d/build whose objects make the call edges refs
    [(src, dst), ...]: dst's object defines kiln_sym<i>, src's references it.
    Names in public go into d/include/kiln/x.h. Returns the build directory."""
    work = os.path.join(d, "objwork")
    os.makedirs(work, exist_ok=True)
    srcs = []
    for i, (src, dst) in enumerate(refs):
        for role, folder, body in (("def", dst, f"int kiln_sym{i}(void) {{ return {i}; }}\n"),
                                   ("ref", src, f"int kiln_sym{i}(void);\nint kiln_use{i}(void) {{ return kiln_sym{i}(); }}\n")):
            name = f"{role}{i}.c"
            with open(os.path.join(work, name), "w") as f:
                f.write(body)
            srcs.append((name, folder))
    subprocess.run(["cc", "-c"] + [n for n, _ in srcs], cwd=work, check=True)
    build = os.path.join(d, "build")
    for name, folder in srcs:
        rel = ["tools"] if folder == "tools" else ["src", folder]
        dest = os.path.join(build, "CMakeFiles", "kiln_cli.dir" if folder == "tools" else "kiln_obj.dir", *rel)
        os.makedirs(dest, exist_ok=True)
        os.makedirs(os.path.join(d, *rel), exist_ok=True)
        shutil.copy(os.path.join(work, name), os.path.join(d, *rel, name))  # the source the object is of
        os.replace(os.path.join(work, name[:-2] + ".o"), os.path.join(dest, name + ".o"))
    if public:
        os.makedirs(os.path.join(d, "include", "kiln"), exist_ok=True)
        with open(os.path.join(d, "include", "kiln", "x.h"), "w") as f:
            f.write("".join(f"int {n}(void);\n" for n in public))
    return build


def self_test():
    """The check itself: a tree with every listed exception and an allowed
    edge passes; adding a forbidden edge fails naming the file and line;
    dropping an exception's edge fails as stale; a private header included
    from another folder fails. With objects: every call exception and an
    allowed call pass; a forbidden call fails naming the object and symbol,
    unless the symbol is public; a stale call exception fails."""
    import tempfile

    def tree(d, extra=(), drop=None, private=False):
        for i, (src, dst) in enumerate(sorted(EXCEPTIONS) + [("passes", "ir")] + list(extra)):
            if (src, dst) == drop:
                continue
            folder = os.path.join(d, "tools") if src == "tools" else os.path.join(d, "src", src)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"f{i}.c"), "w") as f:
                f.write(f'/* edge */\n#include "{dst}/x.h"\n#include "kiln/kiln.h"\n')
        if private:
            with open(os.path.join(d, "src", "passes", "p.c"), "w") as f:
                f.write('#include "runtime/runtime_internal.h"\n')

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
    with tempfile.TemporaryDirectory() as d:
        tree(d, private=True)
        msgs = []
        ok &= check(d, msgs.append) == 1 and any("src/passes/p.c:1: runtime/runtime_internal.h" in m for m in msgs)
    calls = sorted(CALL_EXCEPTIONS) + [("runtime", "base")]
    with tempfile.TemporaryDirectory() as d:
        tree(d)
        msgs = []
        ok &= check(d, msgs.append, build=write_objects(d, calls)) == 0
    with tempfile.TemporaryDirectory() as d:
        tree(d)
        msgs = []
        n = len(calls)
        ok &= check(d, msgs.append, build=write_objects(d, calls + [("base", "runtime")])) == 1 \
            and any("base/ may not call runtime/" in m for m in msgs) \
            and any(f"src/base/ref{n}.c: kiln_sym{n} (defined in src/runtime/def{n}.c)" in m for m in msgs)
    with tempfile.TemporaryDirectory() as d:
        tree(d)
        msgs = []
        n = len(calls)
        ok &= check(d, msgs.append, build=write_objects(d, calls + [("base", "runtime")], public=[f"kiln_sym{n}"])) == 0
    # A stale call exception: one listed whose edge the objects lack (a
    # made-up one, tools -> ir, while the list is empty).
    saved = dict(CALL_EXCEPTIONS)
    if not CALL_EXCEPTIONS:
        CALL_EXCEPTIONS[("tools", "ir")] = "self-test"
    try:
        with tempfile.TemporaryDirectory() as d:
            tree(d)
            msgs = []
            src, dst = sorted(CALL_EXCEPTIONS)[0]
            rest = [e for e in sorted(CALL_EXCEPTIONS)[1:]] + [("runtime", "base")]
            ok &= check(d, msgs.append, build=write_objects(d, rest)) == 1 \
                and any(f"call exception {src} -> {dst} no longer occurs" in m for m in msgs)
    finally:
        CALL_EXCEPTIONS.clear()
        CALL_EXCEPTIONS.update(saved)
    print("check_layers: self-test " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    args = sys.argv[1:]
    build = None
    if "--calls" in args:
        i = args.index("--calls")
        if i + 1 >= len(args):
            print("usage: check_layers.py ROOT --calls BUILD")
            return 2
        build = args[i + 1]
        del args[i:i + 2]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    return check(root, build=build)


if __name__ == "__main__":
    sys.exit(main())
