#!/usr/bin/env python3
"""posy's /rerank against sentence-transformers' CrossEncoder on the CPU,
in the same run with the same threads.

The reranker has cross-encoder/ms-marco-MiniLM-L-6-v2's shape (a
BertForSequenceClassification of all-MiniLM-L6's size, one label, the
bert-base-uncased vocabulary: the default model's tokenizer), or with
--arch deberta mixedbread-ai/mxbai-rerank-xsmall-v1's (DeBERTa v3 xsmall:
12 layers of 384, 256 position buckets, shared position keys; the same
vocabulary instead of DeBERTa's own), or with --arch deberta1
cross-encoder/nli-deberta-base's (DeBERTa v1 base: 12 layers of 768, a
2 x 512 relative table, one label here), random weights, written into
WORK_DIR.  Both sides score the same queries, each
against 32 passages of 20-80 words:

  * sentence-transformers: CrossEncoder.predict(pairs, batch_size=32) with
    the sigmoid it applies to one-label models, the model already loaded;
  * posy: one POST /rerank a query (32 texts) to `posy serve --device cpu`,
    one request at a time from one client, timed end to end (HTTP, JSON,
    tokenization included).

Prints pairs/s of each and the ratio, and checks the scores: max |posy -
sentence-transformers| over every pair.  A measurement, not a test.
Needs torch, transformers, sentence-transformers, requests and a Release
build of posy:

  python3 bench/rerank_cpu.py BUILD_DIR [WORK_DIR] [--threads 2] [--queries 50] [--repeat 3] [--arch bert|deberta|deberta1]
"""
import argparse
import os
import random
import subprocess
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


def reranker_config(arch, hidden, layers, heads):
    """(config, class) of a one-label cross-encoder over the bert-base-uncased vocabulary (the default model's
    tokenizer), 512 positions, an MLP 4x wide: arch "bert" (ms-marco-MiniLM's family), "deberta" (DeBERTa v3:
    256 position buckets, shared position keys, LayerNormed relative table; mxbai-rerank-*-v1) or "deberta1"
    (DeBERTa v1: a 2 x 512 relative table; nli-deberta-base).  rerank_gpu.py draws its models here too."""
    import transformers as T
    sizes = dict(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                 intermediate_size=4 * hidden, max_position_embeddings=512, num_labels=1)
    if arch == "deberta":
        return T.DebertaV2Config(type_vocab_size=0, relative_attention=True, position_buckets=256,
                                 max_relative_positions=-1, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm",
                                 share_att_key=True, position_biased_input=False,
                                 **sizes), T.DebertaV2ForSequenceClassification
    if arch == "deberta1":
        return T.DebertaConfig(type_vocab_size=0, relative_attention=True, max_relative_positions=-1,
                               pos_att_type="c2p|p2c", position_biased_input=False,
                               **sizes), T.DebertaForSequenceClassification
    return T.BertConfig(**sizes), T.BertForSequenceClassification


def build_model(d, arch):
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    cfg, cls = reranker_config(arch, *{"bert": (384, 6, 12), "deberta": (384, 12, 6), "deberta1": (768, 12, 12)}[arch])
    torch.manual_seed(512)
    m = cls(cfg).eval()
    m.save_pretrained(d, safe_serialization=True)
    copy_default_tokenizer(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("work", nargs="?", default="/tmp/posy-rerank-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arch", choices=["bert", "deberta", "deberta1"], default="bert")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    d = os.path.join(a.work, {"bert": "ms-marco-minilm-shape", "deberta": "mxbai-rerank-xsmall-shape",
                              "deberta1": "nli-deberta-base-shape"}[a.arch])
    os.makedirs(d, exist_ok=True)
    build_model(d, a.arch)
    rng = random.Random(3)
    queries = [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))),
                [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 80))) for _ in range(32)])
               for _ in range(a.queries)]
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(d, device="cpu", max_length=512)
    ce.predict([(queries[0][0], t) for t in queries[0][1]], batch_size=32)
    srv = Server(os.path.join(a.build, "posy"), d, "--device", "cpu", "--threads", str(a.threads))
    sess = requests.Session()
    n_pairs = 32 * len(queries)
    try:
        rows = []
        for r in range(a.repeat):
            t = time.perf_counter()
            ref = [ce.predict([(q, x) for x in texts], batch_size=32) for q, texts in queries]
            st = time.perf_counter() - t
            t = time.perf_counter()
            got = []
            for q, texts in queries:
                body = sess.post(srv.url + "/rerank", json={"query": q, "texts": texts, "truncate": True}).json()
                s = np.zeros(len(texts))
                for x in body:
                    s[x["index"]] = x["score"]
                got.append(s)
            posy = time.perf_counter() - t
            rows.append((st, posy))
            err = max(float(np.abs(np.asarray(g) - np.asarray(f)).max()) for g, f in zip(got, ref))
            report_round(r, n_pairs, "pairs", "/rerank", st, posy, "score", err)
        report_median(rows, n_pairs, "pairs", f"{a.arch}, {a.queries} queries x 32 passages, {a.threads} threads")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
