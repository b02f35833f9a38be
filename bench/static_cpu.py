#!/usr/bin/env python3
"""posy against sentence-transformers on a StaticEmbedding model, text to
vector, on the CPU, in the same run with the same threads.

The model has static-retrieval-mrl-en-v1's shape (bert-base-uncased's
WordPiece vocabulary of 30522, 1024 dimensions, no Normalize), random
rows, saved by sentence-transformers 6 into WORK_DIR; the tokenizer is
the default model's (the same vocabulary).  Both sides embed the same
corpus of one-sentence texts:

  * sentence-transformers: SentenceTransformer.encode (its tokenizer's
    encode_batch, then torch's EmbeddingBag), timed after a warm-up, the
    model already loaded;
  * posy: `posy embed --input corpus.txt --output vectors.npy`, the whole
    process (start, load, tokenize, embed, write) timed, so the ratio is
    conservative; the same command on one text gives the start-up alone,
    printed beside it.

Prints texts/s of each and the ratio, and checks the vectors: min cosine
over the corpus (the CPU bar, 0.99999).  A measurement, not a test: it
asserts nothing about speed.  Needs torch, sentence-transformers and a
Release build of posy:

  python3 bench/static_cpu.py BUILD_DIR [WORK_DIR] [--threads 2] [--texts 20000] [--repeat 3]
"""
import argparse
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_cpu import WORDS  # noqa: E402


def build_model(d):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer
    if os.path.exists(os.path.join(d, "modules.json")):
        return
    tok = Tokenizer.from_file(os.path.join(ROOT, "models", "all-MiniLM-L6-v2", "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    torch.manual_seed(30522)
    w = torch.randn(tok.get_vocab_size(), 1024) * 0.1
    SentenceTransformer(modules=[StaticEmbedding(tok, embedding_weights=w)], device="cpu").save(d)


def corpus(n, seed=11):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 30)))
        out.append(s[0].upper() + s[1:] + ".")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("work", nargs="?", default="/tmp/posy-static-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--texts", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    os.makedirs(a.work, exist_ok=True)
    d = os.path.join(a.work, "static-mrl-shape")
    build_model(d)
    texts = corpus(a.texts)
    path = os.path.join(a.work, "corpus.txt")
    open(path, "w").write("\n".join(texts) + "\n")
    one = os.path.join(a.work, "one.txt")
    open(one, "w").write(texts[0] + "\n")
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(d, device="cpu")
    m.encode(texts[:1000], batch_size=256)
    posy = os.path.join(a.build, "posy")
    out = os.path.join(a.work, "vectors.npy")

    def run_posy(inp):
        t = time.perf_counter()
        subprocess.run([posy, "embed", "--model", d, "--device", "cpu", "--threads", str(a.threads), "--input", inp,
                        "--output", out], check=True, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t

    rows = []
    for r in range(a.repeat):
        t = time.perf_counter()
        ref = m.encode(texts, batch_size=256, convert_to_numpy=True)
        st = time.perf_counter() - t
        start = run_posy(one)
        whole = run_posy(path)
        rows.append((st, whole, start))
        print(f"round {r}: sentence-transformers {a.texts / st:,.0f} texts/s, posy (whole process) "
              f"{a.texts / whole:,.0f} texts/s, ratio {st / whole:.2f}x; posy start-up {start * 1e3:.0f} ms", flush=True)
    v = np.load(out).astype(np.float64)
    ref = ref.astype(np.float64)
    cos = (v * ref).sum(1) / np.linalg.norm(v, axis=1) / np.linalg.norm(ref, axis=1)
    st, whole, start = (float(np.median([x[i] for x in rows])) for i in range(3))
    print(f"median of {a.repeat}: sentence-transformers {a.texts / st:,.0f} texts/s, posy {a.texts / whole:,.0f} "
          f"texts/s (whole process; start-up {start * 1e3:.0f} ms), posy / sentence-transformers "
          f"{st / whole:.2f}x; min cosine {cos.min():.7f} over {a.texts} texts, {a.threads} threads")
    return 0 if cos.min() >= 0.99999 else 1


if __name__ == "__main__":
    sys.exit(main())
