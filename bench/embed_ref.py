#!/usr/bin/env python3
"""Baselines for the sentence-embedding benchmark (bench/embed.c).

Usage: embed_ref.py MODEL_DIR SENTENCES_FILE THREADS BATCH

Embeds every line of SENTENCES_FILE with all-MiniLM-L6-v2 the ways people
do it on a CPU, each sorted by length and batched like `kiln embed` (so the
padding is the same), with THREADS threads, and prints one line per
baseline: "<name> <best ms of 3 runs> <version>":

  torch       transformers' BertModel in PyTorch eager, torch.inference_mode,
              tokenising excluded (kiln's figure excludes it too)
  st          sentence-transformers' encode (tokenising included, its own
              length sorting)
  ort         ONNX Runtime on the model exported with torch.onnx.export
              (tokenising excluded), what CPU deployments run

A baseline whose package is missing is left out. The embeddings of torch
and ort are checked against each other (cosine > 0.9999) so that a broken
export is not timed.
"""
import os
import sys
import time


def batches(tok, sentences, batch):
    order = sorted(range(len(sentences)), key=lambda i: len(tok(sentences[i])["input_ids"]))
    out = []
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        enc = tok([sentences[j] for j in idx], padding=True, truncation=True, max_length=256,
                  pad_to_multiple_of=8, return_tensors="np")
        out.append((idx, enc["input_ids"], enc["attention_mask"]))
    return out


def pool(h, mask):
    import numpy as np
    m = mask[..., None].astype(h.dtype)
    e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)


def best_of(fn, n=3):
    fn()  # warm-up
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return min(t)


def main():
    model_dir, path, threads, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(path, encoding="utf-8") as fh:
        sentences = [line.rstrip("\n") for line in fh]
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer
    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    bs = batches(tok, sentences, batch)
    ref = {}

    def run_torch():
        with torch.inference_mode():
            for idx, ids, mask in bs:
                h = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state
                for j, e in zip(idx, pool(h.numpy(), mask)):
                    ref[j] = e
    print("torch %.3f %s" % (best_of(run_torch), torch.__version__))

    try:
        from sentence_transformers import SentenceTransformer
        import sentence_transformers
        st = SentenceTransformer(model_dir, device="cpu")
        print("st %.3f %s" % (best_of(lambda: st.encode(sentences, batch_size=batch)),
                              sentence_transformers.__version__))
    except ImportError:
        pass

    try:
        import onnxruntime as ort
    except ImportError:
        return
    onnx_path = os.path.join(os.path.dirname(os.path.abspath(path)), "minilm.onnx")
    if not os.path.exists(onnx_path):
        ids0 = torch.from_numpy(bs[0][1])
        mask0 = torch.from_numpy(bs[0][2])
        torch.onnx.export(model, (ids0, mask0), onnx_path, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], opset_version=14,
                          dynamic_axes={"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "t"},
                                        "last_hidden_state": {0: "b", 1: "t"}})
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    got = {}

    def run_ort():
        for idx, ids, mask in bs:
            h = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            for j, e in zip(idx, pool(h, mask)):
                got[j] = e
    ms = best_of(run_ort)
    worst = min(float(np.dot(ref[j], got[j])) for j in ref)
    if worst < 0.9999:
        print("embed_ref.py: ONNX Runtime's embeddings disagree with PyTorch's (cosine %.6f)" % worst,
              file=sys.stderr)
        return
    print("ort %.3f %s" % (ms, ort.__version__))


if __name__ == "__main__":
    main()
