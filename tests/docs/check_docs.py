#!/usr/bin/env python3
"""The documentation is a test (issue 16): every C block of README.md and
docs/*.md compiles against the *installed* kiln, with the compile line the
README documents, and programs run with the output the doc shows.

A fenced block's info string says what it is (docs/testing.md, "Code in the
documentation"):

  ```c                  a complete program: compiled, run (exit status 0); if
                        the next fenced block is ```output, the program's
                        stdout must match it ('...' alone on a line: any lines;
                        '...' inside a line: any text)
  ```c no-run           a complete program compiled and linked, not run (say
                        why in the prose: it needs a data set, or runs long)
  ```c wrap=NAME        a fragment: compiled and linked inside
                        tests/docs/wrappers/NAME.c, which declares what the
                        prose says the fragment assumes; add `run` to run it
  ```c excerpt=PATH     lines quoted from PATH (a file the build compiles):
                        each code line, comments and spacing aside, must occur
                        there, in order
  ```c pseudo           not C: not compiled, counted and listed

In fragments and excerpts a line that is only '...' stands for elided code;
#include lines at the top of a fragment go to file scope. Anything else after
`c` is an error, as is a block that fails.

Usage: check_docs.py BUILD_DIR SOURCE_DIR [SANITIZERS]   (test_docs)
       check_docs.py --self-test BUILD_DIR SOURCE_DIR [SANITIZERS]
                                                          (test_docs_self)
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

WRAP_MARK = "/* @DOC@ */"
FENCE = re.compile(r"^( *)(```+)\s*(\S*)\s*(.*)$")


class Block:
    def __init__(self, path, line, lang, tags, code):
        self.path, self.line, self.lang, self.code = path, line, lang, code
        self.tags = tags  # dict: tag -> value (True when bare)
        self.output = None  # the following ```output block, if any
        self.orphan = False  # an ```output block after no program

    def where(self):
        return f"{self.path}:{self.line}"


def parse_blocks(path, text):
    """Every fenced block of a markdown file (fences may be indented, as in
    list items; the fence's indentation is removed from the code)."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or "`" in m.group(3) + m.group(4):  # CommonMark: no backtick in an info string
            i += 1
            continue
        indent, ticks, lang, rest = len(m.group(1)), m.group(2), m.group(3), m.group(4)
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(ticks):
            j += 1
        if j == len(lines):
            raise SystemExit(f"{path}:{i + 1}: unterminated ``` block")
        code = "\n".join(ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[i + 1:j])
        tags = {}
        for word in rest.split():
            k, eq, v = word.partition("=")
            tags[k] = v if eq else True
        b = Block(path, i + 1, lang, tags, code + "\n")
        if lang == "output":  # belongs to the program just above (prose between is fine)
            prev = blocks[-1] if blocks else None
            if prev and prev.lang == "c" and prev.output is None:
                prev.output = b.code
            else:
                b.orphan = True
        blocks.append(b)
        i = j + 1
    return blocks


def output_regex(expected):
    parts = []
    for ln in expected.rstrip("\n").split("\n"):
        if ln.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(p) for p in ln.split("...")) + r"\n")
    return "".join(parts)


def normalize_c(line):
    line = re.sub(r"/\*.*?\*/", "", line)
    line = re.sub(r"//.*$", "", line)
    return " ".join(line.split())


class Checker:
    def __init__(self, root, prefix, compile_line, env, tmp):
        self.root, self.prefix, self.env, self.tmp = root, prefix, env, tmp
        self.compile_line = compile_line
        self.failures, self.pseudo = [], []
        self.counts = {"program": 0, "output": 0, "no-run": 0, "fragment": 0, "fragment-run": 0, "excerpt": 0}
        self.n = 0

    def fail(self, b, msg):
        self.failures.append(f"{b.where()}: {msg}")

    def sh(self, cmd, cwd, timeout=300):
        return subprocess.run(cmd, cwd=cwd, env=self.env, shell=isinstance(cmd, str), capture_output=True,
                              text=True, timeout=timeout)

    def build(self, b, source, strict=True, headers=()):
        """Compile source (with headers beside it) by the README's line, prog.c
        being that source; the directory of ./prog, or None."""
        self.n += 1
        d = os.path.join(self.tmp, f"b{self.n}")
        os.makedirs(d)
        for h in headers:
            shutil.copy(h, d)
        with open(os.path.join(d, "prog.c"), "w") as f:
            f.write(source)
        line = self.compile_line
        if strict:  # the documented line, with warnings as errors
            line = line.replace("cc prog.c", "cc -std=c11 -Wall -Werror -Wno-unused-variable "
                                "-Wno-unused-but-set-variable -Wno-unused-function prog.c", 1)
        r = self.sh(line, d)
        if r.returncode != 0:
            self.fail(b, f"does not compile with `{line}`:\n{r.stdout}{r.stderr}")
            return None
        return d

    def run(self, b, d):
        try:
            r = self.sh(["./prog"], d)
        except subprocess.TimeoutExpired:
            self.fail(b, "ran longer than 300 s")
            return None
        if r.returncode != 0:
            self.fail(b, f"exited with status {r.returncode}:\n{r.stdout}{r.stderr}")
            return None
        return r.stdout

    def program(self, b):
        # the README's own program: built with exactly the line it documents
        d = self.build(b, b.code, strict=b.path != "README.md")
        if d is None or b.tags.get("no-run"):
            self.counts["no-run" if b.tags.get("no-run") else "program"] += d is not None
            return
        out = self.run(b, d)
        if out is None:
            return
        self.counts["program"] += 1
        if b.output is not None:
            if not re.fullmatch(output_regex(b.output), out):
                self.fail(b, f"printed\n{out}which differs from the doc's output block:\n{b.output}")
            else:
                self.counts["output"] += 1

    def fragment(self, b):
        name = b.tags["wrap"]
        wpath = os.path.join(self.root, "tests", "docs", "wrappers", f"{name}.c")
        if name is True or not os.path.isfile(wpath):
            return self.fail(b, f"wrap={name}: no wrapper tests/docs/wrappers/{name}.c")
        wrapper = open(wpath).read()
        if wrapper.count(WRAP_MARK) != 1:
            return self.fail(b, f"wrapper {wpath} must hold {WRAP_MARK} once")
        lines = b.code.rstrip("\n").split("\n")
        includes = []
        while lines and (lines[0].startswith("#include") or not lines[0].strip()):
            includes.append(lines.pop(0))
        body = "\n".join("" if ln.strip() == "..." else ln for ln in lines)
        src = "\n".join(includes) + f'\n#line 1 "{wpath}"\n' + wrapper.replace(
            WRAP_MARK, f'\n#line {b.line + 1 + len(includes)} "{os.path.join(self.root, b.path)}"\n{body}\n'
            f'#line {wrapper[:wrapper.index(WRAP_MARK)].count(chr(10)) + 1} "{wpath}"\n')
        d = self.build(b, src, headers=glob.glob(os.path.join(os.path.dirname(wpath), "*.h")))
        if d is None:
            return
        self.counts["fragment"] += 1
        if b.tags.get("run") and self.run(b, d) is not None:
            self.counts["fragment-run"] += 1

    def excerpt(self, b):
        rel = b.tags["excerpt"]
        path = os.path.join(self.root, str(rel))
        if rel is True or not os.path.isfile(path):
            return self.fail(b, f"excerpt={rel}: no such file")
        have = [normalize_c(ln) for ln in open(path).read().split("\n")]
        at = 0
        for ln in b.code.split("\n"):
            want = normalize_c(ln)
            if not want or want == "...":
                continue
            while at < len(have) and have[at] != want:
                at += 1
            if at == len(have):
                return self.fail(b, f"`{ln.strip()}` is not in {rel} (in this order)")
            at += 1
        self.counts["excerpt"] += 1

    def check(self, b):
        known = {"no-run", "wrap", "run", "excerpt", "pseudo"}
        bad = [t for t in b.tags if t not in known]
        if bad:
            return self.fail(b, f"unknown tag(s) {' '.join(bad)} on a ```c block (see docs/testing.md)")
        if b.output is not None and (set(b.tags) & {"pseudo", "excerpt", "wrap", "no-run"}):
            return self.fail(b, "an ```output block follows a block that is not run as a program")
        if b.tags.get("pseudo"):
            self.pseudo.append(b.where())
        elif "excerpt" in b.tags:
            self.excerpt(b)
        elif "wrap" in b.tags:
            self.fragment(b)
        else:
            self.program(b)

    def check_files(self, paths):
        for p in paths:
            rel = os.path.relpath(p, self.root)
            for b in parse_blocks(rel, open(p).read()):
                if b.lang == "c":
                    self.check(b)
                elif b.orphan:
                    self.fail(b, "an ```output block must follow a ```c program")


def readme_compile_line(root):
    """The README's documented compile line: the one line starting `cc prog.c`
    inside a ```sh block."""
    found = [b.code.strip() for b in parse_blocks("README.md", open(os.path.join(root, "README.md")).read())
             if b.lang == "sh" and b.code.strip().startswith("cc prog.c") and b.code.strip().count("\n") == 0]
    if len(found) != 1:
        raise SystemExit(f"check_docs: README.md must show the compile line `cc prog.c ...` alone in one ```sh "
                         f"block (found {len(found)})")
    return found[0]


def install(build, tmp, san):
    """cmake --install into tmp/prefix; the environment programs are built and
    run in (pkg-config finds the install; nothing else points at it)."""
    prefix = os.path.join(tmp, "prefix")
    subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True, stdout=subprocess.DEVNULL)
    pcs = glob.glob(os.path.join(prefix, "**", "kiln.pc"), recursive=True)
    if len(pcs) != 1:
        raise SystemExit(f"check_docs: no kiln.pc under {prefix}")
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = os.path.dirname(pcs[0])
    env["KILN_CACHE_DIR"] = os.path.join(tmp, "cache")
    env.pop("LD_LIBRARY_PATH", None)  # the README's line must be enough
    if san:  # the library is instrumented: so must the programs be
        shim = os.path.join(tmp, "shim")
        os.makedirs(shim)
        real = shutil.which("cc")
        with open(os.path.join(shim, "cc"), "w") as f:
            f.write(f'#!/bin/sh\nexec {shlex.quote(real)} -fsanitize={shlex.quote(san)} "$@"\n')
        os.chmod(os.path.join(shim, "cc"), 0o755)
        env["PATH"] = shim + os.pathsep + env["PATH"]
    return prefix, env


def check_help(root, prefix, env):
    """`kiln --help` names the installed docs/environment.md, and it is there."""
    r = subprocess.run([os.path.join(prefix, "bin", "kiln"), "--help"], env=env, capture_output=True, text=True)
    m = re.search(r"see (\S*environment\.md)", r.stdout)
    if r.returncode != 0 or not m:
        return [f"kiln --help: exit {r.returncode}, no `see .../environment.md` in:\n{r.stdout}{r.stderr}"]
    path = m.group(1)
    if not os.path.isabs(path) or not os.path.realpath(path).startswith(os.path.realpath(prefix) + os.sep):
        return [f"kiln --help names {path}, not a file of the install {prefix}"]
    if not os.path.isfile(path) or open(path).read() != open(os.path.join(root, "docs", "environment.md")).read():
        return [f"kiln --help names {path}, which is not the installed docs/environment.md"]
    return []


def report(ck, extra):
    c = ck.counts
    print(f"check_docs: {c['program']} programs run ({c['output']} outputs checked), {c['no-run']} built only, "
          f"{c['fragment']} fragments built in wrappers ({c['fragment-run']} run), {c['excerpt']} excerpts found, "
          f"{len(ck.pseudo)} pseudo-code blocks" + (": " + ", ".join(ck.pseudo) if ck.pseudo else ""))
    fails = extra + ck.failures
    for f in fails:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if fails else 0


def self_test(root, prefix, env, tmp, line):
    """Each bad case alone must fail the check; the good ones must pass."""
    prog = '#include <kiln/kiln.h>\n#include <stdio.h>\nint main(void) {\n  printf("%g\\n", ' \
           'kiln_item_f64(kiln_sum(kiln_arange(KILN_F32, 1, 5, 1), 0, NULL, false)));\n' \
           '  kiln_shutdown();\n  return 0;\n}\n'
    cases = {  # name -> (markdown, should pass)
        "good program and output": (f"```c\n{prog}```\n\n```output\n10\n```\n", True),
        "output with ellipses": (f"```c\n{prog}```\nIt prints:\n```output\n1...\n...\n```\n", True),
        "orphan output block": ("```output\n10\n```\n", False),
        "output after a fragment": ("```c wrap=self_test run\n(void)shape;\n```\n```output\n\n```\n", False),
        "program built only": ("```c no-run\nint main(void) { return 3; }\n```\n", True),
        "pseudo is counted": ("```c pseudo\nthis is not C;\n```\n", True),
        "good fragment": ("```c wrap=self_test run\nkiln_tensor t = kiln_ones(KILN_F32, 1, shape);\n...\n"
                          "(void)t;\n```\n", True),
        "untagged broken block": ("```c\nkiln_tensor t = kiln_relu(x);\n```\n", False),
        "program output differs": (f"```c\n{prog}```\n\n```output\n11\n```\n", False),
        "program fails at run time": ("```c\nint main(void) { return 3; }\n```\n", False),
        "unknown tag": ("```c wrapp=self_test\nint x;\n```\n", False),
        "missing wrapper": ("```c wrap=no_such_wrapper\nint x;\n```\n", False),
        "fragment with an undefined name": ("```c wrap=self_test\nkiln_tensor t = kiln_relu(x);\n```\n", False),
        "fragment with a sticky error, run": ("```c wrap=self_test run\n"
                                              "kiln_add(kiln_ones(KILN_F32, 1, shape), "
                                              "kiln_zeros(KILN_F32, 0, NULL));\n"
                                              "kiln_relu(kiln_ones(KILN_F32, 2, bad));\n```\n", False),
        "excerpt not in the file": ("```c excerpt=tests/install/prog.c\nprintf(\"%d\\n\", 386);\n```\n", False),
        "excerpt found": ("```c excerpt=tests/install/prog.c\nprintf(\"%g\\n\", v);  /* other comment */\n"
                          "...\nkiln_shutdown();\n```\n", True),
    }
    bad = []
    for i, (name, (md, ok)) in enumerate(cases.items()):
        d = os.path.join(tmp, f"self{i}")
        os.makedirs(d)
        p = os.path.join(d, "case.md")
        with open(p, "w") as f:
            f.write(f"# {name}\n\n{md}")
        ck = Checker(root, prefix, line, env, d)
        ck.check_files([p])
        passed = not ck.failures
        print(f"self-test: {name}: {'passes' if passed else 'fails'}"
              + ("" if passed else f" ({ck.failures[0].splitlines()[0]})"))
        if passed != ok:
            bad.append(f"self-test case '{name}' should {'pass' if ok else 'fail'} but "
                       f"{'passes' if passed else 'fails'}: {ck.failures}")
        if name == "pseudo is counted" and len(ck.pseudo) != 1:
            bad.append("self-test: the pseudo block was not counted")
        if name.startswith("good program") and ck.counts["output"] != 1:
            bad.append("self-test: the output block was not checked")
    for b in bad:
        print(f"FAIL {b}", file=sys.stderr)
    return 1 if bad else 0


def main(argv):
    st = argv[:1] == ["--self-test"]
    if st:
        argv = argv[1:]
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    build, root = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    san = argv[2] if len(argv) == 3 else ""
    tmp = tempfile.mkdtemp(prefix="kiln-docs.")
    try:
        prefix, env = install(build, tmp, san)
        line = readme_compile_line(root)
        print(f"check_docs: the README's compile line: {line}")
        if st:
            return self_test(root, prefix, env, tmp, line)
        extra = check_help(root, prefix, env)
        ck = Checker(root, prefix, line, env, tmp)
        ck.check_files([os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))))
        return report(ck, extra)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
