#!/usr/bin/env python3
"""Independent oracle for tests/unit/test_data.c (fashion_mnist_real).

Reads the Fashion-MNIST IDX files with Python's gzip/struct (no kiln code)
and prints the values the C test hard-codes: counts, the sum of all pixels,
the first label, a few pixels of the first image and per-class label counts.
Usage: python3 tests/data/fashion_mnist_oracle.py [/usr/share/datasets/fashion-mnist]
"""
import gzip, os, struct, sys

d = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"

def read(name):
    p = os.path.join(d, name)
    raw = gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
    magic, = struct.unpack(">I", raw[:4])
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, raw[4:4 + 4 * rank])
    return dims, raw[4 + 4 * rank:]

for split in ("train", "t10k"):
    idims, img = read(f"{split}-images-idx3-ubyte")
    ldims, lab = read(f"{split}-labels-idx1-ubyte")
    counts = [lab.count(bytes([c])) for c in range(10)]
    print(f"{split}: dims={idims} labels={ldims} pixel_sum={sum(img)} "
          f"first_labels={list(lab[:5])} img0[14*28+10..14]={list(img[14*28+10:14*28+15])} "
          f"img_last_sum={sum(img[-784:])} class_counts={counts}")
