#!/usr/bin/env python3
"""posy's /embed_sparse against sentence-transformers' SparseEncoder on the
CPU, in the same run with the same threads.

The model has opensearch-neural-sparse-encoding-doc-v2-distill's shape (a
DistilBertForMaskedLM of distilbert-base's size with the bert-base-uncased
vocabulary: the default model's tokenizer; SpladePooling max, relu),
random weights with the vocabulary bias shifted down so that most entries
are zero, written into WORK_DIR.  Both sides encode the same passages of
20-80 words, 32 at a time:

  * sentence-transformers: SparseEncoder.encode(batch, batch_size=32), the
    model already loaded;
  * posy: one POST /embed_sparse of 32 passages to `posy serve --device
    cpu`, one request at a time from one client, timed end to end (HTTP,
    JSON, tokenization included).

Prints passages/s of each and the ratio, and checks the vectors: the
largest |posy - sentence-transformers| over every entry.  A measurement,
not a test.  Needs torch, transformers, sentence-transformers, requests
and a Release build of posy:

  python3 bench/splade_cpu.py BUILD_DIR [WORK_DIR] [--threads 2] [--batches 4] [--repeat 3]
"""
import argparse
import os
import random
import shutil
import sys
import time

import numpy as np
import requests
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from bench_cpu import WORDS, copy_default_tokenizer, report_median, report_round  # noqa: E402
from serve_util import Server  # noqa: E402


def build_model(d):
    import transformers as T
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    hf = d + "-hf"
    cfg = T.DistilBertConfig(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072,
                             max_position_embeddings=512)
    torch.manual_seed(1024)
    m = T.DistilBertForMaskedLM(cfg).eval()
    with torch.no_grad():
        m.vocab_projector.bias.sub_(2.0)
    m.save_pretrained(hf, safe_serialization=True)
    copy_default_tokenizer(hf)
    SparseEncoder(modules=[MLMTransformer(hf), SpladePooling("max")], device="cpu").save(d)
    shutil.rmtree(hf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("work", nargs="?", default="/tmp/posy-splade-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    d = os.path.join(a.work, "opensearch-distill-shape")
    os.makedirs(a.work, exist_ok=True)
    build_model(d)
    rng = random.Random(5)
    batches = [[" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))) for _ in range(32)]
               for _ in range(a.batches)]
    from sentence_transformers import SparseEncoder
    enc = SparseEncoder(d, device="cpu")
    enc.encode(batches[0][:4], batch_size=32)
    srv = Server(os.path.join(a.build, "posy"), d, "--device", "cpu", "--threads", str(a.threads))
    sess = requests.Session()
    n = 32 * len(batches)
    try:
        rows = []
        for r in range(a.repeat):
            t = time.perf_counter()
            ref = [enc.encode(b, batch_size=32, convert_to_tensor=True).to_dense().numpy() for b in batches]
            st = time.perf_counter() - t
            t = time.perf_counter()
            got = [sess.post(srv.url + "/embed_sparse", json={"inputs": b, "truncate": True}).json() for b in batches]
            posy = time.perf_counter() - t
            rows.append((st, posy))
            err = 0.0
            for g, f in zip(got, ref):
                v = np.zeros_like(f)
                for i, entries in enumerate(g):
                    for x in entries:
                        v[i, x["index"]] = x["value"]
                err = max(err, float(np.abs(v - f).max()))
            report_round(r, n, "passages", "/embed_sparse", st, posy, "value", err, prec=1)
        report_median(rows, n, "passages", f"{n} passages of 20-80 words, {a.threads} threads", prec=1)
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
