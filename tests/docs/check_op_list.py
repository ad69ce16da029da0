#!/usr/bin/env python3
"""test_op_list: every tensor function of kiln's public headers appears in
docs/semantics.md's "Every op and its PyTorch equivalent" table.

The functions are the short spellings (`#define kiln_NAME(`) of
include/kiln/kiln.h, ops.def, nn.h, bert.h and dist.h; a binary op's `_s`/`_c`
forms are covered by its name. Lifecycle and query helpers that are not
tensor ops are listed in NOT_OPS. Usage: check_op_list.py [ROOT]"""
import re
import sys

NOT_OPS = {"kiln_init", "kiln_backward", "kiln_requires_grad", "kiln_grad", "kiln_keep"}
HEADERS = ["include/kiln/kiln.h", "include/kiln/ops.def", "include/kiln/nn.h", "include/kiln/bert.h",
           "include/kiln/dist.h"]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    names = set()
    for h in HEADERS:
        with open("%s/%s" % (root, h), encoding="utf-8") as fh:
            names |= set(re.findall(r"^#define (kiln_[a-z0-9_]+)\(", fh.read(), re.M))
    names = {n for n in names if not re.search(r"_[sc]$", n) or n[:-2] not in names} - NOT_OPS
    with open("%s/docs/semantics.md" % root, encoding="utf-8") as fh:
        doc = fh.read()
    start = doc.find("## Every op and its PyTorch equivalent")
    if start < 0:
        print("check_op_list: docs/semantics.md has no section 'Every op and its PyTorch equivalent'")
        return 1
    table = doc[start:]
    listed = set(re.findall(r"`(kiln_[a-z0-9_]+)`", table))
    missing = sorted(names - listed)
    for n in missing:
        print("check_op_list: %s (a public function) is not in docs/semantics.md's op table" % n)
    print("check_op_list: %d public functions, %d missing" % (len(names), len(missing)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
