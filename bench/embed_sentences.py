#!/usr/bin/env python3
"""Write the sentence-embedding benchmark's input: N (default 256) sentences
of mixed length (4 to 120 words, uniform), words drawn with a fixed seed
from the alphabetic whole words of the model's vocab.txt, some with
punctuation. Usage: embed_sentences.py VOCAB OUT [N]"""
import random
import sys


def main():
    vocab, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    with open(vocab, encoding="utf-8") as fh:
        words = [w.strip() for w in fh if w.strip().isalpha() and w.strip().isascii() and len(w.strip()) > 1]
    r = random.Random(1234)
    with open(out, "w", encoding="utf-8") as fh:
        for _ in range(n):
            k = r.randint(4, 120)
            s = " ".join(r.choice(words) for _ in range(k))
            fh.write(s[0].upper() + s[1:] + r.choice([".", "!", "?", ", right?"]) + "\n")


if __name__ == "__main__":
    main()
